// SPDX-License-Identifier: MIT
/* ns_build.c - see ns_build.h; the image format is in ns_image.h */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/random.h>

#include "hash.h"
#include "htab.h"
#include "log.h"
#include "ns_build.h"
#include "ns_image.h"
#include "strsafe.h"

#define LOG_SKIPS_PER_KIND 5
/* the image keeps a file's strings within 64 KiB of their start */
#define KEY_MAX		(UINT16_MAX - NS_VERSION_MAX - 2)
#define LET_GO_RECORDS	65536	/* records filled between two let_go()s */

/*
 * A node of the tree being built (56 bytes), its strings right after it
 * in the arena: a file's version and key, then its path unless that is
 * the key's tail; a directory's path.
 */
struct bnode {
	uint64_t ino;
	struct bnode *parent;
	const char *path;	/* relative to the mount root; "" for the root */
	union {
		struct {
			uint64_t size;
			int64_t mtime;
			uint32_t mtime_nsec;
		} f;
		struct {
			struct bnode **kids;	/* sorted by name after finish */
			uint32_t nkids, kids_cap;
		} d;
	} u;
	uint32_t idx;		/* its record once laid out; before: the
				 * order it was added in */
	uint16_t name_at;	/* last component at path + name_at */
	bool is_dir;
	bool hidden;		/* shadowed by a directory of the same name */
};

static const char *bn_version(const struct bnode *n)
{
	return (const char *)(n + 1);
}

static const char *bn_key(const struct bnode *n)
{
	return bn_version(n) + strlen(bn_version(n)) + 1;
}

static const char *bn_name(const struct bnode *n)
{
	return n->path + n->name_at;
}

/* nodes are carved from blocks that go whole: no free per node */
#define ARENA_BLOCK	(4u << 20)

struct arena_block {
	struct arena_block *next;
	char mem[];
};

struct ns_build {
	uint64_t seed;
	struct arena_block *blocks;
	char *cur, *end;	/* free space in the newest block */
	struct htab tab;	/* ino -> node, directories only */
	uint32_t added;		/* nodes so far */
	struct bnode *root;
	struct ns_stats st;
	uint64_t ctl_shadowed;	/* objects under NS_CTL_NAME at the top */
	int64_t checked;	/* the oldest file's */
};

static uint64_t node_key(const void *item)
{
	return ((const struct bnode *)item)->ino;
}

/* @size zeroed bytes, 8-aligned, that live as long as @b */
static void *arena_zalloc(struct ns_build *b, size_t size)
{
	void *p;

	size = (size + 7) & ~(size_t)7;
	if ((size_t)(b->end - b->cur) < size) {
		size_t len = size > ARENA_BLOCK / 4 ? size : ARENA_BLOCK;
		struct arena_block *blk = malloc(sizeof(*blk) + len);

		if (!blk)
			return NULL;
		blk->next = b->blocks;
		b->blocks = blk;
		if (len != ARENA_BLOCK && b->cur) {
			/* a big one of its own: the current block goes on */
			memset(blk->mem, 0, size);
			return blk->mem;
		}
		b->cur = blk->mem;
		b->end = blk->mem + len;
	}
	p = b->cur;
	b->cur += size;
	memset(p, 0, size);
	return p;
}

/* whether @path is @key's tail after a '/' (or all of it) */
static bool key_ends_in(const char *key, size_t klen, const char *path,
			size_t len)
{
	return klen >= len && !memcmp(key + klen - len, path, len) &&
	       (klen == len || key[klen - len - 1] == '/');
}

static char *put_str(char *s, const char *src, size_t len)
{
	memcpy(s, src, len);
	s[len] = '\0';
	return s + len + 1;
}

/*
 * A node and its strings in one allocation: the version and key (files),
 * then the path unless it is the key's tail, as it is for every name
 * pathmap serves verbatim under the prefix.
 */
static struct bnode *node_new(struct ns_build *b, uint64_t ino,
			      const char *path, size_t len,
			      const char *key, size_t klen,
			      const struct ns_attr *a)
{
	bool shared = key && key_ends_in(key, klen, path, len);
	size_t vlen = a ? strnlen(a->version, NS_VERSION_MAX - 1) : 0;
	size_t extra = (key ? vlen + 1 + klen + 1 : 0) + (shared ? 0 : len + 1);
	struct bnode *n = arena_zalloc(b, sizeof(*n) + extra);
	const char *slash;
	char *s;

	if (!n)
		return NULL;
	s = (char *)(n + 1);
	if (key) {
		s = put_str(s, a->version, vlen);
		s = put_str(s, key, klen);
		n->u.f.size = a->size;
		n->u.f.mtime = a->mtime;
		n->u.f.mtime_nsec = a->mtime_nsec;
	}
	if (shared) {
		n->path = s - 1 - len;	/* the key's tail */
	} else {
		n->path = s;
		put_str(s, path, len);
	}
	slash = memrchr(n->path, '/', len);
	n->name_at = slash ? slash + 1 - n->path : 0;
	n->ino = ino;
	n->is_dir = !key;
	n->idx = b->added++;
	return n;
}

