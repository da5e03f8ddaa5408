// SPDX-License-Identifier: MIT
/*
 * The cache (cache.c, cache_load.c) against the in-memory backend: chunk
 * arithmetic, persistence across a restart without backend reads,
 * checksum failures, the size bound, changed objects, sizes refused.
 */
#include <dirent.h>
#include <stdatomic.h>

#include "cachenv.h"
#include "../../src/cache_priv.h"	/* spare_keep(), spare_take() */
#include "chunkbuf.h"

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
	/* after a crash (no clean-stop records): each chunk read and checked */
	env_restart(&e, false);
	ce = attach(&e, "keep", NULL);
	memset(got, 0, 4 * CS + 5);
	CHECK_INT(read_all(&e, ce, got, 4 * CS + 5), ==, 0);
	CHECK(!memcmp(got, data, 4 * CS + 5));
	CHECK_INT(mem_reads(e.be), ==, 5);		/* no backend read */
	CHECK_INT(e.st.verified_chunks, ==, 5);
	CHECK_INT(e.st.stop_trusted_chunks, ==, 0);
	cache_detach(e.cache, ce);
	/* after a clean stop: the file as it was left, nothing read again */
	env_restart(&e, true);
	CHECK_INT(cache_unverified_total(e.cache), ==, 0);
	ce = attach(&e, "keep", NULL);
	memset(got, 0, 4 * CS + 5);
	CHECK_INT(read_all(&e, ce, got, 4 * CS + 5), ==, 0);
	CHECK(!memcmp(got, data, 4 * CS + 5));
	CHECK_INT(mem_reads(e.be), ==, 5);
	CHECK_INT(e.st.verified_chunks, ==, 0);
	CHECK_INT(e.st.stop_trusted_chunks, ==, 5);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data);
	free(got);
}

/* the first data file of cache directory @dir, into @path */
static void first_data_file(const char *dir, char *path, size_t len)
{
	char cmd[256];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "find %s/data -type f | head -1", dir);
	f = popen(cmd, "r");
	CHECK(f && fgets(path, (int)len, f));
	pclose(f);
	path[strcspn(path, "\n")] = '\0';
}

static void flip_byte(const char *dir, off_t off)
{
	char path[512];
	int fd;
	char c;

	first_data_file(dir, path, sizeof(path));
	fd = open(path, O_RDWR);
	CHECK(fd >= 0);
	CHECK_INT(pread(fd, &c, 1, off), ==, 1);
	c ^= 0x20;
	CHECK_INT(pwrite(fd, &c, 1, off), ==, 1);
	close(fd);
}

static int count_stopped(void *arg, uint64_t fid, const struct stop_rec *r)
{
	(*(int *)arg)++;
	return 0;
}

/* the clean-stop records of @e's index, counted */
static int stopped_records(struct env *e)
{
	int n = 0;

	CHECK_INT(meta_stopped_load(e->meta, count_stopped, &n), ==, 0);
	return n;
}

/* atime and mtime of the only data file of @dir: read, or put back */
static void file_times(const char *dir, struct timespec ts[2])
{
	char path[512];
	struct stat sb;

	first_data_file(dir, path, sizeof(path));
	CHECK_INT(stat(path, &sb), ==, 0);
	ts[0] = sb.st_atim;
	ts[1] = sb.st_mtim;
}

static void set_times(const char *dir, const struct timespec ts[2])
{
	char path[512];

	first_data_file(dir, path, sizeof(path));
	CHECK_INT(utimensat(AT_FDCWD, path, ts, 0), ==, 0);
}

/*
 * A clean stop's records are trusted only for a data file and index as
 * the stop left them: a byte changed with the file's times put back
 * (ctime still moves), or a chunk record dropped, and every chunk of the
 * file is read and checked again.  A start drops the records at once,
 * so a run that does not stop cleanly leaves none to trust.
 */
