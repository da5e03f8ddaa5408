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

/* nsmgr_open() - load the namespace; -errno with a message printed */
int nsmgr_open(struct nsmgr **out, struct backend *be, struct meta *m,
	       const struct fusefs_conf *cf, struct stats *st);
void nsmgr_close(struct nsmgr *nm);

/*
 * nsmgr_start_refresh() - start re-listing in the background; after a
 * swap @on_swap(arg, ns) is called (no lock held) with the new tree.
 */
int nsmgr_start_refresh(struct nsmgr *nm,
			void (*on_swap)(void *arg, struct ns *ns), void *arg);

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
