/*
 * Connections between two processes on two simulated nodes, through the
 * library: the test process is node 1 (active side), a forked child is
 * node 2 (passive side). Connect / accept with private data both ways,
 * data over the QPs the library created (rdma_verbs.h helpers), disconnect
 * and TimeWait; reject with private data; no listener; a dead node
 * (UNREACHABLE / ETIMEDOUT within the configured bound); simultaneous
 * disconnect; synchronous endpoints (rdma_create_ep / rdma_get_request);
 * a user-owned QP (rdma_init_qp_attr + rdma_establish); RoCE.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "libtest.h"

#define PORT 7471

static void setup_ib(void)
{
	lt_fabric_node1("ib"); /* the forked server becomes node 2 */
	/* Short TimeWait so TIMEWAIT_EXIT shows up within the test. */
	setenv("USCM_TIMEWAIT_MS", "100", 1);
}

static void setup_roce(void)
{
	lt_fabric_node1("roce");
	setenv("USCM_TIMEWAIT_MS", "100", 1);
	/* The RoCE lifetime formula gives ~4.3 s per CM try: cap it. */
	setenv("USCM_CM_MAX_TIMER_MS", "1000", 1);
}

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(conn, .init = setup_ib, .fini = teardown, .timeout = 120);
TestSuite(conn_roce, .init = setup_roce, .fini = teardown, .timeout = 120);

/* ---- the passive side (a child process: no Criterion asserts there) ------------ */

enum srv_mode { SRV_ACCEPT, SRV_REJECT, SRV_OTHER_PORT, SRV_SIMUL, SRV_BACKLOG, SRV_LOOPBACK };

