/*
 * simf_link.c - fault rules by link: `link=sw1:3` (and `dir=out|in`) in a
 * fault rule matches the datagrams that cross that cable. A CA's link
 * (node2:1, or the switch port it is cabled to) is crossed by everything
 * the CA sends to another node and everything it receives, whatever the
 * topology (the switchless default fabric included). A cable between two
 * switches is crossed by the datagrams the switches' LFTs (or a directed
 * route) send over it: the route walks in simf_topo.c record the cables
 * they cross in a per-thread trace, and the drop-ins route each datagram
 * on the thread that then sends it; simf_send_from uses that trace, or
 * walks the route to the destination's base LID itself when the trace is
 * of another datagram. See docs/sim.md "Faults".
 */
#include "simf_link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRACE_MAX 64

/* The last route walk of this thread. */
static __thread struct {
	int src, dst, dr, active, valid, n;
	uint16_t dlid;
	struct simf_hop hops[TRACE_MAX];
} tr;

void simf_trace_begin(int src, int dr, uint16_t dlid)
{
	tr.src = src;
	tr.dr = dr;
	tr.dlid = dlid;
	tr.n = 0;
	tr.valid = 0;
	tr.active = 1;
}

void simf_trace_hop(int a, int pa, int b, int pb)
{
	/* walks outside a route (multicast flooding) are not recorded */
	if (!tr.active || tr.n >= TRACE_MAX)
		return;
	tr.hops[tr.n++] = (struct simf_hop){ (int16_t)a, (int16_t)b, (uint8_t)pa, (uint8_t)pb };
}

void simf_trace_end(int dst)
{
	tr.dst = dst;
	tr.active = 0;
	tr.valid = dst >= 0;
}

int simf_trace_lid_hops(int src, uint16_t dlid, const struct simf_hop **hops)
{
	if (tr.active || tr.dr || tr.src != src || tr.dlid != dlid)
		return -1;
	*hops = tr.hops;
	return tr.n;
}

/* The rule's node index, -1 if the fabric has no such node. */
static int rule_node(const struct simf_state *st, const struct simf_fault *r)
{
	int n;

	if (r->link_node > 0)
		n = r->link_node;
	else
		n = (int)st->nnodes - r->link_node;
	if (r->link_node > 0 && (unsigned)n > st->nnodes)
		return -1;
	if (r->link_node < 0 && (-r->link_node > (int)st->nswitches || n >= SIMF_MAX_NODES))
		return -1;
	return n;
}

static int flip(int dir)
{
	return dir == SIMF_LINK_DIR_OUT ? SIMF_LINK_DIR_IN : dir == SIMF_LINK_DIR_IN ? SIMF_LINK_DIR_OUT : dir;
}

/* Does hop h cross (n, p) in direction dir? rev: h is walked backwards. */
static int hop_crosses(const struct simf_hop *h, int rev, int n, int p, int dir)
{
	int a = rev ? h->b : h->a, pa = rev ? h->pb : h->pa;
	int b = rev ? h->a : h->b, pb = rev ? h->pa : h->pb;

	return (dir != SIMF_LINK_DIR_IN && a == n && pa == p) || (dir != SIMF_LINK_DIR_OUT && b == n && pb == p);
}

int simf_link_match(const struct simf *f, const struct simf_fault *r, int src, int dst, const uint8_t *pkt)
{
	const struct simf_state *st = f->st;
	int n, p = r->link_port, dir = r->link_dir, rev = 0;

	(void)pkt;
	if (!r->link_node)
		return 1;
	n = rule_node(st, r);
	/* a datagram to its own node never leaves it (HCA loopback, the
	 * SMA of a hop-0 SMP) */
	if (n < 0 || src == dst)
		return 0;
	if (st->nodes[n].type == SIMF_NODE_SWITCH) {
		const struct simf_node *nd = &st->nodes[n];
		int peer;

		if (p < 1 || p > nd->nports || p > SIMF_MAX_PORTS)
			return 0;
		peer = nd->ports[p].peer;
		if (peer > 0 && peer < SIMF_MAX_NODES && st->nodes[peer].type != SIMF_NODE_SWITCH) {
			/* a switch port cabled to a CA: the CA's end, seen the other way */
			n = peer;
			p = nd->ports[p].peer_port;
			dir = flip(dir);
		}
	}
	if (st->nodes[n].type != SIMF_NODE_SWITCH) {
		/* a CA's link carries all it sends and receives (the built-in
		 * SM, node 0, off the cables, is still reached through it) */
		if (p != 1)
			return 0;
		return (dir != SIMF_LINK_DIR_IN && src == n) || (dir != SIMF_LINK_DIR_OUT && dst == n);
	}
	/* a cable between two switches: the route the datagram takes */
	if (tr.valid && tr.src == src && tr.dst == dst) {
		rev = 0;
	} else if (tr.valid && tr.dr && tr.src == dst && tr.dst == src) {
		rev = 1; /* a directed-route SMP's answer comes back the same way */
	} else {
		uint16_t lid = st->nodes[dst].lid;

		if (!lid || simf_route_lid(f, src, lid, NULL) != dst || !tr.valid)
			return 0;
	}
	for (int i = 0; i < tr.n; i++)
		if (hop_crosses(&tr.hops[i], rev, n, p, dir))
			return 1;
	return 0;
}

int simf_link_parse(const char *val, struct simf_fault *r)
{
	const char *colon = strchr(val, ':'), *num = val;
	char *end;
	long node, port;
	int sw = 0;

	if (!colon)
		return -1;
	if (strncmp(val, "sw", 2) == 0)
		sw = 1, num = val + 2;
	else if (strncmp(val, "node", 4) == 0)
		num = val + 4;
	node = strtol(num, &end, 10);
	if (end == num || end != colon || node < 1 || node >= SIMF_MAX_NODES)
		return -1;
	port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || *end || port < 1 || port > SIMF_MAX_PORTS || (!sw && port != 1))
		return -1;
	r->link_node = (int16_t)(sw ? -node : node);
	r->link_port = (uint8_t)port;
	return 0;
}

void simf_link_format(const struct simf_fault *r, char *buf, size_t len)
{
	if (!r->link_node)
		snprintf(buf, len, "%s", "");
	else
		snprintf(buf, len, "%s%d:%u", r->link_node < 0 ? "sw" : "node",
			 r->link_node < 0 ? -r->link_node : r->link_node, r->link_port);
}
