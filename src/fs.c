// SPDX-License-Identifier: MIT
/*
 * fs.c - the dataset's FUSE operations and the session (see fs.h).
 * Control files are fs_ctl.c's, extended attributes fs_xattr.c's, the
 * read-ahead window bdi.c's; fs_internal.h is what they share.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bdi.h"
#include "fs_internal.h"
#include "log.h"
#include "mountsafe.h"
#include "openbound.h"
#include "passthrough.h"
#include "testhook.h"

#define DIR_TIMEOUT	3600.0
#define READ_AHEAD_KB	4096
#define READ_AHEAD_DELAY_MS 300	/* after the INIT reply: the kernel has
					 * processed it by then */

void fs_reply_errno(fuse_req_t req, int err)
{
	fuse_reply_err(req, -err);
}

void fs_reply_err(fuse_req_t req, int err)
{
	fs_reply_errno(req, err == -ESTALE ? -EIO : err);
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
	/*
	 * The kernel sets the read-ahead window from this INIT's reply,
	 * which is written when this returns: raise it a while after that,
	 * not a while after the mount (the loop may start late on a loaded
	 * machine, and an INIT reply after the raise undid it).
	 */
	if (fs->ra_mnt &&
	    bdi_raise_readahead_later(fs->ra_mnt, READ_AHEAD_KB,
				      READ_AHEAD_DELAY_MS))
		log_warn("cannot raise the read-ahead window of %s", fs->ra_mnt);
}

/* data-file opens carry noflush: a FLUSH of one is counted (a test sees
 * none) and answered; control files commit on it */
static void fs_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);

	if (!fs_is_ctl(fs, ino))
		stat_inc(fs->d->st, data_flushes);
	fs_ctl_flush(req, ino, fi);
}

static void fs_erofs_entry(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	(void)parent;
	(void)name;
	fs_reply_err(req, -EROFS);
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

/*
 * The most LOOKUPs answered at once: above 1 only when the kernel sends
 * them in parallel, which for one directory needs FUSE_PARALLEL_DIROPS
 * (passthrough.c patches it into the INIT reply; a test stats the files
 * of one directory from several threads and looks for > 1).
 */
static void lookup_enter(struct fs *fs)
{
	unsigned now = atomic_fetch_add(&fs->lookups_now, 1) + 1;
	uint64_t max = atomic_load_explicit(&fs->d->st->lookups_concurrent_max,
					    memory_order_relaxed);

	while (now > max &&
	       !atomic_compare_exchange_weak(&fs->d->st->lookups_concurrent_max,
					     &max, now))
		;
}

static void lookup_leave(struct fs *fs)
{
	atomic_fetch_sub(&fs->lookups_now, 1);
}

static void fs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	struct fuse_entry_param e;
	const struct ns_node *n;
	uint64_t cino;
	int rc = ctl_lookup(fs->d->ctl, parent, name, false, &cino);
	struct ns *ns;
	bool parent_ok;

	if (rc) {
		fs_reply_err(req, rc);
		return;
	}
	if (cino) {
		fs_ctl_entry(fs, cino, &e);
		fuse_reply_entry(req, &e);
		return;
	}
	lookup_enter(fs);
	testhook_gate("lookup");	/* tests: hold LOOKUPs in flight */
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
	lookup_leave(fs);
	if (!n && !parent_ok)
		fs_reply_err(req, -ENOENT);
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
	if (fs_is_ctl(fs, ino)) {
		fs_ctl_entry(fs, ino, &e);
		fuse_reply_attr(req, &e.attr, 0);
		return;
	}
	ns = nsmgr_rdlock(fs->d->nm);
	n = ns_get(ns, ino);
	if (n)
		node_entry(fs, ns, n, &e);
	nsmgr_unlock(fs->d->nm);
	if (!n)
		fs_reply_err(req, -ENOENT);
	else
		fuse_reply_attr(req, &e.attr, e.attr_timeout);
}

/*
 * An open dataset directory: the tree its listing reads (nsmgr_hold()),
 * so that a re-listing between two READDIRs neither skips nor repeats a
 * name.  An offset names the tree it indexes: DIR_OFF(gen, pos), pos 1
 * after ".", 2 after "..", 2 + i after kid i.  The kernel's directory
 * cache matches offsets to resume a listing, so those of two trees must
 * differ: a listing of a replaced tree never resumes in (nor extends) a
 * cache filled from the new one, and falls back to asking here.
 */
