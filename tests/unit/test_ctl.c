// SPDX-License-Identifier: MIT
/*
 * ctl.c: control inodes (ctl_kind, lookup, readdir, which are writable),
 * paths one a line for pin/unpin/evict (files, directories expanded to
 * their files, unknown paths, CRLF, the root), lists published through a
 * list inode and ctl_commit_list (numbered epochs, begins, stale and
 * queue-full refusals with their errno), warm input, and the texts read back
 * (stats, heat, a list's status), and a buffer grow taken back giving
 * the bytes back to the user's share and the memory budget.  The mount is a real namespace
 * (nsmgr.c) and cache over the in-memory backend; only cache functions
 * ctl.c itself calls are used, and results are read through ctl.
 *
 * ctl.c, nsmgr.c and report.c come from the library (build/libfusefs.a).
 * prefetch_kick() and prefetch_published() are counting fakes defined
 * here, and manifest_open() a fake that no test here reaches: the linker
 * takes a function from the archive only when no object defines it, so
 * prefetch.o and manifest_src.o stay out of this test.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "ctl.h"
#include "epochs.h"
#include "fetch.h"
#include "log.h"
#include "manifest_src.h"
#include "nsmgr.h"
#include "prefetch.h"

#include "backend_mem.h"
#include "runner.h"

static unsigned kicks;

int manifest_open(const struct fusefs_conf *cf, const char *where, int *fd)
{
	return -ENOTSUP;	/* no manifest mounts in these tests */
}

void prefetch_kick(struct prefetcher *p)
{
	kicks++;
}

void prefetch_published(struct prefetcher *p)
{
	kicks++;
}

void prefetch_set_ranges(struct prefetcher *p, struct ranges *rg)
{
}

/* the dataset: 5 files in a small tree */
static const char *const files[] = {
	"a/1", "a/2", "a/b/3", "top", "z/only",
};

struct env {
	char dir[64];
	struct fusefs_conf cf;
	struct stats st;
	struct backend *be;
	struct meta *meta;
	struct cache *cache;
	struct nsmgr *nm;
	struct lists *lists;
	struct fetcher *fetch;
	struct epochs *epochs;	/* the data path's opens: epochs_note_open() */
	struct ctl *ctl;
};

/* what epochs_note_open() kicks: the fakes above count, whatever it is */
static char fake_prefetcher;

static void env_init(struct env *e)
{
	char path[128];
	struct ctl_deps d;
	size_t i;

	memset(e, 0, sizeof(*e));
	strcpy(e->dir, "/tmp/fusefs-unit-XXXXXX");
	CHECK(mkdtemp(e->dir) != NULL);
	conf_init(&e->cf);
	e->cf.source = strdup("mem://unit");
	e->cf.cache_dir = strdup(e->dir);
	e->cf.chunk_size = 1 << 20;
	e->cf.cache_size = 64 << 20;
	e->be = mem_backend_create();
	for (i = 0; i < ARRAY_SIZE(files); i++)
		mem_put(e->be, files[i], files[i], strlen(files[i]));
	snprintf(path, sizeof(path), "%s/index", e->dir);
	CHECK_INT(meta_open(&e->meta, path), ==, 0);
	CHECK_INT(cache_open(&e->cache, &e->cf, e->meta, &e->st), ==, 0);
	CHECK_INT(nsmgr_open(&e->nm, e->be, e->meta, &e->cf, &e->st), ==, 0);
	e->lists = lists_create();
	CHECK_INT(fetch_create(&e->fetch, e->cache, e->be, &e->cf, &e->st),
		  ==, 0);
	CHECK_INT(epochs_create(&e->epochs, e->lists, e->cache, e->fetch,
				(struct prefetcher *)&fake_prefetcher), ==, 0);
	d = (struct ctl_deps){ .st = &e->st, .cache = e->cache, .nm = e->nm,
			       .lists = e->lists, .pf = NULL };
	e->ctl = ctl_create(&d);
	CHECK(e->ctl != NULL);
	kicks = 0;
}

