/*
 * cma_resolver.c - rdma_resolve_addr's wait for a next hop's neighbour
 * entry, for every id of the process at once: one rtnetlink socket per
 * network namespace (struct cma_resolver), watched by the progress thread,
 * and the outstanding requests in a heap ordered by deadline. A thread per
 * request (each with its own socket, alive for the caller's timeout_ms)
 * let any local user of uscmd make the root daemon hold threads and fds
 * for nothing: requests now cost memory only, and that memory goes with
 * the id.
 *
 * Requests for the same neighbour (family, interface, address) share one
 * struct cma_nwait: one trigger and one look per second for all of them.
 * A neighbour is learned from what arrives on the socket: RTNLGRP_NEIGH
 * notifications (the kernel's own answers to its ARP / ND), and the
 * answers to the RTM_GETNEIGH the resolver sends for each awaited
 * neighbour once a second (the kernel does not notify every state change —
 * an INCOMPLETE entry appears silently — and a notification lost to a full
 * socket buffer, ENOBUFS, must not leave a request waiting out its
 * deadline). A valid entry completes every request waiting for it; an
 * entry that is not INCOMPLETE (none, FAILED, ...) is asked for again, at
 * most once a second, as the kernel keeps asking until its request times
 * out; the deadline ends a request with -ETIMEDOUT.
 *
 * Everything here runs under g.lock: the progress thread reads the socket
 * and runs the deadlines with it held (non-blocking reads and sends, as
 * the channel eventfds), and rdma_resolve_addr's lookups on the same
 * socket (cma_resolver_sock) are made with it held too, so the socket has
 * one reader at a time; a lookup hands the notifications it reads before
 * its answer to cma_resolver_msg, so none is lost.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include "lib/cma_int.h"
#include "lib/cma_netlink.h"

#define NS_PER_S 1000000000ull
/* How often an awaited neighbour is looked at (and asked for again when it
 * is not being resolved): the interval of the thread this replaced. */
#define CHECK_NS NS_PER_S

/* One neighbour entry awaited by one or more requests. */
struct cma_nwait {
	struct cma_nwait *next, **pprev; /* res->nbs, ascending next_check */
	struct cma_nwait *hnext;    /* its bucket of res->tab */
	unsigned hash;
	int family, oif;
	uint8_t ip[16];
	uint16_t state;             /* last known NUD_*; NUD_NONE: none / unknown */
	cmp_time next_check;
	cmp_time last_trigger;      /* 0: never */
	struct cma_nr_req *waiters;
};

struct cma_resolver {
	struct cma_resolver *next;  /* resolvers */
	int fd;                     /* NETLINK_ROUTE, in the namespace it resolves in */
	struct nlr_sock sock;       /* fd, with notifications to cma_resolver_msg */
	int subscribed;             /* RTNLGRP_NEIGH joined (while anything waits) */
	int watched;                /* fd is in the progress thread's epoll set */
	int use_denied;             /* NTF_USE refused (EPERM): datagrams instead */
	int local;                  /* this process's namespace: datagrams may trigger */
	uint32_t seq;
	struct cma_nwait *nbs, **nbs_tail;
	/* the same, by (family, interface, address): what arrives on the
	 * socket names its neighbour, and a client may await thousands */
	struct cma_nwait **tab;
	unsigned tabsz, nnb;
	struct cma_nr_req **heap;   /* min-heap on deadline */
	unsigned n, cap;
};

static struct cma_resolver *resolvers;
static struct cma_resolver *own; /* this process's namespace */

/* ---- the deadline heap ------------------------------------------------------------ */

static void heap_set(struct cma_resolver *r, unsigned i, struct cma_nr_req *q)
{
	r->heap[i] = q;
	q->hidx = i;
}

static void heap_up(struct cma_resolver *r, unsigned i)
{
	struct cma_nr_req *q = r->heap[i];

	while (i) {
		unsigned p = (i - 1) / 2;

		if (r->heap[p]->deadline <= q->deadline)
			break;
		heap_set(r, i, r->heap[p]);
		i = p;
	}
	heap_set(r, i, q);
}

static void heap_down(struct cma_resolver *r, unsigned i)
{
	struct cma_nr_req *q = r->heap[i];

	for (;;) {
		unsigned c = 2 * i + 1;

		if (c >= r->n)
			break;
		if (c + 1 < r->n && r->heap[c + 1]->deadline < r->heap[c]->deadline)
			c++;
		if (q->deadline <= r->heap[c]->deadline)
			break;
		heap_set(r, i, r->heap[c]);
		i = c;
	}
	heap_set(r, i, q);
}

