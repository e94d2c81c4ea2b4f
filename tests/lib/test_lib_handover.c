/*
 * The hand-over of the umad fds between a blocking rdma_get_cm_event and
 * the progress thread (lib/cma_core.c, docs/library.md "Threads
 * and locking"). After a blocking wait returns, the fds stay off in the
 * progress thread's set for USCM_WAIT_HANDOVER_US, so the MAD that
 * arrives between two waits waits for the next one instead of waking the
 * progress thread; when nobody waits again, the progress thread takes
 * them back and the MAD is handled all the same; and while a second
 * thread sleeps in another channel's wait (which does not poll the umad
 * fds) they go back at once. The test process is node 1 (the listener),
 * a forked child on node 2 connects. In-process mode only: in daemon mode
 * uscmd receives every MAD in its own loop.
 */
#include <pthread.h>

#include <rdma/rdma_cma.h>

#include "libtest.h"

#define PORT 7491

TestSuite(handover, .init = lt_init_ib, .fini = lt_fini, .timeout = 60);

static void conn_param(struct rdma_conn_param *cp)
{
	memset(cp, 0, sizeof(*cp));
	cp->responder_resources = cp->initiator_depth = 1;
	cp->retry_count = cp->rnr_retry_count = 7;
}

/* The child on node 2: connects when told, then waits to be disconnected
 * and answers the DREQ. */
static void client(int mode, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct sockaddr_in a = lt_sin("127.10.0.1", PORT);
	char c;

	(void)mode;
	unsetenv("USCM_WAIT_HANDOVER_US"); /* the test's, not the peer's */
	lt_node(2);
	lt_rc_qp_attr(&qa);
	conn_param(&cp);
	LT_CK((ch = rdma_create_event_channel()));
	LT_CK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1); /* the test listens */
	lt_child_resolve(ch, id, &a);
	LT_CK(rdma_create_qp(id, NULL, &qa) == 0);
	LT_CK(rdma_connect(id, &cp) == 0);
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_ESTABLISHED));
	rdma_ack_cm_event(lt_child_wait(ch, RDMA_CM_EVENT_DISCONNECTED));
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* The listener on a blocking channel; tells the child to connect. */
static struct rdma_cm_id *listen_on(struct rdma_event_channel *ch, struct lt_pipes *p)
{
	struct sockaddr_in any = lt_sin("0.0.0.0", PORT);
	struct rdma_cm_id *lid;

	cr_assert_eq(rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_bind_addr(lid, (struct sockaddr *)&any), 0);
	cr_assert_eq(rdma_listen(lid, 4), 0);
	cr_assert_eq(write(p->go[1], "g", 1), 1);
	return lid;
}

/* Accepts the connection whose CONNECT_REQUEST the blocking
 * rdma_get_cm_event returned, then does not call it again: polls the
 * channel fd (as a program with its own poll loop would) until the
 * ESTABLISHED that the client's RTU makes is queued. The ms that took. */
/* ms from rdma_accept's return to ESTABLISHED; *since_ev from the
 * CONNECT_REQUEST's return, where the hand-over time starts. */
static uint64_t accept_then_poll(uint64_t *since_ev)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid, *cid;
	struct rdma_cm_event *ev = NULL;
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct pollfd pf;
	struct lt_pipes p;
	uint64_t t0, tev, took;
	pid_t pid;

	pid = lt_spawn(client, 0, &p);
	cr_assert((ch = rdma_create_event_channel()));
	lid = listen_on(ch, &p);
	/* blocking: this thread waits with the umad fds and receives the REQ */
	cr_assert_eq(rdma_get_cm_event(ch, &ev), 0);
	tev = lt_now_ms();
	cr_assert_eq(ev->event, RDMA_CM_EVENT_CONNECT_REQUEST, "got %s", rdma_event_str(ev->event));
	cid = ev->id;
	rdma_ack_cm_event(ev);
	lt_rc_qp_attr(&qa);
	conn_param(&cp);
	cr_assert_eq(rdma_create_qp(cid, NULL, &qa), 0);
	cr_assert_eq(rdma_accept(cid, &cp), 0);
	t0 = lt_now_ms();
	pf = (struct pollfd){ .fd = ch->fd, .events = POLLIN };
	cr_assert_eq(poll(&pf, 1, 10000), 1, "no ESTABLISHED within 10 s: nobody received the RTU");
	took = lt_now_ms() - t0;
	*since_ev = lt_now_ms() - tev;
	cr_assert_eq(rdma_get_cm_event(ch, &ev), 0);
	cr_assert_eq(ev->event, RDMA_CM_EVENT_ESTABLISHED, "got %s", rdma_event_str(ev->event));
	rdma_ack_cm_event(ev);
	cr_assert_eq(rdma_disconnect(cid), 0);
	lt_reap(pid);
	rdma_destroy_qp(cid);
	rdma_destroy_id(cid);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	return took;
}

/* The RTU comes while nobody waits: it stays in the socket for the
 * hand-over time (the next wait would have taken it), then the progress
 * thread takes the fds back and receives it. */
