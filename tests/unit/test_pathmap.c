// SPDX-License-Identifier: MIT
/* name rules: pathmap.c and the tree built by ns.c */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "ns.h"
#include "pathmap.h"
#include "runner.h"

static enum pm_kind kind(const char *name, const char *prefix)
{
	struct pm_result r;

	return pathmap_classify(name, strlen(name), prefix, &r);
}

static void test_plain_names(void)
{
	struct pm_result r;

	CHECK_INT(kind("a", ""), ==, PM_FILE);
	CHECK_INT(kind("a/b/c.bin", ""), ==, PM_FILE);
	CHECK_INT(pathmap_classify("a/b/", 4, "", &r), ==, PM_DIR);
	CHECK_INT(r.rel_len, ==, 3);
	CHECK_INT(kind("x y+z%3D=&.tar", ""), ==, PM_FILE);
}

static void test_bad_components(void)
{
	char longc[300];

	CHECK_INT(kind("", ""), ==, PM_BAD_EMPTY);
	CHECK_INT(kind("/a", ""), ==, PM_BAD_EMPTY);
	CHECK_INT(kind("a//b", ""), ==, PM_BAD_EMPTY);
	CHECK_INT(kind("/", ""), ==, PM_BAD_EMPTY);
	CHECK_INT(kind("a/./b", ""), ==, PM_BAD_DOT);
	CHECK_INT(kind("..", ""), ==, PM_BAD_DOT);
	CHECK_INT(kind("a/..", ""), ==, PM_BAD_DOT);
	CHECK_INT(kind("a/...", ""), ==, PM_FILE);	/* "..." is a name */
	CHECK_INT(kind(".hidden", ""), ==, PM_FILE);
	memset(longc, 'x', 256);
	longc[256] = '\0';
	CHECK_INT(kind(longc, ""), ==, PM_BAD_LONG);
	longc[255] = '\0';
	CHECK_INT(kind(longc, ""), ==, PM_FILE);
	{
		struct pm_result r;

		CHECK_INT(pathmap_classify("a\0b", 3, "", &r), ==, PM_BAD_NUL);
	}
}

static void test_prefix(void)
{
	struct pm_result r;

	CHECK_INT(kind("data/a", "data"), ==, PM_FILE);
	CHECK_INT(pathmap_classify("data/x/y", 8, "data", &r), ==, PM_FILE);
	CHECK_INT(r.rel_len, ==, 3);
	CHECK(!memcmp(r.rel, "x/y", 3));
	CHECK_INT(kind("data", "data"), ==, PM_OUTSIDE);
	CHECK_INT(kind("data/", "data"), ==, PM_OUTSIDE);
	CHECK_INT(kind("database/a", "data"), ==, PM_OUTSIDE);
	CHECK_INT(kind("other/a", "data"), ==, PM_OUTSIDE);
	CHECK_INT(kind("a/b/c", "a/b"), ==, PM_FILE);
}

static void test_utf8(void)
{
	struct pm_result r;

	CHECK(utf8_valid("h\xc3\xa9llo", 6));
	CHECK(utf8_valid("\xe6\x97\xa5\xe6\x9c\xac", 6));
	CHECK(!utf8_valid("\xff", 1));
	CHECK(!utf8_valid("\xc3", 1));		/* truncated */
	CHECK(!utf8_valid("\xc0\xaf", 2));	/* overlong '/' */
	CHECK(!utf8_valid("\xed\xa0\x80", 3));	/* surrogate */
	CHECK_INT(pathmap_classify("bad\xff", 4, "", &r), ==, PM_FILE);
	CHECK(r.non_utf8);
}

static struct ns_attr attr(uint64_t size)
{
	struct ns_attr a = { .size = size, .mtime = 1700000000 };

	strcpy(a.version, "7");
	return a;
}

