/*
 * UD ids and SIDR through the library, between two processes on two
 * simulated nodes (the test process is node 1, the active side; a forked
 * child is node 2): connect / accept with private data both ways and
 * data over the UD QPs (the reply addressed from the work completion, as
 * udaddy does), on IB and RoCE; reject with private data (UNREACHABLE,
 * SIDR status 2); no listener on the port (status 1); a dead node
 * (UNREACHABLE -ETIMEDOUT within the configured bound); synchronous
 * endpoints; the Q_Key of each port space; calls in the wrong state.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "libtest.h"

#define PORT 7590
#define GRH 40

TestSuite(ud, .init = lt_init_ib, .fini = lt_fini, .timeout = 120);
TestSuite(ud_roce, .init = lt_init_roce, .fini = lt_fini, .timeout = 120);

static struct ibv_qp_init_attr ud_qp_attr(void)
{
	struct ibv_qp_init_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_UD;
	qa.sq_sig_all = 1;
	return qa;
}

/* ---- the passive side (a child: no Criterion asserts there) --------------------------- */

enum srv_mode { SRV_ACCEPT, SRV_REJECT, SRV_OTHER_PORT };

/* Receives "ping!" and answers "pong!" to its sender (address from the
 * completion, as udaddy does). */
static void srv_echo(struct rdma_cm_id *cid, struct ibv_mr *mr, char *buf)
{
	struct ibv_wc wc;
	struct ibv_ah *ah;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr ia;

	LT_CK(lt_wait_cq(cid->recv_cq, &wc, 10000) == 1);
	LT_CK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV);
	LT_CK(wc.byte_len == GRH + 6 && !strcmp(buf + GRH, "ping!"));
	LT_CK(ibv_query_qp(cid->qp, &qa, IBV_QP_QKEY | IBV_QP_STATE, &ia) == 0);
	LT_CK(qa.qkey == RDMA_UDP_QKEY && qa.qp_state == IBV_QPS_RTS);
	LT_CK((ah = ibv_create_ah_from_wc(cid->pd, &wc, (struct ibv_grh *)buf, cid->port_num)));
	strcpy(buf + 128, "pong!");
	LT_CK(rdma_post_ud_send(cid, NULL, buf + 128, 6, mr, IBV_SEND_SIGNALED, ah, wc.src_qp) == 0);
	LT_CK(lt_wait_cq(cid->send_cq, &wc, 5000) == 1 && wc.status == IBV_WC_SUCCESS);
	ibv_destroy_ah(ah);
}

