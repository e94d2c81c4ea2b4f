/*
 * replay_check.c - the virtual-time player behind `uscm-replay check` and
 * `mutate`: an engine as side S, the other side's MADs in, S's user calls
 * inferred from the trace, the engine's MADs paired with S's and compared.
 */
#include "tools/replay_check.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_cma.h"
#include "umad/um_sa.h"

void rp_opts_default(struct rp_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->tol_ns = 50u * 1000000u;
	o->tol_pct = 5;
	o->ca_ack_delay = -1;
	o->packet_life_time = -1;
	o->seed = 1;
}

/* Destroys of S's application inferred from the trace: connection tc (an
 * index into t->conns), played at time `at`. */
struct rp_destroys {
	struct rp_destroy {
		int tc;
		uint64_t at;
	} *v;
	size_t n, cap;
	size_t known; /* the first `known` are played by the current run */
};

/* What the player knows about one connection of the trace. */
struct pconn {
	struct cmp_conn *ec;  /* the engine's, once connect / REQ_RECEIVED made it */
	int skip;             /* not played: service not told about, undecodable */
	int destroyed;        /* S's application destroyed it (inferred): ec is NULL */
	int connected, accepted, rtu, dreq, drep;
	/* The last instant both clocks agree on (a MAD fed, or a pair): times
	 * are compared as intervals from there, so that one late timer in the
	 * traced process does not make every later one look late too. */
	uint64_t anchor_e, anchor_t;
	int anchored;
};

struct player {
	const struct rp_trace *t;
	const struct rp_opts *o;
	struct rp_report *r;
	const struct rp_hooks *h;
	struct rp_result *res;
	struct cmp_engine *e;
	struct rp_map map;
	struct pconn *pc;
	uint8_t *matched;          /* per trace MAD: paired (or not to be compared) */
	long pending;              /* trace MAD a user call is about to produce */
	size_t feeding;            /* trace MAD being fed, for hooks */
	uint64_t end_ts;
	uint64_t vnow;             /* the engine's virtual clock */
	int after_end;
	int in_timer;              /* the engine MADs being drained come from a timer */
	uint64_t last_ts;          /* the trace's last MAD */
	struct cmp_conn **conns;   /* every engine connection seen, to destroy */
	size_t nconns, capconns;
	/* Destroys S's application made (docs/replay.md): those learned by an
	 * earlier run, [0, dz->known), are played at their time; this run
	 * appends those it finds. */
	struct rp_destroys *dz;
};

#define NONE ((size_t)-1)

static void remember(struct player *p, struct cmp_conn *c)
{
	for (size_t i = 0; i < p->nconns; i++)
		if (p->conns[i] == c)
			return;
	if (p->nconns == p->capconns) {
		size_t nc = p->capconns ? p->capconns * 2 : 16;
		struct cmp_conn **n = realloc(p->conns, nc * sizeof(*n));
		if (!n)
			return;
		p->conns = n;
		p->capconns = nc;
	}
	p->conns[p->nconns++] = c;
}

static void forget(struct player *p, const struct cmp_conn *c)
{
	for (size_t i = 0; i < p->nconns; i++)
		if (p->conns[i] == c) {
			p->conns[i] = p->conns[--p->nconns];
			return;
		}
}

static int conn_of_engine(const struct player *p, const struct cmp_conn *c)
{
	for (size_t i = 0; c && i < p->t->nconns; i++)
		if (p->pc[i].ec == c)
			return (int)i;
	return -1;
}

static uint64_t tolerance(const struct player *p, int tc, uint64_t now)
{
	uint64_t tol = p->o->tol_ns;
	if (tc >= 0) {
		uint64_t t0 = p->t->m[p->t->conns[tc].first].ts;
		if (now > t0)
			tol += (now - t0) / 100 * p->o->tol_pct;
	}
	return tol;
}

/* The earliest unpaired MAD S sent with this attribute, in connection tc
 * (or, when tc is unknown, naming the peer's comm ID peer_id). */
static size_t find_expected(const struct player *p, uint16_t attr, int tc, uint32_t peer_id)
{
	for (size_t i = 0; i < p->t->n; i++) {
		const struct rp_mad *m = &p->t->m[i];
		if (p->matched[i] || m->dir != RP_FROM_S || !m->cm_ok || m->hdr.attr_id != attr)
			continue;
		if (tc >= 0 ? m->conn != tc : cmp_cm_remote_id(&m->cm) != peer_id)
			continue;
		return i;
	}
	return NONE;
}

/* ---- destroys the trace implies ------------------------------------------------------ */

/* S sent a MAD of this attribute in connection tc, and it was paired: an
 * engine MAD of the same attribute there now is a retransmission. */
static int s_sent_before(const struct player *p, int tc, uint16_t attr)
{
	for (size_t i = 0; i < p->t->n; i++) {
		const struct rp_mad *m = &p->t->m[i];
		if (m->dir == RP_FROM_S && m->conn == tc && m->cm_ok && m->hdr.attr_id == attr &&
		    p->matched[i])
			return 1;
	}
	return 0;
}

/* The engine's timer retransmitted for connection tc at `now` and S has no
 * such copy anywhere in the trace, though the capture goes on past the
 * timing tolerance: S's timers would have sent it, so S's application had
 * destroyed the id by then. Inferred only where the kernel's cm_destroy_id
 * sends nothing and cancels the retries (DREQ_SENT, SIDR_REQ_SENT); in the
 * other retrying states a destroy sends a REJ, which S did not send. */
