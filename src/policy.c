// SPDX-License-Identifier: MIT
/* policy.c - see policy.h */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "policy_priv.h"
#include "stats.h"

/* count @n in counter @field of the caller's stats, if any */
#define policy_stat(p, field, n)				\
	do {							\
		if ((p)->st)					\
			stat_add((p)->st, field, (n));		\
	} while (0)

/* nodes taken out of the use heaps in one admission, at most: the
 * ineligible ones on the way (then the ranking falls back to a pass) and
 * the candidates */
#define USE_ASIDE_MAX	1024
#define USE_READS_MAX	4096	/* reads caught up with at once */
/*
 * Files re-placed (asked, and found to be used sooner than their heap
 * said) in one admission, at most: after a generation change every
 * cached file must be asked once, and asking them all in one admission
 * would hold the cache lock for O(cached files).  Past it the admission
 * ranks the other way (a sample of POLICY_RANK_SAMPLE); what was asked
 * stays known, so the next admissions go on from there.
 */
#define USE_BUDGET	POLICY_RANK_SAMPLE
#define USE_RESYNCS	2	/* -ESTALE: the lists changed while ranking */

struct rank_scratch {		/* see rank_many() */
	struct policy_node **nodes;
	uint64_t *fids, *uses;
	size_t cap;
	uint64_t rng;		/* xorshift64 state of the samples */
	/* ranking by the use heaps (use_sync(), use_next()) */
	struct policy_node **aside;	/* out of the heaps for now */
	size_t naside;
	uint64_t *rfids;	/* USE_READS_MAX */
	struct future_sync now;	/* the future at this admission */
	bool synced;		/* the heaps' keys are those of: */
	uint64_t gen, active, reads;
};

static uint64_t node_key(const void *item)
{
	return ((const struct policy_node *)item)->fid;
}

struct policy_node *policy_node(struct policy *p, uint64_t fid)
{
	struct policy_node *n = htab_get(&p->nodes, fid);

	if (n)
		return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->fid = fid;
	n->prev = n->next = n;
	if (htab_put(&p->nodes, n)) {
		free(n);
		return NULL;
	}
	return n;
}

static bool linked(const struct policy_node *n)
{
	return n->next != n;
}

static void use_free(struct policy *p)
{
	unsigned h;
	size_t i;

	if (p->uses) {		/* every node out, for use_start() again */
		for (h = 0; h <= USEHEAP_SLOTS; h++)
			for (i = 0; i < p->uses->h[h].n; i++)
				p->uses->h[h].a[i]->upos = 0;
		useheap_release(p->uses);
	}
	free(p->uses);
	p->uses = NULL;
	free(p->scratch->aside);
	free(p->scratch->rfids);
	p->scratch->aside = NULL;
	p->scratch->rfids = NULL;
}

void policy_release(struct policy *p)
{
	size_t i;

	if (p->scratch)
		use_free(p);	/* touches the nodes */
	for (i = 0; i < p->nodes.cap; i++)
		free(p->nodes.slot[i]);
	htab_release(&p->nodes);
	heatheap_release(&p->cold);
	free(p->head);
	if (p->scratch) {
		free(p->scratch->nodes);
		free(p->scratch->fids);
		free(p->scratch->uses);
		free(p->scratch);
	}
}

/* @n's heat as a key that orders nodes as their heat does at any time
 * after their score_at (decay multiplies every heat alike) */
static double heat_key(const struct policy *p, const struct policy_node *n)
{
	if (n->score <= 0)
		return -INFINITY;
	if (p->half_life_s <= 0)
		return log2(n->score);
	return log2(n->score) + (double)n->score_at / p->half_life_s;
}

/*
 * Keep @n in the heat heap exactly while it is an entry with bytes, at
 * its current key (@moved: it was just linked, so its last and seq are
 * new; otherwise only its bytes changed).  A failed insert leaves the
 * heap short: victims are then found by scanning the entries (cold_lost)
 * until the end.
 */
static void cold_sync(struct policy *p, struct policy_node *n, bool moved)
{
	if (!linked(n) || !n->cached) {
		if (heatheap_in(n))
			heatheap_remove(&p->cold, n);
		return;
	}
	if (heatheap_in(n)) {
		if (moved) {
			n->hkey = heat_key(p, n);
			heatheap_update(&p->cold, n);
		}
		return;
	}
	n->hkey = heat_key(p, n);
	if (heatheap_insert(&p->cold, n))
		p->cold_lost = true;
}

/* bytes of the last chunk of @have bytes cached from a file's start */
static uint64_t last_chunk(const struct policy *p, uint64_t have)
{
	return have % p->chunk ? have % p->chunk : MIN(have, p->chunk);
}

