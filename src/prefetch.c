// SPDX-License-Identifier: MIT
/* prefetch.c - see prefetch.h */
#include <errno.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "bgthread.h"
#include "log.h"
#include "strsafe.h"
#include "prefetch.h"
#include "ranges.h"
#include "testhook.h"

#define WINDOW_FILES	PREFETCH_WINDOW_FILES
#define IDLE_MS		200
/*
 * A round starts at each list's ready mark (lists_window_ahead(): the
 * files before it were found on disk), looks at the file there, and goes
 * on at the list's work mark (the files before it had nothing left to
 * do: on disk, in flight, staged) for AHEAD_FILES files at most; so a
 * round after an open or a finished fetch costs a few name-space and
 * cache lookups, not one per file of the whole window or of the files
 * staged ahead.  Every RECHECK_ROUNDS-th round walks the whole window
 * from the readers and sets both marks afresh (a file evicted, dropped
 * from memory or whose fetch failed behind a mark is fetched again).
 */
#define AHEAD_FILES	256
#define RECHECK_ROUNDS	PREFETCH_RECHECK_ROUNDS
/*
 * ... and not sooner than RECHECK_MS after the last full round: rounds
 * follow every open and every finished fetch (thousands a second with
 * small files), and a full round looks at up to WINDOW_FILES files.
 */
#define RECHECK_MS	100

struct prefetcher {
	struct lists *lists;
	struct nsmgr *nm;
	struct cache *c;
	struct fetcher *f;
	struct ranges *ranges;	/* keys of range lines, or NULL */
	pthread_mutex_t lock;	/* guards full and thread; taken before
				 * the bgthread's own lock */
	struct bgthread *thread;	/* NULL once stopped */
	bool full;		/* a prefetched chunk was not admitted */
	uint64_t *fids;		/* the prefetch thread's */
	bool *ready;		/* fids[i] is on disk (for the leads) */
	bool *current;		/* fids[i] is in its list's current epoch */
	unsigned char *slot;	/* fids[i]'s list (lists_window()) */
	bool *worked;		/* nothing left to do for fids[i] */
	bool work_refused;	/* the last round had refused a chunk where
				 * it stopped (at the work marks) */
	/* every RECHECK_ROUNDS-th looks at all; atomic for tests to read */
	atomic_uint rounds;
	unsigned since_full;	/* rounds since the last full one */
	int64_t full_ms;	/* when it was (bg_mono_ms()) */
	atomic_uint full_rounds;	/* for tests */
	atomic_ulong looked;	/* files looked at by the rounds (tests) */
};

static void on_done(void *arg, bool stored)
{
	struct prefetcher *p = arg;

	pthread_mutex_lock(&p->lock);
	if (!stored)
		p->full = true;
	if (p->thread)
		bgthread_wake(p->thread);
	pthread_mutex_unlock(&p->lock);
}

void prefetch_counts(struct prefetcher *p, struct prefetch_counts *out)
{
	out->rounds = atomic_load(&p->rounds);
	out->full_rounds = atomic_load(&p->full_rounds);
	out->looked = atomic_load(&p->looked);
}

void prefetch_kick(struct prefetcher *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->full = false;	/* the reader moved: room may have appeared */
	if (p->thread)
		bgthread_wake(p->thread);
	pthread_mutex_unlock(&p->lock);
}

void prefetch_published(struct prefetcher *p)
{
	prefetch_kick(p);
}

/* the entry of file @fid held busy, or NULL if it is not a file now */
static struct centry *hold(struct prefetcher *p, uint64_t fid, uint64_t *size)
{
	const struct ns_node *n;
	struct centry *ce = NULL;
	struct ns_attr a;
	char *key = NULL;
	struct ns *ns = nsmgr_rdlock(p->nm);

	n = ns_get(ns, fid);
	if (n && !n->is_dir) {
		ns_attr_get(ns, n, &a);
		key = strdup(ns_key(ns, n));
	}
	nsmgr_unlock(p->nm);
	if (key && cache_hold(p->c, fid, key, &a, &ce))
		ce = NULL;
	free(key);
	*size = ce ? a.size : 0;
	return ce;
}

