/*
 * sv_qp.c - queue pairs: create, the modify state machine with the IBTA
 * required/optional attribute masks per transition and QP type (what the
 * kernel's modify-QP check and the hardware enforce: a transition that is
 * not in the table, a missing required attribute or an attribute that is
 * not allowed fails with EINVAL), query, destroy, flush, multicast.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "sim/verbs/sv.h"
#include "sim/verbs/sv_compat.h"

struct sv_qp *sv_qp_by_num(struct sv_ctx *c, uint32_t qpn)
{
	struct sv_qp *q;

	for (q = c->qps; q; q = q->next)
		if (q->qp.qp_num == qpn)
			return q;
	return NULL;
}

/* The QP whose socket is the one on port index pidx (the epoll key). */
struct sv_qp *sv_qp_by_pidx(struct sv_ctx *c, uint32_t pidx)
{
	struct sv_qp *q;

	for (q = c->qps; q; q = q->next)
		if (q->pidx == pidx)
			return q;
	return NULL;
}

/* The next QPN on an idle socket's port: the same port index, the next
 * generation. 0 when its 24-bit QPNs are used up (the socket is closed
 * then, and the port goes back to the node's allocator): a socket hands
 * out each of its QPNs once, and a new socket on the port exists only
 * after simf_alloc_qpn came round to it again, so a QPN comes back no
 * sooner than it did before sockets were kept — once per pass of the
 * node's allocator — and a CM's TimeWait / stale-connection check sees
 * no more reuse than before. */
static uint32_t idle_next_qpn(uint32_t qpn)
{
	return qpn + SIMF_MAX_QPN <= 0xFFFFFF ? qpn + SIMF_MAX_QPN : 0;
}

/* RC, UC, UD and the XRC initiator (send side only: no receive CQ, SRQ or
 * receive queue) on pd; the XRC target (context and xrcd given: no PD, CQs
 * or queues of its own, what it receives goes to XRC SRQs of xrcd). */
static struct ibv_qp *qp_new(struct ibv_context *context, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *init, struct sv_xrcd *xrcd)
{
	struct sv_ctx *c = sv_ctx(context);
	struct ibv_qp_cap cap = init->cap;
	struct sv_qp *q;
	struct epoll_event ev;
	int tries;
	enum ibv_qp_type t = init->qp_type;

