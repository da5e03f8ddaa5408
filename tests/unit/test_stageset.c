// SPDX-License-Identifier: MIT
/*
 * stageset.c: chunks staged in memory, keyed by (file, generation,
 * chunk).  What a get, a look and a put do (references, bytes, the
 * "never read" count), replacement, holds that drops pass by, and
 * dropping by file or by a keep() predicate over many files.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chunkbuf.h"
#include "stageset.h"
#include "runner.h"

/* a buffer of @size bytes whose first byte is @tag; the caller's ref */
static struct chunkbuf *buf(uint32_t size, char tag)
{
	struct chunkbuf *cb = chunkbuf_new(size);

	CHECK(cb != NULL);
	cb->data[0] = tag;
	cb->len = size;
	return cb;
}

/* put a fresh buffer and drop the caller's reference: the set's is left */
static struct chunkbuf *put(struct stageset *s, uint64_t fid, uint64_t gen,
			    uint32_t n, uint32_t size)
{
	struct chunkbuf *cb = buf(size, (char)('a' + n));

	CHECK_INT(stageset_put(s, fid, gen, n, cb), ==, 0);
	chunkbuf_put(cb);
	return cb;
}

static void test_put_get_has(void)
{
	struct stageset s;
	struct chunkbuf *cb = buf(1 << 20, 'x');

	stageset_init(&s);
	CHECK(stageset_get(&s, 1, 0, 0) == NULL);
	CHECK(!stageset_has(&s, 1, 0, 0));
	CHECK_INT(stageset_put(&s, 1, 0, 3, cb), ==, 0);
	CHECK_INT(chunkbuf_refs(cb), ==, 2);	/* the set took one */
	CHECK_INT(s.chunks, ==, 1);
	CHECK_INT(s.bytes, ==, cb->mapped);
	CHECK(stageset_has(&s, 1, 0, 3));
	/* the key is the whole triple */
	CHECK(!stageset_has(&s, 1, 1, 3));
	CHECK(!stageset_has(&s, 2, 0, 3));
	CHECK(!stageset_has(&s, 1, 0, 2));
	CHECK(stageset_get(&s, 1, 0, 3) == cb);
	CHECK_INT(chunkbuf_refs(cb), ==, 2);	/* a get takes none */
	chunkbuf_put(cb);
	stageset_release(&s);
}

static void test_bytes_are_the_mappings(void)
{
	struct stageset s;

	stageset_init(&s);
	put(&s, 1, 0, 0, 100 << 10);		/* a small file: 128 KiB mapped */
	put(&s, 2, 0, 0, 4 << 20);
	CHECK_INT(s.bytes, ==, (128 << 10) + (4 << 20));
	CHECK_INT(s.bytes, ==, chunkbuf_charge(100 << 10) + chunkbuf_charge(4 << 20));
	CHECK_INT(s.chunks, ==, 2);
	CHECK(stageset_forget(&s, 2, 0, 0));
	CHECK_INT(s.bytes, ==, 128 << 10);
	CHECK(!stageset_forget(&s, 2, 0, 0));	/* not there any more */
	CHECK(stageset_forget(&s, 1, 0, 0));
	CHECK_INT(s.bytes, ==, 0);
	CHECK_INT(s.chunks, ==, 0);
	stageset_release(&s);
}

static void test_put_replaces(void)
{
	struct stageset s;
	struct chunkbuf *old = buf(4096, 'o'), *neu = buf(8192, 'n');

	stageset_init(&s);
	CHECK_INT(stageset_put(&s, 5, 1, 0, old), ==, 0);
	CHECK_INT(stageset_put(&s, 5, 1, 0, neu), ==, 0);
	CHECK_INT(chunkbuf_refs(old), ==, 1);	/* the set let it go */
	CHECK_INT(s.chunks, ==, 1);
	CHECK_INT(s.bytes, ==, neu->mapped);
	CHECK(stageset_get(&s, 5, 1, 0) == neu);
	chunkbuf_put(old);
	chunkbuf_put(neu);
	stageset_release(&s);
}

static void test_has_before_and_list(void)
{
	struct stageset s;
	uint32_t *v = NULL;

	stageset_init(&s);
	CHECK_INT(stageset_list_file(&s, 9, 0, &v), ==, 0);
	CHECK(v == NULL);
	put(&s, 9, 0, 7, 4096);
	put(&s, 9, 0, 2, 4096);
	put(&s, 9, 0, 5, 4096);
	put(&s, 9, 1, 0, 4096);			/* another generation */
	CHECK(!stageset_has_before(&s, 9, 0, 2));
	CHECK(stageset_has_before(&s, 9, 0, 3));
	CHECK(!stageset_has_before(&s, 8, 0, 100));
	CHECK_INT(stageset_list_file(&s, 9, 0, &v), ==, 3);
	CHECK(v != NULL);
	if (v) {
		CHECK_INT(v[0], ==, 2);		/* in order */
		CHECK_INT(v[1], ==, 5);
		CHECK_INT(v[2], ==, 7);
	}
	free(v);
	CHECK_INT(stageset_list_file(&s, 9, 1, &v), ==, 1);
	free(v);
	stageset_release(&s);
}

