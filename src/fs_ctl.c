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
 *
 * When the text is acted on (docs/epochs.md, "Writing a control file"):
 * at the first flush (a close() of any descriptor of the open file: a
 * dup, a forked child's copy) that finds text, once.  The kernel sends a
 * flush at every close and a release only after the last one, and the
 * release's answer reaches nobody, so only a flush can report the
 * outcome to the writer.  No write is lost silently: a write after the
 * commit fails with EPIPE; a failed write (EFBIG, EDQUOT, ENOBUFS, an
 * offset out of order) marks the buffer failed, and from then on every
 * write and flush fails with that first error and nothing is acted on;
 * every flush after the commit answers with its outcome (or with the
 * failure of a later write).
 *
 * Access (ctl.h, docs/control-access.md): the caller's uid and groups
 * come from the request (fuse_req_ctx(), fuse_req_getgroups()); the
 * modes shown match what ctl_access() allows, so the kernel's
 * default_permissions check and ours agree, and ours holds without it.
 * Every buffer is charged to its opener's quota and the memory budget.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compiler.h"
#include "fs_internal.h"
#include "log.h"

/*
 * Largest text accepted by a control file: 64 MiB, a list of about a
 * million paths of 60 bytes.  A write past it fails with EFBIG.
 */
#define CTL_BUF_MAX	(64ULL << 20)

struct ctlbuf {			/* fh of an open control file */
	struct fs_handle h;	/* fs's list of handles */
	struct ctl_who who;	/* the opener; immutable */
	pthread_mutex_t lock;	/* guards all below */
	bool writing, committed;
	int failed;		/* the first failed write's -errno, or 0 */
	int result;		/* the commit's 0 or -errno, once committed */
	char *buf;
	size_t len, cap;
	uint64_t charged;	/* bytes given to ctl_buffer_grow() */
};

#define MAX_GROUPS	64

/* is @gid among the supplementary groups of @req's process */
static bool in_group(fuse_req_t req, gid_t gid)
{
	gid_t list[MAX_GROUPS];
	int i, n = fuse_req_getgroups(req, MAX_GROUPS, list);

	for (i = 0; i < MIN(n, MAX_GROUPS); i++)
		if (list[i] == gid)
			return true;
	return false;
}

/* who sent @req: root, the daemon's user and --control-group are
 * privileged (ctl.h) */
static struct ctl_who who_of(fuse_req_t req, const struct fs *fs)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t group = fs->d->cf->control_gid;
	struct ctl_who w = { .uid = ctx->uid };

	w.privileged = ctx->uid == 0 || ctx->uid == geteuid() ||
		       (group != (gid_t)-1 &&
			(ctx->gid == group || in_group(req, group)));
	return w;
}

bool fs_is_ctl(const struct fs *fs, fuse_ino_t ino)
{
	return ctl_kind(fs->d->ctl, ino) != CTL_NONE;
}

/*
 * Owner: a list's creator, else the daemon's user; group: the control
 * group if any (it gets the owner's rights), else the daemon's.
 */
static void ctl_stat(const struct fs *fs, fuse_ino_t ino, struct stat *st)
{
	enum ctl_kind k = ctl_kind(fs->d->ctl, ino);
	gid_t group = fs->d->cf->control_gid;
	mode_t g = group != (gid_t)-1 ? 1 : 0;	/* group bits as owner's */

	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = ctl_owner(fs->d->ctl, ino);
	st->st_gid = g ? group : getegid();
	st->st_nlink = 1;
	st->st_mtim.tv_sec = fs->mounted;
	if (k == CTL_DIR)
		st->st_mode = S_IFDIR | 0555;
	else if (k == CTL_LISTS)
		st->st_mode = S_IFDIR | 01777;	/* anyone may publish */
	else if (k == CTL_LIST)
		st->st_mode = S_IFREG | 0644 | (g * 0020);
	else if (k == CTL_HEAT)			/* the access pattern */
		st->st_mode = S_IFREG | 0400 | (g * 0040);
	else if (ctl_is_writable(fs->d->ctl, ino))
		st->st_mode = S_IFREG | 0200 | (g * 0020);
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

/*
 * A buffer for a file opened for writing, or holding @ino's text, for
 * @w (counted against @w's quota: -EMFILE, -EDQUOT, -ENOBUFS).
 */
static void ctlbuf_drop(struct fs *fs, struct fs_handle *h);

static int ctlbuf_create(struct fs *fs, fuse_ino_t ino, bool writing,
			 const struct ctl_who *w, struct ctlbuf **out)
{
	struct ctl *ctl = fs->d->ctl;
	struct ctlbuf *cb;
	int rc = ctl_buffer_open(ctl, w);

	if (rc)
		return rc;
	cb = calloc(1, sizeof(*cb));
	if (!cb) {
		ctl_buffer_close(ctl, w, 0);
		return -ENOMEM;
	}
	cb->who = *w;
	cb->writing = writing;
	if (!writing) {
		cb->buf = ctl_read(ctl, ino, &cb->len);
		rc = cb->buf ? ctl_buffer_grow(ctl, w, cb->len, true) : -ENOMEM;
		if (rc) {
			ctl_buffer_close(ctl, w, 0);
			free(cb->buf);
			free(cb);
			return rc;
		}
		cb->charged = cb->len;
	}
	pthread_mutex_init(&cb->lock, NULL);
	fs_handle_add(fs, &cb->h, ctlbuf_drop);
	*out = cb;
	return 0;
}

static void ctlbuf_destroy(struct fs *fs, struct ctlbuf *cb)
{
	fs_handle_del(fs, &cb->h);
	ctl_buffer_close(fs->d->ctl, &cb->who, cb->charged);
	pthread_mutex_destroy(&cb->lock);
	free(cb->buf);
	free(cb);
}

static void ctlbuf_drop(struct fs *fs, struct fs_handle *h)
{
	ctlbuf_destroy(fs, container_of(h, struct ctlbuf, h));
}

static struct ctlbuf *ctlbuf_of(const struct fuse_file_info *fi)
{
	return (struct ctlbuf *)(uintptr_t)fi->fh;
}

void fs_ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	bool wr = (fi->flags & O_ACCMODE) != O_RDONLY;
	struct ctl_who w = who_of(req, fs);
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
	rc = ctl_access(fs->d->ctl, ino, &w, wr);
	if (!rc)
		rc = ctlbuf_create(fs, ino, wr, &w, &cb);
	if (rc) {
		fs_reply_errno(req, rc);
		return;
	}
	fi->fh = (uintptr_t)cb;
	fi->direct_io = 1;	/* generated text: no page cache, no size */
	fi->nonseekable = 0;
	if (fuse_reply_open(req, fi))
		ctlbuf_destroy(fs, cb);	/* interrupted: no RELEASE */
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
	ctlbuf_destroy(fs_of(req), ctlbuf_of(fi));
	fuse_reply_err(req, 0);
}

