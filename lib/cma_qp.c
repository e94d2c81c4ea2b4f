/*
 * cma_qp.c - an id's QP, CQs and SRQ (rdma_create_qp(_ex), rdma_create_srq),
 * the same in both modes: the QP is the application's, created with its
 * own libibverbs context. What differs — how the fresh QP is moved where
 * the rdma_cm leaves it (in-process: attributes from this process's engine;
 * daemon mode: from uscmd), and where the device's default PD is kept —
 * comes in struct cma_qp_ops. Called without the library lock: every
 * verbs call here is a system call on hardware.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>

#include "lib/cma_int.h"

static struct ibv_cq *make_cq(struct rdma_cm_id *id, int size, struct ibv_comp_channel **ch)
{
	struct ibv_cq *cq;

	*ch = ibv_create_comp_channel(id->verbs);
	if (!*ch)
		return NULL;
	/* CQ context = the id: rdma_get_send_comp / recv_comp check it */
	cq = ibv_create_cq(id->verbs, size > 0 ? size : 1, id, *ch, 0);
	if (!cq) {
		int e = errno;
		ibv_destroy_comp_channel(*ch);
		*ch = NULL;
		errno = e;
	}
	return cq;
}

/* XRC domains: one per device context, opened on first need (an XRC
 * target QP or XRC SRQ without one of its own) and kept while the library
 * is loaded, as librdmacm's ucma_get_xrcd keeps its device's. */
#define CMA_MAX_XRCD 32
static pthread_mutex_t xrcd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	struct ibv_context *ctx;
	struct ibv_xrcd *xrcd;
} xrcds[CMA_MAX_XRCD];

static struct ibv_xrcd *device_xrcd(struct ibv_context *ctx)
{
	struct ibv_xrcd *x = NULL;
	unsigned i;

	pthread_mutex_lock(&xrcd_lock);
	for (i = 0; i < CMA_MAX_XRCD && xrcds[i].ctx; i++)
		if (xrcds[i].ctx == ctx) {
			x = xrcds[i].xrcd;
			break;
		}
	if (!x && i < CMA_MAX_XRCD) {
		struct ibv_xrcd_init_attr a;

		memset(&a, 0, sizeof(a));
		a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
		a.fd = -1;
		a.oflags = O_CREAT;
		x = ibv_open_xrcd(ctx, &a);
		if (x) {
			xrcds[i].ctx = ctx;
			xrcds[i].xrcd = x;
		}
	} else if (!x) {
		errno = ENOMEM;
	}
	pthread_mutex_unlock(&xrcd_lock);
	return x;
}

void cma_qp_to_error(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	if (!qp)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

void cma_qp_destroy_owned_cqs(struct rdma_cm_id *id, struct cma_qp_own *own)
{
	/* An XRC target's receive CQ is its XRC SRQ's: it goes after the SRQ
	 * (cma_srq_destroyed). */
	if (own->recv_cq && id->recv_cq && !(id->qp_type == IBV_QPT_XRC_RECV && id->srq)) {
		ibv_destroy_cq(id->recv_cq);
		id->recv_cq = NULL;
		if (id->recv_cq_channel)
			ibv_destroy_comp_channel(id->recv_cq_channel);
		id->recv_cq_channel = NULL;
	}
	if (own->send_cq && id->send_cq) {
		ibv_destroy_cq(id->send_cq);
		id->send_cq = NULL;
		if (id->send_cq_channel)
			ibv_destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
	if (!(id->qp_type == IBV_QPT_XRC_RECV && id->srq))
		own->recv_cq = 0;
	own->send_cq = 0;
}

void cma_srq_destroyed(struct rdma_cm_id *id, struct cma_qp_own *own)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && !id->srq && !id->qp) {
		struct cma_qp_own r = { 0, own->recv_cq };

		cma_qp_destroy_owned_cqs(id, &r);
		own->recv_cq = 0;
	}
}

