/*
 * cma_conn.c - ids, QPs and connections: rdma_create_id / destroy_id,
 * rdma_create_qp(_ex) / destroy_qp / init_qp_attr, connect, listen,
 * accept, reject, establish, notify, disconnect, get_request, create_ep /
 * destroy_ep, migrate_id, ECE; and the translation of CM engine events into
 * rdma_cm events (as the kernel's cma_ib_handler maps ib_cm events).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"

/* ---- ids ---------------------------------------------------------------------------- */

static enum ibv_qp_type ps_qp_type(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
}

static int ps_valid(enum rdma_port_space ps)
{
	return ps == RDMA_PS_TCP || ps == RDMA_PS_UDP || ps == RDMA_PS_IB || ps == RDMA_PS_IPOIB;
}

static int is_ud(const struct cma_id *id)
{
	return id->id.qp_type == IBV_QPT_UD;
}

/* A new id on channel c (NULL: a private channel, synchronous). */
struct cma_id *cma_id_alloc_locked(struct cma_chan *c, void *context, enum rdma_port_space ps,
				   enum ibv_qp_type qpt)
{
	struct cma_id *id = calloc(1, sizeof(*id));

	if (!id) {
		errno = ENOMEM;
		return NULL;
	}
	if (!c) {
		c = cma_chan_new(1);
		if (!c) {
			free(id);
			return NULL;
		}
		id->sync = 1;
	}
	id->caller.self = 1;
	id->chan = c;
	id->id.channel = &c->ch;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qpt;
	id->psn = (uint32_t)cma_random() & 0xFFFFFF;
	id->backlog = CMA_DEFAULT_BACKLOG;
	id->next = g.ids;
	if (g.ids)
		g.ids->pprev = &id->next;
	id->pprev = &g.ids;
	g.ids = id;
	return id;
}

int cma_id_set_caller(struct rdma_cm_id *cm_id, const struct cma_caller *c)
{
	if (!cm_id || !c)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	struct cma_id *id = cma_id_of(cm_id);
	/* the bind table counts a bound id in its namespace's */
	if (id->bound) {
		pthread_mutex_unlock(&g.lock);
		return cma_fail(EINVAL);
	}
	struct cma_netns *old = id->caller.ns;
	id->caller = *c;
	cma_netns_get(c->ns);
	cma_netns_put(old);
	pthread_mutex_unlock(&g.lock);
	return 0;
}

CMA_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out,
			      void *context, enum rdma_port_space ps)
{
	if (cma_remote())
		return cmc_create_id(channel, out, context, ps);
	struct cma_id *id;

	if (!out || !ps_valid(ps))
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (cma_init_locked() < 0) {
		int e = errno;
		cma_unlock();
		return cma_fail(e);
	}
	id = cma_id_alloc_locked((struct cma_chan *)channel, context, ps, ps_qp_type(ps));
	cma_unlock();
	if (!id)
		return -1;
	*out = &id->id;
	return 0;
}

void cma_listen_release(struct cma_id *id)
{
	for (unsigned i = 0; i < id->nsvcs; i++) {
		struct cma_svc *s = id->svcs[i];

		for (unsigned j = 0; j < s->nids; j++) {
			if (s->ids[j] == id) {
				s->ids[j] = s->ids[--s->nids];
				break;
			}
		}
		if (!s->nids) {
			cmp_listen_destroy(s->port->eng, s->l);
			for (struct cma_svc **pp = &g.svcs; *pp; pp = &(*pp)->next)
				if (*pp == s) {
					*pp = s->next;
					break;
				}
			free(s->ids);
			free(s);
		}
	}
	free(id->svcs);
	id->svcs = NULL;
	id->nsvcs = 0;
}

/* Lets go of everything an id holds in the protocol: its route, listener,
 * multicast groups (as the kernel on destroy: left; the QP is the user's and
 * stays attached until it is destroyed), its CM connection (the engine
 * finishes it alone) and its queued events. Idempotent. */
static void cma_id_detach_locked(struct cma_id *id)
{
	id->destroying = 1;
	cma_route_forget(id);
	cma_addr_release(id); /* a neighbour awaited: forgotten at once */
	cma_listen_release(id);
	cma_mc_leave_all(id);
	if (id->conn) {
		cmp_conn_destroy(id->port->eng, id->conn, cma_now());
		id->conn = NULL;
		cma_port_flush(id->port);
		cma_kick_timers();
	}
	cma_purge_events(id);
}

/* Tears an id down without waiting for acks: for ids the user never saw and
 * for the last step of rdma_destroy_id. */
void cma_id_free_locked(struct cma_id *id)
{
	cma_id_detach_locked(id);
	cma_bind_release(id);
	*id->pprev = id->next;
	if (id->next)
		id->next->pprev = id->pprev;
	if (id->sync)
		cma_chan_free(id->chan);
	cma_addrinfo_release(id);
	cma_addr_release(id);
	cma_event_rsv_free(id);
	cma_netns_put(id->caller.ns); /* after cma_bind_release: its table is the namespace's */
	free(id->ep_qp_attr);
	free(id);
}

