/*
 * cma_addr.c - addresses, ports and routes: rdma_bind_addr (port spaces,
 * REUSEADDR / AFONLY), rdma_resolve_addr (ibacm hosts file, local
 * interfaces, loopback, RoCE GID tables), rdma_resolve_route (SA PathRecord
 * with a path cache shared by ids, or a locally built RoCE path),
 * rdma_set_option and the port getters.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if_arp.h>
#include <netpacket/packet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include "cm_proto/cmp_map.h"
#include "lib/cma_int.h"
#include "lib/cmc.h"
#include "lib/cma_netlink.h"

#define EPHEMERAL_LO 32768
#define EPHEMERAL_HI 60999

/* ---- socket addresses ---------------------------------------------------------- */

int cma_addr_len(const struct sockaddr *a)
{
	switch (a->sa_family) {
	case AF_INET: return sizeof(struct sockaddr_in);
	case AF_INET6: return sizeof(struct sockaddr_in6);
	case AF_IB: return sizeof(struct sockaddr_ib);
	default: return 0;
	}
}

int cma_addr_any(const struct sockaddr *a)
{
	switch (a->sa_family) {
	case AF_INET:
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr == htonl(INADDR_ANY);
	case AF_INET6:
		return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)a)->sin6_addr);
	case AF_IB:
		return ib_addr_any(&((const struct sockaddr_ib *)a)->sib_addr);
	default:
		return 1;
	}
}

int cma_addr_loopback(const struct sockaddr *a)
{
	switch (a->sa_family) {
	case AF_INET:
		return (ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr) >> 24) == IN_LOOPBACKNET;
	case AF_INET6:
		return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)a)->sin6_addr);
	case AF_IB:
		return ib_addr_loopback(&((const struct sockaddr_ib *)a)->sib_addr);
	default:
		return 0;
	}
}

uint16_t cma_addr_port(const struct sockaddr *a)
{
	switch (a->sa_family) {
	case AF_INET: return ntohs(((const struct sockaddr_in *)a)->sin_port);
	case AF_INET6: return ntohs(((const struct sockaddr_in6 *)a)->sin6_port);
	case AF_IB: {
		/* The SID's low 16 bits under its mask, as the kernel's
		 * cma_port: a mask without the port bits names no port (a
		 * bind then takes an ephemeral one). */
		const struct sockaddr_ib *sib = (const struct sockaddr_ib *)a;

		return (uint16_t)(be64toh(sib->sib_sid) & be64toh(sib->sib_sid_mask) &
				  RDMA_IB_IP_PORT_MASK);
	}
	default: return 0;
	}
}

void cma_addr_set_port(struct sockaddr *a, uint16_t port)
{
	switch (a->sa_family) {
	case AF_INET: ((struct sockaddr_in *)a)->sin_port = htons(port); break;
	case AF_INET6: ((struct sockaddr_in6 *)a)->sin6_port = htons(port); break;
	case AF_IB: {
		struct sockaddr_ib *sib = (struct sockaddr_ib *)a;
		uint64_t sid = be64toh(sib->sib_sid);
		sib->sib_sid = htobe64((sid & ~RDMA_IB_IP_PORT_MASK) | port);
		sib->sib_sid_mask = htobe64(~0ULL);
		break;
	}
	default: break;
	}
}

int cma_addr_equal(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	switch (a->sa_family) {
	case AF_INET:
		return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
		       ((const struct sockaddr_in *)b)->sin_addr.s_addr;
	case AF_INET6:
		return !memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
			       &((const struct sockaddr_in6 *)b)->sin6_addr, 16);
	case AF_IB:
		return !ib_addr_cmp(&((const struct sockaddr_ib *)a)->sib_addr,
				    &((const struct sockaddr_ib *)b)->sib_addr);
	default:
		return 0;
	}
}

/* The 16-byte form of an IP address: IPv4 as ::ffff:a.b.c.d (the RoCE GID
 * of that address), IPv6 as itself. */
