// SPDX-License-Identifier: MIT
/* secrets leave the environment and the process is not dumpable (creds.c) */
#include <string.h>
#include <sys/prctl.h>

#include "conf.h"
#include "creds.h"
#include "runner.h"

static void test_env_secrets_wiped(void)
{
	struct fusefs_conf cf = { 0 };
	struct s3_creds c;
	char *sk;

	setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "very-secret", 1);
	setenv("AWS_SESSION_TOKEN", "tok", 1);
	unsetenv("FUSEFS_CORE_DUMPS");
	sk = getenv("AWS_SECRET_ACCESS_KEY");
	CHECK_INT(prctl(PR_GET_DUMPABLE), ==, 1);
	CHECK_INT(creds_load(&cf, &c), ==, 0);
	CHECK_STR(c.access, "AKIDTEST");
	CHECK_STR(c.secret, "very-secret");
	CHECK_STR(c.token, "tok");
	CHECK_STR(c.from, "environment");
	CHECK(!getenv("AWS_ACCESS_KEY_ID"));
	CHECK(!getenv("AWS_SECRET_ACCESS_KEY"));
	CHECK(!getenv("AWS_SESSION_TOKEN"));
	/* overwritten where it was, not just unlinked from environ */
	CHECK(sk[0] == '\0' && !memchr(sk, 's', strlen("very-secret")));
	CHECK_INT(prctl(PR_GET_DUMPABLE), ==, 0);
	creds_wipe(&c);
	CHECK(!c.secret[0] && !c.access[0]);
}

static void test_core_dumps_kept_on_request(void)
{
	struct fusefs_conf cf = { 0 };
	struct s3_creds c;

	setenv("AWS_ACCESS_KEY_ID", "AKIDTEST", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "very-secret", 1);
	setenv("FUSEFS_CORE_DUMPS", "1", 1);
	CHECK_INT(creds_load(&cf, &c), ==, 0);
	CHECK_INT(prctl(PR_GET_DUMPABLE), ==, 1);
	CHECK(!getenv("AWS_SECRET_ACCESS_KEY"));
	creds_wipe(&c);
}

int main(void)
{
	runner_name = "test_creds";
	TEST(test_env_secrets_wiped);
	TEST(test_core_dumps_kept_on_request);
	return runner_done();
}
