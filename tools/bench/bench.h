/*
 * uscm-bench internals: the roles a run is made of (each a process of its
 * own: uscm's rdma_cm client and server on two sim nodes, the TCP loopback
 * baseline's client and server, two umad endpoints), the per-step figures
 * they hand back, and the report (table, CSV, gnuplot).
 *
 * A role writes its figures to stdout as lines the parent parses
 * ("step NAME N TOTAL_US MIN P50 P99 MAX", "kv KEY VALUE"); progress and
 * errors go to stderr.
 */
#ifndef USCM_BENCH_H
#define USCM_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Microseconds on CLOCK_MONOTONIC. */
double bench_now_us(void);

/* Per-connection latencies of one step, in µs. */
struct bench_lat {
	double *v;
	size_t n;
};

struct bench_stat {
	char name[32];
	size_t n;
	double total_us; /* wall time of the step for all connections */
	double min, p50, p99, max;
	int valid;
};

/* Sorts l->v and fills s (name, n, percentiles); total_us as given. */
void bench_stat_of(struct bench_stat *s, const char *name, struct bench_lat *l, double total_us);
void bench_stat_emit(FILE *f, const struct bench_stat *s);
void bench_kv_emit(FILE *f, const char *key, double v);

/* Progress on stderr, at most every 500 ms, when stderr is wanted. */
void bench_progress(const char *what, size_t done, size_t n);

/* Heap bytes in use (mallinfo2: arenas + mmapped chunks). */
double bench_heap_bytes(void);

/* Raises RLIMIT_NOFILE to its hard limit. */
void bench_raise_nofile(void);

/* Roles (tools/bench/bench_*.c); argv after the role name; 0 = success. */
struct bench_opts {
	size_t n;        /* connections */
	size_t window;   /* at most this many connections in flight (0: n) */
	int port;        /* server port (TCP: 0 = the server picks one) */
	int no_qp;       /* connections without QPs (rdma_connect with qp_num) */
	const char *dst; /* server address */
	const char *src; /* client address (its sim node's name address) */
	int quiet;
};
int bench_cm_server(const struct bench_opts *o);
int bench_cm_client(const struct bench_opts *o);
int bench_tcp_server(const struct bench_opts *o);
int bench_tcp_client(const struct bench_opts *o);
int bench_mad_echo(const struct bench_opts *o);
int bench_mad_ping(const struct bench_opts *o);
int bench_udp_echo(const struct bench_opts *o);
int bench_udp_ping(const struct bench_opts *o);
int bench_qp_loop(const struct bench_opts *o); /* bench_qp.c: the sim's QP cost */

/* Context switches (tools/bench/bench_csw.c): a sample of a process's
 * counters; per connection once two samples are subtracted. */
struct bench_csw {
	double wake;    /* voluntary: blocked, then woken */
	double preempt; /* involuntary */
	double cpu_us;  /* CPU time, every thread: user + system */
	int valid;
};
enum { BENCH_CSW_CLIENT, BENCH_CSW_SERVER, BENCH_CSW_CLIENT_USCMD, BENCH_CSW_SERVER_USCMD,
       BENCH_CSW_SIDES };
void bench_csw_self(struct bench_csw *c);   /* this process, every thread */
void bench_csw_daemon(struct bench_csw *c); /* its uscmd (daemon mode), else invalid */
/* "kv csw_SIDE_wake|preempt V" lines: (b - a) / n. */
void bench_csw_emit(FILE *f, int side, const struct bench_csw *a, const struct bench_csw *b, size_t n);
/* "kv cpu_ROLE_us V": CPU per item ((b - a) / n) of
 * an echo/ping pair (the floor's and the MAD round trip's CPU). */
void bench_cpu_emit(FILE *f, const char *role, const struct bench_csw *a, const struct bench_csw *b, size_t n);

/* One measured run of N connections (uscm or TCP), as parsed back. */
/* Round trips the UDP and MAD ping-pongs make before they measure, and the
 * echoes answer uncounted: the first ones pay for lazy binding, cold
 * caches and the sim's first routing lookups, which in a short run (the
 * tests' 20) made a round trip's CPU time look ten times what it is. */
#define BENCH_WARMUP 16

#define BENCH_MAX_STEPS 12
struct bench_run {
	const char *what; /* "uscm" / "tcp" */
	size_t n, window;
	struct bench_stat steps[BENCH_MAX_STEPS];
	int nsteps;
	double heap_per_conn; /* uscm: bytes per established connection, verbs excluded */
	double sa_queries;    /* uscm: SA queries during the run (SA's own counter) */
	double udp_drops;     /* uscm: datagrams the host's UDP dropped at a full receive
			       * buffer during the run (MADs lost), -1 unknown */
	struct bench_csw csw[BENCH_CSW_SIDES]; /* per connection, connect step */
	double cpu_ping_us, cpu_echo_us;       /* echo/ping roles: CPU per round trip */
	int ok;
};
int bench_csw_parse(struct bench_run *r, const char *key, double v);
void bench_csw_print(FILE *f, const struct bench_run *r);
void bench_csw_csv(FILE *f, const struct bench_run *r, const char *mode);
double bench_cpu_total(const struct bench_run *r); /* µs per connection, every side */

const struct bench_stat *bench_step(const struct bench_run *r, const char *name);
/* connections/s of a run: N over the wall time of its setup step. */
double bench_rate(const struct bench_run *r);
/* Parses one role output line into r; returns 1 when it was a figure. */
int bench_parse_line(struct bench_run *r, const char *line);

/* Folds one client's figures into a run of several clients. */
void bench_merge_run(struct bench_run *r, const struct bench_run *k);

void bench_print_run(FILE *f, const struct bench_run *r);
void bench_write_plot(const char *png, const struct bench_run *u, const struct bench_run *t, int nn);
void bench_csv_header(FILE *f);
void bench_csv_run(FILE *f, const struct bench_run *r, const char *mode);

#endif
