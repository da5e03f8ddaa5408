// SPDX-License-Identifier: MIT
/*
 * lists.c - the table of lists, their epochs (publish, begin) and the
 * reader's position; the window ahead of it is lists_window.c's.  See
 * lists.h, lists_priv.h and docs/epochs.md
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lists_priv.h"

static uint64_t mono_ms(void *arg)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct lists *lists_create(void)
{
	struct lists *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	pthread_mutex_init(&l->lock, NULL);
	l->window = LISTS_WINDOW_DEFAULT;
	l->idle_ms = LISTS_IDLE_DEFAULT * 1000ULL;
	l->now_ms = mono_ms;
	return l;
}

static void rlist_free(struct rlist *r)
{
	unsigned i;

	epoch_free(r->cur);
	for (i = 0; i < r->nq; i++)
		epoch_free(r->q[i]);
	free(r->strag);
	free(r);
}

void lists_destroy(struct lists *l)
{
	unsigned i;

	if (!l)
		return;
	for (i = 0; i < l->n; i++)
		rlist_free(l->l[i]);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

void lists_set_idle(struct lists *l, unsigned seconds)
{
	pthread_mutex_lock(&l->lock);
	l->idle_ms = seconds * 1000ULL;
	l->gen++;
	pthread_mutex_unlock(&l->lock);
}

void lists_set_window(struct lists *l, unsigned files)
{
	pthread_mutex_lock(&l->lock);
	l->window = MAX(files, 1U);
	l->gen++;
	pthread_mutex_unlock(&l->lock);
}

void lists_set_clock(struct lists *l, lists_clock_fn now_ms, void *arg)
{
	pthread_mutex_lock(&l->lock);
	l->now_ms = now_ms ? now_ms : mono_ms;
	l->clock_arg = arg;
	l->gen++;
	pthread_mutex_unlock(&l->lock);
}

bool lists_name_ok(const char *name)
{
	size_t i, n = strlen(name);

	if (!n || n >= LIST_NAME_MAX || name[0] == '.')
		return false;
	for (i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
			return false;
	}
	return true;
}

/* ---- one epoch: read bits, low and high ---- */

/* files of the "just re-opened" window */
static uint32_t repeat_window(const struct lists *l, const struct epoch *e)
{
	return MIN(l->window, MAX(e->n / 4, 1U));
}

/* low past the read files in front of it */
static void settle_low(struct epoch *e)
{
	while (e->low < e->n && is_read(e, e->low)) {
		e->low++;
		e->read_ahead--;
	}
}

/* skip every unread file below @to */
static void raise_low(struct epoch *e, uint32_t to)
{
	for (; e->low < to; e->low++)
		if (is_read(e, e->low))
			e->read_ahead--;
	settle_low(e);
}

/* ent @i (unread, >= low) was opened */
static void mark_read(const struct lists *l, struct epoch *e, uint32_t i,
		      bool ready)
{
	uint32_t w = ooo_window(l, e);

	if (i >= e->low + w)	/* a jump: what it passes is skipped */
		raise_low(e, i + 1 - w);
	e->read[i / 64] |= 1ULL << (i % 64);
	e->read_ahead++;
	e->opened++;
	e->ready += ready;
	e->high = MAX(e->high, i + 1);
	settle_low(e);
}

/* start over at @at: files below it count as read (a resume) */
static void restart(struct epoch *e, uint64_t at)
{
	memset(e->read, 0, (e->n + 63) / 64 * sizeof(*e->read));
	e->low = e->high = (uint32_t)MIN(at, (uint64_t)e->n);
	e->read_ahead = 0;
	e->opened = e->ready = 0;
}

/* ---- a list's epochs ---- */

struct rlist *rlist_find(struct lists *l, const char *name)
{
	unsigned i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->l[i]->name, name))
			return l->l[i];
	return NULL;
}

/*
 * The table is full: the list idle the longest gives its place (lists
 * are never removed otherwise, so a long-lived mount that sees a new name
 * per job would refuse every name past the 64th).  0, or -ENOSPC if no
 * list is idle.
 */
static int make_room(struct lists *l, uint64_t now)
{
	unsigned i, v = LISTS_MAX;

	for (i = 0; i < l->n; i++)
		if (is_idle(l, l->l[i], now) &&
		    (v == LISTS_MAX || l->l[i]->active_ms < l->l[v]->active_ms))
			v = i;
	if (v == LISTS_MAX)
		return -ENOSPC;
	rlist_free(l->l[v]);
	memmove(&l->l[v], &l->l[v + 1], (l->n - v - 1) * sizeof(l->l[0]));
	l->n--;
	return 0;
}

