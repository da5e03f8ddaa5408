/* SPDX-License-Identifier: MIT */
/*
 * mountsafe.h - checks made before mounting, so that an operator's
 * mistake is refused with a message instead of found later:
 *
 *   - the mount point: a directory that is empty (unless -o nonempty) and
 *     not already a live FUSE mount; or "/dev/fd/N", a /dev/fuse file
 *     descriptor inherited from a privileged process that mounted it
 *     (FUSE fd passing: libfuse then serves N and mounts nothing);
 *   - the cache size: --cache-size N% of the cache file system resolved
 *     to bytes, and a size the file system cannot hold (more than its
 *     free space plus what the cache directory already holds) refused if
 *     the user asked for it, lowered with a warning if it is the default.
 *
 * Messages go to stderr (these run before the daemon detaches) and name
 * the path and the numbers; the functions return 0 or -errno.
 */
#ifndef FUSEFS_MOUNTSAFE_H
#define FUSEFS_MOUNTSAFE_H

#include <stdbool.h>

#include "conf.h"

/*
 * mountsafe_fd() - the N of a "/dev/fd/N" mount point (as libfuse 3.14's
 * fuse_session_mount() parses it), or -1 if @mnt is a path.
 */
int mountsafe_fd(const char *mnt);

/*
 * mountsafe_check_fd() - @fd (from "/dev/fd/N") is 3 or more (0-2 are
 * pointed at /dev/null by going to the background), open and the FUSE
 * device.  Return: 0, -EBADF or -ENODEV (message printed).
 */
int mountsafe_check_fd(int fd);

/*
 * mountsafe_check_dir() - @mnt is a directory, not a live FUSE mount
 * (-EBUSY), and empty unless @nonempty (-ENOTEMPTY).  A dead FUSE mount
 * must have been cleared before.  Return: 0 or -errno (message printed).
 */
int mountsafe_check_dir(const char *mnt, bool nonempty);

/*
 * mountsafe_cache_size() - resolve cf->cache_size_pct against the file
 * system of cf->cache_dir (which exists) and check cf->cache_size fits
 * there: at most its free space plus the bytes the cache directory
 * already holds.  Too big: -ENOSPC if set by the user, else lowered to
 * fit with a warning.  Also checks the 4-chunk minimum (-EINVAL).
 */
int mountsafe_cache_size(struct fusefs_conf *cf);

#endif