/*
 * Start fetches of @ce's missing chunks, in file order, while the policy
 * would keep them: into free space, or in place of chunks needed later
 * than their use after the coming read (chunk-level Belady, policy.h).
 * Chunks in flight count as taken, so up to fetch's prefetch bound stay
 * in flight ahead of the reader.  From the first chunk the policy would
 * not keep on, the file's chunks are staged in memory for its reader
 * (fetch_stage()): the link keeps busy with the coming misses while the
 * reader goes through cached files, and the disk keeps a prefix of each
 * file (what the policy assumes).  Past the window's first refused chunk
 * (*@refused) nothing more goes to disk, only to memory: the disk gets
 * what it got when the walk ended there (MIN's choices, prefetched in
 * order), and a file far ahead does not take room that a file before it
 * will ask for.  @recheck (every full round, and the first file of every
 * round: the first one not on disk): the first staged chunk, if nothing
 * was refused before it, is offered to the policy again (stored from
 * memory if it wants it now); otherwise staged chunks are passed over
 * without asking it.  Only files of the current epoch (@current) are
 * staged: the memory goes to the misses the reader meets next; at a
 * queued epoch's first refused chunk that list's walk ends (its reader
 * finished its current epoch: the other lists' readers have not, and
 * their misses still go to memory).
 * Return: WALK_ON, WALK_END (staging full, the fetcher at its bound: the
 * whole window ends here) or LIST_END (this file's list ends here).
 */
enum walk { WALK_ON, WALK_END, LIST_END };

/*
 * Chunk states and staged bits of a file looked at BATCH chunks at a time
 * (one take of the cache lock and one of the fetch lock per batch, not
 * per chunk); a walk acts on them, and whoever it calls checks again.
 */
#define BATCH	64
struct batch {
	uint32_t from, n;	/* chunks [from, from + n) looked at */
	int err;		/* -ESTALE: every state is that */
	uint64_t staged;
	int8_t st[BATCH];
};

/* chunk @c's state (batch @b moved on if it is past it) and staged bit */
static int batch_state(struct prefetcher *p, struct centry *ce,
		       struct batch *b, uint32_t c, bool *staged)
{
	int k;

	if (c < b->from || c >= b->from + b->n || (!b->n && !b->err)) {
		k = cache_chunk_states(p->c, ce, c, BATCH, b->st);
		b->from = c;
		b->err = k < 0 ? k : 0;
		b->n = k < 0 ? BATCH : (uint32_t)k;
		b->staged = fetch_staged_mask(p->f, ce, c, b->n);
	}
	*staged = b->staged >> (c - b->from) & 1;
	return b->err ? b->err : b->st[c - b->from];
}

static enum walk fetch_missing(struct prefetcher *p, struct centry *ce,
			       const struct cache_ident *ci, bool recheck,
			       bool current, bool *refused)
{
	struct batch b = { .from = 0, .n = 0 };
	uint32_t c;

	for (c = 0; c < ci->nchunks; c++) {
		uint64_t flying, need;
		bool staged;
		int rc, st = batch_state(p, ce, &b, c, &staged);

		if (!staged && st != CH_ABSENT)
			continue;	/* on disk, or on its way there */
		if (staged && (*refused || !recheck)) {
			*refused = true;	/* refused when staged */
			continue;
		}
		flying = fetch_prefetching_bytes(p->f);
		need = flying + cache_chunk_len(p->c, ce, c);
		if (!*refused && (cache_free(p->c) >= need ||
				  cache_admits(p->c, ce, need, ADMIT_PREFETCH))) {
			rc = fetch_prefetch(p->f, ce, c, current);
			if (rc == -EBUSY || rc == -ENOMEM)
				return WALK_END;
			/* claimed since the batch was looked at: as if it had
			 * been seen so */
			if (rc == 0 && !staged &&
			    cache_chunk_state(p->c, ce, c) != CH_ABSENT)
				continue;
			/* not going to disk (kept in memory, stored by
			 * nobody): the chunks after it must not either */
			*refused |= rc != 1;
			continue;
		}
		*refused = true;
		if (staged)
			continue;
		if (!current)
			return LIST_END;
		rc = fetch_stage(p->f, ce, c, true);
		if (rc == -ENOSPC) {
			log_dbg("prefetch: window ends at chunk %u of %s (in flight %llu)",
				c, str_log(ci->key), (unsigned long long)flying);
			pthread_mutex_lock(&p->lock);
			p->full = !flying;
			pthread_mutex_unlock(&p->lock);
			return WALK_END;
		}
		if (rc == -EBUSY || rc == -ENOMEM)
			return WALK_END;
	}
	return WALK_ON;
}

/* is a chunk of @ce, all of whose chunks are on disk or in flight, on its
 * way to memory (staged) rather than to disk? */
static bool staging(struct prefetcher *p, struct centry *ce,
		    const struct cache_ident *ci)
{
	struct batch b = { .from = 0, .n = 0 };
	uint32_t c;
	bool staged;

	for (c = 0; c < ci->nchunks; c++)
		if (batch_state(p, ce, &b, c, &staged) == CH_FETCHING && staged)
			return true;
	return false;
}