static void server(int mode, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid, *cid;
	struct rdma_cm_event *ev;
	/* SRV_LOOPBACK: a listener bound to 127.0.0.1, which the kernel's
	 * rdma_bind_addr treats as the wildcard (cma_any_addr) */
	struct sockaddr_in any = lt_sin(mode == SRV_LOOPBACK ? "127.0.0.1" : "0.0.0.0",
					mode == SRV_OTHER_PORT ? PORT + 1 : PORT);
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct ibv_wc wc;
	struct ibv_mr *mr;
	char buf[64], c;
	int tag = 77;

	lt_node(2);
	LT_CK((ch = rdma_create_event_channel()));
	LT_CK(rdma_create_id(ch, &lid, &tag, RDMA_PS_TCP) == 0);
	LT_CK(rdma_bind_addr(lid, (struct sockaddr *)&any) == 0);
	LT_CK(!lid->verbs && !lid->pd); /* no device: as the wildcard */
	LT_CK(rdma_listen(lid, mode == SRV_BACKLOG ? 1 : 4) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	if (mode == SRV_BACKLOG) {
		/* The first request is queued on the listener, unretrieved:
		 * the channel turns readable (poll leaves it queued). */
		struct pollfd pf = { .fd = ch->fd, .events = POLLIN };

		LT_CK(poll(&pf, 1, 10000) == 1);
		LT_CK(write(p->ready[1], "q", 1) == 1);
	}
	if (mode == SRV_OTHER_PORT || mode == SRV_BACKLOG) {
		/* Stay up (the CM agent answers) until the client is done. */
		LT_CK(read(p->go[0], &c, 1) == 1);
		_exit(0);
	}
	ev = lt_child_wait(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	LT_CK(ev->listen_id == lid);
	cid = ev->id;
	LT_CK(cid != lid && cid->verbs && cid->port_num == 1);
	/* librdmacm: a new id of a request has its device's PD */
	LT_CK(cid->pd && cid->pd->context == cid->verbs);
	LT_CK(cid->context == &tag);
	/* The user's 56 bytes after the 36-byte CMA header. */
	LT_CK(ev->param.conn.private_data_len == 56);
	LT_CK(!memcmp(ev->param.conn.private_data, "hello", 6));
	/* The client asked responder_resources 2, initiator_depth 3: from here
	 * we may answer 3 reads and issue 2. */
	LT_CK(ev->param.conn.responder_resources == 3);
	LT_CK(ev->param.conn.initiator_depth == 2);
	LT_CK(ev->param.conn.retry_count == 6);
	LT_CK(ntohs(rdma_get_dst_port(cid)) > 0 && ntohs(rdma_get_src_port(cid)) == PORT);
	LT_CK(((struct sockaddr_in *)rdma_get_peer_addr(cid))->sin_addr.s_addr == htonl(0x7F0A0001));
	LT_CK(((struct sockaddr_in *)rdma_get_local_addr(cid))->sin_addr.s_addr == htonl(0x7F0A0002));
	rdma_ack_cm_event(ev);
	if (mode == SRV_REJECT) {
		LT_CK(rdma_reject(cid, "nope", 5) == 0);
		LT_CK(rdma_destroy_id(cid) == 0);
		LT_CK(rdma_destroy_id(lid) == 0);
		rdma_destroy_event_channel(ch);
		_exit(0);
	}
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	LT_CK(rdma_create_qp(cid, NULL, &qa) == 0);
	LT_CK(cid->qp && cid->send_cq && cid->recv_cq && cid->pd);
	LT_CK(cid->qp->pd == cid->pd); /* rdma_create_qp(id, NULL): id->pd */
	LT_CK((mr = rdma_reg_msgs(cid, buf, sizeof(buf))));
	memset(buf, 0, sizeof(buf));
	LT_CK(rdma_post_recv(cid, cid, buf, sizeof(buf), mr) == 0);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = "welcome";
	cp.private_data_len = 8;
	cp.responder_resources = cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	LT_CK(rdma_accept(cid, &cp) == 0);
	ev = lt_child_wait(ch, RDMA_CM_EVENT_ESTABLISHED);
	LT_CK(ev->id == cid);
	rdma_ack_cm_event(ev);
	/* The CQ context is the id: rdma_get_recv_comp asserts it. */
	LT_CK(rdma_get_recv_comp(cid, &wc) == 1);
	LT_CK(wc.status == IBV_WC_SUCCESS && wc.byte_len == 6 && !strcmp(buf, "ping!"));
	if (mode == SRV_SIMUL) {
		LT_CK(write(p->ready[1], "e", 1) == 1);
		LT_CK(read(p->go[0], &c, 1) == 1);
		LT_CK(rdma_disconnect(cid) == 0);
		ev = lt_child_wait(ch, RDMA_CM_EVENT_DISCONNECTED);
		rdma_ack_cm_event(ev);
	} else {
		ev = lt_child_wait(ch, RDMA_CM_EVENT_DISCONNECTED);
		LT_CK(ev->id == cid);
		rdma_ack_cm_event(ev);
		LT_CK(rdma_disconnect(cid) == 0); /* answers the DREQ */
	}
	ev = lt_child_wait(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT);
	rdma_ack_cm_event(ev);
	LT_CK(rdma_dereg_mr(mr) == 0);
	rdma_destroy_qp(cid);
	LT_CK(rdma_destroy_id(cid) == 0);
	LT_CK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(ch);
	_exit(0);
}

/* ---- the active side -------------------------------------------------------------- */

static struct rdma_cm_id *client_route(struct rdma_event_channel *ch, uint16_t port)
{
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in dst = lt_sin("127.10.0.2", port);

	lt_node(1);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000));
	cr_assert_eq(rdma_resolve_route(id, 2000), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 4000);
	rdma_ack_cm_event(ev);
	return id;
}

static void client_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	cr_assert_eq(rdma_create_qp(id, NULL, &qa), 0, "%s", strerror(errno));
}

static struct rdma_conn_param hello(void)
{
	struct rdma_conn_param cp;

	memset(&cp, 0, sizeof(cp));
	cp.private_data = "hello";
	cp.private_data_len = 6;
	cp.responder_resources = 2;
	cp.initiator_depth = 3;
	cp.retry_count = 6;
	cp.rnr_retry_count = 7;
	return cp;
}

