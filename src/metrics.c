// SPDX-License-Identifier: MIT
/* metrics.c - see metrics.h */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "bgthread.h"
#include "log.h"
#include "metrics.h"
#include "metrics_page.h"

/* see metrics.h for why these numbers */
#define METRICS_CONNECTIONS	64
#define METRICS_PER_IP		32
#define METRICS_TIMEOUT_S	10
#define METRICS_HEADER_MS	5000
#define METRICS_REAP_IDLE_MS	60000
#define CONTENT_TYPE		"text/plain; version=0.0.4; charset=utf-8"
#define CONTENT_TYPE_OM		"application/openmetrics-text; version=1.0.0; charset=utf-8"

/*
 * A connection's header deadline.  libmicrohttpd's own timeout is an
 * idle one, reset by every byte, so a client sending a header line
 * every few seconds holds its slot for good; the reaper shuts down a
 * connection whose request headers are not complete by the deadline.
 */
struct conn_slot {
	bool used;
	int fd;			/* libmicrohttpd's; open while used */
	int64_t deadline;	/* bg_mono_ms(), 0: in a request */
};

struct metrics {
	struct MHD_Daemon *d;
	struct report_src src;
	struct bgthread *reaper;
	pthread_mutex_t lock;	/* guards slots[] */
	/* MHD_OPTION_CONNECTION_LIMIT bounds the connections at once */
	struct conn_slot slots[METRICS_CONNECTIONS];
};

/* "127.0.0.1:9464", "[::1]:9464" -> @ss; false if anything is off */
static bool parse_addr(const char *addr, struct sockaddr_storage *ss)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	const char *colon = strrchr(addr, ':'), *p;
	char host[INET6_ADDRSTRLEN + 2];
	unsigned long port;
	size_t n;

	if (!colon || !colon[1] || colon - addr >= (long)sizeof(host))
		return false;
	for (p = colon + 1; *p; p++)
		if (!isdigit((unsigned char)*p))
			return false;
	port = strtoul(colon + 1, NULL, 10);
	if (!port || port > 65535 || strlen(colon + 1) > 5)
		return false;
	n = colon - addr;
	memcpy(host, addr, n);
	host[n] = '\0';
	memset(ss, 0, sizeof(*ss));
	if (n > 2 && host[0] == '[' && host[n - 1] == ']') {
		host[n - 1] = '\0';
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		return inet_pton(AF_INET6, host + 1, &s6->sin6_addr) == 1;
	}
	s4->sin_family = AF_INET;
	s4->sin_port = htons(port);
	return inet_pton(AF_INET, host, &s4->sin_addr) == 1;
}

int metrics_check_addr(const char *addr)
{
	struct sockaddr_storage ss;

	if (parse_addr(addr, &ss))
		return 0;
	fprintf(stderr, "fusefs: invalid value '%s' for option metrics: expected IP:PORT such as 127.0.0.1:9464 or [::1]:9464\n",
		addr);
	return -EINVAL;
}

/* the page (metrics_page.h); malloc'ed, NULL on ENOMEM */
static char *render(struct metrics *m, bool openmetrics, size_t *len)
{
	char *out = NULL;
	FILE *f = open_memstream(&out, len);

	if (!f)
		return NULL;
	metrics_page_write(&m->src, f, openmetrics);
	if (fclose(f)) {
		free(out);
		return NULL;
	}
	return out;
}

/* Prometheus asks for OpenMetrics in Accept when it wants it */
static bool wants_openmetrics(struct MHD_Connection *conn)
{
	const char *accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							 MHD_HTTP_HEADER_ACCEPT);

	return accept && strstr(accept, "application/openmetrics-text");
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code,
			     char *body, size_t len,
			     enum MHD_ResponseMemoryMode mode, const char *type)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, body, mode);

	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static struct conn_slot *slot_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci;

	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* a request's headers are in (0) or one is awaited (a deadline) */
static void slot_set_deadline(struct metrics *m, struct MHD_Connection *conn,
			      int64_t deadline)
{
	struct conn_slot *sl = slot_of(conn);

	if (!sl)
		return;
	pthread_mutex_lock(&m->lock);
	sl->deadline = deadline;
	pthread_mutex_unlock(&m->lock);
}

/*
 * libmicrohttpd's thread, on each connection: claim a slot on STARTED
 * (a connection with no slot, which the limit prevents, goes untimed),
 * free it on CLOSED, which comes before libmicrohttpd closes the fd, so
 * the reaper never shuts down an fd already reused.
 */
