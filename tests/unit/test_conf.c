// SPDX-License-Identifier: MIT
/*
 * conf.c: the defaults conf_init() takes from the option table (the values
 * the daemon had before the table held them), what --help shows of them,
 * both spellings of a key, every kind's bounds and refusals, -o lists
 * (kernel words kept, mount(8) words skipped, the rest refused),
 * parse_size() and conf_check()'s final refusals.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "conf.h"
#include "runner.h"

/* a mount that conf_check() accepts */
static void valid(struct fusefs_conf *cf)
{
	conf_init(cf);
	CHECK_INT(conf_set(cf, "cache-dir", "/tmp/c"), ==, 0);
	cf->source = strdup("file:///src");
	cf->mountpoint = strdup("/mnt");
}

static void test_defaults(void)
{
	struct fusefs_conf cf;

	conf_init(&cf);
	CHECK_INT(cf.cache_size, ==, 10ULL << 30);
	CHECK(!cf.cache_size_given);
	CHECK_INT(cf.cache_size_pct, ==, 0);
	CHECK_INT(cf.chunk_size, ==, 4U << 20);
	CHECK_INT(cf.uid, ==, getuid());
	CHECK_INT(cf.gid, ==, getgid());
	CHECK_INT(cf.umask, ==, 022);
	CHECK_INT(cf.revalidate_s, ==, 60);
	CHECK_INT(cf.list_refresh_s, ==, 300);
	CHECK_INT(cf.readahead, ==, 8);
	CHECK_INT(cf.max_inflight, ==, 32);
	CHECK_INT(cf.ahead_ms, ==, 50);
	CHECK_INT(cf.verify_depth, ==, 8);
	CHECK_INT(cf.retries, ==, 3);
	CHECK_INT(cf.op_timeout_s, ==, 15);
	CHECK_INT(cf.connect_timeout_s, ==, 15);
	CHECK_INT(cf.max_threads, ==, 32);
	CHECK_INT(cf.read_mode, ==, READ_DIRECT);
	CHECK(cf.passthrough);
	CHECK(cf.evict && !strcmp(cf.evict, "auto"));
	CHECK_INT(cf.heat_half_life_s, ==, 7 * 86400);
	CHECK_INT(cf.list_idle_s, ==, 300);
	CHECK_INT(cf.rewarm, ==, 0);
	CHECK_INT(cf.log_level, ==, LOG_INFO);
	CHECK(!cf.log_json);
	CHECK_INT(cf.memory_limit, ==, 256ULL << 20);
	CHECK_INT(cf.control_gid, ==, (gid_t)-1);
	CHECK_INT(cf.user_lists, ==, 8);
	CHECK_INT(cf.user_buffers, ==, 16);
	CHECK_INT(cf.pin_max_pct, ==, 50);
	/* no flag set, no string but the policy */
	CHECK(!cf.allow_other && !cf.foreground && !cf.s3_virtual_host);
	CHECK(!cf.source && !cf.cache_dir && !cf.ceph_id && !cf.metrics_addr &&
	      !cf.control_group);
	conf_release(&cf);
}

/* the line of --help for @opt ("--readahead "), or NULL */
static char *help_line(const char *help, const char *opt, char *out,
		       size_t len)
{
	const char *p = strstr(help, opt);
	size_t n;

	if (!p)
		return NULL;
	n = strcspn(p, "\n");
	if (n >= len)
		return NULL;
	memcpy(out, p, n);
	out[n] = '\0';
	return out;
}

static void test_help_shows_the_defaults(void)
{
	char *help = NULL, line[512];
	size_t len = 0;
	FILE *f = open_memstream(&help, &len);

	CHECK(f != NULL);
	conf_usage(f);
	fclose(f);
	CHECK(help_line(help, "  --readahead CHUNKS ", line, sizeof(line)));
	CHECK(strstr(line, "(default 8)") != NULL);
	CHECK(help_line(help, "  --cache-size SIZE ", line, sizeof(line)));
	CHECK(strstr(line, "(default 10G)") != NULL);
	CHECK(help_line(help, "  --log-level LEVEL ", line, sizeof(line)));
	CHECK(strstr(line, "(default info)") != NULL);
	CHECK(help_line(help, "  --id NAME ", line, sizeof(line)));
	CHECK(strstr(line, "(default admin)") != NULL);
	/* a flag shows no value, an option without a default none */
	CHECK(help_line(help, "  --allow-other ", line, sizeof(line)));
	CHECK(!strstr(line, "(default"));
	CHECK(help_line(help, "  --keyring FILE ", line, sizeof(line)));
	CHECK(!strstr(line, "(default"));
	CHECK(strstr(help, "-o cache_dir=DIR") != NULL);
	free(help);
}

