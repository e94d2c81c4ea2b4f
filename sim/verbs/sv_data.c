/*
 * sv_data.c - the data path: post send/recv, the per-context progress
 * thread (receive on every QP socket, timers), UD datagrams, and the RC/UC
 * transport: segmentation by path MTU, PSN sequencing, ACK/NAK (AETH),
 * go-back-N retransmission after the local ACK timeout (4.096 us *
 * 2^timeout, retried retry_cnt times, then IBV_WC_RETRY_EXC_ERR), RNR NAK
 * with the responder's min_rnr_timer and the requester's rnr_retry (7 =
 * infinite), RDMA WRITE / READ, atomics. On the wire each datagram is a
 * RoCEv2 UDP payload (BTH, extension headers, payload, pad, ICRC).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>
#include <endian.h>

#include "sim/verbs/sv.h"

uint64_t sv_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void sv_wake(struct sv_ctx *c, uint64_t when)
{
	uint64_t one = 1;

	if (c->thr_started && pthread_equal(pthread_self(), c->thr))
		return;   /* the progress thread recomputes its deadline anyway */
	if (c->sleep_until == 0 || when < c->sleep_until) {
		c->sleep_until = when;
		if (write(c->wakefd, &one, sizeof(one)) != sizeof(one)) {
			/* eventfd counter saturated: the thread is awake anyway */
		}
	}
}

static uint32_t mtu_bytes(enum ibv_mtu m)
{
	return 128u << m;
}

static uint64_t ack_timeout_ns(const struct sv_qp *q)
{
	uint64_t ns;

	if (!q->timeout)
		return 0;   /* 0: infinite, no retransmission timer */
	ns = 4096ull << q->timeout;
	return ns < 1000000ull ? 1000000ull : ns;   /* loopback scheduling jitter */
}

static uint64_t rnr_ns(unsigned t)
{
	static const uint32_t us[32] = {
		655360, 10,    20,    30,    40,    60,     80,     120,    160,    240,   320,
		480,    640,   960,   1280,  1920,  2560,   3840,   5120,   7680,   10240, 15360,
		20480,  30720, 40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
	};
	return (uint64_t)us[t & 31] * 1000ull;
}

/* ---- wire helpers ------------------------------------------------------------------ */

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static int av_node(struct sv_ctx *c, const struct ibv_ah_attr *av)
{
	if (c->link == SIMF_LINK_ROCE || (av->is_global && !av->dlid))
		return simf_node_by_gid(c->f, av->grh.dgid.raw);
	return simf_route_lid(c->f, c->node, av->dlid, NULL);
}

static uint16_t qp_pkey(const struct sv_qp *q)
{
	return sv_pkey(q->ctx, q->pkey_index);
}

/* Where a packet of q to av goes: av_node, or -1 when a switch on the way
 * enforces partitions and its port lacks the QP's P_Key (lost, as there). */
static int av_node_tx(const struct sv_qp *q, const struct ibv_ah_attr *av)
{
	int n = av_node(q->ctx, av);

	if (n >= 0 && q->ctx->link != SIMF_LINK_ROCE && av->dlid &&
	    !simf_pkey_route_ok(q->ctx->f, q->ctx->node, av->dlid, qp_pkey(q)))
		return -1;
	return n;
}

static int pkey_ok(uint16_t a, uint16_t b)
{
	return simf_pkey_match(a, b);
}

/* Builds the BTH; returns its length. */
static size_t bth(uint8_t *p, const struct sv_qp *q, uint8_t opcode, uint32_t dqpn, uint32_t psn,
		  int ackreq, int se, size_t payload, const struct ibv_ah_attr *av)
{
	struct simf_bth b;
	int grh = q->ctx->link == SIMF_LINK_ROCE || (av && av->is_global);

	memset(&b, 0, sizeof(b));
	b.opcode = opcode;
	b.se = (uint8_t)!!se;
	b.pad = (uint8_t)((4 - payload % 4) % 4);
	b.tver = 0;
	b.resv8a = SIMF_RESV8A(av ? av->sl : 0, grh);
	if (av && q->ctx->link == SIMF_LINK_ROCE)
		b.resv8a = SIMF_RESV8A_SET_SGID(b.resv8a, av->grh.sgid_index);
	b.pkey = qp_pkey(q);
	b.dest_qp = dqpn & 0xFFFFFF;
	b.ack_req = (uint8_t)!!ackreq;
	b.psn = psn & 0xFFFFFF;
	simf_bth_put(p, &b);
	if (av && q->ctx->link == SIMF_LINK_IB && av->dlid && av->dlid < 0xC000) {
		/* LMC > 0: the path's SLID is the port's base LID | the
		 * AH's source path bits; the DLID may be any of the
		 * destination's LIDs (simf_bth_set_lids carries both) */
		const struct simf_node *me = &q->ctx->f->st->nodes[q->ctx->node];

		simf_bth_set_lids(q->ctx->f, p, q->ctx->node,
				  (uint16_t)(me->lid + (av->src_path_bits & ((1u << (me->lmc & 7)) - 1))),
				  simf_node_by_lid(q->ctx->f, av->dlid), av->dlid);
	}
	return SIMF_BTH_LEN;
}

/* Pads, reserves the ICRC and sends; len is up to the end of the payload. */
static void xmit(struct sv_qp *q, int node, uint32_t dqpn, uint8_t *p, size_t len, size_t payload)
{
	size_t pad = (4 - payload % 4) % 4;

	if (node < 0)
		return;   /* no such destination: lost on the wire */
	memset(p + len, 0, pad + SIMF_ICRC_LEN);
	len += pad + SIMF_ICRC_LEN;
	simf_send_from(q->ctx->f, q->fd, simf_qp_port(q->qp.qp_num), q->ctx->node, node, simf_qp_port(dqpn),
		       p, len);
}

/* ---- memory ------------------------------------------------------------------------- */

/* The local address of [va, va+len) under key, or NULL. */
static uint8_t *mr_ptr(struct sv_ctx *c, const struct ibv_pd *pd, uint32_t key, uint64_t va,
		       uint64_t len, unsigned need)
{
	struct sv_mr *m = sv_mr_by_key(c, key);

	if (!m || &m->pd->pd != pd || (m->access & need) != need)
		return NULL;
	if (va < m->iova || len > m->mr.length || va - m->iova > m->mr.length - len)
		return NULL;
	return (uint8_t *)m->mr.addr + (va - m->iova);
}

/* The PD the responder's memory accesses check keys against: an XRC
 * target has none of its own and uses the PD of the XRC SRQ the request
 * names (q->rx_srq, set while the request is handled). */
static const struct ibv_pd *data_pd(const struct sv_qp *q)
{
	if (q->qp.qp_type == IBV_QPT_XRC_RECV)
		return q->rx_srq ? &q->rx_srq->pd->pd : NULL;   /* NULL: no key matches */
	return q->qp.pd;
}

/* A responder's opcode: an XRC target answers with the XRC transport bits. */
static uint8_t resp_op(const struct sv_qp *q, uint8_t op)
{
	return q->qp.qp_type == IBV_QPT_XRC_RECV ? (uint8_t)(op | OP_XRC) : op;
}

/* Copies [off, off+n) of a send WQE's data to dst. -1: protection error. */
static int gather(struct sv_qp *q, const struct sv_swqe *w, uint32_t off, uint8_t *dst, uint32_t n)
{
	int i;

	if (w->inl) {
		memcpy(dst, w->inl + off, n);
		return 0;
	}
	for (i = 0; i < w->nsge && n; i++) {
		const struct ibv_sge *s = &w->sge[i];
		uint32_t take;
		uint8_t *src;

		if (off >= s->length) {
			off -= s->length;
			continue;
		}
		take = s->length - off < n ? s->length - off : n;
		src = mr_ptr(q->ctx, q->qp.pd, s->lkey, s->addr + off, take, 0);
		if (!src)
			return -1;
		memcpy(dst, src, take);
		dst += take;
		n -= take;
		off = 0;
	}
	return n ? -1 : 0;
}

