// SPDX-License-Identifier: MIT
/* index encoding (recfmt.c), conf parsing and the hash table */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "htab.h"
#include "recfmt.h"
#include "runner.h"

static void test_file_rec(void)
{
	struct file_rec r = { .size = 123456789012ULL, .mtime = -5,
			      .chunk_size = 4 << 20 }, out;
	uint8_t buf[FILE_REC_MAX];
	size_t n;

	strcpy(r.version, "\"d41d8cd98f00b204e9800998ecf8427e-12\"");
	n = file_rec_encode(buf, &r);
	CHECK_INT(file_rec_decode(buf, n, &out), ==, 0);
	CHECK_INT(out.size, ==, r.size);
	CHECK_INT(out.mtime, ==, -5);
	CHECK_INT(out.chunk_size, ==, 4 << 20);
	CHECK_STR(out.version, r.version);
	/* damaged records are rejected, not trusted */
	CHECK_INT(file_rec_decode(buf, n - 1, &out), ==, -EINVAL);
	CHECK_INT(file_rec_decode(buf, 10, &out), ==, -EINVAL);
	buf[0] = 9;
	CHECK_INT(file_rec_decode(buf, n, &out), ==, -EINVAL);
}

static void test_chunk_rec(void)
{
	struct chunk_rec r = { .len = 4194304, .sum = 0x0123456789abcdefULL,
			       .gen = 77 }, out;
	uint8_t buf[CHUNK_REC_LEN];

	CHECK_INT(chunk_rec_encode(buf, &r), ==, CHUNK_REC_LEN);
	CHECK_INT(chunk_rec_decode(buf, CHUNK_REC_LEN, &out), ==, 0);
	CHECK_INT(out.len, ==, r.len);
	CHECK(out.sum == r.sum);
	CHECK_INT(out.gen, ==, 77);
	CHECK_INT(chunk_rec_decode(buf, CHUNK_REC_LEN - 1, &out), ==, -EINVAL);
}

static void test_keys_sort(void)
{
	uint8_t a[CHUNK_KEY_LEN], b[CHUNK_KEY_LEN];
	uint64_t fid;
	uint32_t n;

	/* big-endian: (fid, n) order is byte order, as LMDB sorts */
	chunk_key(a, 1, 300);
	chunk_key(b, 2, 0);
	CHECK(memcmp(a, b, CHUNK_KEY_LEN) < 0);
	chunk_key(b, 1, 301);
	CHECK(memcmp(a, b, CHUNK_KEY_LEN) < 0);
	chunk_from_key(a, &fid, &n);
	CHECK_INT(fid, ==, 1);
	CHECK_INT(n, ==, 300);
	fid_key(a, 0xfeedfacecafebeefULL);
	CHECK(fid_from_key(a) == 0xfeedfacecafebeefULL);
}

static void test_attr_heat(void)
{
	struct ns_attr a = { .size = 5, .mtime = 6, .mtime_nsec = 7,
			     .checked = 8 }, ao;
	struct heat_rec h = { .count = 3, .last = 1700000000, .bytes = 99 }, ho;
	uint8_t buf[ATTR_REC_MAX];
	size_t n;

	strcpy(a.version, "12345");
	n = attr_rec_encode(buf, &a);
	CHECK_INT(attr_rec_decode(buf, n, &ao), ==, 0);
	CHECK_INT(ao.size, ==, 5);
	CHECK_INT(ao.mtime_nsec, ==, 7);
	CHECK_INT(ao.checked, ==, 8);
	CHECK_STR(ao.version, "12345");
	CHECK_INT(heat_rec_encode(buf, &h), ==, HEAT_REC_LEN);
	CHECK_INT(heat_rec_decode(buf, HEAT_REC_LEN, &ho), ==, 0);
	CHECK_INT(ho.count, ==, 3);
	CHECK_INT(ho.last, ==, 1700000000);
	CHECK_INT(ho.bytes, ==, 99);
	CHECK(version_gen("1", 10) != version_gen("2", 10));
	CHECK(version_gen("1", 10) != version_gen("1", 11));
	CHECK(version_gen("1", 10) == version_gen("1", 10));
}

/* fuzz_recfmt: a NUL inside the stored version was accepted, and the
 * record read back as a shorter version than it holds */
static void test_version_with_nul(void)
{
	struct file_rec r = { .size = 7 }, out;
	struct ns_attr a = { .size = 7 }, ao;
	uint8_t buf[ATTR_REC_MAX];
	size_t n;

	strcpy(r.version, "abcde");
	n = file_rec_encode(buf, &r);
	buf[n - 3] = '\0';		/* "ab\0de" */
	CHECK_INT(file_rec_decode(buf, n, &out), ==, -EINVAL);
	strcpy(a.version, "x");
	n = attr_rec_encode(buf, &a);
	buf[n - 1] = '\0';
	CHECK_INT(attr_rec_decode(buf, n, &ao), ==, -EINVAL);
}

