"""Verification off the read path and fewer round trips per file.

After a start that does not trust a clean stop's records (a crash, or
--trust-clean-stop off as here: test_clean_stop.py tests the records)
every cached chunk is UNVERIFIED: the background verifier
(src/verifier.c) reads and checks them all without any read through the
mount; a damaged chunk is dropped and refetched, never served (daemon
path and passthrough); readers of one unverified chunk share one
verification read; a passthrough open waits for its file's verification
and stays passthrough. Data-file opens send no FLUSH, and a changed
object is noticed by the background re-check and the kernel's cached
attributes dropped before their timeout ends."""

import os
import threading
import time

import pytest

from checks import cached, flip_cached_byte, rnd
from mountlib import wait_for
from util import CHUNK, put, read_uncached

# every mount over an earlier run's cache starts as after a crash
AFTER_CRASH = ("--trust-clean-stop", "off")


def blocks(n):
    return (n + 4095) // 4096 * 4096


def chunks(n):
    return (n + CHUNK - 1) // CHUNK


def warm_all(m, files):
    """read every file through the daemon and wait until it is all on disk
    (the index has it once the mount is unmounted: meta_close() commits
    what is queued)"""
    for name, d in files.items():
        assert read_uncached(m.path(name)) == d, name
    for name, d in files.items():
        assert wait_for(lambda: cached(m, name) == blocks(len(d))), name


def all_verified(m):
    return m.stats()["cache_chunks_unverified"] == 0


def test_verifier_checks_every_chunk_without_a_read(mounter, sized, tmp_path):
    cache = str(tmp_path / "cache")
    m = mounter(*AFTER_CRASH, cache=cache)
    warm_all(m, sized)
    m.umount()
    m = mounter(*AFTER_CRASH, cache=cache)
    assert wait_for(lambda: all_verified(m))
    s = m.stats()
    want = sum(chunks(len(d)) for d in sized.values())
    assert s["reads"] == 0 and s["passthrough_opens"] == 0, s
    assert s["verifier_chunks"] == want, s
    assert s["verified_chunks"] == want and s["verify_reads"] == want, s
    assert s["checksum_failures"] == 0 and s["verifier_failed"] == 0, s
    for name, d in sized.items():
        assert read_uncached(m.path(name)) == d, name
    s = m.stats()
    assert s["bytes_from_backend"] == 0 and s["verify_reads"] == want, s
    assert "verifier: every cached chunk verified" in m.log()


@pytest.mark.parametrize("passthrough", ["auto", "off"])
def test_damaged_chunk_found_by_the_verifier_is_refetched(mounter, src, tmp_path,
                                                          passthrough):
    d = rnd(2 * CHUNK + 100, 21)
    put(src, {"f": d})
    cache = str(tmp_path / "cache")
    m = mounter("--passthrough", passthrough, *AFTER_CRASH, cache=cache)
    warm_all(m, {"f": d})
    m.umount()
    flip_cached_byte(cache, at=CHUNK + 5)
    m = mounter("--passthrough", passthrough, *AFTER_CRASH, cache=cache)
    assert wait_for(lambda: all_verified(m))
    s = m.stats()
    assert s["reads"] == 0, s                            # found by the verifier
    assert s["verifier_failed"] == 1 and s["checksum_failures"] == 1, s
    assert s["verifier_chunks"] == 2, s
    assert cached(m, "f") == blocks(len(d)) - CHUNK      # dropped
    assert read_uncached(m.path("f")) == d               # never served
    s = m.stats()
    assert s["bytes_from_backend"] == CHUNK, s           # refetched, once
    assert s["passthrough_opens"] == 0, s                # was incomplete
    assert wait_for(lambda: cached(m, "f") == blocks(len(d)))
    if passthrough == "auto":
        def passthrough_open():
            n = m.stats()["passthrough_opens"]
            assert read_uncached(m.path("f")) == d
            return m.stats()["passthrough_opens"] > n
        assert wait_for(passthrough_open)


