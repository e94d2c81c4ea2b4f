/*
 * cma_mode.c - in-process or daemon mode, and who the caller is.
 *
 * In-process mode: this process opens the ports' umad CM agents and runs
 * the CM itself (one process per port, and it needs access to
 * /dev/infiniband/umad*). Daemon mode: uscmd runs the CM for the host and
 * this library is its client (lib/cmc_*.c). The choice is made once, at the
 * first rdma_cm call, and holds for the life of the process (a forked child
 * keeps it).
 */
#define _GNU_SOURCE /* secure_getenv */
#include <linux/capability.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"
#include "lib/cmc_int.h"

static pthread_once_t mode_once = PTHREAD_ONCE_INIT;
static int mode_remote;
static int mode_forced_inproc;
static int mode_known;

/* fork: the child may inherit a lock another thread of the parent held
 * (an RPC in flight, a device lookup). Daemon mode lets a child use the
 * library (its first call opens its own connection to uscmd), so the child
 * starts with fresh locks; in-process mode does not support the child
 * (docs/library.md). */
static void child_after_fork(void)
{
	cmc_pid_forget();
	if (!mode_known || !mode_remote)
		return;
	pthread_mutex_init(&g.lock, NULL);
	pthread_cond_init(&g.cond, NULL);
	cmc_after_fork();
}

__attribute__((constructor)) static void mode_init(void)
{
	pthread_atfork(NULL, NULL, child_after_fork);
}

static void mode_decide(void)
{
	const char *m = getenv("USCM_MODE");

	mode_known = 1;
	if (mode_forced_inproc)
		return;
	if (m && strcmp(m, "inproc") == 0) {
		mode_remote = 0;
	} else if (m && strcmp(m, "daemon") == 0) {
		/* forced: calls fail with ENODEV while no daemon answers */
		mode_remote = 1;
		if (!cmc_probe())
			fprintf(stderr, "uscm: USCM_MODE=daemon but no uscmd answers on %s\n",
				cmc_socket_path());
	} else {
		if (m && *m)
			fprintf(stderr, "uscm: USCM_MODE=%s: expected inproc or daemon\n", m);
		mode_remote = cmc_probe();
	}
}

int cma_remote_known(void)
{
	return mode_known && mode_remote;
}

int cma_remote(void)
{
	pthread_once(&mode_once, mode_decide);
	return mode_remote;
}

void cma_force_inproc(void)
{
	mode_forced_inproc = 1;
	pthread_once(&mode_once, mode_decide);
}

/* This process: capable(CAP_NET_BIND_SERVICE) as the kernel would answer
 * it for a bind below 1024, i.e. the capability in the effective set and
 * this process in the initial user namespace (a capability of a user
 * namespace of its own does not count: rdma_cm checks capable(), not
 * ns_capable()). */
void cma_caller_self(struct cma_caller *c)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	memset(c, 0, sizeof(*c));
	c->self = 1;
	c->uid = geteuid();
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) == 0 && cma_in_initial_userns())
		c->priv = (d[CAP_NET_BIND_SERVICE / 32].effective >> (CAP_NET_BIND_SERVICE % 32)) & 1;
}

int cma_uid_map_read(const char *path, struct cma_uid_extent *e, int max)
{
	struct cma_uid_extent x;
	FILE *f = fopen(path, "re");
	int n = 0;

	if (!f)
		return -1;
	while (n < max && fscanf(f, "%lu %lu %lu", &x.in, &x.out, &x.count) == 3)
		e[n++] = x;
	fclose(f);
	return n;
}

/* Only the initial namespace's map is the identity of the whole range
 * ("0 0 4294967295"), one extent. */
int cma_uid_map_initial(const struct cma_uid_extent *e, int n)
{
	return n == 1 && e[0].in == 0 && e[0].out == 0 && e[0].count == 4294967295UL;
}

int cma_in_initial_userns(void)
{
	struct cma_uid_extent e[2];
	int n = cma_uid_map_read("/proc/self/uid_map", e, 2);

	return n < 0 || cma_uid_map_initial(e, n); /* no /proc: nothing says otherwise */
}

int cma_caller_may_bind_low(const struct cma_caller *c)
{
	struct cma_caller now;

	if (!c->self)
		return c->priv;
	cma_caller_self(&now);
	return now.priv;
}
