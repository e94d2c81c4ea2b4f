/*
 * uscm-decode and uscm-demo as a user runs them: summary lines, -v, --json
 * (checked by a small JSON parser), traces with non-MAD frames in between,
 * truncated files and bad usage.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[64];
static char bindir[512];
static char srcdir[512];

static void setup(void)
{
	const char *b = getenv("USCM_BIN_DIR"), *s = getenv("USCM_SOURCE_DIR");

	cr_assert(b && s, "run through ctest (USCM_BIN_DIR / USCM_SOURCE_DIR)");
	snprintf(bindir, sizeof(bindir), "%s", b);
	snprintf(srcdir, sizeof(srcdir), "%s", s);
	strcpy(tmpdir, "/tmp/uscm-decode-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
	(void)system(cmd);
}

/* Runs a shell command; returns its exit status and its stdout (malloc'd). */
static int run(const char *cmd, char **out)
{
	FILE *p = popen(cmd, "r");
	size_t cap = 1 << 16, len = 0, n;
	char *buf = malloc(cap);

	cr_assert_not_null(p);
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 4096)
			buf = realloc(buf, cap *= 2);
	}
	buf[len] = 0;
	int st = pclose(p);
	*out = buf;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_lines(const char *s)
{
	int n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void demo(void)
{
	char cmd[1200], *out;
	snprintf(cmd, sizeof(cmd), "%s/uscm-demo %s", bindir, tmpdir);
	cr_assert_eq(run(cmd, &out), 0, "%s", out);
	free(out);
}

/* ---- a minimal JSON validator (RFC 8259 grammar, no semantics) ---- */
static const char *ws(const char *p) { while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++; return p; }
static const char *jvalue(const char *p);
static const char *jstring(const char *p)
{
	if (*p++ != '"') return NULL;
	while (*p && *p != '"') {
		if ((unsigned char)*p < 0x20) return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') { for (int i = 1; i <= 4; i++) if (!strchr("0123456789abcdefABCDEF", p[i]) || !p[i]) return NULL; p += 4; }
			else if (!strchr("\"\\/bfnrt", *p) || !*p) return NULL;
		}
		p++;
	}
	return *p == '"' ? p + 1 : NULL;
}
static const char *jnumber(const char *p)
{
	const char *s = p;
	if (*p == '-') p++;
	if (*p == '0') p++; else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++; else return NULL;
	if (*p == '.') { p++; if (!(*p >= '0' && *p <= '9')) return NULL; while (*p >= '0' && *p <= '9') p++; }
	if (*p == 'e' || *p == 'E') { p++; if (*p == '+' || *p == '-') p++; if (!(*p >= '0' && *p <= '9')) return NULL; while (*p >= '0' && *p <= '9') p++; }
	return p > s ? p : NULL;
}
static const char *jcontainer(const char *p, char open, char close, int object)
{
	if (*p++ != open) return NULL;
	p = ws(p);
	if (*p == close) return p + 1;
	for (;;) {
		if (object) {
			if (!(p = jstring(ws(p)))) return NULL;
			p = ws(p);
			if (*p++ != ':') return NULL;
		}
		if (!(p = jvalue(ws(p)))) return NULL;
		p = ws(p);
		if (*p == close) return p + 1;
		if (*p++ != ',') return NULL;
	}
}
static const char *jvalue(const char *p)
{
	p = ws(p);
	switch (*p) {
	case '{': return jcontainer(p, '{', '}', 1);
	case '[': return jcontainer(p, '[', ']', 0);
	case '"': return jstring(p);
	case 't': return strncmp(p, "true", 4) ? NULL : p + 4;
	case 'f': return strncmp(p, "false", 5) ? NULL : p + 5;
	case 'n': return strncmp(p, "null", 4) ? NULL : p + 4;
	default: return jnumber(p);
	}
}

/* Overwrites the byte at `off` of the demo's IB trace, checking first that
 * it holds `was` (so the offset arithmetic of a test is itself tested). */
static void patch_ib_trace(long off, int was, int now, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/handshake-ib.pcap", tmpdir);
	f = fopen(path, "r+b");
	cr_assert_not_null(f);
	fseek(f, off, SEEK_SET);
	cr_assert_eq(fgetc(f), was, "offset arithmetic: byte %ld is not 0x%02x", off, was);
	fseek(f, off, SEEK_SET);
	fputc(now, f);
	fclose(f);
}

