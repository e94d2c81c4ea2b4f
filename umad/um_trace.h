/*
 * um_trace.h - USCM_TRACE: print the engine's state-change records.
 *   USCM_TRACE=1 | text   one line per record on stderr
 *   USCM_TRACE=json       one JSON object per line on stderr (qlog-like)
 * Lives outside cm_proto/ because it reads the environment and writes a
 * stream; the engine only calls the hook.
 */
#ifndef USCM_UM_TRACE_H
#define USCM_UM_TRACE_H

#include "cm_proto/cmp_engine.h"

/* Sets s->trace / s->trace_ctx from USCM_TRACE; returns 1 if tracing is on. */
int um_trace_from_env(struct cmp_settings *s);

#endif
