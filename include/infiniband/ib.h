/*
 * infiniband/ib.h - the AF_IB socket address family, as librdmacm's
 * applications see it (written for uscm; layout-compatible with the
 * rdma-core header of the same name: sockaddr_ib is 48 bytes, family at 0,
 * pkey 2, flowinfo 4, GID 8, service ID 24, service ID mask 32, scope 40).
 */
#ifndef USCM_INFINIBAND_IB_H
#define USCM_INFINIBAND_IB_H

#include <stdint.h>
#include <string.h>
#include <linux/types.h>

#ifndef AF_IB
#define AF_IB 27
#endif
#ifndef PF_IB
#define PF_IB AF_IB
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* A 128-bit IB address (a GID), viewable at four widths. */
struct ib_addr {
	union {
		__u8 uib_addr8[16];
		__be16 uib_addr16[8];
		__be32 uib_addr32[4];
		__be64 uib_addr64[2];
	} ib_u;
#define sib_addr8 ib_u.uib_addr8
#define sib_addr16 ib_u.uib_addr16
#define sib_addr32 ib_u.uib_addr32
#define sib_addr64 ib_u.uib_addr64
#define sib_raw ib_u.uib_addr8
#define sib_subnet_prefix ib_u.uib_addr64[0]
#define sib_interface_id ib_u.uib_addr64[1]
};

/* 1 when every bit is zero (the AF_IB wildcard). */
static inline int ib_addr_any(const struct ib_addr *a)
{
	return (a->sib_addr64[0] | a->sib_addr64[1]) == 0;
}

/* 1 for ::1, the AF_IB loopback. */
static inline int ib_addr_loopback(const struct ib_addr *a)
{
	static const __u8 one[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };

	return memcmp(a->sib_addr8, one, sizeof(one)) == 0;
}

/* Builds an address from four 32-bit words already in network order. */
static inline void ib_addr_set(struct ib_addr *a, __be32 w1, __be32 w2, __be32 w3, __be32 w4)
{
	a->sib_addr32[0] = w1;
	a->sib_addr32[1] = w2;
	a->sib_addr32[2] = w3;
	a->sib_addr32[3] = w4;
}

/* 0 when equal, like memcmp. */
static inline int ib_addr_cmp(const struct ib_addr *a1, const struct ib_addr *a2)
{
	return memcmp(a1, a2, sizeof(struct ib_addr));
}

struct sockaddr_ib {
	unsigned short int sib_family; /* AF_IB */
	__be16 sib_pkey;
	__be32 sib_flowinfo;
	struct ib_addr sib_addr;
	__be64 sib_sid;
	__be64 sib_sid_mask;
	__u64 sib_scope_id;
};

#ifdef __cplusplus
}
#endif

#endif
