/* SPDX-License-Identifier: MIT */
/*
 * report.h - the state of a mount as "name value" lines: every stats
 * counter, cache use, namespace counts.  Served through the control xattr
 * (fusefs stats) and rendered for Prometheus by the metrics endpoint.
 */
#ifndef FUSEFS_REPORT_H
#define FUSEFS_REPORT_H

#include <stddef.h>

#include "cache.h"
#include "nsmgr.h"
#include "stats.h"

/* report_text() - malloc'ed text (caller frees), *len set; NULL on ENOMEM */
char *report_text(struct stats *st, struct cache *c, struct nsmgr *nm,
		  size_t *len);

#endif
