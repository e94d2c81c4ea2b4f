/*
 * Installation as users get it (docs/install.md):
 *
 *   manpages  every tool's man page (man/) has the sections a man page has,
 *             documents in OPTIONS every option the tool accepts (read from
 *             its source: getopt strings, struct option tables, strcmp()
 *             of an argument against "-x" / "--name"; and from its --help)
 *             and nothing it does not accept, and renders without a
 *             warning (groff -ww, man -l);
 *   install   `cmake --install` into a scratch prefix, then the installed
 *             tools run from there with nothing of the build tree in their
 *             environment: uscm-decode on a corpus capture, a tiny
 *             uscm-bench run (its engine helper from libexec), `uscm-sim up`
 *             (its SM from ${libexecdir}/uscm, uscmd from sbin), an
 *             unmodified rping across two nodes loading the installed
 *             librdmacm and drop-ins, `uscm-sim down`, `man -l` of an
 *             installed page.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <limits.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/test_fixtures.h"

struct tool {
	const char *name;
	const char *page;        /* man/NAME.SECTION */
	const char *sources[3];  /* where its arguments are parsed */
	const char *help;        /* the arguments that print its usage */
};

static const struct tool tools[] = {
	{ "uscm-decode", "uscm-decode.1", { "tools/uscm_decode.c" }, "--help" },
	{ "uscm-replay", "uscm-replay.1", { "tools/uscm_replay.c" }, "--help" },
	{ "uscm-sim", "uscm-sim.1", { "sim/uscm_sim.c" }, "--help" },
	{ "uscm-bench", "uscm-bench.1", { "tools/uscm_bench.c" }, "--help" },
	{ "uscm-hostile", "uscm-hostile.1", { "tools/uscm_hostile.c" }, "--help" },
	{ "uscmd", "uscmd.8", { "daemon/uscmd.c" }, "--help" },
};
#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

static const char *src_dir(void)
{
	const char *s = getenv("USCM_SOURCE_DIR");

	cr_assert(s && *s, "run through ctest (USCM_SOURCE_DIR)");
	return s;
}

static const char *bin_dir(void)
{
	const char *b = getenv("USCM_BIN_DIR");

	return b && *b ? b : USCM_TEST_BIN_DIR;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s;
	long n;

	cr_assert_not_null(f, "cannot read %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	s = malloc((size_t)n + 1);
	cr_assert(s);
	cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
	s[n] = 0;
	fclose(f);
	return s;
}

/* ---- a set of option names ----------------------------------------------- */

struct optset {
	char name[128][40];
	int n;
};

static void opt_add(struct optset *s, const char *o, size_t len)
{
	if (len >= sizeof(s->name[0]) || len < 2)
		return;
	for (int i = 0; i < s->n; i++)
		if (strlen(s->name[i]) == len && !strncmp(s->name[i], o, len))
			return;
	cr_assert_lt(s->n, 128);
	memcpy(s->name[s->n], o, len);
	s->name[s->n][len] = 0;
	s->n++;
}

static int opt_has(const struct optset *s, const char *o)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->name[i], o))
			return 1;
	return 0;
}

/* Every match of group `grp` of re in text, with `prefix` in front. */
static void opt_scan(struct optset *s, const char *text, const char *re, int grp, const char *prefix)
{
	regex_t r;
	regmatch_t m[4];
	char buf[64];

	cr_assert_eq(regcomp(&r, re, REG_EXTENDED | REG_NEWLINE), 0, "bad regex %s", re);
	for (const char *p = text; regexec(&r, p, 4, m, p == text ? 0 : REG_NOTBOL) == 0;
	     p += m[0].rm_eo > 0 ? m[0].rm_eo : 1) {
		size_t len = (size_t)(m[grp].rm_eo - m[grp].rm_so);

		if (len + strlen(prefix) >= sizeof(buf))
			continue;
		snprintf(buf, sizeof(buf), "%s%.*s", prefix, (int)len, p + m[grp].rm_so);
		opt_add(s, buf, strlen(buf));
	}
	regfree(&r);
}

