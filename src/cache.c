// SPDX-License-Identifier: MIT
/* cache.c - cache entries, chunk states, space (see cache.h) */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "cache_priv.h"
#include "hash.h"
#include "log.h"
#include "safeopen.h"
#include "strsafe.h"

#define HEAT_FLUSH_MS	1000

/* work found under the lock, done after unlocking it (no I/O under it) */
struct later {
	int fd[2];
	struct grave *graves;	/* also linked in c->graves */
};

#define LATER_INIT	{ { -1, -1 }, NULL }

static uint64_t ce_key(const void *item)
{
	return ((const struct centry *)item)->fid;
}

static int64_t now_s(void)
{
	return time(NULL);
}

uint32_t cache_chunk_size(const struct cache *c)
{
	return c->chunk_size;
}

uint32_t cache_chunk_len(const struct cache *c, const struct centry *ce,
			 uint32_t n)
{
	uint64_t off = (uint64_t)n * c->chunk_size;

	if (off >= ce->size)
		return 0;
	return MIN((uint64_t)c->chunk_size, ce->size - off);
}

void cache_ident(const struct centry *ce, struct cache_ident *out)
{
	out->fid = ce->fid;
	out->gen = ce->gen;
	out->size = ce->size;
	out->nchunks = ce->nchunks;
	out->key = ce->key;
	out->version = ce->version;
}

void cache_data_path(const struct cache *c, uint64_t fid, uint64_t gen,
		     char *out, size_t len)
{
	snprintf(out, len, "data/%02x/%016" PRIx64 "-%016" PRIx64,
		 (unsigned)(fid & 0xff), fid, gen);
}

int cache_data_open(struct cache *c, const char *rel, int flags)
{
	int fd = safe_openat(c->dirfd, rel, flags, 0600), err;

	if (fd >= 0 || !(flags & O_CREAT) ||
	    (errno != EMLINK && errno != EINVAL && errno != EPERM &&
	     errno != ELOOP))
		return fd;
	err = errno;
	log_warn("cache file %s/%s is not a data file of ours (%s): replaced",
		 c->dir, rel, strerror(err));
	if (unlinkat(c->dirfd, rel, 0) && errno != ENOENT)
		return -1;
	return safe_openat(c->dirfd, rel, flags | O_EXCL, 0600);
}

static struct centry *centry_new(struct cache *c, uint64_t fid,
				 const char *key, const char *version,
				 uint64_t size, int64_t mtime)
{
	struct centry *ce;
	uint64_t nchunks;

	nchunks = (size + c->chunk_size - 1) / c->chunk_size;
	ce = calloc(1, sizeof(*ce));
	if (!ce)
		return NULL;
	ce->fid = fid;
	ce->key = strdup(key ? key : "");
	snprintf(ce->version, sizeof(ce->version), "%s", version);
	ce->gen = version_gen(ce->version, size);
	ce->size = size;
	ce->mtime = mtime;
	ce->fd = ce->dfd = -1;
	ce->nchunks = (uint32_t)nchunks;
	ce->state = calloc(nchunks ? nchunks : 1, 1);
	ce->verifying = calloc(nchunks ? nchunks : 1, 1);
	ce->sum = calloc(nchunks ? nchunks : 1, sizeof(*ce->sum));
	ce->pn = policy_node(&c->pol, fid);
	if (!ce->key || !ce->state || !ce->verifying || !ce->sum || !ce->pn) {
		centry_free(ce);
		return NULL;
	}
	return ce;
}

void centry_free(struct centry *ce)
{
	(void)atomic_load_explicit(&ce->reads_done, memory_order_acquire);
	free(ce->key);
	free(ce->state);
	free(ce->verifying);
	free(ce->sum);
	cache_pages_free(ce);
	free(ce);
}

int centry_insert(struct cache *c, uint64_t fid, const char *key,
		  const char *version, uint64_t size, int64_t mtime,
		  struct centry **out)
{
	struct centry *ce;

	if (size > CACHE_MAX_SIZE)
		return -EFBIG;
	ce = centry_new(c, fid, key, version, size, mtime);
	if (!ce)
		return -ENOMEM;
	if (htab_put(&c->tab, ce)) {
		centry_free(ce);
		return -ENOMEM;
	}
	c->files++;
	*out = ce;
	return 0;
}

/* the policy node that @ce's bytes count for (none once stale) */
struct policy_node *cache_owner_node(const struct centry *ce)
{
	return ce->stale ? NULL : ce->pn;
}

static void idle_unlink_locked(struct cache *c, struct centry *ce)
{
	if (!ce->idle)
		return;
	if (ce->idle_prev)
		ce->idle_prev->idle_next = ce->idle_next;
	else
		c->idle_head = ce->idle_next;
	if (ce->idle_next)
		ce->idle_next->idle_prev = ce->idle_prev;
	else
		c->idle_tail = ce->idle_prev;
	ce->idle_prev = ce->idle_next = NULL;
	ce->idle = false;
	c->nidle--;
}

static void idle_push_locked(struct cache *c, struct centry *ce)
{
	ce->idle_prev = c->idle_tail;
	ce->idle_next = NULL;
	if (c->idle_tail)
		c->idle_tail->idle_next = ce;
	else
		c->idle_head = ce;
	c->idle_tail = ce;
	ce->idle = true;
	c->nidle++;
}

void cache_refs_changed_locked(struct cache *c, struct centry *ce)
{
	/* an open lent file (read through the daemon now) is held too: its
	 * chunks go only by a move, which closes the files its reads use */
	if (!ce->stale)
		policy_in_use(&c->pol, ce->pn, ce->pt_opens || ce->busy ||
			      (ce->opens && ce->lent));
	if (ce->opens || ce->busy)
		idle_unlink_locked(c, ce);	/* used again: files are open */
}

static bool grave_pending_locked(const struct cache *c, uint64_t fid)
{
	const struct grave *g;

	for (g = c->graves; g; g = g->next)
		if (g->fid == fid)
			return true;
	return false;
}

/*
 * @ce's data file is to go: out of the table already, freed here.  Its
 * file is unlinked, or kept as a spare if no one else may read it; a stale
 * entry whose version came back (A, B, then A again: one gen, one path)
 * leaves the file to the live entry.
 */
