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
/* stageset_forget() - drop one chunk; false if it was not held */
bool stageset_forget(struct stageset *s, uint64_t fid, uint64_t gen,
		     uint32_t n);
/* stageset_drop_file() - drop every chunk of @fid at @gen.  Return: how
 * many of them were never read (stageset_get()) */
unsigned stageset_drop_file(struct stageset *s, uint64_t fid, uint64_t gen);
/* one chunk of a file, as stageset_list_file() gives it */
struct staged_chunk {
	uint32_t n;
	struct chunkbuf *cb;		/* a reference of the caller's */
};
/*
 * stageset_list_file() - every chunk of @fid at @gen, in chunk order, into
 * *@out (malloc'ed; free it and put each cb); they stay in the set.
 * Return: how many (0: none, *@out NULL), or -ENOMEM.
 */
int stageset_list_file(const struct stageset *s, uint64_t fid, uint64_t gen,
		       struct staged_chunk **out);
/*
 * stageset_drop_unless() - drop every file for which @keep(@arg, fid) is
 * false.  Return: how many dropped chunks were never read.
 */
unsigned stageset_drop_unless(struct stageset *s,
			      bool (*keep)(void *arg, uint64_t fid), void *arg);

#endif
