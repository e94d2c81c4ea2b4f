/*
 * rs_int.h - uscm's rsockets (sockets over RDMA), internal definitions.
 *
 * Built only on the public rdma_cm and verbs API of this library: nothing
 * here reaches into the CM core (cma_*.c). The wire format (connection
 * private data, immediate-data encoding, control messages) is librdmacm's
 * and is documented in docs/rsockets.md.
 */
#ifndef USCM_RS_INT_H
#define USCM_RS_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#define RS_EXPORT __attribute__((visibility("default")))

#include "rs_wire.h"

/* ---- limits and defaults (librdmacm's) ---- */
#define RS_SNDLOWAT 2048
#define RS_OLAP_START 2048
#define RS_MAX_XFER 65536
#define RS_QP_MIN 16
#define RS_QP_MAX 0xfffe
#define RS_QP_CTRL 4 /* send slots kept for control messages */
#define RS_CTRL_MSG_MAX 24

struct rs_conf {
	uint32_t mem, wmem;
	uint16_t inline_sz, sqsize, rqsize, iomap_size;
	uint32_t polling_time;
	int wake_up_interval;
};
extern struct rs_conf rs_conf;
void rs_configure(void);
int rs_value_to_scale(int value, int bits);
int rs_scale_to_value(int value, int bits);

/* ---- state ---- */
enum {
	RS_S_INIT = 0,
	RS_S_BOUND = 0x1,
	RS_S_LISTEN = 0x2,
	RS_S_OPENING = 0x4,
	RS_S_RES_ADDR = RS_S_OPENING | 0x10,
	RS_S_RES_ROUTE = RS_S_OPENING | 0x20,
	RS_S_CONNECTING = RS_S_OPENING | 0x40,
	RS_S_ACCEPTING = RS_S_OPENING | 0x80,
	RS_S_CONN = 0x100,
	RS_S_WR = 0x200,
	RS_S_RD = 0x400,
	RS_S_RDWR = RS_S_CONN | RS_S_WR | RS_S_RD,
	RS_S_CONN_ERR = 0x800,
	RS_S_DISC = 0x1000,
	RS_S_ERROR = 0x2000,
};

struct rs_iomr {
	struct rs_iomr *next;
	struct ibv_mr *mr;
	uint64_t offset;
	int index; /* slot in the peer's table; -1: not yet sent */
	int sent;
};

struct rs {
	int fd, type, domain;
	pthread_mutex_t lk;          /* state below */
	pthread_mutex_t slk, rlk;    /* one sender, one receiver at a time */
	struct rdma_cm_id *id;
	int state, err, fs_flags, retries;

	/* options */
	int reuseaddr, keepalive, oobinline, nodelay, linger_on, linger;
	int keepidle, keepintvl, keepcnt;
	uint64_t ka_last; /* ms: the last keepalive sent (or the connection) */
	void *route; /* RDMA_ROUTE path data */
	size_t route_len;

	uint32_t sbuf_size, rbuf_size;
	uint16_t sq_size, rq_size, sq_inline;
	int iomap_size; /* entries of our target iomap table */

	struct ibv_comp_channel *cch;
	struct ibv_cq *cq;
	int armed;
	int cm_kick;     /* read the CM channel at the next progress (rs_drain) */
	uint64_t cm_next; /* ms: spinning callers read it no sooner */
	struct ibv_mr *smr, *rmr, *tmr;
	uint8_t *sbuf, *rbuf;
	volatile struct rs_wsge *tsgl; /* our target SGL: the peer writes it */
	volatile struct rs_wiomap *tiomap;
	void *tlist;
	size_t tlist_len;
	int swap; /* the peer's SGEs need byte swapping */

	/* sending */
	uint32_t sbuf_avail, spos;
	uint16_t sseq_no, sseq_comp;
	int sqe_avail;
	unsigned ctrl_seq, ctrl_max;
	int tsge;
	struct rs_wsge rsgl; /* the peer's target SGL (where we post SGE updates) */
	int rsge;
	struct rs_wsge riomap; /* the peer's iomap table */

	/* receiving */
	uint16_t rseq_no, rseq_comp;
	uint32_t rbuf_avail, rbuf_free, rbuf_off, rbuf_pending;
	struct {
		uint32_t op, len;
	} * rmsg;
	int rhead, rtail;

	/* iomap */
	struct rs_iomr *iomaps; /* local mappings offered to the peer */
	int iomap_pending;

	struct ds *ds; /* SOCK_DGRAM: rs_dgram.c */
};

/* rs_api.c: the descriptor table */
struct rs *rs_lookup(int fd);
int rs_insert(struct rs *rs);
void rs_forget(struct rs *rs);

/* rs_dgram.c: SOCK_DGRAM over UD (rs->fd is its UDP socket) */
struct ds;
int rs_dgram_socket(int domain, int type);
void rs_dgram_free(struct rs *rs);
int rs_dgram_bind(struct rs *rs, const struct sockaddr *a, socklen_t l);
int rs_dgram_connect(struct rs *rs, const struct sockaddr *a, socklen_t l);
ssize_t rs_dgram_sendto(struct rs *rs, const void *buf, size_t len, int flags,
			const struct sockaddr *to, socklen_t tolen);
ssize_t rs_dgram_recvfrom(struct rs *rs, void *buf, size_t len, int flags, struct sockaddr *from,
			  socklen_t *fl);
int rs_dgram_readable(struct rs *rs); /* with lk */
int rs_dgram_writable(struct rs *rs); /* with lk */
int rs_dgram_arm(struct rs *rs);
void rs_dgram_drain(struct rs *rs);

/* rs_stream.c */
int rs_stream_socket(int domain, int type);
int rs_do_connect(struct rs *rs);
void rs_progress(struct rs *rs); /* with lk: CQ and CM events */
int rs_arm(struct rs *rs);       /* with lk: arm the CQ; returns 1 if work arrived */
void rs_drain(struct rs *rs);    /* with lk: consume CQ channel events */
int rs_can_send(struct rs *rs);
int rs_have_rdata(struct rs *rs);
void rs_stream_free(struct rs *rs);
ssize_t rs_sendv(struct rs *rs, const struct iovec *iov, int iovcnt, int flags);
ssize_t rs_recvv(struct rs *rs, const struct iovec *iov, int iovcnt, int flags);
int rs_shutdown_locked(struct rs *rs, int how);
int rs_send_iomaps(struct rs *rs, int nonblock);
int rs_rdma_write(struct rs *rs, const void *buf, size_t len, uint64_t raddr, uint32_t rkey,
		  int nonblock);

static inline int rs_fail(int e)
{
	errno = e;
	return -1;
}

#endif
