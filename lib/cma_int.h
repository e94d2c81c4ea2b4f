/*
 * cma_int.h - internals of uscm's librdmacm.so.1.
 *
 * Locking (docs/library.md has the full story): one library mutex, g.lock,
 * guards every structure below: devices and ports, each port's CM engine
 * and SA client, ids, listeners, the bind table, the path cache, every
 * event channel's queue, the QP jobs and the send queue. The progress
 * thread takes it to handle received MADs and timer expiries; API calls
 * take it for a short, never blocking section and leave through
 * cma_unlock(). Nothing blocks while holding it, and no libibverbs /
 * libibumad system call is made under it: QP transitions and multicast
 * attaches are QP jobs (cma_qpjob.c: queued under the lock, run without
 * it, then re-checked under it; a job pins its id), MADs are sent from a
 * queue without it (cma_tx.c), umad_recv runs under a port's rx_lock only
 * (taken before g.lock, never after), and port queries / opens drop it
 * while they ask (cma_port.c, cma_port_open): a function that may drop the
 * lock says so, and its callers re-check what they read before it.
 */
#ifndef USCM_LIB_CMA_INT_H
#define USCM_LIB_CMA_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>

#include "cm_proto/cmp_cma.h"
#include "cm_proto/cmp_engine.h"
#include "umad/um_sa_client.h"
#include "umad/um_transport.h"

#define CMA_EXPORT __attribute__((visibility("default")))

/* Kernel CMA defaults. */
#define CMA_DEFAULT_BACKLOG 1024
#define CMA_IBOE_PACKET_LIFETIME CMP_ROCE_PACKET_LIFETIME /* kernel 6.1's: 18 */
#define CMA_UDP_QKEY RDMA_UDP_QKEY
#define CMA_REJ_CONSUMER_DEFINED 28
#define CMA_REJ_VENDOR_OPTION_NOT_SUPPORTED 35
#define CMA_REJ_INVALID_SERVICE_ID 8
#define CMA_HDR_PDATA (CMP_REQ_PDATA - CMP_CMA_HDR_SIZE) /* 56 */

/* ---- cma_qp.c: the application's QP, CQs and SRQ, both modes ------------ */
struct cma_qp_own {
	int send_cq, recv_cq;       /* the library made them (rdma_destroy_qp frees) */
};
struct cma_qp_ops {
	/* the device's default PD (created on first use) */
	struct ibv_pd *(*default_pd)(struct rdma_cm_id *id);
	/* moves the fresh qp where the rdma_cm leaves it (INIT for connected
	 * QPs, RTS for UD) and, once it is there, makes it the id's (id->qp):
	 * until then no other thread can see it. Called without g.lock. */
	int (*init)(struct rdma_cm_id *id, struct ibv_qp *qp);
};
int cma_qp_create(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr, int use_ex,
		  struct cma_qp_own *own, const struct cma_qp_ops *ops);
void cma_qp_destroy_owned_cqs(struct rdma_cm_id *id, struct cma_qp_own *own);
/* The QP (if any) to ERROR: the connection ended or is being torn down. */
void cma_qp_to_error(struct ibv_qp *qp);
/* rdma_create_qp's ibv_qp_init_attr to the _ex form and back */
void cma_qp_attr_ex(const struct ibv_qp_init_attr *a, struct ibv_pd *pd,
		    struct ibv_qp_init_attr_ex *ax);
void cma_qp_attr_back(const struct ibv_qp_init_attr_ex *ax, struct ibv_qp_init_attr *a);
int cma_srq_create(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr,
		   const struct cma_qp_ops *ops, struct cma_qp_own *own);
/* After rdma_destroy_srq: an XRC target id's receive CQ (the SRQ's) goes. */
void cma_srq_destroyed(struct rdma_cm_id *id, struct cma_qp_own *own);

struct cma_dev;
struct cma_id;
struct cma_mc;
struct cma_mcg;
struct cma_ai_req;
struct cma_nr_req;

/* One (device, port) and, once needed, its CM agent: a umad port, an
 * engine and an SA client. */
struct cma_port {
	struct cma_dev *dev;
	uint8_t port_num;
	struct ibv_port_attr attr;
	int attr_read;              /* attr holds the device's answer (cma_port.c) */
	int roce;
	union ibv_gid *gids;
	int ngids;
	unsigned *gid_types;        /* IBV_GID_TYPE_* per entry (ibv_query_gid_table) */
	unsigned *gid_ndevs;        /* the netdev each entry is bound to (0: none / unknown) */
	uint16_t *pkeys;            /* host order */
	int npkeys;
	/* CM agent, opened lazily by cma_port_open() */
	int opening;                /* cma_port_open runs (without g.lock) */
	pthread_mutex_t rx_lock;    /* one receiver of um at a time; before g.lock */
	int ep_on;                  /* um's fd is on in the progress thread's epoll set */
	struct um_port *um;
	struct cmp_engine *eng;
	struct um_sa_client *sa;
	struct cma_mcg *mcgs;       /* IB multicast groups joined through the SA */
	unsigned path_gen;          /* bumped by cma_path_cache_flush_port */
	int open_errno;             /* last failure, for the message */
	char open_err[512];
	/* REQs the engine passed up and the library refused (uscm_get_stats):
	 * no id listens on the address, or the id's backlog is full. */
	uint64_t no_listener_rejects, backlog_rejects;
};

