// SPDX-License-Identifier: MIT
/* fetch.c - see fetch.h */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bgthread.h"
#include "fetch.h"
#include "hash.h"
#include "htab.h"
#include "linkrate.h"
#include "log.h"
#include "strsafe.h"
#include "membudget.h"
#include "memchunk.h"
#include "stageset.h"
#include "testhook.h"

#define COMPLETION_THREADS	2
#define BACKOFF_MS		100
#define BACKOFF_MAX_MS		2000
#define SEQ_SLOTS		1024	/* sequential-read state, by file */
#define MAX_READ_CHUNKS		8	/* reads are <= 1 MiB, chunks >= 1 MiB */
/*
 * A chunk whose backend read failed after every retry, with a reader
 * waiting for it, is answered EIO at once for as long as its attempts
 * took, at most FAILED_MS: the kernel follows a failed READ at once with
 * a READ of the page it needs, which would wait the whole bound again.
 * Failed read-ahead and prefetch (nobody waiting) are not remembered: a
 * reader still tries them.
 */
#define FAILED_SLOTS		64
#define FAILED_MS		0	/* off: see docs/reliability.md */

struct preq;

struct waiter {
	struct preq *pr;
	struct waiter *next;
};

/* which chunk: a file's version and a chunk number */
struct chunk_id {
	uint64_t fid, gen;
	uint32_t n;
};

/* one chunk being fetched; in f->inflight while its claim lasts */
struct inflight {
	struct fetcher *f;
	struct centry *ce;		/* busy reference held */
	struct chunk_id id;
	uint64_t key;			/* id_key(&id) */
	struct chunkbuf *cb;
	struct backend_read rd;
	ssize_t ret;
	unsigned tries;
	int64_t due_ms;			/* retry time */
	int64_t sent_us;		/* this attempt started */
	int64_t first_us;		/* the first attempt started */
	uint64_t link_mark;		/* linkrate_sent()'s, this attempt */
	bool ready;			/* cb holds the chunk */
	bool prefetch;			/* nobody asked for it yet */
	bool stage;			/* for memory only (fetch_stage()) */
	bool queued;			/* prefetch for a queued epoch's read */
	/*
	 * Only the pages [lo, lo + plen) of the chunk, for a random read
	 * (its one waiter): not in the table, no claim, not kept in memory;
	 * stored with cache_store_pages().
	 */
	bool pages;
	uint32_t lo, plen;
	uint32_t pf_bytes;		/* prefetch: counted in prefetching_bytes */
	struct inflight *pnext;		/* pages: on f->pages_flying */
	bool answered;			/* its waiters were answered */
	uint32_t st_bytes;		/* stage: counted in staging_bytes */
	struct waiter *waiters;
	struct inflight *qnext;		/* completion, retry or memory queue */
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

/* a read starting at most this far past the stream's end continues it */
#define STREAM_GAP	(1u << 20)
/*
 * A random read fetches only its pages (--random-reads pages) unless it
 * starts a file or extends a run of back-to-back reads of at least this
 * many bytes: a stream, whose chunks are fetched whole.
 */
#define RUN_WHOLE	(1u << 20)
/* a reader moves on to the next chunk as a stream only after a run of
 * back-to-back reads of at least this many bytes */
#define RUN_STREAM	(256u << 10)
/*
 * The kernel's read-ahead window (bdi.c raises it to 4 MiB): its
 * requests reach the daemon in any order, so a reader's first reads
 * anywhere in its first SEQ_WINDOW bytes start a stream (the file's
 * start), and a stream goes on while reads stay within SEQ_WINDOW of its
 * furthest end.
 */
#define SEQ_WINDOW	(4u << 20)

struct fetcher {
	struct cache *c;
	struct backend *be;
	struct stats *st;
	uint32_t cs;
	unsigned readahead, max_inflight, retries;
	bool page_reads;		/* --random-reads pages */
	enum read_mode mode;
	atomic_uint inflight;		/* backend reads outstanding */
	struct linkrate link;		/* the rate; speculative reads' bound */
	atomic_bool link_refused;	/* a prefetch waited for link room */
	atomic_uint prefetching;	/* of which prefetches (staging too) */
	_Atomic uint64_t staging_bytes;	/* of which for memory only: charges */
	uint64_t stage_limit;		/* staged + staging bytes; 0: off */
	_Atomic uint64_t prefetching_bytes;	/* their chunks' bytes on disk */
	void (*on_prefetch)(void *arg, bool stored);
	void *prefetch_arg;
	void (*on_stale)(void *arg, uint64_t fid);
	void *stale_arg;
	/* fetch_set_wanted() */
	bool (*wanted)(void *arg, uint64_t fid, uint64_t within);
	void *wanted_arg;

	/*
	 * The fetch lock: guards the in-flight table, the chunks in memory,
	 * the sequential-read state and every waiter list.  Taken before
	 * the cache lock (cache.h).  Callbacks (a read's done, on_prefetch,
	 * on_stale) run with it dropped, but for the wanted hook
	 * (fetch_set_wanted()), asked under it, which takes only the lists
	 * lock.
	 */
	pthread_mutex_t lock;
	struct htab tab;		/* chunk_key -> inflight */
	struct memchunks mem;
	struct stageset staged;		/* fetch_stage(): until the last close */
	struct fetch_stream seq[SEQ_SLOTS];	/* readers without their own */
	/* demand reads waiting for the memory budget (no buffer, not sent) */
	struct inflight *mwhead, *mwtail;
	unsigned nmemwait;
	/* reads of pages in flight (a random read's, a listed range's):
	 * a reader of the same pages waits for one, a range prefetch does
	 * not fetch them again */
	struct inflight *pages_flying;

	/* chunks that failed lately: id_key, until when (ms); a ring */
	struct {
		uint64_t key;
		int64_t until_ms;
	} failed[FAILED_SLOTS];
	unsigned failed_next;
	int64_t failed_ms;		/* FAILED_MS; tests set it */

	struct membudget *mb;		/* --memory-limit; its lock is a leaf */
	pthread_mutex_t verify_lock;	/* one verification past the budget */

