// SPDX-License-Identifier: MIT
/* ctl.c - see ctl.h */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "log.h"
#include "strsafe.h"
#include "report.h"

#define INO_DIR		2
#define INO_LISTS	3
#define INO_STATS	4
#define INO_HEAT	5
#define INO_PIN		6
#define INO_UNPIN	7
#define INO_EVICT	8
#define INO_WARM	9
#define INO_REFRESH	10
#define INO_LIST0	0x1000
#define MAX_NAMES	4096

_Static_assert(INO_LIST0 + MAX_NAMES <= NS_FIRST_INO,
	       "list inodes must stay below the dataset's");

static const struct {
	const char *name;
	uint64_t ino;
	enum ctl_kind kind;
} fixed[] = {
	{ "lists", INO_LISTS, CTL_LISTS }, { "stats", INO_STATS, CTL_STATS },
	{ "heat", INO_HEAT, CTL_HEAT }, { "pin", INO_PIN, CTL_PIN },
	{ "unpin", INO_UNPIN, CTL_UNPIN }, { "evict", INO_EVICT, CTL_EVICT },
	{ "warm", INO_WARM, CTL_WARM }, { "refresh", INO_REFRESH, CTL_REFRESH },
};

struct ctl {
	struct ctl_deps d;
	pthread_mutex_t lock;		/* guards names */
	char *names[MAX_NAMES];		/* list names ever seen: ino - INO_LIST0 */
	unsigned nnames;
};

struct ctl *ctl_create(const struct ctl_deps *d)
{
	struct ctl *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->d = *d;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void ctl_destroy(struct ctl *c)
{
	unsigned i;

	if (!c)
		return;
	for (i = 0; i < c->nnames; i++)
		free(c->names[i]);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

enum ctl_kind ctl_kind(struct ctl *c, uint64_t ino)
{
	enum ctl_kind k = CTL_NONE;
	size_t i;

