// SPDX-License-Identifier: MIT
/* passthrough.c - see passthrough.h */
#define FUSE_USE_VERSION 314
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fuse_lowlevel.h>
#include <linux/capability.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "htab.h"
#include "log.h"
#include "passthrough.h"

/* kernel 6.9+ uapi (protocol 7.40), missing from Debian 12's headers */
#ifndef FUSE_PASSTHROUGH
#define FUSE_PASSTHROUGH	(1ULL << 37)
#endif
#ifndef FOPEN_PASSTHROUGH
#define FOPEN_PASSTHROUGH	(1 << 7)
#endif
struct pt_backing_map {
	int32_t fd;
	uint32_t flags;
	uint64_t padding;
};
#define PT_IOC_BACKING_OPEN	_IOW(229, 1, struct pt_backing_map)
#define PT_IOC_BACKING_CLOSE	_IOW(229, 2, uint32_t)
#define PT_MAX_STACK_DEPTH	1

/* the fields the newer headers name sit where 3.14's spare words are */
_Static_assert(offsetof(struct fuse_init_out, flags2) == 32, "flags2");
_Static_assert(offsetof(struct fuse_init_out, unused) == 36,
	       "max_stack_depth is unused[0]");
_Static_assert(offsetof(struct fuse_init_in, flags2) == 16, "init_in flags2");
_Static_assert(offsetof(struct fuse_open_out, padding) == 12,
	       "backing_id is padding");
_Static_assert(sizeof(struct fuse_open_out) == 16, "fuse_open_out");

/* an inode with opens: their mode */
struct pt_inode {
	uint64_t ino;
	unsigned opens;
	int backing_id;			/* > 0: passthrough, 0: cached */
	bool opening;			/* its first open is in the ioctl */
};

struct passthrough {
	pthread_mutex_t lock;		/* guards inodes; a leaf lock, never
					 * held across a system call */
	pthread_cond_t opened;		/* an inode's opening ended */
	struct htab inodes;		/* ino -> pt_inode, while open */
	int fd;				/* the session's device */
	enum passthrough_mode mode;
	/* the INIT request, 0: not seen or answered; every writev reads it
	 * (notifications from other threads too): atomic */
	_Atomic uint64_t init_unique;
	bool offered;			/* the kernel offered passthrough */
	bool pdirops;			/* ... and parallel directory ops */
	bool active;			/* negotiated */
};

static __thread int tl_backing_id;
/*
 * The wrapped session's state.  libfuse 3.14 hands the custom I/O the
 * session's userdata (the file system's), not ours: one session per
 * process, so one instance.
 */
static struct passthrough *the_pt;

static bool may_use(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return false;
	return d[CAP_SYS_ADMIN / 32].effective & (1U << (CAP_SYS_ADMIN % 32));
}

static ssize_t pt_read(int fd, void *buf, size_t len, void *ud)
{
	struct passthrough *pt = the_pt;
	ssize_t r = read(fd, buf, len);
	const struct fuse_in_header *in = buf;

	if (pt && r >= (ssize_t)(sizeof(*in) + offsetof(struct fuse_init_in, flags) +
			   sizeof(uint32_t)) &&
	    in->opcode == FUSE_INIT) {
		const struct fuse_init_in *ii = (const void *)(in + 1);

		atomic_store_explicit(&pt->init_unique, in->unique,
				      memory_order_relaxed);
		pt->pdirops = ii->flags & FUSE_PARALLEL_DIROPS;
		/* flags2 exists from protocol 7.36 on */
		pt->offered = r >= (ssize_t)(sizeof(*in) +
				offsetof(struct fuse_init_in, flags2) +
				sizeof(uint32_t)) &&
			      (ii->flags & FUSE_INIT_EXT) &&
			      (ii->flags2 & (uint32_t)(FUSE_PASSTHROUGH >> 32));
	}
	return r;
}

