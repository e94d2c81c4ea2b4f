/*
 * libFuzzer target: uscmd's request decoder (lib/usp_proto.c). Every frame
 * a client sends goes through usp_check_request before the daemon reads a
 * field; the daemon then copies the body into the op's struct
 * (memcpy(&x, body, n - header)), so an accepted frame must fit that struct
 * exactly as the op says. The sizes are derived here again, from the
 * structs, not from the decoder's table.
 *
 * A frame can carry an fd (SCM_RIGHTS): the first input byte picks its
 * kind — none, a regular file, a pipe, an eventfd, a UDP socket, a
 * datagram unix socket connected to a bound one, a seqpacket socketpair
 * end, a stream socket, a listening or an unconnected seqpacket socket —
 * and the second whether the client is of this process's uid. The frame
 * and the fd then go through the daemon's own disposal (daemon/usd_fd.c):
 * only a well-formed USP_CHAN_CREATE keeps an fd, only a seqpacket end
 * whose peer is of the client's uid, and every other fd is closed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <linux/netlink.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/usd_fd.h"
#include "lib/usp_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* (fixed part, whole struct, offset of the count) of each op; count_off
 * (size_t)-1 for ops without a trailing array */
static int expect(uint16_t op, size_t *fixed, size_t *whole, size_t *count_off, size_t *max)
{
	*count_off = (size_t)-1;
	*max = 0;
#define FIX(o, t) case o: *fixed = *whole = sizeof(t); return 0
#define NONE(o) case o: *fixed = *whole = 0; return 0
#define VAR(o, t, arr, cnt, m) \
	case o: *fixed = offsetof(t, arr); *whole = sizeof(t); *count_off = offsetof(t, cnt); *max = m; return 0
	switch (op) {
	FIX(USP_HELLO, struct usp_hello);
	NONE(USP_CHAN_CREATE);
	FIX(USP_CHAN_DESTROY, struct usp_chan);
	FIX(USP_CREATE_ID, struct usp_create_id);
	NONE(USP_DESTROY_ID);
	FIX(USP_MIGRATE_ID, struct usp_chan);
	FIX(USP_BIND, struct usp_addr);
	FIX(USP_RESOLVE_ADDR, struct usp_resolve_addr);
	FIX(USP_RESOLVE_ROUTE, struct usp_int);
	NONE(USP_QUERY);
	VAR(USP_SET_OPTION, struct usp_set_option, optval, optlen, USP_OPT_MAX);
	FIX(USP_INIT_QP_ATTR, struct usp_int);
	VAR(USP_CONNECT, struct usp_conn, pdata, pdata_len, USP_PDATA_MAX);
	FIX(USP_LISTEN, struct usp_int);
	VAR(USP_ACCEPT, struct usp_conn, pdata, pdata_len, USP_PDATA_MAX);
	VAR(USP_REJECT, struct usp_reject, pdata, pdata_len, USP_PDATA_MAX);
	NONE(USP_ESTABLISH);
	FIX(USP_NOTIFY, struct usp_int);
	NONE(USP_DISCONNECT);
	FIX(USP_SET_ECE, struct usp_ece);
	NONE(USP_GET_ECE);
	FIX(USP_JOIN_MC, struct usp_join);
	FIX(USP_LEAVE_MC, struct usp_addr);
	FIX(USP_POST_EVENT, struct usp_post_event);
	NONE(USP_STATS);
	NONE(USP_STATUS);
	VAR(USP_QP_ATTRS, struct usp_conn, pdata, pdata_len, USP_PDATA_MAX);
	FIX(USP_REQUEUE, struct usp_requeue);
	default:
		return -1;
	}
}

enum fd_kind {
	FD_NONE, FD_FILE, FD_PIPE, FD_EVENTFD, FD_UDP, FD_DGRAM_CONNECTED, FD_SEQPACKET_PAIR,
	FD_STREAM, FD_SEQPACKET_LISTENING, FD_SEQPACKET_UNCONNECTED, FD_NETLINK_ROUTE, FD_NETLINK_OTHER,
	FD_KINDS
};

/* An fd of kind k (the ends it needs kept in extra[], -1 when none), or -1. */
static int make_fd(int k, int extra[2])
{
	int sv[2], fd = -1;

	extra[0] = extra[1] = -1;
	switch (k) {
	case FD_FILE:
		return open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	case FD_PIPE:
		if (pipe2(sv, O_CLOEXEC) < 0)
			return -1;
		extra[0] = sv[0];
		return sv[1];
	case FD_EVENTFD:
		return eventfd(0, EFD_CLOEXEC);
	case FD_UDP: {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(9),
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };

		fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd >= 0)
			connect(fd, (struct sockaddr *)&a, sizeof(a));
		return fd;
	}
	case FD_DGRAM_CONNECTED: {
		/* "another local service": a bound datagram socket (abstract
		 * name, gone with the process) and a socket connected to it */
		struct sockaddr_un a;
		socklen_t len;

		memset(&a, 0, sizeof(a));
		a.sun_family = AF_UNIX;
		len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
				  (size_t)snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "uscm-fuzz-%d",
						   (int)getpid()));
		extra[0] = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (extra[0] < 0 || bind(extra[0], (struct sockaddr *)&a, len) < 0)
			return -1;
		fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, len) < 0) {
			close(fd);
			fd = -1;
		}
		return fd;
	}
	case FD_SEQPACKET_PAIR:
	case FD_STREAM:
		if (socketpair(AF_UNIX, (k == FD_STREAM ? SOCK_STREAM : SOCK_SEQPACKET) | SOCK_CLOEXEC, 0,
			       sv) < 0)
			return -1;
		extra[0] = sv[0];
		return sv[1];
	case FD_SEQPACKET_LISTENING:
		fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (fd >= 0) {
			struct sockaddr_un a = { .sun_family = AF_UNIX };

			/* autobind (an abstract name of the kernel's choice) */
			bind(fd, (struct sockaddr *)&a, sizeof(sa_family_t));
			listen(fd, 1);
		}
		return fd;
	case FD_SEQPACKET_UNCONNECTED:
		return socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	case FD_NETLINK_ROUTE: /* what a HELLO carries */
		return socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	case FD_NETLINK_OTHER:
		return socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_KOBJECT_UEVENT);
	default:
		return -1;
	}
}

