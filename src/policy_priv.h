/* SPDX-License-Identifier: MIT */
/*
 * policy_priv.h - the policy's node, private to the policy: policy.c,
 * heatheap.c and useheap.c, and the unit tests of those three (the test
 * seam: they build and inspect nodes directly).  Every other module holds
 * a node as an opaque pointer and changes it through policy.h's verbs.
 */
#ifndef FUSEFS_POLICY_PRIV_H
#define FUSEFS_POLICY_PRIV_H

#include "policy.h"

struct policy_node {		/* one per file ever accessed (heat) */
	struct policy_node *prev, *next;	/* entries (see struct policy) */
	uint64_t fid;
	uint64_t bytes;		/* bytes read through the daemon */
	uint64_t cached;	/* bytes on disk of the current version */
	int64_t last;		/* last access, seconds */
	uint64_t count;		/* accesses */
	double score;		/* decayed heat at score_at */
	int64_t score_at;
	double prior;		/* heat just before the latest access */
	uint64_t taking;	/* bytes chosen to go in this admission */
	double hkey;		/* heat as a timeless key (heatheap.h) */
	uint64_t seq;		/* when linked: order among equal last */
	size_t hpos;		/* place in the heat heap + 1; 0: out */
	uint64_t ukey;		/* use heap (useheap.h): key of its first */
	uint64_t utail;		/* byte, and of its last cached chunk */
	uint32_t upos;		/* place in its use heap + 1; 0: out */
	uint8_t uslot;		/* that heap */
	bool usure;		/* USEHEAP_NONE: no use, as last asked */
	bool dirty;		/* heat changed since the last flush */
	bool pinned;
	bool in_use;		/* open or busy: not evictable */
	bool prefetched;	/* cached ahead of use, not opened since */
};

#endif
