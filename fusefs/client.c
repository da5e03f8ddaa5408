// SPDX-License-Identifier: MIT
/* client.c - see client.h */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

#define EXIT_USAGE	2
#define CTL		".fusefs"

static char *slurp_fd(int fd, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);

	while (buf) {
		ssize_t r;

		if (n == cap) {
			char *nb = realloc(buf, cap * 2 + 1);

			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
			cap *= 2;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return NULL;
		}
		if (!r)
			break;
		n += r;
	}
	if (buf)
		buf[n] = '\0';
	*len = n;
	return buf;
}

static char *slurp(const char *path, size_t *len)
{
	int fd = strcmp(path, "-") ? open(path, O_RDONLY | O_CLOEXEC) : 0;
	char *buf;

	if (fd < 0)
		return NULL;
	buf = slurp_fd(fd, len);
	if (fd)
		close(fd);
	return buf;
}

/* the mount root containing @path (walk up while on the same device) */
static int find_root(const char *path, char *root, size_t len)
{
	char cur[PATH_MAX], probe[PATH_MAX + 32];
	struct stat st, up;

	if (!realpath(path, cur))
		return -errno;
	for (;;) {
		char *slash;

		snprintf(probe, sizeof(probe), "%s/" CTL "/stats", cur);
		if (!access(probe, F_OK)) {
			snprintf(root, len, "%s", cur);
			return 0;
		}
		if (stat(cur, &st))
			return -errno;
		slash = strrchr(cur, '/');
		if (!slash || slash == cur)
			return -ENOENT;
		*slash = '\0';
		if (stat(cur, &up) || up.st_dev != st.st_dev)
			return -ENOENT;
	}
}

static int need_root(const char *path, char *root, size_t len)
{
	if (find_root(path, root, len)) {
		fprintf(stderr, "fusefs: %s is not inside a fusefs mount\n", path);
		return -1;
	}
	return 0;
}

/* write @len bytes to control file @rel under @root; close reports errors */
static int ctl_write(const char *root, const char *rel, const char *buf,
		     size_t len)
{
	char path[PATH_MAX + 256];
	size_t done = 0;
	int fd, err = 0;

	snprintf(path, sizeof(path), "%s/" CTL "/%s", root, rel);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t w = write(fd, buf + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			err = -errno;
			break;
		}
		done += w;
	}
	if (close(fd) && !err)
		err = -errno;
	return err;
}

static char *ctl_read(const char *root, const char *rel)
{
	char path[PATH_MAX + 256];
	size_t len;

	snprintf(path, sizeof(path), "%s/" CTL "/%s", root, rel);
	return slurp(path, &len);
}

/* "key value" lookup in a status text */
static long long field(const char *text, const char *key)
{
	size_t kl = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return strtoll(p + kl + 1, NULL, 10);
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -1;
}

static int wait_ready(const char *root, const char *name, int timeout_s)
{
	char rel[128];
	time_t start = time(NULL), last_change = start;
	long long last_lead = -1;

	snprintf(rel, sizeof(rel), "lists/%s", name);
	for (;;) {
		char *st = ctl_read(root, rel);
		long long files, pos, lead;
		int width = 40, fill;

		if (!st)
			return 1;
		files = field(st, "files");
		pos = field(st, "position");
		lead = field(st, "lead_files");
		free(st);
		if (files <= 0)
			return 1;
		fill = (int)((pos + lead) * width / files);
		fprintf(stderr, "\r[%-*.*s] %lld/%lld files ready ahead of position %lld",
			width, fill, "########################################",
			pos + lead, files, pos);
		if (pos + lead >= files) {
			fputc('\n', stderr);
			return 0;
		}
		if (lead != last_lead) {
			last_lead = lead;
			last_change = time(NULL);
		}
		if (time(NULL) - last_change > 10 ||
		    (timeout_s && time(NULL) - start > timeout_s)) {
			fprintf(stderr, "\nfusefs: prefetch stopped growing "
				"(cache full ahead of the reader)\n");
			return 0;
		}
		usleep(200 * 1000);
	}
}

