/*
 * cmc_qp.c - daemon mode: the application's QPs, CQs and SRQs. They belong
 * to this process (its own libibverbs context), so they are created and
 * moved here; the attributes of each transition come from the daemon
 * (USP_INIT_QP_ATTR), exactly as librdmacm asks the kernel's ucma.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"
#include "lib/cmc_int.h"

int cmc_modify(struct cmc_id *id, enum ibv_qp_state target)
{
	struct ibv_qp_attr a;
	int mask, rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = target;
	if (cmc_init_qp_attr(&id->id, &a, &mask) < 0)
		return -1;
	rc = ibv_modify_qp(id->id.qp, &a, mask);
	if (rc)
		return cma_fail(rc > 0 ? rc : EINVAL);
	return 0;
}

int cmc_modify_with(struct cmc_id *id, const struct usp_qp_attrs *qa)
{
	if (!qa->valid) {
		/* a frame without them: ask, state by state */
		if (cmc_modify(id, IBV_QPS_INIT) < 0 || cmc_modify(id, IBV_QPS_RTR) < 0 ||
		    cmc_modify(id, IBV_QPS_RTS) < 0)
			return -1;
		return 0;
	}
	for (int i = 0; i < 3; i++) {
		struct ibv_qp_attr a = qa->s[i].attr;
		int rc;

		if (qa->s[i].err)
			return cma_fail(qa->s[i].err);
		rc = ibv_modify_qp(id->id.qp, &a, qa->s[i].mask);
		if (rc)
			return cma_fail(rc > 0 ? rc : EINVAL);
	}
	return 0;
}

void cmc_qp_to_err(struct cmc_id *id)
{
	struct ibv_qp_attr a;

	if (!id->id.qp)
		return;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	ibv_modify_qp(id->id.qp, &a, IBV_QP_STATE);
}

static struct ibv_pd *default_pd(struct cmc_id *id)
{
	struct ibv_pd *pd = NULL;

	pthread_mutex_lock(&g.lock);
	for (int i = 0; i < g.ndevs; i++)
		if (g.devs[i].verbs == id->id.verbs) {
			if (!g.devs[i].pd)
				g.devs[i].pd = ibv_alloc_pd(g.devs[i].verbs);
			pd = g.devs[i].pd;
			break;
		}
	pthread_mutex_unlock(&g.lock);
	return pd;
}

static struct ibv_cq *make_cq(struct cmc_id *id, int size, struct ibv_comp_channel **ch)
{
	struct ibv_cq *cq;

	*ch = ibv_create_comp_channel(id->id.verbs);
	if (!*ch)
		return NULL;
	/* CQ context = the id: rdma_get_send_comp / recv_comp check it */
	cq = ibv_create_cq(id->id.verbs, size > 0 ? size : 1, id, *ch, 0);
	if (!cq) {
		int e = errno;
		ibv_destroy_comp_channel(*ch);
		*ch = NULL;
		errno = e;
	}
	return cq;
}

static void destroy_owned_cqs(struct cmc_id *id)
{
	if (id->own_recv_cq && id->id.recv_cq) {
		ibv_destroy_cq(id->id.recv_cq);
		id->id.recv_cq = NULL;
		if (id->id.recv_cq_channel)
			ibv_destroy_comp_channel(id->id.recv_cq_channel);
		id->id.recv_cq_channel = NULL;
	}
	if (id->own_send_cq && id->id.send_cq) {
		ibv_destroy_cq(id->id.send_cq);
		id->id.send_cq = NULL;
		if (id->id.send_cq_channel)
			ibv_destroy_comp_channel(id->id.send_cq_channel);
		id->id.send_cq_channel = NULL;
	}
	id->own_recv_cq = id->own_send_cq = 0;
}

/* A fresh QP goes where the rdma_cm leaves it: INIT for connected QPs,
 * RTS for UD. */
static int init_new_qp(struct cmc_id *id)
{
	if (id->id.qp_type != IBV_QPT_UD && id->req_qp.valid && !id->req_qp.s[0].err) {
		/* a new id of a connection request: its event carried the INIT
		 * attributes (no round trip to the daemon) */
		struct ibv_qp_attr a = id->req_qp.s[0].attr;
		int rc = ibv_modify_qp(id->id.qp, &a, id->req_qp.s[0].mask);

		if (rc)
			return cma_fail(rc > 0 ? rc : EINVAL);
		return 0;
	}
	if (cmc_modify(id, IBV_QPS_INIT) < 0)
		return -1;
	if (id->id.qp_type == IBV_QPT_UD &&
	    (cmc_modify(id, IBV_QPS_RTR) < 0 || cmc_modify(id, IBV_QPS_RTS) < 0))
		return -1;
	return 0;
}

