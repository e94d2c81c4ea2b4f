/*
 * cma_netlink.c - rtnetlink requests and answers for address resolution
 * (lib/cma_netlink.h). Message layouts are the kernel's uapi:
 * linux/rtnetlink.h, linux/neighbour.h, linux/if_link.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <net/if_arp.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <linux/if_link.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include "lib/cma_netlink.h"

/* ibv_gid_type values (infiniband/verbs.h), without including verbs.h */
#define GID_TYPE_ROCE_V1 1
#define GID_TYPE_ROCE_V2 2

static int alen(int family)
{
	return family == AF_INET ? 4 : family == AF_INET6 ? 16 : 0;
}

/* ---- builders ---- */

static int put_attr(struct nlmsghdr *h, size_t cap, unsigned short type, const void *data,
		    size_t len)
{
	size_t off = NLMSG_ALIGN(h->nlmsg_len);
	struct rtattr *a = (struct rtattr *)((char *)h + off);

	if (off + RTA_SPACE(len) > cap)
		return -1;
	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	memcpy(RTA_DATA(a), data, len);
	memset((char *)RTA_DATA(a) + len, 0, RTA_SPACE(len) - RTA_LENGTH(len));
	h->nlmsg_len = (uint32_t)(off + RTA_SPACE(len));
	return 0;
}

static struct nlmsghdr *start(void *buf, size_t cap, uint16_t type, uint16_t flags, uint32_t seq,
			      size_t body)
{
	struct nlmsghdr *h = buf;

	if (cap < NLMSG_SPACE(body))
		return NULL;
	memset(buf, 0, NLMSG_SPACE(body));
	h->nlmsg_len = (uint32_t)NLMSG_LENGTH(body);
	h->nlmsg_type = type;
	h->nlmsg_flags = flags;
	h->nlmsg_seq = seq;
	return h;
}

size_t nlr_build_getroute(void *buf, size_t cap, uint32_t seq, int family, const void *dst,
			  const void *src, int oif)
{
	struct nlmsghdr *h = start(buf, cap, RTM_GETROUTE, NLM_F_REQUEST, seq, sizeof(struct rtmsg));
	struct rtmsg *rt;
	int n = alen(family);

	if (!h || !n || !dst)
		return 0;
	rt = NLMSG_DATA(h);
	rt->rtm_family = (unsigned char)family;
	rt->rtm_dst_len = (unsigned char)(n * 8);
	if (put_attr(h, cap, RTA_DST, dst, (size_t)n) < 0)
		return 0;
	if (src) {
		rt->rtm_src_len = (unsigned char)(n * 8);
		if (put_attr(h, cap, RTA_SRC, src, (size_t)n) < 0)
			return 0;
	}
	if (oif > 0) {
		uint32_t o = (uint32_t)oif;
		if (put_attr(h, cap, RTA_OIF, &o, sizeof(o)) < 0)
			return 0;
	}
	return h->nlmsg_len;
}

size_t nlr_build_getneigh(void *buf, size_t cap, uint32_t seq, int family, int ifindex,
			  const void *dst)
{
	struct nlmsghdr *h = start(buf, cap, RTM_GETNEIGH, NLM_F_REQUEST, seq, sizeof(struct ndmsg));
	struct ndmsg *nd;
	int n = alen(family);

	if (!h || !n || !dst)
		return 0;
	nd = NLMSG_DATA(h);
	nd->ndm_family = (unsigned char)family;
	nd->ndm_ifindex = ifindex;
	if (put_attr(h, cap, NDA_DST, dst, (size_t)n) < 0)
		return 0;
	return h->nlmsg_len;
}

size_t nlr_build_neigh_use(void *buf, size_t cap, uint32_t seq, int family, int ifindex,
			   const void *dst)
{
	struct nlmsghdr *h = start(buf, cap, RTM_NEWNEIGH,
				   NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_REPLACE, seq,
				   sizeof(struct ndmsg));
	struct ndmsg *nd;
	int n = alen(family);

	if (!h || !n || !dst || ifindex <= 0)
		return 0;
	nd = NLMSG_DATA(h);
	nd->ndm_family = (unsigned char)family;
	nd->ndm_ifindex = ifindex;
	nd->ndm_state = NUD_NONE;
	nd->ndm_flags = NTF_USE;
	if (put_attr(h, cap, NDA_DST, dst, (size_t)n) < 0)
		return 0;
	return h->nlmsg_len;
}

