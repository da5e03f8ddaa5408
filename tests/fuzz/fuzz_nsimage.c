// SPDX-License-Identifier: MIT
/*
 * fuzz_nsimage.c - the namespace image as ns.c serves it (ns_image.h),
 * from an image whose header is right but whose records, inode slots and
 * strings are the input's: what a damaged or hostile cache file with
 * matching sums would hand over.
 *
 * Input: bytes 0-1 the record count (1 + n % 512), byte 2 how many
 * times the slot count doubles past the records, byte 3 the longest
 * probe, bytes 4-5 the string area's length (1 + n % 4096), bytes 8-15
 * the slot seed; the rest fills records, slots and strings in that
 * order (zeros past the input's end).
 *
 * Invariants (ns.h):
 *  - nothing reads outside the image (ASan: the image is a mapping of
 *    exactly its size);
 *  - a directory's children, as ns_kid() gives them, come after it, so
 *    a recursive walk of the tree ends (depth <= records);
 *  - ns_lookup() of a child's name finds a record with that name;
 *  - every string is NUL-terminated inside the image;
 *  - attributes set are read back.
 */
#include <errno.h>

#include "fuzz.h"
#include "hash.h"
#include "ns.h"
#include "ns_build.h"
#include "ns_image.h"

static const struct ns *g_ns;
static const char *g_end;	/* one past the image */

/* @s is terminated inside the image */
static void in_image(const char *s)
{
	FUZZ_CHECK(s < g_end && memchr(s, '\0', g_end - s) != NULL,
		   "string at %p runs past the image's end %p", (void *)s,
		   (void *)g_end);
}

static void walk(const struct ns_node *d, uint64_t depth)
{
	uint64_t i;

	FUZZ_CHECK(depth <= UINT32_MAX, "no end");
	for (i = 0; i < ns_nkids(d); i++) {
		const struct ns_node *k = ns_kid(g_ns, d, i);

		if (!k)
			break;
		FUZZ_CHECK(k > d, "child %p before its directory %p", (void *)k,
			   (void *)d);
		if (k->is_dir)
			walk(k, depth + 1);
	}
}

static int visit(void *arg, const struct ns_node *n)
{
	struct ns *ns = arg;
	const char *path = ns_path(ns, n), *name = ns_name(ns, n);
	const struct ns_node *found;
	struct ns_attr a, b;
	uint64_t i;

	in_image(path);
	in_image(name);
	in_image(ns_key(ns, n));
	(void)ns_parent(ns, n);
	(void)ns_get(ns, n->ino);
	(void)ns_resolve(ns, path, strlen(path));
	ns_attr_get(ns, n, &a);
	FUZZ_CHECK(memchr(a.version, '\0', sizeof(a.version)) != NULL);
	a.size ^= 1;
	a.checked += 5;
	if (!ns_attr_set(ns, n, &a)) {
		ns_attr_get(ns, n, &b);
		FUZZ_CHECK(b.size == a.size && b.checked == a.checked);
	}
	for (i = 0; n->is_dir && i < ns_nkids(n) && i < 64; i++) {
		const struct ns_node *k = ns_kid(ns, n, i);

		if (!k)
			break;
		found = ns_lookup(ns, n->ino, ns_name(ns, k));
		FUZZ_CHECK(!found || !strcmp(ns_name(ns, found), ns_name(ns, k)));
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t nrec, nslot = 1, str_len, total, body;
	struct nsimg_hdr hdr = { 0 }, *h;
	struct ns *ns = NULL;
	uint8_t *base;

	if (size < 16)
		return 0;
	nrec = 1 + (data[0] | data[1] << 8) % 512;
	while (nslot < nrec)
		nslot <<= 1;
	nslot <<= data[2] % 4;
	str_len = 1 + (data[4] | data[5] << 8) % 4096;
	total = nsimg_layout(&hdr, nrec, nslot, str_len);
	base = mmap(NULL, total, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FUZZ_CHECK(base != MAP_FAILED, "mmap");
	body = size - 16 < total - NSIMG_HDR_SIZE ? size - 16 :
						   total - NSIMG_HDR_SIZE;
	memcpy(base + NSIMG_HDR_SIZE, data + 16, body);
	h = (struct nsimg_hdr *)base;
	*h = hdr;
	h->seed = 1;
	h->token = 1;
	memcpy(&h->slot_seed, data + 8, 8);
	h->probe_max = data[3];
	h->hdr_sum = nsimg_hdr_sum(h);
	fuzz_quiet_begin();
	if (ns_from_memory(base, total, false, &ns)) {
		/* refused: only when the strings do not end in a NUL or
		 * the probe limit is not below the slot count */
		FUZZ_CHECK(base[h->str_off + str_len - 1] != 0 ||
			   h->probe_max >= h->nslot);
		munmap(base, total);
		fuzz_quiet_end();
		return 0;
	}
	g_ns = ns;
	g_end = (const char *)base + total;
	walk(ns_get(ns, NS_ROOT_INO) ? ns_get(ns, NS_ROOT_INO) :
	     ns_resolve(ns, "", 0), 0);
	ns_foreach(ns, true, visit, ns);
	ns_foreach(ns, false, visit, ns);
	ns_destroy(ns);		/* unmaps the image */
	fuzz_quiet_end();
	return 0;
}