def test_concurrent_readers_of_one_chunk_share_one_verification(mounter, src,
                                                                tmp_path):
    """without the background verifier (--verify-depth 0) readers verify at
    first use: 8 readers of different pages of one unverified chunk cause
    one verification read, the others wait for its verdict"""
    d = rnd(CHUNK, 22)
    put(src, {"one": d})
    cache = str(tmp_path / "cache")
    args = ("--verify-depth", "0", "--passthrough", "off", "--readahead", "0")
    m = mounter(*args, *AFTER_CRASH, cache=cache)
    warm_all(m, {"one": d})
    m.umount()
    m = mounter(*args, *AFTER_CRASH, cache=cache)
    assert m.stats()["cache_chunks_unverified"] == 1
    go = threading.Barrier(8)
    got, errors = {}, []

    def reader(i):
        try:
            fd = os.open(m.path("one"), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
                go.wait()
                got[i] = os.pread(fd, 4096, i * (CHUNK // 8))
            finally:
                os.close(fd)
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(8):
        off = i * (CHUNK // 8)
        assert got[i] == d[off:off + 4096], i
    s = m.stats()
    assert s["verify_reads"] == 1 and s["verified_chunks"] == 1, s
    assert s["verifier_chunks"] == 0 and s["reads"] >= 2, s
    assert s["bytes_from_backend"] == 0, s


def test_passthrough_open_after_remount_waits_for_verification(mounter, src,
                                                               tmp_path):
    files = {"s%02d" % i: rnd(3 * CHUNK + i, 30 + i) for i in range(8)}
    put(src, files)
    cache = str(tmp_path / "cache")
    m = mounter(*AFTER_CRASH, cache=cache)
    warm_all(m, files)
    m.umount()
    m = mounter(*AFTER_CRASH, cache=cache)
    # at once, while the verifier works through the others: this open is
    # verified first and then read by the kernel, not by the daemon
    assert read_uncached(m.path("s07")) == files["s07"]
    s = m.stats()
    assert s["passthrough_opens"] == 1 and s["reads"] == 0, s
    assert s["bytes_from_backend"] == 0, s
    for name, d in files.items():
        assert read_uncached(m.path(name)) == d, name
    s = m.stats()
    assert s["reads"] == 0 and s["passthrough_opens"] == 1 + len(files), s
    assert wait_for(lambda: all_verified(m))
    assert m.stats()["verify_reads"] == sum(chunks(len(d)) for d in files.values())


def test_data_files_send_no_flush(mounter, sized):
    m = mounter("--readahead", "0")
    for name, d in sized.items():
        assert read_uncached(m.path(name)) == d        # daemon path
    for name, d in sized.items():
        assert wait_for(lambda: cached(m, name) == blocks(len(d)))
        with open(m.path(name), "rb") as f:            # passthrough or not
            assert f.read() == d
    assert m.stats()["data_flushes"] == 0
    # the control files still get theirs (commit on close)
    with open(os.path.join(m.mnt, ".fusefs", "unpin"), "wb") as f:
        f.write(b"zero\n")             # (an evict may find it still open)
    assert m.stats()["data_flushes"] == 0


def test_changed_object_invalidates_the_kernels_attributes(mounter, src, hooks):
    """attributes are cached by the kernel for --revalidate seconds; a
    re-check that finds a change drops them at once.  The revalidate-s
    hook makes the daemon's answer stale at once while the kernel keeps
    the attributes for an hour: only the drop can show the new size"""
    put(src, {"c": b"A" * 5000})
    hooks.set("revalidate-s", 0)
    m = mounter("--revalidate", "3600", env=hooks.env)
    assert os.stat(m.path("c")).st_size == 5000
    with open(src / "c", "wb") as f:
        f.write(b"B" * 7000)
    assert os.stat(m.path("c")).st_size == 5000    # the kernel's copy
    os.close(os.open(m.path("c"), os.O_RDONLY))   # queues a re-check
    assert wait_for(lambda: os.stat(m.path("c")).st_size == 7000,
                    timeout=60)
    assert m.stats()["stale_objects"] + m.stats()["revalidations"] >= 1
    assert read_uncached(m.path("c")) == b"B" * 7000


def test_data_files_stay_open_between_opens(mounter, sized):
    """an open of a cached file reuses the data files the previous open
    left open (no open/close pair per FUSE open)"""
    m = mounter()
    for name, d in sized.items():
        assert read_uncached(m.path(name)) == d
    for name, d in sized.items():
        assert wait_for(lambda: cached(m, name) == blocks(len(d)))
    n = m.stats()["data_file_opens"]
    assert 0 < n <= len(sized)
    for _ in range(3):
        for name, d in sized.items():
            assert read_uncached(m.path(name)) == d
    assert m.stats()["data_file_opens"] == n


def test_daemon_path_reader_gets_the_verified_chunks_from_memory(mounter, src,
                                                                tmp_path, hooks):
    """a file open on the daemon path is verified before the others, and
    its chunks go to the read path's memory: the reader does not read them
    from disk a second time (bytes_from_disk: the daemon's reads of its
    data files for replies). The verifier-background hook holds the other
    files' verification until the test is done, so every chunk of the
    open file is verified while it is open, none before."""
    d = rnd(4 * CHUNK + 9, 23)
    hot = {"h%02d" % i: rnd(4 * CHUNK, 40 + i) for i in range(8)}
    put(src, dict(hot, o=d))
    cache = str(tmp_path / "cache")
    args = ("--passthrough", "off", "--verify-depth", "1")
    m = mounter(*args, *AFTER_CRASH, cache=cache)
    warm_all(m, hot)
    warm_all(m, dict(hot, o=d))       # the others are hotter: verified first
    m.umount()
    hooks.set("verifier-background", 0)
    m = mounter(*args, *AFTER_CRASH, cache=cache, env=hooks.env)
    with open(m.path("o"), "rb") as f:
        assert wait_for(lambda: unverified(m, "o") == 0, timeout=60), m.stats()
        s = m.stats()
        assert s["verifier_chunks"] == 5 and s["verifier_kept"] == 5, s
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        assert f.read() == d
    s1 = m.stats()
    assert s1["reads"] > 0 and s1["bytes_from_disk"] == s["bytes_from_disk"], (s, s1)
    hooks.open("verifier-background")
    assert wait_for(lambda: all_verified(m), timeout=60), m.stats()
    assert m.stats()["verifier_chunks"] == 5 + 4 * len(hot)


def test_unmount_while_verifying_keeps_every_chunk(mounter, src, tmp_path):
    """stopping the daemon with verification reads in flight settles or
    abandons them, never drops a good chunk (io_uring cancels the reads of
    a thread that exits: they must be finished first)"""
    files = {"u%02d" % i: rnd(4 * CHUNK, 60 + i) for i in range(16)}
    put(src, files)
    cache = str(tmp_path / "cache")
    m = mounter(*AFTER_CRASH, cache=cache)
    warm_all(m, files)
    m.umount()
    for i in range(2):
        m = mounter(*AFTER_CRASH, cache=cache)
        # a passthrough open: complete files are now verified with
        # buffered reads (io_uring runs those on its workers)
        assert read_uncached(m.path("u%02d" % i)) == files["u%02d" % i]
        m.umount()                          # at once: the verifier is busy
    m = mounter(*AFTER_CRASH, cache=cache)
    assert wait_for(lambda: all_verified(m))
    s = m.stats()
    assert s["checksum_failures"] == 0 and s["verifier_failed"] == 0, s
    lost = [name for name in files if cached(m, name) != 4 * CHUNK]
    assert not lost
    for name, d in files.items():
        assert read_uncached(m.path(name)) == d, name
    assert m.stats()["bytes_from_backend"] == 0



def test_daemon_path_verifier_waits_while_files_are_opened(mounter, src, tmp_path,
                                                          hooks):
    """on the daemon path the verifier leaves files nobody opened alone
    while readers open files (its O_DIRECT reads would only double
    theirs), and one-chunk files are checked by their readers; once no
    file was opened for a while (QUIET_MS, 5 s here through the
    verifier-quiet-ms hook), it verifies the rest"""
    files = {"s%02d" % i: rnd(CHUNK - i, 60 + i) for i in range(60)}
    put(src, files)
    cache = str(tmp_path / "cache")
    args = ("--passthrough", "off", "--verify-depth", "1")
    m = mounter(*args, *AFTER_CRASH, cache=cache)
    warm_all(m, files)
    read = ["s57", "s58", "s59"]
    m.umount()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")                   # the verifier reads from disk
    # every remount starts with all chunks unverified; the hook holds the
    # verifier's background reads until the first open is done (however
    # fast the disk), then a 5 s quiet period makes a pause of the loop
    # below too long to matter
    hooks.set("verifier-background", 0)
    hooks.set("verifier-quiet-ms", 5000)
    m = mounter(*args, *AFTER_CRASH, cache=cache, env=hooks.env)
    assert read_uncached(m.path(read[0])) == files[read[0]]
    s0 = m.stats()
    assert s0["cache_chunks_unverified"] == len(files) - 1, s0
    hooks.open("verifier-background")
    # from the first open on the verifier leaves the rest alone: one that
    # did not wait would check some of these 59 while the test opens files
    t_end = time.time() + 2.5
    while time.time() < t_end:         # an open every ~20 ms
        for name in read:
            assert read_uncached(m.path(name)) == files[name]
            time.sleep(0.01)
    s1 = m.stats()
    assert s1["verifier_chunks"] - s0["verifier_chunks"] <= 1, (s0, s1)
    assert s1["cache_chunks_unverified"] >= s0["cache_chunks_unverified"] - 3, (s0, s1)
    assert wait_for(lambda: all_verified(m), timeout=60), m.stats()
    s = m.stats()
    assert s["checksum_failures"] == 0 and s["verifier_failed"] == 0, s


def unverified(m, rel):
    return int(os.getxattr(m.path(rel), "user.fusefs.unverified"))


def test_verifier_goes_on_in_the_directory_an_open_waited_in(mounter, src,
                                                            tmp_path, hooks):
    """after a restart the verifier checks the hottest files first; once an
    open waited for a file, the other files of its directory come before
    them (the job that runs now reads that directory, the hottest files may
    be another dataset's). Chunks not verified yet are shown per file by
    user.fusefs.unverified"""
    hot = {"a/f%02d" % i: rnd(4 * CHUNK - i, 80 + i) for i in range(30)}
    cold = {"b/f%02d" % i: rnd(CHUNK - i, 120 + i) for i in range(20)}
    put(src, {**hot, **cold})
    cache = str(tmp_path / "cache")
    args = ("--verify-depth", "1")
    m = mounter(*args, *AFTER_CRASH, cache=cache)
    warm_all(m, {**hot, **cold})
    for _ in range(2):                 # a/ is read more: hotter than b/
        for name, d in hot.items():
            assert read_uncached(m.path(name)) == d, name
    a_chunks = sum(chunks(len(d)) for d in hot.values())
    m.umount()                         # heat reaches the index
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("1")                   # the verifier reads from disk
    # the hook holds the background reads (files nobody opened) until the
    # test allows them, 19 at first: exactly b/'s other one-chunk files
    hooks.set("verifier-background", 0)
    m = mounter(*args, *AFTER_CRASH, cache=cache, env=hooks.env)
    assert unverified(m, "b/f00") == 1
    assert read_uncached(m.path("b/f00")) == cold["b/f00"]
    assert unverified(m, "b/f00") == 0
    assert sum(unverified(m, n) for n in hot) == a_chunks
    hooks.set("verifier-background", len(cold) - 1)
    assert wait_for(lambda: all(unverified(m, n) == 0 for n in cold),
                    timeout=30), m.stats()
    # a verifier going by heat alone would have spent them on a/
    assert sum(unverified(m, n) for n in hot) == a_chunks
    hooks.open("verifier-background")
    assert wait_for(lambda: all_verified(m), timeout=60), m.stats()
    assert all(unverified(m, n) == 0 for n in hot)
    assert os.listxattr(m.path("a/f00")) == []      # read by name, never listed
    s = m.stats()
    assert s["checksum_failures"] == 0 and s["verifier_failed"] == 0, s


def test_verifier_warning_names_a_file_not_opened_since_the_start(mounter, src, tmp_path):
    """the background verifier checks files nobody opened since the
    restart, whose entries come from the index without their object name:
    its warning named them '' ("cached chunk 1 of '' failed
    verification"); it names them by inode number, which `find MNT -inum`
    turns into the path"""
    d = rnd(2 * CHUNK + 100, 23)
    put(src, {"dir/unopened": d})
    cache = str(tmp_path / "cache")
    m = mounter(*AFTER_CRASH, cache=cache)
    warm_all(m, {"dir/unopened": d})
    m.umount()
    flip_cached_byte(cache, at=CHUNK + 5)
    m = mounter(*AFTER_CRASH, cache=cache)
    assert wait_for(lambda: all_verified(m))
    s = m.stats()
    assert s["reads"] == 0 and s["verifier_failed"] == 1, s
    log = m.log()
    assert "of ''" not in log, log
    ino = os.stat(m.path("dir/unopened")).st_ino
    assert "cached chunk 1 of inode %d " % ino in log, log
    assert "find MOUNTPOINT -inum %d" % ino in log, log
    assert read_uncached(m.path("dir/unopened")) == d