static void test_tree(void)
{
	struct ns *ns = ns_create(42);
	struct ns_attr a = attr(10);
	const struct ns_node *d, *f, *root;

	CHECK_INT(ns_add(ns, "a/b/c", 5, "", &a), ==, 0);
	CHECK_INT(ns_add(ns, "a/d", 3, "", &a), ==, 0);
	CHECK_INT(ns_add(ns, "e/", 2, "", &a), ==, 0);	/* empty dir marker */
	CHECK_INT(ns_add(ns, "a//x", 4, "", &a), ==, PM_BAD_EMPTY);
	ns_finish(ns);
	root = ns_get(ns, NS_ROOT_INO);
	CHECK(root && root->is_dir);
	CHECK_INT(root->nkids, ==, 2);
	d = ns_lookup(ns, NS_ROOT_INO, "a");
	CHECK(d && d->is_dir);
	CHECK_INT(d->nkids, ==, 2);
	f = ns_lookup(ns, d->ino, "d");
	CHECK(f && !f->is_dir);
	CHECK_STR(f->key, "a/d");
	CHECK_INT(f->ino, ==, ns_file_ino(ns, "a/d", 3));
	CHECK(ns_lookup(ns, NS_ROOT_INO, "e") != NULL);
	CHECK(ns_lookup(ns, NS_ROOT_INO, "zz") == NULL);
	CHECK_INT(ns_stats(ns)->files, ==, 2);
	CHECK_INT(ns_stats(ns)->skipped[PM_BAD_EMPTY], ==, 1);
	ns_destroy(ns);
}

static void test_file_dir_conflict(void)
{
	struct ns *ns = ns_create(1);
	struct ns_attr a = attr(1);
	const struct ns_node *n;

	/* "a" is both an object and a directory prefix: the dir wins */
	CHECK_INT(ns_add(ns, "a", 1, "", &a), ==, 0);
	CHECK_INT(ns_add(ns, "a/b", 3, "", &a), ==, 0);
	ns_finish(ns);
	n = ns_lookup(ns, NS_ROOT_INO, "a");
	CHECK(n && n->is_dir);
	CHECK_INT(ns_get(ns, NS_ROOT_INO)->nkids, ==, 1);
	CHECK_INT(ns_stats(ns)->shadowed, ==, 1);
	CHECK_INT(ns_stats(ns)->files, ==, 1);
	CHECK(ns_get(ns, ns_file_ino(ns, "a", 1)) == NULL);
	ns_destroy(ns);
}

static void test_stable_inodes(void)
{
	struct ns *x = ns_create(5), *y = ns_create(5), *z = ns_create(6);

	CHECK_INT(ns_file_ino(x, "p/q", 3), ==, ns_file_ino(y, "p/q", 3));
	CHECK_INT(ns_file_ino(x, "p/q", 3), !=, ns_file_ino(z, "p/q", 3));
	CHECK(ns_file_ino(x, "p/q", 3) > 1);
	ns_destroy(x);
	ns_destroy(y);
	ns_destroy(z);
}

static void test_many(void)
{
	struct ns *ns = ns_create(9);
	struct ns_attr a = attr(3);
	char name[64];
	int i, bad = 0;

	for (i = 0; i < 100000; i++) {
		int n = snprintf(name, sizeof(name), "d%d/f%06d", i % 10, i);

		bad += ns_add(ns, name, n, "", &a) != 0;
	}
	ns_finish(ns);
	CHECK_INT(bad, ==, 0);
	CHECK_INT(ns_stats(ns)->files, ==, 100000);
	CHECK_INT(ns_stats(ns)->dirs, ==, 11);
	CHECK(ns_lookup(ns, ns_lookup(ns, NS_ROOT_INO, "d7")->ino,
			"f099997") != NULL);
	ns_destroy(ns);
}

int main(void)
{
	runner_name = "test_pathmap";
	log_level = LOG_ERR;
	TEST(test_plain_names);
	TEST(test_bad_components);
	TEST(test_prefix);
	TEST(test_utf8);
	TEST(test_tree);
	TEST(test_file_dir_conflict);
	TEST(test_stable_inodes);
	TEST(test_many);
	return runner_done();
}
