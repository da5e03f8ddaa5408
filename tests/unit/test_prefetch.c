// SPDX-License-Identifier: MIT
/*
 * prefetch.c: the order in which a list's files go to disk.  A real
 * namespace (nsmgr.c), lists, cache, fetcher and prefetcher thread over
 * the in-memory backend, whose reads of one object can be held.
 *
 * prefetch.c and nsmgr.c come from the library (build/libfusefs.a);
 * manifest_open() is a fake that no test here reaches, defined here so
 * that the linker leaves manifest_src.o (the real backends) out.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "epochs.h"
#include "manifest_src.h"
#include "nsmgr.h"
#include "prefetch.h"

#include "cachenv.h"

int manifest_open(const struct fusefs_conf *cf, const char *where, int *fd)
{
	return -ENOTSUP;	/* no manifest mounts in these tests */
}

struct penv {
	struct env e;
	struct nsmgr *nm;
	struct lists *lists;
	struct prefetcher *pf;
	struct epochs *epochs;
};

/* the namespace and lists over the objects put into @p's backend */
static void penv_open(struct penv *p)
{
	p->e.cf.source = strdup("mem://unit");	/* nsmgr names it in logs */
	CHECK_INT(nsmgr_open(&p->nm, p->e.be, p->e.meta, &p->e.cf, &p->e.st),
		  ==, 0);
	p->lists = lists_create();
	CHECK(p->lists != NULL);
}

/* the prefetcher, and the lists wired to the data path as main.c does */
static void penv_start(struct penv *p)
{
	CHECK_INT(prefetch_create(&p->pf, p->lists, p->nm, p->e.cache,
				  p->e.fetch), ==, 0);
	CHECK_INT(epochs_create(&p->epochs, p->lists, p->e.cache, p->e.fetch,
				p->pf), ==, 0);
}

/* held reads released; the fetcher drained before the prefetcher goes */
static void penv_fini(struct penv *p)
{
	prefetch_stop(p->pf);
	mem_release(p->e.be);
	fetch_destroy(p->e.fetch);
	p->e.fetch = NULL;
	prefetch_destroy(p->pf);
	epochs_destroy(p->epochs);
	lists_destroy(p->lists);
	nsmgr_close(p->nm);
	env_fini(&p->e);
}

static int resolve(void *arg, const char *path, size_t len, uint64_t *fid,
		   uint64_t *size)
{
	struct penv *p = arg;
	struct ns *ns = nsmgr_rdlock(p->nm);
	const struct ns_node *n = ns_resolve(ns, path, len);
	struct ns_attr a;
	int rc = -ENOENT;

	if (n && n->is_dir) {
		rc = -EISDIR;
	} else if (n) {
		ns_attr_get(ns, n, &a);
		*fid = n->ino;
		*size = a.size;
		rc = 0;
	}
	nsmgr_unlock(p->nm);
	return rc;
}

/* the cache entry of @key, held busy (cache_busy_put() it) */
static struct centry *held(struct penv *p, const char *key)
{
	struct ns *ns = nsmgr_rdlock(p->nm);
	const struct ns_node *n = ns_resolve(ns, key, strlen(key));
	struct centry *ce = NULL;
	struct ns_attr a;

	CHECK(n != NULL);
	ns_attr_get(ns, n, &a);
	nsmgr_unlock(p->nm);
	CHECK_INT(cache_hold(p->e.cache, n->ino, key, &a, &ce), ==, 0);
	return ce;
}

static bool on_disk(struct penv *p, const char *key)
{
	struct centry *ce = held(p, key);
	bool r = cache_is_complete(p->e.cache, ce);

	cache_busy_put(p->e.cache, ce);
	return r;
}

static bool staged(struct penv *p, const char *key)
{
	struct centry *ce = held(p, key);
	bool r = fetch_is_staged(p->e.fetch, ce, 0);

	cache_busy_put(p->e.cache, ce);
	return r;
}

static void nap(void)
{
	nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
}

static unsigned rounds(struct penv *p)
{
	struct prefetch_counts n;

	prefetch_counts(p->pf, &n);
	return n.rounds;
}

/* rounds that walked the whole window (PREFETCH_RECHECK_ROUNDS, RECHECK_MS) */
static unsigned full_rounds(struct penv *p)
{
	struct prefetch_counts n;

	prefetch_counts(p->pf, &n);
	return n.full_rounds;
}

/* files looked at by all rounds so far */
static unsigned long looked_at(struct penv *p)
{
	struct prefetch_counts n;

	prefetch_counts(p->pf, &n);
	return n.looked;
}

/* kick the prefetcher until @n more full rounds ran */
static void await_full_rounds(struct penv *p, unsigned n)
{
	unsigned i, start = full_rounds(p);

	for (i = 0; i < 3000 && full_rounds(p) < start + n; i++) {
		prefetch_kick(p->pf);
		nap();
	}
	CHECK_INT(full_rounds(p), >=, start + n);
}

