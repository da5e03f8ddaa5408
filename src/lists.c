// SPDX-License-Identifier: MIT
/* lists.c - see lists.h and docs/epochs.md */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compiler.h"
#include "htab.h"
#include "lists.h"
#include "pathmap.h"
#include "policy.h"

struct ent {
	uint64_t fid;
	uint64_t size;
	uint64_t off;		/* bytes of the files before it in the list */
	uint32_t idx;
};

struct epoch {
	struct ent *ents;	/* in list order */
	uint32_t n;
	struct htab by_fid;	/* fid -> ent */
	uint64_t bytes;
	int64_t no;		/* epoch number */
	uint64_t serial;	/* unique, grows with each publish (marks) */
	uint64_t *read;		/* bit per ent: opened this epoch */
	uint32_t low;		/* first ent neither read nor skipped */
	uint32_t high;		/* one past the furthest ent opened */
	uint32_t read_ahead;	/* read bits at idx >= low */
	uint64_t opened, ready;	/* first opens, of which fully cached */
};

/* a position in a list's epochs: ent i of the epoch with this serial */
struct mark {
	uint64_t serial;	/* 0: none */
	uint32_t i;
};

struct rlist {
	char name[LIST_NAME_MAX];
	struct epoch *cur;	/* NULL: none yet, or waiting for @want */
	struct epoch *q[LIST_QUEUE_MAX];	/* queued, by number */
	unsigned nq;
	int64_t want;		/* begun, unpublished; or LIST_NO_EPOCH */
	uint32_t want_at;
	int64_t last_no;	/* number of the latest current epoch */
	uint64_t *strag;	/* previous epoch's files still in flight, */
	uint32_t nstrag;	/* sorted (see take_straggler()) */
	uint64_t epochs;	/* completed (advanced past) */
	double last_ratio;	/* hit ratio of the previous epoch, -1 none */
	double stop;		/* where the previous epoch ended, as a
				 * fraction of its list (1: at its end) */
	struct mark ready;	/* every unread file before it was on disk
				 * when last looked at */
	struct mark work;	/* every unread file before it was on disk,
				 * on its way there or staged: nothing left
				 * to do (lists_window_ahead()) */
	uint64_t active_ms;	/* last open, publish or begin */
	struct list_report last_report;
};

_Static_assert(LISTS_MAX <= POLICY_FUTURE_SLOTS, "a slot per list");

struct lists {
	pthread_mutex_t lock;
	struct rlist *l[LISTS_MAX];
	unsigned n;
	uint64_t gen;		/* see lists_sync() */
	uint64_t serials;	/* the last epoch's serial (placed in order) */
	uint64_t nreads;	/* files marked read, ever */
	uint64_t reads[LISTS_READS];	/* the latest of them, by nreads */
	unsigned window;	/* out-of-order window, files */
	uint64_t idle_ms;	/* 0: never idle */
	lists_clock_fn now_ms;
	void *clock_arg;
};

static uint64_t ent_key(const void *e)
{
	return ((const struct ent *)e)->fid;
}

