// SPDX-License-Identifier: MIT
/*
 * main.c - the fusefs command: argument parsing and wiring only.
 *
 *   fusefs mount SOURCE MOUNTPOINT [OPTIONS]
 *   fusefs mount --config FILE [OPTIONS]      (systemd: fusefs@NAME.service)
 *   fusefs SOURCE MOUNTPOINT [-o OPTIONS]      (mount.fuse3, fstab)
 *   fusefs stats MOUNTPOINT [--json]
 *   fusefs umount [-z] MOUNTPOINT
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend.h"
#include "bgthread.h"
#include "client.h"
#include "cache.h"
#include "cfgfile.h"
#include "conf.h"
#include "fetch.h"
#include "epochs.h"
#include "fs.h"
#include "log.h"
#include "manifest_cmd.h"
#include "manifest_src.h"
#include "meta.h"
#include "metrics.h"
#include "mountsafe.h"
#include "notify.h"
#include "nsmgr.h"
#include "ctl.h"
#include "lists.h"
#include "prefetch.h"
#include "s3sign.h"
#include "verifier.h"
#include "stats.h"
#include "testhook.h"

#define EXIT_USAGE	2
#include "version.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: fusefs mount SOURCE MOUNTPOINT --cache-dir DIR [OPTIONS]\n"
		"       fusefs mount --config /etc/fusefs/NAME.conf [OPTIONS]\n"
		"       fusefs SOURCE MOUNTPOINT -o cache_dir=DIR[,OPTIONS]\n"
		"       fusefs stats MOUNTPOINT [--json]\n"
		"       fusefs umount [-z] MOUNTPOINT\n"
		"       fusefs prefetch MOUNTPOINT [--list FILE|- [--null]] [--name NAME] [--epoch N] [--begin [--at K]] [--wait]\n"
		"       fusefs status MOUNTPOINT [--json]\n"
		"       fusefs pin|unpin|evict PATH...\n"
		"       fusefs heat MOUNTPOINT [--top N] | fusefs heat export MOUNTPOINT\n"
		"       fusefs warm MOUNTPOINT --from hot.tsv\n"
		"       fusefs refresh MOUNTPOINT [--wait [--timeout SECONDS]]\n"
		"       fusefs manifest create SOURCE [--versions] [OPTIONS] > FILE | fusefs manifest diff A B\n"
		"       fusefs --version\n"
		"SOURCE is rados://POOL[/PREFIX], s3://BUCKET[/PREFIX] (with --endpoint) or file:///DIR.\n"
		"Options:\n"
		"  -f                   stay in the foreground\n"
		"  -d                   debug logging and FUSE request tracing\n"
		"  -o OPT[,OPT...]      any option below as key=value, plus mount options\n");
	conf_usage(f);
}

/* "a=1,config=FILE,b" -> "FILE,b" (the last one), or NULL */
static const char *o_config(const char *list)
{
	const char *t = list, *v = NULL;

	while (t) {
		if (!strncmp(t, "config=", 7))
			v = t + 7;
		t = strchr(t, ',');
		if (t)
			t++;
	}
	return v;
}

/* the last --config FILE, --config=FILE or -o config=FILE; malloc'ed */
static char *config_arg(int argc, char **argv)
{
	char *found = NULL;
	int i;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *v = NULL;
		size_t n = 0;

		if (!strcmp(a, "--config") && i + 1 < argc) {
			v = argv[++i];
			n = strlen(v);
		} else if (!strncmp(a, "--config=", 9)) {
			v = a + 9;
			n = strlen(v);
		} else if (!strcmp(a, "-o") && i + 1 < argc) {
			v = o_config(argv[++i]);
			n = v ? strcspn(v, ",") : 0;
		} else if (!strncmp(a, "--", 2) && !strchr(a, '=') &&
			   conf_takes_value(a + 2) > 0) {
			i++;		/* that option's value */
		}
		if (v) {
			free(found);
			found = strndup(v, n);
		}
	}
	return found;
}

/* mkdir -p: the cache directory and its missing parents (~/.cache); -errno */
static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	char *p;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	return mkdir(buf, mode) && errno != EEXIST ? -errno : 0;
}

