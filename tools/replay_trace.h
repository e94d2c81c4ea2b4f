/*
 * replay_trace.h - a pcap trace as uscm-replay sees it: every MAD in file
 * order, decoded, with its direction relative to the chosen side S and the
 * connection it belongs to. Shared by check, live and mutate.
 *
 * Side syntax (docs/replay.md):
 *   lid:N        native IB: the port with LID N (decimal or 0x hex)
 *   gid:G        a GID in IPv6 notation; on RoCE also an IPv4 address
 *                (ip:A.B.C.D is the same as gid:::ffff:A.B.C.D)
 *   qpn:Q        the endpoint that sent a REQ or REP naming Q as its QPN
 */
#ifndef USCM_REPLAY_TRACE_H
#define USCM_REPLAY_TRACE_H

#include <stddef.h>
#include <stdint.h>

#include "cm_proto/cmp_cm.h"
#include "umad/um_pcap.h"

enum rp_dir { RP_OTHER = 0, RP_FROM_S = 1, RP_TO_S = 2 };

struct rp_mad {
	uint64_t frame;            /* 1-based pcap record number */
	uint64_t ts;               /* ns */
	struct um_frame_meta meta;
	uint8_t mad[CMP_MAD_SIZE];
	uint16_t len;              /* bytes handed to the peer: 256 (mutate shortens) */
	struct cmp_mad_hdr hdr;
	int is_cm;                 /* class 0x07 */
	int cm_ok;                 /* decoded: cm valid */
	struct cmp_cm_msg cm;
	enum rp_dir dir;
	int conn;                  /* index into rp_trace.conns, -1: none */
};

/* One connection: a REQ (or SIDR_REQ) and everything carrying its IDs. */
struct rp_conn {
	uint32_t active_id, passive_id; /* comm IDs (trace values; 0 = unknown) */
	int s_active;                   /* 1: S sent the REQ */
	uint64_t service_id;
	int sidr;
	size_t first;                   /* index of its first MAD */
};

struct rp_side {
	enum { RP_SIDE_LID, RP_SIDE_GID, RP_SIDE_QPN } kind;
	uint16_t lid;
	uint8_t gid[16];
	uint32_t qpn;
	int have_lid, have_gid;  /* what the address resolved to */
	char text[80];
};

struct rp_trace {
	struct rp_mad *m;
	size_t n;
	struct rp_conn *conns;
	size_t nconns;
	int link;                /* UM_LINK_IB / UM_LINK_ROCEV2 of the first MAD */
	struct um_pcap_stats stats;
	int truncated;           /* the file broke off (error kept in err) */
	char err[256];
};

/* Reads every MAD of path. 0, or -1 with a message in t->err (nothing
 * kept). A truncated file keeps what came before and sets t->truncated. */
int rp_trace_load(const char *path, struct rp_trace *t);
void rp_trace_free(struct rp_trace *t);

/* Parses the side syntax. 0 or -1 (message in err). */
int rp_side_parse(const char *text, struct rp_side *s, char *err, size_t errlen);
/* Turns a QPN or GID side into the address its MADs carry, marks each MAD's
 * direction and groups CM MADs into connections. 0, or -1 when S sends or
 * receives no CM MAD in the trace (message in err). */
int rp_trace_bind(struct rp_trace *t, struct rp_side *s, char *err, size_t errlen);

/* Endpoint matching (used by bind and by live's rewriting). */
int rp_side_is_src(const struct rp_side *s, const struct um_frame_meta *m);
int rp_side_is_dst(const struct rp_side *s, const struct um_frame_meta *m);

#endif
