/* SPDX-License-Identifier: MIT */
/*
 * backend_mem.h - an in-memory backend for unit tests of the read path:
 * objects in RAM, read counting, held reads, injected failures.
 * Never used by the daemon or the integration tests.
 */
#ifndef FUSEFS_BACKEND_MEM_H
#define FUSEFS_BACKEND_MEM_H

#include "backend.h"

struct backend *mem_backend_create(void);
void mem_backend_destroy(struct backend *be);
/* mem_put() - create or replace object @key; version is "1", "2", ... */
void mem_put(struct backend *be, const char *key, const void *data,
	     size_t len);
/* mem_hold()/mem_release() - park reads; release completes them all */
void mem_hold(struct backend *be);
void mem_release(struct backend *be);
/* mem_hold_key() - park the reads of object @key only (until release) */
void mem_hold_key(struct backend *be, const char *key);
/* mem_fail() - the next @n reads fail with @err (negative errno) */
void mem_fail(struct backend *be, int n, int err);
unsigned mem_reads(struct backend *be);

#endif
