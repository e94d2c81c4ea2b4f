/*
 * cmp_cma.h - what the kernel's rdma_cm puts on the wire on top of the CM:
 * service IDs for the four port spaces, and the 36-byte CMA header that leads
 * REQ and SIDR_REQ private data for AF_INET/AF_INET6 ids. Matching it
 * byte for byte is what lets a uscm peer talk to a kernel rdma_cm peer.
 */
#ifndef USCM_CMP_CMA_H
#define USCM_CMP_CMA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "cm_proto/cmp_field.h"

/* Port spaces (rdma_cma.h's enum rdma_port_space values). */
enum cmp_ps {
	CMP_PS_IPOIB = 0x0002,
	CMP_PS_TCP = 0x0106,
	CMP_PS_UDP = 0x0111,
	CMP_PS_IB = 0x013F,
};

#define CMP_SID_IP_PS_MASK 0xFFFFFFFFFFFF0000ULL /* RDMA_IB_IP_PS_MASK */
#define CMP_SID_PS_SHIFT 16
#define CMP_UDP_QKEY 0x01234567u /* RDMA_UDP_QKEY: UDP and IB port spaces */

#define CMP_CMA_HDR_SIZE 36
#define CMP_CMA_VERSION 0x00

/* The CMA header. The address slots are 16 bytes; IPv4 addresses sit in the
 * last four with twelve zero bytes before. */
#define CMP_CMA_HDR_FIELDS(F)                      \
	F(cma_version, 0, 0, 8, U8)                \
	F(ip_version, 1, 0, 4, U8)                 \
	F(_rsvd1, 1, 4, 4, RSVD)                   \
	F(src_port, 2, 0, 16, U16)                 \
	F(src_addr, 4, 0, 128, GID)                \
	F(dst_addr, 20, 0, 128, GID)

struct cmp_cma_hdr { CMP_STRUCT_MEMBERS(CMP_CMA_HDR_FIELDS) };
extern const struct cmp_layout cmp_cma_hdr_layout;

/* Service ID of `port` in port space `ps`: (ps << 16) + port. */
uint64_t cmp_sid_make(enum cmp_ps ps, uint16_t port);
/* Splits an IP-range service ID; returns 0, or -1 if `sid` is not one
 * (AF_IB service IDs are opaque). */
int cmp_sid_split(uint64_t sid, enum cmp_ps *ps, uint16_t *port);
const char *cmp_ps_str(enum cmp_ps ps);

/* What the kernel's rdma_cm (6.1) builds for a RoCE path, there being no
 * SA to ask: the packet lifetime (the REQ's local ACK timeout is one more,
 * 19, with a CA ACK delay up to 19), and for RoCE v2 the flow label of a
 * connection from its rdma_cm ports, (source port * 31 + destination port)
 * mod 2^20, unless an IPv6 source address carries a flow label of its own
 * (the library's roce_path; uscm-replay check's RoCE REQ). Both reference
 * captures of kernel CMs over rdma_rxe follow it (ports 55198 -> 7174:
 * 669736; 41257 -> 7471: 237862). */
#define CMP_ROCE_PACKET_LIFETIME 18
uint32_t cmp_roce_flow_label(uint16_t src_port, uint16_t dst_port);

/* Writes the CMA header for src -> dst (both AF_INET or both AF_INET6;
 * src's port is the source port) into the first 36 bytes of `pdata`.
 * Returns 0, or -1 with errno EAFNOSUPPORT / EINVAL. */
int cmp_cma_hdr_build(uint8_t *pdata, size_t pdata_len, const struct sockaddr *src,
		      const struct sockaddr *dst);
/* Reads it back: src gets the source address and port, dst the destination
 * address with port `dst_port` (the low 16 bits of the service ID). Returns
 * 0, or -1 with errno EPROTONOSUPPORT (cma_version != 0, as the kernel's
 * passive side rejects), EAFNOSUPPORT (ip_version not 4 or 6) or EINVAL. */
int cmp_cma_hdr_parse(const uint8_t *pdata, size_t pdata_len, uint16_t dst_port,
		      struct sockaddr_storage *src, struct sockaddr_storage *dst);

#endif
