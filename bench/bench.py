#!/usr/bin/python3
"""fusefs read benchmark (run by bench/run.sh; see docs/benchmarks.md).

Dataset: 32 objects x 32 MiB of random bytes in pool `fusefs` under PREFIX/ on a
throwaway single-node Ceph cluster (memstore), plus the same 32 files on local disk in
WORK/local (same filesystem as the cache directory WORK/cache-*).

For each --read-mode (direct, buffered, splice) it runs, rep by rep so that a baseline and
the pass it is compared with are measured next to each other in time:

  cold:    rados_get_seq    `rados get OBJ /dev/null` for the 32 objects, one after another
           cold_seq         fresh cache dir + fresh mount, read the 32 files one after another
           rados_get_par4   4 such loops in parallel, 8 objects each
           cold_par4        fresh cache + mount, 4 readers in parallel, 8 files each
  warm:    (one mount primed by a full read, every chunk stored)
           local_seq / warm_seq, local_par4 / warm_par4
  remount: unmount, mount the same cache dir again, read everything once (remount_seq):
           the first read of each chunk after a start verifies its checksum

Every pass reads with 1 MiB read() calls (like cat) and is preceded by
`sync; echo 3 > /proc/sys/vm/drop_caches`. Each pass is repeated --reps times (default 3);
the table shows the median (min..max). Daemon CPU = utime+stime of the fusefs process
(/proc/PID/stat) over the pass; for cold passes it is taken after every fetched chunk was
stored, so it includes hashing and writing the cache. Timed passes on a new mount start once
its bdi read_ahead_kb is raised (fusefs does it 300 ms after mounting). Per pass the JSON
also has OSD, reader and machine CPU and "other" CPU (processes outside the benchmark).
Ratios are of medians; one is flagged noisy when an input's max/min exceeds NOISY.

Bytes are checked once per mode and path (untimed passes): a cold read, a warm read and a
read after a remount are hashed (SHA-1) and compared with the local copy.
"""

import argparse
import datetime
import hashlib
import json
import multiprocessing as mp
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from cephcluster import CephCluster  # noqa: E402

POOL = "fusefs"
PREFIX = "bench"
MIB = 1 << 20
GIB = 1 << 30
BUF = 1 * MIB
CLK_TCK = os.sysconf("SC_CLK_TCK")
NOISY = 1.3  # a ratio is flagged when its numerator's or denominator's max/min exceeds this


