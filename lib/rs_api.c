/*
 * rs_api.c - the exported rsockets calls: descriptor table, configuration
 * (the files of /etc/rdma/rsocket), socket options, fcntl, names, rpoll/rselect and
 * the iomap calls. SOCK_DGRAM (UD) sockets are served by rs_dgram.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/sa.h>

#include "rs_int.h"

#ifndef RS_CONF_DIR
#define RS_CONF_DIR "/etc/rdma/rsocket"
#endif

struct rs_conf rs_conf = {
	.mem = 1 << 17,
	.wmem = 1 << 17,
	.inline_sz = 64,
	.sqsize = 384,
	.rqsize = 384,
	.iomap_size = 0,
	.polling_time = 10,
	.wake_up_interval = 5000,
};

static int conf_read(const char *name, unsigned long *out)
{
	char path[256], line[64];
	FILE *f;
	int ok = 0;

	snprintf(path, sizeof(path), "%s/%s", secure_getenv("USCM_RSOCKET_CONF_DIR") ?
		 secure_getenv("USCM_RSOCKET_CONF_DIR") : RS_CONF_DIR, name);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(line, sizeof(line), f)) {
		char *end;
		unsigned long v = strtoul(line, &end, 0);
		if (end != line) {
			*out = v;
			ok = 1;
		}
	}
	fclose(f);
	return ok;
}

static pthread_once_t conf_once = PTHREAD_ONCE_INIT;

static void conf_load(void)
{
	unsigned long v;

	if (conf_read("polling_time", &v))
		rs_conf.polling_time = (uint32_t)v;
	if (conf_read("wake_up_interval", &v))
		rs_conf.wake_up_interval = (int)v;
	if (conf_read("inline_default", &v))
		rs_conf.inline_sz = (uint16_t)v;
	if (conf_read("sqsize_default", &v))
		rs_conf.sqsize = (uint16_t)v;
	if (conf_read("rqsize_default", &v))
		rs_conf.rqsize = (uint16_t)v;
	if (conf_read("mem_default", &v))
		rs_conf.mem = v < 1 ? 1 : (uint32_t)v;
	if (conf_read("wmem_default", &v))
		rs_conf.wmem = v < RS_SNDLOWAT ? RS_SNDLOWAT << 1 : (uint32_t)v;
	if (conf_read("iomap_size", &v))
		rs_conf.iomap_size = (uint16_t)rs_value_to_scale(
			(uint16_t)rs_scale_to_value((int)(uint16_t)v, 8), 8);
}

void rs_configure(void)
{
	pthread_once(&conf_once, conf_load);
}

/* ---- descriptor table: rsocket number = its CM event channel's fd ---- */

static pthread_mutex_t tab_lk = PTHREAD_MUTEX_INITIALIZER;
static struct rs **tab;
static int tab_n;

int rs_insert(struct rs *rs)
{
	pthread_mutex_lock(&tab_lk);
	if (rs->fd >= tab_n) {
		int n = tab_n ? tab_n : 64;
		struct rs **t;

		while (n <= rs->fd)
			n *= 2;
		t = realloc(tab, (size_t)n * sizeof(*t));
		if (!t) {
			pthread_mutex_unlock(&tab_lk);
			return rs_fail(ENOMEM);
		}
		memset(t + tab_n, 0, (size_t)(n - tab_n) * sizeof(*t));
		tab = t;
		tab_n = n;
	}
	tab[rs->fd] = rs;
	pthread_mutex_unlock(&tab_lk);
	return rs->fd;
}

struct rs *rs_lookup(int fd)
{
	struct rs *rs = NULL;

	pthread_mutex_lock(&tab_lk);
	if (fd >= 0 && fd < tab_n)
		rs = tab[fd];
	pthread_mutex_unlock(&tab_lk);
	return rs;
}

void rs_forget(struct rs *rs)
{
	pthread_mutex_lock(&tab_lk);
	if (rs->fd >= 0 && rs->fd < tab_n && tab[rs->fd] == rs)
		tab[rs->fd] = NULL;
	pthread_mutex_unlock(&tab_lk);
}

#define LOOKUP(rs, fd)                         \
	struct rs *rs = rs_lookup(fd);         \
	if (!rs)                               \
		return rs_fail(EBADF)

#define DGRAM_LOCKED(rs, call)                 \
	do {                                   \
		if ((rs)->type == SOCK_DGRAM) {    \
			ssize_t r_;                 \
			pthread_mutex_lock(&(rs)->lk); \
			r_ = (call);                \
			pthread_mutex_unlock(&(rs)->lk); \
			return r_;                  \
		}                                   \
	} while (0)

/* ---- sockets ---- */

RS_EXPORT int rsocket(int domain, int type, int protocol)
{
	int t = type & ~(SOCK_CLOEXEC | SOCK_NONBLOCK);

	rs_configure();
	if (domain != AF_INET && domain != AF_INET6)
		return rs_fail(EAFNOSUPPORT);
	if (t == SOCK_DGRAM) {
		if (protocol && protocol != IPPROTO_UDP)
			return rs_fail(EPROTONOSUPPORT);
		return rs_dgram_socket(domain, type);
	}
	if (t != SOCK_STREAM)
		return rs_fail(EINVAL);
	if (protocol && protocol != IPPROTO_TCP)
		return rs_fail(EPROTONOSUPPORT);
	return rs_stream_socket(domain, type);
}

