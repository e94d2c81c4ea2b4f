/*
 * The simulated fabric's drop-in libibumad.so.3 (sim/umad/), end to end: each
 * test starts its own fabric with `uscm-sim start` (3 nodes, IB), runs the
 * umad side in child processes attached as node1/node2/... (the test process
 * itself attaches to no node, so `uscm-sim stop` in the teardown kills every
 * child left), and stops the fabric.
 *
 * This executable links the sim's libibumad.so.3 (not Debian's) and simf.
 * USCM_BIN_DIR names the directory of uscm-sim (default build/bin).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <infiniband/umad.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sim/simf.h"
#include "tests/test_skip.h"

#define UHDR ((int)sizeof(struct ib_user_mad))
#define QP1_QKEY 0x80010000u

/* ---- the fabric ------------------------------------------------------------ */

static char g_dir[256];
static char g_sim[512];
static int g_up;
static struct simf *g_f;

static void sim_path(void)
{
	const char *b = getenv("USCM_BIN_DIR");

	snprintf(g_sim, sizeof(g_sim), "%s/uscm-sim", b && *b ? b : "build/bin");
}

static void drain(int fd, char *out, size_t cap, size_t *len)
{
	char tmp[4096];
	ssize_t r;

	while ((r = read(fd, tmp, sizeof(tmp))) > 0) {
		if (out && *len + 1 < cap) {
			size_t k = (size_t)r < cap - 1 - *len ? (size_t)r : cap - 1 - *len;

			memcpy(out + *len, tmp, k);
			*len += k;
		}
	}
}

/* Runs argv (environment plus env_add), its output into out, for at most
 * timeout_s: its exit status, or -1. Returns when the command exits, even
 * if a daemon it started keeps the output pipe open. */
static int run_cmd(char *const argv[], char **env_add, char *out, size_t cap, int timeout_s)
{
	int p[2], st = 0, done = 0;
	size_t len = 0;
	pid_t pid;
	int64_t end;
	struct timespec ts;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	end = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + timeout_s * 1000;
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		for (int i = 0; env_add && env_add[i]; i++)
			putenv(env_add[i]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	fcntl(p[0], F_SETFL, O_NONBLOCK);
	while (!done) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };

		poll(&pf, 1, 50);
		drain(p[0], out, cap, &len);
		if (waitpid(pid, &st, WNOHANG) == pid) {
			done = 1;
		} else {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			if ((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 > end) {
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
				st = -1;
				done = 1;
			}
		}
	}
	drain(p[0], out, cap, &len);
	if (out && cap)
		out[len] = 0;
	close(p[0]);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void fabric_up_link(const char *link, const char *nodes)
{
	char out[4096], dir[sizeof(g_dir)] = "/tmp/uscm-umad-test.XXXXXX", watch[64];
	char *env[] = { watch, NULL };
	/* no uscmd: the tests' own processes are the nodes' MAD programs */
	char *argv[] = { g_sim, "start", "--dir", g_dir, "--nodes", (char *)nodes, "--link", (char *)link,
			 "--no-uscmd", NULL };

	sim_path();
	if (access(g_sim, X_OK) != 0 || !mkdtemp(dir))
		return;
	snprintf(g_dir, sizeof(g_dir), "%s", dir);
	/* The SM exits (and removes the directory) if this process dies
	 * before its .fini stops the fabric. */
	snprintf(watch, sizeof(watch), "USCM_SIM_WATCH_PID=%d", (int)getpid());
	if (run_cmd(argv, env, out, sizeof(out), 30) != 0) {
		fprintf(stderr, "uscm-sim start failed:\n%s\n", out);
		return;
	}
	setenv("USCM_SIM_DIR", g_dir, 1);
	unsetenv("USCM_SIM_NODE");
	g_f = simf_attach_node(g_dir, -1);
	g_up = g_f != NULL;
}

static void fabric_down(void)
{
	char *argv[] = { g_sim, "stop", "--dir", g_dir, NULL };

	if (g_dir[0] && access(g_sim, X_OK) == 0)
		run_cmd(argv, NULL, NULL, 0, 30);
	if (g_dir[0])
		nftw(g_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	g_up = 0;
}

/* Started by the test body (not by .init: a test Criterion filters out
 * must not leave a fabric behind); .fini stops it. */
#define NEED_FABRIC_LINK(link, nodes)                                                          \
	do {                                                                                   \
		fabric_up_link((link), (nodes));                                               \
		if (!g_up)                                                                     \
			tf_skip_missing("no fabric: %s missing or `uscm-sim start` failed", g_sim); \
	} while (0)

#define NEED_FABRIC() NEED_FABRIC_LINK("ib", "3")

TestSuite(sim_umad, .fini = fabric_down, .timeout = 60);

static uint16_t lid_of(int n) { return g_f->st->nodes[n].lid; }

/* ---- child processes --------------------------------------------------------- */

struct cenv {
	int ready;              /* write a byte when ready */
	int go;                 /* read a byte to continue */
	const void *arg;
};

struct child {
	pid_t pid;
	int msg, ready, go;
};

static int g_msg = -1;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char b[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (n > 0 && g_msg >= 0 && write(g_msg, b, (size_t)n < sizeof(b) ? (size_t)n : sizeof(b) - 1) < 0)
		_exit(99);
}

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			say("line %d: %s: ", __LINE__, #cond);             \
			say(__VA_ARGS__);                                  \
			say("\n");                                         \
			return 1;                                          \
		}                                                          \
	} while (0)

static void c_ready(const struct cenv *e)
{
	if (write(e->ready, "r", 1) != 1)
		_exit(98);
}

static void c_wait_go(const struct cenv *e)
{
	char c;

	if (read(e->go, &c, 1) != 1)
		_exit(97);
}

static struct child spawn(const char *node, int (*fn)(const struct cenv *), const void *arg)
{
	int m[2], r[2], g[2];
	struct child c = { .pid = -1 };

	if (pipe(m) < 0 || pipe(r) < 0 || pipe(g) < 0)
		return c;
	c.pid = fork();
	if (c.pid == 0) {
		struct cenv e = { .ready = r[1], .go = g[0], .arg = arg };

		close(m[0]);
		close(r[0]);
		close(g[1]);
		setenv("USCM_SIM_NODE", node, 1);
		g_msg = m[1];
		_exit(fn(&e));
	}
	close(m[1]);
	close(r[1]);
	close(g[0]);
	c.msg = m[0];
	c.ready = r[0];
	c.go = g[1];
	return c;
}

static int child_ready(struct child *c, int ms)
{
	struct pollfd p = { .fd = c->ready, .events = POLLIN };
	char b;

	return poll(&p, 1, ms) == 1 && read(c->ready, &b, 1) == 1 ? 0 : -1;
}

static void child_go(struct child *c)
{
	if (write(c->go, "g", 1) != 1)
		perror("child_go");
}

/* Exit status of the child (-1: killed after ms), its messages in msg. */
static int child_wait(struct child *c, int ms, char *msg, size_t cap)
{
	int st = 0, waited = 0;
	ssize_t n;
	size_t len = 0;

	while (waitpid(c->pid, &st, WNOHANG) == 0) {
		if (waited >= ms) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &st, 0);
			st = -1;
			break;
		}
		usleep(10000);
		waited += 10;
	}
	while (cap && len + 1 < cap && (n = read(c->msg, msg + len, cap - 1 - len)) > 0)
		len += (size_t)n;
	if (cap)
		msg[len] = 0;
	close(c->msg);
	close(c->ready);
	close(c->go);
	if (st == -1 || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

#define EXPECT_READY(c, ms, name)                                                      \
	do {                                                                           \
		if (child_ready(&(c), (ms)) != 0) {                                    \
			char _m[4096];                                                 \
			int _rc = child_wait(&(c), 1000, _m, sizeof(_m));              \
			cr_assert_fail("%s not ready (%d): %s", (name), _rc, _m);      \
		}                                                                      \
	} while (0)

#define EXPECT_CHILD_OK(c, ms, name)                                                   \
	do {                                                                           \
		char _m[4096];                                                         \
		int _rc = child_wait(&(c), (ms), _m, sizeof(_m));                      \
		cr_assert_eq(_rc, 0, "%s failed (%d): %s", (name), _rc, _m);           \
	} while (0)

/* ---- MAD helpers ---------------------------------------------------------------- */

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}
static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}
static uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }

