// SPDX-License-Identifier: MIT
/* the namespace: trees built by ns_build.c, their image served by ns.c */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "hash.h"
#include "log.h"
#include "ns.h"
#include "ns_build.h"
#include "ns_image.h"
#include "runner.h"

#define TOKEN	0x1234567ULL

static struct ns_attr attr(uint64_t size)
{
	struct ns_attr a = { .size = size, .mtime = 1700000000, .checked = 500 };

	strcpy(a.version, "7");
	return a;
}

/* the tree of @b, laid out in memory */
static struct ns *finish(struct ns_build *b)
{
	struct ns *ns = NULL;

	CHECK_INT(ns_build_finish(b, NULL, TOKEN, &ns), ==, 0);
	return ns;
}

static void test_tree(void)
{
	struct ns_build *b = ns_build_create(42);
	struct ns_attr a = attr(10), got;
	const struct ns_node *d, *f, *root;
	struct ns *ns;

	CHECK_INT(ns_build_add(b, "a/b/c", 5, "", &a), ==, 0);
	CHECK_INT(ns_build_add(b, "a/d", 3, "", &a), ==, 0);
	CHECK_INT(ns_build_add(b, "e/", 2, "", &a), ==, 0);	/* empty dir marker */
	CHECK_INT(ns_build_add(b, "a//x", 4, "", &a), ==, PM_BAD_EMPTY);
	ns = finish(b);
	CHECK(!ns_mapped(ns));
	root = ns_get(ns, NS_ROOT_INO);
	CHECK(root && root->is_dir);
	CHECK_INT(ns_nkids(root), ==, 2);
	CHECK(ns_parent(ns, root) == root);
	CHECK_STR(ns_path(ns, root), "");
	d = ns_lookup(ns, NS_ROOT_INO, "a");
	CHECK(d && d->is_dir);
	CHECK_INT(ns_nkids(d), ==, 2);
	CHECK_STR(ns_name(ns, ns_kid(ns, d, 0)), "b");
	CHECK_STR(ns_name(ns, ns_kid(ns, d, 1)), "d");
	CHECK(ns_kid(ns, d, 2) == NULL);
	f = ns_lookup(ns, d->ino, "d");
	CHECK(f && !f->is_dir);
	CHECK_STR(ns_key(ns, f), "a/d");
	CHECK_STR(ns_path(ns, f), "a/d");
	CHECK_STR(ns_name(ns, f), "d");
	CHECK(ns_parent(ns, f) == d);
	CHECK_INT(f->ino, ==, ns_file_ino(ns, "a/d", 3));
	ns_attr_get(ns, f, &got);
	CHECK_INT(got.size, ==, 10);
	CHECK_INT(got.mtime, ==, 1700000000);
	CHECK_INT(got.checked, ==, 500);
	CHECK_STR(got.version, "7");
	CHECK(ns_resolve(ns, "a/b/c", 5) != NULL);
	CHECK(ns_resolve(ns, "a/b", 3) && ns_resolve(ns, "a/b", 3)->is_dir);
	CHECK(ns_resolve(ns, "a/b/x", 5) == NULL);
	CHECK(ns_lookup(ns, NS_ROOT_INO, "e") != NULL);
	CHECK(ns_lookup(ns, NS_ROOT_INO, "zz") == NULL);
	CHECK(ns_lookup(ns, f->ino, "x") == NULL);	/* not a directory */
	CHECK_INT(ns_stats(ns)->files, ==, 2);
	CHECK_INT(ns_stats(ns)->dirs, ==, 4);
	CHECK_INT(ns_stats(ns)->skipped[PM_BAD_EMPTY], ==, 1);
	ns_destroy(ns);
}

static void test_prefix_and_paths(void)
{
	struct ns_build *b = ns_build_create(3);
	struct ns_attr a = attr(1);
	const struct ns_node *f;
	struct ns *ns;

	CHECK_INT(ns_build_add(b, "pre/x/y", 7, "pre", &a), ==, 0);
	CHECK_INT(ns_build_add(b, "other", 5, "pre", &a), ==, PM_OUTSIDE);
	ns = finish(b);
	f = ns_resolve(ns, "x/y", 3);
	CHECK(f != NULL);
	if (f) {
		CHECK_STR(ns_key(ns, f), "pre/x/y");
		CHECK_STR(ns_path(ns, f), "x/y");
		CHECK_STR(ns_name(ns, f), "y");
	}
	ns_destroy(ns);
}

