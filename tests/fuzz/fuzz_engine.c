/*
 * libFuzzer target: the CM engine (cm_proto/cmp_engine.h) driven by a
 * sequence of operations decoded from the input.
 *
 * Two engines, A (LID 1) and B (LID 2), talk over a small "wire": every MAD
 * either sends lands in a pool, and the input decides which queued MAD is
 * delivered (possibly mutated), dropped or duplicated. On top of that the
 * input injects hostile MADs built from templates of every CM message with
 * comm IDs drawn from the target engine's live connections (so they reach
 * deep states instead of dying as strays), from a right or wrong source,
 * raw bytes, advances the clock, and makes every user call on the
 * connections the user holds.
 *
 * Invariants (abort() on violation, besides ASan/UBSan):
 *   - no event names a connection the user has destroyed or never got;
 *   - the engine's internals are consistent after every step: timer heap
 *     back-pointers, listener pending counts, the connection count and cap,
 *     the half-open count and its cap (max_pending);
 *   - the statistics add up: rx = malformed + sum(rx_by_attr), tx = sum
 *     (tx_by_attr) = MADs drained, drop counters <= rx, peak >= live;
 *   - at the end, after destroying every listener and connection and
 *     running timers past every timeout, each engine has no connection and
 *     no timer left, and emits no event.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_engine_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define NODES 2
#define MAXC 32     /* connections the user holds, per node */
#define MAXL 4      /* listeners per node */
#define WIRE 32     /* MADs in flight */
#define MAXOPS 400  /* operations per input: keeps one run fast */

/* ---- input reader -------------------------------------------------------- */

struct in {
	const uint8_t *p;
	size_t n;
};

static uint8_t u8(struct in *in)
{
	if (!in->n)
		return 0;
	in->n--;
	return *in->p++;
}

/* Reads are sequenced statements: argument and initializer evaluation
 * order is unspecified in C, and an input must replay the same way. */
static uint16_t u16(struct in *in)
{
	uint16_t hi = u8(in);
	return (uint16_t)(hi << 8 | u8(in));
}

static uint32_t u32(struct in *in)
{
	uint32_t hi = u16(in);
	return hi << 16 | u16(in);
}

static void bytes(struct in *in, uint8_t *out, size_t n)
{
	size_t k = n < in->n ? n : in->n;

	memcpy(out, in->p, k);
	memset(out + k, 0, n - k);
	in->p += k;
	in->n -= k;
}

/* ---- the world ------------------------------------------------------------- */

struct node {
	struct cmp_engine *e;
	struct cmp_addr self; /* how the peer sees us (IB: LID; RoCE: GID) */
	struct cmp_conn *held[MAXC];
	int nheld;
	struct cmp_listen *lis[MAXL];
	int nlis;
	uint64_t drained; /* MADs taken from poll_tx */
};

struct wmad {
	int to;               /* destination node */
	struct cmp_addr src;  /* as the receiver sees the sender */
	uint8_t mad[CMP_MAD_SIZE];
};

struct world {
	struct node n[NODES];
	struct wmad wire[WIRE];
	int nwire;
	cmp_time now;
	int roce; /* paths without LIDs: MADs matched by GID */
};

static void addr_of(struct cmp_addr *a, int i, int roce)
{
	memset(a, 0, sizeof(*a));
	a->lid = roce ? 0 : (uint16_t)(i + 1);
	a->grh = (uint8_t)roce;
	a->gid[0] = 0xfe;
	a->gid[1] = 0x80;
	a->gid[15] = (uint8_t)(i + 1);
	a->qpn = 1;
	a->qkey = 0x80010000;
}

static void path_to(struct cmp_path *p, int from, int to, int roce, struct in *in)
{
	memset(p, 0, sizeof(*p));
	p->slid = roce ? 0 : (uint16_t)(from + 1);
	p->dlid = roce ? 0 : (uint16_t)(to + 1);
	p->sgid[0] = p->dgid[0] = 0xfe;
	p->sgid[1] = p->dgid[1] = 0x80;
	p->sgid[15] = (uint8_t)(from + 1);
	p->dgid[15] = (uint8_t)(to + 1);
	p->mtu = (uint8_t)(1 + u8(in) % 5);
	p->rate = 3;
	p->packet_life_time = (uint8_t)(u8(in) % 20);
	p->pkey = 0xFFFF;
	p->subnet_local = (uint8_t)!roce;
	p->roce = (uint8_t)roce;
	p->port_num = 1;
}

