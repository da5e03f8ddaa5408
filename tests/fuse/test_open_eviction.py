"""Files held open (np.memmap, h5py, a loader that opens every shard once)
still turn the cache over: their chunks are evicted as other chunks need
room, and files held for passthrough take at most half the cache (the
rest read through the daemon). Every byte stays right."""

import os

import pytest

from checks import MiB, rnd
from util import put

FILES, SIZE = 4, 8 * MiB        # 32 MiB through a 12 MiB cache


def test_a_cache_of_open_files_turns_over(mounter, src):
    data = {f"s{i}": rnd(SIZE, i) for i in range(FILES)}
    put(src, data)
    # lru: every newcomer is admitted (heat keeps a scan out, and this
    # loop is one)
    m = mounter("--cache-size", "12M", "--evict", "lru")
    fds = {n: os.open(m.path(n), os.O_RDONLY) for n in data}   # all held open
    try:
        for rnd_pass in range(2):
            for n, want in data.items():
                fd = fds[n]
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                got = b"".join(os.pread(fd, MiB, off) for off in range(0, SIZE, MiB))
                assert got == want, (rnd_pass, n)
        st = m.stats()
        with open(m.path(".fusefs/stats")) as f:
            text = dict(line.split(maxsplit=1) for line in f if " " in line)
        assert st["evicted_bytes"] >= 2 * SIZE, st
        assert int(text["cache_bytes_used"]) <= 12 * MiB, text
    finally:
        for fd in fds.values():
            os.close(fd)


def test_passthrough_holds_at_most_half_the_cache(mounter, src):
    data = {"small": rnd(2 * MiB, 1), "big": rnd(7 * MiB, 2), "other": rnd(9 * MiB, 3)}
    put(src, data)
    m = mounter("--cache-size", "12M")
    for n, want in data.items():                       # cached, closed
        with open(m.path(n), "rb") as f:
            assert f.read() == want
    base = m.stats()["passthrough_opens"]
    small = os.open(m.path("small"), os.O_RDONLY)     # 2 MiB: held
    big = os.open(m.path("big"), os.O_RDONLY)         # 7 MiB: past half
    try:
        if m.stats()["passthrough_opens"] == base:
            pytest.skip("no FUSE passthrough here (kernel or privileges)")
        assert m.stats()["passthrough_opens"] == base + 1, m.stats()
        assert os.pread(big, MiB, 3 * MiB) == data["big"][3 * MiB:4 * MiB]
        with open(m.path("other"), "rb") as f:         # 9 MiB more: turns over
            assert f.read() == data["other"]
        assert os.pread(small, 2 * MiB, 0) == data["small"]
        assert os.pread(big, 7 * MiB, 0) == data["big"]
    finally:
        os.close(small)
        os.close(big)
