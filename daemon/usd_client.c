/*
 * usd_client.c - one client of uscmd: its requests and its events.
 *
 * Every request frame is checked whole (usp_check_request) before a field
 * is read; a bad one is answered with an error and changes nothing. A
 * request names ids by handle and is served only for the client's own
 * (usd_id_get). Limits per client, per uid and for the host
 * (usd_limits.c) bound what a process, and a user with many processes,
 * can make the daemon hold: ids, channels, events queued for a channel it
 * does not read, resolves and route queries in flight, multicast joins.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <linux/sockios.h>

#include <rdma/uscm_stats.h>

#include "daemon/usd_int.h"
#include "lib/cma_int.h"

struct usd_global usd;

/* ---- replies ----------------------------------------------------------------------------- */

static int g_noreply; /* the request being served was sent with USP_F_NOREPLY */

static void reply(struct usd_client *cl, uint16_t op, uint32_t seq, int err, const void *body,
		  size_t blen)
{
	uint8_t buf[sizeof(struct usp_reply) + sizeof(struct usp_snap) + 512];
	uint8_t *p = buf;
	struct usp_reply r;
	ssize_t n;

	if (g_noreply) {
		/* the client is not waiting for it: a failure is only counted */
		if (err)
			cl->errors++;
		return;
	}
	if (sizeof(r) + blen > sizeof(buf)) {
		p = malloc(sizeof(r) + blen);
		if (!p) {
			cl->dead = 1;
			return;
		}
	}
	memset(&r, 0, sizeof(r));
	usp_hdr_init(&r.h, (uint16_t)(USP_REPLY | op), sizeof(r) + (err ? 0 : blen), seq, 0);
	r.err = err;
	memcpy(p, &r, sizeof(r));
	if (!err && blen)
		memcpy(p + sizeof(r), body, blen);
	if (err)
		cl->errors++;
	n = send(cl->fd, p, r.h.len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n != (ssize_t)r.h.len) {
		/* a client that does not read its replies is not served */
		if (usd.verbose)
			fprintf(stderr, "uscmd: client %u (pid %d): reply not taken: dropped\n", cl->num,
				(int)cl->pid);
		cl->dead = 1;
	}
	if (p != buf)
		free(p);
}

static void snap_of(const struct rdma_cm_id *cm, struct usp_snap *s)
{
	memset(s, 0, sizeof(*s));
	s->addr = cm->route.addr;
	if (cm->route.num_paths > 0 && cm->route.path_rec) {
		s->path = cm->route.path_rec[0];
		s->num_paths = 1;
	}
	s->port_num = cm->port_num;
	s->qp_type = cm->qp_type;
	if (cm->verbs) {
		s->has_dev = 1;
		s->dev_guid = ibv_get_device_guid(cm->verbs->device);
		snprintf(s->dev_name, sizeof(s->dev_name), "%s", ibv_get_device_name(cm->verbs->device));
	}
}

/* INIT, RTR and RTS attributes of an id (what its client's QP needs). */
static void qp_attrs_of(struct rdma_cm_id *cm, struct usp_qp_attrs *qa)
{
	static const enum ibv_qp_state st[3] = { IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS };

	memset(qa, 0, sizeof(*qa));
	for (int i = 0; i < 3; i++) {
		qa->s[i].attr.qp_state = st[i];
		if (rdma_init_qp_attr(cm, &qa->s[i].attr, &qa->s[i].mask) < 0)
			qa->s[i].err = errno ? errno : EINVAL;
	}
	qa->valid = 1;
	pthread_mutex_lock(&g.lock);
	qa->resp_res = cma_id_of(cm)->resp_res;
	qa->init_depth = cma_id_of(cm)->init_depth;
	pthread_mutex_unlock(&g.lock);
}

/* ---- clients ------------------------------------------------------------------------------- */

int usd_client_refuse(int fd, const struct usd_cred *cr)
{
	struct {
		struct usp_reply r;
	} m;
	struct usd_uid *u;

	u = usd_uid_get(cr->uid, 0);
	if (!u || u->nclients < usd.lim.clients_per_uid)
		return 0;
	/* the reply to the HELLO the library sends first, so that its first
	 * call fails with EAGAIN and says why, rather than finding the
	 * socket closed (which reads as "no daemon", and a library in auto
	 * mode would then try in-process mode) */
	memset(&m, 0, sizeof(m));
	usp_hdr_init(&m.r.h, USP_REPLY | USP_HELLO, sizeof(m), 0, 0);
	m.r.err = EAGAIN;
	send(fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL);
	usd.clients_refused++;
	if (usd.verbose || usd.clients_refused == 1)
		fprintf(stderr, "uscmd: pid %d uid %u: refused: %u connections of that uid already "
				"(--max-clients-per-uid)%s\n",
			(int)cr->pid, (unsigned)cr->uid, u->nclients,
			usd.verbose ? "" : "; further refusals are counted in --status");
	close(fd);
	return 1;
}

struct usd_client *usd_client_new(int fd, const struct usd_cred *c)
{
	struct usd_client *cl = calloc(1, sizeof(*cl));
	struct usd_cred cr = *c;

