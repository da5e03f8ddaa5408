// SPDX-License-Identifier: MIT
/*
 * The read path (fetch.c) against the in-memory backend: byte-exact
 * reads, single flight, read-ahead, an object replaced mid-read, retries,
 * buffers of a chunk's length and their pool, chunks held in memory.
 */
#include <unistd.h>

#include "cachenv.h"
#include "membudget.h"
#include "memchunk.h"

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
	env_random_reads(&e, false);	/* whole chunks: one read for all */
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
	char *data = pattern(12 * CS, 2), *got = malloc(12 * CS);
	struct centry *ce;

	env_init(&e, 64 * CS, 3, READ_DIRECT);
	env_random_reads(&e, false);	/* whole chunks: backend reads counted */
	mem_put(e.be, "seq", data, 12 * CS);
	ce = attach(&e, "seq", NULL);
	/* reads within one chunk, a header and then its body, are no stream */
	CHECK_INT(do_read(&e, ce, 0, 512, got), ==, 512);
	CHECK_INT(do_read(&e, ce, 512, 100 << 10, got), ==, 100 << 10);
	CHECK_INT(e.st.readahead_chunks, ==, 0);
	/* nor is a jump from there */
	CHECK_INT(do_read(&e, ce, 10 * CS + 8192, 4096, got), ==, 4096);
	CHECK_INT(e.st.readahead_chunks, ==, 0);
	/* moving on to the next chunk after a run of reads is: two chunks
	 * ahead (2, 3) */
	CHECK_INT(do_read(&e, ce, 512 + (100 << 10), CS - 512 - (100 << 10),
			  got), ==, CS - 512 - (100 << 10));
	CHECK_INT(do_read(&e, ce, CS, 4096, got), ==, 4096);
	CHECK_INT(e.st.readahead_chunks, ==, 2);
	/* a request of the stream overtaken by the next keeps it */
	CHECK_INT(do_read(&e, ce, CS - 4096, 4096, got), ==, 4096);
	/* on to chunk 2: a window of --readahead (3): 3, 4, 5, of which 4
	 * and 5 are new */
	CHECK_INT(do_read(&e, ce, 2 * CS, 4096, got), ==, 4096);
	CHECK_INT(e.st.readahead_chunks, ==, 4);
	/* a jump begins a new stream: nothing ahead of chunk 9 */
	CHECK_INT(do_read(&e, ce, 8 * CS + 100, 4096, got), ==, 4096);
	CHECK_INT(e.st.readahead_chunks, ==, 4);
	CHECK_INT(read_all(&e, ce, got, 12 * CS), ==, 0);
	CHECK(!memcmp(got, data, 12 * CS));
	CHECK_INT(mem_reads(e.be), ==, 12);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
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
	unsigned reads;

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
	fetch_set_failure_memory(e.fetch, 10000);	/* off by default */
	mem_fail(e.be, 3, -EIO);
	CHECK_INT(do_read(&e, ce, 0, 4096, got), ==, -EIO);
	/* a read right after fails at once, without asking the backend */
	reads = mem_reads(e.be);
	CHECK_INT(do_read(&e, ce, 0, 4096, got), ==, -EIO);
	CHECK_INT(mem_reads(e.be), ==, reads);
	/* and once the failure is forgotten, the next read works again */
	fetch_set_failure_memory(e.fetch, 0);
	CHECK_INT(do_read(&e, ce, 0, 4096, got), ==, 4096);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
	free(got);
}

/* demand reads past --memory-limit wait for memory, never fail */
static void test_memory_bound(void)
{
	struct membudget_usage u;
	struct result r[12];
	struct env e;
	char *data = pattern(12 * CS, 11);
	struct centry *ce;
	int i;

	env_init(&e, 64 * CS, 2, READ_DIRECT);
	env_stop(&e);
	e.cf.memory_limit = 4 * CS;
	e.cf.page_reads = false;	/* whole-chunk buffers */
	env_start(&e);
	mem_put(e.be, "wide", data, 12 * CS);
	ce = attach(&e, "wide", NULL);
	mem_hold(e.be);
	for (i = 0; i < 12; i++) {
		result_init(&r[i], 64 << 10);
		/* twelve readers of twelve chunks: four fit */
		CHECK_INT(fetch_read(e.fetch, ce, (uint64_t)i * CS + 100, 4096,
				     result_done, &r[i]), ==, 0);
	}
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(u.used, <=, 4 * CS);
	CHECK_INT(u.refused, >, 0);
	mem_release(e.be);
	for (i = 0; i < 12; i++) {
		result_wait(&r[i]);
		CHECK_INT(r[i].err, ==, 0);
		CHECK(!memcmp(r[i].buf, data + (size_t)i * CS + 100, 4096));
		free(r[i].buf);
	}
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(u.peak, <=, 5 * CS);		/* one chunk of overdraft */
	CHECK_INT(mem_reads(e.be), ==, 12);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
}

