// SPDX-License-Identifier: MIT
/* name rules: pathmap.c (the tree they build: test_ns.c) */
#include <stdlib.h>
#include <string.h>

#include "log.h"
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

int main(void)
{
	runner_name = "test_pathmap";
	log_level = LOG_ERR;
	TEST(test_plain_names);
	TEST(test_bad_components);
	TEST(test_prefix);
	TEST(test_utf8);
	return runner_done();
}
