/*
 * replay_live.h - play side S of a trace against a live peer through the
 * real libibumad API (umad/um_transport.h), rewriting the identifiers the
 * peer chooses (its comm IDs, QPN, PSN, TIDs) and the addresses (LIDs,
 * GIDs) to the live fabric's, and compare the peer's answers with the
 * trace's (replay_diff.h, the same mapping rules as check).
 */
#ifndef USCM_REPLAY_LIVE_H
#define USCM_REPLAY_LIVE_H

#include "tools/replay_check.h"

struct rp_live_opts {
	const char *node;   /* fabric node to act as (sets USCM_SIM_NODE) */
	const char *ca;     /* CA name (default: the first) */
	int port;
	int timeout_ms;     /* how long to wait for an answer the trace has */
	const char *peer;   /* the live peer's address: lid:N or ip:A.B.C.D (default: the
	                     * other node of a two-node sim, from its hosts file) */
};

/* 0 when it ran (differences in r), -1 when the port could not be opened
 * or the peer not found (message on stderr). */
int rp_live_run(const struct rp_trace *t, const struct rp_side *s, const struct rp_opts *o,
		const struct rp_live_opts *lo, struct rp_report *r);

#endif
