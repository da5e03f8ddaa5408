// SPDX-License-Identifier: MIT
/*
 * The heat heap: its walk visits nodes coldest first and stops when asked
 * or when its side queue would overflow; and a "heat" policy that ranks
 * victims by walking it chooses exactly what one that scans every entry
 * chooses, over random adds, touches, charges, deletions, pins and uses;
 * so does "auto" with lists that know no use (lists_known() false), whose
 * ranking is heat alone too; and "auto" with a future asked for every
 * entry in one call (lists_next_use_many()) chooses what it chooses when
 * asking one entry at a time.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "heatheap.h"
#include "../../src/policy_priv.h"	/* the nodes: the policy's test seam */
#include "runner.h"

#define NN	3000

static struct policy_node nodes[NN];

struct seen {
	struct policy_node *v[NN];
	size_t n, stop_at;
};

static bool record(void *arg, struct policy_node *x)
{
	struct seen *s = arg;

	s->v[s->n++] = x;
	return s->n < s->stop_at;
}

static void randomize(struct policy_node *x, uint64_t seq)
{
	/* few distinct keys: ties on hkey and last must fall to seq */
	x->hkey = rand() % 8 ? (double)(rand() % 50) : -INFINITY;
	x->last = rand() % 20;
	x->seq = seq;
}

static void test_walk_order(void)
{
	struct heatheap h;
	struct seen *s = calloc(1, sizeof(*s));
	uint64_t seq = 0;
	size_t i, in = 0, round;

	heatheap_init(&h);
	memset(nodes, 0, sizeof(nodes));
	srand(7);
	for (round = 0; round < 40; round++) {
		for (i = 0; i < 200; i++) {
			struct policy_node *x = &nodes[rand() % 900];

			if (!heatheap_in(x)) {
				randomize(x, ++seq);
				CHECK_INT(heatheap_insert(&h, x), ==, 0);
				in++;
			} else if (rand() % 2) {
				heatheap_remove(&h, x);
				CHECK(!heatheap_in(x));
				in--;
			} else {
				randomize(x, ++seq);
				heatheap_update(&h, x);
			}
		}
		CHECK_INT(h.n, ==, in);
		s->n = 0;
		s->stop_at = NN;	/* < 900 nodes: the side queue fits */
		CHECK_INT(heatheap_walk(&h, record, s), ==, 0);
		CHECK_INT(s->n, ==, in);
		for (i = 1; i < s->n; i++)
			CHECK(!heatheap_colder(s->v[i], s->v[i - 1]));
		for (i = 0; i < h.n; i++)
			CHECK_INT(h.a[i]->hpos, ==, i + 1);
	}
	s->n = 0;
	s->stop_at = 5;		/* the visitor stops the walk */
	CHECK_INT(heatheap_walk(&h, record, s), ==, 0);
	CHECK_INT(s->n, ==, 5);
	heatheap_release(&h);
	free(s);
}

static void test_walk_too_wide(void)
{
	struct heatheap h;
	struct seen *s = calloc(1, sizeof(*s));
	size_t i;

	heatheap_init(&h);
	memset(nodes, 0, sizeof(nodes));
	srand(8);
	/* distinct keys in insertion order: the heap is sorted, the walk
	 * goes level by level and its side queue holds a whole level */
	for (i = 0; i < NN; i++) {
		nodes[i].hkey = (double)i;
		nodes[i].seq = i + 1;
		CHECK_INT(heatheap_insert(&h, &nodes[i]), ==, 0);
	}
	s->stop_at = NN + 1;
	CHECK_INT(heatheap_walk(&h, record, s), ==, -E2BIG);
	CHECK(s->n >= HEATHEAP_WALK_MAX - 1 && s->n < NN);
	for (i = 0; i < s->n; i++)	/* the coldest, in order */
		CHECK(s->v[i] == &nodes[i]);
	heatheap_release(&h);
	free(s);
}

/* ---- the same choices as a scan ---- */

#define FILES	1500
#define U	4096ULL

struct twin {
	struct policy fast, scan;	/* the heap; every entry looked at */
};

static struct policy_node *node_in(struct policy *p, unsigned f)
{
	return policy_node(p, f);
}

/* do the same to file @f in both */
#define BOTH(t, f, stmt)					\
	do {							\
		struct policy *P_[2] = { &(t)->fast, &(t)->scan }; \
		int k_;						\
		for (k_ = 0; k_ < 2; k_++) {			\
			struct policy *p = P_[k_];		\
			struct policy_node *n = node_in(p, f);	\
			stmt;					\
		}						\
	} while (0)

/* "lru": the entry list is in (last, seq) order, the never-accessed
 * entries (last 0) first, in the order they came; the others keep link
 * order (seq), their ties going by (last, seq) without the list */
static void check_list_order(const struct policy *p, bool sorted)
{
	const struct policy_node *n;

	for (n = p->head->next; n->next != p->head; n = n->next)
		CHECK(sorted ? n->last < n->next->last ||
		      (n->last == n->next->last && n->seq < n->next->seq) :
		      n->seq < n->next->seq);
}

static void compare_admit(struct twin *t, int in, uint64_t bytes,
			  enum admit_kind kind, int64_t now, int *victims)
{
	struct admission a, b;
	int ra, rb, i;

