// SPDX-License-Identifier: MIT
/* the backend's rate and the bound on speculative reads (linkrate.c),
 * driven with made-up times */
#include "linkrate.h"
#include "runner.h"

#define MIB	(1ULL << 20)
#define SEC	1000000LL

static uint64_t rate_of(struct linkrate *lr)
{
	uint64_t rate, bound;

	linkrate_read(lr, &rate, &bound);
	return rate;
}

static uint64_t bound_of(struct linkrate *lr)
{
	uint64_t rate, bound;

	linkrate_read(lr, &rate, &bound);
	return bound;
}

static void test_no_estimate_no_bound(void)
{
	struct linkrate lr;
	int i;

	linkrate_init(&lr, 500000, 4 * MIB);
	for (i = 0; i < 16; i++)
		linkrate_sent(&lr, 4 * MIB, 0);
	/* nothing measured yet: --max-inflight alone bounds */
	CHECK_INT(rate_of(&lr), ==, 0);
	CHECK_INT(bound_of(&lr), ==, 0);
	CHECK(linkrate_room(&lr, 0, 4 * MIB));
	linkrate_destroy(&lr);
}

static void test_burst_measures_the_link(void)
{
	struct linkrate lr;
	uint64_t mark[16];
	int i;

	/* 16 chunks of 4 MiB share a 24 MiB/s link: each gets 1/16 of it,
	 * all end at ~2.7 s, 10 ms apart */
	linkrate_init(&lr, 500000, 4 * MIB);
	for (i = 0; i < 16; i++)
		mark[i] = linkrate_sent(&lr, 4 * MIB, 0);
	for (i = 0; i < 16; i++) {
		linkrate_done(&lr, mark[i], 0, 4 * MIB, 4 * MIB,
			      2 * SEC + 600000 + i * 10000);
		/* neither one read's 1.5 MiB/s nor the burst's ends */
		CHECK_INT(rate_of(&lr), >, 20 * MIB);
		CHECK_INT(rate_of(&lr), <, 28 * MIB);
	}
	/* half a second of 24 MiB/s: 12 MiB */
	CHECK_INT(bound_of(&lr), >, 10 * MIB);
	CHECK_INT(bound_of(&lr), <, 14 * MIB);
	linkrate_destroy(&lr);
}

static void test_bound_and_room(void)
{
	struct linkrate lr;
	uint64_t m1, m2, m3;

	/* one read at a time over a 6 MiB/s link, 4 MiB chunks */
	linkrate_init(&lr, 500000, 4 * MIB);
	m1 = linkrate_sent(&lr, 4 * MIB, 0);
	linkrate_done(&lr, m1, 0, 4 * MIB, 4 * MIB, 4 * SEC / 6);
	CHECK_INT(rate_of(&lr), >, 5 * MIB);
	CHECK_INT(rate_of(&lr), <, 7 * MIB);
	/* half a second of that is under two chunks: the floor */
	CHECK_INT(bound_of(&lr), ==, 8 * MIB);
	/* idle time between reads is not counted: a read 100 s later
	 * measures the same link */
	m1 = linkrate_sent(&lr, 4 * MIB, 100 * SEC);
	CHECK(linkrate_room(&lr, 0, 4 * MIB));
	m2 = linkrate_sent(&lr, 4 * MIB, 100 * SEC);
	/* two chunks in flight fill the bound */
	CHECK(!linkrate_room(&lr, 0, 4 * MIB));
	CHECK(!linkrate_room(&lr, 0, 1));
	linkrate_done(&lr, m1, 100 * SEC, 4 * MIB, 4 * MIB,
		      100 * SEC + 8 * SEC / 6);
	CHECK(linkrate_room(&lr, 0, 4 * MIB));
	m3 = linkrate_sent(&lr, 4 * MIB, 100 * SEC + 8 * SEC / 6);
	linkrate_done(&lr, m2, 100 * SEC, 4 * MIB, 4 * MIB,
		      100 * SEC + 10 * SEC / 6);
	linkrate_done(&lr, m3, 100 * SEC + 8 * SEC / 6, 4 * MIB, 4 * MIB,
		      100 * SEC + 12 * SEC / 6);
	CHECK_INT(rate_of(&lr), >, 5 * MIB);
	CHECK_INT(rate_of(&lr), <, 7 * MIB);
	/* nothing in flight: one read may always start, whatever its size */
	CHECK(linkrate_room(&lr, 0, 64 * MIB));
	linkrate_destroy(&lr);
}

