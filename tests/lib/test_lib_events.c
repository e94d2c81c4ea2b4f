/*
 * Event channels and ids: the fd is readable exactly while an event waits,
 * events of an id come in order, non-blocking and blocking retrieval,
 * rdma_destroy_id waits for the acks of the events handed out (and drops
 * those never retrieved), a channel destroyed under a waiting thread,
 * rdma_migrate_id moves pending events, synchronous ids, devices, bad
 * arguments. Runs as node 1 of a one-node simulated fabric
 * (the library needs an RDMA device).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>

#include <rdma/rdma_cma.h>

#include "libtest.h"

static void setup(void)
{
	lt_fabric_start("ib", 1);
	lt_node(1);
}

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(events, .init = setup, .fini = teardown, .timeout = 60);

static int readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

Test(events, fd_readable_exactly_while_an_event_waits)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	int ctx;

	cr_assert(ch, "rdma_create_event_channel: %s", strerror(errno));
	cr_assert_eq(rdma_create_id(ch, &id, &ctx, RDMA_PS_TCP), 0);
	cr_expect_eq(id->channel, ch);
	cr_expect_eq(id->context, &ctx);
	cr_expect_eq(id->ps, RDMA_PS_TCP);
	cr_expect_eq(id->qp_type, IBV_QPT_RC);
	cr_expect_not(readable(ch->fd));
	cr_assert_eq(rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 7, 42), 0);
	cr_expect(readable(ch->fd));
	cr_assert_eq(rdma_get_cm_event(ch, &ev), 0);
	cr_expect_eq(ev->id, id);
	cr_expect_eq(ev->event, RDMA_CM_EVENT_USER);
	cr_expect_eq(ev->status, 7);
	cr_expect_eq(ev->param.arg, 42);
	cr_expect_not(readable(ch->fd), "still readable after the only event was taken");
	cr_expect_eq(rdma_ack_cm_event(ev), 0);
	cr_expect_eq(rdma_destroy_id(id), 0);
	rdma_destroy_event_channel(ch);
}

Test(events, in_order_and_nonblocking)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;

	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, (uint64_t)i), 0);
	for (int i = 0; i < 5; i++) {
		cr_assert(readable(ch->fd));
		cr_assert_eq(rdma_get_cm_event(ch, &ev), 0);
		cr_expect_eq(ev->param.arg, (uint64_t)i, "event %d out of order", i);
		rdma_ack_cm_event(ev);
	}
	cr_assert_eq(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
	errno = 0;
	cr_expect_eq(rdma_get_cm_event(ch, &ev), -1);
	cr_expect_eq(errno, EAGAIN);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

struct later {
	struct rdma_cm_id *id;
	int ms;
	atomic_int done;
};

static void *write_later(void *arg)
{
	struct later *l = arg;

	usleep((useconds_t)l->ms * 1000);
	rdma_write_cm_event(l->id, RDMA_CM_EVENT_USER, 0, 99);
	return NULL;
}

Test(events, blocking_get_wakes_up)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct later l;
	pthread_t t;
	uint64_t t0;

	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	l.id = id;
	l.ms = 150;
	t0 = lt_now_ms();
	pthread_create(&t, NULL, write_later, &l);
	cr_assert_eq(rdma_get_cm_event(ch, &ev), 0);
	cr_expect_geq(lt_now_ms() - t0, 100u, "returned before the event was written");
	cr_expect_eq(ev->param.arg, 99);
	rdma_ack_cm_event(ev);
	pthread_join(t, NULL);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

/* rping tears down so: its event thread still waits in rdma_get_cm_event
 * when main destroys the channel and exits. As with the kernel's rdma_cm,
 * the waiter just never returns (and nothing is freed under it). */
static atomic_int waiter_returned;

static void *wait_forever(void *arg)
{
	struct rdma_cm_event *ev;

	rdma_get_cm_event(arg, &ev);
	atomic_store(&waiter_returned, 1);
	return NULL;
}

Test(events, destroy_channel_with_a_waiter)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	pthread_t t;

	cr_assert(ch);
	pthread_create(&t, NULL, wait_forever, ch);
	usleep(100 * 1000); /* it is in poll() now */
	rdma_destroy_event_channel(ch);
	usleep(100 * 1000);
	cr_expect_eq(atomic_load(&waiter_returned), 0);
	pthread_detach(t);
}

static void *destroy_thread(void *arg)
{
	struct later *l = arg;

	rdma_destroy_id(l->id);
	atomic_store(&l->done, 1);
	return NULL;
}

Test(events, destroy_waits_for_ack)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;
	struct later l;
	pthread_t t;

	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, 1);
	cr_assert_eq(rdma_get_cm_event(ch, &ev), 0);
	l.id = id;
	atomic_init(&l.done, 0);
	pthread_create(&t, NULL, destroy_thread, &l);
	usleep(300 * 1000);
	cr_expect_eq(atomic_load(&l.done), 0, "rdma_destroy_id returned with an unacked event");
	rdma_ack_cm_event(ev);
	pthread_join(t, NULL);
	cr_expect_eq(atomic_load(&l.done), 1);
	rdma_destroy_event_channel(ch);
}

