/*
 * cma_core.c - library state, devices and ports, the progress thread, event
 * channels and events.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>
#include <sys/random.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"
#include "umad/um_trace.h"

struct cma_global g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.wake_fd = -1,
	.ep_fd = -1,
	.timer_fd = -1,
	.timer_armed = CMP_TIME_NEVER,
	.handover_at = CMP_TIME_NEVER,
};

/* ---- time, randomness, environment ----------------------------------------- */

cmp_time cma_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (cmp_time)ts.tv_sec * 1000000000u + (cmp_time)ts.tv_nsec;
}

uint64_t cma_random(void)
{
	/* splitmix64 over a seed from getrandom (fallback: time and pid). */
	uint64_t z;

	if (!g.rng) {
		if (getrandom(&g.rng, sizeof(g.rng), GRND_NONBLOCK) != sizeof(g.rng))
			g.rng = cma_now() ^ ((uint64_t)getpid() << 32);
	}
	z = (g.rng += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static long env_long(const char *name, long dflt)
{
	const char *v = getenv(name);
	char *end;
	long x;

	if (!v || !*v)
		return dflt;
	x = strtol(v, &end, 0);
	return *end ? dflt : x;
}

/* ---- devices and ports ------------------------------------------------------- */

static int open_devices(void)
{
	struct ibv_device **list;
	int n = 0;

	list = ibv_get_device_list(&n);
	if (!list || n <= 0) {
		if (list)
			ibv_free_device_list(list);
		errno = ENODEV;
		return -1;
	}
	g.devs = calloc((size_t)n, sizeof(*g.devs));
	if (!g.devs) {
		ibv_free_device_list(list);
		errno = ENOMEM;
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct cma_dev *d = &g.devs[g.ndevs];

		d->verbs = ibv_open_device(list[i]);
		if (!d->verbs)
			continue;
		if (ibv_query_device(d->verbs, &d->attr)) {
			ibv_close_device(d->verbs);
			continue;
		}
		/* As librdmacm: one PD per device, shared by every id on it
		 * and handed out as id->pd (programs such as UCX create their
		 * QPs on it); a failure here is retried by cma_dev_pd. */
		d->pd = ibv_alloc_pd(d->verbs);
		snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(list[i]));
		d->guid = be64toh(ibv_get_device_guid(list[i]));
		d->nports = d->attr.phys_port_cnt;
		d->ports = calloc((size_t)d->nports, sizeof(*d->ports));
		if (!d->ports) {
			ibv_close_device(d->verbs);
			continue;
		}
		for (int pn = 0; pn < d->nports; pn++) {
			d->ports[pn].dev = d;
			d->ports[pn].port_num = (uint8_t)(pn + 1);
			pthread_mutex_init(&d->ports[pn].rx_lock, NULL);
			cma_port_init_locked(&d->ports[pn]);
		}
		g.ndevs++;
	}
	ibv_free_device_list(list);
	if (!g.ndevs) {
		free(g.devs);
		g.devs = NULL;
		errno = ENODEV;
		return -1;
	}
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Adds fd to the progress thread's epoll set; tag: the port whose umad fd
 * it is, or &g.wake_fd / &g.timer_fd. */
static int ep_watch(int fd, void *tag, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = tag };

	return epoll_ctl(g.ep_fd, EPOLL_CTL_ADD, fd, &ev);
}

/* The tag of an fd in the set that is neither a port's nor wake_fd /
 * timer_fd (a resolver's rtnetlink socket): its pointer with the low bit
 * set (the structures are aligned), so that the receive loop, which runs
 * without g.lock, tells it from a port's without looking anything up. */
#define EP_TAG_OTHER 1ull

int cma_progress_watch(int fd, void *tag)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uintptr_t)tag | EP_TAG_OTHER };

	return epoll_ctl(g.ep_fd, EPOLL_CTL_ADD, fd, &ev);
}

void cma_progress_unwatch(int fd)
{
	epoll_ctl(g.ep_fd, EPOLL_CTL_DEL, fd, NULL);
}

/* Turns a port's umad fd on (EPOLLIN) or off (0) in the progress thread's
 * set: a thread asleep in epoll_wait sees the change without waking. */
static void ep_port(struct cma_port *p, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = p };

	if (epoll_ctl(g.ep_fd, EPOLL_CTL_MOD, um_port_fd(p->um), &ev) == 0)
		p->ep_on = events != 0;
}

