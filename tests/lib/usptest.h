/*
 * usptest.h - uscmd's request protocol (lib/usp_proto.h) spoken by hand, as
 * a hostile local process would: a connection to a node's daemon, raw
 * frames with an fd, well-formed requests, the HELLO and a channel. No
 * Criterion asserts: forked children use them too. Header-only, static.
 */
#ifndef USCM_TESTS_LIB_USPTEST_H
#define USCM_TESTS_LIB_USPTEST_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/netlink.h>

#include "lib/usp_proto.h"

/* A connection to node's uscmd (the fabric's USCM_SIM_DIR), or -1/errno. */
static inline int ut_connect(int node)
{
	struct sockaddr_un sa;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), e;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/node%d/uscmd.sock", getenv("USCM_SIM_DIR"), node);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* Sends n raw bytes (and fd_pass, -1: none); the reply's error (-1: no
 * reply within 10 s, or the daemon closed the connection) and up to
 * replen bytes of its body in rep (the rest zeroed). */
static inline int ut_xfer(int fd, const void *buf, size_t n, int fd_pass, void *rep, size_t replen)
{
	static uint8_t in[USP_MAX_REPLY];
	struct usp_reply r;
	struct msghdr mh;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = n };
	union {
		char c[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	ssize_t k;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fd_pass >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.c;
		mh.msg_controllen = sizeof(u.c);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd_pass, sizeof(int));
	}
	if (sendmsg(fd, &mh, MSG_NOSIGNAL) != (ssize_t)n)
		return -1;
	/* a daemon that stops answering fails the test, not hangs it */
	if (poll(&pf, 1, 10000) != 1)
		return -1;
	k = recv(fd, in, sizeof(in), 0);
	if (k < (ssize_t)sizeof(r))
		return -1;
	memcpy(&r, in, sizeof(r));
	if (rep && replen) {
		size_t got = (size_t)k - sizeof(r);

		memset(rep, 0, replen);
		memcpy(rep, in + sizeof(r), got < replen ? got : replen);
	}
	return r.err;
}

/* A well-formed request: op for id, body of blen bytes (at most
 * USP_MAX_REQUEST in all, else -1). */
static inline int ut_req(int fd, uint16_t op, uint32_t id, const void *body, size_t blen, int fd_pass,
			 void *rep, size_t replen)
{
	uint8_t f[USP_MAX_REQUEST];
	struct usp_hdr h;

	if (sizeof(h) + blen > sizeof(f))
		return -1;
	usp_hdr_init(&h, op, sizeof(h) + blen, 7, id);
	memcpy(f, &h, sizeof(h));
	if (blen)
		memcpy(f + sizeof(h), body, blen);
	return ut_xfer(fd, f, sizeof(h) + blen, fd_pass, rep, replen);
}

/* USP_HELLO passing fd_pass (-1: none): its error. */
static inline int ut_hello_with(int fd, int fd_pass)
{
	struct usp_hello b = { .version = USP_VERSION, .pid = (uint32_t)getpid() };
	struct usp_hello_rep r;

	return ut_req(fd, USP_HELLO, 0, &b, sizeof(b), fd_pass, &r, sizeof(r));
}

/* The HELLO the library sends: with a route socket of our namespace. */
static inline int ut_hello(int fd)
{
	int nl = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE), e;

	if (nl < 0)
		return errno;
	e = ut_hello_with(fd, nl);
	close(nl);
	return e;
}

/* A channel: a socketpair, one end to the daemon, ours in *mine. The
 * request's error (0: *chan is the channel). */
static inline int ut_chan(int fd, uint32_t *chan, int *mine)
{
	int sv[2], err;
	struct usp_chan r = { 0 };

	*chan = 0;
	*mine = -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return errno;
	err = ut_req(fd, USP_CHAN_CREATE, 0, NULL, 0, sv[1], &r, sizeof(r));
	close(sv[1]);
	if (err) {
		close(sv[0]);
		return err;
	}
	*mine = sv[0];
	*chan = r.chan;
	return 0;
}

#endif
