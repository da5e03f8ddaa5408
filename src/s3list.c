// SPDX-License-Identifier: MIT
/* s3list.c - see s3list.h */
#include <errno.h>
#include <libxml/xmlreader.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "compiler.h"
#include "hash.h"
#include "s3list.h"

#define KEY_TEXT_MAX	8192	/* a Key as sent: S3 keys are <= 1024 bytes */
#define SHORT_TEXT_MAX	256	/* Size, LastModified, ETag, IsTruncated... */

int s3_parse_time(const char *s, int64_t *out)
{
	struct tm tm = { 0 };
	int n = 0;

	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
		   &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    tm.tm_mon < 1 || tm.tm_mon > 12)
		return -EINVAL;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*out = (int64_t)timegm(&tm);
	return 0;
}

int s3_parse_size(const char *t, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (!len)
		return -EINVAL;
	for (i = 0; i < len; i++)
		if (t[i] < '0' || t[i] > '9')
			return -EINVAL;
	for (i = 0; i < len; i++) {
		v = v * 10 + (uint64_t)(t[i] - '0');
		if (v > NS_SIZE_MAX) {	/* before it could wrap */
			*out = NS_SIZE_TOO_BIG;
			return -EFBIG;
		}
	}
	*out = v;
	return 0;
}

bool s3_etag_ok(const char *t, size_t len)
{
	return s3_version_ok(t, len) &&
	       (len < strlen(S3_VID) || memcmp(t, S3_VID, strlen(S3_VID)));
}

bool s3_version_ok(const char *t, size_t len)
{
	size_t i;

	if (!len || len >= NS_VERSION_MAX)
		return false;
	for (i = 0; i < len; i++)
		if ((unsigned char)t[i] < 0x20 || t[i] == 0x7f)
			return false;
	return true;
}

ssize_t s3_url_decode(const char *in, size_t len, char *out)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		if (in[i] == '%') {
			int hi, lo;

			if (i + 2 >= len)
				return -EINVAL;
			hi = hex_digit(in[i + 1]);
			lo = hex_digit(in[i + 2]);
			if (hi < 0 || lo < 0)
				return -EINVAL;
			out[n++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			out[n++] = in[i] == '+' ? ' ' : in[i];
		}
	}
	return (ssize_t)n;
}

/* ---- one page, read as a stream (memory does not grow with the page) ---- */

/* text of the element being read, capped */
struct text {
	char *p;
	size_t len, cap;
	bool over;		/* longer than cap: refused or cut, see users */
};

static void text_reset(struct text *t)
{
	t->len = 0;
	t->over = false;
	t->p[0] = '\0';
}

static void text_add(struct text *t, const char *s)
{
	size_t n = strlen(s);

	if (t->len + n > t->cap) {
		n = t->cap - t->len;
		t->over = true;
	}
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = '\0';
}

enum field {
	F_NONE, F_OTHER,
	/* children of the root (Version and DeleteMarker: of a
	 * ListVersionsResult) */
	F_CONTENTS, F_DELMARK, F_PREFIXES, F_TRUNCATED, F_TOKEN, F_ENCODING,
	/* children of Contents or Version (Prefix: of CommonPrefixes) */
	F_KEY, F_SIZE, F_MTIME, F_ETAG, F_PREFIX, F_VID, F_LATEST,
};

struct parse {
	struct s3_page *page;
	int (*fn)(void *arg, const char *key, size_t klen,
		  const struct ns_attr *a);
	int (*pfn)(void *arg, const char *prefix, size_t len);
	void *arg;
	bool deliver;		/* the second pass: call fn */
	bool versions;		/* a ListVersionsResult */
	bool url;		/* keys are URL-encoded (from the first pass) */
	enum field top, sub;	/* element open at depth 1, at depth 2 */
	struct text key, small;
	char *decoded;		/* KEY_TEXT_MAX bytes */
	/* the Contents being read */
	struct ns_attr a;
	bool have_key, have_size;
	bool have_prefix;	/* the CommonPrefixes being read */
	bool have_vid, latest;	/* the Version being read */
	char etag[NS_VERSION_MAX];	/* its ETag ("" if none) */
};

/* the elements read: children of the root (@top) or of an entry; @v:
 * of a ListVersionsResult (a DeleteMarker is not an entry) */