static int parse_mount_args(struct fusefs_conf *cf, int argc, char **argv)
{
	char passthru[512] = "";
	char *config = config_arg(argc, argv);
	int i, npos = 0;

	/* the file first, so that the command line overrides it */
	if (config) {
		int rc = cfgfile_load(cf, config);

		free(config);
		if (rc)
			return rc;
	}
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
			free(cf->source);	/* from a config file */
			cf->source = strdup(a);
			npos++;
		} else if (npos == 1) {
			free(cf->mountpoint);
			cf->mountpoint = strdup(a);
			npos++;
		} else {
			fprintf(stderr, "fusefs: unexpected argument '%s'\n", a);
			return -EINVAL;
		}
	}
	if (passthru[0]) {
		cf->kernel_opts = strdup(passthru);
		if (!cf->kernel_opts)
			return -ENOMEM;
	}
	return conf_check(cf);
}

/* detach from the terminal; the parent exits with the child's status */
/*
 * The soft limit on open files up to the hard one, as daemons that keep
 * many files open do: the cache keeps data files of closed entries open
 * for their next open (cache.c, idle_max()), and a soft limit of 1024 (a
 * login shell's, a notebook's) would leave room for 170 of them, so an
 * epoch over more files would open and close a data file per FUSE open.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		log_warn("cannot raise the open-file limit to %llu: %s",
			 (unsigned long long)rl.rlim_max, strerror(errno));
}

static int daemonize(int *ready_fd)
{
	int p[2], status;
	pid_t pid;
	char c;

	/* close-on-exec: a fusermount3 the daemon starts (it stays with
	 * auto_unmount) must not hold the write end, or a daemon that dies
	 * before it is ready leaves this parent waiting for an EOF for good */
	if (pipe2(p, O_CLOEXEC))
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
/* the cache directory format this build reads and writes (cache-format.md) */
#define CACHE_FORMAT	"1"

static int check_index(struct meta *m, const struct fusefs_conf *cf)
{
	char want[32], have[32];

	/* a newer format: refuse, never rewrite or wipe it (its data is
	 * the newer fusefs's to serve) */
	if (!meta_get_str(m, "format", have, sizeof(have)) &&
	    strcmp(have, CACHE_FORMAT)) {
		fprintf(stderr, "fusefs: the cache in %s is of format %s; this fusefs reads format %s only: use that fusefs, or another --cache-dir\n",
			cf->cache_dir, have, CACHE_FORMAT);
		return -EPROTO;
	}
	snprintf(want, sizeof(want), "%u", cf->chunk_size);
	if (!meta_get_str(m, "chunk_size", have, sizeof(have)) &&
	    strcmp(have, want)) {
		log_warn("chunk size changed from %s to %s: dropping the cache",
			 have, want);
		if (meta_wipe_cache(m))
			return -EIO;
	}
	if (meta_put_str(m, "chunk_size", want) ||
	    meta_put_str(m, "format", CACHE_FORMAT))
		return -EIO;
	return 0;
}

/*
 * The index and the cache loaded from it.  An index that fails a read or
 * a write on the way (meta_broken(): damage the start-up checks could not
 * see) is closed, set aside by the next meta_open() and the start made
 * again, once, with an empty one.  Return: 0 or -errno (message printed).
 */
static int open_index(struct meta **meta, struct cache **cache,
		      struct fusefs_conf *cf, struct stats *st)
{
	char path[4096 + 8], shown[4096 + 8];
	int attempt, rc = -EIO;

	snprintf(path, sizeof(path), "%s/index", cf->cache_dir_at);
	snprintf(shown, sizeof(shown), "%s/index", cf->cache_dir);
	for (attempt = 0; attempt < 2; attempt++) {
		rc = meta_open_named(meta, path, shown, META_MAPSIZE);
		if (rc) {
			fprintf(stderr, "fusefs: cannot open the cache index in %s: %s\n",
				shown, strerror(-rc));
			return rc;
		}
		meta_count_queued(*meta, &st->index_queued);
		rc = check_index(*meta, cf);
		if (!rc)
			rc = cache_open(cache, cf, *meta, st);
		if (!rc || rc == -EPROTO || !meta_broken(*meta))
			return rc;
		meta_close(*meta);
		*meta = NULL;
	}
	return rc;
}

