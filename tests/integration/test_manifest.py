"""Manifests and snapshots on the real cluster: a manifest written by
`fusefs manifest create` from a pool and a bucket, stored as an object and
mounted from its rados:// or s3:// URL without any listing; pinned versions
(a RADOS object version, an S3 ETag) never served changed, an S3 version
ID (`manifest create --versions`) read as that version; `--snap` reads a
pool snapshot while the live object changes; a remount sees a new object
without --list-refresh."""

import os
import subprocess
import time

import pytest

from conftest import BUCKET, POOL, run_fusefs, wait_for

MiB = 1 << 20


def test_manifest_from_an_object_pins_versions(mounter, store, tmp_path):
    pre = f"mf-{store.kind}"
    objs = {f"{pre}/a/x.bin": os.urandom(3 * MiB + 17), f"{pre}/b.txt": b"pinned",
            f"{pre}/c.txt": b"will change"}
    store.put_many(objs)
    r = run_fusefs("manifest", "create", store.source(pre), *store.args(), env=store.env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("\n") == 2 + 3, r.stdout
    store.put(f"manifests/{pre}", r.stdout.encode())
    url = (f"rados://{POOL}/manifests/{pre}" if store.kind == "rados"
           else f"s3://{BUCKET}/manifests/{pre}")
    m = mounter(pre, "--manifest", url, store=store)
    assert m.stats()["listings"] == 0             # no listing at all
    for key, want in objs.items():
        rel = key[len(pre) + 1:]
        with open(m.path(rel), "rb") as f:
            assert f.read() == want, rel
    # everything is cached in this mount; change b.txt in the backend
    store.put(f"{pre}/b.txt", b"CHANGED and longer")
    m.umount()
    # a fresh cache: nothing cached, the pinned version cannot be read
    m = mounter(pre, "--manifest", url, store=store, cache=str(tmp_path / "c2"))
    assert os.stat(m.path("b.txt")).st_size == len(b"pinned")
    with pytest.raises(OSError):
        open(m.path("b.txt"), "rb").read()
    assert "changed in the backend" in m.log(), m.log()
    with open(m.path("c.txt"), "rb") as f:           # unchanged: fine
        assert f.read() == b"will change"


def test_missing_manifest_object_is_a_clear_error(mounter):
    m = mounter("mf-none", "--manifest", f"rados://{POOL}/no/such/manifest", start=False)
    with pytest.raises(AssertionError) as e:
        m.start(timeout=60)
    m.proc = None
    assert "cannot read manifest" in str(e.value) and "no such object" in str(e.value)


def test_snap_reads_the_pool_snapshot(mounter, ceph, tmp_path):
    pre = "snapped"
    ceph.put(POOL, f"{pre}/obj", b"before the snapshot")
    io = ceph._io(POOL)
    io.create_snap("fusefs-test-s1")
    try:
        ceph.put(POOL, f"{pre}/obj", b"after the snapshot, longer")
        ceph.put(POOL, f"{pre}/born-later", b"new")
        snap = mounter(pre, "--snap", "fusefs-test-s1")
        live = mounter(pre, cache=str(tmp_path / "live"))
        assert open(snap.path("obj"), "rb").read() == b"before the snapshot"
        assert open(live.path("obj"), "rb").read() == b"after the snapshot, longer"
        assert not os.path.exists(snap.path("born-later"))
        assert os.path.exists(live.path("born-later"))
        ceph.put(POOL, f"{pre}/obj", b"third")       # the live object moves on
        snap.umount()
        snap = mounter(pre, "--snap", "fusefs-test-s1", cache=str(tmp_path / "s2"))
        assert open(snap.path("obj"), "rb").read() == b"before the snapshot"
        bad = mounter(pre, "--snap", "no-such-snap", cache=str(tmp_path / "s3"), start=False)
        with pytest.raises(AssertionError) as e:
            bad.start(timeout=60)
        bad.proc = None
        assert "has no snapshot 'no-such-snap'" in str(e.value)
    finally:
        io.remove_snap("fusefs-test-s1")


def test_remount_sees_new_object(mounter, store):
    pre = f"relist-{store.kind}"
    store.put(f"{pre}/old", b"old")
    m = mounter(pre, "--list-refresh", "0", store=store)
    assert "old" in os.listdir(m.mnt) and "new" not in os.listdir(m.mnt)
    m.umount()
    store.put(f"{pre}/new", b"new object")
    m = mounter(pre, store=store)      # default --list-refresh 300: re-listed at once
    assert wait_for(lambda: os.path.exists(m.path("new")), timeout=30), m.log()
    assert open(m.path("new"), "rb").read() == b"new object"
    store.put(f"{pre}/third", b"3")
    r = run_fusefs("refresh", m.mnt, "--wait", "--timeout", "60")
    assert r.returncode == 0, r
    assert open(m.path("third"), "rb").read() == b"3"


VBUCKET = "fusefs-versioned"


class VersionedBucket:
    """a second bucket, with S3 versioning on, mounted like a Store"""
    kind = "s3"

    def __init__(self, s3store):
        self.s3, self.env, self.ceph = s3store.s3, s3store.env, s3store.ceph
        try:
            self.s3.create_bucket(Bucket=VBUCKET)
        except self.s3.exceptions.BucketAlreadyOwnedByYou:
            pass
        self.s3.put_bucket_versioning(Bucket=VBUCKET,
                                      VersioningConfiguration={"Status": "Enabled"})

    def put(self, key, data):
        return self.s3.put_object(Bucket=VBUCKET, Key=key, Body=data)["VersionId"]

    def source(self, prefix):
        return f"s3://{VBUCKET}/{prefix}"

    def args(self):
        return ["--endpoint", self.ceph.s3_endpoint]


def test_s3_version_id_pins_the_old_bytes(mounter, s3store, tmp_path):
    """a manifest entry pinned to an S3 object version (vid:ID) is read as
    that version after the object was overwritten, re-checks keep it
    quietly, and once that version is deleted the file is gone"""
    vb = VersionedBucket(s3store)
    pre = "vid"
    v1 = os.urandom(5 * MiB + 3)
    vb.put(f"{pre}/x.bin", b"an older version")
    id1 = vb.put(f"{pre}/x.bin", v1)
    idy = vb.put(f"{pre}/y.txt", b"to be deleted")
    vb.put(f"{pre}/gone.txt", b"deleted before the manifest")
    vb.s3.delete_object(Bucket=VBUCKET, Key=f"{pre}/gone.txt")     # a delete marker
    r = run_fusefs("manifest", "create", vb.source(pre), "--versions", *vb.args(),
                   env=vb.env)
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.splitlines()[2:])
    assert lines == [f"x.bin\t{len(v1)}\tvid:{id1}", f"y.txt\t13\tvid:{idy}"], r.stdout
    plain = run_fusefs("manifest", "create", f"rados://{POOL}/{pre}", "--versions",
                       env=vb.env)
    assert plain.returncode != 0 and "s3:// sources only" in plain.stderr
    # a bucket without versioning: its objects' version ID is "null", which
    # an overwrite replaces: they are pinned by their ETags instead
    s3store.put(f"{pre}-unversioned/p.txt", b"plain")
    r2 = run_fusefs("manifest", "create", s3store.source(f"{pre}-unversioned"),
                    "--versions", *s3store.args(), env=s3store.env)
    assert r2.returncode == 0, r2.stderr
    entry = r2.stdout.splitlines()[2].split("\t")
    assert entry[:2] == ["p.txt", "5"] and entry[2].startswith('"'), r2.stdout
    vb.put(f"{pre}/x.bin", b"the newest version")
    man = tmp_path / "versions.manifest"
    man.write_text(r.stdout + "z.txt\t3\tvid:no-such-version\n")
    m = mounter(pre, "--manifest", str(man), "--revalidate", "1", store=vb)
    with open(m.path("x.bin"), "rb") as f:
        assert f.read() == v1
    assert open(m.path("y.txt"), "rb").read() == b"to be deleted"
    with pytest.raises(OSError):
        open(m.path("z.txt"), "rb").read()
    time.sleep(1.5)                       # older than --revalidate: re-checked
    before = m.stats()["revalidations"]
    for _ in range(3):
        os.stat(m.path("x.bin"))
        with open(m.path("x.bin"), "rb") as f:
            assert f.read(4096) == v1[:4096]
        time.sleep(1.1)
    assert m.stats()["revalidations"] > before    # x.bin asked for by its version
    assert "changed since the manifest" not in m.log(), m.log()
    vb.s3.delete_object(Bucket=VBUCKET, Key=f"{pre}/y.txt", VersionId=idy)

    def gone():
        try:
            open(m.path("y.txt"), "rb").close()
            return False
        except FileNotFoundError:
            return True
    assert wait_for(gone, timeout=30), m.log()
    # a fresh cache: nothing cached, x.bin is still its first version
    m.umount()
    m = mounter(pre, "--manifest", str(man), store=vb, cache=str(tmp_path / "c2"))
    with open(m.path("x.bin"), "rb") as f:
        assert f.read() == v1
    assert m.stats()["listings"] == 0