/* heap @n's slot's key of its last cached chunk */
static void use_tail(const struct policy *p, struct policy_node *n)
{
	n->utail = n->ukey + n->cached - last_chunk(p, n->cached);
}

/* put @n (out) back into its use heap; false if that failed */
static bool use_put(struct policy *p, struct policy_node *n)
{
	if (useheap_insert(p->uses, n))
		p->uses->lost = true;
	return !p->uses->lost;
}

/*
 * Keep @n in the use heaps exactly while it is an entry with bytes: a
 * newcomer goes to USEHEAP_NONE (its use is asked when it comes up), a
 * node whose bytes changed is re-placed by its new tail.
 */
static void use_track(struct policy *p, struct policy_node *n, bool moved)
{
	uint64_t was = n->utail;

	if (!p->uses || p->uses->lost)
		return;
	if (!linked(n) || !n->cached) {
		if (useheap_in(n))
			useheap_remove(p->uses, n);
		return;
	}
	if (!useheap_in(n)) {
		n->uslot = USEHEAP_NONE;	/* asked when it comes up */
		n->usure = false;
		use_put(p, n);
		return;
	}
	if (n->uslot != USEHEAP_NONE)
		use_tail(p, n);
	if (moved || n->utail != was)
		useheap_update(p->uses, n);
}

/* both indexes of the entries with bytes: heat and next use */
static void index_sync(struct policy *p, struct policy_node *n, bool moved)
{
	cold_sync(p, n, moved);
	use_track(p, n, moved);
}