/* a small file's chunk takes a buffer of its length (a power of two up
 * to 256 KiB: 128 KiB), not a whole chunk: twelve cold 100 KiB files fit
 * in flight where four whole chunks would */
static void test_small_chunks_charge_their_length(void)
{
	struct membudget_usage u;
	struct result r[12];
	struct centry *ce[12];
	struct env e;
	char *data = pattern(100 << 10, 12);
	int i;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	env_stop(&e);
	e.cf.memory_limit = 4 * CS;
	env_start(&e);
	mem_hold(e.be);
	for (i = 0; i < 12; i++) {
		char key[32];

		snprintf(key, sizeof(key), "small%d", i);
		mem_put(e.be, key, data, 100 << 10);
		ce[i] = attach(&e, key, NULL);
		result_init(&r[i], 100 << 10);
		CHECK_INT(fetch_read(e.fetch, ce[i], 0, 100 << 10, result_done,
				     &r[i]), ==, 0);
	}
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(chunkbuf_charge(100 << 10), ==, 128 << 10);
	CHECK_INT(u.used, ==, 12 * (128 << 10));
	CHECK_INT(u.refused, ==, 0);
	CHECK_INT(mem_reads(e.be), ==, 0);	/* all twelve held in flight */
	mem_release(e.be);
	for (i = 0; i < 12; i++) {
		result_wait(&r[i]);
		CHECK_INT(r[i].err, ==, 0);
		CHECK_INT(r[i].len, ==, 100 << 10);
		CHECK(!memcmp(r[i].buf, data, 100 << 10));
		free(r[i].buf);
		cache_detach(e.cache, ce[i]);
	}
	env_fini(&e);
	free(data);
}

/* a held chunk is neither replaced nor dropped nor reclaimed until its
 * unhold: while it is written to the cache, readers find it in the set */
static void test_memchunk_holds(void)
{
	struct memchunks m;
	struct chunkbuf *a = chunkbuf_new(4096), *b = chunkbuf_new(4096);
	struct chunkbuf *c = chunkbuf_new(4096), *d = chunkbuf_new(4096);

	CHECK_INT(memchunks_init(&m, 2), ==, 0);
	memchunks_put(&m, 1, 1, 0, a);
	memchunks_put(&m, 2, 1, 0, b);
	CHECK(memchunks_hold(&m, 1, 1, 0) == a);	/* a: held */
	memchunks_get(&m, 2, 1, 0);			/* a is the LRU now */
	memchunks_put(&m, 3, 1, 0, c);			/* replaces b, not a */
	chunkbuf_put(a);			/* the set's references only */
	chunkbuf_put(c);
	CHECK(memchunks_has(&m, 1, 1, 0) && !memchunks_has(&m, 2, 1, 0));
	memchunks_drop(&m, 1, 1);
	CHECK(memchunks_has(&m, 1, 1, 0));		/* held: stays */
	CHECK(memchunks_hold(&m, 3, 1, 0) == c);
	memchunks_put(&m, 4, 1, 0, d);			/* every slot held */
	CHECK(!memchunks_has(&m, 4, 1, 0));
	CHECK(!memchunks_reclaim(&m));
	memchunks_unhold(&m, 1, 1, 0);
	memchunks_unhold(&m, 3, 1, 0);
	memchunks_drop(&m, 1, 1);
	CHECK(!memchunks_has(&m, 1, 1, 0));
	CHECK(memchunks_reclaim(&m));			/* c goes */
	CHECK(!memchunks_has(&m, 3, 1, 0));
	memchunks_release(&m);
	chunkbuf_put(b);
	chunkbuf_put(d);
}

