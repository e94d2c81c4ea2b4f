/* test_um_frame.c - RoCEv2 / native-IB framing of MADs, ICRC and VCRC. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "umad/um_frame.h"

static void make_mad(uint8_t mad[UM_MAD_SIZE], uint64_t tid, uint16_t attr)
{
	memset(mad, 0, UM_MAD_SIZE);
	cmp_bits_set(mad, 0, 0, 8, 1);    /* base version */
	cmp_bits_set(mad, 1, 0, 8, 0x07); /* CM */
	cmp_bits_set(mad, 2, 0, 8, 2);
	cmp_bits_set(mad, 3, 0, 8, 0x03); /* Send */
	cmp_bits_set(mad, 8, 0, 64, tid);
	cmp_bits_set(mad, 16, 0, 16, attr);
	for (int i = 24; i < UM_MAD_SIZE; i++)
		mad[i] = (uint8_t)(i * 7 + 3);
}

static void v4_gid(uint8_t gid[16], uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	memset(gid, 0, 16);
	gid[10] = gid[11] = 0xff;
	gid[12] = a;
	gid[13] = b;
	gid[14] = c;
	gid[15] = d;
}

static void roce_meta(struct um_frame_meta *m)
{
	memset(m, 0, sizeof(*m));
	m->link = UM_LINK_ROCEV2;
	v4_gid(m->sgid, 192, 168, 1, 10);
	v4_gid(m->dgid, 192, 168, 1, 20);
	m->tclass = 0x68;
	m->hop_limit = 17;
	m->udp_sport = 0xD00D;
	m->pkey = 0x8001;
	m->dest_qp = 1;
	m->psn = 0xABCDEF;
	m->qkey = 0x80010000;
	m->src_qp = 0x000123;
}