struct cma_dev {
	struct ibv_context *verbs;
	struct ibv_device_attr attr;
	uint64_t guid;              /* node GUID, host order */
	char name[64];
	struct ibv_pd *pd;          /* the default PD (lazily) */
	int nports;
	struct cma_port *ports;     /* [nports], port i+1 */
};

/* An event as queued and as handed out: rdma_cm_event first. */
struct cma_event {
	struct rdma_cm_event ev;
	struct cma_event *next;
	struct cma_id *owner;       /* whose count: the listener for CONNECT_REQUEST */
	struct cma_mc *mc;          /* MULTICAST_JOIN / _ERROR: the join (counted too) */
	struct cma_chan *chan;
	uint8_t pdata_cap;          /* bytes pdata holds: 0 or CMP_CM_DATA_SIZE */
	/* private data (cma_event_mem.c), 8-aligned as librdmacm's: programs
	 * read words from it in place (rdma_xclient: the SRQ number) */
	uint8_t pdata[] __attribute__((aligned(8)));
};

struct cma_chan {
	struct rdma_event_channel ch; /* first: the user's pointer */
	struct cma_event *head, *tail;
	int signalled;                /* the eventfd holds a count */
	int sync;                     /* private to one synchronous id */
	unsigned waiters;             /* threads blocked in rdma_get_cm_event */
	int dead;                     /* destroyed while they were */
	/* The thread inside rdma_get_cm_event that will take the next event
	 * itself (cma_chan_update): what it queues does not go through the
	 * eventfd (a write, then a poll and a read, for nothing). */
	int has_taker;
	pthread_t taker;
};

/* A service ID listened on, on one port: the engine listener shared by
 * every rdma_cm id listening on that port number (different addresses,
 * REUSEADDR); cma_req picks the id from the CMA header's address. */
struct cma_svc {
	struct cma_svc *next;
	struct cma_port *port;
	uint64_t sid, mask;
	struct cmp_listen *l;
	struct cma_id **ids;
	unsigned nids, cap;
};

/* One rdma_join_multicast of an id. */
enum cma_mc_state { MC_PENDING, MC_ATTACHING, MC_JOINED, MC_FAILED };

struct cma_mc {
	struct cma_mc *next;        /* id->mcs */
	struct cma_id *id;
	struct sockaddr_storage addr;
	void *context;
	uint32_t join_flags;        /* RDMA_MC_JOIN_FLAG_* */
	uint8_t join_state;         /* the SA JoinState bit it stands for */
	enum cma_mc_state state;
	uint8_t mgid[16];           /* what was joined (and attached) */
	uint16_t mlid;
	int attached;               /* ibv_attach_mcast done on id->id.qp */
	struct cma_mcg *grp;        /* IB: the port's group, while a member */
	struct cma_mc *gnext;       /* grp->members */
	unsigned events_out;        /* MULTICAST_* events handed out, not acked */
	struct cma_event *ev;       /* its JOIN / ERROR event, reserved at the join */
	unsigned jobs;              /* its QP attach in flight (cma_qpjob.c): pinned */
	int leaving;                /* rdma_leave_multicast / rdma_destroy_id took it */
	int ipfd;                   /* RoCE: the socket holding the IP group on the netdev (-1: none) */
};

/* An IB multicast group as this process's port sees it: the JoinState the
 * SA has for us (the OR of what the members need), one SA request at a
 * time, as the kernel's ib_multicast module. */
struct cma_mcg {
	struct cma_mcg *next;       /* port->mcgs */
	struct cma_port *port;
	uint8_t mgid[16];           /* zero until the SA assigned one */
	uint8_t joined;             /* JoinState bits the SA granted us */
	uint8_t asking_state;       /* bits of the Set in flight */
	int busy;                   /* a Set is in flight */
	struct cma_mc *asking;      /* the member it is for (NULL: left since) */
	struct um_sa_mcm_rec rec;   /* the SA's last answer */
	int ipoib;
	uint32_t qkey;
	uint16_t pkey;
	struct cma_mc *members;
};

enum cma_state {
	ST_IDLE,            /* created */
	ST_BOUND,           /* rdma_bind_addr */
	ST_ADDR_RESOLVED,
	ST_ROUTE_QUERY,     /* SA query in flight */
	ST_ROUTE_RESOLVED,
	ST_CONNECT,         /* REQ sent */
	ST_CONNECT_RESPONSE,/* REP in, no library QP: waiting for rdma_establish */
	ST_LISTEN,
	ST_CONNECT_REQ,     /* passive: REQ in, not answered */
	ST_ACCEPTED,        /* REP sent */
	ST_ESTABLISHED,
	ST_DISCONNECTED,    /* DREQ/DREP seen or sent */
	ST_ERROR,           /* rejected / unreachable */
};

/* A network namespace the core binds, listens and resolves in
 * (cma_netns.c). NULL everywhere means this process's own. */
struct cma_netns;

/* Who asks: the credentials and network namespace a call on an id acts
 * with, as the kernel's rdma_cm takes them from the task that opened the
 * rdma_cm file. In process: this process (cma_caller_self). uscmd: its
 * client's, taken once when the client connected (daemon/usd_cred.c) and
 * given to the core with cma_id_set_caller; ids made by a connection
 * request inherit their listener's. */
struct cma_caller {
	int self;                   /* this process: asked at the call (cma_caller_self) */
	uid_t uid;
	int priv;                   /* CAP_NET_BIND_SERVICE in the initial user namespace */
	struct cma_netns *ns;       /* NULL: ours; else referenced (cma_netns.c) */
	/* Its namespace's resolver when that is not ours: the caller's own,
	 * over the route socket it handed over (a client that still reads
	 * that socket disturbs only its own lookups); NULL: ours. */
	struct cma_resolver *res;
};

struct cma_id {
	struct rdma_cm_id id;       /* first: the user's pointer */
	struct cma_caller caller;   /* who acts on it (ports < 1024, namespace) */
	struct cma_id *next;        /* g.ids */
	struct cma_id **pprev;      /* what points at it in g.ids: O(1) unlink */
	struct cma_chan *chan;
	int sync;                   /* NULL channel: calls block */
	enum cma_state state;
	int bound;                  /* holds its port in the bind table */
	uint16_t bind_port;         /* the port it is counted under while bound */
	enum rdma_port_space bind_ps; /* ... in this port space: id.ps, except for an
				       * AF_IB address, whose SID selects it */
	unsigned nev;               /* queued events naming it (owner or ev.id); never
				     * under-counts, so 0 lets cma_purge_events skip the
				     * channel walk (O(queue) per destroy otherwise) */
	int destroying;
	struct cma_port *port;      /* device port, once bound / resolved */
	/* options */
	uint8_t tos;
	int tos_set;
	int reuseaddr;
	int afonly;
	int loop_any;               /* bound to a loopback address: the wildcard's meaning (kernel cma_any_addr) */
	uint8_t ack_timeout;
	int ack_timeout_set;
	/* route */
	struct ibv_sa_path_rec path_rec;
	struct cmp_path path;
	int path_valid;
	int sa_pending;
	uint64_t sa_tid;
	/* connection */
	struct cmp_conn *conn;
	uint32_t psn;
	uint8_t resp_res, init_depth; /* our side's view */
	int disconnect_called;
	int disc_queued;
	struct cmp_ece local_ece, remote_ece;
	int local_ece_set;
	int qp_uc;                  /* no library QP: the user's QP is UC (daemon mode) */
	/* UD */
	uint32_t qkey;              /* 0 until a QP or a SIDR exchange sets it */
	struct cma_mc *mcs;         /* multicast joins (cma_mcast.c) */
	/* listening */
	struct cma_svc **svcs;
	unsigned nsvcs;
	int backlog, backlog_used;
	/* QP jobs (cma_qpjob.c): queued or running, and whether one runs now */
	unsigned qpjs;
	int qpj_running;
	int qp_creating;            /* rdma_create_qp in progress (without g.lock) */
	/* resources the library created (destroyed by rdma_destroy_qp) */
	struct cma_qp_own own;
	/* rdma_create_ep (passive): what rdma_get_request puts on new ids */
	struct ibv_qp_init_attr *ep_qp_attr;
	/* rdma_resolve_addrinfo: the request in flight, the last answer */
	struct cma_ai_req *ai_req;
	/* rdma_resolve_addr waiting for the next hop's neighbour entry */
	struct cma_nr_req *nr_req;
	struct rdma_addrinfo *ai;
	/* events handed out (rdma_get_cm_event) and not yet acked */
	unsigned events_out;
	/* events reserved for the completions it is owed (cma_event_mem.c),
	 * linked through ->next */
	struct cma_event *ev_rsv;
};

struct cma_global {
	pthread_mutex_t lock;
	pthread_cond_t cond;        /* acks (destroy waits) */
	int inited;
	int init_errno;
	struct cma_dev *devs;
	int ndevs;
	struct cma_id *ids;
	struct cma_svc *svcs;
	/* progress thread */
	int thread_started;
	pthread_t thread;
	int wake_fd;
	/* What the progress thread sleeps on (cma_core.c): an epoll set of
	 * wake_fd, timer_fd and the ports' umad fds, so that a caller re-arms
	 * its timer (timerfd_settime) or takes its umad fds away for a while
	 * (epoll_ctl) without waking it. */
	int ep_fd;
	int timer_fd;
	cmp_time timer_armed; /* timer_fd's expiry, CMP_TIME_NEVER: disarmed */
	/* The umad fds are off in the progress thread's set since a blocking
	 * rdma_get_cm_event took them: it takes them back at this instant
	 * unless a waiter has them again (CMP_TIME_NEVER: nothing to take
	 * back, or a waiter has them now; cma_core.c "hand-over"). */
	cmp_time handover_at;
	uint64_t rng;
	struct cmp_settings settings;
	int sa_timeout_min_ms;
	uint64_t path_cache_ns;
	int max_backlog; /* rdma_listen's cap (USCM_MAX_BACKLOG) */
	int rx_external; /* uscmd receives MADs in its main loop (cma_rx_fds) */
	void (*rx_added)(int fd); /* ... and watches the fd of a port opened later */
	int fault_event_alloc; /* USCM_FAULT_EVENT_ALLOC: completions get no heap */
};
extern struct cma_global g;

