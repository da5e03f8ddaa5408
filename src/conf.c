// SPDX-License-Identifier: MIT
/* conf.c - option table shared by --long options and -o key=value */
#include <ctype.h>
#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "compiler.h"
#include "conf.h"
#include "log.h"

enum opt_kind { OPT_STR, OPT_SIZE, OPT_UINT, OPT_FLAG, OPT_SPECIAL };

struct opt {
	const char *name;	/* canonical, with '-' */
	enum opt_kind kind;
	size_t off;		/* offsetof in struct fusefs_conf */
	unsigned min, max;	/* OPT_UINT bounds */
	const char *arg;	/* the value's name in --help; NULL: a flag */
	/*
	 * The default, in the one place it is written: conf_init() applies
	 * @def through the option's own parser, --help shows it, and
	 * tests/fuse/test_docs.py holds the man page and
	 * docs/configuration.md to it.  @def_text: a default that is not a
	 * value set here (resolved where it is used: "admin", "mounting
	 * user"), shown the same way; NULL for both: none worth showing.
	 */
	const char *def;
	const char *def_text;
	const char *help;
};

#define O(f) offsetof(struct fusefs_conf, f)

static const struct opt opts[] = {
	{ "cache-dir", OPT_STR, O(cache_dir), 0, 0,
	  "DIR", NULL, NULL,
	  "local cache directory (required)" },
	{ "cache-size", OPT_SPECIAL, 0, 0, 0,
	  "SIZE", "10G", NULL,
	  "hard bound on cached bytes, or N% of the cache file system; refused if it cannot fit, the default lowered" },
	{ "chunk-size", OPT_SPECIAL, 0, 0, 0,
	  "SIZE", "4M", NULL,
	  "cache chunk, power of two 1M..16M" },
	{ "ceph-conf", OPT_STR, O(ceph_conf), 0, 0,
	  "FILE", NULL, "librados search order",
	  "ceph.conf" },
	{ "id", OPT_STR, O(ceph_id), 0, 0,
	  "NAME", NULL, "admin",
	  "Ceph client id" },
	{ "keyring", OPT_STR, O(keyring), 0, 0,
	  "FILE", NULL, NULL,
	  "Ceph keyring" },
	{ "endpoint", OPT_STR, O(s3_endpoint), 0, 0,
	  "URL", NULL, "$AWS_ENDPOINT_URL",
	  "S3 endpoint, e.g. http://rgw:7480" },
	{ "region", OPT_STR, O(s3_region), 0, 0,
	  "NAME", NULL, "us-east-1",
	  "S3 signing region" },
	{ "profile", OPT_STR, O(s3_profile), 0, 0,
	  "NAME", NULL, NULL,
	  "profile in the credentials file" },
	{ "credentials-file", OPT_STR, O(s3_credentials_file), 0, 0,
	  "FILE", NULL, NULL,
	  "~/.aws/credentials-style file" },
	{ "ca-file", OPT_STR, O(s3_ca_file), 0, 0,
	  "FILE", NULL, NULL,
	  "CA bundle for an HTTPS endpoint" },
	{ "virtual-host", OPT_FLAG, O(s3_virtual_host), 0, 0,
	  NULL, NULL, "path style",
	  "bucket.host addressing" },
	{ "uid", OPT_SPECIAL, 0, 0, 0,
	  "N", NULL, "mounting user",
	  "owner of every file" },
	{ "gid", OPT_SPECIAL, 0, 0, 0,
	  "N", NULL, "mounting group",
	  "group of every file" },
	{ "umask", OPT_SPECIAL, 0, 0, 0,
	  "OCTAL", "022", NULL,
	  "masks 0444/0555 modes" },
	{ "allow-other", OPT_FLAG, O(allow_other), 0, 0,
	  NULL, NULL, NULL,
	  "let other users see the mount" },
	{ "nonempty", OPT_FLAG, O(nonempty), 0, 0,
	  NULL, NULL, NULL,
	  "allow a mount point that is not empty (hides its contents)" },
	{ "foreground", OPT_FLAG, O(foreground), 0, 0,
	  NULL, NULL, NULL,
	  "stay in the foreground (-f)" },
	{ "debug-fuse", OPT_FLAG, O(debug_fuse), 0, 0,
	  NULL, NULL, NULL,
	  "libfuse request tracing" },
	{ "revalidate", OPT_UINT, O(revalidate_s), 0, 86400 * 365,
	  "SECONDS", "60", NULL,
	  "trust a file's version this long; then an open re-checks it in the background, 0: every open waits for a re-check" },
	{ "list-refresh", OPT_UINT, O(list_refresh_s), 0, 86400 * 365,
	  "SECONDS", "300", NULL,
	  "re-list the backend this often and right after a remount; 0 never by itself" },
	{ "manifest", OPT_STR, O(manifest), 0, 0,
	  "FILE|URL", NULL, NULL,
	  "namespace and pinned versions from a manifest (file, rados://POOL/OBJ or s3://BUCKET/KEY; docs/manifests.md) instead of a listing" },
	{ "snap", OPT_STR, O(snap), 0, 0,
	  "NAME", NULL, NULL,
	  "RADOS: read the pool snapshot NAME instead of the live objects" },
	{ "readahead", OPT_UINT, O(readahead), 0, 64,
	  "CHUNKS", "8", NULL,
	  "at most, fetched ahead of a sequential reader" },
	{ "random-reads", OPT_SPECIAL, 0, 0, 0,
	  "MODE", "pages", NULL,
	  "pages (a read that is not part of a stream fetches the 4 KiB pages it needs) or chunks (whole chunks)" },
	{ "max-inflight", OPT_UINT, O(max_inflight), 1, 1024,
	  "N", "32", NULL,
	  "backend reads in flight" },
	{ "ahead-time", OPT_UINT, O(ahead_ms), 0, 60000,
	  "MS", "50", NULL,
	  "read-ahead and prefetch in flight: at most what the backend delivers in this time (measured; at least 2 reads, 2 chunks at most); 0: --max-inflight alone" },
	{ "verify-depth", OPT_UINT, O(verify_depth), 0, 64,
	  "N", "8", NULL,
	  "chunk reads the background verifier keeps in flight after a restart; 0: verify each chunk at its first read" },
	{ "trust-clean-stop", OPT_SPECIAL, 0, 0, 0,
	  "MODE", "on", NULL,
	  "on: after a start, the chunks of data files a clean stop recorded and nobody changed since are served unread; off: every chunk of an earlier run is read and checked first" },
	{ "retries", OPT_UINT, O(retries), 0, 20,
	  "N", "3", NULL,
	  "extra attempts after a failed backend read" },
	{ "op-timeout", OPT_UINT, O(op_timeout_s), 1, 3600,
	  "SECONDS", "15", NULL,
	  "one backend operation" },
	{ "connect-timeout", OPT_UINT, O(connect_timeout_s), 1, 3600,
	  "SECONDS", "15", NULL,
	  "connecting at mount" },
	{ "max-threads", OPT_UINT, O(max_threads), 2, 1024,
	  "N", "32", NULL,
	  "FUSE worker threads" },
	{ "read-mode", OPT_SPECIAL, 0, 0, 0,
	  "MODE", "direct", NULL,
	  "cache hits: direct, buffered or splice" },
	{ "passthrough", OPT_SPECIAL, 0, 0, 0,
	  "MODE", "auto", NULL,
	  "auto (complete cached files read by the kernel directly, root only) or off" },
	{ "evict", OPT_STR, O(evict), 0, 0,
	  "POLICY", "auto", NULL,
	  "auto (epoch lists, else heat), heat or lru" },
	{ "heat-half-life", OPT_UINT, O(heat_half_life_s), 1, 0xffffffffU,
	  "SECONDS", "604800", NULL,
	  "heat decays by half in this time" },
	{ "list-idle", OPT_UINT, O(list_idle_s), 0, 86400 * 365,
	  "SECONDS", "300", NULL,
	  "an epoch list without opens this long stops holding cache space; 0 never" },
	{ "rewarm", OPT_UINT, O(rewarm), 0, 10000000,
	  "N", "0", NULL,
	  "at mount, fetch the N hottest uncached files" },
	{ "log-level", OPT_SPECIAL, 0, 0, 0,
	  "LEVEL", "info", NULL,
	  "error, warn, info, debug" },
	{ "syslog", OPT_FLAG, O(log_syslog), 0, 0,
	  NULL, NULL, NULL,
	  "log to syslog instead of stderr" },
	{ "log-file", OPT_STR, O(log_file), 0, 0,
	  "FILE", NULL, NULL,
	  "append log lines to FILE; SIGHUP reopens it" },
	{ "log-format", OPT_SPECIAL, 0, 0, 0,
	  "FORMAT", "text", NULL,
	  "text or json (one object a line)" },
	{ "config", OPT_STR, O(config_file), 0, 0,
	  "FILE", NULL, NULL,
	  "INI file with a [mount] section; the command line overrides it" },
	{ "metrics", OPT_STR, O(metrics_addr), 0, 0,
	  "IP:PORT", NULL, "off",
	  "Prometheus metrics at http://IP:PORT/metrics" },
	{ "memory-limit", OPT_SIZE, O(memory_limit), 0, 0,
	  "SIZE", "256M", NULL,
	  "chunk and control buffers in memory" },
	{ "control-group", OPT_SPECIAL, 0, 0, 0,
	  "GROUP", NULL, "none",
	  "may pin, evict, warm and replace others' lists (docs/control-access.md)" },
	{ "user-lists", OPT_UINT, O(user_lists), 1, 4096,
	  "N", "8", NULL,
	  "list names each other user may create" },
	{ "user-buffers", OPT_UINT, O(user_buffers), 1, 1024,
	  "N", "16", NULL,
	  "control files each other user may hold open" },
	{ "user-opens", OPT_UINT, O(user_opens), 1, 1000000,
	  "N", "4096", NULL,
	  "files of the dataset each other user may hold open" },
	{ "pin-max", OPT_UINT, O(pin_max_pct), 1, 100,
	  "PERCENT", "50", NULL,
	  "largest share of the cache pinned files may take" },
};