/* idle small mappings are reused (the same one comes back), the pool is
 * bounded, and large buffers are never pooled */
static void test_chunkbuf_pool(void)
{
	struct chunkbuf *cb[64], *again;
	size_t before = chunkbuf_pooled();
	void *p;
	int i;

	cb[0] = chunkbuf_new(100 << 10);
	CHECK(cb[0] != NULL);
	CHECK_INT(cb[0]->mapped, ==, 128 << 10);
	memset(cb[0]->data, 7, cb[0]->mapped);	/* all of it is ours */
	p = cb[0]->data;
	chunkbuf_put(cb[0]);
	again = chunkbuf_new(65 << 10);		/* same class */
	CHECK(again->data == p);
	chunkbuf_put(again);
	for (i = 0; i < 64; i++)
		cb[i] = chunkbuf_new(256 << 10);
	for (i = 0; i < 64; i++)
		chunkbuf_put(cb[i]);
	CHECK_INT(chunkbuf_pooled(), <=, CHUNKBUF_POOL_MAX);
	CHECK_INT(chunkbuf_pooled(), >=, before);
	cb[0] = chunkbuf_new(CS);
	CHECK_INT(cb[0]->mapped, ==, CS);
	before = chunkbuf_pooled();
	chunkbuf_put(cb[0]);
	CHECK_INT(chunkbuf_pooled(), ==, before);	/* unmapped */
}

/* verified chunks handed to an open file are charged as read-ahead, and
 * not kept when the budget has no read-ahead room (3/4 of the limit) */
static void test_keep_verified_is_charged(void)
{
	struct membudget_usage u;
	struct chunkbuf *cb[6];
	struct env e;
	char *data = pattern(6 * CS, 12);
	struct centry *ce;
	int i, kept = 0;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	env_stop(&e);
	e.cf.memory_limit = 4 * CS;
	env_start(&e);
	mem_put(e.be, "v", data, 6 * CS);
	ce = attach(&e, "v", NULL);
	for (i = 0; i < 6; i++) {
		cb[i] = chunkbuf_new(CS);		/* as the verifier's */
		CHECK(cb[i] != NULL);
		fetch_keep_verified(e.fetch, ce, (uint32_t)i, cb[i]);
		kept += chunkbuf_refs(cb[i]) > 1;
	}
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(kept, ==, 3);			/* 3/4 of 4 chunks */
	CHECK_INT(u.by_class[MB_AHEAD], ==, 3 * CS);
	for (i = 0; i < 6; i++)
		chunkbuf_put(cb[i]);
	fetch_close(e.fetch, ce);		/* the set goes with the file */
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(u.by_class[MB_AHEAD], ==, 0);
	CHECK_INT(u.used, ==, 0);
	env_fini(&e);
	free(data);
}

/* wait until no chunk of @ce in 0..@n is being staged (a hang guard of
 * a minute, not a timing) */
static void wait_staged(struct env *e, struct centry *ce, uint32_t n)
{
	int i;
	uint32_t c;

	for (i = 0; i < 60000; i++) {
		for (c = 0; c < n; c++)
			if (cache_chunk_state(e->cache, ce, c) == CH_FETCHING)
				break;
		if (c == n) {
			fetch_drain(e->fetch);	/* their buffers' last puts */
			return;
		}
		usleep(1000);
	}
	CHECK(!"staged chunks did not arrive");
}

/*
 * Staged chunks (fetch_stage()): fetched once into memory, not written to
 * the cache while staged, served to the reader without a second backend
 * read, bounded by half the memory budget (a small file's chunk at its
 * size), stored from memory when a prefetch asks for them after all or
 * at the last close (the cache has room here), dropped unread when their
 * file left the window.
 */