/* is this round a full one (the first, then RECHECK_ROUNDS, RECHECK_MS)? */
static bool full_round(struct prefetcher *p)
{
	unsigned n = atomic_fetch_add(&p->rounds, 1);
	int64_t now;

	if (n && ++p->since_full < RECHECK_ROUNDS)
		return false;
	now = bg_mono_ms();
	if (n && now - p->full_ms < RECHECK_MS)
		return false;
	p->since_full = 0;
	p->full_ms = now;
	atomic_fetch_add(&p->full_rounds, 1);
	return true;
}

/*
 * Window entry @i is range @r (ranges.h): ready if its bytes are on disk,
 * else its missing pages fetched (fetch_prefetch_range()) if they fit
 * (free space, or victims the policy prefers to give up: the same check
 * as a chunk's, fetch_missing()); never staged.
 * Return: WALK_END if the fetcher has no room now or a prefetch was not
 * stored, LIST_END if the cache has no room for the range (its list's
 * later ranges would not fit either), else WALK_ON.
 */
static enum walk walk_range(struct prefetcher *p, size_t i,
			    const struct range *r)
{
	enum walk w = WALK_ON;
	struct centry *ce;
	uint64_t size, need;
	bool full;
	int st;

	ce = hold(p, r->fid, &size);
	if (!ce)
		return WALK_ON;
	st = cache_range_state(p->c, ce, r->off, r->len);
	p->ready[i] = st == CH_PRESENT;
	if (st != CH_ABSENT ||
	    (p->current[i] && !lists_unread_now(p->lists, p->fids[i])))
		goto out;
	pthread_mutex_lock(&p->lock);
	full = p->full;
	pthread_mutex_unlock(&p->lock);
	/* the range's pages at most: one more at each end */
	need = fetch_prefetching_bytes(p->f) + r->len + 2 * 4096;
	if (full)
		w = WALK_END;
	else if (cache_free(p->c) < need &&
		 !cache_admits(p->c, ce, need, ADMIT_PREFETCH))
		w = LIST_END;
	else if (fetch_prefetch_range(p->f, ce, r->off, r->len) == -EBUSY)
		w = WALK_END;
out:
	cache_busy_put(p->c, ce);
	return w;
}

/*
 * Look at window file @i: ready (on disk) or staging, else its missing
 * chunks fetched (fetch_missing(), @recheck).  Return: as fetch_missing()
 * (WALK_ON also for a file with nothing to do, or no file any more).
 */
static enum walk walk_file(struct prefetcher *p, size_t i, bool recheck,
			   bool *refused)
{
	enum walk w = WALK_ON;
	struct cache_ident ci;
	struct centry *ce;
	struct range r;
	uint64_t size;

	atomic_fetch_add_explicit(&p->looked, 1, memory_order_relaxed);
	if (p->ranges && ranges_get(p->ranges, p->fids[i], &r))
		return walk_range(p, i, &r);
	ce = hold(p, p->fids[i], &size);
	if (!ce)
		return WALK_ON;
	cache_ident(ce, &ci);
	if (!cache_missing(p->c, ce)) {
		/* ready means on disk, not merely in flight */
		p->ready[i] = cache_is_complete(p->c, ce);
		/* staged, still in flight: refused like a staged one */
		if (!p->ready[i] && staging(p, ce, &ci))
			*refused = true;
	} else {
		pthread_mutex_lock(&p->lock);
		if (p->full)
			w = WALK_END;
		pthread_mutex_unlock(&p->lock);
		/* the window is a snapshot: a reader may have opened the file
		 * since, and then it has it (or it is not needed again) */
		if (w == WALK_ON && (!p->current[i] ||
				     lists_unread_now(p->lists, p->fids[i])))
			w = fetch_missing(p, ce, &ci, recheck, p->current[i],
					  refused);
	}
	cache_busy_put(p->c, ce);
	return w;
}

/*
 * One pass over the window.  The first file of each list (at its ready
 * mark: the first one not on disk) is rechecked (fetch_missing()).  A
 * list whose walk ended (LIST_END) is passed over from there on, the
 * others go on.  What the walk had refused where it stopped is kept for
 * the next round, which goes on there (the work marks): the state before
 * the file it stopped at, whose own refusal it will ask about again.
 */