/* The options a tool's source accepts. */
static void source_options(const struct tool *t, struct optset *s)
{
	char path[PATH_MAX];

	for (int i = 0; i < 3 && t->sources[i]; i++) {
		char *text, *p;
		regex_t r;
		regmatch_t m[2];

		snprintf(path, sizeof(path), "%s/%s", src_dir(), t->sources[i]);
		text = slurp(path);
		/* struct option rows: { "name", required_argument, ... } */
		opt_scan(s, text, "\\{ *\"([a-z][a-z0-9-]*)\", *(no|required|optional)_argument", 1, "--");
		/* hand-made parsers: strcmp(a, "--name") / strcmp(argv[i], "-h") */
		opt_scan(s, text, "strcmp\\([][a-zA-Z0-9_>.+ -]+, *\"(--?[a-zA-Z][a-zA-Z0-9-]*)\"\\)", 1, "");
		/* getopt strings: getopt_long(argc, argv, "n:w:s:h", ...) */
		cr_assert_eq(regcomp(&r, "getopt(_long)?\\([^,]+, *[^,]+, *\"([^\"]*)\"", REG_EXTENDED), 0);
		for (p = text; regexec(&r, p, 2, m, 0) == 0; p += m[0].rm_eo) {
			regmatch_t g[3];

			regexec(&r, p, 3, g, 0);
			for (regoff_t k = g[2].rm_so; k < g[2].rm_eo; k++)
				if (isalnum((unsigned char)p[k])) {
					char o[3] = { '-', p[k], 0 };

					opt_add(s, o, 2);
				}
		}
		regfree(&r);
		free(text);
	}
}

/* The options a tool's --help names. */
static void help_options(const struct tool *t, struct optset *s)
{
	char *out = NULL;
	int rc = tf_sh(&out, "'%s/%s' %s 2>&1", bin_dir(), t->name, t->help);

	cr_assert_eq(rc, 0, "%s %s exited %d:\n%s", t->name, t->help, rc, out);
	cr_assert_not_null(strstr(out, "usage"), "%s %s printed no usage:\n%s", t->name, t->help, out);
	opt_scan(s, out, "(^|[][ (|,])(--?[a-zA-Z][a-zA-Z0-9-]*)", 2, "");
	free(out);
}

/* ---- the man page -------------------------------------------------------- */

/* The roff source as text to search: \- is -, font escapes and quotes go. */
static char *roff_plain(const char *src)
{
	char *out = malloc(strlen(src) + 1), *o = out;

	cr_assert(out);
	for (const char *p = src; *p;) {
		if (p[0] == '\\' && p[1] == '-') {
			*o++ = '-';
			p += 2;
		} else if (p[0] == '\\' && p[1] == 'f' && p[2] == '[') {
			p = strchr(p, ']') ? strchr(p, ']') + 1 : p + 3;
		} else if (p[0] == '\\' && p[1] == 'f' && p[2]) {
			p += 3;
		} else if (*p == '"') {
			p++;
		} else {
			*o++ = *p++;
		}
	}
	*o = 0;
	return out;
}

/* The text of section `name` (".SH NAME" up to the next .SH), malloc'd, or NULL. */
static char *section(const char *plain, const char *name)
{
	char head[64];
	const char *b, *e;
	char *s;

	snprintf(head, sizeof(head), "\n.SH %s\n", name);
	b = strstr(plain, head);
	if (!b)
		return NULL;
	b += strlen(head);
	e = strstr(b, "\n.SH ");
	if (!e)
		e = b + strlen(b);
	s = strndup(b, (size_t)(e - b));
	cr_assert(s);
	return s;
}

/* 1 when option o stands in text as a word of its own. */
static int mentions(const char *text, const char *o)
{
	size_t n = strlen(o);

	for (const char *p = text; (p = strstr(p, o)); p++) {
		char before = p == text ? ' ' : p[-1], after = p[n];

		if ((isalnum((unsigned char)before) || before == '-') ||
		    isalnum((unsigned char)after) || after == '-')
			continue;
		return 1;
	}
	return 0;
}

static char *page(const struct tool *t)
{
	char path[PATH_MAX], *src, *plain;

	snprintf(path, sizeof(path), "%s/man/%s", src_dir(), t->page);
	src = slurp(path);
	plain = roff_plain(src);
	free(src);
	return plain;
}

TestSuite(manpages, .timeout = 60);

