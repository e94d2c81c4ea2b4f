/*
 * rs_dgram.c - datagram rsockets (SOCK_DGRAM over UD), wire-compatible with
 * librdmacm's (docs/rsockets.md, "Datagram rsockets").
 *
 * A datagram rsocket is a kernel UDP socket (its descriptor is the rsocket
 * number) plus a UD QP bound to the socket's source address. Every datagram
 * on the UD QP starts with a ds_header (version, length, the sender's UDP
 * port and IP address). A destination without an address handle is reached
 * through the UDP socket: a ds_udp_header (tag, version, op, length, QPN,
 * address) in front of the payload; the receiver answers with an RS_OP_CTRL
 * header carrying its own QPN and resolves an address handle back (route
 * through rdma_resolve_addr/route). Once the handles exist, datagrams go
 * over UD only.
 *
 * Differences from librdmacm: no service thread; the UDP socket is served
 * inside the rsocket calls (rsend/rrecv/rpoll ...); one UD QP per socket
 * (one source address: a socket that would need a second one fails with
 * EADDRNOTAVAIL); a datagram arriving through the UDP socket is queued
 * locally instead of being looped back through the QP.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "rs_int.h"

#define DS_UDP_TAG 0x55555555u
#define DS_IPV4_HDR_LEN 8
#define DS_IPV6_HDR_LEN 24
#define DS_UDP_IPV4_HDR_LEN 16
#define DS_UDP_IPV6_HDR_LEN 28
#define DS_GRH 40
#define DS_QKEY 0x01234567u /* RDMA_UDP_QKEY */
#define DS_WR_RECV (1ull << 63)

struct ds_dest {
	struct ds_dest *next;
	struct sockaddr_storage addr;
	struct ibv_ah *ah;
	uint32_t qpn;
};

struct ds_local { /* a datagram that came through the UDP socket */
	struct ds_local *next;
	struct sockaddr_storage from;
	size_t len;
	uint8_t data[];
};

struct ds {
	struct rdma_cm_id *id; /* the UD QP's, bound to src */
	struct sockaddr_storage src;
	uint8_t hdr[DS_IPV6_HDR_LEN];
	int hlen;
	size_t max; /* largest payload: min(RS_SNDLOWAT, the port's MTU) - hlen */
	int sq, rq;
	uint8_t *sbuf, *rbuf;
	struct ibv_mr *smr, *rmr;
	int *sfree, nsfree;
	struct { uint32_t off, len; } *ring;
	int head, tail, count;
	struct ds_local *lhead, *ltail;
	struct ds_dest *dests, *conn;
};

static socklen_t alen(const struct sockaddr *a)
{
	return a->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static int same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
	if (a->sa_family != b->sa_family)
		return 0;
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

static int any_addr(const struct sockaddr *a)
{
	if (a->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)a)->sin_addr.s_addr == INADDR_ANY;
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)(const void *)a)->sin6_addr);
}

static void set_port(struct sockaddr *a, in_port_t p)
{
	if (a->sa_family == AF_INET)
		((struct sockaddr_in *)(void *)a)->sin_port = p;
	else
		((struct sockaddr_in6 *)(void *)a)->sin6_port = p;
}

static in_port_t get_port(const struct sockaddr *a)
{
	return a->sa_family == AF_INET ? ((const struct sockaddr_in *)(const void *)a)->sin_port :
					 ((const struct sockaddr_in6 *)(const void *)a)->sin6_port;
}

static int format_hdr(uint8_t *h, const struct sockaddr *a)
{
	memset(h, 0, DS_IPV6_HDR_LEN);
	if (a->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const void *)a;
		h[0] = 4;
		h[1] = DS_IPV4_HDR_LEN;
		memcpy(h + 2, &s->sin_port, 2);
		memcpy(h + 4, &s->sin_addr, 4);
		return DS_IPV4_HDR_LEN;
	}
	const struct sockaddr_in6 *s = (const void *)a;
	h[0] = 6;
	h[1] = DS_IPV6_HDR_LEN;
	memcpy(h + 2, &s->sin6_port, 2);
	memcpy(h + 4, &s->sin6_flowinfo, 4);
	memcpy(h + 8, &s->sin6_addr, 16);
	return DS_IPV6_HDR_LEN;
}

