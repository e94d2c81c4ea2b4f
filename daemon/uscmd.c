/*
 * uscmd - uscm's CM as a host service (docs/operators.md).
 *
 * One daemon per host owns the umad CM and SA agents of every port and
 * serves every local process over a UNIX socket (SOCK_SEQPACKET; mode 0666
 * like /dev/infiniband/rdma_cm: isolation is the daemon's — a client acts
 * only on its own ids). Clients are uscm's librdmacm in daemon mode.
 *
 *   uscmd [--socket PATH] [--pcap FILE] [limit options] [-v]
 *   uscmd --status [--socket PATH]
 *
 * The limits (struct usd_limits: per client, per uid, for the host) are in
 * the table `limits` below, each with its option and environment variable.
 *
 * systemd socket activation (uscmd.socket) is used when LISTEN_FDS says so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/usd_int.h"
#include "lib/cma_int.h"

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

/* Every limit: its option (--NAME), its environment variable, where it is
 * kept, its default and its range. Table-driven so that the usage, the
 * options and the environment cannot disagree. */
struct limit_opt {
	struct option opt;              /* its name; the value getopt returns is set in main */
	const char *env;
	uint64_t *u64;
	unsigned *u32;
	uint64_t dflt, min, max;
	const char *what;
};

#define MIB (1024ull * 1024)
static const struct limit_opt limits[] = {
	{ { "max-ids", required_argument, NULL, 0 }, "USCM_MAX_IDS",
	  &usd.lim.client[USD_IDS], NULL, 131072, 1, 1u << 20,
	  "ids per client (EMFILE)" },
	{ { "max-ids-per-uid", required_argument, NULL, 0 }, "USCM_MAX_IDS_PER_UID",
	  &usd.lim.uid[USD_IDS], NULL, 131072, 1, 1u << 20,
	  "ids of all the clients of one uid (EMFILE)" },
	{ { "max-ids-total", required_argument, NULL, 0 }, "USCM_MAX_IDS_TOTAL",
	  &usd.lim.total[USD_IDS], NULL, 524288, 1, (1u << 20) - 1,
	  "ids of the host (ENOMEM)" },
	{ { "reserve-ids", required_argument, NULL, 0 }, "USCM_RESERVE_IDS",
	  &usd.lim.reserve[USD_IDS], NULL, 16384, 0, 1u << 20,
	  "of --max-ids-total, for uid 0 only" },
	{ { "max-chans", required_argument, NULL, 0 }, "USCM_MAX_CHANS",
	  &usd.lim.client[USD_CHANS], NULL, 4096, 1, 1u << 20,
	  "event channels per client (EMFILE)" },
	{ { "max-chans-per-uid", required_argument, NULL, 0 }, "USCM_MAX_CHANS_PER_UID",
	  &usd.lim.uid[USD_CHANS], NULL, 4096, 1, 1u << 20,
	  "event channels of one uid (EMFILE)" },
	{ { "chan-buffer", required_argument, NULL, 0 }, "USCM_CHAN_BUFFER",
	  NULL, &usd.lim.chan_buffer, 131072, 4096, 64 * MIB,
	  "bytes left unread in one channel socket; beyond, events wait in uscmd" },
	{ { "max-queued", required_argument, NULL, 0 }, "USCM_MAX_QUEUED",
	  NULL, &usd.lim.max_queued, 65536, 1, 1u << 20,
	  "events waiting in uscmd for one client" },
	{ { "max-queued-bytes", required_argument, NULL, 0 }, "USCM_MAX_QUEUED_BYTES",
	  &usd.lim.client[USD_QBYTES], NULL, 32 * MIB, 4096, 1ull << 40,
	  "bytes of events waiting in uscmd for one client" },
	{ { "max-queued-bytes-per-uid", required_argument, NULL, 0 }, "USCM_MAX_QUEUED_BYTES_PER_UID",
	  &usd.lim.uid[USD_QBYTES], NULL, 64 * MIB, 4096, 1ull << 40,
	  "the same for all the clients of one uid" },
	{ { "max-queued-bytes-total", required_argument, NULL, 0 }, "USCM_MAX_QUEUED_BYTES_TOTAL",
	  &usd.lim.total[USD_QBYTES], NULL, 256 * MIB, 4096, 1ull << 40,
	  "the same for the host" },
	{ { "reserve-queued-bytes", required_argument, NULL, 0 }, "USCM_RESERVE_QUEUED_BYTES",
	  &usd.lim.reserve[USD_QBYTES], NULL, 32 * MIB, 0, 1ull << 40,
	  "of --max-queued-bytes-total, for uid 0 only" },
	{ { "max-resolves", required_argument, NULL, 0 }, "USCM_MAX_RESOLVES",
	  &usd.lim.client[USD_RESOLVES], NULL, 1024, 1, 1u << 20,
	  "rdma_resolve_addr in flight per client (EAGAIN)" },
	{ { "max-resolves-per-uid", required_argument, NULL, 0 }, "USCM_MAX_RESOLVES_PER_UID",
	  &usd.lim.uid[USD_RESOLVES], NULL, 4096, 1, 1u << 20,
	  "the same per uid (EAGAIN)" },
	{ { "max-routes", required_argument, NULL, 0 }, "USCM_MAX_ROUTES",
	  &usd.lim.client[USD_ROUTES], NULL, 1024, 1, 1u << 20,
	  "rdma_resolve_route in flight per client (EAGAIN)" },
	{ { "max-routes-per-uid", required_argument, NULL, 0 }, "USCM_MAX_ROUTES_PER_UID",
	  &usd.lim.uid[USD_ROUTES], NULL, 4096, 1, 1u << 20,
	  "the same per uid (EAGAIN)" },
	{ { "max-joins", required_argument, NULL, 0 }, "USCM_MAX_JOINS",
	  &usd.lim.client[USD_JOINS], NULL, 1024, 1, 1u << 20,
	  "multicast joins held per client (ENOBUFS)" },
	{ { "max-joins-per-uid", required_argument, NULL, 0 }, "USCM_MAX_JOINS_PER_UID",
	  &usd.lim.uid[USD_JOINS], NULL, 4096, 1, 1u << 20,
	  "the same per uid (ENOBUFS)" },
	{ { "max-clients-per-uid", required_argument, NULL, 0 }, "USCM_MAX_CLIENTS_PER_UID",
	  NULL, &usd.lim.clients_per_uid, 1024, 1, 1u << 20,
	  "connections of one uid; beyond, refused (the library's call fails: EAGAIN)" },
	{ { "status-rate", required_argument, NULL, 0 }, "USCM_STATUS_RATE",
	  NULL, &usd.lim.status_per_sec, 10, 1, 1000000,
	  "--status queries per second per uid, root excepted (EAGAIN)" },
};
#define NLIMITS (sizeof(limits) / sizeof(limits[0]))

