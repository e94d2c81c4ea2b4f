/*
 * USCM_PCAP=FILE in the library (umad/um_capture.c), with unmodified Debian
 * rdmacm-utils binaries over build/lib on the simulated fabric: an rping
 * connection with a capture file on each side, on IB and on RoCE, checked
 * by uscm-decode and tshark (REQ/REP/RTU/DREQ/DREP, and the SA PathRecord
 * on IB, each in the direction it really went; 0 malformed, 0 bad ICRC);
 * a file that cannot be created (one stderr line, the run unchanged); one
 * USCM_PCAP file exported to two processes (the second refused in one
 * line, the first's file whole) and the %h / %p pattern naming a file per
 * process; and a crash: processes connecting in a loop are SIGKILLed
 * mid-run and their files must still read cleanly to the last record.
 */
#include "libtest.h"

TestSuite(capture, .fini = lt_fini, .timeout = 180);

static void need(const char *bin)
{
	if (lt_sh(NULL, "command -v %s >/dev/null", bin) != 0)
		tf_skip_missing("%s is not installed (Debian rdmacm-utils / tshark)", bin);
}

/* Starts `rping -s ARGS` on node 2 in the background with USCM_PCAP=pcap
 * (exit status into server.rc) and returns once it listens: rdma_listen
 * opens the port, which creates the capture file, under the library's lock
 * that also guards receiving, so no REQ can find the port without the
 * listener. */
static void rping_server(const char *pcap, const char *args)
{
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node2 USCM_PCAP=%s %s timeout 60 rping -s %s"
			   " >%s/server.out 2>&1; echo $? >%s/server.rc) >/dev/null 2>&1 &",
			   pcap, lt_util_env(), args, lt_dir, lt_dir),
		     0);
	cr_assert(lt_wait_until(lt_file_size(pcap) >= 24, 10000), "rping -s did not listen");
}

/* The exit status of the server rping_server started (waits 10 s). */
static char *rping_server_rc(void)
{
	char path[300], *rc = NULL;

	snprintf(path, sizeof(path), "%s/server.rc", lt_dir);
	lt_wait_until(lt_file_size(path) > 0, 10000);
	lt_sh(&rc, "cat %s 2>/dev/null", path);
	return rc;
}

/* rping server on node 2 (background) and client on node 1, each with
 * USCM_PCAP. */
static void rping_captured(const char *link)
{
	char *out = NULL, *rc, spcap[300];
	int st;

	need("rping");
	lt_fabric_start(link, 2);
	snprintf(spcap, sizeof(spcap), "%s/server.pcap", lt_dir);
	rping_server(spcap, "-C 3");
	st = lt_sh(&out, "USCM_SIM_NODE=node1 USCM_PCAP=%s/client.pcap %s timeout 60 rping -c"
			 " -a 127.10.0.2 -v -C 3 2>&1", lt_dir, lt_util_env());
	cr_assert_eq(st, 0, "rping -c exited %d:\n%s", st, out);
	free(out);
	rc = rping_server_rc();
	cr_assert(rc && rc[0] == '0', "rping -s exited %s", rc ? rc : "?");
	free(rc);
}

/* uscm-decode's output for a file (asserting a clean read). */
static char *decode(const char *file)
{
	char *out = NULL;

	cr_assert_eq(lt_sh(&out, "%s/uscm-decode %s/%s 2>&1", lt_bin(), lt_dir, file), 0,
		     "uscm-decode %s:\n%s", file, out);
	cr_assert(strstr(out, " 0 malformed, 0 bad ICRC; 0 malformed MADs"), "%s:\n%s", file, out);
	cr_assert(!strstr(out, "[malformed") && !strstr(out, "[bad ICRC]"), "%s", out);
	return out;
}

/* The source endpoint of the last line of `out` showing `what` (e.g.
 * "Send REQ("): the text between the time and " -> ". "" if none. */
static const char *src_of(const char *out, const char *what, char *buf, size_t len)
{
	const char *hit = NULL, *p, *ls, *arrow;
	size_t n;

	buf[0] = 0;
	for (p = out; (p = strstr(p, what)); p++)
		hit = p;
	if (!hit)
		return buf;
	for (ls = hit; ls > out && ls[-1] != '\n'; ls--)
		;
	while (*ls == ' ')
		ls++;
	ls = strchr(ls, ' '); /* after the frame number */
	while (ls && *ls == ' ')
		ls++;
	ls = ls ? strchr(ls, ' ') : NULL; /* after the time */
	if (!ls || !(arrow = strstr(ls, " -> ")) || arrow > hit)
		return buf;
	ls++;
	n = (size_t)(arrow - ls) < len - 1 ? (size_t)(arrow - ls) : len - 1;
	memcpy(buf, ls, n);
	buf[n] = 0;
	return buf;
}

