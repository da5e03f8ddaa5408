/* SPDX-License-Identifier: MIT */
/*
 * compiler.h - small helpers shared by every module.  Header only.
 */
#ifndef FUSEFS_COMPILER_H
#define FUSEFS_COMPILER_H

#include <stddef.h>

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)
#define PRINTF_FMT(a, b) __attribute__((format(printf, a, b)))
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define MIN(a, b)	((a) < (b) ? (a) : (b))
#define MAX(a, b)	((a) > (b) ? (a) : (b))

#endif