static uint64_t mono_ms(void *arg)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void epoch_free(struct epoch *e)
{
	if (!e)
		return;
	htab_release(&e->by_fid);
	free(e->ents);
	free(e->read);
	free(e);
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

static bool is_read(const struct epoch *e, uint32_t i)
{
	return e->read[i / 64] >> (i % 64) & 1;
}

/* files of the out-of-order window, and of the "just re-opened" one */
static uint32_t ooo_window(const struct lists *l, const struct epoch *e)
{
	return MIN(l->window, e->n);
}

static uint32_t repeat_window(const struct lists *l, const struct epoch *e)
{
	return MIN(l->window, MAX(e->n / 4, 1U));
}

/* files the reader still has to open from low on */
static uint64_t remaining(const struct epoch *e)
{
	return e->n - e->low - e->read_ahead;
}

/*
 * One past the last file of @r's current epoch @e the reader is expected
 * to open: where the previous epoch ended, at the same fraction of the
 * list (a loader with drop_last, max_steps or limit_train_batches stops
 * at the same place every epoch), until the reader goes past it.  Files
 * from there on take their next use from the queued epochs.  Never below
 * low: high >= low, and high > end lifts the limit.
 */
static uint32_t expected_end(const struct rlist *r, const struct epoch *e)
{
	uint32_t end;

	if (r->stop >= 1.0)
		return e->n;
	end = (uint32_t)(r->stop * e->n + 0.5);
	return e->high > end ? e->n : end;
}

/* remaining() up to expected_end() (read files are all below it) */
static uint64_t remaining_expected(const struct rlist *r,
				   const struct epoch *e)
{
	return expected_end(r, e) - e->low - e->read_ahead;
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

static bool unread_ahead(const struct epoch *e, const struct ent *x)
{
	return x->idx >= e->low && !is_read(e, x->idx);
}

static bool fully_read(const struct epoch *e)
{
	return e->low >= e->n;
}

/* ---- parsing ---- */

static void reject(struct list_report *rep, enum list_reject why)
{
	rep->rejected[why]++;
	if (!rep->first_line[why])
		rep->first_line[why] = rep->lines;
}

/* the next blank-separated word of [*p, end); false if none */
static bool word(const char **p, const char *end, const char **w, size_t *wl)
{
	const char *s = *p;

	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	if (s == end)
		return false;
	*w = s;
	while (s < end && *s != ' ' && *s != '\t')
		s++;
	*wl = s - *w;
	*p = s;
	return true;
}

static bool number(const char *w, size_t wl, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!wl || wl > 19)
		return false;
	for (i = 0; i < wl; i++) {
		if (w[i] < '0' || w[i] > '9')
			return false;
		v = v * 10 + (w[i] - '0');
	}
	if (v > max)
		return false;
	*out = v;
	return true;
}

static bool is_word(const char *w, size_t wl, const char *s)
{
	return wl == strlen(s) && !memcmp(w, s, wl);
}

/*
 * "# epoch N", "# begin", "# begin N", "# begin at K", "# begin N at K"
 * (the '#' may touch the keyword); anything else is not a header.
 */
static bool header(const char *line, size_t ll, struct list_report *rep)
{
	const char *p = line + 1, *end = line + ll, *w;
	uint64_t n, at = 0;
	int64_t no = LIST_NO_EPOCH;
	size_t wl;

	if (!ll || line[0] != '#' || !word(&p, end, &w, &wl))
		return false;
	if (is_word(w, wl, "epoch")) {
		if (!word(&p, end, &w, &wl) ||
		    !number(w, wl, LIST_EPOCH_MAX - 1, &n) ||
		    word(&p, end, &w, &wl))
			return false;
		rep->epoch = (int64_t)n;
		return true;
	}
	if (!is_word(w, wl, "begin"))
		return false;
	if (!word(&p, end, &w, &wl))
		goto out_ok;			/* "# begin" */
	if (!is_word(w, wl, "at")) {
		if (!number(w, wl, LIST_EPOCH_MAX - 1, &n))
			return false;
		no = (int64_t)n;
		if (!word(&p, end, &w, &wl))
			goto out_ok;		/* "# begin N" */
		if (!is_word(w, wl, "at"))
			return false;
	}
	if (!word(&p, end, &w, &wl) || !number(w, wl, UINT32_MAX, &at) ||
	    word(&p, end, &w, &wl))
		return false;
out_ok:
	rep->begin = true;
	rep->begin_epoch = no;
	rep->begin_at = at;
	return true;
}

static int epoch_grow(struct epoch *e, size_t *cap)
{
	struct ent *ne;
	size_t i;

	*cap = *cap ? *cap * 2 : 1024;
	ne = realloc(e->ents, *cap * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	/* the table points into the array: rebuild it */
	e->ents = ne;
	htab_release(&e->by_fid);
	for (i = 0; i < e->n; i++)
		if (htab_put(&e->by_fid, &e->ents[i]))
			return -ENOMEM;
	return 0;
}

/*
 * parse @text into a new epoch (headers into @rep); *@out NULL if no path
 * was accepted.  Return 0 or -ENOMEM.
 */
static int parse(const char *text, size_t len, list_resolve_fn resolve,
		 void *arg, struct list_report *rep, struct epoch **out)
{
	struct epoch *e = calloc(1, sizeof(*e));
	size_t at = 0, cap = 0;
	bool in_header = true;

	*out = NULL;
	if (!e)
		return -ENOMEM;
	htab_init(&e->by_fid, ent_key);
	while (at < len) {
		const char *line = text + at, *nl = memchr(line, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - line) : len - at;
		uint64_t fid, size;
		int rc;

		at += ll + (nl ? 1 : 0);
		rep->lines++;
		if (ll && line[ll - 1] == '\r')
			ll--;
		if (in_header && ll <= LIST_LINE_MAX && header(line, ll, rep)) {
			rep->headers++;
			continue;
		}
		in_header = false;
		while (ll && line[0] == '/') {	/* "/a/b" means "a/b" */
			line++;
			ll--;
		}
		if (!ll) {
			reject(rep, LR_EMPTY);
			continue;
		}
		if (ll > LIST_LINE_MAX) {
			reject(rep, LR_TOO_LONG);
			continue;
		}
		if (memchr(line, '\0', ll) || !utf8_valid(line, ll)) {
			reject(rep, LR_BINARY);
			continue;
		}
		rc = resolve(arg, line, ll, &fid, &size);
		if (rc == -EISDIR) {
			reject(rep, LR_DIRECTORY);
			continue;
		}
		if (rc) {
			reject(rep, LR_UNKNOWN);
			continue;
		}
		if (htab_get(&e->by_fid, fid)) {
			reject(rep, LR_DUPLICATE);
			continue;
		}
		if (e->n == UINT32_MAX - 1 ||
		    (e->n == cap && epoch_grow(e, &cap)))
			goto out_free;
		e->ents[e->n] = (struct ent){ .fid = fid, .size = size,
					      .off = e->bytes, .idx = e->n };
		if (htab_put(&e->by_fid, &e->ents[e->n]))
			goto out_free;
		e->n++;
		e->bytes += size;
		rep->max_size = MAX(rep->max_size, size);
		rep->accepted++;
		rep->bytes += size;
	}
	if (!e->n) {
		epoch_free(e);
		return 0;
	}
	e->read = calloc((e->n + 63) / 64, sizeof(*e->read));
	if (!e->read)
		goto out_free;
	*out = e;
	return 0;
out_free:
	epoch_free(e);
	return -ENOMEM;
}

/* ---- a list's epochs ---- */

static struct rlist *find(struct lists *l, const char *name)
{
	unsigned i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->l[i]->name, name))
			return l->l[i];
	return NULL;
}