static void ip_as_gid(const struct sockaddr *a, uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (a->sa_family == AF_INET) {
		gid[10] = gid[11] = 0xFF;
		memcpy(gid + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
	} else if (a->sa_family == AF_INET6) {
		memcpy(gid, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
	} else if (a->sa_family == AF_IB) {
		memcpy(gid, &((const struct sockaddr_ib *)a)->sib_addr, 16);
	}
}

/* ---- the ibacm hosts file -------------------------------------------------------- */

struct host_ent {
	int family;         /* AF_INET / AF_INET6; 0: a host name */
	uint8_t addr[16];
	uint8_t gid[16];
};

static struct {
	char path[512];
	struct timespec mtime;
	off_t size;
	struct host_ent *ents;
	int n;
} hosts;

const char *cma_hosts_path(void)
{
	const char *p = secure_getenv("USCM_HOSTS");

	/* The library does not know whether its fabric is simulated: uscm-sim
	 * hands its hosts file over in USCM_HOSTS like any operator would. */
	return p && *p ? p : "/etc/rdma/ibacm_hosts.data";
}

/* (Re)reads the file when its name, size or mtime changed. */
static void hosts_load(void)
{
	const char *path = cma_hosts_path();
	struct stat st;
	FILE *f;
	char line[512];

	if (stat(path, &st) < 0) {
		free(hosts.ents);
		hosts.ents = NULL;
		hosts.n = 0;
		hosts.path[0] = 0;
		return;
	}
	if (!strcmp(path, hosts.path) && st.st_mtim.tv_sec == hosts.mtime.tv_sec &&
	    st.st_mtim.tv_nsec == hosts.mtime.tv_nsec && st.st_size == hosts.size)
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	free(hosts.ents);
	hosts.ents = NULL;
	hosts.n = 0;
	int cap = 0;
	while (fgets(line, sizeof(line), f)) {
		char a[256], gtxt[256];
		struct host_ent e;

		memset(&e, 0, sizeof(e));
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		if (sscanf(line, "%255s %255s", a, gtxt) != 2)
			continue;
		if (inet_pton(AF_INET6, gtxt, e.gid) != 1)
			continue;
		if (inet_pton(AF_INET, a, e.addr) == 1)
			e.family = AF_INET;
		else if (inet_pton(AF_INET6, a, e.addr) == 1)
			e.family = AF_INET6;
		else
			continue; /* host names: resolved by the caller's getaddrinfo */
		if (hosts.n == cap) {
			int nc = cap ? cap * 2 : 16;
			struct host_ent *ne = realloc(hosts.ents, (size_t)nc * sizeof(*ne));
			if (!ne)
				break;
			hosts.ents = ne;
			cap = nc;
		}
		hosts.ents[hosts.n++] = e;
	}
	fclose(f);
	snprintf(hosts.path, sizeof(hosts.path), "%s", path);
	hosts.mtime = st.st_mtim;
	hosts.size = st.st_size;
}

int cma_hosts_lookup(const struct sockaddr *a, uint8_t gid[16])
{
	const void *ip;
	size_t len;

	if (a->sa_family == AF_INET) {
		ip = &((const struct sockaddr_in *)a)->sin_addr;
		len = 4;
	} else if (a->sa_family == AF_INET6) {
		ip = &((const struct sockaddr_in6 *)a)->sin6_addr;
		len = 16;
	} else {
		return -1;
	}
	hosts_load();
	for (int i = 0; i < hosts.n; i++) {
		if (hosts.ents[i].family == a->sa_family && !memcmp(hosts.ents[i].addr, ip, len)) {
			memcpy(gid, hosts.ents[i].gid, 16);
			return 0;
		}
	}
	return -1;
}

int cma_hosts_reverse(const uint8_t gid[16], int family, struct sockaddr_storage *out)
{
	hosts_load();
	for (int i = 0; i < hosts.n; i++) {
		const struct host_ent *e = &hosts.ents[i];

		if (e->family != family || memcmp(e->gid, gid, 16))
			continue;
		memset(out, 0, sizeof(*out));
		if (family == AF_INET) {
			struct sockaddr_in *s = (struct sockaddr_in *)out;
			s->sin_family = AF_INET;
			memcpy(&s->sin_addr, e->addr, 4);
		} else {
			struct sockaddr_in6 *s = (struct sockaddr_in6 *)out;
			s->sin6_family = AF_INET6;
			memcpy(&s->sin6_addr, e->addr, 16);
		}
		return 0;
	}
	return -1;
}

/* ---- local addresses -------------------------------------------------------------- */

static int port_active(const struct cma_port *p)
{
	return p->attr.state == IBV_PORT_ACTIVE;
}

static struct cma_port *first_active_port(void)
{
	for (int d = 0; d < g.ndevs; d++)
		for (int i = 0; i < g.devs[d].nports; i++) {
			cma_port_refresh(&g.devs[d].ports[i], 1);
			if (port_active(&g.devs[d].ports[i]))
				return &g.devs[d].ports[i];
		}
	return NULL;
}

/* The GID of an IPoIB interface holding address a (its 20-byte hardware
 * address ends with the port GID). */
static int ipoib_local_gid(const struct sockaddr *a, uint8_t gid[16])
{
	struct ifaddrs *ifs, *i, *j;
	int rc = -1;

	if (getifaddrs(&ifs) < 0)
		return -1;
	for (i = ifs; i && rc; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != a->sa_family ||
		    !cma_addr_equal(i->ifa_addr, a))
			continue;
		for (j = ifs; j; j = j->ifa_next) {
			const struct sockaddr_ll *ll = (const struct sockaddr_ll *)j->ifa_addr;
			if (!ll || ll->sll_family != AF_PACKET || strcmp(j->ifa_name, i->ifa_name))
				continue;
			if (ll->sll_hatype == ARPHRD_INFINIBAND && ll->sll_halen >= 20) {
				memcpy(gid, ll->sll_addr + 4, 16);
				rc = 0;
				break;
			}
		}
	}
	freeifaddrs(ifs);
	return rc;
}

/* The local port that owns address a, or NULL. A loopback address that is
 * none of ours maps to the first active port only when loopback_ok (a
 * destination: the kernel's cma_resolve_loopback); a bind to it binds no
 * port (cma_bind_locked). */
static struct cma_port *local_port_of_addr(const struct sockaddr *a, int *gid_index,
					   int loopback_ok)
{
	uint8_t gid[16];
	struct cma_port *p;

	if (a->sa_family == AF_IB) {
		ip_as_gid(a, gid);
		return cma_port_of_gid(gid, gid_index);
	}
	/* The hosts file is authoritative: an address it gives a remote GID is
	 * not ours, even in 127/8 (the simulated fabric names nodes so). */
	if (cma_hosts_lookup(a, gid) == 0)
		return cma_port_of_gid(gid, gid_index);
	if (ipoib_local_gid(a, gid) == 0 && (p = cma_port_of_gid(gid, gid_index)))
		return p;
	ip_as_gid(a, gid);
	if ((p = cma_port_of_gid(gid, gid_index)))
		return p;
	if (loopback_ok && cma_addr_loopback(a) && (p = first_active_port())) {
		*gid_index = 0;
		return p;
	}
	return NULL;
}

void cma_set_bound_port(struct cma_id *id, struct cma_port *p)
{
	id->port = p;
	id->id.verbs = p->dev->verbs;
	id->id.pd = p->dev->pd; /* the device's PD, as librdmacm's ucma_get_device */
	id->id.port_num = p->port_num;
}

static void set_sgid(struct cma_id *id, int gid_index)
{
	struct cma_port *p = id->port;

	if (gid_index < 0 || gid_index >= p->ngids)
		gid_index = 0;
	memcpy(&id->id.route.addr.addr.ibaddr.sgid, &p->gids[gid_index], 16);
	/* The P_Key of the port's entry 0 with the full-membership bit, as
	 * the kernel's IPoIB parent interface takes it (ipoib_add_port); its
	 * route queries ask the SA for a path in that partition. */
	id->id.route.addr.addr.ibaddr.pkey = htobe16(p->npkeys && (p->pkeys[0] & 0x7FFF) ?
						     p->pkeys[0] | 0x8000 : 0xFFFF);
}

/* ---- the bind table ---------------------------------------------------------------- */

/* Bound ids per (namespace, port space, port), so that picking an
 * ephemeral port and binding to a free one cost O(1), not a walk over
 * every id (which made binding 10k ids quadratic). Sparse: an entry per
 * port some id holds, so the table costs what the ids bound cost (which
 * the daemon bounds per uid), not 256 KiB per port space of every client
 * namespace. The count rides in the value pointer; no entry: nobody. */
static struct cmp_map bind_counts;
static int bind_counts_ready;

static struct cmp_map_key bind_key(const struct cma_netns *ns, enum rdma_port_space ps,
				   uint16_t port)
{
	return (struct cmp_map_key){ cma_netns_key(ns), (uint64_t)ps << 16 | port };
}

static uint32_t bind_count(const struct cma_netns *ns, enum rdma_port_space ps, uint16_t port)
{
	if (!bind_counts_ready)
		return 0;
	return (uint32_t)(uintptr_t)cmp_map_get(&bind_counts, bind_key(ns, ps, port));
}

/* Room for one more bound port, so that the bind's count cannot fail
 * once the bind has decided: 0, or ENOMEM. */
static int bind_reserve(void)
{
	if (!bind_counts_ready) {
		cmp_map_init(&bind_counts, cmp_mem_default(), cma_random(), cma_random());
		bind_counts_ready = 1;
	}
	return cmp_map_reserve(&bind_counts, bind_counts.len + 1) ? ENOMEM : 0;
}

static void bind_count_add(const struct cma_netns *ns, enum rdma_port_space ps, uint16_t port,
			   int d)
{
	struct cmp_map_key k = bind_key(ns, ps, port);
	uint32_t n = (uint32_t)(uintptr_t)cmp_map_get(&bind_counts, k) + (uint32_t)d;

	if (n)
		cmp_map_put(&bind_counts, k, (void *)(uintptr_t)n); /* reserved: cannot fail */
	else
		cmp_map_del(&bind_counts, k, NULL);
}

/* kernel cma_check_port semantics, in port space id->bind_ps; dev is the
 * device port id's address names (NULL: none, a wildcard or loopback). */
static int port_conflict(const struct cma_id *id, const struct cma_port *dev, uint16_t port,
			 int reuse)
{
	const struct sockaddr *a = &id->id.route.addr.src_addr;
	if (!bind_count(id->caller.ns, id->bind_ps, port))
		return 0; /* nobody holds it */
	for (const struct cma_id *o = g.ids; o; o = o->next) {
		const struct sockaddr *b = &o->id.route.addr.src_addr;
		int mixed = (a->sa_family == AF_IB) != (b->sa_family == AF_IB);

		if (o == id || !o->bound || o->bind_ps != id->bind_ps || o->bind_port != port ||
		    o->caller.ns != id->caller.ns)
			continue;
		if (reuse && o->reuseaddr && o->state != ST_LISTEN)
			continue;
		/* AFONLY separates IPv4 from IPv6 only: an AF_IB address
		 * shares a port space's ports with both. */
		if (!mixed && id->afonly && o->afonly && a->sa_family != b->sa_family)
			continue;
		if (cma_addr_any(a) || id->loop_any || cma_addr_any(b) || o->loop_any)
			return EADDRNOTAVAIL;
		/* An AF_IB address (a GID) and an IP address are the same
		 * address when they name the same device port. The kernel
		 * compares them as different and lets both hold the port; here
		 * one port of a port space on one device port has one owner
		 * (with REUSEADDR, owners), so an AF_IB id cannot bind beside
		 * another user's IP listener on its very service ID. */
		if (mixed ? dev && dev == o->port : cma_addr_equal(a, b))
			return EADDRINUSE;
	}
	return 0;
}

static int port_used(struct cma_netns *ns, enum rdma_port_space ps, uint16_t port)
{
	return bind_count(ns, ps, port) > 0;
}

int cma_check_port_listen(struct cma_id *id)
{
	if (!id->reuseaddr)
		return 0;
	return port_conflict(id, id->loop_any ? NULL : id->port, id->bind_port, 0);
}

void cma_bind_release(struct cma_id *id)
{
	if (id->bound && bind_count(id->caller.ns, id->bind_ps, id->bind_port))
		bind_count_add(id->caller.ns, id->bind_ps, id->bind_port, -1);
	id->bound = 0;
}

/* The port space an AF_IB address binds in, as the kernel's
 * cma_select_ib_ps: the SID's port-space bits under the mask's port-space
 * bits name the IB, TCP or UDP space (tried in that order), one the id's
 * own space allows (an RDMA_PS_IB id any of the three, a TCP or UDP id
 * its own; IPoIB none). The SID becomes that space's prefix and the port
 * the mask selected, and the mask covers the prefix, so that what follows
 * (the port checks, the listen) sees one port of one space. 0: none. */
static enum rdma_port_space ib_select_ps(enum rdma_port_space own, struct sockaddr_ib *sib)
{
	static const struct {
		enum rdma_port_space ps;
		uint64_t prefix;
	} spaces[] = {
		{ RDMA_PS_IB, RDMA_IB_PS_IB },
		{ RDMA_PS_TCP, RDMA_IB_IP_PS_TCP },
		{ RDMA_PS_UDP, RDMA_IB_IP_PS_UDP },
	};
	uint64_t mask = be64toh(sib->sib_sid_mask), sid = be64toh(sib->sib_sid);
	uint64_t psmask = mask & RDMA_IB_IP_PS_MASK;

	for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++) {
		if ((own != RDMA_PS_IB && own != spaces[i].ps) ||
		    (sid & psmask) != (spaces[i].prefix & psmask))
			continue;
		sib->sib_sid = htobe64(spaces[i].prefix | (sid & mask & RDMA_IB_IP_PORT_MASK));
		sib->sib_sid_mask = htobe64(RDMA_IB_IP_PS_MASK | mask);
		return spaces[i].ps;
	}
	return 0;
}