static void test_clean_stop_trusts_only_what_it_left(void)
{
	struct env e;
	char *data = pattern(3 * CS, 7), *got = malloc(3 * CS);
	struct timespec ts[2];
	struct centry *ce;

	env_init(&e, 64 * CS, 0, READ_BUFFERED);
	mem_put(e.be, "s", data, 3 * CS);
	ce = attach(&e, "s", NULL);
	CHECK_INT(read_all(&e, ce, got, 3 * CS), ==, 0);
	cache_detach(e.cache, ce);
	env_restart(&e, true);
	CHECK_INT(e.st.stop_trusted_chunks, ==, 3);
	CHECK_INT(cache_unverified_total(e.cache), ==, 0);
	CHECK_INT(stopped_records(&e), ==, 0);	/* taken at the start */

	/* changed while stopped, its mtime put back */
	env_stop(&e);
	file_times(e.dir, ts);
	flip_byte(e.dir, 2 * CS + 7);		/* in chunk 2 */
	set_times(e.dir, ts);
	env_start(&e);
	CHECK_INT(e.st.stop_changed_files, ==, 1);
	CHECK_INT(e.st.stop_trusted_chunks, ==, 0);
	CHECK_INT(cache_unverified_total(e.cache), ==, 3);
	ce = attach(&e, "s", NULL);
	memset(got, 0, 3 * CS);
	CHECK_INT(read_all(&e, ce, got, 3 * CS), ==, 0);
	CHECK(!memcmp(got, data, 3 * CS));
	CHECK_INT(e.st.checksum_failures, ==, 1);
	cache_detach(e.cache, ce);

	/* the index changed while stopped: a chunk record dropped */
	env_stop(&e);
	{
		char path[128];

		snprintf(path, sizeof(path), "%s/index", e.dir);
		CHECK_INT(meta_open(&e.meta, path), ==, 0);
		CHECK_INT(stopped_records(&e), ==, 1);
		meta_q_drop_chunk(e.meta, hash64("s", 1, 3), 1);
		meta_close(e.meta);
	}
	env_start(&e);
	CHECK_INT(e.st.stop_changed_files, ==, 1);
	CHECK_INT(cache_unverified_total(e.cache), ==, 2);

	ce = attach(&e, "s", NULL);
	memset(got, 0, 3 * CS);
	CHECK_INT(read_all(&e, ce, got, 3 * CS), ==, 0);
	CHECK(!memcmp(got, data, 3 * CS));
	cache_detach(e.cache, ce);
	/* all verified (or fetched) again: the next clean stop records it */
	env_restart(&e, true);
	CHECK_INT(e.st.stop_trusted_chunks, ==, 3);
	CHECK_INT(e.st.stop_changed_files, ==, 0);
	env_fini(&e);
	free(data);
	free(got);
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

/* a cache of @size under LRU: it always admits, so it must evict */
static void env_init_lru(struct env *e, uint64_t size)
{
	env_init(e, size, 0, READ_DIRECT);
	env_stop(e);
	free(e->cf.evict);
	e->cf.evict = strdup("lru");
	env_start(e);
}

static void test_size_bound(void)
{
	struct env e;
	char *data = pattern(3 * CS, 5), *got = malloc(3 * CS);
	uint64_t used, limit, files;
	int i, over = 0;

	env_init_lru(&e, 4 * CS);
	for (i = 0; i < 6; i++) {
		char key[16];
		struct centry *ce;

		snprintf(key, sizeof(key), "b%d", i);
		mem_put(e.be, key, data, 3 * CS);
		ce = attach(&e, key, NULL);
		CHECK_INT(read_all(&e, ce, got, 3 * CS), ==, 0);
		CHECK(!memcmp(got, data, 3 * CS));
		fetch_drain(e.fetch);		/* stored after the reply */
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
		fetch_drain(e.fetch);
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

/*
 * Open files give up chunks: a reader holding every file open (np.memmap,
 * h5py) still gets a cache that turns over.  Only busy entries (a read
 * being served) and files held by passthrough opens keep theirs, and
 * those take at most half the cache.
 */
static void test_open_files_are_evictable(void)
{
	char *da = pattern(3 * CS, 7), *db = pattern(3 * CS, 8),
	     *dc = pattern(2 * CS, 9), *got = malloc(3 * CS);
	struct centry *a, *b, *c, *d;
	uint64_t used, limit, files;
	struct env e;

	env_init_lru(&e, 4 * CS);
	mem_put(e.be, "a", da, 3 * CS);
	mem_put(e.be, "b", db, 3 * CS);
	mem_put(e.be, "c", dc, 2 * CS);
	mem_put(e.be, "d", da, 3 * CS);
	a = attach(&e, "a", NULL);
	CHECK_INT(read_all(&e, a, got, 3 * CS), ==, 0);
	fetch_drain(e.fetch);
	CHECK(cache_is_complete(e.cache, a));
	/* too large to hold for passthrough: more than half the cache */
	CHECK_INT(cache_passthrough_fd(e.cache, a), ==, -ENOSPC);
	/* a stays open: b's chunks take a's last ones */
	b = attach(&e, "b", NULL);
	CHECK_INT(read_all(&e, b, got, 3 * CS), ==, 0);
	CHECK(!memcmp(got, db, 3 * CS));
	fetch_drain(e.fetch);
	CHECK(cache_is_complete(e.cache, b));
	CHECK_INT(cache_chunk_state(e.cache, a, 2), ==, CH_ABSENT);
	CHECK_INT(e.st.evicted_bytes, >=, 2 * CS);
	cache_usage(e.cache, &used, &limit, &files);
	CHECK_INT(used, <=, limit);
	/* and a reads right again, fetching what went */
	CHECK_INT(read_all(&e, a, got, 3 * CS), ==, 0);
	CHECK(!memcmp(got, da, 3 * CS));
	fetch_drain(e.fetch);
	/* c held by a passthrough open: b's and a's turns never take it */
	c = attach(&e, "c", NULL);
	CHECK_INT(read_all(&e, c, got, 2 * CS), ==, 0);
	fetch_drain(e.fetch);
	CHECK(cache_passthrough_fd(e.cache, c) >= 0);
	CHECK_INT(read_all(&e, b, got, 3 * CS), ==, 0);
	CHECK_INT(read_all(&e, a, got, 3 * CS), ==, 0);
	fetch_drain(e.fetch);
	CHECK(cache_is_complete(e.cache, c));
	/* its open ends (the hold, then the open): it may go like any
	 * other, the least recently used first (d needs 3 of the 4 chunks) */
	cache_passthrough_put(e.cache, c);
	cache_detach(e.cache, c);
	d = attach(&e, "d", NULL);
	CHECK_INT(read_all(&e, d, got, 3 * CS), ==, 0);
	CHECK(!memcmp(got, da, 3 * CS));
	fetch_drain(e.fetch);
	CHECK(cache_is_complete(e.cache, d));
	c = attach(&e, "c", NULL);
	CHECK(!cache_is_complete(e.cache, c));
	cache_usage(e.cache, &used, &limit, &files);
	CHECK_INT(used, <=, limit);
	cache_detach(e.cache, a);
	cache_detach(e.cache, b);
	cache_detach(e.cache, c);
	cache_detach(e.cache, d);
	env_fini(&e);
	free(da);
	free(db);
	free(dc);
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

/* a cache restarted over @n files of 2 chunks + 5 bytes: all UNVERIFIED */
static void restart_with(struct env *e, const char *const *keys, int n,
			 char **data)
{
	char *got = malloc(3 * CS);
	struct centry *ce;
	int i;

	env_init(e, 64 * CS, 0, READ_DIRECT);
	for (i = 0; i < n; i++) {
		data[i] = pattern(2 * CS + 5, 20 + i);
		mem_put(e->be, keys[i], data[i], 2 * CS + 5);
		ce = attach(e, keys[i], NULL);
		CHECK_INT(read_all(e, ce, got, 2 * CS + 5), ==, 0);
		cache_detach(e->cache, ce);
	}
	env_restart(e, false);
	CHECK_INT(cache_unverified_total(e->cache), ==, 3 * n);
	free(got);
}

/* one verification read as the verifier does it, synchronously */
static int verify_next(struct env *e, struct centry *ce, uint32_t from,
		       uint32_t *n, char *buf)
{
	struct cache_vread vr;
	ssize_t got;
	int rc;

	rc = cache_verify_begin(e->cache, ce, from, false, &vr);
	if (rc != 1)
		return rc;
	*n = vr.n;
	got = pread(vr.fd, buf, vr.rlen, vr.off);
	return cache_verify_end(e->cache, &vr, buf, got < 0 ? -errno : got) ?: 1;
}

static void test_verify_begin_end(void)
{
	static const char *const keys[] = { "v0", "v1" };
	char *data[2], *buf = aligned_alloc(4096, CS), *got = malloc(3 * CS);
	struct centry *ce;
	uint32_t n = 0, from = 0;
	uint64_t *fids;
	size_t nf;
	struct env e;
	int rc;

	restart_with(&e, keys, 2, data);
	CHECK_INT(cache_unverified_by_heat(e.cache, &fids, &nf), ==, 0);
	CHECK_INT(nf, ==, 2);
	free(fids);
	CHECK_INT(cache_verify_hold(e.cache, hash64("v0", 2, 3), &ce), ==, 1);
	while ((rc = verify_next(&e, ce, from, &n, buf)) == 1)
		from = n + 1;
	CHECK_INT(rc, ==, 0);
	CHECK_INT(cache_unverified(e.cache, ce), ==, 0);
	CHECK_INT(cache_chunk_state(e.cache, ce, 2), ==, CH_PRESENT);
	cache_busy_put(e.cache, ce);
	CHECK_INT(cache_verify_hold(e.cache, hash64("v0", 2, 3), &ce), ==, 0);
	CHECK_INT(cache_unverified_total(e.cache), ==, 3);
	CHECK_INT(e.st.verified_chunks, ==, 3);
	CHECK_INT(e.st.verify_reads, ==, 3);
	/* served from disk, no backend read, no second verification */
	ce = attach(&e, "v0", NULL);
	CHECK_INT(read_all(&e, ce, got, 2 * CS + 5), ==, 0);
	CHECK(!memcmp(got, data[0], 2 * CS + 5));
	CHECK_INT(mem_reads(e.be), ==, 6);
	CHECK_INT(e.st.verify_reads, ==, 3);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data[0]);
	free(data[1]);
	free(buf);
	free(got);
}

/* cache_read_plan(): one look for a read; an earlier run's chunk first */
static void test_read_plan(void)
{
	static const char *const keys[] = { "p0" };
	char *data[1], *got = malloc(3 * CS);
	struct centry *ce, *fresh;
	int st[3] = { -1, -1, -1 };
	struct env e;

	restart_with(&e, keys, 1, data);
	ce = attach(&e, "p0", NULL);
	/* chunk 1 unverified: nothing done, verify first */
	CHECK_INT(cache_read_plan(e.cache, ce, 0, 1, 0, 0, 10, false, st), ==, 1);
	CHECK_INT(st[0], ==, -1);
	/* chunk 1 served from memory: not looked at */
	CHECK_INT(cache_read_plan(e.cache, ce, 1, 1, 1, 0, 10, false, st), ==, 0);
	cache_busy_put(e.cache, ce);
	CHECK_INT(cache_read_plan(e.cache, ce, 0, 3, 0, 0, 10, false, st), ==, -ERANGE);
	CHECK_INT(cache_verify_file(e.cache, ce), ==, 0);
	CHECK_INT(cache_read_plan(e.cache, ce, 0, 2, 0, 0, 10, false, st), ==, 0);
	CHECK(st[0] == CH_PRESENT && st[1] == CH_PRESENT && st[2] == CH_PRESENT);
	cache_busy_put(e.cache, ce);
	/* an uncached file: its chunks claimed for the caller */
	mem_put(e.be, "p1", data[0], 2 * CS + 5);
	fresh = attach(&e, "p1", NULL);
	CHECK_INT(cache_read_plan(e.cache, fresh, 1, 2, 2, 0, 10, false, st), ==, 0);
	CHECK_INT(st[0], ==, CH_ABSENT);
	CHECK_INT(cache_chunk_state(e.cache, fresh, 1), ==, CH_FETCHING);
	CHECK_INT(cache_chunk_state(e.cache, fresh, 2), ==, CH_ABSENT);
	cache_abandon(e.cache, fresh, 1);
	cache_busy_put(e.cache, fresh);
	CHECK_INT(read_all(&e, fresh, got, 2 * CS + 5), ==, 0);
	CHECK(!memcmp(got, data[0], 2 * CS + 5));
	cache_detach(e.cache, fresh);
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data[0]);
	free(got);
}

static void test_verify_end_drops_a_damaged_chunk(void)
{
	static const char *const keys[] = { "d" };
	char *data[1], *buf = aligned_alloc(4096, CS), *got = malloc(3 * CS);
	struct cache_vread vr;
	struct centry *ce;
	struct env e;
	ssize_t r;

	restart_with(&e, keys, 1, data);
	ce = attach(&e, "d", NULL);
	CHECK_INT(cache_verify_begin(e.cache, ce, 1, false, &vr), ==, 1);
	CHECK_INT(vr.n, ==, 1);
	r = pread(vr.fd, buf, vr.rlen, vr.off);
	CHECK(r >= (ssize_t)vr.len);
	buf[77] ^= 1;			/* as if the disk returned it so */
	CHECK_INT(cache_verify_end(e.cache, &vr, buf, r), ==, -EBADMSG);
	CHECK_INT(cache_chunk_state(e.cache, ce, 1), ==, CH_ABSENT);
	CHECK_INT(e.st.checksum_failures, ==, 1);
	CHECK_INT(cache_unverified(e.cache, ce), ==, 2);
	CHECK_INT(read_all(&e, ce, got, 2 * CS + 5), ==, 0);
	CHECK(!memcmp(got, data[0], 2 * CS + 5));
	CHECK_INT(mem_reads(e.be), ==, 3 + 1);	/* chunk 1 again */
	cache_detach(e.cache, ce);
	env_fini(&e);
	free(data[0]);
	free(buf);
	free(got);
}

struct verify_arg {
	struct env *e;
	struct centry *ce;
	atomic_int rc;
	atomic_bool done;
};

static void *verify_thread(void *arg)
{
	struct verify_arg *a = arg;
	struct chunkbuf *cb = chunkbuf_new(CS);

	a->rc = cache_verify_chunk(a->e->cache, a->ce, 0, cb);
	a->done = true;
	chunkbuf_put(cb);
	return NULL;
}

/*
 * cache_verify_hold() offers a file only while it has a chunk nobody is
 * verifying: with every unverified chunk in flight the verifier, which
 * picks files by it, would otherwise take the same file forever.
 */
static void test_verify_hold_needs_a_chunk_to_start(void)
{
	struct env e_hold;
	static const char *const keys[] = { "v0" };
	char *data[1], *buf = aligned_alloc(4096, CS);
	struct cache_vread vr[3];
	struct centry *ce, *held;
	uint64_t fid = hash64("v0", 2, 3);
	int i;

	restart_with(&e_hold, keys, 1, data);
	CHECK_INT(cache_verify_hold(e_hold.cache, fid, &ce), ==, 1);
	for (i = 0; i < 3; i++)
		CHECK_INT(cache_verify_begin(e_hold.cache, ce, 0, false, &vr[i]), ==, 1);
	CHECK_INT(cache_verify_begin(e_hold.cache, ce, 0, false, &vr[0]), ==, 0);
	CHECK_INT(cache_unverified(e_hold.cache, ce), ==, 3);
	/* all three in flight: nothing to start */
	CHECK_INT(cache_verify_hold(e_hold.cache, fid, &held), ==, 0);
	/* one given up without a verdict: that one can be started again */
	cache_verify_abort(e_hold.cache, &vr[2]);
	CHECK_INT(cache_verify_hold(e_hold.cache, fid, &held), ==, 1);
	cache_busy_put(e_hold.cache, held);
	for (i = 0; i < 2; i++)
		CHECK_INT(cache_verify_end(e_hold.cache, &vr[i], buf,
					   pread(vr[i].fd, buf, vr[i].rlen, vr[i].off)), ==, 0);
	CHECK_INT(cache_unverified(e_hold.cache, ce), ==, 1);
	cache_busy_put(e_hold.cache, ce);
	env_fini(&e_hold);
	free(data[0]);
	free(buf);
}

static uint64_t fid_last;

/* next use: @fid_last's file is needed last, every other one first */
static uint64_t last_needed(void *arg, uint64_t fid, uint64_t *after)
{
	(void)arg;
	if (after)
		*after = NEXT_USE_NONE;
	return fid == fid_last ? 1000ULL << 20 : 0;
}

/* a cache of 6 chunks; a (cached), b and c of 2 chunks (+5 bytes for a and
 * b), b's file needed last (fid_last) */
static void three_objects(struct env *e, char *got, const char *da,
			  const char *db, const char *dc)
{
	struct centry *ce;

	env_init(e, 6 * CS, 0, READ_DIRECT);
	mem_put(e->be, "a", da, 2 * CS + 5);
	mem_put(e->be, "b", db, 2 * CS + 5);
	mem_put(e->be, "c", dc, 2 * CS);
	fid_last = hash64("b", 1, 3);
	ce = attach(e, "a", NULL);
	CHECK_INT(read_all(e, ce, got, 2 * CS + 5), ==, 0);
	cache_detach(e->cache, ce);
}

/*
 * Evicting the tail chunks of a file from an earlier run that were not
 * verified yet takes them out of the unverified counts too (the verifier
 * would look for them forever, and the gauge would never reach 0).
 */
static void test_tail_eviction_of_unverified_chunks(void)
{
	struct env e;
	char *got = malloc(4 * CS), *da = pattern(2 * CS + 5, 1),
	     *db = pattern(2 * CS + 5, 2), *dc = pattern(2 * CS, 3);
	struct centry *ce, *b;
	uint32_t n, left = 0;

	three_objects(&e, got, da, db, dc);
	ce = attach(&e, "b", NULL);
	CHECK_INT(read_all(&e, ce, got, 2 * CS + 5), ==, 0);
	cache_detach(e.cache, ce);
	env_restart(&e, false);
	CHECK_INT(cache_unverified_total(e.cache), ==, 6);
	cache_set_future(e.cache, &(struct policy_future){ .one = last_needed });
	/* c needs room: b, needed last, gives up its last chunks */
	ce = attach(&e, "c", NULL);
	CHECK_INT(read_all(&e, ce, got, 2 * CS), ==, 0);
	CHECK(!memcmp(got, dc, 2 * CS));
	fetch_drain(e.fetch);		/* stored after the reply */
	CHECK(cache_is_complete(e.cache, ce));
	cache_detach(e.cache, ce);
	b = attach(&e, "b", NULL);
	for (n = 0; n < 3; n++)
		left += cache_chunk_state(e.cache, b, n) == CH_UNVERIFIED;
	CHECK(left < 3);		/* some were evicted */
	CHECK_INT(cache_unverified(e.cache, b), ==, left);
	ce = attach(&e, "a", NULL);
	CHECK_INT(cache_unverified_total(e.cache), ==,
		  left + cache_unverified(e.cache, ce));
	cache_detach(e.cache, ce);
	cache_detach(e.cache, b);
	env_fini(&e);
	free(got);
	free(da);
	free(db);
	free(dc);
}

/* a reader of a chunk being verified waits for that verdict, no 2nd read */
static void test_verify_single_flight(void)
{
	static const char *const keys[] = { "s" };
	char *data[1], *buf = aligned_alloc(4096, CS);
	struct verify_arg a = { 0 };
	struct cache_vread vr;
	pthread_t t;
	ssize_t r;
	struct env e;

	restart_with(&e, keys, 1, data);
	a.e = &e;
	a.ce = attach(&e, "s", NULL);
	CHECK_INT(cache_verify_begin(e.cache, a.ce, 0, false, &vr), ==, 1);
	CHECK_INT(pthread_create(&t, NULL, verify_thread, &a), ==, 0);
	usleep(200 * 1000);
	CHECK(!a.done);				/* waits for our verdict */
	r = pread(vr.fd, buf, vr.rlen, vr.off);
	CHECK_INT(cache_verify_end(e.cache, &vr, buf, r), ==, 0);
	pthread_join(t, NULL);
	CHECK_INT(a.rc, ==, -EAGAIN);		/* look again: PRESENT */
	CHECK_INT(cache_chunk_state(e.cache, a.ce, 0), ==, CH_PRESENT);
	CHECK_INT(e.st.verify_reads, ==, 1);
	CHECK_INT(e.st.verify_waits, ==, 1);
	cache_detach(e.cache, a.ce);
	env_fini(&e);
	free(data[0]);
	free(buf);
}

/* the regular files of DIR/data/spare; each must be empty */
static int spares_on_disk(struct env *e, bool *all_empty)
{
	char path[PATH_MAX];
	struct dirent *de;
	struct stat sb;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "%s/data/spare", e->dir);
	d = opendir(path);
	CHECK(d != NULL);
	*all_empty = true;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		CHECK_INT(fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW), ==, 0);
		*all_empty &= S_ISREG(sb.st_mode) && !sb.st_size && !sb.st_blocks;
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

static void put_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	CHECK(fd >= 0);
	CHECK_INT(write(fd, text, strlen(text)), ==, (ssize_t)strlen(text));
	close(fd);
}