static void bury_locked(struct cache *c, struct centry *ce, struct later *l)
{
	struct grave *g = malloc(sizeof(*g));
	const struct centry *live = htab_get(&c->tab, ce->fid);
	struct centry **pp;

	for (pp = &c->lent_stale; ce->stale && ce->lent && *pp;
	     pp = &(*pp)->lent_next)
		if (*pp == ce) {
			*pp = ce->lent_next;
			break;
		}
	if (g) {
		g->fid = ce->fid;
		g->gen = ce->gen;
		g->fd = ce->fd;
		g->dfd = ce->dfd;
		g->keep = live && live != ce && live->gen == ce->gen;
		g->spare = !ce->lent;
		g->next = c->graves;
		c->graves = g;
		g->todo = l->graves;
		l->graves = g;
	} else {
		log_warn("out of memory: data file of '%s' left for the next start",
			 str_log(ce->key));
		if (ce->fd >= 0)	/* rare: better than leaking it */
			close(ce->fd);
		if (ce->dfd >= 0)
			close(ce->dfd);
	}
	centry_free(ce);
}

/* close what @l closed, unlink (or keep as spares) what it buried; called
 * with no lock */
static void later_run(struct cache *c, struct later *l)
{
	char path[PATH_MAX];
	struct grave *g, **pp;

	if (l->fd[0] >= 0)
		close(l->fd[0]);
	if (l->fd[1] >= 0)
		close(l->fd[1]);
	if (!l->graves)
		return;
	for (g = l->graves; g; g = g->todo) {
		cache_data_path(c, g->fid, g->gen, path, sizeof(path));
		if (!g->keep && !(g->spare && spare_keep(c, path, g->fd)) &&
		    unlinkat(c->dirfd, path, 0) && errno != ENOENT)
			log_warn("cannot remove %s/%s: %s", c->dir, path,
				 strerror(errno));
		if (g->fd >= 0)
			close(g->fd);
		if (g->dfd >= 0)
			close(g->dfd);
	}
	pthread_mutex_lock(&c->lock);
	while ((g = l->graves)) {
		l->graves = g->todo;
		for (pp = &c->graves; *pp != g; pp = &(*pp)->next)
			;
		*pp = g->next;
		free(g);
	}
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* drop @ce from the table and the policy's entries */
static void forget_locked(struct cache *c, struct centry *ce)
{
	idle_unlink_locked(c, ce);
	policy_del(&c->pol, ce->pn);
	htab_del(&c->tab, ce->fid);
	c->files--;
	c->unverified -= ce->unverified;
}

/* evict idle entry @v: accounting and index now, its file after unlock */
static void evict_locked(struct cache *c, struct centry *v, struct later *l)
{
	if (policy_was_prefetched(v->pn))
		stat_add(c->st, prefetch_wasted_bytes, v->used);
	stat_inc(c->st, evictions);
	stat_add(c->st, evicted_bytes, v->used);
	log_dbg("evict %s (%" PRIu64 " bytes)", v->key, v->used);
	policy_charge(&c->pol, v->pn, -(int64_t)v->used);
	meta_q_drop_file(c->meta, v->fid);
	forget_locked(c, v);
	bury_locked(c, v, l);
}

/* ---- chunk eviction: a victim may lose only its last chunks ---- */

/* chunk @n of @ce leaves CH_UNVERIFIED unread (dropped): the counts the
 * verifier goes by follow (settle_locked() does it for a verdict) */
static void unverified_dropped_locked(struct cache *c, struct centry *ce,
				      uint32_t n)
{
	if (ce->state[n] != CH_UNVERIFIED)
		return;
	ce->unverified--;
	if (!ce->stale)
		c->unverified--;
}

/*
 * Drop the last cached chunks of entry @ce (idle, or open on the daemon
 * path) until @bytes are freed: hole punched, CH_ABSENT, out of the
 * index; an ABSENT chunk's stored pages count as cached bytes too.  The one file-system call under the cache lock (an open of a
 * closed data file and a fallocate): a punch after unlocking could hit
 * the same chunk fetched again meanwhile.  If a punch fails, the whole
 * file goes, or for an open file the chunk is counted gone (a refetch
 * writes over it).
 */
static void drop_tail_locked(struct cache *c, struct centry *ce,
			     uint64_t bytes, struct later *l)
{
	char path[PATH_MAX];
	uint64_t freed = 0;
	int fd = ce->fd;
	uint32_t n;

	if (fd < 0) {
		cache_data_path(c, ce->fid, ce->gen, path, sizeof(path));
		fd = cache_data_open(c, path, O_RDWR | O_CLOEXEC);
	}
	for (n = ce->nchunks; fd >= 0 && n-- > 0 && freed < bytes;) {
		uint64_t len, span;
		bool whole = ce->state[n] == CH_PRESENT ||
			     ce->state[n] == CH_UNVERIFIED;

		if (whole)
			len = span = blocks(cache_chunk_len(c, ce, n));
		else if (ce->state[n] == CH_ABSENT &&
			 (len = cache_pages_bytes_locked(c, ce, n)))
			span = blocks(cache_chunk_len(c, ce, n));
		else
			continue;
		if (whole)
			meta_q_drop_chunk(c->meta, ce->fid, n);
		if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)n * c->chunk_size, (off_t)span)) {
			log_warn("cannot drop chunk %u of '%s': %s", n,
				 str_log(ce->key), strerror(errno));
			if (whole) {
				unverified_dropped_locked(c, ce, n);
				ce->state[n] = CH_ABSENT;
			}
			if (!ce->opens)
				break;
		}
		if (whole) {
			unverified_dropped_locked(c, ce, n);
			ce->state[n] = CH_ABSENT;
		} else {
			cache_pages_drop_locked(c, ce, n);
		}
		ce->used -= len;
		freed += len;
		policy_charge(&c->pol, ce->pn, -(int64_t)len);
	}
	if (fd >= 0 && fd != ce->fd)
		close(fd);
	if (policy_was_prefetched(ce->pn))
		stat_add(c->st, prefetch_wasted_bytes, freed);
	stat_add(c->st, evicted_bytes, freed);
	log_dbg("evict %" PRIu64 " bytes of %s", freed, str_log(ce->key));
	if ((freed < bytes || !ce->used) && !ce->opens)
		evict_locked(c, ce, l);
}

/* @ce's descriptors, its data file replaced: closed after unlocking, the
 * path (the new file's) left alone */