static void server(int mode, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid, *cid;
	struct rdma_cm_event *ev;
	struct sockaddr_in any = lt_sin("0.0.0.0", mode == SRV_OTHER_PORT ? PORT + 1 : PORT);
	struct ibv_qp_init_attr qa = ud_qp_attr();
	struct rdma_conn_param cp;
	struct ibv_mr *mr;
	char buf[256], c;
	uint32_t qpn;
	int tag = 7;

	lt_node(2);
	LT_CK((ch = rdma_create_event_channel()));
	LT_CK(rdma_create_id(ch, &lid, &tag, RDMA_PS_UDP) == 0);
	LT_CK(lid->qp_type == IBV_QPT_UD);
	LT_CK(rdma_bind_addr(lid, (struct sockaddr *)&any) == 0);
	LT_CK(rdma_listen(lid, 4) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	if (mode == SRV_OTHER_PORT) {
		LT_CK(read(p->go[0], &c, 1) == 1);
		_exit(0);
	}
	ev = lt_child_wait(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	LT_CK(ev->listen_id == lid);
	cid = ev->id;
	LT_CK(cid != lid && cid->verbs && cid->port_num == 1 && cid->context == &tag);
	LT_CK(cid->qp_type == IBV_QPT_UD && cid->ps == RDMA_PS_UDP);
	/* The whole SIDR_REQ private data after the 36-byte CMA header. */
	LT_CK(ev->param.ud.private_data_len == 180);
	LT_CK(!memcmp(ev->param.ud.private_data, "hello", 6));
	LT_CK(ntohs(rdma_get_src_port(cid)) == PORT && ntohs(rdma_get_dst_port(cid)) > 0);
	LT_CK(((struct sockaddr_in *)rdma_get_peer_addr(cid))->sin_addr.s_addr == htonl(0x7F0A0001));
	LT_CK(((struct sockaddr_in *)rdma_get_local_addr(cid))->sin_addr.s_addr == htonl(0x7F0A0002));
	rdma_ack_cm_event(ev);
	if (mode == SRV_REJECT) {
		LT_CK(rdma_reject(cid, "nope", 5) == 0);
		errno = 0;
		LT_CK(rdma_accept(cid, NULL) == -1 && errno == EINVAL); /* answered already */
		LT_CK(rdma_destroy_id(cid) == 0);
		LT_CK(rdma_destroy_id(lid) == 0);
		rdma_destroy_event_channel(ch);
		_exit(0);
	}
	LT_CK(rdma_create_qp(cid, NULL, &qa) == 0);
	LT_CK((mr = rdma_reg_msgs(cid, buf, sizeof(buf))));
	memset(buf, 0, sizeof(buf));
	LT_CK(rdma_post_recv(cid, NULL, buf, GRH + 64, mr) == 0);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = "welcome";
	cp.private_data_len = 8;
	LT_CK(rdma_accept(cid, &cp) == 0);
	qpn = cid->qp->qp_num;
	LT_CK(write(p->ready[1], &qpn, sizeof(qpn)) == sizeof(qpn));
	srv_echo(cid, mr, buf);
	/* No event follows an accept on a UD id. */
	LT_CK(lt_event(ch, 100) == NULL);
	LT_CK(rdma_dereg_mr(mr) == 0);
	rdma_destroy_qp(cid);
	LT_CK(rdma_destroy_id(cid) == 0);
	LT_CK(rdma_destroy_id(lid) == 0);
	rdma_destroy_event_channel(ch);
	_exit(0);
}

/* ---- the active side ------------------------------------------------------------------- */

static struct rdma_cm_id *client_route(struct rdma_event_channel *ch, enum rdma_port_space ps,
				       uint16_t port)
{
	struct rdma_cm_id *id;
	struct sockaddr_in dst = lt_sin("127.10.0.2", port);

	cr_assert_eq(rdma_create_id(ch, &id, NULL, ps), 0);
	cr_assert_eq(id->qp_type, IBV_QPT_UD);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000));
	cr_assert_eq(rdma_resolve_route(id, 2000), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 4000));
	return id;
}

static struct rdma_conn_param hello(void)
{
	struct rdma_conn_param cp;

	memset(&cp, 0, sizeof(cp));
	cp.private_data = "hello";
	cp.private_data_len = 6;
	return cp;
}

