// SPDX-License-Identifier: MIT
/* client.c - see client.h */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "bgthread.h"
#include "client.h"
#include "compiler.h"
#include "lists.h"
#include "mountinfo.h"

#define EXIT_USAGE	2
#define CTL		".fusefs"
#define FUSE_MAGIC	0x65735546	/* statfs f_type of every FUSE mount */
#define FUSEFS_FSTYPE	"fuse.fusefs"	/* mountinfo: subtype=fusefs */

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

/* is entry @m the fusefs mount of device *@arg? */
static int is_fusefs_dev(const struct mountinfo *m, void *arg)
{
	const dev_t *dev = arg;

	return makedev(m->major, m->minor) == *dev &&
	       !strcmp(m->fstype, FUSEFS_FSTYPE);
}

/* is the file system with device @dev a fusefs mount (mountinfo)? */
static bool mountinfo_is_fusefs(dev_t dev)
{
	return mountinfo_each(is_fusefs_dev, &dev) > 0;
}

/*
 * the root of the fusefs mount containing @path: walk up while on the
 * same device to the top of that file system, which must be FUSE
 * (statfs) and mounted as fusefs (mountinfo).  A directory that merely
 * holds a ".fusefs/stats" is not a mount.
 */
static int find_root(const char *path, char *root, size_t len)
{
	char cur[PATH_MAX];
	struct stat st, up;
	struct statfs sf;

	if (!realpath(path, cur))
		return -errno;
	if (stat(cur, &st))
		return -errno;
	for (;;) {
		char *slash = strrchr(cur, '/');
		char save;

		if (!slash || !strcmp(cur, "/"))
			break;
		/* the parent: "/x" -> "/", "/x/y" -> "/x" */
		save = slash[slash == cur];
		slash[slash == cur] = '\0';
		if (stat(cur, &up))
			return -errno;
		slash[slash == cur] = save;
		if (up.st_dev != st.st_dev)
			break;
		slash[slash == cur] = '\0';
	}
	if (statfs(cur, &sf) || sf.f_type != FUSE_MAGIC ||
	    !mountinfo_is_fusefs(st.st_dev))
		return -ENOENT;
	snprintf(root, len, "%s", cur);
	return 0;
}

int client_mount_root(const char *mnt, char *root, size_t len)
{
	char real[PATH_MAX];
	int rc;

	if (!realpath(mnt, real))
		rc = -errno;
	else
		rc = find_root(real, root, len);
	if (!rc && strcmp(real, root))
		rc = -ENOENT;		/* inside a mount, not its mount point */
	if (rc)
		fprintf(stderr, "fusefs: %s is not a fusefs mount%s%s%s\n", mnt,
			rc != -ENOENT ? " (" : "",
			rc != -ENOENT ? strerror(-rc) : "",
			rc != -ENOENT ? ")" : "");
	return rc;
}

/* find_root(), saying so on stderr when @path is not in a mount */
static int need_root(const char *path, char *root, size_t len)
{
	int rc = find_root(path, root, len);

	if (rc)
		fprintf(stderr, "fusefs: %s is not inside a fusefs mount\n", path);
	return rc;
}

/* write all of @len bytes at @buf to @fd; 0 or -errno */
static int write_all(int fd, const char *buf, size_t len)
{
	size_t done = 0;

	while (done < len) {
		ssize_t w = write(fd, buf + done, len - done);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		done += w;
	}
	return 0;
}

/*
 * write @head (may be NULL) then @len bytes of @buf to control file @rel
 * under @root; the daemon acts on close(), which reports its errors
 */
/* directory @name in @dfd, not a symlink, on device @dev: fd or -errno */
static int ctl_subdir(int dfd, const char *name, dev_t dev)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || st.st_dev != dev) {
		close(fd);
		return -EXDEV;
	}
	return fd;
}

/*
 * open control file @rel ("stats", "lists/NAME") under @root/.fusefs one
 * component at a time: no symlink is followed and every directory must
 * be on the mount's own device, so nothing leads out of the mount.
 * Return: the fd or -errno.
 */
