/*
 * uscmd, the CM as a host service, on the simulated fabric with
 * one daemon per node (`uscm-sim start --uscmd`):
 *  - unmodified Debian rdmacm-utils with BOTH sides on one node (loopback
 *    through the port): rping, ucmatose, udaddy, mckey (two receivers in
 *    two processes and a sender), cmtime -c 1000, rdma_server/rdma_client;
 *    IB and RoCE;
 *  - host-wide port spaces: a second process binding a used port gets
 *    EADDRINUSE; REUSEADDR as the kernel's;
 *  - process death: a client SIGKILLed after its REQ, after the REP, when
 *    established, with a listener, with a multicast join: what the peer
 *    sees and how fast, and the daemon holds nothing of it afterwards;
 *  - daemon death: a client blocked in rdma_get_cm_event wakes within 1 s;
 *    after a restart a new connection works;
 *  - fork: a child of a process that used the library connects.
 */
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "hosttest.h"

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(onenode, .fini = teardown, .timeout = 180);
TestSuite(hostwide, .fini = teardown, .timeout = 120);
TestSuite(death, .fini = teardown, .timeout = 120);

/* ---- unmodified binaries, both sides on node 1 ------------------------------------- */

static void rping_one_node(const char *link)
{
	char *out;

	dstart(link, 2);
	out = dpair("rping", 1, "rping -s -a 127.10.0.1 -V -C 100", 1,
		    "rping -c -a 127.10.0.1 -v -V -C 100", 1, "rping");
	cr_expect_eq(count(out, "ping data: rdma-ping-"), 100, "%s", out);
	free(out);
}

Test(onenode, rping_ib) { rping_one_node("ib"); }
Test(onenode, rping_roce) { rping_one_node("roce"); }

static void ucmatose_one_node(const char *link)
{
	char *out;

	dstart(link, 2);
	out = dpair("ucmatose", 1, "ucmatose -c 4", 1, "ucmatose -s 127.10.0.1 -c 4", 1, "ucma");
	cr_expect(strstr(out, "data transfers complete"), "%s", out);
	cr_expect(strstr(out, "return status 0"), "%s", out);
	free(out);
}

Test(onenode, ucmatose_ib) { ucmatose_one_node("ib"); }
Test(onenode, ucmatose_roce) { ucmatose_one_node("roce"); }

static void udaddy_one_node(const char *link)
{
	char *out;

	dstart(link, 2);
	out = dpair("udaddy", 1, "udaddy -c 2", 1, "udaddy -s 127.10.0.1 -c 2", 1, "udaddy");
	cr_expect(strstr(out, "data transfers complete"), "%s", out);
	cr_expect(strstr(out, "return status 0"), "%s", out);
	free(out);
}

Test(onenode, udaddy_ib) { udaddy_one_node("ib"); }
Test(onenode, udaddy_roce) { udaddy_one_node("roce"); }

static void rdma_server_one_node(const char *link)
{
	char *out;

	dstart(link, 2);
	out = dpair("rdma_server", 1, "rdma_server -s 127.10.0.1", 1, "rdma_client -s 127.10.0.1", 1,
		    "rsrv");
	cr_expect(strstr(out, "rdma_client: end 0"), "%s", out);
	free(out);
}

Test(onenode, rdma_server_client_ib) { rdma_server_one_node("ib"); }
Test(onenode, rdma_server_client_roce) { rdma_server_one_node("roce"); }

static void cmtime_one_node(const char *link, int n)
{
	char client[128], *out;

	dstart(link, 2);
	snprintf(client, sizeof(client), "cmtime -s 127.10.0.1 -c %d", n);
	out = dpair("cmtime", 1, "cmtime", 1, client, 0, "cmtime");
	cr_expect(strstr(out, "connect"), "%s", out);
	cr_expect(strstr(out, "disconnect"), "%s", out);
	free(out);
}

Test(onenode, cmtime_1000_ib) { cmtime_one_node("ib", 1000); }
Test(onenode, cmtime_1000_roce) { cmtime_one_node("roce", 1000); }

/* Two receivers in two processes on node 1 and the sender on node 1 too:
 * both receive every message (the group is joined once per port by the
 * daemon and shared). */
