/* SPDX-License-Identifier: MIT */
/*
 * stageset.h - chunks staged in memory for a reader that comes soon
 * (fetch_stage(), prefetch.h): fetched ahead, never written to the cache,
 * consumed by the reader and dropped with the file's last close.  Keyed
 * by (file, version generation, chunk number); a key names immutable
 * bytes, so an entry is right as long as it exists.  Grouped by file, so
 * that a close drops its file's chunks without a scan of the set.  The
 * set counts the bytes it holds (the buffers' mapped sizes: a small
 * file's chunk takes its own size, not a whole chunk's); the owner bounds
 * it.  Nothing is ever replaced behind the owner's back.
 *
 * Not locked: the owner (fetch.c, under its lock) serializes.
 */
#ifndef FUSEFS_STAGESET_H
#define FUSEFS_STAGESET_H

#include <stdbool.h>
#include <stdint.h>

#include "chunkbuf.h"
#include "htab.h"

struct stageset {
	struct htab files;		/* (fid, gen) -> struct sfile */
	uint64_t bytes;			/* mapped bytes of every buffer held */
	unsigned chunks;
};

void stageset_init(struct stageset *s);
void stageset_release(struct stageset *s);
/* stageset_get() - the chunk (a use: it counts as read) or NULL; no
 * reference is taken */
struct chunkbuf *stageset_get(struct stageset *s, uint64_t fid, uint64_t gen,
			      uint32_t n);
/* stageset_has() - is the chunk held (a look, not a use) */
bool stageset_has(const struct stageset *s, uint64_t fid, uint64_t gen,
		  uint32_t n);
/* stageset_has_before() - is any chunk of @fid at @gen below @n held */
bool stageset_has_before(const struct stageset *s, uint64_t fid, uint64_t gen,
			 uint32_t n);
/* stageset_put() - hold @cb (a reference is taken) as chunk @n of @fid at
 * @gen, not read yet; an entry with that key is replaced.  0 or -ENOMEM */
int stageset_put(struct stageset *s, uint64_t fid, uint64_t gen, uint32_t n,
		 struct chunkbuf *cb);
/*
 * stageset_hold() - mark the chunk as being written to the cache and
 * return it with a reference for the caller, or NULL (not held, or
 * another writer has it).  Until stageset_unhold() or stageset_forget(),
 * stageset_drop_file() and stageset_drop_unless() pass it by: a reader
 * must find its bytes while its cache state says it is being fetched.
 */
struct chunkbuf *stageset_hold(struct stageset *s, uint64_t fid,
			       uint64_t gen, uint32_t n);
/* stageset_unhold() - the write did not happen: droppable again */
void stageset_unhold(struct stageset *s, uint64_t fid, uint64_t gen,
		     uint32_t n);
/* stageset_forget() - drop one chunk (held or not); false if it was not
 * in the set */
bool stageset_forget(struct stageset *s, uint64_t fid, uint64_t gen,
		     uint32_t n);
/* stageset_drop_file() - drop every chunk of @fid at @gen but those being
 * written (stageset_hold()).  Return: how many of the dropped ones were
 * never read (stageset_get()) */
unsigned stageset_drop_file(struct stageset *s, uint64_t fid, uint64_t gen);
/*
 * stageset_list_file() - the chunk numbers of @fid at @gen in the set, in
 * order, into *@out (malloc'ed; the caller frees it).
 * Return: how many (0: none, *@out NULL), or -ENOMEM.
 */
int stageset_list_file(const struct stageset *s, uint64_t fid, uint64_t gen,
		       uint32_t **out);
/*
 * stageset_drop_unless() - drop every file for which @keep(@arg, fid) is
 * false (but chunks being written).  Return: how many dropped chunks were
 * never read.
 */
unsigned stageset_drop_unless(struct stageset *s,
			      bool (*keep)(void *arg, uint64_t fid), void *arg);

#endif
