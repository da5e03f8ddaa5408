/* SPDX-License-Identifier: MIT */
/*
 * sigv4_ref.h - a reference AWS SigV4 signer (OpenSSL HMAC-SHA256), for
 * unit tests only: it checks that the canonical pieces fusefs hands to
 * curl produce the signatures AWS publishes.  Not linked into fusefs.
 */
#ifndef FUSEFS_SIGV4_REF_H
#define FUSEFS_SIGV4_REF_H

#include <stddef.h>

void sha256_hex(const char *data, size_t len, char hex[65]);
/* the signature of @canonical_request at @amzdate (YYYYMMDDTHHMMSSZ) */
void sigv4_ref_signature(const char *secret, const char *amzdate,
			 const char *region, const char *service,
			 const char *canonical_request, char hex[65]);

#endif
