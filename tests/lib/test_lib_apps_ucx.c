/*
 * UCX 1.13 (Debian ucx-utils / libucx-dev, unmodified) over uscm's
 * librdmacm and the verbs drop-in, on a fabric started with --netns and
 * --dev-infiniband (UCX uses a device only when /dev/infiniband/uverbs0
 * exists; docs/sim.md): `ucx_info -d` shows the node's device with
 * rc_verbs and ud_verbs; ucx_perftest tag_lat and tag_bw with
 * UCX_TLS=rc_verbs,ud_verbs,self from node 2 to node 1; libucx-dev's
 * ucp_client_server example (compiled here, unmodified) connecting through
 * UCX's rdmacm connection manager (a sockaddr: 127.10.0.1:13337), which
 * creates its QPs on id->pd. Each on IB and on RoCE (--link roce: UCX
 * takes the GID type and netdev from the /sys/class/infiniband tree `run`
 * writes, and its UD transport checks each datagram's destination IP in
 * the GRH area by wc.sl, the RoCE packet type). In-process mode, and daemon
 * mode as test_lib_apps_ucx_daemon. Skipped when UCX is missing.
 */
#include "apptest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(ucx, .fini = teardown, .timeout = 120);

#define TLS "env UCX_TLS=rc_verbs,ud_verbs,self"

static void need_ucx(void)
{
	if (lt_sh(NULL, "command -v ucx_info >/dev/null && command -v ucx_perftest >/dev/null") != 0)
		tf_skip_missing("ucx_info / ucx_perftest (Debian ucx-utils) are not installed");
}

static void start(const char *link)
{
	char opts[96];
	const char *d = getenv("USCM_TEST_DAEMON");

	need_ucx();
	if (geteuid() != 0 || lt_sh(NULL, "unshare -n -m true >/dev/null 2>&1") != 0)
		cr_skip_test("--netns / --dev-infiniband need root (network and mount namespaces)");
	if (lt_sh(NULL, "command -v ip >/dev/null") != 0)
		tf_skip_missing("ip (Debian iproute2) is not installed: uscm-sim --netns needs it");
	snprintf(opts, sizeof(opts), "%s --netns --dev-infiniband",
		 d && atoi(d) ? "" : "--no-uscmd");
	lt_fabric_start_opts(link, 2, opts);
}

static void ucx_info(const char *link)
{
	char *out = NULL;
	int rc;

	start(link);
	rc = app_client(1, 30, "ucx_info -d", &out);
	cr_assert_eq(rc, 0, "ucx_info -d exited %d:\n%s", rc, out);
	cr_expect(strstr(out, "# Memory domain: uscm_node1"), "%s", out);
	cr_expect(strstr(out, "Transport: rc_verbs"), "%s", out);
	cr_expect(strstr(out, "Transport: ud_verbs"), "%s", out);
	cr_expect(strstr(out, "Device: uscm_node1:1"), "%s", out);
	cr_expect(strstr(out, "Connection manager: rdmacm"), "%s", out);
	free(out);
}

Test(ucx, ucx_info_shows_verbs_transports)
{
	ucx_info("ib");
}

Test(ucx, ucx_info_shows_verbs_transports_roce)
{
	ucx_info("roce");
}

/* RoCE: the sysfs tree of run's mount namespace says what the drop-in's
 * GID table says (ibv_devinfo -v: type by ibv_query_gid_ex), and UCX picks
 * GID 0 as RoCE v2 on uscm1 (its debug log). */
