/* SPDX-License-Identifier: MIT */
/*
 * s3walk.h - one listing of a key prefix, split over parallel streams.
 *
 * A ListObjectsV2 listing is one chain of pages: each page names the
 * next, so one stream is bounded by one request's round trip and the
 * server's work per page.  The walk lists the first levels with a
 * delimiter ('/'): each listing gives the keys directly under its prefix
 * and the prefixes one level down (CommonPrefixes), which are queued and
 * listed by the next free stream; from @split_depth levels down a prefix
 * is listed whole, without a delimiter.  So a dataset of many directories
 * is listed by several streams at once, and one with a single directory
 * costs one delimiter request more than a plain listing.
 *
 * The caller's per-prefix function runs on the walk's threads (thread
 * names "fusefs-s3list") and hands its keys over with s3walk_key(); the
 * keys reach the caller's key function on the thread that called
 * s3walk_run(), in batches as pages arrive (an LMDB write transaction,
 * for one, must stay on its thread).  At most a few pages' keys wait at a
 * time: a stream that gets ahead of the consumer waits.
 *
 * Keys arrive page by page, in order within a page, interleaved across
 * prefixes: not in one global order.
 */
#ifndef FUSEFS_S3WALK_H
#define FUSEFS_S3WALK_H

#include <stdbool.h>
#include <stddef.h>

#include "ns.h"

struct s3walk;

/*
 * s3walk_prefix_fn - list every page of @prefix (@len bytes, no NUL in
 * it), with a delimiter when @delimit.  Calls s3walk_key() for each key
 * and s3walk_page_end() after each page's keys, s3walk_sub() for each
 * common prefix, and stops early when either returns nonzero.  Return: 0
 * or -errno (the walk stops; the first error is s3walk_run()'s).
 */
typedef int (*s3walk_prefix_fn)(void *arg, struct s3walk *w,
				const char *prefix, size_t len, bool delimit);
typedef int (*s3walk_key_fn)(void *arg, const char *key, size_t len,
			     const struct ns_attr *a);

/*
 * s3walk_run() - list @root (@rlen bytes) with @streams listings at once
 * (1: the calling thread alone, no threads), delimiter listings for the
 * prefixes fewer than @split_depth levels below @root.  @list(@arg, ...)
 * runs on the walk's threads, @key(@karg, ...) on this one.
 * Return: 0, the first error of @list or @key, or -ENOMEM / -EAGAIN (no
 * thread could start).
 */
int s3walk_run(unsigned streams, unsigned split_depth, const char *root,
	       size_t rlen, s3walk_prefix_fn list, void *arg,
	       s3walk_key_fn key, void *karg);
/* s3walk_key() - a key of the page being read; nonzero: stop (the walk
 * failed meanwhile, or -ENOMEM) */
int s3walk_key(struct s3walk *w, const char *key, size_t len,
	       const struct ns_attr *a);
/* s3walk_page_end() - the page's keys are complete: hand them on (may
 * wait while the consumer is behind).  Nonzero: stop */
int s3walk_page_end(struct s3walk *w);
/*
 * s3walk_sub() - common prefix @prefix (@len bytes) of the listing of
 * @parent (@plen bytes) is to be listed too.  Refused with -EBADMSG (a
 * hostile or broken server) if it is not longer than @parent or does not
 * start with it.  One with a NUL byte is not listed (0): it cannot be
 * asked for, and every key below it has a NUL byte, which no path can
 * hold (the callers skip such keys).  Nonzero: stop.
 */
int s3walk_sub(struct s3walk *w, const char *parent, size_t plen,
	       const char *prefix, size_t len);
/* s3walk_failed() - the walk's first error so far, or 0: a stream checks
 * it between pages */
int s3walk_failed(struct s3walk *w);

#endif