static void test_stage(void)
{
	struct membudget_usage u;
	struct env e;
	char *data = pattern(4 * CS, 13), *got = malloc(4 * CS);
	struct centry *ce;
	uint32_t c;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	env_stop(&e);
	e.cf.memory_limit = 14 * CS;		/* staging: 7 chunks */
	e.cf.ahead_ms = 0;		/* no link bound: the budget's alone */
	env_start(&e);
	mem_put(e.be, "st", data, 4 * CS);
	ce = attach(&e, "st", NULL);
	for (c = 0; c < 4; c++)
		CHECK_INT(fetch_stage(e.fetch, ce, c, false), ==, 1);
	CHECK_INT(fetch_stage(e.fetch, ce, 4, false), ==, 0);	/* past the end */
	wait_staged(&e, ce, 4);
	for (c = 0; c < 4; c++) {
		CHECK_INT(cache_chunk_state(e.cache, ce, c), ==, CH_ABSENT);
		CHECK(fetch_is_staged(e.fetch, ce, c));
		CHECK_INT(fetch_stage(e.fetch, ce, c, false), ==, 0);	/* once */
	}
	CHECK_INT(e.st.staged_chunks, ==, 4);
	CHECK_INT(e.st.chunks_stored, ==, 0);
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(u.by_class[MB_AHEAD], >=, 4 * CS);

	/* the reader: every byte from memory, no backend read, no miss */
	CHECK_INT(read_all(&e, ce, got, 4 * CS), ==, 0);
	CHECK(!memcmp(got, data, 4 * CS));
	CHECK_INT(mem_reads(e.be), ==, 4);
	CHECK_INT(e.st.misses, ==, 0);
	CHECK_INT(e.st.chunks_stored, ==, 0);

	/* the policy wants chunk 0 after all: stored from memory */
	CHECK_INT(fetch_prefetch(e.fetch, ce, 0, false), ==, 1);
	CHECK_INT(cache_chunk_state(e.cache, ce, 0), ==, CH_PRESENT);
	CHECK(!fetch_is_staged(e.fetch, ce, 0));
	CHECK_INT(e.st.staged_stored, ==, 1);
	CHECK_INT(mem_reads(e.be), ==, 4);

	/* the last close offers the rest to the cache, which has room:
	 * written from memory (they extend chunk 0 on disk), none unread */
	cache_busy_get(e.cache, ce);
	fetch_close(e.fetch, ce);
	CHECK(!fetch_is_staged(e.fetch, ce, 1));
	for (c = 1; c < 4; c++)
		CHECK_INT(cache_chunk_state(e.cache, ce, c), ==, CH_PRESENT);
	cache_busy_put(e.cache, ce);
	CHECK_INT(e.st.staged_stored, ==, 4);
	CHECK_INT(e.st.staged_unread, ==, 0);
	CHECK_INT(mem_reads(e.be), ==, 4);
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(u.used, ==, 0);

	/* the bound: half of 14 chunks' budget, then -ENOSPC */
	mem_put(e.be, "wide", data, 4 * CS);
	mem_put(e.be, "wide2", data, 4 * CS);
	{
		struct centry *a = attach(&e, "wide", NULL);
		struct centry *b = attach(&e, "wide2", NULL);
		uint64_t ids[1];
		struct cache_ident ci;
		int started = 0, rc = 0;

		for (c = 0; c < 8 && rc != -ENOSPC; c++) {
			rc = fetch_stage(e.fetch, c < 4 ? a : b, c % 4, false);
			started += rc == 1;
		}
		CHECK_INT(rc, ==, -ENOSPC);
		CHECK_INT(started, ==, 7);
		wait_staged(&e, a, 4);
		wait_staged(&e, b, 4);
		/* "wide" is in the window, "wide2" neither there nor open */
		cache_ident(a, &ci);
		ids[0] = ci.fid;
		CHECK(fetch_is_staged(e.fetch, b, 2));
		cache_detach(e.cache, b);	/* closed, its chunks left */
		fetch_stage_keep(e.fetch, ids, 1);
		CHECK_INT(e.st.staged_unread, ==, 3);	/* dropped unread */
		CHECK(fetch_is_staged(e.fetch, a, 0));
		fetch_stage_keep(e.fetch, NULL, 0);	/* open: kept */
		CHECK(fetch_is_staged(e.fetch, a, 0));
		fetch_close(e.fetch, a);	/* stored, not dropped */
		CHECK_INT(e.st.staged_unread, ==, 3);
		CHECK_INT(e.st.staged_stored, ==, 8);
	}
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(u.used, ==, 0);

	/* a file smaller than a chunk takes its own size, not a chunk's */
	mem_put(e.be, "small", data, 10000);
	ce = attach(&e, "small", NULL);
	CHECK_INT(fetch_stage(e.fetch, ce, 0, false), ==, 1);
	wait_staged(&e, ce, 1);
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(u.by_class[MB_AHEAD], ==, 16384);	/* its size class */
	CHECK_INT(read_all(&e, ce, got, 10000), ==, 0);
	CHECK(!memcmp(got, data, 10000));
	fetch_close(e.fetch, ce);
	CHECK_INT(e.st.staged_unread, ==, 3);
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(u.used, ==, 0);
	env_fini(&e);
	free(data);
	free(got);
}

