/* SPDX-License-Identifier: MIT */
/*
 * ns_image.h - the namespace image: a finished tree laid out flat, so that
 * it can be served from a read-only mapping of a file without building
 * anything (docs/cache-format.md, "Namespace image").  Written by
 * ns_build.c, served by ns.c; nobody else looks inside.
 *
 *   [header, NSIMG_HDR_SIZE bytes][records][slots][strings]
 *
 * Records (struct ns_node, ns.h) are in breadth-first order from the root
 * (record 0), so the children of a directory are consecutive records,
 * sorted by name: a directory names its first child and their count.
 * Slots are an open-addressing table (linear probing, at most
 * hdr.probe_max probes) of record index + 1 (0: empty) keyed by inode
 * number mixed with hdr.slot_seed, which is random per image (nobody can
 * choose names that cluster).  Strings are NUL-terminated; the area ends
 * with a NUL byte, so any offset inside it reads a terminated string.
 *
 * Every integer is in host byte order: an image is a cache of the node it
 * was written on.  hdr_sum covers the header before it, body_sum the rest
 * of the file; an image whose sums, sizes or token do not match is not
 * used (the namespace is rebuilt from the LMDB listing and the image
 * written again).
 */
#ifndef FUSEFS_NS_IMAGE_H
#define FUSEFS_NS_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hash.h"
#include "ns.h"

#define NSIMG_MAGIC	"FUSEFSNS"
#define NSIMG_VERSION	1
#define NSIMG_HDR_SIZE	4096

struct nsimg_hdr {
	char magic[8];
	uint32_t version;
	uint32_t rec_size;	/* sizeof(struct ns_node) */
	uint64_t seed;		/* the inode seed (per source) */
	uint64_t token;		/* what it was built from (the owner's) */
	int64_t checked;	/* when the backend vouched for all files */
	uint64_t nrec;		/* records; 0 is the root */
	uint64_t nslot;		/* a power of two */
	uint64_t slot_seed;
	uint32_t probe_max;	/* longest probe sequence in the table */
	uint32_t pad;
	uint64_t rec_off, slot_off, str_off, str_len;
	uint64_t total;		/* the file's size */
	struct ns_stats st;
	uint64_t body_sum;	/* XXH3 of [NSIMG_HDR_SIZE, total) */
	uint64_t hdr_sum;	/* XXH3 of the header up to this field */
};

_Static_assert(sizeof(struct nsimg_hdr) <= NSIMG_HDR_SIZE,
	       "the image header fits its page");

/*
 * nsimg_body_sum() - XXH3 of bytes [NSIMG_HDR_SIZE, @len) of image file
 * @fd, through read(): a check that maps no page into the process.
 * Return: 0 or -errno.
 */
int nsimg_body_sum(int fd, uint64_t len, uint64_t *out);

/*
 * nsimg_layout() - start header @h (zeroed by the caller) of an image of
 * @nrec records, @nslot slots and @str_len bytes of strings: magic,
 * version, record size, counts, section offsets and total size.
 * Return: the total size.
 */
static inline uint64_t nsimg_layout(struct nsimg_hdr *h, uint64_t nrec,
				    uint64_t nslot, uint64_t str_len)
{
	memcpy(h->magic, NSIMG_MAGIC, 8);
	h->version = NSIMG_VERSION;
	h->rec_size = sizeof(struct ns_node);
	h->nrec = nrec;
	h->nslot = nslot;
	h->rec_off = NSIMG_HDR_SIZE;
	h->slot_off = h->rec_off + nrec * sizeof(struct ns_node);
	h->str_off = h->slot_off + nslot * sizeof(uint32_t);
	h->str_len = str_len;
	h->total = h->str_off + str_len;
	return h->total;
}

/* nsimg_hdr_sum() - what hdr_sum must be */
static inline uint64_t nsimg_hdr_sum(const struct nsimg_hdr *h)
{
	return hash64(h, offsetof(struct nsimg_hdr, hdr_sum), 0);
}

/* nsimg_home() - the first slot to probe for @ino */
static inline uint64_t nsimg_home(uint64_t ino, uint64_t seed, uint64_t nslot)
{
	uint64_t k = ino ^ seed;

	k ^= k >> 30;
	k *= 0xbf58476d1ce4e5b9ULL;
	k ^= k >> 27;
	k *= 0x94d049bb133111ebULL;
	k ^= k >> 31;
	return k & (nslot - 1);
}

#endif