static int ctl_open(const char *root, const char *rel, int flags)
{
	char part[NAME_MAX + 1];
	const char *p = rel, *slash;
	struct stat top;
	int dfd, fd;

	dfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	fd = fstat(dfd, &top) ? -errno : ctl_subdir(dfd, CTL, top.st_dev);
	while (fd >= 0 && (slash = strchr(p, '/'))) {
		close(dfd);
		dfd = fd;
		if ((size_t)(slash - p) > NAME_MAX) {
			fd = -ENAMETOOLONG;
			break;
		}
		memcpy(part, p, slash - p);
		part[slash - p] = '\0';
		fd = ctl_subdir(dfd, part, top.st_dev);
		p = slash + 1;
	}
	if (fd >= 0) {
		close(dfd);
		dfd = fd;
		fd = openat(dfd, p, flags | O_NOFOLLOW | O_CLOEXEC, 0666);
		if (fd < 0)
			fd = -errno;
	}
	close(dfd);
	return fd;
}

static int ctl_write2(const char *root, const char *rel, const char *head,
		      size_t hlen, const char *buf, size_t len)
{
	int fd, err;

	/* only a list may be new; nothing is truncated or followed */
	fd = ctl_open(root, rel, O_WRONLY |
		      (strncmp(rel, "lists/", 6) ? 0 : O_CREAT));
	if (fd < 0)
		return fd;
	err = head ? write_all(fd, head, hlen) : 0;
	if (!err)
		err = write_all(fd, buf, len);
	if (close(fd) && !err)
		err = -errno;
	return err;
}

static int ctl_write(const char *root, const char *rel, const char *buf,
		     size_t len)
{
	return ctl_write2(root, rel, NULL, 0, buf, len);
}

static char *ctl_read(const char *root, const char *rel)
{
	int fd = ctl_open(root, rel, O_RDONLY);
	size_t len;
	char *buf;

	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	buf = slurp_fd(fd, &len);
	close(fd);
	return buf;
}

/* "key value" lookup in a status text; @def if absent */
static long long field_or(const char *text, const char *key, long long def)
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
	return def;
}

static long long field(const char *text, const char *key)
{
	return field_or(text, key, -1);
}

/*
 * opt_value() - is argv[*@i] option @name ("--name VALUE" or
 * "--name=VALUE")?  1: *@val set, *@i at the value; 0: another word;
 * -1: @name without a value.
 */
static int opt_value(int argc, char **argv, int *i, const char *name,
		     const char **val)
{
	size_t nl = strlen(name);
	const char *a = argv[*i];

	if (strncmp(a, name, nl))
		return 0;
	if (a[nl] == '=') {
		*val = a + nl + 1;
		return 1;
	}
	if (a[nl])
		return 0;
	if (*i + 1 >= argc)
		return -1;
	*val = argv[++*i];
	return 1;
}

/* a decimal number in [0, @max] */
static bool parse_num(const char *s, long long max, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > max)
		return false;
	*out = v;
	return true;
}

/* one sample of what --wait watches */
struct progress {
	long long files, remaining, position, lead_files, lead_bytes;
	long long max_file, backend_bytes, backend_errors, used, limit;
	char state[16];
};

static bool sample(const char *root, const char *rel, struct progress *p)
{
	char *st = ctl_read(root, rel), *stats;
	const char *s;

	if (!st)
		return false;
	p->files = field(st, "files");
	p->position = field(st, "position");
	p->lead_files = field(st, "lead_files");
	p->lead_bytes = field(st, "lead_bytes");
	p->max_file = field_or(st, "max_file_bytes", 0);
	/* before epochs were numbered: everything after the position */
	p->remaining = field_or(st, "remaining", p->files - p->position);
	s = strstr(st, "\nstate ");
	snprintf(p->state, sizeof(p->state), "%.*s",
		 s ? (int)strcspn(s + 7, "\n") : 0, s ? s + 7 : "");
	free(st);
	stats = ctl_read(root, "stats");
	if (!stats)
		return false;
	p->backend_bytes = field_or(stats, "bytes_from_backend", 0);
	p->backend_errors = field_or(stats, "backend_errors", 0);
	p->used = field_or(stats, "cache_bytes_used", 0);
	p->limit = field_or(stats, "cache_bytes_limit", 0);
	free(stats);
	return true;
}

static void draw_bar(const struct progress *p)
{
	static const char hashes[] = "########################################";
	const int width = 40;
	long long want = p->remaining > 0 ? p->remaining : 1;
	long long ready = p->lead_files < want ? p->lead_files : want;

	fprintf(stderr, "\r[%-*.*s] %lld/%lld files ready ahead of position %lld ",
		width, (int)(ready * width / want), hashes, ready,
		p->remaining, p->position);
}

