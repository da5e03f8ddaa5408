// SPDX-License-Identifier: MIT
/*
 * The index (meta.c): updates are batched, never one commit per update;
 * every writer grows the map; a namespace rewrite does not hold LMDB's
 * write lock; a damaged index is set aside, never mapped.
 */
#include <dirent.h>
#include <sys/stat.h>

#include "cachenv.h"

#define TINY_MAP	(256 << 10)

static void test_index_batched(void)
{
	struct env e;
	struct heat_rec h = { .count = 1 };
	uint64_t before;
	int i;

	env_init(&e, 16 * CS, 0, READ_DIRECT);
	meta_flush(e.meta);
	before = meta_batches(e.meta);
	for (i = 0; i < 3000; i++)
		meta_q_heat(e.meta, i, &h);
	meta_flush(e.meta);
	/* thousands of updates, a handful of transactions */
	CHECK_INT(meta_batches(e.meta) - before, <=, 3);
	env_fini(&e);
}

/* ---- helpers: a temporary directory holding an index ---- */

struct tdir {
	char dir[64];
	char index[96];
};

static void tdir_init(struct tdir *d)
{
	strcpy(d->dir, "/tmp/fusefs-meta-XXXXXX");
	CHECK(mkdtemp(d->dir) != NULL);
	snprintf(d->index, sizeof(d->index), "%s/index", d->dir);
}

static void tdir_fini(struct tdir *d)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
	CHECK_INT(system(cmd), ==, 0);
}

/* the name of the @i-th test object, @len bytes */
static void obj_name(char *buf, size_t len, int i)
{
	size_t n = (size_t)snprintf(buf, len + 1, "obj/%08d/", i);

	memset(buf + n, 'a' + i % 26, len - n);
	buf[len] = '\0';
}

/* a namespace of @n objects with @len-byte names */
static int write_ns(struct meta *m, int n, size_t len)
{
	struct meta_ns_txn *t;
	char name[4096];
	int i, rc;

	rc = meta_ns_begin(m, &t);
	if (rc)
		return rc;
	for (i = 0; i < n; i++) {
		struct ns_attr a = { .size = (uint64_t)i, .mtime = 7 };

		snprintf(a.version, sizeof(a.version), "v%d", i);
		obj_name(name, len, i);
		rc = meta_ns_add(t, name, len, &a);
		if (rc) {
			meta_ns_abort(t);
			return rc;
		}
	}
	return meta_ns_commit(t);
}

struct ns_count {
	long n;
	bool bad;
};

static int count_ns(void *arg, const char *key, size_t len,
		    const struct ns_attr *a)
{
	struct ns_count *c = arg;
	char want[4096];
	int i;

	if (sscanf(key, "obj/%08d/", &i) != 1 || len >= sizeof(want)) {
		c->bad = true;
		return 0;
	}
	obj_name(want, len, i);
	if (memcmp(key, want, len) || a->size != (uint64_t)i)
		c->bad = true;
	c->n++;
	return 0;
}

static int count_heat(void *arg, uint64_t fid, const struct heat_rec *r)
{
	(*(long *)arg)++;
	return 0;
}

/* how many index.broken-* directories @d holds */
static int broken_dirs(const struct tdir *d, char *last, size_t len)
{
	DIR *dir = opendir(d->dir);
	struct dirent *de;
	int n = 0;

	while (dir && (de = readdir(dir))) {
		if (!strncmp(de->d_name, "index.broken-", 13)) {
			n++;
			if (last)
				snprintf(last, len, "%s/%s", d->dir, de->d_name);
		}
	}
	if (dir)
		closedir(dir);
	return n;
}

/* ---- the map grows for every writer ---- */

