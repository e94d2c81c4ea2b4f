/* The unmodified infiniband-diags SMP tools (libibmad over the drop-in
 * libibumad) against the fabric's SMAs: smpquery (NodeInfo, NodeDescription,
 * PortInfo, P_KeyTable, GUIDInfo; LID-routed, directed route, by GUID
 * through the SA), sminfo, the status of an unsupported attribute, a
 * directed route beyond the local port, and the local SMA with the link
 * down. Every command runs through `uscm-sim run --node ...`. Each test has
 * its own fabric directory, stopped in .fini; the SM also follows the test
 * process (USCM_SIM_WATCH_PID). Skipped when infiniband-diags is absent. */
#include "simtest.h"

#include <signal.h>

static char *g_dir;
static const char *g_smpquery;

static void setup(void)
{
	g_dir = st_fixture_dir();
}

static void teardown(void)
{
	st_sh(NULL, "'%s/uscm-sim' stop --dir '%s' >/dev/null 2>&1", st_bin(), g_dir);
	st_rmrf(g_dir);
	free(g_dir);
}

TestSuite(diags, .init = setup, .fini = teardown, .timeout = 60);

static void start(const char *args)
{
	char *out = NULL;
	int rc;

	g_smpquery = st_tool("smpquery");
	if (!g_smpquery)
		tf_skip_missing("smpquery not installed (Debian package infiniband-diags)");
	rc = st_sh(&out, "'%s/uscm-sim' start --dir '%s' --no-uscmd %s 2>&1", st_bin(), g_dir, args);
	cr_assert_eq(rc, 0, "uscm-sim start: %s", out);
	free(out);
}

/* Runs `cmd` (a shell word list) on node; its output (stdout + stderr) in
 * *out, its exit status returned. */
static int on(const char *node, char **out, const char *cmd)
{
	return st_sh(out, "'%s/uscm-sim' run --dir '%s' --node %s -- %s 2>&1", st_bin(), g_dir, node, cmd);
}

/* smpquery ARGS on node: its exit status, the output in *out. */
static int smp(const char *node, char **out, const char *args)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "%s %s", g_smpquery, args);
	return on(node, out, cmd);
}

/* smpquery ARGS on node: asserts success, returns the output. */
static char *smp_ok(const char *node, const char *args)
{
	char cmd[512], *out = NULL;
	int rc;

	snprintf(cmd, sizeof(cmd), "%s %s", g_smpquery, args);
	rc = on(node, &out, cmd);
	cr_assert_eq(rc, 0, "smpquery %s on %s: %s", args, node, out);
	return out;
}

/* libibmad prints "Name:......value": is there such a line? */
static int has_field(const char *out, const char *name, const char *value)
{
	char want[256];
	const char *p = out;

	snprintf(want, sizeof(want), "%s:", name);
	while ((p = strstr(p, want)) != NULL) {
		const char *v = p + strlen(want), *eol;

		if (p == out || p[-1] == '\n') {
			while (*v == '.')
				v++;
			eol = strchr(v, '\n');
			if ((size_t)(eol ? eol - v : (long)strlen(v)) == strlen(value) &&
			    strncmp(v, value, strlen(value)) == 0)
				return 1;
		}
		p = v;
	}
	return 0;
}

#define EXPECT_FIELD(out, name, value) \
	cr_expect(has_field(out, name, value), "want %s = %s in:\n%s", name, value, out)

