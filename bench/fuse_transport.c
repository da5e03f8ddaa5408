// SPDX-License-Identifier: MIT
/*
 * fuse_transport.c - what one FUSE request costs on this kernel, over
 * /dev/fuse read()/writev() against FUSE over io_uring.
 *
 * Not part of the daemon: a benchmark probe for docs/benchmarks-local.md
 * ("What limits these numbers").  The daemon runs on libfuse 3.14, whose
 * only transport is read()/writev() on /dev/fuse; the kernel here also
 * has FUSE over io_uring (ABI 7.42, CONFIG_FUSE_IO_URING, module
 * parameter enable_uring).  This probe serves the same tiny file system
 * both ways with the same request handler, so that the two can be
 * compared per request with nothing else in the way:
 *
 *   fuse_transport serve MNT classic|uring NFILES   (foreground daemon)
 *   fuse_transport client MNT NFILES THREADS PID    (one pass, one line)
 *
 * The tree is NFILES files of 100 KiB, f0000000.. in the root, bytes
 * from one static buffer; the mount is read-only (no atime GETATTR) and
 * opens keep the page cache, so a pass over files already looked up and
 * cached costs OPEN and RELEASE per file, and a pass after
 * `echo 3 > drop_caches` LOOKUP, OPEN, READ and RELEASE.  bench/transport.py
 * alternates the two transports and reports per file: wall time of the
 * client, daemon CPU (utime + stime of PID) and requests.
 *
 * io_uring mode: INIT arrives on /dev/fuse; the INIT reply offers
 * FUSE_OVER_IO_URING; then one thread per possible CPU (pinned to it)
 * registers DEPTH ring entries (a header buffer and a payload buffer
 * each) and answers each request by COMMIT_AND_FETCH on the same entry.
 * FORGET and INTERRUPT still come on /dev/fuse, read by one thread.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/fuse.h>
#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* ABI 7.42 (kernel 6.14): not in Debian 12's <linux/fuse.h> (7.38) */
#define OVER_IO_URING_FLAGS2	(1u << (41 - 32))	/* FUSE_OVER_IO_URING */
#define URING_CMD_REGISTER	1u
#define URING_CMD_COMMIT_AND_FETCH 2u

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* the request's unique */
	uint32_t payload_sz;	/* bytes in the payload, either way */
	uint32_t padding;
	uint64_t reserved;
};

struct uring_req_header {
	char in_out[128];	/* fuse_in_header in, fuse_out_header out */
	char op_in[128];	/* the opcode's first argument, if sized */
	struct uring_ent_in_out ent;
};