	if (t != IBV_QPT_RC && t != IBV_QPT_UC && t != IBV_QPT_UD && t != IBV_QPT_XRC_SEND &&
	    t != IBV_QPT_XRC_RECV) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (t == IBV_QPT_XRC_RECV) {
		if (!xrcd || xrcd->xrcd.context != context) {
			errno = EINVAL;
			return NULL;
		}
		memset(&cap, 0, sizeof(cap));
	} else if (t == IBV_QPT_XRC_SEND) {
		if (!pd || pd->context != context || !init->send_cq ||
		    init->send_cq->context != context) {
			errno = EINVAL;
			return NULL;
		}
		cap.max_recv_wr = 0;
		cap.max_recv_sge = 0;
	} else {
		if (!pd || pd->context != context || !init->send_cq || !init->recv_cq ||
		    init->send_cq->context != context || init->recv_cq->context != context ||
		    (init->srq && init->srq->context != context)) {
			errno = EINVAL;
			return NULL;
		}
		if (init->srq) {
			cap.max_recv_wr = 0;
			cap.max_recv_sge = 0;
		}
	}
	if (cap.max_send_wr > SV_MAX_QP_WR || cap.max_recv_wr > SV_MAX_QP_WR ||
	    cap.max_send_sge > SV_MAX_SGE || cap.max_recv_sge > SV_MAX_SGE ||
	    cap.max_inline_data > SV_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	/* Hardware rounds the inline capacity up to what its send WQE holds
	 * anyway (mlx5 reports tens of bytes for a request of 0), and
	 * programs rely on it: rdma_xclient posts a 16-byte inline send on a
	 * QP created with max_inline_data 0. The actual value is reported
	 * back through init->cap, as providers do. */
	if (cap.max_inline_data < SV_MIN_INLINE && t != IBV_QPT_XRC_RECV)
		cap.max_inline_data = SV_MIN_INLINE;
	q = calloc(1, sizeof(*q));
	if (!q) {
		errno = ENOMEM;
		return NULL;
	}
	q->sq_cap = cap.max_send_wr ? cap.max_send_wr : 1;
	q->rq_cap = cap.max_recv_wr ? cap.max_recv_wr : 1;
	q->sq = calloc(q->sq_cap, sizeof(*q->sq));
	q->rq = calloc(q->rq_cap, sizeof(*q->rq));
	if (!q->sq || !q->rq) {
		free(q->sq);
		free(q->rq);
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->ctx = c;
	q->qp.qp_type = t;
	q->cap = cap;
	q->sq_sig_all = init->sq_sig_all;
	q->state = IBV_QPS_RESET;
	q->port = 1;
	q->mtu = IBV_MTU_1024;
	q->fd = -1;
	q->qp.context = context;
	q->qp.qp_context = init->qp_context;
	/* as libibverbs does, the pointers given are kept (librdmacm takes
	 * the id's PD from qp->pd) whether or not the QP type uses them */
	q->qp.pd = pd;
	q->qp.send_cq = init->send_cq;
	q->qp.recv_cq = init->recv_cq;
	q->qp.srq = sv_is_xrc(q) ? NULL : init->srq;
	q->xrcd = t == IBV_QPT_XRC_RECV ? xrcd : NULL;
	q->qp.state = IBV_QPS_RESET;
	pthread_mutex_init(&q->qp.mutex, NULL);
	pthread_cond_init(&q->qp.cond, NULL);

	pthread_mutex_lock(&c->lock);
	if (c->nqp >= SV_MAX_QP) {
		pthread_mutex_unlock(&c->lock);
		errno = ENOMEM;
		goto fail;
	}
	/* A socket a destroyed QP left: no socket, bind or epoll_ctl. Every
	 * idle socket has a next QPN (idle_next_qpn was checked when it was
	 * kept). LIFO: the most recently used socket is the warmest. */
	if (c->nidle) {
		c->nidle--;
		q->fd = c->idle[c->nidle].fd;
		q->qp.qp_num = idle_next_qpn(c->idle[c->nidle].qpn);
		q->pidx = q->qp.qp_num % SIMF_MAX_QPN;
		goto have_socket;
	}
	/* a QPN whose port is still bound (by a live QP of this node) is skipped */
	for (tries = 0; tries < 64 && q->fd < 0; tries++) {
		uint32_t qpn = simf_alloc_qpn(c->f, c->node);

		if (!qpn)
			break;
		q->fd = simf_socket(c->f, c->node, simf_qp_port(qpn), NULL);
		if (q->fd >= 0)
			q->qp.qp_num = qpn;
		else if (errno != EADDRINUSE)
			break;
	}
	if (q->fd < 0) {
		int e = errno ? errno : EAGAIN;

		pthread_mutex_unlock(&c->lock);
		errno = e;
		goto fail;
	}
	q->pidx = q->qp.qp_num % SIMF_MAX_QPN;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u32 = q->pidx;   /* >= 2: 0 is the wake-up eventfd */
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, q->fd, &ev) < 0) {
		int e = errno;

		close(q->fd);
		pthread_mutex_unlock(&c->lock);
		errno = e;
		goto fail;
	}
have_socket:
	q->qp.handle = q->qp.qp_num;
	q->next = c->qps;
	if (c->qps)
		c->qps->pprev = &q->next;
	q->pprev = &c->qps;
	c->qps = q;
	c->nqp++;
	if (t == IBV_QPT_XRC_RECV) {
		xrcd->refs++;
	} else {
		((struct sv_pd *)pd)->refs++;
		((struct sv_cq *)init->send_cq)->refs++;
		q->refs_taken = 1 | 2;
		if (t != IBV_QPT_XRC_SEND) {
			((struct sv_cq *)init->recv_cq)->refs++;
			q->refs_taken |= 4;
		}
	}
	if (q->qp.srq)
		((struct sv_srq *)q->qp.srq)->refs++;
	pthread_mutex_unlock(&c->lock);
	init->cap = cap;
	return &q->qp;
fail:
	free(q->sq);
	free(q->rq);
	free(q);
	return NULL;
}

