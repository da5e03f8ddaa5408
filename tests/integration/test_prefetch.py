"""Epoch lists, prefetch ahead of the reader, eviction by next use and by
heat, pins, heat persistence, export/import warm-up, malformed lists, and
the Python helper -- against the real cluster through kernel FUSE.

The bytes-per-epoch bounds are the eviction's: those tests hold the
prefetcher with the prefetch-off test hook, since what it fetches in the
background before a reader arrives depends on how the machine schedules
its thread (with the prefetcher they are benchmark figures: make
bench-epoch, docs/benchmarks-epoch.md).  What the prefetcher does is
checked by waiting for it (the list tests below)."""

import os
import random
import subprocess
import sys
import time

import pytest

from checks import MALFORMED, MiB, cached, rnd
from conftest import POOL, ROOT, run_fusefs, wait_for

sys.path.insert(0, os.path.join(ROOT, "python"))
import fusefs_prefetch  # noqa: E402


@pytest.fixture(scope="module")
def shards(ceph):
    """32 files of 1 MiB (the chunk size used here) under pf/"""
    data = {f"s{i:03d}": rnd(MiB, i) for i in range(32)}
    ceph.put_many(POOL, {f"pf/{k}": v for k, v in data.items()})
    return data


@pytest.fixture(scope="module")
def many(ceph):
    """128 files of 1 MiB under pf/m/"""
    data = {f"m/f{i:03d}": rnd(MiB, 1000 + i) for i in range(128)}
    ceph.put_many(POOL, {f"pf/{k}": v for k, v in data.items()})
    return data


def list_file(tmp_path, names, name="l.txt"):
    p = tmp_path / name
    p.write_text("".join(n + "\n" for n in names))
    return str(p)


def mount_pf(mounter, *args, cache=None, env=None):
    return mounter("pf", "--chunk-size", "1M", "--readahead", "0", *args, cache=cache,
                   env=env)


def held(hooks):
    """the env of a mount whose prefetcher does nothing (demand reads only)"""
    hooks.set("prefetch-off", 1)
    return hooks.env


def test_list_is_prefetched_in_order_ahead_of_reader(mounter, shards, tmp_path):
    m = mount_pf(mounter, "--cache-size", "64M")
    order = sorted(shards)
    random.Random(3).shuffle(order)
    r = run_fusefs("prefetch", m.mnt, "--list", list_file(tmp_path, order),
                   "--name", "rank0", "--wait", "--timeout", "60")
    assert r.returncode == 0, r.stderr
    assert "accepted 32" in r.stdout
    assert all(cached(m, n) == MiB for n in order)
    s = m.stats()
    assert s["prefetch_chunks"] == 32 and s["bytes_from_backend"] == 32 * MiB
    for n in order:                                 # the epoch: all hits
        assert open(m.path(n), "rb").read() == shards[n]
    s = m.stats()
    assert s["bytes_from_backend"] == 32 * MiB and s["misses"] == 0
    st = fusefs_prefetch.status(m.mnt, "rank0")
    assert "position 32" in st and "hit_ratio 1.000" in st
    r = run_fusefs("status", m.mnt)
    assert 'list_position{list="rank0"} 32' in r.stdout


def test_list_larger_than_cache_keeps_the_window(mounter, shards, tmp_path):
    # room for 8 of the 32 files: the first 8 of the list, nothing else
    m = mount_pf(mounter, "--cache-size", "8M")
    order = sorted(shards)
    random.Random(4).shuffle(order)
    r = run_fusefs("prefetch", m.mnt, "--list", list_file(tmp_path, order), "--wait",
                   "--timeout", "30", "--stall", "3")
    assert r.returncode == 4, r.stderr                  # cache full ahead of the reader
    assert wait_for(lambda: sum(cached(m, n) for n in order[:8]) == 8 * MiB)
    time.sleep(1)
    assert sum(cached(m, n) for n in order[8:]) == 0   # window not evicted
    # reading on: the window moves; every next file arrives without the
    # reader asking for it (it would be a miss)
    for n in order:
        assert wait_for(lambda: cached(m, n) == MiB, timeout=20), n
        assert open(m.path(n), "rb").read() == shards[n]
    assert m.stats()["misses"] == 0
    assert m.stats()["cache_bytes_used"] <= 8 * MiB


def run_epochs(m, shards, tmp_path, epochs, publish):
    """read shuffled epochs; returns backend bytes per epoch"""
    per = []
    orders = []
    for e in range(epochs + 1):
        o = sorted(shards)
        random.Random(100 + e).shuffle(o)
        orders.append(o)
    if publish:
        for e in (0, 1):
            assert run_fusefs("prefetch", m.mnt, "--list",
                              list_file(tmp_path, orders[e], f"e{e}")).returncode == 0
    for e in range(epochs):
        before = m.stats()["bytes_from_backend"]
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
        for n in orders[e]:
            assert open(m.path(n), "rb").read() == shards[n]
        if publish and e + 2 <= epochs:
            assert run_fusefs("prefetch", m.mnt, "--list",
                              list_file(tmp_path, orders[e + 2], f"e{e + 2}")).returncode == 0
        per.append(m.stats()["bytes_from_backend"] - before)
    return per


