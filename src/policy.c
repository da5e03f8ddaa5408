// SPDX-License-Identifier: MIT
/* policy.c - see policy.h; LRU on a doubly linked list ordered by last */
#include <errno.h>
#include <string.h>

#include "policy.h"

static void lru_unlink(struct policy_node *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

/* keep the list sorted by last access: files loaded at start arrive in
 * any order, touches always go to the tail */
static void lru_add(struct policy *p, struct policy_node *n)
{
	struct policy_node *at = p->head.prev;

	while (at != &p->head && at->last > n->last)
		at = at->prev;
	n->prev = at;
	n->next = at->next;
	at->next->prev = n;
	at->next = n;
}

static void lru_touch(struct policy *p, struct policy_node *n, int64_t now)
{
	lru_unlink(n);
	n->last = now;
	n->count++;
	lru_add(p, n);
}

static void lru_del(struct policy *p, struct policy_node *n)
{
	(void)p;
	lru_unlink(n);
}

static struct policy_node *lru_first(struct policy *p)
{
	return p->head.next == &p->head ? NULL : p->head.next;
}

static struct policy_node *lru_next(struct policy *p, struct policy_node *n)
{
	return n->next == &p->head ? NULL : n->next;
}

static const struct policy_ops lru_ops = {
	.name = "lru",
	.add = lru_add,
	.touch = lru_touch,
	.del = lru_del,
	.first = lru_first,
	.next = lru_next,
};

int policy_init(struct policy *p, const char *name)
{
	if (strcmp(name, "lru"))
		return -EINVAL;
	p->ops = &lru_ops;
	p->head.prev = p->head.next = &p->head;
	return 0;
}
