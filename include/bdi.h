/* SPDX-License-Identifier: MIT */
/*
 * bdi.h - the read-ahead window of a mount's backing device info.
 *
 * The kernel's read-ahead window (bdi read_ahead_kb, 128 KiB by default)
 * caps buffered FUSE reads: on kernels up to 7.2 a FUSE_READ in cached
 * mode is never larger, whatever max_pages allows (libraries.md 1.4).
 * Raising it works only after the kernel processed the INIT reply (which
 * resets it), and needs root.
 */
#ifndef FUSEFS_BDI_H
#define FUSEFS_BDI_H

/*
 * bdi_raise_readahead_later() - @delay_ms from now, on a short-lived
 * thread, set read_ahead_kb of the FUSE mount at @mnt (the newest mount
 * there) to @kb.  Failures are logged at debug level: the default stays.
 * Return: 0 or -errno (no thread started).
 */
int bdi_raise_readahead_later(const char *mnt, unsigned kb, unsigned delay_ms);

#endif