static void note_destroy(struct player *p, int tc, const struct cmp_conn *ec, uint16_t attr,
			 uint64_t now)
{
	enum cmp_state st = cmp_conn_state(ec);
	struct rp_destroys *d = p->dz;

	if (!d || (st != CMP_DREQ_SENT && st != CMP_SIDR_REQ_SENT) ||
	    now + tolerance(p, tc, now) > p->last_ts || !s_sent_before(p, tc, attr))
		return;
	for (size_t k = 0; k < d->n; k++)
		if (d->v[k].tc == tc)
			return;
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 8;
		struct rp_destroy *nv = realloc(d->v, nc * sizeof(*nv));
		if (!nv)
			return;
		d->v = nv;
		d->cap = nc;
	}
	/* Played at this deadline: the latest moment the trace allows. */
	d->v[d->n].tc = tc;
	d->v[d->n].at = now;
	d->n++;
}

static void on_tx(struct player *p, const struct cmp_tx *tx, uint64_t now)
{
	struct cmp_cm_msg em;
	uint16_t attr;
	size_t idx = NONE;
	int tc;

	if (cmp_cm_decode(tx->mad, sizeof(tx->mad), &em, NULL) < 0) {
		rp_report_add(p->r, RP_D_EXTRA, 0, 0, NULL, "the engine sent a MAD it cannot decode");
		return;
	}
	attr = em.hdr.attr_id;
	if (p->after_end) {
		p->res->after_end_tx++;
		return;
	}
	tc = conn_of_engine(p, tx->conn);
	if (p->pending != (long)NONE && p->t->m[p->pending].hdr.attr_id == attr) {
		idx = (size_t)p->pending;
		p->pending = (long)NONE;
	} else {
		idx = find_expected(p, attr, tc, cmp_cm_remote_id(&em));
	}
	if (idx == NONE) {
		if (p->in_timer && tc >= 0)
			note_destroy(p, tc, tx->conn, attr, now);
		struct rp_diff *d = rp_report_add(p->r, RP_D_EXTRA, 0, attr, NULL,
						  "the engine sent %s (local ID 0x%08x, remote ID "
						  "0x%08x) where S sent nothing",
						  cmp_cm_attr_str(attr), cmp_cm_local_id(&em),
						  cmp_cm_remote_id(&em));
		d->t_peer = now;
		return;
	}
	const struct rp_mad *m = &p->t->m[idx];
	p->matched[idx] = 1;
	size_t before = p->r->n;
	rp_compare(p->r, &p->map, tx->mad, m->mad, m->frame);
	for (size_t k = before; k < p->r->n; k++) {
		p->r->d[k].t_trace = m->ts;
		p->r->d[k].t_peer = now;
	}
	struct pconn *pcn = m->conn >= 0 ? &p->pc[m->conn] : NULL;
	uint64_t e_rel = now, t_rel = m->ts;
	if (pcn && pcn->anchored) {
		e_rel = now - pcn->anchor_e;
		t_rel = m->ts - pcn->anchor_t;
	}
	uint64_t dt = e_rel > t_rel ? e_rel - t_rel : t_rel - e_rel;
	if (pcn) {
		pcn->anchor_e = now;
		pcn->anchor_t = m->ts;
		pcn->anchored = 1;
	}
	if (dt > tolerance(p, m->conn, now)) {
		struct rp_diff *d = rp_report_add(p->r, RP_D_TIMING, m->frame, attr, NULL,
						  "sent %.3f ms %s than in the trace (measured from the "
						  "connection's previous MAD)",
						  (double)dt / 1e6, e_rel > t_rel ? "later" : "earlier");
		d->t_trace = m->ts;
		d->t_peer = now;
	}
}

static void on_event(struct player *p, const struct cmp_event *ev)
{
	if (ev->conn)
		remember(p, ev->conn);
	if (ev->type == CMP_EV_REQ_RECEIVED || ev->type == CMP_EV_SIDR_REQ_RECEIVED) {
		uint32_t rid = cmp_conn_remote_id(ev->conn);
		for (size_t i = 0; i < p->t->nconns; i++) {
			const struct rp_conn *c = &p->t->conns[i];
			if (!c->s_active && c->active_id == rid && !p->pc[i].ec) {
				p->pc[i].ec = ev->conn;
				break;
			}
		}
	}
	if (p->h && p->h->on_event && p->feeding != NONE)
		p->h->on_event(p->h->ctx, p->feeding, ev);
}

static void drain(struct player *p, uint64_t now)
{
	struct cmp_tx tx;
	struct cmp_event ev;
	int more = 1;

	while (more) {
		more = 0;
		while (cmp_engine_poll_tx(p->e, &tx) == 1) {
			on_tx(p, &tx, now);
			more = 1;
		}
		while (cmp_engine_poll_event(p->e, &ev) == 1) {
			on_event(p, &ev);
			more = 1;
		}
	}
}

/* S's application destroys connection tc at `at` (inferred): the engine
 * does what the kernel's destroy does; the record is the engine's alone
 * from now on (its later MADs pair by the peer's comm ID). */
static void destroy_conn(struct player *p, int tc, uint64_t at)
{
	struct pconn *c = &p->pc[tc];

	if (!c->ec || c->destroyed)
		return;
	if (p->o->verbose)
		fprintf(stderr, "uscm-replay: S went silent where its timer retransmits: its "
				"application destroyed the id of frame %" PRIu64 " by t=%.6f\n",
			p->t->m[p->t->conns[tc].first].frame, (double)(at - p->r->t0) / 1e9);
	forget(p, c->ec);
	cmp_conn_destroy(p->e, c->ec, at);
	c->ec = NULL;
	c->destroyed = 1;
	p->res->destroys_inferred++;
	drain(p, at);
}

