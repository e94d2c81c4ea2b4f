/*
 * Link faults under connections: on a fat tree with two spines
 * (fat-tree:2,2,1: node1 on leaf1 = sw1, node2 on leaf2 = sw2, spines sw3
 * and sw4) under Debian's unmodified opensm, the leaf1-spine cable on the
 * path between the two hosts goes down while RC connections made by
 * uscm's librdmacm are established:
 *  - a connection whose retry window (local ACK timeout x (retry count +
 *    1)) ends before OpenSM has rerouted gets IBV_WC_RETRY_EXC_ERR on its
 *    next send, and the rdma_cm event channel stays silent (the kernel's
 *    CM raises nothing for a data path failure: the application sees the
 *    completion error). OpenSM is held (SIGSTOP) while that happens, so the
 *    outcome does not depend on how fast it reroutes on a loaded machine;
 *  - a connection with librdmacm's default timeouts rides through it (its
 *    retransmissions follow the new LFTs), as on hardware when the SM
 *    reroutes within the retry window;
 *  - a new connection between the same hosts succeeds through the other
 *    spine: the time from the link going down (OpenSM running) to the
 *    first new connection established is printed (docs/sim.md).
 * And fault rules by link (link=sw1:3): 100% loss on one leaf-spine cable
 * under the built-in SM loses the CM's REQ of a connection whose path
 * crosses it (the CM retries, then the connect fails) while a connection
 * over the other leaf's links is unaffected; without the rule it connects.
 * Skipped when opensm or infiniband-diags is missing.
 */
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "libtest.h"

#define PORT 7491

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(linkfault, .fini = teardown, .timeout = 120);

/* ---- the passive side: node2, a forked child ------------------------------------ */

/* Accepts connections and receives one message on each; writes a byte to
 * p->ready for each message, until `go` says stop. */
static void server(int node, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid;
	struct sockaddr_in any = lt_sin("0.0.0.0", PORT);
	static char bufs[16][64];
	int n = 0;

	lt_node(node);
	LT_CK((ch = rdma_create_event_channel()));
	LT_CK(rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) == 0);
	LT_CK(rdma_bind_addr(lid, (struct sockaddr *)&any) == 0);
	LT_CK(rdma_listen(lid, 8) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	for (;;) {
		struct pollfd pf[2] = { { .fd = ch->fd, .events = POLLIN }, { .fd = p->go[0], .events = POLLIN } };
		struct rdma_cm_event *ev;

		LT_CK(poll(pf, 2, 60000) > 0);
		if (pf[1].revents)
			_exit(0);
		LT_CK(rdma_get_cm_event(ch, &ev) == 0);
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && n < 16) {
			struct rdma_cm_id *cid = ev->id;
			struct ibv_qp_init_attr qa;
			struct rdma_conn_param cp;
			struct ibv_mr *mr;

			rdma_ack_cm_event(ev);
			memset(&qa, 0, sizeof(qa));
			qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
			qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
			qa.qp_type = IBV_QPT_RC;
			qa.sq_sig_all = 1;
			LT_CK(rdma_create_qp(cid, NULL, &qa) == 0);
			LT_CK((mr = rdma_reg_msgs(cid, bufs[n], sizeof(bufs[n]))));
			/* room for every message the client may send on it */
			for (int i = 0; i < 4; i++)
				LT_CK(rdma_post_recv(cid, NULL, bufs[n], sizeof(bufs[n]), mr) == 0);
			n++;
			memset(&cp, 0, sizeof(cp));
			cp.responder_resources = cp.initiator_depth = 1;
			cp.rnr_retry_count = 7;
			LT_CK(rdma_accept(cid, &cp) == 0);
			continue;
		}
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED) {
			struct rdma_cm_id *cid = ev->id;

			rdma_ack_cm_event(ev);
			(void)cid;
			continue;
		}
		/* DISCONNECTED, CONNECT_ERROR, TIMEWAIT_EXIT...: nothing to do */
		rdma_ack_cm_event(ev);
	}
}

/* ---- the active side: node1, the test process -------------------------------------- */

struct conn {
	struct rdma_cm_id *id;
	struct ibv_mr *mr;
	char msg[16];
};

/* A connection to ip (try_connect: node2) (ack_timeout 0: librdmacm's default); 0, or -1
 * with the failure in why (the event, e.g. UNREACHABLE after the REQ's
 * retries) */
