/*
 * bench_flood.c - uscm-bench-engine --flood N: lookup cost in the engine's
 * hash map (cm_proto/cmp_map.c, SipHash-2-4 under a secret key) for N keys
 * of three kinds, each in a map of its own:
 *
 *   random          comm IDs and GUIDs as honest peers have them;
 *   old-hash flood  keys that all collide under the unkeyed hash the map
 *                   had before its keyed hash (tools/flood_keys.h: computed
 *                   offline, as a hostile peer could);
 *   known-key flood keys that collide under the map's own hash, found by
 *                   brute force with its key in hand: what an unkeyed (or
 *                   leaked-key) hash lets any peer do, for contrast.
 *
 * ns per lookup is CPU time over repeated rounds of looking every key up
 * (hits); the mean probe is how many slots past its home a key sits. The
 * keyed map keeps the first two rows alike; the third shows the walk the
 * old hash allowed. Figures, not a pass/fail test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cm_proto/cmp_map.h"
#include "cm_proto/cmp_siphash.h"
#include "tools/bench_flood.h"
#include "tools/flood_keys.h"

static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static uint64_t sm64(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static size_t home(const struct cmp_map *m, uint64_t a, uint64_t b)
{
	return (size_t)cmp_siphash24_u128(m->k0, m->k1, a, b) & (m->cap - 1);
}

struct row {
	const char *name;
	double ns, probe;
};

/* Fills a map with the n keys and measures it. */
static int measure(const struct cmp_map *proto, const uint64_t *a, const uint64_t *b, size_t n,
		   struct row *r)
{
	struct cmp_map m = *proto;
	double t0, spent = 0, probes = 0;
	size_t rounds = 0;
	uintptr_t sink = 0;

	if (cmp_map_reserve(&m, n))
		return -1;
	for (size_t i = 0; i < n; i++)
		if (cmp_map_put(&m, (struct cmp_map_key){ a[i], b[i] }, (void *)(uintptr_t)(i + 1)))
			return -1;
	for (size_t i = 0; i < n; i++) {
		size_t h = home(&m, a[i], b[i]), d = 0;
		while (m.slots[(h + d) & (m.cap - 1)].key.a != a[i] ||
		       m.slots[(h + d) & (m.cap - 1)].key.b != b[i])
			d++;
		probes += (double)d;
	}
	/* At least 0.2 s of lookups, whole rounds. */
	do {
		t0 = cpu_ns();
		for (size_t i = 0; i < n; i++)
			sink += (uintptr_t)cmp_map_get(&m, (struct cmp_map_key){ a[i], b[i] });
		spent += cpu_ns() - t0;
		rounds++;
	} while (spent < 2e8);
	if (sink != rounds * (n * (n + 1) / 2)) /* every lookup must hit */
		return -1;
	r->ns = spent / ((double)rounds * (double)n);
	r->probe = probes / (double)n;
	cmp_map_free(&m);
	return 0;
}

int bench_flood(size_t n)
{
	uint64_t seed = 1, *a = calloc(n, sizeof(*a)), *b = calloc(n, sizeof(*b));
	struct row rows[3] = { { "random (comm ID, GUID)", 0, 0 },
			       { "colliding under the old unkeyed hash", 0, 0 },
			       { "colliding under this map's hash, key known", 0, 0 } };
	struct cmp_map proto;

	if (!a || !b)
		return -1;
	/* The engine derives its key from settings.seed; any secret will do. */
	cmp_map_init(&proto, cmp_mem_default(), sm64(&seed), sm64(&seed));

	for (size_t i = 0; i < n; i++) {
		a[i] = (uint32_t)sm64(&seed);
		b[i] = sm64(&seed);
	}
	if (measure(&proto, a, b, n, &rows[0]))
		return -1;

	flood_old_keys(n, 0xC0FFEE, a, b);
	if (measure(&proto, a, b, n, &rows[1]))
		return -1;

	/* Brute force, as one could against a fixed hash: keys whose home
	 * is slot 0 of a table the size n keys give. */
	struct cmp_map sized = proto;
	if (cmp_map_reserve(&sized, n))
		return -1;
	for (size_t i = 0, cand = 1; i < n; cand++) {
		uint64_t guid = sm64(&seed);
		if (home(&sized, cand, guid) == 0) {
			a[i] = cand;
			b[i++] = guid;
		}
	}
	cmp_map_free(&sized);
	if (measure(&proto, a, b, n, &rows[2]))
		return -1;

	printf("hash flooding: %zu keys per map (SipHash-2-4 keyed map, as the engine's indexes)\n", n);
	printf("%-44s %12s %12s %8s\n", "keys", "ns/lookup", "mean probe", "ratio");
	for (int i = 0; i < 3; i++)
		printf("%-44s %12.1f %12.2f %8.2f\n", rows[i].name, rows[i].ns, rows[i].probe,
		       rows[i].ns / rows[0].ns);
	printf("ratio = ns per lookup / the random keys'; mean probe = slots past the key's home\n");
	printf("old-hash keys cost what random keys cost: the flood is harmless with the key secret;\n"
	       "the last row is the walk the old unkeyed hash gave any peer that sent such keys\n");
	free(a);
	free(b);
	return 0;
}
