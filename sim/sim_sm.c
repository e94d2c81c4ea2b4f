/*
 * uscm-sim-sm - the fabric's subnet manager and subnet administrator, node 0.
 *
 * A process of its own, reachable only through the fabric: it binds node 0's
 * QP1 socket (127.77.<inst>.0 : simf_qp_port(1)) and registers itself in
 * node 0's agent table as the GSI agent of class 0x03 (SubnAdm) version 2, so
 * a umad client sends SA requests to LID 1 / QP1 like to any other agent.
 *
 * SM: on IB it assigns LIDs (SM LID 1, node i LID i+1), fills the LFT and
 * brings every port whose link is up to ACTIVE (a sweep every 100 ms). On
 * RoCE there is no SM/SA: the process only holds the fabric's instance
 * address (the socket) so that parallel fabrics never collide, and exits
 * with the fabric.
 *
 * SA: PathRecord Get/GetTable, MCMemberRecord Set/Delete/Get/GetTable,
 * ClassPortInfo Get, NodeRecord and PortInfoRecord Get/GetTable, InformInfo
 * Set (acknowledged, no reports). GetTable answers use RMPP (several
 * segments when needed, with ACK windows and retransmission).
 *
 * SMA: on IB it is also every node's subnet management agent (what each HCA
 * would be): it binds node i's QP0 port for every i, and answers SubnGet of
 * NodeInfo, NodeDescription, PortInfo, P_KeyTable, GUIDInfo and (node 0)
 * SMInfo, LID-routed or directed route with hop count 0 (1 to the cabled
 * neighbour under OpenSM), from node i's address, through the fabric.
 *
 * External SM (`uscm-sim up --sm opensm`): no sweeps and no SA here; this
 * process starts Debian's opensm on node1's port (start_opensm) and its SMA
 * takes SubnSet of PortInfo (LID, SM LID, LMC, port state transitions) and
 * P_KeyTable from it.
 *
 * MAD encoding is done here by byte offsets (IBTA Vol1 13.4, 13.6, 14.2,
 * 15.2); only the constants come from <infiniband/umad_*.h>.
 */
#define _GNU_SOURCE
#include "simf.h"

#include <infiniband/umad_sa.h>
#include <infiniband/umad_sa_mcm.h>
#include <infiniband/umad_types.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* MAD layout (bytes) */
#define MAD_LEN 256
#define MAD_HDR 24
#define RMPP_HDR_OFF 24
#define SA_HDR_OFF 36
#define SA_DATA_OFF 56
#define SA_DATA_LEN 200
#define RMPP_DATA_LEN 220 /* what RMPP PayloadLength counts per segment */

/* PathRecord component mask bits */
#define PR_SERVICE_ID (3ull << 0)
#define PR_DGID (1ull << 2)
#define PR_SGID (1ull << 3)
#define PR_DLID (1ull << 4)
#define PR_SLID (1ull << 5)
#define PR_FLOW_LABEL (1ull << 8)
#define PR_HOP_LIMIT (1ull << 9)
#define PR_TCLASS (1ull << 10)
#define PR_REVERSIBLE (1ull << 11)
#define PR_NUMB_PATH (1ull << 12)
#define PR_PKEY (1ull << 13)
#define PR_SL (1ull << 15)
#define PR_MTU_SEL (1ull << 16)
#define PR_MTU (1ull << 17)
#define PR_RATE_SEL (1ull << 18)
#define PR_RATE (1ull << 19)
#define PR_PLT_SEL (1ull << 20)
#define PR_PLT (1ull << 21)

/* NodeRecord / PortInfoRecord component mask bits we filter on */
#define NR_LID (1ull << 0)
#define NR_NODE_TYPE (1ull << 4)
#define NR_SYS_GUID (1ull << 6)
#define NR_NODE_GUID (1ull << 7)
#define NR_PORT_GUID (1ull << 8)
#define PIR_LID (1ull << 0)
#define PIR_PORTNUM (1ull << 1)

#define PR_LEN 64
#define MCMR_LEN 56
#define NR_LEN 112   /* 108 rounded up to 8 */
#define PIR_LEN 72   /* 68 rounded up to 8 */
#define CPI_LEN 72
#define SR_LEN 176

/* what the fabric offers */
#define FAB_MTU 4            /* 2048 (multicast groups) */
#define PATH_MTU 5             /* 4096: the ports' MTUCap, what OpenSM computes for a path */
#define FAB_RATE 16          /* 100 Gb/s */
#define FAB_PLT 14
#define SA_RESP_TIME 16

#define RMPP_WINDOW 16
#define RMPP_TIMEOUT_MS 300
#define RMPP_RETRIES 5
#define MAX_XFERS 64

static volatile sig_atomic_t g_stop;
static struct simf *g_f;
static int g_fd = -1;
static int g_verbose;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	va_list ap;
	struct timespec ts;

	if (!g_verbose)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	fprintf(stderr, "[%ld.%03ld sm] ", (long)ts.tv_sec, ts.tv_nsec / 1000000);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- byte helpers (big-endian wire) ------------------------------------ */

static uint16_t g16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t g32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t g64(const uint8_t *p) { return (uint64_t)g32(p) << 32 | g32(p + 4); }
static void p16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)(v >> 8); p[1] = (uint8_t)v; }
static void p32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}
static void p64(uint8_t *p, uint64_t v) { p32(p, (uint32_t)(v >> 32)); p32(p + 4, (uint32_t)v); }

static int gid_is_zero(const uint8_t *g)
{
	for (int i = 0; i < 16; i++)
		if (g[i])
			return 0;
	return 1;
}

static const char *gid_str(const uint8_t *g, char *buf)
{
	return inet_ntop(AF_INET6, g, buf, INET6_ADDRSTRLEN);
}

/* ---- request context and sending ---------------------------------------- */

struct req {
	int src;                /* requesting node */
	uint16_t sport;         /* its agent's port */
	uint32_t src_qp;        /* DETH source QP */
	uint16_t pkey;
	uint8_t resv8a;
	const uint8_t *mad;     /* 256 bytes */
};

static uint32_t g_psn;

/* One MAD (256 bytes) to the requester, as a UD SEND from QP1. */
static void send_mad(int dst, uint16_t port, uint32_t dqp, uint16_t pkey, uint8_t resv8a,
		     const uint8_t *mad)
{
	uint8_t pkt[SIMF_BTH_LEN + SIMF_DETH_LEN + MAD_LEN + SIMF_ICRC_LEN];
	struct simf_bth b = {
		.opcode = SIMF_OP_UD_SEND_ONLY,
		.pkey = pkey,
		.resv8a = resv8a,
		.dest_qp = dqp,
		.psn = g_psn++ & 0xFFFFFF,
	};

	memset(pkt, 0, sizeof(pkt));
	simf_bth_put(pkt, &b);
	p32(pkt + SIMF_BTH_LEN, SIMF_QKEY_GSI);
	p32(pkt + SIMF_BTH_LEN + 4, 1);   /* source QP 1 */
	memcpy(pkt + SIMF_BTH_LEN + SIMF_DETH_LEN, mad, MAD_LEN);
	if (simf_send(g_f, g_fd, 0, dst, port, pkt, sizeof(pkt)) < 0)
		logf_("send to node%d:%u failed: %s", dst, port, strerror(errno));
}

/* The response header: the request's, with the response method and status. */
static void resp_hdr(uint8_t *out, const struct req *r, uint8_t method, uint16_t status)
{
	memset(out, 0, MAD_LEN);
	memcpy(out, r->mad, MAD_HDR);
	out[3] = method;
	p16(out + 4, status);
	p16(out + 6, 0);
	/* SA header: SM_Key 0, AttributeOffset set by the caller, component
	 * mask echoed */
	memcpy(out + SA_HDR_OFF + 12, r->mad + SA_HDR_OFF + 12, 8);
}

static uint8_t resp_method(uint8_t method)
{
	switch (method) {
	case UMAD_METHOD_GET:
	case UMAD_METHOD_SET:
		return UMAD_METHOD_GET_RESP;
	default:
		return (uint8_t)(method | UMAD_METHOD_RESP_MASK);
	}
}

static void send_status(const struct req *r, uint16_t status)
{
	uint8_t out[MAD_LEN];

	resp_hdr(out, r, resp_method(r->mad[3]), status);
	if (r->mad[3] == UMAD_SA_METHOD_GET_TABLE) {
		/* a GetTableResp is an RMPP message even when it carries an error */
		out[RMPP_HDR_OFF] = UMAD_RMPP_VERSION;
		out[RMPP_HDR_OFF + 1] = 1; /* DATA */
		out[RMPP_HDR_OFF + 2] = (uint8_t)(0x1F << 3 | 0x7);
		p32(out + RMPP_HDR_OFF + 4, 1);
		p32(out + RMPP_HDR_OFF + 8, RMPP_DATA_LEN - SA_DATA_LEN);
	}
	send_mad(r->src, r->sport, r->src_qp, r->pkey, r->resv8a, out);
}

/* ---- RMPP sender ---------------------------------------------------------- */

struct xfer {
	int used;
	int dst;
	uint16_t port;
	uint32_t dqp;
	uint16_t pkey;
	uint8_t resv8a;
	uint64_t tid;
	uint8_t hdr[SA_DATA_OFF];
	uint8_t *data;
	size_t dlen;
	uint32_t nseg, acked, sent, window;
	uint64_t deadline;
	int retries;
};

static struct xfer g_xfers[MAX_XFERS];

static void xfer_send_seg(struct xfer *x, uint32_t seg)
{
	uint8_t out[MAD_LEN];
	size_t off = (size_t)(seg - 1) * SA_DATA_LEN;
	size_t n = x->dlen > off ? x->dlen - off : 0;
	uint32_t pad = (uint32_t)(x->nseg * SA_DATA_LEN - x->dlen);
	uint8_t flags = UMAD_RMPP_FLAG_ACTIVE;
	uint32_t paylen = 0;

	if (n > SA_DATA_LEN)
		n = SA_DATA_LEN;
	memset(out, 0, sizeof(out));
	memcpy(out, x->hdr, SA_DATA_OFF);
	if (seg == 1) {
		flags |= 2; /* First */
		paylen = x->nseg * RMPP_DATA_LEN - pad;
	}
	if (seg == x->nseg) {
		flags |= 4; /* Last */
		paylen = RMPP_DATA_LEN - pad;
	}
	out[RMPP_HDR_OFF] = UMAD_RMPP_VERSION;
	out[RMPP_HDR_OFF + 1] = 1; /* DATA */
	out[RMPP_HDR_OFF + 2] = (uint8_t)(0x1F << 3 | flags); /* RRespTime: none */
	out[RMPP_HDR_OFF + 3] = 0;
	p32(out + RMPP_HDR_OFF + 4, seg);
	p32(out + RMPP_HDR_OFF + 8, paylen);
	if (n)
		memcpy(out + SA_DATA_OFF, x->data + off, n);
	send_mad(x->dst, x->port, x->dqp, x->pkey, x->resv8a, out);
}

static void xfer_pump(struct xfer *x)
{
	uint32_t last = x->window < x->nseg ? x->window : x->nseg;

	while (x->sent < last)
		xfer_send_seg(x, ++x->sent);
	x->deadline = now_ms() + RMPP_TIMEOUT_MS;
}

static void xfer_done(struct xfer *x)
{
	free(x->data);
	memset(x, 0, sizeof(*x));
}

/* A GetTableResp: hdr is the 56-byte header (MAD + SA header), data the
 * records. One segment goes out fire-and-forget (a lost one makes the
 * requester retry); several follow the RMPP ACK windows. */
static void send_table(const struct req *r, const uint8_t *hdr, const uint8_t *data, size_t dlen)
{
	struct xfer tmp = { 0 }, *x = &tmp;
	uint32_t nseg = dlen ? (uint32_t)((dlen + SA_DATA_LEN - 1) / SA_DATA_LEN) : 1;

	if (nseg > 1) {
		for (int i = 0; i < MAX_XFERS; i++) {
			struct xfer *e = &g_xfers[i];

			if (e->used && e->dst == r->src && e->port == r->sport &&
			    e->tid == g64(hdr + 8))
				xfer_done(e); /* a retried request restarts its answer */
		}
		x = NULL;
		for (int i = 0; i < MAX_XFERS && !x; i++)
			if (!g_xfers[i].used)
				x = &g_xfers[i];
		if (!x) {
			send_status(r, UMAD_SA_STATUS_NO_RESOURCES << 8);
			return;
		}
	}
	x->used = 1;
	x->dst = r->src;
	x->port = r->sport;
	x->dqp = r->src_qp;
	x->pkey = r->pkey;
	x->resv8a = r->resv8a;
	x->tid = g64(hdr + 8);
	memcpy(x->hdr, hdr, SA_DATA_OFF);
	x->dlen = dlen;
	x->nseg = nseg;
	x->window = nseg > RMPP_WINDOW ? RMPP_WINDOW : nseg;
	x->data = malloc(dlen ? dlen : 1);
	if (!x->data) {
		memset(x, 0, sizeof(*x));
		send_status(r, UMAD_SA_STATUS_NO_RESOURCES << 8);
		return;
	}
	if (dlen)
		memcpy(x->data, data, dlen);
	xfer_pump(x);
	if (x == &tmp)
		free(x->data);
}

