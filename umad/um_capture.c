/*
 * um_capture.c - USCM_PCAP (see um_capture.h).
 */
#define _GNU_SOURCE /* secure_getenv */
#include <endian.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/umad.h>

#include "umad/um_capture.h"
#include "umad/um_pcap.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct um_pcap_writer *writer; /* NULL: not capturing */
static int linktype;
static int roce_hint;
static int warned_ib_in_eth;

/* 1 when every port libibumad lists is RoCE; -1 when it lists none. */
static int all_ports_roce(void)
{
	char cas[UMAD_MAX_DEVICES][UMAD_CA_NAME_LEN];
	int n = umad_get_cas_names(cas, UMAD_MAX_DEVICES), seen = 0, ib = 0;

	for (int i = 0; i < n; i++) {
		umad_ca_t ca;

		memset(&ca, 0, sizeof(ca));
		if (umad_get_ca(cas[i], &ca) < 0)
			continue;
		for (int k = 0; k < UMAD_CA_MAX_PORTS; k++) {
			if (!ca.ports[k])
				continue;
			seen = 1;
			if (strcmp(ca.ports[k]->link_layer, "Ethernet"))
				ib = 1;
		}
		umad_release_ca(&ca);
	}
	return seen ? !ib : -1;
}

int um_capture_expand(const char *pattern, char *out, size_t len)
{
	size_t n = 0;

	for (const char *p = pattern; *p; p++) {
		char buf[256] = { p[0], 0 };
		size_t k;

		if (p[0] == '%' && p[1] == 'p') {
			snprintf(buf, sizeof(buf), "%ld", (long)getpid());
			p++;
		} else if (p[0] == '%' && p[1] == 'h') {
			if (gethostname(buf, sizeof(buf) - 1) < 0)
				snprintf(buf, sizeof(buf), "localhost");
			buf[sizeof(buf) - 1] = 0;
			p++;
		} else if (p[0] == '%' && p[1] == '%') {
			p++; /* buf is "%" */
		}
		k = strlen(buf);
		if (n + k >= len) {
			errno = ENAMETOOLONG;
			return -1;
		}
		memcpy(out + n, buf, k);
		n += k;
	}
	if (!len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	out[n] = 0;
	return 0;
}

static void do_init(void)
{
	const char *pattern = secure_getenv("USCM_PCAP"); /* not from a setuid program's user */
	struct um_pcap_writer *w;
	char path[PATH_MAX];
	int r;

	if (!pattern || !*pattern)
		return;
	if (um_capture_expand(pattern, path, sizeof(path)) < 0) {
		fprintf(stderr, "uscm: USCM_PCAP: %s is too long once expanded; not capturing\n",
			pattern);
		return;
	}
	r = all_ports_roce();
	if (r < 0) {
		pthread_mutex_lock(&lock);
		r = roce_hint;
		pthread_mutex_unlock(&lock);
	}
	linktype = r ? UM_PCAP_LINKTYPE_ETHERNET : UM_PCAP_LINKTYPE_ERF;
	w = um_pcap_open_write(path, linktype);
	__atomic_store_n(&writer, w, __ATOMIC_RELEASE);
	if (!w && errno == EBUSY)
		/* the variable was exported to several processes: the first
		 * keeps its file whole */
		fprintf(stderr, "uscm: USCM_PCAP: %s is being written by another process; not "
				"capturing (a file per process: %%p in the name)\n", path);
	else if (!w)
		fprintf(stderr, "uscm: USCM_PCAP: cannot create %s (%s); not capturing\n", path,
			strerror(errno));
}

int um_capture_init(int roce)
{
	pthread_mutex_lock(&lock);
	roce_hint = roce;
	pthread_mutex_unlock(&lock);
	pthread_once(&once, do_init);
	return um_capture_active();
}

int um_capture_active(void)
{
	return __atomic_load_n(&writer, __ATOMIC_ACQUIRE) != NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Our GID at index idx: the table, else GID 0 = subnet prefix : port GUID. */
static void local_gid(const struct um_capture_local *l, unsigned idx, uint8_t gid[16])
{
	uint64_t v;

	if (l->gids && (int)idx < l->ngids) {
		memcpy(gid, l->gids + 16 * idx, 16);
		return;
	}
	v = htobe64(l->gid_prefix);
	memcpy(gid, &v, 8);
	v = htobe64(l->port_guid);
	memcpy(gid + 8, &v, 8);
}

static uint16_t pkey_of(const struct um_capture_local *l, unsigned idx)
{
	if (l->pkeys && (int)idx < l->npkeys && l->pkeys[idx])
		return l->pkeys[idx];
	return 0xFFFF;
}

/* Called with lock held. */
static void emit_locked(struct um_frame_meta *m, const uint8_t *mad)
{
	if (writer) {
		if (m->link == UM_LINK_IB && linktype == UM_PCAP_LINKTYPE_ETHERNET) {
			/* Only if libibumad listed no IB port when the file was
			 * made and one appeared since: say so once. */
			if (!warned_ib_in_eth++)
				fprintf(stderr, "uscm: USCM_PCAP: an InfiniBand port appeared after "
						"the RoCE-only capture file was created; its MADs are "
						"not recorded\n");
		} else {
			m->ts_ns = now_ns();
			(void)um_pcap_write_mad(writer, m, mad);
		}
	}
}

static void emit(struct um_frame_meta *m, const uint8_t *mad)
{
	pthread_mutex_lock(&lock);
	emit_locked(m, mad);
	pthread_mutex_unlock(&lock);
}

/* Frame fields common to both directions; `peer` is the remote address. */
static void meta_common(struct um_frame_meta *m, const struct um_capture_local *l,
			const struct cmp_addr *peer)
{
	memset(m, 0, sizeof(*m));
	m->link = l->roce ? UM_LINK_ROCEV2 : UM_LINK_IB;
	m->sl = peer->sl;
	m->vl = 0;
	m->has_grh = l->roce || peer->grh;
	m->tclass = peer->tclass;
	m->flow_label = peer->flow_label;
	m->hop_limit = peer->hop_limit ? peer->hop_limit : (l->roce ? 64 : 0xFF);
	m->pkey = pkey_of(l, peer->pkey_index);
	m->qkey = peer->qkey ? peer->qkey : UM_QP1_QKEY;
}

int um_capture_tx_send(const struct um_capture_local *l, const struct cmp_addr *dst,
		       const uint8_t *mad, int (*send)(void *arg), void *arg)
{
	struct um_frame_meta m;
	int rc;

	if (!um_capture_active())
		return send(arg);
	meta_common(&m, l, dst);
	m.slid = l->lid;
	m.dlid = dst->lid;
	if (m.has_grh) {
		local_gid(l, dst->sgid_index, m.sgid);
		memcpy(m.dgid, dst->gid, 16);
	}
	m.src_qp = 1;
	m.dest_qp = dst->qpn ? dst->qpn : 1;
	/* The send and its record under the writer's lock: an answer to this
	 * MAD, received by another thread, can then only be recorded after
	 * it (the file never shows an RTU before the REP it answers). */
	pthread_mutex_lock(&lock);
	rc = send(arg);
	if (!rc)
		emit_locked(&m, mad);
	pthread_mutex_unlock(&lock);
	return rc;
}

void um_capture_rx(const struct um_capture_local *l, const struct cmp_addr *src,
		   const uint8_t *mad)
{
	struct um_frame_meta m;

	if (!um_capture_active())
		return;
	meta_common(&m, l, src);
	m.slid = src->lid;
	m.dlid = l->lid;
	if (m.has_grh) {
		memcpy(m.sgid, src->gid, 16);
		local_gid(l, src->sgid_index, m.dgid);
	}
	m.src_qp = src->qpn;
	m.dest_qp = 1;
	emit(&m, mad);
}
