/*
 * test_uscm_replay.c - build/bin/uscm-replay on captures of Debian's
 * unmodified rping over uscm's librdmacm on the simulated fabric (the
 * fabric's own --pcap records every MAD it delivers):
 *  - check passes for both sides, IB and RoCE;
 *  - one field of the REP edited: check names exactly that message and
 *    field and fails;
 *  - traces with timer-driven retries (REQs into a fault that drops every
 *    REP, REPs retried while RTUs are lost) and with an MRA (every REQ
 *    duplicated by the fabric) check clean;
 *  - live: the client side replayed against a live `rping -s`;
 *  - mutate: seeds against the engine with no finding, a mutated RTU comm
 *    ID counted as stray, and the canary showing an acceptance is caught;
 *    against a live `rping -s -P` too;
 *  - captures from elsewhere (USCM_ORACLE_PCAPS) run to the end on every
 *    side with every difference classified; the shared reference captures
 *    of kernel CMs replay with no difference on both sides;
 *  - a DREQ never retried though the trace goes on is read as the
 *    application's destroy (traces made by two engines).
 * Skipped when rping (rdmacm-utils) or the simulated fabric is missing.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm_proto/cmp_cm.h"
#include "tests/cmp_testnet.h"
#include "tests/test_fixtures.h"
#include "umad/um_pcap.h"

static char dir[64];

static const char *bin(void)
{
	const char *b = getenv("USCM_BIN_DIR");
	return b && *b ? b : "build/bin";
}

#define sh tf_sh /* tests/test_fixtures.h */

static const char *path(const char *name)
{
	return tf_path(dir, "uscm-replay.", name);
}

static void fini(void)
{
	if (dir[0] && !strncmp(dir, "/tmp/uscm-replay.", 17))
		sh(NULL, "for d in '%s'/sim*; do [ -d \"$d\" ] && %s/uscm-sim stop --dir \"$d\"; "
			 "done >/dev/null 2>&1; rm -rf '%s'", dir, bin(), dir);
	dir[0] = 0;
}

