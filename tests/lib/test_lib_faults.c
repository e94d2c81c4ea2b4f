/*
 * The fault matrix (docs/reliability.md, "Fault matrix"): the real library
 * (build/lib/librdmacm.so.1) over the simulated fabric, a uscm-churn server
 * on node 2 and client on node 1 (tools/uscm_churn.c), one fault per cell.
 * Each cell writes down what must happen — which connection outcomes are
 * correct, how many, and within what time — and checks it, plus: no hang
 * (every process exits within its bound, no awaited event missing), no
 * crash (exit status 0 or the SIGKILL the cell gave), every outcome
 * accounted for (the RESULT lines add up), nothing left in the library at
 * exit (USCM_EXIT_REPORT: ids, connections and timers all 0), and in the
 * ASan build no leak (LeakSanitizer at the processes' exit).
 *
 * A side paused at a step (--pause-at) stops its application, not the
 * library's progress thread, which would carry on (a paused client still
 * answers a REP with an RTU): so the cells that kill a process "after"
 * a message also drop the next message with a fault rule, pinning the
 * handshake at that step when the SIGKILL comes.
 *
 * CM timers are short so cells are fast: response timeout 10 (4 ms),
 * every CM timer capped at 100 ms, TimeWait 50 ms, 15 retries unless the
 * cell says otherwise; SA queries: rdma_resolve_route(2000) = 4 tries of
 * 500 ms. Cells marked `full` run only with USCM_FAULTS_FULL=1 (`scripts/
 * fault-matrix.sh`); USCM_FAULTS_ONLY=name runs one cell;
 * USCM_FAULTS_REPORT=file appends one line per cell with the measured
 * outcome and time (the script prints it as the table of the doc).
 */
#include <stdint.h>

#include <criterion/parameterized.h>

#include "churntest.h"

enum action {
	A_NONE,           /* client runs to its end */
	A_KILL_SERVER,    /* SIGKILL the server once it printed PAUSED */
	A_KILL_CLIENT,    /* SIGKILL the client once it printed PAUSED */
	A_LINK_DOWN,      /* client holds its connections; node 2's link goes down; client lets go */
	A_SM_KILLED,      /* the SM/SA process is killed before the client starts */
	A_SA_LINK_DOWN,   /* the SM node's link goes down before the client starts */
	A_FABRIC_RESTART, /* while the client churns: every link down and the SM killed, then back */
};

struct cell {
	const char *name;
	const char *fault;        /* uscm-sim fault spec, or NULL */
	int retries;              /* USCM_CM_RETRIES (0: 15) */
	const char *server;       /* uscm-churn server arguments */
	const char *client;       /* uscm-churn client arguments (after the address) */
	enum action act;
	/* Outcomes (tools/uscm_churn.c): `name=N`, `name=all` (every attempt),
	 * `name>=N`, `name>=P%` (of attempts), or a bare `name` (any number);
	 * every outcome not named must be 0. */
	const char *client_expect;
	const char *server_expect;
	unsigned bound_ms;        /* the client (A_KILL_CLIENT: the server's outcome) within */
	int full;                 /* on demand only */
	const char *expected;     /* the expectation in words (the doc's table) */
	int roce;                 /* a RoCE fabric (no SA) instead of IB */
	/* Daemon mode (USCM_TEST_DAEMON=1), where it differs: a killed
	 * process's uscmd closes for it as the kernel does when the rdma_cm
	 * fd closes (REJ for a half-open connection, DREQ for an established
	 * one, DREP for a DREQ received), so the peer is told instead of
	 * timing out. NULL: as in-process. */
	const char *client_expect_d, *server_expect_d, *expected_d;
};

#define LOSSY_CLIENT "ok>=99% unreachable route_timeout disc_timeout"
#define LOSSY_SERVER "ok>=99% unreachable rejected disc_timeout"