/* Scatters n bytes at offset off into a receive SGE list. -1 protection, -2 too long. */
static int scatter(struct sv_qp *q, const struct ibv_sge *sge, int nsge, uint32_t off,
		   const uint8_t *src, uint32_t n)
{
	int i;

	for (i = 0; i < nsge && n; i++) {
		const struct ibv_sge *s = &sge[i];
		uint32_t take;
		uint8_t *dst;

		if (off >= s->length) {
			off -= s->length;
			continue;
		}
		take = s->length - off < n ? s->length - off : n;
		dst = mr_ptr(q->ctx, data_pd(q), s->lkey, s->addr + off, take, IBV_ACCESS_LOCAL_WRITE);
		if (!dst)
			return -1;
		memcpy(dst, src, take);
		src += take;
		n -= take;
		off = 0;
	}
	return n ? -2 : 0;
}

static uint32_t sge_total(const struct ibv_sge *s, int n)
{
	uint64_t t = 0;
	int i;

	for (i = 0; i < n; i++)
		t += s[i].length;
	return t > 0x80000000ull ? 0x80000001u : (uint32_t)t;
}

/* ---- completions ---------------------------------------------------------------------- */

static enum ibv_wc_opcode wc_opcode(int wr_opcode)
{
	switch (wr_opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	default:
		return IBV_WC_SEND;
	}
}

/* Completes the WQE at the head of the send queue. */
void sv_qp_complete_send(struct sv_qp *q, struct sv_swqe *w, int status)
{
	if (status != IBV_WC_SUCCESS || q->sq_sig_all || (w->flags & IBV_SEND_SIGNALED)) {
		struct ibv_wc wc;

		memset(&wc, 0, sizeof(wc));
		wc.wr_id = w->wr_id;
		wc.status = (enum ibv_wc_status)status;
		wc.opcode = wc_opcode(w->opcode);
		wc.qp_num = q->qp.qp_num;
		if (w->opcode == IBV_WR_RDMA_READ)
			wc.byte_len = w->len;
		else if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
			wc.byte_len = 8;
		sv_cq_push((struct sv_cq *)q->qp.send_cq, &wc, 0);
	}
	free(w->inl);
	w->inl = NULL;
	q->sq_head = (q->sq_head + 1) % q->sq_cap;
	q->sq_count--;
}

static void fail_head(struct sv_qp *q, int status)
{
	if (q->sq_count)
		sv_qp_complete_send(q, &q->sq[q->sq_head], status);
	if (q->tx_idx)
		q->tx_idx--;
	sv_qp_to_error(q);
}

static void async_qp(struct sv_qp *q, enum ibv_event_type t)
{
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event_type = t;
	ev.element.qp = &q->qp;
	sv_async_push(q->ctx, &ev);
}

/* ---- RC/UC requester -------------------------------------------------------------------- */

static struct sv_swqe *wqe_at(struct sv_qp *q, unsigned i)
{
	return &q->sq[(q->sq_head + i) % q->sq_cap];
}

static int is_rd_atomic(const struct sv_swqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

static void arm_timer(struct sv_qp *q)
{
	uint64_t to = ack_timeout_ns(q);

	if (!to) {
		q->timer = 0;
		return;
	}
	q->timer = sv_now() + to;
	sv_wake(q->ctx, q->timer);
}

/* Sends packet `pkt` of WQE w (the read request / atomic: the whole op from pkt on). */
static int send_packet(struct sv_qp *q, struct sv_swqe *w, uint32_t pkt)
{
	static __thread uint8_t buf[SV_PKT_MAX + 64];
	uint32_t mtu = mtu_bytes(q->mtu), psn = psn_add(w->first_psn, pkt), off = pkt * mtu;
	int uc = q->qp.qp_type == IBV_QPT_UC, node = av_node_tx(q, &q->av);
	int xrc = q->qp.qp_type == IBV_QPT_XRC_SEND;
	int first = pkt == 0, last = pkt + 1 == w->npkts, ackreq;
	uint32_t n = 0;
	size_t len;
	uint8_t op;

	if (w->opcode == IBV_WR_RDMA_READ) {
		len = bth(buf, q, xrc ? OP_READ_REQ | OP_XRC : OP_READ_REQ, q->dest_qpn, psn, 1, 0, 0,
			  &q->av);
		if (xrc) {
			put32(buf + len, w->remote_srqn & 0xFFFFFF);
			len += XRCETH_LEN;
		}
		put64(buf + len, w->raddr + off);
		put32(buf + len + 8, w->rkey);
		put32(buf + len + 12, w->len - off);
		len += RETH_LEN;
		xmit(q, node, q->dest_qpn, buf, len, 0);
		return 0;
	}
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		op = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? OP_CMP_SWAP : OP_FETCH_ADD;
		len = bth(buf, q, xrc ? op | OP_XRC : op, q->dest_qpn, psn, 1, 0, 0, &q->av);
		if (xrc) {
			put32(buf + len, w->remote_srqn & 0xFFFFFF);
			len += XRCETH_LEN;
		}
		put64(buf + len, w->raddr);
		put32(buf + len + 8, w->rkey);
		put64(buf + len + 12, w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->swap : w->compare_add);
		put64(buf + len + 20, w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? w->compare_add : 0);
		len += ATOMIC_ETH_LEN;
		xmit(q, node, q->dest_qpn, buf, len, 0);
		return 0;
	}
	if (w->len > off)
		n = w->len - off < mtu ? w->len - off : mtu;
	int imm = (w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM) && last;
	int wr = w->opcode == IBV_WR_RDMA_WRITE || w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;

	if (wr)
		op = first && last ? (imm ? OP_WRITE_ONLY_IMM : OP_WRITE_ONLY)
		     : first ? OP_WRITE_FIRST : last ? (imm ? OP_WRITE_LAST_IMM : OP_WRITE_LAST)
		     : OP_WRITE_MIDDLE;
	else
		op = first && last ? (imm ? OP_SEND_ONLY_IMM : OP_SEND_ONLY)
		     : first ? OP_SEND_FIRST : last ? (imm ? OP_SEND_LAST_IMM : OP_SEND_LAST)
		     : OP_SEND_MIDDLE;
	if (uc)
		op |= OP_UC;
	if (xrc)
		op |= OP_XRC;
	ackreq = !uc && (last || (pkt + 1) % SV_ACK_EVERY == 0);
	len = bth(buf, q, op, q->dest_qpn, psn, ackreq,
		  last && (w->flags & IBV_SEND_SOLICITED), n, &q->av);
	if (xrc) {
		/* every XRC request packet names the target's SRQ */
		put32(buf + len, w->remote_srqn & 0xFFFFFF);
		len += XRCETH_LEN;
	}
	if (wr && first) {
		put64(buf + len, w->raddr);
		put32(buf + len + 8, w->rkey);
		put32(buf + len + 12, w->len);
		len += RETH_LEN;
	}
	if (imm) {
		memcpy(buf + len, &w->imm, 4);   /* already network order */
		len += IMM_LEN;
	}
	if (n && gather(q, w, off, buf + len, n))
		return -1;
	len += n;
	xmit(q, node, q->dest_qpn, buf, len, n);
	return 0;
}

void sv_rc_pump(struct sv_qp *q)
{
	int uc = q->qp.qp_type == IBV_QPT_UC, sent = 0;

	if (q->state != IBV_QPS_RTS)
		return;
	if (q->rnr_until) {
		if (sv_now() < q->rnr_until)
			return;
		q->rnr_until = 0;
	}
	while (q->tx_idx < q->sq_count && q->state == IBV_QPS_RTS) {
		struct sv_swqe *w = wqe_at(q, q->tx_idx);
		uint32_t psn = psn_add(w->first_psn, q->tx_pkt);

		if (!uc && psn_diff(psn, q->una) >= SV_RC_WINDOW)
			break;
		if (q->tx_pkt == 0 && !uc) {
			unsigned i, rd = 0;

			for (i = 0; i < q->tx_idx; i++)
				rd += is_rd_atomic(wqe_at(q, i));
			if ((w->flags & IBV_SEND_FENCE) && rd)
				break;
			if (is_rd_atomic(w) && rd >= (q->max_rd_atomic ? q->max_rd_atomic : 1u))
				break;
		}
		if (send_packet(q, w, q->tx_pkt)) {
			/* local protection error on the gather */
			if (uc || q->tx_idx == 0) {
				sv_qp_complete_send(q, w, IBV_WC_LOC_PROT_ERR);
				sv_qp_to_error(q);
			} else {
				/* complete in order: fail once the WQEs before it are done */
				w->status = IBV_WC_LOC_PROT_ERR;
			}
			return;
		}
		sent = 1;
		if (is_rd_atomic(w) || q->tx_pkt + 1 == w->npkts) {
			uint32_t end = psn_add(w->first_psn, w->npkts);

			q->tx_idx++;
			q->tx_pkt = 0;
			if (psn_diff(end, q->snd_max) > 0)
				q->snd_max = end;
			if (uc) {
				/* UC: done once on the wire */
				sv_qp_complete_send(q, w, IBV_WC_SUCCESS);
				q->tx_idx--;
				q->una = q->snd_max;
			}
		} else {
			q->tx_pkt++;
			if (psn_diff(psn_add(psn, 1), q->snd_max) > 0)
				q->snd_max = psn_add(psn, 1);
		}
	}
	if (sent && !uc && !q->timer)
		arm_timer(q);
}