struct ubuf {
	struct ib_user_mad h;
	uint8_t mad[2048];
};

static uint8_t *mk_mad(struct ubuf *u, uint8_t cls, uint8_t ver, uint8_t method, uint16_t attr, uint64_t tid)
{
	uint8_t *m = umad_get_mad(u);

	memset(u, 0, sizeof(*u));
	m[0] = 1;
	m[1] = cls;
	m[2] = ver;
	m[3] = method;
	put64(m + 8, tid);
	m[16] = (uint8_t)(attr >> 8);
	m[17] = (uint8_t)attr;
	return m;
}

static void mask_set(long *mask, int method)
{
	mask[method / (8 * (int)sizeof(long))] |= 1L << (method % (8 * (int)sizeof(long)));
}

static int64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The drop-in's direct mode (sim/umad/README.md): a port whose fd the
 * caller asked for with umad_get_fd. The tests that set g_direct before
 * spawning run their children's ports in it; the others never call
 * umad_get_fd (or turn direct mode off) and see the kernel's behaviour. */
static int g_direct;

/* umad_open_port, in direct mode when g_direct says so. */
static int open_port(void)
{
	int fd = umad_open_port(NULL, 0);

	if (fd >= 0 && g_direct) {
		int d = umad_get_fd(fd);

		if (d < 0 || d == fd || umad_get_fd(fd) != d) {
			umad_close_port(fd);
			return -1;
		}
	}
	return fd;
}

/* Opens the port and registers (class, version) for the given methods. */
static int open_reg(int *fd, uint8_t cls, uint8_t ver, const int *methods, int nm)
{
	long mask[16 / sizeof(long)] = { 0 };

	*fd = open_port();
	if (*fd < 0)
		return -1;
	for (int i = 0; i < nm; i++)
		mask_set(mask, methods[i]);
	return umad_register(*fd, cls, ver, 0, nm ? mask : NULL);
}

/* ---- device and port attributes ------------------------------------------------- */

struct ca_expect {
	uint64_t guid;
	uint16_t lid, sm_lid;
};

static int ca_child(const struct cenv *e)
{
	const struct ca_expect *x = e->arg;
	char names[4][UMAD_CA_NAME_LEN];
	__be64 guids[8];
	umad_ca_t ca;
	umad_port_t port;
	struct umad_device_node *dl;
	char path[256];

	CHECK(umad_init() == 0, "umad_init");
	CHECK(umad_get_cas_names(names, 4) == 1, "one CA");
	CHECK(!strcmp(names[0], "uscm_node1"), "name %s", names[0]);
	CHECK(umad_get_ca(NULL, &ca) == 0, "get_ca(NULL)");
	CHECK(!strcmp(ca.ca_name, "uscm_node1"), "ca_name %s", ca.ca_name);
	CHECK(ca.node_type == 1 && ca.numports == 1, "type %u ports %d", ca.node_type, ca.numports);
	CHECK(be64toh(ca.node_guid) == x->guid, "node guid 0x%llx", (unsigned long long)be64toh(ca.node_guid));
	CHECK(ca.ports[0] == NULL && ca.ports[1] != NULL, "ports[]");
	CHECK(ca.ports[1]->base_lid == x->lid, "base lid %u != %u", ca.ports[1]->base_lid, x->lid);
	CHECK(ca.ports[1]->state == 4 && ca.ports[1]->phys_state == 5, "state %u phys %u", ca.ports[1]->state,
	      ca.ports[1]->phys_state);
	CHECK(umad_release_ca(&ca) == 0, "release_ca");
	CHECK(umad_get_ca("uscm_node1", &ca) == 0, "get_ca(name)");
	umad_release_ca(&ca);
	CHECK(umad_get_ca("mlx5_0", &ca) == -ENODEV, "unknown CA");

	CHECK(umad_get_port(NULL, 0, &port) == 0, "get_port");
	CHECK(port.portnum == 1 && port.base_lid == x->lid && port.sm_lid == x->sm_lid && port.lmc == 0,
	      "port %d lid %u sm %u", port.portnum, port.base_lid, port.sm_lid);
	CHECK(!strcmp(port.link_layer, "InfiniBand"), "link layer %s", port.link_layer);
	CHECK(be64toh(port.port_guid) == x->guid, "port guid");
	CHECK(be64toh(port.gid_prefix) == 0xfe80000000000000ull, "gid prefix");
	CHECK(port.pkeys_size >= 1 && port.pkeys[0] == 0xFFFF, "pkey[0] 0x%x", port.pkeys ? port.pkeys[0] : 0);
	CHECK(umad_release_port(&port) == 0 && port.pkeys == NULL, "release_port");
	CHECK(umad_get_port("uscm_node1", 2, &port) < 0, "port 2");

	CHECK(umad_get_ca_portguids(NULL, guids, 8) == 2, "portguids");
	CHECK(guids[0] == 0 && be64toh(guids[1]) == x->guid, "portguids values");
	CHECK(umad_get_ca_portguids(NULL, guids, 1) == -ENOMEM, "portguids max");

	dl = umad_get_ca_device_list();
	CHECK(dl && !dl->next && !strcmp(dl->ca_name, "uscm_node1"), "device list");
	CHECK(umad_sort_ca_device_list(&dl, 0) == 0, "sort");
	umad_free_ca_device_list(dl);
	CHECK(umad_get_issm_path(NULL, 1, path, sizeof(path)) == 0, "issm path");
	CHECK(umad_size() == 64, "umad_size %zu", umad_size());
	return 0;
}

Test(sim_umad, ca_and_port_attributes)
{
	struct ca_expect x;
	struct child c;

	NEED_FABRIC();
	x.guid = g_f->st->nodes[1].guid;
	x.lid = lid_of(1);
	x.sm_lid = g_f->st->nodes[1].sm_lid;
	cr_assert(x.lid != 0);
	c = spawn("node1", ca_child, &x);
	EXPECT_CHILD_OK(c, 10000, "node1");
}

/* ---- CM MADs between two nodes ---------------------------------------------------- */

struct cm_arg {
	uint16_t lid1, lid2;
};

static int cm_passive(const struct cenv *e)
{
	const struct cm_arg *a = e->arg;
	static const int send_m[] = { 0x03 };
	struct ubuf u, r;
	uint8_t *m;
	int fd, ag, len = 256, got;

	ag = open_reg(&fd, 0x07, 2, send_m, 1);
	CHECK(ag >= 0, "register CM agent: %d", ag);
	c_ready(e);
	got = umad_recv(fd, &u, &len, 5000);
	CHECK(got == ag, "umad_recv %d (%s)", got, strerror(errno));
	m = umad_get_mad(&u);
	CHECK(len == 256, "len %d", len);
	CHECK(m[1] == 0x07 && m[2] == 2 && m[3] == 0x03 && get16(m + 16) == 0x0010, "REQ header");
	CHECK((get64(m + 8) & 0xFFFFFFFF) == 0x1234abcd, "TID low half kept");
	CHECK((get64(m + 8) >> 32) != 0, "TID upper half set by the sender's MAD layer");
	CHECK(m[100] == 0x5a, "payload");
	CHECK(be16toh(u.h.addr.lid) == a->lid1, "source lid %u", be16toh(u.h.addr.lid));
	CHECK(be32toh(u.h.addr.qpn) == 1 && u.h.addr.pkey_index == 0, "qpn %u pkey_index %u",
	      be32toh(u.h.addr.qpn), u.h.addr.pkey_index);
	CHECK(u.h.addr.sl == 3 && u.h.addr.grh_present == 0, "sl %u grh %u", u.h.addr.sl, u.h.addr.grh_present);
	CHECK(umad_status(&u) == 0, "status");

	m = mk_mad(&r, 0x07, 2, 0x03, 0x0013, get64(umad_get_mad(&u) + 8));
	r.h.addr = u.h.addr; /* answer where it came from */
	CHECK(umad_send(fd, ag, &r, 256, 0, 0) == 0, "send REP: %s", strerror(errno));
	/* The REP's sender must not see its own MAD. */
	len = 256;
	CHECK(umad_recv(fd, &u, &len, 200) == -ETIMEDOUT, "nothing else");
	umad_close_port(fd);
	return 0;
}

