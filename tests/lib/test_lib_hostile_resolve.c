/*
 * test_lib_hostile_resolve.c - rdma_resolve_addr to a neighbour that never
 * answers, in bulk: what a local user can make uscmd (root, one per host)
 * hold with it. Each such request used to cost a thread and an rtnetlink
 * socket for its whole timeout_ms, after rdma_destroy_id and after the
 * client's exit; now the process's resolver (lib/cma_resolver.c) holds
 * them in memory only, and a destroyed id's request is gone at once.
 *
 * The network is test_lib_netns.c's first veth pair, in namespaces the
 * test creates:
 *
 *   namespace A (node 1)  a0 127.10.0.1/24 ==veth== b0 127.10.0.2/24  namespace B (node 2)
 *
 * 127.10.0.77 is on a0's subnet and nobody holds it: ARP never gets an
 * answer. The test process becomes node 1 in A. In daemon mode each
 * node's uscmd runs in its node's namespace (it resolves there). Needs
 * root (namespaces, the victim as user nobody) and iproute2.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/socket.h>
#include <grp.h>
#include <sys/un.h>

#include "libtest.h"
#include "netnstest.h"

static void stop_server(void);

static void teardown(void)
{
	stop_server();
	lt_fabric_stop();
	nt_down();
}

TestSuite(hresolve, .fini = teardown, .timeout = 240);

/* The namespaces, the veth pair, the RoCE fabric (a uscmd per node in its
 * namespace when daemon); this process enters A as node 1. */
static void net_up(int daemon)
{
	nt_up("h", NT_FIRST);
	if (daemon) {
		/* what a client and a uid may have waiting in uscmd (1024 and
		 * 4096 by default): as set by the test, else above the
		 * 10,000 requests the bulk tests make, which show the
		 * mechanism, not the limit */
		setenv("USCM_MAX_RESOLVES", getenv("T_RESOLVES") ? getenv("T_RESOLVES") : "20000", 1);
		setenv("USCM_MAX_RESOLVES_PER_UID",
		       getenv("T_RESOLVES_UID") ? getenv("T_RESOLVES_UID") : "20000", 1);
		lt_fabric_start_daemon("roce", 2);
		nt_daemons_in_namespaces();
	} else {
		lt_fabric_start_opts("roce", 2, "--no-uscmd");
	}
	nt_enter_a();
}

/* Entries of a /proc directory (a process's tasks or fds), -1 if gone. */
static int dir_count(int pid, const char *what)
{
	char path[64];
	struct dirent *e;
	DIR *d;
	int n = 0;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/%s", pid, what);
	else
		snprintf(path, sizeof(path), "/proc/self/%s", what);
	if (!(d = opendir(path)))
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return pid ? n : n - (!strcmp(what, "fd")); /* self: the DIR's own fd */
}

static int threads(int pid)
{
	return dir_count(pid, "task");
}

static int fds(int pid)
{
	return dir_count(pid, "fd");
}

/* The pid of node n's uscmd: the peer of a connection to its socket. */
static int uscmd_pid(int n)
{
	struct sockaddr_un sa;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/node%d/uscmd.sock", getenv("USCM_SIM_DIR"), n);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "%s", strerror(errno));
	cr_assert_eq(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len), 0);
	close(fd);
	return (int)cr.pid;
}

/* `uscmd --status` of node 1 (malloc'd). */
static char *status1(void)
{
	char *out = NULL;

	lt_sh(&out, "%s/uscmd --status --socket %s/node1/uscmd.sock 2>&1", lt_bin(),
	      getenv("USCM_SIM_DIR"));
	return out;
}

/* How many requests node 1's uscmd has waiting for a neighbour (-1: no
 * answer). */
static long resolves1(void)
{
	char *out = NULL;
	long n = -1;

	if (lt_sh(&out, "%s/uscmd --status --socket %s/node1/uscmd.sock | sed -n 's/^engine:.* resolves=\\([0-9]*\\).*/\\1/p'",
		  lt_bin(), getenv("USCM_SIM_DIR")) == 0 && out && *out)
		n = atol(out);
	free(out);
	return n;
}

static struct sockaddr_in nobody_addr(void)
{
	return lt_sin("127.10.0.77", 7471);
}

/* One resolve nobody answers, over in timeout ms: the resolver exists
 * from then on (its socket, the progress thread), so that what follows
 * is measured against a process that has resolved before. */
