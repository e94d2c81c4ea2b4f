/*
 * The calls this phase does not implement exist and fail honestly: -1 (or
 * the type's -1) with errno ENOSYS: every rsockets call (README.md, "Not
 * done yet"). No fabric needed.
 */
#include <fcntl.h>
#include <sys/mman.h>

#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "libtest.h"

#define NOSYS(call)                                                              \
	do {                                                                     \
		errno = 0;                                                       \
		long r_ = (long)(call);                                          \
		cr_expect_eq(r_, -1L, #call " returned %ld", r_);                \
		cr_expect_eq(errno, ENOSYS, #call ": errno %d (%s)", errno, strerror(errno)); \
	} while (0)

Test(enosys, rsockets)
{
	char buf[16] = "x";
	struct sockaddr_in sin = lt_sin("127.0.0.1", 7471);
	socklen_t len = sizeof(sin);
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	fd_set rfds;
	struct timeval tv = { 0, 0 };
	int v = 1;

	FD_ZERO(&rfds);
	NOSYS(rsocket(AF_INET, SOCK_STREAM, 0));
	NOSYS(rbind(3, (struct sockaddr *)&sin, len));
	NOSYS(rlisten(3, 1));
	NOSYS(raccept(3, (struct sockaddr *)&sin, &len));
	NOSYS(rconnect(3, (struct sockaddr *)&sin, len));
	NOSYS(rshutdown(3, SHUT_RDWR));
	NOSYS(rclose(3));
	NOSYS(rrecv(3, buf, sizeof(buf), 0));
	NOSYS(rrecvfrom(3, buf, sizeof(buf), 0, (struct sockaddr *)&sin, &len));
	NOSYS(rrecvmsg(3, &msg, 0));
	NOSYS(rsend(3, buf, sizeof(buf), 0));
	NOSYS(rsendto(3, buf, sizeof(buf), 0, (struct sockaddr *)&sin, len));
	NOSYS(rsendmsg(3, &msg, 0));
	NOSYS(rread(3, buf, sizeof(buf)));
	NOSYS(rreadv(3, &iov, 1));
	NOSYS(rwrite(3, buf, sizeof(buf)));
	NOSYS(rwritev(3, &iov, 1));
	NOSYS(rpoll(&pfd, 1, 0));
	NOSYS(rselect(1, &rfds, NULL, NULL, &tv));
	NOSYS(rgetpeername(3, (struct sockaddr *)&sin, &len));
	NOSYS(rgetsockname(3, (struct sockaddr *)&sin, &len));
	NOSYS(rsetsockopt(3, SOL_SOCKET, SO_REUSEADDR, &v, sizeof(v)));
	NOSYS(rgetsockopt(3, SOL_SOCKET, SO_REUSEADDR, &v, &len));
	NOSYS(rfcntl(3, F_GETFL));
	NOSYS(riomap(3, buf, sizeof(buf), PROT_WRITE, 0, -1));
	NOSYS(riounmap(3, buf, sizeof(buf)));
	errno = 0;
	cr_expect_eq(riowrite(3, buf, sizeof(buf), 0, 0), (size_t)-1);
	cr_expect_eq(errno, ENOSYS);
}