static int cm_active(const struct cenv *e)
{
	const struct cm_arg *a = e->arg;
	static const int send_m[] = { 0x03 };
	struct ubuf u;
	uint8_t *m;
	int fd, ag, len = 256, got;

	ag = open_reg(&fd, 0x07, 2, send_m, 1);
	CHECK(ag >= 0, "register CM agent: %d", ag);
	m = mk_mad(&u, 0x07, 2, 0x03, 0x0010, 0x1234abcd);
	m[100] = 0x5a;
	umad_set_addr(&u, a->lid2, 1, 3, QP1_QKEY);
	CHECK(umad_send(fd, ag, &u, 256, 0, 0) == 0, "send REQ: %s", strerror(errno));
	got = umad_recv(fd, &u, &len, 5000);
	CHECK(got == ag, "umad_recv %d (%s)", got, strerror(errno));
	m = umad_get_mad(&u);
	CHECK(m[3] == 0x03 && get16(m + 16) == 0x0013, "REP: method 0x%x attr 0x%x", m[3], get16(m + 16));
	CHECK(be16toh(u.h.addr.lid) == a->lid2, "REP from lid %u", be16toh(u.h.addr.lid));
	umad_close_port(fd);
	return 0;
}

Test(sim_umad, cm_mads_between_two_nodes)
{
	struct cm_arg a;
	struct child p, c;

	NEED_FABRIC();
	a.lid1 = lid_of(1);
	a.lid2 = lid_of(2);
	p = spawn("node2", cm_passive, &a);
	EXPECT_READY(p, 5000, "passive side not ready");
	c = spawn("node1", cm_active, &a);
	EXPECT_CHILD_OK(c, 10000, "active side (node1)");
	EXPECT_CHILD_OK(p, 10000, "passive side (node2)");
}

/* ---- responses find their agent by TID -------------------------------------------- */

static int echo_server(const struct cenv *e)
{
	const int *count = e->arg;
	static const int get_m[] = { 0x01 };
	uint64_t his[8];
	struct ubuf q[8];
	int fd, ag, n;

	ag = open_reg(&fd, 0x09, 1, get_m, 1);
	CHECK(ag >= 0, "register: %d", ag);
	c_ready(e);
	/* Collect all the requests first, then answer them all. */
	for (n = 0; n < *count; n++) {
		int len = 256;

		CHECK(umad_recv(fd, &q[n], &len, 5000) == ag, "request %d: %s", n, strerror(errno));
		his[n] = get64(umad_get_mad(&q[n]) + 8) >> 32;
		for (int k = 0; k < n; k++)
			CHECK(his[k] != his[n], "two agents with one hi_tid 0x%llx", (unsigned long long)his[n]);
	}
	for (n = 0; n < *count; n++) {
		uint8_t *m = umad_get_mad(&q[n]);

		m[3] = 0x81;
		m[200] = (uint8_t)n;
		CHECK(umad_send(fd, ag, &q[n], 256, 0, 0) == 0, "respond: %s", strerror(errno));
	}
	umad_close_port(fd);
	return 0;
}

static int two_agents(const struct cenv *e)
{
	const struct cm_arg *a = e->arg;
	struct ubuf u;
	int fda, fdb, a0, a1, b0, len, seen = 0;

	fda = umad_open_port(NULL, 0);
	fdb = umad_open_port("uscm_node1", 1);
	CHECK(fda >= 0 && fdb >= 0, "open");
	a0 = umad_register(fda, 0x09, 1, 0, NULL);
	a1 = umad_register(fda, 0x09, 1, 0, NULL);
	b0 = umad_register(fdb, 0x09, 1, 0, NULL);
	CHECK(a0 == 0 && a1 == 1 && b0 == 0, "agents %d %d %d", a0, a1, b0);

	mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x55);
	umad_set_addr(&u, a->lid2, 1, 0, QP1_QKEY);
	CHECK(umad_send(fda, a0, &u, 256, 3000, 0) == 0, "send a0");
	/* The same TID again from the same agent while outstanding: EINVAL. */
	mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x55);
	umad_set_addr(&u, a->lid2, 1, 0, QP1_QKEY);
	CHECK(umad_send(fda, a0, &u, 256, 3000, 0) == -EIO && errno == EINVAL, "duplicate TID: errno %d", errno);
	mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x55);
	umad_set_addr(&u, a->lid2, 1, 0, QP1_QKEY);
	CHECK(umad_send(fda, a1, &u, 256, 3000, 0) == 0, "send a1");
	mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x55);
	umad_set_addr(&u, a->lid2, 1, 0, QP1_QKEY);
	CHECK(umad_send(fdb, b0, &u, 256, 3000, 0) == 0, "send b0");
	CHECK(umad_send(fda, 7, &u, 256, 0, 0) == -EIO && errno == EIO, "unregistered agent: errno %d", errno);
	CHECK(umad_send(fda, 40, &u, 256, 0, 0) == -EIO && errno == EINVAL, "agent id >= 32: errno %d", errno);

	for (int i = 0; i < 2; i++) {
		int got;

		len = 256;
		got = umad_recv(fda, &u, &len, 3000);
		CHECK(got == 0 || got == 1, "response on fd A: %d (%s)", got, strerror(errno));
		CHECK(!(seen & (1 << got)), "agent %d answered twice", got);
		seen |= 1 << got;
		CHECK(umad_status(&u) == 0 && ((uint8_t *)umad_get_mad(&u))[3] == 0x81, "GetResp");
		CHECK((get64((uint8_t *)umad_get_mad(&u) + 8) & 0xFFFFFFFF) == 0x55, "TID low half");
		CHECK(get64((uint8_t *)umad_get_mad(&u) + 8) >> 32, "TID upper half as rewritten (not restored)");
	}
	len = 256;
	CHECK(umad_recv(fdb, &u, &len, 3000) == 0, "response on fd B");
	len = 256;
	CHECK(umad_recv(fda, &u, &len, 300) == -ETIMEDOUT, "nothing more on A");
	len = 256;
	CHECK(umad_recv(fdb, &u, &len, 100) == -ETIMEDOUT, "nothing more on B");
	umad_close_port(fda);
	umad_close_port(fdb);
	return 0;
}

Test(sim_umad, responses_routed_by_tid)
{
	static const int three = 3;
	struct cm_arg a;
	struct child s, c;

	NEED_FABRIC();
	a.lid1 = lid_of(1);
	a.lid2 = lid_of(2);
	s = spawn("node2", echo_server, &three);
	EXPECT_READY(s, 5000, "server not ready");
	c = spawn("node1", two_agents, &a);
	EXPECT_CHILD_OK(c, 15000, "requester (node1)");
	EXPECT_CHILD_OK(s, 15000, "responder (node2)");
}

/* ---- one agent per (class, version, method) per port ------------------------------------ */

static int reg_first(const struct cenv *e)
{
	long send_mask[16 / sizeof(long)] = { 0 }, get_mask[16 / sizeof(long)] = { 0 };
	struct umad_reg_attr at;
	uint32_t id;
	int fd1, fd2, r1, r;

	mask_set(send_mask, 0x03);
	mask_set(get_mask, 0x01);
	fd1 = umad_open_port(NULL, 0);
	fd2 = umad_open_port(NULL, 0);
	CHECK(fd1 >= 0 && fd2 >= 0, "open");
	r1 = umad_register(fd1, 0x07, 2, 0, send_mask);
	CHECK(r1 == 0, "first registration %d", r1);
	r = umad_register(fd2, 0x07, 2, 0, send_mask);
	CHECK(r == -EPERM && errno == EINVAL, "second on another fd: %d errno %d", r, errno);
	r = umad_register(fd1, 0x07, 2, 0, send_mask);
	CHECK(r == -EPERM && errno == EINVAL, "second on the same fd: %d errno %d", r, errno);
	memset(&at, 0, sizeof(at));
	at.mgmt_class = 0x07;
	at.mgmt_class_version = 2;
	at.method_mask[0] = 1u << 3;
	CHECK(umad_register2(fd2, &at, &id) == EINVAL, "register2 duplicate");
	CHECK(umad_register(fd2, 0x07, 2, 0, get_mask) >= 0, "another method of the class");
	CHECK(umad_register(fd2, 0x07, 1, 0, send_mask) >= 0, "another class version");
	CHECK(umad_register(fd2, 0x00, 0, 0, NULL) >= 0, "send-only agent (class 0)");
	CHECK(umad_register(fd2, 0x51, 1, 0, NULL) == -EPERM && errno == EINVAL, "class 0x51");
	CHECK(umad_register(fd2, 0x07, 8, 0, NULL) == -EPERM && errno == EINVAL, "class version 8");
	CHECK(umad_register_oui(fd2, 0x07, 0, (uint8_t[3]){ 0, 0x14, 0x05 }, NULL) == -EINVAL, "oui class");
	CHECK(umad_unregister(fd2, 31) == -1 && errno == EINVAL, "unregister unknown");
	at.flags = 0x80;
	CHECK(umad_register2(fd2, &at, &id) == EINVAL, "register2 unknown flag");
	c_ready(e);
	c_wait_go(e);
	/* Gone with umad_unregister: the next registration succeeds. */
	CHECK(umad_unregister(fd1, r1) == 0, "unregister");
	CHECK(umad_register(fd2, 0x07, 2, 0, send_mask) >= 0, "after unregister");
	umad_close_port(fd2);
	/* ... and with umad_close_port. */
	CHECK(umad_register(fd1, 0x07, 2, 0, send_mask) >= 0, "after close_port");
	umad_close_port(fd1);
	return 0;
}

