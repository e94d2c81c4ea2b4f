/*
 * sv_res.c - protection domains, memory regions, completion queues and
 * channels, address handles, shared receive queues, async events.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <endian.h>

#include "sim/verbs/sv.h"
#include "sim/verbs/sv_compat.h"

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/* ---- PD ------------------------------------------------------------------ */

SV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context)
{
	struct sv_ctx *c = sv_ctx(context);
	struct sv_pd *p;

	pthread_mutex_lock(&c->lock);
	if (c->npd >= SV_MAX_PD) {
		pthread_mutex_unlock(&c->lock);
		errno = ENOMEM;
		return NULL;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		pthread_mutex_unlock(&c->lock);
		errno = ENOMEM;
		return NULL;
	}
	p->pd.context = context;
	p->pd.handle = ++c->npd;
	pthread_mutex_unlock(&c->lock);
	return &p->pd;
}
SV_COMPAT_1_0(ibv_alloc_pd)

SV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct sv_ctx *c = sv_ctx(pd->context);
	struct sv_pd *p = (struct sv_pd *)pd;

	pthread_mutex_lock(&c->lock);
	if (p->refs) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	c->npd--;
	pthread_mutex_unlock(&c->lock);
	free(p);
	return 0;
}
SV_COMPAT_1_0(ibv_dealloc_pd)

/* ---- MR ------------------------------------------------------------------ */

#define SV_ACCESS_KNOWN (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
			 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |     \
			 IBV_ACCESS_HUGETLB)

static int check_access(unsigned access)
{
	access &= ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE;   /* optional: may be ignored */
	if (access & ~(unsigned)SV_ACCESS_KNOWN)
		return EINVAL;   /* e.g. ON_DEMAND: no ODP here */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;   /* IBTA: remote write/atomic need local write */
	return 0;
}

struct sv_mr *sv_mr_by_key(struct sv_ctx *c, uint32_t key)
{
	unsigned idx = key >> 8;

	if (idx >= c->nmrs || !c->mrs[idx] || c->mrs[idx]->mr.lkey != key)
		return NULL;
	return c->mrs[idx];
}

static struct ibv_mr *reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
			     unsigned access)
{
	struct sv_ctx *c = sv_ctx(pd->context);
	struct sv_mr *m;
	unsigned idx;
	int e = check_access(access);

	if (!e && !addr && length)
		e = EINVAL;
	if (e) {
		errno = e;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&c->lock);
	for (idx = 1; idx < c->nmrs && c->mrs[idx]; idx++)
		;
	if (idx >= c->nmrs) {
		unsigned n = c->nmrs ? c->nmrs * 2 : 64;
		struct sv_mr **t;

		if (n > SV_MAX_MR + 1 || !(t = realloc(c->mrs, n * sizeof(*t)))) {
			pthread_mutex_unlock(&c->lock);
			free(m);
			errno = ENOMEM;
			return NULL;
		}
		memset(t + c->nmrs, 0, (n - c->nmrs) * sizeof(*t));
		if (!c->nmrs)
			idx = 1;
		c->mrs = t;
		c->nmrs = n;
	}
	c->key_tag = (c->key_tag + 0x3B) & 0xFF;
	m->idx = idx;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = idx;
	m->mr.lkey = m->mr.rkey = (idx << 8) | c->key_tag;
	m->pd = (struct sv_pd *)pd;
	m->access = access;
	m->iova = (access & IBV_ACCESS_ZERO_BASED) ? 0 : iova;
	m->pd->refs++;
	c->mrs[idx] = m;
	c->nmr++;
	pthread_mutex_unlock(&c->lock);
	return &m->mr;
}

SV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return reg_mr(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}
SV_COMPAT_1_0(ibv_reg_mr)

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	return reg_mr(pd, addr, length, iova, (unsigned)access);
}

SV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	return reg_mr(pd, addr, length, iova, access);
}

