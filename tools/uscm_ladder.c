/*
 * uscm_ladder.c - ladder diagrams of a MAD trace (see uscm_ladder.h):
 * decoding each MAD into what an arrow shows, grouping, and the text and
 * SVG renderings.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_cm.h"
#include "cm_proto/cmp_cma.h"
#include "tools/uscm_ladder.h"
#include "umad/um_sa.h"

#define DEFAULT_GAP_NS 100000000ull /* 100 ms when no REQ says otherwise */
#define RETRY_LOOKBACK 256          /* earlier MADs of a group searched for a retry */

struct ladder *ladder_new(uint64_t gap_ns, int abs_time)
{
	struct ladder *l = calloc(1, sizeof(*l));

	if (l) {
		l->gap_ns = gap_ns;
		l->abs_time = abs_time;
	}
	return l;
}

void ladder_free(struct ladder *l)
{
	if (!l)
		return;
	for (unsigned i = 0; i < l->ngroups; i++) {
		free(l->groups[i].mads);
		free(l->groups[i].lanes);
	}
	free(l->groups);
	free(l->mads);
	free(l->lanes);
	free(l);
}

/* ---- one MAD ------------------------------------------------------------ */

static int is_v4mapped(const uint8_t g[16])
{
	static const uint8_t pfx[12] = { [10] = 0xff, [11] = 0xff };
	return memcmp(g, pfx, 12) == 0;
}

/* The lane of one end of a frame (src or dst), added when new. -1: ENOMEM. */
static int lane_of(struct ladder *l, const struct um_frame_meta *m, int src)
{
	struct ladder_lane ln;
	const uint8_t *gid = src ? m->sgid : m->dgid;

	memset(&ln, 0, sizeof(ln));
	ln.qpn = src ? m->src_qp : m->dest_qp;
	if (m->link == UM_LINK_IB) {
		snprintf(ln.addr, sizeof(ln.addr), "LID %u", src ? m->slid : m->dlid);
		if (m->has_grh)
			cmp_gid_str(gid, ln.gid, sizeof(ln.gid));
	} else if (is_v4mapped(gid)) {
		inet_ntop(AF_INET, gid + 12, ln.addr, sizeof(ln.addr));
	} else {
		inet_ntop(AF_INET6, gid, ln.addr, sizeof(ln.addr));
	}
	/* An endpoint is its address and QP; a GID seen later is remembered. */
	for (unsigned i = 0; i < l->nlanes; i++) {
		struct ladder_lane *o = &l->lanes[i];

		if (o->qpn == ln.qpn && !strcmp(o->addr, ln.addr)) {
			if (!o->gid[0] && ln.gid[0])
				memcpy(o->gid, ln.gid, sizeof(o->gid));
			return (int)i;
		}
	}
	if (l->nlanes == l->lanes_cap) {
		unsigned cap = l->lanes_cap ? l->lanes_cap * 2 : 16;
		struct ladder_lane *n = realloc(l->lanes, cap * sizeof(*n));

		if (!n)
			return -1;
		l->lanes = n;
		l->lanes_cap = cap;
	}
	l->lanes[l->nlanes] = ln;
	return (int)l->nlanes++;
}

/* Bytes of private data up to the last non-zero one ("how much is used":
 * the wire always carries the whole fixed-size field). */
static unsigned pdata_used(const uint8_t *p, unsigned n)
{
	while (n && !p[n - 1])
		n--;
	return n;
}

#define ADD(...) (pos += (size_t)snprintf(f + pos, pos < sz ? sz - pos : 0, __VA_ARGS__))

static void sid_text(char *f, size_t sz, size_t *ppos, uint64_t sid)
{
	size_t pos = *ppos;
	enum cmp_ps ps;
	uint16_t port;

	ADD(" sid 0x%016" PRIx64, sid);
	if (cmp_sid_split(sid, &ps, &port) == 0)
		ADD(" (%s port %u)", cmp_ps_str(ps), port);
	*ppos = pos;
}