static int find_or_add(struct lists *l, const char *name, uint64_t now,
		       struct rlist **out)
{
	struct rlist *r = rlist_find(l, name);

	if (!r) {
		if (l->n == LISTS_MAX && make_room(l, now))
			return -ENOSPC;
		r = calloc(1, sizeof(*r));
		if (!r)
			return -ENOMEM;
		snprintf(r->name, sizeof(r->name), "%s", name);
		r->last_ratio = -1;
		r->stop = 1.0;
		r->want = LIST_NO_EPOCH;
		r->last_no = LIST_NO_EPOCH;
		r->active_ms = now;
		l->l[l->n++] = r;
	}
	*out = r;
	return 0;
}

static void drop_stragglers(struct rlist *r)
{
	free(r->strag);
	r->strag = NULL;
	r->nstrag = 0;
}

/* remember the current epoch's unread files between low and high */
static void keep_stragglers(struct rlist *r)
{
	struct epoch *e = r->cur;
	uint32_t i, n = 0;

	drop_stragglers(r);
	if (!e || e->high <= e->low)
		return;
	r->strag = malloc((e->high - e->low) * sizeof(*r->strag));
	if (!r->strag)
		return;			/* only costs precision */
	for (i = e->low; i < e->high; i++)
		if (!is_read(e, i))
			r->strag[n++] = e->ents[i].fid;
	r->nstrag = n;
	qsort(r->strag, n, sizeof(*r->strag), lists_cmp_u64);
}

/* true if @fid was a straggler of @r's previous epoch (it is no more) */
static bool take_straggler(struct rlist *r, uint64_t fid)
{
	uint64_t *s;

	if (!r->nstrag)
		return false;
	s = bsearch(&fid, r->strag, r->nstrag, sizeof(*s), lists_cmp_u64);
	if (!s)
		return false;
	memmove(s, s + 1, (r->strag + --r->nstrag - s) * sizeof(*s));
	return true;
}

/* the current epoch is over: remember its hit ratio and free it */
static void retire(struct rlist *r)
{
	if (!r->cur)
		return;
	r->last_ratio = r->cur->opened ?
			(double)r->cur->ready / r->cur->opened : -1;
	epoch_free(r->cur);
	r->cur = NULL;
	r->epochs++;
}

static struct epoch *pop_queued(struct rlist *r)
{
	struct epoch *e = r->q[0];

	memmove(r->q, r->q + 1, --r->nq * sizeof(*r->q));
	return e;
}

/* @r's marks say nothing any more (its current epoch's read files or
 * expected end changed under them) */
static void forget_marks(struct rlist *r)
{
	r->ready.serial = r->work.serial = 0;
}

static void make_current(struct rlist *r, struct epoch *e, uint64_t at)
{
	r->cur = e;
	restart(e, at);
	r->last_no = e->no;
	r->want = LIST_NO_EPOCH;
}

/* the current epoch ends for the next one: remember where */
static void learn_stop(struct rlist *r)
{
	const struct epoch *e = r->cur;

	if (e && e->opened)
		r->stop = e->high >= e->n ? 1.0 : (double)e->high / e->n;
}

/* the first queued epoch becomes current (or none is) */
static void advance(struct rlist *r, bool stragglers)
{
	if (stragglers)
		keep_stragglers(r);
	else
		drop_stragglers(r);
	learn_stop(r);
	retire(r);
	if (r->nq)
		make_current(r, pop_queued(r), 0);
}

/* drop queued epochs numbered below @no (all of them if @all) */
static void drop_queued(struct rlist *r, int64_t no, bool all)
{
	while (r->nq && (all || r->q[0]->no < no))
		epoch_free(pop_queued(r));
}

/* the number a begin of epoch @no (LIST_NO_EPOCH: the next one) starts */
static int64_t begin_number(const struct rlist *r, int64_t no)
{
	if (no != LIST_NO_EPOCH)
		return no;
	if (r->nq)
		return r->q[0]->no;
	if (r->cur)
		return r->cur->no + 1;
	if (r->want != LIST_NO_EPOCH)
		return r->want;
	return r->last_no + 1;
}