/* a reader's answer that holds its completion thread until let go */
struct held {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool entered, go;
	int err;
};

static void held_done(void *arg, int err, const struct fetch_piece *p, int n)
{
	struct held *h = arg;

	pthread_mutex_lock(&h->lock);
	h->entered = true;
	h->err = err;
	pthread_cond_broadcast(&h->cond);
	while (!h->go)
		pthread_cond_wait(&h->cond, &h->lock);
	pthread_mutex_unlock(&h->lock);
}

/*
 * A staged chunk counts once against the staging bound, also while its
 * completion is still answering its reader: it is in the staged set from
 * then on, no longer a staging read (counted twice, a fetch_stage() that
 * fits was refused with -ENOSPC, depending on how fast the completion
 * thread got to free its read).  The reader's answer holds the completion
 * at that point.
 */
static void test_stage_counted_once(void)
{
	struct held h = { .lock = PTHREAD_MUTEX_INITIALIZER,
			  .cond = PTHREAD_COND_INITIALIZER };
	char *data = pattern(5 * CS, 19);
	struct centry *a, *b;
	struct env e;
	uint32_t c;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	env_stop(&e);
	e.cf.memory_limit = 14 * CS;		/* staging: 7 chunks */
	e.cf.ahead_ms = 0;
	env_start(&e);
	mem_put(e.be, "a", data, 5 * CS);
	mem_put(e.be, "b", data, 2 * CS);
	a = attach(&e, "a", NULL);
	b = attach(&e, "b", NULL);
	for (c = 0; c < 5; c++)
		CHECK_INT(fetch_stage(e.fetch, a, c, false), ==, 1);
	wait_staged(&e, a, 5);
	/* the 6th, with a reader waiting for it */
	mem_hold(e.be);
	CHECK_INT(fetch_stage(e.fetch, b, 0, false), ==, 1);
	CHECK_INT(fetch_read(e.fetch, b, 0, 4096, held_done, &h), ==, 0);
	mem_release(e.be);
	pthread_mutex_lock(&h.lock);
	while (!h.entered)
		pthread_cond_wait(&h.cond, &h.lock);
	pthread_mutex_unlock(&h.lock);
	CHECK_INT(h.err, ==, 0);
	CHECK(fetch_is_staged(e.fetch, b, 0));
	/* 6 staged + 1: the 7th fits */
	CHECK_INT(fetch_stage(e.fetch, b, 1, false), ==, 1);
	pthread_mutex_lock(&h.lock);
	h.go = true;
	pthread_cond_broadcast(&h.cond);
	pthread_mutex_unlock(&h.lock);
	wait_staged(&e, b, 2);
	CHECK_INT(e.st.staged_chunks, ==, 7);
	CHECK_INT(mem_reads(e.be), ==, 7);
	fetch_close(e.fetch, a);
	fetch_close(e.fetch, b);
	env_fini(&e);
	free(data);
}

static bool want_flag;
static uint64_t want_at;	/* what the readers read before the file */

static bool want(void *arg, uint64_t fid, uint64_t within)
{
	(void)arg;
	(void)fid;
	return want_flag && want_at < within;
}

/*
 * Prefetches for a queued epoch's read (not @current) count their bytes
 * in prefetch_queued_bytes, so that a benchmark can charge what an epoch
 * fetched for the next one to the next one; the current epoch's do not.
 */
