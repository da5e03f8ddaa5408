// SPDX-License-Identifier: MIT
/*
 * lists.c: parsing a published list (every reject reason counted, CRLF,
 * blank and very long lines, duplicates, a large list, a list with no
 * usable line changing nothing), list names and the LISTS_MAX limit,
 * next use, the prefetch window, per-list leads, and the epoch protocol
 * of docs/epochs.md, one test per transition: header lines, numbered
 * queueing (the queue full, a republished current epoch), a refused
 * publish whose begin is not applied either, an explicit
 * begin after 90% of an epoch (drop_last), the next epoch expected to end
 * where that one did (learned stop), the implicit advance by the
 * queued epoch's head, a resume mid-epoch and a restart from an older
 * epoch, opens out of order within and outside the window, a repeated
 * open, the previous epoch's stragglers, a stale publish, two ranks'
 * lists on one cache, an idle list (fake clock) and a begin that creates
 * a waiting list; sample-range lines, and reads that touch several
 * ranges.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lists.h"
#include "policy.h"
#include "ranges.h"
#include "runner.h"

/*
 * A fake mount: "fN" is a file with id F(N) and size N + 1, "dN" a
 * directory, "long/..." a file whose id is LONG_FID + its length;
 * anything else does not exist.
 */
#define F(n)		(1000 + (uint64_t)(n))
#define LONG_FID	2000000
#define NEVER		UINT64_MAX

struct mount {
	unsigned calls;		/* resolve() calls */
	size_t last_len;	/* length of the last path asked for */
};

static int resolve(void *arg, const char *path, size_t len, uint64_t *fid,
		   uint64_t *size)
{
	struct mount *m = arg;
	char num[16];
	char *end;
	unsigned long n;

	m->calls++;
	m->last_len = len;
	while (len && path[len - 1] == '/')	/* as ctl.c's resolver */
		len--;
	if (len > 5 && !memcmp(path, "long/", 5)) {
		*fid = LONG_FID + len;
		*size = 7;
		return 0;
	}
	if (len < 2 || len >= sizeof(num) || (path[0] != 'f' && path[0] != 'd'))
		return -ENOENT;
	memcpy(num, path + 1, len - 1);
	num[len - 1] = '\0';
	n = strtoul(num, &end, 10);
	if (*end || end == num)
		return -ENOENT;
	if (path[0] == 'd')
		return -EISDIR;
	*fid = F(n);
	*size = n + 1;
	return 0;
}

static struct mount mnt;

static int publish(struct lists *l, const char *name, const char *text,
		   struct list_report *rep)
{
	struct list_report dummy;

	return lists_publish(l, name, text, strlen(text), resolve, &mnt,
			     rep ? rep : &dummy);
}

/* lists_print() (@name NULL) or lists_print_one(@name); caller frees */
static char *text_of(struct lists *l, const char *name)
{
	char *text = NULL;
	size_t len;
	FILE *f = open_memstream(&text, &len);

	if (name)
		lists_print_one(l, name, f);
	else
		lists_print(l, f);
	fclose(f);
	return text;
}

/* the value of 'list_KEY{list="NAME"}' in lists_print(), or -999 */
static long long value(struct lists *l, const char *key, const char *name)
{
	char *text = text_of(l, NULL), want[128];
	const char *at;
	long long v = -999;
	size_t wl;

	wl = snprintf(want, sizeof(want), "list_%s{list=\"%s\"} ", key, name);
	for (at = text; at; at = strchr(at, '\n'), at = at ? at + 1 : NULL)
		if (!strncmp(at, want, wl)) {
			v = strtoll(at + wl, NULL, 10);
			break;
		}
	free(text);
	return v;
}

#define POS(l, n)	value(l, "position", n)
#define FILES(l, n)	value(l, "files", n)
#define NEXT(l, n)	value(l, "next_epoch_files", n)
#define EPOCHS(l, n)	value(l, "epochs_done", n)
#define EPOCH(l, n)	value(l, "epoch", n)
#define NEXTNO(l, n)	value(l, "next_epoch", n)
#define QUEUED(l, n)	value(l, "queued", n)
#define READ(l, n)	value(l, "read", n)
#define LEFT(l, n)	value(l, "remaining", n)
#define IDLE(l, n)	value(l, "idle", n)

/* the "low" line of lists_print_one(), or -999 */
static long long low_of(struct lists *l, const char *name);
#define LOW(l, n)	low_of(l, n)

/* the window as "fN fN ..." ("?" for an id outside the fake mount) */
static const char *window(struct lists *l, size_t skip, size_t max)
{
	static char out[256];
	uint64_t fids[32];
	size_t i, n, o = 0;

	n = lists_window(l, skip, fids, NULL, NULL, 0, max < 32 ? max : 32);
	out[0] = '\0';
	for (i = 0; i < n && o < sizeof(out) - 16; i++)
		o += snprintf(out + o, sizeof(out) - o, "%sf%llu", i ? " " : "",
			      (unsigned long long)(fids[i] - F(0)));
	return out;
}

static long long low_of(struct lists *l, const char *name)
{
	char *text = NULL, *at;
	size_t len;
	long long v = -999;
	FILE *f = open_memstream(&text, &len);

	lists_print_one(l, name, f);
	fclose(f);
	at = strstr(text, "\nlow ");
	if (at)
		v = strtoll(at + 5, NULL, 10);
	free(text);
	return v;
}

/* "list_a\nf1\n..." for files f<from>..f<to - 1> */
static char *range_text(const char *head, unsigned from, unsigned to)
{
	char *text = NULL;
	size_t len;
	FILE *f = open_memstream(&text, &len);
	unsigned i;

	fputs(head, f);
	for (i = from; i < to; i++)
		fprintf(f, "f%u\n", i);
	fclose(f);
	return text;
}

/* publish f<from>..f<to - 1> as list @name, with header lines @head */
static int publish_range(struct lists *l, const char *name, const char *head,
			 unsigned from, unsigned to, struct list_report *rep)
{
	char *text = range_text(head, from, to);
	int rc = publish(l, name, text, rep);

	free(text);
	return rc;
}

static void open_range(struct lists *l, unsigned from, unsigned to)
{
	unsigned i;

	for (i = from; i < to; i++)
		lists_note_open(l, F(i), true);
}

/* lists_next_use_many() gives what lists_next_use_bytes() gives, for
 * F(0) .. F(@n - 1) and a fid no list holds */
static void same_many(struct lists *l, unsigned n)
{
	uint64_t fids[201], uses[201];
	unsigned i;

	for (i = 0; i < n && i < 200; i++)
		fids[i] = F(i);
	fids[i] = LONG_FID + 7;
	lists_next_use_many(l, fids, uses, i + 1);
	for (n = i + 1, i = 0; i < n; i++)
		CHECK_INT(uses[i], ==, lists_next_use_bytes(l, fids[i], NULL));
}

static void test_parse_good(void)
{
	struct lists *l = lists_create();
	struct list_report rep;
	int k;

	/* a leading '/' is the mount root; the last line has no newline */
	CHECK_INT(publish(l, "a", "f1\nf2\n/f3\n//f4", &rep), ==, 0);
	CHECK_INT(rep.lines, ==, 4);
	CHECK_INT(rep.accepted, ==, 4);
	CHECK_INT(rep.bytes, ==, 2 + 3 + 4 + 5);
	CHECK_INT(rep.max_size, ==, 5);
	for (k = 0; k < LR_NREASONS; k++) {
		CHECK_INT(rep.rejected[k], ==, 0);
		CHECK_INT(rep.first_line[k], ==, 0);
	}
	CHECK_STR(window(l, 0, 10), "f1 f2 f3 f4");
	CHECK_INT(lists_count(l), ==, 1);
	CHECK_INT(FILES(l, "a"), ==, 4);
	CHECK_INT(POS(l, "a"), ==, 0);
	lists_destroy(l);
}

/*
 * A first line "# nul": the records after it end with NUL bytes, so a
 * name may hold a newline (it reaches the resolver whole) and a CR is
 * kept; headers may follow.  Anywhere else "# nul" is a path.
 */
static void test_parse_nul_form(void)
{
	static const char text[] = "# nul\n# epoch 2\0f3\0f4\nx\0f5\r\0f6";
	static const char later[] = "f1\n# nul\nf2\n";
	struct lists *l = lists_create();
	struct list_report rep;

	mnt.calls = 0;
	CHECK_INT(lists_publish(l, "r", text, sizeof(text) - 1, resolve, &mnt,
				&rep), ==, 0);
	CHECK_INT(rep.lines, ==, 6);
	CHECK_INT(rep.headers, ==, 2);
	CHECK_INT(rep.epoch, ==, 2);
	CHECK_INT(rep.accepted, ==, 2);			/* f3, f6 */
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 2);	/* "f4\nx", "f5\r" */
	CHECK_INT(rep.first_line[LR_UNKNOWN], ==, 4);
	CHECK_INT(mnt.calls, ==, 4);
	CHECK_STR(window(l, 0, 10), "f3 f6");
	lists_destroy(l);

	l = lists_create();
	CHECK_INT(lists_publish(l, "r", later, sizeof(later) - 1, resolve,
				&mnt, &rep), ==, 0);
	CHECK_INT(rep.lines, ==, 3);
	CHECK_INT(rep.headers, ==, 0);
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 1);	/* "# nul" */
	CHECK_STR(window(l, 0, 10), "f1 f2");
	lists_destroy(l);
}

static void test_parse_rejects(void)
{
	static const char text[] =
		"f1\n"			/* 1 accepted */
		"\n"			/* 2 empty */
		"nosuch\n"		/* 3 unknown */
		"d7\n"			/* 4 directory */
		"f1\n"			/* 5 duplicate */
		"/f1\n"			/* 6 duplicate, the same path */
		"LONG\n"		/* 7 too long (filled in below) */
		"f\0x\n"		/* 8 binary: NUL */
		"\xff\xfe\n"		/* 9 binary: not UTF-8 */
		"f2\r\n"		/* 10 accepted (CRLF) */
		"/\n"			/* 11 empty: only the root */
		"d8/\n"			/* 12 directory */
		"\xc3\xa9t\xc3\xa9\n";	/* 13 unknown, valid UTF-8 */
	struct lists *l = lists_create();
	struct list_report rep;
	char *buf, *p;
	size_t len;

	/* line 7 becomes LIST_LINE_MAX + 1 bytes */
	len = sizeof(text) - 1 + LIST_LINE_MAX + 1 - 4;
	buf = malloc(len);
	p = memmem(text, sizeof(text) - 1, "LONG", 4);
	memcpy(buf, text, p - text);
	memcpy(buf + (p - text), "long/", 5);
	memset(buf + (p - text) + 5, 'a', LIST_LINE_MAX + 1 - 5);
	memcpy(buf + (p - text) + LIST_LINE_MAX + 1, p + 4,
	       sizeof(text) - 1 - (p + 4 - text));
	mnt.calls = 0;
	CHECK_INT(lists_publish(l, "r", buf, len, resolve, &mnt, &rep), ==, 0);
	CHECK_INT(rep.lines, ==, 13);
	CHECK_INT(rep.accepted, ==, 2);
	CHECK_INT(rep.rejected[LR_EMPTY], ==, 2);
	CHECK_INT(rep.first_line[LR_EMPTY], ==, 2);
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 2);
	CHECK_INT(rep.first_line[LR_UNKNOWN], ==, 3);
	CHECK_INT(rep.rejected[LR_DIRECTORY], ==, 2);
	CHECK_INT(rep.first_line[LR_DIRECTORY], ==, 4);
	CHECK_INT(rep.rejected[LR_DUPLICATE], ==, 2);
	CHECK_INT(rep.first_line[LR_DUPLICATE], ==, 5);
	CHECK_INT(rep.rejected[LR_TOO_LONG], ==, 1);
	CHECK_INT(rep.first_line[LR_TOO_LONG], ==, 7);
	CHECK_INT(rep.rejected[LR_BINARY], ==, 2);
	CHECK_INT(rep.first_line[LR_BINARY], ==, 8);
	/* empty, too long and binary lines never reach the resolver */
	CHECK_INT(mnt.calls, ==, 13 - 2 - 1 - 2);
	CHECK_STR(window(l, 0, 10), "f1 f2");
	free(buf);
	lists_destroy(l);
}

