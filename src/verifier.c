// SPDX-License-Identifier: MIT
/* verifier.c - background verification of cached chunks (see verifier.h) */

#include <errno.h>
#include <inttypes.h>
#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bgthread.h"
#include "compiler.h"
#include "fetch.h"
#include "lists.h"
#include "log.h"
#include "ns.h"
#include "nsmgr.h"
#include "testhook.h"
#include "verifier.h"

#define VERIFY_MAX_DEPTH	64
#define IDLE_MS			60000	/* nothing left: only wakes matter */
#define LIST_LOOK		32	/* list files looked at per pick */
#define QUEUE_MAX		4096	/* opened files queued at most */
#define QUIET_MS		1000	/* daemon path: no open for this long
					 * before files nobody opened */
#define KIN_DIRS		8	/* directories of waited files kept */
#define KIN_LOOK		64	/* their entries looked at per pick */

/* levels of the picker, most needed first */
enum { LV_WAITED, LV_OPENED, LV_BACKGROUND, LV_N };

struct vq {
	struct centry *ce;	/* busy reference */
	bool *done;		/* set (under lock) once every read of the
				 * file was started, or at stop; may be NULL */
	struct vq *next;
};

struct vslot {
	struct cache_vread vr;	/* vr.ce NULL: free */
	int lv;			/* the picker's level it came from */
	struct chunkbuf *buf;
	size_t got;		/* bytes read so far */
	bool queued;		/* sync mode: read not done yet */
};

/* a directory an open waited in, and how far its files were looked at */
struct kin_dir {
	uint64_t ino;
	uint64_t at;		/* next child index */
};

struct verifier {
	struct cache *c;
	struct fetcher *fetch;
	struct lists *lists;
	struct nsmgr *nm;
	struct stats *st;
	unsigned depth;
	struct bgthread *bg;
	atomic_bool passthrough;
	atomic_int_fast64_t last_open_ms;	/* a daemon-path open */

	/* the verifier thread's own */
	bool uring;		/* else synchronous preads */
	bool ring_tried;
	struct io_uring ring;
	struct vslot *slots;
	unsigned inflight;
	struct centry *cur[LV_N];	/* file being walked, busy ref */
	bool *cur_done[LV_N];		/* its asker's flag (vq.done) */
	uint32_t from[LV_N];
	bool buffered[LV_N];	/* read it through the page cache */
	uint64_t *heat;		/* files by heat, taken at the first pick */
	size_t nheat, heat_at;
	size_t bg_heat;		/* heat[] index of cur[LV_BACKGROUND], or
				 * SIZE_MAX (from a list) */
	struct kin_dir kin[KIN_DIRS];	/* most recent first */
	unsigned nkin;
	bool heat_taken, done_logged;
	bool deferred;		/* the background level waits for quiet */
	uint64_t bg_started;	/* background-level reads started */
	struct timespec t0;

	/* under lock (a leaf) */
	pthread_mutex_t lock;
	pthread_cond_t cond;	/* an asker's flag was set */
	bool stopping;
	struct vq *q[LV_BACKGROUND];	/* LV_WAITED, LV_OPENED: FIFO */
	struct vq *qtail[LV_BACKGROUND];
	unsigned qlen[LV_BACKGROUND];
};

/* queue @ce at level @lv; false if it was not (stopping, full, ENOMEM) */
static bool push(struct verifier *v, int lv, struct centry *ce, bool *done)
{
	struct vq *e = malloc(sizeof(*e));
	bool queued = false;

	if (!e)
		return false;
	cache_busy_get(v->c, ce);	/* not under our lock: it is a leaf */
	pthread_mutex_lock(&v->lock);
	if (!v->stopping && v->qlen[lv] < QUEUE_MAX) {
		e->ce = ce;
		e->done = done;
		e->next = NULL;
		if (v->qtail[lv])
			v->qtail[lv]->next = e;
		else
			v->q[lv] = e;
		v->qtail[lv] = e;
		v->qlen[lv]++;
		queued = true;
	}
	pthread_mutex_unlock(&v->lock);
	if (queued) {
		bgthread_wake(v->bg);
		return true;
	}
	cache_busy_put(v->c, ce);
	free(e);
	return false;
}

static struct centry *pop(struct verifier *v, int lv, bool **done)
{
	struct centry *ce = NULL;
	struct vq *e;

