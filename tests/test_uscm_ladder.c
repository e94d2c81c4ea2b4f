/*
 * The ladder diagrams of uscm-decode (tools/uscm_ladder.c) on handcrafted
 * traces written with the um_pcap writer: grouping (two interleaved
 * connections, a rejected one, SIDR, an SA transaction, strays; comm IDs
 * keyed by endpoint), retries with their gap, time gaps against the REQ's
 * response timeout or --gap, unanswered requests, malformed MADs, and the
 * text and SVG output through the uscm-decode CLI (well-formed XML, one
 * arrow with an arrowhead per MAD), bad usage and truncated files.
 */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cm_proto/cmp_cm.h"
#include "tests/test_fixtures.h"
#include "tools/uscm_ladder.h"
#include "umad/um_pcap.h"
#include "umad/um_sa.h"

static char dir[64];

static void fini(void)
{
	tf_remove(dir);
}

TestSuite(ladder, .fini = fini);

#define MS 1000000ull
#define T0 1700000000000000000ull

static struct um_pcap_writer *w;

static void open_trace(const char *name)
{
	w = um_pcap_open_write(tf_path(dir, "uscm-ladder-", name), UM_PCAP_LINKTYPE_ERF);
	cr_assert(w, "um_pcap_open_write");
}

static void put(uint64_t t_ms10, uint16_t slid, uint16_t dlid, const uint8_t mad[256])
{
	struct um_frame_meta m = { 0 };

	m.ts_ns = T0 + t_ms10 * MS / 10; /* tenths of a ms */
	m.link = UM_LINK_IB;
	m.slid = slid;
	m.dlid = dlid;
	m.pkey = 0xFFFF;
	m.qkey = UM_QP1_QKEY;
	m.src_qp = 1;
	m.dest_qp = 1;
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
}

/* A CM message with comm IDs / TID (REQ: rcid ignored; SIDR: lcid is the
 * request ID). */
static void cm(uint64_t t, uint16_t s, uint16_t d, uint16_t attr, uint64_t tid, uint32_t lcid,
	       uint32_t rcid)
{
	struct cmp_cm_msg m;
	uint8_t mad[256];

	memset(&m, 0, sizeof(m));
	m.hdr.method = UMAD_METHOD_SEND;
	m.hdr.attr_id = attr;
	m.hdr.tid = tid;
	switch (attr) {
	case UMAD_CM_ATTR_REQ:
		m.u.req.local_comm_id = lcid;
		m.u.req.service_id = 0x0000000001061c06ull;
		m.u.req.local_qpn = 0x140;
		m.u.req.starting_psn = 0x1234;
		m.u.req.path_mtu = 4;
		m.u.req.local_cm_response_timeout = 16; /* 268 ms */
		m.u.req.remote_cm_response_timeout = 17;
		m.u.req.max_cm_retries = 15;
		m.u.req.private_data[0] = 0x10;
		m.u.req.private_data[35] = 1; /* 36 bytes used */
		break;
	case UMAD_CM_ATTR_REJ:
		m.u.rej.local_comm_id = lcid;
		m.u.rej.remote_comm_id = rcid;
		m.u.rej.reason = 28; /* consumer reject */
		break;
	case UMAD_CM_ATTR_SIDR_REQ:
		m.u.sidr_req.request_id = lcid;
		m.u.sidr_req.service_id = 0x0000000002060001ull;
		break;
	case UMAD_CM_ATTR_SIDR_REP:
		m.u.sidr_rep.request_id = lcid;
		m.u.sidr_rep.qpn = 0x77;
		break;
	default: /* REP, RTU, DREQ, DREP, MRA: comm IDs first */
		m.u.rep.local_comm_id = lcid;
		m.u.rep.remote_comm_id = rcid;
		break;
	}
	cr_assert_eq(cmp_cm_encode(&m, mad), 0);
	put(t, s, d, mad);
}

static void sa(uint64_t t, uint16_t s, uint16_t d, int resp, uint64_t tid)
{
	struct um_sa_msg m;
	uint8_t mad[256], g1[16] = { 0xfe, 0x80, [15] = 1 }, g2[16] = { 0xfe, 0x80, [15] = 2 };

	um_sa_path_query(&m, tid, g1, g2, 0xFFFF, 0x0000000001061c06ull, -1);
	if (resp)
		m.hdr.method = 0x81;
	cr_assert_eq(um_sa_encode(&m, mad), 0);
	put(t, s, d, mad);
}

