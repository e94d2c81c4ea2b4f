/*
 * uscm's CM messages on RoCE against kernel 6.1's, field by field: Debian's
 * unmodified rping on the simulated fabric's RoCE link, server on node 2
 * and client on node 1, both over uscm's librdmacm in process; the
 * server's USCM_PCAP file (every message of the connection: REQ, RTU and
 * DREQ in, REP and DREP out) decoded by uscm-decode -v, and each message
 * compared with the same message of a capture of two kernel 6.1 rdma_cm
 * hosts over rdma_rxe running rping: the shared kernel61-rxe-rping.pcap
 * ($USCM_REFERENCE_CAPTURES, else
 * $USCM_SOURCE_DIR/../shared/reference/captures; a skip without it) and
 * the kernel tier's in-tree tests/captures/kernel61-k2k-rping.pcap. Every
 * decoded field must be equal except those that name the connection or the
 * hosts: comm IDs, QPNs, PSNs, CA GUIDs, GIDs, the CMA header's addresses
 * and ports, the TID's upper half (ib_umad writes it) and what the HCA,
 * not the CM, chooses (QP1's UDP source port and BTH PSN). Two of those
 * are checked by their rule instead, on both files: the TID's lower half
 * is the byte-swapped comm ID of the side that began the transaction, and
 * the REQ's flow label is (source port * 31 + destination port) mod 2^20
 * of the rdma_cm ports. (wire_check also takes SIDR_REQ / SIDR_REP.)
 */
#include <ctype.h>

#include "libtest.h"

TestSuite(wire_kernel, .fini = lt_fini, .timeout = 180);

#define MAX_FIELDS 96

struct field {
	char name[48];
	char value[160];
};

struct msg {
	char attr[16];
	int n;
	struct field f[MAX_FIELDS];
};

enum { M_REQ, M_REP, M_RTU, M_DREQ, M_DREP, M_SIDR_REQ, M_SIDR_REP, NATTR };
static const char *const attrs[NATTR] = { "REQ",  "REP",      "RTU",     "DREQ",
					  "DREP", "SIDR_REQ", "SIDR_REP" };

/* The fields of the first message of each kind in `uscm-decode -v` output:
 * the "    name: value" lines of its block, plus "ip" (the IPv4 line's
 * traffic class and hop limit), "bth" (P_Key and destination QP) and
 * "deth" (Q_Key and source QP). */
static void parse(const char *out, struct msg m[NATTR])
{
	struct msg *cur = NULL;
	const char *l = out;

	memset(m, 0, sizeof(struct msg) * NATTR);
	while (*l) {
		const char *e = strchr(l, '\n');
		size_t len = e ? (size_t)(e - l) : strlen(l);
		char line[512];

		snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1),
			 l);
		l += len + (e ? 1 : 0);
		const char *cm = strstr(line, " CM Send "), *t = line + strspn(line, " ");
		if (isdigit((unsigned char)*t)) { /* a frame's line */
			cur = NULL;
			for (size_t i = 0; i < NATTR; i++) {
				char want[32];

				snprintf(want, sizeof(want), " CM Send %s(", attrs[i]);
				if (cm && !strncmp(cm, want, strlen(want)) && !m[i].attr[0]) {
					cur = &m[i];
					snprintf(cur->attr, sizeof(cur->attr), "%s", attrs[i]);
				}
			}
			continue;
		}
		if (line[0] != ' ')
			cur = NULL;
		if (!cur || cur->n >= MAX_FIELDS)
			continue;
		struct field *f = &cur->f[cur->n];
		unsigned a, b;
		char s1[32], s2[32];
		const char *p;

		if ((p = strstr(line, "  IPv4: ")) == line && (p = strstr(line, " tclass ")) &&
		    sscanf(p, " tclass %u hop %u", &a, &b) == 2) {
			snprintf(f->name, sizeof(f->name), "ip");
			snprintf(f->value, sizeof(f->value), "tclass %u hop %u", a, b);
			cur->n++;
		} else if (strstr(line, "  BTH: ") == line &&
			   sscanf(line, "  BTH: opcode %31s pkey %31s dest_qp %u", s1, s2, &a) == 3) {
			snprintf(f->name, sizeof(f->name), "bth");
			snprintf(f->value, sizeof(f->value), "opcode %s pkey %s dest_qp %u", s1, s2, a);
			cur->n++;
			if ((p = strstr(line, "DETH: ")) && sscanf(p, "DETH: qkey %31s src_qp %u", s1, &a) == 2 &&
			    cur->n < MAX_FIELDS) {
				f = &cur->f[cur->n++];
				snprintf(f->name, sizeof(f->name), "deth");
				snprintf(f->value, sizeof(f->value), "qkey %s src_qp %u", s1, a);
			}
		} else if (!strncmp(line, "    ", 4) && line[4] != ' ' && (p = strstr(line, ": "))) {
			snprintf(f->name, sizeof(f->name), "%.*s", (int)(p - line - 4), line + 4);
			snprintf(f->value, sizeof(f->value), "%s", p + 2);
			cur->n++;
		}
	}
}