/* The invariant checks run after every operation; coverage feedback from
 * them is noise, and instrumenting their loops costs most of the time. */
#define NO_COVERAGE __attribute__((no_sanitize("coverage")))

NO_COVERAGE static int held_idx(const struct node *n, const struct cmp_conn *c)
{
	for (int i = 0; i < n->nheld; i++)
		if (n->held[i] == c)
			return i;
	return -1;
}

static void forget(struct node *n, int i)
{
	n->held[i] = n->held[--n->nheld];
}

/* Which node a MAD's address names, or -1 (a reply to a hostile source). */
static int route(const struct world *w, const struct cmp_addr *dst)
{
	for (int i = 0; i < NODES; i++) {
		const struct cmp_addr *s = &w->n[i].self;
		if (dst->grh ? memcmp(dst->gid, s->gid, 16) == 0 : dst->lid && dst->lid == s->lid)
			return i;
	}
	return -1;
}

/* Drains node i's TX queue onto the wire and its events into the user. */
static void drain(struct world *w, int i, int final)
{
	struct node *n = &w->n[i];
	struct cmp_tx tx;
	struct cmp_event ev;
	int again;

more:
	again = 0;
	while (cmp_engine_poll_tx(n->e, &tx)) {
		n->drained++;
		/* A queued MAD whose connection is gone has conn NULL: never a
		 * dangling pointer. */
		if (tx.conn && held_idx(n, tx.conn) < 0 && !cmp_find_local(n->e, tx.conn->local_id))
			abort();
		int to = route(w, &tx.dst);
		if (to < 0 || final)
			continue;
		if (w->nwire == WIRE) /* the oldest is lost */
			memmove(&w->wire[0], &w->wire[1], sizeof(w->wire[0]) * (WIRE - 1)), w->nwire--;
		struct wmad *m = &w->wire[w->nwire++];
		m->to = to;
		addr_of(&m->src, i, tx.dst.grh);
		memcpy(m->mad, tx.mad, CMP_MAD_SIZE);
	}
	while (cmp_engine_poll_event(n->e, &ev)) {
		if (final)
			abort(); /* nothing is held any more: nobody to tell */
		if (!ev.conn)
			abort();
		if (ev.type == CMP_EV_REQ_RECEIVED || ev.type == CMP_EV_SIDR_REQ_RECEIVED) {
			if (held_idx(n, ev.conn) >= 0 || !ev.listen)
				abort(); /* a new connection, from a listener */
			if (n->nheld < MAXC)
				n->held[n->nheld++] = ev.conn;
			else /* the user refuses it: that sends a REJ, drained below */
				cmp_conn_destroy(n->e, ev.conn, w->now), again = 1;
		} else if (held_idx(n, ev.conn) < 0) {
			abort(); /* an event for a connection the user let go */
		}
		if (ev.private_data_len > CMP_CM_DATA_SIZE || ev.ari_len > CMP_ARI_SIZE)
			abort();
		if ((ev.private_data_len && !ev.private_data) || (ev.ari_len && !ev.ari))
			abort();
	}
	if (again)
		goto more;
}