/* Binds id to addr (family already checked): finds the device for a
 * specific address, allocates or checks the port. */
int cma_bind_locked(struct cma_id *id, const struct sockaddr *asked)
{
	struct sockaddr *src = &id->id.route.addr.src_addr;
	struct sockaddr_storage want;
	const struct sockaddr *addr = (const struct sockaddr *)&want;
	enum rdma_port_space ps = id->id.ps;
	struct cma_port *p = NULL;
	int gid_index = 0, e, wild;
	uint16_t port;

	memset(&want, 0, sizeof(want));
	memcpy(&want, asked, (size_t)cma_addr_len(asked));
	if (want.ss_family == AF_IB &&
	    !(ps = ib_select_ps(id->id.ps, (struct sockaddr_ib *)&want)))
		return cma_fail(EPROTONOSUPPORT); /* the kernel's cma_get_port */
	/* As the kernel's cma_get_port: a port below 1024 needs privilege
	 * (for AF_IB the port is the SID's low bits under its mask). */
	port = cma_addr_port(addr);
	if (port && port < 1024 && !cma_caller_may_bind_low(&id->caller))
		return cma_fail(EACCES);
	wild = 0;
	if (!cma_addr_any(addr)) {
		uint8_t gid[16];

		/* As the kernel's bind, which finds the address's netdev in the
		 * caller's namespace: another namespace's address is not ours. */
		if (!cma_netns_addr_local(id->caller.ns, addr))
			return cma_fail(EADDRNOTAVAIL);

		p = local_port_of_addr(addr, &gid_index, 0);
		/* As the kernel's rdma_bind_addr, whose cma_any_addr() counts a
		 * loopback address as "any": 127/8 or ::1 binds no device (no
		 * verbs, no PD) and listens on every device for every
		 * destination address, like the wildcard — except an address
		 * the hosts file names (the simulated fabric's node names are
		 * in 127/8): ours binds its port, another node's is
		 * EADDRNOTAVAIL. */
		if (!p && cma_addr_loopback(addr) && cma_hosts_lookup(addr, gid) != 0)
			wild = 1;
		else if (!p)
			return cma_fail(EADDRNOTAVAIL);
	}
	if ((e = bind_reserve()))
		return cma_fail(e);
	id->loop_any = wild;
	id->bind_ps = ps;
	memset(&id->id.route.addr.src_storage, 0, sizeof(id->id.route.addr.src_storage));
	memcpy(src, addr, (size_t)cma_addr_len(addr));
	port = cma_addr_port(addr);
	if (port) {
		if ((e = port_conflict(id, p, port, id->reuseaddr)))
			return cma_fail(e);
	} else {
		unsigned range = EPHEMERAL_HI - EPHEMERAL_LO + 1;
		unsigned start = (unsigned)(cma_random() % range), i;

		for (i = 0; i < range; i++) {
			port = (uint16_t)(EPHEMERAL_LO + (start + i) % range);
			if (!port_used(id->caller.ns, ps, port))
				break;
		}
		if (i == range)
			return cma_fail(EADDRNOTAVAIL);
	}
	/* The bound SID is exact (mask ~0), as the kernel's cma_bind_port
	 * leaves it: a listen on it serves that one service ID. */
	cma_addr_set_port(src, port);
	if (p) {
		cma_set_bound_port(id, p);
		set_sgid(id, gid_index);
	}
	id->bound = 1;
	id->bind_port = port;
	bind_count_add(id->caller.ns, ps, port, 1);
	id->state = ST_BOUND;
	return 0;
}

static int family_ok(int f)
{
	return f == AF_INET || f == AF_INET6 || f == AF_IB;
}

CMA_EXPORT int rdma_bind_addr(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	if (cma_remote())
		return cmc_bind_addr(cm_id, addr);
	struct cma_id *id = cma_id_of(cm_id);
	int rc;

	if (!id || !addr)
		return cma_fail(EINVAL);
	if (!family_ok(addr->sa_family))
		return cma_fail(EAFNOSUPPORT);
	pthread_mutex_lock(&g.lock);
	if (id->state != ST_IDLE) {
		cma_unlock();
		return cma_fail(EINVAL);
	}
	rc = cma_bind_locked(id, addr);
	cma_unlock();
	return rc;
}

/* ---- address resolution -------------------------------------------------------------- */

/* An IPoIB neighbour the kernel already resolved (/proc/net/arp). */
static int arp_gid(const struct sockaddr *a, uint8_t gid[16])
{
	FILE *f;
	char line[512], ip[64], hw[128];
	char want[INET_ADDRSTRLEN];
	int rc = -1;

	if (a->sa_family != AF_INET ||
	    !inet_ntop(AF_INET, &((const struct sockaddr_in *)a)->sin_addr, want, sizeof(want)))
		return -1;
	f = fopen("/proc/net/arp", "re");
	if (!f)
		return -1;
	while (rc && fgets(line, sizeof(line), f)) {
		unsigned hwtype, flags;
		unsigned b[20];

		if (sscanf(line, "%63s 0x%x 0x%x %127s", ip, &hwtype, &flags, hw) != 4)
			continue;
		if (strcmp(ip, want) || hwtype != ARPHRD_INFINIBAND || !(flags & 0x2))
			continue;
		if (sscanf(hw, "%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x:%x", &b[0],
			   &b[1], &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11],
			   &b[12], &b[13], &b[14], &b[15], &b[16], &b[17], &b[18], &b[19]) != 20)
			continue;
		for (int i = 0; i < 16; i++)
			gid[i] = (uint8_t)b[4 + i];
		rc = 0;
	}
	fclose(f);
	return rc;
}

