/*
 * cmp_engine.h - the sans-IO Communication Manager engine (IBTA Vol1 ch.12).
 *
 * The engine does no I/O and reads no clock. The caller feeds it
 *   - received MADs          cmp_engine_recv(e, &src, mad, now)
 *   - the passage of time    cmp_engine_handle_expiry(e, now)
 *   - user calls             cmp_connect(), cmp_accept(), cmp_reject(), ...
 * each with the current time `now` (nanoseconds, any fixed epoch), and
 * drains what comes out:
 *   - MADs to send, with their address     cmp_engine_poll_tx()
 *   - events for the user                  cmp_engine_poll_event()
 *   - the next timer deadline              cmp_engine_get_expiry()
 *   - QP attributes on demand              cmp_conn_qp_attr()
 *   - a trace record per state change      settings.trace callback
 * so the same engine serves the library, the replay tool and the in-process
 * network simulation of the tests. See docs/cm-engine.md for the state
 * machines, timers and trace format.
 *
 * Threading: none. One engine is used by one thread at a time.
 */
#ifndef USCM_CMP_ENGINE_H
#define USCM_CMP_ENGINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <infiniband/verbs.h> /* struct ibv_qp_attr and masks: header only */

#include "cm_proto/cmp_cm.h"
#include "cm_proto/cmp_mem.h"

typedef uint64_t cmp_time; /* nanoseconds */
#define CMP_TIME_NEVER UINT64_MAX

struct cmp_engine;
struct cmp_conn;
struct cmp_listen;

/* ---- settings ------------------------------------------------------------ */

struct cmp_trace_rec;
typedef void (*cmp_trace_fn)(void *ctx, const struct cmp_trace_rec *rec);

struct cmp_settings {
	/* IBTA time exponents (4.096 us * 2^t) used when the caller gives 0. */
	uint8_t cm_response_timeout;   /* our "CM response timeout": 20 (~4.3 s) */
	uint8_t max_cm_retries;        /* 15 */
	uint8_t mra_service_timeout;   /* in MRAs we send: 24 (~68.7 s) */
	uint8_t packet_life_time;      /* when a path gives none: 16 */
	uint8_t local_ca_ack_delay;    /* the device's, for REP target ACK delay: 15 */
	/* Every computed CM timer is capped at this (0 = no cap). The kernel
	 * formula gives 65 s per try on RoCE; a cap keeps deadlines sane. */
	cmp_time max_timer_ns;
	cmp_time timewait_ns;          /* 0: conv(local ACK timeout), as IBTA */
	cmp_time sidr_timeout_ns;      /* 1 << (20 - 8) ms = 4096 ms */
	uint8_t sidr_retries;          /* 15 */
	unsigned default_backlog;      /* pending REQs per listener: 1024 */
	unsigned max_conns;            /* memory cap on live connections: 1 << 20 */
	/* Memory cap on half-open passive connections (REQ received, not yet
	 * established: REQ_RCVD, MRA_REQ_SENT, REP_SENT, MRA_REP_RCVD) across
	 * all listeners, so a REQ flood from sources that never send an RTU
	 * cannot hold more than this many; excess REQs get REJ(no resources)
	 * and count in half_open_drops. 4096 (four full default backlogs). */
	unsigned max_pending;
	/* Answer a duplicate REQ that the user has not answered yet with an MRA
	 * (what the kernel's rdma_cm does), so the peer stops retrying. */
	int mra_on_duplicate_req;
	/* What cmp_conn_destroy does to an ESTABLISHED or DREQ_SENT
	 * connection. 0 (the kernel's cm_destroy_id): one DREQ at most, its
	 * retries cancelled, TimeWait at once. 1 (uscm's more persistent
	 * choice): the DREQ is retried until the DREP comes or the retries run
	 * out, so one lost DREQ does not leave the peer connected. */
	int destroy_retries_dreq;
	uint64_t local_ca_guid;        /* goes into REQ/REP/REJ(timeout) */
	/* The engine's secret (caller supplies, e.g. from getrandom): comm IDs
	 * and the hash tables' SipHash key are derived from it, through a PRF,
	 * so the comm IDs peers see reveal neither the seed nor the key. */
	uint64_t seed;
	cmp_trace_fn trace;            /* NULL: no tracing */
	void *trace_ctx;
	/* Every allocation of the engine and its tables goes through this
	 * (cmp_mem.h); cmp_settings_default() sets libc's. With any member
	 * NULL the engine uses libc's for all four. */
	struct cmp_mem mem;
};
void cmp_settings_default(struct cmp_settings *s);

