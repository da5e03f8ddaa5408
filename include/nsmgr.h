/* SPDX-License-Identifier: MIT */
/*
 * nsmgr.h - owns the current namespace: builds it from the namespace
 * cache in LMDB (fast remount), from a backend listing, or from a
 * manifest (--manifest: no listing, versions pinned); re-lists in the
 * background right after a mount served from LMDB, every list_refresh
 * seconds and on nsmgr_refresh(), swapping the new tree in; and re-checks
 * single files' versions in the background (stale-while-revalidate,
 * below).  On a manifest mount a re-check never adopts another version:
 * it logs the change, and reads of uncached bytes fail (-ESTALE, EIO).
 *
 * Readers bracket every use of the tree with nsmgr_rdlock()/_unlock();
 * node pointers are not valid after the unlock.
 *
 * Re-checks.  A file's attributes carry the time the backend last
 * vouched for them (ns_attr.checked).  An open of a file whose
 * attributes are older than `revalidate` seconds is answered at once
 * with them, and a re-check (one backend stat / S3 HEAD) is queued:
 * single flight per inode, at most NSMGR_QUEUE_MAX files queued, run by
 * NSMGR_CHECKERS threads.  When a re-check finds another version (or the
 * object gone) it updates the tree and calls the on_change hook, so that
 * the kernel drops what it cached of the file; the next open sees the new
 * version (or ENOENT).  An open must wait for the re-check instead
 * (parked, see nsmgr_open_check()) when `revalidate` is 0, or when a read
 * found the object changed (nsmgr_stale_cb()): then the attributes known
 * are not worth answering with.  A change found by a re-check that a
 * failed read asked for, with no open waiting, is not passed on to the
 * kernel at once (that reader keeps its file size and gets EIO, not an
 * early EOF): the next open waits for a re-check that passes it on.  No
 * caller ever waits on the backend: waits are parked requests answered
 * from a re-check thread.
 *
 * Locks: the tree's rwlock, then the re-check lock or the hold lock
 * (leaves); hooks and nsmgr_wait.done() are called with none held.
 */
#ifndef FUSEFS_NSMGR_H
#define FUSEFS_NSMGR_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "conf.h"
#include "meta.h"
#include "ns.h"
#include "stats.h"

#define NSMGR_CHECKERS	4	/* re-check threads (S3: one pooled handle each) */
#define NSMGR_QUEUE_MAX	4096	/* files queued for a background re-check */
#define NSMGR_GEN_MAX	0x7fffffffu	/* tree generations wrap to 1 after it */
#define NSMGR_IMAGE	"namespace.img"	/* in the cache directory (ns_image.h) */

struct nsmgr;

/* what the namespace tells its user; called on background threads */
struct nsmgr_hooks {
	/* on_swap() - a re-listing replaced the tree */
	void (*on_swap)(void *arg);
	/* on_change() - file @ino has another version, or is gone */
	void (*on_change)(void *arg, uint64_t ino);
	/* on_added() - a re-listing added @name (file or directory) to @parent */
	void (*on_added)(void *arg, uint64_t parent, const char *name);
	void *arg;
};

/* a parked open: nsmgr keeps it from nsmgr_open_check() until done() */
struct nsmgr_wait {
	/*
	 * done() - the re-check answered (on a re-check thread, no lock
	 * held): @err 0 (the attributes are current), -ENOENT (the object
	 * is gone), or -ENOTCONN (nsmgr_stop() before it ran).
	 */
	void (*done)(struct nsmgr_wait *w, int err);
	struct nsmgr_wait *next;	/* nsmgr's */
};

/* nsmgr_open() - load the namespace; -errno with a message printed */
int nsmgr_open(struct nsmgr **out, struct backend *be, struct meta *m,
	       const struct fusefs_conf *cf, struct stats *st);
/* nsmgr_close() - nsmgr_stop() if needed, free everything, held trees
 * too (no nsmgr_release() may follow).  NULL is fine. */
void nsmgr_close(struct nsmgr *nm);

