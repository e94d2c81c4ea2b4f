/*
 * uscmd against a hostile local user (uid nobody, 65534): everything such a
 * user can make the host's daemon hold is bounded per uid, the host keeps
 * a reserve for root, event channels are only what they claim to be, and
 * a uid with many clients gets no more of the daemon's time than a uid
 * with one. Each test asserts the refusal (its errno, docs/operators.md
 * "Limits and options") and that a victim of another uid keeps working
 * through the same daemon.
 *
 * The hostile clients are forked children that setresuid() to nobody (or
 * a neighbouring uid) before they connect, and speak the request protocol
 * (lib/usp_proto.h) themselves, as test_lib_uscmd_isolation.c does: no
 * library state to share with the test process. The daemons get small
 * limits from the environment (USCM_MAX_*), so the limits are reached in
 * a few thousand requests.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <sys/un.h>

#include "libtest.h"
#include "usptest.h"

#define NOBODY 65534

/* ASan's redzones and quarantine (freed memory it holds back) add to
 * uscmd's RSS: 4 MiB of queued frames cost ~33 MB there */
#ifdef USCM_SANITIZED
#define RSS_SLACK_KB (64 * 1024)
#else
#define RSS_SLACK_KB 0
#endif

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(limits, .fini = teardown, .timeout = 180);

/* ---- the request protocol, by hand (usptest.h; children use it too) ---------------------- */

static int raw_connect(int node)
{
	int fd = ut_connect(node);
	struct timeval tv = { .tv_sec = 10 };

	/* a daemon that stops answering fails the test, not hangs it */
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

#define req ut_req
#define hello ut_hello
#define new_chan ut_chan

static uint32_t new_id(int fd, uint32_t chan, int *err)
{
	struct usp_create_id b = { .chan = chan, .ps = RDMA_PS_TCP, .qp_type = IBV_QPT_RC };
	struct usp_handle r = { 0 };

	*err = req(fd, USP_CREATE_ID, 0, &b, sizeof(b), -1, &r, sizeof(r));
	return r.handle;
}

static int post_user(int fd, uint32_t id, uint64_t arg)
{
	struct usp_post_event ev = { .event = RDMA_CM_EVENT_USER, .status = 0, .arg = arg };

	return req(fd, USP_POST_EVENT, id, &ev, sizeof(ev), -1, NULL, 0);
}

/* The daemon's --status text, asked on connection fd (malloc'd, or NULL
 * with *err set). */
static char *status_on(int fd, int *err)
{
	static char buf[USP_MAX_REPLY];

	memset(buf, 0, sizeof(buf));
	*err = req(fd, USP_STATUS, 0, NULL, 0, -1, buf, sizeof(buf) - 1);
	return *err ? NULL : strdup(buf);
}

/* ---- the test's side ------------------------------------------------------------------------ */

/* A fabric whose daemons have the limits in env ("NAME=value ..."), the
 * test's directory traversable by nobody (the socket is 0666). */
static void start(const char *env)
{
	char *copy = strdup(env), *save = NULL;

	if (geteuid() != 0)
		cr_skip_test("the hostile clients switch to uid nobody: needs root (CI runs as root)");
	for (char *kv = strtok_r(copy, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
		char *eq = strchr(kv, '=');

		cr_assert(eq, "%s", kv);
		*eq = 0;
		setenv(kv, eq + 1, 1);
	}
	free(copy);
	setenv("USCM_CM_RESPONSE_TIMEOUT", "14", 1);
	lt_fabric_start_daemon("ib", 2);
	cr_assert_eq(chmod(lt_dir, 0755), 0);
}

/* Node 1's daemon reported no sanitizer error (the ASan build) and is
 * still serving: what the hostile clients did never crashed it. */
static void daemon_clean(void)
{
	char log[600];
	int fd;

	snprintf(log, sizeof(log), "%s/node1/uscmd.log", getenv("USCM_SIM_DIR"));
	cr_expect(!lt_file_has(log, "Sanitizer") && !lt_file_has(log, "runtime error"),
		  "uscmd's log (%s) has a sanitizer report", log);
	fd = raw_connect(1);
	cr_expect(fd >= 0 && hello(fd) == 0, "node 1's uscmd no longer answers");
	if (fd >= 0)
		close(fd);
}

/* The daemon of node 1 as root sees it. */
static char *root_status(void)
{
	int fd = raw_connect(1), err = 0;
	char *s;

	cr_assert_geq(fd, 0, "connect: %s", strerror(errno));
	cr_assert_eq(hello(fd), 0);
	s = status_on(fd, &err);
	cr_assert(s, "status: %s", strerror(err));
	close(fd);
	return s;
}

static pid_t uscmd_pid(void)
{
	char *s = root_status(), *p = strstr(s, "uscmd: pid ");
	pid_t pid = p ? (pid_t)atoi(p + 11) : -1;

	free(s);
	cr_assert_gt(pid, 0);
	return pid;
}

static long rss_kb(pid_t pid)
{
	return lt_status_kb(pid, "VmRSS:");
}

static long mem_available_kb(void)
{
	return lt_proc_kb("/proc/meminfo", "MemAvailable:");
}

/* Fork a child that becomes uid (and gid) and runs fn(arg, result pipe);
 * its pid; *rd: the pipe's read end. uid 0: stays root. */
static pid_t spawn_as(uid_t uid, void (*fn)(int arg, int wr), int arg, int *rd)
{
	int p[2];
	pid_t pid;

	cr_assert_eq(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[0]);
		if (uid != 0) {
			LT_CK(setgroups(0, NULL) == 0);
			LT_CK(setresgid(uid, uid, uid) == 0);
			LT_CK(setresuid(uid, uid, uid) == 0);
		}
		fn(arg, p[1]);
		_exit(0);
	}
	close(p[1]);
	*rd = p[0];
	return pid;
}

/* Reads exactly n bytes a child wrote (its result), within ms. */
static void child_result(int rd, void *buf, size_t n, int ms)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd pf = { .fd = rd, .events = POLLIN };
		ssize_t k;

		cr_assert_eq(poll(&pf, 1, ms), 1, "a child said nothing within %d ms", ms);
		k = read(rd, (char *)buf + got, n - got);
		cr_assert_gt(k, 0, "a child exited before its result (see its stderr)");
		got += (size_t)k;
	}
}