static void mckey_one_node(const char *link)
{
	char *out, *r1 = NULL, *r2 = NULL;

	if (lt_sh(NULL, "command -v mckey >/dev/null") != 0)
		tf_skip_missing("mckey (Debian rdmacm-utils) is not installed");
	dstart(link, 2);
	for (int i = 1; i <= 2; i++)
		cr_assert_eq(lt_sh(NULL,
				   "(%s timeout 60 mckey -m 239.1.1.1 -b 127.10.0.1 -C 20 >%s/r%d.out 2>&1;"
				   " echo $? >%s/r%d.rc) >/dev/null 2>&1 &",
				   denv(1), lt_dir, i, lt_dir, i),
			     0);
	/* both receivers joined */
	for (int i = 0; i < 100; i++) {
		if (lt_sh(NULL, "grep -q 'joined dgid' %s/r1.out && grep -q 'joined dgid' %s/r2.out",
			  lt_dir, lt_dir) == 0)
			break;
		usleep(100 * 1000);
	}
	lt_sh(&out, "%s timeout 60 mckey -m 239.1.1.1 -b 127.10.0.1 -s -C 20 2>&1", denv(1));
	cr_expect(strstr(out, "return status 0"), "sender:\n%s", out);
	for (int i = 0; i < 100; i++) {
		if (lt_sh(NULL, "test -s %s/r1.rc && test -s %s/r2.rc", lt_dir, lt_dir) == 0)
			break;
		usleep(100 * 1000);
	}
	lt_sh(&r1, "cat %s/r1.out; echo rc=$(cat %s/r1.rc)", lt_dir, lt_dir);
	lt_sh(&r2, "cat %s/r2.out; echo rc=$(cat %s/r2.rc)", lt_dir, lt_dir);
	cr_expect(strstr(r1, "data transfers complete") && strstr(r1, "rc=0"), "receiver 1:\n%s", r1);
	cr_expect(strstr(r2, "data transfers complete") && strstr(r2, "rc=0"), "receiver 2:\n%s", r2);
	free(out);
	free(r1);
	free(r2);
}

Test(onenode, mckey_two_receivers_ib) { mckey_one_node("ib"); }
Test(onenode, mckey_two_receivers_roce) { mckey_one_node("roce"); }

/* ---- host-wide port spaces -------------------------------------------------------------- */

/* In a child on node n: bind (REUSEADDR if asked) and, if asked, listen on
 * port; writes the errno of the first failing step (0: all worked) to
 * p->ready[1], then waits for the parent's go. */
struct bind_job {
	int node, reuse, do_listen;
	uint16_t port;
	const char *ip;
};
static struct bind_job g_job;