static void rmpp_input(int src, uint16_t sport, const uint8_t *mad)
{
	uint8_t type = mad[RMPP_HDR_OFF + 1];
	uint64_t tid = g64(mad + 8);

	for (int i = 0; i < MAX_XFERS; i++) {
		struct xfer *x = &g_xfers[i];

		if (!x->used || x->dst != src || x->port != sport || x->tid != tid)
			continue;
		if (type == 2) { /* ACK */
			uint32_t seg = g32(mad + RMPP_HDR_OFF + 4);
			uint32_t nwl = g32(mad + RMPP_HDR_OFF + 8);

			if (seg > x->acked && seg <= x->sent) {
				x->acked = seg;
				x->retries = 0;
			}
			if (x->acked >= x->nseg) {
				xfer_done(x);
				return;
			}
			if (nwl > x->window)
				x->window = nwl;
			if (x->window < x->acked + 1)
				x->window = x->acked + 1;
			xfer_pump(x);
		} else if (type == 3 || type == 4) { /* STOP, ABORT */
			logf_("RMPP %s from node%d tid 0x%llx", type == 3 ? "STOP" : "ABORT", src,
			      (unsigned long long)tid);
			xfer_done(x);
		}
		return;
	}
}

static void xfer_timers(void)
{
	uint64_t now = now_ms();

	for (int i = 0; i < MAX_XFERS; i++) {
		struct xfer *x = &g_xfers[i];

		if (!x->used || now < x->deadline)
			continue;
		if (++x->retries > RMPP_RETRIES) {
			uint8_t out[MAD_LEN];

			logf_("RMPP to node%d: no ACK, abort", x->dst);
			memset(out, 0, sizeof(out));
			memcpy(out, x->hdr, SA_DATA_OFF);
			out[RMPP_HDR_OFF] = UMAD_RMPP_VERSION;
			out[RMPP_HDR_OFF + 1] = 4; /* ABORT */
			out[RMPP_HDR_OFF + 2] = 0x1F << 3 | UMAD_RMPP_FLAG_ACTIVE;
			out[RMPP_HDR_OFF + 3] = 118; /* "T2L: total time too long" */
			send_mad(x->dst, x->port, x->dqp, x->pkey, x->resv8a, out);
			xfer_done(x);
			continue;
		}
		/* go back to the first unacknowledged segment */
		x->sent = x->acked;
		xfer_pump(x);
	}
}

/* ---- table building ------------------------------------------------------ */

struct table {
	uint8_t *buf;
	size_t len, cap, reclen;
	unsigned n;
};

static uint8_t *table_add(struct table *t)
{
	if (t->len + t->reclen > t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 4096;
		uint8_t *nb;

		while (nc < t->len + t->reclen)
			nc *= 2;
		nb = realloc(t->buf, nc);
		if (!nb)
			return NULL;
		t->buf = nb;
		t->cap = nc;
	}
	memset(t->buf + t->len, 0, t->reclen);
	t->len += t->reclen;
	t->n++;
	return t->buf + t->len - t->reclen;
}

/* Sends a Get (exactly one record) or GetTable answer from table t. */
static void answer(const struct req *r, struct table *t)
{
	uint8_t method = r->mad[3];
	uint8_t hdr[MAD_LEN];

	if (method == UMAD_SA_METHOD_GET_TABLE) {
		resp_hdr(hdr, r, UMAD_SA_METHOD_GET_TABLE_RESP, 0);
		p16(hdr + SA_HDR_OFF + 8, (uint16_t)(t->reclen / 8));
		send_table(r, hdr, t->buf, t->len);
	} else if (t->n == 0) {
		send_status(r, UMAD_SA_STATUS_NO_RECORDS << 8);
	} else if (t->n > 1) {
		send_status(r, UMAD_SA_STATUS_TOO_MANY_RECORDS << 8);
	} else {
		resp_hdr(hdr, r, resp_method(method), 0);
		p16(hdr + SA_HDR_OFF + 8, (uint16_t)(t->reclen / 8));
		memcpy(hdr + SA_DATA_OFF, t->buf, t->reclen);
		send_mad(r->src, r->sport, r->src_qp, r->pkey, r->resv8a, hdr);
	}
	free(t->buf);
}

/* ---- SM: LIDs and port states --------------------------------------------- */

static uint32_t g_sm_activity;  /* SMInfo ActCount: bumped by every sweep */
static unsigned g_lmc;          /* uscm-sim up --lmc: the LMC of every CA port */

/* The built-in SM's switches (a --topo fabric): LIDs after the CAs', every
 * port Active, and LFTs by fewest hops (the first port found on a tie), as
 * OpenSM's min-hop routing would. Lock held. */
static void builtin_switches(struct simf_state *st)
{
	unsigned total = st->nnodes + st->nswitches;
	uint16_t top = 0;

	for (unsigned i = st->nnodes + 1; i <= total && i < SIMF_MAX_NODES; i++) {
		struct simf_node *nd = &st->nodes[i];

		nd->sm_lid = st->nodes[0].lid;
		if (!nd->lid)
			simf_lid_range_set(st, (int)i, (uint16_t)((i + 1) << g_lmc), 0);
		nd->port_state = SIMF_PORT_ACTIVE;
		for (unsigned p = 1; p <= nd->nports; p++)
			nd->ports[p].state = nd->ports[p].peer >= 0 && !nd->ports[p].down ? SIMF_PORT_ACTIVE
											   : SIMF_PORT_DOWN;
	}
	for (unsigned d = 1; d <= total && d < SIMF_MAX_NODES; d++) {
		int queue[SIMF_MAX_NODES], dist[SIMF_MAX_NODES], qh = 0, qt = 0;
		uint16_t lid = st->nodes[d].lid;
		unsigned nlids = 1u << (st->nodes[d].lmc & 7);

		if (!lid)
			continue;
		if (lid + nlids - 1 > top)
			top = (uint16_t)(lid + nlids - 1);
		for (unsigned k = 0; k < SIMF_MAX_NODES; k++)
			dist[k] = -1;
		dist[d] = 0;
		queue[qt++] = (int)d;
		if (st->nodes[d].type == SIMF_NODE_SWITCH)
			st->sw[st->nodes[d].sw].lft[lid] = 0;
		while (qh < qt) {
			int u = queue[qh++];
			const struct simf_node *un = &st->nodes[u];

			if (u != (int)d && un->type != SIMF_NODE_SWITCH)
				continue;
			for (unsigned p = 1; p <= un->nports; p++) {
				int v = un->ports[p].peer;

				if (v <= 0 || v >= SIMF_MAX_NODES || dist[v] >= 0 || un->ports[p].down ||
				    st->nodes[v].type != SIMF_NODE_SWITCH)
					continue;
				dist[v] = dist[u] + 1;
				st->sw[st->nodes[v].sw].lft[lid] = un->ports[p].peer_port;
				queue[qt++] = v;
			}
		}
		/* LMC > 0: LID base + k leaves each switch by the k-th of its
		 * ports on a shortest path (counted from the one base takes),
		 * so a port's LIDs spread over the fat tree's spines */
		for (int qi = 1; nlids > 1 && qi < qt; qi++) {
			int v = queue[qi], cand[SIMF_MAX_PORTS], nc = 0, first = 0;
			const struct simf_node *vn = &st->nodes[v];
			uint8_t *vl = st->sw[vn->sw].lft;

			for (unsigned p = 1; p <= vn->nports; p++) {
				int w = vn->ports[p].peer;

				if (w >= 0 && w < SIMF_MAX_NODES && !vn->ports[p].down && dist[w] == dist[v] - 1 &&
				    (w == (int)d || st->nodes[w].type == SIMF_NODE_SWITCH) && nc < SIMF_MAX_PORTS) {
					if (p == vl[lid])
						first = nc;
					cand[nc++] = (int)p;
				}
			}
			for (unsigned k = 1; k < nlids && nc; k++)
				vl[lid + k] = (uint8_t)cand[(first + (int)k) % nc];
		}
	}
	for (unsigned k = 0; k < st->nswitches; k++)
		st->sw[k].lft_top = top;
}

static void sm_sweep(void)
{
	struct simf_state *st = g_f->st;

	__atomic_add_fetch(&g_sm_activity, 1, __ATOMIC_RELAXED);
	simf_lock(g_f);
	for (unsigned i = 0; i <= st->nnodes; i++) {
		struct simf_node *nd = &st->nodes[i];

		/* LIDs: node i's base is (i + 1) << LMC (node 0, the SM, gets
		 * 1 with LMC 0), aligned as IBTA wants a base LID */
		if (!st->nodes[0].lid)
			simf_lid_range_set(st, 0, (uint16_t)(1u << g_lmc), g_lmc);
		nd->sm_lid = st->nodes[0].lid;
		if (!nd->link_up || (st->cabled && nd->ports[1].down)) {
			nd->port_state = SIMF_PORT_DOWN;
			continue;
		}
		if (nd->port_state == SIMF_PORT_ACTIVE && nd->lid)
			continue;
		if (!nd->lid)
			simf_lid_range_set(st, (int)i, (uint16_t)((i + 1) << g_lmc), g_lmc);
		nd->port_state = SIMF_PORT_ACTIVE;
		logf_("%s: LID %u, ACTIVE", nd->name, nd->lid);
	}
	if (st->nswitches) {
		builtin_switches(st);
		simf_mft_program(st); /* the trees follow link changes */
	}
	simf_unlock(g_f);
}

/* ---- SA: rates, selectors -------------------------------------------------- */

/* IBTA rate encoding -> Mb/s (0: unknown) */
static unsigned rate_mbps(unsigned r)
{
	static const unsigned t[] = { 0, 0, 2500, 10000, 30000, 5000, 20000, 40000, 60000,
				      80000, 120000, 14000, 56000, 112000, 168000, 25000,
				      100000, 200000, 300000, 28000, 50000, 400000, 600000 };

	return r < sizeof(t) / sizeof(t[0]) ? t[r] : 0;
}

/* Does the fabric's value `have` satisfy (selector, want)? kind 0: MTU,
 * 1: rate, 2: packet lifetime. */
static int sel_ok(int kind, unsigned sel, unsigned want, unsigned have)
{
	unsigned h = have, w = want;

	if (kind == 1) {
		h = rate_mbps(have);
		w = rate_mbps(want);
	}
	switch (sel) {
	case UMAD_SA_SELECTOR_GREATER_THAN: return h > w;
	case UMAD_SA_SELECTOR_LESS_THAN: return h < w;
	case UMAD_SA_SELECTOR_EXACTLY: return h == w;
	default: return 1; /* largest / smallest available */
	}
}

/* ---- SA: PathRecord ------------------------------------------------------ */

static int port_usable(const struct simf_node *nd)
{
	return nd->link_up && nd->port_state == SIMF_PORT_ACTIVE && nd->lid;
}

static int has_pkey(const struct simf_node *nd, uint16_t pkey)
{
	for (int i = 0; i < SIMF_PKEYS; i++)
		if (nd->pkeys[i] && (nd->pkeys[i] & 0x7FFF) == (pkey & 0x7FFF))
			return 1;
	return 0;
}

/* The P_Key of a path between sn and dn, as OpenSM's SA picks it: the one
 * asked for (want >= 0) when both ports hold it and one of them as a full
 * member, else (not asked) the first of sn's table that dn shares so; 0
 * when they share none (no path: two limited members do not talk). */
static uint16_t path_pkey(const struct simf_node *sn, const struct simf_node *dn, int want)
{
	for (int i = 0; i < SIMF_PKEYS; i++) {
		uint16_t a = sn->pkeys[i];

		if (!(a & 0x7FFF) || (want >= 0 && (a & 0x7FFF) != (want & 0x7FFF)))
			continue;
		for (int j = 0; j < SIMF_PKEYS; j++)
			if (simf_pkey_match(a, dn->pkeys[j]))
				return want >= 0 ? (uint16_t)want : a;
	}
	return 0;
}

/* One record for source LID slid of port sn to dlid of dn. */
static int pr_fill(struct table *t, const uint8_t *q, uint64_t cm, const struct simf_node *sn,
		   const struct simf_node *dn, uint16_t pkey, uint16_t slid, uint16_t dlid, uint8_t pref)
{
	uint8_t *p = table_add(t);

	if (!p)
		return -1;
	if (cm & PR_SERVICE_ID)
		memcpy(p, q, 8);
	memcpy(p + 8, dn->gid, 16);
	memcpy(p + 24, sn->gid, 16);
	p16(p + 40, dlid);
	p16(p + 42, slid);
	/* RawTraffic 0, FlowLabel, HopLimit */
	p32(p + 44, ((cm & PR_FLOW_LABEL) ? (g32(q + 44) & 0x0FFFFF00u) : 0) | ((cm & PR_HOP_LIMIT) ? q[47] : 0));
	p[48] = (cm & PR_TCLASS) ? q[48] : 0;
	p[49] = 0x80; /* Reversible, NumbPath 0 */
	p16(p + 50, pkey);
	p16(p + 52, (cm & PR_SL) ? (g16(q + 52) & 0xF) : 0); /* QoSClass 0, SL */
	p[54] = (uint8_t)(UMAD_SA_SELECTOR_EXACTLY << 6 | PATH_MTU);
	p[55] = (uint8_t)(UMAD_SA_SELECTOR_EXACTLY << 6 | FAB_RATE);
	p[56] = (uint8_t)(UMAD_SA_SELECTOR_EXACTLY << 6 | FAB_PLT);
	p[57] = pref;
	return 0;
}

/* The paths between two ports, as OpenSM lists them with LMC > 0: their
 * LIDs (the one given in the query, else every LID of the port's range)
 * paired offset by offset first (Preference 0), then every other
 * combination (Preference 2), source-major; NumbPath in the mask limits
 * how many, a Get takes the first. */
