// SPDX-License-Identifier: MIT
/* pathmap.c - see pathmap.h */
#include <string.h>

#include "pathmap.h"

#define NAME_MAX_BYTES	255
#define PATH_MAX_BYTES	4095

bool utf8_valid(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s, *end = p + len;

	while (p < end) {
		unsigned c = *p++, n, min;
		unsigned long cp;

		if (c < 0x80)
			continue;
		if ((c & 0xe0) == 0xc0) {
			n = 1; cp = c & 0x1f; min = 0x80;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2; cp = c & 0x0f; min = 0x800;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3; cp = c & 0x07; min = 0x10000;
		} else {
			return false;
		}
		if ((size_t)(end - p) < n)
			return false;
		while (n--) {
			if ((*p & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (*p++ & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
	}
	return true;
}

enum pm_kind pathmap_classify(const char *name, size_t len,
			      const char *prefix, struct pm_result *out)
{
	size_t plen = strlen(prefix), i, start;

	memset(out, 0, sizeof(*out));
	if (plen) {
		if (len <= plen + 1 || memcmp(name, prefix, plen) ||
		    name[plen] != '/')
			return out->kind = PM_OUTSIDE;
		name += plen + 1;
		len -= plen + 1;
	}
	if (memchr(name, '\0', len))
		return out->kind = PM_BAD_NUL;
	out->rel = name;
	out->kind = PM_FILE;
	if (len && name[len - 1] == '/') {
		out->kind = PM_DIR;
		len--;
	}
	out->rel_len = len;
	if (!len)
		return out->kind = PM_BAD_EMPTY;
	if (len > PATH_MAX_BYTES)
		return out->kind = PM_BAD_LONG;
	for (start = 0, i = 0; i <= len; i++) {
		size_t clen;

		if (i < len && name[i] != '/')
			continue;
		clen = i - start;
		if (!clen)
			return out->kind = PM_BAD_EMPTY;
		if (clen > NAME_MAX_BYTES)
			return out->kind = PM_BAD_LONG;
		if (name[start] == '.' &&
		    (clen == 1 || (clen == 2 && name[start + 1] == '.')))
			return out->kind = PM_BAD_DOT;
		start = i + 1;
	}
	out->non_utf8 = !utf8_valid(name, len);
	return out->kind;
}

const char *pathmap_kind_name(enum pm_kind k)
{
	static const char *const names[PM_NKINDS] = {
		"file", "dir", "outside", "empty_component", "dot_component",
		"too_long", "nul_byte",
	};

	return k < PM_NKINDS ? names[k] : "?";
}
