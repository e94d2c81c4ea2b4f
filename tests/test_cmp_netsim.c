/*
 * The deterministic network simulation (netsim.c): thousands of random
 * scenarios across the fault profiles, fixed-seed regressions per fault
 * type, determinism, proof that the checker can fail, and directed
 * reproductions of engine bugs the simulation found.
 *
 *   USCM_NETSIM_SCENARIOS  number of random scenarios (default 5000)
 *   USCM_NETSIM_SEED       first seed (default 1)
 *
 * A failing seed is printed with the command that re-runs it alone.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/netsim.h"

static const char *bin_dir(void)
{
	const char *d = getenv("USCM_BIN_DIR");
	return d && *d ? d : "build/bin";
}

static uint64_t env_u64(const char *name, uint64_t def)
{
	const char *v = getenv(name);
	char *end;
	uint64_t x;

	if (!v || !*v)
		return def;
	x = strtoull(v, &end, 0);
	return *end ? def : x;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Runs one scenario; on failure prints it with the re-run command. */
static int run_one(const struct ns_opts *o, struct ns_result *r, const char *extra)
{
	ns_run(o, r);
	if (r->violations)
		fprintf(stderr,
			"netsim: seed %" PRIu64 " (profile %s, %d nodes, %d attempts) failed with %d "
			"violation(s):\n%s  re-run: %s/uscm-netsim --seed %" PRIu64 "%s -v\n",
			o->seed, ns_profile_str(r->profile), r->nodes, r->attempts, r->violations,
			r->report, bin_dir(), o->seed, extra ? extra : "");
	return r->violations;
}

Test(netsim, random_scenarios, .timeout = 600)
{
	uint64_t n = env_u64("USCM_NETSIM_SCENARIOS", 5000);
	uint64_t base = env_u64("USCM_NETSIM_SEED", 1);
	uint64_t failed = 0, prof[NS_PROF_COUNT] = { 0 };
	struct ns_counts tot;
	double t0 = now_s();

	memset(&tot, 0, sizeof(tot));
	for (uint64_t i = 0; i < n; i++) {
		struct ns_opts o = { .seed = base + i, .profile = NS_PROF_AUTO };
		struct ns_result r;

		if (run_one(&o, &r, NULL))
			failed++;
		if (r.profile >= 0 && r.profile < NS_PROF_COUNT)
			prof[r.profile]++;
		tot.attempts += r.n.attempts;
		tot.sidr += r.n.sidr;
		tot.clean_attempts += r.n.clean_attempts;
		tot.established += r.n.established;
		tot.mads += r.n.mads;
		tot.lost += r.n.lost + r.n.partitioned;
		tot.duplicated += r.n.duplicated;
		tot.restarts += r.n.restarts;
		tot.ghosts += r.n.ghosts;
		tot.probes += r.n.probes;
		tot.timers_checked += r.n.timers_checked;
	}
	fprintf(stderr,
		"netsim: %" PRIu64 " scenarios from seed %" PRIu64 " in %.2f s: %" PRIu64 " failed; "
		"%" PRIu64 " connects (%" PRIu64 " fault-free), %" PRIu64 " SIDR, %" PRIu64
		" established, %" PRIu64 " MADs (%" PRIu64 " lost, %" PRIu64 " duplicated), %" PRIu64
		" restarts, %" PRIu64 " ghost passive connections, %" PRIu64 " probes, %" PRIu64
		" timer deadlines checked; profiles",
		n, base, now_s() - t0, failed, tot.attempts, tot.clean_attempts, tot.sidr,
		tot.established, tot.mads, tot.lost, tot.duplicated, tot.restarts, tot.ghosts,
		tot.probes, tot.timers_checked);
	for (int p = 0; p < NS_PROF_COUNT; p++)
		fprintf(stderr, " %s %" PRIu64, ns_profile_str(p), prof[p]);
	fprintf(stderr, "\n");
	cr_assert_eq(failed, 0, "%" PRIu64 " of %" PRIu64 " scenarios violated invariants (seeds "
		     "printed above)", failed, n);
	cr_assert_gt(tot.established, n, "too few connections got established to mean much");
	cr_assert_gt(tot.timers_checked, n, "too few timer deadlines were checked");
}

