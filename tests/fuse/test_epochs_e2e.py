"""Epoch lists end to end over a file:// source: shuffled epochs of a
dataset twice the cache, each epoch's list published with a begin and
the next epoch's list queued while it runs (as the Python helper does).
From the second epoch on, every epoch reads at most 1.05 x (dataset -
cache) from the backend (bytes_from_backend), for 8 MiB and 32 MiB shards
and 100 KiB files, also when each epoch reads only 90% of its list
(drop_last), with 4 readers opening out of order, across a resumed epoch
and with two ranks' lists on one mount.  (Lists against heat over the
same configurations: tests/unit/test_belady.c.)

These bounds are the eviction's (the lists as the cache's future): the
prefetcher is held by the prefetch-off test hook, since what it fetches
in the background before an epoch's reader arrives depends on how the
machine schedules its thread, and a test must not.  With the prefetcher
running, the same bounds are benchmark figures (make bench-epoch,
docs/benchmarks-epoch.md).  The last test checks what the prefetcher
does, waiting for it rather than racing it."""

import concurrent.futures
import os
import random
import threading
import time

import pytest

from checks import rnd
from mountlib import wait_for
from util import put, read_uncached

KiB = 1024
MiB = 1024 * KiB
EPOCHS = 3                      # epoch 0 fills the cache; 1.. are checked
SLACK = 1.05


def ctl_write(m, name, data):
    with open(os.path.join(m.mnt, ".fusefs", name), "wb") as f:
        f.write(data.encode())


def listing(order, epoch, begin=None, at=None):
    head = f"# epoch {epoch}\n"
    if begin is not None:
        head += f"# begin {begin}" + (f" at {at}" if at else "") + "\n"
    return head + "".join(n + "\n" for n in order)


def dataset(src, count, size, prefix="d"):
    data = {f"{prefix}{i:03d}": rnd(size, i) for i in range(count)}
    put(src, data)
    return sorted(data), data


def held(hooks):
    """the env of a mount whose prefetcher does nothing (demand reads only)"""
    hooks.set("prefetch-off", 1)
    return hooks.env


def orders(names, seed):
    out = []
    for e in range(EPOCHS + 1):
        o = list(names)
        random.Random(seed * 1000 + e).shuffle(o)
        out.append(o)
    return out


def backend(m):
    return m.stats()["bytes_from_backend"]


def read_all(m, names, data, readers):
    """read @names through the mount, @readers threads taking the next
    file from a shared position (opens a little out of order)"""
    if readers == 1:
        for n in names:
            assert read_uncached(m.path(n)) == data[n], n
        return
    it = iter(names)
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                n = next(it, None)
            if n is None:
                return
            assert read_uncached(m.path(n)) == data[n], n

    with concurrent.futures.ThreadPoolExecutor(readers) as ex:
        for f in [ex.submit(worker) for _ in range(readers)]:
            f.result()


def run_epochs(m, ranks, data, frac=1.0, readers=1, resume_at=None):
    """ranks: {list name: per-epoch orders}; returns backend bytes per
    epoch.  Each epoch: begin it (publishing it), queue the next, read
    @frac of each rank's list, ranks interleaved file by file."""
    per_epoch, stalls = [], []
    for e in range(EPOCHS):
        before, stall = backend(m), m.stats()["stall_us"]
        for name, ords in ranks.items():
            ctl_write(m, f"lists/{name}", listing(ords[e], e, begin=e))
            ctl_write(m, f"lists/{name}", listing(ords[e + 1], e + 1))
        todo = {name: ords[e][:int(len(ords[e]) * frac)]
                for name, ords in ranks.items()}
        if resume_at is not None and e == 2:
            # a crash and resume: the epoch begins again at K
            for name, ords in ranks.items():
                read_all(m, todo[name][:resume_at], data, readers)
                ctl_write(m, f"lists/{name}",
                          listing(ords[e], e, begin=e, at=resume_at))
                todo[name] = todo[name][resume_at:]
        longest = max(len(t) for t in todo.values())
        mixed = [t[i] for i in range(longest) for t in todo.values()
                 if i < len(t)]
        read_all(m, mixed, data, readers)
        per_epoch.append(backend(m) - before)
        stalls.append(m.stats()["stall_us"] - stall)
    print(f"reader stall per epoch (ms): {[round(s / 1000) for s in stalls]}")
    return per_epoch


def check(per_epoch, dataset_bytes, cache_bytes, what):
    bound = SLACK * (dataset_bytes - cache_bytes)
    print(f"{what}: backend per epoch (MiB) "
          f"{[round(b / MiB, 2) for b in per_epoch]}, (D - C) = "
          f"{(dataset_bytes - cache_bytes) / MiB:.2f} MiB")
    for e, b in enumerate(per_epoch[1:], 1):
        assert b <= bound, (what, e, b / MiB, bound / MiB, per_epoch)


SHARDS = [
    pytest.param(8 * MiB, 4, 16, id="8MiB-shards"),
    pytest.param(32 * MiB, 2, 32, id="32MiB-shards"),
    pytest.param(100 * KiB, 164, 8, id="100KiB-files"),
]


