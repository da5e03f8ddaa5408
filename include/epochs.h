/* SPDX-License-Identifier: MIT */
/*
 * epochs.h - the owner of epoch lists on the data path.
 *
 * The lists (lists.h) say which files readers will open next; three
 * parts of the daemon act on that, and this module wires them, once, at
 * start (main.c):
 *   - the policy's future (cache_set_future()): next uses of cached
 *     files, what the heat and auto policies evict by;
 *   - the fetcher's `wanted` hook (fetch_set_wanted()): is a file still
 *     to be read, before a chunk of it is kept in memory for a reader to
 *     come;
 *   - the prefetcher (prefetch.h), kicked when a reader's open moves a
 *     list;
 *   - the table of the ranges that range lines name (ranges.h), given to
 *     the lists (their keys) and to the prefetcher (what to fetch).
 * Data-path opens come here from fs.c (epochs_note_open()), and reads of
 * files that have listed ranges (epochs_read_ranges(),
 * epochs_note_read()); the control files publish and read lists through
 * ctl.c, which kicks the prefetcher itself.
 *
 * Locks: none of its own.  The future and the wanted hook run under the
 * cache and fetch locks and take only the lists lock.
 */
#ifndef FUSEFS_EPOCHS_H
#define FUSEFS_EPOCHS_H

#include <stdbool.h>
#include <stdint.h>

struct cache;
struct fetcher;
struct lists;
struct prefetcher;

struct epochs;

/*
 * epochs_create() - own @l for the data path: install it as @c's future
 * and @f's wanted hook; opens moving a list kick @pf (may be NULL).  All
 * must outlive the result.  Return 0 (*@out set) or -ENOMEM.
 */
int epochs_create(struct epochs **out, struct lists *l, struct cache *c,
		  struct fetcher *f, struct prefetcher *pf);
/* epochs_destroy() - NULL is fine; the hooks stay (the others go first) */
void epochs_destroy(struct epochs *e);

/*
 * epochs_note_open() - a reader opened file @fid (@ready: fully cached):
 * the lists that expected it move on, and the prefetcher is woken if any
 * did (a wake-up per open would cost a context switch per file).
 * Called before the open is answered, so the open is counted by the time
 * the reader can ask for its list's status.
 */
void epochs_note_open(struct epochs *e, uint64_t fid, bool ready);

/* the listed ranges one READ overlaps (kernel read-around: 128 KiB of
 * 8 KiB samples is 16) */
#define EPOCHS_READ_RANGES	32
struct epochs_read {
	uint64_t keys[EPOCHS_READ_RANGES];
	size_t n;
	bool ready;		/* its bytes were on disk before it */
};

/*
 * epochs_read_ranges() - the listed ranges that a READ of [@off, @off +
 * @len) of @ce overlaps, into @r.  Nothing (one atomic load) while no
 * range was ever listed.
 * Return: does the read overlap a listed range?
 */
struct centry;
bool epochs_read_ranges(struct epochs *e, struct centry *ce, uint64_t off,
			size_t len, struct epochs_read *r);
/*
 * epochs_note_read() - count the ranges of @r as read (their "open",
 * lists_note_reads()) and wake the prefetcher if a list moved.  Called
 * before the read is answered, so a reader that asks for its list's
 * status right after sees it, and with its file held in use (a busy
 * reference) until then: the uses it moves on (a range read is no longer
 * the file's next use) must not let the policy evict the bytes the read
 * is about to be served from.
 */
void epochs_note_read(struct epochs *e, const struct epochs_read *r);

#endif
