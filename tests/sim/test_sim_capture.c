/* Captures of real traffic (`uscm-sim start --pcap`) decode cleanly: the
 * unmodified ibv_rc_pingpong (1 B, 4 KiB, 64 KiB, data checked),
 * ibv_ud_pingpong, ibv_srq_pingpong, saquery PathRecord and smpquery
 * (LID-routed and directed route) on IB (ERF InfiniBand records), rc and ud
 * pingpong on RoCE (Ethernet/IPv4/UDP 4791). tshark must report no
 * malformed packet and no expert error or warning; uscm's own uscm-decode
 * (when built) must read every MAD with 0 malformed and 0 bad ICRC, and
 * find as many MADs as tshark. Each test has its own fabric directory,
 * stopped in .fini; the SM also follows the test process. */
#include "simtest.h"

static char *g_dir;

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

TestSuite(capture, .init = setup, .fini = teardown, .timeout = 120);

static void need(const char *tool)
{
	if (!st_tool(tool))
		tf_skip_missing("%s not installed", tool);
}

static void start(const char *link, const char *pcap)
{
	char *out = NULL;
	int rc = st_sh(&out, "'%s/uscm-sim' start --dir '%s' --nodes 2 --link %s --no-uscmd --pcap '%s' 2>&1", st_bin(),
		       g_dir, link, pcap);

	cr_assert_eq(rc, 0, "uscm-sim start: %s", out);
	free(out);
}

static void stop(void)
{
	/* every process that appended to the capture has exited */
	cr_assert_eq(st_sh(NULL, "'%s/uscm-sim' stop --dir '%s' >/dev/null 2>&1", st_bin(), g_dir), 0);
}

static void pingpong(const char *tool, const char *const *extra)
{
	char path[64], *why = NULL;

	snprintf(path, sizeof(path), "/usr/bin/%s", tool);
	cr_assert_eq(st_pingpong(g_dir, path, 10, extra, &why), 0, "%s", why ? why : "");
}

/* The number of lines `tshark -r pcap <args>` prints. */
static long tshark_lines(const char *pcap, const char *args)
{
	char *out = NULL;
	long n;

	/* tshark's InfiniBand dissector offers a payload to heuristic
	 * sub-dissectors; RPC-over-RDMA's claims the 1-byte sends of
	 * ibv_rc_pingpong -s1 and then reports them malformed (an exception
	 * in its own parser). The payload is pingpong's test pattern, not
	 * RPC-over-RDMA, so that heuristic is switched off. */
	cr_assert_eq(st_sh(&out, "tshark -r '%s' --disable-heuristic rpcrdma_infiniband %s 2>/dev/null | wc -l",
			   pcap, args), 0);
	n = strtol(out, NULL, 10);
	free(out);
	return n;
}

static void check_tshark(const char *pcap, long *mads)
{
	long frames, bth;

	if (!st_tool("tshark")) {
		tf_warn_missing("tshark not installed: decode check skipped");
		*mads = -1;
		return;
	}
	frames = tshark_lines(pcap, "");
	cr_assert_gt(frames, 100, "a capture of the runs");
	bth = tshark_lines(pcap, "-Y infiniband.bth");
	cr_expect_eq(bth, frames, "every frame decodes to a BTH: %ld of %ld", bth, frames);
	cr_expect_eq(tshark_lines(pcap, "-Y _ws.malformed"), 0, "malformed frames");
	/* no expert info of any severity (error, warning, note, chat) */
	cr_expect_eq(tshark_lines(pcap, "-Y _ws.expert"), 0, "frames with expert info");
	*mads = tshark_lines(pcap, "-Y infiniband.mad");
}

static void check_uscm_decode(const char *pcap, long tshark_mads)
{
	char dec[600], *out = NULL, *summary;
	long mads = -1;

	snprintf(dec, sizeof(dec), "%s/uscm-decode", st_bin());
	if (access(dec, X_OK) != 0) {
		tf_warn_missing("%s not built: uscm-decode check skipped", dec);
		return;
	}
	cr_assert_eq(st_sh(&out, "'%s' '%s' 2>&1", dec, pcap), 0, "%s", out);
	summary = strstr(out, "uscm-decode: ");
	cr_assert(summary, "%s", out);
	cr_expect(strstr(summary, " 0 malformed, 0 bad ICRC"), "%s", summary);
	cr_expect(!strstr(out, "[malformed"), "%s", out);
	cr_expect(!strstr(out, "[bad ICRC]"), "%s", out);
	{
		const char *m = strstr(summary, " frames, ");

		if (m)
			mads = strtol(m + 9, NULL, 10);
	}
	if (tshark_mads >= 0)
		cr_expect_eq(mads, tshark_mads, "MADs: uscm-decode %ld, tshark %ld", mads, tshark_mads);
	free(out);
}

