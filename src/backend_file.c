// SPDX-License-Identifier: MIT
/*
 * backend_file.c - a local directory tree as the dataset: file:///DIR.
 *
 * Meant for a slow or shared file system (an NFS or CephFS kernel mount)
 * cached on local SSD, and for tests that need no cluster.  libc only.
 *
 * Source: file:///ABSOLUTE/DIR.  Every regular file below DIR is an
 * object whose key is its path relative to DIR, '/'-separated.  There is
 * no separate prefix: a prefix is a deeper directory (file:///srv/ds/train
 * is the tree below /srv/ds/train), so be->prefix stays "" and keys, the
 * tree and the S3/RADOS "PREFIX/" filtering agree.  An empty directory is
 * listed as a directory marker ("a/b/"), as S3 does.
 *
 * Symlinks are never followed, neither while listing nor while opening a
 * key: each component is opened with O_NOFOLLOW from the root directory's
 * fd, so a key cannot leave DIR (a key with a leading '/', an empty, "."
 * or ".." component is -ENOENT, as is one that meets a symlink or names
 * anything but a regular file).  Symlinks, FIFOs, sockets and devices are
 * skipped (counted, the first few logged per listing); so are unreadable
 * subdirectories.  Other listing errors fail the listing (a re-listing
 * then keeps the old tree instead of losing half of it).
 *
 * Versions: the change token of a file is built from its inode number,
 * mtime (ns) and size, "i<ino>-m<sec>.<nsec>-s<size>" in hex, or
 * "x" + base64url of the same 28 bytes when that would not fit
 * NS_VERSION_MAX.  A read checks the token of the opened file before and
 * after pread(): -ESTALE if it is not the expected one, so bytes of
 * another version are never returned (a rewrite that keeps inode, size
 * and mtime to the nanosecond cannot be seen by any token).
 *
 * Reads are queued to FILE_WORKERS threads (the queue is linked through
 * backend_read.priv); each opens the file, checks the version, preads and
 * calls done().  A pread on a hung network mount blocks its worker: no
 * --op-timeout here.  close() lets the workers answer what is queued,
 * then joins them.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "bgthread.h"
#include "log.h"
#include "strsafe.h"
#include "testhook.h"

#define FILE_WORKERS	4	/* preads in parallel */
#define LOG_SKIPS	5	/* names logged per kind and listing */

/* "x" + base64 of ino, mtime seconds, size (8 bytes each), nanoseconds (4) */
_Static_assert(1 + (28 * 8 + 5) / 6 < NS_VERSION_MAX,
	       "the base64 version token must fit NS_VERSION_MAX");

enum file_skip {
	SKIP_SYMLINK,
	SKIP_SPECIAL,		/* FIFO, socket, device */
	SKIP_UNREADABLE,	/* a subdirectory we may not list */
	SKIP_TOO_LONG,		/* path over PATH_MAX - 1 bytes */
	SKIP_NKINDS
};

static const char *const skip_names[SKIP_NKINDS] = {
	"symlink", "special file", "unreadable directory", "path too long",
};

struct file_be {
	struct backend base;
	int root;			/* O_DIRECTORY fd of DIR */
	char dir[PATH_MAX];		/* for messages */
	pthread_mutex_t lock;		/* guards the queue and stopping */
	pthread_cond_t cond;
	struct backend_read *head, *tail;	/* linked through ->priv */
	bool stopping;
	unsigned nworkers;
	pthread_t workers[FILE_WORKERS];
};

/* one listing */
struct walk {
	struct file_be *f;
	backend_list_fn fn;
	void *arg;
	char path[PATH_MAX];		/* the key being built */
	uint64_t skipped[SKIP_NKINDS];
};

static struct file_be *fbe(struct backend *be)
{
	return container_of(be, struct file_be, base);
}

static void b64url(char *out, const uint8_t *in, size_t n)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
	uint32_t acc = 0;
	int bits = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		acc = acc << 8 | in[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			*out++ = tab[(acc >> bits) & 63];
		}
	}
	if (bits)
		*out++ = tab[(acc << (6 - bits)) & 63];
	*out = '\0';
}