/* Key fields and grouping keys of a decoded CM message. */
static void cm_fields(const struct cmp_cm_msg *cm, struct ladder_mad *x)
{
	char *f = x->fields;
	size_t sz = sizeof(x->fields), pos = 0;

	x->kind = LADDER_CONN;
	x->lcid = cmp_cm_local_id(cm);
	x->rcid = cmp_cm_remote_id(cm);
	switch (cm->hdr.attr_id) {
	case UMAD_CM_ATTR_REQ: {
		const struct cmp_cm_req *r = &cm->u.req;
		unsigned t = r->local_cm_response_timeout < r->remote_cm_response_timeout
				     ? r->local_cm_response_timeout
				     : r->remote_cm_response_timeout;

		x->is_request = 1;
		x->resp_timeout = (int8_t)t;
		ADD("lcid 0x%08x", r->local_comm_id);
		sid_text(f, sz, &pos, r->service_id);
		ADD(" qpn 0x%06x psn 0x%06x timeouts %u/%u retries %u pdata %u",
		    r->local_qpn, r->starting_psn, r->local_cm_response_timeout,
		    r->remote_cm_response_timeout, r->max_cm_retries,
		    pdata_used(r->private_data, CMP_REQ_PDATA));
		break;
	}
	case UMAD_CM_ATTR_REP: {
		const struct cmp_cm_rep *r = &cm->u.rep;

		x->is_request = 1;
		ADD("lcid 0x%08x rcid 0x%08x qpn 0x%06x psn 0x%06x pdata %u", r->local_comm_id,
		    r->remote_comm_id, r->local_qpn, r->starting_psn,
		    pdata_used(r->private_data, CMP_REP_PDATA));
		break;
	}
	case UMAD_CM_ATTR_REJ: {
		const struct cmp_cm_rej *r = &cm->u.rej;

		ADD("lcid 0x%08x rcid 0x%08x reason %u (%s) pdata %u", r->local_comm_id,
		    r->remote_comm_id, r->reason, cmp_cm_rej_reason_str(r->reason),
		    pdata_used(r->private_data, CMP_REJ_PDATA));
		break;
	}
	case UMAD_CM_ATTR_MRA: {
		const struct cmp_cm_mra *r = &cm->u.mra;
		static const char *const what[] = { "REQ", "REP", "LAP", "3?" };

		ADD("lcid 0x%08x rcid 0x%08x MRAed %s service timeout %u", r->local_comm_id,
		    r->remote_comm_id, what[r->message_mraed & 3], r->service_timeout);
		break;
	}
	case UMAD_CM_ATTR_DREQ:
		x->is_request = 1;
		ADD("lcid 0x%08x rcid 0x%08x remote qpn 0x%06x pdata %u", x->lcid, x->rcid,
		    cm->u.dreq.remote_qpn_eecn, pdata_used(cm->u.dreq.private_data, CMP_DREQ_PDATA));
		break;
	case UMAD_CM_ATTR_LAP:
		x->is_request = 1;
		ADD("lcid 0x%08x rcid 0x%08x", x->lcid, x->rcid);
		break;
	case UMAD_CM_ATTR_APR:
		ADD("lcid 0x%08x rcid 0x%08x status %u", x->lcid, x->rcid, cm->u.apr.ap_status);
		break;
	case UMAD_CM_ATTR_RTU:
	case UMAD_CM_ATTR_DREP:
		/* Same shape: the two comm IDs, then private data. */
		ADD("lcid 0x%08x rcid 0x%08x pdata %u", x->lcid, x->rcid,
		    pdata_used(cm->u.rtu.private_data, CMP_RTU_PDATA));
		break;
	case UMAD_CM_ATTR_SIDR_REQ:
		x->kind = LADDER_SIDR;
		x->is_request = 1;
		ADD("reqid 0x%08x", x->lcid);
		sid_text(f, sz, &pos, cm->u.sidr_req.service_id);
		ADD(" pdata %u", pdata_used(cm->u.sidr_req.private_data, CMP_SIDR_REQ_PDATA));
		break;
	case UMAD_CM_ATTR_SIDR_REP:
		x->kind = LADDER_SIDR;
		/* A SIDR exchange is keyed by its request ID on both messages. */
		x->lcid = x->rcid;
		x->rcid = 0;
		ADD("reqid 0x%08x status %u qpn 0x%06x qkey 0x%08x", x->lcid,
		    cm->u.sidr_rep.status, cm->u.sidr_rep.qpn, cm->u.sidr_rep.qkey);
		break;
	default: /* ClassPortInfo */
		x->kind = LADDER_STRAY;
		ADD("tid 0x%016" PRIx64, cm->hdr.tid);
		break;
	}
	if (x->kind == LADDER_CONN && !x->lcid && !x->rcid)
		x->kind = LADDER_STRAY;
}

static int sa_is_request(uint8_t method)
{
	switch (method) {
	case UMAD_METHOD_GET:
	case UMAD_METHOD_SET:
	case 0x12: /* GetTable */
	case 0x14: /* GetMulti */
	case 0x15: /* Delete */
		return 1;
	default:
		return 0;
	}
}

