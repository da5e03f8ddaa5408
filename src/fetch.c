// SPDX-License-Identifier: MIT
/* fetch.c - see fetch.h */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fetch.h"
#include "hash.h"
#include "log.h"

#define COMPLETION_THREADS	2
#define BACKOFF_MS		100
#define BACKOFF_MAX_MS		2000

struct preq;

struct waiter {
	struct preq *pr;
	struct waiter *next;
};

/* one chunk being fetched; lives in ce->inflight while FETCHING */
struct inflight {
	struct fetcher *f;
	struct centry *ce;		/* busy reference held */
	uint32_t n;
	struct chunkbuf *cb;
	struct backend_read rd;
	ssize_t ret;
	unsigned tries;
	int64_t due_ms;			/* retry time */
	int64_t sent_us;		/* this attempt started */
	bool ready;			/* cb holds the chunk */
	bool prefetch;			/* nobody asked for it yet */
	struct waiter *waiters;
	struct inflight *next;		/* in ce->inflight */
	struct inflight *qnext;		/* completion or retry queue */
};

/* one parked FUSE read */
struct preq {
	fetch_done_fn done;
	void *arg;
	struct centry *ce;		/* busy reference held */
	uint64_t off;
	size_t len;
	uint32_t n0, nn;
	int nwait;
	int err;
	int64_t parked_us;		/* when it started waiting */
	struct preq *next;		/* ready list */
	struct chunkbuf *bufs[];	/* nn entries, NULL: read from disk */
};

struct fetcher {
	struct cache *c;
	struct backend *be;
	struct stats *st;
	uint32_t cs;
	unsigned readahead, max_inflight, retries;
	enum read_mode mode;
	atomic_uint inflight;		/* backend reads outstanding */
	atomic_uint prefetching;	/* of which prefetches */
	void (*on_prefetch)(void *arg, bool stored);
	void *prefetch_arg;
	void (*on_stale)(void *arg, uint64_t fid);
	void *stale_arg;

	pthread_mutex_t qlock;		/* guards the queues below */
	pthread_cond_t qcond;
	struct inflight *qhead, *qtail;	/* completed reads */
	struct inflight *retry;		/* waiting for due_ms */
	bool stop;
	pthread_t threads[COMPLETION_THREADS];
};

static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;

struct tlbuf {
	char *p;
	size_t cap;
};

static void tl_free(void *v)
{
	struct tlbuf *t = v;

	free(t->p);
	free(t);
}

static void tl_init(void)
{
	pthread_key_create(&tl_key, tl_free);
}

/* a per-thread 4 KiB aligned buffer of at least @len bytes */
static char *tl_buffer(size_t len)
{
	struct tlbuf *t = pthread_getspecific(tl_key);

	if (!t) {
		t = calloc(1, sizeof(*t));
		if (!t)
			return NULL;
		pthread_setspecific(tl_key, t);
	}
	if (t->cap < len) {
		free(t->p);
		t->cap = 0;
		if (posix_memalign((void **)&t->p, 4096, len))
			return t->p = NULL;
		t->cap = len;
	}
	return t->p;
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
	return now_us() / 1000;
}

static struct inflight *inflight_find_locked(struct centry *ce, uint32_t n)
{
	struct inflight *in;

	for (in = ce->inflight; in; in = in->next)
		if (in->n == n)
			return in;
	return NULL;
}

/* the bytes of chunk @n available in memory, or NULL */
static struct chunkbuf *mem_chunk_locked(struct centry *ce, uint32_t n)
{
	struct inflight *in;

	unsigned i;

	for (i = 0; i < CACHE_MEMCHUNKS; i++)
		if (ce->mem[i].cb && ce->mem[i].n == n)
			return ce->mem[i].cb;
	if (ce->state[n] == CH_FETCHING) {
		in = inflight_find_locked(ce, n);
		if (in && in->ready)
			return in->cb;
	}
	return NULL;
}

