/*
 * umad_sim.c - a drop-in libibumad.so.3 for the simulated fabric (sim/).
 *
 * The process is one node of the fabric ($USCM_SIM_NODE on the fabric in
 * $USCM_SIM_DIR, see sim/simf.h): one CA named "uscm_<node>" with one port.
 * Device and port attributes come from the shared fabric state.
 *
 * A port opened with umad_open_port has
 *   - a UDP socket on the node's transport address (simf_socket): every
 *     agent registered on the port is published in the node's agent table
 *     with that socket's port, requests are sent from it and responses come
 *     back to it;
 *   - a SOCK_SEQPACKET socketpair: the application's end is the fd
 *     umad_open_port returns. It carries exactly what the kernel's umad fd
 *     delivers (struct ib_user_mad + MAD, one record per read), so poll,
 *     epoll, select and read behave like the kernel's.
 * One thread per process (started by the first umad_open_port) receives
 * on the UDP sockets, applies what the HCA and the kernel's MAD layer would
 * (ICRC, P_Key, Q_Key, MAD validation, request routing by class/version/
 * method, response matching by TID against outstanding sends, RMPP
 * reassembly for kernel-RMPP agents) and queues the deliverable records on
 * the socketpair; it also runs the send timers (resend after timeout_ms,
 * ETIMEDOUT record after the retries). So the fd is readable exactly when
 * a MAD or a timeout is waiting, as with the kernel.
 * In direct mode (the port's fd asked for with umad_get_fd) the caller's umad_recv
 * does the receiving instead of that thread: one wake-up per MAD, not two.
 *
 * Kernel semantics kept on purpose (drivers/infiniband/core/user_mad.c and
 * mad.c are the reference for behaviour): the upper 32 bits of the TID of
 * every non-response MAD are replaced by the agent's hi_tid and not restored
 * on responses or timeouts; a response is delivered only while the request
 * it answers is outstanding (sent with timeout_ms > 0) and comes from the
 * node it was sent to; a Get/Set that no agent serves is answered with
 * status 0x000C (unsupported method/attribute), other unserved requests are
 * dropped (a SubnGet/SubnSet on IB always goes to the destination's SMA,
 * which the fabric's SM process hosts on every node's QP0 port); the Q_Key
 * of a sent MAD is the QP's own (0x80010000 on QP1), addr.qkey is ignored;
 * received non-RMPP MADs are 256 bytes long.
 * See sim/umad/README.md for the choices and the differences.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/umad.h>

#include "sim/simf.h"

/* ---- constants ------------------------------------------------------------ */

#define MAD_SIZE 256
#define UHDR ((size_t)sizeof(struct ib_user_mad)) /* 64 */
#define MAX_AGENTS 32                             /* IB_UMAD_MAX_AGENTS */
#define MAD_HDR_LEN 24
#define RMPP_HDR_END 36
#define PKT_LEN (SIMF_BTH_LEN + SIMF_DETH_LEN + MAD_SIZE + SIMF_ICRC_LEN)
#define RX_BUF 2048
#define QKEY_GSI 0x80010000u
#define BACKLOG_MAX 65536
#define RMPP_MAX_LEN (1u << 20)
#define RMPP_WINDOW 32
#define RECENT 64

#define CA_PREFIX "uscm_"

/* MAD header fields. */
#define M_CLASS(m) ((m)[1])
#define M_VERSION(m) ((m)[2])
#define M_METHOD(m) ((m)[3])
#define M_ATTR(m) ((uint16_t)((m)[16] << 8 | (m)[17]))
#define SMP_ATTR_SM_INFO 0x0020
#define RMPP_FLAG_ACTIVE 0x01
#define RMPP_FLAG_FIRST 0x02
#define RMPP_FLAG_LAST 0x04
#define RMPP_TYPE_DATA 1
#define RMPP_TYPE_ACK 2

/* ---- per-process state ---------------------------------------------------- */

struct agent {
	int used;
	uint8_t qpn;
	uint8_t mgmt_class;
	uint8_t class_version;
	uint8_t rmpp_version;
	uint8_t oui[3];
	uint32_t flags;         /* UMAD_USER_RMPP */
	uint64_t methods[2];    /* bit m of the 128-bit mask = method m */
	int slot;               /* in the node's shared agent table, -1: none */
};

/* A request sent with a timeout, waiting for its response. */
struct osend {
	struct osend *next;
	int agent;
	uint64_t tid;           /* as on the wire (upper half rewritten) */
	uint8_t mgmt_class;
	uint8_t is_resp;        /* a response sent with a timeout */
	uint8_t qpn;            /* destination QP */
	ib_mad_addr_t addr;     /* destination as the application gave it */
	int dst;                /* node it went to, -1: nowhere */
	uint64_t deadline;      /* CLOCK_MONOTONIC ns */
	uint32_t timeout_ms;
	uint32_t retries_left;
	uint8_t pkt[PKT_LEN];   /* the datagram (resent as is) */
	uint8_t rec[sizeof(struct ib_user_mad) + MAD_HDR_LEN]; /* the timeout record */
};

/* An RMPP response being reassembled for a kernel-RMPP agent. */
struct rmpp_rx {
	struct rmpp_rx *next;
	int src;
	uint16_t sport;
	uint64_t tid;
	uint8_t mgmt_class;
	int agent;
	uint32_t next_seg;
	size_t hdr_len, len, cap;
	uint8_t *buf;           /* user header + MAD header(s) + data */
};

struct rec {
	struct rec *next;
	size_t len;
	uint8_t data[];
};

struct uport {
	struct uport *next;
	uint32_t id;
	int ufd;                /* the application's end (returned fd) */
	int ifd;                /* our end of the socketpair */
	int sock;               /* UDP socket on the fabric */
	int dfd;                /* direct mode: epoll fd {sock, ufd} the caller polls; else -1 */
	uint16_t port;          /* its port */
	uint8_t gen;            /* 3 bits of hi_tid against stale responses */
	uint32_t psn;
	int ifd_events;         /* what ifd is registered for in epoll */
	/* Direct mode's fast path (direct_recv, timeout 0): qseq counts the
	 * records put on ifd or its backlog, qseen is the qseq at which
	 * umad_recv last found ufd empty; equal (and no backlog), nothing can
	 * wait on ufd and the socket is read without asking epoll first. */
	uint64_t qseq, qseen;
	/* Direct mode's blocking receive (direct_block): threads asleep in a
	 * recvfrom on sock (a direct-mode socket is blocking; every other
	 * receive says MSG_DONTWAIT; a record queued meanwhile wakes one with
	 * a datagram of length 0 to sock), and sock's SO_RCVTIMEO in ms
	 * (0: none). */
	int blocked, rcvtimeo_ms;
	struct agent agents[MAX_AGENTS];
	struct osend *sends;
	struct rmpp_rx *rmpp;
	struct rec *backlog, **backlog_tail;
	size_t backlog_n;
	/* The last requests delivered: a response goes back to the port its
	 * request came from (docs/sim.md), whoever the requester was. */
	struct {
		int src;
		uint64_t tid;
		uint8_t mgmt_class;
		uint16_t sport;
	} recent[RECENT];
	unsigned recent_next;
};

static struct {
	pthread_mutex_t lk;
	struct simf *f;
	int self;
	struct uport *ports;
	uint32_t next_id;
	int thread_running;
	int ep, evfd;
	int debug;
	uint64_t dropped;
	/* Direct mode's short cut (direct_recv): the first record one received
	 * datagram produces for port `up` goes straight into the waiting
	 * caller's buffer instead of through the socketpair. */
	struct {
		struct uport *up;
		void *buf;
		size_t cap, len;
	} take;
} G = { .lk = PTHREAD_MUTEX_INITIALIZER, .self = -1, .ep = -1, .evfd = -1 };

static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Serializes the peek-then-read of umad_recv per fd. */
#define RECV_LOCKS 64
static pthread_mutex_t recv_lk[RECV_LOCKS];

/* ---- small helpers ---------------------------------------------------------- */

static void dbg(int level, const char *fn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void dbg(int level, const char *fn, const char *fmt, ...)
{
	va_list ap;

	if (G.debug < level)
		return;
	fprintf(stderr, "ibwarn: [%d] %s: ", (int)getpid(), fn);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
#define DBG(l, ...) dbg((l), __func__, __VA_ARGS__)

static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }
static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}
static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int is_response(const uint8_t *mad)
{
	return (M_METHOD(mad) & 0x80) || M_METHOD(mad) == 0x07 /* TrapRepress */ ||
	       (M_CLASS(mad) == 0x05 /* BM */ && (mad[23] & 1));
}

static int is_vendor2(uint8_t c) { return c >= 0x30 && c <= 0x4F; }

static int is_rmpp_class(uint8_t c)
{
	return c == 0x03 || c == 0x06 || c == 0x10 || c == 0x12 || is_vendor2(c);
}

/* Where the data of an RMPP segment starts (the class header repeats). */
static size_t data_offset(uint8_t c)
{
	if (c == 0x03)
		return 56;
	if (c == 0x06 || c == 0x10 || c == 0x12)
		return 64;
	if (is_vendor2(c))
		return 40;
	return MAD_HDR_LEN;
}

static int smi_class(uint8_t c) { return c == 0x01 || c == 0x81; }

static int kernel_rmpp(const struct agent *a)
{
	return a->rmpp_version && !(a->flags & UMAD_USER_RMPP) && is_rmpp_class(a->mgmt_class);
}

static int method_set(const uint64_t m[2], unsigned method)
{
	method &= 0x7F;
	return (int)((m[method >> 6] >> (method & 63)) & 1);
}

static uint32_t hi_tid(const struct uport *up, int agent)
{
	return (uint32_t)(up->gen & 7) << 21 | (uint32_t)(agent & 0x1F) << 16 | up->port;
}

static const struct simf_node *node(int n) { return &G.f->st->nodes[n]; }

static int roce(void) { return G.f->st->link == SIMF_LINK_ROCE; }

static int pkey_match(uint16_t a, uint16_t b)
{
	return simf_pkey_match(a, b);
}

static int sort_names_cmp(const void *a, const void *b)
{
	return strcmp((*(struct umad_device_node *const *)a)->ca_name,
		      (*(struct umad_device_node *const *)b)->ca_name);
}

/* ---- fabric attachment and fork ------------------------------------------------ */

static void atfork_prepare(void) { pthread_mutex_lock(&G.lk); }
static void atfork_parent(void) { pthread_mutex_unlock(&G.lk); }

/* The child has no receive thread and must not share the parent's sockets:
 * forget the ports (the application keeps its fds, which stay silent) and
 * attach again on the next call, as the child's own process. */
static void atfork_child(void)
{
	struct uport *up, *nx;

	for (up = G.ports; up; up = nx) {
		struct osend *o, *on;
		struct rmpp_rx *r, *rn;
		struct rec *b, *bn;

		nx = up->next;
		close(up->sock);
		close(up->ifd);
		if (up->dfd >= 0) {
			/* The epoll instance is shared with the parent (it would
			 * see the parent's socket): the child's fd becomes an
			 * empty, silent one. */
			int e = epoll_create1(EPOLL_CLOEXEC);

			if (e >= 0) {
				dup2(e, up->dfd);
				close(e);
			}
		}
		for (o = up->sends; o; o = on) {
			on = o->next;
			free(o);
		}
		for (r = up->rmpp; r; r = rn) {
			rn = r->next;
			free(r->buf);
			free(r);
		}
		for (b = up->backlog; b; b = bn) {
			bn = b->next;
			free(b);
		}
		free(up);
	}
	G.ports = NULL;
	if (G.ep >= 0)
		close(G.ep);
	if (G.evfd >= 0)
		close(G.evfd);
	G.ep = G.evfd = -1;
	G.thread_running = 0;
	G.f = NULL; /* the parent's mapping stays mapped, unused */
	G.self = -1;
	pthread_mutex_unlock(&G.lk);
}

