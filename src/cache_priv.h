/* SPDX-License-Identifier: MIT */
/*
 * cache_priv.h - the cache module's own structures, shared by cache.c
 * (entries, chunk states, space), cache_verify.c (checking an earlier
 * run's chunks), cache_pages.c (pages random reads stored), cache_load.c
 * (start-up: the cache directory, the index, orphan data files),
 * cache_move.c and cache_spare.c, and by the unit
 * tests of the cache.
 */
#ifndef FUSEFS_CACHE_PRIV_H
#define FUSEFS_CACHE_PRIV_H

#include <pthread.h>
#include <sys/stat.h>

#include "bgthread.h"
#include "cache.h"
#include "htab.h"

#define BLK		4096ULL
/* the largest object the cache takes (16 TiB) */
#define CACHE_MAX_SIZE	NS_SIZE_MAX

struct centry {
	uint64_t fid;		/* == the file's inode number */
	char *key;		/* backend object name ("" until known) */
	char version[NS_VERSION_MAX];
	uint64_t gen;		/* version_gen(version, size) */
	uint64_t size;
	int64_t mtime;
	uint32_t nchunks;
	uint8_t *state;		/* enum chunk_state per chunk */
	uint8_t *verifying;	/* 1: a thread reads this UNVERIFIED chunk to
				 * check it; others wait (single flight) */
	uint32_t unverified;	/* chunks in CH_UNVERIFIED */
	uint64_t *sum;		/* XXH3 per present chunk */
	/*
	 * Per chunk, NULL or a bitmap of its 4 KiB pages that random reads
	 * fetched and wrote to the data file (cache_pages.c): the chunk is
	 * ABSENT (or FETCHING: a whole fetch will replace them), the pages
	 * count in @used.  Not indexed: a restart punches them
	 * (cache_load.c).  NULL until the first page is stored.
	 */
	uint64_t **pages;
	uint64_t used;		/* bytes accounted on disk */
	int opens;		/* open file handles */
	int busy;		/* references without an open handle */
	/*
	 * Of its opens, those the kernel reads through the data file itself
	 * (cache_passthrough_fd()); they hold the file whole, and
	 * @pt_bytes of it count against struct cache's pt_bytes.  Opens on
	 * the daemon path do not hold it: its chunks may be evicted while
	 * it is open, but for those a reply is being copied from (busy).
	 */
	int pt_opens;
	uint64_t pt_bytes;
	bool stale;		/* replaced by a newer version, out of table */
	bool opening;		/* a thread opens the data files (no lock) */
	bool on_disk;		/* cache_load: its data file was found */
	bool evict_asked;	/* evicted at the last release (in use when
				 * cache_evict_file() asked) */
	/*
	 * Its data file was given to the kernel (a passthrough backing
	 * file): a mapping made through an open of it reads the file after
	 * that open's RELEASE, for as long as it lives, and an open of a
	 * newer version may share it.  So the file is never changed in place
	 * again: no chunk punched (its last chunks go by a move of the rest
	 * to a new file, cache_move_head(), after which the entry is lent no
	 * more; or the whole file goes), never made a spare (unlinked: the
	 * kernel keeps reading the unlinked inode).
	 */
	bool lent;
	/* the next stale lent entry (struct cache's lent_stale) */
	struct centry *lent_next;
	/*
	 * data file: buffered, O_DIRECT (-1: closed).  Set under the lock;
	 * read without it by holders of a reference.  A read on an open
	 * file handle is ordered before that handle's release (which may
	 * close these) only through /dev/fuse (the reply, then the
	 * kernel's RELEASE, on clone fds): no C11 or ThreadSanitizer rule
	 * sees that, so the fields are atomic (tests/stress).
	 */
	_Atomic int fd, dfd;
	/*
	 * Released by every reader after its last look at this entry without
	 * the lock (cache_read_done()), acquired by centry_free(): the same
	 * ordering for ThreadSanitizer, which cannot see that the kernel
	 * answers RELEASE only after the READ's reply.
	 */
	atomic_uint reads_done;
	/* unused but its files still open: in the cache's idle list */
	struct centry *idle_prev, *idle_next;
	bool idle;
	struct policy_node *pn;	/* heat and eviction order, owned by policy */
};

/* a data file being unlinked: no new entry of @fid until it is gone */
struct grave {
	uint64_t fid, gen;
	int fd, dfd;		/* still open (an idle entry's): closed first */
	bool spare;		/* may become a spare (not lent) */
	bool keep;		/* a live entry has the same path: leave it */
	struct grave *next;	/* in cache.graves */
	struct grave *todo;	/* in the burying thread's list */
};

