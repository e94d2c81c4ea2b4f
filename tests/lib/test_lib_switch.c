/*
 * Switches and topologies: `uscm-sim start --topo`
 * with a topology file in ibsim's format, or a generator. Under the built-in
 * SM (which gives switches LIDs and min-hop LFTs) and under Debian's
 * unmodified opensm (which sweeps through the switches' SMAs by directed
 * routes, assigns LIDs and programs the LFTs by SubnSet): infiniband-diags'
 * ibnetdiscover prints the topology given, ibroute the switch's LFT,
 * ibtracert a path through the switches, smpquery answers through a
 * directed route of 3 and 4 hops, saquery PR answers from OpenSM's SA, and
 * unmodified rping, ucmatose, udaddy and cmtime -c 1000 over uscm's
 * librdmacm connect across leaf switches (their packets forwarded by the
 * LFTs); a spine link taken down, the leaf's
 * Trap 128 makes OpenSM reroute at once; mckey reaches receivers on two
 * other leaves through OpenSM's MFTs, and through the built-in SM's.
 * Skipped when opensm,
 * infiniband-diags or rdmacm-utils is missing.
 */
#include "libtest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(switch, .fini = teardown, .timeout = 90);

/* Every switch's link line of D/topology ("[p]\t\"X-guid\"[pp]") is in
 * ibnetdiscover's output, and it found as many switches and CAs. */
static void expect_topology(const char *disc)
{
	char path[600], line[512];
	int in_switch = 0, nsw = 0, nca = 0, links = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/topology", getenv("USCM_SIM_DIR"));
	fp = fopen(path, "r");
	cr_assert(fp, "%s", path);
	while (fgets(line, sizeof(line), fp)) {
		char *hash = strstr(line, "\t\t#");

		if (strncmp(line, "Switch\t", 7) == 0)
			in_switch = 1, nsw++;
		else if (strncmp(line, "Ca\t", 3) == 0)
			in_switch = 0, nca++;
		if (line[0] != '[' || !in_switch || !hash)
			continue;
		*hash = 0;
		links++;
		cr_expect(strstr(disc, line), "ibnetdiscover lacks the link '%s':\n%s", line, disc);
	}
	fclose(fp);
	cr_expect(links > 0);
	{
		int dsw = 0, dca = 0;

		for (const char *p = disc; (p = strchr(p, '\n')); p++) {
			dsw += strncmp(p + 1, "Switch\t", 7) == 0;
			dca += strncmp(p + 1, "Ca\t", 3) == 0;
		}
		cr_expect_eq(dsw, nsw, "%d switches found, %d given:\n%s", dsw, nsw, disc);
		cr_expect_eq(dca, nca, "%d CAs found, %d given:\n%s", dca, nca, disc);
	}
}

/* a server `prog sargs` on node s, the client `prog cargs` on node c:
 * the client exits 0, and the server too (server_exits) or it is
 * stopped (cmtime's server runs until killed) */
static void pair_across(const char *prog, int s, const char *sargs, int c, const char *cargs, int server_exits)
{
	char *out = NULL, *sout = NULL;
	int st = -1;

	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node%d %s timeout 60 %s %s >%s/%s.out 2>&1 & echo $! >%s/%s.pid; "
			   "wait $!; echo $? >%s/%s.rc) >/dev/null 2>&1 &",
			   s, lt_util_env(), prog, sargs, lt_dir, prog, lt_dir, prog, lt_dir, prog),
		     0);
	for (int i = 0; i < 50; i++) {
		free(out);
		out = NULL;
		st = lt_on_node(c, &out, "%s %s", prog, cargs);
		if (st == 0 || !strstr(out, "REJECTED"))
			break;
		usleep(100 * 1000); /* the server did not listen yet */
	}
	cr_expect_eq(st, 0, "%s %s on node%d exited %d:\n%s", prog, cargs, c, st, out);
	free(out);
	if (!server_exits) {
		lt_sh(NULL, "kill -TERM $(cat %s/%s.pid) >/dev/null 2>&1; true", lt_dir, prog);
		return;
	}
	for (int i = 0; i < 300 && lt_sh(NULL, "test -s %s/%s.rc", lt_dir, prog) != 0; i++)
		usleep(100 * 1000);
	lt_sh(&sout, "cat %s/%s.rc %s/%s.out", lt_dir, prog, lt_dir, prog);
	cr_expect(sout[0] == '0', "%s %s on node%d:\n%s", prog, sargs, s, sout);
	free(sout);
}

