/*
 * sv.h - internals of the simulated fabric's drop-in libibverbs.so.1 ("sv").
 *
 * One device per process: the node named by $USCM_SIM_NODE on the fabric in
 * $USCM_SIM_DIR. A context is a struct verbs_context (so the inline wrappers
 * of verbs.h that go through verbs_get_ctx_op() find our functions or see
 * them missing) followed by our state. Every QP owns a UDP socket bound to
 * simf_qp_port(qpn) on the node's transport address (a destroyed QP's
 * socket serves a later QP of the context: ctx->idle); a progress thread per
 * context receives on all of them (epoll) and runs the timers. One mutex per
 * context (ctx->lock) guards every QP, CQ, SRQ and MR of the context: the
 * caller's post/poll and the progress thread serialize on it.
 */
#ifndef USCM_SIM_SV_H
#define USCM_SIM_SV_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdint.h>

#include "sim/simf.h"

#define SV_EXPORT __attribute__((visibility("default")))

/* Device limits (what query_device reports and create/modify enforce): those
 * of a Mellanox ConnectX-6 (MT4123) as `ibv_devinfo -v` reports them on mlx5,
 * except where the sim itself is the limit (QPs, P_Keys, multicast: see the
 * comments and docs/sim.md). Rings (CQ, SQ, RQ, SRQ) are calloc'ed at their
 * size: glibc maps a large one fresh and leaves it untouched, so a 262144-entry
 * CQ costs address space, not memory, until completions fill it. */
#define SV_MAX_QP 32768 /* CX-6: 262144; a QP is a UDP socket: fds, and QPNs below SIMF_MAX_QPN, are the real limit */
#define SV_MAX_QP_WR 32768
#define SV_MAX_SGE 30                 /* send and receive SGEs, and max_sge_rd */
#define SV_MAX_SRQ_SGE 31
#define SV_MAX_CQ 16777216
#define SV_MAX_CQE 4194303
#define SV_MAX_MR 16777215 /* CX-6: 16777216; keys are slot << 8 | tag with 24-bit slots, slot 0 unused */
#define SV_MAX_PD 16777216
#define SV_MAX_RD_ATOM 16
#define SV_MAX_SRQ 8388608
#define SV_MAX_SRQ_WR 32767
#define SV_MAX_AH 2147483647
#define SV_LOCAL_CA_ACK_DELAY 15 /* CX-6: 16; see docs/sim.md */
#define SV_MAX_INLINE 512
#define SV_MIN_INLINE 64 /* inline capacity every send queue has */
#define SV_MAX_MCAST_GRP SIMF_MAX_MCG
#define SV_MAX_MCAST_QP_ATTACH SIMF_MCG_QPS
#define SV_GID_TBL_LEN 16
#define SV_PKT_MAX (4096 + 128)      /* one datagram: MTU + headers */
#define SV_RC_WINDOW 128              /* packets in flight per RC QP */
#define SV_ACK_EVERY 16               /* AckReq on every Nth packet of a message */
#define SV_IDLE_MAX 16                /* sockets of destroyed QPs kept for the next QPs */

/* BTH opcodes (IBTA 9.2; transport in bits 7:5: RC 000, UC 001, UD 011). */
enum {
	OP_SEND_FIRST = 0x00, OP_SEND_MIDDLE = 0x01, OP_SEND_LAST = 0x02,
	OP_SEND_LAST_IMM = 0x03, OP_SEND_ONLY = 0x04, OP_SEND_ONLY_IMM = 0x05,
	OP_WRITE_FIRST = 0x06, OP_WRITE_MIDDLE = 0x07, OP_WRITE_LAST = 0x08,
	OP_WRITE_LAST_IMM = 0x09, OP_WRITE_ONLY = 0x0A, OP_WRITE_ONLY_IMM = 0x0B,
	OP_READ_REQ = 0x0C, OP_READ_RESP_FIRST = 0x0D, OP_READ_RESP_MIDDLE = 0x0E,
	OP_READ_RESP_LAST = 0x0F, OP_READ_RESP_ONLY = 0x10, OP_ACK = 0x11,
	OP_ATOMIC_ACK = 0x12, OP_CMP_SWAP = 0x13, OP_FETCH_ADD = 0x14,
	OP_UC = 0x20, OP_UD = 0x60,
	OP_XRC = 0xA0, /* XRC: transport 101; requests carry an XRCETH after the BTH */
};
#define XRCETH_LEN 4  /* 8 reserved bits, the 24-bit XRC SRQ number */
#define RETH_LEN 16
#define AETH_LEN 4
#define IMM_LEN 4
#define ATOMIC_ETH_LEN 28
#define ATOMIC_ACK_LEN 8

