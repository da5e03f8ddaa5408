// SPDX-License-Identifier: MIT
/* nsmgr.c - see nsmgr.h */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "bgthread.h"
#include "hash.h"
#include "htab.h"
#include "log.h"
#include "manifest.h"
#include "manifest_src.h"
#include "ns_build.h"
#include "nsmgr.h"
#include "strsafe.h"
#include "testhook.h"

#define CHECKER_PERIOD_MS	10000	/* checkers run when woken; this is a backstop */
#define REFRESH_SLEEP_MAX_MS	3600000	/* the re-listing thread looks at least hourly */

enum nsmgr_state { NM_NEW, NM_RUNNING, NM_STOPPED };

/* a file queued for a re-check, being re-checked, or found gone */
struct recheck {
	uint64_t ino;			/* key in nsmgr.checks */
	char *key;			/* the object's name */
	bool queued, running;
	bool again;			/* run once more: asked during this run */
	bool forced;			/* a read found it changed: opens wait */
	unsigned forced_seq;		/* counts nsmgr_stale_cb() calls */
	bool inval_due;			/* the kernel was not told of a change */
	bool gone;			/* the last answer was "no such object" */
	int64_t gone_checked;		/* when (wall clock, like ns_attr) */
	struct nsmgr_wait *waiters;	/* parked opens for the next run */
	struct recheck *qnext;
};

struct checker {			/* one re-check thread */
	struct nsmgr *nm;
	struct bgthread *t;
	bool idle;			/* under check_lock: wake it for work */
};

struct nsmgr {
	pthread_rwlock_t lock;	/* guards ns and cur (the pointers) */
	struct ns *ns;		/* cur->ns */
	struct nsmgr_tree *cur;
	uint32_t last_gen;	/* open, then the re-listing thread */
	struct backend *be;
	struct meta *meta;
	struct stats *st;
	const struct fusefs_conf *cf;
	uint64_t seed;
	struct nsmgr_hooks hooks;	/* set by nsmgr_start() */

	bool pinned;			/* from a manifest: versions never adopted */
	bool from_store;		/* loaded from LMDB at open: re-list soon */
	struct bgthread *refresh;
	int64_t refresh_due_ms;		/* CLOCK_MONOTONIC; atomic */

	pthread_mutex_t hold_lock;	/* after lock; guards the trees' refs */
	struct nsmgr_tree *retired;	/* replaced, still held */
	uint64_t nretired;

	pthread_mutex_t check_lock;	/* after lock; guards all below */
	enum nsmgr_state state;
	struct htab checks;		/* ino -> struct recheck */
	struct recheck *qhead, *qtail;
	unsigned nqueued;
	struct checker checkers[NSMGR_CHECKERS];
};

static uint64_t recheck_key(const void *item)
{
	return ((const struct recheck *)item)->ino;
}

struct build {
	struct ns_build *nb;
	struct meta_ns_txn *txn;
	const char *prefix;
	int64_t now;
	int64_t mtime;		/* a manifest's entries: the manifest's own */
};

static int add_listed(void *arg, const char *key, size_t len,
		      const struct ns_attr *a)
{
	struct build *b = arg;
	struct ns_attr zero = { 0 };
	struct ns_attr at = a ? *a : zero;
	int rc;

	at.checked = b->now;
	rc = ns_build_add(b->nb, key, len, b->prefix, a ? &at : &zero);
	if (rc < 0)
		return rc;
	if (b->txn && a)
		return meta_ns_add(b->txn, key, len, &at);
	return 0;
}

static int add_stored(void *arg, const char *key, size_t len,
		      const struct ns_attr *a)
{
	struct build *b = arg;
	int rc = ns_build_add(b->nb, key, len, b->prefix, a);

	return rc < 0 ? rc : 0;
}

static void log_ns(const char *how, const struct ns_stats *s, double secs)
{
	uint64_t skipped = 0;
	int k;

	for (k = PM_BAD_EMPTY; k < PM_NKINDS; k++)
		skipped += s->skipped[k];
	log_info("namespace %s in %.2f s: %" PRIu64 " files, %" PRIu64
		 " directories, %" PRIu64 " bytes; %" PRIu64 " names skipped, %"
		 PRIu64 " shadowed, %" PRIu64 " non-UTF-8",
		 how, secs, s->files, s->dirs, s->bytes, skipped, s->shadowed,
		 s->non_utf8);
}

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec - t0->tv_sec + (t.tv_nsec - t0->tv_nsec) / 1e9;
}

/*
 * What the stored namespace was built from: the source, and for a
 * manifest file its name, size and change time.  Return: whether a
 * stored namespace of this identity may be reused (a remote manifest is
 * read again at every mount).
 */