static int pr_pair(struct table *t, const uint8_t *q, uint64_t cm, uint8_t method, const struct simf_node *sn,
		   const struct simf_node *dn, uint16_t pkey, uint16_t s_lid, uint16_t d_lid)
{
	unsigned ns = s_lid ? 1 : 1u << (sn->lmc & 7), nd = d_lid ? 1 : 1u << (dn->lmc & 7);
	unsigned sb = s_lid ? s_lid : sn->lid, db = d_lid ? d_lid : dn->lid;
	unsigned max = ns * nd, n = 0, both = ns < nd ? ns : nd;

	if ((cm & PR_NUMB_PATH) && (q[49] & 0x7F) && (q[49] & 0x7F) < max)
		max = q[49] & 0x7F;
	if (method == UMAD_METHOD_GET)
		max = 1;
	for (unsigned k = 0; k < both && n < max; k++, n++)
		if (pr_fill(t, q, cm, sn, dn, pkey, (uint16_t)(sb + k), (uint16_t)(db + k), 0) < 0)
			return -1;
	for (unsigned i = 0; i < ns && n < max; i++)
		for (unsigned j = 0; j < nd && n < max; j++) {
			if (i == j && i < both)
				continue;
			if (pr_fill(t, q, cm, sn, dn, pkey, (uint16_t)(sb + i), (uint16_t)(db + j), 2) < 0)
				return -1;
			n++;
		}
	return 0;
}

static void sa_path_record(const struct req *r)
{
	const struct simf_state *st = g_f->st;
	const uint8_t *q = r->mad + SA_DATA_OFF;
	uint64_t cm = g64(r->mad + SA_HDR_OFF + 12);
	uint8_t method = r->mad[3];
	struct table t = { .reclen = PR_LEN };
	int s_fix = -1, d_fix = -1;
	int want_pkey = (cm & PR_PKEY) ? g16(q + 50) : -1;
	uint16_t s_lid = 0, d_lid = 0;

	if (method != UMAD_METHOD_GET && method != UMAD_SA_METHOD_GET_TABLE) {
		send_status(r, UMAD_STATUS_METHOD_NOT_SUPPORTED);
		return;
	}
	if (cm & PR_SGID) {
		s_fix = simf_node_by_gid(g_f, q + 24);
		if (s_fix < 0) {
			send_status(r, UMAD_SA_STATUS_INVALID_GID << 8);
			return;
		}
	}
	if (cm & PR_DGID) {
		d_fix = simf_node_by_gid(g_f, q + 8);
		if (d_fix < 0) {
			send_status(r, UMAD_SA_STATUS_INVALID_GID << 8);
			return;
		}
	}
	if (cm & PR_SLID) {
		int n = simf_node_by_lid(g_f, g16(q + 42));

		s_lid = g16(q + 42);

		if (n < 0 || (s_fix >= 0 && n != s_fix))
			s_fix = -2;
		else
			s_fix = n;
	}
	if (cm & PR_DLID) {
		int n = simf_node_by_lid(g_f, g16(q + 40));

		d_lid = g16(q + 40);

		if (n < 0 || (d_fix >= 0 && n != d_fix))
			d_fix = -2;
		else
			d_fix = n;
	}
	if (method == UMAD_METHOD_GET && (s_fix == -1 || d_fix == -1)) {
		send_status(r, UMAD_SA_STATUS_INSUF_COMPS << 8);
		return;
	}
	if ((cm & PR_MTU) && !sel_ok(0, (cm & PR_MTU_SEL) ? q[54] >> 6 : 2, q[54] & 0x3F, PATH_MTU))
		goto none;
	if ((cm & PR_RATE) && !sel_ok(1, (cm & PR_RATE_SEL) ? q[55] >> 6 : 2, q[55] & 0x3F, FAB_RATE))
		goto none;
	if ((cm & PR_PLT) && !sel_ok(2, (cm & PR_PLT_SEL) ? q[56] >> 6 : 2, q[56] & 0x3F, FAB_PLT))
		goto none;
	/* every path here is reversible, so Reversible in the mask is met */
	for (int s = 0; s <= (int)st->nnodes; s++) {
		if (s_fix != -1 && s != s_fix)
			continue;
		for (int d = 0; d <= (int)st->nnodes; d++) {
			const struct simf_node *sn = &st->nodes[s], *dn = &st->nodes[d];
			uint16_t pkey;

			if (d_fix != -1 && d != d_fix)
				continue;
			if (!port_usable(sn) || !port_usable(dn))
				continue;
			if (!(pkey = path_pkey(sn, dn, want_pkey)))
				continue;
			if (pr_pair(&t, q, cm, method, sn, dn, pkey, s_lid, d_lid) < 0)
				break;
		}
	}
	if (g_verbose) {
		char a[INET6_ADDRSTRLEN], b[INET6_ADDRSTRLEN];

		logf_("PathRecord %s from node%d sgid %s dgid %s mask 0x%llx: %u record(s)",
		      method == UMAD_METHOD_GET ? "Get" : "GetTable", r->src, gid_str(q + 24, a),
		      gid_str(q + 8, b), (unsigned long long)cm, t.n);
	}
	answer(r, &t);
	return;
none:
	answer(r, &t);
}

/* ---- SA: MCMemberRecord ---------------------------------------------------- */

static void mcmr_fill(uint8_t *p, const struct simf_mcg *m, const uint8_t *port_gid, uint8_t join)
{
	memcpy(p, m->mgid, 16);
	memcpy(p + 16, port_gid, 16);
	p32(p + 32, m->qkey);
	p16(p + 36, m->mlid);
	p[38] = (uint8_t)(UMAD_SA_SELECTOR_EXACTLY << 6 | m->mtu);
	p[39] = m->tclass;
	p16(p + 40, m->pkey);
	p[42] = (uint8_t)(UMAD_SA_SELECTOR_EXACTLY << 6 | m->rate);
	p[43] = (uint8_t)(UMAD_SA_SELECTOR_EXACTLY << 6 | m->pkt_life);
	p32(p + 44, (uint32_t)m->sl << 28 | (m->flow_label & 0xFFFFF) << 8 | m->hop_limit);
	p[48] = (uint8_t)(m->scope << 4 | (join & 0xF));
	p[49] = 0;
}

/* Picks the group's MTU / rate for a create, honouring a selector. */
static int mc_pick(int kind, uint64_t cm, uint64_t sel_bit, uint64_t val_bit, uint8_t byte,
		   uint8_t fab, uint8_t *out)
{
	unsigned sel, want;

	if (!(cm & val_bit)) {
		*out = fab;
		return 0;
	}
	sel = (cm & sel_bit) ? byte >> 6 : UMAD_SA_SELECTOR_EXACTLY;
	want = byte & 0x3F;
	if (sel == UMAD_SA_SELECTOR_LARGEST_AVAIL || sel_ok(kind, sel, want, fab)) {
		*out = fab;
		return 0;
	}
	if (sel == UMAD_SA_SELECTOR_EXACTLY && kind != 1 && want && want < fab) {
		*out = (uint8_t)want; /* a smaller MTU / longer lifetime is realizable */
		return 0;
	}
	if (sel == UMAD_SA_SELECTOR_LESS_THAN && kind == 0 && want > 1) {
		*out = (uint8_t)(want - 1);
		return 0;
	}
	return -1;
}

static uint16_t mlid_alloc(struct simf_state *st)
{
	for (unsigned k = 0; k < 0x4000; k++) {
		uint16_t mlid = (uint16_t)(0xC000 + ((st->mlid_next - 0xC000 + k) & 0x3FFF));
		int used = 0;

		if (mlid == 0xFFFF)
			continue;
		for (int g = 0; g < SIMF_MAX_MCG; g++)
			if (st->mcgs[g].used && st->mcgs[g].mlid == mlid)
				used = 1;
		if (!used) {
			st->mlid_next = (uint32_t)mlid + 1;
			return mlid;
		}
	}
	return 0;
}

static int mcg_lookup(struct simf_state *st, const uint8_t *mgid, uint16_t mlid)
{
	for (int g = 0; g < SIMF_MAX_MCG; g++) {
		const struct simf_mcg *m = &st->mcgs[g];

		if (!m->used)
			continue;
		if (mgid ? memcmp(m->mgid, mgid, 16) == 0 : (mlid && m->mlid == mlid))
			return g;
	}
	return -1;
}

#define MC_CREATE_MASK (UMAD_SA_MCM_COMP_MASK_PORT_GID | UMAD_SA_MCM_COMP_MASK_JOIN_STATE | \
			UMAD_SA_MCM_COMP_MASK_QKEY | UMAD_SA_MCM_COMP_MASK_TCLASS | \
			UMAD_SA_MCM_COMP_MASK_PKEY | UMAD_SA_MCM_COMP_MASK_FLOW_LABEL | \
			UMAD_SA_MCM_COMP_MASK_SL)

/* Join (Set) with the state lock held; returns an SA/MAD status and fills
 * the answer record. */
static uint16_t mc_join_locked(const struct req *r, uint64_t cm, const uint8_t *q, uint8_t *rec)
{
	struct simf_state *st = g_f->st;
	uint8_t join = q[48] & 0xF;
	const uint8_t *mgid = q;
	struct simf_mcg *m;
	int node, g;

	if ((cm & (UMAD_SA_MCM_COMP_MASK_PORT_GID | UMAD_SA_MCM_COMP_MASK_JOIN_STATE)) !=
	    (UMAD_SA_MCM_COMP_MASK_PORT_GID | UMAD_SA_MCM_COMP_MASK_JOIN_STATE))
		return UMAD_SA_STATUS_INSUF_COMPS << 8;
	if (!join)
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	node = simf_node_by_gid(g_f, q + 16);
	if (node < 0)
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	if (!(cm & UMAD_SA_MCM_COMP_MASK_MGID) || gid_is_zero(mgid))
		mgid = NULL;
	if (mgid && mgid[0] != 0xFF)
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	g = mgid ? mcg_lookup(st, mgid, 0) : -1;
	if (g >= 0 && !st->mcgs[g].sa_created) {
		/* known from a QP attach only: the SA creates it now */
		m = &st->mcgs[g];
		goto create;
	}
	if (g < 0) {
		for (int i = 0; i < SIMF_MAX_MCG && g < 0; i++)
			if (!st->mcgs[i].used)
				g = i;
		if (g < 0)
			return UMAD_SA_STATUS_NO_RESOURCES << 8;
		m = &st->mcgs[g];
		memset(m, 0, sizeof(*m));
		for (int k = 0; k < SIMF_MCG_QPS; k++)
			m->qps[k].node = -1;
		goto create;
	}
	m = &st->mcgs[g];
	/* join an existing group: what the request specifies must match */
	if ((cm & UMAD_SA_MCM_COMP_MASK_MLID) && g16(q + 36) != m->mlid)
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	if ((cm & UMAD_SA_MCM_COMP_MASK_QKEY) && g32(q + 32) != m->qkey)
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	if ((cm & UMAD_SA_MCM_COMP_MASK_PKEY) && (g16(q + 40) & 0x7FFF) != (m->pkey & 0x7FFF))
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	if ((cm & UMAD_SA_MCM_COMP_MASK_SL) && (q[44] >> 4) != m->sl)
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	if ((cm & UMAD_SA_MCM_COMP_MASK_TCLASS) && q[39] != m->tclass)
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	if ((cm & UMAD_SA_MCM_COMP_MASK_FLOW_LABEL) && ((g32(q + 44) >> 8) & 0xFFFFF) != m->flow_label)
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	if ((cm & UMAD_SA_MCM_COMP_MASK_MTU) &&
	    !sel_ok(0, (cm & UMAD_SA_MCM_COMP_MASK_MTU_SEL) ? q[38] >> 6 : 2, q[38] & 0x3F, m->mtu))
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	if ((cm & UMAD_SA_MCM_COMP_MASK_RATE) &&
	    !sel_ok(1, (cm & UMAD_SA_MCM_COMP_MASK_RATE_SEL) ? q[42] >> 6 : 2, q[42] & 0x3F, m->rate))
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	m->join_state[node] |= join;
	mcmr_fill(rec, m, q + 16, m->join_state[node]);
	return 0;

create:
	if ((cm & MC_CREATE_MASK) != MC_CREATE_MASK)
		return UMAD_SA_STATUS_INSUF_COMPS << 8;
	if (!(join & UMAD_SA_MCM_JOIN_STATE_FULL_MEMBER))
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	{
		uint8_t mtu, rate, plt = FAB_PLT;
		uint16_t mlid;

		if (mc_pick(0, cm, UMAD_SA_MCM_COMP_MASK_MTU_SEL, UMAD_SA_MCM_COMP_MASK_MTU, q[38],
			    FAB_MTU, &mtu) < 0 ||
		    mc_pick(1, cm, UMAD_SA_MCM_COMP_MASK_RATE_SEL, UMAD_SA_MCM_COMP_MASK_RATE, q[42],
			    FAB_RATE, &rate) < 0)
			return UMAD_SA_STATUS_REQ_INVALID << 8;
		if ((cm & UMAD_SA_MCM_COMP_MASK_LIFE_TIME) && (q[43] & 0x3F))
			plt = q[43] & 0x3F;
		if (!has_pkey(&st->nodes[node], g16(q + 40)))
			return UMAD_SA_STATUS_REQ_INVALID << 8;
		mlid = m->mlid ? m->mlid : mlid_alloc(st);
		if (!mlid)
			return UMAD_SA_STATUS_NO_RESOURCES << 8;
		m->used = 1;
		m->sa_created = 1;
		m->mlid = mlid;
		m->mtu = mtu;
		m->rate = rate;
		m->pkt_life = plt;
		m->qkey = g32(q + 32);
		m->pkey = g16(q + 40) | 0x8000;
		m->tclass = q[39];
		m->sl = q[44] >> 4;
		m->flow_label = (g32(q + 44) >> 8) & 0xFFFFF;
		m->hop_limit = (cm & UMAD_SA_MCM_COMP_MASK_HOP_LIMIT) ? q[47] : 0;
		if (mgid) {
			memcpy(m->mgid, mgid, 16);
			m->scope = mgid[1] & 0xF;
		} else {
			/* SA-assigned: ff1<scope>:a01b:<pkey>:: + unique bits */
			uint8_t scope = (cm & UMAD_SA_MCM_COMP_MASK_SCOPE) ? q[48] >> 4 : 0;

			if (!scope)
				scope = UMAD_SA_MCM_ADDR_SCOPE_LINK_LOCAL;
			memset(m->mgid, 0, 16);
			m->mgid[0] = 0xFF;
			m->mgid[1] = (uint8_t)(0x10 | scope);
			m->mgid[2] = 0xA0;
			m->mgid[3] = 0x1B;
			p16(m->mgid + 4, m->pkey);
			p64(m->mgid + 8, (uint64_t)mlid << 32 | (uint32_t)(now_ms() & 0xFFFFFFFF));
			m->scope = scope;
		}
		memset(m->join_state, 0, sizeof(m->join_state));
		m->join_state[node] = join;
		mcmr_fill(rec, m, q + 16, join);
		if (g_verbose) {
			char a[INET6_ADDRSTRLEN];

			logf_("multicast group %s MLID 0x%04x created by node%d", gid_str(m->mgid, a),
			      m->mlid, r->src);
		}
	}
	return 0;
}

