/*
 * CM codec: table self-checks, seeded random round trips, known-answer
 * vectors written by hand from the IBTA tables, and diagnostics.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_cm.h"
#include "tests/codec_testutil.h"

Test(cmp_cm, every_table_covers_every_bit_once)
{
	char err[160];

	for (const uint16_t *a = cmp_cm_attrs; *a; a++) {
		const struct cmp_layout *l = cmp_cm_layout(*a);
		cr_assert_not_null(l);
		cr_assert_eq(l->len, CMP_CM_DATA_SIZE);
		cr_assert_eq(cmp_layout_check(l, 1, err, sizeof(err)), 0, "%s", err);
	}
	cr_assert_eq(cmp_layout_check(&cmp_mad_hdr_layout, 1, err, sizeof(err)), 0, "%s", err);
}

Test(cmp_cm, private_data_sizes_match_the_spec)
{
	static const struct { uint16_t attr; unsigned len; } want[] = {
		{ UMAD_CM_ATTR_REQ, CMP_REQ_PDATA }, { UMAD_CM_ATTR_MRA, CMP_MRA_PDATA },
		{ UMAD_CM_ATTR_REJ, CMP_REJ_PDATA }, { UMAD_CM_ATTR_REP, CMP_REP_PDATA },
		{ UMAD_CM_ATTR_RTU, CMP_RTU_PDATA }, { UMAD_CM_ATTR_DREQ, CMP_DREQ_PDATA },
		{ UMAD_CM_ATTR_DREP, CMP_DREP_PDATA }, { UMAD_CM_ATTR_LAP, CMP_LAP_PDATA },
		{ UMAD_CM_ATTR_APR, CMP_APR_PDATA }, { UMAD_CM_ATTR_SIDR_REQ, CMP_SIDR_REQ_PDATA },
		{ UMAD_CM_ATTR_SIDR_REP, CMP_SIDR_REP_PDATA },
	};
	/* The numbers wire.md lists: 92 222 148 196 224 220 224 168 148 216 136. */
	cr_assert_eq(CMP_REQ_PDATA + CMP_MRA_PDATA + CMP_REJ_PDATA + CMP_REP_PDATA +
			     CMP_RTU_PDATA + CMP_DREQ_PDATA + CMP_DREP_PDATA + CMP_LAP_PDATA +
			     CMP_APR_PDATA + CMP_SIDR_REQ_PDATA + CMP_SIDR_REP_PDATA,
		     1994);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		const struct cmp_field *f = cmp_layout_find(cmp_cm_layout(want[i].attr), "private_data");
		cr_assert_not_null(f);
		cr_assert_eq(f->width / 8, want[i].len, "%s", cmp_cm_attr_str(want[i].attr));
		cr_assert_eq(f->byte + f->width / 8, CMP_CM_DATA_SIZE, "pdata ends the MAD");
	}
}

Test(cmp_cm, random_struct_round_trip)
{
	for (uint64_t seed = 1; seed <= 2000; seed++) {
		for (const uint16_t *a = cmp_cm_attrs; *a; a++) {
			struct cmp_cm_msg in, out;
			uint8_t mad[CMP_MAD_SIZE];
			struct cmp_diags d;

			rng_state = seed * 7919 + *a;
			memset(&in, 0, sizeof(in));
			in.hdr.attr_id = *a;
			in.hdr.tid = rnd();
			in.hdr.attr_mod = (uint32_t)rnd();
			in.hdr.status = (uint16_t)rnd();
			in.hdr.class_specific = (uint16_t)rnd();
			fill_random(cmp_cm_layout(*a), &in.u);
			cr_assert_eq(cmp_cm_encode(&in, mad), 0);
			cmp_diags_init(&d);
			/* Random values may be semantically invalid; the decode
			 * result must still carry every field. */
			(void)cmp_cm_decode(mad, sizeof(mad), &out, &d);
			cr_assert_eq(out.hdr.attr_id, *a);
			cr_assert_eq(out.hdr.tid, in.hdr.tid);
			cr_assert_eq(out.hdr.attr_mod, in.hdr.attr_mod);
			cr_assert_eq(out.hdr.mgmt_class, UMAD_CLASS_CM);
			assert_same(cmp_cm_layout(*a), &in.u, &out.u, seed);
			/* Encoding always leaves reserved bits clear. */
			cr_assert_eq(cmp_layout_check_reserved(cmp_cm_layout(*a),
							       mad + CMP_MAD_HDR_SIZE, NULL, NULL), 0);
		}
	}
}

