/*
 * replay_live.c - `uscm-replay live`: this process plays side S of a trace
 * through libibumad (umad/um_transport.h) against a live peer, in real time
 * paced by the trace's time stamps, and compares the peer's answers with
 * what the other side sent in the trace.
 *
 * S's own identifiers are sent as the trace has them; what names the peer
 * (its comm IDs, its QPN in a DREQ) is rewritten to the live peer's values
 * as they are learned from its answers, and the REQ's path to the live
 * addresses (our LID/GID, the peer's). The peer's answers go through the
 * same comparison and mapping as check's engine (replay_diff.h), after the
 * trace's copy has had the same address rewriting.
 */
#include "tools/replay_live.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <endian.h>

#include "umad/um_transport.h"

struct live {
	const struct rp_trace *t;
	const struct rp_opts *o;
	const struct rp_live_opts *lo;
	struct rp_report *r;
	struct um_port *port;
	struct rp_map map;
	uint8_t *matched;          /* trace MADs (TO_S) already answered */
	uint64_t t0_trace, t0_real;
	/* addresses: trace -> live */
	uint16_t trace_s_lid, trace_p_lid, live_s_lid, live_p_lid;
	uint8_t trace_s_gid[16], trace_p_gid[16], live_s_gid[16], live_p_gid[16];
	int roce;
	unsigned sent, paired;
	int started;               /* the clocks are tied (first send or answer) */
	/* Last instant both clocks agree on (S's MAD sent, an answer paired):
	 * answer times are compared as intervals from there. */
	uint64_t anchor_real, anchor_trace;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Trace time of `ts` on the live clock. */
static uint64_t live_time(const struct live *l, uint64_t ts)
{
	return l->t0_real + (ts - l->t0_trace);
}

static void set_field(uint8_t *mad, uint16_t attr, const char *name, uint64_t v)
{
	const struct cmp_layout *lay = cmp_cm_layout(attr);
	const struct cmp_field *f = lay ? cmp_layout_find(lay, name) : NULL;
	if (f)
		cmp_bits_set(mad + CMP_MAD_HDR_SIZE, f->byte, f->bit, f->width, v);
}

/* A REQ's path fields: the trace's addresses to the live ones. `s_sent`:
 * the REQ is S's (local = S) or the peer's (local = peer). */
static void rewrite_req_path(const struct live *l, uint8_t *mad, int s_sent)
{
	uint8_t *d = mad + CMP_MAD_HDR_SIZE;
	const struct cmp_layout *lay = cmp_cm_layout(UMAD_CM_ATTR_REQ);
	static const char *const pfx[] = { "primary", "alternate" };

	for (int k = 0; k < 2; k++) {
		char n[64];
		const struct cmp_field *f;
		snprintf(n, sizeof(n), "%s_local_lid", pfx[k]);
		if ((f = cmp_layout_find(lay, n)) && cmp_bits_get(d, f->byte, 0, 16))
			cmp_bits_set(d, f->byte, 0, 16, s_sent ? l->live_s_lid : l->live_p_lid);
		snprintf(n, sizeof(n), "%s_remote_lid", pfx[k]);
		if ((f = cmp_layout_find(lay, n)) && cmp_bits_get(d, f->byte, 0, 16))
			cmp_bits_set(d, f->byte, 0, 16, s_sent ? l->live_p_lid : l->live_s_lid);
		snprintf(n, sizeof(n), "%s_local_gid", pfx[k]);
		if ((f = cmp_layout_find(lay, n)) && !memcmp(d + f->byte,
							   s_sent ? l->trace_s_gid : l->trace_p_gid, 16))
			memcpy(d + f->byte, s_sent ? l->live_s_gid : l->live_p_gid, 16);
		snprintf(n, sizeof(n), "%s_remote_gid", pfx[k]);
		if ((f = cmp_layout_find(lay, n)) && !memcmp(d + f->byte,
							   s_sent ? l->trace_p_gid : l->trace_s_gid, 16))
			memcpy(d + f->byte, s_sent ? l->live_p_gid : l->live_s_gid, 16);
	}
}

/* S's MAD with the peer's identifiers replaced by the live peer's. */
static void rewrite_out(const struct live *l, const struct rp_mad *m, uint8_t *mad)
{
	uint16_t attr = m->hdr.attr_id;
	uint64_t v;

	memcpy(mad, m->mad, CMP_MAD_SIZE);
	if (!m->cm_ok)
		return;
	/* S's own identities, fresh per run when asked. */
	if (attr == UMAD_CM_ATTR_SIDR_REQ)
		set_field(mad, attr, "request_id", m->cm.u.sidr_req.request_id ^ l->lo->id_xor);
	else if (attr != UMAD_CM_ATTR_SIDR_REP && attr != UMAD_ATTR_CLASS_PORT_INFO)
		set_field(mad, attr, "local_comm_id", cmp_cm_local_id(&m->cm) ^ l->lo->id_xor);
	if (attr == UMAD_CM_ATTR_REQ || attr == UMAD_CM_ATTR_REP)
		set_field(mad, attr, "local_qpn",
			  ((attr == UMAD_CM_ATTR_REQ ? m->cm.u.req.local_qpn : m->cm.u.rep.local_qpn) +
			   l->lo->qpn_add) & 0xFFFFFF);
	switch (attr) {
	case UMAD_CM_ATTR_REQ:
		rewrite_req_path(l, mad, 1);
		return;
	case UMAD_CM_ATTR_SIDR_REQ:
	case UMAD_ATTR_CLASS_PORT_INFO:
		return;
	case UMAD_CM_ATTR_SIDR_REP:
		if (rp_map_to_peer(&l->map, RP_M_COMM_ID, m->cm.u.sidr_rep.request_id, &v))
			set_field(mad, attr, "request_id", v);
		return;
	case UMAD_CM_ATTR_DREQ:
		if (rp_map_to_peer(&l->map, RP_M_QPN, m->cm.u.dreq.remote_qpn_eecn, &v))
			set_field(mad, attr, "remote_qpn_eecn", v);
		break;
	default:
		break;
	}
	uint32_t rid = cmp_cm_remote_id(&m->cm);
	if (rid && rp_map_to_peer(&l->map, RP_M_COMM_ID, rid, &v))
		set_field(mad, attr, "remote_comm_id", v);
}

static size_t conn_of_live(const struct live *l, const struct cmp_cm_msg *cm)
{
	/* The live peer names S by S's trace IDs (XORed with id_xor). */
	uint32_t sid = cmp_cm_remote_id(cm), pid = cmp_cm_local_id(cm);
	if (sid)
		sid ^= l->lo->id_xor;
	uint64_t tp;
	int have = rp_map_to_trace(&l->map, RP_M_COMM_ID, pid, &tp);

	for (size_t i = 0; i < l->t->nconns; i++) {
		const struct rp_conn *c = &l->t->conns[i];
		uint32_t s_id = c->s_active ? c->active_id : c->passive_id;
		uint32_t p_id = c->s_active ? c->passive_id : c->active_id;
		if ((sid && s_id == sid) || (have && p_id == (uint32_t)tp))
			return i;
	}
	return (size_t)-1;
}

static void on_live(struct live *l, const struct um_rx *rx, uint64_t when)
{
	struct cmp_cm_msg cm;
	size_t idx = (size_t)-1, tc;

	if (rx->agent != UM_AGENT_CM || rx->status || rx->len < CMP_MAD_SIZE)
		return;
	int bad = cmp_cm_decode(rx->mad, CMP_MAD_SIZE, &cm, NULL) < 0;
	if (!bad && l->lo->on_answer)
		l->lo->on_answer(l->lo->ctx, &cm);
	if (bad) {
		struct rp_diff *d = rp_report_add(l->r, RP_D_EXTRA, 0, 0, NULL,
						  "the peer sent a MAD uscm cannot decode");
		d->t_peer = l->t0_trace + (when - l->t0_real);
		return;
	}
	tc = conn_of_live(l, &cm);
	for (size_t i = 0; i < l->t->n; i++) {
		const struct rp_mad *m = &l->t->m[i];
		if (l->matched[i] || m->dir != RP_TO_S || !m->cm_ok || m->hdr.attr_id != cm.hdr.attr_id)
			continue;
		if (tc != (size_t)-1 && m->conn != (int)tc)
			continue;
		idx = i;
		break;
	}
	uint64_t t_trace_clock = l->t0_trace + (when - l->t0_real);
	if (idx == (size_t)-1) {
		struct rp_diff *d = rp_report_add(l->r, RP_D_EXTRA, 0, cm.hdr.attr_id, NULL,
						  "the peer sent %s (local ID 0x%08x, remote ID 0x%08x) "
						  "where the trace has nothing",
						  cmp_cm_attr_str(cm.hdr.attr_id), cmp_cm_local_id(&cm),
						  cmp_cm_remote_id(&cm));
		d->t_peer = t_trace_clock;
		return;
	}
	const struct rp_mad *m = &l->t->m[idx];
	uint8_t want[CMP_MAD_SIZE];
	/* A trace that begins with the peer's MAD: the live clock starts when
	 * the live peer's arrives, not when this tool did. */
	if (!l->started) {
		l->started = 1;
		l->t0_real = when - (m->ts - l->t0_trace);
		l->anchor_real = when;
		l->anchor_trace = m->ts;
		t_trace_clock = m->ts;
	}
	memcpy(want, m->mad, sizeof(want));
	if (m->hdr.attr_id == UMAD_CM_ATTR_REQ)
		rewrite_req_path(l, want, 0);
	/* What the trace's peer said about S, with S's fresh identities. */
	uint16_t wa = m->hdr.attr_id;
	if (wa == UMAD_CM_ATTR_SIDR_REP)
		set_field(want, wa, "request_id", m->cm.u.sidr_rep.request_id ^ l->lo->id_xor);
	else if (wa != UMAD_CM_ATTR_REQ && wa != UMAD_CM_ATTR_SIDR_REQ &&
		 wa != UMAD_ATTR_CLASS_PORT_INFO && cmp_cm_remote_id(&m->cm))
		set_field(want, wa, "remote_comm_id", cmp_cm_remote_id(&m->cm) ^ l->lo->id_xor);
	if (wa == UMAD_CM_ATTR_DREQ)
		set_field(want, wa, "remote_qpn_eecn",
			  (m->cm.u.dreq.remote_qpn_eecn + l->lo->qpn_add) & 0xFFFFFF);
	l->matched[idx] = 1;
	l->paired++;
	size_t before = l->r->n;
	rp_compare(l->r, &l->map, rx->mad, want, m->frame);
	/* A DREQ from the peer names S's QPN: S's value is sent unchanged. */
	for (size_t k = before; k < l->r->n; k++) {
		l->r->d[k].t_trace = m->ts;
		l->r->d[k].t_peer = t_trace_clock;
	}
	uint64_t lrel = when - l->anchor_real, trel = m->ts > l->anchor_trace ? m->ts - l->anchor_trace : 0;
	uint64_t dt = lrel > trel ? lrel - trel : trel - lrel;
	uint64_t tol = l->o->tol_ns + trel / 100 * l->o->tol_pct;
	l->anchor_real = when;
	l->anchor_trace = m->ts;
	if (dt > tol) {
		struct rp_diff *d = rp_report_add(l->r, RP_D_TIMING, m->frame, m->hdr.attr_id, NULL,
						  "answered %.3f ms %s than in the trace (measured from "
						  "the previous MAD)",
						  (double)dt / 1e6, lrel > trel ? "later" : "earlier");
		d->t_trace = m->ts;
		d->t_peer = t_trace_clock;
	}
}

/* Receives until `until` (live clock). */
static void pump(struct live *l, uint64_t until)
{
	struct um_rx rx;

	for (;;) {
		while (um_port_recv(l->port, &rx) == 1)
			on_live(l, &rx, now_ns());
		uint64_t n = now_ns();
		if (n >= until)
			return;
		uint64_t ms = (until - n) / 1000000u + 1;
		struct pollfd pf = { .fd = um_port_fd(l->port), .events = POLLIN };
		poll(&pf, 1, ms > 100 ? 100 : (int)ms);
	}
}

/* Learns S's and the peer's trace addresses from the first connection. */
static void trace_addresses(struct live *l, const struct rp_side *s)
{
	for (size_t i = 0; i < l->t->n; i++) {
		const struct rp_mad *m = &l->t->m[i];
		if (m->dir != RP_FROM_S || !m->is_cm)
			continue;
		l->trace_s_lid = m->meta.slid;
		l->trace_p_lid = m->meta.dlid;
		if (m->cm_ok && m->hdr.attr_id == UMAD_CM_ATTR_REQ) {
			memcpy(l->trace_s_gid, m->cm.u.req.primary_local_gid, 16);
			memcpy(l->trace_p_gid, m->cm.u.req.primary_remote_gid, 16);
		} else if (m->meta.has_grh) {
			memcpy(l->trace_s_gid, m->meta.sgid, 16);
			memcpy(l->trace_p_gid, m->meta.dgid, 16);
		}
		break;
	}
	for (size_t i = 0; i < l->t->n; i++) {
		const struct rp_mad *m = &l->t->m[i];
		if (m->dir == RP_TO_S && m->cm_ok && m->hdr.attr_id == UMAD_CM_ATTR_REQ) {
			memcpy(l->trace_p_gid, m->cm.u.req.primary_local_gid, 16);
			memcpy(l->trace_s_gid, m->cm.u.req.primary_remote_gid, 16);
			break;
		}
	}
	(void)s;
}

static int peer_address(struct live *l, char *err, size_t errlen)
{
	const char *p = l->lo->peer;
	struct rp_side ps;

	l->live_p_lid = l->trace_p_lid;
	memcpy(l->live_p_gid, l->trace_p_gid, 16);
	if (!p)
		return 0; /* the trace's own peer address (same fabric layout) */
	if (rp_side_parse(p, &ps, err, errlen) < 0)
		return -1;
	if (ps.kind == RP_SIDE_LID) {
		l->live_p_lid = ps.lid;
		/* IB GID of a LID is not known here: keep the GID rewriting to
		 * what the SA would say only when the prefix matches ours. */
	} else if (ps.kind == RP_SIDE_GID) {
		memcpy(l->live_p_gid, ps.gid, 16);
	} else {
		snprintf(err, errlen, "--peer takes lid:N, gid:G or ip:A.B.C.D");
		return -1;
	}
	return 0;
}

int rp_live_run(const struct rp_trace *t, const struct rp_side *s, const struct rp_opts *o,
		struct rp_live_opts *lo, struct rp_report *r)
{
	struct live l = { .t = t, .o = o, .lo = lo, .r = r };
	char err[256] = "", cas[8][UMAD_CA_NAME_LEN];
	const char *ca = lo->ca;

