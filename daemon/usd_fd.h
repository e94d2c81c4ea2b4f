/*
 * usd_fd.h - the file descriptors clients pass to uscmd (SCM_RIGHTS).
 * Apart from usd_int.h so that the request decoder's fuzz target
 * (tests/fuzz/fuzz_usp_request.c) runs the same code on every kind of fd.
 */
#ifndef USCM_DAEMON_USD_FD_H
#define USCM_DAEMON_USD_FD_H

#include <stdint.h>
#include <sys/types.h>

/* Whether fd may be a client's event channel: an AF_UNIX SOCK_SEQPACKET
 * socket, connected (not listening), whose peer (SO_PEERCRED: the process
 * that made the pair, or the server it connected to) has uid. uscmd
 * writes events into it as root, so anything else would make root write
 * bytes of the client's choosing, with root's SCM_CREDENTIALS, to a
 * third party. 0, EBADF (not a socket: no fd, a file, a pipe, an
 * eventfd) or EINVAL (another kind of socket, or another uid's peer). */
int usd_chan_fd_check(int fd, uid_t uid);

/* A HELLO's fd: the client's NETLINK_ROUTE socket, which names its network
 * namespace (lib/cma_netns.c). 0, EPROTO (none), EINVAL (anything else). */
int usd_route_fd_check(int fd);

/* The fd a request carried (-1: none), once usp_check_request answered
 * check_err for a frame of op: the fd the request keeps (a well-formed
 * USP_CHAN_CREATE's that usd_chan_fd_check accepts, a well-formed
 * USP_HELLO's that usd_route_fd_check accepts), or -1 with the fd closed.
 * *chan_err: why a well-formed USP_CHAN_CREATE gets no channel (EBADF,
 * EINVAL) or a USP_HELLO no namespace (EPROTO, EINVAL), else 0. */
int usd_req_fd(int check_err, uint16_t op, int fd, uid_t uid, int *chan_err);

#endif
