/* SPDX-License-Identifier: MIT */
/*
 * passthrough.h - FUSE passthrough on libfuse 3.14: the kernel reads a
 * complete, verified cache file directly, and the daemon leaves the data
 * path of that open.
 *
 * libfuse 3.14 has no API for it (3.17 added one).  This module wraps the
 * session's device I/O with fuse_session_custom_io(), which 3.14 exports
 * and routes every read and writev of the session through (clone fds
 * included).  On the way in it notes the INIT request and whether the
 * kernel offers FUSE_PASSTHROUGH; on the way out it patches two replies:
 *  - INIT: FUSE_PARALLEL_DIROPS when the kernel offered it (libfuse 3.14
 *    wants it by default but leaves it out of the reply, and the kernel
 *    then runs the LOOKUPs and READDIRs of one directory one at a time;
 *    so the device is wrapped with passthrough off too); FUSE_INIT_EXT |
 *    FUSE_PASSTHROUGH and max_stack_depth 1, when the kernel offered it,
 *    passthrough is wanted and the daemon may use it (CAP_SYS_ADMIN: the
 *    backing ioctls need it);
 *  - OPEN: FOPEN_PASSTHROUGH and the backing id, for the open reply a
 *    handler marked with passthrough_mark_reply() just before sending it
 *    (on the same thread: libfuse writes a reply from the thread that
 *    calls fuse_reply_*()).
 * The 3.14 reply structs have the needed fields at the offsets of the
 * newer kernel headers (fuse_init_out.unused[0] = max_stack_depth,
 * fuse_open_out.padding = backing_id): checked with static assertions.
 *
 * Everything else on the device passes through untouched.
 */
#ifndef FUSEFS_PASSTHROUGH_H
#define FUSEFS_PASSTHROUGH_H

#include <stdbool.h>
#include <stdint.h>

struct fuse_session;
struct passthrough;

enum passthrough_mode { PASSTHROUGH_OFF, PASSTHROUGH_AUTO };

/*
 * passthrough_setup() - after fuse_session_mount(), before the loop:
 * wrap the session's device.  With PASSTHROUGH_OFF only the INIT reply's
 * parallel directory operations are patched in.
 * Return: 0, or -errno (the mount then goes on without passthrough).
 */
int passthrough_setup(struct passthrough **out, struct fuse_session *se,
		      enum passthrough_mode mode);
void passthrough_destroy(struct passthrough *pt);
/*
 * passthrough_active() - negotiated at INIT (false before INIT, after a
 * refusal, or when off).  The reason is logged once at INIT.
 */
bool passthrough_active(const struct passthrough *pt);
/*
 * passthrough_acquire() - the mode of one more open of inode @ino: the
 * kernel rejects a passthrough open beside a cached-mode one, and all
 * passthrough opens of an inode share one backing file.  So an inode
 * with opens keeps its mode (and backing file: a newer version of the
 * object is seen by opens after the last of them closed); an inode
 * without opens goes passthrough on @file_fd if it is >= 0 (a complete,
 * verified cache file) and passthrough is active.
 * Return: a backing id > 0 (reply with passthrough_mark_reply()), or 0
 * (cached mode).  Pair every call with passthrough_release().
 */
int passthrough_acquire(struct passthrough *pt, uint64_t ino, int file_fd);
/* passthrough_release() - one open of @ino closed */
void passthrough_release(struct passthrough *pt, uint64_t ino);
/*
 * passthrough_backing_open() - register @fd (a cache file opened for
 * reading) with the kernel.  Return: a backing id > 0, or -errno.
 */
int passthrough_backing_open(struct passthrough *pt, int fd);
/* passthrough_backing_close() - the last open using @id has gone */
void passthrough_backing_close(struct passthrough *pt, int id);
/*
 * passthrough_mark_reply() - the next OPEN reply this thread sends is a
 * passthrough open on backing @id.  Call right before fuse_reply_open().
 */
void passthrough_mark_reply(int id);

#endif