static int reg_other_process(const struct cenv *e)
{
	const int *expect_ok = e->arg;
	long send_mask[16 / sizeof(long)] = { 0 };
	int fd, r;

	mask_set(send_mask, 0x03);
	fd = umad_open_port(NULL, 0);
	CHECK(fd >= 0, "open");
	r = umad_register(fd, 0x07, 2, 0, send_mask);
	if (*expect_ok)
		CHECK(r >= 0, "registration on another node: %d", r);
	else
		CHECK(r == -EPERM && errno == EINVAL, "same node, other process: %d errno %d", r, errno);
	umad_close_port(fd);
	return 0;
}

static int reg_many(const struct cenv *e)
{
	int fd = umad_open_port(NULL, 0), i;

	(void)e;
	CHECK(fd >= 0, "open");
	for (i = 0; i < 32; i++)
		CHECK(umad_register(fd, 0, 0, 0, NULL) == i, "agent %d", i);
	CHECK(umad_register(fd, 0, 0, 0, NULL) == -EPERM && errno == ENOMEM, "33rd agent: errno %d", errno);
	umad_close_port(fd);
	return 0;
}

Test(sim_umad, duplicate_registration_fails)
{
	static const int no = 0, yes = 1;
	struct child first, other, remote, many;

	NEED_FABRIC();
	first = spawn("node1", reg_first, NULL);
	EXPECT_READY(first, 5000, "first registrant not ready");
	other = spawn("node1", reg_other_process, &no);
	EXPECT_CHILD_OK(other, 10000, "second process on node1");
	remote = spawn("node2", reg_other_process, &yes);
	EXPECT_CHILD_OK(remote, 10000, "process on node2");
	child_go(&first);
	EXPECT_CHILD_OK(first, 10000, "first registrant");
	many = spawn("node3", reg_many, NULL);
	EXPECT_CHILD_OK(many, 10000, "32 agents");
}

/* ---- send timeouts and retries ---------------------------------------------------------------- */

static int silent_server(const struct cenv *e)
{
	static const int get_m[] = { 0x01 };
	struct ubuf u;
	int fd, ag, n = 0;
	int64_t end;

	ag = open_reg(&fd, 0x09, 1, get_m, 1);
	CHECK(ag >= 0, "register");
	c_ready(e);
	end = ms_now() + 2500;
	while (ms_now() < end) {
		int len = 256;

		if (umad_recv(fd, &u, &len, (int)(end - ms_now()) + 1) == ag)
			n++;
	}
	say("count=%d", n);
	return n == 3 ? 0 : 1;
}

/* A thread asleep in umad_recv(fd, …, 3000): what it got, and when. */
struct sleeper {
	int fd, got, status;
	int64_t dt;
};

static void *sleeper_main(void *arg)
{
	struct sleeper *s = arg;
	struct ubuf u;
	int len = 256;
	int64_t t0 = ms_now();

	memset(&u, 0, sizeof(u));
	s->got = umad_recv(s->fd, &u, &len, 3000);
	s->status = umad_status(&u);
	s->dt = ms_now() - t0;
	return NULL;
}

static int timeout_client(const struct cenv *e)
{
	const struct cm_arg *a = e->arg;
	struct ubuf u;
	uint8_t *m;
	int fd, ag, len = 256, got;
	int64_t t0, dt;

	fd = open_port();
	CHECK(fd >= 0, "open");
	ag = umad_register(fd, 0x09, 1, 0, NULL);
	CHECK(ag >= 0, "register");

	/* Served but never answered: 3 sends (1 + 2 retries) of 200 ms. */
	mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x777);
	umad_set_addr(&u, a->lid2, 1, 0, QP1_QKEY);
	t0 = ms_now();
	CHECK(umad_send(fd, ag, &u, 256, 200, 2) == 0, "send");
	memset(&u, 0, sizeof(u));
	got = umad_recv(fd, &u, &len, 5000);
	dt = ms_now() - t0;
	CHECK(got == ag, "umad_recv %d (%s)", got, strerror(errno));
	CHECK(umad_status(&u) == ETIMEDOUT, "status %d", umad_status(&u));
	CHECK(len == 24, "a timed-out send comes back with its MAD header only (len %d)", len);
	m = umad_get_mad(&u);
	CHECK((get64(m + 8) & 0xFFFFFFFF) == 0x777 && get16(m + 16) == 0x0042, "the send's header");
	CHECK(dt >= 550 && dt < 1500, "timed out after %lld ms, expected ~600", (long long)dt);
	say("elapsed=%lld ", (long long)dt);

	/* Nobody serves class 0x09 on node3: its MAD layer answers a Get
	 * with status 0x000C at once. */
	mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x778);
	umad_set_addr(&u, a->lid1 /* node3's lid passed here */, 1, 0, QP1_QKEY);
	t0 = ms_now();
	CHECK(umad_send(fd, ag, &u, 256, 1000, 0) == 0, "send to node3");
	len = 256;
	got = umad_recv(fd, &u, &len, 2000);
	CHECK(got == ag && umad_status(&u) == 0, "unserved Get: %d status %d", got, umad_status(&u));
	m = umad_get_mad(&u);
	CHECK(m[3] == 0x81 && get16(m + 4) == 0x000C, "GetResp 0x%x status 0x%04x", m[3], get16(m + 4));
	CHECK(ms_now() - t0 < 500, "answered at once");

	/* A LID nobody has: the MAD is lost, the send times out. */
	mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x779);
	umad_set_addr(&u, 0x99, 1, 0, QP1_QKEY);
	t0 = ms_now();
	CHECK(umad_send(fd, ag, &u, 256, 100, 0) == 0, "send to nowhere");
	len = 256;
	got = umad_recv(fd, &u, &len, 2000);
	CHECK(got == ag && umad_status(&u) == ETIMEDOUT, "lost MAD times out");
	dt = ms_now() - t0;
	/* in direct mode umad_recv sleeps in the socket's recvfrom: the
	 * timeout record (queued on the fd) must wake it, not its 2 s */
	CHECK(dt >= 90 && dt < 1000, "not before its time, nor at umad_recv's: %lld ms", (long long)dt);

	/* Two threads asleep in umad_recv on the port, two lost MADs: each
	 * ETIMEDOUT record wakes one of them (in direct mode each sleeps in
	 * the socket's recvfrom and a record queued on the fd wakes one), so
	 * neither waits out its 3 s. */
	{
		struct sleeper sl[2] = { { .fd = fd }, { .fd = fd } };
		pthread_t th[2];

		/* nothing left on the port (in direct mode: from now on the
		 * fd is known empty, the sleepers sleep in the recvfrom) */
		len = 256;
		CHECK(umad_recv(fd, &u, &len, 0) == -EAGAIN, "nothing left");
		for (int i = 0; i < 2; i++)
			CHECK(pthread_create(&th[i], NULL, sleeper_main, &sl[i]) == 0, "thread %d", i);
		usleep(100000); /* both asleep */
		for (int i = 0; i < 2; i++) {
			mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x790 + i);
			umad_set_addr(&u, 0x99, 1, 0, QP1_QKEY);
			CHECK(umad_send(fd, ag, &u, 256, 100, 0) == 0, "send to nowhere %d", i);
		}
		for (int i = 0; i < 2; i++)
			pthread_join(th[i], NULL);
		for (int i = 0; i < 2; i++)
			CHECK(sl[i].got == ag && sl[i].status == ETIMEDOUT && sl[i].dt < 2000,
			      "sleeper %d: got %d status %d after %lld ms", i, sl[i].got, sl[i].status,
			      (long long)sl[i].dt);
	}

	/* A response sent with a timeout waits for an answer that never
	 * comes, as with ib_mad: it is resent, then times out. */
	mk_mad(&u, 0x09, 1, 0x81, 0x0042, 0x77b);
	umad_set_addr(&u, a->lid2, 1, 0, QP1_QKEY);
	t0 = ms_now();
	CHECK(umad_send(fd, ag, &u, 256, 100, 1) == 0, "send a response with a timeout");
	CHECK(umad_send(fd, ag, &u, 256, 100, 1) == -EIO && errno == EINVAL, "same response, same destination");
	len = 256;
	got = umad_recv(fd, &u, &len, 2000);
	CHECK(got == ag && umad_status(&u) == ETIMEDOUT, "response times out: %d status %d", got, umad_status(&u));
	dt = ms_now() - t0;
	CHECK(dt >= 190 && dt < 1000, "after %lld ms", (long long)dt);

	/* Sent without a timeout: the kernel does not wait for an answer,
	 * so the unserved answer is dropped. */
	mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x77a);
	umad_set_addr(&u, a->lid1, 1, 0, QP1_QKEY);
	CHECK(umad_send(fd, ag, &u, 256, 0, 0) == 0, "send without timeout");
	len = 256;
	CHECK(umad_recv(fd, &u, &len, 300) == -ETIMEDOUT, "response to a send without timeout is dropped");
	umad_close_port(fd);
	return 0;
}