static void init_once(void)
{
	const char *d = getenv("USCM_SIM_UMAD_DEBUG");
	int i;

	if (d)
		G.debug = atoi(d);
	for (i = 0; i < RECV_LOCKS; i++)
		pthread_mutex_init(&recv_lk[i], NULL);
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

/* Attaches on first use. G.lk held. NULL when there is no fabric or the
 * process is not a node (then the machine has no CA). */
static struct simf *fabric(void)
{
	if (!G.f) {
		int e = errno;

		G.f = simf_attach(NULL);
		if (!G.f) {
			DBG(1, "no fabric (%s)", strerror(errno));
			errno = e;
			return NULL;
		}
		G.self = G.f->self;
		errno = e;
	}
	if (G.self < 0 || (unsigned)G.self > G.f->st->nnodes)
		return NULL;
	return G.f;
}

static void ca_name_of(int n, char out[UMAD_CA_NAME_LEN])
{
	snprintf(out, UMAD_CA_NAME_LEN, CA_PREFIX "%.*s", UMAD_CA_NAME_LEN - 6, node(n)->name);
}

/* 0 if ca_name (NULL: the default) names our CA. G.lk held. */
static int check_ca(const char *ca_name)
{
	char mine[UMAD_CA_NAME_LEN];

	if (!fabric())
		return -ENODEV;
	if (!ca_name)
		return 0;
	ca_name_of(G.self, mine);
	return strncmp(ca_name, mine, UMAD_CA_NAME_LEN) ? -ENODEV : 0;
}

/* ---- device and port attributes ------------------------------------------------- */

static void fill_port(umad_port_t *p)
{
	const struct simf_node *nd = node(G.self);
	__be64 prefix;
	unsigned i;

	memset(p, 0, sizeof(*p));
	ca_name_of(G.self, p->ca_name);
	p->portnum = 1;
	simf_lock(G.f);
	p->base_lid = roce() ? 0 : nd->lid;
	p->lmc = nd->lmc;
	p->sm_lid = roce() ? 0 : nd->sm_lid;
	p->sm_sl = 0;
	p->state = nd->link_up ? nd->port_state : SIMF_PORT_DOWN;
	p->phys_state = nd->link_up ? 5 /* LinkUp */ : 3 /* Disabled, as the verbs drop-in */;
	p->rate = 100;
	if (roce())
		p->capmask = htobe32(0x00010000); /* IsCommunicationManagementSupported */
	else
		p->capmask = htobe32(0x2651E848u | (G.self == 0 ? 0x2 /* IsSM */ : 0));
	memcpy(&prefix, nd->gid, 8);
	p->gid_prefix = prefix;
	p->port_guid = htobe64(nd->guid);
	strcpy(p->link_layer, roce() ? "Ethernet" : "InfiniBand");
	p->pkeys = calloc(SIMF_PKEYS, sizeof(uint16_t));
	if (p->pkeys) {
		p->pkeys_size = SIMF_PKEYS;
		for (i = 0; i < SIMF_PKEYS; i++)
			p->pkeys[i] = nd->pkeys[i];
	}
	simf_unlock(G.f);
}

int umad_init(void)
{
	pthread_once(&once, init_once);
	return 0;
}

int umad_done(void)
{
	return 0;
}

int umad_get_cas_names(char cas[][UMAD_CA_NAME_LEN], int max)
{
	int n = 0;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	if (fabric() && max > 0) {
		ca_name_of(G.self, cas[0]);
		n = 1;
	}
	pthread_mutex_unlock(&G.lk);
	return n;
}

int umad_get_ca(const char *ca_name, umad_ca_t *ca)
{
	int r;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	r = check_ca(ca_name);
	if (!r) {
		const struct simf_node *nd = node(G.self);

		memset(ca, 0, sizeof(*ca));
		ca_name_of(G.self, ca->ca_name);
		ca->node_type = 1; /* CA */
		ca->numports = 1;
		snprintf(ca->fw_ver, sizeof(ca->fw_ver), "1.0.0");
		snprintf(ca->ca_type, sizeof(ca->ca_type), "uscm-sim");
		snprintf(ca->hw_ver, sizeof(ca->hw_ver), "1");
		ca->node_guid = htobe64(nd->guid);
		ca->system_guid = htobe64(nd->guid);
		ca->ports[1] = calloc(1, sizeof(umad_port_t));
		if (!ca->ports[1])
			r = -ENOMEM;
		else
			fill_port(ca->ports[1]);
	}
	pthread_mutex_unlock(&G.lk);
	return r;
}

int umad_release_ca(umad_ca_t *ca)
{
	int i;

	if (!ca)
		return -ENODEV;
	for (i = 0; i <= ca->numports && i < UMAD_CA_MAX_PORTS; i++) {
		if (!ca->ports[i])
			continue;
		free(ca->ports[i]->pkeys);
		free(ca->ports[i]);
		ca->ports[i] = NULL;
	}
	return 0;
}

int umad_get_port(const char *ca_name, int portnum, umad_port_t *port)
{
	int r;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	r = check_ca(ca_name);
	if (!r && portnum != 0 && portnum != 1)
		r = -EIO;
	if (!r) {
		fill_port(port);
		if (!port->pkeys)
			r = -EIO;
	}
	pthread_mutex_unlock(&G.lk);
	return r;
}

int umad_release_port(umad_port_t *port)
{
	if (!port)
		return -ENODEV;
	free(port->pkeys);
	port->pkeys = NULL;
	port->pkeys_size = 0;
	return 0;
}

int umad_get_ca_portguids(const char *ca_name, __be64 *portguids, int max)
{
	int r;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	r = check_ca(ca_name);
	if (!r && portguids) {
		if (max < 2) {
			r = -ENOMEM;
		} else {
			portguids[0] = htobe64(0); /* port 0: only switches have it */
			portguids[1] = htobe64(node(G.self)->guid);
			r = 2;
		}
	}
	pthread_mutex_unlock(&G.lk);
	return r;
}

int umad_get_issm_path(const char *ca_name, int portnum, char path[], int max)
{
	int r;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	r = check_ca(ca_name);
	if (!r && portnum != 0 && portnum != 1)
		r = -EINVAL;
	if (!r && max > 0)
		snprintf(path, (size_t)max, "%s/issm-%s", G.f->dir, node(G.self)->name);
	pthread_mutex_unlock(&G.lk);
	return r;
}

struct umad_device_node *umad_get_ca_device_list(void)
{
	struct umad_device_node *dn = NULL;
	char name[UMAD_CA_NAME_LEN];
	int have;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	have = fabric() != NULL;
	if (have)
		ca_name_of(G.self, name);
	pthread_mutex_unlock(&G.lk);
	errno = 0;
	if (!have)
		return NULL;
	dn = calloc(1, sizeof(*dn) + strlen(name) + 1);
	if (!dn) {
		errno = ENOMEM;
		return NULL;
	}
	strcpy((char *)(dn + 1), name);
	dn->ca_name = (const char *)(dn + 1);
	return dn;
}

void umad_free_ca_device_list(struct umad_device_node *head)
{
	while (head) {
		struct umad_device_node *nx = head->next;

		free(head);
		head = nx;
	}
}

int umad_sort_ca_device_list(struct umad_device_node **head, size_t size)
{
	struct umad_device_node *n, **arr;
	size_t i, count = 0;

	for (n = *head; n; n = n->next)
		count++;
	if (!size)
		size = count;
	if (size != count)
		return EINVAL;
	if (count < 2)
		return 0;
	arr = calloc(count, sizeof(*arr));
	if (!arr)
		return ENOMEM;
	for (i = 0, n = *head; n; n = n->next)
		arr[i++] = n;
	qsort(arr, count, sizeof(*arr), sort_names_cmp);
	for (i = 0; i + 1 < count; i++)
		arr[i]->next = arr[i + 1];
	arr[count - 1]->next = NULL;
	*head = arr[0];
	free(arr);
	return 0;
}

/* ---- buffer accessors -------------------------------------------------------------- */

void *umad_get_mad(void *umad)
{
	return ((struct ib_user_mad *)umad)->data;
}

size_t umad_size(void)
{
	return sizeof(struct ib_user_mad);
}

int umad_status(void *umad)
{
	return (int)((struct ib_user_mad *)umad)->status;
}

ib_mad_addr_t *umad_get_mad_addr(void *umad)
{
	return &((struct ib_user_mad *)umad)->addr;
}

int umad_set_grh(void *umad, void *mad_addr)
{
	struct ib_user_mad *m = umad;
	const ib_mad_addr_t *a = mad_addr;

	if (!a) {
		m->addr.grh_present = 0;
		return 0;
	}
	m->addr.grh_present = 1;
	memcpy(m->addr.gid, a->gid, 16);
	/* The caller gives the flow label in host order. */
	m->addr.flow_label = htobe32((uint32_t)a->flow_label);
	m->addr.hop_limit = a->hop_limit;
	m->addr.traffic_class = a->traffic_class;
	return 0;
}

int umad_set_pkey(void *umad, int pkey_index)
{
	((struct ib_user_mad *)umad)->addr.pkey_index = (uint16_t)pkey_index;
	return 0;
}

int umad_get_pkey(void *umad)
{
	return ((struct ib_user_mad *)umad)->addr.pkey_index;
}

int umad_set_addr(void *umad, int dlid, int dqp, int sl, int qkey)
{
	struct ib_user_mad *m = umad;

	m->addr.qpn = htobe32((uint32_t)dqp);
	m->addr.lid = htobe16((uint16_t)dlid);
	m->addr.qkey = htobe32((uint32_t)qkey);
	m->addr.sl = (uint8_t)sl;
	return 0;
}

int umad_set_addr_net(void *umad, __be16 dlid, __be32 dqp, int sl, __be32 qkey)
{
	struct ib_user_mad *m = umad;

	m->addr.qpn = dqp;
	m->addr.lid = dlid;
	m->addr.qkey = qkey;
	m->addr.sl = (uint8_t)sl;
	return 0;
}

int umad_debug(int level)
{
	pthread_once(&once, init_once);
	if (level >= 0)
		G.debug = level;
	return G.debug;
}

void umad_addr_dump(ib_mad_addr_t *addr)
{
	char gid[33];
	int i;

	for (i = 0; i < 16; i++)
		snprintf(gid + 2 * i, 3, "%02x", addr->gid[i]);
	fprintf(stderr,
		"ibwarn: [%d] umad_addr_dump: qpn %u qkey 0x%x lid %u sl %u\n"
		"grh_present %u gid_index %u hop_limit %u traffic_class %u flow_label 0x%x pkey_index 0x%x\n"
		"Gid 0x%s\n",
		(int)getpid(), be32toh(addr->qpn), be32toh(addr->qkey), be16toh(addr->lid), addr->sl,
		addr->grh_present, addr->gid_index, addr->hop_limit, addr->traffic_class,
		be32toh(addr->flow_label), addr->pkey_index, gid);
}

void umad_dump(void *umad)
{
	struct ib_user_mad *m = umad;

	fprintf(stderr, "ibwarn: [%d] umad_dump: agent id %u status %u timeout %u retries %u length %u\n",
		(int)getpid(), m->agent_id, m->status, m->timeout_ms, m->retries, m->length);
	umad_addr_dump(&m->addr);
}

/* ---- ports -------------------------------------------------------------------------- */

static struct uport *port_by_fd(int fd)
{
	struct uport *up;

	for (up = G.ports; up; up = up->next)
		if (up->ufd == fd)
			return up;
	return NULL;
}

static struct uport *port_by_id(uint32_t id)
{
	struct uport *up;

	for (up = G.ports; up; up = up->next)
		if (up->id == id)
			return up;
	return NULL;
}

static void wake_thread(void)
{
	uint64_t one = 1;

	if (G.evfd >= 0 && write(G.evfd, &one, sizeof(one)) < 0)
		DBG(2, "eventfd: %s", strerror(errno));
}

static void set_ifd_events(struct uport *up, int events)
{
	struct epoll_event ev = { .events = (uint32_t)events, .data.u64 = (uint64_t)up->id << 2 | 1 };

	if (events == up->ifd_events)
		return;
	if (!events)
		epoll_ctl(G.ep, EPOLL_CTL_DEL, up->ifd, NULL);
	else if (!up->ifd_events)
		epoll_ctl(G.ep, EPOLL_CTL_ADD, up->ifd, &ev);
	else
		epoll_ctl(G.ep, EPOLL_CTL_MOD, up->ifd, &ev);
	up->ifd_events = events;
}

/* Queues one record for the application. */
static void deliver(struct uport *up, const void *rec, size_t len)
{
	struct rec *r;

	if (G.take.up == up && !G.take.len && !up->backlog && len <= G.take.cap) {
		memcpy(G.take.buf, rec, len);
		G.take.len = len;
		return;
	}
	up->qseq++;
	if (up->blocked) {
		/* a thread asleep in direct_block's recvfrom: the record is on
		 * fd, which it does not watch; an empty datagram wakes one (one
		 * per record: with two asleep, a second record wakes the other) */
		struct sockaddr_in me = { .sin_family = AF_INET };

		me.sin_addr.s_addr = simf_node_addr(G.f, G.self);
		me.sin_port = htons(up->port);
		if (sendto(up->sock, "", 0, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&me, sizeof(me)) < 0)
			DBG(1, "fd %d: wake-up datagram not sent (%s)", up->ufd, strerror(errno));
	}
	if (!up->backlog) {
		ssize_t n = send(up->ifd, rec, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n == (ssize_t)len)
			return;
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			DBG(1, "fd %d: record lost (%s)", up->ufd, n < 0 ? strerror(errno) : "short");
			G.dropped++;
			return;
		}
	}
	if (up->backlog_n >= BACKLOG_MAX || !(r = malloc(sizeof(*r) + len))) {
		DBG(1, "fd %d: receive queue full, record dropped", up->ufd);
		G.dropped++;
		return;
	}
	r->next = NULL;
	r->len = len;
	memcpy(r->data, rec, len);
	*up->backlog_tail = r;
	up->backlog_tail = &r->next;
	up->backlog_n++;
	set_ifd_events(up, up->ifd_events | EPOLLOUT);
}

