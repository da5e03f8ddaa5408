// SPDX-License-Identifier: MIT
/*
 * fuzz_recfmt.c - the LMDB record decoders (every *_decode in recfmt.h)
 * and the key helpers.  The input is one stored value, as a damaged or
 * hostile index would hand it over; every decoder sees it.
 *
 * Invariants (include/recfmt.h, docs/cache-format.md):
 *  - a decoder never reads past @len: it gets an exact-size heap copy,
 *    and every shorter prefix is tried too;
 *  - a decoder rejects (-EINVAL) a short or oversized value or a format
 *    byte other than RECFMT_V1 or RECFMT_V2, and returns 0 or -EINVAL
 *    only; the encoders write RECFMT_V2;
 *  - a decoded version string is NUL-terminated and NS_VERSION_MAX-bounded;
 *  - decode(encode(decode(v))) == decode(v), and encode(decode(v)) is v
 *    itself except for the bytes the format leaves unused;
 *  - decode(encode(x)) == x for a record built from the input bytes
 *    (the version cut to NS_VERSION_MAX - 1 bytes, as stored);
 *  - keys round-trip and sort by (fid, n) under memcmp.
 */
#include <errno.h>

#include "compiler.h"
#include "fuzz.h"
#include "recfmt.h"

#define ENC_MAX	128		/* above every *_REC_MAX/_LEN */

_Static_assert(FILE_REC_MAX <= ENC_MAX && ATTR_REC_MAX <= ENC_MAX &&
	       CHUNK_REC_LEN <= ENC_MAX && HEAT_REC_LEN <= ENC_MAX,
	       "encode buffer too small");

union rec {
	struct file_rec f;
	struct chunk_rec c;
	struct heat_rec h;
	struct ns_attr a;
};

/*
 * One record type: its decoder and encoder through void *, the length
 * range the format allows, the bits of the first 8 bytes that carry data
 * (the rest is padding a decoder ignores) and where the version string
 * is (-1: none).
 */
struct rtype {
	const char *name;
	size_t min, max;		/* valid encoded lengths */
	int (*decode)(const uint8_t *p, size_t len, void *r);
	size_t (*encode)(uint8_t *out, const void *r);
	bool (*same)(const void *a, const void *b);
	uint8_t keep[8];
	int voff;
};

static bool file_rec_same(const void *a, const void *b)
{
	const struct file_rec *x = a, *y = b;

	return x->size == y->size && x->mtime == y->mtime &&
	       x->chunk_size == y->chunk_size &&
	       !strcmp(x->version, y->version);
}

static bool chunk_rec_same(const void *a, const void *b)
{
	const struct chunk_rec *x = a, *y = b;

	return x->len == y->len && x->sum == y->sum && x->gen == y->gen;
}

static bool heat_rec_same(const void *a, const void *b)
{
	const struct heat_rec *x = a, *y = b;

	/* the score is stored bit for bit: NaNs must survive too */
	return x->count == y->count && x->last == y->last &&
	       x->bytes == y->bytes && x->pinned == y->pinned &&
	       !memcmp(&x->score, &y->score, sizeof(x->score));
}

static bool attr_rec_same(const void *a, const void *b)
{
	const struct ns_attr *x = a, *y = b;

	return x->size == y->size && x->mtime == y->mtime &&
	       x->mtime_nsec == y->mtime_nsec && x->checked == y->checked &&
	       !strcmp(x->version, y->version);
}

/* typed wrappers: calling through a cast function pointer is undefined */
#define RTYPE_FNS(n)							\
	static int n##_dec(const uint8_t *p, size_t len, void *r)	\
	{								\
		return n##_decode(p, len, r);				\
	}								\
	static size_t n##_enc(uint8_t *out, const void *r)		\
	{								\
		return n##_encode(out, r);				\
	}
RTYPE_FNS(file_rec)
RTYPE_FNS(chunk_rec)
RTYPE_FNS(heat_rec)
RTYPE_FNS(attr_rec)

