// SPDX-License-Identifier: MIT
/* manifest_src.c - see manifest_src.h */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "manifest_src.h"

#define PIECE	(8U << 20)

struct sync_read {
	struct backend_read rd;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	ssize_t ret;
};

static void sync_done(struct backend_read *rd, ssize_t ret)
{
	struct sync_read *s = (struct sync_read *)rd;

	pthread_mutex_lock(&s->lock);
	s->ret = ret;
	s->done = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

/* one synchronous backend read of @len bytes at @off into @buf, of
 * version @version (the backend refuses another: -ESTALE) */
static ssize_t read_piece(struct backend *be, const char *key,
			  const char *version, uint64_t off, char *buf,
			  size_t len)
{
	struct sync_read s = {
		.rd = { .key = key, .version = version, .off = off,
			.len = len, .buf = buf, .done = sync_done },
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.cond = PTHREAD_COND_INITIALIZER,
	};
	int rc = be->ops->read(be, &s.rd);

	if (rc)
		return rc;
	pthread_mutex_lock(&s.lock);
	while (!s.done)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	return s.ret;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* the whole object behind @url, copied into a memory file */
static int fetch_remote(const struct fusefs_conf *cf, const char *url,
			int *out)
{
	struct fusefs_conf mcf = *cf;
	struct backend *be = NULL;
	struct ns_attr a;
	uint64_t off = 0;
	char *buf = NULL;
	int fd = -1, rc;

	mcf.source = (char *)url;
	rc = backend_open(&be, &mcf);
	if (rc)
		return rc;
	rc = be->ops->stat(be, be->prefix, &a);
	if (rc) {
		fprintf(stderr, "fusefs: cannot read manifest %s: %s\n", url,
			rc == -ENOENT ? "no such object" : strerror(-rc));
		goto out;
	}
	if (a.size > MANIFEST_REMOTE_MAX) {
		fprintf(stderr, "fusefs: manifest %s is larger than 4 GiB\n", url);
		rc = -EFBIG;
		goto out;
	}
	fd = memfd_create("fusefs-manifest", MFD_CLOEXEC);
	buf = malloc(PIECE);
	if (fd < 0 || !buf) {
		rc = fd < 0 ? -errno : -ENOMEM;
		goto out;
	}
	while (off < a.size) {
		size_t len = a.size - off < PIECE ? a.size - off : PIECE;
		/* every piece of the version stat() saw: never a mix */
		ssize_t got = read_piece(be, be->prefix, a.version, off, buf,
					 len);

		if (got >= 0 && (size_t)got != len)
			got = -ESTALE;		/* changed while read */
		if (got < 0) {
			rc = (int)got;
			fprintf(stderr, "fusefs: cannot read manifest %s: %s\n",
				url, rc == -ESTALE ?
				"it was replaced while being read (try again)" :
				strerror(-rc));
			goto out;
		}
		rc = write_all(fd, buf, len);
		if (rc)
			goto out;
		off += len;
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		rc = -errno;
		goto out;
	}
	*out = fd;
	fd = -1;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	backend_close(be);
	return rc;
}

int manifest_check_url(const char *where)
{
	if (strncmp(where, "file://", 7) && strstr(where, "://") &&
	    backend_has_userinfo(where)) {
		fprintf(stderr, "fusefs: a manifest URL must not contain credentials (USER:KEY@); use the environment or --credentials-file\n");
		return -EINVAL;
	}
	return 0;
}

int manifest_open(const struct fusefs_conf *cf, const char *where, int *fd)
{
	int rc;

	rc = manifest_check_url(where);
	if (rc)
		return rc;
	if (!strncmp(where, "file://", 7))
		where += 7;
	if (strstr(where, "://")) {
		rc = fetch_remote(cf, where, fd);
		if (rc)
			log_err("cannot read manifest %s: %s", where, strerror(-rc));
		return rc;
	}
	*fd = open(where, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		rc = -errno;
		fprintf(stderr, "fusefs: cannot open manifest %s: %s\n", where,
			strerror(-rc));
		log_err("cannot open manifest %s: %s", where, strerror(-rc));
		return rc;
	}
	return 0;
}
