/*
 * cmc_calls.c - daemon mode: the rdma_cm calls that are requests to uscmd
 * (addressing, connecting, listening, answering, options, multicast, ECE,
 * counters), and the ones composed of them (rdma_create_ep,
 * rdma_get_request, rdma_resolve_addrinfo) as librdmacm composes them over
 * the kernel's ucma.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"
#include "lib/cmc_int.h"

static int addr_len(const struct sockaddr *a)
{
	switch (a ? a->sa_family : AF_UNSPEC) {
	case AF_INET: return sizeof(struct sockaddr_in);
	case AF_INET6: return sizeof(struct sockaddr_in6);
	case AF_IB: return sizeof(struct sockaddr_ib);
	default: return 0;
	}
}

/* A request for the id whose reply is the id's new snapshot. */
static int call_snap(struct cmc_id *id, uint16_t op, const void *b, size_t n)
{
	struct usp_snap s;
	size_t got = 0;

	if (cmc_id_live(id) < 0)
		return -1;
	if (cmc_call(op, id->handle, b, n, &s, sizeof(s), -1, &got) < 0)
		return -1;
	if (got == sizeof(s))
		cmc_apply_snap(id, &s);
	return 0;
}

static int call_id(struct cmc_id *id, uint16_t op, const void *b, size_t n)
{
	if (cmc_id_live(id) < 0)
		return -1;
	return cmc_call(op, id->handle, b, n, NULL, 0, -1, NULL);
}

int cmc_bind_addr(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	struct usp_addr b;
	int n = addr_len(addr);

	if (!cm_id || !addr)
		return cma_fail(EINVAL);
	if (!n)
		return cma_fail(EAFNOSUPPORT);
	memset(&b, 0, sizeof(b));
	memcpy(&b.addr, addr, (size_t)n);
	return call_snap(cmc_id_of(cm_id), USP_BIND, &b, sizeof(b));
}

int cmc_resolve_addr(struct rdma_cm_id *cm_id, struct sockaddr *src_addr, struct sockaddr *dst_addr,
		     int timeout_ms)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_resolve_addr b;
	int n;

	if (!id || !dst_addr || !(n = addr_len(dst_addr)))
		return cma_fail(EINVAL);
	memset(&b, 0, sizeof(b));
	memcpy(&b.dst, dst_addr, (size_t)n);
	if (src_addr && src_addr->sa_family) {
		int sn = addr_len(src_addr);

		if (!sn)
			return cma_fail(EINVAL);
		memcpy(&b.src, src_addr, (size_t)sn);
		b.has_src = 1;
	}
	b.timeout_ms = timeout_ms;
	if (call_snap(id, USP_RESOLVE_ADDR, &b, sizeof(b)) < 0)
		return -1;
	return cmc_sync_wait(id);
}

int cmc_resolve_route(struct rdma_cm_id *cm_id, int timeout_ms)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_int b = { .v = timeout_ms };

	if (!id)
		return cma_fail(EINVAL);
	if (call_snap(id, USP_RESOLVE_ROUTE, &b, sizeof(b)) < 0)
		return -1;
	return cmc_sync_wait(id);
}

int cmc_set_option(struct rdma_cm_id *cm_id, int level, int optname, void *optval, size_t optlen)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_set_option b;

	if (!id || (optlen && !optval))
		return cma_fail(EINVAL);
	if (optlen > USP_OPT_MAX)
		return cma_fail(EINVAL);
	memset(&b, 0, sizeof(b));
	b.level = level;
	b.optname = optname;
	b.optlen = (uint32_t)optlen;
	if (optlen)
		memcpy(b.optval, optval, optlen);
	/* RDMA_OPTION_IB_PATH resolves the route: its ROUTE_RESOLVED is queued
	 * on the id's channel, also a synchronous id's, and not waited for
	 * here (librdmacm's rdma_set_option is one write to the rdma_cm fd;
	 * its own callers read the event: rdma_create_ep below) */
	if (call_snap(id, USP_SET_OPTION, &b, offsetof(struct usp_set_option, optval) + optlen) < 0)
		return -1;
	/* the QP attributes that came with a connection request were computed
	 * before the option (an ACK timeout, a TOS, a path): the accept asks
	 * for them again, as the kernel's rdma_init_qp_attr reads the id's
	 * options when the QP moves */
	id->req_qp.valid = 0;
	return 0;
}

