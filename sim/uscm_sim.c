/*
 * uscm-sim - start, inspect, perturb and stop a simulated fabric.
 *
 *   uscm-sim start [--dir D] [--nodes N] [--link ib|roce] [--seed S]
 *                  [--pcap FILE] [--fault SPEC]... [--no-uscmd]
 *                  [--umad-access root|all] [--netns] [--dev-infiniband] [-v]
 *                                                               (alias: up)
 *   uscm-sim stop [--dir D]                                     (alias: down)
 *   uscm-sim status [--dir D]
 *   uscm-sim env [--dir D] [--node NAME]
 *   uscm-sim fault [--dir D] [SPEC... | add SPEC | clear]      (alias: faults)
 *   uscm-sim link [--dir D] NODE[:PORT] up|down
 *   uscm-sim lid [--dir D] NODE LID
 *   uscm-sim kill [--dir D] NODE
 *   uscm-sim run [--dir D] [--node NAME] [start options] -- CMD [ARGS...]
 *   uscm-sim uscmd [--dir D] NODE start|stop|restart|kill
 *
 * The host service: `start` runs uscmd (build/bin/uscmd next to this
 * binary in a build tree, ${sbindir}/uscmd when installed: sim_paths.h)
 * once per node, as a node program of that node; sim/ only execs it.
 * See docs/sim.md and docs/install.md.
 */
#define _GNU_SOURCE
#include "simf.h"
#include "sim_paths.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdarg.h>
#include <sched.h>
#include <sys/mount.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct opts {
	const char *dir;
	const char *node;
	unsigned nodes;
	enum simf_link link;
	uint64_t seed;
	const char *pcap;
	const char *faults[SIMF_MAX_FAULTS];
	int nfaults;
	int verbose;
	int no_uscmd;           /* --no-uscmd */
	int netns;              /* --netns */
	int devib;              /* --dev-infiniband */
	enum simf_umad_access umad_access;
	enum simf_sm_kind sm;   /* --sm builtin|opensm */
	const char *topo;       /* --topo FILE|fat-tree:L,S,H|chain:S,H */
	const char *partitions; /* --partitions FILE: opensm's partition config (-P) */
	int lmc;                /* --lmc N: every CA port's LMC (IB), 0..7 */
	int start_opts;         /* any start-only option given */
};

static void usage_to(FILE *out, int rc)
{
	fprintf(out,
		"usage: uscm-sim COMMAND [options]\n"
		"  start [--dir D] [--nodes N] [--link ib|roce] [--seed S] [--pcap FILE]\n"
		"        [--fault SPEC]... [--no-uscmd] [--umad-access root|all] [--netns]\n"
		"        [--dev-infiniband] [--sm builtin|opensm] [--topo SPEC] [--lmc N]\n"
		"        [--partitions FILE] [-v]\n"
		"                                   start a fabric (default 2 nodes, IB) and one uscmd\n"
		"                                   (host service) per node            (alias: up)\n"
		"        --no-uscmd                 no uscmd (in-process programs own the CM agents)\n"
		"        --netns                    the fabric in a network namespace of its own with an\n"
		"                                   interface uscm<i> holding 127.10.0.i per node (root, ip)\n"
		"        --dev-infiniband           run gives programs a private /dev with\n"
		"                                   /dev/infiniband/uverbs0 and a\n"
		"                                   /sys/class/infiniband tree (root; UCX reads them)\n"
		"        --sm builtin|opensm        the subnet manager (IB): uscm-sim-sm (default), or\n"
		"                                   Debian's opensm on node1's port (2 nodes, linked\n"
		"                                   back to back, or --topo; its files in D/opensm/)\n"
		"        --topo FILE|fat-tree:L,S,H|chain:S,H\n"
		"                                   switches and cables (IB): an ibsim/ibnetdiscover\n"
		"                                   topology file, or L leaves with H hosts each under\n"
		"                                   S spines, or S switches in a line with H hosts each;\n"
		"                                   its CAs are node1..N (D/topology has the result)\n"
		"        --partitions FILE          (--sm opensm) OpenSM's partition configuration\n"
		"                                   (partitions.conf), opensm's partition config file\n"
		"        --lmc N                    LMC of every CA port (IB, 0..7; default 0): 2^N LIDs\n"
		"                                   per port, every one routed (the SM's, or opensm's lmc)\n"
		"        --umad-access root|all     who may open /dev/infiniband/umadN (default root,\n"
		"                                   as on a real host; verbs are open to every user)\n"
		"  stop [--dir D]                   stop the uscmds, then the SM and every node\n"
		"                                   process, remove state              (alias: down)\n"
		"  status [--dir D]                 node table, LIDs, port states, counters, faults,\n"
		"                                   uscmds\n"
		"  env [--dir D] [--node NAME]      print the environment lines for a program\n"
		"                                   (with USCM_SOCKET when the node has a uscmd socket)\n"
		"  fault [--dir D] SPEC...|add SPEC...|clear|list   replace / extend / clear / show\n"
		"                                   the fault rules                        (alias: faults)\n"
		"  link [--dir D] NODE[:PORT] up|down\n"
		"                                   take a node's link down or up; NODE:PORT (--topo):\n"
		"                                   the cable at that port of a switch or CA (sw1:3)\n"
		"  lid [--dir D] NODE LID           the SM gives NODE's port a new LID (IB)\n"
		"  kill [--dir D] NODE              SIGKILL every process attached as NODE\n"
		"  run [--dir D] [--node NAME] [start options] -- CMD [ARGS...]\n"
		"      run CMD on a running fabric, or start one, run CMD, stop it; CMD gets\n"
		"      LD_LIBRARY_PATH = the drop-in libibumad/libibverbs (and uscm's librdmacm\n"
		"      when built), USCM_SIM_DIR, USCM_SIM_NODE and USCM_SOCKET when the node has\n"
		"      a uscmd socket (--no-uscmd: never)\n"
		"  uscmd [--dir D] NODE start|stop|restart|kill\n"
		"                                   manage one node's uscmd (kill: SIGKILL, the socket\n"
		"                                   file stays, as after a crash)\n"
		"NODE: node1..nodeN (or 1..N, 127.10.0.i), sm\n"
		"SPEC: one rule = comma-separated key=value; rules separated by ';'; the first\n"
		"      rule that matches a datagram applies.\n"
		"  effects:  drop=5%% | 0.5%% | 5000ppm   dup=1%%   delay=2ms|250us|1s\n"
		"            reorder=10%%:5ms (hold that fraction back by 5 ms)\n"
		"  matches:  qpt=mad|rc|uc|ud|any      transport (mad = UD to QP0/QP1)\n"
		"            op=data|ack|any           data: SEND, WRITE, READ request, atomic, UD;\n"
		"                                      ack: ACK/NAK, READ response, atomic ACK\n"
		"            class=0x07 attr=0x0010    MAD management class / attribute ID\n"
		"            node=2|node2|sm           the sending node\n"
		"            link=sw1:3|node2:1        datagrams crossing that cable (MADs and data)\n"
		"            dir=both|out|in           which way across it, seen from the port named\n"
		"  e.g. 'drop=5%%,qpt=rc,op=data' loses RC data packets but never their ACKs.\n"
		"D defaults to $USCM_SIM_DIR, else %s. See docs/sim.md.\n",
		simf_default_dir());
	exit(rc);
}

static void usage(void)
{
	usage_to(stderr, 2);
}

static const char *fabric_dir(const struct opts *o)
{
	const char *e;

	if (o->dir)
		return o->dir;
	e = getenv("USCM_SIM_DIR");
	return e && *e ? e : simf_default_dir();
}

/* Parses the options shared by every command; stops at "--" or at the
 * first non-option (returned index). */
static int parse_opts(int argc, char **argv, int i, struct opts *o)
{
	for (; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--") == 0)
			return i;
		if (strcmp(a, "--dir") == 0 && i + 1 < argc) {
			o->dir = argv[++i];
		} else if (strcmp(a, "--node") == 0 && i + 1 < argc) {
			o->node = argv[++i];
		} else if (strcmp(a, "--nodes") == 0 && i + 1 < argc) {
			char *end;
			unsigned long n = strtoul(argv[++i], &end, 10);

			if (*end || n < 1 || n >= SIMF_MAX_NODES) {
				fprintf(stderr, "uscm-sim: --nodes must be 1..%d\n", SIMF_MAX_NODES - 1);
				exit(2);
			}
			o->nodes = (unsigned)n;
			o->start_opts = 1;
		} else if (strcmp(a, "--link") == 0 && i + 1 < argc) {
			const char *v = argv[++i];

			if (strcmp(v, "ib") == 0)
				o->link = SIMF_LINK_IB;
			else if (strcmp(v, "roce") == 0)
				o->link = SIMF_LINK_ROCE;
			else {
				fprintf(stderr, "uscm-sim: --link ib|roce\n");
				exit(2);
			}
			o->start_opts = 1;
		} else if (strcmp(a, "--seed") == 0 && i + 1 < argc) {
			o->seed = strtoull(argv[++i], NULL, 0);
			o->start_opts = 1;
		} else if (strcmp(a, "--pcap") == 0 && i + 1 < argc) {
			o->pcap = argv[++i];
			o->start_opts = 1;
		} else if ((strcmp(a, "--fault") == 0 || strcmp(a, "--faults") == 0) && i + 1 < argc) {
			if (o->nfaults >= SIMF_MAX_FAULTS) {
				fprintf(stderr, "uscm-sim: too many --fault rules\n");
				exit(2);
			}
			o->faults[o->nfaults++] = argv[++i];
			o->start_opts = 1;
		} else if (strcmp(a, "--dev-infiniband") == 0) {
			o->devib = 1;
			o->start_opts = 1;
		} else if (strcmp(a, "--netns") == 0) {
			o->netns = 1;
			o->start_opts = 1;
		} else if (strcmp(a, "--no-uscmd") == 0) {
			o->no_uscmd = 1; /* run on a running fabric: no USCM_SOCKET */
		} else if (strcmp(a, "--topo") == 0 && i + 1 < argc) {
			o->topo = argv[++i];
			o->start_opts = 1;
		} else if (strcmp(a, "--partitions") == 0 && i + 1 < argc) {
			o->partitions = argv[++i];
			o->start_opts = 1;
		} else if (strcmp(a, "--lmc") == 0 && i + 1 < argc) {
			char *end;
			long v = strtol(argv[++i], &end, 10);

			if (*end || v < 0 || v > 7) {
				fprintf(stderr, "uscm-sim: --lmc 0..7\n");
				exit(2);
			}
			o->lmc = (int)v;
			o->start_opts = 1;
		} else if (strcmp(a, "--sm") == 0 && i + 1 < argc) {
			const char *v = argv[++i];

			if (strcmp(v, "builtin") == 0)
				o->sm = SIMF_SM_BUILTIN;
			else if (strcmp(v, "opensm") == 0)
				o->sm = SIMF_SM_OPENSM;
			else {
				fprintf(stderr, "uscm-sim: --sm builtin|opensm\n");
				exit(2);
			}
			o->start_opts = 1;
		} else if (strcmp(a, "--umad-access") == 0 && i + 1 < argc) {
			const char *v = argv[++i];

			if (strcmp(v, "root") == 0)
				o->umad_access = SIMF_UMAD_ROOT;
			else if (strcmp(v, "all") == 0)
				o->umad_access = SIMF_UMAD_ALL;
			else {
				fprintf(stderr, "uscm-sim: --umad-access root|all\n");
				exit(2);
			}
			o->start_opts = 1;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage_to(stdout, 0);
		} else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
			o->verbose = 1;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "uscm-sim: unknown option %s\n", a);
			usage();
		} else {
			return i;
		}
	}
	return i;
}

