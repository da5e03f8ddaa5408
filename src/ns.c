// SPDX-License-Identifier: MIT
/* ns.c - see ns.h; the image format is in ns_image.h */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "hash.h"
#include "htab.h"
#include "log.h"
#include "ns.h"
#include "ns_build.h"
#include "ns_image.h"
#include "strsafe.h"

#define SEED_DIR	0x9e3779b97f4a7c15ULL
#define SEED_FILE	0xc2b2ae3d27d4eb4fULL
#define SUM_STEP	(1 << 20)	/* bytes hashed per read at open */

/* attributes a re-check found changed, over the image's */
struct ovl {
	uint64_t ino;
	struct ns_attr a;
};

struct ns {
	const uint8_t *base;
	bool mapped;		/* a file's mapping (else anonymous memory) */
	const struct nsimg_hdr *hdr;
	const struct ns_node *rec;
	const uint32_t *slot;
	const char *str;
	pthread_mutex_t attr_lock;	/* guards the two below */
	struct htab ovl;	/* ino -> struct ovl: changed files (few) */
	/*
	 * Per record: when a re-check that found the same version last
	 * vouched for the file, in seconds after hdr->checked (0: not
	 * since the image).  Anonymous memory that costs a page only where
	 * re-checks wrote: 4 bytes a file at most.
	 */
	uint32_t *checked;
};

uint64_t ns_ino(uint64_t seed, bool dir, const char *p, size_t len)
{
	uint64_t h = hash64(p, len, seed ^ (dir ? SEED_DIR : SEED_FILE));

	return h < NS_FIRST_INO ? h + NS_FIRST_INO : h;
}

uint64_t ns_file_ino(const struct ns *ns, const char *rel, size_t len)
{
	return ns_ino(ns->hdr->seed, false, rel, len);
}

static uint64_t ovl_key(const void *item)
{
	return ((const struct ovl *)item)->ino;
}

/*
 * Whether the header describes a layout that fits @len bytes.  The sums
 * only say that the file is what its writer wrote, not that the writer
 * was ns_build.c: no sum of sections may wrap around, and a probe
 * sequence must end within the table even when no slot is empty.
 */
static bool hdr_sane(const struct nsimg_hdr *h, size_t len)
{
	uint64_t rec_end, slot_end;

	if (memcmp(h->magic, NSIMG_MAGIC, 8) || h->version != NSIMG_VERSION ||
	    h->rec_size != sizeof(struct ns_node) ||
	    h->hdr_sum != nsimg_hdr_sum(h))
		return false;
	if (h->total != len || !h->nrec || h->nrec > UINT32_MAX ||
	    !h->nslot || (h->nslot & (h->nslot - 1)) || h->nslot < h->nrec ||
	    h->nslot > UINT32_MAX || !h->str_len || h->probe_max >= h->nslot)
		return false;
	rec_end = h->rec_off + h->nrec * sizeof(struct ns_node);
	slot_end = h->slot_off + h->nslot * sizeof(uint32_t);
	return h->rec_off == NSIMG_HDR_SIZE && h->slot_off == rec_end &&
	       h->str_off == slot_end && h->str_off < len &&
	       h->str_len == len - h->str_off;
}

int nsimg_body_sum(int fd, uint64_t len, uint64_t *out)
{
	size_t at = NSIMG_HDR_SIZE, n = len - at;
	uint8_t *buf = malloc(n < SUM_STEP ? n : SUM_STEP);
	uint64_t sum = 0;
	int rc = 0;

	struct hash_state *st = hash_begin();

	if (!buf || !st) {
		rc = -ENOMEM;
		goto out;
	}
	while (at < len) {
		size_t want = len - at < SUM_STEP ? len - at : SUM_STEP;
		ssize_t got = pread(fd, buf, want, at);

		if (got <= 0) {
			rc = got < 0 ? -errno : -EIO;
			goto out;
		}
		hash_update(st, buf, got);
		at += got;
	}
	sum = hash_end(st);
	st = NULL;
	*out = sum;
out:
	hash_end(st);
	free(buf);
	return rc;
}

