/* SPDX-License-Identifier: MIT */
/*
 * manifest_cmd.h - "fusefs manifest create SOURCE", "fusefs manifest diff
 * A B" (fusefs/manifest_cmd.c).  Returns the exit status: create 0/1,
 * diff 0 (same), 1 (different), 2 (error or usage).
 */
#ifndef FUSEFS_MANIFEST_CMD_H
#define FUSEFS_MANIFEST_CMD_H

int cmd_manifest(int argc, char **argv);

#endif
