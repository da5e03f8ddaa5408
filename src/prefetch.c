// SPDX-License-Identifier: MIT
/* prefetch.c - see prefetch.h */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "prefetch.h"

#define WINDOW_FILES	4096	/* files looked at per round */
#define IDLE_MS		200

struct prefetcher {
	struct lists *lists;
	struct nsmgr *nm;
	struct cache *c;
	struct fetcher *f;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop, kicked, stopped;
	bool full;		/* a prefetched chunk was not admitted */
	uint64_t *fids;
};

static void on_done(void *arg, bool stored)
{
	struct prefetcher *p = arg;

	pthread_mutex_lock(&p->lock);
	if (!stored)
		p->full = true;
	p->kicked = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void prefetch_kick(struct prefetcher *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->kicked = true;
	p->full = false;	/* the reader moved: room may have appeared */
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
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
	if (key)
		ce = cache_hold(p->c, fid, key, &a);
	free(key);
	*size = ce ? a.size : 0;
	return ce;
}

/* one pass over the window; returns true if it should run again now */
static bool round_once(struct prefetcher *p)
{
	size_t i, n = lists_window(p->lists, 0, p->fids, WINDOW_FILES);
	uint64_t lead_files = 0, lead_bytes = 0;
	bool leading = true, busy = false;

	for (i = 0; i < n && !busy; i++) {
		uint64_t size;
		struct centry *ce = hold(p, p->fids[i], &size);
		uint32_t c, missing;

		if (!ce)
			continue;
		cache_lock(p->c);
		missing = cache_missing_locked(ce);
		cache_unlock(p->c);
		if (!missing) {
			if (leading) {
				lead_files++;
				lead_bytes += size;
			}
			cache_busy_put(p->c, ce);
			continue;
		}
		leading = false;
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
			    (flying || !cache_admits(p->c, ce, need, true))) {
				log_dbg("prefetch: window ends at %s (room %llu, in flight %llu)",
					ce->key, (unsigned long long)room,
					(unsigned long long)flying);
				pthread_mutex_lock(&p->lock);
				p->full = !flying;
				pthread_mutex_unlock(&p->lock);
				busy = true;
			}
		}
		for (c = 0; c < ce->nchunks && !busy; c++) {
			int rc = fetch_prefetch(p->f, ce, c);

			if (rc == -EBUSY || rc == -ENOMEM)
				busy = true;
		}
		cache_busy_put(p->c, ce);
	}
	if (n)
		lists_set_lead(p->lists, p->fids[0], lead_files, lead_bytes);
	return false;
}

static void *prefetch_main(void *arg)
{
	struct prefetcher *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec ts;

		if (!p->kicked) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += IDLE_MS * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_cond_timedwait(&p->cond, &p->lock, &ts);
		}
		p->kicked = false;
		if (p->stop)
			break;
		pthread_mutex_unlock(&p->lock);
		if (lists_count(p->lists))
			round_once(p);
		pthread_mutex_lock(&p->lock);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

int prefetch_create(struct prefetcher **out, struct lists *l,
		    struct nsmgr *nm, struct cache *c, struct fetcher *f)
{
	struct prefetcher *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	p->fids = calloc(WINDOW_FILES, sizeof(*p->fids));
	if (!p->fids) {
		free(p);
		return -ENOMEM;
	}
	p->lists = l;
	p->nm = nm;
	p->c = c;
	p->f = f;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->cond, NULL);
	fetch_on_prefetch_done(f, on_done, p);
	cache_set_next_use(c, lists_next_use, l);
	rc = -pthread_create(&p->thread, NULL, prefetch_main, p);
	if (rc) {
		free(p->fids);
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void prefetch_stop(struct prefetcher *p)
{
	if (!p || p->stopped)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	p->stopped = true;
}

void prefetch_destroy(struct prefetcher *p)
{
	if (!p)
		return;
	prefetch_stop(p);
	/* the fetcher, drained and freed before, holds no callback to us */
	free(p->fids);
	free(p);
}
