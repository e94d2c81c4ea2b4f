/* test_um_pcap.c - pcap writer/reader for MAD traces, with tshark as oracle. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_fixtures.h"
#include "umad/um_pcap.h"

/* ---- fixtures and helpers ---------------------------------------------- */

/* Each test (its own process) gets a mkdtemp directory on first use, removed
 * by the suite's fini; tests that skip do so before asking for one. */
static char tmpdir[64];

static void remove_tmpdir(void)
{
	tf_remove(tmpdir);
}

TestSuite(um_pcap, .fini = remove_tmpdir);

static const char *tpath(const char *name)
{
	return tf_path(tmpdir, "um_pcap_", name);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long n;

	cr_assert_not_null(f, "%s: %s", path, strerror(errno));
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)n + 1);
	cr_assert_not_null(p);
	cr_assert_eq(fread(p, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

static void spew(const char *path, const void *p, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	if (len)
		cr_assert_eq(fwrite(p, 1, len, f), len);
	fclose(f);
}

static void make_mad(uint8_t mad[UM_MAD_SIZE], uint64_t tid, uint16_t attr)
{
	memset(mad, 0, UM_MAD_SIZE);
	cmp_bits_set(mad, 0, 0, 8, 1);
	cmp_bits_set(mad, 1, 0, 8, 0x07);
	cmp_bits_set(mad, 2, 0, 8, 2);
	cmp_bits_set(mad, 3, 0, 8, 0x03);
	cmp_bits_set(mad, 8, 0, 64, tid);
	cmp_bits_set(mad, 16, 0, 16, attr);
	for (int i = 24; i < UM_MAD_SIZE; i++)
		mad[i] = (uint8_t)(tid + (uint64_t)i);
}

static void roce_meta(struct um_frame_meta *m, uint64_t ts)
{
	memset(m, 0, sizeof(*m));
	m->ts_ns = ts;
	m->link = UM_LINK_ROCEV2;
	m->sgid[10] = m->sgid[11] = m->dgid[10] = m->dgid[11] = 0xff;
	m->sgid[12] = 10, m->sgid[13] = 1, m->sgid[14] = 2, m->sgid[15] = 3;
	m->dgid[12] = 10, m->dgid[13] = 4, m->dgid[14] = 5, m->dgid[15] = 6;
	m->udp_sport = 0xC0DE;
	m->pkey = 0xFFFF;
	m->dest_qp = 1;
	m->psn = 0x10203;
	m->qkey = UM_QP1_QKEY;
	m->src_qp = 1;
}

static void ib_meta(struct um_frame_meta *m, uint64_t ts, int grh)
{
	memset(m, 0, sizeof(*m));
	m->ts_ns = ts;
	m->link = UM_LINK_IB;
	m->slid = 0x0017;
	m->dlid = 0x0203;
	m->sl = 6;
	m->vl = 1;
	m->has_grh = grh;
	if (grh) {
		m->sgid[0] = m->dgid[0] = 0xfe;
		m->sgid[1] = m->dgid[1] = 0x80;
		m->sgid[15] = 0x11;
		m->dgid[15] = 0x22;
		m->sgid[8] = 0x02;
		m->dgid[8] = 0x02;
		m->flow_label = 0x5A5A5;
		m->tclass = 0x40;
		m->hop_limit = 2;
	}
	m->pkey = 0x7FFF;
	m->dest_qp = 1;
	m->psn = 7;
	m->qkey = UM_QP1_QKEY;
	m->src_qp = 1;
}

static int build(const struct um_frame_meta *m, const uint8_t *mad, uint8_t *frame)
{
	int n = um_frame_build(m, mad, frame, UM_FRAME_MAX);

	cr_assert_gt(n, 0);
	return n;
}

/* Reads every MAD of path; returns the terminating code of um_pcap_next. */
static int read_all(const char *path, struct um_pcap_mad *out, int max, int *count,
		    struct um_pcap_stats *st)
{
	char err[256];
	struct um_pcap_reader *r = um_pcap_open_read(path, err, sizeof(err));
	struct um_pcap_mad tmp;
	int rc;

	cr_assert_not_null(r, "%s", err);
	*count = 0;
	while ((rc = um_pcap_next(r, *count < max ? &out[*count] : &tmp)) == 1)
		(*count)++;
	if (rc < 0)
		cr_assert(um_pcap_error(r)[0], "error without a message");
	if (st)
		*st = *um_pcap_stats(r);
	um_pcap_close_read(r);
	return rc;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A little byte sink for hand-made files. */
struct blob {
	uint8_t p[16384];
	size_t n;
};

static void b_bytes(struct blob *b, const void *p, size_t n)
{
	cr_assert_leq(b->n + n, sizeof(b->p));
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void b_u32(struct blob *b, uint32_t v, int big)
{
	uint8_t x[4];

	for (int i = 0; i < 4; i++)
		x[big ? 3 - i : i] = (uint8_t)(v >> (8 * i));
	b_bytes(b, x, 4);
}

static void b_u16(struct blob *b, uint16_t v, int big)
{
	uint8_t x[2] = { (uint8_t)(big ? v >> 8 : v), (uint8_t)(big ? v : v >> 8) };

	b_bytes(b, x, 2);
}

static void b_file_hdr(struct blob *b, uint32_t magic, int big, uint32_t snaplen, uint32_t link)
{
	b_u32(b, magic, big);
	b_u16(b, 2, big);
	b_u16(b, 4, big);
	b_u32(b, 0, big);
	b_u32(b, 0, big);
	b_u32(b, snaplen, big);
	b_u32(b, link, big);
}

static void b_rec(struct blob *b, int big, uint32_t sec, uint32_t sub, const void *data,
		  size_t len)
{
	b_u32(b, sec, big);
	b_u32(b, sub, big);
	b_u32(b, (uint32_t)len, big);
	b_u32(b, (uint32_t)len, big);
	b_bytes(b, data, len);
}

/* ---- tests ------------------------------------------------------------- */

Test(um_pcap, erf_layout_is_complete)
{
	char err[160];

	cr_assert_eq(cmp_layout_check(&um_erf_hdr_layout, 1, err, sizeof(err)), 0, "%s", err);
}

Test(um_pcap, rocev2_write_read_round_trip)
{
	const char *p = tpath("roce.pcap");
	struct um_pcap_writer *w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ETHERNET);
	struct um_frame_meta m[5];
	uint8_t mads[5][UM_MAD_SIZE];
	struct um_pcap_mad got[5];
	struct um_pcap_stats st;
	uint8_t *file;
	size_t len;
	int n;

	cr_assert_not_null(w, "%s", strerror(errno));
	for (int i = 0; i < 5; i++) {
		roce_meta(&m[i], 1700000000000000000ull + (uint64_t)i * 1234567891ull + 7);
		m[i].psn = (uint32_t)(100 + i);
		make_mad(mads[i], 0xA000000000000000ull + (uint64_t)i, (uint16_t)(0x10 + i));
		cr_assert_eq(um_pcap_write_mad(w, &m[i], mads[i]), 0);
	}
	cr_assert_eq(um_pcap_close_write(w), 0);

	file = slurp(p, &len);
	cr_assert_eq(len, 24 + 5 * (16 + 322));
	cr_assert_eq(le32(file), 0xA1B23C4Du);
	cr_assert_eq(file[4], 2);
	cr_assert_eq(file[6], 4);
	cr_assert_eq(le32(file + 16), 65535);
	cr_assert_eq(le32(file + 20), 1);
	free(file);

	cr_assert_eq(read_all(p, got, 5, &n, &st), 0);
	cr_assert_eq(n, 5);
	for (int i = 0; i < 5; i++) {
		cr_assert_eq(got[i].meta.ts_ns, m[i].ts_ns, "ts %d", i);
		cr_assert_eq(got[i].frame_no, (uint64_t)i + 1);
		cr_assert_eq(got[i].offset, 24u + (uint64_t)i * (16 + 322));
		cr_assert_eq(memcmp(got[i].mad, mads[i], UM_MAD_SIZE), 0);
		cr_assert_eq(got[i].meta.psn, m[i].psn);
		cr_assert_eq(got[i].meta.link, UM_LINK_ROCEV2);
		cr_assert_eq(got[i].meta.icrc_ok, 1);
		cr_assert_eq(memcmp(got[i].meta.sgid, m[i].sgid, 16), 0);
	}
	cr_assert_eq(st.frames, 5);
	cr_assert_eq(st.mads, 5);
	cr_assert_eq(st.skipped, 0);
	cr_assert_eq(st.bad_icrc, 0);
}

Test(um_pcap, erf_write_read_round_trip)
{
	const char *p = tpath("ib.pcap");
	struct um_pcap_writer *w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF);
	struct um_frame_meta m[3];
	uint8_t mads[3][UM_MAD_SIZE];
	struct um_pcap_mad got[3];
	struct um_pcap_stats st;
	struct um_erf_hdr eh;
	uint8_t *file;
	size_t len;
	uint64_t frac, sec;
	int n;

	cr_assert_not_null(w);
	ib_meta(&m[0], 1600000000999999999ull, 0);
	ib_meta(&m[1], 1600000001000000000ull, 1);
	roce_meta(&m[2], 1600000001000000001ull);
	for (int i = 0; i < 3; i++) {
		make_mad(mads[i], 0xB0 + (uint64_t)i, 0x15);
		cr_assert_eq(um_pcap_write_mad(w, &m[i], mads[i]), 0);
	}
	cr_assert_eq(um_pcap_close_write(w), 0);

	file = slurp(p, &len);
	/* 290-byte IB packet, 330 with GRH, 322 + 2 pad + 4 FCS Ethernet. */
	cr_assert_eq(len, 24 + (16 + 16 + 290) + (16 + 16 + 330) + (16 + 16 + 2 + 322 + 4));
	cr_assert_eq(le32(file + 20), 197);
	cmp_layout_decode(&um_erf_hdr_layout, file + 24 + 16, &eh);
	cr_assert_eq(eh.type, 21);
	cr_assert_eq(eh.ext, 0);
	cr_assert_eq(eh.flags, 0x04);
	cr_assert_eq(eh.rlen, 16 + 290);
	cr_assert_eq(eh.lctr, 0);
	cr_assert_eq(eh.wlen, 290);
	/* ERF time stamp: LE 32.32 fixed point, same instant to the ns. */
	frac = le32(eh.ts);
	sec = le32(eh.ts + 4);
	cr_assert_eq(sec, 1600000000u);
	cr_assert_eq(frac * 1000000000ull >> 32, 999999999u);
	cmp_layout_decode(&um_erf_hdr_layout, file + 24 + (16 + 306) + (16 + 346) + 16, &eh);
	cr_assert_eq(eh.type, 2);
	cr_assert_eq(eh.rlen, 16 + 2 + 322 + 4);
	cr_assert_eq(eh.wlen, 322 + 4);
	free(file);

	cr_assert_eq(read_all(p, got, 3, &n, &st), 0);
	cr_assert_eq(n, 3);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(got[i].meta.ts_ns, m[i].ts_ns);
		cr_assert_eq(got[i].meta.link, m[i].link);
		cr_assert_eq(memcmp(got[i].mad, mads[i], UM_MAD_SIZE), 0);
		cr_assert_eq(got[i].meta.icrc_ok, 1);
	}
	cr_assert_eq(got[0].meta.has_grh, 0);
	cr_assert_eq(got[1].meta.has_grh, 1);
	cr_assert_eq(got[1].meta.flow_label, 0x5A5A5);
	cr_assert_eq(got[0].meta.slid, 0x17);
	cr_assert_eq(got[0].meta.vcrc_ok, 1);
	cr_assert_eq(got[1].meta.vcrc_ok, 1);
	cr_assert_eq(st.bad_vcrc, 0);
	cr_assert_eq(st.mads, 3);
}

/* ns -> ERF 32.32 -> ns is exact, over edge cases and random instants. */
Test(um_pcap, erf_timestamps_are_exact_to_the_ns)
{
	const char *p = tpath("ts.pcap");
	struct um_pcap_writer *w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF);
	static const uint64_t edge[] = { 0, 1, 499999999, 500000000, 999999999, 1000000000,
					 4294967295999999999ull };
	uint64_t ts[300], x = 0x9E3779B97F4A7C15ull;
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE];
	static struct um_pcap_mad got[300];
	int n;

	make_mad(mad, 1, 0x10);
	for (int i = 0; i < 300; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		ts[i] = i < 7 ? edge[i] : x % 4294967296000000000ull;
		ib_meta(&m, ts[i], i & 1);
		cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	}
	cr_assert_eq(um_pcap_close_write(w), 0);
	cr_assert_eq(read_all(p, got, 300, &n, NULL), 0);
	cr_assert_eq(n, 300);
	for (int i = 0; i < 300; i++)
		cr_assert_eq(got[i].meta.ts_ns, ts[i], "%d: %" PRIu64 " != %" PRIu64, i,
			     got[i].meta.ts_ns, ts[i]);
}