/* MAD byte `b` of the demo trace's first REQ: 24 (pcap file header) + two
 * records of 16 + 16 + 290 + 16 + 16 (record + ERF headers) + 28 (LRH, BTH,
 * DETH). */
#define REQ_MAD_BYTE(b) (24L + 2 * (16 + 16 + 290) + 16 + 16 + 28 + (b))

TestSuite(uscm_decode, .init = setup, .fini = teardown);

Test(uscm_decode, json_validator_rejects_garbage)
{
	cr_assert_not_null(jvalue("{\"a\": [1, 2.5e3, \"x\\n\", true, null]}"));
	cr_assert_null(jvalue("{\"a\": [1, 2,]}"));
	cr_assert_null(jvalue("{\"a\" 1}"));
	cr_assert_null(jvalue("{\"a\": 0x10}") && *ws(jvalue("{\"a\": 0x10}")) == 0 ? "" : NULL);
}

Test(uscm_decode, demo_handshake_summary)
{
	char cmd[1200], *out;

	demo();
	snprintf(cmd, sizeof(cmd), "%s/uscm-decode %s/handshake-ib.pcap 2>&1", bindir, tmpdir);
	cr_assert_eq(run(cmd, &out), 0, "%s", out);
	/* 7 MADs plus the statistics line on stderr */
	cr_assert_eq(count_lines(out), 8, "%s", out);
	cr_assert(strstr(out, "LID 1 -> LID 3 SA Get PathRecord(0x0035)"), "%s", out);
	cr_assert(strstr(out, "SA GetResp PathRecord"), "%s", out);
	cr_assert(strstr(out, "LID 1 -> LID 2 CM Send REQ(0x0010)"), "%s", out);
	cr_assert(strstr(out, "sid 0x0000000001061c06 (TCP port 7174)"), "%s", out);
	cr_assert(strstr(out, "CM Send REP(0x0013) tid 0x000000005ca1ab1e lcid 0x00ddba11 rcid 0x5ca1ab1e"), "%s", out);
	cr_assert(strstr(out, "CM Send RTU"), "%s", out);
	cr_assert(strstr(out, "CM Send DREQ"), "%s", out);
	cr_assert(strstr(out, "CM Send DREP"), "%s", out);
	cr_assert(strstr(out, "7 frames, 7 MADs, 0 skipped"), "%s", out);
	free(out);

	snprintf(cmd, sizeof(cmd), "%s/uscm-decode %s/handshake-rocev2.pcap", bindir, tmpdir);
	cr_assert_eq(run(cmd, &out), 0);
	cr_assert(strstr(out, "127.10.0.1 -> 127.10.0.2 CM Send REQ"), "%s", out);
	free(out);
}

Test(uscm_decode, verbose_prints_every_field)
{
	char cmd[1200], *out;

	demo();
	snprintf(cmd, sizeof(cmd), "%s/uscm-decode -v %s/handshake-ib.pcap", bindir, tmpdir);
	cr_assert_eq(run(cmd, &out), 0);
	static const char *const want[] = {
		"LRH: slid 1 dlid 2", "ICRC ok", "VCRC ok", "MAD header:", "tid: 0x000000005ca1ab1e",
		"local_comm_id: 0x5ca1ab1e", "service_id: 0x0000000001061c06",
		"primary_local_ack_timeout: 15", "alternate_remote_gid: ::", "private_data: 0040b26e000000000000000000000000" "7f0a0001000000000000000000000000" "7f0a00027270696e67 (+51 zero bytes)",
		"REP:", "failover_accepted: 1", "comp_mask", "packet_life_time: 14",
	};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_assert(strstr(out, want[i]), "missing \"%s\" in:\n%s", want[i], out);
	free(out);
}

Test(uscm_decode, json_lines_are_valid_json)
{
	char cmd[1200], *out;
	int lines = 0;

	demo();
	snprintf(cmd, sizeof(cmd), "%s/uscm-decode --json %s/handshake-ib.pcap", bindir, tmpdir);
	cr_assert_eq(run(cmd, &out), 0);
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		const char *end = jvalue(line);
		cr_assert(end && *ws(end) == 0, "invalid JSON: %s", line);
		cr_assert(strstr(line, "\"frame\": "), "%s", line);
		cr_assert(strstr(line, "\"hdr\": {"), "%s", line);
		lines++;
	}
	cr_assert_eq(lines, 7);
	free(out);
}