Test(cmp_cm, random_wire_round_trip_is_exact_but_for_reserved_bits)
{
	for (uint64_t seed = 1; seed <= 2000; seed++) {
		for (const uint16_t *a = cmp_cm_attrs; *a; a++) {
			const struct cmp_layout *l = cmp_cm_layout(*a);
			uint8_t mad[CMP_MAD_SIZE], back[CMP_MAD_SIZE];
			struct cmp_cm_msg m;

			rng_state = seed ^ ((uint64_t)*a << 40);
			for (size_t i = 0; i < sizeof(mad); i++)
				mad[i] = (uint8_t)rnd();
			mad[0] = 1;
			mad[1] = UMAD_CLASS_CM;
			mad[2] = 2;
			mad[3] = *a == UMAD_ATTR_CLASS_PORT_INFO ? UMAD_METHOD_GET : UMAD_METHOD_SEND;
			mad[16] = (uint8_t)(*a >> 8);
			mad[17] = (uint8_t)*a;
			(void)cmp_cm_decode(mad, sizeof(mad), &m, NULL);
			cr_assert_eq(cmp_cm_encode(&m, back), 0);
			/* expected: the input with every reserved bit cleared */
			cmp_bits_set(mad, 18, 0, 16, 0);
			for (size_t i = 0; i < l->nfields; i++) {
				const struct cmp_field *f = &l->fields[i];
				if (f->kind != CMP_K_RSVD)
					continue;
				for (unsigned b = 0; b < f->width; b++) {
					unsigned pos = (CMP_MAD_HDR_SIZE + f->byte) * 8u + f->bit + b;
					cmp_bits_set(mad, pos / 8, pos % 8, 1, 0);
				}
			}
			cr_assert(!memcmp(mad, back, sizeof(mad)), "%s seed %llu", l->name,
				  (unsigned long long)seed);
		}
	}
}

/* ---- known answers, byte positions counted by hand from IBTA table 106 ---- */

static void kat_hdr(uint8_t *m, uint16_t attr, uint8_t method)
{
	memset(m, 0, CMP_MAD_SIZE);
	m[0] = 0x01;  /* base version */
	m[1] = 0x07;  /* CM class */
	m[2] = 0x02;  /* class version */
	m[3] = method;
	/* TID 0x0102030405060708 */
	for (int i = 0; i < 8; i++)
		m[8 + i] = (uint8_t)(i + 1);
	m[16] = (uint8_t)(attr >> 8);
	m[17] = (uint8_t)attr;
	m[20] = 0xAA; m[21] = 0xBB; m[22] = 0xCC; m[23] = 0xDD; /* attr_mod */
}

