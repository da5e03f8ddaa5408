/* SPDX-License-Identifier: MIT */
/*
 * cache.h - cached bytes on local disk, their index and the space bound.
 *
 * Layout (docs/cache-format.md): DIR/lock (flock: one daemon per cache
 * directory), DIR/index/ (LMDB, meta.h), DIR/data/XX/FID-GEN (one sparse
 * file per object version; chunk n at offset n * chunk_size).
 *
 * Every object that has cached chunks, or is in use, has a cache entry
 * (struct centry, private to the cache).  Chunk states:
 *   ABSENT      nothing on disk;
 *   FETCHING    claimed by a fetcher (cache_claim()), which must end the
 *               claim with cache_store_chunk() or cache_abandon();
 *   UNVERIFIED  indexed by an earlier run, not yet checked in this one:
 *               never served before cache_verify_chunk() accepted it;
 *   PRESENT     checked or written in this run.
 * An ABSENT or FETCHING chunk may hold pages (4 KiB) that random reads
 * stored (cache_store_pages()); they count as cached bytes, are served
 * by cache_read_plan() with pages, and go with a whole store of the
 * chunk, its eviction or a restart (they are not indexed).
 *
 * References: an open (cache_attach/cache_detach) or a busy hold
 * (cache_hold or cache_busy_get / cache_busy_put) keeps an entry and its
 * data files alive; only entries with neither can be evicted.  An entry
 * replaced by a newer version of its object is "stale": its users keep
 * it, its bytes go with the last of them.
 *
 * Space: the policy (policy.h) owns the accounting and picks victims:
 * whole files, or the last chunks of a file (hole punched, CH_ABSENT).
 * A chunk is written only after its space was reserved.  The cache picks
 * victims under its lock, takes them out of the table, and unlinks their
 * files after unlocking: no file-system call runs under the cache lock,
 * but for the hole punched into an idle file that loses its last chunks
 * (cache.c, "chunk eviction").
 *
 * Locking: one mutex, the cache lock, guards every entry, the table, the
 * policy and the accounting.  Lock order: a caller may hold the fetch
 * lock (fetch.h) when calling in; under the cache lock the cache calls
 * only the policy, meta_q_*() (the meta queue lock) and the policy's
 * next-use callback (lists.h's lock).  No callback of this module runs
 * under the cache lock otherwise.
 */
#ifndef FUSEFS_CACHE_H
#define FUSEFS_CACHE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "chunkbuf.h"
#include "conf.h"
#include "meta.h"
#include "ns.h"
#include "policy.h"
#include "stats.h"

enum chunk_state {
	CH_ABSENT, CH_UNVERIFIED, CH_PRESENT, CH_FETCHING,
	CH_PAGES	/* only in a read plan: fetch the read's pages */
};

struct cache;
struct centry;

/* what does not change during an entry's life */
struct cache_ident {
	uint64_t fid;		/* == the file's inode number */
	uint64_t gen;		/* version_gen(version, size) */
	uint64_t size;
	uint32_t nchunks;
	const char *key;	/* backend object name */
	const char *version;
};

/*
 * cache_check_dir() - may @dir hold a cache?  It must be a directory
 * owned by the daemon's user and writable by nobody else, and its
 * "index" and "data" entries, where they exist, real directories (not
 * symlinks) of the same owner.  Call before anything opens files there.
 * On success it also holds the directory's lock (DIR/lock, flock), which
 * cache_open() then keeps: a second daemon stops here, before it reads or
 * changes the index of the first.  @dir is opened once (O_DIRECTORY |
 * O_NOFOLLOW: a symlink is refused, -ELOOP) and checked on that
 * descriptor, which cache_open() keeps: every file of the cache is then
 * opened relative to it, never by @dir's name.  @at (@len bytes, may be
 * NULL) gets a path that reaches the same directory through the held
 * descriptor ("/proc/self/fd/N"), for what must open by name (LMDB, the
 * namespace image); @dir itself where /proc is not mounted.
 * Return: 0, or -EPERM / -ENOTDIR / -ELOOP / -EBUSY / -errno with a
 * message printed.
 */
