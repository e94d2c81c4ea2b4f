/* cmp_mem.c - libc's allocator behind the cmp_mem hook (cmp_mem.h). */
#include <stdlib.h>

#include "cm_proto/cmp_mem.h"

static void *libc_malloc(size_t size, void *user)
{
	(void)user;
	return malloc(size);
}

static void libc_free(void *ptr, void *user)
{
	(void)user;
	free(ptr);
}

static void *libc_calloc(size_t nmemb, size_t size, void *user)
{
	(void)user;
	return calloc(nmemb, size);
}

static void *libc_realloc(void *ptr, size_t size, void *user)
{
	(void)user;
	return realloc(ptr, size);
}

const struct cmp_mem *cmp_mem_default(void)
{
	static const struct cmp_mem libc_mem = {
		NULL, libc_malloc, libc_free, libc_calloc, libc_realloc,
	};
	return &libc_mem;
}
