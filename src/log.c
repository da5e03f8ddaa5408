// SPDX-License-Identifier: MIT
/* log.c - see log.h */
#include <errno.h>
#include <fcntl.h>
#include <paths.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bgthread.h"
#include "log.h"
#include "safeopen.h"

#define LOG_LINE_MAX	4096

#define REPEAT_WINDOW_S	10	/* rate limit of one message: per window, */
#define REPEAT_BURST	5	/* this many lines, then a count */
#define REPEAT_SLOTS	32
#define REPEAT_TEXT_MAX	512

int log_level = LOG_INFO;
static bool log_syslog;
static bool log_json;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;			/* --log-file, the kept stderr, or -1 */
static char log_path[4096];		/* "" when log_fd is the kept stderr */
static int hup_pipe[2] = { -1, -1 };	/* SIGHUP handler -> hup_main() */

/*
 * Errors and warnings from one call site (one format string) within
 * REPEAT_WINDOW_S: the first REPEAT_BURST are written, the rest counted;
 * the count is written with the last of them when the window is over.
 * Under log_lock.
 */
struct repeat {
	const char *fmt;		/* the key; NULL: free */
	int level;
	struct timespec start;
	unsigned long seen;		/* in this window */
	bool varied;			/* the suppressed ones differ in values */
	char last[REPEAT_TEXT_MAX];	/* the last one suppressed */
};
static struct repeat repeats[REPEAT_SLOTS];
static unsigned repeats_pending;	/* slots with suppressed lines */

void log_open(const char *ident, bool use_syslog)
{
	log_syslog = use_syslog;
	if (use_syslog)
		openlog(ident, LOG_PID, LOG_DAEMON);
}

static int open_log_file(const char *path)
{
	return safe_open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
			 0640);
}

int log_set_format(const char *name)
{
	if (!strcmp(name, "json"))
		log_json = true;
	else if (!strcmp(name, "text"))
		log_json = false;
	else
		return -EINVAL;
	return 0;
}

int log_open_file(const char *path)
{
	int fd;

	if (strlen(path) >= sizeof(log_path))
		return -ENAMETOOLONG;
	fd = open_log_file(path);
	if (fd < 0)
		return -errno;
	strcpy(log_path, path);
	log_fd = fd;
	return 0;
}

