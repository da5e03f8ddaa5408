/* SPDX-License-Identifier: MIT */
/*
 * openbound.h - how many files of the dataset users other than the
 * mount's owner may hold open: each open handle keeps a data file of the
 * cache open, so without a bound one local user of an allow_other mount
 * could take every descriptor the daemon has (its owner's opens then
 * failing with EIO, a refresh failing).  Two bounds, both answered with
 * EMFILE, like the control files' --user-buffers (ctl.h):
 *
 *   per user     at most --user-opens handles for each such user;
 *   in all       at most @others_max handles for all of them together,
 *                set from RLIMIT_NOFILE (openbound_others_max()) so that
 *                a reserve stays for the owner's opens, the idle entries'
 *                files and the daemon's own descriptors.
 *
 * The owner (root and the daemon's user) is never counted.  No FUSE
 * knowledge; thread-safe (one mutex, a leaf).
 */
#ifndef FUSEFS_OPENBOUND_H
#define FUSEFS_OPENBOUND_H

#include <stdbool.h>
#include <sys/types.h>

struct openbound;

/* descriptors kept for the daemon (index, sockets, logs, FUSE): as cache.c */
#define OPENBOUND_RESERVE	512

/*
 * openbound_others_max() - the total for other users under an open-file
 * limit of @nofile: a quarter of what is left after OPENBOUND_RESERVE
 * (an entry may hold two descriptors: half for them, the other half and
 * the reserve for the owner and the daemon), at least 1.
 */
unsigned openbound_others_max(unsigned long nofile);
/* openbound_create() - NULL without memory */
struct openbound *openbound_create(unsigned per_user, unsigned others_max);
void openbound_destroy(struct openbound *b);
/* openbound_is_owner() - is @uid the mount's owner (root, the daemon's
 * user): never counted */
bool openbound_is_owner(uid_t uid);
/*
 * openbound_get() - one more handle for @uid.  Return: 0 (counted; the
 * owner: not counted), or -EMFILE (@uid holds its --user-opens, or other
 * users hold @others_max), logged at most once a minute.
 */
int openbound_get(struct openbound *b, uid_t uid);
/* openbound_put() - the handle openbound_get() counted is closed */
void openbound_put(struct openbound *b, uid_t uid);

#endif