/*
 * Evicted data files become empty spares and new data files are made of
 * them (no create, no unlink); the bytes served are the new file's; a
 * spare left from the last run, whatever it holds, is removed at start.
 */
static void test_evicted_files_become_spares(void)
{
	char *got = malloc(2 * CS), *data[8], path[PATH_MAX];
	uint64_t reads;
	struct centry *ce;
	bool empty;
	struct env e;
	int i;

	env_init_lru(&e, 4 * CS);
	for (i = 0; i < 8; i++) {
		char key[16];

		snprintf(key, sizeof(key), "s%d", i);
		data[i] = pattern(2 * CS, 10 + i);
		mem_put(e.be, key, data[i], 2 * CS);
		ce = attach(&e, key, NULL);
		CHECK_INT(read_all(&e, ce, got, 2 * CS), ==, 0);
		CHECK(!memcmp(got, data[i], 2 * CS));
		fetch_drain(e.fetch);		/* stored after the reply */
		cache_detach(e.cache, ce);
	}
	CHECK_INT(e.st.evictions, >=, 5);
	CHECK_INT(e.st.data_files_reused, >=, 4);
	CHECK_INT(spares_on_disk(&e, &empty), <=, SPARES_MAX);
	CHECK(empty);
	env_stop(&e);
	snprintf(path, sizeof(path), "%s/data/spare/7", e.dir);
	put_file(path, "left by a crash");
	snprintf(path, sizeof(path), "%s/data/spare/1000", e.dir);
	put_file(path, "a slot of a build with more of them");
	env_start(&e);
	CHECK_INT(spares_on_disk(&e, &empty), ==, 0);
	reads = mem_reads(e.be);
	ce = attach(&e, "s7", NULL);	/* the last one is still cached */
	CHECK_INT(read_all(&e, ce, got, 2 * CS), ==, 0);
	CHECK(!memcmp(got, data[7], 2 * CS));
	CHECK_INT(mem_reads(e.be), ==, reads);
	cache_detach(e.cache, ce);
	env_fini(&e);
	for (i = 0; i < 8; i++)
		free(data[i]);
	free(got);
}