static void test_fast_backend(void)
{
	struct linkrate lr;
	uint64_t mark[8];
	int64_t t = 0;
	int i, j;

	/* 1 GiB/s: eight 4 MiB reads at a time, 32 ms each */
	linkrate_init(&lr, 500000, 4 * MIB);
	for (i = 0; i < 100; i++) {
		for (j = 0; j < 8; j++)
			mark[j] = linkrate_sent(&lr, 4 * MIB, t);
		for (j = 0; j < 8; j++)
			linkrate_done(&lr, mark[j], t, 4 * MIB, 4 * MIB,
				      t + 32000);
		t += 32000;
	}
	CHECK_INT(rate_of(&lr), >, 900 * MIB);
	/* half a second of it: far more than any --max-inflight */
	CHECK_INT(bound_of(&lr), >, 400 * MIB);
	for (j = 0; j < 32; j++)
		linkrate_sent(&lr, 4 * MIB, t);
	CHECK(linkrate_room(&lr, 0, 4 * MIB));
	linkrate_destroy(&lr);
}

/*
 * The floor is two reads of the size asked, two chunks at most: small
 * files over a slow link get the horizon's bytes in flight, not two
 * chunks' worth.  At 6 MiB/s a quarter second is 1.5 MiB: 15 reads of
 * 100 KiB (the floor of two 4 MiB chunks let 81 start; that many short
 * responses overflowed the benchmark link's queue, and the last one of
 * an epoch waited out a TCP retransmission timeout).
 */
static void test_small_reads_floor(void)
{
	struct linkrate lr;
	uint64_t m;
	int n;

	linkrate_init(&lr, 250000, 4 * MIB);
	m = linkrate_sent(&lr, 4 * MIB, 0);
	linkrate_done(&lr, m, 0, 4 * MIB, 4 * MIB, 4 * SEC / 6);
	CHECK_INT(rate_of(&lr), >, 5 * MIB);
	CHECK_INT(rate_of(&lr), <, 7 * MIB);
	CHECK_INT(bound_of(&lr), ==, 8 * MIB);	/* for chunks: the floor */
	for (n = 0; n < 200 && linkrate_room(&lr, 0, 100 << 10); n++)
		linkrate_sent(&lr, 100 << 10, SEC);
	CHECK_INT(n, >=, 14);
	CHECK_INT(n, <=, 16);
	/* a chunk still has its floor of two chunks ... */
	linkrate_destroy(&lr);
	linkrate_init(&lr, 250000, 4 * MIB);
	m = linkrate_sent(&lr, 4 * MIB, 0);
	linkrate_done(&lr, m, 0, 4 * MIB, 4 * MIB, 4 * SEC / 6);
	linkrate_sent(&lr, 4 * MIB, SEC);
	CHECK(linkrate_room(&lr, 0, 4 * MIB));
	linkrate_sent(&lr, 4 * MIB, SEC);
	CHECK(!linkrate_room(&lr, 0, 4 * MIB));
	/* ... and a small read two of its own size */
	linkrate_destroy(&lr);
	linkrate_init(&lr, 1000, 4 * MIB);	/* 1 ms: 6 KiB */
	m = linkrate_sent(&lr, 4 * MIB, 0);
	linkrate_done(&lr, m, 0, 4 * MIB, 4 * MIB, 4 * SEC / 6);
	linkrate_sent(&lr, 100 << 10, SEC);
	CHECK(linkrate_room(&lr, 0, 100 << 10));
	linkrate_sent(&lr, 100 << 10, SEC);
	CHECK(!linkrate_room(&lr, 0, 100 << 10));
	linkrate_destroy(&lr);
}

static void test_failures_and_off(void)
{
	struct linkrate lr;
	uint64_t m;

	/* failed reads are not measured */
	linkrate_init(&lr, 500000, MIB);
	m = linkrate_sent(&lr, MIB, 0);
	linkrate_done(&lr, m, 0, MIB, 0, SEC);
	CHECK_INT(rate_of(&lr), ==, 0);
	CHECK_INT(bound_of(&lr), ==, 0);
	/* an unbalanced done is ignored */
	linkrate_done(&lr, 0, 0, MIB, MIB, 2 * SEC);
	CHECK_INT(rate_of(&lr), ==, 0);
	linkrate_destroy(&lr);

	/* horizon 0: measured, never bounded */
	linkrate_init(&lr, 0, MIB);
	m = linkrate_sent(&lr, MIB, 0);
	linkrate_done(&lr, m, 0, MIB, MIB, SEC);
	CHECK_INT(rate_of(&lr), ==, MIB);
	CHECK_INT(bound_of(&lr), ==, 0);
	linkrate_sent(&lr, 64 * MIB, SEC);
	CHECK(linkrate_room(&lr, 0, 64 * MIB));
	linkrate_destroy(&lr);
}

int main(void)
{
	runner_name = "test_linkrate";
	TEST(test_no_estimate_no_bound);
	TEST(test_burst_measures_the_link);
	TEST(test_bound_and_room);
	TEST(test_fast_backend);
	TEST(test_small_reads_floor);
	TEST(test_failures_and_off);
	return runner_done();
}