/* append @size bytes written at @off to @cb; 0 or -errno */
static int ctlbuf_append(struct ctl *ctl, struct ctlbuf *cb, const char *buf,
			 size_t size, off_t off)
{
	if ((size_t)off != cb->len)		/* lists are written in order */
		return -EINVAL;
	if (cb->len + size > CTL_BUF_MAX)
		return -EFBIG;
	if (cb->len + size > cb->cap) {
		size_t cap = MIN(MAX(cb->cap * 2, cb->len + size), CTL_BUF_MAX);
		int rc = ctl_buffer_grow(ctl, &cb->who, cap - cb->cap,
					 false);
		char *p;

		if (rc)
			return rc;
		p = realloc(cb->buf, cap);
		if (!p) {
			ctl_buffer_shrink(ctl, &cb->who, cap - cb->cap);
			return -ENOMEM;
		}
		cb->charged += cap - cb->cap;
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
	bool first = false;
	int rc = -EROFS;

	if (!fs_is_ctl(fs_of(req), ino)) {
		fs_reply_errno(req, rc);
		return;
	}
	cb = ctlbuf_of(fi);
	pthread_mutex_lock(&cb->lock);
	if (cb->writing) {
		if (cb->failed)
			rc = cb->failed;
		else if (cb->committed)		/* acted on already */
			rc = -EPIPE;
		else
			rc = ctlbuf_append(fs_of(req)->d->ctl, cb, buf, size,
					   off);
		if (rc && !cb->failed) {
			cb->failed = rc;
			first = true;
		}
	}
	pthread_mutex_unlock(&cb->lock);
	if (first)		/* who is immutable: no lock needed */
		log_warn("control: a write by uid %u failed (%s): %s",
			 (unsigned)cb->who.uid, strerror(-rc), rc == -EPIPE ?
			 "acted on already, at the close of another descriptor" :
			 "nothing written to this open file will be acted on");
	if (rc)
		fs_reply_errno(req, rc);
	else
		fuse_reply_write(req, size);
}

/*
 * A control file is acted on when its writer closes it (flush): the
 * first flush with text and no failed write commits it; this and every
 * later flush answer with the failure or the commit's outcome (see the
 * top of this file).
 */
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
	if (cb->writing && !cb->failed && !cb->committed && cb->len) {
		cb->committed = true;
		cb->result = ctl_commit_as(fs->d->ctl, ino, &cb->who, cb->buf,
					   cb->len, &report);
	}
	if (cb->writing)
		rc = cb->failed ? cb->failed : cb->result;
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
	struct ctl_who w = who_of(req, fs);
	struct fuse_entry_param e;
	struct ctlbuf *cb;
	uint64_t ino;
	int rc;

	(void)mode;
	/* only a list name under .fusefs/lists/ can be created */
	rc = ctl_create_list(fs->d->ctl, parent, name, &w, &ino);
	if (!rc)
		rc = ctlbuf_create(fs, ino, true, &w, &cb);
	if (rc) {
		fs_reply_errno(req, rc);
		return;
	}
	fs_ctl_entry(fs, ino, &e);
	fi->fh = (uintptr_t)cb;
	fi->direct_io = 1;
	if (fuse_reply_create(req, &e, fi))
		ctlbuf_destroy(fs, cb);	/* interrupted: no RELEASE */
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
