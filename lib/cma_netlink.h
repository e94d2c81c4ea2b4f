/*
 * cma_netlink.h - the routing table and neighbour tables through rtnetlink
 * (RTM_GETROUTE, RTM_GETNEIGH, RTM_GETLINK), as rdma_resolve_addr needs
 * them: the outgoing interface and preferred source of a destination, the
 * next hop's link-layer address and state, an interface's hardware type
 * and address (IPoIB: the port GID is in it).
 *
 * The builders and parsers are pure functions on byte buffers (no socket,
 * no library state), so that unit tests feed them recorded messages; the
 * few I/O helpers at the end talk to the kernel. Nothing here depends on
 * the rest of the library.
 */
#ifndef USCM_CMA_NETLINK_H
#define USCM_CMA_NETLINK_H

#include <stddef.h>
#include <stdint.h>
#include <linux/netlink.h>

/* RTM_NEWROUTE (the answer to RTM_GETROUTE for one destination) */
struct nlr_route {
	int family;           /* AF_INET / AF_INET6 */
	unsigned type;        /* RTN_UNICAST, RTN_LOCAL, RTN_UNREACHABLE, ... */
	unsigned table;
	int oif;              /* RTA_OIF: the outgoing interface, 0 if absent */
	int has_prefsrc;
	uint8_t prefsrc[16];  /* RTA_PREFSRC: the source address the kernel picks */
	int has_gw;
	uint8_t gw[16];       /* RTA_GATEWAY: the next hop when not on-link */
	int has_dst;
	uint8_t dst[16];
};

/* RTM_NEWNEIGH */
struct nlr_neigh {
	int family;
	int ifindex;
	uint16_t state;       /* NUD_* */
	uint8_t flags;        /* NTF_* */
	int has_dst;
	uint8_t dst[16];
	int lladdr_len;       /* 0: no NDA_LLADDR (e.g. INCOMPLETE) */
	uint8_t lladdr[32];
};

/* RTM_NEWLINK */
struct nlr_link {
	int ifindex;
	unsigned type;        /* ARPHRD_ETHER, ARPHRD_INFINIBAND, ARPHRD_LOOPBACK, ... */
	unsigned flags;       /* IFF_* */
	char name[16];
	int addr_len;
	uint8_t addr[32];     /* IFLA_ADDRESS */
};

/* Builders: a request in buf (cap bytes), its length, or 0 if it does not
 * fit. Addresses are 4 (AF_INET) or 16 (AF_INET6) bytes; src may be NULL. */
size_t nlr_build_getroute(void *buf, size_t cap, uint32_t seq, int family, const void *dst,
			  const void *src, int oif);
size_t nlr_build_getneigh(void *buf, size_t cap, uint32_t seq, int family, int ifindex,
			  const void *dst);
size_t nlr_build_getlink(void *buf, size_t cap, uint32_t seq, int ifindex);
/* RTM_NEWNEIGH with NTF_USE: "resolve this neighbour now" (the kernel's
 * neigh_event_send, which is what its own address resolution calls);
 * creates an INCOMPLETE entry if there is none. Needs CAP_NET_ADMIN. */
size_t nlr_build_neigh_use(void *buf, size_t cap, uint32_t seq, int family, int ifindex,
			   const void *dst);

/* Parsers of one message (h, len bytes from h on): 0; -ENOMSG when it is
 * another message type; -EBADMSG when it is malformed; for NLMSG_ERROR the
 * negative errno it carries (0 is an ACK: -ENOMSG). */
int nlr_parse_route(const struct nlmsghdr *h, size_t len, struct nlr_route *r);
int nlr_parse_neigh(const struct nlmsghdr *h, size_t len, struct nlr_neigh *n);
int nlr_parse_link(const struct nlmsghdr *h, size_t len, struct nlr_link *l);
/* NLMSG_ERROR: its errno as a negative number (0: an ACK); -ENOMSG if h is
 * not one. */
int nlr_parse_error(const struct nlmsghdr *h, size_t len);

/* An NLMSG_ERROR (or ACK) answering a neighbour request (RTM_GETNEIGH, or
 * RTM_NEWNEIGH with NTF_USE): the request's type in *type and its family,
 * interface and destination in n (the kernel echoes the request), and the
 * errno it carries (<= 0); -ENOMSG when h is no such answer (another
 * request's, or NETLINK_CAP_ACK cut the echo short); -EBADMSG. */
int nlr_parse_error_neigh(const struct nlmsghdr *h, size_t len, uint16_t *type,
			  struct nlr_neigh *n);

