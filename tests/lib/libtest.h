/* Helpers shared by the librdmacm tests (tests/lib/): shell commands, a
 * private simulated fabric per test (mkdtemp directory, started with
 * build/bin/uscm-sim, stopped in the test's .fini), and event waits. */
#ifndef USCM_LIBTEST_H
#define USCM_LIBTEST_H

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>

#include "tests/test_fixtures.h"

/* build/bin: USCM_BIN_DIR (CTest sets it), else the build tree this binary
 * was built in (USCM_TEST_BIN_DIR, tests/UscmTest.cmake). */
static inline const char *lt_bin(void)
{
	const char *b = getenv("USCM_BIN_DIR");
#ifdef USCM_TEST_BIN_DIR
	return b && *b ? b : USCM_TEST_BIN_DIR;
#else
	return b && *b ? b : "build/bin";
#endif
}

/* build/ (the parent of bin/). */
static inline const char *lt_build(void)
{
	static char buf[1024];
	snprintf(buf, sizeof(buf), "%s/..", lt_bin());
	return buf;
}

static inline uint64_t lt_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The number after key ("VmRSS:", "MemAvailable:") in a /proc file of
 * "key value kB" lines, or -1. */
static inline long lt_proc_kb(const char *file, const char *key)
{
	char line[256];
	long v = -1;
	FILE *f = fopen(file, "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			v = strtol(line + strlen(key), NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* A process's VmRSS / VmData / ... (kB), -1 if it is gone. */
static inline long lt_status_kb(pid_t pid, const char *key)
{
	char p[64];

	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	return lt_proc_kb(p, key);
}

/* Runs a shell command; its exit status (or -1). Output in *out (malloc'd). */
#define lt_sh tf_sh /* tests/test_fixtures.h */

/* ---- waiting for something to happen -------------------------------------------- */

/* Evaluates cond (an expression) every 2 ms until it is true or ms have
 * passed; its last value (0: timed out). Tests order events by waiting for
 * a state they can observe (a file, a counter, a process gone), never by
 * sleeping a fixed time, which is either too short on a loaded machine or
 * wasted on an idle one. */
#define lt_wait_until(cond, ms)                                                        \
	({                                                                             \
		uint64_t t0_ = lt_now_ms();                                            \
		int ok_;                                                               \
		while (!(ok_ = !!(cond)) && lt_now_ms() - t0_ < (uint64_t)(ms))        \
			usleep(2000);                                                  \
		ok_;                                                                   \
	})

/* The size of a file, -1 when it does not exist. */
static inline long lt_file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long)sb.st_size : -1;
}

/* 1 when the file exists and contains text. */
static inline int lt_file_has(const char *path, const char *text)
{
	char *out = NULL;
	int found;

	lt_sh(&out, "cat '%s' 2>/dev/null", path);
	found = out && strstr(out, text) != NULL;
	free(out);
	return found;
}

/* 1 when process pid no longer runs: gone, or a zombie nobody reaped yet
 * (it will not write another byte). */
static inline int lt_pid_gone(pid_t pid)
{
	char path[64], buf[512], *st;
	FILE *fp;
	size_t n;

	if (pid <= 0 || (kill(pid, 0) < 0 && errno == ESRCH))
		return 1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(fp = fopen(path, "r")))
		return 1;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = 0;
	st = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold spaces */
	return st && (st[2] == 'Z' || st[2] == 'X');
}

/* The pid a shell wrote into a file (`echo $! >FILE`), or -1. */
static inline pid_t lt_pid_file(const char *path)
{
	FILE *fp = fopen(path, "r");
	int pid = -1;

	if (fp) {
		if (fscanf(fp, "%d", &pid) != 1)
			pid = -1;
		fclose(fp);
	}
	return (pid_t)pid;
}

static inline int lt_have_sim(void)
{
	char p[1024];
	snprintf(p, sizeof(p), "%s/uscm-sim", lt_bin());
	return access(p, X_OK) == 0;
}

static char lt_dir[256];

/* The file mapped into this process whose name starts with prefix (from
 * /proc/self/maps: "libibverbs.so" matches libibverbs.so.1.14.44.0) into
 * path; 0 when there is none. */
static inline int lt_mapped(const char *prefix, char *path, size_t len)
{
	FILE *fp = fopen("/proc/self/maps", "r");
	char line[PATH_MAX + 128];
	int found = 0;

	while (fp && !found && fgets(line, sizeof(line), fp)) {
		char *f = strchr(line, '/'), *b;

		if (!f)
			continue;
		f[strcspn(f, "\n")] = 0;
		b = strrchr(f, '/') + 1;
		if (!strncmp(b, prefix, strlen(prefix))) {
			snprintf(path, len, "%s", f);
			found = 1;
		}
	}
	if (fp)
		fclose(fp);
	return found;
}