static void connect_send_receive(int roce)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = hello();
	struct ibv_qp_init_attr qa = ud_qp_attr();
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct lt_pipes p;
	char buf[256];
	uint32_t sqpn;
	pid_t pid;

	pid = lt_spawn(server, SRV_ACCEPT, &p);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = client_route(ch, RDMA_PS_UDP, PORT);
	cr_assert_eq(rdma_create_qp(id, NULL, &qa), 0, "%s", strerror(errno));
	mr = rdma_reg_msgs(id, buf, sizeof(buf));
	cr_assert(mr);
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(rdma_post_recv(id, NULL, buf, GRH + 64, mr), 0);
	cr_assert_eq(rdma_connect(id, &cp), 0, "%s", strerror(errno));
	ev = lt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000);
	cr_assert_eq(read(p.ready[0], &sqpn, sizeof(sqpn)), (ssize_t)sizeof(sqpn));
	cr_expect_eq(ev->param.ud.qp_num, sqpn, "remote QPN %u, the server's is %u",
		     ev->param.ud.qp_num, sqpn);
	cr_expect_eq(ev->param.ud.qkey, RDMA_UDP_QKEY);
	/* The SIDR_REP's whole private data field. */
	cr_expect_eq(ev->param.ud.private_data_len, 136);
	cr_expect_arr_eq(ev->param.ud.private_data, "welcome", 8);
	cr_expect_eq(ev->param.ud.ah_attr.port_num, 1);
	if (roce) {
		uint8_t want[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 127, 10, 0, 2 };

		cr_expect(ev->param.ud.ah_attr.is_global);
		cr_expect_arr_eq(ev->param.ud.ah_attr.grh.dgid.raw, want, 16);
	} else {
		cr_expect_eq(ev->param.ud.ah_attr.dlid, 3, "node 2's LID");
		cr_expect(!ev->param.ud.ah_attr.is_global, "subnet-local: no GRH");
	}
	ah = ibv_create_ah(id->pd, &ev->param.ud.ah_attr);
	cr_assert(ah, "%s", strerror(errno));
	rdma_ack_cm_event(ev);
	strcpy(buf + 128, "ping!");
	cr_assert_eq(rdma_post_ud_send(id, NULL, buf + 128, 6, mr, IBV_SEND_SIGNALED, ah, sqpn), 0);
	cr_assert_eq(lt_wait_cq(id->send_cq, &wc, 5000), 1);
	cr_expect_eq(wc.status, IBV_WC_SUCCESS);
	cr_assert_eq(lt_wait_cq(id->recv_cq, &wc, 10000), 1, "no reply");
	cr_expect_eq(wc.status, IBV_WC_SUCCESS);
	cr_expect_eq(wc.src_qp, sqpn);
	cr_expect_str_eq(buf + GRH, "pong!");
	ibv_destroy_ah(ah);
	rdma_dereg_mr(mr);
	rdma_destroy_qp(id);
	cr_expect_eq(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
	lt_reap(pid);
}

Test(ud, connect_accept_data)
{
	connect_send_receive(0);
}

Test(ud_roce, connect_accept_data)
{
	connect_send_receive(1);
}

/* rdma_reject on a UD id: SIDR_REP status 2, which the active side sees as
 * UNREACHABLE with that status (the kernel's mapping), private data too. */
Test(ud, reject_is_unreachable_status_2)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp = hello();
	struct lt_pipes p;
	pid_t pid;

	pid = lt_spawn(server, SRV_REJECT, &p); /* before the library starts in this process */
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = client_route(ch, RDMA_PS_UDP, PORT);
	cr_assert_eq(rdma_connect(id, &cp), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 10000);
	cr_expect_eq(ev->status, 2, "SIDR status %d, want 2 (rejected)", ev->status);
	cr_expect_eq(ev->param.ud.private_data_len, 136);
	cr_expect_arr_eq(ev->param.ud.private_data, "nope", 5);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	lt_reap(pid);
}

Test(ud, no_listener_is_unreachable_status_1)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct lt_pipes p;
	pid_t pid;

	pid = lt_spawn(server, SRV_OTHER_PORT, &p);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = client_route(ch, RDMA_PS_UDP, PORT);
	cr_assert_eq(rdma_connect(id, NULL), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 10000);
	cr_expect_eq(ev->status, 1, "SIDR status %d, want 1 (service ID not supported)",
		     ev->status);
	rdma_ack_cm_event(ev);
	cr_assert_eq(write(p.go[1], "x", 1), 1);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	lt_reap(pid);
}

