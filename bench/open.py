#!/usr/bin/python3
"""Open path benchmark (issue 8 item 4; `make bench-open`; docs/benchmarks-open.md).

Does an open wait for the backend? An epoch of many small files read through fusefs with
--revalidate 1 (every file's attributes are older than that when the next epoch opens it:
an epoch plus the --pause between epochs takes longer than 1 s), side by side with
--revalidate 3600 (never re-checked) and --revalidate 0 (every open must see the backend's
answer).

A throwaway Ceph cluster with radosgw on 127.0.0.1 (tests/ceph/cluster.sh; ports from
CEPH_TEST_MON_PORT/CEPH_TEST_RGW_PORT, default 6800/7490) holds --files objects of --kib KiB
of random bytes (default 2000 x 100 KiB) in bucket openbench (--backend s3, default) or in
the pool (--backend rados). On a shared machine run it under `flock /tmp/fusefs-ceph.lock`.

For each binary (--bin, and --baseline if given, e.g. the main branch's) and each
--revalidate value, a cache directory of its own is filled by one priming mount (listing,
every file read once). Then --reps rounds, each mounting every configuration in turn
(rotated order, so that no configuration always runs first or last) from its warm cache and
namespace cache (--list-refresh 0: no listing), running one warm-up epoch (not recorded:
the first read of each cached chunk after a start verifies its XXH3) and --epochs measured
epochs, --pause seconds apart. An epoch: drop_caches, then --readers threads read all files
in a shuffled order (the same orders for every configuration), each file with 1 MiB read()
calls, bytes checked by CRC32.

Reported per configuration (median over all epochs, min..max): epoch time, files/s, open()
latency p50/p99 (the syscall, lookup included), fusefs CPU per epoch, how busy the machine
was (all CPUs, radosgw included), and backend stat/HEAD requests per open: the daemon's
`revalidations` counter over a whole mount (warm-up and measured epochs; counted once the
background re-checks have drained, since those of an epoch's last opens finish after it)
divided by the files opened, median over the mounts. Results: JSON (--out) and a Markdown
table on stdout.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402
from benchlib import log  # noqa: E402

CLUSTER_SH = os.path.join(bl.ROOT, "tests", "ceph", "cluster.sh")
BUCKET = "openbench"
PREFIX = "ds"


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


class Bench:
    def __init__(self, a):
        self.a = a
        self.work = a.work
        self.cleanup = bl.Cleanup()
        self.mnt = os.path.join(self.work, "mnt")
        self.endpoint = "http://127.0.0.1:%d" % a.rgw_port
        self.bins = [("branch", os.path.abspath(a.bin))]
        if a.baseline:
            # a copy: the baseline's tree may be rebuilt while we run
            base = os.path.join(self.work, "fusefs-baseline")
            subprocess.run(["cp", a.baseline, base], check=True)
            self.bins.insert(0, ("baseline", base))
        self.revals = [int(x) for x in a.revalidate.split(",")]
        self.configs = [(b, r) for b in self.bins for r in self.revals]
        self.samples = {}       # per epoch
        self.mounts = {}        # per mount: backend checks per open

    def name(self, cfg):
        (bname, _), r = cfg
        return "%s --revalidate %d" % (bname, r)

    # ---- setup ------------------------------------------------------------------------------

    def setup(self):
        a = self.a
        self.cleanup.add("rm work", lambda: None if a.keep else bl.rmtree(self.work))
        os.makedirs(self.mnt, exist_ok=True)
        self.ceph = os.path.join(self.work, "ceph")
        env = dict(os.environ, CEPH_TEST_MON_PORT=str(a.mon_port),
                   CEPH_TEST_RGW_PORT=str(a.rgw_port))
        self.cleanup.add("cluster stop", lambda: subprocess.run(
            [CLUSTER_SH, "stop", self.ceph], check=False, capture_output=True))
        mem = 3 * a.files * a.kib * 1024 + (1 << 30)
        r = subprocess.run([CLUSTER_SH, "start", self.ceph, "--mem-bytes", str(mem)] +
                           (["--rgw"] if a.backend == "s3" else []),
                           env=env, capture_output=True, text=True, timeout=400)
        if r.returncode != 0:
            raise RuntimeError("cluster start failed:\n%s%s" % (r.stdout, r.stderr[-3000:]))
        log(r.stdout.strip().splitlines()[-1])
        self.names = ["d%02d/f%05d.bin" % (i % 20, i) for i in range(a.files)]
        self.expect = {}
        objs = {}
        rnd = random.Random(1)
        for n in self.names:
            data = rnd.randbytes(a.kib * 1024)
            self.expect[n] = (len(data), zlib.crc32(data))
            objs["%s/%s" % (PREFIX, n)] = data
        if a.backend == "s3":
            self.creds = bl.read_env_file(os.path.join(self.ceph, "s3.env"))
            c = bl.s3_client(self.endpoint, self.creds)
            c.create_bucket(Bucket=BUCKET)
            import concurrent.futures as cf
            with cf.ThreadPoolExecutor(8) as ex:
                list(ex.map(lambda kv: c.put_object(Bucket=BUCKET, Key=kv[0], Body=kv[1]),
                            objs.items()))
            self.rgw_pid = int(open(os.path.join(self.ceph, "run", "client.rgw.a.pid")).read())
        else:
            sys.path.insert(0, os.path.join(bl.ROOT, "tests", "integration"))
            from cephcluster import CephCluster
            cc = CephCluster()
            cc.dir = self.ceph
            cc.put_many("fusefs", objs)
            cc._disconnect()
            self.rgw_pid = None
        log("stored %d x %d KiB (%s)" % (a.files, a.kib, a.backend))

    # ---- mounts ------------------------------------------------------------------------------

    def mount(self, cfg, log_name):
        (_, binpath), reval = cfg
        a = self.a
        env = bl.clean_env()
        if a.backend == "s3":
            env.update(AWS_ACCESS_KEY_ID=self.creds["AWS_ACCESS_KEY_ID"],
                       AWS_SECRET_ACCESS_KEY=self.creds["AWS_SECRET_ACCESS_KEY"])
            src = ["s3://%s/%s" % (BUCKET, PREFIX), "--endpoint", self.endpoint]
        else:
            src = ["rados://fusefs/%s" % PREFIX, "--ceph-conf",
                   os.path.join(self.ceph, "ceph.conf")]
        cache = os.path.join(self.work, "cache-%s-%d" % (cfg[0][0], reval))
        cmd = [binpath, "mount", src[0], self.mnt, "-f", "--cache-dir", cache,
               "--cache-size", "2G", "--revalidate", str(reval), "--list-refresh", "0"] + src[1:]
        return bl.Daemon(log_name, cmd, self.mnt, os.path.join(self.work, "fusefs.log"),
                         self.cleanup, env=env)

    def prime(self):
        for cfg in self.configs:
            d = self.mount(cfg, "prime " + self.name(cfg))
            try:
                r = bl.read_order(self.mnt, self.names, self.a.readers, self.expect)
                self.check(r, "priming " + self.name(cfg))
                deadline = time.time() + 10    # chunks are stored after the reply
                s = bl.fusefs_stats(self.mnt)
                while s.get("chunks_stored", 0) < len(self.names) and time.time() < deadline:
                    time.sleep(0.1)
                    s = bl.fusefs_stats(self.mnt)
                if s.get("chunks_stored", 0) < len(self.names):
                    raise RuntimeError("priming %s stored %d chunks of %d files" % (
                        self.name(cfg), s.get("chunks_stored", 0), len(self.names)))
            finally:
                d.stop()
            log("primed %s" % self.name(cfg))

    def check(self, r, what):
        if r["errors"] or r["bad"]:
            raise RuntimeError("%s: %d errors %r, %d bad %r" % (
                what, len(r["errors"]), r["errors"][:3], len(r["bad"]), r["bad"][:3]))

    # ---- epochs ------------------------------------------------------------------------------

    def epoch(self, cfg, d, order):
        bl.drop_caches()
        s0 = bl.fusefs_stats(self.mnt)
        cpu0 = bl.proc_cpu(d.pid)
        rgw0 = bl.proc_cpu(self.rgw_pid) if self.rgw_pid else 0.0
        busy0 = bl.sys_busy()
        t0 = time.time()
        opens = []
        r = bl.read_order(self.mnt, order, self.a.readers, self.expect, open_secs=opens)
        self.check(r, self.name(cfg))
        s1 = bl.fusefs_stats(self.mnt)
        b1 = bl.sys_busy()
        reval = s1.get("revalidations", 0) - s0.get("revalidations", 0)
        smp = {"secs": round(r["secs"], 3), "files": len(order),
               "files_per_s": round(len(order) / r["secs"], 1),
               "open_p50_ms": round(1000 * pct(opens, 0.5), 3),
               "open_p99_ms": round(1000 * pct(opens, 0.99), 3),
               "open_max_ms": round(1000 * max(opens), 3),
               "backend_checks_in_epoch": reval,
               "fusefs_cpu_s": round(bl.proc_cpu(d.pid) - cpu0, 2),
               "rgw_cpu_s": round(bl.proc_cpu(self.rgw_pid) - rgw0, 2) if self.rgw_pid else None,
               "machine_busy": round((b1[0] - busy0[0]) / max(1, b1[1] - busy0[1]), 3),
               "other_work": self.contention.busy(t0, time.time())}
        self.samples.setdefault(self.name(cfg), []).append(smp)
        log("  %-28s %6.2f s  %7.1f files/s  open p50 %6.2f ms p99 %7.2f ms  "
            "fusefs cpu %.2f s  machine %3.0f%%%s" % (
                self.name(cfg), smp["secs"], smp["files_per_s"], smp["open_p50_ms"],
                smp["open_p99_ms"], smp["fusefs_cpu_s"], 100 * smp["machine_busy"],
                "  (OTHER WORK RUNNING)" if smp["other_work"] else ""))

    def drained_checks(self):
        """The revalidations counter once it stopped moving for 1 s (at most 20 s)."""
        last = bl.fusefs_stats(self.mnt).get("revalidations", 0)
        deadline = time.time() + 20
        while time.time() < deadline:
            time.sleep(1)
            now = bl.fusefs_stats(self.mnt).get("revalidations", 0)
            if now == last:
                break
            last = now
        return last

    def run(self):
        a = self.a
        self.contention = bl.Contention(self.work)
        try:
            self.setup()
            self.prime()
            for rep in range(a.reps):
                k = rep % len(self.configs)
                for cfg in self.configs[k:] + self.configs[:k]:
                    d = self.mount(cfg, self.name(cfg))
                    try:
                        c0 = bl.fusefs_stats(self.mnt).get("revalidations", 0)
                        r = bl.read_order(self.mnt, self.names, a.readers, self.expect)
                        self.check(r, "warm-up " + self.name(cfg))
                        for e in range(a.epochs):
                            time.sleep(a.pause)
                            order = list(self.names)
                            random.Random(1000 * rep + e).shuffle(order)
                            self.epoch(cfg, d, order)
                        opens = len(self.names) * (1 + a.epochs)
                        checks = self.drained_checks() - c0
                        self.mounts.setdefault(self.name(cfg), []).append(
                            {"opens": opens, "backend_checks": checks,
                             "checks_per_open": round(checks / opens, 3)})
                        log("  %-28s %d backend checks for %d opens" % (
                            self.name(cfg), checks, opens))
                    finally:
                        d.stop()
        finally:
            others = self.contention.stop()
            self.cleanup.run()
        return others

    # ---- report ------------------------------------------------------------------------------

    def table(self):
        def med(v):
            return statistics.median(v)

        def rng(v, fmt):
            return (fmt + " (" + fmt + ".." + fmt + ")") % (med(v), min(v), max(v))

        rows = ["| configuration | epoch s | files/s | open p50 ms | open p99 ms | "
                "backend checks per open | fusefs CPU s/epoch | machine busy |",
                "|---|---|---|---|---|---|---|---|"]
        for cfg in self.configs:
            s = self.samples.get(self.name(cfg), [])
            m = self.mounts.get(self.name(cfg), [])
            if not s or not m:
                continue
            rows.append("| %s | %s | %s | %s | %s | %s | %.2f | %.0f%% |" % (
                self.name(cfg), rng([x["secs"] for x in s], "%.2f"),
                "%.0f" % med([x["files_per_s"] for x in s]),
                rng([x["open_p50_ms"] for x in s], "%.2f"),
                rng([x["open_p99_ms"] for x in s], "%.1f"),
                rng([x["checks_per_open"] for x in m], "%.2f"),
                med([x["fusefs_cpu_s"] for x in s]),
                100 * med([x["machine_busy"] for x in s])))
        return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(bl.ROOT, "build", "bin", "fusefs"))
    ap.add_argument("--baseline", help="another fusefs binary to compare (copied first)")
    ap.add_argument("--backend", choices=("s3", "rados"), default="s3")
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--kib", type=int, default=100)
    ap.add_argument("--readers", type=int, default=4)
    ap.add_argument("--revalidate", default="1,3600,0",
                    help="comma-separated --revalidate values (default 1,3600,0)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=2, help="measured epochs per mount")
    ap.add_argument("--pause", type=float, default=1.5,
                    help="seconds between epochs (default 1.5, above --revalidate 1)")
    ap.add_argument("--mon-port", type=int,
                    default=int(os.environ.get("CEPH_TEST_MON_PORT", 6800)))
    ap.add_argument("--rgw-port", type=int,
                    default=int(os.environ.get("CEPH_TEST_RGW_PORT", 7490)))
    ap.add_argument("--out", default="/tmp/fusefs-bench-open.json")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench-open: must run as root (drop_caches)")
    bl.require_bin("bench-open", a.bin)
    a.work = tempfile.mkdtemp(prefix="fusefs-bench-open.", dir="/var/tmp")
    b = Bench(a)
    machine = bl.machine()
    others = b.run()
    table = b.table()
    with open(a.out, "w") as f:
        json.dump({"machine": machine, "args": vars(a), "samples": b.samples,
                   "mounts": b.mounts,
                   "other_work_seen": others, "table": table}, f, indent=1)
    print(table)
    if others:
        print("\nother work seen during the run:\n  " + "\n  ".join(others[:10]))
    log("results in %s" % a.out)


if __name__ == "__main__":
    main()
