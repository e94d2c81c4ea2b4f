/*
 * replay_diff.c - the difference list, the chosen-value map and the
 * table-driven comparison of two CM MADs.
 */
#include "tools/replay_diff.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_cma.h"

const char *rp_diff_kind_str(enum rp_diff_kind k)
{
	static const char *const n[RP_D_KINDS] = {
		[RP_D_FIELD] = "field",       [RP_D_TIMING] = "timing",
		[RP_D_MISSING] = "missing",   [RP_D_EXTRA] = "extra",
		[RP_D_MAPPING] = "mapping",   [RP_D_SERVICE] = "service",
		[RP_D_UNDECODED] = "undecoded", [RP_D_ACTION] = "action",
		[RP_D_CRASH] = "crash",       [RP_D_HANG] = "hang",
		[RP_D_LEAK] = "leak",         [RP_D_ACCEPTED] = "accepted",
		[RP_D_DUPLICATE] = "duplicate",
	};
	return (unsigned)k < RP_D_KINDS ? n[k] : "?";
}

int rp_diff_explained(enum rp_diff_kind k)
{
	return k == RP_D_DUPLICATE;
}

size_t rp_report_unexplained(const struct rp_report *r)
{
	size_t n = 0;
	for (int k = 0; k < RP_D_KINDS; k++)
		if (!rp_diff_explained((enum rp_diff_kind)k))
			n += r->counts[k];
	return n;
}

void rp_report_init(struct rp_report *r, uint64_t t0)
{
	memset(r, 0, sizeof(*r));
	r->t0 = t0;
}

void rp_report_free(struct rp_report *r)
{
	free(r->d);
	memset(r, 0, sizeof(*r));
}

struct rp_diff *rp_report_add(struct rp_report *r, enum rp_diff_kind k, uint64_t frame,
			      uint16_t attr, const char *field, const char *fmt, ...)
{
	static struct rp_diff sink; /* out of memory: counted, not listed */
	struct rp_diff *d = &sink;
	va_list ap;

	r->counts[k]++;
	if (r->n == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 16;
		struct rp_diff *nd = realloc(r->d, nc * sizeof(*nd));
		if (nd) {
			r->d = nd;
			r->cap = nc;
		}
	}
	if (r->n < r->cap)
		d = &r->d[r->n++];
	memset(d, 0, sizeof(*d));
	d->kind = k;
	d->frame = frame;
	snprintf(d->msg, sizeof(d->msg), "%s", attr ? cmp_cm_attr_str(attr) : "-");
	snprintf(d->field, sizeof(d->field), "%s", field ? field : "");
	va_start(ap, fmt);
	vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
	va_end(ap);
	return d;
}

void rp_report_from_trace(struct rp_report *r, uint16_t attr, const char *fields)
{
	const char *msg = cmp_cm_attr_str(attr);

	while (*fields) {
		size_t len = strcspn(fields, " ");
		char one[48];
		size_t i;

		snprintf(one, sizeof(one), "%s.%.*s", msg, (int)len, fields);
		for (i = 0; i < r->nfrom && strcmp(r->from_trace[i], one); i++)
			;
		if (len && i == r->nfrom && r->nfrom < RP_FROM_MAX)
			memcpy(r->from_trace[r->nfrom++], one, sizeof(one));
		fields += len;
		fields += strspn(fields, " ");
	}
}

static double rel(const struct rp_report *r, uint64_t t)
{
	return t ? (double)(int64_t)(t - r->t0) / 1e9 : 0.0;
}

