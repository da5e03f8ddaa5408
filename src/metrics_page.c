// SPDX-License-Identifier: MIT
/* metrics_page.c - see metrics_page.h */
#include <dirent.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "compiler.h"
#include "membudget.h"
#include "lists.h"
#include "metrics_page.h"
#include "pathmap.h"
#include "version.h"

/* where a sample's value comes from */
enum msrc {
	M_NONE,		/* end of a family's samples */
	M_STAT,		/* struct stats field at .arg, times .scale */
	M_CONST_1,	/* fusefs_up, fusefs_build_info */
	M_CACHE_USED,
	M_CACHE_LIMIT,
	M_CACHE_RATIO,	/* used / limit */
	M_CACHE_FILES,
	M_NS_FILES,
	M_NS_DIRS,
	M_NS_BYTES,
	M_NS_SKIPPED,	/* .arg: enum pm_kind */
	M_NS_SHADOWED,
	M_NS_NON_UTF8,
	M_NS_COLLISIONS,
	M_LIST,		/* lists_foreach_value(.key) times .scale, per list */
	M_LATENCY,	/* the backend_read_us_* histogram, in seconds */
	M_RSS,		/* /proc/self/statm */
	M_FDS,		/* /proc/self/fd */
	M_UNVERIFIED,	/* cache_unverified_total() */
	M_MEM,		/* struct membudget_usage field at .arg */
};

struct msample {
	enum msrc src;
	const char *labels;	/* 'source="cache"', or NULL */
	size_t arg;
	const char *key;	/* M_LIST */
	double scale;		/* 0: 1 */
};

struct mfamily {
	const char *name;	/* counters: without the _total suffix */
	const char *type;	/* "counter", "gauge" or "histogram" */
	const char *unit;	/* "bytes", "seconds", "ratio" or "" */
	const char *help;
	struct msample s[4];
};

#define STAT(f, ...)	{ M_STAT, __VA_ARGS__, offsetof(struct stats, f), NULL, 0 }
#define STAT1(f)	STAT(f, NULL)
#define SRC(src)	{ src, NULL, 0, NULL, 0 }
#define SKIP(k, l)	{ M_NS_SKIPPED, "reason=\"" l "\"", k, NULL, 0 }
#define LIST(k, sc)	{ M_LIST, NULL, 0, k, sc }
#define MEM(f, l)	{ M_MEM, l, offsetof(struct membudget_usage, f), NULL, 0 }

