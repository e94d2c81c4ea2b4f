/*
 * `cmake --install` of uscmd as an operator runs it (docs/operators.md):
 * the daemon lands in sbin, the systemd units in lib/systemd/system, the
 * installed uscmd.service starts the installed uscmd, the socket unit
 * listens where the library looks, and systemd-analyze accepts both units.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/usp_proto.h"
#include "tests/test_fixtures.h"

static char dir[64];
static char build[512], cmake[512];

static void setup(void)
{
	const char *b = getenv("USCM_BUILD_DIR"), *c = getenv("USCM_CMAKE");
	char p[600];

	cr_assert(b && c, "run through ctest (USCM_BUILD_DIR / USCM_CMAKE)");
	snprintf(build, sizeof(build), "%s", b);
	snprintf(cmake, sizeof(cmake), "%s", c);
	snprintf(p, sizeof(p), "%s/bin/uscmd", build);
	if (access(p, X_OK) != 0)
		tf_skip_missing("%s is not built: `cmake --build build --target uscmd rdmacm` first", p);
	tf_path(dir, "uscm-install-", "");
}

static void teardown(void)
{
	if (dir[0])
		tf_sh(NULL, "rm -rf '%s'", dir);
}

TestSuite(uscmd_install, .init = setup, .fini = teardown, .timeout = 120);

/* The whole text of a file (malloc'd), or NULL. */
static char *slurp(const char *path)
{
	char *s = NULL;

	if (tf_sh(&s, "cat '%s' 2>/dev/null", path) != 0) {
		free(s);
		return NULL;
	}
	return s;
}

/* The value of the first "Key=" line (not a comment) of a unit, in buf. */
static const char *unit_value(const char *text, const char *key, char *buf, size_t size)
{
	size_t kl = strlen(key);

	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (!strncmp(l, key, kl) && l[kl] == '=') {
			const char *v = l + kl + 1, *e = strchr(v, '\n');
			size_t n = e ? (size_t)(e - v) : strlen(v);

			snprintf(buf, size, "%.*s", (int)n, v);
			return buf;
		}
	}
	return NULL;
}

static void install_to(const char *prefix, const char *destdir)
{
	char *out = NULL;
	int rc = tf_sh(&out, "%s%s%s'%s' --install '%s' --prefix '%s' 2>&1", destdir ? "DESTDIR='" : "",
		       destdir ? destdir : "", destdir ? "' " : "", cmake, build, prefix);

	cr_assert_eq(rc, 0, "cmake --install failed:\n%s", out);
	free(out);
}

Test(uscmd_install, binary_and_units_land_under_the_prefix)
{
	char prefix[128], p[256], v[512];
	char *svc, *sock, *out = NULL;
	struct stat st;

	snprintf(prefix, sizeof(prefix), "%s/prefix", dir);
	install_to(prefix, NULL);

	snprintf(p, sizeof(p), "%s/sbin/uscmd", prefix);
	cr_assert_eq(stat(p, &st), 0, "no %s", p);
	cr_assert(S_ISREG(st.st_mode) && access(p, X_OK) == 0, "%s is not an executable file", p);
	/* it is the daemon, and it runs from there */
	cr_assert_eq(tf_sh(&out, "'%s' --help", p), 0, "%s --help failed", p);
	cr_assert_not_null(strstr(out, "--max-queued"), "not uscmd's usage:\n%s", out);
	free(out);

	snprintf(p, sizeof(p), "%s/lib/systemd/system/uscmd.service", prefix);
	svc = slurp(p);
	cr_assert_not_null(svc, "no %s", p);
	snprintf(p, sizeof(p), "%s/lib/systemd/system/uscmd.socket", prefix);
	sock = slurp(p);
	cr_assert_not_null(sock, "no %s", p);

	/* ExecStart names the uscmd just installed, and nothing is left unconfigured */
	snprintf(p, sizeof(p), "%s/sbin/uscmd", prefix);
	cr_assert_not_null(unit_value(svc, "ExecStart", v, sizeof(v)), "no ExecStart:\n%s", svc);
	cr_assert_str_eq(v, p, "ExecStart=%s, installed %s", v, p);
	cr_assert_null(strstr(svc, "@CMAKE_"), "unconfigured variable left:\n%s", svc);
	cr_assert_null(strstr(svc, "@USCM_"), "unconfigured variable left:\n%s", svc);
	cr_assert_not_null(unit_value(svc, "Documentation", v, sizeof(v)));
	snprintf(p, sizeof(p), "file:%s/share/doc/uscm/operators.md", prefix);
	cr_assert_str_eq(v, p);
	cr_assert_eq(access(p + 5, R_OK), 0, "Documentation= names %s, not installed", p + 5);
	cr_assert_str_eq(unit_value(svc, "Type", v, sizeof(v)), "simple");
	cr_assert_str_eq(unit_value(svc, "Requires", v, sizeof(v)), "uscmd.socket");

	/* the socket is where the library and uscmd --status look by default */
	cr_assert_not_null(unit_value(sock, "ListenSequentialPacket", v, sizeof(v)), "%s", sock);
	cr_assert_str_eq(v, USP_DEFAULT_SOCKET);
	cr_assert_str_eq(unit_value(sock, "SocketMode", v, sizeof(v)), "0666");
	cr_assert_str_eq(unit_value(sock, "DirectoryMode", v, sizeof(v)), "0755");
	cr_assert_str_eq(unit_value(sock, "Accept", v, sizeof(v)), "no");
	free(svc);
	free(sock);
}