static void warm_up(struct rdma_event_channel *ch, int timeout)
{
	struct sockaddr_in dst = nobody_addr();
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, timeout), 0, "%s",
		     strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ADDR_ERROR, timeout + 3000);
	cr_assert_eq(ev->status, -ETIMEDOUT);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
}

/* ---- daemon mode: one client, 10,000 requests ------------------------------------ */

#define HOSTILE_N 10000
#define HOSTILE_TIMEOUT_MS 600000

/* The hostile client (a forked child, daemon mode): HOSTILE_N ids, each
 * resolving an address of a0's subnet nobody holds with a 10-minute
 * timeout — 127.10.0.77 when nbs is 1, else nbs different ones from
 * 127.10.0.10 on; 'r' once all are asked. On 'd' it destroys the first half ('h'), on 'x' it checks that
 * none of them answered and exits with the other half still there (uscmd
 * destroys a dead client's ids). */
static void hostile_child(int nbs, int unused, struct lt_pipes *p)
{
	struct sockaddr_in dst = nobody_addr();
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id **ids = calloc(HOSTILE_N, sizeof(*ids));
	struct pollfd pf;
	char c;

	(void)unused; /* spawn_ready's second argument */
	LT_CK(ch && ids);
	for (int i = 0; i < HOSTILE_N; i++) {
		if (nbs > 1)
			dst.sin_addr.s_addr = htonl(0x7f0a0000u | (uint32_t)(10 + i % nbs));
		LT_CK(rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP) == 0);
		LT_CK(rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, HOSTILE_TIMEOUT_MS) == 0);
	}
	LT_CK(write(p->ready[1], "r", 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1 && c == 'd');
	for (int i = 0; i < HOSTILE_N / 2; i++)
		LT_CK(rdma_destroy_id(ids[i]) == 0);
	LT_CK(write(p->ready[1], "h", 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1 && c == 'x');
	pf.fd = ch->fd;
	pf.events = POLLIN;
	LT_CK(poll(&pf, 1, 0) == 0); /* no request answered: all were waiting */
	_exit(0);
}

static pid_t server_pid;

static void stop_server(void)
{
	if (server_pid > 0 && !lt_pid_gone(server_pid))
		kill(server_pid, SIGTERM);
	server_pid = 0;
}

/* A client child(a, b, p) in a fork, once it said 'r' within ms (lt_spawn's
 * 10 s are too short for 20,000 requests under ASan); why: the failure's
 * words. */
static pid_t spawn_ready(void (*child_fn)(int, int, struct lt_pipes *), int a, int b,
			 struct lt_pipes *p, int ms, const char *why)
{
	pid_t child;

	cr_assert_eq(pipe(p->ready), 0);
	cr_assert_eq(pipe(p->go), 0);
	fflush(NULL);
	child = fork();
	cr_assert_geq(child, 0);
	if (child == 0)
		child_fn(a, b, p);
	cr_assert_eq(lt_child_says(p, ms, why), 'r');
	return child;
}

/* The hostile client, its requests made. */
static pid_t hostile_spawn(int nbs, struct lt_pipes *p)
{
	return spawn_ready(hostile_child, nbs, 0, p, 120000, "the child did not make its requests");
}

/* The CPU time (user + system) pid has used, ms. */
static long cpu_ms(int pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	/* after "pid (comm) ": state, then fields 4.. ; utime and stime are
	 * fields 14 and 15 */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (long)((ut + st) * 1000 / (unsigned long)sysconf(_SC_CLK_TCK));
}

/* The victim (a forked child): user nobody from its first call on (uscmd
 * takes a client's credentials when it connects), node 1, so through the
 * hostile client's uscmd, whose resolver must resolve 127.10.0.2 through
 * ARP meanwhile; then route, QP and connect to node 2 until ESTABLISHED
 * (the server may not listen yet). Exits 0 once connected. */
static void victim_child(void)
{
	struct sockaddr_in dst = lt_sin("127.10.0.2", 7174);
	struct rdma_event_channel *ch;

	LT_CK(setgroups(0, NULL) == 0);
	LT_CK(setgid(65534) == 0);
	LT_CK(setuid(65534) == 0);
	ch = rdma_create_event_channel();
	LT_CK(ch);
	for (int i = 0; i < 50; i++) {
		struct rdma_cm_id *id;
		struct rdma_cm_event *ev;
		struct ibv_qp_init_attr qa;
		struct rdma_conn_param cp;
		int est;

		LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
		LT_CK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
		ev = lt_child_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
		rdma_ack_cm_event(ev);
		LT_CK(rdma_resolve_route(id, 2000) == 0);
		rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
		lt_rc_qp_attr(&qa);
		LT_CK(rdma_create_qp(id, NULL, &qa) == 0);
		memset(&cp, 0, sizeof(cp));
		cp.responder_resources = cp.initiator_depth = 1;
		cp.retry_count = cp.rnr_retry_count = 7;
		LT_CK(rdma_connect(id, &cp) == 0);
		ev = lt_event(ch, 5000);
		LT_CK(ev);
		est = ev->event == RDMA_CM_EVENT_ESTABLISHED;
		rdma_ack_cm_event(ev);
		if (est)
			_exit(0);
		rdma_destroy_qp(id);
		rdma_destroy_id(id);
		usleep(100 * 1000);
	}
	_exit(2);
}

/* The victim, user nobody, while the hostile client's requests wait in
 * node 1's uscmd: resolves 127.10.0.2 and connects to unmodified rping -s
 * on node 2 (in B, its own uscmd), within 20 s. (A connection, not rping's
 * pings: the simulated fabric carries the data of a process in a
 * namespace of its own only for root.) */
static void victim_connects(void)
{
	char pidf[600];
	uint64_t t0 = lt_now_ms();
	int st = 0;
	pid_t pid;

	lt_need("rping", "rdmacm-utils");
	/* nobody reaches uscmd's socket in the fabric's directory */
	cr_assert_eq(chmod(lt_dir, 0755), 0);
	snprintf(pidf, sizeof(pidf), "%s/server.pid", lt_dir);
	cr_assert_eq(lt_sh(NULL,
			   "(ip netns exec %s env USCM_SIM_NODE=node2 %s timeout 30 rping -s -a 127.10.0.2 -C 1"
			   " >%s/server.out 2>&1 & echo $! >%s) >/dev/null 2>&1",
			   nsb, lt_util_env(), lt_dir, pidf),
		     0);
	cr_assert(lt_wait_until((server_pid = lt_pid_file(pidf)) > 0, 5000));
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0)
		victim_child();
	while (waitpid(pid, &st, WNOHANG) == 0 && lt_now_ms() - t0 < 20000)
		usleep(10000);
	if (!lt_pid_gone(pid)) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		  "the victim (uid nobody) did not connect through uscmd (status 0x%x, %llu ms)", st,
		  (unsigned long long)(lt_now_ms() - t0));
	stop_server();
}