size_t nlr_build_getlink(void *buf, size_t cap, uint32_t seq, int ifindex)
{
	struct nlmsghdr *h = start(buf, cap, RTM_GETLINK, NLM_F_REQUEST, seq, sizeof(struct ifinfomsg));
	struct ifinfomsg *ifi;

	if (!h || ifindex <= 0)
		return 0;
	ifi = NLMSG_DATA(h);
	ifi->ifi_family = AF_UNSPEC;
	ifi->ifi_index = ifindex;
	return h->nlmsg_len;
}

/* ---- parsers ---- */

int nlr_parse_error(const struct nlmsghdr *h, size_t len)
{
	const struct nlmsgerr *e;

	if (len < sizeof(*h) || h->nlmsg_len < sizeof(*h) || h->nlmsg_len > len)
		return -EBADMSG;
	if (h->nlmsg_type != NLMSG_ERROR)
		return -ENOMSG;
	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(int)))
		return -EBADMSG;
	e = NLMSG_DATA(h);
	if (e->error > 0 || e->error < -4095)
		return -EBADMSG;
	return e->error;
}

/* Common checks: the header fits, the type is want (or an error, whose
 * errno is returned), the fixed body fits. */
static int check(const struct nlmsghdr *h, size_t len, uint16_t want, size_t body)
{
	int e;

	if (len < sizeof(*h) || h->nlmsg_len < sizeof(*h) || h->nlmsg_len > len)
		return -EBADMSG;
	if (h->nlmsg_type == NLMSG_ERROR) {
		e = nlr_parse_error(h, len);
		return e ? e : -ENOMSG;
	}
	if (h->nlmsg_type != want)
		return -ENOMSG;
	if (h->nlmsg_len < NLMSG_LENGTH(body))
		return -EBADMSG;
	return 0;
}

/* Walks the attributes after a body of size body; calls f for each; a
 * malformed attribute list is -EBADMSG. */
#define FOR_ATTRS(h, body, a, rem)                                                         \
	for (a = (struct rtattr *)((char *)NLMSG_DATA(h) + NLMSG_ALIGN(body)),             \
	    rem = (int)h->nlmsg_len - (int)NLMSG_LENGTH(NLMSG_ALIGN(body));                \
	     RTA_OK(a, rem); a = RTA_NEXT(a, rem))

static int addr_attr(const struct rtattr *a, int family, uint8_t out[16])
{
	int n = alen(family);

	if (!n || RTA_PAYLOAD(a) != (unsigned)n)
		return -EBADMSG;
	memset(out, 0, 16);
	memcpy(out, RTA_DATA(a), (size_t)n);
	return 0;
}

int nlr_parse_route(const struct nlmsghdr *h, size_t len, struct nlr_route *r)
{
	const struct rtmsg *rt;
	struct rtattr *a;
	int rem, e = check(h, len, RTM_NEWROUTE, sizeof(struct rtmsg));

	if (e)
		return e;
	rt = NLMSG_DATA(h);
	memset(r, 0, sizeof(*r));
	r->family = rt->rtm_family;
	r->type = rt->rtm_type;
	r->table = rt->rtm_table;
	if (!alen(r->family))
		return -EBADMSG;
	FOR_ATTRS(h, sizeof(struct rtmsg), a, rem) {
		switch (a->rta_type) {
		case RTA_OIF:
			if (RTA_PAYLOAD(a) != 4)
				return -EBADMSG;
			memcpy(&r->oif, RTA_DATA(a), 4);
			break;
		case RTA_PREFSRC:
			if (addr_attr(a, r->family, r->prefsrc))
				return -EBADMSG;
			r->has_prefsrc = 1;
			break;
		case RTA_GATEWAY:
			if (addr_attr(a, r->family, r->gw))
				return -EBADMSG;
			r->has_gw = 1;
			break;
		case RTA_DST:
			if (addr_attr(a, r->family, r->dst))
				return -EBADMSG;
			r->has_dst = 1;
			break;
		case RTA_TABLE:
			if (RTA_PAYLOAD(a) != 4)
				return -EBADMSG;
			memcpy(&r->table, RTA_DATA(a), 4);
			break;
		default:
			break;
		}
	}
	return rem == 0 || rem < (int)sizeof(struct rtattr) ? 0 : -EBADMSG;
}