/* service options refused before going to the background (exit 2) */
static int check_service_opts(const struct fusefs_conf *cf)
{
	const char *ep = cf->s3_endpoint ? cf->s3_endpoint : getenv("AWS_ENDPOINT_URL");
	char scheme[8], host[512];

	if (cf->metrics_addr && metrics_check_addr(cf->metrics_addr))
		return -EINVAL;
	if (cf->log_file && cf->log_syslog) {
		fprintf(stderr, "fusefs: --log-file and --syslog exclude each other\n");
		return -EINVAL;
	}
	/* s3_parse_endpoint()'s rule; s3_open() refuses with these words too
	 * (fusefs manifest create/diff); a malformed one is its to report */
	if (ep && s3_parse_endpoint(ep, scheme, sizeof(scheme), host,
				    sizeof(host)) == -EPERM) {
		fprintf(stderr, "fusefs: the S3 endpoint must not contain credentials (USER:KEY@); use the environment or --credentials-file\n");
		return -EINVAL;
	}
	/* the same for a remote manifest, which is named in every message
	 * about it */
	if (cf->manifest && manifest_check_url(cf->manifest))
		return -EINVAL;
	/* credentials in the source: backend_check_source(), next */
	return 0;
}

/*
 * A daemon that died left its mount behind: every access fails with
 * ENOTCONN.  Detach it, so that a restart (systemd Restart=on-failure)
 * can mount again.  A live mount is never touched.
 */