/* 10,000 unanswered requests of one client hold no thread and no fd of
 * uscmd's (bound: its threads exactly as before the client came, its fds
 * at most 4 more — the client's own sockets: command socket, library
 * channel, event channel — whatever the number of requests), a victim of
 * another uid resolves and connects through the same uscmd meanwhile, and
 * once the client destroyed half of its ids and exited, uscmd holds
 * nothing for it: no request, its fds and threads as before, its RSS
 * within 4 MB of what it was before (the requests and ids cost ~10x
 * that). */
Test(hresolve, ten_thousand_unanswered_in_uscmd)
{
	struct rdma_event_channel *ch;
	struct lt_pipes p;
	int pid, t0, f0, t1, f1, t2, f2;
	long r0, r1, r2, grow;
	uint64_t t_warm;
	pid_t child;
	char *st;

	net_up(1);
	if (geteuid() != 0)
		cr_skip_test("the victim as user nobody needs root");
	pid = uscmd_pid(1);
	/* this process is a client too: its sockets are in the baseline */
	ch = rdma_create_event_channel();
	cr_assert(ch);
	t_warm = lt_now_ms(); /* its trigger starts the kernel's probes */
	warm_up(ch, 200);
	cr_assert(lt_wait_until(resolves1() == 0, 2000));
	t0 = threads(pid);
	f0 = fds(pid);
	r0 = lt_status_kb(pid, "VmRSS:");
	cr_assert(t0 > 0 && f0 > 0 && r0 > 0);

	child = hostile_spawn(1, &p);
	cr_assert_eq(resolves1(), HOSTILE_N, "every request waits in uscmd");
	t1 = threads(pid);
	f1 = fds(pid);
	r1 = lt_status_kb(pid, "VmRSS:");
	cr_expect_eq(t1, t0, "uscmd's threads: %d before, %d with %d requests waiting", t0, t1,
		     HOSTILE_N);
	cr_expect_leq(f1, f0 + 4, "uscmd's fds: %d before, %d with %d requests waiting", f0, f1,
		      HOSTILE_N);

	/* a victim of another uid is served meanwhile */
	victim_connects();
	/* The kernel gives up on 127.10.0.77 after 3 probes a second apart
	 * (FAILED); the resolver asks again, as the kernel keeps asking
	 * while its request lasts: the entry is being resolved once more
	 * after that, not left FAILED. And uscmd is still flat. */
	cr_assert(lt_wait_until(lt_now_ms() - t_warm >= 4000, 5000));
	cr_expect(lt_wait_until(lt_sh(NULL, "ip -n %s neigh show 127.10.0.77 | grep -q INCOMPLETE", nsa) == 0,
				4000),
		  "127.10.0.77 not asked for again after FAILED");
	cr_expect_eq(threads(pid), t0);
	cr_expect_leq(fds(pid), f0 + 4);
	cr_expect_eq(resolves1(), HOSTILE_N, "nothing answered them");

	cr_assert_eq(write(p.go[1], "d", 1), 1);
	cr_assert_eq(lt_child_says(&p, 60000, "the child did not destroy its ids"), 'h');
	cr_expect_eq(resolves1(), HOSTILE_N / 2, "rdma_destroy_id took its request with it");
	cr_assert_eq(write(p.go[1], "x", 1), 1);
	lt_reap(child);
	/* the client is gone: uscmd destroyed its ids, and their requests */
	cr_expect(lt_wait_until(resolves1() == 0, 10000), "requests left in uscmd: %ld", resolves1());
	cr_expect(lt_wait_until(fds(pid) <= f0, 10000), "uscmd's fds: %d before, %d after", f0,
		  fds(pid));
	t2 = threads(pid);
	f2 = fds(pid);
	r2 = lt_status_kb(pid, "VmRSS:");
	st = status1();
	cr_expect(strstr(st, ", 0 ids,"), "no ids left:\n%s", st);
	free(st);
	cr_expect_eq(t2, t0, "uscmd's threads after: %d (before: %d)", t2, t0);
	cr_expect_eq(f2, f0, "uscmd's fds after: %d (before: %d)", f2, f0);
	grow = r1 - r0;
#ifndef USCM_SANITIZED
	cr_expect_leq(r2, r0 + 4096, "uscmd's RSS: %ld kB before, %ld kB with the requests, %ld kB after",
		      r0, r1, r2);
#else
	/* ASan's allocator keeps freed memory in quarantine (and malloc_trim
	 * is glibc's): RSS says nothing there; the leak check does */
	(void)r2;
#endif
	tf_warn("uscmd with %d requests waiting: threads %d -> %d, fds %d -> %d, RSS %ld -> %ld kB "
		"(+%ld), after: threads %d, fds %d, RSS %ld kB",
		HOSTILE_N, t0, t1, f0, f1, r0, r1, grow, t2, f2, r2);
	rdma_destroy_event_channel(ch);
}

