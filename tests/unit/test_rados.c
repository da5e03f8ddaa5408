// SPDX-License-Identifier: MIT
/*
 * backend_rados.c without a cluster: the backend is opened and driven
 * through backend_rados_ops, and the librados calls it makes are replaced
 * by a fake connection and pool defined below (definitions in the
 * executable take precedence over librados.so).  Covers what a listing
 * does with objects whose stat fails, and the errno mapping of reads.
 */
#include <errno.h>
#include <rados/librados.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "compiler.h"
#include "conf.h"
#include "runner.h"

/* the fake connection: every setup call succeeds */
static int fake_handle;

int rados_create2(rados_t *cluster, const char *const clustername,
		  const char *const name, uint64_t flags)
{
	*cluster = &fake_handle;
	return 0;
}

int rados_conf_read_file(rados_t cluster, const char *path)
{
	return 0;
}

int rados_conf_parse_env(rados_t cluster, const char *var)
{
	return 0;
}

int rados_conf_set(rados_t cluster, const char *option, const char *value)
{
	return 0;
}

int rados_connect(rados_t cluster)
{
	return 0;
}

void rados_shutdown(rados_t cluster)
{
}

int rados_ioctx_create(rados_t cluster, const char *pool_name,
		       rados_ioctx_t *ioctx)
{
	*ioctx = &fake_handle;
	return 0;
}

void rados_ioctx_destroy(rados_ioctx_t io)
{
}

/* the fake pool */
struct fobj {
	const char *name;
	const char *locator;		/* NULL: none */
	uint64_t size, version;
	int stat_rc;			/* what a stat of it answers */
	int read_rc;			/* what a read of it answers */
};

static struct fobj *pool;
static size_t pool_n, list_at;

struct fcomp {
	rados_callback_t cb;
	void *arg;
	int ret;
	uint64_t ver;
};

int rados_nobjects_list_open(rados_ioctx_t io, rados_list_ctx_t *ctx)
{
	list_at = 0;
	*ctx = &list_at;
	return 0;
}

int rados_nobjects_list_next2(rados_list_ctx_t ctx, const char **entry,
			      const char **key, const char **nspace,
			      size_t *entry_size, size_t *key_size,
			      size_t *nspace_size)
{
	struct fobj *o;

	if (list_at >= pool_n)
		return -ENOENT;
	o = &pool[list_at++];
	*entry = o->name;
	*entry_size = strlen(o->name);
	*key = o->locator;
	*key_size = o->locator ? strlen(o->locator) : 0;
	*nspace = "";
	*nspace_size = 0;
	return 0;
}

void rados_nobjects_list_close(rados_list_ctx_t ctx)
{
}

int rados_aio_create_completion2(void *cb_arg, rados_callback_t cb_complete,
				 rados_completion_t *pc)
{
	struct fcomp *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->cb = cb_complete;
	c->arg = cb_arg;
	*pc = c;
	return 0;
}

int rados_aio_get_return_value(rados_completion_t c)
{
	return ((struct fcomp *)c)->ret;
}

uint64_t rados_aio_get_version(rados_completion_t c)
{
	return ((struct fcomp *)c)->ver;
}

void rados_aio_release(rados_completion_t c)
{
	free(c);
}

int rados_aio_wait_for_complete(rados_completion_t c)
{
	return 0;
}

static struct fobj *find(const char *o)
{
	size_t i;

	for (i = 0; i < pool_n; i++)
		if (!strcmp(pool[i].name, o))
			return &pool[i];
	return NULL;
}

static void complete_now(struct fcomp *c, int ret, uint64_t ver)
{
	c->ret = ret;
	c->ver = ver;
	if (c->cb)
		c->cb(c, c->arg);
}

int rados_aio_stat(rados_ioctx_t io, const char *o, rados_completion_t c,
		   uint64_t *psize, time_t *pmtime)
{
	struct fobj *f = find(o);

	if (f && !f->stat_rc) {
		*psize = f->size;
		*pmtime = 1000;
	}
	complete_now(c, f ? f->stat_rc : -ENOENT, f ? f->version : 0);
	return 0;
}

struct fop {
	uint64_t assert_ver, off;
	size_t len, *bytes;
	char *buf;
	int *prval;
};

rados_read_op_t rados_create_read_op(void)
{
	return calloc(1, sizeof(struct fop));
}

void rados_release_read_op(rados_read_op_t op)
{
	free(op);
}

void rados_read_op_assert_version(rados_read_op_t op, uint64_t ver)
{
	((struct fop *)op)->assert_ver = ver;
}

void rados_read_op_read(rados_read_op_t op, uint64_t off, size_t len,
			char *buf, size_t *bytes, int *prval)
{
	struct fop *p = op;

	p->off = off;
	p->len = len;
	p->buf = buf;
	p->bytes = bytes;
	p->prval = prval;
}

void rados_read_op_set_flags(rados_read_op_t op, int flags)
{
}

int rados_aio_read_op_operate(rados_read_op_t op, rados_ioctx_t io,
			      rados_completion_t c, const char *oid, int flags)
{
	struct fop *p = op;
	struct fobj *f = find(oid);
	int ret = 0;

	if (!f)
		ret = -ENOENT;
	else if (f->read_rc)
		ret = f->read_rc;
	else if (p->assert_ver && p->assert_ver != f->version)
		ret = p->assert_ver < f->version ? -ERANGE : -EOVERFLOW;
	if (!ret) {
		size_t n = p->off >= f->size ? 0 :
			   (size_t)MIN(p->len, f->size - p->off);

		memset(p->buf, 'x', n);
		*p->bytes = n;
		*p->prval = 0;
	}
	complete_now(c, ret, f ? f->version : 0);
	return 0;
}