static bool is_idle(const struct lists *l, const struct rlist *r, uint64_t now)
{
	return l->idle_ms && now - r->active_ms >= l->idle_ms;
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
	struct rlist *r = find(l, name);

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

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
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
	qsort(r->strag, n, sizeof(*r->strag), cmp_u64);
}

/* true if @fid was a straggler of @r's previous epoch (it is no more) */
static bool take_straggler(struct rlist *r, uint64_t fid)
{
	uint64_t *s;

	if (!r->nstrag)
		return false;
	s = bsearch(&fid, r->strag, r->nstrag, sizeof(*s), cmp_u64);
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
	rc = parse(text, len, resolve, arg, rep, &e);
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

bool lists_note_open(struct lists *l, uint64_t fid, bool ready)
{
	bool claimed = false, moved = false, advanced = false, jumped = false;
	uint64_t now;
	unsigned i;

	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	/* 1. the lists that expect this open */
	for (i = 0; i < l->n; i++)
		if (expected(l, l->l[i], fid, ready, &moved)) {
			l->l[i]->active_ms = now;
			claimed = true;
		}
	/* 2. readers that started their next epoch */
	for (i = 0; i < l->n && !claimed; i++)
		if (queued_head(l, l->l[i], fid)) {
			open_advancing(l, l->l[i], fid, ready);
			l->l[i]->active_ms = now;
			advanced = true;
		}
	/* 3. nobody expected it: a jump ahead (a stray re-read is nothing) */
	for (i = 0; i < l->n && !claimed && !advanced; i++) {
		struct rlist *r = l->l[i];
		struct ent *x = r->cur ? htab_get(&r->cur->by_fid, fid) : NULL;

		if (x && unread_ahead(r->cur, x)) {
			open_current(l, r, x, ready);
			r->active_ms = now;
			jumped = true;
		}
	}
	pthread_mutex_unlock(&l->lock);
	return moved || advanced || jumped;
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

/*
 * The soonest use of @fid over the active lists, and in *@after the use
 * after it (the soonest two over every list's uses in its current and
 * queued epochs), counted in files or (@bytes) in bytes read before it.
 */
/* @fid's entry in @r's current epoch if it is still to be read there
 * (unread, before the expected end), else NULL */
static const struct ent *ahead_now(const struct rlist *r, uint64_t fid)
{
	const struct epoch *e = r->cur;
	const struct ent *x = e ? htab_get(&e->by_fid, fid) : NULL;

	return x && unread_ahead(e, x) && x->idx < expected_end(r, e) ? x :
									NULL;
}

/* the first @want uses of @fid in (active) list @r into the two minima;
 * each later use in @r is later than the ones before it */
static void uses_in(const struct rlist *r, uint64_t fid, bool bytes,
		    unsigned want, uint64_t *best, uint64_t *second)
{
	const struct epoch *e = r->cur;
	const struct ent *x;
	uint64_t base = 0;
	unsigned found = 0, k;

	if (e) {
		uint32_t end = expected_end(r, e);

		x = ahead_now(r, fid);
		if (x) {
			two_min(best, second, bytes ?
				x->off - e->ents[e->low].off :
				(uint64_t)(x->idx - e->low));
			found++;
		}
		base = bytes ? bytes_from(e, e->low) - bytes_from(e, end) :
			       remaining_expected(r, e);
	}
	for (k = 0; k < r->nq && found < want; k++) {
		x = htab_get(&r->q[k]->by_fid, fid);
		if (x) {
			two_min(best, second, base + (bytes ? x->off : x->idx));
			found++;
		}
		base += bytes ? r->q[k]->bytes : r->q[k]->n;
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

/* ---- walking ahead of a reader ---- */

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
static void lead(const struct rlist *r, uint64_t *files, uint64_t *bytes)
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
		       bsearch(&x->fid, set, ns, sizeof(*set), cmp_u64)) {
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
	qsort(set, ns, sizeof(*set), cmp_u64);
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

/* ---- texts ---- */

static const char *const reason_names[LR_NREASONS] = {
	"empty", "unknown", "directory", "duplicate", "too_long", "binary",
};

static const char *const outcome_names[LO_NOUTCOMES] = {
	"none", "current", "queued", "replaced", "begun", "stale",
	"queue_full",
};

const char *list_outcome_name(enum list_outcome o)
{
	return o < LO_NOUTCOMES ? outcome_names[o] : "none";
}

void list_report_print(const struct list_report *r, FILE *f)
{
	int k;

	fprintf(f, "lines %" PRIu64 "\naccepted %" PRIu64 "\nbytes %" PRIu64 "\n",
		r->lines, r->accepted, r->bytes);
	for (k = 0; k < LR_NREASONS; k++) {
		fprintf(f, "rejected_%s %" PRIu64, reason_names[k], r->rejected[k]);
		if (r->first_line[k])
			fprintf(f, " (first at line %" PRIu64 ")", r->first_line[k]);
		fputc('\n', f);
	}
	fprintf(f, "max_file_bytes %" PRIu64 "\nheaders %" PRIu64
		"\nlist_epoch %" PRId64 "\n", r->max_size, r->headers, r->epoch);
	if (r->begin)
		fprintf(f, "begin_epoch %" PRId64 "\nbegin_at %" PRIu64 "\n",
			r->begin_epoch, r->begin_at);
	fprintf(f, "outcome %s\ncurrent_epoch %" PRId64 "\n",
		list_outcome_name(r->outcome), r->current);
}

enum {
	K_POS, K_FILES, K_NEXT, K_EPOCHS, K_LEADF, K_LEADB, K_HIT, K_LAST,
	K_EPOCH, K_NEXTNO, K_QUEUED, K_READ, K_REMAINING, K_END, K_IDLE, K_N
};

static int64_t list_value(const struct lists *l, const struct rlist *r,
			  int k, uint64_t now)
{
	const struct epoch *e = r->cur;
	uint64_t files, bytes;

	switch (k) {
	case K_POS:
		return e ? e->high : 0;
	case K_FILES:
		return e ? e->n : 0;
	case K_NEXT:
		return r->nq ? r->q[0]->n : 0;
	case K_EPOCHS:
		return r->epochs;
	case K_LEADF:
		lead(r, &files, &bytes);
		return files;
	case K_LEADB:
		lead(r, &files, &bytes);
		return bytes;
	case K_HIT:
		return e && e->opened ? (int64_t)(e->ready * 1000 / e->opened) : 0;
	case K_LAST:
		return r->last_ratio < 0 ? -1 : (int64_t)(r->last_ratio * 1000);
	case K_EPOCH:
		return e ? e->no : r->want;
	case K_NEXTNO:
		return r->nq ? r->q[0]->no : LIST_NO_EPOCH;
	case K_QUEUED:
		return r->nq;
	case K_READ:
		return e ? (int64_t)e->opened : 0;
	case K_REMAINING:
		return e ? (int64_t)remaining(e) : 0;
	case K_END:
		return e ? (int64_t)expected_end(r, e) : 0;
	default:
		return is_idle(l, r, now);
	}
}

static const char *const list_keys[K_N] = {
	"position", "files", "next_epoch_files", "epochs_done",
	"lead_files", "lead_bytes", "hit_ratio_permille",
	"last_hit_ratio_permille", "epoch", "next_epoch", "queued",
	"read", "remaining", "expected_end", "idle",
};

void lists_print(struct lists *l, FILE *f)
{
	const char *const *keys = list_keys;
	uint64_t now;
	unsigned i;
	int k;

	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	for (k = 0; k < K_N; k++)	/* grouped by name, for Prometheus */
		for (i = 0; i < l->n; i++)
			fprintf(f, "list_%s{list=\"%s\"} %" PRId64 "\n", keys[k],
				l->l[i]->name, list_value(l, l->l[i], k, now));
	pthread_mutex_unlock(&l->lock);
}

void lists_foreach_value(struct lists *l, const char *key,
			 void (*fn)(void *arg, const char *list, int64_t v),
			 void *arg)
{
	uint64_t now;
	unsigned i;
	int k;

	for (k = 0; k < K_N && strcmp(list_keys[k], key); k++)
		;
	if (k == K_N)
		return;
	pthread_mutex_lock(&l->lock);
	now = l->now_ms(l->clock_arg);
	for (i = 0; i < l->n; i++)
		fn(arg, l->l[i]->name, list_value(l, l->l[i], k, now));
	pthread_mutex_unlock(&l->lock);
}

static const char *state_name(const struct lists *l, const struct rlist *r,
			      uint64_t now)
{
	if (is_idle(l, r, now))
		return "idle";
	if (!r->cur)
		return r->want != LIST_NO_EPOCH ? "waiting" : "empty";
	return fully_read(r->cur) ? "done" : "reading";
}

void lists_print_one(struct lists *l, const char *name, FILE *f)
{
	const struct epoch *e;
	struct rlist *r;
	uint64_t now, files, bytes;

	pthread_mutex_lock(&l->lock);
	r = find(l, name);
	if (!r) {
		pthread_mutex_unlock(&l->lock);
		fprintf(f, "list %s: not published\n", name);
		return;
	}
	now = l->now_ms(l->clock_arg);
	e = r->cur;
	lead(r, &files, &bytes);
	fprintf(f, "list %s\nposition %u\nfiles %u\nnext_epoch_files %u\n"
		"epochs_done %" PRIu64 "\nlead_files %" PRIu64
		"\nlead_bytes %" PRIu64 "\nhit_ratio %.3f\nlast_hit_ratio %.3f\n",
		r->name, e ? e->high : 0, e ? e->n : 0,
		r->nq ? r->q[0]->n : 0, r->epochs, files, bytes, e && e->opened ?
		(double)e->ready / e->opened : 0.0, r->last_ratio);
	fprintf(f, "state %s\nepoch %" PRId64 "\nlow %u\nread %" PRIu64
		"\nremaining %" PRIu64 "\nexpected_end %u\nnext_epoch %" PRId64
		"\nqueued %u\nidle_seconds %" PRIu64 "\nwindow %u\n",
		state_name(l, r, now), e ? e->no : r->want, e ? e->low : 0,
		e ? e->opened : 0, e ? remaining(e) : 0,
		e ? expected_end(r, e) : 0,
		r->nq ? r->q[0]->no : LIST_NO_EPOCH, r->nq,
		(now - r->active_ms) / 1000, e ? ooo_window(l, e) : 0);
	fprintf(f, "# last publish\n");
	list_report_print(&r->last_report, f);
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
	room = find(l, name) || busy + reserve < LISTS_MAX;
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