/* 4.096 us * 2^t in ns (t clamped to 31). */
cmp_time cmp_iba_time_ns(unsigned t);
/* The kernel's local ACK timeout from CA ACK delay and packet lifetime. */
uint8_t cmp_ack_timeout(uint8_t ca_ack_delay, uint8_t packet_life_time);

/* ---- addresses and paths ------------------------------------------------- */

/* Where a MAD goes or came from (QP1 of a port, as libibumad addresses it). */
struct cmp_addr {
	uint16_t lid;
	uint8_t sl;
	uint8_t grh;           /* GID fields valid */
	uint8_t gid[16];       /* remote GID */
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t tclass;
	uint32_t flow_label;
	uint16_t pkey_index;
	uint32_t qpn;          /* 1 */
	uint32_t qkey;         /* 0x80010000 */
};

/* A path as the SA (IB) or the local stack (RoCE) gives it. */
struct cmp_path {
	uint8_t sgid[16], dgid[16];
	uint16_t slid, dlid;
	uint32_t flow_label;
	uint8_t tclass, hop_limit, sl;
	uint8_t mtu;              /* IB MTU code 1..5 */
	uint8_t rate;             /* IB rate code */
	uint8_t packet_life_time; /* exponent */
	uint16_t pkey;
	uint16_t pkey_index;
	uint8_t sgid_index;
	uint8_t port_num;
	uint8_t subnet_local;     /* 1: no GRH needed (IB, same subnet) */
	uint8_t roce;             /* 1: RoCE, always GRH, no LIDs */
};

/* The LID a RoCE REQ carries for both ports of a path (hop limit > 1). */
#define CMP_LID_PERMISSIVE 0xFFFF

/* ---- connection parameters ----------------------------------------------- */

/* What a connection's QP is. RC and UC are their REQ transport service
 * types. XRC (IBTA Vol1 12.6.5 / 14.x, the kernel's cm.c): the active side
 * connects an XRC initiator QP (CMP_QPT_XRC_INI), whose REQ carries
 * transport service type 3 and extended transport type 1 and leaves
 * responder resources, retry count, RNR retry count and SRQ zero; the
 * passive side sees an XRC target QP (CMP_QPT_XRC_TGT), whose REP carries
 * its QPN in the Local EECN field (Local QPN zero), SRQ 1, and no
 * initiator depth or flow control. */
enum cmp_qp_type {
	CMP_QPT_RC = 0,
	CMP_QPT_UC = 1,
	CMP_QPT_XRC_INI = 2, /* cmp_connect only */
	CMP_QPT_XRC_TGT = 3, /* what a passive connection of an XRC REQ is */
};
/* The REQ wire values (transport service type, extended transport type). */
#define CMP_REQ_TST_XRC 3
#define CMP_REQ_ETT_XRC 1

struct cmp_ece { uint32_t vendor_id, attr_mod; };

struct cmp_req_param {
	const struct cmp_path *primary;
	const struct cmp_path *alternate;  /* NULL: none */
	uint64_t service_id;
	uint32_t qpn;
	uint8_t qp_type;                   /* enum cmp_qp_type */
	uint32_t starting_psn;
	uint8_t responder_resources, initiator_depth;
	uint8_t remote_cm_response_timeout; /* 0: settings */
	uint8_t local_cm_response_timeout;  /* 0: settings */
	uint8_t retry_count, rnr_retry_count;
	uint8_t max_cm_retries;             /* 0: settings */
	uint8_t flow_control, srq;
	struct cmp_ece ece;
	const void *private_data;
	uint8_t private_data_len;
};

struct cmp_rep_param {
	uint32_t qpn;
	uint32_t starting_psn;
	uint8_t responder_resources, initiator_depth;
	uint8_t failover_accepted;
	uint8_t flow_control, rnr_retry_count, srq;
	struct cmp_ece ece;
	const void *private_data;
	uint8_t private_data_len;
};