/* Moves the transmit position to psn: back (go-back-N retransmission) or
 * forward (past what an ACK covered). */
static void go_back(struct sv_qp *q, uint32_t psn)
{
	unsigned i;

	for (i = 0; i < q->sq_count; i++) {
		struct sv_swqe *w = wqe_at(q, i);

		if (psn_diff(psn, w->first_psn) >= 0 &&
		    psn_diff(psn, psn_add(w->first_psn, w->npkts)) < 0) {
			q->tx_idx = i;
			q->tx_pkt = (uint32_t)psn_diff(psn, w->first_psn);
			if (is_rd_atomic(w) && w->opcode != IBV_WR_RDMA_READ)
				q->tx_pkt = 0;
			return;
		}
	}
	q->tx_idx = q->sq_count;   /* everything before psn is done */
	q->tx_pkt = 0;
}

static uint32_t tx_psn(struct sv_qp *q)
{
	if (q->tx_idx >= q->sq_count)
		return q->next_psn;
	return psn_add(wqe_at(q, q->tx_idx)->first_psn, q->tx_pkt);
}

/* Completes what una now covers, in order. */
static void complete_acked(struct sv_qp *q)
{
	while (q->sq_count && q->tx_idx) {
		struct sv_swqe *w = &q->sq[q->sq_head];
		int st = w->status;

		if (psn_diff(psn_add(w->first_psn, w->npkts), q->una) > 0)
			break;
		sv_qp_complete_send(q, w, st);
		q->tx_idx--;
		if (st != IBV_WC_SUCCESS) {
			sv_qp_to_error(q);
			return;
		}
	}
}

static void advance_una(struct sv_qp *q, uint32_t una)
{
	if (psn_diff(una, q->una) <= 0)
		return;
	q->una = una;
	q->retry_left = q->retry_cnt;
	q->rnr_left = q->rnr_retry;
	if (psn_diff(tx_psn(q), una) < 0)
		go_back(q, una);
	complete_acked(q);
	if (q->state != IBV_QPS_RTS && q->state != IBV_QPS_SQD)
		return;
	if (q->una == q->snd_max)
		q->timer = 0;
	else
		arm_timer(q);
	sv_rc_pump(q);
}

/* An ACK (or NAK) covering everything before `upto`: stops at a READ or
 * atomic whose response has not arrived (an implied NAK: send it again). */
static void ack_upto(struct sv_qp *q, uint32_t upto)
{
	uint32_t una = q->una;
	unsigned i;
	int resend = 0;

	for (i = 0; i < q->sq_count; i++) {
		struct sv_swqe *w = wqe_at(q, i);
		uint32_t end;

		if (psn_diff(w->first_psn, q->snd_max) >= 0)
			break;   /* not sent yet */
		end = psn_add(w->first_psn, w->npkts);
		if (psn_diff(end, una) <= 0)
			continue;
		if (psn_diff(upto, w->first_psn) <= 0)
			break;
		if (is_rd_atomic(w)) {
			resend = 1;
			break;
		}
		una = psn_diff(upto, end) >= 0 ? end : upto;
		if (una != end)
			break;
	}
	advance_una(q, una);
	if (resend && q->state == IBV_QPS_RTS) {
		go_back(q, q->una);
		sv_rc_pump(q);
	}
}

static void rx_ack(struct sv_qp *q, const struct simf_bth *b, const uint8_t *p, size_t n)
{
	uint32_t aeth, psn = b->psn;
	uint8_t syn;

	if (n < AETH_LEN)
		return;
	aeth = get32(p);
	syn = (uint8_t)(aeth >> 24);
	if (psn_diff(psn, q->una) < -1 || psn_diff(psn, q->snd_max) >= 0)
		return;   /* stale or beyond what was sent */
	switch (syn & 0x60) {
	case 0x00:   /* ACK */
		ack_upto(q, psn_add(psn, 1));
		break;
	case 0x20:   /* RNR NAK */
		if (psn_diff(psn, q->una) < 0)
			return;
		ack_upto(q, psn);
		if (q->state != IBV_QPS_RTS || q->una != psn)
			return;
		if (q->rnr_retry != 7) {
			if (q->rnr_left == 0) {
				fail_head(q, IBV_WC_RNR_RETRY_EXC_ERR);
				return;
			}
			q->rnr_left--;
		}
		go_back(q, psn);
		q->timer = 0;
		q->rnr_until = sv_now() + rnr_ns(syn & 0x1F);
		sv_wake(q->ctx, q->rnr_until);
		break;
	case 0x60:   /* NAK */
		if (psn_diff(psn, q->una) < 0)
			return;
		ack_upto(q, psn);
		if (q->state != IBV_QPS_RTS || q->una != psn)
			return;
		switch (syn) {
		case AETH_NAK_SEQ:
			go_back(q, psn);
			sv_rc_pump(q);
			break;
		case AETH_NAK_INV:
			fail_head(q, IBV_WC_REM_INV_REQ_ERR);
			break;
		case AETH_NAK_ACC:
			fail_head(q, IBV_WC_REM_ACCESS_ERR);
			break;
		case AETH_NAK_OP:
			fail_head(q, IBV_WC_REM_OP_ERR);
			break;
		default:
			fail_head(q, IBV_WC_REM_INV_RD_REQ_ERR);
			break;
		}
		break;
	default:
		break;
	}
}

/* READ response / atomic ACK: must be the next PSN expected. */
static void rx_read_resp(struct sv_qp *q, const struct simf_bth *b, const uint8_t *p, size_t n)
{
	uint32_t psn = b->psn, mtu = mtu_bytes(q->mtu), off, i;
	int has_aeth = b->opcode != OP_READ_RESP_MIDDLE;
	struct sv_swqe *w = NULL;

	for (i = 0; i < q->sq_count; i++) {
		struct sv_swqe *x = wqe_at(q, i);

		if (psn_diff(psn, x->first_psn) >= 0 &&
		    psn_diff(psn, psn_add(x->first_psn, x->npkts)) < 0) {
			w = x;
			break;
		}
	}
	if (!w)
		return;
	/* the first response implicitly acknowledges the requests before it */
	if (psn_diff(psn, q->una) > 0 && psn == w->first_psn)
		ack_upto(q, psn);
	if (psn != q->una || q->state == IBV_QPS_ERR)
		return;   /* out of order: the timer retransmits the request */
	if (has_aeth) {
		if (n < AETH_LEN)
			return;
		p += AETH_LEN;
		n -= AETH_LEN;
	}
	if (b->opcode == OP_ATOMIC_ACK) {
		if (w->opcode != IBV_WR_ATOMIC_CMP_AND_SWP && w->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD)
			return;
		if (n < ATOMIC_ACK_LEN)
			return;
		uint64_t v = get64(p);

		if (scatter(q, w->sge, w->nsge, 0, (const uint8_t *)&v, 8))
			w->status = IBV_WC_LOC_PROT_ERR;
		advance_una(q, psn_add(psn, 1));
		return;
	}
	if (w->opcode != IBV_WR_RDMA_READ)
		return;
	off = (uint32_t)psn_diff(psn, w->first_psn) * mtu;
	if (n > w->len - off)
		n = w->len - off;
	if (n && scatter(q, w->sge, w->nsge, off, p, (uint32_t)n))
		w->status = IBV_WC_LOC_PROT_ERR;
	advance_una(q, psn_add(psn, 1));
}

