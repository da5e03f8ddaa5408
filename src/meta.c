// SPDX-License-Identifier: MIT
/* meta.c - see meta.h */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <lmdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bgthread.h"
#include "log.h"
#include "meta.h"
#include "testhook.h"

#define MAPSIZE_MAX	(1ULL << 40)	/* address space, not disk */
#define QUEUE_KICK	4096
#define NS_BATCH_BYTES	(4U << 20)	/* namespace records per transaction */
#define NS_SLOT_KEY	"objects_slot"	/* in "meta": "0" or "1" */
#define BROKEN_MARK	"broken"	/* in the index directory: set aside
					 * at the next start (the reason) */

/* the two namespace databases: the current one and the one refilled */
static const char *const ns_db_name[2] = { "objects", "objects.1" };

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
	MDB_dbi dbi_meta, dbi_files, dbi_chunks, dbi_heat, dbi_objects[2];
	MDB_dbi dbi_stopped;	/* clean-stop records (cache_stop.c) */
	/*
	 * Growing the map remaps it, so no transaction of this process may
	 * be open meanwhile (lmdb.h, mdb_env_set_mapsize): every transaction
	 * holds map_lock shared, growing takes it exclusive.  mapsize
	 * changes only under it exclusive.
	 */
	pthread_rwlock_t map_lock;
	size_t mapsize;

	pthread_mutex_t lock;	/* guards the queue, the counters, ns_busy */
	bool ns_busy;		/* a namespace rewrite is under way */
	pthread_cond_t done;	/* a batch was committed */
	struct op *q, *spare;	/* queue; the array the last batch used */
	size_t qlen, qcap, spare_cap;
	uint64_t queued, applied, batches;
	_Atomic uint64_t *gauge;	/* meta_count_queued(), or NULL */
	struct bgthread *writer;
	char *dir, *shown;	/* for LMDB; for messages */
	/*
	 * A read or write found the index damaged: every later write is
	 * skipped (the daemon serves on from memory and its data files), and
	 * BROKEN_MARK in the directory has the next start set it aside.
	 */
	atomic_bool broken;
};

/*
 * A namespace rewrite: records gather in memory and are written NS_BATCH_BYTES
 * at a time, each batch in a short transaction of its own, into the
 * namespace database that is not current; the commit makes it current.
 * So a listing that waits on the network never holds LMDB's write lock.
 */