static int heap_add(struct cma_resolver *r, struct cma_nr_req *q)
{
	if (r->n == r->cap) {
		unsigned nc = r->cap ? r->cap * 2 : 16;
		struct cma_nr_req **nh = realloc(r->heap, nc * sizeof(*nh));

		if (!nh)
			return -1;
		r->heap = nh;
		r->cap = nc;
	}
	heap_set(r, r->n++, q);
	heap_up(r, q->hidx);
	return 0;
}

static void heap_del(struct cma_resolver *r, struct cma_nr_req *q)
{
	unsigned i = q->hidx;
	struct cma_nr_req *last = r->heap[--r->n];

	if (i < r->n) {
		heap_set(r, i, last);
		heap_up(r, i);
		heap_down(r, last->hidx);
	}
	if (!r->n) {
		/* 10,000 requests gone: their slots go too */
		free(r->heap);
		r->heap = NULL;
		r->cap = 0;
	}
}

/* ---- neighbours ------------------------------------------------------------------- */

static int alen(int family)
{
	return family == AF_INET ? 4 : 16;
}

static void nb_unlink(struct cma_resolver *r, struct cma_nwait *nb)
{
	if (nb->next)
		nb->next->pprev = nb->pprev;
	else
		r->nbs_tail = nb->pprev;
	*nb->pprev = nb->next;
}

/* Last in the check order: every neighbour is checked CHECK_NS after its
 * previous check, so appending keeps the list sorted. */
static void nb_append(struct cma_resolver *r, struct cma_nwait *nb)
{
	nb->next = NULL;
	nb->pprev = r->nbs_tail;
	*r->nbs_tail = nb;
	r->nbs_tail = &nb->next;
}

static unsigned nb_hash(int family, int oif, const uint8_t *ip)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	h = (h ^ (uint32_t)family) * 16777619u;
	h = (h ^ (uint32_t)oif) * 16777619u;
	for (int i = 0; i < alen(family); i++)
		h = (h ^ ip[i]) * 16777619u;
	return h;
}

static struct cma_nwait *nb_find(struct cma_resolver *r, int family, int oif, const uint8_t *ip)
{
	if (!r->tabsz)
		return NULL;
	for (struct cma_nwait *nb = r->tab[nb_hash(family, oif, ip) & (r->tabsz - 1)]; nb;
	     nb = nb->hnext)
		if (nb->family == family && nb->oif == oif && !memcmp(nb->ip, ip, (size_t)alen(family)))
			return nb;
	return NULL;
}

/* nb into the table, which doubles when it holds two per bucket: 0, or -1
 * (no memory for the first table). */
static int nb_hash_add(struct cma_resolver *r, struct cma_nwait *nb)
{
	if (r->nnb >= 2 * r->tabsz) {
		unsigned nsz = r->tabsz ? r->tabsz * 2 : 64;
		struct cma_nwait **nt = calloc(nsz, sizeof(*nt));

		if (nt) {
			for (unsigned i = 0; i < r->tabsz; i++)
				while (r->tab[i]) {
					struct cma_nwait *x = r->tab[i];

					r->tab[i] = x->hnext;
					x->hnext = nt[x->hash & (nsz - 1)];
					nt[x->hash & (nsz - 1)] = x;
				}
			free(r->tab);
			r->tab = nt;
			r->tabsz = nsz;
		} else if (!r->tabsz) {
			return -1;
		} /* else: longer chains, still right */
	}
	nb->hash = nb_hash(nb->family, nb->oif, nb->ip);
	nb->hnext = r->tab[nb->hash & (r->tabsz - 1)];
	r->tab[nb->hash & (r->tabsz - 1)] = nb;
	r->nnb++;
	return 0;
}

static void nb_hash_del(struct cma_resolver *r, struct cma_nwait *nb)
{
	struct cma_nwait **pp = &r->tab[nb->hash & (r->tabsz - 1)];

	while (*pp != nb)
		pp = &(*pp)->hnext;
	*pp = nb->hnext;
	if (!--r->nnb) {
		free(r->tab); /* as the heap: nothing kept once nothing waits */
		r->tab = NULL;
		r->tabsz = 0;
	}
}