/* Destination address -> GID. 0, or -1 (unknown). */
static int dst_gid(const struct sockaddr *dst, struct cma_port *bound, uint8_t gid[16])
{
	struct cma_port *p;
	int idx;

	if (dst->sa_family == AF_IB) {
		ip_as_gid(dst, gid);
		return 0;
	}
	if (cma_hosts_lookup(dst, gid) == 0)
		return 0;
	/* One of our own addresses (or loopback): the bound port or the first. */
	if ((p = local_port_of_addr(dst, &idx, 1))) {
		p = bound ? bound : p;
		memcpy(gid, p->gids[bound ? 0 : idx].raw, 16);
		return 0;
	}
	if (arp_gid(dst, gid) == 0)
		return 0;
	/* RoCE: the destination's GID is its IP address. */
	if ((bound && bound->roce) || (!bound && first_active_port() && first_active_port()->roce)) {
		ip_as_gid(dst, gid);
		return 0;
	}
	return -1;
}

static int gid_v4mapped(const uint8_t *gid)
{
	static const uint8_t pfx[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF };
	return !memcmp(gid, pfx, 12);
}

/* The port to reach dgid from. */
static struct cma_port *route_port(const uint8_t dgid[16], int *gid_index)
{
	struct cma_port *p = cma_port_of_gid(dgid, gid_index), *roce = NULL, *any = NULL;

	if (p)
		return p; /* loopback */
	for (int d = 0; d < g.ndevs; d++) {
		for (int i = 0; i < g.devs[d].nports; i++) {
			struct cma_port *q = &g.devs[d].ports[i];

			cma_port_refresh(q, 1);
			if (!port_active(q))
				continue;
			if (!q->roce && q->ngids && !memcmp(q->gids[0].raw, dgid, 8)) {
				*gid_index = 0;
				return q;
			}
			if (q->roce && !roce)
				roce = q;
			if (!any)
				any = q;
		}
	}
	*gid_index = 0;
	if (roce && (gid_v4mapped(dgid) || dgid[0] != 0xFE))
		return roce;
	return any;
}

/* RoCE: the source GID index of this port that matches the source IP. */
static int roce_sgid_index(struct cma_port *p, const struct sockaddr *src)
{
	uint8_t gid[16];
	int idx;

	if (cma_addr_any(src))
		return 0;
	ip_as_gid(src, gid);
	idx = cma_port_gid_index(p, gid);
	return idx >= 0 ? idx : 0;
}

/* ---- the routing table and the neighbour tables (rtnetlink) ------------------------------
 *
 * As the kernel's rdma_resolve_addr (drivers/infiniband/core/addr.c): the
 * route to the destination gives the outgoing interface and the preferred
 * source address; the RDMA port behind that interface is the one to use
 * (IPoIB: the port GID in the interface's hardware address; RoCE: the GID
 * table entry bound to that netdev holding the source address, RoCEv2 then
 * RoCEv1); the next hop's neighbour entry must be valid, and when it is not,
 * resolution is triggered (RTM_NEWNEIGH with NTF_USE, the kernel's
 * neigh_event_send) and awaited by the process's resolver (cma_resolver.c:
 * one rtnetlink socket watched by the progress thread, no thread of its
 * own), up to timeout_ms (capped at CMA_RESOLVE_MAX_MS). The lookups run on
 * the resolver's socket, so that they see the namespace it resolves in.
 * docs/api/addressing.md has the order and the differences. */

static const void *ip_bytes(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return &((const struct sockaddr_in *)a)->sin_addr;
	return &((const struct sockaddr_in6 *)a)->sin6_addr;
}

static void ip16_as_gid(int family, const uint8_t ip[16], uint8_t gid[16])
{
	memset(gid, 0, 16);
	if (family == AF_INET) {
		gid[10] = gid[11] = 0xFF;
		memcpy(gid + 12, ip, 4);
	} else {
		memcpy(gid, ip, 16);
	}
}

/* Does any port report the netdevs its GIDs are bound to? Then an
 * interface without an RDMA port behind it is known to have none. */
static int ndevs_known(void)
{
	for (int d = 0; d < g.ndevs; d++)
		for (int i = 0; i < g.devs[d].nports; i++) {
			const struct cma_port *q = &g.devs[d].ports[i];
			for (int k = 0; q->gid_ndevs && k < q->ngids; k++)
				if (q->gid_ndevs[k])
					return 1;
		}
	return 0;
}

/* The RoCE port and GID index bound to interface oif with address ip. */
static struct cma_port *roce_port_of_ndev(int oif, int family, const uint8_t ip[16], int *gid_index)
{
	uint8_t gid[16];

	ip16_as_gid(family, ip, gid);
	for (int d = 0; d < g.ndevs; d++)
		for (int i = 0; i < g.devs[d].nports; i++) {
			struct cma_port *q = &g.devs[d].ports[i];
			int idx;

			if (!q->attr_read)
				cma_port_refresh(q, 1);
			if (!q->roce || !q->gid_types || !q->gid_ndevs)
				continue;
			idx = nlr_pick_roce_gid((const uint8_t(*)[16])(const void *)q->gids, q->gid_types,
						q->gid_ndevs, q->ngids, oif, gid);
			if (idx < 0) {
				cma_port_refresh(q, 1); /* a new address: the table may have grown */
				if (!q->gid_types || !q->gid_ndevs)
					continue;
				idx = nlr_pick_roce_gid((const uint8_t(*)[16])(const void *)q->gids,
							q->gid_types, q->gid_ndevs, q->ngids, oif, gid);
			}
			if (idx >= 0 && port_active(q)) {
				*gid_index = idx;
				return q;
			}
		}
	return NULL;
}

enum { IPR_FALLBACK, IPR_OK, IPR_NODEV };

struct ipr {
	struct nlr_route rt;
	struct cma_port *port;
	int gid_index;
	int ipoib;
	uint8_t src[16];            /* the source address (explicit, else the route's) */
};

/* Lock held (dropped around table reads). The route to dst, looked up on
 * res's socket (NULL: a socket per lookup, ours), and the port
 * behind its interface: IPR_OK; IPR_NODEV when the interface is known to
 * have no RDMA port; IPR_FALLBACK when the routing table does not decide
 * (no rtnetlink, no route, an own or loopback address, an interface
 * whose ports report no netdevs). */
static int ip_route_port(struct cma_resolver *res, const struct sockaddr *dst,
			 const struct sockaddr *src, struct ipr *o)
{
	const struct nlr_sock *nl = cma_resolver_sock(res);
	int fam = dst->sa_family, have_src = !cma_addr_any(src) && src->sa_family == fam;
	struct nlr_link l;
	uint8_t gid[16];

	memset(o, 0, sizeof(*o));
	if (nlr_get_route(nl, fam, ip_bytes(dst), have_src ? ip_bytes(src) : NULL, &o->rt) != 0)
		return IPR_FALLBACK;
	if (o->rt.type != RTN_UNICAST || o->rt.oif <= 0)
		return IPR_FALLBACK; /* local, broadcast, blackhole, ... */
	if (have_src)
		memcpy(o->src, ip_bytes(src), fam == AF_INET ? 4 : 16);
	else if (o->rt.has_prefsrc)
		memcpy(o->src, o->rt.prefsrc, 16);
	else
		return IPR_FALLBACK;
	if (nlr_get_link(nl, o->rt.oif, &l) != 0 || l.type == ARPHRD_LOOPBACK)
		return IPR_FALLBACK;
	if (l.type == ARPHRD_INFINIBAND) {
		if (nlr_ipoib_gid(l.addr, l.addr_len, gid) < 0)
			return IPR_NODEV;
		o->port = cma_port_of_gid(gid, &o->gid_index);
		o->ipoib = 1;
		return o->port ? IPR_OK : IPR_NODEV;
	}
	o->port = roce_port_of_ndev(o->rt.oif, fam, o->src, &o->gid_index);
	if (o->port)
		return IPR_OK;
	return ndevs_known() ? IPR_NODEV : IPR_FALLBACK;
}