struct meta_ns_txn {
	struct meta *m;
	int slot;		/* index of the database being filled */
	uint8_t *buf;		/* records not yet written: key(8) len(4) value */
	size_t len, cap;
	uint64_t seq;		/* the last record's key */
	bool discard;		/* the index broke: records are dropped, the
				 * commit fails (the listing serves from
				 * memory) */
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

/*
 * Is LMDB code @rc the index's fault?  Not a full disk, not memory, not
 * a map at its largest: those pass.  The rest (a page that is not one,
 * EFBIG or EIO on a bogus page number, an environment LMDB gave up on)
 * means the file cannot be trusted for the next write either.
 */
static bool index_damage(int rc)
{
	if (rc > 0)
		return rc != ENOSPC && rc != EDQUOT && rc != ENOMEM &&
		       rc != EINTR && rc != EAGAIN && rc != EBUSY;
	return rc == MDB_CORRUPTED || rc == MDB_PAGE_NOTFOUND ||
	       rc == MDB_INVALID || rc == MDB_PANIC || rc == MDB_BAD_TXN ||
	       rc == MDB_PAGE_FULL || rc == MDB_VERSION_MISMATCH ||
	       rc == MDB_INCOMPATIBLE;
}

/*
 * note_damage() - LMDB code @rc of a @what on the index: if it is damage,
 * mark the index broken, once: one log line, and BROKEN_MARK written with
 * the reason so that the next start sets the directory aside.
 * Return: @rc.
 */
static int note_damage(struct meta *m, int rc, const char *what)
{
	char path[PATH_MAX], why[200];
	int fd, n;

	if (!rc || !index_damage(rc) || atomic_exchange(&m->broken, true))
		return rc;
	n = snprintf(why, sizeof(why), "a %s failed while mounted: %s", what,
		     mdb_strerror(rc));
	snprintf(path, sizeof(path), "%s/" BROKEN_MARK, m->dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0 || write(fd, why, (size_t)MIN(n, (int)sizeof(why) - 1)) < 0)
		log_warn("cannot mark the cache index %s broken: %s", m->shown,
			 strerror(errno));
	if (fd >= 0)
		close(fd);
	log_err("cache index %s is damaged (%s): index updates are not kept from now on (reads go on as before); it is moved aside and rebuilt at the next start",
		m->shown, why);
	return rc;
}

/*
 * grow_map() - double the map (or adopt the size another process set,
 * @resized), unless someone already grew it past @seen meanwhile.  Takes
 * map_lock exclusive: waits until no transaction of this process is
 * open.  The caller holds none.  Return: an LMDB code.
 */
static int grow_map(struct meta *m, size_t seen, bool resized)
{
	MDB_envinfo info;
	int rc = 0;

	pthread_rwlock_wrlock(&m->map_lock);
	if (m->mapsize != seen) {
		/* grown by another thread meanwhile */
	} else if (resized) {
		rc = mdb_env_set_mapsize(m->env, 0);
		if (!rc && !mdb_env_info(m->env, &info))
			m->mapsize = info.me_mapsize;
	} else if (seen * 2 > MAPSIZE_MAX) {
		log_err("index: the LMDB map cannot grow beyond %llu GiB",
			MAPSIZE_MAX >> 30);
		rc = MDB_MAP_FULL;
	} else {
		rc = mdb_env_set_mapsize(m->env, seen * 2);
		if (!rc) {
			m->mapsize = seen * 2;
			log_info("index: LMDB map grown to %zu MiB",
				 m->mapsize >> 20);
		}
	}
	pthread_rwlock_unlock(&m->map_lock);
	return rc;
}

/* a read transaction; holds map_lock shared until read_end().  LMDB code */
static int read_begin(struct meta *m, MDB_txn **t)
{
	int rc;

	pthread_rwlock_rdlock(&m->map_lock);
	rc = mdb_txn_begin(m->env, NULL, MDB_RDONLY, t);
	if (rc)
		pthread_rwlock_unlock(&m->map_lock);
	return rc;
}

static void read_end(struct meta *m, MDB_txn *t)
{
	mdb_txn_abort(t);
	pthread_rwlock_unlock(&m->map_lock);
}

/*
 * write_txn() - run @fn(m, txn, arg) in a write transaction and commit
 * it.  When the map is full (in @fn or at commit) the transaction is
 * aborted, the map grown and @fn run again from the start: @fn must
 * only write to the transaction (or be otherwise repeatable).  @fn
 * returns an LMDB code (0, a positive errno or MDB_*); nonzero aborts.
 * Every writer goes through here, so none fails because the map filled.
 * Return: 0 or -errno.
 */
static int write_txn(struct meta *m,
		     int (*fn)(struct meta *m, MDB_txn *t, void *arg), void *arg)
{
	MDB_txn *t;
	size_t seen;
	int rc;

	if (atomic_load(&m->broken))
		return -EIO;
	for (;;) {
		pthread_rwlock_rdlock(&m->map_lock);
		seen = m->mapsize;
		rc = mdb_txn_begin(m->env, NULL, 0, &t);
		if (!rc) {
			rc = fn(m, t, arg);
			if (rc)
				mdb_txn_abort(t);
			else
				rc = mdb_txn_commit(t);
		}
		pthread_rwlock_unlock(&m->map_lock);
		if (rc != MDB_MAP_FULL && rc != MDB_MAP_RESIZED)
			return mdb_err(note_damage(m, rc, "write"));
		rc = grow_map(m, seen, rc == MDB_MAP_RESIZED);
		if (rc)
			return mdb_err(rc);
	}
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
		v.mv_size = rec_seal(vb, file_rec_encode(vb, &o->u.file), kb,
				     k.mv_size);
		return mdb_put(t, m->dbi_files, &k, &v, 0);
	case OP_CHUNK:
		chunk_key(kb, o->fid, o->n);
		k.mv_size = CHUNK_KEY_LEN;
		v.mv_size = rec_seal(vb, chunk_rec_encode(vb, &o->u.chunk), kb,
				     k.mv_size);
		return mdb_put(t, m->dbi_chunks, &k, &v, 0);
	case OP_DROP_CHUNK:
		chunk_key(kb, o->fid, o->n);
		k.mv_size = CHUNK_KEY_LEN;
		rc = mdb_del(t, m->dbi_chunks, &k, NULL);
		return rc == MDB_NOTFOUND ? 0 : rc;
	case OP_HEAT:
		fid_key(kb, o->fid);
		k.mv_size = FID_KEY_LEN;
		v.mv_size = rec_seal(vb, heat_rec_encode(vb, &o->u.heat), kb,
				     k.mv_size);
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

struct batch {
	const struct op *ops;
	size_t n;
};

static int apply_batch_fn(struct meta *m, MDB_txn *t, void *arg)
{
	const struct batch *b = arg;
	size_t i;
	int rc = 0;

	for (i = 0; i < b->n && !rc; i++)
		rc = apply_op(m, t, &b->ops[i]);
	return rc;
}

static int apply_batch(struct meta *m, const struct op *ops, size_t n)
{
	struct batch b = { ops, n };

	return write_txn(m, apply_batch_fn, &b);
}

/* the gauge of updates queued and not committed yet; under m->lock */
static void gauge_locked(struct meta *m)
{
	if (m->gauge)
		atomic_store_explicit(m->gauge, m->queued - m->applied,
				      memory_order_relaxed);
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

	testhook_gate("meta-commit");	/* tests: a writer that hangs */
	if (apply_batch(m, ops, n) && !atomic_load(&m->broken))
		log_err("index batch of %zu updates lost", n);

	pthread_mutex_lock(&m->lock);
	m->spare = ops;
	m->spare_cap = cap;
	m->applied = upto;
	m->batches++;
	gauge_locked(m);
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
	gauge_locked(m);
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

void meta_count_queued(struct meta *m, _Atomic uint64_t *gauge)
{
	pthread_mutex_lock(&m->lock);
	m->gauge = gauge;
	gauge_locked(m);
	pthread_mutex_unlock(&m->lock);
}

uint64_t meta_batches(struct meta *m)
{
	uint64_t b;

	pthread_mutex_lock(&m->lock);
	b = m->batches;
	pthread_mutex_unlock(&m->lock);
	return b;
}

/* ---- a damaged index is set aside before LMDB maps it ---- */

/*
 * LMDB 0.9 (mdb.c) begins its data file with two meta pages, each an
 * MDB_page header then an MDB_meta; the one with the larger txnid is
 * current and names the last page in use, so the file must hold at
 * least (last_pg + 1) pages.  A shorter file would be mapped all the
 * same and fault (SIGBUS) at the first touch of a missing page.  Offsets
 * for x86-64 (tests/unit/test_meta.c checks them against a file LMDB
 * wrote).
 */
#define LM_FLAGS	10	/* mp_flags, u16 */
#define LM_MAGIC	16	/* mm_magic, u32 */
#define LM_VERSION	20	/* mm_version, u32 */
#define LM_PSIZE	40	/* mm_dbs[FREE_DBI].md_pad, u32: the page size */
#define LM_LAST_PG	136	/* mm_last_pg, u64 */
#define LM_TXNID	144	/* mm_txnid, u64 */
#define LM_META_END	152
#define LM_P_META	0x08
#define LM_MAGIC_VAL	0xBEEFC0DEU
#define LM_DATA_VERSION	1
#define PROBE_BASE_S	30	/* the probe's time bound: this, */
#define PROBE_BYTES_S	(32 << 20)	/* plus 1 s per this many bytes */

_Static_assert(sizeof(size_t) == 8 && sizeof(void *) == 8,
	       "LM_* offsets are those of a 64-bit build");

struct lm_meta {
	uint32_t psize;
	uint64_t last_pg, txnid;
};

/* the meta page at @off: NULL, or what is wrong with it */
static const char *lm_read_meta(int fd, off_t off, struct lm_meta *out)
{
	uint8_t b[LM_META_END];
	uint32_t magic, version;
	uint16_t flags;

	if (pread(fd, b, sizeof(b), off) != (ssize_t)sizeof(b))
		return "a meta page is cut off";
	memcpy(&flags, b + LM_FLAGS, sizeof(flags));
	memcpy(&magic, b + LM_MAGIC, sizeof(magic));
	memcpy(&version, b + LM_VERSION, sizeof(version));
	memcpy(&out->psize, b + LM_PSIZE, sizeof(out->psize));
	memcpy(&out->last_pg, b + LM_LAST_PG, sizeof(out->last_pg));
	memcpy(&out->txnid, b + LM_TXNID, sizeof(out->txnid));
	if (!(flags & LM_P_META) || magic != LM_MAGIC_VAL)
		return "not an LMDB file: no meta page";
	if (version != LM_DATA_VERSION)
		return "an LMDB file of another format version";
	if (out->psize < 512 || out->psize > 65536 ||
	    (out->psize & (out->psize - 1)))
		return "its meta page names an impossible page size";
	if (out->last_pg < 1 || out->last_pg >= (1ULL << 40))
		return "its meta page names an impossible last page";
	return NULL;
}

/*
 * check_header() - does @dir/data.mdb hold what its meta pages say?
 * Return: 0 (fine, absent or empty: LMDB creates it), 1 damaged (@why
 * says how), or -errno.
 */
static int check_header(const char *dir, char *why, size_t len)
{
	struct lm_meta m0, m1, *cur;
	const char *bad;
	char path[PATH_MAX];
	struct stat sb;
	uint64_t need;
	int fd, rc = 1;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno != ELOOP)
			return -errno;
		snprintf(why, len, "data.mdb is a symlink");
		return 1;
	}
	if (fstat(fd, &sb)) {
		rc = -errno;
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(why, len, "data.mdb is not a regular file");
		goto out;
	}
	if (sb.st_size == 0) {
		rc = 0;
		goto out;
	}
	bad = lm_read_meta(fd, 0, &m0);
	if (!bad)
		bad = lm_read_meta(fd, m0.psize, &m1);
	if (bad) {
		snprintf(why, len, "data.mdb, %lld bytes: %s",
			 (long long)sb.st_size, bad);
		goto out;
	}
	cur = m1.txnid > m0.txnid ? &m1 : &m0;
	need = (cur->last_pg + 1) * cur->psize;
	if ((uint64_t)sb.st_size < need) {
		snprintf(why, len, "data.mdb is %lld bytes, its meta page says %llu (%llu pages of %u): truncated",
			 (long long)sb.st_size, (unsigned long long)need,
			 (unsigned long long)cur->last_pg + 1, cur->psize);
		goto out;
	}
	rc = 0;
out:
	close(fd);
	return rc;
}

/* read every byte of @v, so that every page under it is faulted in */
static uint8_t touch(const MDB_val *v, uint8_t acc)
{
	const volatile uint8_t *p = v->mv_data;
	size_t i;

	for (i = 0; i < v->mv_size; i++)
		acc ^= p[i];
	return acc;
}

/*
 * A free-list record (LMDB's MDB_IDL: a count, then that many page
 * numbers) whose pages are not pages of the file: LMDB would hand them
 * to the next write, which then fails (EFBIG at a page number past any
 * file size) or overwrites a page in use.  The reads never see it.
 */
static bool bad_free_list(const MDB_val *v, size_t last_pg)
{
	const uint8_t *p = v->mv_data;
	size_t n, i, pg;

	if (v->mv_size < sizeof(n) || v->mv_size % sizeof(n))
		return true;
	memcpy(&n, p, sizeof(n));
	if (n != v->mv_size / sizeof(n) - 1)
		return true;
	for (i = 1; i <= n; i++) {
		memcpy(&pg, p + i * sizeof(pg), sizeof(pg));
		if (pg < 2 || pg > last_pg)
			return true;
	}
	return false;
}

/*
 * The probe's view of the file: its page size (0: pages not checked),
 * last page, the leaf page checked last.  LMDB maps the file at a
 * page-aligned address and its pages are the system's: a record's page
 * begins at its address rounded down to the page size.
 */
struct probe_map {
	size_t psize, last_pg;
	uintptr_t checked;
};

/* LMDB's page and node layout (lmdb 0.9, mdb.c: MDB_page, MDB_node) */
#define LM_PAGEHDRSZ	16u	/* pgno(8) pad(2) flags(2) lower(2) upper(2) */
#define LM_P_LEAF	0x02u
#define LM_P_LEAF2	0x20u
#define LM_NODESIZE	8u	/* lo(2) hi(2) flags(2) ksize(2), then the key */
#define LM_F_BIGDATA	0x01u	/* the data is an overflow page number */

static uint16_t le16_at(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/*
 * Is leaf page @pg sound: its bounds in order, every node inside the page
 * and in the free space's far side?  Reads see only the nodes they ask
 * for; a write moves the node table by the bounds (mdb_node_add(),
 * mdb_node_del()), so a damaged bound or node offset that every read
 * passes makes LMDB copy past the page at the next commit.
 */
static bool leaf_page_ok(const uint8_t *pg, size_t psize)
{
	uint16_t flags = le16_at(pg + 10), lower = le16_at(pg + 12),
		 upper = le16_at(pg + 14);
	unsigned i, n;

	if (!(flags & LM_P_LEAF) || (flags & LM_P_LEAF2) ||
	    lower < LM_PAGEHDRSZ || (lower - LM_PAGEHDRSZ) % 2 ||
	    upper < lower || upper > psize)
		return false;
	n = (lower - LM_PAGEHDRSZ) / 2;
	for (i = 0; i < n; i++) {
		size_t off = le16_at(pg + LM_PAGEHDRSZ + 2 * i), dsize;
		const uint8_t *node = pg + off;

		if (off < upper || off + LM_NODESIZE > psize)
			return false;
		dsize = le16_at(node) | (size_t)le16_at(node + 2) << 16;
		if (le16_at(node + 4) & LM_F_BIGDATA)
			dsize = sizeof(uint64_t);
		if (off + LM_NODESIZE + le16_at(node + 6) + dsize > psize)
			return false;
	}
	return true;
}

/* the leaf page record key @k lives in, checked once */
static bool key_page_ok(struct probe_map *pm, const MDB_val *k)
{
	uintptr_t pg = (uintptr_t)k->mv_data & ~(uintptr_t)(pm->psize - 1);

	if (!pm->psize || pg == pm->checked)
		return true;
	pm->checked = pg;
	return leaf_page_ok((const uint8_t *)pg, pm->psize);
}

/* read every record of @dbi, checking the leaf pages they are on; the
 * free list's (@dbi 0) records are checked too */
static int probe_db(MDB_txn *t, MDB_dbi dbi, struct probe_map *pm,
		    uint8_t *acc)
{
	MDB_cursor *c;
	MDB_val k, v;
	int rc = mdb_cursor_open(t, dbi, &c);

	if (rc)
		return rc;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		*acc = touch(&v, touch(&k, *acc));
		if ((dbi == 0 && bad_free_list(&v, pm->last_pg)) ||
		    !key_page_ok(pm, &k)) {
			rc = MDB_CORRUPTED;
			break;
		}
	}
	mdb_cursor_close(c);
	return rc == MDB_NOTFOUND ? 0 : rc;
}

/*
 * probe_env() - in the probe child: open @dir read-only, without the
 * lock file, and read every record of every database (the free list,
 * the main database and each named one): all a load will touch.
 * Return: an LMDB code.
 */
static int probe_env(const char *dir)
{
	MDB_env *env;
	MDB_txn *t;
	MDB_cursor *c;
	MDB_val k, v;
	MDB_dbi main_dbi, dbi;
	MDB_envinfo info;
	MDB_stat est;
	struct probe_map pm = { 0 };
	uint8_t acc = 0;
	char name[512];
	int rc = mdb_env_create(&env);

	if (rc)
		return rc;
	mdb_env_set_maxdbs(env, 16);
	rc = mdb_env_open(env, dir, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0600);
	if (!rc)
		rc = mdb_env_info(env, &info);
	if (!rc)
		rc = mdb_env_stat(env, &est);
	if (!rc)
		rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &t);
	if (rc)
		goto out;
	if (est.ms_psize == (size_t)sysconf(_SC_PAGESIZE))
		pm.psize = est.ms_psize;
	pm.last_pg = info.me_last_pgno;
	rc = probe_db(t, 0, &pm, &acc);	/* FREE_DBI */
	if (!rc)
		rc = mdb_dbi_open(t, NULL, 0, &main_dbi);
	if (!rc)
		rc = mdb_cursor_open(t, main_dbi, &c);
	if (rc)
		goto out_txn;
	for (rc = mdb_cursor_get(c, &k, &v, MDB_FIRST); !rc;
	     rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
		rc = MDB_CORRUPTED;	/* LMDB keys are shorter */
		if (k.mv_size >= sizeof(name) || !key_page_ok(&pm, &k))
			break;
		memcpy(name, k.mv_data, k.mv_size);
		name[k.mv_size] = '\0';
		rc = mdb_dbi_open(t, name, 0, &dbi);
		if (!rc)
			rc = probe_db(t, dbi, &pm, &acc);
		if (rc)
			break;
	}
	mdb_cursor_close(c);
	if (rc == MDB_NOTFOUND)
		rc = 0;
out_txn:
	mdb_txn_abort(t);
out:
	mdb_env_close(env);
	return rc;
}

