/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - Prometheus text endpoint (--metrics IP:PORT), served by
 * libmicrohttpd on a thread of its own; the only file that includes
 * microhttpd.h.  Off unless --metrics is given; binds only to the
 * address given (no wildcard unless asked for, e.g. 0.0.0.0:9464).
 *
 *   GET /metrics   the page of metrics_page.h: Prometheus text 0.0.4,
 *                  or OpenMetrics 1.0 when the Accept header asks for
 *                  application/openmetrics-text (as Prometheus does)
 *   anything else  404 (other paths) or 405 (other methods)
 *
 * Clients cannot hold the endpoint: one polling thread serves every
 * connection, at most 64 at once and 32 per client address (below the
 * total, so one address, localhost included, leaves room for others);
 * a connection whose request headers are not complete 5 s after it
 * connected (or after its previous response) is shut down by a reaper
 * thread however steadily it trickles bytes, and an idle one is closed
 * after 10 s (libmicrohttpd's timeout, reset by every byte).
 */
#ifndef FUSEFS_METRICS_H
#define FUSEFS_METRICS_H

#include "report.h"

struct metrics;

/*
 * metrics_check_addr() - 0 if @addr is "IPv4:PORT" or "[IPv6]:PORT"
 * (numeric, port 1..65535), else -EINVAL with a message naming it.
 */
int metrics_check_addr(const char *addr);

/*
 * metrics_start() - listen on @addr and serve the report of @src, whose
 * parts must outlive metrics_stop().  Return: 0, -EINVAL (bad
 * address) or -EADDRNOTAVAIL (cannot listen), message printed.
 */
int metrics_start(struct metrics **out, const char *addr,
		  const struct report_src *src);
/* metrics_stop() - stop serving, wait for requests in progress; NULL ok */
void metrics_stop(struct metrics *m);

#endif
