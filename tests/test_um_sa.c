/*
 * SA codec: table self-checks, seeded random round trips, known-answer
 * vectors written by hand from the IBTA / kernel field tables, every
 * diagnostic, and the comp masks of the query builders.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "umad/um_sa.h"
#include "tests/codec_testutil.h"


/* Clears every bit of the reserved rows of l, which starts at MAD byte base. */
static void clear_reserved(const struct cmp_layout *l, uint8_t *mad, unsigned base)
{
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		if (f->kind != CMP_K_RSVD)
			continue;
		for (unsigned b = 0; b < f->width; b++) {
			unsigned pos = (base + f->byte) * 8u + f->bit + b;
			cmp_bits_set(mad, pos / 8, pos % 8, 1, 0);
		}
	}
}

/* Methods valid for each attribute that carry exactly one record. */
static uint8_t single_record_method(uint16_t attr, uint64_t r)
{
	static const uint8_t cpi[] = { UMAD_METHOD_GET, UMAD_METHOD_GET_RESP };
	static const uint8_t pr[] = { UMAD_METHOD_GET, UMAD_METHOD_GET_RESP,
				      UMAD_SA_METHOD_GET_TABLE };
	static const uint8_t mcm[] = { UMAD_METHOD_GET, UMAD_METHOD_GET_RESP, UMAD_METHOD_SET,
				       UMAD_SA_METHOD_GET_TABLE, UMAD_SA_METHOD_DELETE,
				       UMAD_SA_METHOD_DELETE_RESP };

	switch (attr) {
	case UMAD_ATTR_CLASS_PORT_INFO: return cpi[r % 2];
	case UMAD_SA_ATTR_PATH_REC: return pr[r % 3];
	default: return mcm[r % 6];
	}
}