static uint16_t mc_leave_locked(uint64_t cm, const uint8_t *q, uint8_t *rec)
{
	struct simf_state *st = g_f->st;
	uint8_t join = q[48] & 0xF;
	struct simf_mcg *m;
	int node, g, left = 0;

	if (!(cm & UMAD_SA_MCM_COMP_MASK_PORT_GID) || !(cm & UMAD_SA_MCM_COMP_MASK_JOIN_STATE))
		return UMAD_SA_STATUS_INSUF_COMPS << 8;
	node = simf_node_by_gid(g_f, q + 16);
	if ((cm & UMAD_SA_MCM_COMP_MASK_MGID) && !gid_is_zero(q))
		g = mcg_lookup(st, q, 0);
	else if (cm & UMAD_SA_MCM_COMP_MASK_MLID)
		g = mcg_lookup(st, NULL, g16(q + 36));
	else
		return UMAD_SA_STATUS_INSUF_COMPS << 8;
	if (g < 0 || node < 0 || !st->mcgs[g].sa_created || !(st->mcgs[g].join_state[node] & join))
		return UMAD_SA_STATUS_REQ_INVALID << 8;
	m = &st->mcgs[g];
	m->join_state[node] &= (uint8_t)~join;
	mcmr_fill(rec, m, q + 16, join);
	for (int i = 0; i < SIMF_MAX_NODES; i++)
		if (m->join_state[i])
			left = 1;
	if (!left) {
		int qps = 0;

		for (int k = 0; k < SIMF_MCG_QPS; k++)
			if (m->qps[k].node >= 0)
				qps = 1;
		logf_("multicast group MLID 0x%04x deleted", m->mlid);
		m->sa_created = 0;
		m->mlid = 0;
		if (!qps)
			m->used = 0;
	}
	return 0;
}

static void sa_mcmember(const struct req *r)
{
	struct simf_state *st = g_f->st;
	const uint8_t *q = r->mad + SA_DATA_OFF;
	uint64_t cm = g64(r->mad + SA_HDR_OFF + 12);
	uint8_t method = r->mad[3];
	uint8_t out[MAD_LEN];
	uint16_t status;
	struct table t = { .reclen = MCMR_LEN };

	switch (method) {
	case UMAD_METHOD_SET:
	case UMAD_SA_METHOD_DELETE:
		resp_hdr(out, r, resp_method(method), 0);
		simf_lock(g_f);
		if (method == UMAD_METHOD_SET)
			status = mc_join_locked(r, cm, q, out + SA_DATA_OFF);
		else
			status = mc_leave_locked(cm, q, out + SA_DATA_OFF);
		if (st->nswitches)
			simf_mft_program(st); /* before the answer: members receive at once */
		__atomic_add_fetch(&st->generation, 1, __ATOMIC_RELEASE);
		simf_unlock(g_f);
		logf_("MCMemberRecord %s from node%d join_state %u: status 0x%04x",
		      method == UMAD_METHOD_SET ? "Set" : "Delete", r->src, q[48] & 0xF, status);
		if (status) {
			send_status(r, status);
			return;
		}
		p16(out + SA_HDR_OFF + 8, MCMR_LEN / 8);
		send_mad(r->src, r->sport, r->src_qp, r->pkey, r->resv8a, out);
		return;
	case UMAD_METHOD_GET:
	case UMAD_SA_METHOD_GET_TABLE:
		simf_lock(g_f);
		for (int g = 0; g < SIMF_MAX_MCG; g++) {
			const struct simf_mcg *m = &st->mcgs[g];

			if (!m->used || !m->sa_created)
				continue;
			if ((cm & UMAD_SA_MCM_COMP_MASK_MGID) && memcmp(q, m->mgid, 16) != 0)
				continue;
			if ((cm & UMAD_SA_MCM_COMP_MASK_MLID) && g16(q + 36) != m->mlid)
				continue;
			if ((cm & UMAD_SA_MCM_COMP_MASK_QKEY) && g32(q + 32) != m->qkey)
				continue;
			if ((cm & UMAD_SA_MCM_COMP_MASK_PKEY) && (g16(q + 40) & 0x7FFF) != (m->pkey & 0x7FFF))
				continue;
			for (unsigned n = 0; n <= st->nnodes; n++) {
				uint8_t *p;

				if (!m->join_state[n])
					continue;
				if ((cm & UMAD_SA_MCM_COMP_MASK_PORT_GID) &&
				    memcmp(q + 16, st->nodes[n].gid, 16) != 0)
					continue;
				if ((cm & UMAD_SA_MCM_COMP_MASK_JOIN_STATE) &&
				    !(m->join_state[n] & (q[48] & 0xF)))
					continue;
				p = table_add(&t);
				if (p)
					mcmr_fill(p, m, st->nodes[n].gid, m->join_state[n]);
			}
		}
		simf_unlock(g_f);
		answer(r, &t);
		return;
	default:
		send_status(r, UMAD_STATUS_METHOD_NOT_SUPPORTED);
	}
}

/* ---- SA: NodeRecord, PortInfoRecord, ClassPortInfo, InformInfo ----------- */

/* The SMP attributes every node's SMA answers (IBTA Vol1 14.2.5), shared
 * with the SA's NodeRecord / PortInfoRecord so both views agree. */

#define PORT_MTU_CAP 5       /* 4096, as the verbs drop-in's port reports */
#define PORT_GUID_CAP 8      /* one GUIDInfo block; only index 0 is set */
#define CAP_MASK_CA 0x2651e848u /* the umad drop-in's capability mask */
#define CAP_MASK_IS_SM 0x2u

/* The node whose port hosts the SM (IsSM in its capability mask): node 0
 * for the built-in SM, the external SM's node otherwise. */
static int sm_port_node(void)
{
	return g_f->st->sm_kind == SIMF_SM_OPENSM ? g_f->st->sm_node : 0;
}

/* NodeInfo, 40 bytes. */
static void put_node_info(uint8_t *p, const struct simf_node *nd)
{
	memset(p, 0, 40);
	p[0] = 1;                 /* BaseVersion */
	p[1] = 1;                 /* ClassVersion */
	p[2] = nd->type == SIMF_NODE_SWITCH ? 2 : 1; /* NodeType: switch or channel adapter */
	p[3] = nd->type == SIMF_NODE_SWITCH ? nd->nports : 1; /* NumPorts */
	p64(p + 4, nd->guid);     /* SystemImageGUID */
	p64(p + 12, nd->guid);    /* NodeGUID */
	p64(p + 20, nd->guid);    /* PortGUID */
	p16(p + 28, SIMF_PKEYS);  /* PartitionCap */
	p16(p + 30, nd->type == SIMF_NODE_SWITCH ? 0xcf08 : 0x1017); /* DeviceID */
	p32(p + 32, 0);           /* Revision */
	p32(p + 36, 1u << 24 | 0x0002c9u); /* LocalPortNum 1 (see sma_get), VendorID */
}

/* NodeDescription, 64 bytes. */
static void put_node_desc(uint8_t *p, const struct simf_node *nd, int idx)
{
	memset(p, 0, 64);
	if (nd->desc[0])
		memcpy(p, nd->desc, strnlen(nd->desc, sizeof(nd->desc)));
	else
		snprintf((char *)p, 64, "uscm-sim %s%s", nd->name, idx == 0 ? " (SM/SA)" : "");
}

/* PortInfo of port 1, 64 bytes. */
static void put_port_info(uint8_t *pi, const struct simf_node *nd, int idx)
{
	memset(pi, 0, 64);
	p64(pi, 0);                                   /* M_Key: none */
	pi[8] = 0xfe; pi[9] = 0x80;                   /* GidPrefix fe80:: */
	p16(pi + 16, nd->lid);
	p16(pi + 18, nd->sm_lid);
	p32(pi + 20, CAP_MASK_CA | (idx == sm_port_node() ? CAP_MASK_IS_SM : 0));
	pi[28] = 1;                                   /* LocalPortNum */
	pi[29] = 3; pi[30] = 3; pi[31] = 2;           /* LinkWidth enabled/supported 1X|4X, active 4X */
	pi[32] = (uint8_t)(7 << 4 | (nd->port_state & 0xF)); /* LinkSpeedSupported, PortState */
	pi[33] = (uint8_t)((nd->link_up && !(g_f->st->cabled && nd->ports[1].down) ? 5 : 3) << 4 |
			   2); /* PhysState LinkUp/Disabled, LinkDownDefault Polling */
	pi[34] = nd->lmc & 7;                         /* M_KeyProtectBits 0, LMC */
	pi[35] = 4 << 4 | 7;                          /* LinkSpeedActive 10 Gb/s, enabled 2.5/5/10 */
	pi[36] = (uint8_t)(PORT_MTU_CAP << 4);        /* NeighborMTU, MasterSMSL 0 */
	pi[37] = 4 << 4;                              /* VLCap VL0-7, InitType 0 */
	pi[39] = 8; pi[40] = 8;                       /* VLArbitration high/low cap */
	pi[41] = PORT_MTU_CAP;                        /* InitTypeReply 0, MTUCap */
	pi[42] = 0 << 5 | 19;                         /* VLStallCount, HOQLife */
	pi[43] = 4 << 4;                              /* OperationalVLs VL0-7 */
	{
		/* P_KeyViolations: what the port dropped for its P_Key (the
		 * drop-ins count it), saturating at 16 bits */
		uint32_t v = simf_pkey_violations(g_f, idx);

		p16(pi + 46, (uint16_t)(v > 0xFFFF ? 0xFFFF : v));
	}
	pi[50] = PORT_GUID_CAP;                       /* GUIDCap */
	pi[51] = 18;                                  /* SubnetTimeOut */
	pi[52] = SA_RESP_TIME;                        /* RespTimeValue */
	/* extended speeds (CapabilityMask bit 14): EDR 25.78125 Gb/s per lane */
	pi[62] = 2 << 4 | 3;                          /* LinkSpeedExtActive EDR, supported FDR|EDR */
	pi[63] = 3;                                   /* LinkSpeedExtEnabled FDR|EDR */
}

/* PortInfo of a switch's port `port` (0: its management port, which has
 * the switch's LID and SM LID; 1..: an external port, whose state is its
 * own and whose physical state says whether a cable with a live link is
 * plugged in). */
static void put_port_info_sw(uint8_t *pi, const struct simf_node *nd, int idx, unsigned port)
{
	put_port_info(pi, nd, idx);
	pi[28] = (uint8_t)port;
	if (port == 0)
		return;
	memset(pi, 0, 24);                             /* M_Key .. CapabilityMask: port 0's */
	pi[32] = (uint8_t)(7 << 4 | (nd->ports[port].state & 0xF));
	{
		int peer = nd->ports[port].peer;
		int up = nd->link_up && peer >= 0 && !nd->ports[port].down && g_f->st->nodes[peer].link_up;

		pi[33] = (uint8_t)((up ? 5 : peer >= 0 ? 3 : 2) << 4 | 2);
	}
	pi[34] = 0;                                    /* LMC: port 0's */
}

static void node_info(uint8_t *p, const struct simf_node *nd, int idx)
{
	/* NodeRecord: LID, reserved, NodeInfo (40), NodeDescription (64) */
	p16(p, nd->lid);
	put_node_info(p + 4, nd);
	put_node_desc(p + 44, nd, idx);
}

static void port_info(uint8_t *p, const struct simf_node *nd, int idx)
{
	/* PortInfoRecord: EndportLID, PortNum, Options, PortInfo (64) */
	p16(p, nd->lid);
	p[2] = 1;
	put_port_info(p + 4, nd, idx);
}