int ladder_add(struct ladder *l, const struct um_pcap_mad *p)
{
	struct ladder_mad *x;
	struct cmp_mad_hdr hdr;
	struct cmp_diags d;
	int s, t;

	if (l->nmads == l->mads_cap) {
		unsigned cap = l->mads_cap ? l->mads_cap * 2 : 64;
		struct ladder_mad *n = realloc(l->mads, cap * sizeof(*n));

		if (!n)
			return -1;
		l->mads = n;
		l->mads_cap = cap;
	}
	s = lane_of(l, &p->meta, 1);
	t = lane_of(l, &p->meta, 0);
	if (s < 0 || t < 0)
		return -1;
	x = &l->mads[l->nmads];
	memset(x, 0, sizeof(*x));
	x->frame_no = p->frame_no;
	x->ts_ns = p->meta.ts_ns;
	if (!l->nmads)
		l->t0 = x->ts_ns;
	x->src = (unsigned)s;
	x->dst = (unsigned)t;
	x->resp_timeout = -1;
	x->kind = LADDER_STRAY;
	x->bad_crc = !p->meta.icrc_ok || p->meta.vcrc_ok == 0;
	cmp_layout_decode(&cmp_mad_hdr_layout, p->mad, &hdr);
	x->mgmt_class = hdr.mgmt_class;
	x->method = hdr.method;
	x->attr_id = hdr.attr_id;
	x->tid = hdr.tid;
	cmp_diags_init(&d);
	if (hdr.mgmt_class == UMAD_CLASS_CM) {
		struct cmp_cm_msg cm;

		cmp_cm_decode(p->mad, UM_MAD_SIZE, &cm, &d);
		snprintf(x->name, sizeof(x->name), "%s", cmp_cm_attr_str(hdr.attr_id));
		/* Errors after the header still leave the fields decoded. */
		if (cmp_cm_layout(hdr.attr_id) && cm.hdr.attr_id == hdr.attr_id)
			cm_fields(&cm, x);
	} else if (hdr.mgmt_class == UMAD_CLASS_SUBN_ADM) {
		struct um_sa_msg sa;
		char *buf = NULL;
		size_t len = 0;
		FILE *ms;

		um_sa_decode(p->mad, UM_MAD_SIZE, &sa, &d);
		snprintf(x->name, sizeof(x->name), "SA %s %s",
			 cmp_mad_method_str(hdr.mgmt_class, hdr.method), um_sa_attr_str(hdr.attr_id));
		x->kind = LADDER_SA;
		x->lcid = (uint32_t)hdr.tid;
		x->is_request = sa_is_request(hdr.method);
		if (hdr.status)
			snprintf(x->fields, sizeof(x->fields), "status 0x%04x (%s) ", hdr.status,
				 um_sa_status_str(hdr.status));
		if (!d.errors && (ms = open_memstream(&buf, &len))) {
			um_sa_summary(&sa, ms);
			fclose(ms);
			size_t k = strlen(x->fields);
			snprintf(x->fields + k, sizeof(x->fields) - k, "%s",
				 buf && buf[0] == ' ' ? buf + 1 : buf ? buf : "");
			free(buf);
		}
	} else {
		cmp_mad_hdr_decode(p->mad, UM_MAD_SIZE, &hdr, &d);
		snprintf(x->name, sizeof(x->name), "%s %s 0x%04x", cmp_mad_class_str(hdr.mgmt_class),
			 cmp_mad_method_str(hdr.mgmt_class, hdr.method), hdr.attr_id);
		snprintf(x->fields, sizeof(x->fields), "tid 0x%016" PRIx64, hdr.tid);
	}
	if (d.errors) {
		x->malformed = 1;
		snprintf(x->why, sizeof(x->why), "%s", d.n ? d.d[0].text : "error");
	}
	l->nmads++;
	return 0;
}

/* ---- grouping ------------------------------------------------------------ */

/* Keys (kind, lane, id) -> union-find node, open addressing. */
struct keymap {
	uint64_t *key;
	unsigned *node;
	size_t cap, n;
	unsigned *parent;
	unsigned nnodes;
};

static uint64_t mkkey(int kind, unsigned lane, uint32_t id)
{
	return (uint64_t)(kind + 1) << 56 | (uint64_t)(lane & 0xFFFFFF) << 32 | id;
}

static unsigned uf_find(struct keymap *k, unsigned a)
{
	while (k->parent[a] != a)
		a = k->parent[a] = k->parent[k->parent[a]];
	return a;
}

/* The node of key, made when new. */
static unsigned km_node(struct keymap *k, uint64_t key)
{
	size_t h = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 20) & (k->cap - 1);

	while (k->key[h]) {
		if (k->key[h] == key)
			return k->node[h];
		h = (h + 1) & (k->cap - 1);
	}
	k->key[h] = key;
	k->node[h] = k->nnodes;
	k->parent[k->nnodes] = k->nnodes;
	k->n++;
	return k->nnodes++;
}

static int group_push(struct ladder_group *g, unsigned m)
{
	if (g->n == g->cap) {
		unsigned cap = g->cap ? g->cap * 2 : 8;
		unsigned *n = realloc(g->mads, cap * sizeof(*n));

		if (!n)
			return -1;
		g->mads = n;
		g->cap = cap;
	}
	g->mads[g->n++] = m;
	return 0;
}

static int group_lane(struct ladder_group *g, unsigned lane, unsigned max)
{
	for (unsigned i = 0; i < g->nlanes; i++)
		if (g->lanes[i] == lane)
			return 0;
	if (!g->lanes && !(g->lanes = calloc(max, sizeof(*g->lanes))))
		return -1;
	g->lanes[g->nlanes++] = lane;
	return 0;
}