static bool ns_identity(const struct nsmgr *nm, char *buf, size_t len)
{
	const char *mf = nm->cf->manifest;
	struct stat sb;

	if (!mf) {
		snprintf(buf, len, "%s", nm->cf->source);
		return true;
	}
	if (!strncmp(mf, "file://", 7))
		mf += 7;
	if (strstr(mf, "://") || stat(mf, &sb)) {
		snprintf(buf, len, "%s manifest=%s", nm->cf->source, mf);
		return false;
	}
	snprintf(buf, len, "%s manifest=%s size=%lld ctime=%lld.%09ld",
		 nm->cf->source, mf, (long long)sb.st_size,
		 (long long)sb.st_ctim.tv_sec, sb.st_ctim.tv_nsec);
	return true;
}

/*
 * The image's token: the stored listing it was laid out from, named by
 * the identity and a random id that every stored listing gets.  A new
 * id is stored (and the old one's token no longer matches) at every
 * listing; *@token 0 if the listing has none and none could be stored.
 */
static uint64_t listing_token(struct nsmgr *nm, const char *ident, bool fresh)
{
	char id[40];
	uint64_t r;

	if (fresh || meta_get_str(nm->meta, "listing_id", id, sizeof(id))) {
		if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r))
			r = hash64(ident, strlen(ident), (uint64_t)time(NULL) ^
				   (uintptr_t)nm);
		snprintf(id, sizeof(id), "%016" PRIx64, r);
		if (meta_put_str(nm->meta, "listing_id", id))
			return 0;
	}
	return hash64(id, strlen(id), hash64(ident, strlen(ident), 0)) | 1;
}

/* the image's file, or NULL (no cache directory: in memory) */
static char *image_path(const struct nsmgr *nm)
{
	char *p;

	const char *dir = nm->cf->cache_dir_at ? nm->cf->cache_dir_at :
			  nm->cf->cache_dir;

	if (!dir || asprintf(&p, "%s/" NSMGR_IMAGE, dir) < 0)
		return NULL;
	return p;
}

/* lay @b out: in the image file if @token names a stored listing */
static int finish(struct nsmgr *nm, struct build *b, uint64_t token,
		  struct ns **out)
{
	char *path = token ? image_path(nm) : NULL;
	int rc = ns_build_finish(b->nb, path, token, out);

	b->nb = NULL;
	free(path);
	return rc;
}

static int add_manifest_entry(void *arg, const struct manifest_entry *e,
			      unsigned long lineno)
{
	struct build *b = arg;
	size_t plen = strlen(b->prefix), len = plen + !!plen + e->len;
	char *key = malloc(len + 1);
	struct ns_attr a;
	int rc;

	if (!key)
		return -ENOMEM;
	memcpy(key, b->prefix, plen);
	if (plen)
		key[plen] = '/';
	memcpy(key + plen + !!plen, e->path, e->len);
	key[len] = '\0';
	a = e->attr;
	a.mtime = b->mtime;
	rc = add_listed(b, key, len, &a);
	free(key);
	return rc;
}

/* the tree from --manifest; its errors are printed and logged */
static int read_manifest(struct nsmgr *nm, struct build *b)
{
	char err[MANIFEST_PATH_MAX + 256];
	struct stat sb;
	int fd, rc;

	rc = manifest_open(nm->cf, nm->cf->manifest, &fd);
	if (rc)
		return rc;
	b->mtime = fstat(fd, &sb) == 0 && sb.st_mtime > 0 ? sb.st_mtime : b->now;
	rc = manifest_read(fd, nm->cf->manifest, add_manifest_entry, b, err,
			   sizeof(err));
	close(fd);
	if (rc && nm->refresh)		/* a refresh: the mount goes on */
		log_err("bad manifest %s; keeping the namespace", err);
	else if (rc)
		fprintf(stderr, "fusefs: bad manifest %s\n", err);
	return rc;
}

/* a fresh tree from the backend, also written to the namespace cache */
static int list_backend(struct nsmgr *nm, struct ns **out)
{
	struct build b = { .prefix = nm->be->prefix, .now = time(NULL) };
	struct timespec t0;
	char when[32], ident[4096 + 512];
	uint64_t token = 0;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	b.nb = ns_build_create(nm->seed);
	if (!b.nb)
		return -ENOMEM;
	ns_identity(nm, ident, sizeof(ident));
	/*
	 * A new listing id before the new listing is committed: the image
	 * of the old one names the old id, so once the commit is done it is
	 * never mapped again, even after a crash right after the commit
	 * (then the next mount builds the tree from the index).
	 */
	token = listing_token(nm, ident, true);
	rc = meta_ns_begin(nm->meta, &b.txn);
	if (rc)
		goto out_nb;
	if (nm->pinned)
		rc = read_manifest(nm, &b);
	else
		rc = nm->be->ops->list(nm->be, add_listed, &b);
	if (rc) {
		meta_ns_abort(b.txn);
		goto out_nb;
	}
	rc = meta_ns_commit(b.txn);
	if (rc) {
		log_warn("could not store the namespace cache: %s", strerror(-rc));
		token = 0;	/* no image: it would name no stored listing */
	} else {
		snprintf(when, sizeof(when), "%" PRId64, b.now);
		meta_put_str(nm->meta, "listed_at", when);
		meta_put_str(nm->meta, "source", ident);
	}
	rc = finish(nm, &b, token, out);
	if (rc)
		return rc;
	if (!nm->pinned)
		stat_inc(nm->st, listings);
	log_ns(nm->pinned ? "read from the manifest" : "listed from the backend",
	       ns_stats(*out), since(&t0));
	return 0;
out_nb:
	ns_build_destroy(b.nb);
	return rc;
}

