/* P_Keys in simf (sim/simf_pkey.c): the membership rule the drop-ins
 * apply at a receiving port, a port's table lookup, and the partition
 * enforcement of switch ports on a LID route (what OpenSM turns on with
 * PortInfo PartitionEnforcementInbound / Outbound and a port's P_Key
 * table), with the violations counted where the packet was dropped. */
#include "simtest.h"

ST_SCRATCH_SUITE(pkey, g_scr);

Test(pkey, membership_rule)
{
	/* same partition, one side full */
	cr_expect(simf_pkey_match(0x8001, 0x8001));
	cr_expect(simf_pkey_match(0x8001, 0x0001));
	cr_expect(simf_pkey_match(0x0001, 0x8001));
	/* two limited members never talk */
	cr_expect(!simf_pkey_match(0x0001, 0x0001));
	cr_expect(!simf_pkey_match(0x7FFF, 0x7FFF));
	/* another partition, and the invalid key */
	cr_expect(!simf_pkey_match(0x8001, 0x8002));
	cr_expect(!simf_pkey_match(0x8000, 0x8000));
	cr_expect(!simf_pkey_match(0x0000, 0xFFFF));
}

Test(pkey, table_index_and_counter)
{
	struct simf *f = simf_create(g_scr.dir, SIMF_LINK_IB, 2, g_scr.inst, 1, NULL);

	cr_assert(f, "simf_create: %s", strerror(errno));
	f->st->nodes[1].pkeys[0] = 0x7FFF;
	f->st->nodes[1].pkeys[1] = 0x8001;
	cr_expect_eq(simf_pkey_index(f, 1, 0xFFFF), 0);  /* full key, limited entry */
	cr_expect_eq(simf_pkey_index(f, 1, 0x7FFF), -1); /* limited to limited */
	cr_expect_eq(simf_pkey_index(f, 1, 0x0001), 1);
	cr_expect_eq(simf_pkey_index(f, 1, 0x8002), -1);
	cr_expect_eq(simf_pkey_violations(f, 1), 0);
	simf_pkey_violation(f, 1);
	simf_pkey_violation(f, 1);
	cr_expect_eq(simf_pkey_violations(f, 1), 2);
	cr_expect_eq(simf_pkey_violations(f, 2), 0);
	simf_detach(f);
}

/* chain:2,2 with LIDs and LFTs (st_chain22) */
static struct simf *chain(void)
{
	static struct simf_topo t;

	return st_chain22(&g_scr, &t);
}

Test(pkey, switch_ports_enforce_partitions)
{
	struct simf *f = chain();
	uint16_t keys[SIMF_SW_PKEYS] = { 0 };

	cr_assert_eq(simf_route_lid(f, 1, 14, NULL), 4);
	/* no enforcement: anything passes */
	cr_expect(simf_pkey_route_ok(f, 1, 14, 0x8005));
	/* sw1's port 1 (node1's) enforces inbound with 0x8001 (and the
	 * default partition as a limited member) */
	keys[0] = 0x8001;
	keys[1] = 0x7FFF;
	simf_pkey_sw_table(f, 5, 1, keys);
	simf_pkey_sw_enforce(f, 5, 1, 1, 1);
	cr_expect(simf_pkey_route_ok(f, 1, 14, 0x8001));
	cr_expect(simf_pkey_route_ok(f, 1, 14, 0x0001), "the partition, not the membership, is checked");
	cr_expect(simf_pkey_route_ok(f, 1, 14, 0xFFFF), "a limited member's port passes a full key");
	cr_expect(!simf_pkey_route_ok(f, 1, 14, 0x8002), "another partition enters");
	cr_expect_eq(simf_pkey_violations(f, 5), 1, "counted at sw1");
	/* outbound at sw2's port 2 (node4's): 0x8002 only; a table that was
	 * never set is the SMA's default, 0xFFFF alone */
	memset(keys, 0, sizeof(keys));
	keys[0] = 0x8002;
	simf_pkey_sw_table(f, 6, 2, keys);
	simf_pkey_sw_enforce(f, 6, 2, 1, 1);
	cr_expect(!simf_pkey_route_ok(f, 1, 14, 0x8001), "0x8001 leaves towards node4");
	cr_expect_eq(simf_pkey_violations(f, 6), 1, "counted at sw2");
	cr_expect(simf_pkey_route_ok(f, 1, 13, 0x8001), "node3's port does not enforce");
	simf_pkey_sw_enforce(f, 6, 1, 1, 1);
	cr_expect(!simf_pkey_route_ok(f, 1, 13, 0x8001), "node3's port enforces its default table");
	cr_expect(simf_pkey_route_ok(f, 1, 13, 0xFFFF));
	/* the way back from node4 enters sw2 at port 2: inbound */
	cr_expect(simf_pkey_route_ok(f, 4, 11, 0x8002) == 0, "0x8002 is not in sw1 port 1's table");
	cr_expect(!simf_pkey_route_ok(f, 4, 11, 0x8001), "0x8001 does not enter at node4's port");
	/* to a switch's own port 0: only the ports crossed count */
	cr_expect(simf_pkey_route_ok(f, 1, 15, 0x8001));
	/* enforcement turned off again */
	simf_pkey_sw_enforce(f, 6, 2, 0, 0);
	cr_expect(simf_pkey_route_ok(f, 1, 14, 0x8001));
	/* a switchless fabric has nothing to enforce */
	cr_expect(simf_pkey_route_ok(f, 0, 14, 0x1234), "the built-in SM is off the cables");
	simf_detach(f);
}