static int addr_ok(struct rs *rs, const struct sockaddr *addr, socklen_t len)
{
	if (!addr)
		return rs_fail(EFAULT);
	if (len < sizeof(sa_family_t))
		return rs_fail(EINVAL);
	if (addr->sa_family == AF_INET) {
		if (len < sizeof(struct sockaddr_in))
			return rs_fail(EINVAL);
	} else if (addr->sa_family == AF_INET6) {
		if (len < sizeof(struct sockaddr_in6))
			return rs_fail(EINVAL);
	} else {
		return rs_fail(EAFNOSUPPORT);
	}
	if (rs->domain == AF_INET && addr->sa_family != AF_INET)
		return rs_fail(EAFNOSUPPORT);
	return 0;
}

RS_EXPORT int rbind(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	int ret;
	LOOKUP(rs, socket);

	if (addr_ok(rs, addr, addrlen))
		return -1;
	DGRAM_LOCKED(rs, rs_dgram_bind(rs, addr, addrlen));
	pthread_mutex_lock(&rs->lk);
	if (rs->state != RS_S_INIT) {
		pthread_mutex_unlock(&rs->lk);
		return rs_fail(EINVAL);
	}
	ret = rdma_bind_addr(rs->id, (struct sockaddr *)addr);
	if (!ret)
		rs->state = RS_S_BOUND;
	pthread_mutex_unlock(&rs->lk);
	return ret;
}

RS_EXPORT int rlisten(int socket, int backlog)
{
	int ret = 0;
	LOOKUP(rs, socket);

	if (rs->type == SOCK_DGRAM)
		return rs_fail(EOPNOTSUPP);
	pthread_mutex_lock(&rs->lk);
	if (rs->state == RS_S_LISTEN)
		goto out;
	if (rs->state == RS_S_INIT) {
		struct sockaddr_storage ss;

		memset(&ss, 0, sizeof(ss));
		ss.ss_family = (sa_family_t)rs->domain;
		if (rdma_bind_addr(rs->id, (struct sockaddr *)&ss)) {
			ret = -1;
			goto out;
		}
		rs->state = RS_S_BOUND;
	}
	if (rs->state != RS_S_BOUND) {
		ret = rs_fail(EINVAL);
		goto out;
	}
	ret = rdma_listen(rs->id, backlog > 0 ? backlog : 1);
	if (!ret)
		rs->state = RS_S_LISTEN;
out:
	pthread_mutex_unlock(&rs->lk);
	return ret;
}

static void copy_addr(struct sockaddr *dst, socklen_t *len, const struct sockaddr *src)
{
	socklen_t n = src->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) :
			src->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
						    sizeof(struct sockaddr_storage);

	memcpy(dst, src, *len < n ? *len : n);
	*len = n;
}

int rs_accept_one(struct rs *l, struct rs **out);

RS_EXPORT int raccept(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	struct rs *nrs;
	int tries = 0;
	LOOKUP(rs, socket);

	if (addr && !addrlen)
		return rs_fail(EFAULT);
	if (rs->type == SOCK_DGRAM)
		return rs_fail(EOPNOTSUPP);
	pthread_mutex_lock(&rs->lk);
	if (rs->state != RS_S_LISTEN) {
		pthread_mutex_unlock(&rs->lk);
		return rs_fail(EINVAL);
	}
	for (;;) {
		int fl = fcntl(rs->fd, F_GETFL);

		if (fl >= 0)
			fcntl(rs->fd, F_SETFL, (rs->fs_flags & O_NONBLOCK) ? fl | O_NONBLOCK :
									   fl & ~O_NONBLOCK);
		if (!rs_accept_one(rs, &nrs))
			break;
		/* a refused non-rsocket peer: wait for the next request */
		if (errno == EAGAIN || (rs->fs_flags & O_NONBLOCK) || ++tries > 16) {
			int e = errno;
			pthread_mutex_unlock(&rs->lk);
			return rs_fail(e == ECONNABORTED && (rs->fs_flags & O_NONBLOCK) ? EAGAIN : e);
		}
	}
	pthread_mutex_unlock(&rs->lk);
	if (addr)
		copy_addr(addr, addrlen, rdma_get_peer_addr(nrs->id));
	return nrs->fd;
}

RS_EXPORT int rconnect(int socket, const struct sockaddr *addr, socklen_t addrlen)
{
	int ret;
	LOOKUP(rs, socket);

	if (rs->type == SOCK_DGRAM) {
		if (addr_ok(rs, addr, addrlen))
			return -1;
		DGRAM_LOCKED(rs, rs_dgram_connect(rs, addr, addrlen));
	}
	pthread_mutex_lock(&rs->lk);
	if (rs->state & RS_S_CONN) {
		ret = rs_fail(EISCONN);
	} else if (rs->state & RS_S_OPENING) {
		ret = rs_do_connect(rs);
		if (ret && errno == EINPROGRESS)
			errno = EALREADY;
	} else if (rs->state == RS_S_LISTEN) {
		ret = rs_fail(EISCONN);
	} else if (rs->state != RS_S_INIT && rs->state != RS_S_BOUND) {
		ret = rs_fail(rs->state == RS_S_CONN_ERR ? ECONNREFUSED : EISCONN);
	} else if (addr_ok(rs, addr, addrlen)) {
		ret = -1;
	} else {
		memcpy(rdma_get_peer_addr(rs->id), addr,
		       addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
						    sizeof(struct sockaddr_in6));
		ret = rs_do_connect(rs);
	}
	pthread_mutex_unlock(&rs->lk);
	return ret;
}

