// SPDX-License-Identifier: MIT
/*
 * fs_ctl.c - FUSE glue for the control files under .fusefs/ (ctl.h): what
 * they look like (modes, entries), opening, reading and writing them, and
 * handing what was written to ctl_commit() when the writer closes it.
 *
 * An open control file has a struct ctlbuf as its fh: the text to read
 * (made at open), or the bytes written so far.  Requests on one file
 * handle may run on different workers at once (a process writing from one
 * thread and closing a dup from another), so each buffer has a lock taken
 * by write, flush and read; every reply is sent after it is dropped, from
 * memory that is not the buffer's (release may free the buffer as soon as
 * the kernel has the last reply).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compiler.h"
#include "fs_internal.h"
#include "log.h"

/*
 * Largest text accepted by a control file: 64 MiB, a list of about a
 * million paths of 60 bytes.  A write past it fails with EFBIG.
 */
#define CTL_BUF_MAX	(64ULL << 20)

struct ctlbuf {			/* fh of an open control file */
	pthread_mutex_t lock;	/* guards all below */
	bool writing, committed;
	char *buf;
	size_t len, cap;
};

bool fs_is_ctl(const struct fs *fs, fuse_ino_t ino)
{
	return ctl_kind(fs->d->ctl, ino) != CTL_NONE;
}

static void ctl_stat(const struct fs *fs, fuse_ino_t ino, struct stat *st)
{
	enum ctl_kind k = ctl_kind(fs->d->ctl, ino);

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->d->cf->uid;
	st->st_gid = fs->d->cf->gid;
	st->st_nlink = 1;
	st->st_mtim.tv_sec = fs->mounted;
	if (k == CTL_DIR)
		st->st_mode = S_IFDIR | 0555;
	else if (k == CTL_LISTS)
		st->st_mode = S_IFDIR | 01777;	/* anyone may publish */
	else if (ctl_is_writable(fs->d->ctl, ino))
		st->st_mode = S_IFREG | (k == CTL_LIST ? 0666 : 0222);
	else
		st->st_mode = S_IFREG | 0444;
}

void fs_ctl_entry(const struct fs *fs, fuse_ino_t ino,
		  struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->generation = 1;
	ctl_stat(fs, ino, &e->attr);
	/* contents change all the time: never cache them */
	e->attr_timeout = 0;
	e->entry_timeout = 0;
}

static bool is_dir(const struct fs *fs, fuse_ino_t ino)
{
	enum ctl_kind k = ctl_kind(fs->d->ctl, ino);

	return k == CTL_DIR || k == CTL_LISTS;
}

/* a buffer for a file opened for writing, or holding @ino's text */
static int ctlbuf_create(struct fs *fs, fuse_ino_t ino, bool writing,
			 struct ctlbuf **out)
{
	struct ctlbuf *cb = calloc(1, sizeof(*cb));

	if (!cb)
		return -ENOMEM;
	cb->writing = writing;
	if (!writing) {
		cb->buf = ctl_read(fs->d->ctl, ino, &cb->len);
		if (!cb->buf) {
			free(cb);
			return -ENOMEM;
		}
	}
	pthread_mutex_init(&cb->lock, NULL);
	*out = cb;
	return 0;
}

static void ctlbuf_destroy(struct ctlbuf *cb)
{
	pthread_mutex_destroy(&cb->lock);
	free(cb->buf);
	free(cb);
}

static struct ctlbuf *ctlbuf_of(const struct fuse_file_info *fi)
{
	return (struct ctlbuf *)(uintptr_t)fi->fh;
}

void fs_ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	bool wr = (fi->flags & O_ACCMODE) != O_RDONLY;
	struct ctlbuf *cb;
	int rc;

	if (is_dir(fs, ino)) {
		fs_reply_errno(req, -EISDIR);
		return;
	}
	if (wr && !ctl_is_writable(fs->d->ctl, ino)) {
		fs_reply_errno(req, -EACCES);
		return;
	}
	rc = ctlbuf_create(fs, ino, wr, &cb);
	if (rc) {
		fs_reply_errno(req, rc);
		return;
	}
	fi->fh = (uintptr_t)cb;
	fi->direct_io = 1;	/* generated text: no page cache, no size */
	fi->nonseekable = 0;
	fuse_reply_open(req, fi);
}

void fs_ctl_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (is_dir(fs_of(req), ino))
		fuse_reply_open(req, fi);
	else
		fs_reply_errno(req, -ENOTDIR);
}

void fs_ctl_read(fuse_req_t req, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	struct ctlbuf *cb = ctlbuf_of(fi);
	char *copy = NULL;
	size_t n = 0;

	pthread_mutex_lock(&cb->lock);
	if (!cb->writing && (size_t)off < cb->len) {
		n = MIN(size, cb->len - off);
		copy = malloc(n);
		if (copy)
			memcpy(copy, cb->buf + off, n);
	}
	pthread_mutex_unlock(&cb->lock);
	if (n && !copy)
		fs_reply_errno(req, -ENOMEM);
	else
		fuse_reply_buf(req, copy, n);
	free(copy);
}

