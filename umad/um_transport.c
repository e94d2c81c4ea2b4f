/*
 * um_transport.c - MADs over libibumad (see um_transport.h).
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "umad/um_capture.h"
#include "umad/um_transport.h"

#define CM_CLASS 0x07
#define CM_VERSION 2
#define SA_CLASS 0x03
#define SA_VERSION 2
#define METHOD_SEND 0x03
#define RX_INITIAL (CMP_MAD_SIZE * 32) /* room for small RMPP answers */

struct um_port {
	int portid;                  /* libibumad's handle (the fd on Linux) */
	int pollfd;                  /* what to poll: umad_get_fd(portid) */
	int agent[UM_AGENT_COUNT];   /* -1: not registered */
	struct um_port_info info;
	void *txbuf;                 /* hdr_room() + 256 */
	void *rxbuf;
	size_t rxcap;                /* MAD bytes rxbuf holds */
	uint8_t *gids;               /* for USCM_PCAP: GID and P_Key tables */
	int ngids;
	uint16_t *pkeys;
	int npkeys;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc;

static void do_init(void)
{
	init_rc = umad_init();
}

static void set_err(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!err || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
}

static int read_info(const char *ca_name, int port_num, struct um_port_info *info)
{
	umad_port_t up;
	int rc;

	memset(&up, 0, sizeof(up));
	rc = umad_get_port(ca_name, port_num, &up);
	if (rc < 0) {
		errno = rc == -1 ? ENODEV : -rc;
		return -1;
	}
	memset(info, 0, sizeof(*info));
	snprintf(info->ca_name, sizeof(info->ca_name), "%s", up.ca_name[0] ? up.ca_name : ca_name);
	info->port_num = up.portnum ? up.portnum : port_num;
	info->lid = (uint16_t)up.base_lid;
	info->lmc = (uint8_t)up.lmc;
	info->sm_lid = (uint16_t)up.sm_lid;
	info->sm_sl = (uint8_t)up.sm_sl;
	info->state = up.state;
	info->roce = strcmp(up.link_layer, "Ethernet") == 0;
	info->gid_prefix = be64toh(up.gid_prefix);
	info->port_guid = be64toh(up.port_guid);
	umad_release_port(&up);
	return 0;
}

/* The room a umad buffer keeps before its MAD, the larger of umad_size()
 * and the header's struct ib_user_mad: Debian 12's libibumad answers
 * umad_size() 56 while its header's struct is 64 bytes, and a buffer of
 * umad_size() + 256 was overrun at its end (ASan: the MAD's memcpy in
 * send_common, Debian's cmtime over rxe in process; the plain build's
 * heap aborted in free, 5 runs in 16; with this room 12 in 12 passed). */
static size_t hdr_room(void)
{
	return umad_size() > sizeof(struct ib_user_mad) ? umad_size() : sizeof(struct ib_user_mad);
}

int um_port_open(const char *ca_name, int port_num, unsigned agents, struct um_port **out,
		 char *err, size_t errlen)
{
	struct um_port *p;
	long cm_methods[16 / sizeof(long)];
	int e;

	if (!ca_name || !out) {
		errno = EINVAL;
		return -1;
	}
	pthread_once(&init_once, do_init);
	if (init_rc < 0) {
		set_err(err, errlen, "libibumad: umad_init failed (is ib_umad loaded?)");
		errno = ENODEV;
		return -1;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	for (int i = 0; i < UM_AGENT_COUNT; i++)
		p->agent[i] = -1;
	p->txbuf = calloc(1, hdr_room() + CMP_MAD_SIZE);
	p->rxcap = RX_INITIAL;
	p->rxbuf = calloc(1, hdr_room() + p->rxcap);
	if (!p->txbuf || !p->rxbuf) {
		e = ENOMEM;
		goto fail;
	}
	if (read_info(ca_name, port_num, &p->info) < 0) {
		e = errno;
		set_err(err, errlen, "libibumad: no port %s:%d (%s)", ca_name, port_num, strerror(e));
		goto fail;
	}
	um_capture_init(p->info.roce);
	errno = 0;
	p->portid = umad_open_port(ca_name, port_num);
	if (p->portid < 0) {
		/* libibumad returns -EIO when open(/dev/infiniband/umadN) fails and
		 * leaves the cause in errno: say it, and what to do about it */
		int oe = errno;

		e = oe == EACCES || oe == EPERM ? oe : -p->portid > 0 ? -p->portid : ENODEV;
		if (e == EACCES || e == EPERM)
			set_err(err, errlen,
				"libibumad: cannot open %s:%d: %s: the umad devices are root-only;"
				" run the CM as a host service (uscmd, docs/operators.md) or as root",
				ca_name, port_num, strerror(e));
		else
			set_err(err, errlen, "libibumad: cannot open %s:%d (%s)", ca_name, port_num,
				strerror(e));
		p->portid = -1;
		goto fail;
	}
	p->pollfd = umad_get_fd(p->portid);
	if (agents & UM_OPEN_CM) {
		memset(cm_methods, 0, sizeof(cm_methods));
		cm_methods[METHOD_SEND / (8 * sizeof(long))] |= 1L << (METHOD_SEND % (8 * sizeof(long)));
		errno = 0;
		p->agent[UM_AGENT_CM] = umad_register(p->portid, CM_CLASS, CM_VERSION, 0, cm_methods);
		if (p->agent[UM_AGENT_CM] < 0) {
			/* The kernel refuses a second server of (class, version,
			 * method) on a port: ib_cm has it when the rdma_cm kernel
			 * modules are loaded, or another uscm process does. */
			set_err(err, errlen,
				"cannot own the CM class (0x07) on %s port %d (umad_register: %s): "
				"the kernel's ib_cm (loaded with rdma_cm / ib_ucm) or another process "
				"already serves it; one process owns a port's CM agent (uscmd shares"
				" it between processes: docs/operators.md)",
				ca_name, port_num, strerror(errno ? errno : EBUSY));
			p->agent[UM_AGENT_CM] = -1;
			e = EBUSY;
			goto fail;
		}
	}
	if (agents & UM_OPEN_SA) {
		errno = 0;
		p->agent[UM_AGENT_SA] = umad_register(p->portid, SA_CLASS, SA_VERSION, 1, NULL);
		if (p->agent[UM_AGENT_SA] < 0) {
			e = errno ? errno : EIO;
			set_err(err, errlen, "cannot register an SA client on %s port %d: %s", ca_name,
				port_num, strerror(e));
			p->agent[UM_AGENT_SA] = -1;
			goto fail;
		}
	}
	*out = p;
	return 0;
fail:
	um_port_close(p);
	errno = e;
	return -1;
}

void um_port_close(struct um_port *p)
{
	if (!p)
		return;
	if (p->portid >= 0) {
		for (int i = 0; i < UM_AGENT_COUNT; i++)
			if (p->agent[i] >= 0)
				umad_unregister(p->portid, p->agent[i]);
		umad_close_port(p->portid);
	}
	free(p->txbuf);
	free(p->rxbuf);
	free(p->gids);
	free(p->pkeys);
	free(p);
}

int um_port_set_tables(struct um_port *p, const uint8_t *gids, int ngids, const uint16_t *pkeys,
		       int npkeys)
{
	uint8_t *g = NULL;
	uint16_t *k = NULL;

	if (ngids > 0 && !(g = malloc((size_t)ngids * 16)))
		return -1;
	if (npkeys > 0 && !(k = malloc((size_t)npkeys * sizeof(*k)))) {
		free(g);
		return -1;
	}
	if (g)
		memcpy(g, gids, (size_t)ngids * 16);
	if (k)
		memcpy(k, pkeys, (size_t)npkeys * sizeof(*k));
	free(p->gids);
	free(p->pkeys);
	p->gids = g;
	p->ngids = g ? ngids : 0;
	p->pkeys = k;
	p->npkeys = k ? npkeys : 0;
	return 0;
}

/* Our end of the port for um_capture. */
static void capture_local(const struct um_port *p, struct um_capture_local *l)
{
	l->lid = p->info.lid;
	l->roce = p->info.roce;
	l->gids = p->gids;
	l->ngids = p->ngids;
	l->pkeys = p->pkeys;
	l->npkeys = p->npkeys;
	l->gid_prefix = p->info.gid_prefix;
	l->port_guid = p->info.port_guid;
}

int um_port_fd(const struct um_port *p)
{
	return p->pollfd;
}

const struct um_port_info *um_port_info(const struct um_port *p)
{
	return &p->info;
}

int um_port_refresh(struct um_port *p)
{
	struct um_port_info info;

	if (read_info(p->info.ca_name, p->info.port_num, &info) < 0)
		return -1;
	p->info = info;
	return 0;
}

struct send_args {
	struct um_port *p;
	int agent, timeout_ms, retries;
};

static int send_txbuf(void *arg)
{
	const struct send_args *a = arg;
	int rc;

	errno = 0;
	rc = umad_send(a->p->portid, a->agent, a->p->txbuf, CMP_MAD_SIZE, a->timeout_ms,
		       a->retries);
	if (rc < 0) {
		if (!errno)
			errno = -rc;
		return -1;
	}
	return 0;
}

/* Sends the MAD in txbuf (addressed by the caller) and, with USCM_PCAP,
 * records it as sent to dst. */
static int send_common(struct um_port *p, int agent, const struct cmp_addr *dst,
		       const uint8_t *mad, int timeout_ms, int retries)
{
	struct send_args a = { p, agent, timeout_ms, retries };
	struct um_capture_local l;

	memcpy(umad_get_mad(p->txbuf), mad, CMP_MAD_SIZE);
	if (!um_capture_active())
		return send_txbuf(&a);
	capture_local(p, &l);
	return um_capture_tx_send(&l, dst, mad, send_txbuf, &a);
}

int um_port_send_cm(struct um_port *p, const struct cmp_addr *dst, const uint8_t mad[CMP_MAD_SIZE])
{
	struct ib_user_mad *um = p->txbuf;
	ib_mad_addr_t grh;

	if (p->agent[UM_AGENT_CM] < 0) {
		errno = ENOTCONN;
		return -1;
	}
	memset(um, 0, umad_size());
	umad_set_addr(p->txbuf, dst->lid, dst->qpn ? (int)dst->qpn : 1, dst->sl,
		      (int)(dst->qkey ? dst->qkey : UM_QKEY_GSI));
	if (dst->grh || p->info.roce) {
		memset(&grh, 0, sizeof(grh));
		memcpy(grh.gid, dst->gid, 16);
		grh.flow_label = dst->flow_label; /* host order: umad_set_grh converts */
		grh.hop_limit = dst->hop_limit ? dst->hop_limit : (p->info.roce ? 64 : 0xFF);
		grh.traffic_class = dst->tclass;
		umad_set_grh(p->txbuf, &grh);
		/* umad_set_grh leaves the source GID index alone. */
		um->addr.gid_index = dst->sgid_index;
	} else {
		umad_set_grh(p->txbuf, NULL);
	}
	umad_set_pkey(p->txbuf, dst->pkey_index);
	return send_common(p, p->agent[UM_AGENT_CM], dst, mad, 0, 0);
}

/* The P_Key index SA queries go out with, as the kernel's ib_sa picks it
 * for the SM's address: the default partition's full key 0xFFFF, else its
 * limited key 0x7FFF (the SM is a full member of the default partition,
 * so both reach it), else index 0. Not index 0 blindly: with OpenSM's
 * `indx0` a port's entry 0 may be a partition the SM's port is not in. */
static int sa_pkey_index(const struct um_port *p)
{
	for (int want = 0; want < 2; want++)
		for (int i = 0; i < p->npkeys; i++)
			if (p->pkeys[i] == (want ? 0x7FFF : 0xFFFF))
				return i;
	return 0;
}

int um_port_send_sa(struct um_port *p, const uint8_t mad[CMP_MAD_SIZE], int timeout_ms,
		    int retries)
{
	const struct cmp_addr sm = { .lid = p->info.sm_lid, .sl = p->info.sm_sl, .qpn = 1,
				     .qkey = UM_QKEY_GSI };

	if (p->agent[UM_AGENT_SA] < 0 || p->info.roce) {
		errno = ENOTCONN;
		return -1;
	}
	if (!p->info.sm_lid) {
		errno = EHOSTUNREACH; /* no SM has configured the port yet */
		return -1;
	}
	memset(p->txbuf, 0, umad_size());
	umad_set_addr(p->txbuf, sm.lid, (int)sm.qpn, sm.sl, (int)sm.qkey);
	umad_set_grh(p->txbuf, NULL);
	umad_set_pkey(p->txbuf, sa_pkey_index(p));
	return send_common(p, p->agent[UM_AGENT_SA], &sm, mad, timeout_ms, retries);
}

void um_addr_from_umad(struct cmp_addr *a, const ib_mad_addr_t *m)
{
	memset(a, 0, sizeof(*a));
	a->lid = be16toh(m->lid);
	a->sl = m->sl;
	a->grh = m->grh_present;
	if (m->grh_present) {
		memcpy(a->gid, m->gid, 16);
		a->sgid_index = m->gid_index;
		a->hop_limit = m->hop_limit;
		a->tclass = m->traffic_class;
		a->flow_label = be32toh(m->flow_label);
	}
	a->pkey_index = m->pkey_index;
	a->qpn = be32toh(m->qpn) & 0xFFFFFF;
	a->qkey = be32toh(m->qkey);
}

int um_port_recv(struct um_port *p, struct um_rx *rx)
{
	int len, agent;

	/* No poll first: libibumad opens the umad device O_NONBLOCK, so
	 * umad_recv with timeout 0 says -EAGAIN when nothing waits (the sim's
	 * drop-in as well) — a system call per MAD saved. */
	for (;;) {
		len = (int)p->rxcap;
		errno = 0;
		agent = umad_recv(p->portid, p->rxbuf, &len, 0);
		if (agent == -ENOSPC || (agent < 0 && errno == ENOSPC)) {
			/* An RMPP answer larger than the buffer: len is what it
			 * needs; the record stays queued. */
			size_t need = len > 0 ? (size_t)len : p->rxcap * 2;
			void *nb = realloc(p->rxbuf, hdr_room() + need);
			if (!nb)
				return -1;
			p->rxbuf = nb;
			p->rxcap = need;
			continue;
		}
		if (agent < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ETIMEDOUT ||
			    agent == -EAGAIN || agent == -ETIMEDOUT)
				return 0;
			if (!errno)
				errno = -agent;
			return -1;
		}
		if (agent == p->agent[UM_AGENT_CM])
			rx->agent = UM_AGENT_CM;
		else if (agent == p->agent[UM_AGENT_SA])
			rx->agent = UM_AGENT_SA;
		else
			continue; /* not ours: ignore */
		rx->status = umad_status(p->rxbuf);
		um_addr_from_umad(&rx->src, umad_get_mad_addr(p->rxbuf));
		rx->mad = umad_get_mad(p->rxbuf);
		rx->len = len > 0 ? (size_t)len : 0;
		/* A timeout record carries (at least) the MAD header. */
		if (rx->len < CMP_MAD_HDR_SIZE)
			continue;
		if (!rx->status && rx->len >= CMP_MAD_SIZE && um_capture_active()) {
			struct um_capture_local l;

			capture_local(p, &l);
			um_capture_rx(&l, &rx->src, rx->mad);
		}
		return 1;
	}
}