/*
 * A file whose chunk is staged and still in flight keeps the files after
 * it off the disk: the room left is for that file, whose reader comes
 * first.  f0..f6 take 7.5 of the 8 MiB, f7 (1 MiB, held in flight) does
 * not fit and is staged, f8 (0.5 MiB) would fit and must still be staged.
 * Before the fix a full round passed over f7 as "in flight" and stored f8.
 */
static void test_staged_in_flight_keeps_later_files_off_disk(void)
{
	static const char *const names[] = {
		"f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9",
	};
	static const size_t sizes[] = {
		CS, CS, CS, CS, CS, CS, CS + CS / 2, CS, CS / 2, CS,
	};
	struct list_report rep;
	struct penv p = { 0 };
	char text[64] = "";
	unsigned i;

	env_init(&p.e, 8 * CS, 0, READ_DIRECT);
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		char *data = pattern(sizes[i], i);

		mem_put(p.e.be, names[i], data, sizes[i]);
		free(data);
		strcat(text, names[i]);
		strcat(text, "\n");
	}
	mem_hold_key(p.e.be, "f7");
	penv_open(&p);
	penv_start(&p);
	CHECK_INT(lists_publish(p.lists, "rank0", text, strlen(text), resolve,
				&p, &rep), ==, 0);
	CHECK_INT(rep.accepted, ==, ARRAY_SIZE(names));
	prefetch_published(p.pf);

	for (i = 0; i < 1000 && !(on_disk(&p, "f6") && staged(&p, "f7") &&
				  (staged(&p, "f8") || on_disk(&p, "f8"))); i++)
		nap();
	for (i = 0; i < 7; i++)
		CHECK(on_disk(&p, names[i]));
	CHECK(staged(&p, "f7"));
	/* two full rounds while f7 is in flight: each rechecks f8 */
	await_full_rounds(&p, 2);
	CHECK(!on_disk(&p, "f8"));
	CHECK(staged(&p, "f8"));
	CHECK_INT(cache_free(p.e.cache), ==, CS / 2);	/* kept for f7 */

	penv_fini(&p);
}

/*
 * A prefetched chunk whose store is refused when it arrives (the victims
 * the policy chose were busy meanwhile, e.g. being verified) is kept in
 * memory so it is not fetched twice; once room can be made, the
 * prefetcher writes it to disk from there.  Before, it stayed in memory
 * and the file never reached the disk (test_rewarm_at_mount's failure).
 */
static void test_refused_prefetch_is_written_from_memory_later(void)
{
	static const char *const old[] = { "a", "b", "c", "d" };
	struct centry *busy[4];
	struct list_report rep;
	struct penv p = { 0 };
	char *data = pattern(CS, 7);
	unsigned i, start;

	env_init(&p.e, 4 * CS, 0, READ_DIRECT);
	for (i = 0; i < 4; i++)
		mem_put(p.e.be, old[i], data, CS);
	mem_put(p.e.be, "w", data, CS);
	penv_open(&p);
	for (i = 0; i < 4; i++) {		/* the cache full, no list */
		struct result r;
		struct centry *ce = held(&p, old[i]);

		result_init(&r, CS);
		CHECK_INT(fetch_read(p.e.fetch, ce, 0, CS, result_done, &r), ==, 0);
		result_wait(&r);
		CHECK_INT(r.err, ==, 0);
		free(r.buf);
		cache_busy_put(p.e.cache, ce);
	}
	for (i = 0; i < 1000 && !on_disk(&p, "d"); i++)
		nap();
	CHECK_INT(cache_free(p.e.cache), ==, 0);

	mem_hold_key(p.e.be, "w");
	penv_start(&p);
	CHECK_INT(lists_publish(p.lists, "warm", "w\n", 2, resolve, &p, &rep),
		  ==, 0);
	prefetch_published(p.pf);
	for (i = 0; i < 1000 && !p.e.st.prefetch_chunks; i++)
		nap();
	CHECK_INT(p.e.st.prefetch_chunks, ==, 1);	/* in flight, held */
	for (i = 0; i < 4; i++)			/* the victims get busy */
		busy[i] = held(&p, old[i]);
	mem_release(p.e.be);
	for (i = 0; i < 1000 && !p.e.st.chunks_not_stored; i++)
		nap();
	CHECK_INT(p.e.st.chunks_not_stored, ==, 1);	/* refused: kept */
	for (i = 0; i < 4; i++)
		cache_busy_put(p.e.cache, busy[i]);
	start = full_rounds(&p);
	for (i = 0; i < 3000 && !on_disk(&p, "w") &&
		    full_rounds(&p) < start + 2; i++) {
		prefetch_kick(p.pf);
		nap();
	}
	CHECK(on_disk(&p, "w"));
	CHECK_INT(mem_reads(p.e.be), ==, 5);		/* not fetched twice */
	CHECK_INT(p.e.st.prefetch_kept_stored, ==, 1);

	penv_fini(&p);
	free(data);
}