/* THE table: every family of the page, in page order */
static const struct mfamily families[] = {
	{ "fusefs_build_info", "gauge", "",
	  "Always 1; the version label says which fusefs serves the mount",
	  { { M_CONST_1, "version=\"" FUSEFS_VERSION "\"", 0, NULL, 0 } } },
	{ "fusefs_up", "gauge", "", "Always 1 while the daemon answers",
	  { SRC(M_CONST_1) } },
	{ "fusefs_reads", "counter", "", "FUSE read requests",
	  { STAT1(reads) } },
	{ "fusefs_read_errors", "counter", "",
	  "FUSE read requests answered with an error",
	  { STAT1(read_errors) } },
	{ "fusefs_chunk_reads", "counter", "",
	  "Chunk reads by result: hit (from cache or memory) or miss (waited for the backend)",
	  { STAT(hits, "result=\"hit\""), STAT(misses, "result=\"miss\"") } },
	{ "fusefs_read_bytes", "counter", "bytes",
	  "Bytes by source: cache (replied from cache or memory), backend (fetched from the backend, read-ahead and prefetch included), passthrough (sizes of files opened for kernel passthrough)",
	  { STAT(bytes_from_cache, "source=\"cache\""),
	    STAT(bytes_from_backend, "source=\"backend\""),
	    STAT(passthrough_bytes, "source=\"passthrough\"") } },
	{ "fusefs_read_stall_seconds", "counter", "seconds",
	  "Time reads waited for the backend",
	  { { M_STAT, NULL, offsetof(struct stats, stall_us), NULL, 1e-6 } } },
	{ "fusefs_readahead_chunks", "counter", "",
	  "Chunks fetched ahead of a sequential reader",
	  { STAT1(readahead_chunks) } },
	{ "fusefs_page_reads", "counter", "",
	  "Backend reads of the 4 KiB pages a random read needed (not whole chunks)",
	  { STAT1(page_reads) } },
	{ "fusefs_page_stored_bytes", "counter", "bytes",
	  "Bytes of those pages written to the cache",
	  { STAT1(page_bytes_stored) } },
	{ "fusefs_range_prefetches", "counter", "",
	  "Page reads started ahead of a reader for ranges that lists name",
	  { STAT1(range_prefetches) } },
	{ "fusefs_backend_reads", "counter", "",
	  "Backend read operations completed",
	  { STAT1(backend_reads) } },
	{ "fusefs_backend_errors", "counter", "",
	  "Failed backend reads, each attempt counted",
	  { STAT1(backend_errors) } },
	{ "fusefs_backend_retries", "counter", "",
	  "Backend reads retried after an error",
	  { STAT1(backend_retries) } },
	{ "fusefs_backend_read_seconds", "histogram", "seconds",
	  "Duration of backend read attempts",
	  { SRC(M_LATENCY) } },
	{ "fusefs_backend_stale_objects", "counter", "",
	  "Objects found changed in the backend (their cached chunks dropped)",
	  { STAT1(stale_objects) } },
	{ "fusefs_backend_listings", "counter", "",
	  "Full listings of the backend",
	  { STAT1(listings) } },
	{ "fusefs_revalidations", "counter", "",
	  "Version re-checks of objects at open",
	  { STAT1(revalidations) } },
	{ "fusefs_cache_used_bytes", "gauge", "bytes",
	  "Data bytes in the cache (4 KiB blocks)",
	  { SRC(M_CACHE_USED) } },
	{ "fusefs_cache_limit_bytes", "gauge", "bytes",
	  "The cache size limit (--cache-size)",
	  { SRC(M_CACHE_LIMIT) } },
	{ "fusefs_cache_used_ratio", "gauge", "ratio",
	  "Cache use as a fraction of the limit, 0 to 1",
	  { SRC(M_CACHE_RATIO) } },
	{ "fusefs_cache_files", "gauge", "",
	  "Files with at least one cached chunk",
	  { SRC(M_CACHE_FILES) } },
	{ "fusefs_cache_chunk_stores", "counter", "",
	  "Fetched chunks by result: stored in the cache, or not_stored (no room: served from memory only)",
	  { STAT(chunks_stored, "result=\"stored\""),
	    STAT(chunks_not_stored, "result=\"not_stored\"") } },
	{ "fusefs_cache_evicted_files", "counter", "",
	  "Files evicted from the cache",
	  { STAT1(evictions) } },
	{ "fusefs_cache_evicted_bytes", "counter", "bytes",
	  "Bytes evicted from the cache",
	  { STAT1(evicted_bytes) } },
	{ "fusefs_cache_disk_read_bytes", "counter", "bytes",
	  "Bytes of replies read from the cache's data files (the rest of the cache source came from memory)",
	  { STAT1(bytes_from_disk) } },
	{ "fusefs_cache_victim_choices", "counter", "",
	  "Admissions that chose files to evict",
	  { STAT1(victim_choices) } },
	{ "fusefs_cache_victim_full_ranks", "counter", "",
	  "Choices by next use that ranked every cached file (or a sample of 4,096) instead of taking the victims from the use heaps",
	  { STAT1(victim_full_ranks) } },
	{ "fusefs_cache_victim_uses_asked", "counter", "",
	  "Next uses asked of the epoch lists for those choices",
	  { STAT1(victim_uses_asked) } },
	{ "fusefs_cache_verified_chunks", "counter", "",
	  "Cached chunks whose checksum was verified after a start",
	  { STAT1(verified_chunks) } },
	{ "fusefs_cache_checksum_failures", "counter", "",
	  "Cached chunks that failed verification (refetched)",
	  { STAT1(checksum_failures) } },
	{ "fusefs_prefetch_chunks", "counter", "",
	  "Chunks fetched for an epoch list ahead of use",
	  { STAT1(prefetch_chunks) } },
	{ "fusefs_prefetch_wasted_bytes", "counter", "bytes",
	  "Prefetched bytes evicted before any read",
	  { STAT1(prefetch_wasted_bytes) } },
	{ "fusefs_prefetch_queued_bytes", "counter", "bytes",
	  "Bytes fetched from the backend ahead of use for a list's queued (next) epoch",
	  { STAT1(prefetch_queued_bytes) } },
	{ "fusefs_prefetch_kept_stored_chunks", "counter", "",
	  "Prefetched chunks the cache refused when they arrived (kept in memory), written to it later",
	  { STAT1(prefetch_kept_stored) } },
	{ "fusefs_staged_chunks", "counter", "",
	  "Chunks fetched ahead of a list's reader into memory only (the policy would not keep them on disk)",
	  { STAT1(staged_chunks) } },
	{ "fusefs_staged_unread_chunks", "counter", "",
	  "Staged chunks dropped before any read",
	  { STAT1(staged_unread) } },
	{ "fusefs_staged_stored_chunks", "counter", "",
	  "Staged chunks written to the cache after all (the policy changed its mind)",
	  { STAT1(staged_stored) } },
	{ "fusefs_cache_lent_moves", "counter", "",
	  "Files lent to the kernel (passthrough) that gave up their last chunks: the rest copied into a new data file",
	  { STAT1(lent_moves) } },
	{ "fusefs_passthrough_opens", "counter", "",
	  "Opens the kernel reads directly from the cache (passthrough)",
	  { STAT1(passthrough_opens) } },
	{ "fusefs_lists_published", "counter", "",
	  "Epoch lists accepted",
	  { STAT1(lists_published) } },
	{ "fusefs_namespace_swaps", "counter", "",
	  "Namespaces swapped in by a re-listing",
	  { STAT1(ns_swaps) } },
	{ "fusefs_namespace_retired", "gauge", "",
	  "Replaced namespaces still read by open directory listings",
	  { STAT1(ns_retired) } },
	{ "fusefs_namespace_files", "gauge", "",
	  "Files in the current listing", { SRC(M_NS_FILES) } },
	{ "fusefs_namespace_dirs", "gauge", "",
	  "Directories in the current listing", { SRC(M_NS_DIRS) } },
	{ "fusefs_namespace_bytes", "gauge", "bytes",
	  "Sum of the file sizes in the current listing", { SRC(M_NS_BYTES) } },
	{ "fusefs_namespace_skipped_objects", "gauge", "",
	  "Objects of the current listing not shown, by reason",
	  { SKIP(PM_BAD_EMPTY, "empty_component"),
	    SKIP(PM_BAD_DOT, "dot_component"),
	    SKIP(PM_BAD_LONG, "too_long"), SKIP(PM_BAD_NUL, "nul_byte") } },
	{ "fusefs_namespace_shadowed_files", "gauge", "",
	  "Objects hidden by a directory of the same name or by the control directory .fusefs",
	  { SRC(M_NS_SHADOWED) } },
	{ "fusefs_namespace_non_utf8_names", "gauge", "",
	  "Names that are not UTF-8 (served byte for byte)",
	  { SRC(M_NS_NON_UTF8) } },
	{ "fusefs_namespace_collisions", "gauge", "",
	  "Objects skipped on an inode hash collision",
	  { SRC(M_NS_COLLISIONS) } },
	{ "fusefs_list_position", "gauge", "",
	  "Highest position read in the current epoch of the list",
	  { LIST("position", 0) } },
	{ "fusefs_list_files", "gauge", "",
	  "Files in the current epoch of the list", { LIST("files", 0) } },
	{ "fusefs_list_next_epoch_files", "gauge", "",
	  "Files in the next queued epoch of the list",
	  { LIST("next_epoch_files", 0) } },
	{ "fusefs_list_epochs_done", "gauge", "",
	  "Epochs of the list read to the end", { LIST("epochs_done", 0) } },
	{ "fusefs_list_lead_files", "gauge", "",
	  "Files cached ahead of the list's readers",
	  { LIST("lead_files", 0) } },
	{ "fusefs_list_lead_bytes", "gauge", "bytes",
	  "Bytes cached ahead of the list's readers",
	  { LIST("lead_bytes", 0) } },
	{ "fusefs_list_hit_ratio", "gauge", "ratio",
	  "Fraction of the files opened in the current epoch that were fully cached, 0 to 1",
	  { LIST("hit_ratio_permille", 1e-3) } },
	{ "fusefs_list_last_hit_ratio", "gauge", "ratio",
	  "Hit ratio of the last finished epoch, 0 to 1 (no sample before one finished)",
	  { LIST("last_hit_ratio_permille", 1e-3) } },
	{ "fusefs_list_epoch", "gauge", "",
	  "Number of the current epoch (-1: none)", { LIST("epoch", 0) } },
	{ "fusefs_list_next_epoch", "gauge", "",
	  "Number of the next queued epoch (-1: none)",
	  { LIST("next_epoch", 0) } },
	{ "fusefs_list_queued_epochs", "gauge", "",
	  "Epochs queued behind the current one", { LIST("queued", 0) } },
	{ "fusefs_list_read_files", "gauge", "",
	  "Files of the current epoch opened so far", { LIST("read", 0) } },
	{ "fusefs_list_remaining_files", "gauge", "",
	  "Files of the current epoch not opened yet",
	  { LIST("remaining", 0) } },
	{ "fusefs_list_expected_end", "gauge", "",
	  "Where the current epoch is expected to end: where the previous one did, at the same fraction of the list",
	  { LIST("expected_end", 0) } },
	{ "fusefs_list_idle", "gauge", "",
	  "1 if the list had no open for the idle time (not prefetched), else 0",
	  { LIST("idle", 0) } },
	{ "fusefs_verify_reads", "counter", "",
	  "Chunk reads made to verify cached chunks of an earlier run, by readers and the verifier",
	  { STAT1(verify_reads) } },
	{ "fusefs_verify_waits", "counter", "",
	  "Reads that waited for another thread's verification of their chunk",
	  { STAT1(verify_waits) } },
	{ "fusefs_verifier_chunks", "counter", "",
	  "Chunks the background verifier checked, by result: passed or failed (dropped, refetched when read)",
	  { STAT(verifier_chunks, "result=\"passed\""),
	    STAT(verifier_failed, "result=\"failed\"") } },
	{ "fusefs_verifier_open_waits", "counter", "",
	  "Passthrough opens that waited for the verifier to check their file",
	  { STAT1(verifier_open_waits) } },
	{ "fusefs_verifier_kept_chunks", "counter", "",
	  "Verified chunks handed to the readers of open files in memory",
	  { STAT1(verifier_kept) } },
	{ "fusefs_stop_trusted_chunks", "counter", "",
	  "Cached chunks of an earlier run served unread at this start: their data file as the clean stop that recorded it left it",
	  { STAT1(stop_trusted_chunks) } },
	{ "fusefs_stop_changed_files", "counter", "",
	  "Data files recorded at the last clean stop found changed at this start: their chunks verified",
	  { STAT1(stop_changed_files) } },
	{ "fusefs_cache_unverified_chunks", "gauge", "",
	  "Cached chunks of an earlier run not verified yet",
	  { SRC(M_UNVERIFIED) } },
	{ "fusefs_data_flushes", "counter", "",
	  "FLUSH requests for data files (0 with noflush)",
	  { STAT1(data_flushes) } },
	{ "fusefs_data_file_opens", "counter", "",
	  "Cache data files opened (idle ones stay open for the next open)",
	  { STAT1(data_file_opens) } },
	{ "fusefs_data_files_reused", "counter", "",
	  "New cache data files made of evicted ones (renamed and emptied) instead of created",
	  { STAT1(data_files_reused) } },
	{ "fusefs_lookups_concurrent_max", "gauge", "",
	  "Most LOOKUP requests answered at once since the start (above 1 with parallel directory operations)",
	  { STAT1(lookups_concurrent_max) } },
	{ "fusefs_watchdog_pings", "counter", "",
	  "WATCHDOG=1 notifications sent to systemd (WatchdogSec=)",
	  { STAT1(watchdog_pings) } },
	{ "fusefs_watchdog_withheld", "counter", "",
	  "Watchdog checks that failed (the mount did not answer or the index writer was stuck): no WATCHDOG=1 sent",
	  { STAT1(watchdog_withheld) } },
	{ "fusefs_backend_rate_bytes", "gauge", "bytes",
	  "The backend's delivery rate in bytes per second, measured over completed reads (0: none yet)",
	  { STAT1(backend_rate_bytes) } },
	{ "fusefs_backend_ahead_bound_bytes", "gauge", "bytes",
	  "Bytes of backend reads in flight beyond which read-ahead and prefetch wait (--ahead-time of the rate; 0: no bound)",
	  { STAT1(ahead_bound_bytes) } },
	{ "fusefs_index_queued_updates", "gauge", "",
	  "Cache index updates queued and not committed to the index yet (committed in batches)",
	  { STAT1(index_queued) } },
	{ "fusefs_memory_budget_limit_bytes", "gauge", "bytes",
	  "The memory budget (--memory-limit)", { MEM(limit, NULL) } },
	{ "fusefs_memory_budget_used_bytes", "gauge", "bytes",
	  "Memory charged to the budget now, by class: demand (readers wait for it), ahead (read-ahead and prefetch), ctl (control-file text)",
	  { MEM(by_class[MB_DEMAND], "class=\"demand\""),
	    MEM(by_class[MB_AHEAD], "class=\"ahead\""),
	    MEM(by_class[MB_CTL], "class=\"ctl\"") } },
	{ "fusefs_memory_budget_peak_bytes", "gauge", "bytes",
	  "Highest memory charged to the budget since the start", { MEM(peak, NULL) } },
	{ "fusefs_memory_budget_refused", "counter", "",
	  "Charges the budget refused (read-ahead skipped, a reader queued, control text refused)",
	  { MEM(refused, NULL) } },
	{ "fusefs_memory_budget_overdraft", "counter", "",
	  "Charges let past the limit so that waiting ends",
	  { MEM(overdraft, NULL) } },
	{ "process_resident_memory_bytes", "gauge", "bytes",
	  "Resident memory of the daemon (/proc/self/statm)", { SRC(M_RSS) } },
	{ "process_open_fds", "gauge", "",
	  "Open file descriptors of the daemon (/proc/self/fd)",
	  { SRC(M_FDS) } },
};