void rp_report_print(const struct rp_report *r, FILE *out, const char *who)
{
	for (size_t i = 0; i < r->n; i++) {
		const struct rp_diff *d = &r->d[i];
		fprintf(out, "%-9s frame %-5" PRIu64 " %-8s", rp_diff_kind_str(d->kind), d->frame,
			d->msg);
		if (d->field[0])
			fprintf(out, " %s: trace %s, %s %s", d->field, d->trace_val, who, d->peer_val);
		if (d->t_trace && d->t_peer)
			fprintf(out, " (trace t=%.6f, %s t=%.6f)", rel(r, d->t_trace), who,
				rel(r, d->t_peer));
		else if (d->t_trace)
			fprintf(out, " (trace t=%.6f)", rel(r, d->t_trace));
		else if (d->t_peer)
			fprintf(out, " (%s t=%.6f)", who, rel(r, d->t_peer));
		if (d->reason[0])
			fprintf(out, " - %s", d->reason);
		fputc('\n', out);
	}
	size_t total = 0;
	for (int k = 0; k < RP_D_KINDS; k++)
		total += r->counts[k];
	fprintf(out, "%zu difference%s", total, total == 1 ? "" : "s");
	if (total != rp_report_unexplained(r))
		fprintf(out, " (%zu unexplained)", rp_report_unexplained(r));
	for (int k = 0; k < RP_D_KINDS; k++)
		if (r->counts[k])
			fprintf(out, ", %s %u", rp_diff_kind_str((enum rp_diff_kind)k), r->counts[k]);
	fputc('\n', out);
	if (r->nfrom) {
		fputs("taken from the trace (S's inputs, not checked):", out);
		for (size_t i = 0; i < r->nfrom; i++)
			fprintf(out, " %s", r->from_trace[i]);
		fputc('\n', out);
	}
}

void rp_report_json(const struct rp_report *r, FILE *out, const char *mode, const char *side)
{
	fputs("{\"mode\": ", out);
	cmp_json_str(out, mode);
	fputs(", \"side\": ", out);
	cmp_json_str(out, side);
	fputs(", \"counts\": {", out);
	for (int k = 0, first = 1; k < RP_D_KINDS; k++) {
		fprintf(out, "%s\"%s\": %u", first ? "" : ", ", rp_diff_kind_str((enum rp_diff_kind)k),
			r->counts[k]);
		first = 0;
	}
	fprintf(out, "}, \"unexplained\": %zu, \"differences\": [", rp_report_unexplained(r));
	for (size_t i = 0; i < r->n; i++) {
		const struct rp_diff *d = &r->d[i];
		fprintf(out, "%s{\"kind\": \"%s\", \"frame\": %" PRIu64 ", \"msg\": ", i ? ", " : "",
			rp_diff_kind_str(d->kind), d->frame);
		cmp_json_str(out, d->msg);
		fputs(", \"field\": ", out);
		cmp_json_str(out, d->field);
		fputs(", \"trace\": ", out);
		cmp_json_str(out, d->trace_val);
		fputs(", \"peer\": ", out);
		cmp_json_str(out, d->peer_val);
		fprintf(out, ", \"t_trace\": %.9f, \"t_peer\": %.9f, \"reason\": ", rel(r, d->t_trace),
			rel(r, d->t_peer));
		cmp_json_str(out, d->reason);
		fputc('}', out);
	}
	fputs("], \"from_trace\": [", out);
	for (size_t i = 0; i < r->nfrom; i++) {
		fputs(i ? ", " : "", out);
		cmp_json_str(out, r->from_trace[i]);
	}
	fputs("]}\n", out);
}

/* ---- map ----------------------------------------------------------------------- */

void rp_map_free(struct rp_map *m)
{
	for (int k = 0; k < RP_M_KINDS; k++)
		free(m->p[k]);
	memset(m, 0, sizeof(*m));
}

int rp_map_to_peer(const struct rp_map *m, enum rp_map_kind k, uint64_t trace, uint64_t *out)
{
	for (size_t i = 0; i < m->n[k]; i++)
		if (m->p[k][i].trace == trace) {
			*out = m->p[k][i].peer;
			return 1;
		}
	return 0;
}

int rp_map_to_trace(const struct rp_map *m, enum rp_map_kind k, uint64_t peer, uint64_t *out)
{
	for (size_t i = 0; i < m->n[k]; i++)
		if (m->p[k][i].peer == peer) {
			*out = m->p[k][i].trace;
			return 1;
		}
	return 0;
}

int rp_map_learn(struct rp_map *m, enum rp_map_kind k, uint64_t peer, uint64_t trace)
{
	uint64_t v;
	int a = rp_map_to_trace(m, k, peer, &v), b;

	if (a && v == trace)
		return 0;
	if (k != RP_M_TID) {
		if (a)
			return -1;
		b = rp_map_to_peer(m, k, trace, &v);
		if (b && v != peer)
			return -1;
	}
	if (m->n[k] == m->cap[k]) {
		size_t nc = m->cap[k] ? m->cap[k] * 2 : 16;
		void *np = realloc(m->p[k], nc * sizeof(*m->p[k]));
		if (!np)
			return 0; /* not remembered: later uses re-learn */
		m->p[k] = np;
		m->cap[k] = nc;
	}
	m->p[k][m->n[k]].peer = peer;
	m->p[k][m->n[k]].trace = trace;
	m->n[k]++;
	return 0;
}