int nlr_parse_neigh(const struct nlmsghdr *h, size_t len, struct nlr_neigh *n)
{
	const struct ndmsg *nd;
	struct rtattr *a;
	int rem, e = check(h, len, RTM_NEWNEIGH, sizeof(struct ndmsg));

	if (e)
		return e;
	nd = NLMSG_DATA(h);
	memset(n, 0, sizeof(*n));
	n->family = nd->ndm_family;
	n->ifindex = nd->ndm_ifindex;
	n->state = nd->ndm_state;
	n->flags = nd->ndm_flags;
	FOR_ATTRS(h, sizeof(struct ndmsg), a, rem) {
		switch (a->rta_type) {
		case NDA_DST:
			if (addr_attr(a, n->family, n->dst))
				return -EBADMSG;
			n->has_dst = 1;
			break;
		case NDA_LLADDR:
			if (RTA_PAYLOAD(a) > sizeof(n->lladdr))
				return -EBADMSG;
			n->lladdr_len = (int)RTA_PAYLOAD(a);
			memcpy(n->lladdr, RTA_DATA(a), (size_t)n->lladdr_len);
			break;
		default:
			break;
		}
	}
	return rem == 0 || rem < (int)sizeof(struct rtattr) ? 0 : -EBADMSG;
}

int nlr_parse_error_neigh(const struct nlmsghdr *h, size_t len, uint16_t *type,
			  struct nlr_neigh *n)
{
	const struct nlmsgerr *err;
	const struct nlmsghdr *rq;
	const struct ndmsg *nd;
	struct rtattr *a;
	size_t have;
	int rem, e = nlr_parse_error(h, len);

	if (e == -ENOMSG || e == -EBADMSG)
		return e;
	err = NLMSG_DATA(h);
	/* the request follows the errno: its header, and (unless the socket
	 * asked for NETLINK_CAP_ACK) its body */
	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*err)))
		return -EBADMSG;
	rq = &err->msg;
	have = h->nlmsg_len - NLMSG_LENGTH(sizeof(*err)) + sizeof(*rq);
	if (rq->nlmsg_len < NLMSG_LENGTH(sizeof(*nd)) || rq->nlmsg_len > have ||
	    (rq->nlmsg_type != RTM_GETNEIGH && rq->nlmsg_type != RTM_NEWNEIGH))
		return -ENOMSG;
	nd = NLMSG_DATA(rq);
	memset(n, 0, sizeof(*n));
	n->family = nd->ndm_family;
	n->ifindex = nd->ndm_ifindex;
	n->state = nd->ndm_state;
	n->flags = nd->ndm_flags;
	FOR_ATTRS(rq, sizeof(struct ndmsg), a, rem) {
		if (a->rta_type == NDA_DST) {
			if (addr_attr(a, n->family, n->dst))
				return -EBADMSG;
			n->has_dst = 1;
		}
	}
	*type = rq->nlmsg_type;
	return e;
}

int nlr_parse_link(const struct nlmsghdr *h, size_t len, struct nlr_link *l)
{
	const struct ifinfomsg *ifi;
	struct rtattr *a;
	int rem, e = check(h, len, RTM_NEWLINK, sizeof(struct ifinfomsg));

	if (e)
		return e;
	ifi = NLMSG_DATA(h);
	memset(l, 0, sizeof(*l));
	l->ifindex = ifi->ifi_index;
	l->type = ifi->ifi_type;
	l->flags = ifi->ifi_flags;
	FOR_ATTRS(h, sizeof(struct ifinfomsg), a, rem) {
		switch (a->rta_type) {
		case IFLA_IFNAME: {
			size_t n = RTA_PAYLOAD(a);
			if (n > sizeof(l->name))
				return -EBADMSG;
			memcpy(l->name, RTA_DATA(a), n);
			l->name[sizeof(l->name) - 1] = 0;
			break;
		}
		case IFLA_ADDRESS:
			if (RTA_PAYLOAD(a) > sizeof(l->addr))
				return -EBADMSG;
			l->addr_len = (int)RTA_PAYLOAD(a);
			memcpy(l->addr, RTA_DATA(a), (size_t)l->addr_len);
			break;
		default:
			break;
		}
	}
	return rem == 0 || rem < (int)sizeof(struct rtattr) ? 0 : -EBADMSG;
}

int nlr_neigh_valid(uint16_t state)
{
	return !!(state & (NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE |
			   NUD_DELAY));
}

int nlr_ipoib_gid(const uint8_t *hw, int len, uint8_t gid[16])
{
	if (!hw || len != 20)
		return -1;
	memcpy(gid, hw + 4, 16);
	return 0;
}

