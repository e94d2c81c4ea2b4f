/*
 * uscm-bench - connection setup through uscm's librdmacm on the simulated
 * fabric against TCP loopback, in the same run and the same harness shape:
 * a cmtime-style per-step table (per-connection µs, total, min, p50, p99,
 * max, connections/s) for each N, the uscm/TCP ratios, the fabric's raw MAD
 * round trip, the protocol engine's in-process ceiling (uscm-bench-engine),
 * heap per established connection and the SA queries a run cost.
 *
 * usage: uscm-bench [-n N[,N...]] [-w WINDOW] [-s SERIAL] [--no-qp] [--no-tcp] [--clients P]
 *                   [--daemon] [--mad M] [--engine K] [--qps Q] [--csv FILE] [--plot FILE.png]
 *
 * It starts its own 2-node fabric (uscm-sim, next to this binary) and runs
 * every side as a child process of itself (--role ...): the rdma_cm server
 * on node2, the client on node1, with LD_LIBRARY_PATH on uscm's librdmacm
 * and the drop-ins (build/lib:build/sim/lib in the build tree, their
 * installed places otherwise: sim/sim_paths.h, docs/install.md).
 * It prints figures and ratios; it is not a pass/fail test.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "sim/sim_paths.h"

#define MAX_NS 16

static char bindir[PATH_MAX], simdir[PATH_MAX];
static const char *link_kind = "ib";
static int sim_up;
static int nclients = 1; /* --clients: uscm client processes, each on its own node */
static int use_daemon;   /* the uscm roles talk to their node's uscmd (--daemon runs) */

static const char *const step_order[] = { "create_id", "bind", "resolve_addr", "resolve_route",
					  "create_qp", "connect", "established", "disconnect",
					  "destroy" };

struct child {
	pid_t pid;
	FILE *out;
};

/* Runs this program as `role` on sim node `node` (NULL: no fabric), its
 * stdout readable through c->out. */
static int spawn(struct child *c, const char *node, char *const args[])
{
	int p[2];
	char exe[PATH_MAX + 16];

	if (pipe(p))
		return -1;
	c->pid = fork();
	if (c->pid < 0)
		return -1;
	if (c->pid == 0) {
		char lib[2 * PATH_MAX + 32];
		char *argv[32];
		int k = 0;

		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		if (node) {
			char ld[PATH_MAX], sl[PATH_MAX];

			if (sim_path(SIM_PATH_LIBDIR, ld, sizeof(ld)) < 0 ||
			    sim_path(SIM_PATH_SIMLIB, sl, sizeof(sl)) < 0)
				_exit(127);
			/* the drop-ins first: an installed ${libdir} may hold
			 * the host's real libibverbs too */
			snprintf(lib, sizeof(lib), "%s:%s", sl, ld);
			setenv("LD_LIBRARY_PATH", lib, 1);
			setenv("USCM_SIM_NODE", node, 1);
			if (use_daemon) {
				char sock[PATH_MAX + 64];

				snprintf(sock, sizeof(sock), "%s/f/%s/uscmd.sock", simdir, node);
				setenv("USCM_SOCKET", sock, 1);
				setenv("USCM_MODE", "daemon", 1);
			} else {
				setenv("USCM_MODE", "inproc", 1);
			}
		}
		snprintf(exe, sizeof(exe), "%s/uscm-bench", bindir);
		argv[k++] = exe;
		for (int i = 0; args[i] && k < 31; i++)
			argv[k++] = args[i];
		argv[k] = NULL;
		execv(exe, argv);
		_exit(127);
	}
	close(p[1]);
	c->out = fdopen(p[0], "r");
	return c->out ? 0 : -1;
}

static void read_figures(FILE *f, struct bench_run *r);

/* Waits for c (killed after timeout_s), then parses what it wrote since
 * into r (when given): a role writes a few lines only, which its pipe
 * holds, so waiting first never blocks it and a hung role cannot hang us. */
static int finish_read(struct child *c, int timeout_s, struct bench_run *r)
{
	int st = 0, rc = 124;

	for (int i = 0; i < timeout_s * 10; i++) {
		pid_t w = waitpid(c->pid, &st, WNOHANG);
		if (w == c->pid) {
			rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
			break;
		}
		struct timespec ts = { 0, 100000000 };
		nanosleep(&ts, NULL);
	}
	if (rc == 124) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, &st, 0);
	}
	if (r)
		read_figures(c->out, r);
	fclose(c->out);
	return rc;
}

static int finish(struct child *c, int timeout_s)
{
	return finish_read(c, timeout_s, NULL);
}

