/* uscm-bench: timing, per-step statistics, the role→parent line format,
 * and the text / CSV renderings of a run. */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

double bench_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array. */
static double pct(const double *v, size_t n, double p)
{
	size_t k;

	if (!n)
		return 0;
	k = (size_t)(p / 100.0 * (double)n + 0.999999);
	if (k < 1)
		k = 1;
	return v[(k > n ? n : k) - 1];
}

void bench_stat_of(struct bench_stat *s, const char *name, struct bench_lat *l, double total_us)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->n = l->n;
	s->total_us = total_us;
	if (!l->n)
		return;
	qsort(l->v, l->n, sizeof(double), cmp_double);
	s->min = l->v[0];
	s->max = l->v[l->n - 1];
	s->p50 = pct(l->v, l->n, 50);
	s->p99 = pct(l->v, l->n, 99);
	s->valid = 1;
}

void bench_stat_emit(FILE *f, const struct bench_stat *s)
{
	fprintf(f, "step %s %zu %.3f %.3f %.3f %.3f %.3f\n", s->name, s->n, s->total_us, s->min,
		s->p50, s->p99, s->max);
	fflush(f);
}

void bench_kv_emit(FILE *f, const char *key, double v)
{
	fprintf(f, "kv %s %.6g\n", key, v);
	fflush(f);
}

void bench_progress(const char *what, size_t done, size_t n)
{
	static double last;
	double t = bench_now_us();

	if (done < n && t - last < 500e3)
		return;
	last = t;
	if (isatty(2) || done == n || n >= 1000)
		fprintf(stderr, "  %-14s %zu/%zu%s", what, done, n, isatty(2) && done < n ? "\r" : "\n");
}

double bench_heap_bytes(void)
{
	struct mallinfo2 m = mallinfo2();

	return (double)m.uordblks + (double)m.hblkhd;
}

void bench_raise_nofile(void)
{
	struct rlimit r;

	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
		r.rlim_cur = r.rlim_max;
		setrlimit(RLIMIT_NOFILE, &r);
	}
}

const struct bench_stat *bench_step(const struct bench_run *r, const char *name)
{
	for (int i = 0; i < r->nsteps; i++)
		if (!strcmp(r->steps[i].name, name))
			return &r->steps[i];
	return NULL;
}

double bench_rate(const struct bench_run *r)
{
	const struct bench_stat *s = bench_step(r, "established");

	return s && s->total_us > 0 ? (double)s->n / (s->total_us / 1e6) : 0;
}

int bench_parse_line(struct bench_run *r, const char *line)
{
	struct bench_stat s;
	char key[64];
	double v;

	memset(&s, 0, sizeof(s));
	if (sscanf(line, "step %31s %zu %lf %lf %lf %lf %lf", s.name, &s.n, &s.total_us, &s.min,
		   &s.p50, &s.p99, &s.max) == 7) {
		if (r->nsteps >= BENCH_MAX_STEPS)
			return 0;
		s.valid = s.n > 0;
		r->steps[r->nsteps++] = s;
		return 1;
	}
	if (sscanf(line, "kv %63s %lf", key, &v) == 2) {
		if (!strcmp(key, "heap_per_conn"))
			r->heap_per_conn = v;
		else if (!strcmp(key, "cpu_ping_us"))
			r->cpu_ping_us = v;
		else if (!strcmp(key, "cpu_echo_us"))
			r->cpu_echo_us = v;
		else
			bench_csw_parse(r, key, v);
		return 1;
	}
	return 0;
}