static void need_tools(void)
{
	if (sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	if (sh(NULL, "test -x %s/uscm-sim && test -e %s/../lib/librdmacm.so.1", bin(), bin()) != 0)
		tf_skip_missing("the simulated fabric or uscm's librdmacm is not built");
}

/* The environment rping needs to load uscm's librdmacm over the sim's
 * drop-ins (and, in a sanitized build, the sanitizer runtimes first). */
#define RPING_ENV                                                                          \
	"B=%s/..; P=''; if ldd $B/lib/librdmacm.so.1 | grep -q libasan; then "              \
	"P=\"LD_PRELOAD='$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)'" \
	" ASAN_OPTIONS=detect_leaks=0\"; fi; "                                              \
	"R=\"LD_LIBRARY_PATH=$B/lib:$B/sim/lib USCM_CM_RESPONSE_TIMEOUT=14 $P\"; "

/* A fresh two-node fabric in dir/<name> (more `uscm-sim start` options in
 * `start`, e.g. a seed and fault rules), its capture in dir/<name>.pcap:
 * `rping -s -C 1` on node2, then `rping -c` on node1 with env `cenv`.
 * Returns the client's exit status. */
static int capture_env(const char *name, const char *link, const char *start, const char *cenv,
		       const char *senv)
{
	char *out = NULL;
	int st;

	path("x");
	st = sh(&out,
		RPING_ENV
		"D='%s/%s'; %s/uscm-sim start --dir $D --nodes 2 --link %s --pcap $D.pcap --no-uscmd %s "
		">/dev/null 2>&1 || exit 100; export USCM_SIM_DIR=$D USCM_HOSTS=$D/hosts; "
		"(eval USCM_SIM_NODE=node2 $R %s timeout 60 rping -s -C 1 >$D.server 2>&1 &); "
		/* the server has attached to node2, then a little time to listen */
		"for i in $(seq 100); do %s/uscm-sim status --dir $D | grep -q ' node2 .*[0-9]$' "
		"&& break; sleep 0.1; done; sleep 0.3; "
		"for i in $(seq 30); do eval USCM_SIM_NODE=node1 $R %s timeout 60 "
		"rping -c -a 127.10.0.2 -v -C 1 >$D.client 2>&1; rc=$?; "
		"grep -q REJECTED $D.client || break; sleep 0.3; done; sleep 0.5; "
		"%s/uscm-sim stop --dir $D >/dev/null 2>&1; exit $rc",
		bin(), dir, name, bin(), link, start, senv, bin(), cenv, bin());
	cr_assert_neq(st, 100, "uscm-sim start failed");
	free(out);
	return st;
}

static int capture(const char *name, const char *link, const char *start, const char *cenv)
{
	return capture_env(name, link, start, cenv, "");
}

static int replay(char **out, const char *args)
{
	return sh(out, "%s/uscm-replay %s 2>&1", bin(), args);
}

static int count(const char *s, const char *what)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

TestSuite(replay, .fini = fini, .timeout = 240);

/* 1 when both sides check with 0 differences (no assertion). */
static int sides_clean(const char *pcap, const char *s1, const char *s2)
{
	char args[512], *out;
	int ok = 1;

	for (int k = 0; k < 2; k++) {
		snprintf(args, sizeof(args), "check %s --side %s --tolerance-ms 150", pcap, k ? s2 : s1);
		ok &= replay(&out, args) == 0 && strstr(out, "0 differences") != NULL;
		free(out);
	}
	return ok;
}

static void both_sides_clean(const char *pcap, const char *s1, const char *s2)
{
	char args[512], *out;

	for (int k = 0; k < 2; k++) {
		/* A loaded machine delays the traced process's timers: 150 ms of
		 * slack is still less than one retry interval (201 ms). */
		snprintf(args, sizeof(args), "check %s --side %s --tolerance-ms 150", pcap,
			 k ? s2 : s1);
		int st = replay(&out, args);
		cr_expect_eq(st, 0, "%s:\n%s", args, out);
		cr_expect(strstr(out, "0 differences"), "%s:\n%s", args, out);
		cr_expect(strstr(out, "connection played") || strstr(out, "connections played"),
			  "%s:\n%s", args, out);
		free(out);
	}
}

Test(replay, rping_ib_both_sides_check_clean)
{
	char *out;

	need_tools();
	cr_assert_eq(capture("ib", "ib", "", ""), 0);
	sh(&out, "%s/uscm-replay sides %s", bin(), path("ib.pcap"));
	cr_assert(strstr(out, "lid:2 sent") && strstr(out, "lid:3 sent"), "%s", out);
	free(out);
	both_sides_clean(path("ib.pcap"), "lid:2", "lid:3");
	/* Sides by QPN (the client's QP is 0x140 on a fresh fabric... or not:
	 * find it from the trace) and the JSON report. */
	sh(&out, "%s/uscm-decode %s 2>/dev/null | sed -n 's/.* REQ(0x0010).* qpn \\(0x[0-9a-f]*\\).*/\\1/p' | head -1",
	   bin(), path("ib.pcap"));
	out[strcspn(out, "\n")] = 0;
	char args[512], *j;
	snprintf(args, sizeof(args), "check %s --side qpn:%s --json", path("ib.pcap"), out);
	cr_expect_eq(replay(&j, args), 0, "%s", j);
	cr_expect(strstr(j, "\"mode\": \"check\"") && strstr(j, "\"differences\": []"), "%s", j);
	free(j);
	free(out);
}

Test(replay, rping_roce_both_sides_check_clean)
{
	need_tools();
	cr_assert_eq(capture("roce", "roce", "", ""), 0);
	both_sides_clean(path("roce.pcap"), "ip:127.10.0.1", "gid:::ffff:127.10.0.2");
}

/* Rewrites one field of the first REQ in a pcap (RoCEv2 or IB): the REQ's
 * byte `at` (MAD offset 24 + at) set to v under mask, the MAD found by its
 * header (base version 1, class CM, version 2, Send, attribute REQ). The
 * ICRC goes stale; the replay reads the MAD regardless. */
static void patch_req(const char *file, size_t at, uint8_t mask, uint8_t v)
{
	FILE *f = fopen(file, "r+b");
	uint8_t rec[16], buf[2048];
	long pos = 24;

	cr_assert(f, "%s", file);
	for (;;) {
		cr_assert_eq(fseek(f, pos, SEEK_SET), 0);
		cr_assert_eq(fread(rec, 1, 16, f), 16, "no REQ in %s", file);
		uint32_t incl = (uint32_t)rec[8] | (uint32_t)rec[9] << 8 | (uint32_t)rec[10] << 16 |
				(uint32_t)rec[11] << 24;
		size_t n = fread(buf, 1, incl < sizeof(buf) ? incl : sizeof(buf), f);
		for (size_t o = 0; o + 256 <= n; o++) {
			const uint8_t *m = buf + o;

			if (m[0] != 1 || m[1] != 7 || m[2] != 2 || m[3] != 3 || m[16] || m[17] != 0x10)
				continue;
			long off = pos + 16 + (long)o + 24 + (long)at;
			uint8_t b = (uint8_t)((m[24 + at] & ~mask) | (v & mask));

			cr_assert_eq(fseek(f, off, SEEK_SET), 0);
			cr_assert_eq(fwrite(&b, 1, 1, f), 1);
			fclose(f);
			return;
		}
		pos += 16 + (long)incl;
	}
}

/* On RoCE the player builds the REQ's path as uscm's library does from
 * the application's inputs (addresses, ports, ToS), so LIDs, flow label
 * and local ACK timeout are uscm's choices, checked against S's: a REQ
 * with the old values (LID 0, another flow label, ACK timeout 17) differs
 * in exactly those fields; the fields taken from the trace are listed,
 * and those three are not among them. */
Test(replay, roce_req_path_is_uscms_choice)
{
	char args[512], *out;

	need_tools();
	cr_assert_eq(capture("roce", "roce", "", ""), 0);
	snprintf(args, sizeof(args), "check %s --side ip:127.10.0.1 --tolerance-ms 150",
		 path("roce.pcap"));
	cr_assert_eq(replay(&out, args), 0, "%s", out);
	cr_expect(!strncmp(out, "0 differences\n", 14), "%s", out);
	const char *taken = strstr(out, "taken from the trace (S's inputs, not checked):");
	cr_assert(taken, "%s", out);
	cr_expect(strstr(taken, " REQ.service_id ") && strstr(taken, " REQ.primary_local_gid "),
		  "%s", out);
	cr_expect(!strstr(taken, "REQ.primary_flow_label") && !strstr(taken, "REQ.primary_local_lid") &&
			  !strstr(taken, "REQ.primary_local_ack_timeout"),
		  "%s", out);
	free(out);
	/* --json lists them too */
	snprintf(args, sizeof(args), "check %s --side ip:127.10.0.1 --tolerance-ms 150 --json",
		 path("roce.pcap"));
	replay(&out, args);
	cr_expect(strstr(out, "\"from_trace\": [\"REQ.primary_local_gid\""), "%s", out);
	free(out);

	/* what uscm sent before: LIDs 0, flow label 0, local ACK timeout 17 */
	for (size_t b = 52; b < 56; b++)
		patch_req(path("roce.pcap"), b, 0xFF, 0);
	patch_req(path("roce.pcap"), 88, 0xFF, 0);
	patch_req(path("roce.pcap"), 89, 0xFF, 0);
	patch_req(path("roce.pcap"), 90, 0xF0, 0);
	patch_req(path("roce.pcap"), 95, 0xF8, 17 << 3);
	snprintf(args, sizeof(args), "check %s --side ip:127.10.0.1 --tolerance-ms 150",
		 path("roce.pcap"));
	cr_expect_eq(replay(&out, args), 1, "%s", out);
	cr_expect(strstr(out, "REQ      primary_local_lid: trace 0x0, engine 0xffff"), "%s", out);
	cr_expect(strstr(out, "REQ      primary_remote_lid: trace 0x0, engine 0xffff"), "%s", out);
	cr_expect(strstr(out, "REQ      primary_flow_label: trace 0x0, engine 0x"), "%s", out);
	cr_expect(strstr(out, "REQ      primary_local_ack_timeout: trace 0x11, engine 0x13"), "%s", out);
	cr_expect(strstr(out, "\n4 differences"), "%s", out);
	free(out);
}

/* On IB the player builds the REQ's path from the SA's PathRecord answer
 * in the trace, as the library does: the path fields are uscm's choices
 * for that answer, not copied from the REQ, so a REQ that does not carry
 * what the answer says (here SL 5) differs. */
Test(replay, ib_req_path_is_uscms_choice_for_the_sa_answer)
{
	char args[512], *out;

	need_tools();
	cr_assert_eq(capture("ibpath", "ib", "", ""), 0);
	snprintf(args, sizeof(args), "check %s --side lid:2 --tolerance-ms 150", path("ibpath.pcap"));
	cr_assert_eq(replay(&out, args), 0, "%s", out);
	cr_expect(!strncmp(out, "0 differences\n", 14), "%s", out);
	const char *taken = strstr(out, "taken from the trace (S's inputs, not checked):");
	cr_assert(taken, "%s", out);
	cr_expect(strstr(taken, " REQ.service_id ") && !strstr(taken, "REQ.primary_local_lid") &&
			  !strstr(taken, "REQ.primary_sl") && !strstr(taken, "REQ.path_mtu"),
		  "%s", out);
	free(out);
	patch_req(path("ibpath.pcap"), 94, 0xF0, 5 << 4); /* primary SL 5 */
	cr_expect_eq(replay(&out, args), 1, "%s", out);
	cr_expect(strstr(out, "REQ      primary_sl: trace 0x5, engine 0x0"), "%s", out);
	cr_expect(strstr(out, "\n1 difference"), "%s", out);
	free(out);
}

/* The issue's own words: each side records itself with the library's
 * USCM_PCAP (not the fabric's capture), and each side's own file checks
 * clean as that side, on IB and on RoCE. The side's TIDs in its own file
 * are the ones it wrote, before the MAD layer rewrote their upper bits. */
Test(replay, uscm_pcap_own_captures_check_clean)
{
	char senv[300], cenv[300], srv[256], cli[256], *out;
	static const struct { const char *link, *server, *client; } v[] = {
		{ "ib", "lid:3", "lid:2" },
		{ "roce", "ip:127.10.0.2", "ip:127.10.0.1" },
	};

	need_tools();
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		char name[32];
		snprintf(name, sizeof(name), "own-%s", v[i].link);
		snprintf(srv, sizeof(srv), "%s", path(name));
		strcat(srv, ".server.pcap");
		snprintf(cli, sizeof(cli), "%s", path(name));
		strcat(cli, ".client.pcap");
		snprintf(senv, sizeof(senv), "USCM_PCAP=%s", srv);
		snprintf(cenv, sizeof(cenv), "USCM_PCAP=%s", cli);
		cr_assert_eq(capture_env(name, v[i].link, "", cenv, senv), 0);
		sh(&out, "for f in %s %s; do %s/uscm-decode $f; done 2>&1", srv, cli, bin());
		cr_assert(count(out, " REQ(0x0010)") == 2 && count(out, " REP(0x0013)") == 2 &&
				  count(out, " DREQ(0x0015)") == 2,
			  "each file holds the REQ, REP and DREQ once:\n%s", out);
		free(out);
		for (int k = 0; k < 2; k++) {
			char args[512];
			snprintf(args, sizeof(args), "check %s --side %s --tolerance-ms 150",
				 k ? cli : srv, k ? v[i].client : v[i].server);
			int st = replay(&out, args);
			cr_expect_eq(st, 0, "%s:\n%s", args, out);
			cr_expect(strstr(out, "0 differences") &&
					  (strstr(out, "connection played") ||
					   strstr(out, "connections played")),
				  "%s:\n%s", args, out);
			free(out);
		}
	}
}