Test(um_sa, every_layout_covers_every_bit_once)
{
	char err[160];

	cr_assert_eq(cmp_layout_check(&um_sa_hdr_layout, 1, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(um_sa_hdr_layout.len, 32);
	cr_assert_eq(UM_SA_HDR_OFFSET + UM_SA_HDR_SIZE, UM_SA_DATA_OFFSET);
	cr_assert_eq(UM_SA_DATA_OFFSET + UMAD_LEN_SA_DATA, CMP_MAD_SIZE);
	cr_assert_eq(cmp_layout_check(&cmp_mad_hdr_layout, 1, err, sizeof(err)), 0, "%s", err);
	for (const uint16_t *a = um_sa_attrs; *a; a++) {
		const struct cmp_layout *l = um_sa_layout(*a);
		cr_assert_not_null(l);
		cr_assert_eq(cmp_layout_check(l, 1, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(l->len % 8, 0, "%s: SA records are 8-byte multiples", l->name);
		cr_assert_leq(l->len, UMAD_LEN_SA_DATA);
	}
	cr_assert_eq(um_sa_layout(UMAD_SA_ATTR_PATH_REC)->len, 64);
	cr_assert_eq(um_sa_layout(UMAD_SA_ATTR_MCMEMBER_REC)->len, 56);
	cr_assert_eq(um_sa_layout(UMAD_ATTR_CLASS_PORT_INFO), &cmp_cpi_layout);
	cr_assert_eq(cmp_cpi_layout.len, 72);
	/* The installed header's MCMemberRecord (52 bytes + 4 pad) agrees. */
	cr_assert_eq(sizeof(struct umad_sa_mcmember_record), UM_SA_MCM_SIZE);
	cr_assert_eq(sizeof(struct umad_sa_packet), CMP_MAD_SIZE);
	cr_assert_eq(offsetof(struct umad_sa_packet, data), UM_SA_DATA_OFFSET);
	cr_assert_eq(offsetof(struct umad_sa_packet, comp_mask), 48);
	cr_assert_eq(offsetof(struct umad_sa_packet, attr_offset), 44);
}

Test(um_sa, random_struct_round_trip)
{
	for (uint64_t seed = 1; seed <= 3000; seed++) {
		for (const uint16_t *a = um_sa_attrs; *a; a++) {
			const struct cmp_layout *l = um_sa_layout(*a);
			struct um_sa_msg in, out;
			uint8_t mad[CMP_MAD_SIZE];
			struct cmp_diags d;
			int rc, norec;

			rng_state = seed * 7919 + *a;
			memset(&in, 0, sizeof(in));
			in.hdr.base_version = 1; /* the encoder fills these three */
			in.hdr.mgmt_class = UMAD_CLASS_SUBN_ADM;
			in.hdr.class_version = 2;
			in.hdr.attr_id = *a;
			in.hdr.method = single_record_method(*a, rnd());
			in.hdr.tid = rnd();
			in.hdr.attr_mod = (uint32_t)rnd();
			in.hdr.status = (uint16_t)rnd();
			in.hdr.class_specific = (uint16_t)rnd();
			fill_random(&um_sa_hdr_layout, &in.sa);
			norec = 0;
			if (in.sa.rmpp_flags & UMAD_RMPP_FLAG_ACTIVE) {
				in.sa.rmpp_version = UMAD_RMPP_VERSION;
				/* mostly DATA; ACK/STOP/ABORT carry no record */
				in.sa.rmpp_type = (uint8_t)(seed % 4 ? 1 : 2 + rnd() % 3);
				norec = in.sa.rmpp_type != UM_SA_RMPP_TYPE_DATA;
			}
			if (!norec)
				fill_random(l, &in.u);
			cr_assert_eq(um_sa_encode(&in, mad), 0);
			cmp_diags_init(&d);
			rc = um_sa_decode(mad, sizeof(mad), &out, &d);
			cr_assert_eq(rc, 0, "seed %llu: %s", (unsigned long long)seed, d.d[0].text);
			cr_assert_eq(d.errors, 0);
			assert_same(&cmp_mad_hdr_layout, &in.hdr, &out.hdr, seed);
			assert_same(&um_sa_hdr_layout, &in.sa, &out.sa, seed);
			cr_assert_eq(out.nrecords, norec ? 0 : 1);
			if (!norec)
				assert_same(l, &in.u, &out.u, seed);
			/* Encoding always leaves reserved bits clear. */
			cr_assert_eq(cmp_layout_check_reserved(&um_sa_hdr_layout,
							       mad + UM_SA_HDR_OFFSET, NULL, NULL), 0);
			cr_assert_eq(cmp_layout_check_reserved(l, mad + UM_SA_DATA_OFFSET, NULL,
							       NULL), 0);
		}
	}
}

Test(um_sa, random_table_response_round_trip)
{
	for (uint64_t seed = 1; seed <= 1500; seed++) {
		for (const uint16_t *a = um_sa_attrs; *a; a++) {
			const struct cmp_layout *l = um_sa_layout(*a);
			union { struct um_sa_path_rec pr; struct um_sa_mcm_rec mcm; } rec[3], back;
			unsigned max = UMAD_LEN_SA_DATA / l->len, n;
			uint8_t mad[CMP_MAD_SIZE];
			struct um_sa_msg m, out;
			struct cmp_diags d;

			if (*a == UMAD_ATTR_CLASS_PORT_INFO)
				continue;
			rng_state = seed * 104729 + *a;
			n = (unsigned)(rnd() % (max + 1));
			memset(&m, 0, sizeof(m));
			memset(rec, 0, sizeof(rec));
			m.hdr.attr_id = *a;
			m.hdr.method = UMAD_SA_METHOD_GET_TABLE_RESP;
			m.hdr.tid = rnd();
			m.sa.rmpp_version = UMAD_RMPP_VERSION;
			m.sa.rmpp_type = UM_SA_RMPP_TYPE_DATA;
			m.sa.rmpp_resp_time = (uint8_t)(rnd() & 31);
			m.sa.rmpp_flags = UMAD_RMPP_FLAG_ACTIVE | UM_SA_RMPP_FLAG_FIRST |
					  UM_SA_RMPP_FLAG_LAST;
			m.sa.seg_num = 1;
			m.sa.paylen_newwin = UM_SA_RMPP_CLASS_HDR + n * l->len;
			m.sa.attr_offset = (uint16_t)(l->len / 8);
			m.sa.comp_mask = rnd() & (*a == UMAD_SA_ATTR_PATH_REC ? UM_SA_PR_COMP_ALL
									       : UM_SA_MCM_COMP_ALL);
			/* CA13-6: the two ServiceID bits go together */
			if (*a == UMAD_SA_ATTR_PATH_REC && (m.sa.comp_mask & UM_SA_PR_COMP_SERVICE_ID))
				m.sa.comp_mask |= UM_SA_PR_COMP_SERVICE_ID;
			for (unsigned i = 0; i < n; i++)
				fill_random(l, &rec[i]);
			memcpy(&m.u, &rec[0], l->size);
			cr_assert_eq(um_sa_encode(&m, mad), 0);
			for (unsigned i = 1; i < n; i++)
				cr_assert_eq(um_sa_record_put(mad, *a, i, &rec[i]), 0);
			cr_assert_eq(um_sa_record_put(mad, *a, max, &rec[0]), -1, "past 200 bytes");
			cmp_diags_init(&d);
			cr_assert_eq(um_sa_decode(mad, sizeof(mad), &out, &d), 0, "%s", d.d[0].text);
			cr_assert_eq(d.total, 0, "seed %llu: %s", (unsigned long long)seed, d.d[0].text);
			cr_assert_eq(out.nrecords, n);
			for (unsigned i = 0; i < n; i++) {
				cr_assert_eq(um_sa_record_get(mad, &out, i, &back), 0);
				assert_same(l, &rec[i], &back, seed);
			}
			if (n)
				assert_same(l, &rec[0], &out.u, seed);
			cr_assert_eq(um_sa_record_get(mad, &out, n, &back), -1);
		}
	}
}

Test(um_sa, random_wire_round_trip_is_exact_but_for_reserved_bits)
{
	for (uint64_t seed = 1; seed <= 3000; seed++) {
		for (const uint16_t *a = um_sa_attrs; *a; a++) {
			const struct cmp_layout *l = um_sa_layout(*a);
			uint8_t mad[CMP_MAD_SIZE], back[CMP_MAD_SIZE];
			struct um_sa_msg m;

			rng_state = seed ^ ((uint64_t)*a << 40);
			for (size_t i = 0; i < sizeof(mad); i++)
				mad[i] = (uint8_t)rnd();
			mad[0] = 1;
			mad[1] = UMAD_CLASS_SUBN_ADM;
			mad[2] = 2;
			mad[3] = single_record_method(*a, rnd());
			mad[16] = (uint8_t)(*a >> 8);
			mad[17] = (uint8_t)*a;
			if (mad[26] & UMAD_RMPP_FLAG_ACTIVE) {
				mad[24] = UMAD_RMPP_VERSION;
				mad[25] = UM_SA_RMPP_TYPE_DATA;
			}
			cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), 0,
				     "seed %llu", (unsigned long long)seed);
			cr_assert_eq(um_sa_encode(&m, back), 0);
			/* expected: the input with every reserved bit, and the
			 * padding after the record, cleared */
			cmp_bits_set(mad, 18, 0, 16, 0);
			clear_reserved(&um_sa_hdr_layout, mad, UM_SA_HDR_OFFSET);
			clear_reserved(l, mad, UM_SA_DATA_OFFSET);
			memset(mad + UM_SA_DATA_OFFSET + l->len, 0,
			       CMP_MAD_SIZE - UM_SA_DATA_OFFSET - l->len);
			for (int i = 0; i < CMP_MAD_SIZE; i++)
				cr_assert_eq(back[i], mad[i], "%s seed %llu byte %d: 0x%02x != 0x%02x",
					     l->name, (unsigned long long)seed, i, back[i], mad[i]);
		}
	}
}

/* ---- known answers: bytes placed by hand from the field tables ---- */

static void kat_hdr(uint8_t *m, uint16_t attr, uint8_t method)
{
	memset(m, 0, CMP_MAD_SIZE);
	m[0] = 0x01;  /* base version */
	m[1] = 0x03;  /* SA class */
	m[2] = 0x02;  /* class version */
	m[3] = method;
	for (int i = 0; i < 8; i++)
		m[8 + i] = (uint8_t)(0x10 + i); /* TID 0x1011121314151617 */
	m[16] = (uint8_t)(attr >> 8);
	m[17] = (uint8_t)attr;
}

static const uint8_t gid_a[16] = { 0xFE, 0x80, 0, 0, 0, 0, 0, 0,
				   0x00, 0x02, 0xC9, 0x03, 0x00, 0x01, 0x02, 0x03 };
static const uint8_t gid_b[16] = { 0xFE, 0x80, 0, 0, 0, 0, 0, 0,
				   0x00, 0x02, 0xC9, 0x03, 0x00, 0x0A, 0x0B, 0x0C };
/* An rdma_cm UDP-port-space MGID for 224.0.1.2: byte 3 = 0x01 (signature). */
static const uint8_t mgid_udp[16] = { 0xFF, 0x12, 0x40, 0x01, 0xFF, 0xFF, 0, 0,
				      0, 0, 0, 0, 0xE0, 0x00, 0x01, 0x02 };

static void assert_bytes(const uint8_t *got, const uint8_t *want)
{
	for (int i = 0; i < CMP_MAD_SIZE; i++)
		cr_assert_eq(got[i], want[i], "byte %d: got 0x%02x want 0x%02x", i, got[i], want[i]);
}

Test(um_sa, known_answer_path_record_get_resp)
{
	uint8_t want[CMP_MAD_SIZE], got[CMP_MAD_SIZE];
	struct um_sa_msg m = { 0 }, dec;
	struct cmp_diags diags;

	kat_hdr(want, 0x0035, 0x81);
	want[45] = 0x08;                   /* attr_offset: 64 bytes = 8 words */
	want[54] = 0x78; want[55] = 0x0F;  /* comp mask echoed: bits 0-3, 11-14 */
	/* PathRecord, MAD byte = 56 + record byte */
	want[60] = 0x01; want[61] = 0x06; want[62] = 0x11; want[63] = 0x44; /* ServiceID */
	memcpy(want + 64, gid_b, 16);                                       /* DGID */
	memcpy(want + 80, gid_a, 16);                                       /* SGID */
	want[96] = 0x00; want[97] = 0x07;  /* DLID 7 */
	want[98] = 0x00; want[99] = 0x05;  /* SLID 5 */
	want[100] = 0x81;                  /* RawTraffic 1 | rsvd 000 | FlowLabel[19:16] 1 */
	want[101] = 0x23; want[102] = 0x45; /* FlowLabel 0x12345 */
	want[103] = 0x40;                  /* HopLimit 64 */
	want[104] = 0x22;                  /* TClass */
	want[105] = 0x81;                  /* Reversible 1 | NumbPath 1 */
	want[106] = 0xFF; want[107] = 0xFF; /* P_Key */
	want[108] = 0xAB; want[109] = 0xC5; /* QoSClass 0xABC | SL 5 */
	want[110] = 0x84;                  /* MTUSelector 2 (exactly) | MTU 4 (2048) */
	want[111] = 0x87;                  /* RateSelector 2 | Rate 7 (40 Gb/s) */
	want[112] = 0x90;                  /* PacketLifeTimeSelector 2 | PacketLifeTime 16 */
	want[113] = 0x03;                  /* Preference */

	m.hdr.method = UMAD_METHOD_GET_RESP;
	m.hdr.tid = 0x1011121314151617ULL;
	m.hdr.attr_id = UMAD_SA_ATTR_PATH_REC;
	m.sa.attr_offset = 8;
	m.sa.comp_mask = UM_SA_PR_QUERY_COMP | UM_SA_PR_COMP_QOS_CLASS;
	struct um_sa_path_rec *p = &m.u.pr;
	p->service_id = 0x0000000001061144ULL;
	memcpy(p->dgid, gid_b, 16);
	memcpy(p->sgid, gid_a, 16);
	p->dlid = 7;
	p->slid = 5;
	p->raw_traffic = 1;
	p->flow_label = 0x12345;
	p->hop_limit = 64;
	p->tclass = 0x22;
	p->reversible = 1;
	p->numb_path = 1;
	p->pkey = 0xFFFF;
	p->qos_class = 0xABC;
	p->sl = 5;
	p->mtu_selector = UMAD_SA_SELECTOR_EXACTLY;
	p->mtu = 4;
	p->rate_selector = UMAD_SA_SELECTOR_EXACTLY;
	p->rate = 7;
	p->packet_life_time_selector = UMAD_SA_SELECTOR_EXACTLY;
	p->packet_life_time = 16;
	p->preference = 3;

	cr_assert_eq(um_sa_encode(&m, got), 0);
	assert_bytes(got, want);

	cmp_diags_init(&diags);
	cr_assert_eq(um_sa_decode(want, sizeof(want), &dec, &diags), 0);
	cr_assert_eq(diags.total, 0, "%s", diags.d[0].text);
	cr_assert_eq(dec.nrecords, 1);
	assert_same(&um_sa_path_rec_layout, &dec.u.pr, &m.u.pr, 0);
	/* cross-check against the installed header's selector helpers */
	cr_assert_eq(umad_sa_set_rate_mtu_or_life(UMAD_SA_SELECTOR_EXACTLY, 4), want[110]);
}

Test(um_sa, known_answer_path_query_as_rdma_cm_sends_it)
{
	uint8_t want[CMP_MAD_SIZE], got[CMP_MAD_SIZE];
	struct um_sa_msg m;

	kat_hdr(want, 0x0035, 0x01);        /* SubnAdmGet, as ib_sa_path_rec_get */
	want[54] = 0x78; want[55] = 0x0F;   /* SID(0,1) DGID SGID Rev NumbPath PKey QoS */
	want[60] = 0x01; want[61] = 0x06; want[62] = 0x11; want[63] = 0x44;
	memcpy(want + 64, gid_b, 16);
	memcpy(want + 80, gid_a, 16);
	want[105] = 0x81;                   /* Reversible | NumbPath 1 */
	want[106] = 0xFF; want[107] = 0xFF;
	want[108] = 0x00; want[109] = 0x00; /* QoSClass = ToS 0 */

	um_sa_path_query(&m, 0x1011121314151617ULL, gid_a, gid_b, 0xFFFF,
			 0x0000000001061144ULL, 0);
	cr_assert_eq(um_sa_encode(&m, got), 0);
	assert_bytes(got, want);

	/* ToS 0xB8 (EF) lands in QoSClass bits 11:0 */
	um_sa_path_query(&m, 0x1011121314151617ULL, gid_a, gid_b, 0xFFFF,
			 0x0000000001061144ULL, 0xB8);
	cr_assert_eq(um_sa_encode(&m, got), 0);
	cr_assert_eq(got[108], 0x0B);
	cr_assert_eq(got[109], 0x80);
}

Test(um_sa, known_answer_mcmember_join_and_leave)
{
	uint8_t want[CMP_MAD_SIZE], got[CMP_MAD_SIZE];
	struct um_sa_mcm_rec rec = { 0 };
	struct um_sa_msg m, dec;
	struct cmp_diags diags;

	kat_hdr(want, 0x0038, 0x02);        /* SubnAdmSet */
	/* comp mask MGID|PortGID|Q_Key|TClass|P_Key|SL|FlowLabel|JoinState
	 * = bits 0,1,2,6,7,12,13,16 = 0x130C7 */
	want[53] = 0x01; want[54] = 0x30; want[55] = 0xC7;
	memcpy(want + 56, mgid_udp, 16);    /* MGID */
	memcpy(want + 72, gid_a, 16);       /* PortGID */
	want[88] = 0x01; want[89] = 0x23; want[90] = 0x45; want[91] = 0x67; /* Q_Key */
	/* MLID 92-93 zero: the SA assigns it */
	want[94] = 0x84;                    /* MTUSelector 2 | MTU 4 */
	want[95] = 0x10;                    /* TClass */
	want[96] = 0xFF; want[97] = 0xFF;   /* P_Key */
	want[98] = 0x83;                    /* RateSelector 2 | Rate 3 */
	want[99] = 0x92;                    /* PacketLifeTimeSelector 2 | 18 */
	want[100] = 0x10;                   /* SL 1 | FlowLabel[19:16] 0 */
	want[103] = 0x00;                   /* HopLimit */
	want[104] = 0x21;                   /* Scope 2 (link local) | JoinState 1 (full) */

	memcpy(rec.mgid, mgid_udp, 16);
	memcpy(rec.port_gid, gid_a, 16);
	rec.qkey = 0x01234567;
	rec.mtu_selector = 2;
	rec.mtu = 4;
	rec.tclass = 0x10;
	rec.pkey = 0xFFFF;
	rec.rate_selector = 2;
	rec.rate = 3;
	rec.packet_life_time_selector = 2;
	rec.packet_life_time = 18;
	rec.sl = 1;
	rec.scope = UMAD_SA_MCM_ADDR_SCOPE_LINK_LOCAL;
	rec.join_state = UMAD_SA_MCM_JOIN_STATE_FULL_MEMBER;
	um_sa_mcm_join(&m, 0x1011121314151617ULL, &rec, 0);
	cr_assert_eq(um_sa_encode(&m, got), 0);
	assert_bytes(got, want);

	cmp_diags_init(&diags);
	cr_assert_eq(um_sa_decode(want, sizeof(want), &dec, &diags), 0);
	cr_assert_eq(diags.total, 0, "%s", diags.d[0].text);
	assert_same(&um_sa_mcm_rec_layout, &dec.u.mcm, &rec, 0);

	/* leave: Delete, comp mask MGID|PortGID|JoinState = 0x10003 */
	want[3] = 0x15;
	want[53] = 0x01; want[54] = 0x00; want[55] = 0x03;
	um_sa_mcm_leave(&m, 0x1011121314151617ULL, &rec, UMAD_SA_MCM_JOIN_STATE_FULL_MEMBER);
	cr_assert_eq(um_sa_encode(&m, got), 0);
	assert_bytes(got, want);
	/* the IPoIB port space adds Rate|RateSel|MTUSel|MTU|HopLimit */
	um_sa_mcm_join(&m, 1, &rec, 1);
	cr_assert_eq(um_sa_encode(&m, got), 0);
	cr_assert_eq(got[53], 0x01);
	cr_assert_eq(got[54], 0x73); /* bits 8,9,12,13,14 */
	cr_assert_eq(got[55], 0xF7); /* bits 0,1,2,4,5,6,7 */
}

Test(um_sa, known_answer_get_table_resp_two_path_records)
{
	uint8_t mad[CMP_MAD_SIZE];
	struct um_sa_path_rec second;
	struct cmp_diags diags;
	struct um_sa_msg m;

	kat_hdr(mad, 0x0035, 0x92);
	mad[24] = 0x01;                     /* RMPP version 1 */
	mad[25] = 0x01;                     /* DATA */
	mad[26] = 0xFF;                     /* resp time 31 | Last|First|Active */
	mad[31] = 0x01;                     /* segment 1 */
	mad[35] = 0x94;                     /* PayloadLength 148 = 20 + 2 * 64 */
	mad[45] = 0x08;                     /* attr_offset 8 words */
	mad[55] = 0x0C;                     /* DGID|SGID */
	mad[56 + 41] = 0x07;                /* record 0 DLID 7 */
	mad[120 + 41] = 0x09;               /* record 1 DLID 9 */
	mad[120 + 49] = 0x81;               /* record 1 Reversible | NumbPath 1 */
	cmp_diags_init(&diags);
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, &diags), 0, "%s", diags.d[0].text);
	cr_assert_eq(diags.total, 0, "%s", diags.d[0].text);
	cr_assert_eq(m.nrecords, 2);
	cr_assert_eq(m.sa.rmpp_resp_time, 31);
	cr_assert_eq(m.sa.rmpp_flags, 7);
	cr_assert_eq(m.sa.paylen_newwin, 148);
	cr_assert_eq(m.u.pr.dlid, 7);
	cr_assert_eq(um_sa_record_get(mad, &m, 1, &second), 0);
	cr_assert_eq(second.dlid, 9);
	cr_assert_eq(second.reversible, 1);
	cr_assert_eq(second.numb_path, 1);
	cr_assert_eq(um_sa_record_get(mad, &m, 2, &second), -1);

	/* an empty table: PayloadLength 20, no record decoded */
	mad[35] = 20;
	memset(mad + 56, 0, 200);
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), 0);
	cr_assert_eq(m.nrecords, 0);

	/* the first of several segments: 200 bytes, three whole PathRecords */
	mad[26] = 0x03;
	mad[32] = 0x00; mad[33] = 0x00; mad[34] = 0x01; mad[35] = 0xB8; /* 440 */
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), 0);
	cr_assert_eq(m.nrecords, 3);
	/* a later segment: records do not start at byte 56 */
	mad[26] = 0x01;
	mad[31] = 0x02;
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), 0);
	cr_assert_eq(m.nrecords, 0);
}

