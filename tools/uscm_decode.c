/*
 * uscm-decode - print the MADs of a pcap trace (RoCEv2 over Ethernet, or
 * native IB in ERF records as ibdump writes them): one summary line per MAD,
 * every field with -v, JSON Lines with --json, or ladder (sequence) diagrams
 * per connection with --ladder (text) / --ladder-svg OUT.svg (SVG; see
 * tools/uscm_ladder.h and docs/capture.md). Frames that are not MADs are
 * skipped and counted.
 *
 * Exit status: 0 when the whole file was read, 1 when it is truncated or
 * corrupt (everything before the break is still printed), 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_cm.h"
#include "cm_proto/cmp_cma.h"
#include "umad/um_pcap.h"
#include "tools/uscm_ladder.h"
#include "umad/um_sa.h"

struct opts {
	int verbose;
	int json;
	int abs_time;
	int ladder;             /* --ladder: text diagram instead of the list */
	const char *ladder_svg; /* --ladder-svg FILE ("-": stdout) */
	double gap_ms;          /* --gap MS */
};

static void usage(FILE *out)
{
	fprintf(out,
		"usage: uscm-decode [-v] [--json] [--abs-time] FILE.pcap\n"
		"       uscm-decode [--ladder] [--ladder-svg OUT.svg] [--gap MS] [--abs-time] FILE.pcap\n"
		"  -v, --verbose     every field of every MAD, with diagnostics\n"
		"  --json            one JSON object per MAD (JSON Lines)\n"
		"  --abs-time        absolute time stamps instead of seconds since the first MAD\n"
		"  --ladder          a ladder (sequence) diagram per connection / SIDR / SA\n"
		"                    transaction, as text, instead of the MAD list\n"
		"  --ladder-svg OUT  the same diagrams as SVG into OUT (\"-\": stdout)\n"
		"  --gap MS          mark gaps >= MS between a group's MADs (default: the\n"
		"                    connection's CM response timeout, else 100 ms)\n");
}

static int is_v4mapped(const uint8_t g[16])
{
	static const uint8_t pfx[12] = { [10] = 0xff, [11] = 0xff };
	return memcmp(g, pfx, 12) == 0;
}

/* An endpoint as a person wants to read it: IP for RoCEv2, LID (+GID) for IB. */
static const char *endpoint(const struct um_frame_meta *m, int src, char *buf, size_t len)
{
	const uint8_t *gid = src ? m->sgid : m->dgid;
	char g[64];

	if (m->link != UM_LINK_IB) {
		if (is_v4mapped(gid))
			inet_ntop(AF_INET, gid + 12, buf, (socklen_t)len);
		else
			inet_ntop(AF_INET6, gid, buf, (socklen_t)len);
		return buf;
	}
	if (m->has_grh)
		snprintf(buf, len, "LID %u/%s", src ? m->slid : m->dlid, cmp_gid_str(gid, g, sizeof(g)));
	else
		snprintf(buf, len, "LID %u", src ? m->slid : m->dlid);
	return buf;
}

