"""FUSE passthrough: once every chunk of a file is on disk and verified,
its opens are answered with a backing file and the kernel reads the cache
file directly (the daemon sees no READ). Partly cached files, changed
files and a damaged cache stay on the daemon path; an inode never mixes
modes; a file with passthrough opens is not evicted, and one that gives up
its last chunks keeps the rest in a new data file; --passthrough off
and a daemon without CAP_SYS_ADMIN fall back to the daemon path."""

import errno
import os
import shutil
import subprocess
import tempfile

import pytest

from checks import cached, data_files, flip_cached_byte, rnd, spare_files
from mountlib import binary_for_others, wait_for
from util import CHUNK, put, read_uncached



def blocks(n):
    return (n + 4095) // 4096 * 4096


def warm(m, name, data):
    """read @name through the daemon and wait until it is all on disk"""
    assert read_uncached(m.path(name)) == data
    assert wait_for(lambda: cached(m, name) == blocks(len(data)))


def until_passthrough(m, name, data):
    """open @name until an open goes passthrough: a close reaches the
    daemon (RELEASE) after close() returned, and while a cached-mode open
    of the inode is not released the next open stays in cached mode"""
    def one():
        n = m.stats()["passthrough_opens"]
        assert read_uncached(m.path(name)) == data
        return m.stats()["passthrough_opens"] > n
    assert wait_for(one)


def ctl_write(m, name, data):
    with open(os.path.join(m.mnt, ".fusefs", name), "wb") as f:
        f.write(data)


def test_complete_files_are_read_by_the_kernel(mounter, sized):
    m = mounter()
    for name, d in sized.items():
        warm(m, name, d)
        until_passthrough(m, name, d)
    before = m.stats()
    for name, d in sized.items():
        assert read_uncached(m.path(name)) == d, name       # exact at EOF
        with open(m.path(name), "rb") as f:                  # and inside
            f.seek(max(0, len(d) - 7))
            assert f.read() == d[max(0, len(d) - 7):]
            if len(d) > CHUNK:
                f.seek(CHUNK - 3)
                assert f.read(10) == d[CHUNK - 3:CHUNK + 7]
    after = m.stats()
    assert after["reads"] == before["reads"], "the daemon saw READs"
    assert after["passthrough_opens"] - before["passthrough_opens"] == 2 * len(sized)
    assert after["passthrough_bytes"] - before["passthrough_bytes"] == 2 * sum(
        map(len, sized.values()))
    assert "passthrough: on" in m.log()


def test_concurrent_opens_share_one_backing_file(mounter, src):
    """many threads opening the same complete files at once: each inode's
    first open registers its backing file (outside the daemon's lock) while
    the others wait for it; every open is a passthrough one and every byte
    right; the ids are released (a later open of each works)"""
    import threading
    files = {"c%d" % i: rnd(CHUNK + 4096 * i + 11, 60 + i) for i in range(4)}
    put(src, files)
    m = mounter()
    for name, d in files.items():
        warm(m, name, d)
        until_passthrough(m, name, d)
    before = m.stats()
    errors = []
    start = threading.Barrier(8)

    def worker(k):
        start.wait()
        for j in range(25):
            name = "c%d" % ((k + j) % len(files))
            try:
                with open(m.path(name), "rb") as f:
                    if f.read() != files[name]:
                        errors.append("%s: wrong bytes" % name)
            except OSError as e:
                errors.append("%s: %s" % (name, e))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]
    after = m.stats()
    assert after["reads"] == before["reads"], "the daemon saw READs"
    assert after["passthrough_opens"] - before["passthrough_opens"] == 8 * 25
    for name, d in files.items():
        assert read_uncached(m.path(name)) == d
    assert "backing file refused" not in m.log()