struct dirh {
	struct fs_handle h;	/* first: fi->fh points at both */
	pthread_mutex_t lock;	/* guards t: READDIRs of a handle may overlap */
	struct nsmgr_tree *t;
};

#define DIR_OFF(gen, pos)	((off_t)((uint64_t)(gen) << 32 | (pos)))
#define DIR_OFF_GEN(off)	((uint32_t)((uint64_t)(off) >> 32))
#define DIR_OFF_POS(off)	((uint64_t)(off) & 0xffffffffu)

static void dir_drop(struct fs *fs, struct fs_handle *h)
{
	struct dirh *dh = container_of(h, struct dirh, h);

	fs_handle_del(fs, h);
	nsmgr_release(fs->d->nm, dh->t);
	pthread_mutex_destroy(&dh->lock);
	free(dh);
}

static void fs_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	const struct ns_node *n;
	struct dirh *dh;

	if (fs_is_ctl(fs, ino)) {
		fs_ctl_opendir(req, ino, fi);
		return;
	}
	dh = calloc(1, sizeof(*dh));
	if (!dh) {
		fs_reply_err(req, -ENOMEM);
		return;
	}
	pthread_mutex_init(&dh->lock, NULL);
	dh->t = nsmgr_hold(fs->d->nm, 0);
	fs_handle_add(fs, &dh->h, dir_drop);
	n = ns_get(dh->t->ns, ino);
	if (!n || !n->is_dir) {
		fs_reply_err(req, n ? -ENOTDIR : -ENOENT);
		goto out_drop;
	}
	fi->fh = (uintptr_t)dh;
	fi->cache_readdir = 1;
	fi->keep_cache = 1;
	if (fuse_reply_open(req, fi) == 0)
		return;
	/* interrupted: no RELEASEDIR will come */
out_drop:
	dir_drop(fs, &dh->h);
}

static void fs_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct dirh *dh = (struct dirh *)(uintptr_t)fi->fh;

	(void)ino;
	if (dh)		/* 0 for control directories */
		dir_drop(fs_of(req), &dh->h);
	fuse_reply_err(req, 0);
}

/*
 * The tree a READDIR at @off reads (dh->lock held): at 0 (a listing
 * begins: opendir, rewinddir) the current one; else the one @off names,
 * held by the handle from now on (its offsets may have come from the
 * kernel's cache of another tree).  When that tree is gone (released by
 * every listing), the current one, at the same position: best effort.
 */
static struct nsmgr_tree *dir_tree(struct fs *fs, struct dirh *dh, off_t off)
{
	struct nsmgr *nm = fs->d->nm;
	uint32_t gen = off ? DIR_OFF_GEN(off) : 0;
	struct nsmgr_tree *t;

	if (gen == dh->t->gen || (!off && nsmgr_is_current(nm, dh->t)))
		return dh->t;
	t = nsmgr_hold(nm, gen);
	if (!t) {
		log_dbg("directory offset %lld: its tree is gone; resuming in the current one",
			(long long)off);
		t = nsmgr_hold(nm, 0);
	}
	nsmgr_release(nm, dh->t);
	dh->t = t;
	return t;
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, bool plus, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct dirh *dh = (struct dirh *)(uintptr_t)fi->fh;
	const struct ns_node *d;
	struct nsmgr_tree *t;
	uint64_t pos;
	size_t used = 0;
	bool current;
	struct ns *ns;
	char *buf;

