#!/usr/bin/python3
"""Daemon CPU per file while list mode turns the cache over (`make bench-churn`;
docs/benchmarks-epoch.md, "Daemon CPU per file").

Epoch lists at cache = dataset / 2 make the cache take in and evict about half of the
dataset every epoch (Belady keeps the misses read soonest), where heat keeps a fixed half.
That turnover is daemon CPU: data files created and removed, chunks written, victims
chosen. This benchmark measures it without a shaped link and without Ceph, over a file://
source of --files files of --kib KiB (random bytes) in a scratch directory under --dir.

Configurations: each binary (--bin; --base-bin, e.g. the main branch's build, copied at
the start) in list mode (`--evict auto` with two ranks' lists, DistributedSampler-style:
one shuffled order per epoch, every --ranks-th file to a rank, each epoch published with
its begin and the next one queued) and --bin in heat mode (`--evict heat`, no lists). Each
round mounts every configuration in turn, order rotated per round, each on a fresh cache
directory, for --epochs epochs: --ranks reader threads, one per rank, each reading its
rank's files in order with 1 MiB reads after dropping the file's page cache
(POSIX_FADV_DONTNEED). Epoch 0 fills the cache and is not reported.

Reported per configuration, over epochs 1.. of all rounds: the daemon's CPU (user + system,
/proc/PID/stat) per file read, median and range; epoch time; backend MiB per epoch
(bytes_from_backend); data files created per epoch (`data_file_opens` minus
`data_files_reused`) and made of spares (`data_files_reused`); the daemon's peak RSS
(VmHWM) per mount, median and range over the rounds. JSON (--out) and a
Markdown table on stdout.

Run as root the mounts use passthrough where the kernel offers it: files read by the
kernel are *lent* and never become spares (docs/architecture.md, "Eviction");
`--fusefs-args "--passthrough off"` measures the daemon path (a non-root mount).
`--dir` on another file system (e.g. a journaled ext4) measures that file system.
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402
from benchlib import log  # noqa: E402

MiB = 1 << 20


def make_source(src, files, kib, seed):
    rnd = random.Random(seed)
    os.makedirs(src)
    names = ["f%05d" % i for i in range(files)]
    for n in names:
        with open(os.path.join(src, n), "wb") as f:
            f.write(rnd.randbytes(kib * 1024))
    return names


def orders(names, ranks, epoch, seed):
    o = list(names)
    random.Random(seed * 1000 + epoch).shuffle(o)
    return [o[r::ranks] for r in range(ranks)]


def listing(order, epoch, begin=False):
    head = "# epoch %d\n" % epoch + ("# begin %d\n" % epoch if begin else "")
    return head + "".join(n + "\n" for n in order)


def read_rank(mnt, order):
    for n in order:
        with open(os.path.join(mnt, n), "rb") as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            while f.read(MiB):
                pass


def run_config(a, work, names, binary, mode):
    mnt, cache = os.path.join(work, "mnt"), os.path.join(work, "cache")
    bl.rmtree(cache)
    os.makedirs(cache)
    os.makedirs(mnt, exist_ok=True)
    cache_mib = len(names) * a.kib // 1024 // 2
    cmd = [binary, "mount", "file://" + os.path.join(work, "src"), mnt, "-f",
           "--cache-dir", cache, "--cache-size", "%dM" % cache_mib,
           "--evict", "heat" if mode == "heat" else "auto"] + a.fusefs_args.split()
    logf = open(os.path.join(work, "fusefs.log"), "ab")
    proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT)
    out = []
    try:
        bl.wait_mount(mnt, proc)
        for e in range(a.epochs):
            cur, nxt = (orders(names, a.ranks, e, a.seed),
                        orders(names, a.ranks, e + 1, a.seed))
            if mode == "list":
                for r in range(a.ranks):
                    path = os.path.join(mnt, ".fusefs", "lists", "rank%d" % r)
                    for data in (listing(cur[r], e, True), listing(nxt[r], e + 1)):
                        with open(path, "w") as f:
                            f.write(data)
            s0, c0, t0 = bl.fusefs_stats(mnt), bl.proc_cpu(proc.pid), time.time()
            ts = [threading.Thread(target=read_rank, args=(mnt, cur[r]))
                  for r in range(a.ranks)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            t1, c1, s1 = time.time(), bl.proc_cpu(proc.pid), bl.fusefs_stats(mnt)

            def d(k):
                return s1.get(k, 0) - s0.get(k, 0)
            out.append({"epoch": e, "secs": t1 - t0, "cpu_s": c1 - c0,
                        "us_per_file": (c1 - c0) * 1e6 / len(names),
                        "backend_mib": d("bytes_from_backend") / MiB,
                        "created": d("data_file_opens") - d("data_files_reused"),
                        "reused": d("data_files_reused")})
            log("%s %s epoch %d: %.1f s, %.0f us/file, %.0f MiB, created %d reused %d" % (
                binary, mode, e, t1 - t0, out[-1]["us_per_file"], out[-1]["backend_mib"],
                out[-1]["created"], out[-1]["reused"]))
        peak = bl.rss_kib(proc.pid, "VmHWM") / 1024
        for x in out:
            x["peak_rss_mib"] = peak        # of the whole mount
    finally:
        subprocess.run(["fusermount3", "-u", mnt], capture_output=True)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        logf.close()
    return out


def med_range(v, fmt):
    return (fmt % statistics.median(v)) + " (" + (fmt % min(v)) + "-" + (fmt % max(v)) + ")"


def table(results):
    rows = ["| Configuration | daemon CPU per file, us | epoch s | backend MiB / epoch "
            "| data files created / epoch | made of spares / epoch | daemon peak RSS, MiB |",
            "|---|---|---|---|---|---|---|"]
    for name, epochs in results.items():
        ep = [x for x in epochs if x["epoch"] > 0]
        rows.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            name, med_range([x["us_per_file"] for x in ep], "%.0f"),
            med_range([x["secs"] for x in ep], "%.1f"),
            med_range([x["backend_mib"] for x in ep], "%.0f"),
            med_range([x["created"] for x in ep], "%d"),
            med_range([x["reused"] for x in ep], "%d"),
            med_range([x["peak_rss_mib"] for x in ep if x["epoch"] == 1], "%.0f")))
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(bl.ROOT, "build", "bin", "fusefs"))
    ap.add_argument("--base-bin", default=None, help="another build, e.g. main's")
    ap.add_argument("--dir", default=os.environ.get("FUSEFS_BENCH_DIR", "/var/tmp"))
    ap.add_argument("--out", default="/tmp/fusefs-bench-churn.json")
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--kib", type=int, default=100)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--fusefs-args", default="",
                    help="extra mount options for every configuration, e.g. --passthrough off")
    a = ap.parse_args()
    bl.require_bin("churn bench", a.bin)
    work = tempfile.mkdtemp(prefix="fusefs-churn.", dir=a.dir)
    try:
        configs = [("this list", os.path.abspath(a.bin), "list")]
        if a.base_bin:
            base = os.path.join(work, "fusefs-base")
            shutil.copy(a.base_bin, base)
            configs.append(("base list", base, "list"))
        configs.append(("this heat", os.path.abspath(a.bin), "heat"))
        names = make_source(os.path.join(work, "src"), a.files, a.kib, a.seed)
        results = {c[0]: [] for c in configs}
        for rnd in range(a.rounds):
            k = rnd % len(configs)
            for name, binary, mode in configs[k:] + configs[:k]:
                for x in run_config(a, work, names, binary, mode):
                    x["round"] = rnd
                    results[name].append(x)
    finally:
        bl.rmtree(work)
    doc = {"args": vars(a), "machine": bl.machine(), "results": results,
           "date": time.strftime("%Y-%m-%d %H:%M")}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
