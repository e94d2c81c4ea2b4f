/*
 * test_wireshark_lua.c - uscm's Wireshark Lua dissector (tools/wireshark/,
 * docs/capture.md "The Wireshark plugin") against the tables it is
 * generated from and against uscm-decode.
 *
 *  - The plugin cannot drift: what uscm-wsgen writes from cm_proto's row
 *    lists now must be byte for byte the build's uscm_cm.lua, the copy
 *    committed as tools/wireshark/uscm_cm.lua, and what `cmake --install`
 *    puts under ${datadir}/uscm/wireshark/.
 *  - tshark (the real one, 4.0 on Debian 12) with `-X lua_script:` registers
 *    one uscm_cm.<message>.<row> field for every row of every table, the
 *    reserved ones too, and nothing else but the few generated fields
 *    (message, the whole ECE VendorID of REP / SIDR_REP, the CMA header's
 *    port space, port and IPv4 addresses). Wireshark 4.0 runs Lua scripts
 *    as root (its init.lua sets run_user_scripts_when_superuser = true), so
 *    CI, which runs as root, needs nothing special; a tshark that refused
 *    them would register no uscm_cm field and fail here saying so.
 *  - Every field of every CM message: the captures are dissected by ONE
 *    `tshark -X lua_script:... -T fields` run each, with every uscm_cm
 *    field, and read by `uscm-decode --json`; for every MAD, every row of
 *    the MAD header and of the message (non-reserved: the value
 *    uscm-decode prints; reserved: zero), the generated fields (from the
 *    same JSON through cm_proto's helpers: cmp_cm_rep_vendor_id(),
 *    cmp_sid_split(), cmp_cma_hdr_parse() and the CMA header's rows) must
 *    match, and any other uscm_cm value tshark shows is a failure; frames
 *    that are not CM MADs (SA MADs, RC data) must show no uscm_cm field.
 *    Captures: uscm-cm-samples' every message type (ClassPortInfo Get and
 *    GetResp, REQ with IPv4 / IPv6 CMA headers and with an opaque service
 *    ID, MRA of a REQ and of a REP, REJ, REP, RTU, LAP, APR, DREQ, DREP,
 *    SIDR_REQ with a CMA header, SIDR_REP; random values in every field)
 *    as RoCEv2 over IPv4, over IPv6 and as native IB in ERF type 21 records;
 *    and the simulated fabric's own wire (scripts/sim-cm-capture.sh, IB and
 *    RoCE): rping, udaddy (SIDR) and an MRA from a server slow to accept.
 *  - The comparison itself can fail: changing any single expected value of
 *    the sample file is reported as exactly one mismatch.
 *
 * -T fields, not -T json: tshark 4.0's JSON repeats a key for a field that
 * occurs twice in a frame (infiniband.reserved does), which a JSON object
 * cannot hold, and nests the values in the tree's shape; -T fields with
 * -E header=y gives one column per field name, one line per frame. The values it prints: BASE_HEX integers
 * as 0x..., BASE_DEC in decimal (both parsed with strtoull base 0), FT_IPv6
 * as compressed text (compared as addresses), FT_BYTES as plain hex with
 * every byte (uscm-decode drops trailing zero bytes), FT_IPv4 dotted.
 */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cm_proto/cmp_cm.h"
#include "cm_proto/cmp_cma.h"
#include "tests/test_fixtures.h"

#define PROTO "uscm_cm"

static char tmpdir[64];

static void remove_tmpdir(void)
{
	tf_remove(tmpdir);
}

TestSuite(wireshark_lua, .fini = remove_tmpdir, .timeout = 120);

static const char *tpath(const char *name)
{
	return tf_path(tmpdir, "uscm_wslua_", name);
}

static const char *bin_dir(void)
{
	const char *b = getenv("USCM_BIN_DIR");

	return b && *b ? b : USCM_TEST_BIN_DIR;
}

static const char *src_dir(void)
{
	const char *s = getenv("USCM_SOURCE_DIR");

	return s && *s ? s : ".";
}

/* The build's generated plugin: build/tools/wireshark/uscm_cm.lua. */
static const char *build_plugin(void)
{
	static char p[1024];

	snprintf(p, sizeof(p), "%s/../tools/wireshark/uscm_cm.lua", bin_dir());
	return p;
}

static void need_tshark(void)
{
	if (system("command -v tshark >/dev/null 2>&1") != 0)
		tf_skip_missing("tshark not installed (scripts/install-deps.sh)");
}

static void need_bin(const char *name)
{
	char p[1024];

	snprintf(p, sizeof(p), "%s/%s", bin_dir(), name);
	if (access(p, X_OK))
		tf_skip_missing("%s is not built", p);
}

/* `tshark MODE` with an empty configuration and home (no personal
 * preferences, no personal plugin loading a second uscm_cm) and the build's
 * plugin; MODE first, as -G must be. */
static const char *tshark_cmd(const char *mode)
{
	static char buf[4096];

	snprintf(buf, sizeof(buf), "HOME='%s' WIRESHARK_CONFIG_DIR='%s' tshark %s -X lua_script:'%s'",
		 tpath(""), tpath(""), mode, build_plugin());
	return buf;
}

static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0, k;

	if (!f)
		return NULL;
	do {
		if (n + 65536 > cap)
			buf = realloc(buf, cap = cap * 2 + 65536);
		k = fread(buf + n, 1, cap - n - 1, f);
		n += k;
	} while (k);
	fclose(f);
	buf[n] = 0;
	if (len)
		*len = n;
	return buf;
}

