"""fusefs over a real RADOS pool, through the real kernel FUSE."""

import os
import random
import subprocess
import time

import pytest

from conftest import POOL, run_fusefs, wait_for

MiB = 1 << 20
CHUNK = 4 * MiB


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


@pytest.mark.nosan  # scale: the listing code runs under ASan in the other tests
def test_pool_of_100k_objects(mounter, ceph):
    objs = {f"many/d{i % 100:02d}/o{i:06d}": b"" for i in range(100000)}
    ceph.put_many(POOL, objs)
    m = mounter("many")
    total = sum(len(os.listdir(m.path(d))) for d in os.listdir(m.mnt))
    assert total == 100000
    s = m.stats()
    assert s["ns_files"] == 100000 and s["listings"] == 1


def test_hostile_names(mounter, ceph):
    bad = ["host/a//b", "host/./x", "host/../y", "host/" + "L" * 300,
           "host/dup", "host/dup/child", "host/dir/", b"host/ok\xff.bin",
           "host/sp ace+plus%pct=eq&amp", "host/ünï"]
    for name in bad:
        if isinstance(name, bytes):     # the rados module wants str names
            subprocess.run([b"rados", b"-c", ceph.conf_path.encode(), b"-p", POOL.encode(),
                            b"put", name, b"/etc/hostname"], check=True)
        else:
            ceph.put(POOL, name, b"x")
    m = mounter("host")
    listing = set(os.listdir(m.mnt))
    assert {"dup", "dir", "sp ace+plus%pct=eq&amp", "ünï"} <= listing
    assert os.path.isdir(m.path("dup")) and os.path.isdir(m.path("dir"))
    assert os.listdir(m.path("dir")) == []
    assert open(m.path("dup/child"), "rb").read() == b"x"
    assert open(os.path.join(m.mnt.encode(), b"ok\xff.bin"), "rb").read() == \
        open("/etc/hostname", "rb").read()
    assert any(n.encode("utf-8", "surrogateescape") == b"ok\xff.bin" for n in listing)
    s = m.stats()
    assert s["ns_skipped_empty_component"] == 1
    assert s["ns_skipped_dot_component"] == 2
    assert s["ns_skipped_too_long"] == 1
    assert s["ns_shadowed"] == 1
    assert s["ns_non_utf8"] == 1


def test_xattrs(mounter, ceph):
    ceph.put(POOL, "xa/f", b"12345")
    m = mounter("xa")
    assert os.getxattr(m.path("f"), "user.fusefs.key") == b"xa/f"
    assert int(os.getxattr(m.path("f"), "user.fusefs.version")) > 0
    assert os.listxattr(m.mnt) == []                # read by name, never listed
    assert b"cache_bytes_used" in os.getxattr(m.mnt, "user.fusefs.stats")
    assert os.getxattr(m.path("f"), "user.fusefs.cached") == b"0"
    open(m.path("f"), "rb").read()
    # (stored after the reply)
    assert wait_for(lambda: int(os.getxattr(m.path("f"), "user.fusefs.cached")) == 4096)
    r = run_fusefs("stats", m.mnt)
    assert r.returncode == 0 and "cache_bytes_used" in r.stdout


def test_read_only(mounter, ceph):
    ceph.put(POOL, "ro/f", b"x")
    m = mounter("ro")
    with pytest.raises(OSError):
        open(m.path("f"), "wb")
    with pytest.raises(OSError):
        open(m.path("new"), "wb")
    with pytest.raises(OSError):
        os.mkdir(m.path("d"))


def test_dead_backend_mid_read(mounter, ceph):
    ceph.put(POOL, "dead/cached", rnd(6 * MiB, 1))
    ceph.put(POOL, "dead/cold", rnd(6 * MiB, 2))
    m = mounter("dead", "--op-timeout", "3", "--retries", "1", "--revalidate", "3600")
    cached = open(m.path("cached"), "rb").read()
    ceph.osd_freeze()
    try:
        t0 = time.time()
        with pytest.raises(OSError) as e:
            with open(m.path("cold"), "rb") as f:
                f.read()
        assert e.value.errno == 5                       # EIO, bounded
        # a hang guard: 6-12 s expected (2 attempts of --op-timeout, once
        # or twice: the kernel retries the page its read-ahead failed)
        assert time.time() - t0 < 120
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
        with open(m.path("cached"), "rb") as f:         # cache keeps serving
            assert f.read() == cached
    finally:
        ceph.osd_thaw()
    with open(m.path("cold"), "rb") as f:               # and it recovers
        assert f.read() == rnd(6 * MiB, 2)
    assert m.stats()["backend_errors"] >= 2


def test_unreachable_cluster_fails_fast(tmp_path):
    conf = tmp_path / "ceph.conf"
    conf.write_text("[global]\nmon host = 127.0.0.1:1\nauth client required = none\n"
                    "auth supported = none\nms bind msgr2 = false\n")
    (tmp_path / "m").mkdir()
    t0 = time.time()
    r = run_fusefs("mount", "rados://fusefs", str(tmp_path / "m"), "-f",
                   "--cache-dir", str(tmp_path / "c"), "--ceph-conf", str(conf),
                   "--connect-timeout", "3")
    assert r.returncode == 1
    assert "cannot connect" in r.stderr
    # a hang guard (about 3 s expected), well under librados' own 300 s
    assert time.time() - t0 < 60
    assert not os.path.ismount(tmp_path / "m")


def test_missing_pool(ceph, tmp_path):
    (tmp_path / "m").mkdir()
    r = run_fusefs("mount", "rados://nosuchpool", str(tmp_path / "m"), "-f",
                   "--cache-dir", str(tmp_path / "c"), "--ceph-conf", ceph.conf_path)
    assert r.returncode == 1 and "no such pool" in r.stderr


@pytest.mark.parametrize("args", [
    [], ["mount"], ["mount", "rados://p", "/tmp"],
    ["mount", "rados://p", "/tmp", "--cache-dir"],
    ["mount", "rados://p", "/tmp", "--cache-dir", "/tmp/x", "--cache-size", "lots"],
    ["mount", "rados://p", "/tmp", "--cache-dir", "/tmp/x", "--chunk-size", "3M"],
    ["mount", "rados://p", "/tmp", "--cache-dir", "/tmp/x", "--bogus"],
    ["mount", "rados://p", "/tmp", "-o", "cache_dir=/tmp/x,nonsense=1"],
    ["mount", "ftp://p", "/tmp", "--cache-dir", "/tmp/x"],
    ["mount", "rados://p", "/nonexistent-dir", "--cache-dir", "/tmp/x"],
    ["frobnicate"],
])
def test_bad_command_line(args):
    r = run_fusefs(*args)
    assert r.returncode == 2, (args, r.returncode, r.stderr)
    assert r.stderr.strip()


def test_cache_dir_in_use(mounter, ceph, tmp_path):
    ceph.put(POOL, "busy/f", b"1")
    m = mounter("busy", cache=str(tmp_path / "shared"))
    (tmp_path / "m2").mkdir()
    r = run_fusefs("mount", f"rados://{POOL}/busy", str(tmp_path / "m2"), "-f",
                   "--cache-dir", str(tmp_path / "shared"), "--ceph-conf", ceph.conf_path)
    assert r.returncode == 1 and "in use" in r.stderr
    assert open(m.path("f"), "rb").read() == b"1"