RS_EXPORT int rshutdown(int socket, int how)
{
	int ret;
	LOOKUP(rs, socket);

	if (rs->type == SOCK_DGRAM)
		return shutdown(rs->fd, how);
	pthread_mutex_lock(&rs->lk);
	ret = rs_shutdown_locked(rs, how);
	pthread_mutex_unlock(&rs->lk);
	return ret;
}

RS_EXPORT int rclose(int socket)
{
	LOOKUP(rs, socket);

	rs_forget(rs);
	pthread_mutex_lock(&rs->slk);
	pthread_mutex_lock(&rs->rlk);
	pthread_mutex_lock(&rs->lk);
	if (rs->type == SOCK_DGRAM) {
		rs_dgram_free(rs);
	} else {
		if (rs->state & RS_S_CONN)
			rs_shutdown_locked(rs, SHUT_RDWR);
		rs_stream_free(rs);
	}
	pthread_mutex_unlock(&rs->lk);
	pthread_mutex_unlock(&rs->rlk);
	pthread_mutex_unlock(&rs->slk);
	pthread_mutex_destroy(&rs->lk);
	pthread_mutex_destroy(&rs->rlk);
	pthread_mutex_destroy(&rs->slk);
	free(rs);
	return 0;
}

/* ---- data ---- */

RS_EXPORT ssize_t rrecv(int socket, void *buf, size_t len, int flags)
{
	struct iovec v = { buf, len };
	LOOKUP(rs, socket);
	if (len && !buf)
		return rs_fail(EFAULT);
	DGRAM_LOCKED(rs, rs_dgram_recvfrom(rs, buf, len, flags, NULL, NULL));
	return rs_recvv(rs, &v, 1, flags);
}

RS_EXPORT ssize_t rrecvfrom(int socket, void *buf, size_t len, int flags,
			    struct sockaddr *src_addr, socklen_t *addrlen)
{
	ssize_t n;
	LOOKUP(rs, socket);

	if (rs->type == SOCK_DGRAM) {
		if (len && !buf)
			return rs_fail(EFAULT);
		if (src_addr && !addrlen)
			return rs_fail(EFAULT);
		DGRAM_LOCKED(rs, rs_dgram_recvfrom(rs, buf, len, flags, src_addr, addrlen));
	}
	n = rrecv(socket, buf, len, flags);
	if (n >= 0 && src_addr && addrlen)
		copy_addr(src_addr, addrlen, rdma_get_peer_addr(rs->id));
	return n;
}

