// SPDX-License-Identifier: MIT
/*
 * The index (meta.c): updates are batched, never one commit per update;
 * every writer grows the map; a namespace rewrite does not hold LMDB's
 * write lock.
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

int main(void)
{
	runner_name = "test_meta";
	log_level = LOG_ERR;
	TEST(test_index_batched);
	TEST(test_map_grows_for_every_writer);
	TEST(test_ns_rewrite_does_not_block_commits);
	return runner_done();
}
