// SPDX-License-Identifier: MIT
/*
 * Trace-driven policy test: synthetic shuffled epochs (every file read
 * once per epoch in a fresh random order) over a dataset larger than the
 * cache, at cache/dataset = 0.25, 0.5 and 0.9.  The best any policy can
 * do from epoch 2 on is a hit ratio of cache/dataset (field notes, §4).
 * Required: >= 0.95 x C/D with the epoch lists known ("auto" = Belady),
 * >= 0.9 x C/D without lists ("heat"); LRU printed beside them.
 * Also: a one-pass scan does not flush a hot set; pins hold.  The lists'
 * future is given as the daemon's lists give it (one next use at a time
 * and incrementally: sync/where/reads), so the victims by next use come
 * from the use heaps (useheap.h) as in the daemon.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/policy_priv.h"	/* the nodes: the policy's test seam */
#include "runner.h"
#include "shuffle.h"

#define N	4000
#define UNIT	4096ULL		/* every file is one 4 KiB block */
#define EPOCHS	6

static unsigned *order[EPOCHS + 1];	/* order[e][i]: file read i-th */
static unsigned *where[EPOCHS + 1];	/* where[e][f]: position of f */
static unsigned cur_e, cur_i;
static bool resident[N];

/* the loader publishes epoch e+1 while epoch e runs */
static uint64_t next_use(void *arg, uint64_t fid, uint64_t *after)
{
	uint64_t later = ((uint64_t)(N - cur_i) + where[cur_e + 1][fid]) * UNIT;

	(void)arg;
	if (after)
		*after = NEXT_USE_NONE;
	if (where[cur_e][fid] > cur_i) {
		if (after)
			*after = later;
		return (where[cur_e][fid] - cur_i) * UNIT;
	}
	return later;
}

/*
 * The same future incrementally (policy.h, sync/where/reads), as the
 * daemon's lists give it: one reader (slot 0) whose keys are its files'
 * places in epoch cur_e, then N + their places in epoch cur_e + 1, from
 * an origin at cur_i; an epoch is a generation, and the read files (the
 * first cur_i + 1 of the epoch) are its reads.
 */
static void sim_sync(void *arg, struct future_sync *s)
{
	(void)arg;
	s->gen = cur_e;
	s->active = 1;
	s->reads = cur_i + 1;
	s->origin[0] = (uint64_t)cur_i * UNIT;
}

static int sim_where(void *arg, uint64_t fid, uint64_t gen, unsigned *slot,
		     uint64_t *key)
{
	(void)arg;
	if (gen != cur_e)
		return -ESTALE;
	*slot = 0;
	*key = next_use(NULL, fid, NULL) + (uint64_t)cur_i * UNIT;
	return 1;
}

static long sim_reads(void *arg, uint64_t from, uint64_t to, uint64_t *fids,
		      size_t max)
{
	uint64_t k;

	(void)arg;
	if (from > to || to > cur_i + 1 || to - from > max)
		return -1;
	for (k = from; k < to; k++)
		fids[k - from] = order[cur_e][k];
	return (long)(to - from);
}

struct sim {
	struct policy p;
	uint64_t backend;		/* files fetched in the measured epochs */
	uint64_t hits, reads;
	bool measuring;
};

/* evict what the policy chose, then store @n if it was admitted */
static bool sim_store(struct sim *s, struct policy_node *n,
		      enum admit_kind kind, int64_t now)
{
	struct admission adm;
	int rc, i;

	do {
		rc = policy_admit(&s->p, n, UNIT, kind, &adm, now);
		if (rc < 0)
			return false;
		for (i = 0; i < rc; i++) {
			struct policy_node *v = adm.victims[i];

			CHECK(!v->pinned && v != n && v->cached);
			CHECK_INT(adm.take[i], ==, v->cached);	/* one chunk */
			policy_charge(&s->p, v, -(int64_t)v->cached);
			policy_del(&s->p, v);
			resident[v->fid] = false;
		}
	} while (adm.partial);
	policy_reserve(&s->p, UNIT);
	policy_settle(&s->p, n, UNIT, true);
	policy_add(&s->p, n);
	resident[n->fid] = true;
	CHECK(s->p.used <= s->p.limit);
	return true;
}

/* the file read @ahead files after position cur_i of epoch cur_e */
static unsigned file_ahead(unsigned ahead)
{
	unsigned i = cur_i + ahead;

	return i < N ? order[cur_e][i] : order[cur_e + 1][i - N];
}

/*
 * Hit ratio over epochs 2..EPOCHS of @name with @cap files of cache; with
 * @lead > 0, a prefetcher stages up to @lead files ahead of the reader
 * as fusefs's does with lists (while the policy admits them).
 */
