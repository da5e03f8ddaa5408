// SPDX-License-Identifier: MIT
/* stats.c - see stats.h */
#include <inttypes.h>

#include "stats.h"

void stats_print(const struct stats *st, FILE *f)
{
#define X(name) fprintf(f, #name " %" PRIu64 "\n", \
	(uint64_t)atomic_load_explicit(&st->name, memory_order_relaxed));
	STATS_FIELDS(X)
#undef X
}
