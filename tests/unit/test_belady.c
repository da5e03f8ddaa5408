// SPDX-License-Identifier: MIT
/*
 * Chunk-level policy simulator: shuffled epochs of shards read chunk by
 * chunk, the next epoch's order published while an epoch runs (as the
 * Python helper does), with the real policy code (policy.c) deciding
 * what is stored and what goes.
 *
 * "auto" with the future (lists mode) also runs a prefetcher that stages
 * missing chunks ahead of the reader for as long as the policy admits
 * them (prefetch.c's rule).  "heat" and "lru" see demand reads only.
 *
 * Shards of 1/8, 1/2, 1 and 2 x the free space F, where F is the room a
 * cache keeps free for what streams through it, taken as a quarter of
 * the cache (the streaming window of the file-level design), at
 * cache/dataset 0.25, 0.5 and 0.9.  Required from epoch 2 on, for every
 * configuration: lists' backend bytes per epoch <= heat's + 2%, and
 * <= 1.05 x (dataset - cache) + one chunk.
 */
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "../../src/policy_priv.h"	/* the nodes: the policy's test seam */
#include "runner.h"
#include "shuffle.h"

#define K		(16 * 4096ULL)	/* bytes per chunk */
#define CACHE_CHUNKS	512u
#define EPOCHS		5		/* epoch 0 fills the cache */
#define LOOKAHEAD	256u		/* files the prefetcher looks at */
#define MAX_FILES	4096u

struct sim {
	struct policy p;
	unsigned nfiles;
	uint32_t size[MAX_FILES];	/* chunks per file */
	uint32_t have[MAX_FILES];	/* chunks cached: always a prefix */
	unsigned *order[EPOCHS + 1];	/* order[e][i]: file read i-th */
	unsigned *where[EPOCHS + 1];	/* where[e][f]: position of f */
	uint64_t *off[EPOCHS + 1];	/* off[e][i]: bytes before position i */
	uint64_t total;			/* dataset bytes */
	unsigned e, i;			/* the reader: epoch, file opened */
	uint64_t backend[EPOCHS];	/* bytes fetched per epoch */
};

/* bytes the reader reads before @fid's next use, and the one after
 * (lists_next_use_bytes()): epoch e, then e + 1 */
static uint64_t next_use(void *arg, uint64_t fid, uint64_t *after)
{
	const struct sim *s = arg;
	uint64_t later;
	unsigned w;

	if (after)
		*after = NEXT_USE_NONE;
	if (fid >= s->nfiles)
		return NEXT_USE_NONE;
	w = s->where[s->e][fid];
	later = s->total - s->off[s->e][s->i] +
		s->off[s->e + 1][s->where[s->e + 1][fid]];
	if (w > s->i) {
		if (after)
			*after = later;
		return s->off[s->e][w] - s->off[s->e][s->i];
	}
	return later;
}

/* store chunk have[f] of @f if the policy admits it, victims dropped */
static bool store(struct sim *s, unsigned f, enum admit_kind kind)
{
	struct policy_node *n = policy_node(&s->p, f);
	struct admission adm;
	int rc, i;

	do {
		rc = policy_admit(&s->p, n, K, kind, &adm, s->e);
		if (rc < 0)
			return false;
		for (i = 0; i < rc; i++) {
			struct policy_node *v = adm.victims[i];
			uint64_t take = MIN(adm.take[i], v->cached);
			uint32_t chunks = (uint32_t)((take + K - 1) / K);

			CHECK(!v->pinned && !v->in_use && v != n && v->cached);
			/* the cache drops whole chunks from the tail */
			s->have[v->fid] -= chunks;
			policy_charge(&s->p, v, -(int64_t)(chunks * K));
			if (!v->cached)
				policy_del(&s->p, v);
		}
	} while (adm.partial);
	policy_reserve(&s->p, K);
	policy_settle(&s->p, n, K, true);
	policy_add(&s->p, n);
	s->have[f]++;
	CHECK(s->p.used <= s->p.limit);
	return true;
}

/* the prefetcher: missing chunks ahead of the reader, while admitted */
static void prefetch(struct sim *s)
{
	unsigned k;

	for (k = 1; k <= LOOKAHEAD; k++) {
		unsigned pos = s->i + k, f;

		if (pos >= 2 * s->nfiles)
			return;
		f = pos < s->nfiles ? s->order[s->e][pos] :
			s->order[s->e + 1][pos - s->nfiles];
		while (s->have[f] < s->size[f]) {
			if (!store(s, f, ADMIT_PREFETCH))
				return;		/* the window ends here */
			s->backend[s->e] += K;
		}
	}
}

