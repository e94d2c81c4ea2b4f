/* The built-in SM's multicast forwarding tables: one spanning
 * tree of the switches per connected part of the fabric, rooted at the
 * switch with the smallest eccentricity (the first such switch on a tie:
 * a spine on a fat tree), built by fewest hops. Each switch's MFT entry for
 * a group's MLID holds only tree ports that lead toward at least one
 * receiving member: a member CA's port, a child link whose subtree holds a
 * member, the parent link when a member lies outside its subtree. A switch
 * forwards out of every port in the mask except the one the packet came in
 * on, so a mask limited to tree links reaches each member exactly once from
 * any sender (a mask with every spine link would loop on a fat tree with
 * several spines). See simf.h and docs/sim.md. */
#include "simf.h"

#include <string.h>

/* The switch at the other end of switch u's port p over a cable not taken
 * down, or -1. */
static int sw_peer(const struct simf_state *st, int u, unsigned p)
{
	const struct simf_node *nd = &st->nodes[u];
	int v = nd->ports[p].peer;

	if (v <= 0 || v >= SIMF_MAX_NODES || nd->ports[p].down || st->nodes[v].type != SIMF_NODE_SWITCH)
		return -1;
	return v;
}

/* Breadth-first from root over switch links; order[] gets the switches
 * reached (root first), up[v] the port of v toward its parent and down[v]
 * the parent's port toward v. Returns how many, and the largest distance
 * in *ecc. */
static int bfs(const struct simf_state *st, int root, int *order, uint8_t *up, uint8_t *down, int *ecc)
{
	int dist[SIMF_MAX_NODES], n = 0;

	for (int k = 0; k < SIMF_MAX_NODES; k++)
		dist[k] = -1;
	dist[root] = 0;
	order[n++] = root;
	*ecc = 0;
	for (int qh = 0; qh < n; qh++) {
		int u = order[qh];

		for (unsigned p = 1; p <= st->nodes[u].nports && p <= SIMF_MAX_PORTS; p++) {
			int v = sw_peer(st, u, p);

			if (v < 0 || dist[v] >= 0)
				continue;
			dist[v] = dist[u] + 1;
			if (dist[v] > *ecc)
				*ecc = dist[v];
			up[v] = st->nodes[u].ports[p].peer_port;
			down[v] = (uint8_t)p;
			order[n++] = v;
		}
	}
	return n;
}

void simf_mft_program(struct simf_state *st)
{
	unsigned first = st->nnodes + 1, last = st->nnodes + st->nswitches;
	int root_of[SIMF_MAX_NODES], parent[SIMF_MAX_NODES], order[SIMF_MAX_NODES], norder = 0;
	uint8_t up[SIMF_MAX_NODES], down[SIMF_MAX_NODES];

	if (last >= SIMF_MAX_NODES)
		last = SIMF_MAX_NODES - 1;
	for (unsigned s = first; s <= last; s++)
		if (st->nodes[s].sw < SIMF_MAX_SWITCHES)
			memset(st->sw[st->nodes[s].sw].mft, 0, sizeof(st->sw[0].mft));
	/* the trees: per connected part, the switch of least eccentricity */
	for (int k = 0; k < SIMF_MAX_NODES; k++)
		root_of[k] = parent[k] = -1;
	for (unsigned s = first; s <= last; s++) {
		int part[SIMF_MAX_NODES], n, ecc, best = (int)s, best_ecc;

		if (st->nodes[s].type != SIMF_NODE_SWITCH || st->nodes[s].sw >= SIMF_MAX_SWITCHES ||
		    root_of[s] >= 0)
			continue;
		n = bfs(st, (int)s, part, up, down, &best_ecc);
		for (int i = 1; i < n; i++) {
			int o[SIMF_MAX_NODES];

			bfs(st, part[i], o, up, down, &ecc);
			if (ecc < best_ecc || (ecc == best_ecc && part[i] < best)) {
				best = part[i];
				best_ecc = ecc;
			}
		}
		n = bfs(st, best, order + norder, up, down, &ecc);
		for (int i = 0; i < n; i++) {
			int v = order[norder + i];

			root_of[v] = best;
			if (i)
				parent[v] = st->nodes[v].ports[up[v]].peer;
		}
		norder += n;
	}
	for (int g = 0; g < SIMF_MAX_MCG; g++) {
		const struct simf_mcg *m = &st->mcgs[g];
		int cnt[SIMF_MAX_NODES] = { 0 };
		uint64_t mask[SIMF_MAX_NODES] = { 0 };

		if (!m->used || !m->sa_created || m->mlid < 0xC000 || m->mlid - 0xC000 >= SIMF_MFT_CAP)
			continue;
		/* receiving members (full or non-member) at their switch */
		for (unsigned n = 0; n <= st->nnodes && n < SIMF_MAX_NODES; n++) {
			const struct simf_node *nd = &st->nodes[n];
			int s = nd->ports[1].peer;

			if (!(m->join_state[n] & 3) || !nd->link_up || nd->ports[1].down || s <= 0 || s >= SIMF_MAX_NODES ||
			    root_of[s] < 0)
				continue;
			cnt[s]++;
			mask[s] |= 1ull << nd->ports[1].peer_port;
		}
		/* children before parents: subtree counts and child links */
		for (int i = norder - 1; i >= 0; i--) {
			int v = order[i], p = parent[v];

			if (p >= 0 && cnt[v]) {
				cnt[p] += cnt[v];
				mask[p] |= 1ull << down[v];
			}
		}
		/* parent links: members outside the subtree (the root's count
		 * is its whole part's) */
		for (int i = 0; i < norder; i++) {
			int v = order[i];

			if (parent[v] >= 0 && cnt[root_of[v]] > cnt[v])
				mask[v] |= 1ull << up[v];
			if (st->nodes[v].sw < SIMF_MAX_SWITCHES)
				st->sw[st->nodes[v].sw].mft[m->mlid - 0xC000] = mask[v];
		}
	}
}