/* The engine's internal bookkeeping, and its statistics, add up. */
NO_COVERAGE static void check(struct world *w, int i)
{
	struct node *n = &w->n[i];
	struct cmp_engine *e = n->e;
	const struct cmp_stats *st = cmp_engine_stats(e);
	size_t live = 0, timers = 0, half_open = 0;
	uint64_t rx = 0, tx = 0;
	unsigned pend[MAXL] = { 0 };

	for (size_t k = 1; k < e->heap_len; k++)
		if (e->heap[k].deadline < e->heap[(k - 1) / 2].deadline)
			abort(); /* heap order */
	for (size_t k = 0; k < e->by_local.cap; k++) {
		struct cmp_conn *c = e->by_local.slots[k].val;
		if (!c)
			continue;
		live++;
		if (c->heap_idx != SIZE_MAX) {
			if (c->heap_idx >= e->heap_len || e->heap[c->heap_idx].c != c)
				abort();
			timers++;
		}
		if (c->state >= CMP_STATE_COUNT)
			abort();
		if (c->half_open) {
			half_open++;
			if (c->active || (c->state != CMP_REQ_RCVD && c->state != CMP_MRA_REQ_SENT &&
					  c->state != CMP_REP_SENT && c->state != CMP_MRA_REP_RCVD &&
					  c->state != CMP_SIDR_REQ_RCVD))
				abort(); /* only passive handshakes in progress are half-open */
		} else if (!c->active && (c->state == CMP_REQ_RCVD || c->state == CMP_MRA_REQ_SENT)) {
			abort(); /* a passive conn the cap does not count */
		}
		/* A connection the user let go is freed on reaching IDLE. */
		if (c->user_gone && c->state == CMP_IDLE)
			abort();
		if (!c->user_gone && held_idx(n, c) < 0)
			abort(); /* the user lost track: an engine leak */
		if (c->pending) {
			int li = -1;
			for (int j = 0; j < n->nlis; j++)
				if (n->lis[j] == c->listen)
					li = j;
			if (li < 0)
				abort(); /* pending on a listener that is gone */
			pend[li]++;
		}
	}
	for (int j = 0; j < n->nlis; j++)
		if (pend[j] != n->lis[j]->pending || n->lis[j]->pending > n->lis[j]->backlog)
			abort();
	if (half_open != st->half_open || half_open > e->s.max_pending ||
	    st->half_open_peak < half_open || st->rx_spoofed > st->rx_mismatch)
		abort();
	if (live != cmp_engine_conn_count(e) || timers != cmp_engine_timer_count(e) ||
	    live > e->s.max_conns)
		abort();
	for (int k = 0; k < 32; k++) {
		rx += st->rx_by_attr[k];
		tx += st->tx_by_attr[k];
	}
	if (st->rx != rx + st->rx_malformed || st->tx != tx || st->tx != n->drained)
		abort();
	if (st->rx_stray + st->rx_mismatch + st->rx_malformed > st->rx ||
	    st->rx_no_listener + st->backlog_drops > st->rx)
		abort();
	if (st->conns_peak < live || st->conns < st->conns_peak)
		abort();
}

/* ---- hostile and mutated MADs --------------------------------------------- */

/* A comm ID the target knows (its own or its peer's), or a near miss. */
static uint32_t pick_id(struct in *in, struct node *n, int local)
{
	uint8_t how = u8(in);
	uint32_t id = 0;

	if (n->nheld) {
		struct cmp_conn *c = n->held[how % n->nheld];
		id = local ? cmp_conn_local_id(c) : cmp_conn_remote_id(c);
	}
	switch ((how >> 5) & 7) {
	case 0: return u32(in);        /* a guess */
	case 1: return id + 1;         /* near miss */
	case 2: return id ^ (1u << (u8(in) & 31));
	case 3: return 0;
	default: return id;            /* the right one */
	}
}