SV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct sv_ctx *c = sv_ctx(mr->context);
	struct sv_mr *m = (struct sv_mr *)mr;

	pthread_mutex_lock(&c->lock);
	if (sv_mr_by_key(c, mr->lkey) != m) {
		pthread_mutex_unlock(&c->lock);
		return EINVAL;
	}
	c->mrs[m->idx] = NULL;
	c->nmr--;
	m->pd->refs--;
	pthread_mutex_unlock(&c->lock);
	free(m);
	return 0;
}
SV_COMPAT_1_0(ibv_dereg_mr)

SV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr,
			   size_t length, int access)
{
	struct sv_ctx *c = sv_ctx(mr->context);
	struct sv_mr *m = (struct sv_mr *)mr;

	if (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
		      IBV_REREG_MR_CHANGE_ACCESS) || !flags)
		return IBV_REREG_MR_ERR_INPUT;
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && check_access((unsigned)access))
		return IBV_REREG_MR_ERR_INPUT;
	if ((flags & IBV_REREG_MR_CHANGE_TRANSLATION) && !addr && length)
		return IBV_REREG_MR_ERR_INPUT;
	if ((flags & IBV_REREG_MR_CHANGE_PD) && (!pd || pd->context != mr->context))
		return IBV_REREG_MR_ERR_INPUT;
	pthread_mutex_lock(&c->lock);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->addr = addr;
		mr->length = length;
		m->iova = (m->access & IBV_ACCESS_ZERO_BASED) ? 0 : (uintptr_t)addr;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		m->pd->refs--;
		m->pd = (struct sv_pd *)pd;
		m->pd->refs++;
		mr->pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		m->access = (unsigned)access;
	/* new keys, as hardware hands out */
	c->key_tag = (c->key_tag + 0x3B) & 0xFF;
	mr->lkey = mr->rkey = (m->idx << 8) | c->key_tag;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* ---- completion channels and CQs --------------------------------------------- */

SV_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *context)
{
	struct sv_chan *ch = calloc(1, sizeof(*ch));
	int p[2];

	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(p, O_CLOEXEC) < 0) {
		free(ch);
		return NULL;
	}
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	ch->ch.context = context;
	ch->ch.fd = p[0];
	ch->ch.refcnt = 0;
	ch->wfd = p[1];
	return &ch->ch;
}

SV_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *channel)
{
	struct sv_ctx *c = sv_ctx(channel->context);
	struct sv_chan *ch = (struct sv_chan *)channel;

	pthread_mutex_lock(&c->lock);
	if (channel->refcnt) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	pthread_mutex_unlock(&c->lock);
	close(ch->ch.fd);
	close(ch->wfd);
	free(ch->q);
	free(ch);
	return 0;
}

static void chan_push(struct sv_chan *ch, struct sv_cq *cq)
{
	char b = 1;

	if (ch->qlen == ch->qcap) {
		unsigned n = ch->qcap ? ch->qcap * 2 : 16, i;
		struct sv_cq **t = malloc(n * sizeof(*t));

		if (!t)
			return;
		for (i = 0; i < ch->qlen; i++)
			t[i] = ch->q[(ch->qhead + i) % ch->qcap];
		free(ch->q);
		ch->q = t;
		ch->qcap = n;
		ch->qhead = 0;
	}
	ch->q[(ch->qhead + ch->qlen) % ch->qcap] = cq;
	ch->qlen++;
	if (write(ch->wfd, &b, 1) != 1) {
		/* the pipe is full only if the application never reads events */
	}
}

