// SPDX-License-Identifier: MIT
/*
 * manifest_cmd.c - "fusefs manifest create|diff": write a manifest from a
 * source's listing, compare two manifests (docs/manifests.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "cfgfile.h"
#include "conf.h"
#include "hash.h"
#include "htab.h"
#include "log.h"
#include "manifest.h"
#include "manifest_cmd.h"
#include "manifest_src.h"
#include "pathmap.h"

static int usage(void)
{
	fprintf(stderr,
		"usage: fusefs manifest create SOURCE [--versions] [BACKEND OPTIONS] > FILE\n"
		"       fusefs manifest diff A B\n"
		"A and B: a manifest file, or rados://POOL/OBJ, s3://BUCKET/KEY\n");
	return 2;
}

/* ---- create ---- */

struct create {
	const char *prefix;
	unsigned long files, skipped;
	int err;
};

static int put_listed(void *arg, const char *key, size_t len,
		      const struct ns_attr *a)
{
	struct create *c = arg;
	struct pm_result pm;
	int rc;

	if (pathmap_classify(key, len, c->prefix, &pm) != PM_FILE)
		return 0;	/* outside, a directory marker, or unservable */
	if (!a) {
		c->skipped++;
		return 0;
	}
	rc = manifest_put(stdout, pm.rel, pm.rel_len, a);
	if (rc == -EINVAL) {
		c->skipped++;
		return 0;
	}
	if (rc)
		return rc;
	c->files++;
	return 0;
}

/* the value of the last --config FILE or --config=FILE among @argv, or NULL */
static const char *config_arg(int argc, char **argv)
{
	const char *found = NULL;
	int i;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "--config") && i + 1 < argc)
			found = argv[++i];
		else if (!strncmp(a, "--config=", 9))
			found = a + 9;
		else if (!strncmp(a, "--", 2) && !strchr(a, '=') &&
			 conf_takes_value(a + 2) > 0)
			i++;		/* that option's value */
	}
	return found;
}

/*
 * backend options as for a mount: --endpoint URL, --config FILE, ...
 * The file first, so that the command line (SOURCE included) overrides
 * it, as for a mount; without a SOURCE the file's "source =" is used.
 */