static void usage(FILE *f, int rc)
{
	fprintf(f,
		"usage: uscmd [--socket PATH] [--pcap FILE] [limit options, below] [-v]\n"
		"       uscmd --status [--socket PATH]\n"
		"  --socket PATH   where clients connect (default $USCM_SOCKET, else %s)\n"
		"  --pcap FILE     capture every CM and SA MAD of the host (as USCM_PCAP)\n"
		"  --status        print the daemon's clients, ids and counters\n"
		"  --wait-for-ports  serve even when no port's CM agent can be opened now (its class\n"
		"                  taken, the port not up yet; also USCM_WAIT_FOR_PORTS=1): each port\n"
		"                  is tried again by the first request that needs it\n"
		"  -v              a line per client and per bad request on stderr\n"
		"limits (option, environment variable, default: what):\n",
		USP_DEFAULT_SOCKET);
	for (size_t i = 0; i < NLIMITS; i++)
		fprintf(f, "  --%s N  (%s, %llu): %s\n", limits[i].opt.name, limits[i].env,
			(unsigned long long)limits[i].dflt, limits[i].what);
	exit(rc);
}

static void limit_set(const struct limit_opt *l, uint64_t v)
{
	if (l->u64)
		*l->u64 = v;
	else
		*l->u32 = (unsigned)v;
}

/* A limit's value from an option (fatal when bad) or the environment (a
 * warning, and the default). 0 when v is not a number in range. */
static int limit_parse(const struct limit_opt *l, const char *v, uint64_t *out)
{
	unsigned long long n;
	char *end;

	errno = 0;
	n = strtoull(v, &end, 0);
	if (!*v || *end || errno || n < l->min || n > l->max)
		return 0;
	*out = n;
	return 1;
}

