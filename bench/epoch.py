#!/usr/bin/python3
"""fusefs epoch benchmark (issue 4 item 8, issue 10 item 8; `make bench-epoch`;
docs/benchmarks-epoch.md).

A throwaway Ceph cluster (mon, memstore OSD, mgr, radosgw) runs inside a network namespace
reached only through a veth pair shaped with tbf (bench/netns.sh). The datasets live in one
bucket on that radosgw, with a local copy of each (--datasets):

  shardsN  --shard-total-mib (512) of N MiB shards (default shards32 and shards8)
  small    --small-files files of ~--small-kib KiB (uniform +-10 %), in 16 directories
           (default 5,000 x ~100 KiB = ~490 MiB; the issue asks for 20,000)

For each dataset, cache/dataset ratio (--ratios, default 0.5), variant and mode, a fresh
mount with an empty cache reads --epochs (3) shuffled epochs; each epoch's order is a
seeded permutation, the same for every mode. Before each epoch the page cache is dropped
(sync; echo 3 > /proc/sys/vm/drop_caches). Before epoch 1 the tree is walked once
(untimed), as a loader does to build its file index.

A training job (read_epoch()): --threads (4) loader workers take the next file of the
order from a shared queue, read it with 1 MiB read() calls (checking each file's CRC32
against the local copy) and hand the samples to the GPU through a buffer of
--buffer-samples (64) samples; the GPU spends --compute-ms (2) per sample (a
--sample-kib (100) KiB record of a shard, or one small file). Its waits on an empty
buffer are the stall. Variants (--variants):
  full    one job reads each epoch's whole order (every mode of --modes)
  drop90  one job reads the first 90 % of each epoch's order (a loader with drop_last,
          max_steps or limit_train_batches); the whole order is published
  ranks2  two jobs (ranks) of --threads/2 workers read the even and odd positions of the
          order (DistributedSampler), each with its own list
drop90 and ranks2 run the modes of --variant-modes (lists and heat).

Modes:
  fusefs-list   fusefs s3:// mount, --evict auto, with lists: at the start of epoch e each
                rank does what PrefetchingSampler.set_epoch(e) does: epoch e begins (its
                list with "# epoch e" and "# begin" if not yet published, else a begin)
                and epoch e+1's list is queued
  fusefs-heat   the same mount, no list (auto = heat without lists)
  fusefs-lru    the same mount with --evict lru, no list
  s3fs          s3fs -o use_cache on a loop-mounted ext4 file system, ensure_diskfree set so
                that exactly cache bytes are usable (s3fs has no cache size limit)
  rclone        rclone mount --vfs-cache-mode full --vfs-cache-max-size CACHE
                --vfs-cache-poll-interval 1s (the cap is enforced at each poll,
                default every minute)
Every mount uses the same cache size (ratio x dataset bytes), the same radosgw and link.

Reported per epoch: time; compute (samples x compute time, of the slowest rank); the bound
max(compute, missing bytes / link rate) where missing is everything read in epoch 1 and
then what was read minus the cache size; time / bound; the GPU stall; fusefs' own
stall_us (reads waiting on the backend, summed over readers); backend bytes (fusefs:
bytes_from_backend; peers: bytes received on the host end of the veth, which includes
HTTP/TCP overhead) and their ratio to (read - cache); the byte hit ratio; the list's
files-ready-at-open hit ratio; the time of a local-disk read of the same order by the
same job (full variant); daemon CPU. Backend bytes of epoch e are counted from just
before its page-cache drop to just before the next epoch's (so prefetch done in between
counts for the epoch that caused it). fusefs' "own" bytes of epoch e charge each epoch
with what it reads: the bytes fetched during e for files of a list's queued epoch (the
next epoch's first misses, fetched while e runs: prefetch_queued_bytes) go to e+1, and
those fetched during e-1 for e come to e; the last epoch's lookahead, for an epoch this
run never reads, is in no epoch's own bytes (it stays in the raw column).

Results: JSON (--out) and a table on stdout; bench/plot.py draws the PNG (full variant).
"""

import argparse
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402
from benchlib import MIB, log  # noqa: E402

sys.path.insert(0, os.path.join(bl.ROOT, "python"))
from fusefs_prefetch import begin, publish  # noqa: E402

NETNS_SH = os.path.join(bl.HERE, "netns.sh")
NS_IP = "10.213.0.2"
BUCKET = "bench"
LIST_NAME = "bench"
DEFAULT_MODES = ["fusefs-list", "fusefs-heat", "fusefs-lru", "s3fs", "rclone"]
ALL_MODES = DEFAULT_MODES + ["fusefs-list-base"]   # fusefs-list with --base-bin (an A/B)
ALL_VARIANTS = ["full", "drop90", "ranks2"]


