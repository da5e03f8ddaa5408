/* SPDX-License-Identifier: MIT */
/*
 * notify.h - the systemd readiness protocol (sd_notify(3)), by hand:
 * one AF_UNIX datagram of newline-separated VAR=value lines to the
 * socket named by $NOTIFY_SOCKET (a path, or "@name" for an abstract
 * socket).  Without $NOTIFY_SOCKET every call is a no-op returning 0, so
 * callers need not know whether they run under systemd (Type=notify).
 *
 *   READY=1      the mount answers (sent by notify_ready_when_served())
 *   STATUS=...   one line for `systemctl status`
 *   STOPPING=1   shutting down (unmounted, flushing the index)
 *   WATCHDOG=1   alive (sent by the watchdog thread, notify_watchdog_start())
 *
 * By hand rather than libsystemd's sd_notify(): the protocol is one
 * sendto(), and libsystemd would add a library (and its dependencies)
 * to every install, containers included, for 30 lines.
 */
#ifndef FUSEFS_NOTIFY_H
#define FUSEFS_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"

/*
 * notify_send() - send @state, e.g. "STOPPING=1\nSTATUS=bye".
 * Return: 0 (also when $NOTIFY_SOCKET is unset), -EINVAL for a bad
 * socket name, or the -errno of socket()/sendmsg().
 */
int notify_send(const char *state);
/* notify_sendf() - notify_send() of a formatted state; -ENOMEM */
int notify_sendf(const char *fmt, ...) PRINTF_FMT(1, 2);

/*
 * notify_ready_when_served() - from a thread of its own, stat() @mnt
 * (which blocks until the FUSE loop answers), check that it is a FUSE
 * mount, then send READY=1, MAINPID (the caller may have forked) and
 * STATUS=@status.  Returns at once; call it right after mounting, before
 * the FUSE loop runs.  If the mount never answers, READY=1 is never
 * sent (systemd's start timeout applies) and a warning is logged.
 * Return: 0 or -errno (thread not started, nothing sent).
 */
int notify_ready_when_served(const char *mnt, const char *status);

/*
 * notify_watchdog_usec() - the interval in which systemd wants WATCHDOG=1
 * (WatchdogSec=): $WATCHDOG_USEC when $NOTIFY_SOCKET is set and
 * $WATCHDOG_PID is unset or this process, else 0 (no watchdog).
 */
uint64_t notify_watchdog_usec(void);

struct notify_watchdog;
struct stats;
/* is the rest of the daemon making progress?  Must not block for long. */
typedef bool (*notify_healthy_fn)(void *arg);

/*
 * notify_watchdog_start() - if notify_watchdog_usec() is not 0, start a
 * bgthread that every half interval statfs()s @mnt and, when that was
 * answered by this FUSE mount and @healthy(@arg) says yes, sends
 * WATCHDOG=1.  statfs() is never cached by the kernel: it is answered by
 * the FUSE loop, so a hung loop blocks the tick and the pings stop;
 * systemd then kills the service (WatchdogSignal=, SIGABRT) and
 * Restart= starts it again.  A failed check is logged once per change.
 * Call it once the mount exists; *@out is NULL when no watchdog is
 * wanted.  Each tick counts in @st's watchdog_pings or watchdog_withheld.
 * Return: 0 or -errno (nothing started).
 */
int notify_watchdog_start(struct notify_watchdog **out, const char *mnt,
			  notify_healthy_fn healthy, void *arg, struct stats *st);
/*
 * notify_watchdog_stop() - stop and join; NULL is fine.  Call it after
 * the FUSE session is gone: a tick blocked in statfs() then returns.
 */
void notify_watchdog_stop(struct notify_watchdog *w);

#endif
