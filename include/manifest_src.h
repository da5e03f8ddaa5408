/* SPDX-License-Identifier: MIT */
/*
 * manifest_src.h - where a manifest's bytes come from: a local file (a
 * path or file:///PATH, opened directly), or an object read whole through
 * a backend (rados://POOL/OBJ, s3://BUCKET/KEY) into an anonymous memory
 * file.
 */
#ifndef FUSEFS_MANIFEST_SRC_H
#define FUSEFS_MANIFEST_SRC_H

#include "conf.h"

#define MANIFEST_REMOTE_MAX	(4ULL << 30)	/* bytes of a remote manifest */

/*
 * manifest_open() - an fd positioned at the start of manifest @where,
 * using @cf's backend options (endpoint, credentials, ceph.conf) for a
 * URL.  Return: 0 with *@fd set (the caller closes it), or -errno with a
 * message printed and logged.
 */
int manifest_open(const struct fusefs_conf *cf, const char *where, int *fd);

/*
 * manifest_check_url() - a manifest URL with credentials in it
 * (s3://KEY:SECRET@BUCKET/KEY) would be in every message and log line
 * about the manifest: refused, without repeating it.  A local path (or
 * file://PATH) is never refused.  manifest_open() checks it too.
 * Return: 0, or -EINVAL with a message printed.
 */
int manifest_check_url(const char *where);

#endif
