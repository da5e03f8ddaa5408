"""Safe defaults at mount: a non-empty mount point is refused unless
-o nonempty; a live FUSE mount at the target is refused (no stacking);
--cache-size may be a percentage of the cache file system, and a size the
file system cannot hold (free space plus what the cache directory already
holds) is refused with the numbers, the default lowered with a warning;
kernel mount options in the mount.fuse3/fstab form reach the kernel's
mount (checked in /proc/self/mountinfo) or are refused by name."""

import ctypes
import os
import subprocess

import pytest

from checks import MiB, rnd
from mountlib import FUSEFS, run_captured, wait_for
from util import put

libc = ctypes.CDLL(None, use_errno=True)


def refused(src, mnt, cache, *args, want, code=1, was_mounted=False):
    r = subprocess.run([FUSEFS, "mount", f"file://{src}", str(mnt), "-f",
                        "--cache-dir", str(cache)] + list(args),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == code and want in r.stderr, r.stderr
    assert os.path.ismount(mnt) == was_mounted
    return r.stderr


def fuse_mounts_at(mnt):
    with open("/proc/self/mountinfo") as f:
        return [line.split() for line in f
                if line.split()[4] == str(mnt) and " - fuse" in line]


@pytest.fixture
def small_fs(tmp_path):
    """a 64 MiB tmpfs for the cache: free space the test controls"""
    d = tmp_path / "small"
    d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(d)], check=True)
    yield d
    subprocess.run(["umount", "-l", str(d)], check=False)


def test_nonempty_mount_point_refused_unless_asked(mounter, src, tmp_path):
    put(src, {"f": b"data"})
    mnt = tmp_path / "busy"
    mnt.mkdir()
    (mnt / "precious").write_bytes(b"mine")
    refused(src, mnt, tmp_path / "c", want=f"mount point {mnt} is not empty (it holds 'precious')")
    m = mounter("-o", "nonempty", start=False)            # --nonempty: the same option
    m.mnt = str(mnt)
    m.start()
    assert sorted(os.listdir(mnt)) == ["f"]              # hidden while mounted
    assert open(os.path.join(mnt, "f"), "rb").read() == b"data"
    m.umount()
    assert (mnt / "precious").read_bytes() == b"mine"    # and back afterwards


def test_live_mount_is_not_stacked(mounter, src, tmp_path):
    put(src, {"f": b"data"})
    m = mounter()
    err = refused(src, m.mnt, tmp_path / "other-cache",
                  want=f"{m.mnt} is already a live FUSE mount (fuse.fusefs, file://{src})",
                  was_mounted=True)
    assert "fusefs umount" in err
    err = refused(src, m.mnt, tmp_path / "c3", "-o", "nonempty",
                  want="is already a live FUSE mount", was_mounted=True)
    assert len(fuse_mounts_at(m.mnt)) == 1
    assert open(m.path("f"), "rb").read() == b"data"     # the first one still serves


def test_cache_size_percentage(mounter, src, small_fs):
    """(bad percentages: tests/unit/test_recfmt.c)"""
    put(src, {"f": b"x"})
    total = os.statvfs(small_fs).f_blocks * os.statvfs(small_fs).f_frsize
    m = mounter("-o", "cache_size=25%", cache=str(small_fs / "c"))
    assert m.stats()["cache_bytes_limit"] == total // 100 * 25


