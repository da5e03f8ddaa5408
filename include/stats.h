/* SPDX-License-Identifier: MIT */
/*
 * stats.h - always-on counters (relaxed atomics, no locks) and their
 * text form "name value\n", served through the control xattr.
 */
#ifndef FUSEFS_STATS_H
#define FUSEFS_STATS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#define STATS_FIELDS(X)							\
	X(reads)		/* FUSE read requests */		\
	X(hits)			/* chunk-reads served from cache/memory */ \
	X(misses)		/* chunk-reads that waited for the backend */ \
	X(bytes_from_cache)	/* bytes replied from cache or memory */ \
	X(bytes_from_disk)	/* of those, read from the data files */ \
	X(bytes_from_backend)	/* bytes fetched from the backend */	\
	X(backend_reads)	/* backend read operations completed */ \
	X(backend_errors)	/* failed backend reads (each attempt) */ \
	X(backend_retries)	/* retried backend reads */		\
	X(read_errors)		/* FUSE reads answered with an error */ \
	X(readahead_chunks)	/* chunks fetched ahead of a reader */	\
	X(page_reads)		/* backend reads of a random read's pages */ \
	X(page_bytes_stored)	/* bytes of those written to the cache */ \
	X(range_prefetches)	/* of them, pages of listed ranges */	\
	X(chunks_stored)	/* chunks written to the cache */	\
	X(chunks_not_stored)	/* fetched but not cached (no room) */	\
	X(evictions)		/* files evicted */			\
	X(evicted_bytes)						\
	X(victim_choices)	/* admissions that chose victims */	\
	X(victim_full_ranks)	/* ... by next use over every cached file */ \
	X(victim_uses_asked)	/* next uses asked for those choices */ \
	X(checksum_failures)	/* cached chunks that did not verify */ \
	X(verified_chunks)	/* cached chunks verified after start */ \
	X(stale_objects)	/* objects found changed in the backend */ \
	X(revalidations)	/* version re-checks at open */		\
	X(listings)		/* full backend listings */		\
	X(ns_swaps)		/* namespaces swapped in by a re-listing */ \
	X(ns_retired)		/* replaced ones open listings read (a gauge) */ \
	X(prefetch_chunks)	/* chunks fetched for a list ahead of use */ \
	X(prefetch_wasted_bytes) /* prefetched, evicted before any read */ \
	X(prefetch_kept_stored) /* refused on arrival, written later */ \
	X(prefetch_queued_bytes) /* fetched for a queued epoch's read */ \
	X(staged_chunks)	/* fetched ahead into memory only */	\
	X(staged_unread)	/* of those, dropped before any read */ \
	X(staged_stored)	/* of those, written to disk after all */ \
	X(stall_us)		/* time reads waited for the backend */	\
	X(lists_published)	/* epoch lists accepted */		\
	X(passthrough_opens)	/* opens the kernel reads directly */	\
	X(lent_moves)		/* lent files whose head was moved */	\
	X(passthrough_bytes)	/* their file sizes (reads not seen) */	\
	/* verification of chunks from an earlier run (verifier.h) */	\
	X(verify_reads)		/* chunk reads to verify, by anyone */	\
	X(verify_waits)		/* reads that waited for another's check */ \
	X(verifier_chunks)	/* chunks the background verifier passed */ \
	X(verifier_failed)	/* chunks it found damaged (dropped) */	\
	X(verifier_open_waits)	/* opens that waited for their file's check */ \
	X(verifier_kept)	/* verified chunks handed to open files' readers */ \
	X(stop_trusted_chunks)	/* not read: file as the clean stop left it */ \
	X(stop_changed_files)	/* recorded at a clean stop, changed since */ \
	X(data_flushes)		/* FLUSH requests for data files */	\
	X(data_file_opens)	/* data files opened (kept open while idle) */ \
	X(data_files_reused)	/* of those, new ones made of spares */	\
	X(lookups_concurrent_max) /* most LOOKUPs answered at once (a max) */ \
	X(watchdog_pings)	/* WATCHDOG=1 sent to systemd */	\
	X(watchdog_withheld)	/* checks that failed: no WATCHDOG=1 */ \
	X(backend_rate_bytes)	/* the backend's rate, measured (a gauge) */ \
	X(ahead_bound_bytes)	/* read-ahead/prefetch bound (a gauge) */ \
	X(index_queued)		/* index updates not committed (a gauge) */ \
	X(backend_read_us_le_1000)	/* latency histogram, cumulative */ \
	X(backend_read_us_le_4000)					\
	X(backend_read_us_le_16000)					\
	X(backend_read_us_le_64000)					\
	X(backend_read_us_le_256000)					\
	X(backend_read_us_le_1000000)					\
	X(backend_read_us_le_4000000)					\
	X(backend_read_us_le_inf)					\
	X(backend_read_us_sum)						\
	X(backend_read_us_count)

struct membudget;

struct stats {
#define X(name) _Atomic uint64_t name;
	STATS_FIELDS(X)
#undef X
	/*
	 * ---- memory gauges (not counters), printed after them ----
	 * mem_rss_bytes, mem_peak_rss_bytes (/proc/self/statm and VmHWM),
	 * mem_budget_{limit,used,peak,demand,ahead,ctl}_bytes,
	 * mem_budget_refused and mem_budget_overdraft (counters).
	 * @mem is set by fetch_create() and cleared by fetch_destroy().
	 */
	struct membudget *mem;
};

#define stat_add(st, field, n) \
	atomic_fetch_add_explicit(&(st)->field, (n), memory_order_relaxed)
#define stat_inc(st, field) stat_add(st, field, 1)

/* stats_note_latency() - one backend read attempt took @us */
void stats_note_latency(struct stats *st, uint64_t us);
/* stats_print() - every counter as "name value" lines, then the memory
 * gauges (stats_print_memory()) */
void stats_print(const struct stats *st, FILE *f);
/* stats_print_memory() - the mem_* lines (struct stats' last block) */
void stats_print_memory(const struct stats *st, FILE *f);

#endif