static int ns_wrap(const void *base, bool mapped, struct ns **out)
{
	struct ns *ns = calloc(1, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	ns->base = base;
	ns->mapped = mapped;
	ns->hdr = base;
	ns->rec = (const struct ns_node *)(ns->base + ns->hdr->rec_off);
	ns->slot = (const uint32_t *)(ns->base + ns->hdr->slot_off);
	ns->str = (const char *)ns->base + ns->hdr->str_off;
	ns->checked = mmap(NULL, ns->hdr->nrec * sizeof(uint32_t),
			   PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ns->checked == MAP_FAILED) {
		free(ns);
		return -ENOMEM;
	}
	pthread_mutex_init(&ns->attr_lock, NULL);
	htab_init(&ns->ovl, ovl_key);
	*out = ns;
	return 0;
}

/* the string area ends with a NUL: every string in it is terminated */
static bool strings_end(const void *base)
{
	const struct nsimg_hdr *h = base;

	return ((const char *)base)[h->str_off + h->str_len - 1] == '\0';
}

int ns_from_memory(void *base, size_t len, bool mapped, struct ns **out)
{
	if (len < NSIMG_HDR_SIZE || !hdr_sane(base, len) || !strings_end(base))
		return -EINVAL;
	return ns_wrap(base, mapped, out);
}

int ns_open(const char *path, uint64_t seed, uint64_t token, struct ns **out)
{
	struct nsimg_hdr h;
	struct stat sb;
	uint64_t sum = 0;
	void *base;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) || !S_ISREG(sb.st_mode) ||
	    (size_t)sb.st_size <= NSIMG_HDR_SIZE ||
	    pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
	    !hdr_sane(&h, sb.st_size)) {
		rc = -EINVAL;
		goto out;
	}
	if (h.seed != seed || h.token != token) {
		rc = -ESTALE;
		goto out;
	}
	rc = nsimg_body_sum(fd, sb.st_size, &sum);
	if (rc)
		goto out;
	if (sum != h.body_sum) {
		rc = -EINVAL;
		goto out;
	}
	base = mmap(NULL, sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED) {
		rc = -errno;
		goto out;
	}
	/* a file changed between the check and the mapping is not ours */
	if (!hdr_sane(base, sb.st_size) || !strings_end(base) ||
	    memcmp(base, &h, sizeof(h))) {
		munmap(base, sb.st_size);
		rc = -EINVAL;
		goto out;
	}
	rc = ns_wrap(base, true, out);
	if (rc)
		munmap(base, sb.st_size);
out:
	if (rc == -EINVAL)
		log_warn("namespace image %s is damaged or of another version: not used",
			 path);
	close(fd);
	return rc;
}

void ns_destroy(struct ns *ns)
{
	size_t i;

	if (!ns)
		return;
	for (i = 0; i < ns->ovl.cap; i++)
		free(ns->ovl.slot[i]);
	htab_release(&ns->ovl);
	munmap(ns->checked, ns->hdr->nrec * sizeof(uint32_t));
	pthread_mutex_destroy(&ns->attr_lock);
	munmap((void *)ns->base, ns->hdr->total);
	free(ns);
}

bool ns_mapped(const struct ns *ns)
{
	return ns->mapped;
}

static const struct ns_node *rec_at(const struct ns *ns, uint64_t i)
{
	return i < ns->hdr->nrec ? &ns->rec[i] : NULL;
}

/* a string of the area; "" for an offset outside it */
static const char *str_at(const struct ns *ns, uint64_t off)
{
	return off < ns->hdr->str_len ? ns->str + off : "";
}

const struct ns_node *ns_get(const struct ns *ns, uint64_t ino)
{
	const struct nsimg_hdr *h = ns->hdr;
	uint64_t mask = h->nslot - 1;
	uint64_t i = nsimg_home(ino, h->slot_seed, h->nslot);
	uint32_t probes;

	for (probes = 0; probes <= h->probe_max; probes++, i = (i + 1) & mask) {
		const struct ns_node *n;

		if (!ns->slot[i])
			return NULL;
		n = rec_at(ns, ns->slot[i] - 1);
		if (n && n->ino == ino)
			return n;
	}
	return NULL;
}

uint64_t ns_nkids(const struct ns_node *d)
{
	return d->is_dir ? d->u.d.nkids : 0;
}

const struct ns_node *ns_kid(const struct ns *ns, const struct ns_node *d,
			     uint64_t i)
{
	uint64_t first = d->u.d.first, nrec = ns->hdr->nrec;

	/* children come after their directory (breadth first): a walk of
	 * the tree ends even in an image that says otherwise; and no sum
	 * of first and i wraps around */
	if (!d->is_dir || i >= d->u.d.nkids ||
	    first <= (uint64_t)(d - ns->rec) || first >= nrec ||
	    i >= nrec - first)
		return NULL;
	return &ns->rec[first + i];
}

const struct ns_node *ns_parent(const struct ns *ns, const struct ns_node *n)
{
	const struct ns_node *p = rec_at(ns, n->parent);

	return p ? p : n;
}

