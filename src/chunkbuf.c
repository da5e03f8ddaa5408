// SPDX-License-Identifier: MIT
/* chunkbuf.c - see chunkbuf.h */
#include <stdlib.h>
#include <sys/mman.h>

#include "chunkbuf.h"

#define ALIGN	4096
#define HEAP_MAX	(256U << 10)	/* larger: a mapping of its own */

uint64_t chunkbuf_charge(uint32_t size)
{
	return ((uint64_t)(size ? size : ALIGN) + ALIGN - 1) & ~(uint64_t)(ALIGN - 1);
}

struct chunkbuf *chunkbuf_new_charged(uint32_t size, struct membudget *mb,
				      enum mb_class cls)
{
	struct chunkbuf *cb = malloc(sizeof(*cb));
	size_t len = chunkbuf_charge(size);
	void *p = MAP_FAILED;

	if (cb && len <= HEAP_MAX) {
		/* glibc reuses small blocks: no system call, no faults */
		p = aligned_alloc(ALIGN, len);
		if (!p)
			p = MAP_FAILED;
	} else if (cb) {
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	}
	if (p == MAP_FAILED) {
		free(cb);
		if (mb)
			membudget_give(mb, cls, len);
		return NULL;
	}
	cb->data = p;
	cb->mapped = len;
	cb->mb = mb;
	cb->cls = cls;
	atomic_init(&cb->ref, 1);
	cb->len = 0;
	return cb;
}

struct chunkbuf *chunkbuf_new(uint32_t size)
{
	return chunkbuf_new_charged(size, NULL, MB_DEMAND);
}

struct chunkbuf *chunkbuf_get(struct chunkbuf *cb)
{
	atomic_fetch_add(&cb->ref, 1);
	return cb;
}

int chunkbuf_refs(struct chunkbuf *cb)
{
	return atomic_load(&cb->ref);
}

void chunkbuf_put(struct chunkbuf *cb)
{
	if (cb && atomic_fetch_sub(&cb->ref, 1) == 1) {
		if (cb->mapped <= HEAP_MAX)
			free(cb->data);
		else
			munmap(cb->data, cb->mapped);
		if (cb->mb)
			membudget_give(cb->mb, cb->cls, cb->mapped);
		free(cb);
	}
}
