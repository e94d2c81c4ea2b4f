/* The host side of a simulated node: the per-node host service (uscmd,
 * started by `uscm-sim start`, managed with `uscm-sim uscmd`, found through
 * USCM_SOCKET) and device permissions like a real host's (every user may
 * use verbs and attach the fabric; only root opens umad ports unless the
 * fabric says `--umad-access all`). The tests that need the daemon skip
 * when build/bin/uscmd is not built; the ones that run programs as user
 * nobody skip when not run as root. Every test has its own fabric
 * directory, stops its fabric in .fini, and the SM watches the test
 * process (USCM_SIM_WATCH_PID). */
#include "simtest.h"

#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/un.h>

static char *g_dir;
static int g_lfd = -1;

static void setup(void)
{
	g_dir = st_fixture_dir();
}

static void teardown(void)
{
	if (!g_dir)
		return;
	if (g_lfd >= 0)
		close(g_lfd);
	g_lfd = -1;
	st_sh(NULL, "'%s/uscm-sim' stop --dir '%s' >/dev/null 2>&1", st_bin(), g_dir);
	st_rmrf(g_dir);
	free(g_dir);
	g_dir = NULL;
}

/* cr_skip_test ends a test without its .fini: clean up first. SKIP for
 * what CI cannot provide either, SKIP_MISSING for what the project does
 * (tests/test_skip.h). */
#define SKIP(...)                              \
	do {                                   \
		teardown();                    \
		cr_skip_test(__VA_ARGS__);     \
	} while (0)
#define SKIP_MISSING(...)                      \
	do {                                   \
		teardown();                    \
		tf_skip_missing(__VA_ARGS__);  \
	} while (0)

TestSuite(host, .init = setup, .fini = teardown, .timeout = 120);

/* `uscm-sim start --dir g_dir ARGS`; its output (stdout + stderr). */
static char *start(const char *args)
{
	char *out = NULL;
	int rc = st_sh(&out, "'%s/uscm-sim' start --dir '%s' %s 2>&1", st_bin(), g_dir, args);

	cr_assert_eq(rc, 0, "uscm-sim start %s: %s", args, out);
	return out;
}

static struct simf *attach(void)
{
	struct simf *f = simf_attach_node(g_dir, -1);

	cr_assert_not_null(f, "attach %s: %s", g_dir, strerror(errno));
	return f;
}

static int have_uscmd(char *path, size_t len)
{
	snprintf(path, len, "%s/uscmd", st_bin());
	return access(path, X_OK) == 0;
}

static void sock_path(const char *node, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s/uscmd.sock", g_dir, node);
}

/* connect(2) to a SOCK_SEQPACKET socket: 0 or the errno. */
static int try_connect(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), e = 0;

	cr_assert_geq(fd, 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
		e = errno;
	close(fd);
	return e;
}

/* One variable of a process's environment (malloc'd), or NULL. */
static char *proc_env(pid_t pid, const char *name)
{
	char path[64], buf[65536];
	size_t nl = strlen(name);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return NULL;
	buf[n] = 0;
	for (ssize_t o = 0; o < n; o += (ssize_t)strlen(buf + o) + 1)
		if (strncmp(buf + o, name, nl) == 0 && buf[o + nl] == '=')
			return strdup(buf + o + nl + 1);
	return NULL;
}

/* `uscm-sim run ... --node NODE -- sh -c 'echo "S=$USCM_SOCKET"'`: the
 * value the program saw (malloc'd). */
static char *run_socket(const char *pre, const char *opts)
{
	char *out = NULL, *s, *e;
	int rc = st_sh(&out, "%s '%s/uscm-sim' run --dir '%s' %s -- sh -c 'echo \"S=$USCM_SOCKET\"' 2>&1", pre,
		       st_bin(), g_dir, opts);

	cr_assert_eq(rc, 0, "run %s: %s", opts, out);
	s = strstr(out, "S=");
	cr_assert_not_null(s, "%s", out);
	s = strdup(s + 2);
	e = strchr(s, '\n');
	if (e)
		*e = 0;
	free(out);
	return s;
}

/* ---- the host service ---------------------------------------------------- */

