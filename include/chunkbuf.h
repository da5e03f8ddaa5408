/* SPDX-License-Identifier: MIT */
/*
 * chunkbuf.h - a chunk's bytes in memory, shared by reference counting.
 * The data area is 4 KiB aligned (O_DIRECT) and holds a whole chunk.
 * Any thread may take or drop references; the last put frees it.
 */
#ifndef FUSEFS_CHUNKBUF_H
#define FUSEFS_CHUNKBUF_H

#include <stdatomic.h>
#include <stdint.h>

struct chunkbuf {
	atomic_int ref;
	uint32_t len;		/* valid bytes */
	char *data;		/* chunk_size bytes, 4 KiB aligned */
};

/* chunkbuf_new() - a buffer of @size bytes, one reference; NULL: ENOMEM */
struct chunkbuf *chunkbuf_new(uint32_t size);
struct chunkbuf *chunkbuf_get(struct chunkbuf *cb);
/* chunkbuf_put() - drop a reference; NULL is fine */
void chunkbuf_put(struct chunkbuf *cb);

#endif
