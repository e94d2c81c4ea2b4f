/* uscm-bench: the PNG plot — setup cost (µs per connection) and rate
 * (connections/s) against N for uscm and TCP, through gnuplot, with its
 * data beside it as FILE.png.dat. gnuplot is installed by scripts/bench.sh,
 * not needed by the build or the tests. */
#include <errno.h>
#include <limits.h>
#include <string.h>

#include "bench.h"

void bench_write_plot(const char *png, const struct bench_run *u, const struct bench_run *t, int nn)
{
	char dat[PATH_MAX], cmd[PATH_MAX * 2];
	FILE *f, *g;

	snprintf(dat, sizeof(dat), "%s.dat", png);
	f = fopen(dat, "w");
	if (!f)
		return;
	fprintf(f, "# n uscm_us_per_conn uscm_conn_s tcp_us_per_conn tcp_conn_s uscm_p50 tcp_p50\n");
	for (int i = 0; i < nn; i++) {
		const struct bench_stat *us = bench_step(&u[i], "established");
		const struct bench_stat *ts = bench_step(&t[i], "established");
		fprintf(f, "%zu %.3f %.0f %.3f %.0f %.1f %.1f\n", u[i].n, us ? us->total_us / (double)us->n : 0,
			bench_rate(&u[i]), ts ? ts->total_us / (double)ts->n : 0, bench_rate(&t[i]),
			us ? us->p50 : 0, ts ? ts->p50 : 0);
	}
	fclose(f);
	snprintf(cmd, sizeof(cmd), "gnuplot 2>&1");
	g = popen(cmd, "w");
	if (!g) {
		fprintf(stderr, "uscm-bench: gnuplot: %s\n", strerror(errno));
		return;
	}
	fprintf(g,
		"set terminal png size 1000,600\nset output '%s'\nset logscale x\nset xlabel 'connections N (concurrent)'\n"
		"set ylabel 'setup cost, us per connection'\nset y2label 'connections/s'\nset y2tics\nset ytics nomirror\n"
		"set key top left\nset grid\nset title 'uscm (simulated fabric) vs TCP loopback: connection setup'\n"
		"plot '%s' u 1:2 w lp t 'uscm us/conn', '%s' u 1:4 w lp t 'TCP us/conn', "
		"'%s' u 1:3 axes x1y2 w lp t 'uscm conn/s', '%s' u 1:5 axes x1y2 w lp t 'TCP conn/s'\n",
		png, dat, dat, dat, dat);
	if (pclose(g))
		fprintf(stderr, "uscm-bench: gnuplot failed (is it installed? scripts/bench.sh installs it)\n");
}