static void env_fini(struct env *e)
{
	char cmd[128];

	ctl_destroy(e->ctl);
	epochs_destroy(e->epochs);
	fetch_destroy(e->fetch);
	lists_destroy(e->lists);
	nsmgr_close(e->nm);
	cache_close(e->cache);
	meta_close(e->meta);
	mem_backend_destroy(e->be);
	conf_release(&e->cf);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", e->dir);
	CHECK_INT(system(cmd), ==, 0);
}

/* ctl_lookup() as one number: the inode, 0 (not ours) or -errno */
static int64_t lookup(struct ctl *c, uint64_t parent, const char *name,
		      bool create)
{
	uint64_t ino = 12345;
	int rc = ctl_lookup(c, parent, name, create, &ino);

	CHECK(rc || ino != 12345);	/* always set on success */
	return rc ? rc : (int64_t)ino;
}

/* the inode of fixed control file @name */
static uint64_t ctl_ino(struct env *e, const char *name)
{
	int64_t dir = lookup(e->ctl, NS_ROOT_INO, CTL_NAME, false);
	int64_t ino = lookup(e->ctl, dir, name, false);

	CHECK_INT(ino, >, 0);
	return ino;
}

static int64_t list_ino(struct env *e, const char *name, bool create)
{
	return lookup(e->ctl, ctl_ino(e, "lists"), name, create);
}

/* the inode of dataset path @path (0 if none) */
static uint64_t file_ino(struct env *e, const char *path)
{
	const struct ns_node *n;
	uint64_t ino;

	n = ns_resolve(nsmgr_rdlock(e->nm), path, strlen(path));
	ino = n ? n->ino : 0;
	nsmgr_unlock(e->nm);
	return ino;
}

/* commit @text to control file @ino: the return code, report in @out */
static int commit(struct env *e, uint64_t ino, const char *text, char *out,
		  size_t len)
{
	char *report = (char *)"junk";
	int rc = ctl_commit(e->ctl, ino, text, strlen(text), &report);

	snprintf(out, len, "%s", report ? report : "(null)");
	free(report);
	return rc;
}

/* ctl_read() of @ino as a string (static buffer) */
static const char *read_text(struct env *e, uint64_t ino)
{
	static char out[8192];
	size_t len = 12345;
	char *text = ctl_read(e->ctl, ino, &len);

	CHECK(text != NULL);
	if (!text)
		return "";
	CHECK_INT(len, ==, strlen(text));
	snprintf(out, sizeof(out), "%s", text);
	free(text);
	return out;
}

/* the value of line "@key " in @text, or -999 */
static long long field(const char *text, const char *key)
{
	size_t kl = strlen(key);
	const char *p = text;

	for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return strtoll(p + kl + 1, NULL, 10);
	return -999;
}

