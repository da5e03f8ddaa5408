// SPDX-License-Identifier: MIT
/* fs.c - see fs.h */
#define FUSE_USE_VERSION 314
#include <errno.h>
#include <fuse_lowlevel.h>
#include <inttypes.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "log.h"

#define XATTR_STATS	"user.fusefs.stats"
#define XATTR_VERSION	"user.fusefs.version"
#define XATTR_CACHED	"user.fusefs.cached"
#define XATTR_KEY	"user.fusefs.key"
#define DIR_TIMEOUT	3600.0
#define READ_AHEAD_KB	4096

struct fs {
	const struct fs_deps *d;
	struct fuse_session *se;
	double attr_timeout;
	time_t mounted;		/* directories' times */
};

static struct fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_stat(const struct fs *fs, const struct ns_node *n,
		      const struct ns_attr *a, struct stat *st)
{
	const struct fusefs_conf *cf = fs->d->cf;

	memset(st, 0, sizeof(*st));
	st->st_ino = n->ino;
	st->st_uid = cf->uid;
	st->st_gid = cf->gid;
	st->st_blksize = 1 << 20;
	if (n->is_dir) {
		st->st_mode = S_IFDIR | (0555 & ~cf->umask);
		st->st_nlink = 2;
		st->st_mtim.tv_sec = fs->mounted;
		st->st_ctim = st->st_atim = st->st_mtim;
		return;
	}
	st->st_mode = S_IFREG | (0444 & ~cf->umask);
	st->st_nlink = 1;
	st->st_size = a->size;
	st->st_blocks = (a->size + 511) / 512;
	st->st_mtim.tv_sec = a->mtime;
	st->st_mtim.tv_nsec = a->mtime_nsec;
	st->st_ctim = st->st_atim = st->st_mtim;
}

static void node_entry(const struct fs *fs, struct ns *ns,
		       const struct ns_node *n, struct fuse_entry_param *e)
{
	struct ns_attr a = { 0 };

	memset(e, 0, sizeof(*e));
	if (!n->is_dir)
		ns_attr_get(ns, n, &a);
	e->ino = n->ino;
	e->generation = 1;
	fill_stat(fs, n, &a, &e->attr);
	e->attr_timeout = n->is_dir ? DIR_TIMEOUT : fs->attr_timeout;
	e->entry_timeout = fs->attr_timeout;
}

static void fs_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;

	conn->want |= FUSE_CAP_ASYNC_READ;
	if (fs->d->cf->read_mode == READ_SPLICE &&
	    (conn->capable & FUSE_CAP_SPLICE_WRITE))
		conn->want |= FUSE_CAP_SPLICE_WRITE;
	conn->want &= ~(FUSE_CAP_SPLICE_MOVE | FUSE_CAP_SPLICE_READ |
			FUSE_CAP_WRITEBACK_CACHE);
	if (conn->capable & FUSE_CAP_READDIRPLUS)
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_AUTO_INVAL_DATA)
		conn->want |= FUSE_CAP_AUTO_INVAL_DATA;
	conn->max_background = 128;
	conn->congestion_threshold = 96;
}

/* ---- control files (.fusefs/, see ctl.h) ---- */

#define CTL_BUF_MAX	(1ULL << 30)	/* largest list accepted */

struct ctlbuf {			/* fh of an open control file */
	bool writing, committed;
	char *buf;
	size_t len, cap;
};

static bool is_ctl(const struct fs *fs, fuse_ino_t ino)
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

static void ctl_entry(const struct fs *fs, fuse_ino_t ino,
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

static void ctl_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct ctlbuf *cb = calloc(1, sizeof(*cb));
	bool wr = (fi->flags & O_ACCMODE) != O_RDONLY;

	if (!cb) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (ctl_kind(fs->d->ctl, ino) == CTL_DIR ||
	    ctl_kind(fs->d->ctl, ino) == CTL_LISTS) {
		free(cb);
		fuse_reply_err(req, EISDIR);
		return;
	}
	if (wr && !ctl_is_writable(fs->d->ctl, ino)) {
		free(cb);
		fuse_reply_err(req, EACCES);
		return;
	}
	cb->writing = wr;
	if (!wr) {
		cb->buf = ctl_read(fs->d->ctl, ino, &cb->len);
		if (!cb->buf) {
			free(cb);
			fuse_reply_err(req, ENOMEM);
			return;
		}
	}
	fi->fh = (uintptr_t)cb;
	fi->direct_io = 1;	/* generated text: no page cache, no size */
	fi->nonseekable = 0;
	fuse_reply_open(req, fi);
}