	pthread_mutex_t qlock;		/* guards the queues; a leaf lock */
	struct inflight *qhead, *qtail;	/* completed reads */
	struct inflight *retry;		/* waiting for due_ms */
	unsigned wake_next;
	struct bgthread *threads[COMPLETION_THREADS];
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

/* the fields, never the struct's bytes: padding is not copied reliably */
static uint64_t id_key(const struct chunk_id *id)
{
	const uint64_t v[3] = { id->fid, id->gen, id->n };

	return hash64(v, sizeof(v), 0x6368756e6bULL);
}

static uint64_t inflight_key(const void *item)
{
	return ((const struct inflight *)item)->key;
}

static struct chunk_id chunk_of(const struct cache_ident *ci, uint32_t n)
{
	return (struct chunk_id){ .fid = ci->fid, .gen = ci->gen, .n = n };
}

/* the bytes @in reads: its chunk, or its pages */
static uint32_t in_len(const struct fetcher *f, const struct inflight *in)
{
	return in->pages ? in->plen : cache_chunk_len(f->c, in->ce, in->id.n);
}

static struct inflight *inflight_find_locked(struct fetcher *f,
					     const struct chunk_id *id)
{
	struct inflight *in = htab_get(&f->tab, id_key(id));

	if (in && in->id.fid == id->fid && in->id.gen == id->gen &&
	    in->id.n == id->n)
		return in;
	return NULL;
}

/* did a read of chunk @key fail after all its retries lately? */
static bool failed_lately_locked(struct fetcher *f, uint64_t key)
{
	int64_t now = bg_mono_ms();
	unsigned i;

	for (i = 0; i < FAILED_SLOTS; i++)
		if (f->failed[i].key == key && f->failed[i].until_ms > now)
			return true;
	return false;
}

/* for as long as its attempts took, at most failed_ms: a fast failure
 * (refused connection) is soon tried again, a slow one (timeouts) is not
 * waited for twice in a row */
static void note_failed_locked(struct fetcher *f, uint64_t key,
			       int64_t took_ms)
{
	f->failed[f->failed_next].key = key;
	f->failed[f->failed_next].until_ms = bg_mono_ms() +
					     MIN(took_ms, f->failed_ms);
	f->failed_next = (f->failed_next + 1) % FAILED_SLOTS;
}

/* the bytes of chunk @id available in memory, or NULL */
static struct chunkbuf *mem_chunk_locked(struct fetcher *f,
					 const struct chunk_id *id)
{
	struct chunkbuf *cb = memchunks_get(&f->mem, id->fid, id->gen, id->n);
	struct inflight *in;

	if (!cb)
		cb = stageset_get(&f->staged, id->fid, id->gen, id->n);
	if (cb)
		return cb;
	in = inflight_find_locked(f, id);
	return in && in->ready ? in->cb : NULL;
}

/* is chunk @id in memory or on its way (a look: no use counted) */
static bool mem_has_locked(struct fetcher *f, const struct chunk_id *id)
{
	struct inflight *in;

	if (memchunks_has(&f->mem, id->fid, id->gen, id->n) ||
	    stageset_has(&f->staged, id->fid, id->gen, id->n))
		return true;
	in = inflight_find_locked(f, id);
	return in && in->ready;
}

/*
 * Charge one chunk buffer to @cls; for demand, chunks kept in memory that
 * nobody holds go first.  A refused demand charge makes the budget call
 * memory_freed() at its next give.
 */
static bool charge_locked(struct fetcher *f, enum mb_class cls, uint32_t size)
{
	uint64_t need = chunkbuf_charge(size);

	if (membudget_try(f->mb, cls, need))
		return true;
	while (cls == MB_DEMAND && memchunks_reclaim(&f->mem))
		if (membudget_try(f->mb, cls, need))
			return true;
	return false;
}

/* a buffer of @size bytes charged to @cls, or NULL (no budget: *@nobudget) */
static struct chunkbuf *chunk_alloc_locked(struct fetcher *f,
					   enum mb_class cls, uint32_t size,
					   bool *nobudget)
{
	*nobudget = !charge_locked(f, cls, size);
	if (*nobudget)
		return NULL;
	return chunkbuf_new_charged(size, f->mb, cls);
}

/*
 * Start fetching claimed chunk @id of @ce for @cls into a buffer of the
 * chunk's own length (a file's last chunk, or a small file, takes no more
 * than it holds), or with @plen > 0 only its pages [@lo, @lo + @plen)
 * (not claimed, not in the table); submitted
 * by the caller if it has a buffer.  A demand read the budget cannot hold
 * now is queued without one (memwait_run() sends it later), and may be
 * waited on as any other.  Return: 0 (*@out set), -EBUSY (read-ahead or
 * prefetch: no budget), -ENOMEM.
 */
static int start_locked(struct fetcher *f, struct centry *ce,
			const struct chunk_id *id, enum mb_class cls,
			uint32_t lo, uint32_t plen, struct inflight **out)
{
	struct inflight *in = calloc(1, sizeof(*in));
	uint32_t size = plen ? plen : cache_chunk_len(f->c, ce, id->n);
	bool nobudget = false;

	if (!in)
		return -ENOMEM;
	if (!f->mwhead)			/* first come, first served */
		in->cb = chunk_alloc_locked(f, cls, size, &nobudget);
	else
		nobudget = true;
	if (nobudget && cls != MB_DEMAND) {
		free(in);
		return -EBUSY;
	}
	in->f = f;
	in->ce = ce;
	in->id = *id;
	in->key = id_key(id);
	in->pages = plen > 0;
	in->lo = lo;
	in->plen = plen;
	if (!in->pages && htab_get(&f->tab, in->key)) {
		/* never two fetches of one chunk: the table holds one each */
		log_err("chunk %u of file %016llx: already being fetched",
			id->n, (unsigned long long)id->fid);
		chunkbuf_put(in->cb);
		free(in);
		return -ENOMEM;
	}
	if ((!in->cb && !nobudget) || (!in->pages && htab_put(&f->tab, in))) {
		chunkbuf_put(in->cb);
		free(in);
		return -ENOMEM;
	}
	if (in->pages) {
		in->pnext = f->pages_flying;
		f->pages_flying = in;
	}
	if (nobudget) {
		if (f->mwtail)
			f->mwtail->qnext = in;
		else
			f->mwhead = in;
		f->mwtail = in;
		f->nmemwait++;
	}
	cache_busy_get(f->c, ce);
	atomic_fetch_add(&f->inflight, 1);
	*out = in;
	return 0;
}

static void backend_done(struct backend_read *rd, ssize_t ret);

static void complete_push(struct fetcher *f, struct inflight *in)
{
	unsigned t;

	pthread_mutex_lock(&f->qlock);
	in->qnext = NULL;
	if (f->qtail)
		f->qtail->qnext = in;
	else
		f->qhead = in;
	f->qtail = in;
	t = f->wake_next++ % COMPLETION_THREADS;
	pthread_mutex_unlock(&f->qlock);
	bgthread_wake(f->threads[t]);
}

static void submit(struct fetcher *f, struct inflight *in)
{
	struct cache_ident ci;
	int rc;

	cache_ident(in->ce, &ci);
	in->rd.key = ci.key;
	in->rd.version = ci.version;
	in->rd.off = (uint64_t)in->id.n * f->cs + in->lo;
	in->rd.len = in_len(f, in);
	in->rd.buf = in->cb->data;
	in->rd.done = backend_done;
	in->sent_us = now_us();
	if (!in->tries)
		in->first_us = in->sent_us;
	in->link_mark = linkrate_sent(&f->link, in->rd.len, in->sent_us);
	rc = f->be->ops->read(f->be, &in->rd);
	if (rc < 0) {
		in->ret = rc;
		linkrate_done(&f->link, in->link_mark, in->sent_us,
			      in->rd.len, 0, now_us());
		complete_push(f, in);
	}
}

static void submit_all(struct fetcher *f, struct inflight **start, int n)
{
	int i;

	for (i = 0; i < n; i++)
		submit(f, start[i]);
}

/* the rate and the bound as the stats show them */
static void link_gauges(struct fetcher *f)
{
	uint64_t rate, bound;

	linkrate_read(&f->link, &rate, &bound);
	atomic_store_explicit(&f->st->backend_rate_bytes, rate,
			      memory_order_relaxed);
	atomic_store_explicit(&f->st->ahead_bound_bytes, bound,
			      memory_order_relaxed);
}

static void backend_done(struct backend_read *rd, ssize_t ret)
{
	struct inflight *in = container_of(rd, struct inflight, rd);

	in->ret = ret;
	linkrate_done(&in->f->link, in->link_mark, in->sent_us, rd->len,
		      ret > 0 ? (uint64_t)ret : 0, now_us());
	link_gauges(in->f);
	complete_push(in->f, in);
}

/* the bytes of reads claimed in @start, not sent yet */
static uint64_t pending_bytes(struct fetcher *f, struct inflight **start,
			      int n)
{
	uint64_t sum = 0;
	int i;

	for (i = 0; i < n; i++)
		sum += in_len(f, start[i]);
	return sum;
}

/*
 * The read-ahead window of a stream that moved on chunk by chunk @streak
 * times: none until it has (reads within one chunk, a header and then
 * its body, are no stream), then 2, 4, 8, ... up to --readahead chunks.
 */
static uint32_t ramp(unsigned readahead, uint32_t streak)
{
	if (!streak)
		return 0;
	return streak > 6 ? readahead : MIN(readahead, 1u << streak);
}

/*
 * The run of back-to-back reads slot @s has after a read of [@off, @end):
 * one that reaches past the furthest end from at or before it extends
 * it, one inside it (the kernel's requests overtake each other) keeps
 * it, any other starts a new one.
 */
static uint64_t run_after(const struct fetch_stream *s, uint64_t off,
			  uint64_t end)
{
	if (off <= s->end && end > s->end)
		return s->run + (end - s->end);
	if (end <= s->end && off + s->run >= s->end)
		return s->run;
	return end - off;
}

/*
 * Does a read starting at @off, in chunk @first, move a stream on: the
 * chunk after the furthest one read, at most STREAM_GAP past the
 * furthest end, after a run of RUN_STREAM bytes (a random reader landing
 * there by chance, or a record's header and body, are no stream)?
 */
static bool moves_on(const struct fetch_stream *s, uint32_t first, uint64_t off)
{
	return first == s->next && first > 0 && off <= s->end + STREAM_GAP &&
	       s->run >= RUN_STREAM;
}

/* is @s a reader of @ci that has read nothing yet */
static bool fresh(const struct fetch_stream *s, const struct cache_ident *ci)
{
	return s->fid != ci->fid || s->gen != ci->gen;
}

/* is a read at @off within a stream's reach (SEQ_WINDOW either side of
 * its furthest end) */
static bool near_end(const struct fetch_stream *s, uint64_t off)
{
	return off + SEQ_WINDOW >= s->end && off <= s->end + SEQ_WINDOW;
}

/*
 * Should a read of [@off, @end) of @ci fetch only the pages it needs
 * (--random-reads pages)?  Not at a file's start (a reader's first reads
 * within SEQ_WINDOW of it), nor near the end of a stream (one that began
 * there, ran RUN_WHOLE bytes back to back, or moved on chunk by chunk),
 * nor a read that makes a stream: those read on, their chunks are
 * fetched whole.
 */
static bool page_read_locked(const struct fetcher *f,
			     const struct fetch_stream *s,
			     const struct cache_ident *ci, uint64_t off,
			     uint64_t end)
{
	uint32_t first = off / f->cs;

	bool sampled = atomic_load_explicit(&s->sampled, memory_order_relaxed);

	if (!f->page_reads || (off == 0 && !sampled))
		return false;
	if (fresh(s, ci))
		return off >= SEQ_WINDOW || sampled;
	if (s->seq && near_end(s, off))
		return false;
	/* what readahead_locked() will take for a stream */
	if (s->streak || moves_on(s, first, off))
		return false;
	return run_after(s, off, end) < RUN_WHOLE;
}

/*
 * Queue read-ahead of the chunks after @last for a sequential reader of
 * [@off, @end).  A read that starts in the chunk after the furthest one
 * a read of the file ended in, at most STREAM_GAP past where that read
 * ended, extends its stream; one that starts in that chunk or the one
 * before (the kernel's requests of a stream overtake each other) keeps
 * it; any other begins a new one.
 */
static int readahead_locked(struct fetcher *f, struct fetch_stream *s,
			    struct centry *ce, const struct cache_ident *ci,
			    uint64_t off, uint64_t end, struct inflight **start,
			    int nstart, int max)
{
	uint32_t first = off / f->cs, last = (end - 1) / f->cs;
	uint32_t n, window;

	if (fresh(s, ci)) {
		s->fid = ci->fid;
		s->gen = ci->gen;
		s->next = 0;
		s->streak = 0;
		s->end = 0;
		s->run = 0;
		s->seq = off < SEQ_WINDOW &&
			 !atomic_load_explicit(&s->sampled, memory_order_relaxed);
	} else if (!near_end(s, off)) {
		s->seq = false;
	}
	if (moves_on(s, first, off)) {
		s->streak++;
	} else if (first >= s->next || first + 2 < s->next) {
		s->streak = 0;		/* a jump: a new stream */
		s->next = 0;
		s->end = 0;
		s->run = 0;
	}
	s->run = run_after(s, off, end);
	s->next = MAX(s->next, last + 1);
	s->end = MAX(s->end, end);
	if (s->streak || s->run >= RUN_WHOLE ||
	    (off == 0 && !atomic_load_explicit(&s->sampled, memory_order_relaxed)))
		s->seq = true;
	window = ramp(f->readahead, s->streak);
	for (n = last + 1; n <= last + window && n < ci->nchunks &&
	     nstart < max; n++) {
		struct chunk_id id = chunk_of(ci, n);
		struct inflight *in;

		if (mem_has_locked(f, &id))
			continue;
		if (atomic_load(&f->inflight) >= f->max_inflight ||
		    !linkrate_room(&f->link, pending_bytes(f, start, nstart),
				   cache_chunk_len(f->c, ce, n)))
			break;
		if (failed_lately_locked(f, id_key(&id)))
			continue;
		if (cache_claim(f->c, ce, n) != CH_ABSENT)
			continue;
		if (start_locked(f, ce, &id, MB_AHEAD, 0, 0, &in)) {
			cache_abandon(f->c, ce, n);
			break;		/* no memory for more: skipped */
		}
		stat_inc(f->st, readahead_chunks);
		start[nstart++] = in;
	}
	return nstart;
}

/* answer a read from memory buffers and the cache file; drops @bufs */
static void serve(struct fetcher *f, struct centry *ce, uint64_t off,
		  size_t len, uint32_t n0, uint32_t nn,
		  struct chunkbuf **bufs, fetch_done_fn done, void *arg)
{
	struct fetch_piece p[MAX_READ_CHUNKS];
	uint64_t pos = off, end = off + len, disk = 0;
	uint32_t i;
	int np = 0, err = 0;

