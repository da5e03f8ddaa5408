/* SPDX-License-Identifier: MIT */
/*
 * cache_priv.h - the cache module's own structures, shared by cache.c
 * (entries, chunk states, space) and cache_load.c (start-up: the cache
 * directory, the index, orphan data files).  Nothing else includes it.
 */
#ifndef FUSEFS_CACHE_PRIV_H
#define FUSEFS_CACHE_PRIV_H

#include <pthread.h>

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
	uint64_t used;		/* bytes accounted on disk */
	int opens;		/* open file handles */
	int busy;		/* references without an open handle */
	bool stale;		/* replaced by a newer version, out of table */
	bool opening;		/* a thread opens the data files (no lock) */
	bool on_disk;		/* cache_load: its data file was found */
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
	struct grave *next;	/* in cache.graves */
	struct grave *todo;	/* in the burying thread's list */
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
	char *dir;
	int lock_fd;
	uint32_t chunk_size;
	bool direct;		/* O_DIRECT usable for the data files */
	unsigned idle_max;	/* entries kept open unused (RLIMIT_NOFILE) */
	struct bgthread *heat;	/* flushes heat to the index */
};

static inline uint64_t blocks(uint64_t len)
{
	return (len + BLK - 1) & ~(BLK - 1);
}

void centry_free(struct centry *ce);
/* centry_insert() - a new entry (no references) in the table; 0, or
 * -ENOMEM, -EFBIG (a size above CACHE_MAX_SIZE) */
int centry_insert(struct cache *c, uint64_t fid, const char *key,
		  const char *version, uint64_t size, int64_t mtime,
		  struct centry **out);
/* cache_data_path() - the data file of @fid at @gen */
void cache_data_path(const struct cache *c, uint64_t fid, uint64_t gen,
		     char *out, size_t len);
/*
 * cache_load() - start-up, before any thread: lock the directory, probe
 * O_DIRECT, load the index into entries, sweep orphan data files.
 * Return: 0 or -errno (message printed).
 */
int cache_load(struct cache *c, const struct fusefs_conf *cf);

#endif
