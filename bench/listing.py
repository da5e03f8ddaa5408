#!/usr/bin/python3
"""Listing throughput of a real pool and a real bucket (issue 11 item 4;
`make bench-listing`; docs/benchmarks-scale.md).

A throwaway Ceph cluster with radosgw on 127.0.0.1 (tests/ceph/cluster.sh, memstore).
--objects (100,000) objects of 16 bytes are written under the prefix ds/ in --dirs (100)
directories: into the RADOS pool with librados (python3-rados, asynchronous writes) and
into an S3 bucket through radosgw (boto3, 32 threads). Then, for each backend:

  manifest   `fusefs manifest create SOURCE > FILE`: a full listing with every object's
             size and version (RADOS: a listing plus a stat per object; S3: ListObjectsV2
             pages of 1,000), streamed to a file
  mount      `fusefs mount SOURCE MNT` with an empty cache: from start to mounted (the
             first mount lists the whole source before it serves), then a walk of the tree
             (os.walk) that must find every object
  remount    the same mount again with the cache kept: from start to mounted (the stored
             namespace is served at once and the source re-listed in the background)

and reports objects per second for each. Results: JSON (--out) and a table on stdout.
--base-bin B runs every step with B and with --bin, --reps times, B first in even reps
and --bin first in odd ones (A/B pairs in one run, since this machine drifts, and neither
binary always second: a second run may find the gateway warm); --backends picks rados,
s3 or both.
"""

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402
from benchlib import log  # noqa: E402

POOL = "fusefs"
BUCKET = "listing"
PREFIX = "ds"


def key(i, dirs):
    return "%s/part%03d/s%07d.jpg" % (PREFIX, i % dirs, i)


def fill_rados(conf, n, dirs):
    import rados
    cl = rados.Rados(conffile=conf)
    cl.connect()
    try:
        io = cl.open_ioctx(POOL)
        t0 = time.time()
        batch = []
        for i in range(n):
            batch.append(io.aio_write_full(key(i, dirs), b"0123456789abcdef"))
            if len(batch) >= 256:
                for c in batch:
                    c.wait_for_complete()
                batch = []
        for c in batch:
            c.wait_for_complete()
        secs = time.time() - t0
        io.close()
    finally:
        cl.shutdown()
    return secs


def fill_s3(client, n, dirs):
    client.create_bucket(Bucket=BUCKET)
    t0 = time.time()

    def put(lo):
        for i in range(lo, min(lo + 1000, n)):
            client.put_object(Bucket=BUCKET, Key=key(i, dirs), Body=b"0123456789abcdef")

    with concurrent.futures.ThreadPoolExecutor(32) as ex:
        for f in [ex.submit(put, lo) for lo in range(0, n, 1000)]:
            f.result()
    return time.time() - t0