/* Lock held: the id is resolved through port/gid_index to dgid, its
 * wildcard source becomes src (when given). ADDR_RESOLVED follows. */
static void ip_resolved(struct cma_id *id, struct cma_port *p, int gid_index, const uint8_t dgid[16],
			const uint8_t *src_ip)
{
	struct sockaddr *src = &id->id.route.addr.src_addr;

	if (!id->port) {
		cma_set_bound_port(id, p);
		set_sgid(id, gid_index);
	} else if (id->port == p) {
		set_sgid(id, gid_index);
	}
	memcpy(&id->id.route.addr.addr.ibaddr.dgid, dgid, 16);
	if (src_ip && cma_addr_any(src)) {
		if (src->sa_family == AF_INET)
			memcpy(&((struct sockaddr_in *)src)->sin_addr, src_ip, 4);
		else if (src->sa_family == AF_INET6)
			memcpy(&((struct sockaddr_in6 *)src)->sin6_addr, src_ip, 16);
	}
	id->state = ST_ADDR_RESOLVED;
}

/* One rdma_resolve_addr waiting for its next hop's neighbour entry
 * (cma_resolver.c waits for it). */
struct addr_req {
	struct cma_nr_req base;     /* first: what the resolver hands back */
	struct ipr r;
	int family;
	uint8_t dst[16];
};

void cma_addr_release(struct cma_id *id)
{
	struct cma_nr_req *q = id->nr_req;

	if (!q)
		return;
	/* at once: nothing of the request outlives its id */
	cma_resolver_cancel(q);
	id->nr_req = NULL;
	free(q->ev);
	free(q);
}

/* The destination GID once the neighbour is valid: IPoIB, the GID in its
 * hardware address; RoCE, the destination IP as a GID (RoCEv2). */
static int neigh_dgid(const struct ipr *r, int family, const uint8_t dst[16],
		      const struct nlr_neigh *n, uint8_t dgid[16])
{
	if (r->ipoib)
		return nlr_ipoib_gid(n->lladdr, n->lladdr_len, dgid);
	ip16_as_gid(family, dst, dgid);
	return 0;
}

/* The resolver's answer (g.lock held): the id is still waiting (a destroy
 * cancels the request), so it is bound and nothing else came between. */
static void addr_neigh_done(struct cma_nr_req *base, const struct nlr_neigh *n, int status)
{
	struct addr_req *q = (struct addr_req *)base;
	struct cma_id *id = base->id;
	uint8_t dgid[16];

	id->nr_req = NULL;
	if (!status && neigh_dgid(&q->r, q->family, q->dst, n, dgid) != 0)
		status = -EHOSTUNREACH;
	if (id->state == ST_BOUND) {
		if (!status)
			ip_resolved(id, q->r.port, q->r.gid_index, dgid, q->r.src);
		cma_event_queue(cma_event_use(&base->ev, id,
					      status ? RDMA_CM_EVENT_ADDR_ERROR
						     : RDMA_CM_EVENT_ADDR_RESOLVED,
					      status));
	}
	free(base->ev);
	free(q);
}

/* Lock held. Resolves id to dst through the routing table: 0 and *done
 * (the event queued, or a thread started that queues it), 0 and !*done
 * (the routing table does not decide: the caller goes on as before), or
 * -1 with errno. */
static int ip_resolve(struct cma_id *id, const struct sockaddr *dst, int timeout_ms, int *done)
{
	struct sockaddr *src = &id->id.route.addr.src_addr;
	struct cma_resolver *res = cma_resolver_of(&id->caller);
	struct addr_req *q;
	struct nlr_neigh n;
	uint8_t dgid[16];
	struct ipr r;
	int rc, status = 0;
	struct cma_event *e;

	*done = 0;
	if (!res && id->caller.ns)
		return -1; /* a namespace of its own and no resolver for it */
	rc = ip_route_port(res, dst, src, &r);
	if (id->state != ST_BOUND || id->nr_req)
		return errno = EINVAL, -1; /* the lock was dropped: something else came first */
	if (rc == IPR_FALLBACK)
		return 0;
	*done = 1;
	if (rc == IPR_NODEV) {
		status = -ENODEV;
	} else {
		const uint8_t *nh = r.rt.has_gw ? r.rt.gw : (const uint8_t *)ip_bytes(dst);
		uint8_t nh16[16] = { 0 };
		uint8_t dst16[16] = { 0 };

		memcpy(nh16, nh, dst->sa_family == AF_INET ? 4 : 16);
		memcpy(dst16, ip_bytes(dst), dst->sa_family == AF_INET ? 4 : 16);
		rc = nlr_get_neigh(cma_resolver_sock(res), dst->sa_family, r.rt.oif, nh16, &n);
		if (rc == 0 && nlr_neigh_valid(n.state)) {
			/* requests of other ids for it need not wait for
			 * the notification either */
			cma_resolver_neigh(res, &n);
			if (neigh_dgid(&r, dst->sa_family, dst16, &n, dgid) == 0)
				ip_resolved(id, r.port, r.gid_index, dgid, r.src);
			else
				status = -EHOSTUNREACH;
		} else if (!res) {
			status = -EHOSTUNREACH; /* no socket to wait on */
		} else {
			q = calloc(1, sizeof(*q));
			if (!q || !(q->base.ev = cma_event_alloc(0))) {
				free(q);
				return errno = ENOMEM, -1;
			}
			q->base.id = id;
			q->base.done = addr_neigh_done;
			q->r = r;
			q->family = dst->sa_family;
			memcpy(q->dst, dst16, 16);
			if (cma_resolver_wait(res, &q->base, dst->sa_family, r.rt.oif, nh16,
					      rc == 0 ? &n : NULL, timeout_ms) < 0) {
				int err = errno;

				free(q->base.ev);
				free(q);
				return errno = err, -1;
			}
			if (!id->port) {
				/* held from now on: a second resolve is refused */
				cma_set_bound_port(id, r.port);
				set_sgid(id, r.gid_index);
			}
			id->nr_req = &q->base;
			return 0;
		}
	}
	e = cma_event_heap(id, status ? RDMA_CM_EVENT_ADDR_ERROR : RDMA_CM_EVENT_ADDR_RESOLVED, status,
			   0);
	if (!e)
		return errno = ENOMEM, -1;
	cma_event_queue(e);
	return 0;
}

/* The P_Key an AF_IB address names (sib_pkey), or 0: none (other families,
 * or a zero key, which is no partition: the port's entry 0 then). */
static uint16_t ib_pkey_of(const struct sockaddr *a)
{
	if (a->sa_family != AF_IB)
		return 0;
	return (uint16_t)(be16toh(((const struct sockaddr_ib *)a)->sib_pkey) & 0xFFFF);
}

CMA_EXPORT int rdma_resolve_addr(struct rdma_cm_id *cm_id, struct sockaddr *src_addr,
				 struct sockaddr *dst_addr, int timeout_ms)
{
	if (cma_remote())
		return cmc_resolve_addr(cm_id, src_addr, dst_addr, timeout_ms);
	struct cma_id *id = cma_id_of(cm_id);
	struct sockaddr *src;
	struct cma_event *e;
	uint8_t dgid[16];
	int gid_index = 0, status = 0;
	struct cma_port *p;

