/*
 * replay_trace.c - load a trace, resolve the side, group CM MADs into
 * connections.
 */
#include "tools/replay_trace.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int rp_trace_load(const char *path, struct rp_trace *t)
{
	struct um_pcap_reader *r;
	struct um_pcap_mad p;
	size_t cap = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	r = um_pcap_open_read(path, t->err, sizeof(t->err));
	if (!r)
		return -1;
	while ((rc = um_pcap_next(r, &p)) == 1) {
		if (t->n == cap) {
			size_t nc = cap ? cap * 2 : 64;
			struct rp_mad *nm = realloc(t->m, nc * sizeof(*nm));
			if (!nm) {
				snprintf(t->err, sizeof(t->err), "out of memory");
				um_pcap_close_read(r);
				rp_trace_free(t);
				return -1;
			}
			t->m = nm;
			cap = nc;
		}
		struct rp_mad *m = &t->m[t->n++];
		memset(m, 0, sizeof(*m));
		m->frame = p.frame_no;
		m->ts = p.meta.ts_ns;
		m->meta = p.meta;
		memcpy(m->mad, p.mad, sizeof(m->mad));
		m->conn = -1;
		m->len = CMP_MAD_SIZE;
		cmp_layout_decode(&cmp_mad_hdr_layout, m->mad, &m->hdr);
		if (m->hdr.mgmt_class == UMAD_CLASS_CM) {
			m->is_cm = 1;
			m->cm_ok = cmp_cm_decode(m->mad, sizeof(m->mad), &m->cm, NULL) == 0;
		}
		if (t->n == 1)
			t->link = p.meta.link == UM_LINK_IB ? UM_LINK_IB : UM_LINK_ROCEV2;
	}
	t->stats = *um_pcap_stats(r);
	if (rc < 0) {
		t->truncated = 1;
		snprintf(t->err, sizeof(t->err), "%s", um_pcap_error(r));
	}
	um_pcap_close_read(r);
	return 0;
}

void rp_trace_free(struct rp_trace *t)
{
	free(t->m);
	free(t->conns);
	t->m = NULL;
	t->conns = NULL;
	t->n = t->nconns = 0;
}

int rp_side_parse(const char *text, struct rp_side *s, char *err, size_t errlen)
{
	char *end;

	memset(s, 0, sizeof(*s));
	snprintf(s->text, sizeof(s->text), "%s", text);
	if (!strncmp(text, "lid:", 4)) {
		unsigned long v = strtoul(text + 4, &end, 0);
		if (!text[4] || *end || v == 0 || v > 0xFFFF) {
			snprintf(err, errlen, "bad LID in '%s' (want lid:1..65535)", text);
			return -1;
		}
		s->kind = RP_SIDE_LID;
		s->lid = (uint16_t)v;
		s->have_lid = 1;
		return 0;
	}
	if (!strncmp(text, "qpn:", 4)) {
		unsigned long v = strtoul(text + 4, &end, 0);
		if (!text[4] || *end || v > 0xFFFFFF) {
			snprintf(err, errlen, "bad QPN in '%s' (want qpn:0x1..0xffffff)", text);
			return -1;
		}
		s->kind = RP_SIDE_QPN;
		s->qpn = (uint32_t)v;
		return 0;
	}
	if (!strncmp(text, "gid:", 4) || !strncmp(text, "ip:", 3)) {
		const char *a = text + (text[0] == 'g' ? 4 : 3);
		struct in_addr v4;
		s->kind = RP_SIDE_GID;
		s->have_gid = 1;
		if (inet_pton(AF_INET6, a, s->gid) == 1)
			return 0;
		if (inet_pton(AF_INET, a, &v4) == 1) {
			memset(s->gid, 0, 10);
			s->gid[10] = s->gid[11] = 0xff;
			memcpy(s->gid + 12, &v4, 4);
			return 0;
		}
		snprintf(err, errlen, "bad address in '%s' (want gid:IPv6 or ip:IPv4)", text);
		return -1;
	}
	snprintf(err, errlen, "bad side '%s' (want lid:N, gid:G, ip:A.B.C.D or qpn:Q)", text);
	return -1;
}

/* On native IB a packet without GRH carries no GID: the side is matched by
 * LID there once bind has learned it. */
int rp_side_is_src(const struct rp_side *s, const struct um_frame_meta *m)
{
	if (s->have_lid && m->link == UM_LINK_IB)
		return m->slid == s->lid;
	if (s->have_gid && m->has_grh)
		return !memcmp(m->sgid, s->gid, 16);
	return 0;
}

int rp_side_is_dst(const struct rp_side *s, const struct um_frame_meta *m)
{
	if (s->have_lid && m->link == UM_LINK_IB)
		return m->dlid == s->lid;
	if (s->have_gid && m->has_grh)
		return !memcmp(m->dgid, s->gid, 16);
	return 0;
}