/* The fabric's programs see the simulated HCAs through the drop-in
 * libibverbs / libibumad in build/sim/lib; this process must load the same
 * ones (CTest's LD_LIBRARY_PATH, or the executable's RPATH). Over any
 * others every rdma_* call fails with ENODEV, which a test would only
 * report when its first wait ran out: say at once how to run it. */
static inline void lt_check_dropins(void)
{
	static const char *const libs[] = { "libibverbs.so", "libibumad.so" };
	char dir[PATH_MAX], want[PATH_MAX], got[PATH_MAX], exe[PATH_MAX] = "";
	const char *name;

	snprintf(dir, sizeof(dir), "%s/sim/lib", lt_build());
	if (!realpath(dir, want))
		return; /* no drop-ins built: uscm-sim says so */
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		char real[PATH_MAX];
		size_t wl = strlen(want);

		/* not loaded: this test only runs other programs */
		if (!lt_mapped(libs[i], got, sizeof(got)) ||
		    (realpath(got, real) && !strncmp(real, want, wl) && real[wl] == '/'))
			continue;
		if (readlink("/proc/self/exe", exe, sizeof(exe) - 1) < 0)
			snprintf(exe, sizeof(exe), "test_lib_*");
		name = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
		if (!realpath(lt_build(), dir))
			snprintf(dir, sizeof(dir), "%s", lt_build());
		cr_assert_fail("%s is %s, not the simulated fabric's: run `ctest -R %s` in %s, or "
			       "set LD_LIBRARY_PATH=%s/lib:%s",
			       libs[i], got, name, dir, dir, want);
	}
}

/* The programs a test starts (uscm-churn, uscm-rdma-demo, uscm-hostile)
 * need build/lib and the drop-ins too: CTest's LD_LIBRARY_PATH, put in
 * front of the environment when the binary runs without it. */
static inline void lt_export_ldpath(void)
{
	const char *cur = getenv("LD_LIBRARY_PATH");
	char b[PATH_MAX], want[2 * PATH_MAX + 16], *v;
	size_t n;

	if (!realpath(lt_build(), b))
		return;
	snprintf(want, sizeof(want), "%s/lib:%s/sim/lib", b, b);
	n = strlen(want);
	if (cur && !strncmp(cur, want, n) && (cur[n] == 0 || cur[n] == ':'))
		return;
	v = malloc(n + (cur ? strlen(cur) : 0) + 2);
	cr_assert(v);
	sprintf(v, "%s%s%s", want, cur && *cur ? ":" : "", cur && *cur ? cur : "");
	setenv("LD_LIBRARY_PATH", v, 1);
	free(v);
}

/* 1 when the fabric runs a uscmd per node (daemon mode): lt_node
 * then points USCM_SOCKET at that node's daemon. */
static int lt_daemon;

static inline void lt_fabric_start_opts(const char *link, int nodes, const char *opts);

/* Starts a fabric of `nodes` nodes ("ib" or "roce") in a fresh directory and
 * points USCM_SIM_DIR at it; skips the test when uscm-sim is not built. */
static inline void lt_fabric_start(const char *link, int nodes)
{
	/* USCM_TEST_DAEMON=1: the same test in daemon mode (CTest runs the
	 * fault matrix and the soak both ways) */
	const char *d = getenv("USCM_TEST_DAEMON");

	lt_fabric_start_opts(link, nodes, d && atoi(d) ? "" : "--no-uscmd");
}

/* The same with a uscmd on every node (uscm-sim's default): programs use
 * daemon mode. */
static inline void lt_fabric_start_daemon(const char *link, int nodes)
{
	lt_fabric_start_opts(link, nodes, "");
}