/* Does b answer request a? */
static int answers(const struct ladder_mad *a, const struct ladder_mad *b)
{
	if (b->src != a->dst)
		return 0;
	if (a->kind == LADDER_SA)
		return (b->method & 0x80) != 0;
	switch (a->attr_id) {
	case UMAD_CM_ATTR_REQ:
		return b->attr_id == UMAD_CM_ATTR_REP || b->attr_id == UMAD_CM_ATTR_REJ ||
		       b->attr_id == UMAD_CM_ATTR_MRA;
	case UMAD_CM_ATTR_REP:
		return b->attr_id == UMAD_CM_ATTR_RTU || b->attr_id == UMAD_CM_ATTR_REJ ||
		       b->attr_id == UMAD_CM_ATTR_MRA;
	case UMAD_CM_ATTR_DREQ:
		return b->attr_id == UMAD_CM_ATTR_DREP;
	case UMAD_CM_ATTR_LAP:
		return b->attr_id == UMAD_CM_ATTR_APR || b->attr_id == UMAD_CM_ATTR_MRA;
	case UMAD_CM_ATTR_SIDR_REQ:
		return b->attr_id == UMAD_CM_ATTR_SIDR_REP;
	default:
		return 0;
	}
}

static int same_send(const struct ladder_mad *a, const struct ladder_mad *b)
{
	return a->src == b->src && a->dst == b->dst && a->mgmt_class == b->mgmt_class &&
	       a->method == b->method && a->attr_id == b->attr_id && a->tid == b->tid;
}

static int by_time(const void *pa, const void *pb, void *ctx)
{
	const struct ladder *l = ctx;
	const struct ladder_mad *a = &l->mads[*(const unsigned *)pa];
	const struct ladder_mad *b = &l->mads[*(const unsigned *)pb];

	if (a->ts_ns != b->ts_ns)
		return a->ts_ns < b->ts_ns ? -1 : 1;
	return a->frame_no < b->frame_no ? -1 : a->frame_no > b->frame_no;
}

static void annotate(struct ladder *l, struct ladder_group *g)
{
	uint64_t thr = DEFAULT_GAP_NS;
	unsigned ncid = 0;
	char t[160] = "";

	qsort_r(g->mads, g->n, sizeof(*g->mads), by_time, l);
	for (unsigned i = 0; i < g->n; i++) {
		struct ladder_mad *x = &l->mads[g->mads[i]];

		if (x->resp_timeout >= 0 && thr == DEFAULT_GAP_NS)
			thr = 4096ull << (x->resp_timeout > 31 ? 31 : x->resp_timeout);
	}
	g->gap_threshold_ns = l->gap_ns ? l->gap_ns : thr;
	for (unsigned i = 0; i < g->n; i++) {
		struct ladder_mad *x = &l->mads[g->mads[i]];

		x->group = (unsigned)(g - l->groups);
		if (i && x->ts_ns - l->mads[g->mads[i - 1]].ts_ns >= g->gap_threshold_ns)
			x->gap_ns = x->ts_ns - l->mads[g->mads[i - 1]].ts_ns;
		for (unsigned k = i, seen = 0; k-- > 0 && seen < RETRY_LOOKBACK; seen++) {
			const struct ladder_mad *o = &l->mads[g->mads[k]];

			if (same_send(o, x)) {
				x->retry = o->retry + 1;
				x->retry_gap_ns = x->ts_ns - o->ts_ns;
				break;
			}
		}
	}
	for (unsigned i = 0; i < g->n; i++) {
		struct ladder_mad *x = &l->mads[g->mads[i]];
		int done = 0;

		if (!x->is_request)
			continue;
		for (unsigned k = i + 1; k < g->n && !done; k++) {
			const struct ladder_mad *o = &l->mads[g->mads[k]];
			done = same_send(x, o) || answers(x, o);
		}
		x->no_answer = !done;
	}
	/* Title: what the group is, from its first MADs. */
	const struct ladder_mad *f = &l->mads[g->mads[0]];
	switch (g->kind) {
	case LADDER_CONN: {
		uint32_t a = 0, b = 0;
		const char *sid = NULL;

		for (unsigned i = 0; i < g->n; i++) {
			const struct ladder_mad *x = &l->mads[g->mads[i]];

			if (!sid && x->attr_id == UMAD_CM_ATTR_REQ)
				sid = strstr(x->fields, "sid ");
			if (!a && !b && x->lcid && x->rcid) {
				a = x->rcid;
				b = x->lcid;
			}
			ncid = ncid ? ncid : x->lcid;
		}
		if (!a && !b)
			a = ncid;
		if (sid) {
			const char *e = strstr(sid, " qpn");
			int n = e ? (int)(e - sid) : (int)strlen(sid);
			snprintf(t, sizeof(t), ", %.*s", n, sid);
		}
		snprintf(g->title, sizeof(g->title), "connection: comm IDs 0x%08x <-> 0x%08x%s", a, b,
			 t);
		break;
	}
	case LADDER_SIDR:
		snprintf(g->title, sizeof(g->title), "SIDR: request ID 0x%08x", f->lcid);
		break;
	case LADDER_SA:
		snprintf(g->title, sizeof(g->title), "SA transaction: %s, TID 0x%08x (low 32 bits)",
			 f->name + 3, f->lcid);
		break;
	default:
		snprintf(g->title, sizeof(g->title),
			 "stray MADs (not part of a connection, SIDR or SA transaction)");
		break;
	}
}