	if (fs_is_ctl(fs, ino)) {
		fs_ctl_readdir(req, ino, size, off, plus);
		return;
	}
	buf = malloc(size);
	if (!buf) {
		fs_reply_err(req, -ENOMEM);
		return;
	}
	pthread_mutex_lock(&dh->lock);
	t = dir_tree(fs, dh, off);
	ns = t->ns;
	/*
	 * Attributes of a replaced tree are not handed out: the kernel was
	 * told of the changes before this request came (a READDIRPLUS sent
	 * before that has its answer ignored by the kernel).
	 */
	current = nsmgr_is_current(fs->d->nm, t);
	d = ns_get(ns, ino);
	if (!d || !d->is_dir) {
		pthread_mutex_unlock(&dh->lock);
		free(buf);
		fs_reply_err(req, d ? -ENOTDIR : -ENOENT);
		return;
	}
	for (pos = DIR_OFF_POS(off); pos < ns_nkids(d) + 2; pos++) {
		const struct ns_node *n;
		const char *name;
		struct fuse_entry_param e;
		size_t need;

		if (pos < 2) {
			n = pos == 0 ? d : ns_parent(ns, d);
			name = pos == 0 ? "." : "..";
		} else {
			n = ns_kid(ns, d, pos - 2);
			if (!n)
				break;
			name = ns_name(ns, n);
			/* a listing must not hand the kernel a dentry of a
			 * shadowed entry (readdirplus) */
			if (ctl_shadows(ino, name))
				continue;
		}
		node_entry(fs, ns, n, &e);
		if (plus) {
			if (pos < 2 || !current) {
				/* no lookup count for . and .., nor for a
				 * replaced tree's entries: a name only */
				memset(&e, 0, sizeof(e));
				e.attr.st_ino = n->ino;
				e.attr.st_mode = n->is_dir ? S_IFDIR : S_IFREG;
			}
			need = fuse_add_direntry_plus(req, buf + used,
						      size - used, name, &e,
						      DIR_OFF(t->gen, pos + 1));
		} else {
			need = fuse_add_direntry(req, buf + used, size - used,
						 name, &e.attr,
						 DIR_OFF(t->gen, pos + 1));
		}
		if (need > size - used)
			break;
		used += need;
	}
	pthread_mutex_unlock(&dh->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void fs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size,
		       off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, false, fi);
}

static void fs_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size,
			   off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, true, fi);
}

/*
 * The mode of this open: a backing id > 0 when the kernel is to read the
 * cache file itself (passthrough.h), else 0.  Only files whose every
 * chunk is on disk and verified qualify; chunks from an earlier run are
 * verified first: by the verifier, this file before any other, while
 * this worker waits (local disk only), or here without a verifier.
 *
 * An O_DIRECT open (@direct) takes the inode's mode like any other (the
 * kernel refuses a cached-mode open beside passthrough ones), but its
 * reply also says FOPEN_DIRECT_IO, which the kernel obeys before
 * passthrough: its reads come to the daemon.  The kernel opens the
 * backing file with the caller's flags, so a passthrough O_DIRECT read
 * would meet the cache file system's alignment rules (EINVAL for 1000
 * bytes at offset 3), which a cold file does not have.  Not counted as a
 * passthrough open: the read path counts its bytes.
 */
static int open_passthrough(struct fs *fs, fuse_ino_t ino, struct centry *ce,
			    bool direct, bool *held)
{
	struct cache_ident ci;
	int fd = -1, id;

	if (!passthrough_active(fs->pt))
		return 0;
	verifier_set_passthrough(fs->d->verifier, true);
	if (cache_is_complete(fs->d->cache, ce)) {
		/* -ESHUTDOWN: cache_passthrough_fd() verifies them itself */
		verifier_wait_file(fs->d->verifier, ce);
		fd = cache_passthrough_fd(fs->d->cache, ce);
	}
	id = passthrough_acquire(fs->pt, ino, fd < 0 ? -1 : fd);
	*held = fd >= 0 && id > 0;
	if (fd >= 0 && id <= 0)
		cache_passthrough_put(fs->d->cache, ce);
	if (id > 0 && !direct) {
		cache_ident(ce, &ci);
		/* the reads are the kernel's now: count the file as read */
		stat_inc(fs->d->st, passthrough_opens);
		stat_add(fs->d->st, passthrough_bytes, ci.size);
		stat_inc(fs->d->st, hits);
		stat_add(fs->d->st, bytes_from_cache, ci.size);
		cache_note_read(fs->d->cache, ce, ci.size);
	}
	return id;
}

/*
 * An open file of the dataset (fi->fh): its cache entry, and who opened
 * it (a RELEASE carries no reliable caller), for openbound_put().
 */
struct fs_file {
	struct fs_handle h;	/* first: fi->fh points at both */
	struct centry *ce;
	uid_t uid;
	bool pt_held;		/* holds the file (cache_passthrough_fd()) */
	struct fetch_stream stream;	/* this reader's, fetch_read_as() */
};

void fs_handle_add(struct fs *fs, struct fs_handle *h,
		   void (*drop)(struct fs *fs, struct fs_handle *h))
{
	h->drop = drop;
	h->prev = NULL;
	pthread_mutex_lock(&fs->handles_lock);
	h->next = fs->handles;
	if (h->next)
		h->next->prev = h;
	fs->handles = h;
	pthread_mutex_unlock(&fs->handles_lock);
}

void fs_handle_del(struct fs *fs, struct fs_handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	if (h->prev)
		h->prev->next = h->next;
	else
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_lock);
}