/* ---- RC/UC responder ---------------------------------------------------------------------- */

static void send_ack(struct sv_qp *q, uint32_t psn, uint8_t syn)
{
	uint8_t buf[64];
	size_t len = bth(buf, q, resp_op(q, OP_ACK), q->dest_qpn, psn, 0, 0, 0, &q->av);

	put32(buf + len, (uint32_t)syn << 24 | (q->r.msn & 0xFFFFFF));
	len += AETH_LEN;
	xmit(q, av_node_tx(q, &q->av), q->dest_qpn, buf, len, 0);
}

static int take_rwqe(struct sv_qp *q, struct sv_rwqe *out)
{
	if (q->qp.qp_type == IBV_QPT_XRC_RECV)
		return q->rx_srq ? sv_srq_pop(q->rx_srq, out) : -1;
	if (q->qp.srq)
		return sv_srq_pop((struct sv_srq *)q->qp.srq, out);
	if (!q->rq_count)
		return -1;
	*out = q->rq[q->rq_head];
	q->rq_head = (q->rq_head + 1) % q->rq_cap;
	q->rq_count--;
	return 0;
}

static void recv_complete(struct sv_qp *q, const struct sv_rwqe *r, int status, enum ibv_wc_opcode op,
			  uint32_t len, int has_imm, uint32_t imm, int src_node, uint32_t src_qp,
			  const struct simf_bth *b, unsigned wc_flags)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = r->wr_id;
	wc.status = (enum ibv_wc_status)status;
	wc.opcode = op;
	wc.byte_len = len;
	wc.qp_num = q->qp.qp_num;
	wc.src_qp = src_qp;
	wc.wc_flags = wc_flags;
	if (has_imm) {
		wc.imm_data = imm;   /* network order, as verbs hands it over */
		wc.wc_flags |= IBV_WC_WITH_IMM;
	}
	wc.pkey_index = q->pkey_index;
	wc.slid = src_node >= 0 ? sv_node_lid(q->ctx, src_node) : 0;
	if (q->ctx->link == SIMF_LINK_IB && src_node >= 0 && wc.slid) {
		/* LMC > 0: the sender's SLID and the DLID it used */
		wc.slid = simf_bth_slid(q->ctx->f, b, src_node);
		wc.dlid_path_bits = (uint8_t)(simf_bth_dlid(q->ctx->f, b, q->ctx->node) -
					      sv_node_lid(q->ctx, q->ctx->node));
	}
	wc.sl = (uint8_t)SIMF_RESV8A_SL(b->resv8a);
	if (q->ctx->link == SIMF_LINK_ROCE && q->qp.qp_type == IBV_QPT_UD)
		/* RoCE has no SL on the wire; a ConnectX (mlx5) UD responder CQE
		 * carries the RoCE packet type where IB has the SL, and libmlx5
		 * returns it as wc.sl: bit 3 = UDP header (RoCEv2), bits 1:0 =
		 * L3 header 0 GRH (v1) / 1 IPv6 / 2 IPv4. UCX's UD transport
		 * reads the destination IP from the receive buffer's GRH area
		 * by it (IPv4: last 4 bytes; else bytes 24..39). The sim's RoCE
		 * is v2: IPv4 from GID 0 (IPv4-mapped), IPv6 from GIDs 1..
		 * (make_grh). */
		wc.sl = SIMF_RESV8A_SGID(b->resv8a) ? 0x9 : 0xA;
	/* an XRC target's receives complete on the CQ of the XRC SRQ */
	sv_cq_push(q->qp.qp_type == IBV_QPT_XRC_RECV ? q->rx_srq->cq : (struct sv_cq *)q->qp.recv_cq,
		   &wc, b->se || status != IBV_WC_SUCCESS);
}

/* A responder-side fatal error: NAK (RC), QP to error. */
static void resp_error(struct sv_qp *q, uint32_t psn, uint8_t nak, int async)
{
	if (sv_is_reliable(q))
		send_ack(q, psn, nak);
	if (async)
		async_qp(q, (enum ibv_event_type)async);
	sv_qp_to_error(q);
}

static void do_read(struct sv_qp *q, uint32_t psn, uint64_t va, uint32_t rkey, uint32_t dlen)
{
	static __thread uint8_t buf[SV_PKT_MAX + 64];
	uint32_t mtu = mtu_bytes(q->mtu), npkts = dlen ? (dlen + mtu - 1) / mtu : 1, i;
	int node = av_node_tx(q, &q->av);
	const uint8_t *src = NULL;

	if (dlen) {
		src = mr_ptr(q->ctx, data_pd(q), rkey, va, dlen, IBV_ACCESS_REMOTE_READ);
		if (!src || !(q->access & IBV_ACCESS_REMOTE_READ)) {
			resp_error(q, psn, AETH_NAK_ACC, IBV_EVENT_QP_ACCESS_ERR);
			return;
		}
	}
	for (i = 0; i < npkts; i++) {
		uint32_t n = dlen - i * mtu < mtu ? dlen - i * mtu : mtu;
		uint8_t op = npkts == 1 ? OP_READ_RESP_ONLY : i == 0 ? OP_READ_RESP_FIRST
			   : i + 1 == npkts ? OP_READ_RESP_LAST : OP_READ_RESP_MIDDLE;
		size_t len = bth(buf, q, resp_op(q, op), q->dest_qpn, psn_add(psn, i), 0, 0, n, &q->av);

		if (op != OP_READ_RESP_MIDDLE) {
			put32(buf + len, (uint32_t)AETH_ACK << 24 | (q->r.msn & 0xFFFFFF));
			len += AETH_LEN;
		}
		if (n)
			memcpy(buf + len, src + (size_t)i * mtu, n);
		len += n;
		xmit(q, node, q->dest_qpn, buf, len, n);
	}
}

static void send_atomic_ack(struct sv_qp *q, uint32_t psn, uint64_t orig)
{
	uint8_t buf[64];
	size_t len = bth(buf, q, resp_op(q, OP_ATOMIC_ACK), q->dest_qpn, psn, 0, 0, 0, &q->av);

	put32(buf + len, (uint32_t)AETH_ACK << 24 | (q->r.msn & 0xFFFFFF));
	put64(buf + len + AETH_LEN, orig);
	len += AETH_LEN + ATOMIC_ACK_LEN;
	xmit(q, av_node_tx(q, &q->av), q->dest_qpn, buf, len, 0);
}

