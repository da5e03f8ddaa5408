"""python/fusefs_prefetch.py against a real mount over a file:// source,
with Debian's python3-torch: a training-loop-like run (DataLoader with
num_workers=2 and drop_last=True over DistributedSampler, two simulated
ranks on one mount, with and without the sampler's drop_last), a resume
mid-epoch, a RandomSampler seeded per epoch by the helper, the WebDataset
shard list, a Megatron-style GPT dataset over token files read through
np.memmap with its samples published as byte ranges; best effort on a directory that is not fusefs and on a refused
list (one warning, no exception; strict=True raises); and the package
installed from python/pyproject.toml into a venv."""

import errno
import logging
import os
import shutil
import subprocess
import sys

import pytest

from checks import cached, rnd
from mountlib import wait_for
from util import put, read_uncached

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import fusefs_prefetch as fp  # noqa: E402

torch = pytest.importorskip("torch")
from torch.utils.data import (DataLoader, Dataset, DistributedSampler,  # noqa: E402
                              RandomSampler, SequentialSampler)

KiB = 1024
N = 50                                  # files; 25 per rank


@pytest.fixture
def files(src):
    names = [f"d/f{i:03d}" for i in range(N)]
    put(src, {n: rnd(16 * KiB, i) for i, n in enumerate(names)})
    return names


class Files(Dataset):
    """reads file @i through the mount; yields its index"""

    def __init__(self, mnt, names):
        self.mnt, self.names = mnt, names

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        with open(os.path.join(self.mnt, self.names[i]), "rb") as f:
            assert len(f.read()) == 16 * KiB
        return i


def st(m, name):
    return fp.list_status(m.mnt, name)


def no_warnings(caplog):
    return [r for r in caplog.records if r.name == "fusefs_prefetch"] == []


@pytest.mark.parametrize("dist_drop_last", [False, True], ids=["pad", "drop"])
def test_training_loop_two_ranks(mounter, files, caplog, dist_drop_last):
    m = mounter()
    ds = Files(m.mnt, files)
    ranks = []
    for r in (0, 1):
        ds_sampler = DistributedSampler(ds, num_replicas=2, rank=r, shuffle=True, seed=5,
                                        drop_last=dist_drop_last)
        s = fp.PrefetchingSampler(ds_sampler, paths=files, mount=m.mnt)
        assert isinstance(s, torch.utils.data.Sampler)
        assert s.name == f"rank{r}"
        ranks.append((s, DataLoader(ds, sampler=s, batch_size=4, num_workers=2,
                                    drop_last=True)))
    epochs = 3
    for e in range(epochs):
        seen = [set(), set()]
        for s, _ in ranks:
            s.set_epoch(e)
            assert (st(m, s.name)["epoch"], st(m, s.name)["next_epoch"]) == (e, e + 1)
        # the two ranks step together, as DDP does
        for b0, b1 in zip(ranks[0][1], ranks[1][1]):
            seen[0].update(b0.tolist())
            seen[1].update(b1.tolist())
        for r, (s, loader) in enumerate(ranks):
            assert len(seen[r]) == 24            # 25 per rank, one batch of 4 short
            assert seen[r] <= set(s.order(e))
            x = st(m, s.name)
            # no drift: the epoch is where the loader is, whatever it skipped
            assert (x["epoch"], x["epochs_done"], x["read"]) == (e, e, 24), x
            assert x["files"] == 25 and x["queued"] == 1, x
    assert m.stats()["lists_published"] == 2 * (epochs + 1)
    assert no_warnings(caplog)
    assert "not published" not in m.log()


def test_resume_mid_epoch(mounter, files, caplog):
    m = mounter()
    ds = Files(m.mnt, files)
    s = fp.PrefetchingSampler(DistributedSampler(ds, num_replicas=1, rank=0, seed=1),
                              paths=files, mount=m.mnt, name="job")
    s.set_epoch(0)
    assert sum(1 for _ in DataLoader(ds, sampler=s, batch_size=5, num_workers=2)) == 10
    s.set_epoch(1)
    loader = DataLoader(ds, sampler=s, batch_size=5, num_workers=0)
    for k, _ in enumerate(loader):
        if k == 3:
            break                                 # a crash after 4 batches
    state = s.state_dict()
    assert state == {"epoch": 1, "start": 20}
    # a new process: the same list name, the epoch resumed at 20
    s2 = fp.PrefetchingSampler(DistributedSampler(ds, num_replicas=1, rank=0, seed=1),
                               paths=files, mount=m.mnt, name="job")
    s2.load_state_dict(state)
    x = st(m, "job")
    assert (x["epoch"], x["position"], x["read"], x["epochs_done"]) == (1, 20, 0, 1), x
    rest = [i for b in DataLoader(ds, sampler=s2, batch_size=5, num_workers=2)
            for i in b.tolist()]
    assert rest == s.order(1)[20:] and len(s2) == 30
    x = st(m, "job")
    assert (x["state"], x["read"], x["remaining"]) == ("done", 30, 0), x
    s2.set_epoch(2)
    assert (st(m, "job")["epoch"], st(m, "job")["epochs_done"]) == (2, 2)
    assert no_warnings(caplog)