/* Copies `in` to `out` (MADs only) with field `field` of the nth (1-based)
 * message `attr` set to v, or with `field` NULL that MAD's time stamp moved
 * by v ns; returns that MAD's frame number in `out`. */
static unsigned edit_nth(const char *in, const char *out, uint16_t attr, int nth,
			 const char *field, uint64_t v, uint64_t *was)
{
	char err[256];
	struct um_pcap_reader *r = um_pcap_open_read(in, err, sizeof(err));
	struct um_pcap_writer *w;
	struct um_pcap_mad p;
	unsigned n = 0, hit = 0;

	cr_assert(r, "%s", err);
	w = um_pcap_open_write(out, um_pcap_linktype(r));
	cr_assert(w);
	while (um_pcap_next(r, &p) == 1) {
		n++;
		if (!hit && p.mad[1] == UMAD_CLASS_CM && ((p.mad[16] << 8) | p.mad[17]) == attr &&
		    --nth == 0) {
			if (field) {
				const struct cmp_field *f = cmp_layout_find(cmp_cm_layout(attr), field);
				cr_assert(f);
				*was = cmp_bits_get(p.mad + CMP_MAD_HDR_SIZE, f->byte, f->bit, f->width);
				cmp_bits_set(p.mad + CMP_MAD_HDR_SIZE, f->byte, f->bit, f->width, v);
			} else {
				p.meta.ts_ns += v;
			}
			hit = n;
		}
		cr_assert_eq(um_pcap_write_mad(w, &p.meta, p.mad), 0);
	}
	um_pcap_close_read(r);
	cr_assert_eq(um_pcap_close_write(w), 0);
	cr_assert(hit, "no %s in %s", cmp_cm_attr_str(attr), in);
	return hit;
}

