// SPDX-License-Identifier: MIT
/*
 * s3walk.c: a listing split over parallel streams delivers every key of
 * a fake bucket exactly once, on the calling thread, whatever the number
 * of streams; delimiter listings down to the split depth only; a common
 * prefix outside its parent and an error of either side stop the walk.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "compiler.h"
#include "runner.h"
#include "s3walk.h"

#define NKEYS	3000
#define PAGE	100

static char keys[NKEYS][32];
static int nkeys;

static int cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* ds/top-N, ds/dD/fN, ds/dD/sS/fN: sorted as S3 lists them */
static void make_keys(void)
{
	int i;

	for (i = 0; i < NKEYS; i++) {
		if (i % 10 == 0)
			snprintf(keys[i], sizeof(keys[i]), "ds/top-%04d", i);
		else if (i % 3)
			snprintf(keys[i], sizeof(keys[i]), "ds/d%02d/f%04d",
				 i % 17, i);
		else
			snprintf(keys[i], sizeof(keys[i]), "ds/d%02d/s%d/f%04d",
				 i % 17, i % 5, i);
	}
	nkeys = NKEYS;
	qsort(keys, nkeys, sizeof(keys[0]), cmp);
}

struct fake {
	int delimited, plain;		/* listings of each kind */
	bool hostile;			/* a common prefix outside its parent */
	bool nul;			/* and one with a NUL byte at the root */
	pthread_mutex_t lock;
};

/* ListObjectsV2 over keys[], pages of PAGE entries */
static int fake_list(void *arg, struct s3walk *w, const char *prefix,
		     size_t plen, bool delimit)
{
	struct fake *f = arg;
	char last[32] = "";
	int i, n = 0, rc = 0;

	pthread_mutex_lock(&f->lock);
	if (delimit)
		f->delimited++;
	else
		f->plain++;
	pthread_mutex_unlock(&f->lock);
	if (f->hostile && delimit)
		return s3walk_sub(w, prefix, plen, "elsewhere/", 10);
	if (f->nul && plen == 3 && (rc = s3walk_sub(w, prefix, plen,
						    "ds/n\0ul/", 8)))
		return rc;
	for (i = 0; i < nkeys && !rc; i++) {
		const char *k = keys[i], *slash;
		struct ns_attr a = { .size = (uint64_t)i };

		if (strncmp(k, prefix, plen))
			continue;
		slash = delimit ? strchr(k + plen, '/') : NULL;
		if (slash) {
			size_t len = slash - k + 1;

			if (strlen(last) == len && !strncmp(last, k, len))
				continue;	/* the same common prefix */
			memcpy(last, k, len);
			last[len] = '\0';
			rc = s3walk_sub(w, prefix, plen, k, len);
		} else {
			rc = s3walk_key(w, k, strlen(k), &a);
		}
		if (!rc && ++n % PAGE == 0)
			rc = s3walk_page_end(w);
	}
	return rc ? rc : s3walk_page_end(w);
}

struct got {
	int count[NKEYS];
	int total;
	int stop_after;			/* > 0: -EIO at that key */
	bool wrong_thread;
	pthread_t self;
};

static int got_key(void *arg, const char *key, size_t len,
		   const struct ns_attr *a)
{
	struct got *g = arg;

	if (!pthread_equal(pthread_self(), g->self))
		g->wrong_thread = true;
	if (a->size >= NKEYS || strlen(keys[a->size]) != len ||
	    memcmp(keys[a->size], key, len))
		return -EINVAL;
	g->count[a->size]++;
	if (++g->total == g->stop_after)
		return -EIO;
	return 0;
}

static void test_every_key_once(void)
{
	static const unsigned streams[] = { 1, 2, 4, 16 };
	size_t s;
	int i;

	for (s = 0; s < ARRAY_SIZE(streams); s++) {
		struct fake f = { .lock = PTHREAD_MUTEX_INITIALIZER };
		static struct got g;

		memset(&g, 0, sizeof(g));
		g.self = pthread_self();
		CHECK_INT(s3walk_run(streams[s], 2, "ds/", 3, fake_list, &f,
				     got_key, &g), ==, 0);
		CHECK_INT(g.total, ==, nkeys);
		for (i = 0; i < nkeys; i++)
			CHECK_INT(g.count[i], ==, 1);
		CHECK(!g.wrong_thread);
		/* ds/ and its 17 directories with a delimiter, the 5 x 17
		 * sub-directories whole */
		CHECK_INT(f.delimited, ==, 1 + 17);
		CHECK_INT(f.plain, ==, 17 * 5);
	}
}

/* a common prefix with a NUL byte cannot be asked for: not listed, and
 * the walk goes on */
static void test_nul_prefix_skipped(void)
{
	struct fake f = { .lock = PTHREAD_MUTEX_INITIALIZER, .nul = true };
	static struct got g;

	memset(&g, 0, sizeof(g));
	g.self = pthread_self();
	CHECK_INT(s3walk_run(4, 2, "ds/", 3, fake_list, &f, got_key, &g), ==,
		  0);
	CHECK_INT(g.total, ==, nkeys);
	CHECK_INT(f.delimited, ==, 1 + 17);
}

static void test_no_split(void)
{
	struct fake f = { .lock = PTHREAD_MUTEX_INITIALIZER };
	static struct got g;

	memset(&g, 0, sizeof(g));
	g.self = pthread_self();
	CHECK_INT(s3walk_run(4, 0, "ds/", 3, fake_list, &f, got_key, &g), ==,
		  0);
	CHECK_INT(g.total, ==, nkeys);
	CHECK_INT(f.delimited, ==, 0);
	CHECK_INT(f.plain, ==, 1);
}

static void test_errors_stop_the_walk(void)
{
	struct fake f = { .lock = PTHREAD_MUTEX_INITIALIZER };
	static struct got g;

	/* the consumer fails: the walk ends with its error */
	memset(&g, 0, sizeof(g));
	g.self = pthread_self();
	g.stop_after = 500;
	CHECK_INT(s3walk_run(4, 2, "ds/", 3, fake_list, &f, got_key, &g), ==,
		  -EIO);
	CHECK_INT(g.total, ==, 500);

	/* a common prefix outside the one listed */
	memset(&g, 0, sizeof(g));
	g.self = pthread_self();
	f.hostile = true;
	CHECK_INT(s3walk_run(4, 2, "ds/", 3, fake_list, &f, got_key, &g), ==,
		  -EBADMSG);
	CHECK_INT(g.total, ==, 0);
}

int main(void)
{
	runner_name = "test_s3walk";
	make_keys();
	TEST(test_every_key_once);
	TEST(test_no_split);
	TEST(test_nul_prefix_skipped);
	TEST(test_errors_stop_the_walk);
	return runner_done();
}
