/*
 * cmp_siphash.h - SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast
 * short-input PRF", INDOCRYPT 2012): a keyed 64-bit hash. The engine's hash
 * tables index remote comm IDs and GUIDs that the peer chooses; keyed with
 * a secret, their bucket is unpredictable, so nobody can compute colliding
 * keys offline (hash flooding). Also the engine's PRF for comm IDs and key
 * derivation.
 */
#ifndef USCM_CMP_SIPHASH_H
#define USCM_CMP_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of len bytes under a 128-bit key (k0, k1: the key's two
 * halves read little-endian, as the paper does). */
uint64_t cmp_siphash24(uint64_t k0, uint64_t k1, const void *data, size_t len);

/* The same for the 16-byte message a, b (each little-endian): what the hash
 * tables hash, without going through bytes. Equal to cmp_siphash24() of
 * those 16 bytes. */
uint64_t cmp_siphash24_u128(uint64_t k0, uint64_t k1, uint64_t a, uint64_t b);

#endif