Test(ucx, roce_sysfs_gid_attrs_match_verbs)
{
	char *out = NULL;
	int rc;

	start("roce");
	rc = app_client(1, 30,
			"sh -c 'd=/sys/class/infiniband/uscm_node1/ports/1;"
			" echo \"type=$(cat $d/gid_attrs/types/0) ndev=$(cat $d/gid_attrs/ndevs/0)"
			" gid=$(cat $d/gids/0) ll=$(cat $d/link_layer) state=$(cat $d/state)\";"
			" test ! -e $d/gid_attrs/types/1 && echo no-type-1; ibv_devinfo -v'",
			&out);
	cr_assert_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "type=RoCE v2 ndev=uscm1 gid=0000:0000:0000:0000:0000:ffff:7f0a:0001"
			      " ll=Ethernet state=4: ACTIVE"), "%s", out);
	cr_expect(strstr(out, "no-type-1"), "%s", out);
	cr_expect(strstr(out, "GID[  0]:\t\t::ffff:127.10.0.1, RoCE v2"), "%s", out);
	free(out);
	out = NULL;
	rc = app_client(1, 30, "env UCX_LOG_LEVEL=debug ucx_info -d", &out);
	cr_assert_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "uscm_node1:1 using gid_index 0"), "%s", out);
	cr_expect(strstr(out, "RoCE LAG level on uscm_node1:1 (uscm1) is 1"), "%s", out);
	free(out);
}

/* RoCE: every entry of the drop-in's GID table (ibv_query_gid_table and
 * ibv_query_gid_ex through pyverbs: GID, type, netdev) is what the sysfs
 * tree says, unused entries zero and without type or netdev; with the
 * node's IPv4 GID alone, then with two IPv6 addresses on uscm1 (GIDs 1, 2;
 * the tree of the next `run` has them). tests/lib/gid_sysfs.py. */
Test(ucx, roce_gid_table_matches_sysfs)
{
	char cmd[1200], *out = NULL;
	int rc;

	if (lt_sh(NULL, "env -u LD_LIBRARY_PATH -u LD_PRELOAD /usr/bin/python3 -c 'import pyverbs.device'"
			" >/dev/null 2>&1") != 0)
		tf_skip_missing("pyverbs (Debian python3-pyverbs) is not installed");
	start("roce");
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/lib/gid_sysfs.py uscm_node1", app_srcdir());
	rc = app_client(1, 30, cmd, &out);
	cr_assert_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "0 0000:0000:0000:0000:0000:ffff:7f0a:0001 RoCE v2 uscm1\nOK"), "%s", out);
	free(out);
	out = NULL;
	rc = app_client(1, 30,
			"sh -c 'sysctl -qw net.ipv6.conf.uscm1.disable_ipv6=0 &&"
			" ip -6 addr add fd00::1/64 dev uscm1 nodad &&"
			" ip -6 addr add fd00::11/64 dev uscm1 nodad'", &out);
	cr_assert_eq(rc, 0, "%s", out);
	free(out);
	out = NULL;
	rc = app_client(1, 30, cmd, &out);
	cr_assert_eq(rc, 0, "%s", out);
	cr_expect(strstr(out, "1 fd00:0000:0000:0000:0000:0000:0000:00") &&
		  strstr(out, "2 fd00:0000:0000:0000:0000:0000:0000:00") && strstr(out, "\nOK"),
		  "%s", out);
	free(out);
}

/* ucx_perftest server on node 1 (TCP port 13337 for its setup), client
 * on node 2.
 *
 * Rarely (about 1 run in 30 under parallel load; once in a CI pass) the
 * client aborted AFTER its "Final:" line, in its QP teardown: UCX's
 * assertion `wait_ctx->cb_id == (-1)' — its LAST_WQE_REACHED wait for a
 * QP scheduled twice. Cause found: the sim's ibv_destroy_qp left the QP's
 * unread async events queued, so a later read named freed memory, which
 * malloc had given to a new QP: UCX took it for the new QP's event. The
 * sim now drops them and waits for the acknowledgement of those handed
 * out, as libibverbs and uverbs do (sim/verbs/sv_qp.c ibv_destroy_qp).
 * Until that has run in CI for a while, that one failure, and only it, is
 * retried once with a warning; any other failure, or the same one twice,
 * fails the test. */
