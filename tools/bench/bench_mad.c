/*
 * uscm-bench roles "mad-echo" and "mad-ping": the fabric's raw MAD round
 * trip, two umad endpoints on two nodes ping-ponging a CM-class MAD (class
 * 0x07 v2, method Send) over QP1 — the floor under a connection, which is
 * REQ → REP → RTU: 1.5 round trips. Both ends ask for the fd to poll
 * (umad_get_fd), as uscm's um_transport does, which on the sim's drop-in
 * puts the port in direct mode — so this is the floor under the library;
 * USCM_SIM_UMAD_DIRECT=0 measures the drop-in's receive-thread path.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/umad.h>

#include "bench.h"

#define QP1_QKEY 0x80010000u

struct mad_buf {
	struct ib_user_mad h;
	uint8_t mad[256];
};

static int open_agent(int *fd)
{
	long mask[16 / sizeof(long)] = { 0 };

	mask[0] = 1L << 0x03; /* method Send */
	if (umad_init() < 0 || (*fd = umad_open_port(NULL, 0)) < 0)
		return -1;
	(void)umad_get_fd(*fd); /* as the library does; umad_recv then waits here */
	return umad_register(*fd, 0x07, 2, 0, mask);
}

static void mad_init(struct mad_buf *b, uint64_t tid)
{
	uint8_t *m = umad_get_mad(b);

	memset(b, 0, sizeof(*b));
	m[0] = 1;
	m[1] = 0x07;
	m[2] = 2;
	m[3] = 0x03;
	for (int i = 0; i < 8; i++)
		m[8 + i] = (uint8_t)(tid >> (56 - 8 * i));
	m[16] = 0xFF; /* an attribute no CM uses: nobody mistakes it for a REQ */
	m[17] = 0x01;
}

int bench_mad_echo(const struct bench_opts *o)
{
	struct mad_buf b;
	int fd, ag, len;

	if ((ag = open_agent(&fd)) < 0) {
		fprintf(stderr, "mad-echo: umad: %s\n", strerror(errno));
		return 1;
	}
	struct bench_csw c0, c1;

	printf("ready\n");
	fflush(stdout);
	bench_csw_self(&c0);
	for (size_t i = 0; !o->n || i < o->n + BENCH_WARMUP; i++) {
		if (i == BENCH_WARMUP)
			bench_csw_self(&c0);
		len = sizeof(b.mad);
		if (umad_recv(fd, &b, &len, 60000) != ag) {
			fprintf(stderr, "mad-echo: recv: %s\n", strerror(errno));
			return 1;
		}
		/* answer where it came from */
		if (umad_send(fd, ag, &b, 256, 0, 0)) {
			fprintf(stderr, "mad-echo: send: %s\n", strerror(errno));
			return 1;
		}
	}
	bench_csw_self(&c1);
	bench_cpu_emit(stdout, "echo", &c0, &c1, o->n);
	umad_close_port(fd);
	return 0;
}

int bench_mad_ping(const struct bench_opts *o)
{
	struct bench_lat lat = { calloc(o->n, sizeof(double)), o->n };
	struct bench_stat s;
	struct mad_buf b;
	int fd, ag, len;
	double t0 = bench_now_us();

	if (!lat.v || (ag = open_agent(&fd)) < 0) {
		fprintf(stderr, "mad-ping: umad: %s\n", strerror(errno));
		return 1;
	}
	struct bench_csw c0, c1;
	for (size_t i = 0; i < o->n + BENCH_WARMUP; i++) {
		if (i == BENCH_WARMUP) {
			bench_csw_self(&c0);
			t0 = bench_now_us();
		}
		double t = bench_now_us();
		mad_init(&b, 0x5553434d00000000ull | i);
		umad_set_addr(&b, o->port /* the peer's LID */, 1, 0, (int)QP1_QKEY);
		if (umad_send(fd, ag, &b, 256, 0, 0)) {
			fprintf(stderr, "mad-ping: send: %s\n", strerror(errno));
			return 1;
		}
		len = sizeof(b.mad);
		if (umad_recv(fd, &b, &len, 5000) != ag) {
			fprintf(stderr, "mad-ping: no answer to MAD %zu: %s\n", i, strerror(errno));
			return 1;
		}
		if (i >= BENCH_WARMUP)
			lat.v[i - BENCH_WARMUP] = bench_now_us() - t;
	}
	bench_csw_self(&c1);
	bench_stat_of(&s, "mad_rtt", &lat, bench_now_us() - t0);
	bench_stat_emit(stdout, &s);
	bench_cpu_emit(stdout, "ping", &c0, &c1, o->n);
	umad_close_port(fd);
	free(lat.v);
	return 0;
}
