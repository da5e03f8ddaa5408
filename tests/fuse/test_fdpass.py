"""FUSE fd passing: a privileged process (this test, as root) opens
/dev/fuse and mount(2)s it, then starts fusefs as an unprivileged user
with the fd as the mount point /dev/fd/N (what a CSI driver or a
privileged node component does for an unprivileged pod). The daemon has
no privilege and no /dev/fuse of its own; a reader (another user) gets
the right bytes; SIGTERM ends the daemon cleanly, after which the mount
answers ENOTCONN and the privileged side unmounts it. A root daemon on an
fd mount still gets FUSE passthrough."""

import ctypes
import errno
import os
import shutil
import signal
import stat
import subprocess
import tempfile

import pytest

from checks import cached, rnd
from mountlib import FUSEFS, BAD_WORDS, binary_for_others, wait_for
from util import CHUNK, put, read_uncached

NOBODY = 65534
READER = 54321          # a user that exists nowhere: the trainer
MS_NOSUID, MS_NODEV, MS_RDONLY = 2, 4, 1
MNT_DETACH = 2

libc = ctypes.CDLL(None, use_errno=True)


def mount_fuse(mnt, uid, gid, flags=MS_NOSUID | MS_NODEV | MS_RDONLY):
    """the privileged side: open /dev/fuse and mount it on @mnt for @uid;
    returns the (inheritable) fd"""
    fd = os.open("/dev/fuse", os.O_RDWR)
    opts = (f"fd={fd},rootmode=40000,user_id={uid},group_id={gid},"
            "default_permissions,allow_other")
    if libc.mount(b"fusefs-fd", mnt.encode(), b"fuse.fusefs", flags,
                  opts.encode()) != 0:
        e = ctypes.get_errno()
        os.close(fd)
        raise OSError(e, f"mount {mnt}: {os.strerror(e)}")
    os.set_inheritable(fd, True)
    return fd


def umount(mnt, flags=0):
    if libc.umount2(mnt.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"umount {mnt}: {os.strerror(e)}")


def in_mountinfo(mnt):
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == mnt for line in f)


@pytest.fixture
def world():
    """a directory tree other users can enter (pytest's tmp_path is root's
    and 0700): the source, an empty mount point and the daemon's cache dir
    owned by the daemon's user"""
    top = tempfile.mkdtemp(prefix="fusefs-fdpass-")
    os.chmod(top, 0o755)
    for d in ("src", "mnt"):
        os.mkdir(os.path.join(top, d))
        os.chmod(os.path.join(top, d), 0o755)
    yield top
    if in_mountinfo(os.path.join(top, "mnt")):
        umount(os.path.join(top, "mnt"), MNT_DETACH)
    shutil.rmtree(top, ignore_errors=True)


def start_daemon(top, fd, user, *args):
    """fusefs as @user serving fd @fd; the caller closes its own copy of
    the fd afterwards (else the connection outlives the daemon)"""
    cache = os.path.join(top, f"cache-{user}")
    os.mkdir(cache, 0o700)
    os.chown(cache, user, user)
    log = open(os.path.join(top, f"fusefs-{user}.log"), "wb")
    p = subprocess.Popen(
        [binary_for_others(top), "mount", f"file://{top}/src", f"/dev/fd/{fd}", "-f",
         "--cache-dir", cache, "--chunk-size", "1M"] + list(args),
        stdout=log, stderr=subprocess.STDOUT, pass_fds=(fd,),
        user=user, group=user, extra_groups=[])
    log.close()
    p.log = lambda: open(os.path.join(top, f"fusefs-{user}.log"), "rb").read().decode(
        errors="replace")
    assert wait_for(lambda: "mounted file://" in p.log() or p.poll() is not None), p.log()
    assert p.poll() is None, p.log()
    return p


def stats(mnt):
    raw = os.getxattr(mnt, "user.fusefs.stats").decode()
    return {k: int(v) for k, v in (line.split() for line in raw.splitlines())}


def read_as(uid, path):
    """the trainer: another unprivileged user reads @path"""
    r = subprocess.run(["/usr/bin/python3", "-c",
                        "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())",
                        path], user=uid, group=uid, extra_groups=[], capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def stop(p, timeout=30):
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=timeout)
    log = p.log()
    for w in BAD_WORDS:
        assert w not in log, log
    return rc, log