	if (!cl)
		return NULL;
	cl->u = usd_uid_get(cr.uid, 1);
	if (!cl->u) {
		free(cl);
		return NULL;
	}
	cl->fd = fd;
	cl->pid = cr.pid;
	cl->uid = cr.uid;
	cl->gid = cr.gid;
	cl->caller.uid = cr.uid;
	cl->caller.priv = cr.priv;
	cl->num = ++usd.next_client;
	cl->ec = rdma_create_event_channel();
	if (!cl->ec) {
		usd_uid_put(cl->u);
		free(cl);
		return NULL;
	}
	cl->u->nclients++;
	fcntl(cl->ec->fd, F_SETFL, fcntl(cl->ec->fd, F_GETFL) | O_NONBLOCK);
	cl->next = usd.clients;
	if (usd.clients)
		usd.clients->pprev = &cl->next;
	cl->pprev = &usd.clients;
	usd.clients = cl;
	usd.nclients++;
	usd.clients_total++;
	if (usd.verbose)
		fprintf(stderr, "uscmd: client %u: pid %d uid %u%s\n", cl->num, (int)cl->pid,
			(unsigned)cl->uid, cl->caller.priv ? " (privileged)" : "");
	return cl;
}

void usd_client_free(struct usd_client *cl)
{
	/* As the kernel when the rdma_cm fd closes: every id is destroyed, so
	 * established connections send DREQ, half-open ones REJ, listeners and
	 * ports are released and multicast groups left (the library does it). */
	while (cl->ids) {
		struct usd_id *id = cl->ids;

		rdma_destroy_id(id->cm);
		usd_id_free(id);
	}
	rdma_destroy_event_channel(cl->ec);
	cma_caller_release(&cl->caller); /* after its ids, which referenced it too */
	for (unsigned i = 0; i < cl->nchans; i++)
		if (cl->chans[i] >= 0) {
			close(cl->chans[i]);
			usd_uncharge(cl, USD_CHANS, 1);
		}
	free(cl->chans);
	free(cl->room);
	while (cl->rqhead) {
		struct usd_frame *f = cl->rqhead;

		cl->rqhead = f->next;
		usd_uncharge(cl, USD_QBYTES, sizeof(*f));
		free(f);
	}
	while (cl->qhead) {
		struct usd_frame *f = cl->qhead;

		cl->qhead = f->next;
		usd_uncharge(cl, USD_QBYTES, sizeof(*f));
		free(f);
	}
	cl->u->nclients--;
	usd_uid_put(cl->u);
	*cl->pprev = cl->next;
	if (cl->next)
		cl->next->pprev = cl->pprev;
	usd.nclients--;
	if (usd.verbose)
		fprintf(stderr, "uscmd: client %u (pid %d) gone\n", cl->num, (int)cl->pid);
	close(cl->fd);
	free(cl);
}

/* ---- events --------------------------------------------------------------------------------- */

/* What one event frame costs the socket it waits in (its skb's truesize,
 * which is what SIOCOUTQ counts), measured once on a pair of our own;
 * twice that is the bound chan_room assumes per frame sent. */
static unsigned frame_truesize(void)
{
	if (!usd.frame_truesize) {
		struct usp_event ev;
		int sv[2], q = 0;

		memset(&ev, 0, sizeof(ev));
		usd.frame_truesize = 8192; /* if it cannot be measured: more than any kernel's */
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0) {
			if (send(sv[1], &ev, sizeof(ev), MSG_DONTWAIT) == (ssize_t)sizeof(ev) &&
			    ioctl(sv[1], SIOCOUTQ, &q) == 0 && q > 0)
				usd.frame_truesize = 2 * (unsigned)q;
			close(sv[0]);
			close(sv[1]);
		}
	}
	return usd.frame_truesize;
}

/* Whether channel chan may take another frame: the kernel memory an
 * unread channel holds is bounded by --chan-buffer, not by the socket's
 * send buffer, which its client may have raised (up to wmem_max) on a
 * copy of the fd it kept. SIOCOUTQ: the bytes (truesize) not yet read.
 * Reading only lowers it, so while what was there at the last question
 * plus what was sent since is below the bound there is room for sure, and
 * the kernel is asked only near the bound (a system call per event
 * otherwise). */
static int chan_room(struct usd_client *cl, uint32_t chan)
{
	struct usd_room *r = &cl->room[chan];
	int q = 0;

	if ((uint64_t)r->q + (uint64_t)r->sent * frame_truesize() < usd.lim.chan_buffer)
		return 1;
	if (ioctl(cl->chans[chan], SIOCOUTQ, &q) < 0)
		return 1;
	r->q = (uint32_t)q;
	r->sent = 0;
	return (unsigned)q < usd.lim.chan_buffer;
}

/* Which limit a frame more in cl's queue is over (err: usd_charge's). */
static const char *queue_limit(const struct usd_client *cl, int err)
{
	const uint64_t n = sizeof(struct usd_frame);

	if (err == EMFILE)
		return "--max-queued";
	if (cl->use[USD_QBYTES] + n > usd.lim.client[USD_QBYTES])
		return "--max-queued-bytes";
	if (cl->u->use[USD_QBYTES] + n > usd.lim.uid[USD_QBYTES])
		return "--max-queued-bytes-per-uid";
	return "--max-queued-bytes-total";
}

