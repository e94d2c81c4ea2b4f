/* Who may open a umad port on the simulated fabric. On a real host
 * /dev/infiniband/umadN is 0600 root (rdma-core's udev rules): libibumad's
 * open() fails with EACCES for anyone else and umad_open_port returns -EIO
 * with errno EACCES (and, with umad_debug, says why). The drop-in does the
 * same unless the fabric was started with `--umad-access all`; everything
 * else (the CA's attributes, verbs) stays open to every user.
 *
 * The umad calls run in children (as root, or as user nobody: the tests
 * skip when not run as root). This executable links the drop-in
 * libibumad.so.3; each test has its own fabric directory, stopped in .fini. */
#include "simtest.h"

#include <grp.h>
#include <infiniband/umad.h>
#include <pwd.h>

static char *g_dir;
static char g_err[64];

static void setup(void)
{
	g_dir = st_fixture_dir();
	g_err[0] = 0;
}

static void teardown(void)
{
	if (!g_dir)
		return;
	st_sh(NULL, "'%s/uscm-sim' stop --dir '%s' >/dev/null 2>&1", st_bin(), g_dir);
	st_rmrf(g_dir);
	free(g_dir);
	g_dir = NULL;
	if (g_err[0])
		unlink(g_err);
	g_err[0] = 0;
}

/* cr_skip_test ends a test without its .fini: clean up first. */
#define SKIP(...)                              \
	do {                                   \
		teardown();                    \
		cr_skip_test(__VA_ARGS__);     \
	} while (0)

TestSuite(umad_access, .init = setup, .fini = teardown, .timeout = 60);

static void start(const char *args)
{
	char *out = NULL;
	int rc = st_sh(&out, "'%s/uscm-sim' start --dir '%s' --nodes 2 --no-uscmd %s 2>&1", st_bin(), g_dir, args);

	cr_assert_eq(rc, 0, "uscm-sim start: %s", out);
	free(out);
}

/* Runs fn in a child attached as node1, as user nobody when `nobody`; its
 * stderr in g_err. Its exit status (100+: could not become nobody). */
static int child(int nobody, int (*fn)(void))
{
	struct passwd *pw = getpwnam("nobody");
	int fd, st;
	pid_t pid;

	if (nobody && geteuid() != 0)
		SKIP("not root: cannot run a process as user nobody");
	if (nobody && !pw)
		SKIP("no user nobody");
	snprintf(g_err, sizeof(g_err), "/tmp/uscm-simtest-err.XXXXXX");
	fd = mkstemp(g_err);
	cr_assert_geq(fd, 0);
	pid = fork();
	if (pid == 0) {
		dup2(fd, 2);
		setenv("USCM_SIM_DIR", g_dir, 1);
		setenv("USCM_SIM_NODE", "node1", 1);
		if (nobody && (setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0))
			_exit(100);
		if (nobody && geteuid() == 0)
			_exit(101);
		_exit(fn());
	}
	close(fd);
	cr_assert_gt(pid, 0);
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
}

/* umad_open_port refused as by libibumad: -EIO, errno EACCES; the CA is
 * still visible (sysfs on a real host). */
static int open_refused(void)
{
	umad_ca_t ca;
	umad_port_t port;
	int r, e;

	umad_debug(1);
	r = umad_open_port(NULL, 0);
	e = errno;
	if (r != -EIO)
		return 1;
	if (e != EACCES)
		return 2;
	errno = 0;
	r = umad_open_port("uscm_node1", 1);
	if (r != -EIO || errno != EACCES)
		return 3;
	if (umad_get_ca(NULL, &ca) < 0)
		return 4;
	if (ca.numports != 1 || strcmp(ca.ca_name, "uscm_node1") != 0)
		return 5;
	umad_release_ca(&ca);
	if (umad_get_port(NULL, 1, &port) < 0)
		return 6;
	if (port.state != 4 || port.base_lid != 2)
		return 7;
	umad_release_port(&port);
	return 0;
}

/* umad_open_port and a CM agent's registration work. */
static int open_works(void)
{
	int fd = umad_open_port(NULL, 0), id;

	if (fd < 0)
		return 1;
	id = umad_register(fd, 0x07, 2, 0, NULL);
	if (id < 0)
		return 2;
	if (umad_unregister(fd, id) < 0)
		return 3;
	return umad_close_port(fd) < 0 ? 4 : 0;
}

Test(umad_access, root_only_by_default)
{
	char *err;
	int rc;

	start("");
	rc = child(1, open_refused);
	err = st_slurp(g_err);
	cr_assert_eq(rc, 0, "as nobody: step %d failed; stderr: %s", rc, err);
	cr_assert(strstr(err, "umad_open_port: open /dev/infiniband/umad0 failed: Permission denied"),
		  "libibumad's debug line: %s", err);
	free(err);
	unlink(g_err);
	rc = child(0, open_works);
	err = st_slurp(g_err);
	cr_assert_eq(rc, 0, "as root: step %d failed; stderr: %s", rc, err);
	free(err);
}

Test(umad_access, open_to_all)
{
	char *err;
	int rc;

	start("--umad-access all");
	rc = child(1, open_works);
	err = st_slurp(g_err);
	cr_assert_eq(rc, 0, "as nobody with --umad-access all: step %d failed; stderr: %s", rc, err);
	free(err);
}
