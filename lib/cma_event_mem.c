/*
 * cma_event_mem.c - where events come from (docs/library.md, "Events and
 * memory"). An application waiting for ESTABLISHED, DISCONNECTED or
 * ROUTE_RESOLVED waits forever if that event is dropped because malloc
 * failed in the progress thread. So every event the library owes an id
 * for an operation it started is allocated when the operation starts, in
 * the user's call (which can still fail with ENOMEM, having changed
 * nothing), and kept in the id's reserve until the completion takes it:
 *
 *   rdma_resolve_route           1  (ROUTE_RESOLVED / ROUTE_ERROR)
 *   rdma_connect, RC             3  (the outcome, with room for the REP's
 *                                    private data; DISCONNECTED; TIMEWAIT_EXIT)
 *   rdma_connect, UD             1  (the SIDR outcome, with private data)
 *   a passive RC id              3  (made with its CONNECT_REQUEST: the
 *                                    outcome, DISCONNECTED, TIMEWAIT_EXIT)
 *   rdma_join_multicast          1  per join, held by the join
 *   rdma_resolve_addrinfo        1  held by the request
 *
 * Completions take the reserve first, so the reserve is the event's memory
 * and costs nothing extra in the end; only events still owed are held (two
 * small ones while a connection is up). The heap is the fallback for what
 * no reservation covers. Events made inside a user call (ADDR_RESOLVED,
 * USER) and CONNECT_REQUEST (its failure refuses the REQ, which the peer
 * sees) come from the heap directly.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/cma_int.h"

struct cma_event *cma_event_alloc(size_t pdata_cap)
{
	struct cma_event *e;

	if (pdata_cap > CMP_CM_DATA_SIZE)
		pdata_cap = CMP_CM_DATA_SIZE;
	e = calloc(1, sizeof(*e) + pdata_cap);
	if (!e) {
		errno = ENOMEM;
		return NULL;
	}
	e->pdata_cap = (uint8_t)pdata_cap;
	return e;
}

void cma_event_init(struct cma_event *e, struct cma_id *id, enum rdma_cm_event_type t, int status)
{
	uint8_t cap = e->pdata_cap;

	memset(e, 0, sizeof(*e));
	e->pdata_cap = cap;
	e->ev.id = &id->id;
	e->ev.event = t;
	e->ev.status = status;
	e->owner = id;
}

struct cma_event *cma_event_heap(struct cma_id *id, enum rdma_cm_event_type t, int status,
				 size_t pdata_cap)
{
	struct cma_event *e = cma_event_alloc(pdata_cap);

	if (e)
		cma_event_init(e, id, t, status);
	return e;
}

int cma_event_reserve(struct cma_id *id, unsigned n, unsigned nfull)
{
	unsigned have = 0, full = 0;

	for (struct cma_event *e = id->ev_rsv; e; e = e->next) {
		have++;
		full += e->pdata_cap == CMP_CM_DATA_SIZE;
	}
	for (; full < nfull || have < n; have++) {
		struct cma_event *e = cma_event_alloc(full < nfull ? CMP_CM_DATA_SIZE : 0);

		if (!e)
			return -1; /* what was added stays reserved: harmless */
		full += e->pdata_cap == CMP_CM_DATA_SIZE;
		e->next = id->ev_rsv;
		id->ev_rsv = e;
	}
	return 0;
}

void cma_event_rsv_free(struct cma_id *id)
{
	struct cma_event *e;

	while ((e = id->ev_rsv)) {
		id->ev_rsv = e->next;
		free(e);
	}
}

/* Unlinks the reserved event that fits len best: the smallest with room
 * for it, else (fit == 0) the largest there is. */
static struct cma_event *rsv_take(struct cma_id *id, size_t len, int fit)
{
	struct cma_event **best = NULL;

	for (struct cma_event **pp = &id->ev_rsv; *pp; pp = &(*pp)->next) {
		unsigned cap = (*pp)->pdata_cap;

		if (fit ? cap >= len && (!best || cap < (*best)->pdata_cap)
			: !best || cap > (*best)->pdata_cap)
			best = pp;
	}
	if (!best)
		return NULL;
	struct cma_event *e = *best;
	*best = e->next;
	e->next = NULL;
	return e;
}

/* The heap, unless USCM_FAULT_EVENT_ALLOC=1 makes it fail here: a test
 * knob that proves completions never need it (docs/library.md). */
static struct cma_event *heap_fallback(size_t len)
{
	if (g.fault_event_alloc) {
		errno = ENOMEM;
		return NULL;
	}
	return cma_event_alloc(len);
}

struct cma_event *cma_event_new_pdata(struct cma_id *id, enum rdma_cm_event_type t, int status,
				      size_t len)
{
	struct cma_event *e = rsv_take(id, len, 1);

	if (!e)
		e = heap_fallback(len);
	if (!e)
		e = rsv_take(id, len, 0); /* its private data is cut short */
	if (!e)
		return NULL;
	cma_event_init(e, id, t, status);
	return e;
}

struct cma_event *cma_event_new(struct cma_id *id, enum rdma_cm_event_type t, int status)
{
	return cma_event_new_pdata(id, t, status, 0);
}

struct cma_event *cma_event_use(struct cma_event **spare, struct cma_id *id,
				enum rdma_cm_event_type t, int status)
{
	struct cma_event *e = *spare;

	if (!e)
		return cma_event_new(id, t, status);
	*spare = NULL;
	cma_event_init(e, id, t, status);
	return e;
}

void cma_event_return(struct cma_id *id, struct cma_event *e)
{
	if (!e)
		return;
	e->next = id->ev_rsv;
	id->ev_rsv = e;
}

void cma_event_pdata(struct cma_event *e, const uint8_t *p, size_t len)
{
	if (len > e->pdata_cap)
		len = e->pdata_cap;
	if (p && len)
		memcpy(e->pdata, p, len);
	e->ev.param.conn.private_data = len ? e->pdata : NULL;
	e->ev.param.conn.private_data_len = (uint8_t)len;
}
