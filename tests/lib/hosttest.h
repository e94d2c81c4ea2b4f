/*
 * hosttest.h - helpers of the host-service tests (a uscmd per node):
 * unmodified binaries in daemon mode on a node, server/client pairs, and
 * programs run as user nobody. Header-only, static: each test file that
 * includes it uses what it needs.
 */
#ifndef USCM_TESTS_LIB_HOSTTEST_H
#define USCM_TESTS_LIB_HOSTTEST_H

#include "libtest.h"

/* Starts a daemon-mode fabric; the CM timers of the daemons (they inherit
 * this environment) are short so a client that starts before its server
 * retries within ~0.2 s. */
static inline void dstart(const char *link, int nodes)
{
	setenv("USCM_CM_RESPONSE_TIMEOUT", "14", 1);
	setenv("USCM_CM_RETRIES", "4", 1);
	lt_fabric_start_daemon(link, nodes);
}

/* The environment prefix of an unmodified binary on node n, daemon mode. */
static inline const char *denv(int n)
{
	static char buf[2][5000];
	static int k;
	char *b = buf[k++ & 1];

	/* the assignments first: lt_util_env may end with a command (its
	 * node wrapper) */
	snprintf(b, sizeof(buf[0]), "USCM_SIM_NODE=node%d USCM_SOCKET='%s/node%d/uscmd.sock' USCM_MODE=daemon %s",
		 n, getenv("USCM_SIM_DIR"), n, lt_util_env());
	return b;
}

static inline int count(const char *s, const char *what)
{
	int n = 0;

	for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
		n++;
	return n;
}

/* `server` in the background (on node sn), then `client` (node cn) until it
 * is not refused for want of a listener; both must exit 0 (or the server
 * is stopped when it never exits). The client's output (malloc'd). */
static inline char *dpair(const char *bin, int sn, const char *server, int cn, const char *client,
		   int server_exits, const char *tag)
{
	char *out = NULL, *sout = NULL, *rc = NULL;
	int st = -1;

	if (lt_sh(NULL, "command -v %s >/dev/null", bin) != 0)
		tf_skip_missing("%s (Debian rdmacm-utils) is not installed", bin);
	cr_assert_eq(lt_sh(NULL,
			   "(%s timeout 60 %s >%s/%s.out 2>&1 & echo $! >%s/%s.pid; wait $!;"
			   " echo $? >%s/%s.rc) >/dev/null 2>&1 &",
			   denv(sn), server, lt_dir, tag, lt_dir, tag, lt_dir, tag),
		     0);
	/* the server holds an id in its node's uscmd (it is listening, or
	 * about to): a client started earlier would be refused, and a
	 * multi-connection client half refused leaves the server waiting */
	for (int i = 0; i < 100; i++) {
		if (lt_sh(NULL, "%s/uscmd --status --socket %s/node%d/uscmd.sock | grep -q ', [1-9][0-9]* ids,'",
			  lt_bin(), getenv("USCM_SIM_DIR"), sn) == 0)
			break;
		usleep(50 * 1000);
	}
	usleep(50 * 1000);
	for (int i = 0; i < 50; i++) {
		free(out);
		st = lt_sh(&out, "%s timeout 60 %s 2>&1", denv(cn), client);
		/* not listening yet: REJECTED (rping, ucmatose), UNREACHABLE
		 * (udaddy), "Connection refused" (rdma_client) */
		if (st == 0 || (!strstr(out, "REJECTED") && !strstr(out, "UNREACHABLE") &&
				!strstr(out, "Connection refused")) ||
		    strstr(out, "end 0"))
			break;
		usleep(100 * 1000);
	}
	cr_expect_eq(st, 0, "%s exited %d:\n%s", client, st, out);
	if (!server_exits) {
		for (int i = 0; i < 50 && lt_sh(NULL, "test -s %s/%s.pid", lt_dir, tag); i++)
			usleep(100 * 1000);
		lt_sh(NULL, "kill -TERM $(cat %s/%s.pid) >/dev/null 2>&1; true", lt_dir, tag);
	}
	for (int i = 0; i < 150; i++) {
		free(rc);
		rc = NULL;
		if (lt_sh(&rc, "cat %s/%s.rc 2>/dev/null", lt_dir, tag) == 0 && rc[0])
			break;
		usleep(100 * 1000);
	}
	lt_sh(&sout, "cat %s/%s.out", lt_dir, tag);
	if (server_exits)
		cr_expect(rc && rc[0] == '0', "%s exited %s:\n%s", server, rc ? rc : "?", sout);
	else
		cr_expect(rc && rc[0], "%s did not stop:\n%s", server, sout);
	free(sout);
	free(rc);
	return out;
}

/* Runs the rest of a command line as nobody, with the libraries from a
 * copy nobody can read (the build tree may sit below a directory only
 * root may enter). */
static char g_nobody[700] __attribute__((unused));
#define NOBODY g_nobody

static inline void need_root(void)
{
	if (geteuid() != 0)
		cr_skip_test("switching to user nobody needs root (CI runs as root)");
	if (lt_sh(NULL, "command -v setpriv >/dev/null") != 0)
		tf_skip_missing("setpriv (util-linux) is not installed");
}

/* The fabric as a real host has it: umad root-only, verbs open to all
 * (uscm-sim's default); the test's directory traversable by nobody. */
static inline void unpriv_start(void)
{
	need_root();
	dstart("ib", 2);
	cr_assert_eq(chmod(lt_dir, 0755), 0);
	cr_assert_eq(lt_sh(NULL, "mkdir -p %s/nlib && cp -a %s/lib/librdmacm.so* %s/sim/lib/*.so* %s/nlib/"
			      " && chmod -R a+rX %s/nlib",
			      lt_dir, lt_build(), lt_build(), lt_dir, lt_dir),
		     0);
	snprintf(g_nobody, sizeof(g_nobody),
		 "setpriv --reuid=65534 --regid=65534 --clear-groups env LD_LIBRARY_PATH='%s/nlib'", lt_dir);
}

#endif
