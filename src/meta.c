// SPDX-License-Identifier: MIT
/* meta.c - see meta.h */
#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bgthread.h"
#include "hash.h"
#include "log.h"
#include "meta.h"

#define MAPSIZE_START	(1ULL << 30)
#define QUEUE_KICK	4096

enum op_kind { OP_FILE, OP_CHUNK, OP_DROP_CHUNK, OP_DROP_FILE, OP_HEAT };

struct op {
	enum op_kind kind;
	uint64_t fid;
	uint32_t n;
	union {
		struct file_rec file;
		struct chunk_rec chunk;
		struct heat_rec heat;
	} u;
};

struct meta {
	MDB_env *env;
	MDB_dbi dbi_meta, dbi_files, dbi_chunks, dbi_heat, dbi_objects;
	size_t mapsize;

	pthread_mutex_t lock;	/* guards the queue and the counters */
	pthread_cond_t done;	/* a batch was committed */
	struct op *q, *spare;	/* queue; the array the last batch used */
	size_t qlen, qcap, spare_cap;
	uint64_t queued, applied, batches;
	struct bgthread *writer;
};

struct meta_ns_txn {
	struct meta *m;
	MDB_txn *txn;
};

static int mdb_err(int rc)
{
	if (rc == 0)
		return 0;
	if (rc > 0)
		return -rc;
	log_err("lmdb: %s", mdb_strerror(rc));
	return rc == MDB_MAP_FULL ? -ENOSPC : -EIO;
}

/* grow the map when full; caller holds no transaction */
static int grow_map(struct meta *m)
{
	int rc;

	m->mapsize *= 2;
	rc = mdb_env_set_mapsize(m->env, m->mapsize);
	log_info("lmdb map grown to %zu MiB", m->mapsize >> 20);
	return mdb_err(rc);
}

static int txn_begin(struct meta *m, unsigned flags, MDB_txn **t)
{
	return mdb_err(mdb_txn_begin(m->env, NULL, flags, t));
}

static int apply_op(struct meta *m, MDB_txn *t, const struct op *o)
{
	uint8_t kb[CHUNK_KEY_LEN], vb[FILE_REC_MAX + HEAT_REC_LEN];
	MDB_val k = { .mv_data = kb }, v = { .mv_data = vb };
	MDB_cursor *c;
	int rc;

	switch (o->kind) {
	case OP_FILE:
		fid_key(kb, o->fid);
		k.mv_size = FID_KEY_LEN;
		v.mv_size = file_rec_encode(vb, &o->u.file);
		return mdb_put(t, m->dbi_files, &k, &v, 0);
	case OP_CHUNK:
		chunk_key(kb, o->fid, o->n);
		k.mv_size = CHUNK_KEY_LEN;
		v.mv_size = chunk_rec_encode(vb, &o->u.chunk);
		return mdb_put(t, m->dbi_chunks, &k, &v, 0);
	case OP_DROP_CHUNK:
		chunk_key(kb, o->fid, o->n);
		k.mv_size = CHUNK_KEY_LEN;
		rc = mdb_del(t, m->dbi_chunks, &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	case OP_HEAT:
		fid_key(kb, o->fid);
		k.mv_size = FID_KEY_LEN;
		v.mv_size = heat_rec_encode(vb, &o->u.heat);
		return mdb_put(t, m->dbi_heat, &k, &v, 0);
	case OP_DROP_FILE:
		fid_key(kb, o->fid);
		k.mv_size = FID_KEY_LEN;
		rc = mdb_del(t, m->dbi_files, &k, NULL);
		if (rc && rc != MDB_NOTFOUND)
			return rc;
		chunk_key(kb, o->fid, 0);
		k.mv_size = CHUNK_KEY_LEN;
		rc = mdb_cursor_open(t, m->dbi_chunks, &c);
		if (rc)
			return rc;
		rc = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
		while (!rc && k.mv_size == CHUNK_KEY_LEN &&
		       fid_from_key(k.mv_data) == o->fid) {
			rc = mdb_cursor_del(c, 0);
			if (!rc)
				rc = mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT);
			if (rc == MDB_NOTFOUND || rc == EINVAL)
				rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
		}
		mdb_cursor_close(c);
		return rc == MDB_NOTFOUND ? 0 : rc;
	}
	return 0;
}

static int apply_batch(struct meta *m, const struct op *ops, size_t n)
{
	MDB_txn *t;
	size_t i;
	int rc;

retry:
	rc = txn_begin(m, 0, &t);
	if (rc)
		return rc;
	for (i = 0; i < n && !rc; i++)
		rc = apply_op(m, t, &ops[i]);
	if (!rc) {
		rc = mdb_txn_commit(t);
	} else {
		mdb_txn_abort(t);
	}
	if (rc == MDB_MAP_FULL && grow_map(m) == 0)
		goto retry;
	return mdb_err(rc);
}

