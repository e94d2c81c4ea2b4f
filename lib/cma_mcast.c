/*
 * cma_mcast.c - rdma_join_multicast / rdma_join_multicast_ex /
 * rdma_leave_multicast.
 *
 * InfiniBand: the MGID comes from the IP multicast address as IPoIB maps
 * it (ff1<scope>:401b:<P_Key>::<28 low bits of the IPv4 address>, or
 * ff1<scope>:601b:<P_Key>:<IPv6 bytes 6..15>) with the "RDMA CM signature"
 * 0x01 in byte 3 for RDMA_PS_UDP, as the kernel's cma_set_mgid; the
 * unspecified address lets the SA assign one. The port joins through an SA
 * MCMemberRecord SubnAdmSet (um_sa_client) and leaves with a SubnAdmDelete
 * once no join of the process needs the JoinState any more (one group per
 * port and MGID, shared by the ids, one request in flight at a time, as the
 * kernel's ib_multicast module does). MULTICAST_JOIN carries param.ud: the
 * group's address vector (MLID, GRH to the MGID), QPN 0xFFFFFF and its
 * Q_Key; the id's QP is attached (ibv_attach_mcast) unless the join is
 * send-only, as librdmacm does. A failed join is MULTICAST_ERROR with
 * -EINVAL (the SA refused) or -ETIMEDOUT (no answer).
 *
 * RoCE: no SA; the MGID is the address as a RoCE v2 GID (::ffff:a.b.c.d)
 * and MULTICAST_JOIN follows at once. A full member's IPv4 group is also
 * joined on the netdev of the id's source GID, as the kernel's rdma_cm
 * does (cma_mc_ip_hold): without it the host's IP layer drops the group's
 * RoCE v2 datagrams before they reach the RoCE device.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"

#define MC_QPN 0xFFFFFF
#define MC_SCOPE_LINK_LOCAL 0x2

/* JoinState bits (IBTA 15.2.5.17). */
#define JOIN_FULL 0x1
#define JOIN_SENDONLY_FULL 0x8

int cma_addr_is_mc(const struct sockaddr *a)
{
	switch (a->sa_family) {
	case AF_INET:
		return IN_MULTICAST(ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr));
	case AF_INET6:
		return IN6_IS_ADDR_MULTICAST(&((const struct sockaddr_in6 *)a)->sin6_addr);
	case AF_IB:
		return ((const struct sockaddr_ib *)a)->sib_addr.sib_raw[0] == 0xFF;
	default:
		return 0;
	}
}

static uint16_t id_pkey(const struct cma_id *id)
{
	uint16_t k = be16toh(id->id.route.addr.addr.ibaddr.pkey);

	return k ? k : 0xFFFF;
}

int cma_mc_mgid(const struct cma_id *id, struct cma_port *p, const struct sockaddr *a,
		uint8_t mgid[16])
{
	memset(mgid, 0, 16);
	if (a->sa_family == AF_IB) {
		memcpy(mgid, &((const struct sockaddr_ib *)a)->sib_addr, 16);
		return 0;
	}
	if (a->sa_family != AF_INET && a->sa_family != AF_INET6)
		return cma_fail(EAFNOSUPPORT);
	if (cma_addr_any(a))
		return 0; /* IB: the SA assigns one */
	if (p->roce) {
		if (a->sa_family == AF_INET6) {
			memcpy(mgid, &((const struct sockaddr_in6 *)a)->sin6_addr, 16);
		} else {
			mgid[10] = mgid[11] = 0xFF;
			memcpy(mgid + 12, &((const struct sockaddr_in *)a)->sin_addr, 4);
		}
		return 0;
	}
	if (a->sa_family == AF_INET6) {
		const uint8_t *v6 = ((const struct sockaddr_in6 *)a)->sin6_addr.s6_addr;

		/* An SA-assigned MGID given as an IPv6 address: used as is. */
		if (v6[0] == 0xFF && (v6[1] & 0xF0) == 0x10 && v6[2] == 0xA0 && v6[3] == 0x1B) {
			memcpy(mgid, v6, 16);
			return 0;
		}
		mgid[2] = 0x60; /* IPv6 signature */
		memcpy(mgid + 6, v6 + 6, 10);
	} else {
		uint32_t v4 = ntohl(((const struct sockaddr_in *)a)->sin_addr.s_addr);

		mgid[2] = 0x40; /* IPv4 signature */
		mgid[12] = (uint8_t)((v4 >> 24) & 0x0F);
		mgid[13] = (uint8_t)(v4 >> 16);
		mgid[14] = (uint8_t)(v4 >> 8);
		mgid[15] = (uint8_t)v4;
	}
	mgid[0] = 0xFF;
	mgid[1] = 0x10 | MC_SCOPE_LINK_LOCAL;
	mgid[3] = 0x1B;
	if (id->id.ps == RDMA_PS_UDP)
		mgid[3] = 0x01; /* the RDMA CM signature */
	mgid[4] = (uint8_t)((id_pkey(id) | 0x8000) >> 8);
	mgid[5] = (uint8_t)id_pkey(id);
	return 0;
}