static void rx_request(struct sv_qp *q, int src, const struct simf_bth *b, const uint8_t *p, size_t n)
{
	int rc = sv_is_reliable(q);
	uint8_t op = b->opcode & 0x1F;
	int32_t d = psn_diff(b->psn, q->r.epsn);
	struct sv_resp *r = &q->r;
	uint32_t imm = 0;

	if (d != 0) {
		if (!rc) {
			/* UC: a gap loses the message in progress */
			r->in_msg = r->in_write = 0;
			r->cur_off = 0;
			r->uc_drop = !(op == OP_SEND_FIRST || op == OP_SEND_ONLY || op == OP_SEND_ONLY_IMM ||
				       op == OP_WRITE_FIRST || op == OP_WRITE_ONLY || op == OP_WRITE_ONLY_IMM);
			if (r->uc_drop)
				return;
			r->epsn = b->psn;
		} else if (d > 0) {
			if (!r->nak_sent) {
				r->nak_sent = 1;
				send_ack(q, r->epsn, AETH_NAK_SEQ);
			}
			return;
		} else {
			/* duplicate */
			if (op == OP_READ_REQ && n >= RETH_LEN) {
				do_read(q, b->psn, get64(p), get32(p + 8), get32(p + 12));
			} else if (op == OP_CMP_SWAP || op == OP_FETCH_ADD) {
				for (int i = 0; i < 4; i++)
					if (r->at_valid[i] && r->at_psn[i] == b->psn)
						send_atomic_ack(q, b->psn, r->at_val[i]);
			} else if (b->ack_req) {
				send_ack(q, psn_add(r->epsn, 0xFFFFFF), AETH_ACK);
			}
			return;
		}
	}
	if (q->qp.qp_type == IBV_QPT_XRC_RECV && !q->rx_srq) {
		/* The XRCETH names no XRC SRQ of the target's XRC domain: NAK
		 * invalid request (the requester completes with
		 * IBV_WC_REM_INV_REQ_ERR), the target QP goes to error. */
		resp_error(q, b->psn, AETH_NAK_INV, 0);
		return;
	}
	r->nak_sent = 0;
	if (q->state == IBV_QPS_RTR && !r->comm_est) {
		r->comm_est = 1;
		async_qp(q, IBV_EVENT_COMM_EST);
	}
	switch (op) {
	case OP_SEND_FIRST: case OP_SEND_ONLY: case OP_SEND_ONLY_IMM:
	case OP_SEND_MIDDLE: case OP_SEND_LAST: case OP_SEND_LAST_IMM: {
		int first = op == OP_SEND_FIRST || op == OP_SEND_ONLY || op == OP_SEND_ONLY_IMM;
		int last = op != OP_SEND_FIRST && op != OP_SEND_MIDDLE;
		int has_imm = op == OP_SEND_ONLY_IMM || op == OP_SEND_LAST_IMM;
		int e;

		if (first) {
			if (r->in_msg && rc) {
				resp_error(q, b->psn, AETH_NAK_INV, 0);
				return;
			}
			if (!r->have_cur) {
				if (take_rwqe(q, &r->cur)) {
					if (rc) {
						r->nak_sent = 1;
						send_ack(q, b->psn, AETH_RNR(q->min_rnr_timer));
					} else {
						r->uc_drop = 1;
						r->epsn = psn_add(b->psn, 1);
					}
					return;
				}
				r->have_cur = 1;
				r->cur_srq = q->rx_srq;
			}
			r->cur_off = 0;
			r->in_msg = 1;
		} else if (!r->in_msg) {
			if (rc)
				resp_error(q, b->psn, AETH_NAK_INV, 0);
			else
				r->epsn = psn_add(b->psn, 1);
			return;
		}
		if (has_imm) {
			if (n < IMM_LEN)
				return;
			memcpy(&imm, p, 4);
			p += IMM_LEN;
			n -= IMM_LEN;
		}
		e = n ? scatter(q, r->cur.sge, r->cur.nsge, r->cur_off, p, (uint32_t)n) : 0;
		if (e) {
			recv_complete(q, &r->cur, e == -2 ? IBV_WC_LOC_LEN_ERR : IBV_WC_LOC_PROT_ERR,
				      IBV_WC_RECV, r->cur_off, 0, 0, src, q->dest_qpn, b, 0);
			r->have_cur = 0;
			resp_error(q, b->psn, e == -2 ? AETH_NAK_INV : AETH_NAK_OP, 0);
			return;
		}
		r->cur_off += (uint32_t)n;
		if (last) {
			recv_complete(q, &r->cur, IBV_WC_SUCCESS, IBV_WC_RECV, r->cur_off, has_imm, imm, src,
				      q->dest_qpn, b, 0);
			r->have_cur = 0;
			r->in_msg = 0;
			r->msn++;
		}
		break;
	}
	case OP_WRITE_FIRST: case OP_WRITE_ONLY: case OP_WRITE_ONLY_IMM:
	case OP_WRITE_MIDDLE: case OP_WRITE_LAST: case OP_WRITE_LAST_IMM: {
		int first = op == OP_WRITE_FIRST || op == OP_WRITE_ONLY || op == OP_WRITE_ONLY_IMM;
		int last = op != OP_WRITE_FIRST && op != OP_WRITE_MIDDLE;
		int has_imm = op == OP_WRITE_ONLY_IMM || op == OP_WRITE_LAST_IMM;
		struct sv_rwqe rw;

		if (first) {
			if (n < RETH_LEN)
				return;
			r->w_va = get64(p);
			r->w_rkey = get32(p + 8);
			r->w_total = r->w_left = get32(p + 12);
			p += RETH_LEN;
			n -= RETH_LEN;
			r->w_ptr = NULL;
			if (r->w_total) {
				r->w_ptr = mr_ptr(q->ctx, data_pd(q), r->w_rkey, r->w_va, r->w_total,
						  IBV_ACCESS_REMOTE_WRITE);
				if (!r->w_ptr || !(q->access & IBV_ACCESS_REMOTE_WRITE)) {
					if (rc) {
						resp_error(q, b->psn, AETH_NAK_ACC, IBV_EVENT_QP_ACCESS_ERR);
					} else {
						r->uc_drop = 1;
						r->epsn = psn_add(b->psn, 1);
					}
					return;
				}
			}
			r->in_write = 1;
		} else if (!r->in_write) {
			if (rc)
				resp_error(q, b->psn, AETH_NAK_INV, 0);
			else
				r->epsn = psn_add(b->psn, 1);
			return;
		}
		if (has_imm) {
			if (n < IMM_LEN)
				return;
			memcpy(&imm, p, 4);
			p += IMM_LEN;
			n -= IMM_LEN;
			/* the immediate consumes a receive WQE: none posted is RNR */
			if (take_rwqe(q, &rw)) {
				if (rc) {
					r->nak_sent = 1;
					send_ack(q, b->psn, AETH_RNR(q->min_rnr_timer));
				} else {
					r->in_write = 0;
					r->epsn = psn_add(b->psn, 1);
				}
				return;
			}
		}
		if (n > r->w_left) {
			if (rc)
				resp_error(q, b->psn, AETH_NAK_INV, 0);
			return;
		}
		if (n) {
			memcpy(r->w_ptr + (r->w_total - r->w_left), p, n);
			r->w_left -= (uint32_t)n;
		}
		if (last) {
			if (has_imm)
				recv_complete(q, &rw, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, r->w_total,
					      1, imm, src, q->dest_qpn, b, 0);
			r->in_write = 0;
			r->msn++;
		}
		break;
	}
	case OP_READ_REQ: {
		uint32_t dlen, mtu = mtu_bytes(q->mtu);

		if (!rc || n < RETH_LEN)
			return;
		dlen = get32(p + 12);
		r->msn++;
		do_read(q, b->psn, get64(p), get32(p + 8), dlen);
		if (q->state == IBV_QPS_ERR)
			return;
		r->epsn = psn_add(b->psn, dlen ? (dlen + mtu - 1) / mtu : 1);
		return;
	}
	case OP_CMP_SWAP: case OP_FETCH_ADD: {
		uint64_t va, a, cmp, orig;
		uint8_t *m;

		if (!rc || n < ATOMIC_ETH_LEN)
			return;
		va = get64(p);
		a = get64(p + 12);
		cmp = get64(p + 20);
		m = (va & 7) ? NULL : mr_ptr(q->ctx, data_pd(q), get32(p + 8), va, 8, IBV_ACCESS_REMOTE_ATOMIC);
		if (!m || !(q->access & IBV_ACCESS_REMOTE_ATOMIC)) {
			resp_error(q, b->psn, (va & 7) ? AETH_NAK_INV : AETH_NAK_ACC,
				   IBV_EVENT_QP_ACCESS_ERR);
			return;
		}
		memcpy(&orig, m, 8);
		if (op == OP_FETCH_ADD) {
			uint64_t v = orig + a;

			memcpy(m, &v, 8);
		} else if (orig == cmp) {
			memcpy(m, &a, 8);
		}
		r->msn++;
		r->at_psn[r->at_next] = b->psn;
		r->at_val[r->at_next] = orig;
		r->at_valid[r->at_next] = 1;
		r->at_next = (r->at_next + 1) % 4;
		send_atomic_ack(q, b->psn, orig);
		r->epsn = psn_add(b->psn, 1);
		return;
	}
	default:
		if (rc)
			resp_error(q, b->psn, AETH_NAK_INV, 0);
		return;
	}
	r->epsn = psn_add(b->psn, 1);
	if (rc && b->ack_req)
		send_ack(q, b->psn, AETH_ACK);
}

/* ---- UD ---------------------------------------------------------------------------------- */

static uint16_t ip_csum(const uint8_t *h, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i < n; i += 2)
		s += (uint32_t)h[i] << 8 | h[i + 1];
	while (s >> 16)
		s = (s & 0xFFFF) + (s >> 16);
	return (uint16_t)~s;
}

/* The 40 bytes a UD receive buffer starts with: an IB GRH, or on RoCEv2
 * (IPv4-mapped GIDs) 20 zero bytes and the IPv4 header. */
