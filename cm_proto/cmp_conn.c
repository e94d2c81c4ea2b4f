/*
 * cmp_conn.c - the CM state machines (IBTA Vol1 ch.12, with the Linux CM's
 * choices where the spec leaves room): received MADs, timer expiries and
 * user calls move a connection between the states of enum cmp_state. Every
 * change goes through cmp_set_state() and so is traced with its cause.
 * docs/cm-engine.md has the tables.
 */
#include <errno.h>
#include <string.h>

#include "cm_proto/cmp_engine_int.h"

/* REJ "message rejected" values (IBTA table 108). */
enum { REJ_MSG_REQ = 0, REJ_MSG_REP = 1, REJ_MSG_OTHER = 2 };
/* MRA "message MRAed" values (table 107). */
enum { MRA_MSG_REQ = 0, MRA_MSG_REP = 1, MRA_MSG_LAP = 2 };
/* REJ reasons used by the engine itself. */
enum {
	REJ_NO_RESOURCES = 3,
	REJ_TIMEOUT = 4,
	REJ_INVALID_SERVICE_ID = 8,
	REJ_INVALID_TRANSPORT_TYPE = 9,
	REJ_STALE_CONN = 10,
	REJ_CONSUMER_DEFINED = 28,
};
enum { SIDR_UNSUPPORTED = 1, SIDR_REJECT = 2 };
enum { APR_UNSUPPORTED = 2 };

/* ---- helpers ---------------------------------------------------------------- */

static cmp_time conv(unsigned t)
{
	return cmp_iba_time_ns(t);
}

/* Where to send a connection's MADs: the remote port of the primary path. */
static void addr_from_path(struct cmp_addr *a, const struct cmp_path *p)
{
	memset(a, 0, sizeof(*a));
	a->lid = p->dlid;
	a->sl = p->sl;
	a->grh = (uint8_t)(!p->subnet_local || p->roce);
	memcpy(a->gid, p->dgid, 16);
	a->sgid_index = p->sgid_index;
	a->hop_limit = p->hop_limit;
	a->tclass = p->tclass;
	a->flow_label = p->flow_label;
	a->pkey_index = p->pkey_index;
	a->qpn = 1;
	a->qkey = UMAD_QKEY;
}

/* The MAD came from the port the connection talks to: its GID when both
 * carry one, else its LID. LID 0 is no unicast source, so a MAD without a
 * GRH never matches a peer known only by GID (RoCE, where LIDs are 0). */
static int src_ok(const struct cmp_conn *c, const struct cmp_addr *src)
{
	if (c->dst.grh && src->grh)
		return memcmp(c->dst.gid, src->gid, 16) == 0;
	return src->lid && c->dst.lid == src->lid;
}

/* A reply to a MAD that belongs to no connection goes back where it came from. */
static struct cmp_addr reply_addr(const struct cmp_addr *src)
{
	struct cmp_addr a = *src;
	a.qpn = 1;
	a.qkey = UMAD_QKEY;
	return a;
}

/* The TID of a transaction this side starts (REQ, DREQ, SIDR_REQ): its
 * comm ID in the lower half with the bytes reversed, as the Linux CM's (it
 * puts its big-endian ID there read as a little-endian number), so that a
 * capture of uscm and one of the kernel agree; answers keep the TID of what
 * they answer. The upper half is random: ib_umad writes its own there on
 * every request a process sends. */
static uint64_t own_tid(struct cmp_engine *e, uint32_t local_id)
{
	return (cmp_random(e) & 0xFFFFFFFF00000000ULL) | __builtin_bswap32(local_id);
}

static void msg_init(struct cmp_cm_msg *m, uint16_t attr, uint64_t tid)
{
	memset(m, 0, sizeof(*m));
	m->hdr.attr_id = attr;
	m->hdr.method = UMAD_METHOD_SEND;
	m->hdr.tid = tid;
}

static void copy_pdata(uint8_t *dst, size_t cap, const void *src, size_t len)
{
	if (src && len)
		memcpy(dst, src, len < cap ? len : cap);
}

static void stray(struct cmp_engine *e, struct cmp_conn *c, const char *why, cmp_time now)
{
	e->st.rx_stray++;
	cmp_trace_drop(e, c, why, now);
}

static void mismatch(struct cmp_engine *e, struct cmp_conn *c, const char *why, cmp_time now)
{
	e->st.rx_mismatch++;
	cmp_trace_drop(e, c, why, now);
}

/* Right comm ID from the wrong port: a spoofing attempt or a confused
 * peer. Counted in rx_mismatch and, separately, in rx_spoofed. */
static void spoofed(struct cmp_engine *e, struct cmp_conn *c, const char *why, cmp_time now)
{
	e->st.rx_spoofed++;
	mismatch(e, c, why, now);
}

static void unpend(struct cmp_conn *c)
{
	if (c->pending && c->listen)
		c->listen->pending--;
	c->pending = 0;
}

/* Arms the retry timer for the message in c->last. */
static void arm_retry(struct cmp_engine *e, struct cmp_conn *c, cmp_time base, unsigned retries,
		      cmp_time now)
{
	c->base_timeout = cmp_cap_timer(e, base);
	c->retries_left = (uint8_t)retries;
	cmp_timer_set(e, c, CMP_T_RETRY, now + c->base_timeout);
}

static cmp_time timewait_ns(const struct cmp_engine *e, const struct cmp_conn *c)
{
	return e->s.timewait_ns ? e->s.timewait_ns : cmp_cap_timer(e, conv(c->av_timeout));
}

static void enter_timewait(struct cmp_engine *e, struct cmp_conn *c, const char *cause,
			   cmp_time now)
{
	cmp_set_state(e, c, CMP_TIMEWAIT, cause, now);
	cmp_timer_set(e, c, CMP_T_TIMEWAIT, now + timewait_ns(e, c));
}

/* Leaves the protocol: no timer, no index; freed at once if the user let go. */
static void enter_idle(struct cmp_engine *e, struct cmp_conn *c, const char *cause, cmp_time now)
{
	cmp_timer_clear(e, c);
	cmp_unindex(e, c);
	unpend(c);
	cmp_set_state(e, c, CMP_IDLE, cause, now);
	if (c->user_gone)
		cmp_conn_free(e, c);
}

static void send_rej(struct cmp_engine *e, struct cmp_conn *c, const struct cmp_addr *dst,
		     uint64_t tid, uint32_t local_id, uint32_t remote_id, uint8_t msg_rejected,
		     uint16_t reason, const void *ari, uint8_t ari_len, const void *pdata,
		     uint8_t len)
{
	struct cmp_cm_msg m;

	msg_init(&m, UMAD_CM_ATTR_REJ, tid);
	m.u.rej.local_comm_id = local_id;
	m.u.rej.remote_comm_id = remote_id;
	m.u.rej.message_rejected = msg_rejected;
	m.u.rej.reason = reason;
	m.u.rej.reject_info_length = ari_len;
	copy_pdata(m.u.rej.ari, sizeof(m.u.rej.ari), ari, ari_len);
	copy_pdata(m.u.rej.private_data, sizeof(m.u.rej.private_data), pdata, len);
	cmp_send(e, c, dst, &m, 0);
}

/* The local comm ID of a REJ the user's reject or destroy sends: 0 in
 * REQ_RCVD, where the peer has not heard ours yet (no MRA, no REP), as the
 * kernel's cm_format_rej; ours everywhere else. */
static uint32_t rej_local_id(const struct cmp_conn *c)
{
	return c->state == CMP_REQ_RCVD ? 0 : c->local_id;
}

/* REJ with reason Timeout carries the CA GUID of the side that timed out. */
static void send_rej_timeout(struct cmp_engine *e, struct cmp_conn *c)
{
	uint8_t guid[8];

	for (int i = 0; i < 8; i++)
		guid[i] = (uint8_t)(e->s.local_ca_guid >> (56 - 8 * i));
	send_rej(e, c, &c->dst, c->tid, c->local_id, c->remote_id, REJ_MSG_OTHER, REJ_TIMEOUT,
		 guid, 8, NULL, 0);
}

