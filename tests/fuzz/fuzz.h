/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - helpers shared by the libFuzzer targets in tests/fuzz/.
 * Header only; every target is one fuzz_NAME.c linked with the fuzz
 * build's archive of the parsers' modules (the Makefile's FUZZ_CORE), of
 * which the linker takes only the modules the target exercises.
 *
 * FUZZ_CHECK() is the "beyond no crash" part: a broken invariant writes
 * one line naming the target, file and line straight to fd 2 (so it is
 * seen even while stderr is muted) and aborts, which libFuzzer turns
 * into a crash-* reproducer like any sanitizer report.
 */
#ifndef FUSEFS_FUZZ_H
#define FUSEFS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FUZZ_CHECK(cond, ...)						\
	do {								\
		if (!(cond)) {						\
			dprintf(STDERR_FILENO,				\
				"fuzz: %s:%d: invariant '%s' broken: ",	\
				__FILE__, __LINE__, #cond);		\
			dprintf(STDERR_FILENO, "" __VA_ARGS__);		\
			dprintf(STDERR_FILENO, "\n");			\
			abort();					\
		}							\
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * fuzz_quiet_begin()/fuzz_quiet_end() - send what the code under test
 * prints to stderr (config errors, say) to /dev/null: millions of
 * messages would drown libFuzzer's own output and slow it down.  glibc
 * lets a program assign stderr.  FUZZ_VERBOSE=1 keeps the messages.
 * Sanitizer reports write to fd 2 directly and are never muted.
 */
static FILE *fuzz_saved_stderr;

static inline void fuzz_quiet_begin(void)
{
	static FILE *devnull;
	static int verbose = -1;

	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (verbose)
		return;
	if (!devnull)
		devnull = fopen("/dev/null", "we");
	if (!devnull)
		return;
	fuzz_saved_stderr = stderr;
	stderr = devnull;
}

static inline void fuzz_quiet_end(void)
{
	if (fuzz_saved_stderr)
		stderr = fuzz_saved_stderr;
	fuzz_saved_stderr = NULL;
}

/*
 * fuzz_as_file() - make @size bytes at @data the contents of a file and
 * return its path, for code that takes a path (the INI readers).  One
 * memfd per process, rewritten for every input; the path is
 * /proc/self/fd/N, which opens the memfd afresh.  Aborts on failure:
 * that is the harness failing, not the code under test.
 */
static inline const char *fuzz_as_file(const uint8_t *data, size_t size)
{
	static char path[64];
	static int fd = -1;
	size_t off = 0;

	if (fd < 0) {
		fd = memfd_create("fuzz-input", MFD_CLOEXEC);
		FUZZ_CHECK(fd >= 0, "memfd_create failed");
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	FUZZ_CHECK(ftruncate(fd, 0) == 0, "ftruncate failed");
	while (off < size) {
		ssize_t n = pwrite(fd, data + off, size - off, (off_t)off);

		FUZZ_CHECK(n > 0, "pwrite to the memfd failed");
		off += (size_t)n;
	}
	return path;
}

/* fuzz_strndup() - @size bytes as a C string (cut at the first NUL) */
static inline char *fuzz_strndup(const uint8_t *data, size_t size)
{
	char *s = strndup((const char *)data, size);

	FUZZ_CHECK(s != NULL, "out of memory");
	return s;
}

#endif
