/*
 * SipHash-2-4 (cm_proto/cmp_siphash.c) against the test vector the paper
 * publishes (Aumasson and Bernstein, "SipHash: a fast short-input PRF",
 * appendix A: key 00 01 .. 0f, the 15-byte message 00 01 .. 0e, result
 * a129ca6149be45e5), and the 128-bit fast path the hash tables use
 * against the byte-wise function.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "cm_proto/cmp_siphash.h"

static uint64_t le64(const uint8_t *p)
{
	uint64_t w = 0;

	for (int i = 7; i >= 0; i--)
		w = w << 8 | p[i];
	return w;
}

static void paper_key(uint64_t *k0, uint64_t *k1)
{
	uint8_t key[16];

	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	*k0 = le64(key);
	*k1 = le64(key + 8);
}

Test(siphash, paper_test_vector)
{
	uint8_t msg[15];
	uint64_t k0, k1;

	paper_key(&k0, &k1);
	cr_assert_eq(k0, 0x0706050403020100ULL, "the paper's k0");
	cr_assert_eq(k1, 0x0f0e0d0c0b0a0908ULL, "the paper's k1");
	for (int i = 0; i < 15; i++)
		msg[i] = (uint8_t)i;
	cr_assert_eq(cmp_siphash24(k0, k1, msg, sizeof(msg)), 0xa129ca6149be45e5ULL,
		     "got %016llx", (unsigned long long)cmp_siphash24(k0, k1, msg, sizeof(msg)));
}

/* The tables' path hashes (a, b) as the 16 little-endian bytes of a then
 * b: it must agree with the byte-wise function for any key and message. */
Test(siphash, u128_is_the_16_byte_message)
{
	uint64_t k0, k1, x = 0x9E3779B97F4A7C15ULL;

	paper_key(&k0, &k1);
	for (int i = 0; i < 1000; i++) {
		uint8_t m[16];
		uint64_t a = x * (uint64_t)(i + 1), b = ~a ^ ((uint64_t)i << 40);

		for (int j = 0; j < 8; j++) {
			m[j] = (uint8_t)(a >> (8 * j));
			m[8 + j] = (uint8_t)(b >> (8 * j));
		}
		cr_assert_eq(cmp_siphash24_u128(k0, k1, a, b), cmp_siphash24(k0, k1, m, 16),
			     "message %d", i);
		k0 += 0x1234567ULL; /* and a different key each time */
		k1 ^= k0 << 7;
	}
}

/* The length goes into the last word: messages that differ only by
 * trailing zero bytes, or only in the key, hash differently. */
Test(siphash, length_and_key_matter)
{
	static const uint8_t zeros[16];
	uint64_t k0, k1, seen[17];

	paper_key(&k0, &k1);
	for (size_t n = 0; n <= 16; n++) {
		seen[n] = cmp_siphash24(k0, k1, zeros, n);
		for (size_t m = 0; m < n; m++)
			cr_assert_neq(seen[n], seen[m], "lengths %zu and %zu collide", n, m);
	}
	cr_assert_neq(cmp_siphash24_u128(k0, k1, 1, 2), cmp_siphash24_u128(k0 ^ 1, k1, 1, 2));
	cr_assert_neq(cmp_siphash24_u128(k0, k1, 1, 2), cmp_siphash24_u128(k0, k1 ^ 1, 1, 2));
	cr_assert_neq(cmp_siphash24_u128(k0, k1, 1, 2), cmp_siphash24_u128(k0, k1, 2, 1));
}
