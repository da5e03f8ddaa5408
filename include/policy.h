/* SPDX-License-Identifier: MIT */
/*
 * policy.h - what to keep in the cache, and how much room there is.
 *
 * The policy owns the space accounting (limit, used, reserved) and decides
 * admission and victims through one entry point, policy_admit().  It is
 * bookkeeping: no I/O and no lock of its own.  Every function here is
 * called under the cache lock (the cache serializes them), and the
 * future's callbacks are called under it too.  The policy owns its nodes
 * (one per file, src/policy_priv.h); the cache holds them as opaque
 * pointers and tells the policy what happens to files: add/del (a cache
 * entry exists or not), touch (an open), charge (bytes stored or
 * dropped), in_use (open or busy: never a victim), pin, read (bytes read
 * through the daemon), prefetched (cached ahead of use); it exports and
 * loads heat through policy_heat_each(), policy_heat_flush() and
 * policy_heat_load().
 *
 * Policies (chosen by name only in policy_init()):
 *  "lru"    evict the least recently used; always admit (the baseline).
 *  "heat"   a decayed access frequency per file (half-life configurable);
 *           evict the coldest; admit a newcomer only if its heat before
 *           this access beats the victim's by HEAT_MARGIN.  A one-pass
 *           scan cannot flush the hot set, and shuffled epochs over a
 *           dataset larger than the cache keep a stable resident subset
 *           instead of cycling.
 *  "auto"   with a future (policy_set_future(): the published epoch
 *           lists), Belady over chunks.  The next use of a chunk is the
 *           number of bytes the readers read before it: its file's next
 *           use (bytes before the file in the known future, the soonest
 *           over the lists) plus its offset in the file.  The victim is
 *           the chunk needed furthest in the future: a file gives up its
 *           last cached chunk first (chunks are read in file order, so
 *           a file's tail is its furthest chunk; cached chunks are taken
 *           to be a prefix of the file, which prefetch in file order and
 *           eviction from the tail keep true).  A file listed by ranges
 *           (lists.h) is next used at its first unread range; its
 *           chunks are still ranked by offset.  Files with no known use
 *           go first, whole, the coldest first.  A newcomer chunk (at
 *           offset in->cached of its file) is admitted only if it is
 *           needed sooner than every victim it needs; with neither
 *           known, a prefetch may take the room and a demand read
 *           follows the heat rule.  "Needed" for a prefetch
 *           (ADMIT_PREFETCH) is the use after the coming read (the next
 *           epoch's): a demand-only Belady (MIN) would keep the chunk
 *           after that read only then, and evicting a chunk used before
 *           it to fetch one that goes again right after its read costs
 *           one more fetch of the victim.  So prefetching moves MIN's
 *           fetches earlier and never adds any; a chunk MIN would not
 *           keep is read on demand (or staged in memory, not on disk).  So a shard larger than the
 *           free space streams through the cache chunk by chunk without
 *           displacing anything needed sooner.  Without a future it is
 *           "heat".
 * Pinned files and files in use are never offered as victims.
 *
 * Cost: by heat (heat, and auto while the future knows nothing) the
 * victims come from the heat heap in a few dozen visits.  By next use,
 * with a future that gives sync/where/reads (the lists), they come from
 * the use heaps (useheap.h): a file's use is asked again only when it
 * reaches the top, when it was read, or after the future's generation
 * changed (then each file once, at most 4,096 per admission), so a
 * choice costs a few look-ups.  Otherwise (or when the heaps give up:
 * more than 1,024 open or pinned files on top, 4,096 files re-placed, a
 * generation changing under the choice) every
 * cached file is ranked, past POLICY_RANK_SAMPLE of them a random sample
 * of that many (the victims are then the sample's furthest).  "lru" keeps
 * its entry list sorted by last access (a re-cached file walks back to
 * its place); the others keep link order, O(1), and break ties by last
 * access, then link order (seq), without the list.
 *
 * An admission changes nothing the caller can see, but it refines the
 * use heaps (keys asked again, nodes re-placed) and uses scratch buffers:
 * it runs under the same lock as everything else.
 *
 * Units: bytes as the cache counts them (4 KiB blocks).  Invariant kept
 * by the cache: used + reserved <= limit once admitted reservations are
 * settled.
 */
#ifndef FUSEFS_POLICY_H
#define FUSEFS_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "heatheap.h"
#include "useheap.h"
#include "htab.h"

#define NEXT_USE_NONE	UINT64_MAX
#define HEAT_MARGIN	1.5
#define POLICY_MAX_VICTIMS 64
/*
 * A ranking by next use (auto with lists) looks at every cached file up
 * to this many; past it, at a random sample of this many (a victim among
 * the furthest of the sample, not always the furthest of all: one pass
 * per admission that must evict would otherwise cost O(cached files)).
 */