static void reap(pid_t pid)
{
	int st = 0;

	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
}

/* A victim of another uid, through node 1's daemon: a channel, an id, a
 * user event posted and read back, the id destroyed. 0, or what failed. */
static const char *victim_works(void)
{
	int fd = raw_connect(1), mine = -1, err;
	uint32_t ch, id;
	struct usp_event ev;
	struct pollfd pf;
	const char *why = NULL;

	if (fd < 0)
		return "connect";
	if (hello(fd) != 0)
		why = "hello";
	else if (new_chan(fd, &ch, &mine) != 0)
		why = "channel";
	else if ((id = new_id(fd, ch, &err)), err)
		why = "create_id";
	else if (post_user(fd, id, 42) != 0)
		why = "post";
	else {
		pf.fd = mine;
		pf.events = POLLIN;
		if (poll(&pf, 1, 5000) != 1 || recv(mine, &ev, sizeof(ev), 0) != sizeof(ev) ||
		    ev.event != RDMA_CM_EVENT_USER || ev.arg != 42)
			why = "the user event";
		else if (req(fd, USP_DESTROY_ID, id, NULL, 0, -1, NULL, 0) != 0)
			why = "destroy_id";
	}
	if (mine >= 0)
		close(mine);
	close(fd);
	return why;
}

static void victim_child(int arg, int wr)
{
	const char *why = victim_works();
	char b[64];

	(void)arg;
	snprintf(b, sizeof(b), "%s", why ? why : "ok");
	LT_CK(write(wr, b, sizeof(b)) == sizeof(b));
}

