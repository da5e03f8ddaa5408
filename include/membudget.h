/* SPDX-License-Identifier: MIT */
/*
 * membudget.h - the daemon's memory accountant (--memory-limit).
 *
 * Every large buffer the daemon holds for a while is charged here before
 * it is allocated and given back when it is freed: chunk buffers
 * (chunkbuf.h: backend reads in flight, read-ahead, chunks kept in memory
 * (verified chunks the verifier hands on included), a reader's chunk
 * verification in fetch.c) and control-file buffers (fs_ctl.c).  What is
 * not charged is the baseline (docs/operations.md, "Memory"): code,
 * libraries, thread stacks, the namespace and cache tables, the per-worker
 * O_DIRECT bounce buffers, the verifier's own read buffers.
 *
 * Classes, and when a charge is granted (used = all classes together):
 *   MB_DEMAND  a reader waits for these bytes: used + n <= limit
 *   MB_AHEAD   read-ahead and prefetch: used + n <= limit * 3/4, so
 *              demand reads always find a quarter of the budget
 *   MB_CTL     control-file text: used + n <= limit and the class's own
 *              bytes + n <= limit / 4, so control files cannot starve reads
 * A refused charge changes nothing: the caller skips (read-ahead,
 * prefetch), fails the write (control files, ENOBUFS) or waits (demand
 * reads: fetch.c parks them and starts them when bytes are given back).
 * membudget_force() charges regardless of the limit; it is for the one
 * case where waiting could never end (fetch.c: nothing in flight would
 * give bytes back) and is counted as overdraft.
 *
 * Thread-safe: one mutex, a leaf lock (taken under the fetch lock, never
 * held while calling out).  The on_free hook runs after it is dropped, on
 * whichever thread gave bytes back (possibly under the caller's locks):
 * it must only wake someone (bgthread_wake()).
 */
#ifndef FUSEFS_MEMBUDGET_H
#define FUSEFS_MEMBUDGET_H

#include <stdbool.h>
#include <stdint.h>

#define MEMBUDGET_DEFAULT	(256ULL << 20)

enum mb_class {
	MB_DEMAND,
	MB_AHEAD,
	MB_CTL,
	MB_NCLASSES
};

struct membudget_usage {
	uint64_t limit;
	uint64_t used;			/* all classes, now */
	uint64_t peak;			/* highest used since start */
	uint64_t by_class[MB_NCLASSES];
	uint64_t refused;		/* charges refused */
	uint64_t overdraft;		/* charges forced past the limit */
};

struct membudget;

/* membudget_create() - a budget of @limit bytes (> 0); 0 or -ENOMEM */
int membudget_create(struct membudget **out, uint64_t limit);
void membudget_destroy(struct membudget *b);

/*
 * membudget_try() - charge @bytes to @cls if the class rule allows it.  A
 * refused MB_DEMAND charge means its owner waits: the next give calls the
 * on_free hook (set in the same locked step, so no give is missed).
 */
bool membudget_try(struct membudget *b, enum mb_class cls, uint64_t bytes);
/* membudget_force() - charge @bytes whatever the limit (overdraft) */
void membudget_force(struct membudget *b, enum mb_class cls, uint64_t bytes);
/* membudget_give() - give back @bytes charged to @cls; calls on_free if
 * a demand charge was refused since the last give */
void membudget_give(struct membudget *b, enum mb_class cls, uint64_t bytes);
/* membudget_on_free() - the hook (set once, before any other call) */
void membudget_on_free(struct membudget *b, void (*fn)(void *arg), void *arg);
/* membudget_usage() - a consistent snapshot */
void membudget_usage(struct membudget *b, struct membudget_usage *u);

#endif
