/* SPDX-License-Identifier: MIT */
/*
 * fetch.h - the read path: cache hits, misses, single flight, read-ahead.
 *
 * fetch_read() answers a read of an open file.  The fetcher keeps its
 * own state (the chunks in flight and their waiters, a bounded set of
 * chunks in memory, the sequential state of readers without their own)
 * under the fetch lock, and changes a chunk's state only through the
 * cache's claim / store / abandon calls (cache.h).  A hit is served inline
 * on the caller's thread.  A miss never blocks the caller: the request
 * is parked on the chunks it needs, each missing chunk is fetched once
 * however many readers wait for it (single flight), and the completion
 * thread answers every parked request from the fetched bytes in memory,
 * then writes the chunk to the cache.  A reader that advances chunk by
 * chunk gets a window of chunks fetched in parallel, doubling with
 * each chunk it moves on to, up to `readahead` (reads within a chunk
 * open none: a record's header and then its body is no stream), as far as
 * max_inflight and the link's bound allow (linkrate.h: the bytes of all
 * reads in flight within what the backend delivers in --ahead-time).
 * A read that is no stream fetches only the 4 KiB pages it needs
 * (--random-reads pages).  Streams are followed per open file handle
 * (struct fetch_stream, given by the caller), or per file.
 *
 * Failed backend reads are retried `retries` times with exponential
 * backoff (100 ms, 200 ms, ... capped at 2 s), then answered with EIO.
 * A changed object (-ESTALE) is never retried and never mixed in.
 *
 * Memory (membudget.h): every chunk buffer is charged before it is made.
 * Read-ahead and prefetch that do not fit are skipped; a demand read
 * that does not fit (after chunks kept in memory that nobody holds are
 * dropped) is queued without a buffer, its readers parked on it as on
 * any read in flight, and sent by a completion thread when bytes come
 * back: never an error, never a blocked FUSE worker.  If nothing in
 * flight would give bytes back, the first queued read goes one chunk
 * past the limit (so waiting always ends); verifying a chunk from an
 * earlier run may do the same, one at a time.
 */
#ifndef FUSEFS_FETCH_H
#define FUSEFS_FETCH_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "cache.h"
#include "conf.h"
#include "stats.h"

/* a piece of a reply: memory (mem != NULL) or a range of file @fd */
struct fetch_piece {
	const char *mem;
	int fd;
	uint64_t off;
	size_t len;
};

/*
 * The sequential state of one reader: a file handle's, kept by its owner
 * (zeroed at open) and changed only by fetch_read_as() under the fetch
 * lock.  Private to fetch.c but for its size.
 */
struct fetch_stream {
	uint64_t fid, gen;
	uint32_t next;			/* chunk a sequential reader reads next */
	uint32_t streak;		/* chunks it moved on one by one */
	uint64_t end;			/* the furthest byte a read ended at */
	uint64_t run;			/* bytes read back to back up to end */
	bool seq;			/* a stream: chunks fetched whole */
	/*
	 * Its reads met ranges that lists name (samples of a big file read
	 * at random offsets, ranges.h): set by the owner (any thread) once
	 * one does, never cleared.  Such a reader's first reads near the
	 * file's start do not start a stream: only a run of back-to-back
	 * reads or chunk-by-chunk moves do.
	 */
	atomic_bool sampled;
};

/*
 * fetch_done_fn - the answer to one fetch_read(): @err 0 and @n pieces
 * (their bytes in order; none past EOF), or -errno (-EIO, -ENOMEM,
 * -ESTALE: the entry was replaced by a newer version).  Pieces are valid
 * only during the call.  Runs on the caller's thread (a hit) or on a
 * completion thread, with no lock held.
 */
typedef void (*fetch_done_fn)(void *arg, int err,
			      const struct fetch_piece *p, int n);

struct fetcher;

int fetch_create(struct fetcher **out, struct cache *c, struct backend *be,
		 const struct fusefs_conf *cf, struct stats *st);