int cmc_init_qp_attr(struct rdma_cm_id *cm_id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_int b;
	struct usp_qp_attr_rep r;

	if (!id || !qp_attr || !qp_attr_mask)
		return cma_fail(EINVAL);
	if (cmc_id_live(id) < 0)
		return -1;
	memset(&b, 0, sizeof(b));
	b.v = qp_attr->qp_state;
	if (cmc_call(USP_INIT_QP_ATTR, id->handle, &b, sizeof(b), &r, sizeof(r), -1, NULL) < 0)
		return -1;
	*qp_attr = r.attr;
	*qp_attr_mask = r.mask;
	return 0;
}

/* rdma_conn_param and our QP, for USP_CONNECT / USP_ACCEPT. */
static int conn_body(struct cmc_id *id, const struct rdma_conn_param *p, struct usp_conn *b)
{
	memset(b, 0, sizeof(*b));
	if (p) {
		if (p->private_data_len && !p->private_data)
			return cma_fail(EINVAL);
		b->has_param = 1;
		b->resp_res = p->responder_resources;
		b->init_depth = p->initiator_depth;
		b->flow_control = p->flow_control;
		b->retry_count = p->retry_count;
		b->rnr_retry_count = p->rnr_retry_count;
		b->srq = p->srq;
		b->qp_num = p->qp_num;
		b->pdata_len = p->private_data_len;
		if (p->private_data_len)
			memcpy(b->pdata, p->private_data, p->private_data_len);
	} else if (!id->id.qp) {
		return cma_fail(EINVAL);
	}
	if (id->id.qp) {
		b->qp_num = id->id.qp->qp_num;
		b->srq = id->id.qp->srq != NULL;
		b->qp_uc = id->id.qp->qp_type == IBV_QPT_UC;
		if (!p)
			b->has_param = 0;
	}
	return 0;
}

/* A UD id's SIDR_REQ (qpn 0) or SIDR_REP (qpn 1: the QP it answers with,
 * the id's own or param->qp_num): the private data, and the QP number. */
static int ud_body(struct cmc_id *id, const struct rdma_conn_param *p, int qpn,
		   struct usp_conn *b)
{
	memset(b, 0, sizeof(*b));
	if (p) {
		if (p->private_data_len && !p->private_data)
			return cma_fail(EINVAL);
		b->has_param = 1;
		b->pdata_len = p->private_data_len;
		if (b->pdata_len)
			memcpy(b->pdata, p->private_data, b->pdata_len);
		if (qpn)
			b->qp_num = p->qp_num;
	}
	if (qpn && id->id.qp)
		b->qp_num = id->id.qp->qp_num;
	return 0;
}

int cmc_connect(struct rdma_cm_id *cm_id, struct rdma_conn_param *param)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_conn b;

	if (!id)
		return cma_fail(EINVAL);
	if (id->id.qp_type == IBV_QPT_UD) {
		/* a SIDR_REQ: only the private data is the caller's (no QP needed) */
		if (ud_body(id, param, 0, &b) < 0)
			return -1;
	} else if (conn_body(id, param, &b) < 0) {
		return -1;
	}
	if (call_id(id, USP_CONNECT, &b, offsetof(struct usp_conn, pdata) + b.pdata_len) < 0)
		return -1;
	return cmc_sync_wait(id);
}

int cmc_establish(struct rdma_cm_id *cm_id)
{
	struct cmc_id *id = cmc_id_of(cm_id);

	if (!id)
		return cma_fail(EINVAL);
	/* only for ids whose QP the user moves (rdma_establish(3)) */
	if (id->id.qp)
		return cma_fail(EINVAL);
	return call_id(id, USP_ESTABLISH, NULL, 0);
}

int cmc_listen(struct rdma_cm_id *cm_id, int backlog)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_int b = { .v = backlog };

	if (!id)
		return cma_fail(EINVAL);
	return call_snap(id, USP_LISTEN, &b, sizeof(b));
}

