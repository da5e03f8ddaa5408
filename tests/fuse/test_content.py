"""File content and cache behaviour through the kernel FUSE mount of a
file:// source: exact bytes at chunk boundaries, hits from the cache,
remounts, single flight, changed files, corrupted cache chunks, the size
bound. Ported from tests/integration/test_content.py, sized down."""

import errno
import os
import time

import pytest

from checks import (MiB, cached, check_random_reads, concurrent_readers, data_files,
                    flip_cached_byte, rnd)
from mountlib import wait_for
from util import CHUNK, put, read_uncached



def test_sizes_whole_and_random_offsets(mounter, sized):
    m = mounter()
    assert sorted(os.listdir(m.mnt)) == sorted(sized)
    for name, d in sized.items():
        assert os.stat(m.path(name)).st_size == len(d)
        with open(m.path(name), "rb") as f:
            assert f.read() == d, name
    check_random_reads(m.path("big"), sized["big"], most=2 * MiB)
    s = m.stats()
    assert s["read_errors"] == 0 and s["checksum_failures"] == 0
    # every byte came from the source once
    assert s["bytes_from_backend"] == sum(map(len, sized.values())), s


def test_second_read_is_served_from_the_cache(mounter, sized):
    m = mounter()
    want = sized["big"]
    assert read_uncached(m.path("big")) == want
    s1 = m.stats()
    assert s1["bytes_from_backend"] == len(want)
    # stored right after the reply; counted in 4 KiB blocks
    assert wait_for(lambda: cached(m, "big") == (len(want) + 4095) // 4096 * 4096)
    assert read_uncached(m.path("big")) == want
    assert read_uncached(m.path("big"), 3 * MiB + 17, 1000) == want[3 * MiB + 17:3 * MiB + 1017]
    s2 = m.stats()
    assert s2["bytes_from_backend"] == s1["bytes_from_backend"], s2
    assert s2["backend_reads"] == s1["backend_reads"]
    assert s2["misses"] == s1["misses"] and s2["hits"] > s1["hits"]
    assert s2["bytes_from_cache"] >= s1["bytes_from_cache"] + len(want)


def test_remount_reuses_cache(mounter, sized, tmp_path):
    cache = str(tmp_path / "c")
    m = mounter(cache=cache)
    for name, d in sized.items():
        assert read_uncached(m.path(name)) == d
    assert m.stats()["bytes_from_backend"] == sum(map(len, sized.values()))
    m.umount()
    m2 = mounter("--list-refresh", "0", cache=cache)     # no re-listing at remount
    for name, d in sized.items():
        assert read_uncached(m2.path(name)) == d
    s = m2.stats()
    assert s["bytes_from_backend"] == 0 and s["backend_reads"] == 0, s
    # served unread: the clean stop recorded every data file
    # (test_clean_stop.py; test_verifier.py verifies after a crash)
    assert s["stop_trusted_chunks"] == sum((len(d) + CHUNK - 1) // CHUNK
                                           for d in sized.values()), s
    assert s["verified_chunks"] == 0, s
    assert s["listings"] == 0           # the namespace came from the index


@pytest.mark.parametrize("mode", ["chunks", "pages"])
def test_eight_concurrent_readers_cold(mounter, sized, mode):
    m = mounter("--random-reads", mode)
    want = sized["big"]
    assert not concurrent_readers(m.path("big"), want, reads=50)
    s = m.stats()
    # single flight: every chunk fetched whole once, however many readers
    # wanted it; with pages, random readers' reads may have fetched pages
    # instead (whether they reach the daemon depends on what the kernel
    # has cached by then; test_readahead.py forces page reads)
    chunks = (len(want) + CHUNK - 1) // CHUNK
    if mode == "chunks":
        assert s["backend_reads"] == chunks, s
        assert s["page_reads"] == 0 and s["bytes_from_backend"] == len(want)
    else:
        assert s["backend_reads"] - s["page_reads"] <= chunks, s


def rewrite(path, data):
    """rewrite in place (same inode): content, size and mtime change. Never
    through a truncation to 0: a background re-check could see that
    moment, a version of the file that is empty."""
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(data)
        f.truncate(len(data))
    # a coarse clock could keep the mtime: make sure it moves
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))