/* file_version() - the change token of @st into @out (NS_VERSION_MAX) */
static void file_version(const struct stat *st, char *out)
{
	uint64_t v[3] = { st->st_ino, (uint64_t)st->st_mtim.tv_sec,
			  (uint64_t)st->st_size };
	uint32_t ns = (uint32_t)st->st_mtim.tv_nsec;
	uint8_t raw[sizeof(v) + sizeof(ns)];
	int n;

	n = snprintf(out, NS_VERSION_MAX, "i%" PRIx64 "-m%" PRIx64 ".%" PRIx32
		     "-s%" PRIx64, v[0], v[1], ns, v[2]);
	if (n > 0 && n < NS_VERSION_MAX)
		return;
	memcpy(raw, v, sizeof(v));
	memcpy(raw + sizeof(v), &ns, sizeof(ns));
	out[0] = 'x';
	b64url(out + 1, raw, sizeof(raw));	/* 38 characters */
}

static void attr_of(const struct stat *st, struct ns_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = st->st_size;
	a->mtime = st->st_mtim.tv_sec;
	a->mtime_nsec = st->st_mtim.tv_nsec;
	file_version(st, a->version);
}

/* errors that mean "this key is not a regular file below DIR (any more)" */
static int gone(int err)
{
	return err == ELOOP || err == ENOTDIR || err == EISDIR ? -ENOENT : -err;
}

/* key_valid() - relative, no empty, "." or ".." component */
static bool key_valid(const char *key)
{
	const char *p = key, *end;
	size_t n;

	if (!*key)
		return false;
	for (;;) {
		end = strchrnul(p, '/');
		n = end - p;
		if (!n || (n == 1 && p[0] == '.') ||
		    (n == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		if (!*end)
			return true;
		p = end + 1;
	}
}

/*
 * open_parent() - walk the directories of @key from the root with
 * O_NOFOLLOW; *@last points at the final component.
 * Return: a directory fd (f->root itself for a top-level key: do not
 * close that one) or -errno; -ENOENT for a malformed key.
 */
static int open_parent(struct file_be *f, const char *key, const char **last)
{
	char comp[NAME_MAX + 1];
	const char *p = key, *slash;
	int dfd = f->root, fd;
	size_t n;

	if (!key_valid(key))
		return -ENOENT;
	while ((slash = strchr(p, '/'))) {
		n = slash - p;
		if (n > NAME_MAX) {
			fd = -ENAMETOOLONG;
			goto out_close;
		}
		memcpy(comp, p, n);
		comp[n] = '\0';
		fd = openat(dfd, comp,
			    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0) {
			fd = gone(errno);
			goto out_close;
		}
		if (dfd != f->root)
			close(dfd);
		dfd = fd;
		p = slash + 1;
	}
	*last = p;
	return dfd;
out_close:
	if (dfd != f->root)
		close(dfd);
	return fd;
}

static void close_parent(struct file_be *f, int dfd)
{
	if (dfd != f->root)
		close(dfd);
}

/* stat_key() - attributes of @key; -ENOENT unless a regular file */
static int stat_key(struct file_be *f, const char *key, struct stat *st)
{
	const char *last;
	int dfd, rc = 0;

	dfd = open_parent(f, key, &last);
	if (dfd < 0)
		return dfd;
	if (fstatat(dfd, last, st, AT_SYMLINK_NOFOLLOW))
		rc = gone(errno);
	else if (!S_ISREG(st->st_mode))
		rc = -ENOENT;
	close_parent(f, dfd);
	return rc;
}

/*
 * open_key() - open regular file @key for reading.  O_NONBLOCK: should a
 * FIFO replace the file between the check and the open, the open does
 * not wait for a writer (it is refused after fstat).
 * Return: fd or -errno.
 */
static int open_key(struct file_be *f, const char *key, struct stat *st)
{
	const char *last;
	int dfd, fd;

	dfd = open_parent(f, key, &last);
	if (dfd < 0)
		return dfd;
	fd = openat(dfd, last,
		    O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0)
		fd = gone(errno);
	close_parent(f, dfd);
	if (fd < 0)
		return fd;
	if (fstat(fd, st)) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return -ENOENT;
	}
	return fd;
}

static int file_stat(struct backend *be, const char *key, struct ns_attr *out)
{
	struct stat st;
	int rc;

	rc = stat_key(fbe(be), key, &st);
	if (rc == 0)
		attr_of(&st, out);
	return rc;
}

/* listing */

static void note_skip(struct walk *w, enum file_skip k, const char *name)
{
	if (++w->skipped[k] <= LOG_SKIPS)
		log_warn("file source %s: skipping %s '%s%s'%s", w->f->dir,
			 skip_names[k], str_log(w->path), str_log(name),
			 w->skipped[k] == LOG_SKIPS ?
			 " (further ones only counted)" : "");
}

static int walk_dir(struct walk *w, int dfd, size_t plen, uint64_t *emitted);

/* @name in directory @dfd, whose key prefix is w->path[0..plen) */
static int walk_entry(struct walk *w, int dfd, size_t plen, const char *name,
		      uint64_t *emitted)
{
	size_t nlen = strlen(name);
	struct ns_attr a;
	struct stat st;
	uint64_t below = 0;
	int fd, rc;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW))
		return errno == ENOENT ? 0 : -errno;	/* gone meanwhile */
	if (S_ISLNK(st.st_mode)) {
		note_skip(w, SKIP_SYMLINK, name);
		return 0;
	}
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		note_skip(w, SKIP_SPECIAL, name);
		return 0;
	}
	/* room for name, a '/' after a directory and the NUL */
	if (plen + nlen + 2 > sizeof(w->path)) {
		note_skip(w, SKIP_TOO_LONG, name);
		return 0;
	}
	memcpy(w->path + plen, name, nlen + 1);
	if (S_ISREG(st.st_mode)) {
		attr_of(&st, &a);
		rc = w->fn(w->arg, w->path, plen + nlen, &a);
		if (rc == 0)
			(*emitted)++;
		goto out;
	}
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		w->path[plen] = '\0';
		if (rc == -ENOENT || rc == -ENOTDIR)
			return 0;		/* removed or replaced meanwhile */
		if (rc == -EACCES || rc == -EPERM || rc == -ELOOP) {
			note_skip(w, rc == -EACCES || rc == -EPERM ?
				  SKIP_UNREADABLE : SKIP_SYMLINK, name);
			return 0;
		}
		return rc;
	}
	w->path[plen + nlen] = '/';
	w->path[plen + nlen + 1] = '\0';
	rc = walk_dir(w, fd, plen + nlen + 1, &below);	/* closes fd */
	if (rc == 0 && !below) {
		/* an empty directory shows up only through its marker */
		memset(&a, 0, sizeof(a));
		a.mtime = st.st_mtim.tv_sec;
		a.mtime_nsec = st.st_mtim.tv_nsec;
		rc = w->fn(w->arg, w->path, plen + nlen + 1, &a);
	}
	*emitted += below + (rc == 0 && !below);