/* epoch @no (LIST_NO_EPOCH: the next one) begins, @at files in; its number */
static int64_t begin(struct rlist *r, int64_t no, uint64_t at)
{
	int64_t was = r->cur ? r->cur->no : r->want;

	drop_stragglers(r);
	no = begin_number(r, no);
	if (r->cur && r->cur->no == no) {
		restart(r->cur, at);	/* from the start, or resumed */
		forget_marks(r);
		return no;
	}
	if (was == LIST_NO_EPOCH || no > was)
		learn_stop(r);
	else
		r->stop = 1.0;	/* a restart: where it crashed says nothing */
	retire(r);
	/* back to an earlier epoch (a restart): what was queued is void */
	drop_queued(r, no, was != LIST_NO_EPOCH && no < was);
	if (r->nq && r->q[0]->no == no) {
		make_current(r, pop_queued(r), at);
		return no;
	}
	r->want = no;
	r->want_at = (uint32_t)MIN(at, (uint64_t)UINT32_MAX);
	return no;
}

/*
 * @e replaces the current epoch (same number): the files the reader
 * passed (read, or below low: skipped or before a resume point) stay
 * passed, whatever their new places, and the position is one past the
 * furthest of them.
 */
static void replace_current(const struct lists *l, struct rlist *r,
			    struct epoch *e)
{
	struct epoch *old = r->cur;
	uint32_t i;

	for (i = 0; i < old->n; i++) {
		struct ent *x;

		if (i >= old->low && !is_read(old, i))
			continue;
		x = htab_get(&e->by_fid, old->ents[i].fid);
		if (x) {
			e->read[x->idx / 64] |= 1ULL << (x->idx % 64);
			e->read_ahead++;
			e->high = MAX(e->high, x->idx + 1);
		}
	}
	if (e->high > ooo_window(l, e))
		raise_low(e, e->high - ooo_window(l, e));
	settle_low(e);
	e->opened = old->opened;
	e->ready = old->ready;
	epoch_free(old);
	r->cur = e;
}

/* queue @e by number; the outcome */
static enum list_outcome enqueue(struct rlist *r, struct epoch *e)
{
	unsigned i;

	for (i = 0; i < r->nq && r->q[i]->no < e->no; i++)
		;
	if (i < r->nq && r->q[i]->no == e->no) {
		epoch_free(r->q[i]);
		r->q[i] = e;
		return LO_QUEUED;
	}
	if (r->nq == LIST_QUEUE_MAX) {
		if (i == r->nq)
			return LO_QUEUE_FULL;
		epoch_free(r->q[--r->nq]);	/* the furthest goes */
	}
	memmove(r->q + i + 1, r->q + i, (r->nq - i) * sizeof(*r->q));
	r->q[i] = e;
	r->nq++;
	return LO_QUEUED;
}

static enum list_outcome place_numbered(const struct lists *l,
					struct rlist *r, struct epoch *e,
					bool idle)
{
	int64_t c = r->cur ? r->cur->no : r->want;

	if (r->cur && e->no > c && fully_read(r->cur)) {
		advance(r, false);
		c = r->cur ? r->cur->no : LIST_NO_EPOCH;
	}
	if (c != LIST_NO_EPOCH &&
	    (e->no < c || (idle && r->cur && e->no == c))) {
		if (!idle)
			return LO_STALE;
		/* the reader went away: a new run may number from 0, or
		 * from where the old one was (its progress is not ours) */
		drop_stragglers(r);
		retire(r);
		drop_queued(r, 0, true);
		r->want = LIST_NO_EPOCH;
		r->stop = 1.0;
		c = LIST_NO_EPOCH;
	}
	if (r->cur && e->no == c) {
		replace_current(l, r, e);
		return LO_REPLACED;
	}
	if (!r->cur && (c == LIST_NO_EPOCH || e->no == c)) {
		make_current(r, e, c == LIST_NO_EPOCH ? 0 : r->want_at);
		return LO_CURRENT;
	}
	return enqueue(r, e);
}

/*
 * What place_numbered() would see of @r, by numbers only: the current
 * (or awaited) epoch's number, whether it is there and read to its end,
 * and the queued numbers.  refusal() works on this, so that a publish is
 * decided before anything changes.
 */
struct shape {
	int64_t c;			/* r->cur->no, r->want, LIST_NO_EPOCH */
	bool cur, done;			/* a current epoch; fully_read() */
	const struct epoch *q[LIST_QUEUE_MAX];
	unsigned nq;
};

