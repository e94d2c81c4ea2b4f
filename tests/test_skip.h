/*
 * test_skip.h - the three ways a test does not run all of itself
 * (docs/testing.md):
 *
 *   tf_skip_missing(fmt, ...)  a prerequisite the project provides itself
 *       is missing: a package scripts/install-deps.sh installs (tshark,
 *       rdmacm-utils, infiniband-diags, ...), a program of the full build,
 *       a file of the repository. A skip; under USCM_REQUIRE_ALL=1 (CI,
 *       .ci/run) a failure, so CI never turns green without its oracles.
 *   cr_skip_test(fmt, ...)     something CI cannot provide either (root,
 *       a user nobody, captures from outside the repository): a skip always.
 *   tf_deselect(fmt, ...)      a test the configuration did not ask for (an
 *       on-demand case, a filter): not run and not a reason to report the
 *       binary as skipped (tests/cr_main.c).
 *
 * A skipped test makes its binary exit 77, "Not Run (Skipped)" in CTest
 * (tests/cr_main.c). Each skip message is printed as "[SKIP] suite::test:".
 */
#ifndef USCM_TEST_SKIP_H
#define USCM_TEST_SKIP_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

/* The prefix of a deselected test's skip message (tests/cr_main.c). */
#define TF_DESELECTED "deselected: "

/* 1 under USCM_REQUIRE_ALL=1: every prerequisite the project provides must
 * be there (set by .ci/run). */
static inline int tf_require_all(void)
{
	const char *v = getenv("USCM_REQUIRE_ALL");

	return v && atoi(v) != 0;
}

/* The format must be a string literal (it is pasted after a prefix). */
#define tf_skip_missing(...)                                                                   \
	do {                                                                                   \
		if (tf_require_all())                                                          \
			cr_assert_fail("USCM_REQUIRE_ALL=1, missing is a failure: " __VA_ARGS__); \
		cr_skip_test(__VA_ARGS__);                                                     \
	} while (0)

/* A warning on stderr ("[WARN] ..."), for a test that carries on: a
 * known race of a third-party program run again, a check it could not
 * make. Not cr_log_warn: Criterion 2.4.1 makes the whole binary exit 1
 * once anything logged a warning, with every test passing — CTest then
 * said "Failed" under "Tested: 6 | Passing: 6 | Failing: 0" whenever
 * perftest's listen race was retried. */
#define tf_warn(...)                                                                           \
	do {                                                                                   \
		fprintf(stderr, "[WARN] " __VA_ARGS__);                                        \
		fputc('\n', stderr);                                                           \
	} while (0)

/* The same for a check inside a test that carries on without it (a decode
 * by tshark after the real assertions): a warning, or under
 * USCM_REQUIRE_ALL=1 a failure. */
#define tf_warn_missing(...)                                                                   \
	do {                                                                                   \
		if (tf_require_all())                                                          \
			cr_assert_fail("USCM_REQUIRE_ALL=1, missing is a failure: " __VA_ARGS__); \
		tf_warn(__VA_ARGS__);                                                          \
	} while (0)

#define tf_deselect(...) cr_skip_test(TF_DESELECTED __VA_ARGS__)

#endif
