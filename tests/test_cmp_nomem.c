/*
 * Allocation failure in the CM engine: through the allocator
 * hook of cmp_settings.mem, fail the Nth allocation, for every N from 1
 * until a run makes fewer than N, of a scenario that covers a handshake
 * and its teardown (DREQ, DREP, TimeWait), a REQ to a port that never
 * answers (retries, then REQ_ERROR) and a SIDR exchange. The driver reacts
 * to ENOMEM as an application would: it calls again. Each run must end
 * (no hang: within a bound of steps and simulated time, every connection
 * reaches an end the driver saw as an event), free everything it
 * allocated (allocations counted against frees through the hook), keep
 * every connection that waits on a timer in the timer heap after every
 * step, and report the failure cleanly: a call that fails returns -1 with
 * ENOMEM and changed nothing, a received MAD it could not act on changed
 * nothing, a timer that could not run is still there.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_engine.h"
#include "cm_proto/cmp_engine_int.h" /* the timer heap, for the invariant */

/* ---- the failing allocator ---------------------------------------------------- */

struct fa {
	unsigned long calls;   /* allocation attempts (malloc, calloc, realloc) */
	unsigned long fail_at; /* this one fails (0: none) */
	unsigned long live;    /* blocks allocated and not freed */
	int injected;          /* fail_at was reached */
};

static int fa_fail(struct fa *f)
{
	if (++f->calls != f->fail_at)
		return 0;
	f->injected = 1;
	return 1;
}

static void *fa_malloc(size_t n, void *u)
{
	struct fa *f = u;
	void *p = fa_fail(f) ? NULL : malloc(n);

	f->live += p != NULL;
	return p;
}

static void *fa_calloc(size_t n, size_t m, void *u)
{
	struct fa *f = u;
	void *p = fa_fail(f) ? NULL : calloc(n, m);

	f->live += p != NULL;
	return p;
}

static void *fa_realloc(void *q, size_t n, void *u)
{
	struct fa *f = u;
	void *p = fa_fail(f) ? NULL : realloc(q, n);

	f->live += p != NULL && q == NULL;
	return p;
}

static void fa_free(void *p, void *u)
{
	struct fa *f = u;

	if (p) {
		cr_assert_gt(f->live, 0, "free of a block the hook never handed out");
		f->live--;
	}
	free(p);
}

/* ---- the scenario -------------------------------------------------------------- */

enum { A = 0, B = 1 };
#define SID 0x1061144ULL
#define SIDR_SID 0x2061144ULL
#define MS 1000000ULL
#define BLACKHOLE_LID 9 /* a port nobody answers from */

enum conn_end { END_NONE, END_COMPLETE, END_ERROR };

struct run {
	struct fa fa;
	struct cmp_engine *e[2];
	struct cmp_addr self[2];
	struct cmp_path to_b, to_void;
	struct cmp_listen *l, *ls;
	cmp_time now;
	/* A's three: the handshake + teardown, the timeout, the SIDR request */
	struct cmp_conn *c1, *c2, *c3;
	int c1_established;
	enum conn_end end1, end2, end3, end_b;
	int b_done;  /* B's handshake connection ended (TIMEWAIT_EXIT or error) */
	int sidr_b;  /* B answered the SIDR request */
	unsigned enomem_calls, enomem_rx, enomem_timers;
};

static void path(struct cmp_path *p, uint16_t s, uint16_t d)
{
	memset(p, 0, sizeof(*p));
	p->slid = s;
	p->dlid = d;
	p->mtu = 4;
	p->rate = 3;
	p->packet_life_time = 10;
	p->pkey = 0xFFFF;
	p->subnet_local = 1;
	p->port_num = 1;
}

/* What a failed step must leave alone. */
struct snap {
	size_t conns, timers;
	cmp_time expiry;
	uint64_t tx;
	int state; /* of the call's connection, -1: none */
};

