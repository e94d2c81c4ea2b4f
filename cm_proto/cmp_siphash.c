/*
 * cmp_siphash.c - SipHash-2-4, written from the description in the paper
 * (section 2): four 64-bit words of state initialised from the key and
 * "somepseudorandomlygeneratedbytes"; each 8-byte little-endian message
 * word m is absorbed as v3 ^= m, two SipRounds, v0 ^= m; the last word
 * carries the leftover bytes and, in its top byte, the length mod 256;
 * then v2 ^= 0xff, four SipRounds, and the result is v0 ^ v1 ^ v2 ^ v3.
 */
#include "cm_proto/cmp_siphash.h"

struct sip {
	uint64_t v0, v1, v2, v3;
};

static inline uint64_t rotl(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

/* Inline: the hash tables hash on every lookup, and a call per round
 * costs as much as the round. */
static inline __attribute__((always_inline)) void sip_round(struct sip *s)
{
	s->v0 += s->v1;
	s->v1 = rotl(s->v1, 13);
	s->v1 ^= s->v0;
	s->v0 = rotl(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = rotl(s->v3, 16);
	s->v3 ^= s->v2;
	s->v0 += s->v3;
	s->v3 = rotl(s->v3, 21);
	s->v3 ^= s->v0;
	s->v2 += s->v1;
	s->v1 = rotl(s->v1, 17);
	s->v1 ^= s->v2;
	s->v2 = rotl(s->v2, 32);
}

static inline __attribute__((always_inline)) void sip_init(struct sip *s, uint64_t k0, uint64_t k1)
{
	s->v0 = k0 ^ 0x736f6d6570736575ULL; /* "somepseu" */
	s->v1 = k1 ^ 0x646f72616e646f6dULL; /* "dorandom" */
	s->v2 = k0 ^ 0x6c7967656e657261ULL; /* "lygenera" */
	s->v3 = k1 ^ 0x7465646279746573ULL; /* "tedbytes" */
}

/* c = 2 compression rounds per word. */
static inline __attribute__((always_inline)) void sip_absorb(struct sip *s, uint64_t m)
{
	s->v3 ^= m;
	sip_round(s);
	sip_round(s);
	s->v0 ^= m;
}

/* d = 4 finalization rounds. */
static inline __attribute__((always_inline)) uint64_t sip_final(struct sip *s)
{
	s->v2 ^= 0xff;
	sip_round(s);
	sip_round(s);
	sip_round(s);
	sip_round(s);
	return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

static uint64_t load_le(const uint8_t *p, size_t n)
{
	uint64_t w = 0;

	for (size_t i = 0; i < n; i++)
		w |= (uint64_t)p[i] << (8 * i);
	return w;
}

uint64_t cmp_siphash24(uint64_t k0, uint64_t k1, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t full = len & ~(size_t)7;
	struct sip s;

	sip_init(&s, k0, k1);
	for (size_t i = 0; i < full; i += 8)
		sip_absorb(&s, load_le(p + i, 8));
	sip_absorb(&s, load_le(p + full, len - full) | (uint64_t)(len & 0xff) << 56);
	return sip_final(&s);
}

uint64_t cmp_siphash24_u128(uint64_t k0, uint64_t k1, uint64_t a, uint64_t b)
{
	struct sip s;

	sip_init(&s, k0, k1);
	sip_absorb(&s, a);
	sip_absorb(&s, b);
	sip_absorb(&s, (uint64_t)16 << 56); /* no leftover bytes, length 16 */
	return sip_final(&s);
}