static int opt_apply(struct fusefs_conf *cf, const struct opt *o,
		     const char *val);

/* the table's defaults go through the parsers a user's value does */
void conf_init(struct fusefs_conf *cf)
{
	size_t i;

	memset(cf, 0, sizeof(*cf));
	for (i = 0; i < ARRAY_SIZE(opts); i++)
		if (opts[i].def)
			opt_apply(cf, &opts[i], opts[i].def);	/* checked by test_conf */
	cf->cache_size_given = false;	/* only a user's --cache-size sets it */
	cf->uid = getuid();
	cf->gid = getgid();
	cf->control_gid = (gid_t)-1;
}

void conf_release(struct fusefs_conf *cf)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(opts); i++)
		if (opts[i].kind == OPT_STR)
			free(*(char **)((char *)cf + opts[i].off));
	free(cf->source);
	free(cf->cache_dir_at);
	free(cf->mountpoint);
	free(cf->kernel_opts);
	free(cf->control_group);
}

int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	case '\0': break;
	default: return -EINVAL;
	}
	if (*end == 'i' || *end == 'I')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int parse_uint(const char *s, unsigned base, unsigned long *out)
{
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	*out = strtoul(s, &end, base);
	if (errno || *end)
		return -EINVAL;
	return 0;
}

/* "cache_dir" and "cache-dir" name the same option */
static const struct opt *opt_find(const char *key, size_t len)
{
	size_t i, j;

	for (i = 0; i < ARRAY_SIZE(opts); i++) {
		const char *n = opts[i].name;

		if (strlen(n) != len)
			continue;
		for (j = 0; j < len; j++)
			if (n[j] != key[j] && !(n[j] == '-' && key[j] == '_'))
				break;
		if (j == len)
			return &opts[i];
	}
	return NULL;
}

