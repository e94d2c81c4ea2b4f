/*
 * simf_topo.c - the fabric's cables and switches: topology files (ibsim's
 * format, which is ibnetdiscover's output), generators, and how packets
 * travel through switches (LID routing by each switch's LFT, directed
 * routes hop by hop). See simf.h and docs/sim.md "Topologies and switches".
 */
#include "simf.h"
#include "simf_link.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GUID_SW_BASE 0x0002c90300010000ull
#define MAX_HOPS 64

static void errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errf(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

/* ---- routing ------------------------------------------------------------------ */

static int is_switch(const struct simf_state *st, int n)
{
	return n > 0 && n < SIMF_MAX_NODES && st->nodes[n].type == SIMF_NODE_SWITCH;
}

/* The node at the other end of node n's port p whose link is up (both
 * ends), *pp its port; -1 if none. */
static int across(const struct simf_state *st, int n, int p, int *pp)
{
	const struct simf_node *nd = &st->nodes[n];
	int peer;

	if (p < 1 || p > nd->nports || p > SIMF_MAX_PORTS)
		return -1;
	peer = nd->ports[p].peer;
	if (peer < 0 || peer >= SIMF_MAX_NODES || nd->ports[p].down || !nd->link_up || !st->nodes[peer].link_up)
		return -1;
	if (is_switch(st, n) && nd->ports[p].state == SIMF_PORT_DOWN)
		return -1;
	*pp = nd->ports[p].peer_port;
	if (is_switch(st, peer) && st->nodes[peer].ports[*pp].state == SIMF_PORT_DOWN)
		return -1;
	simf_trace_hop(n, p, peer, *pp); /* fault rules by link (simf_link.c) */
	return peer;
}

/* Does dlid address node n (its base LID .. base + 2^LMC - 1)? */
static int owns(const struct simf_state *st, int n, uint16_t dlid)
{
	const struct simf_node *nd = &st->nodes[n];

	return nd->lid && dlid >= nd->lid && dlid < nd->lid + (1u << (nd->lmc & 7));
}

/* From node cur (just entered on port in), LID-route to dlid. */
static int route_from(const struct simf_state *st, int cur, int in, uint16_t dlid, int *in_port)
{
	for (int hops = 0; hops < MAX_HOPS; hops++) {
		const struct simf_node *nd = &st->nodes[cur];
		int out, pp;

		if (owns(st, cur, dlid)) {
			if (in_port)
				*in_port = in;
			return cur;
		}
		if (!is_switch(st, cur) || nd->sw >= SIMF_MAX_SWITCHES)
			return -1; /* a CA that is not the destination drops it */
		if (dlid > st->sw[nd->sw].lft_top)
			return -1;
		out = st->sw[nd->sw].lft[dlid];
		if (out == 0 || out == 0xFF)
			return -1;
		cur = across(st, cur, out, &pp);
		if (cur < 0)
			return -1;
		in = pp;
	}
	return -1;
}

static int route_lid(const struct simf *f, int src, uint16_t dlid, int *in_port)
{
	const struct simf_state *st = f->st;
	int dst = simf_node_by_lid(f, dlid), pp, next;

	if (in_port)
		*in_port = 1;
	if (!st->cabled || !st->nswitches || dst < 0 || src < 0 || src >= SIMF_MAX_NODES)
		return dst;
	/* the built-in SM (node 0) is off the cables: it reaches every port */
	if (src == 0 || dst == 0)
		return dst;
	if (owns(st, src, dlid)) {
		if (in_port)
			*in_port = is_switch(st, src) ? 0 : 1;
		return src;
	}
	if (is_switch(st, src))
		return route_from(st, src, 0, dlid, in_port);
	next = across(st, src, 1, &pp);
	if (next < 0)
		return -1;
	return route_from(st, next, pp, dlid, in_port);
}

/* The walks below record the cables they cross (simf_link.c). */
int simf_route_lid(const struct simf *f, int src, uint16_t dlid, int *in_port)
{
	int dst;

	simf_trace_begin(src, 0, dlid);
	dst = route_lid(f, src, dlid, in_port);
	simf_trace_end(dst);
	return dst;
}

static int route_dr(const struct simf *f, int src, const uint8_t *smp, int *in_port, uint8_t *ret_path)
{
	const struct simf_state *st = f->st;
	unsigned hops = smp[7];
	const uint8_t *ipath = smp + 128;
	uint16_t drdlid = (uint16_t)(smp[34] << 8 | smp[35]);
	int cur = src, in = is_switch(st, src) ? 0 : 1;

	if (ret_path)
		memset(ret_path, 0, 64);
	if (src < 0 || src >= SIMF_MAX_NODES || hops >= 64)
		return -1;
	if (hops && !st->cabled)
		return -1;
	for (unsigned i = 1; i <= hops; i++) {
		int pp, next;

		/* only the source and switches send an SMP on */
		if (i > 1 && !is_switch(st, cur))
			return -1;
		next = across(st, cur, ipath[i], &pp);
		if (next < 0)
			return -1;
		if (ret_path)
			ret_path[i] = (uint8_t)pp;
		cur = next;
		in = pp;
	}
	if (drdlid != 0xFFFF) {
		/* the last part LID-routed (from a switch) */
		if (!is_switch(st, cur))
			return -1;
		cur = route_from(st, cur, in, drdlid, &in);
	}
	if (in_port)
		*in_port = in;
	return cur;
}

int simf_route_dr(const struct simf *f, int src, const uint8_t *smp, int *in_port, uint8_t *ret_path)
{
	int dst;

	simf_trace_begin(src, 1, 0);
	dst = route_dr(f, src, smp, in_port, ret_path);
	simf_trace_end(dst);
	return dst;
}

void simf_mcast_reach(const struct simf *f, int src, uint16_t mlid, uint8_t *reach)
{
	const struct simf_state *st = f->st;
	int queue[SIMF_MAX_NODES], inport[SIMF_MAX_NODES], qh = 0, qt = 0, pp, next;
	uint8_t seen[SIMF_MAX_NODES] = { 0 };

	memset(reach, 0, SIMF_MAX_NODES);
	if (src < 0 || src >= SIMF_MAX_NODES || mlid < 0xC000 || mlid - 0xC000 >= SIMF_MFT_CAP)
		return;
	seen[src] = 1;
	if (is_switch(st, src)) {
		queue[qt] = src;
		inport[qt++] = 0;
	} else if ((next = across(st, src, 1, &pp)) >= 0 && !seen[next]) {
		seen[next] = 1;
		reach[next] = 1;
		queue[qt] = next;
		inport[qt++] = pp;
	}
	while (qh < qt) {
		int u = queue[qh], in = inport[qh++];
		const struct simf_node *nd = &st->nodes[u];
		uint64_t mask;

		if (!is_switch(st, u) || nd->sw >= SIMF_MAX_SWITCHES)
			continue; /* a CA takes it and sends nothing on */
		mask = st->sw[nd->sw].mft[mlid - 0xC000];
		for (int p = 1; p <= nd->nports; p++) {
			if (p == in || !(mask & (1ull << p)))
				continue;
			next = across(st, u, p, &pp);
			if (next < 0 || seen[next])
				continue;
			seen[next] = 1;
			reach[next] = 1;
			queue[qt] = next;
			inport[qt++] = pp;
		}
	}
}

/* ---- cables ------------------------------------------------------------------- */

void simf_cable(struct simf *f, int a, int pa, int b, int pb)
{
	struct simf_state *st = f->st;

	st->nodes[a].ports[pa].peer = (int16_t)b;
	st->nodes[a].ports[pa].peer_port = (uint8_t)pb;
	st->nodes[b].ports[pb].peer = (int16_t)a;
	st->nodes[b].ports[pb].peer_port = (uint8_t)pa;
	st->cabled = 1;
}

int simf_set_port_link(struct simf *f, int n, int port, int up)
{
	struct simf_state *st = f->st;
	int ends[2][2], peer;

	if (n < 0 || n >= SIMF_MAX_NODES || (unsigned)n > st->nnodes + st->nswitches || port < 1 ||
	    port > st->nodes[n].nports || port > SIMF_MAX_PORTS)
		return errno = EINVAL, -1;
	simf_lock(f);
	peer = st->nodes[n].ports[port].peer;
	if (peer < 0) {
		simf_unlock(f);
		return errno = ENOTCONN, -1;
	}
	ends[0][0] = n;
	ends[0][1] = port;
	ends[1][0] = peer;
	ends[1][1] = st->nodes[n].ports[port].peer_port;
	for (int e = 0; e < 2; e++) {
		struct simf_node *nd = &st->nodes[ends[e][0]];
		struct simf_port *pt = &nd->ports[ends[e][1]];
		uint8_t s = up ? SIMF_PORT_INIT : SIMF_PORT_DOWN;

		pt->down = up ? 0 : 1;
		if (nd->type == SIMF_NODE_SWITCH) {
			if (pt->state != s)
				st->sw[nd->sw].life_state |= 0x04; /* PortStateChange */
			pt->state = s;
		} else {
			nd->port_state = s;
		}
	}
	__atomic_add_fetch(&st->generation, 1, __ATOMIC_RELEASE);
	simf_unlock(f);
	return 0;
}

/* ---- topology files -------------------------------------------------------------- */

static char *skip_ws(char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* A quoted string at *pp into out; advances *pp. 0 or -1. */
static int quoted(char **pp, char *out, size_t len)
{
	char *p = skip_ws(*pp), *e;

	if (*p != '"')
		return -1;
	e = strchr(p + 1, '"');
	if (!e || (size_t)(e - p - 1) >= len)
		return -1;
	memcpy(out, p + 1, (size_t)(e - p - 1));
	out[e - p - 1] = 0;
	*pp = e + 1;
	return 0;
}

/* "[n]" at *pp; advances. -1 if none. */
static int bracket(char **pp)
{
	char *p = skip_ws(*pp), *e;
	long v;

	if (*p != '[')
		return -1;
	v = strtol(p + 1, &e, 10);
	if (e == p + 1 || *e != ']')
		return -1;
	*pp = e + 1;
	return (int)v;
}

/* an optional "(guid)" */
static void skip_paren(char **pp)
{
	char *p = skip_ws(*pp), *e;

	if (*p == '(' && (e = strchr(p, ')')))
		*pp = e + 1;
}

static uint64_t guid_of_name(const char *name)
{
	char *e;
	uint64_t g;

	/* ibnetdiscover's names: "S-<guid>", "H-<guid>" */
	if ((name[0] == 'S' || name[0] == 'H') && name[1] == '-' && isxdigit((unsigned char)name[2])) {
		g = strtoull(name + 2, &e, 16);
		if (!*e)
			return g;
	}
	return 0;
}

static int find_name(const struct simf_topo *t, const char *name)
{
	for (unsigned i = 0; i < t->n; i++)
		if (strcmp(t->nodes[i].name, name) == 0)
			return (int)i;
	return -1;
}

struct pending {
	int node, port, peer_port;
	char peer[64];
};

static int link_pending(struct simf_topo *t, const struct pending *l, int nl, char *err, size_t errlen)
{
	for (int i = 0; i < nl; i++) {
		int a = l[i].node, pa = l[i].port, pb = l[i].peer_port, b = find_name(t, l[i].peer);
		struct simf_topo_node *na = &t->nodes[a], *nb;

		if (b < 0) {
			errf(err, errlen, "\"%s\"[%d]: no node \"%s\"", na->name, pa, l[i].peer);
			return -1;
		}
		nb = &t->nodes[b];
		if (pb < 1 || pb > nb->nports) {
			errf(err, errlen, "\"%s\"[%d]: \"%s\" has no port %d", na->name, pa, nb->name, pb);
			return -1;
		}
		if ((na->ports[pa].peer >= 0 && (na->ports[pa].peer != b || na->ports[pa].peer_port != pb)) ||
		    (nb->ports[pb].peer >= 0 && (nb->ports[pb].peer != a || nb->ports[pb].peer_port != pa))) {
			errf(err, errlen, "\"%s\"[%d] - \"%s\"[%d]: a port cabled twice", na->name, pa, nb->name,
			     pb);
			return -1;
		}
		na->ports[pa].peer = (int16_t)b;
		na->ports[pa].peer_port = (uint8_t)pb;
		nb->ports[pb].peer = (int16_t)a;
		nb->ports[pb].peer_port = (uint8_t)pa;
	}
	return 0;
}

static void topo_init(struct simf_topo *t)
{
	memset(t, 0, sizeof(*t));
	for (unsigned i = 0; i < SIMF_MAX_NODES; i++)
		for (unsigned p = 0; p <= SIMF_MAX_PORTS; p++)
			t->nodes[i].ports[p].peer = -1;
}

static int topo_check(struct simf_topo *t, char *err, size_t errlen)
{
	if (!t->ncas) {
		errf(err, errlen, "no Hca/Ca in the topology");
		return -1;
	}
	if (t->nswitches > SIMF_MAX_SWITCHES || t->ncas + t->nswitches + 1 > SIMF_MAX_NODES) {
		errf(err, errlen, "%u CAs and %u switches: at most %d nodes in all and %d switches", t->ncas,
		     t->nswitches, SIMF_MAX_NODES - 1, SIMF_MAX_SWITCHES);
		return -1;
	}
	return 0;
}

int simf_topo_parse(const char *path, struct simf_topo *t, char *err, size_t errlen)
{
	static struct pending links[SIMF_MAX_NODES * (SIMF_MAX_PORTS + 1)];
	char line[1024];
	uint64_t next_guid = 0;
	int cur = -1, nl = 0, lineno = 0;
	FILE *fp = fopen(path, "r");

	topo_init(t);
	if (!fp) {
		errf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), fp)) {
		char *p = skip_ws(line), *q;
		int type = -1;

		lineno++;
		p[strcspn(p, "\r\n")] = 0;
		if (!*p || *p == '#')
			continue;
		if (strncmp(p, "switchguid=", 11) == 0 || strncmp(p, "caguid=", 7) == 0) {
			next_guid = strtoull(strchr(p, '=') + 1, NULL, 0);
			continue;
		}
		if (strchr(p, '=') && !strchr(p, '"'))
			continue; /* vendid=, devid=, sysimgguid=, ... */
		if (strncmp(p, "Switch", 6) == 0 && isspace((unsigned char)p[6]))
			type = SIMF_NODE_SWITCH, q = p + 6;
		else if (strncmp(p, "Hca", 3) == 0 && isspace((unsigned char)p[3]))
			type = SIMF_NODE_CA, q = p + 3;
		else if (strncmp(p, "Ca", 2) == 0 && isspace((unsigned char)p[2]))
			type = SIMF_NODE_CA, q = p + 2;
		if (type >= 0) {
			struct simf_topo_node *nd;
			long np = strtol(q, &q, 10);
			char *hash;

			if (t->n >= SIMF_MAX_NODES - 1) {
				errf(err, errlen, "%s:%d: too many nodes (at most %d)", path, lineno,
				     SIMF_MAX_NODES - 1);
				goto fail;
			}
			nd = &t->nodes[t->n];
			if (np < 1 || np > SIMF_MAX_PORTS || (type == SIMF_NODE_CA && np != 1)) {
				errf(err, errlen, "%s:%d: %ld ports (a switch has 1..%d, a CA 1)", path, lineno, np,
				     SIMF_MAX_PORTS);
				goto fail;
			}
			if (quoted(&q, nd->name, sizeof(nd->name)) < 0) {
				errf(err, errlen, "%s:%d: a node name in quotes expected", path, lineno);
				goto fail;
			}
			if (find_name(t, nd->name) >= 0) {
				errf(err, errlen, "%s:%d: node \"%s\" twice", path, lineno, nd->name);
				goto fail;
			}
			hash = strchr(q, '#');
			if (hash) {
				q = hash + 1;
				if (quoted(&q, nd->desc, sizeof(nd->desc)) < 0)
					nd->desc[0] = 0;
			}
			nd->type = (uint8_t)type;
			nd->nports = (uint8_t)np;
			nd->guid = next_guid ? next_guid : guid_of_name(nd->name);
			next_guid = 0;
			if (type == SIMF_NODE_SWITCH)
				t->nswitches++;
			else
				t->ncas++;
			cur = (int)t->n++;
			continue;
		}
		if (*p == '[') {
			struct pending *l;
			int port;

			if (cur < 0) {
				errf(err, errlen, "%s:%d: a link line outside a node", path, lineno);
				goto fail;
			}
			if (nl >= (int)(sizeof(links) / sizeof(links[0]))) {
				errf(err, errlen, "%s:%d: too many link lines", path, lineno);
				goto fail;
			}
			l = &links[nl];
			q = p;
			port = bracket(&q);
			skip_paren(&q);
			if (port < 1 || port > t->nodes[cur].nports || quoted(&q, l->peer, sizeof(l->peer)) < 0 ||
			    (l->peer_port = bracket(&q)) < 0) {
				errf(err, errlen, "%s:%d: '[port] \"peer\"[peer port]' expected (port 1..%u)", path,
				     lineno, t->nodes[cur].nports);
				goto fail;
			}
			l->node = cur;
			l->port = port;
			nl++;
			continue;
		}
		errf(err, errlen, "%s:%d: cannot parse \"%s\"", path, lineno, p);
		goto fail;
	}
	fclose(fp);
	if (link_pending(t, links, nl, err, errlen) < 0)
		return -1;
	return topo_check(t, err, errlen);
fail:
	fclose(fp);
	return -1;
}

