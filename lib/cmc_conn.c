/*
 * cmc_conn.c - daemon mode: the command socket to uscmd.
 *
 * One connection per process (AF_UNIX SOCK_SEQPACKET), opened at the first
 * call and again after the daemon went away (a new generation: ids and
 * channels of the old one fail with ENODEV) or in a forked child (the
 * parent's connection is the parent's: the child closes its copy and opens
 * its own, so the daemon sees each process by its own credentials).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/cma_int.h"
#include "lib/cma_netlink.h"
#include "lib/cmc.h"
#include "lib/cmc_int.h"

struct cmc_global cmc = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.call_lock = PTHREAD_MUTEX_INITIALIZER,
	.qp_lock = PTHREAD_MUTEX_INITIALIZER,
	.fd = -1,
};

/* This process's pid, asked once: getpid is a system call (glibc keeps no
 * cache), and every daemon-mode call checks it against its connection's
 * owner — three to four per connection set up. fork's child
 * forgets it (cmc_pid_forget from the atfork handler, as the locks are
 * reset there: a child made without fork's handlers is not supported
 * either way). */
static pid_t self_pid_v;

static pid_t self_pid(void)
{
	pid_t p = __atomic_load_n(&self_pid_v, __ATOMIC_RELAXED);

	if (!p) {
		p = getpid();
		__atomic_store_n(&self_pid_v, p, __ATOMIC_RELAXED);
	}
	return p;
}

void cmc_pid_forget(void)
{
	self_pid_v = 0;
}

void cmc_after_fork(void)
{
	pthread_mutex_init(&cmc.lock, NULL);
	pthread_cond_init(&cmc.cond, NULL);
	pthread_mutex_init(&cmc.call_lock, NULL);
}

/* secure_getenv: a setuid program never takes a socket path (or the
 * daemon uid below) from the user who started it. */
const char *cmc_socket_path(void)
{
	const char *p = secure_getenv("USCM_SOCKET");

	return p && *p ? p : USP_DEFAULT_SOCKET;
}

/* The uid root (of the initial user namespace) has as seen from this
 * process: 0 there; in a user namespace of its own, the inside uid its
 * uid_map gives the parent's 0, or the overflow uid when 0 is not mapped
 * (one level of nesting: the map is to the parent namespace). */
static uid_t root_seen_here(void)
{
	struct cma_uid_extent e[CMA_UID_MAP_MAX];
	int n = cma_uid_map_read("/proc/self/uid_map", e, CMA_UID_MAP_MAX);
	unsigned long ov = 65534;
	FILE *o;

	if (n < 0 || cma_uid_map_initial(e, n))
		return 0;
	for (int i = 0; i < n; i++)
		if (e[i].out == 0 && e[i].count > 0)
			return (uid_t)e[i].in;
	o = fopen("/proc/sys/kernel/overflowuid", "re");
	if (o) {
		if (fscanf(o, "%lu", &ov) != 1)
			ov = 65534;
		fclose(o);
	}
	return (uid_t)ov;
}

/* Whoever answers on the socket is the CM of every call that follows: it
 * must be root's uscmd (SO_PEERCRED: root as seen from here), this
 * process's own user's (a daemon of our uid can do nothing we could not),
 * or the uid the operator named in USCM_DAEMON_UID. Anything else (a
 * user's program bound to a socket path it could create) is not used, and
 * said once. */
static int daemon_trusted(int fd, const char *path)
{
	static int told;
	const char *v = secure_getenv("USCM_DAEMON_UID");
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return 0;
	if (cr.uid == geteuid() || cr.uid == root_seen_here())
		return 1;
	if (v && *v) {
		char *end;
		unsigned long u = strtoul(v, &end, 10);

		if (!*end && u == (unsigned long)cr.uid)
			return 1;
	}
	if (!told) {
		told = 1;
		fprintf(stderr,
			"uscm: the daemon on %s runs as uid %u, not root: not used (USCM_DAEMON_UID names "
			"another trusted uid)\n",
			path, (unsigned)cr.uid);
	}
	return 0;
}

