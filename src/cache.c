// SPDX-License-Identifier: MIT
/* cache.c - see cache.h */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cache.h"
#include "hash.h"
#include "htab.h"
#include "log.h"

#define BLK		4096ULL
#define HEAT_FLUSH_S	1

struct cache {
	pthread_mutex_t lock;
	struct htab tab;	/* fid -> centry (not stale) */
	struct policy pol;
	struct meta *meta;
	struct stats *st;
	char *dir;
	int lock_fd;
	uint32_t chunk_size;
	uint64_t limit, used, reserved, files;
	uint64_t used_stream;	/* of used: streamed files */
	uint64_t window;	/* room kept for streamed files */
	bool direct;		/* O_DIRECT usable for the data files */
	pthread_t heat_thread;
	pthread_cond_t heat_cond;
	bool stop;
};

static uint64_t blocks(uint64_t len)
{
	return (len + BLK - 1) & ~(BLK - 1);
}

static uint64_t ce_key(const void *item)
{
	return ((const struct centry *)item)->fid;
}

static int64_t now_s(void)
{
	return time(NULL);
}

void cache_lock(struct cache *c)
{
	pthread_mutex_lock(&c->lock);
}

void cache_unlock(struct cache *c)
{
	pthread_mutex_unlock(&c->lock);
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

struct chunkbuf *chunkbuf_new(uint32_t size)
{
	struct chunkbuf *cb = malloc(sizeof(*cb));

	if (!cb)
		return NULL;
	if (posix_memalign((void **)&cb->data, BLK, size)) {
		free(cb);
		return NULL;
	}
	atomic_init(&cb->ref, 1);
	cb->len = 0;
	return cb;
}

struct chunkbuf *chunkbuf_get(struct chunkbuf *cb)
{
	atomic_fetch_add(&cb->ref, 1);
	return cb;
}

void chunkbuf_put(struct chunkbuf *cb)
{
	if (cb && atomic_fetch_sub(&cb->ref, 1) == 1) {
		free(cb->data);
		free(cb);
	}
}

static void data_path(const struct cache *c, const struct centry *ce,
		      char *out, size_t len)
{
	snprintf(out, len, "%s/data/%02x/%016" PRIx64 "-%016" PRIx64,
		 c->dir, (unsigned)(ce->fid & 0xff), ce->fid, ce->gen);
}

static int set_chunks(struct cache *c, struct centry *ce)
{
	ce->nchunks = (ce->size + c->chunk_size - 1) / c->chunk_size;
	free(ce->state);
	free(ce->sum);
	ce->state = calloc(ce->nchunks ? ce->nchunks : 1, 1);
	ce->sum = calloc(ce->nchunks ? ce->nchunks : 1, sizeof(*ce->sum));
	return ce->state && ce->sum ? 0 : -ENOMEM;
}

static struct centry *centry_new(struct cache *c, uint64_t fid,
				 const char *key, const char *version,
				 uint64_t size, int64_t mtime)
{
	struct centry *ce = calloc(1, sizeof(*ce));

	if (!ce)
		return NULL;
	ce->fid = fid;
	ce->key = strdup(key ? key : "");
	snprintf(ce->version, sizeof(ce->version), "%s", version);
	ce->gen = version_gen(ce->version);
	ce->size = size;
	ce->mtime = mtime;
	ce->fd = ce->dfd = -1;
	ce->pn = policy_node(&c->pol, fid);
	if (!ce->key || !ce->pn || set_chunks(c, ce)) {
		free(ce->key);
		free(ce->state);
		free(ce->sum);
		free(ce);
		return NULL;
	}
	return ce;
}

static void drop_mem(struct centry *ce)
{
	unsigned i;

	for (i = 0; i < CACHE_MEMCHUNKS; i++) {
		chunkbuf_put(ce->mem[i].cb);
		ce->mem[i].cb = NULL;
	}
}

static void centry_free(struct centry *ce)
{
	drop_mem(ce);
	free(ce->key);
	free(ce->state);
	free(ce->sum);
	free(ce);
}

static void close_files_locked(struct centry *ce)
{
	if (ce->fd >= 0)
		close(ce->fd);
	if (ce->dfd >= 0)
		close(ce->dfd);
	ce->fd = ce->dfd = -1;
	drop_mem(ce);
}

static int open_files_locked(struct cache *c, struct centry *ce)
{
	char path[PATH_MAX];

	if (ce->fd >= 0)
		return 0;
	data_path(c, ce, path, sizeof(path));
	ce->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (ce->fd < 0 && errno == ENOENT) {
		char *slash = strrchr(path, '/');

		*slash = '\0';
		mkdir(path, 0700);
		*slash = '/';
		ce->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	}
	if (ce->fd < 0) {
		log_err("cache file %s: %s", path, strerror(errno));
		return -errno;
	}
	if (c->direct)
		ce->dfd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	return 0;
}

/* drop every cached byte of @ce: data file, index records, accounting */
static void drop_data_locked(struct cache *c, struct centry *ce)
{
	char path[PATH_MAX];

	data_path(c, ce, path, sizeof(path));
	close_files_locked(ce);
	if (unlink(path) && errno != ENOENT)
		log_warn("cannot remove %s: %s", path, strerror(errno));
	c->used -= ce->used;
	if (ce->pn->stream)
		c->used_stream -= ce->used;
	ce->pn->stream = false;
	ce->used = 0;
	if (ce->nchunks)
		memset(ce->state, CH_ABSENT, ce->nchunks);
	meta_q_drop_file(c->meta, ce->fid);
}

static void forget_locked(struct cache *c, struct centry *ce)
{
	c->pol.ops->del(&c->pol, ce->pn);
	htab_del(&c->tab, ce->fid);
	c->files--;
}

static bool evictable(struct policy_node *pn, void *arg)
{
	struct cache *c = arg;
	struct centry *v = htab_get(&c->tab, pn->fid);

	return v && !v->opens && !v->busy && v->used;
}

static void evict_locked(struct cache *c, struct centry *v)
{
	if (v->pn->prefetched)
		stat_add(c->st, prefetch_wasted_bytes, v->used);
	stat_inc(c->st, evictions);
	stat_add(c->st, evicted_bytes, v->used);
	log_dbg("evict %s (%" PRIu64 " bytes)", v->key, v->used);
	drop_data_locked(c, v);
	forget_locked(c, v);
	centry_free(v);
}

static bool evictable_stream(struct policy_node *pn, void *arg)
{
	return pn->stream && evictable(pn, arg);
}

/* for a prefetch: streamed files, and kept files no list will read */
static bool evictable_for_prefetch(struct policy_node *pn, void *arg)
{
	struct cache *c = arg;

	if (!evictable(pn, arg))
		return false;
	return pn->stream ||
	       c->pol.next_use(c->pol.next_use_arg, pn->fid) == NEXT_USE_NONE;
}

static bool evictable_kept(struct policy_node *pn, void *arg)
{
	return !pn->stream && evictable(pn, arg);
}

/* victim choice honours lists (kept/streamed split) when they exist */
static bool lists_mode(const struct cache *c)
{
	return c->pol.next_use && !strcmp(c->pol.ops->name, "auto");
}

/*
 * Make room for @need more bytes for @self (NULL: just get under the
 * limit), evicting what the policy offers; with @dry_run only say whether
 * it could.  -ENOSPC if the policy would rather keep what is there
 * (admission control) or nothing can go.
 */
static int room_locked(struct cache *c, uint64_t need, struct centry *self,
		       bool prefetch, bool dry_run)
{
	bool (*eligible)(struct policy_node *, void *) = evictable;
	uint64_t bound = c->limit;

	if (need > c->limit)
		return -ENOSPC;
	if (self && lists_mode(c)) {
		uint64_t kept = c->used - c->used_stream;

		if (!self->pn->stream && kept + c->reserved + need <=
		    c->limit - c->window) {
			bound = c->limit - c->window;	/* room to keep it */
			if (c->used + c->reserved + need > c->limit)
				eligible = evictable_stream;
		} else if (prefetch && (self->pn->stream || !self->used)) {
			self->pn->stream = true;	/* stage it */
			eligible = evictable_for_prefetch;
		} else {
			eligible = evictable_kept;	/* Belady swap */
		}
	}
	while (c->used + c->reserved + need > bound ||
	       c->used + c->reserved + need > c->limit) {
		struct policy_node *pn;

		pn = c->pol.ops->victim(&c->pol, self ? self->pn : NULL,
					eligible, c, now_s());
		if (!pn)
			return -ENOSPC;
		if (dry_run)
			return 0;
		evict_locked(c, htab_get(&c->tab, pn->fid));
		if (eligible != evictable && eligible != evictable_kept &&
		    bound < c->limit)
			bound = c->limit;	/* only needed stream room */
	}
	if (!dry_run)
		c->reserved += need;
	return 0;
}

static int reserve_locked(struct cache *c, uint64_t need, struct centry *self,
			  bool prefetch)
{
	return room_locked(c, need, self, prefetch, false);
}

int cache_pin(struct cache *c, uint64_t fid, bool pin)
{
	struct policy_node *pn;

	cache_lock(c);
	pn = policy_node(&c->pol, fid);
	if (pn) {
		pn->pinned = pin;
		pn->dirty = true;
	}
	cache_unlock(c);
	return pn ? 0 : -ENOMEM;
}

int cache_evict_file(struct cache *c, uint64_t fid)
{
	struct centry *v;
	int rc = 0;

	cache_lock(c);
	v = htab_get(&c->tab, fid);
	if (v && (v->opens || v->busy))
		rc = -EBUSY;
	else if (v)
		evict_locked(c, v);
	cache_unlock(c);
	return rc;
}

void cache_set_next_use(struct cache *c,
			uint64_t (*fn)(void *arg, uint64_t fid), void *arg)
{
	cache_lock(c);
	c->pol.next_use = fn;
	c->pol.next_use_arg = arg;
	cache_unlock(c);
}

int cache_heat_each(struct cache *c, int (*fn)(void *arg,
		    const struct policy_node *n, bool cached), void *arg)
{
	size_t i;
	int rc = 0;

	cache_lock(c);
	for (i = 0; i < c->pol.nodes.cap && !rc; i++) {
		struct policy_node *n = c->pol.nodes.slot[i];
		struct centry *ce;

		if (!n)
			continue;
		ce = htab_get(&c->tab, n->fid);
		rc = fn(arg, n, ce && ce->used);
	}
	cache_unlock(c);
	return rc;
}

/* the entry for @fid at @a->version, replacing another version; locked */
static struct centry *get_locked(struct cache *c, uint64_t fid,
				 const char *key, const struct ns_attr *a,
				 bool *changed, bool open_files)
{
	struct centry *ce;
	struct file_rec fr;

	*changed = false;
	ce = htab_get(&c->tab, fid);
	if (ce && strcmp(ce->version, a->version)) {
		*changed = true;
		stat_inc(c->st, stale_objects);
		log_info("object '%s' changed (version %s -> %s): dropping its cached data",
			 key, ce->version, a->version);
		forget_locked(c, ce);
		if (ce->opens || ce->busy) {
			ce->stale = true;	/* freed by the last user */
			meta_q_drop_file(c->meta, ce->fid);
		} else {
			drop_data_locked(c, ce);
			centry_free(ce);
		}
		ce = NULL;
	}
	if (!ce) {
		ce = centry_new(c, fid, key, a->version, a->size, a->mtime);
		if (!ce || htab_put(&c->tab, ce)) {
			if (ce)
				centry_free(ce);
			return NULL;
		}
		c->files++;
		c->pol.ops->add(&c->pol, ce->pn);
		fr.size = ce->size;
		fr.mtime = ce->mtime;
		fr.chunk_size = c->chunk_size;
		memcpy(fr.version, ce->version, sizeof(fr.version));
		meta_q_file(c->meta, fid, &fr);
	}
	if (!ce->key[0]) {
		free(ce->key);
		ce->key = strdup(key);
	}
	if (open_files && open_files_locked(c, ce))
		return NULL;
	return ce;
}

struct centry *cache_attach(struct cache *c, uint64_t fid, const char *key,
			    const struct ns_attr *a, bool *changed)
{
	struct centry *ce;

	cache_lock(c);
	ce = get_locked(c, fid, key, a, changed, true);
	if (ce) {
		ce->opens++;
		c->pol.ops->touch(&c->pol, ce->pn, now_s());
	}
	cache_unlock(c);
	return ce;
}

struct centry *cache_hold(struct cache *c, uint64_t fid, const char *key,
			  const struct ns_attr *a)
{
	struct centry *ce;
	bool changed;

	cache_lock(c);
	ce = get_locked(c, fid, key, a, &changed, false);
	if (ce)
		ce->busy++;
	cache_unlock(c);
	return ce;
}

bool cache_admits(struct cache *c, const struct centry *ce, uint64_t need,
		  bool prefetch)
{
	bool ok, was = ce->pn->stream;

	cache_lock(c);
	ok = room_locked(c, need, (struct centry *)ce, prefetch, true) == 0;
	if (!ce->used)
		ce->pn->stream = was;	/* a dry run decides nothing */
	cache_unlock(c);
	return ok;
}

void cache_window_at_least(struct cache *c, uint64_t bytes)
{
	cache_lock(c);
	c->window = MAX(c->window, MIN(blocks(bytes), c->limit / 4));
	cache_unlock(c);
}

uint64_t cache_free(struct cache *c)
{
	uint64_t f;

	cache_lock(c);
	f = c->used + c->reserved < c->limit ? c->limit - c->used - c->reserved : 0;
	cache_unlock(c);
	return f;
}

bool cache_is_complete(struct cache *c, const struct centry *ce)
{
	uint32_t n;
	bool ok = true;

	cache_lock(c);
	for (n = 0; n < ce->nchunks && ok; n++)
		ok = ce->state[n] == CH_PRESENT || ce->state[n] == CH_UNVERIFIED;
	cache_unlock(c);
	return ok;
}

uint32_t cache_missing_locked(const struct centry *ce)
{
	uint32_t n, missing = 0;

	for (n = 0; n < ce->nchunks; n++)
		missing += ce->state[n] == CH_ABSENT;
	return missing;
}

/* the last reference to @ce went away */
static void idle_locked(struct cache *c, struct centry *ce)
{
	if (ce->opens || ce->busy)
		return;
	if (ce->stale) {
		c->used -= ce->used;
		if (ce->pn->stream)
			c->used_stream -= ce->used;
		ce->used = 0;
		{
			char path[PATH_MAX];

			data_path(c, ce, path, sizeof(path));
			unlink(path);
		}
		close_files_locked(ce);
		centry_free(ce);
		return;
	}
	close_files_locked(ce);
}

void cache_detach(struct cache *c, struct centry *ce)
{
	cache_lock(c);
	ce->opens--;
	idle_locked(c, ce);
	cache_unlock(c);
}

void cache_busy_get_locked(struct centry *ce)
{
	ce->busy++;
}

void cache_busy_put(struct cache *c, struct centry *ce)
{
	cache_lock(c);
	ce->busy--;
	idle_locked(c, ce);
	cache_unlock(c);
}

int cache_store_chunk(struct cache *c, struct centry *ce, uint32_t n,
		      const struct chunkbuf *cb, uint64_t sum, bool prefetch)
{
	uint64_t need = blocks(cb->len), off = (uint64_t)n * c->chunk_size;
	struct chunk_rec rec;
	ssize_t w;
	int rc, fd;

	cache_lock(c);
	if (ce->stale) {
		cache_unlock(c);
		return -ESTALE;
	}
	rc = reserve_locked(c, need, ce, prefetch);
	if (!rc)
		rc = open_files_locked(c, ce);
	fd = ce->dfd >= 0 ? ce->dfd : ce->fd;
	cache_unlock(c);
	if (rc == -ENOSPC) {
		stat_inc(c->st, chunks_not_stored);
		return rc;
	}
	if (rc)
		return rc;

	/* O_DIRECT wants whole blocks: the padding past len is never read */
	w = pwrite(fd, cb->data, fd == ce->dfd ? need : cb->len, off);
	if (w >= 0 && (uint64_t)w >= cb->len)
		rc = 0;
	else
		rc = w < 0 ? -errno : -EIO;

	cache_lock(c);
	c->reserved -= need;
	if (!rc) {
		c->used += need;
		ce->used += need;
		if (ce->pn->stream)
			c->used_stream += need;
		ce->sum[n] = sum;
		rec.len = cb->len;
		rec.sum = sum;
		rec.gen = ce->gen;
		meta_q_chunk(c->meta, ce->fid, n, &rec);
		stat_inc(c->st, chunks_stored);
	}
	cache_unlock(c);
	if (rc)
		log_err("writing chunk %u of '%s' to the cache: %s", n, ce->key,
			strerror(-rc));
	return rc;
}

static ssize_t pread_full(int fd, char *buf, size_t len, uint64_t off)
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

int cache_verify_chunk(struct cache *c, struct centry *ce, uint32_t n,
		       struct chunkbuf *cb)
{
	uint32_t len = cache_chunk_len(c, ce, n);
	uint64_t off = (uint64_t)n * c->chunk_size;
	ssize_t r;
	bool direct = ce->dfd >= 0;
	int rc = 0;

	r = pread_full(direct ? ce->dfd : ce->fd, cb->data,
		       direct ? blocks(len) : len, off);
	cb->len = len;
	cache_lock(c);
	if (ce->state[n] != CH_UNVERIFIED) {
		/* someone else decided meanwhile; let the caller look again */
		rc = ce->state[n] == CH_PRESENT ? 0 : -EAGAIN;
	} else if (r >= (ssize_t)len && hash64(cb->data, len, 0) == ce->sum[n]) {
		ce->state[n] = CH_PRESENT;
		stat_inc(c->st, verified_chunks);
	} else {
		ce->state[n] = CH_ABSENT;
		c->used -= blocks(len);
		ce->used -= blocks(len);
		if (ce->pn->stream)
			c->used_stream -= blocks(len);
		meta_q_drop_chunk(c->meta, ce->fid, n);
		stat_inc(c->st, checksum_failures);
		log_warn("cached chunk %u of '%s' failed verification%s: refetching",
			 n, ce->key, r < 0 ? " (read error)" : "");
		rc = -EBADMSG;
	}
	cache_unlock(c);
	return rc;
}

char *cache_pread(struct cache *c, struct centry *ce, uint64_t off,
		  size_t len, char *buf)
{
	ssize_t r;

	(void)c;
	if (ce->dfd >= 0) {
		uint64_t a = off & ~(BLK - 1);
		size_t alen = blocks(off + len - a);

		r = pread_full(ce->dfd, buf, alen, a);
		if (r >= 0 && (uint64_t)r >= off - a + len)
			return buf + (off - a);
	} else {
		r = pread_full(ce->fd, buf, len, off);
		if (r >= 0 && (size_t)r == len)
			return buf;
	}
	errno = r < 0 ? (int)-r : EIO;
	return NULL;
}

int cache_read_fd(const struct centry *ce)
{
	return ce->fd;
}

void cache_note_read(struct cache *c, struct centry *ce, uint64_t bytes)
{
	cache_lock(c);
	ce->pn->bytes += bytes;
	ce->pn->dirty = true;
	cache_unlock(c);
}

uint64_t cache_file_bytes(struct cache *c, uint64_t fid)
{
	struct centry *ce;
	uint64_t bytes = 0;

	cache_lock(c);
	ce = htab_get(&c->tab, fid);
	if (ce)
		bytes = ce->used;
	cache_unlock(c);
	return bytes;
}

void cache_usage(struct cache *c, uint64_t *used, uint64_t *limit,
		 uint64_t *files)
{
	cache_lock(c);
	*used = c->used;
	*limit = c->limit;
	*files = c->files;
	cache_unlock(c);
}

/* ---- startup: load the index, reconcile it with the data files ---- */

static int load_file(void *arg, uint64_t fid, const struct file_rec *r)
{
	struct cache *c = arg;
	struct centry *ce;

	if (r->chunk_size != c->chunk_size) {
		meta_q_drop_file(c->meta, fid);
		return 0;
	}
	ce = centry_new(c, fid, NULL, r->version, r->size, r->mtime);
	if (!ce || htab_put(&c->tab, ce))
		return -ENOMEM;
	c->files++;
	return 0;
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
	ce->sum[n] = r->sum;
	ce->used += blocks(r->len);
	c->used += blocks(r->len);
	return 0;
}

static int load_heat(void *arg, uint64_t fid, const struct heat_rec *r)
{
	struct cache *c = arg;
	struct policy_node *n = policy_node(&c->pol, fid);

	if (!n)
		return -ENOMEM;
	n->last = r->last;
	n->count = r->count;
	n->bytes = r->bytes;
	n->score = r->score;
	n->score_at = r->last;
	n->prior = r->score;
	n->pinned = r->pinned;
	return 0;
}

/* data files nobody indexes (a crash between write and commit) go */
static void sweep_orphans(struct cache *c)
{
	char path[PATH_MAX];
	unsigned i;

	for (i = 0; i < 256; i++) {
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "%s/data/%02x", c->dir, i);
		d = opendir(path);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			uint64_t fid, gen;
			struct centry *ce;
			struct stat sb;

			if (de->d_name[0] == '.')
				continue;
			if (sscanf(de->d_name, "%16" SCNx64 "-%16" SCNx64,
				   &fid, &gen) != 2)
				continue;
			ce = htab_get(&c->tab, fid);
			snprintf(path, sizeof(path), "%s/data/%02x/%s", c->dir,
				 i, de->d_name);
			if (ce && ce->gen == gen && ce->used &&
			    !stat(path, &sb) &&
			    (uint64_t)sb.st_blocks * 512 <= ce->used + BLK)
				continue;
			if (ce && ce->gen == gen && ce->used) {
				/* more on disk than indexed: punch the rest */
				int fd = open(path, O_RDWR | O_CLOEXEC);
				uint32_t n;

				for (n = 0; fd >= 0 && n < ce->nchunks; n++)
					if (ce->state[n] == CH_ABSENT)
						fallocate(fd, FALLOC_FL_PUNCH_HOLE |
							  FALLOC_FL_KEEP_SIZE,
							  (off_t)n * c->chunk_size,
							  c->chunk_size);
				if (fd >= 0)
					close(fd);
				continue;
			}
			unlink(path);
		}
		closedir(d);
	}
}