int cma_init_locked(void)
{
	long v;

	if (g.inited)
		return 0;
	if (open_devices() < 0)
		return -1;
	cmp_settings_default(&g.settings);
	um_trace_from_env(&g.settings);
	/* Knobs for tests and for fabrics where the kernel formulas give very
	 * long timers (docs/library.md). */
	if ((v = env_long("USCM_CM_RESPONSE_TIMEOUT", -1)) >= 0 && v <= 31)
		g.settings.cm_response_timeout = (uint8_t)v;
	if ((v = env_long("USCM_CM_RETRIES", -1)) >= 0 && v <= 15)
		g.settings.max_cm_retries = (uint8_t)v;
	if ((v = env_long("USCM_CM_MAX_TIMER_MS", -1)) >= 0)
		g.settings.max_timer_ns = (cmp_time)v * 1000000u;
	if ((v = env_long("USCM_TIMEWAIT_MS", -1)) >= 0)
		g.settings.timewait_ns = (cmp_time)v * 1000000u;
	/* Memory cap on half-open passive connections per port (REQ flood). */
	if ((v = env_long("USCM_MAX_PENDING", -1)) > 0)
		g.settings.max_pending = (unsigned)v;
	g.path_cache_ns = (uint64_t)env_long("USCM_PATH_CACHE_MS", 60000) * 1000000u;
	g.sa_timeout_min_ms = (int)env_long("USCM_SA_TIMEOUT_MIN_MS", 100);
	/* The kernel ucma's net.rdma_ucm.max_backlog (1024). */
	g.max_backlog = (int)env_long("USCM_MAX_BACKLOG", CMA_DEFAULT_BACKLOG);
	if (g.max_backlog <= 0)
		g.max_backlog = CMA_DEFAULT_BACKLOG;
	g.fault_event_alloc = env_long("USCM_FAULT_EVENT_ALLOC", 0) > 0;
	g.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	g.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	g.ep_fd = epoll_create1(EPOLL_CLOEXEC);
	if (g.wake_fd < 0 || g.timer_fd < 0 || g.ep_fd < 0 || ep_watch(g.wake_fd, &g.wake_fd, EPOLLIN) < 0 ||
	    ep_watch(g.timer_fd, &g.timer_fd, EPOLLIN) < 0) {
		int e = errno;

		close_fd(&g.wake_fd);
		close_fd(&g.timer_fd);
		close_fd(&g.ep_fd);
		errno = e;
		return -1;
	}
	g.inited = 1;
	return 0;
}

void cma_deferred_run(void)
{
	/* a job's end may send (the RTU) and a failed send may end a query
	 * whose callback queues a job (a multicast attach): until quiet */
	while (cma_qpj_run_locked(NULL) | cma_tx_run_locked())
		;
}

void cma_unlock(void)
{
	int e = errno;

	cma_deferred_run();
	/* a MAD this call made may sit in another thread's batch: on the wire
	 * before the caller goes on (and perhaps exits) */
	cma_tx_drain_locked();
	pthread_mutex_unlock(&g.lock);
	errno = e;
}

struct ibv_pd *cma_dev_pd(struct cma_dev *d)
{
	struct ibv_pd *pd, *mine;

	pthread_mutex_lock(&g.lock);
	pd = d->pd;
	pthread_mutex_unlock(&g.lock);
	if (pd)
		return pd;
	mine = ibv_alloc_pd(d->verbs); /* a system call: not under the lock */
	if (!mine)
		return NULL;
	pthread_mutex_lock(&g.lock);
	if (!d->pd) {
		d->pd = mine;
		mine = NULL;
	}
	pd = d->pd;
	pthread_mutex_unlock(&g.lock);
	if (mine) /* another thread's came first */
		ibv_dealloc_pd(mine);
	return pd;
}

int cma_port_gid_index(struct cma_port *p, const uint8_t gid[16])
{
	for (int i = 0; i < p->ngids; i++)
		if (!memcmp(p->gids[i].raw, gid, 16))
			return i;
	return -1;
}

struct cma_port *cma_port_of_gid(const uint8_t gid[16], int *gid_index)
{
	static const uint8_t zero[16];

	if (!memcmp(gid, zero, 16))
		return NULL;
	for (int pass = 0; pass < 2; pass++) {
		for (int d = 0; d < g.ndevs; d++) {
			for (int i = 0; i < g.devs[d].nports; i++) {
				struct cma_port *p = &g.devs[d].ports[i];
				int idx;

				if (pass) /* the table may have changed */
					cma_port_refresh(p, 1);
				idx = cma_port_gid_index(p, gid);
				if (idx >= 0) {
					if (gid_index)
						*gid_index = idx;
					return p;
				}
			}
		}
	}
	return NULL;
}

int cma_port_pkey_index(struct cma_port *p, uint16_t pkey)
{
	for (int i = 0; i < p->npkeys; i++)
		if ((p->pkeys[i] & 0x7FFF) == (pkey & 0x7FFF) && (p->pkeys[i] & 0x7FFF))
			return i;
	return -1;
}

/* ---- the progress thread ------------------------------------------------------ */