static int add_node(struct simf_topo *t, int type, int nports, const char *fmt, unsigned k)
{
	struct simf_topo_node *nd = &t->nodes[t->n];

	snprintf(nd->name, sizeof(nd->name), fmt, k);
	nd->type = (uint8_t)type;
	nd->nports = (uint8_t)nports;
	if (type == SIMF_NODE_SWITCH)
		t->nswitches++;
	else
		t->ncas++;
	return (int)t->n++;
}

static void gen_link(struct simf_topo *t, int a, int pa, int b, int pb)
{
	t->nodes[a].ports[pa].peer = (int16_t)b;
	t->nodes[a].ports[pa].peer_port = (uint8_t)pb;
	t->nodes[b].ports[pb].peer = (int16_t)a;
	t->nodes[b].ports[pb].peer_port = (uint8_t)pa;
}

int simf_topo_generate(const char *spec, struct simf_topo *t, char *err, size_t errlen)
{
	unsigned a = 0, b = 0, c = 0;
	int n;

	topo_init(t);
	if (sscanf(spec, "fat-tree:%u,%u,%u%n", &a, &b, &c, &n) == 3 && !spec[n]) {
		/* a leaves, b spines, c hosts per leaf */
		int leaf[SIMF_MAX_SWITCHES], spine[SIMF_MAX_SWITCHES];

		if (!a || !b || !c || a + b > SIMF_MAX_SWITCHES || c + b > SIMF_MAX_PORTS || a > SIMF_MAX_PORTS ||
		    a * c + a + b + 1 > SIMF_MAX_NODES) {
			errf(err, errlen, "fat-tree:L,S,H: L leaves, S spines, H hosts per leaf (H+S <= %d, "
					  "L*H + L + S < %d)", SIMF_MAX_PORTS, SIMF_MAX_NODES);
			return -1;
		}
		for (unsigned i = 0; i < a; i++)
			for (unsigned h = 0; h < c; h++)
				add_node(t, SIMF_NODE_CA, 1, "H%u", i * c + h + 1);
		for (unsigned i = 0; i < a; i++)
			leaf[i] = add_node(t, SIMF_NODE_SWITCH, (int)(c + b), "leaf%u", i + 1);
		for (unsigned s = 0; s < b; s++)
			spine[s] = add_node(t, SIMF_NODE_SWITCH, (int)a, "spine%u", s + 1);
		for (unsigned i = 0; i < a; i++) {
			for (unsigned h = 0; h < c; h++)
				gen_link(t, leaf[i], (int)h + 1, (int)(i * c + h), 1);
			for (unsigned s = 0; s < b; s++)
				gen_link(t, leaf[i], (int)(c + s + 1), spine[s], (int)i + 1);
		}
	} else if (sscanf(spec, "chain:%u,%u%n", &a, &c, &n) == 2 && !spec[n]) {
		/* a switches in a line, c hosts each: ports 1..c hosts, c+1
		 * to the previous switch, c+2 to the next */
		int sw[SIMF_MAX_SWITCHES];

		if (!a || !c || a > SIMF_MAX_SWITCHES || c + 2 > SIMF_MAX_PORTS || a * c + a + 1 > SIMF_MAX_NODES) {
			errf(err, errlen, "chain:S,H: S switches, H hosts each (H <= %d, S*H + S < %d)",
			     SIMF_MAX_PORTS - 2, SIMF_MAX_NODES);
			return -1;
		}
		for (unsigned i = 0; i < a; i++)
			for (unsigned h = 0; h < c; h++)
				add_node(t, SIMF_NODE_CA, 1, "H%u", i * c + h + 1);
		for (unsigned i = 0; i < a; i++)
			sw[i] = add_node(t, SIMF_NODE_SWITCH, (int)c + 2, "S%u", i + 1);
		for (unsigned i = 0; i < a; i++) {
			for (unsigned h = 0; h < c; h++)
				gen_link(t, sw[i], (int)h + 1, (int)(i * c + h), 1);
			if (i + 1 < a)
				gen_link(t, sw[i], (int)c + 2, sw[i + 1], (int)c + 1);
		}
	} else {
		errf(err, errlen, "unknown topology \"%s\" (a file, fat-tree:L,S,H or chain:S,H)", spec);
		return -1;
	}
	for (unsigned i = 0; i < t->n; i++)
		memcpy(t->nodes[i].desc, t->nodes[i].name, sizeof(t->nodes[i].desc));
	return topo_check(t, err, errlen);
}

