/*
 * Debian's unmodified opensm as the fabric's SM and SA (first
 * slice): `uscm-sim start --sm opensm` runs it on node1's port over the
 * umad drop-in, on the switchless two-node fabric (node1 and node2 linked
 * back to back). The ports come up Active with the LIDs OpenSM assigned
 * (ibstat, smpquery LID-routed and by a directed route of one hop), OpenSM's
 * SA answers saquery (a PathRecord, and the NodeRecord table, which takes
 * two RMPP segments), and an unmodified rping over uscm's librdmacm
 * connects with the PathRecord OpenSM's SA answered (the capture shows the
 * GetResp coming from node1's LID, where only opensm has a umad port, and
 * the built-in SA answered nothing); mckey joins through OpenSM's SA and
 * its datagrams arrive; the SMA's PortInfo SubnSet follows IBTA's port
 * state transitions. Skipped when opensm, infiniband-diags or
 * rdmacm-utils is missing.
 */
#include "libtest.h"

#include <infiniband/umad.h>

static char pcap[128];

static void teardown(void)
{
	lt_fabric_stop();
	if (pcap[0])
		unlink(pcap);
	pcap[0] = 0;
}

TestSuite(opensm, .fini = teardown, .timeout = 90);

static void start_opensm_fabric(void)
{
	char opts[256];

	lt_need("opensm", "opensm");
	snprintf(pcap, sizeof(pcap), "/tmp/uscm-opensm-%d.pcap", (int)getpid());
	snprintf(opts, sizeof(opts), "--no-uscmd --sm opensm --pcap %s", pcap);
	lt_fabric_start_opts("ib", 2, opts);
}

Test(opensm, subnet_up_smps_and_sa)
{
	char *out = NULL;

	lt_need("ibstat", "infiniband-diags");
	lt_need("saquery", "infiniband-diags");
	start_opensm_fabric();
	/* OpenSM swept, assigned LIDs (its port first) and brought both
	 * ports Active: uscm-sim start waited for that */
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim status", lt_bin()), 0);
	cr_expect(strstr(out, "SM and SA: opensm on node1") && strstr(out, "(running)"), "%s", out);
	free(out);
	out = NULL;
	{
		char log[600];

		snprintf(log, sizeof(log), "%s/opensm/opensm.log", getenv("USCM_SIM_DIR"));
		cr_expect(lt_file_has(log, "SUBNET UP"), "OpenSM's log has no SUBNET UP");
	}
	cr_assert_eq(lt_on_node(2, &out, "ibstat"), 0, "%s", out);
	cr_expect(strstr(out, "State: Active") && strstr(out, "Base lid: 2") && strstr(out, "SM lid: 1"),
		  "ibstat on node2:\n%s", out);
	free(out);
	out = NULL;
	/* node2's SMA, LID-routed from node1: the LID and state OpenSM set */
	cr_assert_eq(lt_on_node(1, &out, "smpquery portinfo 2 1"), 0, "%s", out);
	cr_expect(strstr(out, "Lid:.............................2") &&
		  strstr(out, "SMLid:...........................1") &&
		  strstr(out, "LinkState:.......................Active"),
		  "smpquery portinfo 2 1:\n%s", out);
	free(out);
	out = NULL;
	/* a directed route of one hop from node2 reaches node1's SMA */
	cr_assert_eq(lt_on_node(2, &out, "smpquery -D nodeinfo 0,1"), 0, "%s", out);
	cr_expect(strstr(out, "0x0002c90300000001"), "smpquery -D nodeinfo 0,1:\n%s", out);
	free(out);
	out = NULL;
	/* a hop more leaves node1 through no port: lost, timed out */
	cr_expect_neq(lt_on_node(2, &out, "smpquery -t 200 -D nodeinfo 0,1,1"), 0, "%s", out);
	free(out);
	out = NULL;
	/* OpenSM's SA: a PathRecord, and every NodeRecord (RMPP, 2 segments) */
	cr_assert_eq(lt_on_node(2, &out, "saquery PR --slid 2 --dlid 1"), 0, "%s", out);
	cr_expect(strstr(out, "dlid....................1") && strstr(out, "slid....................2"),
		  "saquery PR:\n%s", out);
	free(out);
	out = NULL;
	cr_assert_eq(lt_on_node(2, &out, "saquery"), 0, "%s", out);
	cr_expect(strstr(out, "uscm-sim node1") && strstr(out, "uscm-sim node2"), "saquery:\n%s", out);
	free(out);
}