/* Parses "r1;r2;..." into rules[]; returns the count or -1. */
static int parse_rules(const char *const *specs, int nspecs, struct simf_fault *rules)
{
	int n = 0;

	for (int s = 0; s < nspecs; s++) {
		char buf[1024], *save = NULL, *tok;

		snprintf(buf, sizeof(buf), "%s", specs[s]);
		for (tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
			char err[200];

			if (n >= SIMF_MAX_FAULTS) {
				fprintf(stderr, "uscm-sim: at most %d fault rules\n", SIMF_MAX_FAULTS);
				return -1;
			}
			if (simf_fault_parse(tok, &rules[n], err, sizeof(err)) < 0) {
				fprintf(stderr, "uscm-sim: fault '%s': %s\n", tok, err);
				return -1;
			}
			n++;
		}
	}
	return n;
}

static int pid_alive(pid_t pid)
{
	return simf_pid_alive(pid);
}

/* The parent of pid from /proc (0 if unknown). */
static pid_t parent_of(pid_t pid)
{
	char path[64], buf[512], *rp;
	FILE *fp;
	int pp = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fp = fopen(path, "r");
	if (!fp)
		return 0;
	if (fgets(buf, sizeof(buf), fp) && (rp = strrchr(buf, ')')) != NULL)
		if (sscanf(rp + 1, " %*c %d", &pp) != 1)
			pp = 0;
	fclose(fp);
	return (pid_t)pp;
}

/* Never signal ourselves or a process we run under (a test harness that
 * attached as a node and called `uscm-sim stop` through a shell). */
