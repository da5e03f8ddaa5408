// SPDX-License-Identifier: MIT
/*
 * s3list.c: the ListObjectsV2 page parser (keys, sizes, times, ETags,
 * continuation, URL-encoded keys) and its refusal of malformed or hostile
 * XML; the bounds of one listing (tokens seen before, key order, keys,
 * pages, empty pages, time).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "compiler.h"
#include "runner.h"
#include "s3list.h"

struct seen {
	int n;
	char keys[8][256];
	size_t lens[8];
	struct ns_attr a[8];
};

static int collect(void *arg, const char *key, size_t len,
		   const struct ns_attr *a)
{
	struct seen *s = arg;

	if (s->n < 8 && len < sizeof(s->keys[0])) {
		memcpy(s->keys[s->n], key, len);
		s->keys[s->n][len] = '\0';
		s->lens[s->n] = len;
		s->a[s->n] = *a;
	}
	s->n++;
	return 0;
}

static const char page1[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
	"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<Name>b</Name><Prefix></Prefix><KeyCount>3</KeyCount>"
	"<MaxKeys>3</MaxKeys><IsTruncated>true</IsTruncated>"
	"<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
	"<Contents><Key>a &amp; b/c&lt;d&gt;.bin</Key>"
	"<LastModified>2024-01-02T03:04:05.000Z</LastModified>"
	"<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag>"
	"<Size>12345</Size><StorageClass>STANDARD</StorageClass></Contents>"
	"<Contents><Key>dir/</Key><LastModified>2024-01-02T03:04:05.000Z</LastModified>"
	"<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size></Contents>"
	"<Contents><Key>\xc3\xbcnicode \xe2\x82\xac+%=.txt</Key>"
	"<ETag>&quot;x-2&quot;</ETag><Size>1</Size></Contents>"
	"</ListBucketResult>";

static void test_list_parse(void)
{
	struct s3_page pg;
	struct seen s = { 0 };

	CHECK_INT(s3list_parse(page1, strlen(page1), &pg, collect, &s), ==, 0);
	CHECK_INT(s.n, ==, 3);
	CHECK(pg.truncated);
	CHECK_INT(pg.keys, ==, 3);
	CHECK_STR(pg.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
	CHECK_STR(s.keys[0], "a & b/c<d>.bin");
	CHECK_INT(s.a[0].size, ==, 12345);
	CHECK_INT(s.a[0].mtime, ==, 1704164645);
	CHECK_STR(s.a[0].version, "\"9b2cf535f27731c974343645a3985328\"");
	CHECK_STR(s.keys[1], "dir/");
	CHECK_STR(s.keys[2], "\xc3\xbcnicode \xe2\x82\xac+%=.txt");
}

static void test_list_malformed(void)
{
	static const char *const bad[] = {
		"",
		"not xml at all",
		"<ListBucketResult><Contents><Key>a</Key>",		/* cut */
		"<Error><Code>AccessDenied</Code></Error>",		/* wrong root */
		"<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
		"<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>",
		"<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
		"<!DOCTYPE x [<!ENTITY e SYSTEM \"file:///etc/passwd\">]>"
		"<ListBucketResult><Contents><Key>&e;</Key><Size>1</Size></Contents></ListBucketResult>",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct s3_page pg;
		struct seen s = { 0 };
		int rc = s3list_parse(bad[i], strlen(bad[i]), &pg, collect, &s);

		if (rc != -EBADMSG)
			fprintf(stderr, "  case %zu: rc %d\n", i, rc);
		CHECK_INT(rc, ==, -EBADMSG);
	}
	{
		struct s3_page pg;
		struct seen s = { 0 };
		const char *empty = "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";

		CHECK_INT(s3list_parse(empty, strlen(empty), &pg, collect, &s), ==, 0);
		CHECK_INT(s.n, ==, 0);
	}
}