Test(capture, ib_pingpong_saquery_smpquery)
{
	static const char *const s1[] = { "-c", "-s1", NULL }, *const s4k[] = { "-c", "-s4096", NULL },
			  *const s64k[] = { "-c", "-s65536", NULL }, *const chk[] = { "-c", NULL };
	char pcap[600], *out = NULL;
	long mads;

	need("ibv_rc_pingpong");
	need("saquery");
	need("smpquery");
	snprintf(pcap, sizeof(pcap), "%s/ib.pcap", g_dir);
	start("ib", pcap);
	pingpong("ibv_rc_pingpong", s1);
	pingpong("ibv_rc_pingpong", s4k);
	pingpong("ibv_rc_pingpong", s64k);
	pingpong("ibv_ud_pingpong", NULL);
	pingpong("ibv_srq_pingpong", chk);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node2 -- %s PR --slid 3 --dlid 2 2>&1",
			   st_bin(), g_dir, st_tool("saquery")), 0, "%s", out);
	cr_expect(strstr(out, "PathRecord dump:"), "%s", out);
	free(out);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node1 -- sh -c \"%s nodeinfo 3 && "
				 "%s -D nodedesc 0 && %s portinfo 1\" 2>&1",
			   st_bin(), g_dir, st_tool("smpquery"), st_tool("smpquery"), st_tool("smpquery")),
		     0, "%s", out);
	free(out);
	stop();
	check_tshark(pcap, &mads);
	if (mads >= 0) {
		/* what went by: RC sends and ACKs, UD sends, SA and SMP MADs */
		cr_expect_gt(tshark_lines(pcap, "-Y 'infiniband.bth.opcode == 0x04'"), 0, "RC SEND only");
		cr_expect_gt(tshark_lines(pcap, "-Y 'infiniband.bth.opcode == 0x00'"), 0, "RC SEND first");
		cr_expect_gt(tshark_lines(pcap, "-Y 'infiniband.bth.opcode == 0x11'"), 0, "RC ACK");
		cr_expect_gt(tshark_lines(pcap, "-Y 'infiniband.bth.opcode == 0x64 && !infiniband.mad'"), 0,
			     "UD SEND");
		cr_expect_eq(tshark_lines(pcap, "-Y 'infiniband.mad.mgmtclass == 0x03 && "
					       "infiniband.mad.attributeid == 0x0035'"), 3,
			     "PathRecord GetTable, GetTableResp, RMPP ACK");
		cr_expect_geq(tshark_lines(pcap, "-Y 'infiniband.mad.mgmtclass == 0x01 && "
					       "infiniband.mad.method == 0x81 && infiniband.lrh.slid == 3'"), 1,
			      "node2's SMA answered a LID-routed SMP");
		long dr = tshark_lines(pcap, "-Y 'infiniband.mad.mgmtclass == 0x81'");

		cr_expect_geq(dr, 2, "directed-route SMPs and their answers");
		cr_expect_eq(tshark_lines(pcap, "-Y 'infiniband.mad.mgmtclass == 0x81 && "
					       "infiniband.lrh.dlid == 0xffff && infiniband.lrh.slid == 0xffff'"), dr,
			     "directed-route SMPs travel with the permissive LID");
	}
	check_uscm_decode(pcap, mads);
}

Test(capture, roce_pingpong)
{
	static const char *const chk[] = { "-c", "-s4096", NULL };
	char pcap[600];
	long mads;

	need("ibv_rc_pingpong");
	snprintf(pcap, sizeof(pcap), "%s/roce.pcap", g_dir);
	start("roce", pcap);
	pingpong("ibv_rc_pingpong", chk);
	pingpong("ibv_ud_pingpong", NULL);
	stop();
	check_tshark(pcap, &mads);
	if (mads >= 0) {
		cr_expect_eq(tshark_lines(pcap, "-Y 'udp.dstport == 4791'"), tshark_lines(pcap, ""),
			     "every frame is RoCEv2");
		cr_expect_eq(mads, 0, "no MADs on RoCE here");
	}
	check_uscm_decode(pcap, mads);
}