static const struct cell cells[] = {
	{ "baseline", NULL, 0, "", "-n 100 -c 16", A_NONE, "ok=all", "ok=100", 10000, 0,
	  "no fault: every connection establishes, echoes, disconnects", 0, NULL, NULL, NULL },
	{ "mad_loss_1pct", "drop=1%,qpt=mad", 0, "", "-n 200 -c 16", A_NONE, LOSSY_CLIENT,
	  LOSSY_SERVER, 30000, 0,
	  "establishes after retries (error events only if a retry budget ran out)", 0, NULL, NULL, NULL },
	{ "mad_loss_5pct", "drop=5%,qpt=mad", 0, "", "-n 200 -c 16", A_NONE, LOSSY_CLIENT,
	  LOSSY_SERVER, 30000, 0, "as 1%", 0, NULL, NULL, NULL },
	{ "mad_loss_20pct", "drop=20%,qpt=mad", 0, "", "-n 200 -c 16", A_NONE, LOSSY_CLIENT,
	  LOSSY_SERVER, 30000, 0, "as 1%", 0, NULL, NULL, NULL },
	{ "mad_dup_20pct", "dup=20%,qpt=mad", 0, "", "-n 200 -c 16", A_NONE, "ok=all", "ok=200",
	  30000, 0, "duplicates are absorbed: every connection establishes", 0, NULL, NULL, NULL },
	{ "mad_reorder_20pct", "reorder=20%:20ms,qpt=mad", 0, "", "-n 200 -c 16", A_NONE, "ok=all",
	  "ok=200", 30000, 0, "MADs held back 20 ms and overtaken: every connection establishes", 0, NULL, NULL, NULL },
	{ "cm_delay_beyond_timeout", "delay=250ms,class=0x07", 0, "", "-n 16 -c 4", A_NONE,
	  "ok=all", "ok=16", 20000, 0,
	  "every CM MAD 250 ms late, 2.5x the 100 ms timer: REQs retried, duplicates absorbed, establishes", 0, NULL, NULL, NULL },
	{ "cm_delay_beyond_budget", "delay=1500ms,class=0x07", 2, "", "-n 4 -c 4", A_NONE,
	  "unreachable=all", "unreachable rejected open", 5000, 0,
	  "REP can't arrive within 3 tries x 100 ms: UNREACHABLE (-ETIMEDOUT)", 0, NULL, NULL, NULL },
	{ "no_listener_loss20", "drop=20%,dup=20%,qpt=mad", 0, "", "-n 20 -c 4 -p 7399", A_NONE,
	  "rejected=all", "", 10000, 0,
	  "nobody listens on the port (the server's CM answers REJ 'invalid service ID'), 20% loss + dup: REJECTED", 0, NULL, NULL, NULL },
	{ "sa_mads_dropped", "drop=100%,class=0x03", 0, "", "-n 4 -c 4", A_NONE,
	  "route_timeout=all", "", 8000, 0,
	  "PathRecord query unanswered: ROUTE_ERROR (-ETIMEDOUT) after 4 x 500 ms", 0, NULL, NULL, NULL },
	{ "sa_node_link_down", NULL, 0, "", "-n 4 -c 4", A_SA_LINK_DOWN, "route_timeout=all", "",
	  8000, 0, "the SM node's link down: ROUTE_ERROR (-ETIMEDOUT) after 4 x 500 ms", 0, NULL, NULL, NULL },
	{ "sm_killed", NULL, 0, "", "-n 4 -c 4", A_SM_KILLED, "route_error=all", "", 8000, 0,
	  "SM/SA process gone, its node up: the node's MAD layer answers 'unsupported' (as ib_mad does), ROUTE_ERROR (-EPROTO) at once", 0, NULL, NULL, NULL },
	{ "server_killed_after_req", NULL, 3, "--pause-at req", "-n 1", A_KILL_SERVER,
	  "unreachable=1", NULL, 10000, 0,
	  "REQ received, never answered (MRA only): client UNREACHABLE (-ETIMEDOUT)", 0,
	  "rejected=1", NULL, "REQ received, server gone: its uscmd rejects the REQ: client REJECTED" },
	{ "client_killed_after_req", "drop=100%,class=0x07,attr=0x0013", 3, "",
	  "-n 1 --pause-at connect", A_KILL_CLIENT, NULL, "unreachable=1", 10000, 0,
	  "REPs lost, client gone after its REQ: server UNREACHABLE (-ETIMEDOUT)", 0,
	  NULL, "rejected=1", "REPs lost, client gone after its REQ: its uscmd cancels it with REJ (timeout): server REJECTED" },
	{ "client_killed_after_rep", "drop=100%,class=0x07,attr=0x0014", 3, "",
	  "-n 1 --pause-at est", A_KILL_CLIENT, NULL, "unreachable=1", 10000, 0,
	  "RTU lost, client gone after the REP: server UNREACHABLE (-ETIMEDOUT)", 0,
	  NULL, "data_timeout=1", "RTU lost, client gone after the REP: its uscmd sends DREQ, which the server's CM takes for the RTU: ESTABLISHED, then DISCONNECTED before any data" },
	{ "server_killed_after_rtu", NULL, 3, "--pause-at est", "-n 1 --stage-ms 3000",
	  A_KILL_SERVER, "wc_error data_timeout", NULL, 10000, 0,
	  "established, server gone: the SEND fails (retry exceeded) or its echo never comes; DREQ unanswered, DISCONNECTED (-ETIMEDOUT)", 0,
	  "peer_closed=1", NULL, "established, server gone: its uscmd sends DREQ: client DISCONNECTED (0) before the echo" },
	{ "client_killed_after_rtu", NULL, 3, "", "-n 1 --pause-at est", A_KILL_CLIENT, NULL,
	  "open=1", 3000, 0,
	  "established, client gone: the server's connection stays up (the CM has no keepalive) until it is torn down; exit within bound", 0,
	  NULL, "data_timeout=1", "established, client gone: its uscmd sends DREQ: server DISCONNECTED before any data, within bound" },
	{ "server_killed_during_dreq", NULL, 3, "--pause-at dreq", "-n 1", A_KILL_SERVER,
	  "disc_timeout=1", NULL, 10000, 0,
	  "DREQ received, DREP never sent: client DISCONNECTED (-ETIMEDOUT)", 0,
	  "ok=1", NULL, "DREQ received, server gone: its uscmd answers with DREP: client DISCONNECTED (0)" },
	{ "link_down_mid_connection", NULL, 3, "", "-n 4 -c 4 --hold", A_LINK_DOWN,
	  "disc_timeout=4", "open=4", 10000, 0,
	  "node 2's link down under 4 connections: DREQs unanswered, DISCONNECTED (-ETIMEDOUT); server keeps them until it ends", 0, NULL, NULL, NULL },
	{ "fabric_restart", NULL, 0, "", "-d 4 -c 4 --rate 50 --stage-ms 5000", A_FABRIC_RESTART,
	  "ok>=20 unreachable disc_timeout wc_error data_timeout route_timeout route_error addr_error conn_error",
	  "ok>=20 unreachable rejected disc_timeout data_timeout open", 45000, 0,
	  "all links down and the SM killed for 1 s while churning, then SM restarted: correct error events during, connections establish again after", 0, NULL, NULL, NULL },
	{ "churn_2k_loss20_dup_reorder", "drop=20%,dup=20%,reorder=20%:5ms,qpt=mad", 0, "",
	  "-n 2000 -c 64", A_NONE, LOSSY_CLIENT, LOSSY_SERVER, 60000, 0,
	  "2000 connections, 64 in flight, 20% loss + 20% dup + 20% reorder of every MAD: 100% correct outcomes", 0, NULL, NULL, NULL },
	{ "roce_churn_500_loss20_dup_reorder", "drop=20%,dup=20%,reorder=20%:5ms,qpt=mad", 0, "",
	  "-n 500 -c 64", A_NONE, LOSSY_CLIENT, LOSSY_SERVER, 60000, 0,
	  "the same on RoCE (routes built locally, no SA): 100% correct outcomes", 1, NULL, NULL, NULL },
	{ "churn_10k_loss20_dup_reorder", "drop=20%,dup=20%,reorder=20%:5ms,qpt=mad", 0, "",
	  "-n 10000 -c 64", A_NONE, LOSSY_CLIENT, LOSSY_SERVER, 300000, 1,
	  "10000 connections as above: 100% correct outcomes", 0, NULL, NULL, NULL },
};
#define NCELLS (sizeof(cells) / sizeof(cells[0]))