/*
 * wait_ready() - until every file the reader of list @name has still to
 * open in this epoch is cached.  Return: WAIT_READY, WAIT_TIMEOUT,
 * WAIT_FULL, WAIT_STALLED or 1 (the list went away or has no epoch).
 */
static int wait_ready(const char *root, const char *name, long long timeout_s,
		      long long stall_s)
{
	bool tty = isatty(STDERR_FILENO);
	/* milliseconds: whole seconds of time(NULL) made --stall 2 end
	 * after just over 1 s */
	int64_t start = bg_mono_ms(), last_change = start;
	struct progress p = { .state = "" }, last = { .lead_files = -1 };
	long long errors0 = -1;
	char rel[128];
	int rc;

	snprintf(rel, sizeof(rel), "lists/%s", name);
	for (;;) {
		int64_t now;

		if (!sample(root, rel, &p) || p.files <= 0) {
			rc = 1;
			break;
		}
		if (errors0 < 0)
			errors0 = p.backend_errors;
		if (tty)
			draw_bar(&p);
		if (p.lead_files >= p.remaining) {
			rc = WAIT_READY;
			break;
		}
		now = bg_mono_ms();
		if (p.lead_files != last.lead_files ||
		    p.lead_bytes != last.lead_bytes ||
		    p.position != last.position ||
		    p.backend_bytes != last.backend_bytes) {
			last = p;
			last_change = now;
			errors0 = p.backend_errors;
		}
		if (now - last_change >= stall_s * 1000) {
			/* the prefetcher stops where a file does not fit */
			bool full = p.limit - p.used <
				    p.max_file + p.limit / 32;

			rc = full && p.backend_errors == errors0 ?
			     WAIT_FULL : WAIT_STALLED;
			break;
		}
		if (timeout_s && now - start >= timeout_s * 1000) {
			rc = WAIT_TIMEOUT;
			break;
		}
		usleep(200 * 1000);
	}
	if (tty && errors0 >= 0)
		fputc('\n', stderr);	/* after the bar */
	switch (rc) {
	case 1:
		fprintf(stderr, "fusefs: list %s has no current epoch (%s)\n",
			name, p.state[0] ? p.state : "not published");
		break;
	case WAIT_READY:
		fprintf(stderr, "fusefs: list %s ready: %lld files ahead of position %lld cached\n",
			name, p.remaining, p.position);
		break;
	case WAIT_TIMEOUT:
		fprintf(stderr, "fusefs: timeout after %llds: %lld of %lld files ready, still prefetching\n",
			timeout_s, p.lead_files, p.remaining);
		break;
	case WAIT_FULL:
		fprintf(stderr, "fusefs: cache full ahead of the reader: %lld of %lld files ready (%lld bytes); the rest streams in as the reader moves\n",
			p.lead_files, p.remaining, p.lead_bytes);
		break;
	case WAIT_STALLED:
		fprintf(stderr, "fusefs: prefetch stalled: no progress for %llds with %lld of %lld files ready, %lld bytes free, %lld backend errors meanwhile\n",
			stall_s, p.lead_files, p.remaining, p.limit - p.used,
			p.backend_errors - errors0);
		break;
	}
	return rc;
}

static int prefetch_usage(void)
{
	fprintf(stderr, "usage: fusefs prefetch MOUNTPOINT [--list FILE|- [--null]] "
		"[--name NAME] [--epoch N] [--begin [--at K]]\n"
		"                       [--wait [--timeout SECONDS] [--stall SECONDS]]\n");
	return EXIT_USAGE;
}

/* the header lines of a prefetch request, or NULL */
static char *prefetch_head(long long epoch, bool begin, long long at,
			   bool list, bool nul, size_t *len)
{
	char *head = NULL;
	FILE *f = open_memstream(&head, len);

	if (!f)
		return NULL;
	if (nul && list)	/* first: the rest ends with NUL bytes */
		fputs("# nul\n", f);
	if (epoch >= 0 && list)
		fprintf(f, "# epoch %lld%c", epoch, nul && list ? '\0' : '\n');
	if (begin) {
		fputs("# begin", f);
		if (epoch >= 0 && !list)
			fprintf(f, " %lld", epoch);
		if (at)
			fprintf(f, " at %lld", at);
		fputc(nul && list ? '\0' : '\n', f);
	}
	if (fclose(f)) {
		free(head);
		return NULL;
	}
	return head;
}

