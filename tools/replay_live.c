/*
 * replay_live.c - placeholder until the live player lands.
 */
#include "tools/replay_live.h"

#include <errno.h>
#include <stdio.h>

int rp_live_run(const struct rp_trace *t, const struct rp_side *s, const struct rp_opts *o,
		const struct rp_live_opts *lo, struct rp_report *r)
{
	(void)t; (void)s; (void)o; (void)lo; (void)r;
	fprintf(stderr, "uscm-replay live: not implemented yet (ENOSYS)\n");
	errno = ENOSYS;
	return -1;
}