void cma_kick(void)
{
	uint64_t one = 1;

	if (g.wake_fd >= 0 && write(g.wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is already non-zero, so it is awake. */
	}
}

/* The earliest engine timer of all ports. */
static cmp_time engines_expiry(void)
{
	cmp_time next = CMP_TIME_NEVER;

	for (int d = 0; d < g.ndevs; d++)
		for (int i = 0; i < g.devs[d].nports; i++) {
			struct cma_port *p = &g.devs[d].ports[i];
			cmp_time e = p->eng ? cmp_engine_get_expiry(p->eng) : CMP_TIME_NEVER;

			if (e < next)
				next = e;
		}
	return next;
}

/* Sets timer_fd to `at` (absolute CLOCK_MONOTONIC, as cma_now) or disarms
 * it (CMP_TIME_NEVER). */
static void timer_arm(cmp_time at)
{
	struct itimerspec its;

	if (at == g.timer_armed)
		return;
	memset(&its, 0, sizeof(its));
	if (at != CMP_TIME_NEVER) {
		if (!at)
			at = 1; /* 0 would disarm; any past instant fires at once */
		its.it_value.tv_sec = (time_t)(at / 1000000000u);
		its.it_value.tv_nsec = (long)(at % 1000000000u);
	}
	if (timerfd_settime(g.timer_fd, TFD_TIMER_ABSTIME, &its, NULL) == 0) {
		g.timer_armed = at;
	} else {
		g.timer_armed = CMP_TIME_NEVER;
		cma_kick(); /* let the thread look for itself */
	}
}

/* An engine timer may have moved earlier (a REQ sent, a REP to wait for):
 * the progress thread's timer is re-armed in place (timerfd_settime) and
 * the thread sleeps on. It used to be woken to re-arm its timeout: a
 * context switch per rdma_connect / rdma_accept. */
void cma_kick_timers(void)
{
	cmp_time next = engines_expiry(), r = cma_resolvers_expiry();

	if (r < next)
		next = r;

	if (next < g.timer_armed)
		timer_arm(next);
}

void cma_port_flush(struct cma_port *p)
{
	struct cmp_tx tx;
	struct cmp_event ev;
	int more;

	if (!p || !p->eng)
		return;
	do {
		more = 0;
		while (cmp_engine_poll_tx(p->eng, &tx)) {
			more = 1;
			/* sent once g.lock is released (cma_tx.c) */
			if (cma_tx_cm(p, &tx.dst, tx.mad) < 0 && getenv("USCM_DEBUG"))
				fprintf(stderr, "uscm: %s:%u: MAD dropped: %s\n", p->dev->name,
					p->port_num, strerror(errno));
		}
		while (cmp_engine_poll_event(p->eng, &ev)) {
			more = 1;
			cma_handle_cm_event(p, &ev);
		}
	} while (more);
}

/*
 * Receives what port p has and handles it: called WITHOUT g.lock. umad_recv
 * is a system call, so it runs under the port's rx_lock only (one receiver
 * at a time: the umad port's receive buffer is one, and MADs are handled in
 * the order they came); each MAD is then handled under g.lock. Lock order:
 * rx_lock, then g.lock — never the other way round. What the handling
 * queued (MADs, QP jobs) is left to the caller's next cma_unlock / loop,
 * after rx_lock is released (cma_tx takes rx_lock for port-info changes).
 * 1 when a MAD came.
 */
static int port_rx(struct cma_port *p, struct cma_chan *until)
{
	struct um_rx rx;
	int got = 0, stop = 0;

	pthread_mutex_lock(&p->rx_lock);
	while (!stop && um_port_recv(p->um, &rx) == 1) {
		got = 1;
		pthread_mutex_lock(&g.lock);
		if (rx.agent == UM_AGENT_CM) {
			if (!rx.status)
				cmp_engine_recv(p->eng, &rx.src, rx.mad, rx.len, cma_now());
		} else {
			um_sa_client_handle(p->sa, &rx);
		}
		cma_port_flush(p);
		/* a waiter stops at the MAD that made its event: the next one
		 * (if any) keeps the fd readable for its next poll or, after
		 * the hand-over, the progress thread's — not a receive that
		 * finds nothing (a system call per wait) */
		stop = until && until->head;
		pthread_mutex_unlock(&g.lock);
	}
	pthread_mutex_unlock(&p->rx_lock);
	return got;
}

/* The open port whose umad fd is fd (g.lock held), or NULL. */
static struct cma_port *port_of_fd(int fd)
{
	for (int d = 0; d < g.ndevs; d++)
		for (int i = 0; i < g.devs[d].nports; i++) {
			struct cma_port *p = &g.devs[d].ports[i];

			if (p->eng && um_port_fd(p->um) == fd)
				return p;
		}
	return NULL;
}

int cma_chan_pending(struct rdma_event_channel *channel)
{
	struct cma_chan *c = (struct cma_chan *)channel;
	int r;

	pthread_mutex_lock(&g.lock);
	r = c && c->head != NULL;
	pthread_mutex_unlock(&g.lock);
	return r;
}

int cma_rx_fds(int *fds, int max)
{
	int n = 0;

	pthread_mutex_lock(&g.lock);
	/* from now on the caller receives; the progress thread runs timers */
	g.rx_external = 1;
	for (int d = 0; d < g.ndevs; d++)
		for (int i = 0; i < g.devs[d].nports && n < max; i++)
			if (g.devs[d].ports[i].eng) {
				fds[n++] = um_port_fd(g.devs[d].ports[i].um);
				epoll_ctl(g.ep_fd, EPOLL_CTL_DEL, fds[n - 1], NULL);
				g.devs[d].ports[i].ep_on = 0;
			}
	pthread_mutex_unlock(&g.lock);
	return n;
}

void cma_rx_fd(int fd)
{
	struct cma_port *p;

	pthread_mutex_lock(&g.lock);
	p = port_of_fd(fd);
	pthread_mutex_unlock(&g.lock);
	if (!p)
		return;
	port_rx(p, NULL);
	pthread_mutex_lock(&g.lock);
	cma_kick_timers();
	cma_unlock();
}

#define MAX_POLL 64

/*
 * rdma_get_cm_event's blocking wait (g.lock held on entry and return, not
 * while asleep): polls the channel fd and every port's umad fd, and when a
 * MAD arrives first, receives it in this thread, as the progress thread
 * would. The MAD that makes the awaited event (CONNECT_REQUEST, the REP
 * that makes ESTABLISHED, ...) then costs one wake-up, not two (progress
 * thread, then this one). While it waits, the umad fds are off in the
 * progress thread's epoll set (EPOLL_CTL_MOD, which a thread asleep in
 * epoll_wait sees without waking), so the MAD wakes this thread alone
 * (waking both made one find nothing). Only one
 * waiting thread at a time polls the umad fds (others only their
 * channel). Timers stay the progress thread's: after
 * receiving, cma_kick_timers re-arms it if an engine timer moved earlier.
 * USCM_WAIT_PROGRESS=0: wait on the channel fd only. Returns poll's errno
 * or 0.
 *
 * The hand-over: when the waiter returns, the umad fds stay off in the
 * progress thread's set for USCM_WAIT_HANDOVER_US (default 1000 µs;
 * g.handover_at, on the progress thread's timer), and the progress thread
 * takes them back only if no waiter has polled them again by then. A
 * program that handles an event and waits again — every blocking event
 * loop — so keeps its MADs to itself: with the fds handed back at once
 * (0), the MAD that arrives between two waits (the RTU while the server's
 * thread is still in rdma_accept, the next REQ) woke the progress thread,
 * which then raced the returning waiter for the locks — on one CPU, 2.5
 * more context switches per connection (docs/performance.md). A MAD that
 * nobody waits for is received at most that much later; a second thread
 * asleep in another channel's wait would miss MADs meanwhile, so with
 * one, the fds go back at once.
 */
static int wait_progress_off = -1;
static int wait_progress_busy; /* a waiter polls the umad fds */
static int nwaiting;           /* threads in cma_wait_event */
static cmp_time handover_ns = CMP_TIME_NEVER; /* USCM_WAIT_HANDOVER_US */

/* Gives every open port's umad fd back to the progress thread (g.lock). */
static void handover_now(void)
{
	g.handover_at = CMP_TIME_NEVER;
	if (g.rx_external)
		return;
	for (int d = 0; d < g.ndevs; d++)
		for (int i = 0; i < g.devs[d].nports; i++) {
			struct cma_port *p = &g.devs[d].ports[i];

			if (p->eng && !p->ep_on)
				ep_port(p, EPOLLIN);
		}
}

static int cma_wait_event(struct cma_chan *c)
{
	struct pollfd fds[MAX_POLL];
	struct cma_port *who[MAX_POLL];
	int n = 0, prc, perr, mine, got = 0;

	if (wait_progress_off < 0) {
		const char *e = getenv("USCM_WAIT_PROGRESS");
		long us = env_long("USCM_WAIT_HANDOVER_US", 1000);

		wait_progress_off = e && !strcmp(e, "0");
		handover_ns = us > 0 ? (cmp_time)us * 1000u : 0;
	}
	mine = !wait_progress_off && !wait_progress_busy;
	wait_progress_busy |= mine;
	nwaiting++;
	fds[n].fd = c->ch.fd;
	fds[n++].events = POLLIN;
	for (int d = 0; d < g.ndevs && mine; d++)
		for (int i = 0; i < g.devs[d].nports && n < MAX_POLL; i++)
			if (g.devs[d].ports[i].eng) {
				/* an open port stays open: safe to use unlocked */
				who[n] = &g.devs[d].ports[i];
				fds[n].fd = um_port_fd(g.devs[d].ports[i].um);
				fds[n++].events = POLLIN;
				if (who[n - 1]->ep_on && !g.rx_external)
					ep_port(who[n - 1], 0);
			}
	if (mine)
		g.handover_at = CMP_TIME_NEVER; /* a waiter has them */
	pthread_mutex_unlock(&g.lock);
	prc = poll(fds, (nfds_t)n, -1);
	perr = errno;
	for (int k = 1; k < n && prc > 0; k++)
		if (fds[k].revents & (POLLIN | POLLERR))
			got |= port_rx(who[k], c);
	pthread_mutex_lock(&g.lock);
	nwaiting--;
	if (mine) {
		wait_progress_busy = 0;
		/* The umad fds back to the progress thread, once what woke us
		 * is received (level-triggered: re-enabled before, the MAD
		 * would wake it too; one that arrives later wakes it, as it
		 * should) — at once, or after the hand-over time (above). */
		if (!handover_ns || nwaiting) {
			handover_now();
		} else if (!g.rx_external) {
			g.handover_at = cma_now() + handover_ns;
			if (g.handover_at < g.timer_armed)
				timer_arm(g.handover_at);
		}
	}
	if (got)
		cma_kick_timers();
	return prc < 0 && perr != EINTR ? perr : 0;
}

/*
 * The progress thread: sleeps in epoll_wait on wake_fd, timer_fd (the
 * engines' earliest timer, re-armed in place by whoever moves it) and the
 * ports' umad fds (off while a waiter polls them, off for good when uscmd
 * receives them itself), receives MADs, runs the engines' expired timers
 * and drains the engines.
 */
static void *progress_main(void *arg)
{
	struct epoll_event evs[MAX_POLL];

	(void)arg;
	pthread_mutex_lock(&g.lock);
	for (;;) {
		cmp_time now, next;
		int n;

		/* the QP moves and MADs what came below asked for */
		cma_deferred_run();
		next = engines_expiry();
		if (cma_resolvers_expiry() < next)
			next = cma_resolvers_expiry();
		timer_arm(g.handover_at < next ? g.handover_at : next);
		pthread_mutex_unlock(&g.lock);
		n = epoll_wait(g.ep_fd, evs, MAX_POLL, -1);
		if (n < 0) {
			if (errno != EINTR) {
				/* Nothing sensible to do but retry after a pause. */
				struct timespec pause = { 0, 10000000 };
				nanosleep(&pause, NULL);
			}
			n = 0;
		}
		/* receive first, without g.lock: port_rx takes it per MAD */
		for (int i = 0; i < n; i++)
			if (evs[i].data.ptr != &g.wake_fd && evs[i].data.ptr != &g.timer_fd &&
			    !(evs[i].data.u64 & EP_TAG_OTHER))
				port_rx(evs[i].data.ptr, NULL);
		pthread_mutex_lock(&g.lock);
		for (int i = 0; i < n; i++) {
			uint64_t v;

			if (evs[i].data.u64 & EP_TAG_OTHER) {
				/* checked against the live resolvers: one freed
				 * since epoll_wait returned is no longer there */
				cma_resolver_input((void *)(uintptr_t)(evs[i].data.u64 & ~EP_TAG_OTHER));
			} else if (evs[i].data.ptr == &g.wake_fd) {
				if (read(g.wake_fd, &v, sizeof(v)) < 0) {
					/* raced with another read: nothing pending */
				}
			} else if (evs[i].data.ptr == &g.timer_fd) {
				if (read(g.timer_fd, &v, sizeof(v)) < 0) {
					/* re-armed meanwhile: not expired after all */
				}
				g.timer_armed = CMP_TIME_NEVER; /* one-shot: it has fired */
			}
		}
		now = cma_now();
		/* no waiter took the umad fds again in time: ours again */
		if (g.handover_at <= now)
			handover_now();
		for (int d = 0; d < g.ndevs; d++) {
			for (int i = 0; i < g.devs[d].nports; i++) {
				struct cma_port *p = &g.devs[d].ports[i];

				if (!p->eng)
					continue;
				if (cmp_engine_get_expiry(p->eng) <= now)
					cmp_engine_handle_expiry(p->eng, now);
				cma_port_flush(p);
			}
		}
		cma_resolvers_run(now);
	}
	return NULL;
}

static int start_thread(void)
{
	sigset_t all, old;
	int rc;

	if (g.thread_started)
		return 0;
	/* The thread takes no signal: the application's handlers run elsewhere. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&g.thread, NULL, progress_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		errno = rc;
		return -1;
	}
	pthread_detach(g.thread);
	g.thread_started = 1;
	return 0;
}

int cma_progress_start(void)
{
	return start_thread();
}

/* The port's CM agent. Opening the umad port (umad_open_port,
 * umad_register) is a handful of system calls: done with g.lock dropped,
 * one opener at a time (the others wait for its result), so callers must
 * not keep anything they read from shared state across this call. */
int cma_port_open(struct cma_port *p)
{
	struct cmp_settings s;
	struct um_port *um = NULL;
	/* room for um_port_open's longest line (the CM class taken: about
	 * 260 bytes with a 4-letter device name) and a 64-byte device name */
	char err[512] = "";
	int rc, e, roce = p->roce;

	while (p->opening) {
		cma_deferred_run();
		pthread_cond_wait(&g.cond, &g.lock);
	}
	if (p->eng)
		return 0;
	p->opening = 1;
	pthread_mutex_unlock(&g.lock);
	rc = um_port_open(p->dev->name, p->port_num, UM_OPEN_CM | (roce ? 0 : UM_OPEN_SA), &um, err,
			  sizeof(err));
	e = errno;
	pthread_mutex_lock(&g.lock);
	p->opening = 0;
	pthread_cond_broadcast(&g.cond);
	if (rc < 0) {
		/* Say it once per port: the cause rarely changes. */
		if (p->open_errno != e || strcmp(p->open_err, err)) {
			fprintf(stderr, "uscm: %s\n", err[0] ? err : strerror(e));
			p->open_errno = e;
			snprintf(p->open_err, sizeof(p->open_err), "%s", err);
		}
		errno = e;
		return -1;
	}
	s = g.settings;
	s.local_ca_guid = p->dev->guid;
	s.local_ca_ack_delay = p->dev->attr.local_ca_ack_delay;
	s.seed = cma_random();
	p->eng = cmp_engine_new(&s);
	if (p->eng && !roce && !(p->sa = um_sa_client_new(um, (uint32_t)cma_random()))) {
		cmp_engine_free(p->eng);
		p->eng = NULL;
	}
	e = p->eng ? 0 : ENOMEM;
	if (!e) {
		/* before the fd is watched: the progress thread receives from
		 * it without g.lock (port_rx) */
		p->um = um;
		/* the progress thread sees the new fd without being woken */
		p->ep_on = !g.rx_external;
		if ((!g.rx_external && ep_watch(um_port_fd(um), p, EPOLLIN) < 0) || start_thread() < 0) {
			e = errno;
			if (!g.rx_external)
				epoll_ctl(g.ep_fd, EPOLL_CTL_DEL, um_port_fd(um), NULL);
		}
	}
	if (e) {
		um_sa_client_free(p->sa);
		p->sa = NULL;
		cmp_engine_free(p->eng);
		p->eng = NULL;
		p->um = NULL;
		um_port_close(um); /* a failure path: the lock is kept for it */
		errno = e;
		return -1;
	}
	if (p->sa)
		cma_tx_sa_attach(p); /* its queries leave after g.lock (cma_tx.c) */
	cma_tx_tables(p);            /* USCM_PCAP frames MADs with them */
	return 0;
}

/* ---- event channels ---------------------------------------------------------- */

struct cma_chan *cma_chan_new(int sync)
{
	struct cma_chan *c = calloc(1, sizeof(*c));

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	/* Blocking by default, like the kernel's rdma_cm fd; the user may make
	 * it non-blocking with fcntl. */
	c->ch.fd = eventfd(0, EFD_CLOEXEC);
	if (c->ch.fd < 0) {
		free(c);
		return NULL;
	}
	c->sync = sync;
	return c;
}

static pthread_t quiet_thread;
static int has_quiet_thread;
static unsigned quiet_queued;

void cma_chan_quiet_thread(void)
{
	pthread_mutex_lock(&g.lock);
	quiet_thread = pthread_self();
	has_quiet_thread = 1;
	pthread_mutex_unlock(&g.lock);
}

unsigned cma_chan_quiet_take(void)
{
	unsigned n;

	pthread_mutex_lock(&g.lock);
	n = quiet_queued;
	quiet_queued = 0;
	pthread_mutex_unlock(&g.lock);
	return n;
}

/* The fd is readable exactly while the queue is non-empty (but for the
 * quiet thread's events, above). */
void cma_chan_update(struct cma_chan *c)
{
	if (c->head && !c->signalled) {
		uint64_t one = 1;

		/* The thread in rdma_get_cm_event queued it and dequeues next:
		 * no one else needs to see the fd readable for it (another
		 * thread polling the fd would only race it for the event); the
		 * taker signals what is left when it returns. */
		if (c->has_taker && pthread_equal(c->taker, pthread_self()))
			return;
		/* uscmd's loop: it looks at the queues after each batch (a
		 * write and a read per event saved, and a wake-up) */
		if (has_quiet_thread && pthread_equal(quiet_thread, pthread_self())) {
			quiet_queued++;
			return;
		}
		if (write(c->ch.fd, &one, sizeof(one)) == sizeof(one))
			c->signalled = 1;
	} else if (!c->head && c->signalled) {
		struct pollfd pfd = { .fd = c->ch.fd, .events = POLLIN };
		uint64_t v;
		struct iovec iov = { .iov_base = &v, .iov_len = sizeof(v) };
		ssize_t r;

		/* A read that cannot block whatever the application made of
		 * the fd's O_NONBLOCK: one system call (RWF_NOWAIT, eventfd
		 * since Linux 5.12); else a poll, then the read. */
		r = preadv2(c->ch.fd, &iov, 1, -1, RWF_NOWAIT);
		if (r < 0 && (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS) &&
		    poll(&pfd, 1, 0) == 1 && read(c->ch.fd, &v, sizeof(v)) < 0) {
			/* drained by someone else: fine */
		}
		c->signalled = 0;
	}
}

void cma_chan_free(struct cma_chan *c)
{
	struct cma_event *e;

	if (!c)
		return;
	while ((e = c->head)) {
		c->head = e->next;
		free(e);
	}
	close(c->ch.fd);
	free(c);
}

CMA_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	if (cma_remote())
		return cmc_create_event_channel();
	struct cma_chan *c;

	pthread_mutex_lock(&g.lock);
	if (cma_init_locked() < 0) {
		int e = errno;
		cma_unlock();
		errno = e;
		return NULL;
	}
	cma_unlock();
	c = cma_chan_new(0);
	return c ? &c->ch : NULL;
}

CMA_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (cma_remote()) {
		cmc_destroy_event_channel(channel);
		return;
	}
	struct cma_chan *c = (struct cma_chan *)channel;

	if (!c)
		return;
	pthread_mutex_lock(&g.lock);
	/* Events still queued belong to ids the user should have destroyed;
	 * detach them from their owners so the counts stay right. */
	for (struct cma_event *e = c->head; e; e = e->next)
		if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->owner->backlog_used > 0)
			e->owner->backlog_used--;
	for (struct cma_id *id = g.ids; id; id = id->next)
		if (id->chan == c)
			id->chan = NULL;
	if (c->waiters) {
		/* Another thread still waits in rdma_get_cm_event on it (rping's
		 * event thread does, while main tears down and exits). With the
		 * kernel's rdma_cm that read just never returns; so here: the
		 * waiters sleep for good and the channel is never freed. */
		struct cma_event *e;

		while ((e = c->head)) {
			c->head = e->next;
			free(e);
		}
		c->tail = NULL;
		c->dead = 1;
		cma_unlock();
		return;
	}
	cma_chan_free(c);
	cma_unlock();
}