CMA_EXPORT int rdma_destroy_id(struct rdma_cm_id *cm_id)
{
	if (cma_remote())
		return cmc_destroy_id(cm_id);
	struct cma_id *id = cma_id_of(cm_id);

	if (!id)
		return cma_fail(EINVAL);
	/* A synchronous id's last event is ours to ack. */
	if (id->sync && id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	pthread_mutex_lock(&g.lock);
	cma_id_detach_locked(id);
	/* rdma_destroy_id(3): blocks until the events handed out are acked;
	 * and a QP job in flight pins the id (cma_qpjob.c). */
	for (;;) {
		cma_qpj_wait(id);
		if (!id->events_out)
			break;
		cma_deferred_run();
		pthread_cond_wait(&g.cond, &g.lock);
	}
	cma_id_free_locked(id);
	cma_unlock();
	return 0;
}

CMA_EXPORT int rdma_migrate_id(struct rdma_cm_id *cm_id, struct rdma_event_channel *channel)
{
	if (cma_remote())
		return cmc_migrate_id(cm_id, channel);
	struct cma_id *id = cma_id_of(cm_id);
	struct cma_chan *old, *nc;
	struct cma_event **pp, *e;

	if (!id)
		return cma_fail(EINVAL);
	if (id->sync && id->id.event) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	pthread_mutex_lock(&g.lock);
	old = id->chan;
	nc = channel ? (struct cma_chan *)channel : cma_chan_new(1);
	if (!nc) {
		cma_unlock();
		return -1;
	}
	if (old == nc) {
		cma_unlock();
		return 0;
	}
	/* Pending events of the id follow it, in order. */
	if (old) {
		pp = &old->head;
		old->tail = NULL;
		while ((e = *pp)) {
			if (e->owner == id) {
				*pp = e->next;
				e->next = NULL;
				e->chan = nc;
				if (nc->tail)
					nc->tail->next = e;
				else
					nc->head = e;
				nc->tail = e;
				continue;
			}
			old->tail = e;
			pp = &e->next;
		}
		cma_chan_update(old);
	}
	cma_chan_update(nc);
	if (id->sync)
		cma_chan_free(old);
	id->chan = nc;
	id->id.channel = &nc->ch;
	id->sync = channel == NULL;
	cma_unlock();
	return 0;
}

/* ---- QP attributes ---------------------------------------------------------------------- */

static struct cma_dev *id_dev(const struct cma_id *id)
{
	return id->port ? id->port->dev : NULL;
}

static uint16_t id_pkey_index(const struct cma_id *id)
{
	int idx;

	if (id->path_valid)
		return id->path.pkey_index;
	idx = cma_port_pkey_index(id->port, be16toh(id->id.route.addr.addr.ibaddr.pkey));
	return (uint16_t)(idx >= 0 ? idx : 0);
}

/* Attributes for target from the connection, with what the library knows
 * better than the engine: the port, our source GID index, the RQ PSN (the
 * id's own, as the kernel CMA overrides it) and the negotiated RDMA depths. */
static int conn_attr(struct cma_id *id, enum ibv_qp_state target, struct ibv_qp_attr *a,
		     int *mask)
{
	if (cmp_conn_qp_attr(id->conn, target, a, mask) < 0)
		return -1;
	switch (target) {
	case IBV_QPS_INIT:
		a->port_num = id->id.port_num;
		break;
	case IBV_QPS_RTR:
		a->ah_attr.port_num = id->id.port_num;
		if (a->ah_attr.is_global)
			a->ah_attr.grh.sgid_index = id->path.sgid_index;
		a->rq_psn = id->psn;
		if (*mask & IBV_QP_MAX_DEST_RD_ATOMIC && id->state == ST_CONNECT_REQ)
			a->max_dest_rd_atomic = id->resp_res;
		break;
	case IBV_QPS_RTS:
		if (*mask & IBV_QP_MAX_QP_RD_ATOMIC && id->state == ST_CONNECT_REQ)
			a->max_rd_atomic = id->init_depth;
		if (id->ack_timeout_set && (*mask & IBV_QP_TIMEOUT))
			a->timeout = id->ack_timeout;
		break;
	default:
		break;
	}
	return 0;
}

/* Attributes when there is no connection (yet): INIT of a connected QP
 * (no remote access until the peer is known, as the kernel CMA), or the
 * three states of a UD QP. */
static int plain_attr(struct cma_id *id, enum ibv_qp_state target, struct ibv_qp_attr *a,
		      int *mask)
{
	memset(a, 0, sizeof(*a));
	if (!id->port)
		return cma_fail(EINVAL);
	switch (target) {
	case IBV_QPS_INIT:
		a->qp_state = IBV_QPS_INIT;
		a->pkey_index = id_pkey_index(id);
		a->port_num = id->id.port_num;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		if (is_ud(id)) {
			/* As the kernel: the id's Q_Key is chosen now for good. */
			a->qkey = id->qkey = cma_ud_qkey(id);
			*mask |= IBV_QP_QKEY;
		} else {
			a->qp_access_flags = 0;
			*mask |= IBV_QP_ACCESS_FLAGS;
		}
		return 0;
	case IBV_QPS_RTR:
		if (!is_ud(id))
			break;
		a->qp_state = IBV_QPS_RTR;
		*mask = IBV_QP_STATE;
		return 0;
	case IBV_QPS_RTS:
		if (!is_ud(id))
			break;
		a->qp_state = IBV_QPS_RTS;
		a->sq_psn = 0;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		return 0;
	default:
		break;
	}
	return cma_fail(EINVAL);
}

int cma_id_qp_attr(struct cma_id *id, enum ibv_qp_state target, struct ibv_qp_attr *a, int *mask)
{
	if (id->conn && !is_ud(id) && conn_attr(id, target, a, mask) == 0)
		return 0;
	if (id->conn && !is_ud(id) && target != IBV_QPS_INIT)
		return cma_fail(EINVAL);
	return plain_attr(id, target, a, mask);
}

CMA_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *cm_id, struct ibv_qp_attr *qp_attr,
				 int *qp_attr_mask)
{
	if (cma_remote())
		return cmc_init_qp_attr(cm_id, qp_attr, qp_attr_mask);
	struct cma_id *id = cma_id_of(cm_id);
	int rc;

	if (!id || !qp_attr || !qp_attr_mask)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	rc = cma_id_qp_attr(id, qp_attr->qp_state, qp_attr, qp_attr_mask);
	cma_unlock();
	return rc;
}

/* A job (cma_qpjob.c) that takes the id's QP through INIT, RTR and RTS for
 * its connection, with attributes computed now; NULL/errno. */
static struct cma_qpj *rts_job(struct cma_id *id)
{
	struct cma_qpj *j = cma_qpj_new(id, QPJ_MODIFY);
	int e;

	if (!j)
		return NULL;
	if (cma_qpj_add_step(j, IBV_QPS_INIT) == 0 && cma_qpj_add_step(j, IBV_QPS_RTR) == 0 &&
	    cma_qpj_add_step(j, IBV_QPS_RTS) == 0)
		return j;
	e = errno;
	free(j);
	errno = e;
	return NULL;
}

/* ---- QPs ------------------------------------------------------------------------------------ */

/* The QP, its CQs and SRQ are made without g.lock (system calls on
 * hardware); the lock is taken only to read the id. */
static struct ibv_pd *ops_default_pd(struct rdma_cm_id *cm_id)
{
	struct cma_dev *d;

	pthread_mutex_lock(&g.lock);
	d = id_dev(cma_id_of(cm_id));
	cma_unlock();
	return d ? cma_dev_pd(d) : NULL;
}

/* Moves a fresh QP where the rdma_cm leaves it — INIT for connected QPs
 * (RTR/RTS come with the connection), RTS for UD — and then gives it to
 * the id. Nobody else sees the QP before that, so the calls need no job. */
static int ops_init(struct rdma_cm_id *cm_id, struct ibv_qp *qp)
{
	struct cma_id *id = cma_id_of(cm_id);
	struct cma_qp_step s[3];
	int n = is_ud(id) ? 3 : 1, rc = 0;

	pthread_mutex_lock(&g.lock);
	for (int i = 0; i < n && !rc; i++) {
		memset(&s[i].attr, 0, sizeof(s[i].attr));
		s[i].attr.qp_state = (enum ibv_qp_state)(IBV_QPS_INIT + i);
		rc = cma_id_qp_attr(id, s[i].attr.qp_state, &s[i].attr, &s[i].mask);
	}
	cma_unlock();
	if (rc)
		return -1;
	for (int i = 0; i < n; i++)
		if ((rc = ibv_modify_qp(qp, &s[i].attr, s[i].mask)))
			return cma_fail(rc > 0 ? rc : EINVAL);
	pthread_mutex_lock(&g.lock);
	id->id.qp = qp;
	cma_unlock();
	return 0;
}

