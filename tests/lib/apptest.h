/*
 * apptest.h - running unmodified application binaries (libfabric, UCX,
 * pyverbs) as a server on one simulated node and a client on another, for
 * tests/lib/test_lib_apps_*.c. Each program runs in the environment
 * lt_util_env() gives (the drop-ins, uscm's librdmacm, the fabric; the
 * sanitizer runtimes preloaded in the ASan build; in daemon mode the node's
 * uscmd) plus USCM_SIM_NODE, as `uscm-sim run --node` does.
 */
#ifndef USCM_APPTEST_H
#define USCM_APPTEST_H

#include "libtest.h"

/* Starts `cmd` on node n in the background (at most `secs` seconds);
 * its output goes to lt_dir/server.out, its exit status, once it is done,
 * to lt_dir/server.rc. */
static inline void app_server(int n, int secs, const char *cmd)
{
	cr_assert_eq(lt_sh(NULL,
			   "rm -f %s/server.rc; (USCM_SIM_NODE=node%d %s timeout %d %s >%s/server.out 2>&1;"
			   " echo $? >%s/server.rc) </dev/null >/dev/null 2>&1 &",
			   lt_dir, n, lt_util_env(), secs, cmd, lt_dir, lt_dir),
		     0);
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
	return lt_sh(out, "USCM_SIM_NODE=node%d %s timeout %d %s 2>&1 </dev/null", n, lt_util_env(),
		     secs, cmd);
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