/* a spare never replaces a file, and the pool holds at most SPARES_MAX */
static void test_spare_pool(void)
{
	char a[PATH_MAX], b[PATH_MAX], cmd[128], buf[16] = { 0 };
	struct stat sb;
	bool empty;
	struct env e;
	int fd, i;

	env_init(&e, 64 * CS, 0, READ_DIRECT);
	snprintf(a, sizeof(a), "%s/data/00", e.dir);
	CHECK_INT(mkdir(a, 0700), ==, 0);
	snprintf(a, sizeof(a), "%s/data/00/a", e.dir);
	snprintf(b, sizeof(b), "%s/data/00/b", e.dir);
	put_file(a, "keep");
	put_file(b, "old bytes");
	CHECK(spare_keep(e.cache, b, -1));
	CHECK(access(b, F_OK) != 0);
	CHECK_INT(spares_on_disk(&e, &empty), ==, 1);
	CHECK(empty);				/* emptied */
	CHECK(!spare_take(e.cache, a));		/* there: untouched */
	fd = open(a, O_RDONLY);
	CHECK_INT(read(fd, buf, sizeof(buf)), ==, 4);
	close(fd);
	CHECK(!strcmp(buf, "keep"));
	snprintf(b, sizeof(b), "%s/data/01/b", e.dir);
	CHECK(!spare_take(e.cache, b));		/* no such directory */
	CHECK_INT(spares_on_disk(&e, &empty), ==, 1);
	snprintf(b, sizeof(b), "%s/data/00/c", e.dir);
	CHECK(spare_take(e.cache, b));
	CHECK_INT(stat(b, &sb), ==, 0);
	CHECK_INT(sb.st_size, ==, 0);
	CHECK_INT(spares_on_disk(&e, &empty), ==, 0);
	CHECK_INT(e.st.data_files_reused, ==, 1);
	snprintf(b, sizeof(b), "%s/data/00/d", e.dir);
	CHECK(!spare_take(e.cache, b));		/* none left */
	CHECK(!spare_keep(e.cache, b, -1));	/* no such file */
	/* a spare someone removed frees its slot */
	snprintf(b, sizeof(b), "%s/data/00/e", e.dir);
	put_file(b, "x");
	CHECK(spare_keep(e.cache, b, -1));
	snprintf(cmd, sizeof(cmd), "rm -f %s/data/spare/*", e.dir);
	CHECK_INT(system(cmd), ==, 0);
	CHECK(!spare_take(e.cache, b));
	/* full: the file stays for the caller to unlink */
	for (i = 0; i <= SPARES_MAX; i++) {
		snprintf(b, sizeof(b), "%s/data/00/f%d", e.dir, i);
		put_file(b, "y");
		CHECK(spare_keep(e.cache, b, -1) == (i < SPARES_MAX));
	}
	CHECK(access(b, F_OK) == 0);
	CHECK_INT(spares_on_disk(&e, &empty), ==, SPARES_MAX);
	CHECK(empty);
	env_fini(&e);
}