/* ---- the plugin is the tables --------------------------------------- */

Test(wireshark_lua, plugin_is_generated_from_the_tables)
{
	char committed[1024], *gen, *built, *src;
	size_t ng, nb, ns;

	need_bin("uscm-wsgen");
	cr_assert_eq(tf_sh(NULL, "'%s/uscm-wsgen' '%s'", bin_dir(), tpath("gen.lua")), 0);
	snprintf(committed, sizeof(committed), "%s/tools/wireshark/uscm_cm.lua", src_dir());
	gen = read_file(tpath("gen.lua"), &ng);
	built = read_file(build_plugin(), &nb);
	src = read_file(committed, &ns);
	cr_assert(gen && ng > 10000, "uscm-wsgen wrote %zu bytes", ng);
	cr_assert_not_null(built, "%s missing: the build generates it", build_plugin());
	cr_assert_not_null(src, "%s missing", committed);
	cr_expect(nb == ng && !memcmp(built, gen, ng),
		  "%s is not what uscm-wsgen writes from the tables now: rebuild", build_plugin());
	cr_expect(ns == ng && !memcmp(src, gen, ng),
		  "%s differs from the tables (uscm-wsgen): cp %s %s", committed, build_plugin(),
		  committed);
	/* and it says so at its top */
	cr_expect_not_null(strstr(gen, "GENERATED by uscm-wsgen"));
	free(gen);
	free(built);
	free(src);
}

Test(wireshark_lua, installed_plugin_is_the_generated_one)
{
	const char *b = getenv("USCM_BUILD_DIR"), *c = getenv("USCM_CMAKE");
	char *out = NULL, inst[1024], *gen, *got;
	size_t ng, ni;

	if (!b || !c)
		tf_skip_missing("run through ctest (USCM_BUILD_DIR / USCM_CMAKE)");
	need_bin("uscm-wsgen");
	cr_assert_eq(tf_sh(&out, "'%s' --install '%s' --prefix '%s' 2>&1", c, b, tpath("prefix")), 0,
		     "cmake --install failed:\n%s", out);
	free(out);
	snprintf(inst, sizeof(inst), "%s/share/uscm/wireshark/uscm_cm.lua", tpath("prefix"));
	cr_assert_eq(tf_sh(NULL, "'%s/uscm-wsgen' '%s'", bin_dir(), tpath("gen.lua")), 0);
	gen = read_file(tpath("gen.lua"), &ng);
	got = read_file(inst, &ni);
	cr_assert_not_null(got, "make install did not install %s", inst);
	cr_assert(ni == ng && !memcmp(got, gen, ng), "%s differs from the tables", inst);
	free(gen);
	free(got);
	tf_sh(NULL, "rm -rf '%s'", tpath("prefix"));
}

/* ---- what tshark registers -------------------------------------------- */

struct tsfield {
	char name[96];
	char type[24];
};

static struct tsfield *tsf;
static size_t ntsf;

/* Every field the plugin registers, from `tshark -G fields`. */
static void load_fields(void)
{
	char *out = NULL, *save = NULL;

	if (tsf)
		return;
	cr_assert_eq(tf_sh(&out, "%s 2>&1", tshark_cmd("-G fields")), 0, "tshark -G fields failed");
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *col[5] = { 0 }, *p = line;

		for (int i = 0; i < 5 && p; i++) {
			col[i] = p;
			p = strchr(p, '\t');
			if (p)
				*p++ = 0;
		}
		if (!col[4] || strcmp(col[0], "F") || strcmp(col[4], PROTO))
			continue;
		tsf = realloc(tsf, (ntsf + 1) * sizeof(*tsf));
		cr_assert_not_null(tsf);
		snprintf(tsf[ntsf].name, sizeof(tsf[0].name), "%s", col[2]);
		snprintf(tsf[ntsf].type, sizeof(tsf[0].type), "%s", col[3]);
		ntsf++;
	}
	free(out);
	cr_assert_gt(ntsf, 0,
		     "tshark registered no " PROTO " field: it did not run %s (a tshark that refuses "
		     "Lua as root: init.lua's run_user_scripts_when_superuser, or enable_lua = false)",
		     build_plugin());
}

static const struct tsfield *find_field(const char *name)
{
	for (size_t i = 0; i < ntsf; i++)
		if (!strcmp(tsf[i].name, name))
			return &tsf[i];
	return NULL;
}

static const char *layout_key(const struct cmp_layout *l, char *buf, size_t len)
{
	size_t i;

	for (i = 0; l->name[i] && i + 1 < len; i++)
		buf[i] = (char)tolower((unsigned char)l->name[i]);
	buf[i] = 0;
	return buf;
}

static const char *field_name(const char *key, const struct cmp_field *f, char *buf, size_t len)
{
	snprintf(buf, len, PROTO ".%s.%s", key, f->name[0] == '_' ? f->name + 1 : f->name);
	return buf;
}

/* The layouts the plugin shows, with their keys (hdr, cma, message names). */
static size_t all_layouts(const struct cmp_layout **ls, const char **keys, char kbuf[][32])
{
	size_t n = 0;

	ls[n] = &cmp_mad_hdr_layout;
	keys[n++] = "hdr";
	ls[n] = &cmp_cma_hdr_layout;
	keys[n++] = "cma";
	for (const uint16_t *a = cmp_cm_attrs; *a; a++) {
		ls[n] = cmp_cm_layout(*a);
		keys[n] = layout_key(ls[n], kbuf[n], 32);
		n++;
	}
	return n;
}