	if (!id || !dst_addr)
		return cma_fail(EINVAL);
	if (!family_ok(dst_addr->sa_family) || (src_addr && !family_ok(src_addr->sa_family)))
		return cma_fail(EAFNOSUPPORT);
	pthread_mutex_lock(&g.lock);
	if (id->state == ST_IDLE) {
		struct sockaddr_storage any;

		if (!src_addr) {
			memset(&any, 0, sizeof(any));
			any.ss_family = dst_addr->sa_family;
			src_addr = (struct sockaddr *)&any;
		}
		if (cma_bind_locked(id, src_addr) < 0) {
			int err = errno;
			cma_unlock();
			return cma_fail(err);
		}
	} else if (id->state != ST_BOUND || id->nr_req) {
		cma_unlock();
		return cma_fail(EINVAL);
	}
	src = &id->id.route.addr.src_addr;
	/* Not in the hosts file (the first source, as librdmacm's ibacm
	 * provider), not multicast: the routing table decides when it can. */
	if ((dst_addr->sa_family == AF_INET || dst_addr->sa_family == AF_INET6) &&
	    !cma_addr_is_mc(dst_addr) && cma_hosts_lookup(dst_addr, dgid) < 0) {
		int done = 0;

		memset(&id->id.route.addr.dst_storage, 0, sizeof(id->id.route.addr.dst_storage));
		memcpy(&id->id.route.addr.dst_addr, dst_addr, (size_t)cma_addr_len(dst_addr));
		if (ip_resolve(id, dst_addr, timeout_ms, &done) < 0) {
			int err = errno;
			cma_unlock();
			return cma_fail(err);
		}
		if (done) {
			cma_unlock();
			return cma_sync_wait(id);
		}
	}
	memset(&id->id.route.addr.dst_storage, 0, sizeof(id->id.route.addr.dst_storage));
	memcpy(&id->id.route.addr.dst_addr, dst_addr, (size_t)cma_addr_len(dst_addr));

	if (cma_addr_is_mc(dst_addr)) {
		/* A multicast group (mckey resolves one before joining it): the
		 * bound port, else the first active one; the "destination GID" is
		 * the group's MGID on that port. */
		p = id->port ? id->port : first_active_port();
		if (!p) {
			cma_unlock();
			return cma_fail(ENODEV);
		}
		if (!id->port) {
			cma_set_bound_port(id, p);
			set_sgid(id, p->roce ? roce_sgid_index(p, src) : 0);
		}
		if (cma_mc_mgid(id, p, dst_addr, dgid) < 0)
			status = -EHOSTUNREACH;
	} else if (dst_gid(dst_addr, id->port, dgid) < 0) {
		status = -EHOSTUNREACH;
	}
	if (!status) {
		p = id->port;
		if (!p) {
			p = route_port(dgid, &gid_index);
			/* AF_IB names its partition (sib_pkey): a port without
			 * that P_Key cannot reach it (the kernel's
			 * cma_resolve_ib_dev: -ENODEV) */
			if (!p || (ib_pkey_of(dst_addr) && !p->roce &&
				   cma_port_pkey_index(p, ib_pkey_of(dst_addr)) < 0)) {
				cma_unlock();
				return cma_fail(ENODEV);
			}
			cma_set_bound_port(id, p);
			if (p->roce)
				gid_index = roce_sgid_index(p, src);
			else if (cma_port_gid_index(p, dgid) >= 0)
				gid_index = cma_port_gid_index(p, dgid); /* loopback */
			else
				gid_index = 0;
			set_sgid(id, gid_index);
		}
		memcpy(&id->id.route.addr.addr.ibaddr.dgid, dgid, 16);
		if (ib_pkey_of(dst_addr) && !p->roce) {
			/* the id's partition is the one AF_IB named, as the
			 * kernel's cma_bind_addr copies it into the source */
			id->id.route.addr.addr.ibaddr.pkey = htobe16(ib_pkey_of(dst_addr));
			if (src->sa_family == AF_IB)
				((struct sockaddr_ib *)src)->sib_pkey = htobe16(ib_pkey_of(dst_addr));
		}
		/* The source address, when bound to a wildcard: ours from the
		 * hosts file, or the IP our RoCE GID encodes. */
		if (cma_addr_any(src) && src->sa_family != AF_IB) {
			struct sockaddr_storage ss;
			const uint8_t *sgid = id->id.route.addr.addr.ibaddr.sgid.raw;
			uint16_t port = cma_addr_port(src);

			if (cma_hosts_reverse(sgid, src->sa_family, &ss) == 0) {
				memcpy(src, &ss, (size_t)cma_addr_len((struct sockaddr *)&ss));
				cma_addr_set_port(src, port);
			} else if (src->sa_family == AF_INET && gid_v4mapped(sgid)) {
				memcpy(&((struct sockaddr_in *)src)->sin_addr, sgid + 12, 4);
			} else if (cma_addr_loopback(dst_addr)) {
				memcpy(src, dst_addr, (size_t)cma_addr_len(dst_addr));
				cma_addr_set_port(src, port);
			}
		} else if (src->sa_family == AF_IB && cma_addr_any(src)) {
			memcpy(&((struct sockaddr_ib *)src)->sib_addr,
			       id->id.route.addr.addr.ibaddr.sgid.raw, 16);
		}
		id->state = ST_ADDR_RESOLVED;
	}
	e = cma_event_heap(id, status ? RDMA_CM_EVENT_ADDR_ERROR : RDMA_CM_EVENT_ADDR_RESOLVED,
			   status, 0);
	if (!e) {
		cma_unlock();
		return cma_fail(ENOMEM);
	}
	cma_event_queue(e);
	cma_unlock();
	return cma_sync_wait(id);
}

/* ---- routes ------------------------------------------------------------------------------ */

uint64_t cma_service_id(const struct cma_id *id, const struct sockaddr *a)
{
	if (a->sa_family == AF_IB)
		return be64toh(((const struct sockaddr_ib *)a)->sib_sid);
	return cmp_sid_make((enum cmp_ps)id->id.ps, cma_addr_port(a));
}

void cma_path_to_rec(const struct cmp_path *p, struct ibv_sa_path_rec *r)
{
	memset(r, 0, sizeof(*r));
	memcpy(r->dgid.raw, p->dgid, 16);
	memcpy(r->sgid.raw, p->sgid, 16);
	r->dlid = htobe16(p->dlid);
	r->slid = htobe16(p->slid);
	r->flow_label = htobe32(p->flow_label);
	r->hop_limit = p->hop_limit;
	r->traffic_class = p->tclass;
	r->reversible = 1;
	r->numb_path = 1;
	r->pkey = htobe16(p->pkey);
	r->sl = p->sl;
	r->mtu_selector = 2; /* exactly */
	r->mtu = p->mtu;
	r->rate_selector = 2;
	r->rate = p->rate;
	r->packet_life_time_selector = 2;
	r->packet_life_time = p->packet_life_time;
}

void cma_route_done(struct cma_id *id, int status)
{
	struct cma_event *e;

	id->sa_pending = 0;
	if (!status) {
		cma_path_to_rec(&id->path, &id->path_rec);
		id->id.route.path_rec = &id->path_rec;
		id->id.route.num_paths = 1;
		id->path_valid = 1;
		id->state = ST_ROUTE_RESOLVED;
	} else {
		id->state = ST_ADDR_RESOLVED;
	}
	e = cma_event_new(id, status ? RDMA_CM_EVENT_ROUTE_ERROR : RDMA_CM_EVENT_ROUTE_RESOLVED,
			  status);
	cma_event_queue(e);
}

/* A PathRecord query in flight and the ids waiting for its answer; and the
 * cache of answers, shared by every id of the process. */
struct path_key {
	struct cma_port *port;
	uint8_t sgid[16], dgid[16];
	uint16_t pkey;
	uint64_t sid;
	int qos, tclass;
};

struct pathq {
	struct pathq *next;
	struct path_key k;
	unsigned gen;               /* the port's path_gen when it was sent */
	struct cma_id **waiters;
	unsigned n, cap;
};