static void send_mra(struct cmp_engine *e, struct cmp_conn *c, uint8_t what, uint8_t timeout,
		     const void *pdata, uint8_t len)
{
	struct cmp_cm_msg m;

	msg_init(&m, UMAD_CM_ATTR_MRA, c->tid);
	m.u.mra.local_comm_id = c->local_id;
	m.u.mra.remote_comm_id = c->remote_id;
	m.u.mra.message_mraed = what;
	m.u.mra.service_timeout = timeout;
	copy_pdata(m.u.mra.private_data, sizeof(m.u.mra.private_data), pdata, len);
	cmp_send(e, c, &c->dst, &m, 1);
}

static void send_drep(struct cmp_engine *e, struct cmp_conn *c, const struct cmp_addr *dst,
		      uint64_t tid, uint32_t local_id, uint32_t remote_id, const void *pdata,
		      uint8_t len, int keep)
{
	struct cmp_cm_msg m;

	msg_init(&m, UMAD_CM_ATTR_DREP, tid);
	m.u.drep.local_comm_id = local_id;
	m.u.drep.remote_comm_id = remote_id;
	copy_pdata(m.u.drep.private_data, sizeof(m.u.drep.private_data), pdata, len);
	cmp_send(e, c, dst, &m, keep);
}

static void send_dreq(struct cmp_engine *e, struct cmp_conn *c, const void *pdata, uint8_t len,
		      cmp_time now)
{
	struct cmp_cm_msg m;

	/* A DREQ starts a new transaction. */
	c->tid = own_tid(e, c->local_id);
	msg_init(&m, UMAD_CM_ATTR_DREQ, c->tid);
	m.u.dreq.local_comm_id = c->local_id;
	m.u.dreq.remote_comm_id = c->remote_id;
	m.u.dreq.remote_qpn_eecn = c->remote_qpn;
	copy_pdata(m.u.dreq.private_data, sizeof(m.u.dreq.private_data), pdata, len);
	cmp_send(e, c, &c->dst, &m, 1);
	arm_retry(e, c, 2 * conv(c->path.packet_life_time) + conv(c->remote_cm_response_timeout),
		  c->max_cm_retries, now);
}

/* A REQ describes two paths with the same fields under the prefixes
 * primary_ and alternate_; these macros read or write one of them. */