static void clear_dead_mount(const char *mnt)
{
	pid_t pid;

	fprintf(stderr, "fusefs: %s is a dead FUSE mount (its daemon died): detaching it\n",
		mnt);
	if (geteuid() == 0) {
		umount2(mnt, MNT_DETACH);
		return;
	}
	pid = fork();
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-uz", mnt, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

/*
 * The mount point: a directory (a dead FUSE mount there is cleared, a
 * live one refused, a non-empty one refused unless -o nonempty), or
 * /dev/fd/N, a FUSE device fd mounted by a privileged process that
 * started us (fd passing): the mount and its options are that process's.
 * Return: 0, -EINVAL (usage) or another -errno.
 */
static int check_mountpoint(const struct fusefs_conf *cf)
{
	struct statfs sfs;
	int fd = mountsafe_fd(cf->mountpoint);

	if (fd >= 0) {
		if (mountsafe_check_fd(fd))
			return -EINVAL;
		if (cf->kernel_opts || cf->allow_other || cf->nonempty)
			fprintf(stderr, "fusefs: warning: -o %s%s%s%s%s ignored: with %s the process that mounted the FUSE device chose the mount options\n",
				cf->kernel_opts ? cf->kernel_opts : "",
				cf->kernel_opts && cf->allow_other ? "," : "",
				cf->allow_other ? "allow_other" : "",
				(cf->kernel_opts || cf->allow_other) && cf->nonempty ? "," : "",
				cf->nonempty ? "nonempty" : "", cf->mountpoint);
		return 0;
	}
	if (statfs(cf->mountpoint, &sfs) && errno == ENOTCONN)
		clear_dead_mount(cf->mountpoint);	/* stat() may be cached */
	return mountsafe_check_dir(cf->mountpoint, cf->nonempty);
}

/* tests: the lists' clock runs "lists-clock-skew-ms" ahead (testhook.h) */
static uint64_t lists_test_clock(void *arg)
{
	return (uint64_t)(bg_mono_ms() +
			  testhook_value("lists-clock-skew-ms", 0));
}

/* what the mount's on_ready and the watchdog need */
struct service {
	const struct fusefs_conf *cf;
	struct meta *meta;
	struct stats *st;
	struct notify_watchdog *watchdog;
};

/* the watchdog's check beside the FUSE loop: the index writer is not stuck */
static bool service_healthy(void *arg)
{
	struct service *sv = arg;

	return meta_writer_busy_ms(sv->meta) <
	       (int64_t)(notify_watchdog_usec() / 2000) + 1;
}

/* fs_deps.on_ready: tell systemd (Type=notify) once the mount answers,
 * and from then on that it stays alive (WatchdogSec=) */
static void report_ready(void *arg)
{
	struct service *sv = arg;
	const struct fusefs_conf *cf = sv->cf;
	char status[2 * 4096 + 32];
	int rc;

	snprintf(status, sizeof(status), "serving %s on %s", cf->source,
		 cf->mountpoint);
	/* an fd mount cannot be looked at by path: INIT was answered */
	if (mountsafe_fd(cf->mountpoint) >= 0)
		rc = notify_sendf("READY=1\nSTATUS=%s", status);
	else
		rc = notify_ready_when_served(cf->mountpoint, status);
	if (rc)
		log_warn("cannot report readiness: %s", strerror(-rc));
	rc = notify_watchdog_start(&sv->watchdog, cf->mountpoint,
				   service_healthy, sv, sv->st);
	if (rc)
		log_warn("cannot start the watchdog: %s", strerror(-rc));
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
	struct metrics *metrics = NULL;
	struct lists *lists = NULL;
	struct prefetcher *pf = NULL;
	struct epochs *epochs = NULL;
	struct verifier *ver = NULL;
	struct ctl *ctl = NULL;
	struct fs_deps deps;
	struct service sv = { .cf = &cf, .st = &st };
	char at[64];
	int ready_fd = -1, rc;

	conf_init(&cf);
	if (parse_mount_args(&cf, argc, argv)) {
		fprintf(stderr, "Try 'fusefs --help'.\n");
		conf_release(&cf);
		return EXIT_USAGE;
	}
	if (check_service_opts(&cf) || backend_check_source(cf.source)) {
		conf_release(&cf);
		return EXIT_USAGE;
	}
	rc = check_mountpoint(&cf);
	if (rc) {
		conf_release(&cf);
		return rc == -EINVAL || rc == -ENOTDIR ? EXIT_USAGE : 1;
	}
	rc = mkdir_p(cf.cache_dir, 0700);
	if (rc) {
		fprintf(stderr, "fusefs: cannot create cache directory %s: %s\n",
			cf.cache_dir, strerror(-rc));
		conf_release(&cf);
		return 1;
	}
	if (cache_check_dir(cf.cache_dir, at, sizeof(at)) ||
	    mountsafe_cache_size(&cf)) {
		conf_release(&cf);
		return 1;
	}
	log_level = cf.log_level;
	log_open("fusefs", cf.log_syslog);
	log_set_format(cf.log_json ? "json" : "text");
	rc = cf.log_file ? log_open_file(cf.log_file) : 0;
	if (rc) {
		fprintf(stderr, "fusefs: cannot open log file %s: %s\n",
			cf.log_file, strerror(-rc));
		conf_release(&cf);
		return 1;
	}
	/* librados starts threads: fork before anything else */
	if (!cf.foreground && daemonize(&ready_fd)) {
		fprintf(stderr, "fusefs: cannot go to the background\n");
		return 1;
	}
	rc = 1;
	raise_nofile();
	/* a SIGHUP (logrotate, a reload) while connecting must not kill the
	 * daemon: it reopens the log from now on */
	if (log_catch_sighup())
		log_warn("cannot catch SIGHUP: it ends the daemon");
	cf.cache_dir_at = strdup(at);
	if (!cf.cache_dir_at || open_index(&meta, &cache, &cf, &st))
		goto out;
	notify_sendf("STATUS=connecting to %s", cf.source);
	if (backend_open(&be, &cf))
		goto out;
	if (nsmgr_open(&nm, be, meta, &cf, &st))
		goto out;
	if (fetch_create(&fetch, cache, be, &cf, &st))
		goto out;
	fetch_on_stale(fetch, nsmgr_stale_cb, nm);
	lists = lists_create();
	if (!lists)
		goto out;
	lists_set_idle(lists, cf.list_idle_s);
	if (testhook_on())
		lists_set_clock(lists, lists_test_clock, NULL);
	if (verifier_start(&ver, cache, fetch, lists, nm, cf.verify_depth,
			   &st))
		goto out;
	if (prefetch_create(&pf, lists, nm, cache, fetch))
		goto out;
	/* the lists on the data path: the policy's future, the fetcher's
	 * wanted hook, opens that move a list wake the prefetcher */
	if (epochs_create(&epochs, lists, cache, fetch, pf))
		goto out;
	ctl = ctl_create(&(struct ctl_deps){ .st = &st, .cache = cache,
		.nm = nm, .lists = lists, .pf = pf, .cf = &cf,
		.mem = fetch_budget(fetch) });
	if (!ctl)
		goto out;
	if (cf.rewarm)
		ctl_rewarm(ctl, cf.rewarm);
	if (cf.metrics_addr &&
	    metrics_start(&metrics, cf.metrics_addr, &(struct report_src){
			.st = &st, .cache = cache, .nm = nm, .lists = lists }))
		goto out;
	deps = (struct fs_deps){ .cf = &cf, .nm = nm, .cache = cache, .ctl = ctl,
				 .epochs = epochs, .fetch = fetch, .st = &st,
				 .verifier = ver };
	sv.meta = meta;
	deps.on_ready = report_ready;
	deps.ready_arg = &sv;
	rc = fs_run(&deps, ready_fd) ? 1 : 0;
	notify_watchdog_stop(sv.watchdog);	/* the session is gone */
	log_flush_repeats();
	/* fuse_remove_signal_handlers() reset SIGPIPE to its default */
	signal(SIGPIPE, SIG_IGN);
	notify_send("STOPPING=1\nSTATUS=unmounted, saving the cache index");
out:
	metrics_stop(metrics);
	verifier_stop(ver);
	prefetch_stop(pf);
	fetch_destroy(fetch);
	prefetch_destroy(pf);
	epochs_destroy(epochs);
	ctl_destroy(ctl);
	lists_destroy(lists);
	cache_close(cache);
	nsmgr_close(nm);
	backend_close(be);
	meta_close(meta);
	conf_release(&cf);
	return rc;
}

static int cmd_stats(int argc, char **argv)
{
	char root[PATH_MAX];
	ssize_t len;
	char *buf;

	if (argc != 1) {
		fprintf(stderr, "usage: fusefs stats MOUNTPOINT\n");
		return EXIT_USAGE;
	}
	/* a fusefs mount point, as --json: any directory's owner may set
	 * user.fusefs.stats (docs/security.md) */
	if (client_mount_root(argv[0], root, sizeof(root)))
		return 1;
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

/*
 * Run as /sbin/mount.fuse.fusefs, mount(8) passes -n (no mtab), -s
 * (sloppy), -v (verbose), which do not apply, and -f (fake: do
 * everything but mount).  Drop the first three; for -f only check the
 * arguments.  Return: the new argc; *@fake set for -f.
 */
static int helper_args(int argc, char **argv, bool *fake)
{
	int i, out = 1;

	*fake = false;
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-n") || !strcmp(argv[i], "-s") ||
		    !strcmp(argv[i], "-v"))
			continue;
		if (!strcmp(argv[i], "-f")) {
			*fake = true;
			continue;
		}
		argv[out++] = argv[i];
	}
	argv[out] = NULL;
	return out;
}

