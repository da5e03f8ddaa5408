// SPDX-License-Identifier: MIT
/* ranges.c - see ranges.h */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "hash.h"
#include "htab.h"
#include "ns.h"
#include "ranges.h"

#define KEY_SEED	0x72616e6765730a01ULL	/* "ranges" */

/* one file's ranges, sorted by offset before a lookup */
struct rfile {
	uint64_t fid;
	struct range **v;
	uint32_t n, cap;
	bool sorted;
	uint64_t maxlen;	/* the longest of them */
};

struct ranges {
	pthread_mutex_t lock;
	struct htab by_key;	/* key -> struct range */
	struct htab by_fid;	/* fid -> struct rfile */
	atomic_size_t n;
};

static uint64_t range_key(const void *item)
{
	return ((const struct range *)item)->key;
}

static uint64_t rfile_key(const void *item)
{
	return ((const struct rfile *)item)->fid;
}

int ranges_create(struct ranges **out)
{
	struct ranges *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	htab_init(&r->by_key, range_key);
	htab_init(&r->by_fid, rfile_key);
	*out = r;
	return 0;
}

static void rfile_free(void *item)
{
	struct rfile *f = item;

	free(f->v);
	free(f);
}

void ranges_destroy(struct ranges *r)
{
	if (!r)
		return;
	htab_free(&r->by_key, free);
	htab_free(&r->by_fid, rfile_free);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

static uint64_t key_of(uint64_t fid, uint64_t off, uint64_t len)
{
	uint64_t w[3] = { fid, off, len };
	uint64_t k = hash64(w, sizeof(w), KEY_SEED);

	return k < NS_FIRST_INO ? k + NS_FIRST_INO : k;
}

static struct rfile *rfile_get_locked(struct ranges *r, uint64_t fid)
{
	struct rfile *f = htab_get(&r->by_fid, fid);

	if (f)
		return f;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->fid = fid;
	f->sorted = true;
	if (htab_put(&r->by_fid, f)) {
		free(f);
		return NULL;
	}
	return f;
}

static int rfile_add_locked(struct rfile *f, struct range *x)
{
	if (f->n == f->cap) {
		uint32_t cap = f->cap ? f->cap * 2 : 16;
		struct range **v = realloc(f->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->v = v;
		f->cap = cap;
	}
	if (f->n && f->v[f->n - 1]->off > x->off)
		f->sorted = false;
	f->v[f->n++] = x;
	if (x->len > f->maxlen)
		f->maxlen = x->len;
	return 0;
}

int ranges_intern(struct ranges *r, uint64_t fid, uint64_t off, uint64_t len,
		  uint64_t *key)
{
	uint64_t k = key_of(fid, off, len);
	struct range *x;
	struct rfile *f;
	int rc = 0;

	if (!len || off + len < off)
		return -EINVAL;
	pthread_mutex_lock(&r->lock);
	x = htab_get(&r->by_key, k);
	if (x) {
		if (x->fid != fid || x->off != off || x->len != len)
			rc = -EEXIST;
		goto out;
	}
	if (atomic_load(&r->n) >= RANGES_MAX) {
		rc = -ENOSPC;
		goto out;
	}
	f = rfile_get_locked(r, fid);
	x = malloc(sizeof(*x));
	if (!f || !x)
		goto out_nomem;
	*x = (struct range){ .key = k, .fid = fid, .off = off, .len = len };
	if (htab_put(&r->by_key, x))
		goto out_nomem;
	if (rfile_add_locked(f, x)) {
		htab_del(&r->by_key, k);
		goto out_nomem;
	}
	atomic_fetch_add(&r->n, 1);
out:
	pthread_mutex_unlock(&r->lock);
	if (!rc)
		*key = k;
	return rc;
out_nomem:
	pthread_mutex_unlock(&r->lock);
	free(x);
	return -ENOMEM;
}

bool ranges_get(struct ranges *r, uint64_t key, struct range *out)
{
	struct range *x;

	if (!atomic_load(&r->n))
		return false;
	pthread_mutex_lock(&r->lock);
	x = htab_get(&r->by_key, key);
	if (x)
		*out = *x;
	pthread_mutex_unlock(&r->lock);
	return x != NULL;
}

static int by_off(const void *a, const void *b)
{
	const struct range *x = *(struct range *const *)a;
	const struct range *y = *(struct range *const *)b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->len < y->len ? -1 : x->len > y->len;
}

/* the first of @f's ranges (sorted) that starts at @from or later */
static uint32_t lower_bound(const struct rfile *f, uint64_t from)
{
	uint32_t lo = 0, hi = f->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (f->v[mid]->off < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

size_t ranges_hit(struct ranges *r, uint64_t fid, uint64_t off, uint64_t len,
		  uint64_t *keys, size_t max)
{
	uint64_t end = off + len < off ? UINT64_MAX : off + len;
	struct rfile *f;
	size_t n = 0;
	uint32_t i;

	if (!atomic_load(&r->n) || !len)
		return 0;
	pthread_mutex_lock(&r->lock);
	f = htab_get(&r->by_fid, fid);
	if (!f)
		goto out;
	if (!f->sorted) {
		qsort(f->v, f->n, sizeof(*f->v), by_off);
		f->sorted = true;
	}
	/* a range that overlaps starts after off - maxlen */
	i = lower_bound(f, off >= f->maxlen ? off - f->maxlen + 1 : 0);
	for (; i < f->n && f->v[i]->off < end && n < max; i++)
		if (f->v[i]->off + f->v[i]->len > off)
			keys[n++] = f->v[i]->key;
out:
	pthread_mutex_unlock(&r->lock);
	return n;
}

size_t ranges_count(struct ranges *r)
{
	return atomic_load(&r->n);
}