	if (lo->node)
		setenv("USCM_SIM_NODE", lo->node, 1);
	if (umad_init() < 0) {
		fprintf(stderr, "uscm-replay live: umad_init failed\n");
		return -1;
	}
	if (!ca) {
		int n = umad_get_cas_names(cas, 8);
		if (n < 1) {
			fprintf(stderr, "uscm-replay live: no CA found through libibumad\n");
			return -1;
		}
		ca = cas[0];
	}
	if (um_port_open(ca, lo->port, UM_OPEN_CM, &l.port, err, sizeof(err)) < 0) {
		fprintf(stderr, "uscm-replay live: %s port %d: %s\n", ca, lo->port,
			err[0] ? err : strerror(errno));
		return -1;
	}
	const struct um_port_info *pi = um_port_info(l.port);
	l.roce = pi->roce;
	l.live_s_lid = pi->lid;
	uint64_t pfx = htobe64(pi->gid_prefix), guid = htobe64(pi->port_guid);
	memcpy(l.live_s_gid, &pfx, 8);
	memcpy(l.live_s_gid + 8, &guid, 8);
	trace_addresses(&l, s);
	if (l.roce)
		memcpy(l.live_s_gid, l.trace_s_gid, 16);
	if (peer_address(&l, err, sizeof(err)) < 0) {
		fprintf(stderr, "uscm-replay live: %s\n", err);
		um_port_close(l.port);
		return -1;
	}
	l.matched = calloc(t->n + 1, 1);
	if (!l.matched) {
		um_port_close(l.port);
		return -1;
	}