#define REQ_PATH_READ(p, r, pfx)                                                  \
	do {                                                                      \
		memcpy((p)->sgid, (r)->pfx##_remote_gid, 16);                     \
		memcpy((p)->dgid, (r)->pfx##_local_gid, 16);                      \
		(p)->slid = (r)->pfx##_remote_lid;                                \
		(p)->dlid = (r)->pfx##_local_lid;                                 \
		(p)->flow_label = (r)->pfx##_flow_label;                          \
		(p)->tclass = (r)->pfx##_traffic_class;                           \
		(p)->hop_limit = (r)->pfx##_hop_limit;                            \
		(p)->sl = (r)->pfx##_sl;                                          \
		(p)->rate = (r)->pfx##_packet_rate;                               \
		(p)->subnet_local = (r)->pfx##_subnet_local;                      \
		/* As the kernel does: the REQ carries the active side's ACK      \
		 * timeout, lifetime + 1 at least. */                             \
		(p)->packet_life_time = (r)->pfx##_local_ack_timeout ?            \
					(r)->pfx##_local_ack_timeout - 1 : 0;     \
	} while (0)

#define REQ_PATH_WRITE(r, p, pfx, ack_timeout)                                    \
	do {                                                                      \
		(r)->pfx##_local_lid = (p)->slid;                                 \
		(r)->pfx##_remote_lid = (p)->dlid;                                \
		memcpy((r)->pfx##_local_gid, (p)->sgid, 16);                      \
		memcpy((r)->pfx##_remote_gid, (p)->dgid, 16);                     \
		(r)->pfx##_flow_label = (p)->flow_label;                          \
		(r)->pfx##_packet_rate = (p)->rate;                               \
		(r)->pfx##_traffic_class = (p)->tclass;                           \
		(r)->pfx##_hop_limit = (p)->hop_limit;                            \
		(r)->pfx##_sl = (p)->sl;                                          \
		(r)->pfx##_subnet_local = (p)->subnet_local;                      \
		(r)->pfx##_local_ack_timeout = (ack_timeout);                     \
	} while (0)

/* A RoCE path names no LIDs: the kernel's ib_cm (cm_format_req) writes the
 * permissive LID 0xFFFF as both of a REQ path's port LIDs when the path's
 * hop limit exceeds 1, as a RoCE path's always does (64), so that is what
 * a kernel peer sends and expects. An IB path keeps the SA's LIDs. */
static int req_lids_permissive(const struct cmp_path *p)
{
	return p->roce && p->hop_limit > 1;
}

/* The REQ's path as seen from the passive side. */
static void path_from_req(struct cmp_path *p, const struct cmp_cm_req *r, int alt,
			  const struct cmp_addr *src)
{
	memset(p, 0, sizeof(*p));
	if (!alt)
		REQ_PATH_READ(p, r, primary);
	else
		REQ_PATH_READ(p, r, alternate);
	p->mtu = r->path_mtu;
	p->pkey = r->pkey;
	p->pkey_index = src->pkey_index;
	p->sgid_index = src->sgid_index;
}

/* ---- received MADs ------------------------------------------------------------- */

/* What a REQ's transport fields ask for, as the passive side's QP type
 * (the kernel's cm_req_get_qp_type): RC, UC, or for transport service type
 * 3 with extended transport type 1 an XRC target. -1: none we serve. */
static int req_qp_type(const struct cmp_cm_req *r)
{
	switch (r->transport_service_type) {
	case 0:
		return CMP_QPT_RC;
	case 1:
		return CMP_QPT_UC;
	case CMP_REQ_TST_XRC:
		return r->extended_transport_type == CMP_REQ_ETT_XRC ? CMP_QPT_XRC_TGT : -1;
	default:
		return -1;
	}
}

static void on_req(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		   cmp_time now)
{
	const struct cmp_cm_req *r = &m->u.req;
	struct cmp_addr back = reply_addr(src);
	struct cmp_conn *c;
	struct cmp_listen *l;
	int qpt;

	/* A retransmission of a REQ we already have. */
	c = cmp_find_remote(e, r->local_comm_id, r->local_ca_guid);
	if (c) {
		e->st.rx_duplicate++;
		switch (c->state) {
		case CMP_REQ_RCVD:
			if (e->s.mra_on_duplicate_req) {
				send_mra(e, c, MRA_MSG_REQ, e->s.mra_service_timeout, NULL, 0);
				cmp_set_state(e, c, CMP_MRA_REQ_SENT, "recv duplicate REQ: send MRA", now);
			}
			return;
		case CMP_MRA_REQ_SENT:
		case CMP_REP_SENT:
		case CMP_MRA_REP_RCVD:
			cmp_trace_drop(e, c, "recv duplicate REQ: resend", now);
			cmp_resend_last(e, c);
			return;
		case CMP_TIMEWAIT:
			e->st.rx_stale++;
			cmp_trace_drop(e, c, "recv REQ in TIMEWAIT: REJ stale connection", now);
			send_rej(e, NULL, &back, m->hdr.tid, 0, r->local_comm_id, REJ_MSG_REQ,
				 REJ_STALE_CONN, NULL, 0, NULL, 0);
			return;
		default:
			cmp_trace_drop(e, c, "drop duplicate REQ", now);
			return;
		}
	}
	/* Same remote QP under a new comm ID: the old connection is stale (as
	 * the kernel's cm_match_req finds it, before any listener). The REQ is
	 * refused either way, but the old connection is torn down only when
	 * the REQ comes from its own remote port: the kernel takes anyone's
	 * word for it, so any node that names a victim's peer CA GUID and QPN
	 * could make the victim disconnect that peer. */
	c = cmp_find_qpn(e, r->local_qpn, r->local_ca_guid);
	if (c) {
		send_rej(e, NULL, &back, m->hdr.tid, 0, r->local_comm_id, REJ_MSG_REQ, REJ_STALE_CONN,
			 NULL, 0, NULL, 0);
		if (!src_ok(c, src)) {
			spoofed(e, c, "recv REQ for a QP already connected, from another port: REJ stale, "
				      "keep the connection", now);
			return;
		}
		e->st.rx_stale++;
		cmp_trace_drop(e, c, "recv REQ for a QP already connected: REJ stale", now);
		if (c->state == CMP_ESTABLISHED) {
			send_dreq(e, c, NULL, 0, now);
			cmp_set_state(e, c, CMP_DREQ_SENT, "stale connection: send DREQ", now);
		}
		return;
	}
	l = cmp_listen_match(e, r->service_id);
	if (!l) {
		e->st.rx_no_listener++;
		send_rej(e, NULL, &back, m->hdr.tid, 0, r->local_comm_id, REJ_MSG_REQ,
			 REJ_INVALID_SERVICE_ID, NULL, 0, NULL, 0);
		return;
	}
	qpt = req_qp_type(r);
	if (qpt < 0) {
		send_rej(e, NULL, &back, m->hdr.tid, 0, r->local_comm_id, REJ_MSG_REQ,
			 REJ_INVALID_TRANSPORT_TYPE, NULL, 0, NULL, 0);
		return;
	}
	if (l->pending >= l->backlog) {
		e->st.backlog_drops++;
		send_rej(e, NULL, &back, m->hdr.tid, 0, r->local_comm_id, REJ_MSG_REQ,
			 REJ_CONSUMER_DEFINED, NULL, 0, NULL, 0);
		return;
	}
	if (e->st.half_open >= e->s.max_pending) {
		e->st.half_open_drops++;
		cmp_trace_drop(e, NULL, "recv REQ: too many half-open connections: REJ", now);
		send_rej(e, NULL, &back, m->hdr.tid, 0, r->local_comm_id, REJ_MSG_REQ,
			 REJ_NO_RESOURCES, NULL, 0, NULL, 0);
		return;
	}
	c = cmp_conn_alloc(e, CMP_IDLE, l->ctx);
	if (!c) {
		send_rej(e, NULL, &back, m->hdr.tid, 0, r->local_comm_id, REJ_MSG_REQ,
			 REJ_NO_RESOURCES, NULL, 0, NULL, 0);
		return;
	}
	cmp_half_open_begin(e, c);
	c->listen = l;
	c->pending = 1;
	l->pending++;
	c->tid = m->hdr.tid;
	c->remote_id = r->local_comm_id;
	c->remote_ca_guid = r->local_ca_guid;
	c->remote_qpn = r->local_qpn;
	c->service_id = r->service_id;
	/* A Starting PSN is the PSN its sender expects to receive (Linux cm.c:
	 * the sender programs it as rq_psn, the peer as sq_psn). Taking it the
	 * other way round breaks every connection to a kernel peer. */
	c->sq_psn = r->starting_psn;
	c->qp_type = (uint8_t)qpt;
	/* Our RDMA read depth is what they let us issue, and vice versa. */
	c->responder_resources = r->initiator_depth;
	c->initiator_depth = r->responder_resources;
	c->retry_count = r->retry_count;
	c->rnr_retry_count = r->rnr_retry_count;
	c->flow_control = r->end_to_end_flow_control;
	c->srq = r->srq;
	c->remote_cm_response_timeout = r->local_cm_response_timeout;
	c->local_cm_response_timeout = r->remote_cm_response_timeout;
	c->max_cm_retries = r->max_cm_retries;
	c->av_timeout = r->primary_local_ack_timeout;
	path_from_req(&c->path, r, 0, src);
	if (r->alternate_local_lid || r->alternate_remote_lid) {
		path_from_req(&c->alt, r, 1, src);
		c->has_alt = 1;
	}
	c->dst = back;
	cmp_index_remote(e, c);
	cmp_index_qpn(e, c);
	cmp_set_state(e, c, CMP_REQ_RCVD, "recv REQ", now);

	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_REQ_RECEIVED, now);
	ev->listen = l;
	ev->listen_ctx = l->ctx;
	ev->service_id = r->service_id;
	ev->remote_qpn = r->local_qpn;
	ev->remote_qkey = r->local_qkey;
	ev->starting_psn = r->starting_psn;
	ev->responder_resources = r->responder_resources;
	ev->initiator_depth = r->initiator_depth;
	ev->flow_control = r->end_to_end_flow_control;
	ev->srq = r->srq;
	ev->rnr_retry_count = r->rnr_retry_count;
	ev->retry_count = r->retry_count;
	ev->qp_type = (uint8_t)qpt;
	ev->ece.vendor_id = r->vendor_id;
	ev->ece.attr_mod = m->hdr.attr_mod;
	ev->path = c->path;
	ev->src = *src;
	cmp_event_data(e, ev, r->private_data, sizeof(r->private_data), NULL, 0);
}

static void on_mra(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		   cmp_time now)
{
	const struct cmp_cm_mra *r = &m->u.mra;
	struct cmp_conn *c = cmp_find_local(e, r->remote_comm_id);
	cmp_time wait;

	if (!c) {
		stray(e, NULL, "drop MRA: unknown comm ID", now);
		return;
	}
	/* An MRA of our REQ is matched by our comm ID alone, and we learn no
	 * peer ID from it (as the kernel): the passive connection that sent it
	 * may vanish and a retried REQ reach a new one with another ID, whose
	 * REJ or REP must still be accepted. */
	if (!src_ok(c, src)) {
		spoofed(e, c, "drop MRA: source mismatch", now);
		return;
	}
	if (r->message_mraed != MRA_MSG_REQ && c->remote_id && c->remote_id != r->local_comm_id) {
		mismatch(e, c, "drop MRA: comm ID mismatch", now);
		return;
	}
	/* The peer announced how long it needs: wait that long, uncapped by
	 * max_timer_ns (IBTA 12.6.6), plus one normal try. */
	wait = conv(r->service_timeout) + c->base_timeout;
	if (r->message_mraed == MRA_MSG_REQ &&
	    (c->state == CMP_REQ_SENT || c->state == CMP_MRA_REQ_RCVD)) {
		if (c->state == CMP_REQ_SENT)
			cmp_set_state(e, c, CMP_MRA_REQ_RCVD, "recv MRA for REQ", now);
	} else if (r->message_mraed == MRA_MSG_REP &&
		   (c->state == CMP_REP_SENT || c->state == CMP_MRA_REP_RCVD)) {
		if (c->state == CMP_REP_SENT)
			cmp_set_state(e, c, CMP_MRA_REP_RCVD, "recv MRA for REP", now);
	} else {
		stray(e, c, "drop MRA in this state", now);
		return;
	}
	/* The peer needs longer: wait that long before the next try. */
	cmp_timer_set(e, c, CMP_T_RETRY, now + wait);
	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_MRA_RECEIVED, now);
	ev->src = *src;
	ev->status = r->service_timeout;
}

static void on_rej(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		   cmp_time now)
{
	const struct cmp_cm_rej *r = &m->u.rej;
	struct cmp_conn *c = cmp_find_local(e, r->remote_comm_id);
	int timewait;

	/* A REJ(Timeout) from an active side whose REQ timed out before it
	 * heard from us carries remote comm ID 0; it names the connection by
	 * its sender's comm ID and, in the ARI, CA GUID (as the kernel's
	 * cm_acquire_rejected_id looks it up). Without this the REJ that
	 * send_rej_timeout() sends to stop the peer's REP retries is a stray. */
	if (!c && r->reason == REJ_TIMEOUT && r->reject_info_length >= 8) {
		uint64_t guid = 0;
		for (int i = 0; i < 8; i++)
			guid = guid << 8 | r->ari[i];
		c = cmp_find_remote(e, r->local_comm_id, guid);
	}
	if (!c) {
		stray(e, NULL, "drop REJ: unknown comm ID", now);
		return;
	}
	if (!src_ok(c, src)) {
		spoofed(e, c, "drop REJ: source mismatch", now);
		return;
	}
	/* A REJ of our REQ names us by our comm ID only (its sender may have
	 * had no connection: backlog full, no listener, stale) and acts only
	 * while the REQ is unanswered: a late copy must not tear down the
	 * connection a retried REQ has since made (kernel: cm_acquire_id with
	 * remote ID 0). Other REJs must name the peer we know. */
	if (r->message_rejected == REJ_MSG_REQ) {
		if (c->state != CMP_REQ_SENT && c->state != CMP_MRA_REQ_RCVD) {
			mismatch(e, c, "drop REJ of a REQ already answered", now);
			return;
		}
	} else if (c->remote_id && r->local_comm_id && r->local_comm_id != c->remote_id) {
		mismatch(e, c, "drop REJ: comm ID mismatch", now);
		return;
	}
	switch (c->state) {
	case CMP_REQ_SENT:
	case CMP_MRA_REQ_RCVD:
		timewait = r->reason == REJ_STALE_CONN;
		break;
	case CMP_REQ_RCVD:
	case CMP_MRA_REQ_SENT:
		timewait = 0;
		break;
	case CMP_REP_SENT:
	case CMP_MRA_REP_RCVD:
	case CMP_REP_RCVD:
	case CMP_MRA_REP_SENT:
	case CMP_ESTABLISHED:
		timewait = 1;
		break;
	default:
		stray(e, c, "drop REJ in this state", now);
		return;
	}
	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_REJ_RECEIVED, now);
	ev->reason = r->reason;
	ev->src = *src;
	ev->status = r->message_rejected;
	cmp_event_data(e, ev, r->private_data, sizeof(r->private_data), r->ari,
		       r->reject_info_length);
	if (timewait) {
		unpend(c);
		enter_timewait(e, c, "recv REJ", now);
	} else {
		enter_idle(e, c, "recv REJ", now);
	}
}

static void on_rep(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		   cmp_time now)
{
	const struct cmp_cm_rep *r = &m->u.rep;
	struct cmp_conn *c = cmp_find_local(e, r->remote_comm_id), *other;
	uint32_t rqpn;

	if (!c) {
		stray(e, NULL, "drop REP: unknown comm ID", now);
		return;
	}
	if (!src_ok(c, src)) {
		spoofed(e, c, "drop REP: source mismatch", now);
		return;
	}
	switch (c->state) {
	case CMP_REQ_SENT:
	case CMP_MRA_REQ_RCVD:
		break;
	case CMP_MRA_REP_SENT:
	case CMP_ESTABLISHED:
		if (r->local_comm_id != c->remote_id) {
			mismatch(e, c, "drop REP: comm ID mismatch", now);
			return;
		}
		/* Our MRA or RTU was lost: say it again. */
		e->st.rx_duplicate++;
		cmp_trace_drop(e, c, "recv duplicate REP: resend", now);
		cmp_resend_last(e, c);
		return;
	case CMP_REP_RCVD:
		e->st.rx_duplicate++;
		cmp_trace_drop(e, c, "drop duplicate REP", now);
		return;
	default:
		stray(e, c, "drop REP in this state", now);
		return;
	}
	/* An XRC target names its QP in the Local EECN field (cm.c). */
	rqpn = c->qp_type == CMP_QPT_XRC_INI ? r->local_eecn : r->local_qpn;
	other = cmp_find_qpn(e, rqpn, r->local_ca_guid);
	if (other && other != c) {
		e->st.rx_stale++;
		send_rej(e, NULL, &c->dst, m->hdr.tid, c->local_id, r->local_comm_id, REJ_MSG_REP,
			 REJ_STALE_CONN, NULL, 0, NULL, 0);
		cmp_trace_drop(e, c, "recv REP for a QP already connected: REJ stale", now);
		return;
	}
	cmp_timer_clear(e, c);
	c->remote_id = r->local_comm_id;
	c->remote_ca_guid = r->local_ca_guid;
	c->remote_qpn = rqpn;
	c->sq_psn = r->starting_psn; /* what the REP's sender expects: see on_req */
	c->initiator_depth = r->responder_resources < c->initiator_depth ? r->responder_resources
									 : c->initiator_depth;
	c->responder_resources = r->initiator_depth < c->responder_resources
					 ? r->initiator_depth
					 : c->responder_resources;
	c->rnr_retry_count = r->rnr_retry_count;
	c->av_timeout = cmp_ack_timeout(r->target_ack_delay, c->path.packet_life_time);
	/* The alternate path's ACK timeout also uses the target ACK delay (the
	 * kernel's cm_rep_handler does both). cmp_qp_attr derives alt_timeout
	 * as lifetime + 1, so store the timeout minus one, as on_req does. */
	if (c->has_alt)
		c->alt.packet_life_time =
			(uint8_t)(cmp_ack_timeout(r->target_ack_delay, c->alt.packet_life_time) - 1);
	cmp_index_remote(e, c);
	cmp_index_qpn(e, c);
	cmp_set_state(e, c, CMP_REP_RCVD, "recv REP", now);

	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_REP_RECEIVED, now);
	ev->remote_qpn = rqpn;
	ev->remote_qkey = r->local_qkey;
	ev->starting_psn = r->starting_psn;
	ev->responder_resources = r->responder_resources;
	ev->initiator_depth = r->initiator_depth;
	ev->flow_control = r->end_to_end_flow_control;
	ev->srq = r->srq;
	ev->rnr_retry_count = r->rnr_retry_count;
	ev->status = r->failover_accepted;
	ev->ece.vendor_id = cmp_cm_rep_vendor_id(r);
	ev->ece.attr_mod = m->hdr.attr_mod;
	ev->src = *src;
	cmp_event_data(e, ev, r->private_data, sizeof(r->private_data), NULL, 0);
}

