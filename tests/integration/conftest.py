"""pytest fixtures: one real Ceph cluster per session, fusefs mounts through
the real kernel FUSE (modelled on libfuse's test/util.py: start in the
foreground, poll until mounted, fail early if the daemon exits; on teardown
unmount and require exit status 0; scan the daemon's log for sanitizer
reports)."""

import os
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from cephcluster import CephCluster  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FUSEFS = os.environ.get("FUSEFS_BIN", os.path.join(ROOT, "build", "bin", "fusefs"))
POOL = "fusefs"
BAD_WORDS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "Segmentation fault")


def pytest_configure(config):
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


class Mount:
    """A running fusefs daemon and its mount point."""

    def __init__(self, source, mnt, cache, log, args, env=None):
        self.source, self.mnt, self.cache, self.log_path = source, mnt, cache, log
        self.args = args
        self.env = dict(os.environ, **(env or {}))
        self.proc = None

    def start(self, timeout=60):
        self.logf = open(self.log_path, "ab")
        cmd = [FUSEFS, "mount", self.source, self.mnt, "-f", "--cache-dir", self.cache] + self.args
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"fusefs exited with {self.proc.returncode}:\n{self.log()}")
            if os.path.ismount(self.mnt):
                return self
            time.sleep(0.05)
        raise AssertionError(f"not mounted after {timeout}s:\n{self.log()}")

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stats(self):
        raw = os.getxattr(self.mnt, "user.fusefs.stats").decode()
        return {k: int(v) for k, v in (line.split() for line in raw.splitlines())}

    def path(self, rel):
        return os.path.join(self.mnt, rel)

    def umount(self, check=True):
        if self.proc is None:
            return
        um = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True,
                            text=True)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            # say why, for the next one who sees this
            stacks = subprocess.run(
                ["gdb", "-p", str(self.proc.pid), "-batch", "-ex",
                 "thread apply all bt 12"], capture_output=True, text=True).stdout
            self.kill()
            raise AssertionError(f"fusefs did not exit after unmount (fusermount3: "
                                 f"{um.returncode} {um.stderr})\n{stacks[-6000:]}\n"
                                 f"{self.log()[-3000:]}")
        self.proc = None
        self.logf.close()
        log = self.log()
        for w in BAD_WORDS:
            assert w not in log, log
        if check:
            assert rc == 0, f"fusefs exited {rc}:\n{log}"

    def kill(self):
        """SIGKILL the daemon and clear the dead mount."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None
        subprocess.run(["fusermount3", "-uz", self.mnt], check=False,
                       stderr=subprocess.DEVNULL)
        self.logf.close()


@pytest.fixture
def mounter(tmp_path, ceph):
    """mounter(prefix, *args, cache=None, store=None) -> a started Mount of
    PREFIX in @store (default: the RADOS pool); all are unmounted at the
    end of the test."""
    mounts = []

    def make(prefix, *args, cache=None, start=True, store=None):
        mnt = tmp_path / f"mnt{len(mounts)}"
        mnt.mkdir(exist_ok=True)
        cache = cache or str(tmp_path / "cache")
        src = store.source(prefix) if store else f"rados://{POOL}/{prefix}"
        base = store.args() if store else ["--ceph-conf", ceph.conf_path]
        m = Mount(src, str(mnt), cache, str(tmp_path / f"fusefs{len(mounts)}.log"),
                  base + list(args), env=store.env if store else None)
        mounts.append(m)
        return m.start() if start else m

    yield make
    failed = []
    for m in mounts:
        try:
            m.umount()
        except AssertionError as e:
            failed.append(str(e))
    assert not failed, failed


def wait_for(cond, timeout=30):
    """poll @cond until true (True) or @timeout seconds pass (False)"""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def run_fusefs(*args, timeout=60, env=None):
    return subprocess.run([FUSEFS] + list(args), capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))
