#!/usr/bin/python3
"""Random reads inside big files, fusefs against local disk and against another fusefs
build (`make bench-random`; docs/benchmarks-random.md). A first slice of issue #37's
benchmark: a file:// source on local disk, no Ceph, no ceph-fuse yet.

Workloads, each on a fresh cache directory per mount, every byte checked:
  tokens   a token file of --token-mib MiB, --samples samples of 8,196 bytes (2,049 uint32
           tokens) at sample-aligned offsets in a seeded shuffled order, read through
           np.memmap by 4 threads (--madvise random: the mapping advised MADV_RANDOM),
           --epochs epochs, at --cache-size = the file / 2;
  records  --records records at seeded random offsets of a --record-file-mib MiB file: a
           512-byte header read, then the 100 KiB body right after it (plain reads);
  seq      --seq-files files of --seq-mib MiB read whole, cold, 1 MiB reads, one reader.
--workloads picks some of them. With --lists, a configuration "lists" runs --bin with the
tokens epochs published as sample-range lists (docs/epochs.md, "Sample ranges"): epoch e
begun with its order and e + 1 queued, at the start of epoch e; --compute-ms of simulated
work per sample (each reader thread sleeps) gives the prefetcher time to be ahead.
--cache-ratio sets the tokens cache to that fraction of the token file.
Each round runs, for every workload, local disk, --base-bin (if given) and --bin, the
order rotated per round; the page cache is dropped before each (echo 1). Reported per
configuration: wall time (median over rounds, and the ratio to local disk taken per round,
then the median), and backend bytes: the daemon's own count of bytes read from the source
(`bytes_from_backend`), divided by the bytes the workload read (the sample, record or file
bytes), per epoch for tokens.

  bench/randread.py --bin build/bin/fusefs --base-bin /tmp/base/fusefs [--rounds 3]
"""

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

MIB = 1 << 20
SAMPLE = 2049 * 4                   # 8,196 bytes: 2,049 uint32 tokens
HEADER, BODY = 512, 100 << 10


def make_file(path, size, seed):
    rnd = random.Random(seed)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 8 * MIB)
            f.write(rnd.randbytes(n))
            left -= n


def tokens_epoch(path, order, threads=4, advice="normal", compute_ms=0.0):
    """read the samples of @order (sample numbers) through np.memmap, 4 threads,
    the mapping madvise()d MADV_RANDOM if @advice is "random" (no read-around
    of faults); returns (seconds, wrong samples) checked against the source's
    bytes"""
    import mmap
    import numpy as np
    mm = np.memmap(path, dtype=np.uint32, mode="r")
    if advice == "random":
        mm._mmap.madvise(mmap.MADV_RANDOM)
    wrong = []
    parts = [order[k::threads] for k in range(threads)]
    sums = {}

    def reader(part):
        for s in part:
            a = np.array(mm[s * 2049:(s + 1) * 2049])
            sums[s] = int(a.sum(dtype=np.uint64))
            if compute_ms:
                time.sleep(compute_ms / 1000)

    ts = [threading.Thread(target=reader, args=(p,)) for p in parts]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.monotonic() - t0
    del mm
    return dt, sums


def records_run(path, offs):
    t0 = time.monotonic()
    got = []
    fd = os.open(path, os.O_RDONLY)
    try:
        for off in offs:
            h = os.pread(fd, HEADER, off)
            b = os.pread(fd, BODY, off + HEADER)
            got.append(hash(h + b))
    finally:
        os.close(fd)
    return time.monotonic() - t0, got


def seq_run(paths):
    t0 = time.monotonic()
    digests = []
    for p in paths:
        h = 0
        with open(p, "rb", buffering=0) as f:
            while True:
                b = f.read(MIB)
                if not b:
                    break
                h ^= hash(b)
        digests.append(h)
    return time.monotonic() - t0, digests