RS_EXPORT ssize_t rrecvmsg(int socket, struct msghdr *msg, int flags)
{
	LOOKUP(rs, socket);
	if (!msg)
		return rs_fail(EFAULT);
	if (msg->msg_control && msg->msg_controllen)
		msg->msg_controllen = 0;
	msg->msg_flags = 0;
	if (rs->type == SOCK_DGRAM)
		return rs_fail(EOPNOTSUPP); /* as librdmacm: rrecvmsg is stream-only */
	return rs_recvv(rs, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

RS_EXPORT ssize_t rread(int socket, void *buf, size_t count)
{
	return rrecv(socket, buf, count, 0);
}

RS_EXPORT ssize_t rreadv(int socket, const struct iovec *iov, int iovcnt)
{
	LOOKUP(rs, socket);
	if (rs->type == SOCK_DGRAM)
		return rs_fail(EOPNOTSUPP);
	return rs_recvv(rs, iov, iovcnt, 0);
}

RS_EXPORT ssize_t rsend(int socket, const void *buf, size_t len, int flags)
{
	struct iovec v = { (void *)buf, len };
	LOOKUP(rs, socket);
	if (len && !buf)
		return rs_fail(EFAULT);
	DGRAM_LOCKED(rs, rs_dgram_sendto(rs, buf, len, flags, NULL, 0));
	return rs_sendv(rs, &v, 1, flags);
}

RS_EXPORT ssize_t rsendto(int socket, const void *buf, size_t len, int flags,
			  const struct sockaddr *dest_addr, socklen_t addrlen)
{
	LOOKUP(rs, socket);
	if (rs->type == SOCK_DGRAM) {
		if (len && !buf)
			return rs_fail(EFAULT);
		if (!dest_addr && addrlen)
			return rs_fail(EFAULT);
		DGRAM_LOCKED(rs, rs_dgram_sendto(rs, buf, len, flags, dest_addr, addrlen));
	}
	if (dest_addr || addrlen) {
		pthread_mutex_lock(&rs->lk);
		int conn = !!(rs->state & RS_S_CONN);
		pthread_mutex_unlock(&rs->lk);
		if (conn)
			return rs_fail(EISCONN);
	}
	return rsend(socket, buf, len, flags);
}

RS_EXPORT ssize_t rsendmsg(int socket, const struct msghdr *msg, int flags)
{
	LOOKUP(rs, socket);
	if (!msg)
		return rs_fail(EFAULT);
	if (msg->msg_control && msg->msg_controllen)
		return rs_fail(EOPNOTSUPP);
	if (rs->type == SOCK_DGRAM)
		return rs_fail(EOPNOTSUPP); /* as librdmacm: rsendmsg is stream-only */
	return rs_sendv(rs, msg->msg_iov, (int)msg->msg_iovlen, flags);
}

RS_EXPORT ssize_t rwrite(int socket, const void *buf, size_t count)
{
	return rsend(socket, buf, count, 0);
}

RS_EXPORT ssize_t rwritev(int socket, const struct iovec *iov, int iovcnt)
{
	LOOKUP(rs, socket);
	if (rs->type == SOCK_DGRAM)
		return rs_fail(EOPNOTSUPP);
	return rs_sendv(rs, iov, iovcnt, 0);
}

/* ---- rpoll / rselect ---- */

/* revents of one rsocket now (lk held), progressing it without blocking */
static short rs_revents(struct rs *rs, short events)
{
	short rev = 0;

	if (rs->type == SOCK_DGRAM) {
		if ((events & POLLIN) && rs_dgram_readable(rs))
			rev |= POLLIN;
		if ((events & POLLOUT) && rs_dgram_writable(rs))
			rev |= POLLOUT;
		return rev;
	}
	if (rs->state & RS_S_OPENING) {
		int fl = rs->fs_flags;

		rs->fs_flags |= O_NONBLOCK; /* rpoll never blocks in a CM step */
		if (rs_do_connect(rs) && errno == EINPROGRESS) {
			rs->fs_flags = fl;
			return 0;
		}
		rs->fs_flags = fl;
	}
	if (rs->state & (RS_S_CONN | RS_S_DISC | RS_S_ERROR)) {
		if (rs->id->qp)
			rs_progress(rs);
		if ((events & POLLIN) && (rs_have_rdata(rs) || !(rs->state & RS_S_RD)))
			rev |= POLLIN;
		/* writable also when a send fails at once (EPIPE, the error),
		 * as a TCP socket: select() (librspreload's too) shows
		 * POLLHUP / POLLERR only in the except set, and a writer
		 * waiting there for room would wait for ever */
		if ((events & POLLOUT) && (!(rs->state & RS_S_WR) || rs_can_send(rs)))
			rev |= POLLOUT;
		/* a hang-up shows once the data that came before it is read
		 * (as TCP's FIN: readable first) */
		if (!(rs->state & RS_S_CONN) && !rs_have_rdata(rs))
			rev |= (rs->state & RS_S_ERROR) ? POLLERR : POLLHUP;
		return rev;
	}
	if (rs->state == RS_S_LISTEN) {
		struct pollfd p = { rs->fd, POLLIN, 0 };

		poll(&p, 1, 0);
		return p.revents & (events | POLLERR | POLLHUP);
	}
	if (rs->state == RS_S_CONN_ERR)
		return (short)((events & (POLLIN | POLLOUT)) | POLLERR);
	return 0;
}

static int poll_scan(struct pollfd *fds, nfds_t nfds, struct rs **rss)
{
	int n = 0;
	nfds_t i;

	for (i = 0; i < nfds; i++) {
		fds[i].revents = 0;
		if (fds[i].fd < 0)
			continue;
		if (rss[i]) {
			pthread_mutex_lock(&rss[i]->lk);
			fds[i].revents = rs_revents(rss[i], fds[i].events);
			pthread_mutex_unlock(&rss[i]->lk);
		} else {
			struct pollfd p = { fds[i].fd, fds[i].events, 0 };

			poll(&p, 1, 0);
			fds[i].revents = p.revents;
		}
		if (fds[i].revents)
			n++;
	}
	return n;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

RS_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct rs **rss;
	struct pollfd *w;
	uint64_t end = timeout > 0 ? mono_ms() + (uint64_t)timeout : 0;
	nfds_t i;
	int n;

	if (nfds && !fds)
		return rs_fail(EFAULT);
	if (nfds > (nfds_t)INT_MAX / 2)
		return rs_fail(EINVAL);
	rss = calloc(nfds + 1, sizeof(*rss));
	w = calloc(2 * nfds + 1, sizeof(*w));
	if (!rss || !w) {
		free(rss);
		free(w);
		return rs_fail(ENOMEM);
	}
	for (i = 0; i < nfds; i++)
		rss[i] = fds[i].fd >= 0 ? rs_lookup(fds[i].fd) : NULL;
	for (;;) {
		int k = 0, to;

		n = poll_scan(fds, nfds, rss);
		if (n || timeout == 0)
			break;
		/* arm every rsocket, then re-check: nothing is lost between */
		for (i = 0; i < nfds; i++) {
			struct rs *rs = rss[i];

			if (fds[i].fd < 0)
				continue;
			if (!rs) {
				w[k].fd = fds[i].fd;
				w[k++].events = fds[i].events;
				continue;
			}
			pthread_mutex_lock(&rs->lk);
			rs_arm(rs);
			w[k].fd = rs->fd; /* CM events: connect steps, requests, disconnects */
			w[k++].events = POLLIN;
			if (rs->cch) {
				w[k].fd = rs->cch->fd;
				w[k++].events = POLLIN;
			}
			pthread_mutex_unlock(&rs->lk);
		}
		n = poll_scan(fds, nfds, rss);
		if (n)
			break;
		to = -1;
		if (timeout > 0) {
			uint64_t t = mono_ms();
			if (t >= end)
				break;
			to = (int)(end - t);
		}
		if (poll(w, (nfds_t)k, to) < 0 && errno != EINTR) {
			n = -1;
			break;
		}
		for (i = 0; i < nfds; i++) {
			if (rss[i]) {
				pthread_mutex_lock(&rss[i]->lk);
				rs_drain(rss[i]);
				pthread_mutex_unlock(&rss[i]->lk);
			}
		}
		if (timeout > 0 && mono_ms() >= end) {
			n = poll_scan(fds, nfds, rss);
			break;
		}
	}
	free(rss);
	free(w);
	return n;
}

RS_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		      struct timeval *timeout)
{
	struct pollfd *p;
	int i, n = 0, ret, to;

	if (nfds < 0 || nfds > FD_SETSIZE)
		return rs_fail(EINVAL);
	if (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0))
		return rs_fail(EINVAL);
	p = calloc((size_t)nfds + 1, sizeof(*p));
	if (!p)
		return rs_fail(ENOMEM);
	for (i = 0; i < nfds; i++) {
		short ev = 0;

		if (readfds && FD_ISSET(i, readfds))
			ev |= POLLIN;
		if (writefds && FD_ISSET(i, writefds))
			ev |= POLLOUT;
		if (exceptfds && FD_ISSET(i, exceptfds))
			ev |= POLLPRI;
		if (ev) {
			p[n].fd = i;
			p[n++].events = ev;
		}
	}
	to = timeout ? (int)(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000) : -1;
	ret = rpoll(p, (nfds_t)n, to);
	if (ret < 0) {
		free(p);
		return ret;
	}
	if (readfds)
		FD_ZERO(readfds);
	if (writefds)
		FD_ZERO(writefds);
	if (exceptfds)
		FD_ZERO(exceptfds);
	ret = 0;
	for (i = 0; i < n; i++) {
		short r = p[i].revents;

		if (readfds && (r & (POLLIN | POLLHUP | POLLERR)) && (p[i].events & POLLIN)) {
			FD_SET(p[i].fd, readfds);
			ret++;
		}
		if (writefds && (r & (POLLOUT | POLLERR)) && (p[i].events & POLLOUT)) {
			FD_SET(p[i].fd, writefds);
			ret++;
		}
		if (exceptfds && (r & POLLPRI)) {
			FD_SET(p[i].fd, exceptfds);
			ret++;
		}
	}
	free(p);
	return ret;
}

