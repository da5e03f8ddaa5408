/* SPDX-License-Identifier: MIT */
/*
 * cache.h - cached bytes on local disk, their index and the space bound.
 *
 * Layout (docs/cache-format.md): DIR/lock (flock: one daemon per cache
 * directory), DIR/index/ (LMDB, meta.h), DIR/data/XX/FID-GEN (one sparse
 * file per object version; chunk n at offset n * chunk_size).
 *
 * Every object that has cached chunks, or is open, has a struct centry.
 * Chunk states: ABSENT; UNVERIFIED (in the index from an earlier run, not
 * yet checked this run); PRESENT (checked or written this run); FETCHING
 * (fetch.c owns it).  An UNVERIFIED chunk is never served before
 * cache_verify_chunk() accepted it.
 *
 * Locking: one mutex (cache_lock()) guards every centry field below,
 * the table, the policy and the space accounting.  Functions named
 * *_locked expect it held; the others take it themselves.  Disk I/O is
 * done without it, on entries kept alive by opens or busy.
 *
 * The space bound: used + reserved <= limit at all times; a chunk is
 * written only after its space was reserved, evicting whole files the
 * policy offers that are neither open nor busy.  Bytes are counted in
 * 4 KiB blocks.
 *
 * With epoch lists (policy "auto" and a next_use source) the space is
 * split: files are KEPT (a stable set, up to limit - window, replaced
 * only by Belady on demand misses) or STREAMED (prefetched into the
 * window just ahead of the reader and the first to go once read; a
 * streamed file only ever displaces another streamed file needed later).
 * Prefetching then never evicts a kept file that would be a hit later,
 * and backend traffic per shuffled epoch stays near dataset - cache.
 */
#ifndef FUSEFS_CACHE_H
#define FUSEFS_CACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf.h"
#include "meta.h"
#include "ns.h"
#include "policy.h"
#include "stats.h"

enum chunk_state { CH_ABSENT, CH_UNVERIFIED, CH_PRESENT, CH_FETCHING };

/* a chunk's bytes in memory, shared by reference */
struct chunkbuf {
	atomic_int ref;
	uint32_t len;		/* valid bytes */
	char *data;		/* chunk_size bytes, 4 KiB aligned */
};

struct inflight;		/* fetch.c */

#define CACHE_MEMCHUNKS	12	/* chunks held in memory per open file */

struct centry {
	uint64_t fid;		/* == the file's inode number */
	char *key;		/* backend object name */
	char version[NS_VERSION_MAX];
	uint64_t gen;		/* version_gen(version) */
	uint64_t size;
	int64_t mtime;
	uint32_t nchunks;
	uint8_t *state;		/* enum chunk_state per chunk */
	uint64_t *sum;		/* XXH3 per present chunk */
	uint64_t used;		/* bytes accounted on disk */
	int opens;		/* open file handles */
	int busy;		/* I/O in progress without an open handle */
	bool stale;		/* replaced by a newer version, out of table */
	int fd, dfd;		/* data file: buffered, O_DIRECT (-1: closed) */
	struct policy_node *pn;	/* heat and eviction order, owned by policy */
	/* fetch.c's, under the same lock */
	struct inflight *inflight;
	/*
	 * Chunks kept in memory while the file is open: the last ones
	 * readers waited for, and read-ahead the cache would not keep
	 * (so it is not fetched twice).  Replaced round-robin.
	 */
	struct memchunk {
		uint32_t n;
		struct chunkbuf *cb;
	} mem[CACHE_MEMCHUNKS];
	unsigned mem_next;
	uint32_t seq_next;	/* chunk a sequential reader reads next */
};

struct cache;

/* cache_open() - lock @cf->cache_dir, load the index; -errno + message */
int cache_open(struct cache **out, const struct fusefs_conf *cf,
	       struct meta *m, struct stats *st);
/* cache_close() - flush heat, close files.  No entry may be in use. */
void cache_close(struct cache *c);

void cache_lock(struct cache *c);
void cache_unlock(struct cache *c);
uint32_t cache_chunk_size(const struct cache *c);
/* cache_chunk_len() - valid bytes of chunk @n of @ce */
uint32_t cache_chunk_len(const struct cache *c, const struct centry *ce,
			 uint32_t n);

/*
 * cache_attach() - the entry for file @fid at version @a->version, with
 * one more open.  An entry at another version is replaced (its bytes
 * dropped once unused).  @changed is set if an older version was cached.
 * Return: the entry, or NULL (ENOMEM).
 */
