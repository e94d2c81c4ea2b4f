/*
 * uscmd - uscm's CM as a host service (docs/operators.md).
 *
 * One daemon per host owns the umad CM and SA agents of every port and
 * serves every local process over a UNIX socket (SOCK_SEQPACKET; mode 0666
 * like /dev/infiniband/rdma_cm: isolation is the daemon's — a client acts
 * only on its own ids). Clients are uscm's librdmacm in daemon mode.
 *
 *   uscmd [--socket PATH] [--pcap FILE] [--max-ids N] [--max-chans N] [--max-queued N] [-v]
 *   uscmd --status [--socket PATH]
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

static void usage(FILE *f, int rc)
{
	fprintf(f,
		"usage: uscmd [--socket PATH] [--pcap FILE] [--max-ids N] [--max-chans N]\n"
		"             [--max-queued N] [-v]\n"
		"       uscmd --status [--socket PATH]\n"
		"  --socket PATH   where clients connect (default $USCM_SOCKET, else %s)\n"
		"  --pcap FILE     capture every CM and SA MAD of the host (as USCM_PCAP)\n"
		"  --max-ids N     ids per client (default 131072)\n"
		"  --max-chans N   event channels per client (default 4096)\n"
		"  --max-queued N  events held for a client that does not read them (default 65536)\n"
		"  --status        print the daemon's clients, ids and counters\n"
		"  -v              a line per client and per bad request on stderr\n",
		USP_DEFAULT_SOCKET);
	exit(rc);
}

static const char *socket_path(const char *opt)
{
	const char *e = getenv("USCM_SOCKET");

	if (opt)
		return opt;
	return e && *e ? e : USP_DEFAULT_SOCKET;
}

static unsigned parse_limit(const char *name, const char *v)
{
	unsigned long n;
	char *end;

	n = strtoul(v, &end, 0);
	if (!*v || *end || n == 0 || n > 1u << 20) {
		fprintf(stderr, "uscmd: %s %s: expected 1..%u\n", name, v, 1u << 20);
		exit(2);
	}
	return (unsigned)n;
}

static unsigned env_limit(const char *name, unsigned dflt)
{
	const char *v = getenv(name);
	unsigned long n;
	char *end;

	if (!v || !*v)
		return dflt;
	n = strtoul(v, &end, 0);
	if (*end || n == 0 || n > 1u << 20) {
		fprintf(stderr, "uscmd: %s=%s: expected 1..%u, using %u\n", name, v, 1u << 20, dflt);
		return dflt;
	}
	return (unsigned)n;
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
	if (send(fd, &req, sizeof(req), MSG_NOSIGNAL) != sizeof(req) ||
	    (n = recv(fd, buf, USP_MAX_REPLY, 0)) < (ssize_t)sizeof(r)) {
		fprintf(stderr, "uscmd: no answer from %s\n", path);
		return 1;
	}
	memcpy(&r, buf, sizeof(r));
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

static void ep_add(int fd, int tag, struct usd_client *cl)
{
	struct epoll_event e;

	memset(&e, 0, sizeof(e));
	e.events = EPOLLIN;
	e.data.u64 = ((uint64_t)(uintptr_t)cl << 2) | (uint64_t)tag;
	epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
}

static void drop_client(struct usd_client *cl)
{
	int many = cl->ids_total >= 1024;

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
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "pcap", required_argument, NULL, 'p' },
		{ "max-ids", required_argument, NULL, 'i' },
		{ "max-chans", required_argument, NULL, 'c' },
		{ "max-queued", required_argument, NULL, 'q' },
		{ "status", no_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sock = NULL;
	int want_status = 0, lfd, o;
	struct sigaction sa;
	struct rlimit rl;

	/* defaults, or USCM_MAX_IDS / USCM_MAX_CHANS / USCM_MAX_QUEUED from the
	 * environment (a fabric's daemons get their limits that way) */
	usd.lim.max_ids = env_limit("USCM_MAX_IDS", 131072);
	usd.lim.max_chans = env_limit("USCM_MAX_CHANS", 4096);
	usd.lim.max_queued = env_limit("USCM_MAX_QUEUED", 65536);
	while ((o = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (o) {
		case 's': sock = optarg; break;
		case 'p': setenv("USCM_PCAP", optarg, 1); break;
		case 'i': usd.lim.max_ids = parse_limit("--max-ids", optarg); break;
		case 'c': usd.lim.max_chans = parse_limit("--max-chans", optarg); break;
		case 'q': usd.lim.max_queued = parse_limit("--max-queued", optarg); break;
		case 'S': want_status = 1; break;
		case 'v': usd.verbose = 1; break;
		case 'h': usage(stdout, 0); break;
		default: usage(stderr, 2);
		}
	}
	if (optind != argc)
		usage(stderr, 2);
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
		if (!opened) {
			fprintf(stderr, "uscmd: no port's CM agent could be opened (%d ports; see above)\n",
				ports);
			return 1;
		}
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

		for (int i = 0; i < n; i++) {
			struct epoll_event e;

			memset(&e, 0, sizeof(e));
			e.events = EPOLLIN;
			e.data.u64 = ((uint64_t)(unsigned)fds[i] << 2) | TAG_RX;
			epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e);
		}
	}
	if (usd.verbose)
		fprintf(stderr, "uscmd: serving %s\n",
			lfd == 3 && getenv("LISTEN_FDS") ? "the socket systemd passed" : socket_path(sock));
	while (!stop) {
		struct epoll_event evs[64];
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
		n = epoll_wait(ep, evs, 64, pending ? 5 : -1);
		for (int i = 0; i < n; i++) {
			int tag = (int)(evs[i].data.u64 & 3);
			struct usd_client *cl = (struct usd_client *)(uintptr_t)(evs[i].data.u64 >> 2);

			if (tag == TAG_RX) {
				cma_rx_fd((int)(evs[i].data.u64 >> 2));
			} else if (tag == TAG_LISTEN) {
				int cfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

				if (cfd >= 0) {
					struct usd_client *nc = usd_client_new(cfd);

					if (!nc) {
						close(cfd);
						continue;
					}
					ep_add(cfd, TAG_CMD, nc);
					ep_add(nc->ec->fd, TAG_EV, nc);
				}
			} else if (tag == TAG_CMD) {
				/* a few requests per wake-up: a client's RTU request
				 * (no answer) is followed by its next call */
				for (int k = 0; k < 8 && !cl->dead && serve(cl); k++)
					;
			} else if (tag == TAG_EV) {
				if (!cl->dead)
					usd_client_events(cl);
			}
		}
		for (struct usd_client *cl = usd.clients, *next; cl; cl = next) {
			next = cl->next;
			if (cl->qhead)
				usd_client_flush(cl);
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