/* ---- events -------------------------------------------------------------------- */

/* Counts e for the ids it names (see cma_id.nev). */
static void ev_count(struct cma_event *e, int up)
{
	struct cma_id *ids[2] = { e->owner, e->ev.id ? cma_id_of(e->ev.id) : NULL };

	if (ids[1] == ids[0])
		ids[1] = NULL;
	for (int i = 0; i < 2; i++)
		if (ids[i]) {
			if (up)
				ids[i]->nev++;
			else if (ids[i]->nev)
				ids[i]->nev--;
		}
}

void cma_event_queue(struct cma_event *e)
{
	struct cma_id *owner;
	struct cma_chan *c;

	if (!e)
		return;
	owner = e->owner;
	c = owner->chan;
	if (owner->destroying || !c) {
		free(e);
		return;
	}
	e->chan = c;
	e->next = NULL;
	if (c->tail)
		c->tail->next = e;
	else
		c->head = e;
	c->tail = e;
	ev_count(e, 1);
	if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST)
		owner->backlog_used++;
	cma_chan_update(c);
}

/* Removes id's undelivered events (and, for a listener, destroys the new
 * ids of connection requests nobody has seen). */
void cma_purge_events(struct cma_id *id)
{
	struct cma_chan *c = id->chan;
	struct cma_event **pp, *e, *orphans = NULL;

	if (!c || !id->nev)
		return;
	pp = &c->head;
	c->tail = NULL;
	while ((e = *pp)) {
		if (e->owner == id || e->ev.id == &id->id) {
			*pp = e->next;
			ev_count(e, 0);
			if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->owner == id &&
			    e->ev.id != &id->id) {
				/* Its new id was never seen: free it after the walk
				 * (freeing purges this channel too). */
				if (id->backlog_used > 0)
					id->backlog_used--;
				e->next = orphans;
				orphans = e;
				continue;
			}
			free(e);
			continue;
		}
		c->tail = e;
		pp = &e->next;
	}
	cma_chan_update(c);
	while ((e = orphans)) {
		orphans = e->next;
		cma_id_free_locked(cma_id_of(e->ev.id));
		free(e);
	}
}