int ladder_build(struct ladder *l)
{
	struct keymap k = { 0 };
	unsigned *node = NULL, *gid_of_root = NULL, stray = 0, have_stray = 0;
	int rc = -1;

	if (!l->nmads)
		return 0;
	k.cap = 16;
	while (k.cap < 4 * (size_t)l->nmads)
		k.cap *= 2;
	k.key = calloc(k.cap, sizeof(*k.key));
	k.node = calloc(k.cap, sizeof(*k.node));
	k.parent = calloc(2 * (size_t)l->nmads + 1, sizeof(*k.parent));
	node = calloc(l->nmads, sizeof(*node));
	gid_of_root = malloc((2 * (size_t)l->nmads + 1) * sizeof(*gid_of_root));
	l->groups = calloc(l->nmads + 1, sizeof(*l->groups));
	if (!k.key || !k.node || !k.parent || !node || !gid_of_root || !l->groups)
		goto out;
	/* Link the keys each MAD carries. */
	for (unsigned i = 0; i < l->nmads; i++) {
		struct ladder_mad *x = &l->mads[i];
		unsigned a = ~0u, b = ~0u;

		switch (x->kind) {
		case LADDER_CONN:
			if (x->lcid)
				a = km_node(&k, mkkey(LADDER_CONN, x->src, x->lcid));
			if (x->rcid)
				b = km_node(&k, mkkey(LADDER_CONN, x->dst, x->rcid));
			if (a == ~0u)
				a = b;
			else if (b != ~0u)
				k.parent[uf_find(&k, b)] = uf_find(&k, a);
			break;
		case LADDER_SIDR:
			a = km_node(&k, mkkey(LADDER_SIDR,
					      x->attr_id == UMAD_CM_ATTR_SIDR_REQ ? x->src : x->dst,
					      x->lcid));
			break;
		case LADDER_SA:
			a = km_node(&k, mkkey(LADDER_SA, x->is_request || !(x->method & 0x80)
								 ? x->src : x->dst, x->lcid));
			break;
		default:
			break;
		}
		node[i] = a;
	}
	/* Groups in the order of their first MAD; stray last. */
	for (unsigned i = 0; i < 2 * l->nmads + 1; i++)
		gid_of_root[i] = ~0u;
	for (unsigned i = 0; i < l->nmads; i++) {
		struct ladder_mad *x = &l->mads[i];
		unsigned gi;

		if (node[i] == ~0u) {
			have_stray = 1;
			continue;
		}
		unsigned r = uf_find(&k, node[i]);
		if (gid_of_root[r] == ~0u) {
			gid_of_root[r] = l->ngroups;
			l->groups[l->ngroups++].kind = x->kind;
		}
		gi = gid_of_root[r];
		if (group_push(&l->groups[gi], i) < 0)
			goto out;
	}
	if (have_stray) {
		stray = l->ngroups++;
		l->groups[stray].kind = LADDER_STRAY;
		for (unsigned i = 0; i < l->nmads; i++)
			if (node[i] == ~0u && group_push(&l->groups[stray], i) < 0)
				goto out;
	}
	for (unsigned gi = 0; gi < l->ngroups; gi++) {
		struct ladder_group *g = &l->groups[gi];

		annotate(l, g);
		for (unsigned i = 0; i < g->n; i++) {
			const struct ladder_mad *x = &l->mads[g->mads[i]];

			if (group_lane(g, x->src, l->nlanes) < 0 || group_lane(g, x->dst, l->nlanes) < 0)
				goto out;
		}
	}
	rc = 0;
out:
	free(k.key);
	free(k.node);
	free(k.parent);
	free(node);
	free(gid_of_root);
	return rc;
}

/* ---- shared text ----------------------------------------------------------- */

static void fmt_dur(char *b, size_t n, uint64_t ns)
{
	if (ns >= 10000000000ull)
		snprintf(b, n, "%.3f s", (double)ns / 1e9);
	else
		snprintf(b, n, "%.3f ms", (double)ns / 1e6);
}

static void fmt_time(const struct ladder *l, const struct ladder_mad *x, char *b, size_t n)
{
	if (l->abs_time)
		snprintf(b, n, "%.6f", (double)x->ts_ns / 1e9);
	else
		snprintf(b, n, "%.6f", (double)(int64_t)(x->ts_ns - l->t0) / 1e9);
}

/* The markers after an arrow's fields: retry, malformed, CRC, no answer. */
static void markers(const struct ladder_mad *x, char *b, size_t n)
{
	size_t pos = 0;
	char d[32];

	b[0] = 0;
	if (x->retry) {
		fmt_dur(d, sizeof(d), x->retry_gap_ns);
		pos += (size_t)snprintf(b + pos, n - pos, " [retry #%u, +%s after the previous send]",
					x->retry, d);
	}
	if (pos < n && x->malformed)
		pos += (size_t)snprintf(b + pos, n - pos, " [malformed: %s]", x->why);
	if (pos < n && x->bad_crc)
		pos += (size_t)snprintf(b + pos, n - pos, " [bad CRC]");
	if (pos < n && x->no_answer)
		snprintf(b + pos, n - pos, " [no answer]");
}