/* the source address of a ds_header (0: not a valid one) */
static int parse_hdr(const uint8_t *h, size_t len, struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (len >= DS_IPV4_HDR_LEN && h[0] == 4 && h[1] == DS_IPV4_HDR_LEN) {
		struct sockaddr_in *s = (void *)out;
		s->sin_family = AF_INET;
		memcpy(&s->sin_port, h + 2, 2);
		memcpy(&s->sin_addr, h + 4, 4);
		return 1;
	}
	if (len >= DS_IPV6_HDR_LEN && h[0] == 6 && h[1] == DS_IPV6_HDR_LEN) {
		struct sockaddr_in6 *s = (void *)out;
		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_port, h + 2, 2);
		memcpy(&s->sin6_flowinfo, h + 4, 4);
		memcpy(&s->sin6_addr, h + 8, 16);
		return 1;
	}
	return 0;
}

/* ids created without an event channel are synchronous (librdmacm's
 * semantics): rdma_resolve_addr/route return when the step is done */

int rs_dgram_socket(int domain, int type)
{
	struct rs *rs = calloc(1, sizeof(*rs));
	struct ds *ds = calloc(1, sizeof(*ds));
	int fd;

	if (!rs || !ds) {
		free(rs);
		free(ds);
		return rs_fail(ENOMEM);
	}
	fd = socket(domain, SOCK_DGRAM | (type & SOCK_CLOEXEC), 0);
	if (fd < 0) {
		free(rs);
		free(ds);
		return -1;
	}
	rs->type = SOCK_DGRAM;
	rs->domain = domain;
	rs->fd = fd;
	rs->ds = ds;
	rs->fs_flags = (type & SOCK_NONBLOCK) ? O_NONBLOCK : 0;
	pthread_mutex_init(&rs->lk, NULL);
	pthread_mutex_init(&rs->slk, NULL);
	pthread_mutex_init(&rs->rlk, NULL);
	if (rs_insert(rs) < 0) {
		close(fd);
		free(ds);
		free(rs);
		return -1;
	}
	return fd;
}

static void dest_free_all(struct ds *ds)
{
	while (ds->dests) {
		struct ds_dest *d = ds->dests;
		ds->dests = d->next;
		if (d->ah)
			ibv_destroy_ah(d->ah);
		free(d);
	}
}

/* the QP side (a failed ds_setup leaves none half-made) */
static void qp_free(struct rs *rs)
{
	struct ds *ds = rs->ds;

	dest_free_all(ds);
	ds->conn = NULL;
	if (ds->id) {
		if (ds->id->qp)
			rdma_destroy_qp(ds->id);
		rdma_destroy_id(ds->id);
		ds->id = NULL;
	}
	if (ds->smr)
		ibv_dereg_mr(ds->smr);
	if (ds->rmr)
		ibv_dereg_mr(ds->rmr);
	if (rs->cq)
		ibv_destroy_cq(rs->cq);
	if (rs->cch)
		ibv_destroy_comp_channel(rs->cch);
	ds->smr = ds->rmr = NULL;
	rs->cq = NULL;
	rs->cch = NULL;
	rs->armed = 0;
	free(ds->sbuf);
	free(ds->rbuf);
	free(ds->sfree);
	free(ds->ring);
	ds->sbuf = ds->rbuf = NULL;
	ds->sfree = NULL;
	ds->ring = NULL;
	ds->head = ds->tail = ds->count = ds->nsfree = 0;
}

