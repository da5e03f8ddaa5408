// SPDX-License-Identifier: MIT
/*
 * fuzz_lists.c - parsing a published epoch list (lists_publish), then
 * the reader model on top of it.  The input is the list text as a
 * loader would send it through the control socket.
 *
 * A fake mount resolves paths: a path starting with 'd' is a directory,
 * one starting with 'x' does not exist, any other is a file whose id is
 * a 9-bit hash of the path (so different paths can name the same file,
 * as "a" and "a/" do through ctl.c's resolver) and whose size is its
 * length.  A path with a TAB is no file; a line "PATH<TAB>OFF<TAB>LEN" (decimal)
 * is then a range of PATH (ranges.h): accepted if PATH is a file and
 * the range lies in it, keyed by the range table.
 *
 * Invariants (include/lists.h):
 *  - the resolver only sees non-empty, NUL-free, valid UTF-8 paths of at
 *    most LIST_LINE_MAX bytes with no newline (but after "# nul") and no
 *    leading '/';
 *  - every line is counted once: lines == accepted + all rejections,
 *    lines is the number of LF-terminated lines (NUL-terminated after a
 *    first line "# nul"; plus an unterminated
 *    last one), first_line[k] is set exactly when rejected[k] > 0;
 *  - accepted/unknown/directory/duplicate/range agree with what the
 *    resolver answered and the range rule; bytes and max_size with the accepted sizes;
 *  - publish succeeds exactly when some line was accepted;
 *  - the window is the accepted files in order (then the queued epoch),
 *    next_use() is the distance to the reader, and both follow a
 *    lists_note_open().
 */
#include <errno.h>

#include "compiler.h"
#include "fuzz.h"
#include "lists.h"
#include "pathmap.h"
#include "ranges.h"

#define FID_BASE	0x10000
#define FID_BITS	9
#define NFIDS		(1u << FID_BITS)
#define MAXENT		(1u << 16)	/* accepted entries, more than fit */

struct mount {
	uint64_t order[MAXENT];	/* accepted ids, in list order */
	bool seen[NFIDS];
	size_t n;
	uint64_t calls, unknown, dirs, dups, ranges_bad, bytes, max_size;
	bool nul_form;		/* the input holds "# nul": LF may be in a name */
	struct ranges *rg;
	bool pending;		/* the last path was a range line's: */
	uint64_t off, len;	/* its range */
};

/* decimal, at most 19 digits, at most INT64_MAX */
static bool dec(const char *p, size_t len, uint64_t *v)
{
	size_t i;

	*v = 0;
	if (!len || len > 19)
		return false;
	for (i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		*v = *v * 10 + (uint64_t)(p[i] - '0');
	}
	return *v <= INT64_MAX;
}

/* "P<TAB>OFF<TAB>LEN" with P not empty: the range into @m */
static bool range_line(struct mount *m, const char *p, size_t len)
{
	size_t t2 = len, t1;

	while (t2 && p[t2 - 1] != '\t')
		t2--;
	if (!t2 || !dec(p + t2, len - t2, &m->len))
		return false;
	t2--;				/* at the second TAB */
	t1 = t2;
	while (t1 && p[t1 - 1] != '\t')
		t1--;
	if (t1 < 2 || !dec(p + t1, t2 - t1, &m->off))
		return false;
	return true;
}

static bool accepted_before(const struct mount *m, uint64_t id)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		if (m->order[i] == id)
			return true;
	return false;
}

/* a range of file @f (@size bytes): the parser's answer, modelled */
static int resolve_range(struct mount *m, uint64_t f, uint64_t size,
			 uint64_t *fid, uint64_t *sz)
{
	uint64_t key;

	*fid = f;
	*sz = size;
	if (!m->len || m->off > size || m->len > size - m->off) {
		m->ranges_bad++;
		return 0;	/* the parser refuses it after this */
	}
	FUZZ_CHECK(ranges_intern(m->rg, f, m->off, m->len, &key) == 0,
		   "range %llu+%llu not interned",
		   (unsigned long long)m->off, (unsigned long long)m->len);
	if (accepted_before(m, key)) {
		m->dups++;
		return 0;
	}
	if (m->n < MAXENT)
		m->order[m->n++] = key;
	m->bytes += m->len;
	if (m->len > m->max_size)
		m->max_size = m->len;
	return 0;
}

static uint64_t path_fid(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ULL;	/* FNV-1a */
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (uint8_t)p[i]) * 0x100000001b3ULL;
	return FID_BASE + (h & (NFIDS - 1));
}

