/*
 * uscm-bench smoke test: a tiny run (20 connections, 5 serial, 20 MAD round
 * trips, 200 engine handshakes) on its own fabric prints the per-step table
 * and writes a well-formed CSV with every step and positive figures. No
 * timing is asserted: the figures themselves are the benchmark's business.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/test_fixtures.h"

static char dir[64];

static const char *bin(void)
{
	const char *b = getenv("USCM_BIN_DIR");
	return b && *b ? b : "build/bin";
}

static void fini(void)
{
	tf_remove(dir);
}

#define sh tf_sh /* tests/test_fixtures.h */

/* The CSV row of impl/mode/step; its p50 (µs) through *p50. */
static const char *row(const char *csv, const char *prefix, const char *step, double *p50)
{
	char key[128];
	const char *p = csv;

	for (; (p = strstr(p, prefix)); p++) {
		if (p != csv && p[-1] != '\n')
			continue;
		snprintf(key, sizeof(key), ",%s,", step);
		const char *eol = strchr(p, '\n');
		const char *k = strstr(p, key);
		if (k && (!eol || k < eol)) {
			double f[6];
			if (sscanf(k + strlen(key), "%lf,%lf,%lf,%lf", &f[0], &f[1], &f[2], &f[3]) == 4)
				*p50 = f[3];
			return p;
		}
	}
	return NULL;
}

/* The figure of a "PREFIX...,KEY,V,..." row (total_us's column), -1 if none. */
static double figure(const char *csv, const char *prefix, const char *key)
{
	double p50, v = -1;
	const char *r = row(csv, prefix, key, &p50);

	if (r)
		sscanf(strstr(r, key) + strlen(key) + 1, "%lf", &v);
	return v;
}

Test(uscm_bench, small_run_table_and_csv, .fini = fini, .timeout = 300)
{
	char path[512], *out = NULL, *csv = NULL;
	static const char *const uscm_steps[] = { "create_id", "bind", "resolve_addr", "resolve_route",
						  "create_qp", "connect", "established", "disconnect",
						  "destroy" };
	static const char *const tcp_steps[] = { "create_id", "connect", "established", "destroy" };
	double p50;
	int rc;

	snprintf(path, sizeof(path), "%s/uscm-bench", bin());
	if (access(path, X_OK))
		tf_skip_missing("uscm-bench is not built (no librdmacm target in this build)");
	const char *f = tf_path(dir, "uscm-bench-test.", "b.csv");
	rc = sh(&out, "%s -n 20 -s 5 --mad 20 --engine 200 --csv %s 2>&1", path, f);
	cr_assert_eq(rc, 0, "uscm-bench failed:\n%s", out);
	for (size_t i = 0; i < sizeof(uscm_steps) / sizeof(uscm_steps[0]); i++)
		cr_expect(strstr(out, uscm_steps[i]), "table lacks %s:\n%s", uscm_steps[i], out);
	cr_expect(strstr(out, "ratio uscm/TCP"), "no ratio line:\n%s", out);
	cr_expect(strstr(out, "setup latency p50"), "no latency line:\n%s", out);
	cr_expect(strstr(out, "fabric MAD round trip"), "no MAD line:\n%s", out);
	cr_expect(strstr(out, "engine only"), "no engine line:\n%s", out);
	/* the floor and the figures against it, in the same run */
	cr_expect(strstr(out, "floor: UDP ping-pong, 256 bytes"), "no floor line:\n%s", out);
	cr_expect(strstr(out, "sim MAD round trip        p50"), "no MAD/floor ratio:\n%s", out);
	cr_expect(strstr(out, "library overhead          p50"), "no overhead line:\n%s", out);
	cr_expect(strstr(out, "uscm context switches per connection"), "no switch counts:\n%s", out);
	cr_expect(strstr(out, "CPU time, both processes"), "no CPU block:\n%s", out);
	cr_expect(strstr(out, "library CPU overhead"), "no CPU overhead line:\n%s", out);
	/* the same serial connections without QPs: the CM and library alone */
	cr_expect(strstr(out, "library overhead, no QPs  p50"), "no no-QP overhead line:\n%s", out);
	cr_expect(strstr(out, "library CPU overhead, no QPs"), "no no-QP CPU line:\n%s", out);

	cr_assert_eq(sh(&csv, "cat %s", f), 0);
	static const char hdr[] =
		"impl,mode,n,window,step,total_us,us_per_conn,min_us,p50_us,p99_us,max_us,conn_per_s\n";
	cr_assert(!strncmp(csv, hdr, sizeof(hdr) - 1), "CSV header:\n%s", csv);
	for (size_t i = 0; i < sizeof(uscm_steps) / sizeof(uscm_steps[0]); i++) {
		p50 = -1;
		cr_expect(row(csv, "uscm,concurrent,20,", uscm_steps[i], &p50), "no uscm %s row:\n%s",
			  uscm_steps[i], csv);
		cr_expect(p50 > 0, "uscm %s p50 %g", uscm_steps[i], p50);
		p50 = -1;
		cr_expect(row(csv, "uscm,serial,5,", uscm_steps[i], &p50), "no serial %s row", uscm_steps[i]);
		cr_expect(p50 > 0, "serial %s p50 %g", uscm_steps[i], p50);
	}
	for (size_t i = 0; i < sizeof(tcp_steps) / sizeof(tcp_steps[0]); i++) {
		p50 = -1;
		cr_expect(row(csv, "tcp,concurrent,20,", tcp_steps[i], &p50), "no tcp %s row", tcp_steps[i]);
		cr_expect(p50 > 0, "tcp %s p50 %g", tcp_steps[i], p50);
	}
	p50 = -1;
	cr_expect(row(csv, "mad,serial,20,", "mad_rtt", &p50) && p50 > 0, "MAD round trip row:\n%s", csv);
	p50 = -1;
	cr_expect(row(csv, "udp,serial,20,", "udp_rtt", &p50) && p50 > 0, "UDP floor row:\n%s", csv);
	/* CPU time: both ends of the floor and of the MAD round
	 * trip, both sides of a serial connection. A connection sends three
	 * MADs through the same fabric as the round trip's two, so it cannot
	 * cost less CPU than one MAD round trip. */
	{
		double udp_cpu = figure(csv, "udp,serial,20,", "cpu_rtt_us"),
		       mad_cpu = figure(csv, "mad,serial,20,", "cpu_rtt_us"),
		       cl = figure(csv, "uscm,serial,5,", "cpu_client_us"),
		       sv = figure(csv, "uscm,serial,5,", "cpu_server_us");

		cr_expect(udp_cpu > 0 && mad_cpu > 0, "CPU per round trip: UDP %g, MAD %g:\n%s", udp_cpu,
			  mad_cpu, csv);
		cr_expect(cl > 0 && sv > 0, "CPU per connection: client %g, server %g:\n%s", cl, sv, csv);
		cr_expect(cl + sv > mad_cpu, "a connection (%g us) cheaper than a MAD round trip (%g us)",
			  cl + sv, mad_cpu);
		cl = figure(csv, "uscm-no-qp,serial,5,", "cpu_client_us");
		sv = figure(csv, "uscm-no-qp,serial,5,", "cpu_server_us");
		/* (5 connections against 20 round trips: too few to compare
		 * the two without the noise of a short run deciding) */
		cr_expect(cl > 0 && sv > 0, "CPU per connection without QPs: client %g, server %g:\n%s", cl, sv,
			  csv);
		p50 = -1;
		cr_expect(row(csv, "uscm-no-qp,serial,5,", "established", &p50) && p50 > 0,
			  "no-QP established row:\n%s", csv);
		cr_expect(row(csv, "uscm-no-qp,serial,5,", "lib_overhead_p50_us", &p50),
			  "no-QP overhead row:\n%s", csv);
	}
	/* Context switches per connection are reported for both sides of both
	 * serial runs. A serial uscm connection cannot be made without
	 * someone blocking: the REP has to come from the other process, and
	 * neither side spins. Which side blocks is not fixed (on two cores the
	 * ESTABLISHED may be queued before the client waits), so the
	 * invariant is on the sum: at least one wake-up per two connections. */
	static const char *const sides[] = { "uscm,serial,5,", "tcp,serial,5," };
	static const char *const keys[] = { "csw_client_wake", "csw_server_wake" };
	for (size_t i = 0; i < 2; i++) {
		double sum = 0;

		for (size_t k = 0; k < 2; k++) {
			const char *r = row(csv, sides[i], keys[k], &p50);
			double w = -1;

			if (r)
				sscanf(strstr(r, keys[k]) + strlen(keys[k]) + 1, "%lf", &w);
			cr_expect(r && w >= 0, "%s%s: %g per connection:\n%s", sides[i], keys[k], w, csv);
			sum += w;
		}
		if (i == 0)
			cr_expect(sum >= 0.5, "uscm serial: %g wake-ups per connection in all:\n%s", sum, csv);
	}
	/* Every route of the run came from one SA query (the path cache). */
	cr_expect(strstr(csv, "uscm,concurrent,20,20,sa_queries,1,"), "SA queries row:\n%s", csv);
	cr_expect(strstr(csv, "\nengine,serial,200,1,handshake,"), "engine row:\n%s", csv);
	free(out);
	free(csv);
}