Test(host, uscmd_per_node)
{
	char bin[PATH_MAX], sock[PATH_MAX], want[PATH_MAX + 64], *out, *v;
	pid_t pids[4];
	struct simf *f;
	struct stat sb;

	out = start("--nodes 3");
	if (!have_uscmd(bin, sizeof(bin))) {
		/* one line says so and the fabric runs without it */
		cr_assert(strstr(out, "is not built: starting without the host service"), "%s", out);
		free(out);
		f = attach();
		for (int i = 1; i <= 3; i++)
			cr_assert_eq(f->st->uscmd_pid[i], 0);
		simf_detach(f);
		SKIP_MISSING("%s is not built: the host service was not started", bin);
	}
	free(out);
	f = attach();
	for (int i = 1; i <= 3; i++) {
		char node[16], dir[PATH_MAX];

		snprintf(node, sizeof(node), "node%d", i);
		sock_path(node, sock, sizeof(sock));
		snprintf(dir, sizeof(dir), "%s/%s", g_dir, node);
		cr_assert_eq(stat(dir, &sb), 0, "%s", dir);
		cr_assert_eq(sb.st_mode & 0777, 0755, "%s is 0755: %o", dir, sb.st_mode & 0777);
		cr_assert_eq(stat(sock, &sb), 0, "%s", sock);
		cr_assert(S_ISSOCK(sb.st_mode));
		cr_assert_eq(try_connect(sock), 0, "%s accepts a connection", sock);
		pids[i] = simf_uscmd_pid(f, i);
		cr_assert_gt(pids[i], 0, "node%d's uscmd pid in the state", i);
		cr_assert_eq(pids[i], f->st->uscmd_pid[i]);
		/* the environment of a node program, plus in-process mode */
		v = proc_env(pids[i], "USCM_SIM_NODE");
		cr_assert(v && strcmp(v, node) == 0, "USCM_SIM_NODE=%s", v ? v : "(none)");
		free(v);
		v = proc_env(pids[i], "USCM_MODE");
		cr_assert(v && strcmp(v, "inproc") == 0, "USCM_MODE=%s", v ? v : "(none)");
		free(v);
		v = proc_env(pids[i], "USCM_SIM_DIR");
		cr_assert(v && strcmp(v, g_dir) == 0, "USCM_SIM_DIR=%s", v ? v : "(none)");
		free(v);
		v = proc_env(pids[i], "USCM_HOSTS");
		snprintf(dir, sizeof(dir), "%s/hosts", g_dir);
		cr_assert(v && strcmp(v, dir) == 0, "USCM_HOSTS=%s", v ? v : "(none)");
		free(v);
		v = proc_env(pids[i], "LD_LIBRARY_PATH");
		cr_assert(v && strstr(v, "/sim/lib"), "LD_LIBRARY_PATH=%s", v ? v : "(none)");
		free(v);
		v = proc_env(pids[i], "USCM_SOCKET");
		cr_assert_null(v, "the daemon does not get USCM_SOCKET");
		snprintf(dir, sizeof(dir), "%s/%s/uscmd.log", g_dir, node);
		cr_assert_eq(access(dir, F_OK), 0, "%s", dir);
	}
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' status --dir '%s'", st_bin(), g_dir), 0);
	sock_path("node2", sock, sizeof(sock));
	snprintf(want, sizeof(want), "node2   pid %-7d running      socket %s\n", (int)pids[2], sock);
	cr_assert(strstr(out, want), "status shows '%s': %s", want, out);
	free(out);
	/* a program of node2 finds it */
	v = run_socket("", "--node node2");
	cr_assert_str_eq(v, sock);
	free(v);
	simf_detach(f);
	/* stop: the daemons are gone with the fabric */
	cr_assert_eq(st_sh(NULL, "'%s/uscm-sim' stop --dir '%s'", st_bin(), g_dir), 0);
	for (int i = 1; i <= 3; i++)
		cr_assert(!simf_pid_alive(pids[i]), "node%d's uscmd stopped", i);
	cr_assert(stat(g_dir, &sb) < 0, "the fabric directory is gone");
	mkdir(g_dir, 0700); /* for the teardown */
}