def read_epoch(root, rank_orders, threads, expect, compute_s, sample_bytes, buffer_samples):
    """One epoch of a training job: for each rank, its order is read by @threads readers
    (loader workers) that take the next file from a shared queue and read it with 1 MiB
    read() calls, checking each file's CRC32 against @expect, and hand what they read to
    the rank's consumer (the GPU) through a buffer of at most @buffer_samples samples.
    The consumer spends @compute_s per sample (@sample_bytes of data; a file smaller
    than that is one sample) and waits when the buffer is empty: that wait is the stall.
    Returns dict(bytes, secs, errors, bad, stall_s, compute_s, samples): secs until every
    rank's consumer is done, stall_s and compute_s of the slowest rank."""
    errors, bad = [], []
    lock = threading.Lock()
    ranks = []
    for order in rank_orders:
        q = collections.deque(order)
        ranks.append({"q": q, "cond": threading.Condition(), "tokens": collections.deque(),
                      "buffered": 0.0, "readers": threads, "bytes": 0, "stall": 0.0,
                      "samples": 0.0, "end": None})
    start = threading.Barrier(len(ranks) * (threads + 1) + 1)

    def reader(rk):
        buf = bytearray(bl.BUF)
        cond = rk["cond"]

        def hand_over(k, first):
            smp = max(k / sample_bytes, 1.0 if first else 0.0)
            with cond:
                while rk["buffered"] >= buffer_samples and not bl.ABORT.is_set():
                    cond.wait(0.5)
                rk["tokens"].append(smp)
                rk["buffered"] += smp
                rk["bytes"] += k
                cond.notify_all()

        start.wait()
        while not bl.ABORT.is_set():
            with cond:
                if not rk["q"]:
                    break
                p = rk["q"].popleft()
            bl.read_checked(root, p, buf, expect, errors, bad, lock, on_read=hand_over)
        with cond:
            rk["readers"] -= 1
            cond.notify_all()

    def consumer(rk):
        cond = rk["cond"]
        start.wait()
        busy_until = time.perf_counter()
        while True:
            with cond:
                if not rk["tokens"] and rk["readers"] > 0:
                    t = time.perf_counter()
                    while not rk["tokens"] and rk["readers"] > 0:
                        cond.wait(0.5)
                    now = time.perf_counter()
                    rk["stall"] += now - max(t, busy_until)
                    busy_until = max(busy_until, now)
                if not rk["tokens"]:
                    break
                smp = rk["tokens"].popleft()
                rk["buffered"] -= smp
                cond.notify_all()
            rk["samples"] += smp
            # computing is a deadline, not a sum of sleeps: oversleeping is made up
            busy_until += smp * compute_s
            d = busy_until - time.perf_counter()
            if d > 0:
                time.sleep(d)
        rk["end"] = time.perf_counter()

    ts = []
    for rk in ranks:
        ts += [threading.Thread(target=reader, args=(rk,), daemon=True) for _ in range(threads)]
        ts.append(threading.Thread(target=consumer, args=(rk,), daemon=True))
    t0 = bl.start_and_join(ts, start)
    return {"bytes": sum(rk["bytes"] for rk in ranks),
            "secs": max(rk["end"] for rk in ranks) - t0, "errors": errors, "bad": bad,
            "stall_s": max(rk["stall"] for rk in ranks),
            "compute_s": max(rk["samples"] for rk in ranks) * compute_s,
            "samples": sum(rk["samples"] for rk in ranks)}


def netns(*args, check=True):
    r = subprocess.run([NETNS_SH, *args], capture_output=True, text=True, timeout=300)
    if check and r.returncode != 0:
        raise RuntimeError("netns.sh %s failed: %s%s" % (" ".join(args), r.stdout, r.stderr))
    return r.stdout.strip()


