// SPDX-License-Identifier: MIT
/*
 * cache_pages.c - the pages (4 KiB) of chunks that random reads fetched:
 * one bitmap per such chunk (struct centry's pages[]), and of them those
 * spent (spent[]: read this epoch, the first to go), with the cache's
 * list of entries that have spent pages; see cache_priv.h.  Bookkeeping
 * only, under the cache lock: the callers write, punch and account.
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

int cache_pages_maps_locked(struct centry *ce)
{
	if (ce->pages)
		return 0;
	ce->pages = calloc(ce->nchunks, sizeof(*ce->pages));
	ce->spent = calloc(ce->nchunks, sizeof(*ce->spent));
	ce->pio = calloc(ce->nchunks, sizeof(*ce->pio));
	if (ce->pages && ce->spent && ce->pio)
		return 0;
	free(ce->pages);
	free(ce->spent);
	free(ce->pio);
	ce->pages = ce->spent = NULL;
	ce->pio = NULL;
	return -ENOMEM;
}

static void spent_link_locked(struct cache *c, struct centry *ce)
{
	ce->spent_prev = NULL;
	ce->spent_next = c->spent_head;
	if (c->spent_head)
		c->spent_head->spent_prev = ce;
	c->spent_head = ce;
}

void cache_pages_unlink_locked(struct cache *c, struct centry *ce)
{
	if (!ce->spent_bytes)
		return;
	if (ce->spent_prev)
		ce->spent_prev->spent_next = ce->spent_next;
	else
		c->spent_head = ce->spent_next;
	if (ce->spent_next)
		ce->spent_next->spent_prev = ce->spent_prev;
	ce->spent_prev = ce->spent_next = NULL;
	c->spent_bytes -= ce->spent_bytes;
	ce->spent_bytes = 0;
}

/* @bytes more (@add) or fewer spent in @ce, its place on the list kept */
static void spent_count_locked(struct cache *c, struct centry *ce,
			       uint64_t bytes, bool add)
{
	if (!bytes)
		return;
	if (add) {
		if (!ce->spent_bytes)
			spent_link_locked(c, ce);
		ce->spent_bytes += bytes;
		c->spent_bytes += bytes;
		return;
	}
	if (bytes >= ce->spent_bytes) {
		cache_pages_unlink_locked(c, ce);
		return;
	}
	ce->spent_bytes -= bytes;
	c->spent_bytes -= bytes;
}

/* clear the spent bits of pages [@p0, @p1) of chunk @n: their bytes */
static uint64_t unspend_bits(struct centry *ce, uint32_t n, uint32_t p0,
			     uint32_t p1)
{
	uint64_t *sp = ce->spent ? ce->spent[n] : NULL;
	uint64_t bytes = 0;
	uint32_t p;

	for (p = p0; sp && p < p1; p++)
		if (sp[p / 64] >> (p % 64) & 1) {
			sp[p / 64] &= ~(1ULL << (p % 64));
			bytes += BLK;
		}
	return bytes;
}

int cache_pages_mark_locked(struct cache *c, struct centry *ce,
			    uint32_t n, uint32_t lo, uint32_t hi,
			    uint64_t *added)
{
	uint32_t p, p0, p1;
	uint64_t *m;

	*added = 0;
	if (cache_pages_maps_locked(ce))
		return -ENOMEM;
	m = ce->pages[n];
	if (!m) {
		m = calloc(map_words(c), sizeof(*m));
		if (!m)
			return -ENOMEM;
		ce->pages[n] = m;
	}
	page_range(lo, hi, &p0, &p1);
	/* stored again for a reader to come: not spent */
	spent_count_locked(c, ce, unspend_bits(ce, n, p0, p1), false);
	for (p = p0; p < p1; p++) {
		if (m[p / 64] >> (p % 64) & 1)
			continue;
		m[p / 64] |= 1ULL << (p % 64);
		*added += BLK;
	}
	return 0;
}

uint64_t cache_pages_drop_locked(struct cache *c, struct centry *ce,
				 uint32_t n)
{
	uint64_t bytes = cache_pages_bytes_locked(c, ce, n);

	if (ce->pages) {
		spent_count_locked(c, ce, unspend_bits(ce, n, 0,
			(uint32_t)(map_words(c) * 64)), false);
		free(ce->pages[n]);
		ce->pages[n] = NULL;
		free(ce->spent[n]);
		ce->spent[n] = NULL;
	}
	return bytes;
}

uint64_t cache_pages_spend_locked(struct cache *c, struct centry *ce,
				  uint32_t n, uint32_t lo, uint32_t hi)
{
	const uint64_t *m = ce->pages ? ce->pages[n] : NULL;
	uint64_t *sp, bytes = 0;
	uint32_t p, p0, p1;

	if (!m)
		return 0;
	sp = ce->spent[n];
	if (!sp) {
		sp = calloc(map_words(c), sizeof(*sp));
		if (!sp)
			return 0;	/* not spent: kept a little longer */
		ce->spent[n] = sp;
	}
	page_range(lo, hi, &p0, &p1);
	for (p = p0; p < p1; p++)
		if ((m[p / 64] & ~sp[p / 64]) >> (p % 64) & 1) {
			sp[p / 64] |= 1ULL << (p % 64);
			bytes += BLK;
		}
	spent_count_locked(c, ce, bytes, true);
	return bytes;
}

void cache_pages_unspend_locked(struct cache *c, struct centry *ce,
				uint32_t n, uint32_t lo, uint32_t hi)
{
	uint32_t p0, p1;

	page_range(lo, hi, &p0, &p1);
	spent_count_locked(c, ce, unspend_bits(ce, n, p0, p1), false);
}

bool cache_pages_spent_run_locked(const struct cache *c,
				  const struct centry *ce, uint32_t n,
				  uint32_t from, uint32_t *lo, uint32_t *hi)
{
	const uint64_t *sp = ce->spent ? ce->spent[n] : NULL;
	uint32_t p = from / BLK, np = map_words(c) * 64, q;

	while (sp && p < np && !(sp[p / 64] >> (p % 64) & 1))
		p++;
	if (!sp || p >= np)
		return false;
	for (q = p; q < np && sp[q / 64] >> (q % 64) & 1; q++)
		;
	*lo = p * (uint32_t)BLK;
	*hi = q * (uint32_t)BLK;
	return true;
}

uint64_t cache_pages_forget_locked(struct cache *c, struct centry *ce,
				   uint32_t n, uint32_t lo, uint32_t hi)
{
	uint64_t *m = ce->pages ? ce->pages[n] : NULL, bytes = 0;
	uint32_t p, p0, p1;

	if (!m)
		return 0;
	page_range(lo, hi, &p0, &p1);
	spent_count_locked(c, ce, unspend_bits(ce, n, p0, p1), false);
	for (p = p0; p < p1; p++)
		if (m[p / 64] >> (p % 64) & 1) {
			m[p / 64] &= ~(1ULL << (p % 64));
			bytes += BLK;
		}
	return bytes;
}

void cache_pages_free(struct centry *ce)
{
	uint32_t n;

	for (n = 0; ce->pages && n < ce->nchunks; n++) {
		free(ce->pages[n]);
		free(ce->spent[n]);
	}
	free(ce->pages);
	free(ce->spent);
	free(ce->pio);
	ce->pages = ce->spent = NULL;
	ce->pio = NULL;
}
