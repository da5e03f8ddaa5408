/* SPDX-License-Identifier: MIT */
/*
 * chunkbuf.h - a chunk's bytes in memory, shared by reference counting.
 * The data area is 4 KiB aligned (O_DIRECT) and holds a chunk (a file's
 * last or only chunk may be shorter than the chunk size).
 * Any thread may take or drop references; the last put frees it.
 *
 * Every data area is an anonymous mapping of its own, so memory a buffer
 * gave back leaves the process (malloc'ed 4 MiB blocks stayed in glibc's
 * per-thread arenas, and malloc'ed small ones fragmented the heap that
 * the per-file structures share: RSS grew with the files read).  A small
 * file's chunk gets a mapping of its own length rounded up to a power of
 * two from 4 KiB to 256 KiB; the last put keeps such a mapping on a free
 * list of its size class, up to CHUNKBUF_POOL_MAX bytes in all, so the
 * next one of that class costs no system call and no page fault (a
 * fresh mapping, its faults and its unmapping per 100 KiB file cost more
 * than reading it from the cache).  Larger ones are unmapped at once.
 * A buffer may carry a charge of the memory budget (membudget.h), given
 * back by the last put; the idle pool is not charged (it is bounded).
 */
#ifndef FUSEFS_CHUNKBUF_H
#define FUSEFS_CHUNKBUF_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "membudget.h"

/* idle small mappings kept for reuse, in bytes */
#define CHUNKBUF_POOL_MAX	(4U << 20)

struct chunkbuf {
	atomic_int ref;
	uint32_t len;		/* valid bytes */
	uint32_t base;		/* offset in its chunk of data[0] (0 but
				 * for a random read's pages) */
	char *data;		/* chunk_size bytes, 4 KiB aligned */
	size_t mapped;		/* bytes mapped at data */
	struct membudget *mb;	/* charged to (NULL: not charged) */
	enum mb_class cls;
};

/* chunkbuf_new() - a buffer of @size bytes, one reference, not charged;
 * NULL: ENOMEM */
struct chunkbuf *chunkbuf_new(uint32_t size);
/*
 * chunkbuf_new_charged() - the same, for @size bytes the caller already
 * charged to @mb as @cls (chunkbuf_charge()); the last put gives them
 * back.  On NULL (ENOMEM) the charge was given back already.
 */
struct chunkbuf *chunkbuf_new_charged(uint32_t size, struct membudget *mb,
				      enum mb_class cls);
/* chunkbuf_charge() - the bytes a buffer of @size bytes is charged: its
 * mapping (4 KiB multiples; a power of two up to 256 KiB) */
uint64_t chunkbuf_charge(uint32_t size);
struct chunkbuf *chunkbuf_get(struct chunkbuf *cb);
/* chunkbuf_put() - drop a reference; NULL is fine */
void chunkbuf_put(struct chunkbuf *cb);
/* chunkbuf_pooled() - bytes of idle mappings kept for reuse now */
size_t chunkbuf_pooled(void);
/* chunkbuf_refs() - references held now (1: only the caller's) */
int chunkbuf_refs(struct chunkbuf *cb);

#endif