static int is_self_or_ancestor(pid_t pid)
{
	pid_t p = getpid();

	for (int depth = 0; p > 1 && depth < 64; depth++) {
		if (p == pid)
			return 1;
		p = parent_of(p);
	}
	return 0;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int is_dir(const char *p)
{
	struct stat sb;

	return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* LD_LIBRARY_PATH for programs on the fabric: the drop-ins
 * ($USCM_SIM_LIBDIR, else where sim_paths.h says), and uscm's librdmacm
 * when it has been built (installed). */
static void lib_path(char *out, size_t len)
{
	const char *e = getenv("USCM_SIM_LIBDIR");
	char simlib[PATH_MAX], libdir[PATH_MAX], rdmacm[PATH_MAX + 32], real[PATH_MAX];

	out[0] = 0;
	if (e && *e)
		snprintf(simlib, sizeof(simlib), "%s", e);
	else if (sim_path(SIM_PATH_SIMLIB, simlib, sizeof(simlib)) < 0)
		simlib[0] = 0;
	if (simlib[0] && !is_dir(simlib))
		fprintf(stderr, "uscm-sim: no drop-in libraries in %s (USCM_SIM_LIBDIR names another)\n", simlib);
	snprintf(out, len, "%s", realpath(simlib, real) ? real : simlib);
	if (sim_path(SIM_PATH_LIBDIR, libdir, sizeof(libdir)) == 0) {
		snprintf(rdmacm, sizeof(rdmacm), "%s/librdmacm.so.1", libdir);
		if (access(rdmacm, R_OK) == 0 && realpath(libdir, real)) {
			size_t o = strlen(out);

			snprintf(out + o, len - o, "%s%s", o ? ":" : "", real);
		}
	}
}

static struct simf *attach_quiet(const char *dir)
{
	struct simf *f = simf_attach_node(dir, -1);

	return f;
}

static int fabric_running(struct simf *f)
{
	return pid_alive(f->st->keeper_pid);
}

/* ---- stop ---------------------------------------------------------------- */

static void collect_pids(struct simf *f, pid_t *pids, int *n, int max)
{
	struct simf_state *st = f->st;

#define ADDPID(p)                                                          \
	do {                                                               \
		pid_t p_ = (p);                                            \
		int dup_ = 0;                                              \
		if (p_ <= 0 || is_self_or_ancestor(p_))                    \
			break;                                             \
		for (int k_ = 0; k_ < *n; k_++)                            \
			if (pids[k_] == p_)                                \
				dup_ = 1;                                  \
		if (!dup_ && *n < max)                                     \
			pids[(*n)++] = p_;                                 \
	} while (0)
	ADDPID(st->keeper_pid);
	for (unsigned i = 0; i <= st->nnodes && i < SIMF_MAX_NODES; i++) {
		const struct simf_node *nd = &st->nodes[i];

		ADDPID(nd->pid);
		for (int k = 0; k < SIMF_NODE_PIDS; k++)
			ADDPID(nd->pids[k]);
		for (int k = 0; k < SIMF_MAX_AGENTS; k++)
			ADDPID(nd->agents[k].pid);
	}
#undef ADDPID
}

static void terminate(pid_t *pids, int n)
{
	uint64_t deadline;
	int left;

	for (int i = 0; i < n; i++)
		if (pid_alive(pids[i]))
			kill(pids[i], SIGTERM);
	deadline = now_ms() + 1500;
	do {
		left = 0;
		for (int i = 0; i < n; i++) {
			waitpid(pids[i], NULL, WNOHANG); /* our own children (run) */
			if (pid_alive(pids[i]))
				left++;
		}
		if (left)
			sleep_ms(10);
	} while (left && now_ms() < deadline);
	for (int i = 0; i < n; i++)
		if (pid_alive(pids[i])) {
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
		}
}

static void remove_state(const char *dir)
{
	static const char *const files[] = { "fabric.state", "hosts", "sm.log", "netns", "topology" };
	static const char *const node_files[] = { "uscmd.sock", "uscmd.log" };
	char p[PATH_MAX + 64];

	/* the nodes' directories (uscmd socket and log) */
	for (unsigned n = 1; n < SIMF_MAX_NODES; n++) {
		for (size_t i = 0; i < sizeof(node_files) / sizeof(node_files[0]); i++) {
			snprintf(p, sizeof(p), "%s/node%u/%s", dir, n, node_files[i]);
			unlink(p);
		}
		snprintf(p, sizeof(p), "%s/node%u", dir, n);
		rmdir(p); /* only when empty */
	}
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		unlink(p);
	}
	snprintf(p, sizeof(p), "%s/dev.host", dir);
	rmdir(p);
	rmdir(dir); /* only when empty: a capture stays */
}

static int cmd_stop(const struct opts *o)
{
	const char *dir = fabric_dir(o);
	struct simf *f = attach_quiet(dir);
	pid_t pids[SIMF_MAX_NODES * (SIMF_NODE_PIDS + SIMF_MAX_AGENTS + 1) + 1];
	int n = 0;

	if (!f) {
		if (errno == ENOENT) {
			fprintf(stderr, "uscm-sim: no fabric in %s\n", dir);
			remove_state(dir);
			return 0;
		}
		fprintf(stderr, "uscm-sim: %s: %s\n", dir, strerror(errno));
		remove_state(dir);
		return 1;
	}
	/* the host services first (SIGTERM, SIGKILL after 2 s): they may still
	 * talk to the SM and to their nodes' programs while they shut down */
	simf_uscmd_stop(f, -1, SIGTERM, 2000);
	collect_pids(f, pids, &n, (int)(sizeof(pids) / sizeof(pids[0])));
	simf_detach(f);
	terminate(pids, n);
	remove_state(dir);
	return 0;
}

/* ---- the host service (uscmd) ------------------------------------------- */

static void set_env(const char *dir, const char *node, const char *sock);

/* uscmd (build/bin/uscmd next to this binary, or the installed
 * ${sbindir}/uscmd: sim_paths.h) into buf: 0 when it is there. */
static int uscmd_bin(char *buf, size_t len)
{
	if (sim_file(SIM_PATH_SBIN, "uscmd", buf, len) < 0)
		return -1;
	return access(buf, X_OK);
}

/* Does a SOCK_SEQPACKET socket at path accept a connection? */
static int sock_accepts(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd, ok;

	if (strlen(path) >= sizeof(a.sun_path))
		return 0;
	memcpy(a.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return 0;
	ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

static int is_socket(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 && S_ISSOCK(sb.st_mode);
}

/* Node n's uscmd socket when that file exists (for USCM_SOCKET), else "". */
static void node_socket(struct simf *f, int n, char *buf, size_t len)
{
	if (n < 1 || simf_uscmd_path(f, n, "uscmd.sock", buf, len) < 0 || !is_socket(buf))
		buf[0] = 0;
}

/* The last `lines` lines of a log file on stderr, each prefixed. */
static void print_tail(const char *path, const char *label, int lines)
{
	char line[512];
	long total = 0, skip;
	FILE *fp = fopen(path, "r");

	if (!fp) {
		fprintf(stderr, "  %s: %s\n", label, strerror(errno));
		return;
	}
	while (fgets(line, sizeof(line), fp))
		total += strchr(line, '\n') != NULL;
	rewind(fp);
	skip = lines > 0 && total > lines ? total - lines : 0;
	for (long k = 0; fgets(line, sizeof(line), fp);) {
		int eol = strchr(line, '\n') != NULL;

		if (k >= skip)
			fprintf(stderr, "  %s: %s%s", label, line, eol ? "" : "\n");
		k += eol;
	}
	fclose(fp);
}

/* Starts node n's uscmd (the caller checked that none runs): the node's
 * directory, the socket path free, stderr (and stdout) to uscmd.log, the
 * environment of a program of that node plus USCM_MODE=inproc. Records the
 * pid in the fabric state. The pid, or -1. */
static pid_t spawn_uscmd(struct simf *f, int n, const char *bin, int verbose)
{
	char nd[PATH_MAX], sock[PATH_MAX], logp[PATH_MAX];
	pid_t pid;

	if (simf_uscmd_path(f, n, NULL, nd, sizeof(nd)) < 0 ||
	    simf_uscmd_path(f, n, "uscmd.sock", sock, sizeof(sock)) < 0 ||
	    simf_uscmd_path(f, n, "uscmd.log", logp, sizeof(logp)) < 0) {
		fprintf(stderr, "uscm-sim: %s: path too long\n", f->dir);
		return -1;
	}
	{
		struct sockaddr_un a;

		if (strlen(sock) >= sizeof(a.sun_path)) {
			fprintf(stderr, "uscm-sim: %s: too long for a UNIX socket\n", sock);
			return -1;
		}
	}
	/* every user's programs reach the socket: the directory is 0755 (the
	 * daemon decides the socket's own mode) */
	if ((mkdir(nd, 0755) < 0 && errno != EEXIST) || chmod(nd, 0755) < 0) {
		fprintf(stderr, "uscm-sim: mkdir %s: %s\n", nd, strerror(errno));
		return -1;
	}
	unlink(sock); /* stale: no daemon of this node runs */
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "uscm-sim: fork: %s\n", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		int log = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0644);
		sigset_t none;

		setsid();
		if (nul >= 0)
			dup2(nul, 0);
		if (log >= 0) {
			dup2(log, 1);
			dup2(log, 2);
		}
		close_range(3, ~0u, 0);
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		set_env(f->dir, f->st->nodes[n].name, NULL);
		setenv("USCM_MODE", "inproc", 1);
		if (verbose)
			execl(bin, bin, "--socket", sock, "-v", (char *)NULL);
		else
			execl(bin, bin, "--socket", sock, (char *)NULL);
		fprintf(stderr, "uscm-sim: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	simf_lock(f);
	f->st->uscmd_pid[n] = pid;
	simf_unlock(f);
	return pid;
}

/* Waits (10 s at most) until the uscmds of nodes[0..count) accept a
 * connection on their sockets. 0, or -1 after printing why and the log of
 * the first that failed. */
static int uscmd_wait_ready(struct simf *f, const int *nodes, const pid_t *pids, int count)
{
	uint64_t deadline = now_ms() + 10000;
	int ready[SIMF_MAX_NODES] = { 0 }, left = count;

	while (left) {
		for (int k = 0; k < count; k++) {
			char sock[PATH_MAX], logp[PATH_MAX];
			int st, exited = 0;
			pid_t r;

			if (ready[k])
				continue;
			simf_uscmd_path(f, nodes[k], "uscmd.sock", sock, sizeof(sock));
			if (sock_accepts(sock)) {
				ready[k] = 1;
				left--;
				continue;
			}
			r = waitpid(pids[k], &st, WNOHANG);
			if (r == pids[k] || (r < 0 && !pid_alive(pids[k]))) {
				exited = 1;
				if (r == pids[k] && WIFEXITED(st))
					fprintf(stderr, "uscm-sim: %s's uscmd (pid %d) exited with status %d\n",
						f->st->nodes[nodes[k]].name, (int)pids[k], WEXITSTATUS(st));
				else if (r == pids[k] && WIFSIGNALED(st))
					fprintf(stderr, "uscm-sim: %s's uscmd (pid %d) was killed by signal %d\n",
						f->st->nodes[nodes[k]].name, (int)pids[k], WTERMSIG(st));
				else
					fprintf(stderr, "uscm-sim: %s's uscmd (pid %d) exited\n",
						f->st->nodes[nodes[k]].name, (int)pids[k]);
			} else if (now_ms() > deadline) {
				fprintf(stderr, "uscm-sim: %s's uscmd (pid %d) did not accept a connection on %s within 10 s\n",
					f->st->nodes[nodes[k]].name, (int)pids[k], sock);
				exited = 1;
			}
			if (exited) {
				simf_uscmd_path(f, nodes[k], "uscmd.log", logp, sizeof(logp));
				fprintf(stderr, "uscm-sim: the end of %s:\n", logp);
				print_tail(logp, "uscmd.log", 20);
				return -1;
			}
		}
		if (left)
			sleep_ms(10);
	}
	return 0;
}

/* SIGKILLs uscmds this process started (its children: their pids cannot
 * have been reused, even before they exec'd) and forgets them. */
static void kill_children(struct simf *f, const int *nodes, const pid_t *pids, int count)
{
	for (int k = 0; k < count; k++) {
		kill(pids[k], SIGKILL);
		waitpid(pids[k], NULL, 0);
	}
	simf_lock(f);
	for (int k = 0; k < count; k++)
		if (f->st->uscmd_pid[nodes[k]] == pids[k])
			f->st->uscmd_pid[nodes[k]] = 0;
	simf_unlock(f);
}

/* Starts the uscmd of every node of a fabric whose SM is up. 0 (also when
 * the binary is not built: one line says so), or -1 with every uscmd it
 * started stopped again. */
static int uscmd_start_all(struct simf *f, int verbose)
{
	char bin[PATH_MAX + 16];
	int nodes[SIMF_MAX_NODES], count = 0;
	pid_t pids[SIMF_MAX_NODES];

	if (uscmd_bin(bin, sizeof(bin)) < 0) {
		fprintf(stderr, "uscm-sim: %s is not built: starting without the host service (uscmd)\n", bin);
		return 0;
	}
	for (unsigned n = 1; n <= f->st->nnodes && n < SIMF_MAX_NODES; n++) {
		pid_t pid = spawn_uscmd(f, (int)n, bin, verbose);

		if (pid < 0) {
			kill_children(f, nodes, pids, count);
			return -1;
		}
		nodes[count] = (int)n;
		pids[count++] = pid;
	}
	if (uscmd_wait_ready(f, nodes, pids, count) < 0) {
		kill_children(f, nodes, pids, count);
		return -1;
	}
	return 0;
}

/* ---- start --------------------------------------------------------------- */

static uint32_t fnv1a(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

/* ---- --dev-infiniband: a private /dev for the programs of `run` -----------------
 *
 * UCX (1.13) uses an RDMA device only when /dev/infiniband/<dev_name> is a
 * character device it may read and write (uct_ib_device_is_accessible);
 * a host without RDMA hardware has no /dev/infiniband. With
 * --dev-infiniband (D/dev.host marks it and is a mount point), `run` moves
 * its program into a mount namespace of its own (propagation private, so
 * nothing leaks to the host) where the host's /dev is bind-mounted on
 * D/dev.host and a tmpfs over /dev holds a symlink to every entry of it
 * plus infiniband/uverbs0 -> the host's /dev/null: a character device open
 * to all that the drop-in never opens (its device is the fabric). Needs
 * root (CAP_SYS_ADMIN). */
/* ---- --dev-infiniband: the device's sysfs directory -------------------------------
 *
 * UCX (1.13) reads the RoCE GID type and netdev from sysfs itself, not
 * through libibverbs: /sys/class/infiniband/<dev>/ports/1/gid_attrs/
 * types/<i> ("IB/RoCE v1" or "RoCE v2"; without it every GID counts as
 * RoCE v1) and ndevs/<i> (the netdev; RoCE LAG level), and
 * device/{local_cpus,numa_node}. In run's mount namespace a tmpfs holds
 * /sys/class/infiniband/uscm_<node>/, written from the fabric state and the
 * namespace's interfaces as the kernel's drivers/infiniband/core/sysfs.c
 * shows a device: node_type, node_guid, sys_image_guid, fw_ver, and
 * ports/1/{state, phys_state, link_layer, lid, sm_lid, lid_mask_count,
 * rate, cap_mask, gids/<i> (all 16, unused ones zero, "%pI6" form),
 * pkeys/<i>, gid_attrs/types/<i> and gid_attrs/ndevs/<i>}. The GID table is
 * the drop-in's (ibv_query_gid_ex): GID 0 = the node's GID, bound on RoCE to
 * the interface holding 127.10.0.i (uscm<i> with --netns), GIDs 1..4 (RoCE)
 * that interface's IPv6 addresses, link-local ones aside; every RoCE GID
 * is RoCE v2, IB GIDs "IB/RoCE v1". Where the kernel fails the read
 * (types/ndevs of an unused entry: EINVAL; ndevs of an IB GID or of a GID
 * with no netdev) the file is absent. A snapshot taken when the program
 * starts: later port state changes do not show. No device/ link: the
 * simulated HCA has no PCI function. */
static int put_file(const char *dir, const char *name, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int put_file(const char *dir, const char *name, const char *fmt, ...)
{
	char path[PATH_MAX + 64];
	va_list ap;
	FILE *fp;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fp = fopen(path, "w");
	if (!fp)
		return -1;
	va_start(ap, fmt);
	vfprintf(fp, fmt, ap);
	va_end(ap);
	rc = fclose(fp);
	chmod(path, 0444);
	return rc ? -1 : 0;
}

static void gid_str(char out[40], const uint8_t g[16])
{
	for (int i = 0; i < 8; i++)
		sprintf(out + 5 * i, "%02x%02x%s", g[2 * i], g[2 * i + 1], i < 7 ? ":" : "");
}

/* The interface holding the node's IPv4 address in this network namespace
 * and its IPv6 addresses (link-local aside): the drop-in's RoCE GID rules
 * (sim/verbs/sv_device.c). Returns the number of IPv6 GIDs. */
static int node_netdev(uint32_t ip, char ifname[IF_NAMESIZE + 1], uint8_t g6[SIMF_IP_GIDS][16])
{
	struct ifaddrs *ifs, *i;
	uint32_t nip = htonl(ip);
	int n = 0;

	ifname[0] = '\0';
	if (getifaddrs(&ifs) < 0)
		return 0;
	for (i = ifs; i && !ifname[0]; i = i->ifa_next) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)i->ifa_addr;

		if (a && a->sin_family == AF_INET && a->sin_addr.s_addr == nip)
			snprintf(ifname, IF_NAMESIZE + 1, "%s", i->ifa_name);
	}
	for (i = ifs; i && ifname[0] && n < SIMF_IP_GIDS; i = i->ifa_next) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)i->ifa_addr;

		if (!a || a->sin6_family != AF_INET6 || strcmp(i->ifa_name, ifname) ||
		    IN6_IS_ADDR_LINKLOCAL(&a->sin6_addr))
			continue;
		memcpy(g6[n++], &a->sin6_addr, 16);
	}
	freeifaddrs(ifs);
	return n;
}

#define SYSFS_GID_TBL_LEN 16   /* the drop-in's gid_tbl_len (SV_GID_TBL_LEN) */

static int sysfs_write_dev(const struct simf *f, int node, const char *base)
{
	static const char *const state[] = { "0: NOP", "1: DOWN", "2: INIT", "3: ARMED", "4: ACTIVE" };
	const struct simf_node *n = &f->st->nodes[node];
	int roce = f->st->link == SIMF_LINK_ROCE;
	char dev[PATH_MAX], port[PATH_MAX + 16], sub[PATH_MAX + 32], name[16], g[40];
	char ifname[IF_NAMESIZE + 1];
	uint8_t g6[SIMF_IP_GIDS][16], zero[16] = { 0 };
	uint64_t guid = n->guid;
	int nip6 = 0, st;

	memset(g6, 0, sizeof(g6));
	if (roce)
		nip6 = node_netdev(n->ip, ifname, g6);
	else
		ifname[0] = '\0';
	snprintf(dev, sizeof(dev), "%s/uscm_%.32s", base, n->name);
	snprintf(port, sizeof(port), "%s/ports/1", dev);
	if (mkdir(dev, 0755) < 0)
		return -1;
	snprintf(sub, sizeof(sub), "%s/ports", dev);
	if (mkdir(sub, 0755) < 0 || mkdir(port, 0755) < 0)
		return -1;
	if (put_file(dev, "node_type", "1: CA\n") ||
	    put_file(dev, "node_guid", "%04x:%04x:%04x:%04x\n", (unsigned)(guid >> 48) & 0xFFFF,
		     (unsigned)(guid >> 32) & 0xFFFF, (unsigned)(guid >> 16) & 0xFFFF,
		     (unsigned)guid & 0xFFFF) ||
	    put_file(dev, "sys_image_guid", "%04x:%04x:%04x:%04x\n", (unsigned)(guid >> 48) & 0xFFFF,
		     (unsigned)(guid >> 32) & 0xFFFF, (unsigned)(guid >> 16) & 0xFFFF,
		     (unsigned)guid & 0xFFFF) ||
	    put_file(dev, "fw_ver", "0.1.0\n"))
		return -1;
	st = !n->link_up || n->port_state == SIMF_PORT_DOWN ? 1
	     : n->port_state <= SIMF_PORT_ACTIVE ? n->port_state : 2;
	if (put_file(port, "state", "%s\n", state[st]) ||
	    put_file(port, "phys_state", "%s\n", n->link_up ? "5: LinkUp" : "3: Disabled") ||
	    put_file(port, "link_layer", "%s\n", roce ? "Ethernet" : "InfiniBand") ||
	    put_file(port, "lid", "0x%x\n", roce ? 0 : n->lid) ||
	    put_file(port, "sm_lid", "0x%x\n", roce ? 0 : n->sm_lid) ||
	    put_file(port, "lid_mask_count", "%u\n", roce ? 0 : n->lmc) ||
	    put_file(port, "rate", "100 Gb/sec (4X EDR)\n") ||
	    /* IBV_PORT_CM_SUP | IP_BASED_GIDS (RoCE), CM_SUP | SYS_IMAGE_GUID_SUP (IB) */
	    put_file(port, "cap_mask", "0x%08x\n", roce ? 0x04010000u : 0x00010800u))
		return -1;
	snprintf(sub, sizeof(sub), "%s/gids", port);
	if (mkdir(sub, 0755) < 0)
		return -1;
	for (int i = 0; i < SYSFS_GID_TBL_LEN; i++) {
		const uint8_t *gid = i == 0 ? n->gid : i <= nip6 ? g6[i - 1] : zero;

		snprintf(name, sizeof(name), "%d", i);
		gid_str(g, gid);
		if (put_file(sub, name, "%s\n", g))
			return -1;
	}
	snprintf(sub, sizeof(sub), "%s/pkeys", port);
	if (mkdir(sub, 0755) < 0)
		return -1;
	for (int i = 0; i < SIMF_PKEYS; i++) {
		snprintf(name, sizeof(name), "%d", i);
		if (put_file(sub, name, "0x%04x\n", n->pkeys[i]))
			return -1;
	}
	snprintf(sub, sizeof(sub), "%s/gid_attrs", port);
	if (mkdir(sub, 0755) < 0)
		return -1;
	snprintf(sub, sizeof(sub), "%s/gid_attrs/types", port);
	if (mkdir(sub, 0755) < 0)
		return -1;
	for (int i = 0; i <= nip6; i++) {
		snprintf(name, sizeof(name), "%d", i);
		if (put_file(sub, name, "%s\n", roce ? "RoCE v2" : "IB/RoCE v1"))
			return -1;
	}
	snprintf(sub, sizeof(sub), "%s/gid_attrs/ndevs", port);
	if (mkdir(sub, 0755) < 0)
		return -1;
	for (int i = 0; ifname[0] && i <= nip6; i++) {
		snprintf(name, sizeof(name), "%d", i);
		if (put_file(sub, name, "%s\n", ifname))
			return -1;
	}
	return 0;
}

/* A tmpfs on /sys/class/infiniband holding the device of node `node`
 * (called in run's private mount namespace). When the host has no
 * /sys/class/infiniband (no RDMA stack loaded), a tmpfs on /sys/class
 * gets a bind mount of each of the host's /sys/class/<x> plus the new
 * infiniband/ (a sysfs directory cannot be created). */
static int sysfs_enter(const char *dir, const char *node)
{
	struct simf *f = attach_quiet(dir);
	const char *ib = "/sys/class/infiniband";
	char src[PATH_MAX], dst[PATH_MAX];
	struct stat sb;
	int nd, rc = -1;

	if (!f)
		return 0;
	nd = simf_node_by_name(f, node);
	if (nd < 1) {
		simf_detach(f);
		return 0;
	}
	if (stat(ib, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		if (mount("tmpfs", ib, "tmpfs", MS_NOSUID | MS_NOEXEC | MS_NODEV, "mode=0755") < 0)
			goto fail;
	} else {
		int cfd = open("/sys/class", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *d;
		struct dirent *e;

		if (cfd < 0)
			goto fail;
		if (mount("tmpfs", "/sys/class", "tmpfs", MS_NOSUID | MS_NOEXEC | MS_NODEV,
			  "mode=0755") < 0) {
			close(cfd);
			goto fail;
		}
		/* the old directory stays reachable through the descriptor */
		d = fdopendir(cfd);
		if (!d) {
			close(cfd);
			goto fail;
		}
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(src, sizeof(src), "/proc/self/fd/%d/%s", cfd, e->d_name);
			snprintf(dst, sizeof(dst), "/sys/class/%s", e->d_name);
			if (mkdir(dst, 0755) < 0 || mount(src, dst, NULL, MS_BIND | MS_REC, NULL) < 0)
				fprintf(stderr, "uscm-sim: /sys/class/%s: %s\n", e->d_name,
					strerror(errno));
		}
		closedir(d);
		if (mkdir(ib, 0755) < 0)
			goto fail;
	}
	rc = sysfs_write_dev(f, nd, ib);
	if (rc < 0)
		goto fail;
	simf_detach(f);
	return 0;
fail:
	fprintf(stderr, "uscm-sim: --dev-infiniband: cannot make /sys/class/infiniband: %s\n",
		strerror(errno));
	simf_detach(f);
	return -1;
}

static int devib_enter(const char *dir, const char *node)
{
	char host[PATH_MAX + 16], src[2 * PATH_MAX], dst[PATH_MAX];
	struct dirent *e;
	DIR *d;

	snprintf(host, sizeof(host), "%s/dev.host", dir);
	if (access(host, F_OK) < 0)
		return 0;
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("/dev", host, NULL, MS_BIND | MS_REC, NULL) < 0 ||
	    mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755") < 0) {
		fprintf(stderr, "uscm-sim: --dev-infiniband: cannot make a private /dev: %s\n",
			strerror(errno));
		return -1;
	}
	d = opendir(host);
	if (!d) {
		fprintf(stderr, "uscm-sim: %s: %s\n", host, strerror(errno));
		return -1;
	}
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(src, sizeof(src), "%s/%s", host, e->d_name);
		snprintf(dst, sizeof(dst), "/dev/%s", e->d_name);
		if (symlink(src, dst) < 0)
			fprintf(stderr, "uscm-sim: symlink %s: %s\n", dst, strerror(errno));
	}
	closedir(d);
	snprintf(src, sizeof(src), "%s/null", host);
	if (mkdir("/dev/infiniband", 0755) < 0 || symlink(src, "/dev/infiniband/uverbs0") < 0) {
		fprintf(stderr, "uscm-sim: /dev/infiniband/uverbs0: %s\n", strerror(errno));
		return -1;
	}
	node = node ? node : getenv("USCM_SIM_NODE");
	return node ? sysfs_enter(dir, node) : 0;
}

