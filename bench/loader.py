#!/usr/bin/python3
"""A torch DataLoader over small JPEGs: local disk against a warm fusefs cache
(issue 38 item 2; `make bench-loader`; docs/benchmarks-local.md).

Writes --files JPEGs of about --kib KiB (random pixels, so they do not
compress; 100 per directory) to WORK/data, mounts `fusefs mount
file://WORK/data WORK/mnt` (passthrough auto, or --fusefs-args), reads every
file through it once and waits until each is cached whole. Then, per worker
count (--workers) and drop mode (--drops: `3` = echo 3 before each epoch,
`none` = the page cache as the previous epoch left it), --pairs times: one
epoch from local disk and one through the mount (the order alternated
between pairs), and, with --lists, one more through the mount whose sampler
is python/fusefs_prefetch.PrefetchingSampler around one RandomSampler for
the whole run (each of its epochs in a new order, seeded by the helper,
the next one published to the mount ahead). An epoch: DataLoader(batch_size
64, num_workers N, a RandomSampler seeded by the pair), each item opened, read,
decoded by PIL to RGB and reduced to its mean (so the decode cannot be
skipped); the epoch checks every file's size. Ratio = fusefs secs / local
secs of the same pair (<= 1.15 is the goal). Daemon CPU over each fusefs
epoch is reported beside it.
"""

import argparse
import io
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
MIB = 1 << 20
PREFIX = "bench-loader"


def args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "fusefs"))
    p.add_argument("--dir", default="/var/tmp", help="parent of the scratch directory")
    p.add_argument("--files", type=int, default=10000)
    p.add_argument("--kib", type=int, default=100)
    p.add_argument("--workers", default="2,4")
    p.add_argument("--drops", default="3,none")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--lists", action=argparse.BooleanOptionalAction, default=True,
                   help="also an epoch whose order the Python helper publishes")
    p.add_argument("--fusefs-args", default="")
    p.add_argument("--out", default=None, help="JSON results")
    p.add_argument("--md", default=None, help="markdown table")
    return p.parse_args()