out:
	w->path[plen] = '\0';
	return rc;
}

/* walk_dir() - emit everything below @dfd (consumed: closed on return) */
static int walk_dir(struct walk *w, int dfd, size_t plen, uint64_t *emitted)
{
	struct dirent *de;
	DIR *d;
	int rc = 0;

	d = fdopendir(dfd);
	if (!d) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			rc = -errno;
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		rc = walk_entry(w, dirfd(d), plen, de->d_name, emitted);
		if (rc)
			break;
	}
	closedir(d);
	return rc;
}

static int file_list(struct backend *be, backend_list_fn fn, void *arg)
{
	struct file_be *f = fbe(be);
	struct walk *w;
	uint64_t emitted = 0;
	int fd, rc, k;

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->f = f;
	w->fn = fn;
	w->arg = arg;
	/* a descriptor of our own: its directory offset is not shared */
	fd = openat(f->root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		goto out_free;
	}
	rc = walk_dir(w, fd, 0, &emitted);
	if (rc)
		log_err("file source %s: listing failed: %s", f->dir,
			strerror(-rc));
	for (k = 0; k < SKIP_NKINDS; k++)
		if (w->skipped[k] > LOG_SKIPS)
			log_warn("file source %s: skipped %" PRIu64 " in all (%s)",
				 f->dir, w->skipped[k], skip_names[k]);
out_free:
	free(w);
	return rc;
}

/* reads */

static ssize_t pread_full(int fd, char *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = pread(fd, buf + done, len - done, off + done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;		/* end of the file */
		done += n;
	}
	return done;
}

