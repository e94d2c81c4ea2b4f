/*
 * uscm-netsim - runs the deterministic CM network simulation (tests/netsim.c)
 * for one seed or a range of seeds, and re-runs a failing seed alone with a
 * trace of every MAD, state change, call and event.
 *
 *   uscm-netsim --seed N [--scenarios K] [--profile NAME] [fault options] [-v]
 *
 * Seeds N .. N+K-1 are run; each seed fixes the topology, the engine
 * settings, the applications' plans and (unless a fault option or --profile
 * is given) the fault profile. Exit status: 0 all invariants held, 1 a
 * violation, 2 usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/netsim.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: uscm-netsim --seed N [options]\n"
		"  --seed N             first scenario seed (decimal or 0x hex)\n"
		"  --scenarios K        run seeds N..N+K-1 (default 1)\n"
		"  --profile NAME       clean|loss|dup|reorder|delay|partition|restart|mixed\n"
		"                       (default: chosen by each seed)\n"
		"  --loss P             fault options (any of them selects a custom profile);\n"
		"  --dup P                P is a percentage, e.g. --loss 5\n"
		"  --reorder P          extra random delay below the timeouts\n"
		"  --reorder-ns D       its maximum (default 300000)\n"
		"  --delay P            delay beyond the response timeouts\n"
		"  --delay-ns D         its maximum on top of half a retry period\n"
		"  --partition A:B:START:LEN   link A<->B down (ns); B = '*': all links of A\n"
		"  --partition N        N random partitions\n"
		"  --restart NODE:AT    restart a node at AT ns\n"
		"  --restart N          N random restarts\n"
		"  --nodes N            nodes (2..8; default from the seed)\n"
		"  --attempts N         connection/SIDR attempts (default from the seed)\n"
		"  -v, --verbose        trace every MAD, state change, call and event (with\n"
		"                       --scenarios: re-run the first failing seed with a trace)\n"
		"  --json               state changes as JSON lines in the trace\n"
		"  --check-determinism  run each seed twice and compare the trace hashes\n"
		"  -q, --quiet          only failures and the summary\n");
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || !*s)
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || *end ? -1 : 0;
}

static int parse_pct(const char *s, double *v)
{
	char *end;

	if (!s || !*s)
		return -1;
	*v = strtod(s, &end);
	if (*end == '%')
		end++;
	if (*end || *v < 0 || *v > 100)
		return -1;
	*v /= 100;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct ns_opts o;
	uint64_t seed = 0, scenarios = 1, v;
	int have_seed = 0, verbose = 0, json = 0, determinism = 0, quiet = 0, custom = 0;
	char extra[1024] = "";
	size_t el = 0;

	memset(&o, 0, sizeof(o));
	o.profile = NS_PROF_AUTO;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
		int takes = 1, keep = 1;

		if (!strcmp(a, "--seed")) {
			if (parse_u64(val, &seed))
				goto bad;
			have_seed = 1;
			keep = 0;
		} else if (!strcmp(a, "--scenarios")) {
			if (parse_u64(val, &scenarios) || !scenarios)
				goto bad;
			keep = 0;
		} else if (!strcmp(a, "--profile")) {
			o.profile = val ? ns_profile_parse(val) : -2;
			if (o.profile == -2 || o.profile == NS_PROF_CUSTOM)
				goto bad;
		} else if (!strcmp(a, "--loss")) {
			if (parse_pct(val, &o.faults.loss))
				goto bad;
			custom = 1;
		} else if (!strcmp(a, "--dup")) {
			if (parse_pct(val, &o.faults.dup))
				goto bad;
			custom = 1;
		} else if (!strcmp(a, "--reorder")) {
			if (parse_pct(val, &o.faults.reorder))
				goto bad;
			custom = 1;
		} else if (!strcmp(a, "--reorder-ns")) {
			if (parse_u64(val, &v))
				goto bad;
			o.faults.reorder_ns = v;
			custom = 1;
		} else if (!strcmp(a, "--delay")) {
			if (parse_pct(val, &o.faults.delay))
				goto bad;
			custom = 1;
		} else if (!strcmp(a, "--delay-ns")) {
			if (parse_u64(val, &v))
				goto bad;
			o.faults.delay_ns = v;
			if (o.faults.delay == 0)
				o.faults.delay = 0.05;
			custom = 1;
		} else if (!strcmp(a, "--partition")) {
			unsigned long pa, ps, pl;
			char pb[16];
			if (!val)
				goto bad;
			if (sscanf(val, "%lu:%15[^:]:%lu:%lu", &pa, pb, &ps, &pl) == 4) {
				struct ns_partition *p;
				if (o.faults.npart >= NS_MAX_PART)
					goto bad;
				p = &o.faults.part[o.faults.npart++];
				p->a = (int)pa;
				p->b = !strcmp(pb, "*") ? -1 : atoi(pb);
				p->start = ps;
				p->len = pl;
			} else if (!parse_u64(val, &v) && v <= NS_MAX_PART) {
				o.faults.rand_part = (int)v;
			} else {
				goto bad;
			}
			custom = 1;
		} else if (!strcmp(a, "--restart")) {
			unsigned long rn, rt;
			if (!val)
				goto bad;
			if (sscanf(val, "%lu:%lu", &rn, &rt) == 2) {
				if (o.faults.nrestart >= NS_MAX_RESTART)
					goto bad;
				o.faults.restart[o.faults.nrestart].node = (int)rn;
				o.faults.restart[o.faults.nrestart++].at = rt;
			} else if (!parse_u64(val, &v) && v <= NS_MAX_RESTART) {
				o.faults.rand_restart = (int)v;
			} else {
				goto bad;
			}
			custom = 1;
		} else if (!strcmp(a, "--nodes")) {
			if (parse_u64(val, &v) || v < 2 || v > 8)
				goto bad;
			o.nodes = (int)v;
		} else if (!strcmp(a, "--attempts")) {
			if (parse_u64(val, &v) || v < 1 || v > 10000)
				goto bad;
			o.attempts = (int)v;
		} else {
			takes = 0;
			keep = 0;
			if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
				verbose = 1;
			else if (!strcmp(a, "--json"))
				json = 1;
			else if (!strcmp(a, "--check-determinism"))
				determinism = 1;
			else if (!strcmp(a, "-q") || !strcmp(a, "--quiet"))
				quiet = 1;
			else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
				usage(stdout);
				return 0;
			} else {
				fprintf(stderr, "uscm-netsim: unknown option %s\n", a);
				usage(stderr);
				return 2;
			}
		}
		if (takes && !val)
			goto bad;
		/* Options that shape the scenario go into the re-run command. */
		if (keep && el + strlen(a) + strlen(val) + 3 < sizeof(extra))
			el += (size_t)snprintf(extra + el, sizeof(extra) - el, " %s %s", a, val);
		i += takes;
		continue;