static void test_file_dir_conflict(void)
{
	struct ns_build *b = ns_build_create(1);
	struct ns_attr a = attr(1);
	const struct ns_node *n;
	struct ns *ns;

	/* "a" is both an object and a directory prefix: the dir wins */
	CHECK_INT(ns_build_add(b, "a", 1, "", &a), ==, 0);
	CHECK_INT(ns_build_add(b, "a/b", 3, "", &a), ==, 0);
	ns = finish(b);
	n = ns_lookup(ns, NS_ROOT_INO, "a");
	CHECK(n && n->is_dir);
	CHECK_INT(ns_nkids(ns_get(ns, NS_ROOT_INO)), ==, 1);
	CHECK_INT(ns_stats(ns)->shadowed, ==, 1);
	CHECK_INT(ns_stats(ns)->files, ==, 1);
	CHECK(ns_get(ns, ns_file_ino(ns, "a", 1)) == NULL);
	ns_destroy(ns);
}

/* objects under the control directory's name at the top are shadowed */
static void test_ctl_name_shadowed(void)
{
	struct ns_build *b = ns_build_create(1);
	struct ns_attr a = attr(1);
	struct ns *ns;

	CHECK_INT(ns_build_add(b, ".fusefs", 7, "", &a), ==, NS_BUILD_SHADOWED);
	CHECK_INT(ns_build_add(b, ".fusefs/x", 9, "", &a), ==, NS_BUILD_SHADOWED);
	CHECK_INT(ns_build_add(b, "pre/.fusefs/", 12, "pre", &a), ==,
		  NS_BUILD_SHADOWED);
	CHECK_INT(ns_build_add(b, ".fusefsx", 8, "", &a), ==, 0);
	CHECK_INT(ns_build_add(b, "d/.fusefs", 9, "", &a), ==, 0);
	ns = finish(b);
	CHECK(ns_lookup(ns, NS_ROOT_INO, ".fusefs") == NULL);
	CHECK(ns_resolve(ns, ".fusefsx", 8) != NULL);
	CHECK(ns_resolve(ns, "d/.fusefs", 9) != NULL);
	CHECK_INT(ns_stats(ns)->shadowed, ==, 3);
	CHECK_INT(ns_stats(ns)->files, ==, 2);
	CHECK_INT(ns_stats(ns)->bytes, ==, 2);
	ns_destroy(ns);
}

/* a second object of one path: the first one added is served */
static void test_duplicate_path(void)
{
	struct ns_build *b = ns_build_create(1);
	struct ns_attr a = attr(1), got;
	const struct ns_node *n;
	struct ns *ns;

	CHECK_INT(ns_build_add(b, "d/x", 3, "", &a), ==, 0);
	CHECK_INT(ns_build_add(b, "d/y", 3, "", &a), ==, 0);
	a.size = 2;
	CHECK_INT(ns_build_add(b, "d/x", 3, "", &a), ==, 0);
	CHECK_INT(ns_build_add(b, "d/w", 3, "", &a), ==, 0);
	ns = finish(b);
	n = ns_resolve(ns, "d/x", 3);
	CHECK(n != NULL);
	if (n) {
		ns_attr_get(ns, n, &got);
		CHECK_INT(got.size, ==, 1);
	}
	CHECK_INT(ns_nkids(ns_resolve(ns, "d", 1)), ==, 3);
	CHECK_INT(ns_stats(ns)->files, ==, 3);
	CHECK_INT(ns_stats(ns)->bytes, ==, 4);
	CHECK_INT(ns_stats(ns)->collisions, ==, 1);
	CHECK_INT(ns_stats(ns)->shadowed, ==, 0);
	ns_destroy(ns);
}

static void test_stable_inodes(void)
{
	CHECK_INT(ns_ino(5, false, "p/q", 3), ==, ns_ino(5, false, "p/q", 3));
	CHECK_INT(ns_ino(5, false, "p/q", 3), !=, ns_ino(6, false, "p/q", 3));
	CHECK_INT(ns_ino(5, false, "p/q", 3), !=, ns_ino(5, true, "p/q", 3));
	CHECK(ns_ino(5, false, "p/q", 3) >= NS_FIRST_INO);
}

static int count_file(void *arg, const struct ns_node *n)
{
	(*(long *)arg)++;
	return 0;
}