static enum field field_of(const char *name, bool top, bool v)
{
	enum { BOTH, LIST, VERS };
	static const struct {
		const char *name;
		enum field f;
		bool top;
		int in;
	} known[] = {
		{ "Contents", F_CONTENTS, true, LIST },
		{ "Version", F_CONTENTS, true, VERS },
		{ "CommonPrefixes", F_PREFIXES, true, BOTH },
		{ "IsTruncated", F_TRUNCATED, true, BOTH },
		{ "DeleteMarker", F_DELMARK, true, VERS },
		{ "NextContinuationToken", F_TOKEN, true, LIST },
		{ "EncodingType", F_ENCODING, true, BOTH },
		{ "Key", F_KEY, false, BOTH },
		{ "Size", F_SIZE, false, BOTH },
		{ "LastModified", F_MTIME, false, BOTH },
		{ "ETag", F_ETAG, false, BOTH },
		{ "Prefix", F_PREFIX, false, BOTH },
		{ "VersionId", F_VID, false, VERS },
		{ "IsLatest", F_LATEST, false, VERS },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(known); i++)
		if (known[i].top == top && !strcmp(name, known[i].name) &&
		    (known[i].in == BOTH || (known[i].in == VERS) == v))
			return known[i].f;
	return F_OTHER;
}

static int refuse(struct parse *p, const char *why)
{
	if (!p->page->error)
		p->page->error = why;
	return -EBADMSG;
}

/* the element at depth 2 inside a Contents ended */
static int end_sub(struct parse *p)
{
	struct text *t = &p->small;
	int64_t when;

	switch (p->sub) {
	case F_KEY:
		if (p->key.over)
			return refuse(p, "a Key longer than 8 KiB");
		p->have_key = true;
		break;
	case F_SIZE:
		/* too large (-EFBIG): listed, its open fails, the listing
		 * goes on (NS_SIZE_TOO_BIG) */
		if (t->over || s3_parse_size(t->p, t->len, &p->a.size) == -EINVAL)
			return refuse(p, "a Size that is not a decimal number");
		p->have_size = true;
		break;
	case F_MTIME:
		p->a.mtime = s3_parse_time(t->p, &when) || when < 0 ? 0 : when;
		break;
	case F_PREFIX:
		if (p->key.over)
			return refuse(p, "a Prefix longer than 8 KiB");
		p->have_prefix = true;
		break;
	case F_ETAG:
		/* it goes into If-Match headers: CR/LF would split them */
		if (t->over || !s3_etag_ok(t->p, t->len))
			return refuse(p, "an ETag with control characters, longer than 47 bytes or starting with \"" S3_VID "\"");
		/* of a Version: the version if its ID is "null" */
		memcpy(p->versions ? p->etag : p->a.version, t->p, t->len + 1);
		break;
	case F_VID:
		/* "vid:" + the ID, kept and sent in URLs %-encoded */
		if (t->over || !t->len ||
		    t->len + sizeof(S3_VID) > sizeof(p->a.version) ||
		    !s3_version_ok(t->p, t->len))
			return refuse(p, "a VersionId that is empty, has control characters or is longer than 43 bytes");
		snprintf(p->a.version, sizeof(p->a.version), S3_VID "%s", t->p);
		p->have_vid = true;
		break;
	case F_LATEST:
		p->latest = !strcmp(t->p, "true");
		break;
	default:
		break;
	}
	return 0;
}

/*
 * A versions page goes on after its last entry, Version or DeleteMarker:
 * its key (decoded) and version ID.  Not NextKeyMarker: AWS %-encodes it
 * under encoding-type=url, RGW does not, and sent back as it came it
 * would skip or repeat keys.
 */
static int resume_after(struct parse *p, const char *key, size_t klen)
{
	const char *id = p->a.version + strlen(S3_VID);

	if (klen >= sizeof(p->page->next_token) || memchr(key, '\0', klen))
		return refuse(p, "a Key to resume after that is over 1023 bytes or holds a NUL");
	memcpy(p->page->next_token, key, klen);
	p->page->next_token[klen] = '\0';
	snprintf(p->page->next_vid, sizeof(p->page->next_vid), "%s", id);
	return 0;
}

/* the Key (or a CommonPrefixes' Prefix) just read, decoded if the page
 * says so: *@out, *@len bytes */
static int key_text(struct parse *p, bool prefix, const char **out,
		    size_t *len)
{
	ssize_t n = (ssize_t)p->key.len;

	*out = p->key.p;
	if (p->url) {
		n = s3_url_decode(p->key.p, p->key.len, p->decoded);
		if (n < 0)
			return refuse(p, prefix ? "a Prefix that is not properly URL-encoded" :
				      "a Key that is not properly URL-encoded");
		p->decoded[n] = '\0';	/* no longer name's leftovers */
		*out = p->decoded;
	}
	if (!n)		/* S3 keys are never empty */
		return refuse(p, prefix ? "an empty Prefix" : "an empty Key");
	*len = (size_t)n;
	return 0;
}

