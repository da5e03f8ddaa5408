// SPDX-License-Identifier: MIT
/* prefetch.c - see prefetch.h */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bgthread.h"
#include "log.h"
#include "strsafe.h"
#include "prefetch.h"

#define WINDOW_FILES	4096	/* files looked at per round */
#define IDLE_MS		200

struct prefetcher {
	struct lists *lists;
	struct nsmgr *nm;
	struct cache *c;
	struct fetcher *f;
	pthread_mutex_t lock;	/* guards full and thread; taken before
				 * the bgthread's own lock */
	struct bgthread *thread;	/* NULL once stopped */
	bool full;		/* a prefetched chunk was not admitted */
	uint64_t *fids;		/* the prefetch thread's */
	bool *ready;		/* fids[i] is on disk (for the leads) */
};

static void on_done(void *arg, bool stored)
{
	struct prefetcher *p = arg;

	pthread_mutex_lock(&p->lock);
	if (!stored)
		p->full = true;
	if (p->thread)
		bgthread_wake(p->thread);
	pthread_mutex_unlock(&p->lock);
}

void prefetch_kick(struct prefetcher *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->full = false;	/* the reader moved: room may have appeared */
	if (p->thread)
		bgthread_wake(p->thread);
	pthread_mutex_unlock(&p->lock);
}

void prefetch_published(struct prefetcher *p, uint64_t max_size)
{
	if (!p)
		return;
	/* the streaming window holds a couple of the largest listed files */
	cache_stream_hint(p->c, 2 * max_size);
	prefetch_kick(p);
}

/* the entry of file @fid held busy, or NULL if it is not a file now */
static struct centry *hold(struct prefetcher *p, uint64_t fid, uint64_t *size)
{
	const struct ns_node *n;
	struct centry *ce = NULL;
	struct ns_attr a;
	char *key = NULL;
	struct ns *ns = nsmgr_rdlock(p->nm);

	n = ns_get(ns, fid);
	if (n && !n->is_dir) {
		ns_attr_get(ns, n, &a);
		key = strdup(n->key);
	}
	nsmgr_unlock(p->nm);
	if (key && cache_hold(p->c, fid, key, &a, &ce))
		ce = NULL;
	free(key);
	*size = ce ? a.size : 0;
	return ce;
}

/* one pass over the window */
static void round_once(struct prefetcher *p)
{
	size_t i, n = lists_window(p->lists, 0, p->fids, WINDOW_FILES);
	bool busy = false;

	for (i = 0; i < n && !busy; i++) {
		uint64_t size;
		struct centry *ce = hold(p, p->fids[i], &size);
		struct cache_ident ci;
		uint32_t c, missing;

		p->ready[i] = false;
		if (!ce)
			continue;
		cache_ident(ce, &ci);
		missing = cache_missing(p->c, ce);
		if (!missing) {
			/* ready means on disk, not merely in flight */
			p->ready[i] = cache_is_complete(p->c, ce);
			cache_busy_put(p->c, ce);
			continue;
		}
		pthread_mutex_lock(&p->lock);
		busy = p->full;
		pthread_mutex_unlock(&p->lock);
		/*
		 * Into free space, prefetch in parallel.  Once the cache is
		 * full, one file at a time, and only if the policy would make
		 * room for it: the window ends where it would not keep the
		 * file (Belady: something cached is needed sooner).
		 */
		if (!busy) {
			uint64_t need = (uint64_t)missing * cache_chunk_size(p->c);
			uint64_t flying = (uint64_t)fetch_prefetching(p->f) *
					  cache_chunk_size(p->c);
			uint64_t room = cache_free(p->c);

			if (room < flying + need &&
			    (flying || !cache_admits(p->c, ce, need,
						       ADMIT_PREFETCH))) {
				log_dbg("prefetch: window ends at %s (room %llu, in flight %llu)",
					str_log(ci.key), (unsigned long long)room,
					(unsigned long long)flying);
				pthread_mutex_lock(&p->lock);
				p->full = !flying;
				pthread_mutex_unlock(&p->lock);
				busy = true;
			}
		}
		for (c = 0; c < ci.nchunks && !busy; c++) {
			int rc = fetch_prefetch(p->f, ce, c);

			if (rc == -EBUSY || rc == -ENOMEM)
				busy = true;
		}
		cache_busy_put(p->c, ce);
	}
	/* each list's lead: the ready files at the head of its window */
	lists_set_ready(p->lists, p->fids, p->ready, i);
}

static int64_t prefetch_tick(void *arg)
{
	struct prefetcher *p = arg;

	if (lists_count(p->lists))
		round_once(p);
	return BG_PERIOD;
}

int prefetch_create(struct prefetcher **out, struct lists *l,
		    struct nsmgr *nm, struct cache *c, struct fetcher *f)
{
	struct prefetcher *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	p->fids = calloc(WINDOW_FILES, sizeof(*p->fids));
	p->ready = calloc(WINDOW_FILES, sizeof(*p->ready));
	if (!p->fids || !p->ready) {
		free(p->fids);
		free(p->ready);
		free(p);
		return -ENOMEM;
	}
	p->lists = l;
	p->nm = nm;
	p->c = c;
	p->f = f;
	pthread_mutex_init(&p->lock, NULL);
	fetch_on_prefetch_done(f, on_done, p);
	cache_set_next_use(c, lists_next_use, l);
	rc = bgthread_start(&p->thread, "fusefs-prefetch", IDLE_MS,
			    prefetch_tick, p);
	if (rc) {
		free(p->fids);
		free(p->ready);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void prefetch_stop(struct prefetcher *p)
{
	struct bgthread *t;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	t = p->thread;
	p->thread = NULL;	/* late callbacks wake nothing */
	pthread_mutex_unlock(&p->lock);
	bgthread_stop(t);
}

void prefetch_destroy(struct prefetcher *p)
{
	if (!p)
		return;
	prefetch_stop(p);
	/* the fetcher, drained and freed before, holds no callback to us */
	free(p->fids);
	free(p->ready);
	free(p);
}
