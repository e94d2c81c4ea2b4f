/* USCM_TRACE: the environment switch and both output formats. */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <stdlib.h>

#include "umad/um_trace.h"

Test(um_trace, env_selects_format, .init = cr_redirect_stderr)
{
	struct cmp_settings s;
	struct cmp_trace_rec r = { .time = 1500000000ULL, .local_id = 0xabc, .remote_id = 0xdef,
				   .from = CMP_REQ_SENT, .to = CMP_REP_RCVD, .cause = "recv REP" };

	cmp_settings_default(&s);
	unsetenv("USCM_TRACE");
	cr_assert_eq(um_trace_from_env(&s), 0);
	cr_assert_null(s.trace);
	setenv("USCM_TRACE", "0", 1);
	cr_assert_eq(um_trace_from_env(&s), 0);
	setenv("USCM_TRACE", "1", 1);
	cr_assert_eq(um_trace_from_env(&s), 1);
	s.trace(s.trace_ctx, &r);
	setenv("USCM_TRACE", "json", 1);
	cr_assert_eq(um_trace_from_env(&s), 1);
	s.trace(s.trace_ctx, &r);
	fflush(stderr);
	cr_assert_stderr_eq_str(
		"1.500000000 cm 00000abc/00000def REQ_SENT -> REP_RCVD: recv REP\n"
		"{\"time_ns\": 1500000000, \"name\": \"cm:state_updated\", \"data\": {\"local_id\": 2748, "
		"\"remote_id\": 3567, \"old\": \"REQ_SENT\", \"new\": \"REP_RCVD\", \"trigger\": \"recv REP\"}}\n");
}
