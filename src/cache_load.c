// SPDX-License-Identifier: MIT
/*
 * cache_load.c - start-up of the cache (see cache_priv.h): the directory
 * lock, the O_DIRECT probe, the index loaded into entries and reconciled
 * with the data files on disk.  Runs before any thread but the index
 * writer (meta.c), which only takes what it is queued.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_priv.h"
#include "log.h"

static int load_file(void *arg, uint64_t fid, const struct file_rec *r)
{
	struct cache *c = arg;
	struct centry *ce;
	int rc = -EINVAL;

	if (r->chunk_size == c->chunk_size)
		rc = centry_insert(c, fid, NULL, r->version, r->size, r->mtime,
				   &ce);
	if (rc == -EINVAL || rc == -EFBIG) {
		meta_q_drop_file(c->meta, fid);	/* a record we cannot use */
		return 0;
	}
	return rc;
}

static int load_chunk(void *arg, uint64_t fid, uint32_t n,
		      const struct chunk_rec *r)
{
	struct cache *c = arg;
	struct centry *ce = htab_get(&c->tab, fid);

	if (!ce || n >= ce->nchunks || r->gen != ce->gen ||
	    r->len != cache_chunk_len(c, ce, n) || ce->state[n]) {
		meta_q_drop_chunk(c->meta, fid, n);
		return 0;
	}
	ce->state[n] = CH_UNVERIFIED;
	ce->unverified++;
	c->unverified++;
	ce->sum[n] = r->sum;
	ce->used += blocks(r->len);
	policy_charge(&c->pol, ce->pn, (int64_t)blocks(r->len));
	return 0;
}

static int load_heat(void *arg, uint64_t fid, const struct heat_rec *r)
{
	struct cache *c = arg;
	struct heat_row h = {
		.fid = fid, .score = r->score, .count = r->count,
		.bytes = r->bytes, .last = r->last, .pinned = r->pinned,
	};

	return policy_heat_load(&c->pol, &h);
}

/* punch the chunks of @ce the index does not hold out of @dirfd/@name */
static void punch_unindexed(struct cache *c, struct centry *ce, int dirfd,
			    const char *name)
{
	int fd = openat(dirfd, name, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	uint32_t n;

	if (fd < 0)
		return;
	for (n = 0; n < ce->nchunks; n++)
		if (ce->state[n] == CH_ABSENT &&
		    fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)n * c->chunk_size, c->chunk_size))
			break;
	close(fd);
}

/* forget indexed chunk @n of @ce whose bytes are not on disk */
static void drop_missing_chunk(struct cache *c, struct centry *ce, uint32_t n)
{
	uint64_t len = blocks(cache_chunk_len(c, ce, n));

	meta_q_drop_chunk(c->meta, ce->fid, n);
	ce->state[n] = CH_ABSENT;
	ce->unverified--;
	c->unverified--;
	ce->used -= len;
	policy_charge(&c->pol, ce->pn, -(int64_t)len);
}

/*
 * Less on disk than indexed: an eviction punched chunks (or unlinked the
 * file, below) and the daemon died before the index commit that drops
 * their records.  An indexed chunk with no data in its range is such a
 * chunk: forgotten, not left to fail its checksum at first read (which
 * would count as disk damage).  Returns the chunks dropped.
 */
static unsigned drop_punched(struct cache *c, struct centry *ce, int dirfd,
			     const char *name)
{
	int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	unsigned dropped = 0;
	uint32_t n;

	if (fd < 0)
		return 0;
	for (n = 0; n < ce->nchunks; n++) {
		off_t off = (off_t)n * c->chunk_size, d;

		if (ce->state[n] != CH_UNVERIFIED)
			continue;
		d = lseek(fd, off, SEEK_DATA);
		if ((d < 0 && errno == ENXIO) ||
		    (d >= 0 && d >= off + (off_t)cache_chunk_len(c, ce, n))) {
			drop_missing_chunk(c, ce, n);
			dropped++;
		}
	}
	close(fd);
	return dropped;
}

/* indexed chunks of entries whose data file is gone: forgotten */
static void drop_unfound(struct cache *c, unsigned *chunks, unsigned *files)
{
	size_t i;
	uint32_t n;

	for (i = 0; i < c->tab.cap; i++) {
		struct centry *ce = c->tab.slot[i];

		if (!ce || ce->on_disk || !ce->used)
			continue;
		for (n = 0; n < ce->nchunks; n++)
			if (ce->state[n] == CH_UNVERIFIED) {
				drop_missing_chunk(c, ce, n);
				(*chunks)++;
			}
		(*files)++;
	}
}