Test(um_sa, known_answer_class_port_info)
{
	uint8_t mad[CMP_MAD_SIZE], got[CMP_MAD_SIZE];
	struct um_sa_msg m, q;

	kat_hdr(mad, 0x0001, 0x81);
	mad[56] = 0x01;                     /* BaseVersion */
	mad[57] = 0x02;                     /* ClassVersion */
	mad[58] = 0x26; mad[59] = 0x02;     /* CapabilityMask */
	mad[60] = 0x00; mad[61] = 0x00; mad[62] = 0x00; mad[63] = 0x52; /* CM2 2 | RespTime 18 */
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), 0);
	cr_assert_eq(m.u.cpi.capability_mask, 0x2602);
	cr_assert_eq(m.u.cpi.capability_mask2, UMAD_SA_CAP_MASK2_IS_QOS_SUP);
	cr_assert_eq(m.u.cpi.resp_time_value, 18);
	cr_assert_eq(um_sa_encode(&m, got), 0);
	assert_bytes(got, mad);

	um_sa_cpi_query(&q, 0x1011121314151617ULL);
	cr_assert_eq(um_sa_encode(&q, got), 0);
	kat_hdr(mad, 0x0001, 0x01);
	assert_bytes(got, mad);
}

/* ---- diagnostics ---- */