static void send_event(struct usd_client *cl, uint32_t chan, const struct usp_event *ev)
{
	struct usd_frame *f;
	int err;

	if (chan >= cl->nchans || cl->chans[chan] < 0)
		return; /* the channel is gone: nobody to tell */
	if (!cl->qhead && !cl->hold && chan_room(cl, chan)) {
		ssize_t n = send(cl->chans[chan], ev, sizeof(*ev), MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n == (ssize_t)sizeof(*ev)) {
			cl->room[chan].sent++;
			return;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return; /* the client closed its end */
	}
	err = cl->nqueued >= usd.lim.max_queued ? EMFILE : usd_charge(cl, USD_QBYTES, sizeof(*f));
	if (err) {
		/* a CM event cannot be refused: the client that does not read
		 * them goes (a user event is refused before it is posted) */
		fprintf(stderr, "uscmd: client %u (pid %d uid %u) does not read its events (%u queued, "
				"%llu bytes; %s): dropped\n",
			cl->num, (int)cl->pid, (unsigned)cl->uid, cl->nqueued,
			(unsigned long long)cl->use[USD_QBYTES], queue_limit(cl, err));
		cl->dead = 1;
		return;
	}
	f = malloc(sizeof(*f));
	if (!f) {
		usd_uncharge(cl, USD_QBYTES, sizeof(*f));
		cl->dead = 1;
		return;
	}
	f->next = NULL;
	f->chan = chan;
	f->ev = *ev;
	if (cl->qtail)
		cl->qtail->next = f;
	else
		cl->qhead = f;
	cl->qtail = f;
	cl->nqueued++;
}

int usd_client_flush(struct usd_client *cl)
{
	if (cl->hold)
		return 1; /* a migration reads the old channel: nothing moves */
	/* a turn's worth: a client reading a 32 MiB backlog fast must not
	 * hold the loop for tens of ms; the rest goes in the next turns */
	for (int k = 0; cl->qhead; k++) {
		struct usd_frame *f = cl->qhead;

		if (k == USD_FLUSH_TURN)
			return 2;

		if (f->chan < cl->nchans && cl->chans[f->chan] >= 0) {
			ssize_t n;

			if (!chan_room(cl, f->chan))
				return 1;
			n = send(cl->chans[f->chan], &f->ev, sizeof(f->ev), MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 1;
			if (n == (ssize_t)sizeof(f->ev))
				cl->room[f->chan].sent++;
		}
		cl->qhead = f->next;
		if (!cl->qhead)
			cl->qtail = NULL;
		cl->nqueued--;
		usd_uncharge(cl, USD_QBYTES, sizeof(*f));
		free(f);
	}
	return 0;
}

static int conn_event(enum rdma_cm_event_type t)
{
	return t != RDMA_CM_EVENT_USER && t != RDMA_CM_EVENT_ADDRINFO_RESOLVED &&
	       t != RDMA_CM_EVENT_ADDRINFO_ERROR && t != RDMA_CM_EVENT_MULTICAST_JOIN &&
	       t != RDMA_CM_EVENT_MULTICAST_ERROR;
}

void usd_client_events(struct usd_client *cl)
{
	struct rdma_cm_event *ev;
	struct usp_event *f = malloc(sizeof(*f));

	if (!f)
		return;
	/* cma_chan_pending first: an empty queue costs no syscall (the
	 * library's rdma_get_cm_event would ask fcntl whether to block) */
	while (!cl->dead && cma_chan_pending(cl->ec) && rdma_get_cm_event(cl->ec, &ev) == 0) {
		struct usd_id *id, *lid = NULL;
		int ud;

		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct rdma_cm_id *nc = ev->id;

			lid = ev->listen_id->context;
			/* usd_id_new counts it against the client, its uid and
			 * the host */
			id = lid->pending < (unsigned)lid->backlog ? usd_id_new(cl, nc, lid->chan) : NULL;
			if (!id) {
				if (lid->pending >= (unsigned)lid->backlog)
					cl->backlog_rejects++;
				/* over its limit: refused as a full backlog would be */
				rdma_ack_cm_event(ev);
				rdma_reject(nc, NULL, 0);
				rdma_destroy_id(nc);
				continue;
			}
			id->listener = lid->handle;
			lid->pending++;
		} else {
			id = ev->id->context;
		}
		/* the end of a request in flight: its count is released */
		if ((ev->event == RDMA_CM_EVENT_ADDR_RESOLVED || ev->event == RDMA_CM_EVENT_ADDR_ERROR) &&
		    id->resolving) {
			id->resolving = 0;
			usd_uncharge(cl, USD_RESOLVES, 1);
		}
		if ((ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED || ev->event == RDMA_CM_EVENT_ROUTE_ERROR) &&
		    id->routing) {
			id->routing = 0;
			usd_uncharge(cl, USD_ROUTES, 1);
		}
		memset(f, 0, sizeof(*f));
		usp_hdr_init(&f->h, USP_EVENT, sizeof(*f), 0, id->handle);
		f->event = ev->event;
		f->status = ev->status;
		f->listen_id = lid ? lid->handle : 0;
		ud = ev->id->qp_type == IBV_QPT_UD || !conn_event(ev->event);
		f->ud_event = (uint32_t)ud;
		if (ev->event == RDMA_CM_EVENT_USER) {
			f->arg = ev->param.arg;
		} else if (ev->event == RDMA_CM_EVENT_MULTICAST_JOIN ||
			   ev->event == RDMA_CM_EVENT_MULTICAST_ERROR) {
			f->arg = (uint64_t)(uintptr_t)ev->param.ud.private_data;
			f->ud.ah_attr = ev->param.ud.ah_attr;
			f->ud.qp_num = ev->param.ud.qp_num;
			f->ud.qkey = ev->param.ud.qkey;
		} else if (conn_event(ev->event) && ud) {
			f->ud.ah_attr = ev->param.ud.ah_attr;
			f->ud.qp_num = ev->param.ud.qp_num;
			f->ud.qkey = ev->param.ud.qkey;
			if (ev->param.ud.private_data && ev->param.ud.private_data_len) {
				f->pdata_len = ev->param.ud.private_data_len;
				memcpy(f->pdata, ev->param.ud.private_data, f->pdata_len);
			}
		} else if (conn_event(ev->event)) {
			f->conn.resp_res = ev->param.conn.responder_resources;
			f->conn.init_depth = ev->param.conn.initiator_depth;
			f->conn.flow_control = ev->param.conn.flow_control;
			f->conn.retry_count = ev->param.conn.retry_count;
			f->conn.rnr_retry_count = ev->param.conn.rnr_retry_count;
			f->conn.srq = ev->param.conn.srq;
			f->conn.qp_num = ev->param.conn.qp_num;
			if (ev->param.conn.private_data && ev->param.conn.private_data_len) {
				f->pdata_len = ev->param.conn.private_data_len;
				memcpy(f->pdata, ev->param.conn.private_data, f->pdata_len);
			}
		}
		snap_of(ev->id, &f->snap);
		if (ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE)
			qp_attrs_of(ev->id, &f->qp);
		/* a connection request: the attributes an accept that lowers
		 * nothing will need (the device's caps applied), so it costs
		 * the client one round trip, not two */
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST && !ud &&
		    cma_accept_prepare(ev->id, NULL) == 0)
			qp_attrs_of(ev->id, &f->qp);
		if (ev->event == RDMA_CM_EVENT_ESTABLISHED || ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE)
			cl->established++;
		cl->events++;
		rdma_ack_cm_event(ev);
		send_event(cl, id->chan, f);
	}
	free(f);
}

