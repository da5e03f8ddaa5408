/* SPDX-License-Identifier: MIT */
/*
 * manifest.h - a dataset's file list, pinned: one line per file with its
 * size and version, so a mount needs no listing and serves exactly the
 * versions the manifest names (docs/manifests.md has the format).
 *
 *   #fusefs-manifest 1
 *   #source s3://bucket/prefix          (optional, informational)
 *   PATH<TAB>SIZE<TAB>VERSION[<TAB>xxh3:HEX16]
 *
 * PATH is relative to the source's prefix, percent-encoded where it holds
 * '%', a byte below 0x21 or 0x7f (and a leading '#', which would make the
 * line a comment); SIZE is decimal, at most NS_SIZE_MAX;
 * VERSION is the backend's change token (RADOS object version, S3 ETag,
 * file:// token), 1..NS_VERSION_MAX-1 printable bytes without spaces.
 * Blank lines and lines starting with '#' are comments.  The file may be
 * plain, gzip or zstd (told by its first bytes).
 *
 * Only zlib and libzstd are seen here; everything is pure except
 * manifest_read(), which reads the fd it is given.
 */
#ifndef FUSEFS_MANIFEST_H
#define FUSEFS_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ns.h"

#define MANIFEST_MAGIC		"#fusefs-manifest 1"
#define MANIFEST_LINE_MAX	16384	/* longer lines are errors */
#define MANIFEST_PATH_MAX	4095	/* decoded bytes, like pathmap */

struct manifest_entry {
	const char *path;		/* decoded, not NUL-safe: use len */
	size_t len;
	struct ns_attr attr;		/* size, version; mtime 0 */
	bool has_sum;
	uint64_t xxh3;			/* whole-file XXH3-64, if has_sum */
};

/*
 * manifest_parse_line() - parse one entry line (@line, @len bytes, no
 * newline; modified in place) into @e, decoding the path into @pathbuf
 * (MANIFEST_PATH_MAX + 1 bytes).  Return: 0, 1 for a comment or blank
 * line, -EINVAL with *@why naming the defect.
 */
int manifest_parse_line(char *line, size_t len, struct manifest_entry *e,
			char *pathbuf, const char **why);

typedef int (*manifest_fn)(void *arg, const struct manifest_entry *e,
			   unsigned long lineno);

/*
 * manifest_read() - parse the manifest on @fd (plain, gzip or zstd; the
 * fd is read to its end but not closed) and call @fn for every entry in
 * order.  @fn returning non-zero stops the parse with that value.
 * Return: 0; -EINVAL (malformed: @err holds "NAME:LINE: what"); -EIO,
 * -ENOMEM; or @fn's value.  @err (@errlen bytes) is set for every error.
 */
int manifest_read(int fd, const char *name, manifest_fn fn, void *arg,
		  char *err, size_t errlen);

/* manifest_put_header() - the magic line and an optional #source line */
int manifest_put_header(FILE *f, const char *source);
/*
 * manifest_put() - one entry line for object path @path (@len bytes,
 * relative to the prefix).  Return: 0, -EINVAL if the path or version
 * cannot be written (too long, a control byte in the version) or the
 * size is over NS_SIZE_MAX (NS_SIZE_TOO_BIG: an object no mount serves),
 * -EIO.
 */
int manifest_put(FILE *f, const char *path, size_t len,
		 const struct ns_attr *a);

#endif
