/*
 * uscm_ladder.h - sequence ("ladder") diagrams of a MAD trace, for
 * `uscm-decode --ladder` (text) and `--ladder-svg OUT.svg` (SVG).
 *
 * The MADs of a trace are put into groups:
 *   connection  CM REQ/MRA/REJ/REP/RTU/DREQ/DREP/LAP/APR, joined by their
 *               comm IDs: a local comm ID belongs to the sender's endpoint,
 *               a remote one to the receiver's, and every message links the
 *               two it carries (so REQ -> REP -> RTU -> DREQ -> DREP of one
 *               connection, retries included, are one group);
 *   SIDR        SIDR_REQ / SIDR_REP by (requester endpoint, request ID);
 *   SA          one group per SA transaction: (requester endpoint, low 32
 *               bits of the TID; the MAD layer rewrites the upper 32 bits);
 *   stray       everything else: other classes and attributes, CM messages
 *               with no comm ID, MADs too broken to place.
 * Groups are listed in the order of their first MAD; stray last.
 *
 * Inside a group, one lane per endpoint (LID or IP address, with the GID
 * when a GRH is seen, and the QP number) and one arrow per MAD, with:
 *   retry #n     a MAD with the same sender, receiver, class, method,
 *                attribute and TID as an earlier one in the group, with the
 *                time since that previous send;
 *   gap          the time between two MADs of the group is >= the group's
 *                threshold: the CM response timeout the connection's REQ
 *                announces (the smaller of its local / remote CM response
 *                timeouts, 4.096 us * 2^x), else 100 ms, or --gap MS;
 *   no answer    a request (REQ, REP, DREQ, LAP, SIDR_REQ, SA Get/Set/...)
 *                after which the group holds neither its answer nor a
 *                retry of it;
 *   malformed    the codec's first error; bad ICRC / VCRC.
 */
#ifndef USCM_LADDER_H
#define USCM_LADDER_H

#include <stdint.h>
#include <stdio.h>

#include "umad/um_pcap.h"

enum ladder_kind { LADDER_CONN, LADDER_SIDR, LADDER_SA, LADDER_STRAY };

struct ladder_lane {
	char addr[64];  /* "LID 2" or "127.10.0.1" / IPv6 */
	char gid[48];   /* IB with a GRH: the GID; else "" */
	uint32_t qpn;
};

struct ladder_mad {
	uint64_t frame_no, ts_ns;
	unsigned src, dst;          /* lane indexes (ladder-wide) */
	uint8_t mgmt_class, method;
	uint16_t attr_id;
	uint64_t tid;
	char name[40];              /* "REQ", "SA Get PathRecord", ... */
	char fields[192];           /* the key fields, as text */
	int malformed;
	char why[128];              /* malformed: the codec's first error */
	int bad_crc;
	/* grouping */
	int kind;                   /* enum ladder_kind */
	uint32_t lcid, rcid;        /* CM: comm IDs; SIDR: request ID in lcid */
	int is_request;             /* expects an answer */
	unsigned group;
	unsigned retry;             /* 0, or n for "retry #n" */
	uint64_t retry_gap_ns;      /* since the previous send of it */
	uint64_t gap_ns;            /* since the group's previous MAD, when >= threshold */
	int no_answer;
	int8_t resp_timeout;        /* REQ: min CM response timeout exponent; else -1 */
};

struct ladder_group {
	int kind;
	char title[224];
	unsigned *mads;             /* indexes into ladder.mads, in time order */
	unsigned n, cap;
	unsigned *lanes;            /* ladder lane indexes, in order of appearance */
	unsigned nlanes;
	uint64_t gap_threshold_ns;
};

struct ladder {
	struct ladder_lane *lanes;
	unsigned nlanes, lanes_cap;
	struct ladder_mad *mads;
	unsigned nmads, mads_cap;
	struct ladder_group *groups;
	unsigned ngroups;
	uint64_t t0;                /* first time stamp */
	int abs_time;
	uint64_t gap_ns;            /* --gap; 0: per group as above */
};

/* gap_ns: 0 for the per-group rule. abs_time: absolute time stamps. */
struct ladder *ladder_new(uint64_t gap_ns, int abs_time);
/* Adds one MAD (in file order). 0, or -1 out of memory. */
int ladder_add(struct ladder *l, const struct um_pcap_mad *p);
/* Groups, retries, gaps, answers. 0, or -1 out of memory. */
int ladder_build(struct ladder *l);
void ladder_text(const struct ladder *l, FILE *out);
void ladder_svg(const struct ladder *l, FILE *out);
void ladder_free(struct ladder *l);

#endif