def log(*a):
    print("[%s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the comm field: state is fields[0]; utime/stime are stat fields 14/15
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_cpu(pid):
    """{tid: (comm, cpu seconds)} of every thread of pid."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                raw = f.read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw.rsplit(")", 1)[1].split()
        out[tid] = (comm, (int(fields[11]) + int(fields[12])) / CLK_TCK)
    return out


def thread_cpu_delta(before, after):
    """CPU seconds per thread name over an interval (threads that exited meanwhile are
    missing; the process total from cpu_seconds() is exact)."""
    agg = {}
    for tid, (comm, t) in after.items():
        d = t - before.get(tid, (comm, 0.0))[1]
        if d > 0:
            agg[comm] = round(agg.get(comm, 0.0) + d, 2)
    return dict(sorted(agg.items(), key=lambda kv: -kv[1]))


def sys_cpu():
    """(user+nice+system, irq+softirq, steal, total) jiffies over all CPUs (/proc/stat)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    steal = v[7] if len(v) > 7 else 0
    total = sum(v[:8])
    return v[0] + v[1] + v[2], v[5] + v[6], steal, total


class Meter:
    """Whole-machine, OSD and reader (this process + children) CPU over one pass."""

    def __init__(self, osd_pid, other_ceph_pids=()):
        self.osd_pid = osd_pid
        self.other_ceph = list(other_ceph_pids)

    def _ceph_other(self):
        return sum(cpu_seconds(p) for p in self.other_ceph)

    def __enter__(self):
        self.sys0 = sys_cpu()
        self.osd0 = cpu_seconds(self.osd_pid) if self.osd_pid else 0.0
        self.mon0 = self._ceph_other()
        self.ru0 = self._ru()
        return self

    @staticmethod
    def _ru():
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
            resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def __exit__(self, *exc):
        b1, i1, s1, t1 = sys_cpu()
        b0, i0, s0, t0 = self.sys0
        self.result = {
            "machine_busy_pct": round(100.0 * (b1 + i1 - b0 - i0) / max(1, t1 - t0), 1),
            "irq_softirq_pct": round(100.0 * (i1 - i0) / max(1, t1 - t0), 1),
            "machine_task_cpu_s": (b1 - b0) / CLK_TCK,  # user+nice+system, all tasks
            "mon_mgr_cpu_s": round(self._ceph_other() - self.mon0, 2),
            "steal_pct": round(100.0 * (s1 - s0) / max(1, t1 - t0), 1),
            "osd_cpu_s": round((cpu_seconds(self.osd_pid) if self.osd_pid else 0.0)
                               - self.osd0, 2),
            "reader_cpu_s": round(self._ru() - self.ru0, 2),
        }
        return False


# ---- readers ---------------------------------------------------------------------------

def read_files(paths, want_hash=False):
    """Read every file with 1 MiB read() calls; returns (bytes, {path: sha1})."""
    buf = bytearray(BUF)
    total = 0
    hashes = {}
    for p in paths:
        h = hashlib.sha1() if want_hash else None
        with open(p, "rb", buffering=0) as f:
            while True:
                n = f.readinto(buf)
                if not n:
                    break
                total += n
                if h is not None:
                    h.update(memoryview(buf)[:n])
        if h is not None:
            hashes[os.path.basename(p)] = h.hexdigest()
    return total, hashes


def _child(paths, ready, go, q):
    ready.put(os.getpid())
    go.wait()
    try:
        n, _ = read_files(paths)
        q.put(("ok", n))
    except Exception as e:  # report, do not hang the parent
        q.put(("err", repr(e)))


def read_parallel(groups, before=None):
    """One process per group of paths; time from the start signal until all are done.
    `before()` is called right before the start signal (CPU snapshot)."""
    ctx = mp.get_context("fork")
    ready, q, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_child, args=(g, ready, go, q)) for g in groups]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=30)
    snap = before() if before else None
    t0 = time.perf_counter()
    go.set()
    results = [q.get(timeout=600) for _ in procs]
    t1 = time.perf_counter()
    for p in procs:
        p.join()
    errs = [r[1] for r in results if r[0] != "ok"]
    if errs:
        raise IOError("parallel reader failed: %s" % errs)
    return sum(r[1] for r in results), t1 - t0, snap


def quarters(items, n=4):
    k = len(items) // n
    return [items[i * k:(i + 1) * k] for i in range(n)]


# ---- fusefs mounts ---------------------------------------------------------------------