static void test_report_text(void)
{
	struct lists *l = lists_create();
	struct list_report rep;
	char *text = NULL;
	size_t len;
	FILE *f;

	CHECK_INT(publish(l, "a", "f1\nf1\nzz\nf1\n", &rep), ==, 0);
	f = open_memstream(&text, &len);
	list_report_print(&rep, f);
	fclose(f);
	CHECK(strstr(text, "lines 4\naccepted 1\nbytes 2\n") == text);
	CHECK(strstr(text, "\nrejected_duplicate 2 (first at line 2)\n"));
	CHECK(strstr(text, "\nrejected_unknown 1 (first at line 3)\n"));
	CHECK(strstr(text, "\nrejected_binary 0\n"));
	free(text);
	lists_destroy(l);
}

static void test_all_bad_changes_nothing(void)
{
	struct lists *l = lists_create();
	struct list_report rep;
	char *text;

	/* no list yet: an open moves nothing (the prefetcher is not woken) */
	CHECK(!lists_note_open(l, F(1), true));
	CHECK_INT(publish(l, "a", "f1\nf2\nf3\n", NULL), ==, 0);
	CHECK(lists_note_open(l, F(1), true));	/* expected: the list moved */
	CHECK(!lists_note_open(l, F(1), true));	/* a re-read */
	CHECK(!lists_note_open(l, F(9), true));	/* in no list */
	/* not a single usable line: -EINVAL, the report still counts */
	CHECK_INT(publish(l, "a", "nosuch\nd1\n\n\xff\n", &rep), ==, -EINVAL);
	CHECK_INT(rep.lines, ==, 4);
	CHECK_INT(rep.accepted, ==, 0);
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 1);
	CHECK_INT(rep.rejected[LR_DIRECTORY], ==, 1);
	CHECK_INT(rep.rejected[LR_EMPTY], ==, 1);
	CHECK_INT(rep.rejected[LR_BINARY], ==, 1);
	CHECK_INT(publish(l, "a", "", &rep), ==, -EINVAL);
	CHECK_INT(rep.lines, ==, 0);
	CHECK_INT(publish(l, "b", "\n\n", NULL), ==, -EINVAL);
	/* nothing changed: no list "b", "a" as it was, old report kept */
	CHECK_INT(lists_count(l), ==, 1);
	CHECK_INT(FILES(l, "a"), ==, 3);
	CHECK_INT(NEXT(l, "a"), ==, 0);
	CHECK_INT(POS(l, "a"), ==, 1);
	CHECK_STR(window(l, 0, 10), "f2 f3");
	text = text_of(l, "a");
	CHECK(strstr(text, "# last publish\nlines 3\naccepted 3\n") != NULL);
	free(text);
	lists_destroy(l);
}

static void test_crlf_and_blank_lines(void)
{
	struct lists *l = lists_create();
	struct list_report rep;

	CHECK_INT(publish(l, "a", "f1\r\n\r\nf2\r\n\n\nf3\r\n", &rep), ==, 0);
	CHECK_INT(rep.lines, ==, 6);
	CHECK_INT(rep.accepted, ==, 3);
	CHECK_INT(rep.rejected[LR_EMPTY], ==, 3);
	CHECK_INT(rep.first_line[LR_EMPTY], ==, 2);
	CHECK_STR(window(l, 0, 10), "f1 f2 f3");
	/* only the last CR goes: "f4\r\r" is not "f4" */
	CHECK_INT(publish(l, "b", "f4\r\r\nf5\r", &rep), ==, 0);
	CHECK_INT(rep.accepted, ==, 1);
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 1);
	lists_destroy(l);
}

static void test_long_lines(void)
{
	size_t big = 1 << 20;
	char *text = malloc(big + 2);
	struct lists *l = lists_create();
	struct list_report rep;

	/* exactly LIST_LINE_MAX bytes: accepted, handed over whole */
	memcpy(text, "long/", 5);
	memset(text + 5, 'b', LIST_LINE_MAX - 5);
	CHECK_INT(lists_publish(l, "a", text, LIST_LINE_MAX, resolve, &mnt,
				&rep), ==, 0);
	CHECK_INT(rep.accepted, ==, 1);
	CHECK_INT(mnt.last_len, ==, LIST_LINE_MAX);
	/* the leading '/' and the CR do not count */
	text[0] = '/';
	memcpy(text + 1, "long/", 5);
	memset(text + 6, 'b', LIST_LINE_MAX - 5);
	memcpy(text + 1 + LIST_LINE_MAX, "\r\n", 2);
	CHECK_INT(lists_publish(l, "b", text, LIST_LINE_MAX + 3, resolve,
				&mnt, &rep), ==, 0);
	CHECK_INT(rep.accepted, ==, 1);
	CHECK_INT(mnt.last_len, ==, LIST_LINE_MAX);
	/* one more byte is too long */
	memcpy(text, "long/", 5);
	memset(text + 5, 'b', LIST_LINE_MAX + 1 - 5);
	CHECK_INT(lists_publish(l, "c", text, LIST_LINE_MAX + 1, resolve,
				&mnt, &rep), ==, -EINVAL);
	CHECK_INT(rep.rejected[LR_TOO_LONG], ==, 1);
	/* a 1 MiB line between two good ones */
	memcpy(text, "f1\n", 3);
	memset(text + 3, 'x', big - 6);
	memcpy(text + big - 3, "\nf2", 3);
	CHECK_INT(lists_publish(l, "d", text, big, resolve, &mnt, &rep), ==, 0);
	CHECK_INT(rep.lines, ==, 3);
	CHECK_INT(rep.accepted, ==, 2);
	CHECK_INT(rep.rejected[LR_TOO_LONG], ==, 1);
	CHECK_INT(rep.first_line[LR_TOO_LONG], ==, 2);
	free(text);
	lists_destroy(l);
}

static void test_large_list(void)
{
	const unsigned n = 200000;
	struct lists *l = lists_create();
	struct list_report rep;
	char *text = malloc((size_t)n * 8 + 16), *p = text;
	uint64_t fids[4];
	unsigned i;

	for (i = 0; i < n; i++)
		p += sprintf(p, "f%u\n", i);
	p += sprintf(p, "f12345\nf0\n");	/* duplicates after growing */
	CHECK_INT(lists_publish(l, "big", text, p - text, resolve, &mnt, &rep),
		  ==, 0);
	CHECK_INT(rep.lines, ==, n + 2);
	CHECK_INT(rep.accepted, ==, n);
	CHECK_INT(rep.rejected[LR_DUPLICATE], ==, 2);
	CHECK_INT(rep.first_line[LR_DUPLICATE], ==, n + 1);
	CHECK_INT(rep.max_size, ==, n);
	CHECK_INT(FILES(l, "big"), ==, n);
	CHECK_INT(lists_next_use(l, F(0)), ==, 0);
	CHECK_INT(lists_next_use(l, F(n - 1)), ==, n - 1);
	CHECK_INT(lists_next_use(l, F(n)), ==, NEVER);
	CHECK_INT(lists_window(l, n - 2, fids, NULL, NULL, 0, 4), ==, 2);
	CHECK_INT(fids[0], ==, F(n - 2));
	CHECK_INT(fids[1], ==, F(n - 1));
	/* a jump: the window behind the reader is still to be read */
	lists_note_open(l, F(150000), true);
	CHECK_INT(POS(l, "big"), ==, 150001);
	CHECK_INT(LOW(l, "big"), ==, 150001 - LISTS_WINDOW_DEFAULT);
	CHECK_INT(lists_next_use(l, F(199999)), ==,
		  199999 - (150001 - LISTS_WINDOW_DEFAULT));
	CHECK_INT(lists_next_use(l, F(1000)), ==, NEVER);	/* skipped */
	free(text);
	lists_destroy(l);
}

static void test_names(void)
{
	static const char *const bad[] = {
		"", ".hidden", "a/b", "a b", "tab\t", "caf\xc3\xa9", "a\n",
		"x123456789012345678901234567890"
		"123456789012345678901234567890123",	/* 64 bytes */
	};
	struct lists *l = lists_create();
	struct list_report rep;
	char name[LIST_NAME_MAX];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_INT(publish(l, bad[i], "f1\n", &rep), ==, -EINVAL);
		CHECK_INT(rep.lines, ==, 0);	/* not even parsed */
	}
	CHECK_INT(lists_count(l), ==, 0);
	/* LIST_NAME_MAX - 1 characters of [A-Za-z0-9._-] */
	memset(name, 'n', LIST_NAME_MAX - 1);
	name[LIST_NAME_MAX - 1] = '\0';
	memcpy(name, "rank-0.A_z", 10);
	CHECK_INT(publish(l, name, "f1\n", NULL), ==, 0);
	for (i = 1; i < LISTS_MAX; i++) {
		snprintf(name, sizeof(name), "r%zu", i);
		CHECK_INT(publish(l, name, "f1\n", NULL), ==, 0);
	}
	CHECK_INT(lists_count(l), ==, LISTS_MAX);
	CHECK_INT(publish(l, "one-more", "f1\nf2\n", &rep), ==, -ENOSPC);
	CHECK_INT(rep.accepted, ==, 2);		/* parsed, not kept */
	CHECK_INT(lists_count(l), ==, LISTS_MAX);
	/* an existing name can still publish at the limit */
	CHECK_INT(publish(l, "r1", "f2\n", NULL), ==, 0);
	CHECK_INT(NEXT(l, "r1"), ==, 1);
	lists_destroy(l);
}

