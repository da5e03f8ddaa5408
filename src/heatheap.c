// SPDX-License-Identifier: MIT
/* heatheap.c - see heatheap.h */
#include <errno.h>
#include <stdlib.h>

#include "heatheap.h"
#include "policy_priv.h"

void heatheap_init(struct heatheap *h)
{
	h->a = NULL;
	h->n = h->cap = 0;
}

void heatheap_release(struct heatheap *h)
{
	free(h->a);
	heatheap_init(h);
}

bool heatheap_in(const struct policy_node *x)
{
	return x->hpos != 0;
}

bool heatheap_colder(const struct policy_node *x, const struct policy_node *y)
{
	if (x->hkey != y->hkey)
		return x->hkey < y->hkey;
	if (x->last != y->last)
		return x->last < y->last;
	return x->seq < y->seq;
}

/* put @x at index @i (hpos is the index + 1: 0 means out) */
static void set(struct heatheap *h, size_t i, struct policy_node *x)
{
	h->a[i] = x;
	x->hpos = i + 1;
}

static void sift_up(struct heatheap *h, size_t i)
{
	struct policy_node *x = h->a[i];

	while (i && heatheap_colder(x, h->a[(i - 1) / 2])) {
		set(h, i, h->a[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	set(h, i, x);
}

static void sift_down(struct heatheap *h, size_t i)
{
	struct policy_node *x = h->a[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && heatheap_colder(h->a[c + 1], h->a[c]))
			c++;
		if (!heatheap_colder(h->a[c], x))
			break;
		set(h, i, h->a[c]);
		i = c;
	}
	set(h, i, x);
}

int heatheap_insert(struct heatheap *h, struct policy_node *x)
{
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 256;
		struct policy_node **a = realloc(h->a, cap * sizeof(*a));

		if (!a)
			return -ENOMEM;
		h->a = a;
		h->cap = cap;
	}
	set(h, h->n++, x);
	sift_up(h, h->n - 1);
	return 0;
}

void heatheap_remove(struct heatheap *h, struct policy_node *x)
{
	size_t i = x->hpos - 1;
	struct policy_node *last = h->a[--h->n];

	x->hpos = 0;
	if (i == h->n)
		return;
	set(h, i, last);
	heatheap_update(h, last);
}

void heatheap_update(struct heatheap *h, struct policy_node *x)
{
	size_t i = x->hpos - 1;

	if (i && heatheap_colder(x, h->a[(i - 1) / 2]))
		sift_up(h, i);
	else
		sift_down(h, i);
}

/* the side queue of a walk: heap indexes, a min-heap by their nodes */
struct side {
	const struct heatheap *h;
	size_t q[HEATHEAP_WALK_MAX];
	size_t n;
};

static bool side_less(const struct side *s, size_t a, size_t b)
{
	return heatheap_colder(s->h->a[s->q[a]], s->h->a[s->q[b]]);
}

static void side_swap(struct side *s, size_t a, size_t b)
{
	size_t t = s->q[a];

	s->q[a] = s->q[b];
	s->q[b] = t;
}

static int side_push(struct side *s, size_t idx)
{
	size_t i;

	if (idx >= s->h->n)
		return 0;
	if (s->n == HEATHEAP_WALK_MAX)
		return -E2BIG;
	i = s->n++;
	s->q[i] = idx;
	for (; i && side_less(s, i, (i - 1) / 2); i = (i - 1) / 2)
		side_swap(s, i, (i - 1) / 2);
	return 0;
}

static size_t side_pop(struct side *s)
{
	size_t top = s->q[0], i = 0;

	s->q[0] = s->q[--s->n];
	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= s->n)
			break;
		if (c + 1 < s->n && side_less(s, c + 1, c))
			c++;
		if (!side_less(s, c, i))
			break;
		side_swap(s, i, c);
		i = c;
	}
	return top;
}

int heatheap_walk(const struct heatheap *h,
		  bool (*visit)(void *arg, struct policy_node *x), void *arg)
{
	struct side *s;
	int rc = 0;

	if (!h->n)
		return 0;
	s = malloc(sizeof(*s));		/* 8 KiB: not on a FUSE thread's stack */
	if (!s)
		return -ENOMEM;
	s->h = h;
	s->n = 0;
	side_push(s, 0);
	while (s->n) {
		size_t i = side_pop(s);

		if (!visit(arg, h->a[i]))
			break;
		rc = side_push(s, 2 * i + 1);
		if (!rc)
			rc = side_push(s, 2 * i + 2);
		if (rc)
			break;
	}
	free(s);
	return rc;
}
