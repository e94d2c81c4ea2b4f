/*
 * AF_IB binds and listens from an unprivileged user of uscmd, as the
 * kernel's rdma_cm (cma_select_ib_ps, cma_get_port, cma_bind_port): the
 * SID and its mask select one port space and one port of it, and that
 * port goes through the space's normal checks; the bound SID is exact.
 * The hostile part is a forked child that becomes nobody before its first
 * rdma call (so uscmd takes nobody's credentials), while root's unmodified
 * rping pair on TCP port 7001 goes through the same daemon:
 *  - a port below 1024 named by the SID under its mask is EACCES; a mask
 *    without the port bits binds an ephemeral port, not the one in the
 *    SID, and the listener hears only its own service ID;
 *  - an RDMA_PS_IB id naming a TCP-space SID binds in the TCP space: the
 *    SID of root's live listener is EADDRINUSE (the port's GID) or
 *    EADDRNOTAVAIL (the wildcard GID); a SID outside the IP port spaces
 *    is EPROTONOSUPPORT;
 *  - root's rping connects and pings throughout, and no request for
 *    another port reaches the hostile listeners;
 *  - a legitimate AF_IB user is unchanged: nobody's IB-space listener on
 *    an ephemeral port and root's AF_IB client (implicit bind) connect by
 *    GID and SID with the client's private data.
 * Needs root (to become nobody) and rping (rdmacm-utils).
 */
#define _GNU_SOURCE /* setresuid */
#include <grp.h>
#include <sys/stat.h>

#include <infiniband/ib.h>

#include "hosttest.h"

#define VICTIM_PORT 7001
#define NOBODY_ID 65534
#define MASK_ALL (~0ULL)
#define MASK_WIDE 0xFFFFFFFFFFFF0000ULL /* RDMA_IB_IP_PS_MASK: no port bits */

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(afib, .fini = teardown, .timeout = 180);

/* ---- the fabric and root's rping ---------------------------------------------------- */

static void start(void)
{
	if (geteuid() != 0)
		cr_skip_test("switching to user nobody needs root (CI runs as root)");
	lt_need("rping", "rdmacm-utils");
	/* a client that starts before its server retries within ~0.2 s */
	dstart("ib", 2);
	/* nobody reaches the daemons' sockets and the fabric's files */
	cr_assert_eq(chmod(lt_dir, 0755), 0);
}

/* root's `rping -s` on node 1, 127.10.0.1:port, in the background; returns
 * once it holds the port (its debug line after rdma_bind_addr, line
 * buffered): the hostile binds come after it, and its rdma_listen follows
 * at once (the client retries while REJECTED). */
static void victim_server(int port)
{
	char path[600];

	cr_assert_eq(lt_sh(NULL,
			   "(%s timeout 60 stdbuf -oL rping -s -d -a 127.10.0.1 -p %d -C 3 -V"
			   " >%s/victim%d.out 2>&1; echo $? >%s/victim%d.rc) >/dev/null 2>&1 &",
			   denv(1), port, lt_dir, port, lt_dir, port),
		     0);
	snprintf(path, sizeof(path), "%s/victim%d.out", lt_dir, port);
	cr_assert(lt_wait_until(lt_file_has(path, "rdma_bind_addr successful"), 10000),
		  "root's rping -s did not bind port %d:\n%s", port, path);
}

/* root's `rping -c` from node 2 to 127.10.0.1:port, once (until it is not
 * refused for want of a listener when retry); its status, output in *out. */
static int rping_client(int port, int retry, char **out)
{
	int st = -1;

	for (int i = 0; i < (retry ? 50 : 1); i++) {
		free(*out);
		*out = NULL;
		st = lt_sh(out, "%s timeout 30 rping -c -a 127.10.0.1 -p %d -v -V -C 3 2>&1", denv(2),
			   port);
		if (st == 0 || !strstr(*out, "REJECTED"))
			break;
		usleep(100 * 1000);
	}
	return st;
}

/* The victim on port works: its client pings 3 times and both rpings
 * exit 0. */