static void on_connection(void *cls, struct MHD_Connection *conn,
			  void **socket_context,
			  enum MHD_ConnectionNotificationCode toe)
{
	const union MHD_ConnectionInfo *ci;
	struct metrics *m = cls;
	struct conn_slot *sl = *socket_context;
	size_t i;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (!sl)
			return;
		pthread_mutex_lock(&m->lock);
		sl->used = false;
		pthread_mutex_unlock(&m->lock);
		*socket_context = NULL;
		return;
	}
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	if (!ci)
		return;
	pthread_mutex_lock(&m->lock);
	for (i = 0; i < METRICS_CONNECTIONS; i++) {
		if (m->slots[i].used)
			continue;
		sl = &m->slots[i];
		sl->used = true;
		sl->fd = ci->connect_fd;
		sl->deadline = bg_mono_ms() + METRICS_HEADER_MS;
		*socket_context = sl;
		break;
	}
	pthread_mutex_unlock(&m->lock);
	bgthread_wake(m->reaper);
}

/* a keep-alive connection gets the same time for its next request */
static void on_completed(void *cls, struct MHD_Connection *conn,
			 void **req_cls, enum MHD_RequestTerminationCode toe)
{
	slot_set_deadline(cls, conn, bg_mono_ms() + METRICS_HEADER_MS);
}

/*
 * The reaper's tick: shut down (both ways) each connection past its
 * header deadline; libmicrohttpd's thread then reads EOF and closes it.
 * Sleeps until the next deadline.
 */
static int64_t reap_tick(void *arg)
{
	struct metrics *m = arg;
	int64_t now = bg_mono_ms(), next = METRICS_REAP_IDLE_MS;
	size_t i;

	pthread_mutex_lock(&m->lock);
	for (i = 0; i < METRICS_CONNECTIONS; i++) {
		struct conn_slot *sl = &m->slots[i];

		if (!sl->used || !sl->deadline)
			continue;
		if (sl->deadline <= now) {
			shutdown(sl->fd, SHUT_RDWR);
			sl->deadline = 0;
			log_dbg("metrics: closed a connection that sent no complete request in %d ms",
				METRICS_HEADER_MS);
		} else if (sl->deadline - now < next) {
			next = sl->deadline - now;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return next;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	static char not_found[] = "not found: metrics are at /metrics\n";
	static char not_allowed[] = "method not allowed\n";
	struct metrics *m = cls;
	bool om;
	size_t len;
	char *body;

	slot_set_deadline(m, conn, 0);	/* its headers are in */
	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed,
			     strlen(not_allowed), MHD_RESPMEM_PERSISTENT,
			     CONTENT_TYPE);
	if (strcmp(url, "/metrics"))
		return reply(conn, MHD_HTTP_NOT_FOUND, not_found,
			     strlen(not_found), MHD_RESPMEM_PERSISTENT,
			     CONTENT_TYPE);
	om = wants_openmetrics(conn);
	body = render(m, om, &len);
	if (!body)
		return MHD_NO;
	return reply(conn, MHD_HTTP_OK, body, len, MHD_RESPMEM_MUST_FREE,
		     om ? CONTENT_TYPE_OM : CONTENT_TYPE);
}

static void on_mhd_error(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	log_err("metrics: %s", msg);
}

int metrics_start(struct metrics **out, const char *addr,
		  const struct report_src *src)
{
	struct sockaddr_storage ss;
	sigset_t old;
	struct metrics *m;
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
	uint16_t port;
	int rc;

	if (metrics_check_addr(addr))
		return -EINVAL;
	parse_addr(addr, &ss);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->src = *src;
	pthread_mutex_init(&m->lock, NULL);
	rc = bgthread_start(&m->reaper, "fusefs-metrics", METRICS_REAP_IDLE_MS,
			    reap_tick, m);
	if (rc < 0)
		goto out_free;
	if (ss.ss_family == AF_INET6) {
		flags |= MHD_USE_IPv6;
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	} else {
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	}
	thread_signals_block(&old);	/* its thread takes no stop signal */
	/* the logger first: libmicrohttpd prints what it says before it
	 * (errors of the later options included) on stderr, and logs an
	 * error about the order */
	m->d = MHD_start_daemon(flags, port, NULL, NULL, on_request, m,
				MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, NULL,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_LIMIT,
				(unsigned int)METRICS_CONNECTIONS,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT,
				(unsigned int)METRICS_PER_IP,
				MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned int)METRICS_TIMEOUT_S,
				MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
				MHD_OPTION_NOTIFY_COMPLETED, on_completed, m,
				MHD_OPTION_END);
	thread_signals_restore(&old);
	if (!m->d) {
		fprintf(stderr, "fusefs: cannot serve metrics on %s (address in use or not local?)\n",
			addr);
		rc = -EADDRNOTAVAIL;
		goto out_stop_reaper;
	}
	log_info("metrics at http://%s/metrics", addr);
	*out = m;
	return 0;
out_stop_reaper:
	bgthread_stop(m->reaper);
out_free:
	pthread_mutex_destroy(&m->lock);
	free(m);
	return rc;
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	/* libmicrohttpd first: its connections wake the reaper */
	MHD_stop_daemon(m->d);
	bgthread_stop(m->reaper);
	pthread_mutex_destroy(&m->lock);
	free(m);
}