/* Leaving rdma_get_cm_event: the fd readable again exactly while events
 * wait, including those this thread queued as the taker. */
static void chan_untake(struct cma_chan *c, int taker)
{
	if (taker)
		c->has_taker = 0;
	cma_chan_update(c);
}

CMA_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	if (cma_remote())
		return cmc_get_cm_event(channel, event);
	struct cma_chan *c = (struct cma_chan *)channel;

	if (!c || !event)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	int taker = !c->has_taker; /* the first thread in takes what it queues itself */
	if (taker) {
		c->has_taker = 1;
		c->taker = pthread_self();
	}
	for (;;) {
		struct cma_event *e;

		/* what this thread's receiving queued: the MADs it answers
		 * with, the QP moves that may queue the awaited event */
		cma_deferred_run();
		e = c->head;

		if (e) {
			c->head = e->next;
			if (!c->head)
				c->tail = NULL;
			e->next = NULL;
			ev_count(e, 0);
			e->owner->events_out++;
			if (e->mc)
				e->mc->events_out++;
			if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && e->owner->backlog_used > 0)
				e->owner->backlog_used--;
			chan_untake(c, taker);
			cma_unlock();
			*event = &e->ev;
			return 0;
		}
		if (fcntl(c->ch.fd, F_GETFL) & O_NONBLOCK) {
			chan_untake(c, taker);
			cma_unlock();
			return cma_fail(EAGAIN);
		}
		c->waiters++;
		int perr = cma_wait_event(c);
		c->waiters--;
		if (c->dead) {
			/* destroyed under us: never returns (see above) */
			cma_unlock();
			for (;;)
				pause();
		}
		if (perr) {
			chan_untake(c, taker);
			cma_unlock();
			return cma_fail(perr);
		}
	}
}