static void list_unlink(struct policy *p, struct policy_node *n)
{
	if (p->fresh_end == n)	/* the prefix of never-accessed ones */
		p->fresh_end = n->prev != p->head ? n->prev : NULL;
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/*
 * "lru": where @n goes to keep the list sorted by last access (loaded
 * and re-cached entries arrive with older ones): the node to link it
 * after.
 */
static struct policy_node *lru_place(struct policy *p,
				     const struct policy_node *n)
{
	struct policy_node *at = p->head->prev;

	if (n->last <= 0) {
		/* never accessed (prefetched): after the others like it, which
		 * are the list's front (fresh_end: the last of them) */
		at = p->fresh_end ? p->fresh_end : p->head;
	} else if (p->head->next != p->head && n->last < p->head->next->last) {
		at = p->head;		/* older than all: the front, at once */
	}
	while (at != p->head && at->last > n->last)
		at = at->prev;
	return at;
}

/* the other policies only need link order (a choice's ties go by last
 * access, then seq): the end, in O(1) */
void policy_add(struct policy *p, struct policy_node *n)
{
	struct policy_node *at;

	if (linked(n))
		return;
	at = p->sorted ? lru_place(p, n) : p->head->prev;
	n->prev = at;
	n->next = at->next;
	at->next->prev = n;
	at->next = n;
	if (p->sorted && n->last <= 0 &&
	    (n->next == p->head || n->next->last > 0))
		p->fresh_end = n;
	n->seq = ++p->seq;	/* among equal last, the list's order */
	index_sync(p, n, true);
}

void policy_del(struct policy *p, struct policy_node *n)
{
	if (linked(n))
		list_unlink(p, n);
	index_sync(p, n, false);
}

double policy_heat(const struct policy *p, const struct policy_node *n,
		   int64_t now)
{
	double dt = (double)(now - n->score_at);

	if (dt <= 0 || p->half_life_s <= 0)
		return n->score;
	return n->score * exp2(-dt / p->half_life_s);
}

void policy_touch(struct policy *p, struct policy_node *n, int64_t now)
{
	n->prior = policy_heat(p, n, now);
	n->score = n->prior + 1.0;
	n->score_at = now;
	n->last = now;
	n->count++;
	n->dirty = true;
	n->prefetched = false;
	if (linked(n)) {	/* move to the most recent end */
		list_unlink(p, n);
		policy_add(p, n);	/* and to its new heat */
	}
}

uint64_t policy_fid(const struct policy_node *n)
{
	return n->fid;
}

void policy_in_use(struct policy *p, struct policy_node *n, bool in_use)
{
	n->in_use = in_use;
}

int policy_pin(struct policy *p, uint64_t fid, bool pin)
{
	struct policy_node *n = policy_node(p, fid);

	if (!n)
		return -ENOMEM;
	n->pinned = pin;
	n->dirty = true;
	return 0;
}

void policy_read(struct policy *p, struct policy_node *n, uint64_t bytes)
{
	n->bytes += bytes;
	n->dirty = true;
}

void policy_prefetched(struct policy *p, struct policy_node *n)
{
	n->prefetched = true;
}

bool policy_was_prefetched(const struct policy_node *n)
{
	return n->prefetched;
}

/* ---- heat export and load ---- */

static void heat_row_of(const struct policy *p, const struct policy_node *n,
			struct heat_row *r)
{
	r->fid = n->fid;
	r->score = policy_heat(p, n, n->last);
	r->count = n->count;
	r->bytes = n->bytes;
	r->last = n->last;
	r->pinned = n->pinned;
	r->cached = n->cached > 0;
}

int policy_heat_each(const struct policy *p, policy_heat_fn fn, void *arg)
{
	struct heat_row r;
	size_t i;
	int rc = 0;

	for (i = 0; i < p->nodes.cap && !rc; i++) {
		if (!p->nodes.slot[i])
			continue;
		heat_row_of(p, p->nodes.slot[i], &r);
		rc = fn(arg, &r);
	}
	return rc;
}

void policy_heat_flush(struct policy *p, policy_heat_fn fn, void *arg)
{
	struct heat_row r;
	size_t i;

	for (i = 0; i < p->nodes.cap; i++) {
		struct policy_node *n = p->nodes.slot[i];

		if (!n || !n->dirty)
			continue;
		heat_row_of(p, n, &r);
		fn(arg, &r);
		n->dirty = false;
	}
}

int policy_heat_load(struct policy *p, const struct heat_row *r)
{
	struct policy_node *n = policy_node(p, r->fid);
	bool entry;

	if (!n)
		return -ENOMEM;
	entry = linked(n);	/* its heat orders the heaps: re-placed */
	if (entry)
		list_unlink(p, n);
	n->last = r->last;
	n->count = r->count;
	n->bytes = r->bytes;
	n->score = r->score;
	n->score_at = r->last;
	n->prior = r->score;
	n->pinned = r->pinned;
	if (entry)
		policy_add(p, n);
	return 0;
}

/* the use heaps, with every entry with bytes in USEHEAP_NONE; or none */
static void use_start(struct policy *p)
{
	struct rank_scratch *s = p->scratch;
	struct policy_node *n;

	s->synced = false;
	if (!p->fut.sync || !p->fut.where || !p->fut.reads) {
		use_free(p);
		return;
	}
	if (p->uses)
		return;
	p->uses = calloc(1, sizeof(*p->uses));
	s->aside = malloc((USE_ASIDE_MAX + POLICY_MAX_VICTIMS + 1) *
			  sizeof(*s->aside));
	s->rfids = malloc(USE_READS_MAX * sizeof(*s->rfids));
	if (!p->uses || !s->aside || !s->rfids) {
		use_free(p);
		return;
	}
	useheap_init(p->uses);
	for (n = p->head->next; n != p->head; n = n->next)
		use_track(p, n, false);
}

void policy_set_future(struct policy *p, const struct policy_future *f)
{
	if (f)
		p->fut = *f;
	else
		memset(&p->fut, 0, sizeof(p->fut));
	use_start(p);
}

uint64_t policy_free(const struct policy *p)
{
	uint64_t taken = p->used + p->reserved;

	return taken < p->limit ? p->limit - taken : 0;
}

void policy_charge(struct policy *p, struct policy_node *n, int64_t delta)
{
	p->used += delta;
	if (!n)
		return;
	n->cached += delta;
	index_sync(p, n, false);
}

void policy_reserve(struct policy *p, uint64_t bytes)
{
	p->reserved += bytes;
}

void policy_settle(struct policy *p, struct policy_node *in,
		   uint64_t bytes, bool stored)
{
	p->reserved -= bytes;
	if (stored)
		policy_charge(p, in, (int64_t)bytes);
}

/* ---- victim choice ---- */

/* may @n give up bytes now (beyond those already chosen) */
static bool eligible(const struct policy_node *n, const struct policy_node *in)
{
	return n != in && !n->pinned && !n->in_use && n->cached > n->taking;
}

/*
 * The candidates of one admission (heat and auto): the CAND_MAX best
 * eligible nodes by rank, found in one pass over the entries, so that an
 * admission that needs many victims (a prefetch making room for several
 * chunks out of many small files) costs one pass and one next-use lookup
 * per entry, not one per victim.  The victims are always among them: an
 * admission takes at most POLICY_MAX_VICTIMS distinct victims, and a
 * node's rank only drops as it gives up bytes (its tail chunk's use comes
 * sooner), so a node outside the best CAND_MAX never outranks one inside
 * that has not given up anything.
 */
#define CAND_MAX	(POLICY_MAX_VICTIMS + 1)

struct cand {
	struct policy_node *n;
	uint64_t use;		/* next use of its first byte (auto) */
	double heat;
};

struct pick_ctx {
	int64_t now;
	bool ranked;		/* cands filled (at the first pick) */
	bool future;		/* rank by next use (auto with lists) */
	bool blind;		/* future, but no use known: all NONE */
	bool lazy;		/* cands come from the use heaps on demand */
	bool eager;		/* ... not (it failed in this admission) */
	unsigned char resyncs;	/* lazy rankings begun again (-ESTALE) */
	size_t budget;		/* re-placements left before giving up */
	uint64_t in_use;	/* auto: when @in's next chunk is needed */
	int ncand;
	struct cand cand[CAND_MAX];
};

/*
 * Bytes of the last cached chunk of @n (less what is chosen).  Every
 * chunk but a file's last is a whole one, so what is over a multiple of
 * the chunk size is that last, short chunk; takes are whole tail chunks,
 * so after it the rest is whole chunks.
 */
static uint64_t tail_len(const struct policy *p, const struct policy_node *n)
{
	return last_chunk(p, n->cached - n->taking);
}

/* where the last cached chunk of @n (less what is chosen) is next used */
static uint64_t tail_use(const struct policy *p, const struct policy_node *n,
			 uint64_t use)
{
	uint64_t have = n->cached - n->taking;

	if (use == NEXT_USE_NONE)
		return use;
	return use + have - tail_len(p, n);
}

/* the rank of @c now: later use first (auto), then colder, then list order */
static uint64_t cand_key(const struct policy *p, const struct pick_ctx *x,
			 const struct cand *c)
{
	return x->future ? tail_use(p, c->n, c->use) : 0;
}

static bool outranks(uint64_t ka, const struct cand *a, uint64_t kb,
		     const struct cand *b)
{
	if (ka != kb)
		return ka > kb;
	if (a->heat != b->heat)
		return a->heat < b->heat;
	if (a->n->last != b->n->last)		/* the heat heap's ties */
		return a->n->last < b->n->last;
	return a->n->seq < b->n->seq;
}

/* offer @n (next used at @use) to the best
 * CAND_MAX */
static void offer(const struct policy *p, struct pick_ctx *x,
		  struct policy_node *n, uint64_t use)
{
	struct cand c;
	uint64_t k;
	int i;

	c.n = n;
	c.use = use;
	c.heat = policy_heat(p, n, x->now);
	k = cand_key(p, x, &c);
	if (x->ncand == CAND_MAX &&
	    !outranks(k, &c, cand_key(p, x, &x->cand[CAND_MAX - 1]),
		      &x->cand[CAND_MAX - 1]))
		return;
	i = x->ncand < CAND_MAX ? x->ncand++ : CAND_MAX - 1;
	for (; i > 0 && outranks(k, &c, cand_key(p, x, &x->cand[i - 1]),
				 &x->cand[i - 1]); i--)
		x->cand[i] = x->cand[i - 1];
	x->cand[i] = c;
}

struct cold_walk {
	const struct policy *p;
	const struct policy_node *in;
	struct pick_ctx *x;
};

static bool cold_visit(void *arg, struct policy_node *n)
{
	struct cold_walk *w = arg;

	if (eligible(n, w->in))	/* by heat: every use alike */
		offer(w->p, w->x, n,
		      w->x->future ? NEXT_USE_NONE : 0);
	return w->x->ncand < CAND_MAX;
}

/* the policy's own buffers, changed under the caller's lock like the
 * rest of it (an admission changes no state the caller sees) */
static int scratch_fit(struct rank_scratch *s, size_t n)
{
	size_t cap;

	if (n <= s->cap)
		return 0;
	cap = MAX(n, 2 * s->cap);
	free(s->nodes);
	free(s->fids);
	free(s->uses);
	s->nodes = malloc(cap * sizeof(*s->nodes));
	s->fids = malloc(cap * sizeof(*s->fids));
	s->uses = malloc(cap * sizeof(*s->uses));
	s->cap = s->nodes && s->fids && s->uses ? cap : 0;
	return s->cap ? 0 : -ENOMEM;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static size_t gcd(size_t a, size_t b)
{
	while (b) {
		size_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/*
 * p->rank_sample distinct entries with bytes, evenly spread at random
 * over the heat heap's array (a random start and a random step prime to
 * its size), the eligible ones into the scratch buffers; their number.
 */
static size_t gather_sample(struct policy *p,
			    const struct policy_node *in)
{
	struct rank_scratch *s = p->scratch;
	size_t n = p->cold.n, at, step, i, k = 0;

	at = xorshift(&s->rng) % n;
	do
		step = 1 + xorshift(&s->rng) % (n - 1);
	while (gcd(step, n) != 1);
	for (i = 0; i < p->rank_sample; i++, at = (at + step) % n) {
		struct policy_node *x = p->cold.a[at];

		if (eligible(x, in)) {
			s->nodes[k] = x;
			s->fids[k++] = x->fid;
		}
	}
	return k;
}

/*
 * Rank every eligible entry by next use, asking the future for all of
 * them in one call (one lists lock, one clock reading); with more than
 * p->rank_sample entries with bytes, a random sample of that many.  0,
 * or -ENOMEM (nothing offered: the caller asks one by one).  The entries
 * with bytes are the heat heap's, so its size bounds the eligible ones.
 */
static int rank_many(struct policy *p, const struct policy_node *in,
		     struct pick_ctx *x)
{
	struct policy_node *n;
	size_t k = 0, i, total = 0;
	bool sample = !p->cold_lost && p->rank_sample &&
		      p->cold.n > p->rank_sample;

	if (!p->cold_lost)		/* eligible ones have bytes: in it */
		total = sample ? p->rank_sample : p->cold.n;
	else
		for (n = p->head->next; n != p->head; n = n->next)
			total += eligible(n, in);
	if (scratch_fit(p->scratch, total))
		return -ENOMEM;
	if (sample)
		k = gather_sample(p, in);
	else
		for (n = p->head->next; n != p->head; n = n->next) {
			if (!eligible(n, in))
				continue;
			if (k == total)	/* cannot happen: never overrun */
				return -E2BIG;
			p->scratch->nodes[k] = n;
			p->scratch->fids[k++] = n->fid;
		}
	p->fut.many(p->fut.arg, p->scratch->fids, p->scratch->uses, k);
	policy_stat(p, victim_uses_asked, k);
	for (i = 0; i < k; i++)
		offer(p, x, p->scratch->nodes[i], p->scratch->uses[i]);
	return 0;
}

/* ---- by next use from the use heaps (useheap.h, policy_future) ---- */

static bool use_ready(const struct policy *p)
{
	return p->uses && !p->uses->lost && p->fut.sync && p->fut.where &&
	       p->fut.reads;
}

/* @key's distance from @slot's origin now (a stale key may lie behind) */
static uint64_t use_dist(const struct policy *p, unsigned slot, uint64_t key)
{
	uint64_t o = p->scratch->now.origin[slot];

	return key > o ? key - o : 0;
}

/* forget every key: each node's use is asked again when it comes up */
static int use_forget(struct policy *p)
{
	struct rank_scratch *s = p->scratch;
	struct useheap *u = p->uses;
	size_t i;

	if (useheap_forget(u)) {
		u->lost = true;
		return -ENOMEM;
	}
	for (i = 0; i < u->h[USEHEAP_NONE].n; i++)
		u->h[USEHEAP_NONE].a[i]->usure = false;
	s->synced = true;
	s->gen = s->now.gen;
	s->active = s->now.active;
	s->reads = s->now.reads;
	return 0;
}

/*
 * Catch the heaps up with the future: the files read since the last
 * admission are asked again (their uses moved later); a new generation
 * or a list gone idle or active makes every key unknown.  0, or -errno
 * (then rank otherwise).
 */
static int use_sync(struct policy *p)
{
	struct rank_scratch *s = p->scratch;
	long n, i;

	p->fut.sync(p->fut.arg, &s->now);
	if (!s->synced || s->now.gen != s->gen || s->now.active != s->active)
		return use_forget(p);
	if (s->now.reads == s->reads)
		return 0;
	n = p->fut.reads(p->fut.arg, s->reads, s->now.reads, s->rfids,
			 USE_READS_MAX);
	if (n < 0)
		return use_forget(p);
	for (i = 0; i < n; i++) {
		struct policy_node *x = htab_get(&p->nodes, s->rfids[i]);

		if (!x || !useheap_in(x))
			continue;
		if (x->uslot == USEHEAP_NONE) {
			x->usure = false;
			continue;
		}
		useheap_remove(p->uses, x);
		x->uslot = USEHEAP_NONE;
		x->usure = false;
		if (!use_put(p, x))
			return -ENOMEM;
	}
	s->reads = s->now.reads;
	return 0;
}

/*
 * The node first in line over the heaps (the furthest tail by its known
 * key; no known use first, coldest first) and in *@v that tail's use.
 */
static struct policy_node *use_peek(const struct policy *p, uint64_t *v)
{
	struct policy_node *best = useheap_top(p->uses, USEHEAP_NONE), *t;
	uint64_t m, d;

	*v = NEXT_USE_NONE;
	if (best)
		return best;
	for (m = p->scratch->active; m; m &= m - 1) {
		unsigned slot = (unsigned)__builtin_ctzll(m);

		t = useheap_top(p->uses, slot);
		if (!t)
			continue;
		d = use_dist(p, slot, t->utail);
		if (!best || d > *v || (d == *v && heatheap_colder(t, best))) {
			best = t;
			*v = d;
		}
	}
	return best;
}

/*
 * Take nodes off the top until one's use is confirmed by the future (a
 * known key is never below the true one, so a confirmed top is the
 * furthest of all) and offer it to @x: 1; 0 when the heaps are empty;
 * -errno if this way of ranking must be given up for this admission.
 * What is taken off stays aside until use_restore().
 */
static int use_next(struct policy *p, const struct policy_node *in,
		    struct pick_ctx *x)
{
	struct rank_scratch *s = p->scratch;
	struct policy_node *t;
	uint64_t v, key, d;
	unsigned slot;
	bool ok;
	int rc;

	while ((t = use_peek(p, &v))) {
		useheap_remove(p->uses, t);
		if (s->naside == USE_ASIDE_MAX) {
			use_put(p, t);
			return -E2BIG;	/* too many ineligible on top */
		}
		ok = eligible(t, in);
		if (t->uslot == USEHEAP_NONE && t->usure) {
			s->aside[s->naside++] = t;	/* no use, known */
			if (!ok)
				continue;
			offer(p, x, t, NEXT_USE_NONE);
			return 1;
		}
		if (!ok && t->uslot != USEHEAP_NONE) {
			s->aside[s->naside++] = t;	/* stays as it is */
			continue;
		}
		/* an unknown key is asked even if the file may not go now
		 * (open, being fetched): it would come up again and again */
		rc = p->fut.where(p->fut.arg, t->fid, s->gen, &slot, &key);
		policy_stat(p, victim_uses_asked, 1);
		if (rc < 0 || (rc && (slot >= USEHEAP_SLOTS ||
				      !(s->active >> slot & 1)))) {
			use_put(p, t);
			return rc < 0 ? rc : -ESTALE;
		}
		t->uslot = rc ? slot : USEHEAP_NONE;
		t->usure = !rc;
		t->ukey = rc ? key : 0;
		use_tail(p, t);
		d = rc ? use_dist(p, slot, t->utail) : NEXT_USE_NONE;
		if (d >= v) {
			s->aside[s->naside++] = t;
			if (!ok)
				continue;
			offer(p, x, t,
			      rc ? use_dist(p, slot, key) : NEXT_USE_NONE);
			return 1;
		}
		if (!use_put(p, t))
			return -ENOMEM;
		if (!x->budget--)
			return -E2BIG;
	}
	return 0;
}

/* the nodes taken off in this admission back into their heaps */
static void use_restore(struct policy *p)
{
	struct rank_scratch *s = p->scratch;
	size_t i;

	for (i = 0; i < s->naside; i++)
		use_put(p, s->aside[i]);
	s->naside = 0;
}

/* rank lazily from the use heaps, caught up with the lists: false if
 * they cannot be (then rank the other way) */
static bool use_begin(struct policy *p, struct pick_ctx *x)
{
	if (use_sync(p))
		return false;
	x->ncand = 0;
	x->lazy = true;		/* see best_cand() */
	x->budget = USE_BUDGET;
	return true;
}

/* must another node be confirmed before @best (key @bk) is the best? */
static bool use_more(const struct policy *p, const struct pick_ctx *x,
		     const struct cand *best, uint64_t bk)
{
	uint64_t v;

	if (x->ncand == CAND_MAX || !use_peek(p, &v))
		return false;
	/* confirmed ones without a use came off coldest first */
	return !best || bk < v || (bk == v && v != NEXT_USE_NONE);
}

/*
 * By heat alone (no future, or every use NONE) the best CAND_MAX are the
 * first eligible nodes of the heat heap (its order is heat, then last
 * access, then link order: outranks()'s); by next use, or if the heap cannot be walked, every
 * entry is looked at.
 */
static void rank_entries(struct policy *p, const struct policy_node *in,
			 struct pick_ctx *x)
{
	struct policy_node *n;

	x->ncand = 0;
	if (!x->ranked)
		policy_stat(p, victim_choices, 1);
	x->ranked = true;
	if (x->future && !x->blind && !x->eager && use_ready(p) &&
	    use_begin(p, x))
		return;
	if ((!x->future || x->blind) && !p->cold_lost) {
		struct cold_walk w = { p, in, x };

		if (!heatheap_walk(&p->cold, cold_visit, &w))
			return;
		x->ncand = 0;	/* too many ineligible on the way: scan */
	}
	if (x->future && !x->blind)
		policy_stat(p, victim_full_ranks, 1);
	if (x->future && !x->blind && p->fut.many && !rank_many(p, in, x))
		return;
	for (n = p->head->next; n != p->head; n = n->next) {
		uint64_t use = x->future ? NEXT_USE_NONE : 0;

		if (!eligible(n, in))
			continue;
		if (x->future && !x->blind) {
			use = p->fut.one(p->fut.arg, n->fid, NULL);
			policy_stat(p, victim_uses_asked, 1);
		}
		offer(p, x, n, use);
	}
}

/* the best candidate that may still give up bytes, or NULL */
static const struct cand *best_cand(struct policy *p,
				    const struct policy_node *in,
				    struct pick_ctx *x, uint64_t *key)
{
	const struct cand *best = NULL;
	uint64_t bk = 0;
	int i;

	int rc;

	if (!x->ranked)
		rank_entries(p, in, x);
again:
	for (i = 0; i < x->ncand; i++) {
		const struct cand *c = &x->cand[i];
		uint64_t k;

		if (c->n->cached <= c->n->taking)
			continue;
		k = cand_key(p, x, c);
		if (!best || outranks(k, c, bk, best)) {
			best = c;
			bk = k;
		}
	}
	if (x->lazy && use_more(p, x, best, bk)) {
		rc = use_next(p, in, x);
		if (rc == -ESTALE && x->resyncs < USE_RESYNCS) {
			/* the lists changed since use_sync(): begin again */
			use_restore(p);
			x->resyncs++;
			rc = use_begin(p, x) ? 1 : -ENOMEM;
		}
		if (rc < 0) {		/* rank the other way */
			use_restore(p);
			x->lazy = false;
			x->eager = true;
			rank_entries(p, in, x);
		}
		if (rc) {
			best = NULL;
			bk = 0;
			goto again;
		}
	}
	*key = bk;
	return best;
}

/*
 * pick_fn - the next victim for @in (NULL: nobody), and in *@take how many
 * of its bytes go; NULL if nothing may go, or nothing is worth less than
 * @in.
 */
typedef struct policy_node *(*pick_fn)(struct policy *p,
				       const struct policy_node *in,
				       enum admit_kind kind, uint64_t *take,
				       struct pick_ctx *x);

static struct policy_node *lru_pick(struct policy *p,
				    const struct policy_node *in,
				    enum admit_kind kind, uint64_t *take,
				    struct pick_ctx *x)
{
	struct policy_node *n;

	(void)x;
	for (n = p->head->next; n != p->head; n = n->next)
		if (eligible(n, in)) {
			*take = n->cached - n->taking;
			return n;
		}
	return NULL;
}

/* does @in's history (its heat before this access) beat @heat clearly */
static bool hotter(const struct policy_node *in, double heat)
{
	return in->prior >= heat * HEAT_MARGIN || in->prior > heat + 0.5;
}

/* the coldest eligible entry, if @in is clearly hotter than it */
static struct policy_node *heat_pick(struct policy *p,
				     const struct policy_node *in,
				     enum admit_kind kind, uint64_t *take,
				     struct pick_ctx *x)
{
	const struct cand *best;
	uint64_t key;

	best = best_cand(p, in, x, &key);
	if (!best || (in && !hotter(in, best->heat)))
		return NULL;
	*take = best->n->cached - best->n->taking;
	return best->n;
}

/*
 * Belady over chunks: the chunk used furthest in the future goes first
 * (a file's last cached chunk; files with no known use, whole, coldest
 * first), and only if @in's next chunk is needed sooner.
 */
static struct policy_node *auto_pick(struct policy *p,
				     const struct policy_node *in,
				     enum admit_kind kind, uint64_t *take,
				     struct pick_ctx *x)
{
	const struct cand *best;
	uint64_t best_use;

	if (!x->future)
		return heat_pick(p, in, kind, take, x);
	best = best_cand(p, in, x, &best_use);
	if (!best)
		return NULL;
	if (in && x->in_use == NEXT_USE_NONE && best_use == NEXT_USE_NONE) {
		/* a prefetch streams through what no list reads again; a
		 * demand read needs the heat rule (a scan keeps out) */
		if (kind == ADMIT_DEMAND && !hotter(in, best->heat))
			return NULL;
	} else if (in && x->in_use >= best_use) {
		/* never give up what is needed sooner than the newcomer */
		return NULL;
	}
	/* its last chunk: the cache drops whole chunks until take is freed */
	*take = best_use != NEXT_USE_NONE ? tail_len(p, best->n) :
		best->n->cached - best->n->taking;
	return best->n;
}

/*
 * Choose victims until @bytes more fit under the limit.  Victims are
 * marked (taking) while choosing and unmarked before returning, so
 * nothing changes.
 */
static int choose(struct policy *p, const struct policy_node *in,
		  uint64_t bytes, enum admit_kind kind, pick_fn pick,
		  struct admission *out, int64_t now)
{
	uint64_t taken = p->used + p->reserved + bytes, freed = 0;
	struct pick_ctx ctx, *x = &ctx;	/* about 2 KiB */
	int n = 0, i, rc = 0;

	out->partial = false;
	if (bytes > p->limit)
		return -ENOSPC;
	if (taken <= p->limit)
		return 0;
	x->now = now;
	x->ranked = false;
	x->lazy = false;
	x->eager = false;
	x->resyncs = 0;
	x->future = p->fut.one != NULL && pick == auto_pick;
	x->blind = x->future && p->fut.known && !p->fut.known(p->fut.arg);
	x->in_use = NEXT_USE_NONE;
	if (in && x->future && !x->blind) {
		uint64_t after;

		x->in_use = p->fut.one(p->fut.arg, in->fid, &after);
		if (kind == ADMIT_PREFETCH)
			x->in_use = after;	/* kept past the coming read? */
		if (x->in_use != NEXT_USE_NONE)
			x->in_use += in->cached;	/* its next chunk */
	}
	while (taken - freed > p->limit && taken > freed) {
		struct policy_node *v;
		uint64_t take = 0;

		if (n == POLICY_MAX_VICTIMS) {
			out->partial = true;
			break;
		}
		v = pick(p, in, kind, &take, x);
		if (!v || !take) {
			rc = -ENOSPC;
			break;
		}
		v->taking += take;
		if (n && out->victims[n - 1] == v) {
			out->take[n - 1] += take;
		} else {
			out->victims[n] = v;
			out->take[n++] = take;
		}
		freed += take;
	}
	for (i = 0; i < n; i++)
		out->victims[i]->taking = 0;
	if (x->lazy)
		use_restore(p);
	return rc ? rc : n;
}

static int lru_admit(struct policy *p, const struct policy_node *in,
		     uint64_t bytes, enum admit_kind kind,
		     struct admission *out, int64_t now)
{
	return choose(p, in, bytes, kind, lru_pick, out, now);
}

static int heat_admit(struct policy *p, const struct policy_node *in,
		      uint64_t bytes, enum admit_kind kind,
		      struct admission *out, int64_t now)
{
	return choose(p, in, bytes, kind, heat_pick, out, now);
}

static int auto_admit(struct policy *p, const struct policy_node *in,
		      uint64_t bytes, enum admit_kind kind,
		      struct admission *out, int64_t now)
{
	return choose(p, in, bytes, kind, auto_pick, out, now);
}

int policy_admit(struct policy *p, const struct policy_node *in,
		 uint64_t bytes, enum admit_kind kind, struct admission *out,
		 int64_t now)
{
	return p->ops->admit(p, in, bytes, kind, out, now);
}

static const struct policy_ops ops[] = {
	{ "lru", lru_admit },
	{ "heat", heat_admit },
	{ "auto", auto_admit },
};

int policy_init(struct policy *p, const char *name, double half_life_s,
		uint64_t limit, uint64_t chunk)
{
	size_t i;

	memset(p, 0, sizeof(*p));
	for (i = 0; i < ARRAY_SIZE(ops); i++)
		if (!strcmp(name, ops[i].name))
			p->ops = &ops[i];
	if (!p->ops)
		return -EINVAL;
	p->sorted = p->ops == &ops[0];	/* lru */
	p->scratch = calloc(1, sizeof(*p->scratch));
	p->head = calloc(1, sizeof(*p->head));
	if (!p->scratch || !p->head)
		return -ENOMEM;		/* policy_release() frees them */
	p->scratch->rng = 0x9e3779b97f4a7c15ULL;	/* fixed: reproducible */
	p->rank_sample = POLICY_RANK_SAMPLE;
	p->head->prev = p->head->next = p->head;
	heatheap_init(&p->cold);
	p->half_life_s = half_life_s;
	p->limit = limit;
	p->chunk = MAX(chunk, 4096ULL);
	htab_init(&p->nodes, node_key);
	return 0;
}