static void make_grh(struct sv_ctx *c, uint8_t g[40], int src, const uint8_t dgid[16], size_t pktlen,
		     unsigned sgid_index)
{
	static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	const struct simf_state *st = c->f->st;
	const uint8_t *sgid = src >= 0 ? simf_node_sgid(c->f, src, sgid_index) : NULL;

	memset(g, 0, 40);
	if (c->link == SIMF_LINK_ROCE && sgid && memcmp(sgid, v4, 12)) {
		/* RoCEv2 over IPv6: the 40 bytes are the IPv6 header */
		size_t plen = 8 + pktlen;

		g[0] = 0x60;
		g[4] = (uint8_t)(plen >> 8);
		g[5] = (uint8_t)plen;
		g[6] = 17;     /* next header: UDP */
		g[7] = 64;
		memcpy(g + 8, sgid, 16);
		memcpy(g + 24, dgid, 16);
	} else if (c->link == SIMF_LINK_ROCE) {
		uint8_t *ip = g + 20;
		uint32_t sip = src >= 0 ? st->nodes[src].ip : 0, dip;
		size_t tot = 20 + 8 + pktlen;

		dip = (uint32_t)dgid[12] << 24 | (uint32_t)dgid[13] << 16 | (uint32_t)dgid[14] << 8 | dgid[15];
		ip[0] = 0x45;
		ip[2] = (uint8_t)(tot >> 8);
		ip[3] = (uint8_t)tot;
		ip[6] = 0x40;   /* DF */
		ip[8] = 64;
		ip[9] = 17;
		put32(ip + 12, sip);
		put32(ip + 16, dip);
		uint16_t cs = ip_csum(ip, 20);

		ip[10] = (uint8_t)(cs >> 8);
		ip[11] = (uint8_t)cs;
	} else {
		g[0] = 0x60;
		g[4] = (uint8_t)(pktlen >> 8);
		g[5] = (uint8_t)pktlen;
		g[6] = 0x1B;   /* next header: IBA transport */
		g[7] = 64;
		if (src >= 0)
			memcpy(g + 8, st->nodes[src].gid, 16);
		memcpy(g + 24, dgid, 16);
	}
}

static void rx_ud(struct sv_qp *q, int src, const struct simf_bth *b, const uint8_t *p, size_t n,
		  size_t pktlen)
{
	uint32_t qkey, sqp, imm = 0;
	int has_imm = b->opcode == SIMF_OP_UD_SEND_ONLY_IMM, grh, e;
	struct sv_rwqe rw;
	uint8_t g[40], dgid[16];

	if (q->state != IBV_QPS_RTR && q->state != IBV_QPS_RTS && q->state != IBV_QPS_SQD)
		return;
	if (b->opcode != SIMF_OP_UD_SEND_ONLY && !has_imm)
		return;
	if (n < SIMF_DETH_LEN + (has_imm ? IMM_LEN : 0u))
		return;
	qkey = get32(p);
	sqp = get32(p + 4) & 0xFFFFFF;
	p += SIMF_DETH_LEN;
	n -= SIMF_DETH_LEN;
	if (qkey != q->qkey) {
		q->ctx->qkey_viol++;
		return;   /* Q_Key violation: silently dropped */
	}
	if (has_imm) {
		memcpy(&imm, p, 4);
		p += IMM_LEN;
		n -= IMM_LEN;
	}
	if (take_rwqe(q, &rw)) {
		q->drops++;
		return;   /* UD: no receive posted, the datagram is dropped */
	}
	grh = q->ctx->link == SIMF_LINK_ROCE || SIMF_RESV8A_GRH(b->resv8a);
	if (b->dest_qp == 0xFFFFFF && q->nmcg)
		memcpy(dgid, q->mcg[0].gid, 16);
	else if (q->ctx->link == SIMF_LINK_ROCE && SIMF_RESV8A_SGID(b->resv8a))
		/* from an IPv6 GID: to ours (RoCEv2 keeps one IP version) */
		memcpy(dgid, simf_node_sgid(q->ctx->f, q->ctx->node, 1), 16);
	else
		sv_node_gid(q->ctx, q->ctx->node, dgid);
	e = 0;
	if (grh) {
		make_grh(q->ctx, g, src, dgid, pktlen,
			 q->ctx->link == SIMF_LINK_ROCE ? SIMF_RESV8A_SGID(b->resv8a) : 0);
		e = scatter(q, rw.sge, rw.nsge, 0, g, 40);
	}
	if (!e && n)
		e = scatter(q, rw.sge, rw.nsge, 40, p, (uint32_t)n);
	if (!e && sge_total(rw.sge, rw.nsge) < 40 + n)
		e = -2;
	recv_complete(q, &rw, e == -2 ? IBV_WC_LOC_LEN_ERR : e ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS,
		      IBV_WC_RECV, (uint32_t)(40 + n), has_imm, imm, src, sqp, b, grh ? IBV_WC_GRH : 0);
}

static int ud_send(struct sv_qp *q, struct sv_swqe *w)
{
	static __thread uint8_t buf[SV_PKT_MAX + 64];
	struct sv_ctx *c = q->ctx;
	const struct ibv_ah_attr *av = &w->ah;
	int imm = w->opcode == IBV_WR_SEND_WITH_IMM;
	size_t len = bth(buf, q, imm ? SIMF_OP_UD_SEND_ONLY_IMM : SIMF_OP_UD_SEND_ONLY,
			 w->remote_qpn, q->next_psn, 0, w->flags & IBV_SEND_SOLICITED, w->len, av);
	int mc;

	q->next_psn = psn_add(q->next_psn, 1);
	put32(buf + len, (w->remote_qkey & 0x80000000u) ? q->qkey : w->remote_qkey);
	put32(buf + len + 4, q->qp.qp_num);
	len += SIMF_DETH_LEN;
	if (imm) {
		memcpy(buf + len, &w->imm, 4);
		len += IMM_LEN;
	}
	if (w->len && gather(q, w, 0, buf + len, w->len))
		return -1;
	len += w->len;
	mc = (c->link == SIMF_LINK_IB && av->dlid >= 0xC000 && av->dlid != 0xFFFF) ||
	     (av->is_global && av->grh.dgid.raw[0] == 0xFF) ||
	     (c->link == SIMF_LINK_ROCE && (av->grh.dgid.raw[12] & 0xF0) == 0xE0 &&
	      !memcmp(av->grh.dgid.raw, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12));
	if (mc) {
		struct simf_mcg_qp t[SIMF_MCG_QPS];
		int i, k;
		const uint8_t *mgid = av->is_global ? av->grh.dgid.raw : NULL;

		k = simf_mcast_targets_from(c->f, c->node, mgid, mgid ? 0 : av->dlid, t, SIMF_MCG_QPS);
		/* the multicast QPN; the copy per member travels to its port */
		buf[5] = buf[6] = buf[7] = 0xFF;
		for (i = 0; i < k; i++) {
			uint8_t copy[SV_PKT_MAX + 64];

			memcpy(copy, buf, len);
			xmit(q, t[i].node, t[i].qpn, copy, len, w->len);
		}
		return 0;
	}
	xmit(q, av_node_tx(q, av), w->remote_qpn, buf, len, w->len);
	return 0;
}

/* ---- posting -------------------------------------------------------------------------------- */

static int check_send_wr(struct sv_qp *q, const struct ibv_send_wr *wr, uint32_t *len)
{
	enum ibv_qp_type t = q->qp.qp_type;

	if (wr->num_sge < 0 || (unsigned)wr->num_sge > q->cap.max_send_sge)
		return EINVAL;
	*len = sge_total(wr->sg_list, wr->num_sge);
	if (*len > 0x80000000u)
		return EINVAL;
	switch (wr->opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		break;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		if (t == IBV_QPT_UD)
			return EINVAL;
		break;
	case IBV_WR_RDMA_READ:
		if ((t != IBV_QPT_RC && t != IBV_QPT_XRC_SEND) || (wr->send_flags & IBV_SEND_INLINE))
			return EINVAL;
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		if ((t != IBV_QPT_RC && t != IBV_QPT_XRC_SEND) || wr->num_sge != 1 ||
		    wr->sg_list[0].length != 8 ||
		    (wr->send_flags & IBV_SEND_INLINE) || (wr->wr.atomic.remote_addr & 7))
			return EINVAL;
		break;
	default:
		return EINVAL;
	}
	if ((wr->send_flags & IBV_SEND_INLINE) && *len > q->cap.max_inline_data)
		return EINVAL;
	if (t == IBV_QPT_UD) {
		if (!wr->wr.ud.ah || wr->wr.ud.ah->context != q->qp.context)
			return EINVAL;
		if (*len > mtu_bytes((enum ibv_mtu)sv_port_active_mtu(q->ctx)))
			return EINVAL;   /* a UD message is one packet */
	}
	return 0;
}

