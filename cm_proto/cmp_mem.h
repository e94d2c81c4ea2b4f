/*
 * cmp_mem.h - the engine's allocator hook (as ngtcp2_mem): every allocation
 * cm_proto makes goes through one of these, with `user` passed back, so a
 * caller can account for the engine's memory, put it in an arena, or fail
 * chosen allocations in tests. cmp_mem_default() is libc's.
 */
#ifndef USCM_CMP_MEM_H
#define USCM_CMP_MEM_H

#include <stddef.h>

struct cmp_mem {
	void *user;
	void *(*malloc)(size_t size, void *user);
	void (*free)(void *ptr, void *user);      /* ptr may be NULL */
	void *(*calloc)(size_t nmemb, size_t size, void *user);
	void *(*realloc)(void *ptr, size_t size, void *user);
};

/* malloc / free / calloc / realloc of libc; user is NULL. */
const struct cmp_mem *cmp_mem_default(void);

static inline void *cmp_malloc(const struct cmp_mem *m, size_t size)
{
	return m->malloc(size, m->user);
}

static inline void cmp_free(const struct cmp_mem *m, void *ptr)
{
	m->free(ptr, m->user);
}

static inline void *cmp_calloc(const struct cmp_mem *m, size_t nmemb, size_t size)
{
	return m->calloc(nmemb, size, m->user);
}

static inline void *cmp_realloc(const struct cmp_mem *m, void *ptr, size_t size)
{
	return m->realloc(ptr, size, m->user);
}

#endif