def test_random_sampler_seeded_per_epoch(mounter, files, caplog):
    m = mounter()
    ds = Files(m.mnt, files)
    s = fp.PrefetchingSampler(RandomSampler(ds), paths=files, mount=m.mnt, name="rs",
                              seed=9)
    assert s.predictable()
    first = [i for b in DataLoader(ds, sampler=s, batch_size=10) for i in b.tolist()]
    x = st(m, "rs")
    assert (x["epoch"], x["read"], x["next_epoch"], x["next_epoch_files"]) == (0, N, 1, N)
    # no set_epoch(): the next iteration is epoch 1, in the order published
    second = [i for b in DataLoader(ds, sampler=s, batch_size=10) for i in b.tolist()]
    assert second == s.order(1) and first == s.order(0) and first != second
    assert sorted(second) == list(range(N))
    x = st(m, "rs")
    assert (x["epoch"], x["read"], x["epochs_done"]) == (1, N, 1), x
    # the same seed gives the same orders in another process
    again = fp.PrefetchingSampler(RandomSampler(ds), paths=files, mount=m.mnt,
                                  name="rs2", seed=9)
    assert again.order(1) == second
    # a sampler that cannot say its next epoch: this epoch only
    seq = fp.PrefetchingSampler(SequentialSampler(ds), paths=files, mount=m.mnt,
                                name="seq")
    assert not seq.predictable()
    assert list(seq) == list(range(N)) and st(m, "seq")["queued"] == 0
    assert no_warnings(caplog)


def test_webdataset_shard_list(mounter, files):
    m = mounter()
    shards = [fp.ShardList(m.mnt, files, seed=3, rank=r, world_size=2) for r in (0, 1)]
    urls = [sl.epoch(0) for sl in shards]
    assert all(u.startswith(m.mnt + "/d/f") for u in urls[0] + urls[1])
    assert sorted(urls[0] + urls[1]) == sorted(m.path(n) for n in files)
    assert urls[0] == [m.path(n) for n in fp.shard_order(files, 0, 3, 0, 2)]
    for r in (0, 1):
        x = st(m, f"rank{r}")
        assert (x["epoch"], x["files"], x["next_epoch"], x["next_epoch_files"]) == \
            (0, 25, 1, 25), x
    for u in urls[0][:5]:
        open(u, "rb").read()
    assert st(m, "rank0")["read"] == 5
    # the next epoch, resumed after 2 shards
    urls1 = shards[0].epoch(1, start=2)
    assert urls1 == [m.path(n) for n in shards[0].order(1)[2:]]
    x = st(m, "rank0")
    assert (x["epoch"], x["position"], x["epochs_done"]) == (1, 2, 1), x
    assert "webdataset" not in sys.modules


def test_not_fusefs_warns_once_and_goes_on(tmp_path, caplog):
    d = tmp_path / "plain"
    d.mkdir()
    names = [f"f{i}" for i in range(8)]
    for n in names:
        (d / n).write_bytes(b"x")
    caplog.set_level(logging.WARNING, logger="fusefs_prefetch")
    s = fp.PrefetchingSampler(SequentialSampler(names), paths=names, mount=str(d))
    for e in range(3):
        s.set_epoch(e)
        assert list(s) == list(range(8))
    warnings = [r for r in caplog.records if r.name == "fusefs_prefetch"]
    assert len(warnings) == 1 and "not a fusefs mount" in warnings[0].getMessage()
    sl = fp.ShardList(str(d), names, rank=0, world_size=1)
    assert sl.epoch(0) == [str(d / n) for n in fp.shard_order(names, 0)]
    with pytest.raises(fp.NotFusefs):
        fp.PrefetchingSampler(SequentialSampler(names), paths=names, mount=str(d),
                              strict=True)
    with pytest.raises(fp.NotFusefs):
        fp.publish(str(d), names)