/*
 * Empty data files for new entries (cache_spare.c): evicted files renamed
 * to DIR/data/spare/SLOT and truncated, instead of unlinked, and renamed
 * into place for the next new entry, instead of created.
 */
#define SPARES_MAX	256
struct spares {
	pthread_mutex_t lock;	/* a leaf: nothing is taken under it */
	unsigned nfull, nfree;
	uint16_t full[SPARES_MAX];	/* slots holding an empty file */
	uint16_t free[SPARES_MAX];	/* slots to keep one in */
};

struct cache {
	/*
	 * The cache lock.  Guards everything below but the constants.
	 * Order: fetch lock -> cache lock -> meta queue lock, lists lock.
	 */
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* data files opened, graves gone, chunks
				 * verified */
	struct htab tab;	/* fid -> centry (not stale) */
	struct policy pol;
	struct grave *graves;
	/*
	 * Stale entries that were lent, until they go: a new entry of the
	 * same version (A, B, then A again) has the same data file path, so
	 * it opens the file the kernel may still read for them, and is lent
	 * from the start (never punched, never made a spare, and while such
	 * a stale entry lives never moved: the whole file goes).
	 */
	struct centry *lent_stale;
	/* bytes of files held by passthrough opens: at most half the limit
	 * (cache_passthrough_fd()), so that they never stop eviction */
	uint64_t pt_bytes;
	uint64_t files;
	uint64_t unverified;	/* CH_UNVERIFIED chunks of entries in tab */
	/*
	 * Entries nobody uses whose data files stay open, oldest first, so
	 * that the next open of the file opens nothing (at most idle_max;
	 * the oldest is closed beyond that).
	 */
	struct centry *idle_head, *idle_tail;
	unsigned nidle;
	/* constant after cache_open() */
	struct meta *meta;
	struct stats *st;
	char *dir;		/* for messages only: nothing opens by it */
	int dirfd;		/* the cache directory, opened once
				 * (cache_check_dir()); every file in it is
				 * opened relative to this, O_NOFOLLOW */
	int lock_fd;
	uint32_t chunk_size;
	bool direct;		/* O_DIRECT usable for the data files */
	bool trust_stop;	/* --trust-clean-stop (cache_stop.c) */
	int64_t started_ns;	/* CLOCK_REALTIME at cache_open() */
	unsigned idle_max;	/* entries kept open unused (RLIMIT_NOFILE) */
	struct bgthread *heat;	/* flushes heat to the index */
	struct spares spares;	/* its own lock (a leaf) */
};

static inline uint64_t blocks(uint64_t len)
{
	return (len + BLK - 1) & ~(BLK - 1);
}

void centry_free(struct centry *ce);

/*
 * Page maps (cache_pages.c), under the cache lock.  Pages are given as
 * byte ranges [@lo, @hi) inside chunk @n, @lo 4 KiB aligned, @hi rounded
 * up to a page.  cover: are they all stored; bytes: the stored pages'
 * bytes (4 KiB each); mark: note them stored, *@added the bytes not
 * stored before (0 or -ENOMEM); drop: forget chunk @n's pages, return
 * their bytes (the caller punches and uncharges); free: every map.
 */
bool cache_pages_cover_locked(const struct centry *ce, uint32_t n,
			      uint32_t lo, uint32_t hi);
uint64_t cache_pages_bytes_locked(const struct cache *c,
				  const struct centry *ce, uint32_t n);
int cache_pages_mark_locked(const struct cache *c, struct centry *ce,
			    uint32_t n, uint32_t lo, uint32_t hi,
			    uint64_t *added);
uint64_t cache_pages_drop_locked(const struct cache *c, struct centry *ce,
				 uint32_t n);
void cache_pages_free(struct centry *ce);
/*
 * The cache's own helpers, shared by its files (cache.c defines them):
 * cache_ensure_files() opens @ce's data file if it is not (a reference
 * held; unlocked; -errno of the open); cache_direct_fd() its O_DIRECT
 * descriptor, opened at first use (-1: use the buffered one);
 * cache_pread_full() a pread() looped to @len or EOF (bytes, -errno);
 * cache_refs_changed_locked() tells the policy and the idle list that
 * @ce's references changed; cache_owner_node() the node @ce's bytes count
 * for (NULL once stale); cache_state_locked() chunk @n's state, -ESTALE,
 * -ERANGE.
 */
int cache_ensure_files(struct cache *c, struct centry *ce);
int cache_direct_fd(struct cache *c, struct centry *ce);
ssize_t cache_pread_full(int fd, char *buf, size_t len, uint64_t off);
void cache_refs_changed_locked(struct cache *c, struct centry *ce);
struct policy_node *cache_owner_node(const struct centry *ce);
int cache_state_locked(const struct centry *ce, uint32_t n);
/*
 * cache_first_not_present_locked() - (cache_verify.c) the first chunk of
 * @ce from *@n on that is not PRESENT: its state with *@n its number, or
 * CH_PRESENT (*@n == nchunks) when there is none, or -ESTALE.  Locked.
 */
