/*
 * SMInfo of the port an SM runs on: under `--sm opensm` a
 * SubnGet(SMInfo) to OpenSM's port is answered by OpenSM itself (the HCA's
 * SMA hands SMInfo to the SM on the port, IBTA 14.2.5.13), LID-routed and
 * by a directed route, from its own node and from another node across
 * switches: infiniband-diags' `sminfo` prints OpenSM's port GUID, its
 * priority (given with `-p`), state MASTER and an ActCount that moves (it
 * counts OpenSM's QP0 MADs sent). A port without an SM answers
 * "unsupported", and sminfo fails, as on hardware. The built-in SM's
 * SMInfo still comes from its own node. Skipped without opensm or
 * infiniband-diags.
 */
#include "libtest.h"

static void teardown(void)
{
	lt_fabric_stop();
	unsetenv("USCM_SIM_OPENSM_ARGS");
}

TestSuite(sminfo, .fini = teardown, .timeout = 90);

/* `sminfo args` on node n: its exit status, output in *out */
static int sminfo(int n, char **out, const char *args)
{
	return lt_sh(out, "USCM_SIM_NODE=node%d %s timeout 20 sminfo %s 2>&1", n, lt_util_env(), args);
}

/* the activity count sminfo printed, -1 if none */
static long act_count(const char *out)
{
	const char *p = strstr(out, "activity count ");

	return p ? strtol(p + 15, NULL, 10) : -1;
}

static int lid_of(int n)
{
	char *out = NULL;
	int lid;

	cr_assert_eq(lt_sh(&out, "%s/uscm-sim status | awk '$2 == \"node%d\" { print $4 }'", lt_bin(), n), 0);
	lid = atoi(out);
	free(out);
	cr_assert(lid > 0, "node%d has no LID", n);
	return lid;
}

Test(sminfo, opensm_answers_for_its_port)
{
	char *out = NULL, args[64], want[128];
	long a1, a2;
	int sml;

	lt_need("opensm", "opensm");
	lt_need("sminfo", "infiniband-diags");
	/* 2 leaves x 2 hosts, 2 spines; OpenSM (on node1) with priority 7 */
	setenv("USCM_SIM_OPENSM_ARGS", "-p 7", 1);
	lt_fabric_start_opts("ib", 4, "--no-uscmd --sm opensm --topo fat-tree:2,2,2");
	sml = lid_of(1);
	/* from node4 on the other leaf, LID-routed to the SM LID */
	snprintf(args, sizeof(args), "%d", sml);
	cr_assert_eq(sminfo(4, &out, args), 0, "%s", out);
	snprintf(want, sizeof(want), "sm lid %d sm guid 0x2c90300000001, activity count", sml);
	cr_expect(strstr(out, want), "%s", out);
	cr_expect(strstr(out, "priority 7 state 3 SMINFO_MASTER"), "%s", out);
	a1 = act_count(out);
	free(out);
	out = NULL;
	/* the default: the SM LID of the querying port's PortInfo */
	cr_assert_eq(sminfo(3, &out, ""), 0, "%s", out);
	cr_expect(strstr(out, want) && strstr(out, "SMINFO_MASTER"), "%s", out);
	a2 = act_count(out);
	free(out);
	out = NULL;
	cr_expect(a1 >= 0 && a2 > a1, "ActCount %ld then %ld", a1, a2);
	/* by a directed route: node2 -> leaf1 (port 2) -> node1 (port 1);
	 * and node1 to its own port (hop count 0) */
	cr_assert_eq(sminfo(2, &out, "-D 0,1,1"), 0, "%s", out);
	cr_expect(strstr(out, "sm guid 0x2c90300000001") && strstr(out, "priority 7 state 3 SMINFO_MASTER"),
		  "%s", out);
	free(out);
	out = NULL;
	cr_assert_eq(sminfo(1, &out, "-D 0"), 0, "%s", out);
	cr_expect(strstr(out, "sm guid 0x2c90300000001"), "%s", out);
	free(out);
	out = NULL;
	/* no SM on node2's port: its SMA does not serve SMInfo */
	snprintf(args, sizeof(args), "%d", lid_of(2));
	cr_expect_neq(sminfo(4, &out, args), 0, "node2's port answered SMInfo:\n%s", out);
	free(out);
}

Test(sminfo, builtin_sm)
{
	char *out = NULL;

	lt_need("sminfo", "infiniband-diags");
	lt_fabric_start_opts("ib", 2, "--no-uscmd");
	cr_assert_eq(sminfo(2, &out, ""), 0, "%s", out);
	cr_expect(strstr(out, "SMINFO_MASTER"), "%s", out);
	free(out);
}