static inline void lt_fabric_start_opts(const char *link, int nodes, const char *opts)
{
	char *out = NULL;
	int rc;

	if (!lt_have_sim())
		tf_skip_missing("build/bin/uscm-sim is not built (sim/): needs the simulated fabric");
	lt_check_dropins();
	lt_export_ldpath();
	snprintf(lt_dir, sizeof(lt_dir), "/tmp/uscm-libtest.XXXXXX");
	cr_assert(mkdtemp(lt_dir), "mkdtemp");
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("USCM_SIM_WATCH_PID", pid, 1);
	lt_daemon = strstr(opts, "--no-uscmd") == NULL;
	rc = lt_sh(&out, "%s/uscm-sim start --dir %s/f --nodes %d --link %s %s 2>&1", lt_bin(),
		   lt_dir, nodes, link, opts);
	cr_assert_eq(rc, 0, "uscm-sim start failed:\n%s", out);
	free(out);
	char d[512];
	snprintf(d, sizeof(d), "%s/f", lt_dir);
	setenv("USCM_SIM_DIR", d, 1);
	strncat(d, "/hosts", sizeof(d) - strlen(d) - 1);
	setenv("USCM_HOSTS", d, 1);
	if (lt_daemon) {
		/* shell commands name their node in USCM_SIM_NODE; this wrapper
		 * points USCM_SOCKET at that node's daemon (lt_util_env) */
		char w[600];
		FILE *f;

		snprintf(w, sizeof(w), "%s/nodeenv", lt_dir);
		f = fopen(w, "w");
		cr_assert(f);
		fprintf(f, "#!/bin/sh\nexport USCM_SOCKET=\"$USCM_SIM_DIR/$USCM_SIM_NODE/uscmd.sock\"\n"
			   "export USCM_MODE=daemon\nexec \"$@\"\n");
		fclose(f);
		chmod(w, 0755);
	}
}

static inline void lt_fabric_stop(void)
{
	if (!lt_dir[0])
		return;
	lt_sh(NULL, "%s/uscm-sim stop --dir %s/f >/dev/null 2>&1; rm -rf '%s'", lt_bin(), lt_dir,
	      lt_dir);
	lt_dir[0] = 0;
	lt_daemon = 0;
	unsetenv("USCM_SOCKET");
	unsetenv("USCM_MODE");
}

/* The test changed a CM knob (USCM_CM_*, USCM_SA_*) in its environment:
 * in daemon mode the CM is the daemons', which read it when they start,
 * so they start again with it (in-process mode reads it at the first call). */
static inline void lt_knobs_changed(void)
{
	char *out = NULL;

	if (!lt_daemon)
		return;
	for (int n = 1; n <= 2; n++) {
		int rc = lt_sh(&out, "%s/uscm-sim uscmd --dir %s node%d restart 2>&1", lt_bin(),
			       getenv("USCM_SIM_DIR"), n);

		cr_assert_eq(rc, 0, "uscm-sim uscmd node%d restart: %s", n, out);
		free(out);
		out = NULL;
	}
}

/* Node n has no CM (a "dead" node: nothing answers its MADs): in
 * in-process mode that is a node no process of the test uses; in daemon
 * mode its uscmd is stopped. */
static inline void lt_node_without_cm(int n)
{
	char *out = NULL;

	if (!lt_daemon)
		return;
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim uscmd --dir %s node%d stop 2>&1", lt_bin(),
			   getenv("USCM_SIM_DIR"), n),
		     0, "%s", out);
	free(out);
}

/* Become node n of the fabric (before the first rdma_* call). */
static inline void lt_node(int n)
{
	char v[32];
	snprintf(v, sizeof(v), "node%d", n);
	setenv("USCM_SIM_NODE", v, 1);
	if (lt_daemon) {
		char sock[600];

		snprintf(sock, sizeof(sock), "%s/node%d/uscmd.sock", getenv("USCM_SIM_DIR"), n);
		setenv("USCM_SOCKET", sock, 1);
		setenv("USCM_MODE", "daemon", 1);
	}
}

/* Waits (ms) for the next event on ch; returns it or NULL. */
static inline struct rdma_cm_event *lt_event(struct rdma_event_channel *ch, int ms)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev = NULL;

	if (poll(&p, 1, ms) != 1)
		return NULL;
	if (rdma_get_cm_event(ch, &ev))
		return NULL;
	return ev;
}

/* Waits for an event of type t (fails the test on another type or timeout)
 * and returns it, unacked. */
static inline struct rdma_cm_event *lt_expect(struct rdma_event_channel *ch,
					      enum rdma_cm_event_type t, int ms)
{
	struct rdma_cm_event *ev = lt_event(ch, ms);

	cr_assert(ev, "no event within %d ms (wanted %s)", ms, rdma_event_str(t));
	cr_assert_eq(ev->event, t, "got %s (status %d), wanted %s", rdma_event_str(ev->event),
		     ev->status, rdma_event_str(t));
	return ev;
}

/* Starts a two-node fabric ("ib" or "roce") with the test process as
 * node 1 (forked children call lt_node(2)). */
static inline void lt_fabric_node1(const char *link)
{
	lt_fabric_start(link, 2);
	lt_node(1);
}

/* Suite hooks: TestSuite(x, .init = lt_init_ib, .fini = lt_fini). */
static inline void lt_init_ib(void)
{
	lt_fabric_node1("ib");
}