/*
 * write_batch() - everything queued so far, in one transaction, applied
 * with the lock dropped (the queue array is swapped with the spare).  Runs
 * on one thread at a time: the writer's tick, or meta_close() after the
 * writer stopped.  Return: how many updates the batch held.
 */
static size_t write_batch(struct meta *m)
{
	struct op *ops;
	size_t n, cap;
	uint64_t upto;

	pthread_mutex_lock(&m->lock);
	n = m->qlen;
	if (!n) {
		pthread_mutex_unlock(&m->lock);
		return 0;
	}
	ops = m->q;
	cap = m->qcap;
	m->q = m->spare;
	m->qcap = m->spare_cap;
	m->spare = NULL;
	m->qlen = 0;
	upto = m->queued;
	pthread_mutex_unlock(&m->lock);

	if (apply_batch(m, ops, n))
		log_err("index batch of %zu updates lost", n);

	pthread_mutex_lock(&m->lock);
	m->spare = ops;
	m->spare_cap = cap;
	m->applied = upto;
	m->batches++;
	pthread_cond_broadcast(&m->done);
	pthread_mutex_unlock(&m->lock);
	return n;
}

/*
 * The writer: a batch every META_BATCH_MS, so that updates gather and an
 * update never costs a commit of its own; a queue of QUEUE_KICK updates
 * (or meta_flush()) wakes it early, and after such a long batch it goes
 * on at once.
 */
static int64_t writer_tick(void *arg)
{
	return write_batch(arg) >= QUEUE_KICK ? 0 : BG_PERIOD;
}

static void enqueue(struct meta *m, const struct op *o)
{
	bool kick;

	pthread_mutex_lock(&m->lock);
	if (m->qlen == m->qcap) {
		size_t cap = m->qcap ? m->qcap * 2 : 256;
		struct op *q = realloc(m->q, cap * sizeof(*q));

		if (!q) {
			pthread_mutex_unlock(&m->lock);
			log_err("index update dropped: out of memory");
			return;
		}
		m->q = q;
		m->qcap = cap;
	}
	m->q[m->qlen++] = *o;
	m->queued++;
	kick = m->qlen >= QUEUE_KICK;
	pthread_mutex_unlock(&m->lock);
	if (kick)
		bgthread_wake(m->writer);
}

void meta_q_file(struct meta *m, uint64_t fid, const struct file_rec *r)
{
	struct op o = { .kind = OP_FILE, .fid = fid, .u.file = *r };

	enqueue(m, &o);
}

void meta_q_chunk(struct meta *m, uint64_t fid, uint32_t n,
		  const struct chunk_rec *r)
{
	struct op o = { .kind = OP_CHUNK, .fid = fid, .n = n, .u.chunk = *r };

	enqueue(m, &o);
}

void meta_q_drop_chunk(struct meta *m, uint64_t fid, uint32_t n)
{
	struct op o = { .kind = OP_DROP_CHUNK, .fid = fid, .n = n };

	enqueue(m, &o);
}

void meta_q_drop_file(struct meta *m, uint64_t fid)
{
	struct op o = { .kind = OP_DROP_FILE, .fid = fid };

	enqueue(m, &o);
}

void meta_q_heat(struct meta *m, uint64_t fid, const struct heat_rec *r)
{
	struct op o = { .kind = OP_HEAT, .fid = fid, .u.heat = *r };

	enqueue(m, &o);
}

int meta_flush(struct meta *m)
{
	uint64_t want;

	pthread_mutex_lock(&m->lock);
	want = m->queued;
	pthread_mutex_unlock(&m->lock);
	bgthread_wake(m->writer);
	pthread_mutex_lock(&m->lock);
	while (m->applied < want)
		pthread_cond_wait(&m->done, &m->lock);
	pthread_mutex_unlock(&m->lock);
	return 0;
}

uint64_t meta_batches(struct meta *m)
{
	uint64_t b;

	pthread_mutex_lock(&m->lock);
	b = m->batches;
	pthread_mutex_unlock(&m->lock);
	return b;
}

