// SPDX-License-Identifier: MIT
/* policy.c - see policy.h */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "policy.h"

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
}

static void list_unlink(struct policy_node *n)
{
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
	while (at != &p->head && at->last > n->last)
		at = at->prev;
	n->prev = at;
	n->next = at->next;
	at->next->prev = n;
	at->next = n;
}

void policy_del(struct policy *p, struct policy_node *n)
{
	(void)p;
	if (linked(n))
		list_unlink(n);
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
		list_unlink(n);
		policy_add(p, n);
	}
}

void policy_set_future(struct policy *p, policy_next_use_fn fn, void *arg)
{
	p->next_use = fn;
	p->next_use_arg = arg;
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
 * pick_fn - the next victim for @in (NULL: nobody), and in *@take how many
 * of its bytes go; NULL if nothing may go, or nothing is worth less than
 * @in.
 */
typedef struct policy_node *(*pick_fn)(const struct policy *p,
				       const struct policy_node *in,
				       enum admit_kind kind, uint64_t *take,
				       int64_t now);

static struct policy_node *lru_pick(const struct policy *p,
				    const struct policy_node *in,
				    enum admit_kind kind, uint64_t *take,
				    int64_t now)
{
	struct policy_node *n;

	(void)now;
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
				     int64_t now)
{
	struct policy_node *n, *best = NULL;
	double best_heat = 0;

	for (n = p->head.next; n != &p->head; n = n->next) {
		double h;

		if (!eligible(n, in))
			continue;
		h = policy_heat(p, n, now);
		if (!best || h < best_heat) {
			best = n;
			best_heat = h;
		}
	}
	if (!best || (in && !hotter(in, best_heat)))
		return NULL;
	*take = best->cached - best->taking;
	return best;
}

/* where the last cached chunk of @n (less what is chosen) is next used */
static uint64_t tail_use(const struct policy *p, const struct policy_node *n,
			 uint64_t use)
{
	uint64_t have = n->cached - n->taking;

	if (use == NEXT_USE_NONE)
		return use;
	return use + (have > p->chunk ? have - p->chunk : 0);
}

/*
 * Belady over chunks: the chunk used furthest in the future goes first
 * (a file's last cached chunk; files with no known use, whole, coldest
 * first), and only if @in's next chunk is needed sooner.
 */
static struct policy_node *auto_pick(const struct policy *p,
				     const struct policy_node *in,
				     enum admit_kind kind, uint64_t *take,
				     int64_t now)
{
	struct policy_node *n, *best = NULL;
	uint64_t in_use = NEXT_USE_NONE, best_use = 0;
	double best_heat = 0;

	if (!p->next_use)
		return heat_pick(p, in, kind, take, now);
	if (in) {
		uint64_t after;

		in_use = p->next_use(p->next_use_arg, in->fid, &after);
		if (kind == ADMIT_PREFETCH)
			in_use = after;		/* kept past the coming read? */
		if (in_use != NEXT_USE_NONE)
			in_use += in->cached;	/* its next chunk */
	}
	for (n = p->head.next; n != &p->head; n = n->next) {
		uint64_t use;
		double h;

		if (!eligible(n, in))
			continue;
		use = tail_use(p, n, p->next_use(p->next_use_arg, n->fid, NULL));
		h = policy_heat(p, n, now);
		if (!best || use > best_use || (use == best_use && h < best_heat)) {
			best = n;
			best_use = use;
			best_heat = h;
		}
	}
	if (!best)
		return NULL;
	if (in && in_use == NEXT_USE_NONE && best_use == NEXT_USE_NONE) {
		/* a prefetch streams through what no list reads again; a
		 * demand read needs the heat rule (a scan keeps out) */
		if (kind == ADMIT_DEMAND && !hotter(in, best_heat))
			return NULL;
	} else if (in && in_use >= best_use) {
		/* never give up what is needed sooner than the newcomer */
		return NULL;
	}
	*take = best->cached - best->taking;
	if (best_use != NEXT_USE_NONE)
		*take = MIN(*take, p->chunk);
	return best;
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
	int n = 0, i, rc = 0;

	out->partial = false;
	if (bytes > p->limit)
		return -ENOSPC;
	while (taken - freed > p->limit && taken > freed) {
		struct policy_node *v;
		uint64_t take = 0;

		if (n == POLICY_MAX_VICTIMS) {
			out->partial = true;
			break;
		}
		v = pick(p, in, kind, &take, now);
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
	p->head.prev = p->head.next = &p->head;
	p->half_life_s = half_life_s;
	p->limit = limit;
	p->chunk = MAX(chunk, 4096ULL);
	htab_init(&p->nodes, node_key);
	return 0;
}
