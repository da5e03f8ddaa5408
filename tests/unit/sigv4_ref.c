// SPDX-License-Identifier: MIT
/* sigv4_ref.c - see sigv4_ref.h */
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "sigv4_ref.h"

static void to_hex(const unsigned char *d, size_t n, char *hex)
{
	size_t i;

	for (i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
}

void sha256_hex(const char *data, size_t len, char hex[65])
{
	unsigned char d[32];
	unsigned int n = 32;

	EVP_Digest(data, len, d, &n, EVP_sha256(), NULL);
	to_hex(d, 32, hex);
}

static void hmac(const unsigned char *key, size_t klen, const char *msg,
		 unsigned char out[32])
{
	unsigned int n = 32;

	HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg,
	     strlen(msg), out, &n);
}

void sigv4_ref_signature(const char *secret, const char *amzdate,
			 const char *region, const char *service,
			 const char *canonical_request, char hex[65])
{
	char key0[300], date[9], sts[1024], crh[65];
	unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];

	memcpy(date, amzdate, 8);
	date[8] = '\0';
	snprintf(key0, sizeof(key0), "AWS4%s", secret);
	hmac((unsigned char *)key0, strlen(key0), date, k1);
	hmac(k1, 32, region, k2);
	hmac(k2, 32, service, k3);
	hmac(k3, 32, "aws4_request", k4);
	sha256_hex(canonical_request, strlen(canonical_request), crh);
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s",
		 amzdate, date, region, service, crh);
	hmac(k4, 32, sts, sig);
	to_hex(sig, 32, hex);
}