/* ---- in-process ------------------------------------------------------------------- */

/* rdma_destroy_id cancels a request at once: 1,000 of them waiting cost no
 * thread and no fd of this process (the same counts as after one request
 * before), and no event comes after the destroy. */
Test(hresolve, destroy_cancels_in_process)
{
	struct sockaddr_in dst = nobody_addr();
	struct rdma_event_channel *ch;
	struct rdma_cm_id *ids[1000];
	int t0, f0;

	net_up(0);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	warm_up(ch, 200);
	t0 = threads(0);
	f0 = fds(0);
	for (int i = 0; i < 1000; i++) {
		cr_assert_eq(rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP), 0);
		cr_assert_eq(rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, HOSTILE_TIMEOUT_MS),
			     0, "%s", strerror(errno));
	}
	cr_expect_eq(threads(0), t0, "threads: %d before, %d with 1000 requests", t0, threads(0));
	cr_expect_eq(fds(0), f0, "fds: %d before, %d with 1000 requests", f0, fds(0));
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(rdma_destroy_id(ids[i]), 0);
	cr_expect_null(lt_event(ch, 300), "an event after rdma_destroy_id");
	cr_expect_eq(threads(0), t0);
	cr_expect_eq(fds(0), f0);
	rdma_destroy_event_channel(ch);
}