	if (ino == INO_DIR)
		return CTL_DIR;
	for (i = 0; i < ARRAY_SIZE(fixed); i++)
		if (fixed[i].ino == ino)
			return fixed[i].kind;
	/* every dataset inode is decided here, without the lock */
	if (ino < INO_LIST0 || ino >= INO_LIST0 + MAX_NAMES)
		return CTL_NONE;
	pthread_mutex_lock(&c->lock);	/* name_ino() appends names */
	if (ino < INO_LIST0 + c->nnames)
		k = CTL_LIST;
	pthread_mutex_unlock(&c->lock);
	return k;
}

/* the list name of inode @ino, copied into @out; false if none */
static bool list_name(struct ctl *c, uint64_t ino, char *out, size_t len)
{
	bool ok = false;

	pthread_mutex_lock(&c->lock);
	if (ino >= INO_LIST0 && ino < INO_LIST0 + c->nnames) {
		snprintf(out, len, "%s", c->names[ino - INO_LIST0]);
		ok = true;
	}
	pthread_mutex_unlock(&c->lock);
	return ok;
}

/* the inode of list @name (created with @create): 0 or -ENOENT */
static int name_ino(struct ctl *c, const char *name, bool create,
		    uint64_t *ino)
{
	int rc = -ENOENT;
	unsigned i;

	if (!*name || strlen(name) >= LIST_NAME_MAX || strchr(name, '/'))
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < c->nnames && rc; i++)
		if (!strcmp(c->names[i], name)) {
			*ino = INO_LIST0 + i;
			rc = 0;
		}
	if (rc && create && c->nnames < MAX_NAMES) {
		c->names[c->nnames] = strdup(name);
		if (c->names[c->nnames]) {
			*ino = INO_LIST0 + c->nnames++;
			rc = 0;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int ctl_lookup(struct ctl *c, uint64_t parent, const char *name, bool create,
	       uint64_t *ino)
{
	size_t i;

	*ino = 0;
	if (parent == NS_ROOT_INO) {
		if (!strcmp(name, CTL_NAME))
			*ino = INO_DIR;
		return 0;
	}
	if (parent == INO_DIR) {
		for (i = 0; i < ARRAY_SIZE(fixed); i++)
			if (!strcmp(fixed[i].name, name)) {
				*ino = fixed[i].ino;
				return 0;
			}
		return -ENOENT;
	}
	if (parent == INO_LISTS)
		return name_ino(c, name, create, ino);
	return ctl_kind(c, parent) == CTL_NONE ? 0 : -ENOENT;
}

bool ctl_readdir(struct ctl *c, uint64_t dir, size_t i, const char **name,
		 uint64_t *ino)
{
	if (dir == INO_DIR) {
		if (i >= ARRAY_SIZE(fixed))
			return false;
		*name = fixed[i].name;
		*ino = fixed[i].ino;
		return true;
	}
	if (dir == INO_LISTS) {
		bool ok;

		pthread_mutex_lock(&c->lock);
		ok = i < c->nnames;
		if (ok) {
			*name = c->names[i];	/* names are never freed */
			*ino = INO_LIST0 + i;
		}
		pthread_mutex_unlock(&c->lock);
		return ok;
	}
	return false;
}

bool ctl_is_writable(struct ctl *c, uint64_t ino)
{
	switch (ctl_kind(c, ino)) {
	case CTL_PIN:
	case CTL_UNPIN:
	case CTL_EVICT:
	case CTL_WARM:
	case CTL_REFRESH:
	case CTL_LIST:
		return true;
	default:
		return false;
	}
}

/* ---- resolving paths against the namespace ---- */

static int resolve(void *arg, const char *path, size_t len, uint64_t *fid,
		   uint64_t *size)
{
	struct ctl *c = arg;
	const struct ns_node *n;
	struct ns *ns = nsmgr_rdlock(c->d.nm);
	int rc = 0;

	while (len && path[len - 1] == '/')
		len--;
	n = ns_resolve(ns, path, len);
	if (!n) {
		rc = -ENOENT;
	} else if (n->is_dir) {
		rc = -EISDIR;
	} else {
		struct ns_attr a;

		ns_attr_get(ns, n, &a);
		*fid = n->ino;
		*size = a.size;
	}
	nsmgr_unlock(c->d.nm);
	return rc;
}

/* apply @fn to every file at or below @n */
static void each_file(const struct ns_node *n, struct ctl *c,
		      int (*fn)(struct ctl *c, uint64_t fid), unsigned *count)
{
	uint32_t i;

	if (!n->is_dir) {
		if (!fn(c, n->ino))
			(*count)++;
		return;
	}
	for (i = 0; i < n->nkids; i++)
		each_file(n->kids[i], c, fn, count);
}

static int do_pin(struct ctl *c, uint64_t fid)
{
	return cache_pin(c->d.cache, fid, true);
}

static int do_unpin(struct ctl *c, uint64_t fid)
{
	return cache_pin(c->d.cache, fid, false);
}

static int do_evict(struct ctl *c, uint64_t fid)
{
	return cache_evict_file(c->d.cache, fid);
}

/* one path per line; each file or directory handed to @fn */
static int each_path(struct ctl *c, const char *buf, size_t len,
		     int (*fn)(struct ctl *c, uint64_t fid), char **report)
{
	unsigned done = 0, unknown = 0;
	size_t at = 0;
	FILE *f;

	while (at < len) {
		const char *line = buf + at, *nl = memchr(line, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - line) : len - at;
		const struct ns_node *n;
		struct ns *ns;

		at += ll + (nl ? 1 : 0);
		if (ll && line[ll - 1] == '\r')
			ll--;
		while (ll && line[0] == '/') {
			line++;
			ll--;
		}
		while (ll && line[ll - 1] == '/')
			ll--;
		ns = nsmgr_rdlock(c->d.nm);
		n = ns_resolve(ns, line, ll);
		if (n && (ll || n->is_dir))
			each_file(n, c, fn, &done);
		else if (ll)
			unknown++;
		nsmgr_unlock(c->d.nm);
	}
	f = open_memstream(report, &at);
	if (f) {
		fprintf(f, "files %u\nunknown %u\n", done, unknown);
		fclose(f);
	}
	return done || !unknown ? 0 : -ENOENT;
}

/* ---- heat ---- */

struct heat_line {
	char *path;
	double score;
	uint64_t count, bytes;
	int64_t last;
	bool cached;
};

struct heat_rows {
	struct ctl *c;
	struct ns *ns;
	struct heat_line *v;
	size_t n, cap;
};

static int heat_collect(void *arg, const struct heat_row *r)
{
	struct heat_rows *h = arg;
	const struct ns_node *n = ns_get(h->ns, r->fid);

	if (!n || n->is_dir || !r->count)
		return 0;
	if (h->n == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 1024;
		struct heat_line *v = realloc(h->v, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	h->v[h->n++] = (struct heat_line){
		.path = strdup(n->path), .score = r->score,
		.count = r->count, .bytes = r->bytes, .last = r->last,
		.cached = r->cached };
	return 0;
}

static int heat_cmp(const void *a, const void *b)
{
	const struct heat_line *x = a, *y = b;

	return x->score < y->score ? 1 : x->score > y->score ? -1 : 0;
}

/* every file with heat, hottest first; caller frees rows and paths */
static struct heat_rows heat_rows(struct ctl *c)
{
	struct heat_rows h = { .c = c };

	h.ns = nsmgr_rdlock(c->d.nm);
	cache_heat_each(c->d.cache, heat_collect, &h);
	nsmgr_unlock(c->d.nm);
	if (h.n)		/* qsort(NULL, 0, ...) is undefined */
		qsort(h.v, h.n, sizeof(*h.v), heat_cmp);
	return h;
}

static void heat_rows_free(struct heat_rows *h)
{
	size_t i;

	for (i = 0; i < h->n; i++)
		free(h->v[i].path);
	free(h->v);
}

static char *heat_text(struct ctl *c, size_t *len)
{
	struct heat_rows h = heat_rows(c);
	char *text = NULL;
	FILE *f = open_memstream(&text, len);
	size_t i;

	if (f) {
		fprintf(f, "# path\tscore\topens\tlast\tbytes\tcached\n");
		for (i = 0; i < h.n; i++) {
			/* the path escaped: a tab or newline in a name
			 * cannot break the columns (strsafe.h) */
			str_esc_file(f, h.v[i].path, strlen(h.v[i].path));
			fprintf(f, "\t%.3f\t%" PRIu64 "\t%" PRId64 "\t%" PRIu64
				"\t%d\n", h.v[i].score, h.v[i].count,
				h.v[i].last, h.v[i].bytes, h.v[i].cached);
		}
		fclose(f);
	}
	heat_rows_free(&h);
	return text;
}

int ctl_rewarm(struct ctl *c, unsigned n)
{
	struct heat_rows h = heat_rows(c);
	char *text = NULL;
	size_t len = 0, i;
	unsigned taken = 0;
	FILE *f = open_memstream(&text, &len);
	int rc = -ENOMEM;

	if (f) {
		for (i = 0; i < h.n && taken < n; i++)
			if (!h.v[i].cached) {
				fprintf(f, "%s\n", h.v[i].path);
				taken++;
			}
		fclose(f);
		if (taken) {
			char *report = NULL;

			log_info("re-warming the %u hottest uncached files", taken);
			rc = ctl_commit_list(c, "warm", text, len, &report);
			free(report);
		} else {
			rc = 0;
		}
	}
	free(text);
	heat_rows_free(&h);
	return rc;
}

/* warm input: paths, or a heat TSV (first column, escaped as heat_text()
 * writes it; '#' lines skipped).  A name with a newline cannot be on a
 * list: its line is left out. */
static int warm(struct ctl *c, const char *buf, size_t len, char **report)
{
	char *paths = malloc(len + 1);
	size_t at = 0, o = 0;
	int rc;

	if (!paths)
		return -ENOMEM;
	while (at < len) {
		const char *line = buf + at, *nl = memchr(line, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - line) : len - at;
		const char *tab = memchr(line, '\t', ll);

		at += ll + (nl ? 1 : 0);
		if (!ll || line[0] == '#')
			continue;
		if (tab) {
			ssize_t n = str_unesc(paths + o, line, tab - line);

			if (n < 0 || memchr(paths + o, '\n', n))
				continue;
			ll = n;
		} else {
			memcpy(paths + o, line, ll);
		}
		o += ll;
		paths[o++] = '\n';
	}
	rc = ctl_commit_list(c, "warm", paths, o, report);
	free(paths);
	return rc;
}

/* ---- lists ---- */

/* the first line of a list's report: what happened, in words */
static const char *commit_verdict(int rc, const struct list_report *rep)
{
	switch (rc) {
	case 0:
		return rep->outcome == LO_BEGUN ? "epoch begun" : "published";
	case -ESTALE:
		return "NOT published: an epoch older than the current one";
	case -EBUSY:
		return "NOT published: later epochs already queued";
	case -ENOSPC:
		return "NOT published: too many lists";
	default:
		return "NOT published";
	}
}

int ctl_commit_list(struct ctl *c, const char *name, const char *buf,
		    size_t len, char **report)
{
	struct list_report rep;
	uint64_t ino;
	size_t rlen;
	FILE *f;
	int rc;

	name_ino(c, name, true, &ino);	/* listed under lists/ from now on */
	rc = lists_publish(c->d.lists, name, buf, len, resolve, c, &rep);
	f = open_memstream(report, &rlen);
	if (f) {
		fprintf(f, "list %s: %s\n", name, commit_verdict(rc, &rep));
		list_report_print(&rep, f);
		fclose(f);
	}
	if (!rc && rep.outcome == LO_BEGUN) {
		log_info("list '%s': epoch %" PRId64 " begins", str_log(name),
			 rep.begin_epoch);
		prefetch_kick(c->d.pf);
	} else if (!rc) {
		stat_inc(c->d.st, lists_published);
		log_info("list '%s' published (epoch %" PRId64 ", %s): %" PRIu64
			 " of %" PRIu64 " lines accepted", str_log(name),
			 rep.epoch != LIST_NO_EPOCH ? rep.epoch : rep.current,
			 list_outcome_name(rep.outcome), rep.accepted,
			 rep.lines);
		prefetch_published(c->d.pf);
	} else if (rc == -ESTALE || rc == -EBUSY) {
		log_warn("list '%s': epoch %" PRId64 " not published (%s; the current epoch is %" PRId64 ")",
			 str_log(name), rep.epoch, list_outcome_name(rep.outcome),
			 rep.current);
	} else {
		log_warn("list '%s' rejected: %" PRIu64 " lines, none usable",
			 str_log(name), rep.lines);
	}
	return rc;
}

int ctl_commit(struct ctl *c, uint64_t ino, const char *buf, size_t len,
	       char **report)
{
	char name[LIST_NAME_MAX];

	*report = NULL;
	switch (ctl_kind(c, ino)) {
	case CTL_PIN:
		return each_path(c, buf, len, do_pin, report);
	case CTL_UNPIN:
		return each_path(c, buf, len, do_unpin, report);
	case CTL_EVICT:
		return each_path(c, buf, len, do_evict, report);
	case CTL_WARM:
		return warm(c, buf, len, report);
	case CTL_REFRESH:
		/* whatever was written: re-list (or re-read the manifest) now */
		log_info("re-listing asked through the control file");
		return nsmgr_refresh(c->d.nm);
	case CTL_LIST:
		if (!list_name(c, ino, name, sizeof(name)))
			return -ENOENT;
		return ctl_commit_list(c, name, buf, len, report);
	default:
		return -EBADF;
	}
}

char *ctl_read(struct ctl *c, uint64_t ino, size_t *len)
{
	char *text = NULL;
	FILE *f;

	switch (ctl_kind(c, ino)) {
	case CTL_STATS:
		return ctl_stats_text(c, len);
	case CTL_HEAT:
		return heat_text(c, len);
	case CTL_LIST: {
		char name[LIST_NAME_MAX];

		if (!list_name(c, ino, name, sizeof(name)))
			return NULL;
		f = open_memstream(&text, len);
		if (!f)
			return NULL;
		lists_print_one(c->d.lists, name, f);
		fclose(f);
		return text;
	}
	default:
		*len = 0;
		return strdup("");
	}
}

char *ctl_stats_text(struct ctl *c, size_t *len)
{
	struct report_src src = { c->d.st, c->d.cache, c->d.nm, c->d.lists };

	return report_text(&src, len);
}

void ctl_note_open(struct ctl *c, uint64_t fid, bool ready)
{
	lists_note_open(c->d.lists, fid, ready);
	prefetch_kick(c->d.pf);
}
