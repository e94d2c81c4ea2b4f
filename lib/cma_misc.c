/*
 * cma_misc.c - rdma_getaddrinfo / rdma_freeaddrinfo, rdma_resolve_addrinfo /
 * rdma_query_addrinfo, rdma_event_str, rdma_get_devices / rdma_free_devices.
 * (rsockets: lib/rs_*.c, in librdmacm.so.1 only.)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cma_int.h"
#include "lib/cmc.h"

/* ---- rdma_getaddrinfo ---------------------------------------------------------- */

static int gai_errno(int rc)
{
	switch (rc) {
	case EAI_AGAIN: return EAGAIN;
	case EAI_BADFLAGS: return EINVAL;
	case EAI_FAIL: return EIO;
	case EAI_FAMILY: return EAFNOSUPPORT;
	case EAI_MEMORY: return ENOMEM;
	case EAI_NONAME: return ENOENT;
	case EAI_SERVICE: return ENOENT;
	case EAI_SOCKTYPE: return ENOTSUP;
	case EAI_SYSTEM: return errno ? errno : EIO;
#ifdef EAI_NODATA
	case EAI_NODATA: return ENODATA;
#endif
#ifdef EAI_ADDRFAMILY
	case EAI_ADDRFAMILY: return EADDRNOTAVAIL;
#endif
	default: return EIO;
	}
}

static struct sockaddr *dup_addr(const struct sockaddr *a, socklen_t len)
{
	struct sockaddr *c = malloc(len);

	if (c)
		memcpy(c, a, len);
	return c;
}

CMA_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

/*
 * No node and no service: librdmacm answers with the hints themselves —
 * flags, family, QP type and port space as given, the destination and
 * source addresses copied (either, both or none); nothing is resolved.
 * libfabric's verbs provider and others build their answer this way from
 * addresses they already hold.
 */
static int gai_from_hints(const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *rai = calloc(1, sizeof(*rai));

	if (!rai)
		return cma_fail(ENOMEM);
	rai->ai_flags = hints->ai_flags;
	rai->ai_family = hints->ai_family;
	rai->ai_qp_type = hints->ai_qp_type;
	rai->ai_port_space = hints->ai_port_space;
	if (hints->ai_dst_addr && hints->ai_dst_len) {
		rai->ai_dst_addr = dup_addr(hints->ai_dst_addr, hints->ai_dst_len);
		if (!rai->ai_dst_addr)
			goto nomem;
		rai->ai_dst_len = hints->ai_dst_len;
	}
	if (hints->ai_src_addr && hints->ai_src_len) {
		rai->ai_src_addr = dup_addr(hints->ai_src_addr, hints->ai_src_len);
		if (!rai->ai_src_addr)
			goto nomem;
		rai->ai_src_len = hints->ai_src_len;
	}
	*res = rai;
	return 0;
nomem:
	rdma_freeaddrinfo(rai);
	return cma_fail(ENOMEM);
}