int cache_check_dir(const char *dir, char *at, size_t len);
/* cache_open() - lock @cf->cache_dir, load the index; -errno + message */
int cache_open(struct cache **out, const struct fusefs_conf *cf,
	       struct meta *m, struct stats *st);
/* cache_close() - flush heat, close files.  No entry may be in use. */
void cache_close(struct cache *c);

uint32_t cache_chunk_size(const struct cache *c);
/* cache_chunk_len() - valid bytes of chunk @n of @ce */
uint32_t cache_chunk_len(const struct cache *c, const struct centry *ce,
			 uint32_t n);
/* cache_ident() - @ce's identity; its strings live as long as @ce */
void cache_ident(const struct centry *ce, struct cache_ident *out);

/*
 * cache_attach() - the entry for file @fid at version @a->version, with
 * one more open, its data files open.  An entry at another version is
 * replaced (its bytes dropped once unused); @changed then says so.
 * Return: 0 and *@out, or -ENOMEM, -EIO (data file).
 */
int cache_attach(struct cache *c, uint64_t fid, const char *key,
		 const struct ns_attr *a, struct centry **out, bool *changed);
/* cache_detach() - drop the open taken by cache_attach(); returns the
 * opens left (@ce may be gone when it is 0) */
int cache_detach(struct cache *c, struct centry *ce);
/*
 * cache_hold() - like cache_attach() for a file nobody opened (prefetch):
 * a busy reference instead of an open, and no access is counted.  Drop
 * it with cache_busy_put().  Return: 0 and *@out, or -ENOMEM.
 */
int cache_hold(struct cache *c, uint64_t fid, const char *key,
	       const struct ns_attr *a, struct centry **out);
/* busy references: keep an entry and its files without an open */
void cache_busy_get(struct cache *c, struct centry *ce);
void cache_busy_put(struct cache *c, struct centry *ce);
/* cache_is_open() - does anyone have @ce open */
bool cache_is_open(struct cache *c, const struct centry *ce);
/* cache_fid_open() - does anyone have file @fid's current entry open */
bool cache_fid_open(struct cache *c, uint64_t fid);

/*
 * cache_chunk_states() - the states of chunks @from, @from + 1, ... of @ce
 * (at most @n, up to its last) into @out, under one take of the lock.
 * Return: how many, -ESTALE.
 */
int cache_chunk_states(struct cache *c, const struct centry *ce,
		       uint32_t from, uint32_t n, int8_t *out);
/*
 * cache_claim() - the state of chunk @n of @ce before the call; if it
 * was CH_ABSENT it is CH_FETCHING now and the caller owns the claim.
 * Return: a chunk_state, or -ESTALE (@ce was replaced), -ERANGE.
 */
int cache_claim(struct cache *c, struct centry *ce, uint32_t n);
/* cache_chunk_state() - chunk @n's state, unchanged; -ESTALE, -ERANGE */
int cache_chunk_state(struct cache *c, const struct centry *ce, uint32_t n);
/*
 * cache_store_chunk() - write claimed chunk @n (@cb, checksum @sum) of
 * @ce to disk and index it: PRESENT on success.  Asks the policy for room
 * first (victims evicted).  Caller holds a reference.
 * Return: 0 stored; -ENOSPC not admitted (nothing written), -ESTALE,
 * -errno: the claim is still the caller's (cache_abandon()).
 */
int cache_store_chunk(struct cache *c, struct centry *ce, uint32_t n,
		      const struct chunkbuf *cb, uint64_t sum,
		      enum admit_kind kind);