/* the code under test, on a fake connection */

/* a backend on the fake connection: rados://pool */
static struct backend *fake_be(void)
{
	struct fusefs_conf cf;
	struct backend *be = NULL;

	conf_init(&cf);
	CHECK_INT(backend_rados_ops.open(&be, &cf, "pool"), ==, 0);
	conf_release(&cf);
	return be;
}

struct seen {
	int n;
	char keys[8][64];
	struct ns_attr a[8];
};

static int collect(void *arg, const char *key, size_t len,
		   const struct ns_attr *a)
{
	struct seen *s = arg;

	if (s->n < 8 && len < sizeof(s->keys[0]) && a) {
		memcpy(s->keys[s->n], key, len);
		s->keys[s->n][len] = '\0';
		s->a[s->n] = *a;
		s->n++;
	}
	return 0;
}

/* a listing of a fake pool of @n objects into *@s; its return value */
static int list_pool(struct fobj *objs, size_t n, struct seen *s)
{
	struct backend *be = fake_be();
	int rc;

	pool = objs;
	pool_n = n;
	rc = be->ops->list(be, collect, s);
	be->ops->close(be);
	return rc;
}

static void test_list(void)
{
	struct fobj objs[] = {
		{ .name = "a", .size = 10, .version = 7 },
		{ .name = "b", .size = 20, .version = 9 },
	};
	struct seen s = { 0 };

	CHECK_INT(list_pool(objs, ARRAY_SIZE(objs), &s), ==, 0);
	CHECK_INT(s.n, ==, 2);
	CHECK_STR(s.keys[1], "b");
	CHECK_INT(s.a[1].size, ==, 20);
	CHECK_STR(s.a[1].version, "9");
}

/* an object deleted between the listing and its stat is just not there */
static void test_list_deleted_meanwhile(void)
{
	struct fobj objs[] = {
		{ .name = "a", .size = 10, .version = 7 },
		{ .name = "gone", .stat_rc = -ENOENT },
		{ .name = "c", .size = 30, .version = 3 },
	};
	struct seen s = { 0 };

	CHECK_INT(list_pool(objs, ARRAY_SIZE(objs), &s), ==, 0);
	CHECK_INT(s.n, ==, 2);
	CHECK_STR(s.keys[1], "c");
}

/*
 * A stat that times out (a PG stuck, an OSD down) says nothing about the
 * object: the listing fails, so a re-listing keeps the old tree instead of
 * dropping the files whose stat failed.
 */
static void test_list_stat_error_fails_the_listing(void)
{
	static const int errs[] = { -ETIMEDOUT, -EIO, -EACCES, -ESHUTDOWN };
	size_t k;

	for (k = 0; k < ARRAY_SIZE(errs); k++) {
		struct fobj objs[] = {
			{ .name = "a", .size = 10, .version = 7 },
			{ .name = "stuck", .stat_rc = errs[k] },
			{ .name = "c", .size = 30, .version = 3 },
		};
		struct seen s = { 0 };

		CHECK_INT(list_pool(objs, ARRAY_SIZE(objs), &s), ==, errs[k]);
		CHECK_INT(s.n, ==, 0);	/* nothing half-listed */
	}
}

static ssize_t got;
static int ndone;

static void rd_done(struct backend_read *rd, ssize_t ret)
{
	got = ret;
	ndone++;
}

static ssize_t read1(struct backend *be, const char *key, const char *ver)
{
	char buf[16];
	struct backend_read rd = {
		.key = key, .version = ver, .off = 0, .len = sizeof(buf),
		.buf = buf, .done = rd_done,
	};
	int rc;

	ndone = 0;
	got = 12345;
	rc = be->ops->read(be, &rd);
	if (rc)
		return rc;
	CHECK_INT(ndone, ==, 1);
	return got;
}

static void test_read_errors(void)
{
	struct fobj objs[] = {
		{ .name = "a", .size = 10, .version = 7 },
		{ .name = "t", .size = 10, .version = 1, .read_rc = -ETIMEDOUT },
	};
	struct backend *r = fake_be();

	pool = objs;
	pool_n = ARRAY_SIZE(objs);
	CHECK_INT(read1(r, "a", "7"), ==, 10);
	CHECK_INT(read1(r, "a", ""), ==, 10);
	CHECK_INT(read1(r, "a", "6"), ==, -ESTALE);	/* newer now */
	CHECK_INT(read1(r, "a", "8"), ==, -ESTALE);	/* older now */
	CHECK_INT(read1(r, "a", "\"etag\""), ==, -ESTALE);
	CHECK_INT(read1(r, "nope", "7"), ==, -ENOENT);
	CHECK_INT(read1(r, "t", "1"), ==, -ETIMEDOUT);
	r->ops->close(r);
}

int main(void)
{
	runner_name = "test_rados";
	TEST(test_list);
	TEST(test_list_deleted_meanwhile);
	TEST(test_list_stat_error_fails_the_listing);
	TEST(test_read_errors);
	return runner_done();
}
