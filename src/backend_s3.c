// SPDX-License-Identifier: MIT
/*
 * backend_s3.c - objects in an S3 bucket (Ceph RGW or any S3 endpoint)
 * through libcurl, the only file that includes curl/curl.h.
 *
 * Signing: CURLOPT_AWS_SIGV4; paths and queries are pre-canonicalized by
 * s3sign.c and x-amz-content-sha256 is sent explicitly (curl 7.88 does
 * neither).  Reads are ranged GETs with If-Match: <ETag>, so a replaced
 * object answers 412 (-> -ESTALE) instead of other bytes; a version
 * pinned as "vid:ID" (backend.h) is read as ?versionId=ID, with no
 * If-Match (those bytes never change).  They run on one
 * thread driving a curl multi handle (keep-alive, connection reuse, at
 * most max_inflight connections).  Listing and HEAD are synchronous
 * requests made by background threads (re-listing, re-checks of
 * versions), several at once: each takes one of S3_SYNC_HANDLES easy
 * handles from a pool, and gives it back after the transfer (an easy
 * handle and its connection cache are used by one thread at a time).
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "bgthread.h"
#include "creds.h"
#include "log.h"
#include "s3list.h"
#include "s3sign.h"
#include "s3walk.h"
#include "strsafe.h"

#define EMPTY_SHA256 \
	"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define URL_MAX		8192
#define S3_SYNC_HANDLES	6	/* listing and HEAD requests at once */
#define S3_LIST_STREAMS	4	/* listings of one prefix's parts at once */
#define S3_SPLIT_DEPTH	2	/* levels listed with a delimiter (s3walk.h) */
#define S3_STALL_RATE	1024		/* bytes/s: below it for op_timeout,
					 * a transfer is stalled and fails */
#define S3_GET_MIN_RATE	(64U << 10)	/* bytes/s a GET's time limit allows */

struct s3_be {
	struct backend base;
	char scheme[8];			/* "http" or "https" */
	char host[512];			/* host[:port] */
	char bucket[256];
	char root[1025];		/* the prefix listed: "" or "PREFIX/" */
	char sigv4[128];
	char userpwd[512];
	char token_hdr[4200];
	const struct fusefs_conf *cf;

	pthread_mutex_t sync_lock;	/* guards sync_free, nsync_free */
	pthread_cond_t sync_cond;	/* a handle was given back */
	CURL *sync[S3_SYNC_HANDLES];	/* owned, for list/HEAD */
	CURL *sync_free[S3_SYNC_HANDLES];
	int nsync_free;

	pthread_mutex_t lock;		/* guards queue, idle, stop */
	struct s3_rd *queue;
	CURL *idle[64];
	int nidle;
	bool stop;
	CURLM *multi;
	pthread_t thread;
};

/* one read in flight: backend_read.priv */
struct s3_rd {
	struct backend_read *rd;
	CURL *h;
	struct curl_slist *hdrs;
	size_t got;
	bool overflow;
	bool pinned;		/* ?versionId=: no If-Match */
	char vid[NS_VERSION_MAX];	/* x-amz-version-id of the answer */
	char url[URL_MAX];
	struct s3_rd *next;
};

static struct s3_be *sbe(struct backend *be)
{
	return container_of(be, struct s3_be, base);
}

/* URL of @key ("" = the bucket) with canonical @query (may be "") */
static int make_url(const struct s3_be *s, const char *key, const char *query,
		    char *out, size_t cap)
{
	char path[URL_MAX];
	int n;

	if (s3_uri_encode(key, strlen(key), true, path, sizeof(path)) >=
	    sizeof(path))
		return -ENAMETOOLONG;
	if (s->cf->s3_virtual_host)
		n = snprintf(out, cap, "%s://%s.%s/%s%s%s", s->scheme, s->bucket,
			     s->host, path, *query ? "?" : "", query);
	else
		n = snprintf(out, cap, "%s://%s/%s/%s%s%s", s->scheme, s->host,
			     s->bucket, path, *query ? "?" : "", query);
	return n < (int)cap ? 0 : -ENAMETOOLONG;
}

static struct curl_slist *base_headers(const struct s3_be *s)
{
	struct curl_slist *h = curl_slist_append(NULL,
		"x-amz-content-sha256: " EMPTY_SHA256);

	if (h && s->token_hdr[0])
		h = curl_slist_append(h, s->token_hdr);
	return h;
}

static void setup(const struct s3_be *s, CURL *h)
{
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_AWS_SIGV4, s->sigv4);
	curl_easy_setopt(h, CURLOPT_USERPWD, s->userpwd);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, (long)s->cf->connect_timeout_s);
	/* a stalled or trickling transfer (under 1 KiB/s for op_timeout)
	 * fails then; each request also sets an overall limit
	 * (CURLOPT_TIMEOUT*) for one that is slow all the way */
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, (long)S3_STALL_RATE);
	curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)s->cf->op_timeout_s);
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 512L * 1024);
	if (s->cf->s3_ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, s->cf->s3_ca_file);
}

/* HTTP status -> -errno; 0 for success */
static int http_errno(long code)
{
	if (code == 200 || code == 206)
		return 0;
	if (code == 412)
		return -ESTALE;
	if (code == 404)
		return -ENOENT;
	if (code == 403 || code == 401)
		return -EACCES;
	if (code == 416)
		return -ERANGE;
	if (code >= 500 || code == 429)
		return -EAGAIN;
	return -EIO;
}

