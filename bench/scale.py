#!/usr/bin/env python3
"""Namespace scale (docs/benchmarks-scale.md): a synthetic manifest of
N files in D directories over an empty file:// source (the objects need
not exist to be listed and stat'ed), mounted through the real kernel FUSE.

Measures: the first mount from the manifest (start to mounted), the
remount from the LMDB namespace cache, the daemon's RSS after each (and
per file), the LMDB size; then, on a second manifest with one directory
of M entries: time to the first entries of a readdir and of the whole
listing, and stat() of every file in it (4 threads; --stat-reps passes,
each on a remount, with the machine's other load and steal time).

  bench/scale.py --bin build/bin/fusefs [--files 10000000 --dirs 100000 --big 1000000]
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

MAGIC = "#fusefs-manifest 1\n"


def write_manifest(path, files, dirs):
    per = files // dirs
    t = time.time()
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(MAGIC)
        for d in range(dirs):
            f.write("".join(f"part{d:06}/sample{i:05}.jpg\t{100000 + i}\t\"e{d:x}-{i:x}\"\n"
                            for i in range(per)))
    return time.time() - t


def write_big_dir(path, n):
    with gzip.open(path, "wt", compresslevel=1) as f:
        f.write(MAGIC)
        f.write("".join(f"big/f{i:07}\t{i}\tv{i}\n" for i in range(n)))


def du(path):
    return int(subprocess.run(["du", "-sb", path], capture_output=True, text=True)
               .stdout.split()[0])


class Daemon:
    def __init__(self, binary, src, mnt, cache, manifest, log):
        self.cmd = [binary, "mount", f"file://{src}", mnt, "-f", "--cache-dir", cache,
                    "--manifest", manifest, "--cache-size", "1G"]
        self.mnt, self.log = mnt, log
        self.proc = None

    def start(self):
        t = time.time()
        self.proc = subprocess.Popen(self.cmd, stdout=open(self.log, "ab"),
                                     stderr=subprocess.STDOUT)
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None:
                raise SystemExit(f"fusefs exited {self.proc.returncode}: see {self.log}")
            time.sleep(0.01)
        return time.time() - t

    def stop(self):
        subprocess.run(["fusermount3", "-u", self.mnt], check=True)
        self.proc.wait(timeout=600)


def readdir_times(path):
    t = time.time()
    first = None
    n = 0
    with os.scandir(path) as it:
        for _ in it:
            n += 1
            if n == 1000 and first is None:
                first = time.time() - t
    return first, time.time() - t, n


def stat_all(path, names, threads=4):
    def work(part):
        for name in part:
            os.stat(os.path.join(path, name))
    parts = [names[i::threads] for i in range(threads)]
    t = time.time()
    ts = [threading.Thread(target=work, args=(p,)) for p in parts]
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    return time.time() - t


def cpu_jiffies():
    """(busy, steal, total) jiffies over all CPUs from /proc/stat; steal is
    time the hypervisor gave this VM's CPUs to someone else"""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    total = sum(v[:8])
    return total - v[3] - v[4] - v[7], v[7], total


def stat_pass(d, path, names):
    """one stat() pass over names on a fresh start of daemon d (cold kernel
    dentries), with what else used the machine: the busy share just
    before, the share of both CPUs used by other processes during the pass
    (busy minus the daemon's and this process's CPU) and the steal share"""
    d.start()
    b0 = cpu_jiffies()
    time.sleep(0.5)
    b1 = cpu_jiffies()
    hz = os.sysconf("SC_CLK_TCK")
    c0, m0 = bl.proc_cpu(d.proc.pid), sum(os.times()[:2])
    secs = stat_all(path, names)
    c1, m1, b2 = bl.proc_cpu(d.proc.pid), sum(os.times()[:2]), cpu_jiffies()
    tot = max(1, b2[2] - b1[2])
    r = {"per_s": len(names) / secs, "daemon_cpu_s": c1 - c0, "client_cpu_s": m1 - m0,
         "busy_before": (b1[0] - b0[0]) / max(1, b1[2] - b0[2]),
         "other_cpu": ((b2[0] - b1[0]) - (c1 - c0 + m1 - m0) * hz) / tot,
         "steal": (b2[1] - b1[1]) / tot}
    return r


