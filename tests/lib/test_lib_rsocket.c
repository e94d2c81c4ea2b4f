/*
 * rsockets (lib/rs_*.c) in-process against the simulated fabric: the API's
 * errno behaviour (bad descriptors, lengths, states, options), a stream
 * echo through every send/receive call, shutdown in each direction,
 * non-blocking connect / EAGAIN / rpoll / rselect, a refused connect, and
 * hostile peers (an rdma_cm program that speaks the rsockets connection
 * format, then breaks the protocol: the rsocket is torn down with
 * ECONNRESET, it does not crash or hang); 100 connected pairs at once,
 * the peer killed mid-transfer, SHUT_RD / SHUT_RDWR. The server is a forked child on
 * node 2; the test is node 1.
 */
#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/mman.h>

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "libtest.h"

#define PORT 18515

static void teardown(void)
{
	lt_fabric_stop();
}

TestSuite(rsocket, .fini = teardown, .timeout = 60);

#define EXPECT_ERR(call, e)                                                                \
	do {                                                                               \
		errno = 0;                                                                 \
		long r_ = (long)(call);                                                    \
		cr_expect_eq(r_, -1L, #call " returned %ld", r_);                          \
		cr_expect_eq(errno, (e), #call ": errno %d (%s), wanted %d", errno,        \
			     strerror(errno), (e));                                         \
	} while (0)

/* ---- the server child ---- */

enum { SRV_ECHO, SRV_HOLD, SRV_HOSTILE_OP, SRV_HOSTILE_OVERRUN, SRV_BAD_VERSION, SRV_SLEEP, SRV_MANY, SRV_DIE_RECV, SRV_DIE_SEND };

#define NPAIRS 100
#define PIECE 4096

static int srv_listen(int port)
{
	struct sockaddr_in sin = lt_sin("127.10.0.2", (uint16_t)port);
	int v = 1, l = rsocket(AF_INET, SOCK_STREAM, 0);

	LT_CK(l >= 0);
	LT_CK(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v)) == 0);
	LT_CK(rbind(l, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	LT_CK(rlisten(l, 4) == 0);
	return l;
}

/* echo until EOF, then say "bye" and close */
static void srv_echo(int s)
{
	char buf[70000];
	ssize_t n;

	while ((n = rrecv(s, buf, sizeof(buf), 0)) > 0) {
		ssize_t off = 0;
		while (off < n) {
			ssize_t w = rsend(s, buf + off, (size_t)(n - off), 0);
			LT_CK(w > 0);
			off += w;
		}
	}
	LT_CK(n == 0);
	LT_CK(rsend(s, "bye", 3, 0) == 3);
	LT_CK(rshutdown(s, SHUT_RDWR) == 0);
	LT_CK(rclose(s) == 0);
}

static void server(int mode, struct lt_pipes *p)
{
	int l, s;
	char c;

	lt_node(2);
	l = srv_listen(PORT);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	if (mode == SRV_MANY) {
		/* NPAIRS connections open at once: accept them all, then
		 * echo one piece on each, in reverse order */
		static int ss[NPAIRS];
		char buf[PIECE];

		for (int i = 0; i < NPAIRS; i++) {
			ss[i] = raccept(l, NULL, NULL);
			LT_CK(ss[i] >= 0);
		}
		for (int i = NPAIRS - 1; i >= 0; i--) {
			LT_CK(rrecv(ss[i], buf, PIECE, MSG_WAITALL) == PIECE);
			LT_CK(rsend(ss[i], buf, PIECE, 0) == PIECE);
		}
		for (int i = 0; i < NPAIRS; i++) {
			LT_CK(rrecv(ss[i], buf, 1, 0) == 0);
			LT_CK(rclose(ss[i]) == 0);
		}
		rclose(l);
		LT_CK(read(p->go[0], &c, 1) >= 0);
		return;
	}
	s = raccept(l, NULL, NULL);
	LT_CK(s >= 0);
	if (mode == SRV_DIE_RECV || mode == SRV_DIE_SEND) {
		/* mid-transfer (1 MiB moved), the process dies as by kill -9 */
		static char buf[65536];
		size_t moved = 0;

		while (moved < (1u << 20)) {
			ssize_t n = mode == SRV_DIE_RECV ? rrecv(s, buf, sizeof(buf), 0)
							 : rsend(s, buf, sizeof(buf), 0);
			LT_CK(n > 0);
			moved += (size_t)n;
		}
		raise(SIGKILL);
	}
	if (mode == SRV_ECHO) {
		srv_echo(s);
	} else if (mode == SRV_SLEEP) {
		/* connected, then killed by the test */
		LT_CK(write(p->ready[1], "a", 1) == 1);
		for (;;)
			pause();
	} else if (mode == SRV_HOLD) {
		/* read nothing until told: the client's sends fill up */
		char buf[65536];
		ssize_t n;
		LT_CK(read(p->go[0], &c, 1) == 1);
		while ((n = rrecv(s, buf, sizeof(buf), 0)) > 0)
			;
		LT_CK(n == 0);
		rclose(s);
	}
	rclose(l);
	LT_CK(read(p->go[0], &c, 1) >= 0);
}

static int cli_connect(int port)
{
	struct sockaddr_in sin = lt_sin("127.10.0.2", (uint16_t)port);
	int s = rsocket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(s, 0, "rsocket: %s", strerror(errno));
	cr_assert_eq(rconnect(s, (struct sockaddr *)&sin, sizeof(sin)), 0, "rconnect: %s",
		     strerror(errno));
	return s;
}

static void recv_all(int s, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = rrecv(s, (char *)buf + got, len - got, 0);
		cr_assert_gt(n, 0, "rrecv: %zd %s", n, strerror(errno));
		got += (size_t)n;
	}
}

/* ---- tests ---- */

