/* SPDX-License-Identifier: MIT */
/*
 * conf.h - everything a mount needs, with defaults and validation.
 *
 * Every option has a long form (--cache-dir DIR) and an -o form
 * (-o cache_dir=DIR); both go through conf_set(), so they cannot drift.
 * Errors name the option and the bad value and return -EINVAL.
 */
#ifndef FUSEFS_CONF_H
#define FUSEFS_CONF_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

enum read_mode {
	READ_BUFFERED,		/* pread from the cache file, reply_buf */
	READ_DIRECT,		/* O_DIRECT pread into an aligned buffer */
	READ_SPLICE,		/* fuse_reply_data() with the cache fd */
};

struct fusefs_conf {
	char *source;		/* rados://pool[/prefix], s3://bucket[/prefix], file:///dir */
	char *mountpoint;
	char *cache_dir;
	/* not an option: @cache_dir through the descriptor that
	 * cache_check_dir() holds (/proc/self/fd/N), for what opens by name
	 * (the index, the namespace image); NULL: @cache_dir */
	char *cache_dir_at;
	uint64_t cache_size;	/* bytes, hard bound on cached data */
	unsigned cache_size_pct;/* > 0: --cache-size N%, resolved at mount */
	bool cache_size_given;	/* --cache-size was set (else the default) */
	uint32_t chunk_size;	/* bytes, power of two, 1..16 MiB */
	char *ceph_conf;	/* NULL: librados default search */
	char *ceph_id;		/* client id without "client." */
	char *keyring;
	char *s3_endpoint;	/* http(s)://host[:port] */
	char *s3_region;
	char *s3_profile;
	char *s3_credentials_file;
	char *s3_ca_file;
	bool s3_virtual_host;
	/* S3: list each key's current version as "vid:ID" (not an option:
	 * set by `fusefs manifest create --versions`) */
	bool list_versions;
	uid_t uid;
	gid_t gid;
	mode_t umask;
	bool allow_other;
	bool nonempty;		/* -o nonempty: mount over a non-empty dir */
	char *kernel_opts;	/* ro,noexec,...: for the kernel's mount; or NULL */
	bool foreground;
	bool debug_fuse;
	unsigned revalidate_s;	/* object version re-check on open */
	unsigned list_refresh_s;/* namespace re-listing; 0 = never */
	unsigned readahead;	/* chunks fetched ahead of a sequential reader */
	unsigned max_inflight;	/* backend reads in flight */
	unsigned ahead_ms;	/* speculative reads: link time in flight */
	unsigned verify_depth;	/* background verifier reads in flight, 0: none */
	unsigned retries;	/* extra attempts after a failed backend read */
	unsigned op_timeout_s;	/* one backend operation */
	unsigned connect_timeout_s;
	unsigned max_threads;	/* FUSE worker threads */
	enum read_mode read_mode;
	bool passthrough;	/* --passthrough auto (true) or off */
	bool page_reads;	/* --random-reads pages (true) or chunks */
	bool trust_stop;	/* --trust-clean-stop on (true) or off */
	char *evict;		/* policy: lru, heat, auto */
	unsigned heat_half_life_s;
	unsigned list_idle_s;	/* a list without opens is idle after this */
	unsigned rewarm;	/* at mount, prefetch this many hottest files */
	int log_level;
	bool log_syslog;
	char *log_file;		/* append here; reopened on SIGHUP */
	bool log_json;		/* --log-format json (log_set_format()) */
	char *config_file;	/* INI file applied before the command line */
	char *metrics_addr;	/* IP:PORT of GET /metrics; NULL = off */
	char *manifest;		/* namespace from this manifest; NULL = list */
	char *snap;		/* RADOS pool snapshot to read; NULL = live */
	/* ---- memory bound and control-file access (docs/control-access.md) */
	uint64_t memory_limit;	/* bytes of chunk and control buffers */
	char *control_group;	/* may change shared state; NULL = none */
	gid_t control_gid;	/* resolved control_group; (gid_t)-1 none */
	unsigned user_lists;	/* list names per user outside the group */
	unsigned user_buffers;	/* open control files per such user */
	unsigned user_opens;	/* open dataset files per such user */
	unsigned pin_max_pct;	/* a pin request may cover this % of cache */
};

/* conf_init() - fill @cf with defaults (strings NULL). */
void conf_init(struct fusefs_conf *cf);
/* conf_release() - free the strings @cf owns. */
void conf_release(struct fusefs_conf *cf);

/*
 * conf_set() - set option @key (either "cache-dir" or "cache_dir") to
 * @val (NULL for flags).  Return: 0, -ENOENT if @key is unknown,
 * -EINVAL if @val is bad (message printed naming both).
 */
int conf_set(struct fusefs_conf *cf, const char *key, const char *val);
/* conf_takes_value() - 1 if @key needs a value, 0 if a flag, -ENOENT */
int conf_takes_value(const char *key);
/*
 * conf_set_o() - apply a comma-separated -o list.  Kernel mount options
 * (ro, nosuid, nodev, noexec, noatime, ...: the ones libfuse passes to
 * mount(2)) are appended to @passthru (a buffer of @len bytes) for the
 * caller to keep in cf->kernel_opts.  Options meant for mount(8), fstab
 * or systemd only (defaults, auto, noauto, user, users, _netdev, nofail,
 * x-*) are accepted and ignored.  Anything else is refused with a
 * message.  Return 0 or -EINVAL.
 */
int conf_set_o(struct fusefs_conf *cf, const char *list, char *passthru,
	       size_t len);
/* conf_check() - final validation (required options present). */
int conf_check(const struct fusefs_conf *cf);

/* parse_size() - "200G", "4M", "512k", "1048576" -> bytes; -EINVAL */
int parse_size(const char *s, uint64_t *out);
/* conf_usage() - the option list for --help. */
void conf_usage(FILE *f);

#endif