static void ctl_read_buf(fuse_req_t req, struct ctlbuf *cb, size_t size,
			 off_t off)
{
	size_t n;
	char *copy;

	if (cb->writing || (size_t)off >= cb->len) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	/*
	 * Reply from a copy: once the kernel has the reply, the file may be
	 * released (and @cb freed) on another thread while this one is still
	 * returning from writev(), which is where ASan checks the buffer.
	 */
	n = MIN(size, cb->len - off);
	copy = malloc(n);
	if (!copy) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	memcpy(copy, cb->buf + off, n);
	fuse_reply_buf(req, copy, n);
	free(copy);
}

static void fs_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	struct ctlbuf *cb = (struct ctlbuf *)(uintptr_t)fi->fh;

	if (!is_ctl(fs_of(req), ino) || !cb->writing) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if ((size_t)off != cb->len) {		/* lists are written in order */
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (cb->len + size > CTL_BUF_MAX) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	if (cb->len + size > cb->cap) {
		size_t cap = MAX(cb->cap * 2, cb->len + size);
		char *p = realloc(cb->buf, cap);

		if (!p) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		cb->buf = p;
		cb->cap = cap;
	}
	memcpy(cb->buf + cb->len, buf, size);
	cb->len += size;
	fuse_reply_write(req, size);
}

/* a control file is acted on when its writer closes it (flush) */
static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct ctlbuf *cb;
	char *report = NULL;
	int rc = 0;

	if (!is_ctl(fs, ino)) {
		fuse_reply_err(req, 0);
		return;
	}
	cb = (struct ctlbuf *)(uintptr_t)fi->fh;
	if (cb->writing && !cb->committed && cb->len) {
		cb->committed = true;
		rc = ctl_commit(fs->d->ctl, ino, cb->buf, cb->len, &report);
		if (report)
			log_dbg("%s", report);
		free(report);
	}
	fuse_reply_err(req, rc < 0 ? -rc : 0);
}

static void fs_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	struct ctlbuf *cb;
	int64_t ino;

	(void)mode;
	ino = ctl_lookup(fs->d->ctl, parent, name, true);
	if (ino <= 0 || !ctl_is_writable(fs->d->ctl, ino)) {
		fuse_reply_err(req, ino < 0 && ino != -ENOENT ? (int)-ino : EROFS);
		return;
	}
	cb = calloc(1, sizeof(*cb));
	if (!cb) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	cb->writing = true;
	ctl_entry(fs, ino, &e);
	fi->fh = (uintptr_t)cb;
	fi->direct_io = 1;
	fuse_reply_create(req, &e, fi);
}

static void fs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct stat st;

	(void)attr;
	(void)fi;
	/* only truncating a control file (O_TRUNC) is allowed */
	if (!ctl_is_writable(fs->d->ctl, ino) || (to_set & ~FUSE_SET_ATTR_SIZE)) {
		fuse_reply_err(req, EROFS);
		return;
	}
	ctl_stat(fs, ino, &st);
	fuse_reply_attr(req, &st, 0);
}

static void fs_erofs_entry(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent;
	(void)name;
	fuse_reply_err(req, EROFS);
}

static void fs_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	(void)mode;
	fs_erofs_entry(req, parent, name);
}

static void fs_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	(void)mode;
	(void)rdev;
	fs_erofs_entry(req, parent, name);
}

static void fs_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	(void)link;
	fs_erofs_entry(req, parent, name);
}

static void fs_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	(void)newparent;
	(void)newname;
	(void)flags;
	fs_erofs_entry(req, parent, name);
}

static void fs_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	(void)ino;
	fs_erofs_entry(req, newparent, newname);
}