	pthread_mutex_lock(&v->lock);
	e = v->q[lv];
	if (e) {
		v->q[lv] = e->next;
		if (!e->next)
			v->qtail[lv] = NULL;
		v->qlen[lv]--;
		ce = e->ce;
		*done = e->done;
	}
	pthread_mutex_unlock(&v->lock);
	free(e);
	return ce;
}

/* the walk of @lv's file ends: drop it, tell its asker, wake waiters */
static void drop_cur(struct verifier *v, int lv)
{
	cache_busy_put(v->c, v->cur[lv]);
	v->cur[lv] = NULL;
	pthread_mutex_lock(&v->lock);
	if (v->cur_done[lv])
		*v->cur_done[lv] = true;
	v->cur_done[lv] = NULL;
	pthread_cond_broadcast(&v->cond);
	pthread_mutex_unlock(&v->lock);
}

/*
 * An open waited for file @ce: the other files of its directory are
 * what readers open next (a dataset, a split, a shard directory), more
 * likely than the hottest files elsewhere in the cache, e.g. of another
 * dataset the previous job read.  Its directory goes first in kin[]
 * (keeping how far it was looked at); the eldest falls out.
 */
static void kin_note(struct verifier *v, struct centry *ce)
{
	const struct ns_node *n;
	struct kin_dir k = { 0, 0 };
	struct cache_ident ci;
	struct ns *ns;
	unsigned i;

	if (!v->nm)
		return;
	cache_ident(ce, &ci);
	ns = nsmgr_rdlock(v->nm);
	n = ns_get(ns, ci.fid);
	if (n)
		k.ino = ns_parent(ns, n)->ino;
	nsmgr_unlock(v->nm);
	if (!n)
		return;
	for (i = 0; i < v->nkin && v->kin[i].ino != k.ino; i++)
		;
	if (i < v->nkin)
		k = v->kin[i];
	else if (v->nkin < KIN_DIRS)
		i = v->nkin++;
	else
		i = KIN_DIRS - 1;
	memmove(&v->kin[1], &v->kin[0], i * sizeof(v->kin[0]));
	v->kin[0] = k;
}

/*
 * A file of the most recent kin[] directory with a chunk to start, from
 * where the last look left it: up to KIN_LOOK entries are read under the
 * tree's lock, then tried with none held.  A directory looked through
 * falls out.
 */
static struct centry *look_kin(struct verifier *v)
{
	uint64_t fids[KIN_LOOK], at[KIN_LOOK];
	struct kin_dir *k = &v->kin[0];
	const struct ns_node *d;
	struct centry *ce;
	uint64_t nkids;
	struct ns *ns;
	unsigned i, n = 0;

	if (!v->nkin)
		return NULL;
	ns = nsmgr_rdlock(v->nm);
	d = ns_get(ns, k->ino);
	nkids = d ? ns_nkids(d) : 0;
	for (; k->at < nkids && n < KIN_LOOK; k->at++) {
		const struct ns_node *f = ns_kid(ns, d, k->at);

		if (f && !f->is_dir) {
			fids[n] = f->ino;
			at[n++] = k->at;
		}
	}
	nsmgr_unlock(v->nm);
	for (i = 0; i < n; i++)
		if (cache_verify_hold(v->c, fids[i], &ce)) {
			k->at = at[i] + 1;	/* the rest at the next pick */
			return ce;
		}
	if (k->at >= nkids) {
		v->nkin--;
		memmove(&v->kin[0], &v->kin[1], v->nkin * sizeof(v->kin[0]));
	}
	return NULL;
}

/* look_kin() a few times: a directory's verified files are passed over
 * KIN_LOOK at a time, then the heat order gets its turn */
static struct centry *pick_kin(struct verifier *v)
{
	struct centry *ce = NULL;
	unsigned looks;

	for (looks = 0; looks < 4 && v->nkin && !ce; looks++)
		ce = look_kin(v);
	return ce;
}

/* a file with unverified chunks nobody asked for: lists, the directories
 * of waited files, then heat */
static struct centry *pick_background(struct verifier *v)
{
	uint64_t fids[LIST_LOOK];
	struct centry *ce;
	size_t i, n;

	v->bg_heat = SIZE_MAX;
	if (v->lists) {
		n = lists_window(v->lists, 0, fids, NULL, NULL, 0, ARRAY_SIZE(fids));
		for (i = 0; i < n; i++)
			if (cache_verify_hold(v->c, fids[i], &ce))
				return ce;
	}
	ce = pick_kin(v);
	if (ce)
		return ce;
	if (!v->heat_taken) {
		v->heat_taken = true;
		if (cache_unverified_by_heat(v->c, &v->heat, &v->nheat))
			log_warn("verifier: out of memory: verifying opened files only");
	}
	while (v->heat_at < v->nheat)
		if (cache_verify_hold(v->c, v->heat[v->heat_at++], &ce)) {
			v->bg_heat = v->heat_at - 1;
			return ce;
		}
	return NULL;
}