static struct snap snap_of(const struct cmp_engine *e, const struct cmp_conn *c)
{
	return (struct snap){ cmp_engine_conn_count(e), cmp_engine_timer_count(e),
			      cmp_engine_get_expiry(e), cmp_engine_stats(e)->tx,
			      c ? (int)cmp_conn_state(c) : -1 };
}

static void snap_same(const struct snap *x, const struct snap *y, const char *what)
{
	cr_assert_eq(x->conns, y->conns, "%s: ENOMEM changed the connection count", what);
	cr_assert_eq(x->timers, y->timers, "%s: ENOMEM changed the timer count", what);
	cr_assert_eq(x->expiry, y->expiry, "%s: ENOMEM changed the next deadline", what);
	cr_assert_eq(x->tx, y->tx, "%s: ENOMEM sent a MAD", what);
	cr_assert_eq(x->state, y->state, "%s: ENOMEM changed the state", what);
}

/* Every connection waiting on a timer is in the heap, and nothing else. */
static void timers_cover_conns(const struct cmp_engine *e)
{
	size_t timed = 0;

	for (size_t i = 0; i < e->by_local.cap; i++) {
		const struct cmp_conn *c = e->by_local.slots[i].val;
		if (!c)
			continue;
		switch (c->state) {
		case CMP_REQ_SENT:
		case CMP_MRA_REQ_RCVD:
		case CMP_REP_SENT:
		case CMP_MRA_REP_RCVD:
		case CMP_DREQ_SENT:
		case CMP_TIMEWAIT:
		case CMP_SIDR_REQ_SENT:
			cr_assert_neq(c->heap_idx, SIZE_MAX, "conn %08x in %s has no timer",
				      c->local_id, cmp_state_str((enum cmp_state)c->state));
			break;
		default:
			break;
		}
		if (c->heap_idx != SIZE_MAX) {
			cr_assert_lt(c->heap_idx, e->heap_len);
			cr_assert_eq(e->heap[c->heap_idx].c, c, "heap slot does not point back");
			timed++;
		}
	}
	cr_assert_eq(timed, e->heap_len, "heap holds %zu, connections say %zu", e->heap_len,
		     timed);
	for (size_t i = 1; i < e->heap_len; i++)
		cr_assert_geq(e->heap[i].deadline, e->heap[(i - 1) / 2].deadline,
			      "heap order broken at slot %zu", i);
}

/* A user call, as an application makes it: again on ENOMEM (nothing
 * changed, so the same call is valid). One failure is injected per run,
 * so the second try must succeed. */