static const char *const outcomes[] = {
	"ok", "disc_timeout", "unreachable", "rejected", "route_timeout", "route_error", "addr_error",
	"conn_error", "wc_error", "data_timeout", "open", "peer_closed", "bad_data", "hang", "other",
};
#define NOUT (sizeof(outcomes) / sizeof(outcomes[0]))

/* What a cell does besides its fault rule, for the report. */
static const char *const action_text[] = {
	[A_NONE] = "",
	[A_KILL_SERVER] = "SIGKILL server when paused",
	[A_KILL_CLIENT] = "SIGKILL client when paused",
	[A_LINK_DOWN] = "link node2 down under held connections",
	[A_SM_KILLED] = "uscm-sim kill sm",
	[A_SA_LINK_DOWN] = "uscm-sim link sm down",
	[A_FABRIC_RESTART] = "links down + SM killed 1 s, SM restarted, links up",
};

/* The fabric is started by the cell (IB or RoCE); the rest is common. */
static void setup(void)
{
	setenv("USCM_CM_RESPONSE_TIMEOUT", "10", 1);
	/* 16 tries x 100 ms: a budget no scheduling hiccup of a loaded CI
	 * machine exhausts, so cells that want every connection up get them. */
	setenv("USCM_CM_MAX_TIMER_MS", "100", 1);
	setenv("USCM_TIMEWAIT_MS", "50", 1);
	setenv("USCM_EXIT_REPORT", "1", 1);
}