static int resolve(void *arg, const char *path, size_t len, uint64_t *fid,
		   uint64_t *size)
{
	struct mount *m = arg;
	bool pending;
	uint64_t f;

	FUZZ_CHECK(len > 0 && len <= LIST_LINE_MAX, "path of %zu bytes", len);
	FUZZ_CHECK(!memchr(path, '\0', len) &&
		   (m->nul_form || !memchr(path, '\n', len)),
		   "NUL, or LF without \"# nul\", in a path");
	FUZZ_CHECK(path[0] != '/', "leading '/' in a path");
	FUZZ_CHECK(utf8_valid(path, len), "path not UTF-8");
	if (!m->pending && memchr(path, '\t', len) &&
	    range_line(m, path, len)) {
		m->pending = true;	/* the parser asks for PATH next */
		return -ENOENT;
	}
	pending = m->pending;
	m->pending = false;
	m->calls++;
	if (memchr(path, '\t', len)) {
		m->unknown++;
		return -ENOENT;
	}
	if (path[0] == 'd') {
		m->dirs++;
		return -EISDIR;
	}
	if (path[0] == 'x') {
		m->unknown++;
		return -ENOENT;
	}
	f = path_fid(path, len);
	if (pending)
		return resolve_range(m, f, len, fid, size);
	*fid = f;
	*size = len;
	if (m->seen[f - FID_BASE]) {
		m->dups++;
		return 0;
	}
	m->seen[f - FID_BASE] = true;
	if (m->n < MAXENT)
		m->order[m->n++] = f;
	m->bytes += len;
	if (len > m->max_size)
		m->max_size = len;
	return 0;
}

static uint64_t count_ended(const uint8_t *text, size_t len, uint8_t sep)
{
	uint64_t lines = 0;
	size_t i;

	for (i = 0; i < len; i++)
		lines += text[i] == sep;
	return lines + (len && text[len - 1] != sep);
}

/* LF-ended lines; after a first line "# nul" (CR allowed), NUL-ended */
static uint64_t count_lines(const uint8_t *text, size_t len, bool *nul)
{
	const uint8_t *lf = memchr(text, '\n', len);
	size_t first = lf ? (size_t)(lf - text) : len;

	*nul = (first == 5 || (first == 6 && text[5] == '\r')) &&
	       !memcmp(text, "# nul", 5);
	if (!*nul)
		return count_ended(text, len, '\n');
	if (!lf)
		return 1;
	return 1 + count_ended(text + first + 1, len - first - 1, '\0');
}

static void check_report(const struct list_report *r, const struct mount *m,
			 uint64_t lines)
{
	uint64_t sum = r->accepted + r->headers, syntax;	/* headers: # epoch, # begin */
	int k;

	for (k = 0; k < LR_NREASONS; k++) {
		sum += r->rejected[k];
		FUZZ_CHECK(!r->first_line[k] == !r->rejected[k],
			   "reason %d: %llu rejected, first at line %llu", k,
			   (unsigned long long)r->rejected[k],
			   (unsigned long long)r->first_line[k]);
		FUZZ_CHECK(r->first_line[k] <= lines, "reason %d: line %llu",
			   k, (unsigned long long)r->first_line[k]);
	}
	FUZZ_CHECK(r->lines == lines && sum == lines,
		   "%llu lines counted, %llu accounted for, %llu in the text",
		   (unsigned long long)r->lines, (unsigned long long)sum,
		   (unsigned long long)lines);
	FUZZ_CHECK(r->accepted == m->n, "accepted %llu, resolver %zu",
		   (unsigned long long)r->accepted, m->n);
	FUZZ_CHECK(r->rejected[LR_RANGE] == m->ranges_bad,
		   "range %llu, model %llu",
		   (unsigned long long)r->rejected[LR_RANGE],
		   (unsigned long long)m->ranges_bad);
	FUZZ_CHECK(r->rejected[LR_UNKNOWN] == m->unknown &&
		   r->rejected[LR_DIRECTORY] == m->dirs &&
		   r->rejected[LR_DUPLICATE] == m->dups,
		   "unknown/directory/duplicate %llu/%llu/%llu, resolver %llu/%llu/%llu",
		   (unsigned long long)r->rejected[LR_UNKNOWN],
		   (unsigned long long)r->rejected[LR_DIRECTORY],
		   (unsigned long long)r->rejected[LR_DUPLICATE],
		   (unsigned long long)m->unknown,
		   (unsigned long long)m->dirs, (unsigned long long)m->dups);
	syntax = r->rejected[LR_EMPTY] + r->rejected[LR_TOO_LONG] +
		 r->rejected[LR_BINARY] + r->headers;	/* LR_RANGE: called */
	FUZZ_CHECK(syntax + m->calls == lines, "resolver called %llu times",
		   (unsigned long long)m->calls);
	FUZZ_CHECK(r->bytes == m->bytes && r->max_size == m->max_size,
		   "bytes %llu max %llu",
		   (unsigned long long)r->bytes,
		   (unsigned long long)r->max_size);
}

/*
 * The window from the reader on: @m's files from @from first, in order,
 * then the queued epochs (at most two, docs/epochs.md).  A file of this
 * epoch still ahead of the reader is needed as soon as it comes.
 */
