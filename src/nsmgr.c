// SPDX-License-Identifier: MIT
/* nsmgr.c - see nsmgr.h */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bgthread.h"
#include "hash.h"
#include "log.h"
#include "nsmgr.h"

struct nsmgr {
	pthread_rwlock_t lock;	/* guards ns (the pointer, not the tree) */
	struct ns *ns;
	struct backend *be;
	struct meta *meta;
	struct stats *st;
	const struct fusefs_conf *cf;
	uint64_t seed;
	struct nsmgr_hooks hooks;	/* set by nsmgr_start() */

	struct bgthread *refresh;
	int64_t refresh_due_ms;		/* CLOCK_MONOTONIC; refresh thread's */
};

struct build {
	struct ns *ns;
	struct meta_ns_txn *txn;
	const char *prefix;
	int64_t now;
};

static int add_listed(void *arg, const char *key, size_t len,
		      const struct ns_attr *a)
{
	struct build *b = arg;
	struct ns_attr zero = { 0 };
	struct ns_attr at = a ? *a : zero;
	int rc;

	at.checked = b->now;
	rc = ns_add(b->ns, key, len, b->prefix, a ? &at : &zero);
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
	int rc = ns_add(b->ns, key, len, b->prefix, a);

	return rc < 0 ? rc : 0;
}

static void log_ns(const char *how, const struct ns *ns, double secs)
{
	const struct ns_stats *s = ns_stats(ns);
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

/* a fresh tree from the backend, also written to the namespace cache */
static int list_backend(struct nsmgr *nm, struct ns **out)
{
	struct build b = { .prefix = nm->be->prefix, .now = time(NULL) };
	struct timespec t0;
	char when[32];
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	b.ns = ns_create(nm->seed);
	if (!b.ns)
		return -ENOMEM;
	rc = meta_ns_begin(nm->meta, &b.txn);
	if (rc)
		goto out_ns;
	rc = nm->be->ops->list(nm->be, add_listed, &b);
	if (rc) {
		meta_ns_abort(b.txn);
		goto out_ns;
	}
	rc = meta_ns_commit(b.txn);
	if (rc)
		log_warn("could not store the namespace cache: %s", strerror(-rc));
	snprintf(when, sizeof(when), "%" PRId64, b.now);
	meta_put_str(nm->meta, "listed_at", when);
	meta_put_str(nm->meta, "source", nm->cf->source);
	ns_finish(b.ns);
	stat_inc(nm->st, listings);
	log_ns("listed from the backend", b.ns, since(&t0));
	*out = b.ns;
	return 0;
out_ns:
	ns_destroy(b.ns);
	return rc;
}

/* the tree as last listed, from LMDB; -ENOENT if there is none */
static int load_stored(struct nsmgr *nm, struct ns **out, int64_t *listed)
{
	struct build b = { .prefix = nm->be->prefix };
	char src[4096], when[32];
	struct timespec t0;
	long n;

	if (meta_get_str(nm->meta, "source", src, sizeof(src)) ||
	    strcmp(src, nm->cf->source) ||
	    meta_get_str(nm->meta, "listed_at", when, sizeof(when)))
		return -ENOENT;
	*listed = strtoll(when, NULL, 10);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	b.ns = ns_create(nm->seed);
	if (!b.ns)
		return -ENOMEM;
	n = meta_ns_load(nm->meta, add_stored, &b);
	if (n < 0) {
		ns_destroy(b.ns);
		return (int)n;
	}
	ns_finish(b.ns);
	log_ns("loaded from the namespace cache", b.ns, since(&t0));
	*out = b.ns;
	return 0;
}

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
	pthread_rwlock_init(&nm->lock, NULL);
	rc = load_stored(nm, &nm->ns, &listed);
	if (rc == 0 && cf->list_refresh_s &&
	    time(NULL) - listed >= (int64_t)cf->list_refresh_s) {
		log_info("namespace cache is older than %u s: listing again",
			 cf->list_refresh_s);
		ns_destroy(nm->ns);
		nm->ns = NULL;
		rc = -ENOENT;
	}
	if (rc)
		rc = list_backend(nm, &nm->ns);
	if (rc) {
		fprintf(stderr, "fusefs: cannot list %s: %s\n", cf->source,
			strerror(-rc));
		nsmgr_close(nm);
		return rc;
	}
	*out = nm;
	return 0;
}