static void timeouts(void)
{
	struct cm_arg a;
	struct child s, c;
	char msg[256];
	int rc;
	a.lid1 = lid_of(3);
	a.lid2 = lid_of(2);
	s = spawn("node2", silent_server, NULL);
	EXPECT_READY(s, 5000, "server not ready");
	c = spawn("node1", timeout_client, &a);
	EXPECT_CHILD_OK(c, 15000, "client (node1)");
	rc = child_wait(&s, 10000, msg, sizeof(msg));
	cr_assert_eq(rc, 0, "the server should see the request 3 times: %s", msg);
}

Test(sim_umad, timeout_after_retries)
{
	NEED_FABRIC();
	timeouts();
}

/* The same in direct mode: no receive thread reads the socket, the timers
 * still run (and drain it first). */
Test(sim_umad, direct_mode_timeouts)
{
	NEED_FABRIC();
	g_direct = 1;
	timeouts();
}

/* ---- Q_Key, P_Key and other receive checks --------------------------------------------------- */

static int collector(const struct cenv *e)
{
	static const int send_m[] = { 0x03 };
	struct ubuf u;
	int fd, ag;
	int64_t end;

	ag = open_reg(&fd, 0x09, 1, send_m, 1);
	CHECK(ag >= 0, "register");
	c_ready(e);
	end = ms_now() + 2000;
	say("attrs=");
	while (ms_now() < end) {
		int len = 256;

		if (umad_recv(fd, &u, &len, (int)(end - ms_now()) + 1) == ag)
			say("0x%04x,", get16((uint8_t *)umad_get_mad(&u) + 16));
	}
	return 0;
}

struct keys_arg {
	uint16_t lid2;
};

static int keys_sender(const struct cenv *e)
{
	const struct keys_arg *a = e->arg;
	struct ubuf u;
	int fd, ag;

	fd = umad_open_port(NULL, 0);
	CHECK(fd >= 0, "open");
	ag = umad_register(fd, 0x09, 1, 0, NULL);
	CHECK(ag >= 0, "register");
	/* P_Key index 1 holds a P_Key node2 does not have: dropped. */
	mk_mad(&u, 0x09, 1, 0x03, 0x0011, 1);
	umad_set_addr(&u, a->lid2, 1, 0, QP1_QKEY);
	umad_set_pkey(&u, 1);
	CHECK(umad_get_pkey(&u) == 1, "get_pkey");
	CHECK(umad_send(fd, ag, &u, 256, 0, 0) == 0, "send with pkey index 1");
	/* addr.qkey is ignored, as by the kernel: QP1 sends use 0x80010000. */
	mk_mad(&u, 0x09, 1, 0x03, 0x0012, 2);
	umad_set_addr(&u, a->lid2, 1, 0, 0x1234);
	CHECK(umad_send(fd, ag, &u, 256, 0, 0) == 0, "send with pkey index 0");
	umad_close_port(fd);
	return 0;
}

/* A raw UD datagram to QP dqp of node2 (port dport) from node1's address:
 * class 0x09 version 1, the given method, attribute and TID. */
static size_t raw_pkt(uint8_t *pkt, uint8_t method, uint16_t attr, uint64_t tid, uint32_t qkey, uint16_t pkey,
		      uint32_t dqp)
{
	uint8_t *m = pkt + SIMF_BTH_LEN + SIMF_DETH_LEN;
	struct simf_bth b = { .opcode = SIMF_OP_UD_SEND_ONLY, .pkey = pkey, .dest_qp = dqp };

	memset(pkt, 0, SIMF_BTH_LEN + SIMF_DETH_LEN + 256 + SIMF_ICRC_LEN);
	simf_bth_put(pkt, &b);
	pkt[12] = (uint8_t)(qkey >> 24);
	pkt[13] = (uint8_t)(qkey >> 16);
	pkt[14] = (uint8_t)(qkey >> 8);
	pkt[15] = (uint8_t)qkey;
	pkt[19] = 1; /* source QP 1 */
	m[0] = 1;
	m[1] = 0x09;
	m[2] = 1;
	m[3] = method;
	put64(m + 8, tid);
	m[16] = (uint8_t)(attr >> 8);
	m[17] = (uint8_t)attr;
	return SIMF_BTH_LEN + SIMF_DETH_LEN + 256 + SIMF_ICRC_LEN;
}

static void raw_send(uint16_t dport, uint16_t attr, uint32_t qkey, uint16_t pkey, uint32_t dqp, int corrupt)
{
	uint8_t pkt[SIMF_BTH_LEN + SIMF_DETH_LEN + 256 + SIMF_ICRC_LEN];
	uint16_t port;
	int fd = simf_socket(g_f, 1, 0, &port);
	size_t len = raw_pkt(pkt, 0x03, attr, 0, qkey, pkey, dqp);

	cr_assert(fd >= 0);
	if (corrupt) {
		/* A correct ICRC for other bytes than those that travel. */
		struct sockaddr_in to = { .sin_family = AF_INET, .sin_port = htons(dport),
					  .sin_addr.s_addr = simf_node_addr(g_f, 2) };

		simf_icrc_put(pkt + len - 4, simf_icrc(g_f, 1, 2, port, dport, pkt, len - 4));
		pkt[SIMF_BTH_LEN + SIMF_DETH_LEN + 100] ^= 0xFF;
		cr_assert(sendto(fd, pkt, len, 0, (struct sockaddr *)&to, sizeof(to)) == (ssize_t)len);
	} else {
		cr_assert(simf_send(g_f, fd, 1, 2, dport, pkt, len) == (ssize_t)len);
	}
	close(fd);
}