/* a file of the cache directory whose name starts with @prefix? */
static bool file_named(struct env *e, const char *prefix)
{
	char path[PATH_MAX];
	struct dirent *de;
	bool found = false;
	unsigned i;
	DIR *d;

	for (i = 0; i < 256 && !found; i++) {
		snprintf(path, sizeof(path), "%s/data/%02x", e->dir, i);
		d = opendir(path);
		while (d && (de = readdir(d)))
			found |= !strncmp(de->d_name, prefix, strlen(prefix));
		if (d)
			closedir(d);
	}
	return found;
}

/*
 * A file given to the kernel (cache_passthrough_fd()) may be read after
 * every open closed (a mapping of the backing file): it is never punched,
 * emptied or reused.  An eviction that takes only its last chunks copies
 * the chunks it keeps into a new data file renamed over it: the entry
 * keeps them (a later read fetches only what went), what the kernel holds
 * still reads the object whole (the old file, unlinked), and the moved
 * chunks verify after a restart.
 */
static void test_lent_file_is_never_changed_in_place(void)
{
	char *got = malloc(4 * CS), *da = pattern(2 * CS + 5, 1),
	     *db = pattern(2 * CS + 5, 2), *dd = pattern(2 * CS, 4);
	char path[PATH_MAX];
	struct centry *ce, *b;
	struct stat sb;
	uint64_t reads;
	struct env e;
	bool empty;
	int kfd, fd;

	if (!got)
		abort();
	env_init(&e, 6 * CS, 0, READ_DIRECT);
	mem_put(e.be, "a", da, 2 * CS + 5);
	mem_put(e.be, "b", db, 2 * CS + 5);
	mem_put(e.be, "d", dd, 2 * CS);
	fid_last = hash64("b", 1, 3);
	ce = attach(&e, "a", NULL);
	CHECK_INT(read_all(&e, ce, got, 2 * CS + 5), ==, 0);
	cache_detach(e.cache, ce);
	b = attach(&e, "b", NULL);
	CHECK_INT(read_all(&e, b, got, 2 * CS + 5), ==, 0);
	fetch_drain(e.fetch);		/* stored after the reply */
	kfd = cache_passthrough_fd(e.cache, b);
	CHECK(kfd >= 0);
	CHECK(b->lent);
	kfd = dup(kfd);			/* what the kernel would hold */
	cache_passthrough_put(e.cache, b);	/* the open's release */
	cache_detach(e.cache, b);
	cache_set_future(e.cache, &(struct policy_future){ .one = last_needed });
	/* d's second chunk needs room: b, needed last, gives up its last
	 * chunks */
	ce = attach(&e, "d", NULL);
	CHECK_INT(read_all(&e, ce, got, 2 * CS), ==, 0);
	fetch_drain(e.fetch);		/* stored after the reply */
	CHECK(cache_is_complete(e.cache, ce));
	cache_detach(e.cache, ce);
	b = attach(&e, "b", NULL);
	CHECK_INT(cache_chunk_state(e.cache, b, 0), ==, CH_PRESENT);	/* kept */
	CHECK_INT(cache_chunk_state(e.cache, b, 1), ==, CH_ABSENT);
	CHECK_INT(cache_chunk_state(e.cache, b, 2), ==, CH_ABSENT);
	CHECK(!b->lent);
	CHECK_INT(e.st.lent_moves, ==, 1);
	CHECK(!file_named(&e, "move-"));
	CHECK_INT(spares_on_disk(&e, &empty), ==, 0);
	/* the kernel's file: unlinked, unchanged, the object whole */
	CHECK_INT(fstat(kfd, &sb), ==, 0);
	CHECK_INT(sb.st_nlink, ==, 0);
	memset(got, 0, 4 * CS);
	CHECK_INT(pread(kfd, got, 2 * CS + 5, 0), ==, 2 * CS + 5);
	CHECK_INT(pread(kfd, got + 3 * CS, CS, 2 * CS + 5), ==, 0);	/* EOF */
	CHECK(!memcmp(got, db, 2 * CS + 5));
	close(kfd);
	/* the entry's new file at its path holds chunk 0 */
	cache_data_path(e.cache, b->fid, b->gen, path, sizeof(path));
	fd = openat(e.cache->dirfd, path, O_RDONLY);	/* relative */
	CHECK(fd >= 0);
	memset(got, 0, 4 * CS);
	CHECK_INT(pread(fd, got, CS, 0), ==, CS);
	CHECK(!memcmp(got, db, CS));
	close(fd);
	cache_detach(e.cache, b);
	/* after a restart chunk 0 verifies from there (no checksum failure):
	 * only the chunks that went are fetched */
	env_stop(&e);
	env_start(&e);
	b = attach(&e, "b", NULL);
	CHECK(cache_chunk_state(e.cache, b, 0) != CH_ABSENT);
	reads = mem_reads(e.be);
	memset(got, 0, 4 * CS);
	CHECK_INT(read_all(&e, b, got, 2 * CS + 5), ==, 0);
	CHECK(!memcmp(got, db, 2 * CS + 5));
	CHECK_INT(e.st.checksum_failures, ==, 0);
	CHECK_INT(mem_reads(e.be), ==, reads + 2);
	cache_detach(e.cache, b);
	env_fini(&e);
	free(got);
	free(da);
	free(db);
	free(dd);
}