Test(host, uscmd_command)
{
	char bin[PATH_MAX], sock[PATH_MAX], want[PATH_MAX + 64], *out = NULL, *v;
	pid_t p1, p2, p3;
	struct simf *f;

	if (!have_uscmd(bin, sizeof(bin)))
		SKIP_MISSING("%s is not built", bin);
	free(start("--nodes 2"));
	f = attach();
	sock_path("node2", sock, sizeof(sock));
	p1 = simf_uscmd_pid(f, 2);
	cr_assert_gt(p1, 0);

	/* kill: SIGKILL; the socket file stays, as after a crash: programs
	 * still get USCM_SOCKET and are refused */
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' uscmd --dir '%s' node2 kill 2>&1", st_bin(), g_dir), 0, "%s",
		     out);
	cr_assert(strstr(out, "killed"), "%s", out);
	free(out);
	cr_assert(!simf_pid_alive(p1), "SIGKILLed");
	cr_assert_eq(simf_uscmd_pid(f, 2), 0);
	cr_assert_eq(access(sock, F_OK), 0, "the socket file stays");
	cr_assert_eq(try_connect(sock), ECONNREFUSED);
	v = run_socket("", "--node node2");
	cr_assert_str_eq(v, sock);
	free(v);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' status --dir '%s'", st_bin(), g_dir), 0);
	snprintf(want, sizeof(want), "node2   -           not running  socket %s\n", sock);
	cr_assert(strstr(out, want), "status shows '%s': %s", want, out);
	free(out);

	/* start: a new daemon, accepting when the command returns */
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' uscmd --dir '%s' 2 start 2>&1", st_bin(), g_dir), 0, "%s", out);
	free(out);
	p2 = simf_uscmd_pid(f, 2);
	cr_assert_gt(p2, 0);
	cr_assert_neq(p2, p1);
	cr_assert_eq(try_connect(sock), 0);
	/* a second one is refused */
	cr_assert_neq(st_sh(&out, "'%s/uscm-sim' uscmd --dir '%s' node2 start 2>&1", st_bin(), g_dir), 0);
	cr_assert(strstr(out, "already running"), "%s", out);
	free(out);

	/* restart: another daemon */
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' uscmd --dir '%s' node2 restart 2>&1", st_bin(), g_dir), 0, "%s",
		     out);
	free(out);
	p3 = simf_uscmd_pid(f, 2);
	cr_assert_gt(p3, 0);
	cr_assert_neq(p3, p2);
	cr_assert(!simf_pid_alive(p2));
	cr_assert_eq(try_connect(sock), 0);

	/* stop: gone with its socket; programs of the node get no USCM_SOCKET */
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' uscmd --dir '%s' node2 stop 2>&1", st_bin(), g_dir), 0, "%s", out);
	free(out);
	cr_assert(!simf_pid_alive(p3));
	cr_assert_neq(access(sock, F_OK), 0, "the socket is gone");
	v = run_socket("USCM_SOCKET=/tmp/elsewhere.sock", "--node node2");
	cr_assert_str_eq(v, "");
	free(v);
	cr_assert_gt(simf_uscmd_pid(f, 1), 0, "node1's was not touched");

	/* the SM has none, node7 does not exist */
	cr_assert_neq(st_sh(NULL, "'%s/uscm-sim' uscmd --dir '%s' sm start 2>/dev/null", st_bin(), g_dir), 0);
	cr_assert_neq(st_sh(NULL, "'%s/uscm-sim' uscmd --dir '%s' node7 start 2>/dev/null", st_bin(), g_dir), 0);
	cr_assert_neq(st_sh(NULL, "'%s/uscm-sim' uscmd --dir '%s' node1 bogus 2>/dev/null", st_bin(), g_dir), 0);
	simf_detach(f);
}

