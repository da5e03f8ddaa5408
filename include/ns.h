/* SPDX-License-Identifier: MIT */
/*
 * ns.h - the namespace served: an immutable tree of directories and files,
 * indexed by inode number and by (parent, name), read from a namespace
 * image (ns_image.h) that ns_build.c lays out: a read-only mapping of a
 * file in the cache directory, or anonymous memory when there is none.
 * Opening an image maps it; nothing is built, and only the pages that
 * lookups touch are read (a remount of 10 million files in well under a
 * second: docs/benchmarks-scale.md).
 *
 * Inode numbers are stable: a hash of the path (separate seeds for files
 * and directories, mixed with a per-source seed), so they survive
 * remounts and re-listings and double as the cache's file ids.  The root
 * is inode 1.  The tree shape never changes; a re-listing builds a new ns
 * and the owner swaps it in.  Only file attributes change (ns_attr_set,
 * after a version re-check): they go to a small table in memory over the
 * image, guarded by the ns's own lock.
 *
 * Nodes are records inside the image: const, valid as long as the ns is,
 * their strings read through the accessors below.
 */
#ifndef FUSEFS_NS_H
#define FUSEFS_NS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "pathmap.h"

#define NS_ROOT_INO	1
#define NS_FIRST_INO	0x10000	/* below: reserved (control files) */
#define NS_CTL_NAME	".fusefs" /* the control directory, at the top:
				 * objects under that name are shadowed */
#define NS_VERSION_MAX	48	/* RADOS version or S3 ETag, NUL included */
#define NS_SIZE_MAX	(1ULL << 44)	/* largest object served: 16 TiB */
/*
 * The size an entry is listed with when its source says it is larger
 * than NS_SIZE_MAX (an S3 listing): the file is there, its open fails
 * with EFBIG (the cache takes no more than NS_SIZE_MAX), and the rest
 * of the listing goes on.
 */
#define NS_SIZE_TOO_BIG	(NS_SIZE_MAX + 1)

struct ns_attr {
	uint64_t size;
	int64_t mtime;			/* seconds */
	uint32_t mtime_nsec;
	char version[NS_VERSION_MAX];	/* backend change token */
	int64_t checked;		/* when the backend last said so */
};

/* a record of the image (48 bytes); read ino and is_dir, the rest through
 * the functions below */
struct ns_node {
	uint64_t ino;
	uint64_t str;		/* string area offset: files: version, key and,
				 * unless it is the key's tail, path; dirs: path */
	union {
		struct {
			uint64_t size;
			int64_t mtime;
		} f;
		struct {
			uint64_t first;	/* record of the first child */
			uint64_t nkids;	/* children, consecutive, by name */
		} d;
	} u;
	uint32_t parent;	/* record of the parent (the root's own) */
	uint32_t mtime_nsec;
	uint16_t key_at;	/* key at str + key_at (files) */
	uint16_t path_at;	/* path at str + path_at */
	uint16_t name_at;	/* last component at path + name_at */
	uint8_t is_dir;
	uint8_t pad;
};

struct ns_stats {
	uint64_t files;
	uint64_t dirs;
	uint64_t skipped[PM_NKINDS];	/* by pathmap reason */
	uint64_t shadowed;		/* file hidden by a same-named dir,
					 * object under NS_CTL_NAME */
	uint64_t non_utf8;		/* served verbatim */
	uint64_t collisions;		/* inode hash collisions, skipped */
	uint64_t bytes;			/* sum of file sizes */
};

struct ns;

/*
 * ns_open() - serve the image in file @path if it is whole (its sums
 * match), was built with @seed and carries @token.
 * Return: 0; -ENOENT (no file), -ESTALE (another seed or token), -EINVAL
 * (not an image of this version, or damaged: logged), other -errno.
 */
int ns_open(const char *path, uint64_t seed, uint64_t token, struct ns **out);
/* ns_destroy() - unmap and free; NULL is fine */
void ns_destroy(struct ns *ns);

/* ns_ino() - the inode of a file (or dir) at @rel[0..len) under @seed */
uint64_t ns_ino(uint64_t seed, bool dir, const char *rel, size_t len);
/* ns_file_ino() - the inode a file at @rel would get (tests, tools). */
uint64_t ns_file_ino(const struct ns *ns, const char *rel, size_t len);

/* ns_get() - node of @ino or NULL. */
const struct ns_node *ns_get(const struct ns *ns, uint64_t ino);
/* ns_lookup() - child @name of directory @parent, or NULL. */
const struct ns_node *ns_lookup(const struct ns *ns, uint64_t parent,
				const char *name);
/* ns_resolve() - the file or directory at @rel (no leading '/'), or NULL */
const struct ns_node *ns_resolve(const struct ns *ns, const char *rel,
				 size_t len);
/* ns_nkids()/ns_kid() - a directory's children (0 for a file), by name */
uint64_t ns_nkids(const struct ns_node *d);
const struct ns_node *ns_kid(const struct ns *ns, const struct ns_node *d,
			     uint64_t i);
/* ns_parent() - the parent directory (the root's is itself) */
const struct ns_node *ns_parent(const struct ns *ns, const struct ns_node *n);
/* path relative to the mount root ("" for the root), last component, and
 * backend object name ("" for directories) */
const char *ns_path(const struct ns *ns, const struct ns_node *n);
const char *ns_name(const struct ns *ns, const struct ns_node *n);
const char *ns_key(const struct ns *ns, const struct ns_node *n);

/* ns_attr_get()/ns_attr_set() - copy file attributes out / in, locked. */
void ns_attr_get(struct ns *ns, const struct ns_node *n, struct ns_attr *out);
/* Return: 0 or -ENOMEM (the attributes stay as they were) */
int ns_attr_set(struct ns *ns, const struct ns_node *n,
		const struct ns_attr *in);
const struct ns_stats *ns_stats(const struct ns *ns);
/* ns_mapped() - whether the image is a file's mapping (not memory) */
bool ns_mapped(const struct ns *ns);

/* ns_foreach() - call @fn for every file (or directory if @dirs); stops
 * on nonzero and returns it. */
int ns_foreach(const struct ns *ns, bool dirs,
	       int (*fn)(void *arg, const struct ns_node *n), void *arg);

#endif