static void test_next_use(void)
{
	struct lists *l = lists_create();

	CHECK_INT(lists_next_use(l, F(1)), ==, NEVER);	/* no lists */
	CHECK_INT(publish(l, "a", "f1\nf2\nf3\nf4\nf5\n", NULL), ==, 0);
	CHECK_INT(lists_next_use(l, F(1)), ==, 0);
	CHECK_INT(lists_next_use(l, F(3)), ==, 2);
	CHECK_INT(lists_next_use(l, F(9)), ==, NEVER);
	lists_note_open(l, F(1), false);
	CHECK_INT(lists_next_use(l, F(1)), ==, NEVER);	/* passed */
	CHECK_INT(lists_next_use(l, F(3)), ==, 1);
	/* a queued epoch: files passed are needed again after the rest */
	CHECK_INT(publish(l, "a", "f5\nf4\nf3\nf2\nf1\nf6\n", NULL), ==, 0);
	CHECK_INT(lists_next_use(l, F(1)), ==, 4 + 4);
	CHECK_INT(lists_next_use(l, F(6)), ==, 4 + 5);
	CHECK_INT(lists_next_use(l, F(3)), ==, 1);	/* still ahead now */
	/* the minimum over lists */
	CHECK_INT(publish(l, "b", "f6\nf1\n", NULL), ==, 0);
	CHECK_INT(lists_next_use(l, F(6)), ==, 0);
	CHECK_INT(lists_next_use(l, F(1)), ==, 1);
	CHECK_INT(lists_next_use(l, F(5)), ==, 3);
	lists_destroy(l);
}

/* the same in bytes (file fN has N + 1 bytes), and the use after it */
static void test_next_use_bytes(void)
{
	struct lists *l = lists_create();
	uint64_t after = 0;

	CHECK_INT(lists_next_use_bytes(l, F(1), &after), ==, NEVER);
	CHECK_INT(after, ==, NEVER);
	CHECK_INT(publish(l, "a", "f1\nf2\nf3\nf4\nf5\n", NULL), ==, 0);
	CHECK_INT(lists_next_use_bytes(l, F(1), &after), ==, 0);
	CHECK_INT(after, ==, NEVER);		/* no later epoch */
	CHECK_INT(lists_next_use_bytes(l, F(3), NULL), ==, 2 + 3);
	lists_note_open(l, F(1), false);
	CHECK_INT(lists_next_use_bytes(l, F(1), &after), ==, NEVER);
	CHECK_INT(lists_next_use_bytes(l, F(3), &after), ==, 3);
	/* a queued epoch: the rest of this one (18 bytes), then its offset */
	CHECK_INT(publish(l, "a", "f5\nf4\nf3\nf2\nf1\nf6\n", NULL), ==, 0);
	CHECK_INT(lists_next_use_bytes(l, F(1), &after), ==, 18 + 6 + 5 + 4 + 3);
	CHECK_INT(after, ==, NEVER);
	CHECK_INT(lists_next_use_bytes(l, F(3), &after), ==, 3);
	CHECK_INT(after, ==, 18 + 6 + 5);	/* read again next epoch */
	/* over lists: the soonest, and the second soonest of all */
	CHECK_INT(publish(l, "b", "f6\nf1\n", NULL), ==, 0);
	CHECK_INT(lists_next_use_bytes(l, F(1), &after), ==, 7);
	CHECK_INT(after, ==, 18 + 6 + 5 + 4 + 3);
	CHECK_INT(lists_next_use_bytes(l, F(6), &after), ==, 0);
	CHECK_INT(after, ==, 18 + 6 + 5 + 4 + 3 + 2);
	lists_destroy(l);
}

static void test_window(void)
{
	struct lists *l = lists_create();

	CHECK_STR(window(l, 0, 10), "");
	CHECK_INT(publish(l, "a", "f1\nf2\nf3\n", NULL), ==, 0);
	CHECK_INT(publish(l, "b", "f10\nf11\n", NULL), ==, 0);
	/* the lists interleaved, k-th file ahead of each reader in turn */
	CHECK_STR(window(l, 0, 10), "f1 f10 f2 f11 f3");
	CHECK_STR(window(l, 0, 3), "f1 f10 f2");
	CHECK_STR(window(l, 1, 10), "f2 f11 f3");
	CHECK_STR(window(l, 3, 10), "");
	CHECK_STR(window(l, 0, 0), "");
	/* from each reader's first unread file on, into the queued epoch:
	 * f1 was passed but not read (a slow worker has it) */
	CHECK_INT(publish(l, "a", "f4\nf5\n", NULL), ==, 0);
	lists_note_open(l, F(2), false);
	CHECK_STR(window(l, 0, 10), "f1 f10 f3 f11 f4 f5");
	CHECK_STR(window(l, 2, 10), "f4 f5");
	lists_note_open(l, F(1), false);
	CHECK_STR(window(l, 0, 10), "f3 f10 f4 f11 f5");
	lists_destroy(l);
}

/* the window from the @start-th list on, as "fN:slot fN:slot ..." */
static const char *window_from(struct lists *l, unsigned start)
{
	static char out[256];
	unsigned char slot[16];
	uint64_t fids[16];
	size_t i, n, o = 0;

	n = lists_window(l, 0, fids, NULL, slot, start, 16);
	out[0] = '\0';
	for (i = 0; i < n; i++)
		o += snprintf(out + o, sizeof(out) - o, "%sf%llu:%u",
			      i ? " " : "",
			      (unsigned long long)(fids[i] - F(0)), slot[i]);
	return out;
}

/*
 * The interleave can begin with any list (the prefetcher begins each
 * round with the next one, so that one list does not take every fetch a
 * completion lets start), and each file names its list's slot.
 */
static void test_window_start(void)
{
	struct lists *l = lists_create();

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\n", NULL), ==, 0);
	CHECK_INT(publish(l, "b", "f10\nf11\n", NULL), ==, 0);
	CHECK_STR(window_from(l, 0), "f1:0 f10:1 f2:0 f11:1 f3:0");
	CHECK_STR(window_from(l, 1), "f10:1 f1:0 f11:1 f2:0 f3:0");
	CHECK_STR(window_from(l, 2), "f1:0 f10:1 f2:0 f11:1 f3:0");
	CHECK_STR(window_from(l, 7), "f10:1 f1:0 f11:1 f2:0 f3:0");
	lists_destroy(l);
}

static void test_advance_on_open(void)
{
	struct lists *l = lists_create();

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\n", NULL), ==, 0);
	/* publishing while the epoch runs queues the list ... */
	CHECK_INT(publish(l, "a", "f4\nf5\n", NULL), ==, 0);
	CHECK_INT(FILES(l, "a"), ==, 3);
	CHECK_INT(NEXT(l, "a"), ==, 2);
	/* ... and a list with the queued epoch's number replaces it (an
	 * unnumbered one goes after it: test_unnumbered_one_ahead) */
	CHECK_INT(publish(l, "a", "# epoch 1\nf6\nf7\nf8\nf9\n", NULL), ==, 0);
	CHECK_INT(NEXT(l, "a"), ==, 4);
	lists_note_open(l, F(1), true);
	lists_note_open(l, F(2), true);
	lists_note_open(l, F(3), false);
	CHECK_INT(POS(l, "a"), ==, 3);
	CHECK_INT(EPOCHS(l, "a"), ==, 0);
	CHECK_STR(window(l, 0, 10), "f6 f7 f8 f9");
	/* the reader opens a file of the queued epoch: it takes over */
	lists_note_open(l, F(7), true);
	CHECK_INT(EPOCHS(l, "a"), ==, 1);
	CHECK_INT(FILES(l, "a"), ==, 4);
	CHECK_INT(NEXT(l, "a"), ==, 0);
	CHECK_INT(POS(l, "a"), ==, 2);
	CHECK_INT(value(l, "last_hit_ratio_permille", "a"), ==, 666);
	CHECK_INT(value(l, "hit_ratio_permille", "a"), ==, 1000);
	CHECK_STR(window(l, 0, 10), "f6 f8 f9");	/* f6 still to come */
	lists_destroy(l);
}

/* a loader that publishes the next epoch (same files, new order) while
 * the current one runs, like python/fusefs_prefetch.py */
static void test_shuffled_epochs_queued(void)
{
	struct lists *l = lists_create();

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\n", NULL), ==, 0);
	CHECK_INT(publish(l, "a", "f3\nf1\nf2\n", NULL), ==, 0);
	lists_note_open(l, F(1), true);
	lists_note_open(l, F(2), true);
	lists_note_open(l, F(3), true);
	CHECK_INT(POS(l, "a"), ==, 3);
	CHECK_INT(lists_next_use(l, F(3)), ==, 0);
	CHECK_INT(lists_next_use(l, F(2)), ==, 2);
	/* epoch 2 is published at the start of epoch 1: 1 becomes current */
	CHECK_INT(publish(l, "a", "f2\nf3\nf1\n", NULL), ==, 0);
	CHECK_INT(EPOCHS(l, "a"), ==, 1);
	CHECK_INT(POS(l, "a"), ==, 0);
	CHECK_INT(NEXT(l, "a"), ==, 3);
	CHECK_INT(value(l, "last_hit_ratio_permille", "a"), ==, 1000);
	lists_note_open(l, F(3), false);
	CHECK_INT(POS(l, "a"), ==, 1);
	CHECK_STR(window(l, 0, 10), "f1 f2 f2 f3 f1");
	CHECK_INT(lists_next_use(l, F(2)), ==, 1);
	lists_destroy(l);
}

/* a loader that publishes each epoch's order when the epoch starts */
static void test_publish_after_end(void)
{
	struct lists *l = lists_create();

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\n", NULL), ==, 0);
	lists_note_open(l, F(1), true);
	lists_note_open(l, F(2), true);
	lists_note_open(l, F(3), false);
	/* the epoch was read to its end: the new list is current at once */
	CHECK_INT(publish(l, "a", "f3\nf1\nf2\n", NULL), ==, 0);
	CHECK_INT(EPOCHS(l, "a"), ==, 1);
	CHECK_INT(FILES(l, "a"), ==, 3);
	CHECK_INT(NEXT(l, "a"), ==, 0);
	CHECK_INT(POS(l, "a"), ==, 0);
	CHECK_INT(value(l, "last_hit_ratio_permille", "a"), ==, 666);
	lists_note_open(l, F(3), true);
	CHECK_INT(POS(l, "a"), ==, 1);
	CHECK_STR(window(l, 0, 10), "f1 f2");
	CHECK_INT(lists_next_use(l, F(2)), ==, 1);
	lists_destroy(l);
}

static void test_positions_and_hits(void)
{
	struct lists *l = lists_create();
	char *text;

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\nf4\n", NULL), ==, 0);
	CHECK_INT(publish(l, "b", "f4\nf1\n", NULL), ==, 0);
	CHECK_INT(value(l, "hit_ratio_permille", "a"), ==, 0);
	CHECK_INT(value(l, "last_hit_ratio_permille", "a"), ==, -1);
	lists_note_open(l, F(1), true);		/* both lists have it */
	lists_note_open(l, F(3), false);	/* "a" jumps ahead */
	lists_note_open(l, F(2), true);		/* behind: stays at 3 */
	lists_note_open(l, F(99), true);	/* in no list */
	CHECK_INT(POS(l, "a"), ==, 3);
	CHECK_INT(POS(l, "b"), ==, 2);
	CHECK_INT(value(l, "hit_ratio_permille", "a"), ==, 666);
	CHECK_INT(value(l, "hit_ratio_permille", "b"), ==, 1000);
	text = text_of(l, "a");
	CHECK(strstr(text, "list a\nposition 3\nfiles 4\nnext_epoch_files 0\n"
		      "epochs_done 0\n") == text);
	CHECK(strstr(text, "\nhit_ratio 0.667\n") != NULL);
	free(text);
	text = text_of(l, "zz");
	CHECK_STR(text, "list zz: not published\n");
	free(text);
	/* lists_print() groups by key: every position line, then files... */
	text = text_of(l, NULL);
	CHECK(strstr(text, "list_position{list=\"a\"} 3\n"
		      "list_position{list=\"b\"} 2\nlist_files{list=\"a\"} 4\n")
	      == text);
	free(text);
	lists_destroy(l);
}

