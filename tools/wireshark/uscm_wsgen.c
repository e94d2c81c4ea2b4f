/*
 * uscm-wsgen - writes uscm's Wireshark Lua dissector (uscm_cm.lua) from the
 * very row lists the uscm codecs are built from: cmp_mad_hdr_layout (MAD
 * header, CMP_MAD_HDR_FIELDS), cmp_cm_layout() for every attribute of
 * cmp_cm_attrs[] (CMP_REQ_FIELDS ... CMP_SIDR_REP_FIELDS, ClassPortInfo) and
 * cmp_cma_hdr_layout (CMP_CMA_HDR_FIELDS). Nothing about a wire structure is
 * written by hand here: each row becomes one ProtoField (the container
 * integer and mask computed from byte / bit / width) and one entry of the
 * Lua row table the dissector walks. The few facts that are not in the row
 * lists come from the same C code uscm-decode uses: message names
 * (cmp_cm_attr_str), method names (cmp_mad_method_str), REJ reasons
 * (cmp_cm_rej_reason_str), port spaces (cmp_sid_split / cmp_ps_str).
 *
 *   uscm-wsgen [OUT.lua]      (stdout without an argument)
 *
 * The build writes build/tools/wireshark/uscm_cm.lua; the copy committed as
 * tools/wireshark/uscm_cm.lua must be identical (test_wireshark_lua checks),
 * so the plugin cannot drift from the tables. docs/capture.md explains the
 * plugin.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cm_proto/cmp_cm.h"
#include "cm_proto/cmp_cma.h"

#define PROTO "uscm_cm"

/* The Lua key of a layout: its name in lower case ("REQ" -> "req",
 * "ClassPortInfo" -> "classportinfo"), also the field name prefix. */
static const char *layout_key(const char *name, char *buf, size_t len)
{
	size_t i;

	for (i = 0; name[i] && i + 1 < len; i++)
		buf[i] = (char)tolower((unsigned char)name[i]);
	buf[i] = 0;
	return buf;
}

/* A row's field name: reserved rows lose their leading '_' ("_rsvd4" ->
 * "rsvd4"): Wireshark field names are made of letters, digits, '-', '_'
 * and '.', and a leading '_' reads badly in a filter. */
static const char *row_name(const struct cmp_field *f)
{
	return f->name[0] == '_' ? f->name + 1 : f->name;
}

/* Byte span of a row: from its first byte to the byte holding its last bit. */
static unsigned row_len(const struct cmp_field *f)
{
	return (f->bit + f->width + 7u) / 8u;
}

/* Which value-string table (emitted below) a row's values are named by. */
static const char *row_vals(const char *key, const struct cmp_field *f)
{
	if (!strcmp(key, "hdr") && !strcmp(f->name, "method"))
		return "vs_method";
	if (!strcmp(key, "hdr") && !strcmp(f->name, "attr_id"))
		return "vs_attr";
	if (!strcmp(key, "rej") && !strcmp(f->name, "reason"))
		return "vs_rej_reason";
	return NULL;
}

/* Emits `F["key.row"] = ProtoField...` for row f of layout key. Returns 0,
 * or -1 when a row has a shape no Wireshark integer field can show (the
 * build then fails, which is the point). */