static void fs_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	(void)ino;
	(void)name;
	(void)value;
	(void)size;
	(void)flags;
	fuse_reply_err(req, EROFS);
}

static void fs_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	(void)ino;
	(void)name;
	fuse_reply_err(req, EROFS);
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	const struct ns_node *n;
	int64_t cino = ctl_lookup(fs->d->ctl, parent, name, false);
	struct ns *ns;
	bool parent_ok;

	if (cino > 0) {
		ctl_entry(fs, cino, &e);
		fuse_reply_entry(req, &e);
		return;
	}
	if (cino < 0) {
		fuse_reply_err(req, -cino);
		return;
	}
	ns = nsmgr_rdlock(fs->d->nm);
	parent_ok = ns_get(ns, parent) != NULL;

	n = ns_lookup(ns, parent, name);
	if (n) {
		node_entry(fs, ns, n, &e);
	} else {
		memset(&e, 0, sizeof(e));	/* negative entry, cached */
		e.entry_timeout = fs->attr_timeout;
	}
	nsmgr_unlock(fs->d->nm);
	if (!n && !parent_ok)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_entry(req, &e);
}

static void fs_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	const struct ns_node *n;
	struct ns *ns;

	(void)fi;
	if (is_ctl(fs, ino)) {
		ctl_entry(fs, ino, &e);
		fuse_reply_attr(req, &e.attr, 0);
		return;
	}
	ns = nsmgr_rdlock(fs->d->nm);
	n = ns_get(ns, ino);
	if (n)
		node_entry(fs, ns, n, &e);
	nsmgr_unlock(fs->d->nm);
	if (!n)
		fuse_reply_err(req, ENOENT);
	else
		fuse_reply_attr(req, &e.attr, e.attr_timeout);
}

static void fs_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct ns_node *n;
	bool isdir;

	if (is_ctl(fs, ino)) {
		enum ctl_kind k = ctl_kind(fs->d->ctl, ino);

		if (k == CTL_DIR || k == CTL_LISTS)
			fuse_reply_open(req, fi);
		else
			fuse_reply_err(req, ENOTDIR);
		return;
	}
	n = ns_get(nsmgr_rdlock(fs->d->nm), ino);
	isdir = n && n->is_dir;
	nsmgr_unlock(fs->d->nm);
	if (!n)
		fuse_reply_err(req, ENOENT);
	else if (!isdir)
		fuse_reply_err(req, ENOTDIR);
	else {
		fi->cache_readdir = 1;
		fi->keep_cache = 1;
		fuse_reply_open(req, fi);
	}
}

/* entries of a control directory; frees @buf */
static void ctl_readdir_reply(fuse_req_t req, struct fs *fs, fuse_ino_t ino,
			      size_t size, off_t off, bool plus, char *buf)
{
	size_t used = 0;

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
			ctl_entry(fs, cino, &e);
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

/* offsets: 1 = after ".", 2 = after "..", 2 + i = after kid i */
static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, bool plus)
{
	struct fs *fs = fs_of(req);
	const struct ns_node *d;
	char *buf = malloc(size);
	size_t used = 0;
	struct ns *ns;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	if (is_ctl(fs, ino)) {
		ctl_readdir_reply(req, fs, ino, size, off, plus, buf);
		return;
	}
	ns = nsmgr_rdlock(fs->d->nm);
	d = ns_get(ns, ino);
	if (!d || !d->is_dir) {
		nsmgr_unlock(fs->d->nm);
		free(buf);
		fuse_reply_err(req, d ? ENOTDIR : ENOENT);
		return;
	}
	for (; off < (off_t)d->nkids + 2; off++) {
		const struct ns_node *n;
		const char *name;
		struct fuse_entry_param e;
		size_t need;

		if (off < 2) {
			n = off == 0 ? d : (ns_get(ns, d->parent) ? ns_get(ns, d->parent) : d);
			name = off == 0 ? "." : "..";
		} else {
			n = d->kids[off - 2];
			name = n->name;
		}
		node_entry(fs, ns, n, &e);
		if (plus) {
			if (off < 2) {
				/* no lookup count for . and .. */
				memset(&e, 0, sizeof(e));
				e.attr.st_ino = n->ino;
				e.attr.st_mode = S_IFDIR;
			}
			need = fuse_add_direntry_plus(req, buf + used,
						      size - used, name, &e,
						      off + 1);
		} else {
			need = fuse_add_direntry(req, buf + used, size - used,
						 name, &e.attr, off + 1);
		}
		if (need > size - used)
			break;
		used += need;
	}
	nsmgr_unlock(fs->d->nm);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, false);
}