SV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *init)
{
	if (init->qp_type == IBV_QPT_XRC_RECV) {
		errno = EINVAL;   /* an XRC target needs its XRCD: ibv_create_qp_ex */
		return NULL;
	}
	return qp_new(pd->context, pd, init, NULL);
}
SV_COMPAT_1_0(ibv_create_qp)

/* verbs_context.create_qp_ex: the extended form with what ibv_create_qp
 * has, and the XRC target QP, which needs an XRCD (IBV_QP_INIT_ATTR_XRCD)
 * and no PD (the ibv_wr_* send API, RSS, flags: EOPNOTSUPP). */
struct ibv_qp *sv_create_qp_ex(struct ibv_context *context, struct ibv_qp_init_attr_ex *a)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	int tgt = a->qp_type == IBV_QPT_XRC_RECV;

	if (a->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
				       IBV_QP_INIT_ATTR_XRCD) ||
	    ((a->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) && a->create_flags)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (tgt ? !(a->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a->xrcd
		: !(a->comp_mask & IBV_QP_INIT_ATTR_PD) || !a->pd || a->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	memset(&ia, 0, sizeof(ia));
	ia.qp_context = a->qp_context;
	ia.send_cq = a->send_cq;
	ia.recv_cq = a->recv_cq;
	ia.srq = a->srq;
	ia.cap = a->cap;
	ia.qp_type = a->qp_type;
	ia.sq_sig_all = a->sq_sig_all;
	qp = qp_new(context, (a->comp_mask & IBV_QP_INIT_ATTR_PD) ? a->pd : NULL, &ia,
		    tgt ? (struct sv_xrcd *)a->xrcd : NULL);
	if (qp)
		a->cap = ia.cap;
	return qp;
}

SV_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	(void)qp;   /* no QP here is created with the ibv_wr_* send API */
	return NULL;
}

SV_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp;
	(void)op;
	return flags ? 0 : 1;   /* data is placed in PSN order */
}

/* ---- the state machine ------------------------------------------------------------ */

/* T_XI, T_XT: XRC initiator and target, which follow RC but for what
 * their missing half would use (the kernel's qp_state_table). */
enum { T_UD, T_UC, T_RC, T_XI, T_XT };

#define M(x) IBV_QP_##x

static int qpt_index(enum ibv_qp_type t)
{
	return t == IBV_QPT_UD ? T_UD : t == IBV_QPT_UC ? T_UC : t == IBV_QPT_XRC_SEND ? T_XI
	       : t == IBV_QPT_XRC_RECV ? T_XT : T_RC;
}

/* IBTA Vol1 10.3 / 11.2.4.2 (Modify QP): required and optional attributes.
 * XRC: INIT->RTR, the initiator (no responder) needs no
 * MAX_DEST_RD_ATOMIC / MIN_RNR_TIMER; RTR->RTS, the target (no requester)
 * needs only TIMEOUT and SQ_PSN; everything else as RC. */