static struct ladder *load(const char *name, uint64_t gap_ns)
{
	struct um_pcap_reader *r;
	struct um_pcap_mad p;
	struct ladder *l = ladder_new(gap_ns, 0);
	char err[256];
	int rc;

	cr_assert_eq(um_pcap_close_write(w), 0);
	w = NULL;
	r = um_pcap_open_read(tf_path(dir, "uscm-ladder-", name), err, sizeof(err));
	cr_assert(r, "%s", err);
	while ((rc = um_pcap_next(r, &p)) == 1)
		cr_assert_eq(ladder_add(l, &p), 0);
	cr_assert_eq(rc, 0, "%s", um_pcap_error(r));
	um_pcap_close_read(r);
	cr_assert_eq(ladder_build(l), 0);
	return l;
}

static const struct ladder_mad *gm(const struct ladder *l, unsigned g, unsigned i)
{
	cr_assert_lt(g, l->ngroups);
	cr_assert_lt(i, l->groups[g].n);
	return &l->mads[l->groups[g].mads[i]];
}

/* Two connections between LIDs 2 <-> 3 and 4 <-> 3 interleaved, a rejected
 * REQ, an SA query, SIDR and strays. */
static void mixed_trace(void)
{
	uint8_t raw[256] = { 0 };

	open_trace("mixed.pcap");
	sa(0, 2, 1, 0, 0x00000001aaaa0001ull);
	sa(1, 1, 2, 1, 0x00e00000aaaa0001ull); /* upper TID bits rewritten */
	cm(10, 2, 3, UMAD_CM_ATTR_REQ, 0x10, 0xA1, 0);
	cm(11, 4, 3, UMAD_CM_ATTR_REQ, 0x20, 0xB1, 0);
	cm(12, 3, 2, UMAD_CM_ATTR_REP, 0x11, 0xA2, 0xA1);
	cm(13, 3, 4, UMAD_CM_ATTR_REP, 0x21, 0xB2, 0xB1);
	cm(14, 2, 3, UMAD_CM_ATTR_RTU, 0x10, 0xA1, 0xA2);
	cm(15, 4, 3, UMAD_CM_ATTR_RTU, 0x20, 0xB1, 0xB2);
	/* Same comm ID 0xA1 from another endpoint: another connection. */
	cm(16, 5, 3, UMAD_CM_ATTR_REQ, 0x30, 0xA1, 0);
	cm(17, 3, 5, UMAD_CM_ATTR_REJ, 0x31, 0, 0xA1);
	cm(18, 2, 3, UMAD_CM_ATTR_SIDR_REQ, 0x40, 0x5151, 0);
	cm(19, 3, 2, UMAD_CM_ATTR_SIDR_REP, 0x41, 0x5151, 0);
	cm(20, 2, 3, UMAD_CM_ATTR_DREQ, 0x12, 0xA1, 0xA2);
	cm(21, 3, 2, UMAD_CM_ATTR_DREP, 0x13, 0xA2, 0xA1);
	/* strays: a PerfMgt Get, and a CM MAD with a bad base version */
	raw[0] = 1;
	raw[1] = 0x04;
	raw[2] = 1;
	raw[3] = 1;
	put(22, 2, 3, raw);
	cm(23, 4, 3, UMAD_CM_ATTR_DREQ, 0x22, 0xB1, 0xB2);
	raw[0] = 7;
	raw[1] = 0x07;
	raw[2] = 2;
	raw[3] = 3;
	put(24, 2, 3, raw);
}