/* AETH syndromes (IBTA 9.7.5.1). */
#define AETH_ACK 0x1F                 /* ACK, credit count "invalid" (no flow control) */
#define AETH_RNR(t) (0x20 | ((t) & 0x1F))
#define AETH_NAK_SEQ 0x60
#define AETH_NAK_INV 0x61
#define AETH_NAK_ACC 0x62
#define AETH_NAK_OP 0x63

struct sv_device {
	struct ibv_device dev;        /* must be first */
	/* Where rdma-core's struct verbs_device has its provider's ops: NULL, so
	 * a provider's dv functions (mlx5dv_is_supported, ...) that a program
	 * linking the provider calls see a device that is not theirs. */
	const void *verbs_ops;
	uint32_t magic;               /* SV_DEVICE_MAGIC */
	int node;
	uint64_t guid;                /* host order */
};

struct sv_async {
	struct ibv_async_event ev;
	struct sv_async *next;
};

struct sv_ctx {
	struct verbs_context vctx;    /* must be first; vctx.context is the ibv_context */
	struct sv_device *dev;
	struct simf *f;
	int node;
	int link;                     /* SIMF_LINK_IB / SIMF_LINK_ROCE */
	pthread_mutex_t lock;
	int epfd, wakefd;
	pthread_t thr;
	int thr_started, stop;
	uint64_t sleep_until;         /* when the progress thread wakes (ns) */
	struct sv_qp *qps;            /* every QP of the context */
	struct sv_mr **mrs;           /* by key >> 8 */
	unsigned nmrs;
	unsigned key_tag;
	int async_wfd;                /* write end; context.async_fd is the read end */
	struct sv_async *aq_head, *aq_tail;
	uint32_t nqp, ncq, npd, nmr, nsrq, nah, nxrcd;
	struct sv_srq *xsrqs;         /* the context's XRC SRQs, by srqn lookup */
	uint32_t next_srqn;           /* SRQ numbers: 24 bits, never 0 */
	int port_state;               /* last seen, for port events */
	uint32_t bad_pkey, qkey_viol; /* port counters */
	uint16_t port_lid;
	uint16_t port_pkeys[SIMF_PKEYS]; /* last seen, for IBV_EVENT_PKEY_CHANGE */
	/* Sockets of destroyed QPs, still bound and in epfd, each handed to
	 * the next QP created with the QPN after its last one on the same
	 * port (qpn + SIMF_MAX_QPN): a QP is ~8 us and 5 system calls
	 * cheaper to create, 2 to destroy. A datagram for an
	 * older QPN that reaches it is dropped (BTH destination QPN) and
	 * counted in stale_drops. */
	struct { int fd; uint32_t qpn; } idle[SV_IDLE_MAX];
	unsigned nidle;
	uint64_t stale_drops;
};

struct sv_pd {
	struct ibv_pd pd;
	int refs;                     /* MRs, QPs, AHs, SRQs using it */
};

struct sv_mr {
	struct ibv_mr mr;
	struct sv_pd *pd;
	unsigned access;
	uint64_t iova;
	unsigned idx;
};

struct sv_chan {
	struct ibv_comp_channel ch;
	int wfd;
	struct sv_cq **q;             /* queued events, FIFO */
	unsigned qhead, qlen, qcap;
};

struct sv_cq {
	struct ibv_cq cq;
	struct ibv_wc *ring;
	int cap;                      /* entries */
	int head, count;
	int armed;                    /* 0, 1 any, 2 solicited only */
	int overflowed;
	uint32_t events_reported;
	int refs;                     /* QPs using it */
};

/* An XRC domain: XRC SRQs and XRC target QPs of one domain serve each
 * other only. Opened with fd -1 (private to the context). */