static double simulate(const char *name, bool lists, unsigned cap,
		       unsigned lead, double *backend_per_epoch)
{
	struct sim s = { 0 };
	unsigned e, i, k;

	memset(resident, 0, sizeof(resident));
	CHECK_INT(policy_init(&s.p, name, 1e9, cap * UNIT, UNIT), ==, 0);
	if (lists)
		policy_set_future(&s.p, &(struct policy_future){
			.one = next_use, .sync = sim_sync,
			.where = sim_where, .reads = sim_reads });
	for (e = 0; e < EPOCHS; e++) {
		s.measuring = e > 0;
		for (i = 0; i < N; i++) {
			unsigned f = order[e][i];
			struct policy_node *n = policy_node(&s.p, f);
			int64_t now = (int64_t)e * N + i;

			cur_e = e;
			cur_i = i;
			policy_touch(&s.p, n, now);
			s.reads += s.measuring;
			if (resident[f]) {
				s.hits += s.measuring;
			} else {
				s.backend += s.measuring;
				sim_store(&s, n, ADMIT_DEMAND, now);
			}
			/* then the prefetcher, which follows the reader */
			for (k = 1; k <= lead; k++) {
				struct policy_node *g =
					policy_node(&s.p, file_ahead(k));

				if (resident[g->fid])
					continue;
				if (!sim_store(&s, g, ADMIT_PREFETCH, now))
					break;	/* the window ends here */
				s.backend += s.measuring;
			}
		}
	}
	policy_release(&s.p);
	if (backend_per_epoch)
		*backend_per_epoch = (double)s.backend / (EPOCHS - 1);
	return (double)s.hits / s.reads;
}

static void test_shuffled_epochs(void)
{
	static const double ratios[] = { 0.25, 0.5, 0.9 };
	size_t k;

	for (k = 0; k < 3; k++) {
		unsigned cap = N * ratios[k];
		double lru = simulate("lru", false, cap, 0, NULL);
		double heat = simulate("heat", false, cap, 0, NULL);
		double belady = simulate("auto", true, cap, 0, NULL);

		printf("  cache/dataset %.2f: lru %.3f  heat (no list) %.3f"
		       "  auto (lists) %.3f  bound %.3f\n", ratios[k], lru, heat,
		       belady, ratios[k]);
		CHECK(belady >= 0.95 * ratios[k]);
		CHECK(heat >= 0.9 * ratios[k]);
	}
}

/*
 * Belady with a prefetcher staging files ahead of the reader: backend
 * traffic per epoch stays near
 * dataset - cache (every file the cache cannot hold is fetched once).
 */
static void test_prefetch_window(void)
{
	static const double ratios[] = { 0.25, 0.5, 0.9 };
	static const unsigned leads[] = { 8, 64 };
	size_t k, l;

	for (k = 0; k < 3; k++) {
		for (l = 0; l < 2; l++) {
			unsigned cap = N * ratios[k];
			double per_epoch, hit;

			hit = simulate("auto", true, cap, leads[l], &per_epoch);
			printf("  cache/dataset %.2f, lead %u: backend/(D-C) %.3f,"
			       " reader hits %.3f\n", ratios[k], leads[l],
			       per_epoch / (N - cap), hit);
			CHECK(per_epoch <= 1.05 * (N - cap) + leads[l]);
			/* what Belady would not keep is read on demand */
			CHECK(hit >= 0.95 * ratios[k]);
		}
	}
}

/* an admission is a dry run: nothing changes, nothing stays marked */
static void test_dry_run(void)
{
	struct policy p;
	struct admission adm;
	struct policy_node *n;
	unsigned f;

	policy_init(&p, "auto", 60, 100 * UNIT, UNIT);
	policy_set_future(&p, &(struct policy_future){ .one = next_use });
	cur_e = 0;
	cur_i = 0;
	for (f = 0; f < 100; f++) {	/* demand fills the cache */
		n = policy_node(&p, f);
		policy_touch(&p, n, f);
		CHECK_INT(policy_admit(&p, n, UNIT, ADMIT_DEMAND, &adm, f), ==, 0);
		policy_reserve(&p, UNIT);
		policy_settle(&p, n, UNIT, true);
		policy_add(&p, n);
	}
	CHECK_INT(p.used, ==, 100 * UNIT);
	CHECK_INT(policy_free(&p), ==, 0);
	n = policy_node(&p, order[0][0]);	/* needed first: admitted */
	if (n->cached)
		n = policy_node(&p, 100);
	CHECK(policy_admit(&p, n, 50 * UNIT, ADMIT_PREFETCH, &adm, 92) != 0);
	CHECK_INT(p.used, ==, 100 * UNIT);
	CHECK_INT(p.reserved, ==, 0);
	for (f = 0; f < 100; f++)
		CHECK_INT(policy_node(&p, f)->taking, ==, 0);
	policy_release(&p);
}

/* a node with @heat accesses, cached with one block */
static struct policy_node *cached_node(struct policy *p, uint64_t fid,
				       unsigned heat, int64_t *now)
{
	struct policy_node *n = policy_node(p, fid);
	unsigned r;

	for (r = 0; r < heat; r++)
		policy_touch(p, n, (*now)++);
	policy_charge(p, n, UNIT);
	policy_add(p, n);
	return n;
}

