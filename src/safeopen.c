// SPDX-License-Identifier: MIT
/* safeopen.c - see safeopen.h */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safeopen.h"

int safe_open(const char *path, int flags, mode_t mode)
{
	return safe_openat(AT_FDCWD, path, flags, mode);
}

int safe_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	int fd = openat(dirfd, path, flags | O_NOFOLLOW, mode), err;
	struct stat st;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st)) {
		err = errno;
	} else if (!S_ISREG(st.st_mode)) {
		err = EINVAL;
	} else if (st.st_nlink != 1) {
		err = EMLINK;
	} else if (st.st_uid != geteuid() || (st.st_mode & S_IWOTH)) {
		err = EPERM;
	} else {
		return fd;
	}
	close(fd);
	errno = err;
	return -1;
}