/* The IB address (LID, or GID) a side given by QPN or by GID has on the
 * wire, learned from the REQs and REPs. */
static int resolve(struct rp_trace *t, struct rp_side *s)
{
	for (size_t i = 0; i < t->n; i++) {
		struct rp_mad *m = &t->m[i];
		if (!m->is_cm || !m->cm_ok)
			continue;
		uint16_t a = m->hdr.attr_id;
		if (s->kind == RP_SIDE_QPN) {
			uint32_t q = a == UMAD_CM_ATTR_REQ ? m->cm.u.req.local_qpn
				     : a == UMAD_CM_ATTR_REP ? m->cm.u.rep.local_qpn : 0;
			if (q != s->qpn)
				continue;
		} else if (a == UMAD_CM_ATTR_REQ) {
			/* GID side on IB: the REQ's path names both ends. */
			const struct cmp_cm_req *r = &m->cm.u.req;
			if (!memcmp(r->primary_local_gid, s->gid, 16)) {
				/* sender */
			} else if (!memcmp(r->primary_remote_gid, s->gid, 16)) {
				if (m->meta.link == UM_LINK_IB) {
					s->lid = m->meta.dlid;
					s->have_lid = 1;
				}
				return 0;
			} else {
				continue;
			}
		} else {
			continue;
		}
		if (m->meta.link == UM_LINK_IB) {
			s->lid = m->meta.slid;
			s->have_lid = 1;
		}
		if (m->meta.has_grh) {
			memcpy(s->gid, m->meta.sgid, 16);
			s->have_gid = 1;
		}
		return 0;
	}
	return s->kind == RP_SIDE_GID && t->link != UM_LINK_IB ? 0 : -1;
}

static int conn_find(struct rp_trace *t, uint32_t l, uint32_t r)
{
	for (size_t i = t->nconns; i-- > 0;) {
		struct rp_conn *c = &t->conns[i];
		if (c->sidr) {
			if (c->active_id == l || c->active_id == r)
				return (int)i;
			continue;
		}
		if ((c->active_id == l && (c->passive_id == r || !r || !c->passive_id)) ||
		    (c->passive_id && c->passive_id == l && c->active_id == r) ||
		    (!c->passive_id && c->active_id == r)) {
			if (!c->passive_id && c->active_id == r)
				c->passive_id = l;
			return (int)i;
		}
	}
	return -1;
}

static int conn_new(struct rp_trace *t, size_t first)
{
	struct rp_conn *nc = realloc(t->conns, (t->nconns + 1) * sizeof(*nc));
	if (!nc)
		return -1;
	t->conns = nc;
	memset(&nc[t->nconns], 0, sizeof(*nc));
	nc[t->nconns].first = first;
	return (int)t->nconns++;
}

int rp_trace_bind(struct rp_trace *t, struct rp_side *s, char *err, size_t errlen)
{
	size_t seen = 0;

	if (s->kind != RP_SIDE_LID && resolve(t, s) < 0) {
		snprintf(err, errlen, "side %s: no REQ or REP in the trace names it", s->text);
		return -1;
	}
	free(t->conns);
	t->conns = NULL;
	t->nconns = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct rp_mad *m = &t->m[i];
		int from = rp_side_is_src(s, &m->meta), to = rp_side_is_dst(s, &m->meta);

		/* A MAD S sends to itself is not a conversation with a peer. */
		m->dir = from && !to ? RP_FROM_S : to && !from ? RP_TO_S : RP_OTHER;
		m->conn = -1;
		if (m->dir == RP_OTHER || !m->is_cm || !m->cm_ok)
			continue;
		seen++;
		uint16_t a = m->hdr.attr_id;
		uint32_t l = cmp_cm_local_id(&m->cm), r = cmp_cm_remote_id(&m->cm);
		if (a == UMAD_ATTR_CLASS_PORT_INFO)
			continue;
		int c = conn_find(t, l, r);
		if (c < 0 && (a == UMAD_CM_ATTR_REQ || a == UMAD_CM_ATTR_SIDR_REQ)) {
			c = conn_new(t, i);
			if (c < 0) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			t->conns[c].active_id = l;
			t->conns[c].s_active = m->dir == RP_FROM_S;
			t->conns[c].sidr = a == UMAD_CM_ATTR_SIDR_REQ;
			t->conns[c].service_id = a == UMAD_CM_ATTR_REQ ? m->cm.u.req.service_id
								       : m->cm.u.sidr_req.service_id;
		}
		m->conn = c;
	}
	if (!seen) {
		snprintf(err, errlen, "side %s sends or receives no CM MAD in the trace", s->text);
		return -1;
	}
	return 0;
}