/* ---- events ------------------------------------------------------------------------ */

static void mc_free(struct cma_mc *m)
{
	cma_mc_ip_drop(&m->ipfd); /* the IP group goes with the membership */
	free(m->ev); /* its event, if never needed */
	free(m);
}

/* The join's event (not queued yet). */
static struct cma_event *mc_event(struct cma_mc *m, enum rdma_cm_event_type t, int status,
				   const struct ibv_ah_attr *ah, uint32_t qkey)
{
	/* The join reserved it (one event per join: JOIN or ERROR). */
	struct cma_event *e = cma_event_use(&m->ev, m->id, t, status);

	if (!e)
		return NULL;
	e->mc = m;
	if (ah) {
		e->ev.param.ud.ah_attr = *ah;
		e->ev.param.ud.qp_num = MC_QPN;
		e->ev.param.ud.qkey = qkey;
	}
	/* librdmacm hands the join's context back here. */
	e->ev.param.ud.private_data = m->context;
	e->ev.param.ud.private_data_len = 0;
	return e;
}

/* An event the join took and does not send goes back to it: its
 * reservation, for the event that comes instead (or mc_free). */
static void mc_event_back(struct cma_mc *m, struct cma_event *e)
{
	if (!m->ev)
		m->ev = e;
	else
		free(e);
}

static void mc_failed(struct cma_mc *m, int status)
{
	m->state = MC_FAILED;
	cma_event_queue(mc_event(m, RDMA_CM_EVENT_MULTICAST_ERROR, status, NULL, 0));
}

static void grp_settle(struct cma_mcg *grp);

/* The QP's attach (a job: g.lock was dropped for it) is done: MULTICAST_JOIN,
 * or the join failed. Unless the join was left meanwhile (leave, destroy:
 * they waited for this; no event then, and the QP stays attached until
 * rdma_leave_multicast detaches it or the QP goes). */
static void mc_attached(struct cma_qpj *j)
{
	struct cma_mc *m = j->mc;
	struct cma_event *e = j->ev;

	j->ev = NULL;
	m->jobs--;
	m->attached = !j->err && !j->no_qp;
	if (m->leaving || m->id->destroying) {
		mc_event_back(m, e);
		return;
	}
	if (j->err) {
		mc_event_back(m, e);
		mc_failed(m, -j->err);
	} else {
		m->state = MC_JOINED;
		cma_event_queue(e);
	}
	if (m->grp)
		grp_settle(m->grp); /* a failed member changes what the group needs */
}

/* The group is joined for m: check the Q_Key, attach the QP (a job, with
 * g.lock dropped: mc_attached follows), tell the user. */
static void mc_joined(struct cma_mc *m, const struct ibv_ah_attr *ah, uint32_t qkey)
{
	struct cma_id *id = m->id;
	struct cma_event *e;
	struct cma_qpj *j;

	/* As the kernel's cma_set_qkey: the id keeps one Q_Key. */
	if (!qkey || (id->qkey && id->qkey != qkey)) {
		mc_failed(m, -EINVAL);
		return;
	}
	id->qkey = qkey;
	memcpy(m->mgid, ah->grh.dgid.raw, 16);
	m->mlid = ah->dlid;
	e = mc_event(m, RDMA_CM_EVENT_MULTICAST_JOIN, 0, ah, qkey);
	if (!id->id.qp || m->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) {
		m->state = MC_JOINED;
		cma_event_queue(e);
		return;
	}
	if (!(j = cma_qpj_new(id, QPJ_ATTACH))) {
		mc_event_back(m, e);
		mc_failed(m, -ENOMEM);
		return;
	}
	memcpy(j->mgid.raw, m->mgid, 16);
	j->mlid = m->mlid;
	j->mc = m;
	j->ev = e;
	j->done = mc_attached;
	m->jobs++;
	m->state = MC_ATTACHING;
	cma_qpj_queue(j);
}