static unsigned edit(const char *in, const char *out, uint16_t attr, const char *field, uint64_t v,
		     uint64_t *was)
{
	return edit_nth(in, out, attr, 1, field, v, was);
}

Test(replay, edited_rep_field_is_named)
{
	char args[512], want[256], *out;
	uint64_t was = 0;

	need_tools();
	cr_assert_eq(capture("ib", "ib", "", ""), 0);
	/* The target ACK delay is the passive side's CA property: the engine
	 * must send its own (15 on the sim), whatever the user passes. */
	unsigned fr = edit(path("ib.pcap"), path("edited.pcap"), UMAD_CM_ATTR_REP,
			   "target_ack_delay", 3, &was);
	cr_assert_eq(was, 15);
	snprintf(args, sizeof(args), "check %s --side lid:3", path("edited.pcap"));
	cr_expect_eq(replay(&out, args), 1, "%s", out);
	snprintf(want, sizeof(want), "field     frame %-5u REP      target_ack_delay: trace 0x3, engine 0xf",
		 fr);
	cr_expect(strstr(out, want), "want '%s' in:\n%s", want, out);
	cr_expect(strstr(out, "\n1 difference, field 1\n"), "exactly one difference:\n%s", out);
	free(out);
	/* The client only receives that REP: nothing to report there. */
	snprintf(args, sizeof(args), "check %s --side lid:2", path("edited.pcap"));
	cr_expect_eq(replay(&out, args), 0, "%s", out);
	free(out);
	/* JSON names the same. */
	snprintf(args, sizeof(args), "check %s --side lid:3 --json", path("edited.pcap"));
	cr_expect_eq(replay(&out, args), 1, "%s", out);
	cr_expect(strstr(out, "\"kind\": \"field\"") && strstr(out, "\"msg\": \"REP\"") &&
		  strstr(out, "\"field\": \"target_ack_delay\"") &&
		  strstr(out, "\"trace\": \"0x3\", \"peer\": \"0xf\""), "%s", out);
	free(out);
}

Test(replay, req_timeout_retries_match_the_engine_timers)
{
	char args[512], *out;

	need_tools();
	/* Every REP lost: the client's REQ retries (3, then REJ Timeout) all
	 * come from its timers, which the engine must reproduce. */
	capture("reqtmo", "ib", "--fault 'drop=100%,class=0x07,attr=0x13'", "USCM_CM_RETRIES=3");
	sh(&out, "%s/uscm-decode %s 2>/dev/null", bin(), path("reqtmo.pcap"));
	cr_assert_geq(count(out, "CM Send REQ"), 4, "%s", out);
	cr_assert(strstr(out, "reason 4 (timeout)") || strstr(out, "reason 4"), "%s", out);
	free(out);
	snprintf(args, sizeof(args), "check %s --side lid:2 --tolerance-ms 150", path("reqtmo.pcap"));
	cr_expect_eq(replay(&out, args), 0, "%s", out);
	cr_expect(strstr(out, "retransmits 3"), "%s", out);
	free(out);
	/* The first retry 100 ms late in the trace: the engine's timer
	 * fired 100 ms earlier, and the next retry's interval is 100 ms
	 * longer than the trace's. */
	uint64_t unused;
	unsigned fr = edit_nth(path("reqtmo.pcap"), path("late.pcap"), UMAD_CM_ATTR_REQ, 2, NULL,
			       100000000u, &unused);
	snprintf(args, sizeof(args), "check %s --side lid:2", path("late.pcap"));
	cr_expect_eq(replay(&out, args), 1, "%s", out);
	char want[64];
	snprintf(want, sizeof(want), "timing    frame %-5u REQ", fr);
	cr_expect(strstr(out, want), "want '%s' in:\n%s", want, out);
	cr_expect(strstr(out, "ms earlier than in the trace"), "%s", out);
	cr_expect_eq(count(out, "timing    frame"), 2, "%s", out);
	cr_expect(!strstr(out, "missing") && !strstr(out, "extra"), "%s", out);
	free(out);
	/* The server never got to answer on the wire: said, not guessed. */
	snprintf(args, sizeof(args), "check %s --side lid:3", path("reqtmo.pcap"));
	cr_expect_eq(replay(&out, args), 1, "%s", out);
	cr_expect(strstr(out, "S never answered"), "%s", out);
	free(out);
}

