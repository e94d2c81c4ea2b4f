/*
 * Unmodified Debian verbs benchmarks on the simulated fabric, over uscm's
 * librdmacm and the sim's libibverbs (LD_LIBRARY_PATH=build/lib:build/sim/lib),
 * server on node 1, client on node 2 (127.10.0.1 is node 1's address):
 *
 *   perftest: ib_send_lat, ib_send_bw, ib_write_lat, ib_write_bw, ib_read_lat,
 *   ib_read_bw, ib_atomic_lat, with -R (QPs connected by rdma_cm, and the
 *   out-of-band exchange over an rdma_cm connection too) and without (the
 *   exchange over perftest's own TCP socket, QPs moved by hand), on IB and RoCE;
 *   qperf -cm1: rc_lat, rc_bw, rc_rdma_write_bw, rc_rdma_read_lat (RC connected
 *   by rdma_cm), and on IB uc_lat and ud_lat (qperf connects those itself with
 *   LID-only address vectors, which a RoCE port refuses on hardware too).
 *
 * Each client must exit 0 and print a figures line whose figure (latency or
 * bandwidth) parses as a number > 0; each perftest server must exit 0 too.
 * These binaries link libmlx5/libefa directly: they load only because the
 * sim's libibverbs exports IBVERBS_PRIVATE_34 (sim/verbs/sv_private.c).
 *
 * perftest -R's client gives up when its first connection (the out-of-band
 * exchange's) is rejected because the server does not listen yet ("Unexpected
 * CM event bl blka 8"): it is started again until the server listens.
 * perftest -R also has a race of its own: after a handshake that releases both
 * sides at once, its server creates, binds and listens a new ID while its
 * client resolves, creates its QP and sends the REQ; a REQ first is rejected
 * (IBTA reason 8, invalid service ID, as the kernel's CM answers), and
 * perftest's retry of it then uses the IDs it just freed (it crashes). On an
 * HCA the client's QP commands take milliseconds of firmware time; here they
 * take microseconds, so the client is given that firmware latency
 * (USCM_SIM_MODIFY_QP_DELAY_MS) and a run that still lost the race (the
 * client says "RDMA_CM_EVENT_REJECTED; error: 8") is run again, at most
 * three more times. Skipped when perftest / qperf are missing.
 */
#include "libtest.h"

#include "tests/test_skip.h"

static void teardown(void)
{
	if (lt_dir[0])
		lt_sh(NULL, "kill -TERM $(cat %s/server.pid 2>/dev/null) >/dev/null 2>&1; true",
		      lt_dir);
	lt_fabric_stop();
}

TestSuite(perftest, .fini = teardown, .timeout = 150);
TestSuite(qperf, .fini = teardown, .timeout = 120);

/* TCP ports of the out-of-band exchanges (0.0.0.0, shared by every fabric):
 * apart for the in-process and the daemon-mode run, which CTest may run at
 * the same time. */
static int port(int n)
{
	return 24500 + (lt_daemon ? 50 : 0) + n;
}

/* lt_dir/name (a static buffer). */
static const char *in_dir(const char *name)
{
	static char buf[512];

	snprintf(buf, sizeof(buf), "%s/%s", lt_dir, name);
	return buf;
}

/* Starts `cmd` on node 1 in the background (its pid, exit status and output
 * in files under lt_dir; a new start forgets the old ones). */