static void keys_enforced(void)
{
	static const struct keys_arg ka0;
	struct keys_arg ka = ka0;
	struct simf_agent ag;
	struct child col, snd;
	char msg[512];
	int rc;

	ka.lid2 = lid_of(2);
	/* node1 gets a P_Key that node2 does not have. */
	simf_lock(g_f);
	g_f->st->nodes[1].pkeys[1] = 0x8123;
	simf_unlock(g_f);

	col = spawn("node2", collector, NULL);
	EXPECT_READY(col, 5000, "collector not ready");
	cr_assert(simf_agent_find(g_f, 2, 1, 0x09, 1, 0x03, NULL, &ag) >= 0, "collector's agent in the table");

	raw_send(ag.port, 0x0010, 0x12345678, 0xFFFF, 1, 0);    /* wrong Q_Key */
	snd = spawn("node1", keys_sender, &ka);                /* 0x0011 dropped, 0x0012 kept */
	EXPECT_CHILD_OK(snd, 10000, "sender");
	raw_send(ag.port, 0x0013, QP1_QKEY, 0xFFFF, 1, 0);      /* good */
	raw_send(ag.port, 0x0014, QP1_QKEY, 0x1234, 1, 0);      /* P_Key not in the table */
	raw_send(ag.port, 0x0015, QP1_QKEY, 0xFFFF, 1, 1);      /* bad ICRC */
	raw_send(ag.port, 0x0016, QP1_QKEY, 0xFFFF, 0, 0);      /* a GMP on QP0 */
	raw_send(ag.port, 0x0017, QP1_QKEY, 0x7FFF, 1, 0);      /* limited member vs full 0xFFFF: ok */

	rc = child_wait(&col, 10000, msg, sizeof(msg));
	cr_assert_eq(rc, 0, "collector: %s", msg);
	cr_assert(strstr(msg, "attrs=0x0012,0x0013,0x0017,") != NULL, "received %s", msg);
	/* the two GMPs whose P_Key node2's table lacks (0x0011: 0x8123, 0x0014:
	 * 0x1234) are P_Key violations of its port (PortInfo P_KeyViolations) */
	cr_expect_eq(simf_pkey_violations(g_f, 2), 2, "node2's P_Key violations: %u",
		     simf_pkey_violations(g_f, 2));
}

Test(sim_umad, qkey_pkey_and_icrc_enforced)
{
	NEED_FABRIC();
	keys_enforced();
}

/* The receiver in direct mode: the same checks, done by umad_recv. */
Test(sim_umad, direct_mode_drops)
{
	NEED_FABRIC();
	g_direct = 1;
	keys_enforced();
}

/* A requester that is not this library (no port in its TID) gets the
 * response at the port its request came from. */
Test(sim_umad, response_to_raw_requester)
{
	static const int one = 1;
	uint8_t pkt[SIMF_BTH_LEN + SIMF_DETH_LEN + 256 + SIMF_ICRC_LEN], buf[2048];
	struct simf_agent ag;
	struct child s;
	struct pollfd pf;
	uint16_t port, sport;
	int fd, src;
	ssize_t n;
	size_t len;

	NEED_FABRIC();
	s = spawn("node2", echo_server, &one);
	EXPECT_READY(s, 5000, "server");
	cr_assert(simf_agent_find(g_f, 2, 1, 0x09, 1, 0x01, NULL, &ag) >= 0);
	fd = simf_socket(g_f, 1, 0, &port);
	cr_assert(fd >= 0);
	len = raw_pkt(pkt, 0x01, 0x0042, 0xabc, QP1_QKEY, 0xFFFF, 1);
	cr_assert(simf_send(g_f, fd, 1, 2, ag.port, pkt, len) == (ssize_t)len);
	pf.fd = fd;
	pf.events = POLLIN;
	cr_assert_eq(poll(&pf, 1, 5000), 1, "no response");
	n = simf_recv(g_f, fd, buf, sizeof(buf), &src, &sport);
	cr_assert_eq(n, (ssize_t)len);
	cr_assert_eq(src, 2);
	cr_assert_eq(buf[SIMF_BTH_LEN + SIMF_DETH_LEN + 3], 0x81);
	cr_assert_eq(get64(buf + SIMF_BTH_LEN + SIMF_DETH_LEN + 8), 0xabc, "a response keeps the TID");
	cr_assert_eq(simf_icrc(g_f, 2, 1, sport, port, buf, (size_t)n - 4), simf_icrc_get(buf + n - 4), "ICRC");
	close(fd);
	EXPECT_CHILD_OK(s, 5000, "server");
}

/* ---- poll, epoll, EAGAIN, small buffers, read() ----------------------------------------------------- */

static int poller(const struct cenv *e)
{
	static const int send_m[] = { 0x03 };
	struct epoll_event ev = { .events = EPOLLIN }, out;
	struct ubuf u;
	int fd, ag, len = 256, ep;
	ssize_t n;

	/* The kernel's fd semantics (read(), write(), readable only for a
	 * deliverable MAD): direct mode off. */
	setenv("USCM_SIM_UMAD_DIRECT", "0", 1);
	ag = open_reg(&fd, 0x09, 1, send_m, 1);
	CHECK(ag >= 0, "register");
	CHECK(umad_get_fd(fd) == fd, "get_fd");
	CHECK(umad_recv(fd, &u, &len, 0) == -EAGAIN && errno == EAGAIN, "empty: EAGAIN (errno %d)", errno);
	CHECK(umad_poll(fd, 50) == -ETIMEDOUT, "poll timeout");
	ep = epoll_create1(0);
	ev.data.fd = fd;
	CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0, "epoll_ctl: %s", strerror(errno));
	c_ready(e);
	CHECK(epoll_wait(ep, &out, 1, 5000) == 1 && out.data.fd == fd && (out.events & EPOLLIN), "epoll wakes");
	CHECK(umad_poll(fd, 0) == 0, "umad_poll sees it");
	len = 100;
	CHECK(umad_recv(fd, &u, &len, 0) == -EINVAL, "a 256-byte MAD does not fit in 100");
	CHECK(len == 256, "needed %d", len);
	len = 256;
	CHECK(umad_recv(fd, &u, &len, 0) == ag && len == 256, "still queued: %d", len);
	CHECK(get16((uint8_t *)umad_get_mad(&u) + 16) == 0x0021, "first");
	/* The fd reads like the kernel's: one record per read(). */
	CHECK(epoll_wait(ep, &out, 1, 5000) == 1, "second wakes");
	n = read(fd, &u, sizeof(u));
	CHECK(n == UHDR + 256, "read() %zd", n);
	CHECK(u.h.agent_id == (uint32_t)ag && get16(u.mad + 16) == 0x0022, "second record");
	CHECK(epoll_wait(ep, &out, 1, 200) == 0, "nothing left");
	close(ep);
	umad_close_port(fd);
	return 0;
}

static int poke(const struct cenv *e)
{
	const struct keys_arg *a = e->arg;
	struct ubuf u;
	int fd = umad_open_port(NULL, 0), ag;

	CHECK(fd >= 0, "open");
	ag = umad_register(fd, 0x09, 1, 0, NULL);
	for (int i = 0; i < 2; i++) {
		mk_mad(&u, 0x09, 1, 0x03, (uint16_t)(0x0021 + i), (uint64_t)i);
		umad_set_addr(&u, a->lid2, 1, 0, QP1_QKEY);
		if (i == 0) {
			CHECK(umad_send(fd, ag, &u, 256, 0, 0) == 0, "send");
		} else {
			/* What libibumad's umad_send does on the kernel fd. */
			u.h.agent_id = (uint32_t)ag;
			CHECK(write(fd, &u, (size_t)UHDR + 256) == UHDR + 256, "write(): %s", strerror(errno));
		}
		usleep(100000);
	}
	umad_close_port(fd);
	return 0;
}

Test(sim_umad, poll_epoll_and_buffers)
{
	struct keys_arg ka;
	struct child p, s;

	NEED_FABRIC();
	ka.lid2 = lid_of(2);
	p = spawn("node2", poller, NULL);
	EXPECT_READY(p, 5000, "poller not ready");
	s = spawn("node1", poke, &ka);
	EXPECT_CHILD_OK(s, 10000, "sender");
	EXPECT_CHILD_OK(p, 10000, "poller");
}

/* Direct mode's fd: readable for a datagram that umad_recv then drops
 * (-EAGAIN, and no longer readable), for a good MAD, and a response read
 * after its request's timeout has passed is still the response (the timer
 * drains the socket first, as the kernel matches on arrival). */
