/*
 * usd_client.c - one client of uscmd: its requests and its events.
 *
 * Every request frame is checked whole (usp_check_request) before a field
 * is read; a bad one is answered with an error and changes nothing. A
 * request names ids by handle and is served only for the client's own
 * (usd_id_get). Per-client limits bound what one process can make the
 * daemon hold: ids, channels, events queued for a channel it does not read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

struct usd_client *usd_client_new(int fd)
{
	struct usd_client *cl = calloc(1, sizeof(*cl));
	struct usd_cred cr;

	if (!cl)
		return NULL;
	if (usd_cred_take(fd, &cr) < 0) {
		free(cl);
		return NULL;
	}
	cl->fd = fd;
	cl->pid = cr.pid;
	cl->uid = cr.uid;
	cl->gid = cr.gid;
	cl->priv = cr.priv;
	cl->caller.uid = cr.uid;
	cl->caller.priv = cr.priv;
	cl->num = ++usd.next_client;
	cl->ec = rdma_create_event_channel();
	if (!cl->ec) {
		free(cl);
		return NULL;
	}
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
			(unsigned)cl->uid, cl->priv ? " (privileged)" : "");
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
	cma_netns_put(cl->caller.ns); /* after its ids, which referenced it too */
	for (unsigned i = 0; i < cl->nchans; i++)
		if (cl->chans[i] >= 0)
			close(cl->chans[i]);
	free(cl->chans);
	while (cl->qhead) {
		struct usd_frame *f = cl->qhead;

		cl->qhead = f->next;
		free(f);
	}
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

