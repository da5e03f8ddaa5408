// SPDX-License-Identifier: MIT
/*
 * s3sign.c: SigV4 canonical path and query, checked against the example
 * signatures in the AWS S3 documentation ("Signature Calculations for the
 * Authorization Header", with its example key pair).  The ListObjectsV2
 * parser is in test_s3list.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
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
	/* fuzz_s3sign: a %XX that did not fit left unwritten bytes in the
	 * string; a truncated result is a prefix of the full one */
	memset(small, 'X', sizeof(small));
	CHECK_INT(s3_uri_encode("abcdef/", 7, false, small, sizeof(small)),
		  ==, 9);
	CHECK_STR(small, "abcdef");
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
		/* fuzz_s3sign: an exact fit was refused (-ENOSPC) */
		CHECK_INT(s3_query_canon(v, 1, out, 5), ==, 4);
		CHECK_STR(out, "acl=");
		CHECK_INT(s3_query_canon(v, 1, out, 4), ==, -ENOSPC);
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

/* @ep parsed: its return, and scheme and host ("-" when refused) */
static int endpoint(const char *ep, char *out, size_t cap)
{
	char scheme[8] = "-", host[32] = "-";
	int rc = s3_parse_endpoint(ep, scheme, sizeof(scheme), host,
				   sizeof(host));

	snprintf(out, cap, "%s %s", rc ? "-" : scheme, rc ? "-" : host);
	return rc;
}

static void test_parse_endpoint(void)
{
	static const char *const bad[] = {
		"ftp://host", "host:7480", "http://", "http:///",
		"http://host/path", "http://host?x=1", "http://host//",
	};
	static const char *const creds[] = {
		"https://user@rgw.example/", "https://@rgw.example",
		"ftp://key:secret@host", "key:secret@host:7480",
		"http://host/key:secret@", "http://host?k=key:secret@x",
	};
	char got[64];
	size_t i;

	CHECK_INT(endpoint("http://127.0.0.1:7480", got, sizeof(got)), ==, 0);
	CHECK_STR(got, "http 127.0.0.1:7480");
	CHECK_INT(endpoint("https://rgw.example/", got, sizeof(got)), ==, 0);
	CHECK_STR(got, "https rgw.example");
	CHECK_INT(endpoint("https://[::1]:443", got, sizeof(got)), ==, 0);
	CHECK_STR(got, "https [::1]:443");
	/* not http(s)://HOST[:PORT][/] */
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT(endpoint(bad[i], got, sizeof(got)), ==, -EINVAL);
	/* a host that does not fit (32 bytes here) */
	CHECK_INT(endpoint("http://host-name-of-exactly-32-bytes.xy", got, sizeof(got)),
		  ==, -EINVAL);
	CHECK_INT(endpoint("http://host-name-of-exactly-31-bytes.x", got, sizeof(got)),
		  ==, 0);
	/* credentials (USER:KEY@) are refused as such, whatever else is
	 * wrong, so that no message echoes them */
	CHECK_INT(endpoint("http://AKIAEXAMPLE:TOPSECRET@127.0.0.1:1", got,
			   sizeof(got)), ==, -EPERM);
	CHECK_STR(got, "- -");
	for (i = 0; i < sizeof(creds) / sizeof(creds[0]); i++)
		CHECK_INT(endpoint(creds[i], got, sizeof(got)), ==, -EPERM);
	/* too long for the host buffer and with credentials: still -EPERM */
	CHECK_INT(endpoint("http://a-very-long-user-name:a-very-long-secret@h", got,
			   sizeof(got)), ==, -EPERM);
}

int main(void)
{
	runner_name = "test_s3sign";
	TEST(test_uri_encode);
	TEST(test_query_canon);
	TEST(test_aws_get_object_vector);
	TEST(test_aws_list_vector);
	TEST(test_parse_endpoint);
	return runner_done();
}
