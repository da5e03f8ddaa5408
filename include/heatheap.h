/* SPDX-License-Identifier: MIT */
/*
 * heatheap.h - the policy's evictable files, coldest first: an indexed
 * binary min-heap of policy nodes, so that a victim choice by heat costs
 * a few dozen node visits instead of one pass over every cache entry.
 *
 * The order is (hkey, last, seq): hkey is a node's heat as a key that
 * does not change with time (heat decays by the same factor for every
 * node, so log2(score) + score_at / half-life orders nodes as their heat
 * does at any moment after their score_at; a score of 0 is -inf), then
 * last access, then link order: the order the policy's entry list has
 * among nodes of equal heat.  The policy keeps a node in the heap while
 * it is an entry with cached bytes (heatheap_in()), and re-places it when
 * its key changes (heatheap_update()).
 *
 * heatheap_walk() visits nodes in that order without changing the heap
 * (best first from the root over a small side queue), until the visitor
 * says stop; it returns -E2BIG, having visited a prefix, when the side
 * queue would outgrow HEATHEAP_WALK_MAX (the caller then falls back to
 * its own scan).  Not locked: the policy's caller serializes (the cache
 * lock).  An insert that cannot grow the array returns -ENOMEM and leaves
 * the node out: the caller must then stop trusting the heap.
 */
#ifndef FUSEFS_HEATHEAP_H
#define FUSEFS_HEATHEAP_H

#include <stdbool.h>
#include <stddef.h>

struct policy_node;

#define HEATHEAP_WALK_MAX	1024	/* nodes queued at once in a walk */

struct heatheap {
	struct policy_node **a;
	size_t n, cap;
};

void heatheap_init(struct heatheap *h);
void heatheap_release(struct heatheap *h);
bool heatheap_in(const struct policy_node *x);
/* heatheap_colder() - does @x come before @y in the heap's order */
bool heatheap_colder(const struct policy_node *x, const struct policy_node *y);
/* heatheap_insert() - @x must be out; 0 or -ENOMEM */
int heatheap_insert(struct heatheap *h, struct policy_node *x);
/* heatheap_remove() - @x must be in */
void heatheap_remove(struct heatheap *h, struct policy_node *x);
/* heatheap_update() - @x (in) has a new key */
void heatheap_update(struct heatheap *h, struct policy_node *x);
/* heatheap_walk() - @visit(@arg, node) in order until it returns false;
 * 0, or -E2BIG (see above) */
int heatheap_walk(const struct heatheap *h,
		  bool (*visit)(void *arg, struct policy_node *x), void *arg);

#endif
