"""Who may use the control files of an allow_other mount
(docs/control-access.md): the mount owner (root, the daemon's user) and
--control-group members may change shared state; any other local user may
read stats and lists and publish lists of their own, within quotas. The
other users' actions run in a forked child that drops to another uid
(nobody, or a bare uid with no passwd entry) and groups first."""

import errno
import os
import stat
import tempfile

import pytest

from checks import MiB, rnd
from mountlib import wait_for
from util import put, read_uncached

NOBODY = 65534
OTHER = 12345          # a second unprivileged user, no passwd entry needed
GROUP = 4242           # --control-group in the tests that want one

def do_op(op, path, data):
    """one operation on @path: 0, or the errno it failed with"""
    fds = []
    try:
        if op == "read":
            with open(path, "rb") as f:
                f.read()
        elif op == "write":
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                os.write(fd, data.encode())
            finally:
                os.close(fd)          # the daemon acts (and answers) here
        elif op == "overfill":        # @data, then filler until a write fails
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            failed = 0
            try:
                os.write(fd, data.encode())
                for _ in range(128):
                    os.write(fd, (b"x" * 8191 + b"\n") * 128)
            except OSError as e:
                failed = e.errno
            try:
                os.close(fd)
            except OSError as e:
                # the close fails with the write's error: that errno
                return e.errno if e.errno == failed else 253
            return 254 if failed else 252   # closed fine after a failure
        elif op == "hold":            # open @data files at once
            for _ in range(int(data)):
                fds.append(os.open(path, os.O_RDONLY))
        return 0
    except OSError as e:
        return e.errno
    finally:
        for fd in fds:
            os.close(fd)


def as_user(uid, op, path, data="", groups=()):
    """errno of @op on @path done by @uid (0 if it worked), in a forked
    child that drops to @uid (and @groups) first"""
    if os.geteuid() != 0:
        pytest.skip("needs root to run as other users")
    pid = os.fork()
    if pid == 0:
        rc = 255
        try:
            os.setgroups(list(groups))
            os.setgid(uid)
            os.setuid(uid)
            rc = do_op(op, path, data)
        finally:
            os._exit(rc)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) != 255
    return os.WEXITSTATUS(status)


def as_owner(op, path, data=""):
    """the same as the mount owner (this process, root)"""
    return do_op(op, path, data)


@pytest.fixture
def shared(mounter, src, tmp_path):
    """shared(*args) -> an allow_other Mount of 8 files of 1 MiB, on a
    mount point other users can reach (tmp_path is root's alone)"""
    put(src, {f"s{i}": rnd(MiB, i) for i in range(8)})
    made = []

    def make(*args):
        d = tempfile.mkdtemp(prefix="fusefs-acc-")
        os.chmod(d, 0o755)
        m = mounter("--allow-other", *args, start=False)
        m.mnt = os.path.join(d, "mnt")
        os.mkdir(m.mnt)
        made.append((d, m))
        return m.start()

    yield make
    for d, m in made:
        m.umount()                      # checked again (a no-op) by mounter
        os.rmdir(m.mnt)
        os.rmdir(d)


def ctl(m, name):
    return os.path.join(m.mnt, ".fusefs", name)


def test_others_read_stats_but_change_nothing_shared(shared):
    m = shared()
    assert read_uncached(m.path("s0")) == rnd(MiB, 0)
    # (stored after the reply)
    assert wait_for(lambda: int(os.getxattr(m.path("s0"), "user.fusefs.cached")) == MiB)
    # stats: everyone
    assert as_user(NOBODY, "read", ctl(m, "stats")) == 0
    # heat, the access pattern of every user: the owner only, shown so
    assert stat.S_IMODE(os.stat(ctl(m, "heat")).st_mode) == 0o400
    assert as_user(NOBODY, "read", ctl(m, "heat")) == errno.EACCES
    assert as_owner("read", ctl(m, "heat")) == 0
    # pin, unpin, evict, warm: the owner only
    for name in ("pin", "unpin", "evict", "warm", "refresh"):
        assert stat.S_IMODE(os.stat(ctl(m, name)).st_mode) == 0o200, name
        assert as_user(NOBODY, "write", ctl(m, name), "s0\n") == errno.EACCES, name
    assert "s0" in as_owner_text(m, "heat")
    # the refused evict changed nothing: s0 is still cached
    assert int(os.getxattr(m.path("s0"), "user.fusefs.cached")) == MiB
    # the owner may evict the whole tree
    assert as_owner("write", ctl(m, "evict"), "/\n") == 0
    assert int(os.getxattr(m.path("s0"), "user.fusefs.cached")) == 0
    assert as_owner("write", ctl(m, "pin"), "s1\n") == 0
    assert as_owner("write", ctl(m, "unpin"), "s1\n") == 0


def as_owner_text(m, name):
    with open(ctl(m, name)) as f:
        return f.read()


def test_lists_are_owned_and_counted(shared):
    m = shared("--user-lists", "3")
    lists = ctl(m, "lists")
    # the owner's list: others read its status, never replace it
    assert as_owner("write", os.path.join(lists, "rank0"), "s0\n") == 0
    assert as_user(NOBODY, "read", os.path.join(lists, "rank0")) == 0
    assert as_user(NOBODY, "write", os.path.join(lists, "rank0"), "s1\n") == errno.EACCES
    # a user's own lists, owned by them, at most --user-lists
    for i in range(3):
        assert as_user(NOBODY, "write", os.path.join(lists, f"n{i}"), "s2\n") == 0, i
        assert os.stat(os.path.join(lists, f"n{i}")).st_uid == NOBODY
    assert as_user(NOBODY, "write", os.path.join(lists, "n3"), "s2\n") == errno.EDQUOT
    assert not os.path.exists(os.path.join(lists, "n3"))
    # republishing one's own list is fine
    assert as_user(NOBODY, "write", os.path.join(lists, "n0"), "s3\n") == 0
    # another user may neither replace it nor take the name
    assert as_user(OTHER, "write", os.path.join(lists, "n0"), "s4\n") == errno.EACCES
    assert as_user(OTHER, "write", os.path.join(lists, "o0"), "s4\n") == 0
    # the owner may replace anyone's list
    assert as_owner("write", os.path.join(lists, "n0"), "s5\n") == 0
    assert "lines 1" in as_owner_text(m, "lists/n0")
    assert as_user(NOBODY, "read", os.path.join(lists, "n0")) == 0