Test(cmp_cm, known_answer_req)
{
	uint8_t want[CMP_MAD_SIZE], got[CMP_MAD_SIZE];
	struct cmp_cm_msg m = { 0 }, d;
	struct cmp_diags diags;

	kat_hdr(want, 0x0010, 0x03);
	/* MAD byte = 24 + table byte */
	want[24] = 0x11; want[25] = 0x22; want[26] = 0x33; want[27] = 0x44; /* local comm id */
	want[29] = 0x15; want[30] = 0xB3; want[31] = 0x50;                  /* vendor id 0x15b350 */
	/* service id 0x0000000001061144 (TCP port 4420) */
	want[36] = 0x01; want[37] = 0x06; want[38] = 0x11; want[39] = 0x44;
	for (int i = 0; i < 8; i++)
		want[40 + i] = (uint8_t)(0xA0 + i);                       /* local CA GUID */
	want[52] = 0x80; want[53] = 0x01; want[54] = 0x00; want[55] = 0x00; /* Q_Key */
	want[56] = 0xAB; want[57] = 0xCD; want[58] = 0xEF;                  /* local QPN */
	want[59] = 0x10;                                                    /* resp res */
	want[63] = 0x08;                                                    /* init depth */
	want[67] = 0xA1; /* remote CM resp timeout 20 | RC (0) | e2e flow ctl 1 */
	want[68] = 0x12; want[69] = 0x34; want[70] = 0x56;                  /* starting PSN */
	want[71] = 0xA7; /* local CM resp timeout 20 | retry count 7 */
	want[72] = 0xFF; want[73] = 0xFF;                                   /* P_Key */
	want[74] = 0x47; /* MTU 4 (2048) | RDC 0 | RNR retry 7 */
	want[75] = 0xF8; /* max CM retries 15 | SRQ 1 | ext transport 0 */
	want[76] = 0x00; want[77] = 0x05; want[78] = 0x00; want[79] = 0x07; /* LIDs 5 -> 7 */
	want[80] = 0xFE; want[80 + 1] = 0x80; want[80 + 15] = 0x05;         /* local GID */
	want[96] = 0xFE; want[96 + 1] = 0x80; want[96 + 15] = 0x07;         /* remote GID */
	want[112] = 0x12; want[113] = 0x34; want[114] = 0x50;               /* flow label 0x12345 */
	want[115] = 0x03;                                                   /* rate 3 */
	want[116] = 0x22; want[117] = 0x40;                                 /* TC, hop limit */
	want[118] = 0x58; /* SL 5 | subnet local 1 */
	want[119] = 0x90; /* local ACK timeout 18 */
	want[163] = 0x04; /* SAP supported (bit 5 of table byte 139) */
	want[164] = 0x00; want[165] = 0x00; want[166] = 0x40;               /* CMA header start */
	want[255] = 0x99;                                                   /* last pdata byte */

	m.hdr.method = UMAD_METHOD_SEND;
	m.hdr.tid = 0x0102030405060708ULL;
	m.hdr.attr_id = UMAD_CM_ATTR_REQ;
	m.hdr.attr_mod = 0xAABBCCDD;
	struct cmp_cm_req *r = &m.u.req;
	r->local_comm_id = 0x11223344;
	r->vendor_id = 0x15B350;
	r->service_id = 0x0000000001061144ULL;
	r->local_ca_guid = 0xA0A1A2A3A4A5A6A7ULL;
	r->local_qkey = 0x80010000;
	r->local_qpn = 0xABCDEF;
	r->responder_resources = 0x10;
	r->initiator_depth = 0x08;
	r->remote_cm_response_timeout = 20;
	r->end_to_end_flow_control = 1;
	r->starting_psn = 0x123456;
	r->local_cm_response_timeout = 20;
	r->retry_count = 7;
	r->pkey = 0xFFFF;
	r->path_mtu = 4;
	r->rnr_retry_count = 7;
	r->max_cm_retries = 15;
	r->srq = 1;
	r->primary_local_lid = 5;
	r->primary_remote_lid = 7;
	r->primary_local_gid[0] = 0xFE; r->primary_local_gid[1] = 0x80; r->primary_local_gid[15] = 5;
	r->primary_remote_gid[0] = 0xFE; r->primary_remote_gid[1] = 0x80; r->primary_remote_gid[15] = 7;
	r->primary_flow_label = 0x12345;
	r->primary_packet_rate = 3;
	r->primary_traffic_class = 0x22;
	r->primary_hop_limit = 0x40;
	r->primary_sl = 5;
	r->primary_subnet_local = 1;
	r->primary_local_ack_timeout = 18;
	r->sap_supported = 1;
	r->private_data[2] = 0x40;
	r->private_data[91] = 0x99;

	cr_assert_eq(cmp_cm_encode(&m, got), 0);
	for (int i = 0; i < CMP_MAD_SIZE; i++)
		cr_assert_eq(got[i], want[i], "byte %d: got 0x%02x want 0x%02x", i, got[i], want[i]);

	cmp_diags_init(&diags);
	cr_assert_eq(cmp_cm_decode(want, sizeof(want), &d, &diags), 0);
	cr_assert_eq(diags.total, 0, "%s", diags.d[0].text);
	cr_assert(!memcmp(&d.u.req, &m.u.req, sizeof(m.u.req)));
}

Test(cmp_cm, known_answer_rep_vendor_id_split)
{
	uint8_t got[CMP_MAD_SIZE];
	struct cmp_cm_msg m = { .hdr.attr_id = UMAD_CM_ATTR_REP };

	cmp_cm_rep_set_vendor_id(&m.u.rep, 0xC1D2E3);
	m.u.rep.local_qpn = 0x000102;
	m.u.rep.starting_psn = 0xFFFFFF;
	m.u.rep.target_ack_delay = 31;
	m.u.rep.failover_accepted = 1;
	m.u.rep.rnr_retry_count = 5;
	m.u.rep.srq = 1;
	cr_assert_eq(cmp_cm_encode(&m, got), 0);
	cr_assert_eq(got[24 + 15], 0xC1); /* VendorID[23:16] */
	cr_assert_eq(got[24 + 19], 0xD2); /* VendorID[15:8] */
	cr_assert_eq(got[24 + 23], 0xE3); /* VendorID[7:0] */
	cr_assert_eq(got[24 + 14], 0x02);
	cr_assert_eq(got[24 + 20], 0xFF);
	cr_assert_eq(got[24 + 26], 0xFA); /* 11111 01 0 */
	cr_assert_eq(got[24 + 27], 0xB0); /* 101 1 0000 */
	cr_assert_eq(cmp_cm_rep_vendor_id(&m.u.rep), 0xC1D2E3);
}