static void close_later_locked(struct cache *c, struct centry *ce,
			       struct later *l)
{
	struct grave *g;

	idle_unlink_locked(c, ce);
	if (ce->fd < 0 && ce->dfd < 0)
		return;
	g = calloc(1, sizeof(*g));
	if (g) {
		g->fid = ce->fid;
		g->gen = ce->gen;
		g->fd = ce->fd;
		g->dfd = ce->dfd;
		g->keep = true;
		g->next = c->graves;
		c->graves = g;
		g->todo = l->graves;
		l->graves = g;
	} else {		/* rare: better than leaking them */
		if (ce->fd >= 0)
			close(ce->fd);
		if (ce->dfd >= 0)
			close(ce->dfd);
	}
	ce->fd = ce->dfd = -1;
}

static int disk_room(struct cache *c, uint64_t need);
static void disk_done(uint64_t need);
static bool shares_lent_file_locked(const struct cache *c,
				    const struct centry *ce);

/*
 * Drop the last cached chunks of idle lent entry @ce until @bytes are
 * freed.  The kernel may read its data file, so it is not punched: the
 * chunks kept are copied into a new file renamed over it
 * (cache_move_head(); the kernel reads on from the old one), and @ce is
 * lent no more (its later drops are punches).  Under the cache lock, as
 * a punch is: a copy of at most CACHE_MOVE_MAX bytes on the local disk.
 * The whole file goes instead if the head is larger, if the disk has no
 * room for the copy (disk_room()), if the move fails, or if a stale lent
 * entry shares the file's path (A, B, then A again: it may open the path
 * again for its own reads, cache_direct_fd()).
 */
static void move_tail_locked(struct cache *c, struct centry *ce,
			     uint64_t bytes, struct later *l)
{
	uint64_t freed = 0, kept;
	uint32_t end = ce->nchunks, n;
	int rc;

	while (end > 0 && freed < bytes) {
		n = --end;
		if (ce->state[n] == CH_PRESENT || ce->state[n] == CH_UNVERIFIED)
			freed += blocks(cache_chunk_len(c, ce, n));
	}
	kept = ce->used - freed;
	if (freed < bytes || freed >= ce->used || kept > CACHE_MOVE_MAX ||
	    shares_lent_file_locked(c, ce) || disk_room(c, kept)) {
		evict_locked(c, ce, l);
		return;
	}
	rc = cache_move_head(c, ce, end);
	disk_done(kept);
	if (rc) {
		log_warn("cannot move the cached head of '%s': %s; evicting it",
			 str_log(ce->key), strerror(-rc));
		evict_locked(c, ce, l);
		return;
	}
	close_later_locked(c, ce, l);
	ce->lent = false;
	for (n = end; n < ce->nchunks; n++) {
		if (ce->state[n] != CH_PRESENT && ce->state[n] != CH_UNVERIFIED)
			continue;
		meta_q_drop_chunk(c->meta, ce->fid, n);
		unverified_dropped_locked(c, ce, n);
		ce->state[n] = CH_ABSENT;
	}
	ce->used -= freed;
	policy_charge(&c->pol, ce->pn, -(int64_t)freed);
	if (policy_was_prefetched(ce->pn))
		stat_add(c->st, prefetch_wasted_bytes, freed);
	stat_add(c->st, evicted_bytes, freed);
	stat_inc(c->st, lent_moves);
	log_dbg("evict %" PRIu64 " bytes of %s (lent: the rest moved)", freed,
		str_log(ce->key));
}

/* drop @take bytes of victim @v (NULL: gone already): all or its tail */
static void drop_victim_locked(struct cache *c, struct centry *v,
			       uint64_t take, struct later *l)
{
	if (!v)
		return;
	if (take >= v->used && !v->opens)
		evict_locked(c, v, l);
	else if (v->lent)	/* the kernel may read it: never punched */
		move_tail_locked(c, v, take, l);
	else
		drop_tail_locked(c, v, take, l);
}

/* ---- end of chunk eviction ---- */

/*
 * Make room for @need bytes for @ce (NULL: just get under the limit):
 * evict the victims the policy names, then reserve.  -ENOSPC if the
 * policy would rather keep what is there (nothing reserved).
 */
static int make_room_locked(struct cache *c, struct centry *ce,
			    uint64_t need, enum admit_kind kind,
			    struct later *l)
{
	struct policy_node *in = ce ? cache_owner_node(ce) : NULL;
	struct admission adm;
	int rc, i;

	do {
		rc = policy_admit(&c->pol, in, need, kind, &adm, now_s());
		if (rc < 0)
			return rc;
		for (i = 0; i < rc; i++) {
			uint64_t fid = policy_fid(adm.victims[i]);

			drop_victim_locked(c, htab_get(&c->tab, fid),
					   adm.take[i], l);
		}
	} while (adm.partial);
	policy_reserve(&c->pol, need);
	return 0;
}

/*
 * The last reference to @ce may have gone: close its files (after
 * unlock), and a stale entry goes with its bytes.
 */
static void release_locked(struct cache *c, struct centry *ce,
			   struct later *l)
{
	cache_refs_changed_locked(c, ce);
	if (ce->opens || ce->busy)
		return;
	if (ce->evict_asked && !ce->opening && !ce->stale) {
		evict_locked(c, ce, l);		/* asked while in use */
		return;
	}
	if (!ce->stale && ce->fd >= 0 && c->idle_max) {
		/* keep the files open for the next user; close the oldest */
		idle_push_locked(c, ce);
		if (c->nidle <= c->idle_max)
			return;
		ce = c->idle_head;
		idle_unlink_locked(c, ce);
	}
	if (l->fd[0] >= 0 || l->fd[1] >= 0) {
		/* one release per later: cannot happen, do not leak */
		log_warn("cache: closing data files under the lock");
		close(l->fd[0]);
		close(l->fd[1]);
	}
	l->fd[0] = ce->fd;
	l->fd[1] = ce->dfd;
	ce->fd = ce->dfd = -1;
	if (ce->stale) {
		policy_charge(&c->pol, NULL, -(int64_t)ce->used);
		bury_locked(c, ce, l);
	}
}

#define NOSPACE_LOG_S	60

static bool no_space(int err)
{
	return err == ENOSPC || err == EDQUOT;
}

/*
 * A full cache disk (ENOSPC, EDQUOT) is not an error of the read: the
 * reader has its bytes from the backend; this chunk is just not kept.
 * One log line per NOSPACE_LOG_S seconds, not one per chunk.
 */
