// SPDX-License-Identifier: MIT
/* manifest.c - see manifest.h */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zlib.h>
#include <zstd.h>

#include "compiler.h"
#include "manifest.h"
#include "pathmap.h"

#define IN_BUF	(256 * 1024)

static bool must_encode(unsigned char c)
{
	return c <= 0x20 || c == 0x7f || c == '%';
}

/* percent-decode @s (@len bytes) into @out; raw spaces and controls refused */
static int decode_path(const char *s, size_t len, char *out, size_t *outlen,
		       const char **why)
{
	size_t i, n = 0;

	for (i = 0; i < len; i++) {
		unsigned char c = s[i];

		if (n == MANIFEST_PATH_MAX) {
			*why = "path longer than 4095 bytes";
			return -EINVAL;
		}
		if (c == '%') {
			int hi = i + 2 < len ? hex_digit(s[i + 1]) : -1;
			int lo = i + 2 < len ? hex_digit(s[i + 2]) : -1;

			if (hi < 0 || lo < 0) {
				*why = "bad percent-encoding in the path";
				return -EINVAL;
			}
			out[n++] = (char)(hi << 4 | lo);
			i += 2;
			continue;
		}
		if (must_encode(c)) {
			*why = "raw control byte or space in the path (percent-encode it)";
			return -EINVAL;
		}
		out[n++] = c;
	}
	*outlen = n;
	return 0;
}

