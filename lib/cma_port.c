/*
 * cma_port.c - a port's attributes and GID / P_Key tables, read from the
 * device without g.lock, and what a change of them means.
 *
 * ibv_query_port / ibv_query_gid / ibv_query_pkey are system calls (ioctls
 * or sysfs reads, one per table entry), so cma_port_refresh drops the lock
 * while it asks and installs the answer once the lock is back (a caller
 * must not keep pointers into the port's tables across it).
 *
 * A new LID, SM LID, LMC or port state makes the port's cached paths wrong
 * (their SLID, or the SA that gave them): the path cache of the port is
 * flushed, so the next rdma_resolve_route asks the SA again, and the umad
 * port re-reads its LID and SM LID (cma_tx_port_info) before the next SA
 * query leaves. rdma_resolve_route re-reads the attributes every time (one
 * ibv_query_port); the tables are re-read when a lookup misses (an address
 * or GID that may be new).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cma_int.h"

#define MAX_GIDS 256
#define MAX_PKEYS 128

struct port_snap {
	struct ibv_port_attr attr;
	union ibv_gid *gids;        /* NULL: tables not read */
	int ngids;
	unsigned *gid_types, *gid_ndevs;
	uint16_t *pkeys;
	int npkeys;
};

/* The device's answers (no lock: nothing of the library is touched). */
static int port_query(struct ibv_context *v, uint8_t port_num, int tables, struct port_snap *s)
{
	memset(s, 0, sizeof(*s));
	if (ibv_query_port(v, port_num, &s->attr))
		return -1;
	if (!tables)
		return 0;
	s->ngids = s->attr.gid_tbl_len > 0 ? s->attr.gid_tbl_len : 1;
	if (s->ngids > MAX_GIDS)
		s->ngids = MAX_GIDS;
	s->npkeys = s->attr.pkey_tbl_len > 0 ? s->attr.pkey_tbl_len : 1;
	if (s->npkeys > MAX_PKEYS)
		s->npkeys = MAX_PKEYS;
	s->gids = calloc((size_t)s->ngids, sizeof(*s->gids));
	s->pkeys = calloc((size_t)s->npkeys, sizeof(*s->pkeys));
	if (!s->gids || !s->pkeys) {
		free(s->gids);
		free(s->pkeys);
		s->gids = NULL;
		s->pkeys = NULL;
		return 0; /* the attributes alone */
	}
	for (int i = 0; i < s->ngids; i++)
		if (ibv_query_gid(v, port_num, i, &s->gids[i]))
			memset(&s->gids[i], 0, sizeof(s->gids[i]));
	/* The entries' types and netdevs (RoCE source GID selection): one
	 * ibv_query_gid_table for every port of the device; a libibverbs
	 * without it leaves them unknown (0). */
	s->gid_types = calloc((size_t)s->ngids, sizeof(unsigned));
	s->gid_ndevs = calloc((size_t)s->ngids, sizeof(unsigned));
	if (s->gid_types && s->gid_ndevs) {
		struct ibv_device_attr da;
		size_t max = MAX_GIDS;
		struct ibv_gid_entry *t;

		if (!ibv_query_device(v, &da) && da.phys_port_cnt > 0)
			max = (size_t)MAX_GIDS * da.phys_port_cnt;
		t = calloc(max, sizeof(*t));
		ssize_t n = t ? ibv_query_gid_table(v, t, max, 0) : -1;
		for (ssize_t i = 0; i < n; i++)
			if (t[i].port_num == port_num && t[i].gid_index < (uint32_t)s->ngids) {
				s->gid_types[t[i].gid_index] = t[i].gid_type;
				s->gid_ndevs[t[i].gid_index] = t[i].ndev_ifindex;
			}
		free(t);
	}
	for (int i = 0; i < s->npkeys; i++) {
		__be16 k;

		if (ibv_query_pkey(v, port_num, i, &k))
			k = i ? 0 : htobe16(0xFFFF);
		s->pkeys[i] = be16toh(k);
	}
	return 0;
}

/* g.lock held: the answers become the port's. */
static void port_install(struct cma_port *p, struct port_snap *s)
{
	const struct ibv_port_attr *o = &p->attr, *n = &s->attr;
	int changed = p->attr_read && (o->lid != n->lid || o->sm_lid != n->sm_lid ||
				       o->lmc != n->lmc || o->state != n->state);

	p->attr = *n;
	p->attr_read = 1;
	p->roce = n->link_layer == IBV_LINK_LAYER_ETHERNET;
	if (s->gids) {
		free(p->gids);
		free(p->pkeys);
		free(p->gid_types);
		free(p->gid_ndevs);
		p->gids = s->gids;
		p->ngids = s->ngids;
		p->gid_types = s->gid_types;
		p->gid_ndevs = s->gid_ndevs;
		s->gid_types = NULL;
		s->gid_ndevs = NULL;
		p->pkeys = s->pkeys;
		p->npkeys = s->npkeys;
		s->gids = NULL;
		s->pkeys = NULL;
		cma_tx_tables(p); /* USCM_PCAP frames MADs with them */
	}
	if (changed) {
		cma_path_cache_flush_port(p);
		cma_tx_port_info(p);
	}
}

void cma_port_init_locked(struct cma_port *p)
{
	struct port_snap s;

	/* at the first rdma_* call (cma_init_locked): nobody can wait for the
	 * lock on anything else yet */
	if (port_query(p->dev->verbs, p->port_num, 1, &s) == 0)
		port_install(p, &s);
}

void cma_port_refresh(struct cma_port *p, int tables)
{
	struct port_snap s;
	int rc;

	pthread_mutex_unlock(&g.lock);
	rc = port_query(p->dev->verbs, p->port_num, tables, &s);
	pthread_mutex_lock(&g.lock);
	if (rc == 0)
		port_install(p, &s);
	free(s.gids);
	free(s.pkeys);
	free(s.gid_types);
	free(s.gid_ndevs);
}
