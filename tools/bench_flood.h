/* bench_flood.h - uscm-bench-engine --flood N: the hash tables under hash
 * flooding (tools/bench_flood.c). */
#ifndef USCM_TOOLS_BENCH_FLOOD_H
#define USCM_TOOLS_BENCH_FLOOD_H

#include <stddef.h>

/* Prints the table on stdout; 0, or -1 (out of memory). */
int bench_flood(size_t n);

#endif
