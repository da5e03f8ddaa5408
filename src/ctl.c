// SPDX-License-Identifier: MIT
/* ctl.c - see ctl.h */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chunkbuf.h"
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
/* names and lists only privileged users may take (docs/control-access.md) */
#define NAMES_RESERVED	64
#define LISTS_RESERVED	8
#define MAX_USERS	256	/* other users holding control files open */

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

struct list_name {
	char *name;
	uid_t owner;			/* who created it */
};

/* an unprivileged user's open control files and the bytes they buffer */
struct ctl_user {
	uid_t uid;
	unsigned bufs;
	uint64_t bytes;
};

struct ctl {
	struct ctl_deps d;
	unsigned user_lists, user_buffers, pin_max_pct;
	uint64_t user_bytes;
	pthread_mutex_t lock;		/* guards names and users */
	struct list_name names[MAX_NAMES]; /* ever seen: ino - INO_LIST0 */
	unsigned nnames;
	struct ctl_user users[MAX_USERS];
};

const struct ctl_who CTL_OWNER = { .uid = 0, .privileged = true };

struct ctl *ctl_create(const struct ctl_deps *d)
{
	struct ctl *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->d = *d;
	c->user_lists = d->cf ? d->cf->user_lists : 8;
	c->user_buffers = d->cf ? d->cf->user_buffers : 16;
	c->pin_max_pct = d->cf ? d->cf->pin_max_pct : 50;
	c->user_bytes = (d->cf ? d->cf->memory_limit : 256ULL << 20) / 16;
	pthread_mutex_init(&c->lock, NULL);
	return c;
}

void ctl_destroy(struct ctl *c)
{
	unsigned i;

	if (!c)
		return;
	for (i = 0; i < c->nnames; i++)
		free(c->names[i].name);
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
		snprintf(out, len, "%s", c->names[ino - INO_LIST0].name);
		ok = true;
	}
	pthread_mutex_unlock(&c->lock);
	return ok;
}

/* may @w create another list name: 0, -EDQUOT or -ENOSPC; under lock */
static int name_quota_locked(struct ctl *c, const struct ctl_who *w)
{
	unsigned i, mine = 0;

	if (w->privileged)
		return c->nnames < MAX_NAMES ? 0 : -ENOSPC;
	if (c->nnames >= MAX_NAMES - NAMES_RESERVED)
		return -ENOSPC;
	for (i = 0; i < c->nnames; i++)
		mine += c->names[i].owner == w->uid;
	return mine < c->user_lists ? 0 : -EDQUOT;
}

/*
 * The inode of list @name; with @create (on behalf of @w, who owns it
 * then) a new name gets one.  Only a list name (lists_name_ok()) can be
 * made: a name slot is never freed, and names are logged.  Return: 0,
 * -ENOENT (none, or not a list name), -EDQUOT (@w has user_lists names),
 * -ENOSPC (no name left for @w), -ENOMEM.
 */
