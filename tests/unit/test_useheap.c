// SPDX-License-Identifier: MIT
/*
 * The use heaps (useheap.h) and the ranking by next use built on them
 * (policy.c, lazily exact): the heaps keep their order through inserts,
 * updates, removals and useheap_forget(); and an "auto" policy whose
 * future has sync/where/reads (the real lists) chooses exactly the
 * victims of one that asks every cached file's next use at each
 * admission, over epochs of two ranks read a little out of order, epochs
 * that stop early, lists that go idle, pins, files in use and lists
 * published while an admission ranks (it begins again, no fallback), while
 * asking the lists about a few files per admission, not all of them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "lists.h"
#include "../../src/policy_priv.h"	/* the nodes: the policy's test seam */
#include "runner.h"
#include "shuffle.h"
#include "useheap.h"

/* ---- the heaps alone ---- */

#define NN	2000

static struct policy_node nodes[NN];

static void check_heap(const struct useheap *u, unsigned s)
{
	size_t i;

	for (i = 1; i < u->h[s].n; i++) {
		const struct policy_node *c = u->h[s].a[i],
					 *up = u->h[s].a[(i - 1) / 2];

		CHECK_INT(c->upos, ==, i + 1);
		if (s == USEHEAP_NONE)
			CHECK(!heatheap_colder(c, up));
		else
			CHECK(c->utail <= up->utail);
	}
}

static void test_heap_order(void)
{
	static struct useheap u;
	unsigned i, s, op;

	useheap_init(&u);
	srand(5);
	for (op = 0; op < 40000; op++) {
		struct policy_node *x = &nodes[rand() % NN];
		int r = rand() % 10;

		if (r < 4 && !useheap_in(x)) {
			x->uslot = rand() % 4 ? rand() % 3 : USEHEAP_NONE;
			x->utail = rand() % 500;
			x->hkey = rand() % 40;
			x->last = rand() % 5;
			x->seq = op;
			CHECK_INT(useheap_insert(&u, x), ==, 0);
		} else if (r < 6 && useheap_in(x)) {
			useheap_remove(&u, x);
		} else if (r < 9 && useheap_in(x)) {
			x->utail = rand() % 500;
			x->hkey = rand() % 40;
			useheap_update(&u, x);
		} else if (op % 5000 == 0) {
			CHECK_INT(useheap_forget(&u), ==, 0);
			for (s = 0; s < USEHEAP_SLOTS; s++)
				CHECK_INT(u.h[s].n, ==, 0);
		}
	}
	for (s = 0; s <= USEHEAP_SLOTS; s++)
		check_heap(&u, s);
	for (s = 0; s < 3; s++)		/* the top is the furthest */
		for (i = 0; i < u.h[s].n; i++)
			CHECK(u.h[s].a[i]->utail <= useheap_top(&u, s)->utail);
	useheap_release(&u);
}

/* ---- the same victims as asking every file ---- */

#define FILES	600
#define BLK	4096ULL
#define CHUNK	(4 * BLK)
#define RANKS	2

static uint64_t size_of(unsigned f)
{
	return (1 + f % 7) * BLK;	/* a quarter to 1.75 chunks */
}

#define MANY	10000		/* test_bounded_after_publish() */

static int resolve(void *arg, const char *path, size_t len, uint64_t *fid,
		   uint64_t *size)
{
	unsigned f;

	(void)arg;
	if (sscanf(path, "f%u", &f) != 1 || f >= MANY)
		return -ENOENT;
	*fid = f;
	*size = size_of(f);
	return 0;
}

static uint64_t clock_ms;

static uint64_t fake_clock(void *arg)
{
	(void)arg;
	return clock_ms;
}

struct twin {
	struct policy fast, scan;
	struct lists *l;
	unsigned many_calls, where_calls, admissions;
	unsigned bumps;		/* lists changed inside a where() */
	bool bump;		/* ... at the next one */
	int victims;
};

static struct twin tw;
static unsigned rng;		/* the ops' (shuffle() reseeds rand()) */

static int rnd(void)
{
	return rand_r(&rng);
}

