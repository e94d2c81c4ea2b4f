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

/* qp to target with the daemon's attributes for the id. */
static int modify_qp(struct cmc_id *id, struct ibv_qp *qp, enum ibv_qp_state target)
{
	struct ibv_qp_attr a;
	int mask, rc;

	memset(&a, 0, sizeof(a));
	a.qp_state = target;
	if (cmc_init_qp_attr(&id->id, &a, &mask) < 0)
		return -1;
	rc = ibv_modify_qp(qp, &a, mask);
	if (rc)
		return cma_fail(rc > 0 ? rc : EINVAL);
	return 0;
}

int cmc_modify(struct cmc_id *id, enum ibv_qp_state target)
{
	return modify_qp(id, id->id.qp, target);
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
	pthread_mutex_lock(&cmc.qp_lock);
	cma_qp_to_error(id->id.qp);
	pthread_mutex_unlock(&cmc.qp_lock);
}

/* The devices are g.devs (cmc_verbs_of opened them); they never change
 * once opened, so the search needs no lock. */
static struct ibv_pd *default_pd(struct cmc_id *id)
{
	for (int i = 0; i < g.ndevs; i++)
		if (g.devs[i].verbs == id->id.verbs)
			return cma_dev_pd(&g.devs[i]);
	return NULL;
}

/* A fresh QP goes where the rdma_cm leaves it: INIT for connected QPs,
 * RTS for UD; then it is the id's. */
static int init_new_qp(struct cmc_id *id, struct ibv_qp *qp)
{
	if (id->id.qp_type != IBV_QPT_UD && id->req_qp.valid && !id->req_qp.s[0].err) {
		/* a new id of a connection request: its event carried the INIT
		 * attributes (no round trip to the daemon) */
		struct ibv_qp_attr a = id->req_qp.s[0].attr;
		int rc = ibv_modify_qp(qp, &a, id->req_qp.s[0].mask);

		if (rc)
			return cma_fail(rc > 0 ? rc : EINVAL);
	} else if (modify_qp(id, qp, IBV_QPS_INIT) < 0 ||
		   (id->id.qp_type == IBV_QPT_UD &&
		    (modify_qp(id, qp, IBV_QPS_RTR) < 0 || modify_qp(id, qp, IBV_QPS_RTS) < 0))) {
		return -1;
	}
	id->id.qp = qp;
	return 0;
}

static struct ibv_pd *ops_default_pd(struct rdma_cm_id *cm_id)
{
	return default_pd(cmc_id_of(cm_id));
}

static int ops_init(struct rdma_cm_id *cm_id, struct ibv_qp *qp)
{
	return init_new_qp(cmc_id_of(cm_id), qp);
}

static const struct cma_qp_ops qp_ops = { ops_default_pd, ops_init };

static int create_qp_common(struct cmc_id *id, struct ibv_qp_init_attr_ex *attr, int use_ex)
{
	if (!id->id.verbs || id->id.qp)
		return cma_fail(EINVAL);
	if (cmc_id_live(id) < 0)
		return -1;
	return cma_qp_create(&id->id, attr, use_ex, &id->own, &qp_ops);
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
	cma_qp_attr_ex(qp_init_attr, pd, &ax);
	rc = create_qp_common(cmc_id_of(cm_id), &ax, 0);
	if (!rc)
		cma_qp_attr_back(&ax, qp_init_attr);
	return rc;
}

void cmc_destroy_qp(struct rdma_cm_id *cm_id)
{
	struct cmc_id *id = cmc_id_of(cm_id);

	struct ibv_qp *qp;

	if (!id)
		return;
	/* the event thread's QP moves are over, or will see no QP */
	pthread_mutex_lock(&cmc.qp_lock);
	qp = id->id.qp;
	id->id.qp = NULL;
	if (qp)
		for (struct cmc_mc *m = id->mcs; m; m = m->next)
			if (m->attached) {
				ibv_detach_mcast(qp, &m->mgid, m->mlid);
				m->attached = 0;
			}
	pthread_mutex_unlock(&cmc.qp_lock);
	if (qp)
		ibv_destroy_qp(qp);
	cma_qp_destroy_owned_cqs(&id->id, &id->own);
}

int cmc_create_srq_ex(struct rdma_cm_id *cm_id, struct ibv_srq_init_attr_ex *attr)
{
	if (!cm_id || !attr)
		return cma_fail(EINVAL);
	return cma_srq_create(cm_id, attr, &qp_ops, &cmc_id_of(cm_id)->own);
}

void cmc_srq_destroyed(struct rdma_cm_id *cm_id)
{
	cma_srq_destroyed(cm_id, &cmc_id_of(cm_id)->own);
}
