// SPDX-License-Identifier: MIT
/*
 * fuzz_pathmap.c - object name -> path (pathmap_classify) and
 * utf8_valid().  The input is one object name, any bytes.
 *
 * Invariants (include/pathmap.h):
 *  - a name shown as a file or directory has a non-empty relative path
 *    of at most 4095 bytes, no NUL, no leading or trailing '/', and
 *    components of 1..255 bytes, none "." or "..";
 *  - a name that is skipped really breaks the rule its kind names;
 *  - under a prefix P, "P/rest" maps exactly as "rest" does under "",
 *    and anything not starting with "P/" is PM_OUTSIDE;
 *  - non_utf8 and utf8_valid() agree with an independent decoder
 *    (Unicode table 3-7, written as byte ranges).
 */
#include "fuzz.h"
#include "pathmap.h"

#define NAME_MAX_BYTES	255
#define PATH_MAX_BYTES	4095

/* well-formed UTF-8 as byte ranges (Unicode 15, table 3-7) */
static bool ref_utf8(const uint8_t *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		uint8_t c = s[i], lo = 0x80, hi = 0xbf;
		size_t n, k;

		if (c <= 0x7f) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			if (c == 0xe0)
				lo = 0xa0;
			if (c == 0xed)
				hi = 0x9f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			if (c == 0xf0)
				lo = 0x90;
			if (c == 0xf4)
				hi = 0x8f;
		} else {
			return false;
		}
		if (len - i - 1 < n)
			return false;
		for (k = 1; k <= n; k++) {
			uint8_t b = s[i + k];

			if (b < lo || b > hi)
				return false;
			lo = 0x80;	/* only the second byte is special */
			hi = 0xbf;
		}
		i += n + 1;
	}
	return true;
}

/* what is wrong with relative path @p (@len bytes), as a bit set */
enum { BAD_EMPTY = 1, BAD_DOT = 2, BAD_LONG = 4, BAD_NUL = 8 };

static unsigned ref_faults(const char *p, size_t len)
{
	unsigned bad = 0;
	size_t start = 0, i;

	if (memchr(p, '\0', len))
		bad |= BAD_NUL;
	if (!len)
		return bad | BAD_EMPTY;
	if (len > PATH_MAX_BYTES)
		bad |= BAD_LONG;
	for (i = 0; i <= len; i++) {
		size_t clen;

		if (i < len && p[i] != '/')
			continue;
		clen = i - start;
		if (!clen)
			bad |= BAD_EMPTY;
		else if (clen > NAME_MAX_BYTES)
			bad |= BAD_LONG;
		else if ((clen == 1 && p[start] == '.') ||
			 (clen == 2 && p[start] == '.' && p[start + 1] == '.'))
			bad |= BAD_DOT;
		start = i + 1;
	}
	return bad;
}

static void check_one(const char *name, size_t len, const char *prefix)
{
	size_t plen = strlen(prefix), rlen;
	struct pm_result r;
	enum pm_kind k = pathmap_classify(name, len, prefix, &r);
	const char *rest = name;
	unsigned bad;

	FUZZ_CHECK(k == r.kind && k < PM_NKINDS, "kind %d/%d", k, r.kind);
	FUZZ_CHECK(strcmp(pathmap_kind_name(k), "?"), "kind %d has no name", k);
	if (plen) {
		bool under = len > plen + 1 && !memcmp(name, prefix, plen) &&
			     name[plen] == '/';

		FUZZ_CHECK(under == (k != PM_OUTSIDE), "prefix '%s' kind %s",
			   prefix, pathmap_kind_name(k));
		if (!under)
			return;
		rest = name + plen + 1;
		len -= plen + 1;
	} else {
		FUZZ_CHECK(k != PM_OUTSIDE, "outside without a prefix");
	}
	/* a trailing '/' marks a directory; the rules apply to the rest */
	rlen = len && rest[len - 1] == '/' ? len - 1 : len;
	bad = ref_faults(rest, rlen);
	switch (k) {
	case PM_FILE:
	case PM_DIR:
		FUZZ_CHECK(!bad, "'%.*s' shown, faults %#x", (int)rlen, rest,
			   bad);
		FUZZ_CHECK(r.rel == rest && r.rel_len == rlen,
			   "rel at +%td len %zu, want +0 len %zu",
			   r.rel - rest, r.rel_len, rlen);
		FUZZ_CHECK((k == PM_DIR) == (rlen != len), "dir marker");
		FUZZ_CHECK(r.rel[0] != '/' && r.rel[r.rel_len - 1] != '/',
			   "slash at an end");
		FUZZ_CHECK(r.non_utf8 == !ref_utf8((const uint8_t *)r.rel,
						   r.rel_len), "non_utf8");
		break;
	case PM_BAD_EMPTY:
		FUZZ_CHECK(bad & BAD_EMPTY, "empty component claimed");
		break;
	case PM_BAD_DOT:
		FUZZ_CHECK(bad & BAD_DOT, "dot component claimed");
		break;
	case PM_BAD_LONG:
		FUZZ_CHECK(bad & BAD_LONG, "too long claimed");
		break;
	case PM_BAD_NUL:
		FUZZ_CHECK(bad & BAD_NUL, "NUL claimed");
		break;
	default:
		FUZZ_CHECK(0, "kind %d", k);
	}
}

/* the name's first @ncomp components as the prefix: the strip path */
static void check_own_prefix(const char *name, size_t len, int ncomp)
{
	char prefix[256];
	size_t plen = 0;

	while (ncomp--) {
		const char *s = memchr(name + plen, '/', len - plen);

		if (!s)
			return;
		plen = (size_t)(s - name);
		if (ncomp)
			plen++;
	}
	if (!plen || plen >= sizeof(prefix) || memchr(name, '\0', plen) ||
	    name[0] == '/' || name[plen - 1] == '/')
		return;		/* not a prefix the mount would accept */
	memcpy(prefix, name, plen);
	prefix[plen] = '\0';
	check_one(name, len, prefix);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* an exact-size copy, so ASan sees any read past the name */
	char *name = malloc(size ? size : 1);

	FUZZ_CHECK(name != NULL, "out of memory");
	memcpy(name, data, size);
	FUZZ_CHECK(utf8_valid(name, size) == ref_utf8(data, size),
		   "utf8_valid() disagrees on %zu bytes", size);
	check_one(name, size, "");
	check_one(name, size, "data");
	check_own_prefix(name, size, 1);	/* "a" of "a/b/c" */
	check_own_prefix(name, size, 2);	/* "a/b" */
	free(name);
	return 0;
}
