// SPDX-License-Identifier: MIT
/* linkrate.c - see linkrate.h */
#include "linkrate.h"

#define WEIGHT_BYTES	(12ULL << 20)

void linkrate_init(struct linkrate *lr, uint64_t horizon_us, uint32_t chunk)
{
	*lr = (struct linkrate){ .horizon_us = horizon_us,
				 .floor = 2ULL * chunk };
	pthread_mutex_init(&lr->lock, NULL);
}

void linkrate_destroy(struct linkrate *lr)
{
	pthread_mutex_destroy(&lr->lock);
}

/* the area under "reads in flight" up to @now */
static void advance_locked(struct linkrate *lr, int64_t now)
{
	if (now > lr->last) {
		lr->area += (uint64_t)lr->active * (uint64_t)(now - lr->last);
		lr->last = now;
	}
}

uint64_t linkrate_sent(struct linkrate *lr, uint64_t len, int64_t now)
{
	uint64_t mark;

	pthread_mutex_lock(&lr->lock);
	advance_locked(lr, now);
	mark = lr->area;
	lr->active++;
	lr->bytes_active += len;
	pthread_mutex_unlock(&lr->lock);
	return mark;
}

void linkrate_done(struct linkrate *lr, uint64_t mark, int64_t sent,
		   uint64_t len, uint64_t got, int64_t now)
{
	uint64_t dur, area, sample;

	pthread_mutex_lock(&lr->lock);
	if (!lr->active)
		goto out;		/* unbalanced: ignore */
	advance_locked(lr, now);
	lr->active--;
	lr->bytes_active -= len < lr->bytes_active ? len : lr->bytes_active;
	if (!got)
		goto out;
	dur = now > sent ? (uint64_t)(now - sent) : 1;
	area = lr->area > mark ? lr->area - mark : dur;
	/* got / dur x (area / dur): the read's share times the mean
	 * number of reads sharing the link with it */
	sample = (uint64_t)((double)got * 1e6 * (double)area /
			    ((double)dur * (double)dur));
	/* a read's weight grows with its bytes: a 4 MiB chunk moves the
	 * estimate by a quarter, a 100 KiB file by under 1 % */
	if (!lr->rate)
		lr->rate = sample;
	else
		lr->rate = (uint64_t)((double)lr->rate +
				      ((double)sample - (double)lr->rate) *
				      (double)got / (double)(got + WEIGHT_BYTES));
out:
	pthread_mutex_unlock(&lr->lock);
}

/*
 * What the link delivers in the horizon at the rate measured, but at
 * least two reads of @len bytes (two chunks at most): the next read is
 * always queued.  A floor of two whole chunks let 80 reads of 100 KiB
 * files in flight, far more than the link needs to stay busy.
 */
static uint64_t bound_locked(const struct linkrate *lr, uint64_t len)
{
	uint64_t b, fl = 2 * len < lr->floor ? 2 * len : lr->floor;

	if (!lr->horizon_us || !lr->rate)
		return 0;
	b = (uint64_t)((double)lr->rate * (double)lr->horizon_us / 1e6);
	return b > fl ? b : fl;
}

bool linkrate_room(struct linkrate *lr, uint64_t pending, uint64_t len)
{
	uint64_t b;
	bool ok;

	pthread_mutex_lock(&lr->lock);
	b = bound_locked(lr, len);
	ok = !b || (!lr->active && !pending) ||
	     lr->bytes_active + pending + len <= b;
	pthread_mutex_unlock(&lr->lock);
	return ok;
}

void linkrate_read(struct linkrate *lr, uint64_t *rate, uint64_t *bound)
{
	pthread_mutex_lock(&lr->lock);
	*rate = lr->rate;
	*bound = bound_locked(lr, lr->floor / 2);	/* for a chunk */
	pthread_mutex_unlock(&lr->lock);
}