Test(ud, dead_node_is_unreachable_within_bound)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	uint64_t t0, dt;

	/* SIDR tries of 1 << (14 - 8) = 64 ms, 1 + 2 of them: about 0.2 s. */
	setenv("USCM_CM_RESPONSE_TIMEOUT", "14", 1);
	setenv("USCM_CM_RETRIES", "2", 1);
	lt_knobs_changed();
	lt_node_without_cm(2);
	ch = rdma_create_event_channel();
	cr_assert(ch);
	id = client_route(ch, RDMA_PS_UDP, PORT);
	t0 = lt_now_ms();
	cr_assert_eq(rdma_connect(id, NULL), 0);
	ev = lt_expect(ch, RDMA_CM_EVENT_UNREACHABLE, 5000);
	dt = lt_now_ms() - t0;
	cr_expect_eq(ev->status, -ETIMEDOUT);
	cr_expect_geq(dt, 150u, "gave up after %llu ms", (unsigned long long)dt);
	cr_expect_leq(dt, 1500u, "took %llu ms", (unsigned long long)dt);
	rdma_ack_cm_event(ev);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* rdma_create_ep / rdma_get_request / rdma_connect on synchronous UD ids
 * (the hints' port space picks the QP type). */
static void ep_server(int mode, struct lt_pipes *p)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *lid, *id;
	struct ibv_qp_init_attr qa = ud_qp_attr();
	struct ibv_mr *mr;
	char buf[256];

	(void)mode;
	lt_node(2);
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_UDP;
	LT_CK(rdma_getaddrinfo(NULL, "7599", &hints, &res) == 0);
	LT_CK(res->ai_qp_type == IBV_QPT_UD);
	LT_CK(rdma_create_ep(&lid, res, NULL, &qa) == 0);
	rdma_freeaddrinfo(res);
	LT_CK(rdma_listen(lid, 0) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	LT_CK(rdma_get_request(lid, &id) == 0);
	LT_CK(id->qp && id->qp->qp_type == IBV_QPT_UD);
	LT_CK((mr = rdma_reg_msgs(id, buf, sizeof(buf))));
	LT_CK(rdma_post_recv(id, NULL, buf, GRH + 64, mr) == 0);
	LT_CK(rdma_accept(id, NULL) == 0); /* returns at once: no event follows */
	srv_echo(id, mr, buf);
	LT_CK(rdma_dereg_mr(mr) == 0);
	rdma_destroy_ep(id);
	rdma_destroy_ep(lid);
	_exit(0);
}

Test(ud, synchronous_endpoints)
{
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr qa = ud_qp_attr();
	struct ibv_ah *ah;
	struct ibv_mr *mr;
	struct ibv_wc wc;
	struct lt_pipes p;
	char buf[256];
	uint32_t qpn;
	pid_t pid;

	pid = lt_spawn(ep_server, 0, &p);
	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_UDP;
	cr_assert_eq(rdma_getaddrinfo("127.10.0.2", "7599", &hints, &res), 0);
	cr_assert_eq(rdma_create_ep(&id, res, NULL, &qa), 0, "%s", strerror(errno));
	rdma_freeaddrinfo(res);
	mr = rdma_reg_msgs(id, buf, sizeof(buf));
	cr_assert(mr);
	cr_assert_eq(rdma_post_recv(id, NULL, buf, GRH + 64, mr), 0);
	cr_assert_eq(rdma_connect(id, NULL), 0, "%s", strerror(errno));
	/* The ESTABLISHED event stays on the id until the next call. */
	cr_assert(id->event && id->event->event == RDMA_CM_EVENT_ESTABLISHED);
	qpn = id->event->param.ud.qp_num;
	ah = ibv_create_ah(id->pd, &id->event->param.ud.ah_attr);
	cr_assert(ah);
	strcpy(buf + 128, "ping!");
	cr_assert_eq(rdma_post_ud_send(id, NULL, buf + 128, 6, mr, IBV_SEND_SIGNALED, ah, qpn), 0);
	cr_assert_eq(lt_wait_cq(id->send_cq, &wc, 5000), 1);
	cr_assert_eq(lt_wait_cq(id->recv_cq, &wc, 10000), 1, "no reply");
	cr_expect_str_eq(buf + GRH, "pong!");
	ibv_destroy_ah(ah);
	rdma_dereg_mr(mr);
	rdma_destroy_ep(id);
	lt_reap(pid);
}

/* The Q_Key a UD QP gets: RDMA_UDP_QKEY for the UDP and IB port spaces,
 * the IPoIB broadcast group's default for RDMA_PS_IPOIB; RC QPs get none.
 * A RDMA_PS_IB id is RC unless its addrinfo asks for UD (as librdmacm). */
static void expect_ud_qkey(struct rdma_cm_id *id, uint32_t qkey)
{
	struct ibv_qp_attr a;
	int mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	cr_assert_eq(rdma_init_qp_attr(id, &a, &mask), 0);
	cr_expect(mask & IBV_QP_QKEY, "ps 0x%x", id->ps);
	cr_expect_eq(a.qkey, qkey, "ps 0x%x: Q_Key 0x%x", id->ps, a.qkey);
	cr_expect_eq(a.port_num, 1);
	a.qp_state = IBV_QPS_RTS;
	cr_assert_eq(rdma_init_qp_attr(id, &a, &mask), 0);
	cr_expect_eq(mask, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

Test(ud, qkey_per_port_space)
{
	struct sockaddr_in me = lt_sin("127.10.0.1", 0);
	struct rdma_addrinfo hints, *res;
	struct rdma_cm_id *id;
	struct ibv_qp_attr a;
	int mask;

	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_UDP), 0);
	cr_assert_eq(rdma_bind_addr(id, (struct sockaddr *)&me), 0);
	expect_ud_qkey(id, RDMA_UDP_QKEY);
	rdma_destroy_id(id);
	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_IPOIB), 0);
	cr_assert_eq(rdma_bind_addr(id, (struct sockaddr *)&me), 0);
	expect_ud_qkey(id, 0x0B1B);
	rdma_destroy_id(id);
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_IB;
	hints.ai_qp_type = IBV_QPT_UD;
	cr_assert_eq(rdma_getaddrinfo("127.10.0.1", "7598", &hints, &res), 0);
	cr_assert_eq(rdma_create_ep(&id, res, NULL, NULL), 0, "%s", strerror(errno));
	rdma_freeaddrinfo(res);
	cr_expect_eq(id->ps, RDMA_PS_IB);
	cr_expect_eq(id->qp_type, IBV_QPT_UD);
	expect_ud_qkey(id, RDMA_UDP_QKEY);
	rdma_destroy_ep(id);
	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_IB), 0);
	cr_expect_eq(id->qp_type, IBV_QPT_RC);
	rdma_destroy_id(id);
	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_bind_addr(id, (struct sockaddr *)&me), 0);
	a.qp_state = IBV_QPS_INIT;
	cr_assert_eq(rdma_init_qp_attr(id, &a, &mask), 0);
	cr_expect(!(mask & IBV_QP_QKEY));
	rdma_destroy_id(id);
}

Test(ud, calls_in_the_wrong_state)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_conn_param cp = hello();
	char big[200];

	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	errno = 0;
	cr_expect_eq(rdma_connect(id, &cp), -1, "no route yet");
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_accept(id, &cp), -1, "no request");
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_reject(id, NULL, 0), -1);
	cr_expect_eq(errno, EINVAL);
	rdma_destroy_id(id);
	id = client_route(ch, RDMA_PS_UDP, PORT);
	/* 36 bytes of CMA header + 181 > the SIDR_REQ's 216. */
	memset(big, 'x', sizeof(big));
	cp.private_data = big;
	cp.private_data_len = 181;
	errno = 0;
	cr_expect_eq(rdma_connect(id, &cp), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_disconnect(id), -1, "nothing to disconnect");
	cr_expect_eq(errno, EINVAL);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}
