/*
 * netsim.h - a deterministic network simulation for the sans-IO CM engine.
 *
 * N engines (node i has LID i+1) are connected by an in-process network
 * driven by virtual time: every MAD an engine hands out becomes an
 * in-flight packet with a delivery time, and a discrete-event loop always
 * jumps to the earliest of (next delivery, any engine's next timer, next
 * scripted application action). A seeded fault model loses, duplicates,
 * reorders and over-delays packets, takes links down for intervals and
 * restarts nodes. Scripted applications drive the engines as rdma_cm would
 * (connect, accept, reject, MRA, RTU, notify, disconnect, SIDR, destroy,
 * abandon at random points).
 *
 * Everything an application sees (its calls with their return values, the
 * events it polls) is recorded in a log; an independent checker then walks
 * the log at quiescence and verifies the invariants listed in netsim.c
 * (per-connection event grammar, exactly one terminal event per call,
 * timer deadlines, consistent outcome pairs across the two sides, exact
 * outcomes for fault-free attempts). Engine-side audits (no connection or
 * timer left, empty indexes, stats) run at quiescence too.
 *
 * One seed fixes everything: same seed, same trace, same hash.
 */
#ifndef USCM_NETSIM_H
#define USCM_NETSIM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cm_proto/cmp_engine.h"

/* Fault profiles; a scenario takes one from its seed unless forced. */
enum ns_profile {
	NS_PROF_AUTO = -1,
	NS_PROF_CLEAN = 0,   /* no faults at all: outcomes are predicted exactly */
	NS_PROF_LOSS,        /* random packet loss */
	NS_PROF_DUP,         /* duplication */
	NS_PROF_REORDER,     /* extra random delay below the timeouts */
	NS_PROF_DELAY,       /* occasional delay beyond the response timeouts */
	NS_PROF_PARTITION,   /* links down for intervals */
	NS_PROF_RESTART,     /* nodes freed and re-created mid-scenario */
	NS_PROF_MIXED,       /* a little of everything */
	NS_PROF_COUNT,
	NS_PROF_CUSTOM = 100 /* faults given explicitly (ns_opts.faults) */
};
const char *ns_profile_str(int p);
/* Name or number -> profile, or -2 when unknown. */
int ns_profile_parse(const char *s);

#define NS_MAX_PART 8
#define NS_MAX_RESTART 8

struct ns_partition {
	int a, b;            /* the link a<->b is down; b < 0: every link of a */
	cmp_time start, len; /* virtual time, ns */
};

struct ns_restart {
	int node;
	cmp_time at;
};

struct ns_faults {
	double loss;         /* probability per packet, 0..1 */
	double dup;          /* probability that a packet is delivered twice */
	double reorder;      /* probability of an extra delay up to reorder_ns */
	cmp_time reorder_ns;
	double delay;        /* probability of a delay beyond the timeouts */
	cmp_time delay_ns;   /* 0: derived from the timeouts of the scenario */
	int npart;
	struct ns_partition part[NS_MAX_PART];
	int nrestart;
	struct ns_restart restart[NS_MAX_RESTART];
	/* Only with NS_PROF_CUSTOM: draw this many random partitions/restarts
	 * (on top of the explicit ones). */
	int rand_part, rand_restart;
};

struct ns_opts {
	uint64_t seed;
	int profile;          /* enum ns_profile; NS_PROF_AUTO: from the seed */
	struct ns_faults faults; /* used when profile == NS_PROF_CUSTOM */
	int nodes;            /* 0: from the seed (2..5) */
	int attempts;         /* 0: from the seed */
	FILE *trace;          /* non-NULL: every MAD, state change, call, event */
	int trace_json;       /* state changes as JSON lines (cmp_trace_json) */
	int max_report;       /* violations kept in ns_result.report (0: 8) */
};

/* Per-class counters of what the scenario did (for summaries). */
struct ns_counts {
	uint64_t mads, delivered, lost, duplicated, reordered, delayed, partitioned;
	uint64_t attempts, sidr, clean_attempts, established, rejected, timeouts;
	uint64_t ghosts, abandoned, crashed_recs, restarts, events, calls, probes;
	uint64_t rx_stray, rx_duplicate, rx_mismatch, rx_stale, retransmits;
	uint64_t mra_capped;     /* MRA waits the engine's max_timer_ns cut short */
	uint64_t timers_checked; /* deadlines the checker verified (C3) */
};

struct ns_result {
	int violations;
	char report[2048];    /* the first violations, one per line */
	uint64_t hash;        /* of the whole trace */
	int profile, nodes, attempts;
	cmp_time end_time;    /* virtual time at quiescence */
	struct ns_counts n;
};

/* Runs one scenario to quiescence and checks it. Returns the number of
 * violations (0: all invariants hold). */
int ns_run(const struct ns_opts *o, struct ns_result *r);

/* ---- the pieces, for tests that inspect or tamper with a run ------------- */

enum ns_call {
	NS_C_CONNECT, NS_C_ACCEPT, NS_C_REJECT, NS_C_MRA, NS_C_RTU, NS_C_NOTIFY,
	NS_C_DISCONNECT, NS_C_SIDR_REQ, NS_C_SIDR_REP, NS_C_DESTROY, NS_C_COUNT
};
const char *ns_call_str(int c);

enum ns_log_kind { NS_L_CALL, NS_L_EVENT, NS_L_CRASH };

/* One thing an application did or saw. */
struct ns_logent {
	cmp_time t;
	int32_t rec;      /* connection record (-1 for NS_L_CRASH) */
	int16_t node;
	uint8_t kind;     /* enum ns_log_kind */
	uint8_t code;     /* enum ns_call or enum cmp_event_type */
	int32_t ret;      /* call: return value (0 / -errno); event: REJ reason or SIDR status */
	uint32_t aux;     /* MRA_RECEIVED: service timeout */
};

struct ns_sim;
struct ns_sim *ns_sim_new(const struct ns_opts *o);
/* Runs to quiescence with the online checks (API results, engine audits). */
void ns_sim_run(struct ns_sim *s);
/* The log checker (pure: may be called again after editing the log).
 * Returns its number of violations and appends them to the report. */
int ns_sim_check(struct ns_sim *s);
void ns_sim_result(const struct ns_sim *s, struct ns_result *r);
void ns_sim_free(struct ns_sim *s);

size_t ns_log_len(const struct ns_sim *s);
const struct ns_logent *ns_log_at(const struct ns_sim *s, size_t i);
/* Inserts e before index i (i == len: append). 0, or -1. */
int ns_log_insert(struct ns_sim *s, size_t i, const struct ns_logent *e);
void ns_log_remove(struct ns_sim *s, size_t i);
/* Resets the violation count and report (before re-running the checker). */
void ns_reset_violations(struct ns_sim *s);

#endif