int cmd_prefetch(int argc, char **argv)
{
	const char *mnt = NULL, *list = NULL, *name = "default";
	char root[PATH_MAX], rel[128], *buf, *report;
	bool wait = false;
	int i, rc, timeout = 0;
	size_t len;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--list") && i + 1 < argc)
			list = argv[++i];
		else if (!strcmp(argv[i], "--name") && i + 1 < argc)
			name = argv[++i];
		else if (!strcmp(argv[i], "--wait"))
			wait = true;
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = atoi(argv[++i]);
		else if (!mnt && argv[i][0] != '-')
			mnt = argv[i];
		else
			mnt = NULL, i = argc + 1;
	}
	if (!mnt || !list || i > argc) {
		fprintf(stderr, "usage: fusefs prefetch MOUNTPOINT --list FILE|- "
			"[--name NAME] [--wait] [--timeout SECONDS]\n");
		return EXIT_USAGE;
	}
	if (need_root(mnt, root, sizeof(root)))
		return 1;
	buf = slurp(list, &len);
	if (!buf) {
		fprintf(stderr, "fusefs: cannot read list %s: %s\n", list,
			strerror(errno));
		return 1;
	}
	snprintf(rel, sizeof(rel), "lists/%s", name);
	rc = ctl_write(root, rel, buf, len);
	free(buf);
	report = ctl_read(root, rel);
	if (report) {
		const char *last = strstr(report, "# last publish");

		fputs(last ? last : report, stdout);
		free(report);
	}
	if (rc) {
		fprintf(stderr, "fusefs: list '%s' was not published: %s\n", name,
			rc == -EINVAL ? "no usable line" : strerror(-rc));
		return 1;
	}
	return wait ? wait_ready(root, name, timeout) : 0;
}

int cmd_status(int argc, char **argv)
{
	char root[PATH_MAX], *st;
	const char *p;

	if (argc != 1) {
		fprintf(stderr, "usage: fusefs status MOUNTPOINT\n");
		return EXIT_USAGE;
	}
	if (need_root(argv[0], root, sizeof(root)))
		return 1;
	st = ctl_read(root, "stats");
	if (!st)
		return 1;
	for (p = st; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p + 1) : strlen(p);

		if (!strncmp(p, "list_", 5) || !strncmp(p, "hits ", 5) ||
		    !strncmp(p, "misses ", 7) || !strncmp(p, "stall_us ", 9) ||
		    !strncmp(p, "prefetch_", 9) || !strncmp(p, "cache_bytes", 11))
			fwrite(p, 1, n, stdout);
		p += n;
	}
	free(st);
	return 0;
}

int cmd_pin(int argc, char **argv, const char *what)
{
	char root[PATH_MAX], real[PATH_MAX], *buf = NULL;
	size_t len = 0;
	FILE *f;
	int i, rc;

	if (argc < 1) {
		fprintf(stderr, "usage: fusefs %s PATH...\n", what);
		return EXIT_USAGE;
	}
	if (need_root(argv[0], root, sizeof(root)))
		return 1;
	f = open_memstream(&buf, &len);
	if (!f)
		return 1;
	for (i = 0; i < argc; i++) {
		size_t rl = strlen(root);

		if (!realpath(argv[i], real) || strncmp(real, root, rl) ||
		    (real[rl] && real[rl] != '/')) {
			fprintf(stderr, "fusefs: %s is not in the mount %s\n",
				argv[i], root);
			fclose(f);
			free(buf);
			return 1;
		}
		fprintf(f, "%s\n", real[rl] ? real + rl + 1 : "");
	}
	fclose(f);
	rc = ctl_write(root, what, buf, len);
	free(buf);
	if (rc) {
		fprintf(stderr, "fusefs: %s failed: %s\n", what, strerror(-rc));
		return 1;
	}
	return 0;
}

int cmd_heat(int argc, char **argv)
{
	char root[PATH_MAX], *text;
	const char *mnt = NULL, *p;
	long top = 20;
	bool export = false;
	int i;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "export"))
			export = true;
		else if (!strcmp(argv[i], "--top") && i + 1 < argc)
			top = atol(argv[++i]);
		else if (!mnt)
			mnt = argv[i];
	}
	if (!mnt) {
		fprintf(stderr, "usage: fusefs heat MOUNTPOINT [--top N] | "
			"fusefs heat export MOUNTPOINT > hot.tsv\n");
		return EXIT_USAGE;
	}
	if (need_root(mnt, root, sizeof(root)))
		return 1;
	text = ctl_read(root, "heat");
	if (!text)
		return 1;
	if (export) {
		fputs(text, stdout);
	} else {
		for (p = text; *p && top >= 0; top--) {
			const char *nl = strchr(p, '\n');
			size_t n = nl ? (size_t)(nl - p + 1) : strlen(p);

			fwrite(p, 1, n, stdout);
			p += n;
		}
	}
	free(text);
	return 0;
}

int cmd_warm(int argc, char **argv)
{
	char root[PATH_MAX], *buf;
	size_t len;
	int rc;

	if (argc != 3 || strcmp(argv[1], "--from")) {
		fprintf(stderr, "usage: fusefs warm MOUNTPOINT --from hot.tsv|-\n");
		return EXIT_USAGE;
	}
	if (need_root(argv[0], root, sizeof(root)))
		return 1;
	buf = slurp(argv[2], &len);
	if (!buf) {
		fprintf(stderr, "fusefs: cannot read %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	rc = ctl_write(root, "warm", buf, len);
	free(buf);
	if (rc) {
		fprintf(stderr, "fusefs: warm failed: %s\n", strerror(-rc));
		return 1;
	}
	return 0;
}