static int try_connect_to(struct rdma_event_channel *ch, struct conn *c, const char *ip, uint8_t ack_timeout,
			  int retry, char *why, size_t wlen)
{
	struct sockaddr_in dst = lt_sin(ip, PORT);
	struct rdma_conn_param cp;
	struct ibv_qp_init_attr qa;
	struct rdma_cm_event *ev;

	memset(c, 0, sizeof(*c));
	cr_assert_eq(rdma_create_id(ch, &c->id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 5000));
	if (ack_timeout)
		cr_assert_eq(rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &ack_timeout,
					     sizeof(ack_timeout)),
			     0);
	cr_assert_eq(rdma_resolve_route(c->id, 2000), 0);
	ev = lt_event(ch, 10000);
	if (!ev || ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED) {
		snprintf(why, wlen, "route: %s", ev ? rdma_event_str(ev->event) : "no event");
		goto fail;
	}
	rdma_ack_cm_event(ev);
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 8;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	cr_assert_eq(rdma_create_qp(c->id, NULL, &qa), 0, "%s", strerror(errno));
	c->mr = rdma_reg_msgs(c->id, c->msg, sizeof(c->msg));
	cr_assert(c->mr);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = (uint8_t)retry;
	cp.rnr_retry_count = 7;
	cr_assert_eq(rdma_connect(c->id, &cp), 0, "%s", strerror(errno));
	ev = lt_event(ch, 30000);
	if (ev && ev->event == RDMA_CM_EVENT_ESTABLISHED) {
		rdma_ack_cm_event(ev);
		return 0;
	}
	snprintf(why, wlen, "connect: %s (status %d)", ev ? rdma_event_str(ev->event) : "no event",
		 ev ? ev->status : 0);
fail:
	if (ev)
		rdma_ack_cm_event(ev);
	if (c->mr)
		rdma_dereg_mr(c->mr);
	if (c->id->qp)
		rdma_destroy_qp(c->id);
	rdma_destroy_id(c->id);
	memset(c, 0, sizeof(*c));
	return -1;
}

static int try_connect(struct rdma_event_channel *ch, struct conn *c, uint8_t ack_timeout, int retry,
		       char *why, size_t wlen)
{
	return try_connect_to(ch, c, "127.10.0.2", ack_timeout, retry, why, wlen);
}

static void send_msg(struct conn *c, const char *text)
{
	snprintf(c->msg, sizeof(c->msg), "%s", text);
	cr_assert_eq(rdma_post_send(c->id, NULL, c->msg, strlen(c->msg) + 1, c->mr, IBV_SEND_SIGNALED), 0);
}

/* The send completion of c within ms: its status, or -1 when none came. */
static int send_status(struct conn *c, int ms)
{
	struct ibv_wc wc;

	if (!lt_wait_cq(c->id->send_cq, &wc, ms))
		return -1;
	return (int)wc.status;
}

static void drop_conn(struct conn *c)
{
	rdma_dereg_mr(c->mr);
	rdma_destroy_qp(c->id);
	rdma_destroy_id(c->id);
}

/* the spine (1, 2) ibtracert from node1 to node2 passes, 0: none */
static int spine_on_path(void)
{
	char *out = NULL;
	int spine = 0;

	if (lt_sh(&out,
		  "USCM_SIM_NODE=node1 %s timeout 20 sh -c 'ibtracert $(%s/uscm-sim status | awk '\\''$2 == \"node1\" "
		  "{ print $4 }'\\'') $(%s/uscm-sim status | awk '\\''$2 == \"node2\" { print $4 }'\\'')' 2>&1",
		  lt_util_env(), lt_bin(), lt_bin()) == 0) {
		if (strstr(out, "\"spine1\""))
			spine = 1;
		else if (strstr(out, "\"spine2\""))
			spine = 2;
	}
	free(out);
	return spine;
}

static void link_set(int port, const char *state)
{
	char *out = NULL;

	cr_assert_eq(lt_sh(&out, "%s/uscm-sim link sw1:%d %s 2>&1", lt_bin(), port, state), 0, "%s", out);
	free(out);
}

static pid_t opensm_pid(void)
{
	char *out = NULL;
	pid_t pid;

	cr_assert_eq(lt_sh(&out, "%s/uscm-sim status | sed -n 's/.*opensm on [^,]*, pid \\([0-9]*\\).*/\\1/p'",
			   lt_bin()),
		     0);
	pid = (pid_t)atoi(out);
	free(out);
	cr_assert(pid > 0, "no opensm pid in uscm-sim status");
	return pid;
}