/*
 * nsmgr_start() - start the re-check threads and the re-listing thread
 * (always: it also serves `fusefs refresh` and the background re-listing
 * of a remount; it lists by itself every list_refresh seconds if > 0),
 * which report through @h (copied).  Re-checks
 * queued before are run now.  Return: 0 or -errno (nothing started).
 */
int nsmgr_start(struct nsmgr *nm, const struct nsmgr_hooks *h);
/*
 * nsmgr_stop() - join the background threads (a re-check or listing in
 * progress finishes first); parked opens still queued get -ENOTCONN.  No
 * hook is called afterwards.  Safe without nsmgr_start(), and twice.
 */
void nsmgr_stop(struct nsmgr *nm);

/*
 * nsmgr_refresh() - re-list (or, for a manifest mount, read the manifest
 * again) now, in the background, and swap the new tree in; open files
 * keep their version, open directories the tree they list.  The ns_swaps
 * counter moves once the hooks have run (the kernel was told).
 * Return: 0, or -ENOTCONN before nsmgr_start().
 */
int nsmgr_refresh(struct nsmgr *nm);

struct ns *nsmgr_rdlock(struct nsmgr *nm);
void nsmgr_unlock(struct nsmgr *nm);

/*
 * Held trees.  A directory listing spans several READDIRs and must read
 * one tree throughout: offsets index a tree's entries, and a re-listing
 * in between would skip or repeat names.  Every tree carries a
 * generation (1, 2, ...: one per tree swapped in).  A tree held with
 * nsmgr_hold() stays valid, nodes and strings too, until the matching
 * nsmgr_release(), without the rwlock: a re-listing that replaces it
 * retires it, and the last release of a retired tree frees it (the
 * ns_retired gauge counts the retired trees still held).  Re-checks
 * update the current tree's attributes only.
 */
struct nsmgr_tree {
	struct ns *ns;		/* read it, never free it */
	uint32_t gen;		/* never 0 */
	/* nsmgr's, under its hold lock: */
	unsigned long refs;	/* holders; the manager's while current */
	struct nsmgr_tree *next;	/* on the retired list */
};

/*
 * nsmgr_hold() - hold the tree of generation @gen, 0 for the current one.
 * Return: the tree, or NULL when no tree of @gen is alive (retired and
 * released by all); never NULL for @gen 0.
 */
struct nsmgr_tree *nsmgr_hold(struct nsmgr *nm, uint32_t gen);
/* nsmgr_release() - drop a hold of nsmgr_hold(); NULL is fine */
void nsmgr_release(struct nsmgr *nm, struct nsmgr_tree *t);
/* nsmgr_is_current() - whether held tree @t is the one served now */
bool nsmgr_is_current(struct nsmgr *nm, const struct nsmgr_tree *t);

/*
 * nsmgr_open_check() - may an open of file @ino be answered now?  Never
 * waits on the backend.  Attributes older than `revalidate` queue a
 * background re-check.  If the open must wait for the re-check, @w is
 * parked (*@parked = true) and w->done() will be called exactly once;
 * with @w NULL nothing is parked and -EWOULDBLOCK says that a waiter is
 * needed.  Otherwise *@parked = false and nsmgr_file() has the answer.
 * Return: 0; -ENOENT (no such file, or found gone), -EISDIR,
 * -EWOULDBLOCK (see above), -ENOTCONN (stopped), -ENOMEM: nothing parked.
 */
int nsmgr_open_check(struct nsmgr *nm, uint64_t ino, struct nsmgr_wait *w,
		     bool *parked);
/*
 * nsmgr_file() - the current attributes of file @ino and its object name
 * (*@key malloc'ed, the caller frees it).  Memory only.
 * Return: 0, -ENOENT (no such file, or found gone), -EISDIR, -ENOMEM.
 */
int nsmgr_file(struct nsmgr *nm, uint64_t ino, struct ns_attr *a,
	       char **key);

/*
 * nsmgr_stale_cb() - a read found object @ino changed (fetch_on_stale()'s
 * callback; @arg is the struct nsmgr): re-check it now; opens wait for
 * that re-check.  Any thread; never blocks on the backend.
 */
void nsmgr_stale_cb(void *arg, uint64_t ino);

#endif
