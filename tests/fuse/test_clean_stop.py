"""Clean-stop records (src/cache_stop.c, docs/security.md).

A clean stop syncs the cache and records each data file whose chunks are
all verified; the next start serves those chunks without reading them,
but only for a data file (inode, size, mtime, ctime) and index as the
stop left them. A data file changed while unmounted, even with its times
put back or by a copy put in its place, is verified as after a crash; a
start drops the records before it serves anything, so a run killed
before its stop leaves none; --trust-clean-stop off trusts none."""

import glob
import os
import shutil

import pytest

from checks import rnd
from mountlib import wait_for
from util import CHUNK, put, read_uncached

FILES = {"a": 3 * CHUNK + 5, "b": 2 * CHUNK, "c": CHUNK // 2}


def chunks(n):
    return (n + CHUNK - 1) // CHUNK


ALL = sum(chunks(n) for n in FILES.values())


@pytest.fixture
def data(src):
    d = {name: rnd(n, i + 40) for i, (name, n) in enumerate(FILES.items())}
    put(src, d)
    return d


def warm(m, data):
    """read every file through the daemon; its chunks reach the disk and
    the index by the clean stop (meta_close() commits the queue)"""
    for name, d in data.items():
        assert read_uncached(m.path(name)) == d, name


def data_file(cache, m, rel):
    """the data file of @rel (mounted by @m) in cache directory @cache"""
    ino = os.stat(m.path(rel)).st_ino
    (path,) = glob.glob(os.path.join(cache, "data", "%02x" % (ino & 0xff),
                                     "%016x-*" % ino))
    return path


def read_all(m, data):
    for name, d in data.items():
        assert read_uncached(m.path(name)) == d, name


@pytest.mark.parametrize("passthrough", ["auto", "off"])
def test_a_clean_stop_is_trusted_at_the_next_start(mounter, data, tmp_path,
                                                   passthrough):
    cache = str(tmp_path / "c")
    m = mounter("--passthrough", passthrough, cache=cache)
    warm(m, data)
    m.umount()
    assert "clean stop recorded for 3 data files" in m.log()
    m = mounter("--passthrough", passthrough, cache=cache)
    s = m.stats()
    assert s["stop_trusted_chunks"] == ALL and s["cache_chunks_unverified"] == 0, s
    assert "3 of 3 data files as the last clean stop left them" in m.log()
    read_all(m, data)
    s = m.stats()
    assert s["verify_reads"] == 0 and s["verifier_open_waits"] == 0, s
    assert s["bytes_from_backend"] == 0 and s["checksum_failures"] == 0, s


def test_a_file_changed_while_unmounted_is_verified(mounter, data, tmp_path):
    """a byte flipped in one data file with its atime and mtime put back;
    another file's data file replaced by a copy of itself (same bytes and
    times, another inode): both are read and checked again, the flipped
    chunk refetched, the third file trusted"""
    cache = str(tmp_path / "c")
    m = mounter(cache=cache)
    warm(m, data)
    pa, pb = data_file(cache, m, "a"), data_file(cache, m, "b")
    m.umount()
    st = os.stat(pa)
    with open(pa, "r+b") as f:
        f.seek(CHUNK + 100)
        b = f.read(1)
        f.seek(CHUNK + 100)
        f.write(bytes([b[0] ^ 0x10]))
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    os.utime(pa, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(pa).st_mtime_ns == st.st_mtime_ns
    shutil.copy2(pb, pb + ".copy")
    os.rename(pb + ".copy", pb)
    m = mounter("--passthrough", "off", cache=cache)
    s = m.stats()
    assert s["stop_changed_files"] == 2, s
    assert s["stop_trusted_chunks"] == chunks(FILES["c"]), s
    assert "1 of 3 data files as the last clean stop left them" in m.log()
    read_all(m, data)
    assert wait_for(lambda: m.stats()["cache_chunks_unverified"] == 0)
    s = m.stats()
    assert s["checksum_failures"] == 1, s
    assert s["verified_chunks"] == chunks(FILES["a"]) - 1 + chunks(FILES["b"]), s
    assert s["bytes_from_backend"] == CHUNK, s      # the damaged chunk only


def test_records_are_taken_at_start_so_a_kill_leaves_none(mounter, data, tmp_path):
    cache = str(tmp_path / "c")
    m = mounter(cache=cache)
    warm(m, data)
    m.umount()
    m = mounter(cache=cache)
    assert m.stats()["stop_trusted_chunks"] == ALL
    m.kill()                            # no clean stop: nothing recorded
    m = mounter(cache=cache)
    s = m.stats()
    assert s["stop_trusted_chunks"] == 0 and s["stop_changed_files"] == 0, s
    read_all(m, data)
    assert wait_for(lambda: m.stats()["cache_chunks_unverified"] == 0)
    s = m.stats()
    assert s["verified_chunks"] == ALL and s["checksum_failures"] == 0, s
    assert s["bytes_from_backend"] == 0, s


def test_trust_clean_stop_off_verifies_everything(mounter, data, tmp_path):
    cache = str(tmp_path / "c")
    m = mounter(cache=cache)
    warm(m, data)
    m.umount()
    m = mounter("--trust-clean-stop", "off", cache=cache)
    read_all(m, data)
    assert wait_for(lambda: m.stats()["cache_chunks_unverified"] == 0)
    s = m.stats()
    assert s["stop_trusted_chunks"] == 0 and s["verified_chunks"] == ALL, s
    m.umount()
    # the records were dropped by that start, and its own stop wrote new ones
    m = mounter(cache=cache)
    assert m.stats()["stop_trusted_chunks"] == ALL

