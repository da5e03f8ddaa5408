"""Open files of an allow_other mount are bounded for users other than the
mount's owner (openbound.h, docs/security.md): each open handle keeps a
data file of the cache open, and one local user holding ~20,000 opens used
to take every descriptor of the daemon, so that the owner's opens failed
with EIO and `fusefs refresh` failed.  Now another user gets EMFILE at
--user-opens, or when all other users together hold what the open-file
limit leaves them; the owner reads and refreshes on."""

import errno
import os
import resource
import tempfile

import pytest

from checks import rnd
from mountlib import run_fusefs
from util import put, read_uncached

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

NOBODY = 65534
FILES = 80


def nofile(n):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


def hold_opens(uid, paths):
    """fork a child that drops to @uid and opens @paths until one fails;
    returns (pid, pipe to release it, how many it opened, the errno)"""
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.close(w2)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))
            fds, err = [], 0
            for p in paths:
                try:
                    fds.append(os.open(p, os.O_RDONLY))
                except OSError as e:
                    err = e.errno
                    break
            os.write(w, b"%d %d\n" % (len(fds), err))
            os.read(r2, 1)              # hold them until told
        finally:
            os._exit(0)
    os.close(w)
    os.close(r2)
    n, err = map(int, os.read(r, 64).split())
    os.close(r)
    return pid, w2, n, err


def release(pid, w2):
    os.close(w2)
    os.waitpid(pid, 0)


@pytest.fixture
def shared(mounter, src):
    """an allow_other mount of FILES small files on a mount point other
    users can reach"""
    data = {"f%03d" % i: rnd(4096 + i, i) for i in range(FILES)}
    put(src, data)
    made = []

    def make(*args, preexec=None):
        d = tempfile.mkdtemp(prefix="fusefs-ob-")
        os.chmod(d, 0o755)
        m = mounter("--allow-other", *args, start=False, preexec=preexec)
        m.mnt = os.path.join(d, "mnt")
        os.mkdir(m.mnt)
        made.append((d, m))
        return m.start(), data

    yield make
    for d, m in made:
        m.umount()
        os.rmdir(m.mnt)
        os.rmdir(d)


def owner_reads_and_refreshes(m, data):
    fds = [open(m.path(n), "rb") for n in sorted(data)]   # all held at once
    try:
        for f, n in zip(fds, sorted(data)):
            assert f.read() == data[n], n
    finally:
        for f in fds:
            f.close()
    r = run_fusefs("refresh", m.mnt, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert read_uncached(m.path("f000")) == data["f000"]


def test_another_user_gets_emfile_at_user_opens(shared):
    m, data = shared("--user-opens", "20")
    pid, w, n, err = hold_opens(NOBODY, [m.path(k) for k in sorted(data)])
    try:
        assert (n, err) == (20, errno.EMFILE)
        owner_reads_and_refreshes(m, data)
    finally:
        release(pid, w)
    assert "--user-opens 20" in m.log()
    # closed: counted no more
    pid, w, n, err = hold_opens(NOBODY, [m.path(k) for k in sorted(data)][:10])
    release(pid, w)
    assert (n, err) == (10, 0)


def test_other_users_together_leave_the_owner_descriptors(shared):
    # 600 descriptors: other users may hold (600 - 512) / 4 = 22 files
    m, data = shared(preexec=nofile(600))
    paths = [m.path(k) for k in sorted(data)]
    pid, w, n, err = hold_opens(NOBODY, paths)
    pid2, w2, n2, err2 = hold_opens(NOBODY - 1, paths)
    try:
        assert (n + n2, err, err2) == (22, errno.EMFILE, errno.EMFILE)
        owner_reads_and_refreshes(m, data)
    finally:
        release(pid2, w2)               # it holds a copy of @w: first
        release(pid, w)