CMA_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *rai;
	struct addrinfo ah, *ai = NULL;
	int flags = hints ? hints->ai_flags : 0, rc;

	if (!res || (!node && !service && !hints))
		return cma_fail(EINVAL);
	if (!node && !service)
		return gai_from_hints(hints, res);
	if (hints && hints->ai_family == AF_IB)
		return cma_fail(EAFNOSUPPORT); /* AF_IB name resolution: not in this phase */
	memset(&ah, 0, sizeof(ah));
	ah.ai_flags = ((flags & RAI_PASSIVE) ? AI_PASSIVE : 0) |
		      ((flags & RAI_NUMERICHOST) ? AI_NUMERICHOST : 0);
	ah.ai_family = hints && hints->ai_family ? hints->ai_family : AF_UNSPEC;
	ah.ai_socktype = SOCK_STREAM; /* one answer per address */
	rc = getaddrinfo(node, service, &ah, &ai);
	if (rc)
		return cma_fail(gai_errno(rc));
	rai = calloc(1, sizeof(*rai));
	if (!rai) {
		freeaddrinfo(ai);
		return cma_fail(ENOMEM);
	}
	rai->ai_flags = flags;
	rai->ai_family = ai->ai_family;
	if (hints && hints->ai_port_space)
		rai->ai_port_space = hints->ai_port_space;
	else
		rai->ai_port_space = hints && hints->ai_qp_type == IBV_QPT_UD ? RDMA_PS_UDP : RDMA_PS_TCP;
	if (hints && hints->ai_qp_type)
		rai->ai_qp_type = hints->ai_qp_type;
	else
		rai->ai_qp_type = rai->ai_port_space == RDMA_PS_UDP || rai->ai_port_space == RDMA_PS_IPOIB
					  ? IBV_QPT_UD
					  : IBV_QPT_RC;
	if (flags & RAI_PASSIVE) {
		rai->ai_src_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
		rai->ai_src_len = ai->ai_addrlen;
		if (!rai->ai_src_addr)
			goto nomem;
	} else {
		rai->ai_dst_addr = dup_addr(ai->ai_addr, ai->ai_addrlen);
		rai->ai_dst_len = ai->ai_addrlen;
		if (!rai->ai_dst_addr)
			goto nomem;
		if (hints && hints->ai_src_addr && hints->ai_src_len) {
			rai->ai_src_addr = dup_addr(hints->ai_src_addr, hints->ai_src_len);
			rai->ai_src_len = hints->ai_src_len;
			if (!rai->ai_src_addr)
				goto nomem;
		}
	}
	if (hints && hints->ai_connect_len && hints->ai_connect) {
		rai->ai_connect = malloc(hints->ai_connect_len);
		if (!rai->ai_connect)
			goto nomem;
		memcpy(rai->ai_connect, hints->ai_connect, hints->ai_connect_len);
		rai->ai_connect_len = hints->ai_connect_len;
	}
	freeaddrinfo(ai);
	*res = rai;
	return 0;
nomem:
	freeaddrinfo(ai);
	rdma_freeaddrinfo(rai);
	return cma_fail(ENOMEM);
}

/* ---- names and devices ---------------------------------------------------------- */

CMA_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	switch (event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED: return "RDMA_CM_EVENT_ADDR_RESOLVED";
	case RDMA_CM_EVENT_ADDR_ERROR: return "RDMA_CM_EVENT_ADDR_ERROR";
	case RDMA_CM_EVENT_ROUTE_RESOLVED: return "RDMA_CM_EVENT_ROUTE_RESOLVED";
	case RDMA_CM_EVENT_ROUTE_ERROR: return "RDMA_CM_EVENT_ROUTE_ERROR";
	case RDMA_CM_EVENT_CONNECT_REQUEST: return "RDMA_CM_EVENT_CONNECT_REQUEST";
	case RDMA_CM_EVENT_CONNECT_RESPONSE: return "RDMA_CM_EVENT_CONNECT_RESPONSE";
	case RDMA_CM_EVENT_CONNECT_ERROR: return "RDMA_CM_EVENT_CONNECT_ERROR";
	case RDMA_CM_EVENT_UNREACHABLE: return "RDMA_CM_EVENT_UNREACHABLE";
	case RDMA_CM_EVENT_REJECTED: return "RDMA_CM_EVENT_REJECTED";
	case RDMA_CM_EVENT_ESTABLISHED: return "RDMA_CM_EVENT_ESTABLISHED";
	case RDMA_CM_EVENT_DISCONNECTED: return "RDMA_CM_EVENT_DISCONNECTED";
	case RDMA_CM_EVENT_DEVICE_REMOVAL: return "RDMA_CM_EVENT_DEVICE_REMOVAL";
	case RDMA_CM_EVENT_MULTICAST_JOIN: return "RDMA_CM_EVENT_MULTICAST_JOIN";
	case RDMA_CM_EVENT_MULTICAST_ERROR: return "RDMA_CM_EVENT_MULTICAST_ERROR";
	case RDMA_CM_EVENT_ADDR_CHANGE: return "RDMA_CM_EVENT_ADDR_CHANGE";
	case RDMA_CM_EVENT_TIMEWAIT_EXIT: return "RDMA_CM_EVENT_TIMEWAIT_EXIT";
	case RDMA_CM_EVENT_ADDRINFO_RESOLVED: return "RDMA_CM_EVENT_ADDRINFO_RESOLVED";
	case RDMA_CM_EVENT_ADDRINFO_ERROR: return "RDMA_CM_EVENT_ADDRINFO_ERROR";
	case RDMA_CM_EVENT_USER: return "RDMA_CM_EVENT_USER";
	case RDMA_CM_EVENT_INTERNAL: return "RDMA_CM_EVENT_INTERNAL";
	}
	return "UNKNOWN EVENT";
}

