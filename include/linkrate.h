/* SPDX-License-Identifier: MIT */
/*
 * linkrate.h - how fast the backend delivers, and how many bytes of
 * speculative reads (read-ahead, prefetch, staging) may be in flight.
 *
 * Over a link slower than the reader, many reads in flight share it: a
 * chunk a reader is about to need gets 1/n of the rate and arrives
 * together with n - 1 chunks needed later, so the reader waits longer and
 * a burst of chunks lands at once (at the end of an epoch, the link then
 * idles while the reader goes through them).  On a fast backend the same
 * reads in flight are what keeps it busy.  So the bound on speculative
 * reads is set by time, not by count: what the backend delivers in
 * @horizon_us at the rate measured (at least two reads of the size asked,
 * two chunks at most: the next read is always queued), counting every
 * read in flight, demand reads too.  Bytes beyond what keeps the link
 * busy only wait in its queue: many short responses at once overflowed
 * the benchmark link's and lost packets (docs/benchmarks-epoch.md).
 *
 * The rate: each completed read's bytes per second of its lifetime,
 * times the mean number of reads in flight over that lifetime (reads
 * share the link, each about 1/n of it), smoothed over reads (each new
 * read moving it by got / (got + 12 MiB): a 4 MiB chunk by a quarter).  A burst of reads that started
 * together and end together so measures the link, not one read's share
 * of it nor the burst's bytes over its last milliseconds.  Failed reads
 * are not measured.  Until the first read completes there is no estimate
 * and no bound (the caller's --max-inflight still applies).
 *
 * Thread-safe: one mutex, a leaf lock (taken under the fetch lock, calls
 * nothing).  Times are the caller's (microseconds, monotonic), so unit
 * tests drive it without sleeping.
 */
#ifndef FUSEFS_LINKRATE_H
#define FUSEFS_LINKRATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct linkrate {
	pthread_mutex_t lock;
	uint64_t horizon_us;		/* 0: no bound */
	uint64_t floor;			/* 2 chunks: the most of the floor */
	unsigned active;		/* reads in flight */
	uint64_t bytes_active;		/* their requested bytes */
	int64_t last;			/* time of the last event */
	uint64_t area;			/* sum of active x microseconds */
	uint64_t rate;			/* bytes per second; 0: none yet */
};

/* linkrate_init() - @horizon_us 0 turns the bound off; @chunk: the chunk
 * size (the bound never goes below two reads of the size asked, nor that
 * floor above two chunks) */
void linkrate_init(struct linkrate *lr, uint64_t horizon_us, uint32_t chunk);
void linkrate_destroy(struct linkrate *lr);
/* linkrate_sent() - a read of @len bytes went to the backend at @now;
 * returns the mark linkrate_done() needs */
uint64_t linkrate_sent(struct linkrate *lr, uint64_t len, int64_t now);
/* linkrate_done() - a read of @len bytes sent at @sent with @mark ended
 * at @now having delivered @got bytes (0 on failure) */
void linkrate_done(struct linkrate *lr, uint64_t mark, int64_t sent,
		   uint64_t len, uint64_t got, int64_t now);
/*
 * linkrate_room() - may a speculative read of @len bytes start now, with
 * @pending bytes of reads about to be sent (claimed by the caller, not
 * yet linkrate_sent())?  True when nothing is in flight or pending, when
 * there is no estimate or bound, or when the bytes in flight, @pending
 * and @len fit in the bound.
 */
bool linkrate_room(struct linkrate *lr, uint64_t pending, uint64_t len);
/* linkrate_read() - the estimate in bytes per second (0: none yet) and
 * the bound in bytes it sets now for chunk-sized reads (0: none), one
 * consistent snapshot */
void linkrate_read(struct linkrate *lr, uint64_t *rate, uint64_t *bound);

#endif
