// SPDX-License-Identifier: MIT
/* report.c - see report.h */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "lists.h"
#include "report.h"

char *report_text(const struct report_src *src, size_t *len)
{
	struct stats *st = src->st;
	struct cache *c = src->cache;
	struct nsmgr *nm = src->nm;
	const struct ns_stats *s;
	uint64_t used, limit, files, skipped = 0;
	char *text = NULL;
	FILE *f = open_memstream(&text, len);
	int k;

	if (!f)
		return NULL;
	stats_print(st, f);
	cache_usage(c, &used, &limit, &files);
	fprintf(f, "cache_bytes_used %" PRIu64 "\ncache_bytes_limit %" PRIu64
		"\ncache_files %" PRIu64 "\n", used, limit, files);
	fprintf(f, "cache_chunks_unverified %" PRIu64 "\n",
		cache_unverified_total(c));
	s = ns_stats(nsmgr_rdlock(nm));
	for (k = PM_BAD_EMPTY; k < PM_NKINDS; k++)
		skipped += s->skipped[k];
	fprintf(f, "ns_files %" PRIu64 "\nns_dirs %" PRIu64 "\nns_bytes %"
		PRIu64 "\nns_skipped %" PRIu64 "\nns_shadowed %" PRIu64
		"\nns_non_utf8 %" PRIu64 "\nns_collisions %" PRIu64 "\n",
		s->files, s->dirs, s->bytes, skipped, s->shadowed, s->non_utf8,
		s->collisions);
	for (k = PM_BAD_EMPTY; k < PM_NKINDS; k++)
		fprintf(f, "ns_skipped_%s %" PRIu64 "\n", pathmap_kind_name(k),
			s->skipped[k]);
	nsmgr_unlock(nm);
	if (src->lists)
		lists_print(src->lists, f);
	if (fclose(f)) {
		free(text);
		return NULL;
	}
	return text;
}