int cmc_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out)
{
	struct cmc_id *lid = cmc_id_of(listen), *nid;
	struct rdma_cm_event *ev;

	if (!lid || !out || !lid->sync)
		return cma_fail(EINVAL);
	if (listen->event) {
		cmc_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	if (cmc_get_cm_event(listen->channel, &ev) < 0)
		return -1;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST || ev->status) {
		listen->event = ev;
		return cma_fail(cma_event_errno(ev));
	}
	nid = cmc_id_of(ev->id);
	if (lid->ep_qp_attr) {
		struct ibv_qp_init_attr a = *lid->ep_qp_attr;

		if (rdma_create_qp(&nid->id, listen->pd, &a) < 0) {
			listen->event = ev;
			return -1;
		}
	}
	/* the new id holds its connect request until it is answered */
	nid->id.event = ev;
	*out = &nid->id;
	return 0;
}

static void release_request(struct cmc_id *id)
{
	if (id->sync && id->id.event) {
		cmc_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
}

int cmc_accept(struct rdma_cm_id *cm_id, struct rdma_conn_param *param)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_conn b;

	if (!id)
		return cma_fail(EINVAL);
	if (id->id.qp_type == IBV_QPT_UD) {
		/* a SIDR_REP: no event follows on this side */
		if (ud_body(id, param, 1, &b) < 0)
			return -1;
		if (call_id(id, USP_ACCEPT, &b, offsetof(struct usp_conn, pdata) + b.pdata_len) < 0)
			return -1;
		release_request(id);
		return 0;
	}
	if (conn_body(id, param, &b) < 0)
		return -1;
	if (id->id.qp) {
		/* ready to receive and send before the REP leaves: the three
		 * states' attributes in one round trip (after the accept's
		 * parameters lowered what the REQ asked for) */
		struct usp_qp_attrs qa;

		if (cmc_id_live(id) < 0)
			return -1;
		if (id->req_qp.valid &&
		    (!param || ((param->responder_resources == RDMA_MAX_RESP_RES ||
				 param->responder_resources >= id->req_qp.resp_res) &&
				(param->initiator_depth == RDMA_MAX_INIT_DEPTH ||
				 param->initiator_depth >= id->req_qp.init_depth)))) {
			/* the parameters lower nothing: the request's attributes */
			qa = id->req_qp;
		} else {
			memset(&qa, 0, sizeof(qa));
			if (cmc_call(USP_QP_ATTRS, id->handle, &b,
				     offsetof(struct usp_conn, pdata) + b.pdata_len, &qa, sizeof(qa), -1,
				     NULL) < 0)
				return -1;
		}
		if (cmc_modify_with(id, &qa) < 0) {
			int e = errno;
			struct usp_reject r;

			memset(&r, 0, sizeof(r));
			call_id(id, USP_REJECT, &r, offsetof(struct usp_reject, pdata));
			return cma_fail(e);
		}
	}
	if (call_id(id, USP_ACCEPT, &b, offsetof(struct usp_conn, pdata) + b.pdata_len) < 0)
		return -1;
	return cmc_sync_wait(id);
}

static int reject_common(struct rdma_cm_id *cm_id, const void *pdata, uint8_t len, int ece)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_reject b;

	if (!id || (len && !pdata))
		return cma_fail(EINVAL);
	memset(&b, 0, sizeof(b));
	b.ece = (uint32_t)ece;
	b.pdata_len = len;
	if (len)
		memcpy(b.pdata, pdata, len);
	if (call_id(id, USP_REJECT, &b, offsetof(struct usp_reject, pdata) + len) < 0)
		return -1;
	release_request(id);
	return 0;
}

int cmc_reject(struct rdma_cm_id *cm_id, const void *private_data, uint8_t private_data_len)
{
	return reject_common(cm_id, private_data, private_data_len, 0);
}

int cmc_reject_ece(struct rdma_cm_id *cm_id, const void *private_data, uint8_t private_data_len)
{
	return reject_common(cm_id, private_data, private_data_len, 1);
}

int cmc_notify(struct rdma_cm_id *cm_id, enum ibv_event_type event)
{
	struct usp_int b = { .v = (int32_t)event };

	if (!cm_id)
		return cma_fail(EINVAL);
	return call_id(cmc_id_of(cm_id), USP_NOTIFY, &b, sizeof(b));
}

