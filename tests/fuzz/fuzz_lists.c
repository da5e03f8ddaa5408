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
 * length.
 *
 * Invariants (include/lists.h):
 *  - the resolver only sees non-empty, NUL-free, valid UTF-8 paths of at
 *    most LIST_LINE_MAX bytes with no newline and no leading '/';
 *  - every line is counted once: lines == accepted + all rejections,
 *    lines is the number of LF-terminated lines (plus an unterminated
 *    last one), first_line[k] is set exactly when rejected[k] > 0;
 *  - accepted/unknown/directory/duplicate agree with what the resolver
 *    answered; bytes and max_size with the accepted sizes;
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

#define FID_BASE	0x10000
#define FID_BITS	9
#define NFIDS		(1u << FID_BITS)

struct mount {
	uint64_t order[NFIDS];	/* accepted fids, in list order */
	bool seen[NFIDS];
	size_t n;
	uint64_t calls, unknown, dirs, dups, bytes, max_size;
};

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
	uint64_t f;

	FUZZ_CHECK(len > 0 && len <= LIST_LINE_MAX, "path of %zu bytes", len);
	FUZZ_CHECK(!memchr(path, '\0', len) && !memchr(path, '\n', len),
		   "NUL or LF in a path");
	FUZZ_CHECK(path[0] != '/', "leading '/' in a path");
	FUZZ_CHECK(utf8_valid(path, len), "path not UTF-8");
	m->calls++;
	if (path[0] == 'd') {
		m->dirs++;
		return -EISDIR;
	}
	if (path[0] == 'x') {
		m->unknown++;
		return -ENOENT;
	}
	f = path_fid(path, len);
	*fid = f;
	*size = len;
	if (m->seen[f - FID_BASE]) {
		m->dups++;
		return 0;
	}
	m->seen[f - FID_BASE] = true;
	m->order[m->n++] = f;
	m->bytes += len;
	if (len > m->max_size)
		m->max_size = len;
	return 0;
}

static uint64_t count_lines(const uint8_t *text, size_t len)
{
	uint64_t lines = 0;
	size_t i;

	for (i = 0; i < len; i++)
		lines += text[i] == '\n';
	return lines + (len && text[len - 1] != '\n');
}

static void check_report(const struct list_report *r, const struct mount *m,
			 uint64_t lines)
{
	uint64_t sum = r->accepted, syntax;
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
		 r->rejected[LR_BINARY];
	FUZZ_CHECK(syntax + m->calls == lines, "resolver called %llu times",
		   (unsigned long long)m->calls);
	FUZZ_CHECK(r->bytes == m->bytes && r->max_size == m->max_size,
		   "bytes %llu max %llu",
		   (unsigned long long)r->bytes,
		   (unsigned long long)r->max_size);
}

/* the window from the reader on: @m's files from @from, then all again */
static void check_window(struct lists *l, const struct mount *m, size_t from)
{
	static uint64_t got[2 * NFIDS + 1];
	size_t n = lists_window(l, 0, got, ARRAY_SIZE(got)), i;
	size_t want = (m->n - from) + m->n;

	FUZZ_CHECK(n == want, "window of %zu, want %zu", n, want);
	for (i = 0; i < n; i++) {
		uint64_t f = i < m->n - from ? m->order[from + i] :
			     m->order[i - (m->n - from)];

		FUZZ_CHECK(got[i] == f, "window[%zu]", i);
	}
	/* next use: the nearer of this epoch (if still ahead) and the next */
	for (i = 0; i < m->n; i++) {
		uint64_t want_d = i >= from ? i - from : (m->n - from) + i;

		FUZZ_CHECK(lists_next_use(l, m->order[i]) == want_d,
			   "next use of file %zu: %llu, want %llu", i,
			   (unsigned long long)lists_next_use(l, m->order[i]),
			   (unsigned long long)want_d);
	}
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
	const char *text = (const char *)data;
	uint64_t lines = count_lines(data, size);
	size_t k;
	int rc;

	FUZZ_CHECK(l != NULL, "lists_create failed");
	memset(&m, 0, sizeof(m));
	rc = lists_publish(l, "rank0", text, size, resolve, &m, &rep);
	check_report(&rep, &m, lines);
	FUZZ_CHECK(rc == (m.n ? 0 : -EINVAL), "publish rc %d with %zu files",
		   rc, m.n);
	FUZZ_CHECK(lists_count(l) == (m.n ? 1u : 0u), "%u lists",
		   lists_count(l));
	if (!m.n)
		goto out;

	/* the same text again: queued as the next epoch, same report */
	{
		struct mount m2;

		memset(&m2, 0, sizeof(m2));
		rc = lists_publish(l, "rank0", text, size, resolve, &m2, &rep2);
		FUZZ_CHECK(rc == 0 && !memcmp(&rep, &rep2, sizeof(rep)),
			   "second publish differs (rc %d)", rc);
	}
	check_window(l, &m, 0);
	/* the reader opens a file: it moves just past it */
	k = (size + data[0]) % m.n;
	lists_note_open(l, m.order[k], data[0] & 1);
	check_window(l, &m, k + 1);
	lists_set_lead(l, k + 1 < m.n ? m.order[k + 1] : m.order[0], 3, 300);
	check_print(l);
	/* names are checked before any line is read */
	FUZZ_CHECK(lists_publish(l, ".hidden", text, size, resolve, &m,
				 &rep2) == -EINVAL, "bad name accepted");
out:
	lists_destroy(l);
	return 0;
}