Test(opensm, rping_over_opensm_pathrecord)
{
	char *out = NULL;

	lt_need("rping", "rdmacm-utils");
	start_opensm_fabric();
	/* server on node1 (OpenSM's host), client on node2: the client's
	 * PathRecord query crosses the fabric to the SM LID its port reports */
	lt_rping_pair(1, 2);
	/* the built-in SA answered nothing: uscm-sim-sm is only the SMA */
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim status", lt_bin()), 0);
	cr_expect(strstr(out, "SA queries 0;"), "%s", out);
	free(out);
	out = NULL;
	/* the PathRecord answer came from LID 1 (node1: opensm's port) */
	if (lt_sh(NULL, "command -v tshark >/dev/null") != 0) {
		tf_warn_missing("tshark is not installed: the capture is not decoded");
		return;
	}
	cr_assert_eq(lt_sh(&out, "tshark -r %s -Y 'infiniband.mad.mgmtclass == 0x03' 2>/dev/null", pcap), 0);
	cr_expect(strstr(out, "LID: 2 → LID: 1") && strstr(out, "SubnAdmGet(PathRecord)"), "capture:\n%s", out);
	cr_expect(strstr(out, "LID: 1 → LID: 2") && strstr(out, "SubnAdmGetResp(PathRecord)"), "capture:\n%s",
		  out);
	free(out);
}

/* One directed-route SMP (hop count 0: this node's own SMA) of method
 * `method` on PortInfo port 1, data in/out pi (64 bytes): the MAD status
 * without the D bit, or -1 when nothing came back. */
static int dr_portinfo(int fd, int agent, uint8_t method, uint8_t *pi)
{
	static uint32_t tid = 1;
	uint8_t buf[sizeof(struct ib_user_mad) + 256];
	uint8_t *mad = buf + sizeof(struct ib_user_mad);
	int len = 256;

	memset(buf, 0, sizeof(buf));
	mad[0] = 1;                 /* BaseVersion */
	mad[1] = 0x81;              /* SubnMgmt, directed route */
	mad[2] = 1;                 /* ClassVersion */
	mad[3] = method;
	mad[7] = 0;                 /* hop count 0 */
	mad[15] = (uint8_t)tid++;   /* TID */
	mad[16] = 0x00; mad[17] = 0x15; /* PortInfo */
	mad[23] = 1;                /* port 1 */
	mad[32] = mad[33] = mad[34] = mad[35] = 0xFF; /* DrSLID, DrDLID permissive */
	memcpy(mad + 64, pi, 64);
	umad_set_addr(buf, 0xFFFF, 0, 0, 0);
	if (umad_send(fd, agent, buf, 256, 1000, 0) < 0)
		return -1;
	if (umad_recv(fd, buf, &len, 3000) < 0 || umad_status(buf) != 0)
		return -1;
	memcpy(pi, mad + 64, 64);
	return ((mad[4] << 8) | mad[5]) & 0x7FFF;
}

static int node2_state(void)
{
	char *out = NULL;
	int st = -1;

	lt_sh(&out, "%s/uscm-sim status | awk '$2 == \"node2\" {print $5}'", lt_bin());
	if (strstr(out, "ACTIVE"))
		st = 4;
	else if (strstr(out, "ARMED"))
		st = 3;
	else if (strstr(out, "INIT"))
		st = 2;
	free(out);
	return st;
}

/* The SMA's PortInfo SubnSet follows IBTA Vol1 14.2.5: Down retrains the
 * link (back in Init, LID kept), Init -> Armed -> Active, and an invalid
 * transition (Active -> Armed, Init -> Active, Init asked for) is refused
 * with status 0x001C and changes nothing. OpenSM runs with -s 0 (no
 * sweeps after the first), so it does not bring the port back meanwhile. */
