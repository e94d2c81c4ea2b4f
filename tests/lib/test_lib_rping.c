/*
 * Unmodified Debian rdmacm-utils binaries on the simulated fabric with
 * LD_LIBRARY_PATH=build/lib:build/sim/lib, server on node 2, client on
 * node 1: rping (`rping -s` / `rping -c -a 127.10.0.2 -C n -v`; with data
 * validation and larger buffers, the self-created QP path -q that uses
 * rdma_init_qp_attr + rdma_establish, and RoCE), ucmatose with several
 * connections, rdma_server / rdma_client (synchronous endpoints) and
 * cmtime -c 100. Each pair must exit 0 (cmtime's server never exits: it is
 * stopped once the client is done). Skipped when rdmacm-utils is missing.
 */
#include "libtest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(rping, .fini = teardown, .timeout = 120);
TestSuite(utils, .fini = teardown, .timeout = 120);

static const char *env_prefix(void)
{
	static char buf[4096];
	char *asan = NULL, *ubsan = NULL;

	/* A client that starts before the server's CM agent exists sends its
	 * REQ into the void (no agent, no answer): a short CM response timeout
	 * (14: 67 ms) makes the REQ retry come within ~0.2 s, not ~4.4 s. */
	snprintf(buf, sizeof(buf),
		 "LD_LIBRARY_PATH='%s/lib:%s/sim/lib' USCM_SIM_DIR='%s' USCM_CM_RESPONSE_TIMEOUT=14",
		 lt_build(), lt_build(), getenv("USCM_SIM_DIR"));
#ifdef USCM_SANITIZED
	/* The library is built with ASan/UBSan; rping is not: preload the
	 * runtimes (rping's own leaks are not ours to report). */
	lt_sh(&asan, "gcc -print-file-name=libasan.so | tr -d '\\n'");
	lt_sh(&ubsan, "gcc -print-file-name=libubsan.so | tr -d '\\n'");
	size_t n = strlen(buf);
	snprintf(buf + n, sizeof(buf) - n, " LD_PRELOAD='%s %s' ASAN_OPTIONS=detect_leaks=0", asan,
		 ubsan);
#endif
	free(asan);
	free(ubsan);
	return buf;
}

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
static char *pair(const char *link, const char *bin, const char *server, const char *client,
		  int server_exits)
{
	char *out = NULL, *sout = NULL, *rc = NULL;
	int st = -1;

	if (lt_sh(NULL, "command -v %s >/dev/null", bin) != 0)
		cr_skip_test("%s (Debian rdmacm-utils) is not installed", bin);
	lt_fabric_start(link, 2);
	/* The server's pid (of `timeout`, which passes SIGTERM on) and, once it
	 * is done, its exit status go to files. */
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node2 %s timeout 60 %s >%s/server.out 2>&1 &"
			   " echo $! >%s/server.pid; wait $!; echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   env_prefix(), server, lt_dir, lt_dir, lt_dir),
		     0);
	for (int i = 0; i < 50; i++) {
		free(out);
		st = lt_sh(&out, "USCM_SIM_NODE=node1 %s timeout 60 %s 2>&1", env_prefix(), client);
		if (st == 0 || !strstr(out, "REJECTED") || strstr(out, "end 0"))
			break;
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

Test(utils, cmtime_100)
{
	char *out = pair("ib", "cmtime", "cmtime -c 100", "cmtime -s 127.10.0.2 -c 100", 0);

	cr_expect(strstr(out, "connect"), "%s", out);
	cr_expect(strstr(out, "disconnect"), "%s", out);
	free(out);
}
