/*
 * test_fixtures.h - small helpers several test suites share: running a
 * shell command and collecting its output, and a per-test scratch directory.
 */
#ifndef USCM_TEST_FIXTURES_H
#define USCM_TEST_FIXTURES_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/test_skip.h"

/* Runs the printf-formatted shell command; returns its exit status (or -1).
 * Its standard output goes to *out (malloc'd) when out is not NULL. */
static inline int tf_vsh(char **out, const char *fmt, va_list ap)
{
	char cmd[8192];
	FILE *fp;
	size_t n = 0, cap = 0;
	char *buf = NULL;
	int st;

	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	fp = popen(cmd, "r");
	if (!fp)
		return -1;
	for (;;) {
		if (n + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
		}
		size_t k = fread(buf + n, 1, cap - n - 1, fp);
		if (k == 0)
			break;
		n += k;
	}
	if (buf)
		buf[n] = 0;
	st = pclose(fp);
	if (out)
		*out = buf ? buf : strdup("");
	else
		free(buf);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* tf_vsh with printf arguments: the one shell runner of every suite
 * (libtest.h's lt_sh and simtest.h's st_sh are this). */
static inline int tf_sh(char **out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int tf_sh(char **out, const char *fmt, ...)
{
	va_list ap;
	int st;

	va_start(ap, fmt);
	st = tf_vsh(out, fmt, ap);
	va_end(ap);
	return st;
}

/* A scratch directory made on first use (tf_path) under /tmp/<prefix>XXXXXX
 * and removed, files included, by tf_remove (a suite's .fini). */
static inline void tf_remove(char dir[64])
{
	DIR *d;
	struct dirent *e;
	char p[512];

	if (!dir[0] || !(d = opendir(dir)))
		return;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	closedir(d);
	rmdir(dir);
}

/* dir/name, in one of four rotating static buffers. */
static inline const char *tf_path(char dir[64], const char *prefix, const char *name)
{
	static char bufs[4][256];
	static int k;
	char *b = bufs[k++ & 3];

	if (!dir[0]) {
		snprintf(dir, 64, "/tmp/%sXXXXXX", prefix);
		cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
	}
	snprintf(b, 256, "%s/%s", dir, name);
	return b;
}

static inline int tf_is_pcap_name(const struct dirent *e)
{
	size_t n = strlen(e->d_name);

	return n > 5 && !strcmp(e->d_name + n - 5, ".pcap");
}

/* Every *.pcap of one directory, sorted, appended to (*v, *n) as malloc'd
 * paths; nothing when the directory is absent. */
static inline void tf_pcaps_in(const char *dir, char ***v, size_t *n)
{
	struct dirent **ents;
	int k = scandir(dir, &ents, tf_is_pcap_name, alphasort);

	for (int i = 0; i < k; i++) {
		char *p = malloc(strlen(dir) + strlen(ents[i]->d_name) + 2);

		cr_assert_not_null(p);
		sprintf(p, "%s/%s", dir, ents[i]->d_name);
		*v = realloc(*v, (*n + 1) * sizeof(**v));
		cr_assert_not_null(*v);
		(*v)[(*n)++] = p;
		free(ents[i]);
	}
	if (k >= 0)
		free(ents);
}

/* The reference captures, kernel CMs on real or soft devices: the ones in
 * the repository (tests/captures/: the kernel tier's kernel<->kernel
 * checks, README.md there), then the shared ones (third-party data, kept
 * outside the repository next to the checkout in the project's workspace:
 * $USCM_SOURCE_DIR/../shared/reference/captures, absent from a bare
 * checkout). */
static inline void tf_reference_captures(char ***v, size_t *n)
{
	/* CTest runs them as tests of their own (tests/CMakeLists.txt) */
	if (getenv("USCM_OUTSIDE_CAPTURES") && !strcmp(getenv("USCM_OUTSIDE_CAPTURES"), "elsewhere"))
		tf_deselect("reference captures: CTest test_outside_captures_*");
	const char *src = getenv("USCM_SOURCE_DIR");
	char dir[4096];

	snprintf(dir, sizeof(dir), "%s/tests/captures", src && *src ? src : ".");
	tf_pcaps_in(dir, v, n);
	snprintf(dir, sizeof(dir), "%s/../shared/reference/captures", src && *src ? src : ".");
	tf_pcaps_in(dir, v, n);
}

#endif