/* ---- text ------------------------------------------------------------------ */

#define T_LANE 24  /* columns between lanes */
#define T_SLACK 64 /* room for the last lane's header past the line */

static void put_at(char *line, int width, int at, const char *s)
{
	int len = (int)strlen(s);

	if (at < 0)
		at = 0;
	for (int i = 0; i < len && at + i < width; i++)
		line[at + i] = s[i];
}

/* A row of the diagram: blanks with the lane marks. */
static void blank_row(char *line, int width, const int *lanex, unsigned nl, char mark)
{
	memset(line, ' ', (size_t)width);
	line[width] = 0;
	for (unsigned i = 0; i < nl; i++)
		line[lanex[i]] = mark;
}

/* Cuts trailing blanks. */
static char *rtrim(char *s)
{
	size_t n = strlen(s);

	while (n && s[n - 1] == ' ')
		s[--n] = 0;
	return s;
}

static void text_group(const struct ladder *l, const struct ladder_group *g, unsigned no,
		       FILE *out)
{
	int left = l->abs_time ? 20 : 12;
	unsigned nl = g->nlanes < 32 ? g->nlanes : 32;
	int lanes_end = left + (int)(nl - 1) * T_LANE + 1;
	int width = lanes_end + T_SLACK;
	char *line = malloc((size_t)width + 1), tm[32], mk[256], d[32];
	int lanex[32];

	if (!line)
		return;
	fprintf(out, "== %u. %s (%u MAD%s)\n", no, g->title, g->n, g->n == 1 ? "" : "s");
	for (unsigned i = 0; i < nl; i++)
		lanex[i] = left + (int)i * T_LANE;
	/* Headers, centred on the lanes: address, GID (IB with a GRH), QP. */
	for (int row = 0; row < 3; row++) {
		int any = 0;

		blank_row(line, width, lanex, 0, ' ');
		for (unsigned i = 0; i < nl; i++) {
			const struct ladder_lane *ln = &l->lanes[g->lanes[i]];
			char s[64];

			if (row == 0)
				snprintf(s, sizeof(s), "%s", ln->addr);
			else if (row == 1)
				snprintf(s, sizeof(s), "%s", ln->gid);
			else
				snprintf(s, sizeof(s), "QP %u", ln->qpn);
			if (!s[0])
				continue;
			any = 1;
			/* Lanes but the last are cut to their column. */
			if (i + 1 < nl && strlen(s) > T_LANE - 2)
				s[T_LANE - 2] = 0;
			put_at(line, width, lanex[i] - (int)strlen(s) / 2, s);
		}
		if (any)
			fprintf(out, "%s\n", rtrim(line));
	}
	for (unsigned m = 0; m < g->n; m++) {
		const struct ladder_mad *x = &l->mads[g->mads[m]];
		int a = -1, b = -1;
		const char *name = x->kind == LADDER_SA ? x->name + 3 : x->name;

		for (unsigned i = 0; i < nl; i++) {
			if (g->lanes[i] == x->src)
				a = lanex[i];
			if (g->lanes[i] == x->dst)
				b = lanex[i];
		}
		if (x->gap_ns) {
			blank_row(line, lanes_end, lanex, nl, ':');
			fmt_dur(d, sizeof(d), x->gap_ns);
			fprintf(out, "%s   ~ %s without MADs (gap >= %.3f ms) ~\n", line, d,
				(double)g->gap_threshold_ns / 1e6);
		}
		blank_row(line, lanes_end, lanex, nl, '|');
		fmt_time(l, x, tm, sizeof(tm));
		put_at(line, left - 1, 0, tm);
		int shown = 0;
		if (a >= 0 && b >= 0 && a != b) {
			int lo = a < b ? a : b, hi = a < b ? b : a, room = hi - lo - 5;
			char nm[48];

			for (int c = lo + 1; c < hi; c++)
				line[c] = x->malformed ? '~' : x->retry ? '=' : '-';
			line[b > a ? hi - 1 : lo + 1] = b > a ? '>' : '<';
			shown = (int)strlen(name) <= room;
			snprintf(nm, sizeof(nm), " %.*s ", room > 0 ? room : 0, name);
			put_at(line, hi, (lo + hi) / 2 - (int)strlen(nm) / 2, nm);
		} else if (a >= 0) {
			line[a] = 'o'; /* to itself */
		}
		markers(x, mk, sizeof(mk));
		fprintf(out, "%s  %s%s%s\n", line, shown ? "" : name, shown ? "" : " ", x->fields);
		if (mk[0])
			fprintf(out, "%*s%s\n", lanes_end + 1, "", mk);
	}
	fputc('\n', out);
	free(line);
}

