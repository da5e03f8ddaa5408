// SPDX-License-Identifier: MIT
/*
 * chunkbuf.c: aligned data areas, the charge of a buffer of each size
 * (4 KiB multiples, powers of two up to 256 KiB), references, the last
 * put giving a charge back, and the pool of idle small mappings (reused,
 * bounded by CHUNKBUF_POOL_MAX, large ones never kept).  Each TEST()
 * runs in a process of its own (runner.h), so the pool starts empty.
 */
#include <stdint.h>
#include <string.h>

#include "chunkbuf.h"
#include "runner.h"

static void test_charge(void)
{
	CHECK_INT(chunkbuf_charge(0), ==, 4096);
	CHECK_INT(chunkbuf_charge(1), ==, 4096);
	CHECK_INT(chunkbuf_charge(4096), ==, 4096);
	CHECK_INT(chunkbuf_charge(4097), ==, 8192);
	CHECK_INT(chunkbuf_charge(9000), ==, 16384);	/* a power of two */
	CHECK_INT(chunkbuf_charge(100 << 10), ==, 128 << 10);
	CHECK_INT(chunkbuf_charge(256 << 10), ==, 256 << 10);
	/* past 256 KiB: 4 KiB multiples */
	CHECK_INT(chunkbuf_charge((256 << 10) + 1), ==, (256 << 10) + 4096);
	CHECK_INT(chunkbuf_charge(3 << 20), ==, 3 << 20);
	CHECK_INT(chunkbuf_charge(16 << 20), ==, 16 << 20);
}

static void test_new_aligned_and_writable(void)
{
	static const uint32_t sizes[] = { 1, 4096, 100 << 10, 1 << 20, 4 << 20 };
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct chunkbuf *cb = chunkbuf_new(sizes[i]);

		CHECK(cb != NULL);
		if (!cb)
			continue;
		CHECK_INT((uintptr_t)cb->data % 4096, ==, 0);
		CHECK_INT(cb->mapped, ==, chunkbuf_charge(sizes[i]));
		CHECK_INT(cb->len, ==, 0);
		CHECK(cb->mb == NULL);
		memset(cb->data, 0xa5, cb->mapped);	/* all of it is ours */
		CHECK_INT(chunkbuf_refs(cb), ==, 1);
		chunkbuf_put(cb);
	}
	chunkbuf_put(NULL);				/* fine */
}

static void test_refs_and_charge_back(void)
{
	struct membudget *mb = NULL;
	struct membudget_usage u;
	uint64_t n = chunkbuf_charge(1 << 20);
	struct chunkbuf *cb;

	CHECK_INT(membudget_create(&mb, 8 << 20), ==, 0);
	CHECK(membudget_try(mb, MB_AHEAD, n));
	cb = chunkbuf_new_charged(1 << 20, mb, MB_AHEAD);
	CHECK(cb != NULL);
	CHECK(chunkbuf_get(cb) == cb);
	CHECK_INT(chunkbuf_refs(cb), ==, 2);
	chunkbuf_put(cb);
	membudget_usage(mb, &u);
	CHECK_INT(u.by_class[MB_AHEAD], ==, n);		/* still held */
	chunkbuf_put(cb);				/* the last put */
	membudget_usage(mb, &u);
	CHECK_INT(u.by_class[MB_AHEAD], ==, 0);
	CHECK_INT(u.used, ==, 0);
	membudget_destroy(mb);
}

static void test_pool_reuses_small_mappings(void)
{
	struct chunkbuf *a, *b, *big;
	char *data;

	CHECK_INT(chunkbuf_pooled(), ==, 0);
	a = chunkbuf_new(100 << 10);
	data = a->data;
	chunkbuf_put(a);
	CHECK_INT(chunkbuf_pooled(), ==, (128 << 10));	/* kept */
	b = chunkbuf_new(90 << 10);			/* same class */
	CHECK(b->data == data);				/* reused */
	CHECK_INT(chunkbuf_pooled(), ==, 0);
	chunkbuf_put(b);
	/* another class does not take it */
	a = chunkbuf_new(4096);
	CHECK(a->data != data);
	chunkbuf_put(a);
	CHECK_INT(chunkbuf_pooled(), ==, (128 << 10) + 4096);
	/* a large buffer is never kept */
	big = chunkbuf_new(1 << 20);
	chunkbuf_put(big);
	CHECK_INT(chunkbuf_pooled(), ==, (128 << 10) + 4096);
}

static void test_pool_is_bounded(void)
{
	enum { N = (CHUNKBUF_POOL_MAX / (256 << 10)) + 4 };
	struct chunkbuf *cb[N];
	size_t i;

	for (i = 0; i < N; i++)
		cb[i] = chunkbuf_new(256 << 10);
	for (i = 0; i < N; i++)
		chunkbuf_put(cb[i]);
	CHECK_INT(chunkbuf_pooled(), ==, CHUNKBUF_POOL_MAX);
}

int main(void)
{
	runner_name = "test_chunkbuf";
	TEST(test_charge);
	TEST(test_new_aligned_and_writable);
	TEST(test_refs_and_charge_back);
	TEST(test_pool_reuses_small_mappings);
	TEST(test_pool_is_bounded);
	return runner_done();
}