void fs_ctl_release(fuse_req_t req, struct fuse_file_info *fi)
{
	ctlbuf_destroy(ctlbuf_of(fi));
	fuse_reply_err(req, 0);
}

/* append @size bytes written at @off to @cb; 0 or -errno */
static int ctlbuf_append(struct ctlbuf *cb, const char *buf, size_t size,
			 off_t off)
{
	if ((size_t)off != cb->len)		/* lists are written in order */
		return -EINVAL;
	if (cb->len + size > CTL_BUF_MAX)
		return -EFBIG;
	if (cb->len + size > cb->cap) {
		size_t cap = MIN(MAX(cb->cap * 2, cb->len + size), CTL_BUF_MAX);
		char *p = realloc(cb->buf, cap);

		if (!p)
			return -ENOMEM;
		cb->buf = p;
		cb->cap = cap;
	}
	memcpy(cb->buf + cb->len, buf, size);
	cb->len += size;
	return 0;
}

void fs_ctl_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		  size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ctlbuf *cb;
	int rc = -EROFS;

	if (!fs_is_ctl(fs_of(req), ino)) {
		fs_reply_errno(req, rc);
		return;
	}
	cb = ctlbuf_of(fi);
	pthread_mutex_lock(&cb->lock);
	if (cb->writing)
		rc = ctlbuf_append(cb, buf, size, off);
	pthread_mutex_unlock(&cb->lock);
	if (rc)
		fs_reply_errno(req, rc);
	else
		fuse_reply_write(req, size);
}

/* a control file is acted on when its writer closes it (flush) */
void fs_ctl_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct ctlbuf *cb;
	char *report = NULL;
	int rc = 0;

	if (!fs_is_ctl(fs, ino)) {
		fuse_reply_err(req, 0);
		return;
	}
	cb = ctlbuf_of(fi);
	pthread_mutex_lock(&cb->lock);
	if (cb->writing && !cb->committed && cb->len) {
		cb->committed = true;
		rc = ctl_commit(fs->d->ctl, ino, cb->buf, cb->len, &report);
	}
	pthread_mutex_unlock(&cb->lock);
	if (report)
		log_dbg("%s", report);
	free(report);
	if (rc)
		fs_reply_errno(req, rc);
	else
		fuse_reply_err(req, 0);
}

void fs_ctl_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		   mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct ctlbuf *cb;
	uint64_t ino;
	int rc;

	(void)mode;
	/* only a list name under .fusefs/lists/ can be created */
	rc = ctl_lookup(fs->d->ctl, parent, name, true, &ino);
	if (rc || !ino || !ctl_is_writable(fs->d->ctl, ino)) {
		fs_reply_errno(req, -EROFS);
		return;
	}
	rc = ctlbuf_create(fs, ino, true, &cb);
	if (rc) {
		fs_reply_errno(req, rc);
		return;
	}
	fs_ctl_entry(fs, ino, &e);
	fi->fh = (uintptr_t)cb;
	fi->direct_io = 1;
	fuse_reply_create(req, &e, fi);
}

void fs_ctl_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		    int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct stat st;

	(void)attr;
	(void)fi;
	/* only truncating a control file (O_TRUNC) is allowed */
	if (!ctl_is_writable(fs->d->ctl, ino) || (to_set & ~FUSE_SET_ATTR_SIZE)) {
		fs_reply_errno(req, -EROFS);
		return;
	}
	ctl_stat(fs, ino, &st);
	fuse_reply_attr(req, &st, 0);
}

/* entries of a control directory; offsets as for the dataset's */
void fs_ctl_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    bool plus)
{
	struct fs *fs = fs_of(req);
	char *buf = malloc(size);
	size_t used = 0;

	if (!buf) {
		fs_reply_errno(req, -ENOMEM);
		return;
	}
	for (;; off++) {
		struct fuse_entry_param e;
		const char *name;
		uint64_t cino;
		size_t need;

		if (off == 0) {
			name = ".";
			cino = ino;
		} else if (off == 1) {
			name = "..";
			cino = ino == 2 ? NS_ROOT_INO : 2;
		} else if (!ctl_readdir(fs->d->ctl, ino, off - 2, &name, &cino)) {
			break;
		}
		memset(&e, 0, sizeof(e));
		e.attr.st_ino = cino;
		e.attr.st_mode = S_IFREG;
		if (plus && off >= 2)
			fs_ctl_entry(fs, cino, &e);
		need = plus ? fuse_add_direntry_plus(req, buf + used, size - used,
						     name, &e, off + 1) :
			      fuse_add_direntry(req, buf + used, size - used,
						name, &e.attr, off + 1);
		if (need > size - used)
			break;
		used += need;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}