/* ---- cma_qpjob.c: verbs calls on an id's QP without g.lock ------------------ */
#define CMA_QPJ_STEPS 3
enum cma_qpj_kind { QPJ_MODIFY, QPJ_ATTACH, QPJ_DETACH };
struct cma_qp_step {
	struct ibv_qp_attr attr;
	int mask;
};
struct cma_qpj {
	struct cma_qpj *next;
	struct cma_id *id;          /* pinned while the job is queued or runs */
	enum cma_qpj_kind kind;
	unsigned nsteps;            /* QPJ_MODIFY: the transitions, in order */
	struct cma_qp_step step[CMA_QPJ_STEPS];
	union ibv_gid mgid;         /* QPJ_ATTACH / QPJ_DETACH */
	uint16_t mlid;
	struct cma_mc *mc;          /* the join it is for (QPJ_ATTACH) */
	/* After the calls, g.lock held again: done(j), else j->ev is queued
	 * (an event that must not come before the QP moved). done takes
	 * ownership of j->ev and must re-check the id: anything may have
	 * happened to it meanwhile but its freeing. */
	void (*done)(struct cma_qpj *j);
	struct cma_event *ev;
	int err;                    /* 0, or the errno of the call that failed */
	int no_qp;                  /* the id had no QP any more: nothing was called */
	int finished, keep;         /* keep: cma_qpj_sync frees it */
};
struct cma_qpj *cma_qpj_new(struct cma_id *id, enum cma_qpj_kind kind);
/* Appends the transition to target with the id's attributes now (the
 * engine's connection, the id's port, P_Key, Q_Key). 0, or -1/errno. */
int cma_qpj_add_step(struct cma_qpj *j, enum ibv_qp_state target);
void cma_qpj_queue(struct cma_qpj *j);          /* runs at the next cma_unlock */
/* Queues j and runs it in this thread (g.lock dropped meanwhile); frees j
 * and returns its errno-style result. */
int cma_qpj_sync(struct cma_qpj *j);
/* Runs the queued jobs (only's, or every id's when NULL) that may start;
 * 1 when it ran any. */
int cma_qpj_run_locked(struct cma_id *only);
/* Until the id has no job queued or running (g.lock held; dropped while
 * waiting): before its QP or the id itself goes. */
void cma_qpj_wait(struct cma_id *id);
/* The id's QP (if any) to ERROR after whatever is queued for it, then
 * `after` (may be NULL) is queued. */
void cma_qp_to_err(struct cma_id *id, struct cma_event *after);

/* ---- cma_tx.c: MADs sent after g.lock is released ---------------------------- */
/* Queue a CM MAD (cma_port_flush); 0 or -1/errno (lost, as on the wire). */
int cma_tx_cm(struct cma_port *p, const struct cmp_addr *dst, const uint8_t mad[CMP_MAD_SIZE]);
/* The port's SA client sends through the queue too. */
void cma_tx_sa_attach(struct cma_port *p);
/* Re-read the umad port's info (LID, SM LID), in order with the sends. */
void cma_tx_port_info(struct cma_port *p);
/* Give the umad port (USCM_PCAP) the port's GID / P_Key tables now. */
void cma_tx_tables(struct cma_port *p);
/* Sends the queue unless another thread does (g.lock held; dropped
 * meanwhile). 1 when it sent anything. */
int cma_tx_run_locked(void);
/* Until everything queued so far has been sent, by this thread or the one
 * sending now (g.lock held; dropped meanwhile). */
void cma_tx_drain_locked(void);

/* ---- cma_mode.c: in-process or daemon mode ---------------------------------- */
/* 1 when this process talks to uscmd (lib/cmc_*.c serve every call), 0
 * when the CM runs in this process. Decided once, at the first call:
 * USCM_MODE=inproc|daemon, else daemon when uscmd's socket answers. */
int cma_remote(void);
/* 1 when the mode is decided and it is daemon mode (never probes). */
int cma_remote_known(void);
/* uscmd: this process IS the service, never a client of one. */
void cma_force_inproc(void);
/* This process as a caller: its euid, CAP_NET_BIND_SERVICE in its
 * effective set (capget), its own namespace. */
void cma_caller_self(struct cma_caller *c);
/* The id acts as c from now on (uscmd, right after rdma_create_id): c->ns
 * is referenced again, the id's old caller released. 0 or -1/EINVAL. */
int cma_id_set_caller(struct rdma_cm_id *cm_id, const struct cma_caller *c);
/* May c bind a port below 1024? (self: asked now, as the kernel asks at
 * the call) */