/* the handles no RELEASE ended (the session is gone): their memory */
static void fs_handles_drop(struct fs *fs)
{
	while (fs->handles)
		fs->handles->drop(fs, fs->handles);
}

static struct centry *file_entry(const struct fuse_file_info *fi)
{
	return ((struct fs_file *)(uintptr_t)fi->fh)->ce;
}

static struct fetch_stream *file_stream(const struct fuse_file_info *fi)
{
	return &((struct fs_file *)(uintptr_t)fi->fh)->stream;
}

/* a passthrough open's hold on its file ends (before fetch_close()) */
static void file_unhold(struct fs *fs, struct fs_file *ff)
{
	if (ff->pt_held)
		cache_passthrough_put(fs->d->cache, ff->ce);
	ff->pt_held = false;
}

/* the handle of an open that ends here: its count and memory */
static void file_put(struct fs *fs, struct fs_file *ff)
{
	fs_handle_del(fs, &ff->h);
	file_unhold(fs, ff);
	openbound_put(fs->ob, ff->uid);
	free(ff);
}

static void file_drop(struct fs *fs, struct fs_handle *h)
{
	file_put(fs, container_of(h, struct fs_file, h));
}

/*
 * The rest of an open, once nsmgr says the attributes it has may be used:
 * the cache entry of that version, the reply.  On a worker, or on a
 * re-check thread for a parked open.
 */
static void open_finish(struct fs *fs, fuse_req_t req, fuse_ino_t ino,
			struct fuse_file_info *fi)
{
	struct fs_file *ff;
	struct centry *ce;
	struct ns_attr a;
	bool changed, complete;
	int rc, backing;
	char *key;

	rc = nsmgr_file(fs->d->nm, ino, &a, &key);
	if (rc) {
		fs_reply_err(req, rc);
		return;
	}
	ff = calloc(1, sizeof(*ff));
	if (!ff) {
		free(key);
		fs_reply_err(req, -ENOMEM);
		return;
	}
	/* before a data file is opened for it: EMFILE leaves the owner's */
	ff->uid = fuse_req_ctx(req)->uid;
	rc = openbound_get(fs->ob, ff->uid);
	if (rc) {
		free(key);
		free(ff);
		fs_reply_errno(req, rc);
		return;
	}
	fs_handle_add(fs, &ff->h, file_drop);
	rc = cache_attach(fs->d->cache, ino, key, &a, &ce, &changed);
	free(key);
	if (rc) {
		file_put(fs, ff);
		fs_reply_err(req, rc);
		return;
	}
	ff->ce = ce;
	fi->fh = (uintptr_t)ff;
	/*
	 * A new version: not keeping the cache drops the kernel's pages of
	 * the old one.  Its attributes were invalidated by whoever found the
	 * change (a re-check or a re-listing, on a background thread).
	 */
	fi->keep_cache = !changed;
	fi->noflush = 1;	/* nothing to flush: no FLUSH per close */
	backing = open_passthrough(fs, ino, ce, fi->flags & O_DIRECT,
				   &ff->pt_held);
	if (backing > 0 && (fi->flags & O_DIRECT))
		fi->direct_io = 1;	/* no alignment rule: see above */
	if (backing > 0)
		passthrough_mark_reply(backing);
	else
		verifier_note_open(fs->d->verifier, ce);
	/*
	 * Before the reply: once it is sent, a RELEASE may free @ce, and a
	 * reader that asks for its list's status right after its open must
	 * find the open counted.  An interrupted open still counts: the
	 * reader went for that file.
	 */
	complete = cache_is_complete(fs->d->cache, ce);
	epochs_note_open(fs->d->epochs, ino, complete);
	if (fuse_reply_open(req, fi)) {
		/* interrupted: no release will come for this open */
		passthrough_mark_reply(0);
		passthrough_release(fs->pt, ino);
		file_unhold(fs, ff);
		fetch_close(fs->d->fetch, ce);
		file_put(fs, ff);
	}
	testhook_gate("open-replied");	/* tests: work after a reply is late */
}

/* an open parked until a re-check of its file answers */
struct open_wait {
	struct nsmgr_wait w;
	fuse_req_t req;
	fuse_ino_t ino;
	struct fuse_file_info fi;
};

static void open_resume(struct nsmgr_wait *w, int err)
{
	struct open_wait *ow = container_of(w, struct open_wait, w);

	if (err)
		fs_reply_err(ow->req, err);
	else
		open_finish(fs_of(ow->req), ow->req, ow->ino, &ow->fi);
	free(ow);
}