static int parse_source_args(struct fusefs_conf *cf, int argc, char **argv)
{
	const char *config = config_arg(argc, argv), *source = NULL;
	int i, rc;

	if (config) {
		rc = cfgfile_load(cf, config);
		if (rc)
			return rc;
	}
	for (i = 0; i < argc; i++) {
		char *a = argv[i], *eq, key[64];
		const char *val = NULL;

		if (strncmp(a, "--", 2)) {
			if (source)
				return -EINVAL;
			source = a;
			continue;
		}
		if (!strcmp(a, "--versions")) {
			/* S3: pin object versions (docs/manifests.md) */
			cf->list_versions = true;
			continue;
		}
		a += 2;
		eq = strchr(a, '=');
		snprintf(key, sizeof(key), "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
		rc = conf_takes_value(key);
		if (rc < 0) {
			fprintf(stderr, "fusefs: unknown option --%s\n", key);
			return -EINVAL;
		}
		if (rc && eq)
			val = eq + 1;
		else if (rc && i + 1 < argc)
			val = argv[++i];
		else if (rc)
			return -EINVAL;
		rc = conf_set(cf, key, val);
		if (rc)
			return rc;
	}
	if (source) {
		free(cf->source);	/* from a config file */
		cf->source = strdup(source);
		if (!cf->source)
			return -ENOMEM;
	}
	return cf->source ? 0 : -EINVAL;
}

static int cmd_create(int argc, char **argv)
{
	struct create c = { 0 };
	struct fusefs_conf cf;
	struct backend *be = NULL;
	int rc;

	conf_init(&cf);
	if (parse_source_args(&cf, argc, argv)) {
		conf_release(&cf);
		return usage();
	}
	log_open("fusefs", false);
	log_level = LOG_WARNING;	/* stdout is the manifest, stderr the errors */
	if (cf.list_versions && strncmp(cf.source, "s3://", 5)) {
		fprintf(stderr, "fusefs: --versions applies to s3:// sources only\n");
		rc = -EINVAL;
		goto out;
	}
	rc = backend_check_source(cf.source) ? -EINVAL : backend_open(&be, &cf);
	if (rc)
		goto out;
	c.prefix = be->prefix;
	rc = manifest_put_header(stdout, cf.source);
	if (!rc)
		rc = be->ops->list(be, put_listed, &c);
	if (!rc && fflush(stdout))
		rc = -EIO;
	if (rc)
		fprintf(stderr, "fusefs: cannot list %s: %s\n", cf.source,
			strerror(-rc));
	else
		fprintf(stderr, "fusefs: %lu files%s", c.files, c.skipped ? "" : "\n");
	if (!rc && c.skipped)
		fprintf(stderr, ", %lu skipped (unreadable, over 2^44 bytes, or a version that cannot be written)\n",
			c.skipped);
out:
	backend_close(be);
	conf_release(&cf);
	return rc ? 1 : 0;
}

/* ---- diff ---- */

struct dentry {
	uint64_t h;
	struct dentry *next;		/* same hash */
	bool seen;
	struct ns_attr a;
	size_t len;
	char path[];
};

struct diff {
	struct htab tab;
	struct dentry **all;		/* A in order, for the removed ones */
	size_t n, cap;
	unsigned long added, removed, changed;
};

static uint64_t dentry_key(const void *item)
{
	return ((const struct dentry *)item)->h;
}

static struct dentry *find(const struct diff *d, const struct manifest_entry *e,
			   uint64_t h)
{
	struct dentry *x = htab_get(&d->tab, h);

	while (x && (x->len != e->len || memcmp(x->path, e->path, e->len)))
		x = x->next;
	return x;
}

static int load_a(void *arg, const struct manifest_entry *e,
		  unsigned long lineno)
{
	struct diff *d = arg;
	uint64_t h = hash64(e->path, e->len, 7);
	struct dentry *x, *head;

	if (find(d, e, h))
		return EEXIST;		/* a path twice */
	x = malloc(sizeof(*x) + e->len);
	if (!x)
		return -ENOMEM;
	x->h = h;
	x->seen = false;
	x->a = e->attr;
	x->len = e->len;
	memcpy(x->path, e->path, e->len);
	if (d->n == d->cap) {
		size_t cap = d->cap ? 2 * d->cap : 1024;
		struct dentry **p = realloc(d->all, cap * sizeof(*p));

		if (!p) {
			free(x);
			return -ENOMEM;
		}
		d->all = p;
		d->cap = cap;
	}
	d->all[d->n++] = x;
	head = htab_del(&d->tab, h);
	x->next = head;
	return htab_put(&d->tab, x);
}

static void print_line(char what, const char *path, size_t len,
		       const struct ns_attr *a)
{
	putchar(what);
	putchar(' ');
	manifest_put(stdout, path, len, a);
}

static int compare_b(void *arg, const struct manifest_entry *e,
		     unsigned long lineno)
{
	struct diff *d = arg;
	struct dentry *x = find(d, e, hash64(e->path, e->len, 7));

	if (!x) {
		d->added++;
		print_line('+', e->path, e->len, &e->attr);
		return 0;
	}
	if (x->seen)
		return EEXIST;
	x->seen = true;
	if (x->a.size != e->attr.size || strcmp(x->a.version, e->attr.version)) {
		d->changed++;
		print_line('~', e->path, e->len, &e->attr);
	}
	return 0;
}

static int read_one(const struct fusefs_conf *cf, const char *where,
		    manifest_fn fn, void *arg)
{
	char err[MANIFEST_PATH_MAX + 256];
	int fd, rc = manifest_open(cf, where, &fd);

	if (rc)
		return rc;
	rc = manifest_read(fd, where, fn, arg, err, sizeof(err));
	close(fd);
	if (rc)
		fprintf(stderr, "fusefs: %s%s\n", err,
			rc == EEXIST ? " (a path listed twice)" : "");
	return rc;
}

static int cmd_diff(int argc, char **argv)
{
	struct diff d = { 0 };
	struct fusefs_conf cf;
	size_t i;
	int rc;

	if (argc != 2)
		return usage();
	conf_init(&cf);
	log_open("fusefs", false);
	htab_init(&d.tab, dentry_key);
	rc = read_one(&cf, argv[0], load_a, &d);
	if (!rc)
		rc = read_one(&cf, argv[1], compare_b, &d);
	for (i = 0; i < d.n; i++) {
		if (!rc && !d.all[i]->seen) {
			d.removed++;
			print_line('-', d.all[i]->path, d.all[i]->len,
				   &d.all[i]->a);
		}
		free(d.all[i]);
	}
	free(d.all);
	htab_release(&d.tab);
	conf_release(&cf);
	if (rc)
		return 2;
	fflush(stdout);
	fprintf(stderr, "fusefs: %lu added, %lu removed, %lu changed\n",
		d.added, d.removed, d.changed);
	return d.added || d.removed || d.changed ? 1 : 0;
}

int cmd_manifest(int argc, char **argv)
{
	if (argc >= 1 && !strcmp(argv[0], "create"))
		return cmd_create(argc - 1, argv + 1);
	if (argc >= 1 && !strcmp(argv[0], "diff"))
		return cmd_diff(argc - 1, argv + 1);
	return usage();
}