/* ---- requests ------------------------------------------------------------------------------- */

/* The new id is answered (or gone): its listener's backlog has room again. */
static void uncount(struct usd_client *cl, struct usd_id *id)
{
	struct usd_id *l;
	int err;

	if (!id->listener)
		return;
	l = usd_id_get(cl, id->listener, &err);
	if (l && l->pending)
		l->pending--;
	id->listener = 0;
}

static int chan_ok(const struct usd_client *cl, uint32_t chan)
{
	return chan < cl->nchans && cl->chans[chan] >= 0;
}

/* fd: checked by usd_req_fd (an AF_UNIX SOCK_SEQPACKET end whose peer is
 * of the client's uid). Its send buffer is left as the client made it (at
 * most net.core.wmem_max): events beyond it, or beyond --chan-buffer,
 * wait in uscmd's queue, which the limits bound. */
static int chan_add(struct usd_client *cl, int fd, uint32_t *out)
{
	unsigned i;
	int err;

	for (i = 0; i < cl->nchans; i++)
		if (cl->chans[i] < 0)
			break;
	if (i == cl->nchans && cl->nchans >= usd.lim.client[USD_CHANS])
		return EMFILE;
	err = usd_admit(cl, USD_CHANS, 1);
	if (err) {
		cl->limit_refusals++;
		return err;
	}
	if (i == cl->nchans) {
		int *n = realloc(cl->chans, (cl->nchans + 1) * sizeof(*n));
		struct usd_room *rm;

		if (!n)
			return ENOMEM;
		cl->chans = n;
		rm = realloc(cl->room, (cl->nchans + 1) * sizeof(*rm));
		if (!rm)
			return ENOMEM;
		cl->room = rm;
		cl->nchans++;
	}
	cl->room[i].q = cl->room[i].sent = 0; /* a new socket: nothing unread */
	usd_charge(cl, USD_CHANS, 1);
	shutdown(fd, SHUT_RD);
	cl->chans[i] = fd;
	*out = i;
	return 0;
}

static int valid_ps(uint32_t ps)
{
	return ps == RDMA_PS_TCP || ps == RDMA_PS_UDP || ps == RDMA_PS_IB || ps == RDMA_PS_IPOIB;
}

/* rdma_conn_param from a request; defaults as the library's for NULL */
static void conn_param(const struct usp_conn *b, struct rdma_conn_param *p)
{
	memset(p, 0, sizeof(*p));
	if (b->has_param) {
		p->responder_resources = b->resp_res;
		p->initiator_depth = b->init_depth;
		p->flow_control = b->flow_control;
		p->retry_count = b->retry_count;
		p->rnr_retry_count = b->rnr_retry_count;
	} else {
		p->responder_resources = RDMA_MAX_RESP_RES;
		p->initiator_depth = RDMA_MAX_INIT_DEPTH;
		p->flow_control = 0; /* as lib/cma_conn.c's, librdmacm's */
		p->retry_count = 7;
		p->rnr_retry_count = 7;
	}
	p->srq = b->srq;
	p->qp_num = b->qp_num;
	p->private_data = b->pdata_len ? b->pdata : NULL;
	p->private_data_len = (uint8_t)b->pdata_len;
}

/* A token bucket per uid: --status-rate a second, as many at once; root's
 * are not limited (the operator's, and root can stop the daemon anyway). */
static int status_allowed(struct usd_client *cl)
{
	struct usd_uid *u = cl->u;
	struct timespec ts;
	uint64_t now;
	double cap = usd.lim.status_per_sec;

	if (cl->uid == 0)
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (!u->status_ns)
		u->status_tokens = cap;
	else
		u->status_tokens += (double)(now - u->status_ns) * cap / 1e9;
	if (u->status_tokens > cap)
		u->status_tokens = cap;
	u->status_ns = now;
	if (u->status_tokens < 1)
		return 0;
	u->status_tokens -= 1;
	return 1;
}

static int errno_of(int rc)
{
	return rc < 0 ? (errno ? errno : EIO) : 0;
}