static void base_mad(uint8_t *mad, uint16_t attr, uint8_t method)
{
	struct um_sa_msg m = { .hdr.attr_id = attr, .hdr.method = method };
	cr_assert_eq(um_sa_encode(&m, mad), 0);
}

/* A clean one-segment GetTableResp with one PathRecord. */
static void table_mad(uint8_t *mad)
{
	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_SA_METHOD_GET_TABLE_RESP);
	mad[24] = 1;
	mad[25] = 1;
	mad[26] = 0x07;
	mad[31] = 1;
	mad[35] = 20 + 64;
	mad[45] = 8;
}

static const struct cmp_diag *expect_diag(const uint8_t *mad, size_t len, int rc_want,
					  enum cmp_diag_code code)
{
	static struct cmp_diags d;
	struct um_sa_msg m;

	cmp_diags_init(&d);
	cr_assert_eq(um_sa_decode(mad, len, &m, &d), rc_want, "first: %s", d.n ? d.d[0].text : "-");
	for (unsigned i = 0; i < d.n; i++)
		if (d.d[i].code == code)
			return &d.d[i];
	cr_assert_fail("no diagnostic %s (got %u, first: %s)", cmp_diag_code_str(code), d.n,
		       d.n ? d.d[0].text : "-");
	return NULL;
}