static void ib_meta(struct um_frame_meta *m, int grh)
{
	memset(m, 0, sizeof(*m));
	m->link = UM_LINK_IB;
	m->slid = 0x0102;
	m->dlid = 0xC003;
	m->sl = 5;
	m->vl = 2;
	m->has_grh = grh;
	if (grh) {
		static const uint8_t s[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
					       0x00, 0x02, 0xc9, 0x03, 0x00, 0x11, 0x22, 0x33 };
		static const uint8_t d[16] = { 0xfe, 0x80, 0, 0, 0, 0, 0, 0,
					       0x00, 0x02, 0xc9, 0x03, 0x00, 0x44, 0x55, 0x66 };
		memcpy(m->sgid, s, 16);
		memcpy(m->dgid, d, 16);
		m->tclass = 0xA5;
		m->flow_label = 0xBEEF1;
		m->hop_limit = 3;
	}
	m->pkey = 0xFFFF;
	m->dest_qp = 1;
	m->psn = 42;
	m->qkey = 0x80010000;
	m->src_qp = 1;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Parses a private heap copy of exactly len bytes so ASan sees any overrun. */
static int parse_copy(const uint8_t *frame, size_t len, int link, struct um_frame_meta *m,
		      uint8_t mad_out[UM_MAD_SIZE])
{
	uint8_t *copy = malloc(len ? len : 1);
	const uint8_t *mad = NULL;
	int rc;

	cr_assert_not_null(copy);
	if (len)
		memcpy(copy, frame, len);
	rc = um_frame_parse(copy, len, link, m, &mad);
	if (rc == UM_FRAME_OK) {
		cr_assert(mad >= copy && mad + UM_MAD_SIZE <= copy + len);
		if (mad_out)
			memcpy(mad_out, mad, UM_MAD_SIZE);
	} else {
		cr_assert_null(mad);
		cr_assert(m->note[0] != 0, "rc %d without a note", rc);
	}
	free(copy);
	return rc;
}

/* ---- layouts and CRCs -------------------------------------------------- */

Test(um_frame, layouts_are_complete)
{
	const struct cmp_layout *ls[] = { &um_eth_layout, &um_vlan_layout, &um_ipv4_layout,
					  &um_udp_layout, &um_lrh_layout, &um_grh_layout,
					  &um_bth_layout, &um_deth_layout };
	char err[160];

	for (size_t i = 0; i < sizeof(ls) / sizeof(ls[0]); i++)
		cr_assert_eq(cmp_layout_check(ls[i], 1, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(um_lrh_layout.len, 8);
	cr_assert_eq(um_grh_layout.len, 40);
	cr_assert_eq(um_bth_layout.len, 12);
	cr_assert_eq(um_deth_layout.len, 8);
}

Test(um_frame, crc32_known_answers)
{
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	static const char check[] = "123456789";
	uint8_t buf[13];
	uint32_t crc;

	/* The masked LRH placeholder of RoCEv2: the state rxe starts from. */
	cr_assert_eq(um_crc32_update(0xFFFFFFFFu, ones, 8), 0xDEBB20E3u);
	/* The standard CRC-32 check value. */
	crc = ~um_crc32_update(0xFFFFFFFFu, check, 9);
	cr_assert_eq(crc, 0xCBF43926u);
	/* Stored LSB first, the CRC over data+CRC lands on the residue. */
	memcpy(buf, check, 9);
	buf[9] = (uint8_t)crc;
	buf[10] = (uint8_t)(crc >> 8);
	buf[11] = (uint8_t)(crc >> 16);
	buf[12] = (uint8_t)(crc >> 24);
	cr_assert_eq(um_crc32_update(0xFFFFFFFFu, buf, 13), 0xDEBB20E3u);
}

Test(um_frame, crc16_polynomial_is_0x100b_reflected)
{
	static const uint8_t top = 0x80;
	unsigned rev = 0;

	for (int i = 0; i < 16; i++)
		if (0x100Bu & (1u << i))
			rev |= 1u << (15 - i);
	cr_assert_eq(rev, 0xD008u);
	/* One set bit shifted through the register yields the polynomial. */
	cr_assert_eq(um_crc16_update(0, &top, 1), rev);
}

/* A RoCEv2 CNP captured on a ConnectX-4 Lx (published as a test vector in
 * the scapy project): an ICRC computed by real hardware. */
Test(um_frame, icrc_matches_hardware_capture)
{
	static const uint8_t pkt[] = {
		0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2, 0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32, 0x08, 0x00,
		0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00,
		0x11, 0x01, 0x0a, 0x00, 0x12, 0x01, 0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00,
		0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x82, 0xfd, 0x00, 0x2a,
	};
	struct um_frame_meta m;

	cr_assert_eq(sizeof(pkt), 74);
	cr_assert_eq(um_icrc(pkt + 14, sizeof(pkt) - 14 - 4, UM_LINK_IP), le32(pkt + 70));
	/* A CNP is no MAD. */
	cr_assert_eq(parse_copy(pkt, sizeof(pkt), UM_LINK_ROCEV2, &m, NULL), UM_FRAME_NOT_MAD);
	cr_assert_eq(m.opcode, 0x81);
}

/* ---- round trips ------------------------------------------------------- */

static void check_common(const struct um_frame_meta *in, const struct um_frame_meta *out)
{
	cr_assert_eq(out->pkey, in->pkey);
	cr_assert_eq(out->dest_qp, in->dest_qp);
	cr_assert_eq(out->psn, in->psn);
	cr_assert_eq(out->src_qp, in->src_qp);
	cr_assert_eq(out->qkey, in->qkey);
	cr_assert_eq(out->opcode, UM_BTH_OP_UD_SEND_ONLY);
	cr_assert_eq(out->icrc_ok, 1);
}

Test(um_frame, rocev2_ipv4_round_trip)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], got[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	int n;

	roce_meta(&m);
	make_mad(mad, 0x0102030405060708ull, 0x0010);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	cr_assert_eq(n, 14 + 20 + 8 + 12 + 8 + 256 + 4);
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_ROCEV2, &p, got), UM_FRAME_OK, "%s",
		     p.note);
	cr_assert_eq(memcmp(got, mad, UM_MAD_SIZE), 0);
	check_common(&m, &p);
	cr_assert_eq(p.link, UM_LINK_ROCEV2);
	cr_assert_eq(p.ipv6, 0);
	cr_assert_eq(p.sip, 0xC0A8010Au);
	cr_assert_eq(p.dip, 0xC0A80114u);
	cr_assert_eq(memcmp(p.sgid, m.sgid, 16), 0);
	cr_assert_eq(memcmp(p.dgid, m.dgid, 16), 0);
	cr_assert_eq(p.tclass, m.tclass);
	cr_assert_eq(p.hop_limit, m.hop_limit);
	cr_assert_eq(p.udp_sport, m.udp_sport);
	cr_assert_eq(p.has_vlan, 0);
	cr_assert_eq(p.vcrc_ok, -1);
	/* Derived MACs: 02:00 + the IPv4 address. */
	cr_assert_eq(memcmp(p.smac, (uint8_t[]){ 2, 0, 192, 168, 1, 10 }, 6), 0);
	cr_assert_eq(memcmp(p.dmac, (uint8_t[]){ 2, 0, 192, 168, 1, 20 }, 6), 0);
	/* Wire facts: ethertype, DF, protocol, port, ICRC stored LSB first. */
	cr_assert_eq(cmp_bits_get(frame, 12, 0, 16), 0x0800);
	cr_assert_eq(cmp_bits_get(frame, 14 + 6, 1, 1), 1);
	cr_assert_eq(frame[14 + 9], 17);
	cr_assert_eq(cmp_bits_get(frame, 34 + 2, 0, 16), 4791);
	cr_assert_eq(cmp_bits_get(frame, 34 + 6, 0, 16), 0);
	cr_assert_eq(le32(frame + n - 4), p.icrc);
	cr_assert_eq(p.icrc, um_icrc(frame + 14, (size_t)n - 14 - 4, UM_LINK_IP));
}