Test(manpages, have_every_section)
{
	static const char *const want[] = { "NAME",  "SYNOPSIS", "DESCRIPTION", "OPTIONS",
					    "ENVIRONMENT", "EXIT STATUS", "EXAMPLES", "SEE ALSO" };

	for (size_t i = 0; i < NTOOLS; i++) {
		char *p = page(&tools[i]), *name;

		for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
			char *s = section(p, want[k]);

			cr_expect_not_null(s, "%s has no %s section", tools[i].page, want[k]);
			cr_expect(!s || strspn(s, " \n") < strlen(s), "%s: %s is empty", tools[i].page,
				  want[k]);
			free(s);
		}
		/* NAME is "tool - what it does", as whatis / apropos read it */
		name = section(p, "NAME");
		if (name)
			cr_expect(!strncmp(name, tools[i].name, strlen(tools[i].name)) &&
					  !strncmp(name + strlen(tools[i].name), " - ", 3),
				  "%s: NAME is not '%s - ...': %s", tools[i].page, tools[i].name, name);
		free(name);
		free(p);
	}
}

/* What the source or --help accepts, OPTIONS documents. */
Test(manpages, document_every_option_the_tool_accepts)
{
	for (size_t i = 0; i < NTOOLS; i++) {
		const struct tool *t = &tools[i];
		struct optset src = { .n = 0 }, help = { .n = 0 };
		char *p = page(t), *opts = section(p, "OPTIONS");
		char missing[2048] = "";

		source_options(t, &src);
		help_options(t, &help);
		cr_assert_not_null(opts, "%s has no OPTIONS", t->page);
		/* the extraction itself works: each tool has --help in its source */
		cr_assert(opt_has(&src, "--help"), "%s: no --help found in its source (%d options)",
			  t->name, src.n);
		for (int k = 0; k < src.n + help.n; k++) {
			const char *o = k < src.n ? src.name[k] : help.name[k - src.n];

			if (!mentions(opts, o) && !strstr(missing, o))
				snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s", o);
		}
		cr_expect_eq(missing[0], 0, "%s accepts options its page's OPTIONS does not document:%s",
			     t->name, missing);
		/* and its --help names nothing the source does not accept */
		for (int k = 0; k < help.n; k++)
			cr_expect(opt_has(&src, help.name[k]), "%s --help names %s, which its source does not accept",
				  t->name, help.name[k]);
		free(opts);
		free(p);
	}
}

/* An option OPTIONS describes (the tag of a .TP item) is one the tool takes. */
Test(manpages, document_no_option_the_tool_rejects)
{
	for (size_t i = 0; i < NTOOLS; i++) {
		const struct tool *t = &tools[i];
		struct optset src = { .n = 0 }, tags = { .n = 0 };
		char *p = page(t), *opts = section(p, "OPTIONS");

		source_options(t, &src);
		cr_assert_not_null(opts);
		for (const char *l = opts; (l = strstr(l, ".TP\n")); l += 4) {
			const char *tag = l + 4, *end = strchr(tag, '\n');
			char line[256];

			snprintf(line, sizeof(line), "%.*s", (int)(end ? end - tag : (long)strlen(tag)), tag);
			opt_scan(&tags, line, "(^|[ ,(|])(--?[a-zA-Z][a-zA-Z0-9-]*)", 2, "");
		}
		cr_expect_gt(tags.n, 0, "%s: no option found in the tags of OPTIONS", t->page);
		for (int k = 0; k < tags.n; k++)
			cr_expect(opt_has(&src, tags.name[k]), "%s documents %s, which %s does not accept",
				  t->page, tags.name[k], t->name);
		free(opts);
		free(p);
	}
}

Test(manpages, render_without_warnings)
{
	if (tf_sh(NULL, "command -v groff >/dev/null && command -v man >/dev/null") != 0)
		tf_skip_missing("groff / man are not installed (Debian groff-base, man-db)");
	for (size_t i = 0; i < NTOOLS; i++) {
		char *out = NULL;
		int rc = tf_sh(&out, "cd '%s/man' && groff -man -Tutf8 -ww -z '%s' 2>&1", src_dir(),
			       tools[i].page);

		cr_expect(rc == 0 && !out[0], "groff -man -ww %s (exit %d):\n%s", tools[i].page, rc, out);
		free(out);
		/* man -l: what a user sees; its warnings on stderr only */
		rc = tf_sh(&out, "cd '%s/man' && MANWIDTH=80 man -l '%s' 2>&1 >/dev/null", src_dir(),
			   tools[i].page);
		cr_expect(rc == 0 && !out[0], "man -l %s (exit %d):\n%s", tools[i].page, rc, out);
		free(out);
		if (tf_sh(NULL, "command -v mandoc >/dev/null") == 0) {
			rc = tf_sh(&out, "cd '%s/man' && mandoc -Tlint -Wwarning '%s' 2>&1", src_dir(),
				   tools[i].page);
			cr_expect(rc == 0 && !out[0], "mandoc -Tlint %s (exit %d):\n%s", tools[i].page, rc,
				  out);
			free(out);
		}
	}
}