/* ---- --netns: the fabric in a network namespace of its own ------------------------
 *
 * Programs such as libfabric's verbs provider find an RDMA device through
 * the IP interface that carries its address (getifaddrs, loopback
 * interfaces skipped) — an IPoIB or RoCE netdev on a real host. With
 * --netns, `start` moves itself into a new network namespace (lo up) that
 * gets one interface per node, uscm<i> (a veth pair, uscm<i> and its peer
 * uscm<i>p, both up: a carrier, so IFF_RUNNING too), holding that node's
 * address 127.10.0.i/32; the SM and the uscmds inherit the namespace, so
 * the transport (127.77.<inst>.0/24 on that namespace's lo) is all
 * inside it. D/netns records it; `run` and `uscmd` join it (setns into the
 * SM's namespace) before they start a program. Needs root (CAP_SYS_ADMIN,
 * CAP_NET_ADMIN) and iproute2's `ip`. docs/sim.md, "Network namespace". */

/* Runs `ip ARGS...` quietly; 0 on success. */
static int run_ip(const char *a1, const char *a2, const char *a3, const char *a4,
		  const char *a5, const char *a6, const char *a7, const char *a8)
{
	const char *argv[] = { "ip", a1, a2, a3, a4, a5, a6, a7, a8, NULL };
	int st = 0;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		int nul = open("/dev/null", O_WRONLY);

		if (nul >= 0)
			dup2(nul, 1);
		execvp("ip", (char *const *)argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ok;

	if (fd < 0)
		return -1;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -1;
}

static int netns_create(unsigned nodes)
{
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "uscm-sim: --netns: unshare(CLONE_NEWNET): %s\n", strerror(errno));
		return -1;
	}
	/* no IPv6 link-local addresses on the node interfaces: one address
	 * per node, as the hosts file has */
	write_file("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1");
	if (run_ip("link", "set", "lo", "up", NULL, NULL, NULL, NULL) < 0) {
		fprintf(stderr, "uscm-sim: --netns: `ip link set lo up` failed (iproute2 installed?)\n");
		return -1;
	}
	for (unsigned i = 1; i <= nodes; i++) {
		char name[16], peer[16], addr[32];

		snprintf(name, sizeof(name), "uscm%u", i);
		snprintf(peer, sizeof(peer), "uscm%up", i);
		snprintf(addr, sizeof(addr), "127.10.0.%u/32", i);
		if (run_ip("link", "add", "name", name, "type", "veth", "peer", peer) < 0 ||
		    run_ip("addr", "add", addr, "dev", name, NULL, NULL, NULL) < 0 ||
		    run_ip("link", "set", peer, "up", NULL, NULL, NULL, NULL) < 0 ||
		    run_ip("link", "set", name, "up", NULL, NULL, NULL, NULL) < 0) {
			fprintf(stderr, "uscm-sim: --netns: cannot make interface %s (%s)\n", name, addr);
			return -1;
		}
	}
	return 0;
}

