// SPDX-License-Identifier: MIT
/* cfgfile.c - see cfgfile.h */
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cfgfile.h"
#include "compiler.h"

#define SECTION_MAX	256

/*
 * inih reads through our reader, which lets us count lines (inih as
 * packaged does not pass line numbers to the handler), strip leading
 * whitespace (no surprising continuation lines) and report section
 * headers.  Entry lines ("name = value") are split here, by inih's
 * rules (entry()), and inih is handed a comment in their place: a value
 * may be a secret (the AWS credentials file), and inih copies each line
 * into a line buffer on its own stack (INI_MAX_LINE, 200 bytes, as
 * packaged) that nothing wipes.  That also takes lines of any length.
 * inih still checks the syntax: a line that is neither a header, a
 * comment nor an entry reaches it as "?", which it reports.  The lines
 * themselves are only ever in buffers wiped before they are freed: our
 * line buffer (grown by hand: getline() would realloc() it and free the
 * old copy as it is) and the stream's own buffer (setvbuf()).
 */
struct each {
	FILE *f;
	cfgfile_each_fn fn;	/* NULL: syntax pass */
	void *arg;
	int line;
	int rejected;		/* line @fn rejected, 0 if none */
	int err;		/* errno of a failed read (EISDIR, EIO), or 0 */
	char section[SECTION_MAX];
	char *buf;
	size_t cap;
};

static char *trim(char *s)
{
	char *end;

	while (isspace((unsigned char)*s))
		s++;
	end = s + strlen(s);
	while (end > s && isspace((unsigned char)end[-1]))
		*--end = '\0';
	return s;
}

static void call(struct each *e, const char *name, const char *value)
{
	if (e->fn && !e->rejected && e->fn(e->arg, e->section, name, value,
					   e->line))
		e->rejected = e->line;
}

/* "[name]" -> e->section, as inih reads it (no trimming inside) */
static void note_section(struct each *e, const char *p)
{
	const char *end = strchr(p + 1, ']');
	size_t n;

	if (!end)
		return;		/* inih reports the syntax error */
	n = MIN((size_t)(end - p - 1), sizeof(e->section) - 1);
	memcpy(e->section, p + 1, n);
	e->section[n] = '\0';
	call(e, NULL, NULL);
}

/* an entry line "name = value ; comment" (or a comment line), split as
 * inih would; false if malformed */
static bool entry(struct each *e, char *p)
{
	char *sep = p + strcspn(p, "=:"), *c;

	if (*p == ';' || *p == '#')
		return true;
	if (!*sep || *p == '[')
		return false;
	for (c = p + 1; c < sep; c++)	/* as inih: " ;" starts a comment */
		if (*c == ';' && isspace((unsigned char)c[-1]))
			return false;
	*sep = '\0';
	for (c = sep + 1; *c; c++)	/* as inih: from right after it */
		if (*c == ';' && isspace((unsigned char)c[-1])) {
			*c = '\0';
			break;
		}
	call(e, trim(p), trim(sep + 1));
	return true;
}

/* room for @need bytes in e->buf; the old buffer is wiped before it is
 * freed (getline()'s realloc() would free it as it is) */