/* every directory's children are consecutive, sorted, and know it */
static int check_dir(void *arg, const struct ns_node *d)
{
	const struct ns *ns = arg;
	uint64_t i;

	for (i = 0; i < ns_nkids(d); i++) {
		const struct ns_node *k = ns_kid(ns, d, i);

		if (!k || ns_parent(ns, k) != d ||
		    (i && strcmp(ns_name(ns, ns_kid(ns, d, i - 1)),
				 ns_name(ns, k)) >= 0) ||
		    ns_lookup(ns, d->ino, ns_name(ns, k)) != k)
			return -1;
	}
	return 0;
}

static void test_many(void)
{
	struct ns_build *b = ns_build_create(9);
	struct ns_attr a = attr(3);
	struct ns *ns;
	char name[64];
	long files = 0;
	int i, bad = 0;

	for (i = 0; i < 100000; i++) {
		int n = snprintf(name, sizeof(name), "d%d/f%06d", i % 10,
				 (i * 7919) % 100000);

		bad += ns_build_add(b, name, n, "", &a) != 0;
	}
	ns = finish(b);
	CHECK_INT(bad, ==, 0);
	CHECK_INT(ns_stats(ns)->files, ==, 100000);
	CHECK_INT(ns_stats(ns)->dirs, ==, 11);
	CHECK(ns_lookup(ns, ns_lookup(ns, NS_ROOT_INO, "d3")->ino,
			"f099997") != NULL);
	CHECK_INT(ns_foreach(ns, true, check_dir, ns), ==, 0);
	CHECK_INT(ns_foreach(ns, false, count_file, &files), ==, 0);
	CHECK_INT(files, ==, 100000);
	ns_destroy(ns);
}

/*
 * ns_lookup(): names that exist only elsewhere in the tree, one level
 * down or under a file are not found; paths of over 1 KiB are.
 */
static void test_lookup_paths(void)
{
	struct ns_build *b = ns_build_create(5);
	struct ns_attr a = attr(1);
	const struct ns_node *d1, *d2, *deep;
	char key[1200], *p;
	struct ns *ns;
	size_t len;

	CHECK_INT(ns_build_add(b, "d1/f", 4, "", &a), ==, 0);
	CHECK_INT(ns_build_add(b, "d1/sub/g", 8, "", &a), ==, 0);
	CHECK_INT(ns_build_add(b, "d2/h", 4, "", &a), ==, 0);
	/* a directory of 1,010 bytes of path, its children across 1 KiB */
	memset(key, 'x', 1010);
	key[1010] = 0;
	for (p = key + 100; p < key + 1010; p += 100)
		*p = '/';
	memcpy(key + 1010, "/short", 7);
	CHECK_INT(ns_build_add(b, key, strlen(key), "", &a), ==, 0);
	memset(key + 1010, 'y', 100);
	key[1010] = '/';
	key[1110] = 0;
	len = strlen(key);
	CHECK_INT(ns_build_add(b, key, len, "", &a), ==, 0);
	ns = finish(b);
	d1 = ns_lookup(ns, NS_ROOT_INO, "d1");
	d2 = ns_lookup(ns, NS_ROOT_INO, "d2");
	CHECK(d1 && d2 && d1->is_dir && d2->is_dir);
	CHECK(ns_lookup(ns, d1->ino, "f") && !ns_lookup(ns, d1->ino, "f")->is_dir);
	CHECK(ns_lookup(ns, d1->ino, "sub") && ns_lookup(ns, d1->ino, "sub")->is_dir);
	CHECK(ns_lookup(ns, d2->ino, "f") == NULL);	/* only in d1 */
	CHECK(ns_lookup(ns, d2->ino, "sub") == NULL);
	CHECK(ns_lookup(ns, d1->ino, "h") == NULL);
	CHECK(ns_lookup(ns, d1->ino, "g") == NULL);	/* one level down */
	CHECK(ns_lookup(ns, NS_ROOT_INO, "f") == NULL);
	CHECK(ns_lookup(ns, ns_lookup(ns, d1->ino, "f")->ino, "x") == NULL);
	key[1010] = 0;			/* the deepest directory */
	deep = ns_resolve(ns, key, 1010);
	CHECK(deep && deep->is_dir);
	if (deep) {
		CHECK(ns_lookup(ns, deep->ino, "short") != NULL);
		CHECK(ns_lookup(ns, deep->ino, key + 1011) != NULL);
		CHECK(ns_lookup(ns, deep->ino, "nothing") == NULL);
	}
	CHECK_INT(ns_foreach(ns, true, check_dir, ns), ==, 0);
	ns_destroy(ns);
}

/* ---- the image in a file ---- */

static char dir[] = "/tmp/test_ns.XXXXXX";
static char path[64];