/* The key fields of a CM message for the summary line. */
static void cm_summary(const struct cmp_cm_msg *cm, FILE *out)
{
	enum cmp_ps ps;
	uint16_t port;

	switch (cm->hdr.attr_id) {
	case UMAD_CM_ATTR_REQ:
		fprintf(out, " lcid 0x%08x sid 0x%016" PRIx64, cm->u.req.local_comm_id,
			cm->u.req.service_id);
		if (cmp_sid_split(cm->u.req.service_id, &ps, &port) == 0)
			fprintf(out, " (%s port %u)", cmp_ps_str(ps), port);
		fprintf(out, " qpn 0x%06x psn 0x%06x", cm->u.req.local_qpn, cm->u.req.starting_psn);
		/* the QP type when it is not RC (UC, XRC) */
		if (cm->u.req.transport_service_type)
			fprintf(out, " type %s", cmp_cm_req_qp_type_str(&cm->u.req));
		break;
	case UMAD_CM_ATTR_REP:
		fprintf(out, " lcid 0x%08x rcid 0x%08x qpn 0x%06x psn 0x%06x",
			cm->u.rep.local_comm_id, cm->u.rep.remote_comm_id, cm->u.rep.local_qpn,
			cm->u.rep.starting_psn);
		/* an XRC target names its QP in the Local EECN */
		if (cm->u.rep.local_eecn)
			fprintf(out, " eecn 0x%06x", cm->u.rep.local_eecn);
		break;
	case UMAD_CM_ATTR_REJ:
		fprintf(out, " lcid 0x%08x rcid 0x%08x reason %u (%s)", cm->u.rej.local_comm_id,
			cm->u.rej.remote_comm_id, cm->u.rej.reason,
			cmp_cm_rej_reason_str(cm->u.rej.reason));
		break;
	case UMAD_CM_ATTR_MRA:
		fprintf(out, " lcid 0x%08x rcid 0x%08x mraed %u timeout %u",
			cm->u.mra.local_comm_id, cm->u.mra.remote_comm_id,
			cm->u.mra.message_mraed, cm->u.mra.service_timeout);
		break;
	case UMAD_CM_ATTR_SIDR_REQ:
		fprintf(out, " reqid 0x%08x sid 0x%016" PRIx64, cm->u.sidr_req.request_id,
			cm->u.sidr_req.service_id);
		if (cmp_sid_split(cm->u.sidr_req.service_id, &ps, &port) == 0)
			fprintf(out, " (%s port %u)", cmp_ps_str(ps), port);
		break;
	case UMAD_CM_ATTR_SIDR_REP:
		fprintf(out, " reqid 0x%08x status %u qpn 0x%06x", cm->u.sidr_rep.request_id,
			cm->u.sidr_rep.status, cm->u.sidr_rep.qpn);
		break;
	case UMAD_ATTR_CLASS_PORT_INFO:
		break;
	default:
		/* RTU, DREQ, DREP, LAP, APR all start with the two comm IDs. */
		fprintf(out, " lcid 0x%08x rcid 0x%08x", cm->u.rtu.local_comm_id,
			cm->u.rtu.remote_comm_id);
		break;
	}
}

static void print_diags(const struct cmp_diags *d, FILE *out, int json)
{
	if (json) {
		fputs(", \"diags\": [", out);
		for (unsigned i = 0; i < d->n; i++) {
			fprintf(out, "%s{\"severity\": \"%s\", \"code\": \"%s\", \"byte\": %u, "
				     "\"bit\": %u, \"field\": ",
				i ? ", " : "", d->d[i].sev == CMP_DIAG_ERROR ? "error" : "warning",
				cmp_diag_code_str(d->d[i].code), d->d[i].byte, d->d[i].bit);
			cmp_json_str(out, d->d[i].field);
			fputs(", \"text\": ", out);
			cmp_json_str(out, d->d[i].text);
			fputc('}', out);
		}
		fputc(']', out);
		return;
	}
	for (unsigned i = 0; i < d->n; i++)
		fprintf(out, "    %s: %s\n", d->d[i].sev == CMP_DIAG_ERROR ? "error" : "warning",
			d->d[i].text);
	if (d->total > d->n)
		fprintf(out, "    (%u more)\n", d->total - d->n);
}

static void print_meta(const struct um_frame_meta *m, FILE *out)
{
	char s[64], d[64];

	if (m->link == UM_LINK_IB) {
		fprintf(out, "  LRH: slid %u dlid %u sl %u vl %u%s\n", m->slid, m->dlid, m->sl,
			m->vl, m->has_grh ? " (GRH)" : "");
		if (m->has_grh)
			fprintf(out, "  GRH: sgid %s dgid %s tclass %u flow %u hop %u\n",
				cmp_gid_str(m->sgid, s, sizeof(s)), cmp_gid_str(m->dgid, d, sizeof(d)),
				m->tclass, m->flow_label, m->hop_limit);
	} else {
		fprintf(out, "  %s: %s -> %s tclass %u hop %u udp sport %u\n",
			m->ipv6 ? "IPv6" : "IPv4", endpoint(m, 1, s, sizeof(s)),
			endpoint(m, 0, d, sizeof(d)), m->tclass, m->hop_limit, m->udp_sport);
	}
	fprintf(out, "  BTH: opcode 0x%02x pkey 0x%04x dest_qp %u psn %u; DETH: qkey 0x%08x src_qp %u; ICRC %s",
		m->opcode, m->pkey, m->dest_qp, m->psn, m->qkey, m->src_qp,
		m->icrc_ok ? "ok" : "BAD");
	if (m->link == UM_LINK_IB)
		fprintf(out, ", VCRC %s", m->vcrc_ok < 0 ? "not captured" : m->vcrc_ok ? "ok" : "BAD");
	fputc('\n', out);
}

/* What print_mad made of a MAD, for the closing statistics. */
enum mad_verdict { MAD_OK, MAD_MALFORMED, MAD_NOT_DECODED };