def test_rewritten_file_served_after_revalidate(mounter, src):
    # --revalidate 0: every open re-checks (parked, never blocking a worker)
    put(src, {"rw/obj": b"A" * 5000})
    m = mounter("--revalidate", "0")
    assert read_uncached(m.path("rw/obj")) == b"A" * 5000
    v1 = os.getxattr(m.path("rw/obj"), "user.fusefs.version")
    rewrite(src / "rw/obj", b"B" * 7000)
    with open(m.path("rw/obj"), "rb") as f:
        assert f.read() == b"B" * 7000
    assert os.getxattr(m.path("rw/obj"), "user.fusefs.version") != v1
    assert m.stats()["stale_objects"] == 1


def test_stale_while_revalidate(mounter, src):
    # --revalidate N > 0: an open past N s is answered at once from what is
    # known and re-checked in the background; a later open sees the change
    put(src, {"rw/obj": b"A" * 5000})
    m = mounter("--revalidate", "1")
    assert read_uncached(m.path("rw/obj")) == b"A" * 5000
    rewrite(src / "rw/obj", b"B" * 7000)
    time.sleep(1.5)
    first = read_uncached(m.path("rw/obj"))
    assert first in (b"A" * 5000, b"B" * 7000)          # never a mix
    assert wait_for(lambda: read_uncached(m.path("rw/obj")) == b"B" * 7000, timeout=10)
    assert m.stats()["revalidations"] >= 1


def test_file_changed_under_an_open_handle_is_never_mixed(mounter, src):
    old, new = rnd(8 * CHUNK, 1), rnd(8 * CHUNK, 2)
    put(src, {"m": old})
    m = mounter("--revalidate", "0", "--readahead", "0")
    with open(m.path("m"), "rb") as f:
        assert f.read(4096) == old[:4096]
        rewrite(src / "m", new)
        # the last chunk was never fetched: the old version is gone from
        # the source, so the handle gets EIO, not bytes of the new version
        f.seek(7 * CHUNK)
        with pytest.raises(OSError) as e:
            f.read(4096)
        assert e.value.errno == errno.EIO
    assert m.stats()["backend_errors"] >= 1
    # a new open re-checks the version: all new bytes, none of the old
    assert read_uncached(m.path("m")) == new
    assert m.stats()["stale_objects"] == 1
    assert wait_for(lambda: cached(m, "m") == len(new))


def test_flipped_byte_is_refetched(mounter, sized, tmp_path):
    cache = str(tmp_path / "flip")
    want = sized["chunk_plus_1"]
    m = mounter(cache=cache)
    assert read_uncached(m.path("chunk_plus_1")) == want
    m.umount()
    flip_cached_byte(cache)
    m2 = mounter(cache=cache)
    assert read_uncached(m2.path("chunk_plus_1")) == want
    s = m2.stats()
    assert s["checksum_failures"] == 1, s
    assert s["bytes_from_backend"] == CHUNK          # only the bad chunk again


def test_cache_size_bound(mounter, src, tmp_path):
    files = {f"f{i}": rnd(2 * MiB, 100 + i) for i in range(10)}
    put(src, files)
    cache = str(tmp_path / "b")
    limit = 6 * MiB
    # LRU admits everything, so it must evict to stay under the bound
    m = mounter("--cache-size", str(limit), "--evict", "lru", cache=cache)
    for i, (k, v) in enumerate(files.items()):
        assert read_uncached(m.path(k)) == v
        s = m.stats()
        assert s["cache_bytes_used"] <= limit, s
        # on disk: once this file's 2 chunks are stored (the stores come
        # after the reply; with two completion threads, one's victims may
        # not be unlinked yet while the other's chunk lands), blocks of slack
        assert wait_for(lambda: m.stats()["chunks_stored"] >= 2 * (i + 1)), m.stats()
        on_disk = sum(os.stat(p).st_blocks * 512 for p in data_files(cache))
        assert on_disk <= limit + 4096 * 10, on_disk
    # 20 MiB through 6 MiB (the last chunks are stored after the reply)
    assert wait_for(lambda: m.stats()["evictions"] >= 7), m.stats()
    assert m.stats()["bytes_from_backend"] == 20 * MiB
