/* SPDX-License-Identifier: MIT */
/*
 * client.h - fusefs subcommands that talk to a running mount through its
 * control files (MNT/.fusefs/, see include/ctl.h): they work from any
 * process that sees the mount, without root.
 */
#ifndef FUSEFS_CLIENT_H
#define FUSEFS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

/* exit codes of "fusefs prefetch --wait" beyond 0, 1 and 2 (usage) */
#define WAIT_READY	0	/* the files left this epoch are cached */
#define WAIT_TIMEOUT	3	/* --timeout passed, still prefetching */
#define WAIT_FULL	4	/* no progress: the cache is full ahead of
				 * the reader; the rest streams in as it
				 * reads */
#define WAIT_STALLED	5	/* no progress for --stall seconds with
				 * room in the cache, or backend errors */

/* each returns the process exit status: 0, 1 (failed) or 2 (usage) */
int cmd_prefetch(int argc, char **argv);
int cmd_status(int argc, char **argv);
/* "fusefs stats MNT --json"; client_wants_json(): is --json among @argv */
int cmd_stats_json(int argc, char **argv);
bool client_wants_json(int argc, char **argv);
/*
 * client_mount_root() - is @mnt the mount point of a fusefs mount (FUSE
 * by statfs, fuse.fusefs in /proc/self/mountinfo), not a path inside
 * one?  Then its canonical path is in @root (@len bytes); if not, says
 * so on stderr.  Return: 0, -ENOENT (not a fusefs mount point) or the
 * -errno of looking at @mnt.
 */
int client_mount_root(const char *mnt, char *root, size_t len);
int cmd_pin(int argc, char **argv, const char *what);
int cmd_heat(int argc, char **argv);
int cmd_warm(int argc, char **argv);
/* "fusefs refresh MNT [--wait]": re-list now; --wait until swapped in */
int cmd_refresh(int argc, char **argv);

#endif
