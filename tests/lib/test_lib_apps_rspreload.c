/*
 * Unmodified TCP programs over uscm's rsockets through Debian's
 * librspreload.so (librdmacm1: /usr/lib/<triplet>/rsocket/librspreload.so),
 * which intercepts socket/bind/listen/accept/connect/send/recv/poll/select...
 * and calls rsocket/rbind/.../rpoll from librdmacm.so.1 — uscm's on the
 * simulated fabric; in-process (each program owns its node's CM) and, as
 * test_lib_apps_rspreload_daemon, through a uscmd per node.
 *  - iperf3: server on node1 (127.10.0.1), client on node2, two parallel
 *    streams (-P 2) of 4 MiB in all; both must exit 0 and report the bytes;
 *    the fabric capture must hold the rsockets connections' REQ/REP/RTU
 *    (iperf3's control connection and its two data streams).
 *  - socat: 4 MiB of random bytes from a file on node2 to a file on node1,
 *    compared byte for byte; the capture holds the connection's
 *    REQ/REP/RTU. And a receiving socat that exits mid-transfer: the
 *    sender fails (EPIPE), it does not wait for ever in select().
 * Skipped when iperf3 / socat, tshark or librspreload is missing.
 */
#define _GNU_SOURCE 1 /* memmem */
#include "libtest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(rspreload, .fini = teardown, .timeout = 120);

static char preload[512];

static void need_preload(void)
{
	char *out = NULL;

	if (lt_sh(&out, "for d in /usr/lib/*/rsocket /usr/lib64/rsocket /usr/lib/rsocket; do "
			"test -e $d/librspreload.so && { printf %%s $d/librspreload.so; break; }; done") != 0 ||
	    !out || !out[0])
		tf_skip_missing("librspreload.so (Debian librdmacm1) is not installed");
	snprintf(preload, sizeof(preload), "%s", out);
	free(out);
	if (lt_sh(NULL, "command -v tshark >/dev/null") != 0)
		tf_skip_missing("tshark is not installed");
}

/* A two-node fabric capturing to /tmp/uscm-rsp-PID.pcap: in-process
 * (--no-uscmd) unless USCM_TEST_DAEMON=1 (the _daemon CTest variant). */
static void fabric(const char *link)
{
	const char *d = getenv("USCM_TEST_DAEMON");
	char opts[600];

	snprintf(opts, sizeof(opts), "--pcap /tmp/uscm-rsp-%d.pcap%s", (int)getpid(),
		 d && atoi(d) ? "" : " --no-uscmd");
	lt_fabric_start_opts(link, 2, opts);
}

/* Stops the fabric and counts the capture's REQ, REP and RTU; at least
 * `want` of each. */
static void expect_cm_handshakes(int want)
{
	char *cap = NULL;
	int q = 0, p = 0, r = 0;

	lt_fabric_stop();
	lt_sh(&cap,
	      "tshark -r /tmp/uscm-rsp-%d.pcap 2>/dev/null | awk '/CM: ConnectRequest/{q++} "
	      "/CM: ConnectReply/{p++} /CM: ReadyToUse/{r++} END{print q+0, p+0, r+0}'",
	      (int)getpid());
	cr_expect(cap && sscanf(cap, "%d %d %d", &q, &p, &r) == 3 && q >= want && p >= want &&
			  r >= want,
		  "capture REQ/REP/RTU: %s (want %d of each)", cap ? cap : "?", want);
	lt_sh(NULL, "rm -f /tmp/uscm-rsp-%d.pcap", (int)getpid());
	free(cap);
}

/* Waits up to 10 s for the background command's exit status in FILE
 * (lt_dir/FILE); returns it, malloc'd, or NULL. */
static char *wait_rc(const char *file)
{
	char *rc = NULL;

	for (int i = 0; i < 100; i++) {
		free(rc);
		rc = NULL;
		if (lt_sh(&rc, "cat %s/%s 2>/dev/null", lt_dir, file) == 0 && rc[0])
			return rc;
		usleep(100 * 1000);
	}
	free(rc);
	return NULL;
}

