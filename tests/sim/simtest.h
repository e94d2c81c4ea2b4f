/* Helpers shared by the sim/ tests: private fabric directories under /tmp,
 * packets, commands. Every fabric a test makes lives in its own mkdtemp
 * directory and uses only 127.0.0.0/8. */
#ifndef USCM_SIMTEST_H
#define USCM_SIMTEST_H

#include "simf.h"
#include "tests/test_fixtures.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline char *st_mkdtemp(void)
{
	char *d = strdup("/tmp/uscm-simtest.XXXXXX");

	cr_assert(d && mkdtemp(d), "mkdtemp");
	return d;
}

/* A fresh fabric directory for one test (st_mkdtemp): the fabric started
 * in it dies with this process (USCM_SIM_WATCH_PID), and nothing inherited
 * from the caller's environment points at another fabric or daemon. */
static inline char *st_fixture_dir(void)
{
	char pid[32], *d = st_mkdtemp();

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("USCM_SIM_WATCH_PID", pid, 1);
	unsetenv("USCM_SIM_DIR");
	unsetenv("USCM_SIM_NODE");
	unsetenv("USCM_SOCKET");
	return d;
}

static inline void st_rmrf(const char *dir)
{
	char cmd[512];

	if (!dir || strncmp(dir, "/tmp/uscm-simtest.", 18) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		return;
}

static inline uint64_t st_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A UD datagram (BTH, DETH, payload, room for the ICRC) of len bytes. */
static inline size_t st_ud_packet(uint8_t *pkt, uint32_t dqp, uint32_t psn, uint32_t qkey,
				  uint32_t sqp, const uint8_t *payload, size_t plen)
{
	struct simf_bth b = { .opcode = SIMF_OP_UD_SEND_ONLY, .pkey = 0xFFFF, .dest_qp = dqp,
			      .psn = psn, .resv8a = SIMF_RESV8A(0, 0) };

	simf_bth_put(pkt, &b);
	pkt[12] = (uint8_t)(qkey >> 24); pkt[13] = (uint8_t)(qkey >> 16);
	pkt[14] = (uint8_t)(qkey >> 8); pkt[15] = (uint8_t)qkey;
	pkt[16] = 0; pkt[17] = (uint8_t)(sqp >> 16); pkt[18] = (uint8_t)(sqp >> 8); pkt[19] = (uint8_t)sqp;
	memcpy(pkt + 20, payload, plen);
	memset(pkt + 20 + plen, 0, 4);
	return 20 + plen + 4;
}

/* Waits up to ms for one datagram; returns its length or -1. */
static inline ssize_t st_recv(struct simf *f, int fd, void *buf, size_t cap, int *src,
			      uint16_t *sport, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, ms) <= 0)
		return -1;
	return simf_recv(f, fd, buf, cap, src, sport);
}

/* Runs a shell command line, returns its exit status (or -1). Output to
 * *out (malloc'd) when out is not NULL. */
#define st_sh tf_sh /* tests/test_fixtures.h */

/* build/bin: USCM_BIN_DIR (CTest sets it), else the build tree this binary
 * was built in (USCM_TEST_BIN_DIR, tests/UscmTest.cmake). */
static inline const char *st_bin(void)
{
	const char *b = getenv("USCM_BIN_DIR");
#ifdef USCM_TEST_BIN_DIR
	return b && *b ? b : USCM_TEST_BIN_DIR;
#else
	return b && *b ? b : "build/bin";
#endif
}

static inline int st_have(const char *prog)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", prog);
	return system(cmd) == 0;
}

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

/* Claims a free transport instance the way uscm-sim does (binding node 0's
 * QP1 address) so unit-test fabrics never collide with parallel ones. The
 * returned fd holds it; close it at the end. */
static inline int st_claim_instance(unsigned *inst)
{
	unsigned h = (unsigned)getpid() % 254;

	for (unsigned k = 0; k < 254; k++) {
		unsigned i = (h + k) % 254 + 1;
		struct sockaddr_in a = { .sin_family = AF_INET };
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

		a.sin_addr.s_addr = htonl(127u << 24 | 77u << 16 | i << 8);
		a.sin_port = htons(simf_qp_port(1));
		if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			*inst = i;
			return fd;
		}
		if (fd >= 0)
			close(fd);
	}
	return -1;
}

/* A suite whose tests make fabric state of their own (simf_create): each
 * test gets a scratch directory and a transport instance claimed for it. */
struct st_scratch {
	char *dir;
	int claim;
	unsigned inst;
};

static inline void st_scratch_open(struct st_scratch *s)
{
	s->dir = st_mkdtemp();
	s->claim = st_claim_instance(&s->inst);
	cr_assert(s->claim >= 0, "no free transport instance");
}

static inline void st_scratch_close(struct st_scratch *s)
{
	if (s->claim >= 0)
		close(s->claim);
	s->claim = -1;
	st_rmrf(s->dir);
	free(s->dir);
	s->dir = NULL;
}

