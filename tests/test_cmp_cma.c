/* rdma_cm wire conventions: service IDs and the CMA private-data header. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "cm_proto/cmp_cma.h"

Test(cmp_cma, service_ids)
{
	enum cmp_ps ps;
	uint16_t port;

	/* wire.md: TCP port 4420 -> 0x0000000001061144 */
	cr_assert_eq(cmp_sid_make(CMP_PS_TCP, 4420), 0x0000000001061144ULL);
	cr_assert_eq(cmp_sid_make(CMP_PS_UDP, 7471), 0x0000000001111D2FULL);
	cr_assert_eq(cmp_sid_make(CMP_PS_IB, 1), 0x00000000013F0001ULL);
	cr_assert_eq(cmp_sid_make(CMP_PS_IPOIB, 0xFFFF), 0x000000000002FFFFULL);
	cr_assert_eq(cmp_sid_split(0x0000000001061144ULL, &ps, &port), 0);
	cr_assert_eq(ps, CMP_PS_TCP);
	cr_assert_eq(port, 4420);
	cr_assert_eq(cmp_sid_split(0x1000000001061144ULL, &ps, &port), -1);
	cr_assert_eq(cmp_sid_split(0x0000000001071144ULL, &ps, &port), -1);
	cr_assert_str_eq(cmp_ps_str(CMP_PS_UDP), "UDP");
}

Test(cmp_cma, ipv4_header_bytes)
{
	struct sockaddr_in src = { .sin_family = AF_INET, .sin_port = htons(0xBEEF) };
	struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(4420) };
	struct sockaddr_storage s, d;
	uint8_t pd[56];

	inet_pton(AF_INET, "127.10.0.1", &src.sin_addr);
	inet_pton(AF_INET, "127.10.0.2", &dst.sin_addr);
	memset(pd, 0xEE, sizeof(pd));
	cr_assert_eq(cmp_cma_hdr_build(pd, sizeof(pd), (struct sockaddr *)&src,
				       (struct sockaddr *)&dst), 0);
	cr_assert_eq(pd[0], 0x00);
	cr_assert_eq(pd[1], 0x40);
	cr_assert_eq(pd[2], 0xBE);
	cr_assert_eq(pd[3], 0xEF);
	for (int i = 4; i < 16; i++)
		cr_assert_eq(pd[i], 0);
	cr_assert_eq(pd[16], 127); cr_assert_eq(pd[17], 10); cr_assert_eq(pd[19], 1);
	for (int i = 20; i < 32; i++)
		cr_assert_eq(pd[i], 0);
	cr_assert_eq(pd[35], 2);
	cr_assert_eq(pd[36], 0xEE, "user private data after the header untouched");

	cr_assert_eq(cmp_cma_hdr_parse(pd, sizeof(pd), 4420, &s, &d), 0);
	cr_assert_eq(s.ss_family, AF_INET);
	cr_assert(!memcmp(&((struct sockaddr_in *)&s)->sin_addr, &src.sin_addr, 4));
	cr_assert_eq(((struct sockaddr_in *)&s)->sin_port, htons(0xBEEF));
	cr_assert_eq(((struct sockaddr_in *)&d)->sin_port, htons(4420));
	cr_assert(!memcmp(&((struct sockaddr_in *)&d)->sin_addr, &dst.sin_addr, 4));
}

Test(cmp_cma, ipv6_and_errors)
{
	struct sockaddr_in6 src = { .sin6_family = AF_INET6, .sin6_port = htons(1) };
	struct sockaddr_in6 dst = { .sin6_family = AF_INET6 };
	struct sockaddr_in v4 = { .sin_family = AF_INET };
	struct sockaddr_storage s, d;
	uint8_t pd[36];

	inet_pton(AF_INET6, "fe80::1", &src.sin6_addr);
	inet_pton(AF_INET6, "fe80::2", &dst.sin6_addr);
	cr_assert_eq(cmp_cma_hdr_build(pd, sizeof(pd), (struct sockaddr *)&src,
				       (struct sockaddr *)&dst), 0);
	cr_assert_eq(pd[1], 0x60);
	cr_assert_eq(pd[4], 0xFE);
	cr_assert_eq(pd[35], 2);
	cr_assert_eq(cmp_cma_hdr_parse(pd, sizeof(pd), 9, &s, &d), 0);
	cr_assert_eq(d.ss_family, AF_INET6);

	errno = 0;
	cr_assert_eq(cmp_cma_hdr_build(pd, 35, (struct sockaddr *)&src, (struct sockaddr *)&dst), -1);
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(cmp_cma_hdr_build(pd, sizeof(pd), (struct sockaddr *)&src,
				       (struct sockaddr *)&v4), -1);
	cr_assert_eq(errno, EAFNOSUPPORT);
	pd[0] = 1;
	cr_assert_eq(cmp_cma_hdr_parse(pd, sizeof(pd), 9, &s, &d), -1);
	cr_assert_eq(errno, EPROTONOSUPPORT);
	pd[0] = 0;
	pd[1] = 0x50;
	cr_assert_eq(cmp_cma_hdr_parse(pd, sizeof(pd), 9, &s, &d), -1);
	cr_assert_eq(errno, EAFNOSUPPORT);
}
