"""The cache disk fills up (issue 13, items 4 and 7): the cache directory
lives on a small loop-mounted ext4 file system that something else
(a ballast file) fills after the mount. Readers still get every byte (from the source when the
chunk cannot be stored), the daemon neither crashes nor floods its log
(one rate-limited line per episode), what it did store stays correct,
and after a restart on the same full disk the cache is reused and the
rest is fetched again. A file:// source is enough: the cluster adds
nothing to what the cache disk does."""

import os
import shutil
import subprocess

import pytest

from checks import MiB, rnd
from util import put, read_uncached

FS_MIB = 32                     # the small cache file system
FILES, SIZE = 16, 4 * MiB       # 64 MiB of data: twice the disk


@pytest.fixture
def small_fs(tmp_path):
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        pytest.fail("needs root and mkfs.ext4 (e2fsprogs) for a loop-mounted file system")
    img, mnt = tmp_path / "small.img", tmp_path / "small"
    with open(img, "wb") as f:
        f.truncate(FS_MIB * MiB)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(img)], check=True)
    mnt.mkdir()
    subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def fs_used(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def test_cache_disk_fills_up(small_fs, mounter, src, tmp_path):
    data = {f"f{i:02d}": rnd(SIZE, 300 + i) for i in range(FILES)}
    put(src, data)
    cache = small_fs / "cache"
    cache.mkdir(mode=0o700)
    # a --cache-size above the disk's free space is refused at start; the disk
    # fills anyway when something else writes to it: a ballast file does
    m = mounter("--cache-size", "90%", "--readahead", "2", cache=str(cache))
    st = os.statvfs(small_fs)
    with open(small_fs / "ballast", "wb") as f:
        f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - 8 * MiB))
    for name, want in data.items():             # every byte, disk full or not
        assert read_uncached(m.path(name)) == want, name
    s = m.stats()
    total = FILES * SIZE
    # the disk bounds what was kept: less than the data, no more than the disk
    assert s["cache_bytes_used"] < total, s
    assert s["cache_bytes_used"] <= FS_MIB * MiB, s
    assert s["chunks_not_stored"] > 0, s
    log = m.log()
    full = [ln for ln in log.splitlines() if "No space left" in ln or "cache disk" in ln]
    assert 1 <= len(full) <= 2, log[-3000:]     # rate-limited, not one line per chunk
    # later reads: still right, whether from the cache or the source
    for name, want in data.items():
        assert read_uncached(m.path(name)) == want, name
    kept = s["cache_bytes_used"]
    m.umount()
    # a restart (the ballast gone: with the disk still full, a --cache-size above
    # free + held is refused at start) serves the same bytes, reusing what was kept
    os.unlink(small_fs / "ballast")
    m2 = mounter("--cache-size", "90%", "--readahead", "2", cache=str(cache))
    for name, want in data.items():
        assert read_uncached(m2.path(name)) == want, name
    s2 = m2.stats()
    assert s2["checksum_failures"] == 0, s2
    assert s2["bytes_from_backend"] <= total - kept + 4 * MiB, (kept, s2)