struct sv_xrcd {
	struct ibv_xrcd xrcd;         /* must be first */
	int refs;                     /* XRC SRQs and target QPs in it */
};

struct sv_srq {
	struct ibv_srq srq;
	struct sv_rwqe *ring;
	unsigned cap, head, count, max_sge;
	unsigned limit;
	struct sv_pd *pd;
	int refs;                     /* QPs using it */
	uint32_t srqn;                /* ibv_get_srq_num */
	/* XRC (IBV_SRQT_XRC): the domain, and the CQ its receives complete on */
	struct sv_xrcd *xrcd;
	struct sv_cq *cq;
	struct sv_srq *xnext;         /* ctx->xsrqs */
};

struct sv_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
};

struct sv_rwqe {
	uint64_t wr_id;
	int nsge;
	struct ibv_sge sge[SV_MAX_SRQ_SGE];
};

struct sv_swqe {
	uint64_t wr_id;
	int opcode;                   /* enum ibv_wr_opcode */
	unsigned flags;               /* IBV_SEND_* */
	uint32_t imm;                 /* network order */
	int nsge;
	struct ibv_sge sge[SV_MAX_SGE];
	uint8_t *inl;                 /* inline copy (IBV_SEND_INLINE) */
	uint32_t len;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t compare_add, swap;
	uint32_t remote_srqn;         /* XRC initiator: the XRCETH's SRQ number */
	/* UD */
	struct ibv_ah_attr ah;
	uint32_t remote_qpn, remote_qkey;
	/* RC/UC sequencing */
	uint32_t first_psn, npkts;
	int status;                   /* completion status to report (IBV_WC_SUCCESS) */
	uint64_t atomic_result;
};

/* Responder state of an RC/UC QP. */
struct sv_resp {
	uint32_t epsn;                /* expected PSN */
	uint32_t msn;
	int nak_sent;                 /* a NAK/RNR NAK is outstanding: drop out-of-order */
	int in_msg;                   /* in the middle of a multi-packet SEND */
	struct sv_rwqe cur;           /* the receive WQE being filled */
	int have_cur;
	uint32_t cur_off;
	int in_write;                 /* in the middle of a multi-packet WRITE */
	uint64_t w_va;
	uint32_t w_rkey, w_left, w_total;
	uint8_t *w_ptr;
	int uc_drop;                  /* UC: drop until the next FIRST/ONLY */
	int comm_est;                 /* COMM_EST delivered */
	struct sv_srq *cur_srq;       /* XRC target: the SRQ cur was taken from */
	/* replay cache for atomics */
	uint32_t at_psn[4];
	uint64_t at_val[4];
	int at_valid[4];
	unsigned at_next;
};

struct sv_qp {
	struct ibv_qp qp;
	struct sv_ctx *ctx;
	struct sv_qp *next;
	struct sv_qp **pprev; /* what points at it in ctx->qps: O(1) destroy */
	uint32_t events_reported; /* async events handed out (ctx->lock) */
	int fd;
	uint32_t pidx;                /* qp_num % SIMF_MAX_QPN: the socket's port, its epoll key */
	struct ibv_qp_cap cap;
	int sq_sig_all;
	/* attributes */
	enum ibv_qp_state state;
	uint16_t pkey_index;
	uint8_t port;
	uint32_t qkey;
	unsigned access;
	enum ibv_mtu mtu;
	uint32_t dest_qpn;
	uint32_t rq_psn, sq_psn;
	struct ibv_ah_attr av;
	uint8_t max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, timeout, retry_cnt, rnr_retry;
	uint8_t en_sqd_async;
	/* send queue: ring of cap.max_send_wr */
	struct sv_swqe *sq;
	unsigned sq_cap, sq_head, sq_count;
	unsigned tx_idx;              /* ring offset from sq_head of the WQE being sent */
	uint32_t tx_pkt;              /* packet within that WQE */
	uint32_t next_psn;            /* PSN for the next new WQE */
	uint32_t una;                 /* oldest unacknowledged PSN */
	uint32_t snd_max;             /* highest PSN transmitted + 1 */
	int retry_left, rnr_left;
	uint64_t timer;               /* retransmit deadline (ns), 0: none */
	uint64_t rnr_until;           /* RNR wait: no sending before (ns) */
	/* receive queue */
	struct sv_rwqe *rq;
	unsigned rq_cap, rq_head, rq_count;
	struct sv_resp r;
	struct { uint8_t gid[16]; uint16_t lid; } mcg[16]; /* attached groups */
	int nmcg;
	uint64_t drops;               /* datagrams dropped: no receive (UD) */
	/* XRC target (IBV_QPT_XRC_RECV): no PD, CQs nor queues of its own; a
	 * request names an XRC SRQ of xrcd, whose PD and CQ then serve it */
	struct sv_xrcd *xrcd;
	struct sv_srq *rx_srq;        /* the SRQ of the request being handled */
	uint8_t refs_taken;           /* bit 0 pd, 1 send_cq, 2 recv_cq */
};