int meta_open(struct meta **out, const char *dir)
{
	struct meta *m = calloc(1, sizeof(*m));
	MDB_txn *t;
	int rc, stale;

	if (!m)
		return -ENOMEM;
	if (mkdir(dir, 0700) && errno != EEXIST) {
		rc = -errno;
		goto out_free;
	}
	rc = mdb_err(mdb_env_create(&m->env));
	if (rc)
		goto out_free;
	m->mapsize = MAPSIZE_START;
	mdb_env_set_mapsize(m->env, m->mapsize);
	mdb_env_set_maxdbs(m->env, 8);
	mdb_env_set_maxreaders(m->env, 256);
	rc = mdb_err(mdb_env_open(m->env, dir, MDB_NOTLS, 0600));
	if (rc)
		goto out_env;
	/* a file grown by an earlier run may be larger than our start */
	{
		MDB_envinfo info;

		mdb_env_info(m->env, &info);
		m->mapsize = info.me_mapsize;
	}
	mdb_reader_check(m->env, &stale);
	rc = txn_begin(m, 0, &t);
	if (rc)
		goto out_env;
	rc = mdb_dbi_open(t, "meta", MDB_CREATE, &m->dbi_meta);
	if (!rc)
		rc = mdb_dbi_open(t, "files", MDB_CREATE, &m->dbi_files);
	if (!rc)
		rc = mdb_dbi_open(t, "chunks", MDB_CREATE, &m->dbi_chunks);
	if (!rc)
		rc = mdb_dbi_open(t, "heat", MDB_CREATE, &m->dbi_heat);
	if (!rc)
		rc = mdb_dbi_open(t, "objects", MDB_CREATE, &m->dbi_objects);
	if (rc) {
		mdb_txn_abort(t);
		rc = mdb_err(rc);
		goto out_env;
	}
	rc = mdb_err(mdb_txn_commit(t));
	if (rc)
		goto out_env;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->done, NULL);
	rc = bgthread_start(&m->writer, "meta-writer", META_BATCH_MS,
			    writer_tick, m);
	if (rc)
		goto out_lock;
	*out = m;
	return 0;
out_lock:
	pthread_cond_destroy(&m->done);
	pthread_mutex_destroy(&m->lock);
out_env:
	mdb_env_close(m->env);
out_free:
	free(m);
	return rc;
}

void meta_close(struct meta *m)
{
	if (!m)
		return;
	bgthread_stop(m->writer);
	write_batch(m);		/* what was queued after the last tick */
	mdb_env_sync(m->env, 1);
	mdb_env_close(m->env);
	free(m->q);
	free(m->spare);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->done);
	free(m);
}

int meta_get_str(struct meta *m, const char *key, char *buf, size_t len)
{
	MDB_val k = { strlen(key), (void *)key }, v;
	MDB_txn *t;
	int rc;

	rc = txn_begin(m, MDB_RDONLY, &t);
	if (rc)
		return rc;
	rc = mdb_get(t, m->dbi_meta, &k, &v);
	if (!rc) {
		size_t n = MIN(v.mv_size, len - 1);

		memcpy(buf, v.mv_data, n);
		buf[n] = '\0';
	}
	mdb_txn_abort(t);
	return rc == MDB_NOTFOUND ? -ENOENT : mdb_err(rc);
}

int meta_put_str(struct meta *m, const char *key, const char *val)
{
	MDB_val k = { strlen(key), (void *)key };
	MDB_val v = { strlen(val), (void *)val };
	MDB_txn *t;
	int rc;

	rc = txn_begin(m, 0, &t);
	if (rc)
		return rc;
	rc = mdb_put(t, m->dbi_meta, &k, &v, 0);
	if (rc) {
		mdb_txn_abort(t);
		return mdb_err(rc);
	}
	return mdb_err(mdb_txn_commit(t));
}

int meta_wipe_cache(struct meta *m)
{
	MDB_txn *t;
	int rc;

	rc = txn_begin(m, 0, &t);
	if (rc)
		return rc;
	rc = mdb_drop(t, m->dbi_files, 0);
	if (!rc)
		rc = mdb_drop(t, m->dbi_chunks, 0);
	if (!rc)
		rc = mdb_drop(t, m->dbi_heat, 0);
	if (rc) {
		mdb_txn_abort(t);
		return mdb_err(rc);
	}
	return mdb_err(mdb_txn_commit(t));
}