/*
 * A cache of @cached files of 4 KiB, objects f0..f(@listed + @extra - 1)
 * of 4 KiB, f0..f(@listed - 1) published as list "rank0" and prefetched:
 * returns once f(@cached - 1) is on disk and the rest arrived in memory
 * (staged_chunks counts chunks that arrived: none in flight then).
 */
static void staged_list(struct penv *p, unsigned cached, unsigned listed,
			unsigned extra, int seed)
{
	struct list_report rep;
	char *data = pattern(4096, seed), *text, name[16];
	size_t len = 0;
	unsigned i;
	FILE *f = open_memstream(&text, &len);

	env_init(&p->e, cached * 4096ULL, 0, READ_DIRECT);
	for (i = 0; i < listed + extra; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		mem_put(p->e.be, name, data, 4096);
		if (i < listed)
			fprintf(f, "%s\n", name);
	}
	fclose(f);
	penv_open(p);
	penv_start(p);
	CHECK_INT(lists_publish(p->lists, "rank0", text, len, resolve, p,
				&rep), ==, 0);
	CHECK_INT(rep.accepted, ==, listed);
	prefetch_published(p->pf);
	snprintf(name, sizeof(name), "f%u", cached - 1);
	for (i = 0; i < 3000 && !(on_disk(p, name) &&
				  p->e.st.staged_chunks >= listed - cached); i++) {
		prefetch_kick(p->pf);
		nap();
	}
	CHECK(on_disk(p, name));
	CHECK_INT(p->e.st.staged_chunks, >=, listed - cached);
	free(text);
	free(data);
}

/*
 * A list whose reader has more files on disk ahead of it than a full
 * round looks at (PREFETCH_WINDOW_FILES): the rounds from the ready marks walk on
 * past that and stage the misses there; a full round must not drop them
 * as "out of the window" (and the next rounds fetch them again).  4,200
 * files of 4 KiB fill the cache; the 100 after them are staged.
 */
static void test_staged_past_the_full_window_stay(void)
{
	enum { ON_DISK = PREFETCH_WINDOW_FILES + 104, LISTED = ON_DISK + 100 };
	struct penv p = { 0 };
	char name[16];
	unsigned reads;

	staged_list(&p, ON_DISK, LISTED, 0, 3);
	snprintf(name, sizeof(name), "f%u", LISTED - 1);
	CHECK(staged(&p, name));
	/* two full rounds: the staged files are still the reader's next */
	reads = mem_reads(p.e.be);
	await_full_rounds(&p, 2);
	CHECK_INT(p.e.st.staged_unread, ==, 0);
	CHECK_INT(mem_reads(p.e.be), ==, reads);	/* none fetched again */
	CHECK(staged(&p, name));

	penv_fini(&p);
}

/*
 * Files staged ahead are not looked at again by every round: past the
 * file at its ready mark a round goes on at the list's work mark.  50
 * files of 4 KiB fill the cache, the 150 after them are staged; then the
 * rounds (but the full ones, which walk all 200 files) look at a few
 * files each.  Before the work mark every round looked at all 150 staged
 * files (AHEAD_FILES is 256).  And what the marks skip is still done
 * once it is wanted: staged files go to disk when the policy wants them.
 */
