/*
 * usd_int.h - uscmd internals: clients, their ids and channels.
 *
 * uscmd is the in-process library (lib/cma_*.c: engines, umad, SA client,
 * bind table, listeners, path cache, multicast groups) run once for the
 * whole host, with one librdmacm event channel per client; each client's
 * rdma_cm ids are daemon ids that carry no QP (the QPs are the client's),
 * so the library answers with QP attributes and CONNECT_RESPONSE, as the
 * kernel's rdma_cm does for librdmacm. One thread (the main loop) serves
 * every request; the library's progress thread runs the CM.
 */
#ifndef USCM_DAEMON_USD_INT_H
#define USCM_DAEMON_USD_INT_H

#include <stdint.h>
#include <sys/types.h>

#include <rdma/rdma_cma.h>

#include "lib/cma_int.h"
#include "lib/usp_proto.h"
#include "daemon/usd_fd.h"

struct usd_client;

/* A client's id: handle -> the daemon's rdma_cm_id (whose context is this). */
struct usd_id {
	uint32_t handle;
	struct rdma_cm_id *cm;
	struct usd_client *cl;
	uint32_t chan;                  /* where its events go */
	/* rdma_listen's backlog, kept here: the daemon takes every connection
	 * request off the library's queue at once, so the library's own count
	 * would never fill. A new id is counted against its listener from its
	 * CONNECT_REQUEST until it is accepted, rejected or destroyed. */
	int backlog;                    /* a listener's; 0 otherwise */
	unsigned pending;               /* a listener's unanswered requests */
	uint32_t listener;              /* a new id: whose backlog it counts in (0: none) */
	/* outstanding requests counted against its client (usd_limits.c):
	 * a resolve until ADDR_RESOLVED / ADDR_ERROR, a route query until
	 * ROUTE_RESOLVED / ROUTE_ERROR, multicast joins until left */
	uint8_t resolving, routing;
	unsigned joins;
	struct usd_id *next, **pprev;   /* cl->ids */
	struct usd_id *hnext;           /* the handle table's chain (usd_ids.c) */
};

struct usd_frame {                      /* an event waiting for room */
	struct usd_frame *next;
	uint32_t chan;
	struct usp_event ev;
};

/* What a client can make uscmd hold, counted per client, per uid and for
 * the host (usd_limits.c; docs/operators.md "Limits and options"). */
enum usd_res {
	USD_IDS,                        /* daemon ids (CREATE_ID, CONNECT_REQUEST's new id) */
	USD_CHANS,                      /* event channel sockets */
	USD_QBYTES,                     /* bytes of frames in uscmd's queue (struct usd_frame) */
	USD_RESOLVES,                   /* outstanding RESOLVE_ADDR */
	USD_ROUTES,                     /* outstanding RESOLVE_ROUTE (SA queries) */
	USD_JOINS,                      /* multicast joins held */
	USD_NRES
};

struct usd_limits {
	uint64_t client[USD_NRES];      /* per client connection */
	uint64_t uid[USD_NRES];         /* all the clients of one uid */
	uint64_t total[USD_NRES];       /* the host (0: only the per-uid ones) */
	uint64_t reserve[USD_NRES];     /* of total, only uid 0 may use */
	unsigned max_queued;            /* frames waiting for a full channel, per client */
	unsigned clients_per_uid;       /* connections of one uid; beyond: refused at accept */
	unsigned chan_buffer;           /* bytes uscmd leaves unread in one channel socket */
	unsigned status_per_sec;        /* USP_STATUS per second per uid (not root) */
};

/* One uid's clients: what they hold together, and its place in the main
 * loop's round robin (uscmd.c): each uid with a request waiting gets one
 * turn per round, however many clients it has. */
struct usd_uid {
	struct usd_uid *hnext;          /* hash chain */
	uid_t uid;
	unsigned nclients;
	uint64_t use[USD_NRES];
	struct usd_client *rhead, *rtail;   /* its clients with a request waiting */
	struct usd_uid *rnext, *rprev;      /* the round robin of uids */
	int in_ring;
	double status_tokens;           /* USP_STATUS rate limit (token bucket) */
	uint64_t status_ns;             /* when the bucket was last filled */
};

/* usd_cred.c: the peer of a new connection (SO_PEERCRED, pinned by a
 * pidfd) and whether it may bind ports below 1024. 0 or -1/errno. */
struct usd_cred {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int priv;                       /* capable(CAP_NET_BIND_SERVICE) */
};
/* The socket's peer (SO_PEERCRED), priv 0: 0, or -1 with errno. */
int usd_cred_peer(int fd, struct usd_cred *c);
/* c->priv, read of the process c->pid pinned by its pidfd (after
 * usd_cred_peer, and after usd_client_refuse: a refused connection costs
 * no /proc read). */
void usd_cred_priv(int fd, struct usd_cred *c);