static const struct cma_qp_ops qp_ops = { ops_default_pd, ops_init };

static int create_qp_common(struct cma_id *id, struct ibv_qp_init_attr_ex *attr, int use_ex)
{
	int rc;

	pthread_mutex_lock(&g.lock);
	if (!id->id.verbs || !id->port || id->id.qp || id->qp_creating) {
		cma_unlock();
		return cma_fail(EINVAL);
	}
	id->qp_creating = 1;
	cma_unlock();
	rc = cma_qp_create(&id->id, attr, use_ex, &id->own, &qp_ops);
	pthread_mutex_lock(&g.lock);
	id->qp_creating = 0;
	cma_unlock();
	return rc;
}

CMA_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *cm_id, struct ibv_qp_init_attr_ex *attr)
{
	if (cma_remote())
		return cmc_create_qp_ex(cm_id, attr);
	struct cma_id *id = cma_id_of(cm_id);

	if (!id || !attr)
		return cma_fail(EINVAL);
	return create_qp_common(id, attr, 1);
}

CMA_EXPORT int rdma_create_qp(struct rdma_cm_id *cm_id, struct ibv_pd *pd,
			      struct ibv_qp_init_attr *qp_init_attr)
{
	if (cma_remote())
		return cmc_create_qp(cm_id, pd, qp_init_attr);
	struct cma_id *id = cma_id_of(cm_id);
	struct ibv_qp_init_attr_ex ax;
	int rc;

	if (!id || !qp_init_attr)
		return cma_fail(EINVAL);
	cma_qp_attr_ex(qp_init_attr, pd, &ax);
	rc = create_qp_common(id, &ax, 0);
	if (!rc)
		cma_qp_attr_back(&ax, qp_init_attr);
	return rc;
}

CMA_EXPORT void rdma_destroy_qp(struct rdma_cm_id *cm_id)
{
	if (cma_remote()) {
		cmc_destroy_qp(cm_id);
		return;
	}
	struct cma_id *id = cma_id_of(cm_id);
	struct ibv_qp *qp = NULL;

	if (!id)
		return;
	pthread_mutex_lock(&g.lock);
	if (id->id.qp) {
		cma_qpj_wait(id); /* attaches in flight too */
		cma_mc_detach_qp(id);
		/* every call on the QP (the detaches too) done before it goes */
		cma_qpj_wait(id);
		qp = id->id.qp;
		id->id.qp = NULL;
	}
	cma_unlock();
	if (qp)
		ibv_destroy_qp(qp);
	cma_qp_destroy_owned_cqs(&id->id, &id->own);
}

CMA_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *cm_id, struct ibv_srq_init_attr_ex *attr)
{
	if (cma_remote())
		return cmc_create_srq_ex(cm_id, attr);
	struct cma_id *id = cma_id_of(cm_id);

	if (!id || !attr)
		return cma_fail(EINVAL);
	return cma_srq_create(&id->id, attr, &qp_ops, &id->own); /* without g.lock: system calls */
}

CMA_EXPORT int rdma_create_srq(struct rdma_cm_id *cm_id, struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	struct ibv_srq_init_attr_ex ax;
	int rc;

	if (!attr)
		return cma_fail(EINVAL);
	memset(&ax, 0, sizeof(ax));
	ax.srq_context = attr->srq_context;
	ax.attr = attr->attr;
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | (pd ? IBV_SRQ_INIT_ATTR_PD : 0);
	/* an XRC target id's SRQ is an XRC SRQ (librdmacm) */
	ax.srq_type = cm_id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
	ax.pd = pd;
	rc = rdma_create_srq_ex(cm_id, &ax);
	if (!rc)
		attr->attr = ax.attr;
	return rc;
}

CMA_EXPORT void rdma_destroy_srq(struct rdma_cm_id *cm_id)
{
	struct ibv_srq *srq;

	if (!cm_id)
		return;
	pthread_mutex_lock(&g.lock);
	srq = cm_id->srq;
	cm_id->srq = NULL;
	cma_unlock();
	if (srq)
		ibv_destroy_srq(srq);
	if (cma_remote())
		cmc_srq_destroyed(cm_id);
	else
		cma_srq_destroyed(cm_id, &cma_id_of(cm_id)->own);
}

/* ---- connecting ------------------------------------------------------------------------------ */

static uint8_t clamp_depth(uint8_t want, int dev_max)
{
	if (dev_max < 0)
		dev_max = 0;
	if (want == RDMA_MAX_RESP_RES || want > dev_max)
		return (uint8_t)(dev_max > 255 ? 255 : dev_max);
	return want;
}

int cma_ip_family(const struct cma_id *id)
{
	int f = id->id.route.addr.src_addr.sa_family;
	return f == AF_INET || f == AF_INET6;
}