static void template_msg(struct in *in, struct node *n, struct cmp_cm_msg *m)
{
	static const uint16_t attrs[] = {
		UMAD_CM_ATTR_REQ, UMAD_CM_ATTR_MRA, UMAD_CM_ATTR_REJ, UMAD_CM_ATTR_REP,
		UMAD_CM_ATTR_RTU, UMAD_CM_ATTR_DREQ, UMAD_CM_ATTR_DREP, UMAD_CM_ATTR_LAP,
		UMAD_CM_ATTR_APR, UMAD_CM_ATTR_SIDR_REQ, UMAD_CM_ATTR_SIDR_REP,
	};
	uint8_t k = u8(in);
	/* Our local ID goes in their "remote comm ID" field and vice versa. */
	uint32_t mine = pick_id(in, n, 1), theirs = pick_id(in, n, 0);

	memset(m, 0, sizeof(*m));
	m->hdr.attr_id = attrs[k % (sizeof(attrs) / sizeof(attrs[0]))];
	m->hdr.method = UMAD_METHOD_SEND;
	m->hdr.tid = (uint64_t)u32(in) << 32 | theirs;
	switch (m->hdr.attr_id) {
	case UMAD_CM_ATTR_REQ: {
		struct cmp_cm_req *r = &m->u.req;
		r->local_comm_id = (k & 0x80) ? theirs : u32(in);
		r->service_id = u8(in) & 3;
		r->local_ca_guid = 0x0002c90300000000ULL | (u8(in) & 3);
		r->local_qpn = u8(in);
		r->transport_service_type = u8(in) & 3;
		r->responder_resources = u8(in);
		r->initiator_depth = u8(in);
		r->path_mtu = u8(in) & 15;
		r->remote_cm_response_timeout = u8(in) & 31;
		r->local_cm_response_timeout = u8(in) & 31;
		r->max_cm_retries = u8(in) & 15;
		r->primary_local_ack_timeout = u8(in) & 31;
		r->primary_local_lid = u16(in);
		r->alternate_local_lid = (k & 0x40) ? u16(in) : 0;
		r->starting_psn = u32(in) & 0xFFFFFF;
		break;
	}
	case UMAD_CM_ATTR_MRA:
		m->u.mra.local_comm_id = theirs;
		m->u.mra.remote_comm_id = mine;
		m->u.mra.message_mraed = u8(in) & 3;
		m->u.mra.service_timeout = u8(in) & 31;
		break;
	case UMAD_CM_ATTR_REJ:
		m->u.rej.local_comm_id = theirs;
		m->u.rej.remote_comm_id = mine;
		m->u.rej.message_rejected = u8(in) & 3;
		m->u.rej.reason = u8(in) & 0x3F;
		m->u.rej.reject_info_length = u8(in) & 0x7F;
		if (m->u.rej.reason == 4 && (k & 0x40)) { /* REJ(Timeout) with a CA GUID */
			m->u.rej.reject_info_length = 8;
			m->u.rej.ari[6] = 0;
			m->u.rej.ari[7] = u8(in) & 3;
			m->u.rej.ari[0] = 0x00; m->u.rej.ari[1] = 0x02;
			m->u.rej.ari[2] = 0xc9; m->u.rej.ari[3] = 0x03;
		}
		break;
	case UMAD_CM_ATTR_REP:
		m->u.rep.local_comm_id = theirs;
		m->u.rep.remote_comm_id = mine;
		m->u.rep.local_qpn = u8(in);
		m->u.rep.local_ca_guid = 0x0002c90300000000ULL | (u8(in) & 3);
		m->u.rep.responder_resources = u8(in);
		m->u.rep.initiator_depth = u8(in);
		m->u.rep.target_ack_delay = u8(in) & 31;
		m->u.rep.starting_psn = u32(in) & 0xFFFFFF;
		break;
	case UMAD_CM_ATTR_RTU:
		m->u.rtu.local_comm_id = theirs;
		m->u.rtu.remote_comm_id = mine;
		break;
	case UMAD_CM_ATTR_DREQ:
		m->u.dreq.local_comm_id = theirs;
		m->u.dreq.remote_comm_id = mine;
		m->u.dreq.remote_qpn_eecn = u8(in);
		break;
	case UMAD_CM_ATTR_DREP:
		m->u.drep.local_comm_id = theirs;
		m->u.drep.remote_comm_id = mine;
		break;
	case UMAD_CM_ATTR_LAP:
		m->u.lap.local_comm_id = theirs;
		m->u.lap.remote_comm_id = mine;
		m->u.lap.remote_qpn_eecn = u8(in);
		break;
	case UMAD_CM_ATTR_APR:
		m->u.apr.local_comm_id = theirs;
		m->u.apr.remote_comm_id = mine;
		m->u.apr.ap_status = u8(in);
		break;
	case UMAD_CM_ATTR_SIDR_REQ:
		m->u.sidr_req.request_id = (k & 0x80) ? theirs : u32(in);
		m->u.sidr_req.service_id = u8(in) & 3;
		m->u.sidr_req.pkey = 0xFFFF;
		break;
	case UMAD_CM_ATTR_SIDR_REP:
		m->u.sidr_rep.request_id = mine;
		m->u.sidr_rep.status = u8(in);
		m->u.sidr_rep.qpn = u8(in);
		m->u.sidr_rep.additional_info_length = u8(in);
		break;
	}
}

