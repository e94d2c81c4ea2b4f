/*
 * rdma_core_exported.h - prototypes of functions Debian's libibverbs.so.1
 * exports in its public version nodes (IBVERBS_1.x) but whose declarations
 * rdma-core does not install: libibverbs/driver.h (the sysfs and fork
 * helpers, the legacy driver registration) and libibverbs/marshall.h (the
 * kern-ABI conversions). Written from those headers of rdma-core 44, for
 * sim/abi/check.sh only: the simulated fabric's sources never include this
 * file, so its prototypes are the real library's, not the sim's.
 */
#ifndef USCM_SIM_ABI_RDMA_CORE_EXPORTED_H
#define USCM_SIM_ABI_RDMA_CORE_EXPORTED_H

#include <stddef.h>
#include <infiniband/verbs.h>
#include <infiniband/sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/ib_user_sa.h>

/* driver.h */
const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
/* IBVERBS_1.1 only: the driver interface before rdma-core 13 */
void ibv_register_driver(const char *name,
			 struct ibv_device *(*init_func)(const char *uverbs_sys_path, int abi_version));

/* marshall.h */
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);

#endif
