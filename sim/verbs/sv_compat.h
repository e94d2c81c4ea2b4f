/*
 * sv_compat.h - symbol versions. The version script (libibverbs.map) binds
 * each exported name to its newest node as the default (name@@IBVERBS_1.1);
 * the names libibverbs exports in both IBVERBS_1.0 and IBVERBS_1.1 get both
 * versions through two aliases and .symver (name@IBVERBS_1.0 and
 * name@@IBVERBS_1.1), and are listed under both nodes of the script (a name
 * listed in two nodes without .symver would be bound to the first only).
 */
#ifndef USCM_SIM_SV_COMPAT_H
#define USCM_SIM_SV_COMPAT_H

#include <infiniband/verbs.h>

#define SV_COMPAT_1_0(name)                                                          \
	extern __typeof__(name) sv_compat10_##name                                   \
		__attribute__((alias(#name), visibility("default")));                \
	extern __typeof__(name) sv_compat11_##name                                   \
		__attribute__((alias(#name), visibility("default")));                \
	__asm__(".symver sv_compat10_" #name ", " #name "@IBVERBS_1.0");             \
	__asm__(".symver sv_compat11_" #name ", " #name "@@IBVERBS_1.1");

/* IBVERBS_PRIVATE_34 (infiniband/driver.h, not installed by libibverbs-dev):
 * *type is enum ibv_gid_type_sysfs: 0 = IB / RoCE v1, 1 = RoCE v2. */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
		       int *type);

/* Exported by libibverbs without a declaration in verbs.h (rdma-core's
 * driver.h; checked against those prototypes, sim/abi/). */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);

#endif
