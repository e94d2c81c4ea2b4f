/*
 * The engine's hash map (cm_proto/cmp_map.c): reserve, put/get/del across
 * growth and backward-shift deletion, and the keyed hash against hash
 * flooding: keys that all collide under the old unkeyed hash
 * (tools/flood_keys.h computes them as a hostile peer would) spread like
 * random keys once the hash is SipHash under a secret key. Structural
 * checks (probe lengths), not timings: uscm-bench-engine --flood times it.
 */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "cm_proto/cmp_map.h"
#include "cm_proto/cmp_siphash.h"
#include "tools/flood_keys.h"

static unsigned long allocs;

static void *count_calloc(size_t n, size_t m, void *u)
{
	(void)u;
	allocs++;
	return calloc(n, m);
}

static void *count_malloc(size_t n, void *u)
{
	(void)u;
	allocs++;
	return malloc(n);
}

static void *count_realloc(void *p, size_t n, void *u)
{
	(void)u;
	allocs++;
	return realloc(p, n);
}

static void plain_free(void *p, void *u)
{
	(void)u;
	free(p);
}

static const struct cmp_mem counting = { NULL, count_malloc, plain_free, count_calloc,
					 count_realloc };

static void *val(size_t i)
{
	return (void *)(uintptr_t)(i + 1);
}

/* How far k sits from its home slot. */
static size_t displacement(const struct cmp_map *m, struct cmp_map_key k)
{
	size_t home = (size_t)cmp_siphash24_u128(m->k0, m->k1, k.a, k.b) & (m->cap - 1);

	for (size_t d = 0; d < m->cap; d++) {
		const struct cmp_map_slot *s = &m->slots[(home + d) & (m->cap - 1)];
		if (s->val && s->key.a == k.a && s->key.b == k.b)
			return d;
	}
	cr_assert_fail("key not found");
	return 0;
}

Test(map, reserve_then_puts_do_not_allocate)
{
	struct cmp_map m;

	cmp_map_init(&m, &counting, 1, 2);
	cr_assert_eq(cmp_map_reserve(&m, 3000), 0);
	cr_assert_geq(m.cap * 3, 3000u * 4, "reserve leaves the load factor at most 3/4");
	allocs = 0;
	/* up to the load factor of what was reserved: no allocation */
	size_t full = m.cap * 3 / 4;
	for (size_t i = 0; i < full; i++)
		cr_assert_eq(cmp_map_put(&m, (struct cmp_map_key){ i, ~i }, val(i)), 0);
	cr_assert_eq(allocs, 0, "%lu allocations after reserve", allocs);
	cr_assert_eq(cmp_map_put(&m, (struct cmp_map_key){ full, 0 }, val(full)), 0);
	cr_assert_eq(allocs, 1, "one more grows the table");
	cmp_map_free(&m);
}

Test(map, put_get_del_through_growth)
{
	struct cmp_map m;
	const size_t n = 5000;

	cmp_map_init(&m, cmp_mem_default(), 0x1234, 0x5678);
	for (size_t i = 0; i < n; i++)
		cr_assert_eq(cmp_map_put(&m, (struct cmp_map_key){ i * 7919, i }, val(i)), 0);
	cr_assert_eq(m.len, n);
	for (size_t i = 0; i < n; i += 3)
		cmp_map_del(&m, (struct cmp_map_key){ i * 7919, i }, NULL);
	for (size_t i = 0; i < n; i++) {
		void *v = cmp_map_get(&m, (struct cmp_map_key){ i * 7919, i });
		cr_assert_eq(v, i % 3 ? val(i) : NULL, "key %zu", i);
	}
	/* del with the wrong value leaves the entry */
	cmp_map_del(&m, (struct cmp_map_key){ 7919, 1 }, val(99));
	cr_assert_eq(cmp_map_get(&m, (struct cmp_map_key){ 7919, 1 }), val(1));
	cmp_map_free(&m);
}

/* 4000 keys a peer can compute offline so that the old hash sends them all
 * to one home slot: under SipHash with a secret key they must land like
 * random keys, so no lookup walks a long cluster. */
Test(map, flood_keys_of_the_old_hash_spread)
{
	enum { N = 4000 };
	static uint64_t a[N], b[N];
	struct cmp_map m, r;
	size_t worst = 0, worst_random = 0, sum = 0, sum_random = 0;

	flood_old_keys(N, 0xC0FFEE, a, b);
	for (size_t i = 1; i < N; i++)
		cr_assert_eq(flood_old_hash(a[i], b[i]), flood_old_hash(a[0], b[0]),
			     "the generator's keys must collide under the old hash");
	cmp_map_init(&m, cmp_mem_default(), 0xA5A5A5A5DEADBEEFULL, 0x0123456789ABCDEFULL);
	cmp_map_init(&r, cmp_mem_default(), 0xA5A5A5A5DEADBEEFULL, 0x0123456789ABCDEFULL);
	for (size_t i = 0; i < N; i++) {
		cr_assert_eq(cmp_map_put(&m, (struct cmp_map_key){ a[i], b[i] }, val(i)), 0);
		cr_assert_eq(cmp_map_put(&r, (struct cmp_map_key){ a[i], i * 0x9E3779B97F4A7C15ULL },
					 val(i)), 0);
	}
	for (size_t i = 0; i < N; i++) {
		size_t d = displacement(&m, (struct cmp_map_key){ a[i], b[i] });
		size_t dr = displacement(&r, (struct cmp_map_key){ a[i], i * 0x9E3779B97F4A7C15ULL });

		sum += d;
		sum_random += dr;
		worst = d > worst ? d : worst;
		worst_random = dr > worst_random ? dr : worst_random;
	}
	cr_log_info("flood keys: mean probe %.2f, worst %zu; random keys: mean %.2f, worst %zu\n",
		    (double)sum / N, worst, (double)sum_random / N, worst_random);
	/* Unkeyed, every one of them would sit in one cluster: mean N/2. */
	cr_assert_lt(worst, 100, "a probe of %zu slots for %d keys", worst, N);
	cr_assert_lt(sum, 4 * sum_random + N, "flood keys probe %zu, random ones %zu", sum,
		     sum_random);
	cmp_map_free(&m);
	cmp_map_free(&r);
}

/* The key decides the layout: two maps with different keys put the same
 * keys in different slots (so a layout learned from one engine says
 * nothing about another). */
Test(map, the_key_decides_the_layout)
{
	struct cmp_map x, y;
	size_t same = 0;

	cmp_map_init(&x, cmp_mem_default(), 1, 2);
	cmp_map_init(&y, cmp_mem_default(), 1, 3);
	for (size_t i = 0; i < 40; i++) {
		cr_assert_eq(cmp_map_put(&x, (struct cmp_map_key){ i, 0 }, val(i)), 0);
		cr_assert_eq(cmp_map_put(&y, (struct cmp_map_key){ i, 0 }, val(i)), 0);
	}
	cr_assert_eq(x.cap, y.cap);
	for (size_t i = 0; i < x.cap; i++)
		same += x.slots[i].val && x.slots[i].val == y.slots[i].val;
	cr_assert_lt(same, 10, "%zu of 40 keys in the same slot", same);
	cmp_map_free(&x);
	cmp_map_free(&y);
}
