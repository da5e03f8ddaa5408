"""pytest fixtures for the FUSE suite without Ceph: the real daemon serves a
file:///DIR source (a temporary directory tree) through the kernel FUSE
(tests/mountlib.py starts, polls, unmounts and checks exit status 0 and
the log for sanitizer reports). FUSEFS_BIN names the binary."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from mountlib import Hooks, Mount, umount_all  # noqa: E402

# small chunks keep the datasets small and every test fast
CHUNK_ARGS = ("--chunk-size", "1M")


def pytest_configure(config):
    if not os.path.exists("/dev/fuse"):
        raise pytest.UsageError("/dev/fuse is missing: the FUSE tests need kernel FUSE")


@pytest.fixture
def src(tmp_path):
    """the dataset: an empty directory the test fills"""
    d = tmp_path / "src"
    d.mkdir()
    return d


@pytest.fixture
def sized(src):
    """files of the sizes at chunk boundaries (0, 1, chunk-1, chunk,
    chunk+1 and a big one), written to the source: {name: bytes}"""
    from checks import rnd
    from util import CHUNK, put
    sizes = {"zero": 0, "one": 1, "chunk_minus_1": CHUNK - 1, "chunk": CHUNK,
             "chunk_plus_1": CHUNK + 1, "big": 5 * CHUNK + 12345}
    data = {name: rnd(n, i) for i, (name, n) in enumerate(sizes.items())}
    put(src, data)
    return data


@pytest.fixture
def mounter(tmp_path, src):
    """mounter(*args, cache=None, source=None, start=True, preexec=None, env=None) -> a started Mount
    of file://SRC (1 MiB chunks unless @args say otherwise); every mount is
    unmounted, with exit status 0 required, at the end of the test."""
    mounts = []

    def make(*args, cache=None, source=None, start=True, preexec=None, env=None):
        mnt = tmp_path / f"mnt{len(mounts)}"
        mnt.mkdir(exist_ok=True)
        cache = cache or str(tmp_path / "cache")
        m = Mount(source or f"file://{src}", str(mnt), cache,
                  str(tmp_path / f"fusefs{len(mounts)}.log"), list(CHUNK_ARGS + args),
                  env=env, preexec=preexec)
        mounts.append(m)
        return m.start() if start else m

    yield make
    umount_all(mounts)


@pytest.fixture
def hooks(tmp_path):
    d = tmp_path / "hooks"
    d.mkdir()
    h = Hooks(d)
    yield h
    h.clear()