static int sock_connect(void)
{
	struct sockaddr_un sa;
	const char *path = cmc_socket_path();
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	{
		/* a daemon that stopped answering (stopped, wedged) must not hang
		 * every rdma_cm call of the host: USCM_DAEMON_TIMEOUT_MS (30 s)
		 * bounds the connect and each reply */
		const char *v = getenv("USCM_DAEMON_TIMEOUT_MS");
		long ms = v && *v ? strtol(v, NULL, 0) : 30000;
		struct timeval tv;

		if (ms <= 0)
			ms = 30000;
		tv.tv_sec = ms / 1000;
		tv.tv_usec = (ms % 1000) * 1000;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!daemon_trusted(fd, path)) {
		close(fd);
		errno = EACCES;
		return -1;
	}
	return fd;
}

static int xfer(int fd, const void *req, size_t n, int pass_fd, void *rep, size_t repmax)
{
	struct msghdr mh;
	struct iovec iov = { .iov_base = (void *)req, .iov_len = n };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} u;
	ssize_t r;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (pass_fd >= 0) {
		struct cmsghdr *c;

		memset(&u, 0, sizeof(u));
		mh.msg_control = u.buf;
		mh.msg_controllen = sizeof(u.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
	}
	do
		r = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (r < 0 && errno == EINTR);
	if (r != (ssize_t)n)
		return -1;
	if (!rep)
		return 0; /* USP_F_NOREPLY: nothing comes back */
	do
		r = recv(fd, rep, repmax, 0);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		if (r == 0)
			errno = ECONNRESET;
		return -1;
	}
	return (int)r;
}

/* The connection for this process, opened if needed (call_lock held);
 * fresh: for a request that needs no id or channel of an earlier
 * connection, replace one whose daemon is gone. */
static int conn_get(int fresh)
{
	struct {
		struct usp_hdr h;
		struct usp_hello b;
	} req;
	struct {
		struct usp_reply r;
		struct usp_hello_rep b;
	} rep;
	int fd, n, nl;

	if (cmc.fd >= 0 && cmc.pid == self_pid()) {
		struct pollfd pf = { .fd = cmc.fd, .events = POLLRDHUP };

		/* a daemon that went away since: start a new generation (the
		 * old one's ids and channels fail with ENODEV) */
		if (!fresh || poll(&pf, 1, 0) == 0)
			return cmc.fd;
		close(cmc.fd);
		cmc.fd = -1;
	}
	if (cmc.fd >= 0) {
		/* a forked child: the parent's connection stays the parent's */
		close(cmc.fd);
		cmc.fd = -1;
		cmc.gen++;
	}
	fd = sock_connect();
	if (fd < 0) {
		errno = ENODEV;
		return -1;
	}
	memset(&req, 0, sizeof(req));
	usp_hdr_init(&req.h, USP_HELLO, sizeof(req), ++cmc.seq, 0);
	req.b.version = USP_VERSION;
	req.b.pid = (uint32_t)self_pid();
	/* Our network namespace, as the kernel's ucma takes the opener's: a
	 * route socket made here answers for it, and its cookie names it
	 * (the daemon needs no privilege to use either). Made now, at
	 * connect, so a process that changed namespace before its first call
	 * is served in the new one, as an rdma_cm fd opened there would be. */
	nl = nlr_open(0);
	n = nl >= 0 ? xfer(fd, &req, sizeof(req), nl, &rep, sizeof(rep)) : -1;
	if (nl >= 0)
		close(nl);
	/* a daemon that refuses this process (its uid has as many
	 * connections as uscmd allows, --max-clients-per-uid) answers the
	 * hello with EAGAIN and closes at once, maybe before the hello went
	 * out: the refusal is then still to be read */
	if (n < 0)
		n = (int)recv(fd, &rep, sizeof(rep), MSG_DONTWAIT);
	if (n >= (int)sizeof(rep.r) && rep.r.h.op == (USP_REPLY | USP_HELLO) && rep.r.err == EAGAIN) {
		close(fd);
		if (!cmc.refused++)
			fprintf(stderr, "uscm: uscmd (%s) refused this process: its user has as many "
					"connections as uscmd allows (--max-clients-per-uid); calls fail "
					"with EAGAIN\n",
				cmc_socket_path());
		errno = EAGAIN;
		return -1;
	}
	if (n != (int)sizeof(rep) || rep.r.err) {
		close(fd);
		errno = ENODEV;
		return -1;
	}
	cmc.fd = fd;
	cmc.pid = self_pid();
	cmc.gen++;
	cmc.client = rep.b.client;
	return fd;
}

