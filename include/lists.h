/* SPDX-License-Identifier: MIT */
/*
 * lists.h - epoch lists: the order in which a loader will read files.
 *
 * A named list (one per rank or loader) holds the current epoch and at
 * most one queued next epoch.  Publishing a list while the current epoch
 * runs queues it as the next epoch (or replaces the queued one); once the
 * current epoch was read to its end, a publish makes the queued epoch
 * current and queues the new list (with none queued, the new list is
 * current at once).  The reader's position is just past the furthest
 * file of the current epoch it opened, and when it opens a file that the
 * current epoch lacks but the queued one has, that epoch becomes current.
 * From this the policy learns each file's next use (lists_next_use) and
 * the prefetcher what to fetch next (lists_window).
 *
 * Thread-safe (one internal mutex); no I/O.
 */
#ifndef FUSEFS_LISTS_H
#define FUSEFS_LISTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LISTS_MAX	64		/* named lists at once */
#define LIST_NAME_MAX	64
#define LIST_LINE_MAX	4096

/* reasons a line is rejected; counted in struct list_report */
enum list_reject {
	LR_EMPTY,		/* blank line (skipped, not an error) */
	LR_UNKNOWN,		/* no such file in the mount */
	LR_DIRECTORY,		/* a directory, not a file */
	LR_DUPLICATE,		/* already earlier in this list */
	LR_TOO_LONG,		/* longer than LIST_LINE_MAX */
	LR_BINARY,		/* NUL bytes or not UTF-8 */
	LR_NREASONS
};

struct list_report {
	uint64_t lines;
	uint64_t accepted;
	uint64_t rejected[LR_NREASONS];
	uint64_t first_line[LR_NREASONS];	/* 1-based, 0 = none */
	uint64_t bytes;				/* sum of accepted sizes */
	uint64_t max_size;			/* largest accepted file */
};

/*
 * list_resolve_fn - map a path relative to the mount root to a file id and
 * size.  Return 0, -ENOENT or -EISDIR.
 */
typedef int (*list_resolve_fn)(void *arg, const char *path, size_t len,
			       uint64_t *fid, uint64_t *size);

struct lists;

struct lists *lists_create(void);
void lists_destroy(struct lists *l);

/*
 * lists_publish() - parse @len bytes of @text (one path per line, LF or
 * CRLF) into list @name.  Nothing is published unless at least one line
 * was accepted; *@rep says what happened to every line either way.
 * Return: 0, -EINVAL (bad name, or no line accepted), -ENOSPC (too many
 * lists), -ENOMEM.
 */
int lists_publish(struct lists *l, const char *name, const char *text,
		  size_t len, list_resolve_fn resolve, void *arg,
		  struct list_report *rep);

/* lists_note_open() - a reader opened @fid; @ready: it was fully cached */
void lists_note_open(struct lists *l, uint64_t fid, bool ready);

/*
 * lists_next_use() - files until @fid is read again (min over lists),
 * UINT64_MAX if no list reads it again.  @lists is a struct lists (the
 * signature of cache_set_next_use()).
 */
uint64_t lists_next_use(void *lists, uint64_t fid);

/*
 * lists_window() - up to @max file ids the readers will open next, in
 * order, interleaving the lists, starting @skip files past each list's
 * reader.  Return: count.
 */
size_t lists_window(struct lists *l, size_t skip, uint64_t *fids, size_t max);

/*
 * lists_set_lead() - the prefetcher reports the lead (@files and @bytes
 * cached ahead) of every list whose reader opens @fid_at_reader next
 */
void lists_set_lead(struct lists *l, uint64_t fid_at_reader,
		    uint64_t files, uint64_t bytes);

/* lists_print() - 'list_KEY{list="NAME"} value' lines, grouped by KEY */
void lists_print(struct lists *l, FILE *f);
/* lists_print_one() - status of list @name and its last publish report */
void lists_print_one(struct lists *l, const char *name, FILE *f);
/* list_report_print() - a publish report as text */
void list_report_print(const struct list_report *r, FILE *f);
/* lists_count() - lists published */
unsigned lists_count(struct lists *l);

#endif
