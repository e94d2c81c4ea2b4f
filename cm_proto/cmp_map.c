/* cmp_map.c - see cmp_map.h. */
#include "cm_proto/cmp_map.h"

#include <string.h>

#include "cm_proto/cmp_siphash.h"

static size_t hash(const struct cmp_map *m, struct cmp_map_key k)
{
	return (size_t)cmp_siphash24_u128(m->k0, m->k1, k.a, k.b);
}

void cmp_map_init(struct cmp_map *m, const struct cmp_mem *mem, uint64_t k0, uint64_t k1)
{
	memset(m, 0, sizeof(*m));
	m->mem = mem;
	m->k0 = k0;
	m->k1 = k1;
}

static int key_eq(struct cmp_map_key x, struct cmp_map_key y)
{
	return x.a == y.a && x.b == y.b;
}

void *cmp_map_get(const struct cmp_map *m, struct cmp_map_key k)
{
	if (!m->cap)
		return NULL;
	for (size_t i = hash(m, k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		const struct cmp_map_slot *s = &m->slots[i];
		if (!s->val)
			return NULL;
		if (key_eq(s->key, k))
			return s->val;
	}
}

/* The load factor stays at most 3/4. */
static int fits(size_t n, size_t cap)
{
	return n * 4 <= cap * 3;
}

static int grow(struct cmp_map *m, size_t ncap)
{
	struct cmp_map_slot *ns = cmp_calloc(m->mem, ncap, sizeof(*ns));

	if (!ns)
		return -1;
	for (size_t i = 0; i < m->cap; i++) {
		struct cmp_map_slot *s = &m->slots[i];
		if (!s->val)
			continue;
		size_t j = hash(m, s->key) & (ncap - 1);
		while (ns[j].val)
			j = (j + 1) & (ncap - 1);
		ns[j] = *s;
	}
	cmp_free(m->mem, m->slots);
	m->slots = ns;
	m->cap = ncap;
	return 0;
}

int cmp_map_reserve(struct cmp_map *m, size_t n)
{
	size_t ncap = m->cap ? m->cap : 64;

	if (fits(n, m->cap))
		return 0;
	while (!fits(n, ncap))
		ncap *= 2;
	return grow(m, ncap);
}

int cmp_map_put(struct cmp_map *m, struct cmp_map_key k, void *val)
{
	if (cmp_map_reserve(m, m->len + 1))
		return -1;
	for (size_t i = hash(m, k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct cmp_map_slot *s = &m->slots[i];
		if (!s->val) {
			s->key = k;
			s->val = val;
			m->len++;
			return 0;
		}
		if (key_eq(s->key, k)) {
			s->val = val;
			return 0;
		}
	}
}

void cmp_map_del(struct cmp_map *m, struct cmp_map_key k, const void *val)
{
	size_t i, mask = m->cap - 1;

	if (!m->cap)
		return;
	for (i = hash(m, k) & mask;; i = (i + 1) & mask) {
		if (!m->slots[i].val)
			return;
		if (key_eq(m->slots[i].key, k))
			break;
	}
	if (val && m->slots[i].val != val)
		return;
	/* Backward-shift: pull later members of the cluster into the hole when
	 * their home position allows it. */
	for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
		struct cmp_map_slot *s = &m->slots[j];
		if (!s->val)
			break;
		size_t home = hash(m, s->key) & mask;
		/* s may move to i if i lies cyclically in [home, j). */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slots[i] = *s;
			i = j;
		}
	}
	m->slots[i].val = NULL;
	m->len--;
}

void cmp_map_free(struct cmp_map *m)
{
	cmp_free(m->mem, m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}
