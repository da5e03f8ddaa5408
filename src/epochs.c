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

void epochs_note_read(struct epochs *e, const struct epochs_read *r)
{
	if (r->n && lists_note_reads(e->lists, r->keys, r->n, r->ready) &&
	    e->pf)
		prefetch_kick(e->pf);
}