/* keep chunk @n in memory (replacing its older copy or the oldest slot) */
static void set_hot_locked(struct centry *ce, uint32_t n, struct chunkbuf *cb)
{
	unsigned i, slot = ce->mem_next % CACHE_MEMCHUNKS;

	for (i = 0; i < CACHE_MEMCHUNKS; i++)
		if (ce->mem[i].cb && ce->mem[i].n == n)
			slot = i;
	if (slot == ce->mem_next % CACHE_MEMCHUNKS)
		ce->mem_next++;
	chunkbuf_put(ce->mem[slot].cb);
	ce->mem[slot].cb = chunkbuf_get(cb);
	ce->mem[slot].n = n;
}

/* start fetching chunk @n: FETCHING, busy; submitted by submit_all() */
static struct inflight *start_locked(struct fetcher *f, struct centry *ce,
				     uint32_t n)
{
	struct inflight *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->cb = chunkbuf_new(f->cs);
	if (!in->cb) {
		free(in);
		return NULL;
	}
	in->f = f;
	in->ce = ce;
	in->n = n;
	in->next = ce->inflight;
	ce->inflight = in;
	ce->state[n] = CH_FETCHING;
	cache_busy_get_locked(ce);
	atomic_fetch_add(&f->inflight, 1);
	return in;
}

static void backend_done(struct backend_read *rd, ssize_t ret);

static void complete_push(struct fetcher *f, struct inflight *in)
{
	pthread_mutex_lock(&f->qlock);
	in->qnext = NULL;
	if (f->qtail)
		f->qtail->qnext = in;
	else
		f->qhead = in;
	f->qtail = in;
	pthread_cond_signal(&f->qcond);
	pthread_mutex_unlock(&f->qlock);
}

static void submit(struct fetcher *f, struct inflight *in)
{
	int rc;

	in->rd.key = in->ce->key;
	in->rd.version = in->ce->version;
	in->rd.off = (uint64_t)in->n * f->cs;
	in->rd.len = cache_chunk_len(f->c, in->ce, in->n);
	in->rd.buf = in->cb->data;
	in->rd.done = backend_done;
	in->sent_us = now_us();
	rc = f->be->ops->read(f->be, &in->rd);
	if (rc < 0) {
		in->ret = rc;
		complete_push(f, in);
	}
}

static void backend_done(struct backend_read *rd, ssize_t ret)
{
	struct inflight *in = container_of(rd, struct inflight, rd);

	in->ret = ret;
	complete_push(in->f, in);
}

/* queue read-ahead of the chunks after @last for a sequential reader */
static int readahead_locked(struct fetcher *f, struct centry *ce,
			    uint32_t first, uint32_t last,
			    struct inflight **start, int nstart, int max)
{
	uint32_t n;

	if (first != ce->seq_next && first + 1 != ce->seq_next)
		goto out;
	for (n = last + 1; n <= last + f->readahead && n < ce->nchunks &&
	     nstart < max; n++) {
		struct inflight *in;

		if (ce->state[n] != CH_ABSENT || mem_chunk_locked(ce, n))
			continue;
		if (atomic_load(&f->inflight) >= f->max_inflight)
			break;
		in = start_locked(f, ce, n);
		if (!in)
			break;
		stat_inc(f->st, readahead_chunks);
		start[nstart++] = in;
	}
out:
	ce->seq_next = last + 1;
	return nstart;
}

/* answer @pr from memory buffers and the cache file; drops its refs */
static void serve(struct fetcher *f, struct centry *ce, uint64_t off,
		  size_t len, uint32_t n0, uint32_t nn,
		  struct chunkbuf **bufs, fetch_done_fn done, void *arg)
{
	struct fetch_piece p[8];
	uint64_t pos = off, end = off + len;
	uint32_t i;
	int np = 0, err = 0;

