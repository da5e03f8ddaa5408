/* SPDX-License-Identifier: MIT */
/*
 * recfmt.h - byte layout of the records kept in the LMDB index.
 * Pure encode/decode, no I/O; docs/cache-format.md is the prose version.
 *
 * Keys are big-endian so LMDB orders them by (file id, chunk number).
 * Values are little-endian, start with a format byte and are rejected by
 * the decoders (-EINVAL) if short, oversized or of an unknown format: a
 * damaged record is dropped, never trusted.  The encoders write
 * RECFMT_V2; the decoders also take RECFMT_V1, the same layout written by
 * earlier versions.  A stored value of format 2 ends with a seal over its
 * key and bytes (rec_seal()), checked and stripped before decoding
 * (rec_unseal()), so that a byte flipped anywhere in it (a version
 * string, a size, an object name) drops the record.
 */
#ifndef FUSEFS_RECFMT_H
#define FUSEFS_RECFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ns.h"

#define RECFMT_V1	1	/* written before seals: read, never written */
#define RECFMT_V2	2	/* the same layout, the stored value sealed */
#define RECFMT_SEAL	4	/* bytes of the seal at a stored value's end */

struct file_rec {		/* files: fid -> what the cached bytes are */
	uint64_t size;
	int64_t mtime;
	uint32_t chunk_size;
	char version[NS_VERSION_MAX];	/* backend version when cached */
};

struct chunk_rec {		/* chunks: (fid, n) -> one verified chunk */
	uint32_t len;		/* bytes of data in the chunk */
	uint64_t sum;		/* XXH3-64 of those bytes */
	uint64_t gen;		/* hash of the file version it belongs to */
};

struct heat_rec {		/* heat: fid -> access history */
	uint64_t count;		/* opens */
	int64_t last;		/* last access, unix seconds */
	uint64_t bytes;		/* bytes read through the mount */
	double score;		/* decayed heat as of last */
	bool pinned;
};

/*
 * stopped: fid -> a data file as a clean stop left it (cache_stop.c).
 * Its chunks were all verified and synced, and the data file's identity
 * then is what a start compares with the file it finds.
 */
struct stop_rec {
	uint64_t gen;		/* the data file's version hash (its name) */
	uint64_t ino;
	uint64_t size;		/* st_size */
	int64_t mtime_ns;	/* st_mtim, nanoseconds since the epoch */
	int64_t ctime_ns;	/* st_ctim: no write leaves it unchanged */
	uint32_t chunks;	/* indexed chunks, all verified */
	uint64_t sums;		/* cache_stop_sums() of their (n, sum) */
};

#define FID_KEY_LEN	8
#define CHUNK_KEY_LEN	12
#define FILE_REC_MAX	(24 + NS_VERSION_MAX)
#define CHUNK_REC_LEN	24
#define HEAT_REC_LEN	40
#define STOP_REC_LEN	56
#define ATTR_REC_MAX	(32 + NS_VERSION_MAX)

void fid_key(uint8_t out[FID_KEY_LEN], uint64_t fid);
uint64_t fid_from_key(const uint8_t *k);
void chunk_key(uint8_t out[CHUNK_KEY_LEN], uint64_t fid, uint32_t n);
void chunk_from_key(const uint8_t *k, uint64_t *fid, uint32_t *n);

/* *_encode() return the encoded length; *_decode() 0 or -EINVAL */
size_t file_rec_encode(uint8_t *out, const struct file_rec *r);
int file_rec_decode(const uint8_t *p, size_t len, struct file_rec *r);
size_t chunk_rec_encode(uint8_t *out, const struct chunk_rec *r);
int chunk_rec_decode(const uint8_t *p, size_t len, struct chunk_rec *r);
size_t heat_rec_encode(uint8_t *out, const struct heat_rec *r);
int heat_rec_decode(const uint8_t *p, size_t len, struct heat_rec *r);
size_t stop_rec_encode(uint8_t *out, const struct stop_rec *r);
int stop_rec_decode(const uint8_t *p, size_t len, struct stop_rec *r);
/* the namespace cache: object name -> attributes; a record with a size
 * over NS_SIZE_TOO_BIG or nanoseconds over 999,999,999 is -EINVAL */
size_t attr_rec_encode(uint8_t *out, const struct ns_attr *a);
int attr_rec_decode(const uint8_t *p, size_t len, struct ns_attr *a);

/*
 * rec_seal() - append to the @len bytes of stored value @val (room for
 * RECFMT_SEAL more) the seal of @key and those bytes.  Return: the
 * sealed length.
 */
size_t rec_seal(uint8_t *val, size_t len, const void *key, size_t klen);
/*
 * rec_unseal() - the length to decode of stored value @val under @key,
 * whose format byte is @fmt: a format 1 value whole, a format 2 value
 * without its seal if the seal holds.  Return: that length in *@body and
 * 0, or -EINVAL (a damaged value or an unknown format).
 */
int rec_unseal(const uint8_t *val, size_t len, uint8_t fmt, const void *key,
	       size_t klen, size_t *body);

/*
 * version_gen() - the chunk_rec.gen value (and data file name) for the
 * object at backend version @v with @size bytes: a version names bytes
 * only together with their size.
 */
uint64_t version_gen(const char *v, uint64_t size);

#endif