/* tshark's summary lines for file (with a display filter, or NULL). */
static char *tshark(const char *file, const char *filter)
{
	char *out = NULL;

	lt_sh(&out, "tshark -r %s/%s %s%s%s 2>/dev/null", lt_dir, file, filter ? "-Y '" : "",
	      filter ? filter : "", filter ? "'" : "");
	return out;
}

static size_t count_substr(const char *s, const char *what)
{
	size_t n = 0;

	for (; (s = strstr(s, what)); s += strlen(what))
		n++;
	return n;
}

static void check_capture(const char *link)
{
	char c[64], s[64], b1[64], b2[64];
	char *cli, *srv;
	int ib = !strcmp(link, "ib");

	rping_captured(link);
	cli = decode("client.pcap");
	srv = decode("server.pcap");

	/* Who is who: the client sent the REQ in its own file. */
	snprintf(c, sizeof(c), "%s", src_of(cli, "CM Send REQ(", b1, sizeof(b1)));
	snprintf(s, sizeof(s), "%s", src_of(cli, "CM Send REP(", b2, sizeof(b2)));
	cr_assert(c[0] && s[0] && strcmp(c, s), "client file: REQ from '%s', REP from '%s'\n%s", c,
		  s, cli);
	if (!ib) {
		cr_expect_str_eq(c, "127.10.0.1");
		cr_expect_str_eq(s, "127.10.0.2");
	}
	/* The client's file: REQ, RTU, DREQ out; REP in. */
	cr_expect_str_eq(src_of(cli, "CM Send RTU(", b1, sizeof(b1)), c, "%s", cli);
	cr_expect_str_eq(src_of(cli, "CM Send DREQ(", b1, sizeof(b1)), c, "%s", cli);
	/* The server's file: REQ, RTU, DREQ in; REP, DREP out. */
	cr_expect_str_eq(src_of(srv, "CM Send REQ(", b1, sizeof(b1)), c, "%s", srv);
	cr_expect_str_eq(src_of(srv, "CM Send REP(", b1, sizeof(b1)), s, "%s", srv);
	cr_expect_str_eq(src_of(srv, "CM Send RTU(", b1, sizeof(b1)), c, "%s", srv);
	cr_expect_str_eq(src_of(srv, "CM Send DREQ(", b1, sizeof(b1)), c, "%s", srv);
	cr_expect_str_eq(src_of(srv, "CM Send DREP(", b1, sizeof(b1)), s, "%s", srv);
	/* The same connection on both sides: the REQ's comm ID. */
	const char *l1 = strstr(cli, "REQ(0x0010)"), *l2 = strstr(srv, "REQ(0x0010)");
	cr_assert(l1 && l2);
	l1 = strstr(l1, "lcid ");
	l2 = strstr(l2, "lcid ");
	cr_assert(l1 && l2 && !strncmp(l1, l2, 15), "REQ comm IDs differ");
	if (ib) {
		/* rdma_resolve_route's PathRecord query and the SA's answer. */
		const char *sm = src_of(cli, "SA GetResp PathRecord(", b2, sizeof(b2));
		cr_expect_str_eq(src_of(cli, "SA Get PathRecord(", b1, sizeof(b1)), c, "%s", cli);
		cr_expect(sm[0] && strcmp(sm, c), "the GetResp comes from the SA:\n%s", cli);
	}
	free(cli);
	free(srv);

	/* The server's ladder: one connection, every request answered. */
	cr_assert_eq(lt_sh(&srv, "%s/uscm-decode --ladder %s/server.pcap", lt_bin(), lt_dir), 0);
	cr_expect(strstr(srv, " in 1 group; ") && strstr(srv, " 0 malformed, 0 unanswered"), "%s",
		  srv);
	cr_expect(strstr(srv, "== 1. connection: comm IDs "), "%s", srv);
	if (!ib)
		cr_expect(strstr(srv, "127.10.0.1              127.10.0.2"), "lanes:\n%s", srv);
	free(srv);

	/* tshark: every frame dissected, nothing malformed, no expert info. */
	need("tshark");
	for (int i = 0; i < 2; i++) {
		const char *f = i ? "server.pcap" : "client.pcap";
		char *bad = tshark(f, "_ws.malformed || _ws.expert"), *all = tshark(f, NULL);

		cr_expect_str_eq(bad, "", "malformed frames / expert info in %s", f);
		/* At least once: a slow peer (sanitizers, a loaded machine) can
		 * make a REQ or REP be resent. */
		cr_expect_geq(count_substr(all, "CM: ConnectRequest"), 1, "%s:\n%s", f, all);
		cr_expect_geq(count_substr(all, "CM: ConnectReply"), 1, "%s:\n%s", f, all);
		cr_expect_geq(count_substr(all, "CM: ReadyToUse"), 1, "%s:\n%s", f, all);
		cr_expect_geq(count_substr(all, "CM: DisconnectRequest"), 1, "%s:\n%s", f, all);
		if (i)
			cr_expect_geq(count_substr(all, "CM: DisconnectReply"), 1, "%s:\n%s", f, all);
		if (ib && !i)
			cr_expect_geq(count_substr(all, "SubnAdmGetResp(PathRecord)"), 1, "%s", all);
		free(bad);
		free(all);
	}
}