static void subscribe(struct cma_resolver *r, int on)
{
	if (r->subscribed == on)
		return;
	/* Only while something waits: subscribed for good, every neighbour
	 * change of the host would wake the progress thread. */
	if (nlr_membership(r->fd, RTNLGRP_NEIGH, on) == 0 || !on)
		r->subscribed = on;
}

static void nb_free(struct cma_resolver *r, struct cma_nwait *nb)
{
	nb_hash_del(r, nb);
	nb_unlink(r, nb);
	free(nb);
	if (!r->nbs)
		subscribe(r, 0);
}

/* The request leaves its neighbour and the heap (the neighbour goes when
 * nobody waits for it any more). */
static void req_unlink(struct cma_nr_req *q)
{
	struct cma_resolver *r = q->res;
	struct cma_nwait *nb = q->nb;

	heap_del(r, q);
	if (q->nnext)
		q->nnext->nprev = q->nprev;
	*q->nprev = q->nnext;
	q->nb = NULL;
	if (!nb->waiters)
		nb_free(r, nb);
}

/* Asks the kernel to resolve the neighbour now: RTM_NEWNEIGH with NTF_USE
 * (CAP_NET_ADMIN; the kernel's neigh_event_send, what its own address
 * resolution calls); without the right, a datagram to the discard port
 * makes the kernel resolve the next hop as for any traffic. */
static void nb_datagram(const struct cma_resolver *r, const struct cma_nwait *nb)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int s;

	/* an IP socket is made in this process's namespace: from another
	 * namespace's resolver it would ask the wrong kernel tables (that
	 * one has NTF_USE only, and the kernel's own resolution) */
	if (!r->local)
		return;
	memset(&ss, 0, sizeof(ss));
	if (nb->family == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(9);
		memcpy(&a->sin_addr, nb->ip, 4);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(9);
		memcpy(&a->sin6_addr, nb->ip, 16);
		a->sin6_scope_id = (uint32_t)nb->oif;
		sl = sizeof(*a);
	}
	s = socket(nb->family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s >= 0) {
		(void)sendto(s, "", 0, 0, (struct sockaddr *)&ss, sl);
		close(s);
	}
}

static void nb_trigger(struct cma_resolver *r, struct cma_nwait *nb, cmp_time now)
{
	char req[128];
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	size_t n;

	nb->last_trigger = now;
	n = nlr_build_neigh_use(req, sizeof(req), ++r->seq | 0x80000000u, nb->family, nb->oif, nb->ip);
	/* No ACK: only an error comes back (EPERM: use_denied), with the
	 * notifications; an ACK per trigger is nothing but work. */
	if (n)
		((struct nlmsghdr *)(void *)req)->nlmsg_flags &= (uint16_t)~NLM_F_ACK;
	if (!r->use_denied && n && geteuid() == 0 &&
	    sendto(r->fd, req, n, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to)) >= 0)
		return;
	nb_datagram(r, nb);
}

/* The next look at nb: its entry, answered on the socket (cma_resolver_msg). */
static void nb_check(struct cma_resolver *r, struct cma_nwait *nb, cmp_time now)
{
	char req[128];
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	size_t n;

	n = nlr_build_getneigh(req, sizeof(req), ++r->seq | 0x80000000u, nb->family, nb->oif, nb->ip);
	if (!n || sendto(r->fd, req, n, MSG_DONTWAIT, (struct sockaddr *)&to, sizeof(to)) < 0) {
		/* no answer will come: ask the kernel to resolve it as if
		 * the entry were gone (at most once a second, as ever) */
		if (now - nb->last_trigger >= CHECK_NS)
			nb_trigger(r, nb, now);
	}
	nb_unlink(r, nb);
	nb->next_check = now + CHECK_NS;
	nb_append(r, nb);
}

/* What is known of nb's entry now: valid completes its requests (n is the
 * entry), anything but INCOMPLETE (the kernel is not asking) asks again. */
static void nb_learned(struct cma_resolver *r, struct cma_nwait *nb, const struct nlr_neigh *n,
		       cmp_time now)
{
	nb->state = n ? n->state : NUD_NONE;
	if (n && nlr_neigh_valid(n->state)) {
		struct cma_nr_req *q;

		while ((q = nb->waiters)) {
			int last = !q->nnext;

			req_unlink(q); /* frees nb with the last one */
			q->done(q, n, 0);
			if (last)
				break;
		}
		return;
	}
	if (!(nb->state & NUD_INCOMPLETE) && now - nb->last_trigger >= CHECK_NS)
		nb_trigger(r, nb, now);
}