@pytest.mark.parametrize("size,count,cache_mib", SHARDS)
def test_lists_read_dataset_minus_cache(mounter, src, hooks, size, count, cache_mib):
    names, data = dataset(src, count, size)
    m = mounter("--cache-size", f"{cache_mib}M", env=held(hooks))
    per = run_epochs(m, {"rank0": orders(names, 1)}, data)
    check(per, count * size, cache_mib * MiB, f"{size // KiB} KiB x {count}")


@pytest.mark.parametrize("size,count,cache_mib", [SHARDS[0], SHARDS[2]])
def test_drop_last_and_out_of_order_readers(mounter, src, hooks, size, count,
                                            cache_mib):
    names, data = dataset(src, count, size)
    m = mounter("--cache-size", f"{cache_mib}M", env=held(hooks))
    per = run_epochs(m, {"rank0": orders(names, 2)}, data, frac=0.9,
                     readers=4)
    # each epoch reads 90% of the dataset: the bound stays D - C
    check(per, count * size, cache_mib * MiB, "drop_last, 4 readers")


def test_resumed_epoch(mounter, src, hooks):
    names, data = dataset(src, 164, 100 * KiB)
    m = mounter("--cache-size", "8M", env=held(hooks))
    per = run_epochs(m, {"rank0": orders(names, 3)}, data, resume_at=20)
    check(per, 164 * 100 * KiB, 8 * MiB, "resumed epoch 2")


def test_two_ranks_one_mount(mounter, src, hooks):
    names, data = dataset(src, 164, 100 * KiB)
    m = mounter("--cache-size", "8M", env=held(hooks))
    ranks = {}
    for r in range(2):
        ords = []
        for o in orders(names, 4):      # DistributedSampler: one order,
            ords.append(o[r::2])        # every 2nd file from rank r
        ranks[f"rank{r}"] = ords
    per = run_epochs(m, ranks, data)
    check(per, 164 * 100 * KiB, 8 * MiB, "two ranks")
    # the victims by next use come from the use heaps: no choice ranks
    # every cached file (~80 here), a few uses are asked per choice
    s = m.stats()
    print({k: s[k] for k in ("victim_choices", "victim_full_ranks",
                             "victim_uses_asked", "data_files_reused")})
    assert s["victim_choices"] > 100, s
    assert s["victim_full_ranks"] == 0, s
    assert s["victim_uses_asked"] < 20 * s["victim_choices"], s
    # the evicted files' data files make the new ones (data/spare)
    assert s["data_files_reused"] > 0, s


def settle(m, keys=("staged_chunks", "prefetch_chunks", "bytes_from_backend"),
           quiet_s=1.0, limit_s=30.0):
    """wait until the prefetcher stopped moving (the counters of @keys
    unchanged for @quiet_s); returns the stats then"""
    deadline = time.monotonic() + limit_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        s = m.stats()
        now = tuple(s[k] for k in keys)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return s
        time.sleep(0.1)
    raise AssertionError(f"the prefetcher did not settle: {last}")


def test_misses_the_cache_would_not_keep_are_staged_in_memory(mounter, src, hooks):
    """Dataset 4 x the cache, shuffled epochs with the next one queued.
    At an epoch's start the cache holds its first files (MIN); the policy
    would keep none of the missing ones after their read (the cached ones
    are needed sooner), so the prefetcher fetches them ahead into memory
    only (staged: at most half of --memory-limit, 32 MiB here) and the
    link works ahead of the reader.  The reader gets them from memory:
    none is left unread, and each epoch still reads at most
    1.05 x (dataset - cache) from the backend (no second fetch).
    The prefetcher stages before the reader starts (waited for) and is
    held while the reader reads (the prefetch-off hook): what it would
    fetch meanwhile, for this epoch or the queued one, depends on how the
    two threads are scheduled (under CPU hogs an epoch read 51 MiB, not
    the 50.4 MiB bound, as bytes moved between epochs)."""
    names, data = dataset(src, 16, 4 * MiB)
    m = mounter("--cache-size", "16M", "--memory-limit", "64M", env=hooks.env)
    ords = orders(names, 5)
    per = []
    for e in range(EPOCHS):
        before = backend(m)
        hooks.set("prefetch-off", 0)
        ctl_write(m, "lists/rank0", listing(ords[e], e, begin=e))
        if e + 1 < EPOCHS:
            ctl_write(m, "lists/rank0", listing(ords[e + 1], e + 1))
        if e >= 1:
            s0 = m.stats()
            # most of the 32 MiB of staging holds this epoch's misses
            # before the reader starts (waited for, however slow the
            # prefetcher's thread is scheduled)
            assert wait_for(lambda: (lambda s: s["staged_chunks"] - s0["staged_chunks"] >= 16
                                     or s["mem_budget_ahead_bytes"] >= 16 * MiB)(m.stats()),
                            timeout=60), m.stats()
        hooks.set("prefetch-off", 1)
        # a round under way ends; its fetches are counted in this epoch
        settle(m)
        read_all(m, ords[e], data, 1)
        per.append(backend(m) - before)
    hooks.set("prefetch-off", 0)
    assert wait_for(lambda: m.stats()["staged_chunks"] >= 32, timeout=60), m.stats()
    after = settle(m)
    assert after["staged_unread"] == 0, after
    check(per, 64 * MiB, 16 * MiB, "4 MiB files, staged misses")
