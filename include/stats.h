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
	X(bytes_from_backend)	/* bytes fetched from the backend */	\
	X(backend_reads)	/* backend read operations completed */ \
	X(backend_errors)	/* failed backend reads (each attempt) */ \
	X(backend_retries)	/* retried backend reads */		\
	X(read_errors)		/* FUSE reads answered with an error */ \
	X(readahead_chunks)	/* chunks fetched ahead of a reader */	\
	X(chunks_stored)	/* chunks written to the cache */	\
	X(chunks_not_stored)	/* fetched but not cached (no room) */	\
	X(evictions)		/* files evicted */			\
	X(evicted_bytes)						\
	X(checksum_failures)	/* cached chunks that did not verify */ \
	X(verified_chunks)	/* cached chunks verified after start */ \
	X(stale_objects)	/* objects found changed in the backend */ \
	X(revalidations)	/* version re-checks at open */		\
	X(listings)		/* full backend listings */		\
	X(ns_swaps)		/* namespaces swapped in by a re-listing */ \
	X(prefetch_chunks)	/* chunks fetched for a list ahead of use */ \
	X(prefetch_wasted_bytes) /* prefetched, evicted before any read */ \
	X(stall_us)		/* time reads waited for the backend */	\
	X(lists_published)	/* epoch lists accepted */		\
	X(passthrough_opens)	/* opens the kernel reads directly */	\
	X(passthrough_bytes)	/* their file sizes (reads not seen) */	\
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

struct stats {
#define X(name) _Atomic uint64_t name;
	STATS_FIELDS(X)
#undef X
};

#define stat_add(st, field, n) \
	atomic_fetch_add_explicit(&(st)->field, (n), memory_order_relaxed)
#define stat_inc(st, field) stat_add(st, field, 1)

/* stats_note_latency() - one backend read attempt took @us */
void stats_note_latency(struct stats *st, uint64_t us);
/* stats_print() - every counter as "name value" lines */
void stats_print(const struct stats *st, FILE *f);

#endif
