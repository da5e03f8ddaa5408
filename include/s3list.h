/* SPDX-License-Identifier: MIT */
/*
 * s3list.h - ListObjectsV2 result pages and the bounds of one listing.
 * libxml2 is included by s3list.c only.  Pure: bytes in, entries out.
 *
 * A page is read as a stream (xmlTextReader, no document tree), twice:
 * first checked whole, then its entries handed on; its memory does not
 * grow with its size.  The backend caps a page at S3_PAGE_MAX bytes
 * before it gets here.
 */
#ifndef FUSEFS_S3LIST_H
#define FUSEFS_S3LIST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "ns.h"

#define S3_PAGE_MAX		(16U << 20)	/* bytes of one page */
/* one listing (s3_listing_init() defaults) */
#define S3_LIST_MAX_KEYS	100000000ULL
#define S3_LIST_MAX_PAGES	1000000ULL
#define S3_LIST_MAX_EMPTY	1000		/* pages in a row without a key
						 * or a common prefix */
#define S3_LIST_MAX_SECONDS	(6ULL * 3600)

struct s3_page {
	bool truncated;			/* IsTruncated */
	char next_token[1024];		/* NextContinuationToken, or the
					 * last key (versions) */
	char next_vid[1024];		/* the last VersionId (versions) */
	unsigned keys;			/* Contents seen (versions: Version
					 * and DeleteMarker) */
	unsigned latest;		/* of those, IsLatest (versions) */
	unsigned prefixes;		/* CommonPrefixes seen */
	bool url_encoded;		/* EncodingType url: Keys were decoded */
	const char *error;		/* why the page was refused, or NULL */
};

/*
 * s3list_parse() - call @fn(arg, key, len, attr) for each <Contents> of
 * the XML document @xml (@len bytes): Key, Size, LastModified and ETag
 * (the version).  A Size over NS_SIZE_MAX is not an error: the entry
 * comes with the size NS_SIZE_TOO_BIG (its open fails with EFBIG).  If
 * the page says EncodingType url (asked for with
 * encoding-type=url), each Key is URL-decoded (%XX and '+'), so @key may
 * hold any byte, NUL included: @len counts them.  Tokens are never
 * encoded (S3 encodes Key, Prefix, Delimiter and StartAfter only).
 * @key is NUL-terminated after its @len bytes either way.
 *
 * Refused with -EBADMSG, @page->error saying why, and @fn not called at
 * all: a malformed document, a DOCTYPE or entity, a root other than
 * ListBucketResult, an entry without Key or Size or with an empty Key, a
 * Size that is not plain decimal digits, an ETag with
 * a control character (it goes into If-Match headers) or longer than
 * NS_VERSION_MAX - 1, a bad %-escape, a Key over 8 KiB, a token that is
 * empty or over 1023 bytes, IsTruncated without a token.
 * Return: 0, -EBADMSG, -ENOMEM, or what @fn returned if nonzero.
 */
int s3list_parse(const char *xml, size_t len, struct s3_page *page,
		 int (*fn)(void *arg, const char *key, size_t klen,
			   const struct ns_attr *a),
		 void *arg);
/*
 * s3list_parse_dir() - s3list_parse() of a page listed with a delimiter:
 * also @pfn(arg, prefix, len) for each <CommonPrefixes><Prefix> (decoded
 * like a Key; @pfn may be NULL), in document order with the keys.  Also
 * refused: a CommonPrefixes without a Prefix, an empty one or one over
 * 8 KiB.  A Prefix outside CommonPrefixes (the request's echo) is not
 * one.
 */
int s3list_parse_dir(const char *xml, size_t len, struct s3_page *page,
		     int (*fn)(void *arg, const char *key, size_t klen,
			       const struct ns_attr *a),
		     int (*pfn)(void *arg, const char *prefix, size_t plen),
		     void *arg);

/* the version of an entry of a versions listing: S3_VID "ID" */
#define S3_VID	"vid:"