/* New connections until one is established (each attempt that fails is
 * what an application retrying would see); the time it took from t0. */
static uint64_t connect_until(struct rdma_event_channel *ch, struct conn *c, uint64_t t0, int *attempts)
{
	char why[128] = "";

	*attempts = 0;
	while (lt_now_ms() - t0 < 30000) {
		++*attempts;
		if (try_connect(ch, c, 0, 7, why, sizeof(why)) == 0)
			return lt_now_ms() - t0;
		usleep(20 * 1000);
	}
	cr_assert_fail("no new connection within 30 s (last: %s)", why);
	return 0;
}

Test(linkfault, opensm_link_down_under_connections)
{
	struct rdma_event_channel *ch;
	struct conn fast, dflt, fresh;
	struct lt_pipes p;
	char why[128] = "";
	pid_t srv, sm;
	int s0, s1, st, attempts;
	uint64_t t0, t_exc, t_new, t_cont, t_route;

	lt_need("opensm", "opensm");
	lt_need("ibtracert", "infiniband-diags");
	/* a REQ sent before the server's CM listens is retried soon */
	setenv("USCM_CM_RESPONSE_TIMEOUT", "14", 1);
	lt_fabric_start_opts("ib", 2, "--no-uscmd --sm opensm --topo fat-tree:2,2,1");
	srv = lt_spawn(server, 2, &p);
	lt_node(1);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	/* a retry window of 4 x 67 ms (ACK timeout 14, retry count 3) ... */
	cr_assert_eq(try_connect(ch, &fast, 14, 3, why, sizeof(why)), 0, "%s", why);
	/* ... and librdmacm's defaults (the timeout from OpenSM's PathRecord
	 * PacketLifeTime, retry count 7) */
	cr_assert_eq(try_connect(ch, &dflt, 0, 7, why, sizeof(why)), 0, "%s", why);
	send_msg(&fast, "one");
	cr_assert_eq(send_status(&fast, 10000), IBV_WC_SUCCESS);
	send_msg(&dflt, "one");
	cr_assert_eq(send_status(&dflt, 10000), IBV_WC_SUCCESS);
	s0 = spine_on_path();
	cr_assert(s0, "no spine on the path node1 -> node2");

	/* OpenSM held: the cable leaf1 - spine s0 (leaf1's port 1 + s0) goes
	 * down and nothing reroutes */
	sm = opensm_pid();
	cr_assert_eq(kill(sm, SIGSTOP), 0);
	link_set(1 + s0, "down");
	t0 = lt_now_ms();
	send_msg(&fast, "two");
	send_msg(&dflt, "two");
	st = send_status(&fast, 10000);
	t_exc = lt_now_ms() - t0;
	cr_expect_eq(st, IBV_WC_RETRY_EXC_ERR, "the send on a dead path: %s",
		     st < 0 ? "no completion" : ibv_wc_status_str((enum ibv_wc_status)st));
	/* the CM says nothing by itself about a data path failure */
	{
		struct rdma_cm_event *ev = lt_event(ch, 200);

		cr_expect_null(ev, "an rdma_cm event: %s", ev ? rdma_event_str(ev->event) : "");
		if (ev)
			rdma_ack_cm_event(ev);
	}
	/* the default connection is still retrying */
	cr_expect_eq(send_status(&dflt, 0), -1, "the default connection's send completed on a dead path");
	cr_assert_eq(kill(sm, SIGCONT), 0);
	t_cont = lt_now_ms();
	/* OpenSM takes the leaf's Trap 128, sweeps and routes through the
	 * other spine (ibtracert shows it) ... */
	for (s1 = 0; lt_now_ms() - t_cont < 20000; usleep(20 * 1000))
		if ((s1 = spine_on_path()) && s1 != s0)
			break;
	t_route = lt_now_ms() - t_cont;
	cr_expect(s1 && s1 != s0, "the path is through spine%d (was %d) %llu ms after OpenSM resumed", s1, s0,
		  (unsigned long long)t_route);
	/* ... the default connection's retransmission gets there ... */
	st = send_status(&dflt, 30000);
	cr_expect_eq(st, IBV_WC_SUCCESS, "the default connection across the reroute: %s",
		     st < 0 ? "no completion" : ibv_wc_status_str((enum ibv_wc_status)st));
	/* ... and a new connection is made at the first try */
	t_new = connect_until(ch, &fresh, lt_now_ms(), &attempts);
	cr_expect_eq(attempts, 1);
	send_msg(&fresh, "three");
	cr_expect_eq(send_status(&fresh, 10000), IBV_WC_SUCCESS);
	printf("linkfault: RETRY_EXC_ERR %llu ms after the link went down (ACK timeout 14, retry 3); "
	       "OpenSM resumed: rerouted (ibtracert) within %llu ms; a new connection then took %llu ms\n",
	       (unsigned long long)t_exc, (unsigned long long)t_route, (unsigned long long)t_new);
	drop_conn(&fresh);
	drop_conn(&fast);

	/* the same with OpenSM running throughout: the new path's cable goes
	 * down; time from there to the first new connection established */
	link_set(1 + s0, "up");
	link_set(1 + s1, "down");
	t0 = lt_now_ms();
	t_new = connect_until(ch, &fresh, t0, &attempts);
	cr_expect_eq(spine_on_path(), s0, "back through spine%d", s0);
	send_msg(&fresh, "four");
	cr_expect_eq(send_status(&fresh, 10000), IBV_WC_SUCCESS);
	/* the default connection rides through this one too */
	send_msg(&dflt, "five");
	cr_expect_eq(send_status(&dflt, 30000), IBV_WC_SUCCESS);
	/* the first REQ, sent before the reroute, is lost; the CM sends it
	 * again after its timeout (2 x OpenSM's PacketLifeTime 18, 1.07 s,
	 * plus the remote response timeout): that, not the reroute, makes
	 * most of this figure */
	printf("linkfault: link down -> new connection established through the other spine: %llu ms "
	       "(%d attempts; OpenSM's sweep interval 10 s)\n",
	       (unsigned long long)t_new, attempts);
	/* within OpenSM's sweep interval (10 s): the trap, not the sweep */
	cr_expect_lt(t_new, 10000);
	drop_conn(&fresh);
	drop_conn(&dflt);
	rdma_destroy_event_channel(ch);
	cr_assert_eq(write(p.go[1], "x", 1), 1);
	lt_reap(srv);
}