	for (i = 0; i < nn && np < (int)ARRAY_SIZE(p); i++) {
		uint64_t cstart = (uint64_t)(n0 + i) * f->cs;
		uint64_t pend = MIN(end, cstart + f->cs);

		if (bufs[i]) {
			p[np++] = (struct fetch_piece){
				.mem = bufs[i]->data +
				       (pos - cstart - bufs[i]->base),
				.len = pend - pos };
		} else if (np && !p[np - 1].mem &&
			   p[np - 1].off + p[np - 1].len == pos) {
			p[np - 1].len += pend - pos;	/* adjacent disk range */
			disk += pend - pos;
		} else {
			p[np++] = (struct fetch_piece){
				.fd = cache_read_fd(ce), .off = pos,
				.len = pend - pos };
			disk += pend - pos;
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
			err = buf ? cache_pread(f->c, ce, p[i].off, p[i].len,
						buf, &at) : -ENOMEM;
			if (err)
				break;
			p[i].mem = at;
			buf += ((p[i].len + 4095) & ~4095UL) + 8192;
		}
	}
	/* before the reply: once it is sent, a RELEASE may free @ce */
	cache_read_done(ce);
	if (err) {
		stat_inc(f->st, read_errors);
		done(arg, err, NULL, 0);
	} else {
		stat_add(f->st, bytes_from_cache, len);
		stat_add(f->st, bytes_from_disk, disk);
		done(arg, 0, p, np);
	}
	for (i = 0; i < nn; i++)
		chunkbuf_put(bufs[i]);
}

static void preq_finish(struct fetcher *f, struct preq *pr)
{
	uint32_t i;

	stat_add(f->st, stall_us, now_us() - pr->parked_us);
	if (pr->err) {
		stat_inc(f->st, read_errors);
		pr->done(pr->arg, pr->err, NULL, 0);
		for (i = 0; i < pr->nn; i++)
			chunkbuf_put(pr->bufs[i]);
	} else {
		serve(f, pr->ce, pr->off, pr->len, pr->n0, pr->nn, pr->bufs,
		      pr->done, pr->arg);
	}
	cache_busy_put(f->c, pr->ce);
	free(pr);
}

/*
 * Verify the first UNVERIFIED chunk of @n0..@n1, if any: once none is
 * left, none comes back (a chunk is UNVERIFIED only after a restart).
 * Return: 1 one was looked at (look again), 0 none, -errno.
 */
static int verify_one(struct fetcher *f, struct centry *ce,
		      const struct cache_ident *ci, uint32_t n0, uint32_t n1)
{
	struct chunkbuf *cb;
	uint32_t n, size;
	int rc;
	bool forced;

	rc = cache_first_unverified(f->c, ce, n0, n1, &n);
	if (rc <= 0)
		return rc;
	/* the chunk's own length: a small file's chunk is small */
	size = (uint32_t)chunkbuf_charge(cache_chunk_len(f->c, ce, n));
	pthread_mutex_lock(&f->lock);
	forced = !charge_locked(f, MB_DEMAND, size);
	pthread_mutex_unlock(&f->lock);
	if (forced) {
		/* a reader waits on this thread: verify with one chunk past
		 * the budget, one verification at a time */
		pthread_mutex_lock(&f->verify_lock);
		membudget_force(f->mb, MB_DEMAND, chunkbuf_charge(size));
	}
	cb = chunkbuf_new_charged(size, f->mb, MB_DEMAND);
	rc = cb ? cache_verify_chunk(f->c, ce, n, cb) : -ENOMEM;
	if (rc == 0) {
		pthread_mutex_lock(&f->lock);
		memchunks_put(&f->mem, ci->fid, ci->gen, n, cb);
		pthread_mutex_unlock(&f->lock);
	}
	chunkbuf_put(cb);
	if (forced)
		pthread_mutex_unlock(&f->verify_lock);
	return rc == 0 || rc == -EBADMSG || rc == -EAGAIN ? 1 : rc;
}

/* park @pr (created on first use) on @in */
static int wait_on_locked(struct fetcher *f, struct preq **prp,
			  struct inflight *in, const struct preq *proto,
			  uint32_t nn)
{
	struct waiter *w;
	struct preq *pr = *prp;

	if (!pr) {
		pr = calloc(1, sizeof(*pr) + nn * sizeof(pr->bufs[0]));
		if (!pr)
			return -ENOMEM;
		memcpy(pr, proto, sizeof(*pr));
		pr->parked_us = now_us();
		*prp = pr;
	}
	w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->pr = pr;
	w->next = in->waiters;
	in->waiters = w;
	pr->nwait++;
	stat_inc(f->st, misses);
	return 0;
}

/*
 * Chunks @n0..@n1 of a read: those in memory into @bufs (bit i of the
 * return value: chunk @n0 + i), the others planned by cache_read_plan()
 * under the same take of the fetch lock, which is left held unless the
 * plan says 1 (an earlier run's chunk to verify first) or fails.
 * Return: the memory mask; *@rc the plan's answer.
 */
static uint32_t plan_locked(struct fetcher *f, struct fetch_stream *s,
			    struct centry *ce, const struct cache_ident *ci,
			    uint64_t off, uint32_t n0, uint32_t n1, size_t len,
			    struct chunkbuf **bufs, int *st, int *rc)
{
	uint32_t n, i, skip = 0;
	bool pages;