static void flush_backlog(struct uport *up)
{
	while (up->backlog) {
		struct rec *r = up->backlog;
		ssize_t n = send(up->ifd, r->data, r->len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		up->backlog = r->next;
		if (!up->backlog)
			up->backlog_tail = &up->backlog;
		up->backlog_n--;
		free(r);
	}
	set_ifd_events(up, up->ifd_events & ~EPOLLOUT);
}

/* ---- the datagram ------------------------------------------------------------------- */

static size_t build_pkt(uint8_t *pkt, uint8_t sl, int grh, uint16_t pkey, uint32_t dqp,
			uint32_t psn, uint32_t qkey, uint32_t sqp, const uint8_t *mad)
{
	struct simf_bth b;

	memset(&b, 0, sizeof(b));
	b.opcode = SIMF_OP_UD_SEND_ONLY;
	b.resv8a = SIMF_RESV8A(sl, grh);
	b.pkey = pkey;
	b.dest_qp = dqp & 0xFFFFFF;
	b.psn = psn & 0xFFFFFF;
	simf_bth_put(pkt, &b);
	put32(pkt + SIMF_BTH_LEN, qkey);
	put32(pkt + SIMF_BTH_LEN + 4, sqp & 0xFFFFFF);
	memcpy(pkt + SIMF_BTH_LEN + SIMF_DETH_LEN, mad, MAD_SIZE);
	memset(pkt + PKT_LEN - SIMF_ICRC_LEN, 0, SIMF_ICRC_LEN);
	return PKT_LEN;
}

/* The node a MAD addressed by *a goes to: 0 and *dst (-1: no such node, the
 * MAD is lost on the wire), or an errno the kernel's AH creation gives. */
static int resolve_dst(const ib_mad_addr_t *a, const uint8_t *mad, int *dst)
{
	*dst = -1;
	if (!roce() && M_CLASS(mad) == 0x81 && !is_response(mad) &&
	    (be16toh(a->lid) == 0xFFFF || be16toh(a->lid) == 0)) {
		/* A directed-route SMP from this port (permissive DLID): hop
		 * count 0 is this node's own SMA; otherwise it leaves by
		 * InitialPath[1] and every switch on the way sends it on by the
		 * next entry (simf_route_dr walks the cables; a CA forwards
		 * nothing, a missing cable or a down link loses it). */
		*dst = simf_route_dr(G.f, G.self, mad, NULL, NULL);
		return 0;
	}
	if (roce()) {
		if (!a->grh_present)
			return EINVAL; /* RoCE needs a GRH */
		*dst = simf_node_by_gid(G.f, a->gid);
		return 0;
	}
	*dst = simf_route_lid(G.f, G.self, be16toh(a->lid), NULL);
	/* IB routes on the DLID (through the switches' LFTs); the destination drops a GRH whose DGID is
	 * not one of its GIDs. */
	if (*dst >= 0 && a->grh_present && memcmp(a->gid, node(*dst)->gid, 16))
		*dst = -1;
	return 0;
}

/* The UDP port a MAD to QP qpn of node dst goes to. *unserved when a
 * request finds no agent (then the node's QP port, where nobody listens). */
static uint16_t dest_port(const struct uport *up, int dst, uint32_t qpn, const uint8_t *mad, int *unserved)
{
	struct simf_agent a;

	*unserved = 0;
	if (qpn > 1)
		return simf_qp_port(qpn); /* a UD QP of the verbs drop-in */
	/* A SubnGet/SubnSet goes to the destination's SMA, which on hardware
	 * is the HCA itself and answers before any agent sees it; the fabric's
	 * SM process hosts every node's SMA on the node's QP0 port. (Traps and
	 * the like go to whoever registered for them, as below.) SMInfo is
	 * the exception: an HCA's SMA does not serve it, it hands it to the SM
	 * running on the port (OpenSM's QP0 agent takes Gets of both SMP
	 * classes and answers with its GUID, SM_Key, ActCount, priority and
	 * state, IBTA 14.2.5.13); a port without an SM leaves it to the SMA,
	 * which answers "unsupported" (the built-in SM's node 0 has its SMInfo
	 * there). */
	if (qpn == 0 && !roce() && smi_class(M_CLASS(mad)) &&
	    (M_METHOD(mad) == 0x01 || M_METHOD(mad) == 0x02)) {
		if (M_ATTR(mad) == SMP_ATTR_SM_INFO &&
		    simf_agent_find(G.f, dst, 0, M_CLASS(mad), M_VERSION(mad), M_METHOD(mad), NULL, &a) >= 0)
			return a.port;
		return simf_qp_port(0);
	}
	if (is_response(mad)) {
		uint64_t tid = get64(mad + 8);
		uint16_t p = (uint16_t)(tid >> 32);
		unsigned i;

		for (i = 0; i < RECENT; i++)
			if (up->recent[i].sport && up->recent[i].src == dst && up->recent[i].tid == tid &&
			    up->recent[i].mgmt_class == M_CLASS(mad))
				return up->recent[i].sport;
		/* Else where a requester using this library listens. */
		return p ? p : simf_qp_port(qpn);
	}
	/* Whether the agent's process still lives matters only for a Get or
	 * Set (answer_unserved answers those when nobody serves them): for
	 * anything else a dead agent and none lose the MAD alike, so the /proc
	 * read per MAD is saved. */
	if ((M_METHOD(mad) == 0x01 || M_METHOD(mad) == 0x02
		     ? simf_agent_find
		     : simf_agent_find_any)(G.f, dst, (uint8_t)qpn, M_CLASS(mad), M_VERSION(mad), M_METHOD(mad),
					    is_vendor2(M_CLASS(mad)) ? mad + 37 : NULL, &a) >= 0)
		return a.port;
	*unserved = 1;
	return simf_qp_port(qpn);
}

static void rx_datagram(struct uport *up, uint8_t *pkt, size_t len, int src, uint16_t sport, int check_icrc);

/* What the destination's MAD layer answers to a Get/Set nobody serves:
 * a GetResp with status "unsupported method/attribute combination". */
static void answer_unserved(struct uport *up, int dst, uint32_t qpn, const uint8_t *pkt)
{
	struct simf_bth b;
	uint8_t resp[PKT_LEN], mad[MAD_SIZE];
	uint16_t status = 0x000C;

	if (!node(dst)->link_up || !node(G.self)->link_up)
		return;
	simf_bth_get(pkt, &b);
	memcpy(mad, pkt + SIMF_BTH_LEN + SIMF_DETH_LEN, MAD_SIZE);
	M_METHOD(mad) = 0x81;
	if (M_CLASS(mad) == 0x81)
		status |= 0x8000; /* the D bit of a directed-route SMP */
	mad[4] = (uint8_t)(status >> 8);
	mad[5] = (uint8_t)status;
	build_pkt(resp, SIMF_RESV8A_SL(b.resv8a), (int)SIMF_RESV8A_GRH(b.resv8a), b.pkey, qpn,
		  0, qpn ? QKEY_GSI : 0, qpn, mad);
	DBG(1, "no agent on %s for class 0x%02x method 0x%02x: answered 0x000C", node(dst)->name,
	    M_CLASS(mad), pkt[SIMF_BTH_LEN + SIMF_DETH_LEN + 3]);
	rx_datagram(up, resp, sizeof(resp), dst, simf_qp_port(qpn), 0);
}

static int xmit(struct uport *up, const ib_mad_addr_t *a, uint8_t *pkt, int *dst_out, int *unserved)
{
	const uint8_t *mad = pkt + SIMF_BTH_LEN + SIMF_DETH_LEN;
	uint32_t qpn = be32toh(a->qpn) & 0xFFFFFF;
	uint16_t dport;
	int dst, e;

	*unserved = 0;
	e = resolve_dst(a, mad, &dst);
	if (!e && M_CLASS(mad) == 0x81 && is_response(mad) && (mad[4] & 0x80)) {
		/* An agent's answer to a directed-route SMP (D bit set: an SM
		 * answering SubnGet(SMInfo)) retraces the request's path back
		 * to the requester, whatever the LID in the address (the
		 * permissive one): the node the request came from. */
		for (unsigned i = 0; i < RECENT; i++)
			if (up->recent[i].sport && up->recent[i].tid == get64(mad + 8) &&
			    up->recent[i].mgmt_class == 0x81)
				dst = up->recent[i].src;
	}
	*dst_out = dst;
	if (e)
		return e;
	if (dst < 0) {
		DBG(1, "no node at lid %u: MAD lost", be16toh(a->lid));
		return 0;
	}
	/* a GMP (VL0; SMPs on VL15 are never partition-checked) crossing a
	 * switch port that enforces partitions without its P_Key is lost */
	if (!roce() && !smi_class(M_CLASS(mad)) &&
	    !simf_pkey_route_ok(G.f, G.self, be16toh(a->lid), (uint16_t)(pkt[2] << 8 | pkt[3]))) {
		DBG(1, "P_Key 0x%04x not let through by a switch on the way to lid %u: MAD lost",
		    pkt[2] << 8 | pkt[3], be16toh(a->lid));
		return 0;
	}
	dport = dest_port(up, dst, qpn, mad, unserved);
	DBG(2, "fd %d -> %s:%u class 0x%02x method 0x%02x attr 0x%04x tid 0x%016" PRIx64, up->ufd,
	    node(dst)->name, dport, M_CLASS(mad), M_METHOD(mad), get16(mad + 16), get64(mad + 8));
	if (simf_send_from(G.f, up->sock, up->port, G.self, dst, dport, pkt, PKT_LEN) < 0) {
		e = errno;
		DBG(1, "simf_send: %s", strerror(e));
		return e;
	}
	return 0;
}

static int same_destination(const ib_mad_addr_t *a, const ib_mad_addr_t *b)
{
	if (!a->grh_present && !b->grh_present)
		return a->lid == b->lid;
	if (a->grh_present && b->grh_present)
		return !memcmp(a->gid, b->gid, 16);
	return 0;
}

/* umad_send under G.lk: 0 or an errno. */
/* What the kernel's RMPP sender does for a kernel-RMPP agent (IBTA Vol1
 * 13.6): splits the message into DATA segments, each with the class header
 * and an RMPP header (version 1, ACTIVE, FIRST on segment 1, LAST on the
 * last one, PayloadLength: the whole payload in the first, what the last
 * one carries in the last), and sends them. Simplified: the segments go out
 * back to back, without waiting for the receiver's window (its ACKs are
 * consumed on arrival, see rx) and without retransmission, so a lost
 * segment loses the message (the receiver times out). Responses only: a
 * segmented request (an SA Set of a large record) fails with EINVAL. */
static int send_rmpp_locked(struct uport *up, const struct simf_node *me, struct agent *ag,
			    const struct ib_user_mad *m, size_t length)
{
	size_t hl = data_offset(m->data[1]), dl = MAD_SIZE - hl, data, nseg;
	uint8_t mad[MAD_SIZE], pkt[PKT_LEN];
	uint32_t qpn = be32toh(m->addr.qpn) & 0xFFFFFF;
	int dst, unserved, e;

	if (length < hl || length > RMPP_MAX_LEN || !is_response(m->data))
		return EINVAL;
	data = length - hl;
	nseg = data ? (data + dl - 1) / dl : 1;
	for (size_t i = 0; i < nseg; i++) {
		size_t n = data - i * dl < dl ? data - i * dl : dl;
		uint8_t fl = RMPP_FLAG_ACTIVE;

		memset(mad, 0, sizeof(mad));
		memcpy(mad, m->data, hl);
		memcpy(mad + hl, m->data + hl + i * dl, n);
		if (i == 0)
			fl |= RMPP_FLAG_FIRST;
		if (i == nseg - 1)
			fl |= RMPP_FLAG_LAST;
		mad[24] = 1;                                    /* RMPPVersion */
		mad[25] = RMPP_TYPE_DATA;
		mad[26] = (uint8_t)((m->data[26] & 0xF8) | fl); /* RRespTime kept */
		mad[27] = 0;                                    /* RMPPStatus */
		put32(mad + 28, (uint32_t)(i + 1));             /* SegmentNumber */
		put32(mad + 32, i == 0 ? (uint32_t)(length - RMPP_HDR_END)
			       : i == nseg - 1 ? (uint32_t)(hl - RMPP_HDR_END + n) : 0);
		build_pkt(pkt, m->addr.sl, roce() || m->addr.grh_present, me->pkeys[m->addr.pkey_index], qpn,
			  up->psn++, ag->qpn ? QKEY_GSI : 0, ag->qpn, mad);
		e = xmit(up, &m->addr, pkt, &dst, &unserved);
		if (e)
			return e;
	}
	return 0;
}

static int send_locked(struct uport *up, struct ib_user_mad *m, size_t length)
{
	const struct simf_node *me = node(G.self);
	uint8_t mad[MAD_SIZE], pkt[PKT_LEN];
	struct agent *ag;
	struct osend *o;
	uint32_t qpn;
	int resp, dst, unserved, e;

	if (length < RMPP_HDR_END || m->agent_id >= MAX_AGENTS)
		return EINVAL;
	ag = &up->agents[m->agent_id];
	if (!ag->used)
		return EIO;
	if (m->addr.pkey_index >= SIMF_PKEYS)
		return EINVAL;
	if (kernel_rmpp(ag) && is_rmpp_class(m->data[1]) && (m->data[26] & RMPP_FLAG_ACTIVE))
		return send_rmpp_locked(up, me, ag, m, length);
	if (length > MAD_SIZE)
		return EINVAL; /* only an active RMPP MAD of a kernel-RMPP agent is segmented */
	memset(mad, 0, sizeof(mad));
	memcpy(mad, m->data, length);
	resp = is_response(mad);
	if (!resp)
		put64(mad + 8, (uint64_t)hi_tid(up, (int)m->agent_id) << 32 | (get64(mad + 8) & 0xFFFFFFFFu));
	/* The kernel's is_duplicate(): two outstanding requests with one TID,
	 * or two outstanding responses with one TID to one destination. */
	for (o = up->sends; o; o = o->next) {
		if (o->tid != get64(mad + 8) || o->mgmt_class != M_CLASS(mad) || o->is_resp != resp)
			continue;
		if (!resp || same_destination(&o->addr, &m->addr))
			return EINVAL;
	}
	qpn = be32toh(m->addr.qpn) & 0xFFFFFF;
	build_pkt(pkt, m->addr.sl, roce() || m->addr.grh_present, me->pkeys[m->addr.pkey_index], qpn,
		  up->psn++, ag->qpn ? QKEY_GSI : 0, ag->qpn, mad);
	if (roce())
		pkt[4] = SIMF_RESV8A_SET_SGID(pkt[4], m->addr.gid_index);
	else if (!(M_CLASS(mad) == 0x81) && be16toh(m->addr.lid) < 0xC000)
		/* LMC > 0: SLID = base LID | the address's path bits, DLID
		 * any LID of the destination's range */
		simf_bth_set_lids(G.f, pkt, G.self,
				  (uint16_t)(me->lid + (m->addr.path_bits & ((1u << (me->lmc & 7)) - 1))),
				  simf_node_by_lid(G.f, be16toh(m->addr.lid)), be16toh(m->addr.lid));
	e = xmit(up, &m->addr, pkt, &dst, &unserved);
	if (e)
		return e;
	/* Like ib_mad, any MAD sent with a timeout waits for a response and
	 * is resent: a response sent with one times out (nothing answers a
	 * response). */
	if (m->timeout_ms > 0) {
		o = calloc(1, sizeof(*o));
		if (!o)
			return ENOMEM;
		o->agent = (int)m->agent_id;
		o->tid = get64(mad + 8);
		o->mgmt_class = M_CLASS(mad);
		o->is_resp = (uint8_t)resp;
		o->qpn = (uint8_t)(qpn > 1 ? 2 : qpn);
		o->addr = m->addr;
		o->dst = dst;
		o->timeout_ms = m->timeout_ms;
		o->retries_left = m->retries;
		o->deadline = now_ns() + (uint64_t)m->timeout_ms * 1000000u;
		memcpy(o->pkt, pkt, PKT_LEN);
		memcpy(o->rec, m, UHDR);
		memcpy(o->rec + UHDR, mad, MAD_HDR_LEN);
		o->next = up->sends;
		up->sends = o;
		wake_thread();
	}
	if (unserved && !resp && dst >= 0 && (M_METHOD(mad) == 0x01 || M_METHOD(mad) == 0x02))
		answer_unserved(up, dst, qpn, pkt);
	return 0;
}

int umad_send(int fd, int agentid, void *umad, int length, int timeout_ms, int retries)
{
	struct ib_user_mad *m = umad;
	struct uport *up;
	int e;

	m->timeout_ms = (uint32_t)timeout_ms;
	m->retries = (uint32_t)retries;
	m->agent_id = (uint32_t)agentid;
	if (G.debug > 1)
		umad_dump(m);
	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	up = port_by_fd(fd);
	if (!up)
		e = EBADF;
	else if (length < 0)
		e = EINVAL;
	else
		e = send_locked(up, m, (size_t)length);
	pthread_mutex_unlock(&G.lk);
	if (!e)
		return 0;
	DBG(1, "fd %d agent %d: send failed: %s", fd, agentid, strerror(e));
	errno = e;
	return -EIO;
}

/* ---- receive path (the receive thread, G.lk held) -------------------------------------- */

static void drop(const char *why, int src)
{
	G.dropped++;
	DBG(1, "dropped a datagram from %s: %s", src >= 0 ? node(src)->name : "?", why);
}

/* Fills the address part of a received record. */
static void fill_rx_addr(ib_mad_addr_t *a, int src, uint32_t src_qp, const struct simf_bth *b, int pkey_index)
{
	uint8_t resv8a = b->resv8a;

	memset(a, 0, sizeof(*a));
	a->qpn = htobe32(src_qp);
	a->lid = htobe16(roce() ? 0 : simf_bth_slid(G.f, b, src));
	/* the DLID's path bits, as ib_umad reports the receive's */
	a->path_bits = roce() || !node(G.self)->lid ? 0
						    : (uint8_t)(simf_bth_dlid(G.f, b, G.self) - node(G.self)->lid);
	a->sl = (uint8_t)SIMF_RESV8A_SL(resv8a);
	a->pkey_index = (uint16_t)pkey_index;
	if (roce() || SIMF_RESV8A_GRH(resv8a)) {
		a->grh_present = 1;
		/* the local GID the MAD was sent to: RoCEv2 puts source and
		 * destination in one IP header, so an IPv6 source came to our
		 * (first) IPv6 GID; the sim carries no DGID index */
		a->gid_index = roce() && SIMF_RESV8A_SGID(resv8a) &&
					       simf_node_sgid(G.f, G.self, 1) != node(G.self)->gid
				       ? 1
				       : 0;
		a->hop_limit = roce() ? 64 : 0xFF;
		memcpy(a->gid, roce() ? simf_node_sgid(G.f, src, SIMF_RESV8A_SGID(resv8a)) : node(src)->gid,
		       16);
	}
}

static void deliver_mad(struct uport *up, int agent, const ib_mad_addr_t *a, const uint8_t *mad, size_t len)
{
	uint8_t stackbuf[UHDR + MAD_SIZE], *rec = stackbuf;
	struct ib_user_mad *h;

	if (UHDR + len > sizeof(stackbuf) && !(rec = malloc(UHDR + len))) {
		drop("out of memory", -1);
		return;
	}
	h = (struct ib_user_mad *)rec;
	memset(h, 0, UHDR);
	h->agent_id = (uint32_t)agent;
	h->length = (uint32_t)(UHDR + len);
	h->addr = *a;
	memcpy(rec + UHDR, mad, len);
	DBG(2, "fd %d agent %d <- class 0x%02x method 0x%02x attr 0x%04x tid 0x%016" PRIx64 " len %zu",
	    up->ufd, agent, M_CLASS(mad), M_METHOD(mad), get16(mad + 16), get64(mad + 8), len);
	deliver(up, rec, UHDR + len);
	if (rec != stackbuf)
		free(rec);
}

static struct osend *find_send(struct uport *up, const uint8_t *mad, int src, struct osend ***link)
{
	struct osend **pp, *o;

	for (pp = &up->sends; (o = *pp); pp = &o->next)
		if (!o->is_resp && o->tid == get64(mad + 8) && o->mgmt_class == M_CLASS(mad) &&
		    (M_CLASS(mad) == 0x81 || o->dst == src)) {
			if (link)
				*link = pp;
			return o;
		}
	return NULL;
}

static void unlink_send(struct uport *up, struct osend *o)
{
	struct osend **pp;

	for (pp = &up->sends; *pp; pp = &(*pp)->next)
		if (*pp == o) {
			*pp = o->next;
			return;
		}
}

static void free_rmpp(struct uport *up, struct rmpp_rx *r)
{
	struct rmpp_rx **pp;

	for (pp = &up->rmpp; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			break;
		}
	free(r->buf);
	free(r);
}

static struct rmpp_rx *find_rmpp(struct uport *up, int src, uint64_t tid, uint8_t c)
{
	struct rmpp_rx *r;

	for (r = up->rmpp; r; r = r->next)
		if (r->src == src && r->tid == tid && r->mgmt_class == c)
			return r;
	return NULL;
}

/* The receiver's ACK of segment seg (the kernel flips the method's
 * response bit, so the ACK of a GetTableResp segment is a GetTable). */
static void send_rmpp_ack(struct uport *up, const uint8_t *seg_pkt, const uint8_t *mad, int src,
			  uint16_t sport, uint32_t seg)
{
	struct simf_bth b;
	uint8_t ack[MAD_SIZE], pkt[PKT_LEN];
	size_t hl = data_offset(M_CLASS(mad));

	memset(ack, 0, sizeof(ack));
	memcpy(ack, mad, hl);
	M_METHOD(ack) ^= 0x80;
	ack[25] = RMPP_TYPE_ACK;
	ack[26] = RMPP_FLAG_ACTIVE;
	ack[27] = 0;
	put32(ack + 28, seg);
	put32(ack + 32, seg + RMPP_WINDOW);
	simf_bth_get(seg_pkt, &b);
	build_pkt(pkt, SIMF_RESV8A_SL(b.resv8a), roce() || SIMF_RESV8A_GRH(b.resv8a), b.pkey,
		  get32(seg_pkt + SIMF_BTH_LEN + 4) & 0xFFFFFF, up->psn++, QKEY_GSI, 1, ack);
	if (simf_send_from(G.f, up->sock, up->port, G.self, src, sport, pkt, PKT_LEN) < 0)
		DBG(1, "RMPP ACK: %s", strerror(errno));
}

/* One DATA segment of a response for kernel-RMPP agent o->agent. */
static void rx_rmpp_segment(struct uport *up, struct osend *o, const uint8_t *pkt, const uint8_t *mad,
			    const ib_mad_addr_t *a, int src, uint16_t sport)
{
	uint8_t flags = mad[26] & 7;
	uint32_t seg = get32(mad + 28);
	struct rmpp_rx *r = find_rmpp(up, src, get64(mad + 8), M_CLASS(mad));
	size_t hl = data_offset(M_CLASS(mad)), dl = MAD_SIZE - hl;

	if (mad[25] != RMPP_TYPE_DATA) {
		drop("RMPP ACK/STOP/ABORT for a receiver", src);
		return;
	}
	if ((flags & RMPP_FLAG_FIRST) && seg == 1) {
		if (r)
			free_rmpp(up, r);
		r = calloc(1, sizeof(*r));
		if (!r)
			return;
		r->src = src;
		r->sport = sport;
		r->tid = get64(mad + 8);
		r->mgmt_class = M_CLASS(mad);
		r->agent = o->agent;
		r->next_seg = 1;
		r->hdr_len = hl;
		r->cap = UHDR + MAD_SIZE * 4;
		r->buf = malloc(r->cap);
		if (!r->buf) {
			free(r);
			return;
		}
		memcpy(r->buf + UHDR, mad, hl);
		r->len = UHDR + hl;
		r->next = up->rmpp;
		up->rmpp = r;
	}
	if (!r || seg != r->next_seg) {
		if (r && seg < r->next_seg)
			send_rmpp_ack(up, pkt, mad, src, sport, r->next_seg - 1); /* duplicate */
		else
			drop("RMPP segment out of sequence", src);
		return;
	}
	if (r->len + dl > r->cap) {
		size_t cap = r->cap * 2;
		uint8_t *nb;

		if (cap > RMPP_MAX_LEN || !(nb = realloc(r->buf, cap))) {
			drop("RMPP message too long", src);
			free_rmpp(up, r);
			return;
		}
		r->buf = nb;
		r->cap = cap;
	}
	memcpy(r->buf + r->len, mad + hl, dl);
	r->len += dl;
	r->next_seg++;
	/* The requester waits as long as segments keep coming. */
	o->deadline = now_ns() + (uint64_t)o->timeout_ms * 1000000u;
	send_rmpp_ack(up, pkt, mad, src, sport, seg);
	if (flags & RMPP_FLAG_LAST) {
		/* The kernel's length: header + segments' data, less what the
		 * last segment's PayloadLength leaves unused. */
		long pad = (long)(MAD_SIZE - RMPP_HDR_END) - (long)get32(mad + 32);
		size_t madlen;

		if (pad < 0 || pad > MAD_SIZE - RMPP_HDR_END)
			pad = 0;
		madlen = r->len - UHDR - (size_t)pad;
		/* The first segment's MAD header heads the message; its RMPP
		 * header is what the application sees. */
		deliver_mad(up, r->agent, a, r->buf + UHDR, madlen);
		free_rmpp(up, r);
		unlink_send(up, o);
		free(o);
	}
}

static int local_agent_for(struct uport *up, uint32_t qpn, const uint8_t *mad)
{
	int i;

	for (i = 0; i < MAX_AGENTS; i++) {
		const struct agent *ag = &up->agents[i];

		if (!ag->used || ag->qpn != qpn || ag->mgmt_class != M_CLASS(mad) ||
		    ag->class_version != M_VERSION(mad) || !method_set(ag->methods, M_METHOD(mad)))
			continue;
		if (is_vendor2(ag->mgmt_class) && memcmp(ag->oui, mad + 37, 3))
			continue;
		return i;
	}
	return -1;
}

static void rx_datagram(struct uport *up, uint8_t *pkt, size_t len, int src, uint16_t sport, int check_icrc)
{
	const struct simf_node *me = node(G.self);
	struct simf_bth b;
	uint8_t mad[MAD_SIZE];
	size_t plen;
	uint32_t qkey, src_qp;
	ib_mad_addr_t a;
	int pkey_index = -1, i;

	if (src < 0 || (unsigned)src > G.f->st->nnodes + G.f->st->nswitches) {
		drop("not from the fabric", -1);
		return;
	}
	if (len < SIMF_BTH_LEN + SIMF_DETH_LEN + MAD_HDR_LEN + SIMF_ICRC_LEN) {
		drop("runt", src);
		return;
	}
	plen = len - SIMF_BTH_LEN - SIMF_DETH_LEN - SIMF_ICRC_LEN;
	if (plen > MAD_SIZE) {
		drop("longer than a MAD", src);
		return;
	}
	if (check_icrc && simf_icrc(G.f, src, G.self, sport, up->port, pkt, len - SIMF_ICRC_LEN) !=
				  simf_icrc_get(pkt + len - SIMF_ICRC_LEN)) {
		drop("bad ICRC", src);
		return;
	}
	simf_bth_get(pkt, &b);
	if (b.opcode != SIMF_OP_UD_SEND_ONLY) {
		drop("not a UD SEND-only", src);
		return;
	}
	if (b.dest_qp > 1) {
		drop("not for QP0/QP1", src);
		return;
	}
	qkey = get32(pkt + SIMF_BTH_LEN);
	src_qp = get32(pkt + SIMF_BTH_LEN + 4) & 0xFFFFFF;
	if (b.dest_qp == 1) {
		/* QP1: the HCA checks the P_Key and the Q_Key; QP0 takes any. */
		for (i = 0; i < SIMF_PKEYS; i++)
			if (pkey_match(b.pkey, me->pkeys[i])) {
				pkey_index = i;
				break;
			}
		if (pkey_index < 0) {
			simf_pkey_violation(G.f, G.self);
			drop("P_Key not in the P_Key table", src);
			return;
		}
		if (qkey != QKEY_GSI) {
			drop("GSI Q_Key mismatch", src);
			return;
		}
	} else {
		pkey_index = 0;
	}
	memset(mad, 0, sizeof(mad));
	memcpy(mad, pkt + SIMF_BTH_LEN + SIMF_DETH_LEN, plen);
	/* The kernel's validate_mad(). */
	if (mad[0] != 1) {
		drop("MAD base version", src);
		return;
	}
	if (smi_class(M_CLASS(mad)) != (b.dest_qp == 0)) {
		drop("SMP not on QP0 / GMP on QP0", src);
		return;
	}
	if (M_CLASS(mad) == 0x07 && get16(mad + 16) != 0x0001 && M_METHOD(mad) != 0x03) {
		drop("CM MAD whose method is not Send", src);
		return;
	}
	fill_rx_addr(&a, src, src_qp, &b, pkey_index);

	if (is_response(mad)) {
		struct osend *o = find_send(up, mad, src, NULL);

		if (!o) {
			/* A user-RMPP agent gets active RMPP MADs unsolicited. */
			uint32_t hi = (uint32_t)(get64(mad + 8) >> 32);
			int ag = (int)((hi >> 16) & 0x1F);

			if (hi == hi_tid(up, ag) && up->agents[ag].used && (up->agents[ag].flags & UMAD_USER_RMPP) &&
			    is_rmpp_class(M_CLASS(mad)) && (mad[26] & RMPP_FLAG_ACTIVE)) {
				deliver_mad(up, ag, &a, mad, MAD_SIZE);
				return;
			}
			drop("response to no outstanding request", src);
			return;
		}
		if (is_rmpp_class(M_CLASS(mad)) && (mad[26] & RMPP_FLAG_ACTIVE) && kernel_rmpp(&up->agents[o->agent])) {
			rx_rmpp_segment(up, o, pkt, mad, &a, src, sport);
			return;
		}
		deliver_mad(up, o->agent, &a, mad, MAD_SIZE);
		unlink_send(up, o);
		free(o);
		return;
	}
	i = local_agent_for(up, b.dest_qp, mad);
	if (i < 0) {
		drop("request no agent of this port serves", src);
		return;
	}
	/* An RMPP ACK/STOP/ABORT for what a kernel-RMPP agent sent: the
	 * kernel's RMPP sender takes it (here: consumes it, see
	 * send_rmpp_locked), the agent never sees it. */
	if (kernel_rmpp(&up->agents[i]) && is_rmpp_class(M_CLASS(mad)) && (mad[26] & RMPP_FLAG_ACTIVE) &&
	    mad[25] != RMPP_TYPE_DATA)
		return;
	up->recent[up->recent_next].src = src;
	up->recent[up->recent_next].tid = get64(mad + 8);
	up->recent[up->recent_next].mgmt_class = M_CLASS(mad);
	up->recent[up->recent_next].sport = sport;
	up->recent_next = (up->recent_next + 1) % RECENT;
	deliver_mad(up, i, &a, mad, MAD_SIZE);
}

/* Receives up to max datagrams waiting on the port's UDP socket: validated,
 * matched and queued on the socketpair as records (G.lk held). The receive
 * thread does it, or in direct mode the application's thread. */
static void drain_sock(struct uport *up, int max)
{
	uint8_t buf[RX_BUF];
	int k;

	for (k = 0; k < max; k++) {
		int src;
		uint16_t sport;
		ssize_t len = simf_recv(G.f, up->sock, buf, sizeof(buf), &src, &sport);

		if (len < 0)
			break;
		if (len == 0)
			continue; /* direct_block's wake-up */
		rx_datagram(up, buf, (size_t)len, src, sport, 1);
	}
}

/* Records the application wrote to its fd directly (write() instead of
 * umad_send): sent the same way; errors only show in the debug log. */
static void rx_user_write(struct uport *up)
{
	uint8_t buf[UHDR + MAD_SIZE + 64];
	int k;

	for (k = 0; k < 64; k++) {
		ssize_t n = recv(up->ifd, buf, sizeof(buf), MSG_DONTWAIT);
		int e;

		if (n < 0)
			return;
		if (n == 0) { /* the application closed its end */
			set_ifd_events(up, 0);
			return;
		}
		if ((size_t)n < UHDR) {
			DBG(1, "fd %d: short write ignored", up->ufd);
			continue;
		}
		e = send_locked(up, (struct ib_user_mad *)buf, (size_t)n - UHDR);
		if (e)
			DBG(1, "fd %d: write(): %s", up->ufd, strerror(e));
	}
}

static void run_timers(void)
{
	uint64_t now = now_ns();
	struct uport *up;

	for (up = G.ports; up; up = up->next) {
		struct osend *o, *nx;

		/* Direct mode: an answer may be waiting unread on the socket;
		 * the kernel would have matched it on arrival, before the
		 * timer. */
		if (up->dfd >= 0)
			for (o = up->sends; o; o = o->next)
				if (o->deadline <= now) {
					drain_sock(up, 1024);
					break;
				}
		for (o = up->sends; o; o = nx) {
			struct ib_user_mad *h = (struct ib_user_mad *)o->rec;
			struct rmpp_rx *r;

			nx = o->next;
			if (o->deadline > now)
				continue;
			r = find_rmpp(up, o->dst, o->tid, o->mgmt_class);
			if (r)
				free_rmpp(up, r);
			if (o->retries_left > 0) {
				int dst, unserved;

				o->retries_left--;
				o->deadline = now + (uint64_t)o->timeout_ms * 1000000u;
				DBG(2, "fd %d: resend tid 0x%016" PRIx64, up->ufd, o->tid);
				if (!xmit(up, &o->addr, o->pkt, &dst, &unserved)) {
					o->dst = dst;
					if (unserved && dst >= 0 &&
					    (o->pkt[SIMF_BTH_LEN + SIMF_DETH_LEN + 3] == 0x01 ||
					     o->pkt[SIMF_BTH_LEN + SIMF_DETH_LEN + 3] == 0x02))
						answer_unserved(up, dst, be32toh(o->addr.qpn) & 0xFFFFFF, o->pkt);
				}
				continue;
			}
			unlink_send(up, o);
			h->status = ETIMEDOUT;
			DBG(1, "fd %d agent %d: tid 0x%016" PRIx64 " timed out", up->ufd, o->agent, o->tid);
			deliver(up, o->rec, sizeof(o->rec));
			free(o);
		}
	}
}

static int next_timeout_ms(void)
{
	uint64_t now = now_ns(), first = UINT64_MAX;
	struct uport *up;
	struct osend *o;

	for (up = G.ports; up; up = up->next)
		for (o = up->sends; o; o = o->next)
			if (o->deadline < first)
				first = o->deadline;
	if (first == UINT64_MAX)
		return -1;
	if (first <= now)
		return 0;
	return (int)((first - now + 999999) / 1000000);
}

static void *rx_thread(void *arg)
{
	struct epoll_event ev[32];

	(void)arg;
	for (;;) {
		int n, i, ms;

		pthread_mutex_lock(&G.lk);
		ms = next_timeout_ms();
		pthread_mutex_unlock(&G.lk);
		n = epoll_wait(G.ep, ev, 32, ms);
		pthread_mutex_lock(&G.lk);
		for (i = 0; i < n; i++) {
			uint64_t d = ev[i].data.u64;
			struct uport *up;

			if ((d & 3) == 2) {
				uint64_t v;

				if (read(G.evfd, &v, sizeof(v)) < 0)
					DBG(2, "eventfd: %s", strerror(errno));
				continue;
			}
			up = port_by_id((uint32_t)(d >> 2));
			if (!up)
				continue; /* closed meanwhile */
			if ((d & 3) == 0) {
				if (up->dfd < 0) /* else the application's thread reads it */
					drain_sock(up, 64);
			} else {
				if (ev[i].events & EPOLLOUT)
					flush_backlog(up);
				if (ev[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
					rx_user_write(up);
			}
		}
		run_timers();
		pthread_mutex_unlock(&G.lk);
	}
	return NULL;
}

/* Starts the receive thread (G.lk held). */
static int start_thread(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = 2 };
	sigset_t all, old;
	pthread_attr_t at;
	pthread_t t;
	int r;

	if (G.thread_running)
		return 0;
	if (G.ep < 0 && (G.ep = epoll_create1(EPOLL_CLOEXEC)) < 0)
		return errno;
	if (G.evfd < 0) {
		G.evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (G.evfd < 0)
			return errno;
		if (epoll_ctl(G.ep, EPOLL_CTL_ADD, G.evfd, &ev) < 0)
			return errno;
	}
	/* Signals stay with the application's threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&t, &at, rx_thread, NULL);
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r)
		return r;
	G.thread_running = 1;
	return 0;
}

int umad_open_port(const char *ca_name, int portnum)
{
	struct uport *up;
	struct epoll_event ev;
	int sp[2], r, sz = 1 << 20, err = 0;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	r = check_ca(ca_name);
	if (r)
		goto out;
	if (portnum != 0 && portnum != 1) {
		r = -EINVAL;
		goto out;
	}
	/* /dev/infiniband/umad0 is 0600 root (rdma-core's udev rules) unless
	 * the fabric opens it to all: libibumad's open() fails with EACCES and
	 * umad_open_port returns -EIO, errno still EACCES. */
	if (G.f->st->umad_access != SIMF_UMAD_ALL && geteuid() != 0) {
		DBG(1, "open /dev/infiniband/umad0 failed: %s", strerror(EACCES));
		err = EACCES;
		r = -EIO;
		goto out;
	}
	r = start_thread();
	if (r) {
		DBG(1, "receive thread: %s", strerror(r));
		r = -EIO;
		goto out;
	}
	up = calloc(1, sizeof(*up));
	if (!up) {
		r = -ENOMEM;
		goto out;
	}
	up->backlog_tail = &up->backlog;
	up->dfd = -1;
	up->sock = simf_socket(G.f, G.self, 0, &up->port);
	if (up->sock < 0) {
		DBG(1, "simf_socket: %s", strerror(errno));
		free(up);
		r = -EIO;
		goto out;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0) {
		close(up->sock);
		free(up);
		r = -EIO;
		goto out;
	}
	up->ufd = sp[0];
	up->ifd = sp[1];
	/* The kernel's umad fd is opened O_NONBLOCK by libibumad. */
	fcntl(up->ufd, F_SETFL, fcntl(up->ufd, F_GETFL) | O_NONBLOCK);
	fcntl(up->ifd, F_SETFL, fcntl(up->ifd, F_GETFL) | O_NONBLOCK);
	setsockopt(up->ifd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	up->id = ++G.next_id;
	up->gen = (uint8_t)((unsigned)getpid() ^ (unsigned)now_ns() ^ up->id);
	up->psn = (uint32_t)now_ns() & 0xFFFFFF;
	memset(&ev, 0, sizeof(ev));
	ev.events = EPOLLIN;
	ev.data.u64 = (uint64_t)up->id << 2;
	if (epoll_ctl(G.ep, EPOLL_CTL_ADD, up->sock, &ev) < 0) {
		close(up->sock);
		close(up->ufd);
		close(up->ifd);
		free(up);
		r = -EIO;
		goto out;
	}
	set_ifd_events(up, EPOLLIN);
	up->next = G.ports;
	G.ports = up;
	r = up->ufd;
	DBG(1, "opened %s port 1: fd %d, udp port %u", node(G.self)->name, up->ufd, up->port);
out:
	pthread_mutex_unlock(&G.lk);
	if (err)
		errno = err;
	return r;
}

static void drop_agent_state(struct uport *up, int id)
{
	struct osend *o, *nx;
	struct rmpp_rx *r, *rn;

	for (o = up->sends; o; o = nx) {
		nx = o->next;
		if (o->agent == id) {
			unlink_send(up, o);
			free(o);
		}
	}
	for (r = up->rmpp; r; r = rn) {
		rn = r->next;
		if (r->agent == id)
			free_rmpp(up, r);
	}
	if (up->agents[id].slot >= 0)
		simf_agent_del(G.f, G.self, up->agents[id].slot);
	memset(&up->agents[id], 0, sizeof(up->agents[id]));
}

int umad_close_port(int fd)
{
	struct uport *up, **pp;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	for (pp = &G.ports; (up = *pp); pp = &up->next)
		if (up->ufd == fd)
			break;
	if (up) {
		struct rec *b, *bn;
		int i;

		*pp = up->next;
		for (i = 0; i < MAX_AGENTS; i++)
			if (up->agents[i].used)
				drop_agent_state(up, i);
		for (b = up->backlog; b; b = bn) {
			bn = b->next;
			free(b);
		}
		if (up->dfd >= 0)
			close(up->dfd);
		else
			epoll_ctl(G.ep, EPOLL_CTL_DEL, up->sock, NULL);
		set_ifd_events(up, 0);
		close(up->sock);
		close(up->ifd);
		free(up);
		DBG(1, "closed fd %d", fd);
	}
	pthread_mutex_unlock(&G.lk);
	close(fd);
	return 0;
}

/* The kernel's libibumad returns the port fd itself. Here a caller that
 * asks which fd to poll gets the port in direct mode (see "direct mode"
 * below): an fd to poll, then umad_recv / umad_poll on the port fd. Who
 * read()s the port fd itself must not ask, or run with
 * USCM_SIM_UMAD_DIRECT=0 (the kernel's behaviour exactly). */
static int direct_fd(int fd);
int umad_get_fd(int fd)
{
	int d = direct_fd(fd);

	return d >= 0 ? d : fd;
}

/* ---- agents ------------------------------------------------------------------------- */

/* The kernel's ib_umad_reg_agent + ib_register_mad_agent: an agent id or
 * -errno. */
static int register_agent(int fd, uint8_t qpn, uint8_t mgmt_class, uint8_t version, uint8_t rmpp_version,
			  const uint8_t oui[3], const uint64_t methods[2], uint32_t flags)
{
	struct simf_agent sa;
	struct uport *up;
	struct agent *ag;
	int id, slot, empty, i, r;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	up = port_by_fd(fd);
	if (!up) {
		r = -EBADF;
		goto out;
	}
	if (mgmt_class) {
		if (version >= 8 || (mgmt_class >= 0x50 && mgmt_class != 0x81) ||
		    (is_vendor2(mgmt_class) && !(oui[0] | oui[1] | oui[2]))) {
			r = -EINVAL;
			goto out;
		}
	}
	for (id = 0; id < MAX_AGENTS; id++)
		if (!up->agents[id].used)
			break;
	if (id == MAX_AGENTS) {
		r = -ENOMEM;
		goto out;
	}
	empty = !mgmt_class || !(methods[0] | methods[1]);
	slot = -1;
	memset(&sa, 0, sizeof(sa));
	sa.pid = (int32_t)getpid();
	sa.port = up->port;
	sa.qpn = qpn;
	sa.mgmt_class = mgmt_class;
	sa.class_version = version;
	sa.rmpp_version = rmpp_version;
	memcpy(sa.oui, oui, 3);
	for (i = 0; i < 128; i++)
		if (mgmt_class && method_set(methods, (unsigned)i))
			sa.methods[i >> 3] |= (uint8_t)(1u << (i & 7));
	sa.agent_id = (uint32_t)id;
	if (mgmt_class) {
		slot = simf_agent_add(G.f, G.self, &sa);
		if (slot < 0) {
			int e = errno;

			if (!(empty && e == ENOSPC)) {
				/* ib_mad: a method already served is EINVAL. */
				r = e == EBUSY ? -EINVAL : e == ENOSPC ? -ENOMEM : -e;
				goto out;
			}
			slot = -1; /* an agent with no methods needs no entry */
		}
	}
	ag = &up->agents[id];
	memset(ag, 0, sizeof(*ag));
	ag->used = 1;
	ag->qpn = qpn;
	ag->mgmt_class = mgmt_class;
	ag->class_version = version;
	ag->rmpp_version = rmpp_version;
	memcpy(ag->oui, oui, 3);
	ag->flags = flags;
	if (mgmt_class) {
		ag->methods[0] = methods[0];
		ag->methods[1] = methods[1];
	}
	ag->slot = slot;
	r = id;
	DBG(1, "fd %d: agent %d class 0x%02x version %u qp %u rmpp %u slot %d", fd, id, mgmt_class, version,
	    qpn, rmpp_version, slot);
out:
	pthread_mutex_unlock(&G.lk);
	return r;
}

static void mask_from_longs(uint64_t out[2], long *mask)
{
	out[0] = out[1] = 0;
	if (mask)
		memcpy(out, mask, 16);
}

int umad_register(int fd, int mgmt_class, int mgmt_version, uint8_t rmpp_version,
		  long method_mask[16 / sizeof(long)])
{
	static const uint8_t openib_oui[3] = { 0x00, 0x14, 0x05 };
	uint64_t m[2];
	int r;

	mask_from_longs(m, method_mask);
	r = register_agent(fd, (mgmt_class == 0x01 || mgmt_class == 0x81) ? 0 : 1, (uint8_t)mgmt_class,
			   (uint8_t)mgmt_version, rmpp_version, openib_oui, m, 0);
	if (r >= 0)
		return r;
	errno = -r;
	return -EPERM; /* what libibumad returns for any ioctl failure */
}

int umad_register_oui(int fd, int mgmt_class, uint8_t rmpp_version, uint8_t oui[3],
		      long method_mask[16 / sizeof(long)])
{
	uint64_t m[2];
	int r;

	if (mgmt_class < 0x30 || mgmt_class > 0x4F)
		return -EINVAL;
	mask_from_longs(m, method_mask);
	r = register_agent(fd, 1, (uint8_t)mgmt_class, 1, rmpp_version, oui, m, 0);
	if (r >= 0)
		return r;
	errno = -r;
	return -EPERM;
}

int umad_register2(int port_fd, struct umad_reg_attr *attr, uint32_t *agent_id)
{
	uint8_t oui[3];
	int r;

	if (!attr || !agent_id)
		return EINVAL;
	if (attr->mgmt_class >= 0x30 && attr->mgmt_class <= 0x4F &&
	    ((attr->oui & 0x00FFFFFF) == 0 || (attr->oui & 0xFF000000) != 0))
		return EINVAL;
	if (attr->flags & ~(uint32_t)UMAD_USER_RMPP) {
		attr->flags = 0;
		errno = EINVAL;
		return EINVAL;
	}
	if (attr->oui & 0xFF000000) {
		attr->flags = 0;
		errno = EINVAL;
		return EINVAL;
	}
	oui[0] = (uint8_t)(attr->oui >> 16);
	oui[1] = (uint8_t)(attr->oui >> 8);
	oui[2] = (uint8_t)attr->oui;
	r = register_agent(port_fd, (attr->mgmt_class == 0x01 || attr->mgmt_class == 0x81) ? 0 : 1,
			   attr->mgmt_class, attr->mgmt_class_version, attr->rmpp_version, oui,
			   attr->method_mask, attr->flags);
	if (r < 0) {
		if (r == -EINVAL)
			attr->flags = 0;
		errno = -r;
		return -r;
	}
	*agent_id = (uint32_t)r;
	return 0;
}

int umad_unregister(int fd, int agentid)
{
	struct uport *up;
	int e = 0;

	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	up = port_by_fd(fd);
	if (!up)
		e = EBADF;
	else if (agentid < 0 || agentid >= MAX_AGENTS || !up->agents[agentid].used)
		e = EINVAL;
	else
		drop_agent_state(up, agentid);
	pthread_mutex_unlock(&G.lk);
	if (e) {
		errno = e;
		return -1;
	}
	return 0;
}

/* ---- receive ------------------------------------------------------------------------ */

static int dev_poll(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int n = poll(&p, 1, timeout_ms);

	if (n == 1)
		return 0;
	if (n == 0)
		return -ETIMEDOUT;
	return -EIO;
}

/* ---- direct mode ------------------------------------------------------------------- */

/*
 * Direct mode (a port whose fd the caller asked for with umad_get_fd, unless
 * USCM_SIM_UMAD_DIRECT=0): the caller's thread receives
 * the port's datagrams inside umad_recv/umad_poll, so a MAD costs no wake-up
 * of the receive thread (which keeps the send timers and write()s to the
 * fd). The records still go through the socketpair, so everything the
 * receive path does stays the same code. The price: the fd to poll is an
 * epoll fd holding the UDP socket and the socketpair end; it becomes
 * readable for a datagram the HCA or the MAD layer then drops, or one that
 * another thread's umad_recv takes first, and umad_recv(…, 0) then says
 * -EAGAIN. Hence only for callers that ask for the fd to poll (umad_get_fd)
 * and read with umad_recv — what libibumad documents — not for those that
 * read() the port fd.
 */

/* Receives what waits on fd's socket in direct mode. The epoll fd, or -1
 * when fd is not a direct-mode port. */
static int direct_drain(int fd)
{
	struct uport *up;
	int dfd = -1;

	pthread_mutex_lock(&G.lk);
	up = port_by_fd(fd);
	if (up && up->dfd >= 0) {
		dfd = up->dfd;
		drain_sock(up, 64);
	}
	pthread_mutex_unlock(&G.lk);
	return dfd;
}

/* The epoll fd of direct-mode port fd, -1 when fd is not one. */
static int direct_dfd(int fd)
{
	struct uport *up;
	int dfd = -1;

	pthread_mutex_lock(&G.lk);
	up = port_by_fd(fd);
	if (up)
		dfd = up->dfd;
	pthread_mutex_unlock(&G.lk);
	return dfd;
}

/* dev_poll for a direct-mode port: 0 once a record waits on fd, else
 * -ETIMEDOUT (or -EIO) after timeout_ms (< 0: none). */
static int direct_poll(int fd, int dfd, int timeout_ms)
{
	uint64_t end = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000u : 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int ms = timeout_ms;

		if (poll(&p, 1, 0) == 1)
			return 0;
		if (timeout_ms > 0) {
			uint64_t t = now_ns();

			if (t >= end)
				return -ETIMEDOUT;
			ms = (int)((end - t + 999999) / 1000000);
		} else if (timeout_ms == 0) {
			return -ETIMEDOUT;
		}
		p.fd = dfd;
		if (poll(&p, 1, ms) < 0 && errno != EINTR)
			return -EIO;
		if (direct_drain(fd) < 0)
			return -EIO; /* closed meanwhile */
	}
}

/* Puts port fd in direct mode and returns the fd to poll instead of fd,
 * or -1 with errno (EBADF: no such port; ENOTSUP: USCM_SIM_UMAD_DIRECT=0). */
static int direct_fd(int fd)
{
	const char *env = getenv("USCM_SIM_UMAD_DIRECT");
	struct epoll_event ev;
	struct uport *up;
	int r = -1, e = 0, d;

	if (env && !strcmp(env, "0")) {
		errno = ENOTSUP;
		return -1;
	}
	pthread_once(&once, init_once);
	pthread_mutex_lock(&G.lk);
	up = port_by_fd(fd);
	if (!up) {
		e = EBADF;
	} else if (up->dfd >= 0) {
		r = up->dfd;
	} else if ((d = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		e = errno;
	} else {
		memset(&ev, 0, sizeof(ev));
		ev.events = EPOLLIN;
		ev.data.fd = up->sock;
		if (epoll_ctl(d, EPOLL_CTL_ADD, up->sock, &ev) < 0)
			e = errno;
		ev.data.fd = up->ufd;
		if (!e && epoll_ctl(d, EPOLL_CTL_ADD, up->ufd, &ev) < 0)
			e = errno;
		if (e) {
			close(d);
		} else {
			/* From now on the receive thread leaves the socket to
			 * the caller's umad_recv (and drains it before firing
			 * a send timer). */
			epoll_ctl(G.ep, EPOLL_CTL_DEL, up->sock, NULL);
			/* blocking, for direct_block: every other receive
			 * on it says MSG_DONTWAIT, every send too */
			int fl = fcntl(up->sock, F_GETFL);
			if (fl >= 0)
				fcntl(up->sock, F_SETFL, fl & ~O_NONBLOCK);
			up->dfd = r = d;
			DBG(1, "fd %d: direct mode, poll fd %d", fd, d);
		}
	}
	pthread_mutex_unlock(&G.lk);
	if (r < 0)
		errno = e;
	return r;
}

int umad_poll(int fd, int timeout_ms)
{
	int dfd;

	pthread_once(&once, init_once);
	dfd = direct_drain(fd);
	if (dfd >= 0)
		return direct_poll(fd, dfd, timeout_ms);
	return dev_poll(fd, timeout_ms);
}

/* Receives one datagram of direct-mode port fd; its first record (when it
 * fits cap) lands in buf. Returns the record's length, 0 when the datagram
 * gave none for the caller (dropped, consumed, or queued on fd instead),
 * -EAGAIN when the socket was empty, -EBADF when fd is no direct port;
 * with `clean`, -EALREADY (nothing received) unless fd is known empty
 * (qseq == qseen, no backlog). */
static ssize_t direct_take(int fd, void *buf, size_t cap, int clean)
{
	uint8_t pkt[RX_BUF];
	struct uport *up;
	ssize_t r, len;
	uint16_t sport;
	int src;

	pthread_mutex_lock(&G.lk);
	up = port_by_fd(fd);
	if (!up || up->dfd < 0) {
		pthread_mutex_unlock(&G.lk);
		return -EBADF;
	}
	if (clean && (up->qseq != up->qseen || up->backlog)) {
		pthread_mutex_unlock(&G.lk);
		return -EALREADY;
	}
	len = simf_recv(G.f, up->sock, pkt, sizeof(pkt), &src, &sport);
	if (len < 0) {
		pthread_mutex_unlock(&G.lk);
		return -EAGAIN;
	}
	if (len == 0) {
		pthread_mutex_unlock(&G.lk);
		return 0; /* direct_block's wake-up */
	}
	G.take.up = up;
	G.take.buf = buf;
	G.take.cap = cap;
	G.take.len = 0;
	rx_datagram(up, pkt, (size_t)len, src, sport, 1);
	r = (ssize_t)G.take.len;
	G.take.up = NULL;
	pthread_mutex_unlock(&G.lk);
	return r;
}

/*
 * umad_recv with a timeout on a direct-mode port whose fd is known empty
 * (qseq == qseen, no backlog): sleeps in a recvfrom on the UDP socket
 * itself, SO_RCVTIMEO as the timeout (set again only when it changes), and
 * hands the datagram's first record to the caller — sendto and a blocking
 * recvfrom per round trip, the UDP floor's two system calls.
 * A record queued on fd meanwhile (by the receive thread: a send's
 * timeout; or a datagram's second record) wakes it with an empty datagram
 * (deliver), and the ordered way (direct_recv's epoll_wait) takes over.
 * Returns 1 with *n the record's length, -EALREADY when fd may hold a
 * record (the caller's ordered way), or a negative errno.
 */
static int direct_block(int fd, void *buf, size_t cap, int timeout_ms, uint64_t end, ssize_t *n)
{
	uint8_t pkt[RX_BUF];

	for (;;) {
		struct uport *up;
		int sock, src, ms = 0, err;
		uint16_t sport;
		ssize_t len, r;

		if (timeout_ms > 0) {
			uint64_t t = now_ns();

			if (t >= end)
				return -ETIMEDOUT;
			ms = (int)((end - t + 999999) / 1000000);
		}
		pthread_mutex_lock(&G.lk);
		up = port_by_fd(fd);
		if (!up || up->dfd < 0) {
			pthread_mutex_unlock(&G.lk);
			return -EIO;
		}
		if (up->qseq != up->qseen || up->backlog) {
			pthread_mutex_unlock(&G.lk);
			return -EALREADY;
		}
		sock = up->sock;
		if (ms != up->rcvtimeo_ms) {
			struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

			if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
				pthread_mutex_unlock(&G.lk);
				return -EALREADY; /* no timeout to sleep with: the epoll way */
			}
			up->rcvtimeo_ms = ms;
		}
		up->blocked++;
		pthread_mutex_unlock(&G.lk);
		len = simf_recv_flags(G.f, sock, pkt, sizeof(pkt), &src, &sport, 0);
		err = errno;
		pthread_mutex_lock(&G.lk);
		up = port_by_fd(fd);
		if (!up || up->sock != sock) {
			pthread_mutex_unlock(&G.lk);
			return -EIO; /* closed meanwhile */
		}
		up->blocked--;
		if (len < 0) {
			pthread_mutex_unlock(&G.lk);
			if (err == EAGAIN || err == EWOULDBLOCK) {
				if (timeout_ms > 0)
					return -ETIMEDOUT;
				continue; /* no timeout: spurious */
			}
			if (err == EINTR)
				continue;
			return -EIO;
		}
		if (len == 0) {
			pthread_mutex_unlock(&G.lk);
			continue; /* the wake-up: a record waits on fd (checked above) */
		}
		G.take.up = up;
		G.take.buf = buf;
		G.take.cap = cap;
		G.take.len = 0;
		rx_datagram(up, pkt, (size_t)len, src, sport, 1);
		r = (ssize_t)G.take.len;
		G.take.up = NULL;
		pthread_mutex_unlock(&G.lk);
		if (r > 0) {
			*n = r;
			return 1;
		}
		/* nothing for us in it (dropped, or queued on fd): again */
	}
}

/*
 * umad_recv of a direct-mode port (the fabric's MAD path at the
 * UDP floor). One epoll_wait on the fd the caller polls tells which end is
 * ready: records already queued on fd (by the receive thread, or left by
 * an earlier datagram) come first, through the socketpair as always; else
 * one datagram is received and its first record handed straight to the
 * caller — a MAD that arrives while the caller waits costs epoll_wait +
 * recvfrom, as a UDP receive would. Whatever else a datagram produces still
 * queues on fd, which the epoll fd watches, so poll() never misses it.
 * With timeout 0 and fd known empty (no record queued on it since
 * umad_recv last found it so), the socket is read at once: one recvfrom
 * per MAD, and one (EAGAIN) to learn there is none — what a non-blocking
 * read of the kernel's umad fd costs.
 * Returns 1 with *n the record's length, 0 when fd has a record to read
 * the usual way, 2 when nothing waits (timeout 0, fd known empty), or a
 * negative errno.
 */
static int direct_recv(int fd, int dfd, void *umad, size_t cap, int timeout_ms, ssize_t *n)
{
	uint64_t end = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
	int ms = timeout_ms;

	while (timeout_ms == 0) {
		ssize_t r = direct_take(fd, umad, cap, 1);

		if (r > 0) {
			*n = r;
			return 1;
		}
		if (r == -EAGAIN)
			return 2;
		if (r == -EBADF)
			return -EIO;
		if (r == -EALREADY)
			break; /* records may wait on fd: the ordered way below */
		/* nothing for us in that datagram: the next one */
	}
	if (timeout_ms != 0) {
		int r = direct_block(fd, umad, cap, timeout_ms, end, n);

		if (r != -EALREADY)
			return r;
		if (timeout_ms > 0) {
			uint64_t t = now_ns();

			if (t >= end)
				return -ETIMEDOUT;
			ms = (int)((end - t + 999999) / 1000000);
		}
	}
	for (;;) {
		struct epoll_event ev[2];
		int k = epoll_wait(dfd, ev, 2, ms), sock_ready = 0;

		if (k < 0) {
			if (errno != EINTR)
				return -EIO;
			k = 0;
		}
		for (int i = 0; i < k; i++) {
			if (ev[i].data.fd == fd)
				return 0; /* queued records first */
			sock_ready = 1;
		}
		if (sock_ready) {
			ssize_t r = direct_take(fd, umad, cap, 0);

			if (r > 0) {
				*n = r;
				return 1;
			}
			if (r == -EBADF)
				return -EIO; /* closed meanwhile */
			continue; /* nothing for us in it: look again, timeout as left */
		}
		if (timeout_ms == 0)
			return -EAGAIN;
		if (timeout_ms > 0) {
			uint64_t t = now_ns();

			if (t >= end)
				return -ETIMEDOUT;
			ms = (int)((end - t + 999999) / 1000000);
		}
	}
}

/* qseq of direct-mode port fd (0 when fd is none). */
static uint64_t direct_qseq(int fd)
{
	struct uport *up;
	uint64_t q = 0;

	pthread_mutex_lock(&G.lk);
	up = port_by_fd(fd);
	if (up)
		q = up->qseq;
	pthread_mutex_unlock(&G.lk);
	return q;
}

/* fd was found empty after qseq `seq`: nothing more was queued since, fd
 * is known empty (the peek runs under fd's recv lock, so no other
 * umad_recv read in between). */
static void direct_qseen(int fd, uint64_t seq)
{
	struct uport *up;

	pthread_mutex_lock(&G.lk);
	up = port_by_fd(fd);
	if (up && up->qseq == seq)
		up->qseen = seq;
	pthread_mutex_unlock(&G.lk);
}

static int recv_once(int fd, void *umad, int *length, int timeout_ms)
{
	struct ib_user_mad *m = umad, peek;
	pthread_mutex_t *lk;
	uint64_t seq = 0;
	size_t cap;
	ssize_t n;
	int e;

	errno = 0;
	if (!umad || !length) {
		errno = EINVAL;
		return -EINVAL;
	}
	pthread_once(&once, init_once);
	cap = UHDR + (size_t)(*length > 0 ? *length : 0);
	e = direct_dfd(fd);
	if (e >= 0) {
		int r = direct_recv(fd, e, umad, cap, timeout_ms, &n);

		if (r == 1) {
			*length = (size_t)n > UHDR ? (int)((size_t)n - UHDR) : 0;
			return (int)m->agent_id;
		}
		if (r == 2) {
			errno = EAGAIN;
			return -EAGAIN;
		}
		if (r < 0 && r != -EAGAIN) {
			errno = -r;
			return r;
		}
		/* a record waits on fd (or, timeout 0, nothing: -EAGAIN below) */
	} else if (timeout_ms && (n = dev_poll(fd, timeout_ms)) < 0) {
		if (!errno)
			errno = (int)-n;
		return (int)n;
	}
	lk = &recv_lk[(unsigned)fd % RECV_LOCKS];
	pthread_mutex_lock(lk);
	if (e >= 0)
		seq = direct_qseq(fd);
	/* The record stays queued when the buffer is too small, as the
	 * kernel requeues it. */
	n = recv(fd, &peek, sizeof(peek), MSG_PEEK | MSG_TRUNC | MSG_DONTWAIT);
	if (n < 0 && e >= 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		direct_qseen(fd, seq); /* fd empty as of seq: the fast path again */
		errno = EAGAIN;
	}
	if (n >= 0 && (size_t)n > cap) {
		size_t madlen = (size_t)n - UHDR;

		pthread_mutex_unlock(lk);
		*length = (int)madlen;
		if (madlen > MAD_SIZE) {
			/* An RMPP message: the header tells the length. */
			memcpy(m, &peek, UHDR);
			errno = ENOSPC;
			return -ENOSPC;
		}
		errno = EINVAL;
		return -EINVAL;
	}
	if (n >= 0)
		n = recv(fd, umad, cap, MSG_DONTWAIT);
	e = errno;
	pthread_mutex_unlock(lk);
	if (n < 0) {
		errno = e ? e : EIO;
		return -errno;
	}
	*length = (size_t)n > UHDR ? (int)((size_t)n - UHDR) : 0;
	return (int)m->agent_id;
}

/* With a timeout, a record that another thread's umad_recv took first
 * (both woke for it) does not end the wait with -EAGAIN: the kernel's
 * blocking read would sleep again until the deadline, so does this. */
int umad_recv(int fd, void *umad, int *length, int timeout_ms)
{
	uint64_t end = timeout_ms > 0 ? now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
	int len0 = length ? *length : 0;

	for (;;) {
		int r = recv_once(fd, umad, length, timeout_ms);

		if (r != -EAGAIN || timeout_ms == 0)
			return r;
		if (timeout_ms > 0) {
			uint64_t t = now_ns();

			if (t >= end) {
				errno = ETIMEDOUT;
				return -ETIMEDOUT;
			}
			timeout_ms = (int)((end - t + 999999) / 1000000);
		}
		*length = len0;
	}
}