def dataset_files(a, ds, rnd):
    """([(relative path, size)], total bytes) of dataset @ds: "shardsN" is --shard-total-mib
    of N MiB shards, "small" --small-files of ~--small-kib KiB (sizes drawn from @rnd,
    the mean when @rnd is None)"""
    if ds.startswith("shards"):
        mib = int(ds[len("shards"):])
        files = [("shard-%04d.tar" % i, mib * MIB) for i in range(a.shard_total_mib // mib)]
    elif ds == "small":
        lo, hi = int(a.small_kib * 1024 * 0.9), int(a.small_kib * 1024 * 1.1)
        files = [("class-%02d/img-%05d.jpg" % (i % 16, i),
                  rnd.randint(lo, hi) if rnd else a.small_kib * 1024)
                 for i in range(a.small_files)]
    else:
        raise ValueError("unknown dataset %s (shardsN or small)" % ds)
    return files, sum(n for _, n in files)


def veth_rx():
    return int(netns("bytes").split()[0])


class Bench:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.bin)
        self.base_bin = os.path.abspath(a.base_bin) if a.base_bin else None
        self.work = a.work
        self.cleanup = bl.Cleanup()
        self.results = []
        self.local = {}
        self.problems = []
        self.datasets = {}
        self.endpoint = "http://%s:%d" % (NS_IP, a.rgw_port)
        self.link_Bps = a.rate_mbit * 1e6 / 8

    def problem(self, msg):
        log("PROBLEM: " + msg)
        self.problems.append(msg)

    # ---- setup ---------------------------------------------------------------------------

    def setup(self):
        a = self.a
        os.makedirs(self.work, exist_ok=True)
        self.cleanup.add("rm work", lambda: None if a.keep else bl.rmtree(self.work))
        for d in ("local", "caches", "mnt", "logs"):
            os.makedirs(os.path.join(self.work, d), exist_ok=True)
        self.mnt = os.path.join(self.work, "mnt")
        self.logs = os.path.join(self.work, "logs")
        # a namespace left by a killed run, with nothing in it, is removed first
        if "fzbench" in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                       text=True).stdout.split():
            pids = subprocess.run(["ip", "netns", "pids", "fzbench"], capture_output=True,
                                  text=True).stdout.split()
            if pids:
                raise RuntimeError("namespace fzbench is in use by pids %s" % pids)
            netns("down", check=False)
        netns("up")
        self.cleanup.add("netns down", lambda: netns("down", check=False))
        self.ceph_dir = os.path.join(self.work, "ceph")
        mem = int(2.5 * self.total_bytes()) + (1 << 30)
        log("starting the cluster in the namespace (memstore %d MiB)" % (mem >> 20))
        self.cleanup.add("cluster stop", lambda: netns("cluster-stop", self.ceph_dir, check=False))
        env = dict(os.environ, CEPH_TEST_MON_PORT=str(a.mon_port),
                   CEPH_TEST_RGW_PORT=str(a.rgw_port))
        r = subprocess.run([NETNS_SH, "cluster-start", self.ceph_dir, "--rgw", "--mem-bytes",
                            str(mem)], env=env, capture_output=True, text=True, timeout=400)
        if r.returncode != 0:
            raise RuntimeError("cluster start failed:\n%s%s" % (r.stdout, r.stderr[-3000:]))
        log(r.stdout.strip().splitlines()[-1])
        self.creds = bl.read_env_file(os.path.join(self.ceph_dir, "s3.env"))
        self.rgw_pid = int(open(os.path.join(self.ceph_dir, "run", "client.rgw.a.pid")).read())
        self.make_data()
        self.upload()
        netns("shape", str(a.rate_mbit))
        log("link shaped: tbf %d mbit/s both ways\n%s" % (a.rate_mbit, netns("show")))
        with open(os.path.join(self.work, "passwd-s3fs"), "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write("%s:%s\n" % (self.creds["AWS_ACCESS_KEY_ID"],
                                 self.creds["AWS_SECRET_ACCESS_KEY"]))
        open(os.path.join(self.work, "rclone.conf"), "w").close()

    def total_bytes(self):
        return sum(dataset_files(self.a, ds, None)[1] for ds in self.a.datasets)

    def make_data(self):
        a = self.a
        rnd = random.Random(a.seed)
        t0 = time.time()
        for ds in a.datasets:
            root = os.path.join(self.work, "local", ds)
            files = dataset_files(self.a, ds, rnd)[0]
            expect = {}
            for rel, size in files:
                p = os.path.join(root, rel)
                os.makedirs(os.path.dirname(p), exist_ok=True)
                data = os.urandom(size)
                with open(p, "wb") as f:
                    f.write(data)
                expect[rel] = (size, zlib.crc32(data))
            rels = sorted(expect)
            orders = []
            for e in range(1, a.epochs + 2):       # +1: the order published during the last
                o = list(rels)
                random.Random(a.seed * 1000 + e).shuffle(o)
                orders.append(o)
            self.datasets[ds] = {"root": root, "expect": expect, "files": len(rels),
                                 "bytes": sum(s for s, _ in expect.values()), "orders": orders}
            log("dataset %s: %d files, %.1f MiB" % (ds, len(rels),
                                                    self.datasets[ds]["bytes"] / MIB))
        log("data generated in %.0f s" % (time.time() - t0))

    def upload(self):
        t0 = time.time()
        c = bl.s3_client(self.endpoint, self.creds)
        c.create_bucket(Bucket=BUCKET)
        for ds, d in self.datasets.items():
            bl.upload_tree(c, BUCKET, os.path.join(self.work, "local"),
                           [ds + "/" + rel for rel in d["expect"]])
        n = 0
        for page in c.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
            n += len(page.get("Contents", []))
        want = sum(d["files"] for d in self.datasets.values())
        if n != want:
            raise RuntimeError("bucket holds %d objects, want %d" % (n, want))
        log("uploaded %d objects in %.0f s (unshaped link)" % (n, time.time() - t0))

    # ---- local disk reference ----------------------------------------------------------------

    def epoch_plan(self, ds, variant, e):
        """[(list name, the order published for the rank, the part it reads)] of epoch
        @e (0-based) of @variant: full - one rank reads its whole order; drop90 - one rank
        reads the first 90 % of its order (a loader with drop_last, max_steps or an early
        stop); ranks2 - two ranks read the order's even and odd positions
        (DistributedSampler), each with its own list"""
        order = self.datasets[ds]["orders"][e]
        if variant == "full":
            return [(LIST_NAME, order, order)]
        if variant == "drop90":
            return [(LIST_NAME, order, order[:int(len(order) * 0.9)])]
        if variant == "ranks2":
            return [("rank%d" % r, order[r::2], order[r::2]) for r in range(2)]
        raise ValueError(variant)

    def read(self, root, ds, variant, e):
        a = self.a
        plan = self.epoch_plan(ds, variant, e)
        return read_epoch(root, [part for _, _, part in plan], a.threads // len(plan),
                          self.datasets[ds]["expect"], a.compute_ms / 1000.0,
                          a.sample_kib * 1024, a.buffer_samples)

    def announce(self, ds, variant, e, published):
        """what PrefetchingSampler.set_epoch(e) does for each rank: epoch e begins (its
        list with the begin if fusefs does not have it yet), and e+1 is queued"""
        for k in (e, e + 1):
            for name, order, _ in self.epoch_plan(ds, variant, k):
                if k == e and (name, k) in published:
                    begin(self.mnt, name, epoch=k)
                elif (name, k) not in published:
                    publish(self.mnt, order, name, epoch=k, begin=(k == e))
                    published.add((name, k))

    def run_local(self, ds):
        d = self.datasets[ds]
        secs, stall = [], []
        t0 = time.time()
        for e in range(self.a.epochs):
            bl.drop_caches()
            r = self.read(d["root"], ds, "full", e)
            if r["errors"] or r["bad"]:
                raise RuntimeError("local read failed: %r" % (r["errors"] + r["bad"])[:5])
            secs.append(r["secs"])
            stall.append(r["stall_s"])
        self.local[ds] = {"secs": secs, "stall_s": stall,
                          "MiBps": [d["bytes"] / s / MIB for s in secs],
                          "other_work": self.contention.busy(t0, time.time())}
        log("local disk %s: %s s (stall %s s)" % (ds, " ".join("%.2f" % s for s in secs),
                                                   " ".join("%.2f" % s for s in stall)))

    # ---- mounts --------------------------------------------------------------------------

    def start_mount(self, mode, ds, cache_bytes, tag):
        a = self.a
        cdir = os.path.join(self.work, "caches", tag)
        os.makedirs(cdir)
        logp = os.path.join(self.logs, tag + ".log")
        env = bl.clean_env()
        extra = {"cache_dir": cdir}
        if mode.startswith("fusefs"):
            env.update(AWS_ACCESS_KEY_ID=self.creds["AWS_ACCESS_KEY_ID"],
                       AWS_SECRET_ACCESS_KEY=self.creds["AWS_SECRET_ACCESS_KEY"])
            binary = self.base_bin if mode.endswith("-base") else self.bin
            cmd = [binary, "mount", "s3://%s/%s" % (BUCKET, ds), self.mnt, "-f",
                   "--endpoint", self.endpoint, "--cache-dir", cdir,
                   "--cache-size", str(cache_bytes)]
            if mode == "fusefs-lru":
                cmd += ["--evict", "lru"]
            cmd += a.fusefs_args.split()
        elif mode == "s3fs":
            img = os.path.join(self.work, "caches", tag + ".img")
            # ext4 with no reserved blocks; size = cache + margin; ensure_diskfree is then set
            # from the real free space so that exactly cache_bytes are usable by s3fs
            size = int(cache_bytes * 1.06) + 96 * MIB
            with open(img, "wb") as f:
                f.truncate(size)
            subprocess.run(["mkfs.ext4", "-q", "-m", "0", "-F", img], check=True)
            subprocess.run(["mount", "-o", "loop", img, cdir], check=True)
            self.cleanup.add("umount " + cdir, lambda: subprocess.run(
                ["umount", "-l", cdir], check=False))
            st = os.statvfs(cdir)
            avail = st.f_bavail * st.f_frsize
            diskfree_mib = (avail - cache_bytes) // MIB
            if diskfree_mib < 8:
                raise RuntimeError("s3fs cache fs too small: %d free" % avail)
            extra.update(loopfs=True, ensure_diskfree_mib=diskfree_mib, fs_avail=avail)
            cmd = ["s3fs", "%s:/%s" % (BUCKET, ds), self.mnt, "-f",
                   "-o", "url=%s" % self.endpoint, "-o", "use_path_request_style",
                   "-o", "passwd_file=%s" % os.path.join(self.work, "passwd-s3fs"),
                   "-o", "use_cache=%s" % cdir,
                   "-o", "ensure_diskfree=%d" % diskfree_mib] + a.s3fs_args.split()
        elif mode == "rclone":
            env.update(RCLONE_CONFIG_FZ_TYPE="s3", RCLONE_CONFIG_FZ_PROVIDER="Ceph",
                       RCLONE_CONFIG_FZ_ENDPOINT=self.endpoint,
                       RCLONE_CONFIG_FZ_ACCESS_KEY_ID=self.creds["AWS_ACCESS_KEY_ID"],
                       RCLONE_CONFIG_FZ_SECRET_ACCESS_KEY=self.creds["AWS_SECRET_ACCESS_KEY"],
                       RCLONE_CONFIG_FZ_REGION="us-east-1")
            cmd = ["rclone", "--config", os.path.join(self.work, "rclone.conf"), "mount",
                   "fz:%s/%s" % (BUCKET, ds), self.mnt, "--vfs-cache-mode", "full",
                   "--vfs-cache-max-size", "%dB" % cache_bytes,
                   "--vfs-cache-poll-interval", "1s", "--cache-dir", cdir,
                   "--dir-cache-time", "1h"] + a.rclone_args.split()
        else:
            raise ValueError(mode)
        extra["cmd"] = " ".join(cmd)
        return bl.Daemon(mode, cmd, self.mnt, logp, self.cleanup, env=env), cdir, extra

    # ---- one configuration: fresh mount, N epochs -------------------------------------------

    def run_config(self, ds, ratio, variant, mode, rep=None):
        a = self.a
        d = self.datasets[ds]
        cache_bytes = int(ratio * d["bytes"])
        tag = "%s-%s-%s-%s" % (ds, ratio, variant, mode)
        if rep is not None:
            tag += "-r%d" % rep
        log("==== %s: %s %s, cache %.0f MiB (%.2f x %.0f MiB)" % (
            mode, ds, variant, cache_bytes / MIB, ratio, d["bytes"] / MIB))
        t_mount = time.time()
        dm, cdir, extra = self.start_mount(mode, ds, cache_bytes, tag)
        is_fz = mode.startswith("fusefs")
        try:
            mount_s = time.time() - t_mount
            t0 = time.time()
            n = sum(len(fs) for _, _, fs in os.walk(self.mnt))
            walk_s = time.time() - t0
            if n != d["files"]:
                self.problem("%s: walk found %d files, want %d" % (tag, n, d["files"]))
            published = set()

            def snap():
                s = {"t": time.time(), "rx": veth_rx(), "busy": bl.sys_busy(),
                     "cpu": bl.proc_cpu(dm.pid), "rgw_cpu": bl.proc_cpu(self.rgw_pid)}
                if is_fz:
                    s["st"] = bl.fusefs_stats(self.mnt)
                return s

            snaps, reads, listhit, peak = [], [], [], []
            for e in range(a.epochs):
                snaps.append(snap())
                sampler = bl.PeakSampler(cdir)
                bl.drop_caches()
                if mode.startswith("fusefs-list"):
                    self.announce(ds, variant, e, published)
                r = self.read(self.mnt, ds, variant, e)
                reads.append(r)
                peak.append(sampler.stop())
                if mode.startswith("fusefs-list"):
                    st = bl.fusefs_stats(self.mnt)
                    hits = [st.get('list_hit_ratio_permille{list="%s"}' % name)
                            for name, _, _ in self.epoch_plan(ds, variant, e)]
                    listhit.append(None if None in hits else min(hits))
                else:
                    listhit.append(None)
                log("  epoch %d: %.1f s, %.1f MiB/s, stall %.2f s%s" % (
                    e + 1, r["secs"], r["bytes"] / r["secs"] / MIB, r["stall_s"],
                    "" if not (r["errors"] or r["bad"]) else
                    "  ERRORS %d BAD %d: %s" % (len(r["errors"]), len(r["bad"]),
                                                 (r["errors"] + r["bad"])[:3])))
                if r["errors"] or r["bad"]:
                    self.problem("%s epoch %d: %d read errors, %d wrong files: %s" % (
                        tag, e + 1, len(r["errors"]), len(r["bad"]),
                        (r["errors"] + r["bad"])[:5]))
            snaps.append(snap())
            cache_used = bl.dir_bytes(cdir)
            final_stats = bl.fusefs_stats(self.mnt) if is_fz else None
        finally:
            dm.stop()
            if mode == "s3fs":
                subprocess.run(["umount", cdir], check=False)
            shutil.rmtree(cdir, ignore_errors=True)
            if mode == "s3fs":
                os.unlink(os.path.join(self.work, "caches", tag + ".img"))

        for e in range(a.epochs):
            s0, s1, r = snaps[e], snaps[e + 1], reads[e]
            other = self.contention.busy(s0["t"], s1["t"])
            rx = s1["rx"] - s0["rx"]
            busy = (s1["busy"][0] - s0["busy"][0]) / max(1, s1["busy"][1] - s0["busy"][1])
            # the least the link must carry: everything read in epoch 1, then what does
            # not fit in the cache; the epoch can not be shorter than that at the link rate
            # nor than the compute time
            missing = r["bytes"] if e == 0 else max(0, r["bytes"] - cache_bytes)
            bound = max(r["compute_s"], missing / self.link_Bps)
            rec = {"dataset": ds, "ratio": ratio, "variant": variant, "mode": mode, "rep": rep,
                   "epoch": e + 1,
                   "dataset_bytes": d["bytes"], "files": d["files"], "cache_bytes": cache_bytes,
                   "secs": round(r["secs"], 3), "bytes_read": r["bytes"],
                   "compute_s": round(r["compute_s"], 3), "missing_bytes": missing,
                   "bound_s": round(bound, 3), "time_per_bound": round(r["secs"] / bound, 3),
                   "gpu_stall_s": round(r["stall_s"], 3),
                   "MiBps": round(r["bytes"] / r["secs"] / MIB, 2),
                   "frac_link": round(r["bytes"] / r["secs"] / self.link_Bps, 3),
                   "frac_local": (round(self.local[ds]["secs"][e] / r["secs"], 3)
                                  if variant == "full" else None),
                   "veth_rx_bytes": rx,
                   "hit_bytes_veth": round(1 - rx / r["bytes"], 3),
                   "cpu_busy": round(busy, 3),
                   "daemon_cpu_s": round(s1["cpu"] - s0["cpu"], 2),
                   "rgw_cpu_s": round(s1["rgw_cpu"] - s0["rgw_cpu"], 2),
                   "cache_peak_bytes": peak[e], "other_work": other,
                   "errors": len(r["errors"]), "bad": len(r["bad"])}
            if is_fz:
                delta = {k: s1["st"].get(k, 0) - s0["st"].get(k, 0) for k in
                         ("bytes_from_backend", "hits", "misses", "stall_us", "prefetch_chunks",
                          "prefetch_wasted_bytes", "evictions", "evicted_bytes",
                          "revalidations", "backend_reads", "chunks_not_stored",
                          "readahead_chunks", "chunks_stored", "staged_chunks",
                          "staged_unread", "staged_stored", "prefetch_queued_bytes")}
                rec.update(delta)
                # the epoch's own bytes: what it fetched ahead for the next epoch (a
                # queued list's files) goes to the next one, and what the epoch before
                # fetched for it comes here; the last epoch's lookahead serves an epoch
                # this run never reads
                prev = self.results[-1] if e else None
                rec["own_bytes"] = (delta["bytes_from_backend"] - delta["prefetch_queued_bytes"]
                                    + (prev["prefetch_queued_bytes"] if prev else 0))
                rec["hit_bytes"] = round(1 - delta["bytes_from_backend"] / r["bytes"], 3)
                rec["list_hit"] = None if listhit[e] is None else listhit[e] / 1000
            else:
                rec["hit_bytes"] = round(1 - rx / r["bytes"], 3)
            self.results.append(rec)
        self.configs.append({"dataset": ds, "ratio": ratio, "variant": variant, "mode": mode, "mount_s": round(mount_s, 2),
                             "walk_s": round(walk_s, 2), "cache_used_end": cache_used,
                             "final_stats": final_stats, **extra})

    # ---- output --------------------------------------------------------------------------

    def table(self):
        a = self.a
        lines = []
        w = lines.append
        w("link %d mbit/s (%.1f MiB/s), %d readers per job (split between the ranks of "
          "ranks2), %.1f ms of compute per sample of %d KiB, a buffer of %d samples per rank, "
          "page cache dropped before each epoch" % (
              a.rate_mbit, self.link_Bps / MIB, a.threads, a.compute_ms, a.sample_kib,
              a.buffer_samples))
        for ds in self.local:
            w("local disk %s (full variant): %s s per epoch, stall %s s" % (
                ds, ", ".join("%.2f" % x for x in self.local[ds]["secs"]),
                ", ".join("%.2f" % x for x in self.local[ds]["stall_s"])))
        w("")
        w("| data | cache/data | variant | mode | ep | time s | compute s | bound s "
          "| time / bound | stall s | fuse wait s | backend MiB | backend / (read - C) "
          "| own MiB | own / (read - C) | hit (bytes) | list hit | x local | daemon CPU s |")
        w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in self.results:
            back = r.get("bytes_from_backend", r["veth_rx_bytes"])
            rmc = r["bytes_read"] - r["cache_bytes"]
            own = r.get("own_bytes", back)
            w("| %s | %.1f | %s | %s | %d | %.1f | %.1f | %.1f | %.2f | %.2f | %s | %.1f | %s "
              "| %.1f | %s | %.3f | %s | %s | %.1f |" % (
                r["dataset"], r["ratio"], r["variant"],
                r["mode"] + ("" if r.get("rep") is None else " #%d" % r["rep"]),
                r["epoch"], r["secs"],
                r["compute_s"], r["bound_s"], r["time_per_bound"], r["gpu_stall_s"],
                "%.1f" % (r["stall_us"] / 1e6) if "stall_us" in r else "-",
                back / MIB,
                "%.3f" % (back / rmc) if rmc > 0 and r["epoch"] > 1 else "-",
                own / MIB,
                "%.3f" % (own / rmc) if rmc > 0 and r["epoch"] > 1 else "-",
                r["hit_bytes"],
                "%.2f" % r["list_hit"] if r.get("list_hit") is not None else "-",
                "%.2f" % r["frac_local"] if r.get("frac_local") is not None else "-",
                r["daemon_cpu_s"]) + (" *" if r["other_work"] else ""))
        if any(r["other_work"] for r in self.results):
            w("")
            w("* other heavy work (tests, another benchmark or cluster) ran during this epoch")
        if self.problems:
            w("")
            w("PROBLEMS:")
            for p in self.problems:
                w("  " + p)
        return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(bl.ROOT, "build", "bin", "fusefs"))
    ap.add_argument("--work", default=None, help="scratch dir (default /var/tmp/fusefs-epoch.*)")
    ap.add_argument("--out", default="/tmp/fusefs-bench-epoch.json")
    ap.add_argument("--rate-mbit", type=int, default=200)
    ap.add_argument("--shard-total-mib", type=int, default=512,
                    help="bytes of each shardsN dataset, in MiB")
    ap.add_argument("--small-files", type=int, default=5000)
    ap.add_argument("--small-kib", type=int, default=100)
    ap.add_argument("--ratios", default="0.5")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--datasets", default="shards32,shards8,small",
                    help="shardsN (N MiB shards) and/or small")
    ap.add_argument("--modes", default=",".join(DEFAULT_MODES),
                    help="modes of the full variant (also: fusefs-list-base, "
                         "with --base-bin)")
    ap.add_argument("--variants", default=",".join(ALL_VARIANTS))
    ap.add_argument("--variant-modes", default="fusefs-list,fusefs-heat",
                    help="modes of the drop90 and ranks2 variants")
    ap.add_argument("--compute-ms", type=float, default=2.0,
                    help="GPU time per sample (0: none)")
    ap.add_argument("--sample-kib", type=int, default=100,
                    help="bytes of a sample in a shard (a small file is one sample)")
    ap.add_argument("--buffer-samples", type=int, default=64,
                    help="samples the loader may hold ahead of the GPU, per rank")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--mon-port", type=int, default=int(os.environ.get("CEPH_TEST_MON_PORT", 6900)))
    ap.add_argument("--rgw-port", type=int, default=int(os.environ.get("CEPH_TEST_RGW_PORT", 7600)))
    ap.add_argument("--fusefs-args", default="", help="extra fusefs mount options")
    ap.add_argument("--s3fs-args", default="", help="extra s3fs options")
    ap.add_argument("--rclone-args", default="", help="extra rclone mount options")
    ap.add_argument("--keep", action="store_true", help="keep the scratch dir")
    ap.add_argument("--base-bin", default=None,
                    help="binary of mode fusefs-list-base (an A/B against --bin)")
    ap.add_argument("--reps", type=int, default=1,
                    help="run each configuration's modes this many times, the mode "
                         "order reversed in odd repetitions (tags get -rN)")
    a = ap.parse_args()
    a.ratios = [float(x) for x in a.ratios.split(",")]
    a.datasets = a.datasets.split(",")
    a.modes = a.modes.split(",")
    a.variants = a.variants.split(",")
    a.variant_modes = a.variant_modes.split(",")
    for m in a.modes + a.variant_modes:
        if m not in ALL_MODES:
            sys.exit("unknown mode %s (modes: %s)" % (m, ", ".join(ALL_MODES)))
    for v in a.variants:
        if v not in ALL_VARIANTS:
            sys.exit("unknown variant %s (variants: %s)" % (v, ", ".join(ALL_VARIANTS)))
    for ds in a.datasets:
        if not (ds == "small" or (ds.startswith("shards") and ds[6:].isdigit()
                                  and int(ds[6:]) > 0)):
            sys.exit("unknown dataset %s (shardsN or small)" % ds)
    if a.threads % 2:
        sys.exit("--threads must be even (the ranks2 variant splits them)")
    if os.geteuid() != 0:
        sys.exit("epoch bench: must run as root (netns, tc, drop_caches, loop mounts)")
    if "fusefs-list-base" in a.modes + a.variant_modes and not (
            a.base_bin and os.access(a.base_bin, os.X_OK)):
        sys.exit("epoch bench: mode fusefs-list-base needs an executable --base-bin")
    bl.require_bin("epoch bench", a.bin)
    for tool in {"s3fs": "s3fs", "rclone": "rclone"}.items():
        if tool[0] in a.modes + a.variant_modes and not shutil.which(tool[1]):
            sys.exit("epoch bench: %s is not installed (scripts/deps.sh)" % tool[1])
    if a.work is None:
        import tempfile
        a.work = tempfile.mkdtemp(prefix="fusefs-epoch.", dir="/var/tmp")

    b = Bench(a)
    b.configs = []
    b.contention = bl.Contention(a.work)
    info = bl.machine()
    busy = bl.other_heavy_work()
    if busy:
        log("note: other work is running and may skew the numbers:\n  " + "\n  ".join(busy))
    info["other_work_at_start"] = busy
    t_start = time.time()
    rc = 0
    try:
        b.setup()
        for ds in a.datasets:
            b.run_local(ds)
        for ds in a.datasets:
            for ratio in a.ratios:
                for variant in a.variants:
                    modes = a.modes if variant == "full" else a.variant_modes
                    for rep in range(a.reps):
                        for mode in (modes if rep % 2 == 0 else modes[::-1]):
                            try:
                                b.run_config(ds, ratio, variant, mode,
                                             rep if a.reps > 1 else None)
                            except (RuntimeError, OSError,
                                    subprocess.SubprocessError) as e:
                                b.problem("%s %s %s %s failed: %r" % (
                                    ds, ratio, variant, mode, e))
    except BaseException as e:
        b.problem("aborted: %r" % e)
        rc = 1
    finally:
        b.cleanup.run()
    info["loadavg_end"] = open("/proc/loadavg").read().strip()
    info["other_work_seen"] = b.contention.stop()
    out = {"duration_s": round(time.time() - t_start, 1), "machine": info,
           "config": {k: v for k, v in vars(a).items()},
           "link_bytes_per_s": b.link_Bps,
           "datasets": {k: {"files": v["files"], "bytes": v["bytes"]} for k, v in b.datasets.items()},
           "local": b.local, "results": b.results, "configs": b.configs, "problems": b.problems}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(b.table())
    print("\nrun took %.0f s; JSON results: %s (plot: bench/plot.py %s)" % (
        out["duration_s"], a.out, a.out))
    return rc


if __name__ == "__main__":
    sys.exit(main())