CMA_EXPORT int rdma_connect(struct rdma_cm_id *cm_id, struct rdma_conn_param *param)
{
	if (cma_remote())
		return cmc_connect(cm_id, param);
	struct cma_id *id = cma_id_of(cm_id);
	struct cmp_req_param req;
	uint8_t pdata[CMP_REQ_PDATA];
	unsigned off = 0, ulen;
	struct cma_dev *d;

	if (!id)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (is_ud(id)) {
		/* UD service resolution: a SIDR_REQ (cma_ud.c). */
		int rc = cma_ud_connect(id, param), e = errno;

		cma_unlock();
		if (rc < 0)
			return cma_fail(e);
		return cma_sync_wait(id);
	}
	if (id->state != ST_ROUTE_RESOLVED || !id->path_valid || (!id->id.qp && !param)) {
		cma_unlock();
		return cma_fail(EINVAL);
	}
	ulen = param ? param->private_data_len : 0;
	if (cma_ip_family(id))
		off = CMP_CMA_HDR_SIZE;
	if (off + ulen > CMP_REQ_PDATA || (ulen && !param->private_data)) {
		cma_unlock();
		return cma_fail(EINVAL);
	}
	/* The events it is owed: the outcome (room for the REP's private
	 * data), DISCONNECTED and TIMEWAIT_EXIT (cma_event_mem.c). */
	if (cma_event_reserve(id, 3, 1) < 0) {
		cma_unlock();
		return cma_fail(ENOMEM);
	}
	if (cma_port_open(id->port) < 0) {
		int e = errno;
		cma_unlock();
		return cma_fail(e);
	}
	memset(pdata, 0, sizeof(pdata));
	if (off && cmp_cma_hdr_build(pdata, sizeof(pdata), &id->id.route.addr.src_addr,
				     &id->id.route.addr.dst_addr) < 0) {
		int e = errno;
		cma_unlock();
		return cma_fail(e);
	}
	if (ulen)
		memcpy(pdata + off, param->private_data, ulen);
	d = id_dev(id);
	id->resp_res = clamp_depth(param ? param->responder_resources : RDMA_MAX_RESP_RES,
				   d->attr.max_qp_rd_atom);
	id->init_depth = clamp_depth(param ? param->initiator_depth : RDMA_MAX_INIT_DEPTH,
				     d->attr.max_qp_init_rd_atom);
	memset(&req, 0, sizeof(req));
	req.primary = &id->path;
	req.service_id = cma_service_id(id, &id->id.route.addr.dst_addr);
	req.qpn = id->id.qp ? id->id.qp->qp_num : param->qp_num;
	req.qp_type = (id->id.qp ? id->id.qp->qp_type == IBV_QPT_UC : id->qp_uc) ? CMP_QPT_UC : CMP_QPT_RC;
	if (id->id.qp ? id->id.qp->qp_type == IBV_QPT_XRC_SEND : id->id.qp_type == IBV_QPT_XRC_SEND)
		req.qp_type = CMP_QPT_XRC_INI;
	req.starting_psn = id->psn;
	req.responder_resources = id->resp_res;
	req.initiator_depth = id->init_depth;
	req.retry_count = param ? (param->retry_count > 7 ? 7 : param->retry_count) : 7;
	req.rnr_retry_count = param ? (param->rnr_retry_count > 7 ? 7 : param->rnr_retry_count) : 7;
	/* no parameters: 0, as librdmacm's (it zeroes the kernel's copy and sets
	 * only the retry counts): rdma_client's REQ on the kernel's CM says so */
	req.flow_control = param ? param->flow_control : 0;
	req.srq = id->id.qp ? id->id.qp->srq != NULL : param->srq;
	if (id->local_ece_set)
		req.ece = id->local_ece;
	req.private_data = pdata;
	req.private_data_len = (uint8_t)(off + ulen);
	if (cmp_connect(id->port->eng, &req, id, &id->conn, cma_now()) < 0) {
		int e = errno;
		cma_unlock();
		return cma_fail(e);
	}
	id->state = ST_CONNECT;
	cma_port_flush(id->port);
	cma_kick_timers();
	cma_unlock();
	return cma_sync_wait(id);
}

CMA_EXPORT int rdma_establish(struct rdma_cm_id *cm_id)
{
	if (cma_remote())
		return cmc_establish(cm_id);
	struct cma_id *id = cma_id_of(cm_id);
	int rc = 0;

	if (!id)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	/* Only for ids whose QP the user owns (rdma_establish(3)). */
	if (id->id.qp || id->state != ST_CONNECT_RESPONSE || !id->conn) {
		rc = cma_fail(EINVAL);
	} else if (cmp_rtu(id->port->eng, id->conn, NULL, 0, cma_now()) < 0) {
		rc = -1;
	} else {
		id->state = ST_ESTABLISHED;
		cma_port_flush(id->port);
		cma_kick_timers();
	}
	cma_unlock();
	return rc;
}

/* ---- listening ---------------------------------------------------------------------------------- */

static int svc_add(struct cma_id *id, struct cma_port *p, uint64_t sid, uint64_t mask)
{
	struct cma_svc *s;
	struct cma_svc **ns;

	/* Ids share a service only when the bind table let them hold its port
	 * together: the SID names one port of one port space. */
	for (s = g.svcs; s; s = s->next)
		if (s->port == p && s->sid == sid && s->mask == mask)
			break;
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			return cma_fail(ENOMEM);
		s->port = p;
		s->sid = sid;
		s->mask = mask;
		/* The library enforces each id's backlog; the engine's is a cap. */
		if (cmp_listen(p->eng, sid, mask, 1u << 20, s, &s->l) < 0) {
			int e = errno;
			free(s);
			return cma_fail(e);
		}
		s->next = g.svcs;
		g.svcs = s;
	}
	if (s->nids == s->cap) {
		unsigned nc = s->cap ? s->cap * 2 : 2;
		struct cma_id **ni = realloc(s->ids, nc * sizeof(*ni));
		if (!ni)
			return cma_fail(ENOMEM);
		s->ids = ni;
		s->cap = nc;
	}
	ns = realloc(id->svcs, (id->nsvcs + 1) * sizeof(*ns));
	if (!ns)
		return cma_fail(ENOMEM);
	id->svcs = ns;
	s->ids[s->nids++] = id;
	id->svcs[id->nsvcs++] = s;
	return 0;
}

CMA_EXPORT int rdma_listen(struct rdma_cm_id *cm_id, int backlog)
{
	if (cma_remote())
		return cmc_listen(cm_id, backlog);
	struct cma_id *id = cma_id_of(cm_id);
	uint64_t sid, mask;
	int ok = 0, err = ENODEV, e;

	if (!id)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (id->state == ST_LISTEN) {
		id->backlog = backlog > 0 && backlog < g.max_backlog ? backlog : g.max_backlog;
		cma_unlock();
		return 0;
	}
	if (id->state == ST_IDLE) {
		struct sockaddr_in any;

		memset(&any, 0, sizeof(any));
		any.sin_family = AF_INET;
		if (cma_bind_locked(id, (struct sockaddr *)&any) < 0) {
			e = errno;
			cma_unlock();
			return cma_fail(e);
		}
	}
	if (id->state != ST_BOUND || id->nr_req) { /* nr_req: the kernel's ADDR_QUERY */
		cma_unlock();
		return cma_fail(EINVAL);
	}
	if ((e = cma_check_port_listen(id))) {
		cma_unlock();
		return cma_fail(e);
	}
	/* Exact for every family, as the kernel's ib_cm_listen: the bind
	 * made an AF_IB address's SID one port of one port space (mask ~0),
	 * so no listener catches another port's requests. */
	sid = cma_service_id(id, &id->id.route.addr.src_addr);
	mask = 0;
	/* A specific address listens on its port; a wildcard on every port. */
	for (int dv = 0; dv < g.ndevs; dv++) {
		for (int i = 0; i < g.devs[dv].nports; i++) {
			struct cma_port *p = &g.devs[dv].ports[i];

			if (id->port && p != id->port)
				continue;
			if (cma_port_open(p) < 0 || svc_add(id, p, sid, mask) < 0) {
				err = errno;
				continue;
			}
			ok++;
		}
	}
	if (!ok) {
		cma_listen_release(id);
		cma_unlock();
		return cma_fail(err);
	}
	id->backlog = backlog > 0 && backlog < g.max_backlog ? backlog : g.max_backlog;
	id->state = ST_LISTEN;
	cma_kick();
	cma_unlock();
	return 0;
}

