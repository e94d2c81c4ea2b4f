/*
 * sim_paths.h - where the fabric tool's companions are: the drop-in
 * libibumad.so.3 / libibverbs.so.1, uscm's librdmacm.so.1, the SM helper
 * (uscm-sim-sm) and the host service (uscmd), found from the running
 * binary's own location (/proc/self/exe), never from a path compiled in:
 *
 *   build tree (BIN = build/bin, next to build/CMakeCache.txt)
 *     drop-ins  BIN/../sim/lib        librdmacm  BIN/../lib
 *     helpers   BIN                   uscmd      BIN
 *   installed (BIN = ${bindir}; docs/install.md)
 *     drop-ins  ${libdir}/uscm/sim    librdmacm  ${libdir}
 *     helpers   ${libexecdir}/uscm    uscmd      ${sbindir}
 *
 * The installed places are relative to ${bindir} (USCM_REL_* below, set by
 * the top-level CMakeLists.txt from GNUInstallDirs), so a tree installed
 * with `cmake --install build --prefix P` or moved as a whole works from
 * wherever it is. The drop-ins live in a private directory: only programs
 * started through uscm-sim (LD_LIBRARY_PATH) see them, never the host's.
 *
 * Header-only: used by sim/uscm_sim.c and tools/uscm_bench.c.
 */
#ifndef USCM_SIM_PATHS_H
#define USCM_SIM_PATHS_H

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* From ${bindir} to ... (defaults: GNUInstallDirs under any prefix but /usr) */
#ifndef USCM_REL_SIMLIB
#define USCM_REL_SIMLIB "../lib/uscm/sim"
#endif
#ifndef USCM_REL_LIBDIR
#define USCM_REL_LIBDIR "../lib"
#endif
#ifndef USCM_REL_LIBEXEC
#define USCM_REL_LIBEXEC "../libexec/uscm"
#endif
#ifndef USCM_REL_SBIN
#define USCM_REL_SBIN "../sbin"
#endif

enum sim_path {
	SIM_PATH_SIMLIB,  /* the drop-in libibumad.so.3 / libibverbs.so.1 */
	SIM_PATH_LIBDIR,  /* uscm's librdmacm.so.1 */
	SIM_PATH_LIBEXEC, /* uscm-sim-sm, uscm-bench-engine */
	SIM_PATH_SBIN,    /* uscmd */
};

/* The directory of the running binary into buf: 0, or -1. */
static inline int sim_exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n <= 0)
		return -1;
	buf[n] = 0;
	slash = strrchr(buf, '/');
	if (!slash)
		return -1;
	*slash = 0;
	return 0;
}

/* 1 when the running binary is in a build tree's bin/ (its parent holds
 * CMakeCache.txt), 0 when it is installed. */
static inline int sim_in_build_tree(void)
{
	char ed[PATH_MAX], p[PATH_MAX + 32];

	if (sim_exe_dir(ed, sizeof(ed)) < 0)
		return 0;
	snprintf(p, sizeof(p), "%s/../CMakeCache.txt", ed);
	return access(p, F_OK) == 0;
}

/* The directory `what` into buf (not resolved: BIN/../lib/uscm/sim); 0,
 * or -1 when the binary's own location is unknown. */
static inline int sim_path(enum sim_path what, char *buf, size_t len)
{
	static const char *const build[] = { "../sim/lib", "../lib", ".", "." };
	static const char *const inst[] = { USCM_REL_SIMLIB, USCM_REL_LIBDIR, USCM_REL_LIBEXEC,
					    USCM_REL_SBIN };
	char ed[PATH_MAX];
	const char *rel;

	if (sim_exe_dir(ed, sizeof(ed)) < 0)
		return -1;
	rel = sim_in_build_tree() ? build[what] : inst[what];
	if (!strcmp(rel, "."))
		return snprintf(buf, len, "%s", ed) < (int)len ? 0 : -1;
	return snprintf(buf, len, "%s/%s", ed, rel) < (int)len ? 0 : -1;
}

/* The file `name` in directory `what` into buf: 0, or -1. */
static inline int sim_file(enum sim_path what, const char *name, char *buf, size_t len)
{
	char d[PATH_MAX];

	if (sim_path(what, d, sizeof(d)) < 0)
		return -1;
	return snprintf(buf, len, "%s/%s", d, name) < (int)len ? 0 : -1;
}

#endif
