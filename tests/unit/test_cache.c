// SPDX-License-Identifier: MIT
/*
 * The cache and the read path (cache.c, fetch.c, meta.c) against the
 * in-memory backend: chunk arithmetic, byte-exact reads, single flight,
 * persistence across a restart without backend reads, checksum failures,
 * the size bound, changed objects, retries.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_mem.h"
#include "cache.h"
#include "fetch.h"
#include "hash.h"
#include "log.h"
#include "meta.h"
#include "ns.h"
#include "runner.h"

#define CS	(1U << 20)

struct env {
	char dir[64];
	struct fusefs_conf cf;
	struct stats st;
	struct meta *meta;
	struct cache *cache;
	struct fetcher *fetch;
	struct backend *be;
};

static void env_start(struct env *e)
{
	char path[128];

	memset(&e->st, 0, sizeof(e->st));
	snprintf(path, sizeof(path), "%s/index", e->dir);
	CHECK_INT(meta_open(&e->meta, path), ==, 0);
	CHECK_INT(cache_open(&e->cache, &e->cf, e->meta, &e->st), ==, 0);
	CHECK_INT(fetch_create(&e->fetch, e->cache, e->be, &e->cf, &e->st), ==, 0);
}

static void env_stop(struct env *e)
{
	fetch_destroy(e->fetch);
	cache_close(e->cache);
	meta_close(e->meta);
}

static void env_init(struct env *e, uint64_t cache_size, unsigned readahead,
		     enum read_mode mode)
{
	strcpy(e->dir, "/tmp/fusefs-unit-XXXXXX");
	CHECK(mkdtemp(e->dir) != NULL);
	conf_init(&e->cf);
	e->cf.cache_dir = strdup(e->dir);
	e->cf.chunk_size = CS;
	e->cf.cache_size = cache_size;
	e->cf.readahead = readahead;
	e->cf.retries = 2;
	e->cf.read_mode = mode;
	e->be = mem_backend_create();
	env_start(e);
}

static void env_fini(struct env *e)
{
	char cmd[128];

	env_stop(e);
	mem_backend_destroy(e->be);
	conf_release(&e->cf);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", e->dir);
	CHECK_INT(system(cmd), ==, 0);
}

static char *pattern(size_t len, unsigned seed)
{
	char *p = malloc(len ? len : 1);
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (char)((i * 2654435761U + seed) >> 13);
	return p;
}

struct result {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
	char *buf;
	size_t len;
};

static void result_done(void *arg, int err, const struct fetch_piece *p, int n)
{
	struct result *r = arg;
	int i;

	pthread_mutex_lock(&r->lock);
	r->err = err;
	r->len = 0;
	for (i = 0; i < n; i++) {
		if (p[i].mem) {
			memcpy(r->buf + r->len, p[i].mem, p[i].len);
		} else if (pread(p[i].fd, r->buf + r->len, p[i].len,
				 p[i].off) != (ssize_t)p[i].len) {
			r->err = -EIO;
		}
		r->len += p[i].len;
	}
	r->done = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void result_init(struct result *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->buf = malloc(cap);
}

static void result_wait(struct result *r)
{
	pthread_mutex_lock(&r->lock);
	while (!r->done)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

/* read [off, off+len) through the read path; returns bytes or -errno */
static ssize_t do_read(struct env *e, struct centry *ce, uint64_t off,
		       size_t len, char *out)
{
	struct result r;
	ssize_t ret;
	int rc;

	result_init(&r, len + 1);
	rc = fetch_read(e->fetch, ce, off, len, result_done, &r);
	if (rc < 0) {
		free(r.buf);
		return rc;
	}
	result_wait(&r);
	ret = r.err ? r.err : (ssize_t)r.len;
	if (!r.err)
		memcpy(out, r.buf, r.len);
	free(r.buf);
	return ret;
}

/* whole file in 256 KiB reads, as the kernel would ask */
static int read_all(struct env *e, struct centry *ce, char *out, size_t size)
{
	uint64_t off;

	for (off = 0; off < size; off += 256 << 10) {
		ssize_t r = do_read(e, ce, off, 256 << 10, out + off);

		if (r < 0)
			return (int)r;
		if ((size_t)r != MIN((size_t)256 << 10, size - off))
			return -EIO;
	}
	return 0;
}

static struct centry *attach(struct env *e, const char *key, bool *changed)
{
	struct centry *ce = NULL;
	struct ns_attr a;
	bool dummy;

	CHECK_INT(e->be->ops->stat(e->be, key, &a), ==, 0);
	CHECK_INT(cache_attach(e->cache, hash64(key, strlen(key), 3), key, &a,
			       &ce, changed ? changed : &dummy), ==, 0);
	return ce;
}

/* valid bytes per chunk of an object of @size */
static void check_chunk_len(struct env *e, size_t size, uint32_t n,
			    uint32_t want)
{
	char key[32], *data = pattern(size, 7);
	struct centry *ce;

	snprintf(key, sizeof(key), "len-%zu", size);
	mem_put(e->be, key, data, size);
	ce = attach(e, key, NULL);
	CHECK_INT(cache_chunk_len(e->cache, ce, n), ==, want);
	cache_detach(e->cache, ce);
	free(data);
}

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