/* what one page is made of, read once per request */
struct snap {
	const struct report_src *src;
	FILE *f;
	bool om;
	const struct mfamily *fam;
	const struct msample *s;
	uint64_t used, limit, files;
	struct ns_stats ns;
	struct membudget_usage mem;
};

static uint64_t stat_at(const struct stats *st, size_t off)
{
	return atomic_load_explicit((_Atomic uint64_t *)((char *)st + off),
				    memory_order_relaxed);
}

static uint64_t rss_bytes(void)
{
	unsigned long long size, res = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (!f)
		return 0;
	if (fscanf(f, "%llu %llu", &size, &res) != 2)
		res = 0;
	fclose(f);
	return res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	uint64_t n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n ? n - 1 : 0;	/* not the one opendir() holds */
}

static void sample_name(struct snap *p, const char *suffix)
{
	fputs(p->fam->name, p->f);
	fputs(suffix, p->f);
}

/* label value escaping of the text formats: \\, \" and \n */
static void put_label_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

static const char *suffix_of(const struct mfamily *fam)
{
	return strcmp(fam->type, "counter") ? "" : "_total";
}

static void put_value(FILE *f, const struct msample *s, double v)
{
	if (s->scale)
		v *= s->scale;
	/* exact integers as such; the cast is defined below 2^63 only */
	if (fabs(v) < 0x1p63 && v == (double)(int64_t)v)
		fprintf(f, " %" PRId64 "\n", (int64_t)v);
	else
		fprintf(f, " %.9g\n", v);
}