Test(um_sa, clean_messages_decode_without_diagnostics)
{
	uint8_t mad[CMP_MAD_SIZE];
	struct cmp_diags d;
	struct um_sa_msg m;

	for (const uint16_t *a = um_sa_attrs; *a; a++) {
		for (unsigned r = 0; r < 6; r++) {
			base_mad(mad, *a, single_record_method(*a, r));
			cmp_diags_init(&d);
			cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, &d), 0);
			cr_assert_eq(d.total, 0, "%s: %s", um_sa_attr_str(*a), d.d[0].text);
			cr_assert_eq(m.nrecords, 1);
		}
	}
	table_mad(mad);
	cmp_diags_init(&d);
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, &d), 0);
	cr_assert_eq(d.total, 0, "%s", d.d[0].text);
	cr_assert_eq(m.nrecords, 1);
}

Test(um_sa, bad_header_fields_are_named)
{
	uint8_t mad[CMP_MAD_SIZE];
	const struct cmp_diag *x;

	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_METHOD_GET);
	x = expect_diag(mad, 100, -1, CMP_E_LENGTH);
	cr_assert(strstr(x->text, "100"), "%s", x->text);
	expect_diag(mad, 10, -1, CMP_E_LENGTH);

	mad[0] = 2;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_BASE_VERSION);
	cr_assert_str_eq(x->field, "base_version");
	mad[0] = 1;

	mad[1] = UMAD_CLASS_CM;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_CLASS);
	cr_assert_eq(x->byte, 1);
	cr_assert(strstr(x->text, "0x07"), "%s", x->text);
	mad[1] = UMAD_CLASS_SUBN_ADM;

	mad[2] = 1;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_CLASS_VERSION);
	cr_assert_eq(x->byte, 2);
	cr_assert_str_eq(x->field, "class_version");
	mad[2] = 2;

	mad[17] = 0x11; /* NodeRecord: not decoded */
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_ATTR);
	cr_assert(strstr(x->text, "0x0011"), "%s", x->text);
	cr_assert(strstr(x->text, "NodeRecord"), "%s", x->text);
	mad[17] = 0x35;

	static const uint8_t bad_pr[] = { UMAD_METHOD_SET, UMAD_SA_METHOD_DELETE,
					  UMAD_SA_METHOD_DELETE_RESP, UMAD_METHOD_SEND,
					  UMAD_METHOD_TRAP, UMAD_SA_METHOD_GET_MULTI, 0x00, 0x7F };
	for (size_t i = 0; i < sizeof(bad_pr); i++) {
		mad[3] = bad_pr[i];
		x = expect_diag(mad, sizeof(mad), -1, CMP_E_METHOD);
		cr_assert_eq(x->byte, 3);
		cr_assert(strstr(x->text, "PathRecord"), "%s", x->text);
	}
	base_mad(mad, UMAD_ATTR_CLASS_PORT_INFO, UMAD_METHOD_GET);
	mad[3] = UMAD_SA_METHOD_GET_TABLE;
	expect_diag(mad, sizeof(mad), -1, CMP_E_METHOD);
	mad[3] = UMAD_METHOD_SET;
	expect_diag(mad, sizeof(mad), -1, CMP_E_METHOD);
	base_mad(mad, UMAD_SA_ATTR_MCMEMBER_REC, UMAD_METHOD_GET);
	mad[3] = UMAD_SA_METHOD_GET_MULTI;
	expect_diag(mad, sizeof(mad), -1, CMP_E_METHOD);
}