/*
 * fetch_drain() - wait until no backend read is in flight (each is bounded
 * by the op timeout and the retries), so that no late answer reaches a
 * FUSE session that is going away.
 */
void fetch_drain(struct fetcher *f);
/* fetch_destroy() - waits for backend reads in flight, then frees. */
void fetch_destroy(struct fetcher *f);

/*
 * fetch_budget() - the memory budget (--memory-limit, membudget.h) the
 * fetcher charges its chunk buffers to; others (control files) share it.
 * It lives as long as the fetcher.
 */
struct membudget *fetch_budget(struct fetcher *f);

/* fetch_on_stale() - @fn(arg, fid) is told when an object changed. */
void fetch_on_stale(struct fetcher *f, void (*fn)(void *arg, uint64_t fid),
		    void *arg);

/*
 * fetch_read() - read @size bytes at @off of the open entry @ce.
 * Return: 0 if @done was called or will be called exactly once;
 * -errno if not (nothing sent): -ESTALE for an entry replaced by a
 * newer version of its object, -ENOMEM, -EIO, -EINVAL (a read spanning
 * more than 8 chunks).
 */
int fetch_read(struct fetcher *f, struct centry *ce, uint64_t off,
	       size_t size, fetch_done_fn done, void *arg);
/* fetch_read_as() - the same for the reader whose sequential state is
 * @st (NULL: the file's, as fetch_read()) */
int fetch_read_as(struct fetcher *f, struct centry *ce,
		  struct fetch_stream *st, uint64_t off, size_t size,
		  fetch_done_fn done, void *arg);

/*
 * fetch_set_failure_memory() - how long at most a chunk whose backend
 * read failed after every retry, with a reader waiting, is answered EIO
 * at once (as long as its attempts took, at most @ms: the kernel asks
 * again at once for the page it needed; off, 0, by default); forgets
 * the failures seen.
 * For tests.
 */
void fetch_set_failure_memory(struct fetcher *f, unsigned ms);

/*
 * fetch_close() - a reader closed @ce: cache_detach(), and the chunks kept
 * in memory for the file go with its last open (the disk cache has them,
 * or the policy did not want them); its staged chunks are settled
 * (fetch_stage()).
 */
void fetch_close(struct fetcher *f, struct centry *ce);
/* fetch_keep_verified() - chunk @n of open @ce was just verified into @cb
 * (the background verifier, an uncharged buffer): keep it in memory for
 * its readers if the memory budget has read-ahead room for it (@cb is
 * then charged as MB_AHEAD and takes a reference; chunkbuf_refs() tells) */
void fetch_keep_verified(struct fetcher *f, struct centry *ce, uint32_t n,
			 struct chunkbuf *cb);

/*
 * fetch_set_wanted() - @fn(arg, fid, within): is file @fid still to be
 * read in a list's current epoch (lists_unread_now()), before its readers
 * read @within more bytes (UINT64_MAX: anywhere in it).  Asked under the
 * fetch lock (so it may take only locks after it: the lists lock) right
 * before a prefetch of the current epoch (@current) or a staging claims
 * its chunk: a file the reader opened meanwhile is not fetched for it
 * again; and at a last close, with @within what staging holds: the
 * file's staged chunks stay if so (fetch_stage()).  Set once, before any
 * prefetch; NULL: not asked.
 */
void fetch_set_wanted(struct fetcher *f,
		      bool (*fn)(void *arg, uint64_t fid, uint64_t within),
		      void *arg);