static int transition(enum ibv_qp_state cur, enum ibv_qp_state next, int t, int *req, int *opt)
{
	static const int rts_opt[5] = {
		[T_UD] = M(CUR_STATE) | M(QKEY),
		[T_UC] = M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE),
		[T_RC] = M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE) |
			 M(MIN_RNR_TIMER),
		[T_XI] = M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE) |
			 M(MIN_RNR_TIMER),
		[T_XT] = M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) | M(PATH_MIG_STATE) |
			 M(MIN_RNR_TIMER),
	};
	*req = *opt = 0;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR)
		return cur <= IBV_QPS_ERR;   /* from any state, nothing else allowed */
	switch (cur) {
	case IBV_QPS_RESET:
		if (next != IBV_QPS_INIT)
			return 0;
		*req = t == T_UD ? M(PKEY_INDEX) | M(PORT) | M(QKEY)
				 : M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS);
		return 1;
	case IBV_QPS_INIT:
		if (next == IBV_QPS_INIT) {
			*opt = t == T_UD ? M(PKEY_INDEX) | M(PORT) | M(QKEY)
					 : M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS);
			return 1;
		}
		if (next != IBV_QPS_RTR)
			return 0;
		if (t == T_UD) {
			*opt = M(PKEY_INDEX) | M(QKEY);
		} else if (t == T_UC || t == T_XI) {
			*req = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN);
			*opt = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX);
		} else {
			*req = M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN) |
			       M(MAX_DEST_RD_ATOMIC) | M(MIN_RNR_TIMER);
			*opt = M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX);
		}
		return 1;
	case IBV_QPS_RTR:
		if (next != IBV_QPS_RTS)
			return 0;
		if (t == T_RC || t == T_XI || t == T_XT) {
			*req = t == T_XT ? M(TIMEOUT) | M(SQ_PSN)
				: M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) | M(SQ_PSN) | M(MAX_QP_RD_ATOMIC);
			*opt = M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(MIN_RNR_TIMER) |
			       M(PATH_MIG_STATE);
		} else {
			*req = M(SQ_PSN);
			*opt = t == T_UD ? M(CUR_STATE) | M(QKEY)
					 : M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PATH_MIG_STATE);
		}
		return 1;
	case IBV_QPS_RTS:
		if (next == IBV_QPS_RTS) {
			*opt = rts_opt[t];
			return 1;
		}
		if (next == IBV_QPS_SQD) {
			*opt = M(EN_SQD_ASYNC_NOTIFY);
			return 1;
		}
		return 0;
	case IBV_QPS_SQD:
		if (next == IBV_QPS_RTS) {
			*opt = rts_opt[t];
			return 1;
		}
		if (next != IBV_QPS_SQD)
			return 0;
		if (t == T_UD)
			*opt = M(PKEY_INDEX) | M(QKEY);
		else if (t == T_UC)
			*opt = M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) | M(PATH_MIG_STATE);
		else
			*opt = M(PORT) | M(AV) | M(TIMEOUT) | M(RETRY_CNT) | M(RNR_RETRY) |
			       M(MAX_QP_RD_ATOMIC) | M(MAX_DEST_RD_ATOMIC) | M(ALT_PATH) |
			       M(ACCESS_FLAGS) | M(PKEY_INDEX) | M(MIN_RNR_TIMER) | M(PATH_MIG_STATE);
		return 1;
	case IBV_QPS_SQE:
		if (next != IBV_QPS_RTS || t >= T_RC)
			return 0;   /* RC and XRC never enter SQE */
		*opt = t == T_UD ? M(CUR_STATE) | M(QKEY) : M(CUR_STATE) | M(ACCESS_FLAGS);
		return 1;
	default:
		return 0;
	}
}

static int check_av(struct sv_ctx *c, const struct ibv_ah_attr *a)
{
	if (a->port_num > 1)
		return EINVAL;
	if (a->sl > 15)
		return EINVAL;
	if (a->is_global && a->grh.sgid_index >= SV_GID_TBL_LEN)
		return EINVAL;
	if (c->link == SIMF_LINK_ROCE && !a->is_global)
		return EINVAL;
	return 0;
}

