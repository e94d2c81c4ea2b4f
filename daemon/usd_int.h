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
	struct usd_id *next, **pprev;   /* cl->ids */
};

struct usd_frame {                      /* an event waiting for room */
	struct usd_frame *next;
	uint32_t chan;
	struct usp_event ev;
};

struct usd_limits {
	unsigned max_ids;               /* per client */
	unsigned max_chans;             /* per client */
	unsigned max_queued;            /* events waiting for a full channel, per client */
};

/* usd_cred.c: the peer of a new connection (SO_PEERCRED, pinned by a
 * pidfd) and whether it may bind ports below 1024. 0 or -1/errno. */
struct usd_cred {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int priv;                       /* capable(CAP_NET_BIND_SERVICE) */
};
int usd_cred_take(int fd, struct usd_cred *c);

struct usd_client {
	struct usd_client *next, **pprev;
	int fd;                         /* command socket */
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int priv;                       /* CAP_NET_BIND_SERVICE, initial user namespace */
	struct cma_caller caller;       /* what its ids act as (lib/cma_int.h) */
	int helloed;                    /* its USP_HELLO named its namespace (caller.ns) */
	uint32_t num;
	struct rdma_event_channel *ec;   /* the library channel of all its ids */
	int *chans;                     /* channel socket fds by handle (-1: none) */
	unsigned nchans;
	struct usd_id *ids;
	unsigned nids;
	struct usd_frame *qhead, *qtail;
	unsigned nqueued;
	int dead;                       /* to be dropped at the end of the loop turn */
	/* counters (uscmd --status) */
	uint64_t requests, errors, events, connects, established, ids_total;
	uint64_t backlog_rejects;       /* connection requests refused: backlog full */
};

struct usd_global {
	struct usd_limits lim;
	struct usd_client *clients;
	unsigned nclients;
	uint32_t next_client;
	int verbose;
	uint64_t malformed;             /* requests refused by usp_check_request */
	uint64_t clients_total;
};
extern struct usd_global usd;

/* usd_ids.c: the host-wide handle table */
struct usd_id *usd_id_new(struct usd_client *cl, struct rdma_cm_id *cm, uint32_t chan);
/* Looks a handle up for cl: ENOENT (no such id), EINVAL (another
 * client's), as the kernel's ucma_get_ctx. */
struct usd_id *usd_id_get(struct usd_client *cl, uint32_t handle, int *err);
void usd_id_free(struct usd_id *id);     /* the rdma_cm_id is already destroyed */
size_t usd_id_count(void);

/* usd_client.c */
struct usd_client *usd_client_new(int fd);
/* Serves one request frame (already read, n bytes, with fd_in passed or -1):
 * writes the reply. */
void usd_client_request(struct usd_client *cl, const uint8_t *buf, size_t n, int fd_in,
			int truncated);
/* Library events of the client -> its channels. */
void usd_client_events(struct usd_client *cl);
/* Retries events that waited for room; 1 while some still wait. */
int usd_client_flush(struct usd_client *cl);
/* The client is gone: its ids are destroyed as the kernel does when the
 * rdma_cm fd closes (DREQ / REJ / leave), channels closed. */
void usd_client_free(struct usd_client *cl);
/* uscmd --status text into buf. */
size_t usd_status(char *buf, size_t size);

#endif