static void test_rounds_skip_staged_files(void)
{
	enum { ON_DISK = 50, LISTED = 200 };
	struct list_report rep;
	struct penv p = { 0 };
	char name[16];
	unsigned i, start, reads, nrounds, full;
	unsigned long looked;

	staged_list(&p, ON_DISK, LISTED, 1, 5);		/* and f200 */
	snprintf(name, sizeof(name), "f%u", LISTED - 1);
	CHECK(staged(&p, "f50"));
	CHECK(staged(&p, name));
	/* settled: count what the next rounds look at */
	reads = mem_reads(p.e.be);
	start = rounds(&p);
	full = full_rounds(&p);
	looked = looked_at(&p);
	await_full_rounds(&p, 4);
	nrounds = rounds(&p) - start;
	full = full_rounds(&p) - full;
	looked = looked_at(&p) - looked;
	CHECK_INT(nrounds, >=, 3 * PREFETCH_RECHECK_ROUNDS);	/* between 4 full ones */
	/* full rounds: all 200 (one may have begun before start); the
	 * others: the mark's file and one more */
	CHECK_INT(looked, <=, (full + 1) * LISTED + nrounds * 4);
	CHECK_INT(mem_reads(p.e.be), ==, reads);	/* none fetched again */
	CHECK(staged(&p, name));
	/* the reader reads f0..f49 and the next epoch (f200) is queued: the
	 * rounds still store the staged files the policy now wants on disk
	 * (f50..f99, before f200 in the future) from memory */
	CHECK_INT(lists_publish(p.lists, "rank0", "f200\n", 5, resolve, &p,
				&rep), ==, 0);
	CHECK_INT(rep.outcome, ==, LO_QUEUED);
	for (i = 0; i < ON_DISK; i++) {
		uint64_t fid, size;

		snprintf(name, sizeof(name), "f%u", i);
		CHECK_INT(resolve(&p, name, strlen(name), &fid, &size), ==, 0);
		lists_note_open(p.lists, fid, true);
	}
	prefetch_kick(p.pf);
	for (i = 0; i < 3000 && !on_disk(&p, "f99"); i++) {
		prefetch_kick(p.pf);
		nap();
	}
	CHECK(on_disk(&p, "f50"));
	CHECK(on_disk(&p, "f99"));
	CHECK(!on_disk(&p, "f100"));
	CHECK(!on_disk(&p, "f200"));
	CHECK_INT(mem_reads(p.e.be), ==, reads);	/* from memory */

	penv_fini(&p);
}

/* publish @text as list @name of @p and check its outcome */
static void publish(struct penv *p, const char *name, const char *text,
		    enum list_outcome want)
{
	struct list_report rep;

	CHECK_INT(lists_publish(p->lists, name, text, strlen(text), resolve,
				p, &rep), ==, 0);
	CHECK_INT(rep.outcome, ==, want);
	prefetch_published(p->pf);
}

/*
 * The walk of a list that reaches a queued epoch the policy refuses ends
 * there, and only there: the other lists' current misses are still
 * staged.  rank0's epoch 0 (a1..a4) fills the cache and is read; its
 * queued epoch 1 (q1 q2 a1..a4) wants the a files again, so q1 (no use
 * after it) is refused.  rank1's current epoch (f1..f4) comes after
 * rank0 in the window (in every other round: they begin with each list
 * in turn).  Before, the whole round ended at q1: nothing of rank1 was
 * staged (in the benchmark: rank0 finished its epoch first, and rank1
 * read the rest of its epoch on demand, the link idle between reads).
 */
static void test_a_refused_queued_epoch_ends_only_its_list(void)
{
	static const char *const names[] = {
		"a1", "a2", "a3", "a4", "q1", "q2", "f1", "f2", "f3", "f4",
	};
	struct penv p = { 0 };
	char *data = pattern(4096, 9);
	unsigned i;

	env_init(&p.e, 4 * 4096, 0, READ_DIRECT);
	for (i = 0; i < ARRAY_SIZE(names); i++)
		mem_put(p.e.be, names[i], data, 4096);
	penv_open(&p);
	penv_start(&p);
	publish(&p, "rank0", "a1\na2\na3\na4\n", LO_CURRENT);
	publish(&p, "rank0", "q1\nq2\na1\na2\na3\na4\n", LO_QUEUED);
	for (i = 0; i < 1000 && !on_disk(&p, "a4"); i++)
		nap();
	CHECK(on_disk(&p, "a4"));
	for (i = 0; i < 4; i++) {		/* rank0's reader read them */
		uint64_t fid, size;

		CHECK_INT(resolve(&p, names[i], 2, &fid, &size), ==, 0);
		lists_note_open(p.lists, fid, true);
	}
	await_full_rounds(&p, 1);
	CHECK(!on_disk(&p, "q1"));		/* refused: no use after */
	CHECK(!staged(&p, "q1"));		/* queued: not staged */

	publish(&p, "rank1", "f1\nf2\nf3\nf4\n", LO_CURRENT);
	for (i = 0; i < 1000 && !staged(&p, "f4"); i++) {
		prefetch_kick(p.pf);
		nap();
	}
	for (i = 6; i < ARRAY_SIZE(names); i++)
		CHECK(staged(&p, names[i]));
	CHECK(on_disk(&p, "a1"));		/* the disk as it was */
	CHECK(!on_disk(&p, "f1"));
	CHECK(!on_disk(&p, "q1"));

	penv_fini(&p);
	free(data);
}

int main(void)
{
	runner_name = "test_prefetch";
	log_level = LOG_ERR;
	TEST(test_staged_in_flight_keeps_later_files_off_disk);
	TEST(test_refused_prefetch_is_written_from_memory_later);
	TEST(test_staged_past_the_full_window_stay);
	TEST(test_rounds_skip_staged_files);
	TEST(test_a_refused_queued_epoch_ends_only_its_list);
	return runner_done();
}