/* @ready: "fN fN" files on disk (the prefetcher's view) */
static void set_ready(struct lists *l, const char *ready)
{
	uint64_t fids[32];
	bool r[32];
	size_t n = 0;
	const char *p = ready;

	while (*p && n < 32) {
		fids[n] = F(strtoul(p + 1, (char **)&p, 10));
		r[n++] = true;
		while (*p == ' ')
			p++;
	}
	lists_set_ready(l, fids, r, n);
}

static void test_lead(void)
{
	struct lists *l = lists_create();

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\n", NULL), ==, 0);
	CHECK_INT(publish(l, "b", "f2\nf3\n", NULL), ==, 0);
	lists_note_open(l, F(1), true);
	/* both readers are at f2 now */
	set_ready(l, "f2 f3");
	CHECK_INT(value(l, "lead_files", "a"), ==, 2);
	CHECK_INT(value(l, "lead_bytes", "a"), ==, 3 + 4);
	CHECK_INT(value(l, "lead_files", "b"), ==, 2);
	/* each list its own run of ready files from its reader on */
	CHECK_INT(publish(l, "c", "f3\nf9\nf2\n", NULL), ==, 0);
	set_ready(l, "f3 f2");
	CHECK_INT(value(l, "lead_files", "a"), ==, 2);
	CHECK_INT(value(l, "lead_files", "c"), ==, 1);
	CHECK_INT(value(l, "lead_bytes", "c"), ==, 4);
	set_ready(l, "f3");
	CHECK_INT(value(l, "lead_files", "a"), ==, 0);
	CHECK_INT(value(l, "lead_files", "b"), ==, 0);
	CHECK_INT(value(l, "lead_files", "c"), ==, 1);
	lists_destroy(l);
}

/* @n files of the window past each list's ready mark, as "fN fN" */
static const char *ahead(struct lists *l)
{
	static char buf[256];
	uint64_t fids[16];
	size_t i, n = lists_window_ahead(l, fids, NULL, NULL, 0, 16, NULL, NULL), at = 0;

	buf[0] = '\0';
	for (i = 0; i < n; i++)
		at += snprintf(buf + at, sizeof(buf) - at, "%sf%llu", i ? " " : "",
			       (unsigned long long)(fids[i] - F(0)));
	return buf;
}

static void extend(struct lists *l, uint64_t f)
{
	bool yes = true;

	lists_extend_ready(l, &f, &yes, 1);
}

/* the incremental window: it starts where the files were last ready */
static void test_window_ahead(void)
{
	struct lists *l = lists_create();

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\nf4\nf5\n", NULL), ==, 0);
	CHECK_STR(ahead(l), "f1 f2 f3 f4 f5");
	set_ready(l, "f1 f2");
	CHECK_STR(ahead(l), "f3 f4 f5");
	CHECK_INT(value(l, "lead_files", "a"), ==, 2);
	CHECK_INT(value(l, "lead_bytes", "a"), ==, 2 + 3);
	lists_note_open(l, F(1), true);		/* the reader eats the lead */
	CHECK_INT(value(l, "lead_files", "a"), ==, 1);
	extend(l, F(3));
	CHECK_STR(ahead(l), "f4 f5");
	CHECK_INT(value(l, "lead_files", "a"), ==, 2);
	extend(l, F(5));			/* not after the mark: no move */
	CHECK_STR(ahead(l), "f4 f5");
	lists_note_open(l, F(2), true);
	lists_note_open(l, F(3), true);
	lists_note_open(l, F(5), false);	/* a little out of order */
	CHECK_INT(value(l, "lead_files", "a"), ==, 0);
	CHECK_STR(ahead(l), "f4");
	/* the reader jumps past the mark: the window starts at low */
	CHECK_INT(publish(l, "b", "f6\nf7\nf8\n", NULL), ==, 0);
	extend(l, F(6));
	CHECK_STR(ahead(l), "f4 f7 f8");
	lists_set_window(l, 1);
	lists_note_open(l, F(8), false);	/* f7 skipped */
	CHECK_STR(ahead(l), "f4");
	lists_set_window(l, LISTS_WINDOW_DEFAULT);
	/* the next epoch queued: the window goes on into it */
	CHECK_INT(publish(l, "a", "f4\nf1\n", NULL), ==, 0);
	CHECK_STR(ahead(l), "f4 f4 f1");
	extend(l, F(4));
	CHECK_STR(ahead(l), "f4 f1");
	/* a new order of the current epoch: its mark is gone */
	CHECK_INT(publish(l, "a", "# epoch 0\nf4\nf2\n", NULL), ==, 0);
	CHECK_STR(ahead(l), "f4 f4 f1");
	lists_destroy(l);
}

/* @set ("fN fN"): nothing left to do there (from each reader with @low) */
static void worked(struct lists *l, const char *set, bool low)
{
	uint64_t fids[32];
	size_t n = 0;
	const char *p = set;

	while (*p && n < 32) {
		fids[n++] = F(strtoul(p + 1, (char **)&p, 10));
		while (*p == ' ')
			p++;
	}
	lists_note_worked(l, fids, NULL, n, low);
}

/* where lists_window_ahead() jumped to a work mark, or -1; *@marks */
static int jumped_at(struct lists *l, size_t *marks)
{
	uint64_t fids[16];
	size_t jumped, m;

	lists_window_ahead(l, fids, NULL, NULL, 0, 16, marks ? marks : &m, &jumped);
	return jumped == SIZE_MAX ? -1 : (int)jumped;
}

/*
 * The work mark: past the file at its ready mark a list's window goes on
 * where the last round left nothing to do, so files staged or in flight
 * ahead are not looked at again by every round.
 */
static void test_work_mark(void)
{
	struct lists *l = lists_create();
	size_t marks;

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\nf4\nf5\nf6\nf7\n", NULL), ==, 0);
	set_ready(l, "f1");
	CHECK_STR(ahead(l), "f2 f3 f4 f5 f6 f7");
	CHECK_INT(jumped_at(l, NULL), ==, -1);
	worked(l, "f2 f3 f4", false);		/* staged, say */
	CHECK_STR(ahead(l), "f2 f5 f6 f7");	/* f2 is looked at again */
	CHECK_INT(jumped_at(l, NULL), ==, 1);
	worked(l, "f2 f5", false);		/* on from the work mark */
	CHECK_STR(ahead(l), "f2 f6 f7");
	worked(l, "f7", false);			/* not after the mark */
	CHECK_STR(ahead(l), "f2 f6 f7");
	/* the reader passes the ready mark: from low, then the work mark */
	lists_note_open(l, F(1), true);
	lists_note_open(l, F(2), false);
	CHECK_STR(ahead(l), "f3 f6 f7");
	/* a full round sets it from the reader on: it may move back */
	worked(l, "f3", true);
	CHECK_STR(ahead(l), "f3 f4 f5 f6 f7");
	CHECK_INT(jumped_at(l, NULL), ==, -1);
	/* two lists: each its own marks, round-robin */
	CHECK_INT(publish(l, "b", "f8\nf9\nf10\nf11\n", NULL), ==, 0);
	worked(l, "f3 f4 f5 f8 f9", true);
	CHECK_STR(ahead(l), "f3 f8 f6 f10 f7 f11");
	CHECK_INT(jumped_at(l, &marks), ==, 2);
	CHECK_INT(marks, ==, 2);		/* f3, f8: rechecked */
	/* into the queued epoch, and a new order of the current one */
	CHECK_INT(publish(l, "a", "f5\nf4\n", NULL), ==, 0);
	worked(l, "f6 f7 f5", false);
	CHECK_STR(ahead(l), "f3 f8 f4 f10 f11");
	CHECK_INT(publish(l, "a", "# epoch 0\nf3\nf5\nf6\n", NULL), ==, 0);
	CHECK_STR(ahead(l), "f3 f8 f5 f10 f6 f11 f5 f4");
	lists_destroy(l);

	/* a jump to the end: nothing after it, still a jump */
	l = lists_create();
	CHECK_INT(publish(l, "a", "# epoch 0\nf1\nf2\nf3\nf4\nf5\n", NULL),
		  ==, 0);
	worked(l, "f1 f2 f3 f4 f5", true);
	CHECK_STR(ahead(l), "f1");
	CHECK_INT(jumped_at(l, &marks), ==, 1);
	CHECK_INT(marks, ==, 1);
	/* a begin of the current epoch again (a restart): the marks go */
	worked(l, "f1 f2 f3", true);
	CHECK_STR(ahead(l), "f1 f4 f5");
	lists_note_open(l, F(1), true);
	lists_note_open(l, F(2), true);
	CHECK_STR(ahead(l), "f3 f4 f5");
	CHECK_INT(publish(l, "a", "# begin 0\n", NULL), ==, 0);
	CHECK_INT(POS(l, "a"), ==, 0);
	CHECK_STR(ahead(l), "f1 f2 f3 f4 f5");
	lists_destroy(l);
}

/* ---- the epoch protocol (docs/epochs.md) ---- */

