/*
 * Unmodified Debian rdmacm-utils rsockets programs over uscm's rsockets
 * (lib/rs_*.c) on the simulated fabric: the server on node1 (127.10.0.1),
 * the client on node2. rstream in blocking (-T b), non-blocking (-T n) and
 * poll (-T a) modes, IB and RoCE, with sizes that keep each run under a
 * second; rcopy of a 64 MiB file compared byte for byte; riostream (iomap,
 * riowrite); udpong (datagram rsockets over UD) in blocking, echo,
 * non-blocking and poll modes. Each must exit 0 and print its result line
 * (udpong's server: its login line; it serves forever). Skipped when
 * rdmacm-utils is missing.
 */
#include "libtest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(rsapps, .fini = teardown, .timeout = 120);

/* Seconds each program may run (timeout(1)); the full-size runs raise it. */
static int rs_limit = 60;

static void start_server(const char *server)
{
	cr_assert_eq(lt_sh(NULL,
			   "rm -f %s/server.pid %s/server.rc; "
			   "(USCM_SIM_NODE=node1 %s timeout %d %s >%s/server.out 2>&1 &"
			   " echo $! >%s/server.pid; wait $!; echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   lt_dir, lt_dir, lt_util_env(), rs_limit, server, lt_dir, lt_dir, lt_dir),
		     0);
}

/* server on node1, client on node2 (retried while the server is not
 * listening yet); both must exit 0 unless server_exits is 0 (then the
 * server is stopped). Returns the client's output; *sout the server's. */
static char *rs_pair(const char *link, const char *bin, const char *server, const char *client,
		     int server_exits, char **sout)
{
	char *out = NULL, *rc = NULL;
	int st = -1;

	if (lt_sh(NULL, "command -v %s >/dev/null", bin) != 0)
		tf_skip_missing("%s (Debian rdmacm-utils) is not installed", bin);
	lt_fabric_start(link, 2);
	start_server(server);
	for (int i = 0; i < 50; i++) {
		free(out);
		st = lt_sh(&out, "USCM_SIM_NODE=node2 %s timeout %d %s 2>&1", lt_util_env(), rs_limit, client);
		if (st == 0 || (!strstr(out, "refused") && !strstr(out, "No route")))
			break;
		usleep(100 * 1000);
	}
	cr_expect_eq(st, 0, "%s exited %d:\n%s", client, st, out);
	if (!server_exits) {
		for (int i = 0; i < 50 && lt_sh(NULL, "test -s %s/server.pid", lt_dir); i++)
			usleep(100 * 1000);
		lt_sh(NULL, "kill -TERM $(cat %s/server.pid) >/dev/null 2>&1; true", lt_dir);
	}
	for (int i = 0; i < 100 + 10 * rs_limit; i++) {
		free(rc);
		rc = NULL;
		if (lt_sh(&rc, "cat %s/server.rc 2>/dev/null", lt_dir) == 0 && rc[0])
			break;
		usleep(100 * 1000);
	}
	lt_sh(sout, "cat %s/server.out", lt_dir);
	if (server_exits)
		cr_expect(rc && rc[0] == '0', "%s exited %s:\n%s", server, rc ? rc : "?", *sout);
	free(rc);
	return out;
}

static void rstream(const char *link, const char *opts)
{
	char server[256], client[256], *out, *sout = NULL;

	snprintf(server, sizeof(server), "rstream -b 127.10.0.1 %s", opts);
	snprintf(client, sizeof(client), "rstream -s 127.10.0.1 %s", opts);
	out = rs_pair(link, "rstream", server, client, 1, &sout);
	/* the result line: name bytes xfers iters total time Gb/sec usec/xfer */
	cr_expect(strstr(out, "custom "), "client:\n%s", out);
	cr_expect(strstr(sout, "custom "), "server:\n%s", sout);
	free(out);
	free(sout);
}

/* rstream's own size tables, unmodified: without -S its 8 default
 * transfers (64 B to 1 MiB, latency and bandwidth), with -S all its 66
 * (every size from 64 B to 6 MiB, each as latency and bandwidth). Each
 * size prints one result line "NAME_lat|NAME_bw bytes xfers iters ..." on
 * both sides; all of them must be there. */
static void rstream_table(const char *link, const char *opts, int lines)
{
	char server[256], client[256], *out, *sout = NULL;
	int n = 0;

	snprintf(server, sizeof(server), "rstream -b 127.10.0.1 %s", opts);
	snprintf(client, sizeof(client), "rstream -s 127.10.0.1 %s", opts);
	out = rs_pair(link, "rstream", server, client, 1, &sout);
	for (const char *p = out; (p = strstr(p, "\n")); p++) {
		const char *e = strchr(p + 1, ' ');

		if (e && e - p > 4 && (!strncmp(e - 4, "_lat", 4) || !strncmp(e - 3, "_bw", 3)))
			n++;
	}
	cr_expect_eq(n, lines, "%d of %d result lines from the client:\n%s", n, lines, out);
	cr_expect(strstr(out, "1m_bw "), "client:\n%s", out);
	cr_expect(strstr(sout, "1m_bw "), "server:\n%s", sout);
	free(out);
	free(sout);
}

/* ~20 s per link on the sim (plain build), more under ASan. */
Test(rsapps, rstream_default_sizes_ib, .timeout = 900)
{
	rs_limit = 600;
	rstream_table("ib", "", 8);
}

Test(rsapps, rstream_default_sizes_roce, .timeout = 900)
{
	rs_limit = 600;
	rstream_table("roce", "", 8);
}

/* -S all: 66 transfers up to 6 MiB, ~3.5 min on the sim in the plain
 * build; run once per link — IB in process, RoCE through uscmd — and not
 * in the sanitized build, where it would take most of CI's time. */
Test(rsapps, rstream_all_sizes, .timeout = 1200)
{
#ifdef USCM_SANITIZED
	tf_deselect("-S all runs in the plain build only (its length under ASan)");
#endif
	const char *d = getenv("USCM_TEST_DAEMON");

	rs_limit = 900;
	rstream_table(d && *d == '1' ? "roce" : "ib", "-S all", 66);
}

Test(rsapps, rstream_blocking_ib)
{
	rstream("ib", "-T b -S 65536 -C 200");
}

Test(rsapps, rstream_nonblocking_ib)
{
	rstream("ib", "-T n -S 65536 -C 200");
}

Test(rsapps, rstream_poll_ib)
{
	rstream("ib", "-T a -S 100000 -C 100");
}

/* Small messages: 16 bytes, rstream's smallest sound size — its start-up
 * sync exchange sends 16 bytes from a buffer of the transfer size, which
 * a sanitized run catches as rstream's own overflow below 16. */
Test(rsapps, rstream_small_messages_ib)
{
	rstream("ib", "-T b -S 16 -C 2000");
}

Test(rsapps, rstream_large_verify_ib)
{
	/* -T v: the receiver checks every byte */
	rstream("ib", "-T b -T v -S 1000000 -C 10");
}

Test(rsapps, rstream_blocking_roce)
{
	rstream("roce", "-T b -S 65536 -C 200");
}

Test(rsapps, rstream_nonblocking_roce)
{
	rstream("roce", "-T n -S 4096 -C 500");
}

Test(rsapps, rstream_poll_roce)
{
	rstream("roce", "-T a -S 300000 -C 30");
}

static void rcopy_run(const char *link)
{
	char src[600], dst[600], client[1400], *out, *sout = NULL;
	char tmpl[] = "/tmp/uscm-rcopy.XXXXXX";

	cr_assert(mkdtemp(tmpl));
	snprintf(src, sizeof(src), "%s/in.bin", tmpl);
	snprintf(dst, sizeof(dst), "%s/out.bin", tmpl);
	cr_assert_eq(lt_sh(NULL, "head -c 67108864 /dev/urandom >%s", src), 0);
	snprintf(client, sizeof(client), "rcopy %s 127.10.0.1:%s", src, dst);
	/* the rcopy server serves forever: stopped once the client is done */
	out = rs_pair(link, "rcopy", "rcopy", client, 0, &sout);
	cr_expect(strstr(out, "67108864 bytes in"), "client:\n%s", out);
	cr_expect_eq(lt_sh(NULL, "cmp %s %s", src, dst), 0, "copy differs");
	lt_sh(NULL, "rm -rf %s", tmpl);
	free(out);
	free(sout);
}

Test(rsapps, rcopy_64mib_ib)
{
	rcopy_run("ib");
}

Test(rsapps, rcopy_64mib_roce)
{
	rcopy_run("roce");
}

static void riostream(const char *link, const char *opts)
{
	char server[256], client[256], *out, *sout = NULL;

	snprintf(server, sizeof(server), "riostream -b 127.10.0.1 %s", opts);
	snprintf(client, sizeof(client), "riostream -s 127.10.0.1 %s", opts);
	out = rs_pair(link, "riostream", server, client, 1, &sout);
	cr_expect(strstr(out, "custom "), "client:\n%s", out);
	cr_expect(strstr(sout, "custom "), "server:\n%s", sout);
	free(out);
	free(sout);
}

/* riostream: the server riomaps its buffer, the client riowrites into it */
Test(rsapps, riostream_blocking_ib)
{
	riostream("ib", "-T b -S 65536 -C 100");
}

Test(rsapps, riostream_nonblocking_roce)
{
	riostream("roce", "-T n -S 100000 -C 50");
}

Test(rsapps, riostream_poll_ib)
{
	riostream("ib", "-T a -S 1000 -C 200");
}

/* udpong: datagram rsockets (UD, lib/rs_dgram.c). The server serves forever
 * (stopped once the client is done; stdbuf so its line survives that); the
 * client logs in through the UDP side channel, then runs over UD. */
static void udpong(const char *link, const char *opts, const char *line)
{
	char server[256], client[256], *out, *sout = NULL;
	/* the side channel is a kernel UDP socket on the name address: a port
	 * of this run's own, so parallel runs (other builds) never collide */
	int port = 20000 + (int)(getpid() % 20000);

	snprintf(server, sizeof(server), "stdbuf -oL udpong -b 127.10.0.1 -p %d %s", port, opts);
	snprintf(client, sizeof(client), "udpong -s 127.10.0.1 -p %d %s", port, opts);
	out = rs_pair(link, "udpong", server, client, 0, &sout);
	/* name bytes xfers total time Gb/sec usec/xfer */
	cr_expect(strstr(out, line), "client (wanted \"%s\"):\n%s", line, out);
	cr_expect(strstr(sout, "client login from 127.10.0.2"), "server:\n%s", sout);
	free(out);
	free(sout);
}

Test(rsapps, udpong_blocking_ib)
{
	udpong("ib", "-T b -S 1000 -C 200", "custom    1000    ");
}

Test(rsapps, udpong_echo_ib)
{
	/* -T e: every datagram is echoed back (a latency run) */
	/* echo: transfers = 2 x count (name, bytes, xfers columns) */
	udpong("ib", "-T e -S 100 -C 100", "custom    100     200     ");
}

Test(rsapps, udpong_nonblocking_roce)
{
	udpong("roce", "-T n -S 1000 -C 200", "custom    1000    ");
}

Test(rsapps, udpong_poll_roce)
{
	udpong("roce", "-T a -T e -S 64 -C 100", "custom    64      200     ");
}