static void read_file(struct sim *s, unsigned f, bool lists)
{
	struct policy_node *n = policy_node(&s->p, f);
	bool storing = true;
	uint32_t c;

	policy_touch(&s->p, n, s->e);
	n->in_use = true;
	for (c = 0; c < s->size[f]; c++) {
		if (c >= s->have[f]) {
			s->backend[s->e] += K;
			/* a chunk not kept keeps the prefix: none after it */
			if (storing)
				storing = store(s, f, ADMIT_DEMAND);
		}
		if (lists)
			prefetch(s);
	}
	n->in_use = false;
}

/* dataset of @d chunks in shards of @shard chunks (the last one shorter) */
static void setup(struct sim *s, unsigned d, unsigned shard)
{
	unsigned e, i;

	memset(s, 0, sizeof(*s));
	s->nfiles = (d + shard - 1) / shard;
	for (i = 0; i < s->nfiles; i++) {
		s->size[i] = MIN(shard, d - i * shard);
		s->total += s->size[i] * K;
	}
	for (e = 0; e <= EPOCHS; e++) {
		s->order[e] = malloc(s->nfiles * sizeof(unsigned));
		s->where[e] = malloc(s->nfiles * sizeof(unsigned));
		s->off[e] = malloc(s->nfiles * sizeof(uint64_t));
		shuffle(s->order[e], s->nfiles, 7 + e);
		for (i = 0; i < s->nfiles; i++) {
			s->where[e][s->order[e][i]] = i;
			s->off[e][i] = i ? s->off[e][i - 1] +
				s->size[s->order[e][i - 1]] * K : 0;
		}
	}
}

static void teardown(struct sim *s)
{
	unsigned e;

	for (e = 0; e <= EPOCHS; e++) {
		free(s->order[e]);
		free(s->where[e]);
		free(s->off[e]);
	}
	policy_release(&s->p);
}

/* backend bytes per epoch, epochs 1.. (the worst of them) */
static uint64_t run(struct sim *s, const char *name, bool lists)
{
	uint64_t worst = 0;
	unsigned e;

	CHECK_INT(policy_init(&s->p, name, 1e9, CACHE_CHUNKS * K, K), ==, 0);
	if (lists)
		policy_set_future(&s->p, &(struct policy_future){ .one = next_use, .arg = s });
	for (e = 0; e < EPOCHS; e++) {
		s->e = e;
		for (s->i = 0; s->i < s->nfiles; s->i++)
			read_file(s, s->order[e][s->i], lists);
		if (e)
			worst = MAX(worst, s->backend[e]);
	}
	return worst;
}

static void test_shards_through_the_cache(void)
{
	static const double ratios[] = { 0.25, 0.5, 0.9 };
	static const double shards[] = { 0.125, 0.5, 1, 2 };	/* x F */
	static struct sim s;
	size_t r, k;

	printf("  %-5s %-6s %10s %10s %10s %10s\n", "C/D", "shard", "D-C MiB",
	       "lists", "heat", "lru");
	for (r = 0; r < ARRAY_SIZE(ratios); r++) {
		for (k = 0; k < ARRAY_SIZE(shards); k++) {
			unsigned d = (unsigned)(CACHE_CHUNKS / ratios[r]);
			unsigned shard = (unsigned)(shards[k] * CACHE_CHUNKS / 4);
			uint64_t lists, heat, lru, miss;

			setup(&s, d, shard);
			lists = run(&s, "auto", true);
			teardown(&s);
			setup(&s, d, shard);
			heat = run(&s, "heat", false);
			teardown(&s);
			setup(&s, d, shard);
			lru = run(&s, "lru", false);
			teardown(&s);
			miss = (uint64_t)(d - CACHE_CHUNKS) * K;
			printf("  %-5.2f %-6.3g %10.1f %10.3f %10.3f %10.3f"
			       "  (backend / (D-C), worst epoch >= 2)\n",
			       ratios[r], shards[k], miss / 1048576.0,
			       (double)lists / miss, (double)heat / miss,
			       (double)lru / miss);
			CHECK(lists <= heat + heat / 50);
			CHECK(lists <= miss + miss / 20 + K);
		}
	}
}

/*
 * Three listed files of three chunks in a cache of six, epoch 0 reading
 * them in s->order[0]: *@a (read now, 3 chunks cached, in use) and *@b
 * (read last, @b_bytes cached); *@in, read next, has nothing cached.
 */
