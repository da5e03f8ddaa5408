/* SPDX-License-Identifier: MIT */
/*
 * log.h - levelled logging to stderr (journald-friendly), a file or
 * syslog, as text or JSON lines (--log-format).
 *
 * Where lines go: --log-file FILE; else --syslog; else stderr.  A daemon
 * that goes to the background (log_detach()) without either switches to
 * syslog when the syslog socket (/dev/log) exists, and otherwise keeps
 * writing to the stderr it was started with (containers, notebooks).
 *
 * Messages are one line each, prefixed with the level when written to
 * stderr.  Errors and warnings from one call site (one format string) are
 * rate-limited: 5 lines per 10 s window, then a count ("... (repeated N
 * times in the last 10 s)", or "(and N more like it ...)" when their
 * values differed), written with the next line logged after the window
 * or by log_flush_repeats().  log_dbg() costs one branch when debug
 * logging is off.  Never pass credentials to these functions.
 */
#ifndef FUSEFS_LOG_H
#define FUSEFS_LOG_H

#include <stdbool.h>
#include <syslog.h>
#include "compiler.h"

extern int log_level;		/* LOG_ERR .. LOG_DEBUG; default LOG_INFO */

/* log_open() - choose the sink; @use_syslog false means stderr. */
void log_open(const char *ident, bool use_syslog);
/*
 * log_open_file() - write every line, with a timestamp, to @path
 * (appended, created 0640) instead of stderr or syslog, also after
 * log_detach().  Return: 0 or -errno (nothing changed).
 */
int log_open_file(const char *path);
/*
 * log_reopen() - reopen the log file by its name (after logrotate moved
 * it); lines being written meanwhile go whole to the old or the new
 * file.  0 if there is no log file.  Return: 0 or -errno (old file kept).
 */
int log_reopen(void);
/*
 * log_catch_sighup() - make SIGHUP call log_reopen() (on a small thread
 * of its own; the handler only wakes it) instead of its default action
 * or libfuse's (which ends the session).  Call it once the process is
 * what it stays (after daemonizing: it starts a thread), and again after
 * fuse_set_signal_handlers(), which replaces the handler.
 * Return: 0 or -errno.
 */
int log_catch_sighup(void);
/*
 * log_set_format() - "text" (default) or "json": one object a line,
 * {"time" (UTC, ms), "level", "pid", "msg"}, to stderr and the log file
 * (syslog gets the message alone).  Return: 0 or -EINVAL.
 */
int log_set_format(const char *name);
/* log_syslog_available() - the syslog socket /dev/log exists */
bool log_syslog_available(void);
/*
 * log_detach() - after going to the background, unless a log file or
 * syslog was chosen: syslog if log_syslog_available(), else keep the
 * current stderr (lines get a timestamp and pid, as in a log file).
 * stdin and stdout, and stderr when it is not kept, point at /dev/null.
 */
void log_detach(void);
/* log_flush_repeats() - write the counts of rate-limited lines now */
void log_flush_repeats(void);
/* log_parse_level() - "error", "warn", "info", "debug"; -EINVAL if unknown */
int log_parse_level(const char *s);
void log_emit(int level, const char *fmt, ...) PRINTF_FMT(2, 3);

#define log_err(...)	log_emit(LOG_ERR, __VA_ARGS__)
#define log_warn(...)	log_emit(LOG_WARNING, __VA_ARGS__)
#define log_info(...)	log_emit(LOG_INFO, __VA_ARGS__)
#define log_dbg(...)						\
	do {							\
		if (unlikely(log_level >= LOG_DEBUG))		\
			log_emit(LOG_DEBUG, __VA_ARGS__);	\
	} while (0)

#endif
