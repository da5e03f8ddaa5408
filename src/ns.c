// SPDX-License-Identifier: MIT
/* ns.c - see ns.h */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "htab.h"
#include "log.h"
#include "ns.h"
#include "strsafe.h"

#define SEED_DIR	0x9e3779b97f4a7c15ULL
#define SEED_FILE	0xc2b2ae3d27d4eb4fULL
#define LOG_SKIPS_PER_KIND 5

struct ns {
	uint64_t seed;
	struct htab tab;	/* ino -> node, every node */
	struct ns_node *root;
	struct ns_stats st;
	pthread_mutex_t attr_lock;
};

static uint64_t mkino(const struct ns *ns, bool dir, const char *p, size_t len)
{
	uint64_t h = hash64(p, len, ns->seed ^ (dir ? SEED_DIR : SEED_FILE));

	return h < NS_FIRST_INO ? h + NS_FIRST_INO : h;
}

uint64_t ns_file_ino(const struct ns *ns, const char *rel, size_t len)
{
	return mkino(ns, false, rel, len);
}

static uint64_t node_key(const void *item)
{
	return ((const struct ns_node *)item)->ino;
}

static int tab_insert(struct ns *ns, struct ns_node *n)
{
	return htab_put(&ns->tab, n);
}

static struct ns_node *tab_get(const struct ns *ns, uint64_t ino)
{
	return htab_get(&ns->tab, ino);
}

static void node_free(struct ns_node *n)
{
	free(n->kids);
	free(n);		/* the strings live in the same allocation */
}

/* whether @path is @key's tail after a '/' (or all of it) */
static bool key_ends_in(const char *key, size_t klen, const char *path,
			size_t len)
{
	return klen >= len && !memcmp(key + klen - len, path, len) &&
	       (klen == len || key[klen - len - 1] == '/');
}

/*
 * A node and its strings in one allocation: the key (files; NULL for
 * directories), then the path unless it is the key's tail, as it is
 * for every name pathmap serves verbatim under the prefix.  One malloc
 * instead of three saves their headers and roundings and a copy of the
 * path: about 64 bytes a file (docs/benchmarks-scale.md).
 */
static struct ns_node *node_new(uint64_t ino, const char *path, size_t len,
				const char *key, size_t klen, bool dir)
{
	bool shared = key && key_ends_in(key, klen, path, len);
	size_t extra = (key ? klen + 1 : 0) + (shared ? 0 : len + 1);
	struct ns_node *n = calloc(1, sizeof(*n) + extra);
	const char *slash;
	char *s;

	if (!n)
		return NULL;
	s = (char *)(n + 1);
	if (key) {
		memcpy(s, key, klen);
		s[klen] = '\0';
		n->key = s;
		s += klen + 1;
	}
	if (shared) {
		n->path = n->key + klen - len;
	} else {
		memcpy(s, path, len);
		s[len] = '\0';
		n->path = s;
	}
	slash = memrchr(n->path, '/', len);
	n->name = slash ? slash + 1 : n->path;
	n->ino = ino;
	n->is_dir = dir;
	return n;
}

static int kid_add(struct ns_node *dir, struct ns_node *kid)
{
	if (dir->nkids == dir->kids_cap) {
		uint32_t cap = dir->kids_cap ? dir->kids_cap * 2 : 4;
		struct ns_node **k = realloc(dir->kids, cap * sizeof(*k));

		if (!k)
			return -ENOMEM;
		dir->kids = k;
		dir->kids_cap = cap;
	}
	dir->kids[dir->nkids++] = kid;
	kid->parent = dir->ino;
	return 0;
}

struct ns *ns_create(uint64_t seed)
{
	struct ns *ns = calloc(1, sizeof(*ns));

	if (!ns)
		return NULL;
	ns->seed = seed;
	htab_init(&ns->tab, node_key);
	pthread_mutex_init(&ns->attr_lock, NULL);
	ns->root = node_new(NS_ROOT_INO, "", 0, NULL, 0, true);
	if (!ns->root || tab_insert(ns, ns->root)) {
		ns_destroy(ns);
		return NULL;
	}
	ns->root->parent = NS_ROOT_INO;
	ns->st.dirs = 1;
	return ns;
}

void ns_destroy(struct ns *ns)
{
	size_t i;

	if (!ns)
		return;
	for (i = 0; i < ns->tab.cap; i++)
		if (ns->tab.slot[i])
			node_free(ns->tab.slot[i]);
	if (ns->root && !ns->tab.used)
		node_free(ns->root);
	htab_release(&ns->tab);
	pthread_mutex_destroy(&ns->attr_lock);
	free(ns);
}

/* the directory for rel[0..len), created with its parents; NULL on error */
static struct ns_node *dir_get(struct ns *ns, const char *rel, size_t len,
			       int *err)
{
	struct ns_node *parent, *d;
	const char *slash;
	uint64_t ino;

	if (!len)
		return ns->root;
	ino = mkino(ns, true, rel, len);
	d = tab_get(ns, ino);
	if (d) {
		if (!d->is_dir || strlen(d->path) != len ||
		    memcmp(d->path, rel, len)) {
			*err = EEXIST;		/* hash collision */
			return NULL;
		}
		return d;
	}
	slash = memrchr(rel, '/', len);
	parent = dir_get(ns, rel, slash ? (size_t)(slash - rel) : 0, err);
	if (!parent)
		return NULL;
	d = node_new(ino, rel, len, NULL, 0, true);
	if (!d || kid_add(parent, d) || tab_insert(ns, d)) {
		/* a node already linked to its parent is freed with the tree */
		if (d && d->parent == 0)
			node_free(d);
		*err = ENOMEM;
		return NULL;
	}
	ns->st.dirs++;
	return d;
}