static struct ns_build *sample(void)
{
	struct ns_build *b = ns_build_create(77);
	struct ns_attr a = attr(0);
	char name[64];
	int i;

	for (i = 0; i < 2000; i++) {
		int n = snprintf(name, sizeof(name), "s%d/t%d/file-%d.bin",
				 i % 7, i % 3, i);

		a.size = i;
		snprintf(a.version, sizeof(a.version), "v%d", i);
		CHECK_INT(ns_build_add(b, name, n, "", &a), ==, 0);
	}
	return b;
}

static void cleanup(void)
{
	if (path[0])
		unlink(path);
	rmdir(dir);
	strcpy(dir, "/tmp/test_ns.XXXXXX");
	path[0] = '\0';
}

static void write_sample(void)
{
	struct ns *ns = NULL;

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/ns.img", dir);
	CHECK_INT(ns_build_finish(sample(), path, TOKEN, &ns), ==, 0);
	CHECK(ns && ns_mapped(ns));
	ns_destroy(ns);
}

static void test_image_roundtrip(void)
{
	struct ns *ns = NULL, *mem = NULL;
	const struct ns_node *f, *g;
	struct ns_attr x, y;
	char name[64];
	int i;

	write_sample();
	CHECK_INT(ns_open(path, 77, TOKEN, &ns), ==, 0);
	CHECK_INT(ns_build_finish(sample(), NULL, TOKEN, &mem), ==, 0);
	if (!ns || !mem)
		return;
	CHECK(ns_mapped(ns));
	CHECK(!memcmp(ns_stats(ns), ns_stats(mem), sizeof(struct ns_stats)));
	for (i = 0; i < 2000; i++) {
		int n = snprintf(name, sizeof(name), "s%d/t%d/file-%d.bin",
				 i % 7, i % 3, i);

		f = ns_resolve(ns, name, n);
		g = ns_resolve(mem, name, n);
		CHECK(f && g && f->ino == g->ino);
		if (!f || !g)
			continue;
		ns_attr_get(ns, f, &x);
		ns_attr_get(mem, g, &y);
		CHECK_INT(x.size, ==, (uint64_t)i);
		CHECK(!memcmp(&x, &y, sizeof(x)));
		CHECK_STR(ns_key(ns, f), name);
	}
	CHECK_INT(ns_foreach(ns, true, check_dir, ns), ==, 0);
	ns_destroy(ns);
	ns_destroy(mem);
	cleanup();
}

static void test_image_token(void)
{
	struct ns *ns = NULL;
	char missing[80];

	write_sample();
	CHECK_INT(ns_open(path, 77, TOKEN + 1, &ns), ==, -ESTALE);
	CHECK_INT(ns_open(path, 78, TOKEN, &ns), ==, -ESTALE);
	snprintf(missing, sizeof(missing), "%s/none.img", dir);
	CHECK_INT(ns_open(missing, 77, TOKEN, &ns), ==, -ENOENT);
	CHECK(ns == NULL);
	cleanup();
}

/* the image with byte @at xor'ed (or cut to @at bytes if @cut) */
static void damage(off_t at, bool cut)
{
	int fd = open(path, O_RDWR);
	unsigned char c = 0;

	CHECK(fd >= 0);
	if (cut) {
		CHECK_INT(ftruncate(fd, at), ==, 0);
	} else {
		CHECK_INT(pread(fd, &c, 1, at), ==, 1);
		c ^= 0x20;
		CHECK_INT(pwrite(fd, &c, 1, at), ==, 1);
	}
	close(fd);
}

static void test_image_damage(void)
{
	off_t at[] = { 3, 40, NSIMG_HDR_SIZE + 9, -1 /* last byte */ };
	struct ns *ns = NULL;
	struct stat sb;
	size_t i;

	for (i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
		write_sample();
		CHECK_INT(stat(path, &sb), ==, 0);
		damage(at[i] < 0 ? sb.st_size + at[i] : at[i], false);
		CHECK_INT(ns_open(path, 77, TOKEN, &ns), ==, -EINVAL);
		cleanup();
	}
	write_sample();
	CHECK_INT(stat(path, &sb), ==, 0);
	damage(sb.st_size - 1, true);
	CHECK_INT(ns_open(path, 77, TOKEN, &ns), ==, -EINVAL);
	damage(100, true);
	CHECK_INT(ns_open(path, 77, TOKEN, &ns), ==, -EINVAL);
	CHECK(ns == NULL);
	cleanup();
}

