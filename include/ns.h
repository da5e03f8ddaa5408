/* SPDX-License-Identifier: MIT */
/*
 * ns.h - the namespace: an immutable tree of directories and files built
 * from a backend listing, indexed by inode number.
 *
 * Inode numbers are stable: a hash of the path (separate seeds for files
 * and directories, mixed with a per-source seed), so they survive
 * remounts and re-listings and double as the cache's file ids.  The root
 * is inode 1.  After ns_finish() the tree shape never changes; a
 * re-listing builds a new ns and the owner swaps it in.  Only file
 * attributes change in place (ns_attr_set, after a version re-check);
 * they are guarded by the ns's own lock.
 */
#ifndef FUSEFS_NS_H
#define FUSEFS_NS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

#include "pathmap.h"

#define NS_ROOT_INO	1
#define NS_FIRST_INO	0x10000	/* below: reserved (control files) */
#define NS_VERSION_MAX	48	/* RADOS version or S3 ETag, NUL included */
#define NS_SIZE_MAX	(1ULL << 44)	/* largest object served: 16 TiB */

struct ns_attr {
	uint64_t size;
	int64_t mtime;			/* seconds */
	uint32_t mtime_nsec;
	char version[NS_VERSION_MAX];	/* backend change token */
	int64_t checked;		/* when the backend last said so */
};

struct ns_node {
	uint64_t ino;
	uint64_t parent;
	const char *path;	/* relative to the mount root; "" for the root */
	const char *name;	/* last component, points into path */
	const char *key;	/* backend object name (files only) */
	/* path and key live in the node's own allocation (path often as
	 * key's tail) and go with it */
	bool is_dir;
	bool hidden;		/* shadowed by a directory of the same name */
	struct ns_attr attr;	/* files: read with ns_attr_get() */
	struct ns_node **kids;	/* directories: sorted by name after finish */
	uint32_t nkids, kids_cap;
};

struct ns_stats {
	uint64_t files;
	uint64_t dirs;
	uint64_t skipped[PM_NKINDS];	/* by pathmap reason */
	uint64_t shadowed;		/* file hidden by a same-named dir */
	uint64_t non_utf8;		/* served verbatim */
	uint64_t collisions;		/* inode hash collisions, skipped */
	uint64_t bytes;			/* sum of file sizes */
};

struct ns;

/* ns_create() - empty tree holding the root; NULL on ENOMEM. */
struct ns *ns_create(uint64_t seed);
void ns_destroy(struct ns *ns);

/*
 * ns_add() - add backend object @key (@len bytes) with attributes @a,
 * mapped under @prefix by pathmap_classify().  Skipped names are counted
 * and the first few of each kind logged.
 * Return: 0 if added (or a directory marker), the pm_kind (> 0) why it
 * was skipped, or -ENOMEM.
 */
int ns_add(struct ns *ns, const char *key, size_t len, const char *prefix,
	   const struct ns_attr *a);
/* ns_finish() - sort directories, resolve file/directory conflicts. */
void ns_finish(struct ns *ns);

/* ns_get() - node of @ino or NULL (also for hidden nodes). */
const struct ns_node *ns_get(const struct ns *ns, uint64_t ino);
/* ns_lookup() - child @name of directory @parent, or NULL. */
const struct ns_node *ns_lookup(const struct ns *ns, uint64_t parent,
				const char *name);
/* ns_resolve() - the file or directory at @rel (no leading '/'), or NULL */
const struct ns_node *ns_resolve(const struct ns *ns, const char *rel,
				 size_t len);
/* ns_attr_get()/ns_attr_set() - copy file attributes out / in, locked. */
void ns_attr_get(struct ns *ns, const struct ns_node *n, struct ns_attr *out);
void ns_attr_set(struct ns *ns, const struct ns_node *n,
		 const struct ns_attr *in);
const struct ns_stats *ns_stats(const struct ns *ns);

/* ns_file_ino() - the inode a file at @rel would get (tests, tools). */
uint64_t ns_file_ino(const struct ns *ns, const char *rel, size_t len);

/* ns_foreach() - call @fn for every visible file (or directory if
 * @dirs); stops on nonzero and returns it. */
int ns_foreach(const struct ns *ns, bool dirs,
	       int (*fn)(void *arg, const struct ns_node *n), void *arg);

#endif