/* victim_works as a process of uid. */
static void victim_as(uid_t uid)
{
	int rd;
	char b[64];
	pid_t pid = spawn_as(uid, victim_child, 0, &rd);

	child_result(rd, b, sizeof(b), 30000);
	close(rd);
	reap(pid);
	cr_expect_str_eq(b, "ok", "the victim of uid %u failed at: %s", (unsigned)uid, b);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

struct lat { double p50, p99, max; };

/* n create+destroy round trips of a fresh raw client of uid: their
 * latency in ms. */
static void lat_child(int n, int wr)
{
	int fd = raw_connect(1), mine, err;
	uint32_t ch;
	double *t = calloc((size_t)n, sizeof(*t));
	struct lat l;

	LT_CK(fd >= 0 && t);
	LT_CK(hello(fd) == 0);
	LT_CK(new_chan(fd, &ch, &mine) == 0);
	for (int i = 0; i < n; i++) {
		struct timespec a, b;
		uint32_t id;

		clock_gettime(CLOCK_MONOTONIC, &a);
		id = new_id(fd, ch, &err);
		LT_CK(err == 0);
		LT_CK(req(fd, USP_DESTROY_ID, id, NULL, 0, -1, NULL, 0) == 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		t[i] = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_double);
	l.p50 = t[n / 2];
	l.p99 = t[(n * 99) / 100];
	l.max = t[n - 1];
	LT_CK(write(wr, &l, sizeof(l)) == sizeof(l));
}

static struct lat victim_latency(uid_t uid, int n)
{
	int rd;
	pid_t pid = spawn_as(uid, lat_child, n, &rd);
	struct lat l;

	child_result(rd, &l, sizeof(l), 120000);
	close(rd);
	reap(pid);
	return l;
}

/* ---- (a) ids ----------------------------------------------------------------------------------- */

/* Creates ids (on one channel) until refused; writes {count, errno}, then
 * holds them until killed. */
static void id_hog(int arg, int wr)
{
	int fd = raw_connect(1), mine, err = 0, r[2];
	uint32_t ch;

	(void)arg;
	LT_CK(fd >= 0);
	LT_CK(hello(fd) == 0);
	LT_CK(new_chan(fd, &ch, &mine) == 0);
	r[0] = 0;
	for (;;) {
		new_id(fd, ch, &err);
		if (err)
			break;
		r[0]++;
	}
	r[1] = err;
	LT_CK(write(wr, r, sizeof(r)) == sizeof(r));
	pause();
}

Test(limits, ids_per_uid_and_the_host_budget_keep_a_reserve_for_root)
{
	enum { PER_UID = 1000, TOTAL = 3000, RESERVE = 500, PROCS = 8 };
	static const uid_t hogs[3] = { NOBODY, NOBODY - 1, NOBODY - 2 };
	pid_t pids[3][PROCS], upid;
	int got[3] = { 0 }, errs[3] = { 0 };
	long rss0, rss1;
	char *st;

	start("USCM_MAX_IDS=1000000 USCM_MAX_IDS_PER_UID=1000 USCM_MAX_IDS_TOTAL=3000 USCM_RESERVE_IDS=500");
	upid = uscmd_pid();
	rss0 = rss_kb(upid);
	/* 8 processes of each uid at once, each until refused; the third
	 * uid meets the host's budget (3000 - root's 500) before its own */
	for (int u = 0; u < 3; u++) {
		int rd[PROCS];

		for (int i = 0; i < PROCS; i++)
			pids[u][i] = spawn_as(hogs[u], id_hog, 0, &rd[i]);
		for (int i = 0; i < PROCS; i++) {
			int r[2];

			child_result(rd[i], r, sizeof(r), 60000);
			close(rd[i]);
			got[u] += r[0];
			if (u < 2)
				cr_expect_eq(r[1], EMFILE, "uid %u: refused with %s, not EMFILE (per uid)",
					     (unsigned)hogs[u], strerror(r[1]));
			else if (r[1] != EMFILE)
				errs[u] = r[1];
		}
	}
	cr_expect_eq(got[0], PER_UID, "uid nobody's 8 processes held %d ids", got[0]);
	cr_expect_eq(got[1], PER_UID, "the second uid's held %d ids", got[1]);
	cr_expect_eq(got[2], TOTAL - RESERVE - 2 * PER_UID, "the third uid's held %d ids", got[2]);
	cr_expect_eq(errs[2], ENOMEM, "the host's budget refused with %s, not ENOMEM", strerror(errs[2]));
	st = root_status();
	cr_expect(strstr(st, "host: ids=2500/3000"), "%s", st);
	free(st);
	/* root is served from its reserve: a raw client's ids, an rping pair */
	{
		int fd = raw_connect(1), mine, err = 0;
		uint32_t ch;

		cr_assert_eq(hello(fd), 0);
		cr_assert_eq(new_chan(fd, &ch, &mine), 0);
		for (int i = 0; i < 100; i++) {
			new_id(fd, ch, &err);
			cr_assert_eq(err, 0, "root's id %d: %s", i, strerror(err));
		}
		close(fd);
		close(mine);
	}
	cr_expect_eq(victim_works(), NULL, "root's victim client failed");
	lt_rping_pair(1, 1);
	rss1 = rss_kb(upid);
	fprintf(stderr, "ids: uscmd RSS %ld kB -> %ld kB holding 2500 ids of three uids\n", rss0, rss1);
	/* 2500 ids and 24 clients: a few MB (the audit saw 900 MB for 2^20 ids) */
	cr_expect_lt(rss1 - rss0, RSS_SLACK_KB + 32 * 1024, "uscmd grew by %ld kB", rss1 - rss0);
	for (int u = 0; u < 3; u++)
		for (int i = 0; i < PROCS; i++)
			reap(pids[u][i]);
	daemon_clean();
}

/* ---- (c) namespaces ------------------------------------------------------------------------- */

/* A client in a user and network namespace of its own (which any user may
 * make): an id bound to a wildcard address on an ephemeral port in each
 * of the four port spaces. Writes {ids bound, errno of the first failure}. */
static void netns_hog(int arg, int wr)
{
	static const struct {
		enum rdma_port_space ps;
		enum ibv_qp_type qpt;
	} sp[] = { { RDMA_PS_TCP, IBV_QPT_RC },
		   { RDMA_PS_UDP, IBV_QPT_UD },
		   { RDMA_PS_IPOIB, IBV_QPT_UD },
		   { RDMA_PS_IB, IBV_QPT_RC } };
	int r[2] = { 0 }, fd = -1, mine;
	uint32_t ch = 0;

	(void)arg;
	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0)
		r[1] = errno;
	else if ((fd = raw_connect(1)) < 0 || hello(fd) != 0 || new_chan(fd, &ch, &mine) != 0)
		r[1] = ECONNREFUSED;
	for (size_t i = 0; !r[1] && i < sizeof(sp) / sizeof(sp[0]); i++) {
		struct usp_create_id b = { .chan = ch, .ps = sp[i].ps, .qp_type = sp[i].qpt };
		struct usp_handle h = { 0 };
		struct usp_addr bind;

		memset(&bind, 0, sizeof(bind));
		*(struct sockaddr_in *)&bind.addr = lt_sin("0.0.0.0", 0);
		if (!(r[1] = req(fd, USP_CREATE_ID, 0, &b, sizeof(b), -1, &h, sizeof(h))) &&
		    !(r[1] = req(fd, USP_BIND, h.handle, &bind, sizeof(bind), -1, NULL, 0)))
			r[0]++;
	}
	LT_CK(write(wr, r, sizeof(r)) == sizeof(r));
	pause();
}

/* Port spaces are per namespace, and a user makes namespaces at will (one
 * per client): what a namespace's bound ports cost the daemon is what its
 * ids cost, not a table per port space per namespace (256 KiB each: 64
 * such clients made uscmd hold 64 MiB more). */
Test(limits, a_client_namespace_costs_what_its_ids_cost)
{
	enum { CLIENTS = 64 };
	pid_t pids[CLIENTS], upid;
	long data0, data1, rss0, rss1;
	int bound = 0;

	start("USCM_MAX_CLIENTS_PER_UID=1024");
	if (lt_sh(NULL, "setpriv --reuid=65534 --regid=65534 --clear-groups unshare -Urn true") != 0)
		cr_skip_test("user namespaces are not open to unprivileged users here");
	upid = uscmd_pid();
	data0 = lt_status_kb(upid, "VmData:");
	rss0 = rss_kb(upid);
	for (int i = 0; i < CLIENTS; i++) {
		int rd, r[2];

		pids[i] = spawn_as(NOBODY, netns_hog, 0, &rd);
		child_result(rd, r, sizeof(r), 20000);
		close(rd);
		cr_expect_eq(r[1], 0, "client %d in its namespace: %s", i, strerror(r[1]));
		bound += r[0];
	}
	data1 = lt_status_kb(upid, "VmData:");
	rss1 = rss_kb(upid);
	fprintf(stderr,
		"namespaces: %d clients each in its own netns, %d ids bound: uscmd VmData %ld -> %ld kB,"
		" RSS %ld -> %ld kB\n",
		CLIENTS, bound, data0, data1, rss0, rss1);
	cr_expect_eq(bound, 4 * CLIENTS, "%d of %d binds", bound, 4 * CLIENTS);
	/* 256 ids and 64 namespaces: well under 8 MiB (before: 64 MiB of
	 * bind tables alone) */
	cr_expect_lt(data1 - data0, RSS_SLACK_KB + 8 * 1024, "uscmd's data grew by %ld kB",
		     data1 - data0);
	cr_expect_lt(rss1 - rss0, RSS_SLACK_KB + 8 * 1024, "uscmd grew by %ld kB", rss1 - rss0);
	cr_expect_eq(victim_works(), NULL, "root's victim client failed");
	lt_rping_pair(1, 1);
	for (int i = 0; i < CLIENTS; i++)
		reap(pids[i]);
	daemon_clean();
}

/* A client in a namespace of its own with lo up and n addresses
 * 10.77.x.y/32 on it: binds 127.0.0.1 (an address of the namespace:
 * checked against uscmd's cache of its addresses). Writes {0, errno of
 * the bind}, then the daemon's --status as it sees it. */
static void netns_addrs_client(int n, int wr)
{
	int r[2] = { 0 }, fd = -1, mine, err = 0;
	uint32_t ch = 0, id;
	char cmd[256];
	struct usp_addr bind;

	/* dumpable again after setresuid, or /proc/self is root's */
	LT_CK(prctl(PR_SET_DUMPABLE, 1) == 0);
	LT_CK(unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0);
	/* root in it (as unshare -Ur), so that ip keeps the capabilities */
	{
		static const char *const f[3] = { "/proc/self/setgroups", "/proc/self/uid_map",
						  "/proc/self/gid_map" };
		char map[32];

		snprintf(map, sizeof(map), "0 %d 1", NOBODY);
		for (int i = 0; i < 3; i++) {
			const char *v = i ? map : "deny";
			int m = open(f[i], O_WRONLY | O_CLOEXEC);

			LT_CK(m >= 0 && write(m, v, strlen(v)) == (ssize_t)strlen(v));
			close(m);
		}
	}
	/* one ip process for all of them: a batch on stdin */
	snprintf(cmd, sizeof(cmd),
		 "{ echo 'link set lo up'; i=0; while [ $i -lt %d ]; do"
		 " echo \"addr add 10.77.$((i / 250)).$((i %% 250 + 1))/32 dev lo\"; i=$((i + 1)); done; }"
		 " | ip -batch - >/dev/null",
		 n);
	LT_CK(system(cmd) == 0);
	LT_CK((fd = raw_connect(1)) >= 0 && hello(fd) == 0 && new_chan(fd, &ch, &mine) == 0);
	id = new_id(fd, ch, &err);
	LT_CK(err == 0);
	memset(&bind, 0, sizeof(bind));
	*(struct sockaddr_in *)&bind.addr = lt_sin("127.0.0.1", 0);
	r[1] = req(fd, USP_BIND, id, &bind, sizeof(bind), -1, NULL, 0);
	LT_CK(write(wr, r, sizeof(r)) == sizeof(r));
	{
		char *st = status_on(fd, &err);
		size_t len = st ? strlen(st) : 0;

		LT_CK(write(wr, &len, sizeof(len)) == sizeof(len));
		LT_CK(!len || write(wr, st, len) == (ssize_t)len);
	}
	pause();
}

/* What uscmd keeps of a client namespace's addresses is bounded (256, the
 * cache the binds are checked against): a namespace with 202 (200, lo's
 * 127.0.0.1 and ::1) binds one of them; one with 302 gets EADDRNOTAVAIL,
 * and --status says why. */
Test(limits, a_client_namespaces_address_cache_is_bounded)
{
	static const struct {
		int n, err;
		const char *status;
	} cases[] = { { 200, 0, " 202\n" }, { 300, EADDRNOTAVAIL, " >256 (none kept)\n" } };

	start("");
	if (lt_sh(NULL, "setpriv --reuid=65534 --regid=65534 --clear-groups unshare -Urn true") != 0)
		cr_skip_test("user namespaces are not open to unprivileged users here");
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		int rd, r[2];
		size_t len = 0;
		char *st;
		pid_t pid = spawn_as(NOBODY, netns_addrs_client, cases[c].n, &rd);

		child_result(rd, r, sizeof(r), 20000);
		child_result(rd, &len, sizeof(len), 5000);
		cr_assert_lt(len, (size_t)USP_MAX_REPLY);
		st = calloc(1, len + 1);
		if (len)
			child_result(rd, st, len, 5000);
		close(rd);
		cr_expect_eq(r[1], cases[c].err, "%d addresses: the bind gave %s, not %s", cases[c].n,
			     strerror(r[1]), strerror(cases[c].err));
		cr_expect(strstr(st, cases[c].status), "%d addresses: no '%s' in\n%s", cases[c].n,
			  cases[c].status, st);
		free(st);
		reap(pid);
	}
	cr_expect_eq(victim_works(), NULL, "root's victim client failed");
	daemon_clean();
}