/* Fixed seeds per profile (each a different topology / plan), so a fault
 * type that stops working is named by the test that fails. */
static void profile_seeds(int profile, uint64_t first, int count)
{
	int failed = 0;
	uint64_t est = 0;
	char extra[64];

	snprintf(extra, sizeof(extra), " --profile %s", ns_profile_str(profile));
	for (int i = 0; i < count; i++) {
		struct ns_opts o = { .seed = first + (uint64_t)i, .profile = profile };
		struct ns_result r;

		failed += run_one(&o, &r, extra) != 0;
		est += r.n.established;
	}
	cr_assert_eq(failed, 0, "profile %s: %d of %d fixed seeds failed", ns_profile_str(profile),
		     failed, count);
	cr_assert_gt(est, 0, "profile %s: nothing got established", ns_profile_str(profile));
}

Test(netsim, regress_clean) { profile_seeds(NS_PROF_CLEAN, 1000, 40); }
Test(netsim, regress_loss) { profile_seeds(NS_PROF_LOSS, 2000, 40); }
Test(netsim, regress_dup) { profile_seeds(NS_PROF_DUP, 3000, 40); }
Test(netsim, regress_reorder) { profile_seeds(NS_PROF_REORDER, 4000, 40); }
Test(netsim, regress_delay) { profile_seeds(NS_PROF_DELAY, 5000, 40); }
Test(netsim, regress_partition) { profile_seeds(NS_PROF_PARTITION, 6000, 40); }
Test(netsim, regress_restart) { profile_seeds(NS_PROF_RESTART, 7000, 40); }
Test(netsim, regress_mixed) { profile_seeds(NS_PROF_MIXED, 8000, 40); }

/* Explicit, heavy fault settings (what `uscm-netsim --loss ...` runs). */
static void custom(const struct ns_faults *f, const char *extra, uint64_t first, int count)
{
	int failed = 0;

	for (int i = 0; i < count; i++) {
		struct ns_opts o = { .seed = first + (uint64_t)i, .profile = NS_PROF_CUSTOM };
		struct ns_result r;

		o.faults = *f;
		failed += run_one(&o, &r, extra) != 0;
	}
	cr_assert_eq(failed, 0, "%s: %d of %d seeds failed", extra, failed, count);
}

Test(netsim, regress_heavy_loss)
{
	struct ns_faults f = { .loss = 0.35 };
	custom(&f, " --loss 35", 100, 30);
}

Test(netsim, regress_heavy_dup_reorder)
{
	struct ns_faults f = { .dup = 0.5, .reorder = 0.8, .reorder_ns = 300000 };
	custom(&f, " --dup 50 --reorder 80 --reorder-ns 300000", 200, 30);
}

Test(netsim, regress_heavy_delay)
{
	struct ns_faults f = { .delay = 0.25 };
	custom(&f, " --delay 25", 300, 30);
}

Test(netsim, regress_isolated_server)
{
	/* Node 0 cut off from everyone for 100 ms right from the start. */
	struct ns_faults f = { .npart = 1, .part = { { .a = 0, .b = -1, .start = 0, .len = 100000000 } } };
	custom(&f, " --partition 0:*:0:100000000", 400, 30);
}

Test(netsim, regress_restarts)
{
	struct ns_faults f = { .nrestart = 2,
			       .restart = { { .node = 0, .at = 5000000 }, { .node = 1, .at = 20000000 } } };
	custom(&f, " --restart 0:5000000 --restart 1:20000000", 500, 30);
}

/* Seeds that exposed engine bugs (netsim_bugs below): they must pass once
 * the engine is fixed, and keep passing. Seeds name scenarios of this
 * version of the generator: re-pick them (uscm-netsim --scenarios) if
 * gen_scenario() changes. */