/* CMD on NODE with librspreload appended to LD_PRELOAD (the sanitizer
 * runtimes of the ASan build stay first) */
#define PRE "sh -c 'exec env LD_PRELOAD=\"${LD_PRELOAD:+$LD_PRELOAD }%s\" \"$@\"' rsp "

/* The server side: CMD (at most 60 s, under librspreload) in the
 * background on node1, its output in lt_dir/server.out and its exit status
 * in lt_dir/server.rc; returns once it says it is listening (iperf3
 * --forceflush, socat -d -d), 10 s at most. */
static void start_listener(const char *cmd)
{
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node1 %s " PRE "timeout -k 5 60 %s"
			   " >%s/server.out 2>&1; echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   lt_util_env(), preload, cmd, lt_dir, lt_dir),
		     0);
	for (int i = 0; i < 100 && lt_sh(NULL, "grep -q listening %s/server.out 2>/dev/null", lt_dir); i++)
		usleep(100 * 1000);
}

/* The client side: CMD (at most 60 s, under librspreload) on node2, run
 * again (50 times at most) while again(its output) says a REQ beat the
 * listen (rejected, as by the kernel's CM); its status, its output in *out. */
static int run_client(char **out, const char *cmd, int (*again)(const char *out))
{
	int st = -1;

	for (int i = 0; i < 50; i++) {
		free(*out);
		*out = NULL;
		st = lt_sh(out, "USCM_SIM_NODE=node2 %s " PRE "timeout -k 5 60 %s 2>&1", lt_util_env(), preload,
			   cmd);
		if (st == 0 || !again(*out))
			break;
		usleep(100 * 1000);
	}
	return st;
}

static int refused(const char *out)
{
	return strstr(out, "refused") != NULL;
}

/* iperf3 reports a refused connect as "Bad address" too (its error
 * queue query after rconnect's ECONNREFUSED fails differently) */
static int refused_or_efault(const char *out)
{
	return refused(out) || strstr(out, "Bad address");
}

static void iperf(const char *link)
{
	char *out = NULL, *sout = NULL;
	int st = -1;

	need_preload();
	if (lt_sh(NULL, "command -v iperf3 >/dev/null") != 0)
		tf_skip_missing("iperf3 (Debian iperf3) is not installed");
	fabric(link);
	/* iperf3 says when it listens (--forceflush: its stdout is a file) */
	start_listener("iperf3 -1 -s --forceflush -B 127.10.0.1 -p 5301");
	st = run_client(&out, "iperf3 -c 127.10.0.1 -p 5301 -P 2 -n 4M", refused_or_efault);
	cr_expect_eq(st, 0, "iperf3 client exited %d:\n%s", st, out);
	cr_expect(strstr(out, "[SUM]") && strstr(out, "sender") && strstr(out, "iperf Done."),
		  "client:\n%s", out);
	/* the sender's sum is at least the 4 MiB asked for (iperf3 sends in
	 * 128 KiB blocks per stream, so it may be a little more) */
	double mb = 0;
	for (char *l = out; (l = strstr(l, "[SUM]")) != NULL; l++) {
		char *e = strchr(l, '\n');
		if (e && memmem(l, (size_t)(e - l), "sender", 6)) {
			sscanf(l, "[SUM] %*s %*s %lf MBytes", &mb);
			break;
		}
	}
	cr_expect(mb >= 4.0, "sender sum %.2f MBytes, client:\n%s", mb, out);
	char *rc = wait_rc("server.rc");
	lt_sh(&sout, "cat %s/server.out", lt_dir);
	cr_expect(rc && rc[0] == '0', "iperf3 server exited %s:\n%s", rc ? rc : "?", sout);
	cr_expect(strstr(sout, "receiver") != NULL, "server:\n%s", sout);
	/* control connection + 2 streams */
	expect_cm_handshakes(3);
	free(rc);
	free(out);
	free(sout);
}

Test(rspreload, iperf3_ib)
{
	iperf("ib");
}

Test(rspreload, iperf3_roce)
{
	iperf("roce");
}