/* ---- (b) channels and unread events ----------------------------------------------------------- */

/* Opens channels until refused, an id on each, then posts user events
 * round robin, never reading, until a post is refused or the client is
 * dropped. Writes {channels, channel errno, posts, post errno}. */
static void event_hog(int arg, int wr)
{
	enum { CHANS = 256 };
	int fd = raw_connect(1), mine[CHANS], r[4] = { 0 }, err = 0, n;
	uint32_t ch[CHANS], id[CHANS];

	(void)arg;
	LT_CK(fd >= 0);
	LT_CK(hello(fd) == 0);
	for (n = 0; n < CHANS; n++)
		if ((r[1] = new_chan(fd, &ch[n], &mine[n])) != 0)
			break;
	r[0] = n;
	for (int i = 0; i < n; i++) {
		id[i] = new_id(fd, ch[i], &err);
		LT_CK(err == 0);
	}
	for (int i = 0; n && i < 200000; i++) {
		err = post_user(fd, id[i % n], (uint64_t)i);
		if (err) {
			r[3] = err;
			break;
		}
		r[2]++;
	}
	LT_CK(write(wr, r, sizeof(r)) == sizeof(r));
	pause();
}

Test(limits, unread_events_cost_bounded_memory)
{
	enum { CLIENTS = 16, PER_UID_CHANS = 1024 };
	pid_t pids[CLIENTS], upid;
	int chans = 0, posts = 0, refused_chan = 0, refused_post = 0, other_err = 0;
	long rss0, rss1, avail0, avail1;

	start("USCM_MAX_CHANS=256 USCM_MAX_CHANS_PER_UID=1024 USCM_CHAN_BUFFER=16384"
	      " USCM_MAX_QUEUED_BYTES=2097152 USCM_MAX_QUEUED_BYTES_PER_UID=4194304"
	      " USCM_MAX_QUEUED_BYTES_TOTAL=16777216 USCM_RESERVE_QUEUED_BYTES=4194304");
	upid = uscmd_pid();
	rss0 = rss_kb(upid);
	avail0 = mem_available_kb();
	for (int i = 0; i < CLIENTS; i++) {
		int rd, r[4];

		/* one after the other: which clients get the uid's channels is
		 * then known (the first four) */
		pids[i] = spawn_as(NOBODY, event_hog, 0, &rd);
		child_result(rd, r, sizeof(r), 60000);
		close(rd);
		chans += r[0];
		posts += r[2];
		if (r[0] < 256) {
			refused_chan += r[1] == EMFILE;
			other_err += r[1] != EMFILE;
		}
		if (r[0]) {
			refused_post += r[3] == ENOMEM;
			other_err += r[3] != ENOMEM;
		}
	}
	rss1 = rss_kb(upid);
	/* the other jobs of a shared machine come and go: the most available
	 * of a few samples is the least of their noise */
	avail1 = mem_available_kb();
	for (int i = 0; i < 4; i++) {
		long a;

		usleep(100 * 1000);
		a = mem_available_kb();
		if (a > avail1)
			avail1 = a;
	}
	fprintf(stderr, "events: %d channels, %d user events posted and never read; uscmd RSS %ld kB -> "
			"%ld kB; MemAvailable %ld MB -> %ld MB\n",
		chans, posts, rss0, rss1, avail0 / 1024, avail1 / 1024);
	cr_expect_eq(chans, PER_UID_CHANS, "uid nobody holds %d channels", chans);
	cr_expect_eq(refused_chan, CLIENTS - PER_UID_CHANS / 256, "channels refused (EMFILE) to %d clients",
		     refused_chan);
	cr_expect_eq(refused_post, PER_UID_CHANS / 256, "posts refused (ENOMEM) to %d clients", refused_post);
	cr_expect_eq(other_err, 0, "another errno (or a client dropped) %d times", other_err);
	/* uscmd: its queue (4 MiB for the uid) and the ids; the kernel: 1024
	 * channels x 16 KiB left unread. The audit saw 2.27 GB for 1024
	 * channels; the bound here leaves room for the other jobs of a shared
	 * machine */
	cr_expect_lt(rss1 - rss0, RSS_SLACK_KB + 16 * 1024, "uscmd grew by %ld kB", rss1 - rss0);
	/* what the kernel holds, precisely: an event (~1.3 KB, more than 1
	 * KiB) costs at least 2 KiB of a socket's accounting, so a channel
	 * takes at most 16384 / 2048 + 1 before uscmd keeps them, and uscmd
	 * at most 4 MiB of them; a channel's default buffer (208 KiB) would
	 * take ~90 */
	cr_expect_leq(posts, PER_UID_CHANS * (16384 / 2048 + 1) + 4194304 / 1024,
		      "%d events taken for 1024 unread channels", posts);
	/* and the host's memory: ~25 MB expected, over 220 MB if the
	 * channels' own buffers were the bound, 2.27 GB before */
	cr_expect_lt(avail0 - avail1, 200 * 1024, "MemAvailable dropped by %ld kB", avail0 - avail1);
	/* another uid is served as before, root too */
	victim_as(NOBODY - 1);
	cr_expect_eq(victim_works(), NULL, "root's victim client failed");
	for (int i = 0; i < CLIENTS; i++)
		reap(pids[i]);
	daemon_clean();
}