static void connect_send_disconnect_to(int mode)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = hello();
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct lt_pipes p;
	char msg[8] = "ping!";
	pid_t pid;

	pid = lt_spawn(server, mode, &p);
	ch = rdma_create_event_channel();
	cr_assert(ch, "%s", strerror(errno));
	id = client_route(ch, PORT);
	client_qp(id);
	mr = rdma_reg_msgs(id, msg, sizeof(msg));
	cr_assert(mr);
	cr_assert_eq(rdma_connect(id, &cp), 0, "%s", strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	/* The REP's private data (the whole 196-byte field). */
	cr_expect_eq(ev->param.conn.private_data_len, 196);
	cr_expect_arr_eq(ev->param.conn.private_data, "welcome", 8);
	cr_expect_eq(ev->param.conn.initiator_depth, 1, "the server allowed 1 read");
	rdma_ack_cm_event(ev);
	cr_assert_eq(rdma_post_send(id, NULL, msg, 6, mr, IBV_SEND_SIGNALED), 0);
	cr_assert_eq(rdma_get_send_comp(id, &wc), 1);
	cr_expect_eq(wc.status, IBV_WC_SUCCESS, "%s", ibv_wc_status_str(wc.status));
	cr_assert_eq(rdma_disconnect(id), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000);
	cr_expect_eq(ev->status, 0);
	rdma_ack_cm_event(ev);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 5000));
	rdma_dereg_mr(mr);
	rdma_destroy_qp(id);
	cr_expect_eq(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
	lt_reap(pid);
}

static void connect_send_disconnect(void)
{
	connect_send_disconnect_to(SRV_ACCEPT);
}

/* A listener bound to 127.0.0.1 on node 2 takes a connection that node 1
 * addresses to node 2's own address (kernel: cma_any_addr counts loopback
 * as any; cma_match_private_data matches every destination). */
Test(conn, loopback_listener_takes_remote_clients)
{
	connect_send_disconnect_to(SRV_LOOPBACK);
}

Test(conn_roce, loopback_listener_takes_remote_clients)
{
	connect_send_disconnect_to(SRV_LOOPBACK);
}

Test(conn, connect_send_disconnect)
{
	connect_send_disconnect();
}

Test(conn_roce, connect_send_disconnect)
{
	connect_send_disconnect();
}

/* id->pd (librdmacm's ucma_get_device): set with id->verbs by a bind to a
 * local address and by rdma_resolve_addr, the device's one PD shared by
 * every id on it, usable at once with plain verbs (UCX's rdmacm CM makes
 * its QPs with ibv_create_qp(id->pd, ...)); none on a wildcard bind.
 * Loopback binds: the kernel's rdma_bind_addr counts 127/8 and ::1 as
 * "any" (cma_any_addr = cma_zero_addr || cma_loopback_addr): no device is
 * attached and the port conflicts as a wildcard's does. */
