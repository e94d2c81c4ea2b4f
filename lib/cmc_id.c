/*
 * cmc_id.c - daemon mode: event channels, ids and their events.
 *
 * A channel is a socketpair: this end is the user's channel fd, the other
 * is the daemon's (passed in USP_CHAN_CREATE), which writes one usp_event
 * frame per event. So the fd is readable exactly while events wait, a
 * blocked rdma_get_cm_event is woken by the daemon itself (no thread of
 * ours in between), and when the daemon dies the fd reads EOF: every id of
 * the channel then gets one RDMA_CM_EVENT_DEVICE_REMOVAL, and after those
 * rdma_get_cm_event fails with ENODEV.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"
#include "lib/cmc_int.h"

static void skip_stale(struct cmc_chan *c);

/* ---- the handle table ------------------------------------------------------------- */

static unsigned slot_of(uint32_t h, unsigned sz)
{
	return (h * 2654435761u) & (sz - 1);
}

struct cmc_id *cmc_id_find(uint32_t handle)
{
	if (!cmc.tabsz)
		return NULL;
	for (struct cmc_id *id = cmc.tab[slot_of(handle, cmc.tabsz)]; id; id = id->hnext)
		if (id->handle == handle)
			return id;
	return NULL;
}

static int tab_insert(struct cmc_id *id)
{
	if (cmc.nids + 1 > cmc.tabsz) {
		unsigned nsz = cmc.tabsz ? cmc.tabsz * 2 : 64;
		struct cmc_id **nt = calloc(nsz, sizeof(*nt));

		if (!nt)
			return cma_fail(ENOMEM);
		for (unsigned i = 0; i < cmc.tabsz; i++) {
			struct cmc_id *x, *next;

			for (x = cmc.tab[i]; x; x = next) {
				unsigned s = slot_of(x->handle, nsz);

				next = x->hnext;
				x->hnext = nt[s];
				nt[s] = x;
			}
		}
		free(cmc.tab);
		cmc.tab = nt;
		cmc.tabsz = nsz;
	}
	{
		unsigned s = slot_of(id->handle, cmc.tabsz);

		id->hnext = cmc.tab[s];
		cmc.tab[s] = id;
	}
	cmc.nids++;
	return 0;
}

static void tab_remove(struct cmc_id *id)
{
	struct cmc_id **pp;

	if (!cmc.tabsz)
		return;
	for (pp = &cmc.tab[slot_of(id->handle, cmc.tabsz)]; *pp; pp = &(*pp)->hnext)
		if (*pp == id) {
			*pp = id->hnext;
			cmc.nids--;
			return;
		}
}

unsigned cmc_live_ids(void)
{
	return cmc.nids;
}

/* ---- devices and snapshots ---------------------------------------------------------- */

struct ibv_context *cmc_verbs_of(const struct usp_snap *s)
{
	struct cma_dev *d = cmc_dev_of(s);

	return d ? d->verbs : NULL;
}

struct cma_dev *cmc_dev_of(const struct usp_snap *s)
{
	struct cma_dev *v = NULL;

	if (!s->has_dev)
		return NULL;
	pthread_mutex_lock(&g.lock);
	if (cma_init_locked() == 0) {
		for (int i = 0; i < g.ndevs; i++)
			if (htobe64(g.devs[i].guid) == s->dev_guid &&
			    strncmp(g.devs[i].name, s->dev_name, sizeof(s->dev_name)) == 0) {
				v = &g.devs[i];
				break;
			}
	}
	pthread_mutex_unlock(&g.lock);
	return v;
}

void cmc_apply_snap(struct cmc_id *id, const struct usp_snap *s)
{
	id->id.route.addr = s->addr;
	if (s->num_paths > 0) {
		id->path = s->path;
		id->id.route.path_rec = &id->path;
		id->id.route.num_paths = 1;
	} else {
		id->id.route.path_rec = NULL;
		id->id.route.num_paths = 0;
	}
	id->id.port_num = s->port_num;
	if (s->has_dev && !id->id.verbs) {
		struct cma_dev *d = cmc_dev_of(s);

		if (d) {
			id->id.verbs = d->verbs;
			id->id.pd = cma_dev_pd(d); /* the device's PD, as librdmacm */
		}
	}
}

/* ---- channels ------------------------------------------------------------------------- */

