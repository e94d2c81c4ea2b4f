/*
 * usd_ids.c - uscmd's host-wide id handles. A handle is a slot number (low
 * 20 bits) and that slot's reuse count (high 12 bits), so a stale handle
 * names nothing rather than a newer id, and a handle tells whose id it is:
 * a request for another client's id gets EINVAL, an unknown one ENOENT
 * (the kernel's ucma_get_ctx does the same).
 */
#include <errno.h>
#include <stdlib.h>

#include "daemon/usd_int.h"

#define SLOT_BITS 20
#define SLOT_MAX (1u << SLOT_BITS)

static struct usd_id **slots;
static uint16_t *reuse;
static unsigned nslots, used;
static uint32_t *freelist;
static unsigned nfree;

static int grow(void)
{
	unsigned n = nslots ? nslots * 2 : 1024;
	struct usd_id **s;
	uint16_t *r;
	uint32_t *f;

	if (n > SLOT_MAX)
		n = SLOT_MAX;
	if (n <= nslots)
		return -1;
	s = realloc(slots, n * sizeof(*s));
	if (!s)
		return -1;
	slots = s;
	r = realloc(reuse, n * sizeof(*r));
	if (!r)
		return -1;
	reuse = r;
	f = realloc(freelist, n * sizeof(*f));
	if (!f)
		return -1;
	freelist = f;
	for (unsigned i = n; i-- > nslots;) {
		slots[i] = NULL;
		reuse[i] = 0;
		if (i) /* slot 0 is never used: handle 0 means "none" */
			freelist[nfree++] = i;
	}
	nslots = n;
	return 0;
}

struct usd_id *usd_id_new(struct usd_client *cl, struct rdma_cm_id *cm, uint32_t chan)
{
	struct usd_id *id;
	uint32_t s;
	int err = usd_charge(cl, USD_IDS, 1);

	if (err) {
		errno = err;
		return NULL;
	}
	if ((!nfree && grow() < 0) || !(id = calloc(1, sizeof(*id)))) {
		usd_uncharge(cl, USD_IDS, 1);
		errno = ENOMEM;
		return NULL;
	}
	s = freelist[--nfree];
	reuse[s] = (uint16_t)((reuse[s] + 1) & 0xFFF);
	id->handle = ((uint32_t)reuse[s] << SLOT_BITS) | s;
	id->cm = cm;
	id->cl = cl;
	id->chan = chan;
	slots[s] = id;
	used++;
	id->next = cl->ids;
	if (cl->ids)
		cl->ids->pprev = &id->next;
	id->pprev = &cl->ids;
	cl->ids = id;
	cl->nids++;
	cl->ids_total++;
	if (cm)
		cm->context = id;
	return id;
}

struct usd_id *usd_id_get(struct usd_client *cl, uint32_t handle, int *err)
{
	uint32_t s = handle & (SLOT_MAX - 1);
	struct usd_id *id = s < nslots ? slots[s] : NULL;

	if (!id || id->handle != handle) {
		*err = ENOENT;
		return NULL;
	}
	if (id->cl != cl) {
		*err = EINVAL;
		return NULL;
	}
	return id;
}

void usd_id_free(struct usd_id *id)
{
	uint32_t s = id->handle & (SLOT_MAX - 1);

	*id->pprev = id->next;
	if (id->next)
		id->next->pprev = id->pprev;
	id->cl->nids--;
	/* what the id held goes with it: its outstanding requests end as the
	 * kernel's rdma_destroy_id cancels them, its joins are left */
	usd_uncharge(id->cl, USD_IDS, 1);
	if (id->resolving)
		usd_uncharge(id->cl, USD_RESOLVES, 1);
	if (id->routing)
		usd_uncharge(id->cl, USD_ROUTES, 1);
	if (id->joins)
		usd_uncharge(id->cl, USD_JOINS, id->joins);
	slots[s] = NULL;
	freelist[nfree++] = s;
	used--;
	free(id);
}

size_t usd_id_count(void)
{
	return used;
}