static void test_lookup_and_kind(void)
{
	static const struct {
		const char *name;
		enum ctl_kind kind;
		bool writable;
	} want[] = {
		{ "lists", CTL_LISTS, false }, { "stats", CTL_STATS, false },
		{ "heat", CTL_HEAT, false }, { "pin", CTL_PIN, true },
		{ "unpin", CTL_UNPIN, true }, { "evict", CTL_EVICT, true },
		{ "warm", CTL_WARM, true },
	};
	struct env e;
	int64_t dir, ino, r0;
	size_t i;

	env_init(&e);
	dir = lookup(e.ctl, NS_ROOT_INO, CTL_NAME, false);
	CHECK_INT(dir, >, NS_ROOT_INO);
	CHECK_INT(dir, <, NS_FIRST_INO);
	CHECK_INT(ctl_kind(e.ctl, dir), ==, CTL_DIR);
	CHECK(!ctl_is_writable(e.ctl, dir));
	/* other names in the root are the dataset's */
	CHECK_INT(lookup(e.ctl, NS_ROOT_INO, "a", false), ==, 0);
	CHECK_INT(lookup(e.ctl, NS_ROOT_INO, ".fusefs2", true), ==, 0);
	for (i = 0; i < ARRAY_SIZE(want); i++) {
		ino = lookup(e.ctl, dir, want[i].name, false);
		CHECK_INT(ino, >, dir);
		CHECK_INT(ino, <, NS_FIRST_INO);
		CHECK_INT(ctl_kind(e.ctl, ino), ==, want[i].kind);
		CHECK_INT(ctl_is_writable(e.ctl, ino), ==, want[i].writable);
		/* a control file has no children */
		if (want[i].kind != CTL_LISTS)
			CHECK_INT(lookup(e.ctl, ino, "x", true), ==,
				  -ENOENT);
	}
	CHECK_INT(lookup(e.ctl, dir, "nosuch", true), ==, -ENOENT);
	/* list names get inodes only when asked to create them */
	CHECK_INT(list_ino(&e, "rank0", false), ==, -ENOENT);
	r0 = list_ino(&e, "rank0", true);
	CHECK_INT(r0, >, 0);
	CHECK_INT(r0, <, NS_FIRST_INO);
	CHECK_INT(list_ino(&e, "rank0", false), ==, r0);
	CHECK_INT(list_ino(&e, "rank0", true), ==, r0);
	CHECK_INT(ctl_kind(e.ctl, r0), ==, CTL_LIST);
	CHECK(ctl_is_writable(e.ctl, r0));
	CHECK_INT(ctl_kind(e.ctl, r0 + 1), ==, CTL_NONE);
	CHECK_INT(list_ino(&e, "rank1", true), ==, r0 + 1);
	CHECK_INT(ctl_kind(e.ctl, r0 + 1), ==, CTL_LIST);
	CHECK_INT(list_ino(&e, "", true), ==, -ENOENT);
	CHECK_INT(list_ino(&e, "a/b", true), ==, -ENOENT);
	CHECK_INT(list_ino(&e, "x1234567890123456789012345678901"
			   "234567890123456789012345678901234", true), ==,
		  -ENOENT);
	/* dataset inodes are not control inodes */
	CHECK_INT(ctl_kind(e.ctl, NS_ROOT_INO), ==, CTL_NONE);
	CHECK_INT(ctl_kind(e.ctl, file_ino(&e, "top")), ==, CTL_NONE);
	CHECK_INT(ctl_kind(e.ctl, file_ino(&e, "a")), ==, CTL_NONE);
	CHECK(!ctl_is_writable(e.ctl, file_ino(&e, "top")));
	CHECK_INT(lookup(e.ctl, file_ino(&e, "a"), "1", false), ==, 0);
	env_fini(&e);
}

static void test_readdir(void)
{
	static const char *const names[] = {
		"lists", "stats", "heat", "pin", "unpin", "evict", "warm", "refresh",
	};
	uint64_t dir, lists, ino;
	int64_t r0, r1;
	const char *name = "";
	struct env e;
	size_t i;

	env_init(&e);
	dir = lookup(e.ctl, NS_ROOT_INO, CTL_NAME, false);
	lists = ctl_ino(&e, "lists");
	for (i = 0; i < ARRAY_SIZE(names); i++) {
		CHECK(ctl_readdir(e.ctl, dir, i, &name, &ino));
		CHECK_STR(name, names[i]);
		CHECK_INT(ino, ==, lookup(e.ctl, dir, names[i], false));
	}
	CHECK(!ctl_readdir(e.ctl, dir, ARRAY_SIZE(names), &name, &ino));
	CHECK(!ctl_readdir(e.ctl, lists, 0, &name, &ino));
	r0 = list_ino(&e, "rank0", true);
	r1 = list_ino(&e, "rank1", true);
	CHECK(ctl_readdir(e.ctl, lists, 0, &name, &ino));
	CHECK_STR(name, "rank0");
	CHECK_INT(ino, ==, r0);
	CHECK(ctl_readdir(e.ctl, lists, 1, &name, &ino));
	CHECK_STR(name, "rank1");
	CHECK_INT(ino, ==, r1);
	CHECK(!ctl_readdir(e.ctl, lists, 2, &name, &ino));
	/* neither files nor the dataset are control directories */
	CHECK(!ctl_readdir(e.ctl, ctl_ino(&e, "stats"), 0, &name, &ino));
	CHECK(!ctl_readdir(e.ctl, NS_ROOT_INO, 0, &name, &ino));
	env_fini(&e);
}