/* A fabric whose owner dies takes the nodes' daemons with it. */
Test(host, uscmds_go_with_the_watched_process)
{
	char bin[PATH_MAX];
	pid_t pids[3] = { 0 }, child;
	struct stat sb;
	int p[2], status;

	if (!have_uscmd(bin, sizeof(bin)))
		SKIP_MISSING("%s is not built", bin);
	cr_assert_eq(pipe(p), 0);
	child = fork();
	if (child == 0) {
		char pid[32], cmd[1200];
		struct simf *f;

		close(p[0]);
		snprintf(pid, sizeof(pid), "%d", (int)getpid());
		setenv("USCM_SIM_WATCH_PID", pid, 1);
		snprintf(cmd, sizeof(cmd), "'%s/uscm-sim' start --dir '%s' >/dev/null", st_bin(), g_dir);
		if (system(cmd) != 0 || !(f = simf_attach_node(g_dir, -1)))
			_exit(1);
		for (int i = 1; i <= 2; i++)
			pids[i] = f->st->uscmd_pid[i];
		if (write(p[1], pids, sizeof(pids)) != (ssize_t)sizeof(pids))
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	cr_assert_eq(read(p[0], pids, sizeof(pids)), (ssize_t)sizeof(pids));
	close(p[0]);
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cr_assert(pids[1] > 0 && pids[2] > 0);
	for (int t = 0; t < 1000 && (simf_pid_alive(pids[1]) || simf_pid_alive(pids[2]) || stat(g_dir, &sb) == 0);
	     t++)
		usleep(10000);
	cr_assert(!simf_pid_alive(pids[1]) && !simf_pid_alive(pids[2]), "the uscmds are stopped");
	cr_assert(stat(g_dir, &sb) < 0, "and the fabric removed");
	mkdir(g_dir, 0700);
}

Test(host, no_uscmd)
{
	char dir[PATH_MAX], *out, *v;
	struct simf *f;

	out = start("--nodes 2 --no-uscmd");
	cr_assert_null(strstr(out, "uscmd"), "nothing said about a host service: %s", out);
	free(out);
	f = attach();
	for (int i = 1; i <= 2; i++) {
		cr_assert_eq(f->st->uscmd_pid[i], 0);
		snprintf(dir, sizeof(dir), "%s/node%d", g_dir, i);
		cr_assert_neq(access(dir, F_OK), 0, "no %s", dir);
	}
	simf_detach(f);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' status --dir '%s'", st_bin(), g_dir), 0);
	cr_assert(strstr(out, "node1   -           not running  socket -\n"), "%s", out);
	free(out);
	/* a program of a node without one gets no USCM_SOCKET, not even the
	 * caller's; without --node the caller's environment is left alone */
	v = run_socket("USCM_SOCKET=/tmp/elsewhere.sock", "--node node1");
	cr_assert_str_eq(v, "");
	free(v);
	v = run_socket("USCM_SOCKET=/tmp/elsewhere.sock", "");
	cr_assert_str_eq(v, "/tmp/elsewhere.sock");
	free(v);
	/* run with its own fabric */
	cr_assert_eq(st_sh(NULL, "'%s/uscm-sim' stop --dir '%s'", st_bin(), g_dir), 0);
	mkdir(g_dir, 0700);
	v = run_socket("", "--nodes 1 --no-uscmd --node node1");
	cr_assert_str_eq(v, "");
	free(v);
}

/* USCM_SOCKET follows the socket file, whoever made it. */
Test(host, run_and_env_set_uscm_socket)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char sock[PATH_MAX], dir[PATH_MAX], want[PATH_MAX + 64], *out, *v;
	FILE *fp;

	free(start("--nodes 2 --no-uscmd"));
	snprintf(dir, sizeof(dir), "%s/node1", g_dir);
	cr_assert_eq(mkdir(dir, 0755), 0);
	sock_path("node1", sock, sizeof(sock));
	cr_assert_lt(strlen(sock), sizeof(a.sun_path));
	memcpy(a.sun_path, sock, strlen(sock) + 1);
	g_lfd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	cr_assert_eq(bind(g_lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(listen(g_lfd, 4), 0);
	/* node2 has a file of that name that is not a socket */
	snprintf(dir, sizeof(dir), "%s/node2", g_dir);
	cr_assert_eq(mkdir(dir, 0755), 0);
	snprintf(dir, sizeof(dir), "%s/node2/uscmd.sock", g_dir);
	fp = fopen(dir, "w");
	cr_assert_not_null(fp);
	fclose(fp);

	for (int k = 0; k < 3; k++) {
		static const char *const spell[] = { "--node node1", "--node 1", "--node 127.10.0.1" };

		v = run_socket("", spell[k]);
		cr_assert_str_eq(v, sock, "%s", spell[k]);
		free(v);
	}
	v = run_socket("USCM_SOCKET=/tmp/elsewhere.sock", "--node node2");
	cr_assert_str_eq(v, "");
	free(v);
	v = run_socket("", "--no-uscmd --node node1");
	cr_assert_str_eq(v, "", "--no-uscmd: never");
	free(v);

	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' env --dir '%s' --node node1", st_bin(), g_dir), 0);
	snprintf(want, sizeof(want), "export USCM_SOCKET=%s\n", sock);
	cr_assert(strstr(out, want), "%s", out);
	free(out);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' env --dir '%s' --node node2", st_bin(), g_dir), 0);
	cr_assert(strstr(out, "unset USCM_SOCKET\n"), "%s", out);
	free(out);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' env --dir '%s'", st_bin(), g_dir), 0);
	cr_assert_null(strstr(out, "USCM_SOCKET"), "%s", out);
	free(out);
	/* status: a socket without a daemon */
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' status --dir '%s'", st_bin(), g_dir), 0);
	snprintf(want, sizeof(want), "node1   -           not running  socket %s\n", sock);
	cr_assert(strstr(out, want), "%s", out);
	free(out);
}

/* ---- device permissions -------------------------------------------------- */

/* "setpriv --reuid=<nobody> --regid=<its group> --clear-groups", or skip. */
static const char *as_nobody(void)
{
	static char buf[320];
	const char *sp = st_tool("setpriv");
	struct passwd *pw;

	if (geteuid() != 0)
		SKIP("not root: cannot run programs as user nobody");
	if (!sp)
		SKIP_MISSING("setpriv not installed (util-linux)");
	pw = getpwnam("nobody");
	if (!pw)
		SKIP("no user nobody");
	snprintf(buf, sizeof(buf), "%s --reuid=%u --regid=%u --clear-groups", sp, (unsigned)pw->pw_uid,
		 (unsigned)pw->pw_gid);
	return buf;
}

Test(host, fabric_is_open_to_every_user)
{
	char p[PATH_MAX], args[PATH_MAX + 64], *out;
	const char *nb;
	struct stat sb;

	cr_assert_eq(stat(g_dir, &sb), 0);
	cr_assert_eq(sb.st_mode & 0777, 0700, "mkdtemp");
	snprintf(args, sizeof(args), "--nodes 2 --no-uscmd --pcap '%s/cap.pcap'", g_dir);
	free(start(args));
	cr_assert_eq(stat(g_dir, &sb), 0);
	cr_assert_eq(sb.st_mode & 0777, 0755, "the fabric directory: %o", sb.st_mode & 0777);
	snprintf(p, sizeof(p), "%s/fabric.state", g_dir);
	cr_assert_eq(stat(p, &sb), 0);
	cr_assert_eq(sb.st_mode & 0777, 0666, "fabric.state: %o", sb.st_mode & 0777);
	snprintf(p, sizeof(p), "%s/cap.pcap", g_dir);
	cr_assert_eq(stat(p, &sb), 0);
	cr_assert_eq(sb.st_mode & 0777, 0666, "the capture: %o", sb.st_mode & 0777);
	snprintf(p, sizeof(p), "%s/hosts", g_dir);
	cr_assert_eq(stat(p, &sb), 0);
	cr_assert_eq(sb.st_mode & 0004, 0004, "hosts readable by all: %o", sb.st_mode & 0777);

	/* nobody attaches: status, and a program of node1 */
	nb = as_nobody();
	cr_assert_eq(st_sh(&out, "%s '%s/uscm-sim' status --dir '%s' 2>&1", nb, st_bin(), g_dir), 0, "%s", out);
	cr_assert(strstr(out, "node1   127.10.0.1   2      ACTIVE"), "%s", out);
	free(out);
	cr_assert_eq(st_sh(&out, "%s '%s/uscm-sim' run --dir '%s' --node node1 -- sh -c 'id -u' 2>&1", nb, st_bin(),
			   g_dir),
		     0, "%s", out);
	cr_assert_eq(atoi(out), (int)getpwnam("nobody")->pw_uid, "%s", out);
	free(out);
}

Test(host, verbs_as_nobody)
{
	const char *nb, *devinfo = st_tool("ibv_devinfo"), *pp = st_tool("ibv_rc_pingpong");
	char so[] = "/tmp/uscm-simtest-srv.XXXXXX", co[] = "/tmp/uscm-simtest-cli.XXXXXX", port[16];
	char *argv[24], *out, *words, *save = NULL;
	unsigned pn;
	int a = 0, fd, rc, rs;
	pid_t srv, cli;

	if (!devinfo || !pp)
		SKIP_MISSING("ibverbs-utils not installed");
	nb = as_nobody();
	free(start("--nodes 2 --no-uscmd"));
	rc = st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node1 -- %s %s 2>&1", st_bin(), g_dir, nb, devinfo);
	cr_assert_eq(rc, 0, "ibv_devinfo as nobody: %s", out);
	cr_assert(strstr(out, "uscm_node1"), "%s", out);
	cr_assert(strstr(out, "PORT_ACTIVE"), "%s", out);
	free(out);

	/* a pingpong between two nobody processes */
	fd = mkstemp(so);
	close(fd);
	fd = mkstemp(co);
	close(fd);
	pn = st_free_tcp_port();
	snprintf(port, sizeof(port), "%u", pn);
	words = strdup(nb);
	for (char *w = strtok_r(words, " ", &save); w && a < 12; w = strtok_r(NULL, " ", &save))
		argv[a++] = w;
	argv[a++] = (char *)pp;
	argv[a++] = "-p";
	argv[a++] = port;
	argv[a++] = "-n";
	argv[a++] = "200";
	argv[a++] = "-g";
	argv[a++] = "0";
	argv[a] = NULL;
	srv = st_run_bg(g_dir, "node2", so, argv);
	for (int t = 0; t < 10000 && !st_tcp_listening(pn); t += 10) {
		if (waitpid(srv, NULL, WNOHANG) == srv)
			break;
		usleep(10000);
	}
	argv[a] = "127.0.0.1";
	argv[a + 1] = NULL;
	cli = st_run_bg(g_dir, "node1", co, argv);
	rc = st_reap(cli, 60000);
	rs = st_reap(srv, 10000);
	{
		char *c_out = st_slurp(co), *s_out = st_slurp(so);

		unlink(so);
		unlink(co);
		cr_assert(rc == 0 && rs == 0 && strstr(c_out, "200 iters in") && strstr(s_out, "200 iters in"),
			  "ibv_rc_pingpong as nobody: client %d: %s\nserver %d: %s", rc, c_out, rs, s_out);
		free(c_out);
		free(s_out);
	}
	free(words);
}

/* umadN is root's (0600): saquery as nobody fails to open its port, as
 * root it works; ibstat only reads the CA's attributes (sysfs on a real
 * host) and works for everyone. */
Test(host, umad_is_root_only_by_default)
{
	const char *nb, *saquery = st_tool("saquery"), *ibstat = st_tool("ibstat");
	char *out;
	int rc;

	if (!saquery || !ibstat)
		SKIP_MISSING("infiniband-diags not installed");
	nb = as_nobody();
	free(start("--nodes 2 --no-uscmd"));
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' status --dir '%s'", st_bin(), g_dir), 0);
	cr_assert(strstr(out, "umad ports: root only"), "%s", out);
	free(out);
	rc = st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node1 -- %s %s PR --slid 2 --dlid 3 2>&1", st_bin(),
		   g_dir, nb, saquery);
	cr_assert_neq(rc, 0, "saquery as nobody: %s", out);
	cr_assert(strstr(out, "umad_open_port on port"), "%s", out);
	cr_assert(strstr(out, "Permission denied"), "%s", out);
	free(out);
	/* libibumad's own debug line */
	rc = st_sh(&out, "USCM_SIM_UMAD_DEBUG=1 '%s/uscm-sim' run --dir '%s' --node node1 -- %s %s PR 2>&1",
		   st_bin(), g_dir, nb, saquery);
	cr_assert(strstr(out, "umad_open_port: open /dev/infiniband/umad0 failed: Permission denied"), "%s", out);
	free(out);
	rc = st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node1 -- %s PR --slid 2 --dlid 3 2>&1", st_bin(),
		   g_dir, saquery);
	cr_assert_eq(rc, 0, "saquery as root: %s", out);
	cr_assert(strstr(out, "PathRecord dump"), "%s", out);
	free(out);
	rc = st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node1 -- %s %s 2>&1", st_bin(), g_dir, nb, ibstat);
	cr_assert_eq(rc, 0, "ibstat as nobody: %s", out);
	cr_assert(strstr(out, "CA 'uscm_node1'"), "%s", out);
	cr_assert(strstr(out, "State: Active"), "%s", out);
	free(out);
}

Test(host, umad_access_all)
{
	const char *nb, *saquery = st_tool("saquery");
	struct simf *f;
	char *out;
	int rc;

	cr_assert_neq(st_sh(NULL, "'%s/uscm-sim' start --dir '%s' --umad-access bogus 2>/dev/null", st_bin(), g_dir),
		      0);
	free(start("--nodes 2 --no-uscmd --umad-access all"));
	f = attach();
	cr_assert_eq(f->st->umad_access, SIMF_UMAD_ALL);
	simf_detach(f);
	cr_assert_eq(st_sh(&out, "'%s/uscm-sim' status --dir '%s'", st_bin(), g_dir), 0);
	cr_assert(strstr(out, "umad ports: open to every user"), "%s", out);
	free(out);
	if (!saquery)
		SKIP_MISSING("infiniband-diags not installed");
	nb = as_nobody();
	rc = st_sh(&out, "'%s/uscm-sim' run --dir '%s' --node node1 -- %s %s PR --slid 2 --dlid 3 2>&1", st_bin(),
		   g_dir, nb, saquery);
	cr_assert_eq(rc, 0, "saquery as nobody with --umad-access all: %s", out);
	cr_assert(strstr(out, "PathRecord dump"), "%s", out);
	free(out);
}
