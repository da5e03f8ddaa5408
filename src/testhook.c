// SPDX-License-Identifier: MIT
/*
 * testhook.c - test-only gates (testhook.h)
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testhook.h"

#define GATE_MAX_MS	60000

static const char *hook_dir;	/* set once before threads start */

void testhook_init(void)
{
	const char *d = getenv("FUSEFS_TEST_HOOKS");

	hook_dir = d && *d == '/' ? d : NULL;
}

static int hook_path(char *buf, size_t len, const char *name)
{
	int n = snprintf(buf, len, "%s/%s", hook_dir, name);

	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

bool testhook_on(void)
{
	return hook_dir != NULL;
}

void testhook_gate(const char *name)
{
	const struct timespec ms = { 0, 1000000 };
	char path[PATH_MAX];
	int waited;

	if (!hook_dir || hook_path(path, sizeof(path), name))
		return;
	for (waited = 0; waited < GATE_MAX_MS && access(path, F_OK) == 0;
	     waited++)
		nanosleep(&ms, NULL);
}

int64_t testhook_value(const char *name, int64_t dflt)
{
	char path[PATH_MAX], buf[32], *end;
	long long v;
	ssize_t n;
	int fd;

	if (!hook_dir || hook_path(path, sizeof(path), name))
		return dflt;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return dflt;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return dflt;
	buf[n] = '\0';
	errno = 0;
	v = strtoll(buf, &end, 10);
	if (errno || end == buf)
		return dflt;
	return v;
}