static int emit_field(FILE *out, const char *key, const struct cmp_field *f)
{
	static const char *const uint_of_len[] = { NULL, "uint8", "uint16", "uint24", "uint32" };
	unsigned len = row_len(f), shift;
	const char *vs = row_vals(key, f);
	const char *label = f->kind == CMP_K_RSVD ? "reserved" : f->name;
	unsigned long long mask;

	fprintf(out, "F[\"%s.%s\"] = ", key, row_name(f));
	switch (f->kind) {
	case CMP_K_GID:
		fprintf(out, "ProtoField.ipv6(\"" PROTO ".%s.%s\", \"%s\")\n", key, row_name(f),
			label);
		return 0;
	case CMP_K_BYTES:
		fprintf(out, "ProtoField.bytes(\"" PROTO ".%s.%s\", \"%s\")\n", key, row_name(f),
			label);
		return 0;
	default:
		break;
	}
	/* U8..U64 and reserved rows: the integer that spans the row's bytes,
	 * masked when the row does not fill it. */
	if (f->kind == CMP_K_RSVD && f->width > 32) {
		if (f->bit || f->width % 8) {
			fprintf(stderr, "uscm-wsgen: %s.%s: a reserved run over 32 bits must be "
					"whole bytes\n", key, f->name);
			return -1;
		}
		fprintf(out, "ProtoField.bytes(\"" PROTO ".%s.%s\", \"%s\")\n", key, row_name(f),
			label);
		return 0;
	}
	if (len > 4) {
		if (len != 8 || f->bit || f->width != 64) {
			fprintf(stderr, "uscm-wsgen: %s.%s: %u bits at bit %u do not make a "
					"Wireshark integer\n", key, f->name, f->width, f->bit);
			return -1;
		}
		fprintf(out, "ProtoField.uint64(\"" PROTO ".%s.%s\", \"%s\", base.HEX%s%s)\n", key,
			row_name(f), label, vs ? ", " : "", vs ? vs : "");
		return 0;
	}
	shift = len * 8u - f->bit - f->width;
	mask = f->width == len * 8u ? 0 : ((1ULL << f->width) - 1) << shift;
	fprintf(out, "ProtoField.%s(\"" PROTO ".%s.%s\", \"%s\", base.%s, %s", uint_of_len[len],
		key, row_name(f), label, f->width >= 24 ? "HEX" : "DEC", vs ? vs : "nil");
	if (mask)
		fprintf(out, ", 0x%llx", mask);
	fputs(")\n", out);
	return 0;
}

static const char *kind_str(uint8_t kind)
{
	switch (kind) {
	case CMP_K_U8: return "U8";
	case CMP_K_U16: return "U16";
	case CMP_K_U32: return "U32";
	case CMP_K_U64: return "U64";
	case CMP_K_GID: return "GID";
	case CMP_K_BYTES: return "BYTES";
	default: return "RSVD";
	}
}

/* A row list whose name ends in _h, _m, _l (the ECE VendorID split over
 * REP / SIDR_REP bytes) is also shown whole, as one generated field made of
 * the parts high to low: its name without the suffix. Returns how many
 * parts layout l has for base name `base` (written to parts[]). */
static unsigned split_parts(const struct cmp_layout *l, const char *base,
			    const struct cmp_field *parts[3])
{
	static const char *const sfx[] = { "_h", "_m", "_l" };
	unsigned n = 0;
	char name[64];

	for (unsigned s = 0; s < 3; s++) {
		snprintf(name, sizeof(name), "%s%s", base, sfx[s]);
		const struct cmp_field *f = cmp_layout_find(l, name);
		if (f)
			parts[n++] = f;
	}
	return n;
}

/* Emits L.key = { ... } for layout l at MAD offset `off` (0 for the header,
 * 24 for the attribute data; the CMA header's offset is relative to the
 * private data). Split fields are gathered from the rows themselves. */