def test_unprivileged_daemon_serves_a_passed_fd(world):
    data = {"a/x.bin": rnd(3 * CHUNK + 777, 1), "small": b"hello\n"}
    put(os.path.join(world, "src"), data)
    mnt = os.path.join(world, "mnt")
    fd = mount_fuse(mnt, NOBODY, NOBODY)
    try:
        # kernel options are the mounter's: named as ignored, not dropped silently
        p = start_daemon(world, fd, NOBODY, "-o", "ro,noexec")
    finally:
        os.close(fd)                    # the daemon holds the only copy now
    try:
        with open(f"/proc/{p.pid}/status") as f:
            ids = {k: v.split() for k, v in (line.split(":", 1) for line in f)}
        assert ids["Uid"] == [str(NOBODY)] * 4 and ids["CapEff"] == ["0000000000000000"]
        st = os.stat(os.path.join(mnt, "a/x.bin"))
        assert st.st_uid == NOBODY and st.st_size == len(data["a/x.bin"])
        assert stat.S_IMODE(st.st_mode) == 0o444
        for name, d in data.items():
            assert read_as(READER, os.path.join(mnt, name)) == d, name
            assert read_uncached(os.path.join(mnt, name)) == d, name     # root too
        assert stats(mnt)["reads"] > 0
        # the trainer cannot write: the privileged side mounted it read-only
        with pytest.raises(OSError) as e:
            open(os.path.join(mnt, "small"), "wb")
        assert e.value.errno in (errno.EROFS, errno.EACCES)
    finally:
        rc, log = stop(p)
    assert rc == 0, log
    assert "-o ro,noexec ignored: with /dev/fd/" in log, log
    assert "passthrough: needs CAP_SYS_ADMIN" in log or \
        "passthrough: the kernel does not offer it" in log, log
    # the daemon is gone: nothing hangs, every access that needs it says
    # so (a stat may still be answered from the kernel's attribute cache),
    # and umount works
    for what in (lambda: os.statvfs(mnt),
                 lambda: open(os.path.join(mnt, "a/x.bin"), "rb").read()):
        with pytest.raises(OSError) as e:
            what()
        assert e.value.errno == errno.ENOTCONN
    umount(mnt)
    assert not in_mountinfo(mnt)


def test_root_daemon_on_a_passed_fd_uses_passthrough(world):
    d = rnd(2 * CHUNK + 5, 2)
    put(os.path.join(world, "src"), {"f": d})
    mnt = os.path.join(world, "mnt")
    fd = mount_fuse(mnt, 0, 0)
    try:
        p = start_daemon(world, fd, 0)
    finally:
        os.close(fd)
    try:
        path = os.path.join(mnt, "f")
        assert read_uncached(path) == d
        assert wait_for(lambda: int(os.getxattr(path, "user.fusefs.cached")) >= len(d))
        before = stats(mnt)["passthrough_opens"]
        assert wait_for(lambda: read_uncached(path) == d and
                        stats(mnt)["passthrough_opens"] > before), p.log()
        assert read_as(READER, path) == d
    finally:
        rc, log = stop(p)
    assert rc == 0, log
    assert "passthrough: on" in log, log
    with pytest.raises(OSError) as e:
        open(os.path.join(mnt, "f"), "rb")
    assert e.value.errno == errno.ENOTCONN
    umount(mnt)


def test_bad_fd_mount_points_are_refused(world, tmp_path):
    put(os.path.join(world, "src"), {"f": b"x"})
    null = os.open("/dev/null", os.O_RDONLY)
    try:
        for mp, want in (("/dev/fd/77", "is not an open file descriptor"),
                         (f"/dev/fd/{null}", "is not the FUSE device")):
            r = subprocess.run([FUSEFS, "mount", f"file://{world}/src", mp, "-f",
                                "--cache-dir", str(tmp_path / "c")],
                               stdin=subprocess.DEVNULL, pass_fds=(null,),
                               capture_output=True, text=True, timeout=30)
            assert r.returncode == 2 and want in r.stderr, (mp, r.stderr)
    finally:
        os.close(null)


@pytest.mark.parametrize("n", [0, 1, 2])
def test_standard_fds_are_refused_as_mount_points(world, tmp_path, n):
    """/dev/fd/0, 1 or 2 holding a mounted FUSE device: going to the
    background points them at /dev/null, so the mount was dead (ENOTCONN)
    while the command exited 0; refused before anything happens"""
    put(os.path.join(world, "src"), {"f": b"x"})
    mnt = os.path.join(world, "mnt")
    fd = mount_fuse(mnt, 0, 0)
    err = tmp_path / "stderr"
    try:
        with open(err, "wb") as e:
            std = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL, "stderr": e}
            std[("stdin", "stdout", "stderr")[n]] = fd
            r = subprocess.run([FUSEFS, "mount", f"file://{world}/src", f"/dev/fd/{n}",
                                "--cache-dir", str(tmp_path / "c")], timeout=30, **std)
    finally:
        os.close(fd)
    assert r.returncode == 2, err.read_text()
    if n != 2:                          # (its message went to the FUSE device)
        assert f"/dev/fd/{n} is standard " in err.read_text(), err.read_text()
        assert "3 or more" in err.read_text()
    umount(mnt, MNT_DETACH)