/*
 * Reconcile the index with the data files: files nobody indexes (a
 * crash between write and commit) and the temporary files of moves go,
 * chunks on disk but not indexed are punched, chunks indexed but not on
 * disk (a crash between an eviction, or a move, and its commit) are
 * forgotten.
 */
static void sweep_orphans(struct cache *c, struct htab *stops)
{
	unsigned punched = 0, lost_chunks = 0, lost_files = 0, trusted = 0;
	char path[PATH_MAX];
	unsigned i;
	int fd;

	for (i = 0; i < 256; i++) {
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "data/%02x", i);
		fd = openat(c->dirfd, path, O_RDONLY | O_DIRECTORY |
			    O_NOFOLLOW | O_CLOEXEC);
		d = fd >= 0 ? fdopendir(fd) : NULL;
		if (!d) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		while ((de = readdir(d))) {
			uint64_t fid, gen;
			struct centry *ce;
			struct stat sb;

			if (de->d_name[0] == '.')
				continue;
			if (!strncmp(de->d_name, CACHE_MOVE_PREFIX,
				     sizeof(CACHE_MOVE_PREFIX) - 1)) {
				/* a move a crash cut short */
				unlinkat(dirfd(d), de->d_name, 0);
				continue;
			}
			if (sscanf(de->d_name, "%16" SCNx64 "-%16" SCNx64,
				   &fid, &gen) != 2)
				continue;
			ce = htab_get(&c->tab, fid);
			if (!ce || ce->gen != gen || !ce->used ||
			    fstatat(dirfd(d), de->d_name, &sb,
				    AT_SYMLINK_NOFOLLOW) || !S_ISREG(sb.st_mode) ||
			    sb.st_nlink != 1) {
				/* not ours to trust: a planted link's other
				 * names stay untouched */
				unlinkat(dirfd(d), de->d_name, 0);
				continue;
			}
			ce->on_disk = true;
			/* before this start changes it (below) */
			if (cache_stop_trust(c, stops, ce, &sb))
				trusted++;
			/* more on disk than indexed: punch the rest (a file
			 * may also miss indexed chunks: looked for below) */
			if ((uint64_t)sb.st_blocks * 512 > ce->used + BLK)
				punch_unindexed(c, ce, dirfd(d), de->d_name);
			if ((uint64_t)sb.st_blocks * 512 != ce->used)
				punched += drop_punched(c, ce, dirfd(d),
							de->d_name);
		}
		closedir(d);
	}
	drop_unfound(c, &lost_chunks, &lost_files);
	if (stops->used)
		log_info("cache: %u of %zu data files as the last clean stop left them: their chunks are not read again; the rest are verified",
			 trusted, stops->used);
	if (punched || lost_chunks)
		log_info("cache: %u indexed chunks were not on disk (%u of them in %u missing data files): an eviction was not committed before the last stop; forgotten",
			 punched + lost_chunks, lost_chunks, lost_files);
}

/*
 * The cache directory and its lock, opened and taken by cache_check_dir()
 * before anything reads the index, and kept for the life of the process:
 * each cache_open() works on duplicates (a start that loads the index
 * again after setting a damaged one aside opens nothing by name again,
 * and what /proc/self/fd/N names stays the same directory).
 */
static int dir_fd = -1;
static int dir_lock_fd = -1;
static char dir_name[PATH_MAX];	/* what they are of */

/* DIR/lock, locked: the fd or -errno (message printed) */
static int take_lock(int dfd, const char *dir)
{
	int fd, rc;

	fd = openat(dfd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
		    0600);
	if (fd < 0) {
		rc = -errno;
		fprintf(stderr, "fusefs: cannot use cache directory %s: %s\n",
			dir, strerror(errno));
		return rc;
	}
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		fprintf(stderr, "fusefs: cache directory %s is in use by another fusefs\n",
			dir);
		close(fd);
		return -EBUSY;
	}
	return fd;
}

static int lock_dir(struct cache *c)
{
	int rc;

	if (dir_fd < 0 || strcmp(dir_name, c->dir)) {
		rc = cache_check_dir(c->dir, NULL, 0);
		if (rc)
			return rc;
	}
	c->dirfd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
	c->lock_fd = fcntl(dir_lock_fd, F_DUPFD_CLOEXEC, 0);
	return c->dirfd < 0 || c->lock_fd < 0 ? -errno : 0;
}

