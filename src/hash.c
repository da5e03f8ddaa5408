// SPDX-License-Identifier: MIT
/* hash.c - see hash.h; xxh_x86dispatch picks SSE2/AVX2/AVX-512 at runtime */
#include <xxhash.h>
#include <xxh_x86dispatch.h>

#include "hash.h"

uint64_t hash64(const void *p, size_t len, uint64_t seed)
{
	if (!seed)
		return XXH3_64bits_dispatch(p, len);
	return XXH3_64bits_withSeed_dispatch(p, len, seed);
}

/* the opaque state is xxHash's own */
struct hash_state *hash_begin(void)
{
	XXH3_state_t *s = XXH3_createState();

	if (s && XXH3_64bits_reset(s) != XXH_OK) {
		XXH3_freeState(s);
		s = NULL;
	}
	return (struct hash_state *)s;
}

void hash_update(struct hash_state *s, const void *p, size_t len)
{
	XXH3_64bits_update((XXH3_state_t *)s, p, len);
}

uint64_t hash_end(struct hash_state *s)
{
	uint64_t h;

	if (!s)
		return 0;
	h = XXH3_64bits_digest((XXH3_state_t *)s);
	XXH3_freeState((XXH3_state_t *)s);
	return h;
}