def test_rados_refuses_versions_it_cannot_have(mounter, ceph, tmp_path):
    """a manifest entry whose version is not the mount's kind (an S3 ETag
    or version ID on a live pool; a live version on a --snap mount) is
    never read unasserted: EIO and the changed-object log line"""
    pre = "foreign-versions"
    ceph.put(POOL, f"{pre}/a", b"abc")
    ceph.put(POOL, f"{pre}/b", b"abc")
    live = run_fusefs("manifest", "create", f"rados://{POOL}/{pre}", "--ceph-conf",
                      ceph.conf_path)
    assert live.returncode == 0, live.stderr
    man = tmp_path / "foreign.manifest"
    man.write_text('#fusefs-manifest 1\na\t3\t"0123456789abcdef"\nb\t3\tvid:xyz\n')
    m = mounter(pre, "--manifest", str(man))
    for name in ("a", "b"):
        with pytest.raises(OSError):
            open(m.path(name), "rb").read()
    assert m.log().count("object changed in the backend") >= 2, m.log()
    m.umount()
    io = ceph._io(POOL)
    io.create_snap("fusefs-test-foreign")
    try:
        man.write_text(live.stdout)            # live versions, on a snapshot
        m = mounter(pre, "--manifest", str(man), "--snap", "fusefs-test-foreign",
                    cache=str(tmp_path / "snapcache"))
        with pytest.raises(OSError):
            open(m.path("a"), "rb").read()
        assert "object changed in the backend" in m.log(), m.log()
    finally:
        io.remove_snap("fusefs-test-foreign")