CMA_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	if (cma_remote())
		return cmc_get_request(listen, out);
	struct cma_id *lid = cma_id_of(listen);
	struct rdma_cm_event *ev;
	struct cma_id *nid;

	if (!lid || !out || !lid->sync)
		return cma_fail(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (rdma_get_cm_event(listen->channel, &ev) < 0)
		return -1;
	if (ev->status || ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		listen->event = ev;
		return cma_fail(cma_event_errno(ev));
	}
	nid = cma_id_of(ev->id);
	if (lid->ep_qp_attr) {
		struct ibv_qp_init_attr a = *lid->ep_qp_attr;
		if (rdma_create_qp(&nid->id, listen->pd, &a) < 0) {
			listen->event = ev;
			return -1;
		}
	}
	/* The new id holds its connect request until it is answered. */
	nid->id.event = ev;
	*out = &nid->id;
	return 0;
}

/* ---- answering ----------------------------------------------------------------------------------- */

/* The accept side never grants more than the REQ asked for, nor more than
 * the device has (idempotent: uscmd applies it before and at the accept). */
static void accept_depths(struct cma_id *id, const struct rdma_conn_param *param)
{
	struct cma_dev *d = id_dev(id);

	if (param) {
		if (param->responder_resources != RDMA_MAX_RESP_RES &&
		    param->responder_resources < id->resp_res)
			id->resp_res = param->responder_resources;
		if (param->initiator_depth != RDMA_MAX_INIT_DEPTH &&
		    param->initiator_depth < id->init_depth)
			id->init_depth = param->initiator_depth;
	}
	id->resp_res = clamp_depth(id->resp_res, d->attr.max_qp_rd_atom);
	id->init_depth = clamp_depth(id->init_depth, d->attr.max_qp_init_rd_atom);
}

int cma_accept_prepare(struct rdma_cm_id *cm_id, const struct rdma_conn_param *param)
{
	struct cma_id *id = cma_id_of(cm_id);
	int rc = 0;

	if (!id)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (is_ud(id) || id->state != ST_CONNECT_REQ || !id->conn)
		rc = cma_fail(EINVAL);
	else
		accept_depths(id, param);
	cma_unlock();
	return rc;
}

CMA_EXPORT int rdma_accept(struct rdma_cm_id *cm_id, struct rdma_conn_param *param)
{
	if (cma_remote())
		return cmc_accept(cm_id, param);
	struct cma_id *id = cma_id_of(cm_id);
	struct cmp_rep_param rep;
	int e;

	if (!id)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (is_ud(id)) {
		/* A SIDR_REP; no event follows on this side, so a synchronous id
		 * only lets go of its connect request (as librdmacm). */
		int rc = cma_ud_accept(id, param), err = errno;

		cma_unlock();
		if (rc < 0)
			return cma_fail(err);
		if (id->sync && id->id.event) {
			rdma_ack_cm_event(id->id.event);
			id->id.event = NULL;
		}
		return 0;
	}
	if (id->state != ST_CONNECT_REQ || !id->conn || (!id->id.qp && !param) ||
	    (param && param->private_data_len > CMP_REP_PDATA) ||
	    (param && param->private_data_len && !param->private_data)) {
		cma_unlock();
		return cma_fail(EINVAL);
	}
	accept_depths(id, param);
	/* Room for the REP before the QP moves: cmp_accept cannot then fail
	 * for lack of memory with the QP already in RTS. */
	if (cmp_engine_reserve(id->port->eng) < 0) {
		cma_unlock();
		return cma_fail(ENOMEM);
	}
	if (id->id.qp) {
		/* Ready to receive and send before the REP leaves, as the kernel
		 * CMA does: the peer may send as soon as it has the REP. The
		 * calls run with g.lock dropped (cma_qpjob.c). */
		struct cma_qpj *j = rts_job(id);

		e = j ? cma_qpj_sync(j) : errno;
		if (!e && (id->destroying || id->state != ST_CONNECT_REQ || !id->conn)) {
			/* the request ended meanwhile (the peer gave up: its REJ
			 * queued the QP's move to ERROR after ours) */
			cma_unlock();
			return cma_fail(EINVAL);
		}
		/* the room made above may have been taken meanwhile */
		if (!e && cmp_engine_reserve(id->port->eng) < 0)
			e = ENOMEM;
		if (e) {
			cmp_reject(id->port->eng, id->conn, CMA_REJ_CONSUMER_DEFINED, NULL, 0, NULL, 0,
				   cma_now());
			id->state = ST_ERROR;
			cma_port_flush(id->port);
			cma_kick();
			cma_unlock();
			return cma_fail(e);
		}
	}
	memset(&rep, 0, sizeof(rep));
	rep.qpn = id->id.qp ? id->id.qp->qp_num : param->qp_num;
	rep.starting_psn = id->psn;
	rep.responder_resources = id->resp_res;
	rep.initiator_depth = id->init_depth;
	rep.flow_control = param ? param->flow_control : 0;
	rep.rnr_retry_count = param ? (param->rnr_retry_count > 7 ? 7 : param->rnr_retry_count) : 7;
	rep.srq = id->id.qp ? id->id.qp->srq != NULL : param->srq;
	if (id->local_ece_set)
		rep.ece = id->local_ece;
	if (param && param->private_data_len) {
		rep.private_data = param->private_data;
		rep.private_data_len = param->private_data_len;
	}
	if (cmp_accept(id->port->eng, id->conn, &rep, cma_now()) < 0) {
		e = errno;
		cma_unlock();
		return cma_fail(e);
	}
	id->state = ST_ACCEPTED;
	cma_port_flush(id->port);
	cma_kick_timers();
	cma_unlock();
	return cma_sync_wait(id);
}

static int reject_common(struct rdma_cm_id *cm_id, const void *pdata, uint8_t len,
			 uint16_t reason)
{
	struct cma_id *id = cma_id_of(cm_id);
	int rc = 0;

	if (!id || (len && !pdata))
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (is_ud(id)) {
		/* SIDR_REP with status "rejected" (the reason has no field). */
		(void)reason;
		rc = cma_ud_reject(id, pdata, len);
	} else if (len > CMP_REJ_PDATA) {
		rc = cma_fail(EINVAL);
	} else if (!id->conn || (id->state != ST_CONNECT_REQ && id->state != ST_CONNECT_RESPONSE)) {
		rc = cma_fail(EINVAL);
	} else if (cmp_reject(id->port->eng, id->conn, reason, NULL, 0, pdata, len, cma_now()) < 0) {
		rc = -1;
	} else {
		id->state = ST_ERROR;
		cma_port_flush(id->port);
		cma_kick_timers();
	}
	cma_unlock();
	return rc;
}