/* ---- (c) what an event channel may be ---------------------------------------------------------- */

static char svc_name[108];      /* "another local service": an abstract datagram socket */
static int root_pair[2];        /* a seqpacket pair root made */

static socklen_t svc_addr(struct sockaddr_un *a)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	memcpy(a->sun_path + 1, svc_name, strlen(svc_name));
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(svc_name));
}

/* Offers the daemon every kind of fd as a channel; writes the errnos, and
 * whether the far end of its own stream pair got anything. */
static void chan_fd_child(int arg, int wr)
{
	int fd = raw_connect(1), r[8], sv[2], p[2], dg, up, okfd;
	struct sockaddr_un a;
	socklen_t al = svc_addr(&a);
	uint32_t ch;
	char c;

	(void)arg;
	LT_CK(fd >= 0);
	LT_CK(hello(fd) == 0);
	/* a datagram socket connected to the service */
	dg = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	LT_CK(dg >= 0 && connect(dg, (struct sockaddr *)&a, al) == 0);
	r[0] = req(fd, USP_CHAN_CREATE, 0, NULL, 0, dg, NULL, 0);
	/* a stream socket (a pair of its own) */
	LT_CK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	r[1] = req(fd, USP_CHAN_CREATE, 0, NULL, 0, sv[1], NULL, 0);
	/* a pipe */
	LT_CK(pipe2(p, O_CLOEXEC) == 0);
	r[2] = req(fd, USP_CHAN_CREATE, 0, NULL, 0, p[1], NULL, 0);
	/* a seqpacket end whose peer is root's (the pair root made) */
	r[3] = req(fd, USP_CHAN_CREATE, 0, NULL, 0, root_pair[1], NULL, 0);
	/* a seqpacket socket connected to uscmd itself (its peer: root) */
	up = raw_connect(1);
	LT_CK(up >= 0);
	r[4] = req(fd, USP_CHAN_CREATE, 0, NULL, 0, up, NULL, 0);
	/* none of them became a channel: there is no channel 0..3 */
	{
		struct usp_create_id x = { .ps = RDMA_PS_TCP, .qp_type = IBV_QPT_RC };

		r[5] = 0;
		for (x.chan = 0; x.chan < 4; x.chan++)
			r[5] |= req(fd, USP_CREATE_ID, 0, &x, sizeof(x), -1, NULL, 0) != EINVAL;
	}
	/* the real thing: its own seqpacket pair */
	r[6] = new_chan(fd, &ch, &okfd);
	r[7] = recv(sv[0], &c, 1, MSG_DONTWAIT) > 0;
	LT_CK(write(wr, r, sizeof(r)) == sizeof(r));
	pause();
}

Test(limits, a_channel_is_a_seqpacket_end_of_the_clients_own_uid)
{
	struct sockaddr_un a;
	socklen_t al;
	int svc, rd, r[8];
	pid_t pid;
	char c;

	start("");
	snprintf(svc_name, sizeof(svc_name), "uscm-test-svc-%d", (int)getpid());
	al = svc_addr(&a);
	svc = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(svc, 0);
	cr_assert_eq(bind(svc, (struct sockaddr *)&a, al), 0, "bind: %s", strerror(errno));
	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, root_pair), 0);
	pid = spawn_as(NOBODY, chan_fd_child, 0, &rd);
	child_result(rd, r, sizeof(r), 30000);
	close(rd);
	cr_expect_eq(r[0], EINVAL, "a connected datagram socket: %s", strerror(r[0]));
	cr_expect_eq(r[1], EINVAL, "a stream socket: %s", strerror(r[1]));
	cr_expect_eq(r[2], EBADF, "a pipe: %s", strerror(r[2]));
	cr_expect_eq(r[3], EINVAL, "a seqpacket end whose peer is root's: %s", strerror(r[3]));
	cr_expect_eq(r[4], EINVAL, "a socket connected to uscmd: %s", strerror(r[4]));
	cr_expect_eq(r[5], 0, "a refused fd became a channel");
	cr_expect_eq(r[6], 0, "its own socketpair was refused: %s", strerror(r[6]));
	cr_expect_eq(r[7], 0, "the stream pair's far end received bytes");
	/* and nothing reached root's ends */
	cr_expect_lt(recv(svc, &c, 1, MSG_DONTWAIT), 0, "the datagram service received a datagram");
	cr_expect_lt(recv(root_pair[0], &c, 1, MSG_DONTWAIT), 0, "root's pair received a frame");
	victim_as(NOBODY - 1);
	cr_expect_eq(victim_works(), NULL, "root's victim client failed");
	reap(pid);
	close(svc);
	close(root_pair[0]);
	close(root_pair[1]);
	daemon_clean();
}

