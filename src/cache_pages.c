// SPDX-License-Identifier: MIT
/*
 * cache_pages.c - the pages (4 KiB) of chunks that random reads fetched:
 * one bitmap per such chunk (struct centry's pages[]), see cache_priv.h.
 * Bookkeeping only, under the cache lock: the callers write, punch and
 * account.
 */
#include <errno.h>
#include <stdlib.h>

#include "cache_priv.h"

static uint32_t map_words(const struct cache *c)
{
	return (c->chunk_size / BLK + 63) / 64;
}

/* the pages [@lo, @hi) (bytes in the chunk, 4 KiB aligned @lo) as bit
 * numbers [*@p0, *@p1) */
static void page_range(uint32_t lo, uint32_t hi, uint32_t *p0, uint32_t *p1)
{
	*p0 = lo / BLK;
	*p1 = (uint32_t)((hi + BLK - 1) / BLK);
}

bool cache_pages_cover_locked(const struct centry *ce, uint32_t n,
			      uint32_t lo, uint32_t hi)
{
	const uint64_t *m = ce->pages ? ce->pages[n] : NULL;
	uint32_t p, p0, p1;

	if (!m)
		return false;
	page_range(lo, hi, &p0, &p1);
	for (p = p0; p < p1; p++)
		if (!(m[p / 64] >> (p % 64) & 1))
			return false;
	return true;
}

uint64_t cache_pages_bytes_locked(const struct cache *c,
				  const struct centry *ce, uint32_t n)
{
	const uint64_t *m = ce->pages ? ce->pages[n] : NULL;
	uint64_t pages = 0;
	uint32_t w;

	for (w = 0; m && w < map_words(c); w++)
		pages += (uint64_t)__builtin_popcountll(m[w]);
	return pages * BLK;
}

int cache_pages_mark_locked(const struct cache *c, struct centry *ce,
			    uint32_t n, uint32_t lo, uint32_t hi,
			    uint64_t *added)
{
	uint32_t p, p0, p1;
	uint64_t *m;

	*added = 0;
	if (!ce->pages) {
		ce->pages = calloc(ce->nchunks, sizeof(*ce->pages));
		if (!ce->pages)
			return -ENOMEM;
	}
	m = ce->pages[n];
	if (!m) {
		m = calloc(map_words(c), sizeof(*m));
		if (!m)
			return -ENOMEM;
		ce->pages[n] = m;
	}
	page_range(lo, hi, &p0, &p1);
	for (p = p0; p < p1; p++) {
		if (m[p / 64] >> (p % 64) & 1)
			continue;
		m[p / 64] |= 1ULL << (p % 64);
		*added += BLK;
	}
	return 0;
}

uint64_t cache_pages_drop_locked(const struct cache *c, struct centry *ce,
				 uint32_t n)
{
	uint64_t bytes = cache_pages_bytes_locked(c, ce, n);

	if (ce->pages) {
		free(ce->pages[n]);
		ce->pages[n] = NULL;
	}
	return bytes;
}

void cache_pages_free(struct centry *ce)
{
	uint32_t n;

	for (n = 0; ce->pages && n < ce->nchunks; n++)
		free(ce->pages[n]);
	free(ce->pages);
	ce->pages = NULL;
}
