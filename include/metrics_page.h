/* SPDX-License-Identifier: MIT */
/*
 * metrics_page.h - the Prometheus page of a mount, written straight from
 * the counters (stats.h), cache use, namespace counts, the epoch lists
 * and /proc/self through ONE table of metric families (name, type, unit,
 * help, where each sample comes from) in metrics_page.c.  Naming follows
 * Prometheus: counters end in _total, base units (_bytes, _seconds),
 * ratios 0..1, labels instead of name variants.  docs/operations.md
 * lists every family; tests/fuse/test_metrics.py holds the two together.
 *
 * No foreign library: metrics.c serves the page over HTTP.
 */
#ifndef FUSEFS_METRICS_PAGE_H
#define FUSEFS_METRICS_PAGE_H

#include <stdbool.h>
#include <stdio.h>

#include "report.h"

/*
 * metrics_page_write() - every family of the table to @f: "# HELP",
 * "# TYPE" and samples.  @openmetrics: OpenMetrics 1.0 text (counter
 * families named without _total, "# UNIT" lines, "# EOF"); else the
 * Prometheus text format 0.0.4.  Takes the nsmgr read lock and the lists
 * lock, one after the other, never both.
 */
void metrics_page_write(const struct report_src *src, FILE *f,
			bool openmetrics);

#endif