Test(ladder, groups_by_comm_ids_sidr_sa_and_stray)
{
	struct ladder *l;

	mixed_trace();
	l = load("mixed.pcap", 0);
	cr_assert_eq(l->nmads, 17);
	cr_assert_eq(l->ngroups, 6, "SA, conn A, conn B, rejected, SIDR, stray: %u", l->ngroups);
	cr_expect_eq(l->groups[0].kind, LADDER_SA);
	cr_expect_eq(l->groups[0].n, 2, "request and answer despite the rewritten TID");
	cr_expect(strstr(l->groups[0].title, "Get PathRecord"), "%s", l->groups[0].title);
	cr_expect_eq(l->groups[1].kind, LADDER_CONN);
	cr_expect_eq(l->groups[1].n, 5, "REQ REP RTU DREQ DREP");
	cr_expect_eq(gm(l, 1, 4)->attr_id, UMAD_CM_ATTR_DREP);
	cr_expect(strstr(l->groups[1].title, "0x000000a1 <-> 0x000000a2"), "%s",
		  l->groups[1].title);
	cr_expect(strstr(l->groups[1].title, "TCP port 7174"), "%s", l->groups[1].title);
	cr_expect_eq(l->groups[2].kind, LADDER_CONN);
	cr_expect_eq(l->groups[2].n, 4, "REQ REP RTU DREQ");
	cr_expect_eq(gm(l, 2, 3)->attr_id, UMAD_CM_ATTR_DREQ);
	cr_expect(gm(l, 2, 3)->no_answer, "B's DREQ got no DREP");
	cr_expect_eq(l->groups[3].kind, LADDER_CONN);
	cr_expect_eq(l->groups[3].n, 2, "REQ from LID 5 and its REJ");
	cr_expect_eq(gm(l, 3, 1)->attr_id, UMAD_CM_ATTR_REJ);
	cr_expect(!gm(l, 3, 0)->no_answer, "a REJ answers the REQ");
	cr_expect(strstr(gm(l, 3, 1)->fields, "reason 28"), "%s", gm(l, 3, 1)->fields);
	cr_expect_eq(l->groups[4].kind, LADDER_SIDR);
	cr_expect_eq(l->groups[4].n, 2);
	cr_expect_eq(l->groups[5].kind, LADDER_STRAY);
	cr_expect_eq(l->groups[5].n, 2);
	cr_expect(gm(l, 5, 1)->malformed, "bad base version");
	for (unsigned g = 0; g < 5; g++) {
		cr_expect_eq(l->groups[g].nlanes, 2, "group %u lanes", g);
		for (unsigned i = 0; i < l->groups[g].n; i++) {
			cr_expect(!gm(l, g, i)->malformed, "%u/%u: %s", g, i, gm(l, g, i)->why);
			cr_expect(!gm(l, g, i)->retry);
			cr_expect_eq(gm(l, g, i)->gap_ns, 0);
		}
	}
	cr_expect(strstr(gm(l, 1, 0)->fields, "lcid 0x000000a1 sid 0x0000000001061c06 (TCP port 7174)"
					      " qpn 0x000140 psn 0x001234 timeouts 16/17 retries 15 pdata 36"),
		  "%s", gm(l, 1, 0)->fields);
	cr_expect_str_eq(l->lanes[gm(l, 1, 0)->src].addr, "LID 2");
	cr_expect_eq(l->lanes[gm(l, 1, 0)->src].qpn, 1);
	ladder_free(l);
}

/* A lost REP: REQ, REP (lost), REQ resent after 300 ms, REP resent, RTU;
 * then DREQ twice without DREP. */
static void lost_rep_trace(void)
{
	open_trace("lost.pcap");
	cm(0, 2, 3, UMAD_CM_ATTR_REQ, 0x10, 0xA1, 0);
	cm(2, 3, 2, UMAD_CM_ATTR_REP, 0x11, 0xA2, 0xA1);
	cm(3000, 2, 3, UMAD_CM_ATTR_REQ, 0x10, 0xA1, 0);
	cm(3002, 3, 2, UMAD_CM_ATTR_REP, 0x11, 0xA2, 0xA1);
	cm(3004, 2, 3, UMAD_CM_ATTR_RTU, 0x10, 0xA1, 0xA2);
	cm(3010, 2, 3, UMAD_CM_ATTR_DREQ, 0x12, 0xA1, 0xA2);
	cm(3510, 2, 3, UMAD_CM_ATTR_DREQ, 0x12, 0xA1, 0xA2);
}