static int direct_poller(const struct cenv *e)
{
	const struct keys_arg *a = e->arg; /* lid2: node3's LID here */
	static const int send_m[] = { 0x03 };
	struct pollfd p;
	struct ubuf u;
	uint8_t *m;
	int fd, d, ag, len = 256, fd2;

	ag = open_reg(&fd, 0x09, 1, send_m, 1);
	CHECK(ag >= 0, "register");
	d = umad_get_fd(fd);
	CHECK(d >= 0 && d != fd, "direct fd %d for %d", d, fd);
	CHECK(umad_get_fd(fd) == d, "asked again: the same fd");
	CHECK(umad_get_fd(12345) == 12345, "not a port: returned as is, as the kernel's");
	CHECK(umad_recv(fd, &u, &len, 0) == -EAGAIN && errno == EAGAIN, "empty: EAGAIN");
	CHECK(umad_poll(fd, 50) == -ETIMEDOUT, "umad_poll timeout");
	p = (struct pollfd){ .fd = d, .events = POLLIN };
	CHECK(poll(&p, 1, 50) == 0, "nothing to poll");
	c_ready(e);
	c_wait_go(e); /* a datagram with a bad Q_Key is waiting */
	CHECK(poll(&p, 1, 5000) == 1, "the datagram wakes the poller");
	len = 256;
	CHECK(umad_recv(fd, &u, &len, 0) == -EAGAIN, "dropped by umad_recv");
	CHECK(poll(&p, 1, 0) == 0, "and no longer readable");
	c_ready(e);
	c_wait_go(e); /* a good one now */
	CHECK(poll(&p, 1, 5000) == 1, "a good MAD wakes the poller");
	len = 256;
	CHECK(umad_recv(fd, &u, &len, 0) == ag && get16((uint8_t *)umad_get_mad(&u) + 16) == 0x0032,
	      "the good MAD: %s", strerror(errno));

	/* A Get to node3's echo server with a 1 s timeout (its answer takes
	 * far less, even on a loaded machine), read 2.5 s later. */
	mk_mad(&u, 0x09, 1, 0x01, 0x0042, 0x55);
	umad_set_addr(&u, a->lid2, 1, 0, QP1_QKEY);
	CHECK(umad_send(fd, ag, &u, 256, 1000, 0) == 0, "send");
	usleep(2500000);
	len = 256;
	CHECK(umad_recv(fd, &u, &len, 2000) == ag, "recv: %s", strerror(errno));
	m = umad_get_mad(&u);
	CHECK(umad_status(&u) == 0 && m[3] == 0x81 && (get64(m + 8) & 0xFFFFFFFF) == 0x55,
	      "the response, not a timeout (status %d method 0x%x)", umad_status(&u), m[3]);
	umad_close_port(fd);

	/* USCM_SIM_UMAD_DIRECT=0 turns direct mode off: the port fd itself. */
	setenv("USCM_SIM_UMAD_DIRECT", "0", 1);
	fd2 = umad_open_port(NULL, 0);
	CHECK(fd2 >= 0, "open");
	CHECK(umad_get_fd(fd2) == fd2, "off: the port fd");
	umad_close_port(fd2);
	return 0;
}

Test(sim_umad, direct_mode_poll_and_late_read)
{
	static const int one = 1;
	struct keys_arg ka;
	struct simf_agent ag;
	struct child p, s;

	NEED_FABRIC();
	g_direct = 1;
	ka.lid2 = lid_of(3);
	s = spawn("node3", echo_server, &one);
	EXPECT_READY(s, 5000, "echo server");
	p = spawn("node2", direct_poller, &ka);
	EXPECT_READY(p, 5000, "poller");
	cr_assert(simf_agent_find(g_f, 2, 1, 0x09, 1, 0x03, NULL, &ag) >= 0, "the poller's agent");
	raw_send(ag.port, 0x0031, 0x12345678, 0xFFFF, 1, 0); /* wrong Q_Key */
	child_go(&p);
	EXPECT_READY(p, 5000, "poller after the drop");
	raw_send(ag.port, 0x0032, QP1_QKEY, 0xFFFF, 1, 0);
	child_go(&p);
	EXPECT_CHILD_OK(p, 10000, "poller");
	EXPECT_CHILD_OK(s, 10000, "echo server");
}

/* ---- the SA through the fabric: RMPP and ENOSPC ---------------------------------------------------------- */

struct sa_arg {
	unsigned nnodes;
	uint64_t guids[8];
};

static int sa_client(const struct cenv *e)
{
	const struct sa_arg *a = e->arg;
	umad_port_t port;
	struct ubuf u;
	uint8_t *m;
	int fd, ag, len, got, off;

	CHECK(umad_get_port(NULL, 0, &port) == 0 && port.sm_lid, "SM lid");
	fd = open_port();
	CHECK(fd >= 0, "open");
	ag = umad_register(fd, 0x03, 2, 1, NULL);
	CHECK(ag >= 0, "register SA class");
	m = mk_mad(&u, 0x03, 2, 0x12 /* GetTable */, 0x0011 /* NodeRecord */, 0xabc);
	(void)m;
	umad_set_addr(&u, (int)port.sm_lid, 1, 0, QP1_QKEY);
	umad_release_port(&port);
	CHECK(umad_send(fd, ag, &u, 256, 1000, 3) == 0, "send");
	len = 256;
	got = umad_recv(fd, &u, &len, 5000);
	CHECK(got == -ENOSPC && errno == ENOSPC, "a multi-segment answer: ENOSPC (%d)", got);
	CHECK(len == 56 + (int)(a->nnodes + 1) * 112, "length %d", len);
	got = umad_recv(fd, &u, &len, 0);
	CHECK(got == ag && umad_status(&u) == 0, "recv %d", got);
	m = umad_get_mad(&u);
	CHECK(m[3] == 0x92 && get16(m + 4) == 0, "GetTableResp status 0x%x", get16(m + 4));
	off = get16(m + 36 + 8) * 8;
	CHECK(off == 112, "attribute offset %d", off);
	for (unsigned i = 0; i <= a->nnodes; i++) {
		int found = 0;

		for (int r = 0; 56 + (r + 1) * off <= len; r++)
			if (get64(m + 56 + r * off + 16) == a->guids[i]) /* NodeInfo.NodeGUID */
				found = 1;
		CHECK(found, "node %u's record", i);
	}
	umad_close_port(fd);
	return 0;
}

static void sa_gettable(void)
{
	struct sa_arg a;
	struct child c;

	a.nnodes = g_f->st->nnodes;
	for (unsigned i = 0; i <= a.nnodes && i < 8; i++)
		a.guids[i] = g_f->st->nodes[i].guid;
	c = spawn("node2", sa_client, &a);
	EXPECT_CHILD_OK(c, 15000, "SA client");
}

Test(sim_umad, sa_gettable_rmpp_enospc)
{
	NEED_FABRIC();
	sa_gettable();
}

/* RMPP reassembly and ACKs by the application's thread in direct mode. */
Test(sim_umad, direct_mode_rmpp)
{
	NEED_FABRIC();
	g_direct = 1;
	sa_gettable();
}

/* ---- RoCE: GIDs instead of LIDs ------------------------------------------------------------ */

struct roce_arg {
	uint8_t gid1[16], gid2[16];
};

static int roce_passive(const struct cenv *e)
{
	const struct roce_arg *a = e->arg;
	static const int send_m[] = { 0x03 };
	umad_port_t port;
	struct ubuf u;
	int fd, ag, len = 256;

	CHECK(umad_get_port(NULL, 0, &port) == 0, "get_port");
	CHECK(!strcmp(port.link_layer, "Ethernet") && port.base_lid == 0 && port.sm_lid == 0, "RoCE port: %s lid %u",
	      port.link_layer, port.base_lid);
	umad_release_port(&port);
	ag = open_reg(&fd, 0x07, 2, send_m, 1);
	CHECK(ag >= 0, "register");
	c_ready(e);
	CHECK(umad_recv(fd, &u, &len, 5000) == ag, "recv: %s", strerror(errno));
	CHECK(u.h.addr.grh_present == 1 && u.h.addr.lid == 0, "grh %u lid %u", u.h.addr.grh_present,
	      be16toh(u.h.addr.lid));
	CHECK(!memcmp(u.h.addr.gid, a->gid1, 16), "source GID");
	/* Answer through the GRH the request came with. */
	mk_mad(&u, 0x07, 2, 0x03, 0x0013, 9);
	umad_set_addr(&u, 0, 1, 0, QP1_QKEY);
	umad_set_grh(&u, &(ib_mad_addr_t){ .hop_limit = 64 });
	memcpy(u.h.addr.gid, a->gid1, 16);
	CHECK(umad_send(fd, ag, &u, 256, 0, 0) == 0, "send REP: %s", strerror(errno));
	umad_close_port(fd);
	return 0;
}

