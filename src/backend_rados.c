// SPDX-License-Identifier: MIT
/*
 * backend_rados.c - objects in a RADOS pool through librados.  The only
 * file that includes rados/librados.h.
 *
 * One rados_t and one ioctx for the pool's default namespace, created at
 * open and never changed afterwards (ioctx setters are not thread-safe).
 * Reads are compound read ops: assert_version + read, so bytes of a
 * rewritten object come back as -ERANGE (-> -ESTALE), never mixed in.
 * Completions run on librados' finisher thread and only call rd->done().
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <rados/librados.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "creds.h"
#include "log.h"
#include "strsafe.h"

#define LIST_WINDOW	128	/* stats in flight while listing */

struct rados_be {
	struct backend base;
	rados_t cluster;
	rados_ioctx_t io;
	char pool[256];
	bool snapped;		/* --snap: reads see pool snapshot snap */
	rados_snap_t snap;
};

struct rados_rd {		/* lives in backend_read.priv during a read */
	rados_read_op_t op;
	size_t bytes;
	int prval;
};

static struct rados_be *rbe(struct backend *be)
{
	return container_of(be, struct rados_be, base);
}

/*
 * A snapshot's objects never change: their version is the snapshot's
 * ("s" and its id), and reads assert nothing.
 */
static void version_str(const struct rados_be *r, char *out, uint64_t v)
{
	if (r->snapped)
		snprintf(out, NS_VERSION_MAX, "s%" PRIu64, (uint64_t)r->snap);
	else
		snprintf(out, NS_VERSION_MAX, "%" PRIu64, v);
}

/*
 * @v is a version this pool can have: the snapshot's on a --snap mount,
 * else decimal digits.  Any other (a manifest's S3 ETag or version ID,
 * or another snapshot's) names other bytes: the read is refused as
 * -ESTALE, never served unasserted.
 */
static bool version_ours(const struct rados_be *r, const char *v)
{
	char snap[NS_VERSION_MAX];

	if (r->snapped) {
		version_str(r, snap, 0);
		return !strcmp(v, snap);
	}
	return *v && strspn(v, "0123456789") == strlen(v);
}

/* --snap NAME: every read of the ioctx sees the pool snapshot */
static int set_snap(struct rados_be *r, const char *name)
{
	int rc = rados_ioctx_snap_lookup(r->io, name, &r->snap);

	if (rc < 0) {
		fprintf(stderr, "fusefs: pool '%s' has no snapshot '%s'%s\n",
			r->pool, name, rc == -ENOENT ? "" : strerror(-rc));
		return rc;
	}
	rados_ioctx_snap_set_read(r->io, r->snap);
	r->snapped = true;
	log_info("reading snapshot '%s' (id %" PRIu64 ") of pool '%s'", name,
		 (uint64_t)r->snap, r->pool);
	return 0;
}

static int ceph_set(rados_t c, const char *k, const char *v)
{
	int rc = rados_conf_set(c, k, v);

	if (rc < 0)
		fprintf(stderr, "fusefs: ceph option %s=%s: %s\n", k, v,
			strerror(-rc));
	return rc;
}