static void flush_wr(struct sv_qp *q, const struct ibv_send_wr *wr)
{
	struct ibv_wc wc;

	memset(&wc, 0, sizeof(wc));
	wc.wr_id = wr->wr_id;
	wc.status = IBV_WC_WR_FLUSH_ERR;
	wc.opcode = wc_opcode(wr->opcode);
	wc.qp_num = q->qp.qp_num;
	sv_cq_push((struct sv_cq *)q->qp.send_cq, &wc, 0);
}

int sv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sv_qp *q = (struct sv_qp *)qp;
	struct sv_ctx *c = q->ctx;
	int e = 0;

	pthread_mutex_lock(&c->lock);
	for (; wr; wr = wr->next) {
		struct sv_swqe *w;
		uint32_t len;

		if (qp->qp_type == IBV_QPT_XRC_RECV) {
			e = EINVAL;   /* an XRC target has no send queue */
			break;
		}
		if (q->state == IBV_QPS_ERR) {
			flush_wr(q, wr);
			continue;
		}
		if (q->state != IBV_QPS_RTS && !(q->state == IBV_QPS_SQD && qp->qp_type != IBV_QPT_UD)) {
			e = EINVAL;
			break;
		}
		e = check_send_wr(q, wr, &len);
		if (e)
			break;
		if (q->sq_count >= q->cap.max_send_wr) {
			e = ENOMEM;
			break;
		}
		w = &q->sq[(q->sq_head + q->sq_count) % q->sq_cap];
		memset(w, 0, sizeof(*w));
		w->wr_id = wr->wr_id;
		w->opcode = wr->opcode;
		w->flags = wr->send_flags;
		w->imm = wr->imm_data;
		w->nsge = wr->num_sge;
		if (wr->num_sge)
			memcpy(w->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		w->len = len;
		w->status = IBV_WC_SUCCESS;
		if (qp->qp_type == IBV_QPT_XRC_SEND)
			w->remote_srqn = wr->qp_type.xrc.remote_srqn & 0xFFFFFF;
		if (wr->send_flags & IBV_SEND_INLINE) {
			uint32_t off = 0;
			int i;

			w->inl = malloc(len ? len : 1);
			if (!w->inl) {
				e = ENOMEM;
				break;
			}
			for (i = 0; i < wr->num_sge; i++) {
				memcpy(w->inl + off, (void *)(uintptr_t)wr->sg_list[i].addr,
				       wr->sg_list[i].length);
				off += wr->sg_list[i].length;
			}
		}
		switch (wr->opcode) {
		case IBV_WR_RDMA_WRITE:
		case IBV_WR_RDMA_WRITE_WITH_IMM:
		case IBV_WR_RDMA_READ:
			w->raddr = wr->wr.rdma.remote_addr;
			w->rkey = wr->wr.rdma.rkey;
			break;
		case IBV_WR_ATOMIC_CMP_AND_SWP:
		case IBV_WR_ATOMIC_FETCH_AND_ADD:
			w->raddr = wr->wr.atomic.remote_addr;
			w->rkey = wr->wr.atomic.rkey;
			w->compare_add = wr->wr.atomic.compare_add;
			w->swap = wr->wr.atomic.swap;
			break;
		default:
			break;
		}
		q->sq_count++;
		if (qp->qp_type == IBV_QPT_UD) {
			struct sv_ah *ah = (struct sv_ah *)wr->wr.ud.ah;

			w->ah = ah->attr;
			w->remote_qpn = wr->wr.ud.remote_qpn & 0xFFFFFF;
			w->remote_qkey = wr->wr.ud.remote_qkey;
			sv_qp_complete_send(q, w, ud_send(q, w) ? IBV_WC_LOC_PROT_ERR : IBV_WC_SUCCESS);
			continue;
		}
		{
			uint32_t mtu = mtu_bytes(q->mtu);

			w->npkts = (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
				    wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) ? 1
				   : len ? (len + mtu - 1) / mtu : 1;
			w->first_psn = q->next_psn;
			q->next_psn = psn_add(q->next_psn, w->npkts);
		}
	}
	if (qp->qp_type != IBV_QPT_UD)
		sv_rc_pump(q);
	if (e && bad)
		*bad = wr;
	pthread_mutex_unlock(&c->lock);
	return e;
}

int sv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_qp *q = (struct sv_qp *)qp;
	struct sv_ctx *c = q->ctx;
	int e = 0;

	pthread_mutex_lock(&c->lock);
	for (; wr; wr = wr->next) {
		struct sv_rwqe *r;

		if (qp->srq || q->state == IBV_QPS_RESET || sv_is_xrc(q)) {
			/* XRC: initiators receive nothing, targets through XRC SRQs */
			e = EINVAL;
			break;
		}
		if (wr->num_sge < 0 || (unsigned)wr->num_sge > q->cap.max_recv_sge) {
			e = EINVAL;
			break;
		}
		if (q->rq_count >= q->cap.max_recv_wr) {
			e = ENOMEM;
			break;
		}
		if (q->state == IBV_QPS_ERR) {
			struct ibv_wc wc;

			memset(&wc, 0, sizeof(wc));
			wc.wr_id = wr->wr_id;
			wc.status = IBV_WC_WR_FLUSH_ERR;
			wc.opcode = IBV_WC_RECV;
			wc.qp_num = qp->qp_num;
			sv_cq_push((struct sv_cq *)qp->recv_cq, &wc, 0);
			continue;
		}
		r = &q->rq[(q->rq_head + q->rq_count) % q->rq_cap];
		r->wr_id = wr->wr_id;
		r->nsge = wr->num_sge;
		if (wr->num_sge)
			memcpy(r->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		q->rq_count++;
	}
	if (e && bad)
		*bad = wr;
	pthread_mutex_unlock(&c->lock);
	return e;
}

/* ---- receive dispatch and the progress thread ------------------------------------------------ */

static void rx_packet(struct sv_qp *q, int src, uint16_t sport, uint8_t *pkt, size_t len)
{
	struct simf_bth b;
	const uint8_t *p;
	size_t n;
	enum ibv_qp_type t = q->qp.qp_type;

	if (src < 0 || len < SIMF_BTH_LEN + SIMF_ICRC_LEN)
		return;
	simf_bth_get(pkt, &b);
	if (b.dest_qp != q->qp.qp_num && !(b.dest_qp == 0xFFFFFF && t == IBV_QPT_UD)) {
		q->ctx->stale_drops++;   /* not for this QP: most likely an earlier one of its socket (ctx->idle) */
		return;
	}
	if (!pkey_ok(b.pkey, qp_pkey(q))) {
		/* P_Key violation: the port counts it (PortInfo
		 * P_KeyViolations), the device too (bad_pkey_cntr) */
		q->ctx->bad_pkey++;
		simf_pkey_violation(q->ctx->f, q->ctx->node);
		return;
	}
	n = len - SIMF_BTH_LEN - SIMF_ICRC_LEN;
	if (b.pad > n)
		return;
	n -= b.pad;
	p = pkt + SIMF_BTH_LEN;
	if (t == IBV_QPT_UD) {
		if ((b.opcode & 0xE0) != OP_UD)
			return;
		rx_ud(q, src, &b, p, n, len);
		return;
	}
	if ((b.opcode & 0xE0) != (t == IBV_QPT_UC ? OP_UC : sv_is_xrc(q) ? OP_XRC : 0))
		return;
	if (sv_is_xrc(q))
		b.opcode &= 0x1F;   /* below, XRC is RC */
	/* connected: only the peer's QP on the peer's node */
	if (sport != simf_qp_port(q->dest_qpn) || src != av_node(q->ctx, &q->av))
		return;
	if (q->state != IBV_QPS_RTR && q->state != IBV_QPS_RTS && q->state != IBV_QPS_SQD)
		return;
	switch (b.opcode) {
	case OP_ACK:
		if ((t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND) && q->state != IBV_QPS_RTR)
			rx_ack(q, &b, p, n);
		return;
	case OP_READ_RESP_FIRST: case OP_READ_RESP_MIDDLE: case OP_READ_RESP_LAST:
	case OP_READ_RESP_ONLY: case OP_ATOMIC_ACK:
		if ((t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND) && q->state != IBV_QPS_RTR)
			rx_read_resp(q, &b, p, n);
		return;
	default:
		if (t == IBV_QPT_XRC_SEND)
			return;   /* an initiator answers no requests */
		if (t == IBV_QPT_XRC_RECV) {
			struct sv_srq *s;

			if (n < XRCETH_LEN)
				return;
			s = sv_xsrq_by_num(q->ctx, get32(p) & 0xFFFFFF);
			/* only an SRQ of the target's own XRC domain */
			q->rx_srq = s && s->xrcd == q->xrcd ? s : NULL;
			p += XRCETH_LEN;
			n -= XRCETH_LEN;
		}
		rx_request(q, src, &b, p, n);
		q->rx_srq = NULL;
		return;
	}
}

