/* SPDX-License-Identifier: MIT */
/*
 * fs.h - the FUSE front: fs.c (the dataset's operations, the session),
 * fs_ctl.c (control files) and fs_xattr.c (extended attributes), the only
 * files that include fuse3 headers (through fs_internal.h).  Handlers are
 * thin: the tree comes from nsmgr, bytes from fetch, control files from ctl.
 *
 * Control interface (works from any process that sees the mount, e.g. a
 * container sharing only the mount): extended attributes.
 *   getfattr -n user.fusefs.stats MNT       counters and cache use
 *   getfattr -n user.fusefs.version FILE    backend version of a file
 *   getfattr -n user.fusefs.cached FILE     bytes of the file cached
 *   getfattr -n user.fusefs.key FILE        backend object name
 *   getfattr -n user.fusefs.unverified FILE chunks not verified since the
 *                                           start (a passthrough open waits)
 * They are answered by name only: listxattr lists none, so that copies
 * (cp -a, rsync -X) do not carry them.  Other user.* names: ENODATA;
 * names of other namespaces (security.*, system.posix_acl_*): EOPNOTSUPP,
 * which ls -l and ACL libraries remember per file system, not asking
 * again for every file.  Control files have none (ENODATA).
 */
#ifndef FUSEFS_FS_H
#define FUSEFS_FS_H

#include "cache.h"
#include "conf.h"
#include "ctl.h"
#include "epochs.h"
#include "fetch.h"
#include "nsmgr.h"
#include "stats.h"
#include "verifier.h"

struct fs_deps {
	const struct fusefs_conf *cf;
	struct nsmgr *nm;
	struct cache *cache;
	struct fetcher *fetch;
	struct stats *st;
	struct ctl *ctl;		/* control files under .fusefs/ */
	struct epochs *epochs;		/* opens move the epoch lists */
	struct verifier *verifier;	/* may be NULL (--verify-depth 0) */
	/* on_ready() - called once the mount answers (e.g. systemd notify) */
	void (*on_ready)(void *arg);
	void *ready_arg;
};

/*
 * fs_run() - mount at cf->mountpoint (with cf->kernel_opts), or serve
 * the already mounted FUSE fd N of a "/dev/fd/N" mount point (then
 * nothing is mounted or unmounted here), then write one byte to @ready_fd
 * (if >= 0) and serve until unmounted or signalled (SIGTERM, SIGINT,
 * SIGHUP).  Return: 0 after a clean unmount, -errno if mounting failed.
 */
int fs_run(const struct fs_deps *d, int ready_fd);

#endif
