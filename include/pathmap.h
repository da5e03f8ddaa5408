/* SPDX-License-Identifier: MIT */
/*
 * pathmap.h - how backend object names become paths.  Pure functions.
 *
 * Rules (docs/configuration.md, "Object names and paths"):
 *  - only names below PREFIX/ are shown; PREFIX/ itself is stripped;
 *  - the rest is split on '/'; a name ending in '/' is a directory
 *    marker (an explicit, possibly empty directory);
 *  - a name with an empty component ("a//b", "/a"), a "." or ".."
 *    component, a component over 255 bytes, a path over 4095 bytes or
 *    a NUL byte is skipped;
 *  - other bytes are kept verbatim (Linux names are bytes), non-UTF-8
 *    names are counted but served;
 *  - a name that is both a file and a directory prefix ("a" and "a/b"):
 *    the directory wins, the file is shadowed (ns.c).
 */
#ifndef FUSEFS_PATHMAP_H
#define FUSEFS_PATHMAP_H

#include <stdbool.h>
#include <stddef.h>

enum pm_kind {
	PM_FILE,		/* a regular file at rel */
	PM_DIR,			/* a directory marker: rel without the '/' */
	PM_OUTSIDE,		/* not below the prefix: ignore silently */
	PM_BAD_EMPTY,		/* empty component */
	PM_BAD_DOT,		/* "." or ".." component */
	PM_BAD_LONG,		/* component > 255 or path > 4095 bytes */
	PM_BAD_NUL,		/* contains a NUL byte */
	PM_NKINDS
};

struct pm_result {
	enum pm_kind kind;
	const char *rel;	/* points into the name */
	size_t rel_len;		/* without a trailing '/' */
	bool non_utf8;
};

/*
 * pathmap_classify() - map object @name (@len bytes, may hold any byte)
 * under @prefix (no leading or trailing '/', may be "") to @out.
 * Return: out->kind.
 */
enum pm_kind pathmap_classify(const char *name, size_t len,
			      const char *prefix, struct pm_result *out);

/* pathmap_kind_name() - short name of a skip reason, for logs and stats */
const char *pathmap_kind_name(enum pm_kind k);

/* utf8_valid() - true if @len bytes at @s are well-formed UTF-8 */
bool utf8_valid(const char *s, size_t len);

#endif