void ladder_text(const struct ladder *l, FILE *out)
{
	unsigned retries = 0, malformed = 0, unanswered = 0;

	for (unsigned i = 0; i < l->nmads; i++) {
		retries += l->mads[i].retry != 0;
		malformed += l->mads[i].malformed;
		unanswered += l->mads[i].no_answer;
	}
	fprintf(out, "%u MADs in %u group%s; %u retr%s, %u malformed, %u unanswered; time in s%s\n\n",
		l->nmads, l->ngroups, l->ngroups == 1 ? "" : "s", retries, retries == 1 ? "y" : "ies",
		malformed, unanswered, l->abs_time ? " (absolute)" : " since the first MAD");
	for (unsigned i = 0; i < l->ngroups; i++)
		text_group(l, &l->groups[i], i + 1, out);
}

/* ---- SVG ------------------------------------------------------------------- */

#define S_LEFT 120     /* time axis */
#define S_LANE 420     /* between lanes */
#define S_ROW 46       /* one arrow */
#define S_GAP 26       /* a gap marker */
#define S_TITLE 34
#define S_HEAD 58      /* lane headers */
#define S_FOOT 24

static void xml_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		switch (*s) {
		case '&': fputs("&amp;", out); break;
		case '<': fputs("&lt;", out); break;
		case '>': fputs("&gt;", out); break;
		case '"': fputs("&quot;", out); break;
		default:
			if ((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7F)
				fputc(*s, out);
			else
				fputc('?', out); /* only ASCII: always valid XML */
		}
	}
}

static int group_height(const struct ladder *l, const struct ladder_group *g)
{
	int h = S_TITLE + S_HEAD + S_FOOT;

	for (unsigned m = 0; m < g->n; m++)
		h += S_ROW + (l->mads[g->mads[m]].gap_ns ? S_GAP : 0);
	return h;
}

/* Arrow colours; each has its own arrowhead marker "ah<index>". */
static const char *const colors[] = { "#1f3f9f", "#207020", "#707070", "#d06000", "#c00000" };

static unsigned arrow_kind(const struct ladder_mad *x)
{
	if (x->malformed || x->bad_crc)
		return 4;
	if (x->retry)
		return 3;
	if (x->kind == LADDER_SA)
		return 1;
	if (x->kind == LADDER_STRAY)
		return 2;
	return 0;
}

static const char *arrow_color(const struct ladder_mad *x)
{
	return colors[arrow_kind(x)];
}

static int svg_group(const struct ladder *l, const struct ladder_group *g, unsigned no, int y0,
		     FILE *out)
{
	int h = group_height(l, g), y, bottom = y0 + h - S_FOOT / 2;
	char tm[32], mk[256], d[32];

	fprintf(out, "<g class=\"group\" id=\"group%u\">\n", no);
	fprintf(out, "<text class=\"title\" x=\"10\" y=\"%d\">%u. ", y0 + 22, no);
	xml_text(out, g->title);
	fprintf(out, " (%u MAD%s)</text>\n", g->n, g->n == 1 ? "" : "s");
	/* lanes: header box and a vertical line */
	for (unsigned i = 0; i < g->nlanes; i++) {
		const struct ladder_lane *ln = &l->lanes[g->lanes[i]];
		int x = S_LEFT + 110 + (int)i * S_LANE, top = y0 + S_TITLE;

		fprintf(out, "<rect class=\"lanehead\" x=\"%d\" y=\"%d\" width=\"200\" height=\"%d\"/>\n",
			x - 100, top, S_HEAD - 10);
		fprintf(out, "<text class=\"lane\" x=\"%d\" y=\"%d\">", x, top + 16);
		xml_text(out, ln->addr);
		fprintf(out, " QP %u</text>\n", ln->qpn);
		if (ln->gid[0]) {
			fprintf(out, "<text class=\"gid\" x=\"%d\" y=\"%d\">", x, top + 34);
			xml_text(out, ln->gid);
			fputs("</text>\n", out);
		}
		fprintf(out, "<line class=\"laneline\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", x,
			top + S_HEAD - 10, x, bottom);
	}
	/* time axis */
	y = y0 + S_TITLE + S_HEAD;
	fprintf(out, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n", S_LEFT - 10,
		y, S_LEFT - 10, bottom);
	fprintf(out, "<text class=\"axislabel\" x=\"%d\" y=\"%d\">time (s)</text>\n", S_LEFT - 14,
		y - 6);
	for (unsigned m = 0; m < g->n; m++) {
		const struct ladder_mad *x = &l->mads[g->mads[m]];
		int xa = -1, xb = -1;

		if (x->gap_ns) {
			fmt_dur(d, sizeof(d), x->gap_ns);
			fprintf(out, "<line class=\"gap\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n",
				S_LEFT - 10, y + S_GAP / 2,
				S_LEFT + 110 + (int)(g->nlanes - 1) * S_LANE + 60, y + S_GAP / 2);
			fprintf(out, "<text class=\"gaptext\" x=\"%d\" y=\"%d\">gap %s (&#8805; %.3f ms)</text>\n",
				S_LEFT + 110 + (int)(g->nlanes - 1) * S_LANE / 2, y + S_GAP / 2 - 3, d,
				(double)g->gap_threshold_ns / 1e6);
			y += S_GAP;
		}
		for (unsigned i = 0; i < g->nlanes; i++) {
			int lx = S_LEFT + 110 + (int)i * S_LANE;
			if (g->lanes[i] == x->src)
				xa = lx;
			if (g->lanes[i] == x->dst)
				xb = lx;
		}
		int ya = y + 30;
		fmt_time(l, x, tm, sizeof(tm));
		fprintf(out, "<line class=\"tick\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>\n",
			S_LEFT - 14, ya, S_LEFT - 6, ya);
		fprintf(out, "<text class=\"time\" x=\"%d\" y=\"%d\">%s</text>\n", S_LEFT - 18, ya + 4,
			tm);
		if (xa == xb) /* to itself: a small loop */
			fprintf(out, "<path class=\"arrow\" d=\"M%d %d h40 v10 h-36\" stroke=\"%s\" "
				     "marker-end=\"url(#ah%u)\"/>\n", xa, ya - 5, arrow_color(x),
				arrow_kind(x));
		else
			fprintf(out, "<line class=\"arrow%s\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" "
				     "stroke=\"%s\" marker-end=\"url(#ah%u)\"/>\n",
				x->malformed ? " malformed" : x->retry ? " retry" : "", xa, ya,
				xb > xa ? xb - 2 : xb + 2, ya, arrow_color(x), arrow_kind(x));
		/* Labels start just right of the arrow's left end: long field
		 * lists run on to the right, never into the time axis. */
		int cx = (xa < xb ? xa : xb) + (xa == xb ? 50 : 12);
		markers(x, mk, sizeof(mk));
		fprintf(out, "<text class=\"msg\" x=\"%d\" y=\"%d\" style=\"fill:%s\">", cx, ya - 18,
			arrow_color(x));
		xml_text(out, x->name);
		if (mk[0]) {
			fputs(" ", out);
			xml_text(out, mk + 1);
		}
		fputs("</text>\n", out);
		fprintf(out, "<text class=\"fields\" x=\"%d\" y=\"%d\">", cx, ya - 5);
		xml_text(out, x->fields);
		fputs("</text>\n", out);
		y += S_ROW;
	}
	fputs("</g>\n", out);
	return h;
}

