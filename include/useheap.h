/* SPDX-License-Identifier: MIT */
/*
 * useheap.h - the policy's evictable files by next use, for a victim
 * choice by next use that looks at a few files per admission instead of
 * every cached one (policy.h, struct policy_future: sync, where, reads).
 *
 * One indexed binary heap per slot (a list: USEHEAP_SLOTS of them) holds
 * the files whose soonest known use is in that slot, furthest first by
 * utail (the key of the file's last cached chunk on the slot's timeline;
 * within a slot keys only shift together, so the order stays true as its
 * reader advances); one more heap, USEHEAP_NONE, holds the files with no
 * known use and those whose use must be asked again, coldest first
 * (heatheap_colder()).  A node is in at most one of them (uslot, upos).
 * The keys are the policy's: it re-places a node whose key changed
 * (useheap_update()) and sends every node back to USEHEAP_NONE when the
 * keys are no longer trusted (useheap_forget()).
 *
 * Not locked: the policy's caller serializes (the cache lock).  An
 * insert that cannot grow an array returns -ENOMEM and leaves the node
 * out: the caller must then stop trusting the heaps.
 */
#ifndef FUSEFS_USEHEAP_H
#define FUSEFS_USEHEAP_H

#include <stdbool.h>
#include <stddef.h>

struct policy_node;

#define USEHEAP_SLOTS	64
#define USEHEAP_NONE	USEHEAP_SLOTS	/* no known use, or to be asked */

struct useheap {
	bool lost;		/* an insert failed: its user stops trusting it */
	struct {
		struct policy_node **a;
		size_t n, cap;
	} h[USEHEAP_SLOTS + 1];
};

void useheap_init(struct useheap *u);
void useheap_release(struct useheap *u);
bool useheap_in(const struct policy_node *x);
/* useheap_insert() - @x (out) into heap @x->uslot; 0 or -ENOMEM */
int useheap_insert(struct useheap *u, struct policy_node *x);
/* useheap_remove() - @x must be in */
void useheap_remove(struct useheap *u, struct policy_node *x);
/* useheap_update() - @x (in) has a new key in the same heap */
void useheap_update(struct useheap *u, struct policy_node *x);
/* useheap_top() - the first node of heap @slot, or NULL */
struct policy_node *useheap_top(const struct useheap *u, unsigned slot);
/* useheap_forget() - every node into USEHEAP_NONE; 0 or -ENOMEM */
int useheap_forget(struct useheap *u);

#endif
