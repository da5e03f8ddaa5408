/* SPDX-License-Identifier: MIT */
/*
 * backend.h - where objects come from.  Each backend (rados, s3, file) is
 * one file implementing struct backend_ops; nothing else sees its library.
 *
 * Versions: every object carries a change token (ns_attr.version): the
 * RADOS object version, the S3 ETag, or a file's inode, mtime and size.  A read names the version it
 * expects; a backend that finds another one fails the read with -ESTALE
 * instead of returning bytes of a different object.
 *
 * An S3 version can also be one object version (a manifest's
 * "vid:VERSIONID", S3_VID in s3list.h): a versioned bucket keeps its bytes
 * unchanged until that version is deleted, so reads and re-checks name it
 * (?versionId=) instead of comparing ETags.
 */
#ifndef FUSEFS_BACKEND_H
#define FUSEFS_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf.h"
#include "ns.h"

struct backend;

struct backend_read {
	const char *key;		/* object name */
	const char *version;		/* expected version; "" = any */
	uint64_t off;
	size_t len;
	char *buf;			/* len bytes, owned by the caller */
	/*
	 * done() - called exactly once, on any thread (possibly inside
	 * read()), with bytes read (short only at the object's end) or
	 * -errno: -ESTALE version changed, -ENOENT gone, -EIO, -ETIMEDOUT,
	 * -EAGAIN (worth retrying).  Must not block.
	 */
	void (*done)(struct backend_read *rd, ssize_t ret);
	void *priv;			/* the backend's, during the read */
};

typedef int (*backend_list_fn)(void *arg, const char *key, size_t len,
			       const struct ns_attr *a);

struct backend_ops {
	const char *scheme;		/* "rados" */
	/* open() - connect; @where is the source after "scheme://" */
	int (*open)(struct backend **out, const struct fusefs_conf *cf,
		    const char *where);
	void (*close)(struct backend *be);
	/* list() - every object under the prefix, with attributes */
	int (*list)(struct backend *be, backend_list_fn fn, void *arg);
	/* stat() - attributes of one object; -ENOENT if gone */
	int (*stat)(struct backend *be, const char *key, struct ns_attr *out);
	/*
	 * stat_pinned() - attributes of the immutable version @version of
	 * @key (out->version = @version); -ENOENT if that version is gone,
	 * -ENOTSUP if @version is not one this backend can name (then
	 * stat() it).  NULL: the backend has no such versions.
	 */
	int (*stat_pinned)(struct backend *be, const char *key,
			   const char *version, struct ns_attr *out);
	/* read() - queue an asynchronous read; 0 or -errno (done not called) */
	int (*read)(struct backend *be, struct backend_read *rd);
};

struct backend {
	const struct backend_ops *ops;
	char prefix[1024];		/* no leading or trailing '/' */
};

/*
 * backend_open() - pick the backend for @cf->source's scheme, open it.
 * Return: 0, -EINVAL for a bad or unknown source (message printed), or
 * the backend's -errno (message printed).
 */
int backend_open(struct backend **out, const struct fusefs_conf *cf);
void backend_close(struct backend *be);
/* backend_check_source() - 0 if @src names a known scheme and carries no
 * credentials (USER:KEY@, never echoed), else -EINVAL with a message; no
 * connection is made. */
int backend_check_source(const char *src);
/* backend_has_userinfo() - does URL @src carry USER:KEY@ before its
 * path (s3://KEY:SECRET@bucket/...; rados:// never does)?  Prints nothing. */
bool backend_has_userinfo(const char *src);

/* backend_split_source() - "rados://pool/a/b" -> scheme, where; pure */
int backend_split_source(const char *src, char *scheme, size_t slen,
			 const char **where);
/* backend_set_prefix() - copy @p into be->prefix without extra '/'. */
int backend_set_prefix(struct backend *be, const char *p);

extern const struct backend_ops backend_rados_ops;
extern const struct backend_ops backend_s3_ops;
/* file:///DIR: a local directory tree (backend_file.c) */
extern const struct backend_ops backend_file_ops;

#endif