/*
 * Files nobody opened, verified now?  With passthrough, yes: they are
 * read through the page cache, which the kernel reads next.  On the
 * daemon path those reads are O_DIRECT and their bytes are not kept, so
 * while readers open files they only double the disk reads and hashing
 * (a reader verifies a chunk itself at its first read, single flight):
 * wait until no file was opened for QUIET_MS.
 */
static bool background_now(struct verifier *v, bool pt)
{
	/* tests: "verifier-quiet-ms" replaces QUIET_MS, and
	 * "verifier-background" caps the background reads started */
	int64_t quiet = testhook_value("verifier-quiet-ms", QUIET_MS);
	int64_t cap = testhook_value("verifier-background", INT64_MAX);

	v->deferred = (!pt && bg_mono_ms() - atomic_load(&v->last_open_ms) <
			      quiet) ||
		      (cap >= 0 && v->bg_started >= (uint64_t)cap);
	if (v->deferred && v->cur[LV_BACKGROUND]) {
		/* hold no file while waiting (an eviction waits for it):
		 * picked again, where it was, once the mount is quiet */
		if (v->bg_heat != SIZE_MAX)
			v->heat_at = v->bg_heat;
		drop_cur(v, LV_BACKGROUND);
	}
	return !v->deferred;
}

/*
 * Background files picked in one call at most: a pick has a chunk to
 * start (cache_verify_hold()), unless a reader claimed it in between;
 * past this many the level waits for the next call (after a read
 * completes, or the next tick), so that a file whose chunks are all in
 * flight cannot keep the thread picking it forever.
 */
#define PICKS_MAX	64

/* the next chunk to read, most needed first: 1 and *@vr, *@lvp, or 0 */
static int next_read(struct verifier *v, struct cache_vread *vr, int *lvp)
{
	bool pt = atomic_load(&v->passthrough);
	unsigned picks = 0;
	int lv, rc;

	for (lv = 0; lv < LV_N; lv++) {
		if (lv == LV_BACKGROUND && !background_now(v, pt))
			break;
		for (;;) {
			struct centry *ce = v->cur[lv];

			if (!ce) {
				if (lv == LV_BACKGROUND && picks++ >= PICKS_MAX)
					break;
				ce = lv < LV_BACKGROUND ?
					pop(v, lv, &v->cur_done[lv]) :
					pick_background(v);
				if (!ce)
					break;
				if (lv == LV_WAITED)
					kin_note(v, ce);
				v->cur[lv] = ce;
				v->from[lv] = 0;
				v->buffered[lv] = pt && cache_is_complete(v->c, ce);
			}
			rc = cache_verify_begin(v->c, ce, v->from[lv],
						v->buffered[lv], vr);
			if (rc == 1) {
				v->from[lv] = vr->n + 1;
				v->bg_started += lv == LV_BACKGROUND;
				*lvp = lv;
				return 1;
			}
			/* nothing left to start in this file */
			if (rc < 0)
				log_warn("verifier: cannot read a data file: %s",
					 strerror(-rc));
			drop_cur(v, lv);
		}
	}
	return 0;
}

static void ring_setup(struct verifier *v)
{
	int rc;

	v->ring_tried = true;
	rc = io_uring_queue_init(v->depth, &v->ring, 0);
	if (rc < 0) {
		log_warn("verifier: io_uring unavailable (%s): one synchronous read at a time",
			 strerror(-rc));
		return;
	}
	v->uring = true;
}

static void submit_slot(struct verifier *v, struct vslot *s)
{
	struct io_uring_sqe *sqe;

	if (!v->uring) {
		s->queued = true;
		return;
	}
	sqe = io_uring_get_sqe(&v->ring);	/* never NULL: depth slots */
	io_uring_prep_read(sqe, s->vr.fd, s->buf->data + s->got,
			   s->vr.rlen - s->got, s->vr.off + s->got);
	io_uring_sqe_set_data(sqe, s);
}

/* a read ended: its slot is free */
static void done(struct verifier *v)
{
	v->inflight--;
}

