// SPDX-License-Identifier: MIT
/*
 * fs_xattr.c - the read-only extended attributes of the mount (fs.h lists
 * them): counters on the root, version, object name and cached bytes on
 * files, answered by name and never listed.  Memory only; nothing here
 * asks the backend.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "fs_internal.h"

#define XATTR_USER	"user."
#define XATTR_STATS	"user.fusefs.stats"
#define XATTR_VERSION	"user.fusefs.version"
#define XATTR_CACHED	"user.fusefs.cached"
#define XATTR_KEY	"user.fusefs.key"
#define XATTR_UNVERIFIED "user.fusefs.unverified"
#define XATTR_VAL_MAX	4200	/* an object name (4095 + prefix) fits */

/* answer a getxattr/listxattr of a @len byte value; @size 0 asks the size */
static void reply_xattr(fuse_req_t req, const char *val, size_t len,
			size_t size)
{
	if (!size)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fs_reply_err(req, -ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

static void get_stats(fuse_req_t req, size_t size)
{
	size_t len;
	char *t = ctl_stats_text(fs_of(req)->d->ctl, &len);

	if (!t) {
		fs_reply_err(req, -ENOMEM);
		return;
	}
	reply_xattr(req, t, len, size);
	free(t);
}

/* the value of file attribute @name of @ino into @val; its length or -errno */
static int file_xattr(struct fs *fs, fuse_ino_t ino, const char *name,
		      char *val, size_t cap)
{
	const struct ns_node *n;
	struct ns_attr a;
	struct ns *ns;
	int len = -ENODATA;

	ns = nsmgr_rdlock(fs->d->nm);
	n = ns_get(ns, ino);
	if (!n) {
		len = -ENOENT;
	} else if (!n->is_dir) {
		ns_attr_get(ns, n, &a);
		if (!strcmp(name, XATTR_VERSION))
			len = snprintf(val, cap, "%s", a.version);
		else if (!strcmp(name, XATTR_KEY))
			len = snprintf(val, cap, "%s", ns_key(ns, n));
		else if (!strcmp(name, XATTR_CACHED) ||
			 !strcmp(name, XATTR_UNVERIFIED))
			len = 0;	/* below, without the tree's lock */
	}
	nsmgr_unlock(fs->d->nm);
	if (len == 0 && !strcmp(name, XATTR_CACHED))
		len = snprintf(val, cap, "%" PRIu64,
			       cache_file_bytes(fs->d->cache, ino));
	else if (len == 0)
		len = snprintf(val, cap, "%" PRIu32,
			       cache_file_unverified(fs->d->cache, ino));
	return len < 0 ? len : (int)MIN((size_t)len, cap - 1);
}

/*
 * The answer to a name outside user.*: no such namespace here.  Tools
 * remember EOPNOTSUPP for the whole file system (ls -l asks for
 * security.selinux and system.posix_acl_access of every entry until it
 * gets it: two round trips an entry).  Never ENOSYS: the kernel would
 * remember that for every name, user.fusefs.* too.
 */
static bool foreign_name(const char *name)
{
	return strncmp(name, XATTR_USER, strlen(XATTR_USER)) != 0;
}

void fs_xattr_get(fuse_req_t req, fuse_ino_t ino, const char *name,
		  size_t size)
{
	char val[XATTR_VAL_MAX];
	int len;

	if (foreign_name(name)) {
		fs_reply_err(req, -EOPNOTSUPP);
		return;
	}
	if (fs_is_ctl(fs_of(req), ino)) {
		fs_reply_errno(req, -ENODATA);
		return;
	}
	if (ino == NS_ROOT_INO && !strcmp(name, XATTR_STATS)) {
		get_stats(req, size);
		return;
	}
	len = file_xattr(fs_of(req), ino, name, val, sizeof(val));
	if (len < 0)
		fs_reply_err(req, len);
	else
		reply_xattr(req, val, len, size);
}

/* none listed: user.fusefs.* are read by name (fs.h) */
void fs_xattr_list(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct fs *fs = fs_of(req);
	bool known = true;

	if (!fs_is_ctl(fs, ino)) {
		known = ns_get(nsmgr_rdlock(fs->d->nm), ino) != NULL;
		nsmgr_unlock(fs->d->nm);
	}
	if (!known)
		fs_reply_err(req, -ENOENT);
	else
		reply_xattr(req, "", 0, size);
}

void fs_xattr_set(fuse_req_t req, fuse_ino_t ino, const char *name,
		  const char *value, size_t size, int flags)
{
	(void)ino;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fs_reply_err(req, -EROFS);
}

void fs_xattr_remove(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino;
	(void)name;
	fs_reply_err(req, -EROFS);
}
