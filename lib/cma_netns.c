/*
 * cma_netns.c - network namespaces, as the kernel's rdma_cm keeps them:
 * port spaces per namespace, addresses bound and resolved in the
 * namespace of the caller, and connection requests matched to the
 * namespace that holds their destination address.
 *
 * uscmd learns a client's namespace from the NETLINK_ROUTE socket the
 * library makes in its own namespace and passes with its USP_HELLO: the
 * socket answers for the namespace it was made in, whoever uses it, and
 * its SO_NETNS_COOKIE names that namespace. Neither needs a privilege
 * (setns or /proc/PID/ns/net would need CAP_SYS_ADMIN / CAP_SYS_PTRACE,
 * which the service's sandbox does not have). The clients of one
 * namespace share one struct cma_netns (the registry below, by cookie)
 * and its one socket, the first client's. uscmd's own namespace is NULL
 * everywhere: the code paths of a single-namespace host are the old
 * ones, at no cost.
 *
 * Locking: the registry has its own mutex (reg_lock), taken after g.lock
 * when both are held, never the other way. A namespace's socket and
 * address cache are used under g.lock only, so there is one transaction
 * at a time on the socket (nlr_transact reads whatever answers it).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include "lib/cma_int.h"
#include "lib/cma_netlink.h"

#ifndef SO_NETNS_COOKIE
#define SO_NETNS_COOKIE 71 /* Linux 5.14 */
#endif

/* How long a namespace's address list is trusted before a connection
 * request or a bind reads it again, and how soon after a read a miss may
 * read it again (a burst of requests to an unknown address costs one
 * dump, not one each). */
#define ADDRS_MAX_AGE_NS (1000ull * 1000 * 1000)
#define ADDRS_MISS_GAP_NS (50ull * 1000 * 1000)
/* The most addresses uscmd keeps of one client namespace: a user makes
 * namespaces and addresses in them at will, and each of its clients may
 * be in a namespace of its own; 256 x 32 bytes bounds the cache at the
 * clients a uid may have. A namespace with more has no cache: its binds
 * to an address fail (EADDRNOTAVAIL) and requests to it are not its
 * (docs/operators.md). */
#define ADDRS_MAX 256

struct cma_netns {
	struct cma_netns *next;
	uint64_t cookie;
	unsigned refs;
	int nl;                     /* the first client's route socket (dup): the address list */
	/* its IPv4 / IPv6 addresses, as RTM_GETADDR listed them at addrs_at */
	struct nlr_addr *addrs;
	unsigned naddrs, cap;
	int addrs_valid;
	int addrs_over;             /* the last read stopped at ADDRS_MAX */
	cmp_time addrs_at;
	uint64_t reqs;              /* connection requests matched to it */
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cma_netns *reg;
static unsigned reg_n;
/* ours, for the requests whose destination GID is bound to one of our
 * interfaces (not in the registry: NULL is ours) */
static struct cma_netns own = { .nl = -1 };
static uint64_t own_cookie;
static int own_known;

static uint64_t sock_cookie(int fd)
{
	uint64_t c = 0;
	socklen_t l = sizeof(c);

	if (getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &c, &l) < 0 || l != sizeof(c))
		return 0;
	return c;
}

/* uscmd's own namespace: the cookie of a socket made here (once). */
static uint64_t own_ns_cookie(void)
{
	pthread_mutex_lock(&reg_lock);
	if (!own_known) {
		int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		if (s >= 0) {
			own_cookie = sock_cookie(s);
			close(s);
		}
		own_known = 1;
	}
	pthread_mutex_unlock(&reg_lock);
	return own_cookie;
}

/* The namespace of fd, a client's route socket (its SO_NETNS_COOKIE): *out
 * referenced, NULL for ours (and on a kernel without the cookie). fd stays
 * the caller's (the first client's is dup'd). 0, or -1/EINVAL (not a route
 * socket), ENOMEM. */