/* node n's LID as `uscm-sim status` shows it */
static int lid_of(int n)
{
	char *out = NULL;
	int lid = -1;

	cr_assert_eq(lt_sh(&out, "%s/uscm-sim status | awk '$2 == \"node%d\" { print $4 }'", lt_bin(), n), 0);
	lid = atoi(out);
	free(out);
	cr_assert(lid > 0, "node%d has no LID", n);
	return lid;
}

Test(switch, builtin_sm_topology_file)
{
	char path[600], opts[700], *out = NULL;
	FILE *fp;

	lt_need("ibnetdiscover", "infiniband-diags");
	lt_need("rping", "rdmacm-utils");
	/* ibsim's style: names without GUIDs, links given from one side */
	snprintf(path, sizeof(path), "/tmp/uscm-topo-%d", (int)getpid());
	fp = fopen(path, "w");
	cr_assert(fp);
	fputs("Switch 8 \"Switch1\"\n[1] \"Hca1\"[1]\n[2] \"Hca2\"[1]\n[8] \"Switch2\"[8]\n\n"
	      "Switch 8 \"Switch2\"\n[1] \"Hca3\"[1]\n\n"
	      "Hca 1 \"Hca1\"\nHca 1 \"Hca2\"\nHca 1 \"Hca3\"\n",
	      fp);
	fclose(fp);
	snprintf(opts, sizeof(opts), "--no-uscmd --topo %s", path);
	lt_fabric_start_opts("ib", 3, opts);
	unlink(path);
	cr_assert_eq(lt_on_node(1, &out, "ibnetdiscover"), 0, "%s", out);
	expect_topology(out);
	cr_expect(strstr(out, "# \"Switch2\" base port 0"), "%s", out);
	free(out);
	out = NULL;
	/* the built-in SM's LFT of Switch1 (reached by a DR of one hop) */
	cr_assert_eq(lt_on_node(1, &out, "ibroute -D 0,1"), 0, "%s", out);
	cr_expect(strstr(out, "'Hca3'") && strstr(out, "valid lids dumped"), "ibroute:\n%s", out);
	free(out);
	out = NULL;
	cr_assert_eq(lt_on_node(1, &out, "ibtracert %d %d", lid_of(1), lid_of(3)), 0, "%s", out);
	cr_expect(strstr(out, "\"Switch1\"") && strstr(out, "\"Switch2\"") && strstr(out, "To ca"),
		  "ibtracert:\n%s", out);
	free(out);
	lt_rping_pair(1, 3);
}

/* ibnetdiscover's output is a topology file: a fabric built from it is
 * discovered with the same switches, CAs, GUIDs and links */
