// SPDX-License-Identifier: MIT
/* chunkbuf.c - see chunkbuf.h */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "chunkbuf.h"

#define ALIGN		4096
#define POOL_CLASSES	7		/* 4 KiB, 8 KiB, ... 256 KiB */
#define POOL_LARGEST	(ALIGN << (POOL_CLASSES - 1))

/* idle small mappings, one free list per size class, linked through
 * their first bytes; at most CHUNKBUF_POOL_MAX bytes in all */
static struct {
	pthread_mutex_t lock;
	void *head[POOL_CLASSES];
	size_t bytes;
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* the size class of a mapping of @len bytes (a power of two <= 256 KiB) */
static unsigned size_class(size_t len)
{
	unsigned c = 0;

	while ((size_t)ALIGN << c < len)
		c++;
	return c;
}

uint64_t chunkbuf_charge(uint32_t size)
{
	uint64_t len = ((uint64_t)(size ? size : ALIGN) + ALIGN - 1) &
		       ~(uint64_t)(ALIGN - 1);

	return len <= POOL_LARGEST ? (uint64_t)ALIGN << size_class(len) : len;
}

static void *map(size_t len)
{
	void *p = NULL;

	if (len <= POOL_LARGEST) {
		unsigned c = size_class(len);

		pthread_mutex_lock(&pool.lock);
		p = pool.head[c];
		if (p) {
			pool.head[c] = *(void **)p;
			pool.bytes -= len;
		}
		pthread_mutex_unlock(&pool.lock);
		if (p)
			return p;
	}
	return mmap(NULL, len, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

static void unmap(void *p, size_t len)
{
	if (len <= POOL_LARGEST) {
		unsigned c = size_class(len);
		bool kept = false;

		pthread_mutex_lock(&pool.lock);
		if (pool.bytes + len <= CHUNKBUF_POOL_MAX) {
			*(void **)p = pool.head[c];
			pool.head[c] = p;
			pool.bytes += len;
			kept = true;
		}
		pthread_mutex_unlock(&pool.lock);
		if (kept)
			return;
	}
	munmap(p, len);
}

size_t chunkbuf_pooled(void)
{
	size_t n;

	pthread_mutex_lock(&pool.lock);
	n = pool.bytes;
	pthread_mutex_unlock(&pool.lock);
	return n;
}

struct chunkbuf *chunkbuf_new_charged(uint32_t size, struct membudget *mb,
				      enum mb_class cls)
{
	struct chunkbuf *cb = malloc(sizeof(*cb));
	size_t len = chunkbuf_charge(size);
	void *p = cb ? map(len) : MAP_FAILED;

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
	cb->base = 0;
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
		unmap(cb->data, cb->mapped);
		if (cb->mb)
			membudget_give(cb->mb, cb->cls, cb->mapped);
		free(cb);
	}
}