static void send_event(struct usd_client *cl, uint32_t chan, const struct usp_event *ev)
{
	struct usd_frame *f;

	if (chan >= cl->nchans || cl->chans[chan] < 0)
		return; /* the channel is gone: nobody to tell */
	if (!cl->qhead) {
		ssize_t n = send(cl->chans[chan], ev, sizeof(*ev), MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n == (ssize_t)sizeof(*ev))
			return;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return; /* the client closed its end */
	}
	if (cl->nqueued >= usd.lim.max_queued) {
		fprintf(stderr, "uscmd: client %u (pid %d) does not read its events (%u queued): dropped\n",
			cl->num, (int)cl->pid, cl->nqueued);
		cl->dead = 1;
		return;
	}
	f = malloc(sizeof(*f));
	if (!f) {
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
	while (cl->qhead) {
		struct usd_frame *f = cl->qhead;

		if (f->chan < cl->nchans && cl->chans[f->chan] >= 0) {
			ssize_t n = send(cl->chans[f->chan], &f->ev, sizeof(f->ev),
					 MSG_DONTWAIT | MSG_NOSIGNAL);

			if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
				return 1;
		}
		cl->qhead = f->next;
		if (!cl->qhead)
			cl->qtail = NULL;
		cl->nqueued--;
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
			id = cl->nids < usd.lim.max_ids && lid->pending < (unsigned)lid->backlog
				? usd_id_new(cl, nc, lid->chan) : NULL;
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

static int chan_add(struct usd_client *cl, int fd, uint32_t *out)
{
	struct stat st;
	unsigned i;
	int big = 1 << 22;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISSOCK(st.st_mode))
		return EBADF;
	for (i = 0; i < cl->nchans; i++)
		if (cl->chans[i] < 0)
			break;
	if (i == cl->nchans) {
		int *n;

		if (cl->nchans >= usd.lim.max_chans)
			return EMFILE;
		n = realloc(cl->chans, (cl->nchans + 1) * sizeof(*n));
		if (!n)
			return ENOMEM;
		cl->chans = n;
		cl->nchans++;
	}
	/* room for bursts (10k connections at once); beyond it, events wait
	 * in cl->qhead, bounded by max_queued */
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
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
static void conn_param(const struct usp_conn *b, int accept, struct rdma_conn_param *p)
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
		p->flow_control = accept ? 0 : 1;
		p->retry_count = 7;
		p->rnr_retry_count = 7;
	}
	p->srq = b->srq;
	p->qp_num = b->qp_num;
	p->private_data = b->pdata_len ? b->pdata : NULL;
	p->private_data_len = (uint8_t)b->pdata_len;
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
	int err, rc = 0;

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
		if (fd_in >= 0)
			close(fd_in);
		reply(cl, h.op < USP_OP_MAX ? h.op : 0, h.seq, err, NULL, 0);
		return;
	}
	cl->requests++;
	if (h.op != USP_CHAN_CREATE && h.op != USP_HELLO && fd_in >= 0) {
		close(fd_in); /* only a new channel and the HELLO carry an fd */
		fd_in = -1;
	}
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
	case USP_STATS: case USP_STATUS:
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
			err = EPROTO;
		} else {
			struct cma_netns *ns;

			/* the client's namespace: its route socket (cma_netns.c) */
			if (cma_netns_from_fd(fd_in, &ns) < 0) {
				err = errno;
			} else if (cl->helloed && cl->caller.ns != ns) {
				cma_netns_put(ns); /* one connection, one namespace */
				err = EINVAL;
			} else {
				cma_netns_put(cl->caller.ns);
				cl->caller.ns = ns;
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
		r.hello.max_ids = usd.lim.max_ids;
		rlen = sizeof(r.hello);
		break;
	}
	case USP_CHAN_CREATE:
		err = chan_add(cl, fd_in, &r.chan.chan);
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
		if (cl->nids >= usd.lim.max_ids) {
			err = EMFILE;
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
			err = ENOMEM;
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
		if (!chan_ok(cl, x.chan))
			err = EINVAL;
		else
			id->chan = x.chan;
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
		err = errno_of(rdma_resolve_addr(id->cm, x.has_src ? (struct sockaddr *)&x.src : NULL,
						 (struct sockaddr *)&x.dst, x.timeout_ms));
		snap_of(id->cm, &r.snap);
		rlen = sizeof(r.snap);
		break;
	}
	case USP_RESOLVE_ROUTE: {
		struct usp_int x;

		memcpy(&x, b, sizeof(x));
		err = errno_of(rdma_resolve_route(id->cm, x.v));
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
		conn_param(&x, h.op == USP_ACCEPT, &p);
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
		err = errno_of(rdma_join_multicast_ex(id->cm, &a, (void *)(uintptr_t)x.cookie));
		break;
	}
	case USP_LEAVE_MC: {
		struct usp_addr x;

		memcpy(&x, b, sizeof(x));
		err = errno_of(rdma_leave_multicast(id->cm, (struct sockaddr *)&x.addr));
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
		err = errno_of(cma_post_event(id->cm, (enum rdma_cm_event_type)x.event, x.status, x.arg));
		break;
	}
	case USP_QP_ATTRS: {
		/* an accept's QP attributes: its parameters applied first */
		struct usp_conn x;
		struct rdma_conn_param p;

		memset(&x, 0, sizeof(x));
		memcpy(&x, b, n - sizeof(h));
		conn_param(&x, 1, &p);
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
		char *t = malloc(USP_MAX_REPLY - sizeof(struct usp_reply));
		size_t tl;

		if (!t) {
			err = ENOMEM;
			break;
		}
		tl = usd_status(t, USP_MAX_REPLY - sizeof(struct usp_reply));
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

size_t usd_status(char *buf, size_t size)
{
	struct uscm_stats s;
	size_t o = 0;

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
	OUT("cm: ports=%llu conns_live=%llu conns_total=%llu half_open=%llu rx_mads=%llu "
	    "tx_mads=%llu rx_malformed=%llu rx_stray=%llu retransmits=%llu timeouts=%llu\n",
	    (unsigned long long)s.ports, (unsigned long long)s.conns_live,
	    (unsigned long long)s.conns_total, (unsigned long long)s.half_open,
	    (unsigned long long)s.rx_mads, (unsigned long long)s.tx_mads,
	    (unsigned long long)s.rx_malformed, (unsigned long long)s.rx_stray,
	    (unsigned long long)s.retransmits, (unsigned long long)s.timeouts);
	{
		size_t conns, timers;

		pthread_mutex_lock(&g.lock);
		cma_engine_totals_locked(&conns, &timers);
		pthread_mutex_unlock(&g.lock);
		OUT("engine: conns=%zu timers=%zu\n", conns, timers);
	}
	OUT("%-6s %-8s %-6s %-6s %-6s %-9s %-10s %-10s %-9s %-7s %s\n", "client", "pid", "uid", "ids",
	    "chans", "requests", "errors", "events", "connects", "estab", "backlog_rej");
	for (struct usd_client *cl = usd.clients; cl; cl = cl->next) {
		unsigned nch = 0;

		for (unsigned i = 0; i < cl->nchans; i++)
			nch += cl->chans[i] >= 0;
		OUT("%-6u %-8d %-6u %-6u %-6u %-9llu %-10llu %-10llu %-9llu %-7llu %llu\n", cl->num,
		    (int)cl->pid, (unsigned)cl->uid, cl->nids, nch, (unsigned long long)cl->requests,
		    (unsigned long long)cl->errors, (unsigned long long)cl->events,
		    (unsigned long long)cl->connects, (unsigned long long)cl->established,
		    (unsigned long long)cl->backlog_rejects);
	}
	/* the network namespaces served: port spaces and listeners per key */
	o += cma_netns_status(buf + o, o < size ? size - o : 0);
	if (o >= size)
		o = size ? size - 1 : 0;
#undef OUT
	return o;
}
