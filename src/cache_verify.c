// SPDX-License-Identifier: MIT
/*
 * cache_verify.c - checking the chunks an earlier run left (UNVERIFIED
 * after a start) before anything serves them: single-flight verification
 * reads, their verdicts (PRESENT, or dropped with their record), the
 * whole-file check of a passthrough open, and what the background
 * verifier asks (see cache.h, "Verification").  Hashing runs with no lock.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <time.h>

#include "cache_priv.h"
#include "hash.h"
#include "log.h"
#include "strsafe.h"

static int64_t now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec;
}

/*
 * Settle UNVERIFIED chunk @n of @ce, whose bytes a verification read
 * found good (@ok) or not: PRESENT, or ABSENT with its record and space
 * gone.  Ends the single flight and wakes who waits for it.  Locked.
 */
static int settle_locked(struct cache *c, struct centry *ce, uint32_t n,
			 bool ok, bool read_error)
{
	uint32_t len = cache_chunk_len(c, ce, n);

	ce->verifying[n] = 0;
	pthread_cond_broadcast(&c->cond);
	if (ce->state[n] != CH_UNVERIFIED)
		return -EAGAIN;		/* cannot happen: the flag held it */
	ce->unverified--;
	if (!ce->stale)
		c->unverified--;
	if (ok) {
		ce->state[n] = CH_PRESENT;
		stat_inc(c->st, verified_chunks);
		return 0;
	}
	ce->state[n] = CH_ABSENT;
	ce->used -= blocks(len);
	policy_charge(&c->pol, cache_owner_node(ce), -(int64_t)blocks(len));
	if (!ce->stale)
		meta_q_drop_chunk(c->meta, ce->fid, n);
	stat_inc(c->st, checksum_failures);
	/* an entry loaded from the index has no key before its first open
	 * (the background verifier checks such files): its inode number */
	if (ce->key[0])
		log_warn("cached chunk %u of '%s' failed verification%s: refetching",
			 n, str_log(ce->key), read_error ? " (read error)" : "");
	else
		log_warn("cached chunk %u of inode %" PRIu64 " (not opened since the start; find MOUNTPOINT -inum %" PRIu64 " names it) failed verification%s: refetching",
			 n, ce->fid, ce->fid, read_error ? " (read error)" : "");
	return -EBADMSG;
}

/* did the verification read of @len bytes (@got, or -errno) match @sum */
static bool bytes_match(const void *data, ssize_t got, uint32_t len,
			uint64_t sum)
{
	return got >= (ssize_t)len && hash64(data, len, 0) == sum;
}

int cache_verify_chunk(struct cache *c, struct centry *ce, uint32_t n,
		       struct chunkbuf *cb)
{
	uint32_t len = cache_chunk_len(c, ce, n);
	uint64_t off = (uint64_t)n * c->chunk_size;
	bool direct, ok, waited = false;
	ssize_t r;
	int rc, dfd;

	rc = cache_ensure_files(c, ce);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	while (n < ce->nchunks && ce->verifying[n]) {
		/* single flight: the bytes are being read by someone else */
		waited = true;
		pthread_cond_wait(&c->cond, &c->lock);
	}
	if (waited || n >= ce->nchunks || ce->state[n] != CH_UNVERIFIED) {
		/* settled meanwhile; @cb holds nothing: let the caller look */
		pthread_mutex_unlock(&c->lock);
		if (waited)
			stat_inc(c->st, verify_waits);
		return -EAGAIN;
	}
	ce->verifying[n] = 1;
	pthread_mutex_unlock(&c->lock);