Test(netsim, regress_found_bugs)
{
	static const uint64_t seeds[] = {
		14503, 16572, 22662, 29311, /* a REJ with local comm ID 0 (reasons 28, 3, 10)
					     * for an earlier REQ try hits REP_RCVD/ESTABLISHED */
		7, 183, 404,                /* REJ of the REQ dropped: comm ID learned from an MRA */
		2072, 5606,                 /* MRA of the REQ dropped, same cause */
	};
	int failed = 0;

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		struct ns_opts o = { .seed = seeds[i], .profile = NS_PROF_AUTO };
		struct ns_result r;
		failed += run_one(&o, &r, NULL) != 0;
	}
	cr_assert_eq(failed, 0, "%d seeds that once exposed engine bugs fail", failed);
}

Test(netsim, determinism)
{
	uint64_t prev = 0;

	for (uint64_t seed = 1; seed <= 48; seed++) {
		struct ns_opts o = { .seed = seed * 7919, .profile = NS_PROF_AUTO };
		struct ns_result a, b;

		ns_run(&o, &a);
		ns_run(&o, &b);
		cr_assert_eq(a.hash, b.hash, "seed %" PRIu64 ": two runs differ (%016" PRIx64
			     " vs %016" PRIx64 ")", o.seed, a.hash, b.hash);
		cr_assert_eq(a.violations, b.violations, "seed %" PRIu64, o.seed);
		cr_assert_eq(a.end_time, b.end_time, "seed %" PRIu64, o.seed);
		cr_assert_eq(a.n.mads, b.n.mads, "seed %" PRIu64, o.seed);
		cr_assert_neq(a.hash, prev, "seed %" PRIu64 ": same hash as the previous seed", o.seed);
		prev = a.hash;
	}
	/* The trace printer does not perturb the run. */
	{
		struct ns_opts o = { .seed = 4242, .profile = NS_PROF_MIXED };
		struct ns_result a, b;
		FILE *devnull = fopen("/dev/null", "w");

		cr_assert_not_null(devnull);
		ns_run(&o, &a);
		o.trace = devnull;
		ns_run(&o, &b);
		fclose(devnull);
		cr_assert_eq(a.hash, b.hash, "tracing changed the run");
	}
}

/* ---- the checker can fail --------------------------------------------------------- */

/* A fault-free run whose log has every kind of entry a mutation needs. */
static struct ns_sim *clean_run(void)
{
	for (uint64_t seed = 1; seed < 500; seed++) {
		struct ns_opts o = { .seed = seed, .profile = NS_PROF_CLEAN, .nodes = 2, .attempts = 8 };
		struct ns_sim *s = ns_sim_new(&o);
		int rep = 0, tw = 0, rtu = 0, rej = 0;

		cr_assert_not_null(s);
		ns_sim_run(s);
		for (size_t i = 0; i < ns_log_len(s); i++) {
			const struct ns_logent *e = ns_log_at(s, i);
			if (e->kind != NS_L_EVENT)
				continue;
			rep |= e->code == CMP_EV_REP_RECEIVED;
			tw |= e->code == CMP_EV_TIMEWAIT_EXIT;
			rtu |= e->code == CMP_EV_RTU_RECEIVED;
			rej |= e->code == CMP_EV_REJ_RECEIVED;
		}
		if (rep && tw && rtu && rej) {
			ns_reset_violations(s);
			cr_assert_eq(ns_sim_check(s), 0, "seed %" PRIu64 ": untouched log fails", seed);
			return s;
		}
		ns_sim_free(s);
	}
	cr_assert_fail("no fault-free seed with REP, RTU, REJ and TIMEWAIT_EXIT");
	return NULL;
}

static size_t find_event(const struct ns_sim *s, int code)
{
	for (size_t i = 0; i < ns_log_len(s); i++) {
		const struct ns_logent *e = ns_log_at(s, i);
		if (e->kind == NS_L_EVENT && e->code == code)
			return i;
	}
	cr_assert_fail("no %s in the log", cmp_event_str((enum cmp_event_type)code));
	return 0;
}