int cache_first_not_present_locked(const struct centry *ce, uint32_t *n);
/* centry_insert() - a new entry (no references) in the table; 0, or
 * -ENOMEM, -EFBIG (a size above CACHE_MAX_SIZE) */
int centry_insert(struct cache *c, uint64_t fid, const char *key,
		  const char *version, uint64_t size, int64_t mtime,
		  struct centry **out);
/* cache_data_path() - the data file of @fid at @gen, relative to
 * c->dirfd ("data/XX/FID-GEN") */
void cache_data_path(const struct cache *c, uint64_t fid, uint64_t gen,
		     char *out, size_t len);
/*
 * cache_data_open() - openat(c->dirfd, @rel, @flags | O_NOFOLLOW) of a data
 * file, which must be a regular file of ours with one link (safe_openat()):
 * anything else at @rel (a planted hard link, a device, a symlink) is
 * never written through.  With O_CREAT, such a thing is unlinked (its
 * other names untouched) and a new empty file created in its place.
 * Return: the fd, or -1 with errno set.
 */
int cache_data_open(struct cache *c, const char *rel, int flags);
/*
 * A lent entry's tail (cache.h, cache_passthrough_fd()) goes by a move:
 * its kept chunks are copied into DIR/data/XX/CACHE_MOVE_PREFIX<name>,
 * which is renamed over its data file.  The kernel reads on from the old
 * file (unlinked, never changed); a crash leaves at most a temporary file
 * (removed by the next start's orphan sweep) or a data file short of the
 * chunks whose drop was not committed (the sweep forgets them).  At most
 * CACHE_MOVE_MAX bytes are copied (under the cache lock); above that the
 * whole file goes, as before.
 */
#define CACHE_MOVE_PREFIX	"move-"
#define CACHE_MOVE_MAX		(64ULL << 20)
/* cache_move_path() - the temporary file of a move of @fid at @gen */
void cache_move_path(const struct cache *c, uint64_t fid, uint64_t gen,
		     char *out, size_t len);
/*
 * cache_move_head() - copy the cached chunks of @ce below @end (its state,
 * under the cache lock; @ce idle) into a new file and rename it over @ce's
 * data file.  @ce's descriptors, if open, still reach the old file.
 * Return: 0, or -errno (nothing renamed, the temporary file removed).
 */
int cache_move_head(struct cache *c, const struct centry *ce, uint32_t end);
/* spares_init() - at start-up, before any thread: empty DIR/data/spare
 * (made if missing; without it every spare_*() fails) */
void spares_init(struct cache *c);
void spares_destroy(struct cache *c);
/*
 * spare_keep() - keep the data file at @path (of an evicted entry; @fd open
 * on it, or -1) as an empty spare.  No lock held.
 * Return: true if @path is gone (a spare now, or removed: a spare that
 * could not be emptied is), false if the caller must unlink it (no free
 * slot, or the rename failed).
 */
bool spare_keep(struct cache *c, const char *path, int fd);
/*
 * spare_take() - an empty spare renamed to @path, which must not exist
 * (it stays untouched if it does).  No lock held.
 * Return: true if @path is now an empty file; false: create it.
 */
bool spare_take(struct cache *c, const char *path);
/*
 * cache_load() - start-up, before any thread: lock the directory, probe
 * O_DIRECT, load the index into entries, sweep orphan data files.
 * Return: 0 or -errno (message printed).
 */
int cache_load(struct cache *c, const struct fusefs_conf *cf);

/*
 * Clean-stop records (cache_stop.c), single-threaded.
 * cache_stop_record() - at a stop, after every thread that writes data
 * files: commit the index queue, then record each data file whose
 * indexed chunks are all verified, fsync()ed first if this run changed
 * it (replacing the records of the last stop).  A file whose sync fails
 * is not recorded; nothing is if the commit fails.
 * cache_stop_take() - at start, after the index is loaded: the records
 * of the last clean stop into @set (empty with --trust-clean-stop off or
 * if they cannot be dropped), dropped from the index durably.
 * cache_stop_trust() - does @ce's data file, of stat @sb, and its
 * loaded chunk records match its record in @set?  Then its UNVERIFIED
 * chunks become PRESENT without a read; true.
 */
void cache_stop_record(struct cache *c);
void cache_stop_take(struct cache *c, struct htab *set);
bool cache_stop_trust(struct cache *c, struct htab *set, struct centry *ce,
		      const struct stat *sb);
void cache_stop_release(struct htab *set);

#endif