static int netns_from_fd(int fd, struct cma_netns **out)
{
	uint64_t c, mine;
	struct cma_netns *ns;

	*out = NULL;
	/* Only a route socket: its answers are what the core will trust for
	 * the namespace's routes and addresses. */
	if (!nlr_is_route_socket(fd))
		return cma_fail(EINVAL);
	mine = own_ns_cookie();
	c = sock_cookie(fd);
	if (!c || !mine) {
		/* A kernel before 5.14 names no namespace: every client is
		 * served in ours, as before namespaces were kept. */
		return 0;
	}
	if (c == mine)
		return 0;
	pthread_mutex_lock(&reg_lock);
	for (ns = reg; ns && ns->cookie != c; ns = ns->next)
		;
	if (ns) {
		ns->refs++;
		pthread_mutex_unlock(&reg_lock);
		*out = ns;
		return 0;
	}
	ns = calloc(1, sizeof(*ns));
	if (!ns || (ns->nl = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0) {
		int e = ns ? errno : ENOMEM;

		free(ns);
		pthread_mutex_unlock(&reg_lock);
		return cma_fail(e);
	}
	ns->cookie = c;
	ns->refs = 1;
	ns->next = reg;
	reg = ns;
	reg_n++;
	pthread_mutex_unlock(&reg_lock);
	*out = ns;
	return 0;
}

struct cma_netns *cma_netns_get(struct cma_netns *ns)
{
	if (ns) {
		pthread_mutex_lock(&reg_lock);
		ns->refs++;
		pthread_mutex_unlock(&reg_lock);
	}
	return ns;
}

void cma_netns_put(struct cma_netns *ns)
{
	if (!ns)
		return;
	pthread_mutex_lock(&reg_lock);
	if (--ns->refs) {
		pthread_mutex_unlock(&reg_lock);
		return;
	}
	for (struct cma_netns **pp = &reg; *pp; pp = &(*pp)->next)
		if (*pp == ns) {
			*pp = ns->next;
			break;
		}
	reg_n--;
	pthread_mutex_unlock(&reg_lock);
	close(ns->nl);
	free(ns->addrs);
	free(ns);
}

uint64_t cma_netns_key(const struct cma_netns *ns)
{
	return ns ? ns->cookie : 0;
}

/* ---- the address cache ---------------------------------------------------------- */

static int addr_collect(const struct nlr_addr *a, void *arg)
{
	struct cma_netns *ns = arg;

	if (ns != &own && ns->naddrs == ADDRS_MAX)
		return -E2BIG;
	if (ns->naddrs == ns->cap) {
		unsigned nc = ns->cap ? ns->cap * 2 : 16;
		struct nlr_addr *na = realloc(ns->addrs, nc * sizeof(*na));

		if (!na)
			return -ENOMEM;
		ns->addrs = na;
		ns->cap = nc;
	}
	ns->addrs[ns->naddrs++] = *a;
	return 0;
}

/* g.lock held. Reads the namespace's addresses again; 0 or -errno (the
 * old list is kept invalid: every lookup misses until a read works). */
static int addrs_read(struct cma_netns *ns, cmp_time now)
{
	int e;

	ns->naddrs = 0;
	ns->addrs_at = now;
	{
		/* the first client's socket: it may still read it too (250 ms) */
		struct nlr_sock s = { .fd = ns->nl, .timeout_ms = 250 };

		e = nlr_get_addrs(&s, addr_collect, ns);
	}
	ns->addrs_valid = e == 0;
	ns->addrs_over = e == -E2BIG;
	if (e)
		ns->naddrs = 0; /* a part is no list: every lookup misses */
	return e;
}

static int prefix_has(const uint8_t *net, const uint8_t *a, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;

	if (memcmp(net, a, full))
		return 0;
	return !rest || ((net[full] ^ a[full]) & (uint8_t)(0xFF << (8 - rest))) == 0;
}

/* The entry holding ip (family, 4 or 16 bytes): exactly, or (host_ok)
 * inside a host-scope prefix (127.0.0.1/8 on lo holds all of 127/8, as the
 * kernel's local table says). ifindex > 0: on that interface only. */
static const struct nlr_addr *addrs_find(const struct cma_netns *ns, int family, const uint8_t *ip,
					 int ifindex, int host_ok)
{
	size_t n = family == AF_INET ? 4 : 16;

	for (unsigned i = 0; i < ns->naddrs; i++) {
		const struct nlr_addr *a = &ns->addrs[i];

		if (a->family != family || (ifindex > 0 && a->ifindex != ifindex))
			continue;
		if (a->scope == RT_SCOPE_HOST) {
			if (host_ok && prefix_has(a->addr, ip, a->prefixlen < n * 8 ? a->prefixlen
										    : (unsigned)(n * 8)))
				return a;
			continue;
		}
		if (!memcmp(a->addr, ip, n))
			return a;
	}
	return NULL;
}

static int ip_of(const struct sockaddr *sa, uint8_t ip[16])
{
	memset(ip, 0, 16);
	if (sa->sa_family == AF_INET) {
		memcpy(ip, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		return AF_INET;
	}
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		/* an IPv4-mapped address is the IPv4 one (the CMA header of
		 * an IPv4 request read into an IPv6 id) */
		if (IN6_IS_ADDR_V4MAPPED(a6)) {
			memcpy(ip, a6->s6_addr + 12, 4);
			return AF_INET;
		}
		memcpy(ip, a6, 16);
		return AF_INET6;
	}
	return 0;
}

/* Lookup with a fresh enough list: read it if it is older than
 * ADDRS_MAX_AGE_NS, and on a miss once more unless read within
 * ADDRS_MISS_GAP_NS (miss_gap 0: always, a user's bind). */
static const struct nlr_addr *lookup(struct cma_netns *ns, int family, const uint8_t *ip,
				     int ifindex, int host_ok, cmp_time miss_gap)
{
	cmp_time now = cma_now();
	const struct nlr_addr *a;

	if (!ns->addrs_valid || now - ns->addrs_at > (cmp_time)ADDRS_MAX_AGE_NS)
		addrs_read(ns, now);
	if ((a = addrs_find(ns, family, ip, ifindex, host_ok)))
		return a;
	if (ns->addrs_over)
		return NULL; /* too many to keep: read again only when old */
	if (now - ns->addrs_at >= miss_gap && addrs_read(ns, now) == 0)
		return addrs_find(ns, family, ip, ifindex, host_ok);
	return NULL;
}

int cma_netns_addr_local(struct cma_netns *ns, const struct sockaddr *sa)
{
	uint8_t ip[16];
	int fam;

	if (!ns)
		return 1; /* ours: the existing checks (GID tables, hosts file) decide */
	if (!(fam = ip_of(sa, ip)))
		return 1; /* AF_IB names no IP address */
	/* 127/8 and ::1 are local wherever loopback is up, as ip_dev_find
	 * says for the kernel's bind */
	return lookup(ns, fam, ip, 0, 1, 0) != NULL;
}

/* reg_lock held: the client namespace holding ip (exactly: a loopback
 * destination is anybody's, and stays ours) on interface ifindex (0:
 * any). The lists as they are first (read again only when old), then, on
 * a miss, read again. */
static struct cma_netns *reg_find(int fam, const uint8_t *ip, int ifindex)
{
	for (int pass = 0; pass < 2; pass++)
		for (struct cma_netns *ns = reg; ns; ns = ns->next)
			if (lookup(ns, fam, ip, ifindex, 0, pass ? ADDRS_MISS_GAP_NS : CMP_TIME_NEVER))
				return ns;
	return NULL;
}

struct cma_netns *cma_netns_of_req(struct cma_port *p, const uint8_t dgid[16],
				   const struct sockaddr *ours)
{
	struct cma_netns *hit = NULL;
	uint8_t ip[16];
	int fam, idx, ndev = 0;

	if (!__atomic_load_n(&reg_n, __ATOMIC_RELAXED) || !ours || !(fam = ip_of(ours, ip)))
		return NULL; /* one namespace (or no IP header): ours, as ever */
	/* As the kernel: the namespace of the destination GID's netdev, if
	 * it holds the address there. libibverbs names the netdev by its
	 * index, which is an index in the netdev's own namespace: ours first,
	 * then a client namespace with the address on that index. */
	if (p && dgid && p->gid_ndevs && (idx = cma_port_gid_index(p, dgid)) >= 0)
		ndev = (int)p->gid_ndevs[idx];
	if (ndev && lookup(&own, fam, ip, ndev, 0, ADDRS_MISS_GAP_NS))
		return NULL;
	pthread_mutex_lock(&reg_lock);
	if (ndev)
		hit = reg_find(fam, ip, ndev);
	/* Then, with no netdev known for the GID (or one not holding the
	 * address: a GID several namespaces' addresses share, as the
	 * simulated fabric's hosts file may name them), the namespace holding
	 * the address: ours first (a request to the host's own address costs
	 * no walk of the client namespaces while the cache holds it). */
	if (!hit && !lookup(&own, fam, ip, 0, 0, ADDRS_MISS_GAP_NS))
		hit = reg_find(fam, ip, 0);
	if (hit)
		hit->reqs++;
	pthread_mutex_unlock(&reg_lock);
	return hit;
}

/* ---- uscmd --status -------------------------------------------------------------- */

size_t cma_netns_status(char *buf, size_t size)
{
	size_t o = 0;

#define OUT(...)                                                                        \
	do {                                                                            \
		int k_ = snprintf(buf + o, o < size ? size - o : 0, __VA_ARGS__);       \
		if (k_ > 0)                                                             \
			o = o + (size_t)k_ < size ? o + (size_t)k_ : size - 1;          \
	} while (0)

	pthread_mutex_lock(&g.lock);
	pthread_mutex_lock(&reg_lock);
	OUT("%-20s %-6s %-6s %-6s %-9s %s\n", "netns", "ids", "bound", "listen", "requests",
	    "addresses");
	/* ours first (key 0), then each client namespace by its cookie */
	for (struct cma_netns *ns = NULL, *next = reg;; ns = next, next = ns ? ns->next : NULL) {
		unsigned ids = 0, bound = 0, listen = 0;

		for (const struct cma_id *i = g.ids; i; i = i->next) {
			if (i->caller.ns != ns)
				continue;
			ids++;
			bound += i->bound != 0;
			listen += i->state == ST_LISTEN;
		}
		if (!ns)
			OUT("%-20s %-6u %-6u %-6u %-9s -\n", "0 (uscmd's)", ids, bound, listen, "-");
		else if (ns->addrs_over)
			OUT("%-20llu %-6u %-6u %-6u %-9llu >%u (none kept)\n",
			    (unsigned long long)ns->cookie, ids, bound, listen,
			    (unsigned long long)ns->reqs, ADDRS_MAX);
		else
			OUT("%-20llu %-6u %-6u %-6u %-9llu %u\n", (unsigned long long)ns->cookie, ids,
			    bound, listen, (unsigned long long)ns->reqs, ns->addrs_valid ? ns->naddrs : 0);
		if (!next)
			break;
	}
	pthread_mutex_unlock(&reg_lock);
	pthread_mutex_unlock(&g.lock);
#undef OUT
	return o;
}

/* ---- a client's caller ------------------------------------------------------------ */

int cma_caller_from_fd(struct cma_caller *c, int fd)
{
	struct cma_netns *ns;
	struct cma_resolver *res = NULL;

	if (netns_from_fd(fd, &ns) < 0)
		return -1;
	if (ns) {
		/* the caller's own resolver over its own socket: what it does
		 * with its copy touches its lookups only */
		int mine = fcntl(fd, F_DUPFD_CLOEXEC, 0);

		pthread_mutex_lock(&g.lock);
		res = mine >= 0 ? cma_resolver_new(mine) : NULL;
		pthread_mutex_unlock(&g.lock);
		if (!res) {
			int e = errno ? errno : ENOMEM;

			if (mine >= 0)
				close(mine);
			cma_netns_put(ns);
			return cma_fail(e);
		}
	}
	c->ns = ns;
	c->res = res;
	return 0;
}

void cma_caller_release(struct cma_caller *c)
{
	if (c->res) {
		/* its ids are gone: nothing waits on it but what they left */
		pthread_mutex_lock(&g.lock);
		cma_resolver_free(c->res);
		pthread_mutex_unlock(&g.lock);
		c->res = NULL;
	}
	cma_netns_put(c->ns);
	c->ns = NULL;
}