/* A capture (rtuSEED.pcap) of rping with half the RTUs lost (which ones:
 * the fabric's seed); the number of REPs in it. */
static int capture_rtu_loss(int seed, char *name, size_t cap)
{
	char start[96], *out = NULL;
	int reps;

	snprintf(name, cap, "rtu%d", seed);
	snprintf(start, sizeof(start), "--seed %d --fault 'drop=50%%,class=0x07,attr=0x14'", seed);
	capture(name, "ib", start, "");
	strncat(name, ".pcap", cap - strlen(name) - 1);
	sh(&out, "%s/uscm-decode %s 2>/dev/null", bin(), path(name));
	reps = count(out, "CM Send REP");
	free(out);
	return reps;
}

Test(replay, rep_retries_while_rtus_are_lost_check_clean)
{
	char name[32], *o2;
	int seed = 0, reps = 0, retakes = 0;

	need_tools();
	/* Capture until a REP retry (the server's timer) is in the trace. On
	 * a loaded machine the server may take an RTU off its socket after
	 * its REP timer fired, and the capture then shows a retry after the
	 * RTU that should have stopped it (the replay, in the trace's time,
	 * rightly says "missing REP"): such a capture is retaken, at most
	 * twice, with the next seeds. */
	while (++seed <= 12) {
		reps = capture_rtu_loss(seed, name, sizeof(name));
		if (reps < 2)
			continue;
		if (retakes == 2 || sides_clean(path(name), "lid:2", "lid:3"))
			break;
		retakes++;
	}
	cr_assert_geq(reps, 2, "no REP retry in %d captures", seed - 1);
	both_sides_clean(path(name), "lid:2", "lid:3");
	char args[600];
	snprintf(args, sizeof(args), "check %s --side lid:3", path(name));
	replay(&o2, args);
	cr_expect(!strstr(o2, "retransmits 0"), "the server's REP retries:\n%s", o2);
	free(o2);
}

Test(replay, duplicated_req_mra_trace_checks_clean)
{
	char args[512], *out = NULL;
	int mras = 0;

	need_tools();
	/* Every REQ delivered twice: the copy finds the server's connection
	 * not accepted yet, and its CM answers with an MRA, as the CMA does. */
	for (int k = 0; k < 3 && !mras; k++) {
		cr_assert_eq(capture("dup", "ib", "--fault 'dup=100%,class=0x07,attr=0x10'", ""), 0);
		free(out);
		sh(&out, "%s/uscm-decode %s 2>/dev/null", bin(), path("dup.pcap"));
		mras = count(out, "CM Send MRA");
	}
	cr_assert_gt(mras, 0, "no MRA in 3 captures:\n%s", out);
	free(out);
	/* The server's MRA is the engine's own answer to the duplicate. */
	snprintf(args, sizeof(args), "check %s --side lid:3 --tolerance-ms 150", path("dup.pcap"));
	cr_expect_eq(replay(&out, args), 0, "%s", out);
	cr_expect(!strncmp(out, "0 differences", 13), "%s", out);
	free(out);
	/* The client sent its REQ once; the second copy is the fabric's. */
	snprintf(args, sizeof(args), "check %s --side lid:2 --tolerance-ms 150", path("dup.pcap"));
	cr_expect_eq(replay(&out, args), 0, "%s", out);
	cr_expect(strstr(out, "duplicate frame") && strstr(out, "(0 unexplained)"), "%s", out);
	free(out);
}

Test(replay, live_client_against_rping_server)
{
	char *out = NULL;
	int rejs = 1;

	need_tools();
	/* A client that came before the server listened was rejected and
	 * retried: that trace would replay a REJ the live server does not
	 * send. Capture again then. */
	for (int k = 0; k < 3 && rejs; k++) {
		cr_assert_eq(capture("ib", "ib", "", ""), 0);
		free(out);
		sh(&out, "%s/uscm-decode %s 2>/dev/null", bin(), path("ib.pcap"));
		rejs = count(out, "CM Send REJ");
	}
	cr_assert_eq(rejs, 0, "every capture has a rejected connect:\n%s", out);
	free(out);
	int st = sh(&out,
		    RPING_ENV
		    "D='%s/simlive'; %s/uscm-sim start --dir $D --nodes 2 --link ib --no-uscmd >/dev/null 2>&1 "
		    "|| exit 100; export USCM_SIM_DIR=$D USCM_HOSTS=$D/hosts; "
		    "(eval USCM_SIM_NODE=node2 $R timeout 60 rping -s -C 1 >$D.server 2>&1 &); "
		    "for i in $(seq 100); do %s/uscm-sim status --dir $D | grep -q ' node2 .*[0-9]$' "
		    "&& break; sleep 0.1; done; sleep 0.5; "
		    "LD_LIBRARY_PATH=$B/sim/lib timeout 60 %s/uscm-replay live %s --side lid:2 "
		    "--node node1 --tolerance-ms 500 2>&1; rc=$?; %s/uscm-sim stop --dir $D >/dev/null 2>&1; exit $rc",
		    bin(), dir, bin(), bin(), bin(), path("ib.pcap"), bin());
	cr_assert_neq(st, 100);
	cr_expect_eq(st, 0, "%s", out);
	cr_expect(strstr(out, "0 differences"), "%s", out);
	/* REP and DREP came back from the live server and were compared. */
	cr_expect(strstr(out, "2 answers paired with the trace"), "%s", out);
	free(out);
}