/*
 * probe() - run probe_env() in a child process, so that a fault on a
 * damaged page (SIGBUS, SIGSEGV, an LMDB assertion) kills the child, not
 * the daemon; bounded in time by the file's size.  Return: 0 (it read
 * everything), 1 damaged (@why says how), or -errno.
 */
static int probe(const char *dir, char *why, size_t len)
{
	char path[PATH_MAX], msg[160] = "";
	struct stat sb;
	int p[2], status, timeout_s, null, rc;
	size_t got = 0;
	time_t deadline;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	if (stat(path, &sb) || sb.st_size == 0)
		return 0;	/* nothing to read: LMDB creates it */
	timeout_s = PROBE_BASE_S + (int)(sb.st_size / PROBE_BYTES_S);
	if (pipe2(p, O_CLOEXEC))
		return -errno;
	pid = fork();
	if (pid < 0) {
		rc = -errno;
		close(p[0]);
		close(p[1]);
		return rc;
	}
	if (pid == 0) {
		/* die of the signal itself; say nothing on the daemon's stderr */
		signal(SIGBUS, SIG_DFL);
		signal(SIGSEGV, SIG_DFL);
		null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (null >= 0) {
			dup2(null, STDOUT_FILENO);
			dup2(null, STDERR_FILENO);
		}
		rc = probe_env(dir);
		if (rc) {
			const char *s = mdb_strerror(rc);

			if (write(p[1], s, strlen(s)) < 0)
				_exit(2);
		}
		_exit(rc ? 1 : 0);
	}
	close(p[1]);
	deadline = time(NULL) + timeout_s;
	for (;;) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		time_t left = deadline - time(NULL);
		ssize_t n;
		int pr = left > 0 ? poll(&pfd, 1, (int)left * 1000) : 0;

		if (pr < 0 && errno == EINTR)
			continue;	/* a signal: not a reason to block in read() */
		if (pr == 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			close(p[0]);
			snprintf(why, len, "reading it through LMDB did not finish within %d s",
				 timeout_s);
			return 1;
		}
		n = read(p[0], msg + got, sizeof(msg) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (got += n) == sizeof(msg) - 1)
			break;
	}
	msg[got] = '\0';
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFSIGNALED(status)) {
		const char *sig = sigabbrev_np(WTERMSIG(status));

		snprintf(why, len, "reading it through LMDB died of SIG%s",
			 sig ? sig : "?");
		return 1;
	}
	if (WEXITSTATUS(status) == 0)
		return 0;
	snprintf(why, len, "reading it through LMDB failed: %s",
		 msg[0] ? msg : "unknown error");
	return 1;
}

