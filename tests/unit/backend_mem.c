// SPDX-License-Identifier: MIT
/* backend_mem.c - see backend_mem.h */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_mem.h"
#include "compiler.h"

struct mobj {
	char key[256];
	char *data;
	size_t len;
	unsigned version;
	struct mobj *next;
};

struct mem_be {
	struct backend base;
	pthread_mutex_t lock;
	struct mobj *objs;
	bool hold;
	char hold_key[256];	/* mem_hold_key(): only this one's reads */
	struct backend_read *held[256];
	int nheld;
	int fail_n, fail_err;
	unsigned reads;
};

static struct mem_be *mbe(struct backend *be)
{
	return container_of(be, struct mem_be, base);
}

static struct mobj *find(struct mem_be *m, const char *key)
{
	struct mobj *o;

	for (o = m->objs; o; o = o->next)
		if (!strcmp(o->key, key))
			return o;
	return NULL;
}

void mem_put(struct backend *be, const char *key, const void *data,
	     size_t len)
{
	struct mem_be *m = mbe(be);
	struct mobj *o;

	pthread_mutex_lock(&m->lock);
	o = find(m, key);
	if (!o) {
		o = calloc(1, sizeof(*o));
		snprintf(o->key, sizeof(o->key), "%s", key);
		o->next = m->objs;
		m->objs = o;
	}
	free(o->data);
	o->data = malloc(len ? len : 1);
	memcpy(o->data, data, len);
	o->len = len;
	o->version++;
	pthread_mutex_unlock(&m->lock);
}

/* complete @rd now; called without the lock */
static void serve(struct mem_be *m, struct backend_read *rd)
{
	struct mobj *o;
	ssize_t ret;
	char v[16];

	pthread_mutex_lock(&m->lock);
	m->reads++;
	o = find(m, rd->key);
	if (m->fail_n > 0) {
		m->fail_n--;
		ret = m->fail_err;
	} else if (!o) {
		ret = -ENOENT;
	} else {
		snprintf(v, sizeof(v), "%u", o->version);
		if (rd->version[0] && strcmp(v, rd->version)) {
			ret = -ESTALE;
		} else if (rd->off >= o->len) {
			ret = 0;
		} else {
			ret = MIN(rd->len, o->len - rd->off);
			memcpy(rd->buf, o->data + rd->off, ret);
		}
	}
	pthread_mutex_unlock(&m->lock);
	rd->done(rd, ret);
}

static int mem_read(struct backend *be, struct backend_read *rd)
{
	struct mem_be *m = mbe(be);

	pthread_mutex_lock(&m->lock);
	if ((m->hold || (m->hold_key[0] && !strcmp(m->hold_key, rd->key))) &&
	    m->nheld < (int)ARRAY_SIZE(m->held)) {
		m->held[m->nheld++] = rd;
		pthread_mutex_unlock(&m->lock);
		return 0;
	}
	pthread_mutex_unlock(&m->lock);
	serve(m, rd);
	return 0;
}

static int mem_stat(struct backend *be, const char *key, struct ns_attr *a)
{
	struct mem_be *m = mbe(be);
	struct mobj *o;

	pthread_mutex_lock(&m->lock);
	o = find(m, key);
	if (o) {
		memset(a, 0, sizeof(*a));
		a->size = o->len;
		snprintf(a->version, sizeof(a->version), "%u", o->version);
	}
	pthread_mutex_unlock(&m->lock);
	return o ? 0 : -ENOENT;
}

static int mem_list(struct backend *be, backend_list_fn fn, void *arg)
{
	struct mem_be *m = mbe(be);
	struct ns_attr a;
	struct mobj *o;

	for (o = m->objs; o; o = o->next) {
		mem_stat(be, o->key, &a);
		fn(arg, o->key, strlen(o->key), &a);
	}
	return 0;
}

void mem_hold(struct backend *be)
{
	struct mem_be *m = mbe(be);

	pthread_mutex_lock(&m->lock);
	m->hold = true;
	pthread_mutex_unlock(&m->lock);
}

void mem_hold_key(struct backend *be, const char *key)
{
	struct mem_be *m = mbe(be);

	pthread_mutex_lock(&m->lock);
	snprintf(m->hold_key, sizeof(m->hold_key), "%s", key);
	pthread_mutex_unlock(&m->lock);
}

void mem_release(struct backend *be)
{
	struct mem_be *m = mbe(be);
	struct backend_read *held[256];
	int i, n;

	pthread_mutex_lock(&m->lock);
	m->hold = false;
	m->hold_key[0] = 0;
	n = m->nheld;
	memcpy(held, m->held, n * sizeof(held[0]));
	m->nheld = 0;
	pthread_mutex_unlock(&m->lock);
	for (i = 0; i < n; i++)
		serve(m, held[i]);
}

void mem_fail(struct backend *be, int n, int err)
{
	struct mem_be *m = mbe(be);

	pthread_mutex_lock(&m->lock);
	m->fail_n = n;
	m->fail_err = err;
	pthread_mutex_unlock(&m->lock);
}

unsigned mem_reads(struct backend *be)
{
	struct mem_be *m = mbe(be);
	unsigned r;

	pthread_mutex_lock(&m->lock);
	r = m->reads;
	pthread_mutex_unlock(&m->lock);
	return r;
}

static const struct backend_ops mem_ops = {
	.scheme = "mem",
	.list = mem_list,
	.stat = mem_stat,
	.read = mem_read,
};

struct backend *mem_backend_create(void)
{
	struct mem_be *m = calloc(1, sizeof(*m));

	m->base.ops = &mem_ops;
	pthread_mutex_init(&m->lock, NULL);
	return &m->base;
}

void mem_backend_destroy(struct backend *be)
{
	struct mem_be *m = mbe(be);
	struct mobj *o, *next;

	for (o = m->objs; o; o = next) {
		next = o->next;
		free(o->data);
		free(o);
	}
	free(m);
}