/* the tree as last listed: its image, else from LMDB; -ENOENT if none */
static int load_stored(struct nsmgr *nm, struct ns **out, int64_t *listed)
{
	struct build b = { .prefix = nm->be->prefix };
	char src[4096 + 512], ident[4096 + 512], when[32];
	struct timespec t0;
	uint64_t token;
	char *path;
	long n;
	int rc;

	if (!ns_identity(nm, ident, sizeof(ident)) ||
	    meta_get_str(nm->meta, "source", src, sizeof(src)) ||
	    strcmp(src, ident) ||
	    meta_get_str(nm->meta, "listed_at", when, sizeof(when)))
		return -ENOENT;
	*listed = strtoll(when, NULL, 10);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	token = listing_token(nm, ident, false);
	path = token ? image_path(nm) : NULL;
	rc = path ? ns_open(path, nm->seed, token, out) : -ENOENT;
	if (rc == 0) {
		free(path);
		log_ns("mapped from its image", ns_stats(*out), since(&t0));
		return 0;
	}
	if (rc == -ESTALE)
		log_info("namespace image %s is of another listing: building it again",
			 path);
	else if (rc != -ENOENT && rc != -EINVAL)	/* -EINVAL: ns_open() said */
		log_warn("cannot read the namespace image %s: %s; building it again",
			 path, strerror(-rc));
	free(path);
	b.nb = ns_build_create(nm->seed);
	if (!b.nb)
		return -ENOMEM;
	n = meta_ns_load(nm->meta, add_stored, &b);
	if (n == -EBADMSG)
		log_warn("the stored listing of %s has damaged records: listing it again",
			 nm->cf->source);
	if (n < 0) {
		ns_build_destroy(b.nb);
		return (int)n;
	}
	rc = finish(nm, &b, token, out);
	if (rc)
		return rc;
	log_ns("loaded from the namespace cache", ns_stats(*out), since(&t0));
	return 0;
}

static struct nsmgr_tree *tree_new(struct nsmgr *nm, struct ns *ns);

int nsmgr_open(struct nsmgr **out, struct backend *be, struct meta *m,
	       const struct fusefs_conf *cf, struct stats *st)
{
	struct nsmgr *nm = calloc(1, sizeof(*nm));
	int64_t listed = 0;
	int rc;

	if (!nm)
		return -ENOMEM;
	nm->be = be;
	nm->meta = m;
	nm->cf = cf;
	nm->st = st;
	nm->seed = hash64(cf->source, strlen(cf->source), 1);
	nm->pinned = cf->manifest != NULL;
	pthread_rwlock_init(&nm->lock, NULL);
	pthread_mutex_init(&nm->hold_lock, NULL);
	pthread_mutex_init(&nm->check_lock, NULL);
	htab_init(&nm->checks, recheck_key);
	rc = load_stored(nm, &nm->ns, &listed);
	/* tests: "ns-age-s" makes the stored listing look older */
	listed -= testhook_value("ns-age-s", 0);
	/* a manifest's tree is stored only while its file is unchanged
	 * (ns_identity()): never too old */
	if (rc == 0 && !nm->pinned && cf->list_refresh_s &&
	    time(NULL) - listed >= (int64_t)cf->list_refresh_s) {
		log_info("namespace cache is older than %u s: listing again",
			 cf->list_refresh_s);
		ns_destroy(nm->ns);
		nm->ns = NULL;
		rc = -ENOENT;
	}
	/* served from the store: re-list soon; a fresh listing is not */
	nm->from_store = rc == 0 && !nm->pinned && cf->list_refresh_s;
	if (rc)
		rc = list_backend(nm, &nm->ns);
	if (rc == 0 && nm->from_store)
		log_info("serving the stored namespace; re-listing %s in the background",
			 cf->source);
	if (rc == 0) {
		nm->cur = tree_new(nm, nm->ns);
		if (!nm->cur)
			rc = -ENOMEM;
	}
	if (rc) {
		fprintf(stderr, "fusefs: cannot %s %s: %s\n",
			nm->pinned ? "read the manifest of" : "list", cf->source,
			strerror(-rc));
		nsmgr_close(nm);
		return rc;
	}
	*out = nm;
	return 0;
}