/*
 * set_aside() - rename the index directory @dir to
 * @dir.broken-YYYYmmddTHHMMSSZ (never over another one) and create an
 * empty one in its place, with the one log line that says so.
 * Return: 0 or -errno.
 */
static int set_aside(const char *dir, const char *shown, const char *why)
{
	char aside[PATH_MAX], ts[32];
	const char *base, *slash;
	time_t now = time(NULL);
	struct tm tm;
	int i, rc;

	gmtime_r(&now, &tm);
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
	for (i = 0; i < 100; i++) {
		if (i)
			snprintf(aside, sizeof(aside), "%s.broken-%s-%d", dir, ts, i);
		else
			snprintf(aside, sizeof(aside), "%s.broken-%s", dir, ts);
		rc = renameat2(AT_FDCWD, dir, AT_FDCWD, aside, RENAME_NOREPLACE);
		if (!rc || errno != EEXIST)
			break;
	}
	if (rc || mkdir(dir, 0700)) {
		rc = -errno;
		log_err("cache index %s is damaged (%s) and cannot be moved aside: %s",
			shown, why, strerror(-rc));
		return rc;
	}
	/* the new name as the operator knows the directory */
	base = strrchr(aside, '/');
	slash = strrchr(shown, '/');
	log_err("cache index %s is damaged (%s): moved to %.*s%s; starting with an empty index (cached data will be fetched again)",
		shown, why, slash && base ? (int)(slash - shown) : 0, shown,
		slash && base ? base : aside);
	return 0;
}