static void victim_works(int port)
{
	char *out = NULL, *sout = NULL;
	int st = rping_client(port, 1, &out);

	cr_expect_eq(st, 0, "root's rping -c to port %d exited %d:\n%s", port, st, out);
	cr_expect(strstr(out, "ping data: rdma-ping-2"), "root's rping -c:\n%s", out);
	free(out);
	lt_wait_until(lt_sh(NULL, "test -s %s/victim%d.rc", lt_dir, port) == 0, 20000);
	lt_sh(&sout, "cat %s/victim%d.rc %s/victim%d.out", lt_dir, port, lt_dir, port);
	cr_expect(sout[0] == '0', "root's rping -s on port %d:\n%s", port, sout);
	free(sout);
}

/* A connect by root to a port nobody legitimately listens on is refused
 * (the REQ reaches no hostile listener: the child counts those). */
static void refused(int port)
{
	char *out = NULL;
	int st = rping_client(port, 0, &out);

	cr_expect_neq(st, 0, "rping -c to port %d connected:\n%s", port, out);
	cr_expect(strstr(out, "REJECTED"), "rping -c to port %d was not rejected:\n%s", port, out);
	free(out);
}

/* A connect by root to a hostile listener's own port reaches it (the
 * child rejects it). */
static void reaches(int port)
{
	char *out = NULL;
	int st = rping_client(port, 0, &out);

	cr_expect_neq(st, 0, "rping -c to the hostile port %d connected:\n%s", port, out);
	free(out);
}

/* ---- the hostile child ------------------------------------------------------------------ */

#define NSTEPS 8

/* What the child did, for the parent to assert. */
struct report {
	int err[NSTEPS];        /* errno of each step: 0 it succeeded */
	uint64_t sid[NSTEPS];   /* the bound SID (host order), mask, port */
	uint64_t mask[NSTEPS];
	int port[NSTEPS];
	int reqs[NSTEPS];       /* CONNECT_REQUESTs the step's listener got */
	int strays;             /* events for no listener of ours */
};

static struct rdma_cm_id *g_ids[NSTEPS];
static struct rdma_event_channel *g_ch;
static struct report g_rep;
static uint8_t g_gid[16]; /* node 1's port GID (the hosts file) */

static void gid_of(const char *host, uint8_t gid[16])
{
	char line[256], a[128], g[128];
	FILE *f = fopen(getenv("USCM_HOSTS"), "r");
	int ok = 0;

	cr_assert(f, "no hosts file");
	while (!ok && fgets(line, sizeof(line), f))
		ok = sscanf(line, "%127s %127s", a, g) == 2 && !strcmp(a, host) &&
		     inet_pton(AF_INET6, g, gid) == 1;
	fclose(f);
	cr_assert(ok, "%s is not in the hosts file", host);
}

static struct sockaddr_ib sib(int gid, uint64_t sid, uint64_t mask)
{
	struct sockaddr_ib s;

	memset(&s, 0, sizeof(s));
	s.sib_family = AF_IB;
	if (gid)
		memcpy(s.sib_addr.sib_raw, g_gid, 16);
	s.sib_sid = htobe64(sid);
	s.sib_sid_mask = htobe64(mask);
	return s;
}

/* Step n: a new id in port space ps binds a (REUSEADDR first when reuse)
 * and, when that worked, listens. */
static void step(int n, enum rdma_port_space ps, struct sockaddr_ib a, int reuse)
{
	struct rdma_cm_id *id;
	const struct sockaddr_ib *b;
	int one = 1;

	LT_CK(rdma_create_id(g_ch, &id, NULL, ps) == 0);
	if (reuse)
		LT_CK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &one, sizeof(one)) == 0);
	errno = 0;
	if (rdma_bind_addr(id, (struct sockaddr *)&a) < 0) {
		g_rep.err[n] = errno ? errno : -1;
		rdma_destroy_id(id);
		return;
	}
	b = (const struct sockaddr_ib *)&id->route.addr.src_addr;
	g_rep.sid[n] = be64toh(b->sib_sid);
	g_rep.mask[n] = be64toh(b->sib_sid_mask);
	g_rep.port[n] = ntohs(rdma_get_src_port(id));
	if (rdma_listen(id, 8) < 0) {
		g_rep.err[n] = errno ? errno : -1;
		rdma_destroy_id(id);
		return;
	}
	g_ids[n] = id;
}