Test(um_pcap, non_mad_frames_are_skipped_and_counted)
{
	const char *p = tpath("mixed.pcap");
	struct um_pcap_writer *w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ETHERNET);
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	struct um_pcap_mad got[4];
	struct um_pcap_stats st;
	uint8_t arp[60] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06,
			    0, 1, 0x08, 0, 6, 4, 0, 1 };
	/* Ethernet / IPv4 / TCP SYN 80 -> 443. */
	uint8_t tcp[54] = { 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00,
			    0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
			    0, 80, 1, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0x20, 0, 0, 0, 0, 0 };
	int n, len;

	cr_assert_not_null(w);
	roce_meta(&m, 1000);
	make_mad(mad, 1, 0x10);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	cr_assert_eq(um_pcap_write_frame(w, 2000, UM_LINK_ROCEV2, arp, sizeof(arp)), 0);
	cr_assert_eq(um_pcap_write_frame(w, 3000, UM_LINK_ROCEV2, tcp, sizeof(tcp)), 0);
	/* A RoCEv2 RC SEND only (opcode 0x04) of the same size. */
	len = build(&m, mad, frame);
	frame[14 + 20 + 8] = 0x04;
	cr_assert_eq(um_pcap_write_frame(w, 4000, UM_LINK_ROCEV2, frame, (size_t)len), 0);
	m.ts_ns = 5000;
	make_mad(mad, 2, 0x11);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	cr_assert_eq(um_pcap_close_write(w), 0);

	cr_assert_eq(read_all(p, got, 4, &n, &st), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(got[0].frame_no, 1);
	cr_assert_eq(got[0].meta.ts_ns, 1000);
	cr_assert_eq(got[1].frame_no, 5);
	cr_assert_eq(got[1].meta.ts_ns, 5000);
	cr_assert_eq(cmp_bits_get(got[1].mad, 8, 0, 64), 2);
	cr_assert_eq(st.frames, 5);
	cr_assert_eq(st.mads, 2);
	cr_assert_eq(st.skipped, 3);
	cr_assert_eq(st.malformed, 0);

	/* The same on an ERF file: an IB RC SEND in the middle. */
	p = tpath("mixed_erf.pcap");
	w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF);
	ib_meta(&m, 10, 0);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	len = build(&m, mad, frame);
	frame[8] = 0x04;
	cr_assert_eq(um_pcap_write_frame(w, 20, UM_LINK_IB, frame, (size_t)len), 0);
	cr_assert_eq(um_pcap_write_frame(w, 25, UM_LINK_ROCEV2, arp, sizeof(arp)), 0);
	m.ts_ns = 30;
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	cr_assert_eq(um_pcap_close_write(w), 0);
	cr_assert_eq(read_all(p, got, 4, &n, &st), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(got[1].frame_no, 4);
	cr_assert_eq(got[1].meta.ts_ns, 30);
	cr_assert_eq(st.skipped, 2);
}