int cma_caller_may_bind_low(const struct cma_caller *c);
/* 1 when this process is in the initial user namespace. */
int cma_in_initial_userns(void);
/* A uid_map (/proc/self/uid_map, /proc/PID/uid_map as this process sees
 * it): its first max extents (inside uid, outside uid, count), how many,
 * -1 when it cannot be read; whether they are the initial namespace's. */
struct cma_uid_extent {
	unsigned long in, out, count;
};
#define CMA_UID_MAP_MAX 340 /* the kernel's limit of extents */
int cma_uid_map_read(const char *path, struct cma_uid_extent *e, int max);
int cma_uid_map_initial(const struct cma_uid_extent *e, int n);

/* The errno a synchronous call returns for its event's failure
 * (REJECTED: ECONNREFUSED; otherwise the status as a positive errno). */
int cma_event_errno(const struct rdma_cm_event *ev);
/* Queues an event of any type on the id's channel (uscmd: events a client
 * posts for itself, ADDRINFO_* and USER). 0 or -1/errno. */
int cma_post_event(struct rdma_cm_id *cm_id, enum rdma_cm_event_type t, int status,
		   uint64_t arg);

/* uscmd's main loop receives MADs itself (one wake-up per MAD, in the
 * thread that forwards the events): the umad fds of the open ports (from
 * then on the progress thread runs only the timers), and
 * receive-and-handle for one that is readable (g.lock taken inside). */
int cma_rx_fds(int *fds, int max);
/* A port opened after cma_rx_fds (its first open failed: the CM class was
 * taken, the port not there yet) gives its fd to added (called under
 * g.lock, in the opening thread): the caller's loop must read it too, as
 * nobody else does. */
void cma_rx_fds_later(void (*added)(int fd));
/* 1 when the channel has an event queued (no syscall). */
int cma_chan_pending(struct rdma_event_channel *channel);
void cma_rx_fd(int fd);
/* The calling thread (uscmd's main loop) looks at its channels' queues
 * itself after every batch of work: an event it queues does not make the
 * channel's fd readable (no eventfd write, and no read to drain it when
 * taken; events queued by other threads — the progress thread's timers —
 * still do). cma_chan_quiet_take: how many it queued that way since the
 * last call (0: no queue to look at). */
void cma_chan_quiet_thread(void);
unsigned cma_chan_quiet_take(void);
/* rdma_accept's parameter checks and its lowering of responder resources /
 * initiator depth, without the REP: uscmd computes the QP attributes the
 * client needs before it accepts. 0 or -1/errno. */
int cma_accept_prepare(struct rdma_cm_id *cm_id, const struct rdma_conn_param *param);

/* ---- cma_core.c ------------------------------------------------------------ */
int cma_init_locked(void);        /* 0, or -1 with errno (ENODEV: no device) */
/* What was left for after g.lock (g.lock held; dropped meanwhile): QP
 * jobs (cma_qpjob.c) and MADs to send (cma_tx.c). Before releasing the
 * lock and before any wait on g.cond, so that nothing a thread queued
 * waits for a thread that may not come. */
void cma_deferred_run(void);
/* Leaves g.lock after cma_deferred_run, once every MAD queued so far is on
 * the wire (cma_tx_drain_locked); errno is kept. Every exit from the
 * library lock in an API call goes through it. */
void cma_unlock(void);
/* The device's default PD, allocated on first use (g.lock not held). */
struct ibv_pd *cma_dev_pd(struct cma_dev *d);
cmp_time cma_now(void);
uint64_t cma_random(void);
void cma_kick(void);
/* cma_kick only when an engine timer now falls before the deadline the
 * progress thread sleeps to (g.lock held): connect/accept/disconnect need
 * no wake-up of their own otherwise. */
/* At exit the progress thread may hold g.lock for a moment: trylock for up
 * to ms milliseconds (0: once); 1 when locked. */
int cma_lock_at_exit(unsigned ms);
/* Connections and timers the ports' engines hold now (g.lock held):
 * USCM_EXIT_REPORT, uscmd --status. */
void cma_engine_totals_locked(size_t *conns, size_t *timers);
void cma_kick_timers(void);              /* wake the progress thread */
/* The progress thread runs (it is started with the first CM agent, or the
 * first request waiting for a neighbour): 0 or -1/errno. */
int cma_progress_start(void);
/* fd in the progress thread's epoll set (EPOLLIN), for tag; readable, it
 * is handed to cma_resolver_input(tag) under g.lock. 0 or -1/errno. */
int cma_progress_watch(int fd, void *tag);
void cma_progress_unwatch(int fd);
int cma_port_open(struct cma_port *p); /* the CM agent; 0 or -1/errno (message printed) */
void cma_port_flush(struct cma_port *p); /* drain engine tx + events */
struct cma_port *cma_port_of_gid(const uint8_t gid[16], int *gid_index);
int cma_port_gid_index(struct cma_port *p, const uint8_t gid[16]);
int cma_port_pkey_index(struct cma_port *p, uint16_t pkey);
/* Re-reads the port's attributes (and with tables, its GID and P_Key
 * tables): g.lock held, dropped while the device is asked. A change of
 * LID, SM LID or state flushes the port's path cache and re-reads the
 * umad port's (the SA's address). */