static void test_scan_keeps_hot_set(void)
{
	struct policy p;
	struct admission adm;
	int64_t now = 0;
	unsigned i;
	int rc = 0;

	policy_init(&p, "heat", 3600, 10 * UNIT, 0);
	for (i = 0; i < 10; i++)		/* a hot set, read 5 times */
		cached_node(&p, i, 5, &now);
	for (i = 100; i < 10100 && rc < 0; i++) {	/* a scan of new files */
		struct policy_node *n = policy_node(&p, i);

		policy_touch(&p, n, now++);
		rc = policy_admit(&p, n, UNIT, ADMIT_DEMAND, &adm, now);
	}
	for (i = 100; i < 10100; i++) {
		struct policy_node *n = policy_node(&p, i);

		policy_touch(&p, n, now++);
		rc = policy_admit(&p, n, UNIT, ADMIT_DEMAND, &adm, now);
		CHECK_INT(rc, ==, -ENOSPC);	/* never over the hot set */
		if (rc >= 0)
			break;
	}
	/* much later, heat has decayed: new data gets in again */
	{
		struct policy_node *n = policy_node(&p, 99999);

		policy_touch(&p, n, now);
		policy_touch(&p, n, now + 1);
		policy_touch(&p, n, now + 2);
		rc = policy_admit(&p, n, UNIT, ADMIT_DEMAND, &adm,
				  now + 3600 * 24);
		CHECK_INT(rc, ==, 1);
	}
	policy_release(&p);
}

static void test_pins_and_use_hold(void)
{
	const char *names[] = { "lru", "heat", "auto" };
	size_t k;

	for (k = 0; k < 3; k++) {
		struct policy p;
		struct policy_node *a, *b, *in;
		struct admission adm;
		int64_t now = 0;

		policy_init(&p, names[k], 60, 2 * UNIT, 0);
		a = cached_node(&p, 1, 1, &now);
		b = cached_node(&p, 2, 1, &now);
		a->pinned = true;
		b->in_use = true;
		in = policy_node(&p, 3);
		policy_touch(&p, in, 2);
		policy_touch(&p, in, 3);
		policy_touch(&p, in, 4);
		policy_touch(&p, in, 5);
		CHECK_INT(policy_admit(&p, in, UNIT, ADMIT_DEMAND, &adm, 100000),
			  ==, -ENOSPC);
		b->in_use = false;
		if (k == 0) {	/* lru always gives up the evictable one */
			CHECK_INT(policy_admit(&p, in, UNIT, ADMIT_DEMAND, &adm,
					       10), ==, 1);
			CHECK(adm.victims[0] == b);
		}
		/* more than the cache: never */
		CHECK_INT(policy_admit(&p, in, 3 * UNIT, ADMIT_DEMAND, &adm, 10),
			  ==, -ENOSPC);
		policy_release(&p);
	}
}

/* many small victims for one big newcomer: partial plans, then done */
static void test_many_victims(void)
{
	struct policy p;
	struct admission adm;
	struct policy_node *in;
	int64_t now = 0;
	unsigned i, rounds = 0, evicted = 0;
	int rc, j;

	policy_init(&p, "lru", 60, 200 * UNIT, 0);
	for (i = 0; i < 200; i++)
		cached_node(&p, i, 1, &now);
	in = policy_node(&p, 1000);
	policy_touch(&p, in, now);
	do {
		rc = policy_admit(&p, in, 100 * UNIT, ADMIT_DEMAND, &adm, now);
		CHECK(rc >= 0);
		if (rc < 0)
			break;
		for (j = 0; j < rc; j++) {
			CHECK_INT(adm.take[j], ==, UNIT);
			policy_charge(&p, adm.victims[j], -(int64_t)UNIT);
			policy_del(&p, adm.victims[j]);
		}
		evicted += rc;
		rounds++;
	} while (adm.partial);
	CHECK_INT(evicted, ==, 100);
	CHECK_INT(rounds, ==, 2);
	CHECK_INT(policy_free(&p), ==, 100 * UNIT);
	policy_release(&p);
}

int main(void)
{
	unsigned e, i;

	runner_name = "test_policy";
	for (e = 0; e <= EPOCHS; e++) {
		order[e] = malloc(N * sizeof(unsigned));
		where[e] = malloc(N * sizeof(unsigned));
		shuffle(order[e], N, 1000 + e);
		for (i = 0; i < N; i++)
			where[e][order[e][i]] = i;
	}
	TEST(test_shuffled_epochs);
	TEST(test_prefetch_window);
	TEST(test_dry_run);
	TEST(test_scan_keeps_hot_set);
	TEST(test_pins_and_use_hold);
	TEST(test_many_victims);
	for (e = 0; e <= EPOCHS; e++) {
		free(order[e]);
		free(where[e]);
	}
	return runner_done();
}