static void a_reading_b_last(struct sim *s, uint64_t b_bytes,
			     struct policy_node **a, struct policy_node **b,
			     struct policy_node **in)
{
	setup(s, 9, 3);
	policy_init(&s->p, "auto", 60, 6 * K, K);
	policy_set_future(&s->p, &(struct policy_future){ .one = next_use, .arg = s });
	*a = policy_node(&s->p, s->order[0][0]);
	*b = policy_node(&s->p, s->order[0][2]);
	*in = policy_node(&s->p, s->order[0][1]);
	policy_charge(&s->p, *a, 3 * K);
	policy_add(&s->p, *a);
	policy_charge(&s->p, *b, b_bytes);
	policy_add(&s->p, *b);
	(*a)->in_use = true;
}

/* a listed file gives up its last chunk, not the whole file */
static void test_tail_first(void)
{
	static struct sim s;
	struct policy_node *a, *b, *in, *other;
	struct admission adm;

	a_reading_b_last(&s, 3 * K, &a, &b, &in);
	CHECK_INT(policy_admit(&s.p, in, K, ADMIT_DEMAND, &adm, 0), ==, 1);
	CHECK(adm.victims[0] == b);
	CHECK_INT(adm.take[0], ==, K);
	/* two chunks: still only b's tail, one victim entry */
	CHECK_INT(policy_admit(&s.p, in, 2 * K, ADMIT_DEMAND, &adm, 0), ==, 1);
	CHECK_INT(adm.take[0], ==, 2 * K);
	/* the newcomer's third chunk (at 5 chunks) beats b's head (at 6) */
	policy_charge(&s.p, b, -2 * (int64_t)K);
	policy_charge(&s.p, in, 2 * K);
	policy_add(&s.p, in);
	in->in_use = true;
	CHECK_INT(policy_admit(&s.p, in, K, ADMIT_DEMAND, &adm, 0), ==, 1);
	CHECK(adm.victims[0] == b && adm.take[0] == K);
	/* but not b's head, 2 chunks on, as a prefetch: that counts the
	 * use after its coming read (in epoch 1, after b's head) */
	CHECK_INT(policy_admit(&s.p, in, K, ADMIT_PREFETCH, &adm, 0), ==,
		  -ENOSPC);
	a->in_use = false;
	/* a file no list reads never displaces a listed chunk */
	other = policy_node(&s.p, 1000);
	policy_touch(&s.p, other, 0);
	policy_touch(&s.p, other, 0);
	CHECK_INT(policy_admit(&s.p, other, K, ADMIT_DEMAND, &adm, 0), ==,
		  -ENOSPC);
	/* without a future the whole coldest file goes (heat) */
	policy_set_future(&s.p, NULL);
	in->in_use = false;
	CHECK_INT(policy_admit(&s.p, other, K, ADMIT_DEMAND, &adm, 0), ==, 1);
	CHECK_INT(adm.take[0], ==, adm.victims[0]->cached);
	teardown(&s);
}

/*
 * A file's last chunk is usually short: its tail gives up that chunk's
 * bytes, not a whole chunk's.  The cache drops whole chunks from the
 * tail until take[i] bytes are freed, so a take of a whole chunk from a
 * file ending in a short one would cost the chunk before it too.
 */
static void test_short_last_chunk(void)
{
	static struct sim s;
	struct policy_node *a, *b, *in;
	struct admission adm;

	a_reading_b_last(&s, 2 * K + 4096, &a, &b, &in);	/* two chunks and a block */
	/* one block short of a chunk free: b's last chunk (a block) will do */
	CHECK_INT(policy_admit(&s.p, in, K, ADMIT_DEMAND, &adm, 0), ==, 1);
	CHECK(adm.victims[0] == b);
	CHECK_INT(adm.take[0], ==, 4096);
	/* a chunk and a block: the short chunk, then one whole chunk */
	CHECK_INT(policy_admit(&s.p, in, 2 * K, ADMIT_DEMAND, &adm, 0), ==, 1);
	CHECK(adm.victims[0] == b);
	CHECK_INT(adm.take[0], ==, K + 4096);
	CHECK_INT(b->taking, ==, 0);
	teardown(&s);
}

int main(void)
{
	runner_name = "test_belady";
	TEST(test_tail_first);
	TEST(test_short_last_chunk);
	TEST(test_shards_through_the_cache);
	return runner_done();
}
