/*
 * pyverbs (Debian python3-pyverbs, unmodified, /usr/bin/python3) over uscm's
 * librdmacm on the simulated fabric: tests/lib/pyverbs_cm.py as the server
 * on node 1 and the client on node 2 — synchronous CMIDs made from an
 * AddrInfo (rdma_getaddrinfo + rdma_create_ep), listen / get_request /
 * accept / connect, SEND / RECV both ways and an RDMA WRITE checked by the
 * server, disconnect — on IB and RoCE. Both must exit 0 and print
 * "server ok" / "client ok". In-process mode, and daemon mode as
 * test_lib_apps_pyverbs_daemon. Skipped when python3-pyverbs is missing.
 */
#include "apptest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(pyverbs, .fini = teardown, .timeout = 90);

static void cm_pair(const char *link)
{
	char cmd[1200], *out = NULL, *sout;
	int rc;

	if (lt_sh(NULL, "env -u LD_LIBRARY_PATH -u LD_PRELOAD /usr/bin/python3 -c 'import pyverbs.cmid'"
			  " >/dev/null 2>&1") != 0)
		tf_skip_missing("pyverbs (Debian python3-pyverbs) is not installed");
	app_fabric_start(link, 0);
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s/tests/lib/pyverbs_cm.py server 127.10.0.1 7471",
		 app_srcdir());
	app_server(1, 30, cmd);
	sout = NULL;
	if (!app_server_says("server listening", 20000)) {
		sout = app_server_out();
		cr_assert_fail("the pyverbs server did not listen:\n%s", sout);
	}
	snprintf(cmd, sizeof(cmd),
		 "/usr/bin/python3 %s/tests/lib/pyverbs_cm.py client 127.10.0.2 127.10.0.1 7471",
		 app_srcdir());
	rc = app_client(2, 30, cmd, &out);
	cr_expect_eq(rc, 0, "the pyverbs client exited %d:\n%s", rc, out);
	cr_expect(out && strstr(out, "client wrote 64 bytes"), "%s", out);
	cr_expect(out && strstr(out, "client ok"), "%s", out);
	rc = app_server_rc(20000);
	sout = app_server_out();
	cr_expect_eq(rc, 0, "the pyverbs server exited %d:\n%s", rc, sout);
	cr_expect(sout && strstr(sout, "server received ping"), "%s", sout);
	cr_expect(sout && strstr(sout, "server saw the RDMA WRITE of 64 bytes"), "%s", sout);
	cr_expect(sout && strstr(sout, "server ok"), "%s", sout);
	free(out);
	free(sout);
}

Test(pyverbs, cmid_client_server_ib)
{
	cm_pair("ib");
}

Test(pyverbs, cmid_client_server_roce)
{
	cm_pair("roce");
}