Test(switch, ibnetdiscover_output_round_trip)
{
	char path[128], *out = NULL;

	lt_need("ibnetdiscover", "infiniband-diags");
	snprintf(path, sizeof(path), "/tmp/uscm-disc-%d", (int)getpid());
	lt_fabric_start_opts("ib", 4, "--no-uscmd --topo chain:2,2");
	cr_assert_eq(lt_on_node(1, &out, "ibnetdiscover >%s.1", path), 0, "%s", out);
	free(out);
	out = NULL;
	lt_fabric_stop();
	{
		char opts[256];

		snprintf(opts, sizeof(opts), "--no-uscmd --topo %s.1", path);
		lt_fabric_start_opts("ib", 4, opts);
	}
	cr_assert_eq(lt_on_node(3, &out, "ibnetdiscover >%s.2", path), 0, "%s", out);
	free(out);
	out = NULL;
	/* the node and link lines without their comments (LIDs differ) */
	cr_expect_eq(lt_sh(&out,
			   "for i in 1 2; do grep -E '^(Switch|Ca|\\[)' %s.$i | sed 's/#.*//; s/[[:space:]]*$//' |"
			   " sort >%s.$i.s; done; diff %s.1.s %s.2.s 2>&1",
			   path, path, path, path),
		     0, "%s", out);
	free(out);
	out = NULL;
	lt_sh(&out, "grep -c '^Switch' %s.2.s", path);
	cr_expect(atoi(out) == 2, "%s", out);
	free(out);
	lt_sh(NULL, "rm -f %s.1 %s.2 %s.1.s %s.2.s", path, path, path, path);
}

Test(switch, opensm_fat_tree)
{
	char *out = NULL;
	int l1, l8;

	lt_need("opensm", "opensm");
	lt_need("ibnetdiscover", "infiniband-diags");
	lt_need("rping", "rdmacm-utils");
	lt_need("cmtime", "rdmacm-utils");
	/* 4 leaves with 2 hosts each, 2 spines: 6 switches, 8 hosts */
	lt_fabric_start_opts("ib", 8, "--no-uscmd --sm opensm --topo fat-tree:4,2,2");
	{
		char log[600];

		snprintf(log, sizeof(log), "%s/opensm/opensm.log", getenv("USCM_SIM_DIR"));
		cr_expect(lt_file_has(log, "SUBNET UP"), "OpenSM's log has no SUBNET UP");
	}
	cr_assert_eq(lt_on_node(5, &out, "ibnetdiscover"), 0, "%s", out);
	expect_topology(out);
	free(out);
	out = NULL;
	/* OpenSM's LFT of leaf1: every CA's LID has a port */
	cr_assert_eq(lt_on_node(1, &out, "ibroute -D 0,1"), 0, "%s", out);
	cr_expect(strstr(out, "'leaf1'") && strstr(out, "'H8'") && strstr(out, "'H3'") &&
		  strstr(out, "14 valid lids dumped"), "ibroute:\n%s", out);
	free(out);
	out = NULL;
	l1 = lid_of(1);
	l8 = lid_of(8);
	/* leaf1 -> a spine -> leaf4 -> H8 */
	cr_assert_eq(lt_on_node(1, &out, "ibtracert %d %d", l1, l8), 0, "%s", out);
	cr_expect(strstr(out, "\"leaf1\"") && strstr(out, "\"spine") && strstr(out, "\"leaf4\"") &&
		  strstr(out, "To ca {0x0002c90300000008}"), "ibtracert:\n%s", out);
	free(out);
	out = NULL;
	/* directed routes of 3 hops (leaf1, spine1, leaf2) and 4 (H3) */
	cr_assert_eq(lt_on_node(1, &out, "smpquery -D nodeinfo 0,1,3,2"), 0, "%s", out);
	cr_expect(strstr(out, "0x0002c90300010002") && strstr(out, "NodeType:........................Switch"),
		  "%s", out);
	free(out);
	out = NULL;
	cr_assert_eq(lt_on_node(1, &out, "smpquery -D nodedesc 0,1,3,2,1"), 0, "%s", out);
	cr_expect(strstr(out, "H3"), "%s", out);
	free(out);
	out = NULL;
	/* OpenSM's SA, asked from a host on another leaf */
	cr_assert_eq(lt_on_node(8, &out, "saquery PR --slid %d --dlid %d", l8, l1), 0, "%s", out);
	{
		char want[64];

		snprintf(want, sizeof(want), "dlid....................%d", l1);
		cr_expect(strstr(out, want), "saquery PR:\n%s", out);
	}
	free(out);
	lt_rping_pair(1, 8);
	/* more of librdmacm's examples across leaf switches: RC connections
	 * with data, UD with address resolution, 1000 connections */
	pair_across("ucmatose", 1, "", 8, "-s 127.10.0.1", 1);
	pair_across("udaddy", 3, "", 6, "-s 127.10.0.3", 1);
	pair_across("cmtime", 2, "-c 1000", 7, "-s 127.10.0.2 -c 1000", 0);
}