/* Fields that are not rows: the message name, the containers, the whole
 * ECE VendorIDs and what the CMA header adds from the service ID. */
static const char *const generated[] = {
	PROTO ".message", PROTO ".rep.vendor_id", PROTO ".sidr_rep.vendor_id",
	PROTO ".cma.port_space", PROTO ".cma.dst_port", PROTO ".cma.src_ip", PROTO ".cma.dst_ip",
};
/* The expert infos (registered as FT_NONE fields). */
static const char *const experts[] = {
	PROTO ".reserved_not_zero", PROTO ".cma.bad", PROTO ".short",
};

Test(wireshark_lua, every_row_is_a_registered_field)
{
	const struct cmp_layout *ls[32];
	const char *keys[32];
	char kbuf[32][32], name[128];
	size_t n, rows = 0;

	need_tshark();
	load_fields();
	n = all_layouts(ls, keys, kbuf);
	cr_assert_eq(n, 14u, "header, CMA header and the 12 CM attributes");
	for (size_t i = 0; i < ntsf; i++) {
		int known = 0;

		for (size_t g = 0; g < sizeof(generated) / sizeof(generated[0]); g++)
			known |= !strcmp(tsf[i].name, generated[g]);
		for (size_t e = 0; e < sizeof(experts) / sizeof(experts[0]); e++)
			known |= !strcmp(tsf[i].name, experts[e]) && !strcmp(tsf[i].type, "FT_NONE");
		for (size_t li = 0; li < n && !known; li++) {
			snprintf(name, sizeof(name), PROTO ".%s", keys[li]);
			if (!strcmp(tsf[i].name, name)) {
				known = !strcmp(tsf[i].type, "FT_NONE");
				break;
			}
			for (size_t r = 0; r < ls[li]->nfields && !known; r++)
				known = !strcmp(tsf[i].name, field_name(keys[li], &ls[li]->fields[r],
									  name, sizeof(name)));
		}
		cr_expect(known, "tshark field %s (%s) is neither a table row nor a known "
				 "generated field", tsf[i].name, tsf[i].type);
	}
	for (size_t li = 0; li < n; li++) {
		snprintf(name, sizeof(name), PROTO ".%s", keys[li]);
		cr_expect_not_null(find_field(name), "no %s", name);
		for (size_t r = 0; r < ls[li]->nfields; r++, rows++) {
			const struct cmp_field *f = &ls[li]->fields[r];
			const struct tsfield *t = find_field(field_name(keys[li], f, name, sizeof(name)));
			const char *want = f->kind == CMP_K_GID ? "FT_IPv6"
					   : f->kind == CMP_K_BYTES ? "FT_BYTES" : NULL;

			cr_expect_not_null(t, "row %s.%s has no tshark field %s", ls[li]->name,
					   f->name, name);
			if (t && want)
				cr_expect_str_eq(t->type, want, "%s", name);
			if (t && !want && f->width <= 32)
				cr_expect(!strncmp(t->type, "FT_UINT", 7), "%s is %s", name, t->type);
		}
	}
	for (size_t g = 0; g < sizeof(generated) / sizeof(generated[0]); g++)
		cr_expect_not_null(find_field(generated[g]), "no %s", generated[g]);
	cr_log_info("%zu " PROTO " fields for %zu rows of %zu tables", ntsf, rows, n);
}

/* ---- uscm-decode --json ------------------------------------------------- */

struct kv {
	char *key; /* "frame", "hdr.attr_id", "msg.local_comm_id", ... */
	char *val; /* strings unquoted; numbers and literals as written */
};

struct jobj {
	struct kv *kv;
	size_t n;
};

static const char *jget(const struct jobj *o, const char *key)
{
	for (size_t i = 0; i < o->n; i++)
		if (!strcmp(o->kv[i].key, key))
			return o->kv[i].val;
	return NULL;
}

static void jadd(struct jobj *o, const char *prefix, const char *key, const char *v, size_t vlen)
{
	char k[256];

	snprintf(k, sizeof(k), "%s%s%s", prefix, *prefix ? "." : "", key);
	o->kv = realloc(o->kv, (o->n + 1) * sizeof(*o->kv));
	cr_assert_not_null(o->kv);
	o->kv[o->n].key = strdup(k);
	o->kv[o->n].val = strndup(v, vlen);
	o->n++;
}

static const char *jvalue(const char *p, const char *prefix, const char *key, struct jobj *o);

/* Parses one object at p (uscm-decode's output: no escapes but \" and \\
 * in diagnostics, which are only skipped). Returns the end, NULL if bad. */
static const char *jobject(const char *p, const char *prefix, struct jobj *o)
{
	if (*p++ != '{')
		return NULL;
	for (;;) {
		char key[128];
		const char *k;

		while (isspace((unsigned char)*p) || *p == ',')
			p++;
		if (*p == '}')
			return p + 1;
		if (*p++ != '"')
			return NULL;
		k = p;
		while (*p && *p != '"')
			p++;
		snprintf(key, sizeof(key), "%.*s", (int)(p - k), k);
		if (*p++ != '"')
			return NULL;
		while (isspace((unsigned char)*p) || *p == ':')
			p++;
		if (!(p = jvalue(p, prefix, key, o)))
			return NULL;
	}
}