/* ctl_commit() of @len bytes (NULs included) */
static int commit_n(struct env *e, uint64_t ino, const char *text,
		    size_t len, char *out, size_t size)
{
	char *report = NULL;
	int rc = ctl_commit(e->ctl, ino, text, len, &report);

	snprintf(out, size, "%s", report ? report : "(null)");
	free(report);
	return rc;
}

/* a text with a NUL byte is NUL-terminated paths: no line splitting, no
 * CR dropped (a name may hold both), the rest as for lines */
static void test_paths_nul(void)
{
	static const char two[] = "a/1\0/a/b/3/\0";
	static const char last[] = "top\0z/only";
	static const char cr[] = "top\r\0";
	static const char nl[] = "a/1\ntop\0";
	char rep[256];
	struct env e;
	uint64_t ino;

	env_init(&e);
	ino = ctl_ino(&e, "unpin");
	CHECK_INT(commit_n(&e, ino, two, sizeof(two) - 1, rep, sizeof(rep)),
		  ==, 0);
	CHECK_STR(rep, "files 2\nunknown 0\n");
	CHECK_INT(commit_n(&e, ino, last, sizeof(last) - 1, rep, sizeof(rep)),
		  ==, 0);
	CHECK_STR(rep, "files 2\nunknown 0\n");
	CHECK_INT(commit_n(&e, ino, cr, sizeof(cr) - 1, rep, sizeof(rep)),
		  ==, -ENOENT);
	CHECK_STR(rep, "files 0\nunknown 1\n");
	CHECK_INT(commit_n(&e, ino, nl, sizeof(nl) - 1, rep, sizeof(rep)),
		  ==, -ENOENT);
	CHECK_STR(rep, "files 0\nunknown 1\n");
	env_fini(&e);
}

static void test_paths(void)
{
	static const char *const verbs[] = { "pin", "unpin", "evict" };
	char rep[256];
	struct env e;
	uint64_t ino;
	size_t v;

	env_init(&e);
	for (v = 0; v < ARRAY_SIZE(verbs); v++) {
		ino = ctl_ino(&e, verbs[v]);
		CHECK_INT(commit(&e, ino, "a/1\n", rep, sizeof(rep)), ==, 0);
		CHECK_STR(rep, "files 1\nunknown 0\n");
		/* a directory is every file below it, however written */
		CHECK_INT(commit(&e, ino, "a\n", rep, sizeof(rep)), ==, 0);
		CHECK_STR(rep, "files 3\nunknown 0\n");
		CHECK_INT(commit(&e, ino, "/a/b/\r\n", rep, sizeof(rep)), ==,
			  0);
		CHECK_STR(rep, "files 1\nunknown 0\n");
		/* unknown paths are counted; some file done is success */
		CHECK_INT(commit(&e, ino, "top\r\nnosuch\na/9\nz/only", rep,
				 sizeof(rep)), ==, 0);
		CHECK_STR(rep, "files 2\nunknown 2\n");
		CHECK_INT(commit(&e, ino, "nosuch\n", rep, sizeof(rep)), ==,
			  -ENOENT);
		CHECK_STR(rep, "files 0\nunknown 1\n");
		CHECK_INT(commit(&e, ino, "", rep, sizeof(rep)), ==, 0);
		CHECK_STR(rep, "files 0\nunknown 0\n");
		/* an empty line is the root (the client writes the mount
		 * itself so): every file; never pinned whole */
		if (v == 0) {
			CHECK_INT(commit(&e, ino, "\n", rep, sizeof(rep)), ==,
				  -EINVAL);
			CHECK_STR(rep, "refused: the whole tree\nfiles 0\nunknown 0\n");
			CHECK_INT(commit(&e, ino, "a/1\n/\n", rep,
					 sizeof(rep)), ==, -EINVAL);
			CHECK_STR(rep, "refused: the whole tree\nfiles 0\nunknown 0\n");
			continue;
		}
		CHECK_INT(commit(&e, ino, "\n", rep, sizeof(rep)), ==, 0);
		CHECK_STR(rep, "files 5\nunknown 0\n");
		CHECK_INT(commit(&e, ino, "/\n", rep, sizeof(rep)), ==, 0);
		CHECK_STR(rep, "files 5\nunknown 0\n");
	}
	CHECK_INT(kicks, ==, 0);
	CHECK_INT(field(read_text(&e, ctl_ino(&e, "stats")),
			"lists_published"), ==, 0);
	env_fini(&e);
}