static const char *get(const struct msg *m, const char *name)
{
	for (int i = 0; i < m->n; i++)
		if (!strcmp(m->f[i].name, name))
			return m->f[i].value;
	return NULL;
}

static unsigned long long num(const struct msg *m, const char *name)
{
	const char *v = get(m, name);

	cr_assert(v, "%s has no %s", m->attr, name);
	return strtoull(v, NULL, 0);
}

/* Fields that name the connection or its hosts, or that the HCA chooses. */
static int allowed(const char *name)
{
	static const char *const skip[] = {
		"local_comm_id", "remote_comm_id", "local_qpn", "remote_qpn_eecn", "starting_psn",
		"request_id", "qpn",
		"local_ca_guid", "primary_local_gid", "primary_remote_gid",
		"tid",                /* its rule: tid_rule() */
		"primary_flow_label", /* its rule: flow_label_rule() */
		"private_data",       /* the CMA header: compare() */
	};

	for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
		if (!strcmp(name, skip[i]))
			return 1;
	return 0;
}

/* The TID's lower half: the byte-swapped comm ID (request ID) of the side
 * that began the transaction (REQ, REP, RTU: the REQ's sender; DREQ,
 * DREP: the DREQ's, the client in these captures; SIDR_REQ, SIDR_REP: the
 * SIDR_REQ's). `want`: the messages of the exchange. */
static void tid_rule(const struct msg m[NATTR], unsigned want, const char *who)
{
	for (size_t i = 0; i < NATTR; i++) {
		if (!(want & 1u << i))
			continue;
		size_t first = i <= M_RTU ? M_REQ : i <= M_DREP ? M_DREQ : M_SIDR_REQ;
		uint32_t id = (uint32_t)num(&m[first], first == M_SIDR_REQ ? "request_id"
									   : "local_comm_id");
		uint32_t lo = (uint32_t)num(&m[i], "tid");

		cr_expect_eq(lo, __builtin_bswap32(id),
			     "%s %s: TID lower half 0x%08x, byte-swapped comm ID 0x%08x", who,
			     m[i].attr, lo, __builtin_bswap32(id));
	}
}

static unsigned hexbyte(const char *s)
{
	unsigned v = 0;

	sscanf(s, "%2x", &v);
	return v;
}

/* The REQ's flow label from the rdma_cm ports (the source port in the CMA
 * header, the destination port in the service ID); the private data's
 * CMA version and IP version bytes and its zero tail, compared as such. */
