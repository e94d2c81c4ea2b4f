/*
 * cma_stats.c - uscm_get_stats (include/rdma/uscm_stats.h): the CM engines'
 * counters summed over the process's ports, and USCM_STATS=stderr|FILE,
 * which prints them when the process exits.
 */
#define _GNU_SOURCE /* secure_getenv */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"
#include "umad/um_outfile.h"
#include <rdma/uscm_stats.h>

static void sum_locked(struct uscm_stats *s)
{
	memset(s, 0, sizeof(*s));
	for (int d = 0; d < g.ndevs; d++) {
		for (int i = 0; i < g.devs[d].nports; i++) {
			const struct cma_port *p = &g.devs[d].ports[i];
			const struct cmp_stats *st;

			if (!p->eng)
				continue;
			st = cmp_engine_stats(p->eng);
			s->ports++;
			s->rx_mads += st->rx;
			s->tx_mads += st->tx;
			s->rx_malformed += st->rx_malformed;
			s->rx_stray += st->rx_stray;
			s->rx_mismatch += st->rx_mismatch;
			s->rx_spoofed += st->rx_spoofed;
			s->rx_duplicate += st->rx_duplicate;
			s->rx_stale += st->rx_stale;
			/* The engine's, plus the REQs the library refused on an
			 * id's behalf (per-id backlogs live in the library). */
			s->rx_no_listener += st->rx_no_listener + p->no_listener_rejects;
			s->backlog_drops += st->backlog_drops + p->backlog_rejects;
			s->half_open_drops += st->half_open_drops;
			s->retransmits += st->retransmits;
			s->timeouts += st->timeouts;
			s->conns_total += st->conns;
			s->conns_live += cmp_engine_conn_count(p->eng);
			s->conns_peak += st->conns_peak;
			s->half_open += st->half_open;
			s->half_open_peak += st->half_open_peak;
		}
	}
}

CMA_EXPORT int uscm_get_stats(struct uscm_stats *out, size_t size)
{
	if (cma_remote())
		return cmc_uscm_get_stats(out, size);
	struct uscm_stats s;

	if (!out) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&g.lock);
	sum_locked(&s);
	cma_unlock();
	if (size > sizeof(s)) {
		memset((char *)out + sizeof(s), 0, size - sizeof(s));
		size = sizeof(s);
	}
	memcpy(out, &s, size);
	return 0;
}

/* One "name value" line per counter: easy to grep and to diff. */
static void print_stats(FILE *f, const struct uscm_stats *s)
{
#define P(x) fprintf(f, "uscm-stats %-16s %llu\n", #x, (unsigned long long)s->x)
	P(ports);
	P(rx_mads);
	P(tx_mads);
	P(rx_malformed);
	P(rx_stray);
	P(rx_mismatch);
	P(rx_spoofed);
	P(rx_duplicate);
	P(rx_stale);
	P(rx_no_listener);
	P(backlog_drops);
	P(half_open_drops);
	P(retransmits);
	P(timeouts);
	P(conns_total);
	P(conns_live);
	P(conns_peak);
	P(half_open);
	P(half_open_peak);
#undef P
}

static void stats_at_exit(void)
{
	const char *where = secure_getenv("USCM_STATS");
	struct uscm_stats s;
	FILE *f;
	int locked;

	if (!where || !*where || !strcmp(where, "0"))
		return;
	/* The progress thread may hold the lock at exit: wait a little, then
	 * read without it (counters only, nothing is freed here). */
	if (cma_remote()) {
		/* daemon mode: the CM is uscmd's, and so are the counters */
		if (uscm_get_stats(&s, sizeof(s)) < 0) {
			fprintf(stderr, "uscm: USCM_STATS: no counters from uscmd: %s\n", strerror(errno));
			return;
		}
	} else {
		locked = cma_lock_at_exit(100);
		sum_locked(&s);
		if (locked)
			cma_unlock();
	}
	if (!strcmp(where, "stderr") || !strcmp(where, "1")) {
		print_stats(stderr, &s);
		return;
	}
	{
		int fd = um_outfile_open(where, O_APPEND, 0600);

		f = fd >= 0 ? fdopen(fd, "a") : NULL;
		if (!f && fd >= 0)
			close(fd);
	}
	if (!f) {
		fprintf(stderr, "uscm: USCM_STATS=%s: %s\n", where, strerror(errno));
		return;
	}
	fprintf(f, "uscm-stats pid %ld\n", (long)getpid());
	print_stats(f, &s);
	fclose(f);
}

/* Registered when the library loads, so it runs at exit() (and when an
 * unmodified program returns from main) whatever the program does. */
__attribute__((constructor)) static void stats_init(void)
{
	const char *where = secure_getenv("USCM_STATS");

	if (where && *where && strcmp(where, "0"))
		atexit(stats_at_exit);
}
