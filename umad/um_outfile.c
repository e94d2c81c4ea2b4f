/*
 * um_outfile.c - files opened for output under a name someone else chose
 * (um_outfile.h has the rules and why).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "umad/um_outfile.h"

/* May another user than us (or root) change what the directory holds? */
static int dir_open_to_others(const struct stat *st)
{
	return (st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_uid != geteuid() && st->st_uid != 0);
}

/* A directory on the way, taken from a sticky directory others can write
 * (in_sticky) or not: 0, or -1/EACCES; *sticky_open says whether what is
 * taken from this one must be ours. */
static int dir_check(const struct stat *st, int in_sticky, int *sticky_open)
{
	if (in_sticky && st->st_uid != geteuid() && st->st_uid != 0)
		return errno = EACCES, -1;
	*sticky_open = 0;
	if (dir_open_to_others(st)) {
		if (!(st->st_mode & S_ISVTX))
			return errno = EACCES, -1;
		*sticky_open = 1;
	}
	return 0;
}

int um_outfile_open(const char *path, int flags, mode_t mode)
{
	char buf[PATH_MAX];
	char *comp, *next;
	struct stat st;
	int dfd, fd, sticky_open = 0, e;

	if (!path || !*path || strlen(path) >= sizeof(buf)) {
		errno = path && *path ? ENAMETOOLONG : EINVAL;
		return -1;
	}
	snprintf(buf, sizeof(buf), "%s", path);
	dfd = open(buf[0] == '/' ? "/" : ".", O_DIRECTORY | O_RDONLY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	comp = buf;
	while (*comp == '/')
		comp++;
	/* every directory on the way: no symlink; nobody else may write it
	 * unless it is sticky, and then what we take from it (the next
	 * directory, the file) must be our own (a directory: or root's) */
	if (fstat(dfd, &st) < 0 || dir_check(&st, 0, &sticky_open) < 0)
		goto fail;
	while ((next = strchr(comp, '/')) != NULL) {
		int nfd;

		*next++ = 0;
		while (*next == '/')
			next++;
		if (!*comp || !strcmp(comp, ".")) {
			comp = next;
			continue;
		}
		nfd = openat(dfd, comp, O_DIRECTORY | O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		e = errno;
		close(dfd);
		if (nfd < 0) {
			errno = e == ENOTDIR ? ELOOP : e; /* a symlinked component */
			return -1;
		}
		dfd = nfd;
		if (fstat(dfd, &st) < 0 || dir_check(&st, sticky_open, &sticky_open) < 0)
			goto fail;
		comp = next;
	}
	if (!*comp) {
		close(dfd);
		errno = EISDIR;
		return -1;
	}
	/* O_NONBLOCK: a FIFO planted under the name must not hang the open */
	fd = openat(dfd, comp,
		    O_WRONLY | O_CREAT | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC | O_NONBLOCK | flags, mode);
	if (fd < 0)
		goto fail;
	close(dfd);
	if (fstat(fd, &st) < 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1 || (sticky_open && st.st_uid != geteuid())) {
		close(fd);
		errno = !S_ISREG(st.st_mode) || st.st_nlink != 1 ? EINVAL : EACCES;
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
fail:
	e = errno;
	close(dfd);
	errno = e;
	return -1;
}
