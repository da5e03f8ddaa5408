/* SPDX-License-Identifier: MIT */
/*
 * memchunk.h - a bounded set of chunks held in memory, keyed by (file,
 * version generation, chunk number): chunks readers just waited for,
 * read-ahead the cache would not keep (so it is not fetched twice), and
 * chunks just verified.  A key names immutable bytes, so an entry is
 * right as long as it exists; the least recently used goes when the set
 * is full.  Not locked: the owner (fetch.c, under its lock) serializes.
 */
#ifndef FUSEFS_MEMCHUNK_H
#define FUSEFS_MEMCHUNK_H

#include <stdbool.h>
#include <stdint.h>

#include "chunkbuf.h"

struct memchunk_slot {
	uint64_t fid, gen;
	uint32_t n;
	uint64_t stamp;			/* last use; 0: empty */
	unsigned holds;			/* memchunks_hold()s: never replaced
					 * or dropped while > 0 */
	struct chunkbuf *cb;
};

struct memchunks {
	struct memchunk_slot *slot;
	unsigned max;
	uint64_t clock;
};

/* memchunks_init() - room for @max chunks; 0 or -ENOMEM */
int memchunks_init(struct memchunks *m, unsigned max);
void memchunks_release(struct memchunks *m);
/* memchunks_get() - the chunk or NULL; no reference is taken */
struct chunkbuf *memchunks_get(struct memchunks *m, uint64_t fid,
			       uint64_t gen, uint32_t n);
/* memchunks_has() - is the chunk held (a look: its recency is unchanged) */
bool memchunks_has(const struct memchunks *m, uint64_t fid, uint64_t gen,
		   uint32_t n);
/* memchunks_put() - keep @cb (a reference is taken), replacing the same
 * key or the least recently used chunk not held (none: @cb is not kept) */
void memchunks_put(struct memchunks *m, uint64_t fid, uint64_t gen,
		   uint32_t n, struct chunkbuf *cb);
/*
 * memchunks_reclaim() - forget the least recently used chunk that nobody
 * else holds (its reference is the set's only one), so that its memory
 * goes back (to the budget, membudget.h).  Return: false if none.
 */
bool memchunks_reclaim(struct memchunks *m);
/* memchunks_drop() - forget every chunk of @fid at @gen but those held */
void memchunks_drop(struct memchunks *m, uint64_t fid, uint64_t gen);
/*
 * memchunks_hold() - the chunk (no reference taken) or NULL; until
 * memchunks_unhold() it stays in the set, found by every look-up: while
 * the owner writes it to the cache, the chunk is claimed there with no
 * fetch in flight, and a reader must find its bytes here.
 */
struct chunkbuf *memchunks_hold(struct memchunks *m, uint64_t fid,
				uint64_t gen, uint32_t n);
void memchunks_unhold(struct memchunks *m, uint64_t fid, uint64_t gen,
		      uint32_t n);

#endif