void sv_cq_push(struct sv_cq *cq, const struct ibv_wc *wc, int solicited)
{
	struct sv_ctx *c = sv_ctx(cq->cq.context);

	if (cq->count == cq->cap) {
		if (!cq->overflowed) {
			struct ibv_async_event ev;

			cq->overflowed = 1;
			memset(&ev, 0, sizeof(ev));
			ev.event_type = IBV_EVENT_CQ_ERR;
			ev.element.cq = &cq->cq;
			sv_async_push(c, &ev);
		}
		return;
	}
	cq->ring[(cq->head + cq->count) % cq->cap] = *wc;
	cq->count++;
	if (cq->armed == 1 || (cq->armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS))) {
		cq->armed = 0;
		if (cq->cq.channel)
			chan_push((struct sv_chan *)cq->cq.channel, cq);
	}
}

SV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct sv_ctx *c = sv_ctx(context);
	struct sv_cq *cq;

	if (cqe < 1 || cqe > SV_MAX_CQE || comp_vector < 0 ||
	    comp_vector >= context->num_comp_vectors || (channel && channel->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq || !(cq->ring = calloc((size_t)cqe, sizeof(struct ibv_wc)))) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->cap = cqe;
	cq->cq.context = context;
	cq->cq.channel = channel;
	cq->cq.cq_context = cq_context;
	cq->cq.cqe = cqe;
	pthread_mutex_init(&cq->cq.mutex, NULL);
	pthread_cond_init(&cq->cq.cond, NULL);
	pthread_mutex_lock(&c->lock);
	if (c->ncq >= SV_MAX_CQ) {
		pthread_mutex_unlock(&c->lock);
		free(cq->ring);
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	cq->cq.handle = ++c->ncq;
	if (channel)
		channel->refcnt++;
	pthread_mutex_unlock(&c->lock);
	return &cq->cq;
}
SV_COMPAT_1_0(ibv_create_cq)

SV_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sv_ctx *c = sv_ctx(ibcq->context);
	struct sv_cq *cq = (struct sv_cq *)ibcq;
	struct ibv_wc *r;
	int i;

	if (cqe < 1 || cqe > SV_MAX_CQE)
		return EINVAL;
	pthread_mutex_lock(&c->lock);
	if (cqe < cq->count) {
		pthread_mutex_unlock(&c->lock);
		return EINVAL;
	}
	r = calloc((size_t)cqe, sizeof(*r));
	if (!r) {
		pthread_mutex_unlock(&c->lock);
		return ENOMEM;
	}
	for (i = 0; i < cq->count; i++)
		r[i] = cq->ring[(cq->head + i) % cq->cap];
	free(cq->ring);
	cq->ring = r;
	cq->head = 0;
	cq->cap = cqe;
	ibcq->cqe = cqe;
	pthread_mutex_unlock(&c->lock);
	return 0;
}
SV_COMPAT_1_0(ibv_resize_cq)

SV_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sv_ctx *c = sv_ctx(ibcq->context);
	struct sv_cq *cq = (struct sv_cq *)ibcq;
	uint32_t reported;
	unsigned i;

	pthread_mutex_lock(&c->lock);
	if (cq->refs) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	if (ibcq->channel) {
		struct sv_chan *ch = (struct sv_chan *)ibcq->channel;

		/* events not read yet are dropped (their bytes stay, read as nothing) */
		for (i = 0; i < ch->qlen; i++)
			if (ch->q[(ch->qhead + i) % ch->qcap] == cq)
				ch->q[(ch->qhead + i) % ch->qcap] = NULL;
		ibcq->channel->refcnt--;
	}
	c->ncq--;
	reported = cq->events_reported;
	pthread_mutex_unlock(&c->lock);
	/* as libibverbs: wait until every event handed out was acknowledged */
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != reported)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	pthread_mutex_unlock(&ibcq->mutex);
	free(cq->ring);
	free(cq);
	return 0;
}
SV_COMPAT_1_0(ibv_destroy_cq)