/* ---- cmake --install, then the installed tree on its own ----------------- */

static char dir[64];
static char prefix[128];

/* The environment of a command run from the prefix: nothing that points
 * into the build tree (CTest's LD_LIBRARY_PATH, USCM_BIN_DIR, ...). */
#define CLEAN_ENV "env -u LD_LIBRARY_PATH -u USCM_BIN_DIR -u USCM_SIM_LIBDIR -u USCM_SIM_DIR " \
		  "-u USCM_SOCKET -u USCM_MODE -u USCM_SIM_NODE -u USCM_HOSTS"

static void install_setup(void)
{
	const char *b = getenv("USCM_BUILD_DIR"), *c = getenv("USCM_CMAKE");
	char *out = NULL, p[PATH_MAX];
	int rc;

	cr_assert(b && c, "run through ctest (USCM_BUILD_DIR / USCM_CMAKE)");
	snprintf(p, sizeof(p), "%s/bin/uscm-sim", b);
	if (access(p, X_OK) != 0)
		tf_skip_missing("%s is not built: the full build first (`cmake --build build`)", p);
	tf_path(dir, "uscm-inst-", "");
	snprintf(prefix, sizeof(prefix), "%s/prefix", dir);
	rc = tf_sh(&out, "'%s' --install '%s' --prefix '%s' 2>&1", c, b, prefix);
	cr_assert_eq(rc, 0, "cmake --install failed:\n%s", out);
	free(out);
}

static void install_teardown(void)
{
	if (dir[0]) {
		tf_sh(NULL, CLEAN_ENV " '%s/bin/uscm-sim' down --dir '%s/f' >/dev/null 2>&1", prefix, dir);
		tf_sh(NULL, "rm -rf '%s'", dir);
	}
}

TestSuite(install, .init = install_setup, .fini = install_teardown, .timeout = 120);

static void expect_exec(const char *rel)
{
	char p[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", prefix, rel);
	cr_expect(stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0,
		  "%s is not an installed executable", p);
}

Test(install, puts_every_file_in_its_place)
{
	static const char *const exes[] = {
		"bin/uscm-decode",	   "bin/uscm-replay",		 "bin/uscm-sim",
		"bin/uscm-bench",	   "bin/uscm-hostile",		 "sbin/uscmd",
		"libexec/uscm/uscm-sim-sm", "libexec/uscm/uscm-bench-engine",
	};
	static const char *const files[] = {
		"lib/uscm/sim/libibumad.so.3", "lib/uscm/sim/libibverbs.so.1", "lib/librdmacm.so.1",
		"share/man/man1/uscm-decode.1", "share/man/man1/uscm-replay.1",
		"share/man/man1/uscm-sim.1",	"share/man/man1/uscm-bench.1",
		"share/man/man1/uscm-hostile.1", "share/man/man8/uscmd.8",
	};
	char p[PATH_MAX], *out = NULL;

	for (size_t i = 0; i < sizeof(exes) / sizeof(exes[0]); i++)
		expect_exec(exes[i]);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", prefix, files[i]);
		cr_expect_eq(access(p, R_OK), 0, "%s is not installed", p);
	}
	/* the drop-ins never where the loader or a linker looks: no
	 * libibverbs / libibumad in ${libdir} itself, no -dev links */
	cr_expect_eq(tf_sh(&out, "cd '%s' && ls lib/libibverbs* lib/libibumad* lib/uscm/sim/*.so 2>/dev/null",
			   prefix),
		     2, "drop-ins or their links where the loader finds them:\n%s", out);
	free(out);
	/* the helpers are no commands: not on PATH */
	snprintf(p, sizeof(p), "%s/bin/uscm-sim-sm", prefix);
	cr_expect_neq(access(p, F_OK), 0, "%s: the SM helper belongs in libexec", p);
	/* an installed page, as a user reads it */
	cr_expect_eq(tf_sh(&out, "MANWIDTH=80 man -l '%s/share/man/man1/uscm-sim.1' 2>&1", prefix), 0, "%s",
		     out);
	cr_expect_not_null(strstr(out, "uscm-sim - start, inspect"), "man -l of the installed page:\n%s", out);
	free(out);
}