static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	(void)fi;
	do_readdir(req, ino, size, off, true);
}

static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct ns_node *n;
	struct centry *ce = NULL;
	struct ns_attr a;
	bool changed = false;
	char *key = NULL;
	int rc = 0;

	if (is_ctl(fs, ino)) {
		ctl_open(req, ino, fi);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	n = ns_get(nsmgr_rdlock(fs->d->nm), ino);
	if (!n)
		rc = -ENOENT;
	else if (n->is_dir)
		rc = -EISDIR;
	else
		rc = nsmgr_revalidate(fs->d->nm, n, &a);
	if (!rc)
		key = strdup(n->key);
	nsmgr_unlock(fs->d->nm);
	if (!rc)
		rc = key ? cache_attach(fs->d->cache, ino, key, &a, &ce,
					&changed) : -ENOMEM;
	free(key);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	fi->fh = (uintptr_t)ce;
	/*
	 * A new version: not keeping the cache drops the kernel's pages of
	 * the old one; attributes only (offset -1) are invalidated here, as
	 * invalidating pages could wait on readers waiting on us.
	 */
	fi->keep_cache = !changed;
	if (changed)
		fuse_lowlevel_notify_inval_inode(fs->se, ino, -1, 0);
	fuse_reply_open(req, fi);
	ctl_note_open(fs->d->ctl, ino, cache_is_complete(fs->d->cache, ce));
}

static void read_done(void *arg, int err, const struct fetch_piece *p, int n)
{
	fuse_req_t req = arg;
	struct fuse_bufvec *bv;
	int i;

	if (err) {
		fuse_reply_err(req, err == -ESTALE ? EIO : -err);
		return;
	}
	if (n == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (n == 1 && p[0].mem) {
		fuse_reply_buf(req, p[0].mem, p[0].len);
		return;
	}
	bv = calloc(1, sizeof(*bv) + n * sizeof(bv->buf[0]));
	if (!bv) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	bv->count = n;
	for (i = 0; i < n; i++) {
		struct fuse_buf *b = &bv->buf[i];

		b->size = p[i].len;
		if (p[i].mem) {
			b->mem = (void *)p[i].mem;
		} else {
			b->flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK |
				   FUSE_BUF_FD_RETRY;
			b->fd = p[i].fd;
			b->pos = p[i].off;
		}
	}
	fuse_reply_data(req, bv, FUSE_BUF_SPLICE_NONBLOCK);
	free(bv);
}

static void fs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct centry *ce = (struct centry *)(uintptr_t)fi->fh;
	int rc;

	if (is_ctl(fs, ino)) {
		ctl_read_buf(req, (struct ctlbuf *)(uintptr_t)fi->fh, size, off);
		return;
	}
	rc = fetch_read(fs->d->fetch, ce, off, size, read_done, req);
	if (rc < 0)
		fuse_reply_err(req, rc == -ESTALE ? EIO : -rc);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);

	if (is_ctl(fs, ino)) {
		struct ctlbuf *cb = (struct ctlbuf *)(uintptr_t)fi->fh;

		free(cb->buf);
		free(cb);
	} else {
		fetch_close(fs->d->fetch, (struct centry *)(uintptr_t)fi->fh);
	}
	fuse_reply_err(req, 0);
}

static void fs_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct fs *fs = fs_of(req);
	const struct ns_stats *s;
	struct statvfs sv;

	(void)ino;
	memset(&sv, 0, sizeof(sv));
	s = ns_stats(nsmgr_rdlock(fs->d->nm));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (s->bytes + 4095) / 4096;
	sv.f_files = s->files + s->dirs;
	sv.f_namemax = 255;
	nsmgr_unlock(fs->d->nm);
	fuse_reply_statfs(req, &sv);
}