CMA_EXPORT int rdma_reject(struct rdma_cm_id *cm_id, const void *private_data,
			   uint8_t private_data_len)
{
	if (cma_remote())
		return cmc_reject(cm_id, private_data, private_data_len);
	return reject_common(cm_id, private_data, private_data_len, CMA_REJ_CONSUMER_DEFINED);
}

CMA_EXPORT int rdma_reject_ece(struct rdma_cm_id *cm_id, const void *private_data,
			       uint8_t private_data_len)
{
	if (cma_remote())
		return cmc_reject_ece(cm_id, private_data, private_data_len);
	return reject_common(cm_id, private_data, private_data_len,
			     CMA_REJ_VENDOR_OPTION_NOT_SUPPORTED);
}

CMA_EXPORT int rdma_notify(struct rdma_cm_id *cm_id, enum ibv_event_type event)
{
	if (cma_remote())
		return cmc_notify(cm_id, event);
	struct cma_id *id = cma_id_of(cm_id);
	int rc = 0;

	if (!id)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (!id->conn) {
		rc = cma_fail(EINVAL);
	} else if (event == IBV_EVENT_COMM_EST) {
		/* Data arrived before the RTU: established now. */
		rc = cmp_notify(id->port->eng, id->conn, cma_now());
		cma_port_flush(id->port);
	} else if (event != IBV_EVENT_LID_CHANGE && event != IBV_EVENT_PATH_MIG) {
		rc = cma_fail(EINVAL);
	}
	cma_unlock();
	return rc;
}

CMA_EXPORT int rdma_disconnect(struct rdma_cm_id *cm_id)
{
	if (cma_remote())
		return cmc_disconnect(cm_id);
	struct cma_id *id = cma_id_of(cm_id);
	int sent = 0;

	if (!id)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (!id->conn) {
		cma_unlock();
		return cma_fail(EINVAL);
	}
	/* The QP is in ERROR before the DREQ leaves, as with the kernel's
	 * rdma_cm; after any move still in flight (the REP's to RTS: then the
	 * connection is established by now and the DREQ follows the RTU). */
	cma_qp_to_err(id, NULL);
	cma_qpj_wait(id);
	if (!id->conn) {
		cma_unlock();
		return 0;
	}
	switch (cmp_conn_state(id->conn)) {
	case CMP_ESTABLISHED: /* send DREQ */
	case CMP_DREQ_RCVD:   /* answer the peer's with DREP */
		if (cmp_disconnect(id->port->eng, id->conn, NULL, 0, cma_now()) == 0) {
			sent = 1;
		} else if (errno == ENOMEM) {
			/* Nothing sent: no DISCONNECTED will come. Say so. */
			cma_unlock();
			return cma_fail(ENOMEM);
		}
		break;
	default:
		/* Nothing to say on the wire (as the kernel: not an error). */
		break;
	}
	id->disconnect_called = 1;
	cma_port_flush(id->port);
	cma_kick_timers();
	cma_unlock();
	/* A synchronous id waits for its DISCONNECTED event. */
	if (id->sync && sent)
		return cma_sync_wait(id);
	return 0;
}

/* ---- ECE ------------------------------------------------------------------------------------------- */

CMA_EXPORT int rdma_set_local_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece)
{
	if (cma_remote())
		return cmc_set_local_ece(cm_id, ece);
	struct cma_id *id = cma_id_of(cm_id);

	if (!id || !ece || ece->comp_mask)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	id->local_ece.vendor_id = ece->vendor_id & 0xFFFFFF;
	id->local_ece.attr_mod = ece->options;
	id->local_ece_set = 1;
	cma_unlock();
	return 0;
}

CMA_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece)
{
	if (cma_remote())
		return cmc_get_remote_ece(cm_id, ece);
	struct cma_id *id = cma_id_of(cm_id);

	if (!id || !ece)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	ece->vendor_id = id->remote_ece.vendor_id;
	ece->options = id->remote_ece.attr_mod;
	ece->comp_mask = 0;
	cma_unlock();
	return 0;
}

/* ---- endpoints ---------------------------------------------------------------------------------------- */

CMA_EXPORT int rdma_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res,
			      struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	if (cma_remote())
		return cmc_create_ep(out, res, pd, qp_init_attr);
	struct rdma_cm_id *cm_id;
	struct cma_id *id;
	int e;

	if (!out || !res)
		return cma_fail(EINVAL);
	if (rdma_create_id(NULL, &cm_id, NULL,
			   res->ai_port_space ? (enum rdma_port_space)res->ai_port_space : RDMA_PS_TCP) < 0)
		return -1;
	id = cma_id_of(cm_id);
	pthread_mutex_lock(&g.lock);
	if (res->ai_qp_type)
		id->id.qp_type = (enum ibv_qp_type)res->ai_qp_type;
	cma_unlock();
	if (res->ai_flags & RAI_PASSIVE) {
		if (!res->ai_src_addr || rdma_bind_addr(cm_id, res->ai_src_addr) < 0)
			goto fail;
		if (qp_init_attr) {
			id->ep_qp_attr = malloc(sizeof(*qp_init_attr));
			if (!id->ep_qp_attr) {
				errno = ENOMEM;
				goto fail;
			}
			*id->ep_qp_attr = *qp_init_attr;
			/* The QP type comes from the addrinfo (rdma_create_ep(3)). */
			id->ep_qp_attr->qp_type = id->id.qp_type;
		}
		cm_id->pd = pd;
		*out = cm_id;
		return 0;
	}
	if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) < 0)
		goto fail;
	if (res->ai_route_len && res->ai_route) {
		if (rdma_set_option(cm_id, RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, res->ai_route,
				    res->ai_route_len) < 0 || cma_sync_wait(id) < 0)
			goto fail;
	} else if (rdma_resolve_route(cm_id, 2000) < 0) {
		goto fail;
	}
	if (qp_init_attr) {
		qp_init_attr->qp_type = id->id.qp_type;
		if (rdma_create_qp(cm_id, pd, qp_init_attr) < 0)
			goto fail;
	}
	*out = cm_id;
	return 0;
fail:
	e = errno;
	rdma_destroy_id(cm_id);
	return cma_fail(e);
}

CMA_EXPORT void rdma_destroy_ep(struct rdma_cm_id *cm_id)
{
	if (cma_remote()) {
		cmc_destroy_ep(cm_id);
		return;
	}
	if (!cm_id)
		return;
	if (cm_id->qp)
		rdma_destroy_qp(cm_id);
	if (cm_id->srq)
		rdma_destroy_srq(cm_id);
	rdma_destroy_id(cm_id);
}

/* ---- engine events -> rdma_cm events ----------------------------------------------------------------------- */

/* The conn parameters an event reports, from our side's point of view (the
 * kernel CM swaps the peer's responder resources and initiator depth). */