static int kid_add(struct bnode *dir, struct bnode *kid)
{
	if (dir->u.d.nkids == dir->u.d.kids_cap) {
		uint32_t cap = dir->u.d.kids_cap ? dir->u.d.kids_cap * 2 : 4;
		struct bnode **k = realloc(dir->u.d.kids, cap * sizeof(*k));

		if (!k)
			return -ENOMEM;
		dir->u.d.kids = k;
		dir->u.d.kids_cap = cap;
	}
	dir->u.d.kids[dir->u.d.nkids++] = kid;
	kid->parent = dir;
	return 0;
}

struct ns_build *ns_build_create(uint64_t seed)
{
	struct ns_build *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->seed = seed;
	b->checked = INT64_MAX;
	htab_init(&b->tab, node_key);
	b->root = node_new(b, NS_ROOT_INO, "", 0, NULL, 0, NULL);
	if (!b->root || htab_put(&b->tab, b->root)) {
		ns_build_destroy(b);
		return NULL;
	}
	b->root->parent = b->root;
	b->st.dirs = 1;
	return b;
}

void ns_build_destroy(struct ns_build *b)
{
	size_t i;

	if (!b)
		return;
	for (i = 0; i < b->tab.cap; i++) {
		struct bnode *n = b->tab.slot[i];

		if (n && n->is_dir)
			free(n->u.d.kids);
	}
	htab_release(&b->tab);
	while (b->blocks) {
		struct arena_block *next = b->blocks->next;

		free(b->blocks);
		b->blocks = next;
	}
	free(b);
}

/* the directory for rel[0..len), created with its parents; NULL on error */
static struct bnode *dir_get(struct ns_build *b, const char *rel, size_t len,
			     int *err)
{
	struct bnode *parent, *d;
	const char *slash;
	uint64_t ino;

	if (!len)
		return b->root;
	ino = ns_ino(b->seed, true, rel, len);
	d = htab_get(&b->tab, ino);
	if (d) {
		if (!d->is_dir || strlen(d->path) != len ||
		    memcmp(d->path, rel, len)) {
			*err = EEXIST;		/* hash collision */
			return NULL;
		}
		return d;
	}
	slash = memrchr(rel, '/', len);
	parent = dir_get(b, rel, slash ? (size_t)(slash - rel) : 0, err);
	if (!parent)
		return NULL;
	d = node_new(b, ino, rel, len, NULL, 0, NULL);
	if (!d || kid_add(parent, d) || htab_put(&b->tab, d)) {
		/* the node goes with the arena; a parent's array keeps it
		 * (unreachable by inode: left out of the image's table) */
		*err = ENOMEM;
		return NULL;
	}
	b->st.dirs++;
	return d;
}

static void note_skip(struct ns_build *b, enum pm_kind k, const char *key,
		      size_t len)
{
	if (++b->st.skipped[k] <= LOG_SKIPS_PER_KIND)
		log_warn("skipping object '%s': %s%s", str_log_n(key, len),
			 pathmap_kind_name(k),
			 b->st.skipped[k] == LOG_SKIPS_PER_KIND ?
			 " (further ones of this kind only counted)" : "");
}

/* whether @rel (@len bytes) is the control directory or under it: the
 * mount serves that name itself (ctl.h) */
static bool under_ctl(const char *rel, size_t len)
{
	size_t n = strlen(NS_CTL_NAME);

	return len >= n && !memcmp(rel, NS_CTL_NAME, n) &&
	       (len == n || rel[n] == '/');
}

