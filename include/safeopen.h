/* SPDX-License-Identifier: MIT */
/*
 * safeopen.h - opening a file whose name lies in a directory others may
 * write (a log file in /var/log or /tmp): the last component is never
 * followed if it is a symlink, and what was opened must be a regular
 * file with one link, owned by the effective user (root may also use
 * root's files only) and not writable by others.  So a planted symlink
 * or hard link cannot make the daemon append to /etc/shadow.
 */
#ifndef FUSEFS_SAFEOPEN_H
#define FUSEFS_SAFEOPEN_H

#include <sys/types.h>

/*
 * safe_open() - open(@path, @flags | O_NOFOLLOW, @mode) and check the
 * result as above.  Return: the fd, or -1 with errno set: ELOOP (a
 * symlink), EINVAL (not a regular file), EMLINK (more than one link),
 * EPERM (another owner, or writable by others), or open()'s own.
 */
int safe_open(const char *path, int flags, mode_t mode);
/* safe_openat() - the same, @path relative to directory @dirfd (openat) */
int safe_openat(int dirfd, const char *path, int flags, mode_t mode);

#endif