/* cache_abandon() - end a claim without storing: CH_ABSENT again */
void cache_abandon(struct cache *c, struct centry *ce, uint32_t n);
/*
 * cache_store_pages() - write @cb (the pages at byte @lo of chunk @n,
 * fetched for a random read; @lo 4 KiB aligned) to @ce's data file and
 * note them stored, after asking the policy for room as for a demand
 * read.  No claim: two readers may store the same pages (the same
 * bytes).  Caller holds a busy reference.  Return: 0; -EEXIST the chunk
 * is stored whole now (nothing noted); -ENOSPC not admitted; -ESTALE;
 * -errno.
 */
int cache_store_pages(struct cache *c, struct centry *ce, uint32_t n,
		      uint32_t lo, const struct chunkbuf *cb);
/*
 * Verification of chunks from an earlier run.  One read per chunk at a
 * time (single flight): a chunk being read to be checked is not read
 * again by another thread, which waits for the first one's verdict.
 * Hashing runs with no lock held.
 *
 * cache_verify_chunk() - read UNVERIFIED chunk @n into @cb and check its
 * checksum; mark it PRESENT, or drop it (ABSENT, index record removed)
 * on a mismatch.  If another thread is reading it to verify it, waits
 * for that verdict instead (@cb then holds nothing).  Caller holds a
 * reference.  Return: 0 good (@cb holds the chunk), -EBADMSG dropped,
 * -EAGAIN settled by someone else (look again), -errno.
 */
int cache_verify_chunk(struct cache *c, struct centry *ce, uint32_t n,
		       struct chunkbuf *cb);

/* one verification read claimed by cache_verify_begin() */
struct cache_vread {
	struct centry *ce;	/* a busy reference is held until _end() */
	uint32_t n;		/* chunk */
	uint32_t len;		/* its valid bytes */
	int fd;			/* read @rlen bytes at @off from @fd into a */
	uint64_t off;		/* 4 KiB aligned buffer of chunk size */
	size_t rlen;
};

/*
 * cache_verify_begin() - claim the first UNVERIFIED chunk of @ce at or
 * after chunk @from that nobody is verifying, for an asynchronous read
 * (the background verifier).  @buffered: read through the page cache
 * (the kernel will read the file next, passthrough) instead of O_DIRECT.
 * Return: 1 and *@vr (end it with cache_verify_end()), 0 none left,
 * -errno (data file).
 */
int cache_verify_begin(struct cache *c, struct centry *ce, uint32_t from,
		       bool buffered, struct cache_vread *vr);
/*
 * cache_verify_end() - the read of @vr returned @got bytes (or -errno)
 * at @data: hash (unlocked), settle the chunk as cache_verify_chunk()
 * does, drop the reference.  Return: 0 good, -EBADMSG dropped.
 */
int cache_verify_end(struct cache *c, struct cache_vread *vr,
		     const void *data, ssize_t got);
/* cache_verify_abort() - give up @vr without a verdict (its read failed
 * or was cancelled): the chunk stays UNVERIFIED for a reader to check */
void cache_verify_abort(struct cache *c, struct cache_vread *vr);
/* cache_verify_hold() - 1 and a busy reference on the entry of @fid if
 * it has an UNVERIFIED chunk nobody is verifying (drop it with
 * cache_busy_put()), else 0 */
int cache_verify_hold(struct cache *c, uint64_t fid, struct centry **out);
/* cache_unverified() - UNVERIFIED chunks of @ce */
uint32_t cache_unverified(struct cache *c, const struct centry *ce);
/* cache_unverified_total() - UNVERIFIED chunks of every current entry */
uint64_t cache_unverified_total(struct cache *c);
/*
 * cache_first_unverified() - the first UNVERIFIED chunk of @ce in
 * @n0..@n1 (one look under the lock when @ce has none).
 * Return: 1 and *@n, 0 none, -ESTALE or -ERANGE (met before one).
 */
int cache_first_unverified(struct cache *c, const struct centry *ce,
			   uint32_t n0, uint32_t n1, uint32_t *n);