Test(ladder, retries_gaps_and_unanswered)
{
	struct ladder *l;

	lost_rep_trace();
	l = load("lost.pcap", 0);
	cr_assert_eq(l->ngroups, 1);
	cr_assert_eq(l->groups[0].n, 7);
	/* threshold: the REQ's smaller response timeout, 4.096 us * 2^16 */
	cr_expect_eq(l->groups[0].gap_threshold_ns, 4096ull << 16);
	cr_expect_eq(gm(l, 0, 0)->retry, 0);
	cr_expect(!gm(l, 0, 0)->no_answer, "answered by the REP");
	cr_expect_eq(gm(l, 0, 2)->retry, 1, "the REQ resent");
	cr_expect_eq(gm(l, 0, 2)->retry_gap_ns, 300 * MS);
	cr_expect_eq(gm(l, 0, 2)->gap_ns, 2998 * MS / 10, "299.8 ms >= 268 ms");
	cr_expect_eq(gm(l, 0, 3)->retry, 1, "the REP resent");
	cr_expect_eq(gm(l, 0, 3)->gap_ns, 0);
	cr_expect_eq(gm(l, 0, 4)->retry, 0);
	cr_expect(!gm(l, 0, 5)->no_answer, "a retry follows");
	cr_expect_eq(gm(l, 0, 6)->retry, 1);
	cr_expect_eq(gm(l, 0, 6)->gap_ns, 0, "50 ms < 268 ms: no gap");
	ladder_free(l);
}

Test(ladder, gap_option_overrides_the_response_timeout)
{
	struct ladder *l;

	lost_rep_trace();
	l = load("lost.pcap", 400 * MS);
	cr_expect_eq(l->groups[0].gap_threshold_ns, 400 * MS);
	cr_expect_eq(gm(l, 0, 2)->gap_ns, 0, "299.8 ms < 400 ms");
	ladder_free(l);
}

/* ---- through the CLI --------------------------------------------------- */

#define sh tf_sh /* tests/test_fixtures.h */

static char *decode(int want, const char *args, const char *name)
{
	char *out = NULL;
	int st = sh(&out, "%s/uscm-decode %s %s 2>&1", getenv("USCM_BIN_DIR"), args,
		       tf_path(dir, "uscm-ladder-", name));

	cr_assert_eq(st, want, "uscm-decode %s: exit %d\n%s", args, st, out);
	return out;
}

/* Tags balance, attributes are quoted, only the five XML entities or
 * numeric references appear: enough to catch what a hand-written SVG
 * writer gets wrong. Returns the number of elements. */
static int xml_check(const char *s)
{
	const char *stack[256];
	size_t lens[256];
	int depth = 0, elements = 0;

	cr_assert(!strncmp(s, "<?xml ", 6), "XML declaration");
	s = strstr(s, "?>") + 2;
	while (*s) {
		if (*s == '&') {
			cr_assert(!strncmp(s, "&amp;", 5) || !strncmp(s, "&lt;", 4) ||
					  !strncmp(s, "&gt;", 4) || !strncmp(s, "&quot;", 6) ||
					  !strncmp(s, "&#", 2),
				  "bad entity at %.20s", s);
			s++;
			continue;
		}
		if (*s != '<') {
			cr_assert(*s != '>', "stray '>' at %.30s", s);
			s++;
			continue;
		}
		const char *end = strchr(s, '>');
		cr_assert(end, "unterminated tag");
		if (s[1] == '/') {
			size_t n = strcspn(s + 2, " >");
			cr_assert_gt(depth, 0, "close without open: %.30s", s);
			depth--;
			cr_assert(lens[depth] == n && !strncmp(stack[depth], s + 2, n),
				  "</%.*s> closes <%.*s>", (int)n, s + 2, (int)lens[depth],
				  stack[depth]);
		} else {
			int quotes = 0;
			for (const char *p = s; p < end; p++)
				quotes += *p == '"';
			cr_assert_eq(quotes % 2, 0, "unbalanced quotes in %.60s", s);
			elements++;
			if (end[-1] != '/') {
				cr_assert_lt(depth, 256);
				stack[depth] = s + 1;
				lens[depth++] = strcspn(s + 1, " >");
			}
		}
		s = end + 1;
	}
	cr_assert_eq(depth, 0, "unclosed elements");
	return elements;
}

static int count(const char *s, const char *what)
{
	int n = 0;

	for (; (s = strstr(s, what)); s += strlen(what))
		n++;
	return n;
}