/* the spine ("spine1"/"spine2") ibtracert from node a to LID dlid passes */
static int spine_on_path(int a, int dlid, char **trace)
{
	char *out = NULL;
	int spine = 0;

	if (lt_on_node(a, &out, "ibtracert %d %d", lid_of(a), dlid) == 0) {
		if (strstr(out, "\"spine1\""))
			spine = 1;
		else if (strstr(out, "\"spine2\""))
			spine = 2;
	}
	if (trace)
		*trace = out;
	else
		free(out);
	return spine;
}

Test(switch, opensm_reroutes_around_a_link_down)
{
	char *out = NULL;
	int l2, s0, s1 = 0;

	lt_need("opensm", "opensm");
	lt_need("ibtracert", "infiniband-diags");
	lt_need("rping", "rdmacm-utils");
	/* 2 leaves with a host each, 2 spines; OpenSM's sweep interval stays
	 * 10 s: the switches' Trap 128 makes it sweep at once */
	lt_fabric_start_opts("ib", 2, "--no-uscmd --sm opensm --topo fat-tree:2,2,1");
	l2 = lid_of(2);
	s0 = spine_on_path(1, l2, &out);
	cr_assert(s0, "no spine on the path:\n%s", out);
	free(out);
	/* leaf1's port to that spine is 1 + s0 (host on port 1) */
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim link sw1:%d down 2>&1", lt_bin(), 1 + s0), 0, "%s", out);
	free(out);
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim status", lt_bin()), 0);
	cr_expect(strstr(out, s0 == 1 ? "2:DOWN->sw3[1]" : "3:DOWN->sw4[1]"), "%s", out);
	free(out);
	/* the leaf's trap 128 makes OpenSM sweep, see PortStateChange and
	 * route through the other spine: well before its next periodic sweep */
	for (int i = 0; i < 50; i++) {
		s1 = spine_on_path(1, l2, NULL);
		if (s1 && s1 != s0)
			break;
		usleep(100 * 1000);
	}
	cr_expect(s1 && s1 != s0, "still through spine%d (now %d) after 5 s", s0, s1);
	{
		char log[600];

		snprintf(log, sizeof(log), "%s/opensm/opensm.log", getenv("USCM_SIM_DIR"));
		cr_expect(lt_file_has(log, "num:128 (Link state change) Producer:2 (Switch)"),
			  "OpenSM's log shows no trap 128");
	}
	lt_rping_pair(2, 1);
}

/* mckey on fat-tree:4,2,2 (started with OPTS): two receivers on different
 * leaves (node3 on leaf2, node7 on leaf4), the sender on leaf1; the SM
 * programs the MFTs — leaf2's (ibroute -M by a directed route) must list
 * MLID, polled while the SM gets to it — and the switches forward the
 * datagrams by them: both receivers get every one. */
