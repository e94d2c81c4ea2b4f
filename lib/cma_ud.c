/*
 * cma_ud.c - UD ids: service ID resolution (SIDR) through the CM engine,
 * and their Q_Keys.
 *
 * rdma_connect on a UD id (RDMA_PS_UDP, RDMA_PS_IB, RDMA_PS_IPOIB) sends a
 * SIDR_REQ whose private data starts with the same CMA header as a REQ's;
 * the passive side gets CONNECT_REQUEST (listen_id, a new id, param.ud),
 * rdma_accept answers with a SIDR_REP carrying the QPN and Q_Key and the
 * active side gets ESTABLISHED with param.ud (the address vector of its
 * path, the remote QPN and Q_Key). rdma_reject sends SIDR_REP status 2
 * ("rejected"); a SIDR_REP with any status but 0 is UNREACHABLE with that
 * status, no answer is UNREACHABLE -ETIMEDOUT, as the kernel's
 * cma_sidr_rep_handler maps them.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cma_int.h"

#define SIDR_STATUS_OK 0
#define SIDR_STATUS_REJECT 2

/* The Q_Key opensm gives the IPoIB broadcast group unless configured
 * otherwise; the kernel's rdma_cm reads it from that group's record. */
#define CMA_IPOIB_QKEY 0x00000B1Bu

uint32_t cma_ud_qkey(const struct cma_id *id)
{
	const char *v;

	if (id->qkey)
		return id->qkey;
	if (id->id.ps == RDMA_PS_IPOIB) {
		v = getenv("USCM_IPOIB_QKEY");
		if (v && *v)
			return (uint32_t)strtoul(v, NULL, 0);
		return CMA_IPOIB_QKEY;
	}
	return CMA_UDP_QKEY;
}

/* As the kernel's cma_set_qkey: a Q_Key, once chosen, may not change. */
static int set_qkey(struct cma_id *id, uint32_t qkey)
{
	if (!qkey || (id->qkey && id->qkey != qkey))
		return -1;
	id->qkey = qkey;
	return 0;
}

void cma_ah_from_path(const struct cmp_path *path, uint8_t port_num, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->dlid = path->dlid;
	ah->sl = path->sl;
	ah->src_path_bits = 0; /* LMC 0 */
	ah->static_rate = path->rate;
	ah->port_num = port_num;
	if (path->roce || !path->subnet_local) {
		ah->is_global = 1;
		memcpy(ah->grh.dgid.raw, path->dgid, 16);
		ah->grh.flow_label = path->flow_label;
		ah->grh.sgid_index = path->sgid_index;
		ah->grh.hop_limit = path->hop_limit;
		ah->grh.traffic_class = path->tclass;
	}
}

/* 4.096 us * 2^(response timeout - 8) in ms, as cma_resolve_ib_udp asks
 * ib_cm for (4096 ms with the default exponent 20). */
static cmp_time sidr_timeout_ns(void)
{
	unsigned t = g.settings.cm_response_timeout;
	cmp_time ns = (cmp_time)(1u << (t > 8 ? (t - 8 > 20 ? 20 : t - 8) : 0)) * 1000000u;

	if (g.settings.max_timer_ns && ns > g.settings.max_timer_ns)
		ns = g.settings.max_timer_ns;
	return ns;
}

/* ---- active side --------------------------------------------------------------- */