/* queue the heat of every file that changed; locked */
static void flush_heat_locked(struct cache *c)
{
	size_t i;

	for (i = 0; i < c->pol.nodes.cap; i++) {
		struct policy_node *n = c->pol.nodes.slot[i];
		struct heat_rec h;

		if (!n || !n->dirty)
			continue;
		h.count = n->count;
		h.last = n->last;
		h.bytes = n->bytes;
		h.score = policy_heat(&c->pol, n, n->last);
		h.pinned = n->pinned;
		meta_q_heat(c->meta, n->fid, &h);
		n->dirty = false;
	}
}

static void *heat_main(void *arg)
{
	struct cache *c = arg;
	struct timespec ts;

	cache_lock(c);
	while (!c->stop) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += HEAT_FLUSH_S;
		pthread_cond_timedwait(&c->heat_cond, &c->lock, &ts);
		flush_heat_locked(c);
	}
	cache_unlock(c);
	return NULL;
}

static int lock_dir(struct cache *c)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/lock", c->dir);
	c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (c->lock_fd < 0) {
		fprintf(stderr, "fusefs: cannot use cache directory %s: %s\n",
			c->dir, strerror(errno));
		return -errno;
	}
	if (flock(c->lock_fd, LOCK_EX | LOCK_NB)) {
		fprintf(stderr, "fusefs: cache directory %s is in use by another fusefs\n",
			c->dir);
		return -EBUSY;
	}
	return 0;
}