/*
 * s3list_parse_versions() - s3list_parse() of a ListObjectVersions page
 * (root ListVersionsResult): @fn is called for each <Version> whose
 * IsLatest is true, with the version "vid:" VersionId (S3_VID), or its
 * ETag for the VersionId "null" (an object written while versioning was
 * off: an overwrite replaces that version); older versions and
 * DeleteMarkers are not entries
 * (a key whose latest version is a delete marker is not listed), but
 * both count in @page->keys.  The next page starts after the last
 * Version or DeleteMarker: its decoded key in @page->next_token, its
 * VersionId in @page->next_vid (NextKeyMarker is not used: AWS encodes
 * it under encoding-type=url, RGW does not).  Refused besides: a Version
 * without a VersionId, one that is empty, has control characters or is
 * over 43 bytes (the version field is 48 with "vid:" and NUL), a "null"
 * one without a valid ETag, a DeleteMarker without Key or VersionId, a
 * last key of over 1023 bytes or with a NUL (it cannot be sent back),
 * IsTruncated on a page without an entry.
 */
int s3list_parse_versions(const char *xml, size_t len, struct s3_page *page,
			  int (*fn)(void *arg, const char *key, size_t klen,
				    const struct ns_attr *a),
			  void *arg);

/*
 * One listing's bounds, across its pages: each continuation token is
 * new (a 64-bit hash of every token seen is kept, so alternating tokens
 * are caught as well as a repeated one), keys come in strictly ascending
 * byte order (as S3 lists them: a page that repeats keys under a fresh
 * token is caught at its first key), and keys, pages, pages in a row
 * without a key and seconds are bounded.  Tests lower the max_* fields
 * after s3_listing_init().
 */
struct s3_listing {
	uint64_t max_keys, max_pages, max_seconds;
	unsigned max_empty;
	uint64_t keys, pages;
	unsigned empty;			/* pages in a row without a key */
	uint64_t *tokens;		/* open addressing, 0 = free */
	size_t ntokens, cap;
	char *last;			/* the last key */
	size_t last_len, last_cap;
	const char *error;		/* why the listing stopped, or NULL */
};

void s3_listing_init(struct s3_listing *l);
void s3_listing_release(struct s3_listing *l);
/* s3_listing_key() - one more key.  Return: 0, -E2BIG (too many),
 * -EBADMSG (not after the last one), -ENOMEM; @l->error says why. */
int s3_listing_key(struct s3_listing *l, const char *key, size_t len);
/* s3_listing_page() - @page was parsed, @elapsed_s seconds after the
 * listing began.  Return: 0 (go on if @page->truncated), -ELOOP (a token
 * seen before, too many pages or empty pages), -ETIMEDOUT, -ENOMEM;
 * @l->error says why. */
int s3_listing_page(struct s3_listing *l, const struct s3_page *page,
		    uint64_t elapsed_s);

/* s3_parse_time() - ISO 8601 "2024-01-02T03:04:05.000Z" -> *@out, unix
 * time; 0, or -EINVAL if malformed */
int s3_parse_time(const char *s, int64_t *out);
/* s3_parse_size() - @len bytes of decimal digits only (no sign, blank or
 * '+'), at most NS_SIZE_MAX.  Return: 0, -EFBIG (digits of a larger
 * number, however many: *@out is NS_SIZE_TOO_BIG) or -EINVAL */
int s3_parse_size(const char *t, size_t len, uint64_t *out);
/* s3_version_ok() - @len bytes usable as a version (and in If-Match):
 * 1..NS_VERSION_MAX-1 bytes, no control character */
bool s3_version_ok(const char *t, size_t len);
/* s3_etag_ok() - s3_version_ok(), and not S3_VID...: an ETag from a
 * listing or a HEAD that would read as a pinned version ID is refused */
bool s3_etag_ok(const char *t, size_t len);
/* s3_url_decode() - %XX and '+' (a space) of @len bytes at @in into
 * @out (at least @len bytes); the decoded length or -EINVAL */
ssize_t s3_url_decode(const char *in, size_t len, char *out);

#endif
