/* SPDX-License-Identifier: MIT */
/*
 * policy.h - what to keep in the cache.  Pure bookkeeping, no I/O, no
 * locks (the cache serializes calls): the cache tells the policy about
 * files (add, touch, del) and asks it, when space is needed for an
 * incoming file, which resident file to give up -- or whether the
 * incoming file is worth less than everything eligible, in which case it
 * is served but not cached (admission control).
 *
 * Policies:
 *  "lru"    evict the least recently used; always admit (the baseline).
 *  "heat"   a decayed access frequency per file (half-life configurable);
 *           evict the coldest; admit a newcomer only if its heat before
 *           this access beats the victim's by HEAT_MARGIN.  A one-pass
 *           scan cannot flush the hot set, and shuffled epochs over a
 *           dataset larger than the cache keep a stable resident subset
 *           instead of cycling.
 *  "auto"   Belady when the future is known: files with a known next use
 *           (the published epoch lists, see lists.h) rank by it, the one
 *           needed furthest in the future goes first, files with no known
 *           use go before any listed one and rank by heat among
 *           themselves; a newcomer is admitted only if it is needed sooner
 *           than the victim.  With no lists it is "heat".
 * Pinned files are never offered as victims.
 */
#ifndef FUSEFS_POLICY_H
#define FUSEFS_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "htab.h"

#define NEXT_USE_NONE	UINT64_MAX
#define HEAT_MARGIN	1.5

struct policy_node {		/* one per file ever accessed (heat) */
	struct policy_node *prev, *next;	/* residents, lru order */
	uint64_t fid;
	uint64_t bytes;		/* bytes read through the daemon */
	bool dirty;		/* heat changed since the last flush */
	int64_t last;		/* last access, seconds */
	uint64_t count;		/* accesses */
	double score;		/* decayed heat at score_at */
	int64_t score_at;
	double prior;		/* heat just before the latest access */
	bool pinned;
	bool prefetched;	/* cached ahead of use, not opened since */
	bool stream;		/* staged for one use (lists), not kept */
};

struct policy;

struct policy_ops {
	const char *name;
	void (*add)(struct policy *p, struct policy_node *n);
	void (*touch)(struct policy *p, struct policy_node *n, int64_t now);
	void (*del)(struct policy *p, struct policy_node *n);
	/*
	 * victim() - the resident to evict so that @in can be cached, among
	 * those @eligible(node, arg) accepts; NULL if none, or if @in is
	 * worth less than the best candidate (then @in is not cached).
	 */
	struct policy_node *(*victim)(struct policy *p,
				      const struct policy_node *in,
				      bool (*eligible)(struct policy_node *n,
						       void *arg),
				      void *arg, int64_t now);
};

struct policy {
	const struct policy_ops *ops;
	struct policy_node head;	/* every resident, lru order */
	struct htab nodes;		/* fid -> node, every known file */
	double half_life_s;
	/* next_use() - distance (in files) to @fid's next known use, or
	 * NEXT_USE_NONE; NULL means nothing is known (no lists) */
	uint64_t (*next_use)(void *arg, uint64_t fid);
	void *next_use_arg;
};

/* policy_init() - @name "lru", "heat" or "auto"; -EINVAL if unknown */
int policy_init(struct policy *p, const char *name, double half_life_s);
void policy_release(struct policy *p);
/* policy_node() - the node of @fid, created (not resident) if new;
 * NULL on ENOMEM.  Nodes live until policy_release(). */
struct policy_node *policy_node(struct policy *p, uint64_t fid);
/* policy_resident() - true if @n is linked as a resident */
bool policy_resident(const struct policy_node *n);
/* policy_heat() - @n's heat decayed to @now */
double policy_heat(const struct policy *p, const struct policy_node *n,
		   int64_t now);

#endif