struct uring_cmd_req {		/* in the SQE's 80-byte command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

_Static_assert(sizeof(struct uring_ent_in_out) == 32, "ABI 7.42");
_Static_assert(sizeof(struct uring_req_header) == 288, "ABI 7.42");
_Static_assert(sizeof(struct uring_cmd_req) == 24, "ABI 7.42");
_Static_assert(sizeof(struct fuse_in_header) == 40, "fuse_in_header");

#define FILE_SIZE	(100u << 10)
#define MAX_PAYLOAD	(1u << 20)	/* max_write and max_pages * 4 KiB */
#define DEPTH		8		/* ring entries per queue */
#define NAME_FMT	"f%07u"

static int devfd = -1;
static unsigned nfiles;
static bool uring_mode;
static char data[FILE_SIZE];
static atomic_bool stopping;
static atomic_ulong dev_requests, ring_requests;	/* answered each way */

static void die(const char *what)
{
	perror(what);
	exit(1);
}

static void fill_attr(struct fuse_attr *a, uint64_t ino)
{
	memset(a, 0, sizeof(*a));
	a->ino = ino;
	a->nlink = 1;
	a->blksize = 4096;
	if (ino == FUSE_ROOT_ID) {
		a->mode = S_IFDIR | 0555;
		a->nlink = 2;
		return;
	}
	a->mode = S_IFREG | 0444;
	a->size = FILE_SIZE;
	a->blocks = FILE_SIZE / 512;
}

/* a file's number from its name, or -1 */
static long file_index(const char *name, size_t len)
{
	unsigned long i;
	char *end;

	if (len != 8 || name[0] != 'f')
		return -1;
	i = strtoul(name + 1, &end, 10);
	return end == name + 8 && i < nfiles ? (long)i : -1;
}

/*
 * Answer one request.  @arg: its arguments, contiguous; the reply's
 * argument goes to *@reply (at most MAX_PAYLOAD bytes; @scratch may hold
 * it).  Return: the reply's argument length, -errno, or 1 << 30 when no
 * reply is due (FORGET, INTERRUPT).
 */
static int handle(const struct fuse_in_header *in, const char *arg,
		  size_t arglen, void *scratch, const void **reply)
{
	*reply = scratch;
	switch (in->opcode) {
	case FUSE_LOOKUP: {
		struct fuse_entry_out *e = scratch;
		long i;

		if (in->nodeid != FUSE_ROOT_ID || !arglen)
			return -ENOENT;
		i = file_index(arg, strnlen(arg, arglen));
		if (i < 0)
			return -ENOENT;
		memset(e, 0, sizeof(*e));
		e->nodeid = 2 + (uint64_t)i;
		e->generation = 1;
		e->entry_valid = e->attr_valid = 3600;
		fill_attr(&e->attr, e->nodeid);
		return sizeof(*e);
	}
	case FUSE_GETATTR: {
		struct fuse_attr_out *o = scratch;

		memset(o, 0, sizeof(*o));
		o->attr_valid = 3600;
		fill_attr(&o->attr, in->nodeid);
		return sizeof(*o);
	}
	case FUSE_OPEN:
	case FUSE_OPENDIR: {
		struct fuse_open_out *o = scratch;

		memset(o, 0, sizeof(*o));
		o->fh = in->nodeid;
		if (in->opcode == FUSE_OPEN)
			o->open_flags = FOPEN_KEEP_CACHE | FOPEN_NOFLUSH;
		return sizeof(*o);
	}
	case FUSE_READ: {
		const struct fuse_read_in *r = (const void *)arg;
		uint64_t n = 0;

		if (arglen < sizeof(*r))
			return -EINVAL;
		if (r->offset < FILE_SIZE)
			n = FILE_SIZE - r->offset;
		if (n > r->size)
			n = r->size;
		*reply = data + (n ? r->offset : 0);
		return (int)n;
	}
	case FUSE_READDIR:
		return 0;		/* an empty listing: not used */
	case FUSE_RELEASE:
	case FUSE_RELEASEDIR:
	case FUSE_FLUSH:
	case FUSE_DESTROY:
		return 0;
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_INTERRUPT:
		return 1 << 30;
	default:
		return -ENOSYS;
	}
}

static void reply_dev(uint64_t unique, int rc, const void *arg)
{
	struct fuse_out_header out = { .unique = unique };
	struct iovec iov[2] = { { &out, sizeof(out) }, { (void *)arg, 0 } };

	if (rc < 0)
		out.error = rc;
	else
		iov[1].iov_len = (size_t)rc;
	out.len = sizeof(out) + iov[1].iov_len;
	if (writev(devfd, iov, 2) < 0 && errno != ENOENT)
		perror("writev /dev/fuse");
}

static void start_rings(void);

static void do_init(const struct fuse_in_header *in,
		    const struct fuse_init_in *ii)
{
	struct fuse_init_out o = { 0 };

	o.major = FUSE_KERNEL_VERSION;
	o.minor = ii->minor < 42 ? ii->minor : 42;
	o.max_readahead = ii->max_readahead;
	o.flags = FUSE_ASYNC_READ | FUSE_BIG_WRITES | FUSE_MAX_PAGES |
		  FUSE_PARALLEL_DIROPS | FUSE_INIT_EXT;
	o.flags &= ii->flags | FUSE_INIT_EXT;
	if (uring_mode) {
		if (ii->minor < 42 || !(ii->flags2 & OVER_IO_URING_FLAGS2)) {
			fprintf(stderr, "fuse_transport: the kernel does not offer FUSE over io_uring (minor %u; is /sys/module/fuse/parameters/enable_uring Y?)\n",
				ii->minor);
			exit(2);
		}
		o.flags2 = OVER_IO_URING_FLAGS2;
	}
	o.max_background = 64;
	o.congestion_threshold = 48;
	o.max_write = MAX_PAYLOAD;
	o.time_gran = 1;
	o.max_pages = MAX_PAYLOAD / 4096;
	reply_dev(in->unique, sizeof(o), &o);
	if (uring_mode)
		start_rings();
}

/* classic transport: one thread of the /dev/fuse loop */
static void *dev_loop(void *unused)
{
	size_t bufsize = MAX_PAYLOAD + 4096;
	char *buf = malloc(bufsize), *scratch = malloc(4096);

	(void)unused;
	if (!buf || !scratch)
		die("malloc");
	while (!atomic_load(&stopping)) {
		const struct fuse_in_header *in = (const void *)buf;
		const void *reply;
		ssize_t n = read(devfd, buf, bufsize);
		int rc;

		if (n < 0) {
			if (errno == EINTR || errno == ENOENT || errno == EAGAIN)
				continue;
			if (errno != ENODEV)
				perror("read /dev/fuse");
			break;
		}
		if ((size_t)n < sizeof(*in))
			continue;
		if (in->opcode == FUSE_INIT) {
			do_init(in, (const void *)(in + 1));
			continue;
		}
		atomic_fetch_add(&dev_requests, 1);
		rc = handle(in, (const char *)(in + 1), (size_t)n - sizeof(*in),
			    scratch, &reply);
		if (in->opcode == FUSE_DESTROY)
			atomic_store(&stopping, true);
		if (rc != 1 << 30)
			reply_dev(in->unique, rc, reply);
	}
	atomic_store(&stopping, true);
	free(buf);
	free(scratch);
	return NULL;
}

/* io_uring transport: one queue per possible CPU */
struct ent {
	struct uring_req_header *hdr;
	char *payload;
	char scratch[4096];	/* contiguous arguments / small replies */
	struct iovec iov[2];
};

struct queue {
	unsigned qid;
	struct io_uring ring;
	struct ent ents[DEPTH];
};

static void queue_cmd(struct queue *q, struct ent *e, uint32_t cmd,
		      uint64_t commit_id)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);
	struct uring_cmd_req *req;

	if (!sqe) {
		fprintf(stderr, "fuse_transport: no free SQE\n");
		exit(1);
	}
	memset(sqe, 0, 128);		/* an SQE128 */
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = devfd;
	sqe->cmd_op = cmd;
	if (cmd == URING_CMD_REGISTER) {
		sqe->addr = (uintptr_t)e->iov;
		sqe->len = 2;
	}
	io_uring_sqe_set_data(sqe, e);
	req = (struct uring_cmd_req *)sqe->cmd;
	req->qid = (uint16_t)q->qid;
	req->commit_id = commit_id;
}

