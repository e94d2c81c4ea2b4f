/*
 * QP transitions run without the library lock (lib/cma_qpjob.c). The
 * sim's libibverbs makes every ibv_modify_qp of a process slow
 * (USCM_SIM_MODIFY_QP_DELAY_MS, as a firmware command can be on
 * hardware); meanwhile other ids of that process must make progress —
 * which they cannot while one lock is held across the call — and a
 * disconnect that comes during the move to RTS must still leave the QP in
 * ERROR. In-process mode: in daemon mode the library never moves QPs under
 * a lock (the application's process does, lib/cmc_qp.c).
 */
#include <pthread.h>

#include <rdma/rdma_cma.h>

#include "libtest.h"

#define PORT 7481
#define DELAY_MS 300

TestSuite(qpmove, .init = lt_init_ib, .fini = lt_fini, .timeout = 60);

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

/* ---- the peer (a child on node 2: no delay there) ----------------------------- */

enum peer_mode { PEER_CONNECT, PEER_ACCEPT };

static void peer(int mode, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id, *cid;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct sockaddr_in a;
	char c;

	unsetenv("USCM_SIM_MODIFY_QP_DELAY_MS"); /* the test's, not the peer's */
	lt_node(2);
	lt_rc_qp_attr(&qa);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = cp.rnr_retry_count = 7;
	LT_CK((ch = rdma_create_event_channel()));
	LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	if (mode == PEER_ACCEPT) {
		a = lt_sin("0.0.0.0", PORT);
		LT_CK(rdma_bind_addr(id, (struct sockaddr *)&a) == 0);
		LT_CK(rdma_listen(id, 4) == 0);
		LT_CK(write(p->ready[1], "r", 1) == 1);
		ev = lt_child_wait(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
		cid = ev->id;
		rdma_ack_cm_event(ev);
		LT_CK(rdma_create_qp(cid, NULL, &qa) == 0);
		LT_CK(rdma_accept(cid, &cp) == 0);
	} else {
		a = lt_sin("127.10.0.1", PORT);
		LT_CK(write(p->ready[1], "r", 1) == 1);
		LT_CK(read(p->go[0], &c, 1) == 1); /* the test listens */
		lt_child_resolve(ch, id, &a);
		LT_CK(rdma_create_qp(id, NULL, &qa) == 0);
		LT_CK(rdma_connect(id, &cp) == 0);
		cid = id;
	}
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ESTABLISHED));
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_DISCONNECTED));
	LT_CK(rdma_disconnect(cid) == 0); /* the DREP */
	rdma_destroy_qp(cid);
	if (cid != id)
		rdma_destroy_id(cid);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* ---- accept: another id resolves its route while the QP moves ----------------- */

struct acceptor {
	struct rdma_cm_id *id;
	int rc;
	uint64_t done_ms; /* 0 until rdma_accept returned */
};

static void *accept_thread(void *arg)
{
	struct acceptor *a = arg;
	struct rdma_conn_param cp;

	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	a->rc = rdma_accept(a->id, &cp);
	__atomic_store_n(&a->done_ms, lt_now_ms(), __ATOMIC_RELEASE);
	return NULL;
}