def test_cache_size_larger_than_free_space(mounter, src, small_fs, tmp_path):
    data = rnd(5 * MiB, 3)
    put(src, {"f": data})
    mnt = tmp_path / "m"
    mnt.mkdir()
    err = refused(src, mnt, small_fs / "c", "--cache-size", "100M",
                  want="--cache-size 100.0M is more than the cache can get on the file system")
    assert "free there" in err and "choose a smaller size or a percentage" in err
    # what the cache already holds counts as room: fill the cache, then the disk
    m = mounter("--cache-size", "16M", cache=str(small_fs / "c"))
    assert open(m.path("f"), "rb").read() == data
    assert wait_for(lambda: m.stats()["cache_bytes_used"] >= len(data))
    m.umount()
    st = os.statvfs(small_fs)
    filler = st.f_bavail * st.f_frsize - 4 * MiB           # leave 4 MiB free
    with open(small_fs / "filler", "wb") as f:
        for _ in range(filler // MiB):
            f.write(b"\0" * MiB)
        f.write(b"\0" * (filler % MiB))
    refused(src, mnt, small_fs / "c", "--cache-size", "16M",
            want="4.0M free there, plus 5.")               # 4 + 5 < 16: refused
    refused(src, mnt, small_fs / "c", "--cache-size", "100%", want="100% (64.0M of 64.0M)")
    m = mounter("--cache-size", "8M", cache=str(small_fs / "c"))   # 4 + 5 >= 8
    assert m.stats()["cache_bytes_used"] >= len(data)      # nothing lost
    assert open(m.path("f"), "rb").read() == data
    m.umount()
    # the default (10G) is lowered to fit, with a warning
    m = mounter(cache=str(small_fs / "c"))
    limit = m.stats()["cache_bytes_limit"]
    assert 4 * MiB <= limit <= 10 * MiB, limit
    assert "warning: the default --cache-size 10.0G is more than the file system" in m.log()


def test_kernel_options_reach_the_mount(src, tmp_path):
    """the mount.fuse3 / fstab form: fusefs SOURCE MNT -o OPTIONS"""
    put(src, {"f": b"#!/bin/sh\necho hi\n"})
    mnt = tmp_path / "k"
    mnt.mkdir()
    opts = (f"cache_dir={tmp_path / 'c'},ro,noexec,nosuid,nodev,noatime,"
            "_netdev,nofail,defaults,x-systemd.automount")
    p = subprocess.Popen([FUSEFS, f"file://{src}", str(mnt), "-f", "-o", opts],
                         stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: os.path.ismount(mnt))
        (line,) = fuse_mounts_at(mnt)
        per_mount = line[5].split(",")
        for o in ("ro", "noexec", "nosuid", "nodev", "noatime"):
            assert o in per_mount, line
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
        assert p.wait(timeout=30) == 0, p.stderr.read()
    # without them: the defaults (rw, exec)
    p = subprocess.Popen([FUSEFS, f"file://{src}", str(mnt), "-f", "-o",
                          f"cache_dir={tmp_path / 'c'},atime"], stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: os.path.ismount(mnt))
        (line,) = fuse_mounts_at(mnt)
        per_mount = line[5].split(",")
        assert "rw" in per_mount and "noexec" not in per_mount and "noatime" not in per_mount
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
        assert p.wait(timeout=30) == 0, p.stderr.read()


def test_mount_helper_passes_ro(src, tmp_path):
    """as mount(8) runs /sbin/mount.fuse.fusefs: -n, -o with ro; it goes to
    the background"""
    put(src, {"f": b"x"})
    mnt = tmp_path / "h"
    mnt.mkdir()
    helper = tmp_path / "mount.fuse.fusefs"
    helper.symlink_to(FUSEFS)
    cache = tmp_path / "hc"
    # stderr to a file: without a syslog socket the daemon keeps it
    r = run_captured([str(helper), f"file://{src}", str(mnt), "-n", "-o",
                      f"rw,ro,noexec,cache_dir={cache}"], timeout=60)
    try:
        assert r.returncode == 0, r.stderr
        (line,) = fuse_mounts_at(mnt)
        assert "ro" in line[5].split(",") and "noexec" in line[5].split(","), line
        assert open(mnt / "f", "rb").read() == b"x"
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
    # the daemon has let go of its cache once it is gone
    assert wait_for(lambda: subprocess.run(
        ["flock", "-n", str(cache / "lock"), "true"]).returncode == 0)


def test_unsupported_kernel_option_refused(src, tmp_path):
    """(the classification of every option: tests/unit/test_recfmt.c)"""
    opt, want = "relatime", "mount option 'relatime' cannot be passed to a FUSE mount"
    mnt = tmp_path / "u"
    mnt.mkdir()
    r = subprocess.run([FUSEFS, f"file://{src}", str(mnt), "-f", "-o",
                        f"cache_dir={tmp_path / 'c'},{opt}"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and want in r.stderr, r.stderr
    assert not os.path.ismount(mnt)


@pytest.mark.parametrize("sub", ["plain", "a b\\c\td"], ids=["plain", "escaped"])
def test_readahead_raised_whatever_the_mount_path(tmp_path, src, sub):
    """the bdi read-ahead window is raised (bdi.c) also for a mount point
    whose name /proc/self/mountinfo escapes (space, tab, backslash)"""
    from mountlib import Mount, umount_all
    put(src, {"f": rnd(4096, 1)})
    mnt = tmp_path / sub
    mnt.mkdir()
    m = Mount(f"file://{src}", str(mnt), str(tmp_path / "cache"),
              str(tmp_path / "fusefs.log"), ["--chunk-size", "1M"]).start()
    try:
        dev = os.stat(mnt).st_dev
        ra = f"/sys/class/bdi/{os.major(dev)}:{os.minor(dev)}/read_ahead_kb"
        assert wait_for(lambda: open(ra).read().strip() == "4096", 5), \
            open(ra).read()
    finally:
        umount_all([m])


def test_mount_point_that_is_a_file_is_not_called_missing(src, tmp_path):
    """a mount point that exists but is not a directory is refused as
    such: the message does not add "(it does not exist)" from an errno
    left over by an earlier call (stat() had succeeded)"""
    put(src, {"f": b"data"})
    plain = tmp_path / "plain"
    plain.write_bytes(b"a file")
    # (errno was ENOENT at that point: a library's start-up left it so)
    err = refused(src, plain, tmp_path / "c",
                  want=f"mount point {plain} is not a directory", code=2)
    assert "does not exist" not in err, err
    refused(src, tmp_path / "missing", tmp_path / "c",
                  want=f"mount point {tmp_path / 'missing'} is not a directory (it does not exist)",
                  code=2)


def test_kernel_options_reach_the_mount_with_a_long_source(tmp_path):
    """a SOURCE of about 1,000 bytes (a deep file:// directory; an S3
    prefix may be 1,023) still mounts as fuse.fusefs with the kernel
    options asked for: they were cut off the end of a 1 KiB option
    string, so -o noexec silently gave an exec mount"""
    deep = tmp_path.joinpath(*(["d" * 200] * 5))
    deep.mkdir(parents=True)
    (deep / "f").write_bytes(b"x")
    assert len(f"file://{deep}") > 1000
    mnt = tmp_path / "k"
    mnt.mkdir()
    p = subprocess.Popen([FUSEFS, f"file://{deep}", str(mnt), "-f", "-o",
                          f"cache_dir={tmp_path / 'c'},ro,noexec"], stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: os.path.ismount(mnt) or p.poll() is not None)
        assert p.poll() is None, p.stderr.read()
        (line,) = fuse_mounts_at(mnt)
        assert "noexec" in line[5].split(",") and "ro" in line[5].split(","), line[:7]
        assert line[line.index("-") + 1] == "fuse.fusefs", line[-3:]
        assert open(mnt / "f", "rb").read() == b"x"
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
        assert p.wait(timeout=30) == 0, p.stderr.read()
