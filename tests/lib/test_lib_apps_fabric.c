/*
 * libfabric 1.17 (Debian libfabric-bin, unmodified) over uscm's librdmacm
 * on the simulated fabric, started with --netns so that the verbs
 * provider finds each node's device through an IP interface (uscm<i>,
 * 127.10.0.i; docs/sim.md): `fi_info -p verbs` lists MSG and RDM
 * (verbs;ofi_rxm) endpoints of the node's device; fi_pingpong with
 * `-p verbs -e msg` (rdma_cm connections) and `-p 'verbs;ofi_rxm' -e rdm`
 * between a server on node 1 and a client on node 2 exit 0 and report
 * every transfer. In-process mode, and daemon mode as
 * test_lib_apps_fabric_daemon. Skipped when libfabric-bin is missing.
 */
#include "apptest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(libfabric, .fini = teardown, .timeout = 90);

static void need_libfabric(void)
{
	if (lt_sh(NULL, "command -v fi_info >/dev/null && command -v fi_pingpong >/dev/null") != 0)
		tf_skip_missing("fi_info / fi_pingpong (Debian libfabric-bin) are not installed");
}

static int count(const char *s, const char *what)
{
	int n = 0;

	for (const char *p = s; p && (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

static void fi_info_lists(const char *link)
{
	char *out = NULL;
	int rc;

	need_libfabric();
	app_fabric_start(link, 1);
	rc = app_client(1, 30, "fi_info -p verbs", &out);
	cr_assert_eq(rc, 0, "fi_info exited %d:\n%s", rc, out);
	cr_expect(strstr(out, "domain: uscm_node1\n"), "%s", out);
	cr_expect(count(out, "type: FI_EP_MSG") >= 1, "no MSG endpoint:\n%s", out);
	cr_expect(count(out, "provider: verbs;ofi_rxm") >= 1, "no RDM endpoint over verbs:\n%s", out);
	cr_expect(!strstr(out, "uscm_node2"), "another node's device:\n%s", out);
	free(out);
}

Test(libfabric, fi_info_ib)
{
	fi_info_lists("ib");
}

Test(libfabric, fi_info_roce)
{
	fi_info_lists("roce");
}

/* fi_pingpong server on node 1, client on node 2 (its out-of-band
 * connection: TCP port 47592 of 127.10.0.1). */
static void pingpong(const char *link, const char *args)
{
	char cmd[512], *out = NULL, *sout;
	int rc;

	need_libfabric();
	app_fabric_start(link, 1);
	snprintf(cmd, sizeof(cmd), "fi_pingpong %s", args);
	app_server(1, 40, cmd);
	if (!app_tcp_listens(47592, 20000)) {
		sout = app_server_out();
		cr_assert_fail("fi_pingpong's server did not listen:\n%s", sout);
	}
	snprintf(cmd, sizeof(cmd), "fi_pingpong %s 127.10.0.1", args);
	rc = app_client(2, 40, cmd, &out);
	cr_expect_eq(rc, 0, "the fi_pingpong client exited %d:\n%s", rc, out);
	cr_expect(strstr(out, "=100 "), "not every transfer acknowledged:\n%s", out);
	rc = app_server_rc(20000);
	sout = app_server_out();
	cr_expect_eq(rc, 0, "the fi_pingpong server exited %d:\n%s", rc, sout);
	cr_expect(sout && strstr(sout, "=100 "), "%s", sout);
	free(out);
	free(sout);
}

Test(libfabric, pingpong_msg_ib)
{
	pingpong("ib", "-p verbs -e msg -I 100 -S 4096");
}

Test(libfabric, pingpong_rdm_ib)
{
	pingpong("ib", "-p 'verbs;ofi_rxm' -e rdm -I 100 -S 1024");
}

Test(libfabric, pingpong_msg_roce)
{
	pingpong("roce", "-p verbs -e msg -I 100 -S 4096");
}

Test(libfabric, pingpong_rdm_roce)
{
	pingpong("roce", "-p 'verbs;ofi_rxm' -e rdm -I 100 -S 1024");
}
