/* SPDX-License-Identifier: MIT */
/*
 * lists.h - epoch lists: the order in which a loader will read files.
 *
 * A named list (one per rank or loader) has a current epoch and up to
 * LIST_QUEUE_MAX queued epochs, each with a number.  docs/epochs.md is
 * the protocol with its state diagram; in short:
 *
 * Text.  One path per line (LF or CRLF).  Lines at the very top that
 * start with '#' and match a header form are headers, not paths:
 *   # epoch N		this list is epoch N (0 <= N < 2^62)
 *   # begin		the next epoch begins now
 *   # begin N		epoch N begins now (this list's number if omitted)
 *   # begin N at K	... and its first K files were already read (resume)
 * Anything else is a path, so old lists and datasets with names starting
 * with '#' keep working.  With a range table (lists_set_ranges()), a
 * line that is no file of the mount and reads "PATH<TAB>OFFSET<TAB>LENGTH"
 * names those bytes of PATH (a sample of a token file): the lists treat
 * it as a file of its own whose id is the range's key (ranges.h) and
 * whose size is LENGTH; a read of the file that overlaps the range
 * counts as its open (lists_note_reads()).  A text with a begin header and no path line
 * (blank lines aside) is a begin alone; path lines that are all refused
 * refuse the whole text, begin included.  The begin acts before the list
 * is placed; a list refused (-ESTALE, -EBUSY) refuses its begin too:
 * nothing changes.
 *
 * Numbers.  A list without "# epoch" takes the number after the last
 * epoch the list knows, queued or current (the epoch awaited after a
 * begin; 0 for a fresh list), and is then placed as if numbered so: it
 * never replaces a queued epoch (a loader publishing one epoch ahead
 * whose epochs stop early keeps its order) and is refused with -EBUSY
 * once LIST_QUEUE_MAX are queued.  A numbered publish: below the current number
 * it is stale (-ESTALE, nothing changes; unless the list was idle: then
 * it starts afresh); equal to it, it replaces the current order and keeps
 * the reader's progress (an idle list starts afresh here too; a text
 * with a begin is never idle); above it, it is queued in number order (one
 * with the same number replaced; -EBUSY if LIST_QUEUE_MAX later epochs
 * are already queued).  Once the current epoch was read to its end a
 * later publish first advances to the queued epoch (or to none).
 *
 * Begin.  "begin N": if N is queued it becomes current (queued epochs
 * below N are dropped); if N is current it restarts; otherwise the
 * current epoch is dropped and the list waits for list N, which becomes
 * current when it arrives.  In all cases the reader's position is K.
 *
 * Reader.  Each epoch remembers which of its files were read (opened)
 * and two marks: low, the first file neither read nor skipped, and
 * high, one past the furthest file opened (the "position").  An open
 * of an unread file within the window (lists_set_window(), capped at
 * the list length) ahead of low counts as in order: parallel workers
 * open a little out of order; unread files between low and high are
 * still needed now.  An open further ahead is a jump: low moves up so
 * the file is in the window, and the unread files it passes are skipped.
 * Opening a file that the current epoch does not expect (read already
 * and not re-opened just now, skipped, not in it, or unread beyond the
 * window) and that the first queued epoch holds within the window of
 * its start makes that epoch current; the old epoch's unread files
 * between low and high are remembered as stragglers of slow workers, not
 * opens of the new epoch.  An open is first matched to the lists that
 * expect it (a straggler, in order, a repeat); only if none does it may
 * advance a list, and only if none advances is it a jump.  A stray
 * re-read far from any reader's position changes nothing.
 *
 * Next use (lists_next_use(), the minimum over active lists, in files;
 * lists_next_use_bytes() in bytes):
 * an unread file of the current epoch at or after low is used in
 * idx - low; a file read or skipped this epoch takes its next use from
 * the queued epochs.  A file listed by ranges is used at each unread
 * range of it (the first two count: the coming use and the one after),
 * and a read of one of its ranges moves its use too (lists_reads() names
 * the file).  An epoch is expected to end where the previous one
 * did, at the same fraction of its list (drop_last, max_steps): its
 * files from there on also take their next use from the queued epochs,
 * and the prefetch window skips them, until the reader opens one of them
 * ("expected_end"; a begin of an earlier epoch forgets it).  A list whose reader stopped (no open, publish or
 * begin for lists_set_idle() seconds) is idle: it is neither prefetched
 * nor counted for next use, so its files stop holding cache space; its
 * next open makes it active again.
 *
 * Thread-safe (one internal mutex, never held while calling out); no I/O.
 * The cache calls lists_next_use_bytes() under its own lock, so nothing here
 * may call into the cache.
 */
