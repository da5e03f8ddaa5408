/* SPDX-License-Identifier: MIT */
/*
 * s3list.h - parse one ListObjectsV2 result page with libxml2 (the only
 * file that includes it).  Pure: bytes in, entries out.
 */
#ifndef FUSEFS_S3LIST_H
#define FUSEFS_S3LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "ns.h"

struct s3_page {
	bool truncated;			/* IsTruncated */
	char next_token[1024];		/* NextContinuationToken */
	unsigned keys;			/* Contents seen */
};

/*
 * s3list_parse() - call @fn(arg, key, len, attr) for each <Contents> of
 * the XML document @xml (@len bytes): Key, Size, LastModified and ETag
 * (the version).  Return: 0, -EBADMSG for a malformed document, a
 * non-ListBucketResult root or an entry without Key/Size, or what @fn
 * returned if nonzero.
 */
int s3list_parse(const char *xml, size_t len, struct s3_page *page,
		 int (*fn)(void *arg, const char *key, size_t klen,
			   const struct ns_attr *a),
		 void *arg);

/* s3_parse_time() - ISO 8601 "2024-01-02T03:04:05.000Z" -> *@out, unix
 * time; 0, or -EINVAL if malformed */
int s3_parse_time(const char *s, int64_t *out);

#endif