void cma_port_refresh(struct cma_port *p, int tables);
/* The same at the first rdma_* call, with the lock kept (cma_init_locked). */
void cma_port_init_locked(struct cma_port *p);

struct cma_chan *cma_chan_new(int sync);
void cma_chan_free(struct cma_chan *c);
void cma_chan_update(struct cma_chan *c);
void cma_event_queue(struct cma_event *e); /* to e->owner's channel */
void cma_purge_events(struct cma_id *id);
int cma_sync_wait(struct cma_id *id); /* call without the lock */

/* ---- cma_event_mem.c: where events come from --------------------------------- */
/* A zeroed event with room for pdata_cap bytes of private data (at most
 * CMP_CM_DATA_SIZE), from the heap; NULL/ENOMEM. */
struct cma_event *cma_event_alloc(size_t pdata_cap);
/* (Re)initialises e for id (owner and ev.id), keeping its capacity. */
void cma_event_init(struct cma_event *e, struct cma_id *id, enum rdma_cm_event_type t, int status);
/* An event made inside a user call (its NULL is the call's ENOMEM) or for
 * a CONNECT_REQUEST (its NULL refuses the REQ): the heap only. */
struct cma_event *cma_event_heap(struct cma_id *id, enum rdma_cm_event_type t, int status,
				 size_t pdata_cap);
/* The id's reserve holds at least n events, nfull of them with room for
 * any private data. Called by the user calls that start an operation,
 * before they change anything: 0, or -1/ENOMEM. */
int cma_event_reserve(struct cma_id *id, unsigned n, unsigned nfull);
void cma_event_rsv_free(struct cma_id *id);
/* The event of an asynchronous completion of id: from its reserve, else
 * the heap; with room for len bytes of private data (cma_event_pdata cuts
 * it short only if the heap failed and a small reserved one was left).
 * NULL only if both were empty: a completion no reservation covers. */
struct cma_event *cma_event_new_pdata(struct cma_id *id, enum rdma_cm_event_type t, int status,
				      size_t len);
struct cma_event *cma_event_new(struct cma_id *id, enum rdma_cm_event_type t, int status);
/* The same from a spare reserved by the operation itself (*spare, taken;
 * a multicast join's, an addrinfo request's), else as cma_event_new. */
struct cma_event *cma_event_use(struct cma_event **spare, struct cma_id *id,
				enum rdma_cm_event_type t, int status);
/* An event taken for a completion that did not come to pass (the id's
 * connection ended while its QP moved, cma_qpjob.c) goes back to the
 * id's reserve, for the completion that comes instead. */
void cma_event_return(struct cma_id *id, struct cma_event *e);
/* Private data into e (cut to its capacity). */
void cma_event_pdata(struct cma_event *e, const uint8_t *p, size_t len);

/* engine event translation (cma_conn.c) */
void cma_handle_cm_event(struct cma_port *p, const struct cmp_event *ev);

/* ---- cma_addr.c ------------------------------------------------------------- */
int cma_addr_len(const struct sockaddr *a);
int cma_addr_any(const struct sockaddr *a);
int cma_addr_loopback(const struct sockaddr *a);
uint16_t cma_addr_port(const struct sockaddr *a);     /* host order */
void cma_addr_set_port(struct sockaddr *a, uint16_t port);
int cma_addr_equal(const struct sockaddr *a, const struct sockaddr *b); /* no port */
int cma_hosts_lookup(const struct sockaddr *a, uint8_t gid[16]);
int cma_hosts_reverse(const uint8_t gid[16], int family, struct sockaddr_storage *out);
const char *cma_hosts_path(void);
void cma_bind_release(struct cma_id *id);
int cma_bind_locked(struct cma_id *id, const struct sockaddr *addr);
int cma_check_port_listen(struct cma_id *id);
void cma_set_bound_port(struct cma_id *id, struct cma_port *p);
void cma_path_to_rec(const struct cmp_path *p, struct ibv_sa_path_rec *r);
void cma_route_done(struct cma_id *id, int status);
uint64_t cma_service_id(const struct cma_id *id, const struct sockaddr *a);
/* Forgets the port's cached paths, and the answers of queries in flight. */
void cma_path_cache_flush_port(struct cma_port *p);
void cma_route_forget(struct cma_id *id); /* stop waiting for an SA answer */

/* ---- cma_conn.c ------------------------------------------------------------- */
struct cma_id *cma_id_alloc_locked(struct cma_chan *c, void *context, enum rdma_port_space ps,
				   enum ibv_qp_type qpt);
void cma_id_free_locked(struct cma_id *id);
/* rdma_init_qp_attr's attributes for a transition of the id's QP (g.lock held). */
int cma_id_qp_attr(struct cma_id *id, enum ibv_qp_state target, struct ibv_qp_attr *a, int *mask);
void cma_listen_release(struct cma_id *id);
int cma_ip_family(const struct cma_id *id);
/* A request (REQ or SIDR_REQ) that reached a listener: the addresses of
 * its CMA header (hdr == 0 when there is one and the listener is not
 * AF_IB) and the listening id it is for (exact address, then wildcard,
 * then AF_IB; NULL: none). */
