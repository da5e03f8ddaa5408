// SPDX-License-Identifier: MIT
/*
 * The owner of epoch lists on the data path: epochs.h.
 */
#include <errno.h>
#include <stdlib.h>

#include "cache.h"
#include "epochs.h"
#include "fetch.h"
#include "lists.h"
#include "prefetch.h"
#include "ranges.h"

struct epochs {
	struct lists *lists;
	struct cache *c;
	struct prefetcher *pf;
	struct ranges *ranges;
};

/* the fetcher's wanted hook: still to be read (within @within bytes of
 * reading, UINT64_MAX: at all)?  Under the fetch lock. */
static bool wanted(void *arg, uint64_t fid, uint64_t within)
{
	return lists_unread_now(arg, fid) &&
	       (within == UINT64_MAX ||
		lists_next_use_bytes(arg, fid, NULL) < within);
}

int epochs_create(struct epochs **out, struct lists *l, struct cache *c,
		  struct fetcher *f, struct prefetcher *pf)
{
	struct epochs *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	if (ranges_create(&e->ranges)) {
		free(e);
		return -ENOMEM;
	}
	e->lists = l;
	e->c = c;
	e->pf = pf;
	lists_set_ranges(l, e->ranges);
	if (pf)
		prefetch_set_ranges(pf, e->ranges);
	fetch_set_wanted(f, wanted, l);
	cache_set_future(c, &(struct policy_future){
		.one = lists_next_use_bytes, .many = lists_next_use_many,
		.known = lists_known, .sync = lists_sync,
		.where = lists_where, .reads = lists_reads, .arg = l });
	*out = e;
	return 0;
}

void epochs_destroy(struct epochs *e)
{
	if (!e)
		return;
	lists_set_ranges(e->lists, NULL);
	ranges_destroy(e->ranges);
	free(e);
}

void epochs_note_open(struct epochs *e, uint64_t fid, bool ready)
{
	if (lists_note_open(e->lists, fid, ready) && e->pf)
		prefetch_kick(e->pf);
}

bool epochs_read_ranges(struct epochs *e, struct centry *ce, uint64_t off,
			size_t len, struct epochs_read *r)
{
	struct cache_ident ci;

	r->n = 0;
	if (!ranges_count(e->ranges))
		return false;
	cache_ident(ce, &ci);
	r->n = ranges_hit(e->ranges, ci.fid, off, len, r->keys,
			  EPOCHS_READ_RANGES);
	r->ready = r->n && cache_range_state(e->c, ce, off, len) == CH_PRESENT;
	return r->n > 0;
}

/* ranges of a page that one range may share with its neighbours */
#define PAGE_RANGES	8

/* is page @pg of file @fid part of a listed range a list still expects
 * (more ranges in it than we look at: taken to be) */
static bool page_wanted(struct epochs *e, uint64_t fid, uint64_t pg)
{
	uint64_t keys[PAGE_RANGES];
	bool unread[PAGE_RANGES];
	size_t n = ranges_hit(e->ranges, fid, pg, 4096, keys, PAGE_RANGES), k;

	if (n == PAGE_RANGES)
		return true;
	lists_unread_many(e->lists, keys, n, unread);
	for (k = 0; k < n; k++)
		if (unread[k])
			return true;
	return false;
}

/* the ranges of @r no list expects any more: their pages are spent,
 * but for a page shared with a range still to be read */
static void spend(struct epochs *e, struct centry *ce,
		  const struct epochs_read *r)
{
	bool unread[EPOCHS_READ_RANGES];
	struct range g;
	size_t k;

	lists_unread_many(e->lists, r->keys, r->n, unread);
	for (k = 0; k < r->n; k++) {
		uint64_t first, last;

		if (unread[k] || !ranges_get(e->ranges, r->keys[k], &g))
			continue;
		first = g.off & ~4095ULL;
		last = (g.off + g.len - 1) & ~4095ULL;
		cache_spend_range(e->c, ce, g.off, g.len,
				  page_wanted(e, g.fid, first),
				  last != first && page_wanted(e, g.fid, last));
	}
}

void epochs_note_read(struct epochs *e, struct centry *ce,
		      const struct epochs_read *r)
{
	if (!r->n)
		return;
	if (lists_note_reads(e->lists, r->keys, r->n, r->ready) && e->pf)
		prefetch_kick(e->pf);
	spend(e, ce, r);
}