	for (i = 0; i < nn && np < (int)ARRAY_SIZE(p); i++) {
		uint64_t cstart = (uint64_t)(n0 + i) * f->cs;
		uint64_t pend = MIN(end, cstart + f->cs);

		if (bufs[i]) {
			p[np++] = (struct fetch_piece){
				.mem = bufs[i]->data + (pos - cstart),
				.len = pend - pos };
		} else if (np && !p[np - 1].mem &&
			   p[np - 1].off + p[np - 1].len == pos) {
			p[np - 1].len += pend - pos;	/* adjacent disk range */
		} else {
			p[np++] = (struct fetch_piece){
				.fd = cache_read_fd(ce), .off = pos,
				.len = pend - pos };
		}
		pos = pend;
	}
	if (f->mode == READ_DIRECT) {
		/* turn disk ranges into memory: O_DIRECT, no double caching */
		size_t need = 0;
		char *buf;

		for (i = 0; i < (uint32_t)np; i++)
			if (!p[i].mem)
				need += ((p[i].len + 4095) & ~4095UL) + 8192;
		buf = need ? tl_buffer(need) : NULL;
		for (i = 0; i < (uint32_t)np && need; i++) {
			char *at;

			if (p[i].mem)
				continue;
			at = buf ? cache_pread(f->c, ce, p[i].off, p[i].len, buf) : NULL;
			if (!at) {
				err = EIO;
				break;
			}
			p[i].mem = at;
			buf += ((p[i].len + 4095) & ~4095UL) + 8192;
		}
	}
	if (err) {
		stat_inc(f->st, read_errors);
		done(arg, err, NULL, 0);
	} else {
		stat_add(f->st, bytes_from_cache, len);
		done(arg, 0, p, np);
	}
	for (i = 0; i < nn; i++)
		chunkbuf_put(bufs[i]);
}

static void preq_finish(struct fetcher *f, struct preq *pr)
{
	stat_add(f->st, stall_us, now_us() - pr->parked_us);
	if (pr->err) {
		stat_inc(f->st, read_errors);
		pr->done(pr->arg, pr->err, NULL, 0);
		for (uint32_t i = 0; i < pr->nn; i++)
			chunkbuf_put(pr->bufs[i]);
	} else {
		serve(f, pr->ce, pr->off, pr->len, pr->n0, pr->nn, pr->bufs,
		      pr->done, pr->arg);
	}
	cache_busy_put(f->c, pr->ce);
	free(pr);
}