/*
 * A daemon-path reader has @ce open and will read chunk @n next: hand the
 * verified bytes to the read path's memory set instead of letting it read
 * them from disk again (O_DIRECT reads do not see the page cache).  The
 * slot gets a fresh buffer if the set kept this one.
 */
static void keep(struct verifier *v, struct vslot *s, struct centry *ce,
		 uint32_t n)
{
	/* the slot reads into its buffer again: never one the set holds */
	struct chunkbuf *fresh = chunkbuf_new(cache_chunk_size(v->c));

	if (!fresh)
		return;
	fetch_keep_verified(v->fetch, ce, n, s->buf);
	if (atomic_load(&s->buf->ref) == 1) {
		chunkbuf_put(fresh);		/* not kept */
		return;
	}
	stat_inc(v->st, verifier_kept);
	chunkbuf_put(s->buf);
	s->buf = fresh;
}

/* a read of @s returned @res: more to read, or settle the chunk */
static void complete_slot(struct verifier *v, struct vslot *s, int res)
{
	struct centry *ce;
	uint32_t n;
	int rc;

	if (res == -EAGAIN || res == -EINTR ||
	    (res > 0 && s->got + res < s->vr.len)) {
		if (res > 0)
			s->got += res;	/* short read: the rest */
		submit_slot(v, s);
		return;
	}
	if (res > 0)
		s->got += res;
	if (res < 0) {
		/*
		 * No verdict: a failed or cancelled read says nothing about
		 * the bytes.  A reader checks the chunk itself (and drops it
		 * if its read fails too).
		 */
		log_warn("verifier: reading chunk %u: %s", s->vr.n,
			 strerror(-res));
		cache_verify_abort(v->c, &s->vr);
		done(v);
		return;
	}
	ce = s->vr.ce;
	n = s->vr.n;
	s->buf->len = s->vr.len;
	cache_busy_get(v->c, ce);	/* _end() drops the read's reference */
	rc = cache_verify_end(v->c, &s->vr, s->buf->data, (ssize_t)s->got);
	if (rc == 0)
		stat_inc(v->st, verifier_chunks);
	else
		stat_inc(v->st, verifier_failed);
	if (rc == 0 && s->lv == LV_OPENED && v->fetch)
		keep(v, s, ce, n);
	cache_busy_put(v->c, ce);
	done(v);
}