static void expect_caught(struct ns_sim *s, const char *what)
{
	ns_reset_violations(s);
	cr_assert_gt(ns_sim_check(s), 0, "the checker missed: %s", what);
	ns_sim_free(s);
}

Test(netsim, checker_catches_extra_terminal_event)
{
	struct ns_sim *s = clean_run();
	size_t i = find_event(s, CMP_EV_REP_RECEIVED);
	struct ns_logent e = *ns_log_at(s, i);

	ns_log_insert(s, i + 1, &e); /* connect answered twice */
	expect_caught(s, "a second REP_RECEIVED");
}

Test(netsim, checker_catches_event_after_destroy)
{
	struct ns_sim *s = clean_run();
	size_t n = ns_log_len(s);

	for (size_t i = 0; i < n; i++) {
		const struct ns_logent *d = ns_log_at(s, i);
		if (d->kind == NS_L_CALL && d->code == NS_C_DESTROY) {
			struct ns_logent e = *d;
			e.kind = NS_L_EVENT;
			e.code = CMP_EV_DREQ_RECEIVED;
			ns_log_insert(s, i + 1, &e);
			expect_caught(s, "an event after destroy");
			return;
		}
	}
	cr_assert_fail("no destroy in the log");
}

Test(netsim, checker_catches_late_timer)
{
	struct ns_sim *s = clean_run();
	size_t i = find_event(s, CMP_EV_TIMEWAIT_EXIT);
	struct ns_logent e = *ns_log_at(s, i);

	ns_log_remove(s, i);
	e.t += 1; /* one nanosecond late */
	ns_log_insert(s, i, &e);
	expect_caught(s, "TIMEWAIT_EXIT 1 ns late");
}

Test(netsim, checker_catches_missing_terminal_event)
{
	struct ns_sim *s = clean_run();
	size_t i = find_event(s, CMP_EV_REP_RECEIVED);

	ns_log_remove(s, i); /* the RTU then follows no REP */
	expect_caught(s, "a connect without its REP_RECEIVED");
}

Test(netsim, checker_catches_inconsistent_outcome)
{
	struct ns_sim *s = clean_run();
	size_t i = find_event(s, CMP_EV_RTU_RECEIVED);
	struct ns_logent e = *ns_log_at(s, i);
	int32_t rec = e.rec;
	size_t n;

	/* The passive side "timed out" instead: it never got established, while
	 * the active side did. Drop what the passive side did afterwards. */
	ns_log_remove(s, i);
	e.code = CMP_EV_REP_ERROR;
	ns_log_insert(s, i, &e);
	n = ns_log_len(s);
	for (size_t k = n; k-- > i + 1;)
		if (ns_log_at(s, k)->rec == rec &&
		    !(ns_log_at(s, k)->kind == NS_L_CALL && ns_log_at(s, k)->code == NS_C_DESTROY))
			ns_log_remove(s, k);
	expect_caught(s, "active established, passive REP_ERROR, nothing lost");
}

/* ---- directed reproductions of engine bugs ------------------------------------------ */

struct pair {
	struct cmp_engine *e[2];
	struct cmp_addr self[2];
	struct cmp_path to[2];
	cmp_time now;
};

static void pair_init(struct pair *p, cmp_time cap0, cmp_time cap1, unsigned backlog1)
{
	memset(p, 0, sizeof(*p));
	for (int i = 0; i < 2; i++) {
		struct cmp_settings s;
		struct cmp_path *pt = &p->to[i];

		cmp_settings_default(&s);
		s.cm_response_timeout = 10;
		s.max_cm_retries = 3;
		s.mra_service_timeout = 14;
		s.timewait_ns = 1000000;
		s.max_timer_ns = i ? cap1 : cap0;
		s.default_backlog = i ? backlog1 : 1024;
		s.local_ca_guid = 0x0002c90300000100ULL + (uint64_t)i;
		s.seed = 77 + (uint64_t)i;
		p->e[i] = cmp_engine_new(&s);
		cr_assert_not_null(p->e[i]);
		p->self[i].lid = (uint16_t)(i + 1);
		p->self[i].qpn = 1;
		p->self[i].qkey = 0x80010000;
		pt->slid = (uint16_t)(i + 1);
		pt->dlid = (uint16_t)(2 - i);
		pt->mtu = 4;
		pt->packet_life_time = 8;
		pt->pkey = 0xFFFF;
		pt->subnet_local = 1;
		pt->port_num = 1;
	}
	p->now = 1000000000ULL;
}