Test(replay, mutate_seeds_against_the_engine)
{
	char args[512], *out;

	need_tools();
	cr_assert_eq(capture("ib", "ib", "", ""), 0);
	int malformed = 0, stray = 0;
	for (int seed = 1; seed <= 2; seed++)
		for (int k = 0; k < 2; k++) {
			snprintf(args, sizeof(args), "mutate %s --side %s --seed %d --count 40",
				 path("ib.pcap"), k ? "lid:3" : "lid:2", seed);
			cr_expect_eq(replay(&out, args), 0, "%s:\n%s", args, out);
			cr_expect(strstr(out, "runs: crash 0, hang 0, leak 0, accepted 0"), "%s", out);
			malformed += count(out, "malformed 1");
			stray += count(out, "stray 1") + count(out, "mismatch 1");
			free(out);
		}
	/* The mutations reached the engine's drop paths. */
	cr_expect_gt(malformed, 0);
	cr_expect_gt(stray, 0);
}

Test(replay, mutated_rtu_comm_id_is_stray_and_canary_is_caught)
{
	char args[512], *out;
	int run = -1;

	need_tools();
	cr_assert_eq(capture("ib", "ib", "", ""), 0);
	snprintf(args, sizeof(args), "mutate %s --side lid:3 --seed 5 --count 300",
		 path("ib.pcap"));
	replay(&out, args);
	for (char *p = out; (p = strstr(p, "\nrun ")); p++) {
		int n;
		if (sscanf(p, "\nrun %d:", &n) == 1 && strstr(p, "comm-id") &&
		    strstr(p, "comm-id") < strchr(p + 1, '\n') && strstr(p, "RTU remote_comm_id") &&
		    strstr(p, "RTU remote_comm_id") < strchr(p + 1, '\n')) {
			run = n;
			break;
		}
	}
	free(out);
	cr_assert_geq(run, 0, "no RTU comm ID mutation in 300 runs of seed 5");
	snprintf(args, sizeof(args), "mutate %s --side lid:3 --seed 5 --only %d", path("ib.pcap"),
		 run);
	cr_expect_eq(replay(&out, args), 0, "%s", out);
	cr_expect(strstr(out, "RTU remote_comm_id") && strstr(out, "(must be rejected)"), "%s", out);
	cr_expect(strstr(out, "stray 1"), "the engine counted it stray:\n%s", out);
	cr_expect(strstr(out, "accepted 0"), "%s", out);
	free(out);
	/* The canary re-sends genuine MADs while claiming they must be
	 * rejected: every one the engine acts on must be reported. */
	snprintf(args, sizeof(args), "mutate %s --side lid:3 --seed 1 --count 3 --canary",
		 path("ib.pcap"));
	cr_expect_eq(replay(&out, args), 1, "%s", out);
	cr_expect(strstr(out, "accepted 3"), "%s", out);
	free(out);
}

Test(replay, mutate_live_against_a_persistent_rping_server)
{
	char *out;

	need_tools();
	cr_assert_eq(capture("ib", "ib", "", ""), 0);
	/* `rping -s -P` serves connection after connection; each run replays
	 * the client with one of its MADs mutated and fresh identities, then
	 * the unmutated trace must still be answered. Seed 1's first three
	 * runs end in complete connections (no REP left to time out). */
	int st = sh(&out,
		    RPING_ENV
		    "D='%s/simmut'; %s/uscm-sim start --dir $D --nodes 2 --link ib --no-uscmd >/dev/null 2>&1 "
		    "|| exit 100; export USCM_SIM_DIR=$D USCM_HOSTS=$D/hosts; "
		    "eval USCM_SIM_NODE=node2 $R timeout 60 rping -s -P >$D.server 2>&1 & pid=$!; "
		    "for i in $(seq 100); do %s/uscm-sim status --dir $D | grep -q ' node2 .*[0-9]$' "
		    "&& break; sleep 0.1; done; sleep 0.5; "
		    "LD_LIBRARY_PATH=$B/sim/lib timeout 60 %s/uscm-replay mutate %s --side lid:2 --live "
		    "--node node1 --seed 1 --count 3 --timeout-ms 500 --peer-pid $pid 2>&1; rc=$?; "
		    "echo; echo canary:; LD_LIBRARY_PATH=$B/sim/lib timeout 60 %s/uscm-replay mutate %s "
		    "--side lid:2 --live --node node1 --seed 1 --count 2 --canary --timeout-ms 500 2>&1; "
		    "echo canary rc=$?; %s/uscm-sim stop --dir $D >/dev/null 2>&1; exit $rc",
		    bin(), dir, bin(), bin(), bin(), path("ib.pcap"), bin(), path("ib.pcap"), bin());
	cr_assert_neq(st, 100);
	cr_expect_eq(st, 0, "%s", out);
	cr_expect(strstr(out, "the unmutated trace got 2 answers"), "%s", out);
	cr_expect(strstr(out, "3 runs: crash 0, hang 0, accepted 0"), "%s", out);
	/* Two genuine REQs claimed must-reject: the live server's REPs are
	 * reported as acceptances. */
	cr_expect(strstr(out, "2 runs: crash 0, hang 0, accepted 2") &&
		  strstr(out, "canary rc=1"), "%s", out);
	free(out);
}

