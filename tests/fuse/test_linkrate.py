"""The backend's measured rate and the bound it sets on read-ahead and
prefetch in flight (linkrate.c, include/linkrate.h;
--ahead-time): both shown by `fusefs stats` and the metrics page once a
read completed. Their effect over a slow link is measured by `make
bench-epoch` (docs/benchmarks-epoch.md) and unit-tested with made-up
times (tests/unit/test_linkrate.c, test_fetch.c)."""

import hashlib

from checks import MiB, rnd
from util import put

CHUNK = MiB                     # the tests' chunk size (conftest.CHUNK_ARGS)


def read_through(m, name, want):
    h = hashlib.sha256()
    with open(m.path(name), "rb", buffering=0) as f:
        while True:
            b = f.read(MiB)
            if not b:
                break
            h.update(b)
    assert h.digest() == want


def test_rate_and_bound_are_shown(mounter, src):
    data = rnd(32 * MiB, 7)
    put(src, {"shard": data})
    m = mounter()
    s = m.stats()
    # nothing read yet: no estimate, no bound
    assert s["backend_rate_bytes"] == 0, s
    assert s["ahead_bound_bytes"] == 0, s
    read_through(m, "shard", hashlib.sha256(data).digest())
    s = m.stats()
    assert s["backend_rate_bytes"] > 0, s
    # 50 ms of the rate (the default --ahead-time), never under two
    # chunks (the floor for chunk-sized reads)
    assert s["ahead_bound_bytes"] >= 2 * CHUNK, s
    assert abs(s["ahead_bound_bytes"] - s["backend_rate_bytes"] / 20) <= 1 or \
        s["ahead_bound_bytes"] == 2 * CHUNK, s


def test_ahead_time_zero_measures_without_bound(mounter, src):
    data = rnd(16 * MiB, 8)
    put(src, {"shard": data})
    m = mounter("--ahead-time", "0")
    read_through(m, "shard", hashlib.sha256(data).digest())
    s = m.stats()
    assert s["backend_rate_bytes"] > 0, s
    assert s["ahead_bound_bytes"] == 0, s
