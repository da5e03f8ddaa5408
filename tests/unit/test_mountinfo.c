// SPDX-License-Identifier: MIT
/* the mount table reader (mountinfo.c): one parser for every caller */
#include <errno.h>
#include <string.h>

#include "mountinfo.h"
#include "runner.h"

static int parse(const char *text, struct mountinfo *m, char *buf)
{
	strcpy(buf, text);
	return mountinfo_parse(buf, m);
}

/* @text parses into these fields */
static void expect(const char *text, unsigned major, unsigned minor,
		   const char *mountpoint, const char *fstype,
		   const char *source)
{
	struct mountinfo m;
	char buf[512];

	CHECK_INT(parse(text, &m, buf), ==, 0);
	CHECK_INT(m.major, ==, major);
	CHECK_INT(m.minor, ==, minor);
	CHECK_STR(m.mountpoint, mountpoint);
	CHECK_STR(m.fstype, fstype);
	CHECK_STR(m.source, source);
}

static void test_lines(void)
{
	struct mountinfo m;
	char buf[512];

	expect("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n",
	       98, 0, "/mnt2", "ext3", "/dev/root");
	/* no optional field; escapes in the mount point and the source */
	expect("120 30 0:52 / /home/u/data\\040set rw,nosuid - fuse.fusefs s3://b/a\\134b rw,user_id=0",
	       0, 52, "/home/u/data set", "fuse.fusefs", "s3://b/a\\b");
	/* several optional fields, an empty source */
	CHECK_INT(parse("1 2 259:3 / /x rw shared:5 master:2 propagate_from:1 - tmpfs  rw", &m, buf),
		  ==, 0);
	CHECK_STR(m.fstype, "tmpfs");
	CHECK_STR(m.source, "");
	/* not mountinfo lines */
	CHECK_INT(parse("", &m, buf), ==, -EINVAL);
	CHECK_INT(parse("36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 ext3 /dev/root rw", &m, buf),
		  ==, -EINVAL);			/* no " - " */
	CHECK_INT(parse("36 35 98-0 / /m rw - ext4 /dev/x rw", &m, buf), ==, -EINVAL);
	CHECK_INT(parse("36 35 98: / /m rw - ext4 /dev/x rw", &m, buf), ==, -EINVAL);
	CHECK_INT(parse("36 35 98:0 / /m rw -", &m, buf), ==, -EINVAL);
	CHECK_INT(parse("36 35 98:0 / /m rw - ext4", &m, buf), ==, -EINVAL);
	CHECK_INT(parse("36 35 98:0 /", &m, buf), ==, -EINVAL);
}

static int find_root(const struct mountinfo *m, void *arg)
{
	int *n = arg;

	if (!strcmp(m->mountpoint, "/"))
		++*n;
	return 0;
}

static int stop_at_first(const struct mountinfo *m, void *arg)
{
	(void)m;
	++*(int *)arg;
	return 7;
}

/* the real table: "/" is in it; a non-zero return stops the walk; the
 * top of "/" and of a path where nothing is mounted */
static void test_this_process(void)
{
	struct mountinfo_top top;
	int n = 0;

	CHECK_INT(mountinfo_each(find_root, &n), ==, 0);
	CHECK(n >= 1);
	n = 0;
	CHECK_INT(mountinfo_each(stop_at_first, &n), ==, 7);
	CHECK_INT(n, ==, 1);
	CHECK_INT(mountinfo_top("/", &top), ==, 0);
	CHECK(top.fstype[0] != '\0');
	CHECK_INT(mountinfo_top("/no/such/mount/point", &top), ==, -ENOENT);
}

int main(void)
{
	runner_name = "test_mountinfo";
	TEST(test_lines);
	TEST(test_this_process);
	return runner_done();
}