Test(qpmove, accept_leaves_other_ids_and_the_progress_thread_free)
{
	struct rdma_event_channel *ch, *ch2;
	struct rdma_cm_id *lid, *other;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa;
	struct sockaddr_in any = lt_sin("0.0.0.0", PORT), dst = lt_sin("127.10.0.2", PORT + 1);
	struct acceptor acc = { 0 };
	struct lt_pipes p;
	pthread_t t;
	uint64_t t0, t1, busy;
	pid_t pid;

	/* every ibv_modify_qp of this process takes DELAY_MS: rdma_accept
	 * moves its QP through INIT, RTR and RTS, 3 x DELAY_MS */
	setenv("USCM_SIM_MODIFY_QP_DELAY_MS", "300", 1);
	pid = lt_spawn(peer, PEER_CONNECT, &p);
	cr_assert((ch = rdma_create_event_channel()));
	cr_assert((ch2 = rdma_create_event_channel()));
	cr_assert_eq(rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_bind_addr(lid, (struct sockaddr *)&any), 0);
	cr_assert_eq(rdma_listen(lid, 4), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	ev = lt_expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
	acc.id = ev->id;
	rdma_ack_cm_event(ev);
	lt_rc_qp_attr(&qa);
	cr_assert_eq(rdma_create_qp(acc.id, NULL, &qa), 0, "%s", strerror(errno));

	t0 = lt_now_ms();
	cr_assert_eq(pthread_create(&t, NULL, accept_thread, &acc), 0);
	usleep(DELAY_MS / 3 * 1000); /* rdma_accept is in its first ibv_modify_qp */
	/* A second id: create, resolve the address, and the route, whose SA
	 * answer the progress thread receives. With the lock held across
	 * the QP's moves each of these would wait for the accept to end. */
	t1 = lt_now_ms();
	cr_assert_eq(rdma_create_id(ch2, &other, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(other, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_ack_cm_event(lt_expect(ch2, RDMA_CM_EVENT_ADDR_RESOLVED, 3000));
	cr_assert_eq(rdma_resolve_route(other, 2000), 0);
	rdma_ack_cm_event(lt_expect(ch2, RDMA_CM_EVENT_ROUTE_RESOLVED, 3000));
	busy = lt_now_ms() - t1;
	cr_expect_eq(__atomic_load_n(&acc.done_ms, __ATOMIC_ACQUIRE), 0,
		     "rdma_accept returned after %llu ms, before the other id was through",
		     (unsigned long long)(acc.done_ms - t0));
	cr_expect_lt(busy, (uint64_t)DELAY_MS,
		     "the other id took %llu ms: it waited for the accepting thread",
		     (unsigned long long)busy);
	rdma_destroy_id(other);

	cr_assert_eq(pthread_join(t, NULL), 0);
	cr_assert_eq(acc.rc, 0, "rdma_accept: %s", strerror(errno));
	cr_expect_geq(acc.done_ms - t0, (uint64_t)(3 * DELAY_MS - 50),
		      "rdma_accept took %llu ms: its QP did not move through three slow calls",
		      (unsigned long long)(acc.done_ms - t0));
	cr_expect_eq(qp_state(acc.id->qp), IBV_QPS_RTS);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000));

	cr_assert_eq(rdma_disconnect(acc.id), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000));
	lt_reap(pid);
	rdma_destroy_qp(acc.id);
	rdma_destroy_id(acc.id);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	rdma_destroy_event_channel(ch2);
}

/* ---- a disconnect while the REP's move to RTS runs ------------------------------- */

/* Every ibv_modify_qp takes 300 ms; a peer accepts. Connects an RC id
 * and returns once the REP has made the library move the QP INIT, RTR,
 * RTS and the QP is in RTR, i.e. inside the (slow) call to RTS. */
static pid_t connect_until_rtr(struct rdma_event_channel **ch, struct rdma_cm_id **id, struct lt_pipes *p)
{
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct sockaddr_in dst = lt_sin("127.10.0.2", PORT);
	uint64_t t0;
	pid_t pid;

	setenv("USCM_SIM_MODIFY_QP_DELAY_MS", "300", 1);
	pid = lt_spawn(peer, PEER_ACCEPT, p);
	cr_assert((*ch = rdma_create_event_channel()));
	cr_assert_eq(rdma_create_id(*ch, id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(*id, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_ack_cm_event(lt_expect(*ch, RDMA_CM_EVENT_ADDR_RESOLVED, 3000));
	cr_assert_eq(rdma_resolve_route(*id, 2000), 0);
	rdma_ack_cm_event(lt_expect(*ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 3000));
	lt_rc_qp_attr(&qa);
	cr_assert_eq(rdma_create_qp(*id, NULL, &qa), 0);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = cp.rnr_retry_count = 7;
	cr_assert_eq(rdma_connect(*id, &cp), 0);
	t0 = lt_now_ms();
	while (qp_state((*id)->qp) != IBV_QPS_RTR && lt_now_ms() - t0 < 5000)
		usleep(1000);
	cr_assert_eq(qp_state((*id)->qp), IBV_QPS_RTR, "the QP never reached RTR");
	return pid;
}

Test(qpmove, disconnect_during_the_move_to_rts_ends_in_error)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct lt_pipes p;
	uint64_t t0, took;
	pid_t pid = connect_until_rtr(&ch, &id, &p);

	t0 = lt_now_ms();
	cr_assert_eq(rdma_disconnect(id), 0, "%s", strerror(errno));
	took = lt_now_ms() - t0;
	/* It waited for the move to RTS, then moved the QP to ERROR itself:
	 * the later transition did not get lost under the earlier one. */
	cr_expect_eq(qp_state(id->qp), IBV_QPS_ERR);
	cr_expect_geq(took, (uint64_t)DELAY_MS, "rdma_disconnect took %llu ms",
		      (unsigned long long)took);
	/* The connection was established (RTU) before the DREQ left. */
	ev = lt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000);
	rdma_ack_cm_event(ev);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000));
	lt_reap(pid);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* ---- the QP destroyed while the REP's move to RTS runs --------------------------- */

Test(qpmove, destroy_during_the_move_waits_for_it)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct lt_pipes p;
	uint64_t t0, took;
	pid_t pid = connect_until_rtr(&ch, &id, &p);

	/* The job in flight pins the id and its QP: the destroy waits for the
	 * call to RTS to return (a use after free otherwise: ASan build). */
	t0 = lt_now_ms();
	rdma_destroy_qp(id);
	took = lt_now_ms() - t0;
	cr_expect_null(id->qp);
	cr_expect_geq(took, (uint64_t)DELAY_MS / 2, "rdma_destroy_qp took %llu ms: it did not wait",
		      (unsigned long long)took);
	/* the id goes too, with its ESTABLISHED never handed out: the peer
	 * sees the DREQ (its DISCONNECTED) and exits */
	cr_assert_eq(rdma_destroy_id(id), 0);
	lt_reap(pid);
	rdma_destroy_event_channel(ch);
}