class Mount:
    def __init__(self, bench, cache, mode):
        self.b, self.cache, self.mode = bench, cache, mode
        self.mnt = bench.mnt
        self.proc = None
        self.read_ahead_kb = None

    def start(self, timeout=60):
        os.makedirs(self.cache, exist_ok=True)
        self.logf = open(self.b.daemon_log, "ab")
        self.logf.write(("\n==== mount cache=%s mode=%s %s\n" % (
            self.cache, self.mode, time.strftime("%H:%M:%S"))).encode())
        self.logf.flush()
        cmd = [self.b.bin, "mount", "rados://%s/%s" % (POOL, PREFIX), self.mnt, "-f",
               "--cache-dir", self.cache, "--cache-size", "4G",
               "--ceph-conf", self.b.ceph.conf_path, "--read-mode", self.mode]
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        with open(self.b.pidfile, "a") as f:
            f.write("%d\n" % self.proc.pid)
        self.b.mounts.append(self)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("fusefs exited with %d at mount (log %s)" %
                                   (self.proc.returncode, self.b.daemon_log))
            if os.path.ismount(self.mnt):
                self.wait_readahead()
                return self
            time.sleep(0.05)
        raise RuntimeError("fusefs not mounted after %ds" % timeout)

    def wait_readahead(self, want=4096, timeout=3.0):
        """fusefs raises the mount's bdi read_ahead_kb 300 ms after mounting; files opened
        before that keep the 128 KiB default. Wait for it so every pass sees the same."""
        dev = os.stat(self.mnt).st_dev
        path = "/sys/class/bdi/%d:%d/read_ahead_kb" % (os.major(dev), os.minor(dev))
        deadline = time.time() + timeout
        while True:
            try:
                with open(path) as f:
                    self.read_ahead_kb = int(f.read())
            except OSError:
                self.read_ahead_kb = None
            if (self.read_ahead_kb or 0) >= want or time.time() > deadline:
                return
            time.sleep(0.05)

    @property
    def pid(self):
        return self.proc.pid

    def stats(self):
        raw = os.getxattr(self.mnt, "user.fusefs.stats").decode()
        out = {}
        for line in raw.splitlines():
            k, _, v = line.partition(" ")
            try:
                out[k] = int(v)
            except ValueError:
                pass
        return out

    def settle(self, nchunks, timeout=120):
        """Wait until every fetched chunk was stored (or given up on)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.stats()
            if s.get("chunks_stored", 0) + s.get("chunks_not_stored", 0) >= nchunks:
                return s
            time.sleep(0.05)
        raise RuntimeError("cache did not settle: %r" % self.stats())

    def umount(self):
        if self.proc is None:
            return
        subprocess.run(["fusermount3", "-u", self.mnt], check=False)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError("fusefs did not exit after unmount")
        self.proc = None
        self.logf.close()
        self.b.mounts.remove(self)
        if rc != 0:
            raise RuntimeError("fusefs exited %d after unmount (log %s)" % (rc, self.b.daemon_log))

    def kill(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None
        subprocess.run(["fusermount3", "-uz", self.mnt], check=False, stderr=subprocess.DEVNULL)
        self.logf.close()
        if self in self.b.mounts:
            self.b.mounts.remove(self)


# ---- the benchmark ---------------------------------------------------------------------

STAT_KEYS = ("bytes_from_backend", "bytes_from_cache", "backend_reads", "readahead_chunks",
             "misses", "hits", "verified_chunks", "checksum_failures", "read_errors",
             "backend_errors", "chunks_stored", "chunks_not_stored", "revalidations",
             "stall_us", "prefetch_chunks")


class Bench:
    def __init__(self, args):
        self.a = args
        self.bin = os.path.abspath(args.bin)
        self.work = os.path.abspath(args.work)
        self.local = os.path.join(self.work, "local")
        self.mnt = os.path.join(self.work, "mnt")
        self.daemon_log = os.path.join(self.work, "fusefs.log")
        self.pidfile = os.path.join(self.work, "fusefs.pids")
        self.mounts = []
        self.ceph = CephCluster()
        self.names = ["f%02d.bin" % i for i in range(args.files)]
        self.size = args.file_mib * MIB
        self.total = self.size * args.files
        self.nchunks = self.total // (4 * MIB)
        self.hashes = {}
        self.samples = []  # every pass
        self.checks = []   # byte verification results
        self.cache_seq = 0
        self.problems = []
        self.osd_pid = None
        self.mon_mgr_pids = []
        self.rados_overhead = None

    # -- setup
    def setup(self):
        os.makedirs(self.local, exist_ok=True)
        os.makedirs(self.mnt, exist_ok=True)
        log("starting ceph cluster (memstore %d GiB) in %s/ceph" % (self.a.mem_gib, self.work))
        self.ceph.start(os.path.join(self.work, "ceph"), pool=POOL,
                        mem_bytes=self.a.mem_gib * GIB)
        log("writing %d x %d MiB to the pool and to %s" % (len(self.names), self.a.file_mib,
                                                          self.local))
        t0 = time.time()
        for n in self.names:
            data = os.urandom(self.size)
            self.hashes[n] = hashlib.sha1(data).hexdigest()
            with open(os.path.join(self.local, n), "wb") as f:
                f.write(data)
            self.ceph.put(POOL, "%s/%s" % (PREFIX, n), data)
        os.sync()
        log("dataset ready in %.1f s" % (time.time() - t0))
        pid = lambda d: int(open(os.path.join(self.ceph.dir, "run", d + ".pid")).read())
        self.osd_pid = pid("osd.0")
        self.mon_mgr_pids = [pid("mon.a"), pid("mgr.x")]

    def new_cache(self):
        self.cache_seq += 1
        return os.path.join(self.work, "cache-%d" % self.cache_seq)

    def drop_cache_dir(self, path):
        shutil.rmtree(path, ignore_errors=True)

    # -- recording
    def record(self, mode, kind, nbytes, secs, meter, cpu=None, stats=None, extra=None):
        s = {"mode": mode, "kind": kind, "bytes": nbytes, "seconds": secs,
             "mib_s": nbytes / MIB / secs}
        s.update(meter.result)
        gib = nbytes / GIB
        s["osd_cpu_s_per_gib"] = s["osd_cpu_s"] / gib
        s["reader_cpu_s_per_gib"] = s["reader_cpu_s"] / gib
        if cpu is not None:
            s["daemon_cpu_s"] = cpu
            s["daemon_cpu_s_per_gib"] = cpu / (nbytes / GIB)
        if stats is not None:
            s["stats_delta"] = stats
        if extra:
            s.update(extra)
        # CPU used on the machine during the pass by processes that are not part of it
        # (other users of this shared machine): busy - reader - daemon - ceph daemons
        ours = s["reader_cpu_s"] + s["osd_cpu_s"] + s["mon_mgr_cpu_s"] + \
            s.get("daemon_cpu_s_at_reader_end", 0.0)
        s["other_cpu_pct"] = round(max(0.0, s["machine_task_cpu_s"] - ours) /
                                   (secs * (os.cpu_count() or 1)) * 100, 1)
        self.samples.append(s)
        msg = "%-8s %-15s %8.0f MiB/s  %6.2f s  busy %3.0f%% other %3.0f%%" % (
            mode, kind, s["mib_s"], secs, s["machine_busy_pct"], s["other_cpu_pct"])
        if cpu is not None:
            msg += "  daemon %.2f CPU-s/GiB" % s["daemon_cpu_s_per_gib"]
        log(msg)
        if nbytes != self.total:
            self.problem("%s %s: read %d bytes, expected %d" % (mode, kind, nbytes, self.total))
        return s

    def problem(self, msg):
        log("PROBLEM: " + msg)
        self.problems.append(msg)

    @staticmethod
    def delta(before, after):
        return {k: after.get(k, 0) - before.get(k, 0) for k in STAT_KEYS}

    # -- baselines
    def local_paths(self):
        return [os.path.join(self.local, n) for n in self.names]

    def mnt_paths(self):
        return [os.path.join(self.mnt, n) for n in self.names]

    def meter(self):
        return Meter(self.osd_pid, self.mon_mgr_pids)

    def pass_local_seq(self, mode):
        drop_caches()
        with self.meter() as mt:
            t0 = time.perf_counter()
            n, _ = read_files(self.local_paths())
            secs = time.perf_counter() - t0
        return self.record(mode, "local_seq", n, secs, mt)

    def pass_local_par4(self, mode):
        drop_caches()
        mt = self.meter()
        n, secs, _ = read_parallel(quarters(self.local_paths()), before=mt.__enter__)
        mt.__exit__(None, None, None)
        return self.record(mode, "local_par4", n, secs, mt)

    def _rados_loop_cmd(self, names):
        objs = " ".join("%s/%s" % (PREFIX, n) for n in names)
        return ["bash", "-c", 'for o in %s; do rados -c "$1" -p %s get "$o" /dev/null || exit 1; '
                'done' % (objs, POOL), "rados-loop", self.ceph.conf_path]

    def rados_cli_overhead(self):
        """Seconds for 32 `rados stat` runs: process start + connect, no data."""
        objs = " ".join("%s/%s" % (PREFIX, n) for n in self.names)
        cmd = ["bash", "-c", 'for o in %s; do rados -c "$1" -p %s stat "$o" >/dev/null || '
               'exit 1; done' % (objs, POOL), "rados-stat-loop", self.ceph.conf_path]
        v = []
        for _ in range(self.a.reps):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True)
            v.append(time.perf_counter() - t0)
        self.rados_overhead = {"loop_of": len(self.names), "median_s": statistics.median(v),
                               "samples_s": v}
        log("rados CLI overhead: %d x `rados stat` take %.2f s (median)" %
            (len(self.names), self.rados_overhead["median_s"]))

    def pass_rados_seq(self, mode):
        drop_caches()
        with self.meter() as mt:
            t0 = time.perf_counter()
            subprocess.run(self._rados_loop_cmd(self.names), check=True)
            secs = time.perf_counter() - t0
        return self.record(mode, "rados_get_seq", self.total, secs, mt)

    def pass_rados_par4(self, mode):
        drop_caches()
        with self.meter() as mt:
            t0 = time.perf_counter()
            procs = [subprocess.Popen(self._rados_loop_cmd(g)) for g in quarters(self.names)]
            rcs = [p.wait() for p in procs]
            secs = time.perf_counter() - t0
        if any(rcs):
            raise RuntimeError("rados get loop failed: %r" % rcs)
        return self.record(mode, "rados_get_par4", self.total, secs, mt)

    # -- mount passes
    def timed_mount_pass(self, m, mode, kind, parallel, settle=False):
        s0 = m.stats()
        drop_caches()
        mt = self.meter()

        def before():
            mt.__enter__()
            return cpu_seconds(m.pid), thread_cpu(m.pid)
        if parallel:
            n, secs, (c0, th0) = read_parallel(quarters(self.mnt_paths()), before=before)
        else:
            c0, th0 = before()
            t0 = time.perf_counter()
            n, _ = read_files(self.mnt_paths())
            secs = time.perf_counter() - t0
        mt.__exit__(None, None, None)
        c_end = cpu_seconds(m.pid)
        extra = {"daemon_cpu_s_at_reader_end": round(c_end - c0, 2),
                 "bdi_read_ahead_kb": m.read_ahead_kb}
        if settle:
            m.settle(self.nchunks)
        c1 = cpu_seconds(m.pid)
        extra["daemon_threads_cpu_s"] = thread_cpu_delta(th0, thread_cpu(m.pid))
        d = self.delta(s0, m.stats())
        if d["read_errors"] or d["checksum_failures"] or d["backend_errors"]:
            self.problem("%s %s: counters %r" % (mode, kind, d))
        if kind.startswith(("warm", "remount")) and d["bytes_from_backend"]:
            self.problem("%s %s: %d bytes came from the backend in a warm pass" %
                         (mode, kind, d["bytes_from_backend"]))
        return self.record(mode, kind, n, secs, mt, cpu=c1 - c0, stats=d, extra=extra)

    def pass_cold(self, mode, parallel):
        cache = self.new_cache()
        m = Mount(self, cache, mode).start()
        try:
            return self.timed_mount_pass(m, mode, "cold_par4" if parallel else "cold_seq",
                                         parallel, settle=True)
        finally:
            m.umount()
            self.drop_cache_dir(cache)

    def verify(self, m, mode, what):
        s0 = m.stats()
        drop_caches()
        n, hashes = read_files(self.mnt_paths(), want_hash=True)
        bad = sorted(k for k in self.names if hashes.get(k) != self.hashes[k])
        d = self.delta(s0, m.stats())
        ok = not bad and n == self.total
        self.checks.append({"mode": mode, "what": what, "ok": ok, "bytes": n,
                            "mismatched_files": bad, "stats_delta": d})
        log("%-8s verify %-8s %s (%d bytes, %d files differ)" %
            (mode, what, "OK" if ok else "MISMATCH", n, len(bad)))
        if not ok:
            self.problem("%s: bytes read %s differ from the local copy in %s" % (mode, what, bad))
        return d

    def run_mode(self, mode):
        reps = self.a.reps
        log("==== read mode %s" % mode)
        # cold, each rep next to its baseline
        for _ in range(reps):
            self.pass_rados_seq(mode)
            self.pass_cold(mode, parallel=False)
            self.pass_rados_par4(mode)
            self.pass_cold(mode, parallel=True)
        # prime one cache (verifying the bytes of a cold read), then warm passes
        cache = self.new_cache()
        m = Mount(self, cache, mode).start()
        self.verify(m, mode, "cold")
        st = m.settle(self.nchunks)
        if st.get("chunks_not_stored"):
            self.problem("%s: %d chunks not stored" % (mode, st["chunks_not_stored"]))
        self.verify(m, mode, "warm")
        for _ in range(reps):
            self.pass_local_seq(mode)
            self.timed_mount_pass(m, mode, "warm_seq", parallel=False)
            self.pass_local_par4(mode)
            self.timed_mount_pass(m, mode, "warm_par4", parallel=True)
        m.umount()
        # remount: the first read of every chunk verifies it
        for _ in range(reps):
            m = Mount(self, cache, mode).start()
            self.timed_mount_pass(m, mode, "remount_seq", parallel=False)
            m.umount()
        m = Mount(self, cache, mode).start()
        self.verify(m, mode, "remount")
        m.umount()
        self.drop_cache_dir(cache)

    def cleanup(self):
        for m in list(self.mounts):
            try:
                m.umount()
            except Exception as e:
                log("cleanup: %s" % e)
                m.kill()
        try:
            self.ceph.stop()
        except Exception as e:
            log("cleanup: ceph stop: %s" % e)

    # -- report
    def summary(self):
        groups = {}
        for s in self.samples:
            groups.setdefault((s["mode"], s["kind"]), []).append(s)

        def agg(mode, kind):
            g = groups.get((mode, kind))
            if not g:
                return None
            v = [s["mib_s"] for s in g]
            r = {"n": len(v), "median_mib_s": statistics.median(v), "min_mib_s": min(v),
                 "max_mib_s": max(v)}
            c = [s["daemon_cpu_s_per_gib"] for s in g if "daemon_cpu_s_per_gib" in s]
            if c:
                r["median_daemon_cpu_s_per_gib"] = statistics.median(c)
                r["min_daemon_cpu_s_per_gib"] = min(c)
                r["max_daemon_cpu_s_per_gib"] = max(c)
            for k in ("osd_cpu_s_per_gib", "reader_cpu_s_per_gib", "machine_busy_pct",
                      "steal_pct", "other_cpu_pct"):
                r["median_" + k] = statistics.median(s[k] for s in g)
            return r

        out = {}
        for mode in self.a.modes:
            kinds = {k: agg(mode, k) for (md, k) in groups if md == mode}
            ratios = {}
            for name, num, den, goal in (
                    ("a_warm_seq_vs_local_seq", "warm_seq", "local_seq", 0.9),
                    ("warm_par4_vs_local_par4", "warm_par4", "local_par4", None),
                    ("remount_seq_vs_local_seq", "remount_seq", "local_seq", None),
                    ("b_cold_seq_vs_rados_get_seq", "cold_seq", "rados_get_seq", 1.5),
                    ("cold_par4_vs_rados_get_par4", "cold_par4", "rados_get_par4", None),
                    ("cold_par4_vs_rados_get_seq", "cold_par4", "rados_get_seq", None)):
                if kinds.get(num) and kinds.get(den):
                    spread = max(k["max_mib_s"] / k["min_mib_s"]
                                 for k in (kinds[num], kinds[den]))
                    ratios[name] = {"ratio": kinds[num]["median_mib_s"] /
                                    kinds[den]["median_mib_s"], "goal": goal,
                                    "max_spread": spread, "noisy": spread > NOISY}
            out[mode] = {"passes": kinds, "ratios": ratios}
        return out

    def table(self, summ):
        lines = []
        w = lines.append
        w("fusefs benchmark: %d files x %d MiB, 1 MiB reads, page cache dropped before "
          "every pass; median (min..max) of %d" % (len(self.names), self.a.file_mib,
                                                   self.a.reps))
        w("")
        w("%-8s %-15s %-19s %-18s %5s %6s %5s %5s" % ("mode", "pass", "MiB/s",
                                                      "daemon CPU-s/GiB", "osd", "reader",
                                                      "busy", "other"))
        order = ["local_seq", "warm_seq", "remount_seq", "local_par4", "warm_par4",
                 "rados_get_seq", "cold_seq", "rados_get_par4", "cold_par4"]
        for mode in self.a.modes:
            for k in order:
                r = summ[mode]["passes"].get(k)
                if not r:
                    continue
                tp = "%4.0f (%4.0f..%4.0f)" % (r["median_mib_s"], r["min_mib_s"],
                                               r["max_mib_s"])
                cpu = ""
                if "median_daemon_cpu_s_per_gib" in r:
                    cpu = "%.2f (%.2f..%.2f)" % (r["median_daemon_cpu_s_per_gib"],
                                                 r["min_daemon_cpu_s_per_gib"],
                                                 r["max_daemon_cpu_s_per_gib"])
                w("%-8s %-15s %-19s %-18s %5.2f %6.2f %4.0f%% %4.0f%%" % (
                    mode, k, tp, cpu, r["median_osd_cpu_s_per_gib"],
                    r["median_reader_cpu_s_per_gib"], r["median_machine_busy_pct"],
                    r["median_other_cpu_pct"]))
            w("")
        w("(CPU columns: seconds per GiB read, medians; osd = ceph-osd, reader = the reading"
          " process(es)")
        w(" incl. rados CLI and kernel time in them; busy = both vCPUs, % of the pass;")
        w(" other = CPU used meanwhile by processes outside the benchmark, % of both vCPUs)")
        w("")
        w("%-8s %-30s %7s %6s" % ("mode", "ratio (of medians)", "value", "goal"))
        for mode in self.a.modes:
            for name, r in summ[mode]["ratios"].items():
                goal = ""
                if r["goal"] is not None:
                    goal = ">=%.1f %s" % (r["goal"], "met" if r["ratio"] >= r["goal"]
                                          else "NOT met")
                if r["noisy"]:
                    goal += "  (noisy: a max/min spread of %.1f)" % r["max_spread"]
                w("%-8s %-30s %7.2f %s" % (mode, name, r["ratio"], goal))
        w("")
        w("daemon CPU seconds by thread name, in the median-speed pass (top 5):")
        for mode in self.a.modes:
            for k in ("cold_seq", "warm_seq"):
                g = sorted((x for x in self.samples if x["mode"] == mode and x["kind"] == k),
                           key=lambda x: x["mib_s"])
                if g:
                    th = g[len(g) // 2].get("daemon_threads_cpu_s", {})
                    w("  %-8s %-9s %s" % (mode, k, ", ".join(
                        "%s %.2f" % kv for kv in list(th.items())[:5])))
        w("")
        if self.rados_overhead:
            w("rados CLI start+connect: %d x `rados stat` take %.2f s (median), part of every "
              "rados_get loop" % (self.rados_overhead["loop_of"],
                                  self.rados_overhead["median_s"]))
        w("byte checks: " + ", ".join("%s/%s %s" % (c["mode"], c["what"],
                                                    "ok" if c["ok"] else "MISMATCH")
                                      for c in self.checks))
        if self.problems:
            w("PROBLEMS:")
            for p in self.problems:
                w("  " + p)
        return "\n".join(lines)


def machine():
    def sh(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except Exception as e:
            return repr(e)
    return {"kernel": platform.release(), "nproc": os.cpu_count(),
            "cpu": sh(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"]),
            "mem": sh(["sh", "-c", "grep MemTotal /proc/meminfo"]),
            "lsblk": sh(["lsblk", "-o", "NAME,SIZE,ROTA,TYPE,MOUNTPOINTS"]),
            "df_work": sh(["df", "-hT", "/var/tmp"]),
            "ceph": sh(["ceph", "--version"]),
            "loadavg_start": open("/proc/loadavg").read().strip(),
            "git_head": sh(["git", "-C", ROOT, "rev-parse", "HEAD"]),
            "git_uncommitted_in_src": sh(["git", "-C", ROOT, "status", "--short", "--",
                                          "src", "include", "fusefs", "Makefile"])}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True, help="scratch dir (local copy, caches, cluster)")
    ap.add_argument("--out", default="/tmp/fusefs-bench-results.json")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default="direct,buffered,splice")
    ap.add_argument("--files", type=int, default=32)
    ap.add_argument("--file-mib", type=int, default=32)
    ap.add_argument("--mem-gib", type=int, default=6)
    a = ap.parse_args()
    a.modes = a.modes.split(",")
    if os.geteuid() != 0:
        sys.exit("bench: must run as root (drop_caches, read_ahead_kb)")

    b = Bench(a)
    info = machine()
    t_start = time.time()
    rc = 0
    try:
        b.setup()
        b.rados_cli_overhead()
        for mode in a.modes:
            b.run_mode(mode)
    except BaseException as e:
        b.problem("aborted: %r" % e)
        rc = 1
    finally:
        b.cleanup()
    info["loadavg_end"] = open("/proc/loadavg").read().strip()
    summ = b.summary()
    result = {"date": datetime.datetime.now().isoformat(timespec="seconds"),
              "duration_s": round(time.time() - t_start, 1),
              "config": {"files": a.files, "file_mib": a.file_mib, "reps": a.reps,
                         "read_size": BUF, "modes": a.modes, "pool": POOL, "prefix": PREFIX,
                         "fusefs_args": "--cache-size 4G (other options default)"},
              "machine": info, "summary": summ, "rados_cli_overhead": b.rados_overhead, "checks": b.checks, "problems": b.problems,
              "samples": b.samples}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(b.table(summ))
    print("\nrun took %.0f s; JSON results: %s" % (result["duration_s"], a.out))
    return rc


if __name__ == "__main__":
    sys.exit(main())