/* Checks a RESULT line against an expectation (see struct cell); on a
 * mismatch, why in why[]. */
static int outcome_ok(const char *result, const char *expect, long attempts, char *why,
		      size_t wlen)
{
	int named[NOUT] = { 0 };
	char spec[512];

	snprintf(spec, sizeof(spec), "%s", expect);
	for (char *t = strtok(spec, " "); t; t = strtok(NULL, " ")) {
		size_t k;
		long have, want;
		char *op = strpbrk(t, "=>");

		for (k = 0; k < NOUT; k++)
			if (!strncmp(t, outcomes[k], op ? (size_t)(op - t) : strlen(t)) &&
			    strlen(outcomes[k]) == (op ? (size_t)(op - t) : strlen(t)))
				break;
		if (k == NOUT) {
			snprintf(why, wlen, "bad expectation token '%s'", t);
			return 0;
		}
		named[k] = 1;
		if (!op)
			continue;
		have = ct_result(result, outcomes[k]);
		if (*op == '=') {
			want = !strcmp(op + 1, "all") ? attempts : atol(op + 1);
			if (have != want) {
				snprintf(why, wlen, "%s=%ld, want %ld", outcomes[k], have, want);
				return 0;
			}
		} else {
			want = atol(op + 2);
			if (strchr(op, '%'))
				want = (attempts * want + 99) / 100;
			if (have < want) {
				snprintf(why, wlen, "%s=%ld, want >= %ld", outcomes[k], have, want);
				return 0;
			}
		}
	}
	for (size_t k = 0; k < NOUT; k++)
		if (!named[k] && ct_result(result, outcomes[k]) != 0) {
			snprintf(why, wlen, "%s=%ld, want 0", outcomes[k], ct_result(result, outcomes[k]));
			return 0;
		}
	return 1;
}