/* a move a crash cut short leaves a temporary file: the next start
 * removes it */
static void test_move_leftover_removed_at_start(void)
{
	char path[PATH_MAX];
	struct env e;

	env_init(&e, 6 * CS, 0, READ_DIRECT);
	env_stop(&e);
	snprintf(path, sizeof(path), "%s/data/07", e.dir);
	mkdir(path, 0700);
	snprintf(path, sizeof(path), "%s/data/07/move-0000000000000007-0000000000000001",
		 e.dir);
	put_file(path, "half a copy");
	CHECK(file_named(&e, "move-"));
	env_start(&e);
	CHECK(!file_named(&e, "move-"));
	env_fini(&e);
}

/*
 * An object that goes A -> B -> A while a reader holds A: the stale entry
 * and the new one of A share one data file path.  When the stale one
 * goes the file stays the new entry's, whole (review of b5800ba).
 */
static struct centry *attach_version(struct env *e, uint64_t fid,
				     const char *version, uint64_t size)
{
	struct ns_attr a = { .size = size };
	struct centry *ce = NULL;
	bool changed;

	snprintf(a.version, sizeof(a.version), "%s", version);
	CHECK_INT(cache_attach(e->cache, fid, "k", &a, &ce, &changed), ==, 0);
	return ce;
}