Test(events, destroy_drops_events_never_retrieved)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *a, *b;
	struct rdma_cm_event *ev;

	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &a, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_create_id(ch, &b, NULL, RDMA_PS_TCP), 0);
	rdma_write_cm_event(a, RDMA_CM_EVENT_USER, 0, 1);
	rdma_write_cm_event(b, RDMA_CM_EVENT_USER, 0, 2);
	rdma_write_cm_event(a, RDMA_CM_EVENT_USER, 0, 3);
	cr_assert_eq(rdma_destroy_id(a), 0, "destroy must not wait for events never handed out");
	cr_assert(readable(ch->fd));
	cr_assert_eq(rdma_get_cm_event(ch, &ev), 0);
	cr_expect_eq(ev->id, b);
	cr_expect_eq(ev->param.arg, 2);
	rdma_ack_cm_event(ev);
	cr_expect_not(readable(ch->fd));
	rdma_destroy_id(b);
	rdma_destroy_event_channel(ch);
}

Test(events, migrate_moves_pending_events)
{
	struct rdma_event_channel *c1 = rdma_create_event_channel(), *c2 = rdma_create_event_channel();
	struct rdma_cm_id *id, *other;
	struct rdma_cm_event *ev;

	cr_assert(c1 && c2);
	cr_assert_eq(rdma_create_id(c1, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert_eq(rdma_create_id(c1, &other, NULL, RDMA_PS_TCP), 0);
	/* kernel (ucma_move_events): the id's queued events go along, in
	 * order; another id's stay, in theirs */
	rdma_write_cm_event(other, RDMA_CM_EVENT_USER, 0, 1);
	rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, 5);
	rdma_write_cm_event(other, RDMA_CM_EVENT_USER, 0, 2);
	rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, 6);
	cr_assert_eq(rdma_migrate_id(id, c2), 0);
	cr_expect_eq(id->channel, c2);
	rdma_write_cm_event(id, RDMA_CM_EVENT_USER, 0, 7);
	for (int i = 5; i <= 7; i++) {
		cr_assert(readable(c2->fd));
		cr_assert_eq(rdma_get_cm_event(c2, &ev), 0);
		cr_expect_eq(ev->param.arg, (uint64_t)i);
		cr_expect_eq(ev->id, id);
		rdma_ack_cm_event(ev);
	}
	cr_expect_not(readable(c2->fd));
	for (int i = 1; i <= 2; i++) {
		cr_assert(readable(c1->fd));
		cr_assert_eq(rdma_get_cm_event(c1, &ev), 0);
		cr_expect_eq(ev->param.arg, (uint64_t)i);
		cr_expect_eq(ev->id, other);
		rdma_ack_cm_event(ev);
	}
	cr_expect_not(readable(c1->fd));
	rdma_destroy_id(other);
	/* To a private channel (synchronous) and back. */
	cr_assert_eq(rdma_migrate_id(id, NULL), 0);
	cr_expect_neq(id->channel, c2);
	cr_expect_neq(id->channel, NULL);
	cr_assert_eq(rdma_migrate_id(id, c1), 0);
	cr_expect_eq(id->channel, c1);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(c1);
	rdma_destroy_event_channel(c2);
}

Test(events, synchronous_id)
{
	struct rdma_cm_id *id;
	struct sockaddr_in dst = lt_sin("127.10.0.1", 7000);

	cr_assert_eq(rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP), 0);
	cr_assert(id->channel, "a synchronous id has a private channel");
	/* Blocks until ADDR_RESOLVED, which stays in id->event. */
	cr_assert_eq(rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 2000), 0, "%s",
		     strerror(errno));
	cr_assert(id->event);
	cr_expect_eq(id->event->event, RDMA_CM_EVENT_ADDR_RESOLVED);
	cr_expect(id->verbs);
	cr_expect_eq(rdma_destroy_id(id), 0);
}

Test(events, write_event_only_user_events)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;

	cr_assert(ch);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP), 0);
	errno = 0;
	cr_expect_eq(rdma_write_cm_event(id, RDMA_CM_EVENT_ESTABLISHED, 0, 0), -1);
	cr_expect_eq(errno, EINVAL);
	cr_expect_not(readable(ch->fd));
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(events, bad_arguments)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;
	struct rdma_cm_event *ev;

	cr_assert(ch);
	errno = 0;
	cr_expect_eq(rdma_create_id(ch, &id, NULL, (enum rdma_port_space)0x1234), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_create_id(ch, NULL, NULL, RDMA_PS_TCP), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_get_cm_event(NULL, &ev), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_ack_cm_event(NULL), -1);
	cr_expect_eq(errno, EINVAL);
	cr_assert_eq(rdma_create_id(ch, &id, NULL, RDMA_PS_UDP), 0);
	cr_expect_eq(id->qp_type, IBV_QPT_UD);
	/* Wrong state: no route, no address. */
	errno = 0;
	cr_expect_eq(rdma_resolve_route(id, 1000), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_accept(id, NULL), -1);
	errno = 0;
	cr_expect_eq(rdma_disconnect(id), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_reject(id, NULL, 0), -1);
	cr_expect_eq(errno, EINVAL);
	errno = 0;
	cr_expect_eq(rdma_establish(id), -1);
	cr_expect_eq(errno, EINVAL);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
}

Test(events, devices)
{
	int n = -1;
	struct ibv_context **list = rdma_get_devices(&n);

	cr_assert(list);
	cr_expect_eq(n, 1);
	cr_assert(list[0]);
	cr_expect_null(list[1]);
	cr_expect_str_eq(ibv_get_device_name(list[0]->device), "uscm_node1");
	/* The same contexts every time: ids hand them out as id->verbs. */
	struct ibv_context **again = rdma_get_devices(NULL);
	cr_expect_eq(again[0], list[0]);
	rdma_free_devices(again);
	rdma_free_devices(list);
}
