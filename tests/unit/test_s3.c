// SPDX-License-Identifier: MIT
/*
 * S3 pieces: SigV4 canonical path and query (checked against the example
 * signatures in the AWS S3 documentation, "Signature Calculations for the
 * Authorization Header", with its example key pair), and the
 * ListObjectsV2 parser.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "s3list.h"
#include "s3sign.h"
#include "sigv4_ref.h"

#define SECRET	"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define DATE	"20130524T000000Z"

static const char *enc(const char *s, bool slash)
{
	static char out[1024];

	s3_uri_encode(s, strlen(s), slash, out, sizeof(out));
	return out;
}

static void test_uri_encode(void)
{
	char small[8];

	CHECK_STR(enc("a b+c%d=e&f", false), "a%20b%2Bc%25d%3De%26f");
	CHECK_STR(enc("dir/sub/file.tar", true), "dir/sub/file.tar");
	CHECK_STR(enc("dir/sub", false), "dir%2Fsub");
	CHECK_STR(enc("~-._AZaz09", false), "~-._AZaz09");
	CHECK_STR(enc("\xe2\x82\xac", false), "%E2%82%AC");	/* € */
	CHECK_STR(enc("*", false), "%2A");
	/* truncation is reported, never overflows */
	CHECK_INT(s3_uri_encode("abcdefghij", 10, false, small, sizeof(small)),
		  ==, 10);
	CHECK_INT(strlen(small), ==, 7);
}

static void test_query_canon(void)
{
	struct s3_param p[] = {
		{ "prefix", "a/b c" }, { "list-type", "2" },
		{ "continuation-token", "1/x+y=" }, { "max-keys", "1000" },
	};
	char out[256];

	CHECK_INT(s3_query_canon(p, 4, out, sizeof(out)), >, 0);
	CHECK_STR(out, "continuation-token=1%2Fx%2By%3D&list-type=2&"
		  "max-keys=1000&prefix=a%2Fb%20c");
	CHECK_INT(s3_query_canon(p, 4, out, 10), ==, -ENOSPC);
	{
		struct s3_param v[] = { { "acl", "" } };

		s3_query_canon(v, 1, out, sizeof(out));
		CHECK_STR(out, "acl=");		/* valueless keeps its '=' */
	}
}

/* AWS example: GET /test.txt with Range: bytes=0-9 */
static void test_aws_get_object_vector(void)
{
	char creq[2048], sig[65];

	snprintf(creq, sizeof(creq),
		 "GET\n/%s\n\nhost:examplebucket.s3.amazonaws.com\n"
		 "range:bytes=0-9\nx-amz-content-sha256:" EMPTY "\n"
		 "x-amz-date:" DATE "\n\n"
		 "host;range;x-amz-content-sha256;x-amz-date\n" EMPTY,
		 enc("test.txt", true));
	sigv4_ref_signature(SECRET, DATE, "us-east-1", "s3", creq, sig);
	CHECK_STR(sig, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

/* AWS example: GET /?max-keys=2&prefix=J (ListObjects) */
static void test_aws_list_vector(void)
{
	struct s3_param p[] = { { "prefix", "J" }, { "max-keys", "2" } };
	char q[128], creq[2048], sig[65];

	s3_query_canon(p, 2, q, sizeof(q));
	CHECK_STR(q, "max-keys=2&prefix=J");
	snprintf(creq, sizeof(creq),
		 "GET\n/\n%s\nhost:examplebucket.s3.amazonaws.com\n"
		 "x-amz-content-sha256:" EMPTY "\nx-amz-date:" DATE "\n\n"
		 "host;x-amz-content-sha256;x-amz-date\n" EMPTY, q);
	sigv4_ref_signature(SECRET, DATE, "us-east-1", "s3", creq, sig);
	CHECK_STR(sig, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

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
	CHECK_INT(s3_parse_time("1970-01-01T00:00:00.000Z"), ==, 0);
	CHECK_INT(s3_parse_time("2024-01-02T03:04:05Z"), ==, 1704164645);
	CHECK_INT(s3_parse_time("yesterday"), ==, -1);
}

int main(void)
{
	runner_name = "test_s3";
	TEST(test_uri_encode);
	TEST(test_query_canon);
	TEST(test_aws_get_object_vector);
	TEST(test_aws_list_vector);
	TEST(test_list_parse);
	TEST(test_list_malformed);
	TEST(test_time);
	return runner_done();
}
