/*
 * um_sa_client.c - asynchronous PathRecord queries and MCMemberRecord
 * joins / leaves (see um_sa_client.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "umad/um_sa_client.h"

enum pending_kind { PEND_PATH, PEND_MCM };

struct pending {
	struct pending *next;
	uint32_t tid_lo;
	enum pending_kind kind;
	um_sa_path_cb cb;      /* PEND_PATH */
	um_sa_mcm_cb mcm_cb;   /* PEND_MCM (may be NULL) */
	void *ctx;
};

static void pending_fail(struct pending *p, int status)
{
	if (p->kind == PEND_PATH)
		p->cb(p->ctx, status, NULL);
	else if (p->mcm_cb)
		p->mcm_cb(p->ctx, status, NULL);
}

struct um_sa_client {
	struct um_port *port;
	um_sa_send_fn send;        /* NULL: um_port_send_sa */
	void *send_ctx;
	uint32_t next_tid;
	struct pending *list;
	unsigned npending;
};

struct um_sa_client *um_sa_client_new(struct um_port *port, uint32_t tid_seed)
{
	struct um_sa_client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->port = port;
	c->next_tid = tid_seed ? tid_seed : 1;
	return c;
}

void um_sa_client_free(struct um_sa_client *c)
{
	struct pending *p;

	if (!c)
		return;
	while ((p = c->list)) {
		c->list = p->next;
		pending_fail(p, -ECANCELED);
		free(p);
	}
	free(c);
}

static int tid_in_use(const struct um_sa_client *c, uint32_t lo)
{
	for (const struct pending *p = c->list; p; p = p->next)
		if (p->tid_lo == lo)
			return 1;
	return 0;
}

static uint32_t new_tid(struct um_sa_client *c)
{
	uint32_t lo;

	do {
		lo = c->next_tid++;
	} while (!lo || tid_in_use(c, lo));
	return lo;
}

/* Encodes m, sends it and records p (filled by the caller but for the TID)
 * as pending. 0, or -1 with errno (p freed). */
static int send_query(struct um_sa_client *c, const struct um_sa_msg *m, struct pending *p,
		      int timeout_ms, int retries, uint64_t *tid)
{
	uint8_t mad[CMP_MAD_SIZE];

	if (um_sa_encode(m, mad) < 0) {
		free(p);
		errno = EINVAL;
		return -1;
	}
	timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
	retries = retries > 0 ? retries : 3;
	if ((c->send ? c->send(c->send_ctx, (uint32_t)m->hdr.tid, mad, timeout_ms, retries)
		     : um_port_send_sa(c->port, mad, timeout_ms, retries)) < 0) {
		int e = errno;
		free(p);
		errno = e;
		return -1;
	}
	p->tid_lo = (uint32_t)m->hdr.tid;
	p->next = c->list;
	c->list = p;
	c->npending++;
	if (tid)
		*tid = p->tid_lo;
	return 0;
}

static struct pending *pending_new(enum pending_kind kind, void *ctx)
{
	struct pending *p = calloc(1, sizeof(*p));

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->kind = kind;
	p->ctx = ctx;
	return p;
}

int um_sa_path_get(struct um_sa_client *c, const struct um_sa_path_req *q, um_sa_path_cb cb,
		   void *ctx, uint64_t *tid)
{
	struct um_sa_msg m;
	struct pending *p;

	if (!c || !q || !cb) {
		errno = EINVAL;
		return -1;
	}
	memset(&m, 0, sizeof(m));
	um_sa_path_query(&m, new_tid(c), q->sgid, q->dgid, q->pkey, q->service_id, q->qos_class);
	if (q->tclass >= 0)
		um_sa_path_query_tclass(&m, (uint8_t)q->tclass);
	if (!(p = pending_new(PEND_PATH, ctx)))
		return -1;
	p->cb = cb;
	return send_query(c, &m, p, q->timeout_ms, q->retries, tid);
}

/* Join (leave_state 0: SubnAdmSet) or leave (SubnAdmDelete of those bits). */
static int mcm_query(struct um_sa_client *c, const struct um_sa_mcm_req *req,
		     uint8_t leave_state, um_sa_mcm_cb cb, void *ctx, uint64_t *tid)
{
	struct um_sa_msg m;
	struct pending *p;

	if (leave_state)
		um_sa_mcm_leave(&m, new_tid(c), &req->rec, leave_state);
	else
		um_sa_mcm_join(&m, new_tid(c), &req->rec, req->ipoib_ps);
	if (!(p = pending_new(PEND_MCM, ctx)))
		return -1;
	p->mcm_cb = cb;
	return send_query(c, &m, p, req->timeout_ms, req->retries, tid);
}