/* Looks up the connection a response names and checks both comm IDs and
 * the source. NULL (counted) when it does not match. */
static struct cmp_conn *match(struct cmp_engine *e, const struct cmp_addr *src,
			      uint32_t local_id_field, uint32_t remote_id_field, const char *what,
			      cmp_time now)
{
	struct cmp_conn *c = cmp_find_local(e, remote_id_field);

	if (!c) {
		stray(e, NULL, what, now);
		return NULL;
	}
	if (c->remote_id != local_id_field) {
		mismatch(e, c, what, now);
		return NULL;
	}
	if (!src_ok(c, src)) {
		spoofed(e, c, what, now);
		return NULL;
	}
	return c;
}

static void on_rtu(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		   cmp_time now)
{
	struct cmp_conn *c = match(e, src, m->u.rtu.local_comm_id, m->u.rtu.remote_comm_id,
				   "drop RTU: no matching connection", now);

	if (!c)
		return;
	if (c->state != CMP_REP_SENT && c->state != CMP_MRA_REP_RCVD) {
		if (c->state == CMP_ESTABLISHED)
			e->st.rx_duplicate++;
		cmp_trace_drop(e, c, "drop RTU in this state", now);
		return;
	}
	cmp_timer_clear(e, c);
	cmp_set_state(e, c, CMP_ESTABLISHED, "recv RTU", now);
	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_RTU_RECEIVED, now);
	ev->src = *src;
	cmp_event_data(e, ev, m->u.rtu.private_data, sizeof(m->u.rtu.private_data), NULL, 0);
}