/* ---- InfiniBand: the SA ---------------------------------------------------------------- */

static int sa_mcm_timeout_ms(void)
{
	const char *v = getenv("USCM_SA_MCM_TIMEOUT_MS");
	long x = v && *v ? strtol(v, NULL, 0) : 1000;

	return x > 0 && x < 600000 ? (int)x : 1000;
}

static void mcm_req(const struct cma_mcg *grp, const struct cma_id *id, uint8_t state,
		    struct um_sa_mcm_req *req)
{
	struct cma_port *p = grp->port;
	struct um_sa_mcm_rec *r = &req->rec;

	memset(req, 0, sizeof(*req));
	memcpy(r->mgid, grp->mgid, 16);
	memcpy(r->port_gid, id ? id->id.route.addr.addr.ibaddr.sgid.raw : grp->rec.port_gid, 16);
	r->qkey = id ? cma_ud_qkey(id) : grp->rec.qkey;
	r->pkey = id ? id_pkey(id) : grp->rec.pkey;
	r->join_state = state;
	/* SL, FlowLabel and TClass 0: there is no IPoIB broadcast group to
	 * copy them from (the kernel does). */
	if (grp->ipoib) {
		req->ipoib_ps = 1;
		r->mtu_selector = UMAD_SA_SELECTOR_LARGEST_AVAIL;
		r->mtu = p->attr.active_mtu;
		r->rate_selector = UMAD_SA_SELECTOR_LARGEST_AVAIL;
	}
	req->timeout_ms = sa_mcm_timeout_ms();
	req->retries = 3;
}

static void grp_answer(void *ctx, int status, const struct um_sa_mcm_rec *rec)
{
	struct cma_mcg *grp = ctx;
	struct cma_mc *m = grp->asking;

	grp->busy = 0;
	grp->asking = NULL;
	if (!status) {
		grp->joined |= grp->asking_state;
		grp->rec = *rec;
		memcpy(grp->mgid, rec->mgid, 16);
	} else if (m) {
		mc_failed(m, status == -ETIMEDOUT ? -ETIMEDOUT : -EINVAL); /* dropped by settle */
	}
	grp_settle(grp);
	cma_kick();
}

static void grp_ah(const struct cma_mcg *grp, struct ibv_ah_attr *ah)
{
	const struct um_sa_mcm_rec *r = &grp->rec;
	int idx = cma_port_gid_index(grp->port, r->port_gid);

	memset(ah, 0, sizeof(*ah));
	ah->dlid = r->mlid;
	ah->sl = r->sl;
	ah->static_rate = r->rate;
	ah->port_num = grp->port->port_num;
	ah->is_global = 1;
	memcpy(ah->grh.dgid.raw, r->mgid, 16);
	ah->grh.flow_label = r->flow_label;
	ah->grh.sgid_index = (uint8_t)(idx >= 0 ? idx : 0);
	ah->grh.hop_limit = r->hop_limit;
	ah->grh.traffic_class = r->tclass;
}

static void grp_free(struct cma_mcg *grp)
{
	for (struct cma_mcg **pp = &grp->port->mcgs; *pp; pp = &(*pp)->next)
		if (*pp == grp) {
			*pp = grp->next;
			break;
		}
	free(grp);
}

/* After any change: drop the failed members, leave what nobody needs any
 * more, tell the members whose JoinState is granted, ask for the next one;
 * free the group when it has no member and nothing in flight. Delivering
 * can fail a member (Q_Key, attach), which changes what is needed: so
 * round again until nothing changes. */