static const char *jvalue(const char *p, const char *prefix, const char *key, struct jobj *o)
{
	char sub[256];

	if (*p == '{') {
		snprintf(sub, sizeof(sub), "%s%s%s", prefix, *prefix ? "." : "", key);
		return jobject(p, sub, o);
	}
	if (*p == '"') {
		const char *s = ++p;

		while (*p && *p != '"')
			p += *p == '\\' && p[1] ? 2 : 1;
		if (!*p)
			return NULL;
		jadd(o, prefix, key, s, (size_t)(p - s));
		return p + 1;
	}
	if (*p == '[') {
		int depth = 0, instr = 0;

		for (; *p; p++) {
			if (instr) {
				if (*p == '\\' && p[1])
					p++;
				else if (*p == '"')
					instr = 0;
				continue;
			}
			if (*p == '"')
				instr = 1;
			else if (*p == '[' || *p == '{')
				depth++;
			else if ((*p == ']' || *p == '}') && --depth == 0)
				return p + 1;
		}
		return NULL;
	}
	const char *s = p;

	while (*p && *p != ',' && *p != '}')
		p++;
	jadd(o, prefix, key, s, (size_t)(p - s));
	return p;
}

static void jfree(struct jobj *o)
{
	for (size_t i = 0; i < o->n; i++) {
		free(o->kv[i].key);
		free(o->kv[i].val);
	}
	free(o->kv);
	memset(o, 0, sizeof(*o));
}

/* ---- tshark -T fields ---------------------------------------------------- */

struct tsrow {
	char **val; /* by column */
};

#define COLHASH 2048

struct tsout {
	char *buf;
	char **col;   /* column names */
	size_t ncol;
	int hash[COLHASH]; /* column + 1 by name hash, open addressing */
	struct tsrow *row;
	size_t nrow;
};

static unsigned name_hash(const char *s)
{
	unsigned h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h % COLHASH;
}

static char **split_tabs(char *line, size_t *n)
{
	char **v = NULL;
	size_t k = 0;

	for (char *p = line;; ) {
		char *t = strchr(p, '\t');

		v = realloc(v, (k + 1) * sizeof(*v));
		v[k++] = p;
		if (!t)
			break;
		*t = 0;
		p = t + 1;
	}
	*n = k;
	return v;
}

/* One tshark run over path: frame.number and every uscm_cm field but the
 * FT_NONE containers, one line per frame. */