static void on_dreq(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		    cmp_time now)
{
	const struct cmp_cm_dreq *r = &m->u.dreq;
	struct cmp_conn *c = cmp_find_local(e, r->remote_comm_id);
	struct cmp_addr back = reply_addr(src);

	if (!c) {
		/* Already gone: answer anyway so the peer stops retrying (as the
		 * kernel does), but act on nothing. */
		stray(e, NULL, "recv DREQ for unknown comm ID: DREP", now);
		send_drep(e, NULL, &back, m->hdr.tid, r->remote_comm_id, r->local_comm_id, NULL, 0, 0);
		return;
	}
	if (c->remote_id != r->local_comm_id || c->local_qpn != r->remote_qpn_eecn) {
		mismatch(e, c, "drop DREQ: comm ID or QPN mismatch", now);
		return;
	}
	if (!src_ok(c, src)) {
		spoofed(e, c, "drop DREQ: source mismatch", now);
		return;
	}
	/* Take the DREQ's TID only where the DREQ is answered: a DREQ dropped
	 * in, say, REP_RCVD must not change the TID of the RTU or REJ that
	 * still answers the REQ's transaction. */
	switch (c->state) {
	case CMP_REP_SENT:
	case CMP_MRA_REP_RCVD:
	case CMP_ESTABLISHED:
	case CMP_DREQ_SENT:
		c->tid = m->hdr.tid;
		cmp_timer_clear(e, c);
		cmp_set_state(e, c, CMP_DREQ_RCVD, "recv DREQ", now);
		if (c->user_gone) {
			/* Nobody to ask: answer and wait out TimeWait. */
			send_drep(e, c, &c->dst, c->tid, c->local_id, c->remote_id, NULL, 0, 1);
			enter_timewait(e, c, "send DREP (user gone)", now);
			return;
		}
		break;
	case CMP_TIMEWAIT:
		e->st.rx_duplicate++;
		c->tid = m->hdr.tid; /* the DREP echoes this DREQ */
		cmp_trace_drop(e, c, "recv DREQ in TIMEWAIT: resend DREP", now);
		send_drep(e, c, &c->dst, c->tid, c->local_id, c->remote_id, NULL, 0, 0);
		return;
	case CMP_DREQ_RCVD:
		e->st.rx_duplicate++;
		cmp_trace_drop(e, c, "drop duplicate DREQ", now);
		return;
	default:
		stray(e, c, "drop DREQ in this state", now);
		return;
	}
	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_DREQ_RECEIVED, now);
	ev->src = *src;
	cmp_event_data(e, ev, r->private_data, sizeof(r->private_data), NULL, 0);
}

static void on_drep(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		    cmp_time now)
{
	struct cmp_conn *c = match(e, src, m->u.drep.local_comm_id, m->u.drep.remote_comm_id,
				   "drop DREP: no matching connection", now);

	if (!c)
		return;
	if (c->state != CMP_DREQ_SENT) {
		if (c->state == CMP_TIMEWAIT)
			e->st.rx_duplicate++;
		cmp_trace_drop(e, c, "drop DREP in this state", now);
		return;
	}
	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_DREP_RECEIVED, now);
	ev->src = *src;
	cmp_event_data(e, ev, m->u.drep.private_data, sizeof(m->u.drep.private_data), NULL, 0);
	enter_timewait(e, c, "recv DREP", now);
}

static void on_lap(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		   cmp_time now)
{
	struct cmp_conn *c = match(e, src, m->u.lap.local_comm_id, m->u.lap.remote_comm_id,
				   "drop LAP: no matching connection", now);
	struct cmp_cm_msg a;

	if (!c)
		return;
	if (c->state != CMP_ESTABLISHED) {
		stray(e, c, "drop LAP in this state", now);
		return;
	}
	/* Path migration is not implemented: say so, as IBTA 12.8 asks. */
	msg_init(&a, UMAD_CM_ATTR_APR, m->hdr.tid);
	a.u.apr.local_comm_id = c->local_id;
	a.u.apr.remote_comm_id = c->remote_id;
	a.u.apr.ap_status = APR_UNSUPPORTED;
	cmp_send(e, c, &c->dst, &a, 0);
	cmp_trace_drop(e, c, "recv LAP: APR unsupported", now);
	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_LAP_RECEIVED, now);
	ev->src = *src;
	ev->status = APR_UNSUPPORTED;
}

/* Room in by_sidr for one more passive SIDR request, so that its entry
 * cannot fail to go in once the connection exists. */
static int sidr_room(struct cmp_engine *e)
{
	if (cmp_map_reserve(&e->by_sidr, e->by_sidr.len + 1)) {
		e->st.nomem++;
		return -1;
	}
	return 0;
}

static void on_sidr_req(struct cmp_engine *e, const struct cmp_addr *src,
			const struct cmp_cm_msg *m, cmp_time now)
{
	const struct cmp_cm_sidr_req *r = &m->u.sidr_req;
	struct cmp_addr back = reply_addr(src);
	struct cmp_map_key k = cmp_sidr_key(r->request_id, src);
	struct cmp_listen *l;
	struct cmp_conn *c;
	struct cmp_cm_msg rep;

	if (cmp_map_get(&e->by_sidr, k)) {
		e->st.rx_duplicate++;
		cmp_trace_drop(e, NULL, "drop duplicate SIDR_REQ", now);
		return;
	}
	l = cmp_listen_match(e, r->service_id);
	if (!l || l->pending >= l->backlog || e->st.half_open >= e->s.max_pending ||
	    sidr_room(e) || !(c = cmp_conn_alloc(e, CMP_IDLE, l->ctx))) {
		if (!l)
			e->st.rx_no_listener++;
		else if (l->pending < l->backlog && e->st.half_open >= e->s.max_pending)
			e->st.half_open_drops++;
		else
			e->st.backlog_drops++;
		msg_init(&rep, UMAD_CM_ATTR_SIDR_REP, m->hdr.tid);
		rep.u.sidr_rep.request_id = r->request_id;
		rep.u.sidr_rep.status = l ? SIDR_REJECT : SIDR_UNSUPPORTED;
		rep.u.sidr_rep.service_id = r->service_id;
		cmp_send(e, NULL, &back, &rep, 0);
		return;
	}
	cmp_half_open_begin(e, c);
	c->listen = l;
	c->pending = 1;
	l->pending++;
	c->tid = m->hdr.tid;
	c->remote_id = r->request_id;
	c->service_id = r->service_id;
	c->dst = back;
	c->path.pkey = r->pkey;
	(void)cmp_map_put(&e->by_sidr, k, c); /* sidr_room made room */
	c->indexed |= 4;
	cmp_set_state(e, c, CMP_SIDR_REQ_RCVD, "recv SIDR_REQ", now);
	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_SIDR_REQ_RECEIVED, now);
	ev->listen = l;
	ev->listen_ctx = l->ctx;
	ev->service_id = r->service_id;
	ev->src = *src;
	ev->path.pkey = r->pkey;
	cmp_event_data(e, ev, r->private_data, sizeof(r->private_data), NULL, 0);
}

static void on_sidr_rep(struct cmp_engine *e, const struct cmp_addr *src,
			const struct cmp_cm_msg *m, cmp_time now)
{
	const struct cmp_cm_sidr_rep *r = &m->u.sidr_rep;
	struct cmp_conn *c = cmp_find_local(e, r->request_id);

	if (!c || c->state != CMP_SIDR_REQ_SENT) {
		stray(e, c, "drop SIDR_REP: no pending request", now);
		return;
	}
	if (!src_ok(c, src)) {
		spoofed(e, c, "drop SIDR_REP: source mismatch", now);
		return;
	}
	struct cmp_event *ev = cmp_emit(e, c, CMP_EV_SIDR_REP_RECEIVED, now);
	ev->status = r->status;
	ev->remote_qpn = r->qpn;
	ev->remote_qkey = r->qkey;
	ev->service_id = r->service_id;
	ev->ece.vendor_id = cmp_cm_sidr_rep_vendor_id(r);
	ev->ece.attr_mod = m->hdr.attr_mod;
	ev->src = *src;
	cmp_event_data(e, ev, r->private_data, sizeof(r->private_data), r->additional_info,
		       r->additional_info_length);
	enter_idle(e, c, "recv SIDR_REP", now);
}