static inline void lt_init_roce(void)
{
	lt_fabric_node1("roce");
}

static inline void lt_fini(void)
{
	lt_fabric_stop();
}

/* The environment prefix (shell syntax) that runs an unmodified binary
 * (rdmacm-utils) over uscm's librdmacm on this test's fabric; in the ASan
 * build the sanitizer runtimes are preloaded into it. */
static inline const char *lt_util_env(void)
{
	static char buf[4096];
	char *asan = NULL, *ubsan = NULL;

	/* A client that starts before the server's CM agent exists sends its
	 * REQ into the void (no agent, no answer): a short CM response timeout
	 * (14: 67 ms) makes the REQ retry come within ~0.2 s, not ~4.4 s. */
	snprintf(buf, sizeof(buf),
		 "LD_LIBRARY_PATH='%s/lib:%s/sim/lib' USCM_SIM_DIR='%s' USCM_HOSTS='%s/hosts' USCM_CM_RESPONSE_TIMEOUT=14",
		 lt_build(), lt_build(), getenv("USCM_SIM_DIR"), getenv("USCM_SIM_DIR"));
#ifdef USCM_SANITIZED
	/* The library is built with ASan/UBSan; rping is not: preload the
	 * runtimes (rping's own leaks are not ours to report). */
	lt_sh(&asan, "gcc -print-file-name=libasan.so | tr -d '\\n'");
	lt_sh(&ubsan, "gcc -print-file-name=libubsan.so | tr -d '\\n'");
	size_t n = strlen(buf);
	snprintf(buf + n, sizeof(buf) - n, " LD_PRELOAD='%s %s' ASAN_OPTIONS=detect_leaks=0", asan,
		 ubsan);
#endif
	if (lt_daemon) {
		/* last: a command, not an assignment */
		size_t end = strlen(buf);

		snprintf(buf + end, sizeof(buf) - end, " %s/nodeenv", lt_dir);
	}
	free(asan);
	free(ubsan);
	return buf;
}

/* Skips the test unless BIN is installed (from Debian's package PKG:
 * scripts/install-deps.sh installs it, so CI fails on such a skip). */
static inline void lt_need(const char *bin, const char *pkg)
{
	if (lt_sh(NULL, "command -v %s >/dev/null", bin) != 0)
		tf_skip_missing("%s (Debian %s) is not installed", bin, pkg);
}

/* Runs a command line as a program of node N on this test's fabric, for
 * 20 s at most; its status, its output (stdout and stderr) in *out. */
static inline int lt_on_node(int n, char **out, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline int lt_on_node(int n, char **out, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return lt_sh(out, "USCM_SIM_NODE=node%d %s timeout 20 %s 2>&1", n, lt_util_env(), cmd);
}
/* Unmodified rping across this test's fabric: the server on node S, the
 * client on node C to 127.10.0.S, 3 pings; the client is run again while
 * the server does not listen yet (REJECTED); both must exit 0. */
static inline void lt_rping_pair(int s, int c)
{
	char *out = NULL, *sout = NULL;
	int st = -1;

	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node%d %s timeout 30 rping -s -C 3 >%s/server.out 2>&1; "
			   "echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   s, lt_util_env(), lt_dir, lt_dir),
		     0);
	for (int i = 0; i < 50; i++) {
		free(out);
		out = NULL;
		st = lt_on_node(c, &out, "rping -c -a 127.10.0.%d -v -C 3", s);
		if (st == 0 || !strstr(out, "REJECTED"))
			break;
		usleep(100 * 1000); /* the server did not listen yet */
	}
	cr_expect_eq(st, 0, "rping -c exited %d:\n%s", st, out);
	cr_expect(strstr(out, "ping data: rdma-ping-2"), "%s", out);
	free(out);
	for (int i = 0; i < 100 && lt_sh(NULL, "test -s %s/server.rc", lt_dir) != 0; i++)
		usleep(100 * 1000);
	lt_sh(&sout, "cat %s/server.rc %s/server.out", lt_dir, lt_dir);
	cr_expect(sout[0] == '0', "rping -s:\n%s", sout);
	free(sout);
}


/* ---- a second process: a forked child ------------------------------------------ */

/* In a forked child (no Criterion asserts there): a failed check says
 * where and why on stderr and exits 1, which lt_reap reports. */
/* The path a test hands rdma_set_option(RDMA_OPTION_IB_PATH): primary and
 * bidirectional, LID 2 -> 3 (node1 -> node2 of the built-in SM's default
 * fabric), default P_Key, MTU 1024, lifetime 14, reversible, one path. */
