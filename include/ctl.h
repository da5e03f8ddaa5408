/* SPDX-License-Identifier: MIT */
/*
 * ctl.h - the control files under MNT/.fusefs/, usable by any process
 * that sees the mount (a training container next to a fusefs sidecar, a
 * notebook user): no socket, no root, no access to the cache directory.
 *
 *   .fusefs/stats          read: every counter ("name value" lines)
 *   .fusefs/lists/NAME     write: an epoch list (header lines "# epoch N",
 *                          "# begin [N] [at K]", then one path per line;
 *                          lists.h, docs/epochs.md), acted on at the
 *                          first close of the open file (fs_ctl.c: a
 *                          failed write fails every later write and
 *                          close, a write after it fails with EPIPE);
 *                          close() fails with EINVAL if
 *                          there was neither a path nor a begin, ESTALE
 *                          for an epoch older than the current one, EBUSY
 *                          when later epochs fill the queue, ENOSPC for
 *                          too many lists.  A begin alone ("# begin 3")
 *                          marks the start of an epoch.
 *                          read: the list's status and its last report.
 *   .fusefs/pin, unpin     write: paths (files or directories), one a line
 *   .fusefs/evict          write: paths to drop from the cache now
 *   .fusefs/heat           read: "path score opens last bytes cached" TSV,
 *                          hottest first
 *   .fusefs/warm           write: paths or a heat TSV: fetched hottest
 *                          first (published as the list "warm")
 *
 * Who may do what (docs/control-access.md): a privileged caller (root,
 * the daemon's user, a member of --control-group) may do everything.
 * Anyone else may read stats and lists and publish lists of their own:
 * at most --user-lists names (EDQUOT), not the last names and lists kept
 * for privileged callers (ENOSPC), never over another user's list
 * (EACCES at open, EPERM at publish); at most --user-buffers control
 * files open (EMFILE) buffering memory-limit/16 bytes in all (EDQUOT).
 * pin, unpin, evict, warm, refresh and heat are theirs alone (EACCES).  A pin of
 * the whole tree, or one that would leave more than --pin-max percent
 * of the cache pinned, is refused (EINVAL, "refused: ..." in the report,
 * a log line), whoever asks.  Control-file text is charged to the
 * memory budget (MB_CTL, membudget.h): ENOBUFS when it is used up.
 *
 * .fusefs is not listed by readdir of the root, so dataset walks do not
 * see it; an object or directory called ".fusefs" at the top is shadowed
 * by it: ns_build leaves it out of the tree, counted and logged.
 * Inodes 2..0xffff are reserved for these files (ns.h).  This module has
 * no FUSE knowledge: fs.c maps requests onto it.
 */
#ifndef FUSEFS_CTL_H
#define FUSEFS_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sys/types.h>

#include "cache.h"
#include "conf.h"
#include "lists.h"
#include "membudget.h"
#include "nsmgr.h"
#include "prefetch.h"
#include "stats.h"

#define CTL_NAME	NS_CTL_NAME

enum ctl_kind {
	CTL_NONE,		/* not a control inode */
	CTL_DIR,		/* .fusefs */
	CTL_LISTS,		/* .fusefs/lists */
	CTL_STATS,
	CTL_HEAT,
	CTL_PIN,
	CTL_UNPIN,
	CTL_EVICT,
	CTL_WARM,
	CTL_REFRESH,		/* any write: re-list now (nsmgr_refresh) */
	CTL_LIST,		/* .fusefs/lists/NAME */
};

struct ctl_deps {
	struct stats *st;
	struct cache *cache;
	struct nsmgr *nm;
	struct lists *lists;
	struct prefetcher *pf;
	const struct fusefs_conf *cf;	/* quotas; NULL: the defaults */
	struct membudget *mem;		/* control text; NULL: not charged */
};

/* who asks (fs_ctl.c takes it from the FUSE request) */
struct ctl_who {
	uid_t uid;
	bool privileged;	/* root, the daemon's user, --control-group */
};

/* the daemon itself (re-warming, the unit tests): privileged */
extern const struct ctl_who CTL_OWNER;

struct ctl;

struct ctl *ctl_create(const struct ctl_deps *d);
void ctl_destroy(struct ctl *c);