int cmc_disconnect(struct rdma_cm_id *cm_id)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_int sent;

	if (!id)
		return cma_fail(EINVAL);

	if (cmc_id_live(id) < 0)
		return -1;
	/* the QP stops first, as in-process mode and librdmacm */
	cmc_qp_to_err(id);
	memset(&sent, 0, sizeof(sent));
	if (cmc_call(USP_DISCONNECT, id->handle, NULL, 0, &sent, sizeof(sent), -1, NULL) < 0)
		return -1;
	/* a synchronous id waits for its DISCONNECTED event */
	if (id->sync && sent.v)
		return cmc_sync_wait(id);
	return 0;
}

int cmc_set_local_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece)
{
	struct usp_ece b;

	if (!cm_id || !ece)
		return cma_fail(EINVAL);
	memset(&b, 0, sizeof(b));
	b.ece = *ece;
	return call_id(cmc_id_of(cm_id), USP_SET_ECE, &b, sizeof(b));
}

int cmc_get_remote_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_ece r;

	if (!id || !ece)
		return cma_fail(EINVAL);
	if (cmc_id_live(id) < 0)
		return -1;
	if (cmc_call(USP_GET_ECE, id->handle, NULL, 0, &r, sizeof(r), -1, NULL) < 0)
		return -1;
	*ece = r.ece;
	return 0;
}

/* ---- endpoints ------------------------------------------------------------------------ */

int cmc_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res, struct ibv_pd *pd,
		  struct ibv_qp_init_attr *qp_init_attr)
{
	enum rdma_port_space ps;
	struct rdma_cm_id *cm_id;
	struct cmc_id *id;
	enum ibv_qp_type qpt;
	int e;

	if (!out || !res)
		return cma_fail(EINVAL);
	ps = res->ai_port_space ? (enum rdma_port_space)res->ai_port_space : RDMA_PS_TCP;
	qpt = res->ai_qp_type ? (enum ibv_qp_type)res->ai_qp_type
	      : ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;
	if (cmc_create_id_qpt(NULL, &cm_id, NULL, ps, qpt) < 0)
		return -1;
	id = cmc_id_of(cm_id);
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
				    res->ai_route_len) < 0 || cmc_sync_wait(cmc_id_of(cm_id)) < 0)
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

void cmc_destroy_ep(struct rdma_cm_id *cm_id)
{
	if (!cm_id)
		return;
	if (cm_id->qp)
		rdma_destroy_qp(cm_id);
	if (cm_id->srq)
		rdma_destroy_srq(cm_id);
	rdma_destroy_id(cm_id);
}

/* ---- multicast ------------------------------------------------------------------------- */

/* A RoCE join's IP group, as the in-process core holds it (cma_mcast.c),
 * held here, in this process, not in uscmd: the socket must be of the
 * client's network namespace, where the port's netdev is, and uscmd
 * cannot make one there (setns needs CAP_SYS_ADMIN, which its sandbox
 * does not have). The process's death closes it, as it ends the kernel's
 * membership with the process's rdma_cm file; uscmd holds nothing for it.
 * The netdev is the one the device reports for the id's source GID in our
 * namespace. 0 with *fd set (-1: nothing to join), or -1 with errno. */
static int mc_ip_join(const struct cmc_id *id, const struct sockaddr *a, uint32_t flags, int *fd)
{
	const union ibv_gid *sgid = &id->id.route.addr.addr.ibaddr.sgid;
	struct ibv_port_attr pa;
	struct ibv_gid_entry *t;
	ssize_t n;
	int ifindex = 0;
	unsigned type = 0;

	*fd = -1;
	if (!id->id.verbs || a->sa_family != AF_INET ||
	    ibv_query_port(id->id.verbs, id->id.port_num, &pa) != 0 ||
	    pa.link_layer != IBV_LINK_LAYER_ETHERNET || pa.gid_tbl_len <= 0)
		return 0;
	t = calloc((size_t)pa.gid_tbl_len, sizeof(*t));
	if (!t)
		return cma_fail(ENOMEM);
	n = ibv_query_gid_table(id->id.verbs, t, (size_t)pa.gid_tbl_len, 0);
	for (ssize_t i = 0; i < n; i++)
		if (t[i].port_num == id->id.port_num && !memcmp(t[i].gid.raw, sgid->raw, 16)) {
			/* RoCE v2 first, as the core picks the source GID */
			if (!ifindex || t[i].gid_type == IBV_GID_TYPE_ROCE_V2) {
				ifindex = (int)t[i].ndev_ifindex;
				type = t[i].gid_type;
			}
		}
	free(t);
	if (!ifindex || !cma_mc_ip_wanted(a, type, flags))
		return 0;
	*fd = cma_mc_ip_hold(a, ifindex);
	return *fd < 0 ? -1 : 0;
}

