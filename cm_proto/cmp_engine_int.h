/*
 * cmp_engine_int.h - the engine's private structures, shared by the engine
 * core (cmp_engine.c: queues, timers, indexes, dispatch), the state machine
 * (cmp_conn.c) and the QP attribute derivation (cmp_qp_attr.c).
 */
#ifndef USCM_CMP_ENGINE_INT_H
#define USCM_CMP_ENGINE_INT_H

#include "cm_proto/cmp_engine.h"
#include "cm_proto/cmp_map.h"

enum cmp_timer_kind {
	CMP_T_NONE,
	CMP_T_RETRY,    /* resend `last` or give up */
	CMP_T_TIMEWAIT, /* leave TimeWait */
};

struct cmp_listen {
	uint64_t sid, mask;
	unsigned backlog, pending;
	void *ctx;
	struct cmp_listen *next;
};

struct cmp_conn {
	uint32_t local_id, remote_id;
	uint8_t state;          /* enum cmp_state */
	uint8_t active;         /* we sent the REQ / SIDR_REQ */
	uint8_t user_gone;      /* destroyed by the user: finish silently */
	uint8_t pending;        /* counted in listen->pending */
	uint8_t timer_kind;
	uint8_t retries_left;
	uint8_t max_cm_retries;
	uint8_t qp_type;
	uint8_t indexed;        /* bit 0 by_remote, bit 1 by_qpn, bit 2 by_sidr */
	uint8_t has_alt;
	uint8_t half_open;      /* counted in stats.half_open (max_pending) */
	uint8_t responder_resources, initiator_depth;
	uint8_t retry_count, rnr_retry_count;
	uint8_t remote_cm_response_timeout; /* how long the peer may take */
	uint8_t local_cm_response_timeout;  /* how long we may take */
	uint8_t av_timeout;                 /* local ACK timeout exponent */
	uint8_t flow_control, srq;
	size_t heap_idx;        /* SIZE_MAX when no timer */
	cmp_time base_timeout;  /* one try */
	void *ctx;
	struct cmp_listen *listen;
	uint64_t tid;
	uint64_t remote_ca_guid;
	uint64_t service_id;
	uint64_t sidr_key;      /* by_sidr key part (source), passive SIDR */
	uint32_t local_qpn, remote_qpn;
	uint32_t sq_psn, rq_psn;
	struct cmp_path path, alt;
	struct cmp_addr dst;    /* where this connection's MADs go */
	uint8_t last[CMP_MAD_SIZE]; /* the MAD a retry or a duplicate resends */
	uint8_t last_valid;
};

/* A timer heap slot: the deadline sits beside the pointer so that sifting
 * compares within the heap array and touches a connection only to store
 * its new index (at 100k connections in TimeWait, comparing through the
 * pointers made the heap 3 % of a disconnect run's samples: a cache miss
 * per comparison). */
struct cmp_timer_ent {
	cmp_time deadline;
	struct cmp_conn *c;
};

struct cmp_evitem {
	struct cmp_event ev;
	uint8_t pdata[CMP_CM_DATA_SIZE];
	uint8_t ari[CMP_ARI_SIZE];
};

struct cmp_engine {
	struct cmp_settings s;
	struct cmp_map by_local;   /* local comm ID -> conn */
	struct cmp_map by_remote;  /* (remote comm ID, remote CA GUID) -> conn */
	struct cmp_map by_qpn;     /* (remote QPN, remote CA GUID) -> conn */
	struct cmp_map by_sidr;    /* (request ID, source) -> conn */
	struct cmp_timer_ent *heap;
	size_t heap_len, heap_cap;
	struct cmp_tx *txq;
	size_t tx_head, tx_len, tx_cap;
	struct cmp_evitem *evq;
	size_t ev_head, ev_len, ev_cap;
	struct cmp_evitem cur;     /* the event last handed out */
	struct cmp_evitem sink;    /* events of connections the user let go */
	struct cmp_listen *listeners;
	struct cmp_stats st;
	uint64_t rng;              /* cmp_random's counter */
	uint64_t rng_k0, rng_k1;   /* and its key, derived from the seed */
	size_t nconns;
};

/* engine core (cmp_engine.c) */
/* Reserves what the connection will need later (timer slot, index
 * entries but by_sidr's), so only its creation can fail for lack of
 * memory. NULL with errno ENOMEM (max_conns reached, or no memory). */
struct cmp_conn *cmp_conn_alloc(struct cmp_engine *e, enum cmp_state st, void *ctx);
/* Room for what one step (a received MAD, a timer, a user call) may
 * queue: two MADs (REJ and DREQ for a stale connection) and one event.
 * Taken before the step changes anything; -1 (counted in stats.nomem)
 * when there is no memory for it. */
int cmp_step_reserve(struct cmp_engine *e);
void cmp_conn_free(struct cmp_engine *e, struct cmp_conn *c);
void cmp_purge_events(struct cmp_engine *e, const struct cmp_conn *c);
void cmp_set_state(struct cmp_engine *e, struct cmp_conn *c, enum cmp_state to,
		   const char *cause, cmp_time now);
void cmp_trace_drop(struct cmp_engine *e, struct cmp_conn *c, const char *cause, cmp_time now);
void cmp_timer_set(struct cmp_engine *e, struct cmp_conn *c, enum cmp_timer_kind k,
		   cmp_time deadline);
void cmp_timer_clear(struct cmp_engine *e, struct cmp_conn *c);
cmp_time cmp_cap_timer(const struct cmp_engine *e, cmp_time t);
/* Encodes msg to dst; stores it in c->last when `keep`. c may be NULL. */
void cmp_send(struct cmp_engine *e, struct cmp_conn *c, const struct cmp_addr *dst,
	      struct cmp_cm_msg *msg, int keep);
void cmp_resend_last(struct cmp_engine *e, struct cmp_conn *c);
/* Queues an event for c, in the room cmp_step_reserve made (dropped if the
 * user has let go of c: nobody will poll it). */
struct cmp_event *cmp_emit(struct cmp_engine *e, struct cmp_conn *c, enum cmp_event_type t,
			   cmp_time now);
void cmp_event_data(struct cmp_engine *e, struct cmp_event *ev, const uint8_t *pdata,
		    size_t len, const uint8_t *ari, size_t ari_len);
void cmp_index_remote(struct cmp_engine *e, struct cmp_conn *c);
void cmp_index_qpn(struct cmp_engine *e, struct cmp_conn *c);
void cmp_unindex(struct cmp_engine *e, struct cmp_conn *c);
struct cmp_conn *cmp_find_local(struct cmp_engine *e, uint32_t id);
struct cmp_conn *cmp_find_remote(struct cmp_engine *e, uint32_t remote_id, uint64_t guid);
struct cmp_conn *cmp_find_qpn(struct cmp_engine *e, uint32_t qpn, uint64_t guid);
struct cmp_map_key cmp_sidr_key(uint32_t request_id, const struct cmp_addr *src);
uint64_t cmp_random(struct cmp_engine *e);
/* Half-open passive connections: counted against settings.max_pending. */
void cmp_half_open_begin(struct cmp_engine *e, struct cmp_conn *c);
void cmp_half_open_end(struct cmp_engine *e, struct cmp_conn *c);
struct cmp_listen *cmp_listen_match(struct cmp_engine *e, uint64_t sid);

/* state machine (cmp_conn.c) */
void cmp_on_mad(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		cmp_time now);
/* A timer of kind `kind` expired (c->timer_kind is already cleared). */
void cmp_on_timer(struct cmp_engine *e, struct cmp_conn *c, enum cmp_timer_kind kind,
		  cmp_time now);

#endif
