// SPDX-License-Identifier: MIT
/*
 * The index (meta.c): updates are batched, never one commit per update.
 */
#include "cachenv.h"

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

int main(void)
{
	runner_name = "test_meta";
	log_level = LOG_ERR;
	TEST(test_index_batched);
	return runner_done();
}
