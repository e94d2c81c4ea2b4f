/* Fault rules by link: `link=NODE:PORT` (and `dir=`) matches the
 * datagrams that cross that cable. On chain:2,2 (node1, node2 on sw1's
 * ports 1, 2; node3, node4 on sw2's ports 1, 2; sw1 port 4 - sw2 port 3)
 * with LFTs programmed: 100% loss on the inter-switch cable loses what
 * crosses it, LID-routed or by a directed route (and the answer coming
 * back), and nothing else; dir= picks one way; a CA's link (named by
 * either end) loses what the CA sends and receives, also on the switchless
 * default fabric. The syntax round-trips through simf_fault_format. */
#include "simtest.h"

static struct simf_topo g_t;

ST_SCRATCH_SUITE(linkfault, g_scr);

static struct simf *mk_chain(void)
{
	return st_chain22(&g_scr, &g_t);
}

static void rule(struct simf *f, const char *spec)
{
	struct simf_fault r;
	char err[128], back[256];

	cr_assert_eq(simf_fault_parse(spec, &r, err, sizeof(err)), 0, "%s: %s", spec, err);
	cr_assert_eq(simf_fault_set(f, &r, 1), 0);
	/* the formatted rule parses to the same rule */
	simf_fault_format(&r, back, sizeof(back));
	{
		struct simf_fault r2;

		cr_assert_eq(simf_fault_parse(back, &r2, err, sizeof(err)), 0, "%s: %s", back, err);
		cr_assert_eq(memcmp(&r, &r2, sizeof(r)), 0, "'%s' formats as '%s'", spec, back);
	}
}

/* One UD datagram from node a to node b, LID-routed as the drop-ins do
 * (simf_route_lid, then simf_send on the same thread): did it arrive? */
static int lid_crosses(struct simf *f, int a, int b)
{
	uint16_t pb;
	int sa = simf_socket(f, a, 0, NULL), sb = simf_socket(f, b, 0, &pb), src = -1, dst;
	uint8_t pkt[128], buf[256], payload[32] = { 7 };
	size_t len = st_ud_packet(pkt, 100, 1, 0x1234, 50, payload, sizeof(payload));
	ssize_t k;

	cr_assert(sa >= 0 && sb >= 0);
	dst = simf_route_lid(f, a, f->st->nodes[b].lid, NULL);
	cr_assert_eq(dst, b, "node%d -> node%d: no route", a, b);
	cr_assert_eq(simf_send(f, sa, a, dst, pb, pkt, len), (ssize_t)len);
	k = st_recv(f, sb, buf, sizeof(buf), &src, NULL, 200);
	close(sa);
	close(sb);
	return k > 0 && src == a;
}

Test(linkfault, switch_to_switch_cable)
{
	struct simf *f = mk_chain();

	cr_assert(lid_crosses(f, 1, 4) && lid_crosses(f, 4, 1) && lid_crosses(f, 1, 2));
	rule(f, "drop=100%,link=sw1:4");
	cr_expect(!lid_crosses(f, 1, 4), "1 -> 4 crosses sw1:4");
	cr_expect(!lid_crosses(f, 3, 2), "3 -> 2 crosses it the other way");
	cr_expect(lid_crosses(f, 1, 2), "1 -> 2 stays on sw1");
	cr_expect(lid_crosses(f, 3, 4), "3 -> 4 stays on sw2");
	/* the same cable named by its other end */
	rule(f, "drop=100%,link=sw2:3");
	cr_expect(!lid_crosses(f, 1, 4));
	cr_expect(lid_crosses(f, 1, 2));
	/* one way: leaving sw1 by port 4 */
	rule(f, "drop=100%,link=sw1:4,dir=out");
	cr_expect(!lid_crosses(f, 1, 3));
	cr_expect(lid_crosses(f, 3, 1), "3 -> 1 enters sw1 at port 4: not dropped");
	rule(f, "drop=100%,link=sw2:3,dir=out");
	cr_expect(lid_crosses(f, 1, 3));
	cr_expect(!lid_crosses(f, 3, 1));
	/* and counted as the sender's drops */
	{
		uint64_t before = f->st->nodes[4].tx_dropped;

		cr_expect(!lid_crosses(f, 4, 2));
		cr_expect_eq(f->st->nodes[4].tx_dropped, before + 1);
	}
	simf_fault_set(f, NULL, 0);
	cr_expect(lid_crosses(f, 3, 1));
	simf_detach(f);
}

