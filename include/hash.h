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

/*
 * hash_begin()/hash_update()/hash_end() - XXH3-64 (seed 0) of bytes fed in
 * pieces: equal to hash64() of them all.  hash_begin() returns NULL on
 * ENOMEM; hash_end() frees the state (NULL is fine, returns 0).
 */
struct hash_state;
struct hash_state *hash_begin(void);
void hash_update(struct hash_state *s, const void *p, size_t len);
uint64_t hash_end(struct hash_state *s);

#endif