Test(replay, usage_and_bad_input)
{
	char args[512], *out;

	cr_expect_eq(replay(&out, ""), 2);
	free(out);
	snprintf(args, sizeof(args), "check /nonexistent.pcap --side lid:1");
	cr_expect_eq(replay(&out, args), 2);
	cr_expect(strstr(out, "nonexistent"), "%s", out);
	free(out);
	cr_expect_eq(replay(&out, "check x.pcap --side bogus:1"), 2);
	cr_expect(strstr(out, "bad side"), "%s", out);
	free(out);
	/* A trace without CM traffic for that side. */
	FILE *f = fopen(path("empty.pcap"), "w");
	cr_assert(f);
	fclose(f);
	struct um_pcap_writer *w = um_pcap_open_write(path("empty.pcap"), UM_PCAP_LINKTYPE_ERF);
	cr_assert(w);
	cr_assert_eq(um_pcap_close_write(w), 0);
	snprintf(args, sizeof(args), "check %s --side lid:1", path("empty.pcap"));
	cr_expect_eq(replay(&out, args), 2);
	cr_expect(strstr(out, "no CM MAD"), "%s", out);
	free(out);
}

/* Every side of one capture, as `uscm-replay sides` lists them. */
static int sides_of(const char *file, char sides[8][128])
{
	char *out = NULL;
	int n = 0;

	sh(&out, "%s/uscm-replay sides '%s' | cut -d' ' -f1", bin(), file);
	for (char *s = strtok(out, "\n"); s && n < 8; s = strtok(NULL, "\n"))
		snprintf(sides[n++], 128, "%s", s);
	free(out);
	return n;
}

/* Captures named by USCM_ORACLE_PCAPS (anything: real hardware, other
 * services): check must run to the end on every side and every difference
 * must be of a known class with a reason. */
Test(replay, external_captures_run_to_the_end)
{
	const char *env = getenv("USCM_ORACLE_PCAPS");
	char *files[64];
	int n = 0;

	if (env && *env) {
		char *dup = strdup(env), *save = NULL;
		for (char *t = strtok_r(dup, ":", &save); t && n < 64; t = strtok_r(NULL, ":", &save))
			files[n++] = strdup(t);
		free(dup);
	}
	if (!n)
		tf_deselect("no captures named by USCM_ORACLE_PCAPS");
	for (int i = 0; i < n; i++) {
		char sides[8][128], args[1200], *out;
		int nsides = sides_of(files[i], sides);
		for (int k = 0; k < nsides; k++) {
			snprintf(args, sizeof(args), "check '%s' --side %s --json", files[i], sides[k]);
			int st = replay(&out, args);
			cr_expect(st == 0 || st == 1, "%s exited %d:\n%s", args, st, out);
			cr_expect(strstr(out, "{\"mode\": \"check\"") && strstr(out, "]}\n"),
				  "%s: no complete report:\n%s", args, out);
			/* every difference has a kind and a reason */
			cr_expect_eq(count(out, "\"kind\": "), count(out, "\"reason\": \"") -
					 count(out, "\"reason\": \"\""), "%s:\n%s", args, out);
			free(out);
		}
		cr_expect_gt(nsides, 0, "%s: no side with CM traffic", files[i]);
		free(files[i]);
	}
}

/* The shared reference captures (kernel CMs: tf_reference_captures): both
 * sides of every one replay with no difference at all, each with its
 * connections played — the engine makes the kernel's choices, destroys
 * included (rxe-rdma-cm-read-write.pcap: the active side sends one DREQ and
 * never retries it while its DREP takes 12.4 s). */
Test(replay, reference_captures_both_sides_clean)
{
	char **files = NULL;
	size_t n = 0;

	tf_reference_captures(&files, &n);
	if (!n)
		cr_skip_test("no reference captures ($USCM_SOURCE_DIR/../shared/reference/captures/*.pcap)");
	for (size_t i = 0; i < n; i++) {
		char sides[8][128], args[1200], *out;
		int nsides = sides_of(files[i], sides);

		cr_expect_geq(nsides, 2, "%s: an active and a passive side expected", files[i]);
		for (int k = 0; k < nsides; k++) {
			snprintf(args, sizeof(args), "check '%s' --side %s", files[i], sides[k]);
			int st = replay(&out, args);
			cr_expect_eq(st, 0, "%s exited %d:\n%s", args, st, out);
			cr_expect(!strncmp(out, "0 differences\n", 14), "%s:\n%s", args, out);
			cr_expect(!strstr(out, ", 0 connections played"), "%s:\n%s", args, out);
			free(out);
		}
		free(files[i]);
	}
	free(files);
}

/* ---- destroys inferred from a trace -------------------------------------- */

/* Records one MAD node `from` (LID from + 1) sends on a native IB trace. */
static void rec(struct um_pcap_writer *w, const struct tn *T, int from, const uint8_t *mad)
{
	struct um_frame_meta m = { 0 };

	m.ts_ns = T->now;
	m.link = UM_LINK_IB;
	m.slid = (uint16_t)(from + 1);
	m.dlid = (uint16_t)(2 - from);
	m.pkey = 0xFFFF;
	m.dest_qp = m.src_qp = 1;
	m.qkey = 0x80010000;
	cr_assert_eq(um_pcap_write_mad(w, &m, mad), 0);
}

