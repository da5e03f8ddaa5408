// SPDX-License-Identifier: MIT
/*
 * The cache (cache.c, cache_load.c) against the in-memory backend: chunk
 * arithmetic, persistence across a restart without backend reads,
 * checksum failures, the size bound, changed objects, sizes refused.
 */
#include "cachenv.h"

static void test_chunk_len(void)
{
	struct env e;

	env_init(&e, 16 * CS, 0, READ_DIRECT);
	check_chunk_len(&e, 0, 0, 0);
	check_chunk_len(&e, 1, 0, 1);
	check_chunk_len(&e, CS - 1, 0, CS - 1);
	check_chunk_len(&e, CS, 0, CS);
	check_chunk_len(&e, CS, 1, 0);
	check_chunk_len(&e, CS + 1, 1, 1);
	env_fini(&e);
}

static void test_restart_reuses_cache(void)
{
	struct env e;
	char *data = pattern(4 * CS + 5, 3), *got = malloc(5 * CS);
	struct centry *ce;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	mem_put(e.be, "keep", data, 4 * CS + 5);
	ce = attach(&e, "keep", NULL);
	CHECK_INT(read_all(&e, ce, got, 4 * CS + 5), ==, 0);
	cache_detach(e.cache, ce);
	CHECK_INT(mem_reads(e.be), ==, 5);
	env_stop(&e);
	env_start(&e);
	ce = attach(&e, "keep", NULL);
	memset(got, 0, 4 * CS + 5);
	CHECK_INT(read_all(&e, ce, got, 4 * CS + 5), ==, 0);
	CHECK(!memcmp(got, data, 4 * CS + 5));
	CHECK_INT(mem_reads(e.be), ==, 5);		/* no backend read */
	CHECK_INT(e.st.verified_chunks, ==, 5);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
	free(got);
}

static void flip_byte(const char *dir, off_t off)
{
	char cmd[256], path[512];
	FILE *f;
	int fd;
	char c;

	snprintf(cmd, sizeof(cmd), "find %s/data -type f | head -1", dir);
	f = popen(cmd, "r");
	CHECK(f && fgets(path, sizeof(path), f));
	pclose(f);
	path[strcspn(path, "\n")] = '\0';
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_INT(pread(fd, &c, 1, off), ==, 1);
	c ^= 0x20;
	CHECK_INT(pwrite(fd, &c, 1, off), ==, 1);
	close(fd);
}

static void test_corrupt_chunk_refetched(void)
{
	struct env e;
	char *data = pattern(3 * CS, 4), *got = malloc(3 * CS);
	struct centry *ce;

	env_init(&e, 64 * CS, 0, READ_BUFFERED);
	mem_put(e.be, "c", data, 3 * CS);
	ce = attach(&e, "c", NULL);
	CHECK_INT(read_all(&e, ce, got, 3 * CS), ==, 0);
	cache_detach(e.cache, ce);
	env_stop(&e);
	flip_byte(e.dir, CS + 12345);		/* in chunk 1 */
	env_start(&e);
	ce = attach(&e, "c", NULL);
	memset(got, 0, 3 * CS);
	CHECK_INT(read_all(&e, ce, got, 3 * CS), ==, 0);
	CHECK(!memcmp(got, data, 3 * CS));
	CHECK_INT(e.st.checksum_failures, ==, 1);
	CHECK_INT(mem_reads(e.be), ==, 4);	/* only chunk 1 again */
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
	free(got);
}