static void flow_label_rule(const struct msg *req, const char *who)
{
	const char *pd = get(req, "private_data");

	cr_assert(pd && strlen(pd) >= 8, "%s REQ private data '%s'", who, pd ? pd : "");
	unsigned sport = hexbyte(pd + 4) << 8 | hexbyte(pd + 6);
	unsigned dport = (unsigned)(num(req, "service_id") & 0xFFFF);
	unsigned fl = (unsigned)num(req, "primary_flow_label");

	cr_expect_eq(fl, (sport * 31 + dport) & 0xFFFFF,
		     "%s REQ flow label %u, ports %u -> %u give %u", who, fl, sport, dport,
		     (sport * 31 + dport) & 0xFFFFF);
}

static void compare(const struct msg k[NATTR], const struct msg u[NATTR], unsigned want)
{
	int diffs = 0;

	for (size_t i = 0; i < NATTR; i++) {
		if (!(want & 1u << i))
			continue;
		cr_assert(k[i].attr[0], "no %s in the reference capture", attrs[i]);
		cr_assert(u[i].attr[0], "no %s in uscm's capture", attrs[i]);
		for (int j = 0; j < k[i].n; j++) {
			const char *name = k[i].f[j].name, *uv = get(&u[i], name);

			if (allowed(name))
				continue;
			if (!uv || strcmp(uv, k[i].f[j].value)) {
				cr_expect_fail("%s %s: kernel 6.1 %s, uscm %s", attrs[i], name,
					       k[i].f[j].value, uv ? uv : "(absent)");
				diffs++;
			}
		}
		cr_expect_eq(u[i].n, k[i].n, "%s: %d fields decoded, the kernel's %d", attrs[i], u[i].n,
			     k[i].n);
		if (i != M_REQ && i != M_SIDR_REQ)
			continue;
		/* the CMA header's fixed bytes (version 0, IPv4) and its zero tail */
		const char *kp = get(&k[i], "private_data"), *up = get(&u[i], "private_data");
		cr_assert(kp && up);
		cr_expect(!strncmp(kp, up, 4), "%s CMA header: kernel %.4s, uscm %.4s", attrs[i], kp,
			  up);
		cr_expect_str_eq(strchr(up, ' ') ? strchr(up, ' ') : "",
				 strchr(kp, ' ') ? strchr(kp, ' ') : "", "%s private data length",
				 attrs[i]);
	}
	cr_expect_eq(diffs, 0, "%d fields differ from kernel 6.1's", diffs);
}

/* uscm-decode -v's MAD list (stdout; its summary, on stderr, must say the
 * file read cleanly). */
static char *decode(const char *path)
{
	char *out = NULL, *sum = NULL;

	cr_assert_eq(lt_sh(&sum, "%s/uscm-decode %s 2>&1 >/dev/null", lt_bin(), path), 0,
		     "uscm-decode %s:\n%s", path, sum);
	cr_assert(strstr(sum, " 0 malformed, 0 bad ICRC; 0 malformed MADs"), "%s:\n%s", path, sum);
	free(sum);
	cr_assert_eq(lt_sh(&out, "%s/uscm-decode -v %s 2>/dev/null", lt_bin(), path), 0);
	return out;
}

static void reference(char *path, size_t len, const char *name)
{
	const char *d = getenv("USCM_REFERENCE_CAPTURES"), *src = getenv("USCM_SOURCE_DIR");

	if (d && *d)
		snprintf(path, len, "%s/%s", d, name);
	else
		snprintf(path, len, "%s/../shared/reference/captures/%s", src && *src ? src : ".", name);
	/* outside the repository, so no script of ours installs it: absent, the
	 * case is left out (the in-tree capture's case always runs) */
	if (access(path, R_OK))
		tf_deselect("the shared reference capture %s is not there (USCM_REFERENCE_CAPTURES)", path);
}

/* Runs `server` on node 2 (its USCM_PCAP file server.pcap), then `client`
 * on node 1, both with the library's defaults (lt_util_env shortens the CM
 * response timeout, a REQ field, for tests that start a client early; here
 * the client starts once the server listens), and compares the server's
 * file with the kernel's capture `ref`: the messages in `want`. */