/* ---- comparison ------------------------------------------------------------------ */

static void fmt_field(const struct cmp_field *f, const uint8_t *data, char *buf, size_t len)
{
	if (f->kind == CMP_K_GID) {
		cmp_gid_str(data + f->byte, buf, len);
		return;
	}
	if (f->kind == CMP_K_BYTES) {
		size_t n = f->width / 8, end = n, o = 0;
		while (end && !data[f->byte + end - 1])
			end--;
		if (!end) {
			snprintf(buf, len, "(zeros)");
			return;
		}
		for (size_t i = 0; i < end && o + 4 < len; i++)
			o += (size_t)snprintf(buf + o, len - o, "%02x", data[f->byte + i]);
		if (o + 4 >= len)
			snprintf(buf + len - 4, 4, "...");
		return;
	}
	snprintf(buf, len, "0x%" PRIx64, cmp_bits_get(data, f->byte, f->bit, f->width));
}

static int field_equal(const struct cmp_field *f, const uint8_t *a, const uint8_t *b)
{
	if (f->kind == CMP_K_GID || f->kind == CMP_K_BYTES)
		return !memcmp(a + f->byte, b + f->byte, f->width / 8);
	return cmp_bits_get(a, f->byte, f->bit, f->width) ==
	       cmp_bits_get(b, f->byte, f->bit, f->width);
}

/* Which map a field of the sender's own message goes through, or -1 when
 * it must be reproduced exactly. */
static int chosen(uint16_t attr, const char *name)
{
	if (!strcmp(name, "local_comm_id") || (attr == UMAD_CM_ATTR_SIDR_REQ &&
					       !strcmp(name, "request_id")))
		return RP_M_COMM_ID;
	if (attr == UMAD_CM_ATTR_REQ || attr == UMAD_CM_ATTR_REP) {
		if (!strcmp(name, "local_ca_guid"))
			return RP_M_CA_GUID;
		if (!strcmp(name, "local_qpn"))
			return RP_M_QPN;
		if (!strcmp(name, "starting_psn"))
			return RP_M_PSN;
	}
	if (attr == UMAD_CM_ATTR_SIDR_REP && !strcmp(name, "qpn"))
		return RP_M_QPN;
	return -1;
}

/* Why a field can differ, for the fields whose value depends on more than
 * the protocol (docs/replay.md lists them). */
static const char *hint(uint16_t attr, const struct cmp_field *f)
{
	if (f->kind == CMP_K_RSVD)
		return "reserved bits: a sender must write zero";
	if (!strcmp(f->name, "target_ack_delay"))
		return "S's CA ACK delay (a device property: --ca-ack-delay)";
	if (strstr(f->name, "local_ack_timeout"))
		return "from S's CA ACK delay and the path lifetime (--ca-ack-delay, "
		       "--packet-life-time)";
	if (attr == UMAD_CM_ATTR_REQ && !strncmp(f->name, "primary_", 8))
		return "the path uscm builds for S's inputs (RoCE: lib/cma_addr.c's roce_path "
		       "for the addresses, ports and ToS; the trace's fields where listed as taken)";
	if (!strcmp(f->name, "service_timeout"))
		return "S's MRA service timeout (a CM setting)";
	if (!strcmp(f->name, "private_data") || !strcmp(f->name, "ari") ||
	    !strcmp(f->name, "additional_info"))
		return "bytes S's user or CM wrote: the engine sends what the protocol and the "
		       "inferred user call give";
	if (attr == UMAD_CM_ATTR_REJ && !strcmp(f->name, "reason"))
		return "a different reject reason for the same situation";
	if (!strcmp(f->name, "responder_resources") || !strcmp(f->name, "initiator_depth"))
		return "the engine never promises more than the REQ asked for";
	return "the engine sends another value for the same inputs";
}