/* Values in range; returns 0 or EINVAL. */
static int check_values(struct sv_qp *q, const struct ibv_qp_attr *a, int mask)
{
	struct sv_ctx *c = q->ctx;

	if ((mask & M(PKEY_INDEX)) && (a->pkey_index >= SIMF_PKEYS || !sv_pkey(c, a->pkey_index)))
		return EINVAL;
	if ((mask & M(PORT)) && a->port_num != 1)
		return EINVAL;
	if ((mask & M(ACCESS_FLAGS)) &&
	    (a->qp_access_flags & ~(unsigned)(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
					      IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)))
		return EINVAL;
	if ((mask & M(AV)) && check_av(c, &a->ah_attr))
		return EINVAL;
	if ((mask & M(PATH_MTU)) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return EINVAL;
	if ((mask & M(TIMEOUT)) && a->timeout > 31)
		return EINVAL;
	if ((mask & M(RETRY_CNT)) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & M(RNR_RETRY)) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & M(MIN_RNR_TIMER)) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & M(MAX_QP_RD_ATOMIC)) && a->max_rd_atomic > SV_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & M(MAX_DEST_RD_ATOMIC)) && a->max_dest_rd_atomic > SV_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & M(DEST_QPN)) && a->dest_qp_num > 0xFFFFFF)
		return EINVAL;
	if ((mask & M(PATH_MIG_STATE)) && a->path_mig_state > IBV_MIG_ARMED)
		return EINVAL;
	if ((mask & M(ALT_PATH)) && (check_av(c, &a->alt_ah_attr) || a->alt_port_num > 1 ||
				     a->alt_timeout > 31 || a->alt_pkey_index >= SIMF_PKEYS))
		return EINVAL;
	if ((mask & M(CAP)) || (mask & M(RATE_LIMIT)))
		return EINVAL;   /* neither is modifiable here */
	return 0;
}

static void reset_qp(struct sv_qp *q)
{
	unsigned i;

	for (i = 0; i < q->sq_count; i++) {
		struct sv_swqe *w = &q->sq[(q->sq_head + i) % q->sq_cap];

		free(w->inl);
		w->inl = NULL;
	}
	q->sq_head = q->sq_count = 0;
	q->rq_head = q->rq_count = 0;
	q->tx_idx = 0;
	q->tx_pkt = 0;
	q->timer = 0;
	q->rnr_until = 0;
	memset(&q->r, 0, sizeof(q->r));
}

void sv_qp_flush(struct sv_qp *q)
{
	struct ibv_wc wc;

	while (q->sq_count) {
		struct sv_swqe *w = &q->sq[q->sq_head];

		sv_qp_complete_send(q, w, IBV_WC_WR_FLUSH_ERR);
	}
	q->tx_idx = 0;
	q->tx_pkt = 0;
	memset(&wc, 0, sizeof(wc));
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = q->qp.qp_num;
	if (q->r.have_cur) {
		wc.wr_id = q->r.cur.wr_id;
		/* an XRC target's WQE in progress is its SRQ's, and so is the CQ */
		sv_cq_push(q->r.cur_srq ? q->r.cur_srq->cq : (struct sv_cq *)q->qp.recv_cq, &wc, 0);
		q->r.have_cur = 0;
	}
	while (q->rq_count) {
		wc.wr_id = q->rq[q->rq_head].wr_id;
		q->rq_head = (q->rq_head + 1) % q->rq_cap;
		q->rq_count--;
		sv_cq_push((struct sv_cq *)q->qp.recv_cq, &wc, 0);
	}
}

void sv_qp_to_error(struct sv_qp *q)
{
	if (q->state == IBV_QPS_ERR)
		return;
	q->state = IBV_QPS_ERR;
	q->qp.state = IBV_QPS_ERR;
	q->timer = 0;
	sv_qp_flush(q);
	if (q->qp.srq) {
		struct ibv_async_event ev;

		memset(&ev, 0, sizeof(ev));
		ev.event_type = IBV_EVENT_QP_LAST_WQE_REACHED;
		ev.element.qp = &q->qp;
		sv_async_push(q->ctx, &ev);
	}
}

/* USCM_SIM_QP_SOCKET_CACHE=0: a destroyed QP's socket is closed, never
 * kept for the next QP (read once per process) — for fd accounting (the
 * soak's leak check): the cache holds up to SV_IDLE_MAX fds per context,
 * which real QPs would not. */