struct cmp_sidr_req_param {
	const struct cmp_path *path;
	uint64_t service_id;
	uint8_t max_retries;        /* 0: settings */
	cmp_time timeout_ns;        /* 0: settings */
	const void *private_data;
	uint8_t private_data_len;
};

struct cmp_sidr_rep_param {
	uint8_t status;             /* 0 valid, 1 SID not supported, 2 rejected, 3 no QP, 4 redirect, 5 version */
	uint32_t qpn, qkey;
	struct cmp_ece ece;
	const void *info;           /* additional information */
	uint8_t info_len;
	const void *private_data;
	uint8_t private_data_len;
};

/* ---- states, events, trace ------------------------------------------------ */

enum cmp_state {
	CMP_IDLE,
	CMP_REQ_SENT,
	CMP_REQ_RCVD,
	CMP_MRA_REQ_SENT,
	CMP_MRA_REQ_RCVD,
	CMP_REP_SENT,
	CMP_REP_RCVD,
	CMP_MRA_REP_SENT,
	CMP_MRA_REP_RCVD,
	CMP_ESTABLISHED,
	CMP_DREQ_SENT,
	CMP_DREQ_RCVD,
	CMP_TIMEWAIT,
	CMP_SIDR_REQ_SENT,
	CMP_SIDR_REQ_RCVD,
	CMP_STATE_COUNT
};
const char *cmp_state_str(enum cmp_state s);

enum cmp_event_type {
	CMP_EV_REQ_RECEIVED,     /* passive: new conn from a listener */
	CMP_EV_REQ_ERROR,        /* active: REQ retries exhausted (terminal) */
	CMP_EV_REP_RECEIVED,     /* active: call cmp_rtu() / cmp_reject() */
	CMP_EV_REP_ERROR,        /* passive: REP retries exhausted (terminal) */
	CMP_EV_RTU_RECEIVED,     /* passive: established */
	CMP_EV_USER_ESTABLISHED, /* passive: established by cmp_notify() */
	CMP_EV_MRA_RECEIVED,     /* informational: peer asked for more time */
	CMP_EV_REJ_RECEIVED,     /* terminal for a connect/accept */
	CMP_EV_DREQ_RECEIVED,    /* call cmp_disconnect() to answer */
	CMP_EV_DREQ_ERROR,       /* DREQ retries exhausted; now in TimeWait */
	CMP_EV_DREP_RECEIVED,
	CMP_EV_TIMEWAIT_EXIT,    /* the QP may be reused */
	CMP_EV_SIDR_REQ_RECEIVED,
	CMP_EV_SIDR_REQ_ERROR,   /* SIDR retries exhausted (terminal) */
	CMP_EV_SIDR_REP_RECEIVED,
	CMP_EV_LAP_RECEIVED,     /* informational: answered with APR "unsupported" */
};
const char *cmp_event_str(enum cmp_event_type t);

/* What an event carries. Pointers stay valid until the next poll_event. */
struct cmp_event {
	enum cmp_event_type type;
	struct cmp_conn *conn;
	void *ctx;                  /* the conn's user context */
	struct cmp_listen *listen;  /* REQ_RECEIVED / SIDR_REQ_RECEIVED */
	void *listen_ctx;
	cmp_time time;
	/* REQ / REP / REJ / DREQ / DREP / RTU / SIDR fields, as received */
	uint64_t service_id;
	uint32_t remote_qpn, remote_qkey, starting_psn;
	uint8_t responder_resources, initiator_depth;
	uint8_t flow_control, srq, rnr_retry_count, retry_count;
	uint8_t qp_type;
	uint16_t reason;            /* REJ reason */
	uint8_t status;             /* SIDR_REP status / APR status */
	uint8_t ari_len;
	const uint8_t *ari;
	struct cmp_ece ece;
	struct cmp_path path;       /* REQ_RECEIVED: the primary path, as seen from here */
	struct cmp_addr src;        /* who sent the MAD */
	const uint8_t *private_data;
	uint8_t private_data_len;   /* the message's whole private data field */
};

/* One state change: always from != to, or a drop with a cause. */
struct cmp_trace_rec {
	cmp_time time;
	uint32_t local_id, remote_id;
	enum cmp_state from, to;
	const char *cause;  /* static string: "recv REQ", "timeout REQ", "user accept"... */
};
/* One line: time, ids, from -> to, cause. */
void cmp_trace_print(FILE *out, const struct cmp_trace_rec *r);
/* One JSON object (qlog-like) with a newline. */
void cmp_trace_json(FILE *out, const struct cmp_trace_rec *r);