CMA_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	if (cma_remote())
		return cmc_ack_cm_event(event);
	struct cma_event *e = (struct cma_event *)event;

	if (!e)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (e->owner->events_out)
		e->owner->events_out--;
	if (e->mc)
		cma_mc_event_acked(e->mc);
	pthread_cond_broadcast(&g.cond);
	cma_unlock();
	free(e);
	return 0;
}

int cma_post_event(struct rdma_cm_id *cm_id, enum rdma_cm_event_type t, int status, uint64_t arg)
{
	struct cma_id *id = cma_id_of(cm_id);
	struct cma_event *e;

	if (!id)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	e = cma_event_heap(id, t, status, 0);
	if (!e) {
		cma_unlock();
		return cma_fail(ENOMEM);
	}
	e->ev.param.arg = arg;
	cma_event_queue(e);
	cma_unlock();
	return 0;
}

CMA_EXPORT int rdma_write_cm_event(struct rdma_cm_id *cm_id, enum rdma_cm_event_type event,
				   int status, uint64_t arg)
{
	if (cma_remote())
		return cmc_write_cm_event(cm_id, event, status, arg);
	/* only USER events may be written (rdma_write_cm_event(3)) */
	if (event != RDMA_CM_EVENT_USER)
		return cma_fail(EINVAL);
	return cma_post_event(cm_id, event, status, arg);
}