Test(um_pcap, bad_icrc_is_counted_not_dropped)
{
	const char *p = tpath("badcrc.pcap");
	struct um_pcap_writer *w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF);
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	struct um_pcap_mad got[2];
	struct um_pcap_stats st;
	int n, len;

	ib_meta(&m, 1, 1);
	make_mad(mad, 9, 0x10);
	len = build(&m, mad, frame);
	frame[len - 100] ^= 0x20; /* inside the MAD */
	cr_assert_eq(um_pcap_write_frame(w, 1, UM_LINK_IB, frame, (size_t)len), 0);
	roce_meta(&m, 2);
	len = build(&m, mad, frame);
	frame[len - 1] ^= 0x01; /* the ICRC itself */
	cr_assert_eq(um_pcap_write_frame(w, 2, UM_LINK_ROCEV2, frame, (size_t)len), 0);
	cr_assert_eq(um_pcap_close_write(w), 0);
	cr_assert_eq(read_all(p, got, 2, &n, &st), 0);
	cr_assert_eq(n, 2);
	cr_assert_eq(got[0].meta.icrc_ok, 0);
	cr_assert_eq(got[0].meta.vcrc_ok, 0);
	cr_assert_eq(got[1].meta.icrc_ok, 0);
	cr_assert_eq(st.bad_icrc, 2);
	cr_assert_eq(st.bad_vcrc, 1);
	cr_assert_eq(st.mads, 2);
}

/* Cut the file at every length: a clean 0 exactly at record boundaries, a
 * -1 with a message naming the record and offset anywhere else. */
