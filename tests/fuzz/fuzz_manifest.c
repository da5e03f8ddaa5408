// SPDX-License-Identifier: MIT
/*
 * fuzz_manifest.c - the manifest reader (manifest_read: plain, gzip or
 * zstd by magic, split into lines, manifest_parse_line) on any bytes.
 *
 * Invariants (include/manifest.h):
 *  - every entry handed out has a path of 1..4095 bytes that
 *    pathmap_classify() shows as a file, a size <= NS_SIZE_MAX and a
 *    version of printable, non-space ASCII;
 *  - an entry written back with manifest_put() parses to the same path,
 *    size and version (percent-encoding round-trips);
 *  - an error always says "NAME:LINE: why".
 */
#include "fuzz.h"
#include "manifest.h"
#include "pathmap.h"

static int check_entry(void *arg, const struct manifest_entry *e,
		       unsigned long lineno)
{
	char *line = NULL, path[MANIFEST_PATH_MAX + 1];
	struct manifest_entry back;
	const char *why = NULL;
	struct pm_result pm;
	size_t len = 0, i;
	FILE *f;

	FUZZ_CHECK(e->len >= 1 && e->len <= MANIFEST_PATH_MAX, "len %zu", e->len);
	FUZZ_CHECK(pathmap_classify(e->path, e->len, "", &pm) == PM_FILE,
		   "path not a file");
	FUZZ_CHECK(e->attr.size <= NS_SIZE_MAX, "size");
	for (i = 0; e->attr.version[i]; i++)
		FUZZ_CHECK(e->attr.version[i] > 0x20 && e->attr.version[i] < 0x7f,
			   "version byte %#x", e->attr.version[i]);
	FUZZ_CHECK(i >= 1 && i < NS_VERSION_MAX, "version length %zu", i);
	f = open_memstream(&line, &len);
	FUZZ_CHECK(f != NULL, "memstream");
	FUZZ_CHECK(manifest_put(f, e->path, e->len, &e->attr) == 0, "put");
	fclose(f);
	FUZZ_CHECK(len > 0 && line[len - 1] == '\n', "no newline");
	FUZZ_CHECK(manifest_parse_line(line, len - 1, &back, path, &why) == 0,
		   "written entry does not parse: %s", why);
	FUZZ_CHECK(back.len == e->len && !memcmp(back.path, e->path, e->len),
		   "path does not round-trip");
	FUZZ_CHECK(back.attr.size == e->attr.size &&
		   !strcmp(back.attr.version, e->attr.version), "attrs");
	free(line);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", 0);
	char err[8192];
	int rc;

	FUZZ_CHECK(fd >= 0, "memfd");
	FUZZ_CHECK(write(fd, data, size) == (ssize_t)size, "write");
	lseek(fd, 0, SEEK_SET);
	rc = manifest_read(fd, "m", check_entry, NULL, err, sizeof(err));
	if (rc)
		FUZZ_CHECK(!strncmp(err, "m", 1) && strchr(err, ':'),
			   "error without a place: %s", err);
	close(fd);
	return 0;
}
