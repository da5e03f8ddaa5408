// SPDX-License-Identifier: MIT
/*
 * s3list.c: the ListObjectsV2 page parser (keys, sizes, times, ETags,
 * continuation) and its refusal of malformed or hostile XML.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runner.h"
#include "s3list.h"

struct seen {
	int n;
	char keys[8][256];
	struct ns_attr a[8];
};

static int collect(void *arg, const char *key, size_t len,
		   const struct ns_attr *a)
{
	struct seen *s = arg;

	if (s->n < 8) {
		memcpy(s->keys[s->n], key, len);
		s->keys[s->n][len] = '\0';
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

/* one <Contents> with @size and @etag: does the page parse? */
static int parse_one(const char *size, const char *etag)
{
	char xml[1024];
	struct s3_page pg;
	struct seen s = { 0 };

	snprintf(xml, sizeof(xml),
		 "<ListBucketResult><IsTruncated>false</IsTruncated>"
		 "<Contents><Key>k</Key><ETag>%s</ETag><Size>%s</Size>"
		 "</Contents></ListBucketResult>", etag, size);
	return s3list_parse(xml, strlen(xml), &pg, collect, &s);
}

static void test_hostile_sizes_and_etags(void)
{
	CHECK_INT(parse_one("17592186044416", "\"e\""), ==, 0);	/* 2^44 */
	CHECK_INT(parse_one("17592186044417", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("-5", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one(" -5", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("+5", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("99999999999999999999999", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("12abc", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("", "\"e\""), ==, -EBADMSG);
	CHECK_INT(parse_one("1", "\"e&#13;&#10;X-Evil: 1\""), ==, -EBADMSG);
	CHECK_INT(parse_one("1", "\"e\x01\""), ==, -EBADMSG);
}

int main(void)
{
	runner_name = "test_s3list";
	TEST(test_list_parse);
	TEST(test_list_malformed);
	TEST(test_time);
	TEST(test_hostile_sizes_and_etags);
	return runner_done();
}