/* a request arrived in @e: answer it in place, fetch the next */
static void ring_request(struct queue *q, struct ent *e)
{
	struct fuse_in_header in;
	struct fuse_out_header *out = (void *)e->hdr->in_out;
	uint32_t paylen = e->hdr->ent.payload_sz;
	uint64_t commit = e->hdr->ent.commit_id;
	size_t oplen;
	const char *arg;
	const void *reply;
	int rc;

	atomic_fetch_add(&ring_requests, 1);
	memcpy(&in, e->hdr->in_out, sizeof(in));
	/* in.len counts every argument; the first sized one is in op_in */
	oplen = in.len - sizeof(in) - paylen;
	if (oplen > sizeof(e->hdr->op_in))
		oplen = 0;
	if (!oplen) {
		arg = e->payload;
	} else if (!paylen) {
		arg = e->hdr->op_in;
	} else {
		memcpy(e->scratch, e->hdr->op_in, oplen);
		memcpy(e->scratch + oplen, e->payload,
		       paylen < sizeof(e->scratch) - oplen ? paylen :
		       sizeof(e->scratch) - oplen);
		arg = e->scratch;
	}
	rc = handle(&in, arg, oplen + paylen, e->scratch, &reply);
	if (rc == 1 << 30)
		rc = 0;
	memset(out, 0, sizeof(*out));
	out->unique = in.unique;
	e->hdr->ent.payload_sz = 0;
	if (rc < 0) {
		out->error = rc;
	} else {
		if (rc && reply != e->payload)
			memcpy(e->payload, reply, (size_t)rc);
		e->hdr->ent.payload_sz = (uint32_t)rc;
	}
	out->len = sizeof(*out) + e->hdr->ent.payload_sz;
	queue_cmd(q, e, URING_CMD_COMMIT_AND_FETCH, commit);
}

static void *ring_loop(void *arg)
{
	struct queue *q = arg;
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	cpu_set_t cpus;
	unsigned i;
	int rc;

	CPU_ZERO(&cpus);
	CPU_SET(q->qid, &cpus);
	sched_setaffinity(0, sizeof(cpus), &cpus);
	rc = io_uring_queue_init_params(2 * DEPTH, &q->ring, &p);
	if (rc < 0) {
		fprintf(stderr, "io_uring_queue_init: %s\n", strerror(-rc));
		exit(1);
	}
	for (i = 0; i < DEPTH; i++) {
		struct ent *e = &q->ents[i];

		if (posix_memalign((void **)&e->hdr, 4096, 4096) ||
		    posix_memalign((void **)&e->payload, 4096, MAX_PAYLOAD))
			die("posix_memalign");
		e->iov[0] = (struct iovec){ e->hdr, sizeof(*e->hdr) };
		e->iov[1] = (struct iovec){ e->payload, MAX_PAYLOAD };
		queue_cmd(q, e, URING_CMD_REGISTER, 0);
	}
	while (!atomic_load(&stopping)) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;

		rc = io_uring_submit_and_wait(&q->ring, 1);
		if (rc < 0 && rc != -EINTR) {
			fprintf(stderr, "io_uring_submit_and_wait: %s\n",
				strerror(-rc));
			break;
		}
		io_uring_for_each_cqe(&q->ring, head, cqe) {
			struct ent *e = io_uring_cqe_get_data(cqe);

			seen++;
			if (cqe->res == -EINTR || cqe->res == -EAGAIN) {
				queue_cmd(q, e, URING_CMD_REGISTER, 0);
				continue;
			}
			if (cqe->res < 0) {
				/* -ENOTCONN at unmount, or a refusal */
				if (cqe->res != -ENOTCONN &&
				    cqe->res != -ECANCELED)
					fprintf(stderr, "ring %u: %s\n", q->qid,
						strerror(-cqe->res));
				atomic_store(&stopping, true);
				continue;
			}
			ring_request(q, e);
		}
		io_uring_cq_advance(&q->ring, seen);
	}
	return NULL;
}