/* LMDB's verdicts on a file that is not what it should be */
static bool lmdb_damage(int rc)
{
	return rc == MDB_INVALID || rc == MDB_CORRUPTED ||
	       rc == MDB_PAGE_NOTFOUND || rc == MDB_VERSION_MISMATCH ||
	       rc == MDB_INCOMPATIBLE;
}

/* the environment and its databases; an LMDB code (env closed on error) */
static int env_open(struct meta *m, const char *dir, size_t map_start)
{
	MDB_envinfo info;
	MDB_txn *t;
	int rc, stale, i;

	rc = mdb_env_create(&m->env);
	if (rc)
		return rc;
	mdb_env_set_mapsize(m->env, map_start);
	mdb_env_set_maxdbs(m->env, 8);
	mdb_env_set_maxreaders(m->env, 256);
	rc = mdb_env_open(m->env, dir, MDB_NOTLS, 0600);
	if (rc)
		goto out_env;
	/* a file grown by an earlier run may be larger than our start */
	mdb_env_info(m->env, &info);
	m->mapsize = info.me_mapsize;
	mdb_reader_check(m->env, &stale);
	rc = mdb_txn_begin(m->env, NULL, 0, &t);
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
		rc = mdb_dbi_open(t, "stopped", MDB_CREATE, &m->dbi_stopped);
	for (i = 0; i < 2 && !rc; i++)
		rc = mdb_dbi_open(t, ns_db_name[i], MDB_CREATE,
				  &m->dbi_objects[i]);
	if (rc) {
		mdb_txn_abort(t);
		goto out_env;
	}
	rc = mdb_txn_commit(t);
	if (!rc)
		return 0;
out_env:
	mdb_env_close(m->env);
	m->env = NULL;
	return rc;
}