/* a DeleteMarker ended: not an entry, but a page of them is not empty */
static int end_delmark(struct parse *p)
{
	const char *key;
	size_t klen;
	int rc;

	if (!p->deliver) {
		p->page->keys++;
		p->page->latest += p->latest;
	}
	if (!p->have_key || !p->have_vid)
		return refuse(p, "a DeleteMarker without Key or VersionId");
	rc = key_text(p, false, &key, &klen);
	return rc ? rc : resume_after(p, key, klen);
}

/* a Contents ended: check it, hand it on in the second pass */
static int end_contents(struct parse *p)
{
	const char *key;
	size_t klen;
	int rc;

	if (!p->deliver) {
		p->page->keys++;
		p->page->latest += p->versions && p->latest;
	}
	if (!p->have_key || !p->have_size)
		return refuse(p, "an entry without Key or Size");
	if (p->versions && !p->have_vid)
		return refuse(p, "a Version without a VersionId");
	rc = key_text(p, false, &key, &klen);
	if (!rc && p->versions)
		rc = resume_after(p, key, klen);
	if (rc)
		return rc;
	if (p->versions && !strcmp(p->a.version, S3_VID "null")) {
		/* written while versioning was off: an overwrite replaces
		 * it, so it is pinned by its ETag like a plain listing */
		if (!p->etag[0])
			return refuse(p, "a Version with the ID null and no ETag");
		memcpy(p->a.version, p->etag, sizeof(p->a.version));
	}
	if (!p->deliver || (p->versions && !p->latest))
		return 0;	/* an older version of the key */
	rc = p->fn(p->arg, key, klen, &p->a);
	return rc;
}

/* a CommonPrefixes ended: check it, hand it on in the second pass */
static int end_prefixes(struct parse *p)
{
	const char *pre;
	size_t len;
	int rc;

	if (!p->deliver)
		p->page->prefixes++;
	if (!p->have_prefix)
		return refuse(p, "a CommonPrefixes without a Prefix");
	rc = key_text(p, true, &pre, &len);
	if (rc || !p->deliver || !p->pfn)
		return rc;
	return p->pfn(p->arg, pre, len);
}

/* the element at depth 1 ended */
static int end_top(struct parse *p)
{
	struct text *t = &p->small;

	switch (p->top) {
	case F_CONTENTS:
		return end_contents(p);
	case F_DELMARK:
		return end_delmark(p);
	case F_PREFIXES:
		return end_prefixes(p);
	case F_TRUNCATED:
		p->page->truncated = !strcmp(t->p, "true");
		break;
	case F_TOKEN:
		if (t->over || !t->len || t->len >= sizeof(p->page->next_token))
			return refuse(p, "a NextContinuationToken that is empty or longer than 1023 bytes");
		memcpy(p->page->next_token, t->p, t->len + 1);
		break;
	case F_ENCODING:
		p->page->url_encoded = !strcmp(t->p, "url");
		break;
	default:
		break;
	}
	return 0;
}

static int start_element(struct parse *p, xmlTextReaderPtr r, int depth)
{
	const char *name = (const char *)xmlTextReaderConstLocalName(r);

	if (!name)
		return refuse(p, "out of memory");
	if (depth == 0) {
		if (strcmp(name, p->versions ? "ListVersionsResult" :
			   "ListBucketResult"))
			return refuse(p, p->versions ? "not a ListVersionsResult" :
				      "not a ListBucketResult");
		return 0;
	}
	if (depth == 1) {
		p->top = field_of(name, true, p->versions);
		p->sub = F_NONE;
		text_reset(&p->small);
		if (p->top == F_CONTENTS || p->top == F_DELMARK ||
		    p->top == F_PREFIXES) {
			memset(&p->a, 0, sizeof(p->a));
			p->have_key = p->have_size = p->have_prefix = false;
			p->have_vid = p->latest = false;
			p->etag[0] = '\0';
			text_reset(&p->key);
		}
	} else if (depth == 2 && (p->top == F_CONTENTS ||
				  p->top == F_DELMARK ||
				  p->top == F_PREFIXES)) {
		p->sub = field_of(name, false, p->versions);
		/* a Prefix only counts inside CommonPrefixes, a Key and the
		 * rest only inside Contents */
		if ((p->sub == F_PREFIX) != (p->top == F_PREFIXES))
			p->sub = F_OTHER;
		text_reset(p->sub == F_KEY || p->sub == F_PREFIX ? &p->key :
			   &p->small);
	}
	return 0;
}

