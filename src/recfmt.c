// SPDX-License-Identifier: MIT
/* recfmt.c - see recfmt.h */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "hash.h"
#include "recfmt.h"

static void put_le(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		p[i] = v >> (8 * i);
}

static uint64_t get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
	int i;

	for (i = 0; i < n; i++)
		p[i] = v >> (8 * (n - 1 - i));
}

static uint64_t get_be(const uint8_t *p, int n)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

void fid_key(uint8_t out[FID_KEY_LEN], uint64_t fid)
{
	put_be(out, fid, 8);
}

uint64_t fid_from_key(const uint8_t *k)
{
	return get_be(k, 8);
}

void chunk_key(uint8_t out[CHUNK_KEY_LEN], uint64_t fid, uint32_t n)
{
	put_be(out, fid, 8);
	put_be(out + 8, n, 4);
}

void chunk_from_key(const uint8_t *k, uint64_t *fid, uint32_t *n)
{
	*fid = get_be(k, 8);
	*n = get_be(k + 8, 4);
}

/* header: fmt(1) pad(1) verlen(2) then fixed fields, then version bytes */
static bool known_fmt(uint8_t fmt)
{
	return fmt == RECFMT_V1 || fmt == RECFMT_V2;
}

#define SEAL_SEED	0x73ea1f5eaa5eedULL

static uint32_t seal_of(const uint8_t *val, size_t len, const void *key,
			size_t klen)
{
	return (uint32_t)(hash64(key, klen, SEAL_SEED) ^
			  hash64(val, len, SEAL_SEED + len));
}

size_t rec_seal(uint8_t *val, size_t len, const void *key, size_t klen)
{
	put_le(val + len, seal_of(val, len, key, klen), RECFMT_SEAL);
	return len + RECFMT_SEAL;
}

int rec_unseal(const uint8_t *val, size_t len, uint8_t fmt, const void *key,
	       size_t klen, size_t *body)
{
	if (fmt == RECFMT_V1) {
		*body = len;
		return 0;
	}
	if (fmt != RECFMT_V2 || len < RECFMT_SEAL ||
	    get_le(val + len - RECFMT_SEAL, RECFMT_SEAL) !=
	    seal_of(val, len - RECFMT_SEAL, key, klen))
		return -EINVAL;
	*body = len - RECFMT_SEAL;
	return 0;
}

static size_t put_version(uint8_t *p, size_t at, const char *v)
{
	size_t vl = strnlen(v, NS_VERSION_MAX - 1);

	put_le(p + 2, vl, 2);
	memcpy(p + at, v, vl);
	return at + vl;
}

static int get_version(const uint8_t *p, size_t len, size_t at, char *v)
{
	size_t vl = get_le(p + 2, 2);

	if (vl >= NS_VERSION_MAX || at + vl != len || memchr(p + at, '\0', vl))
		return -EINVAL;
	memcpy(v, p + at, vl);
	v[vl] = '\0';
	return 0;
}

size_t file_rec_encode(uint8_t *out, const struct file_rec *r)
{
	out[0] = RECFMT_V2;
	out[1] = 0;
	put_le(out + 4, r->chunk_size, 4);
	put_le(out + 8, r->size, 8);
	put_le(out + 16, (uint64_t)r->mtime, 8);
	return put_version(out, 24, r->version);
}

int file_rec_decode(const uint8_t *p, size_t len, struct file_rec *r)
{
	if (len < 24 || len > FILE_REC_MAX || !known_fmt(p[0]))
		return -EINVAL;
	r->chunk_size = get_le(p + 4, 4);
	r->size = get_le(p + 8, 8);
	r->mtime = (int64_t)get_le(p + 16, 8);
	return get_version(p, len, 24, r->version);
}

size_t chunk_rec_encode(uint8_t *out, const struct chunk_rec *r)
{
	out[0] = RECFMT_V2;
	memset(out + 1, 0, 3);
	put_le(out + 4, r->len, 4);
	put_le(out + 8, r->sum, 8);
	put_le(out + 16, r->gen, 8);
	return CHUNK_REC_LEN;
}