int conf_takes_value(const char *key)
{
	const struct opt *o = opt_find(key, strlen(key));

	if (!o)
		return -ENOENT;
	return o->kind != OPT_FLAG;
}

static int bad(const char *key, const char *val, const char *why)
{
	fprintf(stderr, "fusefs: invalid value '%s' for option %s: %s\n",
		val ? val : "", key, why);
	return -EINVAL;
}

/* *@out = (@val is @yes), for an option whose value is @yes or @no */
static int set_either(const char *key, const char *val, const char *yes,
		      const char *no, bool *out)
{
	char why[64];

	if (val && (!strcmp(val, yes) || !strcmp(val, no))) {
		*out = !strcmp(val, yes);
		return 0;
	}
	snprintf(why, sizeof(why), "%s or %s", yes, no);
	return bad(key, val, why);
}

/* "200G" (at least 1M) or "90%" (1..100 of the cache file system) */
static int set_cache_size(struct fusefs_conf *cf, const struct opt *o,
			  const char *val)
{
	size_t n = strlen(val);
	unsigned long pct;
	uint64_t sz;

	if (n > 1 && val[n - 1] == '%') {
		char num[16];

		if (n - 1 >= sizeof(num))
			return bad(o->name, val, "a percentage from 1% to 100%");
		memcpy(num, val, n - 1);
		num[n - 1] = '\0';
		if (parse_uint(num, 10, &pct) || pct < 1 || pct > 100)
			return bad(o->name, val, "a percentage from 1% to 100%");
		cf->cache_size_pct = pct;
	} else {
		if (parse_size(val, &sz) || sz < (1U << 20))
			return bad(o->name, val, "a size such as 200G (>= 1M) or a percentage such as 90%");
		cf->cache_size = sz;
		cf->cache_size_pct = 0;
	}
	cf->cache_size_given = true;
	return 0;
}