int cmc_probe(void)
{
	int ok;

	pthread_mutex_lock(&cmc.call_lock);
	/* refused for now (EAGAIN): a daemon serves this host all the same,
	 * so the process uses it (and its calls say why they fail) rather
	 * than falling back to in-process mode */
	ok = conn_get(1) >= 0 || errno == EAGAIN;
	pthread_mutex_unlock(&cmc.call_lock);
	return ok;
}

int cmc_gen_live(unsigned gen)
{
	if (gen != cmc.gen || cmc.fd < 0 || cmc.pid != self_pid())
		return cma_fail(ENODEV);
	return 0;
}

int cmc_id_live(const struct cmc_id *id)
{
	return cmc_gen_live(id->gen);
}

int cmc_call(uint16_t op, uint32_t id, const void *body, size_t blen, void *rep, size_t replen,
	     int pass_fd, size_t *got)
{
	uint8_t req[USP_MAX_REQUEST];
	uint8_t small[1024];    /* every reply but USP_STATUS's text fits: no allocation per call */
	uint8_t *in = small;
	struct usp_reply r;
	size_t inmax = sizeof(r) + replen;
	int fd, n, err = 0;

	if (sizeof(struct usp_hdr) + blen > sizeof(req))
		return cma_fail(EMSGSIZE);
	if (inmax > sizeof(small) && !(in = malloc(inmax)))
		return cma_fail(ENOMEM);
	if (inmax < sizeof(small))
		inmax = sizeof(small);
	pthread_mutex_lock(&cmc.call_lock);
	fd = conn_get(op == USP_CHAN_CREATE || op == USP_STATS || op == USP_HELLO);
	if (fd < 0) {
		err = errno == EAGAIN ? EAGAIN : ENODEV;
		pthread_mutex_unlock(&cmc.call_lock);
		goto out;
	}
	usp_hdr_init((struct usp_hdr *)req, op, sizeof(struct usp_hdr) + blen, ++cmc.seq, id);
	if (blen)
		memcpy(req + sizeof(struct usp_hdr), body, blen);
	n = xfer(fd, req, sizeof(struct usp_hdr) + blen, pass_fd,
		 op & USP_F_NOREPLY ? NULL : in, op & USP_F_NOREPLY ? 0 : inmax);
	if (n < 0 || (!(op & USP_F_NOREPLY) && n < (int)sizeof(r))) {
		/* the daemon is gone (or did not answer in time): this
		 * generation's ids and channels die */
		int timedout = n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);

		if (timedout)
			fprintf(stderr, "uscm: uscmd (%s) did not answer: giving it up\n",
				cmc_socket_path());
		close(cmc.fd);
		cmc.fd = -1;
		pthread_mutex_unlock(&cmc.call_lock);
		err = timedout ? ETIMEDOUT : ENODEV;
		goto out;
	}
	pthread_mutex_unlock(&cmc.call_lock);
	if (op & USP_F_NOREPLY)
		goto out; /* nothing comes back */
	memcpy(&r, in, sizeof(r));
	if (r.h.op != (USP_REPLY | op)) {
		err = EPROTO;
	} else if (r.err) {
		err = r.err;
	} else {
		if (rep)
			memcpy(rep, in + sizeof(r),
			       (size_t)n - sizeof(r) < replen ? (size_t)n - sizeof(r) : replen);
		if (got)
			*got = (size_t)n - sizeof(r);
	}
out:
	if (in != small)
		free(in);
	return err ? cma_fail(err) : 0;
}