class Fusefs:
    def __init__(self, name, binary, src, work, cleanup, cache_bytes):
        self.name, self.binary, self.src, self.work = name, binary, src, work
        self.cleanup, self.cache_bytes = cleanup, cache_bytes

    def __enter__(self):
        self.cache = tempfile.mkdtemp(dir=self.work, prefix="cache-")
        self.mnt = tempfile.mkdtemp(dir=self.work, prefix="mnt-")
        cmd = [self.binary, "mount", "file://" + self.src, self.mnt, "-f",
               "--cache-dir", self.cache, "--cache-size", str(self.cache_bytes)]
        self.d = bl.Daemon(self.name, cmd, self.mnt, os.path.join(self.work, "daemon.log"),
                           self.cleanup)
        return self

    def backend_bytes(self):
        return bl.fusefs_stats(self.mnt)["bytes_from_backend"]

    def counters(self):
        """the counters a tokens epoch reports (0 for one this build lacks)"""
        st = bl.fusefs_stats(self.mnt)
        return {k: st.get(k, 0) for k in ("bytes_from_backend", "stall_us")}

    def usage(self):
        """the daemon's CPU seconds and peak RSS (MiB) so far"""
        return {"cpu": bl.proc_cpu(self.d.pid), "rss": bl.rss_kib(self.d.pid, "VmHWM") / 1024}

    def __exit__(self, *a):
        self.d.stop()
        shutil.rmtree(self.cache, ignore_errors=True)
        os.rmdir(self.mnt)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build/bin/fusefs")
    ap.add_argument("--base-bin")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--token-mib", type=int, default=512)
    ap.add_argument("--samples", type=int, default=3000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--madvise", choices=("normal", "random"), default="normal",
                    help="advice for the token file's mapping (random: the kernel "
                    "asks only for the faulting page, no read-around)")
    ap.add_argument("--record-file-mib", type=int, default=256)
    ap.add_argument("--records", type=int, default=300)
    ap.add_argument("--seq-files", type=int, default=4)
    ap.add_argument("--seq-mib", type=int, default=64)
    ap.add_argument("--workloads", default="tokens,records,seq")
    ap.add_argument("--lists", action="store_true",
                    help="also --bin (and --base-bin) with the tokens epochs "
                         "published as range lists")
    ap.add_argument("--no-queue", dest="lists_queue", action="store_false",
                    help="with --lists, publish each epoch at its start only "
                         "(no queued next epoch)")
    ap.add_argument("--drop-each-epoch", action="store_true",
                    help="drop the page cache before every tokens epoch, not only "
                         "before the first (a dataset far larger than RAM)")
    ap.add_argument("--compute-ms", type=float, default=0.0)
    ap.add_argument("--cache-ratio", type=float, default=0.5)
    ap.add_argument("--out")
    a = ap.parse_args()
    a.workloads = a.workloads.split(",")
    if os.geteuid() != 0:
        sys.exit("bench/randread.py: needs root (drops the page cache)")
    cleanup = bl.Cleanup()
    work = tempfile.mkdtemp(dir=a.dir, prefix="fusefs-bench-random-")
    cleanup.add("rm " + work, lambda: shutil.rmtree(work, ignore_errors=True))
    try:
        run(a, work, cleanup)
    finally:
        cleanup.run()


