/*
 * build/bin/uscm-rdma-demo (tools/uscm_rdma_demo.c, what `make demo` runs
 * after rping) on the simulated fabric: `server` on node 2, `client
 * 127.10.0.2` on node 1. Both must exit 0 (the server verified the bytes
 * the client RDMA-wrote and the client heard so) and print their CM events
 * in order. Also with the client started first: it retries until the
 * server listens. `make demo` itself is not run here (too slow).
 */
#include "libtest.h"

TestSuite(demo, .fini = lt_fini, .timeout = 120);

/* Each of the strings in want[] occurs in s, in that order. */
static void expect_in_order(const char *s, const char *const *want, const char *who)
{
	const char *p = s;

	for (; *want; want++) {
		const char *q = strstr(p, *want);

		cr_expect(q, "%s: \"%s\" missing or out of order in:\n%s", who, *want, s);
		if (!q)
			return;
		p = q + strlen(*want);
	}
}

/* Runs the pair on a fresh 2-node fabric; the client starts client_delay_ms
 * after the server (negative: the server starts that long after the client). */
static void demo_pair(const char *link, int client_delay_ms, uint16_t port)
{
	static const char *const client_events[] = {
		"  client  ADDR_RESOLVED\n",	 "  client  ROUTE_RESOLVED\n",
		"  client  ESTABLISHED\n",	 "  client  RDMA WRITE completed\n",
		"  client    server says \"verified\"\n", "  client  DISCONNECTED\n",
		"  client  torn down; success\n", NULL,
	};
	static const char *const server_events[] = {
		"  server  CONNECT_REQUEST\n",
		"  server    private data: \"uscm-rdma-demo hello\"\n",
		"  server  ESTABLISHED\n",
		"  server  verified 4096 bytes written by RDMA WRITE\n",
		"  server  DISCONNECTED\n",
		"  server  torn down; success\n",
		NULL,
	};
	char env[4096], *cout = NULL, *sout = NULL, *src = NULL;
	int st;

	lt_fabric_start(link, 2);
	int n = snprintf(env, sizeof(env),
			 "LD_LIBRARY_PATH='%s/lib:%s/sim/lib' USCM_SIM_DIR='%s' USCM_HOSTS='%s/hosts' USCM_CM_RESPONSE_TIMEOUT=14",
			 lt_build(), lt_build(), getenv("USCM_SIM_DIR"), getenv("USCM_SIM_DIR"));
	cr_assert(n > 0 && (size_t)n < sizeof(env), "environment does not fit");
	cr_assert_eq(lt_sh(NULL,
			   "(sleep %d.%03d; USCM_SIM_NODE=node2 %s timeout 60 %s/uscm-rdma-demo server"
			   " -p %u >%s/server.out 2>&1; echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   client_delay_ms < 0 ? -client_delay_ms / 1000 : 0,
			   client_delay_ms < 0 ? -client_delay_ms % 1000 : 0, env, lt_bin(),
			   (unsigned)port, lt_dir, lt_dir),
		     0);
	if (client_delay_ms > 0)
		usleep((useconds_t)client_delay_ms * 1000);
	st = lt_sh(&cout, "USCM_SIM_NODE=node1 %s timeout 60 %s/uscm-rdma-demo client 127.10.0.2 -p %u 2>&1",
		   env, lt_bin(), (unsigned)port);
	for (int i = 0; i < 200; i++) {
		free(src);
		src = NULL;
		if (lt_sh(&src, "cat %s/server.rc 2>/dev/null", lt_dir) == 0 && src[0])
			break;
		usleep(100 * 1000);
	}
	lt_sh(&sout, "cat %s/server.out 2>/dev/null", lt_dir);
	cr_expect_eq(st, 0, "the client exited %d:\n%s\nserver:\n%s", st, cout, sout);
	cr_expect(src && !strcmp(src, "0\n"), "the server exited %s:\n%s", src ? src : "?", sout);
	expect_in_order(cout, client_events, "client");
	expect_in_order(sout, server_events, "server");
	/* Every line: "<ms> ms  <role>  ...". */
	cr_expect(strstr(cout, " ms  client  ADDR_RESOLVED"), "%s", cout);
	free(cout);
	free(sout);
	free(src);
}

Test(demo, ib)
{
	demo_pair("ib", 300, 7175);
}

Test(demo, ib_client_first_retries)
{
	demo_pair("ib", -400, 7176);
}