static bool direct_works(const char *dir)
{
	char path[PATH_MAX + 32];
	int fd;

	snprintf(path, sizeof(path), "%s/.direct-probe", dir);
	fd = open(path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
	unlink(path);
	return fd >= 0;
}

int cache_open(struct cache **out, const struct fusefs_conf *cf,
	       struct meta *m, struct stats *st)
{
	struct cache *c = calloc(1, sizeof(*c));
	char path[PATH_MAX];
	size_t i;
	int rc;

	if (!c)
		return -ENOMEM;
	c->dir = strdup(cf->cache_dir);
	c->meta = m;
	c->st = st;
	c->chunk_size = cf->chunk_size;
	c->limit = cf->cache_size;
	c->window = MAX(2ULL * cf->chunk_size, cf->cache_size / 32);
	c->lock_fd = -1;
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->heat_cond, NULL);
	htab_init(&c->tab, ce_key);
	rc = policy_init(&c->pol, cf->evict, cf->heat_half_life_s);
	if (rc) {
		fprintf(stderr, "fusefs: unknown eviction policy '%s'\n", cf->evict);
		goto out_free;
	}
	rc = lock_dir(c);
	if (rc)
		goto out_free;
	snprintf(path, sizeof(path), "%s/data", c->dir);
	if (mkdir(path, 0700) && errno != EEXIST) {
		rc = -errno;
		fprintf(stderr, "fusefs: cannot create %s: %s\n", path, strerror(errno));
		goto out_free;
	}
	c->direct = cf->read_mode == READ_DIRECT && direct_works(path);
	if (cf->read_mode == READ_DIRECT && !c->direct)
		log_warn("O_DIRECT is not supported in %s: using buffered reads", path);
	rc = meta_files_load(m, load_file, c);
	if (!rc)
		rc = meta_chunks_load(m, load_chunk, c);
	if (!rc)
		rc = meta_heat_load(m, load_heat, c);
	if (rc) {
		fprintf(stderr, "fusefs: cannot load the cache index: %s\n",
			strerror(-rc));
		goto out_free;
	}
	for (i = 0; i < c->tab.cap; i++)
		if (c->tab.slot[i])
			c->pol.ops->add(&c->pol, ((struct centry *)c->tab.slot[i])->pn);
	sweep_orphans(c);
	cache_lock(c);
	if (c->used > c->limit) {
		log_info("cache holds %" PRIu64 " bytes, over the %" PRIu64
			 " limit: evicting", c->used, c->limit);
		reserve_locked(c, 0, NULL, false);
	}
	cache_unlock(c);
	log_info("cache %s: %" PRIu64 " files, %" PRIu64 " of %" PRIu64
		 " bytes used", c->dir, c->files, c->used, c->limit);
	rc = -pthread_create(&c->heat_thread, NULL, heat_main, c);
	if (rc)
		goto out_free;
	*out = c;
	return 0;
out_free:
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	for (i = 0; i < c->tab.cap; i++)
		if (c->tab.slot[i])
			centry_free(c->tab.slot[i]);
	htab_release(&c->tab);
	free(c->dir);
	free(c);
	return rc;
}

void cache_close(struct cache *c)
{
	size_t i;

	if (!c)
		return;
	cache_lock(c);
	c->stop = true;
	pthread_cond_signal(&c->heat_cond);
	cache_unlock(c);
	pthread_join(c->heat_thread, NULL);
	flush_heat_locked(c);
	for (i = 0; i < c->tab.cap; i++) {
		struct centry *ce = c->tab.slot[i];

		if (!ce)
			continue;
		close_files_locked(ce);
		centry_free(ce);
	}
	htab_release(&c->tab);
	policy_release(&c->pol);
	close(c->lock_fd);
	free(c->dir);
	free(c);
}