Test(install, decode_runs_from_the_prefix)
{
	char *out = NULL;
	int rc = tf_sh(&out, "cd / && " CLEAN_ENV " '%s/bin/uscm-decode' '%s/tests/corpus/pcap/rocev2_mads.pcap' 2>&1",
		       prefix, src_dir());

	cr_expect_eq(rc, 0, "installed uscm-decode exited %d:\n%s", rc, out);
	cr_expect_not_null(strstr(out, "REP(0x0013)"), "%s", out);
	cr_expect_not_null(strstr(out, "3 MADs"), "%s", out);
	free(out);
}

/* uscm-bench finds uscm-sim, its drop-ins and librdmacm, and
 * libexec/uscm/uscm-bench-engine from the prefix (a tiny run). */
Test(install, bench_runs_from_the_prefix)
{
	char *out = NULL;
	char pid[16];
	int rc;

	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("USCM_SIM_WATCH_PID", pid, 1);
	rc = tf_sh(&out, "cd / && " CLEAN_ENV " timeout 60 '%s/bin/uscm-bench' -n 10 -s 3 --mad 10 "
			 "--engine 100 --no-tcp 2>&1", prefix);
	cr_expect_eq(rc, 0, "installed uscm-bench exited %d:\n%s", rc, out);
	cr_expect_not_null(strstr(out, "fabric MAD round trip"), "%s", out);
	cr_expect_not_null(strstr(out, "engine only"), "no uscm-bench-engine figures:\n%s", out);
	free(out);
}

/* /proc/PID/exe of the pid after `key` in text (e.g. "SM/SA: pid ") into buf. */
static int exe_of(const char *text, const char *key, char *buf, size_t len)
{
	const char *p = strstr(text, key);
	char link[64];
	ssize_t n;

	if (!p)
		return -1;
	snprintf(link, sizeof(link), "/proc/%d/exe", atoi(p + strlen(key)));
	n = readlink(link, buf, len - 1);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return 0;
}

/* The environment of an unmodified rping in the sanitized build: the
 * installed librdmacm carries ASan/UBSan, rping does not (libtest.h). */
static const char *rping_env(void)
{
#ifdef USCM_SANITIZED
	static char buf[PATH_MAX * 2 + 64];
	char *a = NULL, *u = NULL;

	tf_sh(&a, "gcc -print-file-name=libasan.so | tr -d '\\n'");
	tf_sh(&u, "gcc -print-file-name=libubsan.so | tr -d '\\n'");
	snprintf(buf, sizeof(buf), "env LD_PRELOAD='%s %s' ASAN_OPTIONS=detect_leaks=0", a, u);
	free(a);
	free(u);
	return buf;
#else
	return "env";
#endif
}

