// SPDX-License-Identifier: MIT
/* membudget.c - see membudget.h */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "membudget.h"

struct membudget {
	pthread_mutex_t lock;		/* guards all below; a leaf */
	struct membudget_usage u;
	bool wanted;
	void (*on_free)(void *arg);
	void *arg;
};

int membudget_create(struct membudget **out, uint64_t limit)
{
	struct membudget *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	pthread_mutex_init(&b->lock, NULL);
	b->u.limit = limit ? limit : 1;
	*out = b;
	return 0;
}

void membudget_destroy(struct membudget *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b);
}

static bool allowed(const struct membudget_usage *u, enum mb_class cls,
		    uint64_t bytes)
{
	switch (cls) {
	case MB_AHEAD:
		return u->used + bytes <= u->limit / 4 * 3;
	case MB_CTL:
		return u->used + bytes <= u->limit &&
		       u->by_class[MB_CTL] + bytes <= u->limit / 4;
	default:
		return u->used + bytes <= u->limit;
	}
}

static void charge(struct membudget_usage *u, enum mb_class cls,
		   uint64_t bytes)
{
	u->used += bytes;
	u->by_class[cls] += bytes;
	if (u->used > u->peak)
		u->peak = u->used;
}

bool membudget_try(struct membudget *b, enum mb_class cls, uint64_t bytes)
{
	bool ok;

	pthread_mutex_lock(&b->lock);
	ok = allowed(&b->u, cls, bytes);
	if (ok) {
		charge(&b->u, cls, bytes);
	} else {
		b->u.refused++;
		b->wanted |= cls == MB_DEMAND;
	}
	pthread_mutex_unlock(&b->lock);
	return ok;
}

void membudget_force(struct membudget *b, enum mb_class cls, uint64_t bytes)
{
	pthread_mutex_lock(&b->lock);
	if (!allowed(&b->u, MB_DEMAND, bytes))
		b->u.overdraft++;
	charge(&b->u, cls, bytes);
	pthread_mutex_unlock(&b->lock);
}

void membudget_give(struct membudget *b, enum mb_class cls, uint64_t bytes)
{
	bool wake;

	pthread_mutex_lock(&b->lock);
	b->u.used -= bytes;
	b->u.by_class[cls] -= bytes;
	wake = b->wanted && b->on_free;
	b->wanted = false;
	pthread_mutex_unlock(&b->lock);
	if (wake)
		b->on_free(b->arg);
}

void membudget_on_free(struct membudget *b, void (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&b->lock);
	b->on_free = fn;
	b->arg = arg;
	pthread_mutex_unlock(&b->lock);
}

void membudget_usage(struct membudget *b, struct membudget_usage *u)
{
	pthread_mutex_lock(&b->lock);
	*u = b->u;
	pthread_mutex_unlock(&b->lock);
}