void cmp_on_mad(struct cmp_engine *e, const struct cmp_addr *src, const struct cmp_cm_msg *m,
		cmp_time now)
{
	switch (m->hdr.attr_id) {
	case UMAD_CM_ATTR_REQ: on_req(e, src, m, now); break;
	case UMAD_CM_ATTR_MRA: on_mra(e, src, m, now); break;
	case UMAD_CM_ATTR_REJ: on_rej(e, src, m, now); break;
	case UMAD_CM_ATTR_REP: on_rep(e, src, m, now); break;
	case UMAD_CM_ATTR_RTU: on_rtu(e, src, m, now); break;
	case UMAD_CM_ATTR_DREQ: on_dreq(e, src, m, now); break;
	case UMAD_CM_ATTR_DREP: on_drep(e, src, m, now); break;
	case UMAD_CM_ATTR_LAP: on_lap(e, src, m, now); break;
	case UMAD_CM_ATTR_SIDR_REQ: on_sidr_req(e, src, m, now); break;
	case UMAD_CM_ATTR_SIDR_REP: on_sidr_rep(e, src, m, now); break;
	default: stray(e, NULL, "drop CM attribute the engine does not handle", now); break;
	}
}

/* ---- timers -------------------------------------------------------------------- */

void cmp_on_timer(struct cmp_engine *e, struct cmp_conn *c, enum cmp_timer_kind kind,
		  cmp_time now)
{
	/* The timer says what it was armed for; only enter_timewait() arms a
	 * TimeWait timer, and every other one is a retry. */
	if (kind == CMP_T_TIMEWAIT) {
		cmp_unindex(e, c);
		cmp_set_state(e, c, CMP_IDLE, "timeout TIMEWAIT", now);
		if (c->user_gone) {
			cmp_conn_free(e, c);
			return;
		}
		cmp_emit(e, c, CMP_EV_TIMEWAIT_EXIT, now);
		return;
	}
	if (c->retries_left) {
		c->retries_left--;
		e->st.retransmits++;
		/* After an MRA's grace period the original sender tries again. */
		if (c->state == CMP_MRA_REQ_RCVD)
			cmp_set_state(e, c, CMP_REQ_SENT, "timeout MRA wait: resend REQ", now);
		else if (c->state == CMP_MRA_REP_RCVD)
			cmp_set_state(e, c, CMP_REP_SENT, "timeout MRA wait: resend REP", now);
		else
			cmp_trace_drop(e, c, "timeout: resend", now);
		cmp_resend_last(e, c);
		cmp_timer_set(e, c, CMP_T_RETRY, now + c->base_timeout);
		return;
	}
	e->st.timeouts++;
	switch (c->state) {
	case CMP_REQ_SENT:
	case CMP_MRA_REQ_RCVD:
		/* Tell the peer, so a REP it may have sent is not retried forever. */
		send_rej_timeout(e, c);
		cmp_emit(e, c, CMP_EV_REQ_ERROR, now);
		enter_idle(e, c, "timeout REQ: retries exhausted", now);
		break;
	case CMP_REP_SENT:
	case CMP_MRA_REP_RCVD:
		send_rej_timeout(e, c);
		cmp_emit(e, c, CMP_EV_REP_ERROR, now);
		enter_idle(e, c, "timeout REP: retries exhausted", now);
		break;
	case CMP_DREQ_SENT:
		cmp_emit(e, c, CMP_EV_DREQ_ERROR, now);
		enter_timewait(e, c, "timeout DREQ: retries exhausted", now);
		break;
	case CMP_SIDR_REQ_SENT:
		cmp_emit(e, c, CMP_EV_SIDR_REQ_ERROR, now);
		enter_idle(e, c, "timeout SIDR_REQ: retries exhausted", now);
		break;
	default:
		break;
	}
}

/* ---- user calls ------------------------------------------------------------------- */

static int fail(int err)
{
	errno = err;
	return -1;
}

/* A user call makes room for what it will queue before it changes
 * anything: out of memory, it fails with ENOMEM and may be retried. */
static int no_room(struct cmp_engine *e)
{
	return cmp_step_reserve(e) != 0;
}

int cmp_connect(struct cmp_engine *e, const struct cmp_req_param *p, void *ctx,
		struct cmp_conn **out, cmp_time now)
{
	struct cmp_conn *c;
	struct cmp_cm_msg m;
	const struct cmp_path *pp;

	if (!p || !p->primary || !out ||
	    (p->qp_type != CMP_QPT_RC && p->qp_type != CMP_QPT_UC && p->qp_type != CMP_QPT_XRC_INI) ||
	    p->private_data_len > CMP_REQ_PDATA || (p->private_data_len && !p->private_data) ||
	    p->primary->mtu < 1 || p->primary->mtu > 5)
		return fail(EINVAL);
	if (no_room(e))
		return fail(ENOMEM);
	c = cmp_conn_alloc(e, CMP_IDLE, ctx);
	if (!c)
		return fail(ENOMEM);
	c->active = 1;
	c->path = *p->primary;
	/* settings.packet_life_time is documented as the lifetime of a path
	 * that gives none (RoCE paths have no SA record), but was never used. */
	if (!c->path.packet_life_time)
		c->path.packet_life_time = e->s.packet_life_time;
	pp = &c->path;
	if (p->alternate) {
		c->alt = *p->alternate;
		if (!c->alt.packet_life_time)
			c->alt.packet_life_time = e->s.packet_life_time;
		c->has_alt = 1;
	}
	c->service_id = p->service_id;
	c->local_qpn = p->qpn & 0xFFFFFF;
	c->rq_psn = p->starting_psn & 0xFFFFFF; /* ours to receive: see on_req */
	c->qp_type = p->qp_type;
	c->responder_resources = p->responder_resources;
	c->initiator_depth = p->initiator_depth;
	c->retry_count = p->retry_count > 7 ? 7 : p->retry_count;
	c->rnr_retry_count = p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count;
	c->flow_control = p->flow_control;
	c->srq = p->srq;
	c->remote_cm_response_timeout = p->remote_cm_response_timeout ? p->remote_cm_response_timeout
								      : e->s.cm_response_timeout;
	c->local_cm_response_timeout = p->local_cm_response_timeout ? p->local_cm_response_timeout
								    : e->s.cm_response_timeout;
	c->max_cm_retries = p->max_cm_retries ? p->max_cm_retries : e->s.max_cm_retries;
	if (c->max_cm_retries > 15)
		c->max_cm_retries = 15;
	c->av_timeout = cmp_ack_timeout(e->s.local_ca_ack_delay, pp->packet_life_time);
	c->tid = own_tid(e, c->local_id);
	addr_from_path(&c->dst, pp);

	msg_init(&m, UMAD_CM_ATTR_REQ, c->tid);
	m.hdr.attr_mod = p->ece.attr_mod;
	struct cmp_cm_req *r = &m.u.req;
	r->local_comm_id = c->local_id;
	r->vendor_id = p->ece.vendor_id & 0xFFFFFF;
	r->service_id = p->service_id;
	r->local_ca_guid = e->s.local_ca_guid;
	r->local_qkey = 0;
	r->local_qpn = c->local_qpn;
	r->initiator_depth = c->initiator_depth;
	r->remote_cm_response_timeout = c->remote_cm_response_timeout;
	r->end_to_end_flow_control = c->flow_control;
	r->starting_psn = c->rq_psn;
	r->local_cm_response_timeout = c->local_cm_response_timeout;
	r->pkey = pp->pkey;
	r->path_mtu = pp->mtu;
	r->max_cm_retries = c->max_cm_retries;
	if (c->qp_type == CMP_QPT_XRC_INI) {
		/* The kernel's cm_format_req leaves responder resources, the
		 * retry counts and SRQ out for an XRC initiator: it has no
		 * receive side (the target's SRQ takes the messages). */
		r->transport_service_type = CMP_REQ_TST_XRC;
		r->extended_transport_type = CMP_REQ_ETT_XRC;
	} else {
		r->transport_service_type = c->qp_type;
		r->responder_resources = c->responder_resources;
		r->retry_count = c->retry_count;
		r->rnr_retry_count = c->rnr_retry_count;
		r->srq = c->srq;
	}
	REQ_PATH_WRITE(r, pp, primary, c->av_timeout);
	if (req_lids_permissive(pp))
		r->primary_local_lid = r->primary_remote_lid = CMP_LID_PERMISSIVE;
	if (c->has_alt) {
		REQ_PATH_WRITE(r, &c->alt, alternate,
			       cmp_ack_timeout(e->s.local_ca_ack_delay, c->alt.packet_life_time));
		if (req_lids_permissive(&c->alt))
			r->alternate_local_lid = r->alternate_remote_lid = CMP_LID_PERMISSIVE;
	}
	copy_pdata(r->private_data, sizeof(r->private_data), p->private_data, p->private_data_len);
	cmp_send(e, c, &c->dst, &m, 1);
	arm_retry(e, c, 2 * conv(pp->packet_life_time) + conv(c->remote_cm_response_timeout),
		  c->max_cm_retries, now);
	cmp_set_state(e, c, CMP_REQ_SENT, "user connect: send REQ", now);
	*out = c;
	return 0;
}