static void pair_fini(struct pair *p)
{
	cmp_engine_free(p->e[0]);
	cmp_engine_free(p->e[1]);
}

/* Takes node i's next outgoing MAD. */
static int take(struct pair *p, int i, uint8_t mad[CMP_MAD_SIZE])
{
	struct cmp_tx tx;

	if (!cmp_engine_poll_tx(p->e[i], &tx))
		return 0;
	memcpy(mad, tx.mad, CMP_MAD_SIZE);
	return 1;
}

static void give(struct pair *p, int to, const uint8_t mad[CMP_MAD_SIZE])
{
	cmp_engine_recv(p->e[to], &p->self[1 - to], mad, CMP_MAD_SIZE, p->now);
}

/* Moves every queued MAD across until both queues are empty. */
static void pump(struct pair *p)
{
	uint8_t mad[CMP_MAD_SIZE];
	int any;

	do {
		any = 0;
		for (int i = 0; i < 2; i++)
			while (take(p, i, mad)) {
				give(p, 1 - i, mad);
				any = 1;
			}
	} while (any);
}

static int next_event(struct pair *p, int i, struct cmp_event *ev)
{
	return cmp_engine_poll_event(p->e[i], ev);
}

/* The next event of node i other than MRA_RECEIVED must be `type`. */
static void expect_ev(struct pair *p, int i, enum cmp_event_type type)
{
	struct cmp_event ev;

	do
		cr_assert(next_event(p, i, &ev), "no %s on node %d", cmp_event_str(type), i);
	while (ev.type == CMP_EV_MRA_RECEIVED && type != CMP_EV_MRA_RECEIVED);
	cr_assert_eq(ev.type, type, "node %d: got %s, want %s", i, cmp_event_str(ev.type),
		     cmp_event_str(type));
}

static void advance(struct pair *p, cmp_time to)
{
	p->now = to;
	cmp_engine_handle_expiry(p->e[0], p->now);
	cmp_engine_handle_expiry(p->e[1], p->now);
}

static struct cmp_conn *connect0(struct pair *p, uint32_t qpn)
{
	struct cmp_req_param rq = { 0 };
	struct cmp_conn *c = NULL;

	rq.primary = &p->to[0];
	rq.service_id = 0x1000;
	rq.qpn = qpn;
	rq.starting_psn = 0x123;
	cr_assert_eq(cmp_connect(p->e[0], &rq, NULL, &c, p->now), 0);
	return c;
}

static struct cmp_conn *expect_req(struct pair *p)
{
	struct cmp_event ev;

	cr_assert(next_event(p, 1, &ev), "no event on the passive side");
	cr_assert_eq(ev.type, CMP_EV_REQ_RECEIVED, "got %s", cmp_event_str(ev.type));
	return ev.conn;
}

/*
 * Bug: a REJ whose Local Communication ID is 0 (what a passive side sends
 * when it has no connection for a REQ: backlog full, no listener, stale)
 * is accepted by on_rej() in any state, because the comm ID check is
 * skipped for 0. A late copy of such a REJ for an earlier REQ try tears
 * down the active side after it got established (seeds 14503, 16572,
 * 22662, 29311: passive stays ESTABLISHED, active goes REJ_RECEIVED +
 * TimeWait; the REJ had reason 28 backlog full, 3 no resources or 10
 * stale connection).
 * Such a REJ can only answer a REQ: it must be ignored once the active side
 * knows the peer's comm ID (REP_RCVD and later), as the kernel's
 * cm_acquire_id(remote_comm_id, 0) does.
 */
