// SPDX-License-Identifier: MIT
/* bdi.c - see bdi.h */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bdi.h"
#include "bgthread.h"
#include "log.h"
#include "mountinfo.h"

struct raise {
	char *mnt;
	unsigned kb, delay_ms;
};

static void raise_readahead(const char *mnt, unsigned kb)
{
	struct mountinfo_top t;	/* the newest mount there */
	char path[128];
	FILE *f;

	if (mountinfo_top(mnt, &t))
		return;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb",
		 t.major, t.minor);
	f = fopen(path, "w");
	if (!f) {
		log_dbg("cannot raise %s: %s", path, strerror(errno));
		return;
	}
	fprintf(f, "%u\n", kb);
	if (fclose(f))
		log_dbg("cannot raise %s: %s", path, strerror(errno));
}

static void *raise_main(void *arg)
{
	struct raise *r = arg;
	struct timespec d = { r->delay_ms / 1000, (r->delay_ms % 1000) * 1000000L };

	nanosleep(&d, NULL);
	raise_readahead(r->mnt, r->kb);
	free(r->mnt);
	free(r);
	return NULL;
}

int bdi_raise_readahead_later(const char *mnt, unsigned kb, unsigned delay_ms)
{
	struct raise *r = malloc(sizeof(*r));
	pthread_t t;
	int rc;

	if (!r)
		return -ENOMEM;
	r->mnt = strdup(mnt);
	r->kb = kb;
	r->delay_ms = delay_ms;
	if (!r->mnt) {
		free(r);
		return -ENOMEM;
	}
	rc = thread_spawn(&t, raise_main, r);
	if (rc) {
		free(r->mnt);
		free(r);
		return rc;
	}
	pthread_detach(t);
	return 0;
}
