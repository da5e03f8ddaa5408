/* SPDX-License-Identifier: MIT */
/*
 * testhook.h - test-only gates that let a test force a situation which
 * would otherwise depend on how fast the machine is (two LOOKUPs at once,
 * the verifier not started yet, a quiet mount).
 *
 * They are off unless the daemon's environment names a directory in
 * FUSEFS_TEST_HOOKS (read once, by testhook_init(), before any thread
 * starts).  Off, every call is one load and a branch.  A test drives a
 * hook through files in that directory, which only it writes:
 *
 *   NAME                  testhook_gate(NAME) blocks while it exists
 *                         (polled every millisecond, at most 60 s, so a
 *                         test that forgets it cannot hang the daemon)
 *   NAME                  testhook_value(NAME, dflt): its content, a
 *                         decimal number; @dflt while it is absent or
 *                         not a number
 *
 * The hook points are listed in tests/README.md ("Test hooks").
 * Nothing here is for users: the directory is trusted as the daemon's
 * own environment is.
 */
#ifndef FUSEFS_TESTHOOK_H
#define FUSEFS_TESTHOOK_H

#include <stdbool.h>
#include <stdint.h>

/* testhook_init() - read FUSEFS_TEST_HOOKS; main() calls it first */
void testhook_init(void);
/* testhook_gate() - wait while the gate file @name exists; any thread */
void testhook_gate(const char *name);
/* testhook_value() - the number in file @name, or @dflt; any thread */
int64_t testhook_value(const char *name, int64_t dflt);
/* testhook_on() - FUSEFS_TEST_HOOKS names a directory (a hook that
 * replaces a whole function is installed only then) */
bool testhook_on(void);

#endif