Test(netsim_bugs, stale_rej_with_comm_id_0_kills_established)
{
	struct pair p;
	struct cmp_listen *l;
	struct cmp_conn *a, *b, *first;
	struct cmp_event ev;
	uint8_t req[CMP_MAD_SIZE], rej[CMP_MAD_SIZE];
	struct cmp_rep_param rp = { .qpn = 0x77, .starting_psn = 0x456 };

	pair_init(&p, 0, 0, 1);
	cr_assert_eq(cmp_listen(p.e[1], 0x1000, 0, 1, NULL, &l), 0);
	/* Fill the backlog of 1 with a first connection that is never answered. */
	connect0(&p, 0x10);
	pump(&p);
	first = expect_req(&p);
	/* The second REQ is refused: REJ reason 28 with local comm ID 0. */
	a = connect0(&p, 0x11);
	cr_assert(take(&p, 0, req));
	give(&p, 1, req);
	cr_assert(take(&p, 1, rej), "no REJ for a full backlog");
	/* ... which is delayed. Room again; the REQ is retried and accepted. */
	cmp_reject(p.e[1], first, 28, NULL, 0, NULL, 0, p.now);
	pump(&p);
	while (next_event(&p, 0, &ev))
		;
	for (b = NULL; !b;) {
		advance(&p, cmp_engine_get_expiry(p.e[0]));
		pump(&p);
		if (next_event(&p, 1, &ev) && ev.type == CMP_EV_REQ_RECEIVED)
			b = ev.conn;
	}
	cr_assert_eq(cmp_accept(p.e[1], b, &rp, p.now), 0);
	pump(&p);
	expect_ev(&p, 0, CMP_EV_REP_RECEIVED);
	cr_assert_eq(cmp_rtu(p.e[0], a, NULL, 0, p.now), 0);
	pump(&p);
	cr_assert_eq(cmp_conn_state(b), CMP_ESTABLISHED);
	/* Now the stale REJ arrives. */
	give(&p, 0, rej);
	cr_expect_eq(cmp_conn_state(a), CMP_ESTABLISHED,
		     "a stale REJ (local comm ID 0, for an earlier REQ try) moved the established "
		     "active side to %s while the passive side stays ESTABLISHED",
		     cmp_state_str(cmp_conn_state(a)));
	cr_expect_not(next_event(&p, 0, &ev) && ev.type == CMP_EV_REJ_RECEIVED,
		      "REJ_RECEIVED on an established connection from a stale REJ");
	pair_fini(&p);
}

/*
 * Bug: on_mra() stores the MRA sender's comm ID as remote_id, and on_rej()
 * then drops any REJ whose Local Communication ID differs ("comm ID
 * mismatch"). When the passive connection that sent the MRA is gone (it
 * rejected, and that REJ was lost) the REQ retry creates a new passive
 * connection with a new comm ID; its REJ is dropped, so a client the server
 * rejected retries until REQ_ERROR (or gets connected by a later try). An
 * MRA from the new passive connection is dropped the same way, so the
 * client gives up while the server asked for more time. Seeds 7, 183, 404
 * (REJ), 2072, 5606 (MRA). The kernel matches a REJ or MRA of a REQ by the
 * receiver's comm ID only (cm_acquire_id(remote_comm_id, 0)) and does not
 * take a comm ID from an MRA.
 */
