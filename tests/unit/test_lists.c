// SPDX-License-Identifier: MIT
/*
 * lists.c: parsing a published list (every reject reason counted, CRLF,
 * blank and very long lines, duplicates, a large list, a list with no
 * usable line changing nothing), list names and the LISTS_MAX limit,
 * next use, the prefetch window, epochs (a queued list taking over when
 * the reader gets to it or when the current one was read to its end),
 * the reader's position, hit ratios and leads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lists.h"
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

/* the window as "fN fN ..." ("?" for an id outside the fake mount) */
static const char *window(struct lists *l, size_t skip, size_t max)
{
	static char out[256];
	uint64_t fids[32];
	size_t i, n, o = 0;

	n = lists_window(l, skip, fids, max < 32 ? max : 32);
	out[0] = '\0';
	for (i = 0; i < n && o < sizeof(out) - 16; i++)
		o += snprintf(out + o, sizeof(out) - o, "%sf%llu", i ? " " : "",
			      (unsigned long long)(fids[i] - F(0)));
	return out;
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

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\n", NULL), ==, 0);
	lists_note_open(l, F(1), true);
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
	CHECK_INT(lists_window(l, n - 2, fids, 4), ==, 2);
	CHECK_INT(fids[0], ==, F(n - 2));
	CHECK_INT(fids[1], ==, F(n - 1));
	lists_note_open(l, F(150000), true);
	CHECK_INT(POS(l, "big"), ==, 150001);
	CHECK_INT(lists_next_use(l, F(199999)), ==, 49998);
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
	/* from each reader's position on, into the queued epoch */
	CHECK_INT(publish(l, "a", "f4\nf5\n", NULL), ==, 0);
	lists_note_open(l, F(2), false);
	CHECK_STR(window(l, 0, 10), "f3 f10 f4 f11 f5");
	CHECK_STR(window(l, 2, 10), "f5");
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
	/* ... and the newest queued list wins */
	CHECK_INT(publish(l, "a", "f6\nf7\nf8\nf9\n", NULL), ==, 0);
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
	CHECK_STR(window(l, 0, 10), "f8 f9");
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

static void test_lead(void)
{
	struct lists *l = lists_create();

	CHECK_INT(publish(l, "a", "f1\nf2\nf3\n", NULL), ==, 0);
	CHECK_INT(publish(l, "b", "f2\nf3\n", NULL), ==, 0);
	lists_note_open(l, F(1), true);
	/* both readers are at f2 now */
	lists_set_lead(l, F(2), 2, 7);
	CHECK_INT(value(l, "lead_files", "a"), ==, 2);
	CHECK_INT(value(l, "lead_bytes", "a"), ==, 7);
	CHECK_INT(value(l, "lead_files", "b"), ==, 2);
	/* a report for another position leaves a list alone */
	lists_note_open(l, F(2), true);
	lists_set_lead(l, F(3), 1, 4);
	CHECK_INT(value(l, "lead_files", "a"), ==, 1);
	CHECK_INT(value(l, "lead_files", "b"), ==, 1);
	lists_set_lead(l, F(1), 9, 9);
	CHECK_INT(value(l, "lead_files", "a"), ==, 1);
	CHECK_INT(value(l, "lead_bytes", "b"), ==, 4);
	lists_destroy(l);
}

int main(void)
{
	runner_name = "test_lists";
	TEST(test_parse_good);
	TEST(test_parse_rejects);
	TEST(test_report_text);
	TEST(test_all_bad_changes_nothing);
	TEST(test_crlf_and_blank_lines);
	TEST(test_long_lines);
	TEST(test_large_list);
	TEST(test_names);
	TEST(test_next_use);
	TEST(test_window);
	TEST(test_advance_on_open);
	TEST(test_shuffled_epochs_queued);
	TEST(test_publish_after_end);
	TEST(test_positions_and_hits);
	TEST(test_lead);
	return runner_done();
}