/* What librdmacm does for synchronous ids after each asynchronous call:
 * ack the previous event, wait for the next one on the private channel and
 * turn a failure status into errno. */
int cma_sync_wait(struct cma_id *id)
{
	struct rdma_cm_event *ev;

	if (!id->sync)
		return 0;
	if (id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	if (rdma_get_cm_event(id->id.channel, &ev) < 0)
		return -1;
	id->id.event = ev;
	if (ev->status)
		return cma_fail(cma_event_errno(ev));
	return 0;
}

int cma_event_errno(const struct rdma_cm_event *ev)
{
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		return ECONNREFUSED;
	return ev->status < 0 ? -ev->status : ev->status ? ev->status : EINVAL;
}

/* USCM_EXIT_REPORT: what is still alive at exit, on stderr, for leak checks
 * at quiescence (docs/reliability.md): ids the application did not
 * destroy, connections and timers still in the engines. */
static void cma_exit_report(void)
{
	size_t conns = 0, timers = 0;
	unsigned ids = 0;

	if (cma_remote_known()) {
		/* this process holds ids only; connections and timers are
		 * uscmd's (uscmd --status shows them) */
		fprintf(stderr, "uscm: exit: ids=%u (daemon mode: conns and timers are uscmd's)\n",
			cmc_live_ids());
		return;
	}
	for (struct cma_id *id = g.ids; id; id = id->next)
		ids++;
	cma_engine_totals_locked(&conns, &timers);
	fprintf(stderr, "uscm: exit: ids=%u conns=%zu timers=%zu\n", ids, conns, timers);
}

void cma_engine_totals_locked(size_t *conns, size_t *timers)
{
	*conns = *timers = 0;
	for (int d = 0; d < g.ndevs; d++)
		for (int i = 0; i < g.devs[d].nports; i++)
			if (g.devs[d].ports[i].eng) {
				*conns += cmp_engine_conn_count(g.devs[d].ports[i].eng);
				*timers += cmp_engine_timer_count(g.devs[d].ports[i].eng);
			}
}

/* At exit, say goodbye on the wire (DREQ for established connections, REJ
 * for pending ones, an SA leave for multicast groups still joined), as the
 * kernel does when the rdma_cm fd is closed, so peers see a disconnect
 * rather than silence and the SA forgets us. Best effort: skipped when
 * another thread holds the lock. */
int cma_lock_at_exit(unsigned ms)
{
	struct timespec t0, now;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (pthread_mutex_trylock(&g.lock)) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - t0.tv_sec) * 1000000000L + now.tv_nsec - t0.tv_nsec >=
		    (long)ms * 1000000L)
			return 0;
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
	return 1;
}

__attribute__((destructor)) static void cma_fini(void)
{
	int report = getenv("USCM_EXIT_REPORT") != NULL;

	if (cma_remote_known()) {
		/* daemon mode: uscmd says goodbye for us when our socket closes */
		if (report)
			cma_exit_report();
		return;
	}
	/* The report waits out a progress thread busy for a moment (200 ms at
	 * most) rather than silently not being made. */
	if (!g.inited || !cma_lock_at_exit(report ? 200 : 0))
		return;
	if (report)
		cma_exit_report();
	for (struct cma_id *id = g.ids; id; id = id->next) {
		if (id->conn && id->port && id->port->eng) {
			cmp_conn_destroy(id->port->eng, id->conn, cma_now());
			id->conn = NULL;
			cma_port_flush(id->port);
		}
	}
	cma_mc_fini();
	cma_deferred_run();
	cma_tx_drain_locked(); /* the goodbyes leave now */
	pthread_mutex_unlock(&g.lock);
}
