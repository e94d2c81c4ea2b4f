/* um_trace.c - USCM_TRACE (see um_trace.h). */
#include <stdlib.h>
#include <string.h>

#include "umad/um_trace.h"

static void trace_text(void *ctx, const struct cmp_trace_rec *r)
{
	(void)ctx;
	cmp_trace_print(stderr, r);
}

static void trace_json(void *ctx, const struct cmp_trace_rec *r)
{
	(void)ctx;
	cmp_trace_json(stderr, r);
}

int um_trace_from_env(struct cmp_settings *s)
{
	const char *v = getenv("USCM_TRACE");

	if (!v || !*v || !strcmp(v, "0"))
		return 0;
	s->trace = !strcmp(v, "json") ? trace_json : trace_text;
	s->trace_ctx = NULL;
	return 1;
}
