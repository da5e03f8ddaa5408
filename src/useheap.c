// SPDX-License-Identifier: MIT
/* useheap.c - see useheap.h */
#include <errno.h>
#include <stdlib.h>

#include "heatheap.h"
#include "policy_priv.h"
#include "useheap.h"

void useheap_init(struct useheap *u)
{
	unsigned s;

	u->lost = false;
	for (s = 0; s <= USEHEAP_SLOTS; s++) {
		u->h[s].a = NULL;
		u->h[s].n = u->h[s].cap = 0;
	}
}

void useheap_release(struct useheap *u)
{
	unsigned s;

	for (s = 0; s <= USEHEAP_SLOTS; s++)
		free(u->h[s].a);
	useheap_init(u);
}

bool useheap_in(const struct policy_node *x)
{
	return x->upos != 0;
}

/* does @x come before @y in heap @slot */
static bool before(unsigned slot, const struct policy_node *x,
		   const struct policy_node *y)
{
	if (slot != USEHEAP_NONE && x->utail != y->utail)
		return x->utail > y->utail;
	return heatheap_colder(x, y);
}

/* put @x at index @i of heap @s (upos is the index + 1: 0 means out) */
static void place(struct useheap *u, unsigned s, size_t i,
		  struct policy_node *x)
{
	u->h[s].a[i] = x;
	x->upos = (uint32_t)(i + 1);
}

static void sift_down(struct useheap *u, unsigned s, size_t i)
{
	struct policy_node **a = u->h[s].a, *x = a[i];
	size_t n = u->h[s].n;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && before(s, a[c + 1], a[c]))
			c++;
		if (!before(s, a[c], x))
			break;
		place(u, s, i, a[c]);
		i = c;
	}
	place(u, s, i, x);
}

/* @x at @i moved: up past its parents, or down */
static void sift(struct useheap *u, unsigned s, size_t i)
{
	struct policy_node **a = u->h[s].a, *x = a[i];

	if (!i || !before(s, x, a[(i - 1) / 2])) {
		sift_down(u, s, i);
		return;
	}
	while (i && before(s, x, a[(i - 1) / 2])) {
		place(u, s, i, a[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	place(u, s, i, x);
}

static int grow(struct useheap *u, unsigned s, size_t want)
{
	struct policy_node **a;
	size_t cap = u->h[s].cap ? u->h[s].cap : 64;

	if (want <= u->h[s].cap)
		return 0;
	while (cap < want)
		cap *= 2;
	a = realloc(u->h[s].a, cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	u->h[s].a = a;
	u->h[s].cap = cap;
	return 0;
}

int useheap_insert(struct useheap *u, struct policy_node *x)
{
	unsigned s = x->uslot;

	if (grow(u, s, u->h[s].n + 1))
		return -ENOMEM;
	place(u, s, u->h[s].n++, x);
	sift(u, s, u->h[s].n - 1);
	return 0;
}

void useheap_remove(struct useheap *u, struct policy_node *x)
{
	unsigned s = x->uslot;
	size_t i = x->upos - 1;
	struct policy_node *last = u->h[s].a[--u->h[s].n];

	x->upos = 0;
	if (i == u->h[s].n)
		return;
	place(u, s, i, last);
	sift(u, s, i);
}

void useheap_update(struct useheap *u, struct policy_node *x)
{
	sift(u, x->uslot, x->upos - 1);
}

struct policy_node *useheap_top(const struct useheap *u, unsigned slot)
{
	return u->h[slot].n ? u->h[slot].a[0] : NULL;
}

int useheap_forget(struct useheap *u)
{
	size_t total = u->h[USEHEAP_NONE].n, i;
	unsigned s;

	for (s = 0; s < USEHEAP_SLOTS; s++)
		total += u->h[s].n;
	if (grow(u, USEHEAP_NONE, total))
		return -ENOMEM;
	for (s = 0; s < USEHEAP_SLOTS; s++) {
		for (i = 0; i < u->h[s].n; i++) {
			struct policy_node *x = u->h[s].a[i];

			x->uslot = USEHEAP_NONE;
			place(u, USEHEAP_NONE, u->h[USEHEAP_NONE].n++, x);
		}
		u->h[s].n = 0;
	}
	for (i = u->h[USEHEAP_NONE].n / 2; i-- > 0;)	/* heapify */
		sift_down(u, USEHEAP_NONE, i);
	return 0;
}
