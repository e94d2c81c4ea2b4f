/*
 * codec_testutil.h - helpers the codec tests share: a seeded PRNG (so a
 * failing case re-runs exactly), filling every field of a layout with random
 * values that fit its width, and comparing two structs field by field.
 */
#ifndef USCM_CODEC_TESTUTIL_H
#define USCM_CODEC_TESTUTIL_H

#include <criterion/criterion.h>
#include <string.h>

#include "cm_proto/cmp_field.h"

static uint64_t rng_state;

static inline uint64_t rnd(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static inline uint64_t width_mask(unsigned w)
{
	return w >= 64 ? ~0ULL : (1ULL << w) - 1;
}

static inline void fill_random(const struct cmp_layout *l, void *obj)
{
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		uint8_t *p = (uint8_t *)obj + f->offset;

		if (f->kind == CMP_K_RSVD)
			continue;
		if (f->kind == CMP_K_GID || f->kind == CMP_K_BYTES)
			for (unsigned b = 0; b < f->size; b++)
				p[b] = (uint8_t)rnd();
		else
			cmp_field_set_value(f, obj, rnd() & width_mask(f->width));
	}
}

static inline void assert_same(const struct cmp_layout *l, const void *a, const void *b,
			       uint64_t seed)
{
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];

		if (f->kind == CMP_K_RSVD)
			continue;
		if (f->kind == CMP_K_GID || f->kind == CMP_K_BYTES)
			cr_assert(!memcmp((const uint8_t *)a + f->offset,
					  (const uint8_t *)b + f->offset, f->size),
				  "%s.%s differs (seed %llu)", l->name, f->name,
				  (unsigned long long)seed);
		else
			cr_assert_eq(cmp_field_value(f, a), cmp_field_value(f, b),
				     "%s.%s: %llx != %llx (seed %llu)", l->name, f->name,
				     (unsigned long long)cmp_field_value(f, a),
				     (unsigned long long)cmp_field_value(f, b),
				     (unsigned long long)seed);
	}
}

#endif
