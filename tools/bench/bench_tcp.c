#define _GNU_SOURCE
/*
 * uscm-bench roles "tcp-server" and "tcp-client": the TCP loopback baseline
 * in the same harness shape as the rdma_cm run. A connection counts as
 * established when the client has read one byte the server wrote after
 * accept(): connect + accept, as ESTABLISHED after the peer's rdma_accept.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"

int bench_tcp_server(const struct bench_opts *o)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct epoll_event ev, evs[256];
	size_t gone = 0, accepted = 0;
	struct bench_csw s0, s1; /* first accept to the n-th */
	int one = 1, lfd, ep;

	bench_raise_nofile();
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 65535) ||
	    getsockname(lfd, (struct sockaddr *)&a, &al)) {
		perror("tcp-server: listen");
		return 1;
	}
	ep = epoll_create1(0);
	ev.events = EPOLLIN;
	ev.data.fd = lfd;
	epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
	printf("port %d\n", ntohs(a.sin_port));
	fflush(stdout);
	while (!o->n || gone < o->n) {
		int k = epoll_wait(ep, evs, 256, 60000);
		if (k <= 0) {
			perror("tcp-server: epoll_wait");
			return 1;
		}
		for (int i = 0; i < k; i++) {
			int fd = evs[i].data.fd;
			char b;
			if (fd == lfd) {
				int c;
				while ((c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					if (!accepted)
						bench_csw_self(&s0);
					if (++accepted == o->n) {
						bench_csw_self(&s1);
						bench_csw_emit(stdout, BENCH_CSW_SERVER, &s0, &s1, accepted);
					}
					if (write(c, "a", 1) != 1) {
						close(c);
						gone++;
						continue;
					}
					ev.events = EPOLLIN;
					ev.data.fd = c;
					epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
				}
			} else if (read(fd, &b, 1) <= 0) {
				close(fd); /* the client closed: the connection's end */
				gone++;
			}
		}
	}
	return 0;
}

int bench_tcp_client(const struct bench_opts *o)
{
	size_t n = o->n, window = o->window ? o->window : o->n, next = 0, done = 0, inflight = 0;
	int *fds = calloc(n, sizeof(int)), ep;
	double *start = calloc(n, sizeof(double)), t0, t;
	struct bench_lat lat = { calloc(n, sizeof(double)), n }, call = { calloc(n, sizeof(double)), n };
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)o->port) };
	struct epoll_event ev, evs[256];
	struct bench_stat s;

	if (!fds || !start || !lat.v || !call.v)
		return 1;
	bench_raise_nofile();
	inet_pton(AF_INET, o->dst, &a.sin_addr);
	ep = epoll_create1(0);

	t0 = bench_now_us();
	for (size_t i = 0; i < n; i++) {
		t = bench_now_us();
		fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		if (fds[i] < 0) {
			perror("tcp-client: socket");
			return 1;
		}
		lat.v[i] = bench_now_us() - t;
	}
	bench_stat_of(&s, "create_id", &lat, bench_now_us() - t0);
	bench_stat_emit(stdout, &s);

	struct bench_csw s0, s1;
	bench_csw_self(&s0);
	t0 = bench_now_us();
	while (done < n) {
		while (next < n && inflight < window) {
			t = bench_now_us();
			start[next] = t;
			if (connect(fds[next], (struct sockaddr *)&a, sizeof(a)) && errno != EINPROGRESS) {
				perror("tcp-client: connect");
				return 1;
			}
			call.v[next] = bench_now_us() - t;
			ev.events = EPOLLIN;
			ev.data.u64 = next;
			epoll_ctl(ep, EPOLL_CTL_ADD, fds[next], &ev);
			next++;
			inflight++;
		}
		int k = epoll_wait(ep, evs, 256, 60000);
		if (k <= 0) {
			fprintf(stderr, "tcp-client: no connection in 60 s (%zu/%zu)\n", done, n);
			return 1;
		}
		for (int j = 0; j < k; j++) {
			size_t i = evs[j].data.u64;
			char b;
			if (read(fds[i], &b, 1) != 1) {
				perror("tcp-client: read");
				return 1;
			}
			lat.v[i] = bench_now_us() - start[i];
			epoll_ctl(ep, EPOLL_CTL_DEL, fds[i], NULL);
			done++;
			inflight--;
		}
		if (n >= 1000)
			bench_progress("tcp established", done, n);
	}
	bench_stat_of(&s, "established", &lat, bench_now_us() - t0);
	bench_stat_emit(stdout, &s);
	bench_csw_self(&s1);
	bench_csw_emit(stdout, BENCH_CSW_CLIENT, &s0, &s1, n);
	bench_stat_of(&s, "connect", &call, 0);
	for (size_t i = 0; i < n; i++)
		s.total_us += call.v[i];
	bench_stat_emit(stdout, &s);

	lat.n = n;
	t0 = bench_now_us();
	for (size_t i = 0; i < n; i++) {
		t = bench_now_us();
		close(fds[i]);
		lat.v[i] = bench_now_us() - t;
	}
	bench_stat_of(&s, "destroy", &lat, bench_now_us() - t0);
	bench_stat_emit(stdout, &s);
	close(ep);
	free(fds);
	free(start);
	free(lat.v);
	free(call.v);
	return 0;
}