/* file_read_now() - the read itself, on a worker: bytes or -errno */
static ssize_t file_read_now(struct file_be *f, struct backend_read *rd)
{
	char before[NS_VERSION_MAX], after[NS_VERSION_MAX];
	struct stat st;
	ssize_t ret;
	int fd;

	testhook_gate("file-read");	/* tests: reads held in flight */
	fd = open_key(f, rd->key, &st);
	if (fd < 0)
		return fd;
	file_version(&st, before);
	if (rd->version[0] && strcmp(before, rd->version)) {
		ret = -ESTALE;
		goto out_close;
	}
	ret = pread_full(fd, rd->buf, rd->len, rd->off);
	if (ret < 0)
		goto out_close;
	/* rewritten in place while we read: the bytes may be mixed */
	if (fstat(fd, &st)) {
		ret = -errno;
		goto out_close;
	}
	file_version(&st, after);
	if (strcmp(before, after))
		ret = -ESTALE;
	/* the cache keeps these bytes now: no second copy in the page cache */
	posix_fadvise(fd, rd->off, rd->len, POSIX_FADV_DONTNEED);
out_close:
	close(fd);
	return ret;
}

static void *file_worker(void *arg)
{
	struct file_be *f = arg;
	struct backend_read *rd;
	ssize_t ret;

	pthread_mutex_lock(&f->lock);
	for (;;) {
		while (!f->head && !f->stopping)
			pthread_cond_wait(&f->cond, &f->lock);
		rd = f->head;
		if (!rd)
			break;		/* stopping and drained */
		f->head = rd->priv;
		if (!f->head)
			f->tail = NULL;
		pthread_mutex_unlock(&f->lock);
		rd->priv = NULL;
		ret = file_read_now(f, rd);
		rd->done(rd, ret);
		pthread_mutex_lock(&f->lock);
	}
	pthread_mutex_unlock(&f->lock);
	return NULL;
}

static int file_read(struct backend *be, struct backend_read *rd)
{
	struct file_be *f = fbe(be);
	int rc = 0;

	rd->priv = NULL;
	pthread_mutex_lock(&f->lock);
	if (f->stopping) {
		rc = -ESHUTDOWN;
		goto out_unlock;
	}
	if (f->tail)
		f->tail->priv = rd;
	else
		f->head = rd;
	f->tail = rd;
	pthread_cond_signal(&f->cond);
out_unlock:
	pthread_mutex_unlock(&f->lock);
	return rc;
}

/* stop_workers() - answer what is queued, then join */
static void stop_workers(struct file_be *f)
{
	unsigned i;

	pthread_mutex_lock(&f->lock);
	f->stopping = true;
	pthread_cond_broadcast(&f->cond);
	pthread_mutex_unlock(&f->lock);
	for (i = 0; i < f->nworkers; i++)
		pthread_join(f->workers[i], NULL);
	f->nworkers = 0;
}

static int file_open(struct backend **out, const struct fusefs_conf *cf,
		     const char *where)
{
	struct file_be *f;
	size_t n = strlen(where);
	int rc;

	if (where[0] != '/') {
		fprintf(stderr, "fusefs: bad source: expected file:///ABSOLUTE/DIR\n");
		return -EINVAL;
	}
	while (n > 1 && where[n - 1] == '/')
		n--;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->base.ops = &backend_file_ops;
	if (n >= sizeof(f->dir)) {
		fprintf(stderr, "fusefs: file source: path too long\n");
		rc = -ENAMETOOLONG;
		goto out_free;
	}
	memcpy(f->dir, where, n);
	f->dir[n] = '\0';
	f->root = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->root < 0) {
		rc = -errno;
		fprintf(stderr, "fusefs: file source %s: %s\n", f->dir,
			strerror(-rc));
		goto out_free;
	}
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->cond, NULL);
	for (; f->nworkers < FILE_WORKERS; f->nworkers++) {
		rc = thread_spawn(&f->workers[f->nworkers], file_worker, f);
		if (rc) {
			fprintf(stderr, "fusefs: file source: cannot start a reader thread: %s\n",
				strerror(-rc));
			goto out_stop;
		}
	}
	log_info("file source %s: %u reader threads", f->dir, f->nworkers);
	*out = &f->base;
	return 0;
out_stop:
	stop_workers(f);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	close(f->root);
out_free:
	free(f);
	return rc;
}

static void file_close(struct backend *be)
{
	struct file_be *f = fbe(be);

	stop_workers(f);
	pthread_cond_destroy(&f->cond);
	pthread_mutex_destroy(&f->lock);
	close(f->root);
	free(f);
}

const struct backend_ops backend_file_ops = {
	.scheme = "file",
	.open = file_open,
	.close = file_close,
	.list = file_list,
	.stat = file_stat,
	.read = file_read,
};