/* socat: a file from node2 to node1, byte for byte. The receiving socat
 * listens (-u: from the connection to the file); the sending one names
 * the connection first (-U: from the second address to the first) —
 * with the file first, socat's first intercepted call is recv(), which
 * librspreload (rdma-core v44 .. at least v63) runs before it has looked
 * up the libc functions it forwards to: a call through NULL, SIGSEGV.
 * socket() (the connection) initialises it. */
static void socat_file(const char *link)
{
	char *out = NULL, *sout = NULL, *cmp = NULL, cmd[1024];
	int st = -1;

	need_preload();
	if (lt_sh(NULL, "command -v socat >/dev/null") != 0)
		tf_skip_missing("socat (Debian socat) is not installed");
	fabric(link);
	cr_assert_eq(lt_sh(NULL, "head -c 4194304 /dev/urandom >%s/in.bin", lt_dir), 0);
	snprintf(cmd, sizeof(cmd), "socat -d -d -u TCP-LISTEN:5302,bind=127.10.0.1,reuseaddr OPEN:%s/out.bin,creat,trunc",
		 lt_dir);
	start_listener(cmd);
	snprintf(cmd, sizeof(cmd), "socat -U TCP:127.10.0.1:5302 OPEN:%s/in.bin", lt_dir);
	st = run_client(&out, cmd, refused);
	cr_expect_eq(st, 0, "sending socat exited %d:\n%s", st, out);
	char *rc = wait_rc("server.rc");
	lt_sh(&sout, "cat %s/server.out", lt_dir);
	cr_expect(rc && rc[0] == '0', "receiving socat exited %s:\n%s", rc ? rc : "?", sout);
	lt_sh(&cmp, "cmp %s/in.bin %s/out.bin 2>&1 && stat -c %%s %s/out.bin", lt_dir, lt_dir, lt_dir);
	cr_expect(cmp && atol(cmp) == 4194304, "the file differs: %s", cmp ? cmp : "?");
	expect_cm_handshakes(1);
	free(rc);
	free(cmp);
	free(out);
	free(sout);
}

Test(rspreload, socat_file_ib)
{
	socat_file("ib");
}

Test(rspreload, socat_file_roce)
{
	socat_file("roce");
}

/* refused, and not an error of a connection that was made */
static int refused_before_writing(const char *out)
{
	return refused(out) && !strstr(out, "write(");
}

/* The receiver goes away mid-transfer (its socat writes to /dev/full:
 * ENOSPC, it exits and closes the connection): the sender, waiting in
 * select() for room to write, must learn of it (write: EPIPE / ECONNRESET)
 * and exit with an error, not hang. */
Test(rspreload, socat_receiver_exits_ib)
{
	char *out = NULL, *sout = NULL, cmd[1024];
	int st = -1;

	need_preload();
	if (lt_sh(NULL, "command -v socat >/dev/null") != 0)
		tf_skip_missing("socat (Debian socat) is not installed");
	fabric("ib");
	cr_assert_eq(lt_sh(NULL, "head -c 4194304 /dev/urandom >%s/in.bin", lt_dir), 0);
	start_listener("socat -d -d -u TCP-LISTEN:5302,bind=127.10.0.1,reuseaddr OPEN:/dev/full");
	snprintf(cmd, sizeof(cmd), "socat -U TCP:127.10.0.1:5302 OPEN:%s/in.bin", lt_dir);
	st = run_client(&out, cmd, refused_before_writing);
	/* 124/137: timeout(1) ended it */
	cr_expect(st != 0 && st != 124 && st != 137, "sending socat exited %d:\n%s", st, out);
	cr_expect(strstr(out, "Broken pipe") || strstr(out, "Connection reset"), "sender:\n%s", out);
	char *rc = wait_rc("server.rc");
	lt_sh(&sout, "cat %s/server.out", lt_dir);
	cr_expect(rc && rc[0] == '1' && strstr(sout, "No space left"), "receiving socat exited %s:\n%s",
		  rc ? rc : "?", sout);
	expect_cm_handshakes(1);
	free(rc);
	free(out);
	free(sout);
}