/* ---- (d) fair service ---------------------------------------------------------------------------- */

/* create+destroy as fast as the daemon answers, until killed */
static void flood_child(int arg, int wr)
{
	int fd = raw_connect(1), mine, err;
	uint32_t ch;
	char c = 1;

	(void)arg;
	LT_CK(fd >= 0);
	LT_CK(hello(fd) == 0);
	LT_CK(new_chan(fd, &ch, &mine) == 0);
	LT_CK(write(wr, &c, 1) == 1);
	for (;;) {
		uint32_t id = new_id(fd, ch, &err);

		if (err || req(fd, USP_DESTROY_ID, id, NULL, 0, -1, NULL, 0) != 0)
			_exit(1);
	}
}

/* The bounds the victim is held to under the flood (ms). Measured on 2
 * shared cores before the round robin (each readable client was served 8
 * requests per wake-up): p50 3.8-3.9, p99 12.8-15.7; after: p50 0.07-0.32,
 * p99 0.6-5.4 (docs/operators.md "Fair service"). */
#define FLOOD_P50_MS 2.0
#define FLOOD_P99_MS 10.0

Test(limits, a_uid_with_64_flooding_clients_gets_one_turn)
{
	enum { FLOODERS = 64, N = 400 };
	pid_t pids[FLOODERS];
	struct lat alone, flood = { 1e9, 1e9, 1e9 };
	uint64_t t0;
	char *st;

	start("");
	alone = victim_latency(NOBODY - 1, N);
	for (int i = 0; i < FLOODERS; i++) {
		int rd;
		char c;

		pids[i] = spawn_as(NOBODY, flood_child, 0, &rd);
		child_result(rd, &c, 1, 30000);
		close(rd);
	}
	/* the best of up to three: other jobs on a shared machine add noise
	 * to one measurement, unfair service is there in every one */
	for (int k = 0; k < 3 && (flood.p50 >= FLOOD_P50_MS || flood.p99 >= FLOOD_P99_MS); k++) {
		struct lat l = victim_latency(NOBODY - 1, N);

		fprintf(stderr, "create+destroy of a victim uid, ms: alone p50 %.3f p99 %.3f max %.3f; "
				"under %d flooding clients of uid nobody p50 %.3f p99 %.3f max %.3f\n",
			alone.p50, alone.p99, alone.max, FLOODERS, l.p50, l.p99, l.max);
		if (l.p99 < flood.p99)
			flood = l;
	}
	cr_expect_lt(flood.p50, FLOOD_P50_MS, "the victim's p50 under the flood: %.3f ms", flood.p50);
	cr_expect_lt(flood.p99, FLOOD_P99_MS, "the victim's p99 under the flood: %.3f ms", flood.p99);
	/* the flood goes on while an rping pair connects */
	t0 = lt_now_ms();
	lt_rping_pair(1, 1);
	fprintf(stderr, "rping pair under the flood: %llu ms\n", (unsigned long long)(lt_now_ms() - t0));
	st = root_status();
	cr_expect(strstr(st, "malformed"), "%s", st);
	free(st);
	for (int i = 0; i < FLOODERS; i++)
		reap(pids[i]);
	daemon_clean();
}

/* ---- (e) --status --------------------------------------------------------------------------------- */

/* As nobody: its own --status view, then 30 at once. Writes {own lines,
 * lines of other uids, the "other users" line seen, the root client's pid
 * seen, answered, refused EAGAIN}. */
static void status_child(int root_pid, int wr)
{
	int fd = raw_connect(1), r[6] = { 0 }, err;
	char *s, pid[32];

	LT_CK(fd >= 0);
	LT_CK(hello(fd) == 0);
	s = status_on(fd, &err);
	LT_CK(s);
	for (char *l = strtok(s, "\n"); l; l = strtok(NULL, "\n")) {
		unsigned num, uid;
		int p;

		if (sscanf(l, "%u %d %u", &num, &p, &uid) == 3)
			r[uid == NOBODY ? 0 : 1]++;
		if (strstr(l, "clients of other users"))
			r[2] = 1;
	}
	free(s);
	s = status_on(fd, &err);
	snprintf(pid, sizeof(pid), " %d ", root_pid);
	r[3] = s && strstr(s, pid) != NULL;
	free(s);
	for (int i = 0; i < 30; i++) {
		s = status_on(fd, &err);
		r[4] += s != NULL;
		r[5] += !s && err == EAGAIN;
		free(s);
	}
	LT_CK(write(wr, r, sizeof(r)) == sizeof(r));
}

Test(limits, status_shows_other_uids_clients_to_root_only)
{
	int fd, mine, rd, r[6], err, ok = 0;
	uint32_t ch;
	pid_t pid;
	char *s, me[32];

	start("USCM_STATUS_RATE=5");
	/* root's client, with an id */
	fd = raw_connect(1);
	cr_assert_eq(hello(fd), 0);
	cr_assert_eq(new_chan(fd, &ch, &mine), 0);
	new_id(fd, ch, &err);
	cr_assert_eq(err, 0);
	pid = spawn_as(NOBODY, status_child, (int)getpid(), &rd);
	child_result(rd, r, sizeof(r), 30000);
	close(rd);
	reap(pid);
	cr_expect_eq(r[0], 1, "nobody saw %d lines of its own clients", r[0]);
	cr_expect_eq(r[1], 0, "nobody saw %d lines of other uids' clients", r[1]);
	cr_expect(r[2], "no count of the other users' clients");
	cr_expect_eq(r[3], 0, "nobody saw root's pid");
	/* 5 a second: a burst of 30 is mostly refused */
	cr_expect_leq(r[4], 8, "%d of 30 queries answered at once", r[4]);
	cr_expect_eq(r[4] + r[5], 30, "answered %d, refused %d (EAGAIN)", r[4], r[5]);
	/* root sees everyone, and is not rate-limited */
	for (int i = 0; i < 30; i++) {
		s = status_on(fd, &err);
		ok += s != NULL;
		free(s);
	}
	cr_expect_eq(ok, 30, "root's queries answered: %d", ok);
	s = root_status();
	snprintf(me, sizeof(me), " %d ", (int)getpid());
	cr_expect(strstr(s, me), "root does not see its own client:\n%s", s);
	cr_expect(!strstr(s, "clients of other users"), "%s", s);
	free(s);
	close(fd);
	close(mine);
	daemon_clean();
}

