/*
 * cmc.h - uscm's librdmacm in daemon mode: the rdma_cm calls served by
 * uscmd (lib/cmc_*.c). Each exported rdma_* call of lib/cma_*.c starts with
 * `if (cma_remote()) return cmc_*(...)`; the two modes never mix in one
 * process. docs/architecture.md, "The host service".
 */
#ifndef USCM_LIB_CMC_H
#define USCM_LIB_CMC_H

#include <rdma/rdma_cma.h>
#include <rdma/uscm_stats.h>

int cmc_bind_addr(struct rdma_cm_id *cm_id, struct sockaddr *addr);
int cmc_resolve_addr(struct rdma_cm_id *cm_id, struct sockaddr *src_addr, struct sockaddr *dst_addr, int timeout_ms);
int cmc_resolve_route(struct rdma_cm_id *cm_id, int timeout_ms);
int cmc_set_option(struct rdma_cm_id *cm_id, int level, int optname, void *optval, size_t optlen);
int cmc_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **out, void *context, enum rdma_port_space ps);
int cmc_destroy_id(struct rdma_cm_id *cm_id);
int cmc_migrate_id(struct rdma_cm_id *cm_id, struct rdma_event_channel *channel);
int cmc_init_qp_attr(struct rdma_cm_id *cm_id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask);
int cmc_create_qp_ex(struct rdma_cm_id *cm_id, struct ibv_qp_init_attr_ex *attr);
int cmc_create_qp(struct rdma_cm_id *cm_id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr);
void cmc_destroy_qp(struct rdma_cm_id *cm_id);
int cmc_create_srq_ex(struct rdma_cm_id *cm_id, struct ibv_srq_init_attr_ex *attr);
void cmc_srq_destroyed(struct rdma_cm_id *cm_id); /* rdma_destroy_srq done */
int cmc_connect(struct rdma_cm_id *cm_id, struct rdma_conn_param *param);
int cmc_establish(struct rdma_cm_id *cm_id);
int cmc_listen(struct rdma_cm_id *cm_id, int backlog);
int cmc_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **out);
int cmc_accept(struct rdma_cm_id *cm_id, struct rdma_conn_param *param);
int cmc_reject(struct rdma_cm_id *cm_id, const void *private_data, uint8_t private_data_len);
int cmc_reject_ece(struct rdma_cm_id *cm_id, const void *private_data, uint8_t private_data_len);
int cmc_notify(struct rdma_cm_id *cm_id, enum ibv_event_type event);
int cmc_disconnect(struct rdma_cm_id *cm_id);
int cmc_set_local_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece);
int cmc_get_remote_ece(struct rdma_cm_id *cm_id, struct ibv_ece *ece);
int cmc_create_ep(struct rdma_cm_id **out, struct rdma_addrinfo *res, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr);
void cmc_destroy_ep(struct rdma_cm_id *cm_id);
struct rdma_event_channel *cmc_create_event_channel(void);
void cmc_destroy_event_channel(struct rdma_event_channel *channel);
int cmc_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event);
int cmc_ack_cm_event(struct rdma_cm_event *event);
int cmc_write_cm_event(struct rdma_cm_id *cm_id, enum rdma_cm_event_type event, int status, uint64_t arg);
int cmc_join_multicast_ex(struct rdma_cm_id *cm_id, struct rdma_cm_join_mc_attr_ex *attr, void *context);
int cmc_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context);
int cmc_leave_multicast(struct rdma_cm_id *cm_id, struct sockaddr *addr);
int cmc_resolve_addrinfo(struct rdma_cm_id *cm_id, const char *node, const char *service, const struct rdma_addrinfo *hints);
int cmc_query_addrinfo(struct rdma_cm_id *cm_id, struct rdma_addrinfo **info);
int cmc_uscm_get_stats(struct uscm_stats *out, size_t size);

/* cma_remote()'s probe: connects to uscmd (USCM_SOCKET, else
 * /run/uscm/uscmd.sock); 1 when it answered (the connection is kept). */
int cmc_probe(void);
/* In a forked child: fresh locks (the parent's threads are gone). */
void cmc_after_fork(void);
/* fork's child: its pid is asked again (every fork, whatever the mode). */
void cmc_pid_forget(void);
/* ids this process holds in daemon mode (USCM_EXIT_REPORT) */
unsigned cmc_live_ids(void);

#endif