/* a certificate or handshake problem (libcurl 7.88's TLS codes) */
static bool curl_is_tls(CURLcode c)
{
	switch (c) {
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_SSL_ENGINE_NOTFOUND:
	case CURLE_SSL_ENGINE_SETFAILED:
	case CURLE_SSL_CERTPROBLEM:
	case CURLE_SSL_CIPHER:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_ENGINE_INITFAILED:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_SHUTDOWN_FAILED:
	case CURLE_SSL_CRL_BADFILE:
	case CURLE_SSL_ISSUER_ERROR:
	case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
	case CURLE_SSL_INVALIDCERTSTATUS:
	case CURLE_SSL_CLIENTCERT:
	case CURLE_USE_SSL_FAILED:
		return true;
	default:
		return false;
	}
}

/* a transfer that failed below HTTP -> -errno (all of them retried) */
static int curl_errno(CURLcode c)
{
	switch (c) {
	case CURLE_OK:
		return 0;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		return -EHOSTUNREACH;	/* no errno says "DNS": logs name it */
	default:
		return -EIO;
	}
}

/* ---- synchronous requests: listing and HEAD ---- */

/* a response body, at most S3_PAGE_MAX bytes (a listing page) */
struct body {
	char *p;
	size_t len, cap;
	bool over;		/* the server sent more: the transfer stopped */
};

static size_t body_write(char *data, size_t sz, size_t n, void *arg)
{
	struct body *b = arg;
	size_t len = sz * n;

	if (b->len + len > S3_PAGE_MAX) {
		b->over = true;
		return 0;	/* curl fails the transfer */
	}
	if (b->len + len + 1 > b->cap) {
		size_t cap = MIN((b->len + len + 1) * 2, (size_t)S3_PAGE_MAX + 1);
		char *p = realloc(b->p, cap);

		if (!p)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
	return len;
}

/* one synchronous request: a pooled handle, its headers and URL */
struct s3_sync {
	CURL *h;
	struct curl_slist *hdrs;
	char url[URL_MAX];
	char err[CURL_ERROR_SIZE];	/* curl's own words on a failure */
};

/*
 * sync_begin() - take a handle from the pool (waiting while all are in
 * use) and point it at @key ("" = the bucket) with @query; the caller
 * adds its options, performs and calls sync_end().  Return: 0 or -errno
 * (no handle taken).
 */
static int sync_begin(struct s3_be *s, const char *key, const char *query,
		      struct s3_sync *r)
{
	int rc = make_url(s, key, query, r->url, sizeof(r->url));

	if (rc)
		return rc;
	r->hdrs = base_headers(s);
	if (!r->hdrs)
		return -ENOMEM;
	pthread_mutex_lock(&s->sync_lock);
	while (!s->nsync_free)
		pthread_cond_wait(&s->sync_cond, &s->sync_lock);
	r->h = s->sync_free[--s->nsync_free];
	pthread_mutex_unlock(&s->sync_lock);
	setup(s, r->h);
	r->err[0] = '\0';
	curl_easy_setopt(r->h, CURLOPT_ERRORBUFFER, r->err);
	curl_easy_setopt(r->h, CURLOPT_URL, r->url);
	curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, r->hdrs);
	return 0;
}