static void reply_xattr(fuse_req_t req, const char *val, size_t len,
			size_t size)
{
	if (!size)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
}

static void fs_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	struct fs *fs = fs_of(req);
	const struct ns_node *n;
	char val[4200];
	struct ns *ns;
	int len = -1;

	if (ino == NS_ROOT_INO && !strcmp(name, XATTR_STATS)) {
		size_t tlen;
		char *t = ctl_stats_text(fs->d->ctl, &tlen);

		if (!t) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		reply_xattr(req, t, tlen, size);
		free(t);
		return;
	}
	ns = nsmgr_rdlock(fs->d->nm);
	n = ns_get(ns, ino);
	if (n && !n->is_dir) {
		struct ns_attr a;

		ns_attr_get(ns, n, &a);
		if (!strcmp(name, XATTR_VERSION))
			len = snprintf(val, sizeof(val), "%s", a.version);
		else if (!strcmp(name, XATTR_KEY))
			len = snprintf(val, sizeof(val), "%s", n->key);
		else if (!strcmp(name, XATTR_CACHED))
			len = -2;
	}
	nsmgr_unlock(fs->d->nm);
	if (len == -2) {
		uint64_t bytes = cache_file_bytes(fs->d->cache, ino);

		len = snprintf(val, sizeof(val), "%" PRIu64, bytes);
	}
	if (!n)
		fuse_reply_err(req, ENOENT);
	else if (len < 0)
		fuse_reply_err(req, ENODATA);
	else
		reply_xattr(req, val, MIN((size_t)len, sizeof(val) - 1), size);
}

static void fs_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	static const char root[] = XATTR_STATS;
	static const char file[] = XATTR_VERSION "\0" XATTR_CACHED "\0" XATTR_KEY;
	struct fs *fs = fs_of(req);
	const struct ns_node *n;
	bool dir;

	n = ns_get(nsmgr_rdlock(fs->d->nm), ino);
	dir = n && n->is_dir;
	nsmgr_unlock(fs->d->nm);
	if (!n)
		fuse_reply_err(req, ENOENT);
	else if (ino == NS_ROOT_INO)
		reply_xattr(req, root, sizeof(root), size);
	else if (dir)
		reply_xattr(req, "", 0, size);
	else
		reply_xattr(req, file, sizeof(file), size);
}

static const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.getattr = fs_getattr,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.readdirplus = fs_readdirplus,
	.open = fs_open,
	.read = fs_read,
	.release = fs_release,
	.statfs = fs_statfs,
	.getxattr = fs_getxattr,
	.listxattr = fs_listxattr,
	.write = fs_write,
	.flush = fs_flush,
	.create = fs_create,
	.setattr = fs_setattr,
	.mkdir = fs_mkdir,
	.mknod = fs_mknod,
	.symlink = fs_symlink,
	.unlink = fs_erofs_entry,
	.rmdir = fs_erofs_entry,
	.rename = fs_rename,
	.link = fs_link,
	.setxattr = fs_setxattr,
	.removexattr = fs_removexattr,
};

static int inval_dir(void *arg, const struct ns_node *n)
{
	struct fs *fs = arg;

	fuse_lowlevel_notify_inval_inode(fs->se, n->ino, 0, 0);
	return 0;
}

/* after a re-listing, make the kernel forget cached directory contents */
static void on_swap(void *arg, struct ns *ns)
{
	struct fs *fs = arg;

	ns_foreach(nsmgr_rdlock(fs->d->nm), true, inval_dir, fs);
	nsmgr_unlock(fs->d->nm);
	(void)ns;
}

/*
 * The kernel's read-ahead window caps buffered FUSE reads at 128 KiB.
 * Raising it works only after the kernel processed our INIT reply (which
 * resets it), so a short-lived thread does it once the loop runs.
 * Needs root; otherwise the default stays, logged at debug level.
 */