static void truncation_loop(int linktype)
{
	const char *full = tpath("full.pcap"), *cut = tpath("cut.pcap");
	struct um_pcap_writer *w = um_pcap_open_write(full, linktype);
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE], *file;
	uint8_t junk[60] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06 };
	size_t bounds[8], nb = 0, len;
	int is_mad[8];

	cr_assert_not_null(w);
	bounds[nb] = 24;
	for (int i = 0; i < 4; i++) {
		if (linktype == UM_PCAP_LINKTYPE_ERF && (i & 1))
			ib_meta(&m, 100 + (uint64_t)i, i == 3);
		else
			roce_meta(&m, 100 + (uint64_t)i);
		make_mad(mad, (uint64_t)i, 0x10);
		if (i == 2)
			cr_assert_eq(um_pcap_write_frame(w, 5, UM_LINK_ROCEV2, junk, sizeof(junk)), 0);
		else
			cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
		is_mad[nb] = i != 2;
		nb++;
		{
			struct stat sb;
			cr_assert_eq(stat(full, &sb), 0); /* flushed after every record */
			bounds[nb] = (size_t)sb.st_size;
		}
	}
	cr_assert_eq(um_pcap_close_write(w), 0);
	file = slurp(full, &len);
	cr_assert_eq(len, bounds[nb]);

	for (size_t c = 0; c <= len; c++) {
		char err[256] = "";
		struct um_pcap_reader *r;
		struct um_pcap_mad out;
		int rc, mads = 0, boundary = -1, want = 0;

		spew(cut, file, c);
		r = um_pcap_open_read(cut, err, sizeof(err));
		if (c < 24) {
			cr_assert_null(r, "cut %zu opened", c);
			cr_assert(err[0], "cut %zu: empty error", c);
			continue;
		}
		cr_assert_not_null(r, "cut %zu: %s", c, err);
		while ((rc = um_pcap_next(r, &out)) == 1)
			mads++;
		for (size_t i = 0; i <= nb; i++)
			if (bounds[i] == c)
				boundary = (int)i;
		for (size_t i = 0; i < nb; i++)
			if (bounds[i + 1] <= c)
				want += is_mad[i];
		cr_assert_eq(mads, want, "cut %zu: %d MADs, want %d", c, mads, want);
		if (boundary >= 0) {
			cr_assert_eq(rc, 0, "cut %zu at a record boundary: %s", c, um_pcap_error(r));
		} else {
			const char *e = um_pcap_error(r);

			cr_assert_eq(rc, -1, "cut %zu: rc %d", c, rc);
			cr_assert(e[0]);
			cr_assert_not_null(strstr(e, "record "), "%s", e);
			cr_assert_not_null(strstr(e, "offset"), "%s", e);
			cr_assert_not_null(strstr(e, "truncated"), "%s", e);
			cr_assert_eq(um_pcap_next(r, &out), -1); /* stays failed */
		}
		um_pcap_close_read(r);
	}
	free(file);
}

Test(um_pcap, truncated_ethernet_file) { truncation_loop(UM_PCAP_LINKTYPE_ETHERNET); }
Test(um_pcap, truncated_erf_file) { truncation_loop(UM_PCAP_LINKTYPE_ERF); }

Test(um_pcap, oversized_caplen_is_corruption)
{
	const char *p = tpath("big.pcap");
	struct um_pcap_writer *w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ETHERNET);
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE], *file;
	char err[256];
	struct um_pcap_reader *r;
	struct um_pcap_mad out;
	size_t len;

	roce_meta(&m, 1);
	make_mad(mad, 1, 0x10);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	cr_assert_eq(um_pcap_close_write(w), 0);
	file = slurp(p, &len);
	file[24 + 16 + 322 + 8 + 2] = 0x01; /* record 2 caplen += 65536 */
	spew(p, file, len);
	r = um_pcap_open_read(p, err, sizeof(err));
	cr_assert_not_null(r, "%s", err);
	cr_assert_eq(um_pcap_next(r, &out), 1);
	cr_assert_eq(um_pcap_next(r, &out), -1);
	cr_assert_not_null(strstr(um_pcap_error(r), "record 2 at byte offset 362"), "%s",
			   um_pcap_error(r));
	cr_assert_not_null(strstr(um_pcap_error(r), "snaplen"), "%s", um_pcap_error(r));
	um_pcap_close_read(r);

	/* snaplen 0 (some writers): the 256 KiB ceiling still applies. */
	file[16] = file[17] = 0;
	file[24 + 16 + 322 + 8 + 2] = 0x10; /* caplen 0x100142 */
	spew(p, file, len);
	r = um_pcap_open_read(p, err, sizeof(err));
	cr_assert_eq(um_pcap_next(r, &out), 1);
	cr_assert_eq(um_pcap_next(r, &out), -1);
	cr_assert_not_null(strstr(um_pcap_error(r), "limit"), "%s", um_pcap_error(r));
	um_pcap_close_read(r);
	free(file);
}

Test(um_pcap, all_four_magics)
{
	static const struct {
		uint32_t magic;
		int big, nsec;
	} v[] = {
		{ 0xA1B2C3D4u, 0, 0 }, { 0xA1B2C3D4u, 1, 0 },
		{ 0xA1B23C4Du, 0, 1 }, { 0xA1B23C4Du, 1, 1 },
	};
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	int len;

	roce_meta(&m, 0);
	make_mad(mad, 0x77, 0x10);
	len = build(&m, mad, frame);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		static struct blob b;
		struct um_pcap_mad got;
		char err[256];
		struct um_pcap_reader *r;

		b.n = 0;
		b_file_hdr(&b, v[i].magic, v[i].big, 65535, 1);
		b_rec(&b, v[i].big, 1000, 123456, frame, (size_t)len);
		spew(tpath("magic.pcap"), b.p, b.n);
		r = um_pcap_open_read(tpath("magic.pcap"), err, sizeof(err));
		cr_assert_not_null(r, "%s", err);
		cr_assert_eq(um_pcap_nanosecond(r), v[i].nsec);
		cr_assert_eq(um_pcap_linktype(r), 1);
		cr_assert_eq(um_pcap_next(r, &got), 1, "%s", um_pcap_error(r));
		cr_assert_eq(got.meta.ts_ns,
			     1000000000000ull + (v[i].nsec ? 123456ull : 123456000ull));
		cr_assert_eq(cmp_bits_get(got.mad, 8, 0, 64), 0x77);
		cr_assert_eq(um_pcap_next(r, &got), 0);
		um_pcap_close_read(r);
	}
}