struct centry *cache_attach(struct cache *c, uint64_t fid, const char *key,
			    const struct ns_attr *a, bool *changed);
/*
 * cache_hold() - like cache_attach() for a file nobody opened (prefetch):
 * a busy reference instead of an open, and no access is counted.  Drop
 * it with cache_busy_put().  NULL on ENOMEM.
 */
struct centry *cache_hold(struct cache *c, uint64_t fid, const char *key,
			  const struct ns_attr *a);
/*
 * cache_admits() - would the policy make room for @need more bytes of
 * @ce now (free space, or a victim it prefers to give up)?  Nothing is
 * evicted or reserved: a check before fetching ahead.
 */
bool cache_admits(struct cache *c, const struct centry *ce, uint64_t need,
		  bool prefetch);
/*
 * cache_window_at_least() - make the streaming window (lists mode) hold at
 * least @bytes, at most a quarter of the cache: lists of large shards
 * need room for a couple of whole files ahead of the reader.
 */
void cache_window_at_least(struct cache *c, uint64_t bytes);
/* cache_free() - bytes under the limit not used or reserved */
uint64_t cache_free(struct cache *c);
/* cache_is_complete() - every chunk of @ce is on disk */
bool cache_is_complete(struct cache *c, const struct centry *ce);
/* cache_missing_locked() - chunks of @ce neither cached nor in flight */
uint32_t cache_missing_locked(const struct centry *ce);
/* cache_detach() - drop the open taken by cache_attach(). */
void cache_detach(struct cache *c, struct centry *ce);
/* busy references: keep an entry's files open without an open handle */
void cache_busy_get_locked(struct centry *ce);
void cache_busy_put(struct cache *c, struct centry *ce);

/*
 * cache_store_chunk() - write chunk @n (@cb) of @ce to disk and index it.
 * Reserves the space first, evicting other files.  Caller holds a busy
 * or open reference and owns the chunk's FETCHING state.
 * Return: 0 stored, -ENOSPC no room (nothing written), -errno.
 */
int cache_store_chunk(struct cache *c, struct centry *ce, uint32_t n,
		      const struct chunkbuf *cb, uint64_t sum, bool prefetch);
/*
 * cache_verify_chunk() - read UNVERIFIED chunk @n into @cb and check its
 * checksum; mark it PRESENT, or drop it (ABSENT, index record removed)
 * on a mismatch.  Return: 0 good, -EBADMSG dropped, -errno.
 */
int cache_verify_chunk(struct cache *c, struct centry *ce, uint32_t n,
		       struct chunkbuf *cb);
/*
 * cache_pread() - @len bytes at file offset @off from PRESENT chunks into
 * @buf (4 KiB aligned, room for @len rounded up to 4 KiB plus 4 KiB).
 * Return: pointer to the first byte inside @buf, or NULL (errno set).
 */
char *cache_pread(struct cache *c, struct centry *ce, uint64_t off,
		  size_t len, char *buf);
/* cache_read_fd() - fd to splice PRESENT ranges from (buffered) */
int cache_read_fd(const struct centry *ce);
/* cache_note_read() - heat: @bytes read through the mount */
void cache_note_read(struct cache *c, struct centry *ce, uint64_t bytes);

/* chunk buffers */
struct chunkbuf *chunkbuf_new(uint32_t size);
struct chunkbuf *chunkbuf_get(struct chunkbuf *cb);
void chunkbuf_put(struct chunkbuf *cb);

/* cache_file_bytes() - bytes of file @fid held in the cache */
uint64_t cache_file_bytes(struct cache *c, uint64_t fid);
/* cache_pin() - pin or unpin file @fid (pinned files are never evicted) */
int cache_pin(struct cache *c, uint64_t fid, bool pin);
/* cache_evict_file() - drop @fid's cached bytes now; -EBUSY if open */
int cache_evict_file(struct cache *c, uint64_t fid);
/* cache_set_next_use() - give the policy the future (lists.h) */
void cache_set_next_use(struct cache *c,
			uint64_t (*fn)(void *arg, uint64_t fid), void *arg);
/* cache_heat_each() - @fn for every file with heat, locked; stops on != 0 */
int cache_heat_each(struct cache *c, int (*fn)(void *arg,
		    const struct policy_node *n, bool cached), void *arg);
/* cache_usage() - bytes used and the limit, files cached */
void cache_usage(struct cache *c, uint64_t *used, uint64_t *limit,
		 uint64_t *files);

#endif