/* The scenarios, by test. */
enum { PRIV_PORT, WIDE_MASK, PS_IB_ON_TCP };

static void scenario(int mode)
{
	switch (mode) {
	case PRIV_PORT:
		/* port 80, every bit named: the TCP space's port 80 */
		step(0, RDMA_PS_TCP, sib(0, RDMA_IB_IP_PS_TCP | 80, MASK_ALL), 0);
		/* port 22 from an RDMA_PS_IB id naming the TCP space */
		step(1, RDMA_PS_IB, sib(1, RDMA_IB_IP_PS_TCP | 22, MASK_ALL), 0);
		/* a mask without the port bits over port 80: no port named */
		step(2, RDMA_PS_TCP, sib(0, RDMA_IB_IP_PS_TCP | 80, MASK_WIDE), 0);
		break;
	case WIDE_MASK:
		/* the victim's port, every bit named: taken (a wildcard GID) */
		step(0, RDMA_PS_TCP, sib(0, RDMA_IB_IP_PS_TCP | VICTIM_PORT, MASK_ALL), 0);
		/* the victim's port under a mask without the port bits */
		step(1, RDMA_PS_TCP, sib(0, RDMA_IB_IP_PS_TCP | VICTIM_PORT, MASK_WIDE), 0);
		/* 7001 = 0x1B59 under ...FF00: the port the mask names, 0x1B00 */
		step(2, RDMA_PS_TCP, sib(1, RDMA_IB_IP_PS_TCP | VICTIM_PORT, 0xFFFFFFFFFFFFFF00ULL), 0);
		break;
	case PS_IB_ON_TCP:
		/* the victim's SID from an RDMA_PS_IB id: the port's GID ... */
		step(0, RDMA_PS_IB, sib(1, RDMA_IB_IP_PS_TCP | VICTIM_PORT, MASK_ALL), 0);
		/* ... with REUSEADDR (the victim has none) ... */
		step(1, RDMA_PS_IB, sib(1, RDMA_IB_IP_PS_TCP | VICTIM_PORT, MASK_ALL), 1);
		/* ... and the wildcard GID */
		step(2, RDMA_PS_IB, sib(0, RDMA_IB_IP_PS_TCP | VICTIM_PORT, MASK_ALL), 0);
		/* a SID in no IP port space */
		step(3, RDMA_PS_IB, sib(1, 0x1000000000000000ULL | VICTIM_PORT, MASK_ALL), 0);
		/* the UDP space from a TCP id */
		step(4, RDMA_PS_TCP, sib(1, RDMA_IB_IP_PS_UDP | VICTIM_PORT, MASK_ALL), 0);
		/* the port-space bits unmasked: the id's own IB space, port 7001 */
		step(5, RDMA_PS_IB, sib(1, RDMA_IB_IP_PS_TCP | VICTIM_PORT, RDMA_IB_IP_PORT_MASK), 0);
		break;
	}
}

/* Becomes nobody, runs the scenario on node 1, reports; then answers
 * every connection request with a REJ (counting it by listener) until the
 * parent says it is done, and reports again. */
static void hostile_child(int mode, struct lt_pipes *p)
{
	struct pollfd pf[2];
	char c;

	LT_CK(setgroups(0, NULL) == 0);
	LT_CK(setresgid(NOBODY_ID, NOBODY_ID, NOBODY_ID) == 0);
	LT_CK(setresuid(NOBODY_ID, NOBODY_ID, NOBODY_ID) == 0);
	lt_node(1);
	g_ch = rdma_create_event_channel();
	LT_CK(g_ch);
	scenario(mode);
	LT_CK(write(p->ready[1], &g_rep, sizeof(g_rep)) == (ssize_t)sizeof(g_rep));
	pf[0] = (struct pollfd){ .fd = g_ch->fd, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = p->go[0], .events = POLLIN };
	for (;;) {
		struct rdma_cm_event *ev;
		int k;

		LT_CK(poll(pf, 2, 60000) > 0);
		if (pf[1].revents)
			break;
		LT_CK(rdma_get_cm_event(g_ch, &ev) == 0);
		for (k = 0; k < NSTEPS && (!g_ids[k] || g_ids[k] != ev->listen_id); k++)
			;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *nid = ev->id;

			if (k < NSTEPS)
				g_rep.reqs[k]++;
			else
				g_rep.strays++;
			rdma_reject(nid, NULL, 0);
			rdma_ack_cm_event(ev);
			rdma_destroy_id(nid);
		} else {
			rdma_ack_cm_event(ev);
		}
	}
	LT_CK(read(p->go[0], &c, 1) == 1);
	LT_CK(write(p->ready[1], &g_rep, sizeof(g_rep)) == (ssize_t)sizeof(g_rep));
	for (int k = 0; k < NSTEPS; k++)
		if (g_ids[k])
			rdma_destroy_id(g_ids[k]);
	rdma_destroy_event_channel(g_ch);
}

