/* SPDX-License-Identifier: MIT */
/*
 * runner.h - a tiny unit-test runner in the spirit of git's test-lib and
 * liburing's test programs: TEST() registers nothing, it just runs a
 * function and counts; CHECK*() print both sides with file:line on
 * failure.  main() ends with runner_done(), which prints
 * "NAME: N passed, M failed" (", K skipped" added when K > 0; CI parses
 * this line) and yields the exit code: 0 none failed, 1 some failed,
 * 77 every test skipped.
 *
 * Each TEST() runs in a forked child under alarm(): a test that crashes
 * or runs longer than UNIT_TIMEOUT seconds (default 30, 0 = no limit)
 * fails with the signal named, and the tests after it still run.  A
 * test never sees what an earlier test left in memory; main() may set up
 * shared data before the first TEST().  UNIT_NOFORK=1 runs every test in
 * the process itself, without a timeout (for a debugger).
 *
 * SKIP("reason") in the test function itself returns from it and counts
 * the test as skipped (a missing kernel feature, say), unless a CHECK
 * had already failed.
 */
#ifndef FUSEFS_RUNNER_H
#define FUSEFS_RUNNER_H

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUNNER_EXIT_SKIP	77
#define RUNNER_TIMEOUT_S	30
#define RUNNER_CHILD_FAIL	99	/* a CHECK failed (not a sanitizer's 1) */

static int runner_failed_checks;
static int runner_passed, runner_failed, runner_skipped;
static bool runner_skip_flag;		/* SKIP() in the current test */
static const char *runner_name = "unit";

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "  %s:%d: CHECK(%s) failed\n",	\
				__FILE__, __LINE__, #cond);		\
			runner_failed_checks++;				\
		}							\
	} while (0)

#define CHECK_INT(a, op, b)						\
	do {								\
		long long _a = (long long)(a), _b = (long long)(b);	\
		if (!(_a op _b)) {					\
			fprintf(stderr, "  %s:%d: %s %s %s: %lld vs %lld\n", \
				__FILE__, __LINE__, #a, #op, #b, _a, _b); \
			runner_failed_checks++;				\
		}							\
	} while (0)

#define CHECK_STR(a, b)							\
	do {								\
		const char *_a = (a), *_b = (b);			\
		if (strcmp(_a, _b)) {					\
			fprintf(stderr, "  %s:%d: \"%s\" != \"%s\"\n",	\
				__FILE__, __LINE__, _a, _b);		\
			runner_failed_checks++;				\
		}							\
	} while (0)

/* SKIP() - only in the test function itself: it returns from it */
#define SKIP(reason)							\
	do {								\
		fprintf(stderr, "  %s:%d: skipped: %s\n", __FILE__,	\
			__LINE__, (reason));				\
		runner_skip_flag = true;				\
		return;							\
	} while (0)

#define TEST(fn)	runner_run(#fn, fn)

enum runner_outcome { RUNNER_PASS, RUNNER_FAIL, RUNNER_SKIP };

/* UNIT_TIMEOUT in seconds, 0 for none; the default if unset or bad */
static inline unsigned runner_timeout(void)
{
	static long t = -1;
	const char *s = getenv("UNIT_TIMEOUT");
	char *end;

	if (t >= 0)
		return (unsigned)t;
	t = RUNNER_TIMEOUT_S;
	if (s && *s) {
		long v = strtol(s, &end, 10);

		if (*end || v < 0 || v > 86400)
			fprintf(stderr, "%s: ignoring UNIT_TIMEOUT=%s (seconds, 0 = none)\n",
				runner_name, s);
		else
			t = v;
	}
	return (unsigned)t;
}

static inline enum runner_outcome runner_call(void (*fn)(void))
{
	int before = runner_failed_checks;

	runner_skip_flag = false;
	fn();
	if (runner_failed_checks != before)
		return RUNNER_FAIL;
	return runner_skip_flag ? RUNNER_SKIP : RUNNER_PASS;
}

/* the child runs @fn and exits with its outcome; exit() (not _exit) so
 * stdout is flushed and the sanitizers' exit checks run per test */
static inline void runner_child(void (*fn)(void), unsigned timeout)
{
	sigset_t alrm;

	sigemptyset(&alrm);
	sigaddset(&alrm, SIGALRM);
	sigprocmask(SIG_UNBLOCK, &alrm, NULL);
	signal(SIGALRM, SIG_DFL);
	alarm(timeout);
	switch (runner_call(fn)) {
	case RUNNER_PASS:
		exit(0);
	case RUNNER_SKIP:
		exit(RUNNER_EXIT_SKIP);
	default:
		exit(RUNNER_CHILD_FAIL);
	}
}

/* run @fn in a child; the outcome, with a reason in @why on a crash */
static inline enum runner_outcome runner_fork(void (*fn)(void), char *why,
					      size_t len)
{
	unsigned timeout = runner_timeout();
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		snprintf(why, len, "fork failed: %s", strerror(errno));
		return RUNNER_FAIL;
	}
	if (pid == 0)
		runner_child(fn, timeout);
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			snprintf(why, len, "waitpid: %s", strerror(errno));
			return RUNNER_FAIL;
		}
	}
	if (WIFSIGNALED(status)) {
		int sig = WTERMSIG(status);

		if (sig == SIGALRM && timeout)
			snprintf(why, len, "timed out after %u s, UNIT_TIMEOUT",
				 timeout);
		else
			snprintf(why, len, "killed by signal %d, %s", sig,
				 strsignal(sig));
		return RUNNER_FAIL;
	}
	switch (WEXITSTATUS(status)) {
	case 0:
		return RUNNER_PASS;
	case RUNNER_EXIT_SKIP:
		return RUNNER_SKIP;
	case RUNNER_CHILD_FAIL:
		return RUNNER_FAIL;
	default:
		snprintf(why, len, "exited with status %d",
			 WEXITSTATUS(status));
		return RUNNER_FAIL;
	}
}

static inline void runner_run(const char *name, void (*fn)(void))
{
	const char *nofork = getenv("UNIT_NOFORK");
	char why[128] = "";

	switch (nofork && *nofork && strcmp(nofork, "0") ? runner_call(fn) :
		runner_fork(fn, why, sizeof(why))) {
	case RUNNER_PASS:
		runner_passed++;
		break;
	case RUNNER_SKIP:
		runner_skipped++;
		fprintf(stderr, "SKIP %s: %s\n", runner_name, name);
		break;
	default:
		runner_failed++;
		fprintf(stderr, "FAIL %s: %s%s%s%s\n", runner_name, name,
			*why ? " (" : "", why, *why ? ")" : "");
		break;
	}
}

static inline int runner_done(void)
{
	printf("%s: %d passed, %d failed", runner_name, runner_passed,
	       runner_failed);
	if (runner_skipped)
		printf(", %d skipped", runner_skipped);
	printf("\n");
	if (runner_failed)
		return 1;
	return runner_skipped && !runner_passed ? RUNNER_EXIT_SKIP : 0;
}

#endif
