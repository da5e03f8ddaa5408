// SPDX-License-Identifier: MIT
/* notify.c - see notify.h */
#include <errno.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "bgthread.h"
#include "log.h"
#include "notify.h"
#include "stats.h"

/* "/run/systemd/notify" or "@abstract" -> @sa; length, or -EINVAL */
static int notify_addr(const char *name, struct sockaddr_un *sa)
{
	size_t n = strlen(name);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n < 2 || n >= sizeof(sa->sun_path) ||
	    (name[0] != '/' && name[0] != '@'))
		return -EINVAL;
	memcpy(sa->sun_path, name, n);
	if (name[0] == '@') {
		/* abstract: a leading NUL, no trailing one counted */
		sa->sun_path[0] = '\0';
		return offsetof(struct sockaddr_un, sun_path) + n;
	}
	return offsetof(struct sockaddr_un, sun_path) + n + 1;
}

int notify_send(const char *state)
{
	const char *name = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	int fd, len, rc = 0;

	if (!name || !*name)
		return 0;
	len = notify_addr(name, &sa);
	if (len < 0)
		return len;
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		   (struct sockaddr *)&sa, len) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int notify_sendf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int rc;

	va_start(ap, fmt);
	rc = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (rc < 0)
		return -ENOMEM;
	rc = notify_send(s);
	free(s);
	return rc;
}

struct ready {
	char *mnt;
	char *status;
};

static void ready_free(struct ready *r)
{
	free(r->mnt);
	free(r->status);
	free(r);
}

/* the first stat() after mounting waits for INIT and a GETATTR reply */
static void *ready_main(void *arg)
{
	struct ready *r = arg;
	struct statfs sfs;
	struct stat sb;
	int rc;

	if (stat(r->mnt, &sb) || statfs(r->mnt, &sfs)) {
		log_warn("mount point %s does not answer (%s): readiness not reported",
			 r->mnt, strerror(errno));
	} else if (sfs.f_type != FUSE_SUPER_MAGIC) {
		log_warn("%s is not a FUSE mount any more: readiness not reported",
			 r->mnt);
	} else {
		rc = notify_sendf("READY=1\nMAINPID=%d\nSTATUS=%s", (int)getpid(),
				  r->status);
		if (rc)
			log_warn("cannot notify $NOTIFY_SOCKET: %s", strerror(-rc));
	}
	ready_free(r);
	return NULL;
}

int notify_ready_when_served(const char *mnt, const char *status)
{
	struct ready *r;
	pthread_t t;
	int rc;

	if (!getenv("NOTIFY_SOCKET"))
		return 0;		/* nobody listens: no thread */
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->mnt = strdup(mnt);
	r->status = strdup(status);
	rc = -ENOMEM;
	if (r->mnt && r->status)
		rc = thread_spawn(&t, ready_main, r);
	if (rc) {
		ready_free(r);
		return rc;
	}
	pthread_detach(t);
	return 0;
}

uint64_t notify_watchdog_usec(void)
{
	const char *sock = getenv("NOTIFY_SOCKET");
	const char *usec = getenv("WATCHDOG_USEC");
	const char *pid = getenv("WATCHDOG_PID");
	unsigned long long v;
	char *end;

	if (!sock || !*sock || !usec)
		return 0;
	if (pid && *pid) {
		errno = 0;
		v = strtoull(pid, &end, 10);
		if (errno || *end || v != (unsigned long long)getpid())
			return 0;	/* meant for another process */
	}
	errno = 0;
	v = strtoull(usec, &end, 10);
	if (errno || *end || end == usec)
		return 0;
	return v;
}

struct notify_watchdog {
	struct bgthread *thread;
	char *mnt;
	notify_healthy_fn healthy;
	void *arg;
	struct stats *st;
	bool failing;		/* the last check failed: logged once */
};

/* one check and, if it passed, one ping */
static int64_t watchdog_tick(void *arg)
{
	struct notify_watchdog *w = arg;
	struct statfs sfs;
	const char *why = NULL;
	int rc;

	if (statfs(w->mnt, &sfs))
		why = strerror(errno);
	else if (sfs.f_type != FUSE_SUPER_MAGIC)
		why = "not a FUSE mount any more";
	else if (w->healthy && !w->healthy(w->arg))
		why = "a background thread makes no progress";
	if (why) {
		if (!w->failing)
			log_warn("watchdog: %s: %s; not telling systemd we are alive",
				 w->mnt, why);
		w->failing = true;
		stat_inc(w->st, watchdog_withheld);
		return BG_PERIOD;
	}
	if (w->failing)
		log_info("watchdog: %s answers again", w->mnt);
	w->failing = false;
	rc = notify_send("WATCHDOG=1");
	if (rc)
		log_warn("watchdog: cannot notify $NOTIFY_SOCKET: %s", strerror(-rc));
	else
		stat_inc(w->st, watchdog_pings);
	return BG_PERIOD;
}

int notify_watchdog_start(struct notify_watchdog **out, const char *mnt,
			  notify_healthy_fn healthy, void *arg, struct stats *st)
{
	uint64_t usec = notify_watchdog_usec();
	struct notify_watchdog *w;
	int64_t period_ms;
	int rc;

	*out = NULL;
	if (!usec)
		return 0;
	/* half the interval, as sd_watchdog_enabled(3) advises */
	period_ms = (int64_t)(usec / 2000);
	if (period_ms < 1)
		period_ms = 1;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->mnt = strdup(mnt);
	w->healthy = healthy;
	w->arg = arg;
	w->st = st;
	rc = -ENOMEM;
	if (w->mnt)
		rc = bgthread_start(&w->thread, "fusefs-watchdog", period_ms,
				    watchdog_tick, w);
	if (rc) {
		free(w->mnt);
		free(w);
		return rc;
	}
	log_info("watchdog: WATCHDOG=1 every %" PRId64 " ms while %s answers",
		 period_ms, mnt);
	*out = w;
	return 0;
}

void notify_watchdog_stop(struct notify_watchdog *w)
{
	if (!w)
		return;
	bgthread_stop(w->thread);
	free(w->mnt);
	free(w);
}