static void test_set_both_spellings(void)
{
	struct fusefs_conf cf;

	conf_init(&cf);
	CHECK_INT(conf_set(&cf, "cache-dir", "/a"), ==, 0);
	CHECK_STR(cf.cache_dir, "/a");
	CHECK_INT(conf_set(&cf, "cache_dir", "/b"), ==, 0);
	CHECK_STR(cf.cache_dir, "/b");
	CHECK_INT(conf_set(&cf, "max_inflight", "7"), ==, 0);
	CHECK_INT(cf.max_inflight, ==, 7);
	CHECK_INT(conf_set(&cf, "no-such-option", "1"), ==, -ENOENT);
	CHECK_INT(conf_set(&cf, "cache", "/c"), ==, -ENOENT);	/* no prefix match */
	CHECK_INT(conf_takes_value("allow_other"), ==, 0);
	CHECK_INT(conf_takes_value("cache-size"), ==, 1);
	CHECK_INT(conf_takes_value("nope"), ==, -ENOENT);
	conf_release(&cf);
}

static void test_set_refusals(void)
{
	struct fusefs_conf cf;

	conf_init(&cf);
	/* flags take no value, the others need one */
	CHECK_INT(conf_set(&cf, "allow-other", "yes"), ==, -EINVAL);
	CHECK(!cf.allow_other);
	CHECK_INT(conf_set(&cf, "allow-other", NULL), ==, 0);
	CHECK(cf.allow_other);
	CHECK_INT(conf_set(&cf, "cache-dir", NULL), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "cache-dir", ""), ==, -EINVAL);
	/* numbers: bounds inclusive, garbage refused, the old value kept */
	CHECK_INT(conf_set(&cf, "readahead", "64"), ==, 0);
	CHECK_INT(conf_set(&cf, "readahead", "65"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "readahead", "-1"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "readahead", "8x"), ==, -EINVAL);
	CHECK_INT(cf.readahead, ==, 64);
	CHECK_INT(conf_set(&cf, "max-inflight", "0"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "max-threads", "1"), ==, -EINVAL);
	/* chunk size: a power of two from 1M to 16M */
	CHECK_INT(conf_set(&cf, "chunk-size", "3M"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "chunk-size", "32M"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "chunk-size", "512K"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "chunk-size", "1M"), ==, 0);
	CHECK_INT(cf.chunk_size, ==, 1U << 20);
	/* cache size: a size of at least 1M, or 1..100% */
	CHECK_INT(conf_set(&cf, "cache-size", "512K"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "cache-size", "0%"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "cache-size", "101%"), ==, -EINVAL);
	CHECK(!cf.cache_size_given);
	CHECK_INT(conf_set(&cf, "cache-size", "90%"), ==, 0);
	CHECK_INT(cf.cache_size_pct, ==, 90);
	CHECK(cf.cache_size_given);
	CHECK_INT(conf_set(&cf, "cache-size", "2G"), ==, 0);
	CHECK_INT(cf.cache_size, ==, 2ULL << 30);
	CHECK_INT(cf.cache_size_pct, ==, 0);
	/* the enumerations */
	CHECK_INT(conf_set(&cf, "umask", "0778"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "umask", "027"), ==, 0);
	CHECK_INT(cf.umask, ==, 027);
	CHECK_INT(conf_set(&cf, "read-mode", "mmap"), ==, -EINVAL);
	CHECK(cf.trust_stop);		/* the default */
	CHECK_INT(conf_set(&cf, "trust-clean-stop", "maybe"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "trust-clean-stop", "off"), ==, 0);
	CHECK(!cf.trust_stop);
	CHECK_INT(conf_set(&cf, "read-mode", "splice"), ==, 0);
	CHECK_INT(cf.read_mode, ==, READ_SPLICE);
	CHECK_INT(conf_set(&cf, "passthrough", "on"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "passthrough", "off"), ==, 0);
	CHECK(!cf.passthrough);
	CHECK_INT(conf_set(&cf, "log-level", "loud"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "log-level", "debug"), ==, 0);
	CHECK_INT(cf.log_level, ==, LOG_DEBUG);
	CHECK_INT(conf_set(&cf, "log-format", "xml"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "log-format", "json"), ==, 0);
	CHECK(cf.log_json);
	CHECK_INT(conf_set(&cf, "memory-limit", "100K"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "control-group", "no such group!"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "control-group", "4242"), ==, 0);
	CHECK_INT(cf.control_gid, ==, 4242);
	conf_release(&cf);
}