struct cma_req_in {
	struct sockaddr_storage peer, ours;
	int hdr;
	struct cma_netns *ns;       /* the namespace it is for (cma_netns_of_req) */
	struct cma_id *l;
};
void cma_req_in(const struct cmp_event *ev, struct cma_req_in *r);
/* A new id for it on port p: addresses from the header or AF_IB ones from
 * the path, the path. */
struct cma_id *cma_req_id(struct cma_port *p, const struct cma_req_in *r,
			  const struct cmp_path *path, uint64_t sid);
/* The id takes the engine's connection; its CONNECT_REQUEST event (owner
 * and listen_id the listener, private data after the header), not queued
 * yet. NULL (and the id freed) when out of memory. */
struct cma_event *cma_req_event(struct cma_id *nid, const struct cma_req_in *r,
				const struct cmp_event *ev);

/* ---- cma_misc.c ------------------------------------------------------------- */
/* The id goes away: forget its rdma_resolve_addrinfo request and answer. */
void cma_addrinfo_release(struct cma_id *id);
/* cma_addr.c: an rdma_resolve_addr waiting for a neighbour answers no more */
void cma_addr_release(struct cma_id *id);
/* A deep copy of an rdma_addrinfo list: 0, or -1/errno. */
int cma_addrinfo_copy(const struct rdma_addrinfo *a, struct rdma_addrinfo **out);

/* ---- cma_resolver.c: waiting for neighbour entries ------------------------------ */
/* rdma_resolve_addr's timeout_ms when it is <= 0, and its cap: a request
 * waits at most this long for its neighbour (the kernel takes any value;
 * a host service must not hold a request for days). */
#define CMA_RESOLVE_DEFAULT_MS 2000
#define CMA_RESOLVE_MAX_MS 600000

struct nlr_neigh;
struct nlr_sock;
struct cma_nwait;
/* The rtnetlink socket of one network namespace and the requests waiting
 * on it (g.lock guards all of it). */
struct cma_resolver;

/* One rdma_resolve_addr waiting for its next hop's neighbour entry; the
 * caller's own request embeds it (cma_addr.c). */
struct cma_nr_req {
	struct cma_id *id;          /* the id it answers for (the caller sets it) */
	struct cma_event *ev;       /* its ADDR_* event, reserved at the call */
	/* g.lock held; q is out of the resolver already (done frees it): the
	 * entry is valid (n, status 0), or status < 0 and n NULL
	 * (-ETIMEDOUT: the deadline; -ENODEV: the resolver went away). */
	void (*done)(struct cma_nr_req *q, const struct nlr_neigh *n, int status);
	/* the resolver's */
	struct cma_resolver *res;
	struct cma_nwait *nb;       /* NULL: not waiting */
	struct cma_nr_req *nnext, **nprev;
	cmp_time deadline;
	unsigned hidx;
};
/* The resolver an id of caller c resolves with: for this process's own
 * namespace (c->ns NULL), one made at the first call and kept; NULL and
 * errno when none can be made (no rtnetlink: lookups then fall back to a
 * socket of their own, cma_netlink.h). A caller of another namespace
 * (c->ns) needs that namespace's resolver: ENOSYS until namespaces exist. */
struct cma_resolver *cma_resolver_of(const struct cma_caller *c);
/* A resolver over fd, a NETLINK_ROUTE socket of any namespace (taken:
 * cma_resolver_free closes it); NULL/ENOMEM. Its neighbours are asked for
 * with NTF_USE only (the kernel checks CAP_NET_ADMIN of whoever opened
 * the socket too): the datagram fallback would leave from this process's
 * namespace. cma_resolver_free ends every request still waiting on it
 * with -ENODEV (g.lock held for both). */
struct cma_resolver *cma_resolver_new(int fd);
void cma_resolver_free(struct cma_resolver *r);
/* The socket for the route / link / neighbour lookups of r's namespace
 * (nlr_get_*; NULL r: NULL, a socket per lookup in ours). g.lock held. */
const struct nlr_sock *cma_resolver_sock(struct cma_resolver *r);
/* q (id, ev and done set) waits on r for the entry of ip (4 or 16 bytes)
 * on interface oif, timeout_ms at most (<= 0: CMA_RESOLVE_DEFAULT_MS;
 * capped at CMA_RESOLVE_MAX_MS); seen: the entry as the caller just saw it
 * (NULL: none), so that one the kernel resolves already is not asked for
 * again. 0, or -1/errno. */
int cma_resolver_wait(struct cma_resolver *r, struct cma_nr_req *q, int family, int oif,
		      const uint8_t ip[16], const struct nlr_neigh *seen, int timeout_ms);
/* An entry the caller looked up: completes what waits for it if valid. */
void cma_resolver_neigh(struct cma_resolver *r, const struct nlr_neigh *n);
/* q stops waiting, without done (the caller frees it). */
void cma_resolver_cancel(struct cma_nr_req *q);
/* Requests waiting in every resolver (uscmd --status, tests). */
size_t cma_resolver_count(void);
/* The progress thread: the earliest deadline or check of every resolver,
 * running them, and reading a resolver's socket when epoll says it is
 * readable (tag: what cma_progress_watch was given; 0 when it is no
 * resolver, e.g. one freed meanwhile). */