@pytest.mark.parametrize("publish", [True, False], ids=["lists", "heat"])
def test_dataset_twice_the_cache(mounter, many, tmp_path, hooks, publish):
    m = mount_pf(mounter, "--cache-size", "64M", env=held(hooks))
    per = run_epochs(m, many, tmp_path, 3, publish)
    print(per, {k: v for k, v in m.stats().items() if not k.startswith("ns_")})
    dataset, cache = 128 * MiB, 64 * MiB
    # steady state: what the cache cannot hold, once per epoch (demand
    # reads only: each epoch's bytes are its own); LRU fetches ~2x this
    for b in per[1:]:
        assert b <= 1.05 * (dataset - cache), per
    assert m.stats()["cache_bytes_used"] <= cache


def test_lru_mode_cycles_for_comparison(mounter, many, tmp_path):
    # not a requirement: documents what the policies above avoid
    m = mount_pf(mounter, "--cache-size", "64M", "--evict", "lru")
    per = run_epochs(m, many, tmp_path, 2, False)
    assert per[1] > 1.05 * (64 * MiB)


def test_pins_hold(mounter, shards, tmp_path):
    m = mount_pf(mounter, "--cache-size", "8M", "--evict", "lru")
    open(m.path("s000"), "rb").read()
    assert run_fusefs("pin", m.path("s000")).returncode == 0
    for n in sorted(shards)[1:]:
        open(m.path(n), "rb").read()
    assert m.stats()["evictions"] > 10
    assert cached(m, "s000") == MiB
    assert run_fusefs("unpin", m.path("s000")).returncode == 0
    subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
    for n in sorted(shards)[1:]:
        open(m.path(n), "rb").read()
    assert cached(m, "s000") == 0
    assert run_fusefs("evict", m.mnt).returncode == 0     # a whole tree
    assert m.stats()["cache_bytes_used"] == 0


def test_heat_survives_restart_and_warms_a_fresh_cache(mounter, shards, tmp_path):
    cache = str(tmp_path / "hc")
    m = mount_pf(mounter, cache=cache)
    for _ in range(3):
        open(m.path("s005"), "rb").read()
        subprocess.run(["sh", "-c", "echo 3 > /proc/sys/vm/drop_caches"], check=True)
    open(m.path("s006"), "rb").read()
    m.umount()                          # (heat is saved at the unmount)
    m2 = mount_pf(mounter, cache=cache)
    r = run_fusefs("heat", m2.mnt, "--top", "2")
    lines = [l for l in r.stdout.splitlines() if not l.startswith("#")]
    assert lines[0].split("\t")[0] == "s005" and lines[0].split("\t")[2] == "3"
    assert lines[1].split("\t")[0] == "s006"
    export = run_fusefs("heat", "export", m2.mnt).stdout
    (tmp_path / "hot.tsv").write_text(export)
    # a new node: empty cache, warmed from the other node's heat
    m3 = mount_pf(mounter, cache=str(tmp_path / "fresh"))
    assert cached(m3, "s005") == 0
    r = run_fusefs("warm", m3.mnt, "--from", str(tmp_path / "hot.tsv"))
    assert r.returncode == 0, r.stderr
    assert wait_for(lambda: cached(m3, "s005") == MiB and cached(m3, "s006") == MiB)
    assert cached(m3, "s007") == 0


def test_rewarm_at_mount(mounter, shards, tmp_path):
    cache = str(tmp_path / "rw")
    m = mount_pf(mounter, "--cache-size", "4M", "--evict", "lru", cache=cache)
    for _ in range(2):
        open(m.path("s010"), "rb").read()
    for n in sorted(shards)[11:20]:                 # push s010 out
        open(m.path(n), "rb").read()
    assert cached(m, "s010") == 0
    m.umount()                          # (heat is saved at the unmount)
    # default policy: the cached files are in no list, the hot one wins
    m2 = mount_pf(mounter, "--cache-size", "4M", "--rewarm", "1", cache=cache)
    assert wait_for(lambda: cached(m2, "s010") == MiB)


@pytest.mark.parametrize("name,data,want", MALFORMED, ids=[c[0] for c in MALFORMED])
def test_malformed_lists_are_reported(mounter, shards, tmp_path, name, data, want):
    m = mount_pf(mounter)
    (tmp_path / "list").write_bytes(data)
    r = run_fusefs("prefetch", m.mnt, "--list", str(tmp_path / "list"), "--name", name)
    assert r.returncode == 0, r.stderr
    for k, v in want.items():
        assert f"\n{k} {v}" in "\n" + r.stdout, (k, r.stdout)