static void sa_records(const struct req *r, int kind)
{
	const struct simf_state *st = g_f->st;
	const uint8_t *q = r->mad + SA_DATA_OFF;
	uint64_t cm = g64(r->mad + SA_HDR_OFF + 12);
	uint8_t method = r->mad[3];
	struct table t = { .reclen = kind ? PIR_LEN : NR_LEN };

	if (method != UMAD_METHOD_GET && method != UMAD_SA_METHOD_GET_TABLE) {
		send_status(r, UMAD_STATUS_METHOD_NOT_SUPPORTED);
		return;
	}
	for (unsigned n = 0; n <= st->nnodes; n++) {
		const struct simf_node *nd = &st->nodes[n];
		uint8_t *p;

		if (!port_usable(nd))
			continue;
		if ((cm & NR_LID) && g16(q) != nd->lid)
			continue;
		if (kind == 0) {
			if ((cm & NR_NODE_TYPE) && q[6] != 1)
				continue;
			if ((cm & NR_SYS_GUID) && g64(q + 8) != nd->guid)
				continue;
			if ((cm & NR_NODE_GUID) && g64(q + 16) != nd->guid)
				continue;
			if ((cm & NR_PORT_GUID) && g64(q + 24) != nd->guid)
				continue;
		} else if ((cm & PIR_PORTNUM) && q[2] != 1) {
			continue;
		}
		p = table_add(&t);
		if (!p)
			break;
		if (kind == 0)
			node_info(p, nd, (int)n);
		else
			port_info(p, nd, (int)n);
	}
	logf_("%s %s from node%d: %u record(s)", kind ? "PortInfoRecord" : "NodeRecord",
	      method == UMAD_METHOD_GET ? "Get" : "GetTable", r->src, t.n);
	answer(r, &t);
}

static void sa_class_port_info(const struct req *r)
{
	uint8_t out[MAD_LEN], *c = out + SA_DATA_OFF;

	if (r->mad[3] != UMAD_METHOD_GET) {
		send_status(r, UMAD_STATUS_ATTR_NOT_SUPPORTED);
		return;
	}
	resp_hdr(out, r, UMAD_METHOD_GET_RESP, 0);
	c[0] = UMAD_BASE_VERSION;
	c[1] = UMAD_SA_CLASS_VERSION;
	p16(c + 2, UMAD_SA_CAP_MASK_IS_UD_MCAST_SUP);
	p32(c + 4, SA_RESP_TIME);            /* CapabilityMask2 0, RespTimeValue */
	send_mad(r->src, r->sport, r->src_qp, r->pkey, r->resv8a, out);
}

static void sa_inform_info(const struct req *r)
{
	uint8_t out[MAD_LEN];

	if (r->mad[3] != UMAD_METHOD_SET) {
		send_status(r, UMAD_STATUS_METHOD_NOT_SUPPORTED);
		return;
	}
	/* subscriptions are accepted; this fabric never reports events */
	resp_hdr(out, r, UMAD_METHOD_GET_RESP, 0);
	memcpy(out + SA_DATA_OFF, r->mad + SA_DATA_OFF, SA_DATA_LEN);
	send_mad(r->src, r->sport, r->src_qp, r->pkey, r->resv8a, out);
}

/* ---- input ------------------------------------------------------------------ */

static void sa_input(int src, uint16_t sport, const uint8_t *pkt, size_t len)
{
	struct simf_bth b;
	struct req r;
	const uint8_t *mad;
	uint16_t attr;
	uint8_t method;

	if (src < 0 || len < SIMF_BTH_LEN + SIMF_DETH_LEN + MAD_LEN + SIMF_ICRC_LEN)
		return;
	simf_bth_get(pkt, &b);
	if (b.opcode != SIMF_OP_UD_SEND_ONLY || b.dest_qp != 1)
		return;
	/* QP1: Q_Key and P_Key enforced as the HCA does (silently dropped) */
	if (g32(pkt + SIMF_BTH_LEN) != SIMF_QKEY_GSI || !has_pkey(&g_f->st->nodes[0], b.pkey))
		return;
	mad = pkt + SIMF_BTH_LEN + SIMF_DETH_LEN;
	if (mad[0] != UMAD_BASE_VERSION || mad[1] != UMAD_CLASS_SUBN_ADM)
		return;
	method = mad[3];
	r.src = src;
	r.sport = sport;
	r.src_qp = g32(pkt + SIMF_BTH_LEN + 4) & 0xFFFFFF;
	r.pkey = b.pkey;
	r.resv8a = b.resv8a;
	r.mad = mad;
	/* RMPP ACK / STOP / ABORT for one of our GetTableResp transfers: the
	 * kernel sends them with the response bit flipped (GetTable), others
	 * may keep it; both are accepted */
	if ((mad[RMPP_HDR_OFF + 2] & UMAD_RMPP_FLAG_ACTIVE) && mad[RMPP_HDR_OFF + 1] != 1) {
		rmpp_input(src, sport, mad);
		return;
	}
	if (method & UMAD_METHOD_RESP_MASK)
		return;
	__atomic_add_fetch(&g_f->st->sa_queries, 1, __ATOMIC_RELAXED);
	if (mad[2] != UMAD_SA_CLASS_VERSION) {
		send_status(&r, UMAD_STATUS_BAD_VERSION);
		return;
	}
	if ((mad[RMPP_HDR_OFF + 2] & UMAD_RMPP_FLAG_ACTIVE) && mad[RMPP_HDR_OFF + 1] == 1 &&
	    (mad[RMPP_HDR_OFF + 2] & 6) != 6) {
		/* multi-segment requests are not used by any SA method we serve */
		send_status(&r, UMAD_SA_STATUS_REQ_INVALID << 8);
		return;
	}
	attr = g16(mad + 16);
	switch (attr) {
	case UMAD_ATTR_CLASS_PORT_INFO:
		sa_class_port_info(&r);
		break;
	case UMAD_ATTR_INFORM_INFO:
		sa_inform_info(&r);
		break;
	case UMAD_SA_ATTR_PATH_REC:
		sa_path_record(&r);
		break;
	case UMAD_SA_ATTR_MCMEMBER_REC:
		sa_mcmember(&r);
		break;
	case UMAD_SA_ATTR_NODE_REC:
		sa_records(&r, 0);
		break;
	case UMAD_SA_ATTR_PORT_INFO_REC:
		sa_records(&r, 1);
		break;
	case UMAD_SA_ATTR_SERVICE_REC:
		/* nobody registers services on this fabric: the table is empty */
		if (method == UMAD_METHOD_GET || method == UMAD_SA_METHOD_GET_TABLE) {
			struct table t = { .reclen = SR_LEN };

			answer(&r, &t);
		} else {
			send_status(&r, UMAD_STATUS_ATTR_NOT_SUPPORTED);
		}
		break;
	default:
		logf_("attribute 0x%04x method 0x%02x from node%d: not supported", attr, method, src);
		send_status(&r, UMAD_STATUS_ATTR_NOT_SUPPORTED);
	}
}

/* ---- SMA: every node's subnet management agent ----------------------------
 *
 * On hardware the SMA is part of each HCA. Here this process plays it for
 * every node: it binds node i's QP0 port (127.77.<inst>.i : simf_qp_port(0))
 * for i = 0..N, and the umad drop-in sends every SMP (class 0x01 LID-routed,
 * 0x81 directed route) to that port of the destination node. So an answer
 * really comes from node i's address and crosses the fabric (link state,
 * fault rules and the capture apply to both directions). IB only: RoCE has
 * no QP0.
 */

#define SMP_DATA_OFF 64
#define SMP_DATA_LEN 64
#define SMP_STATUS_BAD_VERSION 0x0004
#define SMP_STATUS_UNSUPPORTED 0x000C /* unsupported method/attribute combination */
#define SMP_STATUS_BAD_VALUE 0x001C   /* invalid attribute / modifier value */
#define SMP_D_BIT 0x8000              /* direction bit of a directed-route SMP */

#define SMP_ATTR_NODE_DESC 0x0010
#define SMP_ATTR_NODE_INFO 0x0011
#define SMP_ATTR_GUID_INFO 0x0014
#define SMP_ATTR_PORT_INFO 0x0015
#define SMP_ATTR_PKEY_TABLE 0x0016
#define SMP_ATTR_SM_INFO 0x0020

#define SM_STATE_MASTER 3

static int g_sma_fd[SIMF_MAX_NODES];

static void sma_open(void)
{
	for (unsigned i = 0; i < SIMF_MAX_NODES; i++)
		g_sma_fd[i] = -1;
	for (unsigned i = 0; i <= g_f->st->nnodes + g_f->st->nswitches && i < SIMF_MAX_NODES; i++) {
		g_sma_fd[i] = simf_socket(g_f, (int)i, simf_qp_port(0), NULL);
		if (g_sma_fd[i] < 0)
			fprintf(stderr, "uscm-sim-sm: bind %s QP0 (its SMA): %s\n", g_f->st->nodes[i].name,
				strerror(errno));
	}
}

static const char *smp_attr_name(uint16_t attr)
{
	switch (attr) {
	case SMP_ATTR_NODE_DESC: return "NodeDescription";
	case SMP_ATTR_NODE_INFO: return "NodeInfo";
	case SMP_ATTR_GUID_INFO: return "GUIDInfo";
	case SMP_ATTR_PORT_INFO: return "PortInfo";
	case SMP_ATTR_PKEY_TABLE: return "P_KeyTable";
	case SMP_ATTR_SM_INFO: return "SMInfo";
	default: return "attribute";
	}
}

/* PortInfo as an SMA keeps it: what the node table holds (LID, SM LID,
 * LMC, port state, link) is read from there; the other fields an SM may set
 * (M_Key, GID prefix, enabled widths and speeds, NeighborMTU, VLs, timers,
 * SubnetTimeOut...) are kept per node here, so that a SubnGet returns what
 * the last SubnSet wrote, as on hardware. */
static uint8_t g_pi[SIMF_MAX_NODES][SIMF_MAX_PORTS + 1][SMP_DATA_LEN];
static uint8_t g_pi_init[SIMF_MAX_NODES][SIMF_MAX_PORTS + 1];
/* the port the SMP being answered came in on (sma_input) */
static int g_in_port = 1;

#define SMP_ATTR_SWITCH_INFO 0x0012
#define SMP_ATTR_SL2VL 0x0017
#define SMP_ATTR_VL_ARB 0x0018
#define SMP_ATTR_LFT 0x0019
#define SMP_ATTR_MFT 0x001B
#define SW_PKEY_CAP 32        /* PartitionEnforcementCap of an external port */

/* What a switch's SMA stores as the SM wrote it and only gives back (SLtoVL
 * and VLArbitration tables, MFT blocks, a port's P_Key table): 64 bytes
 * per (node, attribute, modifier), in this process. */
struct kv {
	uint8_t used;
	int16_t node;
	uint16_t attr;
	uint32_t mod;
	uint8_t d[SMP_DATA_LEN];
};
#define KV_N 32768
static struct kv g_kv[KV_N];

static struct kv *kv_find(int n, uint16_t attr, uint32_t mod, int create)
{
	uint32_t h = ((uint32_t)n * 131u + attr * 31u + mod * 2654435761u) % KV_N;

	for (unsigned i = 0; i < KV_N; i++, h = (h + 1) % KV_N) {
		struct kv *k = &g_kv[h];

		if (!k->used) {
			if (!create)
				return NULL;
			k->used = 1;
			k->node = (int16_t)n;
			k->attr = attr;
			k->mod = mod;
			memset(k->d, 0, sizeof(k->d));
			return k;
		}
		if (k->node == n && k->attr == attr && k->mod == mod)
			return k;
	}
	return NULL;
}

static int is_sw(const struct simf_node *nd)
{
	return nd->type == SIMF_NODE_SWITCH;
}

/* The port a PortInfo modifier names on node nd (0 on a CA: port 1, the
 * one it came in on), or -1. */
static int pi_port(const struct simf_node *nd, uint32_t mod)
{
	unsigned p = mod & 0xFF;

	if (!is_sw(nd))
		return p <= 1 ? 1 : -1;
	return p <= nd->nports ? (int)p : -1;
}

static void sma_port_info(int n, const struct simf_node *nd, int port, uint8_t *d)
{
	uint8_t cur[SMP_DATA_LEN];

	if (is_sw(nd))
		put_port_info_sw(cur, nd, n, (unsigned)port);
	else
		put_port_info(cur, nd, n);
	if (!g_pi_init[n][port]) {
		memcpy(g_pi[n][port], cur, SMP_DATA_LEN);
		g_pi_init[n][port] = 1;
	}
	memcpy(d, g_pi[n][port], SMP_DATA_LEN);
	memcpy(d + 16, cur + 16, 8);               /* LID, MasterSMLID, CapabilityMask */
	d[28] = is_sw(nd) ? (uint8_t)g_in_port : 1; /* LocalPortNum */
	d[32] = cur[32];                           /* LinkSpeedSupported, PortState */
	d[33] = (uint8_t)((cur[33] & 0xF0) | (d[33] & 0x0F)); /* PortPhysicalState */
	d[34] = (uint8_t)((d[34] & 0xC0) | (cur[34] & 7));   /* M_KeyProtectBits, LMC */
	d[51] &= 0x7F;                             /* ClientReregister reads as 0 */
	if (!is_sw(nd))
		memcpy(d + 46, cur + 46, 2);       /* P_KeyViolations: counted live */
}

