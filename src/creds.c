// SPDX-License-Identifier: MIT
/* creds.c - see creds.h */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "cfgfile.h"
#include "creds.h"

struct want {
	const char *file, *profile;
	struct s3_creds *out;
	int found;
	int err;		/* -EINVAL: a value too long (printed) */
};

/*
 * Copy credential @what (from @where) into @dst of @cap bytes; -EINVAL,
 * with a message that names it but never shows it, when it does not fit:
 * a value cut short would only fail every request's signature.
 */
static int put(char *dst, size_t cap, const char *value, const char *what,
	       const char *where)
{
	size_t n = strlen(value);

	if (n >= cap) {
		fprintf(stderr, "fusefs: %s from %s is %zu bytes long, more than the %zu fusefs takes\n",
			what, where, n, cap - 1);
		return -EINVAL;
	}
	memcpy(dst, value, n + 1);
	return 0;
}

static int on_ini(void *user, const char *section, const char *name,
		  const char *value, int line)
{
	struct want *w = user;
	struct s3_creds *o = w->out;
	char where[PATH_MAX + 300];
	int rc = 0;

	if (!name || strcmp(section, w->profile))
		return 0;
	w->found = 1;
	snprintf(where, sizeof(where), "%s [%s] line %d", w->file, w->profile,
		 line);
	if (!strcmp(name, "aws_access_key_id"))
		rc = put(o->access, sizeof(o->access), value, name, where);
	else if (!strcmp(name, "aws_secret_access_key"))
		rc = put(o->secret, sizeof(o->secret), value, name, where);
	else if (!strcmp(name, "aws_session_token"))
		rc = put(o->token, sizeof(o->token), value, name, where);
	if (rc && !w->err)
		w->err = rc;
	return 0;
}

static int from_file(const char *file, const char *profile,
		     struct s3_creds *out)
{
	struct want w = { file, profile, out, 0, 0 };
	int rc = cfgfile_each(file, on_ini, &w);

	if (rc < 0) {
		fprintf(stderr, "fusefs: cannot read credentials file %s: %s\n",
			file, strerror(-rc));
		return -ENOENT;
	}
	if (rc > 0) {
		fprintf(stderr, "fusefs: credentials file %s: syntax error on line %d\n",
			file, rc);
		return -EINVAL;
	}
	if (w.err) {
		creds_wipe(out);
		return w.err;
	}
	if (!w.found || !out->access[0] || !out->secret[0]) {
		fprintf(stderr, "fusefs: credentials file %s has no complete profile [%s]\n",
			file, profile);
		creds_wipe(out);	/* half a profile may hold a secret */
		return -ENOENT;
	}
	snprintf(out->from, sizeof(out->from), "%s [%s]", file, profile);
	return 0;
}

/*
 * The environment's secrets, kept once read: they leave the environment
 * at the first creds_load(), and a later one (a second backend, such as
 * the one that reads a remote manifest) takes them from here.
 */
static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static struct s3_creds env_copy;
static bool have_env_copy;

/* overwrite @name's value where it lives, then unset it */
static void env_wipe(const char *name)
{
	char *v = getenv(name);

	if (v)
		explicit_bzero(v, strlen(v));
	unsetenv(name);
}

static void env_wipe_secrets(void)
{
	env_wipe("AWS_ACCESS_KEY_ID");
	env_wipe("AWS_SECRET_ACCESS_KEY");
	env_wipe("AWS_SESSION_TOKEN");
}

void creds_hide_process(void)
{
	const char *keep = getenv("FUSEFS_CORE_DUMPS");

	if (!keep || strcmp(keep, "1"))
		prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static int load(const struct fusefs_conf *cf, struct s3_creds *out)
{
	const char *ak = getenv("AWS_ACCESS_KEY_ID");
	const char *sk = getenv("AWS_SECRET_ACCESS_KEY");
	const char *profile = cf->s3_profile ? cf->s3_profile : getenv("AWS_PROFILE");
	const char *file = cf->s3_credentials_file;
	char def[4096];

	memset(out, 0, sizeof(*out));
	if (!file) {
		const char *env = getenv("AWS_SHARED_CREDENTIALS_FILE");
		const char *home = getenv("HOME");

		if (env)
			snprintf(def, sizeof(def), "%s", env);
		else
			snprintf(def, sizeof(def), "%s/.aws/credentials",
				 home ? home : "");
	}
	if (cf->s3_credentials_file || cf->s3_profile)
		return from_file(file ? file : def, profile ? profile : "default",
				 out);
	if (ak && *ak && sk && *sk) {
		const char *tok = getenv("AWS_SESSION_TOKEN");

		if (put(out->access, sizeof(out->access), ak,
			"AWS_ACCESS_KEY_ID", "the environment") ||
		    put(out->secret, sizeof(out->secret), sk,
			"AWS_SECRET_ACCESS_KEY", "the environment") ||
		    (tok && put(out->token, sizeof(out->token), tok,
				"AWS_SESSION_TOKEN", "the environment"))) {
			creds_wipe(out);
			return -EINVAL;
		}
		snprintf(out->from, sizeof(out->from), "environment");
		pthread_mutex_lock(&env_lock);
		env_copy = *out;
		have_env_copy = true;
		pthread_mutex_unlock(&env_lock);
		return 0;
	}
	pthread_mutex_lock(&env_lock);
	if (have_env_copy)
		*out = env_copy;	/* a second backend (a remote manifest) */
	pthread_mutex_unlock(&env_lock);
	if (out->access[0])
		return 0;
	if (from_file(def, profile ? profile : "default", out) == 0)
		return 0;
	fprintf(stderr, "fusefs: no S3 credentials: set AWS_ACCESS_KEY_ID and "
		"AWS_SECRET_ACCESS_KEY, or use a credentials file (--profile, "
		"--credentials-file)\n");
	return -ENOENT;
}

int creds_load(const struct fusefs_conf *cf, struct s3_creds *out)
{
	int rc = load(cf, out);

	/* secrets from a file or the environment are in memory now; those
	 * in the environment go from it whichever were used */
	env_wipe_secrets();
	creds_hide_process();
	return rc;
}

void creds_wipe(struct s3_creds *c)
{
	explicit_bzero(c, sizeof(*c));
}
