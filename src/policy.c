// SPDX-License-Identifier: MIT
/* policy.c - see policy.h */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

bool policy_resident(const struct policy_node *n)
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
static void list_add(struct policy *p, struct policy_node *n)
{
	struct policy_node *at = p->head.prev;

	if (policy_resident(n))
		return;
	while (at != &p->head && at->last > n->last)
		at = at->prev;
	n->prev = at;
	n->next = at->next;
	at->next->prev = n;
	at->next = n;
}

double policy_heat(const struct policy *p, const struct policy_node *n,
		   int64_t now)
{
	double dt = (double)(now - n->score_at);

	if (dt <= 0 || p->half_life_s <= 0)
		return n->score;
	return n->score * exp2(-dt / p->half_life_s);
}

static void touch(struct policy *p, struct policy_node *n, int64_t now)
{
	bool resident = policy_resident(n);

	n->prior = policy_heat(p, n, now);
	n->score = n->prior + 1.0;
	n->score_at = now;
	n->last = now;
	n->count++;
	n->dirty = true;
	n->prefetched = false;
	if (resident) {		/* move to the most recent end */
		list_unlink(n);
		list_add(p, n);
	}
}

static void del(struct policy *p, struct policy_node *n)
{
	(void)p;
	if (policy_resident(n))
		list_unlink(n);
}

static struct policy_node *lru_victim(struct policy *p,
				      const struct policy_node *in,
				      bool (*eligible)(struct policy_node *, void *),
				      void *arg, int64_t now)
{
	struct policy_node *n;

	(void)in;
	(void)now;
	for (n = p->head.next; n != &p->head; n = n->next)
		if (!n->pinned && n != in && eligible(n, arg))
			return n;
	return NULL;
}

/* the coldest eligible resident, if @in is clearly hotter than it */
static struct policy_node *heat_victim(struct policy *p,
				       const struct policy_node *in,
				       bool (*eligible)(struct policy_node *, void *),
				       void *arg, int64_t now)
{
	struct policy_node *n, *best = NULL;
	double best_heat = 0;

	for (n = p->head.next; n != &p->head; n = n->next) {
		double h;

		if (n->pinned || n == in || !eligible(n, arg))
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

static struct policy_node *auto_victim(struct policy *p,
				       const struct policy_node *in,
				       bool (*eligible)(struct policy_node *, void *),
				       void *arg, int64_t now)
{
	struct policy_node *n, *best = NULL;
	uint64_t in_use, best_use = 0;
	double best_heat = 0;

	if (!p->next_use)
		return heat_victim(p, in, eligible, arg, now);
	in_use = in ? p->next_use(p->next_use_arg, in->fid) : 0;
	for (n = p->head.next; n != &p->head; n = n->next) {
		uint64_t use;
		double h;

		if (n->pinned || n == in || !eligible(n, arg))
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
		return heat_victim(p, in, eligible, arg, now);
	/* Belady: never give up something needed sooner than the newcomer */
	return in_use < best_use ? best : NULL;
}

static const struct policy_ops ops[] = {
	{ "lru", list_add, touch, del, lru_victim },
	{ "heat", list_add, touch, del, heat_victim },
	{ "auto", list_add, touch, del, auto_victim },
};

int policy_init(struct policy *p, const char *name, double half_life_s)
{
	size_t i;

	memset(p, 0, sizeof(*p));
	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (!strcmp(name, ops[i].name))
			p->ops = &ops[i];
	if (!p->ops)
		return -EINVAL;
	p->head.prev = p->head.next = &p->head;
	p->half_life_s = half_life_s;
	htab_init(&p->nodes, node_key);
	return 0;
}