Test(handover, the_progress_thread_takes_the_fds_back)
{
	uint64_t took, since_ev;

	setenv("USCM_WAIT_HANDOVER_US", "400000", 1);
	took = accept_then_poll(&since_ev);
	/* counted from the CONNECT_REQUEST's return, where the hand-over
	 * starts: under load the accept itself can outlast it (ASan, -j2:
	 * ESTABLISHED 1 ms after an accept that returned late) */
	cr_expect_geq(since_ev, 250,
		      "ESTABLISHED %llu ms after CONNECT_REQUEST: the fds were not kept for 400 ms",
		      (unsigned long long)since_ev);
	cr_expect_lt(took, 5000, "ESTABLISHED after %llu ms", (unsigned long long)took);
}

/* The control: handed back at once, the RTU is received when it comes. */
Test(handover, zero_hands_the_fds_back_at_once)
{
	uint64_t took, since_ev;

	setenv("USCM_WAIT_HANDOVER_US", "0", 1);
	took = accept_then_poll(&since_ev);
	cr_expect_lt(took, 250, "ESTABLISHED after %llu ms with no hand-over time", (unsigned long long)took);
}

struct waiter {
	struct rdma_event_channel *ch;
	int rc;
	enum rdma_cm_event_type type;
	struct rdma_cm_id *id;
	uint64_t at_ms;
};

static void *wait_one(void *arg)
{
	struct waiter *w = arg;
	struct rdma_cm_event *ev = NULL;

	w->rc = rdma_get_cm_event(w->ch, &ev);
	if (!w->rc) {
		w->type = ev->event;
		w->id = ev->id;
		rdma_ack_cm_event(ev);
	}
	__atomic_store_n(&w->at_ms, lt_now_ms(), __ATOMIC_RELEASE);
	return NULL;
}

/* Two threads blocked in rdma_get_cm_event on two channels: the first one
 * in polls the umad fds, the second only its channel. When the first
 * returns, the second still sleeps and could not see a MAD: the fds go
 * back to the progress thread at once, whatever the hand-over time, and
 * the REQ for the second thread's listener reaches it. */
Test(handover, a_second_waiter_is_not_left_without_mads)
{
	struct rdma_event_channel *cha, *chb;
	struct rdma_cm_id *ida, *lid;
	struct waiter wa = { 0 }, wb = { 0 };
	pthread_t ta, tb;
	struct lt_pipes p;
	struct sockaddr_in any = lt_sin("0.0.0.0", PORT);
	uint64_t t0;
	pid_t pid;

	setenv("USCM_WAIT_HANDOVER_US", "20000000", 1); /* 20 s: longer than the test may wait */
	pid = lt_spawn(client, 0, &p);
	cr_assert((cha = rdma_create_event_channel()));
	cr_assert((chb = rdma_create_event_channel()));
	cr_assert_eq(rdma_create_id(cha, &ida, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_create_id(chb, &lid, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_bind_addr(lid, (struct sockaddr *)&any), 0);
	cr_assert_eq(rdma_listen(lid, 4), 0);
	wa.ch = cha;
	wb.ch = chb;
	cr_assert_eq(pthread_create(&ta, NULL, wait_one, &wa), 0);
	usleep(100 * 1000); /* A is in first: it has the umad fds */
	cr_assert_eq(pthread_create(&tb, NULL, wait_one, &wb), 0);
	usleep(100 * 1000);
	/* A returns (a USER event on its channel); B sleeps on */
	cr_assert_eq(rdma_write_cm_event(ida, RDMA_CM_EVENT_USER, 0, 7), 0);
	cr_assert_eq(pthread_join(ta, NULL), 0);
	cr_assert_eq(wa.rc, 0);
	cr_assert_eq(wa.type, RDMA_CM_EVENT_USER);
	cr_assert_eq(__atomic_load_n(&wb.at_ms, __ATOMIC_ACQUIRE), 0, "B returned without an event");
	t0 = lt_now_ms();
	cr_assert_eq(write(p.go[1], "g", 1), 1); /* the REQ: for B's listener */
	lt_wait_until(__atomic_load_n(&wb.at_ms, __ATOMIC_ACQUIRE) != 0, 10000);
	cr_assert_neq(__atomic_load_n(&wb.at_ms, __ATOMIC_ACQUIRE), 0,
		      "B got no CONNECT_REQUEST in 10 s: the umad fds stayed with A's hand-over");
	cr_assert_eq(pthread_join(tb, NULL), 0);
	cr_assert_eq(wb.rc, 0);
	cr_assert_eq(wb.type, RDMA_CM_EVENT_CONNECT_REQUEST, "B got %s", rdma_event_str(wb.type));
	cr_expect_lt(wb.at_ms - t0, 5000, "CONNECT_REQUEST after %llu ms",
		     (unsigned long long)(wb.at_ms - t0));
	/* the child waits for ESTABLISHED and then DISCONNECTED: refuse it */
	cr_assert_eq(rdma_reject(wb.id, NULL, 0), 0);
	rdma_destroy_id(wb.id);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	rdma_destroy_id(lid);
	rdma_destroy_id(ida);
	rdma_destroy_event_channel(cha);
	rdma_destroy_event_channel(chb);
}
