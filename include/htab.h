/* SPDX-License-Identifier: MIT */
/*
 * htab.h - open-addressing hash table of pointers keyed by a uint64_t
 * that the stored object carries (read through @key_of when it is put,
 * then kept beside the pointer, so probes never touch other items).
 * Linear probing, deletion by backward shift, grows at half load.  Not
 * locked: the owner serializes access.  An item's key must not change
 * while it is in the table.
 *
 * Keys are often hashes of names that others choose (inode numbers of
 * object names): a key's home slot mixes it with a random per-process
 * seed (getrandom() at start), so nobody can pick keys that all land in
 * one cluster and turn lookups linear.
 */
#ifndef FUSEFS_HTAB_H
#define FUSEFS_HTAB_H

#include <stddef.h>
#include <stdint.h>

struct htab {
	void **slot;
	uint64_t *keys;			/* keys[i] valid where slot[i] */
	size_t cap, used;		/* cap is a power of two or 0 */
	uint64_t (*key_of)(const void *item);
};

void htab_init(struct htab *h, uint64_t (*key_of)(const void *item));
void htab_release(struct htab *h);	/* frees the slots, not the items */
/* htab_free() - @free_item on every item, then htab_release() */
void htab_free(struct htab *h, void (*free_item)(void *item));
/* htab_get() - the item with @key or NULL */
void *htab_get(const struct htab *h, uint64_t key);
/* htab_put() - insert @item (its key must be absent); 0 or -ENOMEM */
int htab_put(struct htab *h, void *item);
/* htab_del() - remove the item with @key; returns it or NULL */
void *htab_del(struct htab *h, uint64_t key);
/* iterate: for (i = 0; i < h->cap; i++) if (h->slot[i]) ... */

#endif