/* --control-group: a group name or a numeric gid, resolved now */
static int set_control_group(struct fusefs_conf *cf, const char *key,
			     const char *val)
{
	struct group *g = getgrnam(val);
	unsigned long v;
	char *dup;

	if (g)
		v = g->gr_gid;
	else if (parse_uint(val, 10, &v) || v >= UINT32_MAX)
		return bad(key, val, "a group name or a numeric gid");
	dup = strdup(val);
	if (!dup)
		return -ENOMEM;
	free(cf->control_group);
	cf->control_group = dup;
	cf->control_gid = v;
	return 0;
}

static int set_special(struct fusefs_conf *cf, const struct opt *o,
		       const char *val)
{
	unsigned long v;
	uint64_t sz;

	if (!strcmp(o->name, "cache-size")) {
		return set_cache_size(cf, o, val);
	} else if (!strcmp(o->name, "chunk-size")) {
		if (parse_size(val, &sz) || sz < (1U << 20) || sz > (16U << 20) ||
		    (sz & (sz - 1)))
			return bad(o->name, val, "a power of two from 1M to 16M");
		cf->chunk_size = sz;
	} else if (!strcmp(o->name, "uid") || !strcmp(o->name, "gid")) {
		if (parse_uint(val, 10, &v) || v >= UINT32_MAX)
			return bad(o->name, val, "a numeric id");
		if (o->name[0] == 'u')
			cf->uid = v;
		else
			cf->gid = v;
	} else if (!strcmp(o->name, "umask")) {
		if (parse_uint(val, 8, &v) || v > 0777)
			return bad(o->name, val, "an octal mask like 022");
		cf->umask = v;
	} else if (!strcmp(o->name, "read-mode")) {
		if (!strcmp(val, "direct"))
			cf->read_mode = READ_DIRECT;
		else if (!strcmp(val, "buffered"))
			cf->read_mode = READ_BUFFERED;
		else if (!strcmp(val, "splice"))
			cf->read_mode = READ_SPLICE;
		else
			return bad(o->name, val, "direct, buffered or splice");
	} else if (!strcmp(o->name, "random-reads")) {
		return set_either(o->name, val, "pages", "chunks",
				  &cf->page_reads);
	} else if (!strcmp(o->name, "trust-clean-stop")) {
		return set_either(o->name, val, "on", "off", &cf->trust_stop);
	} else if (!strcmp(o->name, "passthrough")) {
		return set_either(o->name, val, "auto", "off",
				  &cf->passthrough);
	} else if (!strcmp(o->name, "control-group")) {
		return set_control_group(cf, o->name, val);
	} else if (!strcmp(o->name, "log-level")) {
		int l = log_parse_level(val);

		if (l < 0)
			return bad(o->name, val, "error, warn, info or debug");
		cf->log_level = l;
	} else if (!strcmp(o->name, "log-format")) {
		if (!val || (strcmp(val, "text") && strcmp(val, "json")))
			return bad(o->name, val, "text or json");
		cf->log_json = !strcmp(val, "json");
	}
	return 0;
}

