/* SPDX-License-Identifier: MIT */
/*
 * prefetch.h - fetch what the published lists say readers open next.
 *
 * One thread walks lists_window() in order and starts chunk fetches of
 * files not yet cached through fetch_prefetch() (low priority: demand
 * misses always go first, at most half of max_inflight prefetches).  The
 * cache's policy decides whether each prefetched chunk may stay: with the
 * "auto" policy (Belady) a file is admitted only if it is needed sooner
 * than whatever it would evict, so the window stops growing when the
 * cache holds nothing read later than the next file; the thread then
 * waits until the reader advances.  It also reports each list's lead
 * (files and bytes ready ahead of the reader).
 */
#ifndef FUSEFS_PREFETCH_H
#define FUSEFS_PREFETCH_H

#include "cache.h"
#include "fetch.h"
#include "lists.h"
#include "nsmgr.h"

struct prefetcher;

int prefetch_create(struct prefetcher **out, struct lists *l,
		    struct nsmgr *nm, struct cache *c, struct fetcher *f);
/*
 * prefetch_stop() - no new prefetches; fetches in flight still call back,
 * so free with prefetch_destroy() only after fetch_destroy() drained them.
 */
void prefetch_stop(struct prefetcher *p);
/* prefetch_destroy() - after fetch_destroy() (or before fetch_create()) */
void prefetch_destroy(struct prefetcher *p);
/* prefetch_published() - a list was published */
void prefetch_published(struct prefetcher *p);
/* prefetch_kick() - something changed (a list, a reader's position) */
void prefetch_kick(struct prefetcher *p);

#endif