static void bind_child(int mode, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in a = lt_sin(g_job.ip, g_job.port);
	unsigned char e = 0;
	char c;
	int one = 1;

	(void)mode;
	lt_node(g_job.node);
	ch = rdma_create_event_channel();
	LT_CK(ch);
	LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	if (g_job.reuse)
		LT_CK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)) == 0);
	if (rdma_bind_addr(id, (struct sockaddr *)&a) < 0)
		e = (unsigned char)errno;
	else if (g_job.do_listen && rdma_listen(id, 4) < 0)
		e = (unsigned char)errno;
	LT_CK(write(p->ready[1], &e, 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* lt_spawn reads the child's first byte itself; the bind result is
 * reported as a second byte. */
static void bind_child2(int mode, struct lt_pipes *p)
{
	char r = 1;

	(void)mode;
	if (write(p->ready[1], &r, 1) != 1)
		_exit(1);
	bind_child(mode, p);
}

static unsigned char spawn_bind(pid_t *pid, struct lt_pipes *p, int node, const char *ip,
				uint16_t port, int reuse, int do_listen)
{
	unsigned char e = 0xFF;
	struct pollfd pf;

	g_job = (struct bind_job){ node, reuse, do_listen, port, ip };
	*pid = lt_spawn(bind_child2, 0, p);
	pf.fd = p->ready[0];
	pf.events = POLLIN;
	cr_assert_eq(poll(&pf, 1, 10000), 1, "no bind result from the child");
	cr_assert_eq(read(p->ready[0], &e, 1), 1);
	return e;
}

static void release(pid_t pid, struct lt_pipes *p)
{
	char c = 1;

	cr_assert_eq(write(p->go[1], &c, 1), 1);
	lt_reap(pid);
	close(p->ready[0]);
	close(p->ready[1]);
	close(p->go[0]);
	close(p->go[1]);
}

Test(hostwide, ports_are_shared_by_every_process_of_a_node)
{
	struct lt_pipes a, b, c;
	pid_t pa, pb, pc;

	dstart("ib", 2);
	/* process A listens on 127.10.0.1:7471 */
	cr_assert_eq(spawn_bind(&pa, &a, 1, "127.10.0.1", 7471, 0, 1), 0, "first bind+listen");
	/* process B, same node, same port: EADDRINUSE (the kernel's answer) */
	cr_expect_eq(spawn_bind(&pb, &b, 1, "127.10.0.1", 7471, 0, 0), EADDRINUSE,
		     "a second process binding a used port");
	release(pb, &b);
	/* even with REUSEADDR: A listens */
	cr_expect_eq(spawn_bind(&pb, &b, 1, "127.10.0.1", 7471, 1, 0), EADDRINUSE,
		     "REUSEADDR does not share a port someone listens on");
	release(pb, &b);
	/* node 2 has its own daemon and port table: the same port is free */
	cr_expect_eq(spawn_bind(&pc, &c, 2, "127.10.0.2", 7471, 0, 1), 0, "another node");
	release(pc, &c);
	/* A goes away: the port is free again for another process */
	release(pa, &a);
	cr_expect_eq(spawn_bind(&pb, &b, 1, "127.10.0.1", 7471, 0, 1), 0, "port released");
	release(pb, &b);
	/* two REUSEADDR binds, nobody listening: shared */
	cr_assert_eq(spawn_bind(&pa, &a, 1, "127.10.0.1", 7472, 1, 0), 0);
	cr_expect_eq(spawn_bind(&pb, &b, 1, "127.10.0.1", 7472, 1, 0), 0,
		     "REUSEADDR on both, not listening");
	release(pb, &b);
	release(pa, &a);
}

/* ---- process death ----------------------------------------------------------------------- */

enum kill_at { AT_REQ, AT_REP, AT_RTU, AT_LISTEN };

/* The client (node 1) connects to the parent's listener on node 2 and stops
 * at the given step: after rdma_connect (REQ out), after CONNECT_RESPONSE
 * (REP in, RTU not sent: no QP of the library's, no rdma_establish), or
 * established. AT_LISTEN: the child listens on node 1 port 7600. */
static void step_child(int at, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in dst = lt_sin("127.10.0.2", 7500);
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr qa;
	char c = 1;

	/* forked before the parent touched a device (it is node 2): say
	 * hello, wait until the parent listens */
	LT_CK(write(p->ready[1], &c, 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1);
	lt_node(1);
	ch = rdma_create_event_channel();
	LT_CK(ch);
	LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	if (at == AT_LISTEN) {
		struct sockaddr_in a = lt_sin("127.10.0.1", 7600);

		LT_CK(rdma_bind_addr(id, (struct sockaddr *)&a) == 0);
		LT_CK(rdma_listen(id, 4) == 0);
		LT_CK(write(p->ready[1], &c, 1) == 1);
		pause();
	}
	lt_child_resolve(ch, id, &dst);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	if (at == AT_RTU) {
		memset(&qa, 0, sizeof(qa));
		qa.qp_type = IBV_QPT_RC;
		qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
		qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
		LT_CK(rdma_create_qp(id, NULL, &qa) == 0);
	} else {
		cp.qp_num = 0x1234; /* a QP the user would own: the REP stops at CONNECT_RESPONSE */
	}
	LT_CK(rdma_connect(id, &cp) == 0);
	if (at == AT_REQ) {
		LT_CK(write(p->ready[1], &c, 1) == 1);
		pause();
	}
	ev = lt_child_wait(ch, at == AT_REP ? RDMA_CM_EVENT_CONNECT_RESPONSE : RDMA_CM_EVENT_ESTABLISHED);
	rdma_ack_cm_event(ev);
	LT_CK(write(p->ready[1], &c, 1) == 1);
	pause();
}

/* The daemon of node 1 holds no client with ids: what `uscmd --status` lists. */
static void expect_daemon_clean(int node)
{
	char *out = NULL;
	int ok = 0;

	for (int i = 0; i < 50 && !ok; i++) {
		free(out);
		lt_sh(&out, "%s/uscmd --status --socket %s/node%d/uscmd.sock 2>&1", lt_bin(),
		      getenv("USCM_SIM_DIR"), node);
		ok = strstr(out, ", 0 ids,") != NULL;
		if (!ok)
			usleep(100 * 1000);
	}
	cr_expect(ok, "node%d's uscmd still holds ids:\n%s", node, out);
	free(out);
}

static struct rdma_cm_id *listen_on(struct rdma_event_channel *ch, const char *ip, uint16_t port)
{
	struct rdma_cm_id *l;
	struct sockaddr_in a = lt_sin(ip, port);

	cr_assert_eq(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_bind_addr(l, (struct sockaddr *)&a), 0, "bind: %s", strerror(errno));
	cr_assert_eq(rdma_listen(l, 8), 0);
	return l;
}

static void kill_client_at(enum kill_at at)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *nid = NULL;
	struct rdma_cm_event *ev;
	struct lt_pipes p;
	struct rdma_conn_param cp;
	uint64_t t0;
	pid_t pid;

	dstart("ib", 2);
	pid = lt_spawn(step_child, at, &p);
	lt_node(2);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	l = listen_on(ch, "127.10.0.2", 7500);
	{
		char go = 1;

		cr_assert_eq(write(p.go[1], &go, 1), 1);
	}
	/* wait until the child is at its step */
	if (at != AT_LISTEN) {
		ev = lt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
		nid = ev->id;
		rdma_ack_cm_event(ev);
	}
	if (at == AT_REP || at == AT_RTU) {
		memset(&cp, 0, sizeof(cp));
		cp.responder_resources = 1;
		cp.initiator_depth = 1;
		cp.qp_num = 0x4321;
		cr_assert_eq(rdma_accept(nid, &cp), 0);
	}
	/* the child tells us when it got there (after the REQ: at once) */
	{
		struct pollfd pf = { .fd = p.ready[0], .events = POLLIN };
		char c;

		cr_assert_eq(poll(&pf, 1, 10000), 1, "child not at its step");
		cr_assert_eq(read(p.ready[0], &c, 1), 1);
	}
	if (at == AT_RTU)
		rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000));
	t0 = lt_now_ms();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	switch (at) {
	case AT_REQ:
		/* as the kernel: the REQ is cancelled with REJ(timeout); our
		 * answer then finds no connection */
		ev = lt_event(ch, 3000);
		cr_assert(ev, "no event for the new id after the client died");
		cr_expect(ev->event == RDMA_CM_EVENT_REJECTED, "got %s", rdma_event_str(ev->event));
		rdma_ack_cm_event(ev);
		break;
	case AT_REP:
		ev = lt_expect(ch, RDMA_CM_EVENT_REJECTED, 3000);
		rdma_ack_cm_event(ev);
		break;
	case AT_RTU:
		ev = lt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 3000);
		rdma_ack_cm_event(ev);
		break;
	case AT_LISTEN: {
		/* the listener is gone and its port free for another process */
		struct lt_pipes b;
		pid_t pb;

		cr_expect_eq(spawn_bind(&pb, &b, 1, "127.10.0.1", 7600, 0, 1), 0,
			     "port of a killed listener not released");
		release(pb, &b);
		break;
	}
	}
	cr_expect_leq(lt_now_ms() - t0, 1500, "the peer learned it in %llu ms",
		      (unsigned long long)(lt_now_ms() - t0));
	expect_daemon_clean(1);
	if (nid)
		rdma_destroy_id(nid);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
}