/* Plays the destroys learned earlier that are due by x. 1 if any was. */
static int apply_destroys(struct player *p, uint64_t x)
{
	int any = 0;

	for (size_t k = 0; p->dz && k < p->dz->known; k++) {
		const struct rp_destroy *d = &p->dz->v[k];
		if (d->at <= x && p->pc[d->tc].ec && !p->pc[d->tc].destroyed) {
			destroy_conn(p, d->tc, d->at);
			any = 1;
		}
	}
	return any;
}

/* Runs every timer due up to `now`, each at its own deadline. */
static void advance(struct player *p, uint64_t now)
{
	for (unsigned guard = 0; guard < 1000000; guard++) {
		cmp_time x = cmp_engine_get_expiry(p->e);
		if (x == CMP_TIME_NEVER || x > now)
			return;
		if (x > p->vnow)
			p->vnow = x;
		/* A destroy due by then comes first: it may cancel this timer. */
		if (apply_destroys(p, x))
			continue;
		p->in_timer = 1;
		cmp_engine_handle_expiry(p->e, x);
		drain(p, x);
		p->in_timer = 0;
	}
}

/* ---- the trace's inputs ------------------------------------------------------- */

static void addr_from_meta(struct cmp_addr *a, const struct um_frame_meta *m)
{
	memset(a, 0, sizeof(*a));
	a->lid = m->link == UM_LINK_IB ? m->slid : 0;
	a->sl = m->sl;
	a->grh = m->has_grh;
	memcpy(a->gid, m->sgid, 16);
	a->hop_limit = m->hop_limit;
	a->tclass = m->tclass;
	a->flow_label = m->flow_label;
	a->qpn = m->src_qp;
	a->qkey = m->qkey;
}

static void set_field(uint8_t *mad, uint16_t attr, const char *name, uint64_t v)
{
	const struct cmp_layout *l = cmp_cm_layout(attr);
	const struct cmp_field *f = l ? cmp_layout_find(l, name) : NULL;
	if (f)
		cmp_bits_set(mad + CMP_MAD_HDR_SIZE, f->byte, f->bit, f->width, v);
}

/* The peer names S by S's trace IDs; the engine knows its own. */
static void translate(const struct player *p, const struct rp_mad *m, uint8_t *mad)
{
	uint64_t v;
	uint16_t attr = m->hdr.attr_id;
	uint32_t rid = cmp_cm_remote_id(&m->cm);

	if (attr == UMAD_CM_ATTR_REQ || attr == UMAD_CM_ATTR_SIDR_REQ ||
	    attr == UMAD_ATTR_CLASS_PORT_INFO)
		return;
	if (rid && rp_map_to_peer(&p->map, RP_M_COMM_ID, rid, &v))
		set_field(mad, attr, attr == UMAD_CM_ATTR_SIDR_REP ? "request_id" : "remote_comm_id", v);
	if (rp_map_to_peer(&p->map, RP_M_TID, m->hdr.tid, &v))
		cmp_bits_set(mad, 8, 0, 64, v);
}

static void feed(struct player *p, size_t i)
{
	const struct rp_mad *m = &p->t->m[i];
	uint8_t mad[CMP_MAD_SIZE];
	struct cmp_addr src;

	memcpy(mad, m->mad, sizeof(mad));
	if (m->cm_ok)
		translate(p, m, mad);
	addr_from_meta(&src, &m->meta);
	if (m->conn >= 0) {
		p->pc[m->conn].anchor_e = p->pc[m->conn].anchor_t = m->ts;
		p->pc[m->conn].anchored = 1;
	}
	p->feeding = i;
	cmp_engine_recv(p->e, &src, mad, m->len, m->ts);
	drain(p, m->ts);
	p->feeding = NONE;
}

/* The SA's PathRecord answer's packet lifetime for the REQ's destination,
 * the last in the trace, or -1. */
static int sa_lifetime(const struct player *p, const struct cmp_cm_req *r)
{
	struct um_sa_msg sa;
	int found = -1;

	for (size_t i = 0; i < p->t->n; i++) {
		const struct rp_mad *m = &p->t->m[i];
		if (m->dir != RP_TO_S || m->hdr.mgmt_class != UMAD_CLASS_SUBN_ADM ||
		    m->hdr.attr_id != UMAD_SA_ATTR_PATH_REC || m->hdr.method != UMAD_METHOD_GET_RESP)
			continue;
		if (um_sa_decode(m->mad, sizeof(m->mad), &sa, NULL) < 0 || !sa.nrecords)
			continue;
		if (!memcmp(sa.u.pr.dgid, r->primary_remote_gid, 16))
			found = sa.u.pr.packet_life_time;
	}
	return found;
}

/* 1 when the lifetime is read back from the REQ's own local ACK timeout
 * (neither --packet-life-time nor a PathRecord answer gives it). */
static int lifetime_inferred(const struct player *p, const struct cmp_cm_req *r)
{
	return p->o->packet_life_time < 0 && sa_lifetime(p, r) < 0;
}

/* The path lifetime S used: the option, else the SA's answer for that
 * destination when the trace has it, else the largest lifetime that gives the
 * REQ's local ACK timeout (the formula is flat for small lifetimes). */
static uint8_t lifetime(const struct player *p, const struct cmp_cm_req *r, uint8_t ca_delay)
{
	int found = sa_lifetime(p, r);

	if (p->o->packet_life_time >= 0)
		return (uint8_t)p->o->packet_life_time;
	if (found >= 0)
		return (uint8_t)found;
	for (int plt = 31; plt >= 0; plt--)
		if (cmp_ack_timeout(ca_delay, (uint8_t)plt) == r->primary_local_ack_timeout)
			return (uint8_t)plt;
	return 16;
}

