// SPDX-License-Identifier: MIT
/*
 * Ranking by next use on a sample (POLICY_RANK_SAMPLE): with more cached
 * files than the sample, "auto" picks its victims among a random sample
 * instead of among every entry.  Shuffled epochs (each published while
 * the one before runs) over 8,000 one-block files at cache/dataset 0.25,
 * 0.5 and 0.9, a sample of 512 (so 2,000-7,200 entries are sampled
 * from): backend reads per epoch from epoch 2 on, sampled against exact,
 * and how far from the furthest each sampled victim is (the share of
 * cached files used later than it).  Required: at most 5 % more reads
 * than exact and within the 1.05 x (D - C) of issue 10 item 7; victims
 * on average among the furthest 1 % (a sample of 512 puts the sample's
 * furthest at ~0.2 %; a sample of 4 at ~20 %, which fails); and fewer
 * lookups than exact (it did sample).
 */
#include <stdlib.h>
#include <string.h>

#include "../../src/policy_priv.h"	/* the nodes: the policy's test seam */
#include "runner.h"
#include "shuffle.h"

#define N	8000
#define UNIT	4096ULL
#define EPOCHS	4
#define SAMPLE	512

static unsigned *order[EPOCHS + 1], *where[EPOCHS + 1];
static unsigned cur_e, cur_i;
static unsigned long asked;	/* next-use lookups */

static uint64_t next_use(void *arg, uint64_t fid, uint64_t *after)
{
	uint64_t later = ((uint64_t)(N - cur_i) + where[cur_e + 1][fid]) * UNIT;

	(void)arg;
	asked++;
	if (after)
		*after = NEXT_USE_NONE;
	if (where[cur_e][fid] > cur_i) {
		if (after)
			*after = later;
		return (where[cur_e][fid] - cur_i) * UNIT;
	}
	return later;
}

static void next_uses(void *arg, const uint64_t *fids, uint64_t *uses,
		      size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		uses[i] = next_use(arg, fids[i], NULL);
}

/* the share of @p's cached files (other than @in) used later than @v */
static double share_later(struct policy *p, const struct policy_node *in,
			  const struct policy_node *v)
{
	unsigned long saved = asked;
	uint64_t uv = next_use(NULL, v->fid, NULL);
	size_t i, later = 0, all = 0;

	for (i = 0; i < p->cold.n; i++) {
		const struct policy_node *x = p->cold.a[i];

		if (x == in)
			continue;
		all++;
		later += next_use(NULL, x->fid, NULL) > uv;
	}
	asked = saved;		/* the test's lookups are not the policy's */
	return all ? (double)later / all : 0;
}

/*
 * The worst epoch's misses from epoch 1 on (MIN: demand admissions);
 * with @share, the mean share_later() of the victims.
 */
static uint64_t simulate(unsigned cap, size_t sample, unsigned long *lookups,
			 double *share)
{
	double sum = 0;
	unsigned long victims = 0;
	struct policy p;
	uint64_t worst = 0;
	unsigned e;

	CHECK_INT(policy_init(&p, "auto", 1e9, cap * UNIT, UNIT), ==, 0);
	p.rank_sample = sample;
	policy_set_future(&p, &(struct policy_future){ .one = next_use,
						       .many = next_uses });
	asked = 0;
	for (e = 0; e < EPOCHS; e++) {
		uint64_t miss = 0;

		cur_e = e;
		for (cur_i = 0; cur_i < N; cur_i++) {
			struct policy_node *n = policy_node(&p, order[e][cur_i]);
			struct admission adm;
			int rc, i;

			policy_touch(&p, n, (int64_t)e * N + cur_i);
			if (n->cached)
				continue;
			miss++;
			do {
				rc = policy_admit(&p, n, UNIT, ADMIT_DEMAND,
						  &adm, (int64_t)e * N + cur_i);
				for (i = 0; share && i < rc; i++, victims++)
					sum += share_later(&p, n,
							   adm.victims[i]);
				for (i = 0; i < rc; i++) {
					policy_charge(&p, adm.victims[i],
						      -(int64_t)UNIT);
					policy_del(&p, adm.victims[i]);
				}
			} while (rc >= 0 && adm.partial);
			if (rc < 0)
				continue;
			policy_reserve(&p, UNIT);
			policy_settle(&p, n, UNIT, true);
			policy_add(&p, n);
			CHECK(p.used <= p.limit);
		}
		if (e)
			worst = worst > miss ? worst : miss;
	}
	*lookups = asked;
	if (share)
		*share = victims ? sum / victims : 1;
	policy_release(&p);
	return worst;
}

/* one cache/dataset ratio a test: each asks every file per admission
 * (the exact twin), ~10 s under ASan, within the runner's limit */
static void sampled_close_to_exact(double ratio)
{
	unsigned cap = (unsigned)(ratio * N);
	unsigned long la, ls;
	double share;
	uint64_t exact = simulate(cap, 0, &la, NULL);
	uint64_t sampled = simulate(cap, SAMPLE, &ls, &share);

	printf("  C/D %.2f: misses per epoch (worst, epoch >= 2) exact "
	       "%llu, sampled %llu (D - C = %u); lookups %lu vs %lu; "
	       "victims' mean share used later %.4f\n",
	       ratio, (unsigned long long)exact,
	       (unsigned long long)sampled, N - cap, la, ls, share);
	CHECK(sampled <= exact + exact / 20);
	CHECK(share <= 0.01);
	CHECK(sampled <= (N - cap) + (N - cap) / 20 + 1);
	CHECK(ls * 2 < la);	/* it did sample */
}

static void test_sampled_close_to_exact_025(void)
{
	sampled_close_to_exact(0.25);
}

static void test_sampled_close_to_exact_050(void)
{
	sampled_close_to_exact(0.5);
}

static void test_sampled_close_to_exact_090(void)
{
	sampled_close_to_exact(0.9);
}

int main(void)
{
	unsigned e, i;

	runner_name = "test_rank_sample";
	for (e = 0; e <= EPOCHS; e++) {
		order[e] = malloc(N * sizeof(unsigned));
		where[e] = malloc(N * sizeof(unsigned));
		shuffle(order[e], N, 500 + e);
		for (i = 0; i < N; i++)
			where[e][order[e][i]] = i;
	}
	TEST(test_sampled_close_to_exact_025);
	TEST(test_sampled_close_to_exact_050);
	TEST(test_sampled_close_to_exact_090);
	for (e = 0; e <= EPOCHS; e++) {
		free(order[e]);
		free(where[e]);
	}
	return runner_done();
}