Test(um_frame, rocev2_ipv4_header_checksum)
{
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	uint32_t sum = 0;

	roce_meta(&m);
	make_mad(mad, 1, 0x10);
	cr_assert_gt(um_frame_build(&m, mad, frame, sizeof(frame)), 0);
	for (int i = 0; i < 20; i += 2)
		sum += (uint32_t)cmp_bits_get(frame + 14, (unsigned)i, 0, 16);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	cr_assert_eq(sum, 0xffff);
}

Test(um_frame, rocev2_vlan_round_trip)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], got[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	int n;

	roce_meta(&m);
	m.has_vlan = 1;
	m.vlan_id = 0x123;
	m.vlan_pcp = 5;
	make_mad(mad, 77, 0x13);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	cr_assert_eq(n, 322 + 4);
	cr_assert_eq(cmp_bits_get(frame, 12, 0, 16), 0x8100);
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_ROCEV2, &p, got), UM_FRAME_OK, "%s",
		     p.note);
	cr_assert_eq(memcmp(got, mad, UM_MAD_SIZE), 0);
	check_common(&m, &p);
	cr_assert_eq(p.has_vlan, 1);
	cr_assert_eq(p.vlan_id, 0x123);
	cr_assert_eq(p.vlan_pcp, 5);
}

Test(um_frame, rocev2_ipv6_round_trip)
{
	static const uint8_t s[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1 };
	static const uint8_t d[16] = { 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2 };
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], got[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	uint32_t sum = 0;
	int n;

	roce_meta(&m);
	memcpy(m.sgid, s, 16);
	memcpy(m.dgid, d, 16);
	m.flow_label = 0x12345;
	make_mad(mad, 99, 0x14);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	cr_assert_eq(n, 14 + 40 + 8 + 12 + 8 + 256 + 4);
	cr_assert_eq(cmp_bits_get(frame, 12, 0, 16), 0x86DD);
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_ROCEV2, &p, got), UM_FRAME_OK, "%s",
		     p.note);
	cr_assert_eq(memcmp(got, mad, UM_MAD_SIZE), 0);
	check_common(&m, &p);
	cr_assert_eq(p.ipv6, 1);
	cr_assert_eq(memcmp(p.sgid, s, 16), 0);
	cr_assert_eq(memcmp(p.dgid, d, 16), 0);
	cr_assert_eq(p.flow_label, 0x12345);
	cr_assert_eq(p.tclass, m.tclass);
	cr_assert_eq(p.hop_limit, m.hop_limit);
	/* The UDP checksum (mandatory over IPv6) verifies: pseudo header +
	 * datagram sums to 0xffff. */
	for (int i = 0; i < 32; i += 2)
		sum += (uint32_t)cmp_bits_get(frame + 14 + 8, (unsigned)i, 0, 16);
	sum += (uint32_t)(n - 54) + 17;
	for (int i = 0; i < n - 54; i += 2)
		sum += (uint32_t)cmp_bits_get(frame + 54, (unsigned)i, 0, 16);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	cr_assert_eq(sum, 0xffff);
	/* And the raw-IP entry point sees the same packet. */
	cr_assert_eq(parse_copy(frame + 14, (size_t)n - 14, UM_LINK_IP, &p, got), UM_FRAME_OK);
	cr_assert_eq(p.icrc_ok, 1);
}

