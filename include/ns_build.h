/* SPDX-License-Identifier: MIT */
/*
 * ns_build.h - builds a namespace from backend object names: names mapped
 * by pathmap, directories synthesized, a file shadowed by a directory of
 * the same name dropped, directories sorted by name; then laid out as a
 * namespace image (ns_image.h) and served by ns.c.  Not locked: one
 * thread builds.
 */
#ifndef FUSEFS_NS_BUILD_H
#define FUSEFS_NS_BUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ns.h"

#define NS_BUILD_SHADOWED	(PM_NKINDS + 1)

struct ns_build;

/* ns_build_create() - an empty tree holding the root; NULL on ENOMEM.
 * @seed: the per-source inode seed. */
struct ns_build *ns_build_create(uint64_t seed);
void ns_build_destroy(struct ns_build *b);

/*
 * ns_build_add() - add backend object @key (@len bytes) with attributes @a,
 * mapped under @prefix by pathmap_classify().  Skipped names are counted
 * and the first few of each kind logged.
 * Return: 0 if added (or a directory marker), the pm_kind (> 0) why it
 * was skipped (PM_NKINDS: an inode hash collision; NS_BUILD_SHADOWED:
 * at or under NS_CTL_NAME at the top, counted as shadowed and named in
 * one warning by ns_build_finish()), or -ENOMEM.
 */
int ns_build_add(struct ns_build *b, const char *key, size_t len,
		 const char *prefix, const struct ns_attr *a);

/*
 * ns_build_finish() - resolve conflicts, sort, and lay the tree out as an
 * image carrying @token: in file @path (written as @path.tmp and renamed
 * over it; space reserved first, so a full disk is an error, not a
 * SIGBUS), or in anonymous memory when @path is NULL or the file cannot
 * be written (logged once).  Consumes @b, also on error.
 * Return: 0 with *@out served, or -ENOMEM.
 */
int ns_build_finish(struct ns_build *b, const char *path, uint64_t token,
		    struct ns **out);

/* ns_from_memory() - serve the image at @base (@len bytes, a mapping that
 * the ns unmaps); ns_build_finish()'s way into ns.c.  0 or -EINVAL. */
int ns_from_memory(void *base, size_t len, bool mapped, struct ns **out);

#endif
