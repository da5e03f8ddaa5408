// SPDX-License-Identifier: MIT
/*
 * lists_text.c - the lists as text: a publish report, each list's
 * status, the list_KEY lines of the stats (see lists.h)
 */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "lists_priv.h"

static const char *const reason_names[LR_NREASONS] = {
	"empty", "unknown", "directory", "duplicate", "too_long", "binary",
	"range",
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
		rlist_lead(r, &files, &bytes);
		return files;
	case K_LEADB:
		rlist_lead(r, &files, &bytes);
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
	r = rlist_find(l, name);
	if (!r) {
		pthread_mutex_unlock(&l->lock);
		fprintf(f, "list %s: not published\n", name);
		return;
	}
	now = l->now_ms(l->clock_arg);
	e = r->cur;
	rlist_lead(r, &files, &bytes);
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
