/* SPDX-License-Identifier: MIT */
/*
 * verifier.h - the background verifier: after a restart every chunk the
 * index names is UNVERIFIED (cache.h) and may not be served before its
 * XXH3 was checked.  One thread reads those chunks with io_uring (up to
 * --verify-depth reads in flight; synchronous preads where io_uring is
 * unavailable), hashes them with no lock held and settles each through
 * cache_verify_begin()/cache_verify_end(), so that readers find chunks
 * PRESENT instead of reading and hashing 4 MiB on a FUSE worker.
 *
 * Order, most needed first:
 *   1. files an open waits for (verifier_wait_file(): passthrough opens);
 *   2. files of more than one chunk opened on the daemon path
 *      (verifier_note_open(); the reader of a one-chunk file checks it
 *      itself at its first read);
 *   3. the next files of the active epoch lists (lists_window());
 *   4. the other files of the directories where opens waited (level 1),
 *      the most recent directory first: what readers open next, where
 *      the hottest files may be another dataset's, read before the
 *      restart;
 *   5. every other file with unverified chunks, hottest first.
 * Levels 3 to 5 wait while the daemon path is busy (passthrough not in
 * use and a file opened within the last second): there the verifier's
 * O_DIRECT reads of files nobody opened would only double the readers'
 * own reads and hashing.
 * A chunk a reader is verifying itself (cache_verify_chunk()) is skipped:
 * one read per chunk.  Complete files are read through the page cache
 * once passthrough is in use (the kernel reads them next, from the same
 * pages), everything else with O_DIRECT where the cache supports it.
 *
 * The thread is a bgthread; it idles once nothing is unverified (no chunk
 * becomes UNVERIFIED while the daemon runs).  Locks: its own queue lock, a
 * leaf; it calls the cache and lists_window() with no lock held, and
 * holds nsmgr's read lock only to copy a directory's entries.
 */
#ifndef FUSEFS_VERIFIER_H
#define FUSEFS_VERIFIER_H

#include <stdbool.h>

#include "cache.h"
#include "stats.h"

struct verifier;
struct fetcher;
struct lists;
struct nsmgr;

/*
 * verifier_start() - start verifying @c's UNVERIFIED chunks with @depth
 * reads in flight (1-64; 0: no thread, chunks are verified at first use).
 * @l (may be NULL) gives the epoch lists' next files, @nm (may be NULL)
 * the directory of a waited file and its other files; @f (may be NULL)
 * takes the verified chunks of files open on the daemon path into memory
 * (fetch_keep_verified()), so that their readers do not read them from
 * disk a second time.  *@out is NULL for depth 0.  Return: 0 or -errno.
 */
int verifier_start(struct verifier **out, struct cache *c, struct fetcher *f,
		   struct lists *l, struct nsmgr *nm, unsigned depth,
		   struct stats *st);
/* verifier_stop() - finish the reads in flight, stop, free; NULL is fine.
 * Before cache_close(). */
void verifier_stop(struct verifier *v);
/*
 * verifier_wait_file() - verify @ce (open: the caller holds a reference)
 * before anything else, and wait until a read of each of its UNVERIFIED
 * chunks has been started (by the verifier, or a reader before it).  The
 * caller then checks them with cache_verify_chunk(), which waits for
 * those reads (single flight).  On a FUSE worker (local disk only).  NULL
 * @v: returns at once.  Return: 0, or -ESHUTDOWN if nothing was queued
 * (stopping, out of memory).
 */
int verifier_wait_file(struct verifier *v, struct centry *ce);
/* verifier_note_open() - @ce was opened on the daemon path: verify it
 * (if it has more than one chunk) before files nobody opened, and hold
 * those back for a second (no wait) */
void verifier_note_open(struct verifier *v, struct centry *ce);
/* verifier_set_passthrough() - complete files are read by the kernel:
 * verify them through the page cache it will read from */
void verifier_set_passthrough(struct verifier *v, bool on);

#endif