static const char *publish_error(int rc)
{
	switch (rc) {
	case -EINVAL:
		return "no usable line";
	case -ESTALE:
		return "its epoch is older than the list's current epoch (begin it first: --begin)";
	case -EBUSY:
		return "two later epochs are already queued (--epoch N replaces queued epoch N; a list without --epoch goes after them)";
	case -ENOSPC:
		return "too many lists";
	default:
		return strerror(-rc);
	}
}

int cmd_prefetch(int argc, char **argv)
{
	const char *mnt = NULL, *list = NULL, *name = "default", *v;
	long long timeout = 0, stall = 30, epoch = -1, at = 0;
	bool wait = false, begin = false, nul = false;
	char root[PATH_MAX], rel[128], *buf = NULL, *head, *report;
	size_t len = 0, hlen;
	int i, rc;

	for (i = 0; i < argc; i++) {
		if ((rc = opt_value(argc, argv, &i, "--list", &list)) ||
		    (rc = opt_value(argc, argv, &i, "--name", &name))) {
			if (rc < 0)
				return prefetch_usage();
		} else if ((rc = opt_value(argc, argv, &i, "--epoch", &v))) {
			if (rc < 0 || !parse_num(v, (1LL << 62) - 1, &epoch))
				return prefetch_usage();
		} else if ((rc = opt_value(argc, argv, &i, "--at", &v))) {
			if (rc < 0 || !parse_num(v, UINT32_MAX, &at))
				return prefetch_usage();
		} else if ((rc = opt_value(argc, argv, &i, "--timeout", &v))) {
			if (rc < 0 || !parse_num(v, INT32_MAX, &timeout))
				return prefetch_usage();
		} else if ((rc = opt_value(argc, argv, &i, "--stall", &v))) {
			if (rc < 0 || !parse_num(v, INT32_MAX, &stall) ||
			    !stall)
				return prefetch_usage();
		} else if (!strcmp(argv[i], "--null") || !strcmp(argv[i], "-0")) {
			nul = true;
		} else if (!strcmp(argv[i], "--wait")) {
			wait = true;
		} else if (!strcmp(argv[i], "--begin")) {
			begin = true;
		} else if (!mnt && argv[i][0] != '-') {
			mnt = argv[i];
		} else {
			return prefetch_usage();
		}
	}
	if (!mnt || (!list && !begin && !wait) || (at && !begin))
		return prefetch_usage();
	/* joined to "lists/": "../evict" would reach another control file */
	if (!lists_name_ok(name)) {
		fprintf(stderr, "fusefs: '%s' is not a list name ([A-Za-z0-9._-], 1 to %d bytes, not starting with '.')\n",
			name, LIST_NAME_MAX - 1);
		return prefetch_usage();
	}
	if (need_root(mnt, root, sizeof(root)))
		return 1;
	snprintf(rel, sizeof(rel), "lists/%s", name);
	if (!list && !begin)
		return wait_ready(root, name, timeout, stall);
	if (list) {
		buf = slurp(list, &len);
		if (!buf) {
			fprintf(stderr, "fusefs: cannot read list %s: %s\n", list,
				strerror(errno));
			return 1;
		}
	}
	head = prefetch_head(epoch, begin, at, list, nul, &hlen);
	if (!head) {
		free(buf);
		return 1;
	}
	rc = ctl_write2(root, rel, head, hlen, buf ? buf : "", len);
	free(head);
	free(buf);
	report = ctl_read(root, rel);
	if (report) {
		const char *last = strstr(report, "# last publish");

		fputs(last ? last : report, stdout);
		free(report);
	}
	if (rc) {
		fprintf(stderr, "fusefs: list '%s' was not published: %s\n", name,
			publish_error(rc));
		return 1;
	}
	return wait ? wait_ready(root, name, timeout, stall) : 0;
}

/* ---- JSON ---- */

