/* SPDX-License-Identifier: MIT */
/*
 * runner.h - a tiny unit-test runner in the spirit of git's test-lib:
 * TEST() registers nothing, it just runs a function and counts; CHECK*()
 * print both sides with file:line on failure.  main() ends with
 * runner_done(), which prints "N passed, M failed" and yields the exit
 * code (0 all passed, 1 otherwise).
 */
#ifndef FUSEFS_RUNNER_H
#define FUSEFS_RUNNER_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int runner_failed_checks;
static int runner_passed, runner_failed;
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

#define TEST(fn)							\
	do {								\
		int _before = runner_failed_checks;			\
		fn();							\
		if (runner_failed_checks == _before) {			\
			runner_passed++;				\
		} else {						\
			runner_failed++;				\
			fprintf(stderr, "FAIL %s: %s\n", runner_name, #fn); \
		}							\
	} while (0)

static inline int runner_done(void)
{
	printf("%s: %d passed, %d failed\n", runner_name, runner_passed,
	       runner_failed);
	return runner_failed ? 1 : 0;
}

#endif
