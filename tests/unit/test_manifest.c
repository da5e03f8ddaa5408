// SPDX-License-Identifier: MIT
/*
 * manifest.c: entry lines (fields, percent-decoding, the limits on path,
 * size and version, the optional checksum, comments, CRLF), whole files
 * in plain text, gzip and zstd (told by their first bytes), the errors
 * that name NAME:LINE, a callback that stops the read, and entries
 * written by manifest_put() reading back the same.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "manifest.h"
#include "runner.h"

static char pathbuf[MANIFEST_PATH_MAX + 1];

/* manifest_parse_line() of a copy of @text; *@why set on -EINVAL */
static int parse(const char *text, struct manifest_entry *e, const char **why)
{
	static char line[MANIFEST_LINE_MAX + 64];
	size_t len = strlen(text);

	*why = NULL;
	memcpy(line, text, len + 1);
	return manifest_parse_line(line, len, e, pathbuf, why);
}

static void test_parse_line(void)
{
	struct manifest_entry e;
	const char *why;

	CHECK_INT(parse("a/b c\t10\t7", &e, &why), ==, -EINVAL);	/* raw space */
	CHECK_INT(parse("a/b%20c\t10\t7", &e, &why), ==, 0);
	CHECK_INT(e.len, ==, 5);
	CHECK(!memcmp(e.path, "a/b c", 5));
	CHECK_INT(e.attr.size, ==, 10);
	CHECK_STR(e.attr.version, "7");
	CHECK(!e.has_sum);
	CHECK_INT(parse("x\t0\t\"etag\"\txxh3:0123456789abcdef\r", &e, &why), ==, 0);
	CHECK(e.has_sum);
	CHECK_INT(e.xxh3, ==, 0x0123456789abcdefULL);
	CHECK_STR(e.attr.version, "\"etag\"");
	/* a NUL, decoded, is refused by the path rules */
	CHECK_INT(parse("a%00b\t1\t1", &e, &why), ==, -EINVAL);
	/* comments and blank lines */
	CHECK_INT(parse("", &e, &why), ==, 1);
	CHECK_INT(parse("# a comment", &e, &why), ==, 1);
	CHECK_INT(parse("\r", &e, &why), ==, 1);
}

static void test_parse_line_errors(void)
{
	static const char *const bad[] = {
		"onlypath",				/* too few fields */
		"p\t1",
		"p\t1\t2\txxh3:0000000000000000\textra",	/* too many */
		"\t1\t2",				/* empty path */
		"dir/\t1\t2",				/* a directory */
		"a/../b\t1\t2",
		"a//b\t1\t2",
		"a%2\t1\t2",				/* bad encoding */
		"a%zz\t1\t2",
		"p\t-1\t2",				/* size */
		"p\t1x\t2",
		"p\t\t2",
		"p\t17592186044417\t2",			/* 2^44 + 1 */
		"p\t1\t",				/* version */
		"p\t1\ta b",
		"p\t1\t123456789012345678901234567890123456789012345678",
		"p\t1\t2\txxh3:123",			/* checksum */
		"p\t1\t2\tmd5:0123456789abcdef",
		"p\t1\t2\txxh3:0123456789abcdeg",
	};
	struct manifest_entry e;
	const char *why;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], &e, &why);

		if (rc != -EINVAL)
			fprintf(stderr, "  accepted: %s\n", bad[i]);
		CHECK_INT(rc, ==, -EINVAL);
		CHECK(why != NULL && *why);
	}
	/* the limits themselves are fine */
	CHECK_INT(parse("p\t17592186044416\t2", &e, &why), ==, 0);
	CHECK_INT(parse("p\t1\t12345678901234567890123456789012345678901234567",
			&e, &why), ==, 0);
}