static void test_map_grows_for_every_writer(void)
{
	struct heat_rec h = { .count = 3 };
	struct ns_count c = { 0 };
	struct tdir d;
	struct meta *m;
	char *big;
	long heat = 0;
	int i;

	tdir_init(&d);
	CHECK_INT(meta_open_sized(&m, d.index, TINY_MAP), ==, 0);
	/* the namespace cache: 6000 names of 1000 bytes, about 24 x the map */
	CHECK_INT(write_ns(m, 6000, 1000), ==, 0);
	/* a setting larger than the map was at the start */
	big = malloc(2 * TINY_MAP);
	memset(big, 'x', 2 * TINY_MAP - 1);
	big[2 * TINY_MAP - 1] = '\0';
	CHECK_INT(meta_put_str(m, "big", big), ==, 0);
	/* queued cache index records */
	for (i = 0; i < 40000; i++)
		meta_q_heat(m, (uint64_t)i, &h);
	meta_flush(m);
	meta_close(m);

	CHECK_INT(meta_open_sized(&m, d.index, TINY_MAP), ==, 0);
	CHECK_INT(meta_ns_load(m, count_ns, &c), ==, 6000);
	CHECK(!c.bad);
	CHECK_INT(meta_heat_load(m, count_heat, &heat), ==, 0);
	CHECK_INT(heat, ==, 40000);
	memset(big, 0, 2 * TINY_MAP);
	CHECK_INT(meta_get_str(m, "big", big, 2 * TINY_MAP), ==, 0);
	CHECK_INT(strlen(big), ==, 2 * TINY_MAP - 1);
	/* a rewrite replaces the namespace whole */
	CHECK_INT(write_ns(m, 10, 100), ==, 0);
	c.n = 0;
	CHECK_INT(meta_ns_load(m, count_ns, &c), ==, 10);
	CHECK(!c.bad);
	meta_close(m);
	free(big);
	CHECK_INT(broken_dirs(&d, NULL, 0), ==, 0);
	tdir_fini(&d);
}

/* ---- a namespace rewrite and index commits at once ---- */

static void test_ns_rewrite_does_not_block_commits(void)
{
	struct heat_rec h = { .count = 1 };
	struct meta_ns_txn *t, *t2;
	struct ns_count c = { 0 };
	struct ns_attr a = { .size = 0 };
	struct tdir d;
	struct meta *m;
	uint64_t before;
	char name[64];
	long heat = 0;

	tdir_init(&d);
	CHECK_INT(meta_open_sized(&m, d.index, TINY_MAP), ==, 0);
	CHECK_INT(write_ns(m, 5, 40), ==, 0);
	CHECK_INT(meta_ns_begin(m, &t), ==, 0);
	CHECK_INT(meta_ns_begin(m, &t2), ==, -EBUSY);	/* one at a time */
	obj_name(name, 40, 0);
	CHECK_INT(meta_ns_add(t, name, 40, &a), ==, 0);
	/* the listing is still going: index records are committed meanwhile
	 * (before, meta_flush() waited for LMDB's write lock forever) */
	before = meta_batches(m);
	meta_q_heat(m, 1, &h);
	meta_flush(m);
	CHECK_INT(meta_batches(m), >, before);
	CHECK_INT(meta_heat_load(m, count_heat, &heat), ==, 0);
	CHECK_INT(heat, ==, 1);
	/* loads see the previous namespace until the commit */
	CHECK_INT(meta_ns_load(m, count_ns, &c), ==, 5);
	meta_ns_abort(t);
	c.n = 0;
	CHECK_INT(meta_ns_load(m, count_ns, &c), ==, 5);
	CHECK(!c.bad);
	/* a new rewrite may start after an abort, and replaces the old one */
	CHECK_INT(write_ns(m, 3, 40), ==, 0);
	c.n = 0;
	CHECK_INT(meta_ns_load(m, count_ns, &c), ==, 3);
	meta_close(m);
	tdir_fini(&d);
}

/* ---- a damaged index is set aside ---- */

/* an index with some of everything, closed; returns data.mdb's size */
static off_t make_index(const struct tdir *d)
{
	struct chunk_rec cr = { .len = 4096, .sum = 1, .gen = 2 };
	struct heat_rec h = { .count = 1 };
	struct file_rec fr = { .size = 4096, .chunk_size = 4096 };
	char path[128];
	struct meta *m;
	struct stat sb;
	int i;

	CHECK_INT(meta_open(&m, d->index), ==, 0);
	CHECK_INT(write_ns(m, 3000, 200), ==, 0);
	for (i = 0; i < 3000; i++) {
		meta_q_file(m, (uint64_t)i, &fr);
		meta_q_chunk(m, (uint64_t)i, 0, &cr);
		meta_q_heat(m, (uint64_t)i, &h);
	}
	CHECK_INT(meta_put_str(m, "format", "1"), ==, 0);
	meta_close(m);
	snprintf(path, sizeof(path), "%s/data.mdb", d->index);
	CHECK_INT(stat(path, &sb), ==, 0);
	return sb.st_size;
}

enum damage { CUT_8K, CUT_QUARTER, CUT_HALF, GARBAGE, GARBAGE_INSIDE };