Test(cmp_cm, known_answer_sidr_rep_and_rej)
{
	uint8_t got[CMP_MAD_SIZE];
	struct cmp_cm_msg m = { .hdr.attr_id = UMAD_CM_ATTR_SIDR_REP };

	cmp_cm_sidr_rep_set_vendor_id(&m.u.sidr_rep, 0x123456);
	m.u.sidr_rep.qpn = 0xABCDEF;
	m.u.sidr_rep.qkey = 0x01234567;
	cr_assert_eq(cmp_cm_encode(&m, got), 0);
	cr_assert_eq(got[24 + 6], 0x12);
	cr_assert_eq(got[24 + 7], 0x34);
	cr_assert_eq(got[24 + 8], 0xAB);
	cr_assert_eq(got[24 + 10], 0xEF);
	cr_assert_eq(got[24 + 11], 0x56);
	cr_assert_eq(got[24 + 20], 0x01);
	cr_assert_eq(got[24 + 23], 0x67);

	memset(&m, 0, sizeof(m));
	m.hdr.attr_id = UMAD_CM_ATTR_REJ;
	m.u.rej.message_rejected = 1;     /* REP */
	m.u.rej.reject_info_length = 72;
	m.u.rej.reason = 28;
	m.u.rej.ari[71] = 0x5A;
	m.u.rej.private_data[0] = 0xC3;
	cr_assert_eq(cmp_cm_encode(&m, got), 0);
	cr_assert_eq(got[24 + 8], 0x40);  /* 01 000000 */
	cr_assert_eq(got[24 + 9], 0x90);  /* 1001000 0 */
	cr_assert_eq(got[24 + 11], 28);
	cr_assert_eq(got[24 + 12 + 71], 0x5A);
	cr_assert_eq(got[24 + 84], 0xC3);
}

/* ---- diagnostics ---- */

static void base_mad(uint8_t *mad, uint16_t attr)
{
	struct cmp_cm_msg m = { .hdr.attr_id = attr };
	if (attr == UMAD_CM_ATTR_REQ)
		m.u.req.path_mtu = 3;
	cr_assert_eq(cmp_cm_encode(&m, mad), 0);
}

static const struct cmp_diag *expect_diag(const uint8_t *mad, size_t len, int rc_want,
					  enum cmp_diag_code code)
{
	static struct cmp_diags d;
	struct cmp_cm_msg m;

	cmp_diags_init(&d);
	cr_assert_eq(cmp_cm_decode(mad, len, &m, &d), rc_want);
	for (unsigned i = 0; i < d.n; i++)
		if (d.d[i].code == code)
			return &d.d[i];
	cr_assert_fail("no diagnostic %s (got %u, first: %s)", cmp_diag_code_str(code), d.n,
		       d.n ? d.d[0].text : "-");
	return NULL;
}

Test(cmp_cm, clean_messages_decode_without_diagnostics)
{
	for (const uint16_t *a = cmp_cm_attrs; *a; a++) {
		uint8_t mad[CMP_MAD_SIZE];
		struct cmp_diags d;
		struct cmp_cm_msg m;

		base_mad(mad, *a);
		cmp_diags_init(&d);
		cr_assert_eq(cmp_cm_decode(mad, sizeof(mad), &m, &d), 0, "%s", cmp_cm_attr_str(*a));
		/* REJ reason 0 is the one expected warning of an all-zero REJ */
		if (*a != UMAD_CM_ATTR_REJ)
			cr_assert_eq(d.total, 0, "%s: %s", cmp_cm_attr_str(*a), d.d[0].text);
	}
}

