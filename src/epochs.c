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

struct epochs {
	struct lists *lists;
	struct prefetcher *pf;
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
	e->lists = l;
	e->pf = pf;
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
	free(e);
}

void epochs_note_open(struct epochs *e, uint64_t fid, bool ready)
{
	if (lists_note_open(e->lists, fid, ready) && e->pf)
		prefetch_kick(e->pf);
}
