// SPDX-License-Identifier: MIT
/*
 * fuzz_s3list.c - one ListObjectsV2 result page (s3list_parse_dir(): keys
 * and common prefixes), the same bytes as a ListObjectVersions page
 * (s3list_parse_versions()), as a hostile or broken S3 endpoint could
 * send them, and s3_parse_time() on the input's first bytes.
 *
 * Invariants (include/s3list.h):
 *  - the result is 0, -EBADMSG or what the callback returned, and the
 *    callback is not called again after it returned nonzero (it stops
 *    at a key starting with "STOP");
 *  - every entry has a non-empty key of klen bytes, NUL-terminated
 *    after them (a decoded %00 may be inside),
 *    a size of at most NS_SIZE_MAX (or NS_SIZE_TOO_BIG: one file failing
 *    with EFBIG), a non-negative mtime and a
 *    NUL-terminated version with no control characters (it goes into an
 *    If-Match header);
 *  - every common prefix passed on is non-empty, and page->prefixes
 *    counts at least those;
 *  - page->keys counts at least the entries passed on, next_token is
 *    terminated, and a successful truncated page has a token;
 *  - a versions page passes on versions "vid:" + a non-empty ID other
 *    than "null" (or an ETag), and its markers are terminated;
 *  - no external entity or DTD is ever fetched (the entity loader
 *    aborts).
 */
#include <errno.h>
#include <libxml/parser.h>
#include <libxml/parserInternals.h>

#include "fuzz.h"
#include "s3list.h"

#define STOP_RC	(-ECANCELED)

struct seen {
	unsigned n, prefixes;
	bool stopped;
	bool versions;		/* entries must be "vid:" versions */
};

static int on_prefix(void *arg, const char *pre, size_t len)
{
	struct seen *s = arg;

	FUZZ_CHECK(!s->stopped, "prefix callback after a stop");
	FUZZ_CHECK(pre && len > 0, "empty common prefix");
	s->prefixes++;
	return 0;
}

static int on_entry(void *arg, const char *key, size_t klen,
		    const struct ns_attr *a)
{
	struct seen *s = arg;
	const char *v;

	FUZZ_CHECK(!s->stopped, "callback called after it returned %d",
		   STOP_RC);
	/* a decoded %00 may be inside (s3list.h); the end is marked */
	FUZZ_CHECK(key && klen > 0 && key[klen] == '\0',
		   "key of %zu bytes not terminated", klen);
	/* a listed size over 2^44 is that one file's, failing with EFBIG */
	FUZZ_CHECK(a->size <= NS_SIZE_MAX || a->size == NS_SIZE_TOO_BIG,
		   "size %llu", (unsigned long long)a->size);
	FUZZ_CHECK(a->mtime >= 0, "mtime %lld", (long long)a->mtime);
	FUZZ_CHECK(memchr(a->version, '\0', NS_VERSION_MAX) != NULL,
		   "version not terminated");
	for (v = a->version; *v; v++)
		FUZZ_CHECK((unsigned char)*v >= 0x20 && *v != 0x7f,
			   "control character %#x in the version", *v);
	/* a version ID, never "null" (that one is pinned by its ETag) */
	FUZZ_CHECK(!s->versions || strncmp(a->version, S3_VID, strlen(S3_VID)) ||
		   (a->version[strlen(S3_VID)] &&
		    strcmp(a->version + strlen(S3_VID), "null")),
		   "versions: version '%s'", a->version);
	s->n++;
	if (!strncmp(key, "STOP", 4)) {
		s->stopped = true;
		return STOP_RC;
	}
	return 0;
}

static xmlParserInputPtr no_loader(const char *url, const char *id,
				   xmlParserCtxtPtr ctxt)
{
	FUZZ_CHECK(0, "libxml2 asked to load '%s' (%s)", url ? url : "",
		   id ? id : "");
	return NULL;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	xmlInitParser();
	xmlSetExternalEntityLoader(no_loader);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen s = { 0 };
	struct s3_page page;
	char *head;
	int64_t when;
	int rc;

	rc = s3list_parse_dir((const char *)data, size, &page, on_entry,
			      on_prefix, &s);
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG || (rc == STOP_RC && s.stopped),
		   "rc %d", rc);
	FUZZ_CHECK(page.keys >= s.n, "%u entries passed on, %u counted", s.n,
		   page.keys);
	FUZZ_CHECK(page.prefixes >= s.prefixes, "%u prefixes passed on, %u counted",
		   s.prefixes, page.prefixes);
	FUZZ_CHECK(memchr(page.next_token, '\0', sizeof(page.next_token)),
		   "token not terminated");
	if (rc == 0 && page.truncated)
		FUZZ_CHECK(page.next_token[0], "truncated page without token");

	/* the same bytes as a ListObjectVersions page: entries are current
	 * versions named "vid:ID" */
	memset(&s, 0, sizeof(s));
	s.versions = true;
	rc = s3list_parse_versions((const char *)data, size, &page, on_entry,
				   &s);
	FUZZ_CHECK(rc == 0 || rc == -EBADMSG || (rc == STOP_RC && s.stopped),
		   "versions: rc %d", rc);
	FUZZ_CHECK(page.keys >= s.n, "versions: %u entries passed on, %u counted",
		   s.n, page.keys);
	FUZZ_CHECK(memchr(page.next_token, '\0', sizeof(page.next_token)) &&
		   memchr(page.next_vid, '\0', sizeof(page.next_vid)),
		   "versions: a marker not terminated");
	if (rc == 0 && page.truncated)
		FUZZ_CHECK(page.next_token[0], "versions: truncated page without a key marker");

	head = fuzz_strndup(data, size < 64 ? size : 64);
	if (s3_parse_time(head, &when) == 0)
		FUZZ_CHECK(strlen(head) >= 11, "'%s' taken for a time", head);
	free(head);
	return 0;
}
