/* SPDX-License-Identifier: MIT */
/*
 * bgthread.h - one background thread that runs a tick function
 * periodically and when woken.  Every timed loop of the daemon (heat
 * flush, index writer, re-listing, prefetcher, fetch retries) is one of
 * these, so none hand-rolls a condition-variable wait.
 *
 * Timing is on CLOCK_MONOTONIC: a step of the wall clock neither stalls
 * nor spins a loop.
 *
 * The tick runs on the background thread with no lock of this module
 * held; it returns how many milliseconds to sleep before the next tick
 * (BG_PERIOD: the period given at start, 0: run again at once).  A
 * bgthread_wake() during a tick makes the next tick start at once, so a
 * wake is never lost.  bgthread_stop() lets a running tick finish, runs
 * no further tick, and joins the thread.
 */
#ifndef FUSEFS_BGTHREAD_H
#define FUSEFS_BGTHREAD_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#define BG_PERIOD	(-1)

struct bgthread;

typedef int64_t (*bg_tick_fn)(void *arg);

/*
 * bgthread_start() - start a thread that calls @tick(@arg) once now, then
 * every @period_ms (or what the tick returns) and whenever woken.
 * Return: 0 or -errno (nothing started).
 */
int bgthread_start(struct bgthread **out, const char *name,
		   int64_t period_ms, bg_tick_fn tick, void *arg);
/* bgthread_wake() - run the tick as soon as possible; any thread */
void bgthread_wake(struct bgthread *t);
/*
 * bgthread_busy_ms() - for how many milliseconds the tick in progress has
 * been running; 0 while the thread sleeps.  Any thread (a watchdog).
 */
int64_t bgthread_busy_ms(struct bgthread *t);
/* bgthread_stop() - stop and join; NULL is fine.  Not from the tick. */
void bgthread_stop(struct bgthread *t);

/*
 * Threads and the stop signals.  libfuse ends the session loop when the
 * thread waiting in fuse_session_loop_mt() (the main thread) is
 * interrupted by SIGINT, SIGTERM or SIGHUP; its own workers block them.
 * A process-directed signal taken by any other thread only marks the
 * session as exited, and the loop would notice at the next FUSE request
 * (never, for an idle mount with an open file).  So every thread of the
 * daemon is created with those signals (and SIGQUIT) blocked:
 *
 * thread_spawn() - pthread_create() with them blocked in the new thread
 * (bgthread_start() uses it).  Return: 0 or -errno.
 * thread_signals_block() / thread_signals_restore() - around a library
 * call that starts threads of its own (libmicrohttpd).
 */
int thread_spawn(pthread_t *t, void *(*fn)(void *), void *arg);
void thread_signals_block(sigset_t *old);
void thread_signals_restore(const sigset_t *old);

/* bg_mono_ms() - CLOCK_MONOTONIC in milliseconds (every timed loop's clock) */
int64_t bg_mono_ms(void);

#endif
