"""The cache directory is trusted only when nobody else can subvert it:
it must belong to the daemon's user and be writable by nobody else, its
index and data entries must be real directories, and nothing planted in
it (a symlink in place of a data file) is ever followed. An object whose
size changed under an unchanged version is not served from the old
bytes."""

import os

from mountlib import BAD_WORDS, run_fusefs
from checks import MiB, data_files, rnd
from util import put, read_uncached


def refused(tmp_path, cache, message):
    mnt = tmp_path / "mnt-refused"
    mnt.mkdir(exist_ok=True)
    src = tmp_path / "src"
    r = run_fusefs("mount", f"file://{src}", str(mnt), "-f", "--cache-dir", str(cache),
                   timeout=30)
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert not [w for w in BAD_WORDS if w in r.stderr], r.stderr
    assert not os.path.ismount(mnt)


def test_writable_by_others_is_refused(tmp_path, src):
    cache = tmp_path / "shared"
    cache.mkdir()
    os.chmod(cache, 0o777)
    refused(tmp_path, cache, "is writable by others (mode 0777)")
    os.chmod(cache, 0o775)
    refused(tmp_path, cache, "is writable by others (mode 0775)")


def test_foreign_owner_is_refused(tmp_path, src):
    cache = tmp_path / "foreign"
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, 65534)
    refused(tmp_path, cache, "belongs to uid 65534")


def test_symlinked_subdirectory_is_refused(tmp_path, src):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = tmp_path / "c"
    cache.mkdir(mode=0o700)
    os.symlink(elsewhere, cache / "data")
    refused(tmp_path, cache, "/data is not a directory (a symlink)")
    assert os.listdir(elsewhere) == []


def test_symlinked_spare_directory_is_refused(tmp_path, src):
    """evicted data files are kept in data/spare: never somewhere else"""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "0").write_bytes(b"precious")
    cache = tmp_path / "c"
    (cache / "data").mkdir(mode=0o700, parents=True)
    os.symlink(elsewhere, cache / "data" / "spare")
    refused(tmp_path, cache, "/data/spare is not a directory (a symlink)")
    assert os.listdir(elsewhere) == ["0"]
    assert (elsewhere / "0").read_bytes() == b"precious"


def cached_file(mounter, src, tmp_path, seed):
    """file f cached by a mount that is gone again: its bytes, the cache"""
    data = rnd(2 * MiB + 5, seed)
    put(src, {"f": data})
    cache = str(tmp_path / "cache")
    m = mounter(cache=cache)
    assert read_uncached(m.path("f")) == data
    m.umount()
    return data, cache


def test_planted_symlink_is_not_followed(mounter, src, tmp_path):
    data, cache = cached_file(mounter, src, tmp_path, 3)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious" * 1000)
    (path,) = data_files(cache)
    os.unlink(path)
    os.symlink(victim, path)                    # a data file replaced by a symlink
    m = mounter(cache=cache)
    assert read_uncached(m.path("f")) == data   # refetched, never read through the link
    assert victim.read_bytes() == b"precious" * 1000
    assert not os.path.islink(path)
    st = m.stats()
    assert st["bytes_from_backend"] == len(data), st


def test_symlinked_cache_dir_is_refused(tmp_path, src):
    """--cache-dir is opened once with O_NOFOLLOW: a symlink (here to a
    directory of another user, who could re-point it) is never used"""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    link = tmp_path / "cache-link"
    os.symlink(theirs, link)
    refused(tmp_path, link, f"cache directory {link} is a symlink: refusing it")
    assert os.listdir(theirs) == []


def test_cache_dir_path_repointed_after_start_is_not_used(mounter, src, tmp_path):
    """every file of the cache is opened relative to the directory opened
    at start: renaming it and putting another directory at its path
    changes nothing the daemon does"""
    data = rnd(MiB + 7, 9)
    put(src, {"f": data, "g": data[::-1]})
    cache = tmp_path / "cache"
    m = mounter(cache=str(cache))
    assert read_uncached(m.path("f")) == data
    moved = tmp_path / "cache-moved"
    os.rename(cache, moved)
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    os.symlink(other, cache)                   # the old path leads elsewhere
    assert read_uncached(m.path("g")) == data[::-1]   # uncached: written to the cache
    assert os.listdir(other) == []
    assert len(data_files(str(moved))) == 2
    m.umount()
    os.unlink(cache)
    os.rename(moved, cache)


def test_planted_hard_link_is_not_written_through(mounter, src, tmp_path):
    """a data file that is a hard link (another file's second name) is
    neither trusted nor written: it is unlinked and the file fetched again"""
    data, cache = cached_file(mounter, src, tmp_path, 4)
    victim = tmp_path / "victim"
    precious = b"precious" * ((len(data) + 7) // 8)
    victim.write_bytes(precious)
    (path,) = data_files(cache)
    os.unlink(path)
    os.link(victim, path)                       # a data file replaced by a hard link
    m = mounter(cache=cache)
    assert read_uncached(m.path("f")) == data   # right bytes, fetched again
    m.umount()
    assert victim.read_bytes() == precious      # never written through
    assert os.stat(victim).st_nlink == 1