/* sync_end() - give the handle back (its connection stays cached) */
static void sync_end(struct s3_be *s, struct s3_sync *r)
{
	curl_easy_setopt(r->h, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(r->hdrs);
	pthread_mutex_lock(&s->sync_lock);
	s->sync_free[s->nsync_free++] = r->h;
	pthread_cond_signal(&s->sync_cond);
	pthread_mutex_unlock(&s->sync_lock);
}

/*
 * How a synchronous request ended, for a message that names the failure:
 * the transfer's code (CURLE_OK: the server answered with @code), the
 * system error under a failed connect, curl's words, the URL.
 */
struct s3_ans {
	long code;		/* HTTP status, 0: no answer */
	CURLcode cc;
	long os_errno;
	char err[CURL_ERROR_SIZE];
	char url[URL_MAX];
};

/* GET the bucket with @query into @b; returns -errno, @a how it ended */
static int sync_get(struct s3_be *s, const char *query, struct body *b,
		    struct s3_ans *a)
{
	struct s3_sync r;
	CURLcode cc;
	int rc;

	a->code = 0;		/* no answer yet: also on early errors */
	a->cc = CURLE_OK;
	a->os_errno = 0;
	a->err[0] = a->url[0] = '\0';
	rc = sync_begin(s, "", query, &r);
	if (rc)
		return rc;
	curl_easy_setopt(r.h, CURLOPT_WRITEFUNCTION, body_write);
	curl_easy_setopt(r.h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(r.h, CURLOPT_TIMEOUT, (long)s->cf->op_timeout_s * 4);
	cc = curl_easy_perform(r.h);
	curl_easy_getinfo(r.h, CURLINFO_RESPONSE_CODE, &a->code);
	curl_easy_getinfo(r.h, CURLINFO_OS_ERRNO, &a->os_errno);
	a->cc = cc;
	snprintf(a->err, sizeof(a->err), "%s", r.err[0] ? r.err :
		 curl_easy_strerror(cc));
	memcpy(a->url, r.url, sizeof(a->url));
	sync_end(s, &r);
	if (b->over) {
		log_err("S3 listing of bucket '%s': a page larger than %u MiB: refused",
			s->bucket, S3_PAGE_MAX >> 20);
		return -EFBIG;
	}
	if (cc != CURLE_OK) {
		log_err("S3 request to %s://%s failed: %s", s->scheme, s->host,
			a->err);
		return curl_errno(cc);
	}
	return http_errno(a->code);
}

/* GET the bucket with the @n parameters @p (a listing page) into @b */
static int get_page(struct s3_be *s, const struct s3_param *p, size_t n,
		    struct body *b, struct s3_ans *a)
{
	char query[8192];
	int rc = s3_query_canon(p, n, query, sizeof(query));

	a->code = 0;		/* no answer yet: also on early errors */
	if (rc < 0)
		return rc;
	b->len = 0;
	b->over = false;
	return sync_get(s, query, b, a);
}

/* one ListObjectsV2 page of @prefix after @token ("" for the first),
 * with the delimiter '/' if @delimit */
static int list_page(struct s3_be *s, const char *prefix, bool delimit,
		     const char *token, int max_keys, struct body *b,
		     struct s3_ans *a)
{
	struct s3_param p[6];
	size_t n = 0;
	char mk[16];

	snprintf(mk, sizeof(mk), "%d", max_keys);
	p[n++] = (struct s3_param){ "list-type", "2" };
	if (delimit)
		p[n++] = (struct s3_param){ "delimiter", "/" };
	p[n++] = (struct s3_param){ "max-keys", mk };
	/* keys come %-encoded: a control character cannot break the XML */
	p[n++] = (struct s3_param){ "encoding-type", "url" };
	if (prefix[0])
		p[n++] = (struct s3_param){ "prefix", prefix };
	if (token[0])
		p[n++] = (struct s3_param){ "continuation-token", token };
	return get_page(s, p, n, b, a);
}

/* one listing of a prefix (a part of s3_list()): its pages' bounds */
struct list_part {
	struct s3walk *w;
	struct s3_listing guard;
	const char *prefix;
	size_t plen;
};

static int part_key(void *arg, const char *key, size_t len,
		    const struct ns_attr *a)
{
	struct list_part *x = arg;
	int rc = s3_listing_key(&x->guard, key, len);

	if (rc)
		return rc;
	if (len < x->plen || memcmp(key, x->prefix, x->plen)) {
		x->guard.error = "a key outside the prefix it was listed under";
		return -EBADMSG;
	}
	return s3walk_key(x->w, key, len, a);
}

static int part_prefix(void *arg, const char *pre, size_t len)
{
	struct list_part *x = arg;
	int rc = s3walk_sub(x->w, x->prefix, x->plen, pre, len);

	if (rc == -EBADMSG)
		x->guard.error = "a common prefix outside the prefix it was listed under";
	return rc;
}

static uint64_t mono_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec;
}

/*
 * Every page of @prefix (s3walk_prefix_fn).  Each page is checked whole
 * before its keys are used, and the listing as a whole is bounded
 * (s3list.h): a hostile or broken endpoint gets a clear error, never a
 * listing that runs forever or a page held in full whatever its size.
 */
static int list_part(void *arg, struct s3walk *w, const char *prefix,
		     size_t plen, bool delimit)
{
	struct s3_be *s = arg;
	struct list_part x = { .w = w, .prefix = prefix, .plen = plen };
	struct body b = { 0 };
	struct s3_page page = { .truncated = true };
	char token[sizeof(page.next_token)] = "";
	uint64_t t0 = mono_s();
	struct s3_ans *a = malloc(sizeof(*a));
	int rc = 0;

	if (!a)
		return -ENOMEM;
	s3_listing_init(&x.guard);
	while (page.truncated && !(rc = s3walk_failed(w))) {
		rc = list_page(s, prefix, delimit, token, 1000, &b, a);
		if (rc) {
			log_err("listing bucket '%s' failed on page %" PRIu64 " (prefix '%s', HTTP %ld): %s",
				s->bucket, x.guard.pages + 1, str_log(prefix),
				a->code, strerror(-rc));
			break;
		}
		rc = s3list_parse_dir(b.p ? b.p : "", b.len, &page, part_key,
				      delimit ? part_prefix : NULL, &x);
		if (!rc)
			rc = s3_listing_page(&x.guard, &page, mono_s() - t0);
		else
			x.guard.pages++;	/* for the message */
		if (!rc)
			rc = s3walk_page_end(w);
		if (rc) {
			/* not when it only stops for another part's error */
			if (rc != s3walk_failed(w))
				log_err("listing bucket '%s' failed on page %" PRIu64 " after %" PRIu64 " keys (prefix '%s'): %s",
					s->bucket, x.guard.pages,
					x.guard.keys, str_log(prefix),
					page.error ? page.error :
					x.guard.error ? x.guard.error :
					strerror(-rc));
			break;
		}
		memcpy(token, page.next_token, sizeof(token));
	}
	log_dbg("listed prefix '%s' of bucket '%s' in %" PRIu64 " pages",
		str_log(prefix), s->bucket, x.guard.pages);
	s3_listing_release(&x.guard);
	free(b.p);
	free(a);
	return rc;
}

/* an object listed larger than the cache takes: listed all the same */
static void note_too_big(const char *key, size_t len,
			 const struct ns_attr *a)
{
	if (a->size == NS_SIZE_TOO_BIG)
		log_warn("S3 object '%s' is listed larger than 2^44 bytes: its open fails with EFBIG",
			 str_log_n(key, len));
}

/* the keys of every part, on s3_list()'s thread: bounded in number */
struct list_ctx {
	backend_list_fn fn;
	void *arg;
	uint64_t keys;
};

static int list_key(void *arg, const char *key, size_t len,
		    const struct ns_attr *a)
{
	struct list_ctx *c = arg;

	if (++c->keys > S3_LIST_MAX_KEYS) {
		log_err("listing: more than %llu keys", S3_LIST_MAX_KEYS);
		return -E2BIG;
	}
	note_too_big(key, len, a);
	return c->fn(c->arg, key, len, a);
}

/* one ListObjectVersions page of @prefix after the markers @key, @vid
 * ("" for the first page) */
static int versions_page(struct s3_be *s, const char *prefix,
			 const char *key, const char *vid, struct body *b,
			 struct s3_ans *a)
{
	struct s3_param p[6];
	size_t n = 0;

	p[n++] = (struct s3_param){ "versions", "" };
	p[n++] = (struct s3_param){ "max-keys", "1000" };
	p[n++] = (struct s3_param){ "encoding-type", "url" };
	if (prefix[0])
		p[n++] = (struct s3_param){ "prefix", prefix };
	if (key[0])
		p[n++] = (struct s3_param){ "key-marker", key };
	if (vid[0])
		p[n++] = (struct s3_param){ "version-id-marker", vid };
	return get_page(s, p, n, b, a);
}

struct versions_ctx {
	struct s3_listing guard;
	backend_list_fn fn;
	void *arg;
};

static int versions_key(void *arg, const char *key, size_t len,
			const struct ns_attr *a)
{
	struct versions_ctx *c = arg;
	int rc = s3_listing_key(&c->guard, key, len);

	if (rc)
		return rc;
	note_too_big(key, len, a);
	return c->fn(c->arg, key, len, a);
}

/*
 * The current version of every key (cf->list_versions: `fusefs manifest
 * create --versions`), its VersionId as the version: one stream of
 * ListObjectVersions pages, each checked whole and the listing bounded
 * as list_part() does.
 */
static int list_versions(struct s3_be *s, backend_list_fn fn, void *arg)
{
	struct versions_ctx c = { .fn = fn, .arg = arg };
	struct s3_page page = { .truncated = true };
	char key[sizeof(page.next_token)] = "", vid[sizeof(page.next_vid)] = "";
	struct body b = { 0 };
	uint64_t t0 = mono_s(), seen = 0, latest = 0;
	struct s3_ans *a = malloc(sizeof(*a));
	int rc = 0;

	if (!a)
		return -ENOMEM;
	s3_listing_init(&c.guard);
	while (page.truncated) {
		rc = versions_page(s, s->root, key, vid, &b, a);
		if (rc) {
			log_err("listing the versions in bucket '%s' failed on page %" PRIu64 " (HTTP %ld): %s",
				s->bucket, c.guard.pages + 1, a->code,
				strerror(-rc));
			break;
		}
		rc = s3list_parse_versions(b.p ? b.p : "", b.len, &page,
					   versions_key, &c);
		if (!rc)
			rc = s3_listing_page(&c.guard, &page, mono_s() - t0);
		else
			c.guard.pages++;
		if (rc) {
			log_err("listing the versions in bucket '%s' failed on page %" PRIu64 " after %" PRIu64 " keys: %s",
				s->bucket, c.guard.pages, c.guard.keys,
				page.error ? page.error : c.guard.error ?
				c.guard.error : strerror(-rc));
			break;
		}
		seen += page.keys;
		latest += page.latest;
		memcpy(key, page.next_token, sizeof(key));
		memcpy(vid, page.next_vid, sizeof(vid));
	}
	if (!rc && seen && !latest) {
		/* not an empty manifest that looks like a good one */
		log_err("listing the versions in bucket '%s': %" PRIu64 " versions, none marked IsLatest: the current ones cannot be told",
			s->bucket, seen);
		rc = -EPROTO;
	}
	s3_listing_release(&c.guard);
	free(b.p);
	free(a);
	return rc;
}

/*
 * The prefix is listed in parts (s3walk.h): the first S3_SPLIT_DEPTH
 * levels with a delimiter, each common prefix by the next free one of
 * S3_LIST_STREAMS streams.  A server that ignores the delimiter returns
 * every key in the first listing, as one plain listing would.
 */
static int s3_list(struct backend *be, backend_list_fn fn, void *arg)
{
	struct s3_be *s = sbe(be);
	struct list_ctx c = { .fn = fn, .arg = arg };
	int rc;

	if (s->cf->list_versions)
		return list_versions(s, fn, arg);
	rc = s3walk_run(S3_LIST_STREAMS, S3_SPLIT_DEPTH, s->root,
			strlen(s->root), list_part, s, list_key, &c);
	log_dbg("listed bucket '%s': %" PRIu64 " keys", s->bucket, c.keys);
	return rc;
}

/* what a HEAD's headers said; anything doubtful refuses the answer */
struct head {
	char etag[NS_VERSION_MAX];
	uint64_t size;
	bool have_size;
	char vid[NS_VERSION_MAX];	/* x-amz-version-id ("": none) */
	const char *bad;	/* why the answer is refused, or NULL */
};

/* @data (@len bytes) is header @name: its value, blanks trimmed */
static bool header_value(const char *data, size_t len, const char *name,
			 const char **v, size_t *vl)
{
	size_t n = strlen(name);

	if (len <= n || strncasecmp(data, name, n) || data[n] != ':')
		return false;
	*v = data + n + 1;
	*vl = len - n - 1;
	while (*vl && (**v == ' ' || **v == '\t'))
		(*v)++, (*vl)--;
	while (*vl && ((*v)[*vl - 1] == '\r' || (*v)[*vl - 1] == '\n' ||
		       (*v)[*vl - 1] == ' ' || (*v)[*vl - 1] == '\t'))
		(*vl)--;
	return true;
}

/* an x-amz-version-id header into @out (cut: no ID matches then) */
static void version_id_header(char *data, size_t len, char *out, size_t cap)
{
	const char *v;
	size_t vl;

	if (header_value(data, len, "x-amz-version-id", &v, &vl))
		snprintf(out, cap, "%.*s", (int)vl, v);
}

/*
 * An answer to a request for version "vid:ID": was it that version?  An
 * endpoint that ignores ?versionId= (no versioning, a mirror) answers
 * with the current object, which must not be taken for the pinned one.
 */
static int version_answered(const struct s3_be *s, const char *version,
			    const char *got)
{
	static atomic_uint logged;

	if (!strcmp(got, version + strlen(S3_VID)))
		return 0;
	if (atomic_fetch_add(&logged, 1) < 5)
		log_err("S3 bucket '%s' answered a request for version '%s' with version '%s': not that version, not served",
			s->bucket, str_log(version + strlen(S3_VID)),
			got[0] ? str_log(got) : "(none)");
	return -EIO;
}

/* a request for one version: 400 (a malformed ID) and 405 (a delete
 * marker) say it is not there */
static int pinned_errno(long code)
{
	return code == 400 || code == 405 ? -ENOENT : http_errno(code);
}

static size_t head_header(char *data, size_t sz, size_t n, void *arg)
{
	struct head *h = arg;
	size_t len = sz * n, vl;
	const char *v;
	uint64_t size;

	if (header_value(data, len, "etag", &v, &vl)) {
		/* it goes into If-Match headers: CR/LF would split them */
		if (!s3_etag_ok(v, vl)) {
			h->bad = "an ETag with control characters, empty, longer than 47 bytes or starting with \"" S3_VID "\"";
		} else if (h->etag[0] && (strlen(h->etag) != vl ||
					  memcmp(h->etag, v, vl))) {
			h->bad = "two different ETags";
		} else {
			memcpy(h->etag, v, vl);
			h->etag[vl] = '\0';
		}
	} else if (header_value(data, len, "content-length", &v, &vl)) {
		if (s3_parse_size(v, vl, &size))
			h->bad = "a Content-Length that is not a decimal number up to 2^44";
		else if (h->have_size && h->size != size)
			h->bad = "two different Content-Lengths";
		h->size = size;
		h->have_size = true;
	} else {
		version_id_header(data, len, h->vid, sizeof(h->vid));
	}
	return len;
}

/*
 * The query "versionId=ID" for a version pinned as "vid:ID" into @out
 * (@cap bytes); 0, -ENOTSUP for any other version (an ETag), -EINVAL for
 * an empty ID or "null", -ENAMETOOLONG.
 */
static int vid_query(const char *version, char *out, size_t cap)
{
	struct s3_param p = { "versionId", "" };

	if (strncmp(version, S3_VID, strlen(S3_VID)))
		return -ENOTSUP;
	p.val = version + strlen(S3_VID);
	/* "null" is the version of a write made while versioning was off,
	 * which the next such write replaces: it pins nothing */
	if (!*p.val || !strcmp(p.val, "null"))
		return -EINVAL;
	return s3_query_canon(&p, 1, out, cap) < 0 ? -ENAMETOOLONG : 0;
}

/* HEAD of @key into @out; @pin: NULL, or the version "vid:ID" asked for
 * by @query (the answer must be that version) */
static int s3_head(struct s3_be *s, const char *key, const char *query,
		   const char *pin, struct ns_attr *out)
{
	struct head hd = { .bad = NULL };
	struct s3_sync r;
	curl_off_t when = -1;
	long code = 0;
	CURLcode cc;
	int rc;

	rc = sync_begin(s, key, query, &r);
	if (rc)
		return rc;
	curl_easy_setopt(r.h, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(r.h, CURLOPT_FILETIME, 1L);
	curl_easy_setopt(r.h, CURLOPT_HEADERFUNCTION, head_header);
	curl_easy_setopt(r.h, CURLOPT_HEADERDATA, &hd);
	curl_easy_setopt(r.h, CURLOPT_TIMEOUT, (long)s->cf->op_timeout_s);
	cc = curl_easy_perform(r.h);
	curl_easy_getinfo(r.h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_getinfo(r.h, CURLINFO_FILETIME_T, &when);
	sync_end(s, &r);
	if (cc != CURLE_OK) {
		/* curl itself refuses e.g. a negative Content-Length */
		log_err("S3 HEAD in bucket '%s' failed: %s", s->bucket,
			r.err[0] ? r.err : curl_easy_strerror(cc));
		return curl_errno(cc);
	}
	rc = pin ? pinned_errno(code) : http_errno(code);
	if (rc)
		return rc;
	if (!hd.bad && (!hd.etag[0] || !hd.have_size))
		hd.bad = "no ETag or no Content-Length";
	if (hd.bad) {
		log_err("S3 HEAD in bucket '%s' refused: %s", s->bucket, hd.bad);
		return -EIO;
	}
	if (pin) {
		rc = version_answered(s, pin, hd.vid);
		if (rc)
			return rc;
	}
	memset(out, 0, sizeof(*out));
	out->size = hd.size;
	out->mtime = when < 0 ? 0 : when;
	memcpy(out->version, hd.etag, sizeof(out->version));
	return 0;
}

static int s3_stat(struct backend *be, const char *key, struct ns_attr *out)
{
	return s3_head(sbe(be), key, "", NULL, out);
}

static int s3_stat_pinned(struct backend *be, const char *key,
			  const char *version, struct ns_attr *out)
{
	char query[256];
	int rc = vid_query(version, query, sizeof(query));

	if (rc)
		return rc == -EINVAL ? -ENOTSUP : rc;	/* "null": stat() */
	rc = s3_head(sbe(be), key, query, version, out);
	if (!rc)
		snprintf(out->version, sizeof(out->version), "%s", version);
	return rc;
}

/* ---- asynchronous ranged reads on the multi thread ---- */

static size_t read_write(char *data, size_t sz, size_t n, void *arg)
{
	struct s3_rd *r = arg;
	size_t len = sz * n;

	if (r->got + len > r->rd->len) {
		r->overflow = true;	/* never more than asked for */
		return 0;
	}
	memcpy(r->rd->buf + r->got, data, len);
	r->got += len;
	return len;
}

static size_t read_header(char *data, size_t sz, size_t n, void *arg)
{
	struct s3_rd *r = arg;

	version_id_header(data, sz * n, r->vid, sizeof(r->vid));
	return sz * n;
}

/*
 * The time limit of a ranged GET of @len bytes, in ms: op_timeout for the
 * request and the answer to start (connect included), plus the bytes at
 * S3_GET_MIN_RATE (64 KiB/s): 79 s for a 4 MiB chunk with the defaults.
 * It only has to end a transfer that is slow all the way: one that
 * stalls or trickles (under S3_STALL_RATE for op_timeout, setup()) fails
 * after op_timeout.  A tighter rate would fail healthy transfers on a
 * shared link, all at once and again at every retry: 32 reads in flight
 * over 50 Mbit/s get about 0.2 MiB/s each, 21 s for a 4 MiB chunk
 * (docs/reliability.md, "The bound").  Slower than that: fewer reads in
 * flight (--max-inflight) or a longer --op-timeout.
 */
static long get_timeout_ms(const struct s3_be *s, size_t len)
{
	return (long)s->cf->op_timeout_s * 1000 +
	       (long)(((uint64_t)len * 1000 + S3_GET_MIN_RATE - 1) /
		      S3_GET_MIN_RATE);
}

static void rd_start(struct s3_be *s, struct s3_rd *r)
{
	struct backend_read *rd = r->rd;
	char range[96], ifm[NS_VERSION_MAX + 16];

	r->hdrs = base_headers(s);
	snprintf(range, sizeof(range), "Range: bytes=%" PRIu64 "-%" PRIu64,
		 rd->off, rd->off + rd->len - 1);
	r->hdrs = curl_slist_append(r->hdrs, range);
	if (rd->version[0] && !r->pinned) {
		snprintf(ifm, sizeof(ifm), "If-Match: %s", rd->version);
		r->hdrs = curl_slist_append(r->hdrs, ifm);
	}
	setup(s, r->h);
	curl_easy_setopt(r->h, CURLOPT_TIMEOUT_MS, get_timeout_ms(s, rd->len));
	curl_easy_setopt(r->h, CURLOPT_URL, r->url);
	curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, r->hdrs);
	curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, read_write);
	curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
	if (r->pinned) {
		curl_easy_setopt(r->h, CURLOPT_HEADERFUNCTION, read_header);
		curl_easy_setopt(r->h, CURLOPT_HEADERDATA, r);
	}
	curl_easy_setopt(r->h, CURLOPT_PRIVATE, r);
	curl_multi_add_handle(s->multi, r->h);
}

static void rd_finish(struct s3_be *s, struct s3_rd *r, CURLcode cc)
{
	struct backend_read *rd = r->rd;
	long code = 0;
	ssize_t ret;

	curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &code);
	curl_multi_remove_handle(s->multi, r->h);
	if (cc != CURLE_OK && !r->overflow) {
		ret = curl_errno(cc);
	} else {
		ret = r->pinned ? pinned_errno(code) : http_errno(code);
		if (!ret && r->pinned)
			ret = version_answered(s, rd->version, r->vid);
		if (!ret && code == 200 && rd->off)
			ret = -EIO;	/* range ignored: not these bytes */
		else if (!ret)
			ret = r->overflow ? -EIO : (ssize_t)r->got;
		else if (ret == -ERANGE)
			ret = 0;	/* at or past the end */
	}
	curl_slist_free_all(r->hdrs);
	pthread_mutex_lock(&s->lock);
	if (s->nidle < (int)ARRAY_SIZE(s->idle))
		s->idle[s->nidle++] = r->h;
	else
		curl_easy_cleanup(r->h);
	pthread_mutex_unlock(&s->lock);
	free(r);
	rd->priv = NULL;
	rd->done(rd, ret);
}