struct cmc_chan *cmc_chan_new(int sync)
{
	struct cmc_chan *c = calloc(1, sizeof(*c));
	struct usp_chan rep;
	int sv[2];

	if (!c)
		return cma_fail(ENOMEM), NULL;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		free(c);
		return NULL;
	}
	if (cmc_call(USP_CHAN_CREATE, 0, NULL, 0, &rep, sizeof(rep), sv[1], NULL) < 0) {
		int e = errno;
		close(sv[0]);
		close(sv[1]);
		free(c);
		errno = e;
		return NULL;
	}
	close(sv[1]);
	c->ch.fd = sv[0];
	c->handle = rep.chan;
	c->gen = cmc.gen;
	c->sync = sync;
	return c;
}

static void chan_free(struct cmc_chan *c)
{
	struct usp_chan b = { .chan = c->handle };
	int waiters;

	pthread_mutex_lock(&cmc.lock);
	waiters = c->waiters;
	c->dead = 1;
	/* ids still naming it (the user destroyed the channel first) */
	for (unsigned i = 0; i < cmc.tabsz; i++)
		for (struct cmc_id *x = cmc.tab[i]; x; x = x->hnext)
			if (x->chan == c)
				x->chan = NULL;
	pthread_mutex_unlock(&cmc.lock);
	if (!c->eof && cmc_gen_live(c->gen) == 0)
		cmc_call(USP_CHAN_DESTROY, 0, &b, sizeof(b), NULL, 0, -1, NULL);
	/* Another thread still waits in rdma_get_cm_event on it (rping's event
	 * thread does while main tears down): as with the kernel's rdma_cm
	 * fd, that wait never returns, so the channel is never freed. */
	if (waiters)
		return;
	close(c->ch.fd);
	free(c);
}

struct rdma_event_channel *cmc_create_event_channel(void)
{
	struct cmc_chan *c = cmc_chan_new(0);

	return c ? &c->ch : NULL;
}

void cmc_destroy_event_channel(struct rdma_event_channel *channel)
{
	if (channel)
		chan_free((struct cmc_chan *)channel);
}

/* ---- ids ------------------------------------------------------------------------------- */

static struct cmc_id *id_new(uint32_t handle, struct cmc_chan *c, void *context,
			     enum rdma_port_space ps, enum ibv_qp_type qpt)
{
	struct cmc_id *id = calloc(1, sizeof(*id));

	if (!id)
		return cma_fail(ENOMEM), NULL;
	id->handle = handle;
	id->gen = cmc.gen;
	id->chan = c;
	id->sync = c->sync;
	id->id.channel = &c->ch;
	id->id.context = context;
	id->id.ps = ps;
	id->id.qp_type = qpt;
	pthread_mutex_lock(&cmc.lock);
	if (tab_insert(id) < 0) {
		pthread_mutex_unlock(&cmc.lock);
		free(id);
		return NULL;
	}
	pthread_mutex_unlock(&cmc.lock);
	return id;
}

int cmc_create_id_qpt(struct rdma_event_channel *channel, struct rdma_cm_id **out,
		      void *context, enum rdma_port_space ps, enum ibv_qp_type qpt)
{
	struct cmc_chan *c = (struct cmc_chan *)channel;
	struct usp_create_id b;
	struct usp_handle rep;
	struct cmc_id *id;

	if (!out)
		return cma_fail(EINVAL);
	if (c && (c->eof || cmc_gen_live(c->gen) < 0))
		return cma_fail(ENODEV);
	if (!c && !(c = cmc_chan_new(1)))
		return -1;
	memset(&b, 0, sizeof(b));
	b.chan = c->handle;
	b.ps = (uint32_t)ps;
	b.qp_type = (uint32_t)qpt;
	if (cmc_call(USP_CREATE_ID, 0, &b, sizeof(b), &rep, sizeof(rep), -1, NULL) < 0)
		goto fail;
	id = id_new(rep.handle, c, context, ps, qpt);
	if (!id) {
		cmc_call(USP_DESTROY_ID, rep.handle, NULL, 0, NULL, 0, -1, NULL);
		goto fail;
	}
	*out = &id->id;
	return 0;
fail:
	if (c->sync) {
		int e = errno;
		chan_free(c);
		errno = e;
	}
	return -1;
}

