// SPDX-License-Identifier: MIT
/*
 * membudget.c: the class rules (demand up to the limit, read-ahead up to
 * three quarters, control text up to the limit and a quarter of its
 * own), refusals that change nothing, forced overdraft, the peak, and the
 * on_free hook: called by the first give after a refused demand charge,
 * once, and not for refused read-ahead or control charges.
 */
#include <errno.h>
#include <stdlib.h>

#include "membudget.h"
#include "runner.h"

static struct membudget *budget(uint64_t limit)
{
	struct membudget *b = NULL;

	CHECK_INT(membudget_create(&b, limit), ==, 0);
	CHECK(b != NULL);
	return b;
}

static struct membudget_usage usage(struct membudget *b)
{
	struct membudget_usage u;

	membudget_usage(b, &u);
	return u;
}

static void test_demand_up_to_the_limit(void)
{
	struct membudget *b = budget(1000);

	CHECK(membudget_try(b, MB_DEMAND, 600));
	CHECK(membudget_try(b, MB_DEMAND, 400));	/* exactly the limit */
	CHECK(!membudget_try(b, MB_DEMAND, 1));
	CHECK_INT(usage(b).used, ==, 1000);
	CHECK_INT(usage(b).by_class[MB_DEMAND], ==, 1000);
	CHECK_INT(usage(b).refused, ==, 1);
	membudget_give(b, MB_DEMAND, 1);
	CHECK(membudget_try(b, MB_DEMAND, 1));
	CHECK_INT(usage(b).limit, ==, 1000);
	membudget_destroy(b);
}

static void test_ahead_leaves_a_quarter(void)
{
	struct membudget *b = budget(1000);

	CHECK(membudget_try(b, MB_AHEAD, 750));
	CHECK(!membudget_try(b, MB_AHEAD, 1));
	CHECK_INT(usage(b).refused, ==, 1);
	CHECK_INT(usage(b).used, ==, 750);		/* a refusal changes nothing */
	/* the quarter is the demand reads' */
	CHECK(membudget_try(b, MB_DEMAND, 250));
	membudget_give(b, MB_AHEAD, 750);
	/* demand bytes count against read-ahead too */
	CHECK(membudget_try(b, MB_AHEAD, 500));
	CHECK(!membudget_try(b, MB_AHEAD, 1));
	membudget_destroy(b);
}

static void test_ctl_own_quarter(void)
{
	struct membudget *b = budget(1000);

	CHECK(membudget_try(b, MB_CTL, 250));
	CHECK(!membudget_try(b, MB_CTL, 1));		/* its own quarter */
	CHECK(membudget_try(b, MB_DEMAND, 700));
	membudget_give(b, MB_CTL, 250);
	CHECK(membudget_try(b, MB_CTL, 250));
	CHECK(membudget_try(b, MB_DEMAND, 50));		/* 1000 used */
	membudget_give(b, MB_CTL, 100);
	CHECK(!membudget_try(b, MB_CTL, 101));		/* the limit, too */
	CHECK(membudget_try(b, MB_CTL, 100));
	CHECK_INT(usage(b).by_class[MB_CTL], ==, 250);
	CHECK_INT(usage(b).by_class[MB_DEMAND], ==, 750);
	membudget_destroy(b);
}

static void test_force_and_peak(void)
{
	struct membudget *b = budget(1000);

	membudget_force(b, MB_DEMAND, 900);		/* within: no overdraft */
	CHECK_INT(usage(b).overdraft, ==, 0);
	membudget_force(b, MB_AHEAD, 300);
	CHECK_INT(usage(b).overdraft, ==, 1);
	CHECK_INT(usage(b).used, ==, 1200);
	CHECK_INT(usage(b).peak, ==, 1200);
	membudget_give(b, MB_DEMAND, 900);
	membudget_give(b, MB_AHEAD, 300);
	CHECK_INT(usage(b).used, ==, 0);
	CHECK_INT(usage(b).peak, ==, 1200);		/* the highest stays */
	CHECK_INT(usage(b).by_class[MB_AHEAD], ==, 0);
	membudget_destroy(b);
}

static int woken;

static void on_free(void *arg)
{
	woken += *(int *)arg;
}

static void test_on_free_after_refused_demand(void)
{
	struct membudget *b = budget(100);
	int one = 1;

	membudget_on_free(b, on_free, &one);
	woken = 0;
	CHECK(membudget_try(b, MB_DEMAND, 100));
	membudget_give(b, MB_DEMAND, 10);
	CHECK_INT(woken, ==, 0);			/* nobody waited */
	CHECK(membudget_try(b, MB_DEMAND, 10));
	/* refused read-ahead and control charges do not wait */
	CHECK(!membudget_try(b, MB_AHEAD, 1));
	CHECK(!membudget_try(b, MB_CTL, 1));
	membudget_give(b, MB_DEMAND, 10);
	CHECK_INT(woken, ==, 0);
	CHECK(membudget_try(b, MB_DEMAND, 10));
	/* a refused demand charge: the next give wakes, once */
	CHECK(!membudget_try(b, MB_DEMAND, 5));
	CHECK(!membudget_try(b, MB_DEMAND, 5));
	membudget_give(b, MB_DEMAND, 5);
	CHECK_INT(woken, ==, 1);
	membudget_give(b, MB_DEMAND, 5);
	CHECK_INT(woken, ==, 1);
	membudget_destroy(b);
}

static void test_zero_limit_and_null(void)
{
	struct membudget *b = budget(0);		/* taken as 1 byte */

	CHECK_INT(usage(b).limit, ==, 1);
	CHECK(!membudget_try(b, MB_DEMAND, 2));
	membudget_destroy(b);
	membudget_destroy(NULL);			/* fine */
}

int main(void)
{
	runner_name = "test_membudget";
	TEST(test_demand_up_to_the_limit);
	TEST(test_ahead_leaves_a_quarter);
	TEST(test_ctl_own_quarter);
	TEST(test_force_and_peak);
	TEST(test_on_free_after_refused_demand);
	TEST(test_zero_limit_and_null);
	return runner_done();
}