static void run_tshark(const char *path_arg, struct tsout *o)
{
	char path[512], fields[512], errf[512], *save = NULL;
	FILE *f;
	int rc;

	/* tpath() rotates four buffers: keep copies */
	snprintf(path, sizeof(path), "%s", path_arg);
	snprintf(fields, sizeof(fields), "%s", tpath("fields.txt"));
	snprintf(errf, sizeof(errf), "%s", tpath("tshark.err"));
	f = fopen(fields, "w");

	memset(o, 0, sizeof(*o));
	cr_assert_not_null(f);
	for (size_t i = 0; i < ntsf; i++)
		if (strcmp(tsf[i].type, "FT_NONE"))
			fprintf(f, "-e %s\n", tsf[i].name);
	fclose(f);
	rc = tf_sh(&o->buf, "%s -r '%s' -T fields -E header=y -E separator=/t -E occurrence=a "
			    "-E aggregator=, -e frame.number -e _ws.expert.message $(cat '%s') "
			    "2>'%s'",
		   tshark_cmd(""), path, fields, errf);
	if (rc) {
		char *err = read_file(errf, NULL);
		cr_assert_fail("tshark on %s exited %d:\n%s", path, rc, err ? err : "");
	}
	for (char *line = strtok_r(o->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t n;
		char **v = split_tabs(line, &n);

		if (!o->col) {
			o->col = v;
			o->ncol = n;
			cr_assert_lt(n, (size_t)COLHASH / 2);
			for (size_t i = 0; i < n; i++) {
				unsigned h = name_hash(v[i]);

				while (o->hash[h])
					h = (h + 1) % COLHASH;
				o->hash[h] = (int)i + 1;
			}
			continue;
		}
		cr_assert_eq(n, o->ncol, "tshark line with %zu columns, header has %zu", n, o->ncol);
		o->row = realloc(o->row, (o->nrow + 1) * sizeof(*o->row));
		o->row[o->nrow++].val = v;
	}
	cr_assert_not_null(o->col, "tshark printed nothing for %s", path);
	cr_assert_str_eq(o->col[0], "frame.number");
}

static void tsout_free(struct tsout *o)
{
	for (size_t i = 0; i < o->nrow; i++)
		free(o->row[i].val);
	free(o->row);
	free(o->col);
	free(o->buf);
}

static long col_of(const struct tsout *o, const char *name)
{
	for (unsigned h = name_hash(name), k = 0; k < COLHASH; k++, h = (h + 1) % COLHASH) {
		if (!o->hash[h])
			return -1;
		if (!strcmp(o->col[o->hash[h] - 1], name))
			return o->hash[h] - 1;
	}
	return -1;
}

/* ---- comparing ----------------------------------------------------------- */

struct cmpctx {
	const char *file;
	const struct tsout *ts;
	const char *const *tv; /* this frame's tshark values */
	char *checked;         /* per column: compared */
	unsigned long frame;
	const char *msg;       /* "REQ" ... */
	/* results */
	unsigned fields, mismatches;
	char report[16384];
	size_t rlen;
	/* self-check: the expected value of comparison number `mutate` (from
	 * 1) is changed */
	unsigned long mutate, count;
	/* coverage: "req.local_comm_id" ... compared at least once */
	char **seen;
	size_t nseen;
	unsigned attrs_seen[64];
};

static void note(struct cmpctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct cmpctx *c, const char *fmt, ...)
{
	va_list ap;
	int k;

	c->mismatches++;
	if (c->rlen + 512 >= sizeof(c->report))
		return;
	k = snprintf(c->report + c->rlen, sizeof(c->report) - c->rlen, "%s frame %lu (%s): ",
		     c->file, c->frame, c->msg ? c->msg : "?");
	c->rlen += (size_t)k;
	va_start(ap, fmt);
	k = vsnprintf(c->report + c->rlen, sizeof(c->report) - c->rlen, fmt, ap);
	va_end(ap);
	c->rlen += (size_t)k;
	if (c->rlen < sizeof(c->report) - 1)
		c->report[c->rlen++] = '\n';
	c->report[c->rlen] = 0;
}

static void seen(struct cmpctx *c, const char *name)
{
	for (size_t i = 0; i < c->nseen; i++)
		if (!strcmp(c->seen[i], name))
			return;
	c->seen = realloc(c->seen, (c->nseen + 1) * sizeof(*c->seen));
	c->seen[c->nseen++] = strdup(name);
}

enum vkind { V_INT, V_GID, V_HEX, V_IPV4, V_STR };

/* Do tshark's text `got` and the expected text `want` say the same? */
static int same(enum vkind k, const char *want, const char *got)
{
	switch (k) {
	case V_INT: {
		char *e1, *e2;
		unsigned long long a, b;

		if (!*want || !*got)
			return 0;
		errno = 0;
		a = strtoull(want, &e1, 0);
		b = strtoull(got, &e2, 0);
		return !errno && !*e1 && !*e2 && a == b;
	}
	case V_GID: {
		uint8_t a[16], b[16];

		return inet_pton(AF_INET6, want, a) == 1 && inet_pton(AF_INET6, got, b) == 1 &&
		       !memcmp(a, b, 16);
	}
	case V_HEX: {
		/* uscm-decode drops trailing zero bytes; tshark shows them all */
		size_t n = strlen(got), w = strlen(want);

		while (n >= 2 && got[n - 1] == '0' && got[n - 2] == '0')
			n--, n--;
		return n == w && !strncasecmp(want, got, n);
	}
	default:
		return !strcmp(want, got);
	}
}

/* The expected text changed so that it means something else. */
static void mutate_text(enum vkind k, const char *want, char *out, size_t len)
{
	switch (k) {
	case V_INT:
		snprintf(out, len, "%llu", strtoull(want, NULL, 0) + 1);
		break;
	case V_GID: {
		uint8_t a[16] = { 0 };

		inet_pton(AF_INET6, want, a);
		a[15] ^= 1;
		inet_ntop(AF_INET6, a, out, (socklen_t)len);
		break;
	}
	case V_IPV4: {
		struct in_addr a = { 0 };

		inet_pton(AF_INET, want, &a);
		a.s_addr ^= htonl(1);
		inet_ntop(AF_INET, &a, out, (socklen_t)len);
		break;
	}
	default:
		snprintf(out, len, "%s", want);
		if (!*out)
			snprintf(out, len, "01");
		else
			out[0] = out[0] == '1' ? '2' : '1';
		break;
	}
}

/* Compares tshark's field `name` in this frame with `want`. */
static void expect_field(struct cmpctx *c, const char *name, enum vkind k, const char *want)
{
	long col = col_of(c->ts, name);
	char mut[256];
	const char *got;

	if (col < 0) {
		note(c, "%s: tshark has no such field", name);
		return;
	}
	c->checked[col] = 1;
	got = c->tv[col];
	if (++c->count == c->mutate) {
		mutate_text(k, want, mut, sizeof(mut));
		want = mut;
	}
	c->fields++;
	if (!c->mutate)
		seen(c, name + sizeof(PROTO));
	if (k == V_IPV4 ? strcmp(want, got) : !same(k, want, got))
		note(c, "%s: tshark '%s', uscm '%s'", name, got, want);
}

static enum vkind row_vkind(const struct cmp_field *f)
{
	return f->kind == CMP_K_GID ? V_GID : f->kind == CMP_K_BYTES ? V_HEX : V_INT;
}

/* Every row of layout l (key) against the JSON object under `jprefix`
 * ("hdr" / "msg"); reserved rows must be zero. */
static void expect_rows(struct cmpctx *c, const struct cmp_layout *l, const char *key,
			const struct jobj *j, const char *jprefix)
{
	char name[128], jk[160];

	for (size_t i = 0; i < l->nfields; i++) {
		const struct cmp_field *f = &l->fields[i];

		field_name(key, f, name, sizeof(name));
		if (f->kind == CMP_K_RSVD) {
			expect_field(c, name, f->width > 32 ? V_HEX : V_INT, f->width > 32 ? "" : "0");
			continue;
		}
		snprintf(jk, sizeof(jk), "%s.%s", jprefix, f->name);
		const char *want = jget(j, jk);
		if (!want) {
			note(c, "uscm-decode --json has no %s", jk);
			continue;
		}
		expect_field(c, name, row_vkind(f), want);
	}
}

static int hexval(int ch)
{
	return isdigit(ch) ? ch - '0' : tolower(ch) - 'a' + 10;
}

/* The JSON hex string back into n bytes (trailing zeros restored). */
static void unhex(const char *s, uint8_t *out, size_t n)
{
	memset(out, 0, n);
	for (size_t i = 0; i < n && s[2 * i] && s[2 * i + 1]; i++)
		out[i] = (uint8_t)(hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]));
}