int cmc_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out, void *context,
		  enum rdma_port_space ps)
{
	enum ibv_qp_type qpt = ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD : IBV_QPT_RC;

	if (ps != RDMA_PS_TCP && ps != RDMA_PS_UDP && ps != RDMA_PS_IB && ps != RDMA_PS_IPOIB)
		return cma_fail(EINVAL);
	return cmc_create_id_qpt(channel, out, context, ps, qpt);
}

int cmc_destroy_id(struct rdma_cm_id *cm_id)
{
	struct cmc_id *id = cmc_id_of(cm_id);

	if (!id)
		return cma_fail(EINVAL);
	if (id->sync && id->id.event) {
		cmc_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	if (cmc_id_live(id) == 0)
		cmc_call(USP_DESTROY_ID, id->handle, NULL, 0, NULL, 0, -1, NULL);
	pthread_mutex_lock(&cmc.lock);
	/* rdma_destroy_id(3): blocks until the events handed out are acked. */
	while (id->events_out)
		pthread_cond_wait(&cmc.cond, &cmc.lock);
	tab_remove(id);
	pthread_mutex_unlock(&cmc.lock);
	if (!id->sync && id->chan)
		skip_stale(id->chan);
	while (id->mcs) {
		struct cmc_mc *m = id->mcs;

		id->mcs = m->next;
		cmc_mc_free(m);
	}
	free(id->ep_qp_attr);
	rdma_freeaddrinfo(id->ai);
	if (id->sync)
		chan_free(id->chan);
	free(id);
	return 0;
}

/* rdma_migrate_id, after USP_MIGRATE_ID with USP_MIGRATE_HOLD: the frames
 * uscmd already wrote into the old channel are read out and given back,
 * id's to the new channel, the others to the old one, in their order and
 * ahead of everything uscmd held meanwhile; so id's events move as the
 * kernel's ucma_migrate_id moves them (a server that accepts on the
 * listener's channel and then migrates the new id still gets its
 * ESTABLISHED). Then the hold ends. A frame for neither (the old channel
 * is id's private one, going away) is dropped. */
static void move_events(struct cmc_id *id, struct cmc_chan *old, struct cmc_chan *nc)
{
	static const struct usp_requeue end = { .end = 1 };
	struct usp_requeue rq;
	int e = errno;

	for (;;) {
		ssize_t r = recv(old->ch.fd, &rq.ev, sizeof(rq.ev), MSG_DONTWAIT | MSG_TRUNC);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break; /* drained (or EOF: the daemon is gone) */
		if (r != (ssize_t)sizeof(rq.ev) || rq.ev.h.op != USP_EVENT)
			continue;
		if (usp_event_of(&rq.ev, id->handle))
			rq.chan = nc->handle;
		else if (!old->sync)
			rq.chan = old->handle;
		else
			continue;
		rq.end = 0;
		/* refused (uscmd's queue limits): that event is lost, as a CM
		 * event over the limits would be */
		cmc_call(USP_REQUEUE, 0, &rq, sizeof(rq), NULL, 0, -1, NULL);
	}
	cmc_call(USP_REQUEUE, 0, &end, sizeof(end), NULL, 0, -1, NULL);
	errno = e;
}

int cmc_migrate_id(struct rdma_cm_id *cm_id, struct rdma_event_channel *channel)
{
	struct cmc_id *id = cmc_id_of(cm_id);
	struct cmc_chan *nc = (struct cmc_chan *)channel, *old;
	struct usp_chan b;
	struct usp_int held = { 0 };

	if (!id)
		return cma_fail(EINVAL);
	if (cmc_id_live(id) < 0)
		return -1;
	if (nc && nc->gen != cmc.gen)
		return cma_fail(ENODEV);
	if (id->sync && id->id.event) {
		cmc_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	if (!nc && !(nc = cmc_chan_new(1)))
		return -1;
	old = id->chan;
	if (nc == old)
		return 0;
	memset(&b, 0, sizeof(b));
	b.chan = nc->handle;
	/* the old channel is read while uscmd holds every event of ours */
	if (old && !old->eof && !old->dead)
		b.flags = USP_MIGRATE_HOLD;
	if (cmc_call(USP_MIGRATE_ID, id->handle, &b, sizeof(b), &held, sizeof(held), -1, NULL) < 0) {
		int e = errno;
		if (nc->sync)
			chan_free(nc);
		return cma_fail(e);
	}
	pthread_mutex_lock(&cmc.lock);
	id->chan = nc;
	id->id.channel = &nc->ch;
	id->sync = nc->sync;
	pthread_mutex_unlock(&cmc.lock);
	/* uscmd holds our events only when the old channel had frames
	 * unread (a reply without a body: it held none) */
	if (held.v)
		move_events(id, old, nc);
	if (old && old->sync)
		chan_free(old);
	return 0;
}

/* ---- events ----------------------------------------------------------------------------- */

/* Frames at the head of the channel for ids already destroyed here are
 * dropped now, so the fd stays readable only while an event for a live id
 * waits (as a destroyed id's events leave the kernel's queue). Only while
 * no other thread reads the channel (it could take the frame between the
 * peek and the read); a request for a gone listener is left to
 * rdma_get_cm_event, which tells the daemon. */
static void skip_stale(struct cmc_chan *c)
{
	struct usp_event f;

	pthread_mutex_lock(&cmc.lock);
	while (!c->waiters && !c->eof && !c->dead) {
		ssize_t r = recv(c->ch.fd, &f, sizeof(f), MSG_PEEK | MSG_DONTWAIT);

		if (r != (ssize_t)sizeof(f) || f.h.op != USP_EVENT ||
		    f.event == RDMA_CM_EVENT_CONNECT_REQUEST || cmc_id_find(f.h.id))
			break;
		if (recv(c->ch.fd, &f, sizeof(f), MSG_DONTWAIT) != (ssize_t)sizeof(f))
			break;
	}
	pthread_mutex_unlock(&cmc.lock);
}

/* Takes the event the caller allocated before the frame left the socket
 * (cmc_get_cm_event): no event is lost to a failed allocation. */
static struct cmc_event *ev_new(struct cmc_event **spare, struct cmc_id *owner,
				enum rdma_cm_event_type t, int status)
{
	struct cmc_event *e = *spare;

	*spare = NULL;
	memset(e, 0, sizeof(*e));
	e->ev.id = &owner->id;
	e->ev.event = t;
	e->ev.status = status;
	e->owner = owner;
	return e;
}

static void ev_pdata(struct cmc_event *e, const uint8_t *p, uint32_t len, int ud)
{
	if (len > sizeof(e->pdata))
		len = sizeof(e->pdata);
	memcpy(e->pdata, p, len);
	if (ud) {
		e->ev.param.ud.private_data = len ? e->pdata : NULL;
		e->ev.param.ud.private_data_len = (uint8_t)len;
	} else {
		e->ev.param.conn.private_data = len ? e->pdata : NULL;
		e->ev.param.conn.private_data_len = (uint8_t)len;
	}
}

/* REP in, the QP is ours: RTR, RTS, then the RTU (USP_ESTABLISH), as
 * librdmacm does on the kernel's CONNECT_RESPONSE. */
/* The CONNECT_RESPONSE of an id with a QP: 0, -errno (a CONNECT_ERROR),
 * or 1: no QP (rdma_destroy_qp came first; the event stays as it is). */
static int conn_response(struct cmc_id *id, const struct usp_qp_attrs *qa)
{
	int e = 0, noqp = 0;

	/* INIT again first: the access flags follow the connection's
	 * responder resources, known only now. The event carries the three
	 * states' attributes: no round trip to the daemon before the RTU. */
	pthread_mutex_lock(&cmc.qp_lock);
	if (!id->id.qp)
		noqp = 1;
	else if (cmc_modify_with(id, qa) < 0)
		e = errno ? errno : EINVAL;
	pthread_mutex_unlock(&cmc.qp_lock);
	if (noqp)
		return 1;
	if (e) {
		struct usp_reject r;

		memset(&r, 0, sizeof(r));
		cmc_call(USP_REJECT, id->handle, &r, offsetof(struct usp_reject, pdata), NULL, 0, -1,
			 NULL);
		return -e;
	}
	/* the QP is in RTS: the RTU can only succeed or go unsaid (the peer's
	 * REP retries then end it), so nothing to wait for */
	if (cmc_call(USP_ESTABLISH | USP_F_NOREPLY, id->handle, NULL, 0, NULL, 0, -1, NULL) < 0)
		return -errno;
	return 0;
}

void cmc_mc_free(struct cmc_mc *m)
{
	cma_mc_ip_drop(&m->ipfd); /* its IP group (lib/cmc_calls.c) */
	free(m);
}

static void mc_attach(struct cmc_id *id, struct cmc_mc *m, const struct ibv_ah_attr *ah)
{
	m->mgid = ah->grh.dgid;
	m->mlid = ah->dlid;
	pthread_mutex_lock(&cmc.qp_lock);
	if (id->id.qp && !(m->flags & RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) && !m->attached &&
	    ibv_attach_mcast(id->id.qp, &m->mgid, m->mlid) == 0)
		m->attached = 1;
	pthread_mutex_unlock(&cmc.qp_lock);
}

/* A frame from the daemon becomes the user's event, or nothing (NULL: an
 * event for an id already destroyed here). */
static struct cmc_event *ev_from_frame(struct cmc_chan *c, const struct usp_event *f,
					struct cmc_event **spare)
{
	struct cmc_id *id, *l = NULL;
	struct cmc_event *e;
	int ud;

	pthread_mutex_lock(&cmc.lock);
	id = cmc_id_find(f->h.id);
	if (f->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		l = cmc_id_find(f->listen_id);
	pthread_mutex_unlock(&cmc.lock);
	if (f->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		struct cmc_chan *nc = c;

		if (!l || id) {
			/* the listener is gone here: the daemon drops the new id */
			cmc_call(USP_DESTROY_ID, f->h.id, NULL, 0, NULL, 0, -1, NULL);
			return NULL;
		}
		if (l->sync) {
			/* new ids of a synchronous listener get their own channel */
			struct usp_chan b;

			nc = cmc_chan_new(1);
			memset(&b, 0, sizeof(b));
			if (nc) {
				b.chan = nc->handle;
				if (cmc_call(USP_MIGRATE_ID, f->h.id, &b, sizeof(b), NULL, 0, -1, NULL) < 0) {
					chan_free(nc);
					nc = NULL;
				}
			}
			if (!nc) {
				cmc_call(USP_DESTROY_ID, f->h.id, NULL, 0, NULL, 0, -1, NULL);
				return NULL;
			}
		}
		id = id_new(f->h.id, nc, l->id.context, l->id.ps,
			    (enum ibv_qp_type)f->snap.qp_type);
		if (!id) {
			if (nc != c)
				chan_free(nc);
			cmc_call(USP_DESTROY_ID, f->h.id, NULL, 0, NULL, 0, -1, NULL);
			return NULL;
		}
	}
	if (!id)
		return NULL;
	cmc_apply_snap(id, &f->snap);
	if (f->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		id->req_qp = f->qp;
	ud = f->ud_event != 0;
	e = ev_new(spare, l ? l : id, (enum rdma_cm_event_type)f->event, f->status);
	e->ev.id = &id->id;
	if (l)
		e->ev.listen_id = &l->id;
	if (ud) {
		e->ev.param.ud.ah_attr = f->ud.ah_attr;
		e->ev.param.ud.qp_num = f->ud.qp_num;
		e->ev.param.ud.qkey = f->ud.qkey;
	} else {
		e->ev.param.conn.responder_resources = f->conn.resp_res;
		e->ev.param.conn.initiator_depth = f->conn.init_depth;
		e->ev.param.conn.flow_control = f->conn.flow_control;
		e->ev.param.conn.retry_count = f->conn.retry_count;
		e->ev.param.conn.rnr_retry_count = f->conn.rnr_retry_count;
		e->ev.param.conn.srq = f->conn.srq;
		e->ev.param.conn.qp_num = f->conn.qp_num;
	}
	ev_pdata(e, f->pdata, f->pdata_len, ud);
	switch (e->ev.event) {
	case RDMA_CM_EVENT_CONNECT_RESPONSE: {
		int rc = conn_response(id, &f->qp);

		if (rc != 1) {
			e->ev.event = rc ? RDMA_CM_EVENT_CONNECT_ERROR : RDMA_CM_EVENT_ESTABLISHED;
			e->ev.status = rc;
		}
		break;
	}
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_DISCONNECTED:
		cmc_qp_to_err(id);
		break;
	case RDMA_CM_EVENT_MULTICAST_JOIN:
	case RDMA_CM_EVENT_MULTICAST_ERROR: {
		struct cmc_mc *m;

		for (m = id->mcs; m; m = m->next)
			if ((uint64_t)(uintptr_t)m == f->arg)
				break;
		e->ev.param.ud.private_data = m ? m->context : NULL;
		e->ev.param.ud.private_data_len = 0;
		if (m && e->ev.event == RDMA_CM_EVENT_MULTICAST_JOIN)
			mc_attach(id, m, &f->ud.ah_attr);
		break;
	}
	case RDMA_CM_EVENT_USER:
		e->ev.param.arg = f->arg;
		break;
	default:
		break;
	}
	return e;
}

/* The daemon is gone: one DEVICE_REMOVAL per id of the channel. */
static struct cmc_event *removal_event(struct cmc_chan *c, struct cmc_event **spare)
{
	struct cmc_id *hit = NULL;

	pthread_mutex_lock(&cmc.lock);
	for (unsigned i = 0; i < cmc.tabsz && !hit; i++)
		for (struct cmc_id *id = cmc.tab[i]; id; id = id->hnext)
			if (id->chan == c && !id->removed) {
				id->removed = 1;
				hit = id;
				/* its memberships went with uscmd: so do their IP
				 * groups, as the kernel's device removal leaves them */
				for (struct cmc_mc *m = id->mcs; m; m = m->next)
					cma_mc_ip_drop(&m->ipfd);
				break;
			}
	pthread_mutex_unlock(&cmc.lock);
	return hit ? ev_new(spare, hit, RDMA_CM_EVENT_DEVICE_REMOVAL, 0) : NULL;
}

int cmc_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cmc_chan *c = (struct cmc_chan *)channel;
	struct cmc_event *spare = NULL;
	struct usp_event f;

	if (!c || !event)
		return cma_fail(EINVAL);
	for (;;) {
		struct cmc_event *e = NULL;
		ssize_t r;

		/* The event's memory first, before its frame leaves the socket
		 * or an id is marked removed: out of memory, the call fails
		 * with ENOMEM and the event is still there for the next one. */
		if (!spare && !(spare = malloc(sizeof(*spare))))
			return cma_fail(ENOMEM);
		if (c->eof) {
			e = removal_event(c, &spare);
			if (!e) {
				free(spare);
				return cma_fail(ENODEV);
			}
		} else {
			pthread_mutex_lock(&cmc.lock);
			c->waiters++;
			pthread_mutex_unlock(&cmc.lock);
			r = recv(c->ch.fd, &f, sizeof(f), MSG_TRUNC);
			pthread_mutex_lock(&cmc.lock);
			c->waiters--;
			if (c->dead) {
				pthread_mutex_unlock(&cmc.lock);
				for (;;)
					pause();
			}
			pthread_mutex_unlock(&cmc.lock);
			if (r < 0) {
				int err = errno;

				if (err == EINTR)
					continue;
				free(spare);
				return cma_fail(err); /* EAGAIN on an O_NONBLOCK channel */
			}
			if (r == 0) {
				c->eof = 1;
				continue;
			}
			if (r != (ssize_t)sizeof(f) || f.h.op != USP_EVENT || f.h.len != sizeof(f) ||
			    f.pdata_len > USP_PDATA_MAX)
				continue; /* not a frame of ours: dropped */
			e = ev_from_frame(c, &f, &spare);
			if (!e)
				continue; /* the spare stays for the next frame */
		}
		pthread_mutex_lock(&cmc.lock);
		e->owner->events_out++;
		pthread_mutex_unlock(&cmc.lock);
		if (!c->eof)
			skip_stale(c);
		*event = &e->ev;
		return 0;
	}
}

int cmc_ack_cm_event(struct rdma_cm_event *event)
{
	struct cmc_event *e = (struct cmc_event *)event;

	if (!e)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&cmc.lock);
	if (e->owner->events_out)
		e->owner->events_out--;
	pthread_cond_broadcast(&cmc.cond);
	pthread_mutex_unlock(&cmc.lock);
	free(e);
	return 0;
}

int cmc_sync_wait(struct cmc_id *id)
{
	struct rdma_cm_event *ev;

	if (!id->sync)
		return 0;
	if (id->id.event) {
		cmc_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	if (cmc_get_cm_event(id->id.channel, &ev) < 0)
		return -1;
	id->id.event = ev;
	if (ev->status)
		return cma_fail(cma_event_errno(ev));
	return 0;
}