static void test_time(void)
{
	int64_t t = -1;

	CHECK_INT(s3_parse_time("1970-01-01T00:00:00.000Z", &t), ==, 0);
	CHECK_INT(t, ==, 0);
	CHECK_INT(s3_parse_time("2024-01-02T03:04:05Z", &t), ==, 0);
	CHECK_INT(t, ==, 1704164645);
	CHECK_INT(s3_parse_time("yesterday", &t), ==, -EINVAL);
}

/* a page of @head then one <Contents> holding @fields: does it parse? */
static int parse_entry(const char *head, const char *fields)
{
	char xml[1024];
	struct s3_page pg;
	struct seen s = { 0 };

	snprintf(xml, sizeof(xml), "<ListBucketResult>%s<Contents>%s</Contents>"
		 "</ListBucketResult>", head, fields);
	return s3list_parse(xml, strlen(xml), &pg, collect, &s);
}

/* one <Contents> with @size and @etag: does the page parse? */
static int parse_one(const char *size, const char *etag)
{
	char f[512];

	snprintf(f, sizeof(f), "<Key>k</Key><ETag>%s</ETag><Size>%s</Size>",
		 etag, size);
	return parse_entry("<IsTruncated>false</IsTruncated>", f);
}

static void test_hostile_sizes_and_etags(void)
{
	CHECK_INT(parse_one("17592186044416", "\"e\""), ==, 0);	/* 2^44 */
	CHECK_INT(parse_one("-5", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one(" -5", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("+5", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("12abc", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("1", "\"e&#13;&#10;X-Evil: 1\""), ==, -EBADMSG);
	CHECK_INT(parse_one("1", "\"e\x01\""), ==, -EBADMSG);
	CHECK_INT(parse_one("1", "\"e&#9;\""), ==, -EBADMSG);
	CHECK_INT(parse_one("1", "\"e&#127;\""), ==, -EBADMSG);
	CHECK_INT(parse_one("1", ""), ==, -EBADMSG);		/* empty */
	/* 47 bytes fit NS_VERSION_MAX with its NUL, 48 do not */
	CHECK_INT(parse_one("1", "\"123456789012345678901234567890123456789012345\""),
		  ==, 0);
	CHECK_INT(parse_one("1", "\"1234567890123456789012345678901234567890123456\""),
		  ==, -EBADMSG);
}

/* a page asking for URL-encoded keys: decoded, whatever bytes they hold */
static void test_url_encoded_keys(void)
{
	static const char xml[] =
		"<ListBucketResult><IsTruncated>false</IsTruncated>"
		"<Contents><Key>ctl%0Achar%01</Key><Size>1</Size><ETag>e</ETag></Contents>"
		"<Contents><Key>sp+ace%2Bplus</Key><Size>2</Size></Contents>"
		"<Contents><Key>nul%00byte</Key><Size>3</Size></Contents>"
		"<Contents><Key>%C3%BC%25</Key><Size>4</Size></Contents>"
		"<EncodingType>url</EncodingType>"	/* after the keys */
		"</ListBucketResult>";
	static const char plain[] =
		"<ListBucketResult><Contents><Key>a%0Ab+c</Key><Size>1</Size>"
		"</Contents></ListBucketResult>";
	struct s3_page pg;
	struct seen s = { 0 };

	CHECK_INT(s3list_parse(xml, strlen(xml), &pg, collect, &s), ==, 0);
	CHECK(pg.url_encoded);
	CHECK_INT(s.n, ==, 4);
	CHECK_STR(s.keys[0], "ctl\nchar\x01");
	CHECK_STR(s.keys[1], "sp ace+plus");
	CHECK_INT(s.lens[2], ==, 8);
	CHECK(!memcmp(s.keys[2], "nul\0byte", 8));
	CHECK_STR(s.keys[3], "\xc3\xbc%");
	/* a server that ignores encoding-type: keys are taken as they are */
	memset(&s, 0, sizeof(s));
	CHECK_INT(s3list_parse(plain, strlen(plain), &pg, collect, &s), ==, 0);
	CHECK(!pg.url_encoded);
	CHECK_STR(s.keys[0], "a%0Ab+c");
}

/* one URL-encoded @key */
static int parse_key(const char *key)
{
	char f[512];

	snprintf(f, sizeof(f), "<Key>%s</Key><Size>1</Size>", key);
	return parse_entry("<EncodingType>url</EncodingType>", f);
}

static void test_bad_escapes_and_odd_shapes(void)
{
	static const char nested[] =
		"<ListBucketResult><Contents><Key>k</Key><Owner><ID>x</ID>"
		"<DisplayName>y</DisplayName></Owner><Size>5</Size></Contents>"
		"<IsTruncated/></ListBucketResult>";
	static const char late_error[] =
		"<ListBucketResult><Contents><Key>k</Key><Size>5</Size></Contents>"
		"<Contents><Key>k2</Key><Size>x</Size></Contents></ListBucketResult>";
	static const char empty_key[] =
		"<ListBucketResult><Contents><Key/><Size>5</Size></Contents>"
		"</ListBucketResult>";
	struct s3_page pg;
	struct seen s = { 0 };

	CHECK_INT(parse_key("ok%20key"), ==, 0);
	CHECK_INT(parse_key("bad%G1"), ==, -EBADMSG);
	CHECK_INT(parse_key("cut%4"), ==, -EBADMSG);
	CHECK_INT(parse_key("cut%"), ==, -EBADMSG);
	CHECK_INT(s3list_parse(nested, strlen(nested), &pg, collect, &s), ==, 0);
	CHECK_INT(s.n, ==, 1);
	CHECK_INT(s.a[0].size, ==, 5);
	CHECK(!pg.truncated);
	/* a page refused late hands nothing on */
	memset(&s, 0, sizeof(s));
	CHECK_INT(s3list_parse(late_error, strlen(late_error), &pg, collect, &s),
		  ==, -EBADMSG);
	CHECK_INT(s.n, ==, 0);
	CHECK(pg.error && strstr(pg.error, "Size"));
	CHECK_INT(s3list_parse(empty_key, strlen(empty_key), &pg, collect, &s),
		  ==, -EBADMSG);
	CHECK(pg.error != NULL);
}

/*
 * An object over 2^44 bytes is one entry with the size NS_SIZE_TOO_BIG
 * (its open fails with EFBIG), whatever its number of digits; the page
 * and the entries around it go on.
 */
static void test_oversized_object_is_listed(void)
{
	static const char *const big[] = {
		"17592186044417",			/* 2^44 + 1 */
		"18446744073709551617",			/* 2^64 + 1 */
		"99999999999999999999999999999999999999999",
	};
	struct s3_page pg;
	char xml[1024];
	size_t i;

	for (i = 0; i < ARRAY_SIZE(big); i++) {
		struct seen s = { 0 };

		snprintf(xml, sizeof(xml),
			 "<ListBucketResult><IsTruncated>false</IsTruncated>"
			 "<Contents><Key>a</Key><Size>1</Size></Contents>"
			 "<Contents><Key>b</Key><Size>%s</Size></Contents>"
			 "<Contents><Key>c</Key><Size>17592186044416</Size></Contents>"
			 "</ListBucketResult>", big[i]);
		CHECK_INT(s3list_parse(xml, strlen(xml), &pg, collect, &s), ==, 0);
		CHECK(!pg.error);
		CHECK_INT(s.n, ==, 3);
		CHECK_STR(s.keys[1], "b");
		CHECK_INT(s.a[0].size, ==, 1);
		CHECK_INT(s.a[1].size, ==, NS_SIZE_TOO_BIG);
		CHECK_INT(s.a[2].size, ==, NS_SIZE_MAX);
	}
}

static void test_helpers(void)
{
	uint64_t v = 7;
	char out[16];

	CHECK_INT(s3_parse_size("0", 1, &v), ==, 0);
	CHECK_INT(v, ==, 0);
	CHECK_INT(s3_parse_size("17592186044416", 14, &v), ==, 0);
	CHECK_INT(s3_parse_size("17592186044417", 14, &v), ==, -EFBIG);
	CHECK_INT(v, ==, NS_SIZE_TOO_BIG);
	v = 7;
	CHECK_INT(s3_parse_size("18446744073709551617", 20, &v), ==, -EFBIG);
	CHECK_INT(v, ==, NS_SIZE_TOO_BIG);
	CHECK_INT(s3_parse_size("18446744073709551617x", 21, &v), ==, -EINVAL);
	CHECK_INT(s3_parse_size("-1", 2, &v), ==, -EINVAL);
	CHECK_INT(s3_parse_size("", 0, &v), ==, -EINVAL);
	CHECK(s3_version_ok("\"abc\"", 5));
	CHECK(!s3_version_ok("\"a\rb\"", 6));
	CHECK(!s3_version_ok("", 0));
	CHECK_INT(s3_url_decode("a%2fb+c", 7, out), ==, 5);
	CHECK(!memcmp(out, "a/b c", 5));
	CHECK_INT(s3_url_decode("%zz", 3, out), ==, -EINVAL);
}

/* ---- the bounds of one listing ---- */

static struct s3_page page_of(bool truncated, const char *token, unsigned keys)
{
	struct s3_page p = { .truncated = truncated, .keys = keys };

	snprintf(p.next_token, sizeof(p.next_token), "%s", token);
	return p;
}

static void test_tokens_seen_before(void)
{
	struct s3_listing l;
	struct s3_page a = page_of(true, "A", 1), b = page_of(true, "B", 1);
	char tok[32];
	int i;

	s3_listing_init(&l);
	CHECK_INT(s3_listing_page(&l, &a, 0), ==, 0);
	CHECK_INT(s3_listing_page(&l, &b, 0), ==, 0);
	CHECK_INT(s3_listing_page(&l, &a, 0), ==, -ELOOP);	/* alternating */
	CHECK(l.error && strstr(l.error, "token"));
	s3_listing_release(&l);

	/* thousands of fresh tokens are fine while keys come */
	s3_listing_init(&l);
	for (i = 0; i < 5000; i++) {
		snprintf(tok, sizeof(tok), "t%d", i);
		a = page_of(true, tok, 1000);
		CHECK_INT(s3_listing_page(&l, &a, 0), ==, 0);
	}
	a = page_of(true, "t17", 1000);
	CHECK_INT(s3_listing_page(&l, &a, 0), ==, -ELOOP);
	s3_listing_release(&l);
}

/* truncated pages without a key, each with @prefixes common prefixes,
 * until the bound or a few past it; *@n: pages taken */
static int keyless_pages(unsigned prefixes, int *n)
{
	struct s3_listing l;
	struct s3_page p;
	char tok[32];
	int i, rc = 0;

	s3_listing_init(&l);
	for (i = 0; i < S3_LIST_MAX_EMPTY + 5 && !rc; i++) {
		snprintf(tok, sizeof(tok), "fresh%d", i);
		p = page_of(true, tok, 0);
		p.prefixes = prefixes;
		rc = s3_listing_page(&l, &p, 0);
	}
	s3_listing_release(&l);
	*n = i;
	return rc;
}

static void test_empty_pages_pages_and_time(void)
{
	struct s3_listing l;
	struct s3_page p;
	char tok[32];
	int i, rc;

	CHECK_INT(keyless_pages(0, &i), ==, -ELOOP);
	CHECK_INT(i, ==, S3_LIST_MAX_EMPTY);

	s3_listing_init(&l);
	l.max_pages = 10;
	for (i = 0, rc = 0; i < 20 && !rc; i++) {
		snprintf(tok, sizeof(tok), "p%d", i);
		p = page_of(true, tok, 1);
		rc = s3_listing_page(&l, &p, 0);
	}
	CHECK_INT(rc, ==, -ELOOP);
	CHECK_INT(i, ==, 10);
	s3_listing_release(&l);

	s3_listing_init(&l);
	p = page_of(true, "x", 1);
	CHECK_INT(s3_listing_page(&l, &p, S3_LIST_MAX_SECONDS + 1), ==, -ETIMEDOUT);
	s3_listing_release(&l);
}

struct dirseen {
	struct seen keys;
	int n;
	char pre[4][64];
};

static int collect_prefix(void *arg, const char *pre, size_t len)
{
	struct dirseen *d = arg;

	if (d->n < 4 && len < sizeof(d->pre[0])) {
		memcpy(d->pre[d->n], pre, len);
		d->pre[d->n][len] = '\0';
	}
	d->n++;
	return 0;
}

static int collect_dirkey(void *arg, const char *key, size_t len,
			  const struct ns_attr *a)
{
	return collect(&((struct dirseen *)arg)->keys, key, len, a);
}

/* a delimiter listing: keys beside CommonPrefixes, decoded alike; a
 * Prefix outside CommonPrefixes (the request's echo) is not one */
static void test_common_prefixes(void)
{
	static const char page[] =
		"<ListBucketResult><Prefix>ds%2F</Prefix><Delimiter>%2F</Delimiter>"
		"<EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
		"<Contents><Key>ds%2Ftop.bin</Key><Size>3</Size></Contents>"
		"<CommonPrefixes><Prefix>ds%2Fa%20b%2F</Prefix></CommonPrefixes>"
		"<CommonPrefixes><Prefix>ds%2Fc%2F</Prefix></CommonPrefixes>"
		"</ListBucketResult>";
	static const char *const bad[] = {
		"<ListBucketResult><CommonPrefixes></CommonPrefixes></ListBucketResult>",
		"<ListBucketResult><CommonPrefixes><Prefix></Prefix></CommonPrefixes></ListBucketResult>",
		"<ListBucketResult><EncodingType>url</EncodingType><CommonPrefixes><Prefix>a%zz</Prefix></CommonPrefixes></ListBucketResult>",
		/* a Key is no Prefix */
		"<ListBucketResult><CommonPrefixes><Key>a/</Key></CommonPrefixes></ListBucketResult>",
	};
	struct dirseen d = { 0 };
	struct s3_page pg;
	size_t i;

	CHECK_INT(s3list_parse_dir(page, strlen(page), &pg, collect_dirkey,
				   collect_prefix, &d), ==, 0);
	CHECK_INT(d.keys.n, ==, 1);
	CHECK_STR(d.keys.keys[0], "ds/top.bin");
	CHECK_INT(d.n, ==, 2);
	CHECK_STR(d.pre[0], "ds/a b/");
	CHECK_STR(d.pre[1], "ds/c/");
	CHECK_INT(pg.keys, ==, 1);
	CHECK_INT(pg.prefixes, ==, 2);
	/* the plain parser counts them and passes the keys only */
	memset(&d, 0, sizeof(d));
	CHECK_INT(s3list_parse(page, strlen(page), &pg, collect, &d.keys), ==, 0);
	CHECK_INT(d.keys.n, ==, 1);
	CHECK_INT(pg.prefixes, ==, 2);
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		memset(&d, 0, sizeof(d));
		CHECK_INT(s3list_parse_dir(bad[i], strlen(bad[i]), &pg,
					   collect_dirkey, collect_prefix, &d),
			  ==, -EBADMSG);
		CHECK(pg.error != NULL);
		CHECK_INT(d.n, ==, 0);
	}
}

/* pages of common prefixes only are not empty pages */
static void test_prefix_pages_are_not_empty(void)
{
	int i;

	CHECK_INT(keyless_pages(1, &i), ==, 0);
	CHECK_INT(i, ==, S3_LIST_MAX_EMPTY + 5);
}

static void test_key_order_and_count(void)
{
	struct s3_listing l;

	s3_listing_init(&l);
	CHECK_INT(s3_listing_key(&l, "a", 1), ==, 0);
	CHECK_INT(s3_listing_key(&l, "a/b", 3), ==, 0);
	CHECK_INT(s3_listing_key(&l, "b\0", 2), ==, 0);
	CHECK_INT(s3_listing_key(&l, "b\0\xff", 3), ==, 0);
	CHECK_INT(s3_listing_key(&l, "b\0\xff", 3), ==, -EBADMSG);	/* again */
	CHECK(l.error && strstr(l.error, "order"));
	s3_listing_release(&l);

	s3_listing_init(&l);
	CHECK_INT(s3_listing_key(&l, "b", 1), ==, 0);
	CHECK_INT(s3_listing_key(&l, "a", 1), ==, -EBADMSG);	/* backwards */
	s3_listing_release(&l);

	s3_listing_init(&l);
	l.max_keys = 3;
	CHECK_INT(s3_listing_key(&l, "1", 1), ==, 0);
	CHECK_INT(s3_listing_key(&l, "2", 1), ==, 0);
	CHECK_INT(s3_listing_key(&l, "3", 1), ==, 0);
	CHECK_INT(s3_listing_key(&l, "4", 1), ==, -E2BIG);
	s3_listing_release(&l);
}

/* ---- ListObjectVersions ---- */

static const char vpage[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
	"<ListVersionsResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	"<Name>b</Name><Prefix>p/</Prefix><KeyMarker></KeyMarker>"
	"<VersionIdMarker></VersionIdMarker><MaxKeys>1000</MaxKeys>"
	"<IsTruncated>true</IsTruncated><EncodingType>url</EncodingType>"
	"<NextKeyMarker>p/c</NextKeyMarker>"
	"<NextVersionIdMarker>3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY</NextVersionIdMarker>"
	"<Version><Key>p/a%20b</Key><VersionId>v2.a</VersionId><IsLatest>true</IsLatest>"
	"<LastModified>2024-01-02T03:04:05.000Z</LastModified>"
	"<ETag>&quot;e2&quot;</ETag><Size>7</Size></Version>"
	"<Version><Key>p/a%20b</Key><VersionId>v1.a</VersionId><IsLatest>false</IsLatest>"
	"<ETag>&quot;e1&quot;</ETag><Size>5</Size></Version>"
	"<DeleteMarker><Key>p/b</Key><VersionId>d1</VersionId><IsLatest>true</IsLatest>"
	"</DeleteMarker>"
	"<Version><Key>p/b</Key><VersionId>v1.b</VersionId><IsLatest>false</IsLatest>"
	"<Size>1</Size></Version>"
	"<Version><Key>p/c</Key><VersionId>null</VersionId><IsLatest>true</IsLatest>"
	"<ETag>&quot;e0&quot;</ETag><Size>0</Size></Version>"
	"</ListVersionsResult>";

/* the current version of each key, as "vid:ID" (its ETag for the ID
 * "null", which an overwrite replaces); older versions and keys whose
 * current version is a delete marker are left out */
static void test_versions_parse(void)
{
	struct s3_page pg;
	struct seen s = { 0 };

	CHECK_INT(s3list_parse_versions(vpage, strlen(vpage), &pg, collect, &s), ==, 0);
	CHECK_INT(s.n, ==, 2);
	CHECK_STR(s.keys[0], "p/a b");
	CHECK_STR(s.a[0].version, "vid:v2.a");
	CHECK_INT(s.a[0].size, ==, 7);
	CHECK_INT(s.a[0].mtime, ==, 1704164645);
	CHECK_STR(s.keys[1], "p/c");
	CHECK_STR(s.a[1].version, "\"e0\"");	/* "null": pinned by its ETag */
	CHECK(pg.truncated);
	CHECK_INT(pg.keys, ==, 5);		/* the delete marker too */
	CHECK_INT(pg.latest, ==, 3);		/* a b, b's marker, c */
	/* on after the last entry, not NextKeyMarker */
	CHECK_STR(pg.next_token, "p/c");
	CHECK_STR(pg.next_vid, "null");
	/* each parser takes its own root only */
	memset(&s, 0, sizeof(s));
	CHECK_INT(s3list_parse(vpage, strlen(vpage), &pg, collect, &s), ==, -EBADMSG);
	CHECK(pg.error && strstr(pg.error, "ListBucketResult"));
	CHECK_INT(s3list_parse_versions(page1, strlen(page1), &pg, collect, &s), ==, -EBADMSG);
	CHECK(pg.error && strstr(pg.error, "ListVersionsResult"));
	CHECK_INT(s.n, ==, 0);
}

static void test_versions_malformed(void)
{
	static const char *const bad[] = {
		/* no VersionId */
		"<ListVersionsResult><Version><Key>k</Key><IsLatest>true</IsLatest>"
		"<Size>1</Size></Version></ListVersionsResult>",
		/* an empty one */
		"<ListVersionsResult><Version><Key>k</Key><VersionId></VersionId>"
		"<IsLatest>true</IsLatest><Size>1</Size></Version></ListVersionsResult>",
		/* 44 bytes: "vid:" and NUL do not fit 48 */
		"<ListVersionsResult><Version><Key>k</Key>"
		"<VersionId>01234567890123456789012345678901234567890123</VersionId>"
		"<IsLatest>true</IsLatest><Size>1</Size></Version></ListVersionsResult>",
		/* a control character */
		"<ListVersionsResult><Version><Key>k</Key><VersionId>a&#10;b</VersionId>"
		"<IsLatest>true</IsLatest><Size>1</Size></Version></ListVersionsResult>",
		/* truncated without an entry to go on after */
		"<ListVersionsResult><IsTruncated>true</IsTruncated>"
		"<NextVersionIdMarker>x</NextVersionIdMarker></ListVersionsResult>",
		/* "null" (written while versioning was off) without an ETag */
		"<ListVersionsResult><Version><Key>k</Key><VersionId>null</VersionId>"
		"<IsLatest>true</IsLatest><Size>1</Size></Version></ListVersionsResult>",
		/* Contents is not an entry here: it has no VersionId either */
		"<ListVersionsResult><Version><Key>k</Key><Size>1</Size></Version>"
		"</ListVersionsResult>",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		struct s3_page pg;
		struct seen s = { 0 };

		CHECK_INT(s3list_parse_versions(bad[i], strlen(bad[i]), &pg, collect, &s),
			  ==, -EBADMSG);
		CHECK(pg.error != NULL);
		CHECK_INT(s.n, ==, 0);
	}
	{	/* 43 bytes fit */
		static const char ok[] =
			"<ListVersionsResult><Version><Key>k</Key>"
			"<VersionId>0123456789012345678901234567890123456789012</VersionId>"
			"<IsLatest>true</IsLatest><Size>1</Size></Version></ListVersionsResult>";
		struct s3_page pg;
		struct seen s = { 0 };

		CHECK_INT(s3list_parse_versions(ok, strlen(ok), &pg, collect, &s), ==, 0);
		CHECK_INT(s.n, ==, 1);
		CHECK_INT(strlen(s.a[0].version), ==, 47);
	}
}

/* the next page starts after the last entry's key, decoded (AWS encodes
 * NextKeyMarker under encoding-type=url, RGW does not), a delete marker
 * included; a page of delete markers only is not empty */
static void test_versions_resume(void)
{
	static const char page[] =
		"<ListVersionsResult><IsTruncated>true</IsTruncated>"
		"<EncodingType>url</EncodingType>"
		"<NextKeyMarker>p%2Fa%2520b</NextKeyMarker>"
		"<NextVersionIdMarker>zz</NextVersionIdMarker>"
		"<Version><Key>p/%C3%A9</Key><VersionId>v1</VersionId>"
		"<IsLatest>true</IsLatest><Size>1</Size></Version>"
		"<DeleteMarker><Key>p/a%20b</Key><VersionId>d9</VersionId>"
		"<IsLatest>true</IsLatest></DeleteMarker>"
		"</ListVersionsResult>";
	static const char markers[] =
		"<ListVersionsResult><IsTruncated>true</IsTruncated>"
		"<DeleteMarker><Key>k1</Key><VersionId>d1</VersionId></DeleteMarker>"
		"<DeleteMarker><Key>k2</Key><VersionId>d2</VersionId></DeleteMarker>"
		"</ListVersionsResult>";
	static const char nothing[] =
		"<ListVersionsResult><IsTruncated>true</IsTruncated>"
		"<NextKeyMarker>k</NextKeyMarker></ListVersionsResult>";
	struct s3_page pg;
	struct seen s = { 0 };

	CHECK_INT(s3list_parse_versions(page, strlen(page), &pg, collect, &s), ==, 0);
	CHECK_INT(s.n, ==, 1);
	CHECK_STR(s.keys[0], "p/\xc3\xa9");
	CHECK_STR(pg.next_token, "p/a b");
	CHECK_STR(pg.next_vid, "d9");
	memset(&s, 0, sizeof(s));
	CHECK_INT(s3list_parse_versions(markers, strlen(markers), &pg, collect, &s), ==, 0);
	CHECK_INT(s.n, ==, 0);
	CHECK_INT(pg.keys, ==, 2);
	CHECK_INT(pg.latest, ==, 0);		/* none says IsLatest */
	CHECK_STR(pg.next_token, "k2");
	CHECK_STR(pg.next_vid, "d2");
	CHECK_INT(s3list_parse_versions(nothing, strlen(nothing), &pg, collect, &s),
		  ==, -EBADMSG);
	CHECK(pg.error && strstr(pg.error, "IsTruncated"));
}

/* an ETag that would read as a pinned version ID is refused */
static void test_etag_like_a_version_id(void)
{
	static const char page[] =
		"<ListBucketResult><Contents><Key>k</Key><ETag>vid:x</ETag>"
		"<Size>1</Size></Contents></ListBucketResult>";
	struct s3_page pg;
	struct seen s = { 0 };

	CHECK_INT(s3list_parse(page, strlen(page), &pg, collect, &s), ==, -EBADMSG);
	CHECK_INT(s.n, ==, 0);
	CHECK(!s3_etag_ok("vid:x", 5) && s3_etag_ok("\"vid\"", 5));
	CHECK(s3_version_ok("vid:x", 5));
}

/* one key marker with another version marker is a new page */
static void test_versions_markers(void)
{
	struct s3_listing l;
	struct s3_page a = { .truncated = true, .keys = 1 }, b;

	strcpy(a.next_token, "k");
	strcpy(a.next_vid, "v1");
	b = a;
	strcpy(b.next_vid, "v2");
	s3_listing_init(&l);
	CHECK_INT(s3_listing_page(&l, &a, 0), ==, 0);
	CHECK_INT(s3_listing_page(&l, &b, 0), ==, 0);
	CHECK_INT(s3_listing_page(&l, &a, 0), ==, -ELOOP);
	s3_listing_release(&l);
}

int main(void)
{
	runner_name = "test_s3list";
	TEST(test_list_parse);
	TEST(test_list_malformed);
	TEST(test_time);
	TEST(test_hostile_sizes_and_etags);
	TEST(test_oversized_object_is_listed);
	TEST(test_url_encoded_keys);
	TEST(test_bad_escapes_and_odd_shapes);
	TEST(test_helpers);
	TEST(test_tokens_seen_before);
	TEST(test_empty_pages_pages_and_time);
	TEST(test_key_order_and_count);
	TEST(test_common_prefixes);
	TEST(test_prefix_pages_are_not_empty);
	TEST(test_versions_parse);
	TEST(test_versions_malformed);
	TEST(test_versions_markers);
	TEST(test_versions_resume);
	TEST(test_etag_like_a_version_id);
	return runner_done();
}