/* ---- the socket ------------------------------------------------------------------- */

/* Every message on the socket that is not a lookup's answer: notifications,
 * the answers to our RTM_GETNEIGH and the errors of our NTF_USE; NULL h:
 * some were lost. */
static void resolver_msg(void *arg, const struct nlmsghdr *h, size_t len)
{
	struct cma_resolver *r = arg;
	cmp_time now = cma_now();
	struct nlr_neigh n;
	int e;

	if (!h) {
		/* ENOBUFS: notifications lost; look at every neighbour now */
		for (struct cma_nwait *nb = r->nbs; nb; nb = nb->next)
			nb->next_check = now;
		cma_kick_timers();
		return;
	}
	if (h->nlmsg_type == NLMSG_ERROR) {
		struct cma_nwait *nb;
		uint16_t type;

		/* the kernel echoes the request: it names the neighbour */
		e = nlr_parse_error_neigh(h, len, &type, &n);
		if (e >= 0 || !n.has_dst || !(nb = nb_find(r, n.family, n.ifindex, n.dst)))
			return;
		if (type == RTM_GETNEIGH) {
			nb_learned(r, nb, NULL, now); /* -ENOENT: no entry */
		} else if (e == -EPERM || e == -EACCES) {
			/* NTF_USE refused (no CAP_NET_ADMIN where the
			 * socket was made): datagrams from now on. Other
			 * errors (ENOBUFS: a full neighbour table) pass:
			 * the next check asks again. */
			r->use_denied = 1;
			nb_datagram(r, nb);
		}
		return;
	}
	if (nlr_parse_neigh(h, len, &n) != 0 || !n.has_dst)
		return; /* another type (RTM_DELNEIGH: the next check sees it) */
	struct cma_nwait *nb = nb_find(r, n.family, n.ifindex, n.dst);
	if (nb)
		nb_learned(r, nb, &n, now);
}

static void resolver_read(struct cma_resolver *r)
{
	union {
		char b[16384];
		struct nlmsghdr h;
	} buf;

	for (;;) {
		ssize_t n = recv(r->fd, buf.b, sizeof(buf.b), MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {
				resolver_msg(r, NULL, 0);
				continue;
			}
			return; /* EAGAIN: all read */
		}
		for (struct nlmsghdr *h = &buf.h; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n))
			resolver_msg(r, h, (size_t)n);
	}
}

/* ---- resolvers -------------------------------------------------------------------- */

struct cma_resolver *cma_resolver_new(int fd)
{
	struct cma_resolver *r = calloc(1, sizeof(*r));

	if (!r)
		return errno = ENOMEM, NULL;
	r->fd = fd;
	r->sock.fd = fd;
	r->sock.other = resolver_msg;
	r->sock.arg = r;
	/* a client's socket, which it may still read (cma_netlink.h) */
	r->sock.timeout_ms = 250;
	r->nbs_tail = &r->nbs;
	/* our requests' sequence numbers have the top bit set: lookups on
	 * the same socket number theirs from the clock (cma_netlink.c,
	 * below 2^31 until 2038), so an answer is never taken for another */
	r->seq = 0x80000000u;
	r->next = resolvers;
	resolvers = r;
	return r;
}

