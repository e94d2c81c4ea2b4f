/*
 * The same behaviour in both modes (CTest runs this suite in-process and,
 * as test_lib_modes_daemon, through a uscmd per node), where daemon mode
 * used to differ from the kernel's rdma_cm and from in-process mode:
 * rdma_migrate_id moves the events already queued on the old channel;
 * RDMA_OPTION_ID_ACK_TIMEOUT set between a connection request and its
 * accept reaches the QP; RDMA_OPTION_IB_PATH on a synchronous id returns
 * without waiting and leaves its ROUTE_RESOLVED queued, as librdmacm.
 * Two-node fabric: the test process is node 1 (the active side), a forked
 * child node 2 (the server).
 */
#include <rdma/rdma_cma.h>

#include "libtest.h"

#define PORT 7471

TestSuite(modes, .init = lt_init_ib, .fini = lt_fini, .timeout = 90);

static int readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

enum srv_mode {
	SRV_MIGRATE,    /* accept on the listener's channel, then migrate the new id */
	SRV_ACK_TIMEOUT, /* RDMA_OPTION_ID_ACK_TIMEOUT 21 between the request and the accept */
	SRV_ACK_TIMEOUT_EARLY, /* the same before rdma_create_qp */
};

static void set_ack_timeout(struct rdma_cm_id *id)
{
	uint8_t to = 21;

	LT_CK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &to, sizeof(to)) == 0);
}

/* Node 2: listens on PORT, takes one request, accepts it as mode says. */
static void server(int mode, struct lt_pipes *p)
{
	struct sockaddr_in any = lt_sin("0.0.0.0", PORT);
	struct rdma_event_channel *ch, *c2;
	struct rdma_cm_id *lid, *cid;
	struct rdma_cm_event *ev;
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;

	lt_node(2);
	LT_CK((ch = rdma_create_event_channel()));
	LT_CK(rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) == 0);
	LT_CK(rdma_bind_addr(lid, (struct sockaddr *)&any) == 0);
	LT_CK(rdma_listen(lid, 4) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	ev = lt_child_wait(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	cid = ev->id;
	rdma_ack_cm_event(ev);
	if (mode == SRV_ACK_TIMEOUT_EARLY)
		set_ack_timeout(cid);
	lt_rc_qp_attr(&qa);
	LT_CK(rdma_create_qp(cid, NULL, &qa) == 0);
	if (mode == SRV_ACK_TIMEOUT)
		set_ack_timeout(cid);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	LT_CK(rdma_accept(cid, &cp) == 0);
	c2 = ch;
	if (mode == SRV_MIGRATE) {
		/* the RTU came: ESTABLISHED waits on the listener's channel;
		 * the migration takes it along (kernel: ucma_move_events) */
		LT_CK(readable(ch->fd, 10000));
		LT_CK((c2 = rdma_create_event_channel()));
		LT_CK(rdma_migrate_id(cid, c2) == 0);
		LT_CK(cid->channel == c2);
		if (readable(ch->fd, 0))
			fprintf(stderr, "child: the old channel still has an event\n");
		LT_CK(!readable(ch->fd, 0));
	}
	ev = lt_event(c2, 2000);
	if (!ev || ev->event != RDMA_CM_EVENT_ESTABLISHED)
		fprintf(stderr, "child: wanted ESTABLISHED on the new channel, got %s\n",
			ev ? rdma_event_str(ev->event) : "nothing");
	LT_CK(ev && ev->event == RDMA_CM_EVENT_ESTABLISHED && ev->id == cid);
	rdma_ack_cm_event(ev);
	if (mode == SRV_ACK_TIMEOUT || mode == SRV_ACK_TIMEOUT_EARLY) {
		/* the kernel: rdma_init_qp_attr's RTS timeout is the option's
		 * once set (cma_modify_qp_rts), whenever it was set */
		struct ibv_qp_attr a;
		struct ibv_qp_init_attr ia;

		memset(&a, 0, sizeof(a));
		LT_CK(ibv_query_qp(cid->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT, &ia) == 0);
		if (a.timeout != 21)
			fprintf(stderr, "child: the QP's timeout is %u, the option said 21\n",
				a.timeout);
		LT_CK(a.qp_state == IBV_QPS_RTS && a.timeout == 21);
	}
	LT_CK(write(p->ready[1], "e", 1) == 1);
	rdma_ack_cm_event(lt_child_wait(c2, RDMA_CM_EVENT_DISCONNECTED));
	LT_CK(rdma_disconnect(cid) == 0);
	rdma_destroy_qp(cid);
	LT_CK(rdma_destroy_id(cid) == 0);
	LT_CK(rdma_destroy_id(lid) == 0);
	if (c2 != ch)
		rdma_destroy_event_channel(c2);
	rdma_destroy_event_channel(ch);
	_exit(0);
}

/* Node 1: connects to the server (mode), waits until it saw ESTABLISHED,
 * disconnects. */
static void connect_to(int mode)
{
	struct sockaddr_in dst = lt_sin("127.10.0.2", PORT);
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct lt_pipes p;
	pid_t pid;

	pid = lt_spawn(server, mode, &p);
	cr_assert((ch = rdma_create_event_channel()));
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 2000));
	cr_assert_eq(rdma_resolve_route(id, 2000), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 4000));
	lt_rc_qp_attr(&qa);
	cr_assert_eq(rdma_create_qp(id, NULL, &qa), 0);
	memset(&cp, 0, sizeof(cp));
	cp.responder_resources = cp.initiator_depth = 1;
	cp.retry_count = 6;
	cp.rnr_retry_count = 7;
	cr_assert_eq(rdma_connect(id, &cp), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_ESTABLISHED, 10000));
	cr_assert_eq(lt_child_says(&p, 10000, "the server saw no ESTABLISHED"), 'e');
	cr_assert_eq(rdma_disconnect(id), 0);
	rdma_ack_cm_event(lt_expect(ch, RDMA_CM_EVENT_DISCONNECTED, 5000));
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	lt_reap(pid);
}