static void shape_of(const struct rlist *r, struct shape *s)
{
	s->c = r->cur ? r->cur->no : r->want;
	s->cur = r->cur != NULL;
	s->done = r->cur && fully_read(r->cur);
	s->nq = r->nq;
	memcpy(s->q, r->q, r->nq * sizeof(*r->q));
}

static void shape_pop(struct shape *s)
{
	memmove(s->q, s->q + 1, --s->nq * sizeof(*s->q));
}

/* @s after begin(r, @no, @at) (@no resolved: begin_number()) */
static void shape_begin(const struct rlist *r, struct shape *s, int64_t no,
			uint64_t at)
{
	int64_t was = s->c;

	if (r->cur && r->cur->no == no) {	/* restart() */
		s->done = at >= r->cur->n;
		return;
	}
	s->cur = s->done = false;		/* retire() */
	while (s->nq && ((was != LIST_NO_EPOCH && no < was) ||
			 s->q[0]->no < no))	/* drop_queued() */
		shape_pop(s);
	if (s->nq && s->q[0]->no == no) {	/* make_current() */
		s->cur = true;
		s->done = at >= s->q[0]->n;
		shape_pop(s);
	}
	s->c = no;
}

/*
 * Would place_numbered() refuse epoch @no on @s: LO_STALE, LO_QUEUE_FULL,
 * or LO_NONE (it will be placed).  Mirrors place_numbered() and
 * enqueue(), step for step.
 */
static enum list_outcome refusal(const struct shape *s, int64_t no, bool idle)
{
	unsigned first = 0, i;		/* the queue is q[first..nq) */
	int64_t c = s->c;
	bool cur = s->cur;

	if (cur && no > c && s->done) {		/* advance() */
		cur = s->nq > 0;
		c = cur ? s->q[0]->no : LIST_NO_EPOCH;
		first = cur;
	}
	if (c != LIST_NO_EPOCH && no < c)
		return idle ? LO_NONE : LO_STALE;	/* idle: afresh */
	if ((cur && no == c) || (!cur && (c == LIST_NO_EPOCH || no == c)))
		return LO_NONE;			/* replaced, or current */
	for (i = first; i < s->nq && s->q[i]->no < no; i++)
		;
	if (i < s->nq && s->q[i]->no == no)
		return LO_NONE;			/* replaces the queued one */
	return s->nq - first == LIST_QUEUE_MAX && i == s->nq ?
	       LO_QUEUE_FULL : LO_NONE;
}

/*
 * The number a list without "# epoch" takes on @s: the one after the
 * last epoch the list knows (the last queued, else the current, once a
 * current epoch read to its end gave way to its queue), or the epoch
 * awaited; 0 for a fresh list.  Never the number of a queued epoch, so
 * an unnumbered list never replaces one: it is queued after it, or
 * refused (-EBUSY) once LIST_QUEUE_MAX are queued.
 */
static int64_t unnumbered_no(const struct rlist *r, const struct shape *s)
{
	unsigned first = 0;
	int64_t c = s->c;

	if (s->cur && s->done) {	/* advance(): the queue's head next */
		if (!s->nq)
			return c + 1;
		c = s->q[0]->no;
		first = 1;
	}
	if (s->nq > first)
		return s->q[s->nq - 1]->no + 1;
	if (s->cur)
		return c + 1;
	if (c != LIST_NO_EPOCH)
		return c;		/* the epoch awaited */
	return r->last_no + 1;
}

/*
 * Place @e (NULL: a begin alone) after the begin of @rep, if any.  The
 * outcome is decided first: a publish refused (stale, queue full) changes
 * nothing, its begin included.
 */
static int publish_locked(struct lists *l, struct rlist *r, struct epoch *e,
			  struct list_report *rep, uint64_t now)
{
	/* a begin says where the reader is: not idle then */
	bool idle = is_idle(l, r, now) && !rep->begin;
	int64_t bno = LIST_NO_EPOCH;
	struct shape s;
	int rc = 0;

	if (e)
		e->serial = ++l->serials;	/* see cursor_at() */

