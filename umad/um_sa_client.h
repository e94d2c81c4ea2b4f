/*
 * um_sa_client.h - an asynchronous SA client over a um_port: PathRecord
 * SubnAdmGet queries (what rdma_resolve_route sends on InfiniBand) and
 * MCMemberRecord SubnAdmSet / SubnAdmDelete (multicast join / leave, what
 * rdma_join_multicast / rdma_leave_multicast send), matched to their
 * answers by transaction ID, with the retries libibumad runs for us
 * (umad_send's timeout_ms / retries) and a callback per query.
 *
 * The caller feeds every record of the port's SA agent to
 * um_sa_client_handle(); the callback runs from there (so on the thread that
 * reads the port). Not thread-safe by itself: one thread at a time.
 *
 * TIDs: the MAD layer rewrites the upper 32 bits of a request's TID (agent
 * number), so queries are matched on the low 32 bits, which this client
 * makes unique.
 */
#ifndef USCM_UM_SA_CLIENT_H
#define USCM_UM_SA_CLIENT_H

#include <stdint.h>

#include "umad/um_sa.h"
#include "umad/um_transport.h"

struct um_sa_client;

/* status: 0 with the first record in *pr, or a negative errno:
 *   -ETIMEDOUT     no answer after every retry;
 *   -EINVAL        the SA answered with a status (no path: NO_RECORDS, an
 *                  unknown GID: INVALID_GID, any other), as the kernel's
 *                  ib_sa reports every SA status;
 *   -EHOSTUNREACH  a GetResp with status 0 and no record;
 *   -EPROTO        a malformed answer;
 *   -ECANCELED     the client is being freed. */
typedef void (*um_sa_path_cb)(void *ctx, int status, const struct um_sa_path_rec *pr);

struct um_sa_path_req {
	uint8_t sgid[16], dgid[16];
	uint16_t pkey;
	uint64_t service_id;
	int qos_class;      /* >= 0: QoSClass (AF_INET ids: the ToS); -1: none */
	int tclass;         /* >= 0: TClass instead (AF_INET6 / AF_IB); -1: none */
	int timeout_ms;     /* per try; 0: 1000 */
	int retries;        /* 0: 3 */
};

struct um_sa_client *um_sa_client_new(struct um_port *port, uint32_t tid_seed);
/* Calls every pending callback with -ECANCELED, then frees. */
void um_sa_client_free(struct um_sa_client *c);

/* Sends the query. Returns 0 and the query's TID (its low 32 bits identify
 * it), or -1 with errno (ENOTCONN: the port has no SA, e.g. RoCE). */
int um_sa_path_get(struct um_sa_client *c, const struct um_sa_path_req *q, um_sa_path_cb cb,
		   void *ctx, uint64_t *tid);
/* MCMemberRecord answers. status: 0 with the SA's record in *rec (the
 * group: MGID, MLID, Q_Key, ... and our JoinState), or a negative errno as
 * the kernel's ib_sa reports them to the rdma_cm:
 *   -ETIMEDOUT     no answer after every retry;
 *   -EINVAL        the SA answered with a non-zero status (e.g. 0x0200:
 *                  the request does not match the group), or a malformed
 *                  answer;
 *   -ECANCELED     the client is being freed. */
typedef void (*um_sa_mcm_cb)(void *ctx, int status, const struct um_sa_mcm_rec *rec);

struct um_sa_mcm_req {
	struct um_sa_mcm_rec rec; /* MGID (zero: the SA assigns one), PortGID, Q_Key,
	                           * P_Key, SL, FlowLabel, TClass, JoinState, and for
	                           * ipoib_ps MTU / Rate (+ selectors) and HopLimit */
	int ipoib_ps;             /* the IPoIB port space's larger component mask */
	int timeout_ms;           /* per try; 0: 1000 */
	int retries;              /* 0: 3 */
};

/* Join: SubnAdmSet of req->rec with UM_SA_MCM_JOIN_COMP (um_sa_mcm_join). */
int um_sa_mcm_set(struct um_sa_client *c, const struct um_sa_mcm_req *req, um_sa_mcm_cb cb,
		  void *ctx, uint64_t *tid);
/* Leave: SubnAdmDelete of req->rec's MGID / PortGID with JoinState
 * leave_state (um_sa_mcm_leave). cb may be NULL (nobody waits). */
int um_sa_mcm_delete(struct um_sa_client *c, const struct um_sa_mcm_req *req,
		     uint8_t leave_state, um_sa_mcm_cb cb, void *ctx, uint64_t *tid);
/* Who sends the encoded requests: by default the client itself
 * (um_port_send_sa, at once). A caller that must not make system calls
 * where it queries (uscm's library: under its lock) sets a sender that
 * takes the MAD and sends it later; 0 when taken, -1/errno when refused (the
 * query then fails at once). A later send failure is reported with
 * um_sa_fail. tid_lo: the query's (its low 32 bits). */
typedef int (*um_sa_send_fn)(void *ctx, uint32_t tid_lo, const uint8_t mad[CMP_MAD_SIZE],
			     int timeout_ms, int retries);
void um_sa_client_set_sender(struct um_sa_client *c, um_sa_send_fn fn, void *ctx);
/* Ends a pending query now: its callback runs with status (a negative
 * errno, e.g. the deferred send's failure). 1 if it was pending, else 0. */
int um_sa_fail(struct um_sa_client *c, uint64_t tid, int status);
/* A record from the port's SA agent: answers and timeouts. Returns 1 when it
 * belonged to a pending query (whose callback has run), 0 otherwise. */
int um_sa_client_handle(struct um_sa_client *c, const struct um_rx *rx);
/* Queries in flight. */
unsigned um_sa_client_pending(const struct um_sa_client *c);

#endif