void ladder_svg(const struct ladder *l, FILE *out)
{
	unsigned maxlanes = 1;
	int height = 40, y = 40;

	for (unsigned i = 0; i < l->ngroups; i++) {
		if (l->groups[i].nlanes > maxlanes)
			maxlanes = l->groups[i].nlanes;
		height += group_height(l, &l->groups[i]);
	}
	if (!l->ngroups)
		height += 30;
	int width = S_LEFT + 110 + (int)(maxlanes - 1) * S_LANE + 480;

	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		     "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans Mono, monospace\">\n",
		width, height, width, height);
	fputs("<title>uscm-decode ladder diagram</title>\n<defs>\n", out);
	for (unsigned i = 0; i < sizeof(colors) / sizeof(colors[0]); i++)
		fprintf(out, "<marker id=\"ah%u\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" "
			     "markerWidth=\"10\" markerHeight=\"10\" orient=\"auto\" "
			     "markerUnits=\"userSpaceOnUse\"><path d=\"M0 0 L10 5 L0 10 z\" "
			     "fill=\"%s\"/></marker>\n", i, colors[i]);
	fputs("<style>\n"
	      "text { font-size: 12px; fill: #000; }\n"
	      ".title { font-size: 15px; font-weight: bold; }\n"
	      ".lane { text-anchor: middle; font-weight: bold; }\n"
	      ".gid { text-anchor: middle; font-size: 10px; fill: #444; }\n"
	      ".lanehead { fill: #eef2fa; stroke: #8090b0; }\n"
	      ".laneline { stroke: #8090b0; stroke-width: 1.5; }\n"
	      ".axis, .tick { stroke: #999; }\n"
	      ".axislabel, .time { text-anchor: end; font-size: 11px; fill: #444; }\n"
	      ".arrow { stroke-width: 2; fill: none; }\n"
	      ".arrow.retry { stroke-dasharray: 8 3; }\n"
	      ".arrow.malformed { stroke-dasharray: 2 3; }\n"
	      ".msg { font-weight: bold; }\n"
	      ".fields { font-size: 10px; fill: #333; }\n"
	      ".gap { stroke: #b00; stroke-dasharray: 4 4; }\n"
	      ".gaptext { text-anchor: middle; font-size: 11px; fill: #b00; font-style: italic; }\n"
	      "</style>\n"
	      "</defs>\n", out);
	fprintf(out, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", width,
		height);
	fprintf(out, "<text class=\"title\" x=\"10\" y=\"24\">%u MADs in %u group%s</text>\n",
		l->nmads, l->ngroups, l->ngroups == 1 ? "" : "s");
	for (unsigned i = 0; i < l->ngroups; i++)
		y += svg_group(l, &l->groups[i], i + 1, y, out);
	fputs("</svg>\n", out);
}