int cma_qp_create(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr, int use_ex,
		  struct cma_qp_own *own, const struct cma_qp_ops *ops)
{
	struct ibv_qp *qp;
	int made_send = 0, made_recv = 0, e;
	/* XRC (librdmacm's rdma_create_qp_ex): an initiator has no receive
	 * side; a target has no CQs, it needs the device's XRC domain, and
	 * only the extended call makes one. */
	int xrc_send = attr->qp_type == IBV_QPT_XRC_SEND, xrc_recv = attr->qp_type == IBV_QPT_XRC_RECV;

	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : ops->default_pd(id);
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		if (!attr->pd)
			return cma_fail(ENOMEM);
	}
	if (attr->pd->context != id->verbs)
		return cma_fail(EINVAL);
	if (xrc_recv) {
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd) {
			attr->xrcd = device_xrcd(id->verbs);
			if (!attr->xrcd)
				return cma_fail(errno ? errno : ENOMEM);
			attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
		}
		use_ex = 1;
	} else if (!attr->send_cq) {
		if (!id->send_cq) {
			id->send_cq = make_cq(id, (int)attr->cap.max_send_wr, &id->send_cq_channel);
			if (!id->send_cq)
				goto fail;
			own->send_cq = made_send = 1;
		}
		attr->send_cq = id->send_cq;
	}
	if (!attr->recv_cq && !xrc_send && !xrc_recv) {
		if (!id->recv_cq) {
			id->recv_cq = make_cq(id, (int)attr->cap.max_recv_wr, &id->recv_cq_channel);
			if (!id->recv_cq)
				goto fail;
			own->recv_cq = made_recv = 1;
		}
		attr->recv_cq = id->recv_cq;
	}
	if (!attr->srq && id->srq && !xrc_send && !xrc_recv)
		attr->srq = id->srq;
	if (use_ex) {
		qp = ibv_create_qp_ex(id->verbs, attr);
	} else {
		struct ibv_qp_init_attr ia;

		memset(&ia, 0, sizeof(ia));
		ia.qp_context = attr->qp_context;
		ia.send_cq = attr->send_cq;
		ia.recv_cq = attr->recv_cq;
		ia.srq = attr->srq;
		ia.cap = attr->cap;
		ia.qp_type = attr->qp_type;
		ia.sq_sig_all = attr->sq_sig_all;
		qp = ibv_create_qp(attr->pd, &ia);
		if (qp)
			attr->cap = ia.cap;
	}
	if (!qp)
		goto fail;
	if (ops->init(id, qp) < 0) { /* sets id->qp once the QP is ready */
		e = errno;
		ibv_destroy_qp(qp);
		errno = e;
		goto fail;
	}
	if (!id->pd)
		id->pd = attr->pd;
	return 0;
fail:
	e = errno ? errno : ENOMEM;
	if (made_send || made_recv) {
		/* only the CQs made here go */
		struct cma_qp_own made = { made_send, made_recv };

		cma_qp_destroy_owned_cqs(id, &made);
		if (made_send)
			own->send_cq = 0;
		if (made_recv)
			own->recv_cq = 0;
	}
	return cma_fail(e);
}

void cma_qp_attr_ex(const struct ibv_qp_init_attr *a, struct ibv_pd *pd, struct ibv_qp_init_attr_ex *ax)
{
	memset(ax, 0, sizeof(*ax));
	ax->qp_context = a->qp_context;
	ax->send_cq = a->send_cq;
	ax->recv_cq = a->recv_cq;
	ax->srq = a->srq;
	ax->cap = a->cap;
	ax->qp_type = a->qp_type;
	ax->sq_sig_all = a->sq_sig_all;
	ax->pd = pd;
	ax->comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
}

void cma_qp_attr_back(const struct ibv_qp_init_attr_ex *ax, struct ibv_qp_init_attr *a)
{
	a->send_cq = ax->send_cq;
	a->recv_cq = ax->recv_cq;
	a->srq = ax->srq;
	a->cap = ax->cap;
}

/* An XRC SRQ (librdmacm's rdma_create_srq_ex): in the device's XRC domain
 * unless given one, completing on the id's receive CQ, made here (and the
 * id's to destroy) when there is none. */
static int xrc_srq_create(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr,
			  struct ibv_pd *pd, struct cma_qp_own *own)
{
	struct ibv_srq_init_attr_ex ax = *attr;
	struct ibv_srq *srq;
	int made = 0, e;

	if (!(ax.comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !ax.xrcd) {
		ax.xrcd = device_xrcd(id->verbs);
		if (!ax.xrcd)
			return cma_fail(errno ? errno : ENOMEM);
	}
	if (!(ax.comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !ax.cq) {
		if (!id->recv_cq) {
			id->recv_cq = make_cq(id, (int)ax.attr.max_wr, &id->recv_cq_channel);
			if (!id->recv_cq)
				return cma_fail(errno ? errno : ENOMEM);
			made = 1;
		}
		ax.cq = id->recv_cq;
	}
	ax.pd = pd;
	ax.comp_mask |= IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			IBV_SRQ_INIT_ATTR_CQ;
	srq = ibv_create_srq_ex(id->verbs, &ax);
	if (!srq) {
		e = errno ? errno : ENOMEM;
		if (made) {
			struct cma_qp_own m = { 0, 1 };

			cma_qp_destroy_owned_cqs(id, &m);
		}
		return cma_fail(e);
	}
	if (made)
		own->recv_cq = 1;
	attr->attr = ax.attr;
	id->srq = srq;
	if (!id->pd)
		id->pd = pd;
	return 0;
}

int cma_srq_create(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr,
		   const struct cma_qp_ops *ops, struct cma_qp_own *own)
{
	struct ibv_srq_init_attr ia;
	struct ibv_srq *srq;
	struct ibv_pd *pd;

	if (!id->verbs || id->srq)
		return cma_fail(EINVAL);
	pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd
		: id->pd ? id->pd : ops->default_pd(id);
	if (!pd)
		return cma_fail(ENOMEM);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type == IBV_SRQT_XRC)
		return xrc_srq_create(id, attr, pd, own);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC)
		return cma_fail(EOPNOTSUPP); /* tag-matching SRQs */
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = attr->srq_context;
	ia.attr = attr->attr;
	srq = ibv_create_srq(pd, &ia);
	if (!srq)
		return cma_fail(errno ? errno : ENOMEM);
	attr->attr = ia.attr;
	id->srq = srq;
	if (!id->pd)
		id->pd = pd;
	return 0;
}
