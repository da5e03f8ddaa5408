/* SPDX-License-Identifier: MIT */
/*
 * prefetch.h - fetch what the published lists say readers open next.
 *
 * One thread walks the lists' windows in order and starts chunk fetches
 * of files not yet cached through fetch_prefetch() (low priority: demand
 * misses always go first, at most half of max_inflight prefetches).
 * Each missing chunk is first offered to the cache's policy
 * (cache_admits(), chunks in flight counted as taken): with the "auto"
 * policy (Belady over chunks, policy.h) a chunk goes to disk only if the
 * policy would keep it after its read; one it would not keep is staged in
 * memory for its reader instead (fetch_stage(): at most half of
 * --memory-limit, consumed at the file's last close), so that the link
 * stays busy with the coming misses while the reader goes through cached
 * files.  The walk ends when staging is full (or the fetcher at its
 * bound); the thread then waits until the reader advances.  A list's own
 * walk ends at the first chunk of its queued epoch that the policy
 * refuses (a queued epoch is not staged); the other lists' walks go on.
 * Every full round drops staged chunks of files that no reader is still to read
 * (lists_unread_now(): staging from the marks may run past the window a
 * full round looks at) and are not open (fetch_stage_keep()).  A round
 * starts at each list's ready mark (lists_window_ahead(): the files
 * before it were on disk) and looks at a bounded number of files; every
 * 16th round walks the whole window from the readers again and resets
 * the marks (lists_set_ready()).  The marks give each list's lead (files
 * and bytes ready ahead of the reader).
 */
#ifndef FUSEFS_PREFETCH_H
#define FUSEFS_PREFETCH_H

#include "cache.h"
#include "fetch.h"
#include "lists.h"
#include "nsmgr.h"

struct prefetcher;

/* a round looks at this many files of the windows at most */
#define PREFETCH_WINDOW_FILES	4096
/* every PREFETCH_RECHECK_ROUNDS-th round walks the whole window */
#define PREFETCH_RECHECK_ROUNDS	16

int prefetch_create(struct prefetcher **out, struct lists *l,
		    struct nsmgr *nm, struct cache *c, struct fetcher *f);
/*
 * prefetch_set_ranges() - window entries that are keys of @rg are ranges
 * of files (a list's range lines): their missing pages are fetched
 * (fetch_prefetch_range()), never whole chunks, never staged.  Before
 * the first publish; @rg must outlive @p.
 */
struct ranges;
void prefetch_set_ranges(struct prefetcher *p, struct ranges *rg);
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

/* what the rounds did so far: a test seam (tests/unit/test_prefetch.c) */
struct prefetch_counts {
	unsigned rounds;	/* rounds run */
	unsigned full_rounds;	/* of which walked the whole window */
	unsigned long looked;	/* files looked at by all rounds */
};
/* prefetch_counts() - read atomically, any thread; cannot fail */
void prefetch_counts(struct prefetcher *p, struct prefetch_counts *out);

#endif
