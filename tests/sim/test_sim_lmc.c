/* LMC in simf: a port's LID range in the fabric's LID table
 * (simf_lid_range_set: aligned bases, overlaps refused, the old range
 * freed), LID routing to every LID of a range through the switches, and the
 * path bits a packet carries (simf_bth_set_lids / simf_bth_slid /
 * simf_bth_dlid: IB only, kept out of the P_Key, QPN and AckReq bits). */
#include "simtest.h"

ST_SCRATCH_SUITE(lmc, g_scr);

Test(lmc, lid_ranges)
{
	struct simf *f = simf_create(g_scr.dir, SIMF_LINK_IB, 3, g_scr.inst, 1, NULL);
	struct simf_state *st;

	cr_assert(f, "simf_create: %s", strerror(errno));
	st = f->st;
	simf_lock(f);
	cr_expect_eq(simf_lid_range_set(st, 1, 8, 2), 0);
	cr_expect_eq(st->nodes[1].lid, 8);
	cr_expect_eq(st->nodes[1].lmc, 2);
	for (uint16_t l = 8; l < 12; l++)
		cr_expect_eq(simf_node_by_lid(f, l), 1, "LID %u", l);
	cr_expect_eq(simf_node_by_lid(f, 12), -1);
	/* not aligned to 2^LMC */
	cr_expect_eq(simf_lid_range_set(st, 2, 14, 2), -1);
	cr_expect_eq(errno, EINVAL);
	/* overlapping node1's range: nothing changes */
	cr_expect_eq(simf_lid_range_set(st, 2, 8, 3), -1);
	cr_expect_eq(errno, EADDRINUSE);
	cr_expect_eq(st->nodes[2].lid, 0);
	cr_expect_eq(simf_node_by_lid(f, 13), -1);
	/* moving frees the old range */
	cr_expect_eq(simf_lid_range_set(st, 1, 16, 3), 0);
	cr_expect_eq(simf_node_by_lid(f, 8), -1);
	cr_expect_eq(simf_node_by_lid(f, 23), 1);
	cr_expect_eq(simf_lid_range_set(st, 2, 8, 2), 0);
	cr_expect_eq(simf_node_by_lid(f, 11), 2);
	/* beyond the unicast LIDs */
	cr_expect_eq(simf_lid_range_set(st, 3, 0xBFFC, 3), -1);
	cr_expect_eq(errno, EINVAL);
	simf_unlock(f);
	/* uscm-sim lid keeps the port's LMC: an unaligned base is refused */
	cr_expect_eq(simf_set_lid(f, 2, 30), -1);
	cr_expect_eq(errno, EINVAL);
	cr_expect_eq(simf_set_lid(f, 2, 32), 0);
	cr_expect_eq(simf_node_by_lid(f, 35), 2);
	cr_expect_eq(simf_node_by_lid(f, 8), -1);
	simf_detach(f);
}

Test(lmc, every_lid_of_a_range_routes_through_switches)
{
	struct simf_topo t;
	char err[256];
	struct simf *f;
	struct simf_state *st;
	int sw;

	/* chain:1,2: one switch (node 3), hosts node1 (port 1) and node2 (port 2) */
	cr_assert_eq(simf_topo_generate("chain:1,2", &t, err, sizeof(err)), 0, "%s", err);
	f = simf_create(g_scr.dir, SIMF_LINK_IB, t.ncas, g_scr.inst, 1, NULL);
	cr_assert(f);
	cr_assert_eq(simf_topo_apply(f, &t, err, sizeof(err)), 0, "%s", err);
	st = f->st;
	sw = (int)st->nnodes + 1;
	simf_lock(f);
	cr_assert_eq(simf_lid_range_set(st, 1, 4, 2), 0);
	cr_assert_eq(simf_lid_range_set(st, 2, 8, 2), 0);
	cr_assert_eq(simf_lid_range_set(st, sw, 12, 0), 0);
	for (int p = 1; p <= 2; p++)
		st->nodes[sw].ports[p].state = SIMF_PORT_ACTIVE;
	st->sw[st->nodes[sw].sw].lft_top = 15;
	for (uint16_t l = 4; l < 8; l++)
		st->sw[st->nodes[sw].sw].lft[l] = 1;
	/* only the base LID and base+2 of node2 are programmed */
	st->sw[st->nodes[sw].sw].lft[8] = 2;
	st->sw[st->nodes[sw].sw].lft[10] = 2;
	st->sw[st->nodes[sw].sw].lft[9] = 0xFF;
	simf_unlock(f);
	cr_expect_eq(simf_route_lid(f, 1, 8, NULL), 2);
	cr_expect_eq(simf_route_lid(f, 1, 10, NULL), 2);
	/* a LID of the range without an LFT entry is lost, as on hardware */
	cr_expect_eq(simf_route_lid(f, 1, 9, NULL), -1);
	cr_expect_eq(simf_route_lid(f, 1, 11, NULL), -1);
	for (uint16_t l = 4; l < 8; l++)
		cr_expect_eq(simf_route_lid(f, 2, l, NULL), 1, "LID %u", l);
	/* a port reaches its own LIDs without a switch */
	cr_expect_eq(simf_route_lid(f, 1, 6, NULL), 1);
	simf_detach(f);
}

Test(lmc, path_bits_in_the_bth)
{
	struct simf *f = simf_create(g_scr.dir, SIMF_LINK_IB, 2, g_scr.inst, 1, NULL);
	struct simf_bth b = { .opcode = 0x04, .pkey = 0x8001, .dest_qp = 0xABCDEF, .ack_req = 1, .psn = 0x123456 },
			r;
	uint8_t pkt[SIMF_BTH_LEN];

	cr_assert(f);
	simf_lock(f);
	cr_assert_eq(simf_lid_range_set(f->st, 1, 8, 2), 0);
	cr_assert_eq(simf_lid_range_set(f->st, 2, 16, 3), 0);
	simf_unlock(f);
	b.resv8a = SIMF_RESV8A(5, 1);
	simf_bth_put(pkt, &b);
	simf_bth_set_lids(f, pkt, 1, 11, 2, 22);
	simf_bth_get(pkt, &r);
	cr_expect_eq(simf_bth_slid(f, &r, 1), 11);
	cr_expect_eq(simf_bth_dlid(f, &r, 2), 22);
	/* nothing else moved */
	cr_expect_eq(SIMF_RESV8A_SL(r.resv8a), 5);
	cr_expect_eq(SIMF_RESV8A_GRH(r.resv8a), 1);
	cr_expect_eq(r.pkey, 0x8001);
	cr_expect_eq(r.dest_qp, 0xABCDEFu);
	cr_expect_eq(r.ack_req, 1);
	cr_expect_eq(r.psn, 0x123456u);
	/* LIDs outside the ranges: base LIDs */
	simf_bth_put(pkt, &b);
	simf_bth_set_lids(f, pkt, 1, 30, 2, 40);
	simf_bth_get(pkt, &r);
	cr_expect_eq(simf_bth_slid(f, &r, 1), 8);
	cr_expect_eq(simf_bth_dlid(f, &r, 2), 16);
	simf_detach(f);
}
