// SPDX-License-Identifier: MIT
/* lists.c - see lists.h */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "htab.h"
#include "lists.h"
#include "pathmap.h"

struct ent {
	uint64_t fid;
	uint64_t size;
	uint32_t idx;
};

struct epoch {
	struct ent *ents;	/* in list order */
	uint32_t n;
	struct htab by_fid;	/* fid -> ent */
	uint64_t bytes;
	uint64_t opened, ready;	/* files opened, of which fully cached */
};

struct rlist {
	char name[LIST_NAME_MAX];
	struct epoch *cur, *next;
	uint32_t pos;		/* files of cur the reader has passed */
	uint64_t epochs;	/* completed (advanced past) */
	double last_ratio;	/* hit ratio of the previous epoch, -1 none */
	uint64_t lead_files, lead_bytes;
	struct list_report last_report;
};

struct lists {
	pthread_mutex_t lock;
	struct rlist *l[LISTS_MAX];
	unsigned n;
};

static uint64_t ent_key(const void *e)
{
	return ((const struct ent *)e)->fid;
}

static void epoch_free(struct epoch *e)
{
	if (!e)
		return;
	htab_release(&e->by_fid);
	free(e->ents);
	free(e);
}

struct lists *lists_create(void)
{
	struct lists *l = calloc(1, sizeof(*l));

	if (l)
		pthread_mutex_init(&l->lock, NULL);
	return l;
}

static void rlist_free(struct rlist *r)
{
	epoch_free(r->cur);
	epoch_free(r->next);
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

static bool name_ok(const char *name)
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

static void reject(struct list_report *rep, enum list_reject why)
{
	rep->rejected[why]++;
	if (!rep->first_line[why])
		rep->first_line[why] = rep->lines;
}

/* parse @text into a new epoch; NULL if nothing accepted or ENOMEM */
static struct epoch *parse(const char *text, size_t len,
			   list_resolve_fn resolve, void *arg,
			   struct list_report *rep, int *err)
{
	struct epoch *e = calloc(1, sizeof(*e));
	size_t at = 0, cap = 0;

	*err = -ENOMEM;
	if (!e)
		return NULL;
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
		if (e->n == cap) {
			struct ent *ne;
			size_t i;

			cap = cap ? cap * 2 : 1024;
			ne = realloc(e->ents, cap * sizeof(*ne));
			if (!ne)
				goto out_free;
			/* the table points into the array: rebuild it */
			e->ents = ne;
			htab_release(&e->by_fid);
			for (i = 0; i < e->n; i++)
				if (htab_put(&e->by_fid, &e->ents[i]))
					goto out_free;
		}
		e->ents[e->n] = (struct ent){ .fid = fid, .size = size, .idx = e->n };
		if (htab_put(&e->by_fid, &e->ents[e->n]))
			goto out_free;
		e->n++;
		e->bytes += size;
		rep->max_size = MAX(rep->max_size, size);
		rep->accepted++;
		rep->bytes += size;
	}
	if (!e->n) {
		*err = -EINVAL;
		goto out_free;
	}
	*err = 0;
	return e;
out_free:
	epoch_free(e);
	return NULL;
}

static struct rlist *find(struct lists *l, const char *name)
{
	unsigned i;

	for (i = 0; i < l->n; i++)
		if (!strcmp(l->l[i]->name, name))
			return l->l[i];
	return NULL;
}

static void advance(struct rlist *r)
{
	if (r->cur->opened)
		r->last_ratio = (double)r->cur->ready / r->cur->opened;
	epoch_free(r->cur);
	r->cur = r->next;
	r->next = NULL;
	r->pos = 0;
	r->epochs++;
}

int lists_publish(struct lists *l, const char *name, const char *text,
		  size_t len, list_resolve_fn resolve, void *arg,
		  struct list_report *rep)
{
	struct epoch *e;
	struct rlist *r;
	int err;

	memset(rep, 0, sizeof(*rep));
	if (!name_ok(name))
		return -EINVAL;
	e = parse(text, len, resolve, arg, rep, &err);
	if (!e)
		return err;
	pthread_mutex_lock(&l->lock);
	r = find(l, name);
	if (!r) {
		if (l->n == LISTS_MAX) {
			pthread_mutex_unlock(&l->lock);
			epoch_free(e);
			return -ENOSPC;
		}
		r = calloc(1, sizeof(*r));
		if (!r) {
			pthread_mutex_unlock(&l->lock);
			epoch_free(e);
			return -ENOMEM;
		}
		snprintf(r->name, sizeof(r->name), "%s", name);
		r->last_ratio = -1;
		l->l[l->n++] = r;
	}
	if (r->cur && r->pos >= r->cur->n)
		advance(r);		/* the current epoch was read to its end */
	if (!r->cur) {
		r->cur = e;
		r->pos = 0;
	} else {
		epoch_free(r->next);	/* the newest "next epoch" wins */
		r->next = e;
	}
	r->last_report = *rep;
	pthread_mutex_unlock(&l->lock);
	return 0;
}

void lists_note_open(struct lists *l, uint64_t fid, bool ready)
{
	unsigned i;

	pthread_mutex_lock(&l->lock);
	for (i = 0; i < l->n; i++) {
		struct rlist *r = l->l[i];
		struct ent *e = r->cur ? htab_get(&r->cur->by_fid, fid) : NULL;

		if (!e && r->next && htab_get(&r->next->by_fid, fid)) {
			advance(r);	/* the reader started the next epoch */
			e = htab_get(&r->cur->by_fid, fid);
		}
		if (!e)
			continue;
		r->cur->opened++;
		r->cur->ready += ready;
		if (e->idx >= r->pos)
			r->pos = e->idx + 1;
	}
	pthread_mutex_unlock(&l->lock);
}