Test(cmp_cm, bad_header_fields_are_named)
{
	uint8_t mad[CMP_MAD_SIZE];
	const struct cmp_diag *x;

	base_mad(mad, UMAD_CM_ATTR_REQ);
	x = expect_diag(mad, 100, -1, CMP_E_LENGTH);
	cr_assert(strstr(x->text, "100"));

	mad[0] = 2;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_BASE_VERSION);
	cr_assert_str_eq(x->field, "base_version");
	mad[0] = 1;

	mad[2] = 1;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_CLASS_VERSION);
	cr_assert_eq(x->byte, 2);
	mad[2] = 2;

	mad[1] = 3;
	expect_diag(mad, sizeof(mad), -1, CMP_E_CLASS);
	mad[1] = 7;

	mad[3] = UMAD_METHOD_GET;
	expect_diag(mad, sizeof(mad), -1, CMP_E_METHOD);
	mad[3] = UMAD_METHOD_SEND;

	mad[17] = 0x1B; /* SAP: not decoded */
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_ATTR);
	cr_assert(strstr(x->text, "0x001b"), "%s", x->text);
}

Test(cmp_cm, reserved_bits_warn_with_position)
{
	uint8_t mad[CMP_MAD_SIZE];
	const struct cmp_diag *x;

	base_mad(mad, UMAD_CM_ATTR_REQ);
	mad[24 + 95] |= 0x01; /* REQ byte 95, bit 7: reserved */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_RESERVED);
	cr_assert_eq(x->sev, CMP_DIAG_WARN);
	cr_assert_eq(x->byte, 24 + 95);
	cr_assert_eq(x->bit, 5);
	cr_assert_str_eq(x->field, "_rsvd95");
}

Test(cmp_cm, rej_ari_length_beyond_field_is_an_error)
{
	uint8_t mad[CMP_MAD_SIZE];
	const struct cmp_diag *x;

	base_mad(mad, UMAD_CM_ATTR_REJ);
	mad[24 + 11] = 28;
	mad[24 + 9] = (uint8_t)(73 << 1);
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_LENGTH_FIELD);
	cr_assert_str_eq(x->field, "reject_info_length");
	cr_assert(strstr(x->text, "73"), "%s", x->text);
	mad[24 + 9] = (uint8_t)(72 << 1);
	struct cmp_cm_msg m;
	cr_assert_eq(cmp_cm_decode(mad, sizeof(mad), &m, NULL), 0);
}

Test(cmp_cm, reserved_enum_values)
{
	uint8_t mad[CMP_MAD_SIZE];

	base_mad(mad, UMAD_CM_ATTR_REQ);
	mad[24 + 43] = 0x06; /* transport service type 3 */
	expect_diag(mad, sizeof(mad), -1, CMP_E_VALUE);
	base_mad(mad, UMAD_CM_ATTR_REQ);
	mad[24 + 50] = 0x70; /* MTU code 7 */
	expect_diag(mad, sizeof(mad), -1, CMP_E_VALUE);
	base_mad(mad, UMAD_CM_ATTR_MRA);
	mad[24 + 8] = 0xC0; /* message MRAed 3 */
	expect_diag(mad, sizeof(mad), -1, CMP_E_VALUE);
	base_mad(mad, UMAD_CM_ATTR_SIDR_REP);
	mad[24 + 5] = 200;
	expect_diag(mad, sizeof(mad), -1, CMP_E_LENGTH_FIELD);
	base_mad(mad, UMAD_CM_ATTR_APR);
	mad[24 + 8] = 73;
	expect_diag(mad, sizeof(mad), -1, CMP_E_LENGTH_FIELD);
}

Test(cmp_cm, names)
{
	cr_assert_str_eq(cmp_cm_attr_str(UMAD_CM_ATTR_DREP), "DREP");
	cr_assert_str_eq(cmp_cm_rej_reason_str(10), "stale connection");
	cr_assert_str_eq(cmp_cm_rej_reason_str(28), "consumer defined");
	cr_assert_str_eq(cmp_cm_rej_reason_str(34), "unknown reason");
	cr_assert_str_eq(cmp_cm_rej_reason_str(999), "unknown reason");
}

/* cmp_cm_local_id / cmp_cm_remote_id read each message's own fields: a
 * message whose IDs sit elsewhere, or that has none, would show here. */