/* Deadlines expire in their order, whatever the order of the calls: each
 * -ETIMEDOUT no sooner than its timeout_ms. */
Test(hresolve, deadlines_in_order)
{
	static const int timeout[3] = { 900, 300, 600 };
	struct sockaddr_in dst = nobody_addr();
	struct rdma_event_channel *ch;
	struct rdma_cm_id *ids[3];
	uint64_t t0;

	net_up(0);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	t0 = lt_now_ms();
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP), 0);
		cr_assert_eq(rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, timeout[i]), 0);
	}
	for (int k = 0; k < 3; k++) {
		static const int want[3] = { 1, 2, 0 };
		struct rdma_cm_event *ev = lt_expect(ch, RDMA_CM_EVENT_ADDR_ERROR, 3000);
		uint64_t ms = lt_now_ms() - t0;

		cr_expect_eq(ev->id, ids[want[k]], "expiry %d is id %d's", k, want[k]);
		cr_expect_eq(ev->status, -ETIMEDOUT);
		cr_expect_geq(ms, (uint64_t)timeout[want[k]] - 20, "%llu ms, timeout %d",
			      (unsigned long long)ms, timeout[want[k]]);
		rdma_ack_cm_event(ev);
	}
	for (int i = 0; i < 3; i++)
		rdma_destroy_id(ids[i]);
	rdma_destroy_event_channel(ch);
}

/* Many ids waiting for the same neighbour, which appears: one ARP answer
 * completes them all, each with its route's source and the destination's
 * GID, and no thread was made for them. */
Test(hresolve, one_neighbour_many_waiters)
{
	static const uint8_t dgid[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 10, 0, 2 };
	struct sockaddr_in dst = lt_sin("127.10.0.2", 7471);
	struct rdma_event_channel *ch;
	struct rdma_cm_id *ids[50];
	int t0, seen[50] = { 0 };

	net_up(0);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	warm_up(ch, 100);
	t0 = threads(0);
	for (int i = 0; i < 50; i++) {
		cr_assert_eq(rdma_create_id(ch, &ids[i], NULL, RDMA_PS_TCP), 0);
		cr_assert_eq(rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&dst, 3000), 0);
	}
	cr_expect_eq(threads(0), t0);
	for (int k = 0; k < 50; k++) {
		struct rdma_cm_event *ev = lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 3000);

		for (int i = 0; i < 50; i++)
			if (ev->id == ids[i])
				seen[i]++;
		cr_expect_arr_eq(ev->id->route.addr.addr.ibaddr.dgid.raw, dgid, 16);
		cr_expect_eq(ev->id->route.addr.src_sin.sin_addr.s_addr, inet_addr("127.10.0.1"));
		rdma_ack_cm_event(ev);
	}
	for (int i = 0; i < 50; i++) {
		cr_expect_eq(seen[i], 1, "id %d: %d events", i, seen[i]);
		rdma_destroy_id(ids[i]);
	}
	rdma_destroy_event_channel(ch);
}

/* The same number of requests for 200 different neighbours nobody holds
 * (each one INCOMPLETE, then FAILED and asked for again, in the kernel's
 * table): one look and at most one trigger a second per neighbour, found by
 * hash — uscmd uses under 10% of a CPU meanwhile (measured over 3 s; it is
 * idle otherwise), and its threads and fds stay as with one neighbour. */
