"""The command line: background mounts, -o forms, ownership options,
access records in the LMDB index, make install."""

import os
import stat
import subprocess
import time

import pytest

from conftest import FUSEFS, POOL, ROOT, run_fusefs, wait_for



def test_background_mount_and_umount(ceph, tmp_path):
    ceph.put(POOL, "bg/f", b"background")
    mnt = tmp_path / "m"
    mnt.mkdir()
    r = run_fusefs("mount", f"rados://{POOL}/bg", str(mnt), "--cache-dir",
                   str(tmp_path / "c"), "--ceph-conf", ceph.conf_path)
    assert r.returncode == 0, r.stderr
    assert os.path.ismount(mnt)           # mounted when the command returns
    try:
        assert (mnt / "f").read_bytes() == b"background"
    finally:
        r = run_fusefs("umount", str(mnt))
    assert r.returncode == 0, r.stderr
    assert not os.path.ismount(mnt)
    # the daemon let go of its cache directory: a new mount can take it
    assert wait_for(lambda: subprocess.run(
        ["flock", "-n", str(tmp_path / "c" / "lock"), "true"]).returncode == 0)


def test_mount_helper_form_with_o_options(ceph, tmp_path):
    ceph.put(POOL, "own/d/f", b"x")
    mnt = tmp_path / "m"
    mnt.mkdir()
    opts = (f"cache_dir={tmp_path / 'c'},ceph_conf={ceph.conf_path},"
            "uid=1234,gid=2345,umask=027,cache_size=1G,noatime,_netdev")
    p = subprocess.Popen([FUSEFS, f"rados://{POOL}/own", str(mnt), "-f", "-o", opts],
                         stderr=subprocess.PIPE)
    try:
        assert wait_for(lambda: os.path.ismount(mnt))
        st = os.stat(mnt / "d" / "f")
        assert (st.st_uid, st.st_gid) == (1234, 2345)
        assert stat.S_IMODE(st.st_mode) == 0o440
        assert stat.S_IMODE(os.stat(mnt / "d").st_mode) == 0o550
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)])
        assert p.wait(timeout=30) == 0


@pytest.mark.parametrize("passthrough", ["off", "auto"])
def test_access_counts_recorded_in_lmdb(mounter, ceph, tmp_path, passthrough):
    ceph.put(POOL, "heat/f", b"hot" * 1000)
    cache = str(tmp_path / "h")
    m = mounter("heat", "--passthrough", passthrough, cache=cache)
    for i in range(3):
        with open(m.path("f"), "rb") as f:
            f.read()
        if i == 0 and passthrough == "auto":   # cached, and the close seen
            assert wait_for(lambda: int(os.getxattr(m.path("f"), "user.fusefs.cached")))
            time.sleep(0.5)
    pt = m.stats()["passthrough_opens"]
    m.umount()                            # (heat is saved at the unmount)
    out = subprocess.run(["mdb_dump", "-s", "heat", os.path.join(cache, "index")],
                         capture_output=True, text=True, check=True).stdout
    lines = [l.strip() for l in out.splitlines() if l.startswith(" ")]
    assert len(lines) == 2                # one key, one value
    value = bytes.fromhex(lines[1])
    count = int.from_bytes(value[8:16], "little")
    last = int.from_bytes(value[16:24], "little")
    read = int.from_bytes(value[24:32], "little")
    # opens are all counted; bytes: on the daemon path only those the
    # kernel asked the daemon for (later reads came from the kernel's page
    # cache); a passthrough open (the 2nd and 3rd: the file is complete)
    # counts the whole file, since the daemon does not see its reads
    assert count == 3 and abs(time.time() - last) < 60
    assert read == 3000 + 3000 * pt, (read, pt)
    assert pt == 0 if passthrough == "off" else pt >= 1


def test_make_install_honours_destdir(tmp_path):
    dest = tmp_path / "root"
    subprocess.run(["make", "-s", "-C", ROOT, "install", f"DESTDIR={dest}", "PREFIX=/usr"],
                   check=True, capture_output=True)
    assert os.access(dest / "usr/sbin/fusefs", os.X_OK)
    assert os.readlink(dest / "sbin/mount.fuse.fusefs") == "/usr/sbin/fusefs"