static void conn_event_params(struct cma_event *e, const struct cmp_event *ev)
{
	struct rdma_conn_param *c = &e->ev.param.conn;

	c->responder_resources = ev->initiator_depth;
	c->initiator_depth = ev->responder_resources;
	c->flow_control = ev->flow_control;
	c->retry_count = ev->retry_count;
	c->rnr_retry_count = ev->rnr_retry_count;
	c->srq = ev->srq;
	c->qp_num = ev->remote_qpn;
}

static void sockaddr_ib_make(struct sockaddr_ib *s, const uint8_t gid[16], uint16_t pkey,
			     uint64_t sid)
{
	memset(s, 0, sizeof(*s));
	s->sib_family = AF_IB;
	s->sib_pkey = htobe16(pkey);
	memcpy(&s->sib_addr, gid, 16);
	s->sib_sid = htobe64(sid);
	s->sib_sid_mask = htobe64(~0ULL);
}

static void reject_unseen(struct cma_port *p, struct cmp_conn *c, uint16_t reason)
{
	cmp_reject(p->eng, c, reason, NULL, 0, NULL, 0, cma_now());
	cmp_conn_destroy(p->eng, c, cma_now());
}

static struct cma_id *pick_listener(struct cma_svc *s, int hdr, const struct sockaddr_storage *ours,
				    const struct cma_netns *ns)
{
	struct cma_id *wild = NULL, *ib = NULL;

	for (unsigned i = 0; s && i < s->nids; i++) {
		struct cma_id *l = s->ids[i];
		const struct sockaddr *la = &l->id.route.addr.src_addr;

		/* the port spaces are the namespace's (kernel: cma_ps_find in
		 * the request's net) */
		if (l->destroying || l->caller.ns != ns)
			continue;
		if (la->sa_family == AF_IB) {
			if (!ib)
				ib = l;
			continue;
		}
		if (hdr < 0)
			continue;
		if (cma_addr_equal(la, (const struct sockaddr *)ours))
			return l;
		if ((cma_addr_any(la) || l->loop_any) && !wild &&
		    (la->sa_family == ours->ss_family ||
		     (la->sa_family == AF_INET6 && ours->ss_family == AF_INET && !l->afonly)))
			wild = l;
	}
	return wild ? wild : ib;
}

void cma_req_in(const struct cmp_event *ev, struct cma_req_in *r)
{
	enum cmp_ps ps;
	uint16_t port = 0;

	r->hdr = -1;
	if (cmp_sid_split(ev->service_id, &ps, &port) == 0)
		r->hdr = cmp_cma_hdr_parse(ev->private_data, ev->private_data_len, port, &r->peer,
					   &r->ours);
	/* The namespace first, as the kernel's cma_ib_id_from_event: the one
	 * holding the header's destination address (no header: ours). */
	struct cma_svc *s = ev->listen_ctx;
	r->ns = cma_netns_of_req(s ? s->port : NULL, ev->path.sgid,
				 r->hdr == 0 ? (const struct sockaddr *)&r->ours : NULL);
	r->l = pick_listener(s, r->hdr, &r->ours, r->ns);
	if (r->l && r->l->id.route.addr.src_addr.sa_family == AF_IB)
		r->hdr = -1; /* an AF_IB listener's ids have AF_IB addresses */
}

struct cma_id *cma_req_id(struct cma_port *p, const struct cma_req_in *r,
			  const struct cmp_path *path, uint64_t sid)
{
	struct cma_id *nid, *l = r->l;
	int idx;

	nid = cma_id_alloc_locked(l->sync ? NULL : l->chan, l->id.context, l->id.ps, l->id.qp_type);
	if (!nid)
		return NULL;
	nid->caller = l->caller; /* the listener's owner owns its connections */
	cma_netns_get(nid->caller.ns); /* and they are in its namespace */
	cma_set_bound_port(nid, p);
	if (r->hdr == 0) {
		memcpy(&nid->id.route.addr.src_storage, &r->ours, sizeof(r->ours));
		memcpy(&nid->id.route.addr.dst_storage, &r->peer, sizeof(r->peer));
	} else {
		sockaddr_ib_make((struct sockaddr_ib *)&nid->id.route.addr.src_storage, path->sgid,
				 path->pkey, sid);
		sockaddr_ib_make((struct sockaddr_ib *)&nid->id.route.addr.dst_storage, path->dgid,
				 path->pkey, sid);
	}
	memcpy(&nid->id.route.addr.addr.ibaddr.sgid, path->sgid, 16);
	memcpy(&nid->id.route.addr.addr.ibaddr.dgid, path->dgid, 16);
	nid->id.route.addr.addr.ibaddr.pkey = htobe16(path->pkey);
	nid->path = *path;
	idx = cma_port_gid_index(p, path->sgid);
	nid->path.sgid_index = (uint8_t)(idx >= 0 ? idx : 0);
	nid->path.port_num = p->port_num;
	nid->path.roce = p->roce;
	nid->path_valid = 1;
	cma_path_to_rec(&nid->path, &nid->path_rec);
	nid->id.route.path_rec = &nid->path_rec;
	nid->id.route.num_paths = 1;
	return nid;
}

struct cma_event *cma_req_event(struct cma_id *nid, const struct cma_req_in *r,
				const struct cmp_event *ev)
{
	struct cma_event *e;
	unsigned off = r->hdr == 0 ? CMP_CMA_HDR_SIZE : 0;

	nid->conn = ev->conn;
	cmp_conn_set_ctx(ev->conn, nid);
	nid->state = ST_CONNECT_REQ;
	e = cma_event_heap(nid, RDMA_CM_EVENT_CONNECT_REQUEST, 0, CMP_CM_DATA_SIZE);
	if (!e) {
		cma_id_free_locked(nid); /* lets go of the request: the engine refuses it */
		return NULL;
	}
	e->owner = r->l;
	e->ev.listen_id = &r->l->id;
	/* The whole private data field after the header, as the kernel
	 * reports it (56 bytes for a REQ, 180 for a SIDR_REQ of an IP id). */
	cma_event_pdata(e, ev->private_data + off,
			ev->private_data_len > off ? ev->private_data_len - off : 0);
	return e;
}