int cmp_accept(struct cmp_engine *e, struct cmp_conn *c, const struct cmp_rep_param *p,
	       cmp_time now)
{
	struct cmp_cm_msg m;

	if (!c || !p || c->user_gone || p->private_data_len > CMP_REP_PDATA ||
	    (p->private_data_len && !p->private_data))
		return fail(EINVAL);
	if (c->state != CMP_REQ_RCVD && c->state != CMP_MRA_REQ_SENT)
		return fail(EINVAL);
	if (no_room(e))
		return fail(ENOMEM);
	c->local_qpn = p->qpn & 0xFFFFFF;
	c->rq_psn = p->starting_psn & 0xFFFFFF; /* ours to receive: see on_req */
	/* Never promise more than the peer asked for. */
	c->responder_resources = p->responder_resources < c->responder_resources
					 ? p->responder_resources
					 : c->responder_resources;
	c->initiator_depth = p->initiator_depth < c->initiator_depth ? p->initiator_depth
								     : c->initiator_depth;
	msg_init(&m, UMAD_CM_ATTR_REP, c->tid);
	m.hdr.attr_mod = p->ece.attr_mod;
	struct cmp_cm_rep *r = &m.u.rep;
	r->local_comm_id = c->local_id;
	r->remote_comm_id = c->remote_id;
	r->starting_psn = c->rq_psn;
	r->responder_resources = c->responder_resources;
	r->target_ack_delay = e->s.local_ca_ack_delay;
	r->failover_accepted = p->failover_accepted;
	r->rnr_retry_count = p->rnr_retry_count > 7 ? 7 : p->rnr_retry_count;
	if (c->qp_type == CMP_QPT_XRC_TGT) {
		/* The kernel's cm_format_rep: an XRC target's QPN goes in the
		 * Local EECN field, SRQ is 1, no initiator depth nor flow
		 * control. */
		r->local_eecn = c->local_qpn;
		r->srq = 1;
	} else {
		r->local_qpn = c->local_qpn;
		r->initiator_depth = c->initiator_depth;
		r->end_to_end_flow_control = p->flow_control;
		r->srq = p->srq;
	}
	r->local_ca_guid = e->s.local_ca_guid;
	cmp_cm_rep_set_vendor_id(r, p->ece.vendor_id);
	copy_pdata(r->private_data, sizeof(r->private_data), p->private_data, p->private_data_len);
	cmp_send(e, c, &c->dst, &m, 1);
	unpend(c);
	arm_retry(e, c, 2 * conv(c->path.packet_life_time) + conv(c->remote_cm_response_timeout),
		  c->max_cm_retries, now);
	cmp_set_state(e, c, CMP_REP_SENT, "user accept: send REP", now);
	return 0;
}

int cmp_rtu(struct cmp_engine *e, struct cmp_conn *c, const void *pdata, uint8_t len,
	    cmp_time now)
{
	struct cmp_cm_msg m;

	if (!c || c->user_gone || len > CMP_RTU_PDATA || (len && !pdata))
		return fail(EINVAL);
	if (c->state != CMP_REP_RCVD && c->state != CMP_MRA_REP_SENT)
		return fail(EINVAL);
	if (no_room(e))
		return fail(ENOMEM);
	msg_init(&m, UMAD_CM_ATTR_RTU, c->tid);
	m.u.rtu.local_comm_id = c->local_id;
	m.u.rtu.remote_comm_id = c->remote_id;
	copy_pdata(m.u.rtu.private_data, sizeof(m.u.rtu.private_data), pdata, len);
	cmp_send(e, c, &c->dst, &m, 1); /* kept: a duplicate REP gets it again */
	cmp_set_state(e, c, CMP_ESTABLISHED, "user RTU: send RTU", now);
	return 0;
}

int cmp_reject(struct cmp_engine *e, struct cmp_conn *c, uint16_t reason, const void *ari,
	       uint8_t ari_len, const void *pdata, uint8_t len, cmp_time now)
{
	uint8_t what;
	int timewait = 0;

	if (!c || c->user_gone || ari_len > CMP_ARI_SIZE || len > CMP_REJ_PDATA ||
	    (len && !pdata) || (ari_len && !ari))
		return fail(EINVAL);
	switch (c->state) {
	case CMP_REQ_SENT:
	case CMP_MRA_REQ_RCVD:
		what = REJ_MSG_OTHER;
		break;
	case CMP_REQ_RCVD:
	case CMP_MRA_REQ_SENT:
		what = REJ_MSG_REQ;
		break;
	case CMP_REP_RCVD:
	case CMP_MRA_REP_SENT:
		what = REJ_MSG_REP;
		break;
	case CMP_REP_SENT:
	case CMP_MRA_REP_RCVD:
		what = REJ_MSG_OTHER;
		timewait = 1;
		break;
	default:
		return fail(EINVAL);
	}
	if (no_room(e))
		return fail(ENOMEM);
	send_rej(e, c, &c->dst, c->tid, rej_local_id(c), c->remote_id, what, reason, ari, ari_len,
		 pdata, len);
	if (timewait) {
		enter_timewait(e, c, "user reject: send REJ", now);
	} else {
		enter_idle(e, c, "user reject: send REJ", now);
	}
	return 0;
}

int cmp_mra(struct cmp_engine *e, struct cmp_conn *c, uint8_t service_timeout,
	    const void *pdata, uint8_t len, cmp_time now)
{
	uint8_t t = service_timeout ? service_timeout : e->s.mra_service_timeout;

	if (!c || c->user_gone || len > CMP_MRA_PDATA || (len && !pdata) || t > 31)
		return fail(EINVAL);
	if (c->state != CMP_REQ_RCVD && c->state != CMP_REP_RCVD)
		return fail(EINVAL);
	if (no_room(e))
		return fail(ENOMEM);
	if (c->state == CMP_REQ_RCVD) {
		send_mra(e, c, MRA_MSG_REQ, t, pdata, len);
		cmp_set_state(e, c, CMP_MRA_REQ_SENT, "user MRA: send MRA for REQ", now);
	} else if (c->state == CMP_REP_RCVD) {
		send_mra(e, c, MRA_MSG_REP, t, pdata, len);
		cmp_set_state(e, c, CMP_MRA_REP_SENT, "user MRA: send MRA for REP", now);
	} else {
		return fail(EINVAL);
	}
	return 0;
}

int cmp_notify(struct cmp_engine *e, struct cmp_conn *c, cmp_time now)
{
	if (!c || c->user_gone)
		return fail(EINVAL);
	if (c->state == CMP_ESTABLISHED)
		return 0;
	if (c->state != CMP_REP_SENT && c->state != CMP_MRA_REP_RCVD)
		return fail(EINVAL);
	if (no_room(e))
		return fail(ENOMEM);
	cmp_timer_clear(e, c);
	cmp_set_state(e, c, CMP_ESTABLISHED, "user notify: first data before RTU", now);
	cmp_emit(e, c, CMP_EV_USER_ESTABLISHED, now);
	return 0;
}