#define RTYPE(n, lo, hi, voff, ...)					\
	{ #n, lo, hi, n##_dec, n##_enc, n##_same, { __VA_ARGS__ }, voff }

#define ALL	0xff, 0xff, 0xff, 0xff, 0xff, 0xff

static const struct rtype types[] = {
	/* fmt, pad, verlen(2), ... */
	RTYPE(file_rec, 24, FILE_REC_MAX,
	      (int)offsetof(struct file_rec, version), 0xff, 0, ALL),
	/* fmt, pad(3), len(4) */
	RTYPE(chunk_rec, CHUNK_REC_LEN, CHUNK_REC_LEN, -1,
	      0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff),
	/* fmt, pinned (bit 0), pad(6) */
	RTYPE(heat_rec, HEAT_REC_LEN, HEAT_REC_LEN, -1,
	      0xff, 1, 0, 0, 0, 0, 0, 0),
	/* fmt, pad, verlen(2), mtime_nsec(4) */
	RTYPE(attr_rec, 32, ATTR_REC_MAX,
	      (int)offsetof(struct ns_attr, version), 0xff, 0, ALL),
};

/* decode @len bytes from an exact-size heap copy (ASan sees overreads) */
static int decode_exact(const struct rtype *t, const uint8_t *data,
			size_t len, union rec *r)
{
	uint8_t *p = malloc(len ? len : 1);
	int rc;

	FUZZ_CHECK(p != NULL, "out of memory");
	memcpy(p, data, len);
	rc = t->decode(p, len, r);
	free(p);
	FUZZ_CHECK(rc == 0 || rc == -EINVAL, "%s_decode returned %d", t->name,
		   rc);
	return rc;
}

static void check_decoded(const struct rtype *t, const uint8_t *data,
			  size_t len, const union rec *r)
{
	uint8_t enc[ENC_MAX];
	union rec r2;
	size_t n, i;

	FUZZ_CHECK(len >= t->min && len <= t->max &&
		   (data[0] == RECFMT_V1 || data[0] == RECFMT_V2),
		   "%s_decode accepted %zu bytes, format %u", t->name, len,
		   data[0]);
	if (t->voff >= 0)
		FUZZ_CHECK(memchr((const char *)r + t->voff, '\0',
				  NS_VERSION_MAX) != NULL,
			   "%s version not terminated", t->name);
	n = t->encode(enc, r);
	FUZZ_CHECK(n == len, "%s: %zu bytes re-encoded to %zu", t->name, len,
		   n);
	/* written as format 2 whatever it was read as (same layout) */
	FUZZ_CHECK(enc[0] == RECFMT_V2, "%s encoded as format %u", t->name,
		   enc[0]);
	for (i = 1; i < n; i++) {
		uint8_t keep = i < 8 ? t->keep[i] : 0xff;

		FUZZ_CHECK((enc[i] & keep) == (data[i] & keep),
			   "%s: byte %zu re-encoded as %#x, was %#x", t->name,
			   i, enc[i], data[i]);
	}
	memset(&r2, 0xa5, sizeof(r2));
	FUZZ_CHECK(t->decode(enc, n, &r2) == 0, "%s: own encoding rejected",
		   t->name);
	FUZZ_CHECK(t->same(r, &r2), "%s: decode(encode(decode(v))) differs",
		   t->name);
}

/*
 * The input, and each of its prefixes up to the longest valid length:
 * a decoder accepts only lengths the format allows.
 */
static void check_type(const struct rtype *t, const uint8_t *data,
		       size_t size)
{
	union rec r;
	size_t len;

	for (len = 0; len <= size && len <= t->max + 1; len++) {
		memset(&r, 0, sizeof(r));
		if (decode_exact(t, data, len, &r) == 0)
			check_decoded(t, data, len, &r);
	}
	if (size > t->max + 1)
		FUZZ_CHECK(decode_exact(t, data, size, &r) == -EINVAL,
			   "%s_decode accepted %zu bytes", t->name, size);
}

/* take @n bytes from the input as an integer, 0 past its end */
static uint64_t take(const uint8_t **p, size_t *left, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n && *left; i++, (*p)++, (*left)--)
		v |= (uint64_t)**p << (8 * i);
	return v;
}

static void take_version(const uint8_t **p, size_t *left, char *v)
{
	size_t n = take(p, left, 1) % NS_VERSION_MAX;

	n = MIN(n, *left);

	memcpy(v, *p, n);
	v[n] = '\0';
	*p += n;
	*left -= n;
}