def run(a, work, cleanup):
    src = os.path.join(work, "src")
    os.makedirs(src)
    bl.log("writing the dataset under", src)
    make_file(os.path.join(src, "tokens.bin"), a.token_mib * MIB, 1)
    if "records" in a.workloads:
        make_file(os.path.join(src, "records.bin"), a.record_file_mib * MIB, 2)
    for i in range(a.seq_files if "seq" in a.workloads else 0):
        make_file(os.path.join(src, "seq%d" % i), a.seq_mib * MIB, 10 + i)
    nsamples = a.token_mib * MIB // SAMPLE
    rng = random.Random(3)
    orders = [rng.sample(range(nsamples), a.samples) for _ in range(a.epochs)]
    a.orders = orders
    roffs = [rng.randrange(0, a.record_file_mib * MIB - HEADER - BODY)
             for _ in range(a.records)]
    configs = [("local", None)] + ([("base", a.base_bin)] if a.base_bin else []) + \
        [("new", a.bin)] + ([("lists", a.bin)] if a.lists else []) + \
        ([("base-lists", a.base_bin)] if a.lists and a.base_bin else [])
    res = {c: {w: [] for w in ("tokens", "records", "seq")} for c, _ in configs}
    want = {}
    for r in range(a.rounds):
        rot = configs[r % len(configs):] + configs[:r % len(configs)]
        for name, binary in rot:
            bl.log("round %d: %s" % (r, name))
            one_config(a, name, binary, src, work, cleanup, orders, roffs, res, want)
    report(a, configs, res)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"args": {k: v for k, v in vars(a).items() if k != "orders"},
                       "results": res, "machine": bl.machine()}, f,
                      indent=1)


def check(want, key, got):
    if key in want:
        assert want[key] == got, "wrong bytes: " + key
    else:
        want[key] = got


def one_config(a, name, binary, src, work, cleanup, orders, roffs, res, want):
    tok = os.path.join(src, "tokens.bin")
    rec = os.path.join(src, "records.bin")
    seqs = [os.path.join(src, "seq%d" % i) for i in range(a.seq_files)]
    if binary is None:
        local_config(a, name, tok, rec, seqs, orders, roffs, res, want)
        return
    if "tokens" in a.workloads:
        cache = int(a.token_mib * MIB * a.cache_ratio)
        with Fusefs(name, binary, src, work, cleanup, cache) as m:
            bl.drop_caches(1)
            ep, before = [], m.counters()
            for e, order in enumerate(orders):
                if e and a.drop_each_epoch:
                    bl.drop_caches(1)
                if name.endswith("lists"):
                    publish_ranges(m.mnt, orders, e, a.lists_queue)
                dt, sums = tokens_epoch(os.path.join(m.mnt, "tokens.bin"), order,
                                        advice=a.madvise, compute_ms=a.compute_ms)
                check(want, "tokens%d" % e, sums)
                now = m.counters()
                ep.append({"s": dt,
                           "backend": now["bytes_from_backend"] - before["bytes_from_backend"],
                           "stall_s": (now["stall_us"] - before["stall_us"]) / 1e6})
                before = now
            ep[-1].update(m.usage())    # CPU and peak of the whole mount
            res[name]["tokens"].append(ep)
    if name.endswith("lists"):
        return
    if "records" in a.workloads:
        records_config(a, name, binary, src, work, cleanup, rec, roffs, res, want)
    if "seq" in a.workloads:
        seq_config(a, name, binary, src, work, cleanup, seqs, res, want)


def publish_ranges(mnt, orders, e, queue=True):
    """epoch @e begins with its order as ranges; with @queue epoch e + 1
    queued (as the Python helper does)"""
    def text(k, head):
        return head + "".join("tokens.bin\t%d\t%d\n" % (s * SAMPLE, SAMPLE)
                              for s in orders[k])
    path = os.path.join(mnt, ".fusefs", "lists", "bench")
    with open(path, "w") as f:
        f.write(text(e, "# epoch %d\n# begin\n" % e))
    if queue and e + 1 < len(orders):
        with open(path, "w") as f:
            f.write(text(e + 1, "# epoch %d\n" % (e + 1)))