/* ---- names ---- */

RS_EXPORT int rgetpeername(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	LOOKUP(rs, socket);
	if (!addr || !addrlen)
		return rs_fail(EFAULT);
	if (rs->type == SOCK_DGRAM)
		return getpeername(rs->fd, addr, addrlen);
	if (!(rs->state & (RS_S_CONN | RS_S_DISC)) && rs->state != RS_S_ACCEPTING)
		return rs_fail(ENOTCONN);
	copy_addr(addr, addrlen, rdma_get_peer_addr(rs->id));
	return 0;
}

RS_EXPORT int rgetsockname(int socket, struct sockaddr *addr, socklen_t *addrlen)
{
	LOOKUP(rs, socket);
	if (!addr || !addrlen)
		return rs_fail(EFAULT);
	if (rs->type == SOCK_DGRAM)
		return getsockname(rs->fd, addr, addrlen);
	if (rs->state == RS_S_INIT) {
		struct sockaddr_storage ss;

		memset(&ss, 0, sizeof(ss));
		ss.ss_family = (sa_family_t)rs->domain;
		copy_addr(addr, addrlen, (struct sockaddr *)&ss);
		return 0;
	}
	copy_addr(addr, addrlen, rdma_get_local_addr(rs->id));
	return 0;
}

/* ---- options ---- */

static int opt_int(const void *v, socklen_t len, int *out)
{
	if (!v)
		return rs_fail(EFAULT);
	if (len < sizeof(int))
		return rs_fail(EINVAL);
	memcpy(out, v, sizeof(int));
	return 0;
}