static void test_sizes_exact(void)
{
	static const size_t sizes[] = { 0, 1, CS - 1, CS, CS + 1, 5 * CS + 77 };
	enum read_mode modes[] = { READ_DIRECT, READ_BUFFERED };
	size_t i, m;

	for (m = 0; m < 2; m++) {
		struct env e;

		env_init(&e, 64 * CS, 2, modes[m]);
		for (i = 0; i < ARRAY_SIZE(sizes); i++) {
			char key[32], *data = pattern(sizes[i], i), *got;
			struct centry *ce;

			snprintf(key, sizeof(key), "f%zu", i);
			mem_put(e.be, key, data, sizes[i]);
			ce = attach(&e, key, NULL);
			got = calloc(1, sizes[i] + 1);
			CHECK_INT(read_all(&e, ce, got, sizes[i]), ==, 0);
			CHECK(!memcmp(got, data, sizes[i]));
			/* twice: the second time from the cache */
			memset(got, 0, sizes[i]);
			CHECK_INT(read_all(&e, ce, got, sizes[i]), ==, 0);
			CHECK(!memcmp(got, data, sizes[i]));
			/* at EOF and beyond */
			CHECK_INT(do_read(&e, ce, sizes[i], 4096, got), ==, 0);
			cache_detach(e.cache, ce);
			free(got);
			free(data);
		}
		env_fini(&e);
	}
}

static void test_single_flight(void)
{
	struct env e;
	struct result r[8];
	char *data = pattern(3 * CS, 1);
	struct centry *ce;
	int i;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	mem_put(e.be, "big", data, 3 * CS);
	ce = attach(&e, "big", NULL);
	mem_hold(e.be);
	for (i = 0; i < 8; i++) {
		result_init(&r[i], 64 << 10);
		/* eight readers of chunk 1 at different offsets */
		CHECK_INT(fetch_read(e.fetch, ce, CS + i * 4096, 4096,
				     result_done, &r[i]), ==, 0);
	}
	mem_release(e.be);
	for (i = 0; i < 8; i++) {
		result_wait(&r[i]);
		CHECK_INT(r[i].err, ==, 0);
		CHECK(!memcmp(r[i].buf, data + CS + i * 4096, 4096));
		free(r[i].buf);
	}
	CHECK_INT(mem_reads(e.be), ==, 1);
	CHECK_INT(e.st.misses, ==, 8);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

static void test_readahead(void)
{
	struct env e;
	char *data = pattern(6 * CS, 2), *got = malloc(6 * CS);
	struct centry *ce;

	env_init(&e, 64 * CS, 3, READ_DIRECT);
	mem_put(e.be, "seq", data, 6 * CS);
	ce = attach(&e, "seq", NULL);
	CHECK_INT(do_read(&e, ce, 0, 4096, got), ==, 4096);
	/* chunks 1..3 were fetched ahead without being asked for */
	CHECK_INT(e.st.readahead_chunks, ==, 3);
	CHECK_INT(read_all(&e, ce, got, 6 * CS), ==, 0);
	CHECK(!memcmp(got, data, 6 * CS));
	CHECK_INT(mem_reads(e.be), ==, 6);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
	free(got);
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

static void test_replaced_mid_read(void)
{
	struct env e;
	char *v1 = pattern(2 * CS, 9), *got = malloc(2 * CS);
	struct centry *ce;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	mem_put(e.be, "r", v1, 2 * CS);
	ce = attach(&e, "r", NULL);
	CHECK_INT(do_read(&e, ce, 0, 4096, got), ==, 4096);
	mem_put(e.be, "r", v1, 2 * CS);		/* new version, same bytes */
	CHECK_INT(do_read(&e, ce, CS, 4096, got), ==, -EIO);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(v1);
	free(got);
}

static void test_retries(void)
{
	struct env e;
	char *data = pattern(CS, 10), *got = malloc(CS);
	struct centry *ce;

	env_init(&e, 64 * CS, 0, READ_DIRECT);	/* retries = 2 */
	mem_put(e.be, "flaky", data, CS);
	ce = attach(&e, "flaky", NULL);
	mem_fail(e.be, 2, -ETIMEDOUT);
	CHECK_INT(do_read(&e, ce, 0, 4096, got), ==, 4096);
	CHECK(!memcmp(got, data, 4096));
	CHECK_INT(e.st.backend_retries, ==, 2);
	cache_detach(e.cache, ce);
	mem_put(e.be, "dead", data, CS);
	ce = attach(&e, "dead", NULL);
	mem_fail(e.be, 3, -EIO);
	CHECK_INT(do_read(&e, ce, 0, 4096, got), ==, -EIO);
	/* and the next read works again */
	CHECK_INT(do_read(&e, ce, 0, 4096, got), ==, 4096);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
	free(got);
}

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
	TEST(test_sizes_exact);
	TEST(test_single_flight);
	TEST(test_readahead);
	TEST(test_restart_reuses_cache);
	TEST(test_corrupt_chunk_refetched);
	TEST(test_size_bound);
	TEST(test_changed_object);
	TEST(test_replaced_mid_read);
	TEST(test_retries);
	TEST(test_index_batched);
	TEST(test_huge_size_refused);
	TEST(test_size_change_drops_entry);
	return runner_done();
}
