// SPDX-License-Identifier: MIT
/* policy.c - see policy.h */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "policy.h"

/* which entries a victim may be chosen from (beyond the basic rules) */
enum elig {
	ELIG_ALL,
	ELIG_STREAM,		/* streamed files only */
	ELIG_PREFETCH,		/* streamed files, and files no list reads */
	ELIG_KEPT,		/* kept files only */
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

void policy_grow_window(struct policy *p, uint64_t bytes)
{
	bytes = MIN(bytes, p->limit / 4);
	p->window = MAX(p->window, (bytes + 4095) & ~4095ULL);
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
	if (n->stream)
		p->used_stream += delta;
	if (!n->cached)
		n->stream = false;
}

void policy_reserve(struct policy *p, struct policy_node *in,
		    uint64_t bytes, bool stream)
{
	p->reserved += bytes;
	if (in && stream && !in->stream) {
		/* staged: its bytes count as streamed from now on */
		in->stream = true;
		p->used_stream += in->cached;
	}
}

void policy_settle(struct policy *p, struct policy_node *in,
		   uint64_t bytes, bool stored)
{
	p->reserved -= bytes;
	if (stored)
		policy_charge(p, in, (int64_t)bytes);
}

/* ---- victim choice ---- */

static bool eligible(const struct policy *p, const struct policy_node *n,
		     const struct policy_node *in, enum elig e)
{
	if (n == in || n->pinned || n->in_use || n->marked || !n->cached)
		return false;
	switch (e) {
	case ELIG_STREAM:
		return n->stream;
	case ELIG_PREFETCH:
		return n->stream ||
		       p->next_use(p->next_use_arg, n->fid) == NEXT_USE_NONE;
	case ELIG_KEPT:
		return !n->stream;
	default:
		return true;
	}
}

typedef struct policy_node *(*pick_fn)(const struct policy *p,
				       const struct policy_node *in,
				       enum elig e, int64_t now);

static struct policy_node *lru_pick(const struct policy *p,
				    const struct policy_node *in,
				    enum elig e, int64_t now)
{
	struct policy_node *n;

	(void)now;
	for (n = p->head.next; n != &p->head; n = n->next)
		if (eligible(p, n, in, e))
			return n;
	return NULL;
}

/* the coldest eligible entry, if @in is clearly hotter than it */
static struct policy_node *heat_pick(const struct policy *p,
				     const struct policy_node *in,
				     enum elig e, int64_t now)
{
	struct policy_node *n, *best = NULL;
	double best_heat = 0;

	for (n = p->head.next; n != &p->head; n = n->next) {
		double h;

		if (!eligible(p, n, in, e))
			continue;
		h = policy_heat(p, n, now);
		if (!best || h < best_heat) {
			best = n;
			best_heat = h;
		}
	}
	/* judge the newcomer by its history, not by the access now */
	if (best && in && in->prior < best_heat * HEAT_MARGIN &&
	    in->prior <= best_heat + 0.5)
		return NULL;
	return best;
}

/* Belady over the known future; heat among files with no known use */
static struct policy_node *auto_pick(const struct policy *p,
				     const struct policy_node *in,
				     enum elig e, int64_t now)
{
	struct policy_node *n, *best = NULL;
	uint64_t in_use, best_use = 0;
	double best_heat = 0;

	if (!p->next_use)
		return heat_pick(p, in, e, now);
	in_use = in ? p->next_use(p->next_use_arg, in->fid) : 0;
	for (n = p->head.next; n != &p->head; n = n->next) {
		uint64_t use;
		double h;

		if (!eligible(p, n, in, e))
			continue;
		use = p->next_use(p->next_use_arg, n->fid);
		h = policy_heat(p, n, now);
		/* furthest next use first; unknown use counts as furthest */
		if (!best || use > best_use || (use == best_use && h < best_heat)) {
			best = n;
			best_use = use;
			best_heat = h;
		}
	}
	if (!best || !in)
		return best;
	if (in_use == NEXT_USE_NONE && best_use == NEXT_USE_NONE)
		return heat_pick(p, in, e, now);
	/* Belady: never give up something needed sooner than the newcomer */
	return in_use < best_use ? best : NULL;
}

/*
 * Choose victims until @bytes more fit under @bound (and the limit).
 * With @relax, the bound becomes the limit after the first victim: the
 * newcomer only needed room in the window.  Victims are marked while
 * choosing and unmarked before returning, so nothing changes.
 */
static int choose(const struct policy *p, const struct policy_node *in,
		  uint64_t bytes, uint64_t bound, enum elig e, bool relax,
		  pick_fn pick, struct admission *out, int64_t now)
{
	uint64_t taken = p->used + p->reserved + bytes, freed = 0;
	int n = 0, i, rc = 0;

	out->partial = false;
	if (bytes > p->limit)
		return -ENOSPC;
	while (taken - freed > bound || taken - freed > p->limit) {
		struct policy_node *v;

		if (n == POLICY_MAX_VICTIMS) {
			out->partial = true;
			break;
		}
		v = pick(p, in, e, now);
		if (!v) {
			rc = -ENOSPC;
			break;
		}
		v->marked = true;
		out->victims[n++] = v;
		freed += v->cached;
		if (relax)
			bound = p->limit;
	}
	for (i = 0; i < n; i++)
		out->victims[i]->marked = false;
	return rc ? rc : n;
}

static int lru_admit(const struct policy *p, const struct policy_node *in,
		     uint64_t bytes, enum admit_kind kind,
		     struct admission *out, int64_t now)
{
	(void)kind;
	out->stream = false;
	return choose(p, in, bytes, p->limit, ELIG_ALL, false, lru_pick, out,
		      now);
}

static int heat_admit(const struct policy *p, const struct policy_node *in,
		      uint64_t bytes, enum admit_kind kind,
		      struct admission *out, int64_t now)
{
	(void)kind;
	out->stream = false;
	return choose(p, in, bytes, p->limit, ELIG_ALL, false, heat_pick,
		      out, now);
}

/* the kept/streamed split when the future is known */
static int auto_admit(const struct policy *p, const struct policy_node *in,
		      uint64_t bytes, enum admit_kind kind,
		      struct admission *out, int64_t now)
{
	uint64_t bound = p->limit, kept = p->used - p->used_stream;
	enum elig e = ELIG_ALL;

	if (!p->next_use || !in)
		return heat_admit(p, in, bytes, kind, out, now);
	out->stream = in->stream;
	if (!in->stream && kept + p->reserved + bytes <= p->limit - p->window) {
		bound = p->limit - p->window;	/* room to keep it */
		if (p->used + p->reserved + bytes > p->limit)
			e = ELIG_STREAM;
	} else if (kind == ADMIT_PREFETCH && (in->stream || !in->cached)) {
		out->stream = true;		/* stage it */
		e = ELIG_PREFETCH;
	} else {
		e = ELIG_KEPT;			/* Belady swap */
	}
	return choose(p, in, bytes, bound, e,
		      e == ELIG_STREAM || e == ELIG_PREFETCH, auto_pick, out,
		      now);
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
		uint64_t limit, uint64_t window)
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
	p->window = window;
	htab_init(&p->nodes, node_key);
	return 0;
}