Test(rsocket, errno_without_a_connection)
{
	char buf[16] = "x";
	struct sockaddr_in sin = lt_sin("127.10.0.1", PORT);
	socklen_t len = sizeof(sin);
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	int v = 1, s;

	lt_fabric_start("ib", 2);
	lt_node(1);
	/* not an rsocket */
	EXPECT_ERR(rbind(1000, (struct sockaddr *)&sin, len), EBADF);
	EXPECT_ERR(rlisten(1000, 1), EBADF);
	EXPECT_ERR(raccept(1000, NULL, NULL), EBADF);
	EXPECT_ERR(rconnect(1000, (struct sockaddr *)&sin, len), EBADF);
	EXPECT_ERR(rshutdown(1000, SHUT_RDWR), EBADF);
	EXPECT_ERR(rclose(1000), EBADF);
	EXPECT_ERR(rclose(-1), EBADF);
	EXPECT_ERR(rsend(1000, buf, 1, 0), EBADF);
	EXPECT_ERR(rrecv(1000, buf, 1, 0), EBADF);
	EXPECT_ERR(rsendmsg(1000, &msg, 0), EBADF);
	EXPECT_ERR(rrecvmsg(1000, &msg, 0), EBADF);
	EXPECT_ERR(rwritev(1000, &iov, 1), EBADF);
	EXPECT_ERR(rreadv(1000, &iov, 1), EBADF);
	EXPECT_ERR(rgetpeername(1000, (struct sockaddr *)&sin, &len), EBADF);
	EXPECT_ERR(rgetsockname(1000, (struct sockaddr *)&sin, &len), EBADF);
	EXPECT_ERR(rsetsockopt(1000, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v)), EBADF);
	EXPECT_ERR(rgetsockopt(1000, SOL_SOCKET, SO_REUSEADDR, &v, &len), EBADF);
	EXPECT_ERR(rfcntl(1000, F_GETFL), EBADF);
	EXPECT_ERR(riomap(1000, buf, sizeof(buf), PROT_WRITE, 0, -1), EBADF);
	EXPECT_ERR(riounmap(1000, buf, sizeof(buf)), EBADF);
	errno = 0;
	cr_expect_eq(riowrite(1000, buf, 1, 0, 0), (size_t)-1);
	cr_expect_eq(errno, EBADF);

	/* bad arguments to rsocket */
	EXPECT_ERR(rsocket(AF_UNIX, SOCK_STREAM, 0), EAFNOSUPPORT);
	EXPECT_ERR(rsocket(AF_INET, SOCK_RAW, 0), EINVAL);
	EXPECT_ERR(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
	EXPECT_ERR(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP), EPROTONOSUPPORT);

	s = rsocket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(s, 0);
	/* wrong state */
	EXPECT_ERR(rsend(s, buf, 1, 0), ENOTCONN);
	EXPECT_ERR(rrecv(s, buf, 1, 0), ENOTCONN);
	EXPECT_ERR(rshutdown(s, SHUT_RDWR), ENOTCONN);
	EXPECT_ERR(rgetpeername(s, (struct sockaddr *)&sin, &len), ENOTCONN);
	EXPECT_ERR(raccept(s, NULL, NULL), EINVAL);
	EXPECT_ERR(riomap(s, buf, sizeof(buf), PROT_WRITE, 0, -1), EINVAL);
	/* bad arguments */
	EXPECT_ERR(rbind(s, NULL, len), EFAULT);
	EXPECT_ERR(rbind(s, (struct sockaddr *)&sin, 3), EINVAL);
	EXPECT_ERR(rsend(s, NULL, 5, 0), EFAULT);
	EXPECT_ERR(rwritev(s, &iov, -1), EINVAL);
	EXPECT_ERR(rsetsockopt(s, SOL_SOCKET, SO_REUSEADDR, &v, 1), EINVAL);
	EXPECT_ERR(rsetsockopt(s, SOL_SOCKET, SO_REUSEADDR, NULL, sizeof(v)), EFAULT);
	EXPECT_ERR(rsetsockopt(s, SOL_SOCKET, SO_BROADCAST, &v, sizeof(v)), ENOPROTOOPT);
	EXPECT_ERR(rsetsockopt(s, 12345, 1, &v, sizeof(v)), ENOPROTOOPT);
	EXPECT_ERR(rgetsockopt(s, SOL_RDMA, 99, &v, &len), ENOPROTOOPT);
	EXPECT_ERR(rfcntl(s, F_DUPFD, 0), EINVAL);

	/* options before the connection */
	len = sizeof(v);
	v = 4096;
	cr_expect_eq(rsetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v)), 0);
	cr_expect_eq(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
	cr_expect_eq(v, 8192); /* doubled, as librdmacm and Linux do */
	v = 1;
	cr_expect_eq(rsetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, sizeof(v)), 0);
	v = 0;
	cr_expect_eq(rgetsockopt(s, IPPROTO_TCP, TCP_NODELAY, &v, &len), 0);
	cr_expect_eq(v, 1);
	v = 100;
	cr_expect_eq(rsetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, sizeof(v)), 0);
	cr_expect_eq(rgetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, &len), 0);
	cr_expect_eq(v, 100);
	v = 0;
	cr_expect_eq(rgetsockopt(s, SOL_RDMA, RDMA_INLINE, &v, &len), 0);
	cr_expect_eq(v, 64); /* librdmacm's default */
	struct linger lg = { 1, 5 };
	cr_expect_eq(rsetsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	memset(&lg, 0, sizeof(lg));
	len = sizeof(lg);
	cr_expect_eq(rgetsockopt(s, SOL_SOCKET, SO_LINGER, &lg, &len), 0);
	cr_expect(lg.l_onoff == 1 && lg.l_linger == 5);
	len = sizeof(v);
	cr_expect_eq(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len), 0);
	cr_expect_eq(v, 0);
	cr_expect_eq(rfcntl(s, F_GETFL) & O_NONBLOCK, 0);
	cr_expect_eq(rfcntl(s, F_SETFL, O_NONBLOCK), 0);
	cr_expect_eq(rfcntl(s, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	cr_expect_eq(rclose(s), 0);
	EXPECT_ERR(rclose(s), EBADF);
}

Test(rsocket, echo_every_call_and_shutdown)
{
	struct lt_pipes p;
	pid_t pid = 0;
	static char out[300000], in[300000];
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int s;

	lt_fabric_start("ib", 2);
	pid = lt_spawn(server, SRV_ECHO, &p);
	lt_node(1);
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (char)(i * 7 + (i >> 9));
	s = cli_connect(PORT);
	EXPECT_ERR(rconnect(s, (struct sockaddr *)&a, sizeof(a)), EISCONN);
	cr_expect_eq(rgetpeername(s, (struct sockaddr *)&a, &len), 0);
	cr_expect_eq(a.sin_port, htons(PORT));
	cr_expect_eq(a.sin_addr.s_addr, lt_sin("127.10.0.2", 0).sin_addr.s_addr);
	len = sizeof(a);
	cr_expect_eq(rgetsockname(s, (struct sockaddr *)&a, &len), 0);
	cr_expect_eq(a.sin_addr.s_addr, lt_sin("127.10.0.1", 0).sin_addr.s_addr);

	/* rsend / rrecv, 300 kB in pieces the echo can always hold (both
	 * sides send: pieces larger than the buffers could deadlock, as
	 * with TCP): flow control over many credit and buffer grants */
	for (size_t off = 0; off < sizeof(out); off += 30000) {
		cr_assert_eq(rsend(s, out + off, 30000, 0), 30000);
		recv_all(s, in + off, 30000);
	}
	cr_expect(!memcmp(in, out, sizeof(out)), "rsend/rrecv data differs");

	/* rwritev / rreadv with several pieces */
	struct iovec wv[3] = { { out, 10 }, { out + 10, 5000 }, { out + 5010, 1 } };
	cr_expect_eq(rwritev(s, wv, 3), 5011);
	memset(in, 0, 5011);
	struct iovec rv[2] = { { in, 3 }, { in + 3, 5008 } };
	size_t got = 0;
	while (got < 5011) {
		ssize_t n = rreadv(s, rv, 2);
		cr_assert_gt(n, 0);
		got += (size_t)n;
		/* rebuild the vector over the rest */
		rv[0].iov_base = in + got;
		rv[0].iov_len = 5011 - got;
		rv[1].iov_len = 0;
	}
	cr_expect(!memcmp(in, out, 5011));

	/* rsendmsg / rrecvmsg, MSG_PEEK, MSG_WAITALL, rwrite / rread */
	struct iovec mv = { out, 100 };
	struct msghdr m = { .msg_iov = &mv, .msg_iovlen = 1 };
	cr_expect_eq(rsendmsg(s, &m, 0), 100);
	struct iovec iv = { in, 100 };
	struct msghdr im = { .msg_iov = &iv, .msg_iovlen = 1 };
	char pk[10];
	cr_expect_eq(rrecv(s, pk, sizeof(pk), MSG_PEEK | MSG_WAITALL), 10);
	cr_expect(!memcmp(pk, out, 10));
	cr_expect_eq(rrecvmsg(s, &im, MSG_WAITALL), 100);
	cr_expect(!memcmp(in, out, 100));
	cr_expect_eq(rwrite(s, out, 7), 7);
	cr_expect_eq(rrecv(s, in, 7, MSG_WAITALL), 7);
	cr_expect_eq(rsend(s, out, 0, 0), 0);

	/* rpoll: nothing to read, writable */
	struct pollfd pf = { s, POLLIN | POLLOUT, 0 };
	cr_expect_eq(rpoll(&pf, 1, 100), 1);
	cr_expect_eq(pf.revents, POLLOUT);
	EXPECT_ERR(rrecv(s, in, 1, MSG_DONTWAIT), EAGAIN);

	/* shutdown of the write side: the peer sees EOF, answers, closes */
	cr_expect_eq(rshutdown(s, SHUT_WR), 0);
	EXPECT_ERR(rsend(s, out, 1, 0), EPIPE);
	cr_expect_eq(rrecv(s, in, 3, MSG_WAITALL), 3);
	cr_expect(!memcmp(in, "bye", 3));
	cr_expect_eq(rrecv(s, in, 1, 0), 0); /* EOF */
	pf.events = POLLIN;
	cr_expect_eq(rpoll(&pf, 1, 1000), 1);
	cr_expect(pf.revents & POLLIN);
	cr_expect_eq(rclose(s), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
}

/* NPAIRS connected pairs at once in one process pair, each carrying its
 * own data (a piece per socket, echoed back in another order) */
Test(rsocket, hundred_pairs_at_once)
{
	struct lt_pipes p;
	pid_t pid;
	static int s[NPAIRS];
	static char out[NPAIRS][PIECE], in[PIECE];

	lt_fabric_start("ib", 2);
	pid = lt_spawn(server, SRV_MANY, &p);
	lt_node(1);
	for (int i = 0; i < NPAIRS; i++)
		s[i] = cli_connect(PORT);
	for (int i = 0; i < NPAIRS; i++) {
		for (int j = 0; j < PIECE; j++)
			out[i][j] = (char)(i * 31 + j * 7 + (j >> 8));
		cr_assert_eq(rsend(s[i], out[i], PIECE, 0), PIECE, "rsend %d: %s", i, strerror(errno));
	}
	for (int i = 0; i < NPAIRS; i++) {
		recv_all(s[i], in, PIECE);
		cr_expect(!memcmp(in, out[i], PIECE), "socket %d got another socket's data", i);
	}
	for (int i = 0; i < NPAIRS; i++)
		cr_expect_eq(rclose(s[i]), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
}

/* the peer process is killed (SIGKILL) in the middle of a transfer: the
 * other side's blocking call fails (or, receiving, sees end of stream in
 * daemon mode, where uscmd disconnects the dead process's connections);
 * it does not hang. Receiving uses SO_KEEPALIVE (1 s): without it an
 * in-process receiver of a dead peer waits, as documented. */
static void peer_death(int mode)
{
	struct lt_pipes p;
	pid_t pid;
	static char buf[65536];
	int s, v = 1;
	struct sockaddr_in sin = lt_sin("127.10.0.2", PORT);
	ssize_t n = 0;
	size_t moved = 0;

	lt_fabric_start("ib", 2);
	pid = lt_spawn(server, mode, &p);
	lt_node(1);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(s, 0);
	cr_expect_eq(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)), 0);
	cr_expect_eq(rsetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof(v)), 0);
	cr_assert_eq(rconnect(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
	uint64_t t0 = lt_now_ms();
	/* far more than the peer moves before it dies */
	while (moved < (64u << 20) && lt_now_ms() - t0 < 60000) {
		n = mode == SRV_DIE_RECV ? rsend(s, buf, sizeof(buf), 0)
					 : rrecv(s, buf, sizeof(buf), 0);
		if (n <= 0)
			break;
		moved += (size_t)n;
	}
	int e = errno;
	/* the peer took 1 MiB before it died / sent 1 MiB (some of it may
	 * still have been in flight) */
	cr_expect_geq(moved, mode == SRV_DIE_RECV ? (size_t)(1u << 20) : 1, "moved %zu", moved);
	cr_expect_lt(moved, (size_t)(64u << 20), "the transfer went on after the peer died");
	cr_expect_lt(lt_now_ms() - t0, 30000, "the error took %llu ms",
		     (unsigned long long)(lt_now_ms() - t0));
	if (mode == SRV_DIE_RECV)
		cr_expect(n < 0 && (e == ECONNRESET || e == EPIPE), "rsend: %zd %s", n, strerror(e));
	else
		cr_expect(n == 0 || (n < 0 && e == ECONNRESET), "rrecv: %zd %s", n, strerror(e));
	int status = 0;
	waitpid(pid, &status, 0);
	cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the peer was not killed");
	cr_expect_eq(rclose(s), 0);
}

Test(rsocket, peer_killed_while_receiving)
{
	peer_death(SRV_DIE_RECV);
}

Test(rsocket, peer_killed_while_sending)
{
	peer_death(SRV_DIE_SEND);
}

/* SHUT_RD, then SHUT_WR: reads end at once (nothing was queued), the
 * write side still carries data to the peer; SHUT_WR then ends the
 * peer's reading (it sees the data, then EOF) */
Test(rsocket, shutdown_read_then_write)
{
	struct lt_pipes p;
	pid_t pid;
	char buf[16];
	int s;

	lt_fabric_start("ib", 2);
	pid = lt_spawn(server, SRV_HOLD, &p);
	lt_node(1);
	s = cli_connect(PORT);
	cr_expect_eq(rshutdown(s, SHUT_RD), 0);
	uint64_t t0 = lt_now_ms();
	cr_expect_eq(rrecv(s, buf, sizeof(buf), 0), 0);
	cr_expect_lt(lt_now_ms() - t0, 1000);
	struct pollfd pf = { s, POLLIN | POLLOUT, 0 };
	cr_expect_eq(rpoll(&pf, 1, 1000), 1);
	cr_expect_eq(pf.revents & (POLLIN | POLLOUT), POLLIN | POLLOUT, "revents %#x", pf.revents);
	cr_expect_eq(rsend(s, "abc", 3, 0), 3);
	cr_assert_eq(write(p.go[1], "g", 1), 1); /* the peer reads: 3 bytes, then EOF */
	cr_expect_eq(rshutdown(s, SHUT_WR), 0);
	EXPECT_ERR(rsend(s, "d", 1, 0), EPIPE);
	cr_expect_eq(rclose(s), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
}

/* SHUT_RDWR: both directions end at once; the peer sees EOF */
Test(rsocket, shutdown_both)
{
	struct lt_pipes p;
	pid_t pid;
	char buf[16];
	int s;

	lt_fabric_start("ib", 2);
	pid = lt_spawn(server, SRV_HOLD, &p);
	lt_node(1);
	s = cli_connect(PORT);
	cr_expect_eq(rsend(s, "abc", 3, 0), 3);
	cr_expect_eq(rshutdown(s, SHUT_RDWR), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	EXPECT_ERR(rsend(s, "d", 1, 0), EPIPE);
	cr_expect_eq(rrecv(s, buf, sizeof(buf), 0), 0);
	cr_expect_eq(rclose(s), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
}

Test(rsocket, nonblocking_connect_eagain_poll_select)
{
	struct lt_pipes p;
	pid_t pid;
	struct sockaddr_in sin = lt_sin("127.10.0.2", PORT);
	static char buf[1 << 20];
	int s, v, n;
	socklen_t len = sizeof(v);

	lt_fabric_start("roce", 2);
	pid = lt_spawn(server, SRV_HOLD, &p);
	lt_node(1);
	s = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	cr_assert_geq(s, 0);
	cr_expect_eq(rfcntl(s, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
	n = rconnect(s, (struct sockaddr *)&sin, sizeof(sin));
	cr_assert(n == 0 || errno == EINPROGRESS, "rconnect: %s", strerror(errno));
	struct pollfd pf = { s, POLLOUT, 0 };
	cr_assert_eq(rpoll(&pf, 1, 5000), 1);
	cr_expect(pf.revents & POLLOUT, "revents 0x%x", pf.revents);
	cr_expect_eq(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len), 0);
	cr_expect_eq(v, 0);
	EXPECT_ERR(rrecv(s, buf, 1, 0), EAGAIN);
	/* fill what the peer lets us send: then EAGAIN */
	size_t sent = 0;
	for (int i = 0; i < 1000; i++) {
		ssize_t w = rsend(s, buf, sizeof(buf), 0);
		if (w < 0) {
			cr_expect_eq(errno, EAGAIN, "rsend: %s", strerror(errno));
			break;
		}
		sent += (size_t)w;
	}
	cr_expect_gt(sent, 0);
	cr_expect_lt(sent, (size_t)1000 * sizeof(buf));
	pf.events = POLLOUT;
	cr_expect_eq(rpoll(&pf, 1, 200), 0); /* not writable while the peer holds */
	fd_set w;
	FD_ZERO(&w);
	FD_SET(s, &w);
	struct timeval tv = { 0, 100000 };
	cr_expect_eq(rselect(s + 1, NULL, &w, NULL, &tv), 0);
	/* the peer reads: writable again */
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	FD_SET(s, &w);
	tv.tv_sec = 5;
	cr_expect_eq(rselect(s + 1, NULL, &w, NULL, &tv), 1);
	cr_expect(FD_ISSET(s, &w));
	cr_expect_eq(rclose(s), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
}

Test(rsocket, refused)
{
	struct lt_pipes p;
	pid_t pid;
	struct sockaddr_in sin = lt_sin("127.10.0.2", PORT + 1); /* nobody listens */
	int s;

	lt_fabric_start("ib", 2);
	pid = lt_spawn(server, SRV_HOLD, &p);
	lt_node(1);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	EXPECT_ERR(rconnect(s, (struct sockaddr *)&sin, sizeof(sin)), ECONNREFUSED);
	EXPECT_ERR(rsend(s, "x", 1, 0), ECONNREFUSED);
	cr_expect_eq(rclose(s), 0);
	/* let the child go: connect for real and close */
	s = cli_connect(PORT);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	cr_expect_eq(rclose(s), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
}

/* ---- hostile peers: rdma_cm + verbs, speaking the rsockets connection
 * format, then breaking the protocol ---- */

struct wsge {
	uint64_t addr;
	uint32_t key, length;
};
struct wconn {
	uint8_t version, flags;
	uint16_t credits;
	uint8_t rsvd[3], iomap;
	struct wsge tsgl, data;
};

static void hostile(int mode, struct lt_pipes *p)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_id *l, *id;
	struct rdma_cm_event *ev;
	struct sockaddr_in sin = lt_sin("127.10.0.2", PORT);
	struct ibv_qp_init_attr qa;
	struct rdma_conn_param cp;
	struct wconn req, rep;
	static char mem[65536];
	struct ibv_mr *mr;
	char c;

	lt_node(2);
	LT_CK((ch = rdma_create_event_channel()));
	LT_CK(rdma_create_id(ch, &l, NULL, RDMA_PS_TCP) == 0);
	LT_CK(rdma_bind_addr(l, (struct sockaddr *)&sin) == 0);
	LT_CK(rdma_listen(l, 1) == 0);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	ev = lt_child_wait(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
	id = ev->id;
	LT_CK(ev->param.conn.private_data_len >= sizeof(req));
	memcpy(&req, ev->param.conn.private_data, sizeof(req));
	rdma_ack_cm_event(ev);
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 16;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	LT_CK(rdma_create_qp(id, NULL, &qa) == 0);
	LT_CK((mr = ibv_reg_mr(id->pd, mem, sizeof(mem),
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)));
	memset(&rep, 0, sizeof(rep));
	rep.version = mode == SRV_BAD_VERSION ? 9 : 1;
	rep.credits = htobe16(16);
	rep.tsgl.addr = htobe64((uintptr_t)mem);
	rep.tsgl.key = htobe32(mr->rkey);
	rep.tsgl.length = htobe32(2);
	rep.data.addr = htobe64((uintptr_t)mem + 4096);
	rep.data.key = htobe32(mr->rkey);
	rep.data.length = htobe32(8192);
	memset(&cp, 0, sizeof(cp));
	cp.private_data = &rep;
	cp.private_data_len = sizeof(rep);
	cp.rnr_retry_count = 7;
	LT_CK(rdma_accept(id, &cp) == 0);
	if (mode == SRV_BAD_VERSION) {
		LT_CK(read(p->go[0], &c, 1) >= 0);
		return;
	}
	ev = lt_child_wait(ch, RDMA_CM_EVENT_ESTABLISHED);
	rdma_ack_cm_event(ev);
	/* one write with immediate into the rsocket's receive buffer */
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sg = { (uintptr_t)mem, 16, mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = be64toh(req.data.addr);
	wr.wr.rdma.rkey = be32toh(req.data.key);
	if (mode == SRV_HOSTILE_OP) {
		wr.imm_data = htobe32((5u << 29) | 16); /* a reserved opcode */
	} else {
		/* DATA of more bytes than the whole receive buffer */
		wr.imm_data = htobe32((0u << 29) | 0x1fffffffu);
	}
	wr.sg_list = &sg;
	wr.num_sge = 1;
	LT_CK(ibv_post_send(id->qp, &wr, &bad) == 0);
	LT_CK(read(p->go[0], &c, 1) >= 0);
}

static void hostile_run(int mode)
{
	struct lt_pipes p;
	pid_t pid;
	char buf[64];
	int s;

	lt_fabric_start("ib", 2);
	pid = lt_spawn(hostile, mode, &p);
	lt_node(1);
	s = cli_connect(PORT);
	/* torn down: an error, not a hang and not data */
	EXPECT_ERR(rrecv(s, buf, sizeof(buf), 0), ECONNRESET);
	EXPECT_ERR(rsend(s, buf, 1, 0), ECONNRESET);
	struct pollfd pf = { s, POLLIN, 0 };
	cr_expect_eq(rpoll(&pf, 1, 1000), 1);
	cr_expect(pf.revents & POLLERR);
	int v = 0;
	socklen_t len = sizeof(v);
	cr_expect_eq(rgetsockopt(s, SOL_SOCKET, SO_ERROR, &v, &len), 0);
	cr_expect_eq(v, ECONNRESET);
	cr_expect_eq(rclose(s), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
}

Test(rsocket, hostile_reserved_opcode)
{
	hostile_run(SRV_HOSTILE_OP);
}

Test(rsocket, hostile_buffer_overrun)
{
	hostile_run(SRV_HOSTILE_OVERRUN);
}

Test(rsocket, hostile_bad_version_refused)
{
	struct lt_pipes p;
	pid_t pid;
	struct sockaddr_in sin = lt_sin("127.10.0.2", PORT);
	int s;

	lt_fabric_start("ib", 2);
	pid = lt_spawn(hostile, SRV_BAD_VERSION, &p);
	lt_node(1);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	EXPECT_ERR(rconnect(s, (struct sockaddr *)&sin, sizeof(sin)), ECONNREFUSED);
	cr_expect_eq(rclose(s), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
}

/* /etc/rdma/rsocket/... (here a directory of the test's through
 * USCM_RSOCKET_CONF_DIR): read at the first rsocket call of the process
 * (Criterion runs each test in a process of its own); absent files keep
 * librdmacm's defaults. */
Test(rsocket, config_files)
{
	char dir[] = "/tmp/uscm-rsconf.XXXXXX";
	int s, v;
	socklen_t len = sizeof(v);

	lt_fabric_start("ib", 2);
	lt_node(1);
	cr_assert(mkdtemp(dir));
	cr_assert_eq(lt_sh(NULL,
			   "cd %s && echo 128 >inline_default && echo 200 >sqsize_default && "
			   "echo 100 >rqsize_default && echo 65536 >mem_default && "
			   "echo 32768 >wmem_default && echo 100 >iomap_size",
			   dir),
		     0);
	setenv("USCM_RSOCKET_CONF_DIR", dir, 1);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(s, 0);
	cr_expect_eq(rgetsockopt(s, SOL_RDMA, RDMA_INLINE, &v, &len), 0);
	cr_expect_eq(v, 128);
	cr_expect_eq(rgetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, &len), 0);
	cr_expect_eq(v, 200);
	cr_expect_eq(rgetsockopt(s, SOL_RDMA, RDMA_RQSIZE, &v, &len), 0);
	cr_expect_eq(v, 100);
	cr_expect_eq(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
	cr_expect_eq(v, 65536);
	cr_expect_eq(rgetsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, &len), 0);
	cr_expect_eq(v, 32768);
	cr_expect_eq(rgetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &v, &len), 0);
	cr_expect_eq(v, 100);
	rclose(s);
	lt_sh(NULL, "rm -rf %s", dir);
}

Test(rsocket, config_defaults)
{
	int s, v;
	socklen_t len = sizeof(v);

	lt_fabric_start("ib", 2);
	lt_node(1);
	setenv("USCM_RSOCKET_CONF_DIR", "/nonexistent", 1);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(s, 0);
	cr_expect_eq(rgetsockopt(s, SOL_RDMA, RDMA_SQSIZE, &v, &len), 0);
	cr_expect_eq(v, 384);
	cr_expect_eq(rgetsockopt(s, SOL_RDMA, RDMA_RQSIZE, &v, &len), 0);
	cr_expect_eq(v, 384);
	cr_expect_eq(rgetsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len), 0);
	cr_expect_eq(v, 1 << 17);
	cr_expect_eq(rgetsockopt(s, SOL_SOCKET, SO_SNDBUF, &v, &len), 0);
	cr_expect_eq(v, 1 << 17);
	cr_expect_eq(rgetsockopt(s, SOL_RDMA, RDMA_IOMAPSIZE, &v, &len), 0);
	cr_expect_eq(v, 0);
	rclose(s);
}

/* riomap / riowrite errors: nothing mapped by the peer, bad arguments */
Test(rsocket, iomap_errors)
{
	struct lt_pipes p;
	pid_t pid;
	char buf[4096];
	int s;

	lt_fabric_start("ib", 2);
	pid = lt_spawn(server, SRV_ECHO, &p);
	lt_node(1);
	s = cli_connect(PORT);
	EXPECT_ERR(riomap(s, NULL, 10, PROT_WRITE, 0, -1), EINVAL);
	EXPECT_ERR(riomap(s, buf, 0, PROT_WRITE, 0, -1), EINVAL);
	EXPECT_ERR(riomap(s, buf, sizeof(buf), PROT_READ, 0, -1), EINVAL);
	/* the peer's iomap table is empty (RDMA_IOMAPSIZE 0): no slot */
	EXPECT_ERR(riomap(s, buf, sizeof(buf), PROT_WRITE, 0, 0), ENOMEM);
	/* a local mapping works and unmaps once */
	cr_expect_eq(riomap(s, buf, sizeof(buf), 0, 0, -1), (off_t)(uintptr_t)buf);
	cr_expect_eq(riounmap(s, buf, sizeof(buf)), 0);
	EXPECT_ERR(riounmap(s, buf, sizeof(buf)), EINVAL);
	errno = 0;
	cr_expect_eq(riowrite(s, buf, 10, 0, 0), (size_t)-1);
	cr_expect_eq(errno, EINVAL);
	cr_expect_eq(rshutdown(s, SHUT_WR), 0);
	cr_expect_eq(rrecv(s, buf, 3, MSG_WAITALL), 3);
	cr_expect_eq(rclose(s), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	lt_reap(pid);
}

/* The peer process dies mid-connection (SIGKILL, in-process mode: no
 * DREQ): with SO_KEEPALIVE (TCP_KEEPIDLE 1 s) a blocked receiver gets
 * ECONNRESET, not a hang; a sender gets it from the RC retries. */
Test(rsocket, peer_death_keepalive)
{
	struct lt_pipes p;
	pid_t pid;
	char buf[4096];
	int s, v = 1;
	struct sockaddr_in sin = lt_sin("127.10.0.2", PORT);

	if (getenv("USCM_TEST_DAEMON") && atoi(getenv("USCM_TEST_DAEMON")))
		tf_deselect("in-process mode only (a daemon disconnects a dead process's connections)");
	lt_fabric_start("ib", 2);
	pid = lt_spawn(server, SRV_SLEEP, &p);
	lt_node(1);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(s, 0);
	cr_expect_eq(rsetsockopt(s, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof(v)), 0);
	cr_expect_eq(rsetsockopt(s, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof(v)), 0);
	cr_assert_eq(rconnect(s, (struct sockaddr *)&sin, sizeof(sin)), 0);
	lt_child_says(&p, 10000, "the child did not accept");
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	uint64_t t0 = lt_now_ms();
	EXPECT_ERR(rrecv(s, buf, sizeof(buf), 0), ECONNRESET);
	cr_expect_lt(lt_now_ms() - t0, 30000);
	EXPECT_ERR(rsend(s, buf, sizeof(buf), 0), ECONNRESET);
	cr_expect_eq(rclose(s), 0);
}

/* ---- datagram rsockets (SOCK_DGRAM over UD, lib/rs_dgram.c) ---- */

/* two datagram rsockets of this process on node 1: the first datagram goes
 * through the UDP side channel, the rest over UD; errno behaviour, source
 * addresses, truncation, MSG_PEEK, connected sockets, rpoll */
Test(rsocket, dgram)
{
	char buf[4096], big[4096];
	struct sockaddr_in a = lt_sin("127.10.0.1", PORT + 7), from, b6;
	struct sockaddr_in6 s6;
	socklen_t fl;
	struct pollfd pf;
	int s1, s2, i, v;

	lt_fabric_start("ib", 2);
	lt_node(1);
	EXPECT_ERR(rsocket(AF_INET, SOCK_DGRAM, IPPROTO_TCP), EPROTONOSUPPORT);
	s1 = rsocket(AF_INET, SOCK_DGRAM, 0);
	s2 = rsocket(AF_INET, SOCK_DGRAM, IPPROTO_UDP);
	cr_assert(s1 >= 0 && s2 >= 0, "rsocket: %s", strerror(errno));
	v = 0;
	fl = sizeof(v);
	cr_expect_eq(rgetsockopt(s1, SOL_SOCKET, SO_TYPE, &v, &fl), 0);
	cr_expect_eq(v, SOCK_DGRAM);
	cr_assert_eq(rbind(s1, (struct sockaddr *)&a, sizeof(a)), 0, "rbind: %s", strerror(errno));
	EXPECT_ERR(rbind(s1, (struct sockaddr *)&a, sizeof(a)), EINVAL);
	EXPECT_ERR(rlisten(s1, 1), EOPNOTSUPP);
	EXPECT_ERR(raccept(s1, NULL, NULL), EOPNOTSUPP);
	/* nothing to receive; no destination; bad arguments */
	EXPECT_ERR(rrecv(s1, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);
	EXPECT_ERR(rsend(s2, "x", 1, 0), EDESTADDRREQ);
	EXPECT_ERR(rsendto(s2, NULL, 5, 0, (struct sockaddr *)&a, sizeof(a)), EFAULT);
	EXPECT_ERR(rsendto(s2, "x", 1, 0, (struct sockaddr *)&a, 4), EINVAL);
	memset(&s6, 0, sizeof(s6));
	s6.sin6_family = AF_INET6;
	EXPECT_ERR(rsendto(s2, "x", 1, 0, (struct sockaddr *)&s6, sizeof(s6)), EAFNOSUPPORT);
	fl = sizeof(b6);
	EXPECT_ERR(rgetpeername(s2, (struct sockaddr *)&b6, &fl), ENOTCONN);

	/* sendto without bind: the socket binds to the RDMA route's source */
	memset(big, 'b', sizeof(big));
	for (i = 0; i < 100; i++)
		buf[i] = (char)i;
	cr_assert_eq(rsendto(s2, buf, 100, 0, (struct sockaddr *)&a, sizeof(a)), 100,
		     "rsendto: %s", strerror(errno));
	fl = sizeof(b6);
	cr_expect_eq(rgetsockname(s2, (struct sockaddr *)&b6, &fl), 0);
	cr_expect_eq(b6.sin_addr.s_addr, a.sin_addr.s_addr, "s2 bound to %08x", b6.sin_addr.s_addr);
	cr_expect_neq(b6.sin_port, 0);
	/* MSG_PEEK keeps it; a short buffer truncates it, the rest is dropped */
	memset(buf, 0, 100);
	cr_expect_eq(rrecv(s1, buf, 100, MSG_PEEK), 100);
	fl = sizeof(from);
	cr_expect_eq(rrecvfrom(s1, buf, 10, 0, (struct sockaddr *)&from, &fl), 10);
	cr_expect_eq(buf[9], 9);
	cr_expect_eq(fl, sizeof(from));
	cr_expect_eq(from.sin_port, b6.sin_port);
	cr_expect_eq(from.sin_addr.s_addr, b6.sin_addr.s_addr);
	EXPECT_ERR(rrecv(s1, buf, sizeof(buf), MSG_DONTWAIT), EAGAIN);

	/* replies and further datagrams: over UD, in order here */
	for (i = 0; i < 50; i++) {
		char c[2] = { (char)i, 0 };

		cr_assert_eq(rsendto(s1, c, 2, 0, (struct sockaddr *)&from, fl), 2, "%d: %s", i,
			     strerror(errno));
		pf.fd = s2;
		pf.events = POLLIN;
		cr_assert_eq(rpoll(&pf, 1, 5000), 1, "rpoll %d", i);
		cr_expect(pf.revents & POLLIN);
		cr_assert_eq(rrecv(s2, c, 2, 0), 2);
		cr_expect_eq(c[0], (char)i);
		cr_assert_eq(rsendto(s2, c, 1, 0, (struct sockaddr *)&a, sizeof(a)), 1);
		cr_assert_eq(rrecv(s1, c, 2, 0), 1);
		cr_expect_eq(c[0], (char)i);
	}
	/* a zero-length datagram; the largest one; one byte more */
	cr_expect_eq(rsendto(s2, buf, 0, 0, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_expect_eq(rrecv(s1, buf, sizeof(buf), 0), 0);
	for (v = 1024; rsendto(s2, big, (size_t)v, 0, (struct sockaddr *)&a, sizeof(a)) == v; v++)
		cr_assert_eq(rrecv(s1, buf, sizeof(buf), 0), v);
	cr_expect_eq(errno, EMSGSIZE, "after %d bytes: %s", v, strerror(errno));
	cr_expect(v - 1 > 1024 && v - 1 <= 2048 - 8, "largest datagram %d", v - 1);

	/* a connected datagram socket: rsend/rrecv, rgetpeername */
	cr_assert_eq(rconnect(s2, (struct sockaddr *)&a, sizeof(a)), 0, "%s", strerror(errno));
	fl = sizeof(b6);
	cr_expect_eq(rgetpeername(s2, (struct sockaddr *)&b6, &fl), 0);
	cr_expect_eq(b6.sin_port, a.sin_port);
	cr_expect_eq(rsend(s2, "hello", 5, 0), 5);
	cr_expect_eq(rrecv(s1, buf, sizeof(buf), 0), 5);
	cr_expect_eq(memcmp(buf, "hello", 5), 0);
	EXPECT_ERR(rsendmsg(s2, &(struct msghdr){ 0 }, 0), EOPNOTSUPP);
	EXPECT_ERR(riomap(s2, buf, 4096, PROT_WRITE, 0, -1), EOPNOTSUPP);
	cr_expect_eq(rclose(s2), 0);
	cr_expect_eq(rclose(s1), 0);
	EXPECT_ERR(rsend(s1, "x", 1, 0), EBADF);
}

/* ---- an accepted socket's number; POLLOUT after a hang-up ---- */

/* connects to the test process (node 1) when told, closes when told */
static void connect_then_close(int mode, struct lt_pipes *p)
{
	struct sockaddr_in sin = lt_sin("127.10.0.1", (uint16_t)(PORT + 20));
	char c;
	int s;

	(void)mode;
	lt_node(2);
	LT_CK(write(p->ready[1], "r", 1) == 1);
	LT_CK(read(p->go[0], &c, 1) == 1);
	s = rsocket(AF_INET, SOCK_STREAM, 0);
	LT_CK(s >= 0);
	LT_CK(rconnect(s, (struct sockaddr *)&sin, sizeof(sin)) == 0);
	LT_CK(read(p->go[0], &c, 1) == 1);
	LT_CK(rclose(s) == 0);
}

/* librspreload (Debian 12's rdma-core v44) opens a placeholder descriptor
 * and then calls raccept; its select() misreports an rsocket numbered
 * below the placeholder (docs/api/rsockets.md). The accepted socket is
 * numbered in raccept, so above every descriptor opened before, even when
 * the request arrived earlier. And once the peer has hung up, a send
 * fails at once: rpoll says POLLOUT (as TCP), and rsend EPIPE. */
Test(rsocket, accepted_number_and_pollout_after_hangup)
{
	struct sockaddr_in sin = lt_sin("127.10.0.1", (uint16_t)(PORT + 20));
	struct lt_pipes p;
	pid_t pid;
	int v = 1, l, s, d;

	lt_fabric_start("ib", 2);
	pid = lt_spawn(connect_then_close, 0, &p);
	lt_node(1);
	l = rsocket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(l, 0);
	cr_assert_eq(rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v)), 0);
	cr_assert_eq(rbind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
	cr_assert_eq(rlisten(l, 4), 0);
	cr_assert_eq(write(p.go[1], "g", 1), 1);
	/* the request is here (in-process: its id and channel too) */
	struct pollfd pf = { l, POLLIN, 0 };
	cr_assert_eq(rpoll(&pf, 1, 20000), 1, "no connection request");
	d = open("/dev/null", O_RDONLY);
	cr_assert_geq(d, 0);
	s = raccept(l, NULL, NULL);
	cr_assert_geq(s, 0, "raccept: %s", strerror(errno));
	cr_expect_gt(s, d, "accepted rsocket %d, opened before it: %d", s, d);
	close(d);
	cr_assert_eq(write(p.go[1], "g", 1), 1); /* the peer closes */
	pf = (struct pollfd){ s, POLLIN, 0 };
	cr_expect_eq(rpoll(&pf, 1, 20000), 1);
	char c;
	cr_expect_eq(rrecv(s, &c, 1, 0), 0);
	pf = (struct pollfd){ s, POLLOUT, 0 };
	cr_expect_eq(rpoll(&pf, 1, 0), 1);
	cr_expect(pf.revents & POLLOUT, "revents %#x", pf.revents);
	EXPECT_ERR(rsend(s, "x", 1, 0), EPIPE);
	cr_expect_eq(rclose(s), 0);
	cr_expect_eq(rclose(l), 0);
	lt_reap(pid);
}