static void pd_and_loopback_binds(void)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *b, *c, *d;
	struct sockaddr_in local = lt_sin("127.10.0.1", 0), lo = lt_sin("127.0.0.1", PORT + 5),
			   lo2 = lt_sin("127.0.0.2", PORT + 5), local5 = lt_sin("127.10.0.1", PORT + 5),
			   dst = lt_sin("127.10.0.2", PORT);
	struct sockaddr_in6 lo6;
	struct ibv_qp_init_attr qa;
	struct ibv_cq *cq;
	struct ibv_qp *qp;

	cr_assert(ch);
	lt_node(1);
	cr_assert_eq(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP), 0);
	cr_assert_null(a->pd);
	cr_assert_eq(rdma_bind_addr(a, (struct sockaddr *)&local), 0, "%s", strerror(errno));
	cr_assert(a->verbs);
	cr_assert(a->pd, "a bound id has its device's PD");
	cr_expect_eq(a->pd->context, a->verbs);

	cr_assert_eq(rdma_create_id(ch, &b, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(b, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000));
	cr_assert(b->verbs);
	cr_expect_eq(b->pd, a->pd, "one PD per device, shared by its ids");
	/* what UCX does with it */
	cq = ibv_create_cq(b->verbs, 4, NULL, NULL, 0);
	cr_assert(cq);
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = cq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 2;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qp = ibv_create_qp(b->pd, &qa);
	cr_assert(qp, "ibv_create_qp(id->pd): %s", strerror(errno));
	cr_expect_eq(qp->pd, b->pd);
	cr_expect_eq(ibv_destroy_qp(qp), 0);
	cr_expect_eq(ibv_destroy_cq(cq), 0);

	/* 127.0.0.1 binds as the wildcard does: no device, and the port is
	 * taken for every address (the kernel's cma_check_port) */
	cr_assert_eq(rdma_create_id(ch, &c, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_bind_addr(c, (struct sockaddr *)&lo), 0, "%s", strerror(errno));
	cr_expect_null(c->verbs, "a loopback bind binds no device");
	cr_expect_null(c->pd);
	cr_expect_eq(c->port_num, 0);
	cr_expect_eq(rdma_get_src_port(c), htons(PORT + 5));
	cr_expect_eq(((struct sockaddr_in *)rdma_get_local_addr(c))->sin_addr.s_addr,
		     htonl(INADDR_LOOPBACK));
	cr_assert_eq(rdma_create_id(ch, &d, NULL, RDMA_PS_TCP), 0);
	errno = 0;
	cr_expect_eq(rdma_bind_addr(d, (struct sockaddr *)&lo2), -1, "127.0.0.2, the same port");
	cr_expect_eq(errno, EADDRNOTAVAIL, "%s", strerror(errno));
	errno = 0;
	cr_expect_eq(rdma_bind_addr(d, (struct sockaddr *)&local5), -1, "127.10.0.1, the same port");
	cr_expect_eq(errno, EADDRNOTAVAIL, "%s", strerror(errno));
	memset(&lo6, 0, sizeof(lo6));
	lo6.sin6_family = AF_INET6;
	lo6.sin6_port = htons(PORT + 6);
	lo6.sin6_addr = in6addr_loopback;
	cr_expect_eq(rdma_bind_addr(d, (struct sockaddr *)&lo6), 0, "::1: %s", strerror(errno));
	cr_expect_null(d->verbs);
	cr_expect_null(d->pd);
	cr_expect_eq(rdma_listen(c, 1), 0);
	cr_expect_eq(rdma_destroy_id(d), 0);
	cr_expect_eq(rdma_destroy_id(c), 0);
	cr_expect_eq(rdma_destroy_id(b), 0);
	cr_expect_eq(rdma_destroy_id(a), 0);
	rdma_destroy_event_channel(ch);
}

Test(conn, pd_and_loopback_binds)
{
	pd_and_loopback_binds();
}

Test(conn_roce, pd_and_loopback_binds)
{
	pd_and_loopback_binds();
}

static void reject_with_private_data(void)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = hello();
	struct lt_pipes p;
	pid_t pid;

	pid = lt_spawn(server, SRV_REJECT, &p);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = client_route(ch, PORT);
	client_qp(id);
	cr_assert_eq(rdma_connect(id, &cp), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_REJECTED, 10000);
	cr_expect_eq(ev->status, 28, "REJ reason %d, want 28 (consumer defined)", ev->status);
	cr_expect_eq(ev->param.conn.private_data_len, 148);
	cr_expect_arr_eq(ev->param.conn.private_data, "nope", 5);
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	lt_reap(pid);
}

Test(conn, reject_with_private_data)
{
	reject_with_private_data();
}

Test(conn, no_listener_is_rejected)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = hello();
	struct lt_pipes p;
	pid_t pid;

	pid = lt_spawn(server, SRV_OTHER_PORT, &p);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = client_route(ch, PORT);
	client_qp(id);
	cr_assert_eq(rdma_connect(id, &cp), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_REJECTED, 10000);
	cr_expect_eq(ev->status, 8, "REJ reason %d, want 8 (invalid service ID)", ev->status);
	rdma_ack_cm_event(ev);
	cr_assert_eq(write(p.go[1], "x", 1), 1);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	lt_reap(pid);
}

