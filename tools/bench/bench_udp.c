/*
 * uscm-bench roles "udp-echo" and "udp-ping": the physical floor of the
 * simulated fabric, a plain UDP ping-pong between two processes on
 * 127.0.0.1 with a MAD's payload (256 bytes), blocking receives. The sim
 * carries every MAD as one UDP datagram between two processes, so no MAD
 * round trip on it can beat this; the sim's MAD round trip and the setup
 * latency are reported as ratios against it.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "bench.h"

#define UDP_PAYLOAD 256 /* a MAD */

static int udp_socket(struct sockaddr_in *a)
{
	socklen_t al = sizeof(*a);
	struct timeval tv = { 5, 0 };
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)a, sizeof(*a)) || getsockname(fd, (struct sockaddr *)a, &al) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv))) {
		close(fd);
		return -1;
	}
	return fd;
}

int bench_udp_echo(const struct bench_opts *o)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) }, from;
	uint8_t b[UDP_PAYLOAD];
	int fd = udp_socket(&a);

	if (fd < 0) {
		perror("udp-echo: socket");
		return 1;
	}
	struct bench_csw c0, c1;

	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	bench_csw_self(&c0);
	for (size_t i = 0; !o->n || i < o->n + BENCH_WARMUP; i++) {
		if (i == BENCH_WARMUP)
			bench_csw_self(&c0);
		socklen_t fl = sizeof(from);
		ssize_t k = recvfrom(fd, b, sizeof(b), 0, (struct sockaddr *)&from, &fl);

		if (k < 0) {
			perror("udp-echo: recv");
			return 1;
		}
		if (sendto(fd, b, (size_t)k, 0, (struct sockaddr *)&from, fl) != k) {
			perror("udp-echo: send");
			return 1;
		}
	}
	bench_csw_self(&c1);
	bench_cpu_emit(stdout, "echo", &c0, &c1, o->n);
	close(fd);
	return 0;
}

int bench_udp_ping(const struct bench_opts *o)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct bench_lat lat = { calloc(o->n ? o->n : 1, sizeof(double)), o->n };
	struct bench_stat s;
	uint8_t b[UDP_PAYLOAD];
	int fd = udp_socket(&a);
	double t0 = bench_now_us();

	if (fd < 0 || !lat.v) {
		perror("udp-ping: socket");
		return 1;
	}
	struct bench_csw c0, c1;

	memset(b, 0x5a, sizeof(b));
	for (size_t i = 0; i < o->n + BENCH_WARMUP; i++) {
		if (i == BENCH_WARMUP) {
			bench_csw_self(&c0);
			t0 = bench_now_us();
		}
		double t = bench_now_us();

		memcpy(b, &i, sizeof(i));
		if (sendto(fd, b, sizeof(b), 0, (struct sockaddr *)&peer, sizeof(peer)) != (ssize_t)sizeof(b) ||
		    recv(fd, b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
			fprintf(stderr, "udp-ping: round trip %zu: %s\n", i, strerror(errno));
			return 1;
		}
		if (i >= BENCH_WARMUP)
			lat.v[i - BENCH_WARMUP] = bench_now_us() - t;
	}
	bench_csw_self(&c1);
	bench_stat_of(&s, "udp_rtt", &lat, bench_now_us() - t0);
	bench_stat_emit(stdout, &s);
	bench_cpu_emit(stdout, "ping", &c0, &c1, o->n);
	close(fd);
	free(lat.v);
	return 0;
}