static void grp_settle(struct cma_mcg *grp)
{
	struct um_sa_mcm_req req;
	struct ibv_ah_attr ah;
	uint8_t need, extra;
	int again;

	do {
		again = 0;
		if (grp->busy)
			return;
		need = 0;
		for (struct cma_mc **pp = &grp->members; *pp;) {
			struct cma_mc *m = *pp;

			if (m->state == MC_FAILED) {
				*pp = m->gnext;
				m->grp = NULL;
				continue;
			}
			need |= m->join_state;
			pp = &m->gnext;
		}
		extra = grp->joined & (uint8_t)~need;
		if (extra && grp->port->sa) {
			mcm_req(grp, NULL, extra, &req);
			if (um_sa_mcm_delete(grp->port->sa, &req, extra, NULL, NULL, NULL) < 0 &&
			    getenv("USCM_DEBUG"))
				fprintf(stderr, "uscm: multicast leave not sent: %s\n", strerror(errno));
		}
		grp->joined &= need;
		if (grp->joined)
			grp_ah(grp, &ah);
		for (struct cma_mc *m = grp->members; m && !again; m = m->gnext) {
			if (m->state != MC_PENDING)
				continue;
			if (grp->joined && (m->join_state & grp->joined) == m->join_state) {
				mc_joined(m, &ah, grp->rec.qkey);
				again = m->state == MC_FAILED;
				continue;
			}
			mcm_req(grp, m->id, m->join_state, &req);
			if (um_sa_mcm_set(grp->port->sa, &req, grp_answer, grp, NULL) < 0) {
				mc_failed(m, -(errno ? errno : EIO));
				again = 1;
				continue;
			}
			grp->busy = 1;
			grp->asking = m;
			grp->asking_state = m->join_state;
			return;
		}
	} while (again);
	if (!grp->members)
		grp_free(grp);
}

static int ib_join(struct cma_mc *m)
{
	struct cma_port *p = m->id->port;
	struct cma_mcg *grp = NULL;
	static const uint8_t zero[16];

	if (cma_port_open(p) < 0)
		return -1;
	if (!p->sa)
		return cma_fail(ENODEV);
	if (memcmp(m->mgid, zero, 16))
		for (grp = p->mcgs; grp; grp = grp->next)
			if (!memcmp(grp->mgid, m->mgid, 16))
				break;
	if (!grp) {
		grp = calloc(1, sizeof(*grp));
		if (!grp)
			return cma_fail(ENOMEM);
		grp->port = p;
		memcpy(grp->mgid, m->mgid, 16);
		grp->ipoib = m->id->id.ps == RDMA_PS_IPOIB;
		grp->next = p->mcgs;
		p->mcgs = grp;
	}
	m->grp = grp;
	m->gnext = grp->members;
	grp->members = m;
	grp_settle(grp);
	cma_kick();
	return 0;
}

/* m stops being a member of its group (leave, destroy). */
static void grp_remove(struct cma_mc *m)
{
	struct cma_mcg *grp = m->grp;

	if (!grp)
		return;
	for (struct cma_mc **pp = &grp->members; *pp; pp = &(*pp)->gnext)
		if (*pp == m) {
			*pp = m->gnext;
			break;
		}
	if (grp->asking == m)
		grp->asking = NULL;
	m->grp = NULL;
	grp_settle(grp);
	cma_kick();
}

/* ---- RoCE ------------------------------------------------------------------------------- */

int cma_mc_ip_wanted(const struct sockaddr *a, unsigned gid_type, uint32_t join_flags)
{
	/* The kernel joins no IPv6 group (its RoCE v2 join of one fails
	 * before), none for a RoCE v1 GID and none for a send-only member,
	 * which receives nothing. */
	return a->sa_family == AF_INET && gid_type == IBV_GID_TYPE_ROCE_V2 &&
	       join_flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
}

void cma_mc_ip_drop(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int cma_mc_ip_hold(const struct sockaddr *a, int ifindex)
{
	struct ip_mreqn mr;
	int fd, e;

	/* One socket per membership: a socket holds a group once per
	 * interface (a second IP_ADD_MEMBERSHIP is EADDRINUSE) and at most
	 * net.ipv4.igmp_max_memberships of them, and closing it leaves
	 * exactly this membership's share of the host's group. */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	memset(&mr, 0, sizeof(mr));
	mr.imr_multiaddr = ((const struct sockaddr_in *)a)->sin_addr;
	mr.imr_ifindex = ifindex;
	if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)) == 0)
		return fd;
	e = errno;
	close(fd);
	return cma_fail(e);
}