static int emit_layout(FILE *out, const char *key, const struct cmp_layout *l, unsigned off,
		       uint16_t attr)
{
	char bases[8][48];
	unsigned nbases = 0;

	fprintf(out, "\n-- %s: %zu rows of %u bytes\n", l->name, l->nfields, l->len);
	fprintf(out, "F[\"%s\"] = ProtoField.none(\"" PROTO ".%s\", \"%s\")\n", key, key, l->name);
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];
		size_t n = strlen(f->name);

		if (emit_field(out, key, f))
			return -1;
		if (f->kind != CMP_K_RSVD && n > 2 && f->name[n - 2] == '_' &&
		    strchr("hml", f->name[n - 1])) {
			char base[48];
			int seen = 0;

			snprintf(base, sizeof(base), "%.*s", (int)(n - 2), f->name);
			for (unsigned b = 0; b < nbases; b++)
				seen |= !strcmp(bases[b], base);
			if (!seen && nbases < 8)
				snprintf(bases[nbases++], sizeof(bases[0]), "%s", base);
		}
	}
	for (unsigned b = 0; b < nbases; b++) {
		const struct cmp_field *parts[3];
		unsigned n = split_parts(l, bases[b], parts), w = 0;

		for (unsigned p = 0; p < n; p++)
			w += parts[p]->width;
		if (n < 2 || w > 32) {
			fprintf(stderr, "uscm-wsgen: %s.%s: %u parts, %u bits: not a split field\n",
				key, bases[b], n, w);
			return -1;
		}
		fprintf(out, "F[\"%s.%s\"] = ProtoField.uint32(\"" PROTO ".%s.%s\", \"%s\", "
			     "base.HEX)\n", key, bases[b], key, bases[b], bases[b]);
	}
	/* rdma_cm puts its CMA header in REQ and SIDR_REQ private data */
	fprintf(out, "L[\"%s\"] = { key = \"%s\", name = \"%s\", off = %u, len = %u, attr = %u, "
		     "cma = %s, rows = {\n", key, key, l->name, off, l->len, attr,
		attr == UMAD_CM_ATTR_REQ || attr == UMAD_CM_ATTR_SIDR_REQ ? "true" : "false");
	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];

		fprintf(out, "\t{ n = \"%s\", b = %u, bit = %u, w = %u, len = %u, k = \"%s\" },\n",
			row_name(f), f->byte, f->bit, f->width, row_len(f), kind_str(f->kind));
	}
	fputs("}, split = {\n", out);
	for (unsigned b = 0; b < nbases; b++) {
		const struct cmp_field *parts[3];
		unsigned n = split_parts(l, bases[b], parts);

		fprintf(out, "\t{ n = \"%s\", parts = {", bases[b]);
		for (unsigned p = 0; p < n; p++)
			fprintf(out, "%s\"%s\"", p ? ", " : " ", parts[p]->name);
		fputs(" } },\n", out);
	}
	fputs("} }\n", out);
	return 0;
}

/* ---- the hand-written part: the walker over L (no wire facts in it) ---- */

static const char lua_head[] =
	"-- uscm_cm.lua: uscm's Wireshark dissector for the InfiniBand CM (class 0x07):\n"
	"-- every CM message (ClassPortInfo, REQ, MRA, REJ, REP, RTU, DREQ, DREP,\n"
	"-- SIDR_REQ, SIDR_REP, LAP, APR), the ECE VendorID fields and the rdma_cm\n"
	"-- (CMA) private-data header, under the protocol \"" PROTO "\" next to\n"
	"-- Wireshark's own \"infiniband\" dissector.\n"
	"--\n"
	"-- GENERATED by uscm-wsgen (tools/wireshark/uscm_wsgen.c) from cm_proto's row\n"
	"-- lists, the ones uscm's encoder, decoder and uscm-decode are built from.\n"
	"-- Do not edit: change the tables, rebuild, copy build/tools/wireshark/uscm_cm.lua\n"
	"-- here (test_wireshark_lua fails while the two differ).\n"
	"--\n"
	"-- How it hooks in: a post-dissector. Wireshark's infiniband dissector (ERF\n"
	"-- type 21 native IB, RoCEv2 on UDP 4791, ...) has already found the MAD and\n"
	"-- marked it as the field infiniband.mad (the 256 MAD bytes); for every such\n"
	"-- MAD of a UD SEND (BTH opcode 0x64) with base version 1, management class\n"
	"-- 0x07 and class version 2 this adds an \"" PROTO "\" tree with every row of\n"
	"-- the message's table. Nothing of the infiniband dissector is replaced.\n"
	"--\n"
	"-- Use: tshark -X lua_script:uscm_cm.lua -r FILE -Y " PROTO "\n"
	"-- or copy it into a Wireshark plugin directory (docs/capture.md).\n"
	"\n"
	"local p = Proto(\"" PROTO "\", \"uscm InfiniBand CM (IBTA Vol1 ch.12)\")\n"
	"local F = {}\n"
	"local L = {}\n";