void bench_print_run(FILE *f, const struct bench_run *r)
{
	fprintf(f, "%s: %zu connections, at most %zu in flight\n", r->what, r->n, r->window);
	fprintf(f, "  %-14s %10s %10s %10s %10s %10s %10s\n", "step", "total ms", "us/conn", "min us",
		"p50 us", "p99 us", "max us");
	for (int i = 0; i < r->nsteps; i++) {
		const struct bench_stat *s = &r->steps[i];

		if (!s->valid) {
			fprintf(f, "  %-14s %10s\n", s->name, "-");
			continue;
		}
		fprintf(f, "  %-14s %10.1f %10.2f %10.1f %10.1f %10.1f %10.1f\n", s->name,
			s->total_us / 1e3, s->total_us / (double)s->n, s->min, s->p50, s->p99, s->max);
	}
	fprintf(f, "  connections/s  %.0f\n", bench_rate(r));
	if (strcmp(r->what, "tcp") && r->udp_drops > 0)
		fprintf(f, "  MADs lost at a full socket buffer %.0f (the host's UDP RcvbufErrors during the "
			   "run): each resent after the CM's response timeout\n", r->udp_drops);
	bench_csw_print(f, r);
}

void bench_csv_header(FILE *f)
{
	fprintf(f, "impl,mode,n,window,step,total_us,us_per_conn,min_us,p50_us,p99_us,max_us,conn_per_s\n");
}

void bench_csv_run(FILE *f, const struct bench_run *r, const char *mode)
{
	for (int i = 0; i < r->nsteps; i++) {
		const struct bench_stat *s = &r->steps[i];

		if (!s->valid)
			continue;
		fprintf(f, "%s,%s,%zu,%zu,%s,%.1f,%.3f,%.1f,%.1f,%.1f,%.1f,%.0f\n", r->what, mode, r->n,
			r->window, s->name, s->total_us, s->total_us / (double)s->n, s->min, s->p50,
			s->p99, s->max, bench_rate(r));
	}
	bench_csw_csv(f, r, mode);
}

/* Folds client k's figures into the run: counts add up, walls and extremes
 * are the slowest / widest client's, percentiles are weighted by count (an
 * approximation: the clients' samples are not pooled). */
void bench_merge_run(struct bench_run *r, const struct bench_run *k)
{
	if (!r->nsteps) {
		memcpy(r->steps, k->steps, sizeof(r->steps));
		r->nsteps = k->nsteps;
		r->heap_per_conn = k->heap_per_conn;
		memcpy(r->csw, k->csw, sizeof(r->csw));
		return;
	}
	/* the clients' switches per connection, weighted by their counts
	 * (before the counts below add up) */
	{
		const struct bench_stat *ea = bench_step(r, "established"), *eb = bench_step(k, "established");
		double wa = ea ? (double)ea->n : 1, wb = eb ? (double)eb->n : 1;

		for (int s = 0; s < BENCH_CSW_SIDES; s++) {
			struct bench_csw *a = &r->csw[s];
			const struct bench_csw *b = &k->csw[s];

			if (!b->valid)
				continue;
			if (!a->valid) {
				*a = *b;
				continue;
			}
			a->wake = (a->wake * wa + b->wake * wb) / (wa + wb);
			a->preempt = (a->preempt * wa + b->preempt * wb) / (wa + wb);
			a->cpu_us = (a->cpu_us * wa + b->cpu_us * wb) / (wa + wb);
		}
	}
	for (int i = 0; i < k->nsteps; i++) {
		const struct bench_stat *b = &k->steps[i];
		struct bench_stat *a = NULL;
		for (int j = 0; j < r->nsteps; j++)
			if (!strcmp(r->steps[j].name, b->name))
				a = &r->steps[j];
		if (!a || !b->n)
			continue;
		double wa = (double)a->n, wb = (double)b->n;
		a->p50 = (a->p50 * wa + b->p50 * wb) / (wa + wb);
		a->p99 = (a->p99 * wa + b->p99 * wb) / (wa + wb);
		a->min = a->min < b->min ? a->min : b->min;
		a->max = a->max > b->max ? a->max : b->max;
		a->total_us = a->total_us > b->total_us ? a->total_us : b->total_us;
		a->n += b->n;
		a->valid = 1;
	}
	r->heap_per_conn = (r->heap_per_conn + k->heap_per_conn) / 2;
}