static int socket_cache_on(void)
{
	static int on = -1;

	if (__atomic_load_n(&on, __ATOMIC_RELAXED) < 0) {
		const char *v = getenv("USCM_SIM_QP_SOCKET_CACHE");

		__atomic_store_n(&on, !(v && !strcmp(v, "0")), __ATOMIC_RELAXED);
	}
	return on;
}

/* USCM_SIM_MODIFY_QP_DELAY_MS: every ibv_modify_qp first sleeps that long
 * (read once per process), as a slow firmware command can on hardware; for
 * tests of what a caller holds meanwhile. The QP is not locked while
 * sleeping: ibv_query_qp and the data path go on. */
static unsigned modify_delay_ms(void)
{
	static int ms = -1;

	if (__atomic_load_n(&ms, __ATOMIC_RELAXED) < 0) {
		const char *v = getenv("USCM_SIM_MODIFY_QP_DELAY_MS");
		long x = v && *v ? strtol(v, NULL, 0) : 0;

		__atomic_store_n(&ms, x > 0 && x < 600000 ? (int)x : 0, __ATOMIC_RELAXED);
	}
	return (unsigned)ms;
}

SV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct sv_qp *q = (struct sv_qp *)qp;
	struct sv_ctx *c = q->ctx;
	enum ibv_qp_state cur, next;
	int req, opt, e, t = qpt_index(qp->qp_type);
	unsigned delay = modify_delay_ms();

	if (delay) {
		struct timespec ts = { (time_t)(delay / 1000), (long)(delay % 1000) * 1000000L };

		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
	pthread_mutex_lock(&c->lock);
	cur = q->state;
	if (mask & M(CUR_STATE)) {
		/* the consumer's idea of the current state must be right */
		if (attr->cur_qp_state != cur) {
			pthread_mutex_unlock(&c->lock);
			return EINVAL;
		}
	}
	next = (mask & M(STATE)) ? attr->qp_state : cur;
	if ((unsigned)next > IBV_QPS_ERR || !transition(cur, next, t, &req, &opt) ||
	    (mask & req) != req || (mask & ~(req | opt | M(STATE)))) {
		pthread_mutex_unlock(&c->lock);
		return EINVAL;
	}
	e = check_values(q, attr, mask);
	if (e) {
		pthread_mutex_unlock(&c->lock);
		return e;
	}
	if (mask & M(PKEY_INDEX))
		q->pkey_index = attr->pkey_index;
	if (mask & M(PORT))
		q->port = attr->port_num;
	if (mask & M(QKEY))
		q->qkey = attr->qkey;
	if (mask & M(ACCESS_FLAGS))
		q->access = attr->qp_access_flags;
	if (mask & M(AV)) {
		q->av = attr->ah_attr;
		if (!q->av.port_num)
			q->av.port_num = 1;
	}
	if (mask & M(PATH_MTU))
		q->mtu = attr->path_mtu;
	if (mask & M(TIMEOUT))
		q->timeout = attr->timeout;
	if (mask & M(RETRY_CNT))
		q->retry_cnt = attr->retry_cnt;
	if (mask & M(RNR_RETRY))
		q->rnr_retry = attr->rnr_retry;
	if (mask & M(MIN_RNR_TIMER))
		q->min_rnr_timer = attr->min_rnr_timer;
	if (mask & M(MAX_QP_RD_ATOMIC))
		q->max_rd_atomic = attr->max_rd_atomic;
	if (mask & M(MAX_DEST_RD_ATOMIC))
		q->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & M(DEST_QPN))
		q->dest_qpn = attr->dest_qp_num;
	if (mask & M(EN_SQD_ASYNC_NOTIFY))
		q->en_sqd_async = attr->en_sqd_async_notify;
	if (mask & M(RQ_PSN))
		q->rq_psn = attr->rq_psn & 0xFFFFFF;
	if (mask & M(SQ_PSN)) {
		q->sq_psn = attr->sq_psn & 0xFFFFFF;
		q->next_psn = q->una = q->snd_max = q->sq_psn;
	}
	if (next != cur || next == IBV_QPS_RESET) {
		switch (next) {
		case IBV_QPS_RESET:
			reset_qp(q);
			break;
		case IBV_QPS_ERR:
			sv_qp_to_error(q);
			break;
		case IBV_QPS_RTR:
			memset(&q->r, 0, sizeof(q->r));
			q->r.epsn = q->rq_psn;
			break;
		case IBV_QPS_RTS:
			if (cur == IBV_QPS_RTR) {
				q->retry_left = q->retry_cnt;
				q->rnr_left = q->rnr_retry;
			}
			break;
		default:
			break;
		}
		q->state = next;
		qp->state = next;
		if (next == IBV_QPS_SQD && q->en_sqd_async) {
			struct ibv_async_event ev;

			/* sends are posted whole: nothing is in flight half-way */
			memset(&ev, 0, sizeof(ev));
			ev.event_type = IBV_EVENT_SQ_DRAINED;
			ev.element.qp = qp;
			sv_async_push(c, &ev);
		}
		if (next == IBV_QPS_RTS && (q->qp.qp_type != IBV_QPT_UD))
			sv_rc_pump(q);
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}
SV_COMPAT_1_0(ibv_modify_qp)