static bool direct_works(int dfd)
{
	const char *probe = "data/.direct-probe";
	int fd;

	unlinkat(dfd, probe, 0);	/* a crashed probe's */
	fd = openat(dfd, probe, O_RDWR | O_CREAT | O_EXCL | O_DIRECT |
		    O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd >= 0) {
		close(fd);
		unlinkat(dfd, probe, 0);
	}
	return fd >= 0;
}

/* is @st a directory of ours that nobody else can write? */
static int check_one(const char *what, const struct stat *st)
{
	if (!S_ISDIR(st->st_mode)) {
		fprintf(stderr, "fusefs: cache directory %s is not a directory%s\n",
			what, S_ISLNK(st->st_mode) ? " (a symlink)" : "");
		return -ENOTDIR;
	}
	if (st->st_uid != geteuid()) {
		fprintf(stderr, "fusefs: cache directory %s belongs to uid %u, not to %u who runs fusefs: refusing it\n",
			what, (unsigned)st->st_uid, (unsigned)geteuid());
		return -EPERM;
	}
	if (st->st_mode & (S_IWGRP | S_IWOTH)) {
		fprintf(stderr, "fusefs: cache directory %s is writable by others (mode %04o): refusing it (chmod go-w)\n",
			what, (unsigned)(st->st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

int cache_check_dir(const char *dir, char *at, size_t len)
{
	static const char *const subs[] = { "index", "data", "data/spare" };
	char path[PATH_MAX];
	struct stat st;
	size_t i;
	int fd, rc;

	/* opened once, never by its name again: a symlink (or a path
	 * re-pointed later) cannot send the cache elsewhere */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		rc = -errno;
		if (errno == ELOOP || (errno == ENOTDIR &&
		    !lstat(dir, &st) && S_ISLNK(st.st_mode)))
			fprintf(stderr, "fusefs: cache directory %s is a symlink: refusing it (give the directory itself)\n",
				dir);
		else
			fprintf(stderr, "fusefs: cache directory %s: %s\n",
				dir, strerror(errno));
		return rc;
	}
	rc = fstat(fd, &st) ? -errno : check_one(dir, &st);
	for (i = 0; i < ARRAY_SIZE(subs) && !rc; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, subs[i]);
		if (fstatat(fd, subs[i], &st, AT_SYMLINK_NOFOLLOW) == 0)
			rc = check_one(path, &st);
		else if (errno != ENOENT)
			rc = -errno;
	}
	if (!rc && dir_fd >= 0 && strcmp(dir_name, dir)) {
		/* another directory (unit tests open several): let go */
		close(dir_fd);
		close(dir_lock_fd);
		dir_fd = dir_lock_fd = -1;
	}
	if (rc || dir_fd >= 0) {	/* checked; the lock is ours already */
		close(fd);
		if (rc)
			return rc;
		fd = dir_fd;
	} else {
		rc = take_lock(fd, dir);
		if (rc < 0) {
			close(fd);
			return rc;
		}
		dir_lock_fd = rc;
		dir_fd = fd;
		snprintf(dir_name, sizeof(dir_name), "%s", dir);
	}
	if (at && len) {
		/* a path through the held descriptor, for what opens by name
		 * (LMDB); the plain path where /proc is not mounted */
		snprintf(at, len, "/proc/self/fd/%d", fd);
		if (access(at, X_OK))
			snprintf(at, len, "%s", dir);
	}
	return 0;
}

int cache_load(struct cache *c, const struct fusefs_conf *cf)
{
	struct htab stops;
	int rc;

	rc = lock_dir(c);
	if (rc)
		return rc;
	if (mkdirat(c->dirfd, "data", 0700) && errno != EEXIST) {
		rc = -errno;
		fprintf(stderr, "fusefs: cannot create %s/data: %s\n", c->dir,
			strerror(errno));
		return rc;
	}
	spares_init(c);
	c->direct = cf->read_mode == READ_DIRECT && direct_works(c->dirfd);
	if (cf->read_mode == READ_DIRECT && !c->direct)
		log_warn("O_DIRECT is not supported in %s/data: using buffered reads",
			 c->dir);
	rc = meta_files_load(c->meta, load_file, c);
	if (!rc)
		rc = meta_chunks_load(c->meta, load_chunk, c);
	if (!rc)
		rc = meta_heat_load(c->meta, load_heat, c);
	if (rc) {
		fprintf(stderr, "fusefs: cannot load the cache index: %s\n",
			strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < c->tab.cap; i++)
		if (c->tab.slot[i])
			policy_add(&c->pol, ((struct centry *)c->tab.slot[i])->pn);
	cache_stop_take(c, &stops);
	sweep_orphans(c, &stops);
	cache_stop_release(&stops);
	return 0;
}