SV_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *channel, struct ibv_cq **cq,
			       void **cq_context)
{
	struct sv_ctx *c = sv_ctx(channel->context);
	struct sv_chan *ch = (struct sv_chan *)channel;
	struct sv_cq *got = NULL;
	char b;

	while (!got) {
		ssize_t r = read(channel->fd, &b, 1);

		if (r != 1) {
			if (r == 0)
				errno = EIO;
			return -1;
		}
		pthread_mutex_lock(&c->lock);
		if (ch->qlen) {
			got = ch->q[ch->qhead];
			ch->qhead = (ch->qhead + 1) % ch->qcap;
			ch->qlen--;
			if (got)
				got->events_reported++;
		}
		pthread_mutex_unlock(&c->lock);
	}
	*cq = &got->cq;
	*cq_context = got->cq.cq_context;
	return 0;
}
SV_COMPAT_1_0(ibv_get_cq_event)

SV_EXPORT void ibv_ack_cq_events(struct ibv_cq *cq, unsigned int nevents)
{
	pthread_mutex_lock(&cq->mutex);
	cq->comp_events_completed += nevents;
	pthread_cond_signal(&cq->cond);
	pthread_mutex_unlock(&cq->mutex);
}
SV_COMPAT_1_0(ibv_ack_cq_events)

int sv_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sv_ctx *c = sv_ctx(ibcq->context);
	struct sv_cq *cq = (struct sv_cq *)ibcq;
	int i;

	if (n < 0)
		return -1;
	/* an empty CQ is the common case of a busy poll: do not take the lock
	 * the progress thread needs to fill it */
	if (!__atomic_load_n(&cq->count, __ATOMIC_ACQUIRE)) {
		/* and let the progress threads run: on a machine with fewer
		 * cores than busy pollers they would wait a whole time slice */
		sched_yield();
		return 0;
	}
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < n && cq->count; i++) {
		wc[i] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->cap;
		cq->count--;
	}
	pthread_mutex_unlock(&c->lock);
	return i;
}

int sv_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sv_ctx *c = sv_ctx(ibcq->context);
	struct sv_cq *cq = (struct sv_cq *)ibcq;

	if (!ibcq->channel)
		return EINVAL;
	pthread_mutex_lock(&c->lock);
	/* "any" overrides "solicited"; arming is cleared by the next event */
	if (!solicited_only)
		cq->armed = 1;
	else if (cq->armed != 1)
		cq->armed = 2;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

/* ---- address handles ------------------------------------------------------------- */

static int check_ah_attr(struct sv_ctx *c, const struct ibv_ah_attr *a)
{
	if (a->port_num != 1)
		return EINVAL;
	if (a->is_global && a->grh.sgid_index >= SV_GID_TBL_LEN)
		return EINVAL;
	if (c->link == SIMF_LINK_ROCE && !a->is_global)
		return EINVAL;   /* RoCE addresses are GIDs: a GRH is mandatory */
	if (c->link == SIMF_LINK_IB && !a->dlid && !a->is_global)
		return EINVAL;
	if (a->sl > 15)
		return EINVAL;
	return 0;
}

SV_EXPORT struct ibv_ah *ibv_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct sv_ctx *c = sv_ctx(pd->context);
	struct sv_ah *ah;
	int e = check_ah_attr(c, attr);

	if (e) {
		errno = e;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		errno = ENOMEM;
		return NULL;
	}
	ah->ah.context = pd->context;
	ah->ah.pd = pd;
	ah->attr = *attr;
	pthread_mutex_lock(&c->lock);
	ah->ah.handle = ++c->nah;
	((struct sv_pd *)pd)->refs++;
	pthread_mutex_unlock(&c->lock);
	return &ah->ah;
}
SV_COMPAT_1_0(ibv_create_ah)

SV_EXPORT int ibv_destroy_ah(struct ibv_ah *ibah)
{
	struct sv_ctx *c = sv_ctx(ibah->context);

	pthread_mutex_lock(&c->lock);
	((struct sv_pd *)ibah->pd)->refs--;
	pthread_mutex_unlock(&c->lock);
	free(ibah);
	return 0;
}
SV_COMPAT_1_0(ibv_destroy_ah)

