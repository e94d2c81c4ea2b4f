/*
 * The calls this phase does not implement exist and fail honestly: -1 (or
 * the type's -1) with errno ENOSYS: datagram rsockets (README.md, "Not
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

Test(enosys, rsockets_datagram)
{
	/* SOCK_STREAM rsockets work (test_lib_rsocket.c); SOCK_DGRAM (UD,
	 * what udpong uses) is not implemented */
	NOSYS(rsocket(AF_INET, SOCK_DGRAM, 0));
	NOSYS(rsocket(AF_INET6, SOCK_DGRAM, IPPROTO_UDP));
}