static void test_commit_elsewhere(void)
{
	static const char *const ro[] = { "stats", "heat", "lists" };
	char rep[64];
	struct env e;
	size_t i;

	env_init(&e);
	for (i = 0; i < ARRAY_SIZE(ro); i++) {
		CHECK_INT(commit(&e, ctl_ino(&e, ro[i]), "a/1\n", rep,
				 sizeof(rep)), ==, -EBADF);
		CHECK_STR(rep, "(null)");
	}
	CHECK_INT(commit(&e, file_ino(&e, "top"), "a/1\n", rep, sizeof(rep)),
		  ==, -EBADF);
	CHECK_INT(commit(&e, lookup(e.ctl, NS_ROOT_INO, CTL_NAME, false),
			 "a/1\n", rep, sizeof(rep)), ==, -EBADF);
	env_fini(&e);
}

static void test_list_publish(void)
{
	char rep[1024];
	const char *t;
	struct env e;
	int64_t r0;

	env_init(&e);
	r0 = list_ino(&e, "rank0", true);
	/* not published yet: the status says so */
	CHECK_STR(read_text(&e, r0), "list rank0: not published\n");
	CHECK_INT(commit(&e, r0, "a/1\r\n/top\na/\nnosuch\na/1\n\n", rep,
			 sizeof(rep)), ==, 0);
	CHECK(strstr(rep, "list rank0: published\nlines 6\naccepted 2\n")
	      == rep);
	CHECK(strstr(rep, "\nrejected_directory 1 (first at line 3)\n"));
	CHECK(strstr(rep, "\nrejected_unknown 1 (first at line 4)\n"));
	CHECK(strstr(rep, "\nrejected_duplicate 1 (first at line 5)\n"));
	CHECK(strstr(rep, "\nrejected_empty 1 (first at line 6)\n"));
	CHECK_INT(kicks, ==, 1);
	t = read_text(&e, r0);
	CHECK(strstr(t, "list rank0\nposition 0\nfiles 2\n") == t);
	CHECK(strstr(t, "# last publish\nlines 6\naccepted 2\n") != NULL);
	t = read_text(&e, ctl_ino(&e, "stats"));
	CHECK_INT(field(t, "lists_published"), ==, 1);
	CHECK(strstr(t, "\nlist_files{list=\"rank0\"} 2\n") != NULL);
	/* no usable line: refused, the published list unchanged */
	CHECK_INT(commit(&e, r0, "nosuch\na\n", rep, sizeof(rep)), ==, -EINVAL);
	CHECK(strstr(rep, "list rank0: NOT published\nlines 2\naccepted 0\n")
	      == rep);
	CHECK_INT(kicks, ==, 1);
	t = read_text(&e, r0);
	CHECK_INT(field(t, "files"), ==, 2);
	CHECK_INT(field(t, "next_epoch_files"), ==, 0);
	CHECK_INT(field(read_text(&e, ctl_ino(&e, "stats")),
			"lists_published"), ==, 1);
	/* published while it runs: queued as the next epoch */
	CHECK_INT(commit(&e, r0, "z/only\n", rep, sizeof(rep)), ==, 0);
	CHECK_INT(field(read_text(&e, r0), "next_epoch_files"), ==, 1);
	/* the reader's opens move the position */
	epochs_note_open(e.epochs, file_ino(&e, "a/1"), true);
	CHECK_INT(kicks, ==, 3);
	t = read_text(&e, r0);
	CHECK_INT(field(t, "position"), ==, 1);
	CHECK(strstr(t, "\nhit_ratio 1.000\n") != NULL);
	env_fini(&e);
}