Test(death, client_killed_after_req) { kill_client_at(AT_REQ); }
Test(death, client_killed_after_rep) { kill_client_at(AT_REP); }
Test(death, client_killed_when_established) { kill_client_at(AT_RTU); }
Test(death, client_killed_while_listening) { kill_client_at(AT_LISTEN); }

/* A member process killed: the daemon leaves the group for it (the SA's
 * record of node 1's port goes once no process of node 1 needs it). */
static void mc_child(int mode, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in b = lt_sin("127.10.0.1", 0), m = lt_sin("239.3.3.3", 0);
	char c = 1;

	(void)mode;
	lt_node(1);
	ch = rdma_create_event_channel();
	LT_CK(ch);
	LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP) == 0);
	LT_CK(rdma_bind_addr(id, (struct sockaddr *)&b) == 0);
	LT_CK(rdma_join_multicast(id, (struct sockaddr *)&m, NULL) == 0);
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_MULTICAST_JOIN));
	LT_CK(write(p->ready[1], &c, 1) == 1);
	pause();
}

static int sa_members(void)
{
	char *out = NULL;
	int n = 0;

	/* `uscm-sim status` lists each group with its member ports */
	lt_sh(&out, "%s/uscm-sim status --dir %s | sed -n '/^multicast groups:/,$p' | grep -c 'ff12:'",
	      lt_bin(), getenv("USCM_SIM_DIR"));
	n = atoi(out ? out : "0");
	free(out);
	return n;
}