static void counted_many(void *arg, const uint64_t *fids, uint64_t *uses,
			 size_t n)
{
	tw.many_calls++;
	lists_next_use_many(arg, fids, uses, n);
}

static void publish(const char *name, long epoch, bool begin,
		    const unsigned *order, unsigned n)
{
	static char text[MANY * 8 + 64];
	struct list_report rep;
	size_t at;
	unsigned i;

	at = (size_t)sprintf(text, "# epoch %ld\n%s", epoch,
			     begin ? "# begin\n" : "");
	for (i = 0; i < n; i++)
		at += (size_t)sprintf(text + at, "f%u\n", order[i]);
	CHECK_INT(lists_publish(tw.l, name, text, at, resolve, NULL, &rep),
		  ==, 0);
}

/*
 * Another rank publishes between the admission's sync and this where():
 * a list of one file never cached, so no cached file's use changes, but
 * the generation and the active lists do (-ESTALE).
 */
static int counted_where(void *arg, uint64_t fid, uint64_t gen,
			 unsigned *slot, uint64_t *key)
{
	static const unsigned never[1] = { MANY - 1 };

	tw.where_calls++;
	if (tw.bump) {
		tw.bump = false;
		publish("other", tw.bumps++, true, never, 1);
	}
	return lists_where(arg, fid, gen, slot, key);
}

#define BOTH(f, stmt)						\
	do {							\
		struct policy *P_[2] = { &tw.fast, &tw.scan };	\
		int k_;						\
		for (k_ = 0; k_ < 2; k_++) {			\
			struct policy *p = P_[k_];		\
			struct policy_node *n = policy_node(p, f); \
			stmt;					\
		}						\
	} while (0)

/* admit @bytes more of file @f (-1: nobody) in both, compare, apply */
static bool admit(int f, uint64_t bytes, enum admit_kind kind, int64_t now)
{
	struct admission a, b;
	int ra, rb, i;

	do {
		tw.bump = tw.admissions % 37 == 36;
		ra = policy_admit(&tw.fast, f < 0 ? NULL :
				  policy_node(&tw.fast, f), bytes, kind, &a, now);
		rb = policy_admit(&tw.scan, f < 0 ? NULL :
				  policy_node(&tw.scan, f), bytes, kind, &b, now);
		tw.admissions++;
		CHECK_INT(ra, ==, rb);
		if (ra != rb || ra < 0)
			return false;
		CHECK_INT(a.partial, ==, b.partial);
		for (i = 0; i < ra; i++) {
			CHECK_INT(a.victims[i]->fid, ==, b.victims[i]->fid);
			CHECK_INT(a.take[i], ==, b.take[i]);
			if (a.victims[i]->fid != b.victims[i]->fid)
				return false;
		}
		for (i = 0; i < ra; i++) {
			uint64_t take = a.take[i];

			BOTH(a.victims[i]->fid, (policy_charge(p, n,
				-(int64_t)MIN(take, n->cached)),
				n->cached ? (void)0 : policy_del(p, n)));
		}
		tw.victims += ra;
	} while (a.partial);
	if (f >= 0)
		BOTH(f, (policy_add(p, n), policy_charge(p, n,
							  (int64_t)bytes)));
	return true;
}

/* what the cache does when file @f is read (or prefetched) */
static void read_file(unsigned f, enum admit_kind kind, int64_t now)
{
	struct policy_node *x = policy_node(&tw.fast, f);

	if (kind == ADMIT_DEMAND) {
		lists_note_open(tw.l, f, x->cached == size_of(f));
		BOTH(f, policy_touch(p, n, now));
	}
	while (x->cached < size_of(f))
		if (!admit((int)f, MIN(CHUNK, size_of(f) - x->cached), kind,
			   now))
			break;
}

/* rank @r's part of epoch @e (positions r, r + RANKS, ...) */
static unsigned part(unsigned e, unsigned r, unsigned *out)
{
	unsigned all[FILES], i, n = 0;

	shuffle(all, FILES, 100 + e);
	for (i = r; i < FILES; i += RANKS)
		out[n++] = all[i];
	return n;
}