/* a header whose own sum is right but whose sizes lie is refused */
/* the sample image's header, for a test to change (its sums follow) */
static void read_header(struct nsimg_hdr *h)
{
	int fd;

	write_sample();
	fd = open(path, O_RDONLY);
	CHECK(fd >= 0);
	CHECK_INT(pread(fd, h, sizeof(*h), 0), ==, sizeof(*h));
	close(fd);
}

/* write @h back with its own sum right, as anyone who can write the
 * cache directory could; ns_open()'s answer */
static int open_with_header(struct nsimg_hdr *h, struct ns **ns)
{
	int fd = open(path, O_RDWR);

	CHECK(fd >= 0);
	h->hdr_sum = nsimg_hdr_sum(h);
	CHECK_INT(pwrite(fd, h, sizeof(*h), 0), ==, sizeof(*h));
	close(fd);
	return ns_open(path, 77, TOKEN, ns);
}

static void test_image_lying_header(void)
{
	struct nsimg_hdr h;
	struct ns *ns = NULL;

	read_header(&h);
	h.nrec *= 1000;
	CHECK_INT(open_with_header(&h, &ns), ==, -EINVAL);
	cleanup();
}

/* an image whose sums are right but whose root is its own child: a walk
 * of the tree still ends (ns_kid() refuses children before their dir) */
static void test_image_cycle(void)
{
	struct nsimg_hdr h;
	struct ns_node root;
	struct ns *ns = NULL;
	struct stat sb;
	uint8_t *body;
	int fd;

	write_sample();
	fd = open(path, O_RDWR);
	CHECK(fd >= 0 && fstat(fd, &sb) == 0);
	CHECK_INT(pread(fd, &h, sizeof(h), 0), ==, sizeof(h));
	CHECK_INT(pread(fd, &root, sizeof(root), h.rec_off), ==, sizeof(root));
	root.u.d.first = 0;
	CHECK_INT(pwrite(fd, &root, sizeof(root), h.rec_off), ==, sizeof(root));
	body = malloc(sb.st_size - NSIMG_HDR_SIZE);
	CHECK_INT(pread(fd, body, sb.st_size - NSIMG_HDR_SIZE, NSIMG_HDR_SIZE),
		  ==, sb.st_size - NSIMG_HDR_SIZE);
	h.body_sum = hash64(body, sb.st_size - NSIMG_HDR_SIZE, 0);
	h.hdr_sum = nsimg_hdr_sum(&h);
	CHECK_INT(pwrite(fd, &h, sizeof(h), 0), ==, sizeof(h));
	free(body);
	close(fd);
	CHECK_INT(ns_open(path, 77, TOKEN, &ns), ==, 0);
	if (ns) {
		const struct ns_node *r = ns_get(ns, NS_ROOT_INO);

		CHECK(r && ns_nkids(r) == 7);
		CHECK(ns_kid(ns, r, 0) == NULL);
		CHECK(ns_lookup(ns, NS_ROOT_INO, "s1") == NULL);
		ns_destroy(ns);
	}
	cleanup();
}

/* a header whose own sum is right and whose string area "ends" at the
 * file's end only by wrapping around 2^64: its records and slots would
 * lie past the end of the mapping */
static void test_image_wrapping_strings(void)
{
	struct nsimg_hdr h;
	struct ns *ns = NULL;

	read_header(&h);
	h.nrec = 100000;
	h.nslot = 131072;
	h.slot_off = h.rec_off + h.nrec * sizeof(struct ns_node);
	h.str_off = h.slot_off + h.nslot * sizeof(uint32_t);
	h.str_len = h.total - h.str_off;	/* wraps: str_off > total */
	CHECK(h.str_off > h.total);
	CHECK_INT(open_with_header(&h, &ns), ==, -EINVAL);
	if (ns) {
		/* records past the mapping: this faults */
		CHECK(ns_get(ns, 0x123456789ULL) == NULL);
		ns_destroy(ns);
	}
	cleanup();
}

/* a full inode table whose header says probes never end: a lookup of an
 * inode that is not there must still end */
