// SPDX-License-Identifier: MIT
/*
 * main.c - the fusefs command: argument parsing and wiring only.
 *
 *   fusefs mount SOURCE MOUNTPOINT [OPTIONS]
 *   fusefs SOURCE MOUNTPOINT [-o OPTIONS]      (mount.fuse3, fstab)
 *   fusefs stats MOUNTPOINT
 *   fusefs umount [-z] MOUNTPOINT
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend.h"
#include "cache.h"
#include "conf.h"
#include "fetch.h"
#include "fs.h"
#include "log.h"
#include "meta.h"
#include "nsmgr.h"
#include "stats.h"

#define EXIT_USAGE	2
#define FUSEFS_VERSION	"0.1.0"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fusefs mount SOURCE MOUNTPOINT --cache-dir DIR [OPTIONS]\n"
		"       fusefs SOURCE MOUNTPOINT -o cache_dir=DIR[,OPTIONS]\n"
		"       fusefs stats MOUNTPOINT\n"
		"       fusefs umount [-z] MOUNTPOINT\n"
		"       fusefs --version\n"
		"SOURCE is rados://POOL[/PREFIX] or s3://BUCKET[/PREFIX] (with --endpoint).\n"
		"Options:\n"
		"  -f                   stay in the foreground\n"
		"  -d                   debug logging and FUSE request tracing\n"
		"  -o OPT[,OPT...]      any option below as key=value, plus mount options\n");
	conf_usage(f);
}

static int parse_mount_args(struct fusefs_conf *cf, int argc, char **argv)
{
	char passthru[512] = "";
	int i, npos = 0;

	for (i = 0; i < argc; i++) {
		char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "-f")) {
			cf->foreground = true;
		} else if (!strcmp(a, "-d")) {
			cf->foreground = true;
			cf->debug_fuse = true;
			cf->log_level = LOG_DEBUG;
		} else if (!strcmp(a, "-o")) {
			if (++i == argc) {
				fprintf(stderr, "fusefs: -o needs a value\n");
				return -EINVAL;
			}
			if (conf_set_o(cf, argv[i], passthru, sizeof(passthru)))
				return -EINVAL;
		} else if (!strncmp(a, "--", 2)) {
			char *key = a + 2, *eq = strchr(key, '=');
			const char *val = NULL;
			int takes;
			int rc;

			if (eq)
				*eq = '\0';
			takes = conf_takes_value(key);
			if (takes < 0) {
				fprintf(stderr, "fusefs: unknown option --%s\n", key);
				return -EINVAL;
			}
			if (eq) {
				val = eq + 1;
			} else if (takes) {
				if (++i == argc) {
					fprintf(stderr, "fusefs: --%s needs a value\n", key);
					return -EINVAL;
				}
				val = argv[i];
			}
			rc = conf_set(cf, key, val);
			if (rc)
				return rc;
		} else if (a[0] == '-' && a[1]) {
			fprintf(stderr, "fusefs: unknown option %s\n", a);
			return -EINVAL;
		} else if (npos == 0) {
			cf->source = strdup(a);
			npos++;
		} else if (npos == 1) {
			cf->mountpoint = strdup(a);
			npos++;
		} else {
			fprintf(stderr, "fusefs: unexpected argument '%s'\n", a);
			return -EINVAL;
		}
	}
	return conf_check(cf);
}

/* detach from the terminal; the parent exits with the child's status */
static int daemonize(int *ready_fd)
{
	int p[2], status;
	pid_t pid;
	char c;

	if (pipe(p))
		return -errno;
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid > 0) {
		close(p[1]);
		if (read(p[0], &c, 1) == 1)
			_exit(0);		/* mounted */
		waitpid(pid, &status, 0);
		_exit(WIFEXITED(status) && WEXITSTATUS(status) ?
		      WEXITSTATUS(status) : 1);
	}
	close(p[0]);
	setsid();
	{
		int fd = open("/dev/null", O_RDWR);

		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			if (fd > STDERR_FILENO)
				close(fd);
		}
	}
	*ready_fd = p[1];
	return 0;
}

/* the index must match how the data files are laid out */
static int check_index(struct meta *m, const struct fusefs_conf *cf)
{
	char want[32], have[32];

	snprintf(want, sizeof(want), "%u", cf->chunk_size);
	if (!meta_get_str(m, "chunk_size", have, sizeof(have)) &&
	    strcmp(have, want)) {
		log_warn("chunk size changed from %s to %s: dropping the cache",
			 have, want);
		if (meta_wipe_cache(m))
			return -EIO;
	}
	if (meta_put_str(m, "chunk_size", want) ||
	    meta_put_str(m, "format", "1"))
		return -EIO;
	return 0;
}

