// SPDX-License-Identifier: MIT
/*
 * cache_spare.c - evicted data files kept, emptied, for the next new one
 * (see cache_priv.h).
 *
 * An eviction used to unlink a data file and the next admission to create
 * one: two inode operations per file, and on ext4 without a journal every
 * create scans the inode table for recently deleted inodes it must not
 * reuse (recently_deleted(): a third of list mode's daemon CPU on a cache
 * that turns over ~1,800 files per epoch).  Instead an evicted file is
 * renamed to DIR/data/spare/SLOT and truncated; a new data file is a spare
 * renamed into place.  A spare is empty, so nothing it held can be served:
 * a crash at any step leaves either an empty spare (removed at the next
 * start) or an empty data file nobody indexes (the orphan sweep removes
 * it).
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_priv.h"
#include "log.h"

static void spare_path(const struct cache *c, unsigned slot, char *out,
		       size_t len)
{
	snprintf(out, len, "data/spare/%u", slot);
}

void spares_init(struct cache *c)
{
	struct spares *s = &c->spares;
	char path[PATH_MAX];
	struct dirent *de;
	struct stat st;
	unsigned i;
	int fd;
	DIR *d;

	pthread_mutex_init(&s->lock, NULL);
	s->nfull = s->nfree = 0;
	snprintf(path, sizeof(path), "%s/data/spare", c->dir);
	if (mkdirat(c->dirfd, "data/spare", 0700) && errno != EEXIST) {
		log_warn("cannot create %s (evicted data files are removed instead): %s",
			 path, strerror(errno));
		return;
	}
	/* the last run's spares, and anything else in there: they hold no
	 * cached bytes; a slot whose name cannot go is left out */
	fd = openat(c->dirfd, "data/spare",
		    O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		log_warn("cannot open %s (evicted data files are removed instead): %s",
			 path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			unlinkat(fd, de->d_name, 0);
	for (i = SPARES_MAX; i-- > 0;) {
		char name[16];

		snprintf(name, sizeof(name), "%u", i);
		if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW))
			s->free[s->nfree++] = (uint16_t)i;
	}
	closedir(d);
}

void spares_destroy(struct cache *c)
{
	pthread_mutex_destroy(&c->spares.lock);
}

/* a slot from the full stack (@full) or the free one, or -1 */
static int slot_get(struct spares *s, bool full)
{
	int slot = -1;

	pthread_mutex_lock(&s->lock);
	if (full && s->nfull)
		slot = s->full[--s->nfull];
	else if (!full && s->nfree)
		slot = s->free[--s->nfree];
	pthread_mutex_unlock(&s->lock);
	return slot;
}

static void slot_put(struct spares *s, int slot, bool full)
{
	pthread_mutex_lock(&s->lock);
	if (full)
		s->full[s->nfull++] = (uint16_t)slot;
	else
		s->free[s->nfree++] = (uint16_t)slot;
	pthread_mutex_unlock(&s->lock);
}

bool spare_keep(struct cache *c, const char *path, int fd)
{
	char sp[PATH_MAX];
	int slot = slot_get(&c->spares, false), tfd;

	if (slot < 0)
		return false;
	spare_path(c, (unsigned)slot, sp, sizeof(sp));
	if (renameat2(c->dirfd, path, c->dirfd, sp, RENAME_NOREPLACE)) {
		if (errno == EEXIST)		/* not ours: leave the slot out */
			return false;
		slot_put(&c->spares, slot, false);
		return false;
	}
	tfd = fd >= 0 ? fd : cache_data_open(c, sp, O_WRONLY | O_CLOEXEC);
	if (tfd < 0 || ftruncate(tfd, 0)) {
		log_warn("cannot empty %s/%s: %s", c->dir, sp, strerror(errno));
		if (unlinkat(c->dirfd, sp, 0) == 0 || errno == ENOENT)
			slot_put(&c->spares, slot, false);
	} else {
		slot_put(&c->spares, slot, true);
	}
	if (tfd >= 0 && tfd != fd)
		close(tfd);
	return true;
}

bool spare_take(struct cache *c, const char *path)
{
	char sp[PATH_MAX];
	struct stat st;
	int slot = slot_get(&c->spares, true), err;

	if (slot < 0)
		return false;
	spare_path(c, (unsigned)slot, sp, sizeof(sp));
	if (renameat2(c->dirfd, sp, c->dirfd, path, RENAME_NOREPLACE) == 0) {
		slot_put(&c->spares, slot, false);
		stat_inc(c->st, data_files_reused);
		return true;
	}
	/* EEXIST: @path is there already; ENOENT: its directory is not
	 * (yet), or the spare went (someone else's doing) */
	err = errno;
	if (err == ENOENT && fstatat(c->dirfd, sp, &st, AT_SYMLINK_NOFOLLOW))
		slot_put(&c->spares, slot, false);
	else if (err == EEXIST || err == ENOENT)
		slot_put(&c->spares, slot, true);
	else if (unlinkat(c->dirfd, sp, 0) == 0 || errno == ENOENT)
		slot_put(&c->spares, slot, false);
	return false;
}