/* an fd holding @len bytes of @data, at offset 0 */
static int memfd(const void *data, size_t len)
{
	int fd = memfd_create("manifest", 0);

	CHECK(fd >= 0);
	CHECK_INT(write(fd, data, len), ==, (ssize_t)len);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

struct seen {
	unsigned n;
	unsigned long last_line;
	char paths[8][32];
	int stop_at;		/* > 0: return EEXIST at that entry */
};

static int collect(void *arg, const struct manifest_entry *e,
		   unsigned long lineno)
{
	struct seen *s = arg;

	if (s->n < 8 && e->len < sizeof(s->paths[0]))
		memcpy(s->paths[s->n], e->path, e->len);
	s->n++;
	s->last_line = lineno;
	return s->stop_at && (int)s->n == s->stop_at ? EEXIST : 0;
}

static const char text[] =
	MANIFEST_MAGIC "\n"
	"#source s3://b/p\n"
	"a/1\t10\tv1\n"
	"\n"
	"b/2\t20\tv2\txxh3:00000000000000ff\n"
	"c\t0\tv3";			/* no newline at the end */

/* manifest_read() of @len bytes of @data; the error text into @err */
static int read_bytes(const void *data, size_t len, struct seen *s, char *err,
		      size_t errlen)
{
	int fd = memfd(data, len), rc;

	rc = manifest_read(fd, "m", collect, s, err, errlen);
	close(fd);
	return rc;
}

static void test_read_plain(void)
{
	struct seen s = { 0 };
	char err[256];

	CHECK_INT(read_bytes(text, strlen(text), &s, err, sizeof(err)), ==, 0);
	CHECK_INT(s.n, ==, 3);
	CHECK_STR(s.paths[0], "a/1");
	CHECK_STR(s.paths[2], "c");
	CHECK_INT(s.last_line, ==, 6);
}

static void test_read_compressed(void)
{
	char gzpath[] = "/tmp/fusefs-unit-gz-XXXXXX", err[256], *gzdata;
	size_t zcap = ZSTD_compressBound(sizeof(text)), zlen;
	void *z = malloc(zcap);
	struct seen s = { 0 };
	gzFile gz;
	FILE *f;
	long n;
	int fd;

	/* zstd */
	zlen = ZSTD_compress(z, zcap, text, strlen(text), 3);
	CHECK(!ZSTD_isError(zlen));
	CHECK_INT(read_bytes(z, zlen, &s, err, sizeof(err)), ==, 0);
	CHECK_INT(s.n, ==, 3);
	/* truncated zstd: an error, not a shorter list */
	memset(&s, 0, sizeof(s));
	CHECK_INT(read_bytes(z, zlen - 4, &s, err, sizeof(err)), ==, -EINVAL);
	CHECK(strstr(err, "zstd") != NULL);
	free(z);

	/* gzip */
	fd = mkstemp(gzpath);
	CHECK(fd >= 0);
	gz = gzdopen(fd, "wb");
	CHECK(gz != NULL);
	CHECK_INT(gzwrite(gz, text, strlen(text)), ==, (int)strlen(text));
	gzclose(gz);
	f = fopen(gzpath, "rb");
	CHECK(f != NULL);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	gzdata = malloc(n);
	CHECK_INT(fread(gzdata, 1, n, f), ==, n);
	fclose(f);
	unlink(gzpath);
	memset(&s, 0, sizeof(s));
	CHECK_INT(read_bytes(gzdata, n, &s, err, sizeof(err)), ==, 0);
	CHECK_INT(s.n, ==, 3);
	memset(&s, 0, sizeof(s));
	CHECK_INT(read_bytes(gzdata, n - 10, &s, err, sizeof(err)), ==, -EINVAL);
	CHECK(strstr(err, "gzip") != NULL);
	free(gzdata);
}

static void test_read_errors_name_the_line(void)
{
	static const char bad_line[] = MANIFEST_MAGIC "\na\t1\tv\nb\tx\tv\n";
	static const char no_magic[] = "a\t1\tv\n";
	struct seen s = { 0 };
	char err[256], *longer;
	size_t n;

	CHECK_INT(read_bytes(bad_line, strlen(bad_line), &s, err, sizeof(err)), ==,
		  -EINVAL);
	CHECK(!strncmp(err, "m:3: ", 5));
	CHECK_INT(s.n, ==, 1);		/* the entries before it were seen */
	CHECK_INT(read_bytes(no_magic, strlen(no_magic), &s, err, sizeof(err)), ==,
		  -EINVAL);
	CHECK(!strncmp(err, "m:1: not a fusefs manifest", 26));
	CHECK_INT(read_bytes("", 0, &s, err, sizeof(err)), ==, -EINVAL);
	CHECK(!strncmp(err, "m:1: empty file", 15));
	/* a line over MANIFEST_LINE_MAX */
	n = strlen(MANIFEST_MAGIC) + 1 + MANIFEST_LINE_MAX + 100;
	longer = malloc(n + 1);
	memset(longer, 'a', n);
	memcpy(longer, MANIFEST_MAGIC "\n", strlen(MANIFEST_MAGIC) + 1);
	longer[n] = '\0';
	CHECK_INT(read_bytes(longer, n, &s, err, sizeof(err)), ==, -EINVAL);
	CHECK(strstr(err, "m:2: line longer") != NULL);
	free(longer);
}

static void test_callback_stops_the_read(void)
{
	struct seen s = { .stop_at = 2 };
	char err[256];

	CHECK_INT(read_bytes(text, strlen(text), &s, err, sizeof(err)), ==, EEXIST);
	CHECK_INT(s.n, ==, 2);
	CHECK(!strncmp(err, "m:5: ", 5));
}

static void test_put_reads_back(void)
{
	static const char odd[] = "dir/a b%c\x01\x7f\xc3\xa9";
	struct ns_attr a = { .size = 12345 };
	struct manifest_entry e;
	char *out = NULL, *nl;
	const char *why;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	strcpy(a.version, "\"0a1b\"");
	CHECK_INT(manifest_put_header(f, "s3://bucket/pre"), ==, 0);
	CHECK_INT(manifest_put(f, odd, sizeof(odd) - 1, &a), ==, 0);
	fclose(f);
	CHECK(!strncmp(out, MANIFEST_MAGIC "\n#source s3://bucket/pre\n",
		       strlen(MANIFEST_MAGIC) + 25));
	nl = strchr(out, '\n');
	nl = nl ? strchr(nl + 1, '\n') : NULL;
	CHECK(nl != NULL);
	if (nl) {
		char *line = nl + 1;

		CHECK(!strpbrk(line, " \x01\x7f"));		/* all encoded */
		line[strcspn(line, "\n")] = '\0';
		CHECK_INT(manifest_parse_line(line, strlen(line), &e, pathbuf,
					      &why), ==, 0);
		CHECK_INT(e.len, ==, sizeof(odd) - 1);
		CHECK(!memcmp(e.path, odd, e.len));
		CHECK_INT(e.attr.size, ==, 12345);
		CHECK_STR(e.attr.version, "\"0a1b\"");
	}
	free(out);
}

/* a path starting with '#' is written so that it is not a comment */
static void test_put_leading_hash(void)
{
	struct ns_attr a = { .size = 7 };
	struct manifest_entry e = { 0 };
	char *out = NULL;
	const char *why = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	strcpy(a.version, "v");
	CHECK_INT(manifest_put(f, "#notes/#a", 9, &a), ==, 0);
	fclose(f);
	CHECK(!strncmp(out, "%23notes/#a\t", 12));
	out[strcspn(out, "\n")] = '\0';
	CHECK_INT(manifest_parse_line(out, strlen(out), &e, pathbuf, &why), ==, 0);
	CHECK(e.path && e.len == 9 && !memcmp(e.path, "#notes/#a", 9));
	free(out);
}

static void test_put_refuses(void)
{
	struct ns_attr a = { .size = 1 };
	char *out = NULL, big[MANIFEST_PATH_MAX + 2];
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	CHECK_INT(manifest_put(f, "p", 1, &a), ==, -EINVAL);	/* no version */
	strcpy(a.version, "a b");
	CHECK_INT(manifest_put(f, "p", 1, &a), ==, -EINVAL);
	strcpy(a.version, "v");
	CHECK_INT(manifest_put(f, "", 0, &a), ==, -EINVAL);
	memset(big, 'x', sizeof(big));
	CHECK_INT(manifest_put(f, big, MANIFEST_PATH_MAX + 1, &a), ==, -EINVAL);
	CHECK_INT(manifest_put(f, big, MANIFEST_PATH_MAX, &a), ==, 0);
	/* a #source line that would split is left out */
	CHECK_INT(manifest_put_header(f, "s3://b\n/x"), ==, 0);
	fclose(f);
	CHECK(strstr(out, "#source") == NULL);
	CHECK_INT(len, ==, MANIFEST_PATH_MAX + strlen("\t1\tv\n") +
		  strlen(MANIFEST_MAGIC "\n"));
	free(out);
}

int main(void)
{
	runner_name = "test_manifest";
	TEST(test_parse_line);
	TEST(test_parse_line_errors);
	TEST(test_read_plain);
	TEST(test_read_compressed);
	TEST(test_read_errors_name_the_line);
	TEST(test_callback_stops_the_read);
	TEST(test_put_reads_back);
	TEST(test_put_leading_hash);
	TEST(test_put_refuses);
	return runner_done();
}
