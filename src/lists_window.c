// SPDX-License-Identifier: MIT
/*
 * lists_window.c - walking ahead of a list's reader: cursors over a
 * list's epochs, the prefetcher's two marks in them (ready: every file
 * before it is on disk; work: nothing left to do before it), the window
 * of files it works on next, and the lead a reader has; see lists.h and
 * lists_priv.h.
 */
#include <pthread.h>
#include <stdlib.h>

#include "lists_priv.h"

struct cursor {
	const struct rlist *r;
	int ep;			/* -1: the current epoch, else in q */
	uint32_t i;
};

static void cursor_init(struct cursor *c, const struct rlist *r)
{
	c->r = r;
	c->ep = -1;
	c->i = r->cur ? r->cur->low : 0;
}

/* the next file @c's reader will open, or NULL */
static const struct ent *cursor_next(struct cursor *c)
{
	for (;;) {
		const struct epoch *e = c->ep < 0 ? c->r->cur :
			(unsigned)c->ep < c->r->nq ? c->r->q[c->ep] : NULL;

		if (!e && c->ep >= 0)
			return NULL;
		if (!e || c->i >= (c->ep < 0 ? expected_end(c->r, e) : e->n)) {
			c->ep++;
			c->i = 0;
			continue;
		}
		if (c->ep < 0 && is_read(e, c->i)) {
			c->i++;
			continue;
		}
		return &e->ents[c->i++];
	}
}

/*
 * @c at @m, if it is still in @r's epochs (else at low).  A mark in a
 * queued epoch is gone once an epoch before it was parsed after it (the
 * current one replaced, say): what it says about the files before it was
 * said of other files.  Serials grow with each parse.
 */
static bool cursor_at(struct cursor *c, const struct rlist *r,
		      const struct mark *m)
{
	unsigned k;

	cursor_init(c, r);
	if (!m->serial)
		return false;
	if (r->cur && r->cur->serial == m->serial) {
		if (m->i < r->cur->low || m->i > r->cur->n)
			return false;
		c->i = m->i;
		return true;
	}
	if (r->cur && r->cur->serial > m->serial)
		return false;
	for (k = 0; k < r->nq; k++) {
		if (r->q[k]->serial == m->serial && m->i <= r->q[k]->n) {
			c->ep = (int)k;
			c->i = m->i;
			return true;
		}
		if (r->q[k]->serial > m->serial)
			return false;
	}
	return false;
}

static bool cursor_at_mark(struct cursor *c, const struct rlist *r)
{
	return cursor_at(c, r, &r->ready);
}

/* is @a's position before @b's (both of one list)? */
static bool cursor_before(const struct cursor *a, const struct cursor *b)
{
	return a->ep < b->ep || (a->ep == b->ep && a->i < b->i);
}

/* @c's position as a mark */
static void set_mark(struct mark *m, const struct rlist *r,
		     const struct cursor *c)
{
	const struct epoch *e = c->ep < 0 ? r->cur :
		(unsigned)c->ep < r->nq ? r->q[c->ep] : NULL;

	m->serial = e ? e->serial : 0;
	m->i = c->i;
}

/* the lead: files and bytes from @r's low to its ready mark */
void rlist_lead(const struct rlist *r, uint64_t *files, uint64_t *bytes)
{
	struct cursor c, m;
	const struct ent *x;

	*files = *bytes = 0;
	if (!cursor_at_mark(&m, r))
		return;
	cursor_init(&c, r);
	/* x is at (c.ep, c.i - 1) once returned */
	while ((x = cursor_next(&c)) && !cursor_before(&m, &c)) {
		(*files)++;
		*bytes += x->size;
	}
}

/*
 * Up to @max files, round-robin over the active lists: each from its low
 * (after @skip files), or with @ahead from its ready mark, and after the
 * file there on from its work mark if that is further.  With @ahead,
 * *@marks: how many files the first pass gave (one per list, at its ready
 * mark); *@jumped: the index of the first file after a jump, @out if a
 * list jumped and none came after, SIZE_MAX if none jumped.
 */