int cmc_join_multicast_ex(struct rdma_cm_id *cm_id, struct rdma_cm_join_mc_attr_ex *attr,
			  void *context)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct usp_join b;
	struct cmc_mc *m;
	int n;

	if (!id || !attr)
		return cma_fail(EINVAL);
	if (attr->comp_mask & ~(uint32_t)(RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS))
		return cma_fail(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !attr->addr ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) || !(n = addr_len(attr->addr)))
		return cma_fail(EINVAL);
	m = calloc(1, sizeof(*m));
	if (!m)
		return cma_fail(ENOMEM);
	memcpy(&m->addr, attr->addr, (size_t)n);
	m->context = context;
	m->flags = attr->join_flags;
	/* first, as the kernel's join: its failure is the join's */
	if (mc_ip_join(id, attr->addr, attr->join_flags, &m->ipfd) < 0) {
		int e = errno;

		free(m);
		return cma_fail(e);
	}
	memset(&b, 0, sizeof(b));
	memcpy(&b.addr, attr->addr, (size_t)n);
	b.flags = attr->join_flags;
	b.cookie = (uint64_t)(uintptr_t)m;
	pthread_mutex_lock(&cmc.lock);
	m->next = id->mcs;
	id->mcs = m;
	pthread_mutex_unlock(&cmc.lock);
	if (call_id(id, USP_JOIN_MC, &b, sizeof(b)) < 0) {
		int e = errno;

		pthread_mutex_lock(&cmc.lock);
		id->mcs = m->next;
		pthread_mutex_unlock(&cmc.lock);
		cmc_mc_free(m);
		return cma_fail(e);
	}
	return cmc_sync_wait(id);
}

int cmc_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	struct rdma_cm_join_mc_attr_ex a;

	memset(&a, 0, sizeof(a));
	a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	a.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
	a.addr = addr;
	return cmc_join_multicast_ex(id, &a, context);
}

int cmc_leave_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct cmc_mc **pp, *m;
	struct usp_addr b;
	int n;

	if (!id || !addr || !(n = addr_len(addr)))
		return cma_fail(EINVAL);
	pthread_mutex_lock(&cmc.lock);
	for (pp = &id->mcs; (m = *pp); pp = &m->next)
		if (!memcmp(&m->addr, addr, (size_t)n))
			break;
	if (!m) {
		pthread_mutex_unlock(&cmc.lock);
		return cma_fail(EADDRNOTAVAIL);
	}
	*pp = m->next;
	pthread_mutex_unlock(&cmc.lock);
	if (m->attached && id->id.qp)
		ibv_detach_mcast(id->id.qp, &m->mgid, m->mlid);
	memset(&b, 0, sizeof(b));
	memcpy(&b.addr, addr, (size_t)n);
	cmc_mc_free(m);
	return call_id(id, USP_LEAVE_MC, &b, sizeof(b));
}

/* ---- events the user posts -------------------------------------------------------------- */

int cmc_write_cm_event(struct rdma_cm_id *cm_id, enum rdma_cm_event_type event, int status,
		       uint64_t arg)
{
	struct usp_post_event b;

	if (!cm_id || event != RDMA_CM_EVENT_USER)
		return cma_fail(EINVAL);
	memset(&b, 0, sizeof(b));
	b.event = event;
	b.status = status;
	b.arg = arg;
	return call_id(cmc_id_of(cm_id), USP_POST_EVENT, &b, sizeof(b));
}

/* ---- rdma_resolve_addrinfo: rdma_getaddrinfo on a thread, the answer as an
 * event the daemon queues on the id's channel (USP_POST_EVENT) ---------------------------- */

struct ai_req {
	struct cmc_id *id;
	unsigned gen;
	uint32_t handle;
	char *node, *service;
	struct rdma_addrinfo hints;
	int has_hints;
};

