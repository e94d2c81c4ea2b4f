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
	const char *peer;   /* the live peer's address: lid:N, gid:G or ip:A.B.C.D
	                     * (default: the trace's own peer address) */
	/* Fresh identities for S per run (mutate --live plays a trace many
	 * times against one peer): S's comm IDs are XORed with id_xor, its QPN
	 * has qpn_add added, in what is sent and in what the answers name. */
	uint32_t id_xor, qpn_add;
	int quiet;          /* no summary line on stderr */
	/* Every decoded CM MAD the live peer sends (may be NULL). */
	void (*on_answer)(void *ctx, const struct cmp_cm_msg *cm);
	void *ctx;
	unsigned paired;    /* out: answers paired with the trace */
};

/* 0 when it ran (differences in r), -1 when the port could not be opened
 * or the peer not found (message on stderr). */
int rp_live_run(const struct rp_trace *t, const struct rp_side *s, const struct rp_opts *o,
		struct rp_live_opts *lo, struct rp_report *r);

#endif