int nlr_pick_roce_gid(const uint8_t (*gids)[16], const unsigned *types, const unsigned *ndevs,
		      int n, int ifindex, const uint8_t gid[16])
{
	static const unsigned order[] = { GID_TYPE_ROCE_V2, GID_TYPE_ROCE_V1 };

	for (unsigned o = 0; o < sizeof(order) / sizeof(order[0]); o++)
		for (int i = 0; i < n; i++)
			if (types[i] == order[o] && ndevs[i] == (unsigned)ifindex &&
			    !memcmp(gids[i], gid, 16))
				return i;
	return -1;
}

/* ---- I/O ---- */

int nlr_is_route_socket(int fd)
{
	int dom = 0, proto = -1;
	socklen_t l = sizeof(dom);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0 || dom != AF_NETLINK)
		return 0;
	l = sizeof(proto);
	return getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) == 0 && proto == NETLINK_ROUTE;
}

int nlr_open(unsigned groups)
{
	struct sockaddr_nl sa;
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.nl_family = AF_NETLINK;
	sa.nl_groups = groups;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int nlr_membership(int fd, unsigned grp, int on)
{
	int g = (int)grp;

	return setsockopt(fd, SOL_NETLINK, on ? NETLINK_ADD_MEMBERSHIP : NETLINK_DROP_MEMBERSHIP, &g,
			  sizeof(g));
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int nlr_transact(const struct nlr_sock *s, void *req, size_t len, int timeout_ms,
		 int (*cb)(const struct nlmsghdr *h, size_t len, void *arg), void *arg)
{
	int fd = s->fd;
	struct nlmsghdr *rq = req;
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	long long deadline = now_ms() + timeout_ms;
	int cb_done = 0, stop = 0;
	union {
		char b[16384];
		struct nlmsghdr h;
	} buf;

	if (sendto(fd, req, len, 0, (struct sockaddr *)&to, sizeof(to)) < 0)
		return -errno;
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long long left = deadline - now_ms();
		ssize_t n;

		if (left <= 0)
			return -ETIMEDOUT;
		if (poll(&pfd, 1, (int)left) < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		n = recv(fd, buf.b, sizeof(buf.b), MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == ENOBUFS && s->other) {
				/* a subscribed socket overran: notifications were
				 * lost (not our answer, which is still to come) */
				s->other(s->arg, NULL, 0);
				continue;
			}
			return -errno;
		}
		for (struct nlmsghdr *h = &buf.h; NLMSG_OK(h, (unsigned)n); h = NLMSG_NEXT(h, n)) {
			int e;

			if (h->nlmsg_seq != rq->nlmsg_seq) {
				/* a multicast notification or an earlier answer */
				if (s->other)
					s->other(s->arg, h, (size_t)n); /* n: what is left from h on */
				continue;
			}
			if (h->nlmsg_type == NLMSG_DONE)
				return stop;
			if (h->nlmsg_type == NLMSG_ERROR)
				return stop ? stop : nlr_parse_error(h, (size_t)n);
			if (cb_done)
				continue;
			e = cb(h, (size_t)n, arg);
			if (e && !(rq->nlmsg_flags & NLM_F_DUMP))
				return e < 0 ? e : 0;
			if (!(rq->nlmsg_flags & NLM_F_DUMP))
				return 0;
			if (e) {
				/* The callback is done, the dump is not: read it to
				 * its end, or the socket stays busy with it (the
				 * kernel answers the next dump with EBUSY). */
				cb_done = 1;
				stop = e < 0 ? e : 0;
			}
		}
	}
}

static int route_cb(const struct nlmsghdr *h, size_t len, void *arg)
{
	int e = nlr_parse_route(h, len, arg);
	return e == -ENOMSG ? 0 : e ? e : 1;
}

static int neigh_cb(const struct nlmsghdr *h, size_t len, void *arg)
{
	int e = nlr_parse_neigh(h, len, arg);
	return e == -ENOMSG ? 0 : e ? e : 1;
}

static int link_cb(const struct nlmsghdr *h, size_t len, void *arg)
{
	int e = nlr_parse_link(h, len, arg);
	return e == -ENOMSG ? 0 : e ? e : 1;
}

static int one_shot(const struct nlr_sock *s, void *req, size_t len,
		    int (*cb)(const struct nlmsghdr *, size_t, void *), void *arg)
{
	struct nlr_sock own = { .fd = -1 };
	int e;

	if (!len)
		return -EINVAL;
	if (s && s->fd >= 0)
		return nlr_transact(s, req, len, s->timeout_ms > 0 ? s->timeout_ms : 1000, cb, arg);
	own.fd = nlr_open(0);
	if (own.fd < 0)
		return 1; /* no rtnetlink here */
	e = nlr_transact(&own, req, len, 1000, cb, arg);
	close(own.fd);
	return e;
}

static uint32_t next_seq(void)
{
	static uint32_t seq;
	return __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED) + (uint32_t)time(NULL);
}