/*
 * Never waits on the backend: nsmgr answers from memory and re-checks in
 * the background; an open that must see the re-check's answer is parked
 * and answered by open_resume().
 */
static void fs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct open_wait *ow;
	bool parked;
	int rc;

	if (fs_is_ctl(fs, ino)) {
		fs_ctl_open(req, ino, fi);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fs_reply_err(req, -EROFS);
		return;
	}
	rc = nsmgr_open_check(fs->d->nm, ino, NULL, &parked);
	if (rc == -EWOULDBLOCK) {
		ow = calloc(1, sizeof(*ow));
		if (!ow) {
			fs_reply_err(req, -ENOMEM);
			return;
		}
		ow->w.done = open_resume;
		ow->req = req;
		ow->ino = ino;
		ow->fi = *fi;
		rc = nsmgr_open_check(fs->d->nm, ino, &ow->w, &parked);
		if (parked)
			return;		/* @ow is nsmgr's, maybe freed already */
		free(ow);
	}
	if (rc)
		fs_reply_err(req, rc);
	else
		open_finish(fs, req, ino, fi);
}

/* fetch_done_fn: the answer to a read, on a worker or a completion thread */
static void read_done(void *arg, int err, const struct fetch_piece *p, int n)
{
	fuse_req_t req = arg;
	struct fuse_bufvec *bv;
	int i;

	if (err) {
		fs_reply_err(req, err);		/* -errno */
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
		fs_reply_err(req, -ENOMEM);
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
	struct centry *ce = file_entry(fi);
	struct epochs_read er;
	bool sampled;
	int rc;

	if (fs_is_ctl(fs, ino)) {
		fs_ctl_read(req, size, off, fi);
		return;
	}
	/*
	 * A read of listed samples: its handle reads pages, even at the
	 * file's start; its ranges count as read before it is answered (a
	 * status read right after it sees them), with the file held in use
	 * until then, so that the uses this moves on cannot make the policy
	 * evict the bytes it is about to be served from.
	 */
	sampled = epochs_read_ranges(fs->d->epochs, ce, off, size, &er);
	if (sampled) {
		atomic_store_explicit(&file_stream(fi)->sampled, true,
				      memory_order_relaxed);
		cache_busy_get(fs->d->cache, ce);
		epochs_note_read(fs->d->epochs, &er);
	}
	rc = fetch_read_as(fs->d->fetch, ce, file_stream(fi), off, size,
			   read_done, req);
	if (rc < 0)
		fs_reply_err(req, rc);
	if (sampled)
		cache_busy_put(fs->d->cache, ce);
}

static void fs_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct fs_file *ff = (struct fs_file *)(uintptr_t)fi->fh;

	if (fs_is_ctl(fs, ino)) {
		fs_ctl_release(req, fi);
		return;
	}
	passthrough_release(fs->pt, ino);
	file_unhold(fs, ff);
	fetch_close(fs->d->fetch, ff->ce);
	file_put(fs, ff);
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

static const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_init,
	.lookup = fs_lookup,
	.getattr = fs_getattr,
	.opendir = fs_opendir,
	.readdir = fs_readdir,
	.readdirplus = fs_readdirplus,
	.releasedir = fs_releasedir,
	.open = fs_open,
	.read = fs_read,
	.release = fs_release,
	.statfs = fs_statfs,
	.getxattr = fs_xattr_get,
	.listxattr = fs_xattr_list,
	.setxattr = fs_xattr_set,
	.removexattr = fs_xattr_remove,
	.write = fs_ctl_write,
	.flush = fs_flush,
	.create = fs_ctl_create,
	.setattr = fs_ctl_setattr,
	.mkdir = fs_mkdir,
	.mknod = fs_mknod,
	.symlink = fs_symlink,
	.unlink = fs_erofs_entry,
	.rmdir = fs_erofs_entry,
	.rename = fs_rename,
	.link = fs_link,
};

static int inval_dir(void *arg, const struct ns_node *n)
{
	struct fs *fs = arg;

	fuse_lowlevel_notify_inval_inode(fs->se, n->ino, 0, 0);
	return 0;
}

/* after a re-listing, make the kernel forget cached directory contents */
static void on_swap(void *arg)
{
	struct fs *fs = arg;

	ns_foreach(nsmgr_rdlock(fs->d->nm), true, inval_dir, fs);
	nsmgr_unlock(fs->d->nm);
}