/* store @data (2 chunks) into @ce as if fetched */
static void store_two(struct env *e, struct centry *ce, const char *data)
{
	uint32_t n;

	for (n = 0; n < 2; n++) {
		struct chunkbuf *cb = chunkbuf_new(CS);

		CHECK(cb != NULL);
		memcpy(cb->data, data + (size_t)n * CS, CS);
		cb->len = CS;
		CHECK_INT(cache_claim(e->cache, ce, n), ==, CH_ABSENT);
		CHECK_INT(cache_store_chunk(e->cache, ce, n, cb,
					    hash64(cb->data, CS, 0),
					    ADMIT_DEMAND), ==, 0);
		chunkbuf_put(cb);
	}
}

static void test_version_back_keeps_its_file(void)
{
	char *da = pattern(2 * CS, 1), *dx = pattern(2 * CS, 99),
	     *got = malloc(2 * CS);
	struct centry *e1, *e2, *e3, *x;
	struct env e;

	env_init(&e, 64 * CS, 0, READ_BUFFERED);
	e1 = attach_version(&e, 77, "A", 2 * CS);	/* a reader keeps it */
	store_two(&e, e1, da);
	e2 = attach_version(&e, 77, "B", 2 * CS);	/* rewritten */
	cache_detach(e.cache, e2);
	e3 = attach_version(&e, 77, "A", 2 * CS);	/* and restored */
	CHECK(e3 != e1);
	store_two(&e, e3, da);
	cache_detach(e.cache, e1);		/* the stale one goes */
	x = attach_version(&e, 99, "X", 2 * CS);	/* a new data file */
	store_two(&e, x, dx);
	cache_detach(e.cache, x);
	CHECK_INT(do_read(&e, e3, 0, 4096, got), ==, 4096);
	CHECK(!memcmp(got, da, 4096));
	CHECK_INT(do_read(&e, e3, CS, 4096, got), ==, 4096);
	CHECK(!memcmp(got, da + CS, 4096));
	cache_detach(e.cache, e3);
	env_fini(&e);
	free(da);
	free(dx);
	free(got);
}

