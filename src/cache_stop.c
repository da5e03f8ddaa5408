// SPDX-License-Identifier: MIT
/*
 * cache_stop.c - clean-stop records (see cache_priv.h): at a clean stop,
 * each data file whose indexed chunks are all verified is synced (if this
 * run changed it) and recorded with its identity (inode, size, mtime,
 * ctime) and a sum of its chunk records; the next start trusts the chunks of a file it finds
 * exactly so, instead of reading them all again.  The records are taken
 * (loaded and dropped, durably) before the start serves anything, so a
 * run that does not stop cleanly leaves none.  Threat model:
 * docs/security.md.  Single-threaded: cache_load() and cache_close().
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cache_priv.h"
#include "hash.h"
#include "log.h"

/* ctime comes from a coarse clock (a tick behind): a file changed right
 * after the start may look older than it by that much */
#define SYNC_MARGIN_NS	2000000000LL

struct stop_item {
	uint64_t fid;
	struct stop_rec r;
};

static uint64_t item_key(const void *p)
{
	return ((const struct stop_item *)p)->fid;
}

static int64_t ns_of(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/* the chain sum of (n, sum[n]) over @ce's chunks in @state, and their count */
static uint64_t chunk_sums(const struct centry *ce, uint8_t state,
			   uint32_t *count)
{
	uint64_t s = 0, pair[2];
	uint32_t n;

	*count = 0;
	for (n = 0; n < ce->nchunks; n++) {
		if (ce->state[n] != state)
			continue;
		pair[0] = n;
		pair[1] = ce->sum[n];
		s = hash64(pair, sizeof(pair), s);
		(*count)++;
	}
	return s;
}

/* can @ce be recorded: data on disk, every indexed chunk verified */
static bool recordable(const struct centry *ce)
{
	bool any = false;
	uint32_t n;

	if (ce->stale || !ce->used || ce->unverified || ce->opens || ce->busy)
		return false;
	for (n = 0; n < ce->nchunks; n++) {
		if (ce->state[n] == CH_PRESENT)
			any = true;
		else if (ce->state[n] != CH_ABSENT)
			return false;	/* FETCHING: cannot be at a stop */
	}
	return any;
}

/* fsync() data file @rel; false if that fails */
static bool sync_one(struct cache *c, const char *rel)
{
	int fd = openat(c->dirfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	bool ok = fd >= 0 && !fsync(fd);

	if (fd >= 0)
		close(fd);
	return ok;
}

/*
 * Fill in @r (gen, chunks and sums taken under the lock) from data file
 * @fid-@r->gen as it is now, synced first if this run changed it (its
 * ctime is not older than the start; a file of an earlier run was synced
 * by the stop that recorded it, or verified from the disk this run).
 * No lock: I/O.  False if it is not ours or the sync failed.
 */
static bool identify(struct cache *c, uint64_t fid, struct stop_rec *r,
		     size_t *synced)
{
	char rel[PATH_MAX];
	struct stat sb;

	cache_data_path(c, fid, r->gen, rel, sizeof(rel));
	if (fstatat(c->dirfd, rel, &sb, AT_SYMLINK_NOFOLLOW) ||
	    !S_ISREG(sb.st_mode) || sb.st_nlink != 1)
		return false;
	if (ns_of(&sb.st_ctim) >= c->started_ns - SYNC_MARGIN_NS) {
		if (!sync_one(c, rel))
			return false;
		(*synced)++;
	}
	r->ino = sb.st_ino;
	r->size = sb.st_size;
	r->mtime_ns = ns_of(&sb.st_mtim);
	r->ctime_ns = ns_of(&sb.st_ctim);
	return true;
}

void cache_stop_record(struct cache *c)
{
	struct stop_rec *recs = NULL;
	uint64_t *fids = NULL;
	size_t i, n = 0, kept = 0, synced = 0;
	int rc;

	if (meta_broken(c->meta))
		return;
	/* every chunk record committed (data files: identify()) */
	rc = meta_flush(c->meta);
	if (rc) {
		log_warn("cache: cannot commit the index at the stop (%s): the next start verifies every chunk",
			 strerror(-rc));
		return;
	}
	recs = calloc(c->files ? c->files : 1, sizeof(*recs));
	fids = calloc(c->files ? c->files : 1, sizeof(*fids));
	if (!recs || !fids)
		goto out;
	/* what the cache knows, under its lock; the files' identities after */
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < c->tab.cap && n < c->files; i++) {
		struct centry *ce = c->tab.slot[i];

		if (!ce || !recordable(ce))
			continue;
		fids[n] = ce->fid;
		recs[n].gen = ce->gen;
		recs[n].sums = chunk_sums(ce, CH_PRESENT, &recs[n].chunks);
		n++;
	}
	pthread_mutex_unlock(&c->lock);
	for (i = 0; i < n; i++)
		if (identify(c, fids[i], &recs[i], &synced)) {
			fids[kept] = fids[i];
			recs[kept++] = recs[i];
		}
	rc = meta_stopped_write(c->meta, fids, recs, kept);
	if (rc)
		log_warn("cache: cannot record the clean stop (%s): the next start verifies every chunk",
			 strerror(-rc));
	else
		log_info("cache: clean stop recorded for %zu data files (%zu changed by this run, synced)",
			 kept, synced);
out:
	free(recs);
	free(fids);
}

static int take_one(void *arg, uint64_t fid, const struct stop_rec *r)
{
	struct stop_item *it = malloc(sizeof(*it));

	if (!it)
		return -ENOMEM;
	it->fid = fid;
	it->r = *r;
	if (htab_put(arg, it)) {	/* LMDB keys are unique */
		free(it);
		return -ENOMEM;
	}
	return 0;
}

void cache_stop_take(struct cache *c, struct htab *set)
{
	int rc;

	htab_init(set, item_key);
	rc = meta_stopped_load(c->meta, take_one, set);
	/* dropped, durably, before anything is served: only the next clean
	 * stop records again */
	if (!rc && set->used)
		rc = meta_stopped_clear(c->meta);
	if (rc)
		log_warn("cache: cannot take the records of the last clean stop (%s): verifying every chunk",
			 strerror(-rc));
	if (rc || !c->trust_stop)
		htab_free(set, free);
}

void cache_stop_release(struct htab *set)
{
	htab_free(set, free);
}

bool cache_stop_trust(struct cache *c, struct htab *set, struct centry *ce,
		      const struct stat *sb)
{
	const struct stop_item *it = set->used ? htab_get(set, ce->fid) : NULL;
	uint32_t count, n;
	uint64_t sums;

	if (!it)
		return false;
	sums = chunk_sums(ce, CH_UNVERIFIED, &count);
	if (it->r.gen != ce->gen || it->r.ino != sb->st_ino ||
	    it->r.size != (uint64_t)sb->st_size ||
	    it->r.mtime_ns != ns_of(&sb->st_mtim) ||
	    it->r.ctime_ns != ns_of(&sb->st_ctim) ||
	    it->r.chunks != count || it->r.sums != sums || !count) {
		stat_inc(c->st, stop_changed_files);
		return false;
	}
	for (n = 0; n < ce->nchunks; n++)
		if (ce->state[n] == CH_UNVERIFIED)
			ce->state[n] = CH_PRESENT;
	ce->unverified -= count;
	c->unverified -= count;
	stat_add(c->st, stop_trusted_chunks, count);
	return true;
}