SV_EXPORT int ibv_init_ah_from_wc(struct ibv_context *context, uint8_t port_num, struct ibv_wc *wc,
				  struct ibv_grh *grh, struct ibv_ah_attr *ah_attr)
{
	struct sv_ctx *c = sv_ctx(context);

	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->dlid = wc->slid;
	ah_attr->sl = wc->sl;
	ah_attr->src_path_bits = wc->dlid_path_bits;
	ah_attr->port_num = port_num;
	if (wc->wc_flags & IBV_WC_GRH) {
		const uint8_t *g = (const uint8_t *)grh;

		ah_attr->is_global = 1;
		ah_attr->grh.hop_limit = 0xFF;
		ah_attr->grh.sgid_index = 0;
		if (c->link == SIMF_LINK_ROCE && (g[20] >> 4) != 4 && (g[0] >> 4) == 6) {
			/* RoCEv2 over IPv6: the GRH area is the IPv6 header; the
			 * source GID index is that of our address it came to */
			uint32_t w = be32toh(grh->version_tclass_flow);

			memcpy(ah_attr->grh.dgid.raw, grh->sgid.raw, 16);
			ah_attr->grh.traffic_class = (uint8_t)(w >> 20);
			ah_attr->grh.flow_label = w & 0xFFFFF;
			for (unsigned i = 1; i <= SIMF_IP_GIDS; i++)
				if (!memcmp(simf_node_sgid(c->f, c->node, i), grh->dgid.raw, 16))
					ah_attr->grh.sgid_index = (uint8_t)i;
		} else if (c->link == SIMF_LINK_ROCE) {
			/* RoCEv2 over IPv4: the IPv4 header sits in the GRH's last 20 bytes */
			const uint8_t *ip = g + 20;

			memset(ah_attr->grh.dgid.raw, 0, 16);
			ah_attr->grh.dgid.raw[10] = 0xFF;
			ah_attr->grh.dgid.raw[11] = 0xFF;
			memcpy(ah_attr->grh.dgid.raw + 12, ip + 12, 4);
			ah_attr->grh.traffic_class = ip[1];
		} else {
			uint32_t w = be32toh(grh->version_tclass_flow);

			memcpy(ah_attr->grh.dgid.raw, grh->sgid.raw, 16);
			ah_attr->grh.traffic_class = (uint8_t)(w >> 20);
			ah_attr->grh.flow_label = w & 0xFFFFF;
		}
	} else if (c->link == SIMF_LINK_ROCE) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

SV_EXPORT struct ibv_ah *ibv_create_ah_from_wc(struct ibv_pd *pd, struct ibv_wc *wc,
					       struct ibv_grh *grh, uint8_t port_num)
{
	struct ibv_ah_attr a;

	if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &a))
		return NULL;
	return ibv_create_ah(pd, &a);
}

/* ---- async events ------------------------------------------------------------------------ */

void sv_async_push(struct sv_ctx *c, const struct ibv_async_event *ev)
{
	struct sv_async *a = malloc(sizeof(*a));
	char b = 1;

	if (!a)
		return;
	a->ev = *ev;
	a->next = NULL;
	if (c->aq_tail)
		c->aq_tail->next = a;
	else
		c->aq_head = a;
	c->aq_tail = a;
	if (write(c->async_wfd, &b, 1) != 1) {
		/* full pipe: the application does not read async events */
	}
}

static int is_qp_event(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
		return 1;
	default:
		return 0;
	}
}

/* ctx->lock held. A QP being destroyed loses its events nobody has read
 * yet, as the kernel's uverbs drops them (ib_uverbs_release_uevent): one
 * read later would name freed memory — or, once the allocator hands that
 * memory to a new QP, the new QP (seen by UCX as a LAST_WQE_REACHED of a
 * QP that had not reached it). The count of those already handed out is
 * what ibv_destroy_qp waits to see acknowledged. */