static int create_qp_common(struct cmc_id *id, struct ibv_qp_init_attr_ex *attr, int use_ex)
{
	struct ibv_qp *qp;
	int made_send = 0, made_recv = 0, e;

	if (!id->id.verbs || id->id.qp)
		return cma_fail(EINVAL);
	if (cmc_id_live(id) < 0)
		return -1;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->id.pd ? id->id.pd : default_pd(id);
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
		if (!attr->pd)
			return cma_fail(ENOMEM);
	}
	if (attr->pd->context != id->id.verbs)
		return cma_fail(EINVAL);
	if (!attr->send_cq) {
		if (!id->id.send_cq) {
			id->id.send_cq = make_cq(id, (int)attr->cap.max_send_wr, &id->id.send_cq_channel);
			if (!id->id.send_cq)
				goto fail;
			id->own_send_cq = made_send = 1;
		}
		attr->send_cq = id->id.send_cq;
	}
	if (!attr->recv_cq) {
		if (!id->id.recv_cq) {
			id->id.recv_cq = make_cq(id, (int)attr->cap.max_recv_wr, &id->id.recv_cq_channel);
			if (!id->id.recv_cq)
				goto fail;
			id->own_recv_cq = made_recv = 1;
		}
		attr->recv_cq = id->id.recv_cq;
	}
	if (!attr->srq && id->id.srq)
		attr->srq = id->id.srq;
	if (use_ex) {
		qp = ibv_create_qp_ex(id->id.verbs, attr);
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
	id->id.qp = qp;
	if (init_new_qp(id) < 0) {
		e = errno;
		ibv_destroy_qp(qp);
		id->id.qp = NULL;
		errno = e;
		goto fail;
	}
	if (!id->id.pd)
		id->id.pd = attr->pd;
	return 0;
fail:
	e = errno ? errno : ENOMEM;
	if (made_send || made_recv) {
		int s = id->own_send_cq, r = id->own_recv_cq;

		id->own_send_cq = made_send;
		id->own_recv_cq = made_recv;
		destroy_owned_cqs(id);
		id->own_send_cq = made_send ? 0 : s;
		id->own_recv_cq = made_recv ? 0 : r;
	}
	return cma_fail(e);
}

int cmc_create_qp_ex(struct rdma_cm_id *cm_id, struct ibv_qp_init_attr_ex *attr)
{
	if (!cm_id || !attr)
		return cma_fail(EINVAL);
	return create_qp_common(cmc_id_of(cm_id), attr, 1);
}

int cmc_create_qp(struct rdma_cm_id *cm_id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ax;
	int rc;

	if (!cm_id || !qp_init_attr)
		return cma_fail(EINVAL);
	memset(&ax, 0, sizeof(ax));
	ax.qp_context = qp_init_attr->qp_context;
	ax.send_cq = qp_init_attr->send_cq;
	ax.recv_cq = qp_init_attr->recv_cq;
	ax.srq = qp_init_attr->srq;
	ax.cap = qp_init_attr->cap;
	ax.qp_type = qp_init_attr->qp_type;
	ax.sq_sig_all = qp_init_attr->sq_sig_all;
	ax.pd = pd;
	ax.comp_mask = pd ? IBV_QP_INIT_ATTR_PD : 0;
	rc = create_qp_common(cmc_id_of(cm_id), &ax, 0);
	if (!rc) {
		qp_init_attr->send_cq = ax.send_cq;
		qp_init_attr->recv_cq = ax.recv_cq;
		qp_init_attr->srq = ax.srq;
		qp_init_attr->cap = ax.cap;
	}
	return rc;
}

void cmc_destroy_qp(struct rdma_cm_id *cm_id)
{
	struct cmc_id *id = cmc_id_of(cm_id);

	if (!id)
		return;
	if (id->id.qp) {
		for (struct cmc_mc *m = id->mcs; m; m = m->next)
			if (m->attached) {
				ibv_detach_mcast(id->id.qp, &m->mgid, m->mlid);
				m->attached = 0;
			}
		ibv_destroy_qp(id->id.qp);
		id->id.qp = NULL;
	}
	destroy_owned_cqs(id);
}

int cmc_create_srq_ex(struct rdma_cm_id *cm_id, struct ibv_srq_init_attr_ex *attr)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct ibv_srq_init_attr ia;
	struct ibv_srq *srq;
	struct ibv_pd *pd;

	if (!id || !attr)
		return cma_fail(EINVAL);
	if (!id->id.verbs || id->id.srq)
		return cma_fail(EINVAL);
	pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd ? attr->pd
		: id->id.pd ? id->id.pd : default_pd(id);
	if (!pd)
		return cma_fail(ENOMEM);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && attr->srq_type != IBV_SRQT_BASIC)
		return cma_fail(ENOSYS); /* XRC SRQs: not yet (README) */
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = attr->srq_context;
	ia.attr = attr->attr;
	srq = ibv_create_srq(pd, &ia);
	if (!srq)
		return cma_fail(errno ? errno : ENOMEM);
	attr->attr = ia.attr;
	id->id.srq = srq;
	if (!id->id.pd)
		id->id.pd = pd;
	return 0;
}