#define POLICY_RANK_SAMPLE	4096

/* one per file ever accessed: its heat, cached bytes and whether it may
 * go; private to the policy (src/policy_priv.h), changed by the verbs
 * below */
struct policy_node;

enum admit_kind { ADMIT_DEMAND, ADMIT_PREFETCH };

/*
 * The outcome of policy_admit(): drop take[i] bytes of victims[i] (all
 * its bytes: the file goes; fewer: its last chunks go, at least take[i]
 * bytes of them), then reserve.  A node may appear more than once.
 */
struct admission {
	bool partial;		/* more victims needed: evict, ask again */
	struct policy_node *victims[POLICY_MAX_VICTIMS];
	uint64_t take[POLICY_MAX_VICTIMS];
};

struct policy;

struct policy_ops {
	const char *name;
	/*
	 * admit() - can @bytes more of @in (NULL: nobody, just get under
	 * the limit) be cached?  Fills @out with the victims to evict first
	 * (none if there is room).  Nothing the caller sees changes (no
	 * eviction, no reservation), but @p's use heaps and scratch do.
	 * Return: the number of victims (0..POLICY_MAX_VICTIMS), or -ENOSPC
	 * if @in is not worth the room (admission control) or nothing can go.
	 */
	int (*admit)(struct policy *p, const struct policy_node *in,
		     uint64_t bytes, enum admit_kind kind,
		     struct admission *out, int64_t now);
};

/*
 * The future: distance in bytes (read by the readers before it) to the
 * start of @fid's next known use, or NEXT_USE_NONE; in *@after (if not
 * NULL) the use after that one, or NEXT_USE_NONE.  Called under the cache lock (lock order: cache, then
 * whatever the callback takes, e.g. the lists lock).
 */
typedef uint64_t (*policy_next_use_fn)(void *arg, uint64_t fid,
				       uint64_t *after);
/*
 * Is anything known at all?  false promises that the next use of every
 * fid is NEXT_USE_NONE now: an admission then ranks by heat alone (the
 * heat heap) without asking for each entry's next use.  Same lock rules.
 */
typedef bool (*policy_known_fn)(void *arg);
/* the next use of each of @fids into @uses (no after): one call for the
 * ranking of every cached file.  Same lock rules. */
typedef void (*policy_next_uses_fn)(void *arg, const uint64_t *fids,
				    uint64_t *uses, size_t n);

/*
 * Ranking incrementally (optional: @sync, @where and @reads together).
 * A use is a key on the timeline of a slot (a reader: lists.h says what
 * the lists make of it) whose origin only grows, so that next use =
 * key - origin[slot] stays exact while only the origins move; a file's
 * key moves otherwise only when it is read (@reads names it) or when the
 * generation changes.  The policy keeps its cached files in a heap per
 * slot by key (useheap.h) and re-checks a file with @where only when it
 * reaches the top: a key known to it is never below the true one, so the
 * first top whose key @where confirms is the furthest (lazy evaluation).
 * Same lock rules as @one.
 */
#define POLICY_FUTURE_SLOTS	64

struct future_sync {
	uint64_t gen;		/* changes when keys may move but by reads */
	uint64_t active;	/* bit per slot: the slots that count */
	uint64_t reads;		/* reads so far (see policy_reads_fn) */
	uint64_t origin[POLICY_FUTURE_SLOTS];
};
typedef void (*policy_sync_fn)(void *arg, struct future_sync *s);
/* @fid's soonest use: 1 and its slot and key, 0 if none, -ESTALE if the
 * generation is no more @gen */
typedef int (*policy_where_fn)(void *arg, uint64_t fid, uint64_t gen,
			       unsigned *slot, uint64_t *key);
/* the fids of reads @from..@to-1 into @fids: their number, or -1 if more
 * than @max or no longer known */
typedef long (*policy_reads_fn)(void *arg, uint64_t from, uint64_t to,
				uint64_t *fids, size_t max);

/* where next uses come from: @one is required, the others may be NULL
 * (@many: @one per file; @known: always ask; @sync/@where/@reads: rank
 * every cached file, or a sample of them, at each admission) */
struct policy_future {
	policy_next_use_fn one;
	policy_next_uses_fn many;
	policy_known_fn known;
	policy_sync_fn sync;
	policy_where_fn where;
	policy_reads_fn reads;
	void *arg;
};

struct rank_scratch;		/* policy.c: buffers of a ranking */
struct stats;