/* What the plugin adds to a REQ / SIDR_REQ with an IP service ID: the CMA
 * header, decoded here by cm_proto from the private data uscm-decode
 * printed; or nothing at all when it is not there. */
static void expect_cma(struct cmpctx *c, uint16_t attr, const struct cmp_layout *l,
		       const struct jobj *j)
{
	const struct cmp_field *pd = cmp_layout_find(l, "private_data");
	const char *sid_s = jget(j, "msg.service_id"), *pd_s = jget(j, "msg.private_data");
	uint8_t pdata[256];
	struct cmp_cma_hdr h;
	struct sockaddr_storage ss, ds;
	enum cmp_ps ps;
	uint16_t port;
	char want[128], name[128];
	int present = 0;

	if ((attr == UMAD_CM_ATTR_REQ || attr == UMAD_CM_ATTR_SIDR_REQ) && pd && sid_s && pd_s) {
		unhex(pd_s, pdata, pd->width / 8);
		present = cmp_sid_split(strtoull(sid_s, NULL, 0), &ps, &port) == 0 &&
			  cmp_cma_hdr_parse(pdata, pd->width / 8, port, &ss, &ds) == 0;
	}
	if (!present)
		return; /* compare_frame: then no uscm_cm.cma field may show */
	cmp_layout_decode(&cmp_cma_hdr_layout, pdata, &h);
	for (size_t i = 0; i < cmp_cma_hdr_layout.nfields; i++) {
		const struct cmp_field *f = &cmp_cma_hdr_layout.fields[i];

		field_name("cma", f, name, sizeof(name));
		if (f->kind == CMP_K_RSVD)
			snprintf(want, sizeof(want), "0");
		else if (f->kind == CMP_K_GID)
			cmp_gid_str((const uint8_t *)&h + f->offset, want, sizeof(want));
		else
			snprintf(want, sizeof(want), "%" PRIu64, cmp_field_value(f, &h));
		expect_field(c, name, row_vkind(f), want);
	}
	snprintf(want, sizeof(want), "%u", (unsigned)ps);
	expect_field(c, PROTO ".cma.port_space", V_INT, want);
	snprintf(want, sizeof(want), "%u", port);
	expect_field(c, PROTO ".cma.dst_port", V_INT, want);
	if (h.ip_version == 4) {
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, want, sizeof(want));
		expect_field(c, PROTO ".cma.src_ip", V_IPV4, want);
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ds)->sin_addr, want, sizeof(want));
		expect_field(c, PROTO ".cma.dst_ip", V_IPV4, want);
	}
}

/* The whole ECE VendorID of REP / SIDR_REP, by cm_proto's own helpers. */
static void expect_vendor_id(struct cmpctx *c, uint16_t attr, const struct jobj *j)
{
	char want[32];
	const char *h = jget(j, "msg.vendor_id_h"), *m = jget(j, "msg.vendor_id_m"),
		   *lo = jget(j, "msg.vendor_id_l");

	if (attr == UMAD_CM_ATTR_REP && h && m && lo) {
		struct cmp_cm_rep r = { .vendor_id_h = (uint8_t)atoi(h), .vendor_id_m = (uint8_t)atoi(m),
					.vendor_id_l = (uint8_t)atoi(lo) };
		snprintf(want, sizeof(want), "%u", cmp_cm_rep_vendor_id(&r));
		expect_field(c, PROTO ".rep.vendor_id", V_INT, want);
	} else if (attr == UMAD_CM_ATTR_SIDR_REP && h && lo) {
		struct cmp_cm_sidr_rep r = { .vendor_id_h = (uint16_t)atoi(h),
					     .vendor_id_l = (uint8_t)atoi(lo) };
		snprintf(want, sizeof(want), "%u", cmp_cm_sidr_rep_vendor_id(&r));
		expect_field(c, PROTO ".sidr_rep.vendor_id", V_INT, want);
	}
}

/* One frame: tshark's values tv against uscm-decode's JSON j (NULL: not a
 * MAD for uscm-decode). */
static void compare_frame(struct cmpctx *c, const char *const *tv, const struct jobj *j)
{
	const char *cls = j ? jget(j, "class") : NULL, *attr_s;
	char key[32];

	c->tv = tv;
	c->msg = j ? jget(j, "attr") : "not a MAD";
	memset(c->checked, 0, c->ts->ncol);
	c->checked[0] = 1; /* frame.number */
	/* these captures are well formed: none of the plugin's expert infos */
	long ex = col_of(c->ts, "_ws.expert.message");
	static const char *const ex_text[] = { "reserved bits are not zero", "CMA header",
					       "MAD shorter" };

	cr_assert_geq(ex, 0);
	c->checked[ex] = 1;
	for (size_t i = 0; i < sizeof(ex_text) / sizeof(ex_text[0]); i++)
		if (strstr(tv[ex], ex_text[i]))
			note(c, "expert info '%s'", tv[ex]);
	if (cls && !strcmp(cls, "CM") && (attr_s = jget(j, "hdr.attr_id"))) {
		uint16_t attr = (uint16_t)strtoul(attr_s, NULL, 0);
		const struct cmp_layout *l = cmp_cm_layout(attr);

		expect_rows(c, &cmp_mad_hdr_layout, "hdr", j, "hdr");
		expect_field(c, PROTO ".message", V_STR, cmp_cm_attr_str(attr));
		if (l) {
			expect_rows(c, l, layout_key(l, key, sizeof(key)), j, "msg");
			expect_vendor_id(c, attr, j);
			expect_cma(c, attr, l, j);
			for (unsigned i = 0; cmp_cm_attrs[i]; i++)
				if (cmp_cm_attrs[i] == attr)
					c->attrs_seen[i]++;
		}
	}
	/* nothing else: no uscm_cm value the comparison did not ask for */
	for (size_t i = 1; i < c->ts->ncol; i++)
		if (!c->checked[i] && *tv[i])
			note(c, "%s: '%s' shown, not expected", c->ts->col[i], tv[i]);
}

