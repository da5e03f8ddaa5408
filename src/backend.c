// SPDX-License-Identifier: MIT
/* backend.c - source URL parsing and the backend registry */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "compiler.h"

static const struct backend_ops *const backends[] = {
	&backend_rados_ops,
	&backend_s3_ops,
	&backend_file_ops,
};

int backend_split_source(const char *src, char *scheme, size_t slen,
			 const char **where)
{
	const char *sep = strstr(src, "://");
	size_t n;

	if (!sep)
		return -EINVAL;
	n = sep - src;
	if (!n || n >= slen)
		return -EINVAL;
	memcpy(scheme, src, n);
	scheme[n] = '\0';
	*where = sep + 3;
	return 0;
}

int backend_set_prefix(struct backend *be, const char *p)
{
	size_t n;

	while (*p == '/')
		p++;
	n = strlen(p);
	while (n && p[n - 1] == '/')
		n--;
	if (n >= sizeof(be->prefix))
		return -ENAMETOOLONG;
	memcpy(be->prefix, p, n);
	be->prefix[n] = '\0';
	return 0;
}

static const struct backend_ops *find_ops(const char *src, const char **where)
{
	char scheme[16];
	size_t i;

	if (backend_split_source(src, scheme, sizeof(scheme), where)) {
		fprintf(stderr, "fusefs: bad source '%s': expected rados://POOL[/PREFIX], s3://BUCKET[/PREFIX] or file:///DIR\n",
			src);
		return NULL;
	}
	for (i = 0; i < ARRAY_SIZE(backends); i++)
		if (!strcmp(backends[i]->scheme, scheme))
			return backends[i];
	fprintf(stderr, "fusefs: unsupported source scheme '%s://' (supported: rados://, s3://, file://)\n",
		scheme);
	return NULL;
}

/* "s3://KEY:SECRET@bucket" would put the secret in every log line and in
 * /proc/mounts (fsname); rados:// pool names are left as they are */
bool backend_has_userinfo(const char *src)
{
	const char *host = strstr(src, "://");

	if (!strncmp(src, "rados://", 8))
		return false;
	host = host ? host + 3 : src;
	return memchr(host, '@', strcspn(host, "/?#")) != NULL;
}

int backend_check_source(const char *src)
{
	const char *where;

	if (backend_has_userinfo(src)) {
		fprintf(stderr, "fusefs: SOURCE must not contain credentials (USER:KEY@); use the environment or --credentials-file\n");
		return -EINVAL;
	}
	return find_ops(src, &where) ? 0 : -EINVAL;
}

int backend_open(struct backend **out, const struct fusefs_conf *cf)
{
	const struct backend_ops *ops;
	const char *where;

	ops = find_ops(cf->source, &where);
	return ops ? ops->open(out, cf, where) : -EINVAL;
}

void backend_close(struct backend *be)
{
	if (be)
		be->ops->close(be);
}
