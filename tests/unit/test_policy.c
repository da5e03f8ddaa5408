// SPDX-License-Identifier: MIT
/*
 * Trace-driven policy test: synthetic shuffled epochs (every file read
 * once per epoch in a fresh random order) over a dataset larger than the
 * cache, at cache/dataset = 0.25, 0.5 and 0.9.  The best any policy can
 * do from epoch 2 on is a hit ratio of cache/dataset (field notes, §4).
 * Required: >= 0.95 x C/D with the epoch lists known ("auto" = Belady),
 * >= 0.9 x C/D without lists ("heat"); LRU printed beside them.
 * Also: a one-pass scan does not flush a hot set; pins hold.
 */
#include <stdlib.h>
#include <string.h>

#include "policy.h"
#include "runner.h"

#define N	4000
#define EPOCHS	6

static unsigned *order[EPOCHS + 1];	/* order[e][i]: file read i-th */
static unsigned *where[EPOCHS + 1];	/* where[e][f]: position of f */
static unsigned cur_e, cur_i;
static bool resident[N];

static void shuffle(unsigned *a, unsigned n, unsigned seed)
{
	unsigned i;

	srand(seed);
	for (i = 0; i < n; i++)
		a[i] = i;
	for (i = n - 1; i > 0; i--) {
		unsigned j = rand() % (i + 1), t = a[i];

		a[i] = a[j];
		a[j] = t;
	}
}

/* the loader publishes epoch e+1 while epoch e runs */
static uint64_t next_use(void *arg, uint64_t fid)
{
	(void)arg;
	if (where[cur_e][fid] > cur_i)
		return where[cur_e][fid] - cur_i;
	return (uint64_t)(N - cur_i) + where[cur_e + 1][fid];
}

static bool is_resident(struct policy_node *n, void *arg)
{
	(void)arg;
	return resident[n->fid];
}

/* hit ratio over epochs 2..EPOCHS of @name with @cap files of cache */
static double simulate(const char *name, bool lists, unsigned cap)
{
	struct policy p;
	unsigned e, i, used = 0;
	uint64_t hits = 0, reads = 0;

	memset(resident, 0, sizeof(resident));
	CHECK_INT(policy_init(&p, name, 1e9), ==, 0);
	if (lists) {
		p.next_use = next_use;
		p.next_use_arg = NULL;
	}
	for (e = 0; e < EPOCHS; e++) {
		for (i = 0; i < N; i++) {
			unsigned f = order[e][i];
			struct policy_node *n = policy_node(&p, f), *v;
			int64_t now = (int64_t)e * N + i;

			cur_e = e;
			cur_i = i;
			p.ops->touch(&p, n, now);
			if (e > 0)
				reads++;
			if (resident[f]) {
				hits += e > 0;
				continue;
			}
			if (used < cap) {
				used++;
			} else {
				v = p.ops->victim(&p, n, is_resident, NULL, now);
				if (!v)
					continue;	/* not admitted */
				p.ops->del(&p, v);
				resident[v->fid] = false;
			}
			p.ops->add(&p, n);
			resident[f] = true;
		}
	}
	policy_release(&p);
	return (double)hits / reads;
}

static void test_shuffled_epochs(void)
{
	static const double ratios[] = { 0.25, 0.5, 0.9 };
	size_t k;

	for (k = 0; k < 3; k++) {
		unsigned cap = N * ratios[k];
		double lru = simulate("lru", false, cap);
		double heat = simulate("heat", false, cap);
		double belady = simulate("auto", true, cap);

		printf("  cache/dataset %.2f: lru %.3f  heat (no list) %.3f"
		       "  auto (lists) %.3f  bound %.3f\n", ratios[k], lru, heat,
		       belady, ratios[k]);
		CHECK(belady >= 0.95 * ratios[k]);
		CHECK(heat >= 0.9 * ratios[k]);
	}
}

static bool always(struct policy_node *n, void *arg)
{
	(void)n;
	(void)arg;
	return true;
}

static void test_scan_keeps_hot_set(void)
{
	struct policy p;
	struct policy_node *hot[10], *v;
	int64_t now = 0;
	unsigned i, r;

	policy_init(&p, "heat", 3600);
	for (i = 0; i < 10; i++) {		/* a hot set, read 5 times */
		hot[i] = policy_node(&p, i);
		for (r = 0; r < 5; r++)
			p.ops->touch(&p, hot[i], now++);
		p.ops->add(&p, hot[i]);
	}
	for (i = 100; i < 10100; i++) {		/* a scan of new files */
		struct policy_node *n = policy_node(&p, i);

		p.ops->touch(&p, n, now++);
		v = p.ops->victim(&p, n, always, NULL, now);
		CHECK(v == NULL);		/* never admitted over the hot set */
		if (v)
			break;
	}
	/* much later, heat has decayed: new data gets in again */
	{
		struct policy_node *n = policy_node(&p, 99999);

		p.ops->touch(&p, n, now);
		p.ops->touch(&p, n, now + 1);
		p.ops->touch(&p, n, now + 2);
		v = p.ops->victim(&p, n, always, NULL, now + 3600 * 24);
		CHECK(v != NULL);
	}
	policy_release(&p);
}

static void test_pins_hold(void)
{
	const char *names[] = { "lru", "heat", "auto" };
	size_t k;

	for (k = 0; k < 3; k++) {
		struct policy p;
		struct policy_node *a, *b, *in;

		policy_init(&p, names[k], 60);
		a = policy_node(&p, 1);
		b = policy_node(&p, 2);
		p.ops->touch(&p, a, 0);
		p.ops->touch(&p, b, 1);
		p.ops->add(&p, a);
		p.ops->add(&p, b);
		a->pinned = b->pinned = true;
		in = policy_node(&p, 3);
		p.ops->touch(&p, in, 2);
		p.ops->touch(&p, in, 3);
		p.ops->touch(&p, in, 4);
		p.ops->touch(&p, in, 5);
		CHECK(p.ops->victim(&p, in, always, NULL, 100000) == NULL);
		b->pinned = false;
		if (k == 0)	/* lru always gives up the unpinned one */
			CHECK(p.ops->victim(&p, in, always, NULL, 10) == b);
		policy_release(&p);
	}
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
	TEST(test_scan_keeps_hot_set);
	TEST(test_pins_hold);
	for (e = 0; e <= EPOCHS; e++) {
		free(order[e]);
		free(where[e]);
	}
	return runner_done();
}
