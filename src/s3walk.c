// SPDX-License-Identifier: MIT
/* s3walk.c - see s3walk.h */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bgthread.h"
#include "compiler.h"
#include "s3walk.h"

#define MAX_STREAMS	16
#define BATCHES_MAX	8	/* pages waiting for the consumer, at most */

/* a prefix to list */
struct item {
	struct item *next;
	unsigned depth;
	size_t len;
	char prefix[];
};

/* one page's keys, packed: struct ent, the key, padding to 8 */
struct batch {
	struct batch *next;
	char *p;
	size_t len, cap;
};

struct ent {
	size_t len;
	struct ns_attr a;
};

/* the shared state of one walk */
struct walk {
	s3walk_prefix_fn list;
	void *arg;
	s3walk_key_fn key;
	void *karg;
	unsigned split_depth;
	bool direct;		/* one stream, on the consumer's thread */

	pthread_mutex_t lock;	/* everything below */
	pthread_cond_t work;	/* an item was queued, or the walk ended */
	pthread_cond_t room;	/* a batch was taken */
	pthread_cond_t out;	/* a batch was queued, or a stream ended */
	struct item *head, *tail;
	unsigned active;	/* items being listed */
	unsigned running;	/* streams not yet ended */
	struct batch *bhead, *btail;
	unsigned nbatches;
	int rc;			/* the first error */
};

/* one stream: what the prefix function's calls are about */
struct s3walk {
	struct walk *w;
	unsigned depth;		/* of the item being listed */
	struct batch *b;	/* keys of the page being read */
};

static void fail_locked(struct walk *w, int rc)
{
	if (rc && !w->rc) {
		w->rc = rc;
		pthread_cond_broadcast(&w->work);
		pthread_cond_broadcast(&w->room);
		pthread_cond_broadcast(&w->out);
	}
}

static int push_locked(struct walk *w, const char *prefix, size_t len,
		       unsigned depth)
{
	struct item *it = malloc(sizeof(*it) + len + 1);

	if (!it)
		return -ENOMEM;
	it->next = NULL;
	it->depth = depth;
	it->len = len;
	memcpy(it->prefix, prefix, len);
	it->prefix[len] = '\0';
	if (w->tail)
		w->tail->next = it;
	else
		w->head = it;
	w->tail = it;
	pthread_cond_signal(&w->work);
	return 0;
}

int s3walk_sub(struct s3walk *s, const char *parent, size_t plen,
	       const char *prefix, size_t len)
{
	struct walk *w = s->w;
	int rc;

	if (len <= plen || memcmp(prefix, parent, plen))
		return -EBADMSG;
	if (memchr(prefix, '\0', len))
		return 0;	/* cannot be asked for; its keys are skipped */
	pthread_mutex_lock(&w->lock);
	rc = w->rc ? w->rc : push_locked(w, prefix, len, s->depth + 1);
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int s3walk_failed(struct s3walk *s)
{
	int rc;

	pthread_mutex_lock(&s->w->lock);
	rc = s->w->rc;
	pthread_mutex_unlock(&s->w->lock);
	return rc;
}

int s3walk_key(struct s3walk *s, const char *key, size_t len,
	       const struct ns_attr *a)
{
	size_t need = (sizeof(struct ent) + len + 7) & ~(size_t)7;
	struct batch *b = s->b;
	struct ent e = { .len = len, .a = *a };

	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b)
			return -ENOMEM;
		s->b = b;
	}
	if (b->len + need > b->cap) {
		size_t cap = MAX(b->cap * 2, MAX(need, (size_t)64 << 10));
		char *p = realloc(b->p, cap);

		if (!p)
			return -ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, &e, sizeof(e));
	memcpy(b->p + b->len + sizeof(e), key, len);
	b->len += need;
	return 0;
}

/* hand every key of @b to the consumer's function; on its thread */
static int deliver(struct walk *w, const struct batch *b)
{
	size_t off = 0;
	int rc = 0;

	while (!rc && off < b->len) {
		struct ent e;

		memcpy(&e, b->p + off, sizeof(e));
		rc = w->key(w->karg, b->p + off + sizeof(e), e.len, &e.a);
		off += (sizeof(e) + e.len + 7) & ~(size_t)7;
	}
	return rc;
}

static void batch_free(struct batch *b)
{
	if (b) {
		free(b->p);
		free(b);
	}
}