void usd_client_request(struct usd_client *cl, const uint8_t *buf, size_t n, int fd_in,
			int truncated)
{
	struct usp_hdr h;
	const uint8_t *b = buf + sizeof(h);
	struct usd_id *id = NULL;
	union {
		struct usp_snap snap;
		struct usp_handle handle;
		struct usp_chan chan;
		struct usp_hello_rep hello;
		struct usp_qp_attr_rep qp;
		struct usp_ece ece;
		struct usp_int i;
		struct uscm_stats stats;
		struct usp_qp_attrs qa;
	} r;
	size_t rlen = 0;
	int err, rc = 0, chan_err;

	memset(&h, 0, sizeof(h));
	memcpy(&h, buf, n < sizeof(h) ? n : sizeof(h));
	err = truncated ? EMSGSIZE : usp_check_request(buf, n);
	/* a malformed frame is always answered, whatever its flags say */
	g_noreply = !err && (h.op & USP_F_NOREPLY) != 0;
	h.op &= (uint16_t)~USP_F_NOREPLY;
	if (err) {
		usd.malformed++;
		if (usd.verbose)
			fprintf(stderr, "uscmd: client %u: bad request (op %u, %zu bytes): %s\n", cl->num,
				h.op, n, strerror(err));
		usd_req_fd(err, h.op, fd_in, cl->uid, &chan_err);
		reply(cl, h.op < USP_OP_MAX ? h.op : 0, h.seq, err, NULL, 0);
		return;
	}
	cl->requests++;
	/* only a new channel (an event channel end of this client's uid) and
	 * the HELLO (a route socket) keep their fd (usd_fd.c): root must not
	 * write into anything else */
	fd_in = usd_req_fd(0, h.op, fd_in, cl->uid, &chan_err);
	/* Nothing before the HELLO has named the client's namespace: served
	 * in ours, its ids would bind and resolve where it is not. (The
	 * host-wide counters need no namespace: uscmd --status asks so.) */
	if (!cl->helloed && h.op != USP_HELLO && h.op != USP_STATUS && h.op != USP_STATS) {
		if (fd_in >= 0)
			close(fd_in);
		reply(cl, h.op, h.seq, EPROTO, NULL, 0);
		return;
	}
	switch (h.op) {
	case USP_HELLO: case USP_CHAN_CREATE: case USP_CHAN_DESTROY: case USP_CREATE_ID:
	case USP_STATS: case USP_STATUS: case USP_REQUEUE:
		break;
	default:
		id = usd_id_get(cl, h.id, &err);
		if (!id) {
			reply(cl, h.op, h.seq, err, NULL, 0);
			return;
		}
	}
	memset(&r, 0, sizeof(r));
	errno = 0;
	switch (h.op) {
	case USP_HELLO: {
		struct usp_hello x;

		memcpy(&x, b, sizeof(x));
		if (x.version != USP_VERSION || fd_in < 0) {
			err = x.version != USP_VERSION ? EPROTO : chan_err;
		} else {
			struct cma_caller c = cl->caller;

			/* the client's namespace: its route socket (cma_netns.c) */
			if (cma_caller_from_fd(&c, fd_in) < 0) {
				err = errno;
			} else if (cl->helloed) {
				/* one connection, one namespace: a second HELLO
				 * changes nothing */
				err = c.ns != cl->caller.ns ? EINVAL : 0;
				cma_caller_release(&c);
			} else {
				cl->caller = c;
				cl->helloed = 1;
			}
		}
		if (fd_in >= 0)
			close(fd_in);
		if (err) {
			if (usd.verbose)
				fprintf(stderr, "uscmd: client %u: HELLO refused: %s\n", cl->num,
					strerror(err));
			break;
		}
		if (usd.verbose && cl->caller.ns)
			fprintf(stderr, "uscmd: client %u: network namespace %llu\n", cl->num,
				(unsigned long long)cma_netns_key(cl->caller.ns));
		r.hello.client = cl->num;
		r.hello.max_ids = (uint32_t)usd.lim.client[USD_IDS];
		rlen = sizeof(r.hello);
		break;
	}
	case USP_CHAN_CREATE:
		err = chan_err ? chan_err : chan_add(cl, fd_in, &r.chan.chan);
		if (err && fd_in >= 0)
			close(fd_in);
		rlen = sizeof(r.chan);
		break;
	case USP_CHAN_DESTROY: {
		struct usp_chan x;

		memcpy(&x, b, sizeof(x));
		if (!chan_ok(cl, x.chan)) {
			err = EINVAL;
			break;
		}
		close(cl->chans[x.chan]);
		cl->chans[x.chan] = -1;
		usd_uncharge(cl, USD_CHANS, 1);
		break;
	}
	case USP_CREATE_ID: {
		struct usp_create_id x;
		struct rdma_cm_id *cm;

		memcpy(&x, b, sizeof(x));
		if (!chan_ok(cl, x.chan) || !valid_ps(x.ps) ||
		    (x.qp_type != IBV_QPT_RC && x.qp_type != IBV_QPT_UC && x.qp_type != IBV_QPT_UD &&
		     x.qp_type != IBV_QPT_XRC_SEND && x.qp_type != IBV_QPT_XRC_RECV)) {
			err = EINVAL;
			break;
		}
		/* before the library's id exists: a refusal costs nothing */
		err = usd_admit(cl, USD_IDS, 1);
		if (err) {
			cl->limit_refusals++;
			break;
		}
		if (rdma_create_id(cl->ec, &cm, NULL, (enum rdma_port_space)x.ps) < 0) {
			err = errno_of(-1);
			break;
		}
		cm->qp_type = (enum ibv_qp_type)x.qp_type;
		cma_id_set_caller(cm, &cl->caller);
		id = usd_id_new(cl, cm, x.chan);
		if (!id) {
			err = errno ? errno : ENOMEM;
			rdma_destroy_id(cm);
			break;
		}
		r.handle.handle = id->handle;
		rlen = sizeof(r.handle);
		break;
	}
	case USP_DESTROY_ID:
		uncount(cl, id);
		rdma_destroy_id(id->cm);
		usd_id_free(id);
		break;
	case USP_MIGRATE_ID: {
		struct usp_chan x;

		memcpy(&x, b, sizeof(x));
		if (!chan_ok(cl, x.chan) || (x.flags & ~USP_MIGRATE_HOLD)) {
			err = EINVAL;
			break;
		}
		/* as the kernel's ucma_migrate_id: the id's events still
		 * waiting here move with it, in their order (a connection
		 * request is its listener's event) */
		for (struct usd_frame *f = cl->qhead; f; f = f->next)
			if (f->chan == id->chan && usp_event_of(&f->ev, id->handle))
				f->chan = x.chan;
		/* a hold only when the old channel has frames unread (its
		 * unread bytes: SIOCOUTQ on our end): else none of the id's
		 * can be there, and the migration costs no second request */
		if ((x.flags & USP_MIGRATE_HOLD) && chan_ok(cl, id->chan) && x.chan != id->chan) {
			int q = 1;

			if (ioctl(cl->chans[id->chan], SIOCOUTQ, &q) < 0 || q > 0)
				cl->hold = 1;
		}
		id->chan = x.chan;
		r.i.v = cl->hold;
		rlen = sizeof(r.i);
		break;
	}
	case USP_REQUEUE: {
		struct usp_requeue rq, *x = &rq;
		struct usd_frame *f;
		int e2;

		memcpy(x, b, sizeof(*x));
		if (!cl->hold) {
			err = EINVAL;
		} else if (x->end) {
			/* the frames given back first, then what was held */
			cl->hold = 0;
			if (cl->rqhead) {
				cl->rqtail->next = cl->qhead;
				if (!cl->qhead)
					cl->qtail = cl->rqtail;
				cl->qhead = cl->rqhead;
				cl->rqhead = cl->rqtail = NULL;
			}
			/* in the channels before rdma_migrate_id returns, as
			 * the kernel's queue is moved by the time its write
			 * does (what finds no room waits, in order) */
			while (usd_client_flush(cl) == 2)
				;
		} else if (!chan_ok(cl, x->chan) || x->ev.h.op != USP_EVENT ||
			   x->ev.h.len != sizeof(x->ev) || x->ev.pdata_len > USP_PDATA_MAX) {
			err = EINVAL;
		} else if (!usd_id_get(cl, x->ev.h.id, &e2)) {
			/* the id is gone: its event with it */
		} else if (cl->nqueued >= usd.lim.max_queued) {
			err = ENOMEM;
			cl->limit_refusals++;
		} else if ((err = usd_charge(cl, USD_QBYTES, sizeof(*f))) != 0) {
			cl->limit_refusals++;
		} else if (!(f = malloc(sizeof(*f)))) {
			usd_uncharge(cl, USD_QBYTES, sizeof(*f));
			err = ENOMEM;
		} else {
			f->next = NULL;
			f->chan = x->chan;
			f->ev = x->ev;
			if (cl->rqtail)
				cl->rqtail->next = f;
			else
				cl->rqhead = f;
			cl->rqtail = f;
			cl->nqueued++;
		}
		break;
	}
	case USP_BIND: {
		struct usp_addr x;

		memcpy(&x, b, sizeof(x));
		err = errno_of(rdma_bind_addr(id->cm, (struct sockaddr *)&x.addr));
		snap_of(id->cm, &r.snap);
		rlen = sizeof(r.snap);
		break;
	}
	case USP_RESOLVE_ADDR: {
		struct usp_resolve_addr x;

		memcpy(&x, b, sizeof(x));
		/* counted until its ADDR_RESOLVED / ADDR_ERROR (or the id goes) */
		if (!id->resolving && (err = usd_charge(cl, USD_RESOLVES, 1)) != 0)
			break;
		err = errno_of(rdma_resolve_addr(id->cm, x.has_src ? (struct sockaddr *)&x.src : NULL,
						 (struct sockaddr *)&x.dst, x.timeout_ms));
		if (err && !id->resolving)
			usd_uncharge(cl, USD_RESOLVES, 1);
		else
			id->resolving = 1;
		snap_of(id->cm, &r.snap);
		rlen = sizeof(r.snap);
		break;
	}
	case USP_RESOLVE_ROUTE: {
		struct usp_int x;

		memcpy(&x, b, sizeof(x));
		/* counted until its ROUTE_RESOLVED / ROUTE_ERROR (or the id goes) */
		if (!id->routing && (err = usd_charge(cl, USD_ROUTES, 1)) != 0)
			break;
		err = errno_of(rdma_resolve_route(id->cm, x.v));
		if (err && !id->routing)
			usd_uncharge(cl, USD_ROUTES, 1);
		else
			id->routing = 1;
		snap_of(id->cm, &r.snap);
		rlen = sizeof(r.snap);
		break;
	}
	case USP_QUERY:
		snap_of(id->cm, &r.snap);
		rlen = sizeof(r.snap);
		break;
	case USP_SET_OPTION: {
		struct usp_set_option x;

		memset(&x, 0, sizeof(x));
		memcpy(&x, b, n - sizeof(h));
		err = errno_of(rdma_set_option(id->cm, x.level, x.optname, x.optlen ? x.optval : NULL,
					       x.optlen));
		snap_of(id->cm, &r.snap);
		rlen = sizeof(r.snap);
		break;
	}
	case USP_INIT_QP_ATTR: {
		struct usp_int x;

		memcpy(&x, b, sizeof(x));
		if (x.v < IBV_QPS_RESET || x.v > IBV_QPS_ERR) {
			err = EINVAL;
			break;
		}
		r.qp.attr.qp_state = (enum ibv_qp_state)x.v;
		err = errno_of(rdma_init_qp_attr(id->cm, &r.qp.attr, &r.qp.mask));
		rlen = sizeof(r.qp);
		break;
	}
	case USP_CONNECT:
	case USP_ACCEPT: {
		struct usp_conn x;
		struct rdma_conn_param p;

		memset(&x, 0, sizeof(x));
		memcpy(&x, b, n - sizeof(h));
		conn_param(&x, &p);
		cma_id_of(id->cm)->qp_uc = x.qp_uc;
		if (h.op == USP_CONNECT) {
			cl->connects++;
			err = errno_of(rdma_connect(id->cm, &p));
		} else {
			err = errno_of(rdma_accept(id->cm, &p));
			if (!err)
				uncount(cl, id);
		}
		break;
	}
	case USP_LISTEN: {
		struct usp_int x;

		memcpy(&x, b, sizeof(x));
		err = errno_of(rdma_listen(id->cm, x.v));
		if (!err)
			id->backlog = x.v > 0 && x.v < g.max_backlog ? x.v : g.max_backlog;
		snap_of(id->cm, &r.snap);
		rlen = sizeof(r.snap);
		break;
	}
	case USP_REJECT: {
		struct usp_reject x;

		memset(&x, 0, sizeof(x));
		memcpy(&x, b, n - sizeof(h));
		rc = x.ece ? rdma_reject_ece(id->cm, x.pdata_len ? x.pdata : NULL, (uint8_t)x.pdata_len)
			   : rdma_reject(id->cm, x.pdata_len ? x.pdata : NULL, (uint8_t)x.pdata_len);
		err = errno_of(rc);
		if (!err)
			uncount(cl, id);
		break;
	}
	case USP_ESTABLISH:
		err = errno_of(rdma_establish(id->cm));
		break;
	case USP_NOTIFY: {
		struct usp_int x;

		memcpy(&x, b, sizeof(x));
		err = errno_of(rdma_notify(id->cm, (enum ibv_event_type)x.v));
		break;
	}
	case USP_DISCONNECT: {
		struct cma_id *ci = cma_id_of(id->cm);
		int st = -1;

		pthread_mutex_lock(&g.lock);
		if (ci->conn)
			st = cmp_conn_state(ci->conn);
		pthread_mutex_unlock(&g.lock);
		err = errno_of(rdma_disconnect(id->cm));
		/* whether a DREQ/DREP left: a synchronous id then waits */
		r.i.v = st == CMP_ESTABLISHED || st == CMP_DREQ_RCVD;
		rlen = sizeof(r.i);
		break;
	}
	case USP_SET_ECE: {
		struct usp_ece x;

		memcpy(&x, b, sizeof(x));
		err = errno_of(rdma_set_local_ece(id->cm, &x.ece));
		break;
	}
	case USP_GET_ECE:
		err = errno_of(rdma_get_remote_ece(id->cm, &r.ece.ece));
		rlen = sizeof(r.ece);
		break;
	case USP_JOIN_MC: {
		struct usp_join x;
		struct rdma_cm_join_mc_attr_ex a;

		memcpy(&x, b, sizeof(x));
		memset(&a, 0, sizeof(a));
		a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
		a.join_flags = x.flags;
		a.addr = (struct sockaddr *)&x.addr;
		/* held until rdma_leave_multicast or the id's destruction */
		err = usd_charge(cl, USD_JOINS, 1);
		if (err)
			break;
		err = errno_of(rdma_join_multicast_ex(id->cm, &a, (void *)(uintptr_t)x.cookie));
		if (err)
			usd_uncharge(cl, USD_JOINS, 1);
		else
			id->joins++;
		break;
	}
	case USP_LEAVE_MC: {
		struct usp_addr x;

		memcpy(&x, b, sizeof(x));
		err = errno_of(rdma_leave_multicast(id->cm, (struct sockaddr *)&x.addr));
		if (!err && id->joins) {
			id->joins--;
			usd_uncharge(cl, USD_JOINS, 1);
		}
		break;
	}
	case USP_POST_EVENT: {
		struct usp_post_event x;

		memcpy(&x, b, sizeof(x));
		if (x.event != RDMA_CM_EVENT_USER && x.event != RDMA_CM_EVENT_ADDRINFO_RESOLVED &&
		    x.event != RDMA_CM_EVENT_ADDRINFO_ERROR) {
			err = EINVAL;
			break;
		}
		/* behind frames already waiting in uscmd, or for a full
		 * channel, it would wait in uscmd too: refused at the queue's
		 * limits rather than posted and its client dropped for it (a CM
		 * event cannot be refused) */
		if ((cl->qhead || (chan_ok(cl, id->chan) && !chan_room(cl, id->chan))) &&
		    (cl->nqueued >= usd.lim.max_queued ||
		     usd_admit(cl, USD_QBYTES, sizeof(struct usd_frame)) != 0)) {
			err = ENOMEM;
			cl->limit_refusals++;
			break;
		}
		err = errno_of(cma_post_event(id->cm, (enum rdma_cm_event_type)x.event, x.status, x.arg));
		break;
	}
	case USP_QP_ATTRS: {
		/* an accept's QP attributes: its parameters applied first */
		struct usp_conn x;
		struct rdma_conn_param p;

		memset(&x, 0, sizeof(x));
		memcpy(&x, b, n - sizeof(h));
		conn_param(&x, &p);
		err = errno_of(cma_accept_prepare(id->cm, x.has_param ? &p : NULL));
		if (!err) {
			qp_attrs_of(id->cm, &r.qa);
			rlen = sizeof(r.qa);
		}
		break;
	}
	case USP_STATS:
		err = errno_of(uscm_get_stats(&r.stats, sizeof(r.stats)));
		rlen = sizeof(r.stats);
		break;
	case USP_STATUS: {
		char *t;
		size_t tl;

		/* it walks every client: a uid asking in a loop would take the
		 * main loop's time from everyone else */
		if (!status_allowed(cl)) {
			err = EAGAIN;
			break;
		}
		t = malloc(USP_MAX_REPLY - sizeof(struct usp_reply));
		if (!t) {
			err = ENOMEM;
			break;
		}
		tl = usd_status(t, USP_MAX_REPLY - sizeof(struct usp_reply), cl->uid);
		reply(cl, h.op, h.seq, 0, t, tl);
		free(t);
		return;
	}
	default:
		err = EPROTO;
		break;
	}
	/* events the call queued (a user event, a synchronous failure) reach
	 * the channel before the call returns, as with the kernel's queue */
	if (!cl->dead)
		usd_client_events(cl);
	reply(cl, h.op, h.seq, err, &r, rlen);
}