static int rbe_open(struct backend **out, const struct fusefs_conf *cf,
		      const char *where)
{
	struct rados_be *r = calloc(1, sizeof(*r));
	const char *slash = strchr(where, '/');
	char name[300], tmo[32];
	size_t plen = slash ? (size_t)(slash - where) : strlen(where);
	int rc;

	if (!r)
		return -ENOMEM;
	r->base.ops = &backend_rados_ops;
	if (!plen || plen >= sizeof(r->pool)) {
		fprintf(stderr, "fusefs: bad source: expected rados://POOL[/PREFIX]\n");
		rc = -EINVAL;
		goto out_free;
	}
	memcpy(r->pool, where, plen);
	rc = backend_set_prefix(&r->base, slash ? slash : "");
	if (rc) {
		fprintf(stderr, "fusefs: prefix too long\n");
		goto out_free;
	}
	snprintf(name, sizeof(name), "client.%s", cf->ceph_id ? cf->ceph_id : "admin");
	rc = rados_create2(&r->cluster, "ceph", name, 0);
	if (rc < 0) {
		fprintf(stderr, "fusefs: rados_create: %s\n", strerror(-rc));
		goto out_free;
	}
	rc = rados_conf_read_file(r->cluster, cf->ceph_conf);
	if (rc < 0 && cf->ceph_conf) {
		fprintf(stderr, "fusefs: cannot read ceph config '%s': %s\n",
			cf->ceph_conf, strerror(-rc));
		goto out_shutdown;
	}
	rados_conf_parse_env(r->cluster, NULL);
	snprintf(tmo, sizeof(tmo), "%u", cf->connect_timeout_s);
	rc = ceph_set(r->cluster, "client_mount_timeout", tmo);
	if (!rc)
		rc = ceph_set(r->cluster, "rados_mon_op_timeout", tmo);
	snprintf(tmo, sizeof(tmo), "%u", cf->op_timeout_s);
	if (!rc)
		rc = ceph_set(r->cluster, "rados_osd_op_timeout", tmo);
	/* above the in-flight budget rados_aio_* would block the caller */
	if (!rc)
		rc = ceph_set(r->cluster, "objecter_inflight_op_bytes", "2147483648");
	if (!rc && cf->keyring)
		rc = ceph_set(r->cluster, "keyring", cf->keyring);
	if (rc < 0)
		goto out_shutdown;
	rc = rados_connect(r->cluster);
	creds_hide_process();	/* librados holds the cephx key now */
	if (rc < 0) {
		fprintf(stderr, "fusefs: cannot connect to the Ceph cluster as %s: %s%s\n",
			name, strerror(-rc),
			rc == -ETIMEDOUT || rc == -ENOENT ?
			" (check --ceph-conf, mon_host and that the monitors run)" : "");
		goto out_shutdown;
	}
	rc = rados_ioctx_create(r->cluster, r->pool, &r->io);
	if (rc < 0) {
		fprintf(stderr, "fusefs: cannot open pool '%s': %s\n", r->pool,
			rc == -ENOENT ? "no such pool" : strerror(-rc));
		goto out_shutdown;
	}
	if (cf->snap) {
		rc = set_snap(r, cf->snap);
		if (rc)
			goto out_ioctx;
	}
	log_info("connected to RADOS pool '%s' as %s", r->pool, name);
	*out = &r->base;
	return 0;
out_ioctx:
	rados_ioctx_destroy(r->io);
out_shutdown:
	rados_shutdown(r->cluster);
out_free:
	free(r);
	return rc;
}

static void rbe_close(struct backend *be)
{
	struct rados_be *r = rbe(be);

	rados_ioctx_destroy(r->io);
	rados_shutdown(r->cluster);
	free(r);
}

/* listing: names first (one pass), then stats LIST_WINDOW at a time */
struct lstat {
	char *key;
	size_t len;
	uint64_t size;
	time_t mtime;
	uint64_t version;
	int rc;
};

struct lwait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned inflight;
};

struct lstat_op {
	struct lstat *st;
	struct lwait *w;
};

static void list_stat_done(rados_completion_t c, void *arg)
{
	struct lstat_op *op = arg;

	op->st->rc = rados_aio_get_return_value(c);
	op->st->version = rados_aio_get_version(c);
	rados_aio_release(c);
	pthread_mutex_lock(&op->w->lock);
	op->w->inflight--;
	pthread_cond_signal(&op->w->cond);
	pthread_mutex_unlock(&op->w->lock);
	free(op);
}

static int stat_all(struct rados_be *r, struct lstat *v, size_t n)
{
	struct lwait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
	size_t i;
	int rc = 0;

	for (i = 0; i < n && !rc; i++) {
		struct lstat_op *op = malloc(sizeof(*op));
		rados_completion_t c;

		pthread_mutex_lock(&w.lock);
		while (w.inflight >= LIST_WINDOW)
			pthread_cond_wait(&w.cond, &w.lock);
		pthread_mutex_unlock(&w.lock);
		if (!op) {
			rc = -ENOMEM;
			break;
		}
		op->st = &v[i];
		op->w = &w;
		rc = rados_aio_create_completion2(op, list_stat_done, &c);
		if (rc < 0) {
			free(op);
			break;
		}
		pthread_mutex_lock(&w.lock);
		w.inflight++;
		pthread_mutex_unlock(&w.lock);
		rc = rados_aio_stat(r->io, v[i].key, c, &v[i].size, &v[i].mtime);
		if (rc < 0) {
			rados_aio_release(c);
			free(op);
			pthread_mutex_lock(&w.lock);
			w.inflight--;
			pthread_mutex_unlock(&w.lock);
		}
	}
	pthread_mutex_lock(&w.lock);
	while (w.inflight)
		pthread_cond_wait(&w.cond, &w.lock);
	pthread_mutex_unlock(&w.lock);
	return rc;
}