def local_config(a, name, tok, rec, seqs, orders, roffs, res, want):
    if "tokens" in a.workloads:
        bl.drop_caches(1)
        ep = []
        for e, order in enumerate(orders):
            if e and a.drop_each_epoch:
                bl.drop_caches(1)
            dt, sums = tokens_epoch(tok, order, advice=a.madvise, compute_ms=a.compute_ms)
            check(want, "tokens%d" % e, sums)
            ep.append({"s": dt, "backend": 0})
        res[name]["tokens"].append(ep)
    if "records" in a.workloads:
        bl.drop_caches(1)
        dt, got = records_run(rec, roffs)
        check(want, "records", got)
        res[name]["records"].append({"s": dt, "backend": 0})
    if "seq" in a.workloads:
        bl.drop_caches(1)
        dt, got = seq_run(seqs)
        check(want, "seq", got)
        res[name]["seq"].append({"s": dt, "backend": 0})


def records_config(a, name, binary, src, work, cleanup, rec, roffs, res, want):
    with Fusefs(name, binary, src, work, cleanup, a.record_file_mib * MIB // 2) as m:
        bl.drop_caches(1)
        dt, got = records_run(os.path.join(m.mnt, "records.bin"), roffs)
        check(want, "records", got)
        res[name]["records"].append(dict(s=dt, backend=m.backend_bytes(), **m.usage()))


def seq_config(a, name, binary, src, work, cleanup, seqs, res, want):
    with Fusefs(name, binary, src, work, cleanup, 4 * a.seq_files * a.seq_mib * MIB) as m:
        bl.drop_caches(1)
        dt, got = seq_run([os.path.join(m.mnt, os.path.basename(p)) for p in seqs])
        check(want, "seq", got)
        res[name]["seq"].append(dict(s=dt, backend=m.backend_bytes(), **m.usage()))


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def report(a, configs, res):
    tok_bytes = a.samples * SAMPLE
    rec_bytes = a.records * (HEADER + BODY)
    seq_bytes = a.seq_files * a.seq_mib * MIB
    if "records" in a.workloads or "seq" in a.workloads:
        print("| workload | config | time (s, median) | ÷ local (median of per-round "
              "ratios) | backend bytes ÷ bytes read | daemon CPU s | peak RSS MiB |")
        print("|---|---|---|---|---|---|---|")

    def use(runs, k):
        return "-" if not runs or k not in runs[0] else "%.1f" % med([x[k] for x in runs])
    for w, nbytes in (("records", rec_bytes), ("seq", seq_bytes)):
        for c, _ in configs:
            runs = res[c][w]
            if not runs:
                continue
            ratios = [x["s"] / l["s"] for x, l in zip(runs, res["local"][w])]
            print("| %s | %s | %.2f | %.2f | %s | %s | %s |" % (
                w, c, med([x["s"] for x in runs]), med(ratios),
                "-" if c == "local" else "%.2f" % med([x["backend"] / nbytes
                                                        for x in runs]),
                use(runs, "cpu"), use(runs, "rss")))
    if "tokens" not in a.workloads:
        return
    print()
    print("| tokens epoch | config | time (s, median) | ÷ local (median of per-round ratios) "
          "| backend bytes ÷ sample bytes | backend bytes ÷ sample pages "
          "| stall s | daemon CPU s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for e in range(a.epochs):
        pages = 4096 * sum((s * SAMPLE + SAMPLE + 4095) // 4096 - s * SAMPLE // 4096
                           for s in a.orders[e])
        for c, _ in configs:
            runs = [r[e] for r in res[c]["tokens"]]
            ratios = [x["s"] / l[e]["s"] for x, l in zip(runs, res["local"]["tokens"])]
            print("| %d | %s | %.2f | %.2f | %s | %s | %s | %s | %s |" % (
                e + 1, c, med([x["s"] for x in runs]), med(ratios),
                "-" if c == "local" else "%.2f" % med([x["backend"] / tok_bytes
                                                        for x in runs]),
                "-" if c == "local" else "%.2f" % med([x["backend"] / pages
                                                        for x in runs]),
                use(runs, "stall_s"), use(runs, "cpu"), use(runs, "rss")))

if __name__ == "__main__":
    main()
