/*
 * uscm-bench roles "cm-server" and "cm-client": N RC connections through the
 * rdma_cm API (uscm's librdmacm on the simulated fabric when started by
 * uscm-bench), cmtime's steps, each timed per connection. Asynchronous steps
 * keep at most `window` connections in flight; a connection's latency runs
 * from the call that starts its step to the event that ends it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "bench.h"

#define EVENT_MS 60000

static struct ibv_pd *pd;
static struct ibv_cq *cq;

static int make_qp(struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr a;

	if (!pd) {
		pd = ibv_alloc_pd(id->verbs);
		cq = pd ? ibv_create_cq(id->verbs, 64, NULL, NULL, 0) : NULL;
		if (!cq)
			return -1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_type = IBV_QPT_RC;
	a.send_cq = cq;
	a.recv_cq = cq;
	a.cap.max_send_wr = 1;
	a.cap.max_recv_wr = 1;
	a.cap.max_send_sge = 1;
	a.cap.max_recv_sge = 1;
	return rdma_create_qp(id, pd, &a);
}

static struct rdma_cm_event *next_event(struct rdma_event_channel *ch)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev = NULL;

	for (;;) {
		if (rdma_get_cm_event(ch, &ev) == 0)
			return ev;
		if (errno != EAGAIN && errno != EINTR)
			return NULL;
		if (poll(&p, 1, EVENT_MS) == 0) {
			errno = ETIMEDOUT;
			return NULL;
		}
	}
}

static void sin_of(struct sockaddr_in *s, const char *ip, int port)
{
	memset(s, 0, sizeof(*s));
	s->sin_family = AF_INET;
	s->sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, ip, &s->sin_addr);
}

int bench_cm_server(const struct bench_opts *o)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid = NULL;
	struct sockaddr_in a;
	size_t est = 0, gone = 0, accepted = 0, odd = 0, reqs = 0;
	/* switches from the first CONNECT_REQUEST to the n-th ESTABLISHED */
	struct bench_csw s0, s1, d0, d1;

	bench_raise_nofile(); /* a sim QP is a socket */
	ch = rdma_create_event_channel();
	sin_of(&a, o->dst, o->port);
	if (!ch || rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) || rdma_bind_addr(lid, (struct sockaddr *)&a) ||
	    rdma_listen(lid, 65535)) {
		perror("cm-server: listen");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	while (!o->n || gone < o->n) {
		struct rdma_cm_event *ev = next_event(ch);
		struct rdma_cm_id *id;
		enum rdma_cm_event_type t;

		if (!ev) {
			perror("cm-server: event");
			return 1;
		}
		id = ev->id;
		t = ev->event;
		if (t == RDMA_CM_EVENT_CONNECT_REQUEST) {
			if (!reqs++) {
				bench_csw_self(&s0);
				bench_csw_daemon(&d0);
			}
			struct rdma_conn_param p = { .responder_resources = 1, .initiator_depth = 1,
						     .rnr_retry_count = 7 };
			rdma_ack_cm_event(ev);
			/* Without QPs, each connection still needs its own QPN: the CM
			 * rejects a REP whose QPN is in use (stale connection). */
			if (o->no_qp)
				p.qp_num = 0x800000 + (uint32_t)(accepted++ & 0x7FFFFF);
			else if (make_qp(id)) {
				perror("cm-server: create qp");
				return 1;
			}
			if (rdma_accept(id, &p)) {
				perror("cm-server: accept");
				return 1;
			}
			continue;
		}
		rdma_ack_cm_event(ev);
		if (t == RDMA_CM_EVENT_ESTABLISHED) {
			if (++est == o->n) {
				bench_csw_self(&s1);
				bench_csw_daemon(&d1);
				bench_csw_emit(stdout, BENCH_CSW_SERVER, &s0, &s1, est);
				bench_csw_emit(stdout, BENCH_CSW_SERVER_USCMD, &d0, &d1, est);
			}
		} else if (t == RDMA_CM_EVENT_DISCONNECTED) {
			if (!o->no_qp)
				rdma_destroy_qp(id);
			rdma_destroy_id(id);
			gone++;
		} else if (t != RDMA_CM_EVENT_TIMEWAIT_EXIT && odd++ < 5) {
			fprintf(stderr, "cm-server: %s\n", rdma_event_str(t));
		}
	}
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	return 0;
}