/* ctl_kind() - what inode @ino is */
enum ctl_kind ctl_kind(struct ctl *c, uint64_t ino);
/*
 * ctl_lookup() - child @name of control directory (or root) @parent.
 * *@ino is its inode, or 0 when @parent is not a control directory (or
 * is the root and @name is not .fusefs): the name is the dataset's.
 * With @create, a list name that does not exist yet gets an inode.
 * Return: 0, or -ENOENT (a control directory without that entry).
 */
int ctl_lookup(struct ctl *c, uint64_t parent, const char *name, bool create,
	       uint64_t *ino);
/* ctl_shadows() - is @name in directory @parent the control directory's
 * (a dataset entry of that name is neither looked up nor listed) */
bool ctl_shadows(uint64_t parent, const char *name);
/* ctl_readdir() - the @i-th entry of control directory @dir: name and
 * inode; false past the end */
bool ctl_readdir(struct ctl *c, uint64_t dir, size_t i, const char **name,
		 uint64_t *ino);
/* ctl_is_writable() - may @ino be opened for writing */
bool ctl_is_writable(struct ctl *c, uint64_t ino);
/*
 * ctl_access() - may @w open @ino for reading or (@write) writing.
 * Return: 0 or -EACCES (heat, pin, unpin, evict, warm, refresh:
 * privileged callers only; a list: its owner for writing).
 */
int ctl_access(struct ctl *c, uint64_t ino, const struct ctl_who *w,
	       bool write);
/* ctl_owner() - who owns control inode @ino: a list's creator, else the
 * daemon's user */
uid_t ctl_owner(struct ctl *c, uint64_t ino);
/*
 * ctl_create_list() - list @name under @parent for @w (O_CREAT): its
 * inode, made and owned by @w if new.  Return: 0, -EROFS (@parent is not
 * lists/), -EINVAL (a bad name), -EDQUOT, -ENOSPC, -EACCES (another
 * user's list), -ENOMEM.
 */
int ctl_create_list(struct ctl *c, uint64_t parent, const char *name,
		    const struct ctl_who *w, uint64_t *ino);
/*
 * Control-file buffers: ctl_buffer_open() when a control file is opened
 * (0, or -EMFILE: @w holds --user-buffers open), ctl_buffer_grow() before
 * its buffer grows by @bytes (0, -EDQUOT past @w's share, -ENOBUFS past
 * the budget's; with @text, the text made for a read, charged even past
 * the budget so that reading stats never fails for memory),
 * ctl_buffer_close() at release with every byte grown.
 * ctl_buffer_shrink() takes back a grow whose allocation failed: the
 * bytes go back to @w's share and to the budget.
 */
int ctl_buffer_open(struct ctl *c, const struct ctl_who *w);
int ctl_buffer_grow(struct ctl *c, const struct ctl_who *w, uint64_t bytes,
		    bool text);
void ctl_buffer_shrink(struct ctl *c, const struct ctl_who *w,
		       uint64_t bytes);
void ctl_buffer_close(struct ctl *c, const struct ctl_who *w,
		      uint64_t bytes);
/* ctl_read() - the text of readable @ino, malloc'ed; NULL + errno */
char *ctl_read(struct ctl *c, uint64_t ino, size_t *len);
/*
 * ctl_commit() - act on @len bytes written to @ino.  *@report gets a
 * malloc'ed text (may be NULL).  Return 0 or -errno.
 */
int ctl_commit(struct ctl *c, uint64_t ino, const char *buf, size_t len,
	       char **report);
/* ctl_commit_as() - the same on behalf of @w: -EACCES, -EPERM, -EDQUOT,
 * -ENOSPC as described at the top */
int ctl_commit_as(struct ctl *c, uint64_t ino, const struct ctl_who *w,
		  const char *buf, size_t len, char **report);
/*
 * ctl_commit_list() - publish list @name from @buf (see ctl_commit and
 * lists_publish() for the return codes); *@report starts with
 * "list NAME: published", "list NAME: epoch begun" or
 * "list NAME: NOT published..."
 */
int ctl_commit_list(struct ctl *c, const char *name, const char *buf,
		    size_t len, char **report);
/* ctl_stats_text() - the report (report.h), lists included; malloc'ed */
char *ctl_stats_text(struct ctl *c, size_t *len);
/* ctl_rewarm() - publish the @n hottest files not cached as list "warm" */
int ctl_rewarm(struct ctl *c, unsigned n);

#endif
