// SPDX-License-Identifier: MIT
/*
 * The table of sample ranges (ranges.c): one key per distinct range,
 * keys mapped back, and reads mapped to the ranges they overlap.
 */
#include "runner.h"

#include "ns.h"
#include "ranges.h"

static void test_one_key_per_range(void)
{
	struct ranges *r;
	uint64_t a, b, c, d;
	struct range x;

	CHECK_INT(ranges_create(&r), ==, 0);
	CHECK(!ranges_get(r, 12345, &x));
	CHECK_INT(ranges_intern(r, 7, 4096, 8196, &a), ==, 0);
	CHECK_INT(ranges_intern(r, 7, 4096, 8196, &b), ==, 0);
	CHECK_INT(ranges_intern(r, 7, 4096, 8195, &c), ==, 0);
	CHECK_INT(ranges_intern(r, 8, 4096, 8196, &d), ==, 0);
	CHECK(a == b);
	CHECK(a != c && a != d && c != d);
	CHECK(a >= NS_FIRST_INO && c >= NS_FIRST_INO && d >= NS_FIRST_INO);
	CHECK_INT(ranges_count(r), ==, 3);
	CHECK(ranges_get(r, c, &x));
	CHECK(x.key == c && x.fid == 7 && x.off == 4096 && x.len == 8195);
	CHECK_INT(ranges_intern(r, 7, 10, 0, &a), ==, -EINVAL);
	CHECK_INT(ranges_intern(r, 7, UINT64_MAX - 5, 10, &a), ==, -EINVAL);
	CHECK_INT(ranges_count(r), ==, 3);
	ranges_destroy(r);
}

static void test_reads_hit_the_ranges_they_overlap(void)
{
	struct ranges *r;
	uint64_t k[6], got[8];
	/* out of offset order, one long range overlapping others */
	static const uint64_t off[6] = { 50000, 0, 20000, 8196, 100, 90000 };
	static const uint64_t len[6] = { 8196, 8196, 8196, 8196, 60000, 10 };
	size_t i, n;

	CHECK_INT(ranges_create(&r), ==, 0);
	CHECK_INT(ranges_hit(r, 1, 0, 4096, got, 8), ==, 0);
	for (i = 0; i < 6; i++)
		CHECK_INT(ranges_intern(r, 1, off[i], len[i], &k[i]), ==, 0);
	/* a page in the first sample and the long one */
	n = ranges_hit(r, 1, 4096, 4096, got, 8);
	CHECK_INT(n, ==, 2);
	CHECK(got[0] == k[1] && got[1] == k[4]);
	/* the last byte of [8196, 16392) and the first of nothing after */
	n = ranges_hit(r, 1, 16391, 1, got, 8);
	CHECK_INT(n, ==, 2);
	CHECK(got[0] == k[4] && got[1] == k[3]);
	CHECK_INT(ranges_hit(r, 1, 60200, 4096, got, 8), ==, 0);
	n = ranges_hit(r, 1, 58000, 200, got, 8);	/* the end of k[0] */
	CHECK_INT(n, ==, 2);
	CHECK(got[0] == k[4] && got[1] == k[0]);
	/* another file, and @max */
	CHECK_INT(ranges_hit(r, 2, 0, 100000, got, 8), ==, 0);
	CHECK_INT(ranges_hit(r, 1, 0, 100000, got, 3), ==, 3);
	CHECK(got[0] == k[1] && got[1] == k[4] && got[2] == k[3]);
	CHECK_INT(ranges_hit(r, 1, 0, 100000, got, 8), ==, 6);
	/* a range added later is found too (the file sorted again) */
	CHECK_INT(ranges_intern(r, 1, 30000, 10, &k[0]), ==, 0);
	n = ranges_hit(r, 1, 30005, 1, got, 8);
	CHECK_INT(n, ==, 2);
	CHECK(got[0] == k[4] && got[1] == k[0]);
	ranges_destroy(r);
}

int main(void)
{
	runner_name = "test_ranges";
	TEST(test_one_key_per_range);
	TEST(test_reads_hit_the_ranges_they_overlap);
	return runner_done();
}
