/* SPDX-License-Identifier: MIT */
/*
 * mountinfo.h - this process's mount table (/proc/self/mountinfo, see
 * proc(5)), read in one place: which file system is mounted where.
 *
 * A line is "ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [OPTIONAL...]
 * - FSTYPE SOURCE SUPER-OPTIONS"; the kernel escapes space, tab, newline
 * and backslash in paths as \ooo.  Entries come in mount order: of two
 * at one mount point the later is on top.
 */
#ifndef FUSEFS_MOUNTINFO_H
#define FUSEFS_MOUNTINFO_H

#include <limits.h>

struct mountinfo {
	unsigned major, minor;	/* the st_dev of its files */
	const char *mountpoint;	/* unescaped */
	const char *fstype;	/* "fuse.fusefs", "ext4", ... */
	const char *source;	/* unescaped */
};

/*
 * mountinfo_parse() - split one table line @line (changed in place; its
 * newline, if any, ignored) into @m, whose strings point into @line.
 * Return: 0, or -EINVAL if it is not a mountinfo line.
 */
int mountinfo_parse(char *line, struct mountinfo *m);

/*
 * mountinfo_each() - @fn(entry, @arg) for every entry of the table, in
 * its order, until @fn returns non-zero.  Lines that do not parse are
 * skipped.  Return: what @fn returned, 0 at the end, or -errno if the
 * table cannot be read.
 */
typedef int (*mountinfo_fn)(const struct mountinfo *m, void *arg);
int mountinfo_each(mountinfo_fn fn, void *arg);

/* what mountinfo_top() copies of an entry */
struct mountinfo_top {
	unsigned major, minor;
	char fstype[256];
	char source[PATH_MAX];
};

/*
 * mountinfo_top() - the topmost mount at @mountpoint (a canonical path:
 * the last entry there) into @t.  Return: 0, -ENOENT if nothing is
 * mounted there, or -errno if the table cannot be read.
 */
int mountinfo_top(const char *mountpoint, struct mountinfo_top *t);

/* mountinfo_unescape() - undo the table's octal escapes (\040 for a
 * space, \011, \012, \134) of a field, in place */
void mountinfo_unescape(char *s);

#endif