/* Joins the fabric's network namespace when it has one (D/netns): the
 * namespace of its SM. 0 when there is none or it was joined. */
static int netns_join(struct simf *f)
{
	char marker[PATH_MAX + 8], ns[64];
	int fd;

	snprintf(marker, sizeof(marker), "%s/netns", f->dir);
	if (access(marker, F_OK) < 0)
		return 0;
	snprintf(ns, sizeof(ns), "/proc/%d/ns/net", (int)f->st->keeper_pid);
	fd = open(ns, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
		fprintf(stderr, "uscm-sim: cannot join the fabric's network namespace (%s): %s\n", ns,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Claims a free transport subnet 127.77.<inst>.0/24 by binding node 0's
 * QP1 address; the SM process inherits and keeps the socket. */
static int claim_instance(const char *absdir, unsigned *inst)
{
	unsigned h = fnv1a(absdir) % 254;

	for (unsigned k = 0; k < 254; k++) {
		unsigned i = (h + k) % 254 + 1;
		struct sockaddr_in a = { .sin_family = AF_INET };
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -1;
		a.sin_addr.s_addr = htonl(127u << 24 | 77u << 16 | i << 8);
		a.sin_port = htons(simf_qp_port(1));
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			*inst = i;
			return fd;
		}
		close(fd);
	}
	errno = EADDRINUSE;
	return -1;
}

static pid_t spawn_sm(const char *dir, int claim_fd, int verbose, const char *partitions, int lmc)
{
	char sm[PATH_MAX], fdbuf[16], logp[PATH_MAX + 16], lp[2 * PATH_MAX + 8], lmcbuf[8];
	pid_t pid;

	/* build/bin/uscm-sim-sm, or ${libexecdir}/uscm/uscm-sim-sm */
	if (sim_file(SIM_PATH_LIBEXEC, "uscm-sim-sm", sm, sizeof(sm)) < 0)
		return -1;
	if (access(sm, X_OK) < 0) {
		fprintf(stderr, "uscm-sim: %s: %s\n", sm, strerror(errno));
		return -1;
	}
	snprintf(fdbuf, sizeof(fdbuf), "%d", claim_fd);
	snprintf(lmcbuf, sizeof(lmcbuf), "%d", lmc);
	snprintf(logp, sizeof(logp), "%s/sm.log", dir);
	lib_path(lp, sizeof(lp)); /* for an external SM it starts on a node */
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		int log = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0644);

		setsid();
		if (nul >= 0)
			dup2(nul, 0);
		if (log >= 0) {
			dup2(log, 1);
			dup2(log, 2);
		}
		fcntl(claim_fd, F_SETFD, 0);
		{
			const char *av[16];
			int ac = 0;

			av[ac++] = "uscm-sim-sm";
			av[ac++] = "--dir";
			av[ac++] = dir;
			av[ac++] = "--fd";
			av[ac++] = fdbuf;
			av[ac++] = "--lib-path";
			av[ac++] = lp;
			av[ac++] = "--lmc";
			av[ac++] = lmcbuf;
			if (partitions && *partitions) {
				av[ac++] = "--partitions";
				av[ac++] = partitions;
			}
			if (verbose)
				av[ac++] = "-v";
			av[ac] = NULL;
			execv(sm, (char *const *)av);
		}
		_exit(127);
	}
	return pid;
}

static void print_log_tail(const char *dir)
{
	char p[PATH_MAX + 16], line[512];
	FILE *fp;

	snprintf(p, sizeof(p), "%s/sm.log", dir);
	fp = fopen(p, "r");
	if (!fp)
		return;
	while (fgets(line, sizeof(line), fp))
		fprintf(stderr, "  sm.log: %s", line);
	fclose(fp);
}