static int rbe_list(struct backend *be, backend_list_fn fn, void *arg)
{
	struct rados_be *r = rbe(be);
	rados_list_ctx_t ctx;
	struct lstat *v = NULL;
	size_t n = 0, cap = 0, i, plen = strlen(be->prefix);
	const char *entry, *key, *nspace;
	size_t elen, klen, nlen;
	int rc;

	rc = rados_nobjects_list_open(r->io, &ctx);
	if (rc < 0)
		return rc;
	while ((rc = rados_nobjects_list_next2(ctx, &entry, &key, &nspace,
					       &elen, &klen, &nlen)) == 0) {
		/* objects with a locator key are not ours to name */
		if (plen && (elen <= plen || memcmp(entry, be->prefix, plen) ||
			     entry[plen] != '/'))
			continue;
		if (memchr(entry, '\0', elen)) {
			/* cannot be opened through the C API by name */
			fn(arg, entry, elen, NULL);
			continue;
		}
		if (n == cap) {
			struct lstat *nv;

			cap = cap ? cap * 2 : 1024;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n].key = strndup(entry, elen);
		v[n].len = elen;
		if (!v[n].key) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	rados_nobjects_list_close(ctx);
	if (rc == -ENOENT)
		rc = 0;
	if (!rc)
		rc = stat_all(r, v, n);
	/*
	 * -ENOENT: deleted since it was listed.  Any other failed stat (a
	 * timeout, a stuck PG) says nothing about the object: fail the
	 * listing, so a re-listing keeps the old tree instead of dropping it.
	 */
	for (i = 0; i < n && !rc; i++) {
		if (v[i].rc < 0 && v[i].rc != -ENOENT) {
			rc = v[i].rc;
			log_err("pool '%s': stat of '%s' while listing: %s",
				r->pool, str_log(v[i].key), strerror(-rc));
		}
	}
	for (i = 0; i < n; i++) {
		if (!rc && v[i].rc == 0) {
			struct ns_attr a = {
				.size = v[i].size, .mtime = v[i].mtime,
			};

			version_str(r, a.version, v[i].version);
			rc = fn(arg, v[i].key, v[i].len, &a);
		}
		free(v[i].key);
	}
	free(v);
	return rc;
}

static int rados_stat_obj(struct backend *be, const char *key,
			  struct ns_attr *out)
{
	struct rados_be *r = rbe(be);
	rados_completion_t c;
	uint64_t size;
	time_t mtime;
	int rc;

	rc = rados_aio_create_completion2(NULL, NULL, &c);
	if (rc < 0)
		return rc;
	rc = rados_aio_stat(r->io, key, c, &size, &mtime);
	if (rc == 0) {
		rados_aio_wait_for_complete(c);
		rc = rados_aio_get_return_value(c);
	}
	if (rc == 0) {
		memset(out, 0, sizeof(*out));
		out->size = size;
		out->mtime = mtime;
		version_str(r, out->version, rados_aio_get_version(c));
	}
	rados_aio_release(c);
	return rc;
}

static void read_done(rados_completion_t c, void *arg)
{
	struct backend_read *rd = arg;
	struct rados_rd *p = rd->priv;
	ssize_t ret = rados_aio_get_return_value(c);

	if (ret >= 0)
		ret = p->prval < 0 ? p->prval : (ssize_t)p->bytes;
	if (ret == -ERANGE || ret == -EOVERFLOW)
		ret = -ESTALE;		/* assert_version: another object now */
	rados_aio_release(c);
	rados_release_read_op(p->op);
	free(p);
	rd->priv = NULL;
	rd->done(rd, ret);
}

static int rbe_read(struct backend *be, struct backend_read *rd)
{
	struct rados_be *r = rbe(be);
	struct rados_rd *p = calloc(1, sizeof(*p));
	rados_completion_t c;
	int rc;

	if (!p)
		return -ENOMEM;
	if (rd->version[0] && !version_ours(r, rd->version)) {
		free(p);
		return -ESTALE;
	}
	p->op = rados_create_read_op();
	if (!p->op) {
		free(p);
		return -ENOMEM;
	}
	if (rd->version[0] && !r->snapped)
		rados_read_op_assert_version(p->op, strtoull(rd->version, NULL, 10));
	rados_read_op_read(p->op, rd->off, rd->len, rd->buf, &p->bytes,
			   &p->prval);
	rados_read_op_set_flags(p->op, LIBRADOS_OP_FLAG_FADVISE_SEQUENTIAL);
	rd->priv = p;
	rc = rados_aio_create_completion2(rd, read_done, &c);
	if (rc < 0)
		goto out_op;
	rc = rados_aio_read_op_operate(p->op, r->io, c, rd->key,
				       LIBRADOS_OPERATION_BALANCE_READS);
	if (rc < 0) {
		rados_aio_release(c);
		goto out_op;
	}
	return 0;
out_op:
	rados_release_read_op(p->op);
	free(p);
	rd->priv = NULL;
	return rc;
}

const struct backend_ops backend_rados_ops = {
	.scheme = "rados",
	.open = rbe_open,
	.close = rbe_close,
	.list = rbe_list,
	.stat = rados_stat_obj,
	.read = rbe_read,
};
