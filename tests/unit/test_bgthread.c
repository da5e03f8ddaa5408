// SPDX-License-Identifier: MIT
/* test_bgthread.c - ticks, wakes and stop of bgthread.c */
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "bgthread.h"
#include "runner.h"

struct counter {
	atomic_int ticks;
	int64_t ret;
};

static int64_t count_tick(void *arg)
{
	struct counter *c = arg;

	atomic_fetch_add(&c->ticks, 1);
	return c->ret;
}

static void sleep_ms(long ms)
{
	struct timespec d = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&d, NULL);
}

/* a hang guard, not a timing: far more than any machine needs */
#define WAIT_MS		10000

/* wait (at most WAIT_MS) until @c has ticked @n times; its ticks then */
static int wait_ticks(struct counter *c, int n)
{
	int64_t end = bg_mono_ms() + WAIT_MS;

	while (atomic_load(&c->ticks) < n && bg_mono_ms() < end)
		sleep_ms(1);
	return atomic_load(&c->ticks);
}

/*
 * first tick at once, then one per period: three ticks take at least two
 * periods, and however slow the machine, never more ticks than periods
 * passed + 1 (a loop that spins would make far more)
 */
static void test_period(void)
{
	struct counter c = { .ret = BG_PERIOD };
	struct bgthread *t;
	int64_t start = bg_mono_ms(), elapsed;
	int ticks;

	CHECK_INT(bgthread_start(&t, "t-period", 50, count_tick, &c), ==, 0);
	CHECK_INT(wait_ticks(&c, 3), >=, 3);
	ticks = atomic_load(&c.ticks);
	elapsed = bg_mono_ms() - start;
	bgthread_stop(t);
	CHECK_INT(elapsed, >=, 100);
	CHECK_INT(ticks, <=, elapsed / 50 + 2);
}

/* a long period: only wakes make ticks */
static void test_wake(void)
{
	struct counter c = { .ret = BG_PERIOD };
	struct bgthread *t;

	CHECK_INT(bgthread_start(&t, "t-wake", 3600 * 1000, count_tick, &c), ==, 0);
	CHECK_INT(wait_ticks(&c, 1), ==, 1);
	bgthread_wake(t);
	CHECK_INT(wait_ticks(&c, 2), ==, 2);
	sleep_ms(50);
	CHECK_INT(atomic_load(&c.ticks), ==, 2);	/* nothing spins */
	bgthread_stop(t);
}

/* stop returns promptly (not after the hour) while the thread sleeps
 * the hour its first tick asked for */
static void test_stop_prompt(void)
{
	struct counter c = { .ret = 3600 * 1000 };
	struct bgthread *t;
	int64_t a;

	CHECK_INT(bgthread_start(&t, "t-stop", 10, count_tick, &c), ==, 0);
	CHECK_INT(wait_ticks(&c, 1), ==, 1);
	a = bg_mono_ms();
	bgthread_stop(t);
	CHECK_INT(bg_mono_ms() - a, <, WAIT_MS);
	CHECK_INT(atomic_load(&c.ticks), ==, 1);
	bgthread_stop(NULL);
}

/* a tick that blocks until released: busy_ms grows while it runs, 0 after */
static atomic_int release, entered;

static int64_t blocking_tick(void *arg)
{
	(void)arg;
	atomic_store(&entered, 1);
	while (!atomic_load(&release))
		sleep_ms(5);
	return 3600 * 1000;
}

static void test_busy_ms(void)
{
	struct bgthread *t;
	int64_t first, later;
	int i;

	CHECK_INT(bgthread_start(&t, "t-busy", 10, blocking_tick, NULL), ==, 0);
	for (i = 0; i < WAIT_MS && !atomic_load(&entered); i++)
		sleep_ms(1);
	first = bgthread_busy_ms(t);
	CHECK_INT(first, >=, 1);		/* running: never 0 */
	sleep_ms(120);
	later = bgthread_busy_ms(t);
	CHECK_INT(later, >=, first + 100);
	atomic_store(&release, 1);
	for (i = 0; i < WAIT_MS && bgthread_busy_ms(t); i++)
		sleep_ms(1);
	CHECK_INT(bgthread_busy_ms(t), ==, 0);	/* sleeping its hour */
	bgthread_stop(t);
}

/* the daemon's threads leave SIGINT/SIGTERM/SIGHUP to the thread in the
 * FUSE session loop (bgthread.h, "Threads and the stop signals") */
static int64_t mask_tick(void *arg)
{
	int *seen = arg;
	sigset_t cur;

	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	__atomic_store_n(seen, 1 + (sigismember(&cur, SIGINT) &&
				    sigismember(&cur, SIGTERM) &&
				    sigismember(&cur, SIGHUP)), __ATOMIC_RELEASE);
	return 100000;
}

static void *mask_main(void *arg)
{
	mask_tick(arg);
	return NULL;
}

static void test_stop_signals_blocked(void)
{
	struct bgthread *t;
	pthread_t pt;
	sigset_t cur;
	int seen = 0;

	CHECK_INT(bgthread_start(&t, "mask", 100000, mask_tick, &seen), ==, 0);
	while (!__atomic_load_n(&seen, __ATOMIC_ACQUIRE))
		usleep(1000);
	bgthread_stop(t);
	CHECK_INT(seen, ==, 2);
	seen = 0;
	CHECK_INT(thread_spawn(&pt, mask_main, &seen), ==, 0);
	pthread_join(pt, NULL);
	CHECK_INT(seen, ==, 2);
	/* the caller's own mask is left as it was */
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	CHECK_INT(sigismember(&cur, SIGTERM), ==, 0);
}

int main(void)
{
	runner_name = "test_bgthread";
	TEST(test_period);
	TEST(test_wake);
	TEST(test_stop_prompt);
	TEST(test_busy_ms);
	TEST(test_stop_signals_blocked);
	return runner_done();
}