uint32_t sv_async_forget_qp(struct sv_ctx *c, struct sv_qp *q)
{
	struct sv_async **pp = &c->aq_head, *a;

	c->aq_tail = NULL;
	while ((a = *pp)) {
		if (is_qp_event(a->ev.event_type) && a->ev.element.qp == &q->qp) {
			*pp = a->next;
			free(a);
			continue;
		}
		c->aq_tail = a;
		pp = &a->next;
	}
	return q->events_reported;
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
	struct sv_ctx *c = sv_ctx(context);
	struct sv_async *a = NULL;
	char b;

	while (!a) {
		ssize_t r = read(context->async_fd, &b, 1);

		if (r != 1) {
			if (r == 0)
				errno = EIO;
			return -1;
		}
		pthread_mutex_lock(&c->lock);
		a = c->aq_head;
		if (a) {
			c->aq_head = a->next;
			if (!c->aq_head)
				c->aq_tail = NULL;
			if (is_qp_event(a->ev.event_type))
				((struct sv_qp *)a->ev.element.qp)->events_reported++;
		}
		pthread_mutex_unlock(&c->lock);
	}
	*event = a->ev;
	free(a);
	return 0;
}
SV_COMPAT_1_0(ibv_get_async_event)

SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	pthread_mutex_t *m = NULL;
	pthread_cond_t *cv = NULL;
	uint32_t *cnt = NULL;

	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		m = &event->element.cq->mutex;
		cv = &event->element.cq->cond;
		cnt = &event->element.cq->async_events_completed;
		break;
	case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
		m = &event->element.qp->mutex;
		cv = &event->element.qp->cond;
		cnt = &event->element.qp->events_completed;
		break;
	case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED:
		m = &event->element.srq->mutex;
		cv = &event->element.srq->cond;
		cnt = &event->element.srq->events_completed;
		break;
	default:
		return;
	}
	pthread_mutex_lock(m);
	++*cnt;
	pthread_cond_signal(cv);
	pthread_mutex_unlock(m);
}
SV_COMPAT_1_0(ibv_ack_async_event)

/* ---- SRQ ------------------------------------------------------------------------------------ */

/* A basic SRQ (xrcd NULL) or an XRC SRQ of xrcd completing on cq. */
static struct ibv_srq *srq_new(struct ibv_pd *pd, struct ibv_srq_init_attr *init,
			       struct sv_xrcd *xrcd, struct sv_cq *cq)
{
	struct sv_ctx *c = sv_ctx(pd->context);
	struct sv_srq *s;

	if (!init->attr.max_wr || init->attr.max_wr > SV_MAX_SRQ_WR ||
	    init->attr.max_sge > SV_MAX_SRQ_SGE) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->ring = calloc(init->attr.max_wr, sizeof(struct sv_rwqe)))) {
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->cap = init->attr.max_wr;
	s->max_sge = init->attr.max_sge ? init->attr.max_sge : 1;
	s->pd = (struct sv_pd *)pd;
	s->srq.context = pd->context;
	s->srq.srq_context = init->srq_context;
	s->srq.pd = pd;
	pthread_mutex_init(&s->srq.mutex, NULL);
	pthread_cond_init(&s->srq.cond, NULL);
	pthread_mutex_lock(&c->lock);
	if (c->nsrq >= SV_MAX_SRQ) {
		pthread_mutex_unlock(&c->lock);
		free(s->ring);
		free(s);
		errno = ENOMEM;
		return NULL;
	}
	s->srq.handle = ++c->nsrq;
	s->pd->refs++;
	/* SRQ numbers are 24 bits; 0 is never one (a zeroed XRCETH) */
	do {
		c->next_srqn = (c->next_srqn + 1) & 0xFFFFFF;
	} while (!c->next_srqn || sv_xsrq_by_num(c, c->next_srqn));
	s->srqn = c->next_srqn;
	if (xrcd) {
		s->xrcd = xrcd;
		s->cq = cq;
		xrcd->refs++;
		cq->refs++;
		s->xnext = c->xsrqs;
		c->xsrqs = s;
	}
	pthread_mutex_unlock(&c->lock);
	init->attr.max_sge = s->max_sge;
	return &s->srq;
}