/* The data of a SubnGet(attr, mod) on node n into d (64 bytes, zeroed):
 * 0 or a MAD status. */
static uint16_t sma_get(int n, uint16_t attr, uint32_t mod, uint8_t *d)
{
	struct simf_node nd;
	struct kv *k;
	int port;

	simf_lock(g_f);
	nd = g_f->st->nodes[n];
	simf_unlock(g_f);
	switch (attr) {
	case SMP_ATTR_NODE_DESC:
		put_node_desc(d, &nd, n);
		return 0;
	case SMP_ATTR_NODE_INFO:
		put_node_info(d, &nd);
		if (is_sw(&nd))
			d[36] = (uint8_t)g_in_port;    /* LocalPortNum */
		return 0;
	case SMP_ATTR_GUID_INFO:
		/* modifier: block of 8 GUIDs; only the port GUID (index 0) is set */
		if (mod >= (PORT_GUID_CAP + 7) / 8)
			return SMP_STATUS_BAD_VALUE;
		p64(d, nd.guid);
		return 0;
	case SMP_ATTR_PORT_INFO:
		/* modifier bits 7:0: the port (0: on a CA the one the SMP came
		 * in on, on a switch its port 0); bit 31
		 * (SMSupportsExtendedSpeeds) and the rest are ignored */
		port = pi_port(&nd, mod);
		if (port < 0)
			return SMP_STATUS_BAD_VALUE;
		sma_port_info(n, &nd, port, d);
		return 0;
	case SMP_ATTR_PKEY_TABLE:
		/* modifier bits 15:0: block of 32 entries, 31:16: a switch's
		 * port (ignored on a CA) */
		if (is_sw(&nd) && (mod >> 16) > 0) {
			if ((mod >> 16) > nd.nports || (mod & 0xFFFF) >= SW_PKEY_CAP / 32)
				return SMP_STATUS_BAD_VALUE;
			k = kv_find(n, attr, mod, 0);
			if (k)
				memcpy(d, k->d, SMP_DATA_LEN);
			else
				p16(d, 0xFFFF);
			return 0;
		}
		if ((mod & 0xFFFF) >= (SIMF_PKEYS + 31) / 32)
			return SMP_STATUS_BAD_VALUE;
		for (int i = 0; i < SIMF_PKEYS; i++)
			p16(d + 2 * i, nd.pkeys[i]);
		return 0;
	case SMP_ATTR_SWITCH_INFO:
		if (!is_sw(&nd))
			return SMP_STATUS_UNSUPPORTED;
		k = kv_find(n, attr, 0, 0);
		if (k)
			memcpy(d, k->d, SMP_DATA_LEN);     /* the writable fields as set */
		p16(d, SIMF_LFT_CAP);                  /* LinearFDBCap */
		p16(d + 2, 0);                         /* RandomFDBCap */
		p16(d + 4, SIMF_MFT_CAP);                /* MulticastFDBCap */
		simf_lock(g_f);
		p16(d + 6, g_f->st->sw[nd.sw].lft_top); /* LinearFDBTop */
		d[11] = g_f->st->sw[nd.sw].life_state; /* LifeTimeValue, PortStateChange */
		simf_unlock(g_f);
		p16(d + 12, 0);                        /* LIDsPerPort */
		p16(d + 14, SW_PKEY_CAP);              /* PartitionEnforcementCap */
		d[16] = 0;                             /* no filters, base port 0 */
		return 0;
	case SMP_ATTR_LFT:
		/* modifier: block of 64 LIDs */
		if (!is_sw(&nd))
			return SMP_STATUS_UNSUPPORTED;
		if (mod >= SIMF_LFT_CAP / 64)
			return SMP_STATUS_BAD_VALUE;
		simf_lock(g_f);
		memcpy(d, g_f->st->sw[nd.sw].lft + mod * 64, 64);
		simf_unlock(g_f);
		return 0;
	case SMP_ATTR_MFT:
		/* modifier: bits 8:0 the block of 32 MLIDs, 31:28 which 16
		 * ports the PortMasks cover */
		if (!is_sw(&nd))
			return SMP_STATUS_UNSUPPORTED;
		if ((mod & 0x1FF) >= SIMF_MFT_CAP / 32 || (mod >> 28) > nd.nports / 16)
			return SMP_STATUS_BAD_VALUE;
		simf_lock(g_f);
		for (unsigned i = 0; i < 32; i++)
			p16(d + 2 * i, (uint16_t)(g_f->st->sw[nd.sw].mft[(mod & 0x1FF) * 32 + i] >> (16 * (mod >> 28))));
		simf_unlock(g_f);
		return 0;
	case SMP_ATTR_SL2VL:
	case SMP_ATTR_VL_ARB:
		/* a switch's; a CA's SMA does not support them (as before) */
		if (!is_sw(&nd))
			return SMP_STATUS_UNSUPPORTED;
		k = kv_find(n, attr, mod, 0);
		if (k)
			memcpy(d, k->d, SMP_DATA_LEN);
		return 0;
	case SMP_ATTR_SM_INFO:
		/* the built-in SM's SMInfo; an external SM's port answers
		 * through the SM itself, not the SMA */
		if (n != 0 || g_f->st->sm_kind != SIMF_SM_BUILTIN)
			return SMP_STATUS_UNSUPPORTED;
		p64(d, nd.guid);
		p64(d + 8, 0);                         /* SM_Key */
		p32(d + 16, __atomic_load_n(&g_sm_activity, __ATOMIC_RELAXED));
		d[20] = 0 << 4 | SM_STATE_MASTER;      /* Priority 0, SMState MASTER */
		return 0;
	default:
		return SMP_STATUS_UNSUPPORTED;
	}
}

/* Copies the bits of mask from src to dst. */
static void put_bits(uint8_t *dst, const uint8_t *src, unsigned off, uint8_t mask)
{
	dst[off] = (uint8_t)((dst[off] & ~mask) | (src[off] & mask));
}

/* SubnSet(PortInfo) on node n (IBTA Vol1 14.2.5.6): the writable fields of
 * q; the port state moves as 14.2.5 allows (Down: the link retrains, so the
 * port comes back in Init; Init -> Armed -> Active; anything else is an
 * invalid value and changes nothing). 0 or a MAD status. */
static uint16_t sma_set_port_info(int n, uint32_t mod, const uint8_t *q)
{
	struct simf_state *st = g_f->st;
	struct simf_node *nd = &st->nodes[n];
	uint8_t want = q[32] & 0xF, *state, *w;
	uint16_t lid = g16(q + 16), smlid = g16(q + 18);
	uint8_t cur, next;
	int port = pi_port(nd, mod), sw = is_sw(nd), ext;

	if (port < 0)
		return SMP_STATUS_BAD_VALUE;
	ext = sw && port > 0; /* a switch's external port: no LID of its own */
	w = g_pi[n][port];
	if (!g_pi_init[n][port]) {
		uint8_t tmp[SMP_DATA_LEN];
		struct simf_node copy;

		simf_lock(g_f);
		copy = *nd;
		simf_unlock(g_f);
		sma_port_info(n, &copy, port, tmp);
	}
	/* LIDs: unicast only; 0 (not yet assigned) is allowed */
	if (!ext && (lid >= 0xC000 || smlid >= 0xC000))
		return SMP_STATUS_BAD_VALUE;
	simf_lock(g_f);
	state = ext ? &nd->ports[port].state : &nd->port_state;
	cur = *state;
	next = cur;
	switch (want) {
	case 0: /* no state change */
		break;
	case SIMF_PORT_DOWN:
		next = nd->link_up && (!ext || nd->ports[port].peer >= 0) && !nd->ports[port ? port : 1].down
			       ? SIMF_PORT_INIT
			       : SIMF_PORT_DOWN;
		break;
	case SIMF_PORT_ARMED:
		next = cur == SIMF_PORT_INIT || cur == SIMF_PORT_ARMED ? SIMF_PORT_ARMED : 0;
		break;
	case SIMF_PORT_ACTIVE:
		next = cur == SIMF_PORT_ARMED || cur == SIMF_PORT_ACTIVE ? SIMF_PORT_ACTIVE : 0;
		break;
	default: /* Init cannot be set; 5..15 are reserved */
		next = 0;
	}
	/* a switch's base port 0 is up whenever the switch is: it follows
	 * what the SM asks */
	if (sw && port == 0 && (want == SIMF_PORT_ARMED || want == SIMF_PORT_ACTIVE))
		next = want;
	if (!next) {
		simf_unlock(g_f);
		logf_("SMA of %s: PortInfo Set port %d: port state %u -> %u is not a valid transition", nd->name,
		      port, cur, want);
		return SMP_STATUS_BAD_VALUE;
	}
	if (!ext) {
		/* the port takes every LID of base .. base + 2^LMC - 1 (a
		 * switch's port 0 keeps LMC 0: OpenSM's lmc_esp0 is off) */
		unsigned lmc = sw ? 0 : q[34] & 7;
		uint16_t base = lid ? lid : nd->lid;

		if ((base != nd->lid || lmc != nd->lmc) && simf_lid_range_set(st, n, base, lmc) < 0) {
			simf_unlock(g_f);
			logf_("SMA of %s: PortInfo Set: LID %u LMC %u: %s", nd->name, base, lmc,
			      errno == EADDRINUSE ? "a LID of the range is another port's" : "not aligned");
			return SMP_STATUS_BAD_VALUE;
		}
		nd->sm_lid = smlid;
	}
	logf_("SMA of %s: PortInfo Set port %d: LID %u, SM LID %u, LMC %u, port state %u -> %u (asked %u)",
	      nd->name, port, lid, smlid, q[34] & 7, cur, next, want);
	*state = next;
	if (ext) {
		/* base switch port 0 has no link of its own: its state is the
		 * most advanced of the external ports' */
		uint8_t best = SIMF_PORT_INIT;

		for (unsigned p = 1; p <= nd->nports; p++)
			if (nd->ports[p].peer >= 0 && nd->ports[p].state > best)
				best = nd->ports[p].state;
		nd->port_state = best;
	}
	__atomic_add_fetch(&st->generation, 1, __ATOMIC_RELEASE);
	simf_unlock(g_f);

	/* the rest of what an SM may write (0 = "no change" where IBTA says so) */
	memcpy(w, q, 16);                              /* M_Key, GidPrefix */
	memcpy(w + 26, q + 26, 2);                     /* M_KeyLeasePeriod */
	if (q[29] == 0xFF)
		w[29] = w[30];                         /* LinkWidthEnabled = supported */
	else if (q[29])
		w[29] = q[29];
	put_bits(w, q, 34, 0xC0);                      /* M_KeyProtectBits */
	if ((q[35] & 0xF) == 0xF)
		w[35] = (uint8_t)((w[35] & 0xF0) | (w[32] >> 4)); /* LinkSpeedEnabled = supported */
	else if (q[35] & 0xF)
		put_bits(w, q, 35, 0x0F);
	w[36] = q[36];                                 /* NeighborMTU, MasterSMSL */
	w[38] = q[38];                                 /* VLHighLimit */
	w[42] = q[42];                                 /* VLStallCount, HOQLife */
	if (q[43] >> 4)
		put_bits(w, q, 43, 0xF0);              /* OperationalVLs */
	put_bits(w, q, 43, 0x0F);                      /* partition enforcement, raw filters */
	if (ext) /* the fabric enforces them (simf_pkey_route_ok) */
		simf_pkey_sw_enforce(g_f, n, port, w[43] & 0x08, w[43] & 0x04);
	put_bits(w, q, 51, 0x1F);                      /* SubnetTimeOut */
	w[53] = q[53];                                 /* LocalPhyErrors, OverrunErrors */
	if ((q[63] & 0x1F) == 0x1F)
		w[63] = w[62] & 0x0F;                  /* LinkSpeedExtEnabled = supported */
	else if (q[63] & 0x1F)
		put_bits(w, q, 63, 0x1F);
	return 0;
}

/* SubnSet(P_KeyTable) on node n: block 0 (the table has SIMF_PKEYS
 * entries; the rest of the block is ignored). */
static uint16_t sma_set_pkeys(int n, uint32_t mod, const uint8_t *q)
{
	struct simf_node *nd = &g_f->st->nodes[n];

	if ((mod & 0xFFFF) >= (SIMF_PKEYS + 31) / 32)
		return SMP_STATUS_BAD_VALUE;
	simf_lock(g_f);
	for (int i = 0; i < SIMF_PKEYS; i++)
		nd->pkeys[i] = g16(q + 2 * i);
	__atomic_add_fetch(&g_f->st->generation, 1, __ATOMIC_RELEASE);
	simf_unlock(g_f);
	return 0;
}

/* SubnSet of what a switch keeps: SwitchInfo (LinearFDBTop, default ports, LifeTimeValue; a 1 in
 * PortStateChange clears it), LFT blocks (the fabric forwards by them at
 * once), MFT blocks and the VL tables (stored). The modifier was checked. */