/*
 * A, B, then A again while the kernel may still read A's data file (it
 * was lent): the new A entry opens that same file (one version, one
 * path), so it is lent from the start: never punched, never emptied into
 * a spare (review of 35a65f4; before, it could punch what the kernel
 * read for the old open).
 */
static void test_version_back_to_a_lent_file_is_lent(void)
{
	char *da = pattern(2 * CS, 1), *got = malloc(2 * CS);
	struct centry *e1, *e2, *e3;
	struct stat sb;
	struct env e;
	int kfd;

	env_init(&e, 64 * CS, 0, READ_BUFFERED);
	e1 = attach_version(&e, 77, "A", 2 * CS);	/* a reader keeps it */
	store_two(&e, e1, da);
	kfd = cache_passthrough_fd(e.cache, e1);
	CHECK(kfd >= 0);
	kfd = dup(kfd);				/* what the kernel holds */
	CHECK(e1->lent);
	e2 = attach_version(&e, 77, "B", 2 * CS);	/* rewritten */
	cache_detach(e.cache, e2);
	e3 = attach_version(&e, 77, "A", 2 * CS);	/* and restored */
	CHECK(e3 != e1);
	CHECK(e3->lent);			/* the same file as e1's */
	store_two(&e, e3, da);
	cache_passthrough_put(e.cache, e1);	/* its open ends */
	cache_detach(e.cache, e1);		/* the stale one goes */
	CHECK(e3->lent);
	cache_detach(e.cache, e3);
	CHECK_INT(cache_evict_file(e.cache, 77), ==, 0);	/* whole */
	CHECK_INT(fstat(kfd, &sb), ==, 0);
	CHECK_INT(sb.st_size, ==, 2 * CS);	/* not emptied into a spare */
	CHECK_INT(pread(kfd, got, 2 * CS, 0), ==, 2 * CS);
	CHECK(!memcmp(got, da, 2 * CS));
	close(kfd);
	env_fini(&e);
	free(da);
	free(got);
}

int main(void)
{
	runner_name = "test_cache";
	log_level = LOG_ERR;
	TEST(test_chunk_len);
	TEST(test_restart_reuses_cache);
	TEST(test_clean_stop_trusts_only_what_it_left);
	TEST(test_corrupt_chunk_refetched);
	TEST(test_size_bound);
	TEST(test_open_files_are_evictable);
	TEST(test_changed_object);
	TEST(test_huge_size_refused);
	TEST(test_size_change_drops_entry);
	TEST(test_verify_begin_end);
	TEST(test_read_plan);
	TEST(test_verify_end_drops_a_damaged_chunk);
	TEST(test_verify_single_flight);
	TEST(test_verify_hold_needs_a_chunk_to_start);
	TEST(test_tail_eviction_of_unverified_chunks);
	TEST(test_evicted_files_become_spares);
	TEST(test_spare_pool);
	TEST(test_lent_file_is_never_changed_in_place);
	TEST(test_move_leftover_removed_at_start);
	TEST(test_version_back_keeps_its_file);
	TEST(test_version_back_to_a_lent_file_is_lent);
	return runner_done();
}
