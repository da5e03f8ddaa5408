#!/usr/bin/python3
"""The daemon's peak memory per configuration (issue 13 item 3; `make bench-memory`;
docs/benchmarks-memory.md).

The workload the review used ("tried as a new user would"): a dataset twice the cache,
--shards files of --shard-mib MiB (default 48 x 32 MiB = 1.5 GiB) against a 768 MiB
cache, 4 readers, 1 MiB read() calls, every byte checked (CRC32 computed when the file
was written). Each configuration gets a fresh, empty cache directory and one daemon;
it runs --epochs epochs (default 2, a new shuffled order each, page cache dropped
before each), so the first epoch is all misses and later ones mix hits, misses and
evictions.

Per configuration: the daemon's RSS once the mount answers, its peak RSS (VmHWM from
/proc/PID/status, read just before unmounting), peak minus mount, the memory budget's
own peak (mem_budget_peak_bytes), its overdraft count, seconds per epoch and
bytes_from_backend. Sources: file://WORK/data (no Ceph) and, with --s3 (the default for
`make bench-memory`), an S3 bucket on a throwaway Ceph cluster with radosgw on
127.0.0.1 (tests/ceph/cluster.sh) holding the same files.

Results: JSON (--out) and a markdown table (--md; also printed).
"""

import argparse
import json
import os
import random
import sys
import tempfile
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib as bl  # noqa: E402
from benchlib import MIB, log  # noqa: E402

BUCKET = "membench"

# name -> (source kind, extra mount options, cache size); "CACHE" is --cache-size
CONFIGS = [
    ("auto", "file", ["--passthrough", "auto"], "CACHE",
     "defaults (--memory-limit 256M), passthrough auto"),
    ("off", "file", ["--passthrough", "off"], "CACHE",
     "defaults (--memory-limit 256M), passthrough off: every read through the daemon"),
    ("off-64M", "file", ["--passthrough", "off", "--memory-limit", "64M"], "CACHE",
     "--memory-limit 64M, passthrough off"),
    ("off-1G", "file", ["--passthrough", "off", "--memory-limit", "1G"], "CACHE",
     "--memory-limit 1G, passthrough off"),
    ("lists", "file", ["--passthrough", "off"], "CACHE",
     "defaults, passthrough off, each epoch's order published with the next one queued "
     "(prefetch and staging)"),
    ("bigcache", "file", ["--passthrough", "off"], "4G",
     "cache (4G) larger than the dataset, defaults, passthrough off"),
    ("s3", "s3", ["--passthrough", "off"], "CACHE",
     "S3 (radosgw), defaults, passthrough off"),
    ("s3-64M", "s3", ["--passthrough", "off", "--memory-limit", "64M"], "CACHE",
     "S3 (radosgw), --memory-limit 64M, passthrough off"),
]


def publish(mnt, order, epoch, begin=False):
    """epoch @epoch's list for rank0 (with a begin: it starts now)"""
    head = "# epoch %d\n" % epoch + ("# begin %d\n" % epoch if begin else "")
    with open(os.path.join(mnt, ".fusefs", "lists", "rank0"), "w") as f:
        f.write(head + "".join(n + "\n" for n in order))