static void check_window(struct lists *l, const struct mount *m, size_t from)
{
	static uint64_t got[3 * MAXENT + 1];
	size_t n = lists_window(l, 0, got, NULL, NULL, 0, ARRAY_SIZE(got)), i;
	size_t ahead = m->n - from;

	FUZZ_CHECK(n >= ahead && n <= ahead + 2 * m->n, "window of %zu, %zu ahead",
		   n, ahead);
	for (i = 0; i < ahead; i++)
		FUZZ_CHECK(got[i] == m->order[from + i], "window[%zu]", i);
	for (i = from; i < m->n; i++)
		FUZZ_CHECK(lists_next_use(l, m->order[i]) <= i - from,
			   "next use of file %zu: %llu, want <= %zu", i,
			   (unsigned long long)lists_next_use(l, m->order[i]),
			   i - from);
}

static void check_print(struct lists *l)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	FUZZ_CHECK(f != NULL, "open_memstream failed");
	lists_print(l, f);
	lists_print_one(l, "rank0", f);
	lists_print_one(l, "absent", f);
	fclose(f);
	FUZZ_CHECK(len > 0, "nothing printed");
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct mount m;
	struct list_report rep, rep2;
	struct lists *l = lists_create();
	struct ranges *rg = NULL;
	const char *text = (const char *)data;
	bool nul;
	uint64_t lines = count_lines(data, size, &nul);
	size_t k;
	int rc;

	FUZZ_CHECK(l != NULL, "lists_create failed");
	FUZZ_CHECK(ranges_create(&rg) == 0, "ranges_create failed");
	lists_set_ranges(l, rg);
	memset(&m, 0, sizeof(m));
	m.nul_form = nul;
	m.rg = rg;
	rc = lists_publish(l, "rank0", text, size, resolve, &m, &rep);
	check_report(&rep, &m, lines);
	/*
	 * A plain list: published if a line is usable, else refused.  With
	 * epoch headers (docs/epochs.md) a fresh list may also be refused
	 * as stale or waiting: only the error codes are checked then.
	 */
	if (!rep.headers)
		FUZZ_CHECK(rc == (m.n ? 0 : -EINVAL),
			   "publish rc %d with %zu files", rc, m.n);
	else
		FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ESTALE ||
			   rc == -EBUSY, "publish rc %d with headers", rc);
	if (!m.n || rc)
		goto out;
	FUZZ_CHECK(lists_count(l) == 1u, "%u lists", lists_count(l));

	/*
	 * The same text again: parsed the same way (what it does with the
	 * epochs depends on its headers: queued, replaced, or refused as
	 * stale or with a full queue).
	 */
	{
		static struct mount m2;

		memset(&m2, 0, sizeof(m2));
		m2.nul_form = nul;
		m2.rg = rg;
		rc = lists_publish(l, "rank0", text, size, resolve, &m2, &rep2);
		FUZZ_CHECK(rc == 0 || rc == -ESTALE || rc == -EBUSY,
			   "second publish rc %d", rc);
		FUZZ_CHECK(rep.lines == rep2.lines &&
			   rep.accepted == rep2.accepted &&
			   !memcmp(rep.rejected, rep2.rejected,
				   sizeof(rep.rejected)) &&
			   !memcmp(rep.first_line, rep2.first_line,
				   sizeof(rep.first_line)) &&
			   rep.bytes == rep2.bytes &&
			   rep.max_size == rep2.max_size &&
			   rep.headers == rep2.headers &&
			   rep.epoch == rep2.epoch && rep.begin == rep2.begin &&
			   rep.begin_at == rep2.begin_at,
			   "second publish parsed differently");
	}
	if (!rep.headers)
		check_window(l, &m, 0);	/* headers may leave it waiting */
	/* the reader opens a file: it moves just past it */
	k = (size + data[0]) % m.n;
	lists_note_open(l, m.order[k], data[0] & 1);
	/* where the window starts now depends on the out-of-order rules
	 * (files passed but unread may still be needed): bounds only */
	{
		static uint64_t got[3 * MAXENT + 1];
		size_t n = lists_window(l, 0, got, NULL, NULL, 0, ARRAY_SIZE(got));

		FUZZ_CHECK(n <= 3 * m.n, "window of %zu for %zu files", n, m.n);
	}
	{
		/* the prefetcher's view: the next file is on disk */
		uint64_t next = k + 1 < m.n ? m.order[k + 1] : m.order[0];
		bool ready = true;

		lists_set_ready(l, &next, &ready, 1);
	}
	check_print(l);
	/* names are checked before any line is read */
	FUZZ_CHECK(lists_publish(l, ".hidden", text, size, resolve, &m,
				 &rep2) == -EINVAL, "bad name accepted");
out:
	lists_destroy(l);
	ranges_destroy(rg);
	return 0;
}