Test(um_pcap, unusable_files_are_refused_with_a_reason)
{
	static struct blob b;
	char err[256];
	static const uint8_t ng[32] = { 0x0a, 0x0d, 0x0d, 0x0a, 28, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a };
	static const char text[] = "this is not a capture file at all";

	spew(tpath("ng.pcap"), ng, sizeof(ng));
	cr_assert_null(um_pcap_open_read(tpath("ng.pcap"), err, sizeof(err)));
	cr_assert_not_null(strstr(err, "pcapng"), "%s", err);

	spew(tpath("txt.pcap"), text, sizeof(text));
	cr_assert_null(um_pcap_open_read(tpath("txt.pcap"), err, sizeof(err)));
	cr_assert_not_null(strstr(err, "not a pcap"), "%s", err);

	b.n = 0;
	b_file_hdr(&b, UM_PCAP_MAGIC_NS, 0, 65535, 105); /* 802.11 */
	spew(tpath("wifi.pcap"), b.p, b.n);
	cr_assert_null(um_pcap_open_read(tpath("wifi.pcap"), err, sizeof(err)));
	cr_assert_not_null(strstr(err, "link type 105"), "%s", err);

	cr_assert_null(um_pcap_open_read(tpath("missing.pcap"), err, sizeof(err)));
	cr_assert(err[0]);

	spew(tpath("empty.pcap"), "", 0);
	cr_assert_null(um_pcap_open_read(tpath("empty.pcap"), err, sizeof(err)));
	cr_assert_not_null(strstr(err, "empty"), "%s", err);
}

/* ERF time stamp: seconds `sec` plus half a second. */
static void erf_half_past(struct um_erf_hdr *h, uint32_t sec)
{
	const uint32_t frac = 0x80000000u;

	for (int i = 0; i < 4; i++) {
		h->ts[i] = (uint8_t)(frac >> (8 * i));
		h->ts[4 + i] = (uint8_t)(sec >> (8 * i));
	}
}

/* Hand-made ERF records: extension headers, PAD and ATM records, an
 * Ethernet record, an IPv4 record, and one too short for its header. The
 * ERF time stamps (n.5 s) differ from the pcap ones (1.00000000n s): the
 * reader reports the ERF one, as tshark does. */
Test(um_pcap, erf_record_variants)
{
	static struct blob b;
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE], ib[UM_FRAME_MAX], eth[UM_FRAME_MAX], rec[1024];
	struct um_pcap_mad got[4];
	struct um_pcap_stats st;
	struct um_erf_hdr h;
	int ibn, ethn, n;

	make_mad(mad, 0x55, 0x10);
	ib_meta(&m, 0, 0);
	ibn = build(&m, mad, ib);
	roce_meta(&m, 0);
	ethn = build(&m, mad, eth);
	b.n = 0;
	b_file_hdr(&b, UM_PCAP_MAGIC_NS, 0, 65535, 197);

	/* 1: IB with two extension headers (first says "more"). */
	memset(&h, 0, sizeof(h));
	h.ext = 1;
	h.type = 21;
	h.rlen = (uint16_t)(16 + 16 + ibn);
	h.wlen = (uint16_t)ibn;
	erf_half_past(&h, 51);
	memset(rec, 0, sizeof(rec));
	cmp_layout_encode(&um_erf_hdr_layout, &h, rec);
	rec[16] = 0x80 | 0x03;
	rec[24] = 0x05;
	memcpy(rec + 32, ib, (size_t)ibn);
	b_rec(&b, 0, 1, 1, rec, 32 + (size_t)ibn);
	/* 2: PAD record. */
	h.ext = 0;
	h.type = 48;
	h.rlen = 32;
	h.wlen = 0;
	memset(rec, 0, 32);
	cmp_layout_encode(&um_erf_hdr_layout, &h, rec);
	b_rec(&b, 0, 1, 2, rec, 32);
	/* 3: an ATM cell. */
	h.type = 3;
	h.rlen = 16 + 52;
	h.wlen = 52;
	cmp_layout_encode(&um_erf_hdr_layout, &h, rec);
	b_rec(&b, 0, 1, 3, rec, 16 + 52);
	/* 4: ERF Ethernet: 2-byte pad, frame, 4-byte FCS, rounded to 8. */
	h.type = 2;
	h.rlen = (uint16_t)((16 + 2 + ethn + 4 + 7) & ~7);
	h.wlen = (uint16_t)(ethn + 4);
	erf_half_past(&h, 54);
	memset(rec, 0xEE, sizeof(rec));
	cmp_layout_encode(&um_erf_hdr_layout, &h, rec);
	rec[16] = rec[17] = 0;
	memcpy(rec + 18, eth, (size_t)ethn);
	b_rec(&b, 0, 1, 4, rec, h.rlen);
	/* 5: ERF IPv4. */
	h.type = 22;
	h.rlen = (uint16_t)(16 + ethn - 14);
	h.wlen = (uint16_t)(ethn - 14);
	erf_half_past(&h, 55);
	cmp_layout_encode(&um_erf_hdr_layout, &h, rec);
	memcpy(rec + 16, eth + 14, (size_t)ethn - 14);
	b_rec(&b, 0, 1, 5, rec, h.rlen);
	/* 6: 10 bytes: not even an ERF header. */
	b_rec(&b, 0, 1, 6, rec, 10);
	/* 7: extension chain running off the record. */
	h.ext = 1;
	h.type = 21;
	cmp_layout_encode(&um_erf_hdr_layout, &h, rec);
	rec[16] = 0x80;
	b_rec(&b, 0, 1, 7, rec, 20);
	spew(tpath("erfvar.pcap"), b.p, b.n);

	cr_assert_eq(read_all(tpath("erfvar.pcap"), got, 4, &n, &st), 0);
	cr_assert_eq(n, 3);
	cr_assert_eq(got[0].frame_no, 1);
	cr_assert_eq(got[0].meta.link, UM_LINK_IB);
	cr_assert_eq(got[0].meta.vcrc_ok, 1);
	cr_assert_eq(got[1].frame_no, 4);
	cr_assert_eq(got[1].meta.link, UM_LINK_ROCEV2);
	cr_assert_eq(got[2].frame_no, 5);
	cr_assert_eq(got[2].meta.link, UM_LINK_IP);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(got[i].meta.icrc_ok, 1);
		cr_assert_eq(memcmp(got[i].mad, mad, UM_MAD_SIZE), 0);
		cr_assert_eq(got[i].meta.ts_ns,
			     (uint64_t)(i ? 53 + i : 51) * 1000000000ull + 500000000ull);
	}
	cr_assert_eq(st.frames, 7);
	cr_assert_eq(st.skipped, 2);
	cr_assert_eq(st.malformed, 2);
}