static void mckey_across_leaves(const char *opts, const char *mlid)
{
	char *out = NULL, *sout = NULL, want[16];
	int st, rx[2] = { 3, 7 };

	lt_fabric_start_opts("ib", 8, opts);
	for (int k = 0; k < 2; k++)
		cr_assert_eq(lt_sh(NULL,
				   "(USCM_SIM_NODE=node%d %s timeout 30 stdbuf -o0 mckey -m 224.0.0.7 -b 127.10.0.%d -C 3"
				   " >%s/rx%d.out 2>&1; echo $? >%s/rx%d.rc) >/dev/null 2>&1 &",
				   rx[k], lt_util_env(), rx[k], lt_dir, k, lt_dir, k),
			     0);
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < 100 && lt_sh(NULL, "grep -q 'joined dgid' %s/rx%d.out", lt_dir, k) != 0; i++)
			usleep(100 * 1000);
	snprintf(want, sizeof(want), "\n%s ", mlid);
	for (int i = 0; i < 50; i++) {
		free(out);
		out = NULL;
		cr_assert_eq(lt_on_node(1, &out, "ibroute -M -D 0,1,3,2"), 0, "%s", out);
		if (strstr(out, want))
			break;
		usleep(100 * 1000);
	}
	cr_expect(strstr(out, want), "ibroute -M of leaf2 lacks %s:\n%s", mlid, out);
	free(out);
	out = NULL;
	st = lt_on_node(1, &out, "mckey -m 224.0.0.7 -b 127.10.0.1 -s -C 3");
	cr_expect_eq(st, 0, "mckey -s exited %d:\n%s", st, out);
	free(out);
	for (int k = 0; k < 2; k++) {
		for (int i = 0; i < 100 && lt_sh(NULL, "test -s %s/rx%d.rc", lt_dir, k) != 0; i++)
			usleep(100 * 1000);
		lt_sh(&sout, "cat %s/rx%d.rc %s/rx%d.out", lt_dir, k, lt_dir, k);
		cr_expect(sout[0] == '0' && strstr(sout, "data transfers complete"), "mckey on node%d:\n%s", rx[k],
			  sout);
		free(sout);
		sout = NULL;
	}
}

/* OpenSM's SA creates the group: its MLID 0xC001 (0xC000 is IPoIB's
 * broadcast group). */
Test(switch, opensm_mckey_across_leaves)
{
	lt_need("opensm", "opensm");
	lt_need("mckey", "rdmacm-utils");
	lt_need("ibroute", "infiniband-diags");
	mckey_across_leaves("--no-uscmd --sm opensm --topo fat-tree:4,2,2", "0xc001");
}

/* The same under the built-in SM (no OpenSM needed): its SA's join
 * programs the MFTs along one tree of the switches (simf_mft.c); its first
 * group gets MLID 0xC000. */
Test(switch, builtin_mckey_across_leaves)
{
	lt_need("mckey", "rdmacm-utils");
	lt_need("ibroute", "infiniband-diags");
	mckey_across_leaves("--no-uscmd --topo fat-tree:4,2,2", "0xc000");
}

/* The scale target: 64 hosts and 20 switches (16 leaves with 4
 * hosts each, 4 spines) come up under OpenSM in under 30 s; ibnetdiscover
 * finds all 84 nodes and rping crosses from the first leaf to the last */
Test(switch, opensm_64_hosts_20_switches)
{
	char *out = NULL;
	uint64_t t0;
	int sw = 0, ca = 0;

	lt_need("opensm", "opensm");
	lt_need("ibnetdiscover", "infiniband-diags");
	lt_need("rping", "rdmacm-utils");
	t0 = lt_now_ms();
	lt_fabric_start_opts("ib", 64, "--no-uscmd --sm opensm --topo fat-tree:16,4,4");
	cr_expect_lt(lt_now_ms() - t0, 30000, "up in %llu ms", (unsigned long long)(lt_now_ms() - t0));
	cr_assert_eq(lt_on_node(64, &out, "ibnetdiscover"), 0, "%s", out);
	for (const char *p = out; (p = strchr(p, '\n')); p++) {
		sw += strncmp(p + 1, "Switch\t", 7) == 0;
		ca += strncmp(p + 1, "Ca\t", 3) == 0;
	}
	cr_expect(sw == 20 && ca == 64, "%d switches, %d CAs", sw, ca);
	free(out);
	lt_rping_pair(64, 1);
}