static unsigned diff_field(struct rp_report *r, uint64_t frame, uint16_t attr,
			   const struct cmp_field *f, const uint8_t *pd, const uint8_t *td,
			   const char *why)
{
	char name[48];
	struct rp_diff *d;

	snprintf(name, sizeof(name), "%s", f->name);
	d = rp_report_add(r, RP_D_FIELD, frame, attr, name, "%s", why);
	fmt_field(f, td, d->trace_val, sizeof(d->trace_val));
	fmt_field(f, pd, d->peer_val, sizeof(d->peer_val));
	return 1;
}

unsigned rp_compare(struct rp_report *r, struct rp_map *map, const uint8_t *peer,
		    const uint8_t *trace, uint64_t frame)
{
	const struct cmp_layout *hl = &cmp_mad_hdr_layout;
	uint16_t attr = (uint16_t)cmp_bits_get(trace, 16, 0, 16);
	const struct cmp_layout *l = cmp_cm_layout(attr);
	const uint8_t *pd = peer + CMP_MAD_HDR_SIZE, *td = trace + CMP_MAD_HDR_SIZE;
	unsigned n = 0;

	for (size_t i = 0; i < hl->nfields; i++) {
		const struct cmp_field *f = &hl->fields[i];
		if (field_equal(f, peer, trace))
			continue;
		if (!strcmp(f->name, "tid")) {
			rp_map_learn(map, RP_M_TID, cmp_bits_get(peer, 8, 0, 64),
				     cmp_bits_get(trace, 8, 0, 64));
			continue;
		}
		n += diff_field(r, frame, attr, f, peer, trace, "MAD header field");
	}
	if (!l)
		return n;
	int rej_timeout = attr == UMAD_CM_ATTR_REJ && cmp_bits_get(td, 10, 0, 16) == 1;
	enum cmp_ps ps;
	uint16_t port;
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		int k = chosen(attr, f->name);

		if (k >= 0) {
			uint64_t pv = cmp_bits_get(pd, f->byte, f->bit, f->width);
			uint64_t tv = cmp_bits_get(td, f->byte, f->bit, f->width);
			if (rp_map_learn(map, (enum rp_map_kind)k, pv, tv) < 0)
				n += diff_field(r, frame, attr, f, pd, td,
						"chosen value maps inconsistently with an earlier message");
			continue;
		}
		/* REJ(Timeout) carries the sender's CA GUID as its ARI. */
		if (rej_timeout && !strcmp(f->name, "ari")) {
			uint64_t pv = cmp_bits_get(pd, f->byte, 0, 64);
			uint64_t tv = cmp_bits_get(td, f->byte, 0, 64);
			if (rp_map_learn(map, RP_M_CA_GUID, pv, tv) < 0)
				n += diff_field(r, frame, attr, f, pd, td,
						"ARI (CA GUID) maps inconsistently");
			if (memcmp(pd + f->byte + 8, td + f->byte + 8, f->width / 8 - 8))
				n += diff_field(r, frame, attr, f, pd, td, "ARI after the CA GUID");
			continue;
		}
		/* An rdma_cm REQ's private data starts with the CMA header, whose
		 * source port the active side picks (an ephemeral port). */
		if (attr == UMAD_CM_ATTR_REQ && !strcmp(f->name, "private_data") &&
		    cmp_sid_split(cmp_bits_get(td, 8, 0, 64), &ps, &port) == 0 &&
		    td[f->byte] == CMP_CMA_VERSION && pd[f->byte] == CMP_CMA_VERSION) {
			uint64_t pv = cmp_bits_get(pd, f->byte + 2, 0, 16);
			uint64_t tv = cmp_bits_get(td, f->byte + 2, 0, 16);
			if (rp_map_learn(map, RP_M_PORT, pv, tv) < 0)
				n += diff_field(r, frame, attr, f, pd, td,
						"CMA header source port maps inconsistently");
			if (memcmp(pd + f->byte, td + f->byte, 2) ||
			    memcmp(pd + f->byte + 4, td + f->byte + 4, f->width / 8 - 4))
				n += diff_field(r, frame, attr, f, pd, td, hint(attr, f));
			continue;
		}
		if (field_equal(f, pd, td))
			continue;
		n += diff_field(r, frame, attr, f, pd, td, hint(attr, f));
	}
	return n;
}
