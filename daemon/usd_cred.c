/*
 * usd_cred.c - who a client is, taken once, when it connects.
 *
 * The peer's pid, uid and gid are the socket's (SO_PEERCRED: the values at
 * connect(2)); the process is pinned by a pidfd (SO_PEERPIDFD, or
 * pidfd_open of that pid on kernels before 6.5) before anything is read
 * of it by pid, and the reads count only if that process is still the one
 * alive afterwards, so a pid reused meanwhile is never asked. A client may
 * bind ports below 1024 when the kernel's rdma_cm would let it:
 * capable(CAP_NET_BIND_SERVICE), i.e. the capability in its effective set
 * AND the process in the initial user namespace (a namespace of its own,
 * `unshare -Ur`, gives a full CapEff that counts for nothing here), with
 * the euid it connected with (a setuid program exec'd since does not lend
 * it its privilege). Nothing of the process is read again later.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "daemon/usd_int.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* A pidfd of the socket's peer, or -1. */
static int peer_pidfd(int fd, pid_t pid)
{
	int pfd = -1;
	socklen_t len = sizeof(pfd);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pfd, &len) == 0 && pfd >= 0)
		return pfd;
	/* before 6.5: the pid, pinned now; checked against the peer below */
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* From /proc/PID/status: the euid and whether CAP_NET_BIND_SERVICE is in
 * CapEff; from /proc/PID/uid_map: whether the process is in the initial
 * user namespace (its map, read from ours, is the identity of the whole
 * range only there). 0 when all three could be read. */
static int read_proc(pid_t pid, uid_t *euid, int *cap, int *initial_ns)
{
	char path[64], line[256];
	int got = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long c;
		unsigned r, e;

		if (sscanf(line, "Uid: %u %u", &r, &e) == 2) {
			*euid = (uid_t)e;
			got |= 1;
		} else if (sscanf(line, "CapEff: %llx", &c) == 1) {
			*cap = (int)((c >> 10) & 1); /* CAP_NET_BIND_SERVICE */
			got |= 2;
		}
	}
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
	{
		struct cma_uid_extent e[2];
		int n = cma_uid_map_read(path, e, 2);

		if (n >= 0) {
			*initial_ns = cma_uid_map_initial(e, n);
			got |= 4;
		}
	}
	return got == 7 ? 0 : -1;
}

int usd_cred_peer(int fd, struct usd_cred *c)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	memset(c, 0, sizeof(*c));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0)
		return -1;
	c->pid = cr.pid;
	c->uid = cr.uid;
	c->gid = cr.gid;
	return 0;
}

void usd_cred_priv(int fd, struct usd_cred *c)
{
	uid_t euid = (uid_t)-1;
	int cap = 0, initial = 0, pfd;

	c->priv = 0;
	pfd = peer_pidfd(fd, c->pid);
	if (pfd < 0)
		return; /* cannot pin the process: no privilege */
	if (read_proc(c->pid, &euid, &cap, &initial) == 0 &&
	    syscall(SYS_pidfd_send_signal, pfd, 0, NULL, 0) == 0)
		c->priv = initial && cap && euid == c->uid;
	close(pfd);
}