Test(opensm, portinfo_set_state_transitions)
{
	uint8_t pi[64], cur[64];
	int fd, agent;

	setenv("USCM_SIM_OPENSM_ARGS", "-s 0", 1);
	start_opensm_fabric();
	lt_node(2);
	fd = umad_open_port(NULL, 0);
	cr_assert_geq(fd, 0, "umad_open_port");
	agent = umad_register(fd, 0x81, 1, 0, NULL);
	cr_assert_geq(agent, 0, "umad_register");
	memset(cur, 0, sizeof(cur));
	cr_assert_eq(dr_portinfo(fd, agent, 0x01, cur), 0, "SubnGet(PortInfo)");
	cr_assert_eq(cur[32] & 0xF, 4, "node2 is Active under OpenSM");
	cr_assert_eq(cur[16] << 8 | cur[17], 2, "LID 2");
#define SET_STATE(s, want_status)                                                   \
	do {                                                                        \
		memcpy(pi, cur, 64);                                                \
		pi[32] = (uint8_t)((pi[32] & 0xF0) | (s));                          \
		pi[33] = 0;  /* PhysState: no change */                             \
		cr_assert_eq(dr_portinfo(fd, agent, 0x02, pi), (want_status),       \
			     "SubnSet(PortInfo) state %d", (s));                    \
	} while (0)
	SET_STATE(3, 0x001C);            /* Active -> Armed: invalid */
	cr_expect_eq(node2_state(), 4);
	SET_STATE(1, 0);                 /* Down: the link retrains, Init */
	cr_expect_eq(pi[32] & 0xF, 2, "answered state %d", pi[32] & 0xF);
	cr_expect_eq(pi[16] << 8 | pi[17], 2, "the LID stays");
	cr_expect_eq(node2_state(), 2);
	SET_STATE(4, 0x001C);            /* Init -> Active: invalid */
	SET_STATE(2, 0x001C);            /* Init cannot be asked for */
	cr_expect_eq(node2_state(), 2);
	SET_STATE(3, 0);                 /* Init -> Armed */
	cr_expect_eq(pi[32] & 0xF, 3);
	cr_expect_eq(node2_state(), 3);
	SET_STATE(4, 0);                 /* Armed -> Active */
	cr_expect_eq(pi[32] & 0xF, 4);
	cr_expect_eq(node2_state(), 4);
#undef SET_STATE
	umad_close_port(fd);
}

/* mckey: both joins are MCMemberRecord Sets OpenSM's SA answers (it picks
 * the MLID: 0xC000 is its IPoIB broadcast group, this one gets 0xC001);
 * the sender's datagrams reach the receiver over the back-to-back link. */
Test(opensm, mckey_over_opensm_mcmemberrecord)
{
	char *out = NULL, *sout = NULL;
	int st;

	lt_need("mckey", "rdmacm-utils");
	start_opensm_fabric();
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node1 %s timeout 30 stdbuf -o0 mckey -m 224.0.0.7 -b 127.10.0.1 -C 3"
			   " >%s/server.out 2>&1; echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   lt_util_env(), lt_dir, lt_dir),
		     0);
	for (int i = 0; i < 100 && lt_sh(NULL, "grep -q 'joined dgid' %s/server.out", lt_dir) != 0; i++)
		usleep(100 * 1000);
	st = lt_on_node(2, &out, "mckey -m 224.0.0.7 -b 127.10.0.2 -s -C 3");
	cr_expect_eq(st, 0, "mckey -s exited %d:\n%s", st, out);
	cr_expect(strstr(out, "mlid 0xc001"), "the sender's join:\n%s", out);
	free(out);
	out = NULL;
	for (int i = 0; i < 100 && lt_sh(NULL, "test -s %s/server.rc", lt_dir) != 0; i++)
		usleep(100 * 1000);
	lt_sh(&sout, "cat %s/server.rc %s/server.out", lt_dir, lt_dir);
	cr_expect(sout[0] == '0' && strstr(sout, "mlid 0xc001"), "mckey (receiver):\n%s", sout);
	free(sout);
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim status", lt_bin()), 0);
	cr_expect(strstr(out, "SA queries 0;"), "%s", out);
	free(out);
}