/* only open(), dup3() and close(): async-signal-safe if ever needed */
int log_reopen(void)
{
	int fd, rc = 0;

	if (log_fd < 0 || !log_path[0])
		return 0;
	fd = open_log_file(log_path);
	if (fd < 0)
		return -errno;
	/* atomic: a concurrent write() goes to the old or the new file */
	if (dup3(fd, log_fd, O_CLOEXEC) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static void on_sighup(int sig)
{
	int saved = errno;
	char c = 0;

	if (write(hup_pipe[1], &c, 1) < 0) {
		/* pipe full: a reopen is pending anyway */
	}
	errno = saved;
}

static void *hup_main(void *arg)
{
	char c;
	int rc;

	for (;;) {
		ssize_t n = read(hup_pipe[0], &c, 1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return NULL;
		rc = log_reopen();
		if (rc)
			log_err("SIGHUP: cannot reopen log file %s: %s", log_path,
				strerror(-rc));
		else if (log_fd >= 0 && log_path[0])
			log_info("SIGHUP: log file %s reopened", log_path);
		else
			log_info("SIGHUP: no log file to reopen");
	}
}

int log_catch_sighup(void)
{
	struct sigaction sa = { .sa_handler = on_sighup, .sa_flags = SA_RESTART };
	pthread_t t;
	int rc;

	if (hup_pipe[0] < 0) {		/* the first call: the thread */
		if (pipe2(hup_pipe, O_CLOEXEC))
			return -errno;
		if (fcntl(hup_pipe[1], F_SETFL, O_NONBLOCK))
			return -errno;
		rc = thread_spawn(&t, hup_main, NULL);
		if (rc)
			return rc;
		pthread_detach(t);
	}
	/* every call: the handler again (libfuse's may have replaced it) */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGHUP, &sa, NULL))
		return -errno;
	return 0;
}

bool log_syslog_available(void)
{
	struct stat st;

	return !stat(_PATH_LOG, &st) && S_ISSOCK(st.st_mode);
}

void log_detach(void)
{
	int fd = open("/dev/null", O_RDWR | O_CLOEXEC);

	if (!log_syslog && log_fd < 0) {
		if (log_syslog_available())
			log_open("fusefs", true);
		else	/* no syslog: keep the starting command's stderr */
			log_fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	}
	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	if (log_syslog || log_path[0])
		dup2(fd, STDERR_FILENO);
	close(fd);
}

int log_parse_level(const char *s)
{
	static const struct { const char *name; int level; } tab[] = {
		{ "error", LOG_ERR }, { "warn", LOG_WARNING },
		{ "info", LOG_INFO }, { "debug", LOG_DEBUG },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(tab); i++)
		if (!strcmp(s, tab[i].name))
			return tab[i].level;
	return -EINVAL;
}

static const char *level_name(int level)
{
	switch (level) {
	case LOG_ERR:
		return "error";
	case LOG_WARNING:
		return "warn";
	case LOG_INFO:
		return "info";
	default:
		return "debug";
	}
}

/* @s as the body of a JSON string: escapes, and U+FFFD for bad UTF-8 */
static size_t json_escape(char *out, size_t cap, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = 0;

	while (*p && n + 8 < cap) {
		unsigned c = *p, len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 :
			(c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
		unsigned i;

		for (i = 1; i < len; i++)
			if ((p[i] & 0xc0) != 0x80)
				len = 0;
		if (len == 2 && c < 0xc2)
			len = 0;		/* overlong */
		if (c == '"' || c == '\\') {
			out[n++] = '\\';
			out[n++] = c;
		} else if (c < 0x20) {
			n += snprintf(out + n, cap - n, "\\u%04x", c);
		} else if (!len) {
			memcpy(out + n, "\xef\xbf\xbd", 3);	/* U+FFFD */
			n += 3;
			len = 1;
		} else {
			memcpy(out + n, p, len);
			n += len;
		}
		p += len ? len : 1;
	}
	out[n] = '\0';
	return n;
}

/*
 * One line to @fd, one write(): whole lines even with other writers
 * (O_APPEND).  Text: "TIME fusefs[PID] LEVEL: MSG"; JSON: {"time", "level",
 * "pid", "msg"}.
 */
static void emit_fd(int fd, int level, const char *msg)
{
	char line[LOG_LINE_MAX], ts_buf[64];
	struct timespec ts;
	struct tm tm;
	size_t n;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (log_json) {
		gmtime_r(&ts.tv_sec, &tm);
		n = strftime(ts_buf, sizeof(ts_buf), "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(ts_buf + n, sizeof(ts_buf) - n, ".%03ldZ",
			 ts.tv_nsec / 1000000);
		n = snprintf(line, sizeof(line),
			     "{\"time\":\"%s\",\"level\":\"%s\",\"pid\":%d,\"msg\":\"",
			     ts_buf, level_name(level), (int)getpid());
		n += json_escape(line + n, sizeof(line) - n - 3, msg);
		memcpy(line + n, "\"}\n", 3);
		n += 3;
	} else {
		localtime_r(&ts.tv_sec, &tm);
		n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
		n += snprintf(line + n, sizeof(line) - n, ".%03ld ",
			      ts.tv_nsec / 1000000);
		n += strftime(line + n, sizeof(line) - n, "%z", &tm);
		n += snprintf(line + n, sizeof(line) - n, " fusefs[%d] %s: %s",
			      (int)getpid(), level_name(level), msg);
		n = MIN(n, sizeof(line) - 1);
		line[n++] = '\n';
	}
	if (write(fd, line, n) < 0) {
		/* nowhere left to report it */
	}
}

/* stderr of a foreground daemon: "fusefs[LEVEL]: MSG", or JSON */
static void emit_line(int level, const char *msg)
{
	if (log_fd >= 0) {
		emit_fd(log_fd, level, msg);
	} else if (log_syslog) {
		syslog(level, "%s", msg);
	} else if (log_json) {
		emit_fd(STDERR_FILENO, level, msg);
	} else {
		char line[LOG_LINE_MAX];
		int n = snprintf(line, sizeof(line), "fusefs[%s]: %s\n",
				 level_name(level), msg);

		if (n >= (int)sizeof(line)) {
			n = sizeof(line);
			line[n - 1] = '\n';
		}
		if (n > 0 && write(STDERR_FILENO, line, n) < 0) {
			/* nowhere left to report it */
		}
	}
}

static double since(const struct timespec *a, const struct timespec *b)
{
	return (b->tv_sec - a->tv_sec) + (b->tv_nsec - a->tv_nsec) / 1e9;
}

/* the count of @r, if any, as a line of its own; @r freed */
static void repeat_flush(struct repeat *r, const struct timespec *now)
{
	char msg[REPEAT_TEXT_MAX + 96];	/* the counts fit */
	unsigned long n = r->seen - REPEAT_BURST;
	int secs = MIN((int)since(&r->start, now) + 1, REPEAT_WINDOW_S);

	if (r->seen > REPEAT_BURST) {
		snprintf(msg, sizeof(msg), r->varied ?
			 "%s (and %lu more like it in the last %d s)" :
			 "%s (repeated %lu times in the last %d s)",
			 r->last, r->varied ? n - 1 : n, secs);
		emit_line(r->level, msg);
		repeats_pending--;
	}
	r->fmt = NULL;
}

/* write the counts of the windows that are over */
static void repeats_expire(const struct timespec *now)
{
	size_t i;

	for (i = 0; i < REPEAT_SLOTS && repeats_pending; i++)
		if (repeats[i].fmt &&
		    since(&repeats[i].start, now) >= REPEAT_WINDOW_S)
			repeat_flush(&repeats[i], now);
}

/* false: @msg is a repeat to count, not to write (under log_lock) */
static bool repeat_pass(int level, const char *fmt, const char *msg,
			const struct timespec *now)
{
	struct repeat *r = &repeats[((uintptr_t)fmt >> 3) % REPEAT_SLOTS];
	size_t n;

	/* another site (make room), or this one's window is over */
	if (r->fmt && (r->fmt != fmt || r->level != level ||
		       since(&r->start, now) >= REPEAT_WINDOW_S))
		repeat_flush(r, now);
	if (!r->fmt) {
		*r = (struct repeat){ .fmt = fmt, .level = level,
				      .start = *now };
		r->last[0] = '\0';
	}
	if (++r->seen <= REPEAT_BURST)
		return true;
	if (r->seen == REPEAT_BURST + 1)
		repeats_pending++;
	else if (strncmp(r->last, msg, sizeof(r->last) - 1))
		r->varied = true;
	n = MIN(strlen(msg), sizeof(r->last) - 1);	/* truncated is fine */
	memcpy(r->last, msg, n);
	r->last[n] = '\0';
	return false;
}

void log_emit(int level, const char *fmt, ...)
{
	char msg[LOG_LINE_MAX - 128];
	struct timespec now;
	va_list ap;
	bool pass = true;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&log_lock);
	if (repeats_pending)
		repeats_expire(&now);
	if (level <= LOG_WARNING)
		pass = repeat_pass(level, fmt, msg, &now);
	if (pass)
		emit_line(level, msg);
	pthread_mutex_unlock(&log_lock);
}

void log_flush_repeats(void)
{
	struct timespec now;
	size_t i;

	clock_gettime(CLOCK_MONOTONIC, &now);
	pthread_mutex_lock(&log_lock);
	for (i = 0; i < REPEAT_SLOTS; i++)
		if (repeats[i].fmt)
			repeat_flush(&repeats[i], &now);
	pthread_mutex_unlock(&log_lock);
}