/*
 * cache_verify_file() - is every chunk of @ce PRESENT: UNVERIFIED ones are
 * verified now, on the caller's thread (when no verifier did it before);
 * a reference is held and its data file open.
 * Return: 0, -EAGAIN a chunk is missing (or was dropped), -ESTALE, -errno.
 */
int cache_verify_file(struct cache *c, struct centry *ce);
/*
 * cache_unverified_by_heat() - the ids of files with UNVERIFIED chunks,
 * hottest first (malloc'ed, caller frees).  Return: 0, -ENOMEM.
 */
int cache_unverified_by_heat(struct cache *c, uint64_t **fids, size_t *n);
/*
 * cache_pread() - @len bytes at file offset @off from PRESENT chunks into
 * @buf (4 KiB aligned, room for @len rounded up to 4 KiB plus 4 KiB).
 * Return: 0 and *@at, the first byte inside @buf; -errno.
 */
int cache_pread(struct cache *c, struct centry *ce, uint64_t off,
		size_t len, char *buf, char **at);
/*
 * cache_passthrough_fd() - the data file of open entry @ce, for the kernel
 * to read directly: only when every chunk is on disk and verified (chunks
 * from an earlier run still unverified, when no verifier did it before,
 * are verified now, on the caller's thread) and the
 * file is exactly the object's size (O_DIRECT padding cut off).  From then
 * on the file is *lent*: the kernel may read it after every open closed
 * (a mapping made through a passthrough open maps the backing file), so it
 * is never changed in place again: when it goes, it is unlinked, never
 * reused as a spare; when only its last chunks go, the chunks kept are
 * copied into a new data file renamed over it, and the entry is lent no
 * more (cache_priv.h, cache_move_head()).
 * A stale entry (replaced by a newer version) is never lent: a new entry
 * of its version may share its data file (see cache_priv.h, lent_stale).
 * Each fd returned holds the whole file in the cache until
 * cache_passthrough_put(): files so held take at most half the cache
 * size, so that eviction always has room (a file past that is read
 * through the daemon, whose opens hold nothing).
 * Return: an fd (owned by the cache, valid while @ce is open), -EAGAIN
 * if the file is not complete, -ENOSPC if holding it would pass that
 * half, -ESTALE if @ce is stale, -errno.
 */
int cache_passthrough_fd(struct cache *c, struct centry *ce);
/* cache_passthrough_put() - the open a cache_passthrough_fd() was for
 * ended (or never began): the file may be evicted again */
void cache_passthrough_put(struct cache *c, struct centry *ce);
/* cache_read_fd() - fd to splice PRESENT ranges from (buffered) */
int cache_read_fd(const struct centry *ce);
/* cache_read_done() - a reader's last look at @ce without the lock is
 * over (orders it before the entry is freed, for ThreadSanitizer) */
void cache_read_done(struct centry *ce);
/* cache_note_read() - heat: @bytes read through the mount */
void cache_note_read(struct cache *c, struct centry *ce, uint64_t bytes);
/*
 * cache_read_plan() - what a read of [@off, @off + @bytes) in chunks
 * @n0..@n1 of open entry @ce needs, in one take of the cache lock.  Bit
 * i of @skip: chunk @n0 + i is served from memory (not looked at).
 * Unless a chunk looked at is UNVERIFIED: the read is noted (heat), a
 * busy reference taken (cache_busy_put() ends it: an open file's chunks
 * may be evicted, but not while a read of it is served), and @st[i] is
 * the state of chunk @n0 + i before the call, an ABSENT one now FETCHING
 * for the caller (cache_store_chunk() or cache_abandon() ends that
 * claim).  With @pages (a random read: fetch only the pages it needs),
 * an ABSENT chunk whose pages of the read (cache_page_span()) are all
 * stored is CH_PRESENT for this read, and one missing some is CH_PAGES
 * and not claimed, unless those pages are more than half the chunk
 * (then claimed, as without @pages).
 * Return: 0 as above; 1 a chunk is UNVERIFIED (nothing done: verify it,
 * then call again); -ESTALE @ce was replaced; -ERANGE.
 */