int fetch_read(struct fetcher *f, struct centry *ce, uint64_t off,
	       size_t size, fetch_done_fn done, void *arg)
{
	struct chunkbuf *bufs[8] = { NULL };
	struct inflight *start[80];
	struct preq *pr = NULL;
	uint32_t n0, n1, nn, n, i;
	int nstart = 0, tries;
	size_t len;

	stat_inc(f->st, reads);
	if (off >= ce->size || !size) {
		done(arg, 0, NULL, 0);
		return 0;
	}
	len = MIN((uint64_t)size, ce->size - off);
	n0 = off / f->cs;
	n1 = (off + len - 1) / f->cs;
	nn = n1 - n0 + 1;
	if (nn > ARRAY_SIZE(bufs))
		return -EINVAL;		/* reads are <= 1 MiB, chunks >= 1 MiB */
	cache_note_read(f->c, ce, len);

	for (tries = 0;; tries++) {
		int verify = -1, wait = 0;

		cache_lock(f->c);
		if (ce->stale) {
			cache_unlock(f->c);
			return -ESTALE;
		}
		for (n = n0; n <= n1; n++) {
			if (mem_chunk_locked(ce, n) || ce->state[n] == CH_PRESENT)
				continue;
			if (ce->state[n] == CH_UNVERIFIED) {
				verify = n;
				break;
			}
			wait++;
		}
		if (verify >= 0 && tries < 16) {
			struct chunkbuf *cb = chunkbuf_new(f->cs);

			cache_busy_get_locked(ce);
			cache_unlock(f->c);
			if (!cb) {
				cache_busy_put(f->c, ce);
				return -ENOMEM;
			}
			if (cache_verify_chunk(f->c, ce, verify, cb) == 0) {
				cache_lock(f->c);
				set_hot_locked(ce, verify, cb);
				cache_unlock(f->c);
			}
			chunkbuf_put(cb);
			cache_busy_put(f->c, ce);
			continue;
		}
		break;
	}
	/* locked here */
	for (n = n0, i = 0; n <= n1; n++, i++) {
		struct chunkbuf *cb = mem_chunk_locked(ce, n);

		if (cb)
			bufs[i] = chunkbuf_get(cb);
	}
	for (n = n0, i = 0; n <= n1; n++, i++) {
		struct inflight *in;

		if (bufs[i] || ce->state[n] == CH_PRESENT)
			continue;
		if (!pr) {
			pr = calloc(1, sizeof(*pr) + nn * sizeof(pr->bufs[0]));
			if (!pr)
				goto out_nomem;
			pr->done = done;
			pr->arg = arg;
			pr->ce = ce;
			pr->off = off;
			pr->len = len;
			pr->n0 = n0;
			pr->nn = nn;
			pr->parked_us = now_us();
			cache_busy_get_locked(ce);
		}
		in = ce->state[n] == CH_FETCHING ? inflight_find_locked(ce, n) : NULL;
		if (!in) {
			in = start_locked(f, ce, n);
			if (!in)
				goto out_nomem;
			start[nstart++] = in;
		}
		struct waiter *w = malloc(sizeof(*w));
		if (!w)
			goto out_nomem;
		w->pr = pr;
		w->next = in->waiters;
		in->waiters = w;
		pr->nwait++;
		stat_inc(f->st, misses);
	}
	nstart = readahead_locked(f, ce, n0, n1, start, nstart,
				  ARRAY_SIZE(start));
	if (pr)
		memcpy(pr->bufs, bufs, nn * sizeof(bufs[0]));
	cache_unlock(f->c);

	for (i = 0; i < (uint32_t)nstart; i++)
		submit(f, start[i]);
	if (!pr) {
		stat_inc(f->st, hits);
		serve(f, ce, off, len, n0, nn, bufs, done, arg);
	}
	return 0;

out_nomem:
	/* parked waiters stay valid: the request fails when they complete */
	if (pr && pr->nwait) {
		pr->err = ENOMEM;
		memcpy(pr->bufs, bufs, nn * sizeof(bufs[0]));
		cache_unlock(f->c);
		for (i = 0; i < (uint32_t)nstart; i++)
			submit(f, start[i]);
		return 0;
	}
	if (pr) {
		ce->busy--;		/* nobody waits: undo, entry is open */
		free(pr);
	}
	cache_unlock(f->c);
	for (i = 0; i < (uint32_t)nstart; i++)
		submit(f, start[i]);
	for (i = 0; i < nn; i++)
		chunkbuf_put(bufs[i]);
	return -ENOMEM;
}

static bool retriable(ssize_t ret)
{
	return ret != -ESTALE && ret != -ENOENT && ret != -EACCES &&
	       ret != -EPERM && ret != -ENOMEM;
}

/* hand the chunk (or the error) to every waiter; returns ready preqs */
static struct preq *wake_locked(struct inflight *in, int err)
{
	struct preq *ready = NULL;
	struct waiter *w, *next;

	for (w = in->waiters; w; w = next) {
		struct preq *pr = w->pr;

		next = w->next;
		if (err)
			pr->err = err;
		else
			pr->bufs[in->n - pr->n0] = chunkbuf_get(in->cb);
		if (--pr->nwait == 0) {
			pr->next = ready;
			ready = pr;
		}
		free(w);
	}
	in->waiters = NULL;
	return ready;
}

static void finish_all(struct fetcher *f, struct preq *ready)
{
	while (ready) {
		struct preq *next = ready->next;

		preq_finish(f, ready);
		ready = next;
	}
}

/* the chunk is settled: PRESENT if stored, else ABSENT; in leaves ce */
static void inflight_unlink_locked(struct inflight *in, bool stored)
{
	struct centry *ce = in->ce;
	struct inflight **pp;

	ce->state[in->n] = stored ? CH_PRESENT : CH_ABSENT;
	for (pp = &ce->inflight; *pp; pp = &(*pp)->next)
		if (*pp == in) {
			*pp = in->next;
			break;
		}
}