/* The fd travelled with the frame: the daemon keeps it exactly when the
 * frame is a well-formed USP_CHAN_CREATE and the fd a channel end of the
 * client's uid, or a well-formed USP_HELLO and the fd a route socket, and
 * closes it otherwise. */
static void check_fd(int kind, int same_uid, const uint8_t *f, size_t size, int rc)
{
	int extra[2], fd = make_fd(kind, extra), keep, cerr, want;
	uid_t uid = same_uid ? geteuid() : geteuid() + 1;
	struct usp_hdr h;
	uint16_t op = 0;

	if (size >= sizeof(h)) {
		memcpy(&h, f, sizeof(h));
		op = (uint16_t)(h.op & ~USP_F_NOREPLY);
	}
	if (kind != FD_NONE && fd < 0)
		goto out; /* could not be made here (no room for fds): nothing to check */
	keep = usd_req_fd(rc, op, fd, uid, &cerr);
	want = rc == 0 && ((op == USP_CHAN_CREATE && kind == FD_SEQPACKET_PAIR && same_uid) ||
			   (op == USP_HELLO && kind == FD_NETLINK_ROUTE));
	if (want != (keep >= 0))
		abort();
	if (keep >= 0 && keep != fd)
		abort();
	/* refused: closed, and nothing written into it (its other end reads
	 * nothing) */
	if (keep < 0 && fd >= 0 && fcntl(fd, F_GETFD) != -1)
		abort();
	if (rc == 0 && op == USP_CHAN_CREATE) {
		/* why: EBADF for no fd or not a socket, EINVAL for the wrong socket */
		int sock = kind >= FD_UDP;

		if (keep < 0 && cerr != (sock ? EINVAL : EBADF))
			abort();
	} else if (rc == 0 && op == USP_HELLO) {
		/* EPROTO: no fd; EINVAL: not a route socket */
		if (keep < 0 && cerr != (kind == FD_NONE ? EPROTO : EINVAL))
			abort();
	} else if (cerr) {
		abort();
	}
	/* the far end (the pair's other end, the bound datagram socket) got
	 * nothing: a pipe's read end has no recv */
	if (extra[0] >= 0 && kind != FD_PIPE) {
		char c;

		if (recv(extra[0], &c, 1, MSG_DONTWAIT) > 0)
			abort();
	}
	if (keep >= 0)
		close(keep);
out:
	for (int i = 0; i < 2; i++)
		if (extra[i] >= 0)
			close(extra[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *f;
	struct usp_hdr h;
	size_t fixed, whole, coff, max;
	int rc, kind = FD_NONE, same_uid = 1;

	/* the fd's kind and the client's uid, then the frame */
	if (size >= 2) {
		kind = data[0] % FD_KINDS;
		same_uid = !(data[1] & 1);
		data += 2;
		size -= 2;
	}
	/* a copy of exactly size bytes: ASan catches any read past it */
	f = malloc(size ? size : 1);
	memcpy(f, data, size);
	rc = usp_check_request(f, size);
	check_fd(kind, same_uid, f, size, rc);
	if (rc != 0 && rc != EPROTO && rc != EMSGSIZE && rc != EBADMSG)
		abort();
	if (rc == 0) {
		if (size < sizeof(h))
			abort();
		memcpy(&h, f, sizeof(h));
		/* only the RTU request may carry USP_F_NOREPLY */
		if ((h.op & USP_F_NOREPLY) && h.op != (USP_ESTABLISH | USP_F_NOREPLY))
			abort();
		h.op &= (uint16_t)~USP_F_NOREPLY;
		if (h.ver != USP_VERSION || h.len != size || size > USP_MAX_REQUEST)
			abort();
		if (expect(h.op, &fixed, &whole, &coff, &max) < 0)
			abort();
		if (coff == (size_t)-1) {
			if (size - sizeof(h) != whole)
				abort();
		} else {
			uint32_t count;

			memcpy(&count, f + sizeof(h) + coff, sizeof(count));
			if (count > max || size - sizeof(h) != fixed + count || size - sizeof(h) > whole)
				abort();
		}
		/* what the daemon does next must stay inside its struct */
		{
			uint8_t body[sizeof(struct usp_set_option) + sizeof(struct usp_conn)];

			if (size - sizeof(h) > sizeof(body))
				abort();
			memcpy(body, f + sizeof(h), size - sizeof(h));
		}
		if (strcmp(usp_op_name(h.op), "?") == 0)
			abort();
	}
	free(f);
	return 0;
}
