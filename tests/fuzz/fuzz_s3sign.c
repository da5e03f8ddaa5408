// SPDX-License-Identifier: MIT
/*
 * fuzz_s3sign.c - SigV4 canonical path and query (s3sign.c).
 *
 * Input: "OBJECT KEY\nk1=v1&k2&k3=v3..." - the first line is encoded as
 * a path (both with and without '/' kept), the rest is split on '&' into
 * parameters (on the first '=' into key and value; no '=': empty value;
 * keys and values end at a NUL byte, as the C strings they are).
 *
 * Invariants (include/s3sign.h):
 *  - s3_uri_encode() matches an independent encoder byte for byte and
 *    returns its length whatever @cap is;
 *  - with a short @cap (the ends and a few input-dependent sizes) it
 *    writes at most @cap bytes, NUL-terminated, and what it wrote is a
 *    prefix of the full encoding;
 *  - s3_query_canon() rejects more than 16 parameters with -EINVAL;
 *    otherwise the result is "k=v" pairs joined by '&', one per
 *    parameter, each key followed by '=', sorted by encoded key and then
 *    value, every pair the encoding of one input parameter;
 *  - it succeeds exactly when the result and its NUL fit in @cap
 *    (and no key encodes to 1024 bytes or more, no value to 2048),
 *    otherwise -ENOSPC with a NUL-terminated, never overflowed @out.
 */
#include <errno.h>

#include "fuzz.h"
#include "s3sign.h"

#define MAX_PARAMS	20	/* more than the 16 allowed */
#define KEY_ENC_MAX	1024	/* s3sign.c's struct enc */
#define VAL_ENC_MAX	2048
#define SENTINEL	0xa5
#define NCAPS		10	/* short buffers tried per encoding */

static bool unreserved(uint8_t c)
{
	return memchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		      "0123456789-._~", c, 66) != NULL;
}

/* reference encoder into a malloc'd string; *@n: its length */
static char *ref_encode(const uint8_t *in, size_t len, bool keep_slash,
			size_t *n)
{
	char *out = malloc(3 * len + 1), *o = out;
	size_t i;

	FUZZ_CHECK(out != NULL, "out of memory");
	for (i = 0; i < len; i++) {
		if (unreserved(in[i]) || (keep_slash && in[i] == '/'))
			*o++ = (char)in[i];
		else
			o += sprintf(o, "%%%02X", in[i]);
	}
	*o = '\0';
	*n = (size_t)(o - out);
	return out;
}

/* encode into exactly @cap bytes: a NUL-terminated prefix of @want */
static void check_short(const uint8_t *in, size_t len, bool keep_slash,
			const char *want, size_t want_len, size_t cap)
{
	char *out = malloc(cap ? cap : 1);
	size_t got, n;

	FUZZ_CHECK(out != NULL, "out of memory");
	memset(out, SENTINEL, cap ? cap : 1);
	got = s3_uri_encode((const char *)in, len, keep_slash, out, cap);
	FUZZ_CHECK(got == want_len, "cap %zu: length %zu, want %zu", cap, got,
		   want_len);
	if (cap) {
		n = strnlen(out, cap);
		FUZZ_CHECK(n < cap, "cap %zu: not NUL-terminated", cap);
		FUZZ_CHECK(!memcmp(out, want, n),
			   "cap %zu: wrote '%.*s', not a prefix of '%s'", cap,
			   (int)n, out, want);
	}
	free(out);
}

static void check_uri_encode(const uint8_t *in, size_t len, bool keep_slash)
{
	size_t want_len, got, caps[NCAPS], i;
	char *want = ref_encode(in, len, keep_slash, &want_len);
	char *out = malloc(want_len + 1);

	FUZZ_CHECK(out != NULL, "out of memory");
	got = s3_uri_encode((const char *)in, len, keep_slash, out,
			    want_len + 1);
	FUZZ_CHECK(got == want_len && !strcmp(out, want),
		   "encoded to %zu bytes '%s', want %zu '%s'", got, out,
		   want_len, want);
	free(out);
	/*
	 * Short buffers, each of exactly @cap bytes so ASan sees overflows:
	 * the smallest, the ends (cutting into the last %XX) and a few that
	 * depend on the input, so mutations move them around.
	 */
	caps[0] = 0;
	caps[1] = 1;
	caps[2] = 2;
	caps[3] = want_len > 2 ? want_len - 2 : 0;
	caps[4] = want_len > 1 ? want_len - 1 : 0;
	caps[5] = want_len;
	for (i = 6; i < NCAPS; i++) {
		size_t pick = len ? in[(i * 7) % len] * (i + 1) : 0;

		caps[i] = pick % (want_len + 1);
	}
	for (i = 0; i < NCAPS; i++)
		check_short(in, len, keep_slash, want, want_len, caps[i]);
	free(want);
}