/* A forked child, node `node` (forked before this process's first rdma_*
 * call): when *go gets a byte it connects to ip and sends one message (its
 * success is the exit status). */
static pid_t client_child(int node, const char *ip, int go[2])
{
	pid_t pid;

	cr_assert_eq(pipe(go), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char b;

		LT_CK(read(go[0], &b, 1) == 1);
		struct rdma_event_channel *ch;
		struct sockaddr_in dst = lt_sin(ip, PORT);
		struct ibv_qp_init_attr qa;
		struct rdma_conn_param cp;
		struct rdma_cm_id *id;
		struct ibv_mr *mr;
		struct ibv_wc wc;
		char msg[8] = "hi";

		lt_node(node);
		LT_CK((ch = rdma_create_event_channel()));
		LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
		lt_child_resolve(ch, id, &dst);
		memset(&qa, 0, sizeof(qa));
		qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
		qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
		qa.qp_type = IBV_QPT_RC;
		qa.sq_sig_all = 1;
		LT_CK(rdma_create_qp(id, NULL, &qa) == 0);
		LT_CK((mr = rdma_reg_msgs(id, msg, sizeof(msg))));
		memset(&cp, 0, sizeof(cp));
		cp.retry_count = 7;
		cp.rnr_retry_count = 7;
		LT_CK(rdma_connect(id, &cp) == 0);
		rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ESTABLISHED));
		LT_CK(rdma_post_send(id, NULL, msg, 3, mr, IBV_SEND_SIGNALED) == 0);
		LT_CK(rdma_get_send_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
		_exit(0);
	}
	return pid;
}

static uint64_t dropped_by(int n)
{
	char *out = NULL;
	uint64_t v;

	lt_sh(&out, "%s/uscm-sim status | awk '$2 == \"node%d\" { print $11 }'", lt_bin(), n);
	v = strtoull(out ? out : "0", NULL, 10);
	free(out);
	return v;
}