/* with @busy open files of no known use on top of the heaps (more than
 * USE_ASIDE_MAX: every ranking by the heaps gives up and asks all) */
static void run_twin(unsigned seed, unsigned busy)
{
	static unsigned ord[RANKS][FILES], nxt[FILES];
	unsigned len[RANKS], e, i, r, f;
	uint64_t limit = FILES * 4 * BLK * 2 / 5 + busy * BLK;
	int64_t now = 1000;

	memset(&tw, 0, sizeof(tw));
	tw.l = lists_create();
	lists_set_clock(tw.l, fake_clock, NULL);
	lists_set_idle(tw.l, 30);
	lists_set_window(tw.l, 8);
	CHECK_INT(policy_init(&tw.fast, "auto", 1e6, limit, CHUNK), ==, 0);
	CHECK_INT(policy_init(&tw.scan, "auto", 1e6, limit, CHUNK), ==, 0);
	policy_set_future(&tw.fast, &(struct policy_future){
		.one = lists_next_use_bytes, .many = counted_many,
		.known = lists_known, .sync = lists_sync,
		.where = counted_where, .reads = lists_reads, .arg = tw.l });
	policy_set_future(&tw.scan, &(struct policy_future){
		.one = lists_next_use_bytes, .many = lists_next_use_many,
		.known = lists_known, .arg = tw.l });
	tw.scan.rank_sample = 0;	/* every file, exactly */
	rng = seed;
	for (f = FILES; f < FILES + busy; f++)
		BOTH(f, (policy_add(p, n), policy_charge(p, n, BLK),
			 n->in_use = true));
	for (e = 0; e < 6; e++) {
		/* epochs 2 and 4 stop at 90 %; a jump in epoch 3 */
		unsigned stop = e == 2 || e == 4 ? 9 : 10;

		for (r = 0; r < RANKS; r++) {
			char name[8];

			snprintf(name, sizeof(name), "r%u", r);
			len[r] = part(e, r, ord[r]);
			publish(name, e, true, ord[r], len[r]);
			part(e + 1, r, nxt);
			publish(name, e + 1, false, nxt, len[r]);
		}
		for (i = 0; i < len[0] * stop / 10; i++) {
			for (r = 0; r < RANKS; r++) {
				unsigned k = i;

				if (i + 1 < len[r] && rnd() % 4 == 0)
					k = i + 1;	/* out of order */
				else if (i && rnd() % 4 == 0)
					k = i - 1;
				if (e == 3 && i == len[r] / 2 && r == 1)
					k = MIN(i + 40, len[r] - 1);
				read_file(ord[r][k], ADMIT_DEMAND, now);
				if (i + 3 < len[r] && rnd() % 2)
					read_file(ord[r][i + 3],
						  ADMIT_PREFETCH, now);
			}
			f = rnd() % FILES;
			if (rnd() % 50 == 0)
				BOTH(f, n->pinned = !n->pinned);
			if (rnd() % 30 == 0)
				BOTH(f, n->in_use = !n->in_use);
			if (rnd() % 97 == 0)
				admit(-1, CHUNK, ADMIT_DEMAND, now);
			now += rnd() % 3;
			clock_ms += 100;
			if (rnd() % 400 == 0)
				clock_ms += 40000;	/* both lists idle */
		}
	}
	CHECK(tw.victims > 2000);
	CHECK(!tw.fast.uses->lost);
	if (busy) {
		CHECK(tw.many_calls > 100);	/* fell back, and came out */
	} else {
		/* never fell back, not even when the lists changed */
		CHECK(tw.bumps > 20);
		CHECK_INT(tw.many_calls, ==, 0);
		/* a few files asked per admission, not all ~300 cached */
		CHECK(tw.where_calls < 30 * tw.admissions);
	}
	printf("  %u admissions, %d victims, %u publishes while ranking, "
	       "%u fallbacks, %.1f where() per admission\n", tw.admissions,
	       tw.victims, tw.bumps, tw.many_calls,
	       (double)tw.where_calls / tw.admissions);
	policy_release(&tw.fast);
	policy_release(&tw.scan);
	lists_destroy(tw.l);
}