def test_partly_cached_file_stays_on_the_daemon_path(mounter, src):
    d = rnd(3 * CHUNK, 5)
    put(src, {"p": d})
    m = mounter("--readahead", "0")
    with open(m.path("p"), "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_RANDOM)  # no kernel read-ahead
        assert f.read(4096) == d[:4096]                      # chunk 0 only
    assert wait_for(lambda: cached(m, "p") == CHUNK)
    before = m.stats()
    assert read_uncached(m.path("p")) == d
    after = m.stats()
    assert after["passthrough_opens"] == before["passthrough_opens"]
    assert after["reads"] > before["reads"]
    # complete now: the next opens go passthrough
    assert wait_for(lambda: cached(m, "p") == 3 * CHUNK)
    until_passthrough(m, "p", d)


def test_flipped_byte_is_never_served_through_passthrough(mounter, src, tmp_path):
    d = rnd(2 * CHUNK + 100, 6)
    put(src, {"f": d})
    cache = str(tmp_path / "cache")
    m = mounter(cache=cache)
    warm(m, "f", d)
    m.umount()
    flip_cached_byte(cache, at=CHUNK + 5)
    m = mounter(cache=cache)
    # verified at open: the damaged chunk is dropped, this open reads
    # through the daemon and refetches it
    assert read_uncached(m.path("f")) == d
    s = m.stats()
    assert s["checksum_failures"] == 1 and s["passthrough_opens"] == 0, s
    assert wait_for(lambda: cached(m, "f") == blocks(len(d)))
    until_passthrough(m, "f", d)


def test_changed_file_is_not_served_from_the_old_backing_file(mounter, src):
    put(src, {"c": b"A" * 5000})
    m = mounter("--revalidate", "0")
    warm(m, "c", b"A" * 5000)
    until_passthrough(m, "c", b"A" * 5000)
    with open(src / "c", "wb") as f:
        f.write(b"B" * 7000)
    assert read_uncached(m.path("c")) == b"B" * 7000
    assert m.stats()["stale_objects"] == 1


def test_shared_old_backing_file_is_never_emptied(mounter, src, tmp_path):
    """an open that joined an older version's backing file (the inode had a
    passthrough open when the object changed) still reads that version
    whole once the older version's entry goes: its data file is unlinked,
    never emptied and reused as a spare (the file was lent: cache.h)"""
    old, new = rnd(CHUNK + 5, 10), rnd(CHUNK + 9, 11)
    put(src, {"s": old})
    cache = str(tmp_path / "cache")
    m = mounter("--revalidate", "0", cache=cache)
    warm(m, "s", old)
    until_passthrough(m, "s", old)
    n = m.stats()["passthrough_opens"]
    (v1,) = data_files(cache)
    a = open(m.path("s"), "rb")
    with open(src / "s", "wb") as f:
        f.write(new)
    b = open(m.path("s"), "rb")             # the new version's entry, the old backing
    try:
        assert m.stats()["passthrough_opens"] == n + 2
        a.close()                           # the old version's entry goes
        assert wait_for(lambda: v1 not in data_files(cache))
        assert m.stats()["stale_objects"] == 1
        os.posix_fadvise(b.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        assert b.read() == old
    finally:
        a.close()
        b.close()
    assert spare_files(cache) == []
    assert read_uncached(m.path("s")) == new


def test_one_mode_per_inode(mounter, src):
    d = rnd(2 * CHUNK, 7)
    put(src, {"x": d})
    m = mounter("--readahead", "0")
    # a cached-mode open stays open while the file becomes complete
    with open(m.path("x"), "rb") as held:
        os.posix_fadvise(held.fileno(), 0, 0, os.POSIX_FADV_RANDOM)
        assert held.read(4096) == d[:4096]
        assert read_uncached(m.path("x")) == d
        assert wait_for(lambda: cached(m, "x") == 2 * CHUNK)
        # complete, but the inode has a cached-mode open: no passthrough
        # beside it (the kernel would answer EIO)
        assert read_uncached(m.path("x")) == d
        assert m.stats()["passthrough_opens"] == 0
        held.seek(CHUNK)
        assert held.read(4096) == d[CHUNK:CHUNK + 4096]
    # all closed: passthrough, and further opens share it
    until_passthrough(m, "x", d)
    n = m.stats()["passthrough_opens"]
    with open(m.path("x"), "rb") as a, open(m.path("x"), "rb") as b:
        assert a.read() == d and b.read() == d
    assert m.stats()["passthrough_opens"] == n + 2


def test_file_with_passthrough_opens_is_not_evicted(mounter, src):
    """an evict of a file the kernel reads by passthrough waits for its
    last close"""
    d = rnd(CHUNK + 1, 8)
    put(src, {"e": d})
    m = mounter()
    warm(m, "e", d)
    until_passthrough(m, "e", d)
    with open(m.path("e"), "rb") as f:
        ctl_write(m, "evict", b"e\n")                   # in use: deferred
        assert cached(m, "e") == blocks(len(d))
        assert m.stats()["evictions"] == 0
        assert f.read() == d
    assert wait_for(lambda: cached(m, "e") == 0)        # at the RELEASE
    assert m.stats()["evictions"] == 1
    assert read_uncached(m.path("e")) == d


def test_lent_file_gives_up_its_tail_by_a_move(mounter, src, tmp_path):
    """a file read through passthrough (lent to the kernel) whose last
    chunk the cache needs room for keeps its first chunks: they are copied
    into a new data file renamed over the one the kernel was given, which
    is never punched (before: the whole file went, and its head was
    fetched again); it reads whole again, and after a remount too"""
    # (a file held for passthrough takes at most half the cache: 4 of 9)
    big, o = rnd(4 * CHUNK, 21), rnd(6 * CHUNK, 22)
    put(src, {"big": big, "o": o})
    cache = str(tmp_path / "cache")
    m = mounter("--cache-size", "9M", "--readahead", "0", cache=cache)
    warm(m, "big", big)
    until_passthrough(m, "big", big)
    (v1,) = data_files(cache)
    ino = os.stat(v1).st_ino
    # big is read first (so nothing takes it while the lists are set up),
    # then an epoch that reads o, then one that reads o and big: o's last
    # chunk takes the room of big's last one, needed last
    ctl_write(m, "lists/t", b"# epoch 0\n# begin\nbig\n")
    ctl_write(m, "lists/t", b"# epoch 1\no\n")
    ctl_write(m, "lists/t", b"# epoch 2\no\nbig\n")
    assert m.stats()["lent_moves"] == 0 and cached(m, "big") == 4 * CHUNK
    ctl_write(m, "lists/t", b"# epoch 1\n# begin\n")
    # (read again until stored: big's last RELEASE may come after the
    # first read, and a file held by a passthrough open is no victim)
    assert wait_for(lambda: read_uncached(m.path("o")) == o and
                    cached(m, "o") == 6 * CHUNK)
    assert m.stats()["lent_moves"] == 1
    assert cached(m, "big") == 3 * CHUNK
    assert v1 in data_files(cache) and os.stat(v1).st_ino != ino
    assert not [f for f in data_files(cache) if "/move-" in f]
    assert spare_files(cache) == []
    assert read_uncached(m.path("big")) == big
    m.umount()
    m = mounter("--cache-size", "9M", "--readahead", "0", cache=cache)
    assert read_uncached(m.path("big")) == big
    assert m.stats()["checksum_failures"] == 0


def test_sigkill_with_passthrough_opens_then_remount(mounter, src, tmp_path):
    d = rnd(2 * CHUNK + 3, 9)
    put(src, {"k": d})
    cache = str(tmp_path / "cache")
    m = mounter(cache=cache)
    warm(m, "k", d)
    # the chunk records were queued as the chunks were stored: committed
    # once nothing is queued (the index is committed every 250 ms)
    assert wait_for(lambda: m.stats()["index_queued"] == 0), m.stats()
    f = open(m.path("k"), "rb")
    assert f.read(100) == d[:100]
    m.kill()
    f.close()
    m = mounter(cache=cache)
    assert read_uncached(m.path("k")) == d
    s = m.stats()
    assert s["bytes_from_backend"] == 0, s            # the cache was reused
    assert s["passthrough_opens"] == 1, s             # verified at open


def test_passthrough_off(mounter, sized):
    m = mounter("--passthrough", "off")
    warm(m, "big", sized["big"])
    before = m.stats()["reads"]
    assert read_uncached(m.path("big")) == sized["big"]
    s = m.stats()
    assert s["passthrough_opens"] == 0 and s["reads"] > before
    assert "passthrough: off" in m.log()


NOCAP_SCRIPT = r"""
set -eu
if [ "$(stat -c %a /dev/fuse)" != 666 ]; then
    mknod -m 0666 "$BASE/fuse" c 10 229
    mount --bind "$BASE/fuse" /dev/fuse          # private mount namespace
fi
runuser -u nobody -- "$BIN" "file://$BASE/src" "$BASE/mnt" --cache-dir "$BASE/cache" \
    --chunk-size 1M -f > "$BASE/log" 2>&1 &
pid=$!
for i in $(seq 100); do mountpoint -q "$BASE/mnt" && break; sleep 0.1; done
for i in 1 2; do
    runuser -u nobody -- cmp "$BASE/src/n" "$BASE/mnt/n"
    sleep 0.5
done
runuser -u nobody -- getfattr --only-values -n user.fusefs.stats "$BASE/mnt"
runuser -u nobody -- fusermount3 -u "$BASE/mnt"
wait $pid
echo "exit $?"
"""


def test_non_root_falls_back_to_the_daemon_path(src):
    """a daemon without CAP_SYS_ADMIN (a notebook user, an unprivileged
    pod) cannot register backing files: it says so once and serves every
    read itself. Run as nobody in a private mount namespace (where
    /dev/fuse is made usable by everyone, as a Debian host's udev does)."""
    d = rnd(CHUNK + 10, 10)
    base = tempfile.mkdtemp(prefix="fusefs-nocap-")    # traversable by nobody
    try:
        os.chmod(base, 0o755)
        os.mkdir(os.path.join(base, "src"), 0o755)
        put(os.path.join(base, "src"), {"n": d})
        os.chmod(os.path.join(base, "src", "n"), 0o644)
        for sub in ("mnt", "cache"):
            os.mkdir(os.path.join(base, sub), 0o700)
            shutil.chown(os.path.join(base, sub), "nobody", "nogroup")
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            NOCAP_SCRIPT], capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, BASE=base, BIN=binary_for_others(base)))
        log = open(os.path.join(base, "log")).read()
        assert r.returncode == 0, (r.stdout, r.stderr, log)
        assert "exit 0" in r.stdout, (r.stdout, log)
        st = dict(line.split() for line in r.stdout.splitlines() if len(line.split()) == 2)
        assert st["passthrough_opens"] == "0" and int(st["reads"]) > 0, st
        assert int(st["bytes_from_backend"]) == len(d), st     # second read: cache
        assert "passthrough: needs CAP_SYS_ADMIN" in log, log
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_unaligned_o_direct_reads_are_the_same_cold_and_warm(mounter, src):
    """O_DIRECT on a fusefs file has no alignment rule: the daemon serves
    any offset and length. A passthrough open's backing file is opened by
    the kernel with the caller's flags, so the cache file's file system
    would refuse pread(1000 bytes at 3) with EINVAL; an O_DIRECT open of a
    file in passthrough mode is therefore answered FOPEN_DIRECT_IO (its
    reads go through the daemon) and reads the same as on a cold file"""
    d = rnd(2 * CHUNK + 77, 12)
    put(src, {"od": d})
    m = mounter()

    def direct_reads():
        fd = os.open(m.path("od"), os.O_RDONLY | os.O_DIRECT)
        try:
            assert os.pread(fd, 1000, 3) == d[3:1003]
            assert os.pread(fd, 4097, CHUNK - 5) == d[CHUNK - 5:CHUNK + 4092]
            assert os.pread(fd, 100, len(d) - 10) == d[-10:]
        finally:
            os.close(fd)

    direct_reads()                                  # cold: the daemon
    warm(m, "od", d)
    until_passthrough(m, "od", d)
    reads = m.stats()["reads"]
    direct_reads()                                  # warm, passthrough mode
    assert m.stats()["reads"] > reads               # served by the daemon
    # beside a passthrough open that stays open (the inode's mode is
    # passthrough while it is open), and that open still reads directly
    with open(m.path("od"), "rb") as held:
        direct_reads()
        os.posix_fadvise(held.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        reads = m.stats()["reads"]
        assert held.read() == d
        assert m.stats()["reads"] == reads