struct pcache {
	struct pcache *next;
	struct path_key k;
	struct cmp_path path;
	cmp_time expires;
};

static struct pathq *pathqs;
static struct pcache *pcaches;

static int key_eq(const struct path_key *a, const struct path_key *b)
{
	return a->port == b->port && !memcmp(a->sgid, b->sgid, 16) && !memcmp(a->dgid, b->dgid, 16) &&
	       a->pkey == b->pkey && a->sid == b->sid && a->qos == b->qos && a->tclass == b->tclass;
}

void cma_path_cache_flush_port(struct cma_port *p)
{
	p->path_gen++; /* a query in flight answers for the old port */
	for (struct pcache **pp = &pcaches; *pp;) {
		if ((*pp)->k.port == p) {
			struct pcache *c = *pp;
			*pp = c->next;
			free(c);
		} else {
			pp = &(*pp)->next;
		}
	}
}

static struct pcache *cache_find(const struct path_key *k, cmp_time now)
{
	for (struct pcache **pp = &pcaches; *pp;) {
		struct pcache *c = *pp;
		if (c->expires <= now) {
			*pp = c->next;
			free(c);
			continue;
		}
		if (key_eq(&c->k, k))
			return c;
		pp = &c->next;
	}
	return NULL;
}

static void cache_put(const struct path_key *k, const struct cmp_path *path)
{
	struct pcache *c;

	if (!g.path_cache_ns)
		return;
	c = cache_find(k, cma_now());
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return;
		c->k = *k;
		c->next = pcaches;
		pcaches = c;
	}
	c->path = *path;
	c->expires = cma_now() + g.path_cache_ns;
}

/* The engine's path for this id from an SA record. */
static void path_from_sa(struct cma_port *p, const struct um_sa_path_rec *pr, struct cmp_path *out)
{
	int idx;

	memset(out, 0, sizeof(*out));
	memcpy(out->sgid, pr->sgid, 16);
	memcpy(out->dgid, pr->dgid, 16);
	out->slid = pr->slid;
	out->dlid = pr->dlid;
	out->flow_label = pr->flow_label;
	out->tclass = pr->tclass;
	out->hop_limit = pr->hop_limit;
	out->sl = pr->sl;
	out->mtu = pr->mtu;
	out->rate = pr->rate;
	out->packet_life_time = pr->packet_life_time;
	out->pkey = pr->pkey;
	idx = cma_port_pkey_index(p, pr->pkey);
	out->pkey_index = (uint16_t)(idx >= 0 ? idx : 0);
	idx = cma_port_gid_index(p, pr->sgid);
	out->sgid_index = (uint8_t)(idx >= 0 ? idx : 0);
	out->port_num = p->port_num;
	/* As the kernel CM: a hop limit above 1 means the path leaves the subnet. */
	out->subnet_local = pr->hop_limit <= 1;
	out->roce = 0;
}

static void sa_answer(void *ctx, int status, const struct um_sa_path_rec *pr)
{
	struct pathq *q = ctx;
	struct cmp_path path;

	/* unlink */
	for (struct pathq **pp = &pathqs; *pp; pp = &(*pp)->next)
		if (*pp == q) {
			*pp = q->next;
			break;
		}
	if (!status) {
		path_from_sa(q->k.port, pr, &path);
		if (q->gen == q->k.port->path_gen)
			cache_put(&q->k, &path);
	} else if (status == -ETIMEDOUT) {
		cma_tx_port_info(q->k.port); /* the SM may have moved */
	}
	for (unsigned i = 0; i < q->n; i++) {
		struct cma_id *id = q->waiters[i];

		if (!id)
			continue;
		if (!status)
			id->path = path;
		cma_route_done(id, status == -ECANCELED ? -ENODEV : status);
	}
	free(q->waiters);
	free(q);
}

/* An id that goes away stops waiting. */
static void route_cancel(struct cma_id *id)
{
	for (struct pathq *q = pathqs; q; q = q->next)
		for (unsigned i = 0; i < q->n; i++)
			if (q->waiters[i] == id)
				q->waiters[i] = NULL;
	id->sa_pending = 0;
}

/* The flow label of a RoCE v2 path, as kernel 6.1's rdma_cm chooses it
 * (cmp_roce_flow_label): an IPv6 source address's own flow label when it
 * has one, else one from the connection's rdma_cm ports, so each
 * connection between two hosts gets its own label and, through it, its own
 * UDP source port on a NIC that derives one from the label. RoCE v1 paths
 * carry none. */
static uint32_t roce_flow_label(const struct cma_id *id, int sgid_index)
{
	const struct cma_port *p = id->port;
	const struct sockaddr *src = (const struct sockaddr *)&id->id.route.addr.src_addr;
	const struct sockaddr *dst = (const struct sockaddr *)&id->id.route.addr.dst_addr;

	if (p->gid_types && sgid_index >= 0 && sgid_index < p->ngids &&
	    p->gid_types[sgid_index] == IBV_GID_TYPE_ROCE_V1)
		return 0;
	if (src->sa_family == AF_INET6) {
		uint32_t fl = be32toh(((const struct sockaddr_in6 *)src)->sin6_flowinfo) & 0xFFFFF;

		if (fl)
			return fl;
	}
	return cmp_roce_flow_label(cma_addr_port(src), cma_addr_port(dst));
}

static int roce_path(struct cma_id *id)
{
	struct cma_port *p = id->port;
	struct cmp_path *path = &id->path;
	const struct rdma_ib_addr *ib = &id->id.route.addr.addr.ibaddr;
	int idx;

	memset(path, 0, sizeof(*path));
	memcpy(path->sgid, ib->sgid.raw, 16);
	memcpy(path->dgid, ib->dgid.raw, 16);
	path->pkey = 0xFFFF;
	idx = cma_port_pkey_index(p, 0xFFFF);
	path->pkey_index = (uint16_t)(idx >= 0 ? idx : 0);
	idx = cma_port_gid_index(p, path->sgid);
	path->sgid_index = (uint8_t)(idx >= 0 ? idx : 0);
	path->flow_label = roce_flow_label(id, idx);
	path->mtu = (uint8_t)(p->attr.active_mtu ? p->attr.active_mtu : IBV_MTU_1024);
	path->rate = 0;
	path->hop_limit = 64;
	path->tclass = id->tos;
	path->sl = (uint8_t)(id->tos >> 5); /* the 802.1p priority of the ToS precedence */
	path->packet_life_time = id->ack_timeout_set && id->ack_timeout
					 ? (uint8_t)(id->ack_timeout - 1)
					 : CMA_IBOE_PACKET_LIFETIME;
	path->port_num = p->port_num;
	path->roce = 1;
	path->subnet_local = 0;
	return 0;
}

