/* SPDX-License-Identifier: MIT */
/*
 * lists_priv.h - the lists module's own structures, shared by its files
 * and by no other module (include/lists.h is the contract to the rest):
 *   lists.c         the table of lists, their epochs (publish, begin),
 *                   the reader's position and the window ahead of it
 *   lists_parse.c   a published text into a new epoch: pure (no lock,
 *                   no struct lists), the part of a publish that reads
 *                   untrusted text (tests/fuzz/fuzz_lists.c)
 *   lists_future.c  next uses, one by one and incrementally (the future
 *                   the policy asks)
 *   lists_text.c    the status and report texts
 * The helpers below read or change lists: call them with the lists lock
 * (struct lists' lock) held.  epoch_parse() is the exception: it calls
 * the caller's resolver, so it runs without the lock, on an epoch no
 * list holds yet.
 */
#ifndef FUSEFS_LISTS_PRIV_H
#define FUSEFS_LISTS_PRIV_H

#include <pthread.h>

#include "compiler.h"
#include "htab.h"
#include "lists.h"

struct ent {
	uint64_t fid;
	uint64_t size;
	uint64_t off;		/* bytes of the files before it in the list */
	uint32_t idx;
};

/* the range entries of one file in an epoch: their indexes, ascending */
struct franges {
	uint64_t fid;		/* the file's id */
	uint32_t n, cap;
	uint32_t *idx;
};

struct epoch {
	struct ent *ents;	/* in list order */
	uint32_t n;
	struct htab by_fid;	/* fid -> ent */
	uint64_t *file;		/* per ent: its file's id if it is a range
				 * (else 0); NULL: the epoch has no range */
	struct htab by_file;	/* file id -> franges, for files with ranges */
	uint64_t bytes;
	int64_t no;		/* epoch number */
	uint64_t serial;	/* unique, grows with each publish (marks) */
	uint64_t *read;		/* bit per ent: opened this epoch */
	uint32_t low;		/* first ent neither read nor skipped */
	uint32_t high;		/* one past the furthest ent opened */
	uint32_t read_ahead;	/* read bits at idx >= low */
	uint64_t opened, ready;	/* first opens, of which fully cached */
};

/* a position in a list's epochs: ent i of the epoch with this serial */
struct mark {
	uint64_t serial;	/* 0: none */
	uint32_t i;
};

struct rlist {
	char name[LIST_NAME_MAX];
	struct epoch *cur;	/* NULL: none yet, or waiting for @want */
	struct epoch *q[LIST_QUEUE_MAX];	/* queued, by number */
	unsigned nq;
	int64_t want;		/* begun, unpublished; or LIST_NO_EPOCH */
	uint32_t want_at;
	int64_t last_no;	/* number of the latest current epoch */
	uint64_t *strag;	/* previous epoch's files still in flight, */
	uint32_t nstrag;	/* sorted (see take_straggler()) */
	uint64_t epochs;	/* completed (advanced past) */
	double last_ratio;	/* hit ratio of the previous epoch, -1 none */
	double stop;		/* where the previous epoch ended, as a
				 * fraction of its list (1: at its end) */
	struct mark ready;	/* every unread file before it was on disk
				 * when last looked at */
	struct mark work;	/* every unread file before it was on disk,
				 * on its way there or staged: nothing left
				 * to do (lists_window_ahead()) */
	uint64_t active_ms;	/* last open, publish or begin */
	struct list_report last_report;
};

struct lists {
	pthread_mutex_t lock;
	struct rlist *l[LISTS_MAX];
	unsigned n;
	uint64_t gen;		/* see lists_sync() */
	uint64_t serials;	/* the last epoch's serial (placed in order) */
	uint64_t nreads;	/* files marked read, ever */
	uint64_t reads[LISTS_READS];	/* the latest of them, by nreads */
	unsigned window;	/* out-of-order window, files */
	uint64_t idle_ms;	/* 0: never idle */
	lists_clock_fn now_ms;
	void *clock_arg;
	struct ranges *ranges;	/* range lines' keys, or NULL: none */
};

/* ---- one epoch: read bits, low and high ---- */

static inline bool is_read(const struct epoch *e, uint32_t i)
{
	return e->read[i / 64] >> (i % 64) & 1;
}

/* files of the out-of-order window */
static inline uint32_t ooo_window(const struct lists *l,
				  const struct epoch *e)
{
	return MIN(l->window, e->n);
}

/* files the reader still has to open from low on */
static inline uint64_t remaining(const struct epoch *e)
{
	return e->n - e->low - e->read_ahead;
}

/*
 * One past the last file of @r's current epoch @e the reader is expected
 * to open: where the previous epoch ended, at the same fraction of the
 * list (a loader with drop_last, max_steps or limit_train_batches stops
 * at the same place every epoch), until the reader goes past it.  Files
 * from there on take their next use from the queued epochs.  Never below
 * low: high >= low, and high > end lifts the limit.
 */
static inline uint32_t expected_end(const struct rlist *r,
				    const struct epoch *e)
{
	uint32_t end;

	if (r->stop >= 1.0)
		return e->n;
	end = (uint32_t)(r->stop * e->n + 0.5);
	return e->high > end ? e->n : end;
}

static inline bool unread_ahead(const struct epoch *e, const struct ent *x)
{
	return x->idx >= e->low && !is_read(e, x->idx);
}

static inline bool fully_read(const struct epoch *e)
{
	return e->low >= e->n;
}

static inline bool is_idle(const struct lists *l, const struct rlist *r,
			   uint64_t now)
{
	return l->idle_ms && now - r->active_ms >= l->idle_ms;
}

/* ---- lists_parse.c ---- */

/*
 * epoch_parse() - @text (@len bytes) into a new epoch, its number and
 * serial unset, nothing read (headers and every line's fate into @rep,
 * as lists.c's report_init() left it); @resolve maps each path line.
 * With @rg (may be NULL), a line that is no file of the mount and reads
 * "PATH<TAB>OFFSET<TAB>LENGTH" names a range of PATH: its entry's id is
 * the range's key in @rg, its size the range's length.
 * *@out NULL if no path was accepted.  Return 0 or -ENOMEM.
 */
struct ranges;
int epoch_parse(const char *text, size_t len, list_resolve_fn resolve,
		void *arg, struct ranges *rg, struct list_report *rep,
		struct epoch **out);
/* epoch_free() - an epoch and its tables; NULL is fine */
void epoch_free(struct epoch *e);

/* ---- lists.c ---- */

/* rlist_find() - the list named @name, or NULL */
struct rlist *rlist_find(struct lists *l, const char *name);
/* lists_cmp_u64() - qsort()/bsearch() order of file ids */
static inline int lists_cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* rlist_lead() - (lists_window.c) files and bytes from @r's low to its
 * ready mark */
void rlist_lead(const struct rlist *r, uint64_t *files, uint64_t *bytes);

#endif
