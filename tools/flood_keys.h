/*
 * flood_keys.h - the hash-flooding attacker's side, for the benchmark
 * (uscm-bench-engine --flood) and the map test: keys that all collide
 * under the engine's hash as it was before its keyed hash (an unkeyed mixer of
 * the 128-bit key, cm_proto/cmp_map.c at b7567d6), computed offline as a
 * hostile peer could. The by_remote key is (remote comm ID, remote CA
 * GUID) and both halves come from the peer's REQ, so it controls all 128
 * bits; the mixer is a bijection, so inverting it gives, for any comm ID
 * a, the GUID b that lands on a chosen hash.
 */
#ifndef USCM_TOOLS_FLOOD_KEYS_H
#define USCM_TOOLS_FLOOD_KEYS_H

#include <stddef.h>
#include <stdint.h>

#define FLOOD_G 0x9E3779B97F4A7C15ULL
#define FLOOD_C 0x632BE59BD9B4E019ULL
#define FLOOD_M 0xBF58476D1CE4E5B9ULL

/* The old unkeyed hash of (a, b). */
static inline uint64_t flood_old_hash(uint64_t a, uint64_t b)
{
	uint64_t h = a * FLOOD_G ^ (b + FLOOD_C);

	h ^= h >> 31;
	h *= FLOOD_M;
	h ^= h >> 29;
	return h;
}

/* Undoes x ^= x >> s. */
static inline uint64_t flood_unxorshift(uint64_t y, unsigned s)
{
	uint64_t x = y;

	for (unsigned k = s; k < 64; k += s)
		x ^= y >> k;
	return x;
}

/* The inverse of odd m modulo 2^64 (Newton: each step doubles the bits). */
static inline uint64_t flood_inv(uint64_t m)
{
	uint64_t x = m;

	for (int i = 0; i < 6; i++)
		x *= 2 - m * x;
	return x;
}

/* n keys (a[i], b[i]), distinct comm IDs 1..n, all with old hash h. */
static inline void flood_old_keys(size_t n, uint64_t h, uint64_t *a, uint64_t *b)
{
	uint64_t x = flood_unxorshift(h, 29);

	x *= flood_inv(FLOOD_M);
	x = flood_unxorshift(x, 31); /* the value before the mixing */
	for (size_t i = 0; i < n; i++) {
		a[i] = (uint32_t)(i + 1);
		b[i] = (x ^ a[i] * FLOOD_G) - FLOOD_C;
	}
}

#endif