int chunk_rec_decode(const uint8_t *p, size_t len, struct chunk_rec *r)
{
	if (len != CHUNK_REC_LEN || !known_fmt(p[0]))
		return -EINVAL;
	r->len = get_le(p + 4, 4);
	r->sum = get_le(p + 8, 8);
	r->gen = get_le(p + 16, 8);
	return 0;
}

size_t heat_rec_encode(uint8_t *out, const struct heat_rec *r)
{
	uint64_t bits;

	memcpy(&bits, &r->score, sizeof(bits));
	out[0] = RECFMT_V2;
	memset(out + 1, 0, 7);
	out[1] = r->pinned;
	put_le(out + 8, r->count, 8);
	put_le(out + 16, (uint64_t)r->last, 8);
	put_le(out + 24, r->bytes, 8);
	put_le(out + 32, bits, 8);
	return HEAT_REC_LEN;
}

int heat_rec_decode(const uint8_t *p, size_t len, struct heat_rec *r)
{
	if (len != HEAT_REC_LEN || !known_fmt(p[0]))
		return -EINVAL;
	uint64_t bits;

	r->pinned = p[1] & 1;
	r->count = get_le(p + 8, 8);
	r->last = (int64_t)get_le(p + 16, 8);
	r->bytes = get_le(p + 24, 8);
	bits = get_le(p + 32, 8);
	memcpy(&r->score, &bits, sizeof(bits));
	return 0;
}

size_t stop_rec_encode(uint8_t *out, const struct stop_rec *r)
{
	out[0] = RECFMT_V2;
	memset(out + 1, 0, 3);
	put_le(out + 4, r->chunks, 4);
	put_le(out + 8, r->gen, 8);
	put_le(out + 16, r->ino, 8);
	put_le(out + 24, r->size, 8);
	put_le(out + 32, (uint64_t)r->mtime_ns, 8);
	put_le(out + 40, (uint64_t)r->ctime_ns, 8);
	put_le(out + 48, r->sums, 8);
	return STOP_REC_LEN;
}

/* only format 2: no version before it wrote seals */
int stop_rec_decode(const uint8_t *p, size_t len, struct stop_rec *r)
{
	if (len != STOP_REC_LEN || p[0] != RECFMT_V2)
		return -EINVAL;
	r->chunks = get_le(p + 4, 4);
	r->gen = get_le(p + 8, 8);
	r->ino = get_le(p + 16, 8);
	r->size = get_le(p + 24, 8);
	r->mtime_ns = (int64_t)get_le(p + 32, 8);
	r->ctime_ns = (int64_t)get_le(p + 40, 8);
	r->sums = get_le(p + 48, 8);
	return 0;
}

size_t attr_rec_encode(uint8_t *out, const struct ns_attr *a)
{
	out[0] = RECFMT_V2;
	out[1] = 0;
	put_le(out + 4, a->mtime_nsec, 4);
	put_le(out + 8, a->size, 8);
	put_le(out + 16, (uint64_t)a->mtime, 8);
	put_le(out + 24, (uint64_t)a->checked, 8);
	return put_version(out, 32, a->version);
}

int attr_rec_decode(const uint8_t *p, size_t len, struct ns_attr *a)
{
	if (len < 32 || len > ATTR_REC_MAX || !known_fmt(p[0]))
		return -EINVAL;
	a->mtime_nsec = get_le(p + 4, 4);
	a->size = get_le(p + 8, 8);
	a->mtime = (int64_t)get_le(p + 16, 8);
	a->checked = (int64_t)get_le(p + 24, 8);
	/* what a listing or a manifest may give, no more: a damaged record
	 * must not make a 2^64-byte file (a negative st_size) */
	if (a->size > NS_SIZE_TOO_BIG || a->mtime_nsec >= 1000000000)
		return -EINVAL;
	return get_version(p, len, 32, a->version);
}

uint64_t version_gen(const char *v, uint64_t size)
{
	return hash64(v, strlen(v), 0x5bd1e9955bd1e995ULL ^ size);
}
