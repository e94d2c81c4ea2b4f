#define _GNU_SOURCE
/*
 * uscm-bench: context switches per connection, the cost the latency table
 * does not show. A voluntary switch is a thread that blocked and was woken
 * again (a wake-up: a hand-off between threads or processes, a poll that
 * slept); an involuntary one is a thread preempted while it could run.
 * A role samples its own process (every thread: RUSAGE_SELF) around the
 * connect step and, in daemon mode, the uscmd it talks to (every thread of
 * it, from /proc), and reports both per connection.
 *
 * With them, the CPU time the same threads used (user + system): unlike
 * latency, it does not depend on where and when the scheduler runs the
 * two processes, so it is the stable measure of what a connection costs
 * (on a VM the wall-clock floor itself can be bimodal). A uscmd's
 * comes from /proc/PID/task/TID/schedstat (nanoseconds on the CPU; its
 * stat's utime/stime count 10 ms ticks, too coarse for a few µs).
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench.h"

static const char *const side_name[BENCH_CSW_SIDES] = { "client", "server", "client_uscmd",
							"server_uscmd" };

void bench_csw_self(struct bench_csw *c)
{
	struct rusage ru;

	memset(c, 0, sizeof(*c));
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		c->wake = (double)ru.ru_nvcsw;
		c->preempt = (double)ru.ru_nivcsw;
		/* the total only: the kernel splits it into user and system by
		 * tick samples, meaningless for a few µs per connection */
		c->cpu_us = (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec +
			    (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
		c->valid = 1;
	}
}

void bench_cpu_emit(FILE *f, const char *role, const struct bench_csw *a, const struct bench_csw *b, size_t n)
{
	char k[64];

	if (!a->valid || !b->valid || !n)
		return;
	snprintf(k, sizeof(k), "cpu_%s_us", role);
	bench_kv_emit(f, k, (b->cpu_us - a->cpu_us) / (double)n);
}

/* The uscmd this process talks to (daemon mode): its pid from the
 * socket's peer credentials, as uscmd itself learns its clients'. */
static pid_t daemon_pid(void)
{
	static pid_t pid = -1;
	const char *mode = getenv("USCM_MODE"), *path = getenv("USCM_SOCKET");
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	struct ucred cr;
	socklen_t cl = sizeof(cr);
	int fd;

	if (pid >= 0)
		return pid;
	pid = 0;
	if (!mode || strcmp(mode, "daemon") || !path || strlen(path) >= sizeof(a.sun_path))
		return 0;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0)
		pid = cr.pid;
	if (fd >= 0)
		close(fd);
	return pid;
}

void bench_csw_daemon(struct bench_csw *c)
{
	pid_t pid = daemon_pid();
	char path[64], line[256];
	struct dirent *d;
	DIR *dir;

	memset(c, 0, sizeof(*c));
	if (pid <= 0)
		return;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if (!(dir = opendir(path)))
		return;
	while ((d = readdir(dir))) {
		FILE *f;
		char p[300];

		if (d->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "/proc/%d/task/%s/schedstat", (int)pid, d->d_name);
		if ((f = fopen(p, "r"))) {
			unsigned long long ns;

			if (fscanf(f, "%llu", &ns) == 1)
				c->cpu_us += (double)ns / 1e3;
			fclose(f);
		}
		snprintf(p, sizeof(p), "/proc/%d/task/%s/status", (int)pid, d->d_name);
		if (!(f = fopen(p, "r")))
			continue;
		while (fgets(line, sizeof(line), f)) {
			if (!strncmp(line, "voluntary_ctxt_switches:", 24))
				c->wake += strtod(line + 24, NULL);
			else if (!strncmp(line, "nonvoluntary_ctxt_switches:", 27))
				c->preempt += strtod(line + 27, NULL);
		}
		fclose(f);
	}
	closedir(dir);
	c->valid = 1;
}

void bench_csw_emit(FILE *f, int side, const struct bench_csw *a, const struct bench_csw *b, size_t n)
{
	char k[64];

	if (!a->valid || !b->valid || !n)
		return;
	snprintf(k, sizeof(k), "csw_%s_wake", side_name[side]);
	bench_kv_emit(f, k, (b->wake - a->wake) / (double)n);
	snprintf(k, sizeof(k), "csw_%s_preempt", side_name[side]);
	bench_kv_emit(f, k, (b->preempt - a->preempt) / (double)n);
	snprintf(k, sizeof(k), "csw_%s_cpu", side_name[side]);
	bench_kv_emit(f, k, (b->cpu_us - a->cpu_us) / (double)n);
}

int bench_csw_parse(struct bench_run *r, const char *key, double v)
{
	for (int s = 0; s < BENCH_CSW_SIDES; s++) {
		size_t l = strlen(side_name[s]);

		if (strncmp(key, "csw_", 4) || strncmp(key + 4, side_name[s], l) || key[4 + l] != '_')
			continue;
		if (!strcmp(key + 5 + l, "wake"))
			r->csw[s].wake = v;
		else if (!strcmp(key + 5 + l, "preempt"))
			r->csw[s].preempt = v;
		else if (!strcmp(key + 5 + l, "cpu"))
			r->csw[s].cpu_us = v;
		else
			continue; /* "client" is a prefix of "client_uscmd" */
		r->csw[s].valid = 1;
		return 1;
	}
	return 0;
}

void bench_csw_print(FILE *f, const struct bench_run *r)
{
	int any = 0;

	for (int s = 0; s < BENCH_CSW_SIDES; s++)
		any |= r->csw[s].valid;
	if (!any)
		return;
	fprintf(f, "  %s context switches per connection (connect step; wake-ups + preemptions):", r->what);
	for (int s = 0; s < BENCH_CSW_SIDES; s++)
		if (r->csw[s].valid)
			fprintf(f, " %s %.1f + %.1f", side_name[s], r->csw[s].wake, r->csw[s].preempt);
	fprintf(f, "\n");
	fprintf(f, "  %s CPU per connection (connect step; user + system, every thread):", r->what);
	for (int s = 0; s < BENCH_CSW_SIDES; s++) {
		if (!r->csw[s].valid)
			continue;
		fprintf(f, " %s %.1f us", side_name[s], r->csw[s].cpu_us);
	}
	fprintf(f, "\n");
}

/* CPU of every thread of both sides (and their uscmds) per connection. */
double bench_cpu_total(const struct bench_run *r)
{
	double t = 0;

	for (int s = 0; s < BENCH_CSW_SIDES; s++)
		if (r->csw[s].valid)
			t += r->csw[s].cpu_us;
	return t;
}

/* One row per side and kind, the figure in total_us's column:
 * uscm,serial,N,1,csw_client_wake,2.8,,,,,, */
void bench_csw_csv(FILE *f, const struct bench_run *r, const char *mode)
{
	for (int s = 0; s < BENCH_CSW_SIDES; s++) {
		if (!r->csw[s].valid)
			continue;
		fprintf(f, "%s,%s,%zu,%zu,csw_%s_wake,%.2f,,,,,,\n", r->what, mode, r->n, r->window,
			side_name[s], r->csw[s].wake);
		fprintf(f, "%s,%s,%zu,%zu,csw_%s_preempt,%.2f,,,,,,\n", r->what, mode, r->n, r->window,
			side_name[s], r->csw[s].preempt);
		fprintf(f, "%s,%s,%zu,%zu,cpu_%s_us,%.2f,,,,,,\n", r->what, mode, r->n, r->window,
			side_name[s], r->csw[s].cpu_us);
	}
}