RS_EXPORT int rsetsockopt(int socket, int level, int optname, const void *optval,
			  socklen_t optlen)
{
	int v = 0, ret = 0;
	LOOKUP(rs, socket);

	if (rs->type == SOCK_DGRAM) /* the UDP socket's options; no SOL_RDMA ones */
		return level == SOL_RDMA ? rs_fail(ENOPROTOOPT) :
					   setsockopt(rs->fd, level, optname, optval, optlen);
	pthread_mutex_lock(&rs->lk);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			if ((ret = opt_int(optval, optlen, &v)))
				break;
			if (rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &v,
					    sizeof(v)) &&
			    rs->state == RS_S_INIT && errno != ENOSYS) {
				ret = -1;
				break;
			}
			rs->reuseaddr = !!v;
			break;
		case SO_RCVBUF:
			if ((ret = opt_int(optval, optlen, &v)))
				break;
			if (!rs->rbuf)
				rs->rbuf_size = v <= 0 ? 0 : (uint32_t)v << 1;
			break;
		case SO_SNDBUF:
			if ((ret = opt_int(optval, optlen, &v)))
				break;
			if (!rs->sbuf)
				rs->sbuf_size = v <= 0 ? 0 : (uint32_t)v << 1;
			if (rs->sbuf_size < RS_SNDLOWAT)
				rs->sbuf_size = RS_SNDLOWAT << 1;
			break;
		case SO_LINGER: {
			struct linger l;

			if (!optval) {
				ret = rs_fail(EFAULT);
				break;
			}
			if (optlen < sizeof(l)) {
				ret = rs_fail(EINVAL);
				break;
			}
			memcpy(&l, optval, sizeof(l));
			rs->linger_on = !!l.l_onoff;
			rs->linger = l.l_linger;
			break;
		}
		case SO_KEEPALIVE:
			if (!(ret = opt_int(optval, optlen, &v)))
				rs->keepalive = !!v;
			break;
		case SO_OOBINLINE:
			if (!(ret = opt_int(optval, optlen, &v)))
				rs->oobinline = !!v;
			break;
		default:
			ret = rs_fail(ENOPROTOOPT);
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			if (!(ret = opt_int(optval, optlen, &v)))
				rs->nodelay = !!v;
			break;
		case TCP_MAXSEG:
			ret = opt_int(optval, optlen, &v);
			if (!ret && v <= 0)
				ret = rs_fail(EINVAL);
			break;
		case TCP_KEEPIDLE:
		case TCP_KEEPINTVL:
		case TCP_KEEPCNT:
			if ((ret = opt_int(optval, optlen, &v)))
				break;
			if (v <= 0) {
				ret = rs_fail(EINVAL);
				break;
			}
			if (optname == TCP_KEEPIDLE)
				rs->keepidle = v;
			else if (optname == TCP_KEEPINTVL)
				rs->keepintvl = v;
			else
				rs->keepcnt = v;
			break;
		default:
			ret = rs_fail(ENOPROTOOPT);
		}
		break;
	case IPPROTO_IPV6:
		if (optname != IPV6_V6ONLY) {
			ret = rs_fail(ENOPROTOOPT);
			break;
		}
		if (!(ret = opt_int(optval, optlen, &v)))
			ret = rdma_set_option(rs->id, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &v,
					      sizeof(v));
		break;
	case SOL_RDMA:
		if (optname == RDMA_ROUTE) {
			void *c;

			if (!optval || !optlen) {
				ret = rs_fail(optval ? EINVAL : EFAULT);
				break;
			}
			if (rs->state & ~RS_S_BOUND) {
				ret = rs_fail(EINVAL);
				break;
			}
			c = malloc(optlen);
			if (!c) {
				ret = rs_fail(ENOMEM);
				break;
			}
			memcpy(c, optval, optlen);
			free(rs->route);
			rs->route = c;
			rs->route_len = optlen;
			break;
		}
		if ((ret = opt_int(optval, optlen, &v)))
			break;
		if (rs->sbuf) { /* the QP exists: too late */
			ret = rs_fail(EINVAL);
			break;
		}
		switch (optname) {
		case RDMA_SQSIZE:
			rs->sq_size = (uint16_t)((unsigned)v > RS_QP_MAX ? RS_QP_MAX : (unsigned)v);
			break;
		case RDMA_RQSIZE:
			rs->rq_size = (uint16_t)((unsigned)v > RS_QP_MAX ? RS_QP_MAX : (unsigned)v);
			break;
		case RDMA_INLINE:
			rs->sq_inline = (uint16_t)((unsigned)v > RS_QP_MAX ? RS_QP_MAX : (unsigned)v);
			break;
		case RDMA_IOMAPSIZE:
			rs->iomap_size = rs_scale_to_value(
				rs_value_to_scale((int)((unsigned)v > 0xffff ? 0xffff : (unsigned)v),
						  8),
				8);
			break;
		default:
			ret = rs_fail(ENOPROTOOPT);
		}
		break;
	default:
		ret = rs_fail(ENOPROTOOPT);
	}
	pthread_mutex_unlock(&rs->lk);
	return ret;
}

