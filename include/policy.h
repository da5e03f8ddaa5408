/* SPDX-License-Identifier: MIT */
/*
 * policy.h - which cached file to evict first.  Pure bookkeeping, no I/O:
 * the cache tells the policy about files (add, touch, del) and asks it
 * for candidates in eviction order; the cache decides whether a
 * candidate can go (not open, not busy).  The caller serializes calls.
 *
 * One policy today, "lru"; heat- and epoch-aware policies plug in here
 * through struct policy_ops.
 */
#ifndef FUSEFS_POLICY_H
#define FUSEFS_POLICY_H

#include <stdint.h>

struct policy_node {		/* embedded in the cache's file entry */
	struct policy_node *prev, *next;
	int64_t last;		/* last access, unix seconds */
	uint64_t count;		/* accesses */
};

struct policy {
	const struct policy_ops *ops;
	struct policy_node head;	/* lru: head.next is the coldest */
};

struct policy_ops {
	const char *name;
	void (*add)(struct policy *p, struct policy_node *n);
	void (*touch)(struct policy *p, struct policy_node *n, int64_t now);
	void (*del)(struct policy *p, struct policy_node *n);
	/* first()/next() - candidates, best victim first; NULL at the end */
	struct policy_node *(*first)(struct policy *p);
	struct policy_node *(*next)(struct policy *p, struct policy_node *n);
};

/* policy_init() - @name "lru"; -EINVAL if unknown */
int policy_init(struct policy *p, const char *name);

#endif