/* chain:2,2 as the LID-routing tests use it: node1,2 on sw1 (node5) ports
 * 1,2; node3,4 on sw2 (node6) ports 1,2; sw1 port 4 - sw2 port 3. CA LIDs
 * 11..14, the switches' port 0 LIDs 15, 16 (simf_set_lid is for CAs). */
static inline void st_chain22_lids(struct simf *f)
{
	for (int i = 1; i <= 4; i++)
		cr_assert_eq(simf_set_lid(f, i, (uint16_t)(10 + i)), 0, "%s", strerror(errno));
	f->st->nodes[5].lid = 15;
	f->st->lft[15] = 6;
	f->st->nodes[6].lid = 16;
	f->st->lft[16] = 7;
}

/* Its LFTs, as an SM would program them: every LID reachable. */
static inline void st_chain22_lfts(struct simf *f)
{
	struct simf_switch *s1 = &f->st->sw[0], *s2 = &f->st->sw[1];

	s1->lft[11] = 1; s1->lft[12] = 2; s1->lft[13] = 4; s1->lft[14] = 4; s1->lft[15] = 0; s1->lft[16] = 4;
	s2->lft[11] = 3; s2->lft[12] = 3; s2->lft[13] = 1; s2->lft[14] = 2; s2->lft[15] = 3; s2->lft[16] = 0;
	s1->lft_top = s2->lft_top = 16;
}

/* A chain:2,2 fabric in scratch s (topology into *t), LIDs and LFTs set. */
static inline struct simf *st_chain22(struct st_scratch *s, struct simf_topo *t)
{
	char err[256];
	struct simf *f;

	cr_assert_eq(simf_topo_generate("chain:2,2", t, err, sizeof(err)), 0, "%s", err);
	f = simf_create(s->dir, SIMF_LINK_IB, t->ncas, s->inst, 1, NULL);
	cr_assert(f, "simf_create: %s", strerror(errno));
	cr_assert_eq(simf_topo_apply(f, t, err, sizeof(err)), 0, "%s", err);
	st_chain22_lids(f);
	st_chain22_lfts(f);
	return f;
}

/* Defines VAR (a struct st_scratch) and the Criterion suite SUITE around it;
 * the optional statements run after the scratch is removed. */
#define ST_SCRATCH_SUITE(suite, var, ...)                                        \
	static struct st_scratch var = { .claim = -1 };                              \
	static void suite##_setup(void)                                              \
	{                                                                            \
		st_scratch_open(&var);                                               \
	}                                                                            \
	static void suite##_teardown(void)                                           \
	{                                                                            \
		st_scratch_close(&var);                                              \
		__VA_ARGS__;                                                         \
	}                                                                            \
	TestSuite(suite, .init = suite##_setup, .fini = suite##_teardown, .timeout = 30)

/* ---- running programs on a fabric (uscm-sim run) -------------------------- */

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>

/* An installed program: /usr/sbin/NAME or /usr/bin/NAME (infiniband-diags
 * puts its tools in sbin, which a non-root PATH may lack), else NULL. */
static inline const char *st_tool(const char *name)
{
	static char buf[8][256];
	static int next;
	const char *dirs[] = { "/usr/sbin", "/usr/bin", "/sbin", "/bin" };

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		char *b = buf[next];

		snprintf(b, sizeof(buf[0]), "%s/%s", dirs[i], name);
		if (access(b, X_OK) == 0) {
			next = (next + 1) % 8;
			return b;
		}
	}
	return NULL;
}

/* Starts `uscm-sim run --dir dir --node node -- argv...` in the background,
 * stdout and stderr into out; it dies with the test (PDEATHSIG). */
static inline pid_t st_run_bg(const char *dir, const char *node, const char *out, char *const argv[])
{
	char sim[512];
	pid_t pid;

	snprintf(sim, sizeof(sim), "%s/uscm-sim", st_bin());
	pid = fork();
	if (pid == 0) {
		char *args[32];
		int n = 0, fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		args[n++] = sim;
		args[n++] = "run";
		args[n++] = "--dir";
		args[n++] = (char *)dir;
		args[n++] = "--node";
		args[n++] = (char *)node;
		args[n++] = "--";
		for (int i = 0; argv[i] && n < 31; i++)
			args[n++] = argv[i];
		args[n] = NULL;
		execv(sim, args);
		_exit(127);
	}
	cr_assert_gt(pid, 0, "fork");
	return pid;
}

/* Waits for pid at most ms, then kills it: its exit status, 128 + signal,
 * or 999 on timeout. */
static inline int st_reap(pid_t pid, int ms)
{
	int st;

	for (int waited = 0;; waited += 10) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		if (r < 0)
			return -1;
		if (waited >= ms) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return 999;
		}
		usleep(10000);
	}
}