/* numbered lists and begins through a list inode */
static void test_list_epochs(void)
{
	char rep[2048];
	const char *t;
	struct env e;
	int64_t r1;

	env_init(&e);
	r1 = list_ino(&e, "rank1", true);
	/* a begin alone on a new list: it waits for epoch 4's list */
	CHECK_INT(commit(&e, r1, "# begin 4\n", rep, sizeof(rep)), ==, 0);
	CHECK(strstr(rep, "list rank1: epoch begun\n") == rep);
	CHECK(strstr(rep, "\noutcome begun\ncurrent_epoch -1\n") != NULL);
	CHECK_INT(kicks, ==, 1);
	t = read_text(&e, r1);
	CHECK(strstr(t, "\nstate waiting\nepoch 4\n") != NULL);
	CHECK_INT(field(read_text(&e, ctl_ino(&e, "stats")),
			"lists_published"), ==, 0);
	CHECK_INT(commit(&e, r1, "# epoch 4\na/1\na/2\n", rep, sizeof(rep)),
		  ==, 0);
	CHECK(strstr(rep, "\nheaders 1\nlist_epoch 4\noutcome current\n"));
	CHECK_INT(commit(&e, r1, "# epoch 5\ntop\n", rep, sizeof(rep)), ==, 0);
	CHECK(strstr(rep, "\noutcome queued\ncurrent_epoch 4\n"));
	/* an older epoch: ESTALE for close(), the list unchanged */
	CHECK_INT(commit(&e, r1, "# epoch 3\nz/only\n", rep, sizeof(rep)), ==,
		  -ESTALE);
	CHECK(strstr(rep, "list rank1: NOT published: an epoch older") == rep);
	CHECK(strstr(rep, "\noutcome stale\n") != NULL);
	t = read_text(&e, r1);
	CHECK_INT(field(t, "epoch"), ==, 4);
	CHECK_INT(field(t, "files"), ==, 2);
	CHECK_INT(field(t, "next_epoch"), ==, 5);
	/* a third later epoch does not fit: EBUSY */
	CHECK_INT(commit(&e, r1, "# epoch 6\ntop\n", rep, sizeof(rep)), ==, 0);
	CHECK_INT(commit(&e, r1, "# epoch 7\ntop\n", rep, sizeof(rep)), ==,
		  -EBUSY);
	CHECK(strstr(rep, "NOT published: later epochs already queued") != NULL);
	/* the next epoch begins although 4 was not read to its end */
	epochs_note_open(e.epochs, file_ino(&e, "a/1"), true);
	CHECK_INT(commit(&e, r1, "# begin 5\n", rep, sizeof(rep)), ==, 0);
	t = read_text(&e, r1);
	CHECK_INT(field(t, "epoch"), ==, 5);
	CHECK_INT(field(t, "epochs_done"), ==, 1);
	CHECK_INT(field(t, "position"), ==, 0);
	CHECK_INT(field(t, "files"), ==, 1);
	CHECK(strstr(t, "\nlast_hit_ratio 1.000\n") != NULL);
	env_fini(&e);
}

static void test_commit_list_by_name(void)
{
	const char *name = "";
	char *report = NULL;
	struct env e;
	uint64_t ino;

	env_init(&e);
	CHECK_INT(ctl_commit_list(e.ctl, "loader-7", "a/2\n", 4, &report), ==,
		  0);
	CHECK(report && strstr(report, "list loader-7: published\n") == report);
	free(report);
	report = NULL;
	/* the name now has an inode under lists/ */
	CHECK(ctl_readdir(e.ctl, ctl_ino(&e, "lists"), 0, &name, &ino));
	CHECK_STR(name, "loader-7");
	CHECK_INT(list_ino(&e, "loader-7", false), ==, ino);
	CHECK_INT(field(read_text(&e, ino), "files"), ==, 1);
	/* a name lists.c refuses: -EINVAL, nothing published */
	CHECK_INT(ctl_commit_list(e.ctl, ".hidden", "a/2\n", 4, &report), ==,
		  -EINVAL);
	CHECK(report && strstr(report, "NOT published") != NULL);
	free(report);
	CHECK_INT(field(read_text(&e, ctl_ino(&e, "stats")),
			"lists_published"), ==, 1);
	CHECK_INT(lists_count(e.lists), ==, 1);
	env_fini(&e);
}