static void dead_node_is_unreachable(void)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = hello();
	uint64_t t0, dt;

	/* Per try: 2 x 67 ms (path lifetime 14) + 4 ms (response timeout 10);
	 * 1 + 2 tries: about 0.4 s. */
	setenv("USCM_CM_RESPONSE_TIMEOUT", "10", 1);
	setenv("USCM_CM_RETRIES", "2", 1);
	lt_knobs_changed();
	lt_node_without_cm(2);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = client_route(ch, PORT);
	client_qp(id);
	t0 = lt_now_ms();
	cr_assert_eq(rdma_connect(id, &cp), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 5000);
	dt = lt_now_ms() - t0;
	cr_expect_eq(ev->status, -ETIMEDOUT);
	cr_expect_geq(dt, 300u, "gave up after %llu ms", (unsigned long long)dt);
	cr_expect_leq(dt, 1500u, "took %llu ms", (unsigned long long)dt);
	rdma_ack_cm_event(ev);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(conn, dead_node_is_unreachable_within_bound)
{
	dead_node_is_unreachable();
}

Test(conn, simultaneous_disconnect)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = hello();
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct lt_pipes p;
	char msg[8] = "ping!", c;
	pid_t pid;

	pid = lt_spawn(server, SRV_SIMUL, &p);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = client_route(ch, PORT);
	client_qp(id);
	mr = rdma_reg_msgs(id, msg, sizeof(msg));
	cr_assert_eq(rdma_connect(id, &cp), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000));
	cr_assert_eq(rdma_post_send(id, NULL, msg, 6, mr, IBV_SEND_SIGNALED), 0);
	cr_assert_eq(rdma_get_send_comp(id, &wc), 1);
	cr_assert_eq(read(p.ready[0], &c, 1), 1); /* the server got the data */
	/* Make the two DREQs cross on the wire. */
	cr_assert_eq(lt_sh(NULL, "%s/uscm-sim fault --dir %s 'delay=30ms,class=0x07' >/dev/null 2>&1",
			   lt_bin(), getenv("USCM_SIM_DIR")), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	cr_assert_eq(rdma_disconnect(id), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000);
	rdma_ack_cm_event(ev);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_TIMEWAIT_EXIT, 5000));
	cr_expect_null(lt_event(ch, 200), "one DISCONNECTED per connection");
	rdma_dereg_mr(mr);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	lt_reap(pid);
}

/* rping -q's path: the user creates and moves the QP itself. */
Test(conn, user_owned_qp_with_establish)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = hello();
	struct ibv_qp_init_attr qa;
	struct ibv_qp_attr attr;
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct lt_pipes p;
	char msg[8] = "ping!";
	int mask, n;
	pid_t pid;

	pid = lt_spawn(server, SRV_ACCEPT, &p);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = client_route(ch, PORT);
	pd = ibv_alloc_pd(id->verbs);
	cc = ibv_create_comp_channel(id->verbs);
	cq = ibv_create_cq(id->verbs, 8, NULL, cc, 0);
	cr_assert(pd && cc && cq);
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qa.send_cq = qa.recv_cq = cq;
	qa.sq_sig_all = 1;
	qp = ibv_create_qp(pd, &qa);
	cr_assert(qp);
	attr.qp_state = IBV_QPS_INIT;
	cr_assert_eq(rdma_init_qp_attr(id, &attr, &mask), 0);
	cr_expect_eq(attr.port_num, 1);
	cr_assert_eq(ibv_modify_qp(qp, &attr, mask), 0);
	/* RTR needs the peer: not before the REP. */
	attr.qp_state = IBV_QPS_RTR;
	errno = 0;
	cr_expect_eq(rdma_init_qp_attr(id, &attr, &mask), -1);
	cp.qp_num = qp->qp_num;
	cr_assert_eq(rdma_connect(id, &cp), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_CONNECT_RESPONSE, 10000);
	cr_expect_arr_eq(ev->param.conn.private_data, "welcome", 8);
	rdma_ack_cm_event(ev);
	for (int st = IBV_QPS_INIT; st <= IBV_QPS_RTS; st++) {
		attr.qp_state = (enum ibv_qp_state)st;
		cr_assert_eq(rdma_init_qp_attr(id, &attr, &mask), 0, "state %d", st);
		cr_assert_eq(ibv_modify_qp(qp, &attr, mask), 0, "modify to %d", st);
	}
	cr_assert_eq(rdma_establish(id), 0, "%s", strerror(errno));
	errno = 0;
	cr_expect_eq(rdma_establish(id), -1, "only once");
	/* No ESTABLISHED event on the active side for rdma_establish. */
	mr = ibv_reg_mr(pd, msg, sizeof(msg), IBV_ACCESS_LOCAL_WRITE);
	struct ibv_sge sge = { (uintptr_t)msg, 6, mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND }, *bad;
	cr_assert_eq(ibv_post_send(qp, &wr, &bad), 0);
	n = lt_wait_cq(cq, &wc, 5000);
	cr_assert_eq(n, 1);
	cr_expect_eq(wc.status, IBV_WC_SUCCESS);
	cr_assert_eq(rdma_disconnect(id), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000));
	ibv_dereg_mr(mr);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_destroy_comp_channel(cc);
	ibv_dealloc_pd(pd);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	lt_reap(pid);
}

