// SPDX-License-Identifier: MIT
/* openbound.c - see openbound.h */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "openbound.h"

/* users other than the owner with handles open at once: one more
 * distinct user finds no slot and gets EMFILE too */
#define MAX_USERS	1024

struct ob_user {
	uid_t uid;
	unsigned opens;		/* 0: a free slot */
};

struct openbound {
	pthread_mutex_t lock;	/* a leaf */
	unsigned per_user, others_max, others;
	struct ob_user users[MAX_USERS];
	atomic_llong warned;	/* when the last refusal was logged */
};

unsigned openbound_others_max(unsigned long nofile)
{
	if (nofile <= OPENBOUND_RESERVE + 4)
		return 1;
	return (unsigned)MIN((nofile - OPENBOUND_RESERVE) / 4, 1UL << 30);
}

struct openbound *openbound_create(unsigned per_user, unsigned others_max)
{
	struct openbound *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	pthread_mutex_init(&b->lock, NULL);
	b->per_user = per_user;
	b->others_max = others_max;
	return b;
}

void openbound_destroy(struct openbound *b)
{
	if (!b)
		return;
	pthread_mutex_destroy(&b->lock);
	free(b);
}

bool openbound_is_owner(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* @uid's slot, made if @make; NULL if none */
static struct ob_user *user_locked(struct openbound *b, uid_t uid, bool make)
{
	struct ob_user *free_slot = NULL;
	size_t i;

	for (i = 0; i < MAX_USERS; i++) {
		struct ob_user *u = &b->users[i];

		if (u->opens && u->uid == uid)
			return u;
		if (!u->opens && !free_slot)
			free_slot = u;
	}
	if (make && free_slot)
		free_slot->uid = uid;
	return make ? free_slot : NULL;
}

int openbound_get(struct openbound *b, uid_t uid)
{
	struct ob_user *u;
	bool all = false;
	long long now;
	int rc = 0;

	if (openbound_is_owner(uid))
		return 0;
	pthread_mutex_lock(&b->lock);
	u = user_locked(b, uid, true);
	if (b->others >= b->others_max) {
		all = true;
		rc = -EMFILE;
	} else if (!u || u->opens >= b->per_user) {
		rc = -EMFILE;
	} else {
		u->opens++;
		b->others++;
	}
	pthread_mutex_unlock(&b->lock);
	now = (long long)time(NULL);
	if (rc && now - atomic_load(&b->warned) >= 60) {
		atomic_store(&b->warned, now);
		if (all)
			log_warn("open: other users than the mount's owner hold %u files open, all the open-file limit leaves them: uid %u refused (EMFILE)",
				 b->others_max, (unsigned)uid);
		else
			log_warn("open: uid %u holds too many files open (--user-opens %u): refused (EMFILE)",
				 (unsigned)uid, b->per_user);
	}
	return rc;
}

void openbound_put(struct openbound *b, uid_t uid)
{
	struct ob_user *u;

	if (openbound_is_owner(uid))
		return;
	pthread_mutex_lock(&b->lock);
	u = user_locked(b, uid, false);
	if (u && u->opens) {
		u->opens--;
		b->others--;
	}
	pthread_mutex_unlock(&b->lock);
}