static void test_warm(void)
{
	char rep[1024];
	struct env e;
	uint64_t warm;
	int64_t w;

	env_init(&e);
	warm = ctl_ino(&e, "warm");
	/* a heat export: comments skipped, the first column taken */
	CHECK_INT(commit(&e, warm, "# path\tscore\topens\n"
			 "a/b/3\t9.5\t3\t0\t0\t0\n\ntop\r\nnosuch\t1\n", rep,
			 sizeof(rep)), ==, 0);
	/* handed on in the NUL form: its "# nul" line is the first */
	CHECK(strstr(rep, "list warm: published\nlines 4\naccepted 2\n")
	      == rep);
	w = list_ino(&e, "warm", false);
	CHECK_INT(ctl_kind(e.ctl, w), ==, CTL_LIST);
	CHECK_INT(field(read_text(&e, w), "files"), ==, 2);
	CHECK_INT(commit(&e, warm, "# nothing\n\n", rep, sizeof(rep)), ==,
		  -EINVAL);
	env_fini(&e);
}

static void test_read_texts(void)
{
	const char *t;
	struct env e;

	env_init(&e);
	t = read_text(&e, ctl_ino(&e, "stats"));
	CHECK_INT(field(t, "reads"), ==, 0);
	CHECK_INT(field(t, "ns_files"), ==, ARRAY_SIZE(files));
	CHECK_INT(field(t, "ns_dirs"), ==, 4);	/* root, a, a/b, z */
	CHECK_INT(field(t, "cache_bytes_limit"), ==, 64 << 20);
	CHECK_INT(field(t, "cache_files"), ==, 0);
	/* nothing was opened: the heat table is its header */
	CHECK_STR(read_text(&e, ctl_ino(&e, "heat")),
		  "# path\tscore\topens\tlast\tbytes\tcached\n");
	/* no opens, so nothing to re-warm and no list "warm" */
	CHECK_INT(ctl_rewarm(e.ctl, 10), ==, 0);
	CHECK_INT(list_ino(&e, "warm", false), ==, -ENOENT);
	/* write-only files and directories read as empty */
	CHECK_STR(read_text(&e, ctl_ino(&e, "pin")), "");
	CHECK_STR(read_text(&e, ctl_ino(&e, "lists")), "");
	env_fini(&e);
}