static const char *socket_path(const char *opt)
{
	const char *e = getenv("USCM_SOCKET");

	if (opt)
		return opt;
	return e && *e ? e : USP_DEFAULT_SOCKET;
}

static int mkdir_parent(const char *path)
{
	char d[PATH_MAX];
	char *s;

	snprintf(d, sizeof(d), "%s", path);
	s = strrchr(d, '/');
	if (!s || s == d)
		return 0;
	*s = 0;
	for (char *p = d + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(d, 0755);
			*p = '/';
		}
	if (mkdir(d, 0755) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static int listen_socket(const char *path)
{
	struct sockaddr_un sa;
	const char *lf = getenv("LISTEN_FDS"), *lp = getenv("LISTEN_PID");
	int fd;

	/* systemd socket activation: fd 3 */
	if (lf && lp && atoi(lf) >= 1 && atoi(lp) == (int)getpid()) {
		fcntl(3, F_SETFD, FD_CLOEXEC);
		return 3;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "uscmd: socket path too long: %s\n", path);
		return -1;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (mkdir_parent(path) < 0) {
		fprintf(stderr, "uscmd: cannot create the directory of %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	/* a socket file nobody answers on is a dead daemon's: take it over */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		fprintf(stderr, "uscmd: another uscmd serves %s\n", path);
		close(fd);
		return -1;
	}
	unlink(path);
	close(fd);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(path, 0666) < 0 ||
	    listen(fd, 512) < 0) {
		fprintf(stderr, "uscmd: %s: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

static int status_cmd(const char *path)
{
	struct sockaddr_un sa;
	struct {
		struct usp_hdr h;
	} req;
	char *buf = malloc(USP_MAX_REPLY);
	struct usp_reply r;
	ssize_t n;
	int fd;

	if (!buf || strlen(path) >= sizeof(sa.sun_path))
		return 1;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "uscmd: no uscmd on %s: %s\n", path, strerror(errno));
		return 1;
	}
	usp_hdr_init(&req.h, USP_STATUS, sizeof(req), 1, 0);
	/* the daemon answers a uid's queries at --status-rate a second: a
	 * query over it waits for the next one (up to 5 s) */
	for (int tries = 0;; tries++) {
		if (send(fd, &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req) ||
		    (n = recv(fd, buf, USP_MAX_REPLY, 0)) < (ssize_t)sizeof(r)) {
			fprintf(stderr, "uscmd: no answer from %s\n", path);
			return 1;
		}
		memcpy(&r, buf, sizeof(r));
		if (r.err != EAGAIN || tries >= 50)
			break;
		usleep(100 * 1000);
	}
	if (r.err) {
		fprintf(stderr, "uscmd: status: %s\n", strerror(r.err));
		return 1;
	}
	fwrite(buf + sizeof(r), 1, (size_t)n - sizeof(r), stdout);
	close(fd);
	free(buf);
	return 0;
}

/* epoll tags: the listening socket, a client's command socket, a client's
 * library event channel */
enum { TAG_LISTEN = 1, TAG_CMD = 2, TAG_EV = 3, TAG_RX = 0 };

static int ep;

/* A port's umad fd: read in the main loop (cma_rx_fd). */
static void rx_watch(int fd)
{
	struct epoll_event e;

	memset(&e, 0, sizeof(e));
	e.events = EPOLLIN;
	e.data.u64 = ((uint64_t)(unsigned)fd << 2) | TAG_RX;
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

static void ep_add(int fd, int tag, struct usd_client *cl)
{
	struct epoll_event e;

	memset(&e, 0, sizeof(e));
	e.events = EPOLLIN;
	e.data.u64 = ((uint64_t)(uintptr_t)cl << 2) | (uint64_t)tag;
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

static void ready_remove(struct usd_client *cl);

static void drop_client(struct usd_client *cl)
{
	int many = cl->ids_total >= 1024;

	ready_remove(cl);
	epoll_ctl(ep, EPOLL_CTL_DEL, cl->fd, NULL);
	epoll_ctl(ep, EPOLL_CTL_DEL, cl->ec->fd, NULL);
	usd_client_free(cl);
	/* A client that made thousands of ids (and address requests) leaves
	 * their memory free but scattered among what lives on, and malloc
	 * gives back only the top of the heap by itself: the free pages go
	 * back to the host now, once per such client (tens of MB otherwise
	 * held for good after a hostile client's exit). */
	if (many)
		malloc_trim(0);
}

/* ---- fair service ----------------------------------------------------------------------------
 *
 * The command sockets epoll reports readable are not served at once: a
 * client with a request waiting joins its uid's list, and its uid the ring
 * of uids (usd.ring). A round gives each uid of the ring one turn: its
 * first client serves up to TURN requests and goes to the back of its
 * uid's list if it has more. A uid with 64 busy clients thus gets as many
 * turns as one with a single client, and a turn's work is bounded, so a
 * request waits at most about (uids with work) x TURN requests. A client
 * alone in the ring (nobody else known to wait) keeps its turn for up to
 * TURN_ALONE requests: one epoll_wait and one drain of the MAD sockets per
 * TURN requests cost a pipelining client (cmtime's batches of async calls)
 * ~1.5 system calls a connection, and a newcomer epoll has not reported yet
 * waits for at most TURN_ALONE requests. */
#define TURN 4        /* an RTU (no answer) and the call after it fit in a turn */
#define TURN_ALONE 16

static void ready_push(struct usd_client *cl)
{
	struct usd_uid *u = cl->u;

	cl->ready = 1;
	cl->rnext = NULL;
	cl->rprev = u->rtail;
	if (u->rtail)
		u->rtail->rnext = cl;
	else
		u->rhead = cl;
	u->rtail = cl;
	if (!u->in_ring) {
		/* the ring is circular: usd.ring is its next turn */
		u->in_ring = 1;
		if (!usd.ring) {
			u->rnext = u->rprev = u;
			usd.ring = u;
		} else {
			u->rnext = usd.ring;
			u->rprev = usd.ring->rprev;
			usd.ring->rprev->rnext = u;
			usd.ring->rprev = u;
		}
		usd.nring++;
	}
}

static void ring_remove(struct usd_uid *u)
{
	if (!u->in_ring)
		return;
	if (u->rnext == u) {
		usd.ring = NULL;
	} else {
		u->rprev->rnext = u->rnext;
		u->rnext->rprev = u->rprev;
		if (usd.ring == u)
			usd.ring = u->rnext;
	}
	u->in_ring = 0;
	usd.nring--;
}

static void ready_remove(struct usd_client *cl)
{
	struct usd_uid *u = cl->u;

	if (!cl->ready)
		return;
	if (cl->rprev)
		cl->rprev->rnext = cl->rnext;
	else
		u->rhead = cl->rnext;
	if (cl->rnext)
		cl->rnext->rprev = cl->rprev;
	else
		u->rtail = cl->rprev;
	cl->ready = 0;
	cl->rnext = cl->rprev = NULL;
	if (!u->rhead)
		ring_remove(u);
}

static int serve(struct usd_client *cl);

/* One round of the ring: every uid in it at the start gets one turn. */
static void serve_round(void)
{
	unsigned n = usd.nring;

	while (n-- && usd.ring) {
		struct usd_uid *u = usd.ring;
		struct usd_client *cl = u->rhead;
		int k = 0, turn;

		usd.ring = u->rnext; /* the next uid's turn comes next */
		ready_remove(cl);    /* may take u out of the ring */
		turn = usd.nring ? TURN : TURN_ALONE;
		while (k < turn && !cl->dead && serve(cl))
			k++;
		/* a full turn: more may wait (a short one read EAGAIN, and
		 * epoll says when the next comes) */
		if (k == turn && !cl->dead)
			ready_push(cl);
	}
}

/* One request from cl; 1 when one was served, 0 when none was waiting. */
static int serve(struct usd_client *cl)
{
	static uint8_t buf[USP_MAX_REQUEST + 1];
	union {
		char c[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh;
	int fd_in = -1;
	ssize_t n;

	memset(&mh, 0, sizeof(mh));
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = u.c;
	mh.msg_controllen = sizeof(u.c);
	n = recvmsg(cl->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n <= 0) {
		cl->dead = 1;
		return 0;
	}
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int nfd = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));

			for (int i = 0; i < nfd; i++) {
				int f;

				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
				if (fd_in < 0 && i == 0)
					fd_in = f;
				else
					close(f); /* one fd per request at most */
			}
		}
	}
	usd_client_request(cl, buf, (size_t)n > USP_MAX_REQUEST ? USP_MAX_REQUEST : (size_t)n, fd_in,
			   (size_t)n > USP_MAX_REQUEST || (mh.msg_flags & MSG_CTRUNC));
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option fixed[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "pcap", required_argument, NULL, 'p' },
		{ "status", no_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "wait-for-ports", no_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
	};
	struct option opts[sizeof(fixed) / sizeof(fixed[0]) + NLIMITS + 1];
	size_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
	const char *sock = NULL;
	int want_status = 0, lfd, o;
	const char *wv = getenv("USCM_WAIT_FOR_PORTS");
	int wait_ports = wv && atoi(wv) > 0;
	int flush_more = 0; /* a queue's flush ended its turn with room left */
	struct sigaction sa;
	struct rlimit rl;

	memcpy(opts, fixed, sizeof(fixed));
	for (size_t i = 0; i < NLIMITS; i++) {
		opts[nfixed + i] = limits[i].opt;
		opts[nfixed + i].val = 1000 + (int)i;
	}
	memset(&opts[nfixed + NLIMITS], 0, sizeof(opts[0]));
	/* defaults, or the environment (a fabric's daemons get their limits
	 * that way: USCM_MAX_IDS, ...), or the options */
	for (size_t i = 0; i < NLIMITS; i++) {
		const char *v = getenv(limits[i].env);
		uint64_t n = limits[i].dflt;

		if (v && *v && !limit_parse(&limits[i], v, &n)) {
			fprintf(stderr, "uscmd: %s=%s: expected %llu..%llu, using %llu\n", limits[i].env, v,
				(unsigned long long)limits[i].min, (unsigned long long)limits[i].max,
				(unsigned long long)limits[i].dflt);
			n = limits[i].dflt;
		}
		limit_set(&limits[i], n);
	}
	while ((o = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock = optarg; break;
		case 'p': setenv("USCM_PCAP", optarg, 1); break;
		case 'S': want_status = 1; break;
		case 'v': usd.verbose = 1; break;
		case 'W': wait_ports = 1; break;
		case 'h': usage(stdout, 0); break;
		default:
			if (o >= 1000 && o < 1000 + (int)NLIMITS) {
				const struct limit_opt *l = &limits[o - 1000];
				uint64_t n;

				if (!limit_parse(l, optarg, &n)) {
					fprintf(stderr, "uscmd: --%s %s: expected %llu..%llu\n", l->opt.name, optarg,
						(unsigned long long)l->min, (unsigned long long)l->max);
					exit(2);
				}
				limit_set(l, n);
				break;
			}
			usage(stderr, 2);
		}
	}
	if (optind != argc)
		usage(stderr, 2);
	/* a reserve as large as the budget would leave nothing to the others */
	for (int r = 0; r < USD_NRES; r++)
		if (usd.lim.total[r] && usd.lim.reserve[r] >= usd.lim.total[r]) {
			fprintf(stderr, "uscmd: the reserve for root (%llu %s) must be below the host's "
					"budget (%llu)\n",
				(unsigned long long)usd.lim.reserve[r], usd_res_name((enum usd_res)r),
				(unsigned long long)usd.lim.total[r]);
			exit(2);
		}
	if (want_status)
		return status_cmd(socket_path(sock));
	/* the host's CM runs here: never a client of another daemon */
	cma_force_inproc();
	/* one fd per client and per channel */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* the devices: fail early and clearly (no device, no umad access) */
	{
		int n = 0;
		struct ibv_context **l = rdma_get_devices(&n);

		rdma_free_devices(l);
		if (!n) {
			fprintf(stderr, "uscmd: no RDMA device: %s\n", strerror(errno ? errno : ENODEV));
			return 1;
		}
	}
	/* own the CM (and SA client) agent of every port now: this is the
	 * host's CM, and a daemon that cannot open umad (not root, or the
	 * kernel's ib_cm owns the class) should say so at once */
	{
		int opened = 0, ports = 0;

		pthread_mutex_lock(&g.lock);
		if (cma_init_locked() == 0)
			for (int d = 0; d < g.ndevs; d++)
				for (int i = 0; i < g.devs[d].nports; i++, ports++)
					opened += cma_port_open(&g.devs[d].ports[i]) == 0;
		pthread_mutex_unlock(&g.lock);
		if (!opened && !(wait_ports && ports)) {
			fprintf(stderr, "uscmd: no port's CM agent could be opened (%d ports; see above)\n",
				ports);
			return 1;
		}
		if (!opened)
			fprintf(stderr, "uscmd: no port's CM agent could be opened (%d ports; see above): "
					"serving (--wait-for-ports); each is tried again when a request "
					"needs it\n",
				ports);
		if (usd.verbose)
			fprintf(stderr, "uscmd: CM agents open on %d of %d ports\n", opened, ports);
	}
	cma_chan_quiet_thread();
	lfd = listen_socket(socket_path(sock));
	if (lfd < 0)
		return 1;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return 1;
	ep_add(lfd, TAG_LISTEN, NULL);
	/* the ports' umad fds: a MAD is received here, in the thread that
	 * forwards the event it makes (one wake-up, not two: the library's
	 * progress thread polls them too, whoever locks first receives) */
	{
		int fds[64], n = cma_rx_fds(fds, 64);

		for (int i = 0; i < n; i++)
			rx_watch(fds[i]);
		/* and the ones opened later (a port whose open failed here
		 * is tried again by the request that needs it) */
		cma_rx_fds_later(rx_watch);
	}
	if (usd.verbose)
		fprintf(stderr, "uscmd: serving %s\n",
			lfd == 3 && getenv("LISTEN_FDS") ? "the socket systemd passed" : socket_path(sock));
	while (!stop) {
		struct epoll_event evs[256];
		int pending = 0, n;

		/* the events this thread queued (a MAD received, a request
		 * served, a client dropped: cma_chan_quiet_thread) make no fd
		 * readable: forwarded before it sleeps, until none is left */
		while (cma_chan_quiet_take())
			for (struct usd_client *cl = usd.clients; cl; cl = cl->next)
				if (!cl->dead && cma_chan_pending(cl->ec))
					usd_client_events(cl);
		for (struct usd_client *cl = usd.clients; cl; cl = cl->next)
			pending |= cl->qhead != NULL;
		/* requests waiting in the ring: look at the fds without sleeping */
		n = epoll_wait(ep, evs, 256, usd.ring || flush_more ? 0 : pending ? 5 : -1);
		flush_more = 0;
		for (int i = 0; i < n; i++) {
			int tag = (int)(evs[i].data.u64 & 3);
			struct usd_client *cl = (struct usd_client *)(uintptr_t)(evs[i].data.u64 >> 2);

			if (tag == TAG_RX) {
				cma_rx_fd((int)(evs[i].data.u64 >> 2));
			} else if (tag == TAG_LISTEN) {
				int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

				if (cfd >= 0) {
					struct usd_client *nc;
					struct usd_cred cr;

					if (usd_cred_peer(cfd, &cr) < 0) {
						close(cfd);
						continue;
					}
					if (usd_client_refuse(cfd, &cr))
						continue;
					usd_cred_priv(cfd, &cr);
					nc = usd_client_new(cfd, &cr);
					if (!nc) {
						close(cfd);
						continue;
					}
					ep_add(cfd, TAG_CMD, nc);
					ep_add(nc->ec->fd, TAG_EV, nc);
				}
			} else if (tag == TAG_CMD) {
				/* served in its uid's turn (serve_round) */
				if (!cl->ready && !cl->dead)
					ready_push(cl);
			} else if (tag == TAG_EV) {
				if (!cl->dead)
					usd_client_events(cl);
			}
		}
		serve_round();
		for (struct usd_client *cl = usd.clients, *next; cl; cl = next) {
			next = cl->next;
			if (cl->qhead && usd_client_flush(cl) == 2)
				flush_more = 1;
			if (cl->dead)
				drop_client(cl);
		}
	}
	/* SIGTERM: every client's ids go as if it had exited (peers see DREQ /
	 * REJ), then the socket */
	while (usd.clients)
		drop_client(usd.clients);
	if (!getenv("LISTEN_FDS"))
		unlink(socket_path(sock));
	return 0;
}