static void test_drop_file_counts_unread(void)
{
	struct stageset s;

	stageset_init(&s);
	put(&s, 1, 0, 0, 4096);
	put(&s, 1, 0, 1, 4096);
	put(&s, 1, 0, 2, 4096);
	put(&s, 2, 0, 0, 4096);
	CHECK(stageset_get(&s, 1, 0, 1) != NULL);	/* a use */
	CHECK(stageset_has(&s, 1, 0, 2));		/* a look only */
	CHECK_INT(stageset_drop_file(&s, 1, 0), ==, 2);
	CHECK(!stageset_has(&s, 1, 0, 0) && !stageset_has(&s, 1, 0, 1));
	CHECK(stageset_has(&s, 2, 0, 0));		/* other files stay */
	CHECK_INT(s.chunks, ==, 1);
	CHECK_INT(stageset_drop_file(&s, 1, 0), ==, 0);	/* nothing left */
	CHECK_INT(stageset_drop_file(&s, 2, 1), ==, 0);	/* other gen */
	CHECK(stageset_has(&s, 2, 0, 0));
	stageset_release(&s);
}

static void test_hold(void)
{
	struct stageset s;
	struct chunkbuf *cb, *h;

	stageset_init(&s);
	CHECK(stageset_hold(&s, 1, 0, 0) == NULL);	/* not held */
	cb = put(&s, 1, 0, 0, 4096);
	put(&s, 1, 0, 1, 4096);
	h = stageset_hold(&s, 1, 0, 0);
	CHECK(h == cb);
	CHECK_INT(chunkbuf_refs(cb), ==, 2);		/* the caller's too */
	CHECK(stageset_hold(&s, 1, 0, 0) == NULL);	/* one writer */
	/* a drop passes the chunk being written by */
	CHECK_INT(stageset_drop_file(&s, 1, 0), ==, 1);
	CHECK(stageset_has(&s, 1, 0, 0));
	CHECK(!stageset_has(&s, 1, 0, 1));
	CHECK(stageset_get(&s, 1, 0, 0) == cb);		/* readers find it */
	/* the write did not happen: droppable again */
	stageset_unhold(&s, 1, 0, 0);
	CHECK_INT(stageset_drop_file(&s, 1, 0), ==, 0);	/* it was read */
	CHECK(!stageset_has(&s, 1, 0, 0));
	CHECK_INT(chunkbuf_refs(h), ==, 1);		/* only the holder's */
	chunkbuf_put(h);
	/* forget drops a held chunk too */
	put(&s, 3, 0, 0, 4096);
	h = stageset_hold(&s, 3, 0, 0);
	CHECK(stageset_forget(&s, 3, 0, 0));
	CHECK(!stageset_has(&s, 3, 0, 0));
	CHECK_INT(s.chunks, ==, 0);
	chunkbuf_put(h);
	stageset_unhold(&s, 3, 0, 0);			/* gone: a no-op */
	stageset_release(&s);
}

static bool keep_even(void *arg, uint64_t fid)
{
	(*(unsigned *)arg)++;
	return fid % 2 == 0;
}

static void test_drop_unless(void)
{
	struct stageset s;
	struct chunkbuf *h;
	unsigned asked = 0;
	uint64_t fid;

	stageset_init(&s);
	/* enough files that the table grows and deletions shift entries */
	for (fid = 1; fid <= 200; fid++) {
		put(&s, fid, 0, 0, 4096);
		put(&s, fid, 0, 1, 4096);
	}
	CHECK(stageset_get(&s, 3, 0, 0) != NULL);
	h = stageset_hold(&s, 5, 0, 1);			/* stays */
	/* odd files dropped: 100 files, 200 chunks, 1 read, 1 being written */
	CHECK_INT(stageset_drop_unless(&s, keep_even, &asked), ==, 198);
	CHECK_INT(asked, >=, 200);
	CHECK_INT(s.chunks, ==, 201);
	CHECK_INT(s.bytes, ==, 201 * 4096);
	for (fid = 1; fid <= 200; fid++) {
		bool want = fid % 2 == 0;

		CHECK_INT(stageset_has(&s, fid, 0, 0), ==, want);
		CHECK_INT(stageset_has(&s, fid, 0, 1), ==, want || fid == 5);
	}
	chunkbuf_put(h);
	stageset_release(&s);
}

static void test_release_gives_every_buffer_back(void)
{
	struct stageset s;
	struct chunkbuf *cb = buf(4096, 'r');

	stageset_init(&s);
	CHECK_INT(stageset_put(&s, 1, 0, 0, cb), ==, 0);
	CHECK_INT(stageset_put(&s, 2, 0, 0, cb), ==, 0);
	CHECK_INT(chunkbuf_refs(cb), ==, 3);
	stageset_release(&s);
	CHECK_INT(chunkbuf_refs(cb), ==, 1);
	chunkbuf_put(cb);
}

int main(void)
{
	runner_name = "test_stageset";
	TEST(test_put_get_has);
	TEST(test_bytes_are_the_mappings);
	TEST(test_put_replaces);
	TEST(test_has_before_and_list);
	TEST(test_drop_file_counts_unread);
	TEST(test_hold);
	TEST(test_drop_unless);
	TEST(test_release_gives_every_buffer_back);
	return runner_done();
}