static void test_headers(void)
{
	struct lists *l = lists_create();
	struct list_report rep;
	char *text = NULL;
	size_t len;
	FILE *f;

	CHECK_INT(publish(l, "a", "# epoch 3\n#begin 3 at 2\nf1\nf2\nf3\n"
			  "# epoch 4\n", &rep), ==, 0);
	CHECK_INT(rep.lines, ==, 6);
	CHECK_INT(rep.headers, ==, 2);
	CHECK_INT(rep.accepted, ==, 3);
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 1);	/* after a path */
	CHECK_INT(rep.first_line[LR_UNKNOWN], ==, 6);
	CHECK_INT(rep.epoch, ==, 3);
	CHECK(rep.begin);
	CHECK_INT(rep.begin_epoch, ==, 3);
	CHECK_INT(rep.begin_at, ==, 2);
	CHECK_INT(rep.outcome, ==, LO_CURRENT);
	CHECK_INT(rep.current, ==, 3);
	CHECK_INT(EPOCH(l, "a"), ==, 3);
	CHECK_INT(POS(l, "a"), ==, 2);		/* resumed at 2 */
	CHECK_STR(window(l, 0, 10), "f3");
	f = open_memstream(&text, &len);
	list_report_print(&rep, f);
	fclose(f);
	CHECK(strstr(text, "\nmax_file_bytes 4\nheaders 2\nlist_epoch 3\n"
		     "begin_epoch 3\nbegin_at 2\noutcome current\n"
		     "current_epoch 3\n") != NULL);
	free(text);
	/* not headers: paths (unknown here), so old lists keep working */
	CHECK_INT(publish(l, "b", "# epoch x\n", &rep), ==, -EINVAL);
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 1);
	CHECK_INT(publish(l, "b", "# epoch\n#epoch 1 2\n# begin 3 x\n"
			  "# begin 3 at\n# begin at 1 2\n#nope\n#\nf1\n", &rep),
		  ==, 0);
	CHECK_INT(rep.headers, ==, 0);
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 7);
	CHECK_INT(rep.epoch, ==, LIST_NO_EPOCH);
	CHECK(!rep.begin);
	/* a begin with paths that are all refused: nothing happens */
	CHECK_INT(publish(l, "d", "# begin 2\n\nnosuch\n", &rep), ==, -EINVAL);
	CHECK_INT(lists_count(l), ==, 2);
	CHECK_INT(publish(l, "d", "# begin 2\n\n\r\n", &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_BEGUN);
	CHECK_INT(lists_count(l), ==, 3);
	/* a number alone is no command: nothing to publish */
	CHECK_INT(publish(l, "c", "# epoch 5\n", &rep), ==, -EINVAL);
	CHECK_INT(rep.headers, ==, 1);
	CHECK_INT(lists_count(l), ==, 3);
	/* CRLF and blanks around the words; "begin at K" is the next epoch */
	CHECK_INT(publish(l, "c", "#\tepoch  9 \r\n# begin at 1\r\nf1\r\nf2\r\n",
			  &rep), ==, 0);
	CHECK_INT(rep.headers, ==, 2);
	CHECK_INT(rep.epoch, ==, 9);
	CHECK_INT(rep.begin_epoch, ==, 9);	/* the list's own */
	CHECK_INT(EPOCH(l, "c"), ==, 9);
	CHECK_INT(POS(l, "c"), ==, 1);
	lists_destroy(l);
}

static void test_numbered_queue(void)
{
	struct lists *l = lists_create();
	struct list_report rep;

	CHECK_INT(publish_range(l, "a", "# epoch 0\n", 0, 10, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_CURRENT);
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 10, 15, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_QUEUED);
	CHECK_INT(publish_range(l, "a", "# epoch 2\n", 20, 22, &rep), ==, 0);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	CHECK_INT(NEXTNO(l, "a"), ==, 1);
	CHECK_INT(NEXT(l, "a"), ==, 5);
	/* a third later epoch does not fit: refused, nothing changes */
	CHECK_INT(publish_range(l, "a", "# epoch 3\n", 30, 31, &rep), ==, -EBUSY);
	CHECK_INT(rep.outcome, ==, LO_QUEUE_FULL);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	/* the same number replaces the queued one */
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 10, 13, &rep), ==, 0);
	CHECK_INT(NEXT(l, "a"), ==, 3);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	/* the window runs through both queued epochs in order */
	open_range(l, 0, 9);
	CHECK_STR(window(l, 0, 10), "f9 f10 f11 f12 f20 f21");
	CHECK_INT(lists_next_use(l, F(21)), ==, 1 + 3 + 1);
	/* the same number as the current one: a new order, same progress */
	CHECK_INT(publish(l, "a", "# epoch 0\nf9\nf8\nf7\nf6\nf5\nf4\nf3\nf2\n"
			  "f1\nf0\n", &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_REPLACED);
	CHECK_INT(EPOCH(l, "a"), ==, 0);
	CHECK_INT(READ(l, "a"), ==, 9);
	CHECK_INT(LEFT(l, "a"), ==, 1);
	CHECK_INT(POS(l, "a"), ==, 10);
	CHECK_INT(LOW(l, "a"), ==, 0);
	CHECK_INT(lists_next_use(l, F(9)), ==, 0);	/* the one not read */
	CHECK_INT(lists_next_use(l, F(0)), ==, NEVER);	/* read; not queued */
	CHECK_INT(lists_next_use(l, F(10)), ==, 1);
	lists_destroy(l);
}

/* a publish refused (queue full, stale) with a begin: the begin is not
 * applied either, the reader's place stays where it was */
static void test_refused_begin_changes_nothing(void)
{
	struct lists *l = lists_create();
	struct list_report rep;

	CHECK_INT(publish_range(l, "a", "# epoch 5\n", 0, 10, NULL), ==, 0);
	CHECK_INT(publish_range(l, "a", "# epoch 6\n", 10, 20, NULL), ==, 0);
	CHECK_INT(publish_range(l, "a", "# epoch 7\n", 20, 30, NULL), ==, 0);
	open_range(l, 0, 8);
	CHECK_INT(POS(l, "a"), ==, 8);
	CHECK_INT(LOW(l, "a"), ==, 8);
	CHECK_INT(READ(l, "a"), ==, 8);
	/* the begin of 5 would restart it; 9 does not fit after 6 and 7 */
	CHECK_INT(publish_range(l, "a", "# epoch 9\n# begin 5 at 0\n", 30, 35,
				&rep), ==, -EBUSY);
	CHECK_INT(rep.outcome, ==, LO_QUEUE_FULL);
	CHECK_INT(rep.begin_epoch, ==, 5);
	CHECK_INT(rep.current, ==, 5);
	CHECK_INT(EPOCH(l, "a"), ==, 5);
	CHECK_INT(POS(l, "a"), ==, 8);
	CHECK_INT(LOW(l, "a"), ==, 8);
	CHECK_INT(READ(l, "a"), ==, 8);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	/* the begin of 6 would make it current; 4 is older: stale */
	CHECK_INT(publish_range(l, "a", "# epoch 4\n# begin 6\n", 30, 35, &rep),
		  ==, -ESTALE);
	CHECK_INT(rep.outcome, ==, LO_STALE);
	CHECK_INT(EPOCH(l, "a"), ==, 5);
	CHECK_INT(POS(l, "a"), ==, 8);
	CHECK_INT(READ(l, "a"), ==, 8);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	CHECK_INT(lists_next_use(l, F(8)), ==, 0);
	/* epoch 5 read to its end: a later publish would first advance to
	 * 6; 5 restarted by the begin, 9 still does not fit */
	open_range(l, 8, 10);
	CHECK_INT(publish_range(l, "a", "# epoch 9\n# begin 5 at 3\n", 30, 35,
				&rep), ==, -EBUSY);
	CHECK_INT(EPOCH(l, "a"), ==, 5);
	CHECK_INT(POS(l, "a"), ==, 10);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	/* accepted with its begin: both apply */
	CHECK_INT(publish_range(l, "a", "# epoch 6\n# begin 6 at 1\n", 10, 20,
				&rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_REPLACED);
	CHECK_INT(EPOCH(l, "a"), ==, 6);
	CHECK_INT(POS(l, "a"), ==, 1);
	CHECK_INT(QUEUED(l, "a"), ==, 1);
	lists_destroy(l);
}

/* DistributedSampler(drop_last) or a DataLoader dropping a tail: 90% */
static void test_drop_last_explicit_begin(void)
{
	struct lists *l = lists_create();
	struct list_report rep;

	CHECK_INT(publish_range(l, "a", "# epoch 0\n", 0, 100, NULL), ==, 0);
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 0, 100, NULL), ==, 0);
	open_range(l, 0, 90);
	CHECK_INT(EPOCHS(l, "a"), ==, 0);
	/* the old protocol replaced the queued epoch here; now it queues */
	CHECK_INT(publish_range(l, "a", "# epoch 2\n", 0, 100, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_QUEUED);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	/* the helper's set_epoch(1) */
	CHECK_INT(publish(l, "a", "# begin 1\n", &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_BEGUN);
	CHECK_INT(EPOCH(l, "a"), ==, 1);
	CHECK_INT(EPOCHS(l, "a"), ==, 1);
	CHECK_INT(POS(l, "a"), ==, 0);
	CHECK_INT(NEXTNO(l, "a"), ==, 2);
	CHECK_INT(value(l, "last_hit_ratio_permille", "a"), ==, 1000);
	/* epoch 0 ended at 90 of 100: so will epoch 1, f95 is epoch 2's */
	CHECK_INT(value(l, "expected_end", "a"), ==, 90);
	CHECK_INT(lists_next_use(l, F(95)), ==, 90 + 95);
	CHECK_INT(lists_next_use(l, F(85)), ==, 85);
	/* the same with lists_begin() and with "the next epoch" */
	open_range(l, 0, 50);
	CHECK_INT(lists_begin(l, "a", LIST_NO_EPOCH, 0), ==, 0);
	CHECK_INT(EPOCH(l, "a"), ==, 2);
	CHECK_INT(QUEUED(l, "a"), ==, 0);
	lists_destroy(l);
}

/*
 * Epochs end where the previous one did (limit_train_batches, max_steps):
 * the files past that point are needed in the next epoch, not this one,
 * until the reader goes past it; an epoch read to its end, a restart from
 * an older epoch and a new job forget it.
 */
static void test_learned_stop(void)
{
	struct lists *l = lists_create();

	CHECK_INT(publish_range(l, "a", "# epoch 0\n", 0, 100, NULL), ==, 0);
	CHECK_INT(value(l, "expected_end", "a"), ==, 100);
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 0, 100, NULL), ==, 0);
	open_range(l, 0, 90);
	CHECK_INT(publish(l, "a", "# begin 1\n", NULL), ==, 0);
	CHECK_INT(value(l, "expected_end", "a"), ==, 90);
	/* nothing queued: the tail has no known use, the window ends at it */
	CHECK_INT(lists_next_use(l, F(95)), ==, NEVER);
	same_many(l, 100);
	CHECK_STR(window(l, 88, 8), "f88 f89");
	CHECK_INT(publish_range(l, "a", "# epoch 2\n", 0, 100, NULL), ==, 0);
	CHECK_INT(lists_next_use(l, F(95)), ==, 90 + 95);
	same_many(l, 100);
	CHECK_STR(window(l, 88, 4), "f88 f89 f0 f1");
	/* the same fraction of another length */
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 0, 50, NULL), ==, 0);
	CHECK_INT(value(l, "expected_end", "a"), ==, 45);
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 0, 100, NULL), ==, 0);
	/* the reader goes past it: this epoch is read to its end after all */
	open_range(l, 0, 91);
	CHECK_INT(value(l, "expected_end", "a"), ==, 100);
	CHECK_INT(lists_next_use(l, F(95)), ==, 95 - 91);
	open_range(l, 91, 100);
	CHECK_INT(lists_begin(l, "a", 2, 0), ==, 0);
	CHECK_INT(value(l, "expected_end", "a"), ==, 100);
	/* epoch 2 stops at 30, then a restart from epoch 1's checkpoint */
	CHECK_INT(publish_range(l, "a", "# epoch 3\n", 0, 100, NULL), ==, 0);
	open_range(l, 0, 30);
	CHECK_INT(lists_begin(l, "a", 3, 0), ==, 0);
	CHECK_INT(value(l, "expected_end", "a"), ==, 30);
	open_range(l, 0, 20);
	CHECK_INT(lists_begin(l, "a", 1, 0), ==, 0);
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 0, 100, NULL), ==, 0);
	CHECK_INT(EPOCH(l, "a"), ==, 1);
	CHECK_INT(value(l, "expected_end", "a"), ==, 100);
	lists_destroy(l);
}

