// SPDX-License-Identifier: MIT
/*
 * fuzz_creds.c - the AWS shared credentials file (creds_load with
 * --credentials-file), for profiles "default" and "prod".  The input is
 * the file's contents; the code reads it by path, from a memfd.
 *
 * Invariants (include/creds.h):
 *  - creds_load() returns 0, -ENOENT or -EINVAL, and after a failure
 *    holds no secret or token (the caller only wipes after success);
 *  - on success the access key and secret are non-empty, every field is
 *    NUL-terminated inside its array, and "from" names the file and the
 *    profile;
 *  - success prints nothing, and nothing printed ever holds the secret
 *    or the session token (checked for values of 24+ bytes without
 *    white space, which no message text contains);
 *  - creds_wipe() leaves only zero bytes.
 */
#include <ctype.h>
#include <errno.h>

#include "conf.h"
#include "creds.h"
#include "fuzz.h"

#define TERMINATED(a)	(memchr((a), '\0', sizeof(a)) != NULL)

/* @s is distinctive enough that finding it in a message means a leak */
static bool leaks(const char *msgs, const char *s)
{
	const char *p;

	if (strlen(s) < 24)
		return false;
	for (p = s; *p; p++)
		if (isspace((unsigned char)*p))
			return false;
	return strstr(msgs, s) != NULL;
}

static void load(const char *path, const char *profile)
{
	struct fusefs_conf cf = { 0 };
	struct s3_creds c;
	char *msgs = NULL, from[512];
	size_t mlen = 0;
	FILE *cap = open_memstream(&msgs, &mlen), *saved = stderr;
	size_t i;
	int rc;

	FUZZ_CHECK(cap != NULL, "open_memstream failed");
	cf.s3_credentials_file = (char *)path;
	cf.s3_profile = (char *)profile;
	memset(&c, 0xa5, sizeof(c));
	stderr = cap;			/* what creds_load() prints */
	rc = creds_load(&cf, &c);
	stderr = saved;
	fclose(cap);

	FUZZ_CHECK(rc == 0 || rc == -ENOENT || rc == -EINVAL, "rc %d", rc);
	FUZZ_CHECK(TERMINATED(c.access) && TERMINATED(c.secret) &&
		   TERMINATED(c.token) && TERMINATED(c.from),
		   "a field is not terminated");
	FUZZ_CHECK(!leaks(msgs, c.secret) && !leaks(msgs, c.token),
		   "a secret was printed: %s", msgs);
	/* a failed load leaves no secret behind for the caller to wipe */
	if (rc)
		FUZZ_CHECK(!c.secret[0] && !c.token[0],
			   "rc %d left a secret in the result", rc);
	if (rc == 0) {
		FUZZ_CHECK(c.access[0] && c.secret[0], "empty key accepted");
		FUZZ_CHECK(mlen == 0, "success printed '%s'", msgs);
		snprintf(from, sizeof(from), "%s [%s]", path, profile);
		FUZZ_CHECK(!strcmp(c.from, from), "from '%s'", c.from);
	}
	free(msgs);
	creds_wipe(&c);
	for (i = 0; i < sizeof(c); i++)
		FUZZ_CHECK(((const uint8_t *)&c)[i] == 0, "byte %zu not wiped",
			   i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_as_file(data, size);

	load(path, "default");
	load(path, "prod");
	return 0;
}