/*
 * A file changed or vanished in the backend: the kernel drops its
 * attributes and pages.  Called on nsmgr's background threads only, never
 * inside a request handler (an invalidation there could wait on the very
 * request being handled).
 */
static void on_change(void *arg, uint64_t ino)
{
	struct fs *fs = arg;

	fuse_lowlevel_notify_inval_inode(fs->se, ino, 0, 0);
}

/* a name the kernel may remember as absent (a negative entry) now exists */
static void on_added(void *arg, uint64_t parent, const char *name)
{
	struct fs *fs = arg;

	fuse_lowlevel_notify_inval_entry(fs->se, parent, name, strlen(name));
}

int fs_run(const struct fs_deps *d, int ready_fd)
{
	const struct fusefs_conf *cf = d->cf;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *lc;
	/* fsname (the source: an S3 prefix alone may be 1023 bytes) and the
	 * kernel options (conf_set_o()'s 512) */
	char opts[PATH_MAX + 1024], *real;
	struct fs fs = { .d = d, .handles_lock = PTHREAD_MUTEX_INITIALIZER };
	struct rlimit rl;
	bool fd_mount;
	int rc;

	fs.attr_timeout = cf->revalidate_s ? cf->revalidate_s : 1;
	fs.mounted = time(NULL);
	/* the user's kernel options (-o ro,noexec,...) come last and win;
	 * never cut short: that would drop them (and subtype=) silently */
	if (snprintf(opts, sizeof(opts),
		     "rw,default_permissions,noatime,fsname=%s,subtype=fusefs%s%s%s",
		     cf->source, cf->allow_other ? ",allow_other" : "",
		     cf->kernel_opts ? "," : "",
		     cf->kernel_opts ? cf->kernel_opts : "") >= (int)sizeof(opts)) {
		fprintf(stderr, "fusefs: SOURCE is too long for the kernel's mount options\n");
		return -ENAMETOOLONG;
	}
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
	/* "/dev/fd/N": libfuse serves that FUSE fd and mounts nothing */
	fd_mount = mountsafe_fd(cf->mountpoint) >= 0;
	real = fd_mount ? strdup(cf->mountpoint) : realpath(cf->mountpoint, NULL);
	if (!real || fuse_session_mount(fs.se, real)) {
		fprintf(stderr, "fusefs: cannot mount on %s%s%s\n", cf->mountpoint,
			real ? "" : ": ", real ? "" : strerror(errno));
		free(real);
		goto out_signals;
	}
	if (getrlimit(RLIMIT_NOFILE, &rl))
		rl.rlim_cur = 1024;
	fs.ob = openbound_create(cf->user_opens,
				 openbound_others_max(rl.rlim_cur));
	if (!fs.ob)
		goto out_unmount;
	/* before the loop, so the INIT reply can ask for passthrough */
	passthrough_setup(&fs.pt, fs.se, cf->passthrough ? PASSTHROUGH_AUTO :
			  PASSTHROUGH_OFF);
	fs.ra_mnt = fd_mount ? NULL : real;	/* raised after INIT: fs_init() */
	rc = nsmgr_start(d->nm, &(struct nsmgr_hooks){ .on_swap = on_swap,
		.on_change = on_change, .on_added = on_added, .arg = &fs });
	if (rc) {
		fprintf(stderr, "fusefs: cannot start the namespace threads: %s\n",
			strerror(-rc));
		goto out_unmount;
	}
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
	/* a cloned fd per worker needs /dev/fuse (absent in an fd-passing pod) */
	fuse_loop_cfg_set_clone_fd(lc, access("/dev/fuse", R_OK | W_OK) == 0);
	fuse_loop_cfg_set_max_threads(lc, cf->max_threads);
	rc = fuse_session_loop_mt(fs.se, lc);
	fuse_loop_cfg_destroy(lc);
	rc = rc < 0 ? rc : 0;
	/* the hooks use the session and this frame: no more of them */
	nsmgr_stop(d->nm);
	/* parked reads are answered while the session still exists */
	fetch_drain(d->fetch);
	log_info("unmounting %s", real);
out_unmount:
	fuse_session_unmount(fs.se);
	free(real);
out_signals:
	fuse_remove_signal_handlers(fs.se);
out_session:
	fuse_session_destroy(fs.se);
	fs_handles_drop(&fs);
	pthread_mutex_destroy(&fs.handles_lock);
	passthrough_destroy(fs.pt);
	openbound_destroy(fs.ob);
	return rc;
}