/* no begin: the reader's opens of the next epoch advance it */
static void test_drop_last_implicit(void)
{
	struct lists *l = lists_create();
	char *text;
	unsigned i;

	lists_set_window(l, 8);
	CHECK_INT(publish_range(l, "a", "# epoch 0\n", 0, 100, NULL), ==, 0);
	/* epoch 1 starts with f99, a file epoch 0 never got to */
	text = range_text("# epoch 1\nf99\n", 0, 99);
	CHECK_INT(publish(l, "a", text, NULL), ==, 0);
	free(text);
	open_range(l, 0, 90);
	CHECK_INT(LOW(l, "a"), ==, 90);
	/* unread in epoch 0 but outside its window, at the head of 1 */
	lists_note_open(l, F(99), true);
	CHECK_INT(EPOCH(l, "a"), ==, 1);
	CHECK_INT(EPOCHS(l, "a"), ==, 1);
	CHECK_INT(POS(l, "a"), ==, 1);
	lists_note_open(l, F(0), true);
	CHECK_INT(POS(l, "a"), ==, 2);
	/* a file read in the current epoch, at the queued one's head */
	CHECK_INT(publish_range(l, "a", "# epoch 2\n", 0, 100, NULL), ==, 0);
	for (i = 1; i < 90; i++)
		lists_note_open(l, F(i), true);
	lists_note_open(l, F(0), true);		/* read long ago: epoch 2 */
	CHECK_INT(EPOCH(l, "a"), ==, 2);
	CHECK_INT(POS(l, "a"), ==, 1);
	lists_destroy(l);
}

/*
 * review: a loader that publishes the next epoch's list without a number
 * at the start of each epoch (one ahead), with epochs that stop early
 * (drop_last): an unnumbered list took "current + 1" and replaced the
 * queue, so epoch 2's list replaced epoch 1's before its reader got
 * there.  An unnumbered list goes after the last epoch the list knows;
 * one that finds the queue full is refused (-EBUSY), never placed over
 * an epoch not yet begun.
 */