static void start_rings(void)
{
	int n = get_nprocs_conf(), i;
	struct queue *qs = calloc((size_t)n, sizeof(*qs));
	pthread_t t;

	if (!qs)
		die("calloc");
	for (i = 0; i < n; i++) {
		qs[i].qid = (unsigned)i;
		if (pthread_create(&t, NULL, ring_loop, &qs[i]))
			die("pthread_create");
		pthread_detach(t);
	}
}

static int serve(const char *mnt, const char *mode, unsigned n)
{
	char opts[256];
	pthread_t t[4];
	int i, nthreads;

	uring_mode = !strcmp(mode, "uring");
	if (!uring_mode && strcmp(mode, "classic")) {
		fprintf(stderr, "fuse_transport: mode is classic or uring\n");
		return 2;
	}
	nfiles = n;
	for (i = 0; i < (int)sizeof(data); i++)
		data[i] = (char)(i * 7 + 1);
	devfd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (devfd < 0)
		die("/dev/fuse");
	snprintf(opts, sizeof(opts),
		 "fd=%d,rootmode=40000,user_id=0,group_id=0,allow_other,default_permissions",
		 devfd);
	if (mount("fuse_transport", mnt, "fuse.fuse_transport",
		  MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOATIME, opts))
		die("mount");
	/* classic: four workers, as a small libfuse loop; uring: one for
	 * INIT, FORGET and INTERRUPT */
	nthreads = uring_mode ? 1 : 4;
	for (i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, dev_loop, NULL))
			die("pthread_create");
	for (i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	fprintf(stderr, "{\"dev_requests\": %lu, \"ring_requests\": %lu}\n",
		atomic_load(&dev_requests), atomic_load(&ring_requests));
	return 0;
}

/* client: open, read and close every file once with @threads threads */
static const char *cmnt;
static atomic_uint cnext;
static atomic_ulong cbad;

static void *client_thread(void *unused)
{
	char path[4096], *buf = malloc(FILE_SIZE + 1);
	unsigned i;

	(void)unused;
	while ((i = atomic_fetch_add(&cnext, 1)) < nfiles) {
		ssize_t got = 0, r;
		int fd;

		snprintf(path, sizeof(path), "%s/" NAME_FMT, cmnt, i);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			atomic_fetch_add(&cbad, 1);
			continue;
		}
		while ((r = read(fd, buf + got, FILE_SIZE + 1 - got)) > 0)
			got += r;
		if (got != FILE_SIZE || memcmp(buf, data, FILE_SIZE))
			atomic_fetch_add(&cbad, 1);
		close(fd);
	}
	free(buf);
	return NULL;
}

static double proc_cpu(const char *pid)
{
	char path[64], line[1024], *p;
	unsigned long ut, st;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%s/stat", pid);
	f = fopen(path, "r");
	if (!f || !fgets(line, sizeof(line), f))
		die(path);
	fclose(f);
	p = strrchr(line, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
			 &ut, &st) != 2)
		die("stat format");
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int client(const char *mnt, unsigned n, int threads, const char *pid)
{
	pthread_t t[64];
	struct timespec a, b;
	double c0, c1, wall;
	int i;

	if (threads < 1 || threads > 64)
		return 2;
	cmnt = mnt;
	nfiles = n;
	for (i = 0; i < (int)sizeof(data); i++)
		data[i] = (char)(i * 7 + 1);
	c0 = proc_cpu(pid);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, client_thread, NULL);
	for (i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	c1 = proc_cpu(pid);
	wall = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	printf("{\"files\": %u, \"bad\": %lu, \"wall_s\": %.6f, \"daemon_cpu_s\": %.3f}\n",
	       n, atomic_load(&cbad), wall, c1 - c0);
	return atomic_load(&cbad) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "serve"))
		return serve(argv[2], argv[3], (unsigned)atoi(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "client"))
		return client(argv[2], (unsigned)atoi(argv[3]), atoi(argv[4]),
			      argv[5]);
	fprintf(stderr, "usage: fuse_transport serve MNT classic|uring NFILES\n"
		"       fuse_transport client MNT NFILES THREADS DAEMON_PID\n");
	return 2;
}