static void raise_readahead(const char *mnt)
{
	char line[8192], path[128];
	unsigned maj = 0, min = 0;
	bool found = false;
	FILE *f;

	f = fopen("/proc/self/mountinfo", "r");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char mp[4096];
		unsigned a, b;

		if (sscanf(line, "%*d %*d %u:%u %*s %4095s", &a, &b, mp) == 3 &&
		    !strcmp(mp, mnt)) {
			maj = a;
			min = b;
			found = true;	/* the last one is the newest */
		}
	}
	fclose(f);
	if (!found)
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
	f = fopen(path, "w");
	if (!f) {
		log_dbg("cannot raise %s: %s", path, strerror(errno));
		return;
	}
	fprintf(f, "%d\n", READ_AHEAD_KB);
	if (fclose(f))
		log_dbg("cannot raise %s: %s", path, strerror(errno));
}

static void *readahead_main(void *arg)
{
	struct timespec d = { 0, 300 * 1000000L };
	char *mnt = arg;

	nanosleep(&d, NULL);
	raise_readahead(mnt);
	free(mnt);
	return NULL;
}

int fs_run(const struct fs_deps *d, int ready_fd)
{
	const struct fusefs_conf *cf = d->cf;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc;
	char opts[1024], *real;
	struct fs fs = { .d = d };
	int rc;

	fs.attr_timeout = cf->revalidate_s ? cf->revalidate_s : 1;
	fs.mounted = time(NULL);
	snprintf(opts, sizeof(opts),
		 "rw,default_permissions,noatime,fsname=%s,subtype=fusefs%s",
		 cf->source, cf->allow_other ? ",allow_other" : "");
	/* fsname is parsed by libfuse: commas in it would split options */
	for (char *p = opts + strlen("rw,default_permissions,noatime,fsname=");
	     *p && strncmp(p, ",subtype=", 9); p++)
		if (*p == ',')
			*p = '_';
	if (fuse_opt_add_arg(&args, "fusefs") ||
	    fuse_opt_add_arg(&args, "-o") || fuse_opt_add_arg(&args, opts) ||
	    (cf->debug_fuse && fuse_opt_add_arg(&args, "-d")))
		return -ENOMEM;
	fs.se = fuse_session_new(&args, &fs_ops, sizeof(fs_ops), &fs);
	fuse_opt_free_args(&args);
	if (!fs.se) {
		fprintf(stderr, "fusefs: cannot create the FUSE session\n");
		return -EIO;
	}
	rc = -EIO;
	if (fuse_set_signal_handlers(fs.se))
		goto out_session;
	/* libfuse ends the session on SIGHUP too: reopen logs instead */
	if (log_catch_sighup())
		goto out_signals;
	real = realpath(cf->mountpoint, NULL);
	if (!real || fuse_session_mount(fs.se, real)) {
		fprintf(stderr, "fusefs: cannot mount on %s%s%s\n", cf->mountpoint,
			real ? "" : ": ", real ? "" : strerror(errno));
		free(real);
		goto out_signals;
	}
	{
		pthread_t t;
		char *copy = strdup(real);

		if (copy && !pthread_create(&t, NULL, readahead_main, copy))
			pthread_detach(t);
		else
			free(copy);
	}
	nsmgr_start_refresh(d->nm, on_swap, &fs);
	log_info("mounted %s on %s", cf->source, real);
	if (ready_fd >= 0) {
		char ok = 0;

		if (write(ready_fd, &ok, 1) != 1)
			log_warn("could not report readiness");
		close(ready_fd);
		log_detach();	/* the starting command has exited */
	}
	if (d->on_ready)
		d->on_ready(d->ready_arg);
	lc = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(lc, 1);
	fuse_loop_cfg_set_max_threads(lc, cf->max_threads);
	rc = fuse_session_loop_mt(fs.se, lc);
	fuse_loop_cfg_destroy(lc);
	log_info("unmounting %s", real);
	fuse_session_unmount(fs.se);
	free(real);
	rc = rc < 0 ? rc : 0;
out_signals:
	fuse_remove_signal_handlers(fs.se);
out_session:
	fuse_session_destroy(fs.se);
	return rc;
}