static void *multi_main(void *arg)
{
	struct s3_be *s = arg;
	int running = 0;

	for (;;) {
		struct s3_rd *q;
		CURLMsg *msg;
		int left;

		pthread_mutex_lock(&s->lock);
		q = s->queue;
		s->queue = NULL;
		if (s->stop && !q && !running) {
			pthread_mutex_unlock(&s->lock);
			break;
		}
		pthread_mutex_unlock(&s->lock);
		while (q) {
			struct s3_rd *next = q->next;

			rd_start(s, q);
			q = next;
		}
		curl_multi_perform(s->multi, &running);
		while ((msg = curl_multi_info_read(s->multi, &left))) {
			struct s3_rd *r;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
					  (char **)&r);
			rd_finish(s, r, msg->data.result);
		}
		curl_multi_poll(s->multi, NULL, 0, 1000, NULL);
	}
	return NULL;
}

static int s3_read(struct backend *be, struct backend_read *rd)
{
	static atomic_uint refused;
	struct s3_be *s = sbe(be);
	char query[256];
	struct s3_rd *r;
	int rc;

	/* never pasted into If-Match unless it is one clean header value
	 * (listing and HEAD refuse others; this guards the stored ones) */
	if (rd->version[0] && !s3_version_ok(rd->version, strlen(rd->version))) {
		if (atomic_fetch_add(&refused, 1) < 5)
			log_err("S3 read of bucket '%s' refused: a stored version with control characters",
				s->bucket);
		return -EIO;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->rd = rd;
	rc = vid_query(rd->version, query, sizeof(query));
	r->pinned = rc == 0;
	if (rc == -ENOTSUP)
		query[0] = '\0';
	if (!rc || rc == -ENOTSUP)
		rc = make_url(s, rd->key, query, r->url, sizeof(r->url));
	if (rc == -EINVAL && atomic_fetch_add(&refused, 1) < 5)
		log_err("S3 read of bucket '%s' refused: the version '%s' names no fixed object version",
			s->bucket, str_log(rd->version));
	if (rc) {
		free(r);
		return rc == -EINVAL ? -EIO : rc;
	}
	pthread_mutex_lock(&s->lock);
	r->h = s->nidle ? s->idle[--s->nidle] : curl_easy_init();
	if (!r->h) {
		pthread_mutex_unlock(&s->lock);
		free(r);
		return -ENOMEM;
	}
	r->next = s->queue;
	s->queue = r;
	rd->priv = r;
	pthread_mutex_unlock(&s->lock);
	curl_multi_wakeup(s->multi);
	return 0;
}

/* ---- open: parse, credentials, check the bucket answers ---- */

static void global_init(void)
{
	curl_global_init(CURL_GLOBAL_ALL);
}

/* the <Code> of an S3 error document (AccessDenied, NoSuchBucket), or "" */
static void s3_error_code(const char *body, char *out, size_t len)
{
	const char *p = body ? strstr(body, "<Code>") : NULL;
	size_t n = 0;

	if (p) {
		p += 6;
		while (n + 1 < len && ((p[n] >= 'A' && p[n] <= 'Z') ||
				       (p[n] >= 'a' && p[n] <= 'z') ||
				       (p[n] >= '0' && p[n] <= '9') || p[n] == '.'))
			n++;
		if (strncmp(p + n, "</Code>", 7))
			n = 0;
		memcpy(out, p, n);
	}
	out[n] = '\0';
}

/* a transfer that got no HTTP answer: say which layer failed */
static void say_unreachable(const struct s3_be *s, const struct s3_ans *a,
			    int rc)
{
	const char *what, *hint = "";

	if (a->cc == CURLE_COULDNT_RESOLVE_HOST ||
	    a->cc == CURLE_COULDNT_RESOLVE_PROXY) {
		what = "DNS failure, the host name does not resolve";
	} else if (a->cc == CURLE_COULDNT_CONNECT && a->os_errno == ECONNREFUSED) {
		what = "connection refused";
		hint = " (nothing listens on that address and port?)";
	} else if (a->cc == CURLE_COULDNT_CONNECT) {
		what = a->os_errno ? strerror(a->os_errno) : "cannot connect";
	} else if (a->cc == CURLE_OPERATION_TIMEDOUT) {
		what = "timed out";
		hint = " (--connect-timeout, --op-timeout)";
	} else if (curl_is_tls(a->cc)) {
		what = "TLS error";
		hint = " (does the endpoint speak HTTPS? is its certificate trusted? see --ca-file)";
	} else if (a->cc == CURLE_OK) {
		fprintf(stderr, "fusefs: cannot reach the S3 endpoint %s://%s: %s\n",
			s->scheme, s->host, strerror(-rc));
		return;
	} else {
		what = "transfer failed";
	}
	fprintf(stderr, "fusefs: cannot reach the S3 endpoint %s://%s: %s: %s%s\n",
		s->scheme, s->host, what, a->err, hint);
}

static int check_bucket(struct s3_be *s)
{
	struct body b = { 0 };
	struct s3_ans *a = malloc(sizeof(*a));
	char code[64];
	int rc;

	if (!a)
		return -ENOMEM;
	rc = list_page(s, s->root, false, "", 1, &b, a);
	s3_error_code(b.p, code, sizeof(code));
	if (rc && rc != -EFBIG && !a->code)		/* -EFBIG: said already */
		say_unreachable(s, a, rc);
	else if (rc && a->code == 404 && !strcmp(code, "NoSuchBucket"))
		fprintf(stderr, "fusefs: no such bucket '%s' at %s://%s\n",
			s->bucket, s->scheme, s->host);
	else if (rc == -EACCES)
		fprintf(stderr, "fusefs: access to bucket '%s' denied (HTTP %ld%s%s): "
			"check the credentials\n", s->bucket, a->code,
			code[0] ? " " : "", code);
	else if (rc && rc != -EFBIG)
		fprintf(stderr, "fusefs: the S3 endpoint answered HTTP %ld%s%s at %.*s (listing bucket '%s')\n",
			a->code, code[0] ? " " : "", code,
			(int)strcspn(a->url, "?"), a->url, s->bucket);
	free(b.p);
	free(a);
	return rc;
}

static void s3_free(struct s3_be *s)
{
	int i;

	for (i = 0; i < s->nidle; i++)
		curl_easy_cleanup(s->idle[i]);
	for (i = 0; i < S3_SYNC_HANDLES; i++)
		if (s->sync[i])
			curl_easy_cleanup(s->sync[i]);
	if (s->multi)
		curl_multi_cleanup(s->multi);
	explicit_bzero(s->userpwd, sizeof(s->userpwd));
	explicit_bzero(s->token_hdr, sizeof(s->token_hdr));
	pthread_cond_destroy(&s->sync_cond);
	pthread_mutex_destroy(&s->sync_lock);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int s3_open(struct backend **out, const struct fusefs_conf *cf,
		   const char *where)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	struct s3_be *s = calloc(1, sizeof(*s));
	const char *slash = strchr(where, '/');
	const char *ep = cf->s3_endpoint ? cf->s3_endpoint : getenv("AWS_ENDPOINT_URL");
	size_t blen = slash ? (size_t)(slash - where) : strlen(where);
	struct s3_creds cr;
	int rc, i;

	if (!s)
		return -ENOMEM;
	pthread_once(&once, global_init);
	s->base.ops = &backend_s3_ops;
	s->cf = cf;
	pthread_mutex_init(&s->sync_lock, NULL);
	pthread_cond_init(&s->sync_cond, NULL);
	pthread_mutex_init(&s->lock, NULL);
	rc = -EINVAL;
	if (!blen || blen >= sizeof(s->bucket) || memchr(where, '?', blen)) {
		fprintf(stderr, "fusefs: bad source: expected s3://BUCKET[/PREFIX]\n");
		goto out_free;
	}
	memcpy(s->bucket, where, blen);
	if (backend_set_prefix(&s->base, slash ? slash : "")) {
		fprintf(stderr, "fusefs: prefix too long\n");
		goto out_free;
	}
	snprintf(s->root, sizeof(s->root), "%s%s", s->base.prefix,
		 s->base.prefix[0] ? "/" : "");
	rc = ep ? s3_parse_endpoint(ep, s->scheme, sizeof(s->scheme), s->host,
				    sizeof(s->host)) : -EINVAL;
	if (rc == -EPERM) {
		/* the mount's message (main.c), without the endpoint */
		fprintf(stderr, "fusefs: the S3 endpoint must not contain credentials (USER:KEY@); use the environment or --credentials-file\n");
		rc = -EINVAL;
		goto out_free;
	}
	if (rc) {
		fprintf(stderr, "fusefs: %s S3 endpoint%s%s: use --endpoint http(s)://HOST[:PORT]\n",
			ep ? "bad" : "missing", ep ? " " : "", ep ? ep : "");
		goto out_free;
	}
	rc = creds_load(cf, &cr);
	if (rc)
		goto out_free;
	snprintf(s->userpwd, sizeof(s->userpwd), "%s:%s", cr.access, cr.secret);
	if (cr.token[0])
		snprintf(s->token_hdr, sizeof(s->token_hdr),
			 "x-amz-security-token: %s", cr.token);
	log_info("S3 credentials from %s", cr.from);
	creds_wipe(&cr);
	snprintf(s->sigv4, sizeof(s->sigv4), "aws:amz:%s:s3",
		 cf->s3_region ? cf->s3_region : "us-east-1");
	rc = -ENOMEM;
	for (i = 0; i < S3_SYNC_HANDLES; i++) {
		s->sync[i] = curl_easy_init();
		if (!s->sync[i])
			goto out_free;
		s->sync_free[s->nsync_free++] = s->sync[i];
	}
	s->multi = curl_multi_init();
	if (!s->multi)
		goto out_free;
	curl_multi_setopt(s->multi, CURLMOPT_MAX_HOST_CONNECTIONS,
			  (long)cf->max_inflight);
	curl_multi_setopt(s->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS,
			  (long)cf->max_inflight);
	curl_multi_setopt(s->multi, CURLMOPT_MAXCONNECTS, (long)cf->max_inflight);
	rc = check_bucket(s);
	if (rc)
		goto out_free;
	rc = thread_spawn(&s->thread, multi_main, s);
	if (rc)
		goto out_free;
	log_info("S3 bucket '%s' at %s://%s (%s-style)", s->bucket, s->scheme,
		 s->host, cf->s3_virtual_host ? "virtual-host" : "path");
	*out = &s->base;
	return 0;
out_free:
	s3_free(s);
	return rc;
}

static void s3_close(struct backend *be)
{
	struct s3_be *s = sbe(be);

	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_mutex_unlock(&s->lock);
	curl_multi_wakeup(s->multi);
	pthread_join(s->thread, NULL);
	s3_free(s);
}

const struct backend_ops backend_s3_ops = {
	.scheme = "s3",
	.open = s3_open,
	.close = s3_close,
	.list = s3_list,
	.stat = s3_stat,
	.stat_pinned = s3_stat_pinned,
	.read = s3_read,
};
