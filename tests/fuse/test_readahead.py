"""Read-ahead follows streams, not pairs of reads: a record reader (a
small header, then the body right after it, at random offsets) gets
none, a reader moving on chunk by chunk gets a window that grows to
--readahead. The kernel's own read-ahead is turned off for the file
(POSIX_FADV_RANDOM) so that the daemon sees the reads as made."""

import os
import random

from util import put

MIB = 1 << 20


def test_records_at_random_offsets_fetch_only_their_chunks(mounter, src):
    data = random.Random(1).randbytes(32 * MIB)
    put(src, {"records": data})
    m = mounter("--readahead", "8")
    rng = random.Random(2)
    offs, end = [], -(8 * MIB)
    while len(offs) < 24:               # each more than 2 MiB from the last
        off = rng.randrange(0, len(data) - (101 << 10))
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


def test_a_stream_gets_a_growing_window(mounter, src):
    data = random.Random(3).randbytes(24 * MIB)
    put(src, {"stream": data})
    m = mounter("--readahead", "8")
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