static const char lua_body[] =
	"\n"
	"F[\"message\"] = ProtoField.string(\"" PROTO ".message\", \"message\")\n"
	"F[\"cma.src_ip\"] = ProtoField.ipv4(\"" PROTO ".cma.src_ip\", \"source IPv4 address\")\n"
	"F[\"cma.dst_ip\"] = ProtoField.ipv4(\"" PROTO ".cma.dst_ip\", \"destination IPv4 address\")\n"
	"F[\"cma.port_space\"] = ProtoField.uint16(\"" PROTO ".cma.port_space\", \"port space (service ID)\", base.HEX, vs_ps)\n"
	"F[\"cma.dst_port\"] = ProtoField.uint16(\"" PROTO ".cma.dst_port\", \"destination port (service ID)\", base.DEC)\n"
	"\n"
	"local e_rsvd = ProtoExpert.new(\"" PROTO ".reserved_not_zero\", \"reserved bits are not zero\",\n"
	"\texpert.group.PROTOCOL, expert.severity.WARN)\n"
	"local e_cma = ProtoExpert.new(\"" PROTO ".cma.bad\", \"IP port space service ID, but no valid CMA header\",\n"
	"\texpert.group.MALFORMED, expert.severity.WARN)\n"
	"local e_short = ProtoExpert.new(\"" PROTO ".short\", \"MAD shorter than 256 bytes\",\n"
	"\texpert.group.MALFORMED, expert.severity.ERROR)\n"
	"\n"
	"do\n"
	"\tlocal list = {}\n"
	"\tfor _, f in pairs(F) do list[#list + 1] = f end\n"
	"\tp.fields = list\n"
	"\tp.experts = { e_rsvd, e_cma, e_short }\n"
	"end\n"
	"\n"
	"local by_attr = {}\n"
	"for _, l in pairs(L) do if l.attr ~= 0 then by_attr[l.attr] = l end end\n"
	"\n"
	"local f_mad = Field.new(\"infiniband.mad\")\n"
	"local f_opcode = Field.new(\"infiniband.bth.opcode\")\n"
	"\n"
	"-- The integer value of a row (a number; a UInt64 above 32 bits).\n"
	"local function value(r, base)\n"
	"\treturn base:range(r.b, r.len):bitfield(r.bit, r.w)\n"
	"end\n"
	"\n"
	"local function is_zero(r, base)\n"
	"\tif r.w <= 32 then return value(r, base) == 0 end\n"
	"\tlocal bytes = base:range(r.b, r.len):bytes()\n"
	"\tfor i = 0, bytes:len() - 1 do\n"
	"\t\tif bytes:get_index(i) ~= 0 then return false end\n"
	"\tend\n"
	"\treturn true\n"
	"end\n"
	"\n"
	"-- Adds layout l's rows, read from range `base`, under `tree`; returns the\n"
	"-- subtree and the values of the named rows by name.\n"
	"local function add_layout(tree, l, base)\n"
	"\tlocal t = tree:add(F[l.key], base:range(0, l.len))\n"
	"\tlocal v = {}\n"
	"\tfor _, r in ipairs(l.rows) do\n"
	"\t\tlocal item = t:add(F[l.key .. \".\" .. r.n], base:range(r.b, r.len))\n"
	"\t\tif r.k == \"RSVD\" then\n"
	"\t\t\tif not is_zero(r, base) then item:add_proto_expert_info(e_rsvd) end\n"
	"\t\telseif r.k ~= \"GID\" and r.k ~= \"BYTES\" then\n"
	"\t\t\tv[r.n] = value(r, base)\n"
	"\t\tend\n"
	"\t\tv[r.n .. \"@\"] = r\n"
	"\tend\n"
	"\tfor _, s in ipairs(l.split) do\n"
	"\t\tlocal whole = 0\n"
	"\t\tfor _, part in ipairs(s.parts) do\n"
	"\t\t\tlocal r = v[part .. \"@\"]\n"
	"\t\t\twhole = whole * 2 ^ r.w + v[part]\n"
	"\t\tend\n"
	"\t\tlocal first = v[s.parts[1] .. \"@\"]\n"
	"\t\tt:add(F[l.key .. \".\" .. s.n], base:range(first.b, first.len), whole):set_generated()\n"
	"\tend\n"
	"\treturn t, v\n"
	"end\n"
	"\n"
	"-- The port space and port of an rdma_cm IP service ID, or nil.\n"
	"local function sid_split(sid)\n"
	"\tif sid:higher() ~= 0 then return nil end\n"
	"\tlocal lo = sid:lower()\n"
	"\tlocal ps = math.floor(lo / 65536)\n"
	"\tif not vs_ps[ps] then return nil end\n"
	"\treturn ps, lo % 65536\n"
	"end\n"
	"\n"
	"-- The CMA header leading the private data of an rdma_cm REQ / SIDR_REQ.\n"
	"local function add_cma(tree, l, v, mad)\n"
	"\tlocal sid_r, pd_r = v[\"service_id@\"], v[\"private_data@\"]\n"
	"\tif not l.cma or not sid_r or not pd_r then return end\n"
	"\tlocal ps, port = sid_split(v.service_id)\n"
	"\tif not ps then return end\n"
	"\tlocal pdata = mad:range(L.hdr.len + pd_r.b, pd_r.len)\n"
	"\tlocal c = L.cma\n"
	"\tlocal cv = {}\n"
	"\tfor _, r in ipairs(c.rows) do\n"
	"\t\tif r.k ~= \"GID\" and r.k ~= \"BYTES\" and r.k ~= \"RSVD\" then cv[r.n] = value(r, pdata) end\n"
	"\tend\n"
	"\tif cv.cma_version ~= CMA_VERSION or (cv.ip_version ~= 4 and cv.ip_version ~= 6) then\n"
	"\t\t-- AF_IB ids (the IB port space) carry no header; the others must.\n"
	"\t\tif ps ~= PS_IB then tree:add_proto_expert_info(e_cma) end\n"
	"\t\treturn\n"
	"\tend\n"
	"\tlocal t = add_layout(tree, c, pdata)\n"
	"\tlocal sid = mad:range(L.hdr.len + sid_r.b, sid_r.len)\n"
	"\tt:add(F[\"cma.port_space\"], sid:range(4, 2)):set_generated()\n"
	"\tt:add(F[\"cma.dst_port\"], sid:range(6, 2)):set_generated()\n"
	"\tif cv.ip_version == 4 then\n"
	"\t\tfor _, r in ipairs(c.rows) do\n"
	"\t\t\tif r.n == \"src_addr\" then t:add(F[\"cma.src_ip\"], pdata:range(r.b + 12, 4)):set_generated() end\n"
	"\t\t\tif r.n == \"dst_addr\" then t:add(F[\"cma.dst_ip\"], pdata:range(r.b + 12, 4)):set_generated() end\n"
	"\t\tend\n"
	"\tend\n"
	"\treturn t\n"
	"end\n"
	"\n"
	"function p.dissector(tvb, pinfo, tree)\n"
	"\tlocal mads = { f_mad() }\n"
	"\tif #mads == 0 then return end\n"
	"\tlocal ops = { f_opcode() }\n"
	"\tfor i, fi in ipairs(mads) do\n"
	"\t\t-- the MAD as the infiniband dissector found it, in its own data source\n"
	"\t\tlocal mad = fi.range\n"
	"\t\tlocal op = ops[i] and ops[i].value\n"
	"\t\tif op == UD_SEND_ONLY and fi.len >= 3 and\n"
	"\t\t   mad:range(0, 1):uint() == BASE_VERSION and mad:range(1, 1):uint() == CM_CLASS and\n"
	"\t\t   mad:range(2, 1):uint() == CM_CLASS_VERSION then\n"
	"\t\t\tlocal top = tree:add(p, mad)\n"
	"\t\t\tif fi.len < MAD_SIZE then\n"
	"\t\t\t\ttop:add_proto_expert_info(e_short)\n"
	"\t\t\telse\n"
	"\t\t\t\tmad = mad:range(0, MAD_SIZE)\n"
	"\t\t\t\tlocal _, h = add_layout(top, L.hdr, mad)\n"
	"\t\t\t\tlocal l = by_attr[h.attr_id]\n"
	"\t\t\t\tlocal name = vs_attr[h.attr_id] or string.format(\"attr 0x%04x\", h.attr_id)\n"
	"\t\t\t\ttop:add(F[\"message\"], mad:range(L.hdr.attr_id_b, 2), name):set_generated()\n"
	"\t\t\t\ttop:append_text(\", \" .. name)\n"
	"\t\t\t\tif l then\n"
	"\t\t\t\t\tlocal t, v = add_layout(top, l, mad:range(L.hdr.len, l.len))\n"
	"\t\t\t\t\tadd_cma(t, l, v, mad)\n"
	"\t\t\t\tend\n"
	"\t\t\t\tpinfo.cols.info:append(\" [" PROTO " \" .. name .. \"]\")\n"
	"\t\t\tend\n"
	"\t\tend\n"
	"\tend\n"
	"end\n"
	"\n"
	"register_postdissector(p)\n";