RS_EXPORT int rgetsockopt(int socket, int level, int optname, void *optval, socklen_t *optlen)
{
	int v = 0, isint = 1, ret = 0;
	LOOKUP(rs, socket);

	if (rs->type == SOCK_DGRAM)
		return level == SOL_RDMA ? rs_fail(ENOPROTOOPT) :
					   getsockopt(rs->fd, level, optname, optval, optlen);

	if (!optval || !optlen)
		return rs_fail(EFAULT);
	pthread_mutex_lock(&rs->lk);
	switch (level) {
	case SOL_SOCKET:
		switch (optname) {
		case SO_REUSEADDR:
			v = rs->reuseaddr;
			break;
		case SO_KEEPALIVE:
			v = rs->keepalive;
			break;
		case SO_OOBINLINE:
			v = rs->oobinline;
			break;
		case SO_RCVBUF:
			v = (int)rs->rbuf_size;
			break;
		case SO_SNDBUF:
			v = (int)rs->sbuf_size;
			break;
		case SO_TYPE:
			v = rs->type;
			break;
		case SO_ERROR:
			v = rs->err;
			rs->err = 0;
			break;
		case SO_LINGER: {
			struct linger l = { rs->linger_on, rs->linger };

			isint = 0;
			memcpy(optval, &l, *optlen < sizeof(l) ? *optlen : sizeof(l));
			*optlen = sizeof(l);
			break;
		}
		default:
			ret = rs_fail(ENOPROTOOPT);
		}
		break;
	case IPPROTO_TCP:
		switch (optname) {
		case TCP_NODELAY:
			v = rs->nodelay;
			break;
		case TCP_MAXSEG:
			v = (rs->id && rs->id->route.num_paths) ?
				    1 << (7 + rs->id->route.path_rec->mtu) :
				    2048;
			break;
		case TCP_KEEPIDLE:
			v = rs->keepidle ? rs->keepidle : 7200;
			break;
		case TCP_KEEPINTVL:
			v = rs->keepintvl ? rs->keepintvl : 75;
			break;
		case TCP_KEEPCNT:
			v = rs->keepcnt ? rs->keepcnt : 9;
			break;
		default:
			ret = rs_fail(ENOPROTOOPT);
		}
		break;
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			v = rs->sq_size;
			break;
		case RDMA_RQSIZE:
			v = rs->rq_size;
			break;
		case RDMA_INLINE:
			v = rs->sq_inline;
			break;
		case RDMA_IOMAPSIZE:
			v = rs->iomap_size;
			break;
		case RDMA_ROUTE: {
			/* the route's path records as struct ibv_path_data */
			struct ibv_path_data pd;
			int i, np = rs->id ? rs->id->route.num_paths : 0;
			socklen_t need = (socklen_t)(np * (int)sizeof(pd));

			isint = 0;
			if (*optlen < need) {
				ret = rs_fail(EINVAL);
				break;
			}
			for (i = 0; i < np; i++) {
				struct ibv_sa_path_rec *r = &rs->id->route.path_rec[i];

				memset(&pd, 0, sizeof(pd));
				pd.flags = IBV_PATH_FLAG_GMP | IBV_PATH_FLAG_PRIMARY |
					   IBV_PATH_FLAG_BIDIRECTIONAL;
				memcpy(&pd.path.dgid, &r->dgid, 16);
				memcpy(&pd.path.sgid, &r->sgid, 16);
				pd.path.dlid = r->dlid;
				pd.path.slid = r->slid;
				pd.path.pkey = r->pkey;
				pd.path.mtu = (uint8_t)(0x80 | r->mtu);
				pd.path.rate = (uint8_t)(0x80 | r->rate);
				pd.path.packetlifetime = (uint8_t)(0x80 | r->packet_life_time);
				memcpy((char *)optval + i * (int)sizeof(pd), &pd, sizeof(pd));
			}
			*optlen = need;
			break;
		}
		default:
			ret = rs_fail(ENOPROTOOPT);
		}
		break;
	default:
		ret = rs_fail(ENOPROTOOPT);
	}
	if (!ret && isint) {
		if (*optlen < sizeof(int)) {
			ret = rs_fail(EINVAL);
		} else {
			memcpy(optval, &v, sizeof(int));
			*optlen = sizeof(int);
		}
	}
	pthread_mutex_unlock(&rs->lk);
	return ret;
}

RS_EXPORT int rfcntl(int socket, int cmd, ...)
{
	va_list ap;
	int arg, ret = 0;
	LOOKUP(rs, socket);

	va_start(ap, cmd);
	pthread_mutex_lock(&rs->lk);
	switch (cmd) {
	case F_GETFL:
		ret = rs->fs_flags | O_RDWR;
		break;
	case F_SETFL:
		arg = va_arg(ap, int);
		rs->fs_flags = (rs->fs_flags & ~O_NONBLOCK) | (arg & O_NONBLOCK);
		if (!(rs->state & (RS_S_CONN | RS_S_DISC | RS_S_ERROR))) {
			int fl = fcntl(rs->fd, F_GETFL);
			if (fl >= 0)
				fcntl(rs->fd, F_SETFL,
				      (arg & O_NONBLOCK) ? fl | O_NONBLOCK : fl & ~O_NONBLOCK);
		}
		break;
	case F_GETFD:
		ret = fcntl(rs->fd, F_GETFD);
		break;
	case F_SETFD:
		arg = va_arg(ap, int);
		ret = fcntl(rs->fd, F_SETFD, arg);
		break;
	default:
		ret = rs_fail(EINVAL);
	}
	pthread_mutex_unlock(&rs->lk);
	va_end(ap);
	return ret;
}

/* ---- iomap ---- */

