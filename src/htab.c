// SPDX-License-Identifier: MIT
/* htab.c - see htab.h */
#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "htab.h"

static uint64_t htab_seed;

/* before main() and any thread: read-only afterwards */
__attribute__((constructor)) static void htab_seed_init(void)
{
	struct timespec ts;

	if (getrandom(&htab_seed, sizeof(htab_seed), GRND_NONBLOCK) ==
	    sizeof(htab_seed))
		return;
	/* no entropy yet (early boot): still unknown to a remote party */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	htab_seed = (uint64_t)ts.tv_nsec << 32 ^ (uint64_t)ts.tv_sec ^
		    (uint64_t)getpid() << 16 ^ (uintptr_t)&ts;
}

void htab_init(struct htab *h, uint64_t (*key_of)(const void *item))
{
	h->slot = NULL;
	h->keys = NULL;
	h->cap = h->used = 0;
	h->key_of = key_of;
}

void htab_free(struct htab *h, void (*free_item)(void *item))
{
	size_t i;

	for (i = 0; i < h->cap; i++)
		if (h->slot[i])
			free_item(h->slot[i]);
	htab_release(h);
}

void htab_release(struct htab *h)
{
	free(h->slot);
	free(h->keys);
	h->slot = NULL;
	h->keys = NULL;
	h->cap = h->used = 0;
}

static size_t home(const struct htab *h, uint64_t key)
{
	/* the seeded key through a splitmix64-style finalizer */
	key ^= htab_seed;
	key ^= key >> 30;
	key *= 0xbf58476d1ce4e5b9ULL;
	key ^= key >> 31;
	key *= 0x7fb5d329728ea185ULL;
	key ^= key >> 27;
	return key & (h->cap - 1);
}

/* the slot holding @key, or the empty slot where it would go (probes
 * compare the keys array: no item is touched but the one found) */
static size_t find(const struct htab *h, uint64_t key)
{
	size_t i = home(h, key);

	while (h->slot[i] && h->keys[i] != key)
		i = (i + 1) & (h->cap - 1);
	return i;
}

void *htab_get(const struct htab *h, uint64_t key)
{
	return h->cap ? h->slot[find(h, key)] : NULL;
}

static void place(struct htab *h, uint64_t key, void *item)
{
	size_t i = find(h, key);

	h->slot[i] = item;
	h->keys[i] = key;
}

static int grow(struct htab *h)
{
	void **old = h->slot;
	uint64_t *oldkeys = h->keys;
	size_t i, oldcap = h->cap;

	h->cap = oldcap ? oldcap * 2 : 64;
	h->slot = calloc(h->cap, sizeof(*h->slot));
	h->keys = malloc(h->cap * sizeof(*h->keys));
	if (!h->slot || !h->keys) {
		free(h->slot);
		free(h->keys);
		h->slot = old;
		h->keys = oldkeys;
		h->cap = oldcap;
		return -ENOMEM;
	}
	for (i = 0; i < oldcap; i++)
		if (old[i])
			place(h, oldkeys[i], old[i]);
	free(old);
	free(oldkeys);
	return 0;
}

int htab_put(struct htab *h, void *item)
{
	if ((h->used + 1) * 2 > h->cap && grow(h))
		return -ENOMEM;
	place(h, h->key_of(item), item);
	h->used++;
	return 0;
}

void *htab_del(struct htab *h, uint64_t key)
{
	size_t i, j;
	void *item;

	if (!h->cap)
		return NULL;
	i = find(h, key);
	item = h->slot[i];
	if (!item)
		return NULL;
	h->slot[i] = NULL;
	h->used--;
	/* shift back followers whose home lies cyclically at or before i */
	for (j = (i + 1) & (h->cap - 1); h->slot[j]; j = (j + 1) & (h->cap - 1)) {
		size_t k = home(h, h->keys[j]);

		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			h->slot[i] = h->slot[j];
			h->keys[i] = h->keys[j];
			h->slot[j] = NULL;
			i = j;
		}
	}
	return item;
}