static void round_once(struct prefetcher *p)
{
	bool full = full_round(p);
	bool busy = false;
	bool refused = false;	/* only staging from here on */
	bool refused_done = false;	/* ... before fids[done] */
	uint64_t ended = 0;	/* lists whose walk ended, a bit per slot */
	size_t i, done = 0, marks = 0, jumped = SIZE_MAX;
	/* each round begins with the next list: one list's reader does not
	 * take every fetch that a completion lets start (its files first in
	 * each window) while another's wait */
	unsigned turn = atomic_load(&p->rounds);
	size_t n = full ? lists_window(p->lists, 0, p->fids, p->current,
				       p->slot, turn, WINDOW_FILES) :
		lists_window_ahead(p->lists, p->fids, p->current, p->slot,
				   turn, AHEAD_FILES, &marks, &jumped);

	if (full) {
		/* room may have appeared without a reader moving: victims that
		 * were busy (verified, read) are free now; try again */
		pthread_mutex_lock(&p->lock);
		p->full = false;
		pthread_mutex_unlock(&p->lock);
	}

	for (i = 0; i < n && !busy; i++) {
		enum walk w = LIST_END;	/* its list's walk ended: passed */

		/* at the work marks: what the walk there had refused */
		if (i == jumped) {
			refused |= p->work_refused;
			refused_done = refused;
		}
		p->ready[i] = false;
		if (!(ended & (1ULL << p->slot[i])))
			w = walk_file(p, i, full || i < marks, &refused);
		if (w == LIST_END)
			ended |= 1ULL << p->slot[i];
		busy = w == WALK_END;
		p->worked[i] = w == WALK_ON;
		if (!busy) {
			done++;
			refused_done = refused;
		}
	}
	/* each list's lead: the ready files at the head of its window */
	if (full) {
		lists_set_ready(p->lists, p->fids, p->ready, i);
		/* staged chunks of files no reader comes to soon go */
		fetch_stage_keep(p->f, p->fids, n);
	}
	else
		lists_extend_ready(p->lists, p->fids, p->ready, i);
	/* where the next round goes on (a full one: from the readers) */
	lists_note_worked(p->lists, p->fids, p->worked, done, full);
	/* the flag belongs with the marks if the walk got past them; else
	 * the work marks of lists that did not jump moved all the same, and
	 * what their walk refused must not be lost (a full round resets) */
	if (full || jumped == SIZE_MAX || done > jumped)
		p->work_refused = refused_done;
	else
		p->work_refused |= refused_done;
}

static int64_t prefetch_tick(void *arg)
{
	struct prefetcher *p = arg;

	if (testhook_value("prefetch-off", 0))	/* tests: demand reads only */
		return BG_PERIOD;
	if (lists_count(p->lists))
		round_once(p);
	else
		fetch_stage_keep(p->f, NULL, 0);	/* no window: none */
	return BG_PERIOD;
}

int prefetch_create(struct prefetcher **out, struct lists *l,
		    struct nsmgr *nm, struct cache *c, struct fetcher *f)
{
	struct prefetcher *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	p->fids = calloc(WINDOW_FILES, sizeof(*p->fids));
	p->ready = calloc(WINDOW_FILES, sizeof(*p->ready));
	p->current = calloc(WINDOW_FILES, sizeof(*p->current));
	p->slot = calloc(WINDOW_FILES, sizeof(*p->slot));
	p->worked = calloc(WINDOW_FILES, sizeof(*p->worked));
	if (!p->fids || !p->ready || !p->current || !p->slot || !p->worked) {
		rc = -ENOMEM;
		goto fail;
	}
	p->lists = l;
	p->nm = nm;
	p->c = c;
	p->f = f;
	pthread_mutex_init(&p->lock, NULL);
	fetch_on_prefetch_done(f, on_done, p);
	rc = bgthread_start(&p->thread, "fusefs-prefetch", IDLE_MS,
			    prefetch_tick, p);
	if (rc)
		goto fail;
	*out = p;
	return 0;
fail:
	free(p->fids);
	free(p->ready);
	free(p->current);
	free(p->slot);
	free(p->worked);
	free(p);
	return rc;
}

void prefetch_set_ranges(struct prefetcher *p, struct ranges *rg)
{
	p->ranges = rg;
}

void prefetch_stop(struct prefetcher *p)
{
	struct bgthread *t;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	t = p->thread;
	p->thread = NULL;	/* late callbacks wake nothing */
	pthread_mutex_unlock(&p->lock);
	bgthread_stop(t);
}

void prefetch_destroy(struct prefetcher *p)
{
	if (!p)
		return;
	prefetch_stop(p);
	/* the fetcher, drained and freed before, holds no callback to us */
	free(p->fids);
	free(p->ready);
	free(p->current);
	free(p->slot);
	free(p->worked);
	free(p);
}
