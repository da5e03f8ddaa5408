// SPDX-License-Identifier: MIT
/* mountsafe.c - see mountsafe.h */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "mountinfo.h"
#include "mountsafe.h"

#define FUSE_MAJOR	10
#define FUSE_MINOR	229

int mountsafe_fd(const char *mnt)
{
	unsigned fd;
	int len = 0;

	if (mnt && sscanf(mnt, "/dev/fd/%u%n", &fd, &len) == 1 &&
	    (size_t)len == strlen(mnt) && fd <= INT_MAX)
		return (int)fd;
	return -1;
}

int mountsafe_check_fd(int fd)
{
	struct stat sb;

	/* going to the background points 0-2 at /dev/null (and -f or not,
	 * a shell's redirection or a logger may reuse them): the mount would
	 * be dead while the command said it worked */
	if (fd <= STDERR_FILENO) {
		fprintf(stderr, "fusefs: /dev/fd/%d is standard %s, which fusefs points at /dev/null when it goes to the background: pass the FUSE device on a file descriptor of 3 or more\n",
			fd, fd == STDIN_FILENO ? "input" :
			fd == STDOUT_FILENO ? "output" : "error");
		return -EBADF;
	}
	if (fcntl(fd, F_GETFD) < 0) {
		fprintf(stderr, "fusefs: /dev/fd/%d is not an open file descriptor: the process that mounted /dev/fuse must pass it to fusefs open (without close-on-exec)\n",
			fd);
		return -EBADF;
	}
	if (fstat(fd, &sb) || !S_ISCHR(sb.st_mode) ||
	    major(sb.st_rdev) != FUSE_MAJOR || minor(sb.st_rdev) != FUSE_MINOR) {
		fprintf(stderr, "fusefs: /dev/fd/%d is not the FUSE device /dev/fuse\n",
			fd);
		return -ENODEV;
	}
	return 0;
}

int mountsafe_check_dir(const char *mnt, bool nonempty)
{
	struct mountinfo_top top;
	struct dirent *de;
	char *real;
	struct stat sb;
	DIR *d;
	int rc;

	/* stat()'s own errno only: a successful stat() leaves errno as
	 * whatever came before (ENOENT from a library's start-up) */
	rc = stat(mnt, &sb) ? -errno : 0;
	if (rc || !S_ISDIR(sb.st_mode)) {
		char why[96] = "";

		if (rc == -ENOENT)
			snprintf(why, sizeof(why), " (it does not exist)");
		else if (rc)
			snprintf(why, sizeof(why), " (%s)", strerror(-rc));
		fprintf(stderr, "fusefs: mount point %s is not a directory%s%s\n",
			mnt, why,
			mountsafe_fd(mnt) < 0 && !strncmp(mnt, "/dev/fd/", 8) ?
			" (FUSE fd passing takes /dev/fd/N)" : "");
		return -ENOTDIR;
	}
	real = realpath(mnt, NULL);
	if (!real)
		return -errno;
	rc = mountinfo_top(real, &top);
	free(real);
	if (!rc && !strncmp(top.fstype, "fuse", 4)) {
		fprintf(stderr, "fusefs: %s is already a live FUSE mount (%s, %s): refusing to mount on top of it; unmount it first (fusefs umount %s)\n",
			mnt, top.fstype, top.source, mnt);
		return -EBUSY;
	}
	if (nonempty)
		return 0;
	d = opendir(mnt);
	if (!d) {
		rc = -errno;
		fprintf(stderr, "fusefs: cannot read mount point %s: %s\n", mnt,
			strerror(-rc));
		return rc;
	}
	while ((de = readdir(d)) &&
	       (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")))
		;
	rc = 0;
	if (de) {
		fprintf(stderr, "fusefs: mount point %s is not empty (it holds '%s'): mounting would hide its contents; use an empty directory, or -o nonempty to mount over it\n",
			mnt, de->d_name);
		rc = -ENOTEMPTY;
	}
	closedir(d);
	return rc;
}

/* "37.2G": @v bytes for a message */
static const char *human(uint64_t v, char *buf, size_t len)
{
	static const char unit[] = "BKMGTPE";
	double x = (double)v;
	int i = 0;

	while (x >= 1024 && unit[i + 1]) {
		x /= 1024;
		i++;
	}
	if (i)
		snprintf(buf, len, "%.1f%c", x, unit[i]);
	else
		snprintf(buf, len, "%" PRIu64, v);
	return buf;
}

/* nftw() has no argument for its callback; used at start-up only */
static uint64_t walk_bytes;

static int add_file(const char *path, const struct stat *sb, int type,
		    struct FTW *ftw)
{
	if (type == FTW_F && S_ISREG(sb->st_mode))
		walk_bytes += (uint64_t)sb->st_blocks * 512;
	return 0;
}

/* disk space used by the regular files below @dir (what a restart reuses) */
static uint64_t dir_bytes(const char *dir)
{
	walk_bytes = 0;
	nftw(dir, add_file, 16, FTW_PHYS | FTW_MOUNT);
	return walk_bytes;
}

int mountsafe_cache_size(struct fusefs_conf *cf)
{
	char a[16], b[16], c[16], d[16], want[64];
	uint64_t total, avail, held, room, min = 4ULL * cf->chunk_size;
	struct statvfs sv;

	if (statvfs(cf->cache_dir, &sv)) {
		int rc = -errno;

		fprintf(stderr, "fusefs: cannot examine the file system of %s: %s\n",
			cf->cache_dir, strerror(-rc));
		return rc;
	}
	total = (uint64_t)sv.f_blocks * sv.f_frsize;
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (cf->cache_size_pct) {
		cf->cache_size = total / 100 * cf->cache_size_pct;
		snprintf(want, sizeof(want), "%u%% (%s of %s)", cf->cache_size_pct,
			 human(cf->cache_size, a, sizeof(a)),
			 human(total, b, sizeof(b)));
	} else {
		snprintf(want, sizeof(want), "%s", human(cf->cache_size, a, sizeof(a)));
	}
	/* walking a big cache costs ~1 s per 100k files: only when needed */
	held = cf->cache_size > avail ? dir_bytes(cf->cache_dir) : 0;
	room = avail + held;
	if (cf->cache_size > room) {
		human(avail, b, sizeof(b));
		human(held, c, sizeof(c));
		human(room, d, sizeof(d));
		if (cf->cache_size_given) {
			fprintf(stderr, "fusefs: --cache-size %s is more than the cache can get on the file system of %s: %s free there, plus %s the cache directory already holds, is %s; choose a smaller size or a percentage such as 90%%\n",
				want, cf->cache_dir, b, c, d);
			return -ENOSPC;
		}
		room = room / 10 * 9;
		room -= room % cf->chunk_size;
		fprintf(stderr, "fusefs: warning: the default --cache-size %s is more than the file system of %s can hold (%s free, plus %s already cached): using 90%% of that, %s; set --cache-size to choose\n",
			want, cf->cache_dir, b, c, human(room, d, sizeof(d)));
		cf->cache_size = room;
	}
	if (cf->cache_size < min) {
		fprintf(stderr, "fusefs: --cache-size must hold at least 4 chunks (%" PRIu64 " bytes)%s%s\n",
			min, cf->cache_size_pct || !cf->cache_size_given ?
			": it resolves to " : "",
			cf->cache_size_pct || !cf->cache_size_given ?
			human(cf->cache_size, a, sizeof(a)) : "");
		return -EINVAL;
	}
	return 0;
}