static int sh(char *out, size_t cap, const char *cmd)
{
	FILE *p = popen(cmd, "r");
	size_t n = 0;

	if (!p)
		return -1;
	if (out) {
		n = fread(out, 1, cap - 1, p);
		out[n] = 0;
	} else {
		char b[512];
		while (fread(b, 1, sizeof(b), p) > 0)
			;
	}
	int st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void sim_down(void)
{
	char cmd[4 * PATH_MAX + 64];

	if (!sim_up)
		return;
	snprintf(cmd, sizeof(cmd), "'%s/uscm-sim' stop --dir '%s/f' >/dev/null 2>&1; rm -rf '%s'", bindir,
		 simdir, simdir);
	sh(NULL, 0, cmd);
	sim_up = 0;
}

static int sim_start(void)
{
	char cmd[4 * PATH_MAX + 64], out[4096], pid[32], d[PATH_MAX + 8];

	snprintf(simdir, sizeof(simdir), "/tmp/uscm-bench.XXXXXX");
	if (!mkdtemp(simdir))
		return -1;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("USCM_SIM_WATCH_PID", pid, 1);
	snprintf(cmd, sizeof(cmd), "'%s/uscm-sim' start --dir '%s/f' --nodes %d --link %s --no-uscmd 2>&1", bindir,
		 simdir, 1 + nclients, link_kind);
	if (sh(out, sizeof(out), cmd)) {
		fprintf(stderr, "uscm-bench: uscm-sim start failed:\n%s", out);
		return -1;
	}
	sim_up = 1;
	snprintf(d, sizeof(d), "%s/f", simdir);
	setenv("USCM_SIM_DIR", d, 1);
	strncat(d, "/hosts", sizeof(d) - strlen(d) - 1);
	setenv("USCM_HOSTS", d, 1);
	return 0;
}

/* Daemon mode (--daemon): one uscmd per node of the fabric, started for
 * the daemon runs and stopped after them (the MAD round trip and the
 * in-process runs need the ports' CM agents free). */
static int daemons(const char *verb)
{
	char cmd[4 * PATH_MAX + 64], out[4096];

	for (int i = 1; i <= 1 + nclients; i++) {
		snprintf(cmd, sizeof(cmd), "'%s/uscm-sim' uscmd --dir '%s/f' node%d %s 2>&1", bindir, simdir,
			 i, verb);
		if (sh(out, sizeof(out), cmd)) {
			fprintf(stderr, "uscm-bench: uscm-sim uscmd node%d %s failed:\n%s", i, verb, out);
			return -1;
		}
	}
	return 0;
}

/* A field of a node's uscmd's /proc status in kB (VmRSS, VmHWM), or -1. */
static long daemon_kb(int node, const char *field)
{
	char cmd[4 * PATH_MAX + 128], out[256];
	long kb = -1;

	snprintf(cmd, sizeof(cmd),
		 "p=$(pgrep -f -o -- '--socket %s/f/node%d/uscmd.sock'); [ -n \"$p\" ] &&"
		 " awk '/^%s:/ { print $2 }' /proc/$p/status",
		 simdir, node, field);
	if (sh(out, sizeof(out), cmd) == 0)
		kb = strtol(out, NULL, 10);
	return kb;
}

/* The SA's own query counter (uscm-sim status). */
static long sa_queries(void)
{
	char cmd[4 * PATH_MAX + 64], out[16384];
	long n = -1;

	snprintf(cmd, sizeof(cmd), "'%s/uscm-sim' status --dir '%s/f' 2>&1", bindir, simdir);
	if (sh(out, sizeof(out), cmd) == 0) {
		char *p = strstr(out, "SA queries");
		if (p)
			sscanf(p, "SA queries%*[^0-9]%ld", &n);
	}
	return n;
}

/* The host's UDP RcvbufErrors (/proc/net/snmp), or -1: the sim carries
 * every MAD as a datagram on loopback, and one that finds its receiver's
 * socket buffer full is dropped there, as a MAD that finds an HCA's QP1
 * receive queue empty is; the CM resends it after its response timeout
 * (4.3 s by default), which is what a run that suddenly takes seconds
 * longer shows. Host-wide: other programs' drops count too. */
static long udp_rcvbuf_errors(void)
{
	FILE *f = fopen("/proc/net/snmp", "re");
	char hdr[1024], val[1024];
	long n = -1;

	if (!f)
		return -1;
	while (fgets(hdr, sizeof(hdr), f) && fgets(val, sizeof(val), f)) {
		char *hs, *vs, *h, *v;

		if (strncmp(hdr, "Udp:", 4) || strncmp(val, "Udp:", 4))
			continue;
		for (h = strtok_r(hdr, " \n", &hs), v = strtok_r(val, " \n", &vs); h && v;
		     h = strtok_r(NULL, " \n", &hs), v = strtok_r(NULL, " \n", &vs))
			if (!strcmp(h, "RcvbufErrors"))
				n = strtol(v, NULL, 10);
		break;
	}
	fclose(f);
	return n;
}

static void order_steps(struct bench_run *r)
{
	struct bench_run o = *r;
	int k = 0;

	for (size_t s = 0; s < sizeof(step_order) / sizeof(step_order[0]); s++)
		for (int i = 0; i < r->nsteps; i++)
			if (!strcmp(r->steps[i].name, step_order[s]))
				o.steps[k++] = r->steps[i];
	for (int i = 0; i < r->nsteps; i++) {
		int known = 0;
		for (size_t s = 0; s < sizeof(step_order) / sizeof(step_order[0]); s++)
			known |= !strcmp(r->steps[i].name, step_order[s]);
		if (!known)
			o.steps[k++] = r->steps[i];
	}
	o.nsteps = k;
	*r = o;
}

static void read_figures(FILE *f, struct bench_run *r)
{
	char line[512];

	while (fgets(line, sizeof(line), f))
		bench_parse_line(r, line);
}

static int run_pair(struct bench_run *r, int tcp, size_t n, size_t window, int no_qp)
{
	static int port_seq;
	char sn[32], sw[32], sp[32];
	char line[256];
	struct child srv;
	int port, rc;
	long q0 = 0, d0 = -1;

	memset(r, 0, sizeof(*r));
	r->what = tcp ? "tcp" : "uscm";
	r->n = n;
	r->window = window ? window : n;
	snprintf(sn, sizeof(sn), "%zu", n);
	snprintf(sw, sizeof(sw), "%zu", window);
	if (tcp) {
		char *sa[] = { "--role", "tcp-server", "-n", sn, NULL };
		if (spawn(&srv, NULL, sa) || !fgets(line, sizeof(line), srv.out) ||
		    sscanf(line, "port %d", &port) != 1) {
			fprintf(stderr, "uscm-bench: the TCP server did not start\n");
			return -1;
		}
	} else {
		port = 20000 + (int)((unsigned)getpid() % 20000) + port_seq++;
		snprintf(sp, sizeof(sp), "%d", port);
		char *sa[] = { "--role", "cm-server", "-n", sn, "--port", sp, "--dst", "127.10.0.2",
			       no_qp ? "--no-qp" : NULL, NULL };
		if (spawn(&srv, "node2", sa) || !fgets(line, sizeof(line), srv.out) || strncmp(line, "ready", 5)) {
			fprintf(stderr, "uscm-bench: the rdma_cm server did not start\n");
			return -1;
		}
		q0 = sa_queries();
		d0 = udp_rcvbuf_errors();
	}
	snprintf(sp, sizeof(sp), "%d", port);
	/* Several clients: node1, node3, node4, ... (node2 serves), n split. */
	int nc = tcp ? 1 : nclients;
	struct child cl[16];
	rc = 0;
	for (int k = 0; k < nc; k++) {
		char kn[32], node[16], src[32];
		int id = k == 0 ? 1 : k + 2;
		snprintf(kn, sizeof(kn), "%zu", n / (size_t)nc + (k == 0 ? n % (size_t)nc : 0));
		snprintf(node, sizeof(node), "node%d", id);
		snprintf(src, sizeof(src), "127.10.0.%d", id);
		char *ca[] = { "--role", tcp ? "tcp-client" : "cm-client", "-n", nc > 1 ? kn : sn, "-w", sw,
			       "--port", sp, "--dst", tcp ? "127.0.0.1" : "127.10.0.2", "--src", src,
			       no_qp && !tcp ? "--no-qp" : NULL, NULL };
		if (spawn(&cl[k], tcp ? NULL : node, ca))
			return -1;
	}
	for (int k = 0; k < nc; k++) {
		struct bench_run one;
		memset(&one, 0, sizeof(one));
		read_figures(cl[k].out, &one);
		bench_merge_run(r, &one);
		int c = finish(&cl[k], 60);
		rc = rc ? rc : c;
	}
	int src = finish_read(&srv, 60, r); /* the server's switches per connection */
	if (!tcp) {
		long q1 = sa_queries(), d1 = udp_rcvbuf_errors();
		r->sa_queries = q0 >= 0 && q1 >= 0 ? (double)(q1 - q0) : -1;
		r->udp_drops = d0 >= 0 && d1 >= 0 ? (double)(d1 - d0) : -1;
	}
	order_steps(r);
	r->ok = rc == 0 && src == 0 && bench_step(r, "established");
	if (!r->ok)
		fprintf(stderr, "uscm-bench: %s run of %zu failed (client exit %d, server exit %d)\n", r->what, n,
			rc, src);
	return r->ok ? 0 : -1;
}

/* An echo role and a ping role (NULL node: no fabric); the echo role's
 * first line is read (UDP: "port P", passed to the ping as --port), then
 * the ping's one step comes back in *out. */
static int run_echo_ping(const char *enode, char *const ea[], const char *pnode, char **pa, char *port,
			 size_t portcap, struct bench_stat *out, double *cpu)
{
	struct child e, p;
	struct bench_run r = { 0 };
	char line[256];
	int n;

	if (spawn(&e, enode, ea) || !fgets(line, sizeof(line), e.out))
		return -1;
	if (!pnode) {
		if (sscanf(line, "port %d", &n) != 1)
			return -1;
		snprintf(port, portcap, "%d", n);
	}
	if (spawn(&p, pnode, pa))
		return -1;
	read_figures(p.out, &r);
	int rc = finish(&p, 60);
	read_figures(e.out, &r); /* the echo's CPU, printed as it ends */
	finish(&e, 10);
	if (rc || !r.nsteps)
		return -1;
	*out = r.steps[0];
	*cpu = r.cpu_ping_us > 0 && r.cpu_echo_us > 0 ? r.cpu_ping_us + r.cpu_echo_us : 0;
	return 0;
}

/* The fabric's raw MAD round trip, node1 -> node2's umad agent. */
static int run_mad(size_t m, struct bench_stat *out, double *cpu)
{
	char sm[32], *ea[] = { "--role", "mad-echo", "-n", sm, NULL };
	char dl[16], *pa[] = { "--role", "mad-ping", "-n", sm, "--port", dl, NULL };

	snprintf(sm, sizeof(sm), "%zu", m);
	snprintf(dl, sizeof(dl), "%d", 3); /* node2's LID (node i: LID i + 1) */
	return run_echo_ping("node2", ea, "node1", pa, dl, sizeof(dl), out, cpu);
}

/* The floor: a UDP ping-pong of a MAD's size between two processes. */
static int run_udp(size_t m, struct bench_stat *out, double *cpu)
{
	char sm[32], sp[16];
	char *ea[] = { "--role", "udp-echo", "-n", sm, NULL };
	char *pa[] = { "--role", "udp-ping", "-n", sm, "--port", sp, NULL };

	snprintf(sm, sizeof(sm), "%zu", m);
	return run_echo_ping(NULL, ea, NULL, pa, sp, sizeof(sp), out, cpu);
}

/* The protocol engine's ceiling, from uscm-bench-engine (same build). */
static int run_engine(size_t k, double *ns, double *bytes)
{
	char cmd[PATH_MAX + 64], eng[PATH_MAX], out[4096], *p;

	/* build/bin, or installed ${libexecdir}/uscm */
	if (sim_file(SIM_PATH_LIBEXEC, "uscm-bench-engine", eng, sizeof(eng)) < 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "'%s' --handshakes %zu --live 1000", eng, k);
	if (sh(out, sizeof(out), cmd))
		return -1;
	p = strstr(out, "\n      1000 ");
	if (!p)
		return -1;
	return sscanf(p, " %*d %lf %*f %lf", ns, bytes) == 2 ? 0 : -1;
}

/* One serial run's CPU per connection (both processes) against the floor
 * and TCP's, and the library's CPU overhead (connection - 1.5 MAD round
 * trips' CPU). */
static void print_conn_cpu(const char *label, const char *olabel, const struct bench_run *r, double u, double t,
			   double udp_cpu, double mad_cpu, const char *note)
{
	if (u <= 0)
		return;
	printf("  %s %7.1f us  %5.2f x floor", label, u, u / udp_cpu);
	if (t > 0)
		printf(", %.2f x TCP", u / t);
	printf(" (client %.1f, server %.1f)\n", r->csw[BENCH_CSW_CLIENT].cpu_us, r->csw[BENCH_CSW_SERVER].cpu_us);
	if (mad_cpu > 0)
		printf("  %s %4.1f us%s\n", olabel, u - 1.5 * mad_cpu, note);
}

/* The same figures in CPU time (every thread of both processes, and of
 * their uscmds in daemon mode): what a round trip or a connection costs
 * whatever the scheduler does with it. On one vCPU (taskset) latency is
 * these summed plus the switches between them; on two it also holds the
 * wake-up of an idle vCPU, which makes latency bimodal on a VM. */
static void print_cpu(FILE *cf, size_t n, double udp_cpu, double mad_cpu, const struct bench_run *us,
		      const struct bench_run *ts, const struct bench_run *ds, const struct bench_run *uc)
{
	double u = bench_cpu_total(us), t = bench_cpu_total(ts), d = bench_cpu_total(ds), c = bench_cpu_total(uc);

	if (udp_cpu <= 0)
		return;
	printf("CPU time, both processes, every thread (independent of scheduling):\n");
	printf("  UDP round trip (floor)    %7.1f us\n", udp_cpu);
	if (mad_cpu > 0)
		printf("  sim MAD round trip        %7.1f us  %5.2f x floor\n", mad_cpu, mad_cpu / udp_cpu);
	if (t > 0)
		printf("  TCP connect+accept        %7.1f us  %5.2f x floor\n", t, t / udp_cpu);
	print_conn_cpu("uscm connection          ", "library CPU overhead        ", us, u, t, udp_cpu, mad_cpu,
		       " (connection - 1.5 MAD round trips)");
	print_conn_cpu("uscm connection, no QPs  ", "library CPU overhead, no QPs", uc, c, t, udp_cpu, mad_cpu,
		       "");
	if (d > 0 && mad_cpu > 0)
		printf("  uscm through uscmd        %7.1f us  %5.2f x floor; overhead %.1f us\n", d, d / udp_cpu,
		       d - 1.5 * mad_cpu);
	if (cf) {
		fprintf(cf, "udp,serial,%zu,1,cpu_rtt_us,%.2f,,,,,,\n", n, udp_cpu);
		if (mad_cpu > 0)
			fprintf(cf, "mad,serial,%zu,1,cpu_rtt_us,%.2f,,,,,,\n", n, mad_cpu);
		if (u > 0 && mad_cpu > 0)
			fprintf(cf, "uscm,serial,%zu,1,lib_cpu_overhead_us,%.2f,,,,,,\n", us->n,
				u - 1.5 * mad_cpu);
		if (c > 0 && mad_cpu > 0)
			fprintf(cf, "uscm-no-qp,serial,%zu,1,lib_cpu_overhead_us,%.2f,,,,,,\n", uc->n,
				c - 1.5 * mad_cpu);
	}
}

/* One serial run's setup p50 against the floor and TCP, and the library's
 * overhead (setup - 1.5 MAD round trips) at p50 and p99, with its CSV rows
 * (impl: "uscm", or "uscm-no-qp" for the run without QPs). */
static void print_setup(FILE *cf, const char *label, const char *olabel, const char *impl,
			const struct bench_stat *s, const struct bench_stat *m, const struct bench_stat *t, double f,
			const struct bench_run *r, const char *tcp_goal, const char *note)
{
	double o50, o99;

	if (!s || !s->valid)
		return;
	o50 = s->p50 - 1.5 * m->p50;
	o99 = s->p99 - 1.5 * m->p99;
	printf("  %s p50 %7.1f us  %5.2f x floor", label, s->p50, s->p50 / f);
	if (t && t->valid && t->p50 > 0)
		printf(", %.2f x TCP%s", s->p50 / t->p50, tcp_goal);
	printf("\n  %s p50 %7.1f us (goal <= 15), p99 %.1f us%s\n", olabel, o50, o99, note);
	bench_csw_print(stdout, r);
	if (cf) {
		fprintf(cf, "%s,serial,%zu,1,lib_overhead_p50_us,%.1f,,,,,,\n", impl, s->n, o50);
		fprintf(cf, "%s,serial,%zu,1,lib_overhead_p99_us,%.1f,,,,,,\n", impl, s->n, o99);
	}
}

/* The same run's figures against the floor (the goals in docs/performance.md): the MAD
 * round trip, TCP, uscm's setup latency, and the library's own overhead:
 * setup minus the 1.5 MAD round trips a connection needs (REQ, REP, RTU). */
static void print_floor(FILE *cf, const struct bench_stat *udp, const struct bench_stat *m,
			const struct bench_run *us, const struct bench_run *ts, const struct bench_run *ds,
			const struct bench_run *uc, double udp_cpu, double mad_cpu)
{
	const struct bench_stat *s = bench_step(us, "established"), *t = bench_step(ts, "established"),
				*d = bench_step(ds, "established"), *c = bench_step(uc, "established");
	double f = udp->p50 > 0 ? udp->p50 : 1;

	printf("against the floor (p50 %.1f us):\n", udp->p50);
	printf("  sim MAD round trip        p50 %7.1f us  %5.2f x floor (goal <= 1.3)\n", m->p50, m->p50 / f);
	if (t && t->valid)
		printf("  TCP connect+accept        p50 %7.1f us  %5.2f x floor\n", t->p50, t->p50 / f);
	print_setup(cf, "uscm setup (serial)      ", "library overhead         ", "uscm", s, m, t, f, us,
		    " (goal <= 1.5)", " (setup - 1.5 MAD round trips)");
	print_setup(cf, "uscm setup without QPs   ", "library overhead, no QPs ", "uscm-no-qp", c, m, t, f, uc, "",
		    " (the CM and the library alone: no verbs QP work)");
	if (d && d->valid) {
		printf("  uscm setup through uscmd  p50 %7.1f us  %5.2f x floor; overhead p50 %.1f us\n", d->p50,
		       d->p50 / f, d->p50 - 1.5 * m->p50);
		bench_csw_print(stdout, ds);
	}
	if (t && t->valid)
		bench_csw_print(stdout, ts);
	print_cpu(cf, m->n, udp_cpu, mad_cpu, us, ts, ds, uc);
}

static int role_main(const char *role, const struct bench_opts *o)
{
	if (!strcmp(role, "cm-server"))
		return bench_cm_server(o);
	if (!strcmp(role, "cm-client"))
		return bench_cm_client(o);
	if (!strcmp(role, "tcp-server"))
		return bench_tcp_server(o);
	if (!strcmp(role, "tcp-client"))
		return bench_tcp_client(o);
	if (!strcmp(role, "mad-echo"))
		return bench_mad_echo(o);
	if (!strcmp(role, "mad-ping"))
		return bench_mad_ping(o);
	if (!strcmp(role, "udp-echo"))
		return bench_udp_echo(o);
	if (!strcmp(role, "qp-loop"))
		return bench_qp_loop(o);
	if (!strcmp(role, "udp-ping"))
		return bench_udp_ping(o);
	fprintf(stderr, "uscm-bench: unknown role %s\n", role);
	return 2;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: uscm-bench [-n N[,N...]] [-w WINDOW] [-s SERIAL] [--no-qp] [--no-tcp] [--link ib|roce]\n"
		"                  [--mad M] [--engine K] [--qps Q] [--csv FILE] [--plot FILE.png]\n"
		"  -n       connections per run, one uscm and one TCP run each (default 1000)\n"
		"  -w       at most WINDOW connections in flight (default: all N)\n"
		"  -s       also SERIAL connections one at a time: the latency figures (default 200, 0: off)\n"
		"  --no-qp  connect without QPs (rdma_connect with qp_num): the CM alone, past the\n"
		"           sim's per-node QP/fd limits\n"
		"  --clients P  uscm clients in P processes on P nodes (node1, node3, ...), N split\n"
		"           between them: past one process's 28k ephemeral ports\n"
		"  --daemon also every uscm run through uscmd (one per node, daemon mode) and the\n"
		"           daemon/in-process ratios and uscmd's memory per connection\n"
		"  --mad    raw MAD round trips (default 1000, 0: off)\n"
		"  --engine in-process engine handshakes (default 20000, 0: off)\n"
		"  --qps    the sim's verbs QPs alone: CPU per create/INIT/RTR/RTS/destroy over Q QPs\n"
		"           on node1, held and one at a time (default 0: off)\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "role", required_argument, NULL, 'R' }, { "port", required_argument, NULL, 'P' },
		{ "dst", required_argument, NULL, 'D' },  { "no-qp", no_argument, NULL, 'Q' },
		{ "no-tcp", no_argument, NULL, 'T' },     { "mad", required_argument, NULL, 'M' },
		{ "engine", required_argument, NULL, 'E' }, { "csv", required_argument, NULL, 'C' },
		{ "plot", required_argument, NULL, 'G' }, { "link", required_argument, NULL, 'L' },
		{ "window", required_argument, NULL, 'w' }, { "serial", required_argument, NULL, 's' },
		{ "clients", required_argument, NULL, 'K' }, { "src", required_argument, NULL, 'S' },
		{ "daemon", no_argument, NULL, 'Y' },     { "qps", required_argument, NULL, 'U' },
		{ "help", no_argument, NULL, 'h' },       { 0 },
	};
	struct bench_opts o = { .n = 1000, .dst = "127.10.0.2" };
	size_t ns[MAX_NS] = { 1000 }, serial = 200, mad = 1000, engine = 20000, qps = 0;
	int nn = 1, no_tcp = 0, c, with_daemon = 0;
	const char *role = NULL, *csv = NULL, *plot = NULL;

	while ((c = getopt_long(argc, argv, "n:w:s:h", lo, NULL)) != -1) {
		switch (c) {
		case 'R': role = optarg; break;
		case 'P': o.port = atoi(optarg); break;
		case 'D': o.dst = optarg; break;
		case 'Q': o.no_qp = 1; break;
		case 'T': no_tcp = 1; break;
		case 'M': mad = strtoul(optarg, NULL, 0); break;
		case 'E': engine = strtoul(optarg, NULL, 0); break;
		case 'U': qps = strtoul(optarg, NULL, 0); break;
		case 'C': csv = optarg; break;
		case 'G': plot = optarg; break;
		case 'L': link_kind = optarg; break;
		case 'K':
			nclients = atoi(optarg);
			if (nclients < 1 || nclients > 16)
				nclients = 1;
			break;
		case 'S': o.src = optarg; break;
		case 'Y': with_daemon = 1; break;
		case 'w': o.window = strtoul(optarg, NULL, 0); break;
		case 's': serial = strtoul(optarg, NULL, 0); break;
		case 'n':
			nn = 0;
			for (char *t = strtok(optarg, ","); t && nn < MAX_NS; t = strtok(NULL, ","))
				ns[nn++] = strtoul(t, NULL, 0);
			o.n = ns[0];
			break;
		default: usage(); return c == 'h' ? 0 : 2;
		}
	}
	if (role)
		return role_main(role, &o);
	if (!nn || !ns[0]) {
		usage();
		return 2;
	}

	char self[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (k <= 0)
		return 1;
	self[k] = 0;
	snprintf(bindir, sizeof(bindir), "%s", dirname(self));
	signal(SIGPIPE, SIG_IGN);
	if (sim_start())
		return 1;
	atexit(sim_down);
	/* N concurrent REQs queue up to N CONNECT_REQUESTs on the server: lift
	 * the listen backlog cap (the kernel's net.rdma_ucm.max_backlog) and
	 * the cap on half-open passive connections (USCM_MAX_PENDING, the REQ
	 * flood guard of docs/reliability.md). */
	setenv("USCM_MAX_BACKLOG", "1048576", 0);
	setenv("USCM_MAX_PENDING", "1048576", 0);

	struct bench_run u[MAX_NS], t[MAX_NS], us = { 0 }, ts = { 0 }, ds = { 0 }, uc = { 0 };
	int fail = 0;
	FILE *cf = NULL;

	if (csv && !(cf = fopen(csv, "w"))) {
		fprintf(stderr, "uscm-bench: %s: %s\n", csv, strerror(errno));
		return 1;
	}
	if (cf)
		bench_csv_header(cf);
	printf("uscm-bench: %s fabric, %d nodes; uscm client%s node1%s -> server node2%s; TCP 127.0.0.1\n\n",
	       link_kind, 1 + nclients, nclients > 1 ? "s" : "", nclients > 1 ? ",node3.." : "",
	       o.no_qp ? " (no QPs)" : "");
	for (int i = 0; i < nn; i++) {
		fprintf(stderr, "uscm-bench: N=%zu uscm\n", ns[i]);
		fail |= run_pair(&u[i], 0, ns[i], o.window, o.no_qp) != 0;
		bench_print_run(stdout, &u[i]);
		printf("  heap per established connection %.0f bytes (verbs excluded); SA queries %.0f\n",
		       u[i].heap_per_conn, u[i].sa_queries);
		if (!no_tcp) {
			fprintf(stderr, "uscm-bench: N=%zu tcp\n", ns[i]);
			fail |= run_pair(&t[i], 1, ns[i], o.window, 0) != 0;
			bench_print_run(stdout, &t[i]);
			printf("  ratio uscm/TCP: setup rate %.2f, us/conn %.2f, p50 %.2f\n",
			       bench_rate(&u[i]) / (bench_rate(&t[i]) ? bench_rate(&t[i]) : 1),
			       bench_step(&u[i], "established") && bench_step(&t[i], "established")
				       ? (bench_step(&u[i], "established")->total_us /
					  bench_step(&t[i], "established")->total_us)
				       : 0,
			       bench_step(&u[i], "established") && bench_step(&t[i], "established")
				       ? bench_step(&u[i], "established")->p50 / bench_step(&t[i], "established")->p50
				       : 0);
		} else {
			memset(&t[i], 0, sizeof(t[i]));
			t[i].what = "tcp";
		}
		printf("\n");
		if (cf) {
			bench_csv_run(cf, &u[i], "concurrent");
			bench_csv_run(cf, &t[i], "concurrent");
			fprintf(cf, "uscm,concurrent,%zu,%zu,heap_per_conn_bytes,%.0f,,,,,,\n", u[i].n, u[i].window,
				u[i].heap_per_conn);
			fprintf(cf, "uscm,concurrent,%zu,%zu,sa_queries,%.0f,,,,,,\n", u[i].n, u[i].window,
				u[i].sa_queries);
			fprintf(cf, "uscm,concurrent,%zu,%zu,udp_rcvbuf_drops,%.0f,,,,,,\n", u[i].n, u[i].window,
				u[i].udp_drops);
		}
	}
	if (serial) {
		fprintf(stderr, "uscm-bench: %zu serial connections, uscm and tcp\n", serial);
		fail |= run_pair(&us, 0, serial, 1, o.no_qp) != 0;
		bench_print_run(stdout, &us);
		if (!no_tcp) {
			fail |= run_pair(&ts, 1, serial, 1, 0) != 0;
			bench_print_run(stdout, &ts);
		}
		/* The same connections without QPs: the CM and the library
		 * alone, without the verbs provider's QP work (on the sim a
		 * socket per QP; on hardware a firmware command), which the
		 * server's accept path holds. */
		if (!o.no_qp) {
			fail |= run_pair(&uc, 0, serial, 1, 1) != 0;
			uc.what = "uscm-no-qp";
			bench_print_run(stdout, &uc);
		}
		const struct bench_stat *a = bench_step(&us, "established"), *b = bench_step(&ts, "established"),
					*nq = bench_step(&uc, "established");
		if (a && b && b->p50 > 0)
			printf("  setup latency p50 uscm %.1f us, TCP connect+accept %.1f us: ratio %.2f\n", a->p50,
			       b->p50, a->p50 / b->p50);
		if (nq && b && b->p50 > 0)
			printf("  setup latency p50 uscm without QPs %.1f us: ratio %.2f to TCP\n", nq->p50,
			       nq->p50 / b->p50);
		printf("\n");
		if (cf) {
			bench_csv_run(cf, &us, "serial");
			bench_csv_run(cf, &ts, "serial");
			if (nq)
				bench_csv_run(cf, &uc, "serial");
		}
	}
	if (with_daemon) {
		struct bench_run d[MAX_NS];
		long rss0[3], hwm[3];

		fprintf(stderr, "uscm-bench: daemon mode: starting a uscmd per node\n");
		if (daemons("start"))
			return 1;
		use_daemon = 1;
		for (int i = 1; i <= 2; i++)
			rss0[i] = daemon_kb(i, "VmRSS");
		printf("daemon mode (uscmd per node; the same runs through it)\n\n");
		for (int i = 0; i < nn; i++) {
			fprintf(stderr, "uscm-bench: N=%zu uscm through uscmd\n", ns[i]);
			fail |= run_pair(&d[i], 0, ns[i], o.window, o.no_qp) != 0;
			d[i].what = "uscmd";
			bench_print_run(stdout, &d[i]);
			printf("  ratio daemon/in-process: setup rate %.2f, p50 %.2f\n",
			       bench_rate(&d[i]) / (bench_rate(&u[i]) ? bench_rate(&u[i]) : 1),
			       bench_step(&d[i], "established") && bench_step(&u[i], "established")
				       ? bench_step(&d[i], "established")->p50 / bench_step(&u[i], "established")->p50
				       : 0);
			if (cf)
				bench_csv_run(cf, &d[i], "concurrent");
		}
		for (int i = 1; i <= 2; i++)
			hwm[i] = daemon_kb(i, "VmHWM");
		{
			size_t nmax = 0;

			for (int i = 0; i < nn; i++)
				nmax = ns[i] > nmax ? ns[i] : nmax;
			printf("  uscmd memory: node1 %ld -> peak %ld kB, node2 %ld -> peak %ld kB:"
			       " %.0f / %.0f bytes per connection at N=%zu\n",
			       rss0[1], hwm[1], rss0[2], hwm[2],
			       (double)(hwm[1] - rss0[1]) * 1024.0 / (double)(nmax ? nmax : 1),
			       (double)(hwm[2] - rss0[2]) * 1024.0 / (double)(nmax ? nmax : 1), nmax);
			if (cf)
				fprintf(cf, "uscmd,concurrent,%zu,%zu,daemon_bytes_per_conn,%.0f,,,,,,\n", nmax,
					o.window, (double)(hwm[2] - rss0[2]) * 1024.0 / (double)(nmax ? nmax : 1));
		}
		if (serial) {
			fprintf(stderr, "uscm-bench: %zu serial connections through uscmd\n", serial);
			fail |= run_pair(&ds, 0, serial, 1, o.no_qp) != 0;
			ds.what = "uscmd";
			bench_print_run(stdout, &ds);
			const struct bench_stat *a = bench_step(&ds, "established"), *b = bench_step(&us, "established");
			if (a && b && b->p50 > 0)
				printf("  setup latency p50 daemon %.1f us, in-process %.1f us: ratio %.2f\n", a->p50,
				       b->p50, a->p50 / b->p50);
			if (cf)
				bench_csv_run(cf, &ds, "serial");
		}
		printf("\n");
		use_daemon = 0;
		daemons("stop");
	}
	if (mad) {
		struct bench_stat m, udp = { 0 };
		double udp_cpu = 0, mad_cpu = 0;
		int have_udp;

		fprintf(stderr, "uscm-bench: %zu UDP round trips (the floor)\n", mad);
		have_udp = run_udp(mad, &udp, &udp_cpu) == 0;
		if (have_udp) {
			printf("floor: UDP ping-pong, 256 bytes, two processes on 127.0.0.1 (%zu): min %.1f p50 %.1f"
			       " p99 %.1f max %.1f us\n",
			       udp.n, udp.min, udp.p50, udp.p99, udp.max);
			if (cf)
				fprintf(cf, "udp,serial,%zu,1,udp_rtt,%.1f,%.3f,%.1f,%.1f,%.1f,%.1f,\n", udp.n,
					udp.total_us, udp.total_us / (double)udp.n, udp.min, udp.p50, udp.p99, udp.max);
		} else {
			fprintf(stderr, "uscm-bench: UDP round trip failed\n");
			fail = 1;
		}
		fprintf(stderr, "uscm-bench: %zu MAD round trips\n", mad);
		if (run_mad(mad, &m, &mad_cpu) == 0) {
			printf("fabric MAD round trip (umad node1 <-> node2, %zu): min %.1f p50 %.1f p99 %.1f max %.1f us;"
			       " 1.5 round trips = %.1f us\n",
			       m.n, m.min, m.p50, m.p99, m.max, 1.5 * m.p50);
			if (cf)
				fprintf(cf, "mad,serial,%zu,1,mad_rtt,%.1f,%.3f,%.1f,%.1f,%.1f,%.1f,\n", m.n, m.total_us,
					m.total_us / (double)m.n, m.min, m.p50, m.p99, m.max);
			if (have_udp)
				print_floor(cf, &udp, &m, &us, &ts, &ds, &uc, udp_cpu, mad_cpu);
		} else {
			fprintf(stderr, "uscm-bench: MAD round trip failed\n");
			fail = 1;
		}
	}
	if (qps) {
		char sq[32], line[256], *qa[] = { "--role", "qp-loop", "-n", sq, NULL };
		struct child qc;

		snprintf(sq, sizeof(sq), "%zu", qps);
		fprintf(stderr, "uscm-bench: %zu QPs, the sim's verbs alone\n", qps);
		if (spawn(&qc, "node1", qa) == 0) {
			while (fgets(line, sizeof(line), qc.out))
				fputs(line, stdout);
			if (finish(&qc, 120)) {
				fprintf(stderr, "uscm-bench: the QP loop failed\n");
				fail = 1;
			}
		} else {
			fail = 1;
		}
	}
	if (engine) {
		double ns_hs, bytes;
		fprintf(stderr, "uscm-bench: %zu engine handshakes\n", engine);
		if (run_engine(engine, &ns_hs, &bytes) == 0) {
			printf("engine only (in-process, both ends, 1000 live): %.0f ns CPU per handshake = %.0f handshakes/s;"
			       " %.0f bytes engine state per connection end\n",
			       ns_hs, 1e9 / ns_hs, bytes);
			if (cf)
				fprintf(cf, "engine,serial,%zu,1,handshake,%.1f,%.3f,,,,,%.0f\n", engine,
					ns_hs * (double)engine / 1e3, ns_hs / 1e3, 1e9 / ns_hs);
		} else {
			fprintf(stderr, "uscm-bench: uscm-bench-engine failed\n");
			fail = 1;
		}
	}
	if (cf)
		fclose(cf);
	if (plot)
		bench_write_plot(plot, u, t, nn);
	return fail;
}
