// SPDX-License-Identifier: MIT
/* metrics.c - see metrics.h */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "log.h"
#include "metrics.h"
#include "report.h"

#define METRICS_CONNECTIONS	16
#define METRICS_TIMEOUT_S	10
#define CONTENT_TYPE		"text/plain; version=0.0.4; charset=utf-8"

struct metrics {
	struct MHD_Daemon *d;
	struct report_src src;
	const char *family;	/* rendering: the last # TYPE written */
	size_t family_len;
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

static bool is_gauge(const char *name, size_t n)
{
	static const char *const gauges[] = {
		"cache_bytes_used", "cache_bytes_limit", "cache_files",
	};
	size_t i;

	if (n > 3 && (!strncmp(name, "ns_", 3) || !strncmp(name, "list_", 5)))
		return true;
	for (i = 0; i < ARRAY_SIZE(gauges); i++)
		if (strlen(gauges[i]) == n && !strncmp(name, gauges[i], n))
			return true;
	return false;
}

#define LAT_PREFIX	"backend_read_us_"

/*
 * The backend latency counters (stats.h: backend_read_us_le_N cumulative,
 * _sum, _count) as one Prometheus histogram in seconds.
 */
static void render_latency(FILE *f, const char *line, size_t len)
{
	const char *name = line + strlen(LAT_PREFIX), *sp = memchr(line, ' ', len);
	unsigned long long v;

	if (!sp)
		return;
	v = strtoull(sp + 1, NULL, 10);
	if (!strncmp(name, "le_inf ", 7))
		fprintf(f, "fusefs_backend_read_seconds_bucket{le=\"+Inf\"} %llu\n", v);
	else if (!strncmp(name, "le_", 3))
		fprintf(f, "fusefs_backend_read_seconds_bucket{le=\"%g\"} %llu\n",
			strtoull(name + 3, NULL, 10) / 1e6, v);
	else if (!strncmp(name, "sum ", 4))
		fprintf(f, "fusefs_backend_read_seconds_sum %.6f\n", v / 1e6);
	else if (!strncmp(name, "count ", 6))
		fprintf(f, "fusefs_backend_read_seconds_count %llu\n", v);
}

/*
 * One report line, "name value" or 'name{labels} value', as a sample, with
 * a # TYPE line when a new family starts; bad lines skipped.
 */
static void render_line(struct metrics *m, FILE *f, const char *line,
			size_t len)
{
	const char *sp = memchr(line, ' ', len), *brace = memchr(line, '{', len);
	size_t n, i;

	if (!sp || sp == line || sp + 1 == line + len)
		return;
	n = (brace && brace < sp ? brace : sp) - line;
	for (i = 0; i < n; i++)
		if (!isalnum((unsigned char)line[i]) && line[i] != '_')
			return;
	if (!strncmp(line, LAT_PREFIX, strlen(LAT_PREFIX))) {
		if (!m->family || strncmp(m->family, LAT_PREFIX, strlen(LAT_PREFIX)))
			fputs("# TYPE fusefs_backend_read_seconds histogram\n", f);
		m->family = line;
		m->family_len = n;
		render_latency(f, line, len);
		return;
	}
	if (!m->family || m->family_len != n || strncmp(m->family, line, n))
		fprintf(f, "# TYPE fusefs_%.*s %s\n", (int)n, line,
			is_gauge(line, n) ? "gauge" : "counter");
	m->family = line;
	m->family_len = n;
	fprintf(f, "fusefs_%.*s\n", (int)len, line);
}

/* Prometheus text exposition format 0.0.4; malloc'ed, NULL on ENOMEM */
static char *render(struct metrics *m, size_t *len)
{
	size_t rlen, off = 0;
	char *report = report_text(&m->src, &rlen), *out = NULL;
	FILE *f;

	if (!report)
		return NULL;
	m->family = NULL;	/* requests are served one at a time */
	f = open_memstream(&out, len);
	if (f) {
		while (off < rlen) {
			const char *nl = memchr(report + off, '\n', rlen - off);
			size_t n = rlen - off;

			if (nl)
				n = nl - report - off;
			render_line(m, f, report + off, n);
			off += n + 1;
		}
		fputs("# TYPE fusefs_up gauge\nfusefs_up 1\n", f);
		if (fclose(f)) {
			free(out);
			out = NULL;
		}
	}
	free(report);
	return out;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code,
			     char *body, size_t len,
			     enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = MHD_create_response_from_buffer(len, body, mode);

	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, code, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
				  const char *url, const char *method,
				  const char *version, const char *upload_data,
				  size_t *upload_data_size, void **req_cls)
{
	static char not_found[] = "not found: metrics are at /metrics\n";
	static char not_allowed[] = "method not allowed\n";
	struct metrics *m = cls;
	size_t len;
	char *body;

	if (strcmp(method, MHD_HTTP_METHOD_GET) &&
	    strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, not_allowed,
			     strlen(not_allowed), MHD_RESPMEM_PERSISTENT);
	if (strcmp(url, "/metrics"))
		return reply(conn, MHD_HTTP_NOT_FOUND, not_found,
			     strlen(not_found), MHD_RESPMEM_PERSISTENT);
	body = render(m, &len);
	if (!body)
		return MHD_NO;
	return reply(conn, MHD_HTTP_OK, body, len, MHD_RESPMEM_MUST_FREE);
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
	struct metrics *m;
	unsigned flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
	uint16_t port;

	if (metrics_check_addr(addr))
		return -EINVAL;
	parse_addr(addr, &ss);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->src = *src;
	if (ss.ss_family == AF_INET6) {
		flags |= MHD_USE_IPv6;
		port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	} else {
		port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	}
	m->d = MHD_start_daemon(flags, port, NULL, NULL, on_request, m,
				MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
				MHD_OPTION_CONNECTION_LIMIT,
				(unsigned int)METRICS_CONNECTIONS,
				MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned int)METRICS_TIMEOUT_S,
				MHD_OPTION_EXTERNAL_LOGGER, on_mhd_error, NULL,
				MHD_OPTION_END);
	if (!m->d) {
		fprintf(stderr, "fusefs: cannot serve metrics on %s (address in use or not local?)\n",
			addr);
		free(m);
		return -EADDRNOTAVAIL;
	}
	log_info("metrics at http://%s/metrics", addr);
	*out = m;
	return 0;
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	MHD_stop_daemon(m->d);
	free(m);
}