static void test_queued_prefetch_counted(void)
{
	struct env e;
	char *data = pattern(3 * CS, 23);
	struct centry *now, *next;
	uint32_t c;

	env_init(&e, 8 * CS, 0, READ_DIRECT);
	mem_put(e.be, "now", data, 2 * CS);
	mem_put(e.be, "next", data, 3 * CS - 100);
	now = attach(&e, "now", NULL);
	next = attach(&e, "next", NULL);
	for (c = 0; c < 2; c++)
		CHECK_INT(fetch_prefetch(e.fetch, now, c, true), ==, 1);
	wait_staged(&e, now, 2);
	CHECK_INT(e.st.prefetch_chunks, ==, 2);
	CHECK_INT(e.st.prefetch_queued_bytes, ==, 0);
	for (c = 0; c < 3; c++)
		CHECK_INT(fetch_prefetch(e.fetch, next, c, false), ==, 1);
	wait_staged(&e, next, 3);
	CHECK_INT(e.st.prefetch_chunks, ==, 5);
	CHECK_INT(e.st.prefetch_queued_bytes, ==, 3 * CS - 100);
	CHECK_INT(e.st.bytes_from_backend, ==, 5 * CS - 100);
	for (c = 0; c < 3; c++)
		CHECK_INT(cache_chunk_state(e.cache, next, c), ==, CH_PRESENT);
	cache_detach(e.cache, now);
	cache_detach(e.cache, next);
	env_fini(&e);
	free(data);
}

/*
 * A last close keeps the staged chunks the cache did not take while a
 * list's reader is to read the file soon in its current epoch: the
 * release of an epoch's last file may come after the next epoch began
 * with that file in it, and its reader then reads them from memory, no
 * second fetch.  Once no reader wants the file, or only after more bytes
 * than staging holds (they would crowd out the staging of the files
 * before it), its last close drops them.
 */
static void test_stage_kept_for_a_reader_to_come(void)
{
	struct membudget_usage u;
	struct env e;
	char *data = pattern(4 * CS, 17), *got = malloc(4 * CS);
	struct centry *ce;
	uint32_t c;

	env_init(&e, CS, 0, READ_DIRECT);	/* room for one chunk */
	env_stop(&e);
	e.cf.memory_limit = 14 * CS;
	env_start(&e);
	fetch_set_wanted(e.fetch, want, NULL);
	want_flag = true;
	mem_put(e.be, "late", data, 4 * CS);
	ce = attach(&e, "late", NULL);
	for (c = 0; c < 4; c++)
		CHECK_INT(fetch_stage(e.fetch, ce, c, true), ==, 1);
	wait_staged(&e, ce, 4);
	CHECK_INT(read_all(&e, ce, got, 4 * CS), ==, 0);
	CHECK(!memcmp(got, data, 4 * CS));
	CHECK_INT(mem_reads(e.be), ==, 4);

	/* released while still wanted: chunk 0 to the cache, the rest kept */
	cache_busy_get(e.cache, ce);
	fetch_close(e.fetch, ce);
	CHECK_INT(cache_chunk_state(e.cache, ce, 0), ==, CH_PRESENT);
	for (c = 1; c < 4; c++) {
		CHECK_INT(cache_chunk_state(e.cache, ce, c), ==, CH_ABSENT);
		CHECK(fetch_is_staged(e.fetch, ce, c));
	}
	CHECK_INT(e.st.staged_unread, ==, 0);

	/* the next epoch's reader: every byte from the cache or memory */
	CHECK(attach(&e, "late", NULL) == ce);
	memset(got, 0, 4 * CS);
	CHECK_INT(read_all(&e, ce, got, 4 * CS), ==, 0);
	CHECK(!memcmp(got, data, 4 * CS));
	CHECK_INT(mem_reads(e.be), ==, 4);

	/* read, wanted no more: its last close drops them */
	want_flag = false;
	fetch_close(e.fetch, ce);
	for (c = 1; c < 4; c++)
		CHECK(!fetch_is_staged(e.fetch, ce, c));

	/* wanted, but after what staging holds (7 chunks): dropped too */
	CHECK(attach(&e, "late", NULL) == ce);
	for (c = 1; c < 4; c++)
		CHECK_INT(fetch_stage(e.fetch, ce, c, false), ==, 1);
	wait_staged(&e, ce, 4);
	CHECK_INT(mem_reads(e.be), ==, 7);
	want_flag = true;
	want_at = 7 * CS;
	fetch_close(e.fetch, ce);
	for (c = 1; c < 4; c++)
		CHECK(!fetch_is_staged(e.fetch, ce, c));
	want_flag = false;
	want_at = 0;
	cache_busy_put(e.cache, ce);
	membudget_usage(fetch_budget(e.fetch), &u);
	CHECK_INT(u.used, ==, 0);
	env_fini(&e);
	free(data);
	free(got);
}