static enum mad_verdict print_mad(const struct um_pcap_mad *p, double t, const struct opts *o,
				  FILE *out)
{
	const uint8_t *mad = p->mad;
	struct cmp_mad_hdr hdr;
	struct cmp_diags d;
	struct cmp_cm_msg cm;
	struct um_sa_msg sa;
	char src[80], dst[80];
	int is_cm = 0, is_sa = 0, rc = 0;
	const char *attr = "attr?";

	cmp_diags_init(&d);
	cmp_layout_decode(&cmp_mad_hdr_layout, mad, &hdr);
	if (hdr.mgmt_class == UMAD_CLASS_CM) {
		is_cm = 1;
		rc = cmp_cm_decode(mad, UM_MAD_SIZE, &cm, &d);
		attr = cmp_cm_attr_str(hdr.attr_id);
	} else if (hdr.mgmt_class == UMAD_CLASS_SUBN_ADM) {
		is_sa = 1;
		rc = um_sa_decode(mad, UM_MAD_SIZE, &sa, &d);
		attr = um_sa_attr_str(hdr.attr_id);
	} else {
		rc = cmp_mad_hdr_decode(mad, UM_MAD_SIZE, &hdr, &d);
	}
	endpoint(&p->meta, 1, src, sizeof(src));
	endpoint(&p->meta, 0, dst, sizeof(dst));
	/* An attribute the codecs have no table for is not a malformed MAD. */
	enum mad_verdict verdict = !d.errors ? MAD_OK
				   : d.d[0].code == CMP_E_ATTR ? MAD_NOT_DECODED : MAD_MALFORMED;

	if (o->json) {
		fprintf(out, "{\"frame\": %" PRIu64 ", \"time\": %.9f, \"link\": \"%s\", \"src\": ",
			p->frame_no, t, p->meta.link == UM_LINK_IB ? "ib" : "rocev2");
		cmp_json_str(out, src);
		fputs(", \"dst\": ", out);
		cmp_json_str(out, dst);
		fprintf(out, ", \"slid\": %u, \"dlid\": %u, \"src_qp\": %u, \"dest_qp\": %u, "
			     "\"qkey\": %u, \"pkey\": %u, \"icrc_ok\": %s, \"class\": \"%s\", "
			     "\"method\": \"%s\", \"attr\": \"%s\", \"valid\": %s, ",
			p->meta.slid, p->meta.dlid, p->meta.src_qp, p->meta.dest_qp, p->meta.qkey,
			p->meta.pkey, p->meta.icrc_ok ? "true" : "false",
			cmp_mad_class_str(hdr.mgmt_class), cmp_mad_method_str(hdr.mgmt_class, hdr.method),
			attr, rc == 0 ? "true" : "false");
		if (is_cm)
			cmp_cm_json(&cm, out);
		else if (is_sa)
			um_sa_json(&sa, out);
		else {
			fputs("\"hdr\": {", out);
			cmp_layout_json(&cmp_mad_hdr_layout, &hdr, out);
			fputc('}', out);
		}
		print_diags(&d, out, 1);
		fputs("}\n", out);
		return verdict;
	}

	fprintf(out, "%5" PRIu64 " %12.6f %s -> %s %s %s %s(0x%04x) tid 0x%016" PRIx64,
		p->frame_no, t, src, dst, cmp_mad_class_str(hdr.mgmt_class),
		cmp_mad_method_str(hdr.mgmt_class, hdr.method), attr, hdr.attr_id, hdr.tid);
	if (is_cm && d.errors == 0)
		cm_summary(&cm, out);
	if (is_sa && d.errors == 0)
		um_sa_summary(&sa, out);
	if (verdict == MAD_NOT_DECODED)
		fprintf(out, " [not decoded: %s]", d.d[0].text);
	else if (verdict == MAD_MALFORMED)
		fprintf(out, " [malformed: %s]", d.d[0].text);
	else if (d.total)
		fprintf(out, " [%u warning%s]", d.total, d.total > 1 ? "s" : "");
	if (!p->meta.icrc_ok)
		fputs(" [bad ICRC]", out);
	fputc('\n', out);
	if (!o->verbose)
		return verdict;
	print_meta(&p->meta, out);
	if (is_cm)
		cmp_cm_print(&cm, out, 2);
	else if (is_sa)
		um_sa_print(&sa, out, 2);
	else {
		fprintf(out, "  MAD header:\n");
		cmp_layout_print(&cmp_mad_hdr_layout, &hdr, out, 4);
	}
	print_diags(&d, out, 0);
	return verdict;
}

/* --ladder / --ladder-svg: read everything, then draw. Exit status as for
 * the list (1: the file is truncated or corrupt; what was read is drawn). */