/* ---- connections per uid ----------------------------------------------------------------------- */

/* As nobody: 4 connections (the limit), a 5th refused, then the library's
 * first call; writes {hellos answered, the 5th's error, the library's
 * errno, a new connection answered after one closed}. */
static void clients_child(int arg, int wr)
{
	int fds[4], r[4] = { 0 }, extra;
	struct rdma_event_channel *ec;

	(void)arg;
	for (int i = 0; i < 4; i++) {
		fds[i] = raw_connect(1);
		r[0] += fds[i] >= 0 && hello(fds[i]) == 0;
	}
	extra = raw_connect(1);
	r[1] = extra < 0 ? -2 : hello(extra);
	if (r[1] < 0 && extra >= 0) {
		/* closed before the hello went: the refusal is still there */
		struct usp_reply rep;

		if (recv(extra, &rep, sizeof(rep), MSG_DONTWAIT) == sizeof(rep))
			r[1] = rep.err;
	}
	if (extra >= 0)
		close(extra);
	/* the library in its default mode: uscmd answers, so no fallback to
	 * in-process mode; the call says why it fails */
	lt_node(1);
	unsetenv("USCM_MODE");
	errno = 0;
	ec = rdma_create_event_channel();
	r[2] = ec ? 0 : errno;
	close(fds[0]);
	for (int i = 0; i < 200 && !r[3]; i++) {
		int f = raw_connect(1);

		r[3] = f >= 0 && hello(f) == 0;
		if (f >= 0)
			close(f);
		if (!r[3])
			usleep(10 * 1000);
	}
	LT_CK(write(wr, r, sizeof(r)) == sizeof(r));
}

Test(limits, connections_per_uid_are_refused_at_accept)
{
	int rd, r[4];
	pid_t pid;
	char *s;

	start("USCM_MAX_CLIENTS_PER_UID=4");
	pid = spawn_as(NOBODY, clients_child, 0, &rd);
	child_result(rd, r, sizeof(r), 60000);
	close(rd);
	reap(pid);
	cr_expect_eq(r[0], 4, "%d of 4 connections answered", r[0]);
	cr_expect_eq(r[1], EAGAIN, "the 5th connection: %d (%s)", r[1], r[1] > 0 ? strerror(r[1]) : "");
	cr_expect_eq(r[2], EAGAIN, "the library's first call: %s", strerror(r[2]));
	cr_expect_eq(r[3], 1, "no connection after one of the four closed");
	s = root_status();
	cr_expect(strstr(s, "clients_refused=") && !strstr(s, "clients_refused=0"), "%s", s);
	free(s);
	victim_as(NOBODY - 1);
	cr_expect_eq(victim_works(), NULL, "root's victim client failed");
	daemon_clean();
}

/* ---- requests in flight, multicast joins -------------------------------------------------------- */

/* An id of fd on ch whose address is resolved (to node 2); 0 or the step's
 * errno. */
static int resolved_id(int fd, uint32_t ch, uint32_t *id)
{
	struct usp_resolve_addr x;
	struct sockaddr_in *d = (struct sockaddr_in *)&x.dst;
	int err;

	*id = new_id(fd, ch, &err);
	if (err)
		return err;
	memset(&x, 0, sizeof(x));
	*d = lt_sin("127.10.0.2", 7999);
	x.timeout_ms = 2000;
	return req(fd, USP_RESOLVE_ADDR, *id, &x, sizeof(x), -1, NULL, 0);
}

static int resolve_route(int fd, uint32_t id)
{
	struct usp_int t = { .v = 20000 };

	return req(fd, USP_RESOLVE_ROUTE, id, &t, sizeof(t), -1, NULL, 0);
}

/* As nobody: two clients asking for routes the SA does not answer;
 * writes {A's accepted, A's refusal, B's accepted, B's refusal, B's after
 * A destroyed one of its ids, resolves done one after the other}. */
static void routes_child(int arg, int wr)
{
	int a = raw_connect(1), b = raw_connect(1), ma, mb, r[6] = { 0 }, err;
	uint32_t ca, cb, ida[5], idb[3], x;

	(void)arg;
	LT_CK(a >= 0 && b >= 0 && hello(a) == 0 && hello(b) == 0);
	LT_CK(new_chan(a, &ca, &ma) == 0 && new_chan(b, &cb, &mb) == 0);
	for (int i = 0; i < 5; i++) {
		LT_CK(resolved_id(a, ca, &ida[i]) == 0);
		err = resolve_route(a, ida[i]);
		if (err) {
			r[1] = err;
			break;
		}
		r[0]++;
	}
	for (int i = 0; i < 3; i++) {
		LT_CK(resolved_id(b, cb, &idb[i]) == 0);
		err = resolve_route(b, idb[i]);
		if (err) {
			r[3] = err;
			break;
		}
		r[2]++;
	}
	/* a destroyed id's query no longer counts */
	LT_CK(req(a, USP_DESTROY_ID, ida[0], NULL, 0, -1, NULL, 0) == 0);
	r[4] = resolve_route(b, idb[2]);
	/* resolutions end at once here (the hosts file): ten one after the
	 * other stay below a limit of 4 in flight */
	for (int i = 0; i < 10; i++)
		r[5] += resolved_id(a, ca, &x) == 0;
	LT_CK(write(wr, r, sizeof(r)) == sizeof(r));
	pause();
}