/* The child's next report (20 s at most). */
static void child_report(struct lt_pipes *p, struct report *r)
{
	struct pollfd pf = { .fd = p->ready[0], .events = POLLIN };

	cr_assert_eq(poll(&pf, 1, 20000), 1, "the hostile child said nothing");
	/* one write below PIPE_BUF: it arrives whole */
	cr_assert_eq(read(p->ready[0], r, sizeof(*r)), (ssize_t)sizeof(*r), "the hostile child died");
}

/* Starts the hostile child (after root's server listens); its first report. */
static pid_t hostile(int mode, struct lt_pipes *p, struct report *r)
{
	pid_t pid;

	gid_of("127.10.0.1", g_gid);
	pid = lt_fork_child(hostile_child, mode, p);
	child_report(p, r);
	return pid;
}

/* Tells the child the connects are over; its last report, and its exit. */
static void hostile_done(pid_t pid, struct lt_pipes *p, struct report *r)
{
	cr_assert_eq(write(p->go[1], "g", 1), 1);
	child_report(p, r);
	lt_reap(pid);
}

/* An id bound in the TCP space to port: its SID exact. */
static void expect_bound(const struct report *r, int n, int port)
{
	cr_expect_eq(r->err[n], 0, "step %d: %s", n, strerror(r->err[n]));
	cr_expect_eq(r->port[n], port, "step %d: port %d", n, r->port[n]);
	cr_expect_eq(r->sid[n], RDMA_IB_IP_PS_TCP | (uint64_t)r->port[n], "step %d: SID %#llx", n,
		     (unsigned long long)r->sid[n]);
	cr_expect_eq(r->mask[n], MASK_ALL, "step %d: mask %#llx", n, (unsigned long long)r->mask[n]);
}

static void expect_ephemeral(const struct report *r, int n)
{
	cr_expect_eq(r->err[n], 0, "step %d: %s", n, strerror(r->err[n]));
	cr_expect(r->port[n] >= 32768 && r->port[n] <= 60999, "step %d: port %d", n, r->port[n]);
	expect_bound(r, n, r->port[n]);
}

/* ---- the tests ------------------------------------------------------------------------ */

/* Nobody cannot take a port below 1024 through the SID; a mask without
 * the port bits over port 80 binds an ephemeral port and hears nothing
 * for 80 or 22; root's rping then still serves port 80. */
Test(afib, privileged_port_refused_as_nobody)
{
	struct lt_pipes p;
	struct report r;
	pid_t pid;

	start();
	victim_server(VICTIM_PORT);
	pid = hostile(PRIV_PORT, &p, &r);
	cr_expect_eq(r.err[0], EACCES, "TCP|80 as nobody: %s", strerror(r.err[0]));
	cr_expect_eq(r.err[1], EACCES, "TCP|22 from a PS_IB id as nobody: %s", strerror(r.err[1]));
	expect_ephemeral(&r, 2);
	refused(80);
	refused(22);
	victim_works(VICTIM_PORT);
	victim_server(80);
	victim_works(80);
	hostile_done(pid, &p, &r);
	cr_expect_eq(r.reqs[2], 0, "the wide-mask listener got %d requests", r.reqs[2]);
	cr_expect_eq(r.strays, 0);
}

/* A mask without the port bits over the victim's port: an ephemeral port,
 * whose one SID the listener hears; a mask naming part of the port: that
 * part. Neither hears the victim's 7001 nor 7002. */
