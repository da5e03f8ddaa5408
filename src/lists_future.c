// SPDX-License-Identifier: MIT
/*
 * lists_future.c - next uses of a file over the active lists, one by one
 * (lists_next_use*()) and incrementally (lists_sync(), lists_where(),
 * lists_reads(): the future the policy asks).  See lists.h.
 */
#include <errno.h>
#include <pthread.h>

#include "lists_priv.h"
#include "policy.h"

_Static_assert(LISTS_MAX <= POLICY_FUTURE_SLOTS, "a slot per list");

/* remaining() up to expected_end() (read files are all below it) */
static uint64_t remaining_expected(const struct rlist *r,
				   const struct epoch *e)
{
	return expected_end(r, e) - e->low - e->read_ahead;
}

/* bytes of @e from ent @i on (@i <= n) */
static uint64_t bytes_from(const struct epoch *e, uint32_t i)
{
	return i < e->n ? e->bytes - e->ents[i].off : 0;
}

/* keep the two smallest of *@a <= *@b and @v */
static void two_min(uint64_t *a, uint64_t *b, uint64_t v)
{
	if (v < *a) {
		*b = *a;
		*a = v;
	} else if (v < *b) {
		*b = v;
	}
}

/* @fid's entry in @r's current epoch if it is still to be read there
 * (unread, before the expected end), else NULL */
static const struct ent *ahead_now(const struct rlist *r, uint64_t fid)
{
	const struct epoch *e = r->cur;
	const struct ent *x = e ? htab_get(&e->by_fid, fid) : NULL;

	return x && unread_ahead(e, x) && x->idx < expected_end(r, e) ? x :
									NULL;
}

