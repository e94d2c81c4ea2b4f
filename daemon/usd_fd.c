/*
 * usd_fd.c - which passed file descriptors uscmd keeps (usd_fd.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/usd_fd.h"
#include "lib/cma_netlink.h"
#include "lib/usp_proto.h"

int usd_chan_fd_check(int fd, uid_t uid)
{
	struct stat st;
	struct ucred cr;
	struct sockaddr_storage ss;
	socklen_t len;
	int v;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return EBADF;
	len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len) < 0 || v != AF_UNIX)
		return EINVAL;
	len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len) < 0 || v != SOCK_SEQPACKET)
		return EINVAL;
	/* a listening socket's SO_PEERCRED is its own creator's: no peer */
	len = sizeof(v);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) < 0 || v)
		return EINVAL;
	/* connected: an unconnected socket's SO_PEERCRED reads as the
	 * overflow uid, 65534, which is nobody's */
	len = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return EINVAL;
	len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.pid <= 0 || cr.uid != uid)
		return EINVAL;
	return 0;
}

int usd_route_fd_check(int fd)
{
	if (fd < 0)
		return EPROTO; /* a HELLO names its namespace */
	return nlr_is_route_socket(fd) ? 0 : EINVAL;
}

int usd_req_fd(int check_err, uint16_t op, int fd, uid_t uid, int *chan_err)
{
	*chan_err = 0;
	if (!check_err && op == USP_CHAN_CREATE) {
		*chan_err = usd_chan_fd_check(fd, uid);
		if (!*chan_err)
			return fd;
	}
	if (!check_err && op == USP_HELLO) {
		*chan_err = usd_route_fd_check(fd);
		if (!*chan_err)
			return fd;
	}
	/* a malformed request keeps nothing; only a new channel and the
	 * HELLO carry an fd */
	if (fd >= 0)
		close(fd);
	return -1;
}