SV_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *pd, struct ibv_srq_init_attr *init)
{
	return srq_new(pd, init, NULL, NULL);
}
SV_COMPAT_1_0(ibv_create_srq)

/* verbs_context.create_srq_ex: basic SRQs, and XRC SRQs (PD, XRCD and CQ
 * all required, as providers do). Tag-matching SRQs: EOPNOTSUPP. */
struct ibv_srq *sv_create_srq_ex(struct ibv_context *context, struct ibv_srq_init_attr_ex *a)
{
	const uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			       IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	enum ibv_srq_type t = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? a->srq_type : IBV_SRQT_BASIC;
	struct ibv_srq_init_attr ia;
	struct ibv_srq *srq;

	if ((a->comp_mask & ~known) || (t != IBV_SRQT_BASIC && t != IBV_SRQT_XRC)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd || a->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	if (t == IBV_SRQT_XRC &&
	    (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !a->xrcd || a->xrcd->context != context ||
	     !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->cq || a->cq->context != context)) {
		errno = EINVAL;
		return NULL;
	}
	memset(&ia, 0, sizeof(ia));
	ia.srq_context = a->srq_context;
	ia.attr = a->attr;
	srq = srq_new(a->pd, &ia, t == IBV_SRQT_XRC ? (struct sv_xrcd *)a->xrcd : NULL,
		      t == IBV_SRQT_XRC ? (struct sv_cq *)a->cq : NULL);
	if (srq)
		a->attr = ia.attr;
	return srq;
}

int sv_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
	struct sv_srq *s = (struct sv_srq *)srq;

	if (!s->xrcd)
		return EINVAL;   /* only XRC SRQs are addressed by number */
	*srq_num = s->srqn;
	return 0;
}

struct sv_srq *sv_xsrq_by_num(struct sv_ctx *c, uint32_t srqn)
{
	struct sv_srq *s;

	for (s = c->xsrqs; s; s = s->xnext)
		if (s->srqn == srqn)
			return s;
	return NULL;
}

/* verbs_context.open_xrcd: a domain private to the context (fd -1). Sharing
 * one through a file (fd >= 0, across processes) is not simulated. */
struct ibv_xrcd *sv_open_xrcd(struct ibv_context *context, struct ibv_xrcd_init_attr *a)
{
	struct sv_ctx *c = sv_ctx(context);
	struct sv_xrcd *x;

	if (!(a->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    (a->comp_mask & ~(uint32_t)(IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS))) {
		errno = EINVAL;
		return NULL;
	}
	if (a->fd != -1) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		errno = ENOMEM;
		return NULL;
	}
	x->xrcd.context = context;
	pthread_mutex_lock(&c->lock);
	c->nxrcd++;
	pthread_mutex_unlock(&c->lock);
	return &x->xrcd;
}

int sv_close_xrcd(struct ibv_xrcd *xrcd)
{
	struct sv_ctx *c = sv_ctx(xrcd->context);
	struct sv_xrcd *x = (struct sv_xrcd *)xrcd;

	pthread_mutex_lock(&c->lock);
	if (x->refs) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	c->nxrcd--;
	pthread_mutex_unlock(&c->lock);
	free(x);
	return 0;
}

