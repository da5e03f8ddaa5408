// SPDX-License-Identifier: MIT
/* cache_move.c - a lent data file's kept chunks moved to a new file (see
 * cache_priv.h, cache_move_head()) */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "cache_priv.h"

void cache_move_path(const struct cache *c, uint64_t fid, uint64_t gen,
		     char *out, size_t len)
{
	snprintf(out, len, "data/%02x/" CACHE_MOVE_PREFIX "%016" PRIx64
		 "-%016" PRIx64, (unsigned)(fid & 0xff), fid, gen);
}

/* @len bytes at @off of @in to the same offset of @out */
static int copy_range(int in, int out, uint64_t off, uint64_t len)
{
	loff_t from = (loff_t)off, to = (loff_t)off;

	while (len) {
		ssize_t n = copy_file_range(in, &from, out, &to, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)		/* the file is shorter than its index */
			return -EIO;
		len -= (uint64_t)n;
	}
	return 0;
}

int cache_move_head(struct cache *c, const struct centry *ce, uint32_t end)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	int in = ce->fd, out, rc = 0;
	uint32_t n;

	cache_data_path(c, ce->fid, ce->gen, path, sizeof(path));
	cache_move_path(c, ce->fid, ce->gen, tmp, sizeof(tmp));
	if (in < 0)
		in = cache_data_open(c, path, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	/* a leftover of a crash (or anything planted) goes first */
	if (unlinkat(c->dirfd, tmp, 0) && errno != ENOENT) {
		rc = -errno;
		goto out_in;
	}
	out = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC |
		     O_NOFOLLOW, 0600);
	if (out < 0) {
		rc = -errno;
		goto out_in;
	}
	for (n = 0; n < end && !rc; n++)
		if (ce->state[n] == CH_PRESENT || ce->state[n] == CH_UNVERIFIED)
			rc = copy_range(in, out, (uint64_t)n * c->chunk_size,
					cache_chunk_len(c, ce, n));
	if (!rc && renameat(c->dirfd, tmp, c->dirfd, path))
		rc = -errno;
	if (rc)
		unlinkat(c->dirfd, tmp, 0);
	close(out);
out_in:
	if (in != ce->fd)
		close(in);
	return rc;
}
