/* cmp_cma.c - rdma_cm service IDs and the CMA private-data header. */
#include "cm_proto/cmp_cma.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#define CMP_ROW_TYPE struct cmp_cma_hdr
static const struct cmp_field cma_rows[] = { CMP_TABLE_ROWS(CMP_CMA_HDR_FIELDS) };
#undef CMP_ROW_TYPE
const struct cmp_layout cmp_cma_hdr_layout =
	CMP_LAYOUT("cma_hdr", struct cmp_cma_hdr, cma_rows, CMP_CMA_HDR_SIZE);

uint64_t cmp_sid_make(enum cmp_ps ps, uint16_t port)
{
	return ((uint64_t)ps << CMP_SID_PS_SHIFT) + port;
}

int cmp_sid_split(uint64_t sid, enum cmp_ps *ps, uint16_t *port)
{
	uint64_t space = (sid & CMP_SID_IP_PS_MASK) >> CMP_SID_PS_SHIFT;

	switch (space) {
	case CMP_PS_IPOIB:
	case CMP_PS_TCP:
	case CMP_PS_UDP:
	case CMP_PS_IB:
		if (ps)
			*ps = (enum cmp_ps)space;
		if (port)
			*port = (uint16_t)sid;
		return 0;
	default:
		return -1;
	}
}

const char *cmp_ps_str(enum cmp_ps ps)
{
	switch (ps) {
	case CMP_PS_IPOIB: return "IPOIB";
	case CMP_PS_TCP: return "TCP";
	case CMP_PS_UDP: return "UDP";
	case CMP_PS_IB: return "IB";
	}
	return "?";
}

uint32_t cmp_roce_flow_label(uint16_t src_port, uint16_t dst_port)
{
	return ((uint32_t)src_port * 31 + dst_port) & 0xFFFFF;
}

/* Copies a socket address into a 16-byte CMA slot; returns its port. */
static int addr_to_slot(const struct sockaddr *sa, uint8_t slot[16], uint16_t *port)
{
	memset(slot, 0, 16);
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		memcpy(slot + 12, &in->sin_addr, 4);
		*port = ntohs(in->sin_port);
		return 4;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		memcpy(slot, &in6->sin6_addr, 16);
		*port = ntohs(in6->sin6_port);
		return 6;
	}
	return -1;
}

int cmp_cma_hdr_build(uint8_t *pdata, size_t pdata_len, const struct sockaddr *src,
		      const struct sockaddr *dst)
{
	struct cmp_cma_hdr h = { .cma_version = CMP_CMA_VERSION };
	uint16_t dport;
	int sv, dv;

	if (!pdata || !src || !dst || pdata_len < CMP_CMA_HDR_SIZE) {
		errno = EINVAL;
		return -1;
	}
	sv = addr_to_slot(src, h.src_addr, &h.src_port);
	dv = addr_to_slot(dst, h.dst_addr, &dport);
	if (sv < 0 || dv < 0 || sv != dv) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	h.ip_version = (uint8_t)sv;
	cmp_layout_encode(&cmp_cma_hdr_layout, &h, pdata);
	return 0;
}

static void slot_to_addr(int ipv, const uint8_t slot[16], uint16_t port,
			 struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (ipv == 4) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		memcpy(&in->sin_addr, slot + 12, 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		memcpy(&in6->sin6_addr, slot, 16);
	}
}

int cmp_cma_hdr_parse(const uint8_t *pdata, size_t pdata_len, uint16_t dst_port,
		      struct sockaddr_storage *src, struct sockaddr_storage *dst)
{
	struct cmp_cma_hdr h;

	if (!pdata || pdata_len < CMP_CMA_HDR_SIZE) {
		errno = EINVAL;
		return -1;
	}
	cmp_layout_decode(&cmp_cma_hdr_layout, pdata, &h);
	if (h.cma_version != CMP_CMA_VERSION) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	if (h.ip_version != 4 && h.ip_version != 6) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	if (src)
		slot_to_addr(h.ip_version, h.src_addr, h.src_port, src);
	if (dst)
		slot_to_addr(h.ip_version, h.dst_addr, dst_port, dst);
	return 0;
}