#ifndef FUSEFS_LISTS_H
#define FUSEFS_LISTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LISTS_MAX		64	/* named lists at once */
#define LIST_NAME_MAX		64
#define LIST_LINE_MAX		4096
#define LIST_QUEUE_MAX		2	/* queued after the current */
#define LIST_EPOCH_MAX		((int64_t)1 << 62)
#define LIST_NO_EPOCH		((int64_t)-1)	/* "no number" in reports, status */
#define LISTS_WINDOW_DEFAULT	1024	/* out-of-order window, files */
#define LISTS_READS		4096	/* reads remembered (lists_reads()) */
#define LISTS_IDLE_DEFAULT	300	/* seconds without opens: idle */

/* reasons a line is rejected; counted in struct list_report */
enum list_reject {
	LR_EMPTY,		/* blank line (skipped, not an error) */
	LR_UNKNOWN,		/* no such file in the mount */
	LR_DIRECTORY,		/* a directory, not a file */
	LR_DUPLICATE,		/* already earlier in this list */
	LR_TOO_LONG,		/* longer than LIST_LINE_MAX */
	LR_BINARY,		/* NUL bytes or not UTF-8 */
	LR_RANGE,		/* a range line: empty, past the file's end,
				 * or no room for more ranges (ranges.h) */
	LR_NREASONS
};

/* what a publish did to the list (report line "outcome NAME") */
enum list_outcome {
	LO_NONE,		/* refused before parsing, or nothing usable */
	LO_CURRENT,		/* the list is the current epoch now */
	LO_QUEUED,		/* queued after the current epoch */
	LO_REPLACED,		/* replaced the current epoch's order */
	LO_BEGUN,		/* a begin alone (no path) */
	LO_STALE,		/* an epoch older than the current: ignored */
	LO_QUEUE_FULL,		/* LIST_QUEUE_MAX later epochs queued */
	LO_NOUTCOMES
};

struct list_report {
	uint64_t lines;
	uint64_t accepted;
	uint64_t rejected[LR_NREASONS];
	uint64_t first_line[LR_NREASONS];	/* 1-based, 0 = none */
	uint64_t bytes;				/* sum of accepted sizes */
	uint64_t max_size;			/* largest accepted file */
	uint64_t headers;			/* header lines */
	int64_t epoch;		/* "# epoch N", or LIST_NO_EPOCH */
	bool begin;		/* a "# begin" header */
	int64_t begin_epoch;	/* the epoch begun (N resolved) */
	uint64_t begin_at;	/* its K */
	enum list_outcome outcome;
	int64_t current;	/* the list's current epoch afterwards */
};

/*
 * list_resolve_fn - map a path relative to the mount root to a file id and
 * size.  Return 0, -ENOENT or -EISDIR.
 */
typedef int (*list_resolve_fn)(void *arg, const char *path, size_t len,
			       uint64_t *fid, uint64_t *size);

/* lists_clock_fn - milliseconds on a monotonic clock (tests fake it) */
typedef uint64_t (*lists_clock_fn)(void *arg);

struct lists;

struct lists *lists_create(void);
void lists_destroy(struct lists *l);

/* lists_set_idle() - a list with no open for @seconds is idle; 0 never */
void lists_set_idle(struct lists *l, unsigned seconds);
/* lists_set_window() - out-of-order window in files (>= 1) */
void lists_set_window(struct lists *l, unsigned files);
/* lists_set_clock() - replace CLOCK_MONOTONIC (for tests) */
void lists_set_clock(struct lists *l, lists_clock_fn now_ms, void *arg);

/*
 * lists_name_ok() - is @name a list name: [A-Za-z0-9._-], 1 to
 * LIST_NAME_MAX - 1 bytes, not starting with '.' (so never a control
 * character, a '/' or a newline: names go into logs and reports)
 */
bool lists_name_ok(const char *name);

/*
 * lists_publish() - parse @len bytes of @text (headers, then one path per
 * line) into list @name, as described above.  Nothing changes unless at
 * least one path was accepted, or a begin header came without path
 * lines; *@rep says what happened to every line and to the list either
 * way.  Return: 0, -EINVAL (bad name, or no usable path and no begin
 * alone), -ESTALE
 * (an epoch older than the current one), -EBUSY (the queue is full),
 * -ENOSPC (too many lists), -ENOMEM.
 */
int lists_publish(struct lists *l, const char *name, const char *text,
		  size_t len, list_resolve_fn resolve, void *arg,
		  struct list_report *rep);