bad:
		fprintf(stderr, "uscm-netsim: bad or missing value for %s\n", a);
		usage(stderr);
		return 2;
	}
	if (!have_seed) {
		usage(stderr);
		return 2;
	}
	if (custom) {
		if (o.profile != NS_PROF_AUTO) {
			fprintf(stderr, "uscm-netsim: --profile and fault options exclude each other\n");
			return 2;
		}
		o.profile = NS_PROF_CUSTOM;
	}
	o.trace_json = json;

	uint64_t failed = 0, first_fail = 0, mads = 0, conns = 0, est = 0, clean = 0;
	uint64_t per_prof[NS_PROF_COUNT + 1] = { 0 };
	double t0 = now_s();

	for (uint64_t k = 0; k < scenarios; k++) {
		struct ns_result r, r2;
		int single = scenarios == 1;

		o.seed = seed + k;
		o.trace = single && verbose ? stdout : NULL;
		ns_run(&o, &r);
		if (determinism) {
			o.trace = NULL;
			ns_run(&o, &r2);
			if (r2.hash != r.hash || r2.violations != r.violations) {
				r.violations++;
				snprintf(r.report, sizeof(r.report),
					 "nondeterministic: hash %016" PRIx64 " then %016" PRIx64 "\n", r.hash,
					 r2.hash);
			}
		}
		mads += r.n.mads;
		conns += r.n.attempts + r.n.sidr;
		est += r.n.established;
		clean += r.n.clean_attempts;
		per_prof[r.profile >= 0 && r.profile < NS_PROF_COUNT ? r.profile : NS_PROF_COUNT]++;
		if (r.violations) {
			if (!failed)
				first_fail = o.seed;
			failed++;
			printf("FAIL seed %" PRIu64 " (profile %s, %d nodes, %d attempts): %d "
			       "violation(s)\n%s",
			       o.seed, ns_profile_str(r.profile), r.nodes, r.attempts, r.violations,
			       r.report);
			printf("  re-run: %s --seed %" PRIu64 "%s -v\n", argv[0], o.seed, extra);
		} else if (!quiet && (single || verbose)) {
			printf("ok   seed %" PRIu64 " (profile %s, %d nodes, %d attempts, %" PRIu64
			       " MADs, %" PRIu64 " lost, %" PRIu64 " dup, %" PRIu64 " established, %" PRIu64
			       " clean, %" PRIu64 " restarts) hash %016" PRIx64 " end %" PRIu64 " ns\n",
			       o.seed, ns_profile_str(r.profile), r.nodes, r.attempts, r.n.mads,
			       r.n.lost + r.n.partitioned, r.n.duplicated, r.n.established,
			       r.n.clean_attempts, r.n.restarts, r.hash, r.end_time);
		}
	}
	double dt = now_s() - t0;

	if (scenarios > 1 || quiet) {
		printf("%" PRIu64 " scenarios (seeds %" PRIu64 "..%" PRIu64 "), %" PRIu64 " failed; "
		       "%" PRIu64 " attempts (%" PRIu64 " fault-free), %" PRIu64 " established, %" PRIu64
		       " MADs; %.2f s\n",
		       scenarios, seed, seed + scenarios - 1, failed, conns, clean, est, mads, dt);
		printf("profiles:");
		for (int p = 0; p < NS_PROF_COUNT; p++)
			printf(" %s %" PRIu64, ns_profile_str(p), per_prof[p]);
		if (per_prof[NS_PROF_COUNT])
			printf(" custom %" PRIu64, per_prof[NS_PROF_COUNT]);
		printf("\n");
	}
	if (failed && verbose && scenarios > 1) {
		struct ns_result r;
		printf("---- re-running seed %" PRIu64 " alone with a trace ----\n", first_fail);
		o.seed = first_fail;
		o.trace = stdout;
		ns_run(&o, &r);
	}
	return failed ? 1 : 0;
}