static int perftest_once(const char *args, int last)
{
	char cmd[512], *out = NULL, *sout;
	int rc, known;

	snprintf(cmd, sizeof(cmd), TLS " ucx_perftest %s", args);
	app_server(1, 60, cmd);
	if (!app_tcp_listens(13337, 20000)) {
		sout = app_server_out();
		cr_assert_fail("ucx_perftest's server did not listen:\n%s", sout);
	}
	snprintf(cmd, sizeof(cmd), TLS " ucx_perftest 127.10.0.1 %s", args);
	rc = app_client(2, 60, cmd, &out);
	known = rc == 134 && strstr(out, "Final:") &&
		strstr(out, "Assertion `wait_ctx->cb_id == (-1)' failed");
	if (known && !last) {
		tf_warn("ucx_perftest %s aborted in its QP teardown (UCX's async-event "
			    "assertion, see perftest_once): once more", args);
		free(out);
		(void)app_server_rc(20000);
		free(app_server_out());
		return 0;
	}
	cr_expect_eq(rc, 0, "the ucx_perftest client exited %d:\n%s", rc, out);
	cr_expect(strstr(out, "Final:"), "no result:\n%s", out);
	rc = app_server_rc(20000);
	sout = app_server_out();
	cr_expect_eq(rc, 0, "the ucx_perftest server exited %d:\n%s", rc, sout);
	free(out);
	free(sout);
	return 1;
}

static void perftest(const char *link, const char *args)
{
	start(link);
	if (!perftest_once(args, 0))
		perftest_once(args, 1);
}

Test(ucx, perftest_tag_lat)
{
	perftest("ib", "-t tag_lat -n 1000");
}

Test(ucx, perftest_tag_bw)
{
	perftest("ib", "-t tag_bw -n 200 -s 65536");
}

Test(ucx, perftest_tag_lat_roce)
{
	perftest("roce", "-t tag_lat -n 1000");
}

Test(ucx, perftest_tag_bw_roce)
{
	perftest("roce", "-t tag_bw -n 200 -s 65536");
}

/* libucx-dev's ucp_client_server: the server (it serves forever) on
 * node 1, the client on node 2 with -a 127.10.0.1; tag API. */
static void client_server(const char *link)
{
	const char *ex = "/usr/share/doc/libucx-dev/examples";
	char cmd[1024], *out = NULL, *sout;
	int rc;

	need_ucx();
	if (lt_sh(NULL, "test -f %s/ucp_client_server.c && command -v gcc >/dev/null", ex) != 0)
		tf_skip_missing("libucx-dev's examples (ucp_client_server.c) or gcc are not installed");
	start(link);
	rc = lt_sh(&out, "gcc -O1 -o %s/ucp_cs %s/ucp_client_server.c -I%s -lucp -lucs 2>&1", lt_dir,
		   ex, ex);
	cr_assert_eq(rc, 0, "cannot build ucp_client_server:\n%s", out);
	free(out);
	out = NULL;
	/* its stdout line-buffered as stdbuf -oL does (_STDBUF_O + libstdbuf),
	 * with libstdbuf after whatever is preloaded (ASan's runtime first) */
	snprintf(cmd, sizeof(cmd),
		 "sh -c 'LD_PRELOAD=\"${LD_PRELOAD:+$LD_PRELOAD }/usr/libexec/coreutils/libstdbuf.so\""
		 " _STDBUF_O=L UCX_TLS=rc_verbs,ud_verbs,self exec %s/ucp_cs -c tag'",
		 lt_dir);
	app_server(1, 60, cmd);
	if (!app_server_says("server is listening", 20000)) {
		sout = app_server_out();
		cr_assert_fail("ucp_client_server did not listen:\n%s", sout);
	}
	snprintf(cmd, sizeof(cmd), TLS " %s/ucp_cs -c tag -a 127.10.0.1", lt_dir);
	rc = app_client(2, 60, cmd, &out);
	cr_expect_eq(rc, 0, "the client exited %d:\n%s", rc, out);
	cr_expect(strstr(out, "ABCDEFGHIJKLMNO"), "%s", out);
	cr_expect(app_server_says("UCP TEST SUCCESS", 10000), "the server got no message");
	sout = app_server_out();
	cr_expect(strstr(sout, "Server received a connection request from client at address 127.10.0.2"),
		  "%s", sout);
	free(out);
	free(sout);
}

Test(ucx, ucp_client_server_through_rdmacm)
{
	client_server("ib");
}

Test(ucx, ucp_client_server_through_rdmacm_roce)
{
	client_server("roce");
}
