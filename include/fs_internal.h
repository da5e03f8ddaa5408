/* SPDX-License-Identifier: MIT */
/*
 * fs_internal.h - what the files of the FUSE front share: fs.c (the
 * dataset's operations, the session), fs_ctl.c (the control files under
 * .fusefs/) and fs_xattr.c (extended attributes).  Only those include it,
 * and through it fuse3's header.
 *
 * Errors: helpers return 0 or -errno; a handler answers an error with
 * fs_reply_err() (dataset files) or fs_reply_errno() (control files),
 * the only places a -errno becomes FUSE's positive errno.
 */
#ifndef FUSEFS_FS_INTERNAL_H
#define FUSEFS_FS_INTERNAL_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "fs.h"

struct fs {
	const struct fs_deps *d;
	struct fuse_session *se;
	struct passthrough *pt;	/* kernel reads of complete files */
	struct openbound *ob;	/* other users' open files (openbound.h) */
	double attr_timeout;	/* files: --revalidate (1 s if 0) */
	time_t mounted;		/* directories' and control files' times */
	_Atomic unsigned lookups_now;	/* LOOKUPs being answered */
	const char *ra_mnt;	/* raise its read-ahead after INIT, or NULL */
	/* open files and directories (dataset and control), dropped at the
	 * end if no RELEASE came (a stop with them open); a leaf lock */
	pthread_mutex_t handles_lock;
	struct fs_handle *handles;
};

/*
 * The head of every handle a reply puts in fi->fh.  fs_handle_add() when
 * it is made, fs_handle_del() when it is freed (its @drop must call it);
 * fs_handles_drop() calls @drop on those left once the session is gone.
 */
struct fs_handle {
	struct fs_handle *prev, *next;
	void (*drop)(struct fs *fs, struct fs_handle *h);
};

void fs_handle_add(struct fs *fs, struct fs_handle *h,
		   void (*drop)(struct fs *fs, struct fs_handle *h));
void fs_handle_del(struct fs *fs, struct fs_handle *h);

static inline struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/*
 * fs_reply_err() - answer @req with -errno @err (< 0).  -ESTALE (the
 * object changed under an open file) is answered EIO: the reader's data
 * ends here, the next open gets the new version.
 */
void fs_reply_err(fuse_req_t req, int err);
/*
 * fs_reply_errno() - answer @req with -errno @err as it is: control files
 * report what happened (ESTALE there is a stale epoch list, say).
 */
void fs_reply_errno(fuse_req_t req, int err);

/* ---- fs_ctl.c: control files (ctl.h has what they do) ---- */

/* fs_is_ctl() - @ino is .fusefs or a file or directory under it */
bool fs_is_ctl(const struct fs *fs, fuse_ino_t ino);
/* fs_ctl_entry() - entry of control inode @ino (never cached) */
void fs_ctl_entry(const struct fs *fs, fuse_ino_t ino,
		  struct fuse_entry_param *e);
/* the operations on control inodes; fs.c dispatches to them */
void fs_ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_ctl_opendir(fuse_req_t req, fuse_ino_t ino,
		    struct fuse_file_info *fi);
void fs_ctl_read(fuse_req_t req, size_t size, off_t off,
		 struct fuse_file_info *fi);
void fs_ctl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    bool plus);
void fs_ctl_release(fuse_req_t req, struct fuse_file_info *fi);
/* only control files are writable: these are the ops table's entries */
void fs_ctl_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		  size_t size, off_t off, struct fuse_file_info *fi);
void fs_ctl_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void fs_ctl_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode, struct fuse_file_info *fi);
void fs_ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		    int to_set, struct fuse_file_info *fi);

/* ---- fs_xattr.c: user.fusefs.* (fs.h lists them) ---- */

void fs_xattr_get(fuse_req_t req, fuse_ino_t ino, const char *name,
		  size_t size);
void fs_xattr_list(fuse_req_t req, fuse_ino_t ino, size_t size);
void fs_xattr_set(fuse_req_t req, fuse_ino_t ino, const char *name,
		  const char *value, size_t size, int flags);
void fs_xattr_remove(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif
