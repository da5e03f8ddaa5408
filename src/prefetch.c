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
/*
 * A round starts at each list's ready mark (lists_window_ahead(): the
 * files before it were found on disk) and looks at AHEAD_FILES files at
 * most; so a round after an open costs the files past the mark, not a
 * name-space and cache lookup per file of the whole window.  Every
 * RECHECK_ROUNDS-th round walks the whole window from the readers (a
 * file evicted behind a mark is fetched again).
 */
#define AHEAD_FILES	256
#define RECHECK_ROUNDS	16

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
	unsigned rounds;	/* every RECHECK_ROUNDS-th looks at all */
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

void prefetch_published(struct prefetcher *p)
{
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

/*
 * Start fetches of @ce's missing chunks, in file order, while the policy
 * would keep them: into free space, or in place of chunks needed later
 * than their use after the coming read (chunk-level Belady, policy.h).
 * Chunks in flight count as taken, so up to fetch's prefetch bound stay
 * in flight ahead of the reader.  A chunk the policy would not keep is
 * left to its reader (demand fetch and read-ahead).
 * Return: true if the window ends here (nothing more worth fetching, or
 * the fetcher is at its bound).
 */
static bool fetch_missing(struct prefetcher *p, struct centry *ce,
			  const struct cache_ident *ci)
{
	uint32_t c;

	for (c = 0; c < ci->nchunks; c++) {
		uint64_t flying, need;
		int rc;

		if (cache_chunk_state(p->c, ce, c) != CH_ABSENT)
			continue;
		flying = fetch_prefetching_bytes(p->f);
		need = flying + cache_chunk_len(p->c, ce, c);
		if (cache_free(p->c) < need &&
		    !cache_admits(p->c, ce, need, ADMIT_PREFETCH)) {
			log_dbg("prefetch: window ends at chunk %u of %s (in flight %llu)",
				c, str_log(ci->key), (unsigned long long)flying);
			pthread_mutex_lock(&p->lock);
			p->full = !flying;
			pthread_mutex_unlock(&p->lock);
			return true;
		}
		rc = fetch_prefetch(p->f, ce, c);
		if (rc == -EBUSY || rc == -ENOMEM)
			return true;
	}
	return false;
}

/* one pass over the window */
static void round_once(struct prefetcher *p)
{
	bool full = !(p->rounds++ % RECHECK_ROUNDS), busy = false;
	size_t i, n = full ? lists_window(p->lists, 0, p->fids, WINDOW_FILES) :
		lists_window_ahead(p->lists, p->fids, AHEAD_FILES);

	if (full) {
		/* room may have appeared without a reader moving: victims that
		 * were busy (verified, read) are free now; try again */
		pthread_mutex_lock(&p->lock);
		p->full = false;
		pthread_mutex_unlock(&p->lock);
	}

	for (i = 0; i < n && !busy; i++) {
		uint64_t size;
		struct centry *ce;
		struct cache_ident ci;

		p->ready[i] = false;
		ce = hold(p, p->fids[i], &size);
		if (!ce)
			continue;
		cache_ident(ce, &ci);
		if (!cache_missing(p->c, ce)) {
			/* ready means on disk, not merely in flight */
			p->ready[i] = cache_is_complete(p->c, ce);
			cache_busy_put(p->c, ce);
			continue;
		}
		pthread_mutex_lock(&p->lock);
		busy = p->full;
		pthread_mutex_unlock(&p->lock);
		if (!busy)
			busy = fetch_missing(p, ce, &ci);
		cache_busy_put(p->c, ce);
	}
	/* each list's lead: the ready files at the head of its window */
	if (full)
		lists_set_ready(p->lists, p->fids, p->ready, i);
	else
		lists_extend_ready(p->lists, p->fids, p->ready, i);
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
	cache_set_next_use(c, lists_next_use_bytes, l);
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