/* ---- synchronous endpoints (what rdma_server / rdma_client do) ------------------------ */

static void ep_server(int mode, struct lt_pipes *p)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *lid, *id;
	struct ibv_qp_init_attr qa;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	char buf[16];

	(void)mode;
	lt_node(2);
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	LT_CK(rdma_getaddrinfo(NULL, "7480", &hints, &res) == 0);
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.sq_sig_all = 1;
	qa.qp_type = IBV_QPT_RC;
	LT_CK(rdma_create_ep(&lid, res, NULL, &qa) == 0);
	rdma_freeaddrinfo(res);
	LT_CK(rdma_listen(lid, 0) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	LT_CK(rdma_get_request(lid, &id) == 0);
	LT_CK(id->qp && id->event && id->event->event == RDMA_CM_EVENT_CONNECT_REQUEST);
	LT_CK((mr = rdma_reg_msgs(id, buf, sizeof(buf))));
	LT_CK(rdma_post_recv(id, NULL, buf, sizeof(buf), mr) == 0);
	LT_CK(rdma_accept(id, NULL) == 0);
	LT_CK(rdma_get_recv_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
	LT_CK(!strcmp(buf, "sync"));
	strcpy(buf, "back");
	LT_CK(rdma_post_send(id, NULL, buf, 5, mr, 0) == 0);
	LT_CK(rdma_get_send_comp(id, &wc) == 1 && wc.status == IBV_WC_SUCCESS);
	LT_CK(rdma_disconnect(id) == 0);
	LT_CK(rdma_dereg_mr(mr) == 0);
	rdma_destroy_ep(id);
	rdma_destroy_ep(lid);
	_exit(0);
}

Test(conn, synchronous_endpoints)
{
	struct rdma_addrinfo *res;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr qa;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct lt_pipes p;
	char buf[16] = "sync";
	pid_t pid;

	pid = lt_spawn(ep_server, 0, &p);
	lt_node(1);
	cr_assert_eq(rdma_getaddrinfo("127.10.0.2", "7480", NULL, &res), 0);
	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.sq_sig_all = 1;
	qa.qp_type = IBV_QPT_RC;
	cr_assert_eq(rdma_create_ep(&id, res, NULL, &qa), 0, "%s", strerror(errno));
	rdma_freeaddrinfo(res);
	cr_assert(id->qp && id->pd && id->send_cq && id->recv_cq);
	mr = rdma_reg_msgs(id, buf, sizeof(buf));
	cr_assert(mr);
	cr_assert_eq(rdma_connect(id, NULL), 0, "%s", strerror(errno));
	cr_assert_eq(rdma_post_recv(id, NULL, buf + 8, 8, mr), 0);
	cr_assert_eq(rdma_post_send(id, NULL, buf, 5, mr, 0), 0);
	cr_assert_eq(rdma_get_send_comp(id, &wc), 1);
	cr_assert_eq(rdma_get_recv_comp(id, &wc), 1);
	cr_expect_str_eq(buf + 8, "back");
	cr_assert_eq(rdma_disconnect(id), 0);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	lt_reap(pid);
}

/* In-process mode: one process owns a port's CM agent, a second process on
 * the same node gets EBUSY (and a message on stderr saying why). Through
 * uscmd (USCM_TEST_DAEMON=1) both listen: the limit uscmd lifts. */
Test(conn, second_process_on_a_port_gets_ebusy)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct sockaddr_in any = lt_sin("0.0.0.0", PORT);
	int ready[2], go[2], st;
	char c;
	pid_t pid;

	cr_assert_eq(pipe(ready), 0);
	cr_assert_eq(pipe(go), 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		/* Also node 1: owns the CM agent first. */
		LT_CK((ch = rdma_create_event_channel()));
		LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
		LT_CK(rdma_bind_addr(id, (struct sockaddr *)&any) == 0);
		LT_CK(rdma_listen(id, 1) == 0);
		LT_CK(write(ready[1], "r", 1) == 1);
		LT_CK(read(go[0], &c, 1) == 1);
		_exit(0);
	}
	cr_assert_eq(read(ready[0], &c, 1), 1);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	any.sin_port = htons(PORT + 5);
	cr_assert_eq(rdma_bind_addr(id, (struct sockaddr *)&any), 0);
	errno = 0;
	if (lt_daemon) {
		cr_expect_eq(rdma_listen(id, 1), 0, "a second process through uscmd: %s",
			     strerror(errno));
	} else {
		cr_expect_eq(rdma_listen(id, 1), -1);
		cr_expect_eq(errno, EBUSY, "errno %d (%s)", errno, strerror(errno));
	}
	cr_assert_eq(write(go[1], "g", 1), 1);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* rdma_listen's backlog: connection requests queued and not yet retrieved;
 * one more is rejected (consumer defined, as the kernel's ucma). */
Test(conn, backlog_full_is_rejected)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *a, *b;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = hello();
	struct lt_pipes p;
	pid_t pid;

	pid = lt_spawn(server, SRV_BACKLOG, &p);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	a = client_route(ch, PORT);
	b = client_route(ch, PORT);
	client_qp(a);
	client_qp(b);
	cr_assert_eq(rdma_connect(a, &cp), 0);
	cr_assert_eq(lt_child_says(&p, 10000, "a's request never reached the server"), 'q');
	cr_assert_eq(rdma_connect(b, &cp), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_REJECTED, 5000);
	cr_expect_eq(ev->id, b, "the second request is the one refused");
	cr_expect_eq(ev->status, 28);
	rdma_ack_cm_event(ev);
	cr_assert_eq(write(p.go[1], "x", 1), 1);
	lt_reap(pid);
	rdma_destroy_qp(a);
	rdma_destroy_qp(b);
	rdma_destroy_id(a);
	rdma_destroy_id(b);
	rdma_destroy_event_channel(ch);
}

/* ---- events that need no memory when they happen ------------------------- */

/* USCM_FAULT_EVENT_ALLOC=1: every event a completion would take from the
 * heap fails to allocate (CONNECT_REQUEST's excepted: its failure refuses
 * the REQ, which the peer sees). So the events below arrive, on both
 * sides, only because the ids reserved them when the operation began
 * (lib/cma_event_mem.c); with them dropped, lt_expect would time out. */
static void no_heap_for_events(void)
{
	setenv("USCM_FAULT_EVENT_ALLOC", "1", 1);
	lt_knobs_changed();
}

/* ROUTE_RESOLVED, ESTABLISHED (with the REP's private data), DISCONNECTED,
 * TIMEWAIT_EXIT here; ESTABLISHED, DISCONNECTED, TIMEWAIT_EXIT in the
 * server. */
Test(conn, reserved_events_connect_disconnect)
{
	no_heap_for_events();
	connect_send_disconnect();
}

/* REJECTED, with its private data. */
Test(conn, reserved_events_reject)
{
	no_heap_for_events();
	reject_with_private_data();
}

/* UNREACHABLE after the retries. */
Test(conn, reserved_events_unreachable)
{
	no_heap_for_events();
	dead_node_is_unreachable();
}
