/* SPDX-License-Identifier: MIT */
/*
 * client.h - fusefs subcommands that talk to a running mount through its
 * control files (MNT/.fusefs/, see include/ctl.h): they work from any
 * process that sees the mount, without root.
 */
#ifndef FUSEFS_CLIENT_H
#define FUSEFS_CLIENT_H

/* each returns the process exit status: 0, 1 (failed) or 2 (usage) */
int cmd_prefetch(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_pin(int argc, char **argv, const char *what);
int cmd_heat(int argc, char **argv);
int cmd_warm(int argc, char **argv);

#endif