/* fat-tree:2,2,2 under the built-in SM: node1, node2 on leaf1 (sw1), node3,
 * node4 on leaf2 (sw2); leaf ports 3 and 4 go to spine1, spine2. 100% loss
 * on the leaf1 - spine cable the path node1 -> node3 takes: node1's REQs
 * to node3 are lost (the CM retries, then the connect fails with
 * UNREACHABLE, as the kernel's CM on a REQ timeout), while node1 -> node2
 * (leaf1 only) and node4 -> node3 (leaf2 only) connect and carry data;
 * the rule cleared, node1 -> node3 connects. */
Test(linkfault, loss_rule_on_one_link)
{
	struct rdma_event_channel *ch;
	struct conn c;
	struct lt_pipes p2, p3;
	char why[128] = "", *out = NULL, want[64];
	pid_t s2, s3, c4;
	int spine, rc, go4[2];
	uint64_t t0, dropped0;

	lt_need("ibtracert", "infiniband-diags");
	setenv("USCM_CM_RESPONSE_TIMEOUT", "14", 1);
	setenv("USCM_CM_RETRIES", "3", 1);
	lt_fabric_start_opts("ib", 4, "--no-uscmd --topo fat-tree:2,2,2");
	s2 = lt_spawn(server, 2, &p2);
	s3 = lt_spawn(server, 3, &p3);
	c4 = client_child(4, "127.10.0.3", go4);
	lt_node(1);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	cr_assert_eq(lt_sh(&out,
			   "USCM_SIM_NODE=node1 %s timeout 20 ibtracert $(%s/uscm-sim status | awk '$2 == \"node1\" "
			   "{ print $4 }') $(%s/uscm-sim status | awk '$2 == \"node3\" { print $4 }') 2>&1",
			   lt_util_env(), lt_bin(), lt_bin()),
		     0, "%s", out);
	spine = strstr(out, "\"spine1\"") ? 1 : strstr(out, "\"spine2\"") ? 2 : 0;
	cr_assert(spine, "%s", out);
	free(out);
	out = NULL;
	/* leaf1's port 2 + s is its cable to spine s */
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim fault 'drop=100%%,link=sw1:%d' 2>&1 && %s/uscm-sim fault list 2>&1",
			   lt_bin(), 2 + spine, lt_bin()),
		     0, "%s", out);
	snprintf(want, sizeof(want), "drop=100%%,link=sw1:%d", 2 + spine);
	cr_expect(strstr(out, want), "fault list:\n%s", out);
	free(out);
	out = NULL;
	/* other links: unaffected */
	cr_assert_eq(try_connect_to(ch, &c, "127.10.0.2", 0, 7, why, sizeof(why)), 0, "node1 -> node2: %s", why);
	send_msg(&c, "a");
	cr_expect_eq(send_status(&c, 10000), IBV_WC_SUCCESS);
	drop_conn(&c);
	cr_assert_eq(write(go4[1], "g", 1), 1);
	lt_reap(c4);
	/* across the cable: the REQ and its retries are lost */
	dropped0 = dropped_by(1);
	t0 = lt_now_ms();
	rc = try_connect_to(ch, &c, "127.10.0.3", 0, 7, why, sizeof(why));
	cr_expect_eq(rc, -1, "node1 -> node3 connected across 100%% loss");
	cr_expect(strstr(why, "UNREACHABLE"), "node1 -> node3: %s", why);
	printf("linkfault: connect across the cut link: %s after %llu ms; node1 dropped %llu datagrams\n", why,
	       (unsigned long long)(lt_now_ms() - t0), (unsigned long long)(dropped_by(1) - dropped0));
	/* the REQ and USCM_CM_RETRIES retries at least */
	cr_expect_geq(dropped_by(1) - dropped0, 4);
	if (rc == 0)
		drop_conn(&c);
	cr_assert_eq(lt_sh(&out, "%s/uscm-sim fault clear 2>&1", lt_bin()), 0, "%s", out);
	free(out);
	cr_assert_eq(try_connect_to(ch, &c, "127.10.0.3", 0, 7, why, sizeof(why)), 0, "node1 -> node3: %s", why);
	send_msg(&c, "b");
	cr_expect_eq(send_status(&c, 10000), IBV_WC_SUCCESS);
	drop_conn(&c);
	rdma_destroy_event_channel(ch);
	cr_assert_eq(write(p2.go[1], "x", 1), 1);
	cr_assert_eq(write(p3.go[1], "x", 1), 1);
	lt_reap(s2);
	lt_reap(s3);
}