struct policy {
	const struct policy_ops *ops;
	struct policy_node *head;	/* cache entries: lru order if
					 * sorted, else link order */
	bool sorted;			/* "lru": by last access */
	struct policy_node *fresh_end;	/* sorted: last never-accessed
					 * entry (the list's front), or NULL */
	struct heatheap cold;		/* entries with bytes, coldest first */
	bool cold_lost;			/* an insert failed: scan instead */
	uint64_t seq;			/* links so far */
	struct htab nodes;		/* fid -> node, every known file */
	double half_life_s;
	uint64_t limit;			/* bytes the cache may hold */
	uint64_t used, reserved;	/* on disk; promised to writers */
	uint64_t chunk;			/* bytes of a chunk on disk: the
					 * unit of chunk eviction */
	struct policy_future fut;	/* fut.one NULL: nothing known */
	struct rank_scratch *scratch;	/* buffers of a ranking */
	struct useheap *uses;		/* entries with bytes by next use
					 * (fut.where), or NULL */
	struct stats *st;		/* victim_* counters, or NULL */
	size_t rank_sample;		/* 0: rank every entry by use */
};

/* policy_init() - @name "lru", "heat" or "auto"; chunks of @chunk bytes
 * on disk (4 KiB blocks); -EINVAL if the name is unknown, -ENOMEM */
int policy_init(struct policy *p, const char *name, double half_life_s,
		uint64_t limit, uint64_t chunk);
void policy_release(struct policy *p);
/* policy_node() - the node of @fid, created (not an entry) if new;
 * NULL on ENOMEM.  Nodes live until policy_release(). */
struct policy_node *policy_node(struct policy *p, uint64_t fid);
/* policy_fid() - the file @n stands for */
uint64_t policy_fid(const struct policy_node *n);
/* policy_heat() - @n's heat decayed to @now */
double policy_heat(const struct policy *p, const struct policy_node *n,
		   int64_t now);

/* policy_add(), policy_del() - @n has a cache entry now, or no more */
void policy_add(struct policy *p, struct policy_node *n);
void policy_del(struct policy *p, struct policy_node *n);
/* policy_touch() - @n was opened at @now (heat, recency) */
void policy_touch(struct policy *p, struct policy_node *n, int64_t now);
/* policy_in_use() - @n is open or busy (never a victim), or no more */
void policy_in_use(struct policy *p, struct policy_node *n, bool in_use);
/* policy_pin() - pin @fid's file (never a victim) or unpin it; its node is
 * created if new.  0, or -ENOMEM */
int policy_pin(struct policy *p, uint64_t fid, bool pin);
/* policy_read() - @bytes of @n were read through the daemon (its heat
 * record's bytes) */
void policy_read(struct policy *p, struct policy_node *n, uint64_t bytes);
/* policy_prefetched() - a prefetch cached bytes of @n while it was not
 * open; policy_was_prefetched() says so until its next policy_touch() */
void policy_prefetched(struct policy *p, struct policy_node *n);
bool policy_was_prefetched(const struct policy_node *n);

/* one file's heat as exported and stored */
struct heat_row {
	uint64_t fid;
	double score;		/* decayed to the last access */
	uint64_t count, bytes;
	int64_t last;
	bool pinned, cached;	/* cached: ignored by policy_heat_load() */
};
typedef int (*policy_heat_fn)(void *arg, const struct heat_row *r);
/* policy_heat_each() - @fn on every known file until it returns non-zero;
 * that value, or 0 */
int policy_heat_each(const struct policy *p, policy_heat_fn fn, void *arg);
/* policy_heat_flush() - @fn (its value ignored) on every file whose heat
 * changed since the last flush, which then counts as unchanged */
void policy_heat_flush(struct policy *p, policy_heat_fn fn, void *arg);
/* policy_heat_load() - @r->fid's heat as stored (score as of its last
 * access), its node created if new; an entry is re-placed in the heat
 * order.  0, or -ENOMEM */
int policy_heat_load(struct policy *p, const struct heat_row *r);

/* policy_set_future() - where next uses come from (NULL: unknown) */
void policy_set_future(struct policy *p, const struct policy_future *f);

/* policy_admit() - see policy_ops.admit */
int policy_admit(struct policy *p, const struct policy_node *in,
		 uint64_t bytes, enum admit_kind kind, struct admission *out,
		 int64_t now);
/* policy_reserve() - @bytes admitted (after the victims were dropped) */
void policy_reserve(struct policy *p, uint64_t bytes);
/* policy_settle() - a reservation of @bytes ended: stored for @in, or not */
void policy_settle(struct policy *p, struct policy_node *in,
		   uint64_t bytes, bool stored);
/*
 * policy_charge() - @delta bytes appeared on (> 0) or left (< 0) the disk
 * for @n's current version; @n NULL: bytes of no current version (an old
 * version waiting for its last reader).
 */
void policy_charge(struct policy *p, struct policy_node *n, int64_t delta);
/* policy_free() - bytes under the limit neither used nor reserved */
uint64_t policy_free(const struct policy *p);

#endif
