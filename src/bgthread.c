// SPDX-License-Identifier: MIT
/* bgthread.c - see bgthread.h */
#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bgthread.h"

struct bgthread {
	pthread_mutex_t lock;	/* guards woken, stop, tick_start; leaf lock */
	pthread_cond_t cond;	/* on CLOCK_MONOTONIC */
	bool woken, stop;
	int64_t tick_start;	/* CLOCK_MONOTONIC ms of the tick running, or 0 */
	int64_t period_ms;
	bg_tick_fn tick;
	void *arg;
	pthread_t thread;
	char name[16];
};

static void deadline(struct timespec *ts, int64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

int64_t bg_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *bg_main(void *arg)
{
	struct bgthread *t = arg;

	pthread_setname_np(pthread_self(), t->name);
	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		int64_t wait;
		struct timespec ts;

		t->woken = false;
		t->tick_start = bg_mono_ms();
		pthread_mutex_unlock(&t->lock);
		wait = t->tick(t->arg);
		pthread_mutex_lock(&t->lock);
		t->tick_start = 0;
		if (wait < 0)
			wait = t->period_ms;
		if (t->woken || t->stop || wait == 0)
			continue;
		deadline(&ts, wait);
		while (!t->woken && !t->stop &&
		       pthread_cond_timedwait(&t->cond, &t->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

int bgthread_start(struct bgthread **out, const char *name,
		   int64_t period_ms, bg_tick_fn tick, void *arg)
{
	struct bgthread *t = calloc(1, sizeof(*t));
	pthread_condattr_t ca;
	int rc;

	if (!t)
		return -ENOMEM;
	t->period_ms = period_ms > 0 ? period_ms : 1000;
	t->tick = tick;
	t->arg = arg;
	snprintf(t->name, sizeof(t->name), "%s", name);
	pthread_mutex_init(&t->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&t->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = thread_spawn(&t->thread, bg_main, t);
	if (rc) {
		pthread_cond_destroy(&t->cond);
		pthread_mutex_destroy(&t->lock);
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

void bgthread_wake(struct bgthread *t)
{
	pthread_mutex_lock(&t->lock);
	t->woken = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

int64_t bgthread_busy_ms(struct bgthread *t)
{
	int64_t start;

	pthread_mutex_lock(&t->lock);
	start = t->tick_start;
	pthread_mutex_unlock(&t->lock);
	if (!start)
		return 0;
	return bg_mono_ms() - start + 1;	/* a tick that just began: 1, not 0 */
}

void bgthread_stop(struct bgthread *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

void thread_signals_block(sigset_t *old)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGQUIT);
	pthread_sigmask(SIG_BLOCK, &set, old);
}

void thread_signals_restore(const sigset_t *old)
{
	pthread_sigmask(SIG_SETMASK, old, NULL);
}

int thread_spawn(pthread_t *t, void *(*fn)(void *), void *arg)
{
	sigset_t old;
	int rc;

	thread_signals_block(&old);	/* the new thread inherits the mask */
	rc = pthread_create(t, NULL, fn, arg);
	thread_signals_restore(&old);
	return -rc;
}