int simf_topo_apply(struct simf *f, const struct simf_topo *t, char *err, size_t errlen)
{
	struct simf_state *st = f->st;
	int map[SIMF_MAX_NODES];
	unsigned ca = 0, sw = 0;

	if (t->ncas != st->nnodes || topo_check((struct simf_topo *)t, err, errlen) < 0) {
		errf(err, errlen, "the topology has %u CAs, the fabric %u nodes", t->ncas, st->nnodes);
		return -1;
	}
	for (unsigned i = 0; i < t->n; i++)
		map[i] = t->nodes[i].type == SIMF_NODE_SWITCH ? (int)(st->nnodes + 1 + sw++) : (int)++ca;
	simf_lock(f);
	st->nswitches = t->nswitches;
	st->cabled = 1;
	for (unsigned i = 0; i < t->n; i++) {
		const struct simf_topo_node *tn = &t->nodes[i];
		struct simf_node *nd = &st->nodes[map[i]];

		nd->type = tn->type;
		nd->nports = tn->nports;
		snprintf(nd->desc, sizeof(nd->desc), "%s", tn->desc[0] ? tn->desc : tn->name);
		if (tn->type == SIMF_NODE_SWITCH) {
			unsigned k = (unsigned)map[i] - st->nnodes - 1;

			snprintf(nd->name, sizeof(nd->name), "sw%u", k + 1);
			nd->sw = (uint16_t)k;
			nd->guid = tn->guid ? tn->guid : GUID_SW_BASE | (k + 1);
			nd->ip = 127u << 24 | 10u << 16 | 1u << 8 | (k + 1);
			nd->link_up = 1;
			nd->port_state = SIMF_PORT_INIT;
			nd->pkeys[0] = 0xFFFF;
			memset(st->sw[k].lft, 0xFF, sizeof(st->sw[k].lft));
			st->sw[k].lft_top = 0;
			st->sw[k].life_state = 0x04; /* PortStateChange */
			for (unsigned p = 1; p <= tn->nports; p++)
				nd->ports[p].state = tn->ports[p].peer >= 0 ? SIMF_PORT_INIT : SIMF_PORT_DOWN;
			nd->ports[0].state = SIMF_PORT_INIT;
		} else if (tn->guid) {
			nd->guid = tn->guid;
			if (st->link == SIMF_LINK_IB)
				for (int b = 0; b < 8; b++)
					nd->gid[8 + b] = (uint8_t)(tn->guid >> (56 - 8 * b));
		}
		for (unsigned p = 1; p <= tn->nports; p++) {
			if (tn->ports[p].peer < 0) {
				nd->ports[p].peer = -1;
				continue;
			}
			nd->ports[p].peer = (int16_t)map[tn->ports[p].peer];
			nd->ports[p].peer_port = tn->ports[p].peer_port;
		}
	}
	__atomic_add_fetch(&st->generation, 1, __ATOMIC_RELEASE);
	simf_unlock(f);
	return simf_write_hosts(f);
}