Test(netsim_bugs, rej_after_mra_from_new_passive_incarnation_dropped)
{
	struct pair p;
	struct cmp_listen *l;
	struct cmp_conn *a, *b1, *b2;
	struct cmp_event ev;
	uint8_t mad[CMP_MAD_SIZE];
	int got_rej = 0;

	pair_init(&p, 0, 0, 1024);
	cr_assert_eq(cmp_listen(p.e[1], 0x1000, 0, 0, NULL, &l), 0);
	a = connect0(&p, 0x10);
	pump(&p);
	b1 = expect_req(&p);
	cr_assert_eq(cmp_mra(p.e[1], b1, 0, NULL, 0, p.now), 0);
	pump(&p); /* the active side learns b1's comm ID */
	cr_assert_eq(cmp_reject(p.e[1], b1, 28, NULL, 0, NULL, 0, p.now), 0);
	cr_assert(take(&p, 1, mad)); /* this REJ is lost */
	/* The MRA wait runs out; the REQ is resent and reaches a new passive
	 * connection (b1 left the protocol), which rejects too. */
	advance(&p, cmp_engine_get_expiry(p.e[0]));
	pump(&p);
	b2 = expect_req(&p);
	cr_assert_neq(cmp_conn_local_id(b2), cmp_conn_local_id(b1));
	cr_assert_eq(cmp_reject(p.e[1], b2, 28, NULL, 0, NULL, 0, p.now), 0);
	pump(&p);
	while (next_event(&p, 0, &ev))
		got_rej |= ev.type == CMP_EV_REJ_RECEIVED;
	cr_expect(got_rej, "the REJ of the REQ from the new passive connection was dropped (rx_mismatch "
		  "%" PRIu64 "); active side still %s",
		  cmp_engine_stats(p.e[0])->rx_mismatch, cmp_state_str(cmp_conn_state(a)));
	pair_fini(&p);
}

/*
 * Spec deviation: on_mra() caps the wait an MRA asks for at max_timer_ns
 * (cap(service timeout + base)), so with a cap below the service timeout an
 * MRA does not keep the active side waiting: it resends every cap period,
 * burns its retries and reports REQ_ERROR while the passive side is still
 * within the time it announced (IBTA 12.6.6: after an MRA the sender waits
 * the service timeout before retrying). Found by the random scenarios
 * (fault-free attempts with a capped node ended A_REQ_ERROR / P_REJ_REQ);
 * they now count such attempts as timing races. The cap is meant for the
 * per-try timer, not for a time the peer asked for.
 */
Test(netsim_bugs, mra_wait_capped_by_max_timer)
{
	struct pair p;
	struct cmp_listen *l;
	struct cmp_conn *a, *b;
	struct cmp_event ev;
	struct cmp_rep_param rp = { .qpn = 0x77, .starting_psn = 0x456 };
	cmp_time t0;
	int got_rep = 0, got_err = 0;

	/* Active side caps timers at 5 ms; 3 retries. */
	pair_init(&p, 5000000, 0, 1024);
	cr_assert_eq(cmp_listen(p.e[1], 0x1000, 0, 0, NULL, &l), 0);
	t0 = p.now;
	a = connect0(&p, 0x10);
	pump(&p);
	b = expect_req(&p);
	/* "I need 2^14 * 4.096 us (67 ms)". */
	cr_assert_eq(cmp_mra(p.e[1], b, 14, NULL, 0, p.now), 0);
	pump(&p);
	/* The server accepts after 30 ms, well within what it announced. */
	while (p.now < t0 + 30000000) {
		cmp_time x = cmp_engine_get_expiry(p.e[0]);
		if (x > t0 + 30000000)
			break;
		advance(&p, x);
		pump(&p);
	}
	p.now = t0 + 30000000;
	if (cmp_conn_state(b) == CMP_REQ_RCVD || cmp_conn_state(b) == CMP_MRA_REQ_SENT)
		cmp_accept(p.e[1], b, &rp, p.now);
	pump(&p);
	while (next_event(&p, 0, &ev)) {
		got_rep |= ev.type == CMP_EV_REP_RECEIVED;
		got_err |= ev.type == CMP_EV_REQ_ERROR;
	}
	cr_expect(got_rep && !got_err,
		  "the active side gave up (REQ_ERROR) %s the peer's MRA asked for 67 ms; state %s",
		  got_err ? "although" : "?", cmp_state_str(cmp_conn_state(a)));
	pair_fini(&p);
}