Test(install, sim_and_an_unmodified_rping_run_from_the_prefix)
{
	char *out = NULL, want[2 * PATH_MAX + 64], exe[PATH_MAX], real[PATH_MAX], f[128];
	char pid[16];
	int rc = -1;

	if (tf_sh(NULL, "command -v rping >/dev/null") != 0)
		tf_skip_missing("rping (Debian rdmacm-utils) is not installed");
	snprintf(f, sizeof(f), "%s/f", dir);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("USCM_SIM_WATCH_PID", pid, 1); /* no fabric outlives this test */
	cr_assert(realpath(prefix, real));

	rc = tf_sh(&out, "cd / && " CLEAN_ENV " '%s/bin/uscm-sim' up --dir '%s' 2>&1", prefix, f);
	cr_assert_eq(rc, 0, "installed uscm-sim up failed:\n%s", out);
	snprintf(want, sizeof(want), "export LD_LIBRARY_PATH=%s/lib/uscm/sim:%s/lib\n", real, real);
	cr_expect_not_null(strstr(out, want), "uscm-sim up printed no %s:\n%s", want, out);
	free(out);

	/* the SM and the uscmds it started are the installed ones */
	cr_assert_eq(tf_sh(&out, CLEAN_ENV " '%s/bin/uscm-sim' status --dir '%s' 2>&1", prefix, f), 0, "%s",
		     out);
	cr_expect_eq(exe_of(out, "SM/SA: pid ", exe, sizeof(exe)), 0, "no SM pid in:\n%s", out);
	snprintf(want, sizeof(want), "%s/libexec/uscm/uscm-sim-sm", real);
	cr_expect_str_eq(exe, want, "the SM runs %s, not the installed %s", exe, want);
	cr_expect_eq(exe_of(out, "node2   pid ", exe, sizeof(exe)), 0, "no uscmd of node2 in:\n%s", out);
	snprintf(want, sizeof(want), "%s/sbin/uscmd", real);
	cr_expect_str_eq(exe, want, "node2's uscmd runs %s, not the installed %s", exe, want);
	free(out);

	/* what rping loads under `uscm-sim run`: all of it from the prefix */
	rc = tf_sh(&out, CLEAN_ENV " '%s/bin/uscm-sim' run --dir '%s' --node node1 -- "
			 "sh -c 'ldd \"$(command -v rping)\"' 2>&1", prefix, f);
	cr_assert_eq(rc, 0, "%s", out);
	snprintf(want, sizeof(want), "librdmacm.so.1 => %s/lib/librdmacm.so.1 ", real);
	cr_expect_not_null(strstr(out, want), "rping does not load the installed librdmacm:\n%s", out);
	snprintf(want, sizeof(want), "libibverbs.so.1 => %s/lib/uscm/sim/libibverbs.so.1 ", real);
	cr_expect_not_null(strstr(out, want), "rping does not load the installed drop-in:\n%s", out);
	snprintf(want, sizeof(want), "libibumad.so.3 => %s/lib/uscm/sim/libibumad.so.3 ", real);
	cr_expect_not_null(strstr(out, want), "rping does not load the installed drop-in:\n%s", out);
	free(out);

	/* rping -s on node2, rping -c on node1 (again while the server does
	 * not listen yet: REJECTED), through the nodes' installed uscmds */
	cr_assert_eq(tf_sh(NULL,
			   "(" CLEAN_ENV " timeout 60 '%s/bin/uscm-sim' run --dir '%s' --node node2 -- "
			   "%s rping -s -C 3 >'%s/server.out' 2>&1; echo $? >'%s/server.rc') "
			   ">/dev/null 2>&1 &",
			   prefix, f, rping_env(), dir, dir),
		     0);
	for (int i = 0;; i++) {
		rc = tf_sh(&out, CLEAN_ENV " USCM_CM_RESPONSE_TIMEOUT=14 timeout 60 '%s/bin/uscm-sim' run "
				 "--dir '%s' --node node1 -- %s rping -c -a 127.10.0.2 -v -C 3 2>&1",
			   prefix, f, rping_env());
		if (rc == 0 || i == 50 || (!strstr(out, "REJECTED") && !strstr(out, "UNREACHABLE")))
			break;
		free(out);
		usleep(100 * 1000);
	}
	cr_expect_eq(rc, 0, "rping -c through the installed tree exited %d:\n%s", rc, out);
	cr_expect_not_null(strstr(out, "ping data: rdma-ping-2"), "rping -c:\n%s", out);
	free(out);
	out = NULL;
	for (int i = 0; i < 100 && tf_sh(NULL, "test -s '%s/server.rc'", dir) != 0; i++)
		usleep(100 * 1000);
	tf_sh(&out, "cat '%s/server.rc' '%s/server.out' 2>&1", dir, dir);
	cr_expect_eq(out[0], '0', "rping -s exited:\n%s", out);
	free(out);

	rc = tf_sh(&out, CLEAN_ENV " '%s/bin/uscm-sim' down --dir '%s' 2>&1", prefix, f);
	cr_expect_eq(rc, 0, "installed uscm-sim down failed:\n%s", out);
	free(out);
	snprintf(want, sizeof(want), "%s/fabric.state", f);
	cr_expect_neq(access(want, F_OK), 0, "uscm-sim down left %s", want);
}
