// SPDX-License-Identifier: MIT
/* stageset.c - see stageset.h */
#include <errno.h>
#include <stdlib.h>

#include "hash.h"
#include "stageset.h"

struct schunk {
	uint32_t n;
	bool read;
	bool writing;			/* stageset_hold(): drops pass it by */
	struct chunkbuf *cb;
	struct schunk *next;
};

struct sfile {
	uint64_t key, fid, gen;
	struct schunk *chunks;		/* few: bounded by the owner's limit */
};

static uint64_t file_key(uint64_t fid, uint64_t gen)
{
	const uint64_t v[2] = { fid, gen };

	return hash64(v, sizeof(v), 0x7374616765ULL);
}

static uint64_t sfile_key(const void *item)
{
	return ((const struct sfile *)item)->key;
}

void stageset_init(struct stageset *s)
{
	htab_init(&s->files, sfile_key);
	s->bytes = 0;
	s->chunks = 0;
}

static struct sfile *find_file(const struct stageset *s, uint64_t fid,
			       uint64_t gen)
{
	struct sfile *sf = htab_get(&s->files, file_key(fid, gen));

	return sf && sf->fid == fid && sf->gen == gen ? sf : NULL;
}

static struct schunk **find_chunk(struct sfile *sf, uint32_t n)
{
	struct schunk **pp;

	for (pp = &sf->chunks; *pp; pp = &(*pp)->next)
		if ((*pp)->n == n)
			return pp;
	return NULL;
}

/* unlink and free *@pp; true if it was never read */
static bool drop_chunk(struct stageset *s, struct schunk **pp)
{
	struct schunk *sc = *pp;
	bool unread = !sc->read;

	*pp = sc->next;
	s->bytes -= sc->cb->mapped;
	s->chunks--;
	chunkbuf_put(sc->cb);
	free(sc);
	return unread;
}

/*
 * Drop every chunk of @sf but those being written (all with @all), and
 * @sf itself once empty (*@kept: it is not).  Return: how many of the
 * dropped chunks were never read.
 */
static unsigned drop_file(struct stageset *s, struct sfile *sf, bool all,
			  bool *kept)
{
	struct schunk **pp = &sf->chunks;
	unsigned unread = 0;

	while (*pp) {
		if ((*pp)->writing && !all)
			pp = &(*pp)->next;
		else
			unread += drop_chunk(s, pp);
	}
	*kept = sf->chunks != NULL;
	if (!*kept)
		free(htab_del(&s->files, sf->key));
	return unread;
}

void stageset_release(struct stageset *s)
{
	bool kept;
	size_t i;

	for (i = 0; i < s->files.cap; i++)
		while (s->files.slot[i])	/* deletion shifts into i */
			drop_file(s, s->files.slot[i], true, &kept);
	htab_release(&s->files);
}

struct chunkbuf *stageset_get(struct stageset *s, uint64_t fid, uint64_t gen,
			      uint32_t n)
{
	struct sfile *sf = find_file(s, fid, gen);
	struct schunk **pp = sf ? find_chunk(sf, n) : NULL;

	if (!pp)
		return NULL;
	(*pp)->read = true;
	return (*pp)->cb;
}

bool stageset_has(const struct stageset *s, uint64_t fid, uint64_t gen,
		  uint32_t n)
{
	struct sfile *sf = find_file(s, fid, gen);

	return sf && find_chunk(sf, n);
}

bool stageset_has_before(const struct stageset *s, uint64_t fid, uint64_t gen,
			 uint32_t n)
{
	struct sfile *sf = find_file(s, fid, gen);
	struct schunk *sc;

	for (sc = sf ? sf->chunks : NULL; sc; sc = sc->next)
		if (sc->n < n)
			return true;
	return false;
}

int stageset_put(struct stageset *s, uint64_t fid, uint64_t gen, uint32_t n,
		 struct chunkbuf *cb)
{
	struct sfile *sf = find_file(s, fid, gen);
	struct schunk *sc, **pp;

	if (!sf) {
		sf = calloc(1, sizeof(*sf));
		if (!sf)
			return -ENOMEM;
		sf->fid = fid;
		sf->gen = gen;
		sf->key = file_key(fid, gen);
		if (htab_put(&s->files, sf)) {
			free(sf);
			return -ENOMEM;
		}
	}
	pp = find_chunk(sf, n);
	if (pp)
		drop_chunk(s, pp);
	sc = malloc(sizeof(*sc));
	if (!sc) {
		if (!sf->chunks)
			free(htab_del(&s->files, sf->key));
		return -ENOMEM;
	}
	sc->n = n;
	sc->read = false;
	sc->writing = false;
	sc->cb = chunkbuf_get(cb);
	sc->next = sf->chunks;
	sf->chunks = sc;
	s->bytes += cb->mapped;
	s->chunks++;
	return 0;
}

struct chunkbuf *stageset_hold(struct stageset *s, uint64_t fid,
			       uint64_t gen, uint32_t n)
{
	struct sfile *sf = find_file(s, fid, gen);
	struct schunk **pp = sf ? find_chunk(sf, n) : NULL;

	if (!pp || (*pp)->writing)
		return NULL;
	(*pp)->writing = true;
	return chunkbuf_get((*pp)->cb);
}

void stageset_unhold(struct stageset *s, uint64_t fid, uint64_t gen,
		     uint32_t n)
{
	struct sfile *sf = find_file(s, fid, gen);
	struct schunk **pp = sf ? find_chunk(sf, n) : NULL;

	if (pp)
		(*pp)->writing = false;
}

bool stageset_forget(struct stageset *s, uint64_t fid, uint64_t gen,
		     uint32_t n)
{
	struct sfile *sf = find_file(s, fid, gen);
	struct schunk **pp = sf ? find_chunk(sf, n) : NULL;

	if (!pp)
		return false;
	drop_chunk(s, pp);
	if (!sf->chunks)
		free(htab_del(&s->files, sf->key));
	return true;
}

unsigned stageset_drop_file(struct stageset *s, uint64_t fid, uint64_t gen)
{
	struct sfile *sf = find_file(s, fid, gen);
	bool kept;

	return sf ? drop_file(s, sf, false, &kept) : 0;
}

static int cmp_n(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

int stageset_list_file(const struct stageset *s, uint64_t fid, uint64_t gen,
		       uint32_t **out)
{
	struct sfile *sf = find_file(s, fid, gen);
	struct schunk *sc;
	uint32_t *v;
	int n = 0;

	*out = NULL;
	if (!sf)
		return 0;
	for (sc = sf->chunks; sc; sc = sc->next)
		n++;
	v = malloc(n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	n = 0;
	for (sc = sf->chunks; sc; sc = sc->next)
		v[n++] = sc->n;
	qsort(v, n, sizeof(*v), cmp_n);
	*out = v;
	return n;
}

unsigned stageset_drop_unless(struct stageset *s,
			      bool (*keep)(void *arg, uint64_t fid), void *arg)
{
	unsigned unread = 0;
	size_t i = 0;
	bool kept;

	/* deletion shifts entries back into slot i: look at it again */
	while (i < s->files.cap) {
		struct sfile *sf = s->files.slot[i];

		if (!sf || keep(arg, sf->fid)) {
			i++;
			continue;
		}
		unread += drop_file(s, sf, false, &kept);
		if (kept)
			i++;		/* a chunk being written stays */
	}
	return unread;
}