int cma_ud_connect(struct cma_id *id, const struct rdma_conn_param *param)
{
	struct cmp_sidr_req_param req;
	uint8_t pdata[CMP_SIDR_REQ_PDATA];
	unsigned off = cma_ip_family(id) ? CMP_CMA_HDR_SIZE : 0;
	unsigned ulen = param ? param->private_data_len : 0;

	if (id->state != ST_ROUTE_RESOLVED || !id->path_valid)
		return cma_fail(EINVAL);
	if (off + ulen > sizeof(pdata) || (ulen && !param->private_data))
		return cma_fail(EINVAL);
	/* Its outcome event, with room for the SIDR_REP's private data. */
	if (cma_event_reserve(id, 1, 1) < 0)
		return -1;
	if (cma_port_open(id->port) < 0)
		return -1;
	memset(pdata, 0, sizeof(pdata));
	if (off && cmp_cma_hdr_build(pdata, sizeof(pdata), &id->id.route.addr.src_addr,
				     &id->id.route.addr.dst_addr) < 0)
		return -1;
	if (ulen)
		memcpy(pdata + off, param->private_data, ulen);
	memset(&req, 0, sizeof(req));
	req.path = &id->path;
	req.service_id = cma_service_id(id, &id->id.route.addr.dst_addr);
	req.timeout_ns = sidr_timeout_ns();
	req.max_retries = g.settings.max_cm_retries;
	req.private_data = pdata;
	req.private_data_len = (uint8_t)(off + ulen);
	if (cmp_sidr_req(id->port->eng, &req, id, &id->conn, cma_now()) < 0)
		return -1;
	id->state = ST_CONNECT;
	cma_port_flush(id->port);
	cma_kick();
	return 0;
}

void cma_ud_on_sidr_rep(struct cma_id *id, const struct cmp_event *ev)
{
	struct cma_port *p = id->port;
	struct cma_event *e;

	/* The exchange is over: the engine's record goes (it is IDLE). */
	if (id->conn) {
		cmp_conn_destroy(p->eng, id->conn, cma_now());
		id->conn = NULL;
	}
	if (ev->type == CMP_EV_SIDR_REQ_ERROR) {
		id->state = ST_ERROR;
		cma_event_queue(cma_event_new(id, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT));
		return;
	}
	if (ev->status != SIDR_STATUS_OK) {
		id->state = ST_ERROR;
		e = cma_event_new_pdata(id, RDMA_CM_EVENT_UNREACHABLE, ev->status,
					ev->private_data_len);
	} else if (set_qkey(id, ev->remote_qkey) < 0) {
		/* Our QP already has another Q_Key (the kernel: ADDR_ERROR). */
		id->state = ST_ERROR;
		e = cma_event_new_pdata(id, RDMA_CM_EVENT_ADDR_ERROR, -EINVAL,
					ev->private_data_len);
	} else {
		id->state = ST_ESTABLISHED;
		id->remote_ece = ev->ece;
		e = cma_event_new_pdata(id, RDMA_CM_EVENT_ESTABLISHED, 0, ev->private_data_len);
		if (e) {
			struct rdma_ud_param *ud = &e->ev.param.ud;

			cma_ah_from_path(&id->path, id->id.port_num, &ud->ah_attr);
			ud->qp_num = ev->remote_qpn & 0xFFFFFF;
			ud->qkey = ev->remote_qkey;
		}
	}
	if (!e)
		return;
	cma_event_pdata(e, ev->private_data, ev->private_data_len);
	cma_event_queue(e);
}

/* ---- passive side ----------------------------------------------------------------- */

/* The path back to the sender of a SIDR_REQ: what its MAD's address says
 * (LID, SL, GRH), our port's GID, LID and MTU, the request's P_Key. */
static void path_to_requester(struct cma_port *p, const struct cmp_event *ev, int hdr,
			      const struct sockaddr_storage *peer, struct cmp_path *path)
{
	const struct cmp_addr *s = &ev->src;
	int idx;

	memset(path, 0, sizeof(*path));
	idx = s->grh && s->sgid_index < p->ngids ? s->sgid_index : 0;
	if (p->ngids)
		memcpy(path->sgid, p->gids[idx].raw, 16);
	path->sgid_index = (uint8_t)idx;
	if (s->grh)
		memcpy(path->dgid, s->gid, 16);
	else if (hdr == 0)
		cma_hosts_lookup((const struct sockaddr *)peer, path->dgid);
	path->dlid = s->lid;
	path->slid = p->attr.lid;
	path->sl = s->sl;
	path->flow_label = s->flow_label;
	path->tclass = s->tclass;
	path->hop_limit = s->grh ? (s->hop_limit ? s->hop_limit : 64) : 0;
	path->pkey = ev->path.pkey ? ev->path.pkey : 0xFFFF;
	idx = cma_port_pkey_index(p, path->pkey);
	path->pkey_index = (uint16_t)(idx >= 0 ? idx : 0);
	path->mtu = (uint8_t)(p->attr.active_mtu ? p->attr.active_mtu : IBV_MTU_1024);
	path->port_num = p->port_num;
	path->roce = p->roce;
	path->subnet_local = !p->roce && !s->grh;
	if (p->roce && !path->packet_life_time)
		path->packet_life_time = CMA_IBOE_PACKET_LIFETIME;
}