static int grow(struct each *e, size_t need)
{
	size_t cap = e->cap ? e->cap : 256;
	char *b;

	if (need <= e->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	b = malloc(cap);
	if (!b)
		return -ENOMEM;
	if (e->buf) {
		memcpy(b, e->buf, e->cap);
		explicit_bzero(e->buf, e->cap);
		free(e->buf);
	}
	e->buf = b;
	e->cap = cap;
	return 0;
}

/* the next line (with its newline, if any) into e->buf: its length, or
 * -1 at the end (e->err set on a read error or ENOMEM) */
static ssize_t read_line(struct each *e)
{
	size_t n = 0;
	int ch = 0;

	while (ch != '\n' && (ch = getc(e->f)) != EOF) {
		if (grow(e, n + 2)) {
			e->err = ENOMEM;
			return -1;
		}
		e->buf[n++] = (char)ch;
	}
	if (ferror(e->f)) {
		e->err = errno ? errno : EIO;
		return -1;
	}
	if (!n)
		return -1;
	e->buf[n] = '\0';
	return (ssize_t)n;
}

static char *each_reader(char *str, int num, void *stream)
{
	struct each *e = stream;
	ssize_t n;
	char *p;

	if (e->rejected)
		return NULL;	/* stop after the first rejected line */
	n = read_line(e);
	if (n < 0)
		return NULL;
	e->line++;
	p = e->buf;
	if (e->line == 1 && !strncmp(p, "\xEF\xBB\xBF", 3))
		p += 3;			/* UTF-8 byte order mark */
	p = trim(p);
	if (!*p || (*p == '[' && strlen(p) < (size_t)num)) {
		if (*p)
			note_section(e, p);
		strcpy(str, p);		/* a header or nothing: no secret */
		return str;
	}
	/* a malformed line becomes one inih rejects at this number */
	strcpy(str, entry(e, p) ? "#" : "?");
	return str;
}

static int each_handler(void *user, const char *section, const char *name,
			const char *value)
{
	struct each *e = user;

	call(e, name, value);
	return 1;	/* rejections are counted by line, not by inih */
}

static int each_pass(struct each *e)
{
	int rc;

	rewind(e->f);
	e->line = 0;
	e->section[0] = '\0';
	rc = ini_parse_stream(each_reader, e, each_handler, e);
	if (rc < 0)
		return -ENOMEM;		/* inih could not allocate */
	return rc ? rc : e->rejected;
}

int cfgfile_each(const char *path, cfgfile_each_fn fn, void *arg)
{
	struct each e = { .arg = arg };
	char iobuf[BUFSIZ];	/* the stream's buffer: wiped below */
	int rc;

	e.f = fopen(path, "re");
	if (!e.f)
		return -errno;
	if (setvbuf(e.f, iobuf, _IOFBF, sizeof(iobuf))) {
		fclose(e.f);
		return -ENOMEM;
	}
	rc = each_pass(&e);		/* syntax only */
	if (!rc && !e.err) {		/* never @fn on a file read in part */
		e.fn = fn;
		rc = each_pass(&e);
	}
	if (!rc && e.err)
		rc = -e.err;	/* a directory: -EISDIR */
	if (e.buf)		/* it held the last line read: a secret? */
		explicit_bzero(e.buf, e.cap);
	free(e.buf);
	fclose(e.f);
	explicit_bzero(iobuf, sizeof(iobuf));
	return rc;
}

/* the mount config */

struct load {
	struct fusefs_conf *cf;
	const char *path;
	char seen[64][40];	/* canonical keys given so far */
	int seen_line[64];
	int nseen;
	bool reported;		/* on_entry() said why it failed */
};

static int parse_bool(const char *v)
{
	static const char *const yes[] = { "true", "yes", "on", "1" };
	static const char *const no[] = { "false", "no", "off", "0" };
	size_t i;

	for (i = 0; i < ARRAY_SIZE(yes); i++) {
		if (!strcasecmp(v, yes[i]))
			return 1;
		if (!strcasecmp(v, no[i]))
			return 0;
	}
	return -EINVAL;
}

/* a key given twice is a mistake in one of the two places */
static int check_once(struct load *l, const char *name, int line)
{
	char canon[40];
	size_t i;
	int k;

	if (strlen(name) >= sizeof(canon))
		return 0;	/* no such option: reported as unknown */
	for (i = 0; name[i]; i++)
		canon[i] = name[i] == '_' ? '-' : name[i];
	canon[i] = '\0';
	for (k = 0; k < l->nseen; k++)
		if (!strcmp(l->seen[k], canon)) {
			fprintf(stderr, "fusefs: %s:%d: key '%s' is already set on line %d\n",
				l->path, line, name, l->seen_line[k]);
			return -EINVAL;
		}
	if (l->nseen < (int)ARRAY_SIZE(l->seen)) {
		strcpy(l->seen[l->nseen], canon);
		l->seen_line[l->nseen++] = line;
	}
	return 0;
}

static int set_string(char **field, const char *val)
{
	char *copy = strdup(val);

	if (!copy)
		return -ENOMEM;
	free(*field);
	*field = copy;
	return 0;
}

/* values are not echoed for unknown keys: they could be anything */
static int apply_entry(struct load *l, const char *section, const char *name,
		       const char *value, int line)
{
	int takes, rc;

	if (strcmp(section, "mount")) {
		if (!name)
			fprintf(stderr, "fusefs: %s:%d: unknown section [%s] (only [mount])\n",
				l->path, line, section);
		else
			fprintf(stderr, "fusefs: %s:%d: key '%s' is outside the [mount] section\n",
				l->path, line, name);
		return -EINVAL;
	}
	if (!name)
		return 0;
	if (check_once(l, name, line))
		return -EINVAL;
	if (!strcmp(name, "source") || !strcmp(name, "mountpoint")) {
		if (!*value) {
			fprintf(stderr, "fusefs: %s:%d: key '%s' needs a value\n",
				l->path, line, name);
			return -EINVAL;
		}
		return set_string(name[0] == 's' ? &l->cf->source :
				  &l->cf->mountpoint, value);
	}
	if (!strcmp(name, "config")) {
		fprintf(stderr, "fusefs: %s:%d: key 'config' cannot be used in a config file\n",
			l->path, line);
		return -EINVAL;
	}
	takes = conf_takes_value(name);
	if (takes < 0) {
		fprintf(stderr, "fusefs: %s:%d: unknown key '%s' (see fusefs --help)\n",
			l->path, line, name);
		return -EINVAL;
	}
	if (!takes) {
		int on = parse_bool(value);

		if (on < 0) {
			fprintf(stderr, "fusefs: %s:%d: key '%s' takes true or false\n",
				l->path, line, name);
			return -EINVAL;
		}
		rc = on ? conf_set(l->cf, name, NULL) : 0;
	} else {
		rc = conf_set(l->cf, name, value);	/* prints why */
	}
	if (rc)
		fprintf(stderr, "fusefs: %s:%d: bad value for key '%s'\n",
			l->path, line, name);
	return rc;
}

static int on_entry(void *arg, const char *section, const char *name,
		    const char *value, int line)
{
	struct load *l = arg;
	int rc = apply_entry(l, section, name, value, line);

	if (rc == -ENOMEM)
		fprintf(stderr, "fusefs: %s:%d: out of memory\n", l->path, line);
	if (rc)
		l->reported = true;
	return rc;
}

int cfgfile_load(struct fusefs_conf *cf, const char *path)
{
	struct load *l = calloc(1, sizeof(*l));
	int rc;

	if (!l)
		return -ENOMEM;
	l->cf = cf;
	l->path = path;
	rc = cfgfile_each(path, on_entry, l);
	if (rc < 0)
		fprintf(stderr, "fusefs: cannot read config file %s: %s\n", path,
			strerror(-rc));
	else if (rc > 0 && !l->reported)
		fprintf(stderr, "fusefs: %s:%d: syntax error: expected [mount], key = value or a comment\n",
			path, rc);
	free(l);
	return rc > 0 ? -EINVAL : rc;
}
