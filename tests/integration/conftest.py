"""pytest fixtures: one real Ceph cluster per session, fusefs mounts through
the real kernel FUSE (tests/mountlib.py: start in the foreground, poll
until mounted, fail early if the daemon exits; on teardown unmount and
require exit status 0; scan the daemon's log for sanitizer reports)."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from cephcluster import CephCluster  # noqa: E402
# re-exported: the tests import these from conftest
from mountlib import (BAD_WORDS, FUSEFS, ROOT, Hooks, Mount,  # noqa: E402,F401
                      run_fusefs, umount_all, wait_for)

POOL = "fusefs"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "nosan: not rerun on the ASan/UBSan build by scripts/test.sh "
        "(packaging and deployment scripts, scale tests whose daemon code the "
        "other sanitized tests already run): deselected there with -m 'not nosan'")
    if not os.path.exists("/dev/fuse"):
        raise pytest.UsageError("/dev/fuse is missing: integration tests need kernel FUSE")


@pytest.fixture(scope="session")
def ceph(tmp_path_factory):
    d = str(tmp_path_factory.mktemp("ceph"))
    c = CephCluster()
    c.start(d, rgw=True)
    yield c
    c.stop()


BUCKET = "fusefs-test"


class Store:
    """Where test objects go: a RADOS pool or an S3 bucket on radosgw,
    and how fusefs is told to mount them."""

    def __init__(self, kind, ceph):
        self.kind, self.ceph = kind, ceph
        if kind == "s3":
            import boto3
            import botocore.config
            ak, sk = ceph.s3_credentials()
            self.env = {"AWS_ACCESS_KEY_ID": ak, "AWS_SECRET_ACCESS_KEY": sk}
            self.s3 = boto3.client(
                "s3", endpoint_url=ceph.s3_endpoint, aws_access_key_id=ak,
                aws_secret_access_key=sk, region_name="us-east-1",
                config=botocore.config.Config(s3={"addressing_style": "path"},
                                              retries={"max_attempts": 10}))
            try:
                self.s3.create_bucket(Bucket=BUCKET)
            except self.s3.exceptions.BucketAlreadyOwnedByYou:
                pass
        else:
            self.env = {}

    def put(self, key, data):
        if self.kind == "s3":
            self.s3.put_object(Bucket=BUCKET, Key=key, Body=data)
        else:
            self.ceph.put(POOL, key, data)

    def put_many(self, objs):
        if self.kind == "s3":
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(16) as ex:
                list(ex.map(lambda kv: self.put(*kv), objs.items()))
        else:
            self.ceph.put_many(POOL, objs)

    def source(self, prefix):
        return f"{self.kind}://{POOL if self.kind == 'rados' else BUCKET}/{prefix}"

    def args(self):
        if self.kind == "s3":
            return ["--endpoint", self.ceph.s3_endpoint]
        return ["--ceph-conf", self.ceph.conf_path]


_stores = {}


@pytest.fixture(scope="session", params=["rados", "s3"])
def store(request, ceph):
    if request.param not in _stores:
        _stores[request.param] = Store(request.param, ceph)
    return _stores[request.param]


@pytest.fixture(scope="session")
def s3store(ceph):
    if "s3" not in _stores:
        _stores["s3"] = Store("s3", ceph)
    return _stores["s3"]


@pytest.fixture
def mounter(tmp_path, ceph):
    """mounter(prefix, *args, cache=None, store=None, env=None) -> a started
    Mount of PREFIX in @store (default: the RADOS pool), @env added to the
    daemon's environment (hooks.env); all are unmounted at the end of the
    test."""
    mounts = []

    def make(prefix, *args, cache=None, start=True, store=None, env=None):
        mnt = tmp_path / f"mnt{len(mounts)}"
        mnt.mkdir(exist_ok=True)
        cache = cache or str(tmp_path / "cache")
        src = store.source(prefix) if store else f"rados://{POOL}/{prefix}"
        base = store.args() if store else ["--ceph-conf", ceph.conf_path]
        m = Mount(src, str(mnt), cache, str(tmp_path / f"fusefs{len(mounts)}.log"),
                  base + list(args), env=dict(store.env if store else {}, **(env or {})))
        mounts.append(m)
        return m.start() if start else m

    yield make
    umount_all(mounts)


@pytest.fixture
def hooks(tmp_path):
    """the daemon's test hooks (tests/mountlib.py Hooks); pass hooks.env to
    mounter(..., env=)"""
    d = tmp_path / "hooks"
    d.mkdir()
    h = Hooks(d)
    yield h
    h.clear()