static void start_server(const char *cmd)
{
	cr_assert_eq(lt_sh(NULL,
			   "rm -f %s/server.pid %s/server.rc; "
			   "(USCM_SIM_NODE=node1 %s timeout 60 %s >%s/server.out 2>&1 &"
			   " echo $! >%s/server.pid; wait $!; echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   lt_dir, lt_dir, lt_util_env(), cmd, lt_dir, lt_dir, lt_dir),
		     0);
	cr_assert(lt_wait_until(lt_file_size(in_dir("server.pid")) > 0, 5000));
}

/* The server's exit status once it is done (-1: still running after ms). */
static int server_rc(int ms)
{
	char *rc = NULL;
	int v = -1;

	if (lt_wait_until(lt_file_size(in_dir("server.rc")) > 0, ms) &&
	    lt_sh(&rc, "cat %s/server.rc", lt_dir) == 0)
		v = atoi(rc);
	free(rc);
	return v;
}

static void stop_server(void)
{
	lt_sh(NULL, "kill -TERM $(cat %s/server.pid) >/dev/null 2>&1; true", lt_dir);
	server_rc(10000);
}

/* 1 when a TCP socket listens on port (any address). */
static int tcp_listening(int p)
{
	return lt_sh(NULL, "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | "
			   "awk '$4 == \"0A\" {print $2}' | grep -qi ':%04X$'", p) == 0;
}

/* perftest's figures: the line after the "#bytes" header; its third number
 * (t_min [usec] of a latency test, BW peak [MB/sec] of a bandwidth test);
 * -1 when there is none. */
static double perftest_figure(const char *out)
{
	const char *h = strstr(out, "#bytes");
	unsigned long bytes, iters;
	double fig;

	if (!h || !(h = strchr(h, '\n')))
		return -1;
	if (sscanf(h + 1, "%lu %lu %lf", &bytes, &iters, &fig) != 3 || bytes == 0 || iters == 0)
		return -1;
	return fig;
}

/* One perftest pair; 1 when it passed (failures reported). */
static int perftest_pair(const char *bin, int rdma_cm, int p)
{
	char args[256], *out = NULL, *sout = NULL;
	int st = -1, src = -1;

	/* short runs: 100 iterations, 4 KiB messages for the bandwidth tests */
	snprintf(args, sizeof(args), "%s %s -n 100 -p %d", rdma_cm ? "-R" : "",
		 strstr(bin, "_bw") ? "-s 4096" : "", p);
	for (int attempt = 0; attempt < 4; attempt++) {
		char cmd[512];

		snprintf(cmd, sizeof(cmd), "%s %s", bin, args);
		start_server(cmd);
		if (!rdma_cm)
			cr_assert(lt_wait_until(tcp_listening(p), 20000),
				  "%s does not listen on TCP port %d", bin, p);
		for (int i = 0; i < 50; i++) {
			free(out);
			out = NULL;
			st = lt_sh(&out,
				   "USCM_SIM_NODE=node2 USCM_SIM_MODIFY_QP_DELAY_MS=%d %s timeout 60 %s 127.10.0.1 2>&1",
				   rdma_cm ? 20 : 0, lt_util_env(), cmd);
			/* -R: the first connection (the exchange's) was
			 * rejected: the server is not listening yet (through
			 * uscmd its node answers before its program listens);
			 * perftest's client does not retry that one itself */
			if (st == 0 || !rdma_cm || !strstr(out, "Unexpected CM event bl blka 8"))
				break;
			usleep(100 * 1000);
		}
		if (st == 0) {
			src = server_rc(30000);
			break;
		}
		if (!rdma_cm || !strstr(out, "RDMA_CM_EVENT_REJECTED; error: 8"))
			break;
		tf_warn("%s -R: the client's QP REQ came before the server's listen "
			    "(perftest's race), run again", bin);
		stop_server();
	}
	lt_sh(&sout, "cat %s/server.out", lt_dir);
	double fig = st == 0 ? perftest_figure(out) : -1;

	cr_expect_eq(st, 0, "%s client %s exited %d:\n%s\nserver:\n%s", bin, args, st, out, sout);
	if (st == 0)
		cr_expect_eq(src, 0, "%s server %s exited %d:\n%s", bin, args, src, sout);
	if (st == 0)
		cr_expect_gt(fig, 0, "%s %s: no figures in:\n%s", bin, args, out);
	if (st == 0 && src == 0 && fig > 0)
		cr_log_info("%s %s: %.2f\n", bin, args, fig);
	else if (st != 0 || src != 0)
		stop_server();
	int ok = st == 0 && src == 0 && fig > 0;

	free(out);
	free(sout);
	return ok;
}

static const char *const perftests[] = { "ib_send_lat",  "ib_send_bw",  "ib_write_lat",
					 "ib_write_bw",  "ib_read_lat", "ib_read_bw",
					 "ib_atomic_lat" };

static void perftest_all(const char *link, int rdma_cm)
{
	lt_need("ib_send_lat", "perftest");
	lt_fabric_start(link, 2);
	for (size_t i = 0; i < sizeof(perftests) / sizeof(perftests[0]); i++)
		perftest_pair(perftests[i], rdma_cm, port((int)i + (rdma_cm ? 10 : 0) +
							   (strcmp(link, "ib") ? 20 : 0)));
}

Test(perftest, ib_rdma_cm)
{
	perftest_all("ib", 1);
}

Test(perftest, ib_tcp_exchange)
{
	perftest_all("ib", 0);
}

Test(perftest, roce_rdma_cm)
{
	perftest_all("roce", 1);
}

Test(perftest, roce_tcp_exchange)
{
	perftest_all("roce", 0);
}

/* qperf's figure for `test` in its output ("rc_lat:\n    latency  =  48.6 us"):
 * the number after the first '=' following "test:"; -1 when there is none. */
static double qperf_figure(const char *out, const char *test)
{
	char key[64];
	const char *t, *eq;
	double v;

	snprintf(key, sizeof(key), "%s:", test);
	if (!(t = strstr(out, key)) || !(eq = strchr(t, '=')) || sscanf(eq + 1, "%lf", &v) != 1)
		return -1;
	return v;
}

static void qperf_all(const char *link, const char *tests)
{
	char cmd[256], *out = NULL, *sout = NULL, list[256], *save = NULL;
	int p, st;

	lt_need("qperf", "qperf");
	lt_fabric_start(link, 2);
	p = port(strcmp(link, "ib") ? 41 : 40);
	snprintf(cmd, sizeof(cmd), "qperf -lp %d", p);
	start_server(cmd);
	cr_assert(lt_wait_until(tcp_listening(p), 20000), "qperf does not listen on TCP port %d", p);
	/* One client run per test, -t 1: one second a test, not the default
	 * two (qperf 0.4.11 hangs with -n). qperf's client connects each
	 * test's rdma_cm connection as soon as its TCP request is sent, and
	 * its server listens only after reading it: a REQ that comes first is
	 * rejected (no listener for the service ID), as with the kernel's CM,
	 * and qperf does not try again ("unexpected event from RDMA CM: Event
	 * rejected"; seen in CI's sanitized daemon-mode pass). That race, and
	 * only it, is run again, at most 3 more times. */
	snprintf(list, sizeof(list), "%s", tests);
	for (char *t = strtok_r(list, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
		double v;

		for (int tries = 0; tries < 4; tries++) {
			free(out);
			out = NULL;
			st = lt_sh(&out,
				   "USCM_SIM_NODE=node2 %s timeout 60 qperf -lp %d -cm1 -t 1 127.10.0.1"
				   " %s 2>&1",
				   lt_util_env(), p, t);
			if (st == 0 || !strstr(out, "Event rejected"))
				break;
			tf_warn("qperf %s %s: its REQ came before its server listened; again",
				    link, t);
			usleep(200 * 1000);
		}
		free(sout);
		sout = NULL;
		lt_sh(&sout, "cat %s/server.out", lt_dir);
		cr_expect_eq(st, 0, "qperf %s exited %d:\n%s\nserver:\n%s", t, st, out, sout);
		v = qperf_figure(out, t);
		cr_expect_gt(v, 0, "qperf %s: no figure in:\n%s\nserver:\n%s", t, out, sout);
		cr_log_info("qperf %s %s: %g\n", link, t, v);
	}
	stop_server();
	free(out);
	free(sout);
}

Test(qperf, ib)
{
	qperf_all("ib", "rc_lat rc_bw uc_lat ud_lat rc_rdma_write_bw rc_rdma_read_lat");
}

Test(qperf, roce)
{
	qperf_all("roce", "rc_lat rc_bw rc_rdma_write_bw rc_rdma_read_lat");
}