/*
 * Over a slow link, read-ahead and prefetch in flight are bounded by
 * what the link delivers in half a second (linkrate.h), at least two
 * chunks counting the reads a reader waits for: a chunk needed next does
 * not share the link with many needed later.
 */
static void test_speculation_bounded_by_link(void)
{
	struct env e;
	char *data = pattern(8 * CS, 17), *got = malloc(8 * CS);
	struct centry *warm, *ce, *pf;
	struct result r, r2;

	env_init_ahead(&e, 64 * CS, 4, READ_DIRECT, 50);
	mem_put(e.be, "warm", data, CS);
	mem_put(e.be, "seq", data, 8 * CS);
	mem_put(e.be, "pf", data, 4 * CS);
	/* one chunk that takes 300 ms: a link of at most 3.4 MiB/s */
	warm = attach(&e, "warm", NULL);
	mem_hold(e.be);
	result_init(&r, 4096 + 1);
	CHECK_INT(fetch_read(e.fetch, warm, 0, 4096, result_done, &r), ==, 0);
	usleep(300000);
	mem_release(e.be);
	result_wait(&r);
	CHECK_INT(r.err, ==, 0);
	free(r.buf);

	/* a sequential reader's two chunks in flight take the floor of two
	 * chunks: none of the read-ahead its stream asks for (chunks 2, 3) */
	ce = attach(&e, "seq", NULL);
	mem_hold(e.be);
	result_init(&r, 4096 + 1);
	result_init(&r2, 4096 + 1);
	CHECK_INT(fetch_read(e.fetch, ce, 0, 4096, result_done, &r), ==, 0);
	CHECK_INT(fetch_read(e.fetch, ce, CS, 4096, result_done, &r2), ==, 0);
	CHECK_INT(e.st.readahead_chunks, ==, 0);
	/* and no prefetch while those two are in flight */
	pf = attach(&e, "pf", NULL);
	CHECK_INT(fetch_prefetch(e.fetch, pf, 0, false), ==, -EBUSY);
	usleep(300000);		/* as slow as the first */
	mem_release(e.be);
	result_wait(&r);
	result_wait(&r2);
	CHECK_INT(r.err, ==, 0);
	CHECK_INT(r2.err, ==, 0);
	CHECK(!memcmp(r.buf, data, 4096));
	CHECK(!memcmp(r2.buf, data + CS, 4096));
	free(r.buf);
	free(r2.buf);

	/* nothing in flight: prefetches start again, two at a time */
	mem_hold(e.be);
	CHECK_INT(fetch_prefetch(e.fetch, pf, 0, false), ==, 1);
	CHECK_INT(fetch_prefetch(e.fetch, pf, 1, false), ==, 1);
	CHECK_INT(fetch_prefetch(e.fetch, pf, 2, false), ==, -EBUSY);
	mem_release(e.be);

	/* every byte right, bounded or not */
	CHECK_INT(read_all(&e, ce, got, 8 * CS), ==, 0);
	CHECK(!memcmp(got, data, 8 * CS));
	CHECK_INT(read_all(&e, pf, got, 4 * CS), ==, 0);
	CHECK(!memcmp(got, data, 4 * CS));
	cache_detach(e.cache, warm);
	cache_detach(e.cache, ce);
	cache_detach(e.cache, pf);
	env_fini(&e);
	free(data);
	free(got);
}

int main(void)
{
	runner_name = "test_fetch";
	log_level = LOG_ERR;
	TEST(test_sizes_exact);
	TEST(test_single_flight);
	TEST(test_readahead);
	TEST(test_replaced_mid_read);
	TEST(test_retries);
	TEST(test_memory_bound);
	TEST(test_small_chunks_charge_their_length);
	TEST(test_chunkbuf_pool);
	TEST(test_memchunk_holds);
	TEST(test_keep_verified_is_charged);
	TEST(test_stage);
	TEST(test_stage_counted_once);
	TEST(test_stage_kept_for_a_reader_to_come);
	TEST(test_queued_prefetch_counted);
	TEST(test_speculation_bounded_by_link);
	return runner_done();
}