static void wire_check(const char *ref, const char *server, const char *client, unsigned want)
{
	char spcap[300], rcpath[320], *out = NULL, *rc = NULL, *kd, *ud;
	static struct msg k[NATTR], u[NATTR];
	int st;

	if (getenv("USCM_TEST_DAEMON") && atoi(getenv("USCM_TEST_DAEMON")))
		tf_deselect("USCM_PCAP captures in process only");
	lt_fabric_start("roce", 2);
	snprintf(spcap, sizeof(spcap), "%s/server.pcap", lt_dir);
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node2 USCM_PCAP=%s %s env -u USCM_CM_RESPONSE_TIMEOUT"
			   " timeout 60 %s >%s/server.out 2>&1; echo $? >%s/server.rc)"
			   " >/dev/null 2>&1 &",
			   spcap, lt_util_env(), server, lt_dir, lt_dir),
		     0);
	/* rdma_listen opens the port, which creates the file */
	cr_assert(lt_wait_until(lt_file_size(spcap) >= 24, 10000), "%s did not listen", server);
	st = lt_sh(&out, "USCM_SIM_NODE=node1 %s env -u USCM_CM_RESPONSE_TIMEOUT timeout 60 %s 2>&1",
		   lt_util_env(), client);
	cr_assert_eq(st, 0, "%s exited %d:\n%s", client, st, out);
	free(out);
	snprintf(rcpath, sizeof(rcpath), "%s/server.rc", lt_dir);
	cr_assert(lt_wait_until(lt_file_size(rcpath) > 0, 10000), "%s did not exit", server);
	lt_sh(&rc, "cat %s", rcpath);
	cr_assert(rc && rc[0] == '0', "%s exited %s", server, rc ? rc : "?");
	free(rc);

	kd = decode(ref);
	ud = decode(spcap);
	parse(kd, k);
	parse(ud, u);
	compare(k, u, want);
	tid_rule(k, want, "kernel 6.1");
	tid_rule(u, want, "uscm");
	if (want & 1u << M_REQ) {
		flow_label_rule(&k[M_REQ], "kernel 6.1");
		flow_label_rule(&u[M_REQ], "uscm");
	}
	free(kd);
	free(ud);
}

#define CONNECTION (1u << M_REQ | 1u << M_REP | 1u << M_RTU | 1u << M_DREQ | 1u << M_DREP)

static void need(const char *bin)
{
	if (lt_sh(NULL, "command -v %s >/dev/null", bin) != 0)
		tf_skip_missing("%s (Debian rdmacm-utils) is not installed", bin);
}

/* The shared capture of a kernel 6.1 rping (port 7174). */
Test(wire_kernel, rping_roce_messages_are_kernel61s)
{
	char ref[4096];

	reference(ref, sizeof(ref), "kernel61-rxe-rping.pcap");
	need("rping");
	wire_check(ref, "rping -s -C 3", "rping -c -a 127.10.0.2 -C 3", CONNECTION);
}

/* The in-tree captures of the kernel tier's kernel<->kernel checks
 * (tests/captures/): rping on port 7215. */
static void in_tree(char *ref, size_t len, const char *name)
{
	const char *src = getenv("USCM_SOURCE_DIR");

	snprintf(ref, len, "%s/tests/captures/%s", src && *src ? src : ".", name);
	cr_assert_eq(access(ref, R_OK), 0, "%s", ref);
}

Test(wire_kernel, rping_roce_messages_are_the_tiers_kernels)
{
	char ref[4096];

	in_tree(ref, sizeof(ref), "kernel61-k2k-rping.pcap");
	need("rping");
	wire_check(ref, "rping -s -p 7215 -C 3", "rping -c -a 127.10.0.2 -p 7215 -C 3", CONNECTION);
}