static void ib_round_trip(int grh)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], got[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	size_t pkt = grh ? 328 : 288;
	int n;

	ib_meta(&m, grh);
	make_mad(mad, 0xFEEDFACECAFEBEEFull, 0x0012);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	cr_assert_eq(n, (int)pkt + 2);
	/* LRH: LNH 2 (local) or 3 (global), PktLen in words up to the ICRC. */
	cr_assert_eq(cmp_bits_get(frame, 1, 6, 2), grh ? 3 : 2);
	cr_assert_eq(cmp_bits_get(frame, 4, 5, 11), pkt / 4);
	if (grh) {
		cr_assert_eq(frame[8 + 6], 0x1B);
		cr_assert_eq(cmp_bits_get(frame, 8 + 4, 0, 16), 280);
	}
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_IB, &p, got), UM_FRAME_OK, "%s",
		     p.note);
	cr_assert_eq(memcmp(got, mad, UM_MAD_SIZE), 0);
	check_common(&m, &p);
	cr_assert_eq(p.link, UM_LINK_IB);
	cr_assert_eq(p.vcrc_ok, 1);
	cr_assert_eq(p.slid, m.slid);
	cr_assert_eq(p.dlid, m.dlid);
	cr_assert_eq(p.sl, m.sl);
	cr_assert_eq(p.vl, m.vl);
	cr_assert_eq(p.has_grh, grh);
	if (grh) {
		cr_assert_eq(memcmp(p.sgid, m.sgid, 16), 0);
		cr_assert_eq(memcmp(p.dgid, m.dgid, 16), 0);
		cr_assert_eq(p.tclass, m.tclass);
		cr_assert_eq(p.flow_label, m.flow_label);
		cr_assert_eq(p.hop_limit, m.hop_limit);
	}
	cr_assert_eq(p.vcrc, um_vcrc(frame, pkt));
	/* Without the VCRC (some captures drop it) the MAD still parses. */
	cr_assert_eq(parse_copy(frame, pkt, UM_LINK_IB, &p, got), UM_FRAME_OK);
	cr_assert_eq(p.vcrc_ok, -1);
	cr_assert_eq(p.icrc_ok, 1);
}

Test(um_frame, ib_round_trip_lrh_only) { ib_round_trip(0); }
Test(um_frame, ib_round_trip_with_grh) { ib_round_trip(1); }

Test(um_frame, qp1_always_carries_the_gsi_qkey)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	int n;

	ib_meta(&m, 0);
	m.qkey = 0x1234;
	make_mad(mad, 5, 0x10);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_OK);
	cr_assert_eq(p.qkey, UM_QP1_QKEY);
	m.dest_qp = 0; /* QP0 (SMI): the Q_Key is whatever was asked for */
	m.qkey = 0;
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_OK);
	cr_assert_eq(p.qkey, 0);
	cr_assert_eq(p.dest_qp, 0);
}

Test(um_frame, build_rejects_bad_requests)
{
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE] = { 0 }, frame[UM_FRAME_MAX];

	roce_meta(&m);
	cr_assert_eq(um_frame_build(&m, mad, frame, 321), -1);
	cr_assert_eq(um_frame_build(&m, mad, frame, 322), 322);
	m.dest_qp = 2;
	cr_assert_eq(um_frame_build(&m, mad, frame, sizeof(frame)), -1);
	m.dest_qp = 1;
	m.link = 7;
	cr_assert_eq(um_frame_build(&m, mad, frame, sizeof(frame)), -1);
	ib_meta(&m, 1);
	cr_assert_eq(um_frame_build(&m, mad, frame, 329), -1);
	cr_assert_eq(um_frame_build(&m, mad, frame, 330), 330);
}

/* ---- CRC behaviour ----------------------------------------------------- */

Test(um_frame, corrupted_payload_fails_icrc_but_still_parses)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	int n;

	roce_meta(&m);
	make_mad(mad, 3, 0x10);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	frame[14 + 20 + 8 + 20 + 100] ^= 0x01;
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_OK);
	cr_assert_eq(p.icrc_ok, 0);

	ib_meta(&m, 1);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	frame[8 + 40 + 20 + 7] ^= 0x80;
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_OK);
	cr_assert_eq(p.icrc_ok, 0);
	cr_assert_eq(p.vcrc_ok, 0);
}

Test(um_frame, corrupted_icrc_byte_is_reported)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	int n;

	ib_meta(&m, 0);
	make_mad(mad, 3, 0x10);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	frame[n - 2 - 4] ^= 0x10; /* first ICRC byte */
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_OK);
	cr_assert_eq(p.icrc_ok, 0);
	cr_assert_eq(p.vcrc_ok, 0);
}