/*
 * lists_begin() - epoch @epoch (LIST_NO_EPOCH: the next one) of list
 * @name begins now, its first @at files already read.  The text form is
 * "# begin N at K" published alone.  An unknown @name gets a list that
 * waits for its text (the begin before the publish).  Return: 0, -EINVAL,
 * -ENOSPC (a new name and every list in use), -ENOMEM.
 */
int lists_begin(struct lists *l, const char *name, int64_t epoch,
		uint64_t at);

/*
 * lists_note_open() - a reader opened @fid; @ready: it was fully cached.
 * Return: true if a list moved (a file of its current epoch read for
 * the first time, in order, as a straggler or as a jump ahead, or its
 * next epoch begun with it): the prefetch window changed.  False for a
 * file no list is still to read (no lists, a file in none, a re-read):
 * nothing for the prefetcher to do.
 */
bool lists_note_open(struct lists *l, uint64_t fid, bool ready);

/*
 * lists_note_reads() - one read touched the ranges @keys[0..@n) (range
 * keys, ranges.h): as lists_note_open() of each, except that a jump
 * ahead moves each list only to the first of them in its order (a read
 * of the kernel's read-around may cover ranges that the reader comes to
 * much later), and that a list whose current epoch read one of them
 * already neither begins its queued epoch nor jumps: the read goes on
 * over more pages of a sample (a page shared with the next sample, a
 * sample's pages read one fault at a time).  Return: as
 * lists_note_open().
 */
bool lists_note_reads(struct lists *l, const uint64_t *keys, size_t n,
		      bool ready);

/* lists_set_ranges() - the table range lines are keyed in (NULL: range
 * lines are paths like any other); it must outlive @l's publishes */
struct ranges;
void lists_set_ranges(struct lists *l, struct ranges *rg);

/*
 * lists_next_use() - files until @fid is read again (min over active
 * lists), UINT64_MAX if no active list reads it again.  @lists is a
 * struct lists (the signature of policy_next_use_fn).
 */
uint64_t lists_next_use(void *lists, uint64_t fid);
/*
 * lists_next_use_bytes() - the same in bytes: what the readers read
 * before @fid's first byte (the files from low on, read-ahead ones
 * included, then the queued epochs), min over active lists; *@after
 * (if not NULL) is the use after that one (the second soonest over
 * every list's current and queued epochs), UINT64_MAX if none.  What
 * the chunk-level eviction compares (policy_next_use_fn).
 */
uint64_t lists_next_use_bytes(void *lists, uint64_t fid, uint64_t *after);
/*
 * lists_next_use_many() - lists_next_use_bytes() of each of @fids into
 * @uses (no after), under one taking of the lock and one clock reading
 * (policy_next_uses_fn: an admission ranks every cached file)
 */
void lists_next_use_many(void *lists, const uint64_t *fids, uint64_t *uses,
			 size_t n);
/*
 * lists_known() - may any fid have a next use: is some list active with
 * an epoch (current or queued)?  If not, lists_next_use_bytes() is
 * UINT64_MAX for every fid (policy_known_fn).
 */
bool lists_known(void *lists);

/*
 * The next uses incrementally, for a ranking that keeps cached files
 * ordered by them (policy.h, struct policy_future: sync, where, reads).
 * A use is a key on the timeline of one list (its slot, 0..LISTS_MAX-1):
 * the bytes of the list's current epoch before the file's entry, or for
 * a queued epoch the bytes up to the current epoch's expected end plus
 * those of the epochs queued before it plus the file's offset there.
 * The reader's position (the origin: bytes before low) only grows, so
 * next use = key - origin stays exact as the reader advances.  A key
 * changes otherwise only when the file is read this epoch (it then takes
 * its use from the queued epoch: lists_reads() names it) or when the
 * whole timeline does (a publish, a begin, an epoch advanced to, a jump,
 * the expected end moved, a setting: the generation changes).
 *
 * lists_sync() - the generation, the active lists (bit per slot), each
 * slot's origin and the number of reads so far (policy_sync_fn).
 * lists_where() - the slot and key of @fid's soonest use over the active
 * lists: 1, 0 if none, -ESTALE if the generation is no more @gen
 * (policy_where_fn).
 * lists_reads() - the fids of reads number @from to @to (exclusive) into
 * @fids: their number, -1 if more than @max or no longer all remembered
 * (the last LISTS_READS are; policy_reads_fn).
 */
struct future_sync;
void lists_sync(void *lists, struct future_sync *s);
int lists_where(void *lists, uint64_t fid, uint64_t gen, unsigned *slot,
		uint64_t *key);
long lists_reads(void *lists, uint64_t from, uint64_t to, uint64_t *fids,
		 size_t max);