uint64_t lists_next_use(void *arg, uint64_t fid)
{
	struct lists *l = arg;
	uint64_t best = UINT64_MAX;
	unsigned i;

	pthread_mutex_lock(&l->lock);
	for (i = 0; i < l->n; i++) {
		struct rlist *r = l->l[i];
		struct ent *e;
		uint64_t d = UINT64_MAX;

		if (!r->cur)
			continue;
		e = htab_get(&r->cur->by_fid, fid);
		if (e && e->idx >= r->pos) {
			d = e->idx - r->pos;
		} else if (r->next) {
			e = htab_get(&r->next->by_fid, fid);
			if (e)
				d = (uint64_t)(r->cur->n - MIN(r->pos, r->cur->n)) + e->idx;
		}
		best = MIN(best, d);
	}
	pthread_mutex_unlock(&l->lock);
	return best;
}

/* the k-th file ahead of @r's reader, or false */
static bool ahead(const struct rlist *r, size_t k, uint64_t *fid)
{
	size_t left;

	if (!r->cur)
		return false;
	left = r->cur->n - MIN(r->pos, r->cur->n);
	if (k < left) {
		*fid = r->cur->ents[r->pos + k].fid;
		return true;
	}
	k -= left;
	if (r->next && k < r->next->n) {
		*fid = r->next->ents[k].fid;
		return true;
	}
	return false;
}

size_t lists_window(struct lists *l, size_t skip, uint64_t *fids, size_t max)
{
	size_t out = 0, k;
	bool more = true;
	unsigned i;

	pthread_mutex_lock(&l->lock);
	for (k = skip; more && out < max; k++) {
		more = false;
		for (i = 0; i < l->n && out < max; i++) {
			uint64_t fid;

			if (ahead(l->l[i], k, &fid)) {
				fids[out++] = fid;
				more = true;
			}
		}
	}
	pthread_mutex_unlock(&l->lock);
	return out;
}

void lists_set_lead(struct lists *l, uint64_t fid_at_reader, uint64_t files,
		    uint64_t bytes)
{
	unsigned i;

	pthread_mutex_lock(&l->lock);
	for (i = 0; i < l->n; i++) {
		uint64_t fid;

		if (ahead(l->l[i], 0, &fid) && fid == fid_at_reader) {
			l->l[i]->lead_files = files;
			l->l[i]->lead_bytes = bytes;
		}
	}
	pthread_mutex_unlock(&l->lock);
}

static const char *const reason_names[LR_NREASONS] = {
	"empty", "unknown", "directory", "duplicate", "too_long", "binary",
};

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
}

enum { K_POS, K_FILES, K_NEXT, K_EPOCHS, K_LEADF, K_LEADB, K_HIT, K_LAST, K_N };

static int64_t list_value(const struct rlist *r, int k)
{
	switch (k) {
	case K_POS:
		return r->pos;
	case K_FILES:
		return r->cur ? r->cur->n : 0;
	case K_NEXT:
		return r->next ? r->next->n : 0;
	case K_EPOCHS:
		return r->epochs;
	case K_LEADF:
		return r->lead_files;
	case K_LEADB:
		return r->lead_bytes;
	case K_HIT:
		return r->cur && r->cur->opened ?
		       (int64_t)(r->cur->ready * 1000 / r->cur->opened) : 0;
	default:
		return r->last_ratio < 0 ? -1 : (int64_t)(r->last_ratio * 1000);
	}
}

void lists_print(struct lists *l, FILE *f)
{
	static const char *const keys[K_N] = {
		"position", "files", "next_epoch_files", "epochs_done",
		"lead_files", "lead_bytes", "hit_ratio_permille",
		"last_hit_ratio_permille",
	};
	unsigned i;
	int k;

	pthread_mutex_lock(&l->lock);
	for (k = 0; k < K_N; k++)	/* grouped by name, for Prometheus */
		for (i = 0; i < l->n; i++)
			fprintf(f, "list_%s{list=\"%s\"} %" PRId64 "\n", keys[k],
				l->l[i]->name, list_value(l->l[i], k));
	pthread_mutex_unlock(&l->lock);
}

void lists_print_one(struct lists *l, const char *name, FILE *f)
{
	struct rlist *r;

	pthread_mutex_lock(&l->lock);
	r = find(l, name);
	if (!r) {
		pthread_mutex_unlock(&l->lock);
		fprintf(f, "list %s: not published\n", name);
		return;
	}
	fprintf(f, "list %s\nposition %u\nfiles %u\nnext_epoch_files %u\n"
		"epochs_done %" PRIu64 "\nlead_files %" PRIu64
		"\nlead_bytes %" PRIu64 "\nhit_ratio %.3f\nlast_hit_ratio %.3f\n",
		r->name, r->pos, r->cur ? r->cur->n : 0,
		r->next ? r->next->n : 0, r->epochs, r->lead_files,
		r->lead_bytes, r->cur && r->cur->opened ?
		(double)r->cur->ready / r->cur->opened : 0.0,
		r->last_ratio);
	fprintf(f, "# last publish\n");
	list_report_print(&r->last_report, f);
	pthread_mutex_unlock(&l->lock);
}

unsigned lists_count(struct lists *l)
{
	unsigned n;

	pthread_mutex_lock(&l->lock);
	n = l->n;
	pthread_mutex_unlock(&l->lock);
	return n;
}