static ssize_t pread_once(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t r;

	do {
		r = pread(fd, buf, len, off);
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : r;
}

/* wait for at least one read to finish and settle what finished */
static void reap(struct verifier *v)
{
	struct io_uring_cqe *cqe;
	unsigned i, head, seen = 0;
	int rc;

	if (!v->uring) {
		for (i = 0; i < v->depth; i++) {
			struct vslot *s = &v->slots[i];

			if (!s->vr.ce || !s->queued)
				continue;
			s->queued = false;
			complete_slot(v, s, pread_once(s->vr.fd,
				s->buf->data + s->got, s->vr.rlen - s->got,
				s->vr.off + s->got));
		}
		return;
	}
	rc = io_uring_submit_and_wait(&v->ring, 1);
	if (rc < 0 && rc != -EINTR && rc != -EBUSY)
		log_warn("verifier: io_uring_submit_and_wait: %s", strerror(-rc));
	io_uring_for_each_cqe(&v->ring, head, cqe) {
		complete_slot(v, io_uring_cqe_get_data(cqe), cqe->res);
		seen++;
	}
	io_uring_cq_advance(&v->ring, seen);
}

/* start reads into the free slots, most needed first */
static void fill(struct verifier *v)
{
	unsigned i;

	for (i = 0; i < v->depth && v->inflight < v->depth; i++) {
		struct vslot *s = &v->slots[i];

		if (s->vr.ce)
			continue;
		if (!next_read(v, &s->vr, &s->lv))
			break;
		s->got = 0;
		v->inflight++;
		submit_slot(v, s);
	}
}

static bool stopping(struct verifier *v)
{
	bool stop;

	pthread_mutex_lock(&v->lock);
	stop = v->stopping;
	pthread_mutex_unlock(&v->lock);
	return stop;
}

/*
 * Runs until nothing is left to start or the verifier stops, and never
 * returns with reads in flight: io_uring cancels the requests of a thread
 * that exits, and bgthread_stop() runs no further tick.
 */
static int64_t verify_tick(void *arg)
{
	struct verifier *v = arg;
	struct timespec t1;

	if (!v->ring_tried)
		ring_setup(v);
	for (;;) {
		if (!stopping(v))
			fill(v);
		if (!v->inflight)
			break;
		reap(v);
	}
	if (!v->done_logged && !cache_unverified_total(v->c)) {
		v->done_logged = true;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		log_info("verifier: every cached chunk verified (%" PRIu64
			 " by the verifier, %" PRIu64 " damaged) in %.1f s",
			 (uint64_t)atomic_load(&v->st->verifier_chunks),
			 (uint64_t)atomic_load(&v->st->verifier_failed),
			 (double)(t1.tv_sec - v->t0.tv_sec) +
			 (t1.tv_nsec - v->t0.tv_nsec) / 1e9);
	}
	/* opens and waits wake the thread; quiet does not */
	return v->deferred ? QUIET_MS : BG_PERIOD;
}

int verifier_start(struct verifier **out, struct cache *c, struct fetcher *f,
		   struct lists *l, struct nsmgr *nm, unsigned depth,
		   struct stats *st)
{
	struct verifier *v;
	unsigned i;
	int rc = -ENOMEM;

	*out = NULL;
	if (!depth)
		return 0;
	if (depth > VERIFY_MAX_DEPTH)
		return -EINVAL;
	v = calloc(1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	v->c = c;
	v->fetch = f;
	v->lists = l;
	v->nm = nm;
	v->st = st;
	v->depth = depth;
	pthread_mutex_init(&v->lock, NULL);
	pthread_cond_init(&v->cond, NULL);
	clock_gettime(CLOCK_MONOTONIC, &v->t0);
	v->slots = calloc(depth, sizeof(*v->slots));
	if (!v->slots)
		goto out_free;
	for (i = 0; i < depth; i++) {
		v->slots[i].buf = chunkbuf_new(cache_chunk_size(c));
		if (!v->slots[i].buf)
			goto out_free;
	}
	rc = bgthread_start(&v->bg, "fusefs-verify", IDLE_MS, verify_tick, v);
	if (rc)
		goto out_free;
	*out = v;
	return 0;
out_free:
	for (i = 0; v->slots && i < depth; i++)
		chunkbuf_put(v->slots[i].buf);
	free(v->slots);
	free(v);
	return rc;
}

void verifier_stop(struct verifier *v)
{
	struct centry *ce;
	int lv;
	unsigned i;

	if (!v)
		return;
	pthread_mutex_lock(&v->lock);
	v->stopping = true;
	pthread_cond_broadcast(&v->cond);
	pthread_mutex_unlock(&v->lock);
	bgthread_stop(v->bg);
	while (v->inflight)		/* each read settles its chunk */
		reap(v);
	for (lv = 0; lv < LV_N; lv++) {
		if (v->cur[lv])
			drop_cur(v, lv);
		while (lv < LV_BACKGROUND && (ce = pop(v, lv, &v->cur_done[lv]))) {
			v->cur[lv] = ce;
			drop_cur(v, lv);	/* its asker stops waiting */
		}
	}
	if (v->uring)
		io_uring_queue_exit(&v->ring);
	for (i = 0; i < v->depth; i++)
		chunkbuf_put(v->slots[i].buf);
	free(v->slots);
	free(v->heat);
	pthread_cond_destroy(&v->cond);
	pthread_mutex_destroy(&v->lock);
	free(v);
}

int verifier_wait_file(struct verifier *v, struct centry *ce)
{
	bool done = false;

	if (!v || !cache_unverified(v->c, ce))
		return 0;
	stat_inc(v->st, verifier_open_waits);
	if (!push(v, LV_WAITED, ce, &done))
		return -ESHUTDOWN;
	/* @done lives here: the verifier sets it before forgetting it */
	pthread_mutex_lock(&v->lock);
	while (!done)
		pthread_cond_wait(&v->cond, &v->lock);
	pthread_mutex_unlock(&v->lock);
	return 0;
}

void verifier_note_open(struct verifier *v, struct centry *ce)
{
	struct cache_ident ci;

	if (!v)
		return;
	atomic_store(&v->last_open_ms, bg_mono_ms());
	cache_ident(ce, &ci);
	/* one chunk: its reader checks it at once, on its own worker,
	 * where this one thread would queue the readers of many files */
	if (ci.nchunks > 1 && cache_unverified(v->c, ce))
		push(v, LV_OPENED, ce, NULL);
}

void verifier_set_passthrough(struct verifier *v, bool on)
{
	if (v && atomic_load(&v->passthrough) != on)
		atomic_store(&v->passthrough, on);
}