Test(death, client_killed_with_a_multicast_join)
{
	struct lt_pipes p;
	pid_t pid;
	uint64_t t0;
	int before;

	dstart("ib", 2);
	before = sa_members();
	pid = lt_spawn(mc_child, 0, &p);
	cr_assert_gt(sa_members(), before, "the join is not in the SA");
	t0 = lt_now_ms();
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	while (sa_members() > before && lt_now_ms() - t0 < 3000)
		usleep(50 * 1000);
	cr_expect_eq(sa_members(), before, "the killed member's group is still in the SA");
	expect_daemon_clean(1);
}

/* ---- daemon death ------------------------------------------------------------------------- */

struct waiter {
	struct rdma_event_channel *ch;
	volatile int done;
	int rc, err, event;
	uint64_t t;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;
	struct rdma_cm_event *ev = NULL;

	w->rc = rdma_get_cm_event(w->ch, &ev);
	w->err = errno;
	w->event = ev ? (int)ev->event : -1;
	if (ev)
		rdma_ack_cm_event(ev);
	w->t = lt_now_ms();
	w->done = 1;
	return NULL;
}

Test(death, daemon_killed_and_restarted)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *id;
	struct waiter w;
	pthread_t t;
	uint64_t t0;
	char *out = NULL;

	dstart("ib", 2);
	lt_node(1);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	l = listen_on(ch, "127.10.0.1", 7700);
	memset(&w, 0, sizeof(w));
	w.ch = ch;
	cr_assert_eq(pthread_create(&t, NULL, wait_thread, &w), 0);
	usleep(200 * 1000);
	cr_assert(!w.done, "rdma_get_cm_event returned with nothing to say");
	t0 = lt_now_ms();
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim uscmd --dir %s node1 kill 2>&1", lt_bin(),
			   getenv("USCM_SIM_DIR")),
		     0, "%s", out);
	free(out);
	out = NULL;
	while (!w.done && lt_now_ms() - t0 < 3000)
		usleep(10 * 1000);
	cr_assert(w.done, "a client blocked in rdma_get_cm_event did not wake up");
	cr_expect_leq(w.t - t0, 1000, "woke after %llu ms", (unsigned long long)(w.t - t0));
	cr_expect(w.rc == 0 ? w.event == RDMA_CM_EVENT_DEVICE_REMOVAL : w.err == ENODEV,
		  "rc %d errno %d event %d", w.rc, w.err, w.event);
	pthread_join(t, NULL);
	/* calls on the dead daemon's ids fail with ENODEV, not hang */
	cr_expect_eq(rdma_listen(l, 1), -1);
	cr_expect_eq(errno, ENODEV);
	/* restart: new ids work (a loopback connection on node 1) */
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim uscmd --dir %s node1 start 2>&1", lt_bin(),
			   getenv("USCM_SIM_DIR")),
		     0, "%s", out);
	free(out);
	rdma_destroy_id(l);
	rdma_destroy_event_channel(ch);
	ch = rdma_create_event_channel();
	cr_assert(ch, "no new channel after the restart: %s", strerror(errno));
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0, "%s", strerror(errno));
	rdma_destroy_id(id);
	out = dpair("rping", 1, "rping -s -a 127.10.0.1 -C 3", 1, "rping -c -a 127.10.0.1 -v -C 3",
		    1, "after");
	cr_expect_eq(count(out, "ping data: rdma-ping-"), 3, "%s", out);
	free(out);
	rdma_destroy_event_channel(ch);
}

/* ---- fork ------------------------------------------------------------------------------- */