static int roce_join(struct cma_mc *m)
{
	struct cma_id *id = m->id;
	struct ibv_ah_attr ah;
	static const uint8_t zero[16];
	int idx;

	if (!memcmp(m->mgid, zero, 16))
		return cma_fail(EINVAL);
	/* RoCE v2 GIDs: an IPv6 group has no mapping (the kernel: ENOTSUPP). */
	if (m->addr.ss_family == AF_INET6)
		return cma_fail(EOPNOTSUPP);
	idx = cma_port_gid_index(id->port, id->id.route.addr.addr.ibaddr.sgid.raw);
	memset(&ah, 0, sizeof(ah));
	ah.is_global = 1;
	memcpy(ah.grh.dgid.raw, m->mgid, 16);
	ah.grh.sgid_index = (uint8_t)(idx >= 0 ? idx : 0);
	ah.grh.hop_limit = 64;
	ah.grh.traffic_class = id->tos;
	ah.sl = (uint8_t)(id->tos >> 5);
	ah.port_num = id->id.port_num;
	/* The IP group on the GID's netdev, as the kernel's join, which fails
	 * with it. Only for this process's own ids: uscmd's clients hold
	 * theirs in their own namespace (lib/cmc_calls.c). A GID bound to no
	 * netdev the device reports (the simulated fabric outside a network
	 * namespace) has no group to join. */
	if (id->caller.self && idx >= 0 && id->port->gid_types && id->port->gid_ndevs &&
	    idx < id->port->ngids && id->port->gid_ndevs[idx] &&
	    cma_mc_ip_wanted((struct sockaddr *)&m->addr, id->port->gid_types[idx], m->join_flags)) {
		m->ipfd = cma_mc_ip_hold((struct sockaddr *)&m->addr, (int)id->port->gid_ndevs[idx]);
		if (m->ipfd < 0)
			return -1;
	}
	mc_joined(m, &ah, cma_ud_qkey(id));
	return 0;
}

/* ---- the calls ------------------------------------------------------------------------- */

CMA_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *cm_id,
				      struct rdma_cm_join_mc_attr_ex *attr, void *context)
{
	if (cma_remote())
		return cmc_join_multicast_ex(cm_id, attr, context);
	struct cma_id *id = cma_id_of(cm_id);
	struct cma_mc *m;
	int len, rc;

	if (!id || !attr)
		return cma_fail(EINVAL);
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return cma_fail(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !attr->addr)
		return cma_fail(EINVAL);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return cma_fail(EINVAL);
	len = cma_addr_len(attr->addr);
	if (!len)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	/* As the kernel: a UD id bound to a device, not yet further along. */
	if (!id->port || (id->state != ST_BOUND && id->state != ST_ADDR_RESOLVED) ||
	    id->id.qp_type != IBV_QPT_UD) {
		cma_unlock();
		return cma_fail(EINVAL);
	}
	m = calloc(1, sizeof(*m));
	if (!m || !(m->ev = cma_event_alloc(0))) {
		free(m);
		cma_unlock();
		return cma_fail(ENOMEM);
	}
	m->id = id;
	m->ipfd = -1;
	memcpy(&m->addr, attr->addr, (size_t)len);
	m->context = context;
	m->join_flags = attr->join_flags;
	m->join_state = attr->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER
				? JOIN_SENDONLY_FULL
				: JOIN_FULL;
	m->state = MC_PENDING;
	if (cma_mc_mgid(id, id->port, attr->addr, m->mgid) < 0) {
		int e = errno;
		mc_free(m);
		cma_unlock();
		return cma_fail(e);
	}
	m->next = id->mcs;
	id->mcs = m;
	rc = id->port->roce ? roce_join(m) : ib_join(m);
	if (rc < 0) {
		int e = errno;
		id->mcs = m->next;
		mc_free(m);
		cma_unlock();
		return cma_fail(e);
	}
	cma_unlock();
	/* A synchronous id waits for MULTICAST_JOIN (an error is errno). */
	return cma_sync_wait(id);
}

