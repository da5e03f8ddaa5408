// SPDX-License-Identifier: MIT
/* stats.c - see stats.h */
#include <inttypes.h>

#include "stats.h"

void stats_note_latency(struct stats *st, uint64_t us)
{
	/* cumulative buckets, as Prometheus histograms want them */
	if (us <= 1000)
		stat_inc(st, backend_read_us_le_1000);
	if (us <= 4000)
		stat_inc(st, backend_read_us_le_4000);
	if (us <= 16000)
		stat_inc(st, backend_read_us_le_16000);
	if (us <= 64000)
		stat_inc(st, backend_read_us_le_64000);
	if (us <= 256000)
		stat_inc(st, backend_read_us_le_256000);
	if (us <= 1000000)
		stat_inc(st, backend_read_us_le_1000000);
	if (us <= 4000000)
		stat_inc(st, backend_read_us_le_4000000);
	stat_inc(st, backend_read_us_le_inf);
	stat_add(st, backend_read_us_sum, us);
	stat_inc(st, backend_read_us_count);
}

void stats_print(const struct stats *st, FILE *f)
{
#define X(name) fprintf(f, #name " %" PRIu64 "\n", \
	(uint64_t)atomic_load_explicit(&st->name, memory_order_relaxed));
	STATS_FIELDS(X)
#undef X
}
