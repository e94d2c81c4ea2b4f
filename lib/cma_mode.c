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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"

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
				getenv("USCM_SOCKET") ? getenv("USCM_SOCKET") : "/run/uscm/uscmd.sock");
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

/* uid 0, or CAP_NET_BIND_SERVICE (bit 10) in the effective capability
 * set of process pid (0: this one). */
int cma_privileged(pid_t pid, uid_t uid)
{
	char path[64], line[256];
	FILE *f;
	int ok = 0;

	if (uid == 0)
		return 1;
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/status");
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long cap;

		if (sscanf(line, "CapEff: %llx", &cap) == 1) {
			ok = (cap >> 10) & 1;
			break;
		}
	}
	fclose(f);
	return ok;
}

int cma_caller_privileged(void)
{
	if (g.caller_priv >= 0)
		return g.caller_priv;
	return cma_privileged(0, geteuid());
}