/*
 * marked_broken() - did a run before this one mark @dir's index broken
 * (note_damage())?  Return: 1 with the reason in @why, or 0.
 */
static int marked_broken(const char *dir, char *why, size_t len)
{
	char path[PATH_MAX], buf[200];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/" BROKEN_MARK, dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : (snprintf(why, len,
			"marked broken by an earlier run"), 1);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	snprintf(why, len, "marked broken by an earlier run: %s",
		 buf[0] ? buf : "no reason given");
	return 1;
}

int meta_open_named(struct meta **out, const char *dir, const char *shown,
		    size_t map_start)
{
	struct meta *m = calloc(1, sizeof(*m));
	char why[256];
	int rc, lrc;

	if (!m)
		return -ENOMEM;
	pthread_rwlock_init(&m->map_lock, NULL);
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->done, NULL);
	m->dir = strdup(dir);
	m->shown = strdup(shown ? shown : dir);
	if (!m->dir || !m->shown) {
		rc = -ENOMEM;
		goto out_free;
	}
	if (mkdir(dir, 0700) && errno != EEXIST) {
		rc = -errno;
		goto out_free;
	}
	rc = marked_broken(dir, why, sizeof(why));
	if (rc == 0)
		rc = check_header(dir, why, sizeof(why));
	if (rc == 0)
		rc = probe(dir, why, sizeof(why));
	if (rc > 0)
		rc = set_aside(dir, m->shown, why);
	if (rc)
		goto out_free;
	/* what the checks cannot see, LMDB may still refuse: once more */
	lrc = env_open(m, dir, map_start);
	if (lmdb_damage(lrc)) {
		snprintf(why, sizeof(why), "LMDB: %s", mdb_strerror(lrc));
		rc = set_aside(dir, m->shown, why);
		if (rc)
			goto out_free;
		lrc = env_open(m, dir, map_start);
	}
	rc = mdb_err(lrc);
	if (rc)
		goto out_free;
	rc = bgthread_start(&m->writer, "meta-writer", META_BATCH_MS,
			    writer_tick, m);
	if (rc)
		goto out_env;
	*out = m;
	return 0;
out_env:
	mdb_env_close(m->env);
out_free:
	pthread_cond_destroy(&m->done);
	pthread_mutex_destroy(&m->lock);
	pthread_rwlock_destroy(&m->map_lock);
	free(m->dir);
	free(m->shown);
	free(m);
	return rc;
}

int meta_open_sized(struct meta **out, const char *dir, size_t map_start)
{
	return meta_open_named(out, dir, dir, map_start);
}

bool meta_broken(struct meta *m)
{
	return atomic_load(&m->broken);
}

int64_t meta_writer_busy_ms(struct meta *m)
{
	return bgthread_busy_ms(m->writer);
}

int meta_open(struct meta **out, const char *dir)
{
	return meta_open_sized(out, dir, META_MAPSIZE);
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
	pthread_rwlock_destroy(&m->map_lock);
	free(m->dir);
	free(m->shown);
	free(m);
}

int meta_get_str(struct meta *m, const char *key, char *buf, size_t len)
{
	MDB_val k = { strlen(key), (void *)key }, v;
	MDB_txn *t;
	int rc;

	rc = read_begin(m, &t);
	if (rc)
		return mdb_err(note_damage(m, rc, "read"));
	rc = mdb_get(t, m->dbi_meta, &k, &v);
	if (!rc) {
		size_t n = MIN(v.mv_size, len - 1);

		memcpy(buf, v.mv_data, n);
		buf[n] = '\0';
	}
	read_end(m, t);
	return rc == MDB_NOTFOUND ? -ENOENT :
	       mdb_err(note_damage(m, rc, "read"));
}

struct put_str {
	const char *key, *val;
};

static int put_str_fn(struct meta *m, MDB_txn *t, void *arg)
{
	const struct put_str *p = arg;
	MDB_val k = { strlen(p->key), (void *)p->key };
	MDB_val v = { strlen(p->val), (void *)p->val };

	return mdb_put(t, m->dbi_meta, &k, &v, 0);
}

int meta_put_str(struct meta *m, const char *key, const char *val)
{
	struct put_str p = { key, val };

	return write_txn(m, put_str_fn, &p);
}

static int wipe_fn(struct meta *m, MDB_txn *t, void *arg)
{
	int rc = mdb_drop(t, m->dbi_files, 0);

	if (!rc)
		rc = mdb_drop(t, m->dbi_chunks, 0);
	if (!rc)
		rc = mdb_drop(t, m->dbi_heat, 0);
	if (!rc)
		rc = mdb_drop(t, m->dbi_stopped, 0);
	return rc;
}

int meta_wipe_cache(struct meta *m)
{
	return write_txn(m, wipe_fn, NULL);
}

/* ---- the namespace cache ---- */

/* index of the current namespace database (0 if none was ever chosen) */
static int ns_current(struct meta *m)
{
	char slot[4];

	return !meta_get_str(m, NS_SLOT_KEY, slot, sizeof(slot)) &&
	       !strcmp(slot, "1");
}