/*
 * The INIT reply: parallel directory operations when offered, and
 * passthrough when offered, wanted and allowed.  libfuse 3.14 wants
 * FUSE_CAP_PARALLEL_DIROPS by default but never copies it into the reply
 * (its do_init() has no line for it), so the kernel took a per-directory
 * mutex around every LOOKUP and READDIR: stat()s of the files of one
 * directory from several threads ran one at a time.  The handlers of
 * both are safe to run concurrently (nsmgr's rwlock, ctl's lock).
 */
static void patch_init(struct passthrough *pt, struct iovec *iov, int count)
{
	struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_init_out *io;

	atomic_store_explicit(&pt->init_unique, 0, memory_order_relaxed);
	if (out->error || count < 2 ||
	    iov[1].iov_len < offsetof(struct fuse_init_out, flags) + 4)
		return;
	io = iov[1].iov_base;
	if (pt->pdirops)
		io->flags |= FUSE_PARALLEL_DIROPS;
	if (pt->mode == PASSTHROUGH_OFF)
		return;
	if (iov[1].iov_len < offsetof(struct fuse_init_out, unused) + 4)
		return;
	if (!pt->offered) {
		log_info("passthrough: the kernel does not offer it; reads go through the daemon");
		return;
	}
	if (!may_use()) {
		log_info("passthrough: needs CAP_SYS_ADMIN; reads go through the daemon");
		return;
	}
	io->flags |= FUSE_INIT_EXT;
	io->flags2 |= (uint32_t)(FUSE_PASSTHROUGH >> 32);
	io->unused[0] = PT_MAX_STACK_DEPTH;
	pt->active = true;
	log_info("passthrough: on (complete cached files are read by the kernel directly)");
}

/* an OPEN reply marked by its handler: passthrough on the backing id */
static void patch_open(struct iovec *iov, int count)
{
	struct fuse_out_header *out = iov[0].iov_base;
	struct fuse_open_out *oo;
	int id = tl_backing_id;

	tl_backing_id = 0;
	if (out->error || count != 2 || iov[1].iov_len != sizeof(*oo))
		return;
	oo = iov[1].iov_base;
	/* the kernel takes only these beside FOPEN_PASSTHROUGH */
	oo->open_flags &= FOPEN_DIRECT_IO | FOPEN_NOFLUSH |
			  FOPEN_PARALLEL_DIRECT_WRITES;
	oo->open_flags |= FOPEN_PASSTHROUGH;
	oo->padding = (uint32_t)id;
}

static ssize_t pt_writev(int fd, struct iovec *iov, int count, void *ud)
{
	struct passthrough *pt = the_pt;
	const struct fuse_out_header *out = iov[0].iov_base;

	if (pt && count >= 1 && iov[0].iov_len >= sizeof(*out)) {
		uint64_t init = atomic_load_explicit(&pt->init_unique,
						     memory_order_relaxed);

		if (init && out->unique == init)
			patch_init(pt, iov, count);
		else if (tl_backing_id > 0)
			patch_open(iov, count);
	}
	return writev(fd, iov, count);
}

static uint64_t inode_key(const void *item)
{
	return ((const struct pt_inode *)item)->ino;
}

int passthrough_setup(struct passthrough **out, struct fuse_session *se,
		      enum passthrough_mode mode)
{
	static const struct fuse_custom_io io = {
		.read = pt_read,
		.writev = pt_writev,
	};
	struct passthrough *pt = calloc(1, sizeof(*pt));

	if (!pt)
		return -ENOMEM;
	pt->mode = mode;
	pt->fd = fuse_session_fd(se);
	pthread_mutex_init(&pt->lock, NULL);
	pthread_cond_init(&pt->opened, NULL);
	htab_init(&pt->inodes, inode_key);
	*out = pt;
	if (mode == PASSTHROUGH_OFF)
		log_info("passthrough: off (--passthrough off)");
	/* also with passthrough off: the INIT reply's parallel dirops */
	the_pt = pt;
	if (fuse_session_custom_io(se, &io, pt->fd)) {
		the_pt = NULL;
		log_warn("cannot wrap the FUSE device: no passthrough, lookups in one directory one at a time");
		return -EIO;
	}
	return 0;
}