int cmp_disconnect(struct cmp_engine *e, struct cmp_conn *c, const void *pdata, uint8_t len,
		   cmp_time now)
{
	if (!c || c->user_gone || (len && !pdata))
		return fail(EINVAL);
	if (c->state == CMP_ESTABLISHED) {
		if (len > CMP_DREQ_PDATA)
			return fail(EINVAL);
		if (no_room(e))
			return fail(ENOMEM);
		send_dreq(e, c, pdata, len, now);
		cmp_set_state(e, c, CMP_DREQ_SENT, "user disconnect: send DREQ", now);
		return 0;
	}
	if (c->state == CMP_DREQ_RCVD) {
		if (len > CMP_DREP_PDATA)
			return fail(EINVAL);
		if (no_room(e))
			return fail(ENOMEM);
		send_drep(e, c, &c->dst, c->tid, c->local_id, c->remote_id, pdata, len, 1);
		enter_timewait(e, c, "user disconnect: send DREP", now);
		return 0;
	}
	return fail(EINVAL);
}

int cmp_sidr_req(struct cmp_engine *e, const struct cmp_sidr_req_param *p, void *ctx,
		 struct cmp_conn **out, cmp_time now)
{
	struct cmp_conn *c;
	struct cmp_cm_msg m;

	if (!p || !p->path || !out || p->private_data_len > CMP_SIDR_REQ_PDATA ||
	    (p->private_data_len && !p->private_data))
		return fail(EINVAL);
	if (no_room(e))
		return fail(ENOMEM);
	c = cmp_conn_alloc(e, CMP_IDLE, ctx);
	if (!c)
		return fail(ENOMEM);
	c->active = 1;
	c->path = *p->path;
	c->service_id = p->service_id;
	c->tid = own_tid(e, c->local_id);
	addr_from_path(&c->dst, p->path);
	msg_init(&m, UMAD_CM_ATTR_SIDR_REQ, c->tid);
	m.u.sidr_req.request_id = c->local_id;
	m.u.sidr_req.pkey = p->path->pkey;
	m.u.sidr_req.service_id = p->service_id;
	copy_pdata(m.u.sidr_req.private_data, sizeof(m.u.sidr_req.private_data), p->private_data,
		   p->private_data_len);
	cmp_send(e, c, &c->dst, &m, 1);
	arm_retry(e, c, p->timeout_ns ? p->timeout_ns : e->s.sidr_timeout_ns,
		  p->max_retries ? p->max_retries : e->s.sidr_retries, now);
	cmp_set_state(e, c, CMP_SIDR_REQ_SENT, "user SIDR request: send SIDR_REQ", now);
	*out = c;
	return 0;
}

static void send_sidr_rep(struct cmp_engine *e, struct cmp_conn *c,
			  const struct cmp_sidr_rep_param *p)
{
	struct cmp_cm_msg m;

	msg_init(&m, UMAD_CM_ATTR_SIDR_REP, c->tid);
	m.hdr.attr_mod = p->ece.attr_mod;
	m.u.sidr_rep.request_id = c->remote_id;
	m.u.sidr_rep.status = p->status;
	m.u.sidr_rep.qpn = p->qpn & 0xFFFFFF;
	m.u.sidr_rep.qkey = p->qkey;
	m.u.sidr_rep.service_id = c->service_id;
	cmp_cm_sidr_rep_set_vendor_id(&m.u.sidr_rep, p->ece.vendor_id);
	m.u.sidr_rep.additional_info_length = p->info_len;
	copy_pdata(m.u.sidr_rep.additional_info, sizeof(m.u.sidr_rep.additional_info), p->info,
		   p->info_len);
	copy_pdata(m.u.sidr_rep.private_data, sizeof(m.u.sidr_rep.private_data), p->private_data,
		   p->private_data_len);
	cmp_send(e, c, &c->dst, &m, 0);
}

int cmp_sidr_rep(struct cmp_engine *e, struct cmp_conn *c, const struct cmp_sidr_rep_param *p,
		 cmp_time now)
{
	if (!c || !p || c->user_gone || c->state != CMP_SIDR_REQ_RCVD ||
	    p->private_data_len > CMP_SIDR_REP_PDATA || p->info_len > CMP_ARI_SIZE ||
	    (p->private_data_len && !p->private_data) || (p->info_len && !p->info))
		return fail(EINVAL);
	if (no_room(e))
		return fail(ENOMEM);
	send_sidr_rep(e, c, p);
	enter_idle(e, c, "user SIDR reply: send SIDR_REP", now);
	return 0;
}

/* A destroyed connection in DREQ_SENT: the kernel's cm_destroy_id cancels
 * the DREQ's retries and enters TimeWait (a DREP that comes later is then
 * absorbed there); with settings.destroy_retries_dreq the DREQ is retried
 * until the DREP or the retries run out, as if the user had stayed. */
static void destroy_in_dreq_sent(struct cmp_engine *e, struct cmp_conn *c, cmp_time now)
{
	if (!e->s.destroy_retries_dreq)
		enter_timewait(e, c, "user destroy: cancel DREQ retries", now);
}

/* What is sent and what follows, per state, is the kernel's cm_destroy_id
 * (docs/cm-engine.md has the table). */
void cmp_conn_destroy(struct cmp_engine *e, struct cmp_conn *c, cmp_time now)
{
	struct cmp_sidr_rep_param rej = { .status = SIDR_REJECT };

	if (!c || c->user_gone)
		return;
	/* Best effort: without room its MAD is lost as on the wire (cmp_send). */
	(void)cmp_step_reserve(e);
	c->user_gone = 1;
	/* Queued events for c are dropped: the user will never poll them. */
	cmp_purge_events(e, c);
	switch (c->state) {
	case CMP_IDLE:
		cmp_conn_free(e, c);
		return;
	case CMP_REQ_SENT:
	case CMP_MRA_REQ_RCVD:
		send_rej_timeout(e, c);
		enter_idle(e, c, "user destroy: send REJ", now);
		return;
	case CMP_REQ_RCVD:
	case CMP_MRA_REQ_SENT:
	case CMP_REP_RCVD:
	case CMP_MRA_REP_SENT:
		send_rej(e, c, &c->dst, c->tid, rej_local_id(c), c->remote_id,
			 c->state == CMP_REP_RCVD || c->state == CMP_MRA_REP_SENT ? REJ_MSG_REP
										    : REJ_MSG_REQ,
			 REJ_CONSUMER_DEFINED, NULL, 0, NULL, 0);
		enter_idle(e, c, "user destroy: send REJ", now);
		return;
	case CMP_REP_SENT:
	case CMP_MRA_REP_RCVD:
		send_rej(e, c, &c->dst, c->tid, c->local_id, c->remote_id, REJ_MSG_OTHER,
			 REJ_CONSUMER_DEFINED, NULL, 0, NULL, 0);
		enter_timewait(e, c, "user destroy: send REJ", now);
		return;
	case CMP_ESTABLISHED:
		if (c->qp_type == CMP_QPT_XRC_TGT) {
			/* The kernel's cm_destroy_id: an XRC target goes without
			 * a DREQ (the initiator side owns the connection). */
			enter_idle(e, c, "user destroy: XRC target, no DREQ", now);
			return;
		}
		send_dreq(e, c, NULL, 0, now);
		cmp_set_state(e, c, CMP_DREQ_SENT, "user destroy: send DREQ", now);
		destroy_in_dreq_sent(e, c, now);
		return;
	case CMP_DREQ_SENT:
		destroy_in_dreq_sent(e, c, now);
		return;
	case CMP_DREQ_RCVD:
		send_drep(e, c, &c->dst, c->tid, c->local_id, c->remote_id, NULL, 0, 1);
		enter_timewait(e, c, "user destroy: send DREP", now);
		return;
	case CMP_SIDR_REQ_RCVD:
		send_sidr_rep(e, c, &rej);
		enter_idle(e, c, "user destroy: send SIDR_REP reject", now);
		return;
	case CMP_SIDR_REQ_SENT:
		enter_idle(e, c, "user destroy", now);
		return;
	case CMP_TIMEWAIT:
	default:
		/* TimeWait runs out on its own; freed when it reaches IDLE. */
		return;
	}
}
