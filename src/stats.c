// SPDX-License-Identifier: MIT
/* stats.c - see stats.h */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "membudget.h"
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
	stats_print_memory(st, f);
}

/* ---- memory gauges (see struct stats) ---- */

/* resident bytes now (statm) and at most (VmHWM); 0 if unknown */
static void rss_read(uint64_t *rss, uint64_t *hwm)
{
	unsigned long long size, res;
	char line[128];
	FILE *f;

	*rss = *hwm = 0;
	f = fopen("/proc/self/statm", "re");
	if (f) {
		if (fscanf(f, "%llu %llu", &size, &res) == 2)
			*rss = res * (uint64_t)sysconf(_SC_PAGESIZE);
		fclose(f);
	}
	f = fopen("/proc/self/status", "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmHWM:", 6)) {
			*hwm = strtoull(line + 6, NULL, 10) * 1024;
			break;
		}
	fclose(f);
}

void stats_print_memory(const struct stats *st, FILE *f)
{
	struct membudget_usage u = { 0 };
	uint64_t rss, hwm;

	rss_read(&rss, &hwm);
	if (st->mem)
		membudget_usage(st->mem, &u);
	fprintf(f, "mem_rss_bytes %" PRIu64 "\nmem_peak_rss_bytes %" PRIu64
		"\nmem_budget_limit_bytes %" PRIu64
		"\nmem_budget_used_bytes %" PRIu64
		"\nmem_budget_peak_bytes %" PRIu64
		"\nmem_budget_demand_bytes %" PRIu64
		"\nmem_budget_ahead_bytes %" PRIu64
		"\nmem_budget_ctl_bytes %" PRIu64
		"\nmem_budget_refused %" PRIu64
		"\nmem_budget_overdraft %" PRIu64 "\n", rss, hwm, u.limit,
		u.used, u.peak, u.by_class[MB_DEMAND], u.by_class[MB_AHEAD],
		u.by_class[MB_CTL], u.refused, u.overdraft);
}