static void log_no_space(struct cache *c, int err)
{
	static _Atomic int64_t last;
	static _Atomic uint64_t quiet;
	int64_t now = now_s(), prev = last;

	if (now - prev < NOSPACE_LOG_S ||
	    !atomic_compare_exchange_strong(&last, &prev, now)) {
		quiet++;
		return;
	}
	log_warn("cache disk %s is full (%s): chunks are served from the "
		 "backend and not kept (%" PRIu64 " more since the last such "
		 "message)", c->dir, strerror(err), atomic_exchange(&quiet, 0));
}

/*
 * Room on the cache disk for @need more bytes of data, keeping a reserve
 * (1/32 of the file system, at most INDEX_RESERVE_MAX) for the index: a
 * disk filled by data files would make index commits fail, and the
 * chunks they record would be lost at the next start.  Writes in flight
 * count as taken (they all saw the same free space).  -ENOSPC if not.
 */
#define INDEX_RESERVE_MAX	(64ULL << 20)

/* data bytes being written now: each writer counts the others' in */
static _Atomic uint64_t disk_writing;

static int disk_room(struct cache *c, uint64_t need)
{
	struct statvfs sv;
	uint64_t avail, reserve, busy;

	if (fstatvfs(c->lock_fd, &sv))
		return 0;	/* unknown: the write will tell */
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	reserve = MIN(INDEX_RESERVE_MAX, (uint64_t)sv.f_blocks * sv.f_frsize / 32);
	/* concurrent writers checked the same free space: count theirs */
	busy = atomic_fetch_add(&disk_writing, need) + need;
	if (avail >= busy + reserve)
		return 0;		/* disk_done() after the write */
	atomic_fetch_sub(&disk_writing, need);
	return -ENOSPC;
}

/* the write disk_room() let through is over */
static void disk_done(uint64_t need)
{
	atomic_fetch_sub(&disk_writing, need);
}

/*
 * Out of descriptors (EMFILE, ENFILE): close the data files of up to @n
 * idle entries, oldest first, so that an open in use gets one.  Idle
 * entries keep theirs only to save the next open an open().  Unlocked.
 * Return: how many entries were closed.
 */
static unsigned shed_idle(struct cache *c, unsigned n)
{
	int fds[2 * 64];
	unsigned i, k = 0;

	n = MIN(n, 64U);
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < n && c->idle_head; i++) {
		struct centry *ce = c->idle_head;

		idle_unlink_locked(c, ce);
		fds[k++] = ce->fd;
		fds[k++] = ce->dfd;
		ce->fd = ce->dfd = -1;
	}
	pthread_mutex_unlock(&c->lock);
	for (n = 0; n < k; n++)
		if (fds[n] >= 0)
			close(fds[n]);
	return i;
}

/* open @ce's data file if it is not (a reference is held; unlocked);
 * -errno of the open.  The O_DIRECT one is opened at its first use. */
int cache_ensure_files(struct cache *c, struct centry *ce)
{
	char path[PATH_MAX];
	int fd, err = 0, flags = O_RDWR | O_CLOEXEC;
	bool fresh;

	/* open already: it stays so while the caller's reference lives */
	if (atomic_load(&ce->fd) >= 0)
		return 0;
	pthread_mutex_lock(&c->lock);
	while (ce->opening)
		pthread_cond_wait(&c->cond, &c->lock);
	if (ce->fd >= 0) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	ce->opening = true;
	fresh = !ce->used;	/* most likely no data file yet */
	pthread_mutex_unlock(&c->lock);

	stat_inc(c->st, data_file_opens);
	cache_data_path(c, ce->fid, ce->gen, path, sizeof(path));
	if (fresh)
		spare_take(c, path);
	fd = cache_data_open(c, path, flags | O_CREAT);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE) && shed_idle(c, 16))
		fd = cache_data_open(c, path, flags | O_CREAT);
	if (fd < 0 && errno == ENOENT) {
		char *slash = strrchr(path, '/');

		*slash = '\0';
		if (mkdirat(c->dirfd, path, 0700) && errno != EEXIST) {
			err = errno;	/* no_space(): the real cause */
			if (!no_space(err))
				log_warn("cannot create %s/%s: %s", c->dir,
					 path, strerror(err));
		}
		*slash = '/';
		if (fresh)
			spare_take(c, path);
		fd = cache_data_open(c, path, flags | O_CREAT);
	}
	if (fd < 0) {
		err = errno == ENOENT && no_space(err) ? err : errno;
		if (no_space(err))
			log_no_space(c, err);
		else
			log_err("cache file %s/%s: %s", c->dir, path,
				strerror(err));
	}

	pthread_mutex_lock(&c->lock);
	ce->fd = fd;
	ce->opening = false;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	return fd < 0 ? -err : 0;
}

/*
 * @ce's O_DIRECT data file, opened at its first use, after cache_ensure_files()
 * (a reference is held; unlocked): -1 when the cache directory takes no
 * O_DIRECT or the open fails (the buffered file serves then).  Files read
 * only by the kernel (passthrough) never open it: one descriptor per
 * entry kept open instead of two, and one open() per reopen.
 */
int cache_direct_fd(struct cache *c, struct centry *ce)
{
	char path[PATH_MAX];
	int fd, none = -1;

	if (!c->direct)
		return -1;
	fd = atomic_load(&ce->dfd);
	if (fd >= 0)
		return fd;
	cache_data_path(c, ce->fid, ce->gen, path, sizeof(path));
	fd = cache_data_open(c, path, O_RDWR | O_CLOEXEC | O_DIRECT);
	if (fd < 0)
		return -1;
	/* another holder may have opened it meanwhile: one of them stays */
	if (!atomic_compare_exchange_strong(&ce->dfd, &none, fd)) {
		close(fd);
		fd = none;
	}
	return fd;
}