/* Delivers node `from`'s queued MADs to the other node, recording them. */
static void send_rec(struct um_pcap_writer *w, struct tn *T, int from)
{
	struct cmp_tx tx;

	while (tn_take(T, from, &tx)) {
		rec(w, T, from, tx.mad);
		tn_deliver(T, 1 - from, tx.mad);
	}
	tn_events(T, 0);
	tn_events(T, 1);
}

/* A trace made by two engines, A (LID 1) connecting to B (LID 2): REQ,
 * REP, RTU, A's DREQ; B's DREP 12.4 s later (its application is slow).
 * `destroyed`: A's application destroys its id right after the DREQ (as
 * the kernel's cm_destroy_id, no retry); else A stays and its DREQ is
 * retried on its timer (4.43 s: 2 * conv(14) + conv(20)) until the DREP. */
static void dreq_trace(const char *file, int destroyed)
{
	struct tn T;
	struct um_pcap_writer *w = um_pcap_open_write(file, UM_PCAP_LINKTYPE_ERF);
	struct cmp_listen *l;
	struct cmp_conn *ca, *cb;
	struct cmp_req_param rq = { 0 };
	struct cmp_rep_param rp = { 0 };

	cr_assert(w);
	tn_init(&T, NULL);
	cr_assert_eq(cmp_listen(T.n[1].e, 0x0000000001061234ULL, 0, 0, NULL, &l), 0);
	rq.primary = &T.n[0].to_peer;
	rq.service_id = 0x0000000001061234ULL; /* RDMA_PS_TCP, port 0x1234 */
	rq.qpn = 0x111;
	rq.qp_type = CMP_QPT_RC;
	rq.starting_psn = 0x1000;
	rq.responder_resources = rq.initiator_depth = 1;
	rq.retry_count = rq.rnr_retry_count = 7;
	cr_assert_eq(cmp_connect(T.n[0].e, &rq, NULL, &ca, T.now), 0);
	send_rec(w, &T, 0);
	cr_assert(T.n[1].nev == 1 && T.n[1].ev[0].type == CMP_EV_REQ_RECEIVED);
	cb = T.n[1].ev[0].conn;
	T.now += 1000000;
	rp.qpn = 0x222;
	rp.starting_psn = 0x2000;
	rp.responder_resources = rp.initiator_depth = 1;
	rp.rnr_retry_count = 7;
	cr_assert_eq(cmp_accept(T.n[1].e, cb, &rp, T.now), 0);
	send_rec(w, &T, 1);
	T.now += 1000000;
	cr_assert_eq(cmp_rtu(T.n[0].e, ca, NULL, 0, T.now), 0);
	send_rec(w, &T, 0);
	T.now += 1000000;
	cr_assert_eq(cmp_disconnect(T.n[0].e, ca, NULL, 0, T.now), 0);
	send_rec(w, &T, 0);
	cmp_time drep_at = T.now + 12400000000ULL;
	if (destroyed)
		cmp_conn_destroy(T.n[0].e, ca, T.now);
	while (cmp_engine_get_expiry(T.n[0].e) < drep_at) {
		T.now = cmp_engine_get_expiry(T.n[0].e);
		cmp_engine_handle_expiry(T.n[0].e, T.now);
		send_rec(w, &T, 0);
	}
	T.now = drep_at;
	cr_assert_eq(cmp_disconnect(T.n[1].e, cb, NULL, 0, T.now), 0);
	send_rec(w, &T, 1);
	cr_assert_eq(um_pcap_close_write(w), 0);
	tn_fini(&T);
}

/* S sent one DREQ and no retry, though the trace goes on 12.4 s, past its
 * DREQ timer: S's application destroyed the id (the kernel's destroy sends
 * nothing more). The replay infers it and finds no difference; with the
 * retries in the trace it infers nothing and pairs them; the passive side
 * is clean either way. */
Test(replay, silent_dreq_retry_reads_as_destroy)
{
	char args[512], *out;

	dreq_trace(path("destroyed.pcap"), 1);
	dreq_trace(path("retried.pcap"), 0);
	snprintf(args, sizeof(args), "check %s --side lid:1", path("destroyed.pcap"));
	cr_expect_eq(replay(&out, args), 0, "%s:\n%s", args, out);
	cr_expect(!strncmp(out, "0 differences\n", 14), "%s:\n%s", args, out);
	cr_expect(strstr(out, "retransmits 0 ") && strstr(out, "destroyed 1 id (inferred"),
		  "%s:\n%s", args, out);
	free(out);

	snprintf(args, sizeof(args), "check %s --side lid:1", path("retried.pcap"));
	cr_expect_eq(replay(&out, args), 0, "%s:\n%s", args, out);
	cr_expect(!strncmp(out, "0 differences\n", 14), "%s:\n%s", args, out);
	cr_expect(strstr(out, "retransmits 2 ") && !strstr(out, "destroyed"), "%s:\n%s", args,
		  out);
	free(out);

	for (int k = 0; k < 2; k++) {
		snprintf(args, sizeof(args), "check %s --side lid:2",
			 path(k ? "retried.pcap" : "destroyed.pcap"));
		cr_expect_eq(replay(&out, args), 0, "%s:\n%s", args, out);
		cr_expect(!strncmp(out, "0 differences\n", 14), "%s:\n%s", args, out);
		free(out);
	}
}