Test(capture, rping_ib)
{
	check_capture("ib");
}

Test(capture, rping_roce)
{
	check_capture("roce");
}

/* A file that cannot be created: one line on stderr, capture off, and the
 * application runs as without USCM_PCAP. */
Test(capture, unwritable_file_is_one_warning)
{
	char *out = NULL, spcap[300];
	int st;

	need("rping");
	lt_fabric_start("ib", 2);
	snprintf(spcap, sizeof(spcap), "%s/server.pcap", lt_dir);
	rping_server(spcap, "-C 1");
	st = lt_sh(&out, "USCM_SIM_NODE=node1 USCM_PCAP=%s/no/such/dir/x.pcap %s timeout 60"
			 " rping -c -a 127.10.0.2 -v -C 1 2>&1", lt_dir, lt_util_env());
	cr_assert_eq(st, 0, "%s", out);
	cr_expect(strstr(out, "ping data: rdma-ping-0"), "%s", out);
	const char *w = strstr(out, "uscm: USCM_PCAP: cannot create ");
	cr_assert(w, "the warning:\n%s", out);
	cr_expect(!strstr(w + strlen("uscm: USCM_PCAP"), "USCM_PCAP"), "said once:\n%s", out);
	cr_expect(strstr(w, "not capturing\n"), "%s", out);
	free(out);
}

/* USCM_PCAP=FILE exported to both sides, as `export` does: the server, the
 * first to open FILE, keeps it; the client says so in one line and runs
 * without capturing. (Each used to truncate FILE and write at its own
 * offsets: a corrupted mixture.) The file is the server's alone and reads
 * cleanly: no PathRecord query in it (only the client resolves a route). */
Test(capture, one_file_for_two_processes_keeps_the_first)
{
	char *out = NULL, *rc, *dec, *bad, pcap[300];
	const char *w;
	int st;

	need("rping");
	lt_fabric_start("ib", 2);
	snprintf(pcap, sizeof(pcap), "%s/both.pcap", lt_dir);
	rping_server(pcap, "-C 3");
	st = lt_sh(&out, "USCM_SIM_NODE=node1 USCM_PCAP=%s %s timeout 60 rping -c -a 127.10.0.2"
			 " -v -C 3 2>&1", pcap, lt_util_env());
	cr_assert_eq(st, 0, "rping -c exited %d:\n%s", st, out);
	cr_expect(strstr(out, "ping data: rdma-ping-2"), "the run is unchanged:\n%s", out);
	w = strstr(out, "uscm: USCM_PCAP: ");
	cr_assert(w, "no warning:\n%s", out);
	cr_expect(strstr(w, "both.pcap is being written by another process; not capturing"), "%s",
		  out);
	cr_expect(!strstr(w + 1, "uscm: USCM_PCAP"), "said once:\n%s", out);
	rc = rping_server_rc();
	cr_assert(rc && rc[0] == '0', "rping -s exited %s", rc ? rc : "?");
	free(rc);
	dec = decode("both.pcap");
	cr_expect(strstr(dec, "CM Send REQ(") && strstr(dec, "CM Send REP(") &&
			  strstr(dec, "CM Send DREP("),
		  "the server's connection:\n%s", dec);
	cr_expect(!strstr(dec, "PathRecord"), "the client's SA query got in:\n%s", dec);
	free(dec);
	if (lt_sh(NULL, "command -v tshark >/dev/null") == 0) {
		bad = tshark("both.pcap", "_ws.malformed || _ws.expert");
		cr_expect_str_eq(bad, "", "malformed frames / expert info in both.pcap");
		free(bad);
	} else {
		tf_warn_missing("tshark not installed: its read of both.pcap skipped");
	}
	free(out);
}

