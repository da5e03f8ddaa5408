"""Read-ahead follows streams, not pairs of reads: a record reader (a
small header, then the body right after it, at random offsets) gets
none and fetches only the pages it reads (--random-reads pages), a
reader moving on chunk by chunk gets a window that grows to
--readahead. The kernel's own read-ahead is turned off for the file
(POSIX_FADV_RANDOM) so that the daemon sees the reads as made."""

import os
import random

from mountlib import wait_for
from util import put

MIB = 1 << 20


def test_records_at_random_offsets_fetch_only_their_chunks(mounter, src):
    data = random.Random(1).randbytes(32 * MIB)
    put(src, {"records": data})
    m = mounter("--readahead", "8")
    rng = random.Random(2)
    offs, end = [], -(8 * MIB)
    while len(offs) < 24:               # each more than 2 MiB from the last
        # past the first 4 MiB: a reader's first reads there start a stream
        off = rng.randrange(4 * MIB, len(data) - (101 << 10))
        if abs(off - end) > 2 * MIB:
            offs.append(off)
            end = off + 512 + (100 << 10)
    touched = set()
    fd = os.open(m.path("records"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for off in offs:
            assert os.pread(fd, 512, off) == data[off:off + 512]
            body = off + 512
            assert os.pread(fd, 100 << 10, body) == data[body:body + (100 << 10)]
            touched |= {off // MIB, (body + (100 << 10) - 1) // MIB}
    finally:
        os.close(fd)
    st = m.stats()
    assert st["readahead_chunks"] == 0, st
    assert st["bytes_from_backend"] <= len(touched) * MIB, (st, len(touched))
    # each record's pages: at most one page more at each end
    read = len(offs) * (512 + (100 << 10))
    assert st["bytes_from_backend"] <= read + len(offs) * 3 * 4096, st
    assert st["page_reads"] >= len(offs), st


def test_random_pages_of_a_file_four_times_the_cache(mounter, src):
    """4 KiB reads at random offsets of a 32 MiB file through an 8 MiB
    cache fetch their pages (no chunk), the stored ones are served again
    from the cache file, then the whole file reads right"""
    data = random.Random(4).randbytes(32 * MIB)
    put(src, {"big": data})
    m = mounter("--cache-size", "8M", "--readahead", "8")
    rng = random.Random(5)
    # past the first 4 MiB: a reader's first reads there start a stream
    offs = [rng.randrange(4 * MIB // 4096, len(data) // 4096) * 4096
            for _ in range(300)]
    fd = os.open(m.path("big"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for off in offs:
            assert os.pread(fd, 4096, off) == data[off:off + 4096], off
        st = m.stats()
        assert st["bytes_from_backend"] == 4096 * len(set(offs)), st
        assert st["chunks_stored"] == 0, st
        # the pages are stored after the reply
        assert wait_for(lambda: m.stats()["page_bytes_stored"] ==
                        st["bytes_from_backend"]), m.stats()
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        for off in offs[:50]:           # stored: served by the cache
            assert os.pread(fd, 4096, off) == data[off:off + 4096], off
        st2 = m.stats()
        assert st2["bytes_from_backend"] == st["bytes_from_backend"], st2
        again = 4096 * len(set(offs[:50]))
        assert st2["bytes_from_disk"] >= st["bytes_from_disk"] + again, st2
        got = bytearray()
        for off in range(0, len(data), 1 << 17):
            got += os.pread(fd, 1 << 17, off)
        assert got == data
    finally:
        os.close(fd)
    with open(m.path(".fusefs/stats")) as f:
        text = dict(line.split(maxsplit=1) for line in f if " " in line)
    assert int(text["cache_bytes_used"]) <= 8 * MIB, text


def test_a_stream_gets_a_growing_window(mounter, src):
    data = random.Random(3).randbytes(24 * MIB)
    put(src, {"stream": data})
    # --ahead-time 0: the window bounded by --max-inflight alone, not by
    # the link's measured rate, which follows how busy the machine is
    # (two CPU hogs: 3 chunks ahead instead of 5)
    m = mounter("--readahead", "8", "--ahead-time", "0")
    fd = os.open(m.path("stream"), os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for off in range(0, 3 * MIB, 128 << 10):       # chunks 0, 1, 2
            assert os.pread(fd, 128 << 10, off) == data[off:off + (128 << 10)]
        # entering chunk 1: chunks 2, 3; chunk 2: up to 6
        assert m.stats()["readahead_chunks"] == 5, m.stats()
        got = bytearray()
        for off in range(0, len(data), 1 << 17):
            got += os.pread(fd, 1 << 17, off)
    finally:
        os.close(fd)
    assert got == data
    st = m.stats()
    # every chunk from the backend once, most of them ahead of the reader
    assert st["bytes_from_backend"] == len(data), st
    assert st["readahead_chunks"] >= 16, st


def test_each_open_file_has_its_own_stream(mounter, src):
    """a sequential reader and a random reader of the same file, their
    reads interleaved: the sequential one stays a stream (whole chunks,
    read-ahead), the random one fetches pages; with one state per file,
    each random read would end the stream"""
    data = random.Random(6).randbytes(64 * MIB)
    put(src, {"shared": data})
    m = mounter("--readahead", "8", "--chunk-size", "1M", "--ahead-time", "0")
    rng = random.Random(7)
    pages = rng.sample(range(32 * MIB // 4096, 64 * MIB // 4096), 64)
    seq = os.open(m.path("shared"), os.O_RDONLY)
    rnd = os.open(m.path("shared"), os.O_RDONLY)
    try:
        for fd in (seq, rnd):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        for k, off in enumerate(range(0, 8 * MIB, 128 << 10)):
            assert os.pread(seq, 128 << 10, off) == data[off:off + (128 << 10)]
            p = pages[k] * 4096
            assert os.pread(rnd, 4096, p) == data[p:p + 4096]
    finally:
        os.close(seq)
        os.close(rnd)
    st = m.stats()
    assert st["page_reads"] == 64, st
    # (how many chunks the read-ahead started depends on the link bound,
    # which follows the measured rate: that it started any is the point)
    assert st["readahead_chunks"] > 0, st
