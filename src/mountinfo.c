// SPDX-License-Identifier: MIT
/* mountinfo.c - see mountinfo.h */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mountinfo.h"

void mountinfo_unescape(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' &&
		    s[2] >= '0' && s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 |
				      (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = '\0';
}

/* the next space-separated field of *@s, or NULL */
static char *field(char **s)
{
	char *f = strsep(s, " ");

	return f && *f ? f : NULL;
}

int mountinfo_parse(char *line, struct mountinfo *m)
{
	char *s = line, *f, *devno, *mp, *end;
	int i;

	line[strcspn(line, "\n")] = '\0';
	for (i = 0; i < 2; i++)			/* ID PARENT */
		if (!field(&s))
			return -EINVAL;
	devno = field(&s);
	if (!devno || !field(&s) || !(mp = field(&s)) || !field(&s))
		return -EINVAL;			/* MAJ:MIN ROOT MOUNTPOINT OPTS */
	while ((f = field(&s)) && strcmp(f, "-"))
		;				/* optional fields */
	/* FSTYPE SOURCE: a source may be empty ("" mounted as is) */
	if (!f || !(m->fstype = field(&s)) || !(f = strsep(&s, " ")))
		return -EINVAL;
	m->major = (unsigned)strtoul(devno, &end, 10);
	if (end == devno || *end != ':')
		return -EINVAL;
	devno = end + 1;
	m->minor = (unsigned)strtoul(devno, &end, 10);
	if (end == devno || *end)
		return -EINVAL;
	mountinfo_unescape(mp);
	mountinfo_unescape(f);
	m->mountpoint = mp;
	m->source = f;
	return 0;
}

int mountinfo_each(mountinfo_fn fn, void *arg)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	struct mountinfo m;
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;

	if (!f)
		return -errno;
	while (!rc && getline(&line, &cap, f) > 0)
		if (!mountinfo_parse(line, &m))
			rc = fn(&m, arg);
	free(line);
	fclose(f);
	return rc;
}

struct top_at {
	const char *path;
	struct mountinfo_top *t;
	bool found;
};

static int note_top(const struct mountinfo *m, void *arg)
{
	struct top_at *a = arg;

	if (strcmp(m->mountpoint, a->path))
		return 0;
	a->t->major = m->major;
	a->t->minor = m->minor;
	snprintf(a->t->fstype, sizeof(a->t->fstype), "%s", m->fstype);
	snprintf(a->t->source, sizeof(a->t->source), "%s", m->source);
	a->found = true;	/* the last one is on top */
	return 0;
}

int mountinfo_top(const char *mountpoint, struct mountinfo_top *t)
{
	struct top_at a = { mountpoint, t, false };
	int rc = mountinfo_each(note_top, &a);

	return rc ? rc : a.found ? 0 : -ENOENT;
}
