/*
 * sv_private.c - the provider-side ABI of libibverbs: IBVERBS_PRIVATE_34 (less
 * ibv_query_gid_type, in sv_device.c) and the kernel-ABI marshalling helpers of
 * IBVERBS_1.0/1.1 (ibv_copy_*_kern), plus the legacy ibv_register_driver@IBVERBS_1.1.
 *
 * Why they exist here: unmodified programs link provider libraries directly
 * (perftest, libfabric and UCX link libmlx5/libefa; pyverbs links libmlx5), and
 * the dynamic linker refuses to load those unless every symbol version they
 * import is defined. rdma-core declares these in infiniband/driver.h, which
 * Debian does not install; the prototypes below follow its ABI (rdma-core 44),
 * with the command/response structures as incomplete types.
 *
 * What they do: a provider's constructor calls verbs_register_driver_34(ops);
 * it is accepted and kept (sv_registered_drivers()), but no simulated device is
 * ever matched against a provider: the only device is the fabric's own
 * (sv_device.c), and a provider context can never be made, because
 * _verbs_init_and_alloc_context fails with EOPNOTSUPP (there is no uverbs
 * character device to send commands to). So the ibv_cmd_* entry points, which
 * a provider calls only on a context it made, are never reached for a
 * simulated device; each fails with EOPNOTSUPP as its return value (the
 * errno convention of ibv_cmd_*). The rest are real implementations: the log
 * (VERBS_LOG_LEVEL / VERBS_LOG_FILE), verbs_init_cq, __ioctl_final_num_attrs,
 * the ibv_copy_*_kern conversions; verbs_open_device opens a simulated device
 * (the provider private data has no provider to go to and is ignored).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include "sv.h"

/* Types of infiniband/driver.h, kern-abi.h and cmd_ioctl.h: opaque here. */
struct verbs_device_ops;
struct verbs_context_ops;
struct verbs_sysfs_dev;
struct verbs_xrcd;
struct verbs_mr;
struct verbs_cq;
struct verbs_srq;
struct verbs_qp;
struct verbs_flow_action;
struct verbs_counters;
struct verbs_dm;
struct ibv_get_context;
struct ibv_alloc_pd;
struct ibv_open_xrcd;
struct ibv_reg_mr;
struct ibv_rereg_mr;
struct ibv_alloc_mw;
struct ibv_create_cq;
struct ibv_create_cq_ex;
struct ibv_resize_cq;
struct ibv_modify_cq;
struct ibv_create_srq;
struct ibv_create_xsrq;
struct ibv_modify_srq;
struct ibv_query_srq;
struct ibv_create_qp;
struct ibv_create_qp_ex;
struct ibv_open_qp;
struct ibv_query_qp;
struct ibv_modify_qp;
struct ibv_modify_qp_ex;
struct ibv_query_port;
struct ibv_create_wq;
struct ibv_modify_wq;
struct ib_uverbs_ex_query_device_resp;

/* ---- driver registration ------------------------------------------------------ */

#define SV_MAX_DRIVERS 64
static pthread_mutex_t g_drv_lock = PTHREAD_MUTEX_INITIALIZER;
static const struct verbs_device_ops *g_drivers[SV_MAX_DRIVERS];
static unsigned g_ndrivers;

/* Called by each provider's constructor when it is loaded (a program linking
 * libmlx5 directly, say). Kept, never matched: see the head of this file. */
void verbs_register_driver_34(const struct verbs_device_ops *ops);
SV_EXPORT void verbs_register_driver_34(const struct verbs_device_ops *ops)
{
	pthread_mutex_lock(&g_drv_lock);
	if (ops && g_ndrivers < SV_MAX_DRIVERS)
		g_drivers[g_ndrivers++] = ops;
	pthread_mutex_unlock(&g_drv_lock);
}