def vm(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no %s for pid %d" % (field, pid))


class Bench:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.bin)
        self.cleanup = bl.Cleanup()
        self.work = tempfile.mkdtemp(prefix="fusefs-bench-memory.", dir=a.dir)
        self.cleanup.add("rm work", lambda: None if a.keep else bl.rmtree(self.work))
        self.data = os.path.join(self.work, "data")
        self.mnt = os.path.join(self.work, "mnt")
        self.results = []
        self.creds = None

    def write_data(self):
        os.makedirs(self.data)
        self.names = ["shard-%03d.bin" % i for i in range(self.a.shards)]
        self.expect = {}
        for n in self.names:
            b = os.urandom(self.a.shard_mib * MIB)
            with open(os.path.join(self.data, n), "wb") as f:
                f.write(b)
            self.expect[n] = (len(b), zlib.crc32(b))
        log("dataset: %d x %d MiB" % (self.a.shards, self.a.shard_mib))

    def start_s3(self):
        a = self.a
        self.ceph = os.path.join(self.work, "ceph")
        mem = 3 * a.shards * a.shard_mib * MIB + (1 << 30)
        self.creds, _ = bl.start_rgw_cluster(self.ceph, a.mon_port, a.rgw_port, mem,
                                             self.cleanup)
        self.endpoint = "http://127.0.0.1:%d" % a.rgw_port
        c = bl.s3_client(self.endpoint, self.creds)
        c.create_bucket(Bucket=BUCKET)
        bl.upload_tree(c, BUCKET, self.data, self.names, threads=4)
        log("uploaded the dataset to s3://%s" % BUCKET)

    def run_config(self, name, kind, opts, cache_size, desc):
        a = self.a
        cache = os.path.join(self.work, "cache-" + name)
        env = bl.clean_env()
        if kind == "s3":
            src = ["s3://%s" % BUCKET, self.mnt, "--endpoint", self.endpoint]
            env.update(AWS_ACCESS_KEY_ID=self.creds["AWS_ACCESS_KEY_ID"],
                       AWS_SECRET_ACCESS_KEY=self.creds["AWS_SECRET_ACCESS_KEY"])
        else:
            src = ["file://" + self.data, self.mnt]
        size = a.cache_size if cache_size == "CACHE" else cache_size
        cmd = [self.bin, "mount"] + src + ["-f", "--cache-dir", cache, "--cache-size", size] \
            + opts
        d = bl.Daemon("fusefs-" + name, cmd, self.mnt, os.path.join(self.work, "fusefs.log"),
                      self.cleanup, env=env)
        try:
            time.sleep(0.5)
            r = {"name": name, "desc": desc, "source": kind, "cache_size": size,
                 "options": " ".join(opts), "rss_mount": vm(d.pid, "VmRSS"), "epochs": []}
            rng = random.Random(a.seed)
            orders = []
            for e in range(a.epochs + 1):
                orders.append(list(self.names))
                rng.shuffle(orders[-1])
            for e in range(a.epochs):
                order = orders[e]
                if name == "lists":     # as PrefetchingSampler.set_epoch(e) does
                    publish(self.mnt, orders[e], e, begin=True)
                    publish(self.mnt, orders[e + 1], e + 1)
                bl.drop_caches(3)
                s0 = bl.fusefs_stats(self.mnt)
                res = bl.read_order(self.mnt, order, a.threads, self.expect)
                s1 = bl.fusefs_stats(self.mnt)
                if res["errors"] or res["bad"]:
                    raise RuntimeError("%s epoch %d: errors %s bad %s" % (
                        name, e, res["errors"][:3], res["bad"][:3]))
                ep = {"secs": round(res["secs"], 2),
                      "MiBps": round(res["bytes"] / MIB / res["secs"], 1),
                      "from_backend": s1["bytes_from_backend"] - s0["bytes_from_backend"],
                      "rss_now": vm(d.pid, "VmRSS"),
                      "staged_chunks": s1.get("staged_chunks", 0) - s0.get("staged_chunks", 0)}
                r["epochs"].append(ep)
                log("%s epoch %d: %.1f s, %.0f MiB/s, %d MiB from the backend, RSS %d MiB"
                    % (name, e + 1, ep["secs"], ep["MiBps"], ep["from_backend"] >> 20,
                       ep["rss_now"] >> 20))
            st = bl.fusefs_stats(self.mnt)
            r["rss_peak"] = vm(d.pid, "VmHWM")
            r["budget_limit"] = st["mem_budget_limit_bytes"]
            r["budget_peak"] = st["mem_budget_peak_bytes"]
            r["budget_overdraft"] = st["mem_budget_overdraft"]
            r["budget_refused"] = st["mem_budget_refused"]
        finally:
            d.stop()
        bl.rmtree(cache)
        self.results.append(r)

    def run(self):
        self.write_data()
        configs = [c for c in CONFIGS if c[0] in self.a.configs.split(",")]
        if any(c[1] == "s3" for c in configs):
            self.start_s3()
        for c in configs:
            self.run_config(*c)


def render(doc):
    a = doc["args"]
    L = ["Dataset %d x %d MiB (%d MiB), %d readers, %d epochs per configuration, page "
         "cache dropped before each; every byte checked. %s."
         % (a["shards"], a["shard_mib"], a["shards"] * a["shard_mib"], a["threads"],
            a["epochs"], "%(nproc)s CPUs, kernel %(kernel)s, git %(git_head)s, %(date)s"
            % doc["machine"]), "",
         "| Configuration | Cache | RSS at mount, MiB | Peak RSS (VmHWM), MiB | Peak - mount, "
         "MiB | Budget limit / peak, MiB | Overdrafts | Epochs, s (MiB/s) | From backend, MiB |",
         "|---|---|---|---|---|---|---|---|---|"]
    for r in doc["results"]:
        L.append("| `%s`: %s | %s | %d | %d | %d | %d / %d | %d | %s | %s |" % (
            r["name"], r["desc"], r["cache_size"], r["rss_mount"] >> 20, r["rss_peak"] >> 20,
            (r["rss_peak"] - r["rss_mount"]) >> 20, r["budget_limit"] >> 20,
            r["budget_peak"] >> 20, r["budget_overdraft"],
            ", ".join("%.1f (%.0f)" % (e["secs"], e["MiBps"]) for e in r["epochs"]),
            ", ".join("%d" % (e["from_backend"] >> 20) for e in r["epochs"])))
    return "\n".join(L) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(bl.ROOT, "build", "bin", "fusefs"))
    ap.add_argument("--dir", default=os.environ.get("FUSEFS_BENCH_DIR", "/var/tmp"))
    ap.add_argument("--out", default="/tmp/fusefs-bench-memory.json")
    ap.add_argument("--md", default="/tmp/fusefs-bench-memory.md")
    ap.add_argument("--shards", type=int, default=48)
    ap.add_argument("--shard-mib", type=int, default=32)
    ap.add_argument("--cache-size", default="768M")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--configs", default=",".join(c[0] for c in CONFIGS))
    ap.add_argument("--mon-port", type=int, default=int(os.environ.get("CEPH_TEST_MON_PORT",
                                                                       6950)))
    ap.add_argument("--rgw-port", type=int, default=int(os.environ.get("CEPH_TEST_RGW_PORT",
                                                                       7650)))
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--render", metavar="JSON", help="print the report of a saved run")
    a = ap.parse_args()
    if a.render:
        print(render(json.load(open(a.render))))
        return 0
    bl.require_bin("memory bench", a.bin)
    b = Bench(a)
    try:
        b.run()
    finally:
        b.cleanup.run()
    doc = {"args": vars(a), "machine": bl.machine(), "results": b.results,
           "date": time.strftime("%Y-%m-%d %H:%M")}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    md = render(doc)
    with open(a.md, "w") as f:
        f.write(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
