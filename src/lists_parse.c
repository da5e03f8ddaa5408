// SPDX-License-Identifier: MIT
/*
 * lists_parse.c - a published list text into a new epoch (lists_priv.h,
 * docs/epochs.md): headers, paths, the report of every line.  Pure: no
 * lock, no list; the resolver is the caller's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lists_priv.h"
#include "pathmap.h"
#include "ranges.h"

static uint64_t ent_key(const void *e)
{
	return ((const struct ent *)e)->fid;
}

static uint64_t franges_key(const void *f)
{
	return ((const struct franges *)f)->fid;
}

static void franges_free(void *item)
{
	struct franges *f = item;

	free(f->idx);
	free(f);
}

void epoch_free(struct epoch *e)
{
	if (!e)
		return;
	htab_free(&e->by_file, franges_free);
	htab_release(&e->by_fid);
	free(e->file);
	free(e->ents);
	free(e->read);
	free(e);
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

/*
 * "# nul", as the first line: the records after it end with a NUL byte,
 * not a newline, so that a name with a newline can be listed (the paths
 * as find -print0 writes them; header records may follow)
 */
static bool nul_header(const char *line, size_t ll)
{
	return ll == 5 && !memcmp(line, "# nul", 5);
}

/*
 * "PATH<TAB>OFFSET<TAB>LENGTH": *@plen the length of PATH, the numbers
 * decimal; false if @line is not of that form
 */
static bool range_form(const char *line, size_t ll, size_t *plen,
		       uint64_t *off, uint64_t *len)
{
	const char *t2 = memrchr(line, '\t', ll), *t1;

	if (!t2 || !number(t2 + 1, line + ll - t2 - 1, INT64_MAX, len))
		return false;
	t1 = memrchr(line, '\t', t2 - line);
	if (!t1 || t1 == line ||
	    !number(t1 + 1, t2 - t1 - 1, INT64_MAX, off))
		return false;
	*plen = t1 - line;
	return true;
}

/*
 * A range line's key into *@fid and its length into *@size (the file's
 * id and size before).  Return 0, -ENOMEM, or another -errno: refused.
 */
static int range_ent(struct ranges *rg, uint64_t off, uint64_t len,
		     uint64_t *fid, uint64_t *size)
{
	int rc;

	if (!len || off > *size || len > *size - off)
		return -EINVAL;
	rc = ranges_intern(rg, *fid, off, len, fid);
	if (!rc)
		*size = len;
	return rc;
}

/* resolve a path line, or with @rg a range line (a path that is not a
 * file of the mount, and of the range form: *@file its file's id) */
static int resolve_line(const char *line, size_t ll, list_resolve_fn resolve,
			void *arg, struct ranges *rg, uint64_t *fid,
			uint64_t *size, uint64_t *file)
{
	uint64_t off, len;
	size_t plen;
	int rc = resolve(arg, line, ll, fid, size);

	*file = 0;
	if (!rc || !rg || !range_form(line, ll, &plen, &off, &len))
		return rc;
	rc = resolve(arg, line, plen, fid, size);
	if (rc)
		return rc;
	*file = *fid;
	return range_ent(rg, off, len, fid, size);
}

static int epoch_grow(struct epoch *e, size_t *cap)
{
	size_t i, was = *cap;
	struct ent *ne;

	*cap = *cap ? *cap * 2 : 1024;
	if (e->file) {
		uint64_t *nf = realloc(e->file, *cap * sizeof(*nf));

		if (!nf)
			return -ENOMEM;
		memset(nf + was, 0, (*cap - was) * sizeof(*nf));
		e->file = nf;
	}
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

/* ent @i (the last so far, of an epoch with room for @cap) is a range
 * of file @file: 0 or -ENOMEM */
static int note_range(struct epoch *e, size_t cap, uint32_t i, uint64_t file)
{
	struct franges *f;

	if (!e->file && !(e->file = calloc(cap, sizeof(*e->file))))
		return -ENOMEM;
	e->file[i] = file;
	f = htab_get(&e->by_file, file);
	if (!f) {
		f = calloc(1, sizeof(*f));
		if (!f)
			return -ENOMEM;
		f->fid = file;
		if (htab_put(&e->by_file, f)) {
			free(f);
			return -ENOMEM;
		}
	}
	if (f->n == f->cap) {
		uint32_t nc = f->cap ? f->cap * 2 : 8;
		uint32_t *ni = realloc(f->idx, nc * sizeof(*ni));

		if (!ni)
			return -ENOMEM;
		f->idx = ni;
		f->cap = nc;
	}
	f->idx[f->n++] = i;
	return 0;
}

int epoch_parse(const char *text, size_t len, list_resolve_fn resolve,
		void *arg, struct ranges *rg, struct list_report *rep,
		struct epoch **out)
{
	struct epoch *e = calloc(1, sizeof(*e));
	size_t at = 0, cap = 0;
	bool in_header = true;
	char sep = '\n';		/* a record's end: '\0' after "# nul" */

	*out = NULL;
	if (!e)
		return -ENOMEM;
	htab_init(&e->by_fid, ent_key);
	htab_init(&e->by_file, franges_key);
	while (at < len) {
		const char *line = text + at, *nl = memchr(line, sep, len - at);
		size_t ll = nl ? (size_t)(nl - line) : len - at;
		uint64_t fid, size, file;
		int rc;

		at += ll + (nl ? 1 : 0);
		rep->lines++;
		if (sep == '\n' && ll && line[ll - 1] == '\r')
			ll--;
		if (rep->lines == 1 && nul_header(line, ll)) {
			rep->headers++;
			sep = '\0';
			continue;
		}
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
		rc = resolve_line(line, ll, resolve, arg, rg, &fid, &size,
				  &file);
		if (rc == -ENOMEM)
			goto out_free;
		if (rc && file) {
			reject(rep, LR_RANGE);
			continue;
		}
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
		if (htab_put(&e->by_fid, &e->ents[e->n]) ||
		    (file && note_range(e, cap, e->n, file)))
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