Test(um_sa, reserved_bits_warn_with_position)
{
	uint8_t mad[CMP_MAD_SIZE];
	const struct cmp_diag *x;

	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_METHOD_GET_RESP);
	mad[47] = 0x01; /* SA header reserved 46-47 */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_RESERVED);
	cr_assert_eq(x->sev, CMP_DIAG_WARN);
	cr_assert_eq(x->byte, 46);
	cr_assert_str_eq(x->field, "_rsvd46");

	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_METHOD_GET_RESP);
	mad[56 + 44] = 0x20; /* PathRecord byte 44 bit 2: reserved */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_RESERVED);
	cr_assert_eq(x->byte, 100);
	cr_assert_eq(x->bit, 1);
	cr_assert_str_eq(x->field, "_rsvd44");

	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_METHOD_GET_RESP);
	mad[56 + 63] = 0x01; /* last reserved byte of the PathRecord */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_RESERVED);
	cr_assert_eq(x->byte, 114);
	cr_assert_str_eq(x->field, "_rsvd58");

	base_mad(mad, UMAD_SA_ATTR_MCMEMBER_REC, UMAD_METHOD_SET);
	mad[56 + 49] = 0x01; /* ProxyJoin byte, reserved bit 7 */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_RESERVED);
	cr_assert_str_eq(x->field, "_rsvd49");
	base_mad(mad, UMAD_SA_ATTR_MCMEMBER_REC, UMAD_METHOD_SET);
	mad[56 + 53] = 0xAA; /* pad */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_RESERVED);
	cr_assert_str_eq(x->field, "_pad52");
	cr_assert_eq(x->byte, 108);

	/* data after the record */
	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_METHOD_GET_RESP);
	mad[200] = 0x5A;
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_RESERVED);
	cr_assert_eq(x->byte, 200);
	cr_assert_str_eq(x->field, "data");
	cr_assert(strstr(x->text, "byte 120"), "%s", x->text);
	/* ... and after the records of a table */
	table_mad(mad);
	mad[56 + 64] = 0x01;
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_RESERVED);
	cr_assert_eq(x->byte, 120);

	/* MAD header reserved bytes 18-19 (shared code) */
	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_METHOD_GET);
	mad[19] = 1;
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_RESERVED);
	cr_assert_eq(x->byte, 18);
}

Test(um_sa, rmpp_rules)
{
	uint8_t mad[CMP_MAD_SIZE];
	const struct cmp_diag *x;
	struct um_sa_msg m;

	table_mad(mad);
	mad[24] = 2;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_VALUE);
	cr_assert_str_eq(x->field, "rmpp_version");
	cr_assert_eq(x->byte, 24);
	/* inactive RMPP: the version is not looked at */
	mad[26] = 0;
	expect_diag(mad, sizeof(mad), 0, CMP_E_VALUE); /* the no-RMPP table warning */

	table_mad(mad);
	mad[25] = 5;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_VALUE);
	cr_assert_str_eq(x->field, "rmpp_type");
	mad[25] = 0;
	expect_diag(mad, sizeof(mad), -1, CMP_E_VALUE);

	/* an ACK (same header as the data, method GetTable) carries no record */
	table_mad(mad);
	mad[3] = UMAD_SA_METHOD_GET_TABLE;
	mad[25] = UM_SA_RMPP_TYPE_ACK;
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), 0);
	cr_assert_eq(m.nrecords, 0);

	table_mad(mad);
	mad[31] = 0;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_VALUE);
	cr_assert_str_eq(x->field, "seg_num");
	cr_assert_eq(x->byte, 28);

	table_mad(mad);
	mad[26] = 0x05; /* Last|Active, no First on segment 1 */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_VALUE);
	cr_assert_str_eq(x->field, "rmpp_flags");
	cr_assert(strstr(x->text, "clear on segment 1"), "%s", x->text);
	table_mad(mad);
	mad[31] = 2; /* First flag on segment 2 */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_VALUE);
	cr_assert(strstr(x->text, "set on segment 2"), "%s", x->text);

	table_mad(mad);
	mad[26] = 0x00; /* GetTableResp without RMPP */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_VALUE);
	cr_assert_eq(x->sev, CMP_DIAG_WARN);
	cr_assert(strstr(x->text, "without RMPP"), "%s", x->text);
}

Test(um_sa, table_lengths_must_agree_with_the_record_size)
{
	uint8_t mad[CMP_MAD_SIZE];
	const struct cmp_diag *x;
	struct um_sa_msg m;

	table_mad(mad);
	mad[45] = 7; /* a MCMemberRecord stride for PathRecords */
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_LENGTH_FIELD);
	cr_assert_str_eq(x->field, "attr_offset");
	cr_assert_eq(x->byte, 44);
	cr_assert(strstr(x->text, "expected 8"), "%s", x->text);
	mad[45] = 0;
	expect_diag(mad, sizeof(mad), -1, CMP_E_LENGTH_FIELD);
	/* outside GetTableResp attr_offset is not checked (the kernel sends 0) */
	base_mad(mad, UMAD_SA_ATTR_MCMEMBER_REC, UMAD_METHOD_GET_RESP);
	mad[45] = 3;
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), 0);

	table_mad(mad);
	mad[35] = 19;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_LENGTH_FIELD);
	cr_assert_str_eq(x->field, "paylen_newwin");
	cr_assert_eq(x->byte, 32);
	mad[35] = 221;
	expect_diag(mad, sizeof(mad), -1, CMP_E_LENGTH_FIELD);
	mad[35] = 20 + 65;
	x = expect_diag(mad, sizeof(mad), -1, CMP_E_LENGTH_FIELD);
	cr_assert(strstr(x->text, "whole"), "%s", x->text);
	/* MCMemberRecord table: 56-byte stride, attr_offset 7 */
	table_mad(mad);
	mad[17] = 0x38;
	mad[45] = 7;
	mad[35] = 20 + 3 * 56;
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), 0);
	cr_assert_eq(m.nrecords, 3);
}