static int ns_clear_fn(struct meta *m, MDB_txn *t, void *arg)
{
	const struct meta_ns_txn *ns = arg;

	return mdb_drop(t, m->dbi_objects[ns->slot], 0);
}

static int ns_write_fn(struct meta *m, MDB_txn *t, void *arg)
{
	const struct meta_ns_txn *ns = arg;
	size_t off = 0;
	int rc = 0;

	while (!rc && off < ns->len) {
		MDB_val k = { FID_KEY_LEN, ns->buf + off }, v;
		uint32_t vlen;

		memcpy(&vlen, ns->buf + off + FID_KEY_LEN, sizeof(vlen));
		v.mv_size = vlen;
		v.mv_data = ns->buf + off + FID_KEY_LEN + sizeof(vlen);
		/* keys rise: appended to the last page, which fills */
		rc = mdb_put(t, m->dbi_objects[ns->slot], &k, &v, MDB_APPEND);
		off += FID_KEY_LEN + sizeof(vlen) + vlen;
	}
	return rc;
}

static int ns_flip_fn(struct meta *m, MDB_txn *t, void *arg)
{
	const struct meta_ns_txn *ns = arg;
	MDB_val k = { strlen(NS_SLOT_KEY), NS_SLOT_KEY };
	MDB_val v = { 1, ns->slot ? "1" : "0" };

	return mdb_put(t, m->dbi_meta, &k, &v, 0);
}

/* write what gathered in @t in one short transaction */
static int ns_flush(struct meta_ns_txn *t)
{
	int rc;

	if (!t->len)
		return 0;
	rc = t->discard ? 0 : write_txn(t->m, ns_write_fn, t);
	t->len = 0;
	if (rc && atomic_load(&t->m->broken)) {
		t->discard = true;	/* the listing goes on, unstored */
		rc = 0;
	}
	return rc;
}

static void ns_free(struct meta_ns_txn *t)
{
	pthread_mutex_lock(&t->m->lock);
	t->m->ns_busy = false;
	pthread_mutex_unlock(&t->m->lock);
	free(t->buf);
	free(t);
}

int meta_ns_begin(struct meta *m, struct meta_ns_txn **out)
{
	struct meta_ns_txn *t = calloc(1, sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	pthread_mutex_lock(&m->lock);
	rc = m->ns_busy ? -EBUSY : 0;
	m->ns_busy = true;
	pthread_mutex_unlock(&m->lock);
	if (rc) {
		free(t);
		return rc;
	}
	t->m = m;
	t->slot = !ns_current(m);
	rc = write_txn(m, ns_clear_fn, t);
	if (rc && atomic_load(&m->broken)) {
		t->discard = true;	/* list all the same, store nothing */
		rc = 0;
	}
	if (rc) {
		ns_free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int meta_ns_add(struct meta_ns_txn *t, const char *key, size_t len,
		const struct ns_attr *a)
{
	size_t need = FID_KEY_LEN + 4 + 2 + ATTR_REC_MAX + len + RECFMT_SEAL;
	uint8_t *p;
	uint32_t vlen;
	size_t alen;

	if (len > UINT32_MAX / 2)
		return -ENAMETOOLONG;
	if (t->len + need > t->cap) {
		size_t cap = MAX(t->cap * 2, t->len + need);

		p = realloc(t->buf, cap);
		if (!p)
			return -ENOMEM;
		t->buf = p;
		t->cap = cap;
	}
	/*
	 * Keyed by arrival order, not by name: names may exceed LMDB's
	 * 511-byte key limit, and nothing looks a record up (loads walk the
	 * database).  Rising keys are appended (MDB_APPEND): full pages,
	 * written once.  They were a hash of the name, whose random order
	 * dirtied a leaf page for nearly every record of every transaction
	 * and left pages half full (the 10-million-file benchmark wrote 1.6
	 * GiB of LMDB).
	 */
	p = t->buf + t->len;
	fid_key(p, ++t->seq);
	alen = attr_rec_encode(p + FID_KEY_LEN + 4 + 2, a);
	p[FID_KEY_LEN + 4] = alen & 0xff;
	p[FID_KEY_LEN + 4 + 1] = alen >> 8;
	memcpy(p + FID_KEY_LEN + 4 + 2 + alen, key, len);
	vlen = rec_seal(p + FID_KEY_LEN + 4, 2 + alen + len, p, FID_KEY_LEN);
	memcpy(p + FID_KEY_LEN, &vlen, sizeof(vlen));
	t->len += FID_KEY_LEN + 4 + vlen;
	return t->len >= NS_BATCH_BYTES ? ns_flush(t) : 0;
}

int meta_ns_commit(struct meta_ns_txn *t)
{
	int rc = ns_flush(t);

	if (!rc)
		rc = t->discard ? -EIO : write_txn(t->m, ns_flip_fn, t);
	ns_free(t);
	return rc;
}

void meta_ns_abort(struct meta_ns_txn *t)
{
	ns_free(t);	/* what was written stays unused until the next begin */
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

	rc = read_begin(m, &t);
	if (rc)
		return mdb_err(note_damage(m, rc, "read"));
	rc = mdb_cursor_open(t, dbi, &c);
	if (rc) {
		read_end(m, t);
		return mdb_err(note_damage(m, rc, "read"));
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
	read_end(m, t);
	if (rc == MDB_NOTFOUND)
		return 0;
	return rc < 0 && rc > -4096 ? rc : mdb_err(note_damage(m, rc, "read"));
}

struct load_ctx {
	void *fn;
	void *arg;
	long count;
	long damaged;	/* records skipped as damaged */
};

static int ns_each(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct load_ctx *l = ctx;
	int (*fn)(void *, const char *, size_t, const struct ns_attr *) = l->fn;
	const uint8_t *p = v->mv_data;
	struct ns_attr a;
	size_t alen, vlen;

	/* attrlen(2), the attributes (their format byte first), the name */
	if (v->mv_size < 3 ||
	    rec_unseal(p, v->mv_size, p[2], k->mv_data, k->mv_size, &vlen))
		goto damaged;
	alen = p[0] | (size_t)p[1] << 8;
	if (2 + alen >= vlen || attr_rec_decode(p + 2, alen, &a))
		goto damaged;
	l->count++;
	return fn(l->arg, (const char *)p + 2 + alen, vlen - 2 - alen, &a);
damaged:
	l->damaged++;
	return 0;
}

long meta_ns_load(struct meta *m, int (*fn)(void *arg, const char *key,
		  size_t len, const struct ns_attr *a), void *arg)
{
	struct load_ctx l = { (void *)fn, arg, 0, 0 };
	int rc = walk(m, m->dbi_objects[ns_current(m)], ns_each, &l);

	if (!rc && l.damaged)
		rc = -EBADMSG;
	return rc ? rc : l.count;
}

/* the bytes of stored value @v under @k to decode (rec_unseal()), or 0 */
static size_t unsealed(const MDB_val *k, const MDB_val *v)
{
	const uint8_t *p = v->mv_data;
	size_t body;

	if (!v->mv_size ||
	    rec_unseal(p, v->mv_size, p[0], k->mv_data, k->mv_size, &body))
		return 0;
	return body;
}

static int files_each(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct load_ctx *l = ctx;
	int (*fn)(void *, uint64_t, const struct file_rec *) = l->fn;
	struct file_rec r;

	if (k->mv_size != FID_KEY_LEN ||
	    file_rec_decode(v->mv_data, unsealed(k, v), &r))
		return 0;
	return fn(l->arg, fid_from_key(k->mv_data), &r);
}

int meta_files_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		    const struct file_rec *r), void *arg)
{
	struct load_ctx l = { (void *)fn, arg, 0, 0 };

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
	    chunk_rec_decode(v->mv_data, unsealed(k, v), &r))
		return 0;
	chunk_from_key(k->mv_data, &fid, &n);
	return fn(l->arg, fid, n, &r);
}

int meta_chunks_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		     uint32_t n, const struct chunk_rec *r), void *arg)
{
	struct load_ctx l = { (void *)fn, arg, 0, 0 };

	return walk(m, m->dbi_chunks, chunks_each, &l);
}

