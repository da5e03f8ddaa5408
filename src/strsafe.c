// SPDX-License-Identifier: MIT
/* strsafe.c - see strsafe.h */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "strsafe.h"

#define LOG_ESC_MAX	512	/* bytes of a name printed in a log line */
#define LOG_ESC_SLOTS	8

static const char hex[] = "0123456789abcdef";

static bool needs_esc(unsigned char c)
{
	return c < 0x20 || c == 0x7f || c == '\\';
}

/* the escape of @c into @out (4 bytes at most); its length */
static size_t esc1(unsigned char c, char *out)
{
	if (!needs_esc(c)) {
		out[0] = c;
		return 1;
	}
	if (c == '\\') {
		out[0] = out[1] = '\\';
		return 2;
	}
	out[0] = '\\';
	out[1] = 'x';
	out[2] = hex[c >> 4];
	out[3] = hex[c & 15];
	return 4;
}

size_t str_esc(char *dst, size_t size, const char *s, size_t len)
{
	size_t i, need = 0, o = 0;
	bool cut = false;
	char e[4];

	for (i = 0; i < len; i++) {
		size_t n = esc1(s[i], e);

		if (!cut && o + n < size) {
			memcpy(dst + o, e, n);
			o += n;
		} else {
			cut = true;
		}
		need += n;
	}
	if (size)
		dst[o] = '\0';
	return need;
}

const char *str_log_n(const char *s, size_t len)
{
	static __thread char slot[LOG_ESC_SLOTS][LOG_ESC_MAX + 4];
	static __thread unsigned next;
	char *buf = slot[next++ % LOG_ESC_SLOTS];

	if (!s)
		return "(null)";
	if (str_esc(buf, LOG_ESC_MAX + 1, s, len) > LOG_ESC_MAX)
		strcat(buf, "...");
	return buf;
}

const char *str_log(const char *s)
{
	return str_log_n(s, s ? strlen(s) : 0);
}

int str_esc_file(FILE *f, const char *s, size_t len)
{
	size_t i;
	char e[4];

	for (i = 0; i < len; i++)
		if (fwrite(e, 1, esc1(s[i], e), f) == 0)
			return -EIO;
	return 0;
}

static int unhex(char c)
{
	const char *p = c ? strchr(hex, c) : NULL;

	return p ? (int)(p - hex) : -1;
}

ssize_t str_unesc(char *dst, const char *s, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		int hi, lo;

		if (s[i] != '\\') {
			dst[o++] = s[i];
			continue;
		}
		if (i + 1 < len && s[i + 1] == '\\') {
			dst[o++] = '\\';
			i++;
			continue;
		}
		if (i + 3 >= len || s[i + 1] != 'x' ||
		    (hi = unhex(s[i + 2])) < 0 || (lo = unhex(s[i + 3])) < 0)
			return -EINVAL;
		dst[o++] = (char)(hi << 4 | lo);
		i += 3;
	}
	return o;
}