int simf_topo_write(const struct simf *f, const char *path)
{
	const struct simf_state *st = f->st;
	FILE *fp = fopen(path, "w");

	if (!fp)
		return -1;
	fprintf(fp, "# uscm-sim topology (ibsim / ibnetdiscover format)\n");
	for (unsigned pass = 0; pass < 2; pass++)
		for (unsigned i = 1; i <= st->nnodes + st->nswitches && i < SIMF_MAX_NODES; i++) {
			const struct simf_node *nd = &st->nodes[i];
			int sw = nd->type == SIMF_NODE_SWITCH;

			if ((pass == 0) != sw)
				continue;
			fprintf(fp, "\n%s=0x%016" PRIx64 "\n", sw ? "switchguid" : "caguid", nd->guid);
			fprintf(fp, "%s\t%u \"%c-%016" PRIx64 "\"\t\t# \"%s\" (%s)\n", sw ? "Switch" : "Ca", nd->nports,
				sw ? 'S' : 'H', nd->guid, nd->desc[0] ? nd->desc : nd->name, nd->name);
			for (unsigned p = 1; p <= nd->nports; p++) {
				const struct simf_node *pn;

				if (nd->ports[p].peer < 0)
					continue;
				pn = &st->nodes[nd->ports[p].peer];
				fprintf(fp, "[%u]\t\"%c-%016" PRIx64 "\"[%u]\t\t# \"%s\"\n", p,
					pn->type == SIMF_NODE_SWITCH ? 'S' : 'H', pn->guid, nd->ports[p].peer_port,
					pn->desc[0] ? pn->desc : pn->name);
			}
		}
	return fclose(fp);
}