static void note_skip(struct ns *ns, enum pm_kind k, const char *key,
		      size_t len)
{
	if (++ns->st.skipped[k] <= LOG_SKIPS_PER_KIND)
		log_warn("skipping object '%s': %s%s", str_log_n(key, len),
			 pathmap_kind_name(k),
			 ns->st.skipped[k] == LOG_SKIPS_PER_KIND ?
			 " (further ones of this kind only counted)" : "");
}

int ns_add(struct ns *ns, const char *key, size_t len, const char *prefix,
	   const struct ns_attr *a)
{
	struct pm_result r;
	struct ns_node *dir, *f;
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
		note_skip(ns, r.kind, key, len);
		return r.kind;
	}
	if (r.non_utf8)
		ns->st.non_utf8++;
	if (r.kind == PM_DIR) {
		dir = dir_get(ns, r.rel, r.rel_len, &err);
		goto out;
	}
	slash = memrchr(r.rel, '/', r.rel_len);
	dir = dir_get(ns, r.rel, slash ? (size_t)(slash - r.rel) : 0, &err);
	if (!dir)
		goto out;
	ino = mkino(ns, false, r.rel, r.rel_len);
	if (tab_get(ns, ino)) {
		err = EEXIST;
		goto out;
	}
	f = node_new(ino, r.rel, r.rel_len, key, len, false);
	if (!f)
		return -ENOMEM;
	if (kid_add(dir, f) || tab_insert(ns, f)) {
		if (!f->parent)
			node_free(f);
		return -ENOMEM;
	}
	f->attr = *a;
	f->attr.version[NS_VERSION_MAX - 1] = '\0';
	ns->st.files++;
	ns->st.bytes += a->size;
out:
	if (err == ENOMEM)
		return -ENOMEM;
	if (err == EEXIST) {
		if (++ns->st.collisions <= LOG_SKIPS_PER_KIND)
			log_warn("skipping object '%s': inode hash collision",
				 str_log_n(key, len));
		return PM_NKINDS;
	}
	return 0;
}

static int kid_cmp(const void *a, const void *b)
{
	const struct ns_node *x = *(struct ns_node * const *)a;
	const struct ns_node *y = *(struct ns_node * const *)b;
	int c = strcmp(x->name, y->name);

	/* same name: directory first, so it wins the conflict */
	return c ? c : (int)y->is_dir - (int)x->is_dir;
}

static void dir_finish(struct ns *ns, struct ns_node *d)
{
	uint32_t i, out = 0;

	if (!d->nkids)
		return;
	qsort(d->kids, d->nkids, sizeof(*d->kids), kid_cmp);
	for (i = 0; i < d->nkids; i++) {
		struct ns_node *k = d->kids[i];

		if (out && !strcmp(d->kids[out - 1]->name, k->name)) {
			/* the file "a" loses against the directory "a/" */
			k->hidden = true;
			ns->st.shadowed++;
			ns->st.files--;
			ns->st.bytes -= k->attr.size;
			if (ns->st.shadowed <= LOG_SKIPS_PER_KIND)
				log_warn("object '%s' is shadowed by directory '%s'",
					 str_log(k->key), str_log(k->path));
			continue;
		}
		d->kids[out++] = k;
	}
	d->nkids = out;
}

void ns_finish(struct ns *ns)
{
	size_t i;

	for (i = 0; i < ns->tab.cap; i++) {
		struct ns_node *n = ns->tab.slot[i];

		if (n && n->is_dir)
			dir_finish(ns, n);
	}
}

const struct ns_node *ns_get(const struct ns *ns, uint64_t ino)
{
	const struct ns_node *n = tab_get(ns, ino);

	return n && !n->hidden ? n : NULL;
}

const struct ns_node *ns_lookup(const struct ns *ns, uint64_t parent,
				const char *name)
{
	const struct ns_node *d = ns_get(ns, parent);
	uint32_t lo = 0, hi;

	if (!d || !d->is_dir)
		return NULL;
	hi = d->nkids;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		int c = strcmp(d->kids[mid]->name, name);

		if (!c)
			return d->kids[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

void ns_attr_get(struct ns *ns, const struct ns_node *n, struct ns_attr *out)
{
	pthread_mutex_lock(&ns->attr_lock);
	*out = n->attr;
	pthread_mutex_unlock(&ns->attr_lock);
}

void ns_attr_set(struct ns *ns, const struct ns_node *n,
		 const struct ns_attr *in)
{
	pthread_mutex_lock(&ns->attr_lock);
	((struct ns_node *)n)->attr = *in;
	pthread_mutex_unlock(&ns->attr_lock);
}

const struct ns_node *ns_resolve(const struct ns *ns, const char *rel,
			         size_t len)
{
	const struct ns_node *n;

	if (!len)
		return ns->root;
	n = ns_get(ns, mkino(ns, false, rel, len));
	if (!n)
		n = ns_get(ns, mkino(ns, true, rel, len));
	if (n && (strlen(n->path) != len || memcmp(n->path, rel, len)))
		n = NULL;	/* a hash collision, not this path */
	return n;
}

const struct ns_stats *ns_stats(const struct ns *ns)
{
	return &ns->st;
}

int ns_foreach(const struct ns *ns, bool dirs,
	       int (*fn)(void *arg, const struct ns_node *n), void *arg)
{
	size_t i;
	int rc;

	for (i = 0; i < ns->tab.cap; i++) {
		const struct ns_node *n = ns->tab.slot[i];

		if (n && n->is_dir == dirs && !n->hidden) {
			rc = fn(arg, n);
			if (rc)
				return rc;
		}
	}
	return 0;
}
