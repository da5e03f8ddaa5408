"""S3-specific behaviour against a real radosgw: pagination, key encoding,
directory markers, credentials, ETag changes, a gateway that goes away."""

import os
import random
import subprocess
import time

import pytest

from conftest import BUCKET, run_fusefs, wait_for

MiB = 1 << 20


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def test_pagination_2500_keys(mounter, s3store):
    s3store.put_many({f"page/k{i:04d}": b"%d" % i for i in range(2500)})
    m = mounter("page", store=s3store)
    names = os.listdir(m.mnt)
    assert len(names) == 2500 and "k2499" in names and "k0000" in names
    assert open(m.path("k1234"), "rb").read() == b"1234"
    assert m.stats()["ns_files"] == 2500


def test_split_listing_many_directories(mounter, s3store):
    """The listing is split by directory over parallel streams (s3walk.c):
    every key once, at every level, also past a page of 1,000 inside a
    directory and in the delimiter listing of the root."""
    objs = {f"split/top{i}": b"t%d" % i for i in range(5)}
    for d in range(120):
        for f in range(3):
            objs[f"split/d{d:03d}/f{f}"] = b"%d/%d" % (d, f)
    for f in range(1100):
        objs[f"split/big/k{f:04d}"] = b"b%d" % f
    objs["split/d007/sub/deeper/leaf"] = b"leaf"
    objs["split/d008/"] = b""                      # a directory marker
    s3store.put_many(objs)
    m = mounter("split", store=s3store)
    seen = set()
    for root, dirs, files in os.walk(m.mnt):
        for f in files:
            seen.add(os.path.relpath(os.path.join(root, f), m.mnt))
    want = {k[len("split/"):] for k in objs if not k.endswith("/")}
    assert seen == want
    assert m.stats()["ns_files"] == len(want)
    assert open(m.path("d007/sub/deeper/leaf"), "rb").read() == b"leaf"
    assert open(m.path("big/k1099"), "rb").read() == b"b1099"


HOSTILE = {
    "host/with space.bin": b"1",
    "host/plus+sign.bin": b"2",
    "host/per%cent.bin": b"3",
    "host/eq=amp&q?.bin": b"4",
    "host/ünïcødé/日本語.txt": b"5",
    "host/tilde~star*paren(1).bin": b"6",
    "host/" + "/".join(["d" * 200] * 4) + "/long.bin": b"7",
}


def test_hostile_keys_roundtrip(mounter, s3store):
    for k, v in HOSTILE.items():
        s3store.put(k, v)
    m = mounter("host", store=s3store)
    for k, v in HOSTILE.items():
        with open(m.path(k[len("host/"):]), "rb") as f:
            assert f.read() == v, k
    assert m.stats()["read_errors"] == 0


def test_directory_markers_and_implicit_dirs(mounter, s3store):
    s3store.put("mk/explicit/", b"")              # marker, empty directory
    s3store.put("mk/implicit/sub/file", b"f")     # directories with no marker
    s3store.put("mk/both/", b"")
    s3store.put("mk/both/x", b"x")
    m = mounter("mk", store=s3store)
    assert sorted(os.listdir(m.mnt)) == ["both", "explicit", "implicit"]
    assert os.listdir(m.path("explicit")) == []
    assert os.path.isdir(m.path("implicit/sub"))
    assert open(m.path("implicit/sub/file"), "rb").read() == b"f"
    assert os.listdir(m.path("both")) == ["x"]


def mount_cmd(s3store, tmp_path, bucket=BUCKET, extra=()):
    (tmp_path / "m").mkdir(exist_ok=True)
    return ["mount", f"s3://{bucket}/x", str(tmp_path / "m"), "-f",
            "--cache-dir", str(tmp_path / "c"), "--endpoint", s3store.ceph.s3_endpoint,
            "--connect-timeout", "5"] + list(extra)


def test_wrong_secret_is_a_clear_error(s3store, tmp_path):
    env = dict(s3store.env, AWS_SECRET_ACCESS_KEY="wrong" * 8)
    r = run_fusefs(*mount_cmd(s3store, tmp_path), env=env)
    assert r.returncode == 1
    assert "denied" in r.stderr and "credentials" in r.stderr
    assert "wrong" * 8 not in r.stderr            # secrets are never printed


def test_missing_bucket(s3store, tmp_path):
    """RGW answers 404 with the S3 code NoSuchBucket: named as such (the
    other 404s and 403s are named by their code: tests/fuse/test_errors.py)"""
    r = run_fusefs(*mount_cmd(s3store, tmp_path, bucket="no-such-bucket"), env=s3store.env)
    assert r.returncode == 1, r.stderr
    assert (f"fusefs: no such bucket 'no-such-bucket' at {s3store.ceph.s3_endpoint}\n"
            in r.stderr), r.stderr
    assert "cannot reach" not in r.stderr and "answered HTTP" not in r.stderr, r.stderr