/* Fields that routers/switches may rewrite are outside the ICRC. */
Test(um_frame, variant_fields_do_not_change_the_icrc)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	int n;

	roce_meta(&m);
	make_mad(mad, 3, 0x10);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	frame[14 + 1] = 0x02;  /* TOS: ECN CE */
	frame[14 + 8] = 1;     /* TTL */
	frame[14 + 10] ^= 0x5A; /* header checksum */
	frame[34 + 7] = 0x77;  /* UDP checksum */
	frame[42 + 4] = 0x80;  /* BTH resv8a (FECN) */
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_OK);
	cr_assert_eq(p.icrc_ok, 1);
	frame[14 + 12] ^= 1; /* but the source address is covered */
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_OK);
	cr_assert_eq(p.icrc_ok, 0);

	ib_meta(&m, 1);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	cmp_bits_set(frame, 0, 0, 4, 7);           /* VL */
	cmp_bits_set(frame, 8, 4, 8, 0x11);        /* TClass */
	cmp_bits_set(frame, 9, 4, 20, 0x54321);    /* FlowLabel */
	frame[8 + 7] = 1;                          /* HopLmt */
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_OK);
	cr_assert_eq(p.icrc_ok, 1);
	cr_assert_eq(p.vcrc_ok, 0); /* the VCRC covers everything */
	cr_assert_eq(p.vl, 7);
	cmp_bits_set(frame, 2, 0, 16, 0x4444);     /* DLID is invariant */
	cr_assert_eq(parse_copy(frame, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_OK);
	cr_assert_eq(p.icrc_ok, 0);
}

/* Stored LSB first, the VCRC makes the CRC over LRH..VCRC a constant, the
 * property a receiver checks; this is the "reads consistently" claim. */
Test(um_frame, vcrc_residue_is_constant)
{
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	uint16_t residue = 0;

	for (int i = 0; i < 6; i++) {
		int n;
		uint16_t r;

		ib_meta(&m, i & 1);
		m.slid = (uint16_t)(i * 1000 + 1);
		make_mad(mad, (uint64_t)i * 0x9E3779B97F4A7C15ull, (uint16_t)(0x10 + i));
		n = um_frame_build(&m, mad, frame, sizeof(frame));
		r = um_crc16_update(0xFFFF, frame, (size_t)n);
		if (i == 0)
			residue = r;
		cr_assert_eq(r, residue, "frame %d residue 0x%04x vs 0x%04x", i, r, residue);
	}
}

/* ---- classification ---------------------------------------------------- */

Test(um_frame, non_mad_frames_are_not_mads)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX], f2[UM_FRAME_MAX];
	int n;
	/* ARP request: ethertype 0x0806. */
	uint8_t arp[42] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 1, 2, 3, 4, 0x08, 0x06,
			    0, 1, 0x08, 0, 6, 4, 0, 1 };

	cr_assert_eq(parse_copy(arp, sizeof(arp), UM_LINK_ROCEV2, &p, NULL), UM_FRAME_NOT_MAD);

	roce_meta(&m);
	make_mad(mad, 3, 0x10);
	n = um_frame_build(&m, mad, frame, sizeof(frame));

	memcpy(f2, frame, (size_t)n);
	f2[14 + 9] = 6; /* TCP */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_NOT_MAD);

	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 34 + 2, 0, 16, 4792); /* other UDP port */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_NOT_MAD);

	memcpy(f2, frame, (size_t)n);
	f2[42] = 0x04; /* RC SEND only */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_NOT_MAD);
	cr_assert_eq(p.opcode, 0x04);

	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 42 + 5, 0, 24, 0x000042); /* UD to an ordinary QP */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_NOT_MAD);

	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 14 + 6, 2, 1, 1); /* IPv4 fragment */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_NOT_MAD);

	/* A 252-byte UD payload (IP/UDP lengths shrunk consistently). */
	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 14 + 2, 0, 16, 308 - 4);
	cmp_bits_set(f2, 34 + 4, 0, 16, 288 - 4);
	cr_assert_eq(parse_copy(f2, (size_t)n - 4, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_NOT_MAD);

	ib_meta(&m, 0);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 1, 6, 2, 0); /* LNH raw */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_NOT_MAD);
	ib_meta(&m, 1);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	memcpy(f2, frame, (size_t)n);
	f2[8 + 6] = 0x1C; /* GRH next header not IBA */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_NOT_MAD);
}