Test(ladder, cli_text)
{
	char *out;

	lost_rep_trace();
	cr_assert_eq(um_pcap_close_write(w), 0);
	out = decode(0, "--ladder", "lost.pcap");
	cr_expect(strstr(out, "7 MADs in 1 group; 3 retries, 0 malformed, 1 unanswered"), "%s", out);
	cr_expect(strstr(out, "== 1. connection: comm IDs 0x000000a1 <-> 0x000000a2"), "%s", out);
	cr_expect(strstr(out, "|========= REQ ========>|"), "the resent REQ:\n%s", out);
	cr_expect(strstr(out, "|<======== REP =========|"), "the resent REP:\n%s", out);
	cr_expect(strstr(out, "[retry #1, +300.000 ms after the previous send]"), "%s", out);
	cr_expect(strstr(out, "~ 299.800 ms without MADs (gap >= 268.435 ms) ~"), "%s", out);
	cr_expect(strstr(out, "[retry #1, +50.000 ms after the previous send] [no answer]"), "%s",
		  out);
	cr_expect(strstr(out, "LID 2                   LID 3"), "lane headers:\n%s", out);
	free(out);
	out = decode(0, "--ladder --gap 10", "lost.pcap");
	cr_expect(strstr(out, "~ 50.000 ms without MADs (gap >= 10.000 ms) ~"), "%s", out);
	free(out);
}

Test(ladder, cli_svg_is_well_formed)
{
	char *out, *svg = NULL;

	mixed_trace();
	cr_assert_eq(um_pcap_close_write(w), 0);
	out = decode(0, "--ladder-svg -", "mixed.pcap");
	cr_assert(xml_check(out) > 100, "elements");
	cr_expect(strstr(out, "<svg xmlns=\"http://www.w3.org/2000/svg\""), "%s", out);
	cr_expect_eq(count(out, "<line class=\"arrow"), 17, "one arrow per MAD");
	cr_expect_eq(count(out, "marker-end=\"url(#ah"), 17, "each with an arrowhead");
	cr_expect_eq(count(out, "<g class=\"group\""), 6);
	cr_expect_eq(count(out, "<text class=\"time\""), 17, "a time label per arrow");
	cr_expect(strstr(out, "<marker id=\"ah0\""), "%s", out);
	/* text-only characters are escaped: the REJ reason text, the GID */
	cr_expect(strstr(out, "[no answer]"), "%s", out);
	free(out);
	/* --ladder and --ladder-svg FILE together; the file is the same SVG. */
	out = decode(0, "--ladder --ladder-svg /dev/null", "mixed.pcap");
	cr_expect(strstr(out, "17 MADs in 6 groups"), "%s", out);
	free(out);
	sh(&svg, "%s/uscm-decode --ladder-svg %s %s && cat %s", getenv("USCM_BIN_DIR"),
	      tf_path(dir, "uscm-ladder-", "m.svg"), tf_path(dir, "uscm-ladder-", "mixed.pcap"),
	      tf_path(dir, "uscm-ladder-", "m.svg"));
	cr_expect(xml_check(svg) > 100);
	free(svg);
}

Test(ladder, cli_bad_usage_and_truncated_file)
{
	char *out;
	struct stat st;
	const char *p;

	lost_rep_trace();
	cr_assert_eq(um_pcap_close_write(w), 0);
	free(decode(2, "--ladder --json", "lost.pcap"));
	free(decode(2, "--ladder -v", "lost.pcap"));
	free(decode(2, "--ladder --gap 0", "lost.pcap"));
	free(decode(2, "--ladder --gap x", "lost.pcap"));
	free(decode(1, "--ladder-svg /nonexistent/dir/x.svg", "lost.pcap"));
	/* Cut the last record in half: what was read is still drawn, exit 1. */
	p = tf_path(dir, "uscm-ladder-", "lost.pcap");
	cr_assert_eq(stat(p, &st), 0);
	cr_assert_eq(truncate(p, st.st_size - 100), 0);
	out = decode(1, "--ladder", "lost.pcap");
	cr_expect(strstr(out, "6 MADs in 1 group"), "%s", out);
	cr_expect(strstr(out, "record 7"), "names the broken record:\n%s", out);
	free(out);
}