/* an unprivileged user: reads, own lists within quotas, nothing shared */
static void test_access(void)
{
	const struct ctl_who u = { .uid = 1000 }, v = { .uid = 1001 };
	uint64_t lists, ino, mine = 0;
	char name[16], *report;
	unsigned i;
	struct env e;

	env_init(&e);
	lists = ctl_ino(&e, "lists");
	CHECK_INT(ctl_access(e.ctl, ctl_ino(&e, "stats"), &u, false), ==, 0);
	CHECK_INT(ctl_access(e.ctl, ctl_ino(&e, "heat"), &u, false), ==,
		  -EACCES);
	CHECK_INT(ctl_access(e.ctl, ctl_ino(&e, "heat"), &CTL_OWNER, false),
		  ==, 0);
	CHECK_INT(ctl_access(e.ctl, ctl_ino(&e, "pin"), &u, true), ==,
		  -EACCES);
	CHECK_INT(ctl_commit_as(e.ctl, ctl_ino(&e, "evict"), &u, "a/1\n", 4,
				&report), ==, -EACCES);
	/* list names: --user-lists (8 by default) each */
	for (i = 0; i < 8; i++) {
		snprintf(name, sizeof(name), "u%u", i);
		CHECK_INT(ctl_create_list(e.ctl, lists, name, &u, &ino), ==, 0);
		CHECK_INT(ctl_owner(e.ctl, ino), ==, 1000);
		mine = mine ? mine : ino;
	}
	CHECK_INT(ctl_create_list(e.ctl, lists, "u8", &u, &ino), ==, -EDQUOT);
	CHECK_INT(ctl_create_list(e.ctl, lists, "v0", &v, &ino), ==, 0);
	/* the owner publishes; another user may not, even by creating */
	CHECK_INT(ctl_commit_as(e.ctl, mine, &u, "a/1\n", 4, &report), ==, 0);
	free(report);
	CHECK_INT(ctl_access(e.ctl, mine, &v, true), ==, -EACCES);
	CHECK_INT(ctl_access(e.ctl, mine, &v, false), ==, 0);
	CHECK_INT(ctl_create_list(e.ctl, lists, "u0", &v, &ino), ==, -EACCES);
	CHECK_INT(ctl_commit_as(e.ctl, mine, &v, "a/2\n", 4, &report), ==,
		  -EACCES);
	/* privileged callers may replace it */
	CHECK_INT(ctl_commit_as(e.ctl, mine, &CTL_OWNER, "a/2\n", 4, &report),
		  ==, 0);
	free(report);
	/* open control files: --user-buffers (16) each */
	for (i = 0; i < 16; i++)
		CHECK_INT(ctl_buffer_open(e.ctl, &u), ==, 0);
	CHECK_INT(ctl_buffer_open(e.ctl, &u), ==, -EMFILE);
	CHECK_INT(ctl_buffer_open(e.ctl, &v), ==, 0);
	/* bytes: memory-limit / 16 (16 MiB by default) each */
	CHECK_INT(ctl_buffer_grow(e.ctl, &u, 16 << 20, false), ==, 0);
	CHECK_INT(ctl_buffer_grow(e.ctl, &u, 1, false), ==, -EDQUOT);
	CHECK_INT(ctl_buffer_grow(e.ctl, &v, 1, false), ==, 0);
	ctl_buffer_close(e.ctl, &u, 16 << 20);
	for (i = 1; i < 16; i++)
		ctl_buffer_close(e.ctl, &u, 0);
	ctl_buffer_close(e.ctl, &v, 1);
	CHECK_INT(ctl_buffer_open(e.ctl, &u), ==, 0);
	CHECK_INT(ctl_buffer_grow(e.ctl, &u, 1 << 20, false), ==, 0);
	ctl_buffer_close(e.ctl, &u, 1 << 20);
	env_fini(&e);
}

/* a grow taken back (its allocation failed) gives the bytes back to the
 * user's share and to the memory budget */
static void test_buffer_shrink(void)
{
	const struct ctl_who u = { .uid = 1000 };
	struct membudget_usage mu;
	struct membudget *mb;
	struct ctl_deps d = { 0 };
	struct ctl *c;

	CHECK_INT(membudget_create(&mb, 64 << 20), ==, 0);
	d.mem = mb;
	c = ctl_create(&d);
	CHECK(c != NULL);
	CHECK_INT(ctl_buffer_open(c, &u), ==, 0);
	CHECK_INT(ctl_buffer_grow(c, &u, 1 << 20, false), ==, 0);
	CHECK_INT(ctl_buffer_grow(c, &CTL_OWNER, 1 << 20, false), ==, 0);
	membudget_usage(mb, &mu);
	CHECK_INT(mu.by_class[MB_CTL], ==, 2 << 20);
	ctl_buffer_shrink(c, &u, 1 << 20);
	ctl_buffer_shrink(c, &CTL_OWNER, 1 << 20);
	membudget_usage(mb, &mu);
	CHECK_INT(mu.by_class[MB_CTL], ==, 0);
	/* the whole share is the user's again: 256 MiB / 16 */
	CHECK_INT(ctl_buffer_grow(c, &u, 16 << 20, false), ==, 0);
	ctl_buffer_close(c, &u, 16 << 20);
	membudget_usage(mb, &mu);
	CHECK_INT(mu.by_class[MB_CTL], ==, 0);
	ctl_destroy(c);
	membudget_destroy(mb);
}

int main(void)
{
	runner_name = "test_ctl";
	log_level = LOG_ERR;
	TEST(test_lookup_and_kind);
	TEST(test_readdir);
	TEST(test_paths);
	TEST(test_paths_nul);
	TEST(test_commit_elsewhere);
	TEST(test_list_publish);
	TEST(test_list_epochs);
	TEST(test_commit_list_by_name);
	TEST(test_warm);
	TEST(test_read_texts);
	TEST(test_access);
	TEST(test_buffer_shrink);
	return runner_done();
}