static void json_str(FILE *f, const char *s, size_t n)
{
	size_t i;

	fputc('"', f);
	for (i = 0; i < n; i++) {
		unsigned char c = s[i];

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/*
 * the value @v (@n bytes) as JSON: an integer or a decimal as a number
 * ("12 (first at line 3)" as 12), a negative ratio as null, else a string
 */
static void json_value(FILE *f, const char *key, const char *v, size_t n)
{
	char tmp[64], *end;
	size_t kl = strlen(key);

	if (n && n < sizeof(tmp)) {
		memcpy(tmp, v, n);
		tmp[n] = '\0';
		errno = 0;
		(void)strtoll(tmp, &end, 10);
		if (end != tmp && !errno &&
		    (!*end || !strncmp(end, " (first at line", 15))) {
			fwrite(tmp, 1, end - tmp, f);
			return;
		}
		(void)strtod(tmp, &end);
		if (end != tmp && !*end) {
			if (kl > 6 && !strcmp(key + kl - 6, "_ratio") &&
			    tmp[0] == '-')
				fputs("null", f);
			else
				fputs(tmp, f);
			return;
		}
	}
	json_str(f, v, n);
}

/* the "key value" line at @p (@ll bytes) as a member */
static void json_member(FILE *f, const char *p, size_t ll, bool *first)
{
	const char *sp = memchr(p, ' ', ll);
	char key[128];

	if (!sp || sp == p || *p == '#')
		return;
	snprintf(key, sizeof(key), "%.*s", (int)(sp - p), p);
	fputs(*first ? "" : ", ", f);
	*first = false;
	json_str(f, key, strlen(key));
	fputs(": ", f);
	json_value(f, key, sp + 1, ll - (sp + 1 - p));
}

/* the lines from @p up to one starting with @stop (or the end) as members */
static const char *json_members(FILE *f, const char *p, const char *stop,
				bool *first)
{
	while (*p && (!stop || strncmp(p, stop, strlen(stop)))) {
		size_t ll = strcspn(p, "\n");

		json_member(f, p, ll, first);
		p += ll + (p[ll] == '\n');
	}
	return p;
}

/* the status of list @name as a JSON object; false if not published */
static bool json_list(FILE *f, const char *root, const char *name)
{
	char rel[NAME_MAX + 8], *st;
	const char *p;
	bool first = true;

	snprintf(rel, sizeof(rel), "lists/%s", name);
	st = ctl_read(root, rel);
	if (!st || strncmp(st, "list ", 5) || strstr(st, ": not published\n")) {
		free(st);
		return false;
	}
	fputs("{", f);
	p = strchr(st, '\n');		/* past "list NAME" */
	p = json_members(f, p ? p + 1 : "", "# last publish", &first);
	if (*p) {
		bool rfirst = true;

		fputs(", \"last_publish\": {", f);
		json_members(f, p + strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0),
			     NULL, &rfirst);
		fputs("}", f);
	}
	fputs("}", f);
	free(st);
	return true;
}

/* "lists": {NAME: {...}, ...} of every published list */
static void json_lists(FILE *f, const char *root)
{
	char path[PATH_MAX + 64];
	struct dirent *de;
	bool first = true;
	DIR *d;

	snprintf(path, sizeof(path), "%s/" CTL "/lists", root);
	fputs("\"lists\": {", f);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		char *text = NULL;
		size_t len;
		FILE *m;

		if (de->d_name[0] == '.')
			continue;
		m = open_memstream(&text, &len);
		if (!m)
			break;
		if (json_list(m, root, de->d_name)) {
			fclose(m);
			fputs(first ? "" : ", ", f);
			first = false;
			json_str(f, de->d_name, strlen(de->d_name));
			fprintf(f, ": %s", text);
		} else {
			fclose(m);
		}
		free(text);
	}
	if (d)
		closedir(d);
	fputs("}", f);
}

/* the status keys of `fusefs status`, also its JSON members */
static bool status_key(const char *p)
{
	static const char *const keys[] = {
		"hits ", "misses ", "stall_us ", "prefetch_", "cache_bytes",
		"cache_files ", "lists_published ", "bytes_from_backend ",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(keys); i++)
		if (!strncmp(p, keys[i], strlen(keys[i])))
			return true;
	return false;
}

static int status_usage(void)
{
	fprintf(stderr, "usage: fusefs status MOUNTPOINT [--json]\n");
	return EXIT_USAGE;
}

int cmd_status(int argc, char **argv)
{
	const char *mnt = NULL, *p;
	char root[PATH_MAX], *st;
	bool json = false, first = true;
	int i;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			json = true;
		else if (!mnt && argv[i][0] != '-')
			mnt = argv[i];
		else
			return status_usage();
	}
	if (!mnt)
		return status_usage();
	if (need_root(mnt, root, sizeof(root)))
		return 1;
	st = ctl_read(root, "stats");
	if (!st)
		return 1;
	if (json) {
		printf("{\"mount\": ");
		json_str(stdout, root, strlen(root));
		first = false;
	}
	for (p = st; *p;) {
		size_t ll = strcspn(p, "\n");

		if (json && status_key(p))
			json_member(stdout, p, ll, &first);
		else if (!json && (!strncmp(p, "list_", 5) || status_key(p)))
			printf("%.*s\n", (int)ll, p);
		p += ll + (p[ll] == '\n');
	}
	if (json) {
		fputs(", ", stdout);
		json_lists(stdout, root);
		fputs("}\n", stdout);
	}
	free(st);
	return 0;
}