/* strict decimal: digits only, no sign, no overflow past @max */
static int parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0 || len > 20)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		if (v > (max - (uint64_t)(s[i] - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

static int parse_sum(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len != 5 + 16 || memcmp(s, "xxh3:", 5))
		return -EINVAL;
	for (i = 5; i < len; i++) {
		int h = hex_digit(s[i]);

		if (h < 0)
			return -EINVAL;
		v = v << 4 | (uint64_t)h;
	}
	*out = v;
	return 0;
}

int manifest_parse_line(char *line, size_t len, struct manifest_entry *e,
			char *pathbuf, const char **why)
{
	const char *f[5];
	size_t flen[5], i, n = 0, start = 0;
	struct pm_result pm;

	if (len && line[len - 1] == '\r')
		len--;
	if (len == 0 || line[0] == '#')
		return 1;
	for (i = 0; i <= len && n < 5; i++) {
		if (i == len || line[i] == '\t') {
			f[n] = line + start;
			flen[n++] = i - start;
			start = i + 1;
		}
	}
	if (n < 3) {
		*why = "expected PATH<TAB>SIZE<TAB>VERSION[<TAB>CHECKSUM]";
		return -EINVAL;
	}
	if (n > 4) {
		*why = "too many fields (at most 4)";
		return -EINVAL;
	}
	memset(e, 0, sizeof(*e));
	if (flen[0] == 0) {
		*why = "empty path";
		return -EINVAL;
	}
	if (decode_path(f[0], flen[0], pathbuf, &e->len, why))
		return -EINVAL;
	pathbuf[e->len] = '\0';
	e->path = pathbuf;
	switch (pathmap_classify(pathbuf, e->len, "", &pm)) {
	case PM_FILE:
		break;
	case PM_DIR:
		*why = "path ends in '/' (entries are files)";
		return -EINVAL;
	default:
		*why = "path has an empty, '.' or '..' component, a NUL or a name over 255 bytes";
		return -EINVAL;
	}
	if (parse_u64(f[1], flen[1], NS_SIZE_MAX, &e->attr.size)) {
		*why = "size is not a decimal number up to 2^44";
		return -EINVAL;
	}
	if (flen[2] == 0 || flen[2] >= NS_VERSION_MAX) {
		*why = "version is empty or longer than 47 bytes";
		return -EINVAL;
	}
	for (i = 0; i < flen[2]; i++) {
		unsigned char c = f[2][i];

		if (c <= 0x20 || c >= 0x7f) {
			*why = "version holds a space, control or non-ASCII byte";
			return -EINVAL;
		}
	}
	memcpy(e->attr.version, f[2], flen[2]);
	e->attr.version[flen[2]] = '\0';
	if (n == 4) {
		if (parse_sum(f[3], flen[3], &e->xxh3)) {
			*why = "checksum is not xxh3: and 16 hex digits";
			return -EINVAL;
		}
		e->has_sum = true;
	}
	return 0;
}

/* ---- reading: plain, gzip (zlib) or zstd, split into lines ---- */

enum src_kind { SRC_PLAIN, SRC_GZIP, SRC_ZSTD };

struct src {
	enum src_kind kind;
	int fd;
	gzFile gz;
	ZSTD_DStream *zs;
	ZSTD_inBuffer in;
	char *inbuf;
	bool eof;
	bool frame_done;	/* zstd: the last frame ended */
};

/* up to @n bytes of content; 0 at the end, -EIO or -EINVAL (bad stream) */
static ssize_t src_read(struct src *s, char *buf, size_t n)
{
	ssize_t r;

	switch (s->kind) {
	case SRC_PLAIN:
		do
			r = read(s->fd, buf, n);
		while (r < 0 && errno == EINTR);
		return r < 0 ? -EIO : r;
	case SRC_GZIP: {
		int zerr = Z_OK;

		r = gzread(s->gz, buf, (unsigned)n);
		if (r == 0)
			gzerror(s->gz, &zerr);	/* a truncated stream ends "early" */
		return r < 0 || (zerr != Z_OK && zerr != Z_STREAM_END) ? -EINVAL : r;
	}
	case SRC_ZSTD:
		for (;;) {
			ZSTD_outBuffer out = { buf, n, 0 };
			size_t rc;

			if (s->in.pos == s->in.size && !s->eof) {
				do
					r = read(s->fd, s->inbuf, IN_BUF);
				while (r < 0 && errno == EINTR);
				if (r < 0)
					return -EIO;
				s->in.src = s->inbuf;
				s->in.size = (size_t)r;
				s->in.pos = 0;
				s->eof = r == 0;
			}
			if (s->in.pos == s->in.size && s->eof)
				return s->frame_done ? 0 : -EINVAL;	/* truncated */
			rc = ZSTD_decompressStream(s->zs, &out, &s->in);
			if (ZSTD_isError(rc))
				return -EINVAL;
			s->frame_done = rc == 0;
			if (out.pos)
				return (ssize_t)out.pos;
		}
	}
	return -EINVAL;
}

static int src_open(struct src *s, int fd)
{
	unsigned char m[4] = { 0 };
	ssize_t r = pread(fd, m, sizeof(m), 0);
	int dfd;

	memset(s, 0, sizeof(*s));
	s->fd = fd;
	if (r < 0)
		return -EIO;
	if (r >= 2 && m[0] == 0x1f && m[1] == 0x8b) {
		s->kind = SRC_GZIP;
		dfd = dup(fd);
		if (dfd < 0)
			return -errno;
		s->gz = gzdopen(dfd, "rb");
		if (!s->gz) {
			close(dfd);
			return -ENOMEM;
		}
		return 0;
	}
	if (r == 4 && m[0] == 0x28 && m[1] == 0xb5 && m[2] == 0x2f &&
	    m[3] == 0xfd) {
		s->kind = SRC_ZSTD;
		s->zs = ZSTD_createDStream();
		s->inbuf = malloc(IN_BUF);
		if (!s->zs || !s->inbuf)
			return -ENOMEM;
		ZSTD_initDStream(s->zs);
		return 0;
	}
	s->kind = SRC_PLAIN;
	return 0;
}

static void src_close(struct src *s)
{
	if (s->gz)
		gzclose(s->gz);
	ZSTD_freeDStream(s->zs);
	free(s->inbuf);
}

static const char *src_kind_name(const struct src *s)
{
	return s->kind == SRC_GZIP ? "gzip" : s->kind == SRC_ZSTD ? "zstd" : "text";
}

int manifest_read(int fd, const char *name, manifest_fn fn, void *arg,
		  char *err, size_t errlen)
{
	size_t cap = 2 * MANIFEST_LINE_MAX, have = 0, i, start;
	char *buf = malloc(cap), *path = malloc(MANIFEST_PATH_MAX + 1);
	unsigned long lineno = 0;
	bool header = false;
	const char *why = NULL;
	struct manifest_entry e;
	struct src s;
	int rc;

	snprintf(err, errlen, "%s: out of memory", name);
	if (!buf || !path) {
		rc = -ENOMEM;
		goto out_free;
	}
	rc = src_open(&s, fd);
	if (rc) {
		snprintf(err, errlen, "%s: cannot open: %s", name, strerror(-rc));
		goto out_src;
	}
	for (;;) {
		ssize_t r = src_read(&s, buf + have, cap - have);

		if (r < 0) {
			rc = (int)r;
			if (r == -EIO)
				snprintf(err, errlen, "%s:%lu: read error", name,
					 lineno + 1);
			else
				snprintf(err, errlen, "%s:%lu: damaged or truncated %s data",
					 name, lineno + 1, src_kind_name(&s));
			goto out_src;
		}
		have += (size_t)r;
		for (start = 0, i = 0; i < have; i++) {
			size_t l;

			if (buf[i] != '\n' && !(r == 0 && i == have - 1))
				continue;
			l = i - start + (buf[i] != '\n');
			lineno++;
			if (l > MANIFEST_LINE_MAX) {
				why = "line longer than 16384 bytes";
				goto bad;
			}
			if (!header) {
				if (l < strlen(MANIFEST_MAGIC) ||
				    memcmp(buf + start, MANIFEST_MAGIC,
					   strlen(MANIFEST_MAGIC))) {
					why = "not a fusefs manifest (the first line must be \"" MANIFEST_MAGIC "\")";
					goto bad;
				}
				header = true;
			} else {
				rc = manifest_parse_line(buf + start, l, &e, path, &why);
				if (rc < 0)
					goto bad;
				if (rc == 0) {
					rc = fn(arg, &e, lineno);
					if (rc) {
						snprintf(err, errlen, "%s:%lu: %s", name,
							 lineno, strerror(rc < 0 ? -rc : rc));
						goto out_src;
					}
				}
			}
			start = i + 1;
		}
		memmove(buf, buf + start, have - start);
		have -= start;
		if (r == 0)
			break;
		if (have >= MANIFEST_LINE_MAX) {
			lineno++;
			why = "line longer than 16384 bytes";
			goto bad;
		}
	}
	if (!header) {
		why = "empty file: not a fusefs manifest";
		lineno = 1;
		goto bad;
	}
	rc = 0;
	goto out_src;
bad:
	snprintf(err, errlen, "%s:%lu: %s", name, lineno, why);
	rc = -EINVAL;
out_src:
	src_close(&s);
out_free:
	free(path);
	free(buf);
	return rc;
}

/* ---- writing ---- */

int manifest_put_header(FILE *f, const char *source)
{
	fputs(MANIFEST_MAGIC "\n", f);
	if (source && !strpbrk(source, "\r\n"))
		fprintf(f, "#source %s\n", source);
	return ferror(f) ? -EIO : 0;
}

int manifest_put(FILE *f, const char *path, size_t len,
		 const struct ns_attr *a)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	if (len == 0 || len > MANIFEST_PATH_MAX || !a->version[0] ||
	    a->size > NS_SIZE_MAX)
		return -EINVAL;
	for (i = 0; a->version[i]; i++)
		if ((unsigned char)a->version[i] <= 0x20 ||
		    (unsigned char)a->version[i] >= 0x7f)
			return -EINVAL;
	for (i = 0; i < len; i++) {
		unsigned char c = path[i];

		/* a leading '#' would make the line a comment */
		if (must_encode(c) || (i == 0 && c == '#')) {
			putc('%', f);
			putc(hex[c >> 4], f);
			putc(hex[c & 15], f);
		} else {
			putc(c, f);
		}
	}
	fprintf(f, "\t%" PRIu64 "\t%s\n", a->size, a->version);
	return ferror(f) ? -EIO : 0;
}