Test(diags, smpquery_nodeinfo_lid_routed_and_directed)
{
	char *out;

	start("--nodes 3 --link ib");
	/* LID 3 is node2's port: the answer comes from node2's SMA */
	out = smp_ok("node1", "nodeinfo 3");
	cr_expect(strstr(out, "# Node info: Lid 3"), "%s", out);
	EXPECT_FIELD(out, "BaseVers", "1");
	EXPECT_FIELD(out, "ClassVers", "1");
	EXPECT_FIELD(out, "NodeType", "Channel Adapter");
	EXPECT_FIELD(out, "NumPorts", "1");
	EXPECT_FIELD(out, "SystemGuid", "0x0002c90300000002");
	EXPECT_FIELD(out, "Guid", "0x0002c90300000002");
	EXPECT_FIELD(out, "PortGuid", "0x0002c90300000002");
	EXPECT_FIELD(out, "PartCap", "16");
	EXPECT_FIELD(out, "LocalPort", "1");
	EXPECT_FIELD(out, "VendorId", "0x0002c9");
	free(out);
	/* directed route, hop count 0: the local port's own SMA */
	out = smp_ok("node1", "-D nodeinfo 0");
	cr_expect(strstr(out, "DR path slid 65535; dlid 65535; 0"), "%s", out);
	EXPECT_FIELD(out, "Guid", "0x0002c90300000001");
	free(out);
	out = smp_ok("node3", "-D nodeinfo 0");
	EXPECT_FIELD(out, "Guid", "0x0002c90300000003");
	free(out);
	/* by GUID: libibmad asks the SA for the LID, then the SMA */
	out = smp_ok("node1", "-G nodeinfo 0x0002c90300000003");
	cr_expect(strstr(out, "# Node info: Lid 4"), "%s", out);
	EXPECT_FIELD(out, "Guid", "0x0002c90300000003");
	free(out);
	/* the SM's node (LID 1) has an SMA too */
	out = smp_ok("node2", "nodeinfo 1");
	EXPECT_FIELD(out, "Guid", "0x0002c90300000000");
	free(out);
}

Test(diags, smpquery_portinfo)
{
	char *out, *bad = NULL;

	start("--nodes 2 --link ib");
	out = smp_ok("node2", "portinfo 2 1");
	cr_expect(strstr(out, "# Port info: Lid 2 port 1"), "%s", out);
	EXPECT_FIELD(out, "GidPrefix", "0xfe80000000000000");
	EXPECT_FIELD(out, "Lid", "2");
	EXPECT_FIELD(out, "SMLid", "1");
	EXPECT_FIELD(out, "LocalPort", "1");
	EXPECT_FIELD(out, "LinkState", "Active");
	EXPECT_FIELD(out, "PhysLinkState", "LinkUp");
	EXPECT_FIELD(out, "LMC", "0");
	EXPECT_FIELD(out, "LinkWidthActive", "4X");
	EXPECT_FIELD(out, "MtuCap", "4096");
	EXPECT_FIELD(out, "NeighborMTU", "4096");
	EXPECT_FIELD(out, "VLCap", "VL0-7");
	EXPECT_FIELD(out, "GuidCap", "8");
	EXPECT_FIELD(out, "LinkSpeedExtActive", "25.78125 Gbps");
	cr_expect(strstr(out, "CapMask:.........................0x2651e848"), "%s", out);
	free(out);
	/* port 0 means the port the SMP came in on; the SM's port has IsSM */
	out = smp_ok("node1", "portinfo 1");
	EXPECT_FIELD(out, "Lid", "1");
	cr_expect(strstr(out, "\t\t\t\tIsSM\n"), "%s", out);
	free(out);
	/* a CA has one port: port 2 is an invalid attribute modifier */
	cr_expect_neq(smp("node1", &bad, "-t 2000 portinfo 3 2"), 0, "%s", bad);
	cr_expect(strstr(bad, "port info query failed"), "%s", bad);
	free(bad);
}