/*
 * lists_unread_now() - is @fid still to be read in the current epoch of
 * an active list (unread, before its expected end)?  What the window said
 * a moment ago may have changed: a reader opened the file meanwhile.
 */
bool lists_unread_now(struct lists *l, uint64_t fid);

/*
 * lists_window() - up to @max file ids the readers of active lists will
 * open next, in order, interleaving the lists, starting @skip files past
 * each list's reader (unread files of the current epoch from low on,
 * then the queued epochs).  @current (may be NULL): current[i] tells if
 * fids[i] is in its list's current epoch (not a queued one).  @slot (may
 * be NULL): slot[i] is the index of fids[i]'s list among the active ones
 * (below LISTS_MAX), for a caller that ends one list's walk and goes on
 * with the others.  @start: the interleave begins with the start-th
 * active list (modulo their number), so that a caller can take the lists
 * in turn.
 * Return: count.
 */
size_t lists_window(struct lists *l, size_t skip, uint64_t *fids,
		    bool *current, unsigned char *slot, unsigned start,
		    size_t max);

/*
 * lists_set_ready() - the prefetcher saw which of @n window files are on
 * disk (@ready[i] for @fids[i]; files not given count as not ready).  Each
 * list's ready mark moves to the end of the run of ready files at the
 * head of its own window; its lead (files and bytes ready ahead of its
 * reader) is what lies between its reader's low and the mark.  May
 * allocate; on -ENOMEM the marks stay as they were.
 */
void lists_set_ready(struct lists *l, const uint64_t *fids, const bool *ready,
		     size_t n);

/*
 * lists_window_ahead(), lists_extend_ready() - the same, incrementally:
 * each list's window starts at its ready mark (at low if the mark is
 * gone: a new epoch, the reader passed it), and the ready run after the
 * mark moves it on.  So a round after an open costs the files past the
 * mark, not the whole window; a full lists_window() + lists_set_ready()
 * now and then sees files evicted behind the mark.
 * Past the file at its ready mark a list's window goes on at its work
 * mark if that is further (lists_note_worked()).  *@marks: how many of
 * the files are those at the lists' ready marks (the first, one per
 * list); *@jumped: the index of the first file after a jump to a work
 * mark, the count returned if a list jumped and nothing came after it,
 * SIZE_MAX if no list jumped.
 */
size_t lists_window_ahead(struct lists *l, uint64_t *fids, bool *current,
			  unsigned char *slot, unsigned start, size_t max,
			  size_t *marks, size_t *jumped);
void lists_extend_ready(struct lists *l, const uint64_t *fids,
			const bool *ready, size_t n);
/*
 * lists_note_worked() - the prefetcher left nothing to do for those of
 * @fids[0..n) with @worked[i] (all if @worked is NULL; each on disk, on
 * its way there, staged in memory, or not needed): each list's work mark
 * moves over the run of them after it.  @from_low: the
 * files came from lists_window() (from each reader on; the mark may move
 * back), else from lists_window_ahead() (the run starts where that window
 * went on).  The work mark only saves looking again: a file before it
 * whose state changes (a failed fetch, an eviction) is seen by the next
 * full round.  May allocate; on -ENOMEM the marks stay as they were.
 */
void lists_note_worked(struct lists *l, const uint64_t *fids,
		       const bool *worked, size_t n, bool from_low);

/* lists_print() - 'list_KEY{list="NAME"} value' lines, grouped by KEY */
void lists_print(struct lists *l, FILE *f);
/*
 * lists_foreach_value() - @fn(@arg, NAME, value) for every list, of the
 * value lists_print() shows as list_@key (e.g. "lead_bytes",
 * "hit_ratio_permille"); nothing for an unknown key.  @fn runs under the
 * lists lock: it must not call into lists.
 */
void lists_foreach_value(struct lists *l, const char *key,
			 void (*fn)(void *arg, const char *list, int64_t v),
			 void *arg);
/* lists_print_one() - status of list @name and its last publish report */
void lists_print_one(struct lists *l, const char *name, FILE *f);
/* list_report_print() - a publish report as text */
void list_report_print(const struct list_report *r, FILE *f);
/* list_outcome_name() - "current", "queued", ... */
const char *list_outcome_name(enum list_outcome o);
/* lists_count() - lists published */
unsigned lists_count(struct lists *l);
/*
 * lists_room() - may a publish of list @name take a place, leaving
 * @reserve places to others: @name exists, or fewer than LISTS_MAX -
 * @reserve lists are not idle.  A publish into a full table takes the
 * place of the list idle the longest (it is gone, with its epochs and
 * status); -ENOSPC only when every list is in use.
 */
bool lists_room(struct lists *l, const char *name, unsigned reserve);

#endif