SV_EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
			   struct ibv_qp_init_attr *init)
{
	struct sv_qp *q = (struct sv_qp *)qp;
	struct sv_ctx *c = q->ctx;

	(void)mask;   /* everything is cheap to report */
	pthread_mutex_lock(&c->lock);
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = q->state;
	attr->cur_qp_state = q->state;
	attr->path_mtu = q->mtu;
	attr->path_mig_state = IBV_MIG_MIGRATED;
	attr->qkey = q->qkey;
	attr->rq_psn = q->rq_psn;
	attr->sq_psn = q->state >= IBV_QPS_RTS ? q->next_psn : q->sq_psn;
	attr->dest_qp_num = q->dest_qpn;
	attr->qp_access_flags = q->access;
	attr->cap = q->cap;
	attr->ah_attr = q->av;
	attr->pkey_index = q->pkey_index;
	attr->en_sqd_async_notify = q->en_sqd_async;
	attr->sq_draining = 0;
	attr->max_rd_atomic = q->max_rd_atomic;
	attr->max_dest_rd_atomic = q->max_dest_rd_atomic;
	attr->min_rnr_timer = q->min_rnr_timer;
	attr->port_num = q->port;
	attr->timeout = q->timeout;
	attr->retry_cnt = q->retry_cnt;
	attr->rnr_retry = q->rnr_retry;
	if (init) {
		memset(init, 0, sizeof(*init));
		init->qp_context = qp->qp_context;
		init->send_cq = qp->send_cq;
		init->recv_cq = qp->recv_cq;
		init->srq = qp->srq;
		init->cap = q->cap;
		init->qp_type = qp->qp_type;
		init->sq_sig_all = q->sq_sig_all;
	}
	pthread_mutex_unlock(&c->lock);
	return 0;
}
SV_COMPAT_1_0(ibv_query_qp)