unsigned sv_registered_drivers(void)
{
	unsigned n;

	pthread_mutex_lock(&g_drv_lock);
	n = g_ndrivers;
	pthread_mutex_unlock(&g_drv_lock);
	return n;
}

/* IBVERBS_1.1, non-default version only: the pre-rdma-core-13 driver
 * interface; it has done nothing since (old libfabric usnic called it). */
/* The type spelled out, not a typedef of ours: sim/abi/ compares this
 * prototype, as the compiler prints it, with rdma-core's. */
void sv_ibv_register_driver_1_1(const char *name,
				struct ibv_device *(*init)(const char *path, int abi));
SV_EXPORT void sv_ibv_register_driver_1_1(const char *name,
					  struct ibv_device *(*init)(const char *path, int abi))
{
	(void)name;
	(void)init;
}
__asm__(".symver sv_ibv_register_driver_1_1, ibv_register_driver@IBVERBS_1.1");

/* ---- logging ------------------------------------------------------------------- */

static pthread_once_t g_log_once = PTHREAD_ONCE_INIT;
static unsigned long g_log_level;
static FILE *g_log_fp;

static void log_init(void)
{
	const char *lvl = getenv("VERBS_LOG_LEVEL");
	const char *file = getenv("VERBS_LOG_FILE");

	g_log_level = lvl ? strtoul(lvl, NULL, 0) : 0;
	g_log_fp = stderr;
	if (file) {
		FILE *fp = fopen(file, "a");

		if (fp)
			g_log_fp = fp;
	}
}

void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...);
SV_EXPORT void __verbs_log(struct verbs_context *ctx, uint32_t level, const char *fmt, ...)
{
	int e = errno;
	va_list ap;

	(void)ctx;
	pthread_once(&g_log_once, log_init);
	if (level <= g_log_level) {
		va_start(ap, fmt);
		vfprintf(g_log_fp, fmt, ap);
		va_end(ap);
	}
	errno = e;
}

/* ---- context and object helpers ------------------------------------------------- */

extern bool verbs_allow_disassociate_destroy;
/* cmd.c's flag: destroy commands that fail because the device was
 * disassociated count as done. No device is ever disassociated here. */
SV_EXPORT bool verbs_allow_disassociate_destroy;

void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd, size_t alloc_size,
				    struct verbs_context *context_offset, uint32_t driver_id);
SV_EXPORT void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
					      size_t alloc_size,
					      struct verbs_context *context_offset,
					      uint32_t driver_id)
{
	(void)device;
	(void)cmd_fd;
	(void)alloc_size;
	(void)context_offset;
	(void)driver_id;
	errno = EOPNOTSUPP;
	return NULL;
}

/* These two take only a context that _verbs_init_and_alloc_context made,
 * and it never makes one: nothing to undo or to fill. */
void verbs_uninit_context(struct verbs_context *context);
SV_EXPORT void verbs_uninit_context(struct verbs_context *context)
{
	(void)context;
}

void verbs_set_ops(struct verbs_context *vctx, const struct verbs_context_ops *ops);
SV_EXPORT void verbs_set_ops(struct verbs_context *vctx, const struct verbs_context_ops *ops)
{
	(void)vctx;
	(void)ops;
}

void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context);
SV_EXPORT void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
			     struct ibv_comp_channel *channel, void *cq_context)
{
	cq->context = context;
	cq->channel = channel;
	if (channel) {
		pthread_mutex_lock(&context->mutex);
		channel->refcnt++;
		pthread_mutex_unlock(&context->mutex);
	}
	cq->cq_context = cq_context;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
}

struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data);
SV_EXPORT struct ibv_context *verbs_open_device(struct ibv_device *device, void *private_data)
{
	(void)private_data;
	if (!sv_is_device(device)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return ibv_open_device(device);
}

int ibv_read_ibdev_sysfs_file(char *buf, size_t size, struct verbs_sysfs_dev *sysfs_dev,
			      const char *fnfmt, ...);
SV_EXPORT int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
					struct verbs_sysfs_dev *sysfs_dev,
					const char *fnfmt, ...)
{
	/* a verbs_sysfs_dev comes only from the provider matching that never
	 * happens here */
	(void)buf;
	(void)size;
	(void)fnfmt;
	errno = sysfs_dev ? EOPNOTSUPP : EINVAL;
	return -1;
}