static void *ai_thread(void *arg)
{
	struct ai_req *r = arg;
	struct rdma_addrinfo *res = NULL;
	struct usp_post_event b;
	int rc, e = 0;
	struct cmc_id *id;

	rc = rdma_getaddrinfo(r->node, r->service, r->has_hints ? &r->hints : NULL, &res);
	if (rc)
		e = errno ? errno : EIO;
	pthread_mutex_lock(&cmc.lock);
	id = cmc_id_find(r->handle);
	if (id == r->id && id->gen == r->gen) {
		id->ai_busy = 0;
		if (!rc) {
			rdma_freeaddrinfo(id->ai);
			id->ai = res;
			res = NULL;
		}
	} else {
		id = NULL;
	}
	pthread_mutex_unlock(&cmc.lock);
	if (id) {
		memset(&b, 0, sizeof(b));
		b.event = rc ? RDMA_CM_EVENT_ADDRINFO_ERROR : RDMA_CM_EVENT_ADDRINFO_RESOLVED;
		b.status = rc ? -e : 0;
		cmc_call(USP_POST_EVENT, r->handle, &b, sizeof(b), NULL, 0, -1, NULL);
	}
	rdma_freeaddrinfo(res);
	free(r->node);
	free(r->service);
	free(r);
	return NULL;
}

#define AI_KNOWN_FLAGS (RAI_PASSIVE | RAI_NUMERICHOST | RAI_NOROUTE | RAI_FAMILY)

int cmc_resolve_addrinfo(struct rdma_cm_id *cm_id, const char *node, const char *service,
			 const struct rdma_addrinfo *hints)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct ai_req *r;
	sigset_t all, old;
	pthread_t t;
	int rc;

	if (!id || (!node && !service))
		return cma_fail(EINVAL);
	if (hints && (hints->ai_flags & ~AI_KNOWN_FLAGS))
		return cma_fail(EOPNOTSUPP);
	if (hints && hints->ai_family == AF_IB)
		return cma_fail(EAFNOSUPPORT);
	if (cmc_id_live(id) < 0)
		return -1;
	r = calloc(1, sizeof(*r));
	if (!r || (node && !(r->node = strdup(node))) || (service && !(r->service = strdup(service)))) {
		if (r) {
			free(r->node);
			free(r);
		}
		return cma_fail(ENOMEM);
	}
	if (hints) {
		/* the fields rdma_getaddrinfo reads of hints; no pointers kept */
		r->hints.ai_flags = hints->ai_flags;
		r->hints.ai_family = hints->ai_family;
		r->hints.ai_qp_type = hints->ai_qp_type;
		r->hints.ai_port_space = hints->ai_port_space;
		r->has_hints = 1;
	}
	r->id = id;
	r->gen = id->gen;
	r->handle = id->handle;
	pthread_mutex_lock(&cmc.lock);
	if (id->ai_busy) {
		pthread_mutex_unlock(&cmc.lock);
		free(r->node);
		free(r->service);
		free(r);
		return cma_fail(EBUSY);
	}
	id->ai_busy = 1;
	pthread_mutex_unlock(&cmc.lock);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, NULL, ai_thread, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_mutex_lock(&cmc.lock);
		id->ai_busy = 0;
		pthread_mutex_unlock(&cmc.lock);
		free(r->node);
		free(r->service);
		free(r);
		return cma_fail(rc);
	}
	pthread_detach(t);
	return cmc_sync_wait(id);
}

int cmc_query_addrinfo(struct rdma_cm_id *cm_id, struct rdma_addrinfo **info)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct rdma_addrinfo *c = NULL;
	int rc;

	if (!id || !info)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&cmc.lock);
	if (!id->ai) {
		pthread_mutex_unlock(&cmc.lock);
		return cma_fail(ENOENT);
	}
	/* a deep copy, as in-process mode: re-resolved from the numeric
	 * answer would differ; copy field by field instead */
	rc = cma_addrinfo_copy(id->ai, &c);
	pthread_mutex_unlock(&cmc.lock);
	if (rc < 0)
		return -1;
	*info = c;
	return 0;
}

/* ---- counters -------------------------------------------------------------------------------- */

int cmc_uscm_get_stats(struct uscm_stats *out, size_t size)
{
	struct uscm_stats s;

	if (!out)
		return cma_fail(EINVAL);
	memset(&s, 0, sizeof(s));
	if (cmc_call(USP_STATS, 0, NULL, 0, &s, sizeof(s), -1, NULL) < 0)
		return -1;
	memset(out, 0, size);
	memcpy(out, &s, size < sizeof(s) ? size : sizeof(s));
	return 0;
}
