/*
 * replay_diff.h - what uscm-replay reports: the list of differences between
 * what a peer (the in-process engine, or a live peer) sent and what the
 * trace says that side sent, the mapping of values each side legitimately
 * chooses, and the field-by-field comparison of two CM MADs that walks the
 * codec's own field tables (cmp_cm_layout). Shared by check, live and
 * mutate. Every class of difference is described in docs/replay.md.
 */
#ifndef USCM_REPLAY_DIFF_H
#define USCM_REPLAY_DIFF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cm_proto/cmp_cm.h"

enum rp_diff_kind {
	RP_D_FIELD,     /* a field's value differs */
	RP_D_TIMING,    /* the MAD was sent, but not when the trace says */
	RP_D_MISSING,   /* the trace has it, the peer never sent it */
	RP_D_EXTRA,     /* the peer sent it, the trace does not have it */
	RP_D_MAPPING,   /* a chosen value maps inconsistently (engine<->trace) */
	RP_D_SERVICE,   /* a connection to a service uscm is not told about */
	RP_D_UNDECODED, /* a trace MAD uscm cannot decode: not played */
	RP_D_ACTION,    /* the user call the trace implies failed */
	RP_D_CRASH,     /* mutate: the peer crashed */
	RP_D_HANG,      /* mutate: a connection / timer never finished */
	RP_D_LEAK,      /* mutate: connections or timers left after the end */
	RP_D_ACCEPTED,  /* mutate: something that must be rejected was accepted */
	RP_D_DUPLICATE, /* explained: S's MAD twice in the trace, faster than any timer */
	RP_D_KINDS
};
const char *rp_diff_kind_str(enum rp_diff_kind k);
struct rp_report;
/* 1 for the classes that are explained (do not fail check). */
int rp_diff_explained(enum rp_diff_kind k);
/* Differences that are not explained. */
size_t rp_report_unexplained(const struct rp_report *r);

struct rp_diff {
	enum rp_diff_kind kind;
	uint64_t frame;          /* trace frame (0: none) */
	uint64_t t_trace, t_peer;/* ns since the first MAD; 0: none */
	char msg[16];            /* message type */
	char field[48];
	char trace_val[100], peer_val[100];
	char reason[200];
};

/* The fields the player took from the trace as its user calls' inputs
 * (what S's application and device chose), not produced by the engine and
 * so not checked: "REQ.service_id", ... */
#define RP_FROM_MAX 64

struct rp_report {
	struct rp_diff *d;
	size_t n, cap;
	unsigned counts[RP_D_KINDS];
	uint64_t t0;             /* trace time origin (ns) */
	char from_trace[RP_FROM_MAX][48];
	size_t nfrom;
};

void rp_report_init(struct rp_report *r, uint64_t t0);
void rp_report_free(struct rp_report *r);
/* Adds one difference (fmt gives the reason). */
struct rp_diff *rp_report_add(struct rp_report *r, enum rp_diff_kind k, uint64_t frame,
			      uint16_t attr, const char *field, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
/* Notes that a message's fields (a space-separated list) were taken from
 * the trace; each MSG.field once, in the order first noted. */
void rp_report_from_trace(struct rp_report *r, uint16_t attr, const char *fields);
/* Text: one line per difference, a summary, then the fields taken from
 * the trace. JSON: one object ("from_trace": the fields). */
void rp_report_print(const struct rp_report *r, FILE *out, const char *who);
void rp_report_json(const struct rp_report *r, FILE *out, const char *mode, const char *side);

/* ---- chosen values: learned pairs (peer value <-> trace value) --------- */
enum rp_map_kind { RP_M_COMM_ID, RP_M_CA_GUID, RP_M_TID, RP_M_QPN, RP_M_PSN, RP_M_PORT, RP_M_KINDS };

struct rp_map {
	struct { uint64_t peer, trace; } *p[RP_M_KINDS];
	size_t n[RP_M_KINDS], cap[RP_M_KINDS];
};
void rp_map_free(struct rp_map *m);
/* Learns peer<->trace. 0 when new or consistent, -1 when either value is
 * already paired with another (TIDs never conflict: transports rewrite
 * their upper half, as the kernel's umad agent IDs do). */
int rp_map_learn(struct rp_map *m, enum rp_map_kind k, uint64_t peer, uint64_t trace);
/* 1 and *out when known. */
int rp_map_to_peer(const struct rp_map *m, enum rp_map_kind k, uint64_t trace, uint64_t *out);
int rp_map_to_trace(const struct rp_map *m, enum rp_map_kind k, uint64_t peer, uint64_t *out);

/* Compares `peer` (what the engine / live peer sent) with `trace` (what the
 * trace says it sent), both raw 256-byte CM MADs of the same attribute:
 * the header and every row of the message's codec table, reserved rows
 * included, learning the chosen values into map. Each difference goes to r
 * with the trace's frame. Returns the number of differences added. */
unsigned rp_compare(struct rp_report *r, struct rp_map *map, const uint8_t *peer,
		    const uint8_t *trace, uint64_t frame);

#endif