/* Who a hostile MAD claims to come from: the real peer, or near it. */
static void pick_src(struct in *in, struct world *w, int to, struct cmp_addr *src)
{
	uint8_t how = u8(in);

	addr_of(src, 1 - to, w->roce);
	switch (how & 7) {
	case 0: src->lid = u16(in); break;           /* wrong LID */
	case 1: src->gid[15] ^= (uint8_t)(1 + (how >> 3)); break; /* wrong GID */
	case 2: src->grh = (uint8_t)!src->grh; break;   /* GRH where none was, or none */
	case 3: src->qpn = u32(in) & 0xFFFFFF; break;   /* not QP1 */
	case 4: addr_of(src, to, w->roce); break;       /* claims to be the target */
	default: break;                                  /* the real peer */
	}
}

/* Flips a few bits or bytes of a MAD (header or payload). */
static void mutate(struct in *in, uint8_t *mad)
{
	int k = u8(in) & 7;

	for (int j = 0; j < k; j++) {
		uint8_t at = u8(in), v = u8(in);
		if (v & 1)
			mad[at] ^= (uint8_t)(1u << (v >> 5));
		else
			mad[at] = v;
	}
}

/* ---- user calls ------------------------------------------------------------ */

static struct cmp_conn *pick_held(struct in *in, struct node *n, int *idx)
{
	if (!n->nheld)
		return NULL;
	*idx = u8(in) % n->nheld;
	return n->held[*idx];
}

static void user_call(struct world *w, int i, uint8_t op, struct in *in)
{
	struct node *n = &w->n[i];
	uint8_t pdata[CMP_CM_DATA_SIZE];
	uint8_t plen = u8(in);
	struct cmp_conn *c;
	int idx = -1;

	memset(pdata, 0xA5, sizeof(pdata));
	switch (op) {
	case 0: { /* listen */
		struct cmp_listen *l;
		uint64_t sid = u8(in) & 3;
		unsigned backlog = u8(in) % 4;
		if (n->nlis < MAXL &&
		    cmp_listen(n->e, sid, (plen & 1) ? 0 : ~1ULL, backlog, NULL, &l) == 0)
			n->lis[n->nlis++] = l;
		break;
	}
	case 1: /* listener gone */
		if (n->nlis) {
			int j = u8(in) % n->nlis;
			cmp_listen_destroy(n->e, n->lis[j]);
			n->lis[j] = n->lis[--n->nlis];
		}
		break;
	case 2: { /* connect */
		struct cmp_path p, alt;
		struct cmp_req_param rp = { 0 };
		path_to(&p, i, 1 - i, w->roce, in);
		path_to(&alt, i, 1 - i, w->roce, in);
		rp.primary = &p;
		rp.alternate = (plen & 0x80) ? &alt : NULL;
		rp.service_id = u8(in) & 3;
		rp.qpn = u8(in);
		rp.qp_type = u8(in) & 1;
		rp.starting_psn = u32(in);
		rp.responder_resources = u8(in);
		rp.initiator_depth = u8(in);
		rp.remote_cm_response_timeout = u8(in) & 31;
		rp.local_cm_response_timeout = u8(in) & 31;
		rp.max_cm_retries = u8(in) & 15;
		rp.private_data = pdata;
		rp.private_data_len = plen % (CMP_REQ_PDATA + 2); /* sometimes too long */
		if (n->nheld < MAXC && cmp_connect(n->e, &rp, NULL, &c, w->now) == 0)
			n->held[n->nheld++] = c;
		break;
	}
	case 3: /* accept */
		if ((c = pick_held(in, n, &idx))) {
			struct cmp_rep_param pp = { .private_data = pdata,
						    .private_data_len = plen % (CMP_REP_PDATA + 2) };
			pp.qpn = u8(in);
			pp.starting_psn = u32(in);
			pp.responder_resources = u8(in);
			pp.initiator_depth = u8(in);
			cmp_accept(n->e, c, &pp, w->now);
		}
		break;
	case 4: /* reject */
		if ((c = pick_held(in, n, &idx))) {
			uint16_t reason = u16(in);
			uint8_t ari_len = u8(in) % (CMP_ARI_SIZE + 2);
			cmp_reject(n->e, c, reason, pdata, ari_len, pdata,
				   plen % (CMP_REJ_PDATA + 2), w->now);
		}
		break;
	case 5:
		if ((c = pick_held(in, n, &idx)))
			cmp_rtu(n->e, c, pdata, plen % (CMP_RTU_PDATA + 2), w->now);
		break;
	case 6:
		if ((c = pick_held(in, n, &idx)))
			cmp_mra(n->e, c, u8(in) & 63, pdata, plen % (CMP_MRA_PDATA + 2), w->now);
		break;
	case 7:
		if ((c = pick_held(in, n, &idx)))
			cmp_notify(n->e, c, w->now);
		break;
	case 8:
		if ((c = pick_held(in, n, &idx)))
			cmp_disconnect(n->e, c, pdata, plen % (CMP_DREQ_PDATA + 2), w->now);
		break;
	case 9: /* destroy */
		if ((c = pick_held(in, n, &idx))) {
			cmp_conn_destroy(n->e, c, w->now);
			forget(n, idx);
		}
		break;
	case 10: { /* SIDR request */
		struct cmp_path p;
		path_to(&p, i, 1 - i, w->roce, in);
		struct cmp_sidr_req_param sp = { .path = &p, .private_data = pdata,
						 .private_data_len = plen % (CMP_SIDR_REQ_PDATA + 2) };
		sp.service_id = u8(in) & 3;
		sp.max_retries = u8(in) & 15;
		sp.timeout_ns = (cmp_time)u16(in) * 1000;
		if (n->nheld < MAXC && cmp_sidr_req(n->e, &sp, NULL, &c, w->now) == 0)
			n->held[n->nheld++] = c;
		break;
	}
	case 11: /* SIDR reply */
		if ((c = pick_held(in, n, &idx))) {
			struct cmp_sidr_rep_param sp = { .info = pdata, .private_data = pdata,
							 .private_data_len = plen % (CMP_SIDR_REP_PDATA + 2) };
			sp.status = u8(in) & 7;
			sp.qpn = u32(in);
			sp.qkey = u32(in);
			sp.info_len = u8(in) % (CMP_ARI_SIZE + 2);
			cmp_sidr_rep(n->e, c, &sp, w->now);
		}
		break;
	default: { /* QP attributes: must not crash in any state */
		struct ibv_qp_attr a;
		int mask;
		static const enum ibv_qp_state qs[] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
							IBV_QPS_ERR };
		if ((c = pick_held(in, n, &idx)))
			cmp_conn_qp_attr(c, qs[u8(in) & 3], &a, &mask);
		break;
	}
	}
}