static int cmd_mount(int argc, char **argv)
{
	struct fusefs_conf cf;
	struct stats st = { 0 };
	struct backend *be = NULL;
	struct meta *meta = NULL;
	struct nsmgr *nm = NULL;
	struct cache *cache = NULL;
	struct fetcher *fetch = NULL;
	struct fs_deps deps;
	char path[4096];
	struct stat sb;
	int ready_fd = -1, rc;

	conf_init(&cf);
	if (parse_mount_args(&cf, argc, argv)) {
		fprintf(stderr, "Try 'fusefs --help'.\n");
		conf_release(&cf);
		return EXIT_USAGE;
	}
	if (backend_check_source(cf.source)) {
		conf_release(&cf);
		return EXIT_USAGE;
	}
	if (stat(cf.mountpoint, &sb) || !S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "fusefs: mount point %s is not a directory\n",
			cf.mountpoint);
		conf_release(&cf);
		return EXIT_USAGE;
	}
	if (mkdir(cf.cache_dir, 0700) && errno != EEXIST) {
		fprintf(stderr, "fusefs: cannot create cache directory %s: %s\n",
			cf.cache_dir, strerror(errno));
		conf_release(&cf);
		return 1;
	}
	log_level = cf.log_level;
	log_open("fusefs", cf.log_syslog);
	/* librados starts threads: fork before anything else */
	if (!cf.foreground && daemonize(&ready_fd)) {
		fprintf(stderr, "fusefs: cannot go to the background\n");
		return 1;
	}
	rc = 1;
	snprintf(path, sizeof(path), "%s/index", cf.cache_dir);
	if (meta_open(&meta, path)) {
		fprintf(stderr, "fusefs: cannot open the cache index in %s\n", path);
		goto out;
	}
	if (check_index(meta, &cf))
		goto out;
	if (cache_open(&cache, &cf, meta, &st))
		goto out;
	if (backend_open(&be, &cf))
		goto out;
	if (nsmgr_open(&nm, be, meta, &cf, &st))
		goto out;
	if (fetch_create(&fetch, cache, be, &cf, &st))
		goto out;
	fetch_on_stale(fetch, (void (*)(void *, uint64_t))nsmgr_force_check, nm);
	deps = (struct fs_deps){ .cf = &cf, .nm = nm, .cache = cache,
				 .fetch = fetch, .st = &st };
	rc = fs_run(&deps, ready_fd) ? 1 : 0;
out:
	fetch_destroy(fetch);
	cache_close(cache);
	nsmgr_close(nm);
	backend_close(be);
	meta_close(meta);
	conf_release(&cf);
	return rc;
}

static int cmd_stats(int argc, char **argv)
{
	ssize_t len;
	char *buf;

	if (argc != 1) {
		fprintf(stderr, "usage: fusefs stats MOUNTPOINT\n");
		return EXIT_USAGE;
	}
	len = getxattr(argv[0], "user.fusefs.stats", NULL, 0);
	if (len < 0) {
		fprintf(stderr, "fusefs: %s is not a fusefs mount (%s)\n", argv[0],
			strerror(errno));
		return 1;
	}
	buf = malloc(len + 4096);
	if (!buf)
		return 1;
	len = getxattr(argv[0], "user.fusefs.stats", buf, len + 4096);
	if (len < 0) {
		fprintf(stderr, "fusefs: %s: %s\n", argv[0], strerror(errno));
		free(buf);
		return 1;
	}
	fwrite(buf, 1, len, stdout);
	free(buf);
	return 0;
}

static int cmd_umount(int argc, char **argv)
{
	bool lazy = false;
	const char *mnt;

	if (argc == 2 && !strcmp(argv[0], "-z")) {
		lazy = true;
		argc--;
		argv++;
	}
	if (argc != 1) {
		fprintf(stderr, "usage: fusefs umount [-z] MOUNTPOINT\n");
		return EXIT_USAGE;
	}
	mnt = argv[0];
	if (geteuid() == 0) {
		if (umount2(mnt, lazy ? MNT_DETACH : 0) == 0)
			return 0;
		fprintf(stderr, "fusefs: cannot unmount %s: %s%s\n", mnt,
			strerror(errno), errno == EBUSY ? " (files open? try -z)" : "");
		return 1;
	}
	execlp("fusermount3", "fusermount3", lazy ? "-uz" : "-u", mnt, (char *)NULL);
	fprintf(stderr, "fusefs: cannot run fusermount3: %s\n", strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
		printf("fusefs %s\n", FUSEFS_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "mount"))
		return cmd_mount(argc - 2, argv + 2);
	if (!strcmp(argv[1], "stats"))
		return cmd_stats(argc - 2, argv + 2);
	if (!strcmp(argv[1], "umount") || !strcmp(argv[1], "unmount"))
		return cmd_umount(argc - 2, argv + 2);
	if (strstr(argv[1], "://"))
		return cmd_mount(argc - 1, argv + 1);	/* mount.fuse3 form */
	fprintf(stderr, "fusefs: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