	if (rep->begin)
		bno = begin_number(r, rep->begin_epoch != LIST_NO_EPOCH ?
				   rep->begin_epoch : rep->epoch);
	if (e) {
		shape_of(r, &s);
		if (rep->begin)
			shape_begin(r, &s, bno, rep->begin_at);
		e->no = rep->epoch != LIST_NO_EPOCH ? rep->epoch :
			unnumbered_no(r, &s);
		rep->outcome = refusal(&s, e->no, idle);
		if (rep->outcome != LO_NONE)
			goto out_refused;
	}
	if (rep->begin)
		rep->begin_epoch = begin(r, bno, rep->begin_at);
	if (!e)
		rep->outcome = LO_BEGUN;
	else
		rep->outcome = place_numbered(l, r, e, idle);
out_refused:
	if (rep->outcome == LO_STALE)
		rc = -ESTALE;
	else if (rep->outcome == LO_QUEUE_FULL)
		rc = -EBUSY;
	if (rc) {
		if (rep->begin)
			rep->begin_epoch = bno;	/* what it would have begun */
		epoch_free(e);
	}
	r->active_ms = now;
	rep->current = r->cur ? r->cur->no : LIST_NO_EPOCH;
	l->gen++;		/* any use may have moved */
	return rc;
}

static void report_init(struct list_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	rep->epoch = LIST_NO_EPOCH;
	rep->begin_epoch = LIST_NO_EPOCH;
	rep->current = LIST_NO_EPOCH;
}

int lists_publish(struct lists *l, const char *name, const char *text,
		  size_t len, list_resolve_fn resolve, void *arg,
		  struct list_report *rep)
{
	struct epoch *e;
	struct rlist *r;
	uint64_t now;
	int rc;

	report_init(rep);
	if (!lists_name_ok(name))
		return -EINVAL;
	rc = epoch_parse(text, len, resolve, arg, l->ranges, rep, &e);
	if (rc)
		return rc;
	/* a begin alone has no path line; paths all refused change nothing */
	if (!e && (!rep->begin || rep->lines > rep->headers +
				 rep->rejected[LR_EMPTY]))
		return -EINVAL;
	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	rc = find_or_add(l, name, now, &r);
	if (rc) {
		pthread_mutex_unlock(&l->lock);
		epoch_free(e);
		return rc;
	}
	rc = publish_locked(l, r, e, rep, now);
	r->last_report = *rep;
	pthread_mutex_unlock(&l->lock);
	return rc;
}

int lists_begin(struct lists *l, const char *name, int64_t epoch,
		uint64_t at)
{
	struct list_report rep;
	struct rlist *r;
	uint64_t now;
	int rc;

	report_init(&rep);
	if (!lists_name_ok(name) || epoch < LIST_NO_EPOCH || epoch >= LIST_EPOCH_MAX)
		return -EINVAL;
	rep.begin = true;
	rep.begin_epoch = epoch;
	rep.begin_at = at;
	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	rc = find_or_add(l, name, now, &r);
	if (!rc)
		rc = publish_locked(l, r, NULL, &rep, now);
	pthread_mutex_unlock(&l->lock);
	return rc;
}

/* ---- the reader ---- */

/* @fid's uses moved later (read this epoch): for lists_reads() */
static void note_read(struct lists *l, uint64_t fid)
{
	l->reads[l->nreads++ % LISTS_READS] = fid;
}

/* an open of @x in the current epoch of @r, in order or a jump */
static void open_current(struct lists *l, struct rlist *r,
			 const struct ent *x, bool ready)
{
	struct epoch *e = r->cur;

	if (unread_ahead(e, x)) {
		uint32_t end = expected_end(r, e);

		if (x->idx >= e->low + ooo_window(l, e))
			l->gen++;	/* a jump: the files passed move */
		mark_read(l, e, x->idx, ready);
		if (expected_end(r, e) != end) {
			l->gen++;	/* the queued epochs' uses move */
			forget_marks(r);	/* files come before them */
		}
		note_read(l, x->fid);
		if (e->file && e->file[x->idx])	/* a range: its file's use */
			note_read(l, e->file[x->idx]);	/* moves too */
	}
	if (r->nstrag && e->high > ooo_window(l, e))
		drop_stragglers(r);	/* a window into the new epoch */
}

/* does @r expect @fid now: a straggler, an open in order, a repeat;
 * *@moved is set unless it is a repeat (nothing read for the first time) */
static bool expected(struct lists *l, struct rlist *r, uint64_t fid,
		     bool ready, bool *moved)
{
	struct epoch *e = r->cur;
	struct ent *x;

	if (take_straggler(r, fid)) {
		*moved = true;
		return true;
	}
	x = e ? htab_get(&e->by_fid, fid) : NULL;
	if (!x)
		return false;
	if (unread_ahead(e, x)) {
		if (x->idx >= e->low + ooo_window(l, e))
			return false;
		open_current(l, r, x, ready);
		*moved = true;
		return true;
	}
	/* opened again right after the first time: not a new pass */
	return is_read(e, x->idx) && x->idx + repeat_window(l, e) >= e->high;
}