def make_jpegs(root, n, kib, seed=1):
    """@n JPEGs of about @kib KiB under @root, 100 per directory: names"""
    from PIL import Image
    rng = random.Random(seed)
    side = 16
    while True:                     # the side that gives about kib KiB
        buf = io.BytesIO()
        Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3)).save(
            buf, "JPEG", quality=90)
        if buf.tell() >= kib * 1024:
            break
        side += 8
    names = []
    for i in range(n):
        rel = "d%03d/i%05d.jpg" % (i // 100, i)
        os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
        Image.frombytes("RGB", (side, side), rng.randbytes(side * side * 3)).save(
            os.path.join(root, rel), "JPEG", quality=90)
        names.append(rel)
    return names, side


class Jpegs:
    """a map-style torch Dataset: item i = mean of the decoded image"""

    def __init__(self, root, names, sizes):
        self.root, self.names, self.sizes = root, names, sizes

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        import numpy as np
        from PIL import Image
        p = os.path.join(self.root, self.names[i])
        with open(p, "rb") as f:
            data = f.read()
        if len(data) != self.sizes[i]:
            raise IOError("%s: %d bytes, want %d" % (p, len(data), self.sizes[i]))
        img = Image.open(io.BytesIO(data)).convert("RGB")
        return float(np.asarray(img).mean())


def epoch(root, names, sizes, workers, seed, drop, sampler=None):
    """one timed epoch: secs.  @sampler: the Python helper's, whose own
    seeds give each of its epochs an order (the next one published ahead);
    else a RandomSampler seeded with @seed"""
    import torch
    from torch.utils.data import DataLoader, RandomSampler
    if drop != "none":
        bl.drop_caches(int(drop))
    ds = Jpegs(root, names, sizes)
    if sampler is None:
        g = torch.Generator()
        g.manual_seed(seed)
        sampler = RandomSampler(ds, generator=g)
    dl = DataLoader(ds, batch_size=64, num_workers=workers, sampler=sampler)
    t0 = time.perf_counter()
    n = 0
    for batch in dl:
        n += len(batch)
    secs = time.perf_counter() - t0
    if n != len(names):
        raise RuntimeError("epoch read %d items, want %d" % (n, len(names)))
    return secs


def main():
    a = args()
    if os.geteuid() != 0:
        sys.exit("%s: needs root (drop_caches, mount)" % PREFIX)
    if not os.access(a.bin, os.X_OK):
        sys.exit("%s: %s is not executable" % (PREFIX, a.bin))
    try:
        import torch  # noqa: F401
        import PIL  # noqa: F401
    except ImportError as e:
        sys.exit("%s: %s (python3-torch and python3-pil)" % (PREFIX, e))
    cleanup = bl.Cleanup()
    work = tempfile.mkdtemp(prefix="fusefs-bench-loader.", dir=a.dir)
    cleanup.add("scratch", lambda: bl.rmtree(work))
    res = {"args": vars(a), "machine": bl.machine(), "rows": {}}
    try:
        data, mnt, cache = (os.path.join(work, d) for d in ("data", "mnt", "cache"))
        t = time.time()
        names, side = make_jpegs(data, a.files, a.kib)
        sizes = [os.path.getsize(os.path.join(data, n)) for n in names]
        total = sum(sizes)
        bl.log("%d JPEGs of %dx%d, %.0f KiB on average, written in %.1f s" % (
            len(names), side, side, total / len(names) / 1024, time.time() - t))
        cmd = [a.bin, "mount", "file://" + data, mnt, "-f", "--cache-dir", cache,
               "--cache-size", "%dM" % (2 * total // MIB + 64)] + a.fusefs_args.split()
        d = bl.Daemon("fusefs", cmd, mnt, os.path.join(work, "fusefs.log"), cleanup)
        for n in names:                 # warm: every file read once, cached whole
            with open(os.path.join(mnt, n), "rb") as f:
                f.read()
        deadline = time.time() + 300
        while time.time() < deadline:
            left = [n for n, s in zip(names, sizes)
                    if int(os.getxattr(os.path.join(mnt, n), "user.fusefs.cached"))
                    < (s + 4095) // 4096 * 4096]
            if not left:
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("%d files not cached after 300 s" % len(left))
        bl.log("cache warm: %s" % " ".join(
            "%s=%s" % (k, bl.fusefs_stats(mnt).get(k)) for k in
            ("passthrough_opens", "cache_bytes_used")))
        lists_sampler = None
        if a.lists:
            import fusefs_prefetch as fp
            from torch.utils.data import RandomSampler
            lists_sampler = fp.PrefetchingSampler(RandomSampler(range(len(names))),
                                                  paths=names, mount=mnt, name="loader",
                                                  strict=True)
        seed = 0
        for workers in [int(w) for w in a.workers.split(",")]:
            for drop in a.drops.split(","):
                rows = res["rows"].setdefault("%d/%s" % (workers, drop), [])
                for i in range(a.pairs):
                    seed += 1
                    sides = [("local", data, None), ("fusefs", mnt, None)]
                    if a.lists:
                        sides.append(("fusefs+lists", mnt, lists_sampler))
                    if i % 2:
                        sides.reverse()
                    row = {"seed": seed}
                    for tag, root, sampler in sides:
                        c0 = bl.proc_cpu(d.pid)
                        row[tag] = epoch(root, names, sizes, workers, seed, drop, sampler)
                        if tag != "local":
                            row[tag + "_daemon_cpu"] = bl.proc_cpu(d.pid) - c0
                    rows.append(row)
                    bl.log("workers %d drop %s pair %d: %s" % (workers, drop, i, "  ".join(
                        "%s %.2f s" % (k, row[k]) for k in ("local", "fusefs", "fusefs+lists")
                        if k in row)))
        d.stop()
    finally:
        cleanup.run()
    table = render(res)
    print(table)
    if a.out:
        json.dump(res, open(a.out, "w"), indent=1)
    if a.md:
        open(a.md, "w").write(table)


def render(res):
    out = ["| Workers | Drop | fusefs / local | fusefs + lists / local | local s | fusefs s "
           "| fusefs + lists s | daemon CPU s per epoch | the same, with lists |",
           "|---|---|---|---|---|---|---|---|---|"]
    for key, rows in res["rows"].items():
        w, drop = key.split("/")

        def ratio(tag):
            if tag not in rows[0]:
                return "–"
            r = [x[tag] / x["local"] for x in rows]
            return "%.2f (%.2f–%.2f)" % (statistics.median(r), min(r), max(r))

        def med(tag, fmt="%.2f"):
            return fmt % statistics.median(x[tag] for x in rows) if tag in rows[0] else "–"
        out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            w, "echo 3" if drop == "3" else drop, ratio("fusefs"), ratio("fusefs+lists"),
            med("local"), med("fusefs"), med("fusefs+lists"), med("fusefs_daemon_cpu"),
            med("fusefs+lists_daemon_cpu")))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