static void test_parse_size(void)
{
	uint64_t v = 7;

	CHECK_INT(parse_size("1048576", &v), ==, 0);
	CHECK_INT(v, ==, 1048576);
	CHECK_INT(parse_size("512k", &v), ==, 0);
	CHECK_INT(v, ==, 512 << 10);
	CHECK_INT(parse_size("4M", &v), ==, 0);
	CHECK_INT(v, ==, 4 << 20);
	CHECK_INT(parse_size("200GiB", &v), ==, 0);
	CHECK_INT(v, ==, 200ULL << 30);
	CHECK_INT(parse_size("2tb", &v), ==, 0);
	CHECK_INT(v, ==, 2ULL << 40);
	v = 7;
	CHECK_INT(parse_size("", &v), ==, -EINVAL);
	CHECK_INT(parse_size(NULL, &v), ==, -EINVAL);
	CHECK_INT(parse_size("-1", &v), ==, -EINVAL);
	CHECK_INT(parse_size("1X", &v), ==, -EINVAL);
	CHECK_INT(parse_size("1MB ", &v), ==, -EINVAL);
	CHECK_INT(parse_size("16777216T", &v), ==, -EINVAL);	/* 2^64 */
	CHECK_INT(parse_size("99999999999999999999", &v), ==, -EINVAL);
	CHECK_INT(v, ==, 7);		/* untouched on error */
	CHECK_INT(parse_size("16777215T", &v), ==, 0);
	CHECK_INT(v, ==, 16777215ULL << 40);
}

static void test_set_o(void)
{
	struct fusefs_conf cf;
	char pass[64] = "", tiny[8] = "";

	conf_init(&cf);
	CHECK_INT(conf_set_o(&cf, "cache_dir=/x,allow_other,ro,noexec,defaults,"
			     "_netdev,x-systemd.automount", pass, sizeof(pass)),
		  ==, 0);
	CHECK_STR(cf.cache_dir, "/x");
	CHECK(cf.allow_other);
	CHECK_STR(pass, "ro,noexec");	/* for the kernel; the rest skipped */
	CHECK_INT(conf_set_o(&cf, "relatime", pass, sizeof(pass)), ==, -EINVAL);
	CHECK_INT(conf_set_o(&cf, "bogus", pass, sizeof(pass)), ==, -EINVAL);
	CHECK_INT(conf_set_o(&cf, "ro=1", pass, sizeof(pass)), ==, -EINVAL);
	CHECK_INT(conf_set_o(&cf, "readahead=99", pass, sizeof(pass)), ==,
		  -EINVAL);
	CHECK_STR(pass, "ro,noexec");
	/* no room for the kernel's words: refused, not cut */
	CHECK_INT(conf_set_o(&cf, "nosuid,nodev", tiny, sizeof(tiny)), ==,
		  -EINVAL);
	conf_release(&cf);
}

static void test_check(void)
{
	struct fusefs_conf cf;

	valid(&cf);
	CHECK_INT(conf_check(&cf), ==, 0);
	conf_release(&cf);

	conf_init(&cf);		/* no source, no mount point, no cache dir */
	CHECK_INT(conf_check(&cf), ==, -EINVAL);
	conf_release(&cf);

	valid(&cf);		/* fewer than 4 chunks of cache */
	CHECK_INT(conf_set(&cf, "cache-size", "15M"), ==, 0);
	CHECK_INT(conf_check(&cf), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "cache-size", "16M"), ==, 0);
	CHECK_INT(conf_check(&cf), ==, 0);
	CHECK_INT(conf_set(&cf, "cache-size", "1%"), ==, 0);	/* at mount */
	CHECK_INT(conf_check(&cf), ==, 0);
	conf_release(&cf);

	valid(&cf);		/* memory for fewer than 4 chunks */
	CHECK_INT(conf_set(&cf, "memory-limit", "15M"), ==, 0);
	CHECK_INT(conf_check(&cf), ==, -EINVAL);
	conf_release(&cf);

	valid(&cf);		/* --snap on a source other than rados:// */
	CHECK_INT(conf_set(&cf, "snap", "s1"), ==, 0);
	CHECK_INT(conf_check(&cf), ==, -EINVAL);
	free(cf.source);
	cf.source = strdup("rados://pool");
	CHECK_INT(conf_check(&cf), ==, 0);
	conf_release(&cf);
}

int main(void)
{
	runner_name = "test_conf";
	TEST(test_defaults);
	TEST(test_help_shows_the_defaults);
	TEST(test_set_both_spellings);
	TEST(test_set_refusals);
	TEST(test_parse_size);
	TEST(test_set_o);
	TEST(test_check);
	return runner_done();
}