int nlr_get_route(const struct nlr_sock *s, int family, const void *dst, const void *src,
		  struct nlr_route *r)
{
	char req[256];
	size_t n = nlr_build_getroute(req, sizeof(req), next_seq(), family, dst, src, 0);

	memset(r, 0, sizeof(*r));
	return one_shot(s, req, n, route_cb, r);
}

int nlr_get_neigh(const struct nlr_sock *s, int family, int ifindex, const void *dst,
		  struct nlr_neigh *nb)
{
	char req[256];
	size_t n = nlr_build_getneigh(req, sizeof(req), next_seq(), family, ifindex, dst);

	memset(nb, 0, sizeof(*nb));
	return one_shot(s, req, n, neigh_cb, nb);
}

int nlr_get_link(const struct nlr_sock *s, int ifindex, struct nlr_link *l)
{
	char req[256];
	size_t n = nlr_build_getlink(req, sizeof(req), next_seq(), ifindex);

	memset(l, 0, sizeof(*l));
	return one_shot(s, req, n, link_cb, l);
}

size_t nlr_build_getaddr_dump(void *buf, size_t cap, uint32_t seq, int family)
{
	struct nlmsghdr *h = start(buf, cap, RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, seq,
				   sizeof(struct ifaddrmsg));
	struct ifaddrmsg *ifa;

	if (!h)
		return 0;
	ifa = NLMSG_DATA(h);
	ifa->ifa_family = (unsigned char)family;
	return h->nlmsg_len;
}

int nlr_parse_addr(const struct nlmsghdr *h, size_t len, struct nlr_addr *a)
{
	const struct ifaddrmsg *ifa;
	struct rtattr *at;
	int rem, have_local = 0, have_addr = 0, e = check(h, len, RTM_NEWADDR, sizeof(struct ifaddrmsg));
	uint8_t addr[16];

	if (e)
		return e;
	ifa = NLMSG_DATA(h);
	memset(a, 0, sizeof(*a));
	a->family = ifa->ifa_family;
	a->prefixlen = ifa->ifa_prefixlen;
	a->scope = ifa->ifa_scope;
	a->ifindex = (int)ifa->ifa_index;
	if (!alen(a->family))
		return -ENOMSG; /* AF_PACKET and the like: not an IP address */
	FOR_ATTRS(h, sizeof(struct ifaddrmsg), at, rem) {
		/* IFA_LOCAL is the interface's own address; IFA_ADDRESS the
		 * peer's on a point-to-point link, else the same */
		if (at->rta_type == IFA_LOCAL) {
			if (addr_attr(at, a->family, a->addr))
				return -EBADMSG;
			have_local = 1;
		} else if (at->rta_type == IFA_ADDRESS) {
			if (addr_attr(at, a->family, addr))
				return -EBADMSG;
			have_addr = 1;
		}
	}
	if (!have_local && have_addr)
		memcpy(a->addr, addr, 16);
	if (!have_local && !have_addr)
		return -EBADMSG;
	return rem == 0 || rem < (int)sizeof(struct rtattr) ? 0 : -EBADMSG;
}

struct addrs_walk {
	int (*cb)(const struct nlr_addr *a, void *arg);
	void *arg;
};

static int addr_cb(const struct nlmsghdr *h, size_t len, void *arg)
{
	struct addrs_walk *w = arg;
	struct nlr_addr a;
	int e = nlr_parse_addr(h, len, &a);

	if (e == -ENOMSG)
		return 0;
	if (e)
		return e;
	return w->cb(&a, w->arg);
}

int nlr_get_addrs(const struct nlr_sock *s, int (*cb)(const struct nlr_addr *a, void *arg), void *arg)
{
	char req[64];
	struct addrs_walk w = { cb, arg };
	size_t n = nlr_build_getaddr_dump(req, sizeof(req), next_seq(), AF_UNSPEC);

	return one_shot(s, req, n, addr_cb, &w);
}