Test(hostwide, child_of_a_process_that_used_the_library_connects)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	char *out = NULL;
	pid_t pid;
	int st = -1;

	if (lt_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	dstart("ib", 2);
	lt_node(1);
	/* the parent uses the library first (its connection to the daemon) */
	ch = rdma_create_event_channel();
	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(lt_sh(NULL,
			   "(%s timeout 30 rping -s -a 127.10.0.2 -C 1 >%s/fs.out 2>&1) >/dev/null 2>&1 &",
			   denv(2), lt_dir),
		     0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct sockaddr_in dst = lt_sin("127.10.0.2", 7174);
		struct rdma_event_channel *c2 = rdma_create_event_channel();

		LT_CK(c2);
		/* rping's server may not listen yet: a fresh id per attempt */
		for (int i = 0; i < 50; i++) {
			struct rdma_cm_id *cid;
			struct rdma_cm_event *ev;
			struct ibv_qp_init_attr qa;
			struct rdma_conn_param cp;
			int est;

			LT_CK(rdma_create_id(c2, &cid, NULL, RDMA_PS_TCP) == 0);
			LT_CK(rdma_resolve_addr(cid, NULL, (struct sockaddr *)&dst, 2000) == 0);
			rdma_ack_cm_event(lt_child_wait(c2, RDMA_CM_EVENT_ADDR_RESOLVED));
			LT_CK(rdma_resolve_route(cid, 2000) == 0);
			rdma_ack_cm_event(lt_child_wait(c2, RDMA_CM_EVENT_ROUTE_RESOLVED));
			memset(&qa, 0, sizeof(qa));
			qa.qp_type = IBV_QPT_RC;
			qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
			qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
			LT_CK(rdma_create_qp(cid, NULL, &qa) == 0);
			memset(&cp, 0, sizeof(cp));
			cp.responder_resources = cp.initiator_depth = 1;
			cp.retry_count = cp.rnr_retry_count = 7;
			LT_CK(rdma_connect(cid, &cp) == 0);
			ev = lt_event(c2, 5000);
			LT_CK(ev);
			est = ev->event == RDMA_CM_EVENT_ESTABLISHED;
			rdma_ack_cm_event(ev);
			if (est)
				_exit(0);
			rdma_destroy_qp(cid);
			rdma_destroy_id(cid);
			usleep(100 * 1000);
		}
		_exit(2);
	}
	waitpid(pid, &st, 0);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child could not connect (0x%x)", st);
	/* the parent's own id still works */
	{
		struct sockaddr_in a = lt_sin("127.10.0.1", 0);

		cr_expect_eq(rdma_bind_addr(id, (struct sockaddr *)&a), 0, "parent: %s", strerror(errno));
	}
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	lt_sh(NULL, "pkill -f 'rping -s -a 127.10.0.2' >/dev/null 2>&1; true");
	free(out);
}

/* ---- unprivileged users ----------------------------------------------------------------- */

TestSuite(unpriv, .fini = teardown, .timeout = 120);

