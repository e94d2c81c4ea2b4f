/*
 * usd_limits.c - what clients make uscmd hold, counted per client, per uid
 * and for the host.
 *
 * A per-client limit alone lets one user open many connections (a process
 * each) and fill the host: ids, channels and queued events are counted for
 * the uid too, and ids and queued bytes against a host-wide budget of
 * which a reserve is root's alone, so root's requests are served when
 * every other uid together has used the rest. The errno of each limit is
 * the one the kernel gives for the like limit: EMFILE for counts of
 * per-file objects (ids, channels: ucma's per-file limits), EAGAIN for
 * requests in flight (resolves, route queries: retry when one ends),
 * ENOBUFS for multicast memberships (IP_ADD_MEMBERSHIP beyond
 * igmp_max_memberships), ENOMEM for memory (queued bytes, the host's
 * budgets: ucma's allocation failures).
 */
#include <errno.h>
#include <stdlib.h>

#include "daemon/usd_int.h"

#define UID_HASH 256

static struct usd_uid *uids[UID_HASH];

struct usd_uid *usd_uid_get(uid_t uid, int create)
{
	struct usd_uid **b = &uids[uid % UID_HASH], *u;

	for (u = *b; u; u = u->hnext)
		if (u->uid == uid)
			return u;
	if (!create || !(u = calloc(1, sizeof(*u))))
		return NULL;
	u->uid = uid;
	u->hnext = *b;
	*b = u;
	return u;
}

void usd_uid_put(struct usd_uid *u)
{
	struct usd_uid **b = &uids[u->uid % UID_HASH];

	if (u->nclients || u->in_ring)
		return;
	/* its clients' resources went with them (usd_client_free) */
	while (*b != u)
		b = &(*b)->hnext;
	*b = u->hnext;
	free(u);
}

static const int err_of[USD_NRES] = {
	[USD_IDS] = EMFILE,
	[USD_CHANS] = EMFILE,
	[USD_QBYTES] = ENOMEM,
	[USD_RESOLVES] = EAGAIN,
	[USD_ROUTES] = EAGAIN,
	[USD_JOINS] = ENOBUFS,
};

const char *usd_res_name(enum usd_res r)
{
	static const char *const n[USD_NRES] = {
		[USD_IDS] = "ids",
		[USD_CHANS] = "chans",
		[USD_QBYTES] = "queued_bytes",
		[USD_RESOLVES] = "resolves",
		[USD_ROUTES] = "routes",
		[USD_JOINS] = "joins",
	};

	return (unsigned)r < USD_NRES ? n[r] : "?";
}

int usd_admit(const struct usd_client *cl, enum usd_res r, uint64_t n)
{
	const struct usd_limits *l = &usd.lim;

	if (cl->use[r] + n > l->client[r] || cl->u->use[r] + n > l->uid[r])
		return err_of[r];
	if (l->total[r]) {
		uint64_t cap = l->total[r];

		if (cl->uid != 0)
			cap = cap > l->reserve[r] ? cap - l->reserve[r] : 0;
		if (usd.use[r] + n > cap)
			return ENOMEM;
	}
	return 0;
}

int usd_charge(struct usd_client *cl, enum usd_res r, uint64_t n)
{
	int err = usd_admit(cl, r, n);

	if (err) {
		cl->limit_refusals++;
		return err;
	}
	cl->use[r] += n;
	cl->u->use[r] += n;
	usd.use[r] += n;
	return 0;
}

void usd_uncharge(struct usd_client *cl, enum usd_res r, uint64_t n)
{
	/* never below zero: a miscount must not turn into a huge allowance */
	cl->use[r] -= n <= cl->use[r] ? n : cl->use[r];
	cl->u->use[r] -= n <= cl->u->use[r] ? n : cl->u->use[r];
	usd.use[r] -= n <= usd.use[r] ? n : usd.use[r];
}