static uint16_t sma_set_switch(int n, uint16_t attr, uint32_t mod, const uint8_t *q)
{
	struct simf_state *st = g_f->st;
	struct simf_node *nd = &st->nodes[n];
	struct kv *k;

	switch (attr) {
	case SMP_ATTR_SWITCH_INFO: {
		uint16_t top = g16(q + 6);

		if (top >= SIMF_LFT_CAP)
			return SMP_STATUS_BAD_VALUE;
		k = kv_find(n, attr, 0, 1);
		if (!k)
			return SMP_STATUS_BAD_VALUE;
		memcpy(k->d + 8, q + 8, 3);            /* DefaultPort, DefaultMulticast(Not)PrimaryPort */
		memcpy(k->d + 18, q + 18, 2);          /* MulticastFDBTop */
		simf_lock(g_f);
		st->sw[nd->sw].lft_top = top;
		st->sw[nd->sw].life_state = (uint8_t)((q[11] & 0xF8) |
						      (q[11] & 0x04 ? 0 : st->sw[nd->sw].life_state & 0x04));
		simf_unlock(g_f);
		logf_("SMA of %s: SwitchInfo Set: LinearFDBTop %u", nd->name, top);
		return 0;
	}
	case SMP_ATTR_MFT: {
		unsigned shift = 16 * (mod >> 28);

		simf_lock(g_f);
		for (unsigned i = 0; i < 32; i++) {
			uint64_t *e = &st->sw[nd->sw].mft[(mod & 0x1FF) * 32 + i];

			*e = (*e & ~(0xFFFFull << shift)) | (uint64_t)g16(q + 2 * i) << shift;
		}
		__atomic_add_fetch(&st->generation, 1, __ATOMIC_RELEASE);
		simf_unlock(g_f);
		return 0;
	}
	case SMP_ATTR_LFT:
		simf_lock(g_f);
		memcpy(st->sw[nd->sw].lft + mod * 64, q, 64);
		__atomic_add_fetch(&st->generation, 1, __ATOMIC_RELEASE);
		simf_unlock(g_f);
		return 0;
	default:
		k = kv_find(n, attr, mod, 1);
		if (!k)
			return SMP_STATUS_BAD_VALUE;
		memcpy(k->d, q, SMP_DATA_LEN);
		return 0;
	}
}

/* A SubnSet(attr, mod) with data q on node n: 0 and the attribute's new
 * value in d, or a MAD status. Only an external SM configures ports by
 * SMPs; the built-in SM writes the node table itself. */
static uint16_t sma_set(int n, uint16_t attr, uint32_t mod, const uint8_t *q, uint8_t *d)
{
	uint16_t st;

	if (g_f->st->sm_kind != SIMF_SM_OPENSM)
		return SMP_STATUS_UNSUPPORTED;
	switch (attr) {
	case SMP_ATTR_PORT_INFO:
		st = sma_set_port_info(n, mod, q);
		break;
	case SMP_ATTR_PKEY_TABLE:
		if (is_sw(&g_f->st->nodes[n]) && (mod >> 16) > 0) {
			st = sma_get(n, attr, mod, d); /* checks the modifier */
			if (!st) {
				uint16_t keys[SIMF_SW_PKEYS];

				memcpy(kv_find(n, attr, mod, 1)->d, q, SMP_DATA_LEN);
				for (int i = 0; i < SIMF_SW_PKEYS; i++)
					keys[i] = g16(q + 2 * i);
				simf_pkey_sw_table(g_f, n, (int)(mod >> 16), keys);
			}
			break;
		}
		st = sma_set_pkeys(n, mod, q);
		break;
	case SMP_ATTR_SWITCH_INFO:
	case SMP_ATTR_LFT:
	case SMP_ATTR_MFT:
	case SMP_ATTR_SL2VL:
	case SMP_ATTR_VL_ARB:
		st = sma_get(n, attr, mod, d); /* checks node type and modifier */
		if (!st)
			st = sma_set_switch(n, attr, mod, q);
		break;
	default:
		return SMP_STATUS_UNSUPPORTED;
	}
	if (st)
		return st;
	memset(d, 0, SMP_DATA_LEN);
	return sma_get(n, attr, mod, d);
}

/* One datagram to node n's QP0 (received on g_sma_fd[n]). */
static void sma_input(int n, int src, uint16_t sport, const uint8_t *pkt, size_t len)
{
	uint8_t out[SIMF_BTH_LEN + SIMF_DETH_LEN + MAD_LEN + SIMF_ICRC_LEN], *rm;
	const uint8_t *mad;
	struct simf_bth b, ob;
	uint16_t status, attr;
	uint32_t mod;
	uint8_t ret_path[64];
	uint16_t sma_dlid = 0, sma_slid = 0;
	int dr;

	g_in_port = 1;
	if (src < 0 || len < sizeof(out))
		return;
	/* what the HCA checks: ICRC, UD SEND-only to QP0 (any P_Key, any
	 * Q_Key), MAD base version 1, only SMPs on QP0 */
	if (simf_icrc(g_f, src, n, sport, simf_qp_port(0), pkt, len - SIMF_ICRC_LEN) !=
	    simf_icrc_get(pkt + len - SIMF_ICRC_LEN))
		return;
	simf_bth_get(pkt, &b);
	if (b.opcode != SIMF_OP_UD_SEND_ONLY || b.dest_qp != 0)
		return;
	mad = pkt + SIMF_BTH_LEN + SIMF_DETH_LEN;
	if (mad[0] != UMAD_BASE_VERSION || (mad[1] != UMAD_CLASS_SUBN_LID_ROUTED &&
					    mad[1] != UMAD_CLASS_SUBN_DIRECTED_ROUTE))
		return;
	/* the SMA answers Get and Set; Trap, TrapRepress and responses are
	 * for an SM */
	if (mad[3] != UMAD_METHOD_GET && mad[3] != UMAD_METHOD_SET)
		return;
	dr = mad[1] == UMAD_CLASS_SUBN_DIRECTED_ROUTE;
	/* directed route: a returning SMP (D set) is not for an SMA; the
	 * SMP's path is walked from its sender (simf_route_dr, the same walk
	 * that brought it here) for the port it came in on and the
	 * ReturnPath; one whose path does not end here is not ours */
	if (dr) {
		if ((mad[4] & 0x80) || simf_route_dr(g_f, src, mad, &g_in_port, ret_path) != n)
			return;
	} else {
		const struct simf_node *sn = &g_f->st->nodes[src];

		/* LID-routed: the port it came in on; the answer goes back
		 * through the switches to the requester's LID */
		/* (LMC > 0: by the LIDs the SMP carried, so the answer
		 * goes from its DLID back to its SLID, as an HCA's) */
		sma_dlid = simf_bth_dlid(g_f, &b, n);
		sma_slid = simf_bth_slid(g_f, &b, src);
		if (simf_route_lid(g_f, src, sma_dlid, &g_in_port) != n)
			g_in_port = 1;
		if (sn->lid && simf_route_lid(g_f, n, sma_slid, NULL) != src) {
			logf_("SMA of %s: no route back to LID %u: answer lost", g_f->st->nodes[n].name, sma_slid);
			return;
		}
	}
	attr = g16(mad + 16);
	mod = g32(mad + 20);
	memset(out, 0, sizeof(out));
	rm = out + SIMF_BTH_LEN + SIMF_DETH_LEN;
	memcpy(rm, mad, MAD_LEN);
	rm[3] = UMAD_METHOD_GET_RESP;
	memset(rm + SMP_DATA_OFF, 0, SMP_DATA_LEN);
	if (mad[2] != 1)
		status = SMP_STATUS_BAD_VERSION;
	else if (mad[3] == UMAD_METHOD_SET)
		status = sma_set(n, attr, mod, mad + SMP_DATA_OFF, rm + SMP_DATA_OFF);
	else
		status = sma_get(n, attr, mod, rm + SMP_DATA_OFF);
	if (dr) {
		status |= SMP_D_BIT;
		rm[6] = 0; /* hop pointer, as the requester's SMI hands it over */
		memcpy(rm + 192 + 1, ret_path + 1, 63); /* ReturnPath: the ports it came in on */
	}
	p16(rm + 4, status);
	memset(&ob, 0, sizeof(ob));
	ob.opcode = SIMF_OP_UD_SEND_ONLY;
	ob.pkey = b.pkey;
	ob.resv8a = SIMF_RESV8A(0, 0);
	ob.dest_qp = g32(pkt + SIMF_BTH_LEN + 4) & 0xFFFFFF;
	ob.psn = g_psn++ & 0xFFFFFF;
	simf_bth_put(out, &ob);
	if (!dr && sma_dlid)
		simf_bth_set_lids(g_f, out, n, sma_dlid, src, sma_slid);
	p32(out + SIMF_BTH_LEN, 0);      /* Q_Key: QP0 has none */
	p32(out + SIMF_BTH_LEN + 4, 0);  /* source QP 0 */
	logf_("SMA of %s: Subn%s %s(0x%04x) mod 0x%x from node%d%s: status 0x%04x",
	      g_f->st->nodes[n].name, mad[3] == UMAD_METHOD_GET ? "Get" : "Set", smp_attr_name(attr),
	      attr, mod, src, dr ? " (directed route)" : "", status);
	if (simf_send(g_f, g_sma_fd[n], n, src, sport, out, sizeof(out)) < 0)
		logf_("SMA of %s: send to node%d:%u failed: %s", g_f->st->nodes[n].name, src, sport,
		      strerror(errno));
}

/* ---- traps: a switch tells the SM a port's link state changed ----------------
 *
 * What a switch's SMA does when one of its ports changes state on its own
 * (a cable taken down or up, `uscm-sim link sw1:3 down`): besides setting
 * PortStateChange in SwitchInfo, it sends the SM (the Master SM LID its
 * port 0 was given) a SubnTrap(Notice) of trap 128, "link state of at
 * least one port of switch <LID> has changed" (IBTA Vol1 14.2.5.1, 14.3.1:
 * generic, urgent, producer type switch, DataDetails LIDADDR), LID-routed
 * through the switches like any SMP. OpenSM answers TrapRepress (which the
 * SMA ignores) and sweeps at once. */
static uint8_t g_trap_seen[SIMF_MAX_NODES][SIMF_MAX_PORTS + 1];
static uint8_t g_trap_init[SIMF_MAX_NODES];
static uint64_t g_trap_tid;

static void send_trap128(int n)
{
	struct simf_state *st = g_f->st;
	const struct simf_node *nd = &st->nodes[n];
	uint8_t pkt[SIMF_BTH_LEN + SIMF_DETH_LEN + MAD_LEN + SIMF_ICRC_LEN], *mad, *notice;
	struct simf_bth b = { .opcode = SIMF_OP_UD_SEND_ONLY, .pkey = 0xFFFF, .dest_qp = 0 };
	struct simf_agent a;
	int sm;

	if (!nd->lid || !nd->sm_lid)
		return;
	sm = simf_route_lid(g_f, n, nd->sm_lid, NULL);
	if (sm < 0) {
		logf_("SMA of %s: Trap 128: no route to the SM LID %u: lost", nd->name, nd->sm_lid);
		return;
	}
	if (simf_agent_find(g_f, sm, 0, UMAD_CLASS_SUBN_LID_ROUTED, 1, 0x05, NULL, &a) < 0) {
		logf_("SMA of %s: Trap 128: nobody at LID %u takes traps: lost", nd->name, nd->sm_lid);
		return;
	}
	memset(pkt, 0, sizeof(pkt));
	b.psn = g_psn++ & 0xFFFFFF;
	simf_bth_put(pkt, &b);
	mad = pkt + SIMF_BTH_LEN + SIMF_DETH_LEN;
	mad[0] = 1;
	mad[1] = UMAD_CLASS_SUBN_LID_ROUTED;
	mad[2] = 1;
	mad[3] = 0x05;                      /* SubnTrap */
	p64(mad + 8, 0x5452415000000000ull | ++g_trap_tid);
	p16(mad + 16, 0x0002);              /* Notice */
	notice = mad + SMP_DATA_OFF;
	notice[0] = 0x80 | 1;               /* IsGeneric, Type Urgent */
	notice[3] = 2;                      /* ProducerType: switch */
	p16(notice + 4, 128);               /* TrapNumber */
	p16(notice + 6, nd->lid);           /* IssuerLID */
	p16(notice + 10, nd->lid);          /* DataDetails: LIDADDR */
	notice[64] = 0xfe;
	notice[65] = 0x80;
	p64(notice + 72, nd->guid);         /* IssuerGID */
	logf_("SMA of %s: Trap 128 (link state change) to the SM at LID %u", nd->name, nd->sm_lid);
	if (simf_send(g_f, g_sma_fd[n], n, sm, a.port, pkt, sizeof(pkt)) < 0)
		logf_("SMA of %s: Trap 128: %s", nd->name, strerror(errno));
}

/* Called from the main loop: a trap for each switch whose ports' link
 * states changed since last time (under an external SM). */
static void trap_check(void)
{
	struct simf_state *st = g_f->st;

	for (unsigned n = st->nnodes + 1; n <= st->nnodes + st->nswitches && n < SIMF_MAX_NODES; n++) {
		const struct simf_node *nd = &st->nodes[n];
		int changed = 0;

		for (unsigned p = 1; p <= nd->nports; p++) {
			/* Down or not: what a port's own link does (the SM's
			 * Init -> Armed -> Active moves are not traps) */
			uint8_t dn = nd->ports[p].state == SIMF_PORT_DOWN;

			if (g_trap_init[n] && g_trap_seen[n][p] != dn)
				changed = 1;
			g_trap_seen[n][p] = dn;
		}
		g_trap_init[n] = 1;
		if (changed)
			send_trap128((int)n);
	}
}

/* ---- an external SM: Debian's opensm on a node's port ---------------------------
 *
 * With `uscm-sim up --sm opensm` this process is only every port's SMA; it
 * starts opensm as a program of node st->sm_node (USCM_SIM_NODE, the
 * drop-ins on LD_LIBRARY_PATH: as on a host with an HCA), with a config,
 * log and cache of its own in D/opensm/, and stops it when it exits. */

