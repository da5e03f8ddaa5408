"""fusefs over a real RADOS pool, through the real kernel FUSE."""

import hashlib
import os
import random
import shutil
import subprocess
import threading
import time

import pytest

from conftest import POOL, run_fusefs

MiB = 1 << 20
CHUNK = 4 * MiB


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


SIZES = {"zero": 0, "one": 1, "chunk_minus_1": CHUNK - 1, "chunk": CHUNK,
         "chunk_plus_1": CHUNK + 1, "big": 100 * MiB + 12345}


@pytest.fixture(scope="module")
def sized(ceph):
    data = {name: rnd(n, i) for i, (name, n) in enumerate(SIZES.items())}
    for name, d in data.items():
        ceph.put(POOL, f"sized/{name}", d)
    return data


def test_sizes_whole_and_random_offsets(mounter, sized):
    m = mounter("sized")
    assert sorted(os.listdir(m.mnt)) == sorted(sized)
    for name, d in sized.items():
        assert os.stat(m.path(name)).st_size == len(d)
        with open(m.path(name), "rb") as f:
            assert f.read() == d, name
    r = random.Random(7)
    with open(m.path("big"), "rb") as f:
        for _ in range(200):
            off = r.randrange(len(sized["big"]))
            n = r.randrange(1, 3 * MiB)
            f.seek(off)
            assert f.read(n) == sized["big"][off:off + n]
    s = m.stats()
    assert s["read_errors"] == 0 and s["checksum_failures"] == 0


def test_eight_concurrent_readers_cold(mounter, sized):
    m = mounter("sized")
    want = sized["big"]
    errors = []

    def reader(i):
        r = random.Random(i)
        try:
            with open(m.path("big"), "rb") as f:
                if i % 2:
                    got = f.read()
                    if got != want:
                        errors.append(f"reader {i}: whole file differs")
                else:
                    for _ in range(100):
                        off = r.randrange(len(want))
                        f.seek(off)
                        if f.read(65536) != want[off:off + 65536]:
                            errors.append(f"reader {i}: bytes at {off} differ")
        except OSError as e:
            errors.append(f"reader {i}: {e}")

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    s = m.stats()
    chunks = (len(want) + CHUNK - 1) // CHUNK
    # single flight: every chunk fetched once, however many readers wanted it
    assert s["backend_reads"] == chunks, s
    assert s["bytes_from_backend"] == len(want)


