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
 * files that have listed ranges (epochs_note_read()); the control
 * files publish and read lists through ctl.c, which kicks the prefetcher
 * itself.
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

/*
 * epochs_note_read() - a reader read [@off, @off + @len) of @ce on the
 * daemon path: the listed ranges it overlaps count as read (their
 * "open", lists_note_reads(); ready if the bytes were on disk), and the
 * prefetcher is woken if a list moved.  Nothing (one atomic load) while
 * no range was ever listed.  Called before the read is answered.
 * Return: did the read overlap a listed range?
 */
struct centry;
bool epochs_note_read(struct epochs *e, struct centry *ce, uint64_t off,
		      size_t len);

#endif