static void test_unnumbered_one_ahead(void)
{
	struct lists *l = lists_create();
	struct list_report rep;

	lists_set_window(l, 8);
	CHECK_INT(publish_range(l, "a", "", 0, 100, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_CURRENT);
	CHECK_INT(publish_range(l, "a", "", 100, 200, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_QUEUED);
	CHECK_INT(NEXTNO(l, "a"), ==, 1);
	open_range(l, 0, 90);			/* drop_last: 90 of 100 */
	/* epoch 1 starts: the loader publishes epoch 2's list first */
	CHECK_INT(publish_range(l, "a", "", 200, 300, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_QUEUED);
	CHECK_INT(EPOCH(l, "a"), ==, 0);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	CHECK_INT(NEXTNO(l, "a"), ==, 1);
	CHECK_STR(window(l, 10, 3), "f100 f101 f102");	/* epoch 1 still */
	/* its reader opens epoch 1's head: epoch 1, epoch 2 queued */
	lists_note_open(l, F(100), true);
	CHECK_INT(EPOCH(l, "a"), ==, 1);
	CHECK_INT(POS(l, "a"), ==, 1);
	CHECK_INT(NEXTNO(l, "a"), ==, 2);
	CHECK_INT(NEXT(l, "a"), ==, 100);
	open_range(l, 101, 190);
	CHECK_INT(publish_range(l, "a", "", 300, 400, &rep), ==, 0);
	lists_note_open(l, F(200), true);
	CHECK_INT(EPOCH(l, "a"), ==, 2);
	CHECK_INT(NEXTNO(l, "a"), ==, 3);
	/* a reader that never gets to the queued epochs: the queue fills,
	 * then a refusal that changes nothing */
	CHECK_INT(publish_range(l, "a", "", 400, 500, &rep), ==, 0);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	CHECK_INT(publish_range(l, "a", "", 500, 600, &rep), ==, -EBUSY);
	CHECK_INT(rep.outcome, ==, LO_QUEUE_FULL);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	CHECK_INT(NEXTNO(l, "a"), ==, 3);
	CHECK_INT(NEXT(l, "a"), ==, 100);
	CHECK_STR(window(l, 88, 3), "f289 f300 f301");	/* epoch 3 next */
	/* a begin in the same text: the begun epoch is current, the list
	 * goes after the last one queued */
	CHECK_INT(publish_range(l, "a", "# begin\n", 500, 600, &rep), ==, 0);
	CHECK_INT(rep.begin_epoch, ==, 3);
	CHECK_INT(EPOCH(l, "a"), ==, 3);
	CHECK_INT(NEXTNO(l, "a"), ==, 4);
	CHECK_INT(QUEUED(l, "a"), ==, 2);
	lists_destroy(l);
}

/* a crash and a restart mid-epoch, with and without the daemon's memory */
static void test_resume(void)
{
	struct lists *l = lists_create();
	struct list_report rep;
	char *text;

	CHECK_INT(publish_range(l, "a", "# epoch 2\n", 0, 10, NULL), ==, 0);
	CHECK_INT(publish_range(l, "a", "# epoch 3\n", 10, 20, NULL), ==, 0);
	open_range(l, 0, 6);
	/* the restarted helper republishes 2 and 3, then resumes at 4 */
	CHECK_INT(publish_range(l, "a", "# epoch 2\n", 0, 10, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_REPLACED);
	CHECK_INT(READ(l, "a"), ==, 6);
	CHECK_INT(publish_range(l, "a", "# epoch 3\n", 10, 20, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_QUEUED);
	CHECK_INT(publish(l, "a", "# begin 2 at 4\n", &rep), ==, 0);
	CHECK_INT(EPOCH(l, "a"), ==, 2);
	CHECK_INT(EPOCHS(l, "a"), ==, 0);		/* not a new epoch */
	CHECK_INT(POS(l, "a"), ==, 4);
	CHECK_INT(LOW(l, "a"), ==, 4);
	CHECK_INT(READ(l, "a"), ==, 0);
	CHECK_INT(lists_next_use(l, F(4)), ==, 0);
	CHECK_INT(lists_next_use(l, F(5)), ==, 1);	/* to be read again */
	CHECK_INT(lists_next_use(l, F(1)), ==, NEVER);	/* before the resume */
	CHECK_STR(window(l, 0, 3), "f4 f5 f6");
	/* a new helper process: begin and the list in one write */
	CHECK_INT(publish_range(l, "a", "# epoch 2\n# begin at 7\n", 0, 10, &rep),
		  ==, 0);
	CHECK_INT(rep.outcome, ==, LO_REPLACED);
	CHECK_INT(POS(l, "a"), ==, 7);
	CHECK_INT(LOW(l, "a"), ==, 7);
	CHECK_INT(lists_next_use(l, F(6)), ==, NEVER);
	CHECK_STR(window(l, 0, 3), "f7 f8 f9");
	/* a restart from an older checkpoint: back to epoch 1, then its list */
	CHECK_INT(lists_begin(l, "a", 1, 3), ==, 0);
	CHECK_INT(FILES(l, "a"), ==, 0);
	CHECK_INT(EPOCH(l, "a"), ==, 1);		/* waiting for it */
	CHECK_INT(QUEUED(l, "a"), ==, 0);		/* 3 was of the old run */
	CHECK_STR(window(l, 0, 10), "");
	CHECK_INT(lists_next_use(l, F(4)), ==, NEVER);
	text = text_of(l, "a");
	CHECK(strstr(text, "\nstate waiting\n") != NULL);
	free(text);
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 30, 36, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_CURRENT);
	CHECK_INT(POS(l, "a"), ==, 3);
	CHECK_STR(window(l, 0, 10), "f33 f34 f35");
	lists_destroy(l);
}

static void test_out_of_order_within_window(void)
{
	struct lists *l = lists_create();

	lists_set_window(l, 4);
	CHECK_INT(publish_range(l, "a", "# epoch 0\n", 0, 20, NULL), ==, 0);
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 20, 40, NULL), ==, 0);
	/* two workers: f1 before f0, f3 before f2 */
	lists_note_open(l, F(1), true);
	lists_note_open(l, F(3), true);
	CHECK_INT(POS(l, "a"), ==, 4);
	CHECK_INT(LOW(l, "a"), ==, 0);
	/* the files a slow worker is about to read are needed first */
	CHECK_INT(lists_next_use(l, F(0)), ==, 0);
	CHECK_INT(lists_next_use(l, F(2)), ==, 2);
	CHECK_INT(lists_next_use(l, F(4)), ==, 4);
	CHECK_INT(lists_next_use(l, F(3)), ==, NEVER);	/* no later epoch */
	CHECK_STR(window(l, 0, 4), "f0 f2 f4 f5");
	lists_note_open(l, F(0), true);
	lists_note_open(l, F(2), true);
	CHECK_INT(LOW(l, "a"), ==, 4);
	CHECK_INT(READ(l, "a"), ==, 4);
	CHECK_INT(LEFT(l, "a"), ==, 16);
	CHECK_INT(EPOCH(l, "a"), ==, 0);
	lists_destroy(l);
}

static void test_out_of_order_outside_window(void)
{
	struct lists *l = lists_create();

	lists_set_window(l, 4);
	CHECK_INT(publish_range(l, "a", "# epoch 0\n", 0, 20, NULL), ==, 0);
	CHECK_INT(publish_range(l, "a", "# epoch 1\n", 0, 20, NULL), ==, 0);
	lists_note_open(l, F(0), true);
	/* f10 is 9 ahead of f1, the window 4: a jump; f1..f6 are skipped */
	lists_note_open(l, F(10), true);
	CHECK_INT(POS(l, "a"), ==, 11);
	CHECK_INT(LOW(l, "a"), ==, 7);
	CHECK_INT(lists_next_use(l, F(7)), ==, 0);
	CHECK_INT(lists_next_use(l, F(3)), ==, 20 - 7 - 1 + 3);	/* epoch 1 */
	CHECK_STR(window(l, 0, 5), "f7 f8 f9 f11 f12");
	CHECK_INT(LEFT(l, "a"), ==, 12);
	/* a skipped file opened later, far from epoch 1's head: nothing */
	lists_note_open(l, F(5), true);
	CHECK_INT(EPOCH(l, "a"), ==, 0);
	CHECK_INT(LOW(l, "a"), ==, 7);
	/* f0, read long ago, at the head of epoch 1: the next pass */
	lists_note_open(l, F(0), true);
	CHECK_INT(EPOCH(l, "a"), ==, 1);
	CHECK_INT(POS(l, "a"), ==, 1);
	lists_destroy(l);
}

/* re-opening a file just read is not a new epoch */
static void test_repeat_open(void)
{
	struct lists *l = lists_create();

	CHECK_INT(publish_range(l, "a", "# epoch 0\n", 0, 20, NULL), ==, 0);
	CHECK_INT(publish(l, "a", "# epoch 1\nf3\nf0\nf1\n", NULL), ==, 0);
	open_range(l, 0, 4);
	lists_note_open(l, F(3), true);
	lists_note_open(l, F(3), true);
	CHECK_INT(EPOCH(l, "a"), ==, 0);
	CHECK_INT(READ(l, "a"), ==, 4);
	CHECK_INT(value(l, "hit_ratio_permille", "a"), ==, 1000);
	lists_destroy(l);
}

/* the previous epoch's files still with slow workers at the boundary */
static void test_stragglers(void)
{
	struct lists *l = lists_create();

	lists_set_window(l, 8);
	CHECK_INT(publish_range(l, "a", "# epoch 0\n", 0, 20, NULL), ==, 0);
	CHECK_INT(publish(l, "a", "# epoch 1\nf5\nf17\nf6\nf7\n", NULL), ==, 0);
	open_range(l, 0, 17);
	open_range(l, 18, 20);			/* f17 is late */
	CHECK_INT(LOW(l, "a"), ==, 17);
	lists_note_open(l, F(5), true);		/* epoch 1 starts */
	CHECK_INT(EPOCH(l, "a"), ==, 1);
	CHECK_INT(READ(l, "a"), ==, 1);
	lists_note_open(l, F(17), false);	/* epoch 0's, not epoch 1's */
	CHECK_INT(READ(l, "a"), ==, 1);
	CHECK_INT(lists_next_use(l, F(17)), ==, 0);
	lists_note_open(l, F(17), false);	/* now epoch 1's */
	CHECK_INT(READ(l, "a"), ==, 2);
	CHECK_INT(value(l, "hit_ratio_permille", "a"), ==, 500);
	lists_destroy(l);
}

static void test_stale_publish(void)
{
	struct lists *l = lists_create();
	struct list_report rep;
	char *text;

	CHECK_INT(publish_range(l, "a", "# epoch 3\n", 0, 5, NULL), ==, 0);
	CHECK_INT(publish_range(l, "a", "# epoch 4\n", 5, 10, NULL), ==, 0);
	lists_note_open(l, F(0), true);
	/* a late writer of epoch 2: refused, nothing changes */
	CHECK_INT(publish_range(l, "a", "# epoch 2\n", 10, 20, &rep), ==, -ESTALE);
	CHECK_INT(rep.accepted, ==, 10);
	CHECK_INT(rep.outcome, ==, LO_STALE);
	CHECK_INT(rep.current, ==, 3);
	CHECK_INT(EPOCH(l, "a"), ==, 3);
	CHECK_INT(POS(l, "a"), ==, 1);
	CHECK_INT(NEXTNO(l, "a"), ==, 4);
	CHECK_INT(NEXT(l, "a"), ==, 5);
	text = text_of(l, "a");
	CHECK(strstr(text, "\noutcome stale\ncurrent_epoch 3\n") != NULL);
	free(text);
	/* after the begin of epoch 4, 3 is stale too */
	CHECK_INT(lists_begin(l, "a", 4, 0), ==, 0);
	CHECK_INT(publish_range(l, "a", "# epoch 3\n", 0, 5, NULL), ==, -ESTALE);
	CHECK_INT(EPOCH(l, "a"), ==, 4);
	/* unnumbered lists are never stale: the epoch after the current */
	CHECK_INT(publish_range(l, "a", "", 0, 3, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_QUEUED);
	CHECK_INT(NEXTNO(l, "a"), ==, 5);
	lists_destroy(l);
}

static uint64_t fake_ms;

static uint64_t fake_clock(void *arg)
{
	return fake_ms;
}

/* two ranks on one mount, each list its own reader; the files of one
 * rank's epoch are in the other rank's next epoch */
static void test_two_lists(void)
{
	struct lists *l = lists_create();
	char *text;

	lists_set_window(l, 4);
	CHECK_INT(publish_range(l, "rank0", "# epoch 0\n", 0, 10, NULL), ==, 0);
	CHECK_INT(publish_range(l, "rank1", "# epoch 0\n", 10, 20, NULL), ==, 0);
	CHECK_INT(publish_range(l, "rank0", "# epoch 1\n", 10, 20, NULL), ==, 0);
	CHECK_INT(publish_range(l, "rank1", "# epoch 1\n", 0, 10, NULL), ==, 0);
	lists_note_open(l, F(10), true);	/* rank 1's, at rank 0's head */
	lists_note_open(l, F(0), false);
	lists_note_open(l, F(11), true);
	CHECK_INT(EPOCH(l, "rank0"), ==, 0);
	CHECK_INT(EPOCH(l, "rank1"), ==, 0);
	CHECK_INT(POS(l, "rank0"), ==, 1);
	CHECK_INT(POS(l, "rank1"), ==, 2);
	CHECK_INT(value(l, "hit_ratio_permille", "rank0"), ==, 0);
	CHECK_INT(value(l, "hit_ratio_permille", "rank1"), ==, 1000);
	/* the soonest over the lists */
	CHECK_INT(lists_next_use(l, F(12)), ==, 0);	/* rank 1 now */
	CHECK_INT(lists_next_use(l, F(1)), ==, 0);	/* rank 0 now */
	CHECK_INT(lists_next_use(l, F(0)), ==, 8 + 0);	/* rank 1, next */
	CHECK_INT(lists_next_use(l, F(10)), ==, 9 + 0);	/* rank 0, next */
	same_many(l, 20);
	CHECK_STR(window(l, 0, 4), "f1 f12 f2 f13");
	open_range(l, 1, 4);
	CHECK_INT(POS(l, "rank0"), ==, 4);
	/* rank 1 starts epoch 1 first: only rank 1 moves */
	CHECK_INT(lists_begin(l, "rank1", 1, 0), ==, 0);
	lists_note_open(l, F(1), true);		/* rank 1: in epoch 1 */
	CHECK_INT(EPOCH(l, "rank0"), ==, 0);
	CHECK_INT(POS(l, "rank0"), ==, 4);
	CHECK_INT(READ(l, "rank0"), ==, 4);
	CHECK_INT(EPOCH(l, "rank1"), ==, 1);
	CHECK_INT(POS(l, "rank1"), ==, 2);
	same_many(l, 20);
	text = text_of(l, NULL);
	CHECK(strstr(text, "list_epoch{list=\"rank0\"} 0\n"
		     "list_epoch{list=\"rank1\"} 1\n") != NULL);
	free(text);
	lists_destroy(l);
}

/*
 * A full table: a new name takes the place of the list idle the longest
 * (a long-lived mount that sees a name per job would otherwise refuse
 * every name past the 64th until a remount); -ENOSPC only while no list
 * is idle.  lists_room() counts only lists in use.
 */
static void test_idle_list_gives_its_place(void)
{
	struct lists *l = lists_create();
	char name[LIST_NAME_MAX], *text;
	unsigned i;

	fake_ms = 1000;
	lists_set_clock(l, fake_clock, NULL);
	lists_set_idle(l, 10);
	for (i = 0; i < LISTS_MAX; i++) {
		snprintf(name, sizeof(name), "r%u", i);
		CHECK_INT(publish(l, name, "f1\n", NULL), ==, 0);
	}
	fake_ms += 5000;
	for (i = 0; i < LISTS_MAX; i++) {	/* all but r7 and r20 in use */
		snprintf(name, sizeof(name), "r%u", i);
		if (i != 7 && i != 20)
			CHECK_INT(publish(l, name, "f2\n", NULL), ==, 0);
	}
	fake_ms += 6000;			/* r7, r20 idle for 11 s */
	CHECK(!lists_room(l, "new1", 8));	/* 62 in use: the reserve */
	CHECK(lists_room(l, "r1", 8));		/* an existing name */
	CHECK(lists_room(l, "new1", 1));
	CHECK_INT(publish(l, "new1", "f3\n", NULL), ==, 0);
	CHECK_INT(publish(l, "new2", "f3\n", NULL), ==, 0);
	CHECK_INT(lists_count(l), ==, LISTS_MAX);
	CHECK_INT(publish(l, "new3", "f3\n", NULL), ==, -ENOSPC);
	text = text_of(l, "r7");
	CHECK(strstr(text, "not published") != NULL);
	free(text);
	text = text_of(l, "r20");
	CHECK(strstr(text, "not published") != NULL);
	free(text);
	text = text_of(l, "r21");		/* the others are kept */
	CHECK(strstr(text, "not published") == NULL);
	free(text);
	fake_ms += 11000;			/* every list idle */
	CHECK(lists_room(l, "new4", 8));
	CHECK_INT(publish(l, "new4", "f3\n", NULL), ==, 0);
	lists_destroy(l);
}

/* a list whose reader stopped stops holding cache space */
static void test_idle_list(void)
{
	struct lists *l = lists_create();
	char *text;

	fake_ms = 1000;
	lists_set_clock(l, fake_clock, NULL);
	lists_set_idle(l, 10);
	CHECK(!lists_known(l));			/* no list: no use known */
	CHECK_INT(publish_range(l, "a", "# epoch 0\n", 0, 10, NULL), ==, 0);
	CHECK(lists_known(l));
	CHECK_INT(publish_range(l, "b", "# epoch 0\n", 10, 20, NULL), ==, 0);
	fake_ms += 6000;
	lists_note_open(l, F(0), true);
	lists_note_open(l, F(10), true);
	fake_ms += 6000;
	lists_note_open(l, F(1), true);		/* only a's reader goes on */
	CHECK_INT(IDLE(l, "b"), ==, 0);
	fake_ms += 4500;
	CHECK_INT(IDLE(l, "a"), ==, 0);
	CHECK_INT(IDLE(l, "b"), ==, 1);
	CHECK_INT(lists_next_use(l, F(11)), ==, NEVER);
	CHECK_INT(lists_next_use(l, F(2)), ==, 0);
	CHECK_STR(window(l, 0, 3), "f2 f3 f4");
	text = text_of(l, "b");
	CHECK(strstr(text, "\nstate idle\n") != NULL);
	CHECK(strstr(text, "\nidle_seconds 10\n") != NULL);
	free(text);
	CHECK(lists_known(l));			/* a is active */
	same_many(l, 20);			/* b idle: a's uses alone */
	fake_ms += 11000;
	CHECK(!lists_known(l));			/* both idle */
	CHECK_INT(lists_next_use(l, F(2)), ==, NEVER);
	/* its reader is back */
	lists_note_open(l, F(11), true);
	CHECK_INT(IDLE(l, "b"), ==, 0);
	CHECK(lists_known(l));
	CHECK_INT(lists_next_use(l, F(12)), ==, 0);
	/* an idle list may start over at a lower number (a new job) */
	fake_ms += 20000;
	CHECK_INT(publish_range(l, "b", "# epoch 0\n", 10, 20, NULL), ==, 0);
	CHECK_INT(lists_begin(l, "b", 5, 0), ==, 0);
	fake_ms += 20000;
	CHECK_INT(publish_range(l, "b", "# epoch 0\n", 10, 15, NULL), ==, 0);
	CHECK_INT(EPOCH(l, "b"), ==, 0);
	CHECK_INT(FILES(l, "b"), ==, 5);
	/* ... or at the same number: not the old run's progress either */
	lists_note_open(l, F(10), true);
	lists_note_open(l, F(11), true);
	CHECK_INT(READ(l, "b"), ==, 2);
	CHECK_INT(publish_range(l, "b", "# epoch 1\n", 10, 15, NULL), ==, 0);
	fake_ms += 20000;
	CHECK_INT(publish_range(l, "b", "# epoch 0\n", 10, 15, NULL), ==, 0);
	CHECK_INT(EPOCH(l, "b"), ==, 0);
	CHECK_INT(READ(l, "b"), ==, 0);
	CHECK_INT(POS(l, "b"), ==, 0);
	CHECK_INT(QUEUED(l, "b"), ==, 0);	/* the old run's epoch 1 */
	CHECK_INT(lists_next_use(l, F(10)), ==, 0);
	/* while active, the same number keeps what was read */
	lists_note_open(l, F(10), true);
	CHECK_INT(publish_range(l, "b", "# epoch 0\n", 10, 15, NULL), ==, 0);
	CHECK_INT(READ(l, "b"), ==, 1);
	/* and an idle list's begin with the same number resumes where told */
	fake_ms += 20000;
	CHECK_INT(publish_range(l, "b", "# epoch 0\n# begin 0 at 3\n", 10, 15,
				NULL), ==, 0);
	CHECK_INT(POS(l, "b"), ==, 3);
	/* 0: never idle */
	lists_set_idle(l, 0);
	fake_ms += 1000000;
	CHECK_INT(IDLE(l, "a"), ==, 0);
	lists_destroy(l);
}

static void test_begin_creates_waiting_list(void)
{
	struct lists *l = lists_create();
	struct list_report rep;

	/* the helper's first set_epoch(0): begin, then publish */
	CHECK_INT(publish(l, "r", "# begin 0\n", &rep), ==, 0);
	CHECK_INT(lists_count(l), ==, 1);
	CHECK_INT(EPOCH(l, "r"), ==, 0);
	CHECK_INT(FILES(l, "r"), ==, 0);
	CHECK_INT(publish_range(l, "r", "# epoch 1\n", 5, 8, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_QUEUED);	/* after the awaited 0 */
	CHECK_INT(lists_next_use(l, F(6)), ==, 1);
	CHECK_INT(publish_range(l, "r", "# epoch 0\n", 0, 5, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_CURRENT);
	CHECK_INT(NEXTNO(l, "r"), ==, 1);
	CHECK_INT(lists_next_use(l, F(6)), ==, 5 + 1);
	/* bad names and numbers */
	CHECK_INT(lists_begin(l, ".x", 0, 0), ==, -EINVAL);
	CHECK_INT(lists_begin(l, "r", -2, 0), ==, -EINVAL);
	CHECK_INT(lists_begin(l, "r", LIST_EPOCH_MAX, 0), ==, -EINVAL);
	lists_destroy(l);
}

static void test_range_lines(void)
{
	struct lists *l0 = lists_create(), *l = lists_create();
	struct list_report rep;
	struct ranges *rg;
	uint64_t fids[8], k0, k1;
	const char *text = "f99999\t0\t8196\n"	/* ranges of 100,000 bytes */
			   "f99999\t50000\t8196\n"
			   "f99999\t0\t8196\n"	/* again: a duplicate */
			   "f99999\t99990\t11\n"	/* past the end */
			   "f99999\t10\t0\n"		/* empty */
			   "f5\n"			/* a whole file between */
			   "d3\t0\t1\n"		/* a directory */
			   "f7\t5\t9\n"		/* past the end of 8 */
			   "f8\t-1\t2\n";		/* not a number: no file */

	CHECK_INT(ranges_create(&rg), ==, 0);
	/* without a table, the same lines are paths of no file */
	CHECK_INT(publish(l0, "r", text, &rep), ==, 0);
	CHECK_INT(rep.accepted, ==, 1);
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 8);
	lists_destroy(l0);
	lists_set_ranges(l, rg);
	CHECK_INT(publish(l, "r", text, &rep), ==, 0);
	CHECK_INT(rep.accepted, ==, 3);
	CHECK_INT(rep.rejected[LR_DUPLICATE], ==, 1);
	CHECK_INT(rep.rejected[LR_RANGE], ==, 3);
	CHECK_INT(rep.first_line[LR_RANGE], ==, 4);
	CHECK_INT(rep.rejected[LR_DIRECTORY], ==, 1);
	CHECK_INT(rep.rejected[LR_UNKNOWN], ==, 1);
	CHECK_INT(rep.bytes, ==, 2 * 8196 + 6);
	CHECK_INT(ranges_count(rg), ==, 2);
	CHECK_INT(ranges_intern(rg, F(99999), 0, 8196, &k0), ==, 0);
	CHECK_INT(ranges_intern(rg, F(99999), 50000, 8196, &k1), ==, 0);
	/* the window names the ranges by their keys, in list order */
	CHECK_INT(lists_window(l, 0, fids, NULL, NULL, 0, 8), ==, 3);
	CHECK(fids[0] == k0 && fids[1] == k1 && fids[2] == F(5));
	CHECK_INT(lists_next_use_bytes(l, k1, NULL), ==, 8196);
	/* a read of the second range is its open */
	CHECK(lists_note_reads(l, &k1, 1, false));
	CHECK_INT(lists_window(l, 0, fids, NULL, NULL, 0, 8), ==, 2);
	CHECK(fids[0] == k0 && fids[1] == F(5));
	lists_destroy(l);
	ranges_destroy(rg);
}

/* a file listed by ranges is next used where its first unread range is,
 * in the current epoch or a queued one, and a read of one of its ranges
 * moves its use (lists_reads() names the file) */
static void test_a_file_of_ranges_has_a_next_use(void)
{
	struct lists *l = lists_create();
	struct future_sync s0, s1;
	struct ranges *rg;
	uint64_t k[3], fids[8], after;
	long n, i;
	bool named = false;

	CHECK_INT(ranges_create(&rg), ==, 0);
	lists_set_ranges(l, rg);
	CHECK_INT(publish(l, "r", "# epoch 0\n"
				  "f99999\t0\t100\n"
				  "f5\n"
				  "f99999\t5000\t100\n"
				  "f99998\t0\t100\n", NULL), ==, 0);
	CHECK_INT(publish(l, "r", "# epoch 1\n"
				  "f3\n"
				  "f99999\t5000\t100\n", NULL), ==, 0);
	CHECK_INT(ranges_intern(rg, F(99999), 0, 100, &k[0]), ==, 0);
	CHECK_INT(ranges_intern(rg, F(99999), 5000, 100, &k[1]), ==, 0);
	CHECK_INT(ranges_intern(rg, F(99998), 0, 100, &k[2]), ==, 0);
	/* without ranges in the lists, neither file would be known; the use
	 * after the coming one is the file's next range, in the same epoch */
	CHECK_INT(lists_next_use_bytes(l, F(99999), &after), ==, 0);
	CHECK_INT(after, ==, 100 + 6);
	CHECK_INT(lists_next_use_bytes(l, F(99998), NULL), ==, 100 + 6 + 100);
	CHECK(lists_next_use_bytes(l, F(7), NULL) == UINT64_MAX);
	lists_sync(l, &s0);
	CHECK(lists_note_reads(l, &k[0], 1, false));
	/* its next range: after f5 */
	CHECK_INT(lists_next_use_bytes(l, F(99999), NULL), ==, 6);
	lists_sync(l, &s1);
	n = lists_reads(l, s0.reads, s1.reads, fids, 8);
	for (i = 0; i < n; i++)
		named |= fids[i] == F(99999);
	CHECK(n > 0 && named);
	CHECK_INT(lists_next_use_bytes(l, F(99999), &after), ==, 6);
	CHECK_INT(after, ==, 6 + 100 + 100 + 4);	/* the queued epoch's */
	CHECK(lists_note_reads(l, &k[1], 1, false));
	/* the current epoch has no more: the queued one's range, after the
	 * rest of this epoch (f5, read range k1, f99998's range) and f3 */
	CHECK_INT(lists_next_use_bytes(l, F(99999), NULL), ==,
		  6 + 100 + 100 + 4);
	lists_destroy(l);
	ranges_destroy(rg);
}

/* one read of the kernel's read-around touches ranges far apart in the
 * list: only those in order count, and a jump goes to the first */
static void test_a_read_over_many_ranges(void)
{
	struct lists *l = lists_create();
	struct ranges *rg;
	char text[512];
	uint64_t k[20], fids[32], two[2];
	size_t at = 0, n;
	unsigned i;

	CHECK_INT(ranges_create(&rg), ==, 0);
	lists_set_ranges(l, rg);
	lists_set_window(l, 4);
	for (i = 0; i < 20; i++)
		at += snprintf(text + at, sizeof(text) - at,
			       "f99999\t%u\t100\n", i * 1000);
	CHECK_INT(publish(l, "r", text, NULL), ==, 0);
	for (i = 0; i < 20; i++)
		CHECK_INT(ranges_intern(rg, F(99999), i * 1000, 100, &k[i]),
			  ==, 0);
	two[0] = k[15];		/* far ahead: not a jump beside ... */
	two[1] = k[0];		/* ... the range the reader is at */
	CHECK(lists_note_reads(l, two, 2, false));
	n = lists_window(l, 0, fids, NULL, NULL, 0, 32);
	CHECK_INT(n, ==, 19);
	CHECK(fids[0] == k[1] && fids[14] == k[15]);
	two[0] = k[15];		/* both beyond the window: a jump to k[12] */
	two[1] = k[12];
	CHECK(lists_note_reads(l, two, 2, false));
	n = lists_window(l, 0, fids, NULL, NULL, 0, 32);
	CHECK(n >= 1 && n < 19);
	for (i = 0; i < n; i++)
		CHECK(fids[i] != k[12] && fids[i] != k[1]);
	lists_destroy(l);
	ranges_destroy(rg);
}

int main(void)
{
	runner_name = "test_lists";
	TEST(test_parse_good);
	TEST(test_parse_rejects);
	TEST(test_parse_nul_form);
	TEST(test_report_text);
	TEST(test_all_bad_changes_nothing);
	TEST(test_crlf_and_blank_lines);
	TEST(test_long_lines);
	TEST(test_large_list);
	TEST(test_names);
	TEST(test_next_use);
	TEST(test_next_use_bytes);
	TEST(test_window);
	TEST(test_window_start);
	TEST(test_advance_on_open);
	TEST(test_shuffled_epochs_queued);
	TEST(test_publish_after_end);
	TEST(test_positions_and_hits);
	TEST(test_lead);
	TEST(test_window_ahead);
	TEST(test_work_mark);
	TEST(test_headers);
	TEST(test_numbered_queue);
	TEST(test_refused_begin_changes_nothing);
	TEST(test_drop_last_explicit_begin);
	TEST(test_learned_stop);
	TEST(test_drop_last_implicit);
	TEST(test_unnumbered_one_ahead);
	TEST(test_resume);
	TEST(test_out_of_order_within_window);
	TEST(test_out_of_order_outside_window);
	TEST(test_repeat_open);
	TEST(test_stragglers);
	TEST(test_stale_publish);
	TEST(test_two_lists);
	TEST(test_idle_list);
	TEST(test_idle_list_gives_its_place);
	TEST(test_begin_creates_waiting_list);
	TEST(test_range_lines);
	TEST(test_a_read_over_many_ranges);
	TEST(test_a_file_of_ranges_has_a_next_use);
	return runner_done();
}