/* One exported pattern, a file per process: %h the host name (on the
 * simulated fabric both nodes are this host), %p each process's id. */
Test(capture, pattern_names_a_file_per_process)
{
	char host[256] = "", pat[300], f[2][600], pidf[2][300], *out = NULL, *ls = NULL;
	pid_t pid[2];
	int st;

	need("rping");
	lt_fabric_start("ib", 2);
	cr_assert_eq(gethostname(host, sizeof(host) - 1), 0);
	snprintf(pat, sizeof(pat), "%s/cm.%%h.%%p.pcap", lt_dir);
	snprintf(pidf[0], sizeof(pidf[0]), "%s/server.pid", lt_dir);
	snprintf(pidf[1], sizeof(pidf[1]), "%s/client.pid", lt_dir);
	/* exec: the pid the shell reports is rping's */
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node2 USCM_PCAP='%s' %s exec rping -s -C 1"
			   " >%s/server.out 2>&1 & echo $! >%s) >/dev/null 2>&1",
			   pat, lt_util_env(), lt_dir, pidf[0]),
		     0);
	cr_assert(lt_wait_until((pid[0] = lt_pid_file(pidf[0])) > 0, 10000));
	snprintf(f[0], sizeof(f[0]), "%s/cm.%s.%d.pcap", lt_dir, host, (int)pid[0]);
	cr_assert(lt_wait_until(lt_file_size(f[0]) >= 24, 10000), "no %s", f[0]);
	st = lt_sh(&out, "USCM_SIM_NODE=node1 USCM_PCAP='%s' %s timeout 60 sh -c 'echo $$ >%s;"
			 " exec rping -c -a 127.10.0.2 -v -C 1' 2>&1", pat, lt_util_env(), pidf[1]);
	cr_assert_eq(st, 0, "rping -c exited %d:\n%s", st, out);
	cr_expect(!strstr(out, "USCM_PCAP"), "%s", out);
	free(out);
	pid[1] = lt_pid_file(pidf[1]);
	snprintf(f[1], sizeof(f[1]), "%s/cm.%s.%d.pcap", lt_dir, host, (int)pid[1]);
	cr_assert(lt_wait_until(lt_pid_gone(pid[0]), 10000), "rping -s did not exit");
	cr_assert_eq(lt_sh(&ls, "cd %s && ls cm.*.pcap", lt_dir), 0);
	cr_expect(strstr(ls, f[0] + strlen(lt_dir) + 1) && strstr(ls, f[1] + strlen(lt_dir) + 1),
		  "want %s and %s, have:\n%s", f[0], f[1], ls);
	cr_expect_eq(count_substr(ls, ".pcap"), 2, "%s", ls);
	free(ls);
	/* each its own side: the client's with its PathRecord query */
	for (int i = 0; i < 2; i++) {
		char *dec = decode(f[i] + strlen(lt_dir) + 1);

		cr_expect(strstr(dec, "CM Send REQ("), "%s:\n%s", f[i], dec);
		cr_expect_eq(strstr(dec, "SA Get PathRecord(") != NULL, i == 1, "%s:\n%s", f[i],
			     dec);
		free(dec);
	}
}

/* uscm-decode's output for the file of a SIGKILLed writer: a clean read,
 * or (returns 1) every record whole but a last one cut short at the end
 * of the file — where the kernel stops a write(2) for a fatal signal (a
 * page boundary; docs/capture.md "Crash safety"). Nothing malformed. */