/*
 * The paths go one per line, the text older daemons read, unless a name
 * has a newline or a carriage return: then each path ends in a NUL byte
 * (the daemon reads a text with a NUL that way, ctl.c next_path()).
 */
static bool needs_nul_form(int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++)
		if (strpbrk(argv[i], "\n\r"))
			return true;
	return false;
}

static void pin_failed(const char *what, int rc)
{
	fprintf(stderr, "fusefs: %s failed: %s\n", what, strerror(-rc));
}

/*
 * After an evict: a file still open keeps its cached data until its last
 * close (the daemon evicts it then, and logs its name); say so for each
 * file named that still has cached bytes.
 */
static void evict_deferred(int argc, char **argv)
{
	char v[32];
	int i;

	for (i = 0; i < argc; i++) {
		ssize_t n = getxattr(argv[i], "user.fusefs.cached", v,
				     sizeof(v) - 1);

		if (n <= 0)
			continue;
		v[n] = '\0';
		if (strcmp(v, "0"))
			printf("fusefs: evict: %s is open: its cached data goes at its last close\n",
			       argv[i]);
	}
}

int cmd_pin(int argc, char **argv, const char *what)
{
	char root[PATH_MAX], real[PATH_MAX], *buf = NULL;
	bool nul = needs_nul_form(argc, argv);
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
		fputs(real[rl] ? real + rl + 1 : "", f);
		fputc(nul ? '\0' : '\n', f);
	}
	fclose(f);
	rc = ctl_write(root, what, buf, len);
	free(buf);
	if (rc) {
		pin_failed(what, rc);
		return 1;
	}
	if (!strcmp(what, "evict"))
		evict_deferred(argc, argv);
	return 0;
}

