/* SPDX-License-Identifier: MIT */
/*
 * hash.h - XXH3-64 with runtime CPU dispatch.  The only way into xxHash.
 */
#ifndef FUSEFS_HASH_H
#define FUSEFS_HASH_H

#include <stddef.h>
#include <stdint.h>

/* hash64() - XXH3-64 of @len bytes at @p with @seed (0 for chunk sums). */
uint64_t hash64(const void *p, size_t len, uint64_t seed);

#endif