static int ladder_main(const char *path, const struct opts *o)
{
	struct um_pcap_reader *r;
	struct um_pcap_mad p;
	struct ladder *l;
	char err[256];
	int rc, st = 0;

	r = um_pcap_open_read(path, err, sizeof(err));
	if (!r) {
		fprintf(stderr, "uscm-decode: %s\n", err);
		return 1;
	}
	l = ladder_new((uint64_t)(o->gap_ms * 1e6), o->abs_time);
	if (!l) {
		um_pcap_close_read(r);
		fprintf(stderr, "uscm-decode: out of memory\n");
		return 1;
	}
	while ((rc = um_pcap_next(r, &p)) == 1) {
		if (ladder_add(l, &p) < 0) {
			fprintf(stderr, "uscm-decode: out of memory\n");
			st = 1;
			break;
		}
	}
	if (rc < 0) {
		fprintf(stderr, "uscm-decode: %s\n", um_pcap_error(r));
		st = 1;
	}
	if (ladder_build(l) < 0) {
		fprintf(stderr, "uscm-decode: out of memory\n");
		st = 1;
	} else {
		if (o->ladder)
			ladder_text(l, stdout);
		if (o->ladder_svg) {
			FILE *f = strcmp(o->ladder_svg, "-") ? fopen(o->ladder_svg, "w") : stdout;

			if (!f) {
				fprintf(stderr, "uscm-decode: %s: %s\n", o->ladder_svg, strerror(errno));
				st = 1;
			} else {
				ladder_svg(l, f);
				if ((f != stdout && fclose(f) != 0) || (f == stdout && fflush(f) != 0)) {
					fprintf(stderr, "uscm-decode: %s: write error\n", o->ladder_svg);
					st = 1;
				}
			}
		}
	}
	ladder_free(l);
	um_pcap_close_read(r);
	return st;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		{ "abs-time", no_argument, NULL, 'a' },
		{ "ladder", no_argument, NULL, 'L' },
		{ "ladder-svg", required_argument, NULL, 'S' },
		{ "gap", required_argument, NULL, 'g' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct opts o = { 0 };
	struct um_pcap_reader *r;
	struct um_pcap_mad p;
	char err[256];
	uint64_t t0 = 0;
	unsigned long verdicts[3] = { 0 };
	int c, rc, first = 1;

	while ((c = getopt_long(argc, argv, "vh", lopts, NULL)) != -1) {
		switch (c) {
		case 'v': o.verbose = 1; break;
		case 'j': o.json = 1; break;
		case 'a': o.abs_time = 1; break;
		case 'L': o.ladder = 1; break;
		case 'S': o.ladder_svg = optarg; break;
		case 'g': {
			char *end;
			o.gap_ms = strtod(optarg, &end);
			if (*end || !(o.gap_ms > 0)) {
				fprintf(stderr, "uscm-decode: --gap wants a positive number of ms\n");
				return 2;
			}
			break;
		}
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc - 1 || ((o.ladder || o.ladder_svg) && (o.json || o.verbose))) {
		usage(stderr);
		return 2;
	}
	if (o.ladder || o.ladder_svg)
		return ladder_main(argv[optind], &o);
	r = um_pcap_open_read(argv[optind], err, sizeof(err));
	if (!r) {
		fprintf(stderr, "uscm-decode: %s\n", err);
		return 1;
	}
	while ((rc = um_pcap_next(r, &p)) == 1) {
		if (first) {
			t0 = p.meta.ts_ns;
			first = 0;
		}
		double t = o.abs_time ? (double)p.meta.ts_ns / 1e9
				      : (double)(int64_t)(p.meta.ts_ns - t0) / 1e9;
		verdicts[print_mad(&p, t, &o, stdout)]++;
	}
	const struct um_pcap_stats *s = um_pcap_stats(r);
	/* "malformed" counts frames too broken to hold a MAD; MADs that fail
	 * to decode and attributes uscm has no table for are counted after. */
	fprintf(stderr, "uscm-decode: %" PRIu64 " frames, %" PRIu64 " MADs, %" PRIu64
			" skipped (not MADs), %" PRIu64 " malformed, %" PRIu64 " bad ICRC; "
			"%lu malformed MADs, %lu MADs not decoded\n",
		s->frames, s->mads, s->skipped, s->malformed, s->bad_icrc,
		verdicts[MAD_MALFORMED], verdicts[MAD_NOT_DECODED]);
	if (rc < 0)
		fprintf(stderr, "uscm-decode: %s\n", um_pcap_error(r));
	um_pcap_close_read(r);
	return rc < 0 ? 1 : 0;
}
