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


def test_planted_symlink_is_not_followed(mounter, src, tmp_path):
    data = rnd(2 * MiB + 5, 3)
    put(src, {"f": data})
    cache = str(tmp_path / "cache")
    m = mounter(cache=cache)
    assert read_uncached(m.path("f")) == data
    m.umount()
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