int cmd_heat(int argc, char **argv)
{
	char root[PATH_MAX], *text;
	const char *mnt = NULL, *p, *v;
	long long top = 20;
	bool export = false;
	int i, rc;

	for (i = 0; i < argc; i++) {
		if ((rc = opt_value(argc, argv, &i, "--top", &v))) {
			if (rc < 0 || !parse_num(v, INT32_MAX, &top))
				goto usage;
		} else if (!strcmp(argv[i], "export") && !export && !mnt) {
			export = true;
		} else if (!mnt && argv[i][0] != '-') {
			mnt = argv[i];
		} else {
			goto usage;
		}
	}
	if (!mnt)
		goto usage;
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
usage:
	fprintf(stderr, "usage: fusefs heat MOUNTPOINT [--top N] | "
		"fusefs heat export MOUNTPOINT > hot.tsv\n");
	return EXIT_USAGE;
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

#define JSON_LISTS_MAX	256

/* the line at @p: 'list_KEY{list="NAME"} VALUE'?  Then KEY, NAME, VALUE */
static bool list_line(const char *p, size_t ll, const char **key, size_t *kl,
		      const char **name, size_t *nl, const char **val,
		      size_t *vl)
{
	const char *br = memchr(p, '{', ll), *q;

	if (ll < 5 || strncmp(p, "list_", 5) || !br ||
	    strncmp(br, "{list=\"", 7))
		return false;
	q = memchr(br + 7, '"', ll - (br + 7 - p));
	if (!q || q + 3 > p + ll || strncmp(q, "\"} ", 3))
		return false;
	*key = p + 5;
	*kl = br - *key;
	*name = br + 7;
	*nl = q - *name;
	*val = q + 3;
	*vl = ll - (*val - p);
	return true;
}

/* "name value" lines of the stats as JSON; list_KEY{list="NAME"} nested */
static void json_stats(FILE *f, const char *text)
{
	const char *names[JSON_LISTS_MAX], *p, *key, *name, *val;
	size_t nls[JSON_LISTS_MAX], kl, nl, vl, ll, n = 0, i;
	bool first = true;

	fputs("{", f);
	for (p = text; *p; p += ll + (p[ll] == '\n')) {
		ll = strcspn(p, "\n");
		if (!list_line(p, ll, &key, &kl, &name, &nl, &val, &vl)) {
			json_member(f, p, ll, &first);
			continue;
		}
		for (i = 0; i < n; i++)
			if (nls[i] == nl && !strncmp(names[i], name, nl))
				break;
		if (i == n && n < JSON_LISTS_MAX) {
			names[n] = name;
			nls[n++] = nl;
		}
	}
	fputs(first ? "\"lists\": {" : ", \"lists\": {", f);
	for (i = 0; i < n; i++) {
		bool kfirst = true;

		fputs(i ? ", " : "", f);
		json_str(f, names[i], nls[i]);
		fputs(": {", f);
		for (p = text; *p; p += ll + (p[ll] == '\n')) {
			char kbuf[128];

			ll = strcspn(p, "\n");
			if (!list_line(p, ll, &key, &kl, &name, &nl, &val,
				       &vl) ||
			    nl != nls[i] || strncmp(name, names[i], nl))
				continue;
			snprintf(kbuf, sizeof(kbuf), "%.*s", (int)kl, key);
			fputs(kfirst ? "" : ", ", f);
			kfirst = false;
			json_str(f, kbuf, strlen(kbuf));
			fputs(": ", f);
			json_value(f, kbuf, val, vl);
		}
		fputs("}", f);
	}
	fputs("}}\n", f);
}

static int stats_usage(void)
{
	fprintf(stderr, "usage: fusefs stats MOUNTPOINT [--json]\n");
	return EXIT_USAGE;
}

bool client_wants_json(int argc, char **argv)
{
	int i;

	for (i = 0; i < argc; i++)
		if (!strcmp(argv[i], "--json"))
			return true;
	return false;
}

int cmd_stats_json(int argc, char **argv)
{
	char root[PATH_MAX], *buf;
	const char *mnt = NULL;
	int i;

	for (i = 0; i < argc; i++) {
		if (!strcmp(argv[i], "--json"))
			continue;
		if (mnt || argv[i][0] == '-')
			return stats_usage();
		mnt = argv[i];
	}
	if (!mnt)
		return stats_usage();
	/* the mount point itself, as the text form (readiness probes) */
	if (client_mount_root(mnt, root, sizeof(root)))
		return 1;
	buf = ctl_read(root, "stats");
	if (!buf) {
		fprintf(stderr, "fusefs: %s: %s\n", mnt, strerror(errno));
		return 1;
	}
	json_stats(stdout, buf);
	free(buf);
	return 0;
}

int cmd_refresh(int argc, char **argv)
{
	long long timeout_s = 600, before, now;
	const char *mnt = NULL, *v;
	char root[PATH_MAX], *text;
	bool wait = false;
	int i, rc;

	for (i = 0; i < argc; i++) {
		rc = opt_value(argc, argv, &i, "--timeout", &v);
		if (rc == 1 && parse_num(v, 86400 * 365, &timeout_s))
			continue;
		if (rc)
			goto usage;
		if (!strcmp(argv[i], "--wait"))
			wait = true;
		else if (argv[i][0] != '-' && !mnt)
			mnt = argv[i];
		else
			goto usage;
	}
	if (!mnt)
		goto usage;
	if (need_root(mnt, root, sizeof(root)))
		return 1;
	text = ctl_read(root, "stats");
	before = text ? field(text, "ns_swaps") : -1;
	free(text);
	rc = ctl_write(root, "refresh", "1\n", 2);
	if (rc) {
		fprintf(stderr, "fusefs: refresh of %s refused: %s\n", root,
			strerror(-rc));
		return 1;
	}
	if (!wait)
		return 0;
	for (i = 0; i < timeout_s * 10; i++) {
		text = ctl_read(root, "stats");
		now = text ? field(text, "ns_swaps") : -1;
		free(text);
		if (now < 0) {
			fprintf(stderr, "fusefs: %s: cannot read the stats\n", root);
			return 1;
		}
		if (now > before)
			return 0;
		usleep(100000);
	}
	fprintf(stderr, "fusefs: %s: no new namespace after %lld s (see the log)\n",
		root, timeout_s);
	return WAIT_TIMEOUT;
usage:
	fprintf(stderr, "usage: fusefs refresh MOUNTPOINT [--wait [--timeout SECONDS]]\n");
	return 2;
}