/* ---- ioctl command buffers --------------------------------------------------------- */

/* The layout of cmd_ioctl.h's struct ibv_command_buffer (what the inline
 * builders in a provider fill): a chain of blocks of attributes. */
struct sv_command_buffer {
	struct sv_command_buffer *next;
	struct ib_uverbs_attr *next_attr;
	struct ib_uverbs_attr *last_attr;
	uint8_t uhw_in_idx, uhw_out_idx, uhw_in_headroom_dwords, uhw_out_headroom_dwords;
	uint8_t flags; /* buffer_error:1, fallback_require_ex:1, fallback_ioctl_only:1 */
	struct ib_uverbs_ioctl_hdr hdr;
};

unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, struct sv_command_buffer *link);
SV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs,
					       struct sv_command_buffer *link)
{
	for (; link; link = link->next)
		num_attrs += (unsigned)(link->next_attr - link->hdr.attrs);
	return num_attrs;
}

/* No uverbs character device: no command reaches a kernel. */
int execute_ioctl(struct ibv_context *context, struct sv_command_buffer *cmd);
SV_EXPORT int execute_ioctl(struct ibv_context *context, struct sv_command_buffer *cmd)
{
	(void)context;
	(void)cmd;
	return EOPNOTSUPP;
}

/* ---- ibv_cmd_*: provider commands, EOPNOTSUPP (errno as return value) ---------- */

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

#define SV_CMD(name, ...)                                                            \
	int name(__VA_ARGS__);                                                       \
	SV_EXPORT int name(__VA_ARGS__)                                              \
	{                                                                            \
		return EOPNOTSUPP;                                                   \
	}

SV_CMD(ibv_cmd_get_context, struct verbs_context *context, struct ibv_get_context *cmd,
       size_t cmd_size, struct ib_uverbs_get_context_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_query_context, struct ibv_context *ctx, struct sv_command_buffer *driver)
SV_CMD(ibv_cmd_create_flow_action_esp, struct ibv_context *ctx,
       struct ibv_flow_action_esp_attr *attr, struct verbs_flow_action *flow_action,
       struct sv_command_buffer *driver)
SV_CMD(ibv_cmd_modify_flow_action_esp, struct verbs_flow_action *flow_action,
       struct ibv_flow_action_esp_attr *attr, struct sv_command_buffer *driver)
SV_CMD(ibv_cmd_destroy_flow_action, struct verbs_flow_action *action)
SV_CMD(ibv_cmd_query_device_any, struct ibv_context *context,
       const struct ibv_query_device_ex_input *input, struct ibv_device_attr_ex *attr,
       size_t attr_size, struct ib_uverbs_ex_query_device_resp *resp, size_t *resp_size)
SV_CMD(ibv_cmd_query_port, struct ibv_context *context, uint8_t port_num,
       struct ibv_port_attr *port_attr, struct ibv_query_port *cmd, size_t cmd_size)
SV_CMD(ibv_cmd_alloc_pd, struct ibv_context *context, struct ibv_pd *pd,
       struct ibv_alloc_pd *cmd, size_t cmd_size, struct ib_uverbs_alloc_pd_resp *resp,
       size_t resp_size)
SV_CMD(ibv_cmd_dealloc_pd, struct ibv_pd *pd)
SV_CMD(ibv_cmd_open_xrcd, struct ibv_context *context, struct verbs_xrcd *xrcd,
       int vxrcd_size, struct ibv_xrcd_init_attr *attr, struct ibv_open_xrcd *cmd,
       size_t cmd_size, struct ib_uverbs_open_xrcd_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_close_xrcd, struct verbs_xrcd *xrcd)
