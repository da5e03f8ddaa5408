// SPDX-License-Identifier: MIT
/*
 * The INI walker (cfgfile.c): its entries are split as inih splits them
 * (checked against inih itself on tricky and random lines), and no
 * secret it read reaches memory it cannot wipe: inih's line buffer on
 * the stack, the stream's buffer on the heap.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfgfile.h"
#include "runner.h"

#define OUT_MAX	8192

struct seen {
	char out[OUT_MAX];	/* "section|name|value\n" per entry */
	size_t len;
};

static void add(struct seen *s, const char *section, const char *name,
		const char *value)
{
	int n = snprintf(s->out + s->len, OUT_MAX - s->len, "%s|%s|%s\n",
			 section, name, value);

	if (n > 0 && s->len + (size_t)n < OUT_MAX)
		s->len += (size_t)n;
}

static int by_inih(void *arg, const char *section, const char *name,
		   const char *value)
{
	add(arg, section, name, value);
	return 1;
}

static int by_walker(void *arg, const char *section, const char *name,
		     const char *value, int line)
{
	(void)line;
	if (name)		/* not a header */
		add(arg, section, name, value);
	return 0;
}

/* with write(2): a stream's buffer would be one more copy */
static void write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_TRUNC);

	CHECK(fd >= 0);
	if (fd < 0)
		return;
	CHECK_INT(write(fd, text, strlen(text)), ==, (ssize_t)strlen(text));
	close(fd);
}

/* @text read by inih (from a string) and by the walker (from a file):
 * the same first bad line, or the same entries */
static void same_as_inih(const char *text)
{
	char path[] = "/tmp/fusefs-cfgfile-XXXXXX";
	struct seen a = { .len = 0 }, b = { .len = 0 };
	int fd = mkstemp(path), ra, rb;

	CHECK(fd >= 0);
	close(fd);
	write_file(path, text);
	ra = ini_parse_string(text, by_inih, &a);
	rb = cfgfile_each(path, by_walker, &b);
	unlink(path);
	CHECK_INT(rb, ==, ra);
	if (ra == 0 && rb == 0 && strcmp(a.out, b.out)) {
		CHECK_STR(b.out, a.out);
		fprintf(stderr, "  for: %s\n", text);
	}
}

static void test_entries_split_as_inih_splits_them(void)
{
	static const char *tricky[] = {
		"a = b\n",
		"a=b\n",
		"a : b\n",
		"a = b ; comment\n",
		"a = b;not a comment\n",
		"a = ;x\n",
		"a =  ; y\n",
		"a = \n",
		"= v\n",
		"a ;b = c\n",
		"a = b = c\n",
		"a = b : c\n",
		"; comment\n# comment\n",
		"[s]\na = 1\n[t]\nb = 2\n",
		"[s\n",
		"[s] trailing\nx = 1\n",
		"just words\n",
		"a = b\njunk\nc = d\n",
		"a = b ;\tc\n",
		"a\t=\tb\t;\tc\n",
	};
	static const char alphabet[] = "ab =:;#[] \t";
	unsigned seed = 12345, i, j, k;
	char text[512];

	for (i = 0; i < sizeof(tricky) / sizeof(tricky[0]); i++)
		same_as_inih(tricky[i]);
	for (i = 0; i < 2000; i++) {
		size_t n = 0;

		for (j = 0; j < 3; j++) {	/* three lines */
			unsigned len = 1 + rand_r(&seed) % 12;

			for (k = 0; k < len; k++)
				text[n++] = alphabet[rand_r(&seed) %
						     (sizeof(alphabet) - 1)];
			/* no leading blank: that is a continuation to
			 * inih, stripped by the walker */
			while (n > 0 && (text[n - len] == ' ' ||
					 text[n - len] == '\t'))
				text[n - len] = 'a';
			text[n++] = '\n';
		}
		text[n] = '\0';
		same_as_inih(text);
	}
}

/*
 * What inih is handed: this definition of ini_parse_stream() comes
 * before libinih's (the executable's symbols first) and reads through
 * a reader that looks at every line the walker hands inih.
 */
typedef int (*parse_fn)(ini_reader, void *, ini_handler, void *);

static const char *watched;	/* a secret, or NULL */
static int handed;		/* lines holding it handed to inih */

struct spy {
	ini_reader reader;
	void *stream;
};

static char *spy_reader(char *str, int num, void *stream)
{
	struct spy *w = stream;
	char *r = w->reader(str, num, w->stream);

	if (r && watched && strstr(r, watched))
		handed++;
	return r;
}

int ini_parse_stream(ini_reader reader, void *stream, ini_handler handler,
		     void *user)
{
	static parse_fn real;
	struct spy w = { reader, stream };

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "ini_parse_stream");
	if (!real)
		return -1;
	return real(spy_reader, &w, handler, user);
}

/* a freed block of @size bytes (of @n taken) holding @secret?  Reading
 * what is left in them is the point: */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
static int heap_holds(const char *secret, size_t size, int n)
{
	char *p[8];
	int found = 0, i;

	for (i = 0; i < n && i < 8; i++) {
		p[i] = malloc(size);
		found |= p[i] && memmem(p[i], size, secret, strlen(secret));
	}
	while (i--)
		free(p[i]);
	return found;
}
#pragma GCC diagnostic pop

static int ignore(void *arg, const char *section, const char *name,
		  const char *value, int line)
{
	(void)arg;
	(void)section;
	(void)name;
	(void)value;
	(void)line;
	return 0;
}

/*
 * A credentials file read through the walker puts its secret neither
 * in inih's line buffer (a stack array in libinih, never wiped: the
 * walker hands inih no entry line) nor leaves it in the stream's buffer
 * (the walker's own, wiped; glibc's would be freed as it is).  The
 * secret is built at run time so that it is not in this binary's data.
 */
static void test_no_copy_of_a_line_is_left(void)
{
	char path[] = "/tmp/fusefs-cfgfile-XXXXXX", secret[40], text[2048];
	char *gap[8], *hold[8];
	int fd = mkstemp(path), i;
	size_t n;

	CHECK(fd >= 0);
	close(fd);
	for (i = 0; i < 32; i++)
		secret[i] = (char)('k' + i % 7);
	secret[32] = '\0';
	/* no printf: its frames could hold a copy */
	strcpy(text, "[default]\naws_access_key_id = AKID\n"
	       "aws_secret_access_key = ");
	strcat(text, secret);
	strcat(text, "\naws_session_token = ");	/* a long line next */
	n = strlen(text);
	memset(text + n, 'T', 900);
	text[n + 900] = '\0';
	strcat(text, "\nregion = x\n");
	write_file(path, text);
	memset(text, 0, sizeof(text));
	/* free 120-byte blocks between live ones: a line buffer of that
	 * size (getline()'s first) lands there and cannot grow in place */
	for (i = 0; i < 8; i++) {
		gap[i] = malloc(120);
		hold[i] = malloc(120);
	}
	for (i = 0; i < 8; i++)
		free(gap[i]);
	watched = secret;
	handed = 0;
	CHECK_INT(cfgfile_each(path, ignore, NULL), ==, 0);
	watched = NULL;
	CHECK_INT(handed, ==, 0);
	CHECK(!heap_holds(secret, 4096, 1));	/* a stream's buffer */
	CHECK(!heap_holds(secret, 120, 8));	/* a line buffer outgrown */
	for (i = 0; i < 8; i++)
		free(hold[i]);
	unlink(path);
}

int main(void)
{
	runner_name = "test_cfgfile";
	TEST(test_entries_split_as_inih_splits_them);
	TEST(test_no_copy_of_a_line_is_left);
	return runner_done();
}