def test_refused_list_warns_once(mounter, files, caplog):
    m = mounter()
    caplog.set_level(logging.WARNING, logger="fusefs_prefetch")
    bad = [f"nope/{i}" for i in range(N)]
    s = fp.PrefetchingSampler(SequentialSampler(range(N)), paths=bad, mount=m.mnt,
                              name="bad")
    for e in range(2):
        s.set_epoch(e)
        assert len(list(s)) == N
    warnings = [r for r in caplog.records if r.name == "fusefs_prefetch"]
    assert len(warnings) == 1 and "list bad" in warnings[0].getMessage(), warnings
    strict = fp.PrefetchingSampler(SequentialSampler(range(N)), paths=bad, mount=m.mnt,
                                   name="bad2", strict=True)
    with pytest.raises(fp.ListRejected):
        strict.set_epoch(0)
    with pytest.raises(fp.ListRejected):
        fp.publish(m.mnt, ["nope"], "bad3")
    # absolute paths below the mount are made relative
    fp.publish(m.mnt, [m.path(n) for n in files[:3]], "abs", epoch=0)
    assert st(m, "abs")["files"] == 3


def test_undecodable_and_bytes_names(mounter, files, src, caplog):
    """a file name that is not UTF-8 (str with surrogate escapes, as
    os.listdir() gives it) or bytes paths: the other lines are published,
    nothing raises in best-effort mode, publish() still works"""
    bad = "d/bad\udcff"
    put(src, {bad: b"x"})
    m = mounter()
    caplog.set_level(logging.WARNING, logger="fusefs_prefetch")
    names = files[:4] + [bad]
    s = fp.PrefetchingSampler(SequentialSampler(range(5)), paths=names, mount=m.mnt,
                              name="odd")
    s.set_epoch(0)
    assert list(s) == list(range(5))
    x = st(m, "odd")
    assert x["files"] == 4 and x["last_publish"]["rejected_binary"] == 1, x
    assert no_warnings(caplog)
    fp.publish(m.mnt, names, "odd2", epoch=0)
    assert st(m, "odd2")["files"] == 4
    fp.publish(m.mnt, [os.fsencode(n) for n in files[:3]], "odd3", epoch=0)
    assert st(m, "odd3")["files"] == 3
    fp.publish(m.mnt, [os.fsencode(m.path(n)) for n in files[:2]], "odd4", epoch=0)
    assert st(m, "odd4")["files"] == 2


def test_name_with_a_line_break_is_not_split(mounter, files, src):
    """a file whose name holds a line break cannot be a line of a list:
    written as it was, "d/f000\nd/f001" listed d/f000 and d/f001 (files
    nobody asked for); the list goes in the NUL form ("# nul") and names
    that file, and only it"""
    odd = files[0] + "\n" + files[1]
    put(src, {odd: b"x"})
    m = mounter()
    fp.publish(m.mnt, [odd, files[2], files[3]], "nl", epoch=0)
    x = st(m, "nl")
    assert x["files"] == 3, x
    assert x["last_publish"]["accepted"] == 3, x
    assert x["last_publish"]["headers"] == 2, x      # "# nul", "# epoch 0"


def test_list_name_that_is_a_path_is_refused(mounter, files, caplog):
    """a list name is checked as the daemon checks it: name="../evict"
    wrote the paths to .fusefs/evict and evicted the files (review); now
    publish() raises ListRejected (EINVAL) and a sampler warns once"""
    m = mounter()
    for n in files[:3]:
        assert read_uncached(m.path(n))
    assert wait_for(lambda: all(cached(m, n) > 0 for n in files[:3]))
    with pytest.raises(fp.ListRejected) as e:
        fp.publish(m.mnt, files[:3], name="../evict")
    assert e.value.errno == errno.EINVAL
    assert all(cached(m, n) > 0 for n in files[:3])
    caplog.set_level(logging.WARNING, logger="fusefs_prefetch")
    s = fp.PrefetchingSampler(SequentialSampler(range(3)), paths=files[:3],
                              mount=m.mnt, name="../pin")
    s.set_epoch(0)
    assert list(s) == [0, 1, 2]
    assert not no_warnings(caplog)
    assert fp.status(m.mnt, "../stats") == ""


def test_state_dict_after_set_epoch(tmp_path):
    """state_dict() between set_epoch() (or load_state_dict()) and the
    first index names the start of that epoch, not how far the previous
    iteration got: a checkpoint taken there must not skip the epoch"""
    d = tmp_path / "plain"
    d.mkdir()
    names = [f"f{i}" for i in range(8)]
    s = fp.PrefetchingSampler(SequentialSampler(names), paths=names, mount=str(d))
    s.set_epoch(0)
    assert list(s) == list(range(8))
    assert s.state_dict() == {"epoch": 0, "start": 8}
    s.set_epoch(1)
    assert s.state_dict() == {"epoch": 1, "start": 0}
    it = iter(s)
    assert [next(it), next(it)] == [0, 1]
    assert s.state_dict() == {"epoch": 1, "start": 2}
    s.load_state_dict({"epoch": 1, "start": 5})
    assert s.state_dict() == {"epoch": 1, "start": 5}
    assert list(s) == [5, 6, 7]
    assert s.state_dict() == {"epoch": 1, "start": 8}