Test(afib, wide_mask_listens_on_its_own_sid_only)
{
	struct lt_pipes p;
	struct report r;
	pid_t pid;

	start();
	victim_server(VICTIM_PORT);
	pid = hostile(WIDE_MASK, &p, &r);
	cr_expect_eq(r.err[0], EADDRNOTAVAIL, "TCP|7001 beside root's listener: %s",
		     strerror(r.err[0]));
	expect_ephemeral(&r, 1);
	cr_expect_neq(r.port[1], VICTIM_PORT);
	expect_bound(&r, 2, VICTIM_PORT & 0xFF00);
	refused(VICTIM_PORT + 1);
	victim_works(VICTIM_PORT);
	reaches(r.port[1]);
	reaches(r.port[2]);
	hostile_done(pid, &p, &r);
	cr_expect_eq(r.reqs[1], 1, "the wide-mask listener on %d got %d requests", r.port[1],
		     r.reqs[1]);
	cr_expect_eq(r.reqs[2], 1, "the listener on %d got %d requests", r.port[2], r.reqs[2]);
	cr_expect_eq(r.strays, 0);
}

/* An RDMA_PS_IB id naming root's TCP-space SID binds in the TCP space
 * and is refused there; in its own IB space the same port is its own. */
Test(afib, ps_ib_id_cannot_take_a_tcp_listeners_sid)
{
	struct lt_pipes p;
	struct report r;
	pid_t pid;

	start();
	victim_server(VICTIM_PORT);
	pid = hostile(PS_IB_ON_TCP, &p, &r);
	cr_expect_eq(r.err[0], EADDRINUSE, "root's SID, the port's GID: %s", strerror(r.err[0]));
	cr_expect_eq(r.err[1], EADDRINUSE, "root's SID with REUSEADDR: %s", strerror(r.err[1]));
	cr_expect_eq(r.err[2], EADDRNOTAVAIL, "root's SID, the wildcard GID: %s", strerror(r.err[2]));
	cr_expect_eq(r.err[3], EPROTONOSUPPORT, "a SID in no port space: %s", strerror(r.err[3]));
	cr_expect_eq(r.err[4], EPROTONOSUPPORT, "the UDP space from a TCP id: %s", strerror(r.err[4]));
	cr_expect_eq(r.err[5], 0, "the IB space's 7001: %s", strerror(r.err[5]));
	cr_expect_eq(r.sid[5], RDMA_IB_PS_IB | VICTIM_PORT, "SID %#llx", (unsigned long long)r.sid[5]);
	cr_expect_eq(r.mask[5], MASK_ALL);
	victim_works(VICTIM_PORT);
	hostile_done(pid, &p, &r);
	cr_expect_eq(r.reqs[5], 0, "the IB-space listener got %d requests", r.reqs[5]);
	cr_expect_eq(r.strays, 0);
}

/* ---- a legitimate AF_IB user ------------------------------------------------------------ */

#define HELLO "afib-hello"

/* nobody on node 1: an RDMA_PS_IB listener on an ephemeral port of the IB
 * space (the SID's port bits unmasked, as librdmacm's rdma_getaddrinfo
 * leaves a SID without a port); says 'L' and the port, accepts one
 * connection (the REQ's private data is the client's own: no CMA header
 * in the IB space), says 'E', and disconnects when told. */
