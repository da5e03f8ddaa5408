/* SPDX-License-Identifier: MIT */
/*
 * strsafe.h - names from outside (object keys, paths, list names) made
 * safe to print on one line: every control byte (0x00-0x1f, 0x7f) as
 * \xHH, and a backslash as \\.  Everything else, UTF-8 included, is kept
 * as it is.  str_unesc() undoes it exactly.  Pure: no locks, no I/O but
 * the FILE the caller gives.
 */
#ifndef FUSEFS_STRSAFE_H
#define FUSEFS_STRSAFE_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

/*
 * str_esc() - escape @len bytes at @s into @dst (@size bytes, always
 * NUL-terminated when @size > 0; cut on a whole escape).  Return: the
 * length the whole escaped text needs (>= @size means it was cut), as
 * snprintf() does.
 */
size_t str_esc(char *dst, size_t size, const char *s, size_t len);
/*
 * str_log() - @s escaped for a log line, in one of 8 thread-local buffers
 * used in turn (so up to 8 may appear in one log call), cut after 512
 * bytes with "..." appended.  NULL prints as "(null)".
 */
const char *str_log(const char *s);
/* str_log_n() - str_log() of the @len bytes at @s (need not end in NUL) */
const char *str_log_n(const char *s, size_t len);
/* str_esc_file() - write @s escaped to @f.  Return: 0 or -EIO. */
int str_esc_file(FILE *f, const char *s, size_t len);
/*
 * str_unesc() - undo str_esc(): @len bytes at @s into @dst (at least @len
 * bytes; the result is never longer).  Return: the length written, or
 * -EINVAL for a stray or malformed backslash escape.
 */
ssize_t str_unesc(char *dst, const char *s, size_t len);

#endif