CMA_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	if (cma_remote())
		return cmc_join_multicast(id, addr, context);
	struct rdma_cm_join_mc_attr_ex attr;

	memset(&attr, 0, sizeof(attr));
	attr.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	attr.join_flags = RDMA_MC_JOIN_FLAG_FULLMEMBER;
	attr.addr = addr;
	return rdma_join_multicast_ex(id, &attr, context);
}

/* Queues the QP's detach (a job: with g.lock dropped). */
static void mc_detach(struct cma_mc *m)
{
	struct cma_qpj *j;

	if (!m->attached || !m->id->id.qp)
		return;
	m->attached = 0;
	if (!(j = cma_qpj_new(m->id, QPJ_DETACH)))
		return; /* out of memory: attached until the QP goes */
	memcpy(j->mgid.raw, m->mgid, 16);
	j->mlid = m->mlid;
	cma_qpj_queue(j);
}

/* Drops m's undelivered events. */
static void mc_purge(struct cma_mc *m)
{
	struct cma_chan *c = m->id->chan;
	struct cma_event **pp, *e;

	if (!c)
		return;
	c->tail = NULL;
	for (pp = &c->head; (e = *pp);) {
		if (e->mc == m) {
			*pp = e->next;
			free(e);
			continue;
		}
		c->tail = e;
		pp = &e->next;
	}
	cma_chan_update(c);
}

CMA_EXPORT int rdma_leave_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr)
{
	if (cma_remote())
		return cmc_leave_multicast(cm_id, addr);
	struct cma_id *id = cma_id_of(cm_id);
	struct cma_mc **pp, *m;
	int len;

	if (!id || !addr || !(len = cma_addr_len(addr)))
		return cma_fail(EINVAL);
	/* A synchronous id still holds its last event: if it is a join's, the
	 * wait below would be for ourselves. */
	if (id->sync && id->id.event && ((struct cma_event *)id->id.event)->mc) {
		rdma_ack_cm_event(id->id.event);
		id->id.event = NULL;
	}
	pthread_mutex_lock(&g.lock);
	for (pp = &id->mcs; (m = *pp); pp = &m->next)
		if (!memcmp(&m->addr, addr, (size_t)len))
			break;
	if (!m) {
		cma_unlock();
		return cma_fail(EADDRNOTAVAIL);
	}
	*pp = m->next;
	m->leaving = 1;
	cma_mc_ip_drop(&m->ipfd);
	cma_qpj_wait(id); /* an attach in flight, then the detach */
	mc_detach(m);
	cma_qpj_wait(id);
	grp_remove(m);
	mc_purge(m);
	/* As librdmacm: its events handed out must be acked first. */
	while (m->events_out) {
		cma_deferred_run();
		pthread_cond_wait(&g.cond, &g.lock);
	}
	cma_unlock();
	mc_free(m);
	return 0;
}

void cma_mc_leave_all(struct cma_id *id)
{
	for (struct cma_mc **pp = &id->mcs; *pp;) {
		struct cma_mc *m = *pp;

		m->leaving = 1;
		cma_mc_ip_drop(&m->ipfd);
		grp_remove(m);
		mc_purge(m);
		if (m->events_out || m->jobs) {
			/* freed once acked and its attach is done (rdma_destroy_id
			 * waits for both) */
			pp = &m->next;
			continue;
		}
		*pp = m->next;
		mc_free(m);
	}
}

void cma_mc_detach_qp(struct cma_id *id)
{
	for (struct cma_mc *m = id->mcs; m; m = m->next)
		mc_detach(m);
}

void cma_mc_event_acked(struct cma_mc *mc)
{
	if (mc->events_out)
		mc->events_out--;
}

void cma_mc_fini(void)
{
	for (int d = 0; d < g.ndevs; d++) {
		for (int i = 0; i < g.devs[d].nports; i++) {
			struct cma_port *p = &g.devs[d].ports[i];

			for (struct cma_mcg *grp = p->mcgs; grp; grp = grp->next) {
				struct um_sa_mcm_req req;

				if (!grp->joined || !p->sa)
					continue;
				mcm_req(grp, NULL, grp->joined, &req);
				um_sa_mcm_delete(p->sa, &req, grp->joined, NULL, NULL, NULL);
				grp->joined = 0;
			}
		}
	}
}