def test_list_names_are_checked_at_creation(shared):
    """a list name is [A-Za-z0-9._-] (docs/epochs.md): anything else fails
    with EINVAL at creation, takes none of the user's names and never
    reaches the log as it is (a newline would forge a log line)"""
    m = shared("--user-lists", "1")
    lists = ctl(m, "lists")
    for bad in ["bad\nname", "a b", ".hidden", "x" * 64, "tab\there", "\x1b[31m"]:
        assert as_user(NOBODY, "write", os.path.join(lists, bad), "s0\n") == errno.EINVAL, bad
        assert as_owner("write", os.path.join(lists, bad), "s0\n") == errno.EINVAL, bad
    assert os.listdir(lists) == []
    # the bad names took none of NOBODY's one name
    assert as_user(NOBODY, "write", os.path.join(lists, "n0"), "s1\n") == 0
    # over quota, a forged line would have been logged with the refusal
    forged = "x' refused\nERROR control: forged line"
    assert as_user(NOBODY, "write", os.path.join(lists, forged), "s2\n") == errno.EINVAL
    assert as_user(NOBODY, "write", os.path.join(lists, "n1"), "s2\n") == errno.EDQUOT
    assert sorted(os.listdir(lists)) == ["n0"]
    assert "\nERROR control: forged" not in m.log()


def test_write_past_the_quota_publishes_nothing(shared):
    """a write past the user's share (EDQUOT) fails the close with it, and
    the paths written before it are not published"""
    m = shared()
    lists = ctl(m, "lists")
    assert as_user(NOBODY, "overfill", os.path.join(lists, "n0"),
                   "# epoch 0\ns0\ns1\ns2\n") == errno.EDQUOT
    assert as_owner_text(m, "lists/n0") == "list n0: not published\n"
    # the share is free again: a list of the user's is published
    assert as_user(NOBODY, "write", os.path.join(lists, "n0"), "s0\n") == 0
    assert "\nfiles 1\n" in as_owner_text(m, "lists/n0")


def test_control_group_is_privileged(shared):
    m = shared("--control-group", str(GROUP))
    assert os.stat(ctl(m, "pin")).st_gid == GROUP
    assert stat.S_IMODE(os.stat(ctl(m, "pin")).st_mode) == 0o220
    assert stat.S_IMODE(os.stat(ctl(m, "heat")).st_mode) == 0o440
    assert as_user(OTHER, "read", ctl(m, "heat"), groups=[GROUP]) == 0
    assert as_user(OTHER, "write", ctl(m, "pin"), "s0\n", groups=[GROUP]) == 0
    assert as_user(OTHER, "write", ctl(m, "unpin"), "s0\n", groups=[GROUP]) == 0
    # a member may replace another user's list; a non-member may not
    assert as_user(NOBODY, "write", ctl(m, "lists/n0"), "s1\n") == 0
    assert as_user(OTHER, "write", ctl(m, "lists/n0"), "s2\n", groups=[GROUP]) == 0
    assert as_user(OTHER, "write", ctl(m, "lists/n0"), "s3\n") == errno.EACCES
    assert as_user(OTHER, "read", ctl(m, "heat")) == errno.EACCES
    assert as_user(OTHER, "write", ctl(m, "evict"), "s0\n") == errno.EACCES


def test_open_control_files_per_user(shared):
    m = shared("--user-buffers", "4")
    assert as_user(NOBODY, "hold", ctl(m, "stats"), "4") == 0
    assert as_user(NOBODY, "hold", ctl(m, "stats"), "5") == errno.EMFILE
    # the count goes down as they are closed (the child exited)
    assert as_user(NOBODY, "hold", ctl(m, "stats"), "4") == 0
    fds = [os.open(ctl(m, "stats"), os.O_RDONLY) for _ in range(16)]
    for fd in fds:                      # the owner is not counted
        os.close(fd)
    assert "--user-buffers" in m.log()


def test_pin_of_the_tree_or_too_much_is_refused(shared):
    m = shared("--cache-size", "8M", "--pin-max", "25")
    assert as_owner("write", ctl(m, "pin"), "/\n") == errno.EINVAL
    assert as_owner("write", ctl(m, "pin"), "\n") == errno.EINVAL
    assert "refused: the whole tree" in m.log()
    # 25% of 8 MiB: two files of 1 MiB, not three (counting those pinned)
    assert as_owner("write", ctl(m, "pin"), "s0\ns1\ns2\n") == errno.EINVAL
    assert "refused: more than --pin-max of the cache" in m.log()
    assert as_owner("write", ctl(m, "pin"), "s0\n") == 0
    assert as_owner("write", ctl(m, "pin"), "s1\n") == 0
    assert as_owner("write", ctl(m, "pin"), "s2\n") == errno.EINVAL
    assert as_owner("write", ctl(m, "unpin"), "s1\n") == 0
    assert as_owner("write", ctl(m, "pin"), "s2\n") == 0