static size_t window(struct lists *l, size_t skip, bool ahead, uint64_t *fids,
		     bool *current, unsigned char *slot, unsigned start,
		     size_t max, size_t *marks, size_t *jumped)
{
	struct cursor cur[LISTS_MAX], work[LISTS_MAX];
	bool first[LISTS_MAX], landed[LISTS_MAX];
	unsigned i, t, n = 0;
	size_t out = 0, k, pass = 0, jump = SIZE_MAX;
	bool more = true, any = false;
	uint64_t now;

	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	for (i = 0; i < l->n; i++) {
		if (is_idle(l, l->l[i], now))
			continue;
		first[n] = ahead &&
			cursor_at(&work[n], l->l[i], &l->l[i]->work);
		landed[n] = false;
		if (ahead)
			cursor_at_mark(&cur[n], l->l[i]);
		else
			cursor_init(&cur[n], l->l[i]);
		for (k = 0; k < skip && cursor_next(&cur[n]); k++)
			;
		if (k == skip)
			n++;
	}
	while (more && out < max) {
		more = false;
		for (t = 0; t < n && out < max; t++) {
			const struct ent *x;

			i = (t + start) % n;
			if (!cur[i].r)
				continue;
			x = cursor_next(&cur[i]);
			if (!x) {
				cur[i].r = NULL;
				continue;
			}
			if (landed[i] && jump == SIZE_MAX)
				jump = out;
			landed[i] = false;
			if (current)
				current[out] = cur[i].ep < 0;
			if (slot)
				slot[out] = (unsigned char)i;
			fids[out++] = x->fid;
			more = true;
			/* past the file at the ready mark: on at the work mark */
			if (first[i] && cursor_before(&cur[i], &work[i])) {
				cur[i] = work[i];
				landed[i] = any = true;
			}
			first[i] = false;
		}
		if (!pass)
			pass = out;
	}
	pthread_mutex_unlock(&l->lock);
	if (marks)
		*marks = pass;
	if (jumped)
		*jumped = any && jump == SIZE_MAX ? out : jump;
	return out;
}

size_t lists_window(struct lists *l, size_t skip, uint64_t *fids,
		    bool *current, unsigned char *slot, unsigned start,
		    size_t max)
{
	return window(l, skip, false, fids, current, slot, start, max, NULL,
		      NULL);
}

size_t lists_window_ahead(struct lists *l, uint64_t *fids, bool *current,
			  unsigned char *slot, unsigned start, size_t max,
			  size_t *marks, size_t *jumped)
{
	return window(l, 0, true, fids, current, slot, start, max, marks,
		      jumped);
}

/*
 * Move each list's ready mark (@work: its work mark) over the run of
 * @set's files after it: from low with @from_low, else from the mark (the
 * work mark: from where the last window went on, the further of the two).
 */
static void move_marks(struct lists *l, const uint64_t *set, size_t ns,
		       bool from_low, bool work)
{
	unsigned i;

	pthread_mutex_lock(&l->lock);
	for (i = 0; i < l->n; i++) {
		struct rlist *r = l->l[i];
		const struct ent *x;
		struct cursor c, w, at;
		uint64_t files = 0;

		if (from_low) {
			cursor_init(&c, r);
		} else {
			cursor_at_mark(&c, r);
			if (work && cursor_at(&w, r, &r->work) &&
			    cursor_before(&c, &w))
				c = w;
		}
		at = c;
		while (files < ns && (x = cursor_next(&c)) &&
		       bsearch(&x->fid, set, ns, sizeof(*set), lists_cmp_u64)) {
			files++;
			at = c;
		}
		set_mark(work ? &r->work : &r->ready, r, &at);
	}
	pthread_mutex_unlock(&l->lock);
}

/* move_marks() over those of @n files with @yes[i] (all if @yes is NULL) */
static void mark_run(struct lists *l, const uint64_t *fids, const bool *yes,
		     size_t n, bool from_low, bool work)
{
	uint64_t *set = malloc((n ? n : 1) * sizeof(*set));
	size_t i, ns = 0;

	if (!set)
		return;
	for (i = 0; i < n; i++)
		if (!yes || yes[i])
			set[ns++] = fids[i];
	qsort(set, ns, sizeof(*set), lists_cmp_u64);
	move_marks(l, set, ns, from_low, work);
	free(set);
}

void lists_set_ready(struct lists *l, const uint64_t *fids, const bool *ready,
		     size_t n)
{
	mark_run(l, fids, ready, n, true, false);
}

void lists_extend_ready(struct lists *l, const uint64_t *fids,
			const bool *ready, size_t n)
{
	mark_run(l, fids, ready, n, false, false);
}

void lists_note_worked(struct lists *l, const uint64_t *fids,
		       const bool *worked, size_t n, bool from_low)
{
	mark_run(l, fids, worked, n, from_low, true);
}