void cma_ud_on_sidr_req(struct cma_port *p, const struct cmp_event *ev)
{
	struct cma_req_in r;
	struct cma_id *nid;
	struct cmp_path path;
	struct cma_event *e;

	cma_req_in(ev, &r);
	/* No id for it, or the backlog is full: the engine answers SIDR_REP
	 * "rejected" when we let go (as ib_cm does for the kernel CMA). */
	if (!r.l || r.l->backlog_used >= r.l->backlog || r.l->id.qp_type != IBV_QPT_UD) {
		if (!r.l || r.l->id.qp_type != IBV_QPT_UD)
			p->no_listener_rejects++;
		else
			p->backlog_rejects++;
		cmp_conn_destroy(p->eng, ev->conn, cma_now());
		return;
	}
	path_to_requester(p, ev, r.hdr, &r.peer, &path);
	if (!(nid = cma_req_id(p, &r, &path, ev->service_id))) {
		cmp_conn_destroy(p->eng, ev->conn, cma_now());
		return;
	}
	if (!(e = cma_req_event(nid, &r, ev)))
		return;
	/* The kernel leaves the rest of param.ud zero here; the way back to
	 * the requester is handy and costs nothing. */
	cma_ah_from_path(&nid->path, p->port_num, &e->ev.param.ud.ah_attr);
	cma_event_queue(e);
}

static int sidr_answer(struct cma_id *id, uint8_t status, uint32_t qpn, uint32_t qkey,
		       const void *pdata, uint8_t len)
{
	struct cmp_sidr_rep_param rep;

	if (id->state != ST_CONNECT_REQ || !id->conn)
		return cma_fail(EINVAL);
	if (len > CMP_SIDR_REP_PDATA || (len && !pdata))
		return cma_fail(EINVAL);
	memset(&rep, 0, sizeof(rep));
	rep.status = status;
	rep.qpn = qpn;
	rep.qkey = qkey;
	if (status == SIDR_STATUS_OK && id->local_ece_set)
		rep.ece = id->local_ece;
	rep.private_data = pdata;
	rep.private_data_len = len;
	if (cmp_sidr_rep(id->port->eng, id->conn, &rep, cma_now()) < 0)
		return -1;
	cmp_conn_destroy(id->port->eng, id->conn, cma_now());
	id->conn = NULL;
	cma_port_flush(id->port);
	cma_kick();
	return 0;
}

int cma_ud_accept(struct cma_id *id, const struct rdma_conn_param *param)
{
	uint32_t qkey;

	if (!id->id.qp && !param)
		return cma_fail(EINVAL);
	qkey = cma_ud_qkey(id);
	if (sidr_answer(id, SIDR_STATUS_OK, id->id.qp ? id->id.qp->qp_num : param->qp_num, qkey,
			param ? param->private_data : NULL, param ? param->private_data_len : 0) < 0)
		return -1;
	id->qkey = qkey;
	id->state = ST_ESTABLISHED;
	return 0;
}

int cma_ud_reject(struct cma_id *id, const void *pdata, uint8_t len)
{
	if (sidr_answer(id, SIDR_STATUS_REJECT, 0, 0, pdata, len) < 0)
		return -1;
	id->state = ST_ERROR;
	return 0;
}