Test(um_pcap, raw_ip_link_types)
{
	static const uint32_t links[] = { 101, 228 };
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE], frame[UM_FRAME_MAX];
	int len;

	roce_meta(&m, 0);
	make_mad(mad, 0x99, 0x10);
	len = build(&m, mad, frame);
	for (size_t i = 0; i < 2; i++) {
		static struct blob b;
		struct um_pcap_mad got[1];
		struct um_pcap_stats st;
		int n;

		b.n = 0;
		b_file_hdr(&b, UM_PCAP_MAGIC_NS, 0, 65535, links[i]);
		b_rec(&b, 0, 2, 3, frame + 14, (size_t)len - 14);
		spew(tpath("raw.pcap"), b.p, b.n);
		cr_assert_eq(read_all(tpath("raw.pcap"), got, 1, &n, &st), 0);
		cr_assert_eq(n, 1);
		cr_assert_eq(got[0].meta.ts_ns, 2000000003ull);
		cr_assert_eq(got[0].meta.icrc_ok, 1);
	}
}

Test(um_pcap, writer_refuses_bad_requests)
{
	struct um_pcap_writer *w;
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE] = { 0 };

	errno = 0;
	cr_assert_null(um_pcap_open_write(tpath("x.pcap"), 105));
	cr_assert_eq(errno, EINVAL);
	cr_assert_null(um_pcap_open_write("/nonexistent-dir/x.pcap", 1));
	w = um_pcap_open_write(tpath("x.pcap"), UM_PCAP_LINKTYPE_ETHERNET);
	cr_assert_not_null(w);
	ib_meta(&m, 0, 0);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), -1); /* IB into an Ethernet file */
	cr_assert_eq(errno, EINVAL);
	roce_meta(&m, 0);
	m.dest_qp = 9;
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), -1);
	cr_assert_eq(um_pcap_close_write(w), 0);
}

/* ---- one writer per file ------------------------------------------------ */

/* USCM_PCAP=FILE exported to two processes: the second open of a file a
 * writer holds is refused (EBUSY) and leaves it whole, where O_TRUNC used
 * to empty it under the first writer, whose records then landed at their
 * old offsets after the second one's: a corrupted mixture. Once the first
 * writer is closed the file is free again (and emptied by the next). */
Test(um_pcap, a_file_being_written_is_refused_and_left_whole)
{
	const char *p = tpath("held.pcap");
	struct um_pcap_writer *w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ETHERNET), *w2;
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE];
	struct um_pcap_mad got[3];
	struct um_pcap_stats st;
	int n;

	cr_assert_not_null(w, "%s", strerror(errno));
	roce_meta(&m, 1700000000000000000ull);
	make_mad(mad, 1, 0x10);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	errno = 0;
	cr_assert_null(um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF), "a second writer");
	cr_assert_eq(errno, EBUSY, "%s", strerror(errno));
	make_mad(mad, 2, 0x11);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	cr_assert_eq(um_pcap_close_write(w), 0);
	cr_assert_eq(read_all(p, got, 3, &n, &st), 0);
	cr_assert_eq(n, 2, "the first writer's two MADs, nothing else");
	cr_assert_eq(st.malformed, 0);
	cr_assert_eq(got[1].frame_no, 2);

	w2 = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF);
	cr_assert_not_null(w2, "free once closed: %s", strerror(errno));
	cr_assert_eq(um_pcap_close_write(w2), 0);
	cr_assert_eq(read_all(p, got, 3, &n, &st), 0);
	cr_assert_eq(n, 0, "the next writer starts an empty file");
}

/* The same between processes, and a writer that dies (SIGKILL) frees the
 * file: the lock goes with its last descriptor. */
Test(um_pcap, another_process_holds_the_file_until_it_dies)
{
	const char *p = tpath("proc.pcap");
	struct um_pcap_writer *w;
	int ready[2], st;
	char c;
	pid_t pid;

	cr_assert_eq(pipe(ready), 0);
	fflush(NULL);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct um_pcap_writer *cw = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF);

		if (!cw || write(ready[1], "w", 1) != 1)
			_exit(1);
		pause();
		_exit(0);
	}
	close(ready[1]);
	cr_assert_eq(read(ready[0], &c, 1), 1, "the child did not open the file");
	errno = 0;
	cr_assert_null(um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF));
	cr_assert_eq(errno, EBUSY, "%s", strerror(errno));
	kill(pid, SIGKILL);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF);
	cr_assert_not_null(w, "the dead writer's lock is gone: %s", strerror(errno));
	cr_assert_eq(um_pcap_close_write(w), 0);
	close(ready[0]);
}

/* ---- tshark oracle ----------------------------------------------------- */

static int have_tshark(void)
{
	return system("command -v tshark >/dev/null 2>&1") == 0;
}

/* Runs tshark -T fields on path for the given fields (one packet); fills
 * vals[] with the '|'-separated columns of line `frame` (1-based). */
static int tshark_fields(const char *path, int frame, const char *const *fields, int nf,
			 char vals[][128])
{
	char cmd[2048], line[4096];
	size_t o;
	FILE *f;
	int row = 0, got = 0;

	o = (size_t)snprintf(cmd, sizeof(cmd), "tshark -r '%s' -T fields -E separator='|' "
			     "-E occurrence=f", path);
	for (int i = 0; i < nf; i++)
		o += (size_t)snprintf(cmd + o, sizeof(cmd) - o, " -e %s", fields[i]);
	snprintf(cmd + o, sizeof(cmd) - o, " 2>/dev/null");
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f)) {
		if (++row != frame)
			continue;
		line[strcspn(line, "\r\n")] = 0;
		char *s = line;
		for (int i = 0; i < nf; i++) {
			char *bar = strchr(s, '|');
			if (bar)
				*bar = 0;
			size_t k = strlen(s) < 127 ? strlen(s) : 127;
			memcpy(vals[i], s, k);
			vals[i][k] = 0;
			got++;
			if (!bar)
				break;
			s = bar + 1;
		}
	}
	pclose(f);
	return got;
}