Test(hresolve, two_hundred_neighbours_in_uscmd)
{
	struct rdma_event_channel *ch;
	struct lt_pipes p;
	int pid, t0, f0;
	long c0, c1;
	uint64_t w0, w1;
	pid_t child;

	net_up(1);
	pid = uscmd_pid(1);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	warm_up(ch, 100);
	t0 = threads(pid);
	f0 = fds(pid);
	child = hostile_spawn(200, &p);
	cr_assert_eq(resolves1(), HOSTILE_N);
	/* a window of the steady state: the kernel's probes fail after 3 s
	 * and are asked for again within it */
	c0 = cpu_ms(pid);
	w0 = lt_now_ms();
	cr_assert(lt_wait_until(lt_now_ms() - w0 >= 3000, 4000));
	c1 = cpu_ms(pid);
	w1 = lt_now_ms();
	cr_expect_leq(c1 - c0, (long)(w1 - w0) / 10, "uscmd used %ld ms of CPU in %llu ms", c1 - c0,
		      (unsigned long long)(w1 - w0));
	cr_expect_eq(threads(pid), t0);
	cr_expect_leq(fds(pid), f0 + 4);
	cr_expect_eq(resolves1(), HOSTILE_N, "nothing answered them");
	tf_warn("uscmd with %d requests for 200 neighbours: %ld ms of CPU in %llu ms", HOSTILE_N,
		c1 - c0, (unsigned long long)(w1 - w0));
	cr_assert_eq(write(p.go[1], "d", 1), 1);
	cr_assert_eq(lt_child_says(&p, 60000, "the child did not destroy its ids"), 'h');
	cr_assert_eq(write(p.go[1], "x", 1), 1);
	lt_reap(child);
	cr_expect(lt_wait_until(resolves1() == 0, 10000));
	cr_expect(lt_wait_until(fds(pid) <= f0, 10000));
	rdma_destroy_event_channel(ch);
}

/* The limits themselves: with 50 requests waiting per client and 80 per
 * uid, a client's 51st rdma_resolve_addr fails at once with EAGAIN (as
 * a full resource of the kernel's), a second process of the same uid gets
 * the uid's remaining 30, and a victim of another uid resolves and
 * connects meanwhile; once the first client has gone its uid's budget is
 * free again. */
static void limited_child(int n, int expect_ok, struct lt_pipes *p)
{
	struct sockaddr_in dst = nobody_addr();
	struct rdma_event_channel *ch = rdma_create_event_channel();
	int ok = 0, again = 0;
	char c;

	LT_CK(ch);
	for (int i = 0; i < n; i++) {
		struct rdma_cm_id *id;

		LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
		if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, HOSTILE_TIMEOUT_MS) == 0)
			ok++;
		else if (errno == EAGAIN)
			again++;
	}
	LT_CK(ok == expect_ok && again == n - expect_ok);
	{
		/* the ones taken wait: no event yet */
		struct rdma_cm_event *ev = lt_event(ch, 300);

		LT_CK(!ev);
	}
	LT_CK(write(p->ready[1], "r", 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1);
	_exit(0);
}

static pid_t limited_spawn(int n, int expect_ok, struct lt_pipes *p)
{
	return spawn_ready(limited_child, n, expect_ok, p, 60000,
			   "the client's requests were not refused at its limit");
}

Test(hresolve, waiting_requests_are_bounded_per_client_and_uid)
{
	struct lt_pipes p1, p2, p3;
	pid_t c1, c2, c3;
	int st;

	setenv("T_RESOLVES", "50", 1);
	setenv("T_RESOLVES_UID", "80", 1);
	net_up(1);
	unsetenv("T_RESOLVES");
	unsetenv("T_RESOLVES_UID");
	if (geteuid() != 0)
		cr_skip_test("the victim as user nobody needs root");
	c1 = limited_spawn(60, 50, &p1);
	cr_expect(lt_wait_until(resolves1() == 50, 2000), "uscmd holds %ld, not 50", resolves1());
	c2 = limited_spawn(60, 30, &p2);
	cr_expect(lt_wait_until(resolves1() == 80, 2000), "uscmd holds %ld, not 80", resolves1());
	victim_connects();
	/* the first client goes: its 50 are free for its uid again */
	cr_assert_eq(write(p1.go[1], "x", 1), 1);
	cr_assert_eq(waitpid(c1, &st, 0), c1);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "first client: status 0x%x", st);
	cr_expect(lt_wait_until(resolves1() == 30, 3000), "uscmd still holds %ld", resolves1());
	c3 = limited_spawn(60, 50, &p3);
	for (int i = 0; i < 2; i++) {
		struct lt_pipes *p = i ? &p3 : &p2;
		pid_t c = i ? c3 : c2;

		cr_assert_eq(write(p->go[1], "x", 1), 1);
		cr_assert_eq(waitpid(c, &st, 0), c);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d: status 0x%x", i + 2, st);
	}
	cr_expect(lt_wait_until(resolves1() == 0, 3000));
}