static void ib_listener_child(int mode, struct lt_pipes *p)
{
	struct sockaddr_ib a = sib(0, RDMA_IB_PS_IB, MASK_WIDE);
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1 };
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id, *nid;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa;
	uint16_t port;
	char c;

	(void)mode;
	LT_CK(setgroups(0, NULL) == 0);
	LT_CK(setresgid(NOBODY_ID, NOBODY_ID, NOBODY_ID) == 0);
	LT_CK(setresuid(NOBODY_ID, NOBODY_ID, NOBODY_ID) == 0);
	lt_node(1);
	ch = rdma_create_event_channel();
	LT_CK(ch);
	LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_IB) == 0);
	LT_CK(rdma_bind_addr(id, (struct sockaddr *)&a) == 0);
	LT_CK(rdma_listen(id, 4) == 0);
	port = ntohs(rdma_get_src_port(id));
	LT_CK(be64toh(((struct sockaddr_ib *)&id->route.addr.src_addr)->sib_sid) ==
	      (RDMA_IB_PS_IB | port));
	LT_CK(write(p->ready[1], "L", 1) == 1);
	LT_CK(write(p->ready[1], &port, sizeof(port)) == (ssize_t)sizeof(port));
	ev = lt_child_wait(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	LT_CK(ev->listen_id == id);
	LT_CK(ev->param.conn.private_data_len >= sizeof(HELLO));
	LT_CK(!memcmp(ev->param.conn.private_data, HELLO, sizeof(HELLO)));
	nid = ev->id;
	LT_CK(nid->route.addr.src_addr.sa_family == AF_IB);
	lt_rc_qp_attr(&qa);
	LT_CK(rdma_create_qp(nid, nid->pd, &qa) == 0);
	LT_CK(rdma_accept(nid, &cp) == 0);
	rdma_ack_cm_event(ev);
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ESTABLISHED));
	LT_CK(write(p->ready[1], "E", 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1);
	rdma_disconnect(nid);
	rdma_destroy_qp(nid);
	rdma_destroy_id(nid);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* root on node 2: connects to node 1's GID and the IB space's SID of port
 * `port` (an AF_IB destination; the source binds implicitly in the IB
 * space), says 'E' once established, and disconnects when told. */
static void ib_client_child(int port, struct lt_pipes *p)
{
	struct sockaddr_ib dst = sib(1, RDMA_IB_PS_IB | (uint64_t)port, MASK_ALL);
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1,
				      .retry_count = 7, .private_data = HELLO,
				      .private_data_len = sizeof(HELLO) };
	struct rdma_event_channel *ch;
	struct ibv_qp_init_attr qa;
	struct rdma_cm_id *id;
	char c;

	lt_node(2);
	ch = rdma_create_event_channel();
	LT_CK(ch);
	LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_IB) == 0);
	LT_CK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000) == 0);
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
	LT_CK(be64toh(((struct sockaddr_ib *)&id->route.addr.src_addr)->sib_sid) >> 16 ==
	      RDMA_IB_PS_IB >> 16);
	LT_CK(rdma_resolve_route(id, 2000) == 0);
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
	lt_rc_qp_attr(&qa);
	LT_CK(rdma_create_qp(id, id->pd, &qa) == 0);
	LT_CK(rdma_connect(id, &cp) == 0);
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ESTABLISHED));
	LT_CK(write(p->ready[1], "E", 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1);
	rdma_disconnect(id);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* A legitimate AF_IB user is unchanged: nobody's IB-space listener on a
 * port the mask left to the bind, root's AF_IB client connecting to that
 * exact SID with its private data, both established; beside them root's
 * rping on TCP 7001 works, and nobody's bind of the TCP space's 7001
 * from the same kind of id is refused. */
Test(afib, legitimate_af_ib_connection)
{
	struct lt_pipes lp, cp, hp;
	struct report r;
	pid_t lpid, cpid, hpid;
	uint16_t port = 0;

	start();
	victim_server(VICTIM_PORT);
	hpid = hostile(PS_IB_ON_TCP, &hp, &r);
	cr_expect_eq(r.err[0], EADDRINUSE, "root's SID, the port's GID: %s", strerror(r.err[0]));
	gid_of("127.10.0.1", g_gid);
	lpid = lt_spawn(ib_listener_child, 0, &lp);
	cr_assert_eq(read(lp.ready[0], &port, sizeof(port)), (ssize_t)sizeof(port));
	cr_expect(port >= 32768 && port <= 60999, "the IB-space listener's port %d", port);
	cpid = lt_spawn(ib_client_child, port, &cp);
	cr_expect_eq(lt_child_says(&lp, 10000, "the listener was not established"), 'E');
	victim_works(VICTIM_PORT);
	cr_assert_eq(write(cp.go[1], "g", 1), 1);
	cr_assert_eq(write(lp.go[1], "g", 1), 1);
	lt_reap(cpid);
	lt_reap(lpid);
	hostile_done(hpid, &hp, &r);
	cr_expect_eq(r.strays, 0);
}
