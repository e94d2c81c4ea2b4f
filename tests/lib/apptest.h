/*
 * apptest.h - running unmodified application binaries (libfabric, UCX,
 * pyverbs) as a server on one simulated node and a client on another, for
 * tests/lib/test_lib_apps_*.c. Each program runs through `uscm-sim run
 * --node` alone (app_run), as a user would run it.
 */
#ifndef USCM_APPTEST_H
#define USCM_APPTEST_H

#include "libtest.h"

/* The shell prefix that runs a command as node n for at most secs
 * seconds: `uscm-sim run --node node<n> --`, which sets the fabric's
 * environment (drop-ins, uscm's librdmacm, the node's uscmd in daemon
 * mode) and joins its network namespace (--netns), and nothing else —
 * but the sanitizer runtimes preloaded in the ASan build (lt_util_env). */
static inline const char *app_run(int n, int secs)
{
	static char buf[2048];
	const char *pre = "";

#ifdef USCM_SANITIZED
	/* lt_util_env's LD_PRELOAD='…' ASAN_OPTIONS=…, and not the rest */
	const char *e = lt_util_env(), *lp = strstr(e, " LD_PRELOAD=");
	static char san[1024];

	if (lp) {
		const char *end = strstr(lp, "detect_leaks=0");

		snprintf(san, sizeof(san), "%.*s", end ? (int)(end - lp) + 14 : 0, lp);
		pre = san;
	}
#endif
	snprintf(buf, sizeof(buf), "USCM_SIM_DIR='%s'%s timeout %d %s/uscm-sim run --node node%d --",
		 getenv("USCM_SIM_DIR"), pre, secs, lt_bin(), n);
	return buf;
}

/* Starts a fabric for applications: two nodes, in-process or (under
 * USCM_TEST_DAEMON=1) with a uscmd per node, with --netns when asked (a
 * skip when this process may not make network namespaces: not root). */
static inline void app_fabric_start(const char *link, int netns)
{
	const char *d = getenv("USCM_TEST_DAEMON");
	char opts[64];

	if (netns && (geteuid() != 0 || lt_sh(NULL, "unshare -n true >/dev/null 2>&1") != 0))
		cr_skip_test("--netns needs root (a network namespace per fabric)");
	if (netns && lt_sh(NULL, "command -v ip >/dev/null") != 0)
		tf_skip_missing("ip (Debian iproute2) is not installed: uscm-sim --netns needs it");
	snprintf(opts, sizeof(opts), "%s%s", d && atoi(d) ? "" : "--no-uscmd",
		 netns ? " --netns" : "");
	lt_fabric_start_opts(link, 2, opts);
}

/* Starts `cmd` on node n in the background (at most `secs` seconds);
 * its output goes to lt_dir/server.out, its exit status, once it is done,
 * to lt_dir/server.rc. */
static inline void app_server(int n, int secs, const char *cmd)
{
	cr_assert_eq(lt_sh(NULL,
			   "rm -f %s/server.rc; (%s %s >%s/server.out 2>&1;"
			   " echo $? >%s/server.rc) </dev/null >/dev/null 2>&1 &",
			   lt_dir, app_run(n, secs), cmd, lt_dir, lt_dir),
		     0);
}

/* Waits (ms) until a TCP port listens in the fabric's network (fabtests'
 * and UCX's out-of-band connections); 1 if it does. */
static inline int app_tcp_listens(int port, int ms)
{
	char cmd[2400];

	snprintf(cmd, sizeof(cmd), "%s ss -Hltn 'sport = :%d' 2>/dev/null | grep -q LISTEN",
		 app_run(1, 5), port);
	return lt_wait_until(lt_sh(NULL, "%s", cmd) == 0, ms);
}

/* The server's output so far (malloc'd). */
static inline char *app_server_out(void)
{
	char *out = NULL;

	lt_sh(&out, "cat %s/server.out 2>/dev/null", lt_dir);
	return out;
}

/* Waits (ms) until the server's output contains text; 1 if it did. */
static inline int app_server_says(const char *text, int ms)
{
	char path[300];

	snprintf(path, sizeof(path), "%s/server.out", lt_dir);
	return lt_wait_until(lt_file_has(path, text), ms);
}

/* Runs `cmd` on node n (at most `secs` seconds); its exit status, its
 * output (stdout and stderr) in *out (malloc'd). */
static inline int app_client(int n, int secs, const char *cmd, char **out)
{
	return lt_sh(out, "%s %s 2>&1 </dev/null", app_run(n, secs), cmd);
}

/* The server's exit status once it is done (waiting ms), -1 if it is not. */
static inline int app_server_rc(int ms)
{
	char path[300], *rc = NULL;
	int v = -1;

	snprintf(path, sizeof(path), "%s/server.rc", lt_dir);
	if (!lt_wait_until(lt_file_size(path) > 0, ms))
		return -1;
	if (lt_sh(&rc, "cat %s", path) == 0 && rc)
		v = atoi(rc);
	free(rc);
	return v;
}

/* The source directory (the tests' scripts): USCM_SOURCE_DIR (CTest sets
 * it), else the parent of build/. */
static inline const char *app_srcdir(void)
{
	static char buf[1100];
	const char *s = getenv("USCM_SOURCE_DIR");

	if (s && *s)
		return s;
	snprintf(buf, sizeof(buf), "%.1000s/..", lt_build());
	return buf;
}

#endif
