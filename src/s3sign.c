// SPDX-License-Identifier: MIT
/* s3sign.c - see s3sign.h */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3sign.h"

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	       c == '~';
}

size_t s3_uri_encode(const char *in, size_t len, bool keep_slash, char *out,
		     size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		unsigned char c = in[i];

		if (unreserved(c) || (keep_slash && c == '/')) {
			if (o + 1 < cap)
				out[o] = c;
			o++;
		} else {
			if (o + 3 < cap) {
				out[o] = '%';
				out[o + 1] = hex[c >> 4];
				out[o + 2] = hex[c & 15];
			} else if (o < cap) {
				/* truncated: no later byte fits either */
				out[o] = '\0';
			}
			o += 3;
		}
	}
	if (cap)
		out[o < cap ? o : cap - 1] = '\0';
	return o;
}

struct enc {
	char k[1024], v[2048];
};

static int enc_cmp(const void *a, const void *b)
{
	const struct enc *x = a, *y = b;
	int c = strcmp(x->k, y->k);

	return c ? c : strcmp(x->v, y->v);
}

int s3_query_canon(const struct s3_param *p, size_t n, char *out, size_t cap)
{
	struct enc *e;
	size_t i, o = 0;
	int rc = 0;

	if (n > 16)
		return -EINVAL;
	if (cap)
		out[0] = '\0';
	e = calloc(n ? n : 1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		if (s3_uri_encode(p[i].key, strlen(p[i].key), false, e[i].k,
				  sizeof(e[i].k)) >= sizeof(e[i].k) ||
		    s3_uri_encode(p[i].val, strlen(p[i].val), false, e[i].v,
				  sizeof(e[i].v)) >= sizeof(e[i].v)) {
			rc = -ENOSPC;
			goto out;
		}
	}
	qsort(e, n, sizeof(*e), enc_cmp);
	for (i = 0; i < n; i++) {
		size_t kl = strlen(e[i].k), vl = strlen(e[i].v);

		/* "&" (not before the first), "k=v" and the NUL */
		if (o + (i > 0) + kl + 1 + vl + 1 > cap) {
			rc = -ENOSPC;
			goto out;
		}
		if (i)
			out[o++] = '&';
		memcpy(out + o, e[i].k, kl);
		o += kl;
		out[o++] = '=';
		memcpy(out + o, e[i].v, vl);
		o += vl;
		out[o] = '\0';
	}
	rc = o;
out:
	free(e);
	return rc;
}

int s3_parse_endpoint(const char *ep, char *scheme, size_t scap, char *host,
		      size_t hcap)
{
	const char *h;
	size_t n;

	/* first, whatever else is wrong: the caller echoes only -EINVAL's */
	if (strchr(ep, '@'))
		return -EPERM;
	if (!strncmp(ep, "http://", 7)) {
		snprintf(scheme, scap, "http");
		h = ep + 7;
	} else if (!strncmp(ep, "https://", 8)) {
		snprintf(scheme, scap, "https");
		h = ep + 8;
	} else {
		return -EINVAL;
	}
	n = strcspn(h, "/?#");
	if (!n || n >= hcap || h[n + (h[n] == '/')] != '\0')
		return -EINVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	return 0;
}
