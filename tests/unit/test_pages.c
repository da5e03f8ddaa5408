// SPDX-License-Identifier: MIT
/*
 * Random reads fetch only the pages they need (--random-reads pages,
 * fetch.c, cache_pages.c) against the in-memory backend: what is fetched,
 * what is stored and counted, served again from disk, replaced by a whole
 * chunk, evicted and fetched again, dropped by a restart, and streams
 * still fetched as whole chunks.
 */
#include "cachenv.h"

#define PG 4096
/* past a reader's first 4 MiB, which start a stream (SEQ_WINDOW) */
#define FAR (4 * CS)

static uint64_t fid_of(const char *key)
{
	return hash64(key, strlen(key), 3);
}

/* a read of [@off, @off + @len) of @ce, its bytes checked against @data */
static void read_check(struct env *e, struct centry *ce, const char *data,
		       uint64_t off, size_t len)
{
	char *got = malloc(len);

	CHECK_INT(do_read(e, ce, off, len, got), ==, (ssize_t)len);
	CHECK(!memcmp(got, data + off, len));
	free(got);
	fetch_drain(e->fetch);		/* the pages are stored after the reply */
}

static void test_random_read_fetches_its_pages(void)
{
	struct env e;
	char *data = pattern(6 * CS, 11);
	uint64_t off = FAR + CS + 2 * PG + 100;
	struct centry *ce;

	env_init(&e, 64 * CS, 8, READ_DIRECT);
	mem_put(e.be, "tokens", data, 6 * CS);
	ce = attach(&e, "tokens", NULL);
	/* 8,196 bytes from 100 bytes into a page: three pages */
	read_check(&e, ce, data, off, 8196);
	CHECK_INT(mem_reads(e.be), ==, 1);
	CHECK_INT(e.st.bytes_from_backend, ==, 3 * PG);
	CHECK_INT(e.st.page_reads, ==, 1);
	CHECK_INT(e.st.readahead_chunks, ==, 0);
	CHECK_INT(e.st.page_bytes_stored, ==, 3 * PG);
	CHECK_INT(cache_file_bytes(e.cache, fid_of("tokens")), ==, 3 * PG);
	CHECK_INT(cache_chunk_state(e.cache, ce, 5), ==, CH_ABSENT);
	/* again, and a part of it: from the cache file */
	read_check(&e, ce, data, off, 8196);
	read_check(&e, ce, data, off + 4000, 4000);
	CHECK_INT(mem_reads(e.be), ==, 1);
	CHECK_INT(e.st.bytes_from_disk, ==, 8196 + 4000);
	/* on past what is stored: the read's two pages */
	read_check(&e, ce, data, off + 8196, 4096);
	CHECK_INT(mem_reads(e.be), ==, 2);
	CHECK_INT(e.st.bytes_from_backend, ==, 3 * PG + 2 * PG);
	CHECK_INT(cache_file_bytes(e.cache, fid_of("tokens")), ==, 4 * PG);
	/* a stream from the start: whole chunks, chunk 5's pages with it */
	read_check(&e, ce, data, 0, 6 * CS);
	CHECK_INT(cache_chunk_state(e.cache, ce, 5), ==, CH_PRESENT);
	CHECK_INT(cache_file_bytes(e.cache, fid_of("tokens")), ==, 6 * CS);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

/* a header, then its body right after it, at a random offset */
static void test_header_then_body_reads_no_chunk(void)
{
	struct env e;
	char *data = pattern(8 * CS, 12);
	uint64_t off = FAR + 2 * CS + 123456;
	struct centry *ce;

	env_init(&e, 64 * CS, 8, READ_DIRECT);
	mem_put(e.be, "records", data, 8 * CS);
	ce = attach(&e, "records", NULL);
	read_check(&e, ce, data, off, 512);
	read_check(&e, ce, data, off + 512, 100 << 10);
	CHECK_INT(e.st.readahead_chunks, ==, 0);
	CHECK_INT(e.st.chunks_stored, ==, 0);
	CHECK(e.st.bytes_from_backend <= 2 * (512 + (100 << 10)));
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

/*
 * Back-to-back reads are a stream once they ran 1 MiB (RUN_WHOLE), or
 * after 256 KiB move on to the next chunk: whole chunks from then on.
 */
static void test_a_run_of_reads_becomes_whole_chunks(void)
{
	struct env e;
	uint32_t cs = 4U << 20;
	char *data = pattern(4 * cs, 13);
	uint64_t off = cs + cs / 4, step = 128 << 10;
	struct centry *ce;
	int i;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	env_stop(&e);
	e.cf.chunk_size = cs;
	env_start(&e);
	mem_put(e.be, "stream", data, 4 * cs);
	ce = attach(&e, "stream", NULL);
	for (i = 0; i < 8; i++)
		read_check(&e, ce, data, off + i * step, step);
	/* seven reads as pages, the eighth ran 1 MiB: chunk 1 whole */
	CHECK_INT(e.st.page_reads, ==, 7);
	CHECK_INT(cache_chunk_state(e.cache, ce, 1), ==, CH_PRESENT);
	CHECK_INT(cache_file_bytes(e.cache, fid_of("stream")), ==, cs);
	/* a jump to the last 256 KiB of chunk 2: pages... */
	read_check(&e, ce, data, 3 * cs - 2 * step, step);
	read_check(&e, ce, data, 3 * cs - step, step);
	CHECK_INT(e.st.page_reads, ==, 9);
	/* ...and that run moving on to the next chunk is a stream */
	read_check(&e, ce, data, 3 * cs, step);
	CHECK_INT(e.st.page_reads, ==, 9);
	CHECK_INT(cache_chunk_state(e.cache, ce, 3), ==, CH_PRESENT);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

/*
 * The kernel's read-ahead requests of a stream reach the daemon in any
 * order: a reader's first reads anywhere in its first 4 MiB, and reads
 * within 4 MiB of a stream's furthest end, fetch whole chunks; a read
 * far from it fetches pages.
 */
static void test_out_of_order_stream_reads_fetch_chunks(void)
{
	struct env e;
	char *data = pattern(16 * CS, 18);
	struct centry *ce;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	mem_put(e.be, "s", data, 16 * CS);
	ce = attach(&e, "s", NULL);
	read_check(&e, ce, data, 2 * CS + (128 << 10), 128 << 10);
	read_check(&e, ce, data, 0, 128 << 10);
	read_check(&e, ce, data, CS + (512 << 10), 128 << 10);
	/* ahead of the furthest end (2 MiB + 256 KiB), within 4 MiB */
	read_check(&e, ce, data, 5 * CS + 4096, 128 << 10);
	CHECK_INT(e.st.page_reads, ==, 0);
	CHECK_INT(e.st.chunks_stored, ==, 4);
	/* far from it: no stream any more */
	read_check(&e, ce, data, 12 * CS + 4096, 4096);
	CHECK_INT(e.st.page_reads, ==, 1);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

/* --random-reads chunks: a random read fetches its whole chunk */
static void test_chunks_mode(void)
{
	struct env e;
	char *data = pattern(3 * CS, 14);
	struct centry *ce;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	env_random_reads(&e, false);
	mem_put(e.be, "c", data, 3 * CS);
	ce = attach(&e, "c", NULL);
	read_check(&e, ce, data, CS + 5000, 8196);
	CHECK_INT(e.st.page_reads, ==, 0);
	CHECK_INT(e.st.bytes_from_backend, ==, CS);
	CHECK_INT(cache_chunk_state(e.cache, ce, 1), ==, CH_PRESENT);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

/*
 * Pages are evicted like chunks (LRU, a cache of 16 pages): the cache
 * stays under its bound, and evicted pages (holes now) are fetched
 * again, never served as zeros.
 */
static void test_pages_evicted_and_fetched_again(void)
{
	struct env e;
	char *a = pattern(6 * CS, 15), *b = pattern(6 * CS, 16);
	struct centry *ca, *cb;
	uint64_t used, limit, files;
	int i;

	env_init(&e, 16 * PG, 0, READ_DIRECT);
	free(e.cf.evict);
	e.cf.evict = strdup("lru");
	env_stop(&e);
	env_start(&e);
	mem_put(e.be, "a", a, 6 * CS);
	mem_put(e.be, "b", b, 6 * CS);
	ca = attach(&e, "a", NULL);
	cb = attach(&e, "b", NULL);
	for (i = 0; i < 8; i++)		/* 16 pages of a */
		read_check(&e, ca, a, FAR + i * 10 * PG + PG, 2 * PG);
	CHECK_INT(cache_file_bytes(e.cache, fid_of("a")), ==, 16 * PG);
	for (i = 0; i < 8; i++)		/* b's take their place */
		read_check(&e, cb, b, FAR + 3 * PG + i * 7 * PG, 2 * PG);
	cache_usage(e.cache, &used, &limit, &files);
	CHECK_INT(used, <=, limit);
	CHECK_INT(cache_file_bytes(e.cache, fid_of("b")), ==, 16 * PG);
	CHECK_INT(cache_file_bytes(e.cache, fid_of("a")), ==, 0);
	CHECK_INT(e.st.evicted_bytes, >=, 16 * PG);
	i = (int)mem_reads(e.be);
	for (i = 0; i < 8; i++)		/* a's again: fetched, right bytes */
		read_check(&e, ca, a, FAR + i * 10 * PG + PG, 2 * PG);
	CHECK_INT(mem_reads(e.be), ==, 24);
	cache_detach(e.cache, ca);
	cache_detach(e.cache, cb);
	env_fini(&e);
	free(a);
	free(b);
}

/* pages are not indexed: a restart drops them (punched) and refetches */
static void test_restart_drops_pages(void)
{
	struct env e;
	char *data = pattern(6 * CS, 17);
	struct centry *ce;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	mem_put(e.be, "r", data, 6 * CS);
	ce = attach(&e, "r", NULL);
	read_check(&e, ce, data, FAR + CS + 3 * PG, 3 * PG);
	read_check(&e, ce, data, 0, 4096);	/* chunk 0 whole */
	cache_detach(e.cache, ce);
	env_stop(&e);
	env_start(&e);
	ce = attach(&e, "r", NULL);
	CHECK_INT(cache_file_bytes(e.cache, fid_of("r")), ==, CS);
	read_check(&e, ce, data, FAR + CS + 3 * PG, 3 * PG);
	CHECK_INT(e.st.page_reads, ==, 1);
	CHECK_INT(mem_reads(e.be), ==, 3);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

/* a listed range fetched ahead of its reader: its pages only, stored; a
 * reader of them meanwhile waits for that read; a range over a chunk
 * boundary is one read per chunk; nothing twice */
static void test_range_prefetch(void)
{
	struct env e;
	char *data = pattern(8 * CS, 13);
	uint64_t off = FAR + CS + 5 * PG + 10;
	struct result r;
	struct centry *ce;

	env_init(&e, 64 * CS, 8, READ_DIRECT);
	mem_put(e.be, "tokens", data, 8 * CS);
	ce = attach(&e, "tokens", NULL);
	CHECK_INT(cache_range_state(e.cache, ce, off, 8196), ==, CH_ABSENT);
	mem_hold(e.be);
	CHECK_INT(fetch_prefetch_range(e.fetch, ce, off, 8196), ==, 1);
	/* in flight: not again */
	CHECK_INT(fetch_prefetch_range(e.fetch, ce, off, 8196), ==, 0);
	/* a reader of a part of it waits for it */
	result_init(&r, 8192);
	CHECK_INT(fetch_read(e.fetch, ce, off + 4096, 4096, result_done, &r),
		  ==, 0);
	mem_release(e.be);
	result_wait(&r);
	CHECK_INT(r.err, ==, 0);
	CHECK(!memcmp(r.buf, data + off + 4096, 4096));
	free(r.buf);
	fetch_drain(e.fetch);
	CHECK_INT(mem_reads(e.be), ==, 1);
	CHECK_INT(e.st.bytes_from_backend, ==, 3 * PG);
	CHECK_INT(e.st.range_prefetches, ==, 1);
	CHECK_INT(e.st.page_bytes_stored, ==, 3 * PG);
	CHECK_INT(cache_range_state(e.cache, ce, off, 8196), ==, CH_PRESENT);
	CHECK_INT(fetch_prefetch_range(e.fetch, ce, off, 8196), ==, 0);
	read_check(&e, ce, data, off, 8196);
	CHECK_INT(mem_reads(e.be), ==, 1);
	/* over the end of chunk 5 into chunk 6: a read per chunk, the
	 * pages of each (2 and 1) */
	CHECK_INT(fetch_prefetch_range(e.fetch, ce, 6 * CS - 5000, 9000),
		  ==, 1);
	fetch_drain(e.fetch);
	CHECK_INT(mem_reads(e.be), ==, 3);
	CHECK_INT(e.st.bytes_from_backend, ==, 3 * PG + 3 * PG);
	/* past the file's end: cut there */
	CHECK_INT(fetch_prefetch_range(e.fetch, ce, 8 * CS - 100, 9000), ==, 1);
	fetch_drain(e.fetch);
	CHECK_INT(mem_reads(e.be), ==, 4);
	CHECK_INT(e.st.bytes_from_backend, ==, 3 * PG + 3 * PG + PG);
	CHECK_INT(fetch_prefetch_range(e.fetch, ce, 8 * CS, 10), ==, 0);
	CHECK_INT(e.st.chunks_stored, ==, 0);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

/* two random readers of the same pages at once: one backend read */
static void test_readers_of_the_same_pages_share_a_read(void)
{
	struct env e;
	char *data = pattern(6 * CS, 14);
	uint64_t off = FAR + CS + 7 * PG;
	struct result r[3];
	struct centry *ce;
	int i;

	env_init(&e, 64 * CS, 8, READ_DIRECT);
	mem_put(e.be, "tokens", data, 6 * CS);
	ce = attach(&e, "tokens", NULL);
	mem_hold(e.be);
	for (i = 0; i < 3; i++) {
		result_init(&r[i], 2 * PG);
		/* the second and third within the first one's pages */
		CHECK_INT(fetch_read(e.fetch, ce, off + i * 100, PG - i * 100,
				     result_done, &r[i]), ==, 0);
	}
	mem_release(e.be);
	for (i = 0; i < 3; i++) {
		result_wait(&r[i]);
		CHECK_INT(r[i].err, ==, 0);
		CHECK(!memcmp(r[i].buf, data + off + i * 100, PG - i * 100));
		free(r[i].buf);
	}
	fetch_drain(e.fetch);
	CHECK_INT(mem_reads(e.be), ==, 1);
	CHECK_INT(e.st.bytes_from_backend, ==, PG);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

int main(void)
{
	runner_name = "test_pages";
	log_level = LOG_ERR;
	TEST(test_random_read_fetches_its_pages);
	TEST(test_header_then_body_reads_no_chunk);
	TEST(test_a_run_of_reads_becomes_whole_chunks);
	TEST(test_out_of_order_stream_reads_fetch_chunks);
	TEST(test_chunks_mode);
	TEST(test_pages_evicted_and_fetched_again);
	TEST(test_restart_drops_pages);
	TEST(test_range_prefetch);
	TEST(test_readers_of_the_same_pages_share_a_read);
	return runner_done();
}