Test(uscm_decode, skips_frames_that_are_not_mads)
{
	char cmd[1200], *out;

	snprintf(cmd, sizeof(cmd), "%s/uscm-decode %s/tests/corpus/pcap/mixed_nonmad.pcap 2>&1",
		 bindir, srcdir);
	cr_assert_eq(run(cmd, &out), 0, "%s", out);
	cr_assert(strstr(out, "3 skipped (not MADs)"), "%s", out);
	cr_assert(strstr(out, "1 bad ICRC"), "%s", out);
	cr_assert(strstr(out, "[bad ICRC]"), "%s", out);
	free(out);
}

Test(uscm_decode, truncated_file_prints_what_it_can_and_fails)
{
	char cmd[1200], *out;
	struct stat st;
	char path[600];

	demo();
	snprintf(path, sizeof(path), "%s/handshake-ib.pcap", tmpdir);
	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq(truncate(path, st.st_size - 100), 0);
	snprintf(cmd, sizeof(cmd), "%s/uscm-decode %s 2>&1", bindir, path);
	cr_assert_eq(run(cmd, &out), 1, "%s", out);
	cr_assert(strstr(out, "CM Send DREQ"), "records before the break are printed:\n%s", out);
	cr_assert(!strstr(out, "CM Send DREP"), "%s", out);
	cr_assert(strstr(out, "record 7"), "%s", out);
	cr_assert(strstr(out, "truncated"), "%s", out);
	free(out);
}

Test(uscm_decode, malformed_mad_is_flagged_not_fatal)
{
	char cmd[1200], *out;
	char path[600];

	demo();
	patch_ib_trace(REQ_MAD_BYTE(2), 2, 9, path, sizeof(path)); /* CM class version */
	snprintf(cmd, sizeof(cmd), "%s/uscm-decode %s 2>&1", bindir, path);
	cr_assert_eq(run(cmd, &out), 0, "%s", out);
	cr_assert(strstr(out, "[malformed: CM class version 9, expected 2]"), "%s", out);
	cr_assert(strstr(out, "1 malformed MADs, 0 MADs not decoded"), "%s", out);
	cr_assert(strstr(out, "[bad ICRC]"), "the edit also broke the ICRC:\n%s", out);
	cr_assert(strstr(out, "CM Send REP"), "%s", out);
	free(out);
}

Test(uscm_decode, usage_errors)
{
	char cmd[1200], *out;

	snprintf(cmd, sizeof(cmd), "%s/uscm-decode 2>&1", bindir);
	cr_assert_eq(run(cmd, &out), 2);
	cr_assert(strstr(out, "usage"));
	free(out);
	snprintf(cmd, sizeof(cmd), "%s/uscm-decode --bogus x 2>&1", bindir);
	cr_assert_eq(run(cmd, &out), 2);
	free(out);
	snprintf(cmd, sizeof(cmd), "%s/uscm-decode %s/nonexistent.pcap 2>&1", bindir, tmpdir);
	cr_assert_eq(run(cmd, &out), 1);
	cr_assert(strstr(out, "nonexistent.pcap"), "%s", out);
	free(out);
}

Test(uscm_decode, attribute_without_table_is_not_malformed)
{
	char cmd[1200], *out;
	char path[600];

	demo();
	/* The attribute ID's low byte: SAP (0x1B), a CM attribute uscm has no
	 * table for. */
	patch_ib_trace(REQ_MAD_BYTE(17), 0x10, 0x1B, path, sizeof(path));
	snprintf(cmd, sizeof(cmd), "%s/uscm-decode %s 2>&1", bindir, path);
	cr_assert_eq(run(cmd, &out), 0, "%s", out);
	cr_assert(strstr(out, "CM Send SAP(0x001b)"), "%s", out);
	cr_assert(strstr(out, "[not decoded: unknown CM attribute 0x001b]"), "%s", out);
	cr_assert(!strstr(out, "[malformed"), "%s", out);
	cr_assert(strstr(out, "0 malformed MADs, 1 MADs not decoded"), "%s", out);
	free(out);
}