/*
 * fetch_prefetch() - fetch absent chunk @n of @ce (held by the caller) at
 * low priority, for a read in a list's current epoch (@current: only if
 * the file is still wanted, fetch_set_wanted()) or a queued one: only
 * while fewer than half of max_inflight prefetches and fewer than
 * max_inflight reads in all are in flight, so demand misses always find
 * room, and while the bytes of all reads in flight and this chunk fit in
 * the link's bound (linkrate.h; the next completion then calls the
 * on_prefetch hook to wake the prefetcher).  A staged chunk is written
 * from memory instead (no fetch).
 * Return: 1 started (or stored from memory), 0 nothing to do (present, in
 * flight, in memory, not wanted, past the end), -EBUSY no room now (reads
 * in flight, the link's bound, or the memory budget), -ENOMEM.
 */
int fetch_prefetch(struct fetcher *f, struct centry *ce, uint32_t n,
		   bool current);
/*
 * fetch_prefetch_range() - fetch at low priority the pages (4 KiB) of
 * [@off, @off + @len) of @ce (held by the caller) that are neither on
 * disk nor on their way: a range that a list names (ranges.h), read
 * ahead of its reader as a random read would read it, and stored as its
 * pages are (cache_store_pages()).  A reader of those pages meanwhile
 * waits for this read.  Only the first RANGE_CHUNKS_MAX chunks of a
 * range; the bounds of fetch_prefetch() apply.
 * Return: 1 a read started, 0 nothing to do, -EBUSY no room now, -ENOMEM.
 */
#define RANGE_CHUNKS_MAX	8
int fetch_prefetch_range(struct fetcher *f, struct centry *ce, uint64_t off,
			 uint64_t len);
/*
 * fetch_stage() - fetch absent chunk @n of @ce (held by the caller) into
 * memory only, for a reader that comes soon: a chunk the policy would not
 * keep on disk after its read (prefetch.h).  @current: for a read in a
 * list's current epoch (only if the file is still wanted,
 * fetch_set_wanted()).  Staged chunks are served like read-ahead and not
 * written to the cache while staged; at the file's last close each is
 * offered to the cache as a demand read's chunk would be, then dropped
 * unless a list's reader is to read the file soon in its current epoch
 * (a release that comes after the next epoch began: they wait for it).
 * They also go by fetch_stage_keep(), or to disk through a later
 * fetch_prefetch() of the same chunk once the policy wants it (no second
 * fetch).  A chunk is charged at its own length (a small file's is small),
 * as read-ahead; staged and staging chunks together hold at most
 * memory_limit / 2.  Same priority and bounds as fetch_prefetch().
 * Return: 1 started, 0 nothing to do (present, in flight, staged, in
 * memory, not wanted, past the end), -ENOSPC staging is full (or off),
 * -EBUSY no room now (reads in flight, the memory budget), -ENOMEM.
 */
int fetch_stage(struct fetcher *f, struct centry *ce, uint32_t n,
		bool current);
/* fetch_is_staged() - is chunk @n of @ce staged in memory, or being
 * fetched to be */
bool fetch_is_staged(struct fetcher *f, const struct centry *ce, uint32_t n);
/* fetch_staged_mask() - bit i: fetch_is_staged() of chunk @from + i, for
 * i < @n (at most 64), under one take of the fetch lock */
uint64_t fetch_staged_mask(struct fetcher *f, const struct centry *ce,
			   uint32_t from, uint32_t n);
/*
 * fetch_stage_keep() - drop the staged chunks of files that are neither
 * among @fids[0..@n) (the lists' window), nor still to be read (the
 * wanted callback, fetch_set_wanted(): staging may run past the window
 * given), nor open: their reader is not coming (a list moved on or went
 * idle, a loader stopped early).
 */
void fetch_stage_keep(struct fetcher *f, const uint64_t *fids, size_t n);
/* fetch_prefetching_bytes() - the chunks' bytes of prefetch reads in
 * flight, in 4 KiB blocks (what the cache will charge when stored) */
uint64_t fetch_prefetching_bytes(struct fetcher *f);
/* fetch_on_prefetch_done() - @fn(arg, stored) after each prefetched chunk */
void fetch_on_prefetch_done(struct fetcher *f,
			    void (*fn)(void *arg, bool stored), void *arg);

#endif