#define CALL(r, side, conn, expr)                                                      \
	do {                                                                           \
		for (int try_ = 0;; try_++) {                                          \
			struct snap before_ = snap_of((r)->e[side], (conn));           \
			int inj_ = (r)->fa.injected;                                   \
			errno = 0;                                                     \
			if ((expr) == 0)                                               \
				break;                                                 \
			cr_assert_eq(errno, ENOMEM, "%s: errno %d", #expr, errno);    \
			cr_assert(!inj_ && (r)->fa.injected, "%s: ENOMEM without the injected failure", #expr); \
			cr_assert_eq(try_, 0, "%s failed twice", #expr);               \
			struct snap after_ = snap_of((r)->e[side], (conn));            \
			snap_same(&before_, &after_, #expr);                           \
			(r)->enomem_calls++;                                           \
		}                                                                      \
		timers_cover_conns((r)->e[side]);                                      \
	} while (0)

static void settings(struct run *r, struct cmp_settings *s, int side)
{
	cmp_settings_default(s);
	s->mem = (struct cmp_mem){ &r->fa, fa_malloc, fa_free, fa_calloc, fa_realloc };
	s->local_ca_guid = 0x0002c90300000001ULL + (uint64_t)side;
	s->seed = 42 + (uint64_t)side;
	s->cm_response_timeout = 10; /* ~4 ms per try */
	s->max_cm_retries = 3;
	s->max_timer_ns = 20 * MS;
	s->timewait_ns = 10 * MS;
	s->sidr_timeout_ns = 5 * MS;
	s->sidr_retries = 3;
}

static void setup(struct run *r)
{
	struct cmp_settings s;

	for (int i = 0; i < 2; i++) {
		settings(r, &s, i);
		while (!(r->e[i] = cmp_engine_new(&s))) {
			cr_assert_eq(errno, ENOMEM);
			cr_assert(r->fa.injected);
			r->enomem_calls++;
		}
		r->self[i].lid = (uint16_t)(i + 1);
		r->self[i].qpn = 1;
		r->self[i].qkey = 0x80010000;
	}
	path(&r->to_b, 1, 2);
	path(&r->to_void, 1, BLACKHOLE_LID);
	r->now = 1000 * MS;
	CALL(r, B, NULL, cmp_listen(r->e[B], SID, 0, 0, NULL, &r->l));
	CALL(r, B, NULL, cmp_listen(r->e[B], SIDR_SID, 0, 0, NULL, &r->ls));
}

static void start(struct run *r)
{
	struct cmp_req_param p = {
		.primary = &r->to_b, .service_id = SID, .qpn = 0x111, .starting_psn = 1,
		.responder_resources = 4, .initiator_depth = 4, .retry_count = 7,
		.rnr_retry_count = 7,
	};
	struct cmp_sidr_req_param sp = { .path = &r->to_b, .service_id = SIDR_SID };

	CALL(r, A, NULL, cmp_connect(r->e[A], &p, NULL, &r->c1, r->now));
	p.primary = &r->to_void;
	p.qpn = 0x222;
	CALL(r, A, NULL, cmp_connect(r->e[A], &p, NULL, &r->c2, r->now));
	CALL(r, A, NULL, cmp_sidr_req(r->e[A], &sp, NULL, &r->c3, r->now));
}

/* Moves MADs across; MADs to the black hole vanish. 1 if any moved. */
static int deliver(struct run *r)
{
	struct cmp_tx tx;
	int any = 0;

	for (int i = 0; i < 2; i++) {
		while (cmp_engine_poll_tx(r->e[i], &tx)) {
			struct snap before, after;
			int inj;

			any = 1;
			if (tx.dst.lid != r->self[1 - i].lid)
				continue;
			before = snap_of(r->e[1 - i], NULL);
			inj = r->fa.injected;
			if (cmp_engine_recv(r->e[1 - i], &r->self[i], tx.mad, sizeof(tx.mad), r->now)) {
				cr_assert_eq(errno, ENOMEM);
				cr_assert(!inj && r->fa.injected, "recv: ENOMEM without the failure");
				after = snap_of(r->e[1 - i], NULL);
				snap_same(&before, &after, "recv");
				r->enomem_rx++; /* as lost on the wire: the sender retries */
			}
			timers_cover_conns(r->e[1 - i]);
		}
	}
	return any;
}

static void end(struct cmp_engine *e, struct cmp_conn **c, enum conn_end *slot, enum conn_end v,
		cmp_time now)
{
	cr_assert_eq(*slot, END_NONE, "a second end for one connection");
	*slot = v;
	cmp_conn_destroy(e, *c, now);
	*c = NULL;
}

static void events_a(struct run *r)
{
	struct cmp_event ev;

	while (cmp_engine_poll_event(r->e[A], &ev)) {
		if (ev.conn == r->c1) {
			switch (ev.type) {
			case CMP_EV_REP_RECEIVED:
				CALL(r, A, r->c1, cmp_rtu(r->e[A], r->c1, NULL, 0, r->now));
				r->c1_established = 1;
				/* and the teardown, at once */
				CALL(r, A, r->c1, cmp_disconnect(r->e[A], r->c1, NULL, 0, r->now));
				break;
			case CMP_EV_DREP_RECEIVED:
			case CMP_EV_DREQ_ERROR:
			case CMP_EV_MRA_RECEIVED:
				break; /* TimeWait (or more waiting) follows */
			case CMP_EV_TIMEWAIT_EXIT:
				end(r->e[A], &r->c1, &r->end1,
				    r->c1_established ? END_COMPLETE : END_ERROR, r->now);
				break;
			case CMP_EV_REJ_RECEIVED:
			case CMP_EV_REQ_ERROR:
				cr_assert(!r->c1_established, "%s after RTU", cmp_event_str(ev.type));
				end(r->e[A], &r->c1, &r->end1, END_ERROR, r->now);
				break;
			default:
				cr_assert_fail("A: unexpected %s", cmp_event_str(ev.type));
			}
		} else if (ev.conn == r->c2) {
			cr_assert_eq(ev.type, CMP_EV_REQ_ERROR, "timeout conn: %s",
				     cmp_event_str(ev.type));
			end(r->e[A], &r->c2, &r->end2, END_COMPLETE, r->now);
		} else if (ev.conn == r->c3) {
			if (ev.type == CMP_EV_SIDR_REP_RECEIVED)
				end(r->e[A], &r->c3, &r->end3, ev.status ? END_ERROR : END_COMPLETE,
				    r->now);
			else if (ev.type == CMP_EV_SIDR_REQ_ERROR)
				end(r->e[A], &r->c3, &r->end3, END_ERROR, r->now);
			else
				cr_assert_fail("A SIDR: unexpected %s", cmp_event_str(ev.type));
		} else {
			cr_assert_fail("A: %s for no connection of ours", cmp_event_str(ev.type));
		}
	}
}

static void events_b(struct run *r)
{
	struct cmp_event ev;
	struct cmp_rep_param rp = { .qpn = 0x333, .starting_psn = 2, .responder_resources = 4,
				    .initiator_depth = 4, .rnr_retry_count = 7 };
	struct cmp_sidr_rep_param sr = { .status = 0, .qpn = 0x444, .qkey = 0x11 };

	while (cmp_engine_poll_event(r->e[B], &ev)) {
		struct cmp_conn *c = ev.conn;

		switch (ev.type) {
		case CMP_EV_REQ_RECEIVED:
			cr_assert_eq(r->end_b, END_NONE, "a second REQ reached B's user");
			CALL(r, B, c, cmp_accept(r->e[B], c, &rp, r->now));
			break;
		case CMP_EV_DREQ_RECEIVED:
			CALL(r, B, c, cmp_disconnect(r->e[B], c, NULL, 0, r->now));
			break;
		case CMP_EV_RTU_RECEIVED:
		case CMP_EV_MRA_RECEIVED:
			break;
		case CMP_EV_TIMEWAIT_EXIT:
		case CMP_EV_REJ_RECEIVED:
		case CMP_EV_REP_ERROR:
			r->end_b = ev.type == CMP_EV_TIMEWAIT_EXIT ? END_COMPLETE : END_ERROR;
			cmp_conn_destroy(r->e[B], c, r->now);
			break;
		case CMP_EV_SIDR_REQ_RECEIVED:
			CALL(r, B, c, cmp_sidr_rep(r->e[B], c, &sr, r->now));
			cmp_conn_destroy(r->e[B], c, r->now);
			r->sidr_b = 1;
			break;
		default:
			cr_assert_fail("B: unexpected %s", cmp_event_str(ev.type));
		}
	}
}

static void fire_timers(struct run *r)
{
	cmp_time t = cmp_engine_get_expiry(r->e[A]);

	if (cmp_engine_get_expiry(r->e[B]) < t)
		t = cmp_engine_get_expiry(r->e[B]);
	cr_assert_neq(t, CMP_TIME_NEVER, "nothing left to happen, yet the run is not over");
	if (t > r->now)
		r->now = t;
	for (int i = 0; i < 2; i++) {
		int inj = r->fa.injected;

		if (cmp_engine_handle_expiry(r->e[i], r->now)) {
			cr_assert_eq(errno, ENOMEM);
			cr_assert(!inj && r->fa.injected, "expiry: ENOMEM without the failure");
			cr_assert_geq(cmp_engine_timer_count(r->e[i]), 1);
			cr_assert_gt(cmp_engine_get_expiry(r->e[i]), r->now,
				     "a timer that could not run must be put off, not lost");
			r->enomem_timers++;
		}
		timers_cover_conns(r->e[i]);
	}
}

static int over(const struct run *r)
{
	return r->end1 && r->end2 && r->end3 && cmp_engine_conn_count(r->e[A]) == 0 &&
	       cmp_engine_conn_count(r->e[B]) == 0;
}

/* One run with the fail_at'th allocation failing; 1 when the failure
 * happened (0: the run made fewer allocations). */
static int run_once(unsigned long fail_at)
{
	struct run r;
	unsigned steps = 0;

	memset(&r, 0, sizeof(r));
	r.fa.fail_at = fail_at;
	setup(&r);
	start(&r);
	while (!over(&r)) {
		cr_assert_lt(++steps, 10000, "N=%lu: no end after %u steps (hang)", fail_at, steps);
		cr_assert_lt(r.now, 3600000 * MS, "N=%lu: no end within an hour (hang)", fail_at);
		if (deliver(&r))
			continue;
		events_a(&r);
		events_b(&r);
		if (deliver(&r))
			continue;
		timers_cover_conns(r.e[A]);
		timers_cover_conns(r.e[B]);
		if (!over(&r))
			fire_timers(&r);
		events_a(&r);
		events_b(&r);
	}
	/* The timeout is always one; the handshake and the SIDR exchange
	 * complete unless the failure hit them, and then end in an error the
	 * application saw as an event. */
	cr_assert_eq(r.end2, END_COMPLETE);
	if (!r.fa.injected) {
		cr_assert_eq(r.end1, END_COMPLETE, "handshake + teardown with no failure");
		cr_assert_eq(r.end3, END_COMPLETE, "SIDR with no failure");
		cr_assert_eq(r.end_b, END_COMPLETE);
		cr_assert(r.sidr_b);
	} else {
		const struct cmp_stats *sa = cmp_engine_stats(r.e[A]), *sb = cmp_engine_stats(r.e[B]);

		cr_assert(r.enomem_calls + sa->nomem + sb->nomem > 0,
			  "N=%lu: the failure left no trace", fail_at);
		cr_assert_eq(sa->nomem_lost + sb->nomem_lost, 0,
			     "N=%lu: only cmp_conn_destroy may lose a MAD", fail_at);
	}
	cr_assert_eq(r.end1 == END_COMPLETE, r.end_b == END_COMPLETE,
		     "N=%lu: the two sides disagree about the handshake", fail_at);
	cmp_engine_free(r.e[A]);
	cmp_engine_free(r.e[B]);
	cr_assert_eq(r.fa.live, 0, "N=%lu: %lu blocks leaked", fail_at, r.fa.live);
	return r.fa.injected;
}

Test(nomem, every_allocation_fails_once, .timeout = 120)
{
	unsigned long n;

	for (n = 1; run_once(n); n++)
		;
	/* Engines, listeners, connections, maps, heap, queues: a real count. */
	cr_assert_gt(n, 15, "only %lu allocations in the whole scenario?", n - 1);
	cr_log_info("%lu allocation points, each failed once\n", n - 1);
}

/* Settings whose mem is left empty (no cmp_settings_default) get libc's. */
Test(nomem, empty_mem_means_libc)
{
	struct cmp_settings s;
	struct cmp_listen *l;
	struct cmp_engine *e;

	cmp_settings_default(&s);
	memset(&s.mem, 0, sizeof(s.mem));
	e = cmp_engine_new(&s);
	cr_assert_not_null(e);
	cr_assert_eq(cmp_listen(e, SID, 0, 0, NULL, &l), 0);
	cmp_engine_free(e);
}
