/*
 * um_transport.h - MADs over libibumad: one CA port opened for the
 * connection manager, with the two agents rdma_cm needs,
 *
 *   CM   class 0x07 version 2, server of method Send (every CM message is a
 *        Send; none is a response), so REQ/REP/... arrive unsolicited;
 *   SA   class 0x03 version 2, client only (no methods), RMPP version 1 so
 *        the MAD layer reassembles multi-segment answers;
 *
 * and the conversion between libibumad's ib_mad_addr_t and the engine's
 * struct cmp_addr. Real code paths for real hardware: umad_init,
 * umad_open_port, umad_register, umad_send (with timeout and retries for
 * requests), umad_recv, umad_get_mad_addr, umad_set_addr / set_grh /
 * set_pkey. The simulated fabric's libibumad.so.3 implements the same ABI.
 *
 * Threading: a um_port has a send side (um_port_send_*: its transmit
 * buffer) and a receive side (um_port_recv: its receive buffer), each used
 * by one thread at a time, the two sides concurrently (lib/: the sender of
 * cma_tx.c, and the holder of the port's rx_lock). Calls that change what
 * both sides read (um_port_refresh, um_port_set_tables) need the caller to
 * exclude both. libibumad's own calls are thread-safe; USCM_PCAP records
 * from both sides under um_capture's lock.
 */
#ifndef USCM_UM_TRANSPORT_H
#define USCM_UM_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/umad.h>

#include "cm_proto/cmp_engine.h"

#define UM_QKEY_GSI 0x80010000u

enum um_agent_kind {
	UM_AGENT_CM = 0,
	UM_AGENT_SA = 1,
	UM_AGENT_COUNT
};

/* What the port looked like when opened (or last refreshed). */
struct um_port_info {
	char ca_name[UMAD_CA_NAME_LEN];
	int port_num;
	uint16_t lid;
	uint8_t lmc;
	uint16_t sm_lid;
	uint8_t sm_sl;
	unsigned state;          /* IBV_PORT_* (4 = ACTIVE) */
	int roce;                /* link layer Ethernet: no SM, no SA, GRH always */
	uint64_t gid_prefix;     /* host order */
	uint64_t port_guid;      /* host order */
};

struct um_port;

/* Which agents to register (bit per enum um_agent_kind). */
#define UM_OPEN_CM (1u << UM_AGENT_CM)
#define UM_OPEN_SA (1u << UM_AGENT_SA)

/*
 * Opens ca_name:port_num and registers the agents in `agents`. Returns 0, or
 * -1 with errno and a one-line explanation in err (may be NULL):
 *   ENODEV  no such CA or port / libibumad cannot see it;
 *   EBUSY   the CM agent could not be registered: the kernel's ib_cm (or
 *           another process) already serves class 0x07 on this port.
 */
int um_port_open(const char *ca_name, int port_num, unsigned agents, struct um_port **out,
		 char *err, size_t errlen);
void um_port_close(struct um_port *p);

/* Copies the port's GID table (ngids x 16 bytes) and P_Key table (host
 * order) for the frames USCM_PCAP records (um_capture.h); without them the
 * capture uses GID 0 = prefix:GUID and P_Key 0xFFFF. 0, or -1 (ENOMEM). */
int um_port_set_tables(struct um_port *p, const uint8_t *gids, int ngids, const uint16_t *pkeys,
		       int npkeys);

/* The descriptor to poll for POLLIN (a MAD or a send timeout is waiting). */
int um_port_fd(const struct um_port *p);
const struct um_port_info *um_port_info(const struct um_port *p);
/* Re-reads LID, SM LID/SL and state (e.g. after an SA timeout). 0 or -1. */
int um_port_refresh(struct um_port *p);

/* Sends a CM MAD (no response expected: timeout 0) to dst (QP1). 0 or -1. */
int um_port_send_cm(struct um_port *p, const struct cmp_addr *dst, const uint8_t mad[CMP_MAD_SIZE]);
/* Sends an SA request to the port's SM LID; libibumad resends it every
 * timeout_ms, `retries` times, and then delivers a timeout record. */
int um_port_send_sa(struct um_port *p, const uint8_t mad[CMP_MAD_SIZE], int timeout_ms,
		    int retries);

/* One received record. */
struct um_rx {
	enum um_agent_kind agent;
	int status;              /* 0, or ETIMEDOUT: a request of ours got no answer */
	struct cmp_addr src;     /* the sender (for a timeout: the destination) */
	const uint8_t *mad;      /* the MAD (for a timeout: the request sent); valid
	                          * until the next um_port_recv */
	size_t len;              /* 256, or more for a reassembled RMPP answer */
};
/* Non-blocking: 1 with *rx filled, 0 when nothing is waiting, -1 on error. */
int um_port_recv(struct um_port *p, struct um_rx *rx);

/* ib_mad_addr_t (network order, as umad_get_mad_addr gives it) to cmp_addr. */
void um_addr_from_umad(struct cmp_addr *a, const ib_mad_addr_t *m);

#endif
