/*
 * cmp_map.h - open-addressing hash map from a 128-bit key to a pointer, for
 * the engine's O(1) lookups (comm ID, remote identity, remote QPN, SIDR
 * request). Linear probing with backward-shift deletion: no tombstones, so
 * lookups stay short under churn. The hash is SipHash-2-4 under a secret
 * key: the keys are partly chosen by peers (remote comm IDs, GUIDs, QPNs),
 * and with an unkeyed hash they could precompute keys that share one probe
 * cluster and make every lookup walk it (hash flooding).
 */
#ifndef USCM_CMP_MAP_H
#define USCM_CMP_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "cm_proto/cmp_mem.h"

struct cmp_map_key { uint64_t a, b; };

struct cmp_map_slot {
	struct cmp_map_key key;
	void *val; /* NULL: empty */
};

struct cmp_map {
	struct cmp_map_slot *slots;
	size_t cap;  /* power of two, or 0 */
	size_t len;
	const struct cmp_mem *mem;
	uint64_t k0, k1; /* the SipHash key */
};

/* An empty map allocating through mem (which must outlive it), hashing
 * under the key (k0, k1). */
void cmp_map_init(struct cmp_map *m, const struct cmp_mem *mem, uint64_t k0, uint64_t k1);
void *cmp_map_get(const struct cmp_map *m, struct cmp_map_key k);
/* Room for n entries: puts that keep len <= n do not allocate (and so
 * cannot fail). 0, or -1 on ENOMEM (the map unchanged). */
int cmp_map_reserve(struct cmp_map *m, size_t n);
/* Inserts or replaces; val must not be NULL. 0, or -1 on ENOMEM. */
int cmp_map_put(struct cmp_map *m, struct cmp_map_key k, void *val);
/* Removes k if it maps to val (NULL: whatever it maps to). */
void cmp_map_del(struct cmp_map *m, struct cmp_map_key k, const void *val);
void cmp_map_free(struct cmp_map *m);

#endif