static void damage(const struct tdir *d, enum damage how, off_t size)
{
	char path[128], *junk = pattern(size, 99);
	int fd;

	snprintf(path, sizeof(path), "%s/data.mdb", d->index);
	fd = open(path, O_WRONLY);
	CHECK(fd >= 0);
	switch (how) {
	case CUT_8K:
		CHECK_INT(ftruncate(fd, 8192), ==, 0);
		break;
	case CUT_QUARTER:
		CHECK_INT(ftruncate(fd, size / 4), ==, 0);
		break;
	case CUT_HALF:
		CHECK_INT(ftruncate(fd, size / 2), ==, 0);
		break;
	case GARBAGE:
		CHECK_INT(pwrite(fd, junk, size, 0), ==, size);
		break;
	case GARBAGE_INSIDE:	/* meta pages intact, the rest not */
		CHECK_INT(pwrite(fd, junk, size - 8192, 8192), ==, size - 8192);
		break;
	}
	close(fd);
	free(junk);
}

static void check_set_aside(enum damage how)
{
	char aside[512], path[600], val[8];
	struct ns_count c = { 0 };
	struct tdir d;
	struct meta *m;
	struct stat sb;
	off_t size;

	tdir_init(&d);
	size = make_index(&d);
	CHECK_INT(size, >, 64 * 1024);
	/* an intact index is kept */
	CHECK_INT(meta_open(&m, d.index), ==, 0);
	CHECK_INT(meta_get_str(m, "format", val, sizeof(val)), ==, 0);
	meta_close(m);
	CHECK_INT(broken_dirs(&d, NULL, 0), ==, 0);

	damage(&d, how, size);
	CHECK_INT(meta_open(&m, d.index), ==, 0);
	/* a fresh, empty and working index */
	CHECK_INT(meta_get_str(m, "format", val, sizeof(val)), ==, -ENOENT);
	CHECK_INT(meta_ns_load(m, count_ns, &c), ==, 0);
	CHECK_INT(write_ns(m, 10, 50), ==, 0);
	meta_close(m);
	/* the damaged one is kept aside, as it was */
	CHECK_INT(broken_dirs(&d, aside, sizeof(aside)), ==, 1);
	snprintf(path, sizeof(path), "%s/data.mdb", aside);
	CHECK_INT(stat(path, &sb), ==, 0);
	CHECK_INT(sb.st_size, ==, how == CUT_8K ? 8192 : how == CUT_QUARTER ?
		  size / 4 : how == CUT_HALF ? size / 2 : size);
	/* and the next start keeps the new one */
	CHECK_INT(meta_open(&m, d.index), ==, 0);
	c.n = 0;
	CHECK_INT(meta_ns_load(m, count_ns, &c), ==, 10);
	meta_close(m);
	CHECK_INT(broken_dirs(&d, NULL, 0), ==, 1);
	tdir_fini(&d);
}

static void test_truncated_8k_set_aside(void)
{
	check_set_aside(CUT_8K);
}

static void test_truncated_quarter_set_aside(void)
{
	check_set_aside(CUT_QUARTER);
}

static void test_truncated_half_set_aside(void)
{
	check_set_aside(CUT_HALF);
}

static void test_garbage_set_aside(void)
{
	check_set_aside(GARBAGE);
}

static void test_garbage_inside_set_aside(void)
{
	check_set_aside(GARBAGE_INSIDE);
}

static void test_empty_data_file_is_fine(void)
{
	char path[128];
	struct tdir d;
	struct meta *m;
	int fd;

	tdir_init(&d);
	CHECK_INT(mkdir(d.index, 0700), ==, 0);
	snprintf(path, sizeof(path), "%s/data.mdb", d.index);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_INT(meta_open(&m, d.index), ==, 0);
	CHECK_INT(write_ns(m, 2, 20), ==, 0);
	meta_close(m);
	CHECK_INT(broken_dirs(&d, NULL, 0), ==, 0);
	tdir_fini(&d);
}

int main(void)
{
	runner_name = "test_meta";
	log_level = LOG_ERR;
	TEST(test_index_batched);
	TEST(test_map_grows_for_every_writer);
	TEST(test_ns_rewrite_does_not_block_commits);
	TEST(test_truncated_8k_set_aside);
	TEST(test_truncated_quarter_set_aside);
	TEST(test_truncated_half_set_aside);
	TEST(test_garbage_set_aside);
	TEST(test_garbage_inside_set_aside);
	TEST(test_empty_data_file_is_fine);
	return runner_done();
}