const char *ns_path(const struct ns *ns, const struct ns_node *n)
{
	return str_at(ns, n->str + n->path_at);
}

const char *ns_name(const struct ns *ns, const struct ns_node *n)
{
	return str_at(ns, n->str + n->path_at + n->name_at);
}

const char *ns_key(const struct ns *ns, const struct ns_node *n)
{
	return n->is_dir ? "" : str_at(ns, n->str + n->key_at);
}

const struct ns_node *ns_lookup(const struct ns *ns, uint64_t parent,
				const char *name)
{
	const struct ns_node *d = ns_get(ns, parent);
	uint64_t lo = 0, hi;

	if (!d || !d->is_dir)
		return NULL;
	hi = d->u.d.nkids;
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		const struct ns_node *k = ns_kid(ns, d, mid);
		int c;

		if (!k)
			return NULL;
		c = strcmp(ns_name(ns, k), name);
		if (!c)
			return k;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* the image's attributes of file @n, checked as the image says */
static void rec_attr(const struct ns *ns, const struct ns_node *n,
		     struct ns_attr *out)
{
	const char *v;

	memset(out, 0, sizeof(*out));
	if (n->is_dir)
		return;
	out->size = n->u.f.size;
	out->mtime = n->u.f.mtime;
	out->mtime_nsec = n->mtime_nsec;
	v = str_at(ns, n->str);
	memcpy(out->version, v, strnlen(v, sizeof(out->version) - 1));
	out->checked = ns->hdr->checked;
}

void ns_attr_get(struct ns *ns, const struct ns_node *n, struct ns_attr *out)
{
	const struct ovl *o = NULL;
	uint32_t later;

	rec_attr(ns, n, out);
	pthread_mutex_lock(&ns->attr_lock);
	if (ns->ovl.used)
		o = htab_get(&ns->ovl, n->ino);
	if (o)
		*out = o->a;
	later = ns->checked[n - ns->rec];
	pthread_mutex_unlock(&ns->attr_lock);
	if (!o)
		out->checked += later;
}

static bool same_attr(const struct ns_attr *a, const struct ns_attr *b)
{
	return a->size == b->size && a->mtime == b->mtime &&
	       a->mtime_nsec == b->mtime_nsec &&
	       !strcmp(a->version, b->version);
}

int ns_attr_set(struct ns *ns, const struct ns_node *n,
		const struct ns_attr *in)
{
	int64_t base = ns->hdr->checked, later = in->checked - base;
	struct ns_attr img;
	struct ovl *o;
	int rc = 0;

	rec_attr(ns, n, &img);
	pthread_mutex_lock(&ns->attr_lock);
	o = htab_get(&ns->ovl, n->ino);
	if (!o && same_attr(&img, in)) {
		/* the version the image has: only when it was vouched for */
		ns->checked[n - ns->rec] = later < 0 ? 0 :
			later > UINT32_MAX ? UINT32_MAX : (uint32_t)later;
		goto out;
	}
	if (!o) {
		o = calloc(1, sizeof(*o));
		if (o)
			o->ino = n->ino;
		if (!o || htab_put(&ns->ovl, o)) {
			free(o);
			rc = -ENOMEM;
			goto out;
		}
	}
	o->a = *in;
out:
	pthread_mutex_unlock(&ns->attr_lock);
	return rc;
}

const struct ns_node *ns_resolve(const struct ns *ns, const char *rel,
			         size_t len)
{
	const struct ns_node *n;
	const char *p;

	if (!len)
		return rec_at(ns, 0);
	n = ns_get(ns, ns_ino(ns->hdr->seed, false, rel, len));
	if (!n)
		n = ns_get(ns, ns_ino(ns->hdr->seed, true, rel, len));
	if (!n)
		return NULL;
	p = ns_path(ns, n);
	if (strlen(p) != len || memcmp(p, rel, len))
		return NULL;	/* a hash collision, not this path */
	return n;
}

const struct ns_stats *ns_stats(const struct ns *ns)
{
	return &ns->hdr->st;
}

int ns_foreach(const struct ns *ns, bool dirs,
	       int (*fn)(void *arg, const struct ns_node *n), void *arg)
{
	uint64_t i;
	int rc;

	for (i = 0; i < ns->hdr->nrec; i++) {
		const struct ns_node *n = &ns->rec[i];

		if (!n->is_dir == !dirs) {
			rc = fn(arg, n);
			if (rc)
				return rc;
		}
	}
	return 0;
}
