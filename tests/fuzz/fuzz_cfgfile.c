// SPDX-License-Identifier: MIT
/*
 * fuzz_cfgfile.c - the INI walker (cfgfile_each, over inih) and the
 * mount config loader on top of it (cfgfile_load -> conf_set).  The
 * input is the file's contents; the code reads it by path, from a memfd.
 *
 * Invariants (include/cfgfile.h):
 *  - cfgfile_each() returns 0, a line number (> 0, at most the number
 *    of lines) or -errno;
 *  - the file is checked whole first: for a file with a syntax error
 *    the callback is never called;
 *  - the callback sees lines in increasing order, a section header as
 *    (section, NULL, NULL), and trimmed entries: a name with no '=' or
 *    ':' and no inline comment, a value with no inline comment (" ;"),
 *    neither starting or ending with white space; sections fit
 *    SECTION_MAX;
 *  - a line the callback rejects (value "REJECT") is what cfgfile_each()
 *    returns, and the callback is not called again;
 *  - cfgfile_load() returns 0, -EINVAL or -ENOMEM and leaks nothing.
 */
#include <ctype.h>
#include <errno.h>

#include "cfgfile.h"
#include "fuzz.h"

#define SECTION_MAX	256	/* cfgfile.c */

struct walk {
	const uint8_t *data;
	size_t size;
	int calls;
	int last_line;
	int rejected;		/* line we rejected, 0 if none */
};

static bool edge_space(const char *s)
{
	size_t n = strlen(s);

	return n && (isspace((unsigned char)s[0]) ||
		     isspace((unsigned char)s[n - 1]));
}

/* " ;" (any white space before ';'): where inih cuts an inline comment */
static bool has_comment(const char *s)
{
	const char *p;

	for (p = s; (p = strchr(p, ';')); p++)
		if (p > s && isspace((unsigned char)p[-1]))
			return true;
	return false;
}

static int on_line(void *arg, const char *section, const char *name,
		   const char *value, int line)
{
	struct walk *w = arg;

	FUZZ_CHECK(!w->rejected, "called for line %d after rejecting line %d",
		   line, w->rejected);
	FUZZ_CHECK(line > w->last_line, "line %d after line %d", line,
		   w->last_line);
	FUZZ_CHECK(section && strlen(section) < SECTION_MAX, "section");
	FUZZ_CHECK(!name == !value, "name %p value %p", (void *)name,
		   (void *)value);
	w->calls++;
	w->last_line = line;
	if (!name)
		return 0;
	FUZZ_CHECK(!strpbrk(name, "=:"), "name '%s' holds a separator", name);
	FUZZ_CHECK(!has_comment(name), "name '%s' holds a comment", name);
	FUZZ_CHECK(!has_comment(value), "value '%s' holds a comment", value);
	FUZZ_CHECK(!edge_space(name) && !edge_space(value),
		   "untrimmed '%s' = '%s'", name, value);
	if (!strcmp(value, "REJECT")) {
		w->rejected = line;
		return -EINVAL;
	}
	return 0;
}

static int count_lines(const uint8_t *data, size_t size)
{
	size_t i;
	int n = 0;

	for (i = 0; i < size; i++)
		n += data[i] == '\n';
	return n + (size && data[size - 1] != '\n');
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_as_file(data, size);
	struct walk w = { .data = data, .size = size };
	struct fusefs_conf cf;
	int rc, lines = count_lines(data, size);

	rc = cfgfile_each(path, on_line, &w);
	FUZZ_CHECK(rc == -ENOMEM || rc == -EIO || (rc >= 0 && rc <= lines),
		   "rc %d for %d lines", rc, lines);
	if (w.rejected)
		FUZZ_CHECK(rc == w.rejected, "rejected line %d, rc %d",
			   w.rejected, rc);
	else if (rc > 0)
		FUZZ_CHECK(w.calls == 0, "syntax error on line %d after %d calls",
			   rc, w.calls);

	conf_init(&cf);
	fuzz_quiet_begin();
	rc = cfgfile_load(&cf, path);
	fuzz_quiet_end();
	FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ENOMEM, "load rc %d", rc);
	conf_release(&cf);
	return 0;
}