/* review: a stored record with a size no listing gives (over
 * NS_SIZE_MAX: st_size would be negative) or nanoseconds past a second
 * was read back as it was.  NS_SIZE_TOO_BIG is one a listing gives (an
 * object too large to open stays listed across a restart). */
static void test_attr_out_of_range(void)
{
	struct ns_attr a = { .size = NS_SIZE_MAX }, ao;
	uint8_t buf[ATTR_REC_MAX];
	size_t n;

	strcpy(a.version, "v");
	n = attr_rec_encode(buf, &a);
	CHECK_INT(attr_rec_decode(buf, n, &ao), ==, 0);
	a.size = NS_SIZE_TOO_BIG;
	n = attr_rec_encode(buf, &a);
	CHECK_INT(attr_rec_decode(buf, n, &ao), ==, 0);
	CHECK_INT(ao.size, ==, NS_SIZE_TOO_BIG);
	a.size = NS_SIZE_TOO_BIG + 1;
	n = attr_rec_encode(buf, &a);
	CHECK_INT(attr_rec_decode(buf, n, &ao), ==, -EINVAL);
	a.size = UINT64_MAX;
	n = attr_rec_encode(buf, &a);
	CHECK_INT(attr_rec_decode(buf, n, &ao), ==, -EINVAL);
	a.size = 1;
	a.mtime_nsec = 1000000000;
	n = attr_rec_encode(buf, &a);
	CHECK_INT(attr_rec_decode(buf, n, &ao), ==, -EINVAL);
}

static void test_sizes(void)
{
	uint64_t v;

	CHECK_INT(parse_size("200G", &v), ==, 0);
	CHECK(v == 200ULL << 30);
	CHECK_INT(parse_size("4M", &v), ==, 0);
	CHECK_INT(v, ==, 4 << 20);
	CHECK_INT(parse_size("4MiB", &v), ==, 0);
	CHECK_INT(parse_size("1048576", &v), ==, 0);
	CHECK_INT(v, ==, 1048576);
	CHECK_INT(parse_size("", &v), ==, -EINVAL);
	CHECK_INT(parse_size("-1G", &v), ==, -EINVAL);
	CHECK_INT(parse_size("12Q", &v), ==, -EINVAL);
	CHECK_INT(parse_size("99999999999T", &v), ==, -EINVAL);
}

static void test_conf(void)
{
	struct fusefs_conf cf;
	char pass[128] = "";

	conf_init(&cf);
	CHECK_INT(conf_set(&cf, "cache-dir", "/x"), ==, 0);
	CHECK_INT(conf_set_o(&cf, "cache_size=2G,chunk_size=8M,allow_other,ro,noatime",
			     pass, sizeof(pass)), ==, 0);
	CHECK_STR(cf.cache_dir, "/x");
	CHECK(cf.cache_size == 2ULL << 30);
	CHECK_INT(cf.chunk_size, ==, 8 << 20);
	CHECK(cf.allow_other);
	CHECK_STR(pass, "ro,noatime");
	CHECK_INT(conf_set(&cf, "chunk-size", "3M"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "chunk-size", "32M"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "readahead", "-1"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "no-such", "1"), ==, -ENOENT);
	CHECK_INT(conf_set_o(&cf, "bogus=1", pass, sizeof(pass)), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "umask", "027"), ==, 0);
	CHECK_INT(cf.umask, ==, 027);
	CHECK_INT(conf_set(&cf, "allow-other", "yes"), ==, -EINVAL);
	/* --cache-size N%; kernel options kept, mount(8)-only ones dropped */
	CHECK_INT(conf_set(&cf, "cache-size", "90%"), ==, 0);
	CHECK_INT(cf.cache_size_pct, ==, 90);
	CHECK(cf.cache_size_given);
	CHECK_INT(conf_set(&cf, "cache-size", "0%"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "cache-size", "101%"), ==, -EINVAL);
	CHECK_INT(conf_set(&cf, "cache-size", "2G"), ==, 0);
	CHECK_INT(cf.cache_size_pct, ==, 0);
	pass[0] = '\0';
	CHECK_INT(conf_set_o(&cf, "_netdev,nofail,defaults,x-systemd.automount,rw,ro,nonempty",
			     pass, sizeof(pass)), ==, 0);
	CHECK_STR(pass, "rw,ro");
	CHECK(cf.nonempty);
	CHECK_INT(conf_set_o(&cf, "relatime", pass, sizeof(pass)), ==, -EINVAL);
	CHECK_INT(conf_set_o(&cf, "ro=1", pass, sizeof(pass)), ==, -EINVAL);
	conf_release(&cf);
}