#define PATH_FROM_REQ(pa, r, pfx, plt, roce)                              \
	do {                                                              \
		memset(&(pa), 0, sizeof(pa));                             \
		memcpy((pa).sgid, (r)->pfx##_local_gid, 16);              \
		memcpy((pa).dgid, (r)->pfx##_remote_gid, 16);             \
		(pa).slid = (r)->pfx##_local_lid;                         \
		(pa).dlid = (r)->pfx##_remote_lid;                        \
		(pa).flow_label = (r)->pfx##_flow_label;                  \
		(pa).tclass = (r)->pfx##_traffic_class;                   \
		(pa).hop_limit = (r)->pfx##_hop_limit;                    \
		(pa).sl = (r)->pfx##_sl;                                  \
		(pa).rate = (r)->pfx##_packet_rate;                       \
		(pa).subnet_local = (r)->pfx##_subnet_local;              \
		(pa).mtu = (r)->path_mtu;                                 \
		(pa).pkey = (r)->pkey;                                    \
		(pa).packet_life_time = (plt);                            \
		(pa).port_num = 1;                                        \
		(pa).roce = (roce);                                       \
	} while (0)

/* The REQ of a connection over IB whose route S resolved in the trace: the
 * SA's PathRecord answer (to S, before the REQ) for the REQ's destination
 * GID is the input, and the path uscm's library makes of it
 * (lib/cma_addr.c's path_from_sa) gives the REQ's path fields: LIDs, flow
 * label, traffic class, hop limit, SL, rate, MTU, P_Key, lifetime (so the
 * local ACK timeout) and the subnet-local bit are then uscm's choices for
 * that answer, compared with S's. --packet-life-time still overrides the
 * lifetime. 0: no such answer. */
static int ib_sa_path(struct player *p, const struct rp_mad *req, struct cmp_path *pa)
{
	const struct cmp_cm_req *r = &req->cm.u.req;
	struct um_sa_msg sa = { 0 };
	int found = 0;

	if (req->meta.link != UM_LINK_IB)
		return 0;
	for (size_t i = 0; i < p->t->n && p->t->m[i].ts <= req->ts; i++) {
		const struct rp_mad *m = &p->t->m[i];
		struct um_sa_msg one;

		if (m->dir != RP_TO_S || m->hdr.mgmt_class != UMAD_CLASS_SUBN_ADM ||
		    m->hdr.attr_id != UMAD_SA_ATTR_PATH_REC || m->hdr.method != UMAD_METHOD_GET_RESP ||
		    m->hdr.status)
			continue;
		if (um_sa_decode(m->mad, sizeof(m->mad), &one, NULL) < 0 || !one.nrecords)
			continue;
		if (!memcmp(one.u.pr.dgid, r->primary_remote_gid, 16) &&
		    !memcmp(one.u.pr.sgid, r->primary_local_gid, 16)) {
			sa = one;
			found = 1;
		}
	}
	if (!found)
		return 0;
	memset(pa, 0, sizeof(*pa));
	memcpy(pa->sgid, sa.u.pr.sgid, 16);
	memcpy(pa->dgid, sa.u.pr.dgid, 16);
	pa->slid = sa.u.pr.slid;
	pa->dlid = sa.u.pr.dlid;
	pa->flow_label = sa.u.pr.flow_label;
	pa->tclass = sa.u.pr.tclass;
	pa->hop_limit = sa.u.pr.hop_limit;
	pa->sl = sa.u.pr.sl;
	pa->mtu = sa.u.pr.mtu;
	pa->rate = sa.u.pr.rate;
	pa->packet_life_time = p->o->packet_life_time >= 0 ? (uint8_t)p->o->packet_life_time
							   : sa.u.pr.packet_life_time;
	pa->pkey = sa.u.pr.pkey;
	pa->port_num = 1;
	pa->subnet_local = sa.u.pr.hop_limit <= 1;
	return 1;
}

/* The REQ of an rdma_cm id over RoCE (RoCEv2 frames, an IP service ID, a
 * CMA header): no SA to ask, so its path is what uscm's library builds from
 * the application's inputs (lib/cma_addr.c's roce_path), not the trace's:
 * the addresses (the GIDs), the ports (the CMA header's source port, the
 * service ID's), the ToS (the traffic class) and the device's MTU. The LIDs
 * (none: the engine writes the permissive LID), flow label, hop limit,
 * P_Key, rate, SL and packet lifetime (so the local ACK timeout) are then
 * uscm's own choices, compared with S's. An IPv6 source address may carry
 * a flow label of its own, which the wire does not show: taken from the
 * trace then. 0: not such a REQ. */
static int roce_cma_path(struct player *p, const struct rp_mad *m, struct cmp_path *pa)
{
	const struct cmp_cm_req *r = &m->cm.u.req;
	struct cmp_cma_hdr h;
	enum cmp_ps ps;
	uint16_t dport;

	if (m->meta.link != UM_LINK_ROCEV2 || cmp_sid_split(r->service_id, &ps, &dport) < 0)
		return 0;
	cmp_layout_decode(&cmp_cma_hdr_layout, r->private_data, &h);
	if (h.cma_version != CMP_CMA_VERSION || (h.ip_version != 4 && h.ip_version != 6))
		return 0;
	memset(pa, 0, sizeof(*pa));
	memcpy(pa->sgid, r->primary_local_gid, 16);
	memcpy(pa->dgid, r->primary_remote_gid, 16);
	pa->tclass = r->primary_traffic_class;
	pa->sl = (uint8_t)(pa->tclass >> 5);
	pa->hop_limit = 64;
	pa->pkey = 0xFFFF;
	pa->mtu = r->path_mtu;
	pa->packet_life_time = p->o->packet_life_time >= 0 ? (uint8_t)p->o->packet_life_time
							   : CMP_ROCE_PACKET_LIFETIME;
	pa->flow_label = h.ip_version == 4 ? cmp_roce_flow_label(h.src_port, dport)
					   : r->primary_flow_label;
	pa->port_num = 1;
	pa->roce = 1;
	rp_report_from_trace(p->r, UMAD_CM_ATTR_REQ,
			     "primary_local_gid primary_remote_gid primary_traffic_class path_mtu");
	if (h.ip_version == 6)
		rp_report_from_trace(p->r, UMAD_CM_ATTR_REQ, "primary_flow_label");
	return 1;
}

static void action_failed(struct player *p, const struct rp_mad *m, const char *call)
{
	rp_report_add(p->r, RP_D_ACTION, m->frame, m->hdr.attr_id, NULL,
		      "S sent this, so S called %s; the engine refused it in state %s", call,
		      p->pc[m->conn].ec ? cmp_state_str(cmp_conn_state(p->pc[m->conn].ec))
					: "(no connection)");
}

static void do_connect(struct player *p, size_t i)
{
	const struct rp_mad *m = &p->t->m[i];
	const struct cmp_cm_req *r = &m->cm.u.req;
	struct cmp_path pri, alt;
	struct cmp_req_param q = { 0 };
	struct pconn *c = &p->pc[m->conn];
	uint8_t ca = p->o->ca_ack_delay >= 0 ? (uint8_t)p->o->ca_ack_delay : 15;
	int roce = m->meta.link != UM_LINK_IB;

	if (!roce_cma_path(p, m, &pri) && !ib_sa_path(p, m, &pri)) {
		PATH_FROM_REQ(pri, r, primary, lifetime(p, r, ca), roce);
		rp_report_from_trace(p->r, UMAD_CM_ATTR_REQ,
				     "primary_local_lid primary_remote_lid primary_local_gid "
				     "primary_remote_gid primary_flow_label primary_traffic_class "
				     "primary_hop_limit primary_sl primary_packet_rate "
				     "primary_subnet_local path_mtu pkey");
		if (lifetime_inferred(p, r))
			rp_report_from_trace(p->r, UMAD_CM_ATTR_REQ, "primary_local_ack_timeout");
	}
	q.primary = &pri;
	static const uint8_t zero[16];
	if (r->alternate_local_lid || memcmp(r->alternate_remote_gid, zero, 16)) {
		PATH_FROM_REQ(alt, r, alternate, pri.packet_life_time, roce);
		q.alternate = &alt;
		rp_report_from_trace(p->r, UMAD_CM_ATTR_REQ,
				     "alternate_local_lid alternate_remote_lid alternate_local_gid "
				     "alternate_remote_gid alternate_flow_label alternate_traffic_class "
				     "alternate_hop_limit alternate_sl alternate_packet_rate "
				     "alternate_subnet_local");
	}
	rp_report_from_trace(p->r, UMAD_CM_ATTR_REQ,
			     "attr_mod service_id local_qpn transport_service_type "
			     "extended_transport_type starting_psn responder_resources initiator_depth "
			     "remote_cm_response_timeout local_cm_response_timeout retry_count "
			     "rnr_retry_count max_cm_retries end_to_end_flow_control srq vendor_id "
			     "private_data");
	q.service_id = r->service_id;
	q.qpn = r->local_qpn;
	/* transport 3 with extended type 1: an XRC initiator */
	q.qp_type = r->transport_service_type == CMP_REQ_TST_XRC &&
			    r->extended_transport_type == CMP_REQ_ETT_XRC
		    ? CMP_QPT_XRC_INI
		    : r->transport_service_type;
	q.starting_psn = r->starting_psn;
	q.responder_resources = r->responder_resources;
	q.initiator_depth = r->initiator_depth;
	q.remote_cm_response_timeout = r->remote_cm_response_timeout;
	q.local_cm_response_timeout = r->local_cm_response_timeout;
	q.retry_count = r->retry_count;
	q.rnr_retry_count = r->rnr_retry_count;
	q.max_cm_retries = r->max_cm_retries;
	q.flow_control = r->end_to_end_flow_control;
	q.srq = r->srq;
	q.ece.vendor_id = r->vendor_id;
	q.ece.attr_mod = m->hdr.attr_mod;
	q.private_data = r->private_data;
	q.private_data_len = CMP_REQ_PDATA;
	c->connected = 1;
	p->pending = (long)i;
	if (cmp_connect(p->e, &q, NULL, &c->ec, m->ts) < 0) {
		c->ec = NULL;
		action_failed(p, m, "connect");
	} else {
		remember(p, c->ec);
	}
}

static void do_accept(struct player *p, size_t i)
{
	const struct rp_mad *m = &p->t->m[i];
	const struct cmp_cm_rep *r = &m->cm.u.rep;
	struct cmp_rep_param q = { 0 };

	/* an XRC target's QPN is in the Local EECN */
	q.qpn = r->local_qpn ? r->local_qpn : r->local_eecn;
	q.starting_psn = r->starting_psn;
	q.responder_resources = r->responder_resources;
	q.initiator_depth = r->initiator_depth;
	q.failover_accepted = r->failover_accepted;
	q.flow_control = r->end_to_end_flow_control;
	q.rnr_retry_count = r->rnr_retry_count;
	q.srq = r->srq;
	q.ece.vendor_id = cmp_cm_rep_vendor_id(r);
	q.ece.attr_mod = m->hdr.attr_mod;
	q.private_data = r->private_data;
	q.private_data_len = CMP_REP_PDATA;
	rp_report_from_trace(p->r, UMAD_CM_ATTR_REP,
			     "attr_mod local_qpn local_eecn starting_psn responder_resources "
			     "initiator_depth failover_accepted end_to_end_flow_control "
			     "rnr_retry_count srq vendor_id_h vendor_id_m vendor_id_l private_data");
	p->pc[m->conn].accepted = 1;
	p->pending = (long)i;
	if (cmp_accept(p->e, p->pc[m->conn].ec, &q, m->ts) < 0)
		action_failed(p, m, "accept");
}

static int user_can_reject(enum cmp_state s)
{
	return s == CMP_REQ_RCVD || s == CMP_MRA_REQ_SENT || s == CMP_REP_RCVD ||
	       s == CMP_MRA_REP_SENT;
}

/* A MAD S sent that no engine MAD has claimed yet: make the user call it
 * implies. Retransmissions and what the CM sends on its own (REJ on no
 * listener, DREP to an unknown DREQ, REJ(Timeout), APR) need none: the
 * engine must produce them by itself. */
static void act(struct player *p, size_t i)
{
	const struct rp_mad *m = &p->t->m[i];
	struct pconn *c = &p->pc[m->conn];
	enum cmp_state st = c->ec ? cmp_conn_state(c->ec) : CMP_IDLE;
	int rc = 0;

	switch (m->hdr.attr_id) {
	case UMAD_CM_ATTR_REQ:
		if (!c->connected)
			do_connect(p, i);
		return;
	case UMAD_CM_ATTR_REP:
		if (!c->accepted)
			do_accept(p, i);
		return;
	case UMAD_CM_ATTR_RTU:
		if (c->rtu || !c->ec)
			return;
		c->rtu = 1;
		p->pending = (long)i;
		rp_report_from_trace(p->r, UMAD_CM_ATTR_RTU, "private_data");
		rc = cmp_rtu(p->e, c->ec, m->cm.u.rtu.private_data, CMP_RTU_PDATA, m->ts);
		if (rc < 0)
			action_failed(p, m, "rtu");
		return;
	case UMAD_CM_ATTR_DREQ:
		if (c->dreq || !c->ec || st != CMP_ESTABLISHED)
			return;
		c->dreq = 1;
		p->pending = (long)i;
		rp_report_from_trace(p->r, UMAD_CM_ATTR_DREQ, "private_data");
		if (cmp_disconnect(p->e, c->ec, m->cm.u.dreq.private_data, CMP_DREQ_PDATA, m->ts) < 0)
			action_failed(p, m, "disconnect");
		return;
	case UMAD_CM_ATTR_DREP:
		if (c->drep || !c->ec || st != CMP_DREQ_RCVD)
			return;
		c->drep = 1;
		p->pending = (long)i;
		rp_report_from_trace(p->r, UMAD_CM_ATTR_DREP, "private_data");
		if (cmp_disconnect(p->e, c->ec, m->cm.u.drep.private_data, CMP_DREP_PDATA, m->ts) < 0)
			action_failed(p, m, "disconnect (DREP)");
		return;
	case UMAD_CM_ATTR_REJ:
		if (!c->ec || !user_can_reject(st))
			return;
		p->pending = (long)i;
		rp_report_from_trace(p->r, UMAD_CM_ATTR_REJ,
				     "reason reject_info_length ari private_data");
		if (cmp_reject(p->e, c->ec, m->cm.u.rej.reason, m->cm.u.rej.ari,
			       m->cm.u.rej.reject_info_length > CMP_ARI_SIZE
				       ? CMP_ARI_SIZE
				       : m->cm.u.rej.reject_info_length,
			       m->cm.u.rej.private_data, CMP_REJ_PDATA, m->ts) < 0)
			action_failed(p, m, "reject");
		return;
	case UMAD_CM_ATTR_MRA:
		if (!c->ec || (st != CMP_REQ_RCVD && st != CMP_REP_RCVD))
			return;
		p->pending = (long)i;
		rp_report_from_trace(p->r, UMAD_CM_ATTR_MRA, "service_timeout private_data");
		if (cmp_mra(p->e, c->ec, m->cm.u.mra.service_timeout, m->cm.u.mra.private_data,
			    CMP_MRA_PDATA, m->ts) < 0)
			action_failed(p, m, "mra");
		return;
	case UMAD_CM_ATTR_SIDR_REP:
		if (!c->ec || st != CMP_SIDR_REQ_RCVD)
			return;
		p->pending = (long)i;
		rp_report_from_trace(p->r, UMAD_CM_ATTR_SIDR_REP,
				     "attr_mod status qpn qkey vendor_id_h vendor_id_l additional_info_length "
				     "additional_info private_data");
		{
			const struct cmp_cm_sidr_rep *s = &m->cm.u.sidr_rep;
			struct cmp_sidr_rep_param q = {
				.status = s->status, .qpn = s->qpn, .qkey = s->qkey,
				.ece = { cmp_cm_sidr_rep_vendor_id(s), m->hdr.attr_mod },
				.info = s->additional_info,
				.info_len = s->additional_info_length > CMP_ARI_SIZE
						    ? CMP_ARI_SIZE : s->additional_info_length,
				.private_data = s->private_data,
				.private_data_len = CMP_SIDR_REP_PDATA,
			};
			if (cmp_sidr_rep(p->e, c->ec, &q, m->ts) < 0)
				action_failed(p, m, "sidr_rep");
		}
		return;
	case UMAD_CM_ATTR_SIDR_REQ:
		if (c->connected)
			return;
		c->connected = 1;
		p->pending = (long)i;
		rp_report_from_trace(p->r, UMAD_CM_ATTR_SIDR_REQ, "pkey service_id private_data");
		{
			uint8_t ca = p->o->ca_ack_delay >= 0 ? (uint8_t)p->o->ca_ack_delay : 15;
			struct cmp_path pa = { 0 };
			(void)ca;
			memcpy(pa.sgid, m->meta.sgid, 16);
			memcpy(pa.dgid, m->meta.dgid, 16);
			pa.slid = m->meta.slid;
			pa.dlid = m->meta.dlid;
			pa.sl = m->meta.sl;
			pa.pkey = m->cm.u.sidr_req.pkey;
			pa.mtu = 4;
			pa.subnet_local = !m->meta.has_grh;
			pa.roce = m->meta.link != UM_LINK_IB;
			struct cmp_sidr_req_param q = {
				.path = &pa, .service_id = m->cm.u.sidr_req.service_id,
				.private_data = m->cm.u.sidr_req.private_data,
				.private_data_len = CMP_SIDR_REQ_PDATA,
			};
			if (cmp_sidr_req(p->e, &q, NULL, &c->ec, m->ts) < 0) {
				c->ec = NULL;
				action_failed(p, m, "sidr_req");
			} else {
				remember(p, c->ec);
			}
		}
		return;
	default:
		return;
	}
}

/* ---- which connections can be played ------------------------------------------ */

static int told(const struct rp_opts *o, uint64_t sid)
{
	enum cmp_ps ps;
	uint16_t port;

	for (unsigned i = 0; i < o->nlisten; i++)
		if (o->listen[i] == sid)
			return 1;
	return cmp_sid_split(sid, &ps, &port) == 0;
}

/* S listened on a service when it answered a REQ with anything but
 * REJ(invalid service ID); it can be played when the service is an
 * rdma_cm port-space ID or was named with --listen. */
static void plan(struct player *p)
{
	const struct rp_trace *t = p->t;
	uint64_t done[RP_MAX_LISTEN * 4];
	unsigned ndone = 0;

	for (size_t c = 0; c < t->nconns; c++) {
		const struct rp_conn *rc = &t->conns[c];
		const struct rp_mad *reply = NULL;
		if (rc->s_active)
			continue;
		for (size_t i = rc->first; i < t->n; i++) {
			const struct rp_mad *m = &t->m[i];
			if (m->conn == (int)c && m->dir == RP_FROM_S && m->cm_ok) {
				reply = m;
				break;
			}
		}
		const struct rp_mad *req = &t->m[rc->first];
		int listen = 1;
		if (!reply) {
			p->pc[c].skip = 1;
			rp_report_add(p->r, RP_D_SERVICE, req->frame, req->hdr.attr_id, NULL,
				      "S never answered this request for service 0x%016" PRIx64
				      " (no CM agent, or the capture ends): not played",
				      rc->service_id);
			continue;
		}
		if (reply->hdr.attr_id == UMAD_CM_ATTR_REJ && reply->cm.u.rej.reason == 8)
			listen = 0;
		if (reply->hdr.attr_id == UMAD_CM_ATTR_SIDR_REP && reply->cm.u.sidr_rep.status == 1)
			listen = 0;
		if (!listen)
			continue;
		if (!told(p->o, rc->service_id)) {
			p->pc[c].skip = 1;
			rp_report_add(p->r, RP_D_SERVICE, req->frame, req->hdr.attr_id, NULL,
				      "S serves 0x%016" PRIx64 ", which is not an rdma_cm port-space "
				      "service: S's listen parameters cannot be inferred, not played "
				      "(pass --listen 0x%" PRIx64 " to play it)",
				      rc->service_id, rc->service_id);
			continue;
		}
		int have = 0;
		for (unsigned k = 0; k < ndone; k++)
			have |= done[k] == rc->service_id;
		if (have)
			continue;
		struct cmp_listen *l;
		if (cmp_listen(p->e, rc->service_id, 0, 0, NULL, &l) == 0 &&
		    ndone < sizeof(done) / sizeof(done[0]))
			done[ndone++] = rc->service_id;
	}
	for (size_t i = 0; i < t->n; i++) {
		const struct rp_mad *m = &t->m[i];
		if (m->dir == RP_OTHER || !m->is_cm)
			p->matched[i] = 1;
		else if (m->conn >= 0 && p->pc[m->conn].skip)
			p->matched[i] = 1;
	}
}

static void trace_cb(void *ctx, const struct cmp_trace_rec *rec)
{
	(void)ctx;
	cmp_trace_print(stderr, rec);
}

/* One run of the trace; destroys in dz (learned) are played, new ones noted. */
static int play(const struct rp_trace *t, const struct rp_opts *o, struct rp_report *r,
		const struct rp_hooks *h, struct rp_result *res, struct rp_destroys *dz)
{
	struct player p = { .t = t, .o = o, .r = r, .h = h, .res = res, .dz = dz };
	struct cmp_settings s;
	uint64_t last = 0;

	memset(res, 0, sizeof(*res));
	cmp_settings_default(&s);
	s.seed = o->seed ? o->seed : 1;
	if (o->ca_ack_delay >= 0)
		s.local_ca_ack_delay = (uint8_t)o->ca_ack_delay;
	s.max_timer_ns = o->max_timer_ns;
	s.timewait_ns = o->timewait_ns;
	s.mra_on_duplicate_req = !o->no_mra_on_dup;
	if (o->verbose)
		s.trace = trace_cb;
	/* S's own CA GUID, so that the engine's values read like the trace's
	 * (they are mapped either way). */
	for (size_t i = 0; i < t->n; i++) {
		const struct rp_mad *m = &t->m[i];
		if (m->dir == RP_FROM_S && m->cm_ok && m->hdr.attr_id == UMAD_CM_ATTR_REQ) {
			s.local_ca_guid = m->cm.u.req.local_ca_guid;
			break;
		}
		if (m->dir == RP_FROM_S && m->cm_ok && m->hdr.attr_id == UMAD_CM_ATTR_REP) {
			s.local_ca_guid = m->cm.u.rep.local_ca_guid;
			break;
		}
	}
	p.e = cmp_engine_new(&s);
	p.pc = calloc(t->nconns + 1, sizeof(*p.pc));
	p.matched = calloc(t->n + 1, 1);
	if (!p.e || !p.pc || !p.matched) {
		cmp_engine_free(p.e);
		free(p.pc);
		free(p.matched);
		return -1;
	}
	p.pending = (long)NONE;
	p.feeding = NONE;
	p.last_ts = t->n ? t->m[t->n - 1].ts : 0;
	plan(&p);

	for (size_t i = 0; i < t->n; i++) {
		const struct rp_mad *m = &t->m[i];
		if (m->dir == RP_OTHER || !m->is_cm)
			continue;
		if (m->conn >= 0 && p.pc[m->conn].skip)
			continue;
		last = m->ts;
		if (last > p.vnow)
			p.vnow = last;
		if (!m->cm_ok) {
			rp_report_add(r, RP_D_UNDECODED, m->frame, m->hdr.attr_id, NULL,
				      "uscm's codec rejects this %s MAD: %s",
				      m->dir == RP_FROM_S ? "sent" : "received",
				      m->dir == RP_FROM_S ? "not compared" : "fed as is");
			p.matched[i] = 1;
			if (m->dir == RP_FROM_S)
				continue;
		}
		advance(&p, m->ts);
		if (m->dir == RP_TO_S) {
			feed(&p, i);
		} else if (!p.matched[i] && m->conn >= 0) {
			act(&p, i);
			drain(&p, m->ts);
			p.pending = (long)NONE;
		}
	}
	/* What the engine does after the last MAD, within the tolerance, is
	 * still compared; later it is past the end of the capture. */
	p.end_ts = last + o->tol_ns;
	advance(&p, p.end_ts);
	for (size_t i = 0; i < t->n; i++) {
		const struct rp_mad *m = &t->m[i];
		if (p.matched[i] || m->dir != RP_FROM_S)
			continue;
		/* The same bytes from S again, sooner than the tolerance: the
		 * fabric (or the capture) duplicated it; no CM timer is that fast. */
		size_t dup = NONE;
		for (size_t j = i; j-- > 0 && m->ts >= t->m[j].ts && m->ts - t->m[j].ts <= o->tol_ns;)
			if (t->m[j].dir == RP_FROM_S && !memcmp(t->m[j].mad, m->mad, sizeof(m->mad))) {
				dup = j;
				break;
			}
		if (dup != NONE) {
			size_t j = dup;
			struct rp_diff *d = rp_report_add(
				r, RP_D_DUPLICATE, m->frame, m->hdr.attr_id, NULL,
				"identical to frame %" PRIu64 " %.3f ms before: duplicated by the fabric "
				"or the capture (explained)",
				t->m[j].frame, (double)(m->ts - t->m[j].ts) / 1e6);
			d->t_trace = m->ts;
			continue;
		}
		struct rp_diff *d = rp_report_add(r, RP_D_MISSING, m->frame, m->hdr.attr_id, NULL,
						  "S sent %s (local ID 0x%08x); the engine did not",
						  cmp_cm_attr_str(m->hdr.attr_id), cmp_cm_local_id(&m->cm));
		d->t_trace = m->ts;
	}
	for (size_t c = 0; c < t->nconns; c++)
		res->played_conns += !p.pc[c].skip, res->skipped_conns += p.pc[c].skip;

	res->stats_trace = *cmp_engine_stats(p.e);
	/* Past the trace: every timeout runs out, then the user lets go of
	 * every connection and the engine must come back to empty. */
	p.after_end = 1;
	advance(&p, CMP_TIME_NEVER - 1);
	res->timers_after_trace = cmp_engine_timer_count(p.e);
	for (size_t i = 0; i < p.nconns; i++) {
		enum cmp_state st = cmp_conn_state(p.conns[i]);
		if (st == CMP_REQ_SENT || st == CMP_REP_SENT || st == CMP_MRA_REQ_RCVD ||
		    st == CMP_MRA_REP_RCVD || st == CMP_DREQ_SENT || st == CMP_TIMEWAIT ||
		    st == CMP_SIDR_REQ_SENT) {
			if (!res->stuck++)
				snprintf(res->stuck_state, sizeof(res->stuck_state), "%s",
					 cmp_state_str(st));
		}
	}
	uint64_t now = p.vnow > last ? p.vnow : last;
	for (size_t i = 0; i < p.nconns; i++)
		cmp_conn_destroy(p.e, p.conns[i], now);
	drain(&p, now);
	advance(&p, CMP_TIME_NEVER - 1);
	res->stats = *cmp_engine_stats(p.e);
	res->conns_left = cmp_engine_conn_count(p.e);
	res->timers_left = cmp_engine_timer_count(p.e);
	if (h && h->on_end)
		h->on_end(h->ctx, p.e);
	cmp_engine_free(p.e);
	rp_map_free(&p.map);
	free(p.pc);
	free(p.matched);
	free(p.conns);
	return 0;
}

/* A destroy shows only as the retransmissions that never came, which the
 * engine finds by making them: play the trace, and when it finds destroys,
 * play it again with them (a destroy found late can change what follows). */
int rp_check_run(const struct rp_trace *t, const struct rp_opts *o, struct rp_report *r,
		 const struct rp_hooks *h, struct rp_result *res)
{
	struct rp_destroys dz = { 0 };
	int rc;

	for (int run = 0;; run++) {
		dz.known = dz.n;
		rc = play(t, o, r, h, res, &dz);
		if (rc < 0 || dz.n == dz.known || run == 8)
			break;
		uint64_t t0 = r->t0;
		rp_report_free(r);
		rp_report_init(r, t0);
		if (o->verbose)
			fprintf(stderr, "uscm-replay: playing again with %zu destroy(s) inferred\n",
				dz.n);
	}
	free(dz.v);
	return rc;
}