/* ---- time -------------------------------------------------------------------- */

static void advance(struct world *w, cmp_time to)
{
	if (to > w->now)
		w->now = to;
	for (int i = 0; i < NODES; i++)
		cmp_engine_handle_expiry(w->n[i].e, w->now);
}

static cmp_time next_expiry(const struct world *w)
{
	cmp_time t = CMP_TIME_NEVER;

	for (int i = 0; i < NODES; i++) {
		cmp_time x = cmp_engine_get_expiry(w->n[i].e);
		if (x < t)
			t = x;
	}
	return t;
}

/* ---- one input ---------------------------------------------------------------- */

static int trace_on(void)
{
	static int on = -1;

	if (on < 0)
		on = getenv("FUZZ_ENGINE_TRACE") != NULL;
	return on;
}

static void trace_print(void *ctx, const struct cmp_trace_rec *r)
{
	(void)ctx;
	cmp_trace_print(stderr, r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct in in = { data, size };
	struct world *w = calloc(1, sizeof(*w));
	uint8_t cfg = u8(&in);

	w->roce = cfg & 1;
	w->now = 1000000000ULL;
	for (int i = 0; i < NODES; i++) {
		struct cmp_settings s;
		cmp_settings_default(&s);
		s.local_ca_guid = 0x0002c90300000000ULL | (uint64_t)(i + 1);
		s.seed = 7 + (uint64_t)i;
		s.mra_on_duplicate_req = (cfg >> 1) & 1;
		/* Small caps so the input reaches them. */
		s.max_conns = (cfg & 4) ? 1u + (cfg >> 5) : 1u << 20;
		s.default_backlog = (cfg & 8) ? 2 : 1024;
		s.max_pending = (cfg & 64) ? 1 + ((cfg >> 2) & 1) : 4096;
		s.max_timer_ns = (cfg & 16) ? 100000000ULL : 0;
		s.timewait_ns = (cfg & 16) ? 0 : 50000000ULL;
		if (trace_on()) { /* FUZZ_ENGINE_TRACE=1: see what a seed reaches */
			s.trace = trace_print;
			s.trace_ctx = &w->n[i];
		}
		w->n[i].e = cmp_engine_new(&s);
		if (!w->n[i].e)
			abort();
		addr_of(&w->n[i].self, i, w->roce);
	}

	for (int ops = 0; in.n && ops < MAXOPS; ops++) {
		uint8_t op = u8(&in);
		int i = op & 1; /* the node the operation concerns */
		struct node *n = &w->n[i];

		switch ((op >> 1) % 10) {
		case 0: case 1: { /* deliver a queued MAD, maybe mutated, maybe twice */
			if (!w->nwire)
				break;
			uint8_t how = u8(&in);
			int k = how % w->nwire;
			struct wmad m = w->wire[k];
			if (!(how & 0x80)) /* 0x80: duplicate: keep it on the wire */
				memmove(&w->wire[k], &w->wire[k + 1],
					sizeof(w->wire[0]) * (size_t)(w->nwire-- - k - 1));
			if ((how & 0x60) == 0x60)
				mutate(&in, m.mad);
			cmp_engine_recv(w->n[m.to].e, &m.src, m.mad, CMP_MAD_SIZE, w->now);
			break;
		}
		case 2: /* lose a queued MAD */
			if (w->nwire) {
				int k = u8(&in) % w->nwire;
				memmove(&w->wire[k], &w->wire[k + 1],
					sizeof(w->wire[0]) * (size_t)(w->nwire-- - k - 1));
			}
			break;
		case 3: case 4: { /* hostile MAD built from a template */
			struct cmp_cm_msg m;
			struct cmp_addr src;
			uint8_t mad[CMP_MAD_SIZE];
			template_msg(&in, n, &m);
			pick_src(&in, w, i, &src);
			if (cmp_cm_encode(&m, mad) == 0) {
				if (u8(&in) & 1)
					mutate(&in, mad);
				cmp_engine_recv(n->e, &src, mad, CMP_MAD_SIZE, w->now);
			}
			break;
		}
		case 5: { /* raw bytes, any length */
			uint8_t mad[CMP_MAD_SIZE + 8];
			struct cmp_addr src;
			size_t len = u16(&in) % sizeof(mad);
			uint8_t *heap = malloc(len ? len : 1); /* exact size: ASan sees overreads */
			bytes(&in, mad, sizeof(mad));
			pick_src(&in, w, i, &src);
			memcpy(heap, mad, len);
			cmp_engine_recv(n->e, &src, heap, len, w->now);
			free(heap);
			break;
		}
		case 6: { /* time passes */
			uint8_t how = u8(&in);
			cmp_time t = next_expiry(w);
			if ((how & 3) == 0 && t != CMP_TIME_NEVER)
				advance(w, t);                          /* exactly to the next timer */
			else if ((how & 3) == 1 && t != CMP_TIME_NEVER)
				advance(w, t - 1);                      /* just before it */
			else
				advance(w, w->now + ((cmp_time)u16(&in) << (how >> 3)));
			break;
		}
		default: /* a user call */
			user_call(w, i, u8(&in) % 13, &in);
			break;
		}
		for (int j = 0; j < NODES; j++)
			drain(w, j, 0);
		for (int j = 0; j < NODES; j++)
			check(w, j);
	}

	/* The end: let go of everything, then time runs out every protocol. */
	for (int i = 0; i < NODES; i++) {
		struct node *n = &w->n[i];
		while (n->nlis)
			cmp_listen_destroy(n->e, n->lis[--n->nlis]);
		while (n->nheld) {
			cmp_conn_destroy(n->e, n->held[n->nheld - 1], w->now);
			n->nheld--;
		}
		drain(w, i, 1);
		check(w, i);
	}
	w->nwire = 0;
	for (int steps = 0;; steps++) {
		cmp_time t = next_expiry(w);
		if (t == CMP_TIME_NEVER)
			break;
		if (steps > 10000)
			abort(); /* a timer that never lets go */
		advance(w, t);
		for (int i = 0; i < NODES; i++)
			drain(w, i, 1);
	}
	for (int i = 0; i < NODES; i++) {
		check(w, i);
		if (cmp_engine_conn_count(w->n[i].e) || cmp_engine_timer_count(w->n[i].e))
			abort();
		cmp_engine_free(w->n[i].e);
	}
	free(w);
	return 0;
}