static void inflight_free(struct fetcher *f, struct inflight *in, bool stored)
{
	if (in->prefetch) {
		atomic_fetch_sub(&f->prefetching, 1);
		if (f->on_prefetch)
			f->on_prefetch(f->prefetch_arg, stored);
	}
	chunkbuf_put(in->cb);
	cache_busy_put(f->c, in->ce);
	atomic_fetch_sub(&f->inflight, 1);
	free(in);
}

static void complete(struct fetcher *f, struct inflight *in)
{
	struct centry *ce = in->ce;
	uint32_t want = cache_chunk_len(f->c, ce, in->n);
	ssize_t ret = in->ret;
	struct preq *ready;
	bool stored;
	uint64_t sum;

	stats_note_latency(f->st, now_us() - in->sent_us);
	if (ret >= 0 && (size_t)ret != want)
		ret = -ESTALE;		/* shorter than listed: it changed */
	if (ret < 0) {
		stat_inc(f->st, backend_errors);
		if (retriable(ret) && in->tries < f->retries) {
			int64_t delay = MIN((int64_t)BACKOFF_MS << in->tries,
					    BACKOFF_MAX_MS);

			in->tries++;
			stat_inc(f->st, backend_retries);
			log_warn("reading '%s' chunk %u: %s, retry %u in %lld ms",
				 ce->key, in->n, strerror((int)-ret), in->tries,
				 (long long)delay);
			in->due_ms = now_ms() + delay;
			pthread_mutex_lock(&f->qlock);
			in->qnext = f->retry;
			f->retry = in;
			pthread_mutex_unlock(&f->qlock);
			return;
		}
		log_err("reading '%s' chunk %u failed: %s", ce->key, in->n,
			ret == -ESTALE ? "object changed in the backend" :
			strerror((int)-ret));
		if (ret == -ESTALE && f->on_stale)
			f->on_stale(f->stale_arg, ce->fid);
		/* settle the chunk first: a new reader must start afresh */
		cache_lock(f->c);
		ready = wake_locked(in, EIO);
		inflight_unlink_locked(in, false);
		cache_unlock(f->c);
		finish_all(f, ready);
		inflight_free(f, in, false);
		return;
	}
	stat_inc(f->st, backend_reads);
	stat_add(f->st, bytes_from_backend, ret);
	in->cb->len = ret;
	/* zero the O_DIRECT padding so the cache file holds no garbage */
	memset(in->cb->data + ret, 0, ((ret + 4095) & ~4095L) - ret);
	sum = hash64(in->cb->data, ret, 0);

	cache_lock(f->c);
	in->ready = true;
	if (in->waiters)
		set_hot_locked(ce, in->n, in->cb);
	ready = wake_locked(in, 0);
	cache_unlock(f->c);
	finish_all(f, ready);		/* answer first, persist after */

	stored = cache_store_chunk(f->c, ce, in->n, in->cb, sum,
				   in->prefetch) == 0;
	cache_lock(f->c);
	inflight_unlink_locked(in, stored);
	if (stored && in->prefetch && !ce->opens)
		ce->pn->prefetched = true;
	/* read ahead for an open file but not kept: keep it for its reader */
	if (!stored && ce->opens && !ce->stale)
		set_hot_locked(ce, in->n, in->cb);
	cache_unlock(f->c);
	inflight_free(f, in, stored);
}