def stat_ab(a, binary, src, mnt, work, big, names):
    """stat() of the big directory by --base-bin and --bin in turn (the
    base first in even repetitions): each a remount of its own cache, so
    the kernel's dentries are cold and each binary serves its own stored
    namespace"""
    bins = {"base": os.path.realpath(a.base_bin), "new": binary}
    daemons = {k: Daemon(b, src, mnt, os.path.join(work, f"cache-ab-{k}"), big,
                         os.path.join(work, f"fusefs-ab-{k}.log")) for k, b in bins.items()}
    for d in daemons.values():                    # the first mount stores the namespace
        d.start()
        d.stop()
    pairs = []
    for rep in range(a.stat_reps):
        order = ["base", "new"] if rep % 2 == 0 else ["new", "base"]
        pair = {"first": order[0]}
        for k in order:
            d = daemons[k]
            r = stat_pass(d, os.path.join(mnt, "big"), names)
            d.stop()
            pair[k] = r["per_s"]
            pair[k + "_pass"] = r
        pair["ratio"] = pair["new"] / pair["base"]
        pairs.append(pair)
    return pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin/fusefs")
    ap.add_argument("--files", type=int, default=10_000_000)
    ap.add_argument("--dirs", type=int, default=100_000)
    ap.add_argument("--big", type=int, default=1_000_000)
    ap.add_argument("--work", default=None, help="scratch directory (default: a temporary one)")
    ap.add_argument("--out", default="/tmp/fusefs-bench-scale.json")
    ap.add_argument("--base-bin", default=None,
                    help="also time the stat pass of BASE against --bin, alternated")
    ap.add_argument("--stat-reps", type=int, default=5,
                    help="stat passes (each on a remount) of --bin, and per binary with "
                    "--base-bin")
    a = ap.parse_args()
    bl.require_bin("scale bench", a.bin)
    binary = os.path.realpath(a.bin)
    work = a.work or tempfile.mkdtemp(prefix="fusefs-scale-")
    src, mnt = os.path.join(work, "src"), os.path.join(work, "mnt")
    os.makedirs(src, exist_ok=True)
    os.makedirs(mnt, exist_ok=True)
    res = {"files": a.files, "dirs": a.dirs, "big": a.big}
    man = os.path.join(work, "m.txt.gz")
    res["manifest_write_s"] = write_manifest(man, a.files, a.dirs)
    res["manifest_bytes"] = os.path.getsize(man)
    cache = os.path.join(work, "cache")
    d = Daemon(binary, src, mnt, cache, man, os.path.join(work, "fusefs.log"))
    res["first_mount_s"] = d.start()
    res["first_rss_kib"] = bl.rss_kib(d.proc.pid)
    res["first_rssanon_kib"] = bl.rss_kib(d.proc.pid, "RssAnon")
    res["first_peak_rss_kib"] = bl.rss_kib(d.proc.pid, "VmHWM")
    res["first_cpu_s"] = bl.proc_cpu(d.proc.pid)       # daemon CPU, start to mounted
    probe = os.path.join(mnt, "part000123", "sample00042.jpg")
    assert os.stat(probe).st_size == 100042
    d.stop()
    res["lmdb_bytes"] = du(os.path.join(cache, "index"))
    img = os.path.join(cache, "namespace.img")
    res["image_bytes"] = os.path.getsize(img) if os.path.exists(img) else 0
    res["remount_s"] = d.start()
    res["remount_rss_kib"] = bl.rss_kib(d.proc.pid)
    res["remount_peak_rss_kib"] = bl.rss_kib(d.proc.pid, "VmHWM")
    res["remount_cpu_s"] = bl.proc_cpu(d.proc.pid)
    res["rss_bytes_per_file"] = res["remount_rss_kib"] * 1024 / a.files
    # RSS = anonymous memory + mapped file pages (the namespace image's
    # pages that lookups touched, LMDB's map: page cache the kernel may
    # reclaim)
    for f in ("RssAnon", "RssFile"):
        res[f"remount_{f.lower()}_bytes_per_file"] = bl.rss_kib(d.proc.pid, f) * 1024 / a.files
    assert os.stat(probe).st_size == 100042
    d.stop()
    shutil.rmtree(cache)

    big = os.path.join(work, "big.txt.gz")
    write_big_dir(big, a.big)
    cache = os.path.join(work, "cache-big")
    d = Daemon(binary, src, mnt, cache, big, os.path.join(work, "fusefs-big.log"))
    res["big_mount_s"] = d.start()
    first, total, n = readdir_times(os.path.join(mnt, "big"))
    assert n == a.big, n
    res["big_readdir_first1000_s"], res["big_readdir_all_s"] = first, total
    names = sorted(os.listdir(os.path.join(mnt, "big")))
    d.stop()                                      # cold kernel caches for the stat pass
    res["big_stat_passes"] = []
    for rep in range(a.stat_reps):
        r = stat_pass(d, os.path.join(mnt, "big"), names)
        res["big_stat_passes"].append(r)
        print("stat pass", rep, json.dumps(r), flush=True)
        if rep == 0:
            # every file of the mount looked up once: the most a walk can touch
            for f in ("VmRSS", "RssAnon", "RssFile"):
                res[f"big_after_stat_{f.lower()}_bytes_per_file"] = \
                    bl.rss_kib(d.proc.pid, f) * 1024 / a.big
        d.stop()
    rates = sorted(r["per_s"] for r in res["big_stat_passes"])
    res["big_stat_per_s"] = rates[len(rates) // 2]          # the median pass
    res["big_stat_daemon_cpu_s"] = sorted(
        r["daemon_cpu_s"] for r in res["big_stat_passes"])[len(rates) // 2]
    if a.base_bin:
        res["stat_ab"] = stat_ab(a, binary, src, mnt, work, big, names)
    if not a.work:
        shutil.rmtree(work)
    print(json.dumps(res, indent=2))
    with open(a.out, "w") as f:
        json.dump(res, f, indent=2)


if __name__ == "__main__":
    main()
