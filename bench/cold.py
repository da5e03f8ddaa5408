#!/usr/bin/python3
"""Cold reads A/B: two fusefs binaries read the same small files from an empty
cache, side by side.

The source is a file:// tree on local disk, read once first so that it sits in
the page cache: what a cold read then costs is fusefs's own path (the fetch,
the reply, the write into the cache), not the backend. Each pair mounts the
two binaries one after the other on fresh cache directories (the order
alternates from pair to pair), reads every file once in a shuffled order with
--threads readers, waits until every chunk is stored, and records the read's
wall time, the daemon's CPU seconds per GiB (from mount to stored) and its
peak RSS. Ratios (new / base) are taken per pair; the medians are printed as
a Markdown table.

Cache directories are removed only at the end, and the first pair starts 35 s
after the source was written: ext4 passes over inodes deleted in the last 30 s
when it allocates new ones (recently_deleted() in fs/ext4/ialloc.c), and every
cached file is a new inode, so a mount that caches thousands of files right
after thousands were deleted paid up to 3x the CPU for it in trial runs.

  bench/cold.py --base-bin /var/tmp/wt-base/build/bin/fusefs [--files 4000]
"""

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make_source(src, files, kib, seed):
    rnd = random.Random(seed)
    names = []
    for i in range(files):
        rel = "d%02d/f%05d" % (i % 50, i)
        os.makedirs(os.path.join(src, os.path.dirname(rel)), exist_ok=True)
        with open(os.path.join(src, rel), "wb") as f:
            f.write(rnd.randbytes(kib << 10))
        names.append(rel)
    return names


def one(binary, work, tag, names, order, threads, cleanup, extra):
    cache = tempfile.mkdtemp(prefix="cache-", dir=work)
    mnt = os.path.join(work, "mnt")
    cmd = [binary, "mount", "file://" + os.path.join(work, "src"), mnt, "-f",
           "--cache-dir", cache, "--cache-size", "4G"] + extra
    d = bl.Daemon("fusefs-" + tag, cmd, mnt, os.path.join(work, "daemon.log"), cleanup)
    try:
        cpu0 = bl.proc_cpu(d.pid)
        r = bl.read_order(mnt, order, threads=threads)
        if r["errors"] or r["bytes"] != sum(os.path.getsize(os.path.join(work, "src", n))
                                            for n in names):
            raise SystemExit("%s: read errors %r" % (tag, r["errors"][:3]))
        deadline = time.time() + 120
        while bl.fusefs_stats(mnt)["chunks_stored"] < len(names):
            if time.time() > deadline:
                raise SystemExit("%s: chunks not stored after 120 s" % tag)
            time.sleep(0.05)
        cpu = bl.proc_cpu(d.pid) - cpu0
        st = bl.fusefs_stats(mnt)
        hwm = bl.rss_kib(d.pid, "VmHWM")
    finally:
        d.stop()
    gib = r["bytes"] / 2**30
    return {"secs": r["secs"], "MiBps": r["bytes"] / 2**20 / r["secs"],
            "cpu_s_per_gib": cpu / gib, "peak_rss_mib": hwm / 1024,
            "mem_budget_peak_mib": st.get("mem_budget_peak_bytes", 0) / 2**20}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin", "fusefs"))
    ap.add_argument("--base-bin", required=True)
    ap.add_argument("--dir", default=os.environ.get("FUSEFS_BENCH_DIR", "/var/tmp"))
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--kib", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--fusefs-args", default="", help="extra mount options for both")
    ap.add_argument("--out", default="/tmp/fusefs-bench-cold.json")
    a = ap.parse_args()

    work = tempfile.mkdtemp(prefix="fusefs-cold-", dir=a.dir)
    cleanup = bl.Cleanup()
    res = {"machine": bl.machine(), "args": vars(a), "pairs": []}
    try:
        names = make_source(os.path.join(work, "src"), a.files, a.kib, a.seed)
        bl.read_order(os.path.join(work, "src"), names, threads=a.threads)  # page cache
        time.sleep(35)          # past ext4's 30 s of recently deleted inodes
        rnd = random.Random(a.seed)
        bins = {"base": a.base_bin, "new": a.bin}
        for p in range(a.pairs):
            order = list(names)
            rnd.shuffle(order)
            pair = {}
            for tag in (("base", "new") if p % 2 == 0 else ("new", "base")):
                pair[tag] = one(bins[tag], work, tag, names, order, a.threads, cleanup,
                                a.fusefs_args.split())
                bl.log("pair %d %s: %.2f s, %.0f MiB/s, %.2f s/GiB daemon CPU, "
                       "peak RSS %.0f MiB" % (p, tag, pair[tag]["secs"], pair[tag]["MiBps"],
                                              pair[tag]["cpu_s_per_gib"],
                                              pair[tag]["peak_rss_mib"]))
            res["pairs"].append(pair)
    finally:
        cleanup.run()
        bl.rmtree(work)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)

    def med(tag, k):
        return statistics.median(p[tag][k] for p in res["pairs"])

    def ratio(k):
        return statistics.median(p["new"][k] / p["base"][k] for p in res["pairs"])

    print("| %d x %d KiB, cold, %d pairs | base | new | new / base (median of pairs) |"
          % (a.files, a.kib, a.pairs))
    print("|---|---|---|---|")
    for k, name in (("MiBps", "read MiB/s"), ("cpu_s_per_gib", "daemon CPU s/GiB"),
                    ("peak_rss_mib", "daemon peak RSS MiB"),
                    ("mem_budget_peak_mib", "memory budget peak MiB")):
        print("| %s | %.2f | %.2f | %.2f |" % (name, med("base", k), med("new", k), ratio(k)))


if __name__ == "__main__":
    main()
