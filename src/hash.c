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