	ra = policy_admit(&t->fast, in < 0 ? NULL : node_in(&t->fast, in),
			  bytes, kind, &a, now);
	rb = policy_admit(&t->scan, in < 0 ? NULL : node_in(&t->scan, in),
			  bytes, kind, &b, now);
	CHECK_INT(ra, ==, rb);
	if (ra != rb || ra <= 0)
		return;
	CHECK_INT(a.partial, ==, b.partial);
	for (i = 0; i < ra; i++) {
		CHECK_INT(a.victims[i]->fid, ==, b.victims[i]->fid);
		CHECK_INT(a.take[i], ==, b.take[i]);
	}
	*victims += ra;
}

static uint64_t none_use(void *arg, uint64_t fid, uint64_t *after)
{
	(void)arg;
	(void)fid;
	if (after)
		*after = NEXT_USE_NONE;
	return NEXT_USE_NONE;
}

static bool nothing_known(void *arg)
{
	(void)arg;
	return false;
}

/* a future that moves: some files unknown, the others by a hash shifted
 * as time goes on, with ties (uses in steps of 64 KiB) */
static int64_t moving_now;

static uint64_t moving_use(void *arg, uint64_t fid, uint64_t *after)
{
	(void)arg;
	if (after)
		*after = NEXT_USE_NONE;
	if (fid % 7 == 3)
		return NEXT_USE_NONE;
	return ((fid * 2654435761u + (uint64_t)moving_now) % 512) * 65536;
}

static void moving_many(void *arg, const uint64_t *fids, uint64_t *uses,
			size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		uses[i] = moving_use(arg, fids[i], NULL);
}

/* @name "heat", or "auto" with a future that knows nothing: the fast one
 * is told so (nothing_known), the scanning one asks every entry; or
 * "auto+many": a moving future, asked at once or one by one */
static void run_twin(unsigned seed, unsigned busy_cold, const char *name)
{
	static struct twin t;
	int64_t now = 1000;
	int victims = 0, op;
	unsigned f;

	/* a half-life that keeps every heat above 0 over the run's ~9e6 s
	 * (one whose heat underflowed to 0 ties in a scan, not in the heap) */
	bool many = !strcmp(name, "auto+many");

	CHECK_INT(policy_init(&t.fast, many ? "auto" : name, 1e6, 2000 * U, U),
		  ==, 0);
	CHECK_INT(policy_init(&t.scan, many ? "auto" : name, 1e6, 2000 * U, U),
		  ==, 0);
	if (many) {
		policy_set_future(&t.fast, &(struct policy_future){
			.one = moving_use, .many = moving_many });
		policy_set_future(&t.scan,
				  &(struct policy_future){ .one = moving_use });
	} else if (!strcmp(name, "auto")) {
		policy_set_future(&t.fast, &(struct policy_future){
			.one = none_use, .known = nothing_known });
		policy_set_future(&t.scan,
				  &(struct policy_future){ .one = none_use });
	}
	t.scan.cold_lost = true;
	srand(seed);
	/* @busy_cold never-touched entries, all open: the walk must pass
	 * them (or give up and scan) */
	for (f = 0; f < busy_cold; f++)
		BOTH(&t, f, (policy_add(p, n), policy_charge(p, n, U),
			     n->in_use = true));
	for (op = 0; op < 20000; op++) {
		int r = rand() % 100;

		f = busy_cold + rand() % (FILES - busy_cold);
		now += rand() % 4 == 0 ? rand() % 3600 : 0;
		moving_now = now;
		if (r < 30) {
			BOTH(&t, f, policy_touch(p, n, now));
		} else if (r < 55) {
			uint64_t add = (1 + rand() % 3) * U;

			BOTH(&t, f, (policy_add(p, n),
				     policy_charge(p, n, (int64_t)add)));
		} else if (r < 62) {
			BOTH(&t, f, (policy_charge(p, n, -(int64_t)n->cached),
				     policy_del(p, n)));
		} else if (r < 66) {
			bool pin = rand() % 2;

			BOTH(&t, f, n->pinned = pin);
		} else if (r < 72) {
			bool use = rand() % 3 == 0;

			BOTH(&t, f, n->in_use = use);
		} else if (r < 73) {
			check_list_order(&t.fast, !strcmp(name, "lru"));
		} else {
			int in = rand() % 4 ? (int)f : -1;
			uint64_t bytes = (1 + rand() % 40) * U;

			compare_admit(&t, in, bytes, rand() % 2 ?
				      ADMIT_DEMAND : ADMIT_PREFETCH, now,
				      &victims);
		}
	}
	CHECK(victims > 1000);		/* the admissions did choose */
	CHECK(!t.fast.cold_lost);
	policy_release(&t.fast);
	policy_release(&t.scan);
}

static void test_same_victims_as_a_scan(void)
{
	run_twin(10, 0, "lru");		/* the sorted list */
	run_twin(11, 0, "heat");
	run_twin(14, 0, "auto");
	run_twin(17, 0, "auto+many");
}

static void test_same_victims_past_open_files(void)
{
	run_twin(12, 1200, "heat");	/* wider than HEATHEAP_WALK_MAX: */
	run_twin(15, 1200, "auto");	/* falls back to the scan */
	run_twin(13, 200, "heat");	/* narrower: walked past */
	run_twin(16, 200, "auto");
}

int main(void)
{
	runner_name = "test_heatheap";
	TEST(test_walk_order);
	TEST(test_walk_too_wide);
	TEST(test_same_victims_as_a_scan);
	TEST(test_same_victims_past_open_files);
	return runner_done();
}
