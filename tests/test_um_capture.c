/* test_um_capture.c - USCM_PCAP's file name pattern (um_capture_expand):
 * %p, %h and %% as in core_pattern, so one exported variable can name a
 * file per process. (The capture itself: tests/lib/test_lib_capture.c.) */
#include <criterion/criterion.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests/test_fixtures.h"
#include "umad/um_capture.h"

static const char *expand(const char *pattern)
{
	static char out[PATH_MAX];

	cr_assert_eq(um_capture_expand(pattern, out, sizeof(out)), 0, "%s: %s", pattern,
		     strerror(errno));
	return out;
}

Test(um_capture, pid_host_and_percent)
{
	char host[256] = "", want[PATH_MAX];

	cr_assert_eq(gethostname(host, sizeof(host) - 1), 0);
	snprintf(want, sizeof(want), "/tmp/cm.%s.%ld.pcap", host, (long)getpid());
	cr_expect_str_eq(expand("/tmp/cm.%h.%p.pcap"), want);
	snprintf(want, sizeof(want), "%ld%ld", (long)getpid(), (long)getpid());
	cr_expect_str_eq(expand("%p%p"), want);
	cr_expect_str_eq(expand("100%%.pcap"), "100%.pcap");
	cr_expect_str_eq(expand("%%p"), "%p", "%%%% is a '%%', not the start of %%p");
	cr_expect_str_eq(expand("/tmp/plain.pcap"), "/tmp/plain.pcap");
}

/* Anything else is kept as written (a trailing '%' too). */
Test(um_capture, other_percent_sequences_are_kept)
{
	cr_expect_str_eq(expand("a%tb%"), "a%tb%");
	cr_expect_str_eq(expand("%"), "%");
	cr_expect_str_eq(expand(""), "");
}

/* A name that does not fit is refused, never cut short. */
Test(um_capture, too_long_is_refused)
{
	char out[8];

	errno = 0;
	cr_assert_eq(um_capture_expand("abcdefgh", out, sizeof(out)), -1);
	cr_assert_eq(errno, ENAMETOOLONG);
	cr_assert_eq(um_capture_expand("abcdefg", out, sizeof(out)), 0);
	cr_assert_str_eq(out, "abcdefg");
}
