// SPDX-License-Identifier: MIT
/* memchunk.c - see memchunk.h */
#include <errno.h>
#include <stdlib.h>

#include "memchunk.h"

int memchunks_init(struct memchunks *m, unsigned max)
{
	m->slot = calloc(max ? max : 1, sizeof(*m->slot));
	m->max = max ? max : 1;
	m->clock = 0;
	return m->slot ? 0 : -ENOMEM;
}

void memchunks_release(struct memchunks *m)
{
	unsigned i;

	for (i = 0; m->slot && i < m->max; i++)
		chunkbuf_put(m->slot[i].cb);
	free(m->slot);
	m->slot = NULL;
}

static struct memchunk_slot *find(const struct memchunks *m, uint64_t fid,
				  uint64_t gen, uint32_t n)
{
	unsigned i;

	for (i = 0; i < m->max; i++) {
		struct memchunk_slot *s = &m->slot[i];

		if (s->cb && s->fid == fid && s->gen == gen && s->n == n)
			return s;
	}
	return NULL;
}

bool memchunks_has(const struct memchunks *m, uint64_t fid, uint64_t gen,
		   uint32_t n)
{
	return find(m, fid, gen, n) != NULL;
}

struct chunkbuf *memchunks_get(struct memchunks *m, uint64_t fid,
			       uint64_t gen, uint32_t n)
{
	struct memchunk_slot *s = find(m, fid, gen, n);

	if (!s)
		return NULL;
	s->stamp = ++m->clock;
	return s->cb;
}

void memchunks_put(struct memchunks *m, uint64_t fid, uint64_t gen,
		   uint32_t n, struct chunkbuf *cb)
{
	struct memchunk_slot *s = find(m, fid, gen, n), *t;
	unsigned i;

	if (s && s->holds)
		return;			/* the same bytes, held: they stay */
	for (i = 0; !s && i < m->max; i++)	/* an empty slot */
		if (!m->slot[i].cb)
			s = &m->slot[i];
	if (!s) {				/* else the LRU not held */
		for (i = 0; i < m->max; i++) {
			t = &m->slot[i];
			if (!t->holds && (!s || t->stamp < s->stamp))
				s = t;
		}
		if (!s)
			return;		/* every slot held: not kept */
	}
	chunkbuf_get(cb);
	chunkbuf_put(s->cb);
	s->fid = fid;
	s->gen = gen;
	s->n = n;
	s->cb = cb;
	s->stamp = ++m->clock;
}

bool memchunks_reclaim(struct memchunks *m)
{
	struct memchunk_slot *lru = NULL;
	unsigned i;

	for (i = 0; i < m->max; i++) {
		struct memchunk_slot *s = &m->slot[i];

		if (s->cb && !s->holds && chunkbuf_refs(s->cb) == 1 &&
		    (!lru || s->stamp < lru->stamp))
			lru = s;
	}
	if (!lru)
		return false;
	chunkbuf_put(lru->cb);
	lru->cb = NULL;
	lru->stamp = 0;
	return true;
}

void memchunks_drop(struct memchunks *m, uint64_t fid, uint64_t gen)
{
	unsigned i;

	for (i = 0; i < m->max; i++) {
		struct memchunk_slot *s = &m->slot[i];

		if (s->cb && !s->holds && s->fid == fid && s->gen == gen) {
			chunkbuf_put(s->cb);
			s->cb = NULL;
			s->stamp = 0;
		}
	}
}

struct chunkbuf *memchunks_hold(struct memchunks *m, uint64_t fid,
				uint64_t gen, uint32_t n)
{
	struct memchunk_slot *s = find(m, fid, gen, n);

	if (!s)
		return NULL;
	s->holds++;
	s->stamp = ++m->clock;
	return s->cb;
}

void memchunks_unhold(struct memchunks *m, uint64_t fid, uint64_t gen,
		      uint32_t n)
{
	struct memchunk_slot *s = find(m, fid, gen, n);

	if (s && s->holds)
		s->holds--;
}
