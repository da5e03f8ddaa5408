"""Sample-range lists (docs/epochs.md, "Sample ranges"): a list line
PATH<TAB>OFFSET<TAB>LENGTH names bytes of a big file. The prefetcher
fetches the pages of the listed ranges ahead of the reader and nothing
else of the file; reads of the ranges count as the reader's progress;
bad range lines are refused line by line. The kernel's read-ahead is
turned off for the file (POSIX_FADV_RANDOM) so that the daemon sees the
reads as made."""

import os
import random
import threading

from mountlib import wait_for
from test_epochs import ctl_write, status
from util import put

MIB = 1 << 20
PAGE = 4096
SAMPLE = 8196           # 2,049 uint32 tokens


def pages_of(off, length, chunk=4 * MIB):
    """the 4 KiB pages the daemon reads for [off, off + length): per chunk,
    rounded out to pages"""
    pages = set()
    end = off + length
    while off < end:
        cend = min(end, (off // chunk + 1) * chunk)
        pages |= set(range(off // PAGE, (cend + PAGE - 1) // PAGE))
        off = cend
    return pages


def samples(n, size, seed):
    """@n sample offsets of a @size-byte token file, no two in one page"""
    rng = random.Random(seed)
    slots = rng.sample(range(size // SAMPLE - 1), 4 * n)
    out, taken = [], set()
    for s in slots:
        p = pages_of(s * SAMPLE, SAMPLE)
        if not p & taken and len(out) < n:
            out.append(s * SAMPLE)
            taken |= {q - 1 for q in p} | p | {q + 1 for q in p}
    return out


def read_samples(m, data, offs):
    """read each sample of tokens.bin at @offs, one pread each (the
    kernel's read-ahead off), every byte checked"""
    fd = os.open(m.path("tokens.bin"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for off in offs:
            assert os.pread(fd, SAMPLE, off) == data[off:off + SAMPLE], off
    finally:
        os.close(fd)


def listed_samples(mounter, src, n, seed, name):
    """a 16 MiB token file, @n samples of it published as list @name and
    prefetched: (mount, data, sample offsets, bytes of their pages)"""
    data = random.Random(seed).randbytes(16 * MIB)
    put(src, {"tokens.bin": data})
    m = mounter("--cache-size", "64M")
    offs = samples(n, len(data), seed + 1)
    ctl_write(m, f"lists/{name}",
              "".join(f"tokens.bin\t{o}\t{SAMPLE}\n" for o in offs))
    want = sum(len(pages_of(o, SAMPLE)) for o in offs) * PAGE
    assert wait_for(lambda: m.stats()["page_bytes_stored"] >= want), m.stats()
    return m, data, offs, want


def test_listed_ranges_are_prefetched_alone_and_read_from_the_cache(mounter, src):
    m, data, offs, want = listed_samples(mounter, src, 40, 1, "loader")
    # the prefetcher read every listed range's pages, and nothing more
    st = m.stats()
    assert st["page_bytes_stored"] == want, (st, want)
    assert st["bytes_from_backend"] == want, (st, want)
    assert st["chunks_stored"] == 0 and st["readahead_chunks"] == 0, st
    assert st["range_prefetches"] >= len(offs), st
    # the loader reads its samples: every byte right, all from the cache
    fd = os.open(m.path("tokens.bin"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for i, off in enumerate(offs):
            assert os.pread(fd, SAMPLE, off) == data[off:off + SAMPLE], off
            if i == 9:
                ls = status(m, "loader")
                assert (ls["read"], ls["position"]) == (10, 10), ls
    finally:
        os.close(fd)
    st2 = m.stats()
    assert st2["bytes_from_backend"] == want, st2
    ls = status(m, "loader")
    assert (ls["read"], ls["remaining"]) == (40, 0), ls


def test_reads_between_samples_and_out_of_order_ones(mounter, src):
    """a read that meets no listed range moves nothing; samples read a
    little out of list order (parallel workers) count as in order"""
    m, data, offs, _ = listed_samples(mounter, src, 30, 3, "l")
    fd = os.open(m.path("tokens.bin"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        # a read between two samples is no sample's: nothing moves
        gap = offs[0] + SAMPLE + 2 * PAGE
        if not any(o <= gap < o + SAMPLE for o in offs):
            os.pread(fd, 100, gap)
            assert status(m, "l")["read"] == 0
        for i in (1, 0, 3, 2, 4):
            off = offs[i]
            assert os.pread(fd, SAMPLE, off) == data[off:off + SAMPLE]
    finally:
        os.close(fd)
    ls = status(m, "l")
    assert (ls["read"], ls["position"], ls["remaining"]) == (5, 5, 25), ls


def test_bad_range_lines_are_refused_one_by_one(mounter, src):
    put(src, {"tokens.bin": b"t" * 100000, "d/x": b"x"})
    m = mounter()
    ctl_write(m, "lists/bad",
              "tokens.bin\t0\t8196\n"          # fine
              "tokens.bin\t99000\t8196\n"      # past the end
              "tokens.bin\t10\t0\n"            # empty
              "tokens.bin\t0\t8196\n"          # again
              "nosuch.bin\t0\t10\n"            # no file
              "d\t0\t1\n"                      # a directory
              "tokens.bin\n")                  # the whole file
    with open(os.path.join(m.mnt, ".fusefs", "lists", "bad")) as f:
        report = f.read().split("# last publish")[1]
    got = dict(line.split(" ", 1) for line in report.strip().splitlines())
    assert got["accepted"] == "2", report
    assert got["rejected_range"].startswith("2 (first at line 2)"), report
    assert got["rejected_duplicate"].startswith("1"), report
    assert got["rejected_unknown"].startswith("1"), report
    assert got["rejected_directory"].startswith("1"), report


def test_ranges_past_the_cache_are_not_fetched_twice(mounter, src):
    """listed ranges 2.6 x the cache: the prefetcher stops where the cache
    is full (a range it could not store would be read again by the
    reader), the reader reads the rest, every byte right, every page read
    from the backend about once"""
    data = random.Random(5).randbytes(32 * MIB)
    put(src, {"tokens.bin": data})
    m = mounter("--cache-size", "4M")
    offs = samples(900, len(data), 6)
    ctl_write(m, "lists/big",
              "".join(f"tokens.bin\t{o}\t{SAMPLE}\n" for o in offs))
    pages = sum(len(pages_of(o, SAMPLE)) for o in offs) * PAGE
    assert pages > 2.5 * 4 * MIB
    assert wait_for(lambda: m.stats()["page_bytes_stored"] >= 3 * MIB), m.stats()
    read_samples(m, data, offs)
    st = m.stats()
    assert st["bytes_from_backend"] <= 1.2 * pages, (st, pages)
    assert status(m, "big")["read"] == len(offs)


def test_a_reader_right_after_a_range_prefetch_is_answered(mounter, src, hooks):
    """a range's prefetch answered its readers and is storing its pages
    (held there by the pages-store gate): a reader of those pages then
    reads them itself; it used to park on the finished read for good"""
    data = random.Random(7).randbytes(16 * MIB)
    put(src, {"tokens.bin": data})
    hooks.close("pages-store")
    m = mounter("--cache-size", "64M", env=hooks.env)
    off = 9 * MIB + 100
    ctl_write(m, "lists/gate", f"tokens.bin\t{off}\t{SAMPLE}\n")
    # the prefetch arrived (counted as a page read) and waits at the gate
    assert wait_for(lambda: m.stats()["page_reads"] == 1), m.stats()
    got = []

    def reader():
        fd = os.open(m.path("tokens.bin"), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            got.append(os.pread(fd, SAMPLE, off))
        finally:
            os.close(fd)
    t = threading.Thread(target=reader)
    t.start()
    t.join(timeout=60)          # a hang guard: the gate is still shut
    answered = not t.is_alive()
    hooks.open("pages-store")
    t.join(timeout=60)
    if t.is_alive():            # parked for good: the daemon must go
        m.kill()
        t.join()
    assert answered, "the read waited for a prefetch that had finished"
    assert got == [data[off:off + SAMPLE]]


def test_a_file_listed_by_ranges_keeps_its_pages_for_later_files(mounter, src,
                                                                  hooks):
    """a list names samples of a token file, then a whole file that does
    not fit beside them: the token file is next used first (at its first
    unread range), so its pages stay and the later file's last chunk is
    not stored in their place; a file listed only by ranges used to count
    as one with no known use, the first victim, whole"""
    data = random.Random(9).randbytes(4 * MIB)
    later = random.Random(10).randbytes(8 * MIB)
    put(src, {"tokens.bin": data, "later.bin": later})
    m = mounter("--cache-size", "8M", env=hooks.env)
    offs = samples(20, len(data), 11)
    ranges = "".join(f"tokens.bin\t{o}\t{SAMPLE}\n" for o in offs)
    want = sum(len(pages_of(o, SAMPLE)) for o in offs) * PAGE
    # the samples' pages stored first (a page store after the later file
    # filled the cache would evict that file's tail, rightly), then the
    # same epoch again with the later file
    ctl_write(m, "lists/mixed", "# epoch 0\n" + ranges)
    assert wait_for(lambda: m.stats()["page_bytes_stored"] >= want), m.stats()
    ctl_write(m, "lists/mixed", "# epoch 0\n" + ranges + "later.bin\n")
    # the prefetcher went through the whole list: each of the later
    # file's 8 chunks (1 MiB) stored or staged in memory
    assert wait_for(lambda: m.stats()["chunks_stored"] +
                    m.stats()["staged_chunks"] >= 8), m.stats()
    # the prefetcher held from here: its later rounds may drop staged
    # chunks and fetch them again (under load they did, between the two
    # snapshots); what is asked is that the reads need no backend read
    hooks.set("prefetch-off", 1)
    st = m.stats()
    assert st["evictions"] == 0, st
    assert st["staged_chunks"] >= 1, st
    assert st["page_bytes_stored"] == want, (st, want)
    read_samples(m, data, offs)
    st2 = m.stats()
    # no read waited for the backend (misses) or fetched pages
    assert st2["misses"] == st["misses"], (st, st2)
    assert st2["page_reads"] == st["page_reads"], (st, st2)
    assert st2["page_bytes_stored"] == want, st2
    with open(m.path("later.bin"), "rb") as f:
        assert f.read() == later
