/* SPDX-License-Identifier: MIT */
/*
 * s3sign.h - the parts of an AWS SigV4 request that curl 7.88 leaves to
 * us: the canonical (percent-encoded) object path and the canonical,
 * sorted query string.  curl signs the request (CURLOPT_AWS_SIGV4) and
 * uses the path and query exactly as given, so they must already be in
 * canonical form.  Also the endpoint those URLs start with.  Pure
 * functions, no allocation.
 */
#ifndef FUSEFS_S3SIGN_H
#define FUSEFS_S3SIGN_H

#include <stdbool.h>
#include <stddef.h>

/*
 * s3_uri_encode() - percent-encode @len bytes of @in the SigV4 way: every
 * byte except A-Z a-z 0-9 - . _ ~ (and '/' if @keep_slash) becomes %XX
 * with upper-case hex.  Writes at most @cap bytes including the NUL.
 * Return: the encoded length (excluding NUL); >= @cap means truncated.
 */
size_t s3_uri_encode(const char *in, size_t len, bool keep_slash, char *out,
		     size_t cap);

struct s3_param {
	const char *key;
	const char *val;	/* "" for a valueless parameter */
};

/*
 * s3_query_canon() - "k1=v1&k2=v2" with keys and values encoded and
 * sorted by encoded key (then value), every key followed by '='.
 * Return: length, or -ENOSPC if @cap is too small, -EINVAL if @n > 16.
 */
int s3_query_canon(const struct s3_param *p, size_t n, char *out, size_t cap);

/*
 * s3_parse_endpoint() - split the endpoint "http(s)://HOST[:PORT][/]"
 * into @scheme ("http" or "https"; @scap bytes, at least 6) and @host
 * ("HOST[:PORT]", @hcap bytes), which every request URL and message is
 * made of.  Return: 0; -EPERM for an endpoint with an '@' anywhere
 * (credentials as USER:KEY@, which would reach every message and log
 * line naming the host; no endpoint has one otherwise): the caller must
 * not print @ep then; -EINVAL for anything else that is not such a URL
 * (another scheme, a path, a query, an empty host or one of @hcap bytes
 * or more).
 */
int s3_parse_endpoint(const char *ep, char *scheme, size_t scap, char *host,
		      size_t hcap);

#endif