SV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct sv_qp *q = (struct sv_qp *)qp;
	struct sv_ctx *c = q->ctx;
	uint32_t reported;
	int i;

	pthread_mutex_lock(&c->lock);
	/* Unlinked in O(1) (a walk made destroying 10k QPs quadratic). */
	if (!q->pprev || *q->pprev != q) {
		pthread_mutex_unlock(&c->lock);
		return EINVAL;
	}
	*q->pprev = q->next;
	if (q->next)
		q->next->pprev = q->pprev;
	q->pprev = NULL;
	c->nqp--;
	/* The socket stays bound and in epfd for the next QP when there is
	 * room and it has a QPN left; datagrams that reach it meanwhile are
	 * drained and counted by the progress thread (stale_drops). */
	if (c->nidle < SV_IDLE_MAX && idle_next_qpn(qp->qp_num) && socket_cache_on()) {
		c->idle[c->nidle].fd = q->fd;
		c->idle[c->nidle].qpn = qp->qp_num;
		c->nidle++;
	} else {
		/* DEL first: a forked child may hold the socket open, and then
		 * close would not take it out of the set */
		epoll_ctl(c->epfd, EPOLL_CTL_DEL, q->fd, NULL);
		close(q->fd);
	}
	q->fd = -1;
	for (i = 0; i < q->nmcg; i++)
		simf_mcast_detach(c->f, c->node, q->mcg[i].gid, q->mcg[i].lid, qp->qp_num);
	reset_qp(q);
	if (q->refs_taken & 1)
		((struct sv_pd *)qp->pd)->refs--;
	if (q->refs_taken & 2)
		((struct sv_cq *)qp->send_cq)->refs--;
	if (q->refs_taken & 4)
		((struct sv_cq *)qp->recv_cq)->refs--;
	if (q->xrcd)
		q->xrcd->refs--;
	if (qp->srq)
		((struct sv_srq *)qp->srq)->refs--;
	reported = sv_async_forget_qp(c, q);
	pthread_mutex_unlock(&c->lock);
	/* As libibverbs: the events already handed out must be acknowledged
	 * (ibv_ack_async_event) before the QP's memory goes. */
	pthread_mutex_lock(&qp->mutex);
	while (qp->events_completed != reported)
		pthread_cond_wait(&qp->cond, &qp->mutex);
	pthread_mutex_unlock(&qp->mutex);
	free(q->sq);
	free(q->rq);
	free(q);
	return 0;
}
SV_COMPAT_1_0(ibv_destroy_qp)

/* ---- multicast ------------------------------------------------------------------------ */

static int is_mgid(const struct sv_ctx *c, const union ibv_gid *gid)
{
	if (gid->raw[0] == 0xFF)
		return 1;
	/* RoCE: an IPv4-mapped class D address */
	return c->link == SIMF_LINK_ROCE && !memcmp(gid->raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) &&
	       (gid->raw[12] & 0xF0) == 0xE0;
}

SV_EXPORT int ibv_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	struct sv_qp *q = (struct sv_qp *)qp;
	struct sv_ctx *c = q->ctx;
	int i, e = 0;

	if (qp->qp_type != IBV_QPT_UD || !is_mgid(c, gid) ||
	    (c->link == SIMF_LINK_IB && (lid < 0xC000 || lid == 0xFFFF)))
		return EINVAL;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < q->nmcg; i++)
		if (!memcmp(q->mcg[i].gid, gid->raw, 16) && q->mcg[i].lid == lid)
			break;
	if (i == q->nmcg) {
		if (q->nmcg == (int)(sizeof(q->mcg) / sizeof(q->mcg[0]))) {
			e = ENOMEM;
		} else if (simf_mcast_attach(c->f, c->node, gid->raw, lid, qp->qp_num) < 0) {
			e = errno ? errno : ENOMEM;
		} else {
			memcpy(q->mcg[i].gid, gid->raw, 16);
			q->mcg[i].lid = lid;
			q->nmcg++;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return e;
}
SV_COMPAT_1_0(ibv_attach_mcast)

SV_EXPORT int ibv_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	struct sv_qp *q = (struct sv_qp *)qp;
	struct sv_ctx *c = q->ctx;
	int i;

	if (qp->qp_type != IBV_QPT_UD)
		return EINVAL;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < q->nmcg; i++)
		if (!memcmp(q->mcg[i].gid, gid->raw, 16) && q->mcg[i].lid == lid)
			break;
	if (i == q->nmcg) {
		pthread_mutex_unlock(&c->lock);
		return EINVAL;
	}
	simf_mcast_detach(c->f, c->node, gid->raw, lid, qp->qp_num);
	q->mcg[i] = q->mcg[--q->nmcg];
	pthread_mutex_unlock(&c->lock);
	return 0;
}
SV_COMPAT_1_0(ibv_detach_mcast)