struct ns *nsmgr_rdlock(struct nsmgr *nm)
{
	pthread_rwlock_rdlock(&nm->lock);
	return nm->ns;
}

void nsmgr_unlock(struct nsmgr *nm)
{
	pthread_rwlock_unlock(&nm->lock);
}

static void put_locked(struct nsmgr *nm, struct recheck *r);

/* ---- held trees ---- */

/* @ns as the next generation, held by the manager; NULL on ENOMEM */
static struct nsmgr_tree *tree_new(struct nsmgr *nm, struct ns *ns)
{
	struct nsmgr_tree *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	if (++nm->last_gen > NSMGR_GEN_MAX)
		nm->last_gen = 1;
	t->ns = ns;
	t->gen = nm->last_gen;
	t->refs = 1;
	return t;
}

static void tree_free(struct nsmgr_tree *t)
{
	ns_destroy(t->ns);
	free(t);
}

struct nsmgr_tree *nsmgr_hold(struct nsmgr *nm, uint32_t gen)
{
	struct nsmgr_tree *t;

	pthread_rwlock_rdlock(&nm->lock);
	pthread_mutex_lock(&nm->hold_lock);
	t = nm->cur;
	if (gen && t->gen != gen)
		for (t = nm->retired; t && t->gen != gen; t = t->next)
			;
	if (t)
		t->refs++;
	pthread_mutex_unlock(&nm->hold_lock);
	pthread_rwlock_unlock(&nm->lock);
	return t;
}

/* drop a reference to @t (hold_lock held): true if @t is to be freed */
static bool unref_locked(struct nsmgr *nm, struct nsmgr_tree *t)
{
	struct nsmgr_tree **p;

	if (--t->refs)
		return false;
	/* only a retired tree loses its last reference: unlink it */
	for (p = &nm->retired; *p && *p != t; p = &(*p)->next)
		;
	if (*p) {
		*p = t->next;
		nm->nretired--;
		atomic_store_explicit(&nm->st->ns_retired, nm->nretired,
				      memory_order_relaxed);
	}
	return true;
}

void nsmgr_release(struct nsmgr *nm, struct nsmgr_tree *t)
{
	bool gone;

	if (!t)
		return;
	pthread_mutex_lock(&nm->hold_lock);
	gone = unref_locked(nm, t);
	pthread_mutex_unlock(&nm->hold_lock);
	if (gone)
		tree_free(t);		/* an unmap: outside the lock */
}

bool nsmgr_is_current(struct nsmgr *nm, const struct nsmgr_tree *t)
{
	bool cur;

	pthread_rwlock_rdlock(&nm->lock);
	cur = nm->cur == t;
	pthread_rwlock_unlock(&nm->lock);
	return cur;
}

/*
 * The manager lets go of replaced tree @old (lock held for writing, so
 * that nsmgr_hold() finds it current or retired, never neither): retired
 * while held.  Return: true if @old is to be freed (by the caller,
 * unlocked).
 */
static bool retire_locked(struct nsmgr *nm, struct nsmgr_tree *old)
{
	bool gone;

	pthread_mutex_lock(&nm->hold_lock);
	gone = unref_locked(nm, old);
	if (!gone) {
		old->next = nm->retired;
		nm->retired = old;
		nm->nretired++;
		atomic_store_explicit(&nm->st->ns_retired, nm->nretired,
				      memory_order_relaxed);
	}
	pthread_mutex_unlock(&nm->hold_lock);
	return gone;
}

/* ---- re-listing ---- */

static bool same_version(const struct ns_attr *a, const struct ns_attr *b)
{
	return a->size == b->size && !strcmp(a->version, b->version);
}

/* files of the old tree whose version differs in (or is missing from) the fresh one */
struct swap_diff {
	struct ns *old, *fresh;
	uint64_t *changed;
	size_t n, cap;
	const struct ns_node **added;	/* nodes new in the fresh tree */
	size_t nadded, added_cap;
};