static pid_t g_osm_pid;

static int write_osm_conf(const char *odir, const char *conf)
{
	FILE *fp = fopen(conf, "w");
	const char *sw = getenv("USCM_SIM_OPENSM_SWEEP");
	int sweep = sw && atoi(sw) > 0 ? atoi(sw) : 10;

	if (!fp)
		return -1;
	fprintf(fp,
		"# written by uscm-sim-sm for `uscm-sim up --sm opensm`\n"
		"guid 0x0000000000000000\n"
		"lmc %u\n"
		"sweep_interval %d\n"
		"force_log_flush TRUE\n"
		"accum_log_file FALSE\n"
		"log_file %s/opensm.log\n"
		"dump_files_dir %s\n"
		"partition_config_file %s/partitions.conf\n"
		"qos_policy_file %s/qos-policy.conf\n"
		"torus_config %s/torus-2QoS.conf\n"
		"prefix_routes_file %s/prefix-routes.conf\n"
		"per_module_logging_file %s/per-module-logging.conf\n"
		"console off\n"
		"daemon FALSE\n",
		g_lmc, sweep, odir, odir, odir, odir, odir, odir, odir);
	return fclose(fp);
}

/* partitions: OpenSM's partition config file (-P), or NULL: then its
 * partition_config_file in D/opensm/ (absent: every port a full member
 * of the default partition). */
static pid_t start_opensm(const char *libpath, const char *partitions)
{
	struct simf_state *st = g_f->st;
	char odir[600], conf[700], cache[700], out[700], issm[700];
	int ifd;
	const char *bin = getenv("USCM_SIM_OPENSM");
	const char *extra = getenv("USCM_SIM_OPENSM_ARGS");
	pid_t pid;

	if (!bin || !*bin)
		bin = "opensm";
	snprintf(odir, sizeof(odir), "%s/opensm", g_f->dir);
	snprintf(conf, sizeof(conf), "%s/opensm.conf", odir);
	snprintf(cache, sizeof(cache), "%s/cache", odir);
	snprintf(out, sizeof(out), "%s/opensm.out", odir);
	/* what umad_get_issm_path names: opening it is how an SM sets IsSM
	 * in its port's capability mask (the SMA reports IsSM for sm_node) */
	snprintf(issm, sizeof(issm), "%s/issm-%s", g_f->dir, st->nodes[st->sm_node].name);
	if ((mkdir(odir, 0755) < 0 && errno != EEXIST) || (mkdir(cache, 0755) < 0 && errno != EEXIST) ||
	    write_osm_conf(odir, conf) < 0 || (ifd = open(issm, O_WRONLY | O_CREAT, 0600)) < 0) {
		fprintf(stderr, "uscm-sim-sm: %s: %s\n", odir, strerror(errno));
		return -1;
	}
	close(ifd);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		const char *argv[16];
		char *words = extra ? strdup(extra) : NULL, *save = NULL;
		int ac = 0, fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		/* it goes with this process, even when this one is killed */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() == 1)
			_exit(1);
		if (chdir(odir) < 0)
			_exit(126);
		setenv("USCM_SIM_DIR", g_f->dir, 1);
		setenv("USCM_SIM_NODE", st->nodes[st->sm_node].name, 1);
		setenv("OSM_CACHE_DIR", cache, 1);
		setenv("OSM_TMP_DIR", odir, 1);
		if (libpath)
			setenv("LD_LIBRARY_PATH", libpath, 1);
		argv[ac++] = bin;
		argv[ac++] = "-F";
		argv[ac++] = conf;
		if (partitions) {
			argv[ac++] = "-P";
			argv[ac++] = partitions;
		}
		for (char *w = words ? strtok_r(words, " ", &save) : NULL; w && ac < 15;
		     w = strtok_r(NULL, " ", &save))
			argv[ac++] = w;
		argv[ac] = NULL;
		execvp(bin, (char *const *)argv);
		fprintf(stderr, "uscm-sim-sm: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	simf_lock(g_f);
	st->sm_pid = pid;
	simf_unlock(g_f);
	logf_("opensm (pid %d) on %s: config, log and cache in %s%s%s", (int)pid, st->nodes[st->sm_node].name,
	      odir, partitions ? "; partitions from " : "", partitions ? partitions : "");
	return pid;
}

static void stop_opensm(void)
{
	if (g_osm_pid <= 0)
		return;
	kill(g_osm_pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(g_osm_pid, NULL, WNOHANG) == g_osm_pid) {
			g_osm_pid = 0;
			break;
		}
		usleep(10000);
	}
	if (g_osm_pid > 0) {
		kill(g_osm_pid, SIGKILL);
		waitpid(g_osm_pid, NULL, 0);
		g_osm_pid = 0;
	}
	simf_lock(g_f);
	g_f->st->sm_pid = 0;
	simf_unlock(g_f);
}

/* ---- main ---------------------------------------------------------------------- */

static void on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: uscm-sim-sm [--dir D] [--fd N] [--lib-path P] [--partitions FILE] [--lmc N] [-v]\n"
			"  The fabric's SM/SA (node 0); normally started by `uscm-sim start`.\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *dir = NULL, *libpath = NULL, *partitions = NULL;
	int fd = -1, slot = -1, external;
	struct stat st0, st1;
	char path[512];
	uint64_t next_sweep = 0, next_check = 0;
	pid_t watch = 0;
	int orphaned = 0, gone = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc)
			dir = argv[++i];
		else if (strcmp(argv[i], "--fd") == 0 && i + 1 < argc)
			fd = atoi(argv[++i]);
		else if (strcmp(argv[i], "--lib-path") == 0 && i + 1 < argc)
			libpath = argv[++i];
		else if (strcmp(argv[i], "--partitions") == 0 && i + 1 < argc)
			partitions = argv[++i];
		else if (strcmp(argv[i], "--lmc") == 0 && i + 1 < argc && atoi(argv[i + 1]) >= 0 &&
			 atoi(argv[i + 1]) <= 7)
			g_lmc = (unsigned)atoi(argv[++i]);
		else if (strcmp(argv[i], "-v") == 0)
			g_verbose = 1;
		else
			usage();
	}
	if (getenv("USCM_SIM_SM_VERBOSE"))
		g_verbose = 1;
	/* USCM_SIM_WATCH_PID: the fabric dies with this process (tests use it
	 * so that a crashed test leaves no fabric behind) */
	if (getenv("USCM_SIM_WATCH_PID"))
		watch = (pid_t)atoi(getenv("USCM_SIM_WATCH_PID"));
	g_f = simf_attach_node(dir, 0);
	if (!g_f) {
		fprintf(stderr, "uscm-sim-sm: no fabric in %s: %s\n", dir ? dir : simf_default_dir(),
			strerror(errno));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/fabric.state", g_f->dir);
	if (stat(path, &st0) < 0)
		return 1;
	if (fd >= 0) {
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		fcntl(fd, F_SETFD, FD_CLOEXEC);
	} else {
		fd = simf_socket(g_f, 0, simf_qp_port(1), NULL);
		if (fd < 0) {
			fprintf(stderr, "uscm-sim-sm: bind node 0 QP1: %s\n", strerror(errno));
			return 1;
		}
	}
	g_fd = fd;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGHUP, on_signal);
	signal(SIGPIPE, SIG_IGN);
	simf_lock(g_f);
	g_f->st->keeper_pid = getpid();
	simf_unlock(g_f);

	external = g_f->st->link == SIMF_LINK_IB && g_f->st->sm_kind == SIMF_SM_OPENSM;
	if (external) {
		logf_("SMA of every port; the SM is opensm on %s", g_f->st->nodes[g_f->st->sm_node].name);
	} else if (g_f->st->link == SIMF_LINK_IB) {
		struct simf_agent a = {
			.pid = getpid(),
			.port = simf_qp_port(1),
			.qpn = 1,
			.mgmt_class = UMAD_CLASS_SUBN_ADM,
			.class_version = UMAD_SA_CLASS_VERSION,
			.agent_id = 0,
		};
		static const uint8_t methods[] = { UMAD_METHOD_GET, UMAD_METHOD_SET,
						   UMAD_SA_METHOD_GET_TABLE, UMAD_SA_METHOD_GET_TRACE_TABLE,
						   UMAD_SA_METHOD_GET_MULTI, UMAD_SA_METHOD_DELETE };

		a.rmpp_version = UMAD_RMPP_VERSION;
		for (size_t i = 0; i < sizeof(methods); i++)
			a.methods[methods[i] >> 3] |= (uint8_t)(1u << (methods[i] & 7));
		slot = simf_agent_add(g_f, 0, &a);
		if (slot < 0) {
			fprintf(stderr, "uscm-sim-sm: register SA agent: %s\n", strerror(errno));
			return 1;
		}
		logf_("SM/SA up: node 0, LID 1, QP1 port %u", simf_qp_port(1));
	} else {
		logf_("RoCE fabric: no SM/SA; holding instance %u", g_f->st->instance);
	}

	if (g_f->st->link == SIMF_LINK_IB)
		sma_open();
	else
		for (unsigned i = 0; i < SIMF_MAX_NODES; i++)
			g_sma_fd[i] = -1;
	if (external) {
		g_osm_pid = start_opensm(libpath, partitions);
		if (g_osm_pid < 0)
			return 1;
	}

	while (!g_stop) {
		struct pollfd p[1 + SIMF_MAX_NODES];
		int who[1 + SIMF_MAX_NODES], np = 0;
		uint64_t now = now_ms();
		int rc;

		if (g_osm_pid > 0 && waitpid(g_osm_pid, NULL, WNOHANG) == g_osm_pid) {
			logf_("opensm (pid %d) exited: the subnet has no SM now", (int)g_osm_pid);
			g_osm_pid = 0;
			simf_lock(g_f);
			g_f->st->sm_pid = 0;
			simf_unlock(g_f);
		}
		if (g_f->st->link == SIMF_LINK_IB && !external && now >= next_sweep) {
			sm_sweep();
			next_sweep = now + 100;
		}
		if (external && g_f->st->nswitches)
			trap_check();
		if (now >= next_check) {
			/* the fabric was stopped or replaced: go away */
			if (stat(path, &st1) < 0 || st1.st_ino != st0.st_ino) {
				gone = 1;
				break;
			}
			if (watch > 0 && !simf_pid_alive(watch)) {
				orphaned = 1;
				break;
			}
			next_check = now + 200;
		}
		xfer_timers();
		p[np] = (struct pollfd){ .fd = fd, .events = POLLIN };
		who[np++] = -1;
		for (int i = 0; i < SIMF_MAX_NODES; i++)
			if (g_sma_fd[i] >= 0) {
				p[np] = (struct pollfd){ .fd = g_sma_fd[i], .events = POLLIN };
				who[np++] = i;
			}
		rc = poll(p, (nfds_t)np, 50);
		for (int k = 0; rc > 0 && k < np; k++) {
			uint8_t buf[4096];

			if (!(p[k].revents & POLLIN))
				continue;
			for (int m = 0; m < 64; m++) {
				int src;
				uint16_t sport;
				ssize_t n = simf_recv(g_f, p[k].fd, buf, sizeof(buf), &src, &sport);

				if (n < 0)
					break;
				if (who[k] < 0)
					sa_input(src, sport, buf, (size_t)n);
				else
					sma_input(who[k], src, sport, buf, (size_t)n);
			}
		}
	}
	logf_("SM/SA exiting");
	stop_opensm();
	for (int i = 0; i < MAX_XFERS; i++)
		if (g_xfers[i].used)
			xfer_done(&g_xfers[i]);
	if (slot >= 0)
		simf_agent_del(g_f, 0, slot);
	simf_lock(g_f);
	if (g_f->st->keeper_pid == getpid())
		g_f->st->keeper_pid = 0;
	simf_unlock(g_f);
	close(fd);
	for (int i = 0; i < SIMF_MAX_NODES; i++)
		if (g_sma_fd[i] >= 0)
			close(g_sma_fd[i]);
	/* The fabric is going away without `uscm-sim stop` (its owner died, or
	 * the state was removed or replaced): the nodes' host services go with
	 * it. (Stopped by a signal, the SM leaves them: hosts outlive an SM.) */
	if (orphaned || gone) {
		int n = simf_uscmd_stop(g_f, -1, SIGTERM, 2000);

		if (n)
			logf_("stopped %d uscmd%s", n, n == 1 ? "" : "s");
	}
	if (orphaned) {
		static const char *const files[] = { "fabric.state", "hosts", "sm.log" };
		static const char *const node_files[] = { "uscmd.sock", "uscmd.log" };
		char p[600];

		logf_("watched process %d is gone: removing the fabric", (int)watch);
		for (unsigned n = 1; n <= g_f->st->nnodes && n < SIMF_MAX_NODES; n++) {
			for (size_t i = 0; i < sizeof(node_files) / sizeof(node_files[0]); i++)
				if (simf_uscmd_path(g_f, (int)n, node_files[i], p, sizeof(p)) == 0)
					unlink(p);
			if (simf_uscmd_path(g_f, (int)n, NULL, p, sizeof(p)) == 0)
				rmdir(p);
		}
		for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
			snprintf(p, sizeof(p), "%s/%s", g_f->dir, files[i]);
			unlink(p);
		}
		rmdir(g_f->dir);
	}
	simf_detach(g_f);
	return 0;
}