/* More connections at once than the library's default caps allow (listen
 * backlog 1024, USCM_MAX_PENDING 4096 half-open): the benchmark lifts both,
 * so every one of them establishes — a run that prints a table of zeros
 * instead is a failure. */
Test(uscm_bench, past_the_default_caps, .fini = fini, .timeout = 300)
{
	char path[512], *out = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/uscm-bench", bin());
	rc = sh(&out, "%s -n 5000 -s 0 --mad 0 --engine 0 --no-tcp 2>&1", path);
	cr_assert_eq(rc, 0, "uscm-bench -n 5000 failed:\n%s", out);
	cr_assert(strstr(out, "uscm: 5000 connections") && !strstr(out, "connections/s  0\n"),
		  "%s", out);
	free(out);
}

/* --qps: the sim's verbs QPs alone print every step of both
 * shapes with a figure; a QP that fails to be made fails the run. */
Test(uscm_bench, qp_loop_figures, .fini = fini, .timeout = 300)
{
	char path[512], *out = NULL;
	const char *h, *c;
	double cr, in, rtr, rts, de, tot, cyc;
	int rc;

	snprintf(path, sizeof(path), "%s/uscm-bench", bin());
	rc = sh(&out, "%s -n 1 -s 0 --mad 0 --engine 0 --no-tcp --qps 200 2>&1", path);
	cr_assert_eq(rc, 0, "uscm-bench --qps failed:\n%s", out);
	cr_assert(strstr(out, "sim QPs (200 RC QPs on node1"), "%s", out);
	h = strstr(out, "  held: ");
	c = strstr(out, "  one at a time: ");
	cr_assert(h && c, "%s", out);
	cr_assert_eq(sscanf(h, "  held: create %lf INIT %lf RTR %lf RTS %lf destroy %lf total %lf", &cr, &in,
			    &rtr, &rts, &de, &tot), 6, "%s", h);
	cr_assert_eq(sscanf(c, "  one at a time: %lf", &cyc), 1, "%s", c);
	/* a QP's creation makes a socket: never free */
	cr_assert(cr > 0 && tot >= cr && cyc > 0, "%s", out);
	free(out);
}