/* ---- statistics ------------------------------------------------------------ */

struct cmp_stats {
	uint64_t rx, tx, rx_by_attr[32], tx_by_attr[32]; /* index attr_id & 31 */
	uint64_t rx_malformed;     /* failed to decode: dropped */
	uint64_t rx_stray;         /* no matching connection / wrong state: dropped */
	uint64_t rx_mismatch;      /* comm ID matched but source/QPN did not: dropped */
	uint64_t rx_duplicate;     /* duplicates answered or absorbed */
	uint64_t rx_stale;         /* REQs answered with REJ STALE_CONN (but a connected QP's
				    * from a wrong port: rx_spoofed) */
	uint64_t rx_no_listener;   /* REQs/SIDR_REQs with no listener */
	uint64_t backlog_drops;    /* REQs rejected because the backlog was full */
	uint64_t retransmits;
	uint64_t timeouts;         /* retries exhausted */
	uint64_t conns, conns_peak;
	/* Kept at the end: uscm_get_stats copies a prefix. */
	uint64_t rx_spoofed;       /* part of rx_mismatch: right comm ID (or a stale REQ's
				    * GUID + QPN), wrong source port */
	uint64_t half_open_drops;  /* REQs/SIDR_REQs rejected at the max_pending cap */
	uint64_t half_open;        /* gauge: half-open passive connections now */
	uint64_t half_open_peak;
	/* Allocations that failed; each refused a whole
	 * step, never half of one: a user call failed with ENOMEM, a received
	 * MAD was dropped as if lost (the peer's retry brings it again), a
	 * timer was put off by CMP_NOMEM_RETRY_NS, a REQ got REJ(no
	 * resources). */
	uint64_t nomem;
	/* MADs cmp_conn_destroy could not queue for lack of memory (it cannot
	 * fail): lost as on the wire, which the protocol's retries recover.
	 * Events are never lost: room for them is reserved before each step. */
	uint64_t nomem_lost;
};
const struct cmp_stats *cmp_engine_stats(const struct cmp_engine *e);

/* ---- engine ---------------------------------------------------------------- */

struct cmp_engine *cmp_engine_new(const struct cmp_settings *s);
/* Frees everything, including connections the user still holds. */
void cmp_engine_free(struct cmp_engine *e);

/* Allocation failure. Every entry point either runs whole or changes
 * nothing: a connection reserves its timer slot and index entries when it
 * is created, and each step first makes room for the MADs and the event it
 * may queue; so no timer, index entry or event is ever dropped on ENOMEM. */

/* A received CM MAD from src. Returns 0 when handled or dropped (malformed and
 * stray MADs are counted, never acted on); -1 with errno ENOMEM when there
 * was no memory to act on it: nothing changed, and the MAD counts as lost
 * (the sender's retry brings it again). */
int cmp_engine_recv(struct cmp_engine *e, const struct cmp_addr *src,
		    const uint8_t *mad, size_t len, cmp_time now);
cmp_time cmp_engine_get_expiry(const struct cmp_engine *e);
/* How long an expired timer that could not run for lack of memory waits
 * before it is tried again. */
#define CMP_NOMEM_RETRY_NS 1000000u
/* Runs the expired timers. 0, or -1 with errno ENOMEM when some could not
 * run for lack of memory: each of those was put off by CMP_NOMEM_RETRY_NS,
 * its connection otherwise unchanged (so it still times out, later, and
 * the caller's loop does not spin). */
int cmp_engine_handle_expiry(struct cmp_engine *e, cmp_time now);

struct cmp_tx {
	struct cmp_addr dst;
	uint8_t mad[CMP_MAD_SIZE];
	struct cmp_conn *conn;   /* NULL for MADs that belong to no connection */
};
/* 1: *tx holds the next MAD to send. 0: none. */
int cmp_engine_poll_tx(struct cmp_engine *e, struct cmp_tx *tx);
/* 1: *ev holds the next event. 0: none. */
int cmp_engine_poll_event(struct cmp_engine *e, struct cmp_event *ev);
/* Live connections (not yet destroyed by the user or reclaimed). */
size_t cmp_engine_conn_count(const struct cmp_engine *e);
/* Pending timers. */
size_t cmp_engine_timer_count(const struct cmp_engine *e);