CMA_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list = NULL;
	int n = 0;

	pthread_mutex_lock(&g.lock);
	if (cma_init_locked() == 0) {
		list = calloc((size_t)g.ndevs + 1, sizeof(*list));
		if (list) {
			for (int i = 0; i < g.ndevs; i++)
				list[i] = g.devs[i].verbs;
			n = g.ndevs;
		} else {
			errno = ENOMEM;
		}
	}
	cma_unlock();
	if (num_devices)
		*num_devices = n;
	return list;
}

CMA_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list); /* the contexts stay open: ids use them */
}

/* ---- rdma_resolve_addrinfo / rdma_query_addrinfo (RDMACM_1.4) ---------------------- */

/* A deep copy of one rdma_addrinfo list. */
static struct rdma_addrinfo *ai_dup(const struct rdma_addrinfo *a)
{
	struct rdma_addrinfo *head = NULL, **tail = &head;

	for (; a; a = a->ai_next) {
		struct rdma_addrinfo *c = calloc(1, sizeof(*c));

		if (!c)
			goto nomem;
		*tail = c;
		tail = &c->ai_next;
		c->ai_flags = a->ai_flags;
		c->ai_family = a->ai_family;
		c->ai_qp_type = a->ai_qp_type;
		c->ai_port_space = a->ai_port_space;
		if (a->ai_src_addr && a->ai_src_len) {
			if (!(c->ai_src_addr = dup_addr(a->ai_src_addr, a->ai_src_len)))
				goto nomem;
			c->ai_src_len = a->ai_src_len;
		}
		if (a->ai_dst_addr && a->ai_dst_len) {
			if (!(c->ai_dst_addr = dup_addr(a->ai_dst_addr, a->ai_dst_len)))
				goto nomem;
			c->ai_dst_len = a->ai_dst_len;
		}
		if ((a->ai_src_canonname && !(c->ai_src_canonname = strdup(a->ai_src_canonname))) ||
		    (a->ai_dst_canonname && !(c->ai_dst_canonname = strdup(a->ai_dst_canonname))))
			goto nomem;
		if (a->ai_route && a->ai_route_len) {
			if (!(c->ai_route = malloc(a->ai_route_len)))
				goto nomem;
			memcpy(c->ai_route, a->ai_route, a->ai_route_len);
			c->ai_route_len = a->ai_route_len;
		}
		if (a->ai_connect && a->ai_connect_len) {
			if (!(c->ai_connect = malloc(a->ai_connect_len)))
				goto nomem;
			memcpy(c->ai_connect, a->ai_connect, a->ai_connect_len);
			c->ai_connect_len = a->ai_connect_len;
		}
	}
	return head;
nomem:
	rdma_freeaddrinfo(head);
	errno = ENOMEM;
	return NULL;
}

/* One rdma_resolve_addrinfo in flight: the arguments (copied) and the id
 * to answer (NULL once the id is gone). */
struct cma_ai_req {
	struct cma_id *id;
	char *node, *service;
	struct rdma_addrinfo *hints;
	struct cma_event *ev; /* its ADDRINFO_* event, reserved with it */
};

static void ai_req_free(struct cma_ai_req *r)
{
	free(r->ev);
	free(r->node);
	free(r->service);
	rdma_freeaddrinfo(r->hints);
	free(r);
}

/* The resolver may block (DNS): it runs on a thread of its own, and the
 * answer comes back as ADDRINFO_RESOLVED / ADDRINFO_ERROR under the lock. */
