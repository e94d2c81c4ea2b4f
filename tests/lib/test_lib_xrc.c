/*
 * XRC through uscm's librdmacm (issue 14): Debian's unmodified
 * rdma_xserver / rdma_xclient (rdmacm-utils) in XRC mode (-c x) on the
 * simulated fabric, IB and RoCE, server on node 1, client on node 2. The
 * server's library makes an XRC target QP in the device's XRC domain and,
 * at rdma_create_srq, an XRC SRQ on a receive CQ; the client's an XRC
 * initiator QP; the REQ says XRC (transport 3, extended 1), the REP names
 * the target QP in its Local EECN and carries the SRQ number as private
 * data; the client's inline SEND names that SRQ (XRCETH) and the server
 * gets it from rdma_get_recv_comp. Both must print "end 0" and exit 0.
 * RC mode (-c r) is checked too. CTest runs this once more in daemon mode
 * (USCM_TEST_DAEMON=1). Skipped when rdmacm-utils is missing.
 */
#include "libtest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(xrc, .fini = teardown, .timeout = 120);

/* Runs `rdma_xserver <mode>` on node1 in the background and the client on
 * node2 until it gets past "not listening yet"; checks both. capture
 * (or NULL): the fabric records its MADs into that pcap. */
static void xpair(const char *link, const char *mode, const char *capture)
{
	char *out = NULL, *sout = NULL, *rc = NULL, opts[600];
	const char *d = getenv("USCM_TEST_DAEMON");
	int st = -1;

	if (lt_sh(NULL, "command -v rdma_xserver >/dev/null && command -v rdma_xclient >/dev/null"))
		tf_skip_missing("rdma_xserver / rdma_xclient (Debian rdmacm-utils) are not installed");
	/* lt_fabric_start with a capture: the pcap goes next to the fabric */
	snprintf(opts, sizeof(opts), "%s%s%s", d && atoi(d) ? "" : "--no-uscmd ",
		 capture ? "--pcap " : "", capture ? capture : "");
	lt_fabric_start_opts(link, 2, opts);
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node1 %s timeout 60 rdma_xserver -c %s >%s/server.out 2>&1;"
			   " echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   lt_util_env(), mode, lt_dir, lt_dir),
		     0);
	for (int i = 0; i < 50; i++) {
		free(out);
		st = lt_sh(&out, "USCM_SIM_NODE=node2 %s timeout 60 rdma_xclient -c %s -s 127.10.0.1 2>&1",
			   lt_util_env(), mode);
		/* REJECTED / "Connection refused": the server is not listening yet */
		if (st == 0 || strstr(out, "end 0") ||
		    (!strstr(out, "REJECTED") && !strstr(out, "Connection refused") &&
		     !strstr(out, "rdma_connect")))
			break;
		usleep(100 * 1000);
	}
	cr_expect_eq(st, 0, "rdma_xclient -c %s exited %d:\n%s", mode, st, out);
	cr_expect(strstr(out, "rdma_xclient: end 0"), "%s", out);
	for (int i = 0; i < 100; i++) {
		free(rc);
		rc = NULL;
		if (lt_sh(&rc, "cat %s/server.rc 2>/dev/null", lt_dir) == 0 && rc[0])
			break;
		usleep(100 * 1000);
	}
	lt_sh(&sout, "cat %s/server.out", lt_dir);
	cr_expect(rc && rc[0] == '0', "rdma_xserver -c %s exited %s:\n%s", mode, rc ? rc : "?", sout);
	cr_expect(sout && strstr(sout, "rdma_xserver: end 0"), "%s", sout ? sout : "");
	free(out);
	free(sout);
	free(rc);
}

Test(xrc, xserver_xclient_xrc_ib)
{
	xpair("ib", "x", NULL);
}

Test(xrc, xserver_xclient_xrc_roce)
{
	xpair("roce", "x", NULL);
}

Test(xrc, xserver_xclient_rc_ib)
{
	xpair("ib", "r", NULL);
}

/* The wire: uscm-decode shows the REQ as XRC (transport 3, extended 1) and
 * the REP's target QPN in its Local EECN (Local QPN 0), and the verbose
 * decode the fields the kernel leaves zero for an XRC initiator. */
Test(xrc, capture_decodes_as_xrc)
{
	char pcap[128], *out = NULL;

	snprintf(pcap, sizeof(pcap), "/tmp/uscm-xrc-%d.pcap", (int)getpid());
	xpair("roce", "x", pcap);
	lt_fabric_stop(); /* the capture is complete */
	cr_assert_eq(lt_sh(&out, "%s/uscm-decode %s", lt_bin(), pcap), 0, "%s", out);
	cr_expect(strstr(out, "REQ(0x0010)") && strstr(out, " type XRC"), "%s", out);
	cr_expect(strstr(out, "REP(0x0013)") && strstr(out, "qpn 0x000000") && strstr(out, " eecn 0x"),
		  "%s", out);
	free(out);
	out = NULL;
	cr_assert_eq(lt_sh(&out, "%s/uscm-decode -v %s", lt_bin(), pcap), 0, "%s", out);
	cr_expect(strstr(out, "transport_service_type: 3"), "%s", out);
	cr_expect(strstr(out, "extended_transport_type: 1"), "%s", out);
	cr_expect(strstr(out, "responder_resources: 0"), "%s", out);
	free(out);
	unlink(pcap);
}