static inline int sv_is_xrc(const struct sv_qp *q)
{
	return q->qp.qp_type == IBV_QPT_XRC_SEND || q->qp.qp_type == IBV_QPT_XRC_RECV;
}
/* Reliable (acknowledged) transports: RC and both XRC sides. */
static inline int sv_is_reliable(const struct sv_qp *q)
{
	return q->qp.qp_type == IBV_QPT_RC || sv_is_xrc(q);
}

#define SV_DEVICE_MAGIC 0x75736d76u /* "usmv" */

/* ---- sv_device.c ---- */
int sv_is_device(const struct ibv_device *device); /* one of ours */
struct simf *sv_fabric_get(void);
void sv_fabric_put(void);
int sv_port_active_mtu(const struct sv_ctx *c);
uint16_t sv_pkey(const struct sv_ctx *c, unsigned idx);
void sv_node_gid(const struct sv_ctx *c, int node, uint8_t gid[16]);
uint16_t sv_node_lid(const struct sv_ctx *c, int node);

/* ---- sv_private.c ---- */
unsigned sv_registered_drivers(void); /* providers that called verbs_register_driver_34 */

/* ---- sv_res.c ---- */
static inline struct sv_ctx *sv_ctx(struct ibv_context *c)
{
	return (struct sv_ctx *)((char *)c - __builtin_offsetof(struct verbs_context, context));
}
struct sv_mr *sv_mr_by_key(struct sv_ctx *c, uint32_t key);
/* Adds a completion to cq (lock held); raises events, overflow. */
void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited);
void sv_async_push(struct sv_ctx *c, const struct ibv_async_event *ev);
uint32_t sv_async_forget_qp(struct sv_ctx *c, struct sv_qp *q); /* ctx->lock held */
int sv_srq_pop(struct sv_srq *s, struct sv_rwqe *out);
struct sv_srq *sv_xsrq_by_num(struct sv_ctx *c, uint32_t srqn);
struct ibv_xrcd *sv_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *a);
int sv_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_srq *sv_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *a);
int sv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);

/* ---- sv_qp.c ---- */
void sv_qp_to_error(struct sv_qp *q);     /* lock held: state ERR and flush */
void sv_qp_flush(struct sv_qp *q);        /* lock held */
struct sv_qp *sv_qp_by_num(struct sv_ctx *c, uint32_t qpn);
struct sv_qp *sv_qp_by_pidx(struct sv_ctx *c, uint32_t pidx);
struct ibv_qp *sv_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *a);

/* ---- sv_data.c ---- */
int sv_progress_start(struct sv_ctx *c);
void sv_progress_stop(struct sv_ctx *c);
void sv_wake(struct sv_ctx *c, uint64_t when);
uint64_t sv_now(void);
int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int sv_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
int sv_req_notify_cq(struct ibv_cq *cq, int solicited_only);
void sv_qp_complete_send(struct sv_qp *q, struct sv_swqe *w, int status);
void sv_rc_pump(struct sv_qp *q);

static inline uint32_t psn_add(uint32_t a, uint32_t b) { return (a + b) & 0xFFFFFF; }
/* a - b as a signed 24-bit distance */
static inline int32_t psn_diff(uint32_t a, uint32_t b)
{
	int32_t d = (int32_t)((a - b) & 0xFFFFFF);
	return d >= 0x800000 ? d - 0x1000000 : d;
}

#endif