int meta_ns_begin(struct meta *m, struct meta_ns_txn **out)
{
	struct meta_ns_txn *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	t->m = m;
	rc = txn_begin(m, 0, &t->txn);
	if (!rc)
		rc = mdb_err(mdb_drop(t->txn, m->dbi_objects, 0));
	if (rc) {
		if (t->txn)
			mdb_txn_abort(t->txn);
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int meta_ns_add(struct meta_ns_txn *t, const char *key, size_t len,
		const struct ns_attr *a)
{
	uint8_t kb[FID_KEY_LEN], *vb;
	MDB_val k = { FID_KEY_LEN, kb }, v;
	size_t alen;
	int rc;

	/* keyed by a hash: names may exceed LMDB's 511-byte key limit */
	vb = malloc(2 + ATTR_REC_MAX + len);
	if (!vb)
		return -ENOMEM;
	fid_key(kb, hash64(key, len, 0));
	alen = attr_rec_encode(vb + 2, a);
	vb[0] = alen & 0xff;
	vb[1] = alen >> 8;
	memcpy(vb + 2 + alen, key, len);
	v.mv_data = vb;
	v.mv_size = 2 + alen + len;
	rc = mdb_err(mdb_put(t->txn, t->m->dbi_objects, &k, &v, 0));
	free(vb);
	return rc;
}

int meta_ns_commit(struct meta_ns_txn *t)
{
	int rc = mdb_err(mdb_txn_commit(t->txn));

	free(t);
	return rc;
}

void meta_ns_abort(struct meta_ns_txn *t)
{
	mdb_txn_abort(t->txn);
	free(t);
}

/* walk database @dbi, handing each record to @each; -errno */
static int walk(struct meta *m, MDB_dbi dbi,
		int (*each)(void *ctx, const MDB_val *k, const MDB_val *v),
		void *ctx)
{
	MDB_txn *t;
	MDB_cursor *c;
	MDB_val k, v;
	int rc;

	rc = txn_begin(m, MDB_RDONLY, &t);
	if (rc)
		return rc;
	rc = mdb_cursor_open(t, dbi, &c);
	if (rc) {
		mdb_txn_abort(t);
		return mdb_err(rc);
	}
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		int r = each(ctx, &k, &v);

		if (r) {
			rc = r;
			break;
		}
	}
	mdb_cursor_close(c);
	mdb_txn_abort(t);
	if (rc == MDB_NOTFOUND)
		return 0;
	return rc < 0 && rc > -4096 ? rc : mdb_err(rc);
}

struct load_ctx {
	void *fn;
	void *arg;
	long count;
};

static int ns_each(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct load_ctx *l = ctx;
	int (*fn)(void *, const char *, size_t, const struct ns_attr *) = l->fn;
	const uint8_t *p = v->mv_data;
	struct ns_attr a;
	size_t alen;

	(void)k;
	if (v->mv_size < 2)
		return 0;
	alen = p[0] | (size_t)p[1] << 8;
	if (2 + alen >= v->mv_size ||
	    attr_rec_decode(p + 2, alen, &a))
		return 0;	/* damaged: skipped, the next listing fixes it */
	l->count++;
	return fn(l->arg, (const char *)p + 2 + alen, v->mv_size - 2 - alen,
		  &a);
}

long meta_ns_load(struct meta *m, int (*fn)(void *arg, const char *key,
		  size_t len, const struct ns_attr *a), void *arg)
{
	struct load_ctx l = { (void *)fn, arg, 0 };
	int rc = walk(m, m->dbi_objects, ns_each, &l);

	return rc ? rc : l.count;
}

static int files_each(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct load_ctx *l = ctx;
	int (*fn)(void *, uint64_t, const struct file_rec *) = l->fn;
	struct file_rec r;

	if (k->mv_size != FID_KEY_LEN ||
	    file_rec_decode(v->mv_data, v->mv_size, &r))
		return 0;
	return fn(l->arg, fid_from_key(k->mv_data), &r);
}

int meta_files_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		    const struct file_rec *r), void *arg)
{
	struct load_ctx l = { (void *)fn, arg, 0 };

	return walk(m, m->dbi_files, files_each, &l);
}

static int chunks_each(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct load_ctx *l = ctx;
	int (*fn)(void *, uint64_t, uint32_t, const struct chunk_rec *) = l->fn;
	struct chunk_rec r;
	uint64_t fid;
	uint32_t n;

	if (k->mv_size != CHUNK_KEY_LEN ||
	    chunk_rec_decode(v->mv_data, v->mv_size, &r))
		return 0;
	chunk_from_key(k->mv_data, &fid, &n);
	return fn(l->arg, fid, n, &r);
}

int meta_chunks_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		     uint32_t n, const struct chunk_rec *r), void *arg)
{
	struct load_ctx l = { (void *)fn, arg, 0 };

	return walk(m, m->dbi_chunks, chunks_each, &l);
}

static int heat_each(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct load_ctx *l = ctx;
	int (*fn)(void *, uint64_t, const struct heat_rec *) = l->fn;
	struct heat_rec r;

	if (k->mv_size != FID_KEY_LEN ||
	    heat_rec_decode(v->mv_data, v->mv_size, &r))
		return 0;
	return fn(l->arg, fid_from_key(k->mv_data), &r);
}

int meta_heat_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		   const struct heat_rec *r), void *arg)
{
	struct load_ctx l = { (void *)fn, arg, 0 };

	return walk(m, m->dbi_heat, heat_each, &l);
}