static void *completion_main(void *arg)
{
	struct fetcher *f = arg;

	pthread_mutex_lock(&f->qlock);
	for (;;) {
		struct inflight *in, **pp;
		int64_t now = now_ms(), next_due = INT64_MAX;

		/* move due retries back to the backend */
		for (pp = &f->retry; (in = *pp);) {
			if (in->due_ms <= now) {
				*pp = in->qnext;
				pthread_mutex_unlock(&f->qlock);
				submit(f, in);
				pthread_mutex_lock(&f->qlock);
				pp = &f->retry;	/* list may have changed */
				continue;
			}
			next_due = MIN(next_due, in->due_ms);
			pp = &in->qnext;
		}
		in = f->qhead;
		if (in) {
			f->qhead = in->qnext;
			if (!f->qhead)
				f->qtail = NULL;
			pthread_mutex_unlock(&f->qlock);
			complete(f, in);
			pthread_mutex_lock(&f->qlock);
			continue;
		}
		if (f->stop && !f->retry)
			break;
		if (next_due == INT64_MAX) {
			pthread_cond_wait(&f->qcond, &f->qlock);
		} else {
			struct timespec ts;
			int64_t wait = next_due - now;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += wait / 1000;
			ts.tv_nsec += (wait % 1000) * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&f->qcond, &f->qlock, &ts);
		}
	}
	pthread_mutex_unlock(&f->qlock);
	return NULL;
}

int fetch_create(struct fetcher **out, struct cache *c, struct backend *be,
		 const struct fusefs_conf *cf, struct stats *st)
{
	struct fetcher *f = calloc(1, sizeof(*f));
	int i, rc;

	if (!f)
		return -ENOMEM;
	pthread_once(&tl_once, tl_init);
	f->c = c;
	f->be = be;
	f->st = st;
	f->cs = cache_chunk_size(c);
	f->readahead = cf->readahead;
	f->max_inflight = cf->max_inflight;
	f->retries = cf->retries;
	f->mode = cf->read_mode;
	pthread_mutex_init(&f->qlock, NULL);
	pthread_cond_init(&f->qcond, NULL);
	for (i = 0; i < COMPLETION_THREADS; i++) {
		rc = -pthread_create(&f->threads[i], NULL, completion_main, f);
		if (rc) {
			fetch_destroy(f);
			return rc;
		}
	}
	*out = f;
	return 0;
}

void fetch_destroy(struct fetcher *f)
{
	int i;

	if (!f)
		return;
	/* reads in flight complete (bounded by the op timeout) */
	while (atomic_load(&f->inflight)) {
		struct timespec d = { 0, 10 * 1000000L };

		nanosleep(&d, NULL);
	}
	pthread_mutex_lock(&f->qlock);
	f->stop = true;
	pthread_cond_broadcast(&f->qcond);
	pthread_mutex_unlock(&f->qlock);
	for (i = 0; i < COMPLETION_THREADS; i++)
		if (f->threads[i])
			pthread_join(f->threads[i], NULL);
	free(f);
}

int fetch_prefetch(struct fetcher *f, struct centry *ce, uint32_t n)
{
	struct inflight *in;

	if (atomic_load(&f->prefetching) >= MAX(1U, f->max_inflight / 2) ||
	    atomic_load(&f->inflight) >= f->max_inflight)
		return -EBUSY;
	cache_lock(f->c);
	if (n >= ce->nchunks || ce->stale || ce->state[n] != CH_ABSENT ||
	    mem_chunk_locked(ce, n)) {
		cache_unlock(f->c);
		return 0;
	}
	in = start_locked(f, ce, n);
	if (in) {
		in->prefetch = true;
		atomic_fetch_add(&f->prefetching, 1);
	}
	cache_unlock(f->c);
	if (!in)
		return -ENOMEM;
	stat_inc(f->st, prefetch_chunks);
	submit(f, in);
	return 1;
}

unsigned fetch_prefetching(struct fetcher *f)
{
	return atomic_load(&f->prefetching);
}

void fetch_on_prefetch_done(struct fetcher *f,
			    void (*fn)(void *arg, bool stored), void *arg)
{
	f->on_prefetch = fn;
	f->prefetch_arg = arg;
}

void fetch_on_stale(struct fetcher *f, void (*fn)(void *arg, uint64_t fid),
		    void *arg)
{
	f->on_stale = fn;
	f->stale_arg = arg;
}