static int killed_file_read(const char *file, char **out)
{
	char path[600];
	unsigned long long off = 0;
	unsigned got = 0, want = 0;
	const char *e;
	int st, hdr;

	*out = NULL;
	snprintf(path, sizeof(path), "%s/%s", lt_dir, file);
	st = lt_sh(out, "%s/uscm-decode %s 2>&1", lt_bin(), path);
	cr_assert(!strstr(*out, "[malformed") && !strstr(*out, "[bad ICRC]"), "%s", *out);
	if (st == 0) {
		cr_assert(strstr(*out, " 0 malformed, 0 bad ICRC; 0 malformed MADs"), "%s:\n%s",
			  file, *out);
		return 0;
	}
	e = strstr(*out, " at byte offset ");
	cr_assert(e, "uscm-decode %s exited %d:\n%s", file, st, *out);
	hdr = strstr(e, "truncated record header") != NULL;
	cr_assert(sscanf(e, " at byte offset %llu: truncated record %*s (%u of %u bytes)", &off,
			 &got, &want) == 3 && got < want,
		  "%s: only a record cut short may end the file:\n%s", file, *out);
	/* The cut record ends the file: nothing was lost behind it. */
	cr_assert_eq((long)(off + (hdr ? 0 : 16) + got), lt_file_size(path),
		     "%s: the cut record is not the file's end:\n%s", file, *out);
	return 1;
}

/* cmtime connects and disconnects many times; both processes are SIGKILLed
 * while MADs flow. Each file must read to its end: every record whole but,
 * at most, a last one the kernel cut short at a page boundary (see
 * killed_file_read), in uscm-decode and in tshark. */
Test(capture, sigkill_leaves_a_readable_file)
{
	char *out = NULL, spcap[300], pidf[2][300];
	long size = 0;

	need("cmtime");
	lt_fabric_start("ib", 2);
	snprintf(spcap, sizeof(spcap), "%s/server.pcap", lt_dir);
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node2 USCM_PCAP=%s %s exec cmtime -c 2000"
			   " >/dev/null 2>&1 & echo $! >%s/server.pid) >/dev/null 2>&1",
			   spcap, lt_util_env(), lt_dir),
		     0);
	/* The file is made as rdma_listen opens the port: listening. */
	cr_assert(lt_wait_until(lt_file_size(spcap) >= 24, 10000), "the server did not listen");
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node1 USCM_PCAP=%s/client.pcap %s exec cmtime -s 127.10.0.2"
			   " -c 2000 >/dev/null 2>&1 & echo $! >%s/client.pid) >/dev/null 2>&1",
			   lt_dir, lt_util_env(), lt_dir),
		     0);
	/* Wait for a few hundred records in the server's file (~320 bytes each),
	 * then kill both in the middle of the run. */
	lt_wait_until((size = lt_file_size(spcap)) >= 100000, 30000);
	/* Both still running (mid-run), then killed. */
	int alive = lt_sh(NULL, "kill -0 $(cat %s/client.pid) && kill -0 $(cat %s/server.pid)",
			  lt_dir, lt_dir);
	lt_sh(NULL, "kill -KILL $(cat %s/client.pid) $(cat %s/server.pid) 2>/dev/null", lt_dir,
	      lt_dir);
	cr_assert_geq(size, 100000, "the server's capture did not grow (%ld bytes)", size);
	cr_assert_eq(alive, 0, "cmtime had already exited: not a mid-run kill");
	/* Read the files once neither process can write another byte. */
	snprintf(pidf[0], sizeof(pidf[0]), "%s/client.pid", lt_dir);
	snprintf(pidf[1], sizeof(pidf[1]), "%s/server.pid", lt_dir);
	for (int i = 0; i < 2; i++)
		cr_assert(lt_wait_until(lt_pid_gone(lt_pid_file(pidf[i])), 10000), "%s: still running",
			  pidf[i]);
	for (int i = 0; i < 2; i++) {
		const char *f = i ? "server.pcap" : "client.pcap";
		char *tsh = NULL;
		long n;

		int cut = killed_file_read(f, &out);

		n = (long)count_substr(out, " CM Send ");
		cr_expect_gt(n, i ? 300 : 10, "%s: %ld CM MADs", f, n);
		free(out);
		if (lt_sh(NULL, "command -v tshark >/dev/null") == 0) {
			lt_sh(&tsh, "tshark -r %s/%s 2>&1 >/dev/null", lt_dir, f);
			/* tshark may only say what uscm-decode said: cut short. */
			cr_expect(!strstr(tsh, "cut short") || cut, "%s: %s", f, tsh);
			cr_expect(!strstr(tsh, "malformed") && !strstr(tsh, "rror"), "%s: %s", f, tsh);
			free(tsh);
		} else {
			tf_warn_missing("tshark not installed: its read of %s skipped", f);
		}
	}
}