void rs_dgram_free(struct rs *rs)
{
	struct ds *ds = rs->ds;

	if (!ds)
		return;
	qp_free(rs);
	while (ds->lhead) {
		struct ds_local *l = ds->lhead;
		ds->lhead = l->next;
		free(l);
	}
	free(ds);
	rs->ds = NULL;
	close(rs->fd);
}

static int post_recv(struct ds *ds, uint32_t off)
{
	struct ibv_sge sge[2] = {
		{ (uintptr_t)ds->rbuf + (size_t)ds->rq * RS_SNDLOWAT, DS_GRH, ds->rmr->lkey },
		{ (uintptr_t)ds->rbuf + off, RS_SNDLOWAT, ds->rmr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = DS_WR_RECV | off, .sg_list = sge, .num_sge = 2 }, *bad;

	return ibv_post_recv(ds->id->qp, &wr, &bad) ? rs_fail(ENOMEM) : 0;
}

/* the UD QP on the source address for dst (lk held) */
static int ds_setup_qp(struct rs *rs, const struct sockaddr *dst)
{
	struct ds *ds = rs->ds;
	struct sockaddr_storage src;
	socklen_t sl = sizeof(src);
	struct ibv_qp_init_attr qa;
	int i;

	if (ds->id)
		return 0;
	if (getsockname(rs->fd, (struct sockaddr *)&src, &sl))
		return -1;
	if (any_addr((struct sockaddr *)&src)) {
		/* the address the RDMA route to dst leaves from */
		struct rdma_cm_id *t;
		in_port_t port = get_port((struct sockaddr *)&src);

		if (!dst)
			return rs_fail(EDESTADDRREQ);
		if (rdma_create_id(NULL, &t, NULL, RDMA_PS_UDP))
			return -1;
		if (rdma_resolve_addr(t, NULL, (struct sockaddr *)dst, 2000)) {
			int e = errno;
			rdma_destroy_id(t);
			return rs_fail(e);
		}
		memcpy(&src, rdma_get_local_addr(t), alen(rdma_get_local_addr(t)));
		rdma_destroy_id(t);
		set_port((struct sockaddr *)&src, port);
		if (!port) { /* an unbound UDP socket: bind it where its QP is */
			if (bind(rs->fd, (struct sockaddr *)&src, alen((struct sockaddr *)&src)))
				return -1;
			sl = sizeof(src);
			getsockname(rs->fd, (struct sockaddr *)&src, &sl);
		}
	}
	ds->src = src;
	ds->hlen = format_hdr(ds->hdr, (struct sockaddr *)&src);

	ds->sq = rs_conf.sqsize;
	if (ds->sq > (int)(rs_conf.wmem / RS_SNDLOWAT))
		ds->sq = (int)(rs_conf.wmem / RS_SNDLOWAT);
	ds->rq = rs_conf.rqsize;
	if (ds->rq > (int)(rs_conf.mem / RS_SNDLOWAT))
		ds->rq = (int)(rs_conf.mem / RS_SNDLOWAT);
	if (ds->sq < 2)
		ds->sq = 2;
	if (ds->rq < 2)
		ds->rq = 2;
	ds->sbuf = calloc((size_t)ds->sq, RS_SNDLOWAT);
	ds->rbuf = calloc((size_t)ds->rq * RS_SNDLOWAT + DS_GRH, 1);
	ds->sfree = calloc((size_t)ds->sq, sizeof(int));
	ds->ring = calloc((size_t)ds->rq, sizeof(*ds->ring));
	if (!ds->sbuf || !ds->rbuf || !ds->sfree || !ds->ring)
		return rs_fail(ENOMEM);
	for (i = 0; i < ds->sq; i++)
		ds->sfree[i] = i;
	ds->nsfree = ds->sq;

	if (rdma_create_id(NULL, &ds->id, rs, RDMA_PS_UDP))
		return -1;
	set_port((struct sockaddr *)&src, 0);
	if (rdma_bind_addr(ds->id, (struct sockaddr *)&src))
		return -1;
	if (!ds->id->verbs)
		return rs_fail(EADDRNOTAVAIL);
	rs->cch = ibv_create_comp_channel(ds->id->verbs);
	if (!rs->cch)
		return -1;
	fcntl(rs->cch->fd, F_SETFL, fcntl(rs->cch->fd, F_GETFL) | O_NONBLOCK);
	rs->cq = ibv_create_cq(ds->id->verbs, ds->sq + ds->rq, rs, rs->cch, 0);
	if (!rs->cq)
		return -1;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_UD;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = (uint32_t)ds->sq;
	qa.cap.max_recv_wr = (uint32_t)ds->rq;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 2;
	if (rdma_create_qp(ds->id, NULL, &qa))
		return -1;
	{
		struct ibv_port_attr pa;
		size_t mtu = RS_SNDLOWAT;

		if (!ibv_query_port(ds->id->verbs, ds->id->port_num, &pa) && pa.active_mtu &&
		    (size_t)(128u << pa.active_mtu) < mtu)
			mtu = (size_t)128u << pa.active_mtu;
		ds->max = mtu - (size_t)ds->hlen;
	}
	ds->smr = ibv_reg_mr(ds->id->pd, ds->sbuf, (size_t)ds->sq * RS_SNDLOWAT, IBV_ACCESS_LOCAL_WRITE);
	ds->rmr = ibv_reg_mr(ds->id->pd, ds->rbuf, (size_t)ds->rq * RS_SNDLOWAT + DS_GRH,
			     IBV_ACCESS_LOCAL_WRITE);
	if (!ds->smr || !ds->rmr)
		return rs_fail(ENOMEM);
	for (i = 0; i < ds->rq; i++)
		if (post_recv(ds, (uint32_t)i * RS_SNDLOWAT))
			return -1;
	return 0;
}

static int ds_setup(struct rs *rs, const struct sockaddr *dst)
{
	int e;

	if (rs->ds->id && rs->ds->id->qp && rs->ds->rmr)
		return 0;
	if (!ds_setup_qp(rs, dst))
		return 0;
	e = errno;
	qp_free(rs);
	return rs_fail(e);
}

static struct ds_dest *get_dest(struct ds *ds, const struct sockaddr *a)
{
	struct ds_dest *d;

	for (d = ds->dests; d; d = d->next)
		if (same_addr((struct sockaddr *)&d->addr, a))
			return d;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	memcpy(&d->addr, a, alen(a));
	d->next = ds->dests;
	ds->dests = d;
	return d;
}

/* an address handle to d's node over the route from our source address */
static void make_ah(struct ds *ds, struct ds_dest *d, uint32_t qpn)
{
	struct rdma_cm_id *t;
	struct sockaddr_storage s = ds->src;
	struct ibv_ah_attr at;
	struct ibv_sa_path_rec *p;

	if (d->ah) {
		ibv_destroy_ah(d->ah);
		d->ah = NULL;
	}
	if (rdma_create_id(NULL, &t, NULL, RDMA_PS_UDP))
		return;
	set_port((struct sockaddr *)&s, 0);
	if (rdma_resolve_addr(t, (struct sockaddr *)&s, (struct sockaddr *)&d->addr, 2000) ||
	    rdma_resolve_route(t, 2000) || !t->route.path_rec)
		goto out;
	p = t->route.path_rec;
	memset(&at, 0, sizeof(at));
	{
		struct ibv_port_attr pa;
		int eth = !ibv_query_port(ds->id->verbs, ds->id->port_num, &pa) &&
			  pa.link_layer == IBV_LINK_LAYER_ETHERNET;

		if (p->hop_limit > 1 || eth) {
			union ibv_gid g;
			int i;

			at.is_global = 1;
			at.grh.dgid = p->dgid;
			at.grh.flow_label = be32toh(p->flow_label);
			at.grh.hop_limit = p->hop_limit ? p->hop_limit : 64;
			at.grh.traffic_class = p->traffic_class;
			for (i = 0; i < 16 && !ibv_query_gid(ds->id->verbs, ds->id->port_num, i, &g); i++)
				if (!memcmp(&g, &p->sgid, sizeof(g))) {
					at.grh.sgid_index = (uint8_t)i;
					break;
				}
		}
	}
	at.dlid = be16toh(p->dlid);
	at.sl = p->sl;
	at.static_rate = p->rate;
	at.port_num = ds->id->port_num;
	d->ah = ibv_create_ah(ds->id->pd, &at);
	d->qpn = qpn;
out:
	rdma_destroy_id(t);
}

/* ds_udp_header + iov through the UDP socket to d */
static ssize_t send_udp(struct rs *rs, struct ds_dest *d, uint8_t op, const void *buf, size_t len,
			int flags)
{
	struct ds *ds = rs->ds;
	uint8_t h[DS_UDP_IPV6_HDR_LEN];
	uint32_t tag = htobe32(DS_UDP_TAG), qpn = htobe32(ds->id->qp->qp_num & 0xffffff);
	struct iovec v[2];
	struct msghdr m;
	ssize_t n;

	memset(h, 0, sizeof(h));
	memcpy(h, &tag, 4);
	h[4] = ds->hdr[0];
	h[5] = op;
	h[6] = ds->hdr[0] == 4 ? DS_UDP_IPV4_HDR_LEN : DS_UDP_IPV6_HDR_LEN;
	memcpy(h + 8, &qpn, 4);
	if (ds->hdr[0] == 4)
		memcpy(h + 12, ds->hdr + 4, 4);
	else
		memcpy(h + 12, ds->hdr + 8, 16);
	v[0].iov_base = h;
	v[0].iov_len = h[6];
	v[1].iov_base = (void *)buf;
	v[1].iov_len = len;
	memset(&m, 0, sizeof(m));
	m.msg_name = &d->addr;
	m.msg_namelen = alen((struct sockaddr *)&d->addr);
	m.msg_iov = v;
	m.msg_iovlen = buf && len ? 2 : 1;
	n = sendmsg(rs->fd, &m, flags | MSG_DONTWAIT);
	return n < 0 ? n : n - h[6];
}

/* one datagram from the UDP socket (0: none waiting) */
static int serve_udp(struct rs *rs)
{
	struct ds *ds = rs->ds;
	static __thread uint8_t buf[RS_SNDLOWAT + DS_UDP_IPV6_HDR_LEN];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	struct ds_dest *d;
	ssize_t n;
	uint32_t tag, qpn;
	int ok;

	n = recvfrom(rs->fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
	if (n < 0)
		return 0;
	if (n < DS_UDP_IPV4_HDR_LEN)
		return 1;
	memcpy(&tag, buf, 4);
	ok = be32toh(tag) == DS_UDP_TAG &&
	     ((buf[4] == 4 && from.ss_family == AF_INET && buf[6] == DS_UDP_IPV4_HDR_LEN) ||
	      (buf[4] == 6 && from.ss_family == AF_INET6 && buf[6] == DS_UDP_IPV6_HDR_LEN));
	if (!ok || n < buf[6])
		return 1; /* not a datagram rsocket's: dropped */
	memcpy(&qpn, buf + 8, 4);
	qpn = be32toh(qpn) & 0xffffff;
	if (ds_setup(rs, (struct sockaddr *)&from))
		return 1;
	d = get_dest(ds, (struct sockaddr *)&from);
	if (!d)
		return 1;
	if (buf[5] == RS_OP_DATA)
		send_udp(rs, d, RS_OP_CTRL, NULL, 0, 0);
	if (!d->ah || d->qpn != qpn)
		make_ah(ds, d, qpn);
	if (buf[5] == RS_OP_DATA) {
		size_t len = (size_t)n - buf[6];
		struct ds_local *l = malloc(sizeof(*l) + len);

		if (l) {
			l->next = NULL;
			l->from = from;
			l->len = len;
			memcpy(l->data, buf + buf[6], len);
			if (ds->ltail)
				ds->ltail->next = l;
			else
				ds->lhead = l;
			ds->ltail = l;
		}
	}
	return 1;
}

/* completions and the UDP socket, without blocking (lk held) */
static void ds_progress(struct rs *rs)
{
	struct ds *ds = rs->ds;
	struct ibv_wc wc[8];
	int n, i;

	while (serve_udp(rs))
		;
	if (!rs->cq)
		return;
	while ((n = ibv_poll_cq(rs->cq, 8, wc)) > 0) {
		for (i = 0; i < n; i++) {
			uint32_t off = (uint32_t)wc[i].wr_id;

			if (!(wc[i].wr_id & DS_WR_RECV)) {
				ds->sfree[ds->nsfree++] = (int)(off / RS_SNDLOWAT);
				continue;
			}
			if (wc[i].status == IBV_WC_SUCCESS && ds->count < ds->rq &&
			    wc[i].byte_len >= DS_GRH + DS_IPV4_HDR_LEN) {
				struct sockaddr_storage a;
				uint32_t len = wc[i].byte_len - DS_GRH;

				if (parse_hdr(ds->rbuf + off, len, &a) && ds->rbuf[off + 1] <= len) {
					ds->ring[ds->tail].off = off;
					ds->ring[ds->tail].len = len;
					ds->tail = (ds->tail + 1) % ds->rq;
					ds->count++;
					continue;
				}
			}
			post_recv(ds, off); /* invalid or failed: the buffer goes back */
		}
	}
}

int rs_dgram_readable(struct rs *rs)
{
	ds_progress(rs);
	return rs->ds->lhead || rs->ds->count;
}

int rs_dgram_writable(struct rs *rs)
{
	ds_progress(rs);
	return !rs->ds->id || rs->ds->nsfree > 0;
}

/* block until cond or an error (lk held; dropped while waiting) */
static int ds_wait(struct rs *rs, int (*cond)(struct rs *), int flags)
{
	for (;;) {
		struct pollfd p[2];
		int k = 0;

		if (cond(rs))
			return 0;
		if ((flags & MSG_DONTWAIT) || (rs->fs_flags & O_NONBLOCK))
			return rs_fail(EAGAIN);
		if (rs->cq) {
			rs_dgram_arm(rs);
			if (cond(rs))
				return 0;
			p[k].fd = rs->cch->fd;
			p[k++].events = POLLIN;
		}
		p[k].fd = rs->fd;
		p[k++].events = POLLIN;
		pthread_mutex_unlock(&rs->lk);
		poll(p, (nfds_t)k, 1000);
		pthread_mutex_lock(&rs->lk);
		rs_dgram_drain(rs);
	}
}

int rs_dgram_arm(struct rs *rs)
{
	if (rs->cq && !rs->armed) {
		ibv_req_notify_cq(rs->cq, 0);
		rs->armed = 1;
	}
	return 0;
}

void rs_dgram_drain(struct rs *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!rs->cch)
		return;
	while (!ibv_get_cq_event(rs->cch, &cq, &ctx)) {
		ibv_ack_cq_events(cq, 1);
		rs->armed = 0;
	}
}

int rs_dgram_bind(struct rs *rs, const struct sockaddr *a, socklen_t l)
{
	if (rs->ds->id || rs->state != RS_S_INIT)
		return rs_fail(EINVAL);
	if (bind(rs->fd, a, l))
		return -1;
	rs->state = RS_S_BOUND;
	return 0;
}

int rs_dgram_connect(struct rs *rs, const struct sockaddr *a, socklen_t l)
{
	struct ds_dest *d;

	/* the QP first: it binds an unbound UDP socket to the RDMA route's
	 * source address (connect would pick the kernel's) */
	if (ds_setup(rs, a) || connect(rs->fd, a, l))
		return -1;
	d = get_dest(rs->ds, a);
	if (!d)
		return rs_fail(ENOMEM);
	rs->ds->conn = d;
	rs->state |= RS_S_CONN;
	return 0;
}

ssize_t rs_dgram_sendto(struct rs *rs, const void *buf, size_t len, int flags,
			const struct sockaddr *to, socklen_t tolen)
{
	struct ds *ds = rs->ds;
	struct ds_dest *d;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	int slot;

	if (to) {
		if (tolen < sizeof(sa_family_t) || tolen < alen(to))
			return rs_fail(EINVAL);
		if (to->sa_family != rs->domain)
			return rs_fail(EAFNOSUPPORT);
		if (ds_setup(rs, to))
			return -1;
		d = get_dest(ds, to);
		if (!d)
			return rs_fail(ENOMEM);
	} else {
		if (!ds->conn)
			return rs_fail(EDESTADDRREQ);
		d = ds->conn;
	}
	if (len > ds->max)
		return rs_fail(EMSGSIZE);
	ds_progress(rs);
	if (!d->ah)
		return send_udp(rs, d, RS_OP_DATA, buf, len, flags & ~MSG_DONTWAIT);
	if (ds_wait(rs, rs_dgram_writable, flags))
		return -1;
	slot = ds->sfree[--ds->nsfree];
	memcpy(ds->sbuf + (size_t)slot * RS_SNDLOWAT, ds->hdr, (size_t)ds->hlen);
	memcpy(ds->sbuf + (size_t)slot * RS_SNDLOWAT + ds->hlen, buf, len);
	sge.addr = (uintptr_t)ds->sbuf + (size_t)slot * RS_SNDLOWAT;
	sge.length = (uint32_t)(ds->hlen + len);
	sge.lkey = ds->smr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = (uint64_t)slot * RS_SNDLOWAT;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.ah = d->ah;
	wr.wr.ud.remote_qpn = d->qpn;
	wr.wr.ud.remote_qkey = DS_QKEY;
	if (ibv_post_send(ds->id->qp, &wr, &bad)) {
		ds->sfree[ds->nsfree++] = slot;
		return rs_fail(ENOMEM);
	}
	return (ssize_t)len;
}

static void out_addr(struct sockaddr *dst, socklen_t *dl, const struct sockaddr_storage *a)
{
	socklen_t n = alen((const struct sockaddr *)a);

	if (!dst || !dl)
		return;
	memcpy(dst, a, *dl < n ? *dl : n);
	*dl = n;
}

/* datagrams truncate to len (the rest is dropped), as UDP's; MSG_PEEK keeps it */
ssize_t rs_dgram_recvfrom(struct rs *rs, void *buf, size_t len, int flags, struct sockaddr *from,
			  socklen_t *fl)
{
	struct ds *ds = rs->ds;
	size_t n;

	if (ds_wait(rs, rs_dgram_readable, flags))
		return -1;
	if (ds->lhead) {
		struct ds_local *l = ds->lhead;

		n = l->len < len ? l->len : len;
		memcpy(buf, l->data, n);
		out_addr(from, fl, &l->from);
		if (!(flags & MSG_PEEK)) {
			ds->lhead = l->next;
			if (!ds->lhead)
				ds->ltail = NULL;
			free(l);
		}
		return (ssize_t)n;
	}
	{
		uint32_t off = ds->ring[ds->head].off, mlen = ds->ring[ds->head].len;
		uint8_t *h = ds->rbuf + off;
		struct sockaddr_storage a;

		parse_hdr(h, mlen, &a);
		n = mlen - h[1];
		if (n > len)
			n = len;
		memcpy(buf, h + h[1], n);
		out_addr(from, fl, &a);
		if (!(flags & MSG_PEEK)) {
			ds->head = (ds->head + 1) % ds->rq;
			ds->count--;
			post_recv(ds, off);
		}
	}
	return (ssize_t)n;
}