static int64_t mono_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000LL + t.tv_nsec / 1000000;
}

/* a fresh listing replaces the tree */
static void relist(struct nsmgr *nm)
{
	struct ns *fresh, *old;

	if (list_backend(nm, &fresh)) {
		log_warn("re-listing %s failed: keeping the old namespace",
			 nm->cf->source);
		return;
	}
	pthread_rwlock_wrlock(&nm->lock);
	old = nm->ns;
	nm->ns = fresh;
	pthread_rwlock_unlock(&nm->lock);
	ns_destroy(old);
	nm->hooks.on_swap(nm->hooks.arg);
}

/* the re-listing thread: every list_refresh seconds after the last one */
static int64_t refresh_tick(void *arg)
{
	struct nsmgr *nm = arg;
	int64_t now = mono_ms();

	if (now < nm->refresh_due_ms)	/* the tick at start */
		return nm->refresh_due_ms - now;
	relist(nm);
	nm->refresh_due_ms = mono_ms() + nm->cf->list_refresh_s * 1000LL;
	return BG_PERIOD;
}

int nsmgr_start(struct nsmgr *nm, const struct nsmgr_hooks *h)
{
	nm->hooks = *h;
	if (!nm->cf->list_refresh_s)
		return 0;
	nm->refresh_due_ms = mono_ms() + nm->cf->list_refresh_s * 1000LL;
	return bgthread_start(&nm->refresh, "ns-refresh",
			      nm->cf->list_refresh_s * 1000LL, refresh_tick, nm);
}

void nsmgr_stop(struct nsmgr *nm)
{
	bgthread_stop(nm->refresh);
	nm->refresh = NULL;
}

void nsmgr_close(struct nsmgr *nm)
{
	if (!nm)
		return;
	nsmgr_stop(nm);
	ns_destroy(nm->ns);
	pthread_rwlock_destroy(&nm->lock);
	free(nm);
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

int nsmgr_revalidate(struct nsmgr *nm, const struct ns_node *n,
		     struct ns_attr *out)
{
	struct ns_attr fresh;
	int64_t now = time(NULL);
	int rc;

	ns_attr_get(nm->ns, n, out);
	if (now - out->checked < (int64_t)nm->cf->revalidate_s)
		return 0;
	stat_inc(nm->st, revalidations);
	rc = nm->be->ops->stat(nm->be, n->key, &fresh);
	if (rc == -ENOENT)
		return -ENOENT;
	if (rc) {
		log_warn("re-checking '%s': %s; serving what is known", n->key,
			 strerror(-rc));
		out->checked = now;	/* do not stall every open on it */
		ns_attr_set(nm->ns, n, out);
		return 0;
	}
	fresh.checked = now;
	ns_attr_set(nm->ns, n, &fresh);
	*out = fresh;
	return 0;
}

void nsmgr_force_check(struct nsmgr *nm, uint64_t ino)
{
	const struct ns_node *n;
	struct ns_attr a;

	pthread_rwlock_rdlock(&nm->lock);
	n = ns_get(nm->ns, ino);
	if (n && !n->is_dir) {
		ns_attr_get(nm->ns, n, &a);
		a.checked = 0;
		ns_attr_set(nm->ns, n, &a);
	}
	pthread_rwlock_unlock(&nm->lock);
}

void nsmgr_stale_cb(void *arg, uint64_t ino)
{
	nsmgr_force_check(arg, ino);
}