int s3walk_page_end(struct s3walk *s)
{
	struct walk *w = s->w;
	struct batch *b = s->b;
	int rc;

	if (!b || !b->len)
		return s3walk_failed(s);
	if (w->direct) {
		rc = deliver(w, b);
		b->len = 0;
		return rc;
	}
	s->b = NULL;
	pthread_mutex_lock(&w->lock);
	while (!w->rc && w->nbatches >= BATCHES_MAX)
		pthread_cond_wait(&w->room, &w->lock);
	rc = w->rc;
	if (!rc) {
		if (w->btail)
			w->btail->next = b;
		else
			w->bhead = b;
		w->btail = b;
		w->nbatches++;
		pthread_cond_signal(&w->out);
		b = NULL;
	}
	pthread_mutex_unlock(&w->lock);
	batch_free(b);
	return rc;
}

/* list queued prefixes until none is left and none is being listed */
static void stream_run(struct walk *w)
{
	struct s3walk s = { .w = w };
	struct item *it;
	int rc;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->rc && !w->head && w->active)
			pthread_cond_wait(&w->work, &w->lock);
		if (w->rc || !w->head)
			break;
		it = w->head;
		w->head = it->next;
		if (!w->head)
			w->tail = NULL;
		w->active++;
		pthread_mutex_unlock(&w->lock);

		s.depth = it->depth;
		rc = w->list(w->arg, &s, it->prefix, it->len,
			     it->depth < w->split_depth);
		if (!rc)
			rc = s3walk_page_end(&s);	/* a forgotten last page */
		free(it);

		pthread_mutex_lock(&w->lock);
		w->active--;
		fail_locked(w, rc);
		if (!w->active && !w->head)
			pthread_cond_broadcast(&w->work);	/* the end */
	}
	w->running--;
	pthread_cond_broadcast(&w->out);
	pthread_mutex_unlock(&w->lock);
	batch_free(s.b);
}

static void *stream_main(void *arg)
{
	pthread_setname_np(pthread_self(), "fusefs-s3list");
	stream_run(arg);
	return NULL;
}

/* take batches and deliver them until every stream has ended */
static int consume(struct walk *w)
{
	struct batch *b;
	int rc;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (!w->bhead && w->running && !w->rc)
			pthread_cond_wait(&w->out, &w->lock);
		b = w->rc ? NULL : w->bhead;
		if (!b)
			break;
		w->bhead = b->next;
		if (!w->bhead)
			w->btail = NULL;
		w->nbatches--;
		pthread_cond_signal(&w->room);
		pthread_mutex_unlock(&w->lock);
		rc = deliver(w, b);
		batch_free(b);
		pthread_mutex_lock(&w->lock);
		fail_locked(w, rc);
	}
	rc = w->rc;
	pthread_mutex_unlock(&w->lock);
	return rc;
}

int s3walk_run(unsigned streams, unsigned split_depth, const char *root,
	       size_t rlen, s3walk_prefix_fn list, void *arg,
	       s3walk_key_fn key, void *karg)
{
	struct walk w = { .list = list, .arg = arg, .key = key, .karg = karg,
			  .split_depth = split_depth };
	pthread_t t[MAX_STREAMS];
	unsigned i, n = 0;
	struct item *it;
	struct batch *b;
	int rc;

	streams = MAX(1U, MIN(streams, (unsigned)MAX_STREAMS));
	w.direct = streams == 1;
	pthread_mutex_init(&w.lock, NULL);
	pthread_cond_init(&w.work, NULL);
	pthread_cond_init(&w.room, NULL);
	pthread_cond_init(&w.out, NULL);
	rc = push_locked(&w, root, rlen, 0);	/* nobody else yet */
	if (rc)
		goto out;
	if (w.direct) {
		w.running = 1;
		stream_run(&w);
		rc = w.rc;
		goto out;
	}
	w.running = streams;
	for (i = 0; i < streams; i++) {
		rc = thread_spawn(&t[n], stream_main, &w);
		if (rc)
			break;
		n++;
	}
	if (n < streams) {
		pthread_mutex_lock(&w.lock);
		w.running -= streams - n;	/* never started */
		fail_locked(&w, n ? 0 : rc);
		pthread_mutex_unlock(&w.lock);
	}
	rc = consume(&w);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);
out:
	while ((it = w.head)) {
		w.head = it->next;
		free(it);
	}
	while ((b = w.bhead)) {
		w.bhead = b->next;
		batch_free(b);
	}
	pthread_cond_destroy(&w.out);
	pthread_cond_destroy(&w.room);
	pthread_cond_destroy(&w.work);
	pthread_mutex_destroy(&w.lock);
	return rc;
}