/* the first of @f's ranges at or after ent @from */
static uint32_t first_at(const struct franges *f, uint32_t from)
{
	uint32_t lo = 0, hi = f->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (f->idx[mid] < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The first uses of @fid in @e into @out, in list order, at most @want
 * (<= 2): its own entry @x (may be NULL) and its unread ranges from ent
 * @from on, before @end (a file listed by ranges is used at each of
 * them, so its use after the coming one may be in the same epoch).
 * Return their number.
 */
static unsigned epoch_uses(const struct epoch *e, const struct ent *x,
			   uint64_t fid, uint32_t from, uint32_t end,
			   unsigned want, const struct ent **out)
{
	const struct franges *f = e->file ? htab_get(&e->by_file, fid) : NULL;
	uint32_t i = f ? first_at(f, from) : 0;
	unsigned n = 0;

	while (n < want) {
		const struct ent *y = NULL;

		/* read ones at or past low are the out-of-order window's few */
		for (; f && i < f->n && f->idx[i] < end && !y; i++)
			if (!is_read(e, f->idx[i]))
				y = &e->ents[f->idx[i]];
		if (x && (!y || x->idx < y->idx)) {
			out[n++] = x;
			x = NULL;
			if (y)
				i--;	/* look at it again */
		} else if (y) {
			out[n++] = y;
		} else {
			break;
		}
	}
	return n;
}

/* the first @want (<= 2) uses of @fid (a file, or a file's ranges) in
 * (active) list @r into the two minima; each later use in @r is later
 * than the ones before it */
static void uses_in(const struct rlist *r, uint64_t fid, bool bytes,
		    unsigned want, uint64_t *best, uint64_t *second)
{
	const struct epoch *e = r->cur;
	const struct ent *xs[2];
	uint64_t base = 0;
	unsigned found = 0, k, n, j;

	if (e) {
		uint32_t end = expected_end(r, e);

		n = epoch_uses(e, ahead_now(r, fid), fid, e->low, end, want,
			       xs);
		for (j = 0; j < n; j++)
			two_min(best, second, bytes ?
				xs[j]->off - e->ents[e->low].off :
				(uint64_t)(xs[j]->idx - e->low));
		found += n;
		base = bytes ? bytes_from(e, e->low) - bytes_from(e, end) :
			       remaining_expected(r, e);
	}
	for (k = 0; k < r->nq && found < want; k++) {
		const struct epoch *q = r->q[k];

		n = epoch_uses(q, htab_get(&q->by_fid, fid), fid, 0, q->n,
			       want - found, xs);
		for (j = 0; j < n; j++)
			two_min(best, second,
				base + (bytes ? xs[j]->off : xs[j]->idx));
		found += n;
		base += bytes ? q->bytes : q->n;
	}
}

/* the lists not idle at @now into @act; their number */
static unsigned active_lists(const struct lists *l, uint64_t now,
			     const struct rlist **act)
{
	unsigned i, n = 0;

	for (i = 0; i < l->n; i++)
		if (!is_idle(l, l->l[i], now))
			act[n++] = l->l[i];
	return n;
}

/*
 * The soonest use of @fid over the active lists, and in *@after the use
 * after it (the soonest two over every list's uses in its current and
 * queued epochs), counted in files or (@bytes) in bytes read before it.
 */
static uint64_t next_use(struct lists *l, uint64_t fid, bool bytes,
			 uint64_t *after)
{
	uint64_t best = UINT64_MAX, second = UINT64_MAX;
	const struct rlist *act[LISTS_MAX];
	unsigned i, n;

	pthread_mutex_lock(&l->lock);
	n = active_lists(l, l->now_ms(l->clock_arg), act);
	for (i = 0; i < n; i++)
		uses_in(act[i], fid, bytes, 2, &best, &second);
	pthread_mutex_unlock(&l->lock);
	if (after)
		*after = second;
	return best;
}

void lists_next_use_many(void *arg, const uint64_t *fids, uint64_t *uses,
			 size_t nfids)
{
	struct lists *l = arg;
	const struct rlist *act[LISTS_MAX];
	unsigned i, n;
	size_t j;

	pthread_mutex_lock(&l->lock);
	n = active_lists(l, l->now_ms(l->clock_arg), act);
	for (j = 0; j < nfids; j++) {
		uint64_t second = UINT64_MAX;

		uses[j] = UINT64_MAX;
		for (i = 0; i < n; i++)
			uses_in(act[i], fids[j], true, 1, &uses[j], &second);
	}
	pthread_mutex_unlock(&l->lock);
}

bool lists_unread_now(struct lists *l, uint64_t fid)
{
	bool unread = false;
	uint64_t now;
	unsigned i;

	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	for (i = 0; i < l->n && !unread; i++)
		unread = !is_idle(l, l->l[i], now) && ahead_now(l->l[i], fid);
	pthread_mutex_unlock(&l->lock);
	return unread;
}

uint64_t lists_next_use(void *arg, uint64_t fid)
{
	return next_use(arg, fid, false, NULL);
}

uint64_t lists_next_use_bytes(void *arg, uint64_t fid, uint64_t *after)
{
	return next_use(arg, fid, true, after);
}

bool lists_known(void *arg)
{
	struct lists *l = arg;
	const struct rlist *act[LISTS_MAX];
	bool known = false;
	unsigned i, n;

	pthread_mutex_lock(&l->lock);
	n = active_lists(l, l->now_ms(l->clock_arg), act);
	for (i = 0; i < n && !known; i++)
		known = act[i]->cur || act[i]->nq;
	pthread_mutex_unlock(&l->lock);
	return known;
}

/* ---- the same, incrementally (policy_future: sync, where, reads) ---- */

/* bytes of @r's current epoch before its low: where its keys count from */
static uint64_t origin(const struct rlist *r)
{
	const struct epoch *e = r->cur;

	return e ? e->bytes - bytes_from(e, e->low) : 0;
}

void lists_sync(void *arg, struct future_sync *s)
{
	struct lists *l = arg;
	uint64_t now;
	unsigned i;

	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	s->gen = l->gen;
	s->reads = l->nreads;
	s->active = 0;
	for (i = 0; i < l->n; i++) {
		s->origin[i] = origin(l->l[i]);
		if (!is_idle(l, l->l[i], now))
			s->active |= 1ULL << i;
	}
	pthread_mutex_unlock(&l->lock);
}

int lists_where(void *arg, uint64_t fid, uint64_t gen, unsigned *slot,
		uint64_t *key)
{
	struct lists *l = arg;
	uint64_t now, best = UINT64_MAX;
	unsigned i;
	int rc = 0;

	pthread_mutex_lock(&l->lock);
	if (l->gen != gen) {
		rc = -ESTALE;
		goto out;
	}
	now = l->now_ms(l->clock_arg);
	for (i = 0; i < l->n; i++) {
		uint64_t use = UINT64_MAX, second = UINT64_MAX;

		if (is_idle(l, l->l[i], now))
			continue;
		uses_in(l->l[i], fid, true, 1, &use, &second);
		if (use < best) {
			best = use;
			*slot = i;
			*key = use + origin(l->l[i]);
			rc = 1;
		}
	}
out:
	pthread_mutex_unlock(&l->lock);
	return rc;
}

long lists_reads(void *arg, uint64_t from, uint64_t to, uint64_t *fids,
		 size_t max)
{
	struct lists *l = arg;
	long n = -1;
	uint64_t k;

	pthread_mutex_lock(&l->lock);
	if (from <= to && to <= l->nreads && to - from <= max &&
	    l->nreads - from <= LISTS_READS) {
		for (k = from; k < to; k++)
			fids[k - from] = l->reads[k % LISTS_READS];
		n = (long)(to - from);
	}
	pthread_mutex_unlock(&l->lock);
	return n;
}