static int roce_active(const struct cenv *e)
{
	const struct roce_arg *a = e->arg;
	static const int send_m[] = { 0x03 };
	ib_mad_addr_t grh;
	struct ubuf u;
	int fd, ag, len = 256;

	ag = open_reg(&fd, 0x07, 2, send_m, 1);
	CHECK(ag >= 0, "register");
	mk_mad(&u, 0x07, 2, 0x03, 0x0010, 8);
	umad_set_addr(&u, 0, 1, 0, QP1_QKEY);
	CHECK(umad_send(fd, ag, &u, 256, 0, 0) == -EIO && errno == EINVAL, "RoCE needs a GRH (errno %d)", errno);
	memset(&grh, 0, sizeof(grh));
	memcpy(grh.gid, a->gid2, 16);
	grh.hop_limit = 64;
	umad_set_grh(&u, &grh);
	CHECK(umad_send(fd, ag, &u, 256, 0, 0) == 0, "send REQ: %s", strerror(errno));
	CHECK(umad_recv(fd, &u, &len, 5000) == ag, "recv REP: %s", strerror(errno));
	CHECK(get16((uint8_t *)umad_get_mad(&u) + 16) == 0x0013, "REP");
	CHECK(!memcmp(u.h.addr.gid, a->gid2, 16), "REP's source GID");
	umad_close_port(fd);
	return 0;
}

Test(sim_umad, roce_routes_by_gid)
{
	struct roce_arg a;
	struct child p, c;

	NEED_FABRIC_LINK("roce", "2");
	memcpy(a.gid1, g_f->st->nodes[1].gid, 16);
	memcpy(a.gid2, g_f->st->nodes[2].gid, 16);
	p = spawn("node2", roce_passive, &a);
	EXPECT_READY(p, 5000, "passive side");
	c = spawn("node1", roce_active, &a);
	EXPECT_CHILD_OK(c, 10000, "active side");
	EXPECT_CHILD_OK(p, 10000, "passive side");
}

/* ---- fork: the child is a process of its own --------------------------------------------------- */

static int forker(const struct cenv *e)
{
	umad_ca_t ca;
	int fd, st;
	pid_t pid;

	(void)e;
	fd = umad_open_port(NULL, 0);
	CHECK(fd >= 0, "open");
	CHECK(umad_register(fd, 0x09, 1, 0, NULL) == 0, "register");
	pid = fork();
	if (pid == 0) {
		int fd2;

		setenv("USCM_SIM_NODE", "node3", 1);
		if (umad_get_ca(NULL, &ca) || strcmp(ca.ca_name, "uscm_node3"))
			_exit(1);
		umad_release_ca(&ca);
		fd2 = umad_open_port(NULL, 0);
		if (fd2 < 0 || umad_register(fd2, 0x09, 1, 0, NULL) != 0)
			_exit(2);
		/* The parent's fd is not ours to use. */
		if (umad_register(fd, 0x09, 1, 0, NULL) != -EPERM)
			_exit(3);
		umad_close_port(fd2);
		_exit(0);
	}
	CHECK(pid > 0 && waitpid(pid, &st, 0) == pid, "fork");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	CHECK(umad_get_ca(NULL, &ca) == 0 && !strcmp(ca.ca_name, "uscm_node1"), "parent still node1");
	umad_release_ca(&ca);
	CHECK(umad_register(fd, 0x09, 1, 0, NULL) == 1, "parent's fd still works");
	umad_close_port(fd);
	return 0;
}

Test(sim_umad, fork_child_attaches_on_its_own)
{
	struct child c;

	NEED_FABRIC();
	c = spawn("node1", forker, NULL);
	EXPECT_CHILD_OK(c, 10000, "forker");
}

/* ---- unmodified Debian tools ----------------------------------------------------------------- */

/* The directory of the libibumad.so.3 this test runs with: the drop-in. */
static int libdir(char *out, size_t cap)
{
	Dl_info di;
	char *slash;

	if (!dladdr((void *)umad_init, &di) || !di.dli_fname || !strncmp(di.dli_fname, "/usr/", 5) ||
	    !strncmp(di.dli_fname, "/lib", 4))
		return -1; /* the system's libibumad */
	snprintf(out, cap, "%s", di.dli_fname);
	slash = strrchr(out, '/');
	if (!slash)
		return -1;
	*slash = 0;
	return 0;
}

static int run_tool(const char *node, char *const argv[], char *out, size_t cap)
{
	static char ld[600], dir[300], nd[64];
	char lib[512];
	char *env[] = { ld, dir, nd, NULL };

	if (libdir(lib, sizeof(lib)) < 0)
		return -2;
	snprintf(ld, sizeof(ld), "LD_LIBRARY_PATH=%s", lib);
	snprintf(dir, sizeof(dir), "USCM_SIM_DIR=%s", g_dir);
	snprintf(nd, sizeof(nd), "USCM_SIM_NODE=%s", node);
	return run_cmd(argv, env, out, cap, 20);
}

Test(sim_umad, debian_ibstat)
{
	char out[8192], want[128];
	char *ibstat[] = { "/usr/sbin/ibstat", NULL };
	char *ibstat_l[] = { "/usr/sbin/ibstat", "-l", NULL };
	char *ibstat_p[] = { "/usr/sbin/ibstat", "-p", NULL };
	int rc;

	NEED_FABRIC();
	if (access("/usr/sbin/ibstat", X_OK))
		tf_skip_missing("ibstat not installed (apt-get install infiniband-diags)");
	rc = run_tool("node2", ibstat, out, sizeof(out));
	cr_assert_neq(rc, -2, "this test does not run with the sim's libibumad.so.3");
	cr_assert_eq(rc, 0, "ibstat: %s", out);
	cr_assert(strstr(out, "CA 'uscm_node2'"), "%s", out);
	cr_assert(strstr(out, "State: Active"), "%s", out);
	cr_assert(strstr(out, "Physical state: LinkUp"), "%s", out);
	cr_assert(strstr(out, "Link layer: InfiniBand"), "%s", out);
	snprintf(want, sizeof(want), "Base lid: %u\n", lid_of(2));
	cr_assert(strstr(out, want), "want %s in %s", want, out);
	snprintf(want, sizeof(want), "SM lid: %u\n", g_f->st->nodes[2].sm_lid);
	cr_assert(strstr(out, want), "want %s in %s", want, out);
	snprintf(want, sizeof(want), "Port GUID: 0x%016llx", (unsigned long long)g_f->st->nodes[2].guid);
	cr_assert(strstr(out, want), "want %s in %s", want, out);

	cr_assert_eq(run_tool("node2", ibstat_l, out, sizeof(out)), 0);
	cr_assert_str_eq(out, "uscm_node2\n");
	cr_assert_eq(run_tool("node2", ibstat_p, out, sizeof(out)), 0);
	snprintf(want, sizeof(want), "0x%016llx\n", (unsigned long long)g_f->st->nodes[2].guid);
	cr_assert_str_eq(out, want);
}

Test(sim_umad, debian_saquery)
{
	char out[16384], want[128], slid[16], dlid[16];
	char *nr[] = { "/usr/sbin/saquery", NULL };
	char *pr[] = { "/usr/sbin/saquery", "PR", "--slid", slid, "--dlid", dlid, NULL };
	int rc;

	NEED_FABRIC();
	if (access("/usr/sbin/saquery", X_OK))
		tf_skip_missing("saquery not installed (apt-get install infiniband-diags)");
	rc = run_tool("node2", nr, out, sizeof(out));
	cr_assert_neq(rc, -2, "this test does not run with the sim's libibumad.so.3");
	cr_assert_eq(rc, 0, "saquery: %s", out);
	for (unsigned i = 0; i <= g_f->st->nnodes; i++) {
		snprintf(want, sizeof(want), "node_guid...............0x%016llx", (unsigned long long)g_f->st->nodes[i].guid);
		cr_assert(strstr(out, want), "want %s in %s", want, out);
	}
	snprintf(slid, sizeof(slid), "%u", lid_of(2));
	snprintf(dlid, sizeof(dlid), "%u", lid_of(1));
	rc = run_tool("node2", pr, out, sizeof(out));
	cr_assert_eq(rc, 0, "saquery PR: %s", out);
	cr_assert(strstr(out, "PathRecord dump"), "%s", out);
	snprintf(want, sizeof(want), "dlid....................%u\n", lid_of(1));
	cr_assert(strstr(out, want), "want %s in %s", want, out);
	snprintf(want, sizeof(want), "slid....................%u\n", lid_of(2));
	cr_assert(strstr(out, want), "want %s in %s", want, out);
}