	/* Connections S served on services not told about are not played, as
	 * in check; the rest is played in trace order. */
	size_t first = (size_t)-1;
	for (size_t i = 0; i < t->n && first == (size_t)-1; i++)
		if (t->m[i].dir != RP_OTHER && t->m[i].is_cm)
			first = i;
	if (first == (size_t)-1) {
		free(l.matched);
		um_port_close(l.port);
		return -1;
	}
	l.t0_trace = l.anchor_trace = t->m[first].ts;
	l.t0_real = l.anchor_real = now_ns();
	uint64_t tmo = (uint64_t)(lo->timeout_ms > 0 ? lo->timeout_ms : 2000) * 1000000u;
	for (size_t i = first; i < t->n; i++) {
		const struct rp_mad *m = &t->m[i];
		if (m->dir == RP_OTHER || !m->is_cm)
			continue;
		if (m->dir == RP_TO_S) {
			/* Wait (up to the timeout past its trace time) for the
			 * answer the trace has, so S's next MAD can name the peer. */
			uint64_t deadline = live_time(&l, m->ts) + tmo;
			if (!l.started) /* waiting for the live peer to begin */
				deadline = now_ns() + tmo;
			while (!l.matched[i] && now_ns() < deadline)
				pump(&l, now_ns() + 5000000u < deadline ? now_ns() + 5000000u : deadline);
			continue;
		}
		pump(&l, live_time(&l, m->ts));
		l.started = 1;
		uint8_t mad[CMP_MAD_SIZE];
		struct cmp_addr dst = { .lid = l.live_p_lid, .qpn = 1, .qkey = UM_QKEY_GSI };
		if (l.roce || m->meta.has_grh) {
			dst.grh = 1;
			memcpy(dst.gid, l.live_p_gid, 16);
			dst.hop_limit = 64;
		}
		rewrite_out(&l, m, mad);
		l.sent++;
		l.anchor_real = now_ns();
		l.anchor_trace = m->ts;
		if (um_port_send_cm(l.port, &dst, mad) < 0)
			rp_report_add(r, RP_D_ACTION, m->frame, m->hdr.attr_id, NULL,
				      "sending S's MAD failed: %s", strerror(errno));
	}
	/* The peer's late answers, then what never came. */
	pump(&l, now_ns() + o->tol_ns);
	for (size_t i = first; i < t->n; i++) {
		const struct rp_mad *m = &t->m[i];
		if (m->dir != RP_TO_S || !m->is_cm || l.matched[i])
			continue;
		struct rp_diff *d = rp_report_add(r, RP_D_MISSING, m->frame, m->hdr.attr_id, NULL,
						  "the trace's peer sent %s; the live peer did not "
						  "(within %d ms)",
						  cmp_cm_attr_str(m->hdr.attr_id), lo->timeout_ms);
		d->t_trace = m->ts;
	}
	lo->paired = l.paired;
	if (!lo->quiet)
		fprintf(stderr, "uscm-replay live: %s port %d (LID %u) played %u MAD%s of side %s to LID %u; "
			"%u answer%s paired with the trace\n",
		ca, lo->port, l.live_s_lid, l.sent, l.sent == 1 ? "" : "s", s->text, l.live_p_lid,
		l.paired, l.paired == 1 ? "" : "s");
	free(l.matched);
	rp_map_free(&l.map);
	um_port_close(l.port);
	return 0;
}
