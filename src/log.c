// SPDX-License-Identifier: MIT
/* log.c - see log.h */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "log.h"

int log_level = LOG_INFO;
static bool log_syslog;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void log_open(const char *ident, bool use_syslog)
{
	log_syslog = use_syslog;
	if (use_syslog)
		openlog(ident, LOG_PID, LOG_DAEMON);
}

void log_detach(void)
{
	int fd = open("/dev/null", O_RDWR);

	if (!log_syslog)
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

void log_emit(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	if (log_syslog) {
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