Test(um_sa, status_is_a_warning_with_its_text)
{
	uint8_t mad[CMP_MAD_SIZE];
	const struct cmp_diag *x;
	struct um_sa_msg m;

	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_METHOD_GET_RESP);
	mad[4] = 0x03; /* ERR_NO_RECORDS */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_VALUE);
	cr_assert_eq(x->sev, CMP_DIAG_WARN);
	cr_assert_eq(x->byte, 4);
	cr_assert_str_eq(x->field, "status");
	cr_assert(strstr(x->text, "0x0300"), "%s", x->text);
	cr_assert(strstr(x->text, "no records"), "%s", x->text);

	/* an error GetTableResp holds no table: no record, no length checks */
	table_mad(mad);
	mad[4] = 0x02;
	mad[45] = 0;
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), 0);
	cr_assert_eq(m.nrecords, 0);
}

Test(um_sa, component_mask_warnings)
{
	uint8_t mad[CMP_MAD_SIZE];
	const struct cmp_diag *x;

	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_METHOD_GET);
	mad[55] = 0x80; /* reserved PathRecord component bit 7 */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_VALUE);
	cr_assert_str_eq(x->field, "comp_mask");
	cr_assert(strstr(x->text, "bit7"), "%s", x->text);
	base_mad(mad, UMAD_SA_ATTR_MCMEMBER_REC, UMAD_METHOD_SET);
	mad[53] = 0x04; /* bit 18: MCMemberRecord has 0..17 */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_VALUE);
	cr_assert(strstr(x->text, "bit18"), "%s", x->text);
	base_mad(mad, UMAD_SA_ATTR_PATH_REC, UMAD_METHOD_GET);
	mad[55] = 0x01; /* ServiceID8MSB without ServiceID56LSB */
	x = expect_diag(mad, sizeof(mad), 0, CMP_E_VALUE);
	cr_assert(strstr(x->text, "CA13-6"), "%s", x->text);
	cr_assert_eq(x->byte, 55);
}

Test(um_sa, null_diags_still_count_errors)
{
	uint8_t mad[CMP_MAD_SIZE];
	struct um_sa_msg m;

	table_mad(mad);
	mad[45] = 1;
	cr_assert_eq(um_sa_decode(mad, sizeof(mad), &m, NULL), -1);
	cr_assert_eq(um_sa_decode(mad, 0, &m, NULL), -1);
}

/* ---- query builders ---- */

Test(um_sa, path_query_sets_exactly_the_kernel_comp_mask)
{
	struct um_sa_msg m;

	um_sa_path_query(&m, 42, gid_a, gid_b, 0x8001, 0x13F0000000000001ULL, -1);
	cr_assert_eq(m.hdr.method, UMAD_METHOD_GET);
	cr_assert_eq(m.hdr.attr_id, UMAD_SA_ATTR_PATH_REC);
	cr_assert_eq(m.hdr.tid, 42);
	cr_assert_eq(m.sa.attr_offset, 0);
	cr_assert_eq(m.sa.comp_mask, UM_SA_PR_COMP_SERVICE_ID | UM_SA_PR_COMP_DGID |
					     UM_SA_PR_COMP_SGID | UM_SA_PR_COMP_REVERSIBLE |
					     UM_SA_PR_COMP_NUMB_PATH | UM_SA_PR_COMP_PKEY);
	cr_assert_eq(m.sa.comp_mask, 0x380FULL);
	cr_assert_eq(m.u.pr.numb_path, 1);
	cr_assert_eq(m.u.pr.reversible, 1);
	cr_assert_eq(m.u.pr.pkey, 0x8001);
	cr_assert_eq(m.u.pr.service_id, 0x13F0000000000001ULL);
	cr_assert(!memcmp(m.u.pr.sgid, gid_a, 16));
	cr_assert(!memcmp(m.u.pr.dgid, gid_b, 16));
	cr_assert_eq(m.u.pr.qos_class, 0);

	um_sa_path_query(&m, 42, gid_a, gid_b, 0xFFFF, 1, 0x20);
	cr_assert_eq(m.sa.comp_mask, 0x780FULL);
	cr_assert_eq(m.u.pr.qos_class, 0x20);

	um_sa_path_query_tclass(&m, 0x48);
	cr_assert_eq(m.sa.comp_mask, 0x3C0FULL); /* QoSClass out, TClass in */
	cr_assert_eq(m.u.pr.tclass, 0x48);
	cr_assert_eq(m.u.pr.qos_class, 0);
}