CMA_EXPORT int rdma_resolve_route(struct rdma_cm_id *cm_id, int timeout_ms)
{
	if (cma_remote())
		return cmc_resolve_route(cm_id, timeout_ms);
	struct cma_id *id = cma_id_of(cm_id);
	struct path_key k;
	struct pcache *c;
	struct pathq *q;
	struct cma_port *p;

	if (!id)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (id->state != ST_ADDR_RESOLVED || !id->port) {
		cma_unlock();
		return cma_fail(EINVAL);
	}
	/* ROUTE_RESOLVED / ROUTE_ERROR, held until the SA answers. */
	if (cma_event_reserve(id, 1, 0) < 0) {
		cma_unlock();
		return cma_fail(ENOMEM);
	}
	p = id->port;
	if (!p->roce) {
		/* A new LID, SM LID or port state flushes the port's cached
		 * paths (cma_port.c): one ibv_query_port, without the lock. */
		cma_port_refresh(p, 0);
		if (id->state != ST_ADDR_RESOLVED || id->port != p) {
			cma_unlock();
			return cma_fail(EINVAL);
		}
	}
	if (p->roce) {
		roce_path(id);
		cma_route_done(id, 0);
		cma_unlock();
		return cma_sync_wait(id);
	}
	memset(&k, 0, sizeof(k));
	k.port = p;
	memcpy(k.sgid, id->id.route.addr.addr.ibaddr.sgid.raw, 16);
	memcpy(k.dgid, id->id.route.addr.addr.ibaddr.dgid.raw, 16);
	k.pkey = be16toh(id->id.route.addr.addr.ibaddr.pkey);
	k.sid = cma_service_id(id, &id->id.route.addr.dst_addr);
	k.qos = -1;
	k.tclass = -1;
	if (id->id.route.addr.dst_addr.sa_family == AF_INET)
		k.qos = id->tos;
	else if (id->id.route.addr.dst_addr.sa_family == AF_INET6)
		k.tclass = (int)((ntohl(id->id.route.addr.dst_sin6.sin6_flowinfo) >> 20) & 0xFF);
	else if (id->tos_set)
		k.tclass = id->tos;

	c = g.path_cache_ns ? cache_find(&k, cma_now()) : NULL;
	if (c) {
		id->path = c->path;
		cma_route_done(id, 0);
		cma_unlock();
		return cma_sync_wait(id);
	}
	if (cma_port_open(p) < 0) {
		int e = errno;
		cma_unlock();
		return cma_fail(e);
	}
	for (q = pathqs; q; q = q->next)
		if (key_eq(&q->k, &k) && q->gen == p->path_gen)
			break;
	if (!q) {
		struct um_sa_path_req req;
		int tries = 4, per;

		q = calloc(1, sizeof(*q));
		if (!q) {
			cma_unlock();
			return cma_fail(ENOMEM);
		}
		q->k = k;
		q->gen = p->path_gen;
		memset(&req, 0, sizeof(req));
		memcpy(req.sgid, k.sgid, 16);
		memcpy(req.dgid, k.dgid, 16);
		req.pkey = k.pkey;
		req.service_id = k.sid;
		req.qos_class = k.qos;
		req.tclass = k.tclass;
		per = timeout_ms > 0 ? timeout_ms / tries : 1000;
		if (per < g.sa_timeout_min_ms)
			per = g.sa_timeout_min_ms;
		req.timeout_ms = per;
		req.retries = tries - 1;
		if (um_sa_path_get(p->sa, &req, sa_answer, q, NULL) < 0) {
			int e = errno;
			free(q);
			cma_unlock();
			return cma_fail(e);
		}
		q->next = pathqs;
		pathqs = q;
	}
	if (q->n == q->cap) {
		unsigned nc = q->cap ? q->cap * 2 : 4;
		struct cma_id **nw = realloc(q->waiters, nc * sizeof(*nw));
		if (!nw) {
			cma_unlock();
			return cma_fail(ENOMEM);
		}
		q->waiters = nw;
		q->cap = nc;
	}
	q->waiters[q->n++] = id;
	id->sa_pending = 1;
	id->state = ST_ROUTE_QUERY;
	cma_kick();
	cma_unlock();
	return cma_sync_wait(id);
}

void cma_route_forget(struct cma_id *id)
{
	if (id->sa_pending)
		route_cancel(id);
}

/* ---- options ---------------------------------------------------------------------------- */

static int set_ib_path(struct cma_id *id, const struct ibv_path_data *pd, size_t n)
{
	const struct ibv_path_record *r = NULL;
	struct cmp_path *p = &id->path;
	int idx;

	for (size_t i = 0; i < n; i++) {
		if ((pd[i].flags & (IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL)) ==
		    (IBV_PATH_FLAG_PRIMARY | IBV_PATH_FLAG_BIDIRECTIONAL)) {
			r = &pd[i].path;
			break;
		}
	}
	if (!r)
		return cma_fail(EINVAL);
	if (id->state != ST_ADDR_RESOLVED || !id->port)
		return cma_fail(EINVAL);
	memset(p, 0, sizeof(*p));
	memcpy(p->dgid, r->dgid.raw, 16);
	memcpy(p->sgid, r->sgid.raw, 16);
	p->dlid = be16toh(r->dlid);
	p->slid = be16toh(r->slid);
	p->flow_label = (be32toh(r->flowlabel_hoplimit) >> 8) & 0xFFFFF;
	p->hop_limit = (uint8_t)(be32toh(r->flowlabel_hoplimit) & 0xFF);
	p->tclass = r->tclass;
	p->pkey = be16toh(r->pkey);
	p->sl = (uint8_t)(be16toh(r->qosclass_sl) & 0xF);
	p->mtu = r->mtu & 0x3F;
	p->rate = r->rate & 0x3F;
	p->packet_life_time = r->packetlifetime & 0x3F;
	idx = cma_port_pkey_index(id->port, p->pkey);
	p->pkey_index = (uint16_t)(idx >= 0 ? idx : 0);
	idx = cma_port_gid_index(id->port, p->sgid);
	p->sgid_index = (uint8_t)(idx >= 0 ? idx : 0);
	p->port_num = id->port->port_num;
	p->roce = id->port->roce;
	p->subnet_local = !p->roce && p->hop_limit <= 1;
	/* As the kernel does: setting the path resolves the route. */
	cma_route_done(id, 0);
	return 0;
}

CMA_EXPORT int rdma_set_option(struct rdma_cm_id *cm_id, int level, int optname, void *optval,
			       size_t optlen)
{
	if (cma_remote())
		return cmc_set_option(cm_id, level, optname, optval, optlen);
	struct cma_id *id = cma_id_of(cm_id);
	int rc = 0;

	if (!id || !optval)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != sizeof(uint8_t)) {
				rc = cma_fail(EINVAL);
				break;
			}
			id->tos = *(uint8_t *)optval;
			id->tos_set = 1;
			break;
		case RDMA_OPTION_ID_REUSEADDR:
			if (optlen != sizeof(int)) {
				rc = cma_fail(EINVAL);
				break;
			}
			/* As the kernel: while idle, or to turn it on before listening. */
			if (id->state == ST_IDLE || (*(int *)optval && id->state != ST_LISTEN))
				id->reuseaddr = !!*(int *)optval;
			else
				rc = cma_fail(EINVAL);
			break;
		case RDMA_OPTION_ID_AFONLY:
			if (optlen != sizeof(int)) {
				rc = cma_fail(EINVAL);
				break;
			}
			if (id->state == ST_IDLE)
				id->afonly = !!*(int *)optval;
			else
				rc = cma_fail(EINVAL);
			break;
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t)) {
				rc = cma_fail(EINVAL);
				break;
			}
			id->ack_timeout = *(uint8_t *)optval;
			id->ack_timeout_set = 1;
			break;
		default:
			rc = cma_fail(ENOSYS);
			break;
		}
	} else if (level == RDMA_OPTION_IB) {
		if (optname != RDMA_OPTION_IB_PATH)
			rc = cma_fail(ENOSYS);
		else if (!optlen || optlen % sizeof(struct ibv_path_data))
			rc = cma_fail(EINVAL);
		else
			rc = set_ib_path(id, optval, optlen / sizeof(struct ibv_path_data));
	} else {
		rc = cma_fail(ENOSYS);
	}
	cma_unlock();
	return rc;
}

/* ---- ports ------------------------------------------------------------------------------- */

CMA_EXPORT uint16_t rdma_get_src_port(struct rdma_cm_id *cm_id)
{
	if (!cm_id)
		return 0;
	return htons(cma_addr_port(&cm_id->route.addr.src_addr));
}

CMA_EXPORT uint16_t rdma_get_dst_port(struct rdma_cm_id *cm_id)
{
	if (!cm_id)
		return 0;
	return htons(cma_addr_port(&cm_id->route.addr.dst_addr));
}