static int opt_apply(struct fusefs_conf *cf, const struct opt *o,
		     const char *val)
{
	void *field = (char *)cf + o->off;
	unsigned long v;
	uint64_t sz;

	if (o->kind == OPT_FLAG) {
		if (val && *val)
			return bad(o->name, val, "this option takes no value");
		*(bool *)field = true;
		return 0;
	}
	if (!val || !*val)
		return bad(o->name, val, "a value is required");
	switch (o->kind) {
	case OPT_STR:
		free(*(char **)field);
		*(char **)field = strdup(val);
		return *(char **)field ? 0 : -ENOMEM;
	case OPT_SIZE:
		if (parse_size(val, &sz) || sz < (1U << 20))
			return bad(o->name, val, "a size such as 200G (>= 1M)");
		*(uint64_t *)field = sz;
		return 0;
	case OPT_UINT:
		if (parse_uint(val, 10, &v) || v < o->min || v > o->max) {
			char why[64];

			snprintf(why, sizeof(why), "a number from %u to %u",
				 o->min, o->max);
			return bad(o->name, val, why);
		}
		*(unsigned *)field = v;
		return 0;
	default:
		return set_special(cf, o, val);
	}
}

int conf_set(struct fusefs_conf *cf, const char *key, const char *val)
{
	const struct opt *o = opt_find(key, strlen(key));

	if (!o)
		return -ENOENT;
	return opt_apply(cf, o, val);
}

/* what a word of an -o list that is not a fusefs option is */
enum mount_word {
	MW_UNKNOWN,
	MW_KERNEL,		/* for the kernel's FUSE mount: libfuse's list */
	MW_UNSUPPORTED,		/* kernel options libfuse 3.14 cannot pass */
	MW_MTAB,		/* for mount(8), fstab, systemd: no effect here */
};

static enum mount_word mount_word(const char *key, size_t len)
{
	static const struct {
		const char *name;
		enum mount_word kind;
	} words[] = {
		{ "ro", MW_KERNEL }, { "rw", MW_KERNEL }, { "nosuid", MW_KERNEL },
		{ "suid", MW_KERNEL }, { "nodev", MW_KERNEL }, { "dev", MW_KERNEL },
		{ "noexec", MW_KERNEL }, { "exec", MW_KERNEL },
		{ "noatime", MW_KERNEL }, { "atime", MW_KERNEL },
		{ "sync", MW_KERNEL }, { "async", MW_KERNEL },
		{ "dirsync", MW_KERNEL }, { "default_permissions", MW_KERNEL },
		{ "auto_unmount", MW_KERNEL },
		{ "relatime", MW_UNSUPPORTED }, { "norelatime", MW_UNSUPPORTED },
		{ "strictatime", MW_UNSUPPORTED }, { "nostrictatime", MW_UNSUPPORTED },
		{ "lazytime", MW_UNSUPPORTED }, { "nolazytime", MW_UNSUPPORTED },
		{ "diratime", MW_UNSUPPORTED }, { "nodiratime", MW_UNSUPPORTED },
		{ "mand", MW_UNSUPPORTED }, { "nomand", MW_UNSUPPORTED },
		{ "silent", MW_UNSUPPORTED }, { "loud", MW_UNSUPPORTED },
		{ "remount", MW_UNSUPPORTED }, { "bind", MW_UNSUPPORTED },
		{ "move", MW_UNSUPPORTED },
		{ "defaults", MW_MTAB }, { "auto", MW_MTAB }, { "noauto", MW_MTAB },
		{ "user", MW_MTAB }, { "nouser", MW_MTAB }, { "users", MW_MTAB },
		{ "owner", MW_MTAB }, { "group", MW_MTAB }, { "_netdev", MW_MTAB },
		{ "nofail", MW_MTAB }, { "comment", MW_MTAB },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(words); i++)
		if (strlen(words[i].name) == len &&
		    !strncmp(words[i].name, key, len))
			return words[i].kind;
	return len > 2 && !strncmp(key, "x-", 2) ? MW_MTAB : MW_UNKNOWN;
}

