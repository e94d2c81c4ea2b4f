/*
 * Unmodified Debian rdmacm-utils binaries on the simulated fabric with
 * LD_LIBRARY_PATH=build/lib:build/sim/lib, server on node 2, client on
 * node 1: rping (`rping -s` / `rping -c -a 127.10.0.2 -C n -v`; with data
 * validation and larger buffers, the self-created QP path -q that uses
 * rdma_init_qp_attr + rdma_establish, and RoCE), ucmatose with several
 * connections, rdma_server / rdma_client (synchronous endpoints),
 * rdma_xserver / rdma_xclient (RC), cmtime -c 100 (each of these on IB
 * and RoCE), udaddy (UD over SIDR; several connections, the IPoIB port
 * space, RoCE) and mckey (multicast: receiver on node 2, sender on node 1;
 * send-only join, the IPoIB port space, RoCE). Each pair must exit 0
 * (cmtime's server never exits: it is stopped once the client is done).
 * Skipped when rdmacm-utils is missing.
 */
#include "libtest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(rping, .fini = teardown, .timeout = 120);
TestSuite(utils, .fini = teardown, .timeout = 120);

static int count_lines(const char *s, const char *what)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* Runs `server` on node 2 in the background and `client` on node 1 (again
 * while the server is not listening yet: the connect is rejected), and
 * checks both exit 0. Returns the client's output (malloc'd). */
static char *pair_when(const char *link, const char *bin, const char *server,
		       const char *client, int server_exits, const char *ready);

static char *pair(const char *link, const char *bin, const char *server, const char *client,
		  int server_exits)
{
	return pair_when(link, bin, server, client, server_exits, NULL);
}

/* Starts `server` on node2 in the background: the pid (of `timeout`,
 * which passes SIGTERM on) and, once it is done, its exit status go to
 * files (a new start forgets the old ones). */