struct usd_client {
	struct usd_client *next, **pprev;
	int fd;                         /* command socket */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	/* what its ids act as (lib/cma_int.h): its uid, CAP_NET_BIND_SERVICE
	 * in the initial user namespace, its network namespace */
	struct cma_caller caller;
	int helloed;                    /* its USP_HELLO named its namespace (caller.ns) */
	uint32_t num;
	struct rdma_event_channel *ec;   /* the library channel of all its ids */
	int *chans;                     /* channel socket fds by handle (-1: none) */
	/* per channel: its unread bytes when last asked (SIOCOUTQ) and the
	 * frames sent since, so that the kernel is asked only when they
	 * could have reached --chan-buffer (usd_client.c, chan_room) */
	struct usd_room {
		uint32_t q, sent;
	} *room;
	unsigned nchans;
	struct usd_id *ids;
	unsigned nids;
	struct usd_frame *qhead, *qtail;
	unsigned nqueued;
	/* a migration with USP_MIGRATE_HOLD: no event is written into any of
	 * its channels until its USP_REQUEUE end; the frames it gives back
	 * (rq*) then go first, ahead of qhead */
	int hold;
	struct usd_frame *rqhead, *rqtail;
	uint64_t use[USD_NRES];         /* what it holds (usd_limits.c) */
	struct usd_uid *u;              /* its uid's accounting */
	struct usd_client *rnext, *rprev;   /* u's clients with a request waiting */
	int ready;                      /* on that list */
	int dead;                       /* to be dropped at the end of the loop turn */
	/* counters (uscmd --status) */
	uint64_t requests, errors, events, connects, established, ids_total;
	uint64_t backlog_rejects;       /* connection requests refused: backlog full */
	uint64_t limit_refusals;        /* requests refused by a limit (usd_charge) */
};

struct usd_global {
	struct usd_limits lim;
	struct usd_client *clients;
	unsigned nclients;
	uint32_t next_client;
	int verbose;
	uint64_t malformed;             /* requests refused by usp_check_request */
	unsigned frame_truesize;        /* what one event frame costs a channel socket (0: not measured) */
	uint64_t clients_total;
	uint64_t use[USD_NRES];         /* the host's */
	uint64_t clients_refused;       /* connections refused: --max-clients-per-uid */
	struct usd_uid *ring;           /* uids with a client whose request waits */
	unsigned nring;
};
extern struct usd_global usd;

/* usd_limits.c */
struct usd_uid *usd_uid_get(uid_t uid, int create);
void usd_uid_put(struct usd_uid *u);    /* frees it when no client is left */
/* Whether cl may hold n more of r: 0, or the errno of the limit it is at
 * (docs/operators.md): per client / per uid EMFILE (ids, channels),
 * EAGAIN (outstanding resolves, route queries), ENOBUFS (multicast
 * joins), ENOMEM (queued bytes); the host's budget ENOMEM. uid 0 may use
 * the reserve of the host's budget. */
int usd_admit(const struct usd_client *cl, enum usd_res r, uint64_t n);
int usd_charge(struct usd_client *cl, enum usd_res r, uint64_t n);   /* usd_admit, then counted */
void usd_uncharge(struct usd_client *cl, enum usd_res r, uint64_t n);
const char *usd_res_name(enum usd_res r);

/* usd_ids.c: the host-wide handle table */
struct usd_id *usd_id_new(struct usd_client *cl, struct rdma_cm_id *cm, uint32_t chan);
/* Looks a handle up for cl: ENOENT (no such id), EINVAL (another
 * client's), as the kernel's ucma_get_ctx. */
struct usd_id *usd_id_get(struct usd_client *cl, uint32_t handle, int *err);
void usd_id_free(struct usd_id *id);     /* the rdma_cm_id is already destroyed */
size_t usd_id_count(void);

/* usd_client.c */
struct usd_client *usd_client_new(int fd, const struct usd_cred *cr);
/* A connection over its uid's --max-clients-per-uid: answered with a
 * HELLO reply carrying EAGAIN and closed (the library reports it). 1 when
 * refused. */
int usd_client_refuse(int fd, const struct usd_cred *cr);
/* Serves one request frame (already read, n bytes, with fd_in passed or -1):
 * writes the reply. */
void usd_client_request(struct usd_client *cl, const uint8_t *buf, size_t n, int fd_in,
			int truncated);
/* Library events of the client -> its channels. */
void usd_client_events(struct usd_client *cl);
/* Retries events that waited for room, USD_FLUSH_TURN at most: 0 when none
 * waits any more, 1 while the channel at the head is full, 2 when the turn
 * ended with room left (call again at once). */
#define USD_FLUSH_TURN 256
int usd_client_flush(struct usd_client *cl);
/* The client is gone: its ids are destroyed as the kernel does when the
 * rdma_cm fd closes (DREQ / REJ / leave), channels closed. */
void usd_client_free(struct usd_client *cl);
/* uscmd --status text into buf, as uid viewer may see it (another uid's
 * clients only for root, counted otherwise). */
size_t usd_status(char *buf, size_t size, uid_t viewer);

#endif