SV_EXPORT int ibv_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr, int mask)
{
	struct sv_ctx *c = sv_ctx(srq->context);
	struct sv_srq *s = (struct sv_srq *)srq;
	int e = 0;

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	pthread_mutex_lock(&c->lock);
	if (mask & IBV_SRQ_MAX_WR) {
		if (!attr->max_wr || attr->max_wr > SV_MAX_SRQ_WR || attr->max_wr < s->count) {
			e = EINVAL;
		} else {
			struct sv_rwqe *r = calloc(attr->max_wr, sizeof(*r));
			unsigned i;

			if (!r) {
				e = ENOMEM;
			} else {
				for (i = 0; i < s->count; i++)
					r[i] = s->ring[(s->head + i) % s->cap];
				free(s->ring);
				s->ring = r;
				s->head = 0;
				s->cap = attr->max_wr;
			}
		}
	}
	if (!e && (mask & IBV_SRQ_LIMIT)) {
		if (attr->srq_limit > s->cap)
			e = EINVAL;
		else
			s->limit = attr->srq_limit;
	}
	pthread_mutex_unlock(&c->lock);
	return e;
}
SV_COMPAT_1_0(ibv_modify_srq)

SV_EXPORT int ibv_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct sv_ctx *c = sv_ctx(srq->context);
	struct sv_srq *s = (struct sv_srq *)srq;

	pthread_mutex_lock(&c->lock);
	attr->max_wr = s->cap;
	attr->max_sge = s->max_sge;
	attr->srq_limit = s->limit;
	pthread_mutex_unlock(&c->lock);
	return 0;
}
SV_COMPAT_1_0(ibv_query_srq)

SV_EXPORT int ibv_destroy_srq(struct ibv_srq *srq)
{
	struct sv_ctx *c = sv_ctx(srq->context);
	struct sv_srq *s = (struct sv_srq *)srq;

	pthread_mutex_lock(&c->lock);
	if (s->refs) {
		pthread_mutex_unlock(&c->lock);
		return EBUSY;
	}
	s->pd->refs--;
	c->nsrq--;
	if (s->xrcd) {
		struct sv_srq **pp;

		for (pp = &c->xsrqs; *pp; pp = &(*pp)->xnext)
			if (*pp == s) {
				*pp = s->xnext;
				break;
			}
		s->xrcd->refs--;
		s->cq->refs--;
		/* a target in the middle of a message into it loses the message */
		for (struct sv_qp *q = c->qps; q; q = q->next)
			if (q->r.cur_srq == s) {
				q->r.have_cur = 0;
				q->r.in_msg = 0;
				q->r.cur_srq = NULL;
			}
	}
	pthread_mutex_unlock(&c->lock);
	free(s->ring);
	free(s);
	return 0;
}
SV_COMPAT_1_0(ibv_destroy_srq)

int sv_srq_pop(struct sv_srq *s, struct sv_rwqe *out)
{
	if (!s->count)
		return -1;
	*out = s->ring[s->head];
	s->head = (s->head + 1) % s->cap;
	s->count--;
	if (s->limit && s->count < s->limit) {
		struct ibv_async_event ev;

		s->limit = 0;   /* the limit event disarms it */
		memset(&ev, 0, sizeof(ev));
		ev.event_type = IBV_EVENT_SRQ_LIMIT_REACHED;
		ev.element.srq = &s->srq;
		sv_async_push(sv_ctx(s->srq.context), &ev);
	}
	return 0;
}

int sv_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sv_ctx *c = sv_ctx(srq->context);
	struct sv_srq *s = (struct sv_srq *)srq;
	int e = 0;

	pthread_mutex_lock(&c->lock);
	for (; wr; wr = wr->next) {
		struct sv_rwqe *r;

		if (wr->num_sge < 0 || (unsigned)wr->num_sge > s->max_sge) {
			e = EINVAL;
			break;
		}
		if (s->count == s->cap) {
			e = ENOMEM;
			break;
		}
		r = &s->ring[(s->head + s->count) % s->cap];
		r->wr_id = wr->wr_id;
		r->nsge = wr->num_sge;
		if (wr->num_sge)
			memcpy(r->sge, wr->sg_list, (size_t)wr->num_sge * sizeof(struct ibv_sge));
		s->count++;
	}
	if (e && bad)
		*bad = wr;
	pthread_mutex_unlock(&c->lock);
	return e;
}
