/* SPDX-License-Identifier: MIT */
/*
 * cachenv.h - a cache, fetcher and index over the in-memory backend in a
 * temporary directory, and helpers to read through them: shared by the
 * unit tests of cache.c, fetch.c and meta.c.  Header only (the runner's
 * counters are per test program).
 */
#ifndef FUSEFS_CACHENV_H
#define FUSEFS_CACHENV_H

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_mem.h"
#include "cache.h"
#include "fetch.h"
#include "hash.h"
#include "log.h"
#include "meta.h"
#include "ns.h"
#include "runner.h"

#define CS	(1U << 20)

struct env {
	char dir[64];
	struct fusefs_conf cf;
	struct stats st;
	struct meta *meta;
	struct cache *cache;
	struct fetcher *fetch;
	struct backend *be;
};

static inline void env_start(struct env *e)
{
	char path[128];

	memset(&e->st, 0, sizeof(e->st));
	snprintf(path, sizeof(path), "%s/index", e->dir);
	CHECK_INT(meta_open(&e->meta, path), ==, 0);
	CHECK_INT(cache_open(&e->cache, &e->cf, e->meta, &e->st), ==, 0);
	CHECK_INT(fetch_create(&e->fetch, e->cache, e->be, &e->cf, &e->st), ==, 0);
}

static inline void env_stop(struct env *e)
{
	fetch_destroy(e->fetch);
	cache_close(e->cache);
	meta_close(e->meta);
}

/*
 * env_restart() - a clean stop, then a start with --trust-clean-stop
 * @trust: off, the start finds every chunk UNVERIFIED as after a crash.
 */
static inline void env_restart(struct env *e, bool trust)
{
	env_stop(e);
	e->cf.trust_stop = trust;
	env_start(e);
}

/*
 * env_init_ahead() - a cache over the in-memory backend.  @ahead_ms is
 * --ahead-time: the bound on speculative reads in flight follows the
 * link's measured rate, which depends on how fast this machine runs the
 * test, so only the tests of that bound set it; env_init() leaves it off.
 */
static inline void env_init_ahead(struct env *e, uint64_t cache_size,
				  unsigned readahead, enum read_mode mode,
				  unsigned ahead_ms)
{
	strcpy(e->dir, "/tmp/fusefs-unit-XXXXXX");
	CHECK(mkdtemp(e->dir) != NULL);
	conf_init(&e->cf);
	e->cf.cache_dir = strdup(e->dir);
	e->cf.chunk_size = CS;
	e->cf.cache_size = cache_size;
	e->cf.readahead = readahead;
	e->cf.retries = 2;
	e->cf.read_mode = mode;
	e->cf.ahead_ms = ahead_ms;
	e->be = mem_backend_create();
	env_start(e);
}

static inline void env_init(struct env *e, uint64_t cache_size, unsigned readahead,
			    enum read_mode mode)
{
	env_init_ahead(e, cache_size, readahead, mode, 0);
}

/* env_random_reads() - --random-reads pages (@pages) or chunks from now */
static inline void env_random_reads(struct env *e, bool pages)
{
	fetch_destroy(e->fetch);
	e->cf.page_reads = pages;
	CHECK_INT(fetch_create(&e->fetch, e->cache, e->be, &e->cf, &e->st), ==, 0);
}

static inline void env_fini(struct env *e)
{
	char cmd[128];

	env_stop(e);
	mem_backend_destroy(e->be);
	conf_release(&e->cf);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", e->dir);
	CHECK_INT(system(cmd), ==, 0);
}

static inline char *pattern(size_t len, unsigned seed)
{
	char *p = malloc(len ? len : 1);
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (char)((i * 2654435761U + seed) >> 13);
	return p;
}

struct result {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
	char *buf;
	size_t len;
};

static inline void result_done(void *arg, int err, const struct fetch_piece *p, int n)
{
	struct result *r = arg;
	int i;

	pthread_mutex_lock(&r->lock);
	r->err = err;
	r->len = 0;
	for (i = 0; i < n; i++) {
		if (p[i].mem) {
			memcpy(r->buf + r->len, p[i].mem, p[i].len);
		} else if (pread(p[i].fd, r->buf + r->len, p[i].len,
				 p[i].off) != (ssize_t)p[i].len) {
			r->err = -EIO;
		}
		r->len += p[i].len;
	}
	r->done = true;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static inline void result_init(struct result *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	r->buf = malloc(cap);
}

static inline void result_wait(struct result *r)
{
	pthread_mutex_lock(&r->lock);
	while (!r->done)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
}

/* read [off, off+len) through the read path; returns bytes or -errno */
static inline ssize_t do_read(struct env *e, struct centry *ce, uint64_t off,
		       size_t len, char *out)
{
	struct result r;
	ssize_t ret;
	int rc;

	result_init(&r, len + 1);
	rc = fetch_read(e->fetch, ce, off, len, result_done, &r);
	if (rc < 0) {
		free(r.buf);
		return rc;
	}
	result_wait(&r);
	ret = r.err ? r.err : (ssize_t)r.len;
	if (!r.err)
		memcpy(out, r.buf, r.len);
	free(r.buf);
	return ret;
}

/* whole file in 256 KiB reads, as the kernel would ask */
static inline int read_all(struct env *e, struct centry *ce, char *out, size_t size)
{
	uint64_t off;

	for (off = 0; off < size; off += 256 << 10) {
		ssize_t r = do_read(e, ce, off, 256 << 10, out + off);

		if (r < 0)
			return (int)r;
		if ((size_t)r != MIN((size_t)256 << 10, size - off))
			return -EIO;
	}
	return 0;
}

static inline struct centry *attach(struct env *e, const char *key, bool *changed)
{
	struct centry *ce = NULL;
	struct ns_attr a;
	bool dummy;

	CHECK_INT(e->be->ops->stat(e->be, key, &a), ==, 0);
	CHECK_INT(cache_attach(e->cache, hash64(key, strlen(key), 3), key, &a,
			       &ce, changed ? changed : &dummy), ==, 0);
	return ce;
}

/* valid bytes per chunk of an object of @size */
static inline void check_chunk_len(struct env *e, size_t size, uint32_t n,
			    uint32_t want)
{
	char key[32], *data = pattern(size, 7);
	struct centry *ce;

	snprintf(key, sizeof(key), "len-%zu", size);
	mem_put(e->be, key, data, size);
	ce = attach(e, key, NULL);
	CHECK_INT(cache_chunk_len(e->cache, ce, n), ==, want);
	cache_detach(e->cache, ce);
	free(data);
}

#endif