static void emit_vs(FILE *out, const char *name, const char *const *names, unsigned n)
{
	fprintf(out, "local %s = {\n", name);
	for (unsigned i = 0; i < n; i++)
		if (names[i])
			fprintf(out, "\t[0x%x] = \"%s\",\n", i, names[i]);
	fputs("}\n", out);
}

static int generate(FILE *out)
{
	static const char *vs[256];
	static const enum cmp_ps spaces[] = { CMP_PS_IPOIB, CMP_PS_TCP, CMP_PS_UDP, CMP_PS_IB };
	const struct cmp_field *attr_row = cmp_layout_find(&cmp_mad_hdr_layout, "attr_id");
	char key[64];

	if (!attr_row)
		return -1;
	fputs(lua_head, out);
	fprintf(out, "\nlocal MAD_SIZE = %d\nlocal BASE_VERSION = %d\nlocal CM_CLASS = 0x%02x\n"
		     "local CM_CLASS_VERSION = %d\nlocal UD_SEND_ONLY = 0x64\n"
		     "local CMA_VERSION = %d\nlocal PS_IB = 0x%04x\n\n",
		CMP_MAD_SIZE, UMAD_BASE_VERSION, UMAD_CLASS_CM, CMP_CM_CLASS_VERSION,
		CMP_CMA_VERSION, CMP_PS_IB);

	memset(vs, 0, sizeof(vs));
	for (unsigned m = 0; m < 256; m++) {
		const char *s = cmp_mad_method_str(UMAD_CLASS_CM, (uint8_t)m);
		vs[m] = strcmp(s, "method?") ? s : NULL;
	}
	emit_vs(out, "vs_method", vs, 256);
	fputs("local vs_attr = {\n", out);
	for (const uint16_t *a = cmp_cm_attrs; *a; a++)
		fprintf(out, "\t[0x%04x] = \"%s\",\n", *a, cmp_cm_attr_str(*a));
	fputs("}\n", out);
	memset(vs, 0, sizeof(vs));
	for (unsigned r = 0; r < 256; r++) {
		const char *s = cmp_cm_rej_reason_str((uint16_t)r);
		vs[r] = strcmp(s, "unknown reason") ? s : NULL;
	}
	emit_vs(out, "vs_rej_reason", vs, 256);
	fputs("local vs_ps = {\n", out);
	for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++) {
		enum cmp_ps ps;
		uint16_t port;

		/* The port space as cmp_sid_split() finds it in a service ID. */
		if (cmp_sid_split(cmp_sid_make(spaces[i], 1), &ps, &port) || ps != spaces[i])
			return -1;
		fprintf(out, "\t[0x%04x] = \"%s\",\n", ps, cmp_ps_str(ps));
	}
	fputs("}\n", out);

	if (emit_layout(out, "hdr", &cmp_mad_hdr_layout, 0, 0))
		return -1;
	fprintf(out, "L.hdr.attr_id_b = %u\n", attr_row->byte);
	for (const uint16_t *a = cmp_cm_attrs; *a; a++) {
		const struct cmp_layout *l = cmp_cm_layout(*a);

		if (emit_layout(out, layout_key(l->name, key, sizeof(key)), l, CMP_MAD_HDR_SIZE, *a))
			return -1;
	}
	if (emit_layout(out, "cma", &cmp_cma_hdr_layout, 0, 0))
		return -1;
	fputs(lua_body, out);
	return 0;
}

int main(int argc, char **argv)
{
	FILE *out = stdout;

	if (argc > 2 || (argc == 2 && !strcmp(argv[1], "--help"))) {
		fprintf(argc > 2 ? stderr : stdout, "usage: uscm-wsgen [OUT.lua]\n");
		return argc > 2 ? 2 : 0;
	}
	if (argc == 2 && !(out = fopen(argv[1], "w"))) {
		fprintf(stderr, "uscm-wsgen: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	if (generate(out)) {
		fprintf(stderr, "uscm-wsgen: cannot describe the tables in Lua\n");
		if (out != stdout) {
			fclose(out);
			remove(argv[1]);
		}
		return 1;
	}
	if ((out != stdout && fclose(out)) || (out == stdout && fflush(out))) {
		fprintf(stderr, "uscm-wsgen: write error\n");
		return 1;
	}
	return 0;
}