/* one word of an -o list that is not a fusefs option: keep, skip or refuse */
static int mount_word_apply(const char *tok, size_t klen, bool has_value,
			    char *passthru, size_t len)
{
	switch (mount_word(tok, klen)) {
	case MW_KERNEL:
		if (has_value) {
			fprintf(stderr, "fusefs: mount option '%.*s' takes no value\n",
				(int)klen, tok);
			return -EINVAL;
		}
		if (!passthru || strlen(passthru) + klen + 2 > len) {
			fprintf(stderr, "fusefs: too many mount options at '%s'\n", tok);
			return -EINVAL;
		}
		if (*passthru)
			strcat(passthru, ",");
		strcat(passthru, tok);
		return 0;
	case MW_UNSUPPORTED:
		fprintf(stderr, "fusefs: mount option '%.*s' cannot be passed to a FUSE mount (libfuse 3.14); the supported ones are ro, rw, nosuid, suid, nodev, dev, noexec, exec, noatime, atime (relatime), sync, async, dirsync, default_permissions, allow_other, auto_unmount\n",
			(int)klen, tok);
		return -EINVAL;
	case MW_MTAB:
		return 0;	/* for mount(8) or systemd, which saw it already */
	default:
		fprintf(stderr, "fusefs: unknown mount option '%.*s' (neither a fusefs option nor a kernel mount option such as ro, nosuid, nodev, noexec, noatime)\n",
			(int)klen, tok);
		return -EINVAL;
	}
}

int conf_set_o(struct fusefs_conf *cf, const char *list, char *passthru,
	       size_t len)
{
	char *copy = strdup(list), *save = NULL, *tok;
	int rc = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ",", &save); tok && !rc;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		size_t klen = eq ? (size_t)(eq - tok) : strlen(tok);
		const struct opt *o = opt_find(tok, klen);

		if (o)
			rc = opt_apply(cf, o, eq ? eq + 1 : NULL);
		else
			rc = mount_word_apply(tok, klen, eq != NULL, passthru, len);
	}
	free(copy);
	return rc;
}

int conf_check(const struct fusefs_conf *cf)
{
	if (!cf->source) {
		fprintf(stderr, "fusefs: missing SOURCE (rados://POOL[/PREFIX] or s3://BUCKET[/PREFIX])\n");
		return -EINVAL;
	}
	if (!cf->mountpoint) {
		fprintf(stderr, "fusefs: missing MOUNTPOINT\n");
		return -EINVAL;
	}
	if (!cf->cache_dir) {
		fprintf(stderr, "fusefs: --cache-dir is required\n");
		return -EINVAL;
	}
	if (!cf->cache_size_pct && cf->cache_size < 4ULL * cf->chunk_size) {
		fprintf(stderr,
			"fusefs: --cache-size must hold at least 4 chunks (%u bytes)\n",
			4 * cf->chunk_size);
		return -EINVAL;
	}
	if (cf->snap && strncmp(cf->source, "rados://", 8)) {
		fprintf(stderr, "fusefs: --snap applies to rados:// sources only\n");
		return -EINVAL;
	}
	if (cf->memory_limit < 4ULL * cf->chunk_size) {
		fprintf(stderr,
			"fusefs: --memory-limit must hold at least 4 chunks (%u bytes)\n",
			4 * cf->chunk_size);
		return -EINVAL;
	}
	return 0;
}

void conf_usage(FILE *f)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(opts); i++) {
		const struct opt *o = &opts[i];
		const char *def = o->def ? o->def : o->def_text;
		char head[64];

		snprintf(head, sizeof(head), "--%s%s%s", o->name,
			 o->arg ? " " : "", o->arg ? o->arg : "");
		fprintf(f, "  %-20s %s", head, o->help);
		if (def)
			fprintf(f, " (default %s)", def);
		fputc('\n', f);
	}
	fprintf(f, "Every option also has an -o form: -o cache_dir=DIR,allow_other\n");
}