Test(cmp_cm, comm_ids_of_every_message)
{
	struct cmp_cm_msg m;
	static const struct { uint16_t attr; uint32_t local, remote; } want[] = {
		{ UMAD_CM_ATTR_REQ, 0x11, 0 },        { UMAD_CM_ATTR_MRA, 0x11, 0x22 },
		{ UMAD_CM_ATTR_REJ, 0x11, 0x22 },     { UMAD_CM_ATTR_REP, 0x11, 0x22 },
		{ UMAD_CM_ATTR_RTU, 0x11, 0x22 },     { UMAD_CM_ATTR_DREQ, 0x11, 0x22 },
		{ UMAD_CM_ATTR_DREP, 0x11, 0x22 },    { UMAD_CM_ATTR_LAP, 0x11, 0x22 },
		{ UMAD_CM_ATTR_APR, 0x11, 0x22 },     { UMAD_CM_ATTR_SIDR_REQ, 0x33, 0 },
		{ UMAD_CM_ATTR_SIDR_REP, 0, 0x33 },   { UMAD_ATTR_CLASS_PORT_INFO, 0, 0 },
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		memset(&m, 0, sizeof(m));
		m.hdr.attr_id = want[i].attr;
		switch (want[i].attr) {
#define IDS(x) m.u.x.local_comm_id = 0x11; m.u.x.remote_comm_id = 0x22; break
		case UMAD_CM_ATTR_REQ: m.u.req.local_comm_id = 0x11; break;
		case UMAD_CM_ATTR_MRA: IDS(mra);
		case UMAD_CM_ATTR_REJ: IDS(rej);
		case UMAD_CM_ATTR_REP: IDS(rep);
		case UMAD_CM_ATTR_RTU: IDS(rtu);
		case UMAD_CM_ATTR_DREQ: IDS(dreq);
		case UMAD_CM_ATTR_DREP: IDS(drep);
		case UMAD_CM_ATTR_LAP: IDS(lap);
		case UMAD_CM_ATTR_APR: IDS(apr);
#undef IDS
		case UMAD_CM_ATTR_SIDR_REQ: m.u.sidr_req.request_id = 0x33; break;
		case UMAD_CM_ATTR_SIDR_REP: m.u.sidr_rep.request_id = 0x33; break;
		default: break;
		}
		cr_expect_eq(cmp_cm_local_id(&m), want[i].local, "%s local", cmp_cm_attr_str(want[i].attr));
		cr_expect_eq(cmp_cm_remote_id(&m), want[i].remote, "%s remote",
			     cmp_cm_attr_str(want[i].attr));
	}
}

/* XRC in a REQ where the kernel's (pre-IBA_SET) cm_msgs.h put it: transport
 * service type 3 is bits 2:1 of byte 43 (offset40 & 0x06), extended
 * transport type 1 bits 2:0 of byte 51 (offset51 & 0x7). Type 3 is valid
 * only with extended type 1 (XRC). */
Test(cmp_cm, req_xrc_transport_bits)
{
	uint8_t got[CMP_MAD_SIZE];
	struct cmp_cm_msg m = { .hdr.attr_id = UMAD_CM_ATTR_REQ }, d;
	struct cmp_diags diags;

	m.u.req.transport_service_type = 3;
	m.u.req.extended_transport_type = 1;
	m.u.req.path_mtu = 4;
	cr_assert_eq(cmp_cm_encode(&m, got), 0);
	cr_assert_eq(got[CMP_MAD_HDR_SIZE + 43] & 0x06, 0x06);
	cr_assert_eq(got[CMP_MAD_HDR_SIZE + 51] & 0x07, 0x01);
	cr_assert_str_eq(cmp_cm_req_qp_type_str(&m.u.req), "XRC");
	cmp_diags_init(&diags);
	cr_assert_eq(cmp_cm_decode(got, sizeof(got), &d, &diags), 0);
	cr_assert_eq(diags.total, 0, "%s", diags.d[0].text);

	m.u.req.extended_transport_type = 0;
	cr_assert_eq(cmp_cm_encode(&m, got), 0);
	cmp_diags_init(&diags);
	cr_assert_neq(cmp_cm_decode(got, sizeof(got), &d, &diags), 0);
	cr_assert_str_eq(cmp_cm_req_qp_type_str(&m.u.req), "reserved");
	m.u.req.transport_service_type = 0;
	cr_assert_str_eq(cmp_cm_req_qp_type_str(&m.u.req), "RC");
	m.u.req.transport_service_type = 1;
	cr_assert_str_eq(cmp_cm_req_qp_type_str(&m.u.req), "UC");
	m.u.req.transport_service_type = 2;
	cr_assert_str_eq(cmp_cm_req_qp_type_str(&m.u.req), "RD");
}