/* A staged install (DESTDIR, as packagers do): files under the stage, the
 * unit names the final path. */
Test(uscmd_install, destdir_stays_out_of_exec_start)
{
	char stage[128], p[256], v[512];
	char *svc;

	snprintf(stage, sizeof(stage), "%s/stage", dir);
	install_to("/usr", stage);
	snprintf(p, sizeof(p), "%s/usr/sbin/uscmd", stage);
	cr_assert_eq(access(p, X_OK), 0, "no %s", p);
	snprintf(p, sizeof(p), "%s/usr/lib/systemd/system/uscmd.service", stage);
	svc = slurp(p);
	cr_assert_not_null(svc, "no %s", p);
	cr_assert_str_eq(unit_value(svc, "ExecStart", v, sizeof(v)), "/usr/sbin/uscmd");
	free(svc);
}

/* systemd's own check of the installed units (unknown keys, bad values,
 * ExecStart not executable): silent and successful. */
Test(uscmd_install, systemd_analyze_verify_accepts_the_units)
{
	char prefix[128];
	char *out = NULL;
	int rc;

	if (tf_sh(NULL, "command -v systemd-analyze >/dev/null") != 0)
		cr_skip_test("systemd-analyze is not installed");
	snprintf(prefix, sizeof(prefix), "%s/prefix", dir);
	install_to(prefix, NULL);
	rc = tf_sh(&out, "cd '%s/lib/systemd/system' && systemd-analyze verify ./uscmd.socket ./uscmd.service 2>&1",
		   prefix);
	cr_assert_eq(rc, 0, "systemd-analyze verify: %d\n%s", rc, out);
	cr_assert_str_empty(out, "systemd-analyze verify warns:\n%s", out);
	free(out);
}

/* The installed service's sandbox as systemd rates it (offline: no
 * running manager needed): the resource bounds a shared host needs are
 * there, and the overall exposure stays "OK" (what is left is what uscmd
 * needs: root for umad, the host's network namespace, the RDMA devices). */
Test(uscmd_install, the_sandbox_bounds_the_daemon)
{
	char prefix[128], p[256], v[64];
	char *out = NULL, *svc;
	double exposure = 99;
	int rc;

	if (tf_sh(NULL, "command -v systemd-analyze >/dev/null") != 0)
		cr_skip_test("systemd-analyze is not installed");
	snprintf(prefix, sizeof(prefix), "%s/prefix", dir);
	install_to(prefix, NULL);
	snprintf(p, sizeof(p), "%s/lib/systemd/system/uscmd.service", prefix);
	svc = slurp(p);
	cr_assert_not_null(svc);
	cr_expect_str_eq(unit_value(svc, "TasksMax", v, sizeof(v)), "16");
	cr_expect_str_eq(unit_value(svc, "MemoryMax", v, sizeof(v)), "1G");
	cr_expect_str_eq(unit_value(svc, "LimitNOFILE", v, sizeof(v)), "524288");
	cr_expect_str_eq(unit_value(svc, "CapabilityBoundingSet", v, sizeof(v)), "");
	cr_expect_str_eq(unit_value(svc, "RestrictNamespaces", v, sizeof(v)), "yes");
	free(svc);
	rc = tf_sh(&out, "systemd-analyze security --offline=true '%s' 2>&1 | grep 'Overall exposure'", p);
	cr_assert_eq(rc, 0, "systemd-analyze security: %d\n%s", rc, out);
	cr_assert_eq(sscanf(strstr(out, "level for") ? strstr(out, ": ") + 2 : out, "%lf", &exposure), 1,
		     "%s", out);
	cr_expect_leq(exposure, 2.0, "exposure %.1f: %s", exposure, out);
	free(out);
}