static int heat_each(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct load_ctx *l = ctx;
	int (*fn)(void *, uint64_t, const struct heat_rec *) = l->fn;
	struct heat_rec r;

	if (k->mv_size != FID_KEY_LEN ||
	    heat_rec_decode(v->mv_data, unsealed(k, v), &r))
		return 0;
	return fn(l->arg, fid_from_key(k->mv_data), &r);
}

int meta_heat_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		   const struct heat_rec *r), void *arg)
{
	struct load_ctx l = { (void *)fn, arg, 0, 0 };

	return walk(m, m->dbi_heat, heat_each, &l);
}

/* ---- clean-stop records ---- */

static int stopped_each(void *ctx, const MDB_val *k, const MDB_val *v)
{
	struct load_ctx *l = ctx;
	int (*fn)(void *, uint64_t, const struct stop_rec *) = l->fn;
	struct stop_rec r;

	if (k->mv_size != FID_KEY_LEN ||
	    stop_rec_decode(v->mv_data, unsealed(k, v), &r))
		return 0;
	return fn(l->arg, fid_from_key(k->mv_data), &r);
}

int meta_stopped_load(struct meta *m, int (*fn)(void *arg, uint64_t fid,
		      const struct stop_rec *r), void *arg)
{
	struct load_ctx l = { (void *)fn, arg, 0, 0 };

	return walk(m, m->dbi_stopped, stopped_each, &l);
}

static int stopped_clear_fn(struct meta *m, MDB_txn *t, void *arg)
{
	return mdb_drop(t, m->dbi_stopped, 0);
}

int meta_stopped_clear(struct meta *m)
{
	return write_txn(m, stopped_clear_fn, NULL);
}

struct stopped_put {
	const uint64_t *fid;
	const struct stop_rec *r;
	size_t n;
};

static int stopped_put_fn(struct meta *m, MDB_txn *t, void *arg)
{
	const struct stopped_put *p = arg;
	uint8_t kb[FID_KEY_LEN], vb[STOP_REC_LEN + RECFMT_SEAL];
	MDB_val k = { FID_KEY_LEN, kb }, v = { 0, vb };
	int rc = mdb_drop(t, m->dbi_stopped, 0);

	for (size_t i = 0; i < p->n && !rc; i++) {
		fid_key(kb, p->fid[i]);
		v.mv_size = rec_seal(vb, stop_rec_encode(vb, &p->r[i]), kb,
				     FID_KEY_LEN);
		rc = mdb_put(t, m->dbi_stopped, &k, &v, 0);
	}
	return rc;
}

int meta_stopped_write(struct meta *m, const uint64_t *fid,
		       const struct stop_rec *r, size_t n)
{
	struct stopped_put p = { fid, r, n };

	return write_txn(m, stopped_put_fn, &p);
}
