#!/usr/bin/env python3
"""stat() of every file of one directory of N entries, several fusefs
binaries in turn (docs/benchmarks-scale.md): each binary mounts the same
synthetic manifest once with its own cache (the stored namespace), then
every repetition remounts each binary (cold kernel dentries) and stats
all N files with 4 threads; the order of the binaries rotates each
repetition.

  bench/scale_stat.py --bin new=build/bin/fusefs --bin old=/path/fusefs \\
      [--entries 1000000 --reps 4 --work DIR]
"""

import argparse
import json
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scale  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", action="append", required=True, help="NAME=PATH, twice or more")
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    bins = dict(b.split("=", 1) for b in a.bin)
    work = a.work or tempfile.mkdtemp(prefix="fusefs-stat-")
    src, mnt = os.path.join(work, "src"), os.path.join(work, "mnt")
    os.makedirs(src, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    big = os.path.join(work, "big.txt.gz")
    scale.write_big_dir(big, a.entries)
    ds = {k: scale.Daemon(os.path.realpath(b), src, mnt, os.path.join(work, "c-" + k), big,
                          os.path.join(work, k + ".log")) for k, b in bins.items()}
    for d in ds.values():            # the first mount stores the namespace
        d.start()
        d.stop()
    d = next(iter(ds.values()))
    d.start()
    names = sorted(os.listdir(os.path.join(mnt, "big")))
    d.stop()
    keys = list(bins)
    res = {k: [] for k in keys}
    for rep in range(a.reps):
        for k in keys[rep % len(keys):] + keys[:rep % len(keys)]:
            r = scale.stat_pass(ds[k], os.path.join(mnt, "big"), names)
            ds[k].stop()
            res[k].append(round(r["per_s"]))
            print(rep, k, json.dumps(r), flush=True)
    print(json.dumps(res))
    if not a.work:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