cmp_time cma_resolvers_expiry(void);
void cma_resolvers_run(cmp_time now);
int cma_resolver_input(void *tag);

/* ---- cma_netns.c: network namespaces (uscmd's clients) -------------------------- */
/* Another reference (ns NULL: ours, nothing to count); its release. */
struct cma_netns *cma_netns_get(struct cma_netns *ns);
void cma_netns_put(struct cma_netns *ns);
/* Its key in the bind table and in --status: the cookie, 0 for ours. */
uint64_t cma_netns_key(const struct cma_netns *ns);
/* g.lock held from here on. */
/* Does the namespace hold IP address a (rdma_bind_addr)? Ours, and AF_IB:
 * 1 (the GID tables decide, as before). */
int cma_netns_addr_local(struct cma_netns *ns, const struct sockaddr *a);
/* The namespace a connection request to our address `ours` (its CMA
 * header's destination) through GID dgid of p is for: ours when the GID is
 * bound to one of our interfaces holding the address, else the client
 * namespace holding it, else ours. Not referenced. */
struct cma_netns *cma_netns_of_req(struct cma_port *p, const uint8_t dgid[16],
				   const struct sockaddr *ours);
/* uscmd, a client's HELLO: c's namespace (referenced) and, when it is not
 * ours, a resolver of c's own over a copy of fd, its route socket (fd
 * stays the caller's to close). 0, or -1/errno (EINVAL: not a route
 * socket). g.lock not held. */
int cma_caller_from_fd(struct cma_caller *c, int fd);
/* The client is gone, its ids destroyed: its resolver and namespace. */
void cma_caller_release(struct cma_caller *c);
/* uscmd --status: a line per namespace (g.lock not held). */
size_t cma_netns_status(char *buf, size_t size);

/* ---- cma_ud.c: UD ids and SIDR ------------------------------------------------ */
/* The Q_Key of a UD id: its own once set, else the port space's default
 * (RDMA_UDP_QKEY; the IPoIB port space's is USCM_IPOIB_QKEY, 0x0B1B). */
uint32_t cma_ud_qkey(const struct cma_id *id);
/* Address vector of a path (ib_init_ah_attr_from_path). */
void cma_ah_from_path(const struct cmp_path *path, uint8_t port_num, struct ibv_ah_attr *ah);
/* rdma_connect / rdma_accept / rdma_reject on a UD id, lock held. */
int cma_ud_connect(struct cma_id *id, const struct rdma_conn_param *param);
int cma_ud_accept(struct cma_id *id, const struct rdma_conn_param *param);
int cma_ud_reject(struct cma_id *id, const void *pdata, uint8_t len);
void cma_ud_on_sidr_req(struct cma_port *p, const struct cmp_event *ev);
void cma_ud_on_sidr_rep(struct cma_id *id, const struct cmp_event *ev);

/* ---- cma_mcast.c: multicast ------------------------------------------------------ */
int cma_addr_is_mc(const struct sockaddr *a);
/* The MGID an id joins for multicast address a on port p (IB: the IPoIB
 * mapping with the RDMA CM signature for RDMA_PS_UDP; RoCE: the address as
 * a GID). 0, or -1 with errno. */
int cma_mc_mgid(const struct cma_id *id, struct cma_port *p, const struct sockaddr *a,
		uint8_t mgid[16]);
/* RoCE: the IPv4 group a joined on interface ifindex by a socket of this
 * process's namespace, as the kernel's rdma_cm joins it on the port's
 * netdev (ip_mc_inc_group): the host's IP layer then accepts the group's
 * RoCE v2 datagrams, and IGMP reports it. The membership lasts while the
 * socket is open (closed by the kernel when the process dies). The fd, or
 * -1 with errno (ENODEV: the netdev has no IPv4 configuration, as the
 * kernel's join fails). */
int cma_mc_ip_hold(const struct sockaddr *a, int ifindex);
/* Leaves what cma_mc_ip_hold held: *fd closed and set to -1 (nothing when
 * it is -1 already). */
void cma_mc_ip_drop(int *fd);
/* Whether a RoCE join of a through a GID of type gid_type needs the IP
 * group: as the kernel, a full member's IPv4 group on a RoCE v2 GID. */
int cma_mc_ip_wanted(const struct sockaddr *a, unsigned gid_type, uint32_t join_flags);
/* Leaves every group of the id (rdma_destroy_id), lock held. */
void cma_mc_leave_all(struct cma_id *id);
/* The QP is going away: detach it from the groups it was attached to. */
void cma_mc_detach_qp(struct cma_id *id);
/* An acked MULTICAST_* event (lock held). */
void cma_mc_event_acked(struct cma_mc *mc);
/* Process exit: SA Delete for every group still joined (best effort). */
void cma_mc_fini(void);

/* helpers */
static inline struct cma_id *cma_id_of(struct rdma_cm_id *id)
{
	return (struct cma_id *)id;
}
static inline int cma_fail(int err)
{
	errno = err;
	return -1;
}

#endif
