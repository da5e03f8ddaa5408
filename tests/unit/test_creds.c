// SPDX-License-Identifier: MIT
/* secrets leave the environment and the process is not dumpable (creds.c) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

/* what creds_load() printed to stderr, into @buf */
static void load_capturing(struct fusefs_conf *cf, int *rc, char *buf,
			   size_t len)
{
	struct s3_creds c;
	FILE *f = tmpfile();
	int saved = dup(STDERR_FILENO);
	size_t n;

	fflush(stderr);
	dup2(fileno(f), STDERR_FILENO);
	*rc = creds_load(cf, &c);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	creds_wipe(&c);
}

/* a credentials file that cannot be read says why (missing, a directory) */
static void test_unreadable_file_says_why(void)
{
	struct fusefs_conf cf = { 0 };
	char err[512];
	int rc;

	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	cf.s3_credentials_file = "/nonexistent/credentials";
	load_capturing(&cf, &rc, err, sizeof(err));
	CHECK_INT(rc, ==, -ENOENT);
	CHECK(strstr(err, "cannot read credentials file /nonexistent/credentials: No such file or directory"));
	cf.s3_credentials_file = "/";
	load_capturing(&cf, &rc, err, sizeof(err));
	CHECK_INT(rc, ==, -ENOENT);
	CHECK(strstr(err, "cannot read credentials file /: Is a directory"));
}

/*
 * A value longer than fusefs holds is refused by name, never cut (a cut
 * secret fails every signature with a 403 nobody can explain) and never
 * shown.
 */
static void test_too_long_is_refused(void)
{
	char path[] = "/tmp/fusefs-creds-XXXXXX", err[1024];
	struct fusefs_conf cf = { 0 };
	size_t n = 5000;
	char *tok = malloc(n + 1);
	FILE *f;
	int fd, rc;

	memset(tok, 'T', n);
	tok[n] = '\0';
	fd = mkstemp(path);
	CHECK(fd >= 0);
	f = fdopen(fd, "w");
	fprintf(f, "[default]\naws_access_key_id = AKID\n"
		"aws_secret_access_key = sec\naws_session_token = %s\n", tok);
	fclose(f);
	unsetenv("AWS_ACCESS_KEY_ID");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	cf.s3_credentials_file = path;
	load_capturing(&cf, &rc, err, sizeof(err));
	CHECK_INT(rc, ==, -EINVAL);
	CHECK(strstr(err, "aws_session_token from "));
	CHECK(strstr(err, "[default] line 4 is 5000 bytes long, more than the 4095 fusefs takes"));
	CHECK(!strstr(err, "TTTT"));
	unlink(path);

	cf.s3_credentials_file = NULL;
	tok[300] = '\0';
	setenv("AWS_ACCESS_KEY_ID", "AKID", 1);
	setenv("AWS_SECRET_ACCESS_KEY", tok, 1);
	load_capturing(&cf, &rc, err, sizeof(err));
	CHECK_INT(rc, ==, -EINVAL);
	CHECK(strstr(err, "AWS_SECRET_ACCESS_KEY from the environment is 300 bytes long, more than the 255 fusefs takes"));
	CHECK(!strstr(err, "TTTT"));
	CHECK(!getenv("AWS_SECRET_ACCESS_KEY"));	/* wiped all the same */
	free(tok);
}

int main(void)
{
	runner_name = "test_creds";
	TEST(test_env_secrets_wiped);
	TEST(test_core_dumps_kept_on_request);
	TEST(test_unreadable_file_says_why);
	TEST(test_too_long_is_refused);
	return runner_done();
}
