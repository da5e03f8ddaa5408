/* SPDX-License-Identifier: MIT */
/*
 * nsmgr.h - owns the current namespace: builds it from the namespace
 * cache in LMDB (fast remount, no backend listing) or from a backend
 * listing, re-lists every list_refresh seconds in a background thread and
 * swaps the new tree in, and re-checks one object's version on open.
 *
 * Readers bracket every use of the tree with nsmgr_rdlock()/_unlock();
 * node pointers are not valid after the unlock.
 */
#ifndef FUSEFS_NSMGR_H
#define FUSEFS_NSMGR_H

#include <stdbool.h>

#include "backend.h"
#include "conf.h"
#include "meta.h"
#include "ns.h"
#include "stats.h"

struct nsmgr;

/* what the namespace tells its user; called on a background thread */
struct nsmgr_hooks {
	/* on_swap() - a re-listing replaced the tree */
	void (*on_swap)(void *arg);
	void *arg;
};

/* nsmgr_open() - load the namespace; -errno with a message printed */
int nsmgr_open(struct nsmgr **out, struct backend *be, struct meta *m,
	       const struct fusefs_conf *cf, struct stats *st);
/* nsmgr_close() - nsmgr_stop() if needed, free everything.  NULL is fine. */
void nsmgr_close(struct nsmgr *nm);

/*
 * nsmgr_start() - if list_refresh > 0, start re-listing in the background
 * (a bgthread); it reports through @h (copied).  Return: 0 or -errno.
 */
int nsmgr_start(struct nsmgr *nm, const struct nsmgr_hooks *h);
/*
 * nsmgr_stop() - join the background thread (a listing in progress
 * finishes first).  No hook is called afterwards.  Safe without
 * nsmgr_start(), and twice.
 */
void nsmgr_stop(struct nsmgr *nm);

struct ns *nsmgr_rdlock(struct nsmgr *nm);
void nsmgr_unlock(struct nsmgr *nm);

/*
 * nsmgr_revalidate() - attributes of file @n (read-locked by the caller),
 * asking the backend if they are older than revalidate seconds.
 * Return: 0, -ENOENT if the object is gone.  Other backend errors are
 * logged and the known attributes returned (cached data stays usable).
 */
int nsmgr_revalidate(struct nsmgr *nm, const struct ns_node *n,
		     struct ns_attr *out);
/* nsmgr_force_check() - the next open of @ino asks the backend */
void nsmgr_force_check(struct nsmgr *nm, uint64_t ino);
/* nsmgr_stale_cb() - nsmgr_force_check() in the shape of fetch_on_stale()'s
 * callback: @arg is the struct nsmgr */
void nsmgr_stale_cb(void *arg, uint64_t ino);

#endif