def test_all_bad_list_is_refused(mounter, shards, tmp_path):
    m = mount_pf(mounter)
    (tmp_path / "bad").write_bytes(b"\x00\x01\x02" * 1000 + b"\nnope\n")
    r = run_fusefs("prefetch", m.mnt, "--list", str(tmp_path / "bad"), "--name", "bad")
    assert r.returncode == 1 and "not published" in r.stderr
    with pytest.raises(OSError):
        with open(os.path.join(m.mnt, ".fusefs/lists/x"), "wb") as f:
            f.write(b"nothing/here\n")
    assert m.stats()["lists_published"] == 0


def test_list_of_a_million_lines(mounter, shards, tmp_path):
    m = mount_pf(mounter)
    names = sorted(shards)
    lines = "".join(f"{names[i % 32]}\n" if i < 32 else f"missing/{i}\n"
                    for i in range(1_000_000))
    (tmp_path / "big").write_text(lines)
    r = run_fusefs("prefetch", m.mnt, "--list", str(tmp_path / "big"), "--name", "big",
                   timeout=120)
    assert r.returncode == 0
    assert "lines 1000000" in r.stdout and "accepted 32" in r.stdout
    assert "rejected_unknown 999968" in r.stdout


class SeededSampler:
    """DistributedSampler-like: deterministic shuffle by seed + epoch."""

    def __init__(self, n, rank=0, world=1, seed=7):
        self.n, self.rank, self.world, self.seed, self.epoch = n, rank, world, seed, 0

    def set_epoch(self, e):
        self.epoch = e

    def __iter__(self):
        idx = list(range(self.n))
        random.Random(self.seed + self.epoch).shuffle(idx)
        return iter(idx[self.rank::self.world])

    def __len__(self):
        return len(range(self.rank, self.n, self.world))


def test_python_helper_publishes_the_seeded_order(mounter, shards):
    m = mount_pf(mounter, "--cache-size", "64M")
    paths = sorted(shards)
    s = fusefs_prefetch.PrefetchingSampler(SeededSampler(32, rank=1, world=2), paths, m.mnt)
    assert s.name == "rank1"
    s.set_epoch(0)
    got = list(iter(s))
    want0 = list(SeededSampler(32, rank=1, world=2))
    assert got == want0
    st = fusefs_prefetch.status(m.mnt, "rank1")
    assert "files 16" in st and "next_epoch_files 16" in st
    # fusefs fetches in exactly the published order
    assert wait_for(lambda: all(cached(m, paths[i]) == MiB for i in want0))
    for i in got:
        open(m.path(paths[i]), "rb").read()
    s.set_epoch(1)
    list(iter(s))
    st = fusefs_prefetch.status(m.mnt, "rank1")
    assert "epochs_done 1" in st or "position 0" in st
    with pytest.raises(fusefs_prefetch.ListRejected):
        fusefs_prefetch.publish(m.mnt, ["nope"], "bad")


@pytest.fixture(scope="module")
def big_shards(ceph):
    """4 shards of 8 MiB under pf/b/ (32 MiB)"""
    data = {f"b/s{i}": rnd(8 * MiB, 2000 + i) for i in range(4)}
    ceph.put_many(POOL, {f"pf/{k}": v for k, v in data.items()})
    return data


def test_shards_stream_through_chunk_by_chunk(mounter, big_shards, hooks):
    # chunk-level Belady on the real cluster: shards of 8 chunks, a
    # dataset twice the cache, each epoch begun and the next one queued
    # (docs/epochs.md): dataset - cache per epoch from the second on (the
    # eviction's bound: the prefetcher is held, see the module docstring)
    m = mount_pf(mounter, "--cache-size", "16M", env=held(hooks))
    orders = []
    for e in range(4):
        o = sorted(big_shards)
        random.Random(300 + e).shuffle(o)
        orders.append(o)
    per = []
    for e in range(3):
        for text in (f"# epoch {e}\n# begin {e}\n" + "".join(n + "\n" for n in orders[e]),
                     f"# epoch {e + 1}\n" + "".join(n + "\n" for n in orders[e + 1])):
            with open(os.path.join(m.mnt, ".fusefs", "lists", "rank0"), "w") as f:
                f.write(text)
        before = m.stats()["bytes_from_backend"]
        for n in orders[e]:
            with open(m.path(n), "rb") as f:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                assert f.read() == big_shards[n], n
        per.append(m.stats()["bytes_from_backend"] - before)
    print("backend per epoch (MiB):", [b / MiB for b in per])
    for b in per[1:]:
        assert b <= 1.05 * (32 - 16) * MiB, per
    assert m.stats()["cache_bytes_used"] <= 16 * MiB