def test_remount_reuses_cache(mounter, sized, ceph, tmp_path):
    cache = str(tmp_path / "c")
    m = mounter("sized", cache=cache)
    for name, d in sized.items():
        with open(m.path(name), "rb") as f:
            assert f.read() == d
    assert m.stats()["bytes_from_backend"] == sum(map(len, sized.values()))
    m.umount()
    ops_before = ceph.pool_read_ops(POOL)
    subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
    m2 = mounter("sized", cache=cache)
    for name, d in sized.items():
        with open(m2.path(name), "rb") as f:
            assert f.read() == d
    s = m2.stats()
    assert s["bytes_from_backend"] == 0 and s["backend_reads"] == 0, s
    assert s["verified_chunks"] == sum((len(d) + CHUNK - 1) // CHUNK for d in sized.values())
    # the namespace came from the LMDB cache too: the pool saw no reads
    assert ceph.pool_read_ops(POOL) == ops_before


def test_sigkill_mid_read_then_remount(mounter, sized, tmp_path):
    cache = str(tmp_path / "k")
    want = sized["big"]
    m = mounter("sized", cache=cache)
    f = open(m.path("big"), "rb")
    assert f.read(30 * MiB) == want[:30 * MiB]
    time.sleep(1)                       # let the index commit that part

    def rest():
        try:
            f.read()
        except OSError:
            pass                        # the daemon dies under us

    t = threading.Thread(target=rest)
    t.start()
    time.sleep(0.2)
    m.kill()                            # SIGKILL while chunks are in flight
    t.join()
    try:
        f.close()
    except OSError:
        pass
    m2 = mounter("sized", cache=cache)
    with open(m2.path("big"), "rb") as f:
        assert hashlib.sha256(f.read()).digest() == hashlib.sha256(want).digest()
    s = m2.stats()
    assert s["checksum_failures"] == 0
    # what was cached before the kill was reused, the rest fetched
    assert 0 < s["bytes_from_backend"] < len(want), s


def data_files(cache):
    out = []
    for root, _, files in os.walk(os.path.join(cache, "data")):
        out += [os.path.join(root, f) for f in files]
    return out


def test_flipped_byte_is_refetched(mounter, sized, tmp_path):
    cache = str(tmp_path / "flip")
    want = sized["chunk_plus_1"]
    m = mounter("sized", cache=cache)
    with open(m.path("chunk_plus_1"), "rb") as f:
        assert f.read() == want
    m.umount()
    (path,) = [p for p in data_files(cache) if os.path.getsize(p) >= 100]
    with open(path, "r+b") as f:
        f.seek(1000)
        b = f.read(1)
        f.seek(1000)
        f.write(bytes([b[0] ^ 0x01]))
    subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
    m2 = mounter("sized", cache=cache)
    with open(m2.path("chunk_plus_1"), "rb") as f:
        assert f.read() == want
    s = m2.stats()
    assert s["checksum_failures"] == 1, s
    assert s["bytes_from_backend"] == CHUNK          # only the bad chunk again


def test_rewritten_object_served_after_revalidate(mounter, ceph):
    ceph.put(POOL, "rw/obj", b"A" * 5000)
    m = mounter("rw", "--revalidate", "1")
    with open(m.path("obj"), "rb") as f:
        assert f.read() == b"A" * 5000
    v1 = os.getxattr(m.path("obj"), "user.fusefs.version")
    ceph.put(POOL, "rw/obj", b"B" * 7000)
    time.sleep(2.5)
    with open(m.path("obj"), "rb") as f:
        assert f.read() == b"B" * 7000
    assert os.getxattr(m.path("obj"), "user.fusefs.version") != v1
    assert m.stats()["stale_objects"] == 1


def test_cache_size_bound(mounter, ceph, tmp_path):
    files = {f"bound/f{i}": rnd(3 * MiB, 100 + i) for i in range(12)}
    for k, v in files.items():
        ceph.put(POOL, k, v)
    cache = str(tmp_path / "b")
    limit = 16 * MiB
    m = mounter("bound", "--cache-size", str(limit), cache=cache)
    for k, v in files.items():
        with open(m.path(k.split("/", 1)[1]), "rb") as f:
            assert f.read() == v
        s = m.stats()
        assert s["cache_bytes_used"] <= limit
        on_disk = sum(os.stat(p).st_blocks * 512 for p in data_files(cache))
        assert on_disk <= limit + 4096 * 12, on_disk
    assert m.stats()["evictions"] >= 6


def test_deep_tree_and_10k_dir(mounter, ceph):
    objs = {f"tree/wide/f{i:05d}": b"%d" % i for i in range(10000)}
    deep = "tree/" + "/".join(f"d{i}" for i in range(40)) + "/leaf"
    objs[deep] = b"deep"
    ceph.put_many(POOL, objs)
    m = mounter("tree")
    names = os.listdir(m.path("wide"))
    assert len(names) == 10000 and "f09999" in names
    with open(m.path(deep[len("tree/"):]), "rb") as f:
        assert f.read() == b"deep"
    for i in (0, 4999, 9999):
        with open(m.path(f"wide/f{i:05d}"), "rb") as f:
            assert f.read() == b"%d" % i
    t0 = time.time()
    # readdir again: served from the namespace, no new listing
    assert len(os.listdir(m.path("wide"))) == 10000
    assert m.stats()["listings"] == 1
    assert time.time() - t0 < 30


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
    assert "user.fusefs.stats" in os.listxattr(m.mnt)
    assert os.getxattr(m.path("f"), "user.fusefs.cached") == b"0"
    open(m.path("f"), "rb").read()
    time.sleep(0.1)
    assert int(os.getxattr(m.path("f"), "user.fusefs.cached")) == 4096
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
        assert time.time() - t0 < 30
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
    assert time.time() - t0 < 20
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