size_t usd_status(char *buf, size_t size, uid_t viewer)
{
	struct uscm_stats s;
	size_t o = 0;
	unsigned others = 0, others_ids = 0;

#define OUT(...)                                                                        \
	do {                                                                            \
		int k_ = snprintf(buf + o, o < size ? size - o : 0, __VA_ARGS__);       \
		if (k_ > 0)                                                             \
			o = o + (size_t)k_ < size ? o + (size_t)k_ : size - 1;          \
	} while (0)

	memset(&s, 0, sizeof(s));
	uscm_get_stats(&s, sizeof(s));
	OUT("uscmd: pid %d, %u clients (%llu since start), %zu ids, %llu malformed requests\n",
	    (int)getpid(), usd.nclients, (unsigned long long)usd.clients_total, usd_id_count(),
	    (unsigned long long)usd.malformed);
	OUT("host: ids=%llu/%llu queued_bytes=%llu/%llu clients_refused=%llu\n",
	    (unsigned long long)usd.use[USD_IDS], (unsigned long long)usd.lim.total[USD_IDS],
	    (unsigned long long)usd.use[USD_QBYTES], (unsigned long long)usd.lim.total[USD_QBYTES],
	    (unsigned long long)usd.clients_refused);
	/* the limits in force (per client / per uid), and what the viewer's
	 * uid holds of each */
	{
		struct usd_uid *vu = usd_uid_get(viewer, 0);

		OUT("limits (client/uid, yours):");
		for (int r = 0; r < USD_NRES; r++)
			OUT(" %s=%llu/%llu,%llu", usd_res_name((enum usd_res)r),
			    (unsigned long long)usd.lim.client[r], (unsigned long long)usd.lim.uid[r],
			    (unsigned long long)(vu ? vu->use[r] : 0));
		OUT(" clients_per_uid=%u,%u\n", usd.lim.clients_per_uid, vu ? vu->nclients : 0);
	}
	OUT("cm: ports=%llu conns_live=%llu conns_total=%llu half_open=%llu rx_mads=%llu "
	    "tx_mads=%llu rx_malformed=%llu rx_stray=%llu retransmits=%llu timeouts=%llu\n",
	    (unsigned long long)s.ports, (unsigned long long)s.conns_live,
	    (unsigned long long)s.conns_total, (unsigned long long)s.half_open,
	    (unsigned long long)s.rx_mads, (unsigned long long)s.tx_mads,
	    (unsigned long long)s.rx_malformed, (unsigned long long)s.rx_stray,
	    (unsigned long long)s.retransmits, (unsigned long long)s.timeouts);
	{
		size_t conns, timers, resolves;

		pthread_mutex_lock(&g.lock);
		cma_engine_totals_locked(&conns, &timers);
		resolves = cma_resolver_count(); /* waiting for a neighbour */
		pthread_mutex_unlock(&g.lock);
		OUT("engine: conns=%zu timers=%zu resolves=%zu\n", conns, timers, resolves);
	}
	OUT("%-6s %-8s %-6s %-6s %-6s %-9s %-10s %-10s %-9s %-7s %-11s %s\n", "client", "pid", "uid",
	    "ids", "chans", "requests", "errors", "events", "connects", "estab", "backlog_rej",
	    "limit_rej");
	/* another uid's clients (pid, uid, what it does) are root's to see:
	 * a user sees its own, and how many others there are */
	for (struct usd_client *cl = usd.clients; cl; cl = cl->next) {
		if (viewer != 0 && cl->uid != viewer) {
			others++;
			others_ids += cl->nids;
			continue;
		}
		if (o + 1 >= size)
			continue; /* full: only counted */
		OUT("%-6u %-8d %-6u %-6u %-6u %-9llu %-10llu %-10llu %-9llu %-7llu %-11llu %llu\n", cl->num,
		    (int)cl->pid, (unsigned)cl->uid, cl->nids, (unsigned)cl->use[USD_CHANS],
		    (unsigned long long)cl->requests, (unsigned long long)cl->errors,
		    (unsigned long long)cl->events, (unsigned long long)cl->connects,
		    (unsigned long long)cl->established, (unsigned long long)cl->backlog_rejects,
		    (unsigned long long)cl->limit_refusals);
	}
	if (viewer != 0)
		OUT("(%u clients of other users, %u ids: shown to root only)\n", others, others_ids);
	/* the network namespaces served: port spaces and listeners per key */
	o += cma_netns_status(buf + o, o < size ? size - o : 0);
	if (o >= size)
		o = size ? size - 1 : 0;
#undef OUT
	return o;
}