/* The kernel's NUD_VALID: an entry whose link-layer address may be used
 * (PERMANENT, NOARP, REACHABLE, PROBE, STALE, DELAY). */
int nlr_neigh_valid(uint16_t state);
/* An IPoIB hardware address (INFINIBAND_ALEN = 20: flags and QPN, then
 * the port GID): the GID, 0; -1 if it is not one. */
int nlr_ipoib_gid(const uint8_t *hw, int len, uint8_t gid[16]);

/* RoCE source GID selection among a port's GID entries: the entry bound
 * to netdev ifindex holding gid, RoCEv2 first, then RoCEv1 (the kernel's
 * default GID type order). types[i] is IBV_GID_TYPE_* of entry i, ndevs[i]
 * its netdev (0: none). Index, or -1. */
int nlr_pick_roce_gid(const uint8_t (*gids)[16], const unsigned *types, const unsigned *ndevs,
		      int n, int ifindex, const uint8_t gid[16]);

/* ---- I/O ---- */

/* A NETLINK_ROUTE socket (close-on-exec), subscribed to groups (RTMGRP_*
 * bits, 0: none); -1 with errno. */
int nlr_open(unsigned groups);
/* 1 when fd is a NETLINK_ROUTE socket (SO_DOMAIN, SO_PROTOCOL): what a
 * client hands uscmd to name its network namespace; 0 for anything else,
 * a non-socket included. */
int nlr_is_route_socket(int fd);
/* Joins (on) or leaves (!on) multicast group grp (RTNLGRP_*, a number, not
 * a bit) on fd: works on a socket made elsewhere (in another network
 * namespace) too. 0, or -1 with errno. */
int nlr_membership(int fd, unsigned grp, int on);

/* A socket lookups run on, and what to do with the messages on it that
 * are not the answer (a subscribed socket's notifications, the answers of
 * earlier requests): other(arg, message, its length) — NULL drops them;
 * other(arg, NULL, 0) when some were lost (ENOBUFS: the socket overran).
 * fd < 0: a socket of its own per lookup, in this process's network
 * namespace (opened, used once, closed). */
struct nlr_sock {
	int fd;
	void (*other)(void *arg, const struct nlmsghdr *h, size_t len);
	void *arg;
	/* how long a lookup waits for its answer (0: 1000 ms). A socket a
	 * client handed over may still be the client's too, which can read
	 * the answers away: the kernel answers at once, so a short wait
	 * bounds what such a client costs the caller (who holds g.lock). */
	int timeout_ms;
};

/* Sends req on s->fd and feeds every answer message to cb until
 * NLMSG_DONE, an error, or (for a non-dump request) the first answer; cb
 * returns 0 to go on. Messages of another sequence number go to
 * s->other. 0, or -errno (the kernel's NLMSG_ERROR, -ETIMEDOUT after
 * timeout_ms). */
int nlr_transact(const struct nlr_sock *s, void *req, size_t len, int timeout_ms,
		 int (*cb)(const struct nlmsghdr *h, size_t len, void *arg), void *arg);

/* The three lookups rdma_resolve_addr makes, on s (NULL: a socket of
 * their own, as fd < 0): 0, -errno (-ENOENT: no such neighbour entry), or
 * 1 when no rtnetlink socket can be opened (a sandbox): the caller
 * resolves without it. */
int nlr_get_route(const struct nlr_sock *s, int family, const void *dst, const void *src,
		  struct nlr_route *r);
int nlr_get_neigh(const struct nlr_sock *s, int family, int ifindex, const void *dst,
		  struct nlr_neigh *n);
int nlr_get_link(const struct nlr_sock *s, int ifindex, struct nlr_link *l);

/* RTM_NEWADDR (an answer of the RTM_GETADDR dump) */
struct nlr_addr {
	int family;
	int ifindex;
	unsigned prefixlen;
	unsigned scope;       /* RT_SCOPE_HOST: loopback's 127.0.0.1/8, ::1 */
	uint8_t addr[16];     /* IFA_LOCAL (else IFA_ADDRESS) */
};
size_t nlr_build_getaddr_dump(void *buf, size_t cap, uint32_t seq, int family);
/* 0; -ENOMSG for another type or a family that is not IP. */
int nlr_parse_addr(const struct nlmsghdr *h, size_t len, struct nlr_addr *a);
/* Every IPv4 / IPv6 address of the namespace of s (NULL, or fd < 0: this
 * process's) to cb, which returns 0 to go on. 0, -errno, or 1 (no
 * rtnetlink). */
int nlr_get_addrs(const struct nlr_sock *s, int (*cb)(const struct nlr_addr *a, void *arg), void *arg);

#endif