int um_sa_mcm_set(struct um_sa_client *c, const struct um_sa_mcm_req *req, um_sa_mcm_cb cb,
		  void *ctx, uint64_t *tid)
{
	if (!c || !req || !cb) {
		errno = EINVAL;
		return -1;
	}
	return mcm_query(c, req, 0, cb, ctx, tid);
}

int um_sa_mcm_delete(struct um_sa_client *c, const struct um_sa_mcm_req *req,
		     uint8_t leave_state, um_sa_mcm_cb cb, void *ctx, uint64_t *tid)
{
	if (!c || !req || !leave_state) {
		errno = EINVAL;
		return -1;
	}
	return mcm_query(c, req, leave_state, cb, ctx, tid);
}

static struct pending *take(struct um_sa_client *c, uint32_t lo)
{
	for (struct pending **pp = &c->list; *pp; pp = &(*pp)->next) {
		if ((*pp)->tid_lo == lo) {
			struct pending *p = *pp;
			*pp = p->next;
			c->npending--;
			return p;
		}
	}
	return NULL;
}

void um_sa_client_set_sender(struct um_sa_client *c, um_sa_send_fn fn, void *ctx)
{
	c->send = fn;
	c->send_ctx = ctx;
}

int um_sa_fail(struct um_sa_client *c, uint64_t tid, int status)
{
	struct pending *p;

	if (!c || !(p = take(c, (uint32_t)tid)))
		return 0;
	pending_fail(p, status);
	free(p);
	return 1;
}

unsigned um_sa_client_pending(const struct um_sa_client *c)
{
	return c ? c->npending : 0;
}

static uint32_t tid_lo_of(const uint8_t *mad)
{
	/* TID: MAD bytes 8..15, big-endian; the low half is bytes 12..15. */
	return (uint32_t)mad[12] << 24 | (uint32_t)mad[13] << 16 | (uint32_t)mad[14] << 8 | mad[15];
}

int um_sa_client_handle(struct um_sa_client *c, const struct um_rx *rx)
{
	struct um_sa_msg m;
	struct pending *p;
	uint16_t sa_status;
	int status;

	if (!c || !rx || rx->agent != UM_AGENT_SA || rx->len < CMP_MAD_HDR_SIZE)
		return 0;
	p = take(c, tid_lo_of(rx->mad));
	if (!p)
		return 0;
	if (rx->status) {
		/* libibumad's timeout record: every retry went unanswered. */
		pending_fail(p, -(rx->status == ETIMEDOUT ? ETIMEDOUT : rx->status));
		free(p);
		return 1;
	}
	if (p->kind == PEND_MCM) {
		/* As the kernel's ib_sa: any SA status is -EINVAL for the caller. */
		if (rx->len < CMP_MAD_SIZE || um_sa_decode(rx->mad, CMP_MAD_SIZE, &m, NULL) < 0 ||
		    m.hdr.attr_id != UMAD_SA_ATTR_MCMEMBER_REC || m.hdr.status)
			pending_fail(p, -EINVAL);
		else if (p->mcm_cb)
			p->mcm_cb(p->ctx, 0, &m.u.mcm);
		free(p);
		return 1;
	}
	if (rx->len < CMP_MAD_SIZE || um_sa_decode(rx->mad, CMP_MAD_SIZE, &m, NULL) < 0 ||
	    m.hdr.attr_id != UMAD_SA_ATTR_PATH_REC) {
		p->cb(p->ctx, -EPROTO, NULL);
		free(p);
		return 1;
	}
	sa_status = m.hdr.status;
	if (!sa_status && m.nrecords >= 1)
		status = 0;
	else if (!sa_status)
		status = -EHOSTUNREACH; /* a GetResp without a record */
	else
		/* As the kernel's ib_sa (recv_handler): any SA status is
		 * -EINVAL for the caller — no path (NO_RECORDS: no shared
		 * partition, a port down), an unknown GID, the rest — which
		 * rdma_cm hands on as ROUTE_ERROR's status. */
		status = -EINVAL;
	p->cb(p->ctx, status, status ? NULL : &m.u.pr);
	free(p);
	return 1;
}