static int end_element(struct parse *p, int depth)
{
	int rc = 0;

	if (depth == 1) {
		rc = end_top(p);
		p->top = F_NONE;
	} else if (depth == 2 && (p->top == F_CONTENTS ||
				  p->top == F_DELMARK ||
				  p->top == F_PREFIXES)) {
		rc = end_sub(p);
		p->sub = F_NONE;
	}
	return rc;
}

static void add_text(struct parse *p, xmlTextReaderPtr r, int depth)
{
	const char *v = (const char *)xmlTextReaderConstValue(r);

	if (!v)
		return;
	if (depth == 2 && p->top != F_CONTENTS && p->top != F_DELMARK &&
	    p->top != F_PREFIXES && p->top != F_OTHER)
		text_add(&p->small, v);
	else if (depth == 3 && (p->top == F_CONTENTS ||
				p->top == F_DELMARK ||
				p->top == F_PREFIXES) &&
		 p->sub != F_OTHER && p->sub != F_NONE)
		text_add(p->sub == F_KEY || p->sub == F_PREFIX ? &p->key :
			 &p->small, v);
}

/* one pass over the page; see s3list_parse() */
static int one_pass(const char *xml, size_t len, struct parse *p)
{
	xmlTextReaderPtr r;
	int ret, rc = 0;
	bool root = false;

	r = xmlReaderForMemory(xml, (int)len, "list.xml", NULL,
			       XML_PARSE_NONET | XML_PARSE_NOERROR |
			       XML_PARSE_NOWARNING);
	if (!r)
		return refuse(p, "not XML");
	while (!rc && (ret = xmlTextReaderRead(r)) == 1) {
		int depth = xmlTextReaderDepth(r);

		switch (xmlTextReaderNodeType(r)) {
		case XML_READER_TYPE_ELEMENT:
			root = true;
			rc = start_element(p, r, depth);
			/* <X/> has no END_ELEMENT */
			if (!rc && xmlTextReaderIsEmptyElement(r))
				rc = end_element(p, depth);
			break;
		case XML_READER_TYPE_END_ELEMENT:
			rc = end_element(p, depth);
			break;
		case XML_READER_TYPE_TEXT:
		case XML_READER_TYPE_CDATA:
		case XML_READER_TYPE_SIGNIFICANT_WHITESPACE:
			add_text(p, r, depth);
			break;
		case XML_READER_TYPE_DOCUMENT_TYPE:
		case XML_READER_TYPE_ENTITY_REFERENCE:
		case XML_READER_TYPE_ENTITY:
			/* S3 never sends a DTD; entities are an attack */
			rc = refuse(p, "a DOCTYPE or an entity");
			break;
		default:
			break;
		}
	}
	if (!rc && (ret < 0 || !root))
		rc = refuse(p, "not well-formed XML");
	xmlFreeTextReader(r);
	return rc;
}

int s3list_parse(const char *xml, size_t len, struct s3_page *page,
		 int (*fn)(void *arg, const char *key, size_t klen,
			   const struct ns_attr *a),
		 void *arg)
{
	return s3list_parse_dir(xml, len, page, fn, NULL, arg);
}

static int parse_page(const char *xml, size_t len, struct s3_page *page,
		      struct parse p)
{
	char *bufs;
	int rc;

	memset(page, 0, sizeof(*page));
	if (len > (size_t)INT32_MAX || !len) {
		page->error = len ? "larger than 2 GiB" : "empty";
		return -EBADMSG;
	}
	bufs = malloc(2 * (KEY_TEXT_MAX + 1) + SHORT_TEXT_MAX + 1);
	if (!bufs)
		return -ENOMEM;
	p.key = (struct text){ .p = bufs, .cap = KEY_TEXT_MAX };
	p.decoded = bufs + KEY_TEXT_MAX + 1;
	p.small = (struct text){ .p = bufs + 2 * (KEY_TEXT_MAX + 1),
				 .cap = SHORT_TEXT_MAX };
	/* first the whole page is checked (and EncodingType found, which
	 * may follow the keys), then the entries are handed on */
	rc = one_pass(xml, len, &p);
	if (!rc && page->truncated && !page->next_token[0])
		rc = refuse(&p, p.versions ? "IsTruncated without a version to go on after" :
			    "IsTruncated without a NextContinuationToken");
	if (!rc) {
		p.deliver = true;
		p.url = page->url_encoded;
		rc = one_pass(xml, len, &p);
	}
	free(bufs);
	return rc;
}