SV_CMD(ibv_cmd_reg_mr, struct ibv_pd *pd, void *addr, size_t length, uint64_t hca_va,
       int access, struct verbs_mr *vmr, struct ibv_reg_mr *cmd, size_t cmd_size,
       struct ib_uverbs_reg_mr_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_rereg_mr, struct verbs_mr *vmr, uint32_t flags, void *addr, size_t length,
       uint64_t hca_va, int access, struct ibv_pd *pd, struct ibv_rereg_mr *cmd,
       size_t cmd_sz, struct ib_uverbs_rereg_mr_resp *resp, size_t resp_sz)
SV_CMD(ibv_cmd_dereg_mr, struct verbs_mr *vmr)
SV_CMD(ibv_cmd_query_mr, struct ibv_pd *pd, struct verbs_mr *vmr, uint32_t mr_handle)
SV_CMD(ibv_cmd_advise_mr, struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
       uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
SV_CMD(ibv_cmd_reg_dmabuf_mr, struct ibv_pd *pd, uint64_t offset, size_t length,
       uint64_t iova, int fd, int access, struct verbs_mr *vmr)
SV_CMD(ibv_cmd_alloc_mw, struct ibv_pd *pd, enum ibv_mw_type type, struct ibv_mw *mw,
       struct ibv_alloc_mw *cmd, size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
       size_t resp_size)
SV_CMD(ibv_cmd_dealloc_mw, struct ibv_mw *mw)
SV_CMD(ibv_cmd_create_cq, struct ibv_context *context, int cqe,
       struct ibv_comp_channel *channel, int comp_vector, struct ibv_cq *cq,
       struct ibv_create_cq *cmd, size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
       size_t resp_size)
SV_CMD(ibv_cmd_create_cq_ex, struct ibv_context *context,
       const struct ibv_cq_init_attr_ex *cq_attr, struct verbs_cq *cq,
       struct ibv_create_cq_ex *cmd, size_t cmd_size,
       struct ib_uverbs_ex_create_cq_resp *resp, size_t resp_size, uint32_t cmd_flags)
SV_CMD(ibv_cmd_poll_cq, struct ibv_cq *cq, int ne, struct ibv_wc *wc)
SV_CMD(ibv_cmd_req_notify_cq, struct ibv_cq *cq, int solicited_only)
SV_CMD(ibv_cmd_resize_cq, struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
       size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_destroy_cq, struct ibv_cq *cq)
SV_CMD(ibv_cmd_modify_cq, struct ibv_cq *cq, struct ibv_modify_cq_attr *attr,
       struct ibv_modify_cq *cmd, size_t cmd_size)
SV_CMD(ibv_cmd_create_srq, struct ibv_pd *pd, struct ibv_srq *srq,
       struct ibv_srq_init_attr *attr, struct ibv_create_srq *cmd, size_t cmd_size,
       struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_create_srq_ex, struct ibv_context *context, struct verbs_srq *srq,
       struct ibv_srq_init_attr_ex *attr_ex, struct ibv_create_xsrq *cmd, size_t cmd_size,
       struct ib_uverbs_create_srq_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_modify_srq, struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
       int srq_attr_mask, struct ibv_modify_srq *cmd, size_t cmd_size)
SV_CMD(ibv_cmd_query_srq, struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
       struct ibv_query_srq *cmd, size_t cmd_size)
SV_CMD(ibv_cmd_destroy_srq, struct ibv_srq *srq)
SV_CMD(ibv_cmd_create_qp, struct ibv_pd *pd, struct ibv_qp *qp,
       struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd, size_t cmd_size,
       struct ib_uverbs_create_qp_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_create_qp_ex, struct ibv_context *context, struct verbs_qp *qp,
       struct ibv_qp_init_attr_ex *attr_ex, struct ibv_create_qp *cmd, size_t cmd_size,
       struct ib_uverbs_create_qp_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_create_qp_ex2, struct ibv_context *context, struct verbs_qp *qp,
       struct ibv_qp_init_attr_ex *qp_attr, struct ibv_create_qp_ex *cmd, size_t cmd_size,
       struct ib_uverbs_ex_create_qp_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_open_qp, struct ibv_context *context, struct verbs_qp *qp, int vqp_sz,
       struct ibv_qp_open_attr *attr, struct ibv_open_qp *cmd, size_t cmd_size,
       struct ib_uverbs_create_qp_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_query_qp, struct ibv_qp *qp, struct ibv_qp_attr *qp_attr, int attr_mask,
       struct ibv_qp_init_attr *qp_init_attr, struct ibv_query_qp *cmd, size_t cmd_size)
SV_CMD(ibv_cmd_modify_qp, struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
       struct ibv_modify_qp *cmd, size_t cmd_size)
SV_CMD(ibv_cmd_modify_qp_ex, struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask,
       struct ibv_modify_qp_ex *cmd, size_t cmd_size,
       struct ib_uverbs_ex_modify_qp_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_destroy_qp, struct ibv_qp *qp)
SV_CMD(ibv_cmd_post_send, struct ibv_qp *ibqp, struct ibv_send_wr *wr,
       struct ibv_send_wr **bad_wr)
SV_CMD(ibv_cmd_post_recv, struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
       struct ibv_recv_wr **bad_wr)
SV_CMD(ibv_cmd_post_srq_recv, struct ibv_srq *srq, struct ibv_recv_wr *wr,
       struct ibv_recv_wr **bad_wr)
SV_CMD(ibv_cmd_create_ah, struct ibv_pd *pd, struct ibv_ah *ah, struct ibv_ah_attr *attr,
       struct ib_uverbs_create_ah_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_destroy_ah, struct ibv_ah *ah)
SV_CMD(ibv_cmd_attach_mcast, struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
SV_CMD(ibv_cmd_detach_mcast, struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
SV_CMD(ibv_cmd_create_flow, struct ibv_qp *qp, struct ibv_flow *flow_id,
       struct ibv_flow_attr *flow_attr, void *ucmd, size_t ucmd_size)
SV_CMD(ibv_cmd_destroy_flow, struct ibv_flow *flow_id)
SV_CMD(ibv_cmd_create_wq, struct ibv_context *context, struct ibv_wq_init_attr *wq_init_attr,
       struct ibv_wq *wq, struct ibv_create_wq *cmd, size_t cmd_size,
       struct ib_uverbs_ex_create_wq_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_modify_wq, struct ibv_wq *wq, struct ibv_wq_attr *attr,
       struct ibv_modify_wq *cmd, size_t cmd_size)
SV_CMD(ibv_cmd_destroy_wq, struct ibv_wq *wq)
SV_CMD(ibv_cmd_create_rwq_ind_table, struct ibv_context *context,
       struct ibv_rwq_ind_table_init_attr *init_attr, struct ibv_rwq_ind_table *rwq_ind_table,
       struct ib_uverbs_ex_create_rwq_ind_table_resp *resp, size_t resp_size)
SV_CMD(ibv_cmd_destroy_rwq_ind_table, struct ibv_rwq_ind_table *rwq_ind_table)
SV_CMD(ibv_cmd_create_counters, struct ibv_context *context,
       struct ibv_counters_init_attr *init_attr, struct verbs_counters *vcounters,
       struct sv_command_buffer *link)
SV_CMD(ibv_cmd_destroy_counters, struct verbs_counters *vcounters)
SV_CMD(ibv_cmd_read_counters, struct verbs_counters *vcounters, uint64_t *counters_value,
       uint32_t ncounters, uint32_t flags, struct sv_command_buffer *link)
SV_CMD(ibv_cmd_alloc_dm, struct ibv_context *ctx, const struct ibv_alloc_dm_attr *dm_attr,
       struct verbs_dm *dm, struct sv_command_buffer *link)
SV_CMD(ibv_cmd_free_dm, struct verbs_dm *dm)
SV_CMD(ibv_cmd_reg_dm_mr, struct ibv_pd *pd, struct verbs_dm *dm, uint64_t offset,
       size_t length, unsigned int access, struct verbs_mr *vmr,
       struct sv_command_buffer *link)

#pragma GCC diagnostic pop

/* ---- kernel ABI conversions (IBVERBS_1.0 / 1.1; infiniband/marshall.h) -------- */

void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
SV_EXPORT void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src)
{
	memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
	dst->grh.flow_label = src->grh.flow_label;
	dst->grh.sgid_index = src->grh.sgid_index;
	dst->grh.hop_limit = src->grh.hop_limit;
	dst->grh.traffic_class = src->grh.traffic_class;
	dst->dlid = src->dlid;
	dst->sl = src->sl;
	dst->src_path_bits = src->src_path_bits;
	dst->static_rate = src->static_rate;
	dst->is_global = src->is_global;
	dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
SV_EXPORT void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src)
{
	dst->qp_state = (enum ibv_qp_state)src->qp_state;
	dst->cur_qp_state = (enum ibv_qp_state)src->cur_qp_state;
	dst->path_mtu = (enum ibv_mtu)src->path_mtu;
	dst->path_mig_state = (enum ibv_mig_state)src->path_mig_state;
	dst->qkey = src->qkey;
	dst->rq_psn = src->rq_psn;
	dst->sq_psn = src->sq_psn;
	dst->dest_qp_num = src->dest_qp_num;
	dst->qp_access_flags = src->qp_access_flags;
	dst->cap.max_send_wr = src->max_send_wr;
	dst->cap.max_recv_wr = src->max_recv_wr;
	dst->cap.max_send_sge = src->max_send_sge;
	dst->cap.max_recv_sge = src->max_recv_sge;
	dst->cap.max_inline_data = src->max_inline_data;
	ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
	ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
	dst->pkey_index = src->pkey_index;
	dst->alt_pkey_index = src->alt_pkey_index;
	dst->en_sqd_async_notify = src->en_sqd_async_notify;
	dst->sq_draining = src->sq_draining;
	dst->max_rd_atomic = src->max_rd_atomic;
	dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
	dst->min_rnr_timer = src->min_rnr_timer;
	dst->port_num = src->port_num;
	dst->timeout = src->timeout;
	dst->retry_cnt = src->retry_cnt;
	dst->rnr_retry = src->rnr_retry;
	dst->alt_port_num = src->alt_port_num;
	dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
SV_EXPORT void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst,
					   struct ib_user_path_rec *src)
{
	memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
	memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = (int)src->raw_traffic;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = (int)src->reversible;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = (uint8_t)src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}

void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);
SV_EXPORT void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst,
					 struct ibv_sa_path_rec *src)
{
	memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
	memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
	dst->dlid = src->dlid;
	dst->slid = src->slid;
	dst->raw_traffic = src->raw_traffic ? 1 : 0;
	dst->flow_label = src->flow_label;
	dst->hop_limit = src->hop_limit;
	dst->traffic_class = src->traffic_class;
	dst->reversible = src->reversible ? 1 : 0;
	dst->numb_path = src->numb_path;
	dst->pkey = src->pkey;
	dst->sl = src->sl;
	dst->mtu_selector = src->mtu_selector;
	dst->mtu = src->mtu;
	dst->rate_selector = src->rate_selector;
	dst->rate = src->rate;
	dst->packet_life_time_selector = src->packet_life_time_selector;
	dst->packet_life_time = src->packet_life_time;
	dst->preference = src->preference;
}
