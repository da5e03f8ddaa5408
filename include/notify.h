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
 */
#ifndef FUSEFS_NOTIFY_H
#define FUSEFS_NOTIFY_H

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

#endif
