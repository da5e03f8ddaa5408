/* SPDX-License-Identifier: MIT */
/*
 * chunkbuf.h - a chunk's bytes in memory, shared by reference counting.
 * The data area is 4 KiB aligned (O_DIRECT) and holds a whole chunk.
 * Any thread may take or drop references; the last put frees it.
 *
 * A data area of over 256 KiB is its own anonymous mapping, so the last
 * put returns the memory to the system at once (malloc'ed 4 MiB blocks
 * stayed in glibc's per-thread arenas: RSS well above what was in use).
 * Smaller ones (a small file's chunk) come from malloc: a mapping, its
 * page faults and its unmapping cost more than the read of the chunk
 * (first epoch after a restart of 100 KiB files on the daemon path: 2.9
 * -> 1.8 s/GiB of daemon CPU); what glibc keeps of them is bounded by
 * the memory budget that charges them.  A buffer
 * may carry a charge of the memory budget (membudget.h), given back by
 * the last put.
 */
#ifndef FUSEFS_CHUNKBUF_H
#define FUSEFS_CHUNKBUF_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "membudget.h"

struct chunkbuf {
	atomic_int ref;
	uint32_t len;		/* valid bytes */
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
/* chunkbuf_charge() - the bytes a buffer of @size bytes is charged */
uint64_t chunkbuf_charge(uint32_t size);
struct chunkbuf *chunkbuf_get(struct chunkbuf *cb);
/* chunkbuf_put() - drop a reference; NULL is fine */
void chunkbuf_put(struct chunkbuf *cb);
/* chunkbuf_refs() - references held now (1: only the caller's) */
int chunkbuf_refs(struct chunkbuf *cb);

#endif
