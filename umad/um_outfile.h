/*
 * um_outfile.h - opening a file for output whose name someone else chose.
 *
 * uscmd runs as root and writes the files its options and environment
 * name (--pcap, USCM_PCAP, USCM_STATS); the library writes them in any
 * program, setuid ones included. A name that passes through a directory
 * another user can write would let that user point root's write at a file
 * of its choice (a symlink, or a hard link planted before the daemon
 * starts), so the file is opened as a careful daemon does:
 *
 *   - every directory on the way is opened with O_NOFOLLOW (no symlinked
 *     component) and none may be writable by another user (group or other
 *     write, or owned by someone but us or root) unless it is sticky
 *     (/tmp), and a directory taken from a sticky one must be ours or
 *     root's;
 *   - the file itself is opened O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, must be
 *     a regular file with one link, and, in a sticky directory others can
 *     write, must be the caller's own (a file another user planted there
 *     is refused before a byte is written or truncated).
 *
 * Refusals are EACCES (an unsafe directory or another user's file),
 * ELOOP (a symlink), EINVAL (not a regular file, or more than one link;
 * a FIFO without a reader already fails the open with ENXIO).
 */
#ifndef USCM_UMAD_UM_OUTFILE_H
#define USCM_UMAD_UM_OUTFILE_H

#include <sys/types.h>

/* open(2) of path for writing under the rules above: flags adds O_APPEND
 * (or 0), the file is created with mode if missing. An fd or -1/errno. */
int um_outfile_open(const char *path, int flags, mode_t mode);

#endif
