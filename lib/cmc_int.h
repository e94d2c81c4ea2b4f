/*
 * cmc_int.h - internals of daemon mode (the library as uscmd's client).
 *
 * What is per process stays here, as with the kernel's ucma: ids (a mirror
 * of the daemon's: handle, route, device), event channels, the
 * application's QPs / CQs / SRQs and their state transitions (the daemon
 * returns QP attributes, this side calls ibv_modify_qp). Everything
 * host-wide — ports, the CM engines, the bind table, listeners, the path
 * cache, multicast membership — is the daemon's.
 *
 * Locking: cmc.lock guards the id table, channels' local state and ids'
 * counters; cmc.call_lock serialises requests on the command socket (one in
 * flight per process, as a write to the rdma_cm fd). Never both the other
 * way round: call_lock may be taken with lock free only. cmc.qp_lock holds
 * an id's QP pointer still while the thread reading events moves that QP
 * (CONNECT_RESPONSE, REJECTED, DISCONNECTED, a multicast attach) against
 * rdma_destroy_qp in another thread (Debian's cmtime destroys each QP
 * right after rdma_disconnect, while its event thread reads the
 * DISCONNECTED); taken with neither of the others held (call_lock may be
 * taken under it: a CONNECT_RESPONSE without the QP attributes asks for
 * them).
 */
#ifndef USCM_LIB_CMC_INT_H
#define USCM_LIB_CMC_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include <rdma/rdma_cma.h>

#include "lib/cma_int.h"
#include "lib/usp_proto.h"

struct cmc_id;

struct cmc_chan {
	struct rdma_event_channel ch;   /* first: the user's pointer; our socket end */
	uint32_t handle;
	unsigned gen;                   /* the daemon connection it belongs to */
	int sync;                       /* private to one synchronous id */
	int eof;                        /* the daemon went away */
	unsigned waiters;               /* threads in rdma_get_cm_event on it */
	int dead;                       /* destroyed while they were */
};

/* One rdma_join_multicast, as the library sees it: the QP attach is ours. */
struct cmc_mc {
	struct cmc_mc *next;
	struct sockaddr_storage addr;
	void *context;
	uint32_t flags;
	int attached;
	union ibv_gid mgid;
	uint16_t mlid;
	int ipfd;                       /* RoCE: the IP group held in our namespace (-1: none) */
};

struct cmc_id {
	struct rdma_cm_id id;           /* first: the user's pointer */
	uint32_t handle;
	unsigned gen;
	struct cmc_chan *chan;
	int sync;
	struct cmc_id *hnext;           /* handle hash chain */
	struct ibv_sa_path_rec path;    /* id.route.path_rec points here */
	unsigned events_out;            /* handed out, not acked */
	int removed;                    /* DEVICE_REMOVAL delivered (daemon gone) */
	struct cma_qp_own own;          /* CQs the library made (lib/cma_qp.c) */
	struct cmc_mc *mcs;
	struct ibv_qp_init_attr *ep_qp_attr;    /* rdma_create_ep, passive */
	/* rdma_resolve_addrinfo */
	struct rdma_addrinfo *ai;
	int ai_busy;
	/* a new id: its QP's INIT/RTR/RTS attributes, for an accept that
	 * lowers nothing (from the CONNECT_REQUEST event) */
	struct usp_qp_attrs req_qp;
};

struct cmc_event {
	struct rdma_cm_event ev;        /* first */
	struct cmc_id *owner;           /* counted in its events_out */
	uint8_t pdata[USP_PDATA_MAX] __attribute__((aligned(8))); /* as cma_event's */
};

struct cmc_global {
	pthread_mutex_t lock;
	pthread_cond_t cond;            /* acks */
	pthread_mutex_t call_lock;
	pthread_mutex_t qp_lock;
	int fd;                         /* command socket, -1 when none */
	pid_t pid;                      /* whose connection it is (fork) */
	unsigned gen;                   /* bumped at every new connection */
	uint32_t seq;
	uint32_t client;                /* the daemon's number for us */
	unsigned refused;               /* connections uscmd refused (EAGAIN): said once */
	struct cmc_id **tab;            /* handle hash */
	unsigned tabsz, nids;
};
extern struct cmc_global cmc;

/* cmc_conn.c: the command socket */
const char *cmc_socket_path(void);
/* Sends a request and waits for its reply. body: blen bytes after the
 * header; rep (may be NULL): up to replen bytes of the reply body;
 * pass_fd >= 0 travels with it (SCM_RIGHTS). 0, or -1 with errno (the
 * daemon's error; ENODEV when there is no daemon). *got (may be NULL): the
 * reply body's length. */
int cmc_call(uint16_t op, uint32_t id, const void *body, size_t blen, void *rep, size_t replen,
	     int pass_fd, size_t *got);
/* 0 when the id still belongs to the live connection, -1/ENODEV. */
int cmc_id_live(const struct cmc_id *id);
/* A membership that is gone: its IP group left, then freed. */
void cmc_mc_free(struct cmc_mc *m);
int cmc_gen_live(unsigned gen);

/* cmc_id.c */
struct cmc_id *cmc_id_find(uint32_t handle);    /* lock held */
void cmc_apply_snap(struct cmc_id *id, const struct usp_snap *s);
struct ibv_context *cmc_verbs_of(const struct usp_snap *s);
struct cma_dev *cmc_dev_of(const struct usp_snap *s);
struct cmc_chan *cmc_chan_new(int sync);
/* rdma_create_id with the QP type given (rdma_create_ep's addrinfo may ask
 * for UD in the IB port space) */
int cmc_create_id_qpt(struct rdma_event_channel *channel, struct rdma_cm_id **out,
		      void *context, enum rdma_port_space ps, enum ibv_qp_type qpt);
int cmc_sync_wait(struct cmc_id *id);
static inline struct cmc_id *cmc_id_of(struct rdma_cm_id *id)
{
	return (struct cmc_id *)id;
}

/* cmc_qp.c */
int cmc_modify(struct cmc_id *id, enum ibv_qp_state target);
/* INIT, RTR, RTS with attributes the daemon sent (USP_QP_ATTRS, or a
 * CONNECT_RESPONSE event's). */
int cmc_modify_with(struct cmc_id *id, const struct usp_qp_attrs *qa);
void cmc_qp_to_err(struct cmc_id *id);

#endif