Test(linkfault, a_cas_link_by_either_end)
{
	struct simf *f = mk_chain();

	rule(f, "drop=100%,link=node2:1");
	cr_expect(!lid_crosses(f, 1, 2));
	cr_expect(!lid_crosses(f, 2, 4));
	cr_expect(lid_crosses(f, 1, 3));
	/* sw1's port 2 is node2's cable: out of sw1 = into node2 */
	rule(f, "drop=100%,link=sw1:2,dir=out");
	cr_expect(!lid_crosses(f, 1, 2));
	cr_expect(lid_crosses(f, 2, 1), "node2's sends enter sw1 at port 2");
	rule(f, "drop=100%,link=node2:1,dir=out");
	cr_expect(lid_crosses(f, 1, 2));
	cr_expect(!lid_crosses(f, 2, 1));
	/* only the matching link's rule applies; others pass on to later rules */
	{
		struct simf_fault r[2];
		char err[128];

		cr_assert_eq(simf_fault_parse("delay=1ms,link=sw1:4", &r[0], err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(simf_fault_parse("drop=100%", &r[1], err, sizeof(err)), 0, "%s", err);
		simf_fault_set(f, r, 2);
		cr_expect(lid_crosses(f, 1, 4), "delayed, not dropped (first rule)");
		cr_expect(!lid_crosses(f, 1, 2), "not across sw1:4: the second rule drops it");
	}
	simf_detach(f);
}

Test(linkfault, directed_route_and_its_answer)
{
	struct simf *f = mk_chain();
	uint8_t smp[256] = { 0 };
	int dst;

	/* node1 -> sw1 port 4 -> sw2: the SMP crosses sw1:4 */
	smp[1] = 0x81;
	smp[7] = 2;
	smp[32] = smp[33] = smp[34] = smp[35] = 0xFF;
	smp[129] = 1;
	smp[130] = 4;
	rule(f, "drop=100%,link=sw1:4,dir=out");
	dst = simf_route_dr(f, 1, smp, NULL, NULL);
	cr_assert_eq(dst, 6);
	{
		uint16_t p6;
		int s1 = simf_socket(f, 1, 0, NULL), s6 = simf_socket(f, 6, 0, &p6), from;
		uint8_t pkt[400], buf[400];
		size_t len = st_ud_packet(pkt, 0, 1, 0x80010000, 0, smp, sizeof(smp));
		uint16_t p1;

		cr_assert(s1 >= 0 && s6 >= 0);
		cr_assert_eq(simf_send(f, s1, 1, 6, p6, pkt, len), (ssize_t)len);
		cr_expect_lt(st_recv(f, s6, buf, sizeof(buf), &from, NULL, 200), 0, "the SMP crossed sw1:4 out");
		/* the answer from sw2 comes back the same way, into sw1 at port
		 * 4: a rule for the other way drops it, this one does not */
		close(s1);
		s1 = simf_socket(f, 1, 0, &p1);
		cr_assert_eq(simf_route_dr(f, 1, smp, NULL, NULL), 6);
		cr_assert_eq(simf_send(f, s6, 6, 1, p1, pkt, len), (ssize_t)len);
		cr_expect_gt(st_recv(f, s1, buf, sizeof(buf), &from, NULL, 200), 0, "the answer comes in");
		rule(f, "drop=100%,link=sw1:4,dir=in");
		cr_assert_eq(simf_route_dr(f, 1, smp, NULL, NULL), 6);
		cr_assert_eq(simf_send(f, s6, 6, 1, p1, pkt, len), (ssize_t)len);
		cr_expect_lt(st_recv(f, s1, buf, sizeof(buf), &from, NULL, 200), 0, "the answer enters sw1 at 4");
		close(s1);
		close(s6);
	}
	simf_detach(f);
}

/* the switchless default fabric: a CA's link is all it sends and receives */
Test(linkfault, switchless_fabric)
{
	struct simf *f = simf_create(g_scr.dir, SIMF_LINK_IB, 3, g_scr.inst, 1, NULL);

	cr_assert(f);
	for (int i = 1; i <= 3; i++)
		cr_assert_eq(simf_set_lid(f, i, (uint16_t)i), 0);
	rule(f, "drop=100%,link=node3:1");
	cr_expect(lid_crosses(f, 1, 2));
	cr_expect(!lid_crosses(f, 1, 3));
	cr_expect(!lid_crosses(f, 3, 2));
	simf_detach(f);
}

Test(linkfault, syntax)
{
	struct simf_fault r;
	char err[128], back[128];

	cr_assert_eq(simf_fault_parse("drop=5%,link=sw12:36,dir=in", &r, err, sizeof(err)), 0, "%s", err);
	simf_fault_format(&r, back, sizeof(back));
	cr_expect_str_eq(back, "drop=5%,link=sw12:36,dir=in");
	cr_assert_eq(simf_fault_parse("delay=2ms,link=2:1", &r, err, sizeof(err)), 0, "%s", err);
	simf_fault_format(&r, back, sizeof(back));
	cr_expect_str_eq(back, "delay=2ms,link=node2:1");
	/* a CA has port 1 only; a port needs a number; dir needs a link */
	cr_expect_neq(simf_fault_parse("drop=1%,link=node2:2", &r, err, sizeof(err)), 0);
	cr_expect_neq(simf_fault_parse("drop=1%,link=sw1", &r, err, sizeof(err)), 0);
	cr_expect_neq(simf_fault_parse("drop=1%,link=sw1:37", &r, err, sizeof(err)), 0);
	cr_expect_neq(simf_fault_parse("drop=1%,dir=in", &r, err, sizeof(err)), 0);
	cr_expect_neq(simf_fault_parse("drop=1%,link=sw1:2,dir=up", &r, err, sizeof(err)), 0);
}