int ns_build_add(struct ns_build *b, const char *key, size_t len,
		 const char *prefix, const struct ns_attr *a)
{
	struct pm_result r;
	struct bnode *dir, *f;
	const char *slash;
	uint64_t ino;
	int err = 0;

	switch (pathmap_classify(key, len, prefix, &r)) {
	case PM_OUTSIDE:
		return PM_OUTSIDE;
	case PM_FILE:
	case PM_DIR:
		break;
	default:
		note_skip(b, r.kind, key, len);
		return r.kind;
	}
	if (len > KEY_MAX) {		/* a prefix of over 60 KiB */
		note_skip(b, PM_BAD_LONG, key, len);
		return PM_BAD_LONG;
	}
	if (under_ctl(r.rel, r.rel_len)) {
		b->st.shadowed++;
		b->ctl_shadowed++;
		return NS_BUILD_SHADOWED;
	}
	if (r.non_utf8)
		b->st.non_utf8++;
	if (r.kind == PM_DIR) {
		dir = dir_get(b, r.rel, r.rel_len, &err);
		goto out;
	}
	slash = memrchr(r.rel, '/', r.rel_len);
	dir = dir_get(b, r.rel, slash ? (size_t)(slash - r.rel) : 0, &err);
	if (!dir)
		goto out;
	/* a second object of this path, or another path of this inode:
	 * found when the tree is finished (dir_finish(), fill()) */
	ino = ns_ino(b->seed, false, r.rel, r.rel_len);
	f = node_new(b, ino, r.rel, r.rel_len, key, len, a);
	if (!f || kid_add(dir, f))
		return -ENOMEM;
	if (a->checked < b->checked)
		b->checked = a->checked;
	b->st.files++;
	b->st.bytes += a->size;
out:
	if (err == ENOMEM)
		return -ENOMEM;
	if (err == EEXIST) {
		if (++b->st.collisions <= LOG_SKIPS_PER_KIND)
			log_warn("skipping object '%s': inode hash collision",
				 str_log_n(key, len));
		return PM_NKINDS;
	}
	return 0;
}

/* ---- finishing: sort, resolve conflicts ---- */

