/*
 * replay_mutate.h - replay with one seeded mutation per run (field values,
 * reserved bits, header, lengths, comm IDs, duplication, reordering, loss)
 * of the MADs the other side sent, against the in-process engine (each run
 * in a forked child, so a crash is a finding, not the end) or a live peer,
 * and report each run that made the peer crash, hang, leak or accept what
 * it must reject. Run I of seed N is always the same mutation: `--only I`
 * replays one finding alone.
 */
#ifndef USCM_REPLAY_MUTATE_H
#define USCM_REPLAY_MUTATE_H

#include <stdio.h>

#include "tools/replay_check.h"
#include "tools/replay_live.h"

struct rp_mutate_opts {
	uint64_t seed;
	unsigned count;     /* runs */
	int only;           /* -1: all, else that run alone */
	int live;
	int json;
	int canary;         /* a no-op mutation that claims it must be rejected:
	                     * checks that acceptance is detected */
	int peer_pid;       /* live: the peer's process, watched for a crash (0: none) */
	struct rp_live_opts lo;
};

/* Exit status: 0 no finding, 1 findings. */
int rp_mutate_run(const struct rp_trace *t, const struct rp_side *s, const struct rp_opts *o,
		  const struct rp_mutate_opts *mo, FILE *out);

#endif
