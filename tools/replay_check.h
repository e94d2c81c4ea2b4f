/*
 * replay_check.h - play a trace against an in-process cm_proto engine
 * configured as side S, in the trace's virtual time: the other side's MADs
 * go in at their time stamps, the user calls S made are inferred from what
 * S sent (a REP means S accepted, an RTU that it confirmed, ...), timers
 * run in between, and every MAD the engine sends is paired with the one S
 * sent in the trace and compared field by field (replay_diff.h).
 *
 * mutate uses the same player with hooks that see each fed MAD and each
 * event, and with the end-of-run drain that finds hangs and leaks.
 */
#ifndef USCM_REPLAY_CHECK_H
#define USCM_REPLAY_CHECK_H

#include "cm_proto/cmp_engine.h"
#include "tools/replay_diff.h"
#include "tools/replay_trace.h"

#define RP_MAX_LISTEN 32

struct rp_opts {
	uint64_t tol_ns;            /* timing tolerance, absolute (default 50 ms) */
	unsigned tol_pct;           /* plus this % of the time since the connection began (5) */
	uint64_t listen[RP_MAX_LISTEN]; /* --listen: services S is known to serve */
	unsigned nlisten;
	int ca_ack_delay;           /* S's CA ACK delay; -1: 15 (uscm, sim, many HCAs) */
	int packet_life_time;       /* -1: from the trace's PathRecord, else inferred */
	uint64_t max_timer_ns, timewait_ns; /* engine settings, as USCM_* */
	int no_mra_on_dup;          /* settings.mra_on_duplicate_req = 0 */
	uint64_t seed;
	int verbose;                /* engine trace records on stderr */
};
void rp_opts_default(struct rp_opts *o);

/* Hooks for mutate (all may be NULL). */
struct rp_hooks {
	void *ctx;
	/* Called after feeding trace MAD i (dir RP_TO_S): the events it caused. */
	void (*on_event)(void *ctx, size_t i, const struct cmp_event *ev);
	/* Called once after the trace, when the engine has drained. */
	void (*on_end)(void *ctx, struct cmp_engine *e);
};

struct rp_result {
	struct cmp_stats stats;           /* at the very end */
	struct cmp_stats stats_trace;     /* when the trace ended */
	size_t conns_left, timers_left;   /* after destroy + every timer */
	size_t timers_after_trace;        /* timers pending once all timeouts ran, before destroy */
	unsigned stuck;                   /* connections then in a state only a timer ends, */
	char stuck_state[24];             /* ... with no timer left (the first one's state) */
	unsigned played_conns, skipped_conns;
	unsigned after_end_tx;            /* MADs the engine sent after the trace ended */
	unsigned destroys_inferred;       /* ids S's application destroyed (docs/replay.md) */
};

/* Plays t (bound to a side) and adds differences to r. 0, or -1 when the
 * engine cannot be created. When the trace shows S's application destroying
 * ids, the trace is played again with those destroys: the hooks then see
 * the events of more than one run, r and res are the last run's. */
int rp_check_run(const struct rp_trace *t, const struct rp_opts *o, struct rp_report *r,
		 const struct rp_hooks *h, struct rp_result *res);

#endif
