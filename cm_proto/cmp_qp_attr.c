/*
 * cmp_qp_attr.c - QP attributes for INIT, RTR and RTS derived from the REQ,
 * REP and path, with the masks ibv_modify_qp() needs: what the kernel's
 * ib_cm_init_qp_attr() computes, so that a uscm QP and a kernel one agree.
 */
#include <errno.h>
#include <string.h>

#include "cm_proto/cmp_engine_int.h"

static void ah_from_path(struct ibv_ah_attr *ah, const struct cmp_path *p)
{
	memset(ah, 0, sizeof(*ah));
	ah->dlid = p->dlid;
	ah->sl = p->sl;
	ah->static_rate = p->rate; /* IB rate codes are enum ibv_rate values */
	ah->src_path_bits = 0;
	ah->port_num = p->port_num;
	if (!p->subnet_local || p->roce) {
		ah->is_global = 1;
		memcpy(ah->grh.dgid.raw, p->dgid, 16);
		ah->grh.flow_label = p->flow_label;
		ah->grh.sgid_index = p->sgid_index;
		ah->grh.hop_limit = p->hop_limit ? p->hop_limit : (p->roce ? 64 : 0xFF);
		ah->grh.traffic_class = p->tclass;
	}
}

int cmp_conn_qp_attr(const struct cmp_conn *c, enum ibv_qp_state target,
		     struct ibv_qp_attr *attr, int *mask)
{
	if (!c || !attr || !mask) {
		errno = EINVAL;
		return -1;
	}
	memset(attr, 0, sizeof(*attr));
	switch (target) {
	case IBV_QPS_INIT:
		/* Any state with a path: the QP may be created before the REP. */
		if (c->state == CMP_IDLE && !c->active && !c->remote_id)
			break;
		attr->qp_state = IBV_QPS_INIT;
		attr->pkey_index = c->path.pkey_index;
		attr->port_num = c->path.port_num;
		attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		if (c->responder_resources)
			attr->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
		*mask = IBV_QP_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
		return 0;
	case IBV_QPS_RTR:
		/* Needs the peer's QPN and PSN: after the REQ (passive) or REP. */
		switch (c->state) {
		case CMP_REQ_RCVD: case CMP_MRA_REQ_SENT: case CMP_REP_RCVD:
		case CMP_MRA_REP_SENT: case CMP_REP_SENT: case CMP_MRA_REP_RCVD:
		case CMP_ESTABLISHED:
			break;
		default:
			errno = EINVAL;
			return -1;
		}
		attr->qp_state = IBV_QPS_RTR;
		ah_from_path(&attr->ah_attr, &c->path);
		attr->path_mtu = (enum ibv_mtu)c->path.mtu;
		attr->dest_qp_num = c->remote_qpn;
		attr->rq_psn = c->rq_psn;
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		/* cm_init_qp_rtr_attr: the responder of RC and XRC target QPs */
		if (c->qp_type == CMP_QPT_RC || c->qp_type == CMP_QPT_XRC_TGT) {
			attr->max_dest_rd_atomic = c->responder_resources;
			attr->min_rnr_timer = 0;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		}
		if (c->has_alt) {
			ah_from_path(&attr->alt_ah_attr, &c->alt);
			attr->alt_pkey_index = c->alt.pkey_index;
			attr->alt_port_num = c->alt.port_num;
			attr->alt_timeout = cmp_ack_timeout(0, c->alt.packet_life_time);
			*mask |= IBV_QP_ALT_PATH;
		}
		return 0;
	case IBV_QPS_RTS:
		/* The passive side moves its QP to RTS before it sends the REP, as
		 * rdma_cm's accept does: the send PSN is the REQ's, known by then. */
		switch (c->state) {
		case CMP_REQ_RCVD: case CMP_MRA_REQ_SENT:
		case CMP_REP_RCVD: case CMP_MRA_REP_SENT: case CMP_REP_SENT:
		case CMP_MRA_REP_RCVD: case CMP_ESTABLISHED:
			break;
		default:
			errno = EINVAL;
			return -1;
		}
		attr->qp_state = IBV_QPS_RTS;
		attr->sq_psn = c->sq_psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		/* cm_init_qp_rts_attr: the requester of RC and XRC initiator QPs
		 * gets retries and read depth; those and an XRC target (which
		 * only answers) get the local ACK timeout. UC gets neither. */
		if (c->qp_type == CMP_QPT_RC || c->qp_type == CMP_QPT_XRC_INI) {
			attr->retry_cnt = c->retry_count;
			attr->rnr_retry = c->rnr_retry_count;
			attr->max_rd_atomic = c->initiator_depth;
			*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		}
		if (c->qp_type != CMP_QPT_UC) {
			attr->timeout = c->av_timeout;
			*mask |= IBV_QP_TIMEOUT;
		}
		/* The alternate path loaded at RTR is only used once armed: the
		 * kernel's cm_init_qp_rts_attr asks for REARM whenever there is one. */
		if (c->has_alt) {
			attr->path_mig_state = IBV_MIG_REARM;
			*mask |= IBV_QP_PATH_MIG_STATE;
		}
		return 0;
	default:
		break;
	}
	errno = EINVAL;
	return -1;
}