/* is @fid in the first queued epoch, within the window of its start */
static bool queued_head(const struct lists *l, const struct rlist *r,
			uint64_t fid)
{
	const struct ent *x;

	if (!r->nq)
		return false;
	x = htab_get(&r->q[0]->by_fid, fid);
	return x && x->idx < ooo_window(l, r->q[0]);
}

/* the reader of @r started its next epoch with @fid */
static void open_advancing(struct lists *l, struct rlist *r,
			   uint64_t fid, bool ready)
{
	advance(r, true);
	l->gen++;
	open_current(l, r, htab_get(&r->cur->by_fid, fid), ready);
}

/* the unread entry of @r's current epoch ahead of low that comes first
 * among @keys, or NULL */
static struct ent *first_ahead(struct rlist *r, const uint64_t *keys,
			       size_t n)
{
	struct ent *best = NULL;
	size_t k;

	for (k = 0; r->cur && k < n; k++) {
		struct ent *x = htab_get(&r->cur->by_fid, keys[k]);

		if (x && unread_ahead(r->cur, x) && (!best || x->idx < best->idx))
			best = x;
	}
	return best;
}

/* has @r's current epoch read one of @keys already (a range read goes on
 * over more of the sample's pages) */
static bool read_before(const struct rlist *r, const uint64_t *keys, size_t n)
{
	size_t k;

	for (k = 0; r->cur && k < n; k++) {
		const struct ent *x = htab_get(&r->cur->by_fid, keys[k]);

		if (x && is_read(r->cur, x->idx))
			return true;
	}
	return false;
}

/*
 * The reads of @keys (one open: @n 1), as lists_note_reads() says; with
 * @ranges, a list whose current epoch read one of them already neither
 * begins its queued epoch nor jumps.
 */
static bool note_reads(struct lists *l, const uint64_t *keys, size_t n,
		       bool ready, bool ranges)
{
	bool claimed = false, moved = false, advanced = false, jumped = false;
	uint64_t now;
	unsigned i;
	size_t k;

	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	/* 1. the lists that expect these reads */
	for (k = 0; k < n; k++)
		for (i = 0; i < l->n; i++)
			if (expected(l, l->l[i], keys[k], ready, &moved)) {
				l->l[i]->active_ms = now;
				claimed = true;
			}
	/* 2. readers that started their next epoch (once each) */
	for (i = 0; i < l->n && !claimed; i++) {
		if (ranges && read_before(l->l[i], keys, n))
			continue;
		for (k = 0; k < n; k++)
			if (queued_head(l, l->l[i], keys[k])) {
				open_advancing(l, l->l[i], keys[k], ready);
				l->l[i]->active_ms = now;
				advanced = true;
				break;
			}
	}
	/* 3. nobody expected them: a jump ahead, to the first of them in
	 * each list (a stray re-read is nothing) */
	for (i = 0; i < l->n && !claimed && !advanced; i++) {
		struct rlist *r = l->l[i];
		struct ent *x = ranges && read_before(r, keys, n) ? NULL :
				first_ahead(r, keys, n);

		if (x) {
			open_current(l, r, x, ready);
			r->active_ms = now;
			jumped = true;
		}
	}
	pthread_mutex_unlock(&l->lock);
	return moved || advanced || jumped;
}

bool lists_note_open(struct lists *l, uint64_t fid, bool ready)
{
	return note_reads(l, &fid, 1, ready, false);
}

bool lists_note_reads(struct lists *l, const uint64_t *keys, size_t n,
		      bool ready)
{
	return note_reads(l, keys, n, ready, true);
}

void lists_set_ranges(struct lists *l, struct ranges *rg)
{
	pthread_mutex_lock(&l->lock);
	l->ranges = rg;
	pthread_mutex_unlock(&l->lock);
}

bool lists_room(struct lists *l, const char *name, unsigned reserve)
{
	uint64_t now;
	unsigned i, busy = 0;
	bool room;

	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	for (i = 0; i < l->n; i++)
		busy += !is_idle(l, l->l[i], now);
	room = rlist_find(l, name) || busy + reserve < LISTS_MAX;
	pthread_mutex_unlock(&l->lock);
	return room;
}

unsigned lists_count(struct lists *l)
{
	unsigned n;

	pthread_mutex_lock(&l->lock);
	n = l->n;
	pthread_mutex_unlock(&l->lock);
	return n;
}