int cache_pin(struct cache *c, uint64_t fid, bool pin)
{
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = policy_pin(&c->pol, fid, pin);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int cache_evict_file(struct cache *c, uint64_t fid)
{
	struct later l = LATER_INIT;
	struct centry *v;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	v = htab_get(&c->tab, fid);
	if (v && (v->opens || v->busy || v->opening)) {
		v->evict_asked = true;		/* release_locked() does it */
		rc = 1;
	} else if (v) {
		evict_locked(c, v, &l);
	}
	pthread_mutex_unlock(&c->lock);
	later_run(c, &l);
	return rc;
}

void cache_set_future(struct cache *c, const struct policy_future *f)
{
	pthread_mutex_lock(&c->lock);
	policy_set_future(&c->pol, f);
	pthread_mutex_unlock(&c->lock);
}

int cache_heat_each(struct cache *c,
		    int (*fn)(void *arg, const struct heat_row *r), void *arg)
{
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = policy_heat_each(&c->pol, fn, arg);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* does new entry @ce have the data file of a stale lent entry? */
static bool shares_lent_file_locked(const struct cache *c,
				    const struct centry *ce)
{
	const struct centry *s;

	for (s = c->lent_stale; s; s = s->lent_next)
		if (s->fid == ce->fid && s->gen == ce->gen)
			return true;
	return false;
}

/*
 * The entry for @fid at @a->version, replacing another version; locked.
 * May wait (dropping the lock) for an evicted file of @fid to be gone.
 */
static int get_locked(struct cache *c, uint64_t fid, const char *key,
		      const struct ns_attr *a, struct centry **out,
		      bool *changed, struct later *l)
{
	struct centry *ce;
	struct file_rec fr;
	int rc;

	*changed = false;
again:
	ce = htab_get(&c->tab, fid);
	if (ce && (strcmp(ce->version, a->version) || ce->size != a->size)) {
		/* a version names bytes only together with their size */
		*changed = true;
		stat_inc(c->st, stale_objects);
		log_info("object '%s' changed (version %s -> %s, %" PRIu64
			 " -> %" PRIu64 " bytes): dropping its cached data",
			 str_log(key), str_log(ce->version), str_log(a->version),
			 ce->size, a->size);
		forget_locked(c, ce);
		meta_q_drop_file(c->meta, ce->fid);
		/* its bytes stay on disk until its last user is gone */
		policy_charge(&c->pol, ce->pn, -(int64_t)ce->used);
		policy_charge(&c->pol, NULL, (int64_t)ce->used);
		ce->stale = true;
		if (ce->lent) {		/* until bury_locked() */
			ce->lent_next = c->lent_stale;
			c->lent_stale = ce;
		}
		release_locked(c, ce, l);
		ce = NULL;
	}
	if (!ce) {
		if (grave_pending_locked(c, fid)) {
			if (l->graves || l->fd[0] >= 0) {
				/* maybe our own: bury it now */
				pthread_mutex_unlock(&c->lock);
				later_run(c, l);
				*l = (struct later)LATER_INIT;
				pthread_mutex_lock(&c->lock);
			} else {
				pthread_cond_wait(&c->cond, &c->lock);
			}
			goto again;
		}
		rc = centry_insert(c, fid, key, a->version, a->size, a->mtime,
				   &ce);
		if (rc == -EFBIG)
			log_err("object '%s' is larger than the cache takes (%" PRIu64
				" bytes)", str_log(key), a->size);
		if (rc)
			return rc;
		ce->lent = shares_lent_file_locked(c, ce);
		policy_add(&c->pol, ce->pn);
		fr.size = ce->size;
		fr.mtime = ce->mtime;
		fr.chunk_size = c->chunk_size;
		memcpy(fr.version, ce->version, sizeof(fr.version));
		meta_q_file(c->meta, fid, &fr);
	}
	if (!ce->key[0]) {
		char *k = strdup(key);

		if (!k)
			return -ENOMEM;
		free(ce->key);
		ce->key = k;
	}
	*out = ce;
	return 0;
}

int cache_attach(struct cache *c, uint64_t fid, const char *key,
		 const struct ns_attr *a, struct centry **out, bool *changed)
{
	struct later l = LATER_INIT;
	struct centry *ce = NULL;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = get_locked(c, fid, key, a, &ce, changed, &l);
	if (!rc) {
		ce->opens++;
		cache_refs_changed_locked(c, ce);
		policy_touch(&c->pol, ce->pn, now_s());
	}
	pthread_mutex_unlock(&c->lock);
	later_run(c, &l);
	if (rc)
		return rc;
	/* a full disk: the file is read from the backend, nothing kept */
	rc = cache_ensure_files(c, ce);
	if (rc && !no_space(-rc)) {
		cache_detach(c, ce);
		return -EIO;
	}
	*out = ce;
	return 0;
}

int cache_hold(struct cache *c, uint64_t fid, const char *key,
	       const struct ns_attr *a, struct centry **out)
{
	struct later l = LATER_INIT;
	bool changed;
	int rc;

	pthread_mutex_lock(&c->lock);
	rc = get_locked(c, fid, key, a, out, &changed, &l);
	if (!rc) {
		(*out)->busy++;
		cache_refs_changed_locked(c, *out);
	}
	pthread_mutex_unlock(&c->lock);
	later_run(c, &l);
	return rc;
}

int cache_detach(struct cache *c, struct centry *ce)
{
	struct later l = LATER_INIT;
	int left;

	pthread_mutex_lock(&c->lock);
	left = --ce->opens;
	release_locked(c, ce, &l);
	pthread_mutex_unlock(&c->lock);
	later_run(c, &l);
	return left;
}

void cache_busy_get(struct cache *c, struct centry *ce)
{
	pthread_mutex_lock(&c->lock);
	ce->busy++;
	cache_refs_changed_locked(c, ce);
	pthread_mutex_unlock(&c->lock);
}

void cache_busy_put(struct cache *c, struct centry *ce)
{
	struct later l = LATER_INIT;

	pthread_mutex_lock(&c->lock);
	ce->busy--;
	release_locked(c, ce, &l);
	pthread_mutex_unlock(&c->lock);
	later_run(c, &l);
}

bool cache_is_open(struct cache *c, const struct centry *ce)
{
	bool open;

	pthread_mutex_lock(&c->lock);
	open = ce->opens > 0;
	pthread_mutex_unlock(&c->lock);
	return open;
}

bool cache_fid_open(struct cache *c, uint64_t fid)
{
	struct centry *ce;
	bool open;

	pthread_mutex_lock(&c->lock);
	ce = htab_get(&c->tab, fid);
	open = ce && ce->opens > 0;
	pthread_mutex_unlock(&c->lock);
	return open;
}

int cache_state_locked(const struct centry *ce, uint32_t n)
{
	if (ce->stale)
		return -ESTALE;
	if (n >= ce->nchunks)
		return -ERANGE;
	return ce->state[n];
}

int cache_chunk_state(struct cache *c, const struct centry *ce, uint32_t n)
{
	int st;

	pthread_mutex_lock(&c->lock);
	st = cache_state_locked(ce, n);
	pthread_mutex_unlock(&c->lock);
	return st;
}

int cache_chunk_states(struct cache *c, const struct centry *ce,
		       uint32_t from, uint32_t n, int8_t *out)
{
	uint32_t i;
	int k = 0;

	pthread_mutex_lock(&c->lock);
	if (ce->stale)
		k = -ESTALE;
	for (i = 0; k >= 0 && i < n && from + i < ce->nchunks; i++, k++)
		out[i] = (int8_t)ce->state[from + i];
	pthread_mutex_unlock(&c->lock);
	return k;
}

int cache_claim(struct cache *c, struct centry *ce, uint32_t n)
{
	int st;

	pthread_mutex_lock(&c->lock);
	st = cache_state_locked(ce, n);
	if (st == CH_ABSENT)
		ce->state[n] = CH_FETCHING;
	pthread_mutex_unlock(&c->lock);
	return st;
}

void cache_abandon(struct cache *c, struct centry *ce, uint32_t n)
{
	pthread_mutex_lock(&c->lock);
	if (n < ce->nchunks && ce->state[n] == CH_FETCHING)
		ce->state[n] = CH_ABSENT;
	pthread_mutex_unlock(&c->lock);
}

bool cache_admits(struct cache *c, const struct centry *ce, uint64_t need,
		  enum admit_kind kind)
{
	struct admission adm;
	bool ok;

	pthread_mutex_lock(&c->lock);
	ok = policy_admit(&c->pol, cache_owner_node(ce), blocks(need), kind, &adm,
			  now_s()) >= 0;
	pthread_mutex_unlock(&c->lock);
	return ok;
}

uint64_t cache_free(struct cache *c)
{
	uint64_t f;

	pthread_mutex_lock(&c->lock);
	f = policy_free(&c->pol);
	pthread_mutex_unlock(&c->lock);
	return f;
}

bool cache_is_complete(struct cache *c, const struct centry *ce)
{
	uint32_t n;
	bool ok = true;

	pthread_mutex_lock(&c->lock);
	for (n = 0; n < ce->nchunks && ok; n++)
		ok = ce->state[n] == CH_PRESENT || ce->state[n] == CH_UNVERIFIED;
	pthread_mutex_unlock(&c->lock);
	return ok;
}

int cache_range_state(struct cache *c, const struct centry *ce, uint64_t off,
		      uint64_t len)
{
	uint32_t n, n0, n1, lo, hi;
	int st, out = CH_PRESENT;

	if (!len || off >= ce->size)
		return CH_PRESENT;
	len = MIN(len, ce->size - off);
	n0 = off / c->chunk_size;
	n1 = (off + len - 1) / c->chunk_size;
	pthread_mutex_lock(&c->lock);
	for (n = n0; n <= n1 && out != CH_ABSENT; n++) {
		st = cache_state_locked(ce, n);
		if (st < 0) {
			out = st;
			break;
		}
		if (st == CH_PRESENT || st == CH_UNVERIFIED)
			continue;
		cache_page_span(c->chunk_size, cache_chunk_len(c, ce, n), n,
				off, len, &lo, &hi);
		if (cache_pages_cover_locked(ce, n, lo, hi))
			continue;
		out = st == CH_FETCHING ? CH_FETCHING : CH_ABSENT;
	}
	pthread_mutex_unlock(&c->lock);
	return out;
}

uint32_t cache_missing(struct cache *c, const struct centry *ce)
{
	uint32_t n, missing = 0;

	pthread_mutex_lock(&c->lock);
	for (n = 0; n < ce->nchunks; n++)
		missing += ce->state[n] == CH_ABSENT;
	pthread_mutex_unlock(&c->lock);
	return missing;
}

/*
 * Room for @cb (policy and disk), then write it at @off of @ce's data
 * file.  Return 0 written; else -errno: nothing written (but maybe a
 * part); *@reserved: the policy's reservation the caller must settle
 * (policy_settle(), under the lock).
 */
static int store_write(struct cache *c, struct centry *ce, uint64_t off,
		       const struct chunkbuf *cb, enum admit_kind kind,
		       bool *reserved)
{
	uint64_t need = blocks(cb->len);
	struct later l = LATER_INIT;
	bool direct;
	ssize_t w;
	int rc, dfd;

	pthread_mutex_lock(&c->lock);
	rc = ce->stale ? -ESTALE : make_room_locked(c, ce, need, kind, &l);
	pthread_mutex_unlock(&c->lock);
	later_run(c, &l);
	*reserved = !rc;
	if (rc == -ENOSPC)
		stat_inc(c->st, chunks_not_stored);
	if (rc)
		return rc;

	rc = disk_room(c, need);
	if (!rc) {
		rc = cache_ensure_files(c, ce);
		if (!rc) {
			/* O_DIRECT wants whole blocks: the padding past len is never read */
			dfd = cache_direct_fd(c, ce);
			direct = dfd >= 0;
			w = pwrite(direct ? dfd : ce->fd, cb->data,
				   direct ? need : cb->len, off);
			if (w < 0)
				rc = -errno;
			else if ((uint64_t)w < cb->len)
				rc = -ENOSPC;	/* a short write to a file: no room */
		}
		disk_done(need);
	}
	return rc;
}

static void log_store_error(struct cache *c, struct centry *ce, uint32_t n,
			    int rc)
{
	if (no_space(-rc)) {
		stat_inc(c->st, chunks_not_stored);
		log_no_space(c, -rc);
	} else if (rc != -ESTALE) {
		log_err("writing chunk %u of '%s' to the cache: %s", n,
			str_log(ce->key), strerror(-rc));
	}
}

int cache_store_chunk(struct cache *c, struct centry *ce, uint32_t n,
		      const struct chunkbuf *cb, uint64_t sum,
		      enum admit_kind kind)
{
	uint64_t need = blocks(cb->len), pages;
	struct chunk_rec rec;
	bool reserved;
	int rc;

	rc = store_write(c, ce, (uint64_t)n * c->chunk_size, cb, kind,
			 &reserved);
	if (!reserved)
		return rc;
	pthread_mutex_lock(&c->lock);
	policy_settle(&c->pol, cache_owner_node(ce), need, rc == 0);
	if (!rc) {
		/* pages a random read stored are part of it now */
		pages = cache_pages_drop_locked(c, ce, n);
		ce->used += need - pages;
		policy_charge(&c->pol, cache_owner_node(ce), -(int64_t)pages);
		ce->state[n] = CH_PRESENT;
		ce->sum[n] = sum;
		rec.len = cb->len;
		rec.sum = sum;
		rec.gen = ce->gen;
		/* a stale entry's record would replace the new version's */
		if (!ce->stale)
			meta_q_chunk(c->meta, ce->fid, n, &rec);
		stat_inc(c->st, chunks_stored);
		if (kind == ADMIT_PREFETCH && !ce->opens && !ce->stale)
			policy_prefetched(&c->pol, ce->pn);
	}
	pthread_mutex_unlock(&c->lock);
	if (rc)
		log_store_error(c, ce, n, rc);
	return rc;
}

int cache_store_pages(struct cache *c, struct centry *ce, uint32_t n,
		      uint32_t lo, const struct chunkbuf *cb)
{
	uint64_t need = blocks(cb->len), added = 0;
	bool reserved;
	int rc, st;

	/* a whole chunk on disk already: nothing to add */
	st = cache_chunk_state(c, ce, n);
	if (st != CH_ABSENT && st != CH_FETCHING)
		return st < 0 ? st : -EEXIST;
	rc = store_write(c, ce, (uint64_t)n * c->chunk_size + lo, cb,
			 ADMIT_DEMAND, &reserved);
	if (!reserved)
		return rc;
	pthread_mutex_lock(&c->lock);
	/* the same bytes as a whole chunk stored meanwhile: not marked */
	st = cache_state_locked(ce, n);
	if (!rc && st != CH_ABSENT && st != CH_FETCHING)
		rc = st < 0 ? st : -EEXIST;
	if (!rc)
		rc = cache_pages_mark_locked(c, ce, n, lo, lo + cb->len,
					     &added);
	/* pages stored before by another reader are not counted twice */
	policy_settle(&c->pol, cache_owner_node(ce), need, false);
	if (added) {
		ce->used += added;
		policy_charge(&c->pol, cache_owner_node(ce), (int64_t)added);
		stat_add(c->st, page_bytes_stored, added);
	}
	pthread_mutex_unlock(&c->lock);
	if (rc && rc != -EEXIST)
		log_store_error(c, ce, n, rc);
	return rc;
}

ssize_t cache_pread_full(int fd, char *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t r = pread(fd, buf + done, len - done, off + done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			break;
		done += r;
	}
	return done;
}

int cache_pread(struct cache *c, struct centry *ce, uint64_t off,
		size_t len, char *buf, char **at)
{
	int dfd = cache_direct_fd(c, ce);
	ssize_t r;

	if (dfd >= 0) {
		uint64_t a = off & ~(BLK - 1);
		size_t alen = blocks(off + len - a);

		r = cache_pread_full(dfd, buf, alen, a);
		if (r >= 0 && (uint64_t)r >= off - a + len) {
			*at = buf + (off - a);
			return 0;
		}
	} else {
		r = cache_pread_full(ce->fd, buf, len, off);
		if (r >= 0 && (size_t)r == len) {
			*at = buf;
			return 0;
		}
	}
	return r < 0 ? (int)r : -EIO;
}

int cache_passthrough_fd(struct cache *c, struct centry *ce)
{
	struct stat st;
	uint32_t n = 0;
	int rc;

	rc = cache_ensure_files(c, ce);
	if (rc)
		return rc;
	if (fstat(ce->fd, &st))
		return -errno;
	if ((uint64_t)st.st_size < ce->size)
		return -EAGAIN;
	/* the tail of an O_DIRECT write is padding past the end: cut it */
	if ((uint64_t)st.st_size > ce->size && ftruncate(ce->fd, ce->size))
		return -errno;
	/* every chunk PRESENT, looked at under the lock that lends the file
	 * (an earlier run's chunks verified first, without it) */
	pthread_mutex_lock(&c->lock);
	rc = cache_first_not_present_locked(ce, &n);
	if (rc == CH_UNVERIFIED) {
		pthread_mutex_unlock(&c->lock);
		rc = cache_verify_file(c, ce);
		if (rc)
			return rc;
		pthread_mutex_lock(&c->lock);
		n = 0;
		rc = cache_first_not_present_locked(ce, &n);
	}
	/* (-ESTALE: replaced meanwhile, never lent) */
	rc = rc == CH_PRESENT ? 0 : rc < 0 ? rc : -EAGAIN;
	if (!rc && !ce->pt_opens &&
	    c->pt_bytes + ce->used > c->pol.limit / 2)
		rc = -ENOSPC;	/* the daemon's path: evictable as it goes */
	if (!rc) {
		ce->lent = true;	/* never changed in place again */
		if (!ce->pt_opens++) {
			ce->pt_bytes = ce->used;
			c->pt_bytes += ce->pt_bytes;
			cache_refs_changed_locked(c, ce);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc ? rc : ce->fd;
}

void cache_passthrough_put(struct cache *c, struct centry *ce)
{
	pthread_mutex_lock(&c->lock);
	if (!--ce->pt_opens) {
		c->pt_bytes -= ce->pt_bytes;
		ce->pt_bytes = 0;
		cache_refs_changed_locked(c, ce);
	}
	pthread_mutex_unlock(&c->lock);
}

int cache_read_fd(const struct centry *ce)
{
	return ce->fd;
}

void cache_read_done(struct centry *ce)
{
	atomic_fetch_add_explicit(&ce->reads_done, 1, memory_order_release);
}

void cache_note_read(struct cache *c, struct centry *ce, uint64_t bytes)
{
	pthread_mutex_lock(&c->lock);
	policy_read(&c->pol, ce->pn, bytes);
	pthread_mutex_unlock(&c->lock);
}

/* plan chunk @n of a random read of [@off, @off + @len): see cache.h */
static int plan_pages_locked(struct cache *c, struct centry *ce, uint32_t n,
			     uint64_t off, uint64_t len)
{
	uint32_t clen = cache_chunk_len(c, ce, n), lo, hi;

	cache_page_span(c->chunk_size, clen, n, off, len, &lo, &hi);
	if (cache_pages_cover_locked(ce, n, lo, hi))
		return CH_PRESENT;
	if ((uint64_t)(hi - lo) * 2 > clen)
		return CH_ABSENT;	/* most of it: the whole chunk */
	return CH_PAGES;
}

int cache_read_plan(struct cache *c, struct centry *ce, uint32_t n0,
		    uint32_t n1, uint32_t skip, uint64_t off, uint64_t bytes,
		    bool pages, int *st)
{
	uint32_t n, i;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	if (ce->stale || n1 >= ce->nchunks || n0 > n1) {
		rc = ce->stale ? -ESTALE : -ERANGE;
		goto out;
	}
	for (n = n0, i = 0; n <= n1 && ce->unverified; n++, i++)
		if (!(skip >> i & 1) && ce->state[n] == CH_UNVERIFIED) {
			rc = 1;		/* checked first, without the lock */
			goto out;
		}
	policy_read(&c->pol, ce->pn, bytes);
	ce->busy++;
	cache_refs_changed_locked(c, ce);
	for (n = n0, i = 0; n <= n1; n++, i++) {
		if (skip >> i & 1)
			continue;
		st[i] = ce->state[n];
		if (st[i] == CH_ABSENT && pages)
			st[i] = plan_pages_locked(c, ce, n, off, bytes);
		if (st[i] == CH_ABSENT)
			ce->state[n] = CH_FETCHING;
	}
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

uint64_t cache_file_bytes(struct cache *c, uint64_t fid)
{
	struct centry *ce;
	uint64_t bytes = 0;

	pthread_mutex_lock(&c->lock);
	ce = htab_get(&c->tab, fid);
	if (ce)
		bytes = ce->used;
	pthread_mutex_unlock(&c->lock);
	return bytes;
}

void cache_usage(struct cache *c, uint64_t *used, uint64_t *limit,
		 uint64_t *files)
{
	pthread_mutex_lock(&c->lock);
	*used = c->pol.used;
	*limit = c->pol.limit;
	*files = c->files;
	pthread_mutex_unlock(&c->lock);
}

/* queue heat row @r for the index (policy_heat_flush()) */
static int queue_heat(void *arg, const struct heat_row *r)
{
	struct cache *c = arg;
	struct heat_rec h = {
		.count = r->count, .last = r->last, .bytes = r->bytes,
		.score = r->score, .pinned = r->pinned,
	};

	meta_q_heat(c->meta, r->fid, &h);
	return 0;
}

/* queue the heat of every file that changed; locked */
static void flush_heat_locked(struct cache *c)
{
	policy_heat_flush(&c->pol, queue_heat, c);
}

static int64_t heat_tick(void *arg)
{
	struct cache *c = arg;

	pthread_mutex_lock(&c->lock);
	flush_heat_locked(c);
	pthread_mutex_unlock(&c->lock);
	return BG_PERIOD;
}

static void free_entries(struct cache *c)
{
	size_t i;

	for (i = 0; i < c->tab.cap; i++) {
		struct centry *ce = c->tab.slot[i];

		if (!ce)
			continue;
		if (ce->fd >= 0)
			close(ce->fd);
		if (ce->dfd >= 0)
			close(ce->dfd);
		centry_free(ce);
	}
	htab_release(&c->tab);
}

/*
 * How many unused entries may keep their data files open (one, two once
 * the O_DIRECT one was used): a third of the descriptors left after 512
 * for everything else, at most 16384.  The daemon raised its soft limit
 * to the hard one at start (fusefs/main.c).
 */
static unsigned idle_max(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur <= 512)
		return 0;
	return MIN((rl.rlim_cur - 512) / 3, (rlim_t)16384);
}

static int64_t realtime_ns(void)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

int cache_open(struct cache **out, const struct fusefs_conf *cf,
	       struct meta *m, struct stats *st)
{
	struct cache *c = calloc(1, sizeof(*c));
	struct later l = LATER_INIT;
	int rc;

	if (!c)
		return -ENOMEM;
	c->dir = strdup(cf->cache_dir);
	c->meta = m;
	c->st = st;
	c->chunk_size = cf->chunk_size;
	c->trust_stop = cf->trust_stop;
	c->started_ns = realtime_ns();
	c->lock_fd = -1;
	c->dirfd = -1;
	c->idle_max = idle_max();
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	htab_init(&c->tab, ce_key);
	rc = policy_init(&c->pol, cf->evict, cf->heat_half_life_s,
			 cf->cache_size, blocks(cf->chunk_size));
	c->pol.st = st;
	if (rc) {
		fprintf(stderr, rc == -EINVAL ?
			"fusefs: unknown eviction policy '%s'\n" :
			"fusefs: no memory for the eviction policy '%s'\n",
			cf->evict);
		goto out_free;
	}
	if (!c->dir) {
		rc = -ENOMEM;
		goto out_free;
	}
	rc = cache_load(c, cf);
	if (rc)
		goto out_free;
	pthread_mutex_lock(&c->lock);
	if (c->pol.used > c->pol.limit) {
		log_info("cache holds %" PRIu64 " bytes, over the %" PRIu64
			 " limit: evicting", c->pol.used, c->pol.limit);
		if (!make_room_locked(c, NULL, 0, ADMIT_DEMAND, &l))
			policy_settle(&c->pol, NULL, 0, false);
	}
	pthread_mutex_unlock(&c->lock);
	later_run(c, &l);
	log_info("cache %s: %" PRIu64 " files, %" PRIu64 " of %" PRIu64
		 " bytes used", c->dir, c->files, c->pol.used, c->pol.limit);
	rc = bgthread_start(&c->heat, "fusefs-heat", HEAT_FLUSH_MS, heat_tick, c);
	if (rc)
		goto out_free;
	*out = c;
	return 0;
out_free:
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	if (c->dirfd >= 0)
		close(c->dirfd);
	spares_destroy(c);
	free_entries(c);
	policy_release(&c->pol);
	free(c->dir);
	free(c);
	return rc;
}

void cache_close(struct cache *c)
{
	if (!c)
		return;
	bgthread_stop(c->heat);
	flush_heat_locked(c);
	cache_stop_record(c);
	free_entries(c);
	policy_release(&c->pol);
	spares_destroy(c);
	close(c->lock_fd);
	close(c->dirfd);
	free(c->dir);
	free(c);
}