static uint64_t num(const char *s)
{
	return strtoull(s, NULL, 0);
}

Test(um_pcap, tshark_decodes_rocev2)
{
	static const char *const fields[] = {
		"infiniband.mad.transactionid", "infiniband.mad.attributeid",
		"infiniband.mad.mgmtclass",     "infiniband.bth.opcode",
		"infiniband.bth.destqp",        "infiniband.bth.psn",
		"infiniband.bth.p_key",         "infiniband.deth.srcqp",
		"infiniband.deth.q_key",        "ip.src",
		"ip.dst",                       "udp.srcport",
		"udp.dstport",                  "ip.dsfield",
		"ip.ttl",                       "frame.time_epoch",
		"infiniband.invariant.crc",
	};
	enum { NF = sizeof(fields) / sizeof(fields[0]) };
	char vals[NF][128];
	const char *p;
	struct um_pcap_writer *w;
	struct um_frame_meta m;
	struct um_pcap_mad got[1];
	uint8_t mad[UM_MAD_SIZE];
	int n;

	if (!have_tshark())
		tf_skip_missing("tshark not installed");
	p = tpath("oracle_roce.pcap");
	roce_meta(&m, 1712345678987654321ull);
	m.sgid[12] = 172, m.sgid[13] = 16, m.sgid[14] = 33, m.sgid[15] = 44;
	m.dgid[12] = 172, m.dgid[13] = 16, m.dgid[14] = 55, m.dgid[15] = 66;
	m.udp_sport = 51234;
	m.pkey = 0x8123;
	m.psn = 0x654321;
	m.src_qp = 0x00ABCD;
	m.tclass = 0x68;
	m.hop_limit = 33;
	make_mad(mad, 0x0123456789ABCDEFull, 0x0013);
	w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ETHERNET);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	cr_assert_eq(um_pcap_close_write(w), 0);
	cr_assert_eq(read_all(p, got, 1, &n, NULL), 0);

	cr_assert_eq(tshark_fields(p, 1, fields, NF, vals), NF);
	cr_assert_eq(num(vals[0]), 0x0123456789ABCDEFull, "%s", vals[0]);
	cr_assert_eq(num(vals[1]), 0x13, "%s", vals[1]);
	cr_assert_eq(num(vals[2]), 0x07, "%s", vals[2]);
	cr_assert_eq(num(vals[3]), 0x64, "%s", vals[3]);
	cr_assert_eq(num(vals[4]), 1, "%s", vals[4]);
	cr_assert_eq(num(vals[5]), 0x654321, "%s", vals[5]);
	cr_assert_eq(num(vals[6]), 0x8123, "%s", vals[6]);
	cr_assert_eq(num(vals[7]), 0xABCD, "%s", vals[7]);
	cr_assert_eq(num(vals[8]), 0x80010000, "%s", vals[8]);
	cr_assert_str_eq(vals[9], "172.16.33.44");
	cr_assert_str_eq(vals[10], "172.16.55.66");
	cr_assert_eq(num(vals[11]), 51234);
	cr_assert_eq(num(vals[12]), 4791);
	cr_assert_eq(num(vals[13]), 0x68, "%s", vals[13]);
	cr_assert_eq(num(vals[14]), 33);
	cr_assert_str_eq(vals[15], "1712345678.987654321");
	/* tshark shows the ICRC bytes as a big-endian number; we store the
	 * CRC least significant byte first. */
	cr_assert_eq(num(vals[16]), __builtin_bswap32(got[0].meta.icrc), "%s vs 0x%08x", vals[16],
		     got[0].meta.icrc);
}