Test(um_frame, inconsistent_headers_are_corrupt)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX], f2[UM_FRAME_MAX];
	int n;

	roce_meta(&m);
	make_mad(mad, 3, 0x10);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 14 + 2, 0, 16, 1000); /* IPv4 total length too big */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_CORRUPT);
	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 14, 4, 4, 3); /* IHL 3 */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_CORRUPT);
	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 14, 0, 4, 6); /* ethertype IPv4, version 6 */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_CORRUPT);
	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 34 + 4, 0, 16, 4); /* UDP length < 8 */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_ROCEV2, &p, NULL), UM_FRAME_CORRUPT);

	ib_meta(&m, 1);
	n = um_frame_build(&m, mad, frame, sizeof(frame));
	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 4, 5, 11, 200); /* PktLen beyond the capture */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_CORRUPT);
	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 8 + 4, 0, 16, 100); /* GRH PayLen disagrees */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_CORRUPT);
	memcpy(f2, frame, (size_t)n);
	cmp_bits_set(f2, 4, 5, 11, 1); /* PktLen shorter than the LRH */
	cr_assert_eq(parse_copy(f2, (size_t)n, UM_LINK_IB, &p, NULL), UM_FRAME_CORRUPT);

	cr_assert_eq(um_frame_parse(NULL, 0, UM_LINK_IB, &p, NULL), UM_FRAME_CORRUPT);
	cr_assert(p.note[0]);
}

/* Every prefix of every kind of frame: never OK (except an IB packet whose
 * VCRC was not captured), never an overrun. */
Test(um_frame, every_truncation_is_rejected_safely)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];

	make_mad(mad, 3, 0x10);
	for (int kind = 0; kind < 5; kind++) {
		int link, n;
		size_t pkt;

		if (kind < 3) {
			roce_meta(&m);
			m.has_vlan = kind == 1;
			if (kind == 2)
				m.sgid[0] = 0x20; /* IPv6 */
			link = UM_LINK_ROCEV2;
		} else {
			ib_meta(&m, kind == 4);
			link = UM_LINK_IB;
		}
		n = um_frame_build(&m, mad, frame, sizeof(frame));
		cr_assert_gt(n, 0);
		pkt = link == UM_LINK_IB ? (size_t)n - 2 : (size_t)n;
		for (size_t cut = 0; cut < (size_t)n; cut++) {
			int rc = parse_copy(frame, cut, link, &p, NULL);

			if (cut >= pkt)
				cr_assert_eq(rc, UM_FRAME_OK, "kind %d cut %zu", kind, cut);
			else
				cr_assert_eq(rc, UM_FRAME_CORRUPT, "kind %d cut %zu: rc %d (%s)",
					     kind, cut, rc, p.note);
		}
	}
}

/* Random mutations and random bytes: any return code, no overrun. */
Test(um_frame, fuzzed_frames_are_safe)
{
	struct um_frame_meta m, p;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX], f2[UM_FRAME_MAX];
	uint64_t x = 0x243F6A8885A308D3ull;

	make_mad(mad, 3, 0x10);
	for (int iter = 0; iter < 6000; iter++) {
		int link, n, rc;
		size_t len;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		switch (iter % 4) {
		case 0: roce_meta(&m); link = UM_LINK_ROCEV2; break;
		case 1: roce_meta(&m); m.dgid[0] = 0xfe; link = UM_LINK_ROCEV2; break;
		case 2: ib_meta(&m, 0); link = UM_LINK_IB; break;
		default: ib_meta(&m, 1); link = UM_LINK_IB; break;
		}
		n = um_frame_build(&m, mad, frame, sizeof(frame));
		memcpy(f2, frame, (size_t)n);
		for (int k = 0; k < 1 + (int)(x % 4); k++)
			f2[(x >> (8 + 9 * k)) % 64] ^= (uint8_t)(x >> (3 * k));
		len = (size_t)n - (x >> 40) % 8;
		if (iter % 50 == 0) {
			for (size_t i = 0; i < sizeof(f2); i++)
				f2[i] = (uint8_t)((x >> (i % 56)) ^ i);
			len = (x >> 20) % sizeof(f2);
		}
		rc = parse_copy(f2, len, iter & 64 ? UM_LINK_IP : link, &p, NULL);
		cr_assert(rc == UM_FRAME_OK || rc == UM_FRAME_NOT_MAD || rc == UM_FRAME_CORRUPT);
	}
}