/* ---- listeners ------------------------------------------------------------- */

/* Listens on service IDs sid under mask (0 mask = exact). Returns 0, or
 * -1 with errno EADDRINUSE (overlapping listener), ENOMEM. */
int cmp_listen(struct cmp_engine *e, uint64_t sid, uint64_t mask, unsigned backlog,
	       void *ctx, struct cmp_listen **out);
void cmp_listen_destroy(struct cmp_engine *e, struct cmp_listen *l);

/* ---- connection calls (all: 0, or -1 with errno) ---------------------------- */

/* Every call below may also fail with ENOMEM; it then changed nothing
 * and may be retried. */

/* Makes room now for what one call may queue: after it returned 0, the
 * next call on e (but cmp_connect / cmp_sidr_req, which also allocate a
 * connection) cannot fail for lack of memory. For callers that must do
 * something irreversible before the call (move a QP to RTS before the REP
 * or RTU leaves). 0, or -1 with errno ENOMEM. */
int cmp_engine_reserve(struct cmp_engine *e);

/* Active side: sends a REQ. EINVAL bad param, ENOMEM cap reached. */
int cmp_connect(struct cmp_engine *e, const struct cmp_req_param *p, void *ctx,
		struct cmp_conn **out, cmp_time now);
/* Passive: answers a REQ with a REP. EINVAL in the wrong state. */
int cmp_accept(struct cmp_engine *e, struct cmp_conn *c, const struct cmp_rep_param *p,
	       cmp_time now);
/* Active: RTU after REP_RECEIVED; the connection is established. */
int cmp_rtu(struct cmp_engine *e, struct cmp_conn *c, const void *pdata, uint8_t len,
	    cmp_time now);
/* Either side, before established: REJ with reason, ARI and private data. */
int cmp_reject(struct cmp_engine *e, struct cmp_conn *c, uint16_t reason, const void *ari,
	       uint8_t ari_len, const void *pdata, uint8_t len, cmp_time now);
/* MRA for the REQ or REP being processed (service_timeout 0: settings). */
int cmp_mra(struct cmp_engine *e, struct cmp_conn *c, uint8_t service_timeout,
	    const void *pdata, uint8_t len, cmp_time now);
/* Passive: first data arrived before the RTU: established now. */
int cmp_notify(struct cmp_engine *e, struct cmp_conn *c, cmp_time now);
/* Established: sends DREQ. After DREQ_RECEIVED: sends DREP. */
int cmp_disconnect(struct cmp_engine *e, struct cmp_conn *c, const void *pdata, uint8_t len,
		   cmp_time now);
/* SIDR. */
int cmp_sidr_req(struct cmp_engine *e, const struct cmp_sidr_req_param *p, void *ctx,
		 struct cmp_conn **out, cmp_time now);
int cmp_sidr_rep(struct cmp_engine *e, struct cmp_conn *c, const struct cmp_sidr_rep_param *p,
		 cmp_time now);
/* The user lets go of the connection: the engine sends what the kernel's
 * cm_destroy_id sends in that state (REJ, one DREQ, DREP, SIDR_REP) and
 * waits out TimeWait where the kernel enters it, without further events,
 * then frees it (docs/cm-engine.md; settings.destroy_retries_dreq).
 * Cannot fail: a MAD it has no memory to queue counts as lost on the wire
 * (stats.nomem_lost), which retries recover. */
void cmp_conn_destroy(struct cmp_engine *e, struct cmp_conn *c, cmp_time now);

/* Attributes for moving the connection's QP to INIT, RTR or RTS, as
 * ib_cm_init_qp_attr computes them. EINVAL in a state that has none. */
int cmp_conn_qp_attr(const struct cmp_conn *c, enum ibv_qp_state target,
		     struct ibv_qp_attr *attr, int *mask);

enum cmp_state cmp_conn_state(const struct cmp_conn *c);
uint32_t cmp_conn_local_id(const struct cmp_conn *c);
uint32_t cmp_conn_remote_id(const struct cmp_conn *c);
void *cmp_conn_ctx(const struct cmp_conn *c);
void cmp_conn_set_ctx(struct cmp_conn *c, void *ctx);

#endif