int s3list_parse_dir(const char *xml, size_t len, struct s3_page *page,
		     int (*fn)(void *arg, const char *key, size_t klen,
			       const struct ns_attr *a),
		     int (*pfn)(void *arg, const char *prefix, size_t plen),
		     void *arg)
{
	return parse_page(xml, len, page, (struct parse){ .page = page,
			  .fn = fn, .pfn = pfn, .arg = arg });
}

int s3list_parse_versions(const char *xml, size_t len, struct s3_page *page,
			  int (*fn)(void *arg, const char *key, size_t klen,
				    const struct ns_attr *a),
			  void *arg)
{
	return parse_page(xml, len, page, (struct parse){ .page = page,
			  .fn = fn, .arg = arg, .versions = true });
}

/* ---- one listing: the bounds over all its pages ---- */

void s3_listing_init(struct s3_listing *l)
{
	memset(l, 0, sizeof(*l));
	l->max_keys = S3_LIST_MAX_KEYS;
	l->max_pages = S3_LIST_MAX_PAGES;
	l->max_empty = S3_LIST_MAX_EMPTY;
	l->max_seconds = S3_LIST_MAX_SECONDS;
}

void s3_listing_release(struct s3_listing *l)
{
	free(l->tokens);
	free(l->last);
	memset(l, 0, sizeof(*l));
}

static int stop(struct s3_listing *l, int rc, const char *why)
{
	if (!l->error)
		l->error = why;
	return rc;
}

int s3_listing_key(struct s3_listing *l, const char *key, size_t len)
{
	if (++l->keys > l->max_keys)
		return stop(l, -E2BIG, "more keys than a listing may have");
	/* S3 lists in ascending UTF-8 binary order, across pages too */
	if (l->keys > 1) {
		size_t n = MIN(len, l->last_len);
		int cmp = n ? memcmp(key, l->last, n) : 0;

		if (cmp < 0 || (cmp == 0 && len <= l->last_len))
			return stop(l, -EBADMSG, "keys out of order or repeated (S3 lists each key once, in ascending order)");
	}
	if (!l->last || len > l->last_cap) {
		char *p = realloc(l->last, MAX(len, 1));

		if (!p)
			return -ENOMEM;
		l->last = p;
		l->last_cap = MAX(len, 1);
	}
	if (len)
		memcpy(l->last, key, len);
	l->last_len = len;
	return 0;
}

/* add @h to the set of token hashes; -EEXIST if it was there */
static int token_add(struct s3_listing *l, uint64_t h)
{
	size_t i, mask;

	h |= 1;			/* 0 marks a free slot */
	if (2 * (l->ntokens + 1) > l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64, j;
		uint64_t *t = calloc(cap, sizeof(*t));

		if (!t)
			return -ENOMEM;
		for (j = 0; j < l->cap; j++) {
			if (!l->tokens[j])
				continue;
			for (i = l->tokens[j] & (cap - 1); t[i];
			     i = (i + 1) & (cap - 1))
				;
			t[i] = l->tokens[j];
		}
		free(l->tokens);
		l->tokens = t;
		l->cap = cap;
	}
	mask = l->cap - 1;
	for (i = h & mask; l->tokens[i]; i = (i + 1) & mask)
		if (l->tokens[i] == h)
			return -EEXIST;
	l->tokens[i] = h;
	l->ntokens++;
	return 0;
}

int s3_listing_page(struct s3_listing *l, const struct s3_page *page,
		    uint64_t elapsed_s)
{
	int rc;

	l->pages++;
	l->empty = page->keys || page->prefixes ? 0 : l->empty + 1;
	if (elapsed_s > l->max_seconds)
		return stop(l, -ETIMEDOUT, "the listing took longer than its time bound");
	if (!page->truncated)
		return 0;
	if (l->pages >= l->max_pages)
		return stop(l, -ELOOP, "more pages than a listing may have");
	if (l->empty >= l->max_empty)
		return stop(l, -ELOOP, "too many pages in a row without a key");
	/* a versions listing goes on after a key and a version ID: a key
	 * marker may come back with another version marker */
	rc = token_add(l, hash64(page->next_token, strlen(page->next_token),
				 hash64(page->next_vid, strlen(page->next_vid),
					0)));
	if (rc == -EEXIST)
		return stop(l, -ELOOP, "a continuation token came back (the listing would never end)");
	return rc;
}