static inline void lt_ib_path_data(struct ibv_path_data *pd, const uint8_t *sgid, const uint8_t *dgid)
{
	memset(pd, 0, sizeof(*pd));
	pd->flags = IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL;
	memcpy(pd->path.sgid.raw, sgid, 16);
	memcpy(pd->path.dgid.raw, dgid, 16);
	pd->path.slid = htobe16(2);
	pd->path.dlid = htobe16(3);
	pd->path.pkey = htobe16(0xFFFF);
	pd->path.mtu = 0x80 | IBV_MTU_1024;
	pd->path.packetlifetime = 0x80 | 14;
	pd->path.reversible_numpath = 0x81;
}

#define LT_CK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "child %s:%d: %s (errno %d: %s)\n", __FILE__,      \
				__LINE__, #c, errno, strerror(errno));                    \
			_exit(1);                                                         \
		}                                                                         \
	} while (0)

struct lt_pipes {
	int ready[2]; /* child -> parent */
	int go[2];    /* parent -> child */
};

/* The next byte the child writes to p->ready[1], waiting at most ms (the
 * test fails with `what` when none comes). */
static inline char lt_child_says(struct lt_pipes *p, int ms, const char *what)
{
	struct pollfd pf = { .fd = p->ready[0], .events = POLLIN };
	char c = 0;

	cr_assert_eq(poll(&pf, 1, ms), 1, "%s", what);
	cr_assert_eq(read(p->ready[0], &c, 1), 1, "%s: the child died", what);
	return c;
}

/* Forks child(mode, p) with the two pipes made (no wait). */
static inline pid_t lt_fork_child(void (*child)(int mode, struct lt_pipes *p), int mode,
				  struct lt_pipes *p)
{
	pid_t pid;

	cr_assert_eq(pipe(p->ready), 0);
	cr_assert_eq(pipe(p->go), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		child(mode, p);
		_exit(0);
	}
	return pid;
}

/* Forks child(mode, p) and waits (10 s) for the first byte it writes to
 * p->ready[1] (it is listening / has joined). */
static inline pid_t lt_spawn(void (*child)(int mode, struct lt_pipes *p), int mode,
			     struct lt_pipes *p)
{
	pid_t pid = lt_fork_child(child, mode, p);

	lt_child_says(p, 10000, "the child did not get ready");
	return pid;
}

/* Waits (20 s) for the child to exit 0. */
static inline void lt_reap(pid_t pid)
{
	int st = 0;
	uint64_t t0 = lt_now_ms();

	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (lt_now_ms() - t0 > 20000) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			cr_assert_fail("the child hung");
		}
		usleep(10000);
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child failed (status 0x%x)", st);
}

/* One completion on cq within ms (polling), or 0. */
static inline int lt_wait_cq(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	int n = 0;

	lt_wait_until((n = ibv_poll_cq(cq, 1, wc)) != 0, ms);
	return n;
}

/* An RC QP's init attributes for rdma_create_qp with the id's own CQs:
 * 4 WRs and 1 SGE each way. */
static inline void lt_rc_qp_attr(struct ibv_qp_init_attr *qa)
{
	memset(qa, 0, sizeof(*qa));
	qa->qp_type = IBV_QPT_RC;
	qa->cap.max_send_wr = qa->cap.max_recv_wr = 4;
	qa->cap.max_send_sge = qa->cap.max_recv_sge = 1;
}

static inline struct sockaddr_in lt_sin(const char *ip, uint16_t port)
{
	struct sockaddr_in s;

	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

/* In a child: the next event on ch, which must be of type t (10 s). */
static inline struct rdma_cm_event *lt_child_wait(struct rdma_event_channel *ch,
						  enum rdma_cm_event_type t)
{
	struct rdma_cm_event *ev = lt_event(ch, 10000);

	if (!ev || ev->event != t)
		fprintf(stderr, "child: wanted %s, got %s (status %d)\n", rdma_event_str(t),
			ev ? rdma_event_str(ev->event) : "nothing", ev ? ev->status : 0);
	LT_CK(ev && ev->event == t);
	return ev;
}

/* In a child: resolves id's address (to dst) and route, 2 s each, and acks
 * both events. */
static inline void lt_child_resolve(struct rdma_event_channel *ch, struct rdma_cm_id *id,
				    const struct sockaddr_in *dst)
{
	LT_CK(rdma_resolve_addr(id, NULL, (struct sockaddr *)dst, 2000) == 0);
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	LT_CK(rdma_resolve_route(id, 2000) == 0);
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
}

#endif