struct cm_client {
	struct rdma_event_channel *ch;
	struct rdma_cm_id **ids;
	size_t n, window;
	double *start;
	struct bench_lat lat, call;
	const struct bench_opts *o;
	struct sockaddr_in dst;
};

typedef int (*step_start)(struct cm_client *c, size_t i);

/* A synchronous step: one call per connection. */
static int sync_step(struct cm_client *c, const char *name, step_start fn)
{
	double t0 = bench_now_us();
	struct bench_stat s;

	c->lat.n = c->n;
	for (size_t i = 0; i < c->n; i++) {
		double t = bench_now_us();
		if (fn(c, i)) {
			fprintf(stderr, "cm-client: %s %zu: %s\n", name, i, strerror(errno));
			return -1;
		}
		c->lat.v[i] = bench_now_us() - t;
	}
	bench_stat_of(&s, name, &c->lat, bench_now_us() - t0);
	bench_stat_emit(stdout, &s);
	return 0;
}

/* An asynchronous step: start, then wait for `want` on each connection,
 * `window` at a time. The start calls' own durations go to c->call. */
static int async_step(struct cm_client *c, const char *name, step_start fn, enum rdma_cm_event_type want,
		      double *t_wall)
{
	size_t next = 0, done = 0, inflight = 0;
	double t0 = bench_now_us();
	struct bench_stat s;

	while (done < c->n) {
		while (next < c->n && inflight < c->window) {
			double t = bench_now_us();
			c->start[next] = t;
			if (fn(c, next)) {
				fprintf(stderr, "cm-client: %s %zu: %s\n", name, next, strerror(errno));
				return -1;
			}
			c->call.v[next] = bench_now_us() - t;
			next++;
			inflight++;
		}
		struct rdma_cm_event *ev = next_event(c->ch);
		if (!ev) {
			fprintf(stderr, "cm-client: %s: waiting for events (%zu/%zu done): %s\n", name, done,
				c->n, strerror(errno));
			return -1;
		}
		size_t i = (size_t)(uintptr_t)ev->id->context;
		enum rdma_cm_event_type t = ev->event;
		int st = ev->status;
		rdma_ack_cm_event(ev);
		if (t == RDMA_CM_EVENT_TIMEWAIT_EXIT)
			continue; /* an earlier connection's QP left TimeWait (cmtime ignores it too) */
		if (t == RDMA_CM_EVENT_CONNECT_RESPONSE && want == RDMA_CM_EVENT_ESTABLISHED && c->o->no_qp) {
			/* No QP: the REP comes to the user, whose rdma_establish sends the RTU. */
			if (rdma_establish(c->ids[i])) {
				fprintf(stderr, "cm-client: establish %zu: %s\n", i, strerror(errno));
				return -1;
			}
			t = want;
		}
		if (t != want) {
			fprintf(stderr, "cm-client: %s %zu: %s (status %d)\n", name, i, rdma_event_str(t), st);
			return -1;
		}
		c->lat.v[i] = bench_now_us() - c->start[i];
		done++;
		inflight--;
		if (c->n >= 1000)
			bench_progress(name, done, c->n);
	}
	*t_wall = bench_now_us() - t0;
	c->lat.n = c->n;
	bench_stat_of(&s, name, &c->lat, *t_wall);
	bench_stat_emit(stdout, &s);
	return 0;
}

static int do_create(struct cm_client *c, size_t i)
{
	return rdma_create_id(c->ch, &c->ids[i], (void *)(uintptr_t)i, RDMA_PS_TCP);
}

static int do_bind(struct cm_client *c, size_t i)
{
	struct sockaddr_in a;

	sin_of(&a, c->o->src ? c->o->src : "127.10.0.1", 0);
	return rdma_bind_addr(c->ids[i], (struct sockaddr *)&a);
}