static void test_image_endless_probe(void)
{
	size_t len = NSIMG_HDR_SIZE + 2 * sizeof(struct ns_node) +
		     2 * sizeof(uint32_t) + 8;
	uint8_t *base = mmap(NULL, len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct nsimg_hdr *h = (struct nsimg_hdr *)base;
	struct ns_node *rec;
	uint32_t *slot;
	struct ns *ns = NULL;
	int rc;

	CHECK(base != MAP_FAILED);
	if (base == MAP_FAILED)
		return;
	nsimg_layout(h, 2, 2, 8);
	h->seed = 77;
	h->token = TOKEN;
	h->probe_max = UINT32_MAX;
	rec = (struct ns_node *)(base + h->rec_off);
	rec[0].ino = NS_ROOT_INO;
	rec[0].is_dir = 1;
	rec[0].u.d.first = 1;
	rec[0].u.d.nkids = 1;
	rec[1].ino = 0x10001;
	rec[1].name_at = 0;
	slot = (uint32_t *)(base + h->slot_off);
	slot[0] = 1;
	slot[1] = 2;		/* full: no empty slot ends a probe */
	h->body_sum = hash64(base + NSIMG_HDR_SIZE, len - NSIMG_HDR_SIZE, 0);
	h->hdr_sum = nsimg_hdr_sum(h);
	rc = ns_from_memory(base, len, false, &ns);
	CHECK_INT(rc, ==, -EINVAL);
	if (!rc) {
		alarm(3);	/* an endless probe dies of SIGALRM */
		CHECK(ns_get(ns, 0x123456789ULL) == NULL);
		ns_destroy(ns);		/* unmaps base */
	} else {
		munmap(base, len);
	}
}

static void test_attr_overlay(void)
{
	struct ns *ns = NULL;
	const struct ns_node *f, *g;
	struct ns_attr a, got;

	write_sample();
	CHECK_INT(ns_open(path, 77, TOKEN, &ns), ==, 0);
	if (!ns)
		return;
	f = ns_resolve(ns, "s1/t1/file-1.bin", 16);
	g = ns_resolve(ns, "s2/t2/file-2.bin", 16);
	CHECK(f && g);
	if (!f || !g)
		return;
	/* vouched for again: only the time moves */
	ns_attr_get(ns, f, &a);
	CHECK_INT(a.checked, ==, 500);
	a.checked = 9000;
	CHECK_INT(ns_attr_set(ns, f, &a), ==, 0);
	ns_attr_get(ns, f, &got);
	CHECK_INT(got.checked, ==, 9000);
	CHECK_STR(got.version, "v1");
	/* another version */
	ns_attr_get(ns, g, &a);
	strcpy(a.version, "new");
	a.size = 123456;
	a.checked = 9100;
	CHECK_INT(ns_attr_set(ns, g, &a), ==, 0);
	ns_attr_get(ns, g, &got);
	CHECK_STR(got.version, "new");
	CHECK_INT(got.size, ==, 123456);
	CHECK_INT(got.checked, ==, 9100);
	/* and a later re-check of it that finds the same */
	a.checked = 9200;
	CHECK_INT(ns_attr_set(ns, g, &a), ==, 0);
	ns_attr_get(ns, g, &got);
	CHECK_STR(got.version, "new");
	CHECK_INT(got.checked, ==, 9200);
	/* the file itself is untouched: the next open serves the image */
	ns_destroy(ns);
	CHECK_INT(ns_open(path, 77, TOKEN, &ns), ==, 0);
	if (!ns)
		return;
	ns_attr_get(ns, ns_resolve(ns, "s2/t2/file-2.bin", 16), &got);
	CHECK_STR(got.version, "v2");
	ns_destroy(ns);
	cleanup();
}

/* a cache directory that cannot take the file: served from memory */
static void test_image_unwritable(void)
{
	struct ns *ns = NULL;

	CHECK_INT(ns_build_finish(sample(), "/nonexistent-dir/ns.img", TOKEN,
				  &ns), ==, 0);
	CHECK(ns && !ns_mapped(ns));
	if (ns)
		CHECK(ns_resolve(ns, "s0/t0/file-0.bin", 16) != NULL);
	ns_destroy(ns);
}

int main(void)
{
	runner_name = "test_ns";
	log_level = LOG_ERR;
	TEST(test_tree);
	TEST(test_prefix_and_paths);
	TEST(test_file_dir_conflict);
	TEST(test_duplicate_path);
	TEST(test_ctl_name_shadowed);
	TEST(test_stable_inodes);
	TEST(test_many);
	TEST(test_lookup_paths);
	TEST(test_image_roundtrip);
	TEST(test_image_token);
	TEST(test_image_damage);
	TEST(test_image_lying_header);
	TEST(test_image_cycle);
	TEST(test_image_wrapping_strings);
	TEST(test_image_endless_probe);
	TEST(test_attr_overlay);
	TEST(test_image_unwritable);
	return runner_done();
}