RS_EXPORT off_t riomap(int socket, void *buf, size_t len, int prot, int flags, off_t offset)
{
	struct rs_iomr *m;
	int access = IBV_ACCESS_LOCAL_WRITE;
	LOOKUP(rs, socket);
	if (rs->type == SOCK_DGRAM)
		return (off_t)rs_fail(EOPNOTSUPP);

	(void)flags;
	if (!buf || !len || (prot & ~PROT_WRITE) || offset < -1)
		return rs_fail(EINVAL);
	pthread_mutex_lock(&rs->lk);
	/* from the moment the QP exists (an accepted socket may still be
	 * completing its connection): offered to the peer at the next send */
	if (!rs->id->pd || !rs->sbuf || (rs->state & (RS_S_DISC | RS_S_ERROR | RS_S_CONN_ERR))) {
		pthread_mutex_unlock(&rs->lk);
		return rs_fail(EINVAL);
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		pthread_mutex_unlock(&rs->lk);
		return rs_fail(ENOMEM);
	}
	m->index = -1;
	if (prot & PROT_WRITE) {
		/* the first slot of the peer's table no mapping of ours holds */
		uint32_t i;
		struct rs_iomr *o;

		for (i = 0; i < rs->riomap.length; i++) {
			for (o = rs->iomaps; o && o->index != (int)i; o = o->next)
				;
			if (!o)
				break;
		}
		if (i >= rs->riomap.length) {
			free(m);
			pthread_mutex_unlock(&rs->lk);
			return rs_fail(ENOMEM);
		}
		m->index = (int)i;
		access |= IBV_ACCESS_REMOTE_WRITE;
	} else {
		m->sent = 1; /* local only */
	}
	m->mr = ibv_reg_mr(rs->id->pd, buf, len, access);
	if (!m->mr) {
		free(m);
		pthread_mutex_unlock(&rs->lk);
		return -1;
	}
	if (offset == -1)
		offset = (off_t)(uintptr_t)buf;
	m->offset = (uint64_t)offset;
	m->next = rs->iomaps;
	rs->iomaps = m;
	if (m->index >= 0)
		rs->iomap_pending = 1;
	pthread_mutex_unlock(&rs->lk);
	return offset;
}

RS_EXPORT int riounmap(int socket, void *buf, size_t len)
{
	struct rs_iomr **pp;
	LOOKUP(rs, socket);
	if (rs->type == SOCK_DGRAM)
		return (int)rs_fail(EOPNOTSUPP);

	pthread_mutex_lock(&rs->lk);
	for (pp = &rs->iomaps; *pp; pp = &(*pp)->next) {
		struct rs_iomr *m = *pp;

		if (m->mr->addr == buf && m->mr->length == len) {
			*pp = m->next;
			ibv_dereg_mr(m->mr);
			free(m);
			pthread_mutex_unlock(&rs->lk);
			return 0;
		}
	}
	pthread_mutex_unlock(&rs->lk);
	return rs_fail(EINVAL);
}

RS_EXPORT size_t riowrite(int socket, const void *buf, size_t count, off_t offset, int flags)
{
	size_t left = count;
	const uint8_t *p = buf;
	int nb, err = 0;
	struct rs *rs = rs_lookup(socket);

	if (!rs) {
		errno = EBADF;
		return (size_t)-1;
	}
	if (count && !buf) {
		errno = EFAULT;
		return (size_t)-1;
	}
	if (rs->type == SOCK_DGRAM) {
		errno = EOPNOTSUPP;
		return (size_t)-1;
	}
	pthread_mutex_lock(&rs->slk);
	pthread_mutex_lock(&rs->lk);
	nb = (rs->fs_flags & O_NONBLOCK) || (flags & MSG_DONTWAIT);
	if (!(rs->state & RS_S_WR)) {
		err = (rs->state & (RS_S_CONN | RS_S_DISC | RS_S_ERROR)) ? EPIPE : ENOTCONN;
		goto out;
	}
	if (rs->iomap_pending && rs_send_iomaps(rs, nb)) {
		err = errno;
		goto out;
	}
	while (left) {
		const volatile struct rs_wiomap *e = NULL;
		uint64_t room, off = (uint64_t)offset;
		int i, done;

		for (i = 0; i < rs->iomap_size && rs->tiomap; i++) {
			uint64_t o = rs->tiomap[i].offset, l = rs->tiomap[i].sge.length;
			if (l && off >= o && off < o + l) {
				e = &rs->tiomap[i];
				break;
			}
		}
		if (!e) {
			if (left == count)
				err = EINVAL; /* no mapping of the peer covers offset */
			break;
		}
		room = e->offset + e->sge.length - off;
		if (room > left)
			room = left;
		done = rs_rdma_write(rs, p, (size_t)room, e->sge.addr + (off - e->offset), e->sge.key,
				     nb);
		if (done <= 0) {
			if (left == count)
				err = errno ? errno : EAGAIN;
			break;
		}
		p += done;
		offset += done;
		left -= (size_t)done;
		if ((uint64_t)done < room)
			break;
	}
out:
	pthread_mutex_unlock(&rs->lk);
	pthread_mutex_unlock(&rs->slk);
	if (err) {
		errno = err;
		return (size_t)-1;
	}
	return count - left;
}