/* The outcomes that are not zero, for the report: "ok=198 unreachable=2". */
static void summary(const char *result, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	if (!strstr(result, "RESULT")) {
		snprintf(buf, len, "(no RESULT)");
		return;
	}
	for (size_t k = 0; k < NOUT; k++) {
		long v = ct_result(result, outcomes[k]);
		if (v && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s=%ld", n ? " " : "", outcomes[k], v);
	}
}

static int exited_ok(const struct ct_proc *p)
{
	return p->exited && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0;
}

static void sm_restart(void)
{
	char *out = NULL;

	/* A new SM on the same fabric (it binds node 0's QP1 itself); the
	 * fabric's stop and USCM_SIM_WATCH_PID end it as they did the first. */
	lt_sh(&out, "cd / && setsid %s/uscm-sim-sm --dir %s >>%s/sm.log 2>&1 < /dev/null &", lt_bin(),
	      getenv("USCM_SIM_DIR"), getenv("USCM_SIM_DIR"));
	free(out);
}

/* cr_expect that also remembers a failure for the report line. */
#define CHECK(cond, ...)                          \
	do {                                      \
		int ok_ = !!(cond);               \
		pass &= ok_;                      \
		cr_expect(ok_, __VA_ARGS__);      \
	} while (0)

static void run_cell(const struct cell *cell)
{
	struct cell dc = *cell;
	const struct cell *c = &dc;
	char args[512], why[256] = "", cs[256], ss[256];
	struct ct_proc srv, cli, cli2;
	char *co = NULL, *ce = NULL, *so = NULL, *se = NULL;
	const char *only = getenv("USCM_FAULTS_ONLY"), *full = getenv("USCM_FAULTS_FULL");
	uint64_t t0, dt = 0;
	long attempts;
	int pass = 1;

	if (only && *only && strcmp(only, c->name))
		tf_deselect("USCM_FAULTS_ONLY=%s", only);
	if (c->full && !(full && atoi(full)))
		tf_deselect("%s runs on demand: USCM_FAULTS_FULL=1 (scripts/fault-matrix.sh)", c->name);
	lt_fabric_start(c->roce ? "roce" : "ib", 2);
	if (lt_daemon) {
		if (dc.client_expect_d)
			dc.client_expect = dc.client_expect_d;
		if (dc.server_expect_d)
			dc.server_expect = dc.server_expect_d;
		if (dc.expected_d)
			dc.expected = dc.expected_d;
	}
	if (c->retries) {
		snprintf(args, sizeof(args), "%d", c->retries);
		setenv("USCM_CM_RETRIES", args, 1);
	}
	if (c->fault)
		cr_assert_eq(ct_sim("fault", "'%s'", c->fault), 0, "%s: fault %s", c->name, c->fault);
	snprintf(args, sizeof(args), "server --quiesce-ms 1200 --quiesce-max-ms 6000 %s", c->server);
	ct_spawn(&srv, lt_dir, "server", 2, args);
	cr_assert(ct_wait_text(&srv, "READY", 10000), "%s: the server did not start", c->name);
	if (c->act == A_SM_KILLED)
		cr_assert_eq(ct_sim("kill", "sm"), 0);
	if (c->act == A_SA_LINK_DOWN)
		cr_assert_eq(ct_sim("link", "sm down"), 0);
	snprintf(args, sizeof(args), "client 127.10.0.2 --quiesce-ms 500 --quiesce-max-ms 5000 %s", c->client);
	ct_spawn(&cli, lt_dir, "client", 1, args);
	t0 = lt_now_ms();

	switch (c->act) {
	case A_KILL_SERVER:
		cr_assert(ct_wait_text(&srv, "PAUSED", 10000), "%s: the server did not pause",
			  c->name);
		ct_kill(&srv);
		break;
	case A_KILL_CLIENT:
		cr_assert(ct_wait_text(&cli, "PAUSED", 10000), "%s: the client did not pause",
			  c->name);
		ct_kill(&cli);
		t0 = lt_now_ms();
		/* The server's connection ends (END line) within the bound, or,
		 * for a connection that rightly stays up, is still there. */
		if (!strstr(c->server_expect, "open"))
			cr_expect(ct_wait_text(&srv, "END", (int)c->bound_ms),
				  "%s: the server's connection did not end within %u ms", c->name,
				  c->bound_ms);
		else
			usleep(c->bound_ms * 1000u / 3);
		dt = lt_now_ms() - t0;
		break;
	case A_LINK_DOWN:
		cr_assert(ct_wait_text(&cli, "HOLDING", 10000), "%s: the client did not connect",
			  c->name);
		cr_assert_eq(ct_sim("link", "node2 down"), 0);
		t0 = lt_now_ms();
		cr_assert_eq(write(cli.in_fd, "go\n", 3), 3);
		break;
	case A_FABRIC_RESTART:
		usleep(1000 * 1000);
		cr_assert_eq(ct_sim("link", "node1 down"), 0);
		cr_assert_eq(ct_sim("link", "node2 down"), 0);
		cr_assert_eq(ct_sim("kill", "sm"), 0);
		usleep(1000 * 1000);
		sm_restart();
		cr_assert_eq(ct_sim("link", "node1 up"), 0);
		cr_assert_eq(ct_sim("link", "node2 up"), 0);
		break;
	default:
		break;
	}

	if (c->act != A_KILL_CLIENT) {
		if (!ct_wait_exit(&cli, (int)c->bound_ms + 2000)) {
			ct_kill(&cli);
			ct_kill(&srv);
			co = ct_read(cli.out);
			ce = ct_read(cli.err);
			cr_assert_fail("%s: HANG: the client did not exit within %u ms\n%s\n%.3000s",
				       c->name, c->bound_ms, co, ce);
		}
		/* Its own 500 ms of quiescing at the end is not the cell's time. */
		dt = cli.t_exit - t0 > 500 ? cli.t_exit - t0 - 500 : 0;
	}
	if (c->act == A_FABRIC_RESTART) {
		/* After the restart, the fabric (and the server) serve again. */
		ct_spawn(&cli2, lt_dir, "client2", 1, "client 127.10.0.2 -n 20 -c 4 --quiesce-ms 500 --quiesce-max-ms 5000");
		cr_expect(ct_wait_exit(&cli2, 30000), "%s: the client after the restart hung",
			  c->name);
		char *o2 = ct_read(cli2.out);
		cr_expect(exited_ok(&cli2) && ct_result(o2, "ok") == 20,
			  "%s: after the restart: %s", c->name, o2);
		free(o2);
		ct_kill(&cli2);
	}
	if (c->act == A_LINK_DOWN)
		cr_assert_eq(ct_sim("link", "node2 up"), 0);
	if (!srv.exited) {
		kill(srv.pid, SIGTERM);
		cr_expect(ct_wait_exit(&srv, 15000), "%s: HANG: the server did not exit on SIGTERM",
			  c->name);
		ct_kill(&srv);
	}
	ct_kill(&cli);

	co = ct_read(cli.out);
	ce = ct_read(cli.err);
	so = ct_read(srv.out);
	se = ct_read(srv.err);
	summary(co, cs, sizeof(cs));
	summary(so, ss, sizeof(ss));

	/* The processes the cell did not kill: clean exit, every outcome
	 * correct, nothing left in the library. */
	if (c->client_expect) {
		attempts = ct_result(co, "attempts");
		CHECK(exited_ok(&cli), "%s: client status 0x%x\n%.3000s", c->name, cli.status, ce);
		CHECK(outcome_ok(co, c->client_expect, attempts, why, sizeof(why)),
			  "%s: client: %s (expected %s; got %s)", c->name, why, c->client_expect, cs);
		CHECK(ct_quiescent(ce), "%s: client left state behind:\n%.3000s", c->name, ce);
		CHECK(dt <= c->bound_ms, "%s: client took %llu ms, bound %u", c->name,
			      (unsigned long long)dt, c->bound_ms);
	}
	if (c->server_expect) {
		attempts = ct_result(so, "requests");
		CHECK(exited_ok(&srv), "%s: server status 0x%x\n%.3000s", c->name, srv.status, se);
		CHECK(outcome_ok(so, c->server_expect, attempts, why, sizeof(why)),
			  "%s: server: %s (expected %s; got %s)", c->name, why, c->server_expect, ss);
		CHECK(ct_quiescent(se), "%s: server left state behind:\n%.3000s", c->name, se);
	}
	if (c->act == A_KILL_CLIENT)
		CHECK(dt <= c->bound_ms, "%s: took %llu ms, bound %u", c->name,
			      (unsigned long long)dt, c->bound_ms);

	const char *rep = getenv("USCM_FAULTS_REPORT");
	if (rep && *rep) {
		FILE *fp = fopen(rep, "a");
		if (fp) {
			char what[256];

			snprintf(what, sizeof(what), "%s%s%s%s%s", c->fault ? "`" : "",
				 c->fault ? c->fault : "", c->fault ? "`" : "",
				 c->fault && c->act ? "; " : "", action_text[c->act]);
			fprintf(fp, "%s\t%s\t%s\t%s\t%llu\t%u\t%s\t%s\t%s\n", c->name, what,
				c->client_expect ? cs : "(killed)",
				c->server_expect ? ss : "(killed)", (unsigned long long)dt, c->bound_ms,
				c->full ? "on demand" : "CI", pass ? "pass" : "FAIL", c->expected);
			fclose(fp);
		}
	}
	free(co);
	free(ce);
	free(so);
	free(se);
}

ParameterizedTestParameters(faults, cell)
{
	static size_t idx[NCELLS];

	for (size_t i = 0; i < NCELLS; i++)
		idx[i] = i;
	return cr_make_param_array(size_t, idx, NCELLS);
}

ParameterizedTest(size_t *i, faults, cell, .init = setup, .fini = lt_fini, .timeout = 600)
{
	run_cell(&cells[*i]);
}

/* ---- unmodified clients (Debian rdmacm-utils) under faults ------------------------- */

/* The same fabric and library, programs nobody wrote for uscm: both sides
 * must exit 0 within the bound (their own checks: rping -V validates every
 * ping, ucmatose and cmtime fail on any unexpected event). The client runs
 * under valgrind where marked (definite leaks fail it; not in the ASan
 * build). */
struct ucell {
	const char *name;
	const char *fault;
	const char *bin;
	const char *server, *client;
	int server_exits;         /* else it is stopped with SIGTERM afterwards */
	int valgrind;
	const char *line;         /* the client prints it `times` times (or NULL) */
	int times;
	unsigned bound_ms;
	int full;
	const char *expected;
};

static const struct ucell ucells[] = {
	{ "ucmatose_10_loss5_dup5", "drop=5%,dup=5%,qpt=mad", "ucmatose", "ucmatose -c 10",
	  "ucmatose -s 127.10.0.2 -c 10", 1, 1, "test complete", 1, 30000, 0,
	  "10 connections with data: both exit 0; client clean under valgrind" },
	{ "rping_20_loss20_dup_reorder", "drop=20%,dup=20%,reorder=20%:5ms,qpt=mad", "rping",
	  "rping -s -V -C 20", "rping -c -a 127.10.0.2 -v -V -C 20", 1, 0, "ping data: rdma-ping-", 20,
	  30000, 0,
	  "20 validated pings: both exit 0" },
	{ "cmtime_200_loss20_dup_reorder", "drop=20%,dup=20%,reorder=20%:5ms,qpt=mad", "cmtime",
	  "cmtime -c 200", "cmtime -s 127.10.0.2 -c 200", 0, 0, "disconnect   :", 1, 60000, 0,
	  "200 connections set up and torn down at once: client exits 0" },
	{ "cmtime_2000_loss20_dup_reorder", "drop=20%,dup=20%,reorder=20%:5ms,qpt=mad", "cmtime",
	  "cmtime -c 2000", "cmtime -s 127.10.0.2 -c 2000", 0, 0, "disconnect   :", 1, 120000, 1,
	  "2000 connections as above: client exits 0" },
};
#define NUCELLS (sizeof(ucells) / sizeof(ucells[0]))

static void run_ucell(const struct ucell *c)
{
	const char *only = getenv("USCM_FAULTS_ONLY"), *full = getenv("USCM_FAULTS_FULL");
	char *out = NULL, *sout = NULL, *rc = NULL, vg[128] = "";
	int st = -1, pass = 1;
	uint64_t t0 = 0, dt = 0;

	if (only && *only && strcmp(only, c->name))
		tf_deselect("USCM_FAULTS_ONLY=%s", only);
	if (c->full && !(full && atoi(full)))
		tf_deselect("%s runs on demand: USCM_FAULTS_FULL=1 (scripts/fault-matrix.sh)", c->name);
	if (lt_sh(NULL, "command -v %s >/dev/null", c->bin) != 0)
		tf_skip_missing("%s (Debian rdmacm-utils) is not installed", c->bin);
#ifndef USCM_SANITIZED
	if (c->valgrind && lt_sh(NULL, "command -v valgrind >/dev/null") == 0)
		snprintf(vg, sizeof(vg),
			 "valgrind -q --leak-check=full --errors-for-leak-kinds=definite "
			 "--error-exitcode=99");
#endif
	lt_fabric_start("ib", 2);
	cr_assert_eq(ct_sim("fault", "'%s'", c->fault), 0);
	cr_assert_eq(lt_sh(NULL,
			   "(USCM_SIM_NODE=node2 %s timeout %u %s >%s/us.out 2>&1 &"
			   " echo $! >%s/us.pid; wait $!; echo $? >%s/us.rc) >/dev/null 2>&1 &",
			   lt_util_env(), c->bound_ms / 1000 + 30, c->server, lt_dir, lt_dir, lt_dir),
		     0);
	usleep(300 * 1000);
	for (int i = 0; i < 30; i++) {
		free(out);
		t0 = lt_now_ms();
		st = lt_sh(&out, "USCM_SIM_NODE=node1 %s timeout %u %s %s 2>&1", lt_util_env(),
			   c->bound_ms / 1000 + 10, vg, c->client);
		dt = lt_now_ms() - t0;
		/* Not listening yet: REJECTED (invalid service ID). */
		if (st == 0 || !strstr(out, "REJECTED"))
			break;
		usleep(200 * 1000);
	}
	CHECK(st == 0, "%s: '%s' exited %d:\n%.4000s", c->name, c->client, st, out);
	CHECK(dt <= c->bound_ms, "%s: took %llu ms, bound %u", c->name, (unsigned long long)dt,
	      c->bound_ms);
	if (c->line) {
		int n = 0;

		for (const char *q = out; (q = strstr(q, c->line)); q += strlen(c->line))
			n++;
		CHECK(n == c->times, "%s: '%s' printed %d times, want %d:\n%.4000s", c->name, c->line,
		      n, c->times, out);
	}
	if (!c->server_exits)
		lt_sh(NULL, "kill -TERM $(cat %s/us.pid) >/dev/null 2>&1; true", lt_dir);
	for (int i = 0; i < 150; i++) {
		free(rc);
		rc = NULL;
		if (lt_sh(&rc, "cat %s/us.rc 2>/dev/null", lt_dir) == 0 && rc[0])
			break;
		usleep(100 * 1000);
	}
	lt_sh(&sout, "cat %s/us.out", lt_dir);
	if (c->server_exits)
		CHECK(rc && rc[0] == '0', "%s: '%s' exited %s:\n%.4000s", c->name, c->server,
		      rc ? rc : "?", sout);
	else
		CHECK(rc && rc[0], "%s: '%s' did not stop:\n%.4000s", c->name, c->server, sout);

	const char *rep = getenv("USCM_FAULTS_REPORT");
	if (rep && *rep) {
		FILE *fp = fopen(rep, "a");
		if (fp) {
			fprintf(fp, "%s\t`%s`; `%s` / `%s`\t%s%s\t%s\t%llu\t%u\t%s\t%s\t%s\n", c->name,
				c->fault, c->server, c->client,
				st == 0 ? "exit 0" : "FAILED", vg[0] ? ", valgrind clean" : "",
				c->server_exits ? (rc && rc[0] == '0' ? "exit 0" : "FAILED")
						: "stopped",
				(unsigned long long)dt, c->bound_ms, c->full ? "on demand" : "CI",
				pass ? "pass" : "FAIL", c->expected);
			fclose(fp);
		}
	}
	free(out);
	free(sout);
	free(rc);
}

ParameterizedTestParameters(faults, unmodified)
{
	static size_t idx[NUCELLS];

	for (size_t i = 0; i < NUCELLS; i++)
		idx[i] = i;
	return cr_make_param_array(size_t, idx, NUCELLS);
}

ParameterizedTest(size_t *i, faults, unmodified, .init = setup, .fini = lt_fini, .timeout = 600)
{
	run_ucell(&ucells[*i]);
}