static void start_server(const char *server)
{
	cr_assert_eq(lt_sh(NULL,
			   "rm -f %s/server.pid %s/server.rc; "
			   "(USCM_SIM_NODE=node2 %s timeout 60 %s >%s/server.out 2>&1 &"
			   " echo $! >%s/server.pid; wait $!; echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   lt_dir, lt_dir, lt_util_env(), server, lt_dir, lt_dir, lt_dir),
		     0);
}

/* As pair(), starting the client only once the shell command `ready`
 * (given the fabric directory as $D) succeeds. */
static char *pair_when(const char *link, const char *bin, const char *server,
		       const char *client, int server_exits, const char *ready)
{
	char *out = NULL, *sout = NULL, *rc = NULL;
	int st = -1;

	if (lt_sh(NULL, "command -v %s >/dev/null", bin) != 0)
		tf_skip_missing("%s (Debian rdmacm-utils) is not installed", bin);
	lt_fabric_start(link, 2);
	start_server(server);
	for (int i = 0; ready && i < 100; i++) {
		if (lt_sh(NULL, "D='%s'; %s", getenv("USCM_SIM_DIR"), ready) == 0)
			break;
		usleep(100 * 1000);
	}
	for (int i = 0; i < 50; i++) {
		free(out);
		st = lt_sh(&out, "USCM_SIM_NODE=node1 %s timeout 60 %s 2>&1", lt_util_env(), client);
		/* REJECTED (RC) / UNREACHABLE (UD) / "Connection refused"
		 * (rdma_client): not listening yet — through uscmd the
		 * server's node answers at once, before its program listens. */
		if (st == 0 ||
		    (!strstr(out, "REJECTED") && !strstr(out, "UNREACHABLE") &&
		     !strstr(out, "Connection refused")) ||
		    strstr(out, "end 0"))
			break;
		/* A client of several connections whose first REQ came before
		 * the listen and a later one after it gave up on the REJECTED
		 * one and rejected the accepted one's REP on its way out: the
		 * server saw REJECTED and exited. Start it again for the retry. */
		if (lt_sh(NULL, "test -s %s/server.rc", lt_dir) == 0)
			start_server(server);
		usleep(100 * 1000);
	}
	cr_expect_eq(st, 0, "%s exited %d:\n%s", client, st, out);
	if (!server_exits) {
		for (int i = 0; i < 50 && lt_sh(NULL, "test -s %s/server.pid", lt_dir); i++)
			usleep(100 * 1000);
		lt_sh(NULL, "kill -TERM $(cat %s/server.pid) >/dev/null 2>&1; true", lt_dir);
	}
	for (int i = 0; i < 100; i++) {
		free(rc);
		rc = NULL;
		if (lt_sh(&rc, "cat %s/server.rc 2>/dev/null", lt_dir) == 0 && rc[0])
			break;
		usleep(100 * 1000);
	}
	lt_sh(&sout, "cat %s/server.out", lt_dir);
	if (server_exits)
		cr_expect(rc && rc[0] == '0', "%s exited %s:\n%s", server, rc ? rc : "?", sout);
	else
		cr_expect(rc && rc[0], "%s did not stop:\n%s", server, sout);
	free(sout);
	free(rc);
	return out;
}

static void rping_pair(const char *link, const char *opts, int count)
{
	char server[256], client[256], *out;

	snprintf(server, sizeof(server), "rping -s %s -C %d", opts, count);
	snprintf(client, sizeof(client), "rping -c -a 127.10.0.2 -v %s -C %d", opts, count);
	out = pair(link, "rping", server, client, 1);
	cr_expect_eq(count_lines(out, "ping data: rdma-ping-"), count, "client output:\n%s", out);
	free(out);
}

Test(rping, ib)
{
	rping_pair("ib", "", 3);
}

Test(rping, ib_validate_100_pings_4k)
{
	rping_pair("ib", "-V -S 4096", 100);
}

Test(rping, ib_self_created_qp)
{
	rping_pair("ib", "-q -V", 10);
}

Test(rping, roce)
{
	rping_pair("roce", "-V", 10);
}

Test(utils, ucmatose_4_connections)
{
	char *out = pair("ib", "ucmatose", "ucmatose -c 4", "ucmatose -s 127.10.0.2 -c 4", 1);

	cr_expect(strstr(out, "data transfers complete"), "%s", out);
	cr_expect(strstr(out, "return status 0"), "%s", out);
	free(out);
}

Test(utils, ucmatose_roce)
{
	char *out = pair("roce", "ucmatose", "ucmatose -c 2", "ucmatose -s 127.10.0.2 -c 2", 1);

	cr_expect(strstr(out, "return status 0"), "%s", out);
	free(out);
}

Test(utils, rdma_server_rdma_client)
{
	char *out = pair("ib", "rdma_client", "rdma_server", "rdma_client -s 127.10.0.2", 1);

	cr_expect(strstr(out, "rdma_client: end 0"), "%s", out);
	free(out);
}

Test(utils, rdma_xserver_rdma_xclient_rc)
{
	/* RC mode; the client posts a 16-byte inline send on a QP created with
	 * max_inline_data 0, as hardware allows. (XRC mode 'x': test_lib_xrc.c.) */
	char *out = pair("ib", "rdma_xclient", "rdma_xserver", "rdma_xclient -s 127.10.0.2", 1);

	/* pair() checks that the server exited 0 too */
	cr_expect(strstr(out, "rdma_xclient: end 0"), "%s", out);
	free(out);
}

Test(utils, cmtime_100)
{
	char *out = pair("ib", "cmtime", "cmtime -c 100", "cmtime -s 127.10.0.2 -c 100", 0);

	cr_expect(strstr(out, "connect"), "%s", out);
	cr_expect(strstr(out, "disconnect"), "%s", out);
	free(out);
}

Test(utils, rdma_server_rdma_client_roce)
{
	char *out = pair("roce", "rdma_client", "rdma_server", "rdma_client -s 127.10.0.2", 1);

	cr_expect(strstr(out, "rdma_client: end 0"), "%s", out);
	free(out);
}

Test(utils, rdma_xserver_rdma_xclient_rc_roce)
{
	char *out = pair("roce", "rdma_xclient", "rdma_xserver", "rdma_xclient -s 127.10.0.2", 1);

	cr_expect(strstr(out, "rdma_xclient: end 0"), "%s", out);
	free(out);
}

Test(utils, cmtime_100_roce)
{
	char *out = pair("roce", "cmtime", "cmtime -c 100", "cmtime -s 127.10.0.2 -c 100", 0);

	cr_expect(strstr(out, "connect"), "%s", out);
	cr_expect(strstr(out, "disconnect"), "%s", out);
	free(out);
}

/* ---- UD (SIDR) and multicast ------------------------------------------------------------ */

static void udaddy_pair(const char *link, const char *opts)
{
	char server[256], client[256], *out;

	snprintf(server, sizeof(server), "udaddy %s", opts);
	snprintf(client, sizeof(client), "udaddy -s 127.10.0.2 %s", opts);
	out = pair(link, "udaddy", server, client, 1);
	cr_expect(strstr(out, "data transfers complete"), "%s", out);
	cr_expect(strstr(out, "return status 0"), "%s", out);
	free(out);
}

Test(utils, udaddy)
{
	udaddy_pair("ib", "");
}

Test(utils, udaddy_4_connections_ipoib_port_space)
{
	udaddy_pair("ib", "-c 4 -C 20 -p 0x2");
}

Test(utils, udaddy_roce)
{
	udaddy_pair("roce", "-C 20");
}

/* The sender starts once the receiver's QP is attached to the group (the
 * fabric's group table says so): a send-only join cannot create the group,
 * and what is sent before the receiver is attached is lost. */
static void mckey_pair(const char *link, const char *opts, const char *sender_opts)
{
	char server[256], client[256], ready[512], *out;

	snprintf(server, sizeof(server), "mckey -m 239.1.1.1 -b 127.10.0.2 %s", opts);
	snprintf(client, sizeof(client), "mckey -m 239.1.1.1 -b 127.10.0.1 -s %s %s", opts,
		 sender_opts);
	snprintf(ready, sizeof(ready), "%s/uscm-sim status --dir \"$D\" | grep -q 'qps:.*node2:'",
		 lt_bin());
	out = pair_when(link, "mckey", server, client, 1, ready);
	cr_expect(strstr(out, "mckey: joined dgid: "), "%s", out);
	cr_expect(strstr(out, "data transfers complete"), "%s", out);
	cr_expect(strstr(out, "return status 0"), "%s", out);
	if (!strcmp(link, "ib"))
		cr_expect(strstr(out, "mlid 0xc0"), "an SA-assigned MLID: %s", out);
	free(out);
}

Test(utils, mckey)
{
	mckey_pair("ib", "", "");
}

Test(utils, mckey_send_only_sender)
{
	mckey_pair("ib", "-C 20", "-o");
}

Test(utils, mckey_ipoib_port_space)
{
	mckey_pair("ib", "-p 0x2", "");
}

Test(utils, mckey_roce)
{
	mckey_pair("roce", "", "");
}
