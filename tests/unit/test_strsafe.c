// SPDX-License-Identifier: MIT
/* hostile names: escaping for logs and TSV (strsafe.c), seeded hash homes (htab.c) */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "htab.h"
#include "strsafe.h"
#include "runner.h"

static void test_esc(void)
{
	const char raw[] = "a\nb\tc\x1b[31m\\d\x7f\xc3\xa9";
	char out[128];
	size_t n = str_esc(out, sizeof(out), raw, sizeof(raw) - 1);

	CHECK_STR(out, "a\\x0ab\\x09c\\x1b[31m\\\\d\\x7f\xc3\xa9");
	CHECK_INT(n, ==, strlen(out));
	/* a NUL inside the bytes is escaped too */
	n = str_esc(out, sizeof(out), "x\0y", 3);
	CHECK_STR(out, "x\\x00y");
	/* cut on a whole escape, never half of one; the needed length said */
	n = str_esc(out, 4, "ab\n", 3);
	CHECK_STR(out, "ab");
	CHECK_INT(n, ==, 6);
}

static void test_unesc_roundtrip(void)
{
	char raw[256], esc[1100], back[1100];
	ssize_t n;
	int i;

	for (i = 0; i < 256; i++)
		raw[i] = (char)i;
	str_esc(esc, sizeof(esc), raw, sizeof(raw));
	CHECK(!memchr(esc, '\n', strlen(esc)) && !memchr(esc, '\t', strlen(esc)));
	n = str_unesc(back, esc, strlen(esc));
	CHECK_INT(n, ==, 256);
	CHECK(n == 256 && !memcmp(back, raw, 256));
	/* malformed escapes are refused, not guessed */
	CHECK_INT(str_unesc(back, "a\\", 2), ==, -EINVAL);
	CHECK_INT(str_unesc(back, "a\\x4", 4), ==, -EINVAL);
	CHECK_INT(str_unesc(back, "a\\q00", 5), ==, -EINVAL);
	CHECK_INT(str_unesc(back, "a\\xg0", 5), ==, -EINVAL);
}

static void test_log(void)
{
	char big[2000];
	const char *a, *b;

	a = str_log("one\nline");
	b = str_log("two\r");
	CHECK_STR(a, "one\\x0aline");	/* two in one call stay distinct */
	CHECK_STR(b, "two\\x0d");
	memset(big, '\n', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	a = str_log(big);
	CHECK(strlen(a) <= 520);
	CHECK(strlen(a) > 3 && !strcmp(a + strlen(a) - 3, "..."));
	CHECK(!strchr(a, '\n'));
	CHECK_STR(str_log_n("ab\ncd", 3), "ab\\x0a");
	CHECK_STR(str_log(NULL), "(null)");
}

struct item {
	uint64_t key;
};

static uint64_t item_key(const void *p)
{
	return ((const struct item *)p)->key;
}

/* the inverse of the unseeded home() mix fusefs used before: keys whose
 * mixed values share their low bits all had the same home slot */
static uint64_t unmix(uint64_t m)
{
	uint64_t inv = 0x7fb5d329728ea185ULL, x;
	int i;

	/* inverse of an odd multiplier mod 2^64 by Newton's iteration */
	for (x = inv, i = 0; i < 6; i++)
		x *= 2 - inv * x;
	m ^= m >> 27 ^ m >> 54;
	m *= x;
	m ^= m >> 31 ^ m >> 62;
	return m;
}

/* longest run of occupied slots */
static size_t longest_cluster(const struct htab *h)
{
	size_t i, run = 0, best = 0;

	for (i = 0; i < 2 * h->cap; i++) {
		run = h->slot[i & (h->cap - 1)] ? run + 1 : 0;
		if (run > best)
			best = run;
	}
	return best;
}

static void test_htab_seeded(void)
{
	enum { N = 1000 };
	struct item *it = calloc(N, sizeof(*it));
	struct htab h;
	size_t i;

	htab_init(&h, item_key);
	for (i = 0; i < N; i++) {
		/* chosen keys: the old mix sent every one to slot 0 */
		it[i].key = unmix((uint64_t)(i + 1) << 20);
		CHECK_INT(htab_put(&h, &it[i]), ==, 0);
	}
	for (i = 0; i < N; i++)
		CHECK(htab_get(&h, it[i].key) == &it[i]);
	/* one cluster of 1000 without the seed; at load < 1/2 random homes
	 * make runs of a few dozen at most */
	CHECK_INT(longest_cluster(&h), <, 200);
	htab_release(&h);
	free(it);
}

int main(void)
{
	runner_name = "test_strsafe";
	TEST(test_esc);
	TEST(test_unesc_roundtrip);
	TEST(test_log);
	TEST(test_htab_seeded);
	return runner_done();
}