/* A server that accepts on the listener's channel and then moves the new
 * id to a channel of its own gets the ESTABLISHED that had already come
 * (daemon mode used to leave it on the listener's channel). */
Test(modes, migrate_after_accept_moves_established)
{
	connect_to(SRV_MIGRATE);
}

/* rdma_set_option(RDMA_OPTION_ID_ACK_TIMEOUT) on a new id before its
 * accept reaches the QP's RTS timeout (daemon mode used the attributes
 * computed when the request came: 16). */
Test(modes, ack_timeout_set_before_accept_reaches_the_qp)
{
	connect_to(SRV_ACK_TIMEOUT);
}

Test(modes, ack_timeout_set_before_create_qp_reaches_the_qp)
{
	connect_to(SRV_ACK_TIMEOUT_EARLY);
}

/* librdmacm's rdma_set_option is one write to the rdma_cm fd: on a
 * synchronous id RDMA_OPTION_IB_PATH returns once the path is set, and the
 * ROUTE_RESOLVED the kernel queues for it (ucma_set_ib_path) waits on the
 * id's channel for whoever reads it next (librdmacm's own callers,
 * rdma_create_ep and rdma_resolve_route through ucma_set_ib_route, read
 * it with ucma_complete). Daemon mode used to wait for it inside
 * rdma_set_option. */
Test(modes, ib_path_on_a_synchronous_id_leaves_route_resolved_queued)
{
	struct sockaddr_in dst = lt_sin("127.10.0.2", PORT);
	struct rdma_cm_event *ev;
	struct ibv_path_data pd;
	struct rdma_cm_event *last;
	struct rdma_cm_id *id;

	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0, "%s",
		     strerror(errno));
	cr_assert(!readable(id->channel->fd, 0), "ADDR_RESOLVED was consumed by the call");
	/* librdmacm keeps the event a synchronous call read in id->event
	 * until the next one that waits */
	last = id->event;
	cr_assert(last && last->event == RDMA_CM_EVENT_ADDR_RESOLVED);
	lt_ib_path_data(&pd, id->route.addr.addr.ibaddr.sgid.raw, id->route.addr.addr.ibaddr.dgid.raw);
	cr_assert_eq(rdma_set_option(id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, &pd, sizeof(pd)), 0,
		     "%s", strerror(errno));
	cr_expect_eq(id->route.num_paths, 1);
	cr_expect(id->route.path_rec && be16toh(id->route.path_rec->dlid) == 3);
	cr_expect(id->event == last && id->event->event == RDMA_CM_EVENT_ADDR_RESOLVED,
		  "rdma_set_option consumed an event");
	cr_assert(readable(id->channel->fd, 2000), "no ROUTE_RESOLVED queued on the id's channel");
	cr_assert_eq(rdma_get_cm_event(id->channel, &ev), 0);
	cr_expect_eq(ev->event, RDMA_CM_EVENT_ROUTE_RESOLVED, "%s", rdma_event_str(ev->event));
	cr_expect_eq(ev->id, id);
	rdma_ack_cm_event(ev);
	cr_expect(!readable(id->channel->fd, 0));
	rdma_destroy_id(id);
}