static int name_ino(struct ctl *c, const char *name, bool create,
		    const struct ctl_who *w, uint64_t *ino)
{
	int rc = -ENOENT;
	unsigned i;

	if (!lists_name_ok(name))
		return -ENOENT;
	pthread_mutex_lock(&c->lock);
	for (i = 0; i < c->nnames && rc; i++)
		if (!strcmp(c->names[i].name, name)) {
			*ino = INO_LIST0 + i;
			rc = 0;
		}
	if (rc && create) {
		rc = name_quota_locked(c, w);
		if (!rc) {
			struct list_name *n = &c->names[c->nnames];

			n->name = strdup(name);
			n->owner = w->uid;
			if (n->name)
				*ino = INO_LIST0 + c->nnames++;
			else
				rc = -ENOMEM;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

bool ctl_shadows(uint64_t parent, const char *name)
{
	return parent == NS_ROOT_INO && !strcmp(name, CTL_NAME);
}

int ctl_lookup(struct ctl *c, uint64_t parent, const char *name, bool create,
	       uint64_t *ino)
{
	size_t i;

	*ino = 0;
	if (parent == NS_ROOT_INO) {
		if (ctl_shadows(parent, name))
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
		return name_ino(c, name, create, &CTL_OWNER, ino);
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
			*name = c->names[i].name; /* never freed */
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

/* file ids, growing */
struct fidvec {
	uint64_t *v;
	size_t n, cap;
	bool nomem;
};

static void fidvec_add(struct fidvec *fv, uint64_t fid)
{
	if (fv->n == fv->cap) {
		size_t cap = fv->cap ? fv->cap * 2 : 256;
		uint64_t *v = realloc(fv->v, cap * sizeof(*v));

		if (!v) {
			fv->nomem = true;
			return;
		}
		fv->v = v;
		fv->cap = cap;
	}
	fv->v[fv->n++] = fid;
}

static int fid_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* sort and drop repeats */
static void fidvec_unique(struct fidvec *fv)
{
	size_t i, o = 0;

	if (!fv->n)
		return;
	qsort(fv->v, fv->n, sizeof(*fv->v), fid_cmp);
	for (i = 1; i < fv->n; i++)
		if (fv->v[i] != fv->v[o])
			fv->v[++o] = fv->v[i];
	fv->n = o + 1;
}

/* every file at or below @n */
static void each_file(const struct ns *ns, const struct ns_node *n,
		      struct fidvec *fv)
{
	uint64_t i;

	if (!n->is_dir) {
		fidvec_add(fv, n->ino);
		return;
	}
	for (i = 0; i < ns_nkids(n); i++)
		each_file(ns, ns_kid(ns, n, i), fv);
}

static int pinned_collect(void *arg, const struct heat_row *r)
{
	if (r->pinned)
		fidvec_add(arg, r->fid);
	return 0;
}

/* bytes of the files pinned now and those of @want (sorted, unique) */
static uint64_t pin_bytes(struct ctl *c, const struct fidvec *want)
{
	struct fidvec all = { 0 };
	uint64_t bytes = 0;
	struct ns *ns;
	size_t i;

	cache_heat_each(c->d.cache, pinned_collect, &all);
	for (i = 0; i < want->n; i++)
		fidvec_add(&all, want->v[i]);
	fidvec_unique(&all);
	ns = nsmgr_rdlock(c->d.nm);
	for (i = 0; i < all.n; i++) {
		const struct ns_node *n = ns_get(ns, all.v[i]);
		struct ns_attr a;

		if (n && !n->is_dir) {
			ns_attr_get(ns, n, &a);
			bytes += a.size;
		}
	}
	nsmgr_unlock(c->d.nm);
	free(all.v);
	return all.nomem ? UINT64_MAX : bytes;
}

/*
 * Why pinning @fv must be refused (NULL: it may go): the whole tree, or
 * more than pin_max_pct of the cache pinned afterwards.  The pins persist
 * across restarts, so a cache full of pins would admit nothing, ever.
 */
static const char *pin_refusal(struct ctl *c, const struct fidvec *fv,
			       bool root)
{
	uint64_t used, limit, files, bytes;

	if (root)
		return "the whole tree";
	cache_usage(c->d.cache, &used, &limit, &files);
	bytes = pin_bytes(c, fv);
	if (bytes > (unsigned __int128)limit * c->pin_max_pct / 100)
		return "more than --pin-max of the cache";
	return NULL;
}

/*
 * The next path of a pin, unpin or evict text at @*at: its bytes in
 * @*line, @*ll.  One path per line (a trailing CR dropped), or, when the
 * text holds a NUL byte (@nul), NUL-terminated paths as `find -print0`
 * writes them: any name but one with a NUL, a newline included (the
 * client sends that form only for such names, so older daemons still
 * understand the rest).
 */
static void next_path(const char *buf, size_t len, bool nul, size_t *at,
		      const char **line, size_t *ll)
{
	const char *p = buf + *at, *end = memchr(p, nul ? '\0' : '\n', len - *at);
	size_t n = end ? (size_t)(end - p) : len - *at;

	*at += n + (end ? 1 : 0);
	if (!nul && n && p[n - 1] == '\r')
		n--;
	*line = p;
	*ll = n;
}

/* log the first few files of @fv whose eviction waits for their close */
static void log_deferred(struct ctl *c, const uint64_t *fid, unsigned n)
{
	struct ns *ns = nsmgr_rdlock(c->d.nm);
	unsigned i;

	for (i = 0; i < n && i < 4; i++) {
		const struct ns_node *node = ns_get(ns, fid[i]);

		if (node)
			log_info("control: evict: '%s' is open: evicted at its last close",
				 str_log(ns_path(ns, node)));
		else
			log_info("control: evict: file %016" PRIx64 " is open: evicted at its last close",
				 fid[i]);
	}
	nsmgr_unlock(c->d.nm);
	if (n > 4)
		log_info("control: evict: %u more open files evicted at their last close",
			 n - 4);
}

/*
 * Paths as next_path() reads them (an empty one or "/" is the root),
 * each file or directory handed to @fn.  Pins are checked whole first
 * (pin_refusal()): a refused request pins nothing (-EINVAL, a log line).
 * An open file is evicted at its last close (cache_evict_file() says 1):
 * the report counts it as deferred and the log names it.
 */
static int each_path(struct ctl *c, const char *buf, size_t len,
		     int (*fn)(struct ctl *c, uint64_t fid), char **report)
{
	unsigned done = 0, unknown = 0, deferred = 0;
	bool root = false, nul = memchr(buf, '\0', len) != NULL;
	struct fidvec fv = { 0 };
	const char *why = NULL;
	size_t at = 0, i;
	FILE *f;
	int rc = 0;

	while (at < len) {
		const char *line;
		size_t ll;
		const struct ns_node *n;
		struct ns *ns;

		next_path(buf, len, nul, &at, &line, &ll);
		while (ll && line[0] == '/') {
			line++;
			ll--;
		}
		while (ll && line[ll - 1] == '/')
			ll--;
		ns = nsmgr_rdlock(c->d.nm);
		n = ns_resolve(ns, line, ll);
		if (n && (ll || n->is_dir)) {
			root |= !ll;
			each_file(ns, n, &fv);
		} else if (ll) {
			unknown++;
		}
		nsmgr_unlock(c->d.nm);
	}
	fidvec_unique(&fv);
	if (fv.nomem) {
		rc = -ENOMEM;
		goto out;
	}
	if (fn == do_pin)
		why = pin_refusal(c, &fv, root);
	if (why) {
		log_warn("control: pin of %zu files refused: %s", fv.n, why);
		rc = -EINVAL;
		goto out;
	}
	for (i = 0; i < fv.n; i++) {
		int r = fn(c, fv.v[i]);

		if (!r)
			done++;
		else if (r == 1)	/* i >= deferred: kept apart */
			fv.v[deferred++] = fv.v[i];
	}
	if (deferred)
		log_deferred(c, fv.v, deferred);
	rc = done || deferred || !unknown ? 0 : -ENOENT;
out:
	f = open_memstream(report, &at);
	if (f) {
		if (why)
			fprintf(f, "refused: %s\n", why);
		fprintf(f, "files %u\nunknown %u\n", done, unknown);
		if (deferred)
			fprintf(f, "deferred %u\n", deferred);
		fclose(f);
	}
	free(fv.v);
	return rc;
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
		.path = strdup(ns_path(h->ns, n)), .score = r->score,
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
		fputs("# nul\n", f);	/* any name, one with a newline too */
		for (i = 0; i < h.n && taken < n; i++)
			if (!h.v[i].cached) {
				fputs(h.v[i].path, f);
				fputc('\0', f);
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
 * writes it; '#' lines skipped), handed on as a list in the NUL form
 * ("# nul"), so an escaped name with a newline is warmed too */
static int warm(struct ctl *c, const char *buf, size_t len, char **report)
{
	static const char nul[] = "# nul\n";
	char *paths = malloc(sizeof(nul) + len + 1);
	size_t at = 0, o = sizeof(nul) - 1;
	int rc;

	if (!paths)
		return -ENOMEM;
	memcpy(paths, nul, o);
	while (at < len) {
		const char *line = buf + at, *nl = memchr(line, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - line) : len - at;
		const char *tab = memchr(line, '\t', ll);

		at += ll + (nl ? 1 : 0);
		if (!ll || line[0] == '#')
			continue;
		if (tab) {
			ssize_t n = str_unesc(paths + o, line, tab - line);

			if (n < 0 || memchr(paths + o, '\0', n))
				continue;
			ll = n;
		} else {
			if (memchr(line, '\0', ll))
				continue;	/* binary: no path */
			if (line[ll - 1] == '\r')
				ll--;		/* CRLF */
			memcpy(paths + o, line, ll);
		}
		o += ll;
		paths[o++] = '\0';
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
		return "NOT published: later epochs already queued (\"# epoch N\" replaces queued epoch N)";
	case -ENOSPC:
		return "NOT published: too many lists";
	case -EPERM:
		return "NOT published: the list belongs to another user";
	case -EDQUOT:
		return "NOT published: you have --user-lists lists already";
	default:
		return "NOT published";
	}
}

/*
 * May @w publish list @name (its name made, owned by @w, if new): 0,
 * -EPERM (another user's list), -ENOSPC (the last lists are kept for
 * privileged users), or name_ino()'s -EDQUOT, -ENOSPC, -ENOMEM.
 */
static int publish_check(struct ctl *c, const char *name,
			 const struct ctl_who *w)
{
	const struct list_name *n;
	uint64_t ino;
	int rc = name_ino(c, name, true, w, &ino);
	bool room;

	if (rc || w->privileged)
		return rc == -ENOENT ? -EINVAL : rc;
	room = lists_room(c->d.lists, name, LISTS_RESERVED);	/* its lock */
	pthread_mutex_lock(&c->lock);
	n = &c->names[ino - INO_LIST0];
	if (n->owner != w->uid)
		rc = -EPERM;
	else if (!room)
		rc = -ENOSPC;
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static int commit_list(struct ctl *c, const char *name,
		       const struct ctl_who *w, const char *buf, size_t len,
		       char **report)
{
	struct list_report rep;
	size_t rlen;
	FILE *f;
	int rc;

	memset(&rep, 0, sizeof(rep));
	rep.epoch = rep.current = LIST_NO_EPOCH;
	rc = publish_check(c, name, w);
	if (rc)
		log_warn("list '%s': publish by uid %u refused: %s",
			 str_log(name), (unsigned)w->uid, strerror(-rc));
	else
		rc = lists_publish(c->d.lists, name, buf, len, resolve, c,
				   &rep);
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
	} else if (rc == -EPERM || rc == -EDQUOT ||
		   (rc == -ENOSPC && rep.outcome == LO_NONE && !rep.lines)) {
		/* refused before parsing: logged above */
	} else if ((rc == -ESTALE || rc == -EBUSY) &&
		   rep.epoch == LIST_NO_EPOCH) {
		log_warn("list '%s': a list without a number not published (%s; the current epoch is %" PRId64 ")",
			 str_log(name), list_outcome_name(rep.outcome),
			 rep.current);
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

int ctl_commit_list(struct ctl *c, const char *name, const char *buf,
		    size_t len, char **report)
{
	return commit_list(c, name, &CTL_OWNER, buf, len, report);
}

int ctl_commit(struct ctl *c, uint64_t ino, const char *buf, size_t len,
	       char **report)
{
	return ctl_commit_as(c, ino, &CTL_OWNER, buf, len, report);
}

int ctl_commit_as(struct ctl *c, uint64_t ino, const struct ctl_who *w,
		  const char *buf, size_t len, char **report)
{
	char name[LIST_NAME_MAX];
	int rc;

	*report = NULL;
	rc = ctl_access(c, ino, w, true);
	if (rc)
		return rc;
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
		return commit_list(c, name, w, buf, len, report);
	default:
		return -EBADF;
	}
}

/* ---- who may do what (docs/control-access.md) ---- */

int ctl_access(struct ctl *c, uint64_t ino, const struct ctl_who *w,
	       bool write)
{
	uid_t owner;

	if (w->privileged)
		return 0;
	switch (ctl_kind(c, ino)) {
	case CTL_HEAT:				/* everyone's access pattern */
	case CTL_PIN:
	case CTL_UNPIN:
	case CTL_EVICT:
	case CTL_WARM:
	case CTL_REFRESH:			/* a whole listing */
		return -EACCES;
	case CTL_LIST:
		if (!write)
			return 0;
		owner = ctl_owner(c, ino);
		return owner == w->uid ? 0 : -EACCES;
	default:
		return 0;
	}
}

uid_t ctl_owner(struct ctl *c, uint64_t ino)
{
	uid_t uid = geteuid();

	pthread_mutex_lock(&c->lock);
	if (ino >= INO_LIST0 && ino < INO_LIST0 + c->nnames &&
	    c->names[ino - INO_LIST0].owner != CTL_OWNER.uid)
		uid = c->names[ino - INO_LIST0].owner;
	pthread_mutex_unlock(&c->lock);
	return uid;
}

int ctl_create_list(struct ctl *c, uint64_t parent, const char *name,
		    const struct ctl_who *w, uint64_t *ino)
{
	int rc;

	*ino = 0;
	if (parent != INO_LISTS)
		return -EROFS;
	rc = name_ino(c, name, true, w, ino);
	if (rc == -ENOENT)
		return -EINVAL;		/* not a list name */
	if (rc)
		log_warn("list '%s': uid %u may not create it: %s",
			 str_log(name), (unsigned)w->uid, strerror(-rc));
	return rc ? rc : ctl_access(c, *ino, w, true);
}

/* @w's slot in the users table, made if @make; NULL if none */
static struct ctl_user *user_locked(struct ctl *c, uid_t uid, bool make)
{
	struct ctl_user *free_slot = NULL;
	size_t i;

	for (i = 0; i < MAX_USERS; i++) {
		struct ctl_user *u = &c->users[i];

		if (u->bufs && u->uid == uid)
			return u;
		if (!u->bufs && !free_slot)
			free_slot = u;
	}
	if (make && free_slot) {
		free_slot->uid = uid;
		free_slot->bytes = 0;
	}
	return make ? free_slot : NULL;
}

int ctl_buffer_open(struct ctl *c, const struct ctl_who *w)
{
	struct ctl_user *u;
	int rc = 0;

	if (w->privileged)
		return 0;
	pthread_mutex_lock(&c->lock);
	u = user_locked(c, w->uid, true);
	if (!u || u->bufs >= c->user_buffers)
		rc = -EMFILE;
	else
		u->bufs++;
	pthread_mutex_unlock(&c->lock);
	if (rc)
		log_warn("control: uid %u holds too many control files open (--user-buffers %u)",
			 (unsigned)w->uid, c->user_buffers);
	return rc;
}

/* give @bytes of @w's quota back (not the memory budget's) */
static void user_give(struct ctl *c, const struct ctl_who *w, uint64_t bytes)
{
	struct ctl_user *u;

	if (w->privileged)
		return;
	pthread_mutex_lock(&c->lock);
	u = user_locked(c, w->uid, false);
	if (u)
		u->bytes -= MIN(u->bytes, bytes);
	pthread_mutex_unlock(&c->lock);
}

int ctl_buffer_grow(struct ctl *c, const struct ctl_who *w, uint64_t bytes,
		    bool text)
{
	struct ctl_user *u;
	int rc = 0;

	if (!w->privileged) {
		pthread_mutex_lock(&c->lock);
		u = user_locked(c, w->uid, false);
		if (!u || u->bytes + bytes > c->user_bytes)
			rc = -EDQUOT;
		else
			u->bytes += bytes;
		pthread_mutex_unlock(&c->lock);
		if (rc)
			return rc;
	}
	if (c->d.mem && text)
		membudget_force(c->d.mem, MB_CTL, bytes);
	if (!c->d.mem || text || membudget_try(c->d.mem, MB_CTL, bytes))
		return 0;
	user_give(c, w, bytes);
	return -ENOBUFS;
}

void ctl_buffer_shrink(struct ctl *c, const struct ctl_who *w,
		       uint64_t bytes)
{
	if (c->d.mem && bytes)
		membudget_give(c->d.mem, MB_CTL, bytes);
	user_give(c, w, bytes);
}

void ctl_buffer_close(struct ctl *c, const struct ctl_who *w,
		      uint64_t bytes)
{
	struct ctl_user *u;

	if (c->d.mem && bytes)
		membudget_give(c->d.mem, MB_CTL, bytes);
	if (w->privileged)
		return;
	pthread_mutex_lock(&c->lock);
	u = user_locked(c, w->uid, false);
	if (u) {
		u->bytes -= MIN(u->bytes, bytes);
		u->bufs--;
	}
	pthread_mutex_unlock(&c->lock);
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

