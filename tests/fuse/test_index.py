"""A damaged cache index never stops the mount: a data.mdb that was cut
short (8 KiB, a quarter, half of its size) or overwritten is found before
LMDB maps it (it used to kill the daemon with SIGBUS at every start), set
aside as index.broken-TIMESTAMP, and the mount starts with an empty index:
every byte is then fetched again from the source, and the old data files
are swept as orphans.  A cache of a newer format is refused untouched."""

import glob
import os
import subprocess

import pytest

from checks import cached, data_files, rnd
import mountlib
from mountlib import run_fusefs, wait_for
from util import read_uncached

DAMAGE = ["cut_8k", "cut_quarter", "cut_half", "garbage"]


def damage(path, how):
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if how == "cut_8k":
            f.truncate(8192)
        elif how == "cut_quarter":
            f.truncate(size // 4)
        elif how == "cut_half":
            f.truncate(size // 2)
        else:
            f.write(rnd(size, 5))
    return os.path.getsize(path)


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_index_is_set_aside(mounter, sized, tmp_path, how):
    cache = str(tmp_path / "c")
    m = mounter(cache=cache)
    for name, d in sized.items():
        assert read_uncached(m.path(name)) == d
    m.umount()
    assert data_files(cache)
    mdb = os.path.join(cache, "index", "data.mdb")
    assert os.path.getsize(mdb) > 32768      # more than LMDB's meta pages
    left = damage(mdb, how)

    m2 = mounter(cache=cache)
    for name, d in sized.items():
        assert read_uncached(m2.path(name)) == d, name
    s = m2.stats()
    # nothing came from the old cache: every byte was fetched again
    assert s["bytes_from_backend"] == sum(map(len, sized.values())), s
    assert s["verified_chunks"] == 0 and s["checksum_failures"] == 0, s
    log = m2.log()
    lines = [ln for ln in log.splitlines() if "is damaged" in ln]
    assert len(lines) == 1, log
    aside = glob.glob(os.path.join(cache, "index.broken-*"))
    assert len(aside) == 1, os.listdir(cache)
    assert f"moved to {aside[0]}" in lines[0], lines[0]
    assert "starting with an empty index" in lines[0]
    # the damaged file is kept as it was, for a post-mortem
    assert os.path.getsize(os.path.join(aside[0], "data.mdb")) == left
    m2.umount()

    # the new index is used by the next start, nothing set aside again
    m3 = mounter("--list-refresh", "0", cache=cache)     # no re-listing at remount
    for name, d in sized.items():
        assert read_uncached(m3.path(name)) == d
    s = m3.stats()
    assert s["bytes_from_backend"] == 0 and s["listings"] == 0, s
    assert "is damaged" not in m3.log()
    assert len(glob.glob(os.path.join(cache, "index.broken-*"))) == 1


def data_file_of(cache, ino):
    """the data file of the entry with inode number @ino"""
    (path,) = [p for p in data_files(cache)
               if os.path.basename(p).startswith("%016x-" % ino)]
    return path


def test_eviction_not_committed_before_a_crash(mounter, sized, tmp_path):
    """An eviction punches chunks (or unlinks a data file) at once and
    commits the removal of their index records up to a batch later; a
    daemon killed in between leaves records for bytes that are gone.  The
    next start forgets them (one log line), so they neither count as
    cached nor fail their checksums as if the disk were damaged."""
    cache = str(tmp_path / "c")
    m = mounter(cache=cache)
    for name, d in sized.items():
        assert read_uncached(m.path(name)) == d
    ino = {n: os.stat(m.path(n)).st_ino for n in ("big", "chunk_plus_1")}
    # chunks are stored after the reply: count them once all are there
    assert wait_for(lambda: all(cached(m, n) == (len(d) + 4095) // 4096 * 4096
                                for n, d in sized.items()))
    used = m.stats()["cache_bytes_used"]
    m.umount()

    # what the crash left: the second chunk of "big" punched, the data
    # file of "chunk_plus_1" gone, their records still in the index
    big = data_file_of(cache, ino["big"])
    chunk = len(sized["chunk"])
    subprocess.run(["fallocate", "-p", "-o", str(chunk), "-l", str(chunk), big],
                   check=True)
    os.unlink(data_file_of(cache, ino["chunk_plus_1"]))

    m2 = mounter("--list-refresh", "0", cache=cache)
    s = m2.stats()
    # a chunk, and a chunk plus one 4 KiB block
    assert s["cache_bytes_used"] == used - 2 * chunk - 4096, (used, s)
    for name, d in sized.items():
        assert read_uncached(m2.path(name)) == d, name
    s = m2.stats()
    assert s["checksum_failures"] == 0, s
    assert s["bytes_from_backend"] == 2 * chunk + 1, s
    lines = [ln for ln in m2.log().splitlines() if "were not on disk" in ln]
    assert len(lines) == 1 and "3 indexed chunks" in lines[0] and \
        "2 of them in 1 missing data files" in lines[0], m2.log()
    m2.umount()


def test_cache_of_a_newer_format_is_refused_untouched(mounter, sized, src, tmp_path):
    """a cache directory written by a newer fusefs (meta "format" above 1)
    is neither read nor rewritten nor wiped: the mount is refused"""
    cache = str(tmp_path / "c")
    m = mounter(cache=cache)
    for name, d in sized.items():
        assert read_uncached(m.path(name)) == d
    m.umount()
    idx = os.path.join(cache, "index")
    subprocess.run(["mdb_load", "-s", "meta", idx], check=True,
                   input=b"VERSION=3\nformat=print\ntype=btree\nHEADER=END\n"
                         b" format\n 2\nDATA=END\n")
    files = {p: os.path.getsize(p) for p in data_files(cache)}
    assert files
    mnt = tmp_path / "m2"
    mnt.mkdir()
    try:
        r = run_fusefs("mount", f"file://{src}", str(mnt), "-f", "--cache-dir", cache,
                       "--chunk-size", "1M", timeout=30)
    finally:    # a binary that took the cache mounted it (its -f run timed out)
        if str(mnt) in open("/proc/self/mounts").read():
            subprocess.run(["fusermount3", "-uz", str(mnt)], check=False)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "is of format 2; this fusefs reads format 1 only" in r.stderr, r.stderr
    assert not os.path.ismount(mnt)
    assert {p: os.path.getsize(p) for p in data_files(cache)} == files
    dump = subprocess.run(["mdb_dump", "-p", "-s", "meta", idx], capture_output=True,
                          text=True, check=True).stdout
    assert " format\n 2\n" in dump, dump


# seeded corruptions of data.mdb and of namespace.img; FUSEFS_INDEX_CORRUPTIONS
# sets how many (make faults runs 200).  58: c4fc1e7 exits 1 within them (a
# damaged index that only a write finds).  Which record a flipped byte lands
# in depends on how the index's pages were laid out, which varies from run
# to run: a flipped version string or object name is caught by the record's
# seal (recfmt.h), and a stored listing with a damaged record is listed again.
CORRUPTIONS = int(os.environ.get("FUSEFS_INDEX_CORRUPTIONS", "58"))


def corrupt(path, rng):
    """flip bytes at random offsets, or truncate; what was done"""
    size = os.path.getsize(path)
    how = rng.choice(["flip", "flip", "flip", "truncate"])
    with open(path, "r+b") as f:
        if how == "truncate":
            n = rng.randrange(0, size)
            f.truncate(n)
            return f"truncated to {n}"
        offs = sorted(rng.randrange(0, size) for _ in range(rng.choice([1, 4, 64])))
        for o in offs:
            f.seek(o)
            b = f.read(1)
            f.seek(o)
            f.write(bytes([b[0] ^ rng.randrange(1, 256)]))
        return f"{len(offs)} bytes flipped at {offs[:8]}"


def stopped(m, what):
    """unmount @m: a clean exit (a leaf page whose node table was damaged
    once passed the probe's reads, and LMDB's memmove ran past it at a
    commit: the probe checks every leaf page now)"""
    rc, log = m.stop()
    assert not [w for w in mountlib.BAD_WORDS if w in log], (what, log)
    assert rc == 0, (what, rc, log)


def test_random_corruptions_never_stop_the_mount(mounter, sized, tmp_path):
    """data.mdb or the namespace image damaged at random (seeded): the mount
    comes up every time and serves the right bytes; a damaged index that
    only a write finds is set aside all the same (docs/reliability.md)"""
    import random
    import shutil
    pristine = str(tmp_path / "pristine")
    m = mounter(cache=pristine)
    for name, d in sized.items():
        assert read_uncached(m.path(name)) == d
    m.umount()
    rng = random.Random(20261205)
    # no LeakSanitizer check at each of these daemons' exits (0.4 s each
    # here); the damaged-index paths are leak-checked by the tests above
    env = {"ASAN_OPTIONS": os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0"}
    for i in range(CORRUPTIONS):
        cache = str(tmp_path / "c")
        shutil.rmtree(cache, ignore_errors=True)
        shutil.copytree(pristine, cache)
        what = rng.choice(["index/data.mdb", "index/data.mdb", "namespace.img"])
        done = corrupt(os.path.join(cache, what), rng)
        m = mounter("--list-refresh", "0", cache=cache, env=env)
        for name, d in sized.items():
            assert read_uncached(m.path(name)) == d, (i, what, done, name)
        stopped(m, (i, what, done))   # exit status 0 checked
        m2 = mounter("--list-refresh", "0", cache=cache, env=env)   # and once more
        assert read_uncached(m2.path("big")) == sized["big"], (i, what, done)
        stopped(m2, (i, what, done, "again"))