/* a node of the fresh tree the old one lacks: the kernel may hold a negative entry */
static int diff_added(void *arg, const struct ns_node *n)
{
	struct swap_diff *d = arg;

	if (ns_get(d->old, n->ino))
		return 0;
	if (d->nadded == d->added_cap) {
		size_t cap = d->added_cap ? d->added_cap * 2 : 64;
		const struct ns_node **p = realloc(d->added, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		d->added = p;
		d->added_cap = cap;
	}
	d->added[d->nadded++] = n;
	return 0;
}

static int diff_file(void *arg, const struct ns_node *o)
{
	struct swap_diff *d = arg;
	const struct ns_node *n = ns_get(d->fresh, o->ino);
	struct ns_attr a, b;

	if (n && !n->is_dir &&
	    !strcmp(ns_key(d->fresh, n), ns_key(d->old, o))) {
		ns_attr_get(d->old, o, &a);
		ns_attr_get(d->fresh, n, &b);
		/* a re-check after the listing began knows better */
		if (a.checked > b.checked && !ns_attr_set(d->fresh, n, &a))
			return 0;
		if (same_version(&a, &b))
			return 0;
	}
	if (d->n == d->cap) {
		size_t cap = d->cap ? d->cap * 2 : 64;
		uint64_t *p = realloc(d->changed, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		d->changed = p;
		d->cap = cap;
	}
	d->changed[d->n++] = o->ino;
	return 0;
}

/* a fresh listing replaces the tree; the kernel forgets what changed */
static void relist(struct nsmgr *nm)
{
	struct swap_diff d = { 0 };
	struct nsmgr_tree *old, *fresh;
	bool gone;
	size_t i;
	int rc;

	if (list_backend(nm, &d.fresh)) {
		log_warn("re-listing %s failed: keeping the old namespace",
			 nm->cf->source);
		return;
	}
	fresh = tree_new(nm, d.fresh);
	if (!fresh) {
		log_warn("re-listing %s: out of memory; keeping the old namespace",
			 nm->cf->source);
		ns_destroy(d.fresh);
		return;
	}
	d.old = nsmgr_rdlock(nm);
	rc = ns_foreach(d.old, false, diff_file, &d);
	if (!rc)
		rc = ns_foreach(d.fresh, false, diff_added, &d);
	if (!rc)
		rc = ns_foreach(d.fresh, true, diff_added, &d);
	nsmgr_unlock(nm);
	if (rc)
		log_warn("re-listing %s: %s; changed files keep their kernel cache until it expires",
			 nm->cf->source, strerror(-rc));
	pthread_rwlock_wrlock(&nm->lock);
	old = nm->cur;
	nm->cur = fresh;
	nm->ns = d.fresh;
	gone = retire_locked(nm, old);
	pthread_rwlock_unlock(&nm->lock);
	if (gone)
		tree_free(old);
	/* the listing is the authority on which objects exist */
	pthread_mutex_lock(&nm->check_lock);
	for (i = 0; i < nm->checks.cap;) {
		struct recheck *r = nm->checks.slot[i];
		bool drop = r && r->gone && !r->queued && !r->running;

		if (r)
			r->gone = false;
		if (drop)
			put_locked(nm, r);	/* may shift another into slot i */
		else
			i++;
	}
	pthread_mutex_unlock(&nm->check_lock);
	for (i = 0; i < d.n; i++)
		nm->hooks.on_change(nm->hooks.arg, d.changed[i]);
	/* d.fresh is the tree now; only this thread replaces it */
	for (i = 0; i < d.nadded; i++)
		nm->hooks.on_added(nm->hooks.arg,
				   ns_parent(d.fresh, d.added[i])->ino,
				   ns_name(d.fresh, d.added[i]));
	free(d.added);
	free(d.changed);
	nm->hooks.on_swap(nm->hooks.arg);
	/* counted once the kernel was told: `fusefs refresh --wait` waits
	 * for this, and a listing after it reads the new tree */
	stat_inc(nm->st, ns_swaps);
}

/* when the next periodic re-listing is due; a manifest is never re-read by itself */
static int64_t next_refresh_ms(const struct nsmgr *nm)
{
	if (nm->pinned || !nm->cf->list_refresh_s)
		return INT64_MAX;
	return bg_mono_ms() + nm->cf->list_refresh_s * 1000LL;
}

/*
 * The re-listing thread: right after a mount served from the stored
 * namespace, then every list_refresh seconds (neither when it is 0), and
 * when nsmgr_refresh() asks.
 */
static int64_t refresh_tick(void *arg)
{
	struct nsmgr *nm = arg;
	int64_t now = bg_mono_ms();
	int64_t due = __atomic_load_n(&nm->refresh_due_ms, __ATOMIC_ACQUIRE);

	if (now < due)
		return due - now < REFRESH_SLEEP_MAX_MS ? due - now :
		       REFRESH_SLEEP_MAX_MS;
	__atomic_store_n(&nm->refresh_due_ms, next_refresh_ms(nm),
			 __ATOMIC_RELEASE);
	relist(nm);
	return 0;		/* the check above computes the sleep */
}

int nsmgr_refresh(struct nsmgr *nm)
{
	if (!nm->refresh)
		return -ENOTCONN;
	__atomic_store_n(&nm->refresh_due_ms, 0, __ATOMIC_RELEASE);
	bgthread_wake(nm->refresh);
	return 0;
}

/* ---- re-checks ---- */

/* queue @r (check_lock held); returns the checker to wake, or NULL */
static struct checker *enqueue_locked(struct nsmgr *nm, struct recheck *r)
{
	int i;

	r->queued = true;
	r->qnext = NULL;
	if (nm->qtail)
		nm->qtail->qnext = r;
	else
		nm->qhead = r;
	nm->qtail = r;
	nm->nqueued++;
	if (nm->state != NM_RUNNING)
		return NULL;
	for (i = 0; i < NSMGR_CHECKERS; i++) {
		if (nm->checkers[i].idle) {
			nm->checkers[i].idle = false;
			return &nm->checkers[i];
		}
	}
	return NULL;		/* all busy: one takes it when it is done */
}

static void wake(struct checker *c)
{
	if (c)
		bgthread_wake(c->t);
}

/* the entry for file @n (check_lock held); NULL on ENOMEM */
static struct recheck *get_locked(struct nsmgr *nm, const struct ns_node *n)
{
	struct recheck *r = htab_get(&nm->checks, n->ino);

	if (r)
		return r;
	r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	r->ino = n->ino;
	r->key = strdup(ns_key(nm->ns, n));
	if (!r->key || htab_put(&nm->checks, r)) {
		free(r->key);
		free(r);
		return NULL;
	}
	return r;
}

/* drop @r if nothing refers to it any more (check_lock held) */
static void put_locked(struct nsmgr *nm, struct recheck *r)
{
	if (r->queued || r->running || r->gone || r->waiters || r->forced)
		return;
	htab_del(&nm->checks, r->ino);
	free(r->key);
	free(r);
}

/* the next queued file for checker @c, or NULL (then @c is idle) */
static struct recheck *next_locked(struct nsmgr *nm, struct checker *c)
{
	struct recheck *r = nm->qhead;

	if (!r || nm->state != NM_RUNNING) {
		c->idle = true;
		return NULL;
	}
	nm->qhead = r->qnext;
	if (!nm->qhead)
		nm->qtail = NULL;
	nm->nqueued--;
	r->queued = false;
	r->running = true;
	return r;
}

/*
 * A manifest's version of @r that the backend can ask for by itself (an
 * S3 object version: backend.h), asked for; -ENOTSUP for any other.
 * @pin (NS_VERSION_MAX bytes) gets the version asked for.
 */
static int pinned_stat(struct nsmgr *nm, const struct recheck *r,
		       char *pin, struct ns_attr *out)
{
	const struct ns_node *n;
	struct ns_attr known;

	if (!nm->pinned || !nm->be->ops->stat_pinned)
		return -ENOTSUP;
	n = ns_get(nsmgr_rdlock(nm), r->ino);
	if (n && !n->is_dir && !strcmp(ns_key(nm->ns, n), r->key)) {
		ns_attr_get(nm->ns, n, &known);
		memcpy(pin, known.version, NS_VERSION_MAX);
	}
	nsmgr_unlock(nm);
	if (!pin[0])
		return -ENOTSUP;
	return nm->be->ops->stat_pinned(nm->be, r->key, pin, out);
}

/*
 * Ask the backend about @r and apply the answer to the tree.  *@gone is
 * in: whether the object was gone, out: whether it is.  r->key is
 * immutable, so no lock is needed to read it.
 * Return: true if the file changed or vanished (the kernel must forget
 * it).
 */
static bool check_one(struct nsmgr *nm, const struct recheck *r, bool *gone)
{
	char pin[NS_VERSION_MAX] = "";
	const struct ns_node *n;
	struct ns_attr fresh, known;
	int64_t now;
	bool changed = false;
	int rc;

	stat_inc(nm->st, revalidations);
	rc = pinned_stat(nm, r, pin, &fresh);
	if (rc == -ENOTSUP)
		rc = nm->be->ops->stat(nm->be, r->key, &fresh);
	now = time(NULL);
	n = ns_get(nsmgr_rdlock(nm), r->ino);
	if (!n || n->is_dir || strcmp(ns_key(nm->ns, n), r->key)) {
		nsmgr_unlock(nm);	/* re-listed meanwhile: not ours */
		return false;
	}
	ns_attr_get(nm->ns, n, &known);
	if (pin[0] && strcmp(pin, known.version)) {
		nsmgr_unlock(nm);	/* another manifest meanwhile */
		return false;
	}
	if (rc == 0 && nm->pinned && !same_version(&known, &fresh)) {
		/* the manifest's version stays: uncached bytes fail with EIO */
		log_err("object '%s' changed since the manifest (pinned version %s, %" PRIu64
			" bytes; the backend has %s, %" PRIu64 " bytes): not served",
			str_log(r->key), str_log(known.version), known.size,
			str_log(fresh.version), fresh.size);
		known.checked = now;
		ns_attr_set(nm->ns, n, &known);
		changed = *gone;
		*gone = false;
	} else if (rc == 0) {
		changed = *gone || !same_version(&known, &fresh);
		fresh.checked = now;
		if (ns_attr_set(nm->ns, n, &fresh))
			log_err("re-checking '%s': out of memory; its new version is not served",
				str_log(r->key));
		*gone = false;
	} else if (rc == -ENOENT) {
		changed = !*gone;
		*gone = true;
	} else {
		log_warn("re-checking '%s': %s; serving what is known", str_log(r->key),
			 strerror(-rc));
		known.checked = now;	/* do not ask again at every open */
		ns_attr_set(nm->ns, n, &known);
	}
	nsmgr_unlock(nm);
	if (changed)
		log_info("object '%s' %s in the backend", str_log(r->key),
			 *gone ? "vanished" : "changed");
	return changed;
}

/* a re-check thread: runs queued re-checks until the queue is empty */
static int64_t checker_tick(void *arg)
{
	struct checker *c = arg;
	struct nsmgr *nm = c->nm;

	for (;;) {
		struct nsmgr_wait *w, *next;
		struct recheck *r;
		unsigned seq;
		uint64_t ino;
		bool changed, gone, forced, inval;
		int err;

		pthread_mutex_lock(&nm->check_lock);
		r = next_locked(nm, c);
		if (!r) {
			pthread_mutex_unlock(&nm->check_lock);
			return BG_PERIOD;
		}
		w = r->waiters;		/* later arrivals wait for a later run */
		r->waiters = NULL;
		ino = r->ino;		/* @r may be freed once unlocked below */
		seq = r->forced_seq;
		forced = r->forced;
		gone = r->gone;
		pthread_mutex_unlock(&nm->check_lock);

		changed = check_one(nm, r, &gone);

		pthread_mutex_lock(&nm->check_lock);
		r->running = false;
		r->gone = gone;
		if (gone)
			r->gone_checked = time(NULL);
		inval = changed || r->inval_due;
		if (inval && forced && !w && !r->waiters) {
			/*
			 * Asked by a read of the old version, no open waits:
			 * the kernel keeps that reader's size (it gets EIO,
			 * not an early EOF); the next open waits for a run
			 * that tells the kernel (forced stays set).
			 */
			r->inval_due = true;
			inval = false;
		} else {
			r->inval_due = false;
			if (r->forced_seq == seq)
				r->forced = false;	/* this run saw it */
		}
		if (r->again || r->waiters) {
			r->again = false;
			wake(enqueue_locked(nm, r));
		} else {
			put_locked(nm, r);
		}
		pthread_mutex_unlock(&nm->check_lock);

		/* before the parked opens are answered: they see the new version */
		if (inval)
			nm->hooks.on_change(nm->hooks.arg, ino);
		err = gone ? -ENOENT : 0;
		for (; w; w = next) {
			next = w->next;
			w->done(w, err);
		}
	}
}

/*
 * lock_file() - read-lock the tree, find file @ino in it and take
 * check_lock; *@r is the file's re-check entry or NULL.  unlock_file()
 * drops both.  Return: 0 (locked), -ENOENT or -EISDIR (nothing locked).
 */
static int lock_file(struct nsmgr *nm, uint64_t ino, const struct ns_node **n,
		     struct recheck **r)
{
	*n = ns_get(nsmgr_rdlock(nm), ino);
	if (!*n || (*n)->is_dir) {
		nsmgr_unlock(nm);
		return *n ? -EISDIR : -ENOENT;
	}
	pthread_mutex_lock(&nm->check_lock);
	*r = htab_get(&nm->checks, ino);
	return 0;
}

static void unlock_file(struct nsmgr *nm)
{
	pthread_mutex_unlock(&nm->check_lock);
	nsmgr_unlock(nm);
}

int nsmgr_open_check(struct nsmgr *nm, uint64_t ino, struct nsmgr_wait *w,
		     bool *parked)
{
	int64_t revalidate = nm->cf->revalidate_s, checked;
	struct checker *c = NULL;
	const struct ns_node *n;
	struct recheck *r;
	struct ns_attr a;
	int rc;

	*parked = false;
	rc = lock_file(nm, ino, &n, &r);
	if (rc)
		return rc;
	ns_attr_get(nm->ns, n, &a);
	checked = r && r->gone ? r->gone_checked : a.checked;
	if (revalidate == 0 || (r && r->forced)) {
		/* what is known is not worth answering with: wait */
		if (!w) {
			rc = -EWOULDBLOCK;
		} else if (nm->state == NM_STOPPED) {
			rc = -ENOTCONN;
		} else if (!(r = get_locked(nm, n))) {
			rc = -ENOMEM;
		} else {
			w->next = r->waiters;
			r->waiters = w;
			*parked = true;
			if (r->running)
				r->again = true;
			else if (!r->queued)
				c = enqueue_locked(nm, r);
		}
	} else {
		/* tests: "revalidate-s" makes what is known stale sooner
		 * than the kernel's attributes expire */
		if (time(NULL) - checked >=
			    testhook_value("revalidate-s", revalidate) &&
		    !(r && (r->queued || r->running)) &&
		    nm->nqueued < NSMGR_QUEUE_MAX) {
			/* stale: answer with it, ask in the background */
			r = get_locked(nm, n);
			if (r)
				c = enqueue_locked(nm, r);
		}
		if (r && r->gone)
			rc = -ENOENT;
	}
	unlock_file(nm);
	wake(c);
	return rc;
}

int nsmgr_file(struct nsmgr *nm, uint64_t ino, struct ns_attr *a,
	       char **key)
{
	const struct ns_node *n;
	struct recheck *r;
	int rc;

	rc = lock_file(nm, ino, &n, &r);
	if (rc)
		return rc;
	if (r && r->gone) {
		rc = -ENOENT;
	} else {
		ns_attr_get(nm->ns, n, a);
		*key = strdup(ns_key(nm->ns, n));
		if (!*key)
			rc = -ENOMEM;
	}
	unlock_file(nm);
	return rc;
}

void nsmgr_stale_cb(void *arg, uint64_t ino)
{
	struct nsmgr *nm = arg;
	struct checker *c = NULL;
	const struct ns_node *n;
	struct recheck *r;

	if (lock_file(nm, ino, &n, &r))
		return;		/* not a file of the current tree */
	r = get_locked(nm, n);
	if (r) {
		r->forced = true;
		r->forced_seq++;
		if (r->running)
			r->again = true;
		else if (!r->queued)
			c = enqueue_locked(nm, r);
	} else {
		log_err("cannot queue a re-check of '%s': out of memory", str_log(ns_key(nm->ns, n)));
	}
	unlock_file(nm);
	wake(c);
}

/* ---- start, stop ---- */

int nsmgr_start(struct nsmgr *nm, const struct nsmgr_hooks *h)
{
	int i, rc;

	nm->hooks = *h;
	pthread_mutex_lock(&nm->check_lock);
	nm->state = NM_RUNNING;
	pthread_mutex_unlock(&nm->check_lock);
	for (i = 0; i < NSMGR_CHECKERS; i++) {
		nm->checkers[i].nm = nm;
		rc = bgthread_start(&nm->checkers[i].t, "ns-check",
				    CHECKER_PERIOD_MS, checker_tick,
				    &nm->checkers[i]);
		if (rc)
			goto out_stop;
	}
	nm->refresh_due_ms = nm->from_store ? 0 : next_refresh_ms(nm);
	rc = bgthread_start(&nm->refresh, "ns-refresh", REFRESH_SLEEP_MAX_MS,
			    refresh_tick, nm);
	if (rc)
		goto out_stop;
	return 0;
out_stop:
	nsmgr_stop(nm);
	return rc;
}

void nsmgr_stop(struct nsmgr *nm)
{
	struct nsmgr_wait *w = NULL, *next;
	struct recheck *r;
	int i;

	pthread_mutex_lock(&nm->check_lock);
	nm->state = NM_STOPPED;		/* no more wakes, no more runs */
	pthread_mutex_unlock(&nm->check_lock);
	bgthread_stop(nm->refresh);
	nm->refresh = NULL;
	for (i = 0; i < NSMGR_CHECKERS; i++) {
		bgthread_stop(nm->checkers[i].t);
		nm->checkers[i].t = NULL;
	}
	/* what never ran: answer its waiters, forget it */
	pthread_mutex_lock(&nm->check_lock);
	while ((r = nm->qhead)) {
		nm->qhead = r->qnext;
		r->queued = false;
		while (r->waiters) {
			struct nsmgr_wait *x = r->waiters;

			r->waiters = x->next;
			x->next = w;
			w = x;
		}
		put_locked(nm, r);
	}
	nm->qtail = NULL;
	nm->nqueued = 0;
	pthread_mutex_unlock(&nm->check_lock);
	for (; w; w = next) {
		next = w->next;
		w->done(w, -ENOTCONN);
	}
}

static void recheck_free(void *item)
{
	struct recheck *r = item;

	free(r->key);
	free(r);
}

void nsmgr_close(struct nsmgr *nm)
{
	if (!nm)
		return;
	nsmgr_stop(nm);
	htab_free(&nm->checks, recheck_free);
	while (nm->retired) {
		struct nsmgr_tree *t = nm->retired;

		nm->retired = t->next;
		tree_free(t);
	}
	if (nm->cur)
		tree_free(nm->cur);
	else
		ns_destroy(nm->ns);
	pthread_mutex_destroy(&nm->check_lock);
	pthread_mutex_destroy(&nm->hold_lock);
	pthread_rwlock_destroy(&nm->lock);
	free(nm);
}
