/* SPDX-License-Identifier: MIT */
/*
 * ranges.h - byte ranges of files that sample-range lists name.
 *
 * A list line "PATH<TAB>OFFSET<TAB>LENGTH" (lists.h) names the bytes
 * [OFFSET, OFFSET + LENGTH) of a file: one sample of a token file or a
 * record of an indexed dataset.  The lists treat each range as a file of
 * its own, named by a key: the table here gives every distinct (fid,
 * offset, length) one key for the daemon's life, so that the epochs of a
 * loader that reads the same samples in a new order each epoch name them
 * alike, and maps keys back to ranges (the prefetcher) and reads of a
 * file to the ranges they touch (a reader's progress, epochs.h).
 *
 * Keys are 64-bit hashes of the range, in the space of file ids (ns.h:
 * hashes of names, NS_FIRST_INO and up); a key equal to another range's
 * is refused (-EEXIST), one equal to a file's id is not detected (the
 * chance is that of two names hashing alike) and would only mix up what
 * the lists prefetch for the two, never the bytes served.
 *
 * Bounded: at most RANGES_MAX ranges (-ENOSPC past it), about 64 bytes
 * each.  Ranges stay until the table goes (a namespace change leaves
 * stale ones: their reads never come).
 *
 * Thread-safe: one mutex, held for lookups only, never while calling out.
 */
#ifndef FUSEFS_RANGES_H
#define FUSEFS_RANGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RANGES_MAX	(1u << 20)

struct range {
	uint64_t key;
	uint64_t fid;
	uint64_t off, len;	/* len > 0 */
};

struct ranges;

/* ranges_create() - an empty table; 0 (*@out set) or -ENOMEM */
int ranges_create(struct ranges **out);
/* ranges_destroy() - NULL is fine */
void ranges_destroy(struct ranges *r);

/*
 * ranges_intern() - the key of [@off, @off + @len) of file @fid (@len >
 * 0), added if new.  Return 0 (*@key set), -EINVAL (@len 0, or the range
 * wraps), -EEXIST (its key is another range's), -ENOSPC (RANGES_MAX
 * ranges already), -ENOMEM.
 */
int ranges_intern(struct ranges *r, uint64_t fid, uint64_t off, uint64_t len,
		  uint64_t *key);

/* ranges_get() - the range with @key into *@out; false if none */
bool ranges_get(struct ranges *r, uint64_t key, struct range *out);

/*
 * ranges_hit() - the keys of up to @max ranges of file @fid that
 * [@off, @off + @len) overlaps, in offset order; their number (0 at once,
 * without the lock, while the table is empty).
 */
size_t ranges_hit(struct ranges *r, uint64_t fid, uint64_t off, uint64_t len,
		  uint64_t *keys, size_t max);

/* ranges_count() - ranges in the table */
size_t ranges_count(struct ranges *r);

#endif