/* the future taken away and given again: the heaps start over (a node
 * left marked as in a freed heap would be removed from it) */
static void test_future_replaced(void)
{
	struct policy p;
	struct lists *l = lists_create();
	struct policy_future full = {
		.one = lists_next_use_bytes, .many = lists_next_use_many,
		.known = lists_known, .sync = lists_sync,
		.where = lists_where, .reads = lists_reads, .arg = l };
	struct policy_node *a, *b;

	CHECK_INT(policy_init(&p, "auto", 1e6, 100 * BLK, CHUNK), ==, 0);
	policy_set_future(&p, &full);
	a = policy_node(&p, 1);
	b = policy_node(&p, 2);
	policy_add(&p, a);
	policy_charge(&p, a, BLK);
	policy_add(&p, b);
	policy_charge(&p, b, BLK);
	CHECK(useheap_in(a) && useheap_in(b));
	policy_set_future(&p, NULL);
	CHECK(!useheap_in(a) && !useheap_in(b));
	policy_set_future(&p, &full);	/* both in the new heaps */
	CHECK(useheap_in(a) && useheap_in(b));
	policy_charge(&p, a, -(int64_t)BLK);
	CHECK(!useheap_in(a));
	policy_release(&p);
	lists_destroy(l);
}

/*
 * After a publish every cached file's use must be asked again: not all
 * in one admission (the cache lock), at most about USE_BUDGET (4,096)
 * each, the rest in the next ones.
 */
static void test_bounded_after_publish(void)
{
	static unsigned ord[MANY], nxt[MANY];
	unsigned f, k, asked[6];
	int64_t now = 1000;

	memset(&tw, 0, sizeof(tw));
	tw.l = lists_create();
	CHECK_INT(policy_init(&tw.fast, "auto", 1e6, 9000 * BLK, CHUNK), ==,
		  0);
	CHECK_INT(policy_init(&tw.scan, "auto", 1e6, 9000 * BLK, CHUNK), ==,
		  0);
	policy_set_future(&tw.fast, &(struct policy_future){
		.one = lists_next_use_bytes, .many = counted_many,
		.known = lists_known, .sync = lists_sync,
		.where = counted_where, .reads = lists_reads, .arg = tw.l });
	for (f = 0; f < 9000; f++) {
		struct policy_node *n = policy_node(&tw.fast, f);

		policy_touch(&tw.fast, n, now);
		policy_add(&tw.fast, n);
		policy_charge(&tw.fast, n, BLK);
	}
	shuffle(ord, MANY, 7);
	shuffle(nxt, MANY, 8);
	publish("r", 0, true, ord, MANY);
	publish("r", 1, false, nxt, MANY);
	for (k = 0; k < 6; k++) {
		struct admission a;
		unsigned before = tw.where_calls;

		CHECK(policy_admit(&tw.fast, NULL, BLK, ADMIT_DEMAND, &a,
				   now) > 0);
		asked[k] = tw.where_calls - before;
		CHECK(asked[k] <= 4096 + 2 * 65);
		policy_charge(&tw.fast, a.victims[0],
			      -(int64_t)a.victims[0]->cached);
		policy_del(&tw.fast, a.victims[0]);
		policy_charge(&tw.fast, NULL, BLK);	/* room taken again */
	}
	printf("  uses asked in the admissions after a publish:");
	for (k = 0; k < 6; k++)
		printf(" %u", asked[k]);
	printf("\n");
	CHECK(asked[0] + asked[1] + asked[2] >= 9000);	/* all, once */
	CHECK(asked[5] < 100);				/* then a few */
	policy_release(&tw.fast);
	policy_release(&tw.scan);
	lists_destroy(tw.l);
}

static void test_same_victims_as_asking_all(void)
{
	run_twin(1, 0);
	run_twin(2, 0);
	run_twin(3, 1100);
}

int main(void)
{
	runner_name = "test_useheap";
	TEST(test_heap_order);
	TEST(test_same_victims_as_asking_all);
	TEST(test_future_replaced);
	TEST(test_bounded_after_publish);
	return runner_done();
}
