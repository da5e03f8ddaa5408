// SPDX-License-Identifier: MIT
/* chunkbuf.c - see chunkbuf.h */
#include <stdlib.h>

#include "chunkbuf.h"

#define ALIGN	4096

struct chunkbuf *chunkbuf_new(uint32_t size)
{
	struct chunkbuf *cb = malloc(sizeof(*cb));

	if (!cb)
		return NULL;
	if (posix_memalign((void **)&cb->data, ALIGN, size ? size : ALIGN)) {
		free(cb);
		return NULL;
	}
	atomic_init(&cb->ref, 1);
	cb->len = 0;
	return cb;
}

struct chunkbuf *chunkbuf_get(struct chunkbuf *cb)
{
	atomic_fetch_add(&cb->ref, 1);
	return cb;
}

void chunkbuf_put(struct chunkbuf *cb)
{
	if (cb && atomic_fetch_sub(&cb->ref, 1) == 1) {
		free(cb->data);
		free(cb);
	}
}