struct capture {
	struct tsout ts;
	struct jobj *mads; /* uscm-decode --json, one per MAD */
	unsigned long *frame;
	size_t nmads;
};

static void load_capture(const char *path_arg, struct capture *cap)
{
	char *out = NULL, *save = NULL, path[512];

	snprintf(path, sizeof(path), "%s", path_arg);
	memset(cap, 0, sizeof(*cap));
	load_fields();
	cr_assert_eq(tf_sh(&out, "'%s/uscm-decode' --json '%s' 2>/dev/null", bin_dir(), path), 0,
		     "uscm-decode --json %s failed", path);
	for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct jobj o = { 0 };

		cr_assert_not_null(jobject(line, "", &o), "uscm-decode --json: cannot parse %s", line);
		cap->mads = realloc(cap->mads, (cap->nmads + 1) * sizeof(*cap->mads));
		cap->frame = realloc(cap->frame, (cap->nmads + 1) * sizeof(*cap->frame));
		cr_assert(cap->mads && cap->frame && jget(&o, "frame"));
		cap->frame[cap->nmads] = strtoul(jget(&o, "frame"), NULL, 10);
		cap->mads[cap->nmads++] = o;
	}
	free(out);
	cr_assert_gt(cap->nmads, 0, "uscm-decode found no MAD in %s", path);
	run_tshark(path, &cap->ts);
}

static void free_capture(struct capture *cap)
{
	for (size_t i = 0; i < cap->nmads; i++)
		jfree(&cap->mads[i]);
	free(cap->mads);
	free(cap->frame);
	tsout_free(&cap->ts);
}

/* Every frame of the capture; returns the mismatches (report in c). */
static unsigned compare_capture(const char *file, const struct capture *cap, struct cmpctx *c,
				unsigned long mutate)
{
	char **seen_keep = c->seen;
	size_t nseen_keep = c->nseen;

	memset(c, 0, sizeof(*c));
	c->seen = seen_keep;
	c->nseen = nseen_keep;
	c->file = file;
	c->ts = &cap->ts;
	c->mutate = mutate;
	c->checked = calloc(1, cap->ts.ncol);
	cr_assert_not_null(c->checked);
	for (size_t r = 0; r < cap->ts.nrow; r++) {
		const char *const *tv = (const char *const *)cap->ts.row[r].val;
		const struct jobj *j = NULL;

		c->frame = strtoul(tv[0], NULL, 10);
		for (size_t m = 0; m < cap->nmads; m++)
			if (cap->frame[m] == c->frame)
				j = &cap->mads[m];
		compare_frame(c, tv, j);
	}
	free(c->checked);
	return c->mismatches;
}

static void free_seen(struct cmpctx *c)
{
	for (size_t i = 0; i < c->nseen; i++)
		free(c->seen[i]);
	free(c->seen);
	c->seen = NULL;
	c->nseen = 0;
}

/* The capture compared; returns the number of CM MADs. */
static unsigned check_capture(const char *file_arg, struct cmpctx *c, unsigned *attrs_seen)
{
	static struct capture cap;
	static char file[512];
	unsigned cm = 0;

	snprintf(file, sizeof(file), "%s", file_arg);
	load_capture(file, &cap);
	cr_assert_eq(compare_capture(file, &cap, c, 0), 0,
		     "%u disagreement(s) between tshark with uscm_cm.lua and uscm-decode:\n%s",
		     c->mismatches, c->report);
	for (unsigned i = 0; cmp_cm_attrs[i]; i++) {
		attrs_seen[i] += c->attrs_seen[i];
		cm += c->attrs_seen[i];
	}
	cr_log_info("%s: %zu frames, %zu MADs (%u CM), %u fields compared, all equal", file,
		    cap.ts.nrow, cap.nmads, cm, c->fields);
	free_capture(&cap);
	return cm;
}

/* ---- the tests ------------------------------------------------------------ */