def test_list_name_from_the_environment(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert fp.list_name() == f"pid{os.getpid()}"
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert fp.list_name() == "rank3"
    monkeypatch.setenv("RANK", "11")
    assert fp.list_name() == "rank11"

    class S:
        rank = 2
    assert fp.list_name(S()) == "rank2"


def test_installs_into_a_venv(tmp_path):
    # offline: the venv sees Debian's setuptools and pip, the package goes
    # into the venv's own site-packages
    srcdir = tmp_path / "pkg"
    shutil.copytree(os.path.join(ROOT, "python"), srcdir,
                    ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    venv = tmp_path / "venv"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--system-site-packages",
                    "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index",
                        "--no-deps", "--quiet", str(srcdir)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([py, "-c", "import fusefs_prefetch as f; print(f.__file__, "
                        "f.__version__)"], capture_output=True, text=True, cwd="/")
    assert r.returncode == 0, r.stderr
    where, version = r.stdout.split()
    assert where.startswith(str(venv)), where
    assert version == fp.__version__
    r = subprocess.run([py, "-m", "pip", "show", "fusefs-epochs"], capture_output=True,
                       text=True)
    assert f"Version: {fp.__version__}" in r.stdout, r.stdout + r.stderr


def write_megatron(src, prefix, tokens, seqs):
    """@tokens (int32 numpy array) as PREFIX.bin and a Megatron-LM .idx
    (MMapIndexedDataset version 1) of @seqs sequences of equal length"""
    import numpy as np
    path = os.path.join(src, prefix)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tokens.astype(np.int32).tofile(path + ".bin")
    sizes = np.full(seqs, len(tokens) // seqs, dtype=np.int32)
    sizes[-1] += len(tokens) - int(sizes.sum())
    pointers = np.concatenate(([0], np.cumsum(sizes[:-1], dtype=np.int64) * 4))
    with open(path + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + (1).to_bytes(8, "little") + bytes([4]) +
                seqs.to_bytes(8, "little") + (seqs + 1).to_bytes(8, "little"))
        f.write(sizes.tobytes() + pointers.astype(np.int64).tobytes() +
                np.arange(seqs + 1, dtype=np.int64).tobytes())


def test_megatron_token_ranges_through_memmap(mounter, src):
    """the example GPT dataset (python/examples/megatron_gpt.py): 400
    random samples of 2,049 tokens out of two token files, 2 workers;
    every sample right, every listed range read, and the backend read
    pages of the samples, not chunks of the files"""
    np = pytest.importorskip("numpy")
    sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
    from megatron_gpt import GPTDataset
    rng = np.random.default_rng(7)
    data = {p: rng.integers(0, 50000, 3_000_000, dtype=np.int32)
            for p in ("tok/a", "tok/b")}
    for p, t in data.items():
        write_megatron(src, p, t, 3)
    m = mounter("--cache-size", "64M")
    ranges = fp.TokenRanges(m.mnt, ["tok/a", "tok/b"], seq_len=2048)
    assert len(ranges) == 2 * ((3_000_000 - 1) // 2048)
    assert ranges[len(ranges) // 2 + 1][1:] == (2048 * 4, 2049 * 4)
    ds = GPTDataset(ranges)
    base = RandomSampler(ds, num_samples=400)
    sampler = fp.PrefetchingSampler(base, paths=ranges, mount=m.mnt, name="gpt",
                                    strict=True)
    sampler.set_epoch(0)
    order = list(sampler.order(0))
    loader = DataLoader(ds, batch_size=8, sampler=sampler, num_workers=2)
    got = [x for batch, _ in loader for x in batch.numpy()]
    assert len(got) == 400
    for i, x in zip(order, got):
        f, tok = ranges.locate(i)
        want = data[("tok/a", "tok/b")[f]][tok:tok + 2048]
        assert np.array_equal(x, want), i
    st = fp.list_status(m.mnt, "gpt")
    assert st["read"] == 400 and st["remaining"] == 0, st
    s = m.stats()
    pages = sum(len(range(r[1] // 4096, (r[1] + r[2] + 4095) // 4096))
                for r in (ranges[i] for i in order)) * 4096
    idx = sum(os.path.getsize(os.path.join(src, p + ".idx")) for p in data)
    assert s["chunks_stored"] == 2, s        # the .idx files, read whole
    assert s["bytes_from_backend"] - idx <= 2 * pages, (s, pages)
    assert s["range_prefetches"] > 0, s