static int do_addr(struct cm_client *c, size_t i)
{
	return rdma_resolve_addr(c->ids[i], NULL, (struct sockaddr *)&c->dst, 5000);
}

static int do_route(struct cm_client *c, size_t i)
{
	return rdma_resolve_route(c->ids[i], 5000);
}

static int do_qp(struct cm_client *c, size_t i)
{
	return make_qp(c->ids[i]);
}

static int do_connect(struct cm_client *c, size_t i)
{
	struct rdma_conn_param p = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
				     .rnr_retry_count = 7 };

	if (c->o->no_qp)
		p.qp_num = 0x100 + (uint32_t)(i & 0x7FFFFF);
	return rdma_connect(c->ids[i], &p);
}

static int do_disconnect(struct cm_client *c, size_t i)
{
	return rdma_disconnect(c->ids[i]);
}

static int do_destroy(struct cm_client *c, size_t i)
{
	if (!c->o->no_qp)
		rdma_destroy_qp(c->ids[i]);
	return rdma_destroy_id(c->ids[i]);
}

int bench_cm_client(const struct bench_opts *o)
{
	struct cm_client c = { .o = o, .n = o->n, .window = o->window ? o->window : o->n };
	struct bench_stat s;
	double wall, heap0, qp_heap = 0;

	if (!c.n)
		return 1;
	bench_raise_nofile();
	c.ch = rdma_create_event_channel();
	c.ids = calloc(c.n, sizeof(*c.ids));
	c.start = calloc(c.n, sizeof(double));
	c.lat.v = calloc(c.n, sizeof(double));
	c.call.v = calloc(c.n, sizeof(double));
	if (!c.ch || !c.ids || !c.start || !c.lat.v || !c.call.v)
		return 1;
	sin_of(&c.dst, o->dst, o->port);
	heap0 = bench_heap_bytes();
	if (sync_step(&c, "create_id", do_create) || sync_step(&c, "bind", do_bind) ||
	    async_step(&c, "resolve_addr", do_addr, RDMA_CM_EVENT_ADDR_RESOLVED, &wall) ||
	    async_step(&c, "resolve_route", do_route, RDMA_CM_EVENT_ROUTE_RESOLVED, &wall))
		return 1;
	if (o->no_qp) {
		memset(&s, 0, sizeof(s));
		snprintf(s.name, sizeof(s.name), "create_qp");
		bench_stat_emit(stdout, &s);
	} else {
		/* The verbs drop-in's allocations (QP, CQ, PD) are not uscm's. */
		double h = bench_heap_bytes();
		if (sync_step(&c, "create_qp", do_qp))
			return 1;
		qp_heap = bench_heap_bytes() - h;
	}
	struct bench_csw s0, s1, d0, d1;
	bench_csw_self(&s0);
	bench_csw_daemon(&d0);
	if (async_step(&c, "established", do_connect, RDMA_CM_EVENT_ESTABLISHED, &wall))
		return 1;
	bench_csw_self(&s1);
	bench_csw_daemon(&d1);
	bench_csw_emit(stdout, BENCH_CSW_CLIENT, &s0, &s1, c.n);
	bench_csw_emit(stdout, BENCH_CSW_CLIENT_USCMD, &d0, &d1, c.n);
	/* "connect" is the rdma_connect call itself (the REQ leaves from it). */
	c.call.n = c.n;
	bench_stat_of(&s, "connect", &c.call, 0);
	for (size_t i = 0; i < c.n; i++)
		s.total_us += c.call.v[i];
	bench_stat_emit(stdout, &s);
	bench_kv_emit(stdout, "heap_per_conn", (bench_heap_bytes() - heap0 - qp_heap) / (double)c.n);
	if (async_step(&c, "disconnect", do_disconnect, RDMA_CM_EVENT_DISCONNECTED, &wall) ||
	    sync_step(&c, "destroy", do_destroy))
		return 1;
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	rdma_destroy_event_channel(c.ch);
	free(c.ids);
	free(c.start);
	free(c.lat.v);
	free(c.call.v);
	return 0;
}
