// SPDX-License-Identifier: MIT
/* log.c - see log.h */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "safeopen.h"

#define LOG_LINE_MAX	4096

int log_level = LOG_INFO;
static bool log_syslog;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int log_fd = -1;			/* --log-file, or -1 */
static char log_path[4096];
static int hup_pipe[2] = { -1, -1 };	/* SIGHUP handler -> hup_main() */

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

	if (log_fd < 0)
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
		else if (log_fd >= 0)
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

	if (hup_pipe[0] >= 0)
		return 0;
	if (pipe2(hup_pipe, O_CLOEXEC))
		return -errno;
	if (fcntl(hup_pipe[1], F_SETFL, O_NONBLOCK))
		return -errno;
	rc = pthread_create(&t, NULL, hup_main, NULL);
	if (rc)
		return -rc;
	pthread_detach(t);
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGHUP, &sa, NULL))
		return -errno;
	return 0;
}

void log_detach(void)
{
	int fd = open("/dev/null", O_RDWR);

	if (!log_syslog && log_fd < 0)
		log_open("fusefs", true);
	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
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

/* one write() per line: whole lines even with other writers (O_APPEND) */
static void emit_file(int level, const char *fmt, va_list ap)
{
	char line[LOG_LINE_MAX];
	struct timespec ts;
	struct tm tm;
	size_t n;
	int k;

	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	n += snprintf(line + n, sizeof(line) - n, ".%03ld ",
		      ts.tv_nsec / 1000000);
	n += strftime(line + n, sizeof(line) - n, "%z", &tm);
	n += snprintf(line + n, sizeof(line) - n, " fusefs[%d] %s: ",
		      (int)getpid(), level_name(level));
	k = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	if (k > 0)
		n += MIN((size_t)k, sizeof(line) - n - 2);
	line[n++] = '\n';
	if (write(log_fd, line, n) < 0) {
		/* nowhere left to report it */
	}
}

void log_emit(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	if (log_fd >= 0) {
		emit_file(level, fmt, ap);
	} else if (log_syslog) {
		vsyslog(level, fmt, ap);
	} else {
		/* one locked write per line keeps lines whole under threads */
		pthread_mutex_lock(&log_lock);
		fprintf(stderr, "fusefs[%s]: ", level_name(level));
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		pthread_mutex_unlock(&log_lock);
	}
	va_end(ap);
}