struct item {
	uint64_t key;
};

static uint64_t item_key(const void *p)
{
	return ((const struct item *)p)->key;
}

static void test_htab(void)
{
	struct htab h;
	struct item *items = calloc(5000, sizeof(*items));
	int i, missing = 0;

	htab_init(&h, item_key);
	for (i = 0; i < 5000; i++) {
		items[i].key = (uint64_t)i * 1024;	/* clustered keys */
		CHECK_INT(htab_put(&h, &items[i]), ==, 0);
	}
	for (i = 0; i < 5000; i += 2)
		CHECK(htab_del(&h, (uint64_t)i * 1024) == &items[i]);
	for (i = 0; i < 5000; i++)
		missing += (htab_get(&h, (uint64_t)i * 1024) == NULL) != (i % 2 == 0);
	CHECK_INT(missing, ==, 0);
	CHECK_INT(h.used, ==, 2500);
	htab_release(&h);
	free(items);
}

static int items_freed;

static void item_free(void *p)
{
	items_freed++;
	free(p);
}

/* htab_free(): each item once, then the table (ASan sees any leak) */
static void test_htab_free(void)
{
	struct htab h;
	int i;

	htab_init(&h, item_key);
	for (i = 0; i < 100; i++) {
		struct item *it = malloc(sizeof(*it));

		it->key = (uint64_t)i * 7;
		CHECK_INT(htab_put(&h, it), ==, 0);
	}
	free(htab_del(&h, 7));
	htab_free(&h, item_free);
	CHECK_INT(items_freed, ==, 99);
	CHECK(h.slot == NULL && h.cap == 0);
}

/*
 * A stored value of format 2 is sealed over its key and bytes: every
 * single flipped bit, a shorter value and another key are refused; a
 * format 1 value (written before seals) is taken whole.
 */
static void test_seal(void)
{
	struct file_rec r = { 4096, 1700000000, 1 << 20, "v-17" }, out;
	uint8_t key[FID_KEY_LEN], other[FID_KEY_LEN];
	uint8_t buf[FILE_REC_MAX + RECFMT_SEAL], bad[sizeof(buf)];
	size_t n, body, i;
	int bit;

	fid_key(key, 42);
	fid_key(other, 43);
	n = file_rec_encode(buf, &r);
	CHECK_INT(buf[0], ==, RECFMT_V2);
	n = rec_seal(buf, n, key, sizeof(key));
	CHECK_INT(rec_unseal(buf, n, buf[0], key, sizeof(key), &body), ==, 0);
	CHECK_INT(body, ==, n - RECFMT_SEAL);
	CHECK_INT(file_rec_decode(buf, body, &out), ==, 0);
	CHECK_STR(out.version, "v-17");
	for (i = 0; i < n; i++)
		for (bit = 0; bit < 8; bit++) {
			memcpy(bad, buf, n);
			bad[i] ^= 1 << bit;
			/* a format byte flipped to 1 is taken whole: the
			 * seal's bytes then make it too long to decode */
			if (rec_unseal(bad, n, bad[0], key, sizeof(key),
				       &body) == 0)
				CHECK_INT(file_rec_decode(bad, body, &out), ==,
					  -EINVAL);
		}
	CHECK_INT(rec_unseal(buf, n - 1, buf[0], key, sizeof(key), &body), ==,
		  -EINVAL);
	CHECK_INT(rec_unseal(buf, 3, buf[0], key, sizeof(key), &body), ==,
		  -EINVAL);
	CHECK_INT(rec_unseal(buf, n, buf[0], other, sizeof(other), &body), ==,
		  -EINVAL);
	/* format 1: as earlier versions wrote it, no seal */
	n = file_rec_encode(buf, &r);
	buf[0] = RECFMT_V1;
	CHECK_INT(rec_unseal(buf, n, buf[0], key, sizeof(key), &body), ==, 0);
	CHECK_INT(body, ==, n);
	CHECK_INT(file_rec_decode(buf, body, &out), ==, 0);
	CHECK_INT(out.size, ==, 4096);
	/* an unknown format */
	CHECK_INT(rec_unseal(buf, n, 3, key, sizeof(key), &body), ==, -EINVAL);
}

int main(void)
{
	runner_name = "test_recfmt";
	TEST(test_file_rec);
	TEST(test_chunk_rec);
	TEST(test_keys_sort);
	TEST(test_attr_heat);
	TEST(test_version_with_nul);
	TEST(test_attr_out_of_range);
	TEST(test_sizes);
	TEST(test_conf);
	TEST(test_htab);
	TEST(test_htab_free);
	TEST(test_seal);
	return runner_done();
}