static void put_sample(struct snap *p, double v)
{
	sample_name(p, suffix_of(p->fam));
	if (p->s->labels)
		fprintf(p->f, "{%s}", p->s->labels);
	put_value(p->f, p->s, v);
}

static void on_list_value(void *arg, const char *list, int64_t v)
{
	struct snap *p = arg;

	if (v < 0 && !strcmp(p->fam->unit, "ratio"))
		return;			/* no ratio yet */
	sample_name(p, suffix_of(p->fam));
	fputs("{list=\"", p->f);
	put_label_value(p->f, list);
	fputs("\"}", p->f);
	put_value(p->f, p->s, (double)v);
}

static void put_latency(struct snap *p)
{
	static const struct { size_t off; const char *le; } b[] = {
		{ offsetof(struct stats, backend_read_us_le_1000), "0.001" },
		{ offsetof(struct stats, backend_read_us_le_4000), "0.004" },
		{ offsetof(struct stats, backend_read_us_le_16000), "0.016" },
		{ offsetof(struct stats, backend_read_us_le_64000), "0.064" },
		{ offsetof(struct stats, backend_read_us_le_256000), "0.256" },
		{ offsetof(struct stats, backend_read_us_le_1000000), "1.0" },
		{ offsetof(struct stats, backend_read_us_le_4000000), "4.0" },
		{ offsetof(struct stats, backend_read_us_le_inf), "+Inf" },
	};
	const struct stats *st = p->src->st;
	uint64_t count = stat_at(st, offsetof(struct stats, backend_read_us_count));
	uint64_t prev = 0;
	size_t i;

	/*
	 * Counted without a lock (stats_note_latency() increments the
	 * buckets one by one, then the count): read the count first and
	 * keep the buckets non-decreasing and at most the count, as parsers
	 * require; +Inf is the count.
	 */
	for (i = 0; i < ARRAY_SIZE(b); i++) {
		uint64_t v = i + 1 == ARRAY_SIZE(b) ? count : stat_at(st, b[i].off);

		v = MIN(MAX(v, prev), count);
		prev = v;
		sample_name(p, "_bucket");
		fprintf(p->f, "{le=\"%s\"} %" PRIu64 "\n", b[i].le, v);
	}
	sample_name(p, "_sum");
	fprintf(p->f, " %.6f\n",
		stat_at(st, offsetof(struct stats, backend_read_us_sum)) / 1e6);
	sample_name(p, "_count");
	fprintf(p->f, " %" PRIu64 "\n", count);
}