Test(diags, smpquery_nodedesc_pkeys_guidinfo_and_sminfo)
{
	const char *sminfo;
	char *out;

	start("--nodes 3 --link ib");
	out = smp_ok("node1", "nodedesc 3");
	cr_expect(strstr(out, "Node Description:..................uscm-sim node2\n"), "%s", out);
	free(out);
	out = smp_ok("node3", "-D nodedesc 0");
	cr_expect(strstr(out, "Node Description:..................uscm-sim node3\n"), "%s", out);
	free(out);
	out = smp_ok("node2", "nodedesc 1");
	cr_expect(strstr(out, "uscm-sim sm (SM/SA)"), "%s", out);
	free(out);
	out = smp_ok("node1", "pkeys 2");
	cr_expect(strstr(out, "   0: 0xffff 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000\n"), "%s", out);
	cr_expect(strstr(out, "16 pkeys capacity for this port"), "%s", out);
	free(out);
	out = smp_ok("node2", "guidinfo 4");
	cr_expect(strstr(out, "   0: 0x0002c90300000003 0x0000000000000000\n"), "%s", out);
	cr_expect(strstr(out, "8 guids capacity for this port"), "%s", out);
	free(out);
	sminfo = st_tool("sminfo");
	if (sminfo) {
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "%s", sminfo);
		cr_assert_eq(on("node3", &out, cmd), 0, "%s", out);
		cr_expect(strstr(out, "sminfo: sm lid 1 sm guid 0x2c90300000000, activity count "), "%s", out);
		cr_expect(strstr(out, "priority 0 state 3 SMINFO_MASTER"), "%s", out);
		free(out);
	} else {
		tf_warn_missing("sminfo (infiniband-diags) not installed: its check skipped");
	}
}

/* An attribute no SMA here serves (SL-to-VL table) is answered at once with
 * status 0x000C, not left to time out; a directed route with hops leaves
 * through port 1 into a switch the fabric does not have: lost. */
Test(diags, unsupported_attribute_and_route_beyond_the_port)
{
	char *out = NULL;
	uint64_t t0;

	start("--nodes 2 --link ib -v");
	t0 = st_now_ms();
	cr_expect_neq(smp("node1", &out, "-t 3000 sl2vl 3"), 0, "%s", out);
	cr_expect(strstr(out, "slvl query failed"), "%s", out);
	cr_expect_lt(st_now_ms() - t0, 2500, "answered, not timed out: %s", out);
	free(out);
	{
		char p[600], *log;

		snprintf(p, sizeof(p), "%s/sm.log", g_dir);
		log = st_slurp(p);
		cr_expect(strstr(log, "SMA of node2: SubnGet attribute(0x0017) mod 0x0 from node1: status 0x000c"),
			  "%s", log);
		free(log);
	}
	t0 = st_now_ms();
	cr_expect_neq(smp("node1", &out, "-t 100 -D nodeinfo 0,1"), 0, "%s", out);
	cr_expect(strstr(out, "node info query failed"), "%s", out);
	free(out);
}

/* Link down: the node's SMA is unreachable from the others, but a
 * directed-route SMP with hop count 0 never leaves the HCA and reports the
 * port Down; back up, the SM makes it Active again. */
Test(diags, local_sma_answers_with_the_link_down)
{
	char *out = NULL;

	start("--nodes 2 --link ib");
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' link --dir '%s' node2 down 2>&1", st_bin(), g_dir), 0, "%s", out);
	free(out);
	out = smp_ok("node2", "-D portinfo 0");
	EXPECT_FIELD(out, "LinkState", "Down");
	EXPECT_FIELD(out, "PhysLinkState", "Disabled");
	free(out);
	cr_expect_neq(smp("node1", &out, "-t 100 nodeinfo 3"), 0, "%s", out);
	free(out);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' link --dir '%s' node2 up 2>&1", st_bin(), g_dir), 0, "%s", out);
	free(out);
	for (int i = 0; i < 50; i++) {
		out = smp_ok("node1", "portinfo 3");
		if (has_field(out, "LinkState", "Active"))
			break;
		free(out);
		out = NULL;
		usleep(20000);
	}
	cr_assert(out, "node2's port became Active again");
	EXPECT_FIELD(out, "Lid", "3");
	EXPECT_FIELD(out, "PhysLinkState", "LinkUp");
	free(out);
}