Test(wireshark_lua, samples_every_field_of_every_message_matches_uscm_decode)
{
	static const char *const links[] = { "roce4", "roce6", "ib" };
	static struct cmpctx c;
	unsigned attrs[64] = { 0 };
	const struct cmp_layout *ls[32];
	const char *keys[32];
	char kbuf[32][32], name[160];
	size_t n;

	need_tshark();
	need_bin("uscm-cm-samples");
	need_bin("uscm-decode");
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		char file[64];

		snprintf(file, sizeof(file), "samples_%s.pcap", links[i]);
		cr_assert_eq(tf_sh(NULL, "'%s/uscm-cm-samples' --link %s --seed %zu '%s'", bin_dir(),
				   links[i], i + 1, tpath(file)), 0);
		cr_assert_eq(check_capture(tpath(file), &c, attrs), 18u);
	}
	/* every message type, every row of every table, every generated field */
	for (unsigned i = 0; cmp_cm_attrs[i]; i++)
		cr_expect_geq(attrs[i], 3u, "%s seen %u times", cmp_cm_attr_str(cmp_cm_attrs[i]),
			      attrs[i]);
	n = all_layouts(ls, keys, kbuf);
	for (size_t li = 0; li < n; li++)
		for (size_t r = 0; r < ls[li]->nfields; r++) {
			int found = 0;

			field_name(keys[li], &ls[li]->fields[r], name, sizeof(name));
			for (size_t s = 0; s < c.nseen && !found; s++)
				found = !strcmp(c.seen[s], name + sizeof(PROTO));
			cr_expect(found, "%s never compared", name);
		}
	for (size_t g = 0; g < sizeof(generated) / sizeof(generated[0]); g++) {
		int found = 0;

		for (size_t s = 0; s < c.nseen && !found; s++)
			found = !strcmp(c.seen[s], generated[g] + sizeof(PROTO));
		cr_expect(found, "%s never compared", generated[g]);
	}
	free_seen(&c);
}

/* Real traffic on the simulated fabric's wire: rping, udaddy's SIDR, an
 * MRA; SA MADs and RC data frames in between must show no uscm_cm. */
static void sim_capture(const char *link)
{
	static struct cmpctx c;
	unsigned attrs[64] = { 0 };
	char file[64], *out = NULL, util_env[1024] = "";
	static const uint16_t want[] = { UMAD_CM_ATTR_REQ, UMAD_CM_ATTR_MRA, UMAD_CM_ATTR_REJ,
					 UMAD_CM_ATTR_REP, UMAD_CM_ATTR_RTU, UMAD_CM_ATTR_DREQ,
					 UMAD_CM_ATTR_DREP, UMAD_CM_ATTR_SIDR_REQ,
					 UMAD_CM_ATTR_SIDR_REP };

	need_tshark();
	need_bin("uscm-sim");
	need_bin("uscm-churn");
	need_bin("uscm-decode");
	if (system("command -v rping >/dev/null && command -v udaddy >/dev/null"))
		tf_skip_missing("rping / udaddy not installed (rdmacm-utils)");
	snprintf(file, sizeof(file), "sim_%s.pcap", link);
#ifdef USCM_SANITIZED
	/* uscm's librdmacm is built with ASan/UBSan, rping and udaddy are not:
	 * preload the runtimes into them (as tests/lib/libtest.h does) */
	char *asan = NULL, *ubsan = NULL;

	tf_sh(&asan, "gcc -print-file-name=libasan.so | tr -d '\\n'");
	tf_sh(&ubsan, "gcc -print-file-name=libubsan.so | tr -d '\\n'");
	snprintf(util_env, sizeof(util_env), "LD_PRELOAD=%s:%s ASAN_OPTIONS=detect_leaks=0", asan,
		 ubsan);
	free(asan);
	free(ubsan);
#endif
	cr_assert_eq(tf_sh(&out, "cd '%s' && USCM_BUILD='%s/..' USCM_UTIL_ENV='%s' "
				 "scripts/sim-cm-capture.sh '%s' %s 2>&1",
			   src_dir(), bin_dir(), util_env, tpath(file), link),
		     0, "scripts/sim-cm-capture.sh failed:\n%s", out);
	free(out);
	check_capture(tpath(file), &c, attrs);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		for (unsigned a = 0; cmp_cm_attrs[a]; a++)
			if (cmp_cm_attrs[a] == want[i])
				cr_expect_gt(attrs[a], 0u, "no %s in the sim's capture",
					     cmp_cm_attr_str(want[i]));
	/* the CMA headers of rping's REQ and udaddy's SIDR_REQ were dissected */
	int cma = 0;
	for (size_t s = 0; s < c.nseen; s++)
		cma |= !strcmp(c.seen[s], "cma.src_ip");
	cr_expect(cma, "no CMA header compared");
	free_seen(&c);
}

Test(wireshark_lua, sim_ib_capture_matches_uscm_decode)
{
	sim_capture("ib");
}

Test(wireshark_lua, sim_roce_capture_matches_uscm_decode)
{
	sim_capture("roce");
}

/* The comparison is not vacuous: with tshark's output fixed, changing the
 * expected value of any one compared field is exactly one mismatch. */
Test(wireshark_lua, every_compared_field_can_fail)
{
	static struct capture cap;
	static struct cmpctx c;
	unsigned long total;

	need_tshark();
	need_bin("uscm-cm-samples");
	need_bin("uscm-decode");
	cr_assert_eq(tf_sh(NULL, "'%s/uscm-cm-samples' --link ib '%s'", bin_dir(), tpath("m.pcap")), 0);
	load_capture(tpath("m.pcap"), &cap);
	cr_assert_eq(compare_capture("m.pcap", &cap, &c, 0), 0, "%s", c.report);
	total = c.count;
	cr_assert_gt(total, 500ul);
	for (unsigned long k = 1; k <= total; k++) {
		compare_capture("m.pcap", &cap, &c, k);
		cr_assert_eq(c.mismatches, 1u, "changing comparison %lu of %lu: %u mismatches\n%s", k,
			     total, c.mismatches, c.report);
	}
	cr_log_info("%lu single-value changes, each reported", total);
	free_seen(&c);
	free_capture(&cap);
}