def test_missing_credentials(s3store, tmp_path):
    env = {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "HOME": str(tmp_path),
           "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none")}
    r = run_fusefs(*mount_cmd(s3store, tmp_path), env=env)
    assert r.returncode == 1 and "no S3 credentials" in r.stderr


def test_dead_endpoint_at_mount(s3store, tmp_path):
    r = run_fusefs("mount", f"s3://{BUCKET}", str(tmp_path), "-f", "--cache-dir",
                   str(tmp_path / "c"), "--endpoint", "http://127.0.0.1:1",
                   "--connect-timeout", "3", env=s3store.env)
    assert r.returncode == 1 and "cannot reach" in r.stderr


def test_bad_endpoint_is_usage_error_free(s3store, tmp_path):
    r = run_fusefs("mount", f"s3://{BUCKET}", str(tmp_path), "-f", "--cache-dir",
                   str(tmp_path / "c"), "--endpoint", "ftp://x", env=s3store.env)
    assert r.returncode != 0 and "endpoint" in r.stderr


def test_credentials_file_and_profile(mounter, s3store, tmp_path):
    s3store.put("cred/f", b"via profile")
    ak, sk = s3store.ceph.s3_credentials()
    cf = tmp_path / "credentials"
    cf.write_text(f"[default]\naws_access_key_id = nope\naws_secret_access_key = nope\n\n"
                  f"[train]\naws_access_key_id = {ak}\naws_secret_access_key = {sk}\n")
    m = mounter("cred", "--credentials-file", str(cf), "--profile", "train", store=s3store)
    assert open(m.path("f"), "rb").read() == b"via profile"
    # where the keys came from is logged, the keys are not
    m.umount()
    log = m.log()
    assert "[train]" in log and sk not in log and ak not in log


def test_object_overwritten_between_reads(mounter, s3store):
    s3store.put("ow/obj", rnd(3 * MiB, 1))
    m = mounter("ow", "--revalidate", "1", "--readahead", "0", "--chunk-size", "1M",
                store=s3store)
    f = open(m.path("obj"), "rb")
    assert f.read(4096) == rnd(3 * MiB, 1)[:4096]
    s3store.put("ow/obj", rnd(3 * MiB, 2))        # new ETag, same size
    f.seek(2 * MiB)
    with pytest.raises(OSError) as e:             # If-Match -> 412: never mixed
        f.read(4096)
    assert e.value.errno == 5
    f.close()
    time.sleep(1.5)
    with open(m.path("obj"), "rb") as f:          # a new open gets the new object
        assert f.read() == rnd(3 * MiB, 2)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_https_endpoint_with_ca_file(mounter, s3store, tmp_path):
    """radosgw behind a TLS front (socat) with a self-signed certificate"""
    import socket
    key, crt = tmp_path / "key.pem", tmp_path / "crt.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-keyout", key, "-out", crt, "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    port = free_port()
    rgw = s3store.ceph.s3_endpoint.rsplit(":", 1)[1]
    proxy = subprocess.Popen(
        ["socat", f"OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,"
         f"cert={crt},key={key},verify=0", f"TCP:127.0.0.1:{rgw}"],
        stderr=subprocess.DEVNULL)
    try:
        def up():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0
        assert wait_for(up)
        s3store.put("tls/f", b"over https")
        url = f"https://127.0.0.1:{port}"
        m = mounter("tls", "--endpoint", url, "--ca-file", str(crt), store=s3store)
        assert open(m.path("f"), "rb").read() == b"over https"
        # the same endpoint without trusting that CA: refused, clearly
        (tmp_path / "m2").mkdir()
        r = run_fusefs("mount", f"s3://{BUCKET}/tls", str(tmp_path / "m2"), "-f",
                       "--cache-dir", str(tmp_path / "c2"), "--endpoint", url,
                       "--connect-timeout", "5", env=s3store.env)
        assert r.returncode == 1 and "cannot reach" in r.stderr, r.stderr
        assert "certificate" in r.stderr.lower(), r.stderr
    finally:
        proxy.terminate()
        proxy.wait()


def test_radosgw_stopped_mid_read_and_restarted(mounter, s3store):
    s3store.put("gw/cached", rnd(5 * MiB, 3))
    s3store.put("gw/cold", rnd(5 * MiB, 4))
    m = mounter("gw", "--op-timeout", "3", "--retries", "2", "--revalidate", "3600",
                store=s3store)
    cached = open(m.path("cached"), "rb").read()
    s3store.ceph.rgw_stop()
    try:
        t0 = time.time()
        with pytest.raises(OSError) as e:
            open(m.path("cold"), "rb").read()
        # a hang guard: up to 18.6 s measured (3 attempts, the kernel's retry)
        assert e.value.errno == 5 and time.time() - t0 < 120
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
        assert open(m.path("cached"), "rb").read() == cached
    finally:
        s3store.ceph.rgw_start()
    assert open(m.path("cold"), "rb").read() == rnd(5 * MiB, 4)
