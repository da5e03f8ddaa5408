/* SPDX-License-Identifier: MIT */
/*
 * ctl.h - the control files under MNT/.fusefs/, usable by any process
 * that sees the mount (a training container next to a fusefs sidecar, a
 * notebook user): no socket, no root, no access to the cache directory.
 *
 *   .fusefs/stats          read: every counter ("name value" lines)
 *   .fusefs/lists/NAME     write: an epoch list (header lines "# epoch N",
 *                          "# begin [N] [at K]", then one path per line;
 *                          lists.h, docs/epochs.md), acted on when the
 *                          writer closes it; close() fails with EINVAL if
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
 * .fusefs is not listed by readdir of the root, so dataset walks do not
 * see it; an object called ".fusefs" at the top is shadowed by it.
 * Inodes 2..0xffff are reserved for these files (ns.h).  This module has
 * no FUSE knowledge: fs.c maps requests onto it.
 */
#ifndef FUSEFS_CTL_H
#define FUSEFS_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cache.h"
#include "lists.h"
#include "nsmgr.h"
#include "prefetch.h"
#include "stats.h"

#define CTL_NAME	".fusefs"

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
};

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
/* ctl_readdir() - the @i-th entry of control directory @dir: name and
 * inode; false past the end */
bool ctl_readdir(struct ctl *c, uint64_t dir, size_t i, const char **name,
		 uint64_t *ino);
/* ctl_is_writable() - may @ino be opened for writing */
bool ctl_is_writable(struct ctl *c, uint64_t ino);
/* ctl_read() - the text of readable @ino, malloc'ed; NULL + errno */
char *ctl_read(struct ctl *c, uint64_t ino, size_t *len);
/*
 * ctl_commit() - act on @len bytes written to @ino.  *@report gets a
 * malloc'ed text (may be NULL).  Return 0 or -errno.
 */
int ctl_commit(struct ctl *c, uint64_t ino, const char *buf, size_t len,
	       char **report);
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
/* ctl_note_open() - a reader opened file @fid; @ready if fully cached */
void ctl_note_open(struct ctl *c, uint64_t fid, bool ready);
/* ctl_rewarm() - publish the @n hottest files not cached as list "warm" */
int ctl_rewarm(struct ctl *c, unsigned n);

#endif