/* Starts a fabric; returns 0 and the absolute directory in absdir. */
static int do_start(const struct opts *o, char *absdir, size_t abslen, int quiet)
{
	const char *dir = fabric_dir(o);
	struct simf_fault rules[SIMF_MAX_FAULTS];
	static struct simf_topo topo;
	char pcap[PATH_MAX], partitions[PATH_MAX] = "";
	struct simf *f;
	unsigned inst = 0;
	int nrules, claim;
	pid_t sm;
	uint64_t deadline;

	nrules = parse_rules(o->faults, o->nfaults, rules);
	if (nrules < 0)
		return 2;
	if (o->topo) {
		char err[256];
		const char *colon = strchr(o->topo, ':');
		int gen = colon && (strncmp(o->topo, "fat-tree:", 9) == 0 || strncmp(o->topo, "chain:", 6) == 0);

		if ((gen ? simf_topo_generate(o->topo, &topo, err, sizeof(err))
			 : simf_topo_parse(o->topo, &topo, err, sizeof(err))) < 0) {
			fprintf(stderr, "uscm-sim: --topo: %s\n", err);
			return 2;
		}
		if ((o->link && o->link != SIMF_LINK_IB) || (o->nodes && o->nodes != topo.ncas)) {
			fprintf(stderr, "uscm-sim: --topo: IB only, and its %u CAs are the nodes (--nodes)\n",
				topo.ncas);
			return 2;
		}
	} else if (o->sm == SIMF_SM_OPENSM && ((o->link && o->link != SIMF_LINK_IB) || (o->nodes && o->nodes != 2))) {
		/* without a topology two ports are cabled back to back */
		fprintf(stderr, "uscm-sim: --sm opensm needs --link ib and 2 nodes, or a --topo\n");
		return 2;
	}
	if (o->partitions) {
		/* OpenSM reads it (-P); the built-in SM has no partition config */
		if (o->sm != SIMF_SM_OPENSM) {
			fprintf(stderr, "uscm-sim: --partitions needs --sm opensm\n");
			return 2;
		}
		if (!realpath(o->partitions, partitions) || access(partitions, R_OK) < 0) {
			fprintf(stderr, "uscm-sim: --partitions %s: %s\n", o->partitions, strerror(errno));
			return 2;
		}
	}
	f = attach_quiet(dir);
	if (f) {
		int running = fabric_running(f);

		if (!running)
			simf_uscmd_stop(f, -1, SIGTERM, 2000); /* what a dead SM left */
		simf_detach(f);
		if (running) {
			fprintf(stderr, "uscm-sim: a fabric is already running in %s (uscm-sim stop --dir %s)\n",
				dir, dir);
			return 1;
		}
		remove_state(dir); /* stale */
	}
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		fprintf(stderr, "uscm-sim: mkdir %s: %s\n", dir, strerror(errno));
		return 1;
	}
	if (!realpath(dir, absdir)) {
		fprintf(stderr, "uscm-sim: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	/* Programs of every user attach to the fabric (verbs are open to all on
	 * a real host): the directory gets r-x for group and others (a mkdtemp
	 * directory is 0700); the state file is 0666 (simf_create). */
	{
		struct stat sb;

		if (stat(absdir, &sb) < 0 || ((sb.st_mode & 0755) != 0755 &&
					      chmod(absdir, (sb.st_mode & 07777) | 0755) < 0)) {
			fprintf(stderr, "uscm-sim: chmod %s: %s\n", absdir, strerror(errno));
			return 1;
		}
	}
	(void)abslen;
	pcap[0] = 0;
	if (o->pcap) {
		if (o->pcap[0] == '/') {
			snprintf(pcap, sizeof(pcap), "%s", o->pcap);
		} else {
			char cwd[PATH_MAX];

			if (!getcwd(cwd, sizeof(cwd)))
				return 1;
			if (snprintf(pcap, sizeof(pcap), "%s/%s", cwd, o->pcap) >= (int)sizeof(pcap))
				return 1;
		}
	}
	{
		char marker[PATH_MAX + 8];

		snprintf(marker, sizeof(marker), "%s/netns", absdir);
		unlink(marker);
		snprintf(marker, sizeof(marker), "%s/dev.host", absdir);
		rmdir(marker);
		if (o->devib && mkdir(marker, 0755) < 0) {
			fprintf(stderr, "uscm-sim: %s: %s\n", marker, strerror(errno));
			return 1;
		}
		snprintf(marker, sizeof(marker), "%s/netns", absdir);
		if (o->netns) {
			int fd;

			if (netns_create(o->topo ? topo.ncas : o->nodes ? o->nodes : 2) < 0)
				return 1;
			fd = open(marker, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
			if (fd < 0) {
				fprintf(stderr, "uscm-sim: %s: %s\n", marker, strerror(errno));
				return 1;
			}
			if (write(fd, "uscm<i>: 127.10.0.<i>/32\n", 26) != 26)
				fprintf(stderr, "uscm-sim: %s: short write\n", marker);
			close(fd);
		}
	}
	claim = claim_instance(absdir, &inst);
	if (claim < 0) {
		fprintf(stderr, "uscm-sim: no free fabric instance on 127.77.0.0/16: %s\n", strerror(errno));
		return 1;
	}
	f = simf_create(absdir, o->link ? o->link : SIMF_LINK_IB, o->topo ? topo.ncas : o->nodes ? o->nodes : 2, inst,
			o->seed, pcap[0] ? pcap : NULL);
	if (!f) {
		fprintf(stderr, "uscm-sim: create fabric in %s: %s\n", absdir, strerror(errno));
		close(claim);
		return 1;
	}
	if (nrules > 0)
		simf_fault_set(f, rules, nrules);
	if (o->topo) {
		char err[256], tpath[PATH_MAX + 16];

		if (simf_topo_apply(f, &topo, err, sizeof(err)) < 0) {
			fprintf(stderr, "uscm-sim: --topo: %s\n", err);
			simf_detach(f);
			remove_state(absdir);
			close(claim);
			return 1;
		}
		snprintf(tpath, sizeof(tpath), "%s/topology", absdir);
		if (simf_topo_write(f, tpath) < 0)
			fprintf(stderr, "uscm-sim: %s: %s\n", tpath, strerror(errno));
	}
	if (o->sm == SIMF_SM_OPENSM) {
		/* without a topology node 1's port is cabled to node 2's; node
		 * 0 (uscm-sim-sm, now only every SMA) is on no cable */
		f->st->sm_kind = SIMF_SM_OPENSM;
		f->st->sm_node = 1;
		if (!o->topo)
			simf_cable(f, 1, 1, 2, 1);
		simf_set_link(f, 0, 0);
	}
	f->st->umad_access = o->umad_access;
	if (o->umad_access == SIMF_UMAD_ROOT && geteuid() != 0)
		fprintf(stderr, "uscm-sim: note: only root may open umad ports on this fabric (--umad-access root) "
				"and you are not root\n");
	sm = spawn_sm(absdir, claim, o->verbose, partitions, o->link == SIMF_LINK_ROCE ? 0 : o->lmc);
	close(claim);
	if (sm < 0) {
		fprintf(stderr, "uscm-sim: cannot start uscm-sim-sm: %s\n", strerror(errno));
		simf_detach(f);
		remove_state(absdir);
		return 1;
	}
	/* wait for the SM (IB: every port ACTIVE; under opensm, nodes 1..N:
	 * its first sweep takes a few seconds) */
	deadline = now_ms() + (o->sm == SIMF_SM_OPENSM ? 30000 : 10000);
	for (;;) {
		int ready = f->st->keeper_pid == sm;

		for (unsigned i = o->sm == SIMF_SM_OPENSM ? 1 : 0; ready && i <= f->st->nnodes; i++)
			if (f->st->nodes[i].port_state != SIMF_PORT_ACTIVE)
				ready = 0;
		if (ready)
			break;
		if (waitpid(sm, NULL, WNOHANG) == sm || now_ms() > deadline) {
			fprintf(stderr, "uscm-sim: the SM did not bring the fabric up\n");
			print_log_tail(absdir);
			kill(sm, SIGKILL);
			waitpid(sm, NULL, 0);
			simf_detach(f);
			remove_state(absdir);
			return 1;
		}
		sleep_ms(5);
	}
	/* the host service of every node, once the ports are up */
	if (!o->no_uscmd && uscmd_start_all(f, o->verbose) < 0) {
		fprintf(stderr, "uscm-sim: the host service did not start (--no-uscmd starts without it)\n");
		kill(sm, SIGKILL);
		waitpid(sm, NULL, 0);
		simf_detach(f);
		remove_state(absdir);
		return 1;
	}
	simf_detach(f);
	if (!quiet) {
		char lp[2 * PATH_MAX + 8];

		lib_path(lp, sizeof(lp));
		printf("export USCM_SIM_DIR=%s\n", absdir);
		printf("export USCM_HOSTS=%s/hosts\n", absdir);
		printf("export LD_LIBRARY_PATH=%s\n", lp);
		fflush(stdout);
	}
	return 0;
}

static int cmd_start(const struct opts *o)
{
	char absdir[PATH_MAX];

	return do_start(o, absdir, sizeof(absdir), 0);
}

/* ---- status ------------------------------------------------------------ */

static const char *port_state_str(unsigned s)
{
	switch (s) {
	case SIMF_PORT_DOWN: return "DOWN";
	case SIMF_PORT_INIT: return "INIT";
	case SIMF_PORT_ARMED: return "ARMED";
	case SIMF_PORT_ACTIVE: return "ACTIVE";
	default: return "?";
	}
}


/* The CAs' P_Key tables as the SM set them and the packets each port
 * dropped for their P_Key, when either is not the default (0xFFFF only,
 * nothing dropped). */
static void status_pkeys(const struct simf *f)
{
	const struct simf_state *st = f->st;
	int title = 0;

	for (unsigned i = 1; i <= st->nnodes + st->nswitches && i < SIMF_MAX_NODES; i++) {
		const struct simf_node *nd = &st->nodes[i];
		uint32_t v = simf_pkey_violations(f, (int)i);
		int plain = nd->pkeys[0] == 0xFFFF;

		if (i > st->nnodes) {
			/* a switch: what its ports' partition enforcement dropped */
			if (!v)
				continue;
			if (!title++)
				printf("P_Keys (table entries in use; packets dropped for their P_Key):\n");
			printf("  %-7s (switch ports)  P_Key violations %u\n", nd->name, v);
			continue;
		}

		for (int k = 1; k < SIMF_PKEYS; k++)
			if (nd->pkeys[k])
				plain = 0;
		if (plain && !v)
			continue;
		if (!title++)
			printf("P_Keys (table entries in use; packets dropped for their P_Key):\n");
		printf("  %-7s", nd->name);
		for (int k = 0; k < SIMF_PKEYS; k++)
			if (nd->pkeys[k])
				printf(" [%d] 0x%04x", k, nd->pkeys[k]);
		printf("  P_Key violations %u\n", v);
	}
}
static int cmd_status(const struct opts *o)
{
	const char *dir = fabric_dir(o);
	struct simf *f = attach_quiet(dir);
	struct simf_state *st;
	int nf = 0, ng = 0;

	if (!f) {
		fprintf(stderr, "uscm-sim: no fabric in %s: %s\n", dir, strerror(errno));
		return 1;
	}
	st = f->st;
	printf("fabric %s: link %s, %u nodes, transport 127.77.%u.0/24, seed %llu\n", f->dir,
	       st->link == SIMF_LINK_IB ? "ib" : "roce", st->nnodes, st->instance,
	       (unsigned long long)st->seed);
	printf("%s: pid %d (%s); SA queries %llu; capture %s\n",
	       st->link == SIMF_LINK_IB ? "SM/SA" : "keeper (RoCE: no SM/SA)", st->keeper_pid,
	       pid_alive(st->keeper_pid) ? "running" : "not running",
	       (unsigned long long)st->sa_queries, st->pcap_path[0] ? st->pcap_path : "off");
	if (st->link == SIMF_LINK_IB && st->sm_kind == SIMF_SM_OPENSM)
		printf("SM and SA: opensm on %s, pid %d (%s); uscm-sim-sm is the ports' SMA; files in %s/opensm\n",
		       st->nodes[st->sm_node].name, st->sm_pid, pid_alive(st->sm_pid) ? "running" : "not running",
		       f->dir);
	printf("%-4s %-7s %-12s %-6s %-6s %-4s %-18s %-26s %8s %8s %6s %5s %6s  %s\n", "#", "name",
	       "ip", "lid", "state", "link", "guid", "gid", "tx", "rx", "drop", "dup", "delay", "pids");
	for (unsigned i = 0; i <= st->nnodes; i++) {
		const struct simf_node *nd = &st->nodes[i];
		char gid[INET6_ADDRSTRLEN], ip[INET_ADDRSTRLEN], pids[200] = "";
		struct in_addr a = { .s_addr = htonl(nd->ip) };
		size_t o2 = 0;

		inet_ntop(AF_INET6, nd->gid, gid, sizeof(gid));
		inet_ntop(AF_INET, &a, ip, sizeof(ip));
		for (int k = 0; k < SIMF_NODE_PIDS; k++)
			if (nd->pids[k] && pid_alive(nd->pids[k]) && o2 < sizeof(pids))
				o2 += (size_t)snprintf(pids + o2, sizeof(pids) - o2, "%s%d", o2 ? "," : "",
						       nd->pids[k]);
		if (i == 0 && !o2)
			snprintf(pids, sizeof(pids), "%d", st->keeper_pid);
		printf("%-4u %-7s %-12s %-6u %-6s %-4s 0x%016llx %-26s %8llu %8llu %6llu %5llu %6llu  %s\n",
		       i, nd->name, i ? ip : "-", nd->lid, port_state_str(nd->port_state),
		       nd->link_up ? "up" : "down", (unsigned long long)nd->guid, gid,
		       (unsigned long long)nd->tx, (unsigned long long)nd->rx,
		       (unsigned long long)nd->tx_dropped, (unsigned long long)nd->tx_duplicated,
		       (unsigned long long)nd->tx_delayed, pids[0] ? pids : "-");
	}
	status_pkeys(f);
	if (st->nswitches) {
		printf("switches (topology in %s/topology):\n", f->dir);
		for (unsigned i = st->nnodes + 1; i <= st->nnodes + st->nswitches && i < SIMF_MAX_NODES; i++) {
			const struct simf_node *nd = &st->nodes[i];

			printf("%-4u %-7s %-22s lid %-5u port 0 %-6s guid 0x%016llx LinearFDBTop %u ports:", i,
			       nd->name, nd->desc, nd->lid, port_state_str(nd->port_state),
			       (unsigned long long)nd->guid, st->sw[nd->sw].lft_top);
			for (unsigned p = 1; p <= nd->nports; p++)
				if (nd->ports[p].peer >= 0)
					printf(" %u:%s->%s[%u]", p, port_state_str(nd->ports[p].state),
					       st->nodes[nd->ports[p].peer].name, nd->ports[p].peer_port);
			printf("\n");
		}
	}
	for (int i = 0; i < SIMF_MAX_FAULTS; i++)
		if (st->faults[i].used) {
			char buf[256];

			simf_fault_format(&st->faults[i], buf, sizeof(buf));
			printf("%s  %d: %s\n", nf++ ? "" : "faults (first match wins):\n", i + 1, buf);
		}
	if (!nf)
		printf("faults: none\n");
	printf("umad ports: %s\n", st->umad_access == SIMF_UMAD_ALL ? "open to every user (--umad-access all)"
								     : "root only (--umad-access root)");
	printf("host service (uscmd):\n");
	for (unsigned i = 1; i <= st->nnodes && i < SIMF_MAX_NODES; i++) {
		char sock[PATH_MAX];
		pid_t pid = simf_uscmd_pid(f, (int)i);
		int have = simf_uscmd_path(f, (int)i, "uscmd.sock", sock, sizeof(sock)) == 0 && is_socket(sock);

		if (pid)
			printf("  %-7s pid %-7d running      socket %s%s\n", st->nodes[i].name, (int)pid, sock,
			       have ? "" : " (missing)");
		else if (st->uscmd_pid[i])
			printf("  %-7s pid %-7d not running  socket %s\n", st->nodes[i].name, st->uscmd_pid[i],
			       have ? sock : "-");
		else
			printf("  %-7s -           not running  socket %s\n", st->nodes[i].name, have ? sock : "-");
	}
	for (int g = 0; g < SIMF_MAX_MCG; g++) {
		const struct simf_mcg *m = &st->mcgs[g];
		char mg[INET6_ADDRSTRLEN];

		if (!m->used)
			continue;
		if (!ng++)
			printf("multicast groups:\n");
		inet_ntop(AF_INET6, m->mgid, mg, sizeof(mg));
		printf("  %s mlid 0x%04x qkey 0x%08x pkey 0x%04x%s members:", mg, m->mlid, m->qkey,
		       m->pkey, m->sa_created ? "" : " (no SA group)");
		for (unsigned n = 0; n <= st->nnodes; n++)
			if (m->join_state[n])
				printf(" %s(0x%x)", st->nodes[n].name, m->join_state[n]);
		printf(" qps:");
		for (int q = 0; q < SIMF_MCG_QPS; q++)
			if (m->qps[q].node >= 0)
				printf(" %s:0x%x", st->nodes[m->qps[q].node].name, m->qps[q].qpn);
		printf("\n");
	}
	simf_detach(f);
	return 0;
}

/* ---- fault, link, kill, env -------------------------------------------- */

/* A rule naming a link this fabric lacks would never match: refuse it
 * (a CA's link always exists; a switch port needs a cable). 0 or -1. */
static int links_exist(const struct simf *f, const struct simf_fault *rules, int n)
{
	const struct simf_state *st = f->st;

	for (int k = 0; k < n; k++) {
		const struct simf_fault *r = &rules[k];
		int ok = 1;

		if (r->link_node > 0) {
			ok = (unsigned)r->link_node <= st->nnodes;
		} else if (r->link_node < 0) {
			unsigned sw = (unsigned)-r->link_node, node = st->nnodes + sw;

			ok = sw <= st->nswitches && node < SIMF_MAX_NODES && r->link_port <= st->nodes[node].nports &&
			     st->nodes[node].ports[r->link_port].peer >= 0;
		}
		if (!ok) {
			char buf[256];

			simf_fault_format(r, buf, sizeof(buf));
			fprintf(stderr, "uscm-sim: fault '%s': no such link (a cabled switch port or a node)\n", buf);
			return -1;
		}
	}
	return 0;
}

static int cmd_fault(const struct opts *o, int argc, char **argv, int i)
{
	struct simf_fault rules[SIMF_MAX_FAULTS];
	struct simf *f;
	int n, rc = 0;

	f = attach_quiet(fabric_dir(o));
	if (!f) {
		fprintf(stderr, "uscm-sim: no fabric in %s: %s\n", fabric_dir(o), strerror(errno));
		return 1;
	}
	if (i >= argc || strcmp(argv[i], "list") == 0) {
		int any = 0;

		for (int k = 0; k < SIMF_MAX_FAULTS; k++)
			if (f->st->faults[k].used) {
				char buf[256];

				simf_fault_format(&f->st->faults[k], buf, sizeof(buf));
				printf("%d: %s\n", k + 1, buf);
				any = 1;
			}
		if (!any)
			printf("no fault rules\n");
	} else if (strcmp(argv[i], "clear") == 0) {
		simf_fault_set(f, NULL, 0);
	} else if (strcmp(argv[i], "add") == 0) {
		n = parse_rules((const char *const *)argv + i + 1, argc - i - 1, rules);
		if (n > 0 && links_exist(f, rules, n) < 0)
			n = -1;
		for (int k = 0; k < n && rc == 0; k++)
			if (simf_fault_add(f, &rules[k]) < 0) {
				fprintf(stderr, "uscm-sim: rule table full\n");
				rc = 1;
			}
		if (n <= 0)
			rc = 2;
	} else {
		n = parse_rules((const char *const *)argv + i, argc - i, rules);
		if (n < 0 || links_exist(f, rules, n) < 0)
			rc = 2;
		else
			simf_fault_set(f, rules, n);
	}
	simf_detach(f);
	return rc;
}

static int node_arg(struct simf *f, const char *name)
{
	int n = simf_node_by_name(f, name);

	if (n < 0)
		fprintf(stderr, "uscm-sim: no node '%s' (sm, node1..node%u%s)\n", name, f->st->nnodes,
			f->st->nswitches ? ", sw1.." : "");
	return n;
}

static int cmd_link(const struct opts *o, int argc, char **argv, int i)
{
	struct simf *f;
	int n, up;

	if (argc - i != 2 || (strcmp(argv[i + 1], "up") && strcmp(argv[i + 1], "down")))
		usage();
	f = attach_quiet(fabric_dir(o));
	if (!f) {
		fprintf(stderr, "uscm-sim: no fabric in %s: %s\n", fabric_dir(o), strerror(errno));
		return 1;
	}
	up = strcmp(argv[i + 1], "up") == 0;
	{
		/* NODE:PORT: the cable at that port (a --topo fabric) */
		char name[64], *colon;
		int port = 0;

		snprintf(name, sizeof(name), "%s", argv[i]);
		colon = strchr(name, ':');
		if (colon) {
			*colon = 0;
			port = atoi(colon + 1);
		}
		n = node_arg(f, name);
		if (n >= 0 && colon) {
			if (simf_set_port_link(f, n, port, up) < 0) {
				fprintf(stderr, "uscm-sim: link %s: %s\n", argv[i],
					errno == ENOTCONN ? "no cable at that port" : "no such port");
				n = -1;
			}
		} else if (n >= 0) {
			simf_set_link(f, n, up);
		}
	}
	simf_detach(f);
	return n < 0;
}

static int cmd_lid(const struct opts *o, int argc, char **argv, int i)
{
	struct simf *f;
	char *end;
	unsigned long lid;
	int n, rc = 1;

	if (argc - i != 2)
		usage();
	lid = strtoul(argv[i + 1], &end, 0);
	if (*end || !lid || lid > SIMF_MAX_LID) {
		fprintf(stderr, "uscm-sim: LID '%s': 1..%u\n", argv[i + 1], SIMF_MAX_LID);
		return 1;
	}
	f = attach_quiet(fabric_dir(o));
	if (!f) {
		fprintf(stderr, "uscm-sim: no fabric in %s: %s\n", fabric_dir(o), strerror(errno));
		return 1;
	}
	n = node_arg(f, argv[i]);
	if (n >= 0 && simf_set_lid(f, n, (uint16_t)lid) < 0)
		fprintf(stderr, "uscm-sim: LID %lu for %s: %s\n", lid, argv[i], strerror(errno));
	else if (n >= 0)
		rc = 0;
	simf_detach(f);
	return rc;
}

static int cmd_kill(const struct opts *o, int argc, char **argv, int i)
{
	struct simf *f;
	struct simf_node *nd;
	pid_t pids[SIMF_NODE_PIDS + SIMF_MAX_AGENTS + 2];
	int n, np = 0;

	if (argc - i != 1)
		usage();
	f = attach_quiet(fabric_dir(o));
	if (!f) {
		fprintf(stderr, "uscm-sim: no fabric in %s: %s\n", fabric_dir(o), strerror(errno));
		return 1;
	}
	n = node_arg(f, argv[i]);
	if (n < 0) {
		simf_detach(f);
		return 1;
	}
	nd = &f->st->nodes[n];
	simf_lock(f);
#define ADD(p) do { pid_t p_ = (p); int d_ = 0; \
		if (p_ <= 0 || is_self_or_ancestor(p_)) break; \
		for (int k_ = 0; k_ < np; k_++) d_ |= pids[k_] == p_; \
		if (!d_) pids[np++] = p_; } while (0)
	if (n == 0)
		ADD(f->st->keeper_pid);
	ADD(nd->pid);
	for (int k = 0; k < SIMF_NODE_PIDS; k++)
		ADD(nd->pids[k]);
	for (int k = 0; k < SIMF_MAX_AGENTS; k++)
		ADD(nd->agents[k].pid);
#undef ADD
	simf_unlock(f);
	for (int k = 0; k < np; k++)
		if (pid_alive(pids[k])) {
			printf("killed %d (%s)\n", pids[k], nd->name);
			kill(pids[k], SIGKILL);
		}
	/* wait until they are gone (zombies count as gone) */
	for (int t = 0; t < 400; t++) {
		int left = 0;

		for (int k = 0; k < np; k++)
			left += pid_alive(pids[k]);
		if (!left)
			break;
		sleep_ms(5);
	}
	/* and clear what they left in the tables */
	simf_lock(f);
	for (int k = 0; k < np; k++) {
		for (int j = 0; j < SIMF_NODE_PIDS; j++)
			if (nd->pids[j] == pids[k])
				nd->pids[j] = 0;
		for (int j = 0; j < SIMF_MAX_AGENTS; j++)
			if (nd->agents[j].pid == pids[k])
				memset(&nd->agents[j], 0, sizeof(nd->agents[j]));
		if (nd->pid == pids[k])
			nd->pid = 0;
	}
	simf_unlock(f);
	simf_detach(f);
	return 0;
}