	pthread_mutex_lock(&f->lock);
	pages = page_read_locked(f, s, ci, off, off + len);
	for (n = n0, i = 0; n <= n1; n++, i++) {
		struct chunk_id id = chunk_of(ci, n);
		struct chunkbuf *cb = mem_chunk_locked(f, &id);

		if (cb) {
			bufs[i] = chunkbuf_get(cb);
			skip |= 1u << i;
		}
	}
	*rc = cache_read_plan(f->c, ce, n0, n1, skip, off, len, pages, st);
	if (*rc) {
		pthread_mutex_unlock(&f->lock);
		for (i = 0; i <= n1 - n0; i++) {
			chunkbuf_put(bufs[i]);
			bufs[i] = NULL;
		}
	}
	return skip;
}

/* start fetching the pages of chunk @n that a read of [@off, @off +
 * @len) needs (the plan said CH_PAGES) */
static int start_pages_locked(struct fetcher *f, struct centry *ce,
			      const struct cache_ident *ci, uint32_t n,
			      uint64_t off, size_t len, struct inflight **in)
{
	struct chunk_id id = chunk_of(ci, n);
	uint32_t lo, hi;

	cache_page_span(f->cs, cache_chunk_len(f->c, ce, n), n, off, len,
			&lo, &hi);
	return start_locked(f, ce, &id, MB_DEMAND, lo, hi - lo, in);
}

/*
 * The page reads of chunk @id in flight that meet [@lo, @hi) of it
 * (read, or being stored: not to be fetched again); with @all, only one
 * that holds all of them and whose waiters were not answered yet (a
 * reader to park on it: one parked on a read that answered its waiters
 * would wait for good).
 */
static struct inflight *page_read_find_locked(struct fetcher *f,
					     const struct chunk_id *id,
					     uint32_t lo, uint32_t hi, bool all)
{
	struct inflight *in;

	for (in = f->pages_flying; in; in = in->pnext) {
		if (in->key != id_key(id) || in->id.fid != id->fid ||
		    in->id.gen != id->gen || in->id.n != id->n ||
		    (all && in->answered))
			continue;
		if (all ? in->lo <= lo && in->lo + in->plen >= hi :
			  in->lo < hi && in->lo + in->plen > lo)
			return in;
	}
	return NULL;
}

/* @in off the list, if on it */
static void page_read_unlink_locked(struct fetcher *f, struct inflight *in)
{
	struct inflight **pp;

	for (pp = &f->pages_flying; *pp; pp = &(*pp)->pnext)
		if (*pp == in) {
			*pp = in->pnext;
			break;
		}
}

int fetch_read(struct fetcher *f, struct centry *ce, uint64_t off,
	       size_t size, fetch_done_fn done, void *arg)
{
	return fetch_read_as(f, ce, NULL, off, size, done, arg);
}

int fetch_read_as(struct fetcher *f, struct centry *ce,
		  struct fetch_stream *s, uint64_t off, size_t size,
		  fetch_done_fn done, void *arg)
{
	struct chunkbuf *bufs[MAX_READ_CHUNKS] = { NULL };
	struct inflight *start[MAX_READ_CHUNKS + 64];
	int st[MAX_READ_CHUNKS];
	struct preq *pr = NULL, proto;
	struct cache_ident ci;
	uint32_t n0, n1, nn, n, i, skip, claimed = 0;
	int nstart = 0, tries = 0, rc;
	bool parked, memwait = false;
	size_t len;

	stat_inc(f->st, reads);
	cache_ident(ce, &ci);
	if (off >= ci.size || !size) {
		done(arg, 0, NULL, 0);
		return 0;
	}
	len = MIN((uint64_t)size, ci.size - off);
	n0 = off / f->cs;
	n1 = (off + len - 1) / f->cs;
	nn = n1 - n0 + 1;
	if (nn > MAX_READ_CHUNKS || n1 >= ci.nchunks)
		return -EINVAL;
	/* chunks from an earlier run are checked before anything is served */
	if (!s)
		s = &f->seq[ci.fid % SEQ_SLOTS];
	while ((skip = plan_locked(f, s, ce, &ci, off, n0, n1, len, bufs, st,
				   &rc)),
	       rc == 1) {
		if (++tries > 16)
			return -EIO;
		rc = verify_one(f, ce, &ci, n0, n1);
		if (rc < 0)
			return rc;
	}
	if (rc)
		return rc;	/* -ESTALE: replaced, no bytes of it any more */
	/* the fetch lock is held, and a busy reference on @ce: an open
	 * file's chunks may be evicted, but not these until served */
	for (i = 0; i < nn; i++)
		if (!(skip >> i & 1) && st[i] == CH_ABSENT)
			claimed |= 1u << i;

	memset(&proto, 0, sizeof(proto));
	proto.done = done;
	proto.arg = arg;
	proto.ce = ce;
	proto.off = off;
	proto.len = len;
	proto.n0 = n0;
	proto.nn = nn;
	for (n = n0, i = 0; n <= n1 && !rc; n++, i++) {
		struct chunk_id id = chunk_of(&ci, n);
		struct inflight *in;

		if (skip >> i & 1 || st[i] == CH_PRESENT)
			continue;
		if (st[i] == CH_UNVERIFIED) {
			rc = -EIO;	/* cannot happen: the plan said none */
			break;
		}
		if (st[i] == CH_PAGES) {
			uint32_t lo, hi;

			cache_page_span(f->cs, cache_chunk_len(f->c, ce, n), n,
					off, len, &lo, &hi);
			in = page_read_find_locked(f, &id, lo, hi, true);
			if (in) {	/* another reader's, or a range's */
				rc = wait_on_locked(f, &pr, in, &proto, nn);
				continue;
			}
			rc = start_pages_locked(f, ce, &ci, n, off, len, &in);
			if (rc)
				break;
			if (in->cb)
				start[nstart++] = in;
			else
				memwait = true;
			rc = wait_on_locked(f, &pr, in, &proto, nn);
			continue;
		}
		in = inflight_find_locked(f, &id);
		if (st[i] == CH_ABSENT) {
			if (failed_lately_locked(f, id_key(&id))) {
				rc = -EIO;	/* its last read failed just now */
				break;
			}
			rc = start_locked(f, ce, &id, MB_DEMAND, 0, 0, &in);
			if (rc)
				break;
			claimed &= ~(1u << i);	/* the fetch ends the claim */
			if (in->cb)
				start[nstart++] = in;
			else
				memwait = true;
		}
		if (!in) {
			rc = -EIO;	/* FETCHING without a fetch: a bug */
			log_err("chunk %u of '%s' is claimed but not fetched",
				n, str_log(ci.key));
			break;
		}
		rc = wait_on_locked(f, &pr, in, &proto, nn);
	}
	/* claims an error left unstarted: ABSENT again */
	for (i = 0; i < nn; i++)
		if (claimed >> i & 1)
			cache_abandon(f->c, ce, n0 + i);
	if (!rc)
		nstart = readahead_locked(f, s, ce, &ci, off, off + len, start,
					  nstart, ARRAY_SIZE(start));
	if (pr) {
		memcpy(pr->bufs, bufs, nn * sizeof(bufs[0]));
		if (rc)
			pr->err = rc == -ESTALE ? rc : -EIO;
	}
	parked = pr && pr->nwait;	/* pr is not ours once unlocked */
	pthread_mutex_unlock(&f->lock);
	submit_all(f, start, nstart);
	if (memwait)
		bgthread_wake(f->threads[0]);	/* memwait_run() */

	if (parked)
		return 0;	/* answered when the chunks arrive; the parked
				 * request holds the busy reference */
	if (pr) {		/* nobody waits: undo */
		free(pr);
	} else if (!rc) {
		stat_inc(f->st, hits);
		serve(f, ce, off, len, n0, nn, bufs, done, arg);
		cache_busy_put(f->c, ce);
		return 0;
	}
	for (i = 0; i < nn; i++)
		chunkbuf_put(bufs[i]);
	cache_busy_put(f->c, ce);
	return rc;
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
			pr->bufs[in->id.n - pr->n0] = chunkbuf_get(in->cb);
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

static void inflight_free(struct fetcher *f, struct inflight *in, bool stored)
{
	if (in->pages) {
		pthread_mutex_lock(&f->lock);
		page_read_unlink_locked(f, in);
		pthread_mutex_unlock(&f->lock);
	}
	if (in->stage)
		atomic_fetch_sub(&f->staging_bytes, in->st_bytes);
	if (in->prefetch) {
		atomic_fetch_sub(&f->prefetching, 1);
		atomic_fetch_sub(&f->prefetching_bytes, in->pf_bytes);
		if (f->on_prefetch)
			f->on_prefetch(f->prefetch_arg, stored);
	}
	chunkbuf_put(in->cb);
	cache_busy_put(f->c, in->ce);
	atomic_fetch_sub(&f->inflight, 1);
	free(in);
}

/* back to the backend after a delay */
static void retry_later(struct fetcher *f, struct inflight *in, ssize_t ret,
			const char *key)
{
	int64_t delay = MIN((int64_t)BACKOFF_MS << in->tries, BACKOFF_MAX_MS);

	in->tries++;
	stat_inc(f->st, backend_retries);
	log_warn("reading '%s' chunk %u: %s, retry %u in %lld ms",
		 str_log(key), in->id.n, strerror((int)-ret), in->tries, (long long)delay);
	in->due_ms = bg_mono_ms() + delay;
	pthread_mutex_lock(&f->qlock);
	in->qnext = f->retry;
	f->retry = in;
	pthread_mutex_unlock(&f->qlock);
}

/* a random read's pages arrived: answer its reader, then store them */
static void complete_pages(struct fetcher *f, struct inflight *in)
{
	struct preq *ready;
	int rc;

	stat_inc(f->st, page_reads);
	in->cb->base = in->lo;
	pthread_mutex_lock(&f->lock);
	in->ready = true;
	in->answered = true;
	ready = wake_locked(in, 0);
	pthread_mutex_unlock(&f->lock);
	finish_all(f, ready);		/* answer first, persist after */
	testhook_gate("pages-store");	/* tests: a reader comes meanwhile */
	rc = cache_store_pages(f->c, in->ce, in->id.n, in->lo, in->cb);
	inflight_free(f, in, rc == 0);
}

static void complete(struct fetcher *f, struct inflight *in)
{
	uint32_t want = in_len(f, in);
	struct cache_ident ci;
	ssize_t ret = in->ret;
	struct preq *ready;
	int rc = 0;
	uint64_t sum;

	cache_ident(in->ce, &ci);
	stats_note_latency(f->st, now_us() - in->sent_us);
	/* link room came back (linkrate_done() ran at the completion) */
	if (atomic_exchange(&f->link_refused, false) && f->on_prefetch)
		f->on_prefetch(f->prefetch_arg, true);
	if (ret >= 0 && (size_t)ret != want)
		ret = -ESTALE;		/* shorter than listed: it changed */
	if (ret < 0) {
		stat_inc(f->st, backend_errors);
		if (retriable(ret) && in->tries < f->retries) {
			retry_later(f, in, ret, ci.key);
			return;
		}
		log_err("reading '%s' chunk %u failed: %s", str_log(ci.key), in->id.n,
			ret == -ESTALE ? "object changed in the backend" :
			strerror((int)-ret));
		if (ret == -ESTALE && f->on_stale)
			f->on_stale(f->stale_arg, ci.fid);
		/* settle the chunk first: a new reader must start afresh
		 * (but for FAILED_MS if one waited, unless it changed) */
		pthread_mutex_lock(&f->lock);
		if (ret != -ESTALE && in->waiters && !in->pages)
			note_failed_locked(f, in->key,
					   (now_us() - in->first_us) / 1000);
		ready = wake_locked(in, -EIO);
		in->answered = true;
		if (!in->pages) {
			htab_del(&f->tab, in->key);
			cache_abandon(f->c, in->ce, in->id.n);
		}
		pthread_mutex_unlock(&f->lock);
		finish_all(f, ready);
		inflight_free(f, in, false);
		return;
	}
	stat_inc(f->st, backend_reads);
	stat_add(f->st, bytes_from_backend, ret);
	if (in->queued)
		stat_add(f->st, prefetch_queued_bytes, ret);
	in->cb->len = ret;
	/* zero the O_DIRECT padding so the cache file holds no garbage */
	memset(in->cb->data + ret, 0, ((ret + 4095) & ~4095L) - ret);
	if (in->pages) {
		complete_pages(f, in);
		return;
	}
	sum = hash64(in->cb->data, ret, 0);

	pthread_mutex_lock(&f->lock);
	in->ready = true;
	if (in->stage) {
		/* read as soon as it is here if someone waits for it */
		if (!stageset_put(&f->staged, ci.fid, ci.gen, in->id.n,
				  in->cb) && in->waiters)
			stageset_get(&f->staged, ci.fid, ci.gen, in->id.n);
		/* counted in the staged set now, no longer as staging (under
		 * the lock fetch_ahead() checks the bound under: never both) */
		atomic_fetch_sub(&f->staging_bytes, in->st_bytes);
		in->st_bytes = 0;
		/* in memory for its reader, not on disk: absent there */
		htab_del(&f->tab, in->key);
		cache_abandon(f->c, in->ce, in->id.n);
	} else {
		if (in->waiters)
			memchunks_put(&f->mem, ci.fid, ci.gen, in->id.n,
				      in->cb);
		/* the disk holds a prefix of each file (policy.h): not
		 * past a chunk that is staged in memory instead */
		rc = stageset_has_before(&f->staged, ci.fid, ci.gen,
					 in->id.n) ? -ENOSPC : 0;
	}
	ready = wake_locked(in, 0);
	pthread_mutex_unlock(&f->lock);
	finish_all(f, ready);		/* answer first, persist after */
	if (in->stage) {
		inflight_free(f, in, true);
		return;
	}

	if (!rc)
		rc = cache_store_chunk(f->c, in->ce, in->id.n, in->cb, sum,
				       in->prefetch ? ADMIT_PREFETCH :
						      ADMIT_DEMAND);
	pthread_mutex_lock(&f->lock);
	htab_del(&f->tab, in->key);
	if (rc) {
		cache_abandon(f->c, in->ce, in->id.n);
		/* read ahead for an open file, or prefetched (the policy
		 * changed its mind meanwhile), but not kept: keep it for its
		 * reader, so it is not fetched twice */
		if (in->prefetch || cache_is_open(f->c, in->ce))
			memchunks_put(&f->mem, ci.fid, ci.gen, in->id.n, in->cb);
	}
	pthread_mutex_unlock(&f->lock);
	inflight_free(f, in, rc == 0);
}

/*
 * Send the demand reads that waited for memory, first come first served,
 * as the budget allows.  When nothing in flight will give bytes back
 * (every read outstanding is one of these), the first one goes past the
 * limit: its waiters may hold the chunks that fill the budget, and only
 * their answer gives them back.  So the overdraft is one chunk at most.
 */
static void memwait_run(struct fetcher *f)
{
	struct inflight *go[16];
	int n = 0;

	pthread_mutex_lock(&f->lock);
	while (f->mwhead && n < (int)ARRAY_SIZE(go)) {
		struct inflight *in = f->mwhead;
		uint32_t size = in_len(f, in);

		if (!charge_locked(f, MB_DEMAND, size)) {
			if (atomic_load(&f->inflight) > f->nmemwait)
				break;	/* a read in flight gives back */
			membudget_force(f->mb, MB_DEMAND,
					chunkbuf_charge(size));
		}
		f->mwhead = in->qnext;
		if (!f->mwhead)
			f->mwtail = NULL;
		f->nmemwait--;
		in->qnext = NULL;
		in->cb = chunkbuf_new_charged(size, f->mb, MB_DEMAND);
		if (!in->cb) {
			in->ret = -ENOMEM;	/* answered EIO by complete() */
			complete_push(f, in);
			continue;
		}
		go[n++] = in;
	}
	pthread_mutex_unlock(&f->lock);
	submit_all(f, go, n);
}

/* the budget gave bytes back while a demand read waited */
static void memory_freed(void *arg)
{
	struct fetcher *f = arg;

	bgthread_wake(f->threads[0]);
}

/* one completion thread's tick: resubmit due retries, drain the queue */
static int64_t completion_tick(void *arg)
{
	struct fetcher *f = arg;
	int64_t now = bg_mono_ms(), next_due = INT64_MAX;
	struct inflight *in, **pp, *due = NULL;

	memwait_run(f);
	pthread_mutex_lock(&f->qlock);
	for (pp = &f->retry; (in = *pp);) {
		if (in->due_ms <= now) {
			*pp = in->qnext;
			in->qnext = due;
			due = in;
			continue;
		}
		next_due = MIN(next_due, in->due_ms);
		pp = &in->qnext;
	}
	pthread_mutex_unlock(&f->qlock);
	while ((in = due)) {
		due = in->qnext;
		submit(f, in);
	}
	for (;;) {
		pthread_mutex_lock(&f->qlock);
		in = f->qhead;
		if (in) {
			f->qhead = in->qnext;
			if (!f->qhead)
				f->qtail = NULL;
		}
		pthread_mutex_unlock(&f->qlock);
		if (!in)
			break;
		complete(f, in);
	}
	return next_due == INT64_MAX ? BG_PERIOD : MAX(1, next_due - now);
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
	f->page_reads = cf->page_reads;
	f->max_inflight = cf->max_inflight;
	f->retries = cf->retries;
	f->failed_ms = FAILED_MS;
	linkrate_init(&f->link, (uint64_t)cf->ahead_ms * 1000, f->cs);
	f->mode = cf->read_mode;
	pthread_mutex_init(&f->lock, NULL);
	pthread_mutex_init(&f->qlock, NULL);
	pthread_mutex_init(&f->verify_lock, NULL);
	htab_init(&f->tab, inflight_key);
	rc = membudget_create(&f->mb, cf->memory_limit);
	if (rc) {
		free(f);
		return rc;
	}
	/* staged chunks may take half of the budget (of read-ahead's 3/4) */
	f->stage_limit = cf->memory_limit / 2;
	stageset_init(&f->staged);
	rc = memchunks_init(&f->mem, MAX(8U, cf->max_inflight));
	if (rc) {
		membudget_destroy(f->mb);
		free(f);
		return rc;
	}
	for (i = 0; i < COMPLETION_THREADS; i++) {
		rc = bgthread_start(&f->threads[i], "fusefs-fetch", 1000,
				    completion_tick, f);
		if (rc) {
			fetch_destroy(f);
			return rc;
		}
	}
	membudget_on_free(f->mb, memory_freed, f);
	st->mem = f->mb;		/* reported with the counters */
	*out = f;
	return 0;
}

void fetch_drain(struct fetcher *f)
{
	while (atomic_load(&f->inflight)) {
		struct timespec d = { 0, 10 * 1000000L };

		nanosleep(&d, NULL);
	}
}

void fetch_destroy(struct fetcher *f)
{
	int i;

	if (!f)
		return;
	/* reads in flight complete (bounded by the op timeout and retries) */
	fetch_drain(f);
	for (i = 0; i < COMPLETION_THREADS; i++)
		bgthread_stop(f->threads[i]);
	memchunks_release(&f->mem);
	stageset_release(&f->staged);
	htab_release(&f->tab);
	if (f->st->mem == f->mb)
		f->st->mem = NULL;
	membudget_destroy(f->mb);
	linkrate_destroy(&f->link);
	pthread_mutex_destroy(&f->verify_lock);
	free(f);
}

void fetch_set_failure_memory(struct fetcher *f, unsigned ms)
{
	pthread_mutex_lock(&f->lock);
	f->failed_ms = ms;
	memset(f->failed, 0, sizeof(f->failed));
	pthread_mutex_unlock(&f->lock);
}

/*
 * Write staged chunk @n of @ce (held by the caller) to the cache as @kind,
 * if it is absent there and the policy takes it.  While it is claimed and
 * written it stays in the staged set and every drop passes it by
 * (stageset_hold()): a reader finds its bytes there (a claimed chunk with
 * no fetch in flight and no bytes in memory would be answered EIO).
 * Return: true if written (it then leaves the set).
 */
static bool write_staged(struct fetcher *f, struct centry *ce,
			 const struct cache_ident *ci, uint32_t n,
			 enum admit_kind kind)
{
	struct chunkbuf *cb;
	bool claimed = false;
	int rc = -EBUSY;

	pthread_mutex_lock(&f->lock);
	cb = stageset_hold(&f->staged, ci->fid, ci->gen, n);
	if (cb)
		claimed = cache_claim(f->c, ce, n) == CH_ABSENT;
	if (cb && !claimed)
		stageset_unhold(&f->staged, ci->fid, ci->gen, n);
	pthread_mutex_unlock(&f->lock);
	if (claimed)
		rc = cache_store_chunk(f->c, ce, n, cb,
				       hash64(cb->data, cb->len, 0), kind);
	if (claimed) {
		pthread_mutex_lock(&f->lock);
		if (rc) {
			cache_abandon(f->c, ce, n);
			stageset_unhold(&f->staged, ci->fid, ci->gen, n);
		} else {
			stageset_forget(&f->staged, ci->fid, ci->gen, n);
		}
		pthread_mutex_unlock(&f->lock);
	}
	chunkbuf_put(cb);
	if (rc)
		return false;
	stat_inc(f->st, staged_stored);
	return true;
}

/*
 * Write chunk @n of @ce (held by the caller), kept in memory after the
 * cache refused it (a prefetch whose victims were busy when it arrived),
 * to the cache as a prefetch, if it is absent there and the policy takes
 * it now.  While it is claimed and written it is held in the set (a reader
 * finds its bytes there, as write_staged() does for a staged chunk); the
 * set keeps its copy afterwards either way.  Return: true if written.
 */
static bool write_kept(struct fetcher *f, struct centry *ce,
		       const struct cache_ident *ci, uint32_t n)
{
	struct chunkbuf *cb;
	int rc = -EBUSY;

	pthread_mutex_lock(&f->lock);
	cb = memchunks_hold(&f->mem, ci->fid, ci->gen, n);
	if (cb && cache_claim(f->c, ce, n) == CH_ABSENT) {
		cb = chunkbuf_get(cb);
	} else {
		if (cb)
			memchunks_unhold(&f->mem, ci->fid, ci->gen, n);
		cb = NULL;
	}
	pthread_mutex_unlock(&f->lock);
	if (!cb)
		return false;
	/* claimed with no fetch in flight: readers find the bytes in the
	 * set, which keeps them until the unhold */
	rc = cache_store_chunk(f->c, ce, n, cb, hash64(cb->data, cb->len, 0),
			       ADMIT_PREFETCH);
	pthread_mutex_lock(&f->lock);
	if (rc)
		cache_abandon(f->c, ce, n);
	memchunks_unhold(&f->mem, ci->fid, ci->gen, n);
	pthread_mutex_unlock(&f->lock);
	chunkbuf_put(cb);
	if (rc)
		return false;
	stat_inc(f->st, prefetch_kept_stored);
	return true;
}

/* is @fid still to be read by a list's reader in its current epoch,
 * before the readers read @within more bytes (the wanted callback; under
 * the fetch lock, which may take the lists lock) */
static bool wanted_locked(struct fetcher *f, uint64_t fid, uint64_t within)
{
	return f->wanted && f->wanted(f->wanted_arg, fid, within);
}

/*
 * The staged chunks of @ce (held), consumed: each is offered to the cache
 * as a demand read's chunk would be at its completion (the file was just
 * read, so the policy weighs its next use), in chunk order while they
 * extend what is on disk (a prefix); then they go, unless the file was
 * opened again meanwhile (its next last close settles them) or a list's
 * reader is to read it soon in its current epoch: the kernel sends the
 * release of a file read last in one epoch whenever it likes, and the
 * next epoch may have begun by then, with this file in it (the
 * prefetcher, finding the chunks staged, fetched nothing for it; they
 * are what that reader will read).  Soon: before the readers read as
 * many bytes as staging holds, so chunks kept for a file far ahead do
 * not crowd out the staging of the files before it.  Staging decided
 * early, before the reader went through the files before this one; by
 * now room may have appeared that MIN would give these chunks.
 */
static void settle_staged(struct fetcher *f, struct centry *ce,
			  const struct cache_ident *ci)
{
	unsigned unread = 0;
	bool store = true;
	uint32_t *v;
	int i, n;

	pthread_mutex_lock(&f->lock);
	n = stageset_list_file(&f->staged, ci->fid, ci->gen, &v);
	pthread_mutex_unlock(&f->lock);
	for (i = 0; i < n && store; i++)
		store = (v[i] == 0 || cache_chunk_state(f->c, ce, v[i] - 1) ==
				      CH_PRESENT) &&
			write_staged(f, ce, ci, v[i], ADMIT_DEMAND);
	free(v);
	pthread_mutex_lock(&f->lock);
	if (n && !cache_is_open(f->c, ce) && !wanted_locked(f, ci->fid, f->stage_limit))
		unread = stageset_drop_file(&f->staged, ci->fid, ci->gen);
	pthread_mutex_unlock(&f->lock);
	stat_add(f->st, staged_unread, unread);
}

void fetch_close(struct fetcher *f, struct centry *ce)
{
	struct cache_ident ci;

	cache_ident(ce, &ci);
	cache_busy_get(f->c, ce);	/* alive past the last detach */
	if (!cache_detach(f->c, ce)) {
		pthread_mutex_lock(&f->lock);
		memchunks_drop(&f->mem, ci.fid, ci.gen);
		pthread_mutex_unlock(&f->lock);
		settle_staged(f, ce, &ci);
	}
	cache_busy_put(f->c, ce);
}

void fetch_keep_verified(struct fetcher *f, struct centry *ce, uint32_t n,
			 struct chunkbuf *cb)
{
	struct cache_ident ci;

	cache_ident(ce, &ci);
	pthread_mutex_lock(&f->lock);
	/*
	 * Not open: fetch_close() dropped its set.  A kept chunk is charged
	 * as read-ahead from here on (its last put gives it back): none is
	 * kept when the budget has no room for it.
	 */
	if (!cb->mb && cache_is_open(f->c, ce) &&
	    membudget_try(f->mb, MB_AHEAD, cb->mapped)) {
		cb->mb = f->mb;
		cb->cls = MB_AHEAD;
		memchunks_put(&f->mem, ci.fid, ci.gen, n, cb);
	}
	pthread_mutex_unlock(&f->lock);
}

/* no room for another low-priority read now */
static bool prefetch_bound(struct fetcher *f)
{
	return atomic_load(&f->prefetching) >= MAX(1U, f->max_inflight / 2) ||
	       atomic_load(&f->inflight) >= f->max_inflight;
}

/* start a low-priority read of absent chunk @n of @ce: to disk, or for
 * memory only (@stage); for a read of the current epoch (@current), only
 * if its file is still to be read (the wanted callback, under the lock:
 * the reader opens it either before, and is not fetched for, or after,
 * and finds this read in flight) */
static int fetch_ahead(struct fetcher *f, struct centry *ce, uint32_t n,
		       bool stage, bool current)
{
	struct cache_ident ci;
	struct chunk_id id;
	struct inflight *in = NULL;
	uint32_t size;
	int rc = 0;

	if (prefetch_bound(f))
		return -EBUSY;
	cache_ident(ce, &ci);
	id = chunk_of(&ci, n);
	pthread_mutex_lock(&f->lock);
	if (!stage && n < ci.nchunks &&
	    stageset_has(&f->staged, id.fid, id.gen, id.n)) {
		/* staged, and the policy wants it now: no second fetch */
		pthread_mutex_unlock(&f->lock);
		return write_staged(f, ce, &ci, n, ADMIT_PREFETCH);
	}
	if (!stage && n < ci.nchunks &&
	    memchunks_has(&f->mem, id.fid, id.gen, id.n)) {
		/* kept in memory (its store was refused): written from there */
		pthread_mutex_unlock(&f->lock);
		return write_kept(f, ce, &ci, n);
	}
	if (n >= ci.nchunks || mem_has_locked(f, &id) ||
	    failed_lately_locked(f, id_key(&id)))
		goto out;
	if (current && f->wanted && !wanted_locked(f, ci.fid, UINT64_MAX))
		goto out;
	size = cache_chunk_len(f->c, ce, n);
	if (!linkrate_room(&f->link, 0, size)) {
		/* the link is busy for long enough: the next completion
		 * wakes the prefetcher (complete()) */
		atomic_store(&f->link_refused, true);
		rc = -EBUSY;
		goto out;
	}
	if (stage && f->staged.bytes + atomic_load(&f->staging_bytes) +
		     chunkbuf_charge(size) > f->stage_limit) {
		rc = -ENOSPC;
		goto out;
	}
	if (cache_claim(f->c, ce, n) != CH_ABSENT)
		goto out;
	rc = start_locked(f, ce, &id, MB_AHEAD, 0, 0, &in);
	if (rc) {
		cache_abandon(f->c, ce, n);
		goto out;			/* -EBUSY: no memory now */
	}
	in->prefetch = true;
	in->stage = stage;
	in->queued = !current;
	/* prefetches as the cache will charge them: whole 4 KiB blocks;
	 * staged chunks take no disk */
	if (!stage)
		in->pf_bytes = (cache_chunk_len(f->c, ce, n) + 4095) & ~4095U;
	atomic_fetch_add(&f->prefetching, 1);
	atomic_fetch_add(&f->prefetching_bytes, in->pf_bytes);
	if (stage) {
		in->st_bytes = chunkbuf_charge(size);
		atomic_fetch_add(&f->staging_bytes, in->st_bytes);
	}
out:
	pthread_mutex_unlock(&f->lock);
	if (!in)
		return rc;
	if (stage)
		stat_inc(f->st, staged_chunks);
	else
		stat_inc(f->st, prefetch_chunks);
	submit(f, in);
	return 1;
}

int fetch_prefetch(struct fetcher *f, struct centry *ce, uint32_t n,
		   bool current)
{
	return fetch_ahead(f, ce, n, false, current);
}

int fetch_stage(struct fetcher *f, struct centry *ce, uint32_t n,
		bool current)
{
	if (!f->stage_limit)
		return -ENOSPC;
	return fetch_ahead(f, ce, n, true, current);
}

/* start a low-priority read of pages [@lo, @hi) of absent chunk @n of
 * @ce, a listed range's; under the fetch lock */
static int range_pages_locked(struct fetcher *f, struct centry *ce,
			      const struct cache_ident *ci, uint32_t n,
			      uint32_t lo, uint32_t hi, struct inflight **out)
{
	struct chunk_id id = chunk_of(ci, n);
	struct inflight *in;
	int rc;

	*out = NULL;
	/* ABSENT: neither the chunk nor these pages on disk or on the way */
	if (mem_has_locked(f, &id) || failed_lately_locked(f, id_key(&id)) ||
	    page_read_find_locked(f, &id, lo, hi, false) ||
	    cache_range_state(f->c, ce, (uint64_t)n * f->cs + lo,
			      hi - lo) != CH_ABSENT)
		return 0;		/* on disk, on its way, or failing */
	if (prefetch_bound(f))
		return -EBUSY;
	if (!linkrate_room(&f->link, 0, hi - lo)) {
		atomic_store(&f->link_refused, true);
		return -EBUSY;
	}
	rc = start_locked(f, ce, &id, MB_AHEAD, lo, hi - lo, &in);
	if (rc)
		return rc;
	in->prefetch = true;
	in->pf_bytes = (hi - lo + 4095) & ~4095U;
	atomic_fetch_add(&f->prefetching, 1);
	atomic_fetch_add(&f->prefetching_bytes, in->pf_bytes);
	*out = in;
	return 1;
}

int fetch_prefetch_range(struct fetcher *f, struct centry *ce, uint64_t off,
			 uint64_t len)
{
	struct inflight *start[RANGE_CHUNKS_MAX];
	struct cache_ident ci;
	uint32_t n, n0, n1, lo, hi;
	int nstart = 0, rc = 0, i;

	cache_ident(ce, &ci);
	if (off >= ci.size || !len)
		return 0;
	len = MIN(len, ci.size - off);
	n0 = off / f->cs;
	n1 = MIN((off + len - 1) / f->cs, n0 + RANGE_CHUNKS_MAX - 1);
	pthread_mutex_lock(&f->lock);
	for (n = n0; n <= n1; n++) {
		cache_page_span(f->cs, cache_chunk_len(f->c, ce, n), n, off,
				len, &lo, &hi);
		rc = range_pages_locked(f, ce, &ci, n, lo, hi,
					&start[nstart]);
		if (rc < 0)
			break;
		if (rc)
			nstart++;
	}
	pthread_mutex_unlock(&f->lock);
	for (i = 0; i < nstart; i++) {
		stat_inc(f->st, range_prefetches);
		submit(f, start[i]);
	}
	if (nstart)
		return 1;
	return rc < 0 ? rc : 0;
}

void fetch_set_wanted(struct fetcher *f,
		      bool (*fn)(void *arg, uint64_t fid, uint64_t within),
		      void *arg)
{
	f->wanted = fn;
	f->wanted_arg = arg;
}

static bool staged_locked(struct fetcher *f, const struct cache_ident *ci,
			  uint32_t n)
{
	struct chunk_id id = chunk_of(ci, n);
	struct inflight *in;

	if (stageset_has(&f->staged, ci->fid, ci->gen, n))
		return true;
	in = inflight_find_locked(f, &id);
	return in && in->stage;
}

bool fetch_is_staged(struct fetcher *f, const struct centry *ce, uint32_t n)
{
	return fetch_staged_mask(f, ce, n, 1) & 1;
}

uint64_t fetch_staged_mask(struct fetcher *f, const struct centry *ce,
			   uint32_t from, uint32_t n)
{
	struct cache_ident ci;
	uint64_t mask = 0;
	uint32_t i;

	cache_ident(ce, &ci);
	pthread_mutex_lock(&f->lock);
	for (i = 0; i < n && i < 64; i++)
		if (staged_locked(f, &ci, from + i))
			mask |= 1ULL << i;
	pthread_mutex_unlock(&f->lock);
	return mask;
}

struct keep_ctx {
	struct fetcher *f;
	const uint64_t *fids;
	size_t n;
};

static bool keep_staged(void *arg, uint64_t fid)
{
	struct keep_ctx *k = arg;
	size_t i;

	for (i = 0; i < k->n; i++)
		if (k->fids[i] == fid)
			return true;
	/* still ahead of a reader: the rounds from the ready marks stage
	 * past the window a full round looks at */
	if (wanted_locked(k->f, fid, UINT64_MAX))
		return true;
	return cache_fid_open(k->f->c, fid);
}

void fetch_stage_keep(struct fetcher *f, const uint64_t *fids, size_t n)
{
	struct keep_ctx k = { f, fids, n };
	unsigned unread;

	pthread_mutex_lock(&f->lock);
	unread = stageset_drop_unless(&f->staged, keep_staged, &k);
	pthread_mutex_unlock(&f->lock);
	stat_add(f->st, staged_unread, unread);
}

uint64_t fetch_prefetching_bytes(struct fetcher *f)
{
	return atomic_load(&f->prefetching_bytes);
}

void fetch_on_prefetch_done(struct fetcher *f,
			    void (*fn)(void *arg, bool stored), void *arg)
{
	f->on_prefetch = fn;
	f->prefetch_arg = arg;
}

struct membudget *fetch_budget(struct fetcher *f)
{
	return f->mb;
}

void fetch_on_stale(struct fetcher *f, void (*fn)(void *arg, uint64_t fid),
		    void *arg)
{
	f->on_stale = fn;
	f->stale_arg = arg;
}