/* A file's content (malloc'd, "" when unreadable). */
static inline char *st_slurp(const char *path)
{
	FILE *fp = fopen(path, "r");
	size_t n = 0, cap = 4096;
	char *buf = malloc(cap);

	cr_assert(buf);
	if (fp) {
		size_t k;

		while ((k = fread(buf + n, 1, cap - n - 1, fp)) > 0) {
			n += k;
			if (cap - n < 1024) {
				cap *= 2;
				buf = realloc(buf, cap);
				cr_assert(buf);
			}
		}
		fclose(fp);
	}
	buf[n] = 0;
	return buf;
}

/* Is a TCP socket listening on port (IPv4 or IPv6, any address)? */
static inline int st_tcp_listening(unsigned port)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	char line[512], la[80], ra[80];
	unsigned state;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		FILE *fp = fopen(files[i], "r");

		if (!fp)
			continue;
		while (fgets(line, sizeof(line), fp)) {
			const char *c;

			if (sscanf(line, " %*d: %79s %79s %x", la, ra, &state) != 3 || state != 0x0A)
				continue;
			c = strrchr(la, ':');
			if (c && strtoul(c + 1, NULL, 16) == port) {
				fclose(fp);
				return 1;
			}
		}
		fclose(fp);
	}
	return 0;
}

/* A TCP port nobody listens on now (for a program's side channel). */
static inline unsigned st_free_tcp_port(void)
{
	static unsigned seq;

	for (int k = 0; k < 1000; k++) {
		unsigned p = 20000u + ((unsigned)getpid() * 37u + seq++ * 7919u) % 30000u;

		if (!st_tcp_listening(p))
			return p;
	}
	return 20000u + (unsigned)getpid() % 30000u;
}

/* One ibv_*_pingpong run on fabric dir: server on node2, client on node1
 * (TCP side channel on 127.0.0.1), -g 0, iters iterations, extra arguments
 * (NULL-terminated list). 0 when both succeed; else a message in *why
 * (malloc'd). */
static inline int st_pingpong_once(const char *dir, const char *tool, int iters,
				   const char *const *extra, char **why, int *port_taken)
{
	char so[] = "/tmp/uscm-simtest-srv.XXXXXX", co[] = "/tmp/uscm-simtest-cli.XXXXXX";
	char port[16], n[16];
	char *sargv[24], *cargv[24];
	unsigned pn = st_free_tcp_port();
	int fd, a = 0, rs, rc;
	pid_t srv, cli;
	char *s_out, *c_out;

	fd = mkstemp(so);
	close(fd);
	fd = mkstemp(co);
	close(fd);
	snprintf(port, sizeof(port), "%u", pn);
	snprintf(n, sizeof(n), "%d", iters);
	sargv[a] = cargv[a] = (char *)tool, a++;
	sargv[a] = cargv[a] = "-p", a++;
	sargv[a] = cargv[a] = port, a++;
	sargv[a] = cargv[a] = "-n", a++;
	sargv[a] = cargv[a] = n, a++;
	sargv[a] = cargv[a] = "-g", a++;
	sargv[a] = cargv[a] = "0", a++;
	for (int i = 0; extra && extra[i] && a < 20; i++)
		sargv[a] = cargv[a] = (char *)extra[i], a++;
	sargv[a] = NULL;
	cargv[a] = "127.0.0.1";
	cargv[a + 1] = NULL;
	srv = st_run_bg(dir, "node2", so, sargv);
	for (int t = 0; t < 10000 && !st_tcp_listening(pn); t += 10) {
		if (waitpid(srv, NULL, WNOHANG) == srv)
			break;
		usleep(10000);
	}
	cli = st_run_bg(dir, "node1", co, cargv);
	rc = st_reap(cli, 60000);
	rs = st_reap(srv, 10000);
	s_out = st_slurp(so);
	c_out = st_slurp(co);
	unlink(so);
	unlink(co);
	*port_taken = strstr(s_out, "Couldn't listen to port") != NULL;
	if (rc || rs || !strstr(c_out, " iters in ") || !strstr(s_out, " iters in ")) {
		if (why) {
			size_t len = strlen(tool) + strlen(c_out) + strlen(s_out) + 64;

			*why = malloc(len);
			if (*why)
				snprintf(*why, len, "%s: client %d: %s\nserver %d: %s", tool, rc, c_out, rs, s_out);
		}
		free(s_out);
		free(c_out);
		return -1;
	}
	free(s_out);
	free(c_out);
	return 0;
}

/* The side channel's port is picked free, but a test running in parallel
 * can take it before the server binds it: then try another. */
static inline int st_pingpong(const char *dir, const char *tool, int iters, const char *const *extra,
			      char **why)
{
	int rc = -1, taken = 0;

	for (int attempt = 0; attempt < 4; attempt++) {
		if (why && attempt) {
			free(*why);
			*why = NULL;
		}
		rc = st_pingpong_once(dir, tool, iters, extra, why, &taken);
		if (!taken)
			break;
	}
	return rc;
}

#endif