/* records built from the input: decode(encode(x)) == x */
static void check_roundtrip(const uint8_t *p, size_t left)
{
	struct file_rec f = { 0 }, f2;
	struct chunk_rec c = { 0 }, c2;
	struct heat_rec h = { 0 }, h2;
	struct ns_attr a = { 0 }, a2;
	uint64_t bits;
	uint8_t enc[ENC_MAX];
	size_t n;

	f.size = take(&p, &left, 8);
	f.mtime = (int64_t)take(&p, &left, 8);
	f.chunk_size = take(&p, &left, 4);
	take_version(&p, &left, f.version);
	n = file_rec_encode(enc, &f);
	FUZZ_CHECK(n >= 24 && n <= FILE_REC_MAX, "file_rec %zu bytes", n);
	FUZZ_CHECK(file_rec_decode(enc, n, &f2) == 0 &&
		   file_rec_same(&f, &f2), "file_rec round trip");

	c.len = take(&p, &left, 4);
	c.sum = take(&p, &left, 8);
	c.gen = take(&p, &left, 8);
	n = chunk_rec_encode(enc, &c);
	FUZZ_CHECK(n == CHUNK_REC_LEN, "chunk_rec %zu bytes", n);
	FUZZ_CHECK(chunk_rec_decode(enc, n, &c2) == 0 &&
		   chunk_rec_same(&c, &c2), "chunk_rec round trip");

	h.count = take(&p, &left, 8);
	h.last = (int64_t)take(&p, &left, 8);
	h.bytes = take(&p, &left, 8);
	bits = take(&p, &left, 8);
	memcpy(&h.score, &bits, sizeof(bits));
	h.pinned = take(&p, &left, 1) & 1;
	n = heat_rec_encode(enc, &h);
	FUZZ_CHECK(n == HEAT_REC_LEN, "heat_rec %zu bytes", n);
	FUZZ_CHECK(heat_rec_decode(enc, n, &h2) == 0 &&
		   heat_rec_same(&h, &h2), "heat_rec round trip");

	a.size = take(&p, &left, 8);
	a.mtime = (int64_t)take(&p, &left, 8);
	a.mtime_nsec = take(&p, &left, 4);
	a.checked = (int64_t)take(&p, &left, 8);
	take_version(&p, &left, a.version);
	n = attr_rec_encode(enc, &a);
	FUZZ_CHECK(n >= 32 && n <= ATTR_REC_MAX, "attr_rec %zu bytes", n);
	if (a.size > NS_SIZE_TOO_BIG || a.mtime_nsec >= 1000000000)
		FUZZ_CHECK(attr_rec_decode(enc, n, &a2) == -EINVAL,
			   "attr_rec out of range accepted");
	else
		FUZZ_CHECK(attr_rec_decode(enc, n, &a2) == 0 &&
			   attr_rec_same(&a, &a2), "attr_rec round trip");
}

/* keys: round trip, and memcmp order is (fid, n) order */
static void check_keys(const uint8_t *p, size_t left)
{
	uint64_t f1 = take(&p, &left, 8), f2 = take(&p, &left, 8), fid;
	uint32_t n1 = take(&p, &left, 4), n2 = take(&p, &left, 4), n;
	uint8_t k1[CHUNK_KEY_LEN], k2[CHUNK_KEY_LEN];
	int c, want;

	fid_key(k1, f1);
	FUZZ_CHECK(fid_from_key(k1) == f1, "fid key round trip");
	fid_key(k2, f2);
	c = memcmp(k1, k2, FID_KEY_LEN);
	want = f1 < f2 ? -1 : f1 > f2;
	FUZZ_CHECK((c > 0) - (c < 0) == want, "fid key order");

	chunk_key(k1, f1, n1);
	chunk_from_key(k1, &fid, &n);
	FUZZ_CHECK(fid == f1 && n == n1, "chunk key round trip");
	chunk_key(k2, f2, n2);
	c = memcmp(k1, k2, CHUNK_KEY_LEN);
	want = f1 != f2 ? (f1 < f2 ? -1 : 1) : (n1 < n2 ? -1 : n1 > n2);
	FUZZ_CHECK((c > 0) - (c < 0) == want, "chunk key order");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t i;

	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		check_type(&types[i], data, size);
	check_roundtrip(data, size);
	check_keys(data, size);
	return 0;
}
