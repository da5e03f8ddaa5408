// SPDX-License-Identifier: MIT
/* policy.c - see policy.h */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "policy.h"

struct rank_scratch {		/* see rank_many() */
	struct policy_node **nodes;
	uint64_t *fids, *uses;
	size_t cap;
	uint64_t rng;		/* xorshift64 state of the samples */
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

void policy_release(struct policy *p)
{
	size_t i;

	for (i = 0; i < p->nodes.cap; i++)
		free(p->nodes.slot[i]);
	htab_release(&p->nodes);
	heatheap_release(&p->cold);
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

static void list_unlink(struct policy *p, struct policy_node *n)
{
	if (p->fresh_end == n)	/* the prefix of never-accessed ones */
		p->fresh_end = n->prev != &p->head ? n->prev : NULL;
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/* keep the list sorted by last access (loaded entries arrive unordered) */
void policy_add(struct policy *p, struct policy_node *n)
{
	struct policy_node *at = p->head.prev;

	if (linked(n))
		return;
	if (n->last <= 0) {
		/* never accessed (prefetched): after the others like it, which
		 * are the list's front (fresh_end: the last of them) */
		at = p->fresh_end ? p->fresh_end : &p->head;
	} else if (p->head.next != &p->head && n->last < p->head.next->last) {
		at = &p->head;		/* older than all: the front, at once */
	}
	while (at != &p->head && at->last > n->last)
		at = at->prev;
	n->prev = at;
	n->next = at->next;
	at->next->prev = n;
	at->next = n;
	if (n->last <= 0 && (n->next == &p->head || n->next->last > 0))
		p->fresh_end = n;
	n->seq = ++p->seq;	/* among equal last, the list's order */
	cold_sync(p, n, true);
}

void policy_del(struct policy *p, struct policy_node *n)
{
	if (linked(n))
		list_unlink(p, n);
	cold_sync(p, n, false);
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

void policy_set_future(struct policy *p, const struct policy_future *f)
{
	if (f)
		p->fut = *f;
	else
		memset(&p->fut, 0, sizeof(p->fut));
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
	cold_sync(p, n, false);
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
	size_t pos;		/* place in the entry list: ties go to the first */
};

struct pick_ctx {
	int64_t now;
	bool ranked;		/* cands filled (at the first pick) */
	bool future;		/* rank by next use (auto with lists) */
	bool blind;		/* future, but no use known: all NONE */
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
	uint64_t have = n->cached - n->taking;

	return have % p->chunk ? have % p->chunk : MIN(have, p->chunk);
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
	return a->pos < b->pos;
}

/* offer @n (at @pos in the order walked, next used at @use) to the best
 * CAND_MAX */
static void offer(const struct policy *p, struct pick_ctx *x,
		  struct policy_node *n, size_t pos, uint64_t use)
{
	struct cand c;
	uint64_t k;
	int i;

	c.n = n;
	c.use = use;
	c.heat = policy_heat(p, n, x->now);
	c.pos = pos;
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
	size_t pos;
};

static bool cold_visit(void *arg, struct policy_node *n)
{
	struct cold_walk *w = arg;

	if (eligible(n, w->in))	/* by heat: every use alike */
		offer(w->p, w->x, n, w->pos++,
		      w->x->future ? NEXT_USE_NONE : 0);
	return w->x->ncand < CAND_MAX;
}

/* the policy's own buffers, changed under the caller's lock like the
 * rest of it (admissions take the policy const: they change no state) */
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
static size_t gather_sample(const struct policy *p,
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
static int rank_many(const struct policy *p, const struct policy_node *in,
		     struct pick_ctx *x)
{
	struct policy_node *n;
	size_t k = 0, i, total = 0;
	bool sample = !p->cold_lost && p->rank_sample &&
		      p->cold.n > p->rank_sample;

	if (!p->cold_lost)		/* eligible ones have bytes: in it */
		total = sample ? p->rank_sample : p->cold.n;
	else
		for (n = p->head.next; n != &p->head; n = n->next)
			total += eligible(n, in);
	if (scratch_fit(p->scratch, total))
		return -ENOMEM;
	if (sample)
		k = gather_sample(p, in);
	else
		for (n = p->head.next; n != &p->head; n = n->next) {
			if (!eligible(n, in))
				continue;
			if (k == total)	/* cannot happen: never overrun */
				return -E2BIG;
			p->scratch->nodes[k] = n;
			p->scratch->fids[k++] = n->fid;
		}
	p->fut.many(p->fut.arg, p->scratch->fids, p->scratch->uses, k);
	for (i = 0; i < k; i++)
		offer(p, x, p->scratch->nodes[i], i, p->scratch->uses[i]);
	return 0;
}

/*
 * By heat alone (no future, or every use NONE) the best CAND_MAX are the
 * first eligible nodes of the heat heap (its order is heat, then the
 * entry list's); by next use, or if the heap cannot be walked, every
 * entry is looked at.
 */
static void rank_entries(const struct policy *p, const struct policy_node *in,
			 struct pick_ctx *x)
{
	struct policy_node *n;
	size_t pos = 0;

	x->ncand = 0;
	x->ranked = true;
	if ((!x->future || x->blind) && !p->cold_lost) {
		struct cold_walk w = { p, in, x, 0 };

		if (!heatheap_walk(&p->cold, cold_visit, &w))
			return;
		x->ncand = 0;	/* too many ineligible on the way: scan */
	}
	if (x->future && !x->blind && p->fut.many && !rank_many(p, in, x))
		return;
	for (n = p->head.next; n != &p->head; n = n->next, pos++)
		if (eligible(n, in))
			offer(p, x, n, pos, !x->future ? 0 : x->blind ?
			      NEXT_USE_NONE : p->fut.one(p->fut.arg, n->fid,
							 NULL));
}

/* the best candidate that may still give up bytes, or NULL */
static const struct cand *best_cand(const struct policy *p,
				    const struct policy_node *in,
				    struct pick_ctx *x, uint64_t *key)
{
	const struct cand *best = NULL;
	uint64_t bk = 0;
	int i;

	if (!x->ranked)
		rank_entries(p, in, x);
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
	*key = bk;
	return best;
}

/*
 * pick_fn - the next victim for @in (NULL: nobody), and in *@take how many
 * of its bytes go; NULL if nothing may go, or nothing is worth less than
 * @in.
 */
typedef struct policy_node *(*pick_fn)(const struct policy *p,
				       const struct policy_node *in,
				       enum admit_kind kind, uint64_t *take,
				       struct pick_ctx *x);

static struct policy_node *lru_pick(const struct policy *p,
				    const struct policy_node *in,
				    enum admit_kind kind, uint64_t *take,
				    struct pick_ctx *x)
{
	struct policy_node *n;

	(void)x;
	for (n = p->head.next; n != &p->head; n = n->next)
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
static struct policy_node *heat_pick(const struct policy *p,
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
static struct policy_node *auto_pick(const struct policy *p,
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
static int choose(const struct policy *p, const struct policy_node *in,
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
	return rc ? rc : n;
}

static int lru_admit(const struct policy *p, const struct policy_node *in,
		     uint64_t bytes, enum admit_kind kind,
		     struct admission *out, int64_t now)
{
	return choose(p, in, bytes, kind, lru_pick, out, now);
}

static int heat_admit(const struct policy *p, const struct policy_node *in,
		      uint64_t bytes, enum admit_kind kind,
		      struct admission *out, int64_t now)
{
	return choose(p, in, bytes, kind, heat_pick, out, now);
}

static int auto_admit(const struct policy *p, const struct policy_node *in,
		      uint64_t bytes, enum admit_kind kind,
		      struct admission *out, int64_t now)
{
	return choose(p, in, bytes, kind, auto_pick, out, now);
}

int policy_admit(const struct policy *p, const struct policy_node *in,
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
	p->scratch = calloc(1, sizeof(*p->scratch));
	if (!p->scratch)
		return -ENOMEM;
	p->scratch->rng = 0x9e3779b97f4a7c15ULL;	/* fixed: reproducible */
	p->rank_sample = POLICY_RANK_SAMPLE;
	p->head.prev = p->head.next = &p->head;
	heatheap_init(&p->cold);
	p->half_life_s = half_life_s;
	p->limit = limit;
	p->chunk = MAX(chunk, 4096ULL);
	htab_init(&p->nodes, node_key);
	return 0;
}
