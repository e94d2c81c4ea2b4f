/*
 * usd_ids.c - uscmd's host-wide id handles. A handle is the next value of
 * a 32-bit counter (0 and the handles still in use skipped), found through
 * a hash table; so a stale handle names nothing rather than a newer id
 * until 2^32 - 1 more ids have been made on the host (the whole width of
 * the protocol's id field: at 100,000 ids a second, 12 hours), however
 * the ids come and go. A handle tells whose id it is: a request for
 * another client's id gets EINVAL, an unknown or stale one ENOENT (the
 * kernel's ucma_get_ctx does the same).
 */
#include <errno.h>
#include <stdlib.h>

#include "daemon/usd_int.h"

/* At most this many ids at once, host-wide (the host's id limit is
 * usually far lower). */
#define IDS_MAX (1u << 20)

static struct usd_id **tab;     /* chains by handle & (tabsz - 1) */
static unsigned tabsz, used;
static uint32_t next_handle;

static struct usd_id *find(uint32_t h)
{
	if (!tabsz)
		return NULL;
	for (struct usd_id *id = tab[h & (tabsz - 1)]; id; id = id->hnext)
		if (id->handle == h)
			return id;
	return NULL;
}

/* Consecutive handles land in consecutive chains: a table as large as the
 * ids it holds has chains of one, mostly. */
static int grow(void)
{
	unsigned n = tabsz ? tabsz * 2 : 1024;
	struct usd_id **t = calloc(n, sizeof(*t));

	if (!t)
		return -1;
	for (unsigned i = 0; i < tabsz; i++)
		while (tab[i]) {
			struct usd_id *id = tab[i];

			tab[i] = id->hnext;
			id->hnext = t[id->handle & (n - 1)];
			t[id->handle & (n - 1)] = id;
		}
	free(tab);
	tab = t;
	tabsz = n;
	return 0;
}

struct usd_id *usd_id_new(struct usd_client *cl, struct rdma_cm_id *cm, uint32_t chan)
{
	struct usd_id *id;
	uint32_t h;
	int err = usd_charge(cl, USD_IDS, 1);

	if (err) {
		errno = err;
		return NULL;
	}
	if (used >= IDS_MAX || (used >= tabsz && grow() < 0) || !(id = calloc(1, sizeof(*id)))) {
		usd_uncharge(cl, USD_IDS, 1);
		errno = ENOMEM;
		return NULL;
	}
	/* handle 0 means "none"; after a wrap, skip the ones still held */
	do
		h = ++next_handle;
	while (h == 0 || find(h));
	id->handle = h;
	id->cm = cm;
	id->cl = cl;
	id->chan = chan;
	id->hnext = tab[h & (tabsz - 1)];
	tab[h & (tabsz - 1)] = id;
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
	struct usd_id *id = handle ? find(handle) : NULL;

	if (!id) {
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
	struct usd_id **pp;

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
	for (pp = &tab[id->handle & (tabsz - 1)]; *pp; pp = &(*pp)->hnext)
		if (*pp == id) {
			*pp = id->hnext;
			break;
		}
	used--;
	free(id);
}

size_t usd_id_count(void)
{
	return used;
}