static void on_req(struct cma_port *p, const struct cmp_event *ev)
{
	struct cma_req_in r;
	struct cma_id *nid;
	struct cma_event *e;
	struct cma_dev *d = p->dev;

	cma_req_in(ev, &r);
	if (!r.l) {
		p->no_listener_rejects++;
		reject_unseen(p, ev->conn, CMA_REJ_INVALID_SERVICE_ID);
		return;
	}
	if (r.l->backlog_used >= r.l->backlog) {
		p->backlog_rejects++;
		reject_unseen(p, ev->conn, CMA_REJ_CONSUMER_DEFINED);
		return;
	}
	if (!(nid = cma_req_id(p, &r, &ev->path, ev->service_id))) {
		reject_unseen(p, ev->conn, CMA_REJ_CONSUMER_DEFINED);
		return;
	}
	/* The events the new id will be owed: the outcome, DISCONNECTED and
	 * TIMEWAIT_EXIT (cma_event_mem.c); without them, refuse the REQ. */
	if (cma_event_reserve(nid, 3, 0) < 0) {
		cma_id_free_locked(nid);
		reject_unseen(p, ev->conn, CMA_REJ_CONSUMER_DEFINED);
		return;
	}
	nid->resp_res = clamp_depth(ev->initiator_depth, d->attr.max_qp_rd_atom);
	nid->init_depth = clamp_depth(ev->responder_resources, d->attr.max_qp_init_rd_atom);
	nid->remote_ece = ev->ece;
	if (!(e = cma_req_event(nid, &r, ev)))
		return;
	conn_event_params(e, ev);
	cma_event_queue(e);
}

/* The REP cannot be answered: REJ, the QP to ERROR, CONNECT_ERROR. */
static void rep_failed(struct cma_id *id, int err)
{
	struct cma_port *p = id->port;

	if (cmp_reject(p->eng, id->conn, CMA_REJ_CONSUMER_DEFINED, NULL, 0, NULL, 0, cma_now()) < 0) {
		/* No memory for the REJ either: the engine finishes alone. */
		cmp_conn_destroy(p->eng, id->conn, cma_now());
		id->conn = NULL;
	}
	id->state = ST_ERROR;
	cma_qp_to_err(id, cma_event_new(id, RDMA_CM_EVENT_CONNECT_ERROR, -err));
}

/* The QP went to RTS (or failed to) with g.lock dropped: the RTU and
 * ESTABLISHED now, unless the connection ended meanwhile — a REJ, a
 * timeout or rdma_destroy_id (whose move to ERROR is queued after this
 * job), or an rdma_disconnect that came before the REP (the QP was in
 * ERROR: as the kernel, REJ and CONNECT_ERROR). */
static void rep_moved(struct cma_qpj *j)
{
	struct cma_id *id = j->id;
	struct cma_event *e = j->ev;

	j->ev = NULL;
	if (id->destroying || id->state != ST_CONNECT || !id->conn) {
		cma_event_return(id, e);
		return;
	}
	/* room for the RTU again: other calls on the engine ran meanwhile */
	if (j->err || j->no_qp || id->disconnect_called || cmp_engine_reserve(id->port->eng) < 0) {
		int err = j->err ? j->err : j->no_qp || id->disconnect_called ? EINVAL : errno;

		cma_event_return(id, e);
		rep_failed(id, err);
	} else {
		cmp_rtu(id->port->eng, id->conn, NULL, 0, cma_now()); /* room reserved above */
		id->state = ST_ESTABLISHED;
		cma_event_queue(e);
	}
	cma_port_flush(id->port);
	cma_kick_timers();
}

static void on_rep(struct cma_id *id, const struct cmp_event *ev)
{
	struct cma_event *e;
	struct cma_qpj *j;

	id->remote_ece = ev->ece;
	/* The user owns the QP: it moves it and calls rdma_establish. Else
	 * the library's QP goes to RTS with g.lock dropped (rep_moved). */
	e = cma_event_new_pdata(id, id->id.qp ? RDMA_CM_EVENT_ESTABLISHED : RDMA_CM_EVENT_CONNECT_RESPONSE,
				0, ev->private_data_len);
	if (e) {
		cma_event_pdata(e, ev->private_data, ev->private_data_len);
		conn_event_params(e, ev);
	}
	if (!id->id.qp) {
		id->state = ST_CONNECT_RESPONSE;
		cma_event_queue(e);
		return;
	}
	/* room for the RTU (made again once the QP has moved) */
	if (!e || cmp_engine_reserve(id->port->eng) < 0 || !(j = rts_job(id))) {
		int err = e ? errno : ENOMEM;

		cma_event_return(id, e);
		rep_failed(id, err);
		return;
	}
	j->ev = e;
	j->done = rep_moved;
	cma_qpj_queue(j);
}

static void disconnected(struct cma_id *id, int status)
{
	struct cma_event *e;

	id->state = ST_DISCONNECTED;
	if (id->disc_queued)
		return; /* once per connection */
	id->disc_queued = 1;
	e = cma_event_new(id, RDMA_CM_EVENT_DISCONNECTED, status);
	cma_event_queue(e);
}

void cma_handle_cm_event(struct cma_port *p, const struct cmp_event *ev)
{
	struct cma_id *id = ev->ctx;
	struct cma_event *e;

	if (ev->type == CMP_EV_REQ_RECEIVED) {
		on_req(p, ev);
		return;
	}
	if (ev->type == CMP_EV_SIDR_REQ_RECEIVED) {
		cma_ud_on_sidr_req(p, ev);
		return;
	}
	if (!id || id->destroying)
		return;
	switch (ev->type) {
	case CMP_EV_REP_RECEIVED:
		on_rep(id, ev);
		break;
	case CMP_EV_RTU_RECEIVED:
	case CMP_EV_USER_ESTABLISHED:
		id->state = ST_ESTABLISHED;
		cma_event_queue(cma_event_new(id, RDMA_CM_EVENT_ESTABLISHED, 0));
		break;
	case CMP_EV_REJ_RECEIVED:
		id->state = ST_ERROR;
		e = cma_event_new_pdata(id, RDMA_CM_EVENT_REJECTED, ev->reason, ev->private_data_len);
		if (e)
			cma_event_pdata(e, ev->private_data, ev->private_data_len);
		cma_qp_to_err(id, e); /* the event once the QP is in ERROR */
		break;
	case CMP_EV_REQ_ERROR:
	case CMP_EV_REP_ERROR:
		id->state = ST_ERROR;
		cma_qp_to_err(id, cma_event_new(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT));
		break;
	case CMP_EV_DREQ_RECEIVED:
		/* Both sides said goodbye at once: our DREQ crossed theirs. */
		if (id->disconnect_called)
			cmp_disconnect(p->eng, id->conn, NULL, 0, cma_now());
		disconnected(id, 0);
		break;
	case CMP_EV_DREP_RECEIVED:
		disconnected(id, 0);
		break;
	case CMP_EV_DREQ_ERROR:
		disconnected(id, -ETIMEDOUT);
		break;
	case CMP_EV_TIMEWAIT_EXIT:
		cma_event_queue(cma_event_new(id, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0));
		break;
	case CMP_EV_SIDR_REP_RECEIVED:
	case CMP_EV_SIDR_REQ_ERROR:
		cma_ud_on_sidr_rep(id, ev);
		break;
	default:
		/* MRA_RECEIVED, LAP_RECEIVED (answered by the engine): nothing. */
		break;
	}
}
