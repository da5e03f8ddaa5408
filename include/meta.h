/* SPDX-License-Identifier: MIT */
/*
 * meta.h - the persistent index in LMDB.  The only way into lmdb.h.
 *
 * Databases (docs/cache-format.md): "meta" (identity and settings),
 * "files", "chunks", "heat" (the cache index) and "objects" (the
 * namespace cache: the last backend listing).
 *
 * Cache index updates are queued (meta_q_*, cheap, never block on I/O)
 * and applied in order by one writer thread (bgthread.h) in one
 * transaction per batch, every META_BATCH_MS, sooner when QUEUE_KICK
 * updates wait or meta_flush() asks; meta_close() applies whatever is
 * left.  A process crash
 * loses at most the last batch, never consistency: LMDB commits are
 * atomic, and a chunk record is queued only after its data was written.
 * Loads (meta_*_load) run at startup, before the writer has work.
 *
 * The map grows: every write (queued batches, settings, the namespace
 * cache) runs in a transaction that, when LMDB finds the map full, is
 * aborted, the map doubled (once no other transaction of the process is
 * open: a rwlock every transaction holds shared) and run again.
 *
 * A damaged index never stops a start: meta_open() checks data.mdb
 * before LMDB maps it (its size against the last page its meta page
 * names, then every record read by a child process, so that a fault
 * kills the child), and sets a damaged one aside (docs/cache-format.md).
 */
#ifndef FUSEFS_META_H
#define FUSEFS_META_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ns.h"
#include "recfmt.h"

#define META_BATCH_MS	250
#define META_MAPSIZE	(1ULL << 30)	/* initial map; it grows as needed */

struct meta;

/*
 * meta_open() - open or create the index in directory @dir.  If the
 * index there is damaged (truncated, not LMDB, unreadable), @dir is
 * renamed to @dir.broken-YYYYmmddTHHMMSSZ, an empty index created in its
 * place, and one error line logged: the cache starts empty (its data
 * files are orphans, swept by cache_open()).  Return: 0 or -errno.
 */
int meta_open(struct meta **out, const char *dir);
/* meta_open_sized() - meta_open() with an initial map of @map_start
 * bytes (tests: a tiny map that has to grow). */
int meta_open_sized(struct meta **out, const char *dir, size_t map_start);
/*
 * meta_open_named() - meta_open_sized() of @dir (a path LMDB opens, maybe
 * through /proc/self/fd), which messages call @shown (the operator's
 * path).
 */
int meta_open_named(struct meta **out, const char *dir, const char *shown,
		    size_t map_start);
/*
 * meta_broken() - has a read or write found the index damaged since it
 * was opened?  Then (once, with one log line) the directory was marked
 * (a file "broken" in it, with the reason), every later write is skipped
 * (-EIO; queued updates are dropped, a namespace rewrite lists into
 * memory only and its commit fails), and the next meta_open() sets the
 * directory aside as a damaged one.  Damage is any LMDB failure but a
 * full disk or map, no memory, or an interrupted call.
 */
bool meta_broken(struct meta *m);
/* meta_close() - apply the queue, sync, close.  NULL is fine. */
void meta_close(struct meta *m);

/* small settings in "meta": synchronous, for startup only */
int meta_get_str(struct meta *m, const char *key, char *buf, size_t len);
int meta_put_str(struct meta *m, const char *key, const char *val);
/* meta_wipe_cache() - drop files, chunks and heat (format change). */
int meta_wipe_cache(struct meta *m);

/*
 * The namespace cache, replaced whole by meta_ns_begin/add/commit.  Two
 * databases take turns: records are written into the one that is not
 * current, in short transactions of about 4 MiB each (a listing that
 * waits on the network never holds LMDB's write lock, so cache index
 * commits go on meanwhile), and the commit makes it current in one
 * small transaction.  Until then loads see the previous namespace; an
 * abort leaves it current.  One rewrite at a time: meta_ns_begin()
 * returns -EBUSY while another is under way.  All return 0 or -errno.
 */
struct meta_ns_txn;
int meta_ns_begin(struct meta *m, struct meta_ns_txn **out);
int meta_ns_add(struct meta_ns_txn *t, const char *key, size_t len,
		const struct ns_attr *a);
int meta_ns_commit(struct meta_ns_txn *t);	/* frees t */
void meta_ns_abort(struct meta_ns_txn *t);	/* frees t */
/*
 * meta_ns_load() - @fn for each stored object.  Return: the count, or
 * -errno: -EBADMSG when a record was damaged (the stored listing is not
 * whole: list again).
 */
long meta_ns_load(struct meta *m, int (*fn)(void *arg, const char *key,
		  size_t len, const struct ns_attr *a), void *arg);

/* cache index loads; callbacks return 0 to go on.  -errno */
int meta_files_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		    const struct file_rec *r), void *arg);
int meta_chunks_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		     uint32_t n, const struct chunk_rec *r), void *arg);
int meta_heat_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		   const struct heat_rec *r), void *arg);

/*
 * Clean-stop records (cache_stop.c), synchronous: meta_stopped_write()
 * replaces all of them with @n records in one durable commit;
 * meta_stopped_load() hands each to @fn (damaged ones skipped);
 * meta_stopped_clear() drops them all, durably.  -errno
 */
int meta_stopped_write(struct meta *m, const uint64_t *fid,
		       const struct stop_rec *r, size_t n);
int meta_stopped_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		      const struct stop_rec *r), void *arg);
int meta_stopped_clear(struct meta *m);

/* queued updates, applied in call order */
void meta_q_file(struct meta *m, uint64_t fid, const struct file_rec *r);
void meta_q_chunk(struct meta *m, uint64_t fid, uint32_t n,
		  const struct chunk_rec *r);
void meta_q_drop_chunk(struct meta *m, uint64_t fid, uint32_t n);
/* meta_q_drop_file() - the file record and all its chunk records */
void meta_q_drop_file(struct meta *m, uint64_t fid);
void meta_q_heat(struct meta *m, uint64_t fid, const struct heat_rec *r);
/* meta_writer_busy_ms() - how long the writer's batch in progress has
 * been running (0: idle); for the watchdog, any thread. */
int64_t meta_writer_busy_ms(struct meta *m);
/* meta_flush() - wait until everything queued so far is committed. */
int meta_flush(struct meta *m);

/*
 * meta_count_queued() - keep *@gauge at the number of updates queued and
 * not committed yet (stats: index_queued); 0 means everything queued so
 * far is in the index, as after a meta_flush().  Set it before threads
 * queue; @gauge outlives @m.
 */
void meta_count_queued(struct meta *m, _Atomic uint64_t *gauge);
/* meta_batches() - committed batches so far (tests) */
uint64_t meta_batches(struct meta *m);

#endif