void passthrough_destroy(struct passthrough *pt)
{
	size_t i;

	if (!pt)
		return;
	if (the_pt == pt)
		the_pt = NULL;
	for (i = 0; i < pt->inodes.cap; i++)
		free(pt->inodes.slot[i]);
	htab_release(&pt->inodes);
	pthread_cond_destroy(&pt->opened);
	pthread_mutex_destroy(&pt->lock);
	free(pt);
}

/*
 * The first open of an inode registers its backing file with an ioctl on
 * /dev/fuse, the last release unregisters it; both outside pt->lock, so
 * that the workers opening other files do not queue behind a system call
 * (a warm epoch of small files opens and releases one inode per file).
 * Opens of the inode meanwhile wait for the first one's outcome.
 */
int passthrough_acquire(struct passthrough *pt, uint64_t ino, int file_fd)
{
	struct pt_inode *pi;
	int id = 0;

	if (!passthrough_active(pt))
		return 0;
	pthread_mutex_lock(&pt->lock);
	pi = htab_get(&pt->inodes, ino);
	if (pi) {
		/* open already: its mode, once its first open has one */
		pi->opens++;
		while (pi->opening)
			pthread_cond_wait(&pt->opened, &pt->lock);
		id = pi->backing_id;
		pthread_mutex_unlock(&pt->lock);
		return id;
	}
	pi = calloc(1, sizeof(*pi));
	if (pi) {
		pi->ino = ino;
		pi->opens = 1;
		pi->opening = file_fd >= 0;
		if (htab_put(&pt->inodes, pi)) {
			free(pi);
			pi = NULL;
		}
	}
	pthread_mutex_unlock(&pt->lock);
	if (!pi || file_fd < 0)
		return 0;		/* cached mode (or no memory for it) */
	id = passthrough_backing_open(pt, file_fd);
	if (id < 0) {
		log_warn("passthrough: backing file refused: %s; this open goes through the daemon",
			 strerror(-id));
		id = 0;
	}
	pthread_mutex_lock(&pt->lock);
	pi->backing_id = id;
	pi->opening = false;
	pthread_cond_broadcast(&pt->opened);
	pthread_mutex_unlock(&pt->lock);
	return id;
}

void passthrough_release(struct passthrough *pt, uint64_t ino)
{
	struct pt_inode *pi;

	if (!passthrough_active(pt))
		return;
	pthread_mutex_lock(&pt->lock);
	pi = htab_get(&pt->inodes, ino);
	if (pi && --pi->opens == 0)
		htab_del(&pt->inodes, ino);	/* a new open makes its own */
	else
		pi = NULL;
	pthread_mutex_unlock(&pt->lock);
	if (pi) {
		passthrough_backing_close(pt, pi->backing_id);
		free(pi);
	}
}

bool passthrough_active(const struct passthrough *pt)
{
	return pt && pt->active;
}

int passthrough_backing_open(struct passthrough *pt, int fd)
{
	struct pt_backing_map map = { .fd = fd };
	int id;

	if (!passthrough_active(pt))
		return -EOPNOTSUPP;
	id = ioctl(pt->fd, PT_IOC_BACKING_OPEN, &map);
	if (id < 0)
		return -errno;
	return id ? id : -EIO;
}

void passthrough_backing_close(struct passthrough *pt, int id)
{
	uint32_t bid = (uint32_t)id;

	if (id > 0 && ioctl(pt->fd, PT_IOC_BACKING_CLOSE, &bid))
		log_warn("passthrough: closing backing id %d: %s", id,
			 strerror(errno));
}

void passthrough_mark_reply(int id)
{
	tl_backing_id = id;
}