static void *ai_thread(void *arg)
{
	struct cma_ai_req *r = arg;
	struct rdma_addrinfo *res = NULL;
	struct cma_id *id;
	int rc, e;

	rc = rdma_getaddrinfo(r->node, r->service, r->hints, &res);
	e = rc ? (errno ? errno : EIO) : 0;
	pthread_mutex_lock(&g.lock);
	id = r->id;
	if (id) {
		id->ai_req = NULL;
		if (!rc) {
			rdma_freeaddrinfo(id->ai);
			id->ai = res;
			res = NULL;
		}
		cma_event_queue(cma_event_use(&r->ev, id,
					      rc ? RDMA_CM_EVENT_ADDRINFO_ERROR
						 : RDMA_CM_EVENT_ADDRINFO_RESOLVED,
					      rc ? -e : 0));
	}
	cma_unlock();
	rdma_freeaddrinfo(res);
	ai_req_free(r);
	return NULL;
}

void cma_addrinfo_release(struct cma_id *id)
{
	if (id->ai_req)
		id->ai_req->id = NULL;
	id->ai_req = NULL;
	rdma_freeaddrinfo(id->ai);
	id->ai = NULL;
}

int cma_addrinfo_copy(const struct rdma_addrinfo *a, struct rdma_addrinfo **out)
{
	*out = ai_dup(a);
	return *out ? 0 : -1;
}

/* The hint flags this library knows; newer ones (the SA service lookup of
 * RAI_SA) are refused rather than ignored. */
#define AI_KNOWN_FLAGS (RAI_PASSIVE | RAI_NUMERICHOST | RAI_NOROUTE | RAI_FAMILY)

CMA_EXPORT int rdma_resolve_addrinfo(struct rdma_cm_id *cm_id, const char *node,
				     const char *service, const struct rdma_addrinfo *hints)
{
	if (cma_remote())
		return cmc_resolve_addrinfo(cm_id, node, service, hints);
	struct cma_id *id = cma_id_of(cm_id);
	struct cma_ai_req *r;
	sigset_t all, old;
	pthread_t t;
	int rc;

	if (!id || (!node && !service))
		return cma_fail(EINVAL);
	if (hints && (hints->ai_flags & ~AI_KNOWN_FLAGS))
		return cma_fail(EOPNOTSUPP);
	if (hints && hints->ai_family == AF_IB)
		return cma_fail(EAFNOSUPPORT);
	r = calloc(1, sizeof(*r));
	if (!r || !(r->ev = cma_event_alloc(0)) || (node && !(r->node = strdup(node))) ||
	    (service && !(r->service = strdup(service))) ||
	    (hints && !(r->hints = ai_dup(hints)))) {
		if (r)
			ai_req_free(r);
		return cma_fail(ENOMEM);
	}
	if (r->hints) {
		rdma_freeaddrinfo(r->hints->ai_next); /* hints are one record */
		r->hints->ai_next = NULL;
	}
	pthread_mutex_lock(&g.lock);
	if (id->ai_req) {
		cma_unlock();
		ai_req_free(r);
		return cma_fail(EBUSY);
	}
	r->id = id;
	id->ai_req = r;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&t, NULL, ai_thread, r);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		id->ai_req = NULL;
		cma_unlock();
		ai_req_free(r);
		return cma_fail(rc);
	}
	pthread_detach(t);
	cma_unlock();
	return cma_sync_wait(id);
}

CMA_EXPORT int rdma_query_addrinfo(struct rdma_cm_id *cm_id, struct rdma_addrinfo **info)
{
	if (cma_remote())
		return cmc_query_addrinfo(cm_id, info);
	struct cma_id *id = cma_id_of(cm_id);
	struct rdma_addrinfo *c;

	if (!id || !info)
		return cma_fail(EINVAL);
	pthread_mutex_lock(&g.lock);
	if (!id->ai) {
		cma_unlock();
		return cma_fail(ENOENT); /* nothing resolved (yet) */
	}
	c = ai_dup(id->ai);
	cma_unlock();
	if (!c)
		return -1;
	*info = c;
	return 0;
}