static void run_timers(struct sv_ctx *c, uint64_t now, uint64_t *next)
{
	struct sv_qp *q;

	*next = 0;
	for (q = c->qps; q; q = q->next) {
		if (q->rnr_until && now >= q->rnr_until)
			sv_rc_pump(q);
		if (q->timer && now >= q->timer) {
			q->timer = 0;
			if (q->state == IBV_QPS_RTS && q->una != q->snd_max) {
				if (q->retry_left == 0) {
					fail_head(q, IBV_WC_RETRY_EXC_ERR);
				} else {
					q->retry_left--;
					go_back(q, q->una);
					sv_rc_pump(q);
					if (!q->timer)
						arm_timer(q);
				}
			}
		}
		if (q->rnr_until && (!*next || q->rnr_until < *next))
			*next = q->rnr_until;
		if (q->timer && (!*next || q->timer < *next))
			*next = q->timer;
	}
}

/* Port events: the SM / `uscm-sim link` change the node table; the
 * progress thread looks at it at least every 100 ms. */
static int port_state_now(struct sv_ctx *c)
{
	const struct simf_node *n = &c->f->st->nodes[c->node];

	if (!__atomic_load_n(&n->link_up, __ATOMIC_RELAXED))
		return IBV_PORT_DOWN;
	return n->port_state == SIMF_PORT_ACTIVE ? IBV_PORT_ACTIVE
	       : n->port_state == SIMF_PORT_ARMED ? IBV_PORT_ARMED
	       : n->port_state == SIMF_PORT_INIT ? IBV_PORT_INIT : IBV_PORT_DOWN;
}

static void port_watch(struct sv_ctx *c)
{
	int st = port_state_now(c);
	uint16_t lid = sv_node_lid(c, c->node);
	struct ibv_async_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.element.port_num = 1;
	if (st != c->port_state) {
		if (st == IBV_PORT_ACTIVE || c->port_state == IBV_PORT_ACTIVE) {
			ev.event_type = st == IBV_PORT_ACTIVE ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR;
			sv_async_push(c, &ev);
		}
		c->port_state = st;
	}
	if (lid != c->port_lid) {
		if (c->port_lid && lid) {
			ev.event_type = IBV_EVENT_LID_CHANGE;
			sv_async_push(c, &ev);
		}
		c->port_lid = lid;
	}
	/* the SM rewrote the P_Key table (SubnSet P_KeyTable: OpenSM's
	 * partitions): the HCA raises PKEY_CHANGE, as the kernel's cache
	 * does on hardware */
	if (memcmp(c->port_pkeys, c->f->st->nodes[c->node].pkeys, sizeof(c->port_pkeys))) {
		memcpy(c->port_pkeys, c->f->st->nodes[c->node].pkeys, sizeof(c->port_pkeys));
		ev.event_type = IBV_EVENT_PKEY_CHANGE;
		sv_async_push(c, &ev);
	}
}

/* A datagram on an idle socket (ctx->idle) was meant for a destroyed QP:
 * dropped and counted (lock held), as hardware drops a packet for a QPN
 * that is no more. */
static void drain_idle(struct sv_ctx *c, uint32_t pidx, uint8_t *buf)
{
	unsigned i;
	int k;

	for (i = 0; i < c->nidle; i++)
		if (c->idle[i].qpn % SIMF_MAX_QPN == pidx)
			break;
	if (i == c->nidle)
		return;   /* closed meanwhile */
	for (k = 0; k < 64; k++) {
		if (simf_recv(c->f, c->idle[i].fd, buf, 65536, NULL, NULL) < 0)
			break;
		c->stale_drops++;
	}
}

static void *progress(void *arg)
{
	struct sv_ctx *c = arg;
	uint8_t *buf = malloc(65536);
	struct epoll_event ev[32];
	sigset_t all;

	/* the application's signals go to the application's threads, as they
	 * would without this library's thread */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_setname_np(pthread_self(), "uscm-sim-verbs");
	if (!buf)
		return NULL;

	for (;;) {
		uint64_t next, now;
		int i, n, ms;

		pthread_mutex_lock(&c->lock);
		if (c->stop) {
			pthread_mutex_unlock(&c->lock);
			break;
		}
		now = sv_now();
		run_timers(c, now, &next);
		port_watch(c);
		if (!next || next > now + 100000000ull)
			next = now + 100000000ull;
		c->sleep_until = next;
		pthread_mutex_unlock(&c->lock);
		if (!next)
			ms = -1;
		else if (next <= now)
			ms = 0;
		else
			ms = (int)((next - now + 999999) / 1000000);
		n = epoll_wait(c->epfd, ev, 32, ms);
		for (i = 0; i < n; i++) {
			struct sv_qp *q;
			int k;

			if (ev[i].data.u32 == 0) {
				uint64_t v;

				if (read(c->wakefd, &v, sizeof(v)) < 0) {
					/* spurious */
				}
				continue;
			}
			pthread_mutex_lock(&c->lock);
			q = sv_qp_by_pidx(c, ev[i].data.u32);
			if (!q) {
				drain_idle(c, ev[i].data.u32, buf);
				pthread_mutex_unlock(&c->lock);
				continue;
			}
			for (k = 0; q && k < 64; k++) {
				int src;
				uint16_t sport;
				ssize_t len = simf_recv(c->f, q->fd, buf, 65536, &src, &sport);

				if (len < 0)
					break;
				rx_packet(q, src, sport, buf, (size_t)len);
				q = sv_qp_by_pidx(c, ev[i].data.u32);   /* still there */
			}
			pthread_mutex_unlock(&c->lock);
		}
	}
	free(buf);
	return NULL;
}

int sv_progress_start(struct sv_ctx *c)
{
	struct epoll_event ev;

	c->port_state = port_state_now(c);
	c->port_lid = sv_node_lid(c, c->node);
	memcpy(c->port_pkeys, c->f->st->nodes[c->node].pkeys, sizeof(c->port_pkeys));
	c->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->epfd < 0)
		return -1;
	c->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (c->wakefd < 0) {
		close(c->epfd);
		return -1;
	}
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u32 = 0;
	if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->wakefd, &ev) < 0 ||
	    pthread_create(&c->thr, NULL, progress, c)) {
		close(c->wakefd);
		close(c->epfd);
		errno = errno ? errno : EAGAIN;
		return -1;
	}
	c->thr_started = 1;
	return 0;
}

void sv_progress_stop(struct sv_ctx *c)
{
	uint64_t one = 1;

	if (!c->thr_started)
		return;
	pthread_mutex_lock(&c->lock);
	c->stop = 1;
	pthread_mutex_unlock(&c->lock);
	if (write(c->wakefd, &one, sizeof(one)) < 0) {
		/* the thread wakes on its timeout anyway */
	}
	pthread_join(c->thr, NULL);
	c->thr_started = 0;
	close(c->wakefd);
	close(c->epfd);
}