int cache_read_plan(struct cache *c, struct centry *ce, uint32_t n0,
		    uint32_t n1, uint32_t skip, uint64_t off, uint64_t bytes,
		    bool pages, int *st);
/*
 * cache_page_span() - the pages of chunk @n (chunks of @cs bytes, this
 * one @clen long) that [@off, @off + @len) covers, as bytes [*@lo, *@hi)
 * of the chunk: @lo rounded down to 4 KiB, @hi up (at most @clen).
 */
static inline void cache_page_span(uint32_t cs, uint32_t clen, uint32_t n,
				   uint64_t off, uint64_t len, uint32_t *lo,
				   uint32_t *hi)
{
	uint64_t base = (uint64_t)n * cs;
	uint64_t a = off > base ? off - base : 0;
	uint64_t b = off + len - base;

	if (b > clen)
		b = clen;
	*lo = (uint32_t)(a & ~4095ULL);
	b = (b + 4095) & ~4095ULL;
	*hi = (uint32_t)(b < clen ? b : clen);
}
/*
 * cache_range_state() - of the bytes [@off, @off + @len) of @ce (cut at
 * its end): CH_PRESENT if all are on disk (in whole chunks or in pages a
 * random read stored), else CH_FETCHING if the chunks of those missing
 * are all in flight, else CH_ABSENT; -ESTALE if @ce was replaced
 */
int cache_range_state(struct cache *c, const struct centry *ce, uint64_t off,
		      uint64_t len);
/* cache_missing() - chunks of @ce neither cached nor in flight */
uint32_t cache_missing(struct cache *c, const struct centry *ce);
/* cache_is_complete() - every chunk of @ce is on disk */
bool cache_is_complete(struct cache *c, const struct centry *ce);

/*
 * cache_admits() - would the policy make room for @need more bytes of
 * @ce now (free space, or victims it prefers to give up)?  Nothing is
 * evicted or reserved: a check before fetching ahead.
 */
bool cache_admits(struct cache *c, const struct centry *ce, uint64_t need,
		  enum admit_kind kind);
/* cache_free() - bytes under the limit not used or reserved */
uint64_t cache_free(struct cache *c);

/* cache_file_bytes() - bytes of file @fid held in the cache */
uint64_t cache_file_bytes(struct cache *c, uint64_t fid);
/* cache_file_unverified() - chunks of file @fid held in the cache and
 * not verified yet since the start (an open of it with passthrough
 * waits for them) */
uint32_t cache_file_unverified(struct cache *c, uint64_t fid);
/* cache_pin() - pin or unpin file @fid (pinned files are never evicted) */
int cache_pin(struct cache *c, uint64_t fid, bool pin);
/*
 * cache_evict_file() - drop @fid's cached bytes now, or, while the file is
 * open or otherwise in use (a reader, the kernel, the verifier), at the
 * release of its last reference.  Return: 0 (done, or nothing cached),
 * 1 (deferred to that release).
 */
int cache_evict_file(struct cache *c, uint64_t fid);
/* cache_set_future() - give the policy the future (lists.h); its
 * functions (policy.h) run under the cache lock */
void cache_set_future(struct cache *c, const struct policy_future *f);
/* cache_heat_each() - @fn for every file with heat, under the cache lock
 * (@fn must not call the cache); stops on != 0, which it returns */
int cache_heat_each(struct cache *c,
		    int (*fn)(void *arg, const struct heat_row *r), void *arg);
/* cache_usage() - bytes used and the limit, files cached */
void cache_usage(struct cache *c, uint64_t *used, uint64_t *limit,
		 uint64_t *files);

#endif