	stat_inc(c->st, verify_reads);
	dfd = cache_direct_fd(c, ce);
	direct = dfd >= 0;
	r = cache_pread_full(direct ? dfd : ce->fd, cb->data,
		       direct ? blocks(len) : len, off);
	cb->len = len;
	ok = bytes_match(cb->data, r, len, ce->sum[n]);	/* no lock held */
	pthread_mutex_lock(&c->lock);
	rc = settle_locked(c, ce, n, ok, r < 0);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int cache_verify_begin(struct cache *c, struct centry *ce, uint32_t from,
		       bool buffered, struct cache_vread *vr)
{
	uint32_t n;
	int rc, dfd;

	rc = cache_ensure_files(c, ce);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	for (n = from; n < ce->nchunks; n++)
		if (ce->state[n] == CH_UNVERIFIED && !ce->verifying[n])
			break;
	if (n >= ce->nchunks) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	ce->verifying[n] = 1;
	ce->busy++;
	cache_refs_changed_locked(c, ce);
	pthread_mutex_unlock(&c->lock);

	stat_inc(c->st, verify_reads);
	vr->ce = ce;
	vr->n = n;
	vr->len = cache_chunk_len(c, ce, n);
	vr->off = (uint64_t)n * c->chunk_size;
	if (buffered || (dfd = cache_direct_fd(c, ce)) < 0) {
		vr->fd = ce->fd;
		vr->rlen = vr->len;
	} else {
		vr->fd = dfd;
		vr->rlen = blocks(vr->len);
	}
	return 1;
}

int cache_verify_end(struct cache *c, struct cache_vread *vr,
		     const void *data, ssize_t got)
{
	struct centry *ce = vr->ce;
	bool ok;
	int rc;

	ok = bytes_match(data, got, vr->len, ce->sum[vr->n]);	/* unlocked */
	pthread_mutex_lock(&c->lock);
	rc = settle_locked(c, ce, vr->n, ok, got < 0);
	pthread_mutex_unlock(&c->lock);
	cache_busy_put(c, ce);
	vr->ce = NULL;
	return rc;
}

void cache_verify_abort(struct cache *c, struct cache_vread *vr)
{
	pthread_mutex_lock(&c->lock);
	vr->ce->verifying[vr->n] = 0;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	cache_busy_put(c, vr->ce);
	vr->ce = NULL;
}

int cache_verify_hold(struct cache *c, uint64_t fid, struct centry **out)
{
	struct centry *ce;
	int held = 0;

	uint32_t n = 0;

	pthread_mutex_lock(&c->lock);
	ce = htab_get(&c->tab, fid);
	/* one the verifier can start: not every one in flight already */
	if (ce && ce->unverified)
		for (n = 0; n < ce->nchunks; n++)
			if (ce->state[n] == CH_UNVERIFIED && !ce->verifying[n])
				break;
	if (ce && ce->unverified && n < ce->nchunks) {
		ce->busy++;
		cache_refs_changed_locked(c, ce);
		*out = ce;
		held = 1;
	}
	pthread_mutex_unlock(&c->lock);
	return held;
}

uint32_t cache_unverified(struct cache *c, const struct centry *ce)
{
	uint32_t n;

	pthread_mutex_lock(&c->lock);
	n = ce->unverified;
	pthread_mutex_unlock(&c->lock);
	return n;
}

uint64_t cache_unverified_total(struct cache *c)
{
	uint64_t n;

	pthread_mutex_lock(&c->lock);
	n = c->unverified;
	pthread_mutex_unlock(&c->lock);
	return n;
}

struct fid_heat {
	uint64_t fid;
	double score;
};

static int hotter_first(const void *a, const void *b)
{
	double x = ((const struct fid_heat *)a)->score;
	double y = ((const struct fid_heat *)b)->score;

	return x < y ? 1 : x > y ? -1 : 0;
}

int cache_unverified_by_heat(struct cache *c, uint64_t **fids, size_t *n)
{
	struct fid_heat *fh;
	int64_t now = now_s();
	size_t i, k = 0, cap;
	uint64_t *ids;

	pthread_mutex_lock(&c->lock);
	cap = c->files ? c->files : 1;
	fh = malloc(cap * sizeof(*fh));
	for (i = 0; fh && i < c->tab.cap && k < cap; i++) {
		struct centry *ce = c->tab.slot[i];

		if (!ce || !ce->unverified)
			continue;
		fh[k].fid = ce->fid;
		fh[k].score = policy_heat(&c->pol, ce->pn, now);
		k++;
	}
	pthread_mutex_unlock(&c->lock);
	ids = fh ? malloc(cap * sizeof(*ids)) : NULL;
	if (!ids) {
		free(fh);
		return -ENOMEM;
	}
	qsort(fh, k, sizeof(*fh), hotter_first);
	for (i = 0; i < k; i++)
		ids[i] = fh[i].fid;
	free(fh);
	*fids = ids;
	*n = k;
	return 0;
}


uint32_t cache_file_unverified(struct cache *c, uint64_t fid)
{
	struct centry *ce;
	uint32_t n = 0;

	pthread_mutex_lock(&c->lock);
	ce = htab_get(&c->tab, fid);
	if (ce)
		n = ce->unverified;
	pthread_mutex_unlock(&c->lock);
	return n;
}

int cache_first_unverified(struct cache *c, const struct centry *ce,
			   uint32_t n0, uint32_t n1, uint32_t *out)
{
	int st = CH_ABSENT;
	uint32_t n;

	pthread_mutex_lock(&c->lock);
	if (!ce->unverified && !ce->stale && n1 < ce->nchunks && n0 <= n1) {
		pthread_mutex_unlock(&c->lock);
		return 0;		/* the usual case: one look */
	}
	for (n = n0; n <= n1; n++) {
		st = cache_state_locked(ce, n);
		if (st == CH_UNVERIFIED || st < 0)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	if (st < 0)
		return st;
	if (n > n1)
		return 0;
	*out = n;
	return 1;
}

int cache_first_not_present_locked(const struct centry *ce, uint32_t *n)
{
	int st = CH_PRESENT;

	if (ce->stale)
		return -ESTALE;
	for (; *n < ce->nchunks; (*n)++) {
		st = ce->state[*n];
		if (st != CH_PRESENT)
			return st;
	}
	return CH_PRESENT;
}

int cache_verify_file(struct cache *c, struct centry *ce)
{
	struct chunkbuf *cb = NULL;
	uint32_t n = 0;
	int rc = 0, st;

	for (;;) {
		pthread_mutex_lock(&c->lock);
		st = cache_first_not_present_locked(ce, &n);
		pthread_mutex_unlock(&c->lock);
		if (st != CH_UNVERIFIED)
			break;
		if (!cb)
			cb = chunkbuf_new(c->chunk_size);
		rc = cb ? cache_verify_chunk(c, ce, n, cb) : -ENOMEM;
		if (rc == -EBADMSG)
			rc = -EAGAIN;	/* dropped: refetched on read */
		else if (rc == -EAGAIN)
			rc = 0;		/* settled by another thread: look again */
		if (rc)
			break;
	}
	chunkbuf_put(cb);
	if (rc)
		return rc;
	return st == CH_PRESENT ? 0 : st < 0 ? st : -EAGAIN;
}