Test(limits, route_queries_in_flight_per_client_and_uid)
{
	int rd, r[6];
	pid_t pid;
	char *out = NULL;

	start("USCM_MAX_ROUTES=4 USCM_MAX_ROUTES_PER_UID=6 USCM_MAX_RESOLVES=4");
	/* the SA answers nobody: every route query stays in flight */
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim fault --dir %s 'drop=100%%,class=0x03' 2>&1", lt_bin(),
			   getenv("USCM_SIM_DIR")),
		     0, "%s", out);
	free(out);
	pid = spawn_as(NOBODY, routes_child, 0, &rd);
	child_result(rd, r, sizeof(r), 60000);
	close(rd);
	cr_expect_eq(r[0], 4, "client A: %d route queries", r[0]);
	cr_expect_eq(r[1], EAGAIN, "client A's 5th: %s", strerror(r[1]));
	cr_expect_eq(r[2], 2, "client B: %d route queries (6 for the uid)", r[2]);
	cr_expect_eq(r[3], EAGAIN, "client B's 3rd: %s", strerror(r[3]));
	cr_expect_eq(r[4], 0, "after A destroyed an id: %s", strerror(r[4]));
	cr_expect_eq(r[5], 10, "%d of 10 resolutions, one after the other", r[5]);
	/* another uid is not refused, and once the SA answers, connects */
	victim_as(NOBODY - 1);
	lt_sh(NULL, "%s/uscm-sim fault --dir %s clear >/dev/null 2>&1", lt_bin(), getenv("USCM_SIM_DIR"));
	lt_rping_pair(1, 1);
	reap(pid);
	daemon_clean();
}

static int join(int fd, uint32_t id, int k)
{
	struct usp_join j;
	struct sockaddr_in *a = (struct sockaddr_in *)&j.addr;

	memset(&j, 0, sizeof(j));
	*a = lt_sin("239.1.1.1", 0);
	a->sin_addr.s_addr = htonl(ntohl(a->sin_addr.s_addr) + (uint32_t)k);
	j.cookie = (uint64_t)k;
	return req(fd, USP_JOIN_MC, id, &j, sizeof(j), -1, NULL, 0);
}

/* A UD id whose address is resolved as mckey resolves it (node 1's
 * address to a group's), its ADDR_RESOLVED read: a device to join on. */
static uint32_t bound_id(int fd, uint32_t ch, int mine)
{
	struct usp_resolve_addr x;
	struct usp_event ev;
	struct pollfd pf = { .fd = mine, .events = POLLIN };
	struct usp_create_id c = { .chan = ch, .ps = RDMA_PS_UDP, .qp_type = IBV_QPT_UD };
	struct usp_handle h = { 0 };
	uint32_t id;

	LT_CK(req(fd, USP_CREATE_ID, 0, &c, sizeof(c), -1, &h, sizeof(h)) == 0);
	id = h.handle;
	memset(&x, 0, sizeof(x));
	*(struct sockaddr_in *)&x.src = lt_sin("127.10.0.1", 0);
	*(struct sockaddr_in *)&x.dst = lt_sin("239.1.1.1", 0);
	x.has_src = 1;
	x.timeout_ms = 2000;
	LT_CK(req(fd, USP_RESOLVE_ADDR, id, &x, sizeof(x), -1, NULL, 0) == 0);
	LT_CK(poll(&pf, 1, 10000) == 1 && recv(mine, &ev, sizeof(ev), 0) == sizeof(ev));
	LT_CK(ev.event == RDMA_CM_EVENT_ADDR_RESOLVED);
	return id;
}

/* As nobody: {A's joins, A's refusal, B's joins, B's refusal, B's join
 * after A left one}. */
static void joins_child(int arg, int wr)
{
	int a = raw_connect(1), b = raw_connect(1), ma, mb, r[5] = { 0 }, err = 0, k = 0;
	uint32_t ca, cb, ia, ib;
	struct usp_addr left;

	(void)arg;
	LT_CK(a >= 0 && b >= 0 && hello(a) == 0 && hello(b) == 0);
	LT_CK(new_chan(a, &ca, &ma) == 0 && new_chan(b, &cb, &mb) == 0);
	ia = bound_id(a, ca, ma);
	ib = bound_id(b, cb, mb);
	while (k < 20 && (err = join(a, ia, k)) == 0)
		k++;
	r[0] = k;
	r[1] = err;
	for (k = 100; k < 120 && (err = join(b, ib, k)) == 0; k++)
		r[2]++;
	r[3] = err;
	/* the first join done (its MULTICAST_JOIN), then left */
	for (;;) {
		struct usp_event ev;
		struct pollfd pf = { .fd = ma, .events = POLLIN };

		LT_CK(poll(&pf, 1, 10000) == 1 && recv(ma, &ev, sizeof(ev), 0) == sizeof(ev));
		if (ev.event == RDMA_CM_EVENT_MULTICAST_JOIN && ev.arg == 0)
			break;
		LT_CK(ev.event == RDMA_CM_EVENT_MULTICAST_JOIN);
	}
	memset(&left, 0, sizeof(left));
	*(struct sockaddr_in *)&left.addr = lt_sin("239.1.1.1", 0);
	LT_CK(req(a, USP_LEAVE_MC, ia, &left, sizeof(left), -1, NULL, 0) == 0);
	r[4] = join(b, ib, 200);
	LT_CK(write(wr, r, sizeof(r)) == sizeof(r));
	pause();
}

Test(limits, multicast_joins_per_client_and_uid)
{
	int rd, r[5];
	pid_t pid;

	start("USCM_MAX_JOINS=8 USCM_MAX_JOINS_PER_UID=12");
	pid = spawn_as(NOBODY, joins_child, 0, &rd);
	child_result(rd, r, sizeof(r), 60000);
	close(rd);
	cr_expect_eq(r[0], 8, "client A: %d joins", r[0]);
	cr_expect_eq(r[1], ENOBUFS, "client A's 9th join: %s", strerror(r[1]));
	cr_expect_eq(r[2], 4, "client B: %d joins (12 for the uid)", r[2]);
	cr_expect_eq(r[3], ENOBUFS, "client B's 5th join: %s", strerror(r[3]));
	cr_expect_eq(r[4], 0, "B's join after A left one: %s", strerror(r[4]));
	victim_as(NOBODY - 1);
	reap(pid);
	daemon_clean();
}
