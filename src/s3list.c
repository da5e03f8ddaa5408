// SPDX-License-Identifier: MIT
/* s3list.c - see s3list.h */
#include <errno.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3list.h"

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

static bool is(const xmlNode *n, const char *name)
{
	return n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, name);
}

/* text of element @n (owned by libxml2's caller: free with xmlFree) */
static char *text(const xmlNode *n)
{
	return (char *)xmlNodeGetContent(n);
}

/*
 * A size: decimal digits only (no sign, no blanks), at most NS_SIZE_MAX.
 * Return: 0, or -EBADMSG.
 */
static int parse_size(const char *t, uint64_t *out)
{
	uint64_t v = 0;

	if (!*t)
		return -EBADMSG;
	for (; *t; t++) {
		if (*t < '0' || *t > '9')
			return -EBADMSG;
		v = v * 10 + (uint64_t)(*t - '0');
		if (v > NS_SIZE_MAX)
			return -EBADMSG;
	}
	*out = v;
	return 0;
}

/* no control characters (CR/LF would split a header) */
static bool printable(const char *t)
{
	for (; *t; t++)
		if ((unsigned char)*t < 0x20 || *t == 0x7f)
			return false;
	return true;
}

static int one_entry(const xmlNode *c, int (*fn)(void *, const char *, size_t,
		     const struct ns_attr *), void *arg)
{
	struct ns_attr a = { 0 };
	char *key = NULL;
	bool have_size = false, have_etag_ctl = false;
	const xmlNode *f;
	int rc;

	for (f = c->children; f; f = f->next) {
		char *t;

		if (f->type != XML_ELEMENT_NODE)
			continue;
		t = text(f);
		if (!t)
			continue;
		if (is(f, "Key")) {
			xmlFree(key);
			key = t;
			continue;
		}
		if (is(f, "Size")) {
			have_size = parse_size(t, &a.size) == 0;
		} else if (is(f, "LastModified")) {
			int64_t when;

			a.mtime = s3_parse_time(t, &when) || when < 0 ? 0 : when;
		} else if (is(f, "ETag")) {
			if (!printable(t))
				have_etag_ctl = true;
			snprintf(a.version, sizeof(a.version), "%s", t);
		}
		xmlFree(t);
	}
	/* S3 keys are never empty; an ETag goes into If-Match headers */
	if (!key || !*key || !have_size || have_etag_ctl) {
		xmlFree(key);
		return -EBADMSG;
	}
	rc = fn(arg, key, strlen(key), &a);
	xmlFree(key);
	return rc;
}

int s3list_parse(const char *xml, size_t len, struct s3_page *page,
		 int (*fn)(void *arg, const char *key, size_t klen,
			   const struct ns_attr *a),
		 void *arg)
{
	xmlDoc *doc;
	xmlNode *root, *n;
	int rc = 0;

	memset(page, 0, sizeof(*page));
	if (len > (size_t)INT32_MAX)
		return -EBADMSG;
	doc = xmlReadMemory(xml, (int)len, "list.xml", NULL,
			    XML_PARSE_NONET | XML_PARSE_NOERROR |
			    XML_PARSE_NOWARNING);
	if (!doc)
		return -EBADMSG;
	root = xmlDocGetRootElement(doc);
	if (!root || !is(root, "ListBucketResult")) {
		rc = -EBADMSG;
		goto out;
	}
	for (n = root->children; n && !rc; n = n->next) {
		char *t;

		if (is(n, "Contents")) {
			page->keys++;
			rc = one_entry(n, fn, arg);
		} else if (is(n, "IsTruncated")) {
			t = text(n);
			page->truncated = t && !strcmp(t, "true");
			xmlFree(t);
		} else if (is(n, "NextContinuationToken")) {
			t = text(n);
			if (t && strlen(t) < sizeof(page->next_token))
				strcpy(page->next_token, t);
			else
				rc = -EBADMSG;
			xmlFree(t);
		}
	}
	if (!rc && page->truncated && !page->next_token[0])
		rc = -EBADMSG;		/* would loop forever */
out:
	xmlFreeDoc(doc);
	return rc;
}