Test(um_pcap, tshark_decodes_erf_infiniband)
{
	static const char *const fields[] = {
		"erf.types.type",             "erf.flags",
		"erf.rlen",                   "erf.wlen",
		"infiniband.lrh.vl",          "infiniband.lrh.sl",
		"infiniband.lrh.lnh",         "infiniband.lrh.dlid",
		"infiniband.lrh.pktlen",      "infiniband.lrh.slid",
		"infiniband.grh.tclass",      "infiniband.grh.flowlabel",
		"infiniband.grh.paylen",      "infiniband.grh.nxthdr",
		"infiniband.grh.hoplmt",      "infiniband.grh.sgid",
		"infiniband.grh.dgid",        "infiniband.bth.destqp",
		"infiniband.bth.p_key",       "infiniband.bth.psn",
		"infiniband.deth.srcqp",      "infiniband.deth.q_key",
		"infiniband.mad.transactionid", "infiniband.mad.attributeid",
		"frame.time_epoch",           "infiniband.variant.crc",
	};
	enum { NF = sizeof(fields) / sizeof(fields[0]) };
	char vals[NF][128], gid[64];
	const char *p;
	struct um_pcap_writer *w;
	struct um_frame_meta m;
	struct um_pcap_mad got[2];
	uint8_t mad[UM_MAD_SIZE];
	int n;

	if (!have_tshark())
		tf_skip_missing("tshark not installed");
	p = tpath("oracle_ib.pcap");
	ib_meta(&m, 1500000000000000001ull, 0);
	m.slid = 0x1234;
	m.dlid = 0x0BCD;
	m.sl = 9;
	m.vl = 3;
	m.pkey = 0x8002;
	m.psn = 0x00FEDC;
	m.src_qp = 0x00C0FF;
	make_mad(mad, 0xDEADBEEF00C0FFEEull, 0x0014);
	w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	ib_meta(&m, 1500000000500000000ull, 1);
	m.slid = 0x4321;
	m.tclass = 0x9C;
	m.flow_label = 0xFACED;
	m.hop_limit = 7;
	m.sgid[9] = 0x33;
	cmp_bits_set(mad, 8, 0, 64, 0x1111222233334444ull);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	cr_assert_eq(um_pcap_close_write(w), 0);
	cr_assert_eq(read_all(p, got, 2, &n, NULL), 0);
	cr_assert_eq(n, 2);

	cr_assert_eq(tshark_fields(p, 1, fields, NF, vals), NF);
	cr_assert_eq(num(vals[0]), 21, "%s", vals[0]);
	cr_assert_eq(num(vals[1]) & 0x04, 0x04, "%s", vals[1]);
	cr_assert_eq(num(vals[2]), 16 + 290);
	cr_assert_eq(num(vals[3]), 290);
	cr_assert_eq(num(vals[4]), 3);
	cr_assert_eq(num(vals[5]), 9);
	cr_assert_eq(num(vals[6]), 2);
	cr_assert_eq(num(vals[7]), 0x0BCD);
	cr_assert_eq(num(vals[8]), 72);
	cr_assert_eq(num(vals[9]), 0x1234);
	cr_assert_str_eq(vals[10], ""); /* no GRH */
	cr_assert_eq(num(vals[17]), 1);
	cr_assert_eq(num(vals[18]), 0x8002);
	cr_assert_eq(num(vals[19]), 0xFEDC);
	cr_assert_eq(num(vals[20]), 0xC0FF);
	cr_assert_eq(num(vals[21]), 0x80010000);
	cr_assert_eq(num(vals[22]), 0xDEADBEEF00C0FFEEull, "%s", vals[22]);
	cr_assert_eq(num(vals[23]), 0x14);
	cr_assert_str_eq(vals[24], "1500000000.000000001");
	/* Shown big-endian; stored least significant byte first. */
	cr_assert_eq(num(vals[25]), __builtin_bswap16(got[0].meta.vcrc), "%s", vals[25]);

	cr_assert_eq(tshark_fields(p, 2, fields, NF, vals), NF);
	cr_assert_eq(num(vals[2]), 16 + 330);
	cr_assert_eq(num(vals[6]), 3);
	cr_assert_eq(num(vals[8]), 82);
	cr_assert_eq(num(vals[9]), 0x4321);
	cr_assert_eq(num(vals[10]), 0x9C, "%s", vals[10]);
	cr_assert_eq(num(vals[11]), 0xFACED, "%s", vals[11]);
	cr_assert_eq(num(vals[12]), 280);
	cr_assert_eq(num(vals[13]), 0x1B);
	cr_assert_eq(num(vals[14]), 7);
	cr_assert_str_eq(vals[15], cmp_gid_str(m.sgid, gid, sizeof(gid)));
	cr_assert_str_eq(vals[16], cmp_gid_str(m.dgid, gid, sizeof(gid)));
	cr_assert_eq(num(vals[22]), 0x1111222233334444ull, "%s", vals[22]);
	cr_assert_str_eq(vals[24], "1500000000.500000000");
}

/* A RoCEv2 MAD inside an ERF Ethernet record: the 2-byte pad and the
 * trailing FCS must line up for tshark too. */
Test(um_pcap, tshark_decodes_erf_ethernet)
{
	static const char *const fields[] = {
		"erf.types.type", "eth.type", "udp.dstport", "infiniband.mad.transactionid",
		"infiniband.deth.srcqp",
	};
	char vals[5][128];
	const char *p;
	struct um_pcap_writer *w;
	struct um_frame_meta m;
	uint8_t mad[UM_MAD_SIZE];

	if (!have_tshark())
		tf_skip_missing("tshark not installed");
	p = tpath("oracle_erf_eth.pcap");
	roce_meta(&m, 5);
	m.src_qp = 0x000321;
	make_mad(mad, 0x0A0B0C0D0E0F1011ull, 0x10);
	w = um_pcap_open_write(p, UM_PCAP_LINKTYPE_ERF);
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
	cr_assert_eq(um_pcap_close_write(w), 0);
	cr_assert_eq(tshark_fields(p, 1, fields, 5, vals), 5);
	cr_assert_eq(num(vals[0]), 2);
	cr_assert_eq(num(vals[1]), 0x0800, "%s", vals[1]);
	cr_assert_eq(num(vals[2]), 4791);
	cr_assert_eq(num(vals[3]), 0x0A0B0C0D0E0F1011ull, "%s", vals[3]);
	cr_assert_eq(num(vals[4]), 0x321);
}

/* ---- the committed corpus (tests/corpus/pcap, see its README) ---------- */

static int corpus_path(char *buf, size_t len, const char *name)
{
	const char *slash = strrchr(__FILE__, '/');
	int dirlen = slash ? (int)(slash - __FILE__) + 1 : 0;
	struct stat sb;

	snprintf(buf, len, "%.*scorpus/pcap/%s", dirlen, __FILE__, name);
	return stat(buf, &sb) == 0;
}

Test(um_pcap, corpus_files_read_as_documented)
{
	static const struct {
		const char *name;
		uint64_t frames, mads, skipped, bad_icrc;
	} want[] = {
		{ "rocev2_mads.pcap", 3, 3, 0, 0 },
		{ "ib_erf_mads.pcap", 3, 3, 0, 0 },
		{ "mixed_nonmad.pcap", 5, 2, 3, 1 },
	};
	char p[1024];

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct um_pcap_mad got[4];
		struct um_pcap_stats st;
		int n;

		if (!corpus_path(p, sizeof(p), want[i].name))
			tf_skip_missing("corpus not found next to %s", __FILE__);
		cr_assert_eq(read_all(p, got, 4, &n, &st), 0, "%s", p);
		cr_assert_eq(st.frames, want[i].frames, "%s", p);
		cr_assert_eq(st.mads, want[i].mads, "%s", p);
		cr_assert_eq(st.skipped, want[i].skipped, "%s", p);
		cr_assert_eq(st.bad_icrc, want[i].bad_icrc, "%s", p);
		cr_assert_eq(st.malformed, 0, "%s", p);
		for (int k = 0; k < n; k++)
			cr_assert_eq(cmp_bits_get(got[k].mad, 1, 0, 8), 0x07); /* CM */
	}
}