static void test_size_bound(void)
{
	struct env e;
	char *data = pattern(3 * CS, 5), *got = malloc(3 * CS);
	uint64_t used, limit, files;
	int i, over = 0;

	env_init(&e, 4 * CS, 0, READ_DIRECT);
	env_stop(&e);			/* LRU: always admits, must evict */
	free(e.cf.evict);
	e.cf.evict = strdup("lru");
	env_start(&e);
	for (i = 0; i < 6; i++) {
		char key[16];
		struct centry *ce;

		snprintf(key, sizeof(key), "b%d", i);
		mem_put(e.be, key, data, 3 * CS);
		ce = attach(&e, key, NULL);
		CHECK_INT(read_all(&e, ce, got, 3 * CS), ==, 0);
		CHECK(!memcmp(got, data, 3 * CS));
		cache_detach(e.cache, ce);
		cache_usage(e.cache, &used, &limit, &files);
		over += used > limit;
	}
	CHECK_INT(over, ==, 0);
	CHECK_INT(e.st.evictions, >=, 4);
	/* a file larger than the whole cache is still served */
	{
		char *huge = pattern(6 * CS, 6), *hg = malloc(6 * CS);
		struct centry *ce;

		mem_put(e.be, "huge", huge, 6 * CS);
		ce = attach(&e, "huge", NULL);
		CHECK_INT(read_all(&e, ce, hg, 6 * CS), ==, 0);
		CHECK(!memcmp(hg, huge, 6 * CS));
		cache_usage(e.cache, &used, &limit, &files);
		CHECK_INT(used, <=, limit);
		CHECK_INT(e.st.chunks_not_stored, >, 0);
		cache_detach(e.cache, ce);
		free(huge);
		free(hg);
	}
	env_fini(&e);
	free(data);
	free(got);
}

static void test_changed_object(void)
{
	struct env e;
	char *v1 = pattern(2 * CS, 7), *v2 = pattern(2 * CS, 8);
	char *got = malloc(2 * CS);
	struct centry *ce, *old;
	bool changed;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	mem_put(e.be, "obj", v1, 2 * CS);
	old = attach(&e, "obj", &changed);
	CHECK(!changed);
	CHECK_INT(read_all(&e, old, got, 2 * CS), ==, 0);
	mem_put(e.be, "obj", v2, 2 * CS);
	ce = attach(&e, "obj", &changed);
	CHECK(changed);
	CHECK_INT(read_all(&e, ce, got, 2 * CS), ==, 0);
	CHECK(!memcmp(got, v2, 2 * CS));
	/* the old handle never gets bytes of either version mixed in */
	CHECK_INT(do_read(&e, old, 0, 4096, got), ==, -ESTALE);
	cache_detach(e.cache, old);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(v1);
	free(v2);
	free(got);
}

/* a listed size past the largest object is refused, never wrapped */
static void test_huge_size_refused(void)
{
	struct ns_attr a = { .size = 1ULL << 62, .version = "v1" };
	struct centry *ce = NULL;
	bool changed;
	struct env e;

	env_init(&e, 16 * CS, 0, READ_DIRECT);
	CHECK_INT(cache_attach(e.cache, 42, "huge", &a, &ce, &changed), ==,
		  -EFBIG);
	CHECK(ce == NULL);
	a.size = (1ULL << 44) + 1;
	CHECK_INT(cache_hold(e.cache, 42, "huge", &a, &ce), ==, -EFBIG);
	env_fini(&e);
}

/* an entry is reused only if version and size both match */
static void test_size_change_drops_entry(void)
{
	struct ns_attr a = { .size = 100, .version = "v1" };
	struct centry *ce = NULL, *again = NULL;
	bool changed;
	struct env e;

	env_init(&e, 16 * CS, 0, READ_DIRECT);
	CHECK_INT(cache_attach(e.cache, 43, "k", &a, &ce, &changed), ==, 0);
	CHECK(!changed);
	a.size = 200;
	CHECK_INT(cache_attach(e.cache, 43, "k", &a, &again, &changed), ==, 0);
	CHECK(changed);
	CHECK(again != ce);
	cache_detach(e.cache, ce);
	cache_detach(e.cache, again);
	env_fini(&e);
}

int main(void)
{
	runner_name = "test_cache";
	log_level = LOG_ERR;
	TEST(test_chunk_len);
	TEST(test_restart_reuses_cache);
	TEST(test_corrupt_chunk_refetched);
	TEST(test_size_bound);
	TEST(test_changed_object);
	TEST(test_huge_size_refused);
	TEST(test_size_change_drops_entry);
	return runner_done();
}