static int cmd_env(const struct opts *o)
{
	char lp[2 * PATH_MAX + 8];
	struct simf *f = attach_quiet(fabric_dir(o));

	if (!f) {
		fprintf(stderr, "uscm-sim: no fabric in %s: %s\n", fabric_dir(o), strerror(errno));
		return 1;
	}
	lib_path(lp, sizeof(lp));
	printf("export USCM_SIM_DIR=%s\n", f->dir);
	printf("export USCM_HOSTS=%s/hosts\n", f->dir);
	printf("export LD_LIBRARY_PATH=%s\n", lp);
	if (o->node) {
		char sock[PATH_MAX];
		int n = simf_node_by_name(f, o->node);

		printf("export USCM_SIM_NODE=%s\n", o->node);
		node_socket(f, n, sock, sizeof(sock));
		if (sock[0] && !o->no_uscmd)
			printf("export USCM_SOCKET=%s\n", sock);
		else
			printf("unset USCM_SOCKET\n");
	}
	simf_detach(f);
	return 0;
}

/* uscm-sim uscmd NODE start|stop|restart|kill */
static int cmd_uscmd(const struct opts *o, int argc, char **argv, int i)
{
	char dir[PATH_MAX], bin[PATH_MAX + 16], sock[PATH_MAX];
	const char *act;
	struct simf *f;
	int n, rc = 0;

	if (argc - i != 2)
		usage();
	act = argv[i + 1];
	if (strcmp(act, "start") && strcmp(act, "stop") && strcmp(act, "restart") && strcmp(act, "kill"))
		usage();
	/* the daemon's socket path (and its command line) carry the resolved
	 * directory, whatever --dir spelling we were given */
	if (!realpath(fabric_dir(o), dir))
		snprintf(dir, sizeof(dir), "%s", fabric_dir(o));
	f = attach_quiet(dir);
	if (!f) {
		fprintf(stderr, "uscm-sim: no fabric in %s: %s\n", dir, strerror(errno));
		return 1;
	}
	n = node_arg(f, argv[i]);
	if (n == 0)
		fprintf(stderr, "uscm-sim: the SM (node 0) has no uscmd\n");
	if (n <= 0) {
		simf_detach(f);
		return 1;
	}
	simf_uscmd_path(f, n, "uscmd.sock", sock, sizeof(sock));
	if ((strcmp(act, "start") == 0 || strcmp(act, "restart") == 0) && netns_join(f) < 0) {
		simf_detach(f);
		return 1;
	}
	if (strcmp(act, "kill") == 0) {
		pid_t pid = simf_uscmd_pid(f, n);

		if (pid) {
			simf_uscmd_stop(f, n, SIGKILL, 0);
			printf("killed %d (%s's uscmd)\n", (int)pid, f->st->nodes[n].name);
		} else {
			printf("%s's uscmd is not running\n", f->st->nodes[n].name);
		}
	}
	if (strcmp(act, "stop") == 0 || strcmp(act, "restart") == 0) {
		pid_t pid = simf_uscmd_pid(f, n);

		if (pid) {
			simf_uscmd_stop(f, n, SIGTERM, 2000);
			printf("stopped %d (%s's uscmd)\n", (int)pid, f->st->nodes[n].name);
		} else if (strcmp(act, "stop") == 0) {
			printf("%s's uscmd is not running\n", f->st->nodes[n].name);
		}
		unlink(sock); /* a daemon that had to be SIGKILLed left it */
	}
	if (strcmp(act, "start") == 0 || strcmp(act, "restart") == 0) {
		pid_t pid = simf_uscmd_pid(f, n);

		if (pid) {
			fprintf(stderr, "uscm-sim: %s's uscmd is already running (pid %d)\n",
				f->st->nodes[n].name, (int)pid);
			rc = 1;
		} else if (uscmd_bin(bin, sizeof(bin)) < 0) {
			fprintf(stderr, "uscm-sim: %s is not built\n", bin);
			rc = 1;
		} else if ((pid = spawn_uscmd(f, n, bin, o->verbose)) < 0) {
			rc = 1;
		} else if (uscmd_wait_ready(f, &n, &pid, 1) < 0) {
			kill_children(f, &n, &pid, 1);
			rc = 1;
		} else {
			printf("%s's uscmd: pid %d, socket %s\n", f->st->nodes[n].name, (int)pid, sock);
		}
	}
	simf_detach(f);
	return rc;
}

