/*
 * uscm-bench-engine - the protocol core's ceiling: CPU time and heap
 * allocations per complete CM handshake (REQ, REP, RTU on both engines,
 * in-process, no fabric), with 1k and 100k other connections alive to show
 * the lookups stay O(1), and bytes of engine state per established
 * connection. Prints figures and ratios; it is not a pass/fail test.
 * --flood N instead times lookups in the engine's hash map for N keys a
 * hostile peer computed to collide (tools/bench_flood.c).
 *
 * usage: uscm-bench-engine [--handshakes N] [--live L1,L2,...] | --flood N
 */
#include <getopt.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cm_proto/cmp_engine.h"
#include "tools/bench_flood.h"

/* Allocation counting: the tool is linked with --wrap for these. */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
static unsigned long long n_allocs;
void *__wrap_malloc(size_t n) { n_allocs++; return __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { n_allocs++; return __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { n_allocs++; return __real_realloc(p, n); }

struct side {
	struct cmp_engine *e;
	struct cmp_addr self;
	struct cmp_path path;
};

static double cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void path(struct cmp_path *p, uint16_t s, uint16_t d)
{
	memset(p, 0, sizeof(*p));
	p->slid = s;
	p->dlid = d;
	p->mtu = 4;
	p->rate = 3;
	p->packet_life_time = 14;
	p->pkey = 0xFFFF;
	p->subnet_local = 1;
	p->port_num = 1;
}

/* Moves queued MADs from a to b. */
static void deliver(struct side *a, struct side *b, cmp_time now)
{
	struct cmp_tx tx;
	while (cmp_engine_poll_tx(a->e, &tx))
		cmp_engine_recv(b->e, &a->self, tx.mad, sizeof(tx.mad), now);
}

static struct cmp_conn *next_event(struct side *s, enum cmp_event_type want)
{
	struct cmp_event ev;
	struct cmp_conn *c = NULL;
	while (cmp_engine_poll_event(s->e, &ev))
		if (ev.type == want)
			c = ev.conn;
	return c;
}

static uint32_t qpn_counter = 1;

/* One complete handshake; returns the two established connections. */
static int handshake(struct side *a, struct side *b, cmp_time now, struct cmp_conn **ca,
		     struct cmp_conn **cb)
{
	struct cmp_req_param p = {
		.primary = &a->path, .service_id = 0x1061144, .qpn = qpn_counter++,
		.starting_psn = 1, .responder_resources = 4, .initiator_depth = 4,
		.retry_count = 7, .rnr_retry_count = 7,
	};
	struct cmp_rep_param rp = { .starting_psn = 2, .responder_resources = 4,
				    .initiator_depth = 4, .rnr_retry_count = 7 };

	if (cmp_connect(a->e, &p, NULL, ca, now))
		return -1;
	deliver(a, b, now);
	*cb = next_event(b, CMP_EV_REQ_RECEIVED);
	rp.qpn = qpn_counter++;
	if (!*cb || cmp_accept(b->e, *cb, &rp, now))
		return -1;
	deliver(b, a, now);
	if (!next_event(a, CMP_EV_REP_RECEIVED) || cmp_rtu(a->e, *ca, NULL, 0, now))
		return -1;
	deliver(a, b, now);
	if (!next_event(b, CMP_EV_RTU_RECEIVED))
		return -1;
	return 0;
}

struct result {
	size_t live;
	double cpu_ns_per_hs;
	double allocs_per_hs;
	double bytes_per_conn;
};

static int run(size_t live, size_t n, struct result *r)
{
	struct cmp_settings s;
	struct side a = { 0 }, b = { 0 };
	struct cmp_conn **keep_a, **keep_b, *ca, *cb;
	struct cmp_listen *l;
	cmp_time now = 1;

	cmp_settings_default(&s);
	s.max_conns = (unsigned)(live + n + 16);
	s.local_ca_guid = 1;
	s.seed = 11;
	a.e = cmp_engine_new(&s);
	s.local_ca_guid = 2;
	s.seed = 22;
	b.e = cmp_engine_new(&s);
	a.self.lid = 1;
	b.self.lid = 2;
	path(&a.path, 1, 2);
	path(&b.path, 2, 1);
	if (!a.e || !b.e || cmp_listen(b.e, 0x1061144, 0, (unsigned)(live + n + 16), NULL, &l))
		return -1;
	keep_a = calloc(live + 1, sizeof(*keep_a));
	keep_b = calloc(live + 1, sizeof(*keep_b));

	/* The live population, and the heap it costs. */
	struct mallinfo2 m0 = mallinfo2();
	for (size_t i = 0; i < live; i++)
		if (handshake(&a, &b, now, &keep_a[i], &keep_b[i]))
			return -1;
	struct mallinfo2 m1 = mallinfo2();
	r->live = live;
	r->bytes_per_conn = live ? (double)(m1.uordblks - m0.uordblks) / (2.0 * (double)live) : 0;

	/* Measured handshakes, each torn down again (destroy: DREQ/DREP, then
	 * TimeWait runs out) so the population stays at `live`. */
	double cpu = 0;
	unsigned long long allocs = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned long long a0 = n_allocs;
		double t0 = cpu_ns();
		if (handshake(&a, &b, now, &ca, &cb))
			return -1;
		cpu += cpu_ns() - t0;
		allocs += n_allocs - a0;
		cmp_conn_destroy(a.e, ca, now);
		cmp_conn_destroy(b.e, cb, now);
		deliver(&a, &b, now);
		deliver(&b, &a, now);
		if (i % 64 == 63) {
			now += 10ULL * 1000000000ULL; /* past TimeWait */
			cmp_engine_handle_expiry(a.e, now);
			cmp_engine_handle_expiry(b.e, now);
			deliver(&a, &b, now);
			deliver(&b, &a, now);
		}
	}
	r->cpu_ns_per_hs = cpu / (double)n;
	r->allocs_per_hs = (double)allocs / (double)n;
	cmp_engine_free(a.e);
	cmp_engine_free(b.e);
	free(keep_a);
	free(keep_b);
	return 0;
}

int main(int argc, char **argv)
{
	size_t n = 20000, lives[8] = { 0, 1000, 100000 }, nlive = 3, flood = 0;
	static const struct option lo[] = {
		{ "handshakes", required_argument, NULL, 'n' },
		{ "live", required_argument, NULL, 'l' },
		{ "flood", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	while ((c = getopt_long(argc, argv, "n:l:f:h", lo, NULL)) != -1) {
		switch (c) {
		case 'n': n = strtoul(optarg, NULL, 0); break;
		case 'f': flood = strtoul(optarg, NULL, 0); break;
		case 'l': {
			nlive = 0;
			for (char *t = strtok(optarg, ","); t && nlive < 8; t = strtok(NULL, ","))
				lives[nlive++] = strtoul(t, NULL, 0);
			break;
		}
		default:
			fprintf(stderr, "usage: uscm-bench-engine [--handshakes N] [--live L1,L2,...] | "
					"--flood N\n");
			return c == 'h' ? 0 : 2;
		}
	}
	if (flood) {
		if (bench_flood(flood)) {
			fprintf(stderr, "uscm-bench-engine: out of memory\n");
			return 1;
		}
		return 0;
	}
	if (!n)
		n = 1;
	printf("engine-only CM handshakes (REQ+REP+RTU, both sides, in-process), %zu measured per row\n", n);
	printf("%10s %16s %16s %18s %10s\n", "live", "cpu ns/handshake", "allocs/handshake",
	       "bytes/established", "ratio");
	double base = 0;
	for (size_t i = 0; i < nlive; i++) {
		struct result r;
		if (run(lives[i], n, &r)) {
			fprintf(stderr, "uscm-bench-engine: handshake failed\n");
			return 1;
		}
		if (i == 0 || base == 0)
			base = r.cpu_ns_per_hs;
		printf("%10zu %16.0f %16.2f %18.0f %10.2f\n", r.live, r.cpu_ns_per_hs, r.allocs_per_hs,
		       r.bytes_per_conn, r.cpu_ns_per_hs / base);
	}
	printf("ratio = cpu per handshake / the first row's (O(1) lookups keep it near 1)\n");
	printf("bytes/established = engine heap per connection end (one side), from mallinfo2\n");
	return 0;
}