static int kid_cmp(const void *a, const void *b)
{
	const struct bnode *x = *(struct bnode * const *)a;
	const struct bnode *y = *(struct bnode * const *)b;
	int c = strcmp(bn_name(x), bn_name(y));

	/* same name: directory first, so it wins the conflict; then the
	 * first one added */
	if (c || x->is_dir != y->is_dir)
		return c ? c : (int)y->is_dir - (int)x->is_dir;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* file @k is not served after all: @why it lost */
static void drop_file(struct ns_build *b, struct bnode *k, bool shadowed)
{
	k->hidden = true;
	b->st.files--;
	b->st.bytes -= k->u.f.size;
	if (shadowed && ++b->st.shadowed <= LOG_SKIPS_PER_KIND)
		log_warn("object '%s' is shadowed by directory '%s'",
			 str_log(bn_key(k)), str_log(k->path));
	if (!shadowed && ++b->st.collisions <= LOG_SKIPS_PER_KIND)
		log_warn("skipping object '%s': its path or inode number is taken",
			 str_log(bn_key(k)));
}

static void dir_finish(struct ns_build *b, struct bnode *d)
{
	uint32_t i, out = 0;

	if (!d->u.d.nkids)
		return;
	qsort(d->u.d.kids, d->u.d.nkids, sizeof(*d->u.d.kids), kid_cmp);
	for (i = 0; i < d->u.d.nkids; i++) {
		struct bnode *k = d->u.d.kids[i];

		if (k->hidden)
			continue;
		if (out && !strcmp(bn_name(d->u.d.kids[out - 1]), bn_name(k))) {
			/* the file "a" loses against the directory "a/",
			 * and a second "a" against the first */
			drop_file(b, k, d->u.d.kids[out - 1]->is_dir);
			continue;
		}
		d->u.d.kids[out++] = k;
	}
	d->u.d.nkids = out;
}

/* ---- laying the image out ---- */

struct layout {
	struct bnode **order;	/* breadth first: a record's node */
	uint64_t nrec, nslot, str_len, total;
	uint32_t *slot;		/* the inode table, as in the image */
	uint64_t slot_seed;
	uint32_t probe_max;
};

/* the bytes of @n's strings in the area */
static uint64_t str_bytes(const struct bnode *n)
{
	size_t plen = strlen(n->path), klen;

	if (n->is_dir)
		return plen + 1;
	klen = strlen(bn_key(n));
	return strlen(bn_version(n)) + 1 + klen + 1 +
	       (key_ends_in(bn_key(n), klen, n->path, plen) ? 0 : plen + 1);
}

/* records in breadth-first order, so that siblings are consecutive */
static int plan(struct ns_build *b, struct layout *l)
{
	uint64_t head = 0, tail = 1, n = b->st.files + b->st.dirs;

	free(l->order);
	l->order = malloc(n * sizeof(*l->order));
	if (!l->order)
		return -ENOMEM;
	l->order[0] = b->root;
	l->str_len = 0;
	while (head < tail) {
		struct bnode *d = l->order[head];
		uint32_t i;

		d->idx = head++;
		l->str_len += str_bytes(d);
		for (i = 0; d->is_dir && i < d->u.d.nkids; i++)
			l->order[tail++] = d->u.d.kids[i];
	}
	l->nrec = tail;
	for (l->nslot = 2; l->nslot < l->nrec + l->nrec / 2; l->nslot *= 2)
		;
	{
		struct nsimg_hdr h = { 0 };

		l->total = nsimg_layout(&h, l->nrec, l->nslot, l->str_len);
	}
	return 0;
}

/*
 * The inode table of l->order.  Two records of one inode (two paths
 * whose hashes collide, 64 bits: about one in 10^6 for 10 million files)
 * cannot both be served: the file loses, the one found later if both
 * are (directories never collide: dir_get() compares their paths).
 * Return: how many were dropped (then plan again), or -ENOMEM.
 */
static long index_inodes(struct ns_build *b, struct layout *l)
{
	uint64_t i, mask = l->nslot - 1;
	long dropped = 0;

	free(l->slot);
	l->slot = calloc(l->nslot, sizeof(*l->slot));
	if (!l->slot)
		return -ENOMEM;
	l->probe_max = 0;
	for (i = 0; i < l->nrec; i++) {
		struct bnode *n = l->order[i], *o = NULL;
		uint64_t s = nsimg_home(n->ino, l->slot_seed, l->nslot);
		uint32_t probes = 0;

		for (; l->slot[s]; s = (s + 1) & mask, probes++) {
			o = l->order[l->slot[s] - 1];
			if (o->ino == n->ino)
				break;
			o = NULL;
		}
		if (o) {
			struct bnode *loser = n->is_dir ? o : n;

			if (loser->is_dir) {	/* cannot happen; keep the first */
				loser = n;
				loser->hidden = true;
				log_err("directory '%s': inode number taken, not served",
					str_log(n->path));
			} else {
				drop_file(b, loser, false);
			}
			dropped++;
			if (loser == n)
				continue;
		}
		l->slot[s] = i + 1;
		if (probes > l->probe_max)
			l->probe_max = probes;
	}
	return dropped;
}

/* the children that index_inodes() dropped leave their directories */
static void compact(struct ns_build *b)
{
	size_t i;

	for (i = 0; i < b->tab.cap; i++) {
		struct bnode *d = b->tab.slot[i];
		uint32_t k, out = 0;

		for (k = 0; d && k < d->u.d.nkids; k++)
			if (!d->u.d.kids[k]->hidden)
				d->u.d.kids[out++] = d->u.d.kids[k];
		if (d)
			d->u.d.nkids = out;
	}
}

/* write @src (and its NUL) at @area[*at]; its offset */
static uint64_t emit(char *area, uint64_t *at, const char *src)
{
	uint64_t off = *at;
	size_t len = strlen(src);

	memcpy(area + off, src, len + 1);
	*at += len + 1;
	return off;
}

/* pages of [@from, @to) of a file's mapping, written: out of the
 * process (the page cache keeps them, dirty until written back) */
static void let_go(uint8_t *base, uint64_t from, uint64_t to)
{
	uint64_t a = (from + 4095) & ~4095ULL, b = to & ~4095ULL;

	if (b > a)
		madvise(base + a, b - a, MADV_DONTNEED);
}

/* @written: the mapping is a file's, so what is filled can go at once
 * (the peak is the tree, not the tree and the image) */
static void fill(const struct layout *l, uint8_t *base,
		 const struct nsimg_hdr *h, bool written)
{
	struct ns_node *rec = (struct ns_node *)(base + h->rec_off);
	char *area = (char *)base + h->str_off;
	uint64_t i, at = 0, rec_mark = h->rec_off, str_mark = h->str_off;

	for (i = 0; i < l->nrec; i++) {
		if (written && i && !(i % LET_GO_RECORDS)) {
			uint64_t r = h->rec_off + i * sizeof(*rec);

			let_go(base, rec_mark, r);
			let_go(base, str_mark, h->str_off + at);
			rec_mark = r & ~4095ULL;
			str_mark = (h->str_off + at) & ~4095ULL;
		}
		const struct bnode *n = l->order[i];
		struct ns_node *r = &rec[i];

		r->ino = n->ino;
		r->parent = n->parent->idx;
		r->is_dir = n->is_dir;
		if (n->is_dir) {
			r->str = emit(area, &at, n->path);
			r->u.d.first = n->u.d.nkids ? n->u.d.kids[0]->idx : 0;
			r->u.d.nkids = n->u.d.nkids;
		} else {
			const char *key = bn_key(n);
			size_t klen = strlen(key), plen = strlen(n->path);

			r->str = emit(area, &at, bn_version(n));
			r->key_at = at - r->str;
			emit(area, &at, key);
			if (key_ends_in(key, klen, n->path, plen))
				r->path_at = r->key_at + klen - plen;
			else
				r->path_at = emit(area, &at, n->path) - r->str;
			r->u.f.size = n->u.f.size;
			r->u.f.mtime = n->u.f.mtime;
			r->mtime_nsec = n->u.f.mtime_nsec;
		}
		r->name_at = n->name_at;
	}
	memcpy(base + h->slot_off, l->slot, l->nslot * sizeof(uint32_t));
	if (written)
		let_go(base, h->rec_off, h->total);
}

/* a mapping of @len bytes backed by @path.tmp, or NULL (logged) */
static void *map_file(const char *path, size_t len, int *fdp, char **tmpp)
{
	char *tmp = NULL;
	void *p = MAP_FAILED;
	int fd = -1, rc;

	if (asprintf(&tmp, "%s.tmp", path) < 0)
		return NULL;
	fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
		  0600);
	if (fd < 0)
		goto fail;
	/* blocks reserved now: a full disk fails here, not as a SIGBUS */
	rc = posix_fallocate(fd, 0, len);
	if (rc) {
		errno = rc;
		goto fail;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	*fdp = fd;
	*tmpp = tmp;
	return p;
fail:
	log_warn("cannot write the namespace image %s: %s; keeping it in memory",
		 tmp, strerror(errno));
	if (fd >= 0) {
		unlink(tmp);
		close(fd);
	}
	free(tmp);
	return NULL;
}

int ns_build_finish(struct ns_build *b, const char *path, uint64_t token,
		    struct ns **out)
{
	struct layout l = { 0 };
	struct nsimg_hdr *h;
	char *tmp = NULL;
	uint8_t *base = NULL;
	long dropped;
	size_t i;
	int fd = -1, rc;

	if (b->ctl_shadowed)
		log_warn("'%s' at the top of the source is shadowed by the control directory of that name: its %" PRIu64 " object(s) are not served (rename it in the source)",
			 NS_CTL_NAME, b->ctl_shadowed);
	for (i = 0; i < b->tab.cap; i++)
		if (b->tab.slot[i])
			dir_finish(b, b->tab.slot[i]);
	if (getrandom(&l.slot_seed, sizeof(l.slot_seed), GRND_NONBLOCK) !=
	    sizeof(l.slot_seed))
		l.slot_seed = hash64(&l, sizeof(l), (uintptr_t)b ^ b->added);
	do {
		rc = plan(b, &l);
		if (rc)
			goto out;
		dropped = index_inodes(b, &l);
		if (dropped < 0) {
			rc = -ENOMEM;
			goto out;
		}
		if (dropped)
			compact(b);
	} while (dropped);
	if (path)
		base = map_file(path, l.total, &fd, &tmp);
	if (!base) {
		base = mmap(NULL, l.total, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base == MAP_FAILED) {
			base = NULL;
			rc = -ENOMEM;
			goto out;
		}
	}
	h = (struct nsimg_hdr *)base;
	nsimg_layout(h, l.nrec, l.nslot, l.str_len);
	h->seed = b->seed;
	h->token = token;
	h->checked = b->checked == INT64_MAX ? 0 : b->checked;
	h->slot_seed = l.slot_seed;
	h->probe_max = l.probe_max;
	h->st = b->st;
	fill(&l, base, h, tmp != NULL);
	/* through the file: the pages let go stay out of the process */
	if (!tmp || nsimg_body_sum(fd, l.total, &h->body_sum))
		h->body_sum = hash64(base + NSIMG_HDR_SIZE,
				     l.total - NSIMG_HDR_SIZE, 0);
	h->hdr_sum = nsimg_hdr_sum(h);
	mprotect(base, l.total, PROT_READ);
	if (tmp && rename(tmp, path)) {
		log_warn("cannot rename the namespace image to %s: %s",
			 path, strerror(errno));
		unlink(tmp);
	}
	rc = ns_from_memory(base, l.total, tmp != NULL, out);
	if (rc)
		goto out;
	base = NULL;		/* the ns's now */
	if (tmp)		/* written: lookups fault in what they need */
		madvise((void *)h, l.total, MADV_DONTNEED);
out:
	if (base)
		munmap(base, l.total);
	if (fd >= 0)
		close(fd);
	free(tmp);
	free(l.order);
	free(l.slot);
	ns_build_destroy(b);
	malloc_trim(0);		/* the tree's memory back to the system */
	return rc;
}
