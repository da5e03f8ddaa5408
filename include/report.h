/* SPDX-License-Identifier: MIT */
/*
 * report.h - the state of a mount as "name value" lines: every stats
 * counter, cache use, namespace counts.  Served through the control xattr
 * (fusefs stats, and its --json form).  struct report_src also names
 * what the Prometheus page (metrics_page.h) is made from; that page reads
 * the same sources directly, not this text.
 */
#ifndef FUSEFS_REPORT_H
#define FUSEFS_REPORT_H

#include <stddef.h>

#include "cache.h"
#include "nsmgr.h"
#include "stats.h"

struct lists;

struct report_src {
	struct stats *st;
	struct cache *cache;
	struct nsmgr *nm;
	struct lists *lists;	/* may be NULL */
};

/*
 * report_text() - malloc'ed text (caller frees), *len set; NULL on ENOMEM.
 * Lines are "name value" or, per epoch list, 'name{list="NAME"} value'
 * (Prometheus label syntax), grouped by name.
 */
char *report_text(const struct report_src *src, size_t *len);

#endif