Test(um_sa, mcm_builders_set_exactly_the_kernel_comp_masks)
{
	struct um_sa_mcm_rec rec = { .join_state = 1, .mlid = 0xC001 };
	struct um_sa_msg m;

	um_sa_mcm_join(&m, 7, &rec, 0);
	cr_assert_eq(m.hdr.method, UMAD_METHOD_SET);
	cr_assert_eq(m.hdr.attr_id, UMAD_SA_ATTR_MCMEMBER_REC);
	cr_assert_eq(m.sa.comp_mask,
		     (uint64_t)(UMAD_SA_MCM_COMP_MASK_MGID | UMAD_SA_MCM_COMP_MASK_PORT_GID |
				UMAD_SA_MCM_COMP_MASK_PKEY | UMAD_SA_MCM_COMP_MASK_JOIN_STATE |
				UMAD_SA_MCM_COMP_MASK_QKEY | UMAD_SA_MCM_COMP_MASK_SL |
				UMAD_SA_MCM_COMP_MASK_FLOW_LABEL | UMAD_SA_MCM_COMP_MASK_TCLASS));
	cr_assert_eq(m.sa.comp_mask, 0x130C7ULL);
	cr_assert_eq(m.u.mcm.mlid, 0xC001);

	um_sa_mcm_join(&m, 7, &rec, 1);
	cr_assert_eq(m.sa.comp_mask, 0x130C7ULL | 0x4000 | 0x200 | 0x100 | 0x10 | 0x20);

	um_sa_mcm_leave(&m, 8, &rec, UMAD_SA_MCM_JOIN_STATE_SEND_ONLY_NON_MEMBER);
	cr_assert_eq(m.hdr.method, UMAD_SA_METHOD_DELETE);
	cr_assert_eq(m.sa.comp_mask, 0x10003ULL);
	cr_assert_eq(m.u.mcm.join_state, 4);
	cr_assert_eq(rec.join_state, 1, "the caller's record is not modified");
}

/* ---- names and output ---- */

Test(um_sa, names)
{
	char buf[256];

	cr_assert_str_eq(um_sa_attr_str(UMAD_SA_ATTR_PATH_REC), "PathRecord");
	cr_assert_str_eq(um_sa_attr_str(UMAD_SA_ATTR_MCMEMBER_REC), "MCMemberRecord");
	cr_assert_str_eq(um_sa_attr_str(UMAD_ATTR_CLASS_PORT_INFO), "ClassPortInfo");
	cr_assert_str_eq(um_sa_attr_str(UMAD_SA_ATTR_SERVICE_REC), "ServiceRecord");
	cr_assert_str_eq(um_sa_attr_str(0x7777), "attr?");

	cr_assert_str_eq(um_sa_status_str(0), "success");
	cr_assert_str_eq(um_sa_status_str(0x0300), "SA: no records");
	cr_assert_str_eq(um_sa_status_str(0x0100), "SA: insufficient resources");
	cr_assert_str_eq(um_sa_status_str(0x0600), "SA: insufficient components");
	cr_assert_str_eq(um_sa_status_str(0x0800), "SA: priority suggested");
	cr_assert_str_eq(um_sa_status_str(0x0900), "SA: unknown class status");
	cr_assert_str_eq(um_sa_status_str(0x000C), "method/attribute combination not supported");
	cr_assert_str_eq(um_sa_status_str(0x001C), "invalid attribute or modifier value");
	cr_assert_str_eq(um_sa_status_str(0x0004), "bad class version");
	cr_assert_str_eq(um_sa_status_str(0x0001), "busy");
	cr_assert_str_eq(um_sa_status_str(0x0002), "redirect required");

	cr_assert_str_eq(um_sa_comp_mask_str(UMAD_SA_ATTR_PATH_REC, 0x780F, buf, sizeof(buf)),
			 "ServiceID|DGID|SGID|Reversible|NumbPath|P_Key|QoSClass");
	cr_assert_str_eq(um_sa_comp_mask_str(UMAD_SA_ATTR_PATH_REC, 0x2, buf, sizeof(buf)),
			 "ServiceID56LSB");
	cr_assert_str_eq(um_sa_comp_mask_str(UMAD_SA_ATTR_PATH_REC, 0x400080, buf, sizeof(buf)),
			 "bit7|Preference");
	cr_assert_str_eq(um_sa_comp_mask_str(UMAD_SA_ATTR_MCMEMBER_REC, 0x130C7, buf, sizeof(buf)),
			 "MGID|PortGID|Q_Key|TClass|P_Key|SL|FlowLabel|JoinState");
	cr_assert_str_eq(um_sa_comp_mask_str(UMAD_SA_ATTR_MCMEMBER_REC, 1ULL << 63, buf, sizeof(buf)),
			 "bit63");
	cr_assert_str_eq(um_sa_comp_mask_str(UMAD_SA_ATTR_PATH_REC, 0, buf, sizeof(buf)), "none");
	/* truncation keeps the string terminated */
	cr_assert_str_eq(um_sa_comp_mask_str(UMAD_SA_ATTR_PATH_REC, 0x780F, buf, 12), "ServiceID");
}

Test(um_sa, print_and_json)
{
	struct um_sa_msg m;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	um_sa_path_query(&m, 0x99, gid_a, gid_b, 0xFFFF, 0x0000000001061144ULL, 0);
	m.hdr.status = 0x0300;
	f = open_memstream(&text, &len);
	cr_assert_not_null(f);
	um_sa_print(&m, f, 2);
	fclose(f);
	cr_assert(strstr(text, "  MAD header:\n"), "%s", text);
	cr_assert(strstr(text, "    status text: SA: no records\n"), "%s", text);
	cr_assert(strstr(text, "    components: ServiceID|DGID|SGID|"), "%s", text);
	cr_assert(strstr(text, "  PathRecord (1 of 1 in this MAD):\n"), "%s", text);
	cr_assert(strstr(text, "    sgid: fe80::2:c903:1:203\n"), "%s", text);
	cr_assert(strstr(text, "    service_id: 0x0000000001061144\n"), "%s", text);
	free(text);

	text = NULL;
	f = open_memstream(&text, &len);
	cr_assert_not_null(f);
	fputc('{', f);
	um_sa_json(&m, f);
	fputc('}', f);
	fclose(f);
	cr_assert(strstr(text, "\"status_text\": \"SA: no records\""), "%s", text);
	cr_assert(strstr(text, "\"comp_mask\": \"0x000000000000780f\""), "%s", text);
	cr_assert(strstr(text, "\"nrecords\": 1"), "%s", text);
	cr_assert(strstr(text, "\"rec\": {\"service_id\": \"0x0000000001061144\""), "%s", text);
	/* braces balance */
	int depth = 0;
	for (char *p = text; *p; p++)
		depth += (*p == '{') - (*p == '}');
	cr_assert_eq(depth, 0, "%s", text);
	free(text);
}