/* ---- run ----------------------------------------------------------------- */

/* The environment of a node program. sock: the node's uscmd socket for
 * USCM_SOCKET ("": the node has none, unset it; NULL: leave it alone). */
static void set_env(const char *dir, const char *node, const char *sock)
{
	char lp[2 * PATH_MAX + 8];
	const char *old = getenv("LD_LIBRARY_PATH");

	lib_path(lp, sizeof(lp));
	if (old && *old) {
		size_t n = strlen(lp);

		snprintf(lp + n, sizeof(lp) - n, ":%s", old);
	}
	setenv("LD_LIBRARY_PATH", lp, 1);
	setenv("USCM_SIM_DIR", dir, 1);
	/* the library's ibacm hosts file is the fabric's (the library itself
	 * never reads USCM_SIM_DIR) */
	snprintf(lp, sizeof(lp), "%s/hosts", dir);
	setenv("USCM_HOSTS", lp, 1);
	if (node)
		setenv("USCM_SIM_NODE", node, 1);
	if (sock && *sock)
		setenv("USCM_SOCKET", sock, 1);
	else if (sock)
		unsetenv("USCM_SOCKET");
}

static volatile sig_atomic_t g_child;

static void forward_signal(int sig)
{
	if (g_child > 0)
		kill(g_child, sig);
}

static int cmd_run(const struct opts *o, int argc, char **argv, int i)
{
	char absdir[PATH_MAX], run_sock[PATH_MAX] = "";
	struct simf *f;
	int status, rc;
	pid_t pid;

	if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc)
		usage();
	i++;
	f = attach_quiet(fabric_dir(o));
	if (f && fabric_running(f) && !o->start_opts) {
		/* a fabric is up: run the program on it */
		char sock[PATH_MAX] = "";

		if (o->node && simf_node_by_name(f, o->node) < 0) {
			fprintf(stderr, "uscm-sim: no node '%s'\n", o->node);
			simf_detach(f);
			return 2;
		}
		if (o->node && !o->no_uscmd)
			node_socket(f, simf_node_by_name(f, o->node), sock, sizeof(sock));
		set_env(f->dir, o->node, o->node || o->no_uscmd ? sock : NULL);
		if (netns_join(f) < 0 || devib_enter(f->dir, o->node) < 0) {
			simf_detach(f);
			return 1;
		}
		simf_detach(f);
		execvp(argv[i], argv + i);
		fprintf(stderr, "uscm-sim: %s: %s\n", argv[i], strerror(errno));
		return 127;
	}
	if (f)
		simf_detach(f);
	rc = do_start(o, absdir, sizeof(absdir), 1);
	if (rc)
		return rc;
	if (o->node) {
		f = attach_quiet(absdir);
		if (f && simf_node_by_name(f, o->node) < 0) {
			fprintf(stderr, "uscm-sim: no node '%s'\n", o->node);
			simf_detach(f);
			struct opts so = *o;
			so.dir = absdir;
			cmd_stop(&so);
			return 2;
		}
		if (f && !o->no_uscmd)
			node_socket(f, simf_node_by_name(f, o->node), run_sock, sizeof(run_sock));
		if (f)
			simf_detach(f);
	}
	signal(SIGINT, forward_signal);
	signal(SIGTERM, forward_signal);
	signal(SIGHUP, forward_signal);
	pid = fork();
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		signal(SIGHUP, SIG_DFL);
		set_env(absdir, o->node, o->node || o->no_uscmd ? run_sock : NULL);
		if (devib_enter(absdir, o->node) < 0)
			_exit(1);
		execvp(argv[i], argv + i);
		fprintf(stderr, "uscm-sim: %s: %s\n", argv[i], strerror(errno));
		_exit(127);
	}
	g_child = pid;
	rc = 1;
	if (pid > 0) {
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(status))
			rc = WEXITSTATUS(status);
		else if (WIFSIGNALED(status))
			rc = 128 + WTERMSIG(status);
	}
	{
		struct opts so = *o;

		so.dir = absdir;
		cmd_stop(&so);
	}
	return rc;
}

int main(int argc, char **argv)
{
	struct opts o = { .seed = 1 };
	const char *cmd;
	int i;

	if (argc < 2)
		usage();
	cmd = argv[1];
	signal(SIGPIPE, SIG_IGN);
	i = parse_opts(argc, argv, 2, &o);
	if (strcmp(cmd, "start") == 0 || strcmp(cmd, "up") == 0) {
		if (i < argc)
			usage();
		return cmd_start(&o);
	}
	if (strcmp(cmd, "stop") == 0 || strcmp(cmd, "down") == 0)
		return cmd_stop(&o);
	if (strcmp(cmd, "status") == 0)
		return cmd_status(&o);
	if (strcmp(cmd, "env") == 0)
		return cmd_env(&o);
	if (strcmp(cmd, "fault") == 0 || strcmp(cmd, "faults") == 0)
		return cmd_fault(&o, argc, argv, i);
	if (strcmp(cmd, "link") == 0)
		return cmd_link(&o, argc, argv, i);
	if (strcmp(cmd, "lid") == 0)
		return cmd_lid(&o, argc, argv, i);
	if (strcmp(cmd, "kill") == 0)
		return cmd_kill(&o, argc, argv, i);
	if (strcmp(cmd, "run") == 0)
		return cmd_run(&o, argc, argv, i);
	if (strcmp(cmd, "uscmd") == 0)
		return cmd_uscmd(&o, argc, argv, i);
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0)
		usage_to(stdout, 0);
	fprintf(stderr, "uscm-sim: unknown command '%s'\n", cmd);
	usage();
	return 2;
}