class Run:
    def __init__(self, a):
        self.a = a
        self.bins = ([("base", os.path.abspath(a.base_bin))] if a.base_bin else []) + [
            ("new" if a.base_bin else "", os.path.abspath(a.bin))]
        self.mounts = 0
        self.tag, self.bin = self.bins[-1]
        self.work = a.work
        self.cleanup = bl.Cleanup()
        self.results = []

    def setup(self):
        a = self.a
        self.ceph = os.path.join(self.work, "ceph")
        mem = 4 << 30
        log("starting the cluster (memstore %d MiB)" % (mem >> 20))
        self.creds, self.rgw_pid = bl.start_rgw_cluster(self.ceph, a.mon_port, a.rgw_port,
                                                        mem, self.cleanup)
        self.conf = os.path.join(self.ceph, "ceph.conf")
        self.endpoint = "http://127.0.0.1:%d" % a.rgw_port
        self.fill = {}
        if "rados" in a.backends.split(","):
            secs = fill_rados(self.conf, a.objects, a.dirs)
            log("rados: %d objects written in %.1f s (%.0f/s)" % (a.objects, secs,
                                                                   a.objects / secs))
            self.fill["rados_s"] = round(secs, 1)
        if "s3" in a.backends.split(","):
            secs = fill_s3(bl.s3_client(self.endpoint, self.creds, conns=32), a.objects,
                           a.dirs)
            log("s3: %d objects written in %.1f s (%.0f/s)" % (a.objects, secs,
                                                             a.objects / secs))
            self.fill["s3_s"] = round(secs, 1)

    def source(self, backend):
        env = bl.clean_env()
        if backend == "rados":
            return "rados://%s/%s" % (POOL, PREFIX), ["--ceph-conf", self.conf], env
        env.update(AWS_ACCESS_KEY_ID=self.creds["AWS_ACCESS_KEY_ID"],
                   AWS_SECRET_ACCESS_KEY=self.creds["AWS_SECRET_ACCESS_KEY"])
        return "s3://%s/%s" % (BUCKET, PREFIX), ["--endpoint", self.endpoint], env

    def record(self, backend, what, secs, extra=None):
        n = self.a.objects
        r = {"backend": backend, "what": what, "objects": n, "secs": round(secs, 2),
             "objects_per_s": round(n / secs) if secs > 0 else None, "bin": self.tag}
        r.update(extra or {})
        self.results.append(r)
        log("%s %s%s: %.2f s (%s objects/s)" % (backend, what,
                                                " [%s]" % self.tag if self.tag else "",
                                                secs, r["objects_per_s"]))

    def manifest(self, backend):
        src, opts, env = self.source(backend)
        out = os.path.join(self.work, backend + ".manifest")
        t0 = time.time()
        with open(out, "wb") as f:
            r = subprocess.run([self.bin, "manifest", "create", src] + opts, stdout=f,
                               stderr=subprocess.PIPE, env=env, timeout=3600)
        secs = time.time() - t0
        if r.returncode != 0:
            raise RuntimeError("manifest create %s: %s" % (src, r.stderr.decode()[-2000:]))
        lines = sum(1 for line in open(out) if not line.startswith("#"))
        if lines != self.a.objects:
            raise RuntimeError("manifest of %s has %d entries, want %d" % (
                src, lines, self.a.objects))
        self.record(backend, "manifest create", secs, {"bytes": os.path.getsize(out)})

    def mount(self, backend):
        src, opts, env = self.source(backend)
        mnt = os.path.join(self.work, "mnt")
        self.mounts += 1
        cache = os.path.join(self.work, "cache-%s-%d" % (backend, self.mounts))
        os.makedirs(mnt, exist_ok=True)
        for what in ("first mount", "remount"):
            logp = os.path.join(self.work, "%s-%s.log" % (backend, what.replace(" ", "-")))
            cmd = [self.bin, "mount", src, mnt, "-f", "--cache-dir", cache] + opts
            t0 = time.time()
            dm = bl.Daemon("fusefs", cmd, mnt, logp, self.cleanup, env=env, timeout=1800)
            secs = time.time() - t0
            try:
                t1 = time.time()
                n = sum(len(fs) for _, _, fs in os.walk(mnt))
                walk = time.time() - t1
                rss = bl.rss_kib(dm.pid)
            finally:
                dm.stop()
            if n != self.a.objects:
                raise RuntimeError("%s %s: the walk found %d files, want %d" % (
                    backend, what, n, self.a.objects))
            self.record(backend, what, secs, {"walk_s": round(walk, 2), "rss_kib": rss})


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(bl.ROOT, "build", "bin", "fusefs"))
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--dirs", type=int, default=100)
    ap.add_argument("--work", default=None)
    ap.add_argument("--base-bin", default=None,
                    help="another fusefs binary: each step is run with it, then with --bin")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--backends", default="rados,s3")
    ap.add_argument("--out", default="/tmp/fusefs-bench-listing.json")
    ap.add_argument("--mon-port", type=int, default=int(os.environ.get("CEPH_TEST_MON_PORT", 6900)))
    ap.add_argument("--rgw-port", type=int, default=int(os.environ.get("CEPH_TEST_RGW_PORT", 7600)))
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("listing bench: must run as root (FUSE mounts, the cluster)")
    bl.require_bin("listing bench", a.bin)
    if a.work is None:
        a.work = tempfile.mkdtemp(prefix="fusefs-listing.", dir="/var/tmp")
    run = Run(a)
    run.cleanup.add("rm work", lambda: bl.rmtree(a.work))
    info = bl.machine()
    t_start = time.time()
    rc = 0
    problems = []
    try:
        run.setup()
        for backend in a.backends.split(","):
            for rep in range(a.reps):
                for run.tag, run.bin in (run.bins if rep % 2 == 0 else run.bins[::-1]):
                    for step in (run.manifest, run.mount):
                        try:
                            step(backend)
                        except (RuntimeError, OSError, subprocess.SubprocessError) as e:
                            problems.append("%s %s: %r" % (backend, step.__name__, e))
                            log("PROBLEM: " + problems[-1])
    except BaseException as e:
        problems.append("aborted: %r" % e)
        rc = 1
    finally:
        run.cleanup.run()
    out = {"duration_s": round(time.time() - t_start, 1), "machine": info,
           "config": vars(a), "fill": getattr(run, "fill", None), "results": run.results,
           "problems": problems}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print("| backend | binary | step | objects | seconds | objects/s | walk s | daemon RSS MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for r in run.results:
        print("| %s | %s | %s | %d | %.2f | %s | %s | %s |" % (
            r["backend"], r.get("bin") or "-", r["what"], r["objects"], r["secs"],
            r["objects_per_s"],
            r.get("walk_s", "-"),
            "%.0f" % (r["rss_kib"] / 1024) if r.get("rss_kib") else "-"))
    if problems:
        print("\nPROBLEMS:\n  " + "\n  ".join(problems))
    print("\nrun took %.0f s; JSON: %s" % (out["duration_s"], a.out))
    return rc or (1 if problems else 0)


if __name__ == "__main__":
    sys.exit(main())
