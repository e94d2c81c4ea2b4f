/* simf topologies and switches: the ibsim / ibnetdiscover topology
 * file parser, the generators, and how packets travel: LID-routed through
 * each switch's LFT (a missing entry, a LID above LinearFDBTop, a cable
 * whose link is down lose the packet), directed routes hop by hop with the
 * ReturnPath a responder reports (a CA forwards nothing). */
#include "simtest.h"

ST_SCRATCH_SUITE(topo, g_scr);

static struct simf_topo g_t;

static struct simf *mk_topo(const char *spec)
{
	char err[256];
	struct simf *f;

	cr_assert_eq(simf_topo_generate(spec, &g_t, err, sizeof(err)), 0, "%s", err);
	f = simf_create(g_scr.dir, SIMF_LINK_IB, g_t.ncas, g_scr.inst, 1, NULL);
	cr_assert(f, "simf_create: %s", strerror(errno));
	cr_assert_eq(simf_topo_apply(f, &g_t, err, sizeof(err)), 0, "%s", err);
	return f;
}

Test(topo, parse_ibsim_and_ibnetdiscover_formats)
{
	char path[512], err[256];
	FILE *fp;

	snprintf(path, sizeof(path), "%s/t1", g_scr.dir);
	fp = fopen(path, "w");
	cr_assert(fp);
	/* ibsim's own style: names, no GUIDs */
	fputs("# two hosts on one switch\n"
	      "Switch 8 \"Switch1\"\n"
	      "[1] \"Hca1\"[1]\n"
	      "[2] \"Hca2\"[1]\n"
	      "\n"
	      "Hca 1 \"Hca1\"\n"
	      "[1] \"Switch1\"[1]\n"
	      "Hca 1 \"Hca2\"\n",
	      fp);
	fclose(fp);
	cr_assert_eq(simf_topo_parse(path, &g_t, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(g_t.ncas, 2);
	cr_expect_eq(g_t.nswitches, 1);
	cr_expect_eq(g_t.nodes[0].nports, 8);
	cr_expect_eq(g_t.nodes[0].ports[2].peer, 2);   /* Hca2, linked from one side only */
	cr_expect_eq(g_t.nodes[2].ports[1].peer, 0);
	cr_expect_eq(g_t.nodes[2].ports[1].peer_port, 2);
	cr_expect_str_eq(g_t.nodes[1].desc, "");

	/* ibnetdiscover's output: GUIDs in names and guid lines, port GUIDs
	 * in parentheses, descriptions after '#' */
	fp = fopen(path, "w");
	cr_assert(fp);
	fputs("vendid=0x2c9\n"
	      "switchguid=0x2c90300010001(2c90300010001)\n"
	      "Switch\t4 \"S-0002c90300010001\"\t\t# \"leaf one\" base port 0 lid 2 lmc 0\n"
	      "[1]\t\"H-0002c90300000011\"[1](2c90300000011) \t\t# \"h1\" lid 1 4xEDR\n"
	      "\n"
	      "caguid=0x2c90300000011\n"
	      "Ca\t1 \"H-0002c90300000011\"\t\t# \"h1\"\n"
	      "[1](2c90300000011) \t\"S-0002c90300010001\"[1]\t\t# lid 1 lmc 0 \"leaf one\" lid 2 4xEDR\n",
	      fp);
	fclose(fp);
	cr_assert_eq(simf_topo_parse(path, &g_t, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(g_t.nodes[0].guid, 0x0002c90300010001ull);
	cr_expect_eq(g_t.nodes[1].guid, 0x0002c90300000011ull);
	cr_expect_str_eq(g_t.nodes[0].desc, "leaf one");
	cr_expect_eq(g_t.nodes[1].ports[1].peer, 0);

	/* errors: a port cabled twice, an unknown peer, a CA with 2 ports */
	fp = fopen(path, "w");
	fputs("Switch 2 \"s\"\n[1] \"a\"[1]\n[2] \"a\"[1]\nHca 1 \"a\"\n", fp);
	fclose(fp);
	cr_expect_neq(simf_topo_parse(path, &g_t, err, sizeof(err)), 0);
	cr_expect(strstr(err, "cabled twice"), "%s", err);
	fp = fopen(path, "w");
	fputs("Switch 2 \"s\"\n[1] \"nobody\"[1]\nHca 1 \"a\"\n", fp);
	fclose(fp);
	cr_expect_neq(simf_topo_parse(path, &g_t, err, sizeof(err)), 0);
	fp = fopen(path, "w");
	fputs("Hca 2 \"a\"\n", fp);
	fclose(fp);
	cr_expect_neq(simf_topo_parse(path, &g_t, err, sizeof(err)), 0);
}

Test(topo, generators)
{
	char err[256];

	cr_assert_eq(simf_topo_generate("fat-tree:4,2,2", &g_t, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(g_t.ncas, 8);
	cr_expect_eq(g_t.nswitches, 6);
	cr_assert_eq(simf_topo_generate("chain:3,2", &g_t, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(g_t.ncas, 6);
	cr_expect_eq(g_t.nswitches, 3);
	cr_expect_neq(simf_topo_generate("fat-tree:40,40,40", &g_t, err, sizeof(err)), 0);
	cr_expect_neq(simf_topo_generate("ring:3", &g_t, err, sizeof(err)), 0);
}

Test(topo, lid_routing_by_lft)
{
	struct simf *f = mk_topo("chain:2,2");
	struct simf_switch *s1 = &f->st->sw[0], *s2 = &f->st->sw[1];
	int in = -1;

	cr_assert_eq(f->st->nswitches, 2);
	cr_assert_eq(f->st->nodes[5].type, SIMF_NODE_SWITCH);
	cr_assert_str_eq(f->st->nodes[5].name, "sw1");
	cr_assert_eq(simf_node_by_name(f, "sw2"), 6);
	st_chain22_lids(f);
	/* empty LFTs: nothing gets across a switch, not even to a neighbour */
	cr_expect_eq(simf_route_lid(f, 1, 12, NULL), -1);
	/* program them as an SM would */
	st_chain22_lfts(f);
	cr_expect_eq(simf_route_lid(f, 1, 12, &in), 2);
	cr_expect_eq(in, 1);
	cr_expect_eq(simf_route_lid(f, 1, 14, NULL), 4);
	cr_expect_eq(simf_route_lid(f, 4, 11, NULL), 1);
	cr_expect_eq(simf_route_lid(f, 3, 15, &in), 5); /* sw1's port 0, coming in on port 4 */
	cr_expect_eq(in, 4);
	/* a missing entry loses it, as on hardware */
	s2->lft[14] = 0xFF;
	cr_expect_eq(simf_route_lid(f, 1, 14, NULL), -1);
	s2->lft[14] = 2;
	/* a wrong entry sends it to the wrong CA, which drops it */
	s2->lft[14] = 1;
	cr_expect_eq(simf_route_lid(f, 1, 14, NULL), -1);
	s2->lft[14] = 2;
	/* above LinearFDBTop: dropped */
	s1->lft_top = 13;
	cr_expect_eq(simf_route_lid(f, 1, 14, NULL), -1);
	s1->lft_top = 16;
	/* the inter-switch link down */
	f->st->nodes[6].ports[3].state = SIMF_PORT_DOWN;
	cr_expect_eq(simf_route_lid(f, 1, 14, NULL), -1);
	f->st->nodes[6].ports[3].state = SIMF_PORT_ACTIVE;
	cr_expect_eq(simf_route_lid(f, 1, 14, NULL), 4);
	/* a CA whose link is down */
	simf_set_link(f, 4, 0);
	cr_expect_eq(simf_route_lid(f, 1, 14, NULL), -1);
	simf_detach(f);
}

static void dr(uint8_t *smp, unsigned hops, const uint8_t *path)
{
	memset(smp, 0, 256);
	smp[1] = 0x81;
	smp[7] = (uint8_t)hops;
	smp[32] = smp[33] = smp[34] = smp[35] = 0xFF; /* DrSLID, DrDLID permissive */
	for (unsigned i = 1; i <= hops; i++)
		smp[128 + i] = path[i];
}

Test(topo, directed_route_hop_by_hop)
{
	struct simf *f = mk_topo("chain:2,2");
	uint8_t smp[256], ret[64];
	int in = -1;

	dr(smp, 0, (const uint8_t[]){ 0 });
	cr_expect_eq(simf_route_dr(f, 1, smp, &in, ret), 1);
	cr_expect_eq(in, 1);
	dr(smp, 1, (const uint8_t[]){ 0, 1 });
	cr_expect_eq(simf_route_dr(f, 1, smp, &in, ret), 5);  /* sw1, on its port 1 */
	cr_expect_eq(in, 1);
	cr_expect_eq(ret[1], 1);
	dr(smp, 2, (const uint8_t[]){ 0, 1, 4 });
	cr_expect_eq(simf_route_dr(f, 1, smp, &in, ret), 6);  /* sw2, on its port 3 */
	cr_expect_eq(in, 3);
	cr_expect_eq(ret[2], 3);
	dr(smp, 3, (const uint8_t[]){ 0, 1, 4, 2 });
	cr_expect_eq(simf_route_dr(f, 1, smp, &in, ret), 4);  /* node4 */
	cr_expect_eq(ret[1], 1);
	cr_expect_eq(ret[2], 3);
	cr_expect_eq(ret[3], 1);
	/* a port without a cable, and a CA asked to forward: lost */
	dr(smp, 2, (const uint8_t[]){ 0, 1, 3 });
	cr_expect_eq(simf_route_dr(f, 1, smp, NULL, NULL), -1);
	dr(smp, 4, (const uint8_t[]){ 0, 1, 4, 2, 1 });
	cr_expect_eq(simf_route_dr(f, 1, smp, NULL, NULL), -1);
	/* the switch's SMA answers a path starting at it too */
	dr(smp, 1, (const uint8_t[]){ 0, 4 });
	cr_expect_eq(simf_route_dr(f, 5, smp, &in, NULL), 6);
	/* the last part by LID (DrDLID): from sw2 to node3 */
	st_chain22_lids(f);
	f->st->sw[1].lft[13] = 1;
	f->st->sw[1].lft_top = 16;
	dr(smp, 2, (const uint8_t[]){ 0, 1, 4 });
	smp[34] = 0;
	smp[35] = 13;
	cr_expect_eq(simf_route_dr(f, 1, smp, &in, NULL), 3);
	simf_detach(f);
}

/* multicast through the MFTs: chain:3,1 is node1-sw1(node4), node2-sw2
 * (node5), node3-sw3(node6); ports: 1 host, 2 previous switch, 3 next */
Test(topo, multicast_by_mft)
{
	struct simf *f = mk_topo("chain:3,1");
	uint8_t reach[SIMF_MAX_NODES];
	uint16_t mlid = 0xC001;

	cr_assert_eq(f->st->nswitches, 3);
	/* no MFT entries: nothing leaves the first switch */
	simf_mcast_reach(f, 1, mlid, reach);
	cr_expect(reach[4] && !reach[2] && !reach[3]);
	/* sw1 -> sw2 -> sw3 -> node3; sw2 keeps it from node2 */
	f->st->sw[0].mft[1] = 1u << 3;
	f->st->sw[1].mft[1] = 1u << 3;
	f->st->sw[2].mft[1] = 1u << 1 | 1u << 2;
	simf_mcast_reach(f, 1, mlid, reach);
	cr_expect(reach[3] && !reach[2] && !reach[1]);
	/* a port in the mask that the packet came in on is not used back */
	f->st->sw[1].mft[1] = 1u << 1 | 1u << 2 | 1u << 3;
	simf_mcast_reach(f, 1, mlid, reach);
	cr_expect(reach[2] && reach[3] && !reach[1]);
	/* another MLID has its own entries */
	simf_mcast_reach(f, 1, 0xC002, reach);
	cr_expect(!reach[2] && !reach[3]);
	/* the inter-switch link down cuts node3 off */
	cr_assert_eq(simf_set_port_link(f, 5, 3, 0), 0);
	simf_mcast_reach(f, 1, mlid, reach);
	cr_expect(reach[2] && !reach[3]);
	cr_expect_eq(f->st->nodes[5].ports[3].state, SIMF_PORT_DOWN);
	cr_expect_eq(f->st->nodes[6].ports[2].state, SIMF_PORT_DOWN);
	cr_expect(f->st->sw[2].life_state & 0x04, "PortStateChange");
	cr_assert_eq(simf_set_port_link(f, 5, 3, 1), 0);
	cr_expect_eq(f->st->nodes[6].ports[2].state, SIMF_PORT_INIT);
	cr_expect_neq(simf_set_port_link(f, 4, 2, 0), 0); /* sw1 port 2: no cable */
	cr_expect_eq(errno, ENOTCONN);
	simf_detach(f);
}

/* Walks a multicast packet from src through the MFTs without the dedup
 * simf_mcast_reach does, counting how often each node gets it: a loop or a
 * second path shows as a count above 1 (the walk stops after 10000 hops). */
static void mft_walk(const struct simf_state *st, int src, uint16_t mlid, int *cnt)
{
	int qn[10000], qin[10000], qh = 0, qt = 0;

	memset(cnt, 0, sizeof(int) * SIMF_MAX_NODES);
	qn[qt] = st->nodes[src].ports[1].peer;
	qin[qt++] = st->nodes[src].ports[1].peer_port;
	while (qh < qt) {
		int u = qn[qh], in = qin[qh++];
		const struct simf_node *nd = &st->nodes[u];

		cnt[u]++;
		if (nd->type != SIMF_NODE_SWITCH)
			continue;
		for (int p = 1; p <= nd->nports && qt < 10000; p++) {
			if (p == in || nd->ports[p].down || nd->ports[p].peer < 0 ||
			    !(st->sw[nd->sw].mft[mlid - 0xC000] & (1ull << p)))
				continue;
			qn[qt] = nd->ports[p].peer;
			qin[qt++] = nd->ports[p].peer_port;
		}
	}
}

/* Every CA n (1..ncas) as sender: each member other than n gets the packet
 * exactly once, no other CA gets it, and simf_mcast_reach agrees. */
static void expect_tree(struct simf *f, uint16_t mlid, const uint8_t *member, int ncas)
{
	int cnt[SIMF_MAX_NODES];
	uint8_t reach[SIMF_MAX_NODES];

	for (int src = 1; src <= ncas; src++) {
		mft_walk(f->st, src, mlid, cnt);
		simf_mcast_reach(f, src, mlid, reach);
		for (int n = 1; n <= ncas; n++) {
			if (n == src)
				continue;
			cr_expect_eq(cnt[n], member[n] ? 1 : 0, "MLID 0x%04x from node%d: node%d got it %d times",
				     mlid, src, n, cnt[n]);
			cr_expect_eq(!!reach[n], member[n], "MLID 0x%04x from node%d: reach node%d", mlid, src, n);
		}
		for (unsigned s = f->st->nnodes + 1; s <= f->st->nnodes + f->st->nswitches; s++)
			cr_expect_leq(cnt[s], 1, "from node%d: switch node%u got it %d times", src, s, cnt[s]);
	}
}

/* The built-in SM's MFTs (simf_mft_program) on a fat tree with two spines:
 * one tree, so from every sender each member gets a datagram exactly once
 * and no other CA gets it; after a spine link goes down and the SM
 * reprograms, still; a group whose members all left has no entries. */
Test(topo, builtin_mft_tree)
{
	struct simf *f = mk_topo("fat-tree:4,2,2");
	struct simf_state *st = f->st;
	struct simf_mcg *m = &st->mcgs[0], *m2 = &st->mcgs[1];
	uint8_t member[SIMF_MAX_NODES] = { 0 }, member2[SIMF_MAX_NODES] = { 0 };
	int ncas = (int)st->nnodes, leaf3 = st->nodes[3].ports[1].peer, leaf1 = st->nodes[1].ports[1].peer;

	cr_assert_eq(ncas, 8);
	cr_assert_neq(leaf1, leaf3, "node1 and node3 on different leaves");
	memset(m, 0, sizeof(*m));
	m->used = m->sa_created = 1;
	m->mlid = 0xC000;
	/* receivers on two leaves other than node1's, one send-only member */
	m->join_state[3] = member[3] = 1;
	m->join_state[7] = member[7] = 1;
	m->join_state[4] = 2; /* NonMember receives too */
	member[4] = 1;
	m->join_state[1] = 4; /* SendOnlyNonMember: no copy */
	memset(m2, 0, sizeof(*m2));
	m2->used = m2->sa_created = 1;
	m2->mlid = 0xC005;
	m2->join_state[2] = member2[2] = 1;
	m2->join_state[8] = member2[8] = 1;
	simf_mft_program(st);
	expect_tree(f, 0xC000, member, ncas);
	expect_tree(f, 0xC005, member2, ncas);
	/* a switch forwards out of the tree only: some spine link of node3's
	 * leaf carries nothing (two spines, one tree) */
	{
		int spine_ports = 0;
		const struct simf_node *l = &st->nodes[leaf3];

		for (int p = 1; p <= l->nports; p++)
			if (l->ports[p].peer > ncas && (st->sw[l->sw].mft[0] & (1ull << p)))
				spine_ports++;
		cr_expect_eq(spine_ports, 1, "leaf of node3 sends to %d spines", spine_ports);
	}
	/* take down every spine link of node3's leaf but the last: the tree
	 * is rebuilt around it */
	{
		struct simf_node *l = &st->nodes[leaf3];
		int last = 0;

		for (int p = 1; p <= l->nports; p++)
			if (l->ports[p].peer > ncas)
				last = p;
		for (int p = 1; p < last; p++)
			if (l->ports[p].peer > ncas)
				cr_assert_eq(simf_set_port_link(f, leaf3, p, 0), 0);
	}
	simf_mft_program(st);
	expect_tree(f, 0xC000, member, ncas);
	expect_tree(f, 0xC005, member2, ncas);
	/* everyone left: the entries are cleared */
	memset(m->join_state, 0, sizeof(m->join_state));
	m->sa_created = 0;
	simf_mft_program(st);
	for (unsigned s = 0; s < st->nswitches; s++)
		cr_expect_eq(st->sw[s].mft[0], 0, "switch %u keeps 0x%llx", s, (unsigned long long)st->sw[s].mft[0]);
	simf_detach(f);
}