struct enc_pair {
	char *k, *v;
};

static int pair_cmp(const void *a, const void *b)
{
	const struct enc_pair *x = a, *y = b;
	int c = strcmp(x->k, y->k);

	return c ? c : strcmp(x->v, y->v);
}

/* the canonical query by a second route: encode, sort, join */
static char *ref_query(const struct s3_param *p, size_t n, bool *too_long)
{
	struct enc_pair e[MAX_PARAMS];
	size_t i, kl, vl, total = 1;
	char *out, *o;

	*too_long = false;
	for (i = 0; i < n; i++) {
		e[i].k = ref_encode((const uint8_t *)p[i].key, strlen(p[i].key),
				    false, &kl);
		e[i].v = ref_encode((const uint8_t *)p[i].val, strlen(p[i].val),
				    false, &vl);
		if (kl >= KEY_ENC_MAX || vl >= VAL_ENC_MAX)
			*too_long = true;
		total += kl + vl + 2;
	}
	qsort(e, n, sizeof(e[0]), pair_cmp);
	out = o = malloc(total);
	FUZZ_CHECK(out != NULL, "out of memory");
	*o = '\0';
	for (i = 0; i < n; i++) {
		o += sprintf(o, "%s%s=%s", i ? "&" : "", e[i].k, e[i].v);
		free(e[i].k);
		free(e[i].v);
	}
	return out;
}

static void check_query(const struct s3_param *p, size_t n, uint8_t salt)
{
	bool too_long = false;
	char *want = n <= 16 ? ref_query(p, n, &too_long) : NULL;
	size_t want_len = want ? strlen(want) : 0;
	size_t caps[4] = { want_len + 1, want_len, want_len / 2, salt };
	size_t i;

	for (i = 0; i < 4; i++) {
		size_t cap = caps[i];
		char *out = malloc(cap ? cap : 1);
		int rc;

		FUZZ_CHECK(out != NULL, "out of memory");
		memset(out, SENTINEL, cap ? cap : 1);
		rc = s3_query_canon(p, n, out, cap);
		if (n > 16) {
			FUZZ_CHECK(rc == -EINVAL, "%zu params: rc %d", n, rc);
		} else if (!n && !cap) {
			/* nothing to write, not even the NUL: let it pass */
			FUZZ_CHECK(rc == 0 || rc == -ENOSPC, "rc %d", rc);
		} else if (too_long || want_len + 1 > cap) {
			FUZZ_CHECK(rc == -ENOSPC, "cap %zu for %zu bytes: rc %d",
				   cap, want_len, rc);
			FUZZ_CHECK(!cap || memchr(out, '\0', cap),
				   "cap %zu: not NUL-terminated", cap);
		} else {
			FUZZ_CHECK(rc >= 0 && (size_t)rc == want_len &&
				   !strcmp(out, want),
				   "cap %zu: rc %d '%.*s', want %zu '%s'", cap,
				   rc, rc > 0 ? rc : 0, out, want_len, want);
		}
		free(out);
	}
	free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	size_t klen = nl ? (size_t)(nl - data) : size;
	struct s3_param p[MAX_PARAMS];
	char *q, *save = NULL, *tok, *strs[MAX_PARAMS];
	size_t n = 0, i;

	check_uri_encode(data, klen, true);
	check_uri_encode(data, klen, false);
	if (!nl)
		return 0;
	/* a copy cut at its first NUL, split on '&' (empty pieces skipped) */
	q = fuzz_strndup(nl + 1, size - klen - 1);
	for (tok = strtok_r(q, "&", &save); tok && n < MAX_PARAMS;
	     tok = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(tok, '=');

		strs[n] = strdup(tok);
		FUZZ_CHECK(strs[n] != NULL, "out of memory");
		if (eq)
			strs[n][eq - tok] = '\0';
		p[n].key = strs[n];
		p[n].val = eq ? strs[n] + (eq - tok) + 1 : "";
		n++;
	}
	check_query(p, n, klen ? data[0] : 0);
	for (i = 0; i < n; i++)
		free(strs[i]);
	free(q);
	return 0;
}