Test(unpriv, rping_as_nobody_through_the_daemon)
{
	char server[1024], client[1024], *out;

	if (lt_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	unpriv_start();
	/* nobody can not open a umad device on this fabric ... */
	cr_assert_neq(lt_sh(&out, "%s %s saquery PR 2>&1", denv(1), NOBODY), 0,
		      "saquery as nobody worked: the fabric does not model umad permissions\n%s", out);
	free(out);
	/* ... but rdma_cm works through uscmd */
	snprintf(server, sizeof(server), "%s rping -s -a 127.10.0.1 -C 10 -V", NOBODY);
	snprintf(client, sizeof(client), "%s rping -c -a 127.10.0.1 -v -C 10 -V", NOBODY);
	out = dpair("rping", 1, server, 1, client, 1, "nobody");
	cr_expect_eq(count(out, "ping data: rdma-ping-"), 10, "%s", out);
	free(out);
}

Test(unpriv, in_process_mode_as_nobody_fails_clearly)
{
	char *out = NULL, env[4096];
	int st;

	if (lt_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	unpriv_start();
	/* the environment of an unmodified binary (ASan preloads included)
	 * without the daemon-mode wrapper */
	lt_daemon = 0;
	snprintf(env, sizeof(env), "%s", lt_util_env());
	lt_daemon = 1;
	st = lt_sh(&out, "USCM_SIM_NODE=node1 USCM_MODE=inproc %s %s timeout 20 rping -c -a 127.10.0.2 -C 1 2>&1",
		   env, NOBODY);
	cr_expect_neq(st, 0, "rping in-process as nobody exited 0:\n%s", out);
	cr_expect(strstr(out, "Permission denied") && strstr(out, "uscmd"),
		  "no clear word about umad access and what to do:\n%s", out);
	free(out);
}

static void bind_low_child(int drop, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in a = lt_sin("127.10.0.1", 100);
	unsigned char e = 0;

	if (drop) {
		LT_CK(setgroups(0, NULL) == 0);
		LT_CK(setgid(65534) == 0);
		LT_CK(setuid(65534) == 0);
	}
	lt_node(1);
	ch = rdma_create_event_channel();
	LT_CK(ch);
	LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	if (rdma_bind_addr(id, (struct sockaddr *)&a) < 0)
		e = (unsigned char)errno;
	LT_CK(write(p->ready[1], &e, 1) == 1);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(unpriv, ports_below_1024_need_root)
{
	struct lt_pipes p;
	pid_t pid;

	unpriv_start();
	for (int drop = 1; drop >= 0; drop--) {
		unsigned char e = 0xFF;
		int st = 0;

		cr_assert_eq(pipe(p.ready), 0);
		fflush(NULL);
		pid = fork();
		cr_assert_geq(pid, 0);
		if (pid == 0) {
			bind_low_child(drop, &p);
			_exit(0);
		}
		cr_assert_eq(read(p.ready[0], &e, 1), 1);
		waitpid(pid, &st, 0);
		if (drop)
			cr_expect_eq(e, EACCES, "nobody bound port 100: %s", strerror(e));
		else
			cr_expect_eq(e, 0, "root could not bind port 100: %s", strerror(e));
		close(p.ready[0]);
		close(p.ready[1]);
	}
}

/* ---- many processes ----------------------------------------------------------------------- */

static long field(const char *s, const char *key)
{
	const char *p = strstr(s, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* 8 client processes on node 1, 250 connections each, to 4 server
 * processes on node 2 (uscm-churn on four ports: one service each, two
 * programs' worth of them): every connection established, echoed and
 * closed; the clients' counts, the servers' and the daemons' agree. */
Test(hostwide, eight_clients_by_250_to_four_servers)
{
	char *out = NULL, *st1 = NULL, *st2 = NULL;
	long ok = 0, srv = 0;

	dstart("ib", 2);
	for (int s = 0; s < 4; s++)
		cr_assert_eq(lt_sh(NULL, "(%s %s/uscm-churn server -p %d >%s/srv%d.out 2>&1 &"
				      " echo $! >%s/srv%d.pid) >/dev/null 2>&1",
				      denv(2), lt_bin(), 7300 + s, lt_dir, s, lt_dir, s),
			     0);
	usleep(300 * 1000);
	cr_assert_eq(lt_sh(&out,
			   "for i in 0 1 2 3 4 5 6 7; do (%s timeout 120 %s/uscm-churn client 127.10.0.2"
			   " -p $((7300 + i %% 4)) -n 250 -c 16 >%s/cl$i.out 2>&1; echo $? >%s/cl$i.rc) & done;"
			   " wait; cat %s/cl*.out",
			   denv(1), lt_bin(), lt_dir, lt_dir, lt_dir),
		     0);
	for (const char *p = out; (p = strstr(p, "RESULT role=client")); p++) {
		long n = field(p, " ok=");

		cr_expect_eq(n, 250, "a client: %.*s", 200, p);
		ok += n;
	}
	cr_expect_eq(ok, 2000, "clients' ok connections:\n%s", out);
	free(out);
	out = NULL;
	lt_sh(NULL, "kill -TERM $(cat %s/srv*.pid) 2>/dev/null; sleep 0.5", lt_dir);
	lt_sh(&out, "cat %s/srv*.out", lt_dir);
	for (const char *p = out; (p = strstr(p, "RESULT role=server")); p++)
		srv += field(p, " ok=");
	cr_expect_eq(srv, 2000, "servers' ok connections:\n%s", out);
	/* each daemon's CM made exactly one connection per connect */
	lt_sh(&st1, "%s/uscmd --status --socket %s/node1/uscmd.sock", lt_bin(), getenv("USCM_SIM_DIR"));
	lt_sh(&st2, "%s/uscmd --status --socket %s/node2/uscmd.sock", lt_bin(), getenv("USCM_SIM_DIR"));
	cr_expect_eq(field(st1, "conns_total="), 2000, "node1:\n%s", st1);
	cr_expect_eq(field(st2, "conns_total="), 2000, "node2:\n%s", st2);
	cr_expect(strstr(st1, ", 0 ids,"), "node1 still holds ids:\n%s", st1);
	free(out);
	free(st1);
	free(st2);
}

/* One SA PathRecord query serves every process of the node asking for the
 * same path: the path cache is the daemon's (host-wide). */
static long sa_query_count(void)
{
	char *out = NULL;
	long n = -1;

	lt_sh(&out, "%s/uscm-sim status --dir %s", lt_bin(), getenv("USCM_SIM_DIR"));
	if (out && strstr(out, "SA queries"))
		sscanf(strstr(out, "SA queries"), "SA queries%*[^0-9]%ld", &n);
	free(out);
	return n;
}

static void route_child(int port, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in dst = lt_sin("127.10.0.2", (uint16_t)port);
	char c = 1;

	lt_node(1);
	ch = rdma_create_event_channel();
	LT_CK(ch);
	LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	lt_child_resolve(ch, id, &dst);
	LT_CK(id->route.num_paths == 1);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	LT_CK(write(p->ready[1], &c, 1) == 1);
}

Test(hostwide, one_sa_query_serves_every_process)
{
	struct lt_pipes p;
	long q0, q1;

	dstart("ib", 2);
	q0 = sa_query_count();
	cr_assert_geq(q0, 0, "no SA query counter in uscm-sim status");
	for (int k = 0; k < 3; k++) {
		pid_t pid = lt_spawn(route_child, 7400, &p);

		lt_reap(pid);
		close(p.ready[0]);
		close(p.ready[1]);
		close(p.go[0]);
		close(p.go[1]);
	}
	q1 = sa_query_count();
	cr_expect_eq(q1 - q0, 1, "%ld SA queries for 3 processes resolving the same path", q1 - q0);
}

/* uscmd --pcap FILE: one capture of every CM MAD of the node, whichever
 * process the connection is for (here both ends are node 1's). */
Test(hostwide, uscmd_pcap_captures_the_host)
{
	char *out = NULL, pidf[300];
	pid_t upid;
	int up = 0;

	if (lt_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	dstart("ib", 2);
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim uscmd --dir %s node1 stop 2>&1", lt_bin(),
			   getenv("USCM_SIM_DIR")),
		     0, "%s", out);
	free(out);
	out = NULL;
	cr_assert_eq(lt_sh(NULL,
			   "(cd / && USCM_SIM_DIR='%s' USCM_HOSTS='%s/hosts' USCM_SIM_NODE=node1 USCM_MODE=inproc"
			   " LD_LIBRARY_PATH='%s/sim/lib' setsid %s/uscmd --socket '%s/node1/uscmd.sock'"
			   " --pcap '%s/host.pcap' >'%s/uscmd-pcap.log' 2>&1 </dev/null & echo $! >'%s/uscmd.pid')",
			   getenv("USCM_SIM_DIR"), getenv("USCM_SIM_DIR"), lt_build(), lt_bin(),
			   getenv("USCM_SIM_DIR"), lt_dir, lt_dir, lt_dir),
		     0);
	for (int i = 0; i < 100 && !up; i++) {
		up = lt_sh(NULL, "%s/uscmd --status --socket %s/node1/uscmd.sock >/dev/null 2>&1", lt_bin(),
			   getenv("USCM_SIM_DIR")) == 0;
		if (!up)
			usleep(50 * 1000);
	}
	cr_assert(up, "uscmd --pcap did not start");
	out = dpair("rping", 1, "rping -s -a 127.10.0.1 -C 2", 1, "rping -c -a 127.10.0.1 -v -C 2", 1,
		    "pcap");
	cr_expect_eq(count(out, "ping data: rdma-ping-"), 2, "%s", out);
	free(out);
	out = NULL;
	snprintf(pidf, sizeof(pidf), "%s/uscmd.pid", lt_dir);
	upid = lt_pid_file(pidf);
	cr_assert_gt(upid, 0, "%s", pidf);
	kill(upid, SIGTERM);
	cr_assert(lt_wait_until(lt_pid_gone(upid), 10000), "uscmd did not exit");
	cr_assert_eq(lt_sh(&out, "%s/uscm-decode '%s/host.pcap' 2>&1", lt_bin(), lt_dir), 0, "%s", out);
	/* both ends' MADs, sent and received, in the one file */
	cr_expect_geq(count(out, " REQ("), 2, "%s", out);
	cr_expect_geq(count(out, " REP("), 2, "%s", out);
	cr_expect_geq(count(out, " RTU("), 2, "%s", out);
	cr_expect_geq(count(out, " DREQ("), 2, "%s", out);
	cr_expect(strstr(out, " 0 malformed"), "%s", out);
	free(out);
}
