/* SPDX-License-Identifier: MIT */
/*
 * creds.h - S3 credentials from the usual places, never from argv:
 *   1. --credentials-file FILE or --profile NAME given: that file/profile
 *      (FILE defaults to $AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials);
 *   2. otherwise AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY
 *      (+ AWS_SESSION_TOKEN) from the environment;
 *   3. otherwise the default file, profile $AWS_PROFILE or "default".
 * The INI file is read with cfgfile_each() (inih).
 * Secrets are never logged; only where they came from is.
 *
 * Once read, the secrets leave the environment: the variables are
 * unset and their values overwritten in place (so /proc/PID/environ,
 * which shows the original block, no longer holds them either), and the
 * process is made non-dumpable (creds_hide_process()).  The ones taken
 * from the environment are kept in memory for later creds_load() calls
 * of the same process (a second S3 backend reads a remote manifest).
 */
#ifndef FUSEFS_CREDS_H
#define FUSEFS_CREDS_H

#include <stddef.h>

#include "conf.h"

struct s3_creds {
	char access[128];
	char secret[256];
	char token[4096];
	char from[512];		/* "environment" or "FILE [profile]" */
};

/* creds_load() - fill @out; -ENOENT (none found) or -EINVAL, message printed */
int creds_load(const struct fusefs_conf *cf, struct s3_creds *out);
/* creds_wipe() - overwrite the secrets in memory */
void creds_wipe(struct s3_creds *c);
/*
 * creds_hide_process() - the process holds secrets: no core dumps, and
 * /proc/PID/{mem,environ,...} and ptrace only for root
 * (prctl(PR_SET_DUMPABLE, 0); docs/security.md).  FUSEFS_CORE_DUMPS=1 in
 * the environment keeps the process dumpable, to debug a crash.
 */
void creds_hide_process(void);

#endif