int main(int argc, char **argv)
{
	const char *self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];

	signal(SIGPIPE, SIG_IGN);
	testhook_init();
	if (!strncmp(self, "mount.", 6)) {
		bool fake;

		argc = helper_args(argc, argv, &fake);
		if (fake)
			return argc >= 3 ? 0 : EXIT_USAGE;
	}
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
	if (!strcmp(argv[1], "stats") && client_wants_json(argc - 2, argv + 2))
		return cmd_stats_json(argc - 2, argv + 2);
	if (!strcmp(argv[1], "stats"))
		return cmd_stats(argc - 2, argv + 2);
	if (!strcmp(argv[1], "prefetch"))
		return cmd_prefetch(argc - 2, argv + 2);
	if (!strcmp(argv[1], "status"))
		return cmd_status(argc - 2, argv + 2);
	if (!strcmp(argv[1], "pin") || !strcmp(argv[1], "unpin") ||
	    !strcmp(argv[1], "evict"))
		return cmd_pin(argc - 2, argv + 2, argv[1]);
	if (!strcmp(argv[1], "heat"))
		return cmd_heat(argc - 2, argv + 2);
	if (!strcmp(argv[1], "warm"))
		return cmd_warm(argc - 2, argv + 2);
	if (!strcmp(argv[1], "refresh"))
		return cmd_refresh(argc - 2, argv + 2);
	if (!strcmp(argv[1], "manifest"))
		return cmd_manifest(argc - 2, argv + 2);
	if (!strcmp(argv[1], "umount") || !strcmp(argv[1], "unmount"))
		return cmd_umount(argc - 2, argv + 2);
	if (strstr(argv[1], "://"))
		return cmd_mount(argc - 1, argv + 1);	/* mount.fuse3 form */
	fprintf(stderr, "fusefs: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