static void put_family_samples(struct snap *p)
{
	const struct msample *s;

	for (s = p->fam->s; s < p->fam->s + ARRAY_SIZE(p->fam->s) &&
	     s->src != M_NONE; s++) {
		p->s = s;
		switch (s->src) {
		case M_NONE:
			break;
		case M_STAT:
			put_sample(p, stat_at(p->src->st, s->arg));
			break;
		case M_CONST_1:
			put_sample(p, 1);
			break;
		case M_CACHE_USED:
			put_sample(p, p->used);
			break;
		case M_CACHE_LIMIT:
			put_sample(p, p->limit);
			break;
		case M_CACHE_RATIO:
			put_sample(p, p->limit ? MIN((double)p->used / p->limit, 1.0) : 0);
			break;
		case M_CACHE_FILES:
			put_sample(p, p->files);
			break;
		case M_NS_FILES:
			put_sample(p, p->ns.files);
			break;
		case M_NS_DIRS:
			put_sample(p, p->ns.dirs);
			break;
		case M_NS_BYTES:
			put_sample(p, p->ns.bytes);
			break;
		case M_NS_SKIPPED:
			put_sample(p, p->ns.skipped[s->arg]);
			break;
		case M_NS_SHADOWED:
			put_sample(p, p->ns.shadowed);
			break;
		case M_NS_NON_UTF8:
			put_sample(p, p->ns.non_utf8);
			break;
		case M_NS_COLLISIONS:
			put_sample(p, p->ns.collisions);
			break;
		case M_LIST:
			if (p->src->lists)
				lists_foreach_value(p->src->lists, s->key,
						    on_list_value, p);
			break;
		case M_LATENCY:
			put_latency(p);
			break;
		case M_RSS:
			put_sample(p, rss_bytes());
			break;
		case M_FDS:
			put_sample(p, open_fds());
			break;
		case M_UNVERIFIED:
			put_sample(p, cache_unverified_total(p->src->cache));
			break;
		case M_MEM:
			put_sample(p, *(const uint64_t *)((const char *)&p->mem + s->arg));
			break;
		}
	}
}

void metrics_page_write(const struct report_src *src, FILE *f,
			bool openmetrics)
{
	struct snap p = { .src = src, .f = f, .om = openmetrics };
	size_t i;

	cache_usage(src->cache, &p.used, &p.limit, &p.files);
	p.ns = *ns_stats(nsmgr_rdlock(src->nm));
	nsmgr_unlock(src->nm);
	if (src->st->mem)
		membudget_usage(src->st->mem, &p.mem);
	for (i = 0; i < ARRAY_SIZE(families); i++) {
		const char *n = families[i].name;
		const char *sfx = openmetrics ? "" : suffix_of(&families[i]);

		p.fam = &families[i];
		fprintf(f, "# HELP %s%s %s\n# TYPE %s%s %s\n", n, sfx,
			families[i].help, n, sfx, families[i].type);
		if (openmetrics && families[i].unit[0])
			fprintf(f, "# UNIT %s %s\n", n, families[i].unit);
		put_family_samples(&p);
	}
	if (openmetrics)
		fputs("# EOF\n", f);
}