void cma_resolver_free(struct cma_resolver *r)
{
	struct cma_resolver **pp;

	if (!r)
		return;
	while (r->n) {
		struct cma_nr_req *q = r->heap[0];

		req_unlink(q);
		q->done(q, NULL, -ENODEV);
	}
	if (r->watched)
		cma_progress_unwatch(r->fd);
	for (pp = &resolvers; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	if (r == own)
		own = NULL;
	close(r->fd);
	free(r->heap);
	free(r->tab);
	free(r);
}

struct cma_resolver *cma_resolver_of(const struct cma_caller *c)
{
	int fd;

	if (c && c->ns) {
		/* another namespace: the caller's own resolver there (made
		 * with cma_resolver_new from the socket it handed over,
		 * cma_caller_from_fd); never this process's, which would
		 * resolve in the wrong namespace */
		if (!c->res)
			errno = ENODEV;
		return c->res;
	}
	if (own)
		return own;
	fd = nlr_open(0);
	if (fd < 0)
		return NULL;
	{
		/* room for a burst of neighbour notifications (a host's ARP
		 * cache refreshing) before ENOBUFS makes every awaited
		 * neighbour be looked at again; root may go beyond rmem_max */
		int sz = 1 << 20;

		if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
			(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
	if (!(own = cma_resolver_new(fd))) {
		close(fd);
	} else {
		own->local = 1;
		own->sock.timeout_ms = 0; /* ours alone: the default wait */
	}
	return own;
}

const struct nlr_sock *cma_resolver_sock(struct cma_resolver *r)
{
	return r ? &r->sock : NULL;
}

int cma_resolver_wait(struct cma_resolver *r, struct cma_nr_req *q, int family, int oif,
		      const uint8_t ip[16], const struct nlr_neigh *seen, int timeout_ms)
{
	cmp_time now = cma_now();
	struct cma_nwait *nb;
	int fresh = 0;

	if (!r->watched) {
		if (cma_progress_watch(r->fd, r) < 0)
			return -1;
		r->watched = 1;
	}
	if (cma_progress_start() < 0)
		return -1;
	nb = nb_find(r, family, oif, ip);
	if (!nb) {
		if (!(nb = calloc(1, sizeof(*nb))))
			return errno = ENOMEM, -1;
		nb->family = family;
		nb->oif = oif;
		memcpy(nb->ip, ip, (size_t)alen(family));
		nb->state = seen ? seen->state : NUD_NONE;
		nb->next_check = now + CHECK_NS;
		if (nb_hash_add(r, nb) < 0) {
			free(nb);
			return errno = ENOMEM, -1;
		}
		nb_append(r, nb);
		fresh = 1;
	}
	if (timeout_ms <= 0)
		timeout_ms = CMA_RESOLVE_DEFAULT_MS;
	if (timeout_ms > CMA_RESOLVE_MAX_MS)
		timeout_ms = CMA_RESOLVE_MAX_MS;
	q->res = r;
	q->nb = nb;
	q->deadline = now + (cmp_time)timeout_ms * 1000000u;
	if (heap_add(r, q) < 0) {
		q->nb = NULL;
		if (fresh)
			nb_free(r, nb);
		return errno = ENOMEM, -1;
	}
	q->nnext = nb->waiters;
	if (q->nnext)
		q->nnext->nprev = &q->nnext;
	q->nprev = &nb->waiters;
	nb->waiters = q;
	subscribe(r, 1);
	if (fresh) {
		/* a new neighbour: asked for at once unless the kernel asks
		 * already, and looked at once more now that the socket is
		 * subscribed: an answer that came between the caller's
		 * lookup and the subscription was notified to nobody */
		if (!(nb->state & NUD_INCOMPLETE))
			nb_trigger(r, nb, now);
		nb_check(r, nb, now);
	}
	cma_kick_timers();
	return 0;
}

void cma_resolver_neigh(struct cma_resolver *r, const struct nlr_neigh *n)
{
	struct cma_nwait *nb;

	if (r && n->has_dst && (nb = nb_find(r, n->family, n->ifindex, n->dst)))
		nb_learned(r, nb, n, cma_now());
}

void cma_resolver_cancel(struct cma_nr_req *q)
{
	if (q->nb)
		req_unlink(q);
}

size_t cma_resolver_count(void)
{
	size_t n = 0;

	for (struct cma_resolver *r = resolvers; r; r = r->next)
		n += r->n;
	return n;
}

/* ---- the progress thread's side ----------------------------------------------------- */

cmp_time cma_resolvers_expiry(void)
{
	cmp_time next = CMP_TIME_NEVER;

	for (struct cma_resolver *r = resolvers; r; r = r->next) {
		if (r->n && r->heap[0]->deadline < next)
			next = r->heap[0]->deadline;
		if (r->nbs && r->nbs->next_check < next)
			next = r->nbs->next_check;
	}
	return next;
}

void cma_resolvers_run(cmp_time now)
{
	for (struct cma_resolver *r = resolvers; r; r = r->next) {
		while (r->n && r->heap[0]->deadline <= now) {
			struct cma_nr_req *q = r->heap[0];

			req_unlink(q);
			q->done(q, NULL, -ETIMEDOUT);
		}
		while (r->nbs && r->nbs->next_check <= now)
			nb_check(r, r->nbs, now);
	}
}

int cma_resolver_input(void *tag)
{
	for (struct cma_resolver *r = resolvers; r; r = r->next)
		if (r == tag) {
			resolver_read(r);
			return 1;
		}
	return 0;
}
