#!/usr/bin/python3
"""Cached epochs against plain local disk, file:// source, no Ceph (issue 9 item 5;
`make bench-local`; docs/benchmarks-local.md).

Datasets, written once to WORK/data on the file system that also holds the cache
(WORK = a `mktemp -d` directory under --dir, default /var/tmp), random bytes:
  shards  --shards files of --shard-mib MiB (default 24 x 32 MiB = 768 MiB)
  small   --small files of --small-kib KiB (default 5,000 x 100 KiB, in 50 directories)
The CRC32 and length of every file are computed once, when it is written; every epoch
checks every byte it reads against them (an error or a wrong byte stops the run).

One mount `fusefs mount file://WORK/data WORK/mnt --cache-dir WORK/cache --cache-size 3G`
(or 1.25 x both sets, if larger: every file stays cached)
(chunk size and everything else default) serves both sets. The cache is warmed once: a
full read through a mount, then wait until `user.fusefs.cached` of every file equals its
size rounded up to 4 KiB; that daemon is then stopped.

Configurations (--configs), each on the same cache:
  auto     root daemon, --passthrough auto (complete files are read by the kernel)
  off      root daemon, --passthrough off (every read goes through the daemon)
  nonroot  the daemon as `nobody` without capabilities (so the fallback: daemon path), in
           a private mount namespace where /dev/fuse is a 0666 node (as udev makes it on a
           Debian host; here it is 0600); its readers run as nobody in that namespace too
           (nsenter + setpriv, one helper process per epoch), and so do their local-disk
           partners. The cache directory is chowned to nobody for it.
  ro       as auto, mounted `-o ro`: the kernel then keeps a file's attributes valid
           after passthrough reads (no GETATTR at the next open); control files are
           read-only (not in the default --configs)

Per configuration:
  remount  --remounts times per set: wait for an idle machine, mount on the cache (each
           chunk from an earlier run is verified before it is served: by the background
           verifier, which a passthrough open waits for, or at first read), drop 3, the
           first epoch at once; drop 3, warm epoch (same order); unmount. Ratio = warm
           secs / first secs (first-epoch throughput / warm). With --base-bin each of
           these is a pair: the same with the base binary first (e.g. main's build).
  pairs    on one more mount (one untimed epoch of each set first, so every chunk is
           verified), per drop mode (--drops: 3 = `echo 3`, 1 =
           `echo 1`, none = no drop; for none one untimed epoch of each side first) and
           per set, --pairs pairs A/B: fusefs epoch, then local-disk epoch (the same
           files read directly from WORK/data, same shuffled order, same threads), each
           preceded by the drop. Ratio = local secs / fusefs secs (throughput ratio).
  opcodes  per drop mode one more untimed fusefs epoch of the small set, with the
           kernel's fuse_request_send tracepoint counting FUSE requests by opcode for
           this connection (a tracefs instance of our own; skipped if tracefs is missing).
An epoch: --threads (4) readers take the next file of a shuffled order (new per pair)
from a shared queue and read it with 1 MiB read() calls (benchlib.read_order).

Per epoch: seconds, daemon CPU (utime+stime from /proc/PID/stat, before/after), the
daemon's stats deltas (reads, passthrough_opens, bytes_from_backend, verified_chunks,
checksum_failures, ...), reader CPU, machine busy share and CPU used by anything else.
Per mount: VmHWM/VmRSS of the daemon before it is stopped, the bdi read_ahead_kb, the
passthrough log line. Before each pair or single measured epoch the machine must be idle
enough (busy share over 0.5 s <= --idle-max); it waits for that, at most --idle-budget
seconds over the whole run, and records the load either way.

Results: JSON (--out) and a markdown report (--md; also printed); `local.py --render JSON`
prints the report of a saved run again.
"""

import argparse
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib as bl  # noqa: E402
from benchlib import MIB, log  # noqa: E402

GIB = 1 << 30
KIB = 1 << 10
THIS = os.path.abspath(__file__)
NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"]
CONFIGS = {
    "auto": "passthrough auto, root daemon",
    "off": "--passthrough off, root daemon (daemon path)",
    "nonroot": "non-root daemon, no CAP_SYS_ADMIN (daemon path)",
    "ro": "passthrough auto, root daemon, mounted -o ro (read-only control files)",
}
DROP_NAMES = {"3": "echo 3", "1": "echo 1", "none": "no drop"}
SETS = ("shards", "small")
SET_NAMES = {"shards": "32 MiB shards", "small": "100 KiB files"}


def blocks(n):
    return (n + 4095) // 4096 * 4096


def incomplete(mnt, files):
    """files [(rel, size)] whose cached bytes (user.fusefs.cached) are not the whole file"""
    out = []
    for rel, size in files:
        try:
            got = int(os.getxattr(os.path.join(mnt, rel), "user.fusefs.cached"))
        except OSError:
            got = -1
        if got < blocks(size):
            out.append(rel)
    return out


def helper(argv):
    """`local.py _helper ...`: run as nobody inside the non-root daemon's namespace"""
    cmd = argv[0]
    if cmd == "read":
        root, orderf, threads, expectf = argv[1:5]
        order = json.load(open(orderf))
        expect = {k: tuple(v) for k, v in json.load(open(expectf)).items()}
        r = bl.read_order(root, order, int(threads), expect)
        r["cpu"] = bl.proc_cpu(os.getpid())
        r["errors"], r["bad"] = r["errors"][:20], r["bad"][:20]
        print(json.dumps(r))
    elif cmd == "stats":
        print(json.dumps(bl.fusefs_stats(argv[1])))
    elif cmd == "incomplete":
        print(json.dumps(incomplete(argv[1], json.load(open(argv[2])))))
    else:
        raise SystemExit("unknown helper command " + cmd)


def drops_seen():
    """(drop_pagecache, drop_slab) from /proc/vmstat: how often anyone wrote to
    /proc/sys/vm/drop_caches (this machine is shared: other benchmarks drop caches too)"""
    v = {}
    with open("/proc/vmstat") as f:
        for line in f:
            k, _, n = line.partition(" ")
            if k in ("drop_pagecache", "drop_slab"):
                v[k] = int(n)
    return v.get("drop_pagecache", 0), v.get("drop_slab", 0)


def med(xs):
    return statistics.median(xs) if xs else None


def rng(xs, fmt="%.2f"):
    if not xs:
        return "–"
    return (fmt + " (" + fmt + "–" + fmt + ")") % (med(xs), min(xs), max(xs))


def f2(x, fmt="%.2f"):
    return "–" if x is None else fmt % x


# ---- tracing FUSE requests by opcode ------------------------------------------------------

class OpTrace:
    """Counts fuse_request_send events of one connection in a tracefs instance of our own
    (so nobody else's tracing is touched); tracefs is mounted under WORK if it is not at
    /sys/kernel/tracing."""

    def __init__(self, work, cleanup):
        self.ok, self.why = False, ""
        root = "/sys/kernel/tracing"
        if not os.path.isdir(os.path.join(root, "events")):
            root = os.path.join(work, "tracefs")
            os.makedirs(root, exist_ok=True)
            r = subprocess.run(["mount", "-t", "tracefs", "nodev", root], capture_output=True,
                               text=True)
            if r.returncode:
                self.why = "mount tracefs: " + r.stderr.strip()
                return
            cleanup.add("umount tracefs", lambda: subprocess.run(["umount", root],
                                                                 check=False))
        if not os.path.isdir(os.path.join(root, "events", "fuse", "fuse_request_send")):
            self.why = "no fuse:fuse_request_send tracepoint"
            return
        self.inst = os.path.join(root, "instances", "fusefs-bench-local-%d" % os.getpid())
        os.mkdir(self.inst)
        cleanup.add("rmdir trace instance", lambda: os.rmdir(self.inst))
        self.ev = os.path.join(self.inst, "events", "fuse", "fuse_request_send")
        self.put("buffer_size_kb", "16384")
        self.ok = True

    def put(self, name, val):
        with open(os.path.join(self.inst, name) if "/" not in name else name, "w") as f:
            f.write(val + "\n")

    def start(self, dev):
        self.put(os.path.join(self.ev, "filter"), "connection == %d" % dev)
        self.put("trace", "")
        self.put(os.path.join(self.ev, "enable"), "1")

    def stop(self):
        self.put(os.path.join(self.ev, "enable"), "0")
        counts, lost = {}, None
        with open(os.path.join(self.inst, "trace")) as f:
            for line in f:
                if line.startswith("#"):
                    m = re.search(r"entries-in-buffer/entries-written: (\d+)/(\d+)", line)
                    if m:
                        lost = int(m.group(2)) - int(m.group(1))
                    continue
                m = re.search(r"opcode \d+ \((\w+)\)", line)
                if m:
                    op = m.group(1).replace("FUSE_", "")
                    counts[op] = counts.get(op, 0) + 1
        self.put("trace", "")
        return counts, lost


# ---- mounts --------------------------------------------------------------------------------

class Mount:
    def __init__(self, b, cfg, tag, binary=None):
        self.b, self.cfg = b, cfg
        self.nonroot = cfg == "nonroot"
        a = b.a
        cmd = [binary or b.bin, "mount", "file://" + b.data, b.mnt, "-f", "--cache-dir", b.cache,
               "--cache-size", b.cache_size()] + (["--passthrough", "off"] if cfg == "off" else []) + \
            (["-o", "ro"] if cfg == "ro" else [])
        cmd += a.fusefs_args.split()
        if self.nonroot:
            b.own_cache("nobody")
            script = ("set -e; if [ \"$(stat -c %a /dev/fuse)\" != 666 ]; then "
                      "mount --bind \"$NODE\" /dev/fuse; fi; exec \"$@\"")
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                   "sh"] + NOBODY + cmd
        else:
            b.own_cache("root")
        self.cmd = cmd
        self.logpath = os.path.join(b.work, "fusefs-%s.log" % tag)
        self.d = bl.Daemon("fusefs-" + tag, cmd, b.mnt, self.logpath, b.cleanup,
                           env=dict(os.environ, NODE=b.fuse_node), own_ns=self.nonroot)
        self.pid = self.d.pid
        self.dev = self.find_dev()
        # fusefs raises read_ahead_kb 300 ms after mounting (root only)
        deadline = time.time() + (0 if self.nonroot else 5)
        while time.time() < deadline and self.read_ahead() != 4096:
            time.sleep(0.05)
        self.info = {"tag": tag, "pid": self.pid, "cmd": " ".join(cmd),
                     "read_ahead_kb": self.read_ahead(), "status": self.status(),
                     "passthrough_log": self.pt_log()}
        log("mounted %s pid %d, read_ahead_kb %s, %s" % (tag, self.pid, self.info[
            "read_ahead_kb"], self.info["passthrough_log"]))

    def find_dev(self):
        with open("/proc/%d/mountinfo" % self.pid) as f:
            for line in f:
                p = line.split()
                if p[4] == self.b.mnt:
                    ma, mi = map(int, p[2].split(":"))
                    self.bdi = "/sys/class/bdi/%d:%d/read_ahead_kb" % (ma, mi)
                    return (ma << 20) | mi      # the kernel's dev_t, as tracepoints see it
        raise RuntimeError("mount of pid %d not found" % self.pid)

    def read_ahead(self):
        try:
            return int(open(self.bdi).read())
        except OSError:
            return None

    def status(self):
        out = {}
        try:
            for line in open("/proc/%d/status" % self.pid):
                k, _, v = line.partition(":")
                if k in ("Uid", "CapEff", "VmHWM", "VmRSS", "Threads"):
                    out[k] = v.split()[0] if k != "Uid" else v.split()[1]
        except OSError:
            pass
        return out

    def pt_log(self):
        try:
            for line in open(self.logpath, errors="replace"):
                if "passthrough:" in line:
                    return line.strip().split("passthrough:", 1)[1].strip()
        except OSError:
            pass
        return None

    def helper(self, *args):
        cmd = ["nsenter", "--mount=/proc/%d/ns/mnt" % self.pid, "--"] + NOBODY + [
            "/usr/bin/python3", THIS, "_helper"] + [str(x) for x in args]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode:
            raise RuntimeError("helper %s: %s" % (args[0], r.stderr[-2000:]))
        return json.loads(r.stdout)

    def stats(self):
        return self.helper("stats", self.b.mnt) if self.nonroot else bl.fusefs_stats(self.b.mnt)

    def cpu(self):
        return bl.proc_cpu(self.pid)

    def stop(self):
        self.info["status_at_stop"] = self.status()
        self.info["passthrough_log"] = self.pt_log()
        self.d.stop()
        return self.info


# ---- the benchmark -------------------------------------------------------------------------

class Bench:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.bin)
        self.cleanup = bl.Cleanup()
        self.problems = []
        self.idle_spent = 0.0
        self.rnd = random.Random(a.seed)
        self.res = {"machine": bl.machine(), "args": vars(a), "problems": self.problems,
                    "configs": {}}

    def problem(self, msg, fatal=False):
        log("PROBLEM: " + msg)
        self.problems.append(msg)
        if fatal:
            raise RuntimeError(msg)

    # ---- setup ----------------------------------------------------------------------------

    def setup(self):
        a = self.a
        os.makedirs(a.dir, exist_ok=True)
        self.work = subprocess.run(
            ["mktemp", "-d", os.path.join(a.dir, "fusefs-bench-local.XXXXXX")],
            check=True, capture_output=True, text=True).stdout.strip()
        self.cleanup.add("rm work", lambda: None if a.keep else bl.rmtree(self.work))
        os.chmod(self.work, 0o755)     # traversable by nobody
        self.data = os.path.join(self.work, "data")
        self.cache = os.path.join(self.work, "cache")
        self.mnt = os.path.join(self.work, "mnt")
        for d in (self.cache, self.mnt):
            os.makedirs(d, exist_ok=True)
        os.chmod(self.cache, 0o700)
        self.fuse_node = os.path.join(self.work, "fuse")
        subprocess.run(["mknod", "-m", "0666", self.fuse_node, "c", "10", "229"], check=True)
        os.chmod(self.fuse_node, 0o666)
        self.res["work"] = self.work
        self.sets = {}
        t0 = time.time()
        self.make_set("shards", a.shards, a.shard_mib * MIB, 1)
        self.make_set("small", a.small, a.small_kib * KIB, 50)
        log("datasets written in %.1f s: %s" % (time.time() - t0, ", ".join(
            "%s %d files %.0f MiB" % (k, len(v["files"]), v["bytes"] / MIB)
            for k, v in self.sets.items())))
        self.trace = OpTrace(self.work, self.cleanup)
        if not self.trace.ok:
            self.problem("no opcode counts: " + self.trace.why)

    def make_set(self, name, n, size, ndirs):
        files, expect = [], {}
        for i in range(n):
            rel = (os.path.join(name, "d%02d" % (i % ndirs), "f%05d" % i) if ndirs > 1
                   else os.path.join(name, "s%03d" % i))
            p = os.path.join(self.data, rel)
            os.makedirs(os.path.dirname(p), mode=0o755, exist_ok=True)
            b = os.urandom(size)
            with open(p, "wb") as f:
                f.write(b)
            os.chmod(p, 0o644)
            files.append((rel, size))
            expect[rel] = (size, zlib.crc32(b))
        for dp, dns, _ in os.walk(self.data):
            os.chmod(dp, 0o755)
        ef = os.path.join(self.work, "expect-%s.json" % name)
        json.dump(expect, open(ef, "w"))
        lf = os.path.join(self.work, "files-%s.json" % name)
        json.dump(files, open(lf, "w"))
        self.sets[name] = {"files": files, "expect": expect, "expect_file": ef,
                           "files_file": lf, "bytes": n * size}
        self.res.setdefault("sets", {})[name] = {"files": n, "file_bytes": size,
                                                 "bytes": n * size}

    def own_cache(self, user):
        uid = 0 if user == "root" else 65534
        gid = 0 if user == "root" else 65534
        if os.stat(self.cache).st_uid != uid:
            for dp, dns, fns in os.walk(self.cache):
                for x in [dp] + [os.path.join(dp, f) for f in fns]:
                    os.lchown(x, uid, gid)
            os.lchown(self.mnt, uid, gid)

    # ---- machine load ---------------------------------------------------------------------

    def busy_share(self, secs=0.5):
        b0 = bl.sys_busy()
        time.sleep(secs)
        b1 = bl.sys_busy()
        return (b1[0] - b0[0]) / max(1, b1[1] - b0[1])

    def gate(self):
        """wait (within the run's idle budget) until the machine is idle enough"""
        t0 = time.time()
        share = self.busy_share()
        while share > self.a.idle_max and self.idle_spent + (time.time() - t0) < \
                self.a.idle_budget:
            time.sleep(1.0)
            share = self.busy_share()
        waited = time.time() - t0 - 0.5
        self.idle_spent += max(0.0, waited)
        other = bl.other_heavy_work()
        seen = self.res.setdefault("other_heavy_work_seen", [])
        for l in other:            # a sample: a test suite starts hundreds of processes
            if len(seen) < 30 and l not in seen:
                seen.append(l)
        return {"busy_before": round(share, 3), "waited": round(max(0.0, waited), 1),
                "loadavg": open("/proc/loadavg").read().split()[0],
                "other_heavy": len(other)}

    # ---- one epoch --------------------------------------------------------------------------

    def cache_size(self):
        """3 GiB, or room for both sets and a quarter more: nothing is evicted"""
        total = sum(st["bytes"] for st in self.sets.values())
        return "%dM" % max(3072, int(1.25 * total / MIB) + 1)

    def epoch(self, m, ds, order, drop, local=False, trace=False, cold=False):
        """one timed epoch of set ds in `order`: through mount m, or local (m then only
        tells how to read: as nobody in its namespace or in this process); cold: the
        cache may fetch from the source"""
        s = self.sets[ds]
        root = self.data if local else self.mnt
        st0 = None if local else m.stats()
        pre = drops_seen()
        last = getattr(self, "last_drops", pre)
        if drop != "none":
            bl.drop_caches(int(drop))
        via_helper = m is not None and m.nonroot
        if via_helper:
            orderf = os.path.join(self.work, "order.json")
            json.dump(order, open(orderf, "w"))
            os.chmod(orderf, 0o644)
        if trace:
            self.trace.start(m.dev)
        drops0 = drops_seen()
        busy0, self0, dcpu0 = bl.sys_busy(), bl.proc_cpu(os.getpid()), m.cpu() if m else 0
        ch0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        if via_helper:
            r = m.helper("read", root, orderf, self.a.threads, s["expect_file"])
            wall = time.perf_counter() - t0
        else:
            r = bl.read_order(root, order, self.a.threads, s["expect"])
            wall = time.perf_counter() - t0
        dcpu1, self1, busy1 = m.cpu() if m else 0, bl.proc_cpu(os.getpid()), bl.sys_busy()
        ch1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        drops1 = drops_seen()
        ops = lost = None
        if trace:
            time.sleep(0.3)        # RELEASEs are sent after close() returned
            ops, lost = self.trace.stop()
        if r["errors"] or r["bad"]:
            self.problem("%s epoch of %s (%s, drop %s): errors %r, wrong bytes %r" % (
                "local" if local else m.cfg, ds, m.cfg if m else "-", drop,
                r["errors"][:10], r["bad"][:10]), fatal=True)
        if r["bytes"] != s["bytes"]:
            self.problem("%s epoch read %d bytes, want %d" % (ds, r["bytes"], s["bytes"]),
                         fatal=True)
        reader = (self1 - self0) + (ch1.ru_utime + ch1.ru_stime - ch0.ru_utime - ch0.ru_stime)
        daemon = 0.0 if local else dcpu1 - dcpu0
        busy = (busy1[0] - busy0[0]) / os.sysconf("SC_CLK_TCK")
        out = {"secs": r["secs"], "wall": wall, "MiBps": r["bytes"] / r["secs"] / MIB,
               "reader_cpu": reader, "busy_share": (busy1[0] - busy0[0]) / max(
                   1, busy1[1] - busy0[1]), "other_cpu": busy - reader - daemon,
               "other_share": (busy - reader - daemon) / (wall * os.cpu_count()),
               "foreign_drops": [drops1[0] - drops0[0], drops1[1] - drops0[1]],
               "foreign_drops_before": [pre[0] - last[0], pre[1] - last[1]]}
        self.last_drops = drops1
        # a drop by someone else matters during any epoch, and before one without a drop
        out["disturbed"] = bool(sum(out["foreign_drops"]) or (
            drop == "none" and sum(out["foreign_drops_before"])))
        if out["disturbed"]:
            log("another process dropped caches: during the epoch %r, before it %r" % (
                out["foreign_drops"], out["foreign_drops_before"]))
        if not local:
            st1 = m.stats()
            out["daemon_cpu"] = daemon
            out["daemon_s_per_gib"] = daemon / (r["bytes"] / GIB)
            out["daemon_us_per_file"] = daemon / len(order) * 1e6
            out["stats"] = {k: st1.get(k, 0) - st0.get(k, 0) for k in (
                "reads", "hits", "misses", "bytes_from_cache", "bytes_from_backend",
                "verified_chunks", "verifier_chunks", "verify_reads", "verify_waits",
                "checksum_failures", "read_errors", "passthrough_opens",
                "passthrough_bytes", "revalidations", "listings")}
            d = out["stats"]
            if d["checksum_failures"] or d["read_errors"] or (d["bytes_from_backend"] and
                                                              not cold):
                self.problem("%s %s drop %s: %r" % (m.cfg, ds, drop, d))
        if ops is not None:
            out["opcodes"], out["trace_lost"] = ops, lost
        return out

    # ---- one configuration ----------------------------------------------------------------

    def run_config(self, cfg):
        a = self.a
        c = self.res["configs"].setdefault(cfg, {"name": CONFIGS[cfg], "mounts": [],
                                                 "remount": {}, "pairs": {}, "opcodes": {}})
        log("==== %s: %s" % (cfg, CONFIGS[cfg]))
        m = None
        # Each measurement mounts for one set only and starts its first epoch right
        # after mounting (the gate for an idle machine comes before the mount), so
        # nothing verified the cache before that epoch began. With --base-bin each
        # one is a pair, the base binary's mount first in even remounts and ours
        # first in odd ones: the mount that follows one of the same set verifies
        # fewer chunks of the other set during its first epoch (its hottest files
        # are the set it reads), which favoured whichever binary always went second.
        sides = [("remount_base", a.base_bin), ("remount", None)] if a.base_bin else [
            ("remount", None)]
        for r in range(a.remounts):
            for ds in SETS:
                order = self.order(ds)
                for key, binary in (sides if r % 2 == 0 else sides[::-1]):
                    if m is not None:
                        c["mounts"].append(m.stop())
                        m = None
                    g = self.gate()
                    tag = "%s-%d-%s%s" % (cfg, r, ds, "-base" if binary else "")
                    m = Mount(self, cfg, tag, binary)
                    first = self.epoch(m, ds, order, "3")
                    warm = self.epoch(m, ds, order, "3")
                    p = {"gate": g, "first": first, "warm": warm,
                         "ratio": warm["secs"] / first["secs"]}
                    c.setdefault(key, {}).setdefault(ds, []).append(p)
                    log("%s remount %d %s%s: first %.2f s (%.0f MiB/s, %d verified, "
                        "%.2f s/GiB), warm %.2f s (%.0f MiB/s) -> %.2f  [busy %.0f%%]" % (
                            cfg, r, ds, " (base)" if binary else "", first["secs"],
                            first["MiBps"], first["stats"]["verified_chunks"],
                            first["daemon_s_per_gib"], warm["secs"], warm["MiBps"],
                            p["ratio"], 100 * g["busy_before"]))
        if m is None or a.base_bin:
            if m is not None:
                c["mounts"].append(m.stop())
            m = Mount(self, cfg, "%s-pairs" % cfg)
            for ds in SETS:         # untimed: every chunk verified before the pairs
                self.epoch(m, ds, self.order(ds), "3")
        for drop in a.drops:
            for ds in SETS:
                if drop == "none":      # both sides start from what they left in memory
                    o = self.order(ds)
                    self.epoch(m, ds, o, drop)
                    self.epoch(m, ds, o, drop, local=True)
                for i in range(a.pairs):
                    order = self.order(ds)
                    g = self.gate()
                    fz = self.epoch(m, ds, order, drop)
                    lo = self.epoch(m, ds, order, drop, local=True)
                    p = {"gate": g, "fusefs": fz, "local": lo,
                         "ratio": lo["secs"] / fz["secs"]}
                    c["pairs"].setdefault(drop, {}).setdefault(ds, []).append(p)
                    log("%s drop %s %s pair %d: fusefs %.2f s (%.0f MiB/s, %.3f s/GiB, "
                        "%d reads, %d pt opens), local %.2f s (%.0f MiB/s) -> %.3f "
                        "[busy %.0f%%, other %.2f s]" % (
                            cfg, drop, ds, i, fz["secs"], fz["MiBps"],
                            fz["daemon_s_per_gib"], fz["stats"]["reads"],
                            fz["stats"]["passthrough_opens"], lo["secs"], lo["MiBps"],
                            p["ratio"], 100 * g["busy_before"], fz["other_cpu"]))
            if self.trace.ok:
                t = self.epoch(m, "small", self.order("small"), drop, trace=True)
                c["opcodes"][drop] = t
                log("%s drop %s small: opcodes %r (lost %r)" % (
                    cfg, drop, t["opcodes"], t["trace_lost"]))
        c["mounts"].append(m.stop())
        self.save()

    def order(self, ds):
        o = [rel for rel, _ in self.sets[ds]["files"]]
        self.rnd.shuffle(o)
        return o

    def warm(self):
        log("==== warming the cache")
        m = Mount(self, "auto", "warm")
        res = {}
        for ds in SETS:
            drop = "3"
            res[ds] = self.epoch(m, ds, self.order(ds), drop, cold=True)
            log("cold read %s: %.2f s (%.0f MiB/s)" % (ds, res[ds]["secs"], res[ds]["MiBps"]))
        t0 = time.time()
        while True:
            left = sum(len(incomplete(self.mnt, self.sets[ds]["files"])) for ds in SETS)
            if not left:
                break
            if time.time() - t0 > 600:
                self.problem("%d files still not completely cached" % left, fatal=True)
            time.sleep(1)
        time.sleep(1)              # the index is committed every 250 ms
        res["complete_after_s"] = time.time() - t0
        res["mount"] = m.stop()
        self.res["warm"] = res

    def save(self):
        with open(self.a.out, "w") as f:
            json.dump(self.res, f, indent=1)

    def run(self):
        t0 = time.time()
        try:
            self.setup()
            self.warm()
            for cfg in self.a.configs:
                self.run_config(cfg)
            self.res["total_s"] = time.time() - t0
            self.res["idle_wait_s"] = self.idle_spent
            self.res["loadavg_end"] = open("/proc/loadavg").read().strip()
        except BaseException as e:
            self.res["failed"] = repr(e)
            raise
        finally:
            self.save()
            self.cleanup.run()
        md = render(self.res)
        if self.a.md:
            open(self.a.md, "w").write(md)
        print(md)
        log("total %.0f s, waited %.0f s for an idle machine; JSON %s" % (
            self.res["total_s"], self.idle_spent, self.a.out))


# ---- report -------------------------------------------------------------------------------

def summary(res):
    """per (config, drop, set) and per (config, set) numbers the report and goals use"""
    out = {"pairs": {}, "remount": {}}
    for cfg, c in res["configs"].items():
        for drop, bys in c["pairs"].items():
            for ds, ps in bys.items():
                n = res["sets"][ds]["files"]
                fz = [p["fusefs"] for p in ps]
                clean = [p["ratio"] for p in ps if not (p["fusefs"].get("disturbed") or
                                                        p["local"].get("disturbed"))]
                out["pairs"][(cfg, drop, ds)] = {
                    "ratios": [p["ratio"] for p in ps], "clean": clean,
                    "fz_mibps": med([e["MiBps"] for e in fz]),
                    "lo_mibps": med([p["local"]["MiBps"] for p in ps]),
                    "s_per_gib": [e["daemon_s_per_gib"] for e in fz],
                    "us_per_file": [e["daemon_us_per_file"] for e in fz],
                    "reads_per_file": sum(e["stats"]["reads"] for e in fz) / (n * len(fz)),
                    "pt_per_file": sum(e["stats"]["passthrough_opens"] for e in fz) / (
                        n * len(fz)),
                    "other": med([e["other_share"] for e in fz + [p["local"] for p in ps]]),
                    "before": med([p["gate"]["busy_before"] for p in ps]),
                }
        for key, ds, ps in [(k, ds, ps) for k in ("remount", "remount_base")
                            for ds, ps in c.get(k, {}).items()]:
            out["remount"][(cfg + (" (base)" if key == "remount_base" else ""), ds)] = {
                "ratios": [p["ratio"] for p in ps],
                "disturbed": sum(1 for p in ps if p["first"].get("disturbed") or
                                 p["warm"].get("disturbed")),
                "first_mibps": med([p["first"]["MiBps"] for p in ps]),
                "warm_mibps": med([p["warm"]["MiBps"] for p in ps]),
                "first_s_per_gib": [p["first"]["daemon_s_per_gib"] for p in ps],
                "warm_s_per_gib": [p["warm"]["daemon_s_per_gib"] for p in ps],
                "verified": med([p["first"]["stats"]["verified_chunks"] for p in ps]),
                "pt_first": med([p["first"]["stats"]["passthrough_opens"] for p in ps]),
            }
    return out


def hwm_mib(mounts):
    v = []
    for mi in mounts:
        st = mi.get("status_at_stop") or {}
        if "VmHWM" in st:
            v.append(int(st["VmHWM"]) / 1024)
    return v


def goals(res, s):
    rows = []

    def pair(cfg, drop, ds):
        return s["pairs"].get((cfg, drop, ds))

    drops = res["args"]["drops"]
    for ds, goal in (("shards", 0.95), ("small", 0.85)):
        for cfg, drop in ((c, d) for c in ("auto", "ro") for d in drops):
            p = pair(cfg, drop, ds)
            if p:
                m = med(p["ratios"])
                rows.append(("%s / local disk, passthrough%s, %s" % (
                                 SET_NAMES[ds], " (-o ro)" if cfg == "ro" else "",
                                 DROP_NAMES[drop]),
                             ">= %.2f" % goal, "%.2f (%.2f–%.2f)" % (
                                 m, min(p["ratios"]), max(p["ratios"])),
                             "met" if m >= goal else "not met"))
    for cfgs, goal, what in ((("auto", "ro"), 0.05, "passthrough"),
                             (("off", "nonroot"), 0.3, "daemon path")):
        for cfg in cfgs:
            for ds in SETS:
                v = [x for drop in drops for x in (pair(cfg, drop, ds) or {}).get(
                    "s_per_gib", [])]
                if not v:
                    continue
                per = ", ".join("%s %.3f" % (DROP_NAMES[d], med(pair(cfg, d, ds)["s_per_gib"]))
                                for d in drops if pair(cfg, d, ds))
                worst = max(med(pair(cfg, d, ds)["s_per_gib"]) for d in drops
                            if pair(cfg, d, ds))
                rows.append(("daemon CPU, %s, %s (%s)" % (what, SET_NAMES[ds], cfg),
                             "<= %.2f s/GiB" % goal, per,
                             "met" if worst <= goal else "not met"))
    for cfg in res["configs"]:
        for ds in SETS:
            r = s["remount"].get((cfg, ds))
            if r:
                m = med(r["ratios"])
                rows.append(("first epoch after remount / warm, %s, %s" % (
                    SET_NAMES[ds], cfg), ">= 0.90", "%.2f (%.2f–%.2f)" % (
                    m, min(r["ratios"]), max(r["ratios"])), "met" if m >= 0.9 else "not met"))
    return rows


def render(res):
    s = summary(res)
    L = []
    a = res["args"]
    mc = res["machine"]
    L.append("## Results (%s, fusefs %s)\n" % (mc["date"], mc["git_head"]))
    L.append("Sets: %s. %d pairs per row, %d remounts per configuration, %d reader "
             "threads; total %.0f s, %.0f s of it waiting for an idle machine.\n" % (
                 ", ".join("%s %d x %s" % (k, v["files"], "%d MiB" % (v["file_bytes"] // MIB)
                                           if v["file_bytes"] >= MIB else "%d KiB" % (
                                               v["file_bytes"] // KIB))
                           for k, v in res["sets"].items()),
                 a["pairs"], a["remounts"], a["threads"], res.get("total_s", 0),
                 res.get("idle_wait_s", 0)))
    L.append("### Goals\n")
    L.append("Medians over all pairs (or remounts) of this run.\n")
    L.append("| Goal | Target | Measured: median (min–max) | |")
    L.append("|---|---|---|---|")
    for g in goals(res, s):
        L.append("| %s | %s | %s | %s |" % g)
    L.append("")
    L.append("### Warm epochs against local disk (pairs A/B)\n")
    L.append("Ratio = local-disk secs / fusefs secs of the same pair (> 1: fusefs "
             "faster). MiB/s and machine busy share are medians; daemon CPU is median "
             "(min–max) over the fusefs epochs; READs and passthrough opens per file are "
             "the daemon's `reads` and `passthrough_opens` counters over those epochs "
             "divided by files read. Busy before: machine busy share in the 0.5 s before "
             "the pair; other CPU: share of both CPUs used by other processes during the "
             "epochs. Undisturbed: the pairs in which no other process wrote to "
             "/proc/sys/vm/drop_caches during either epoch (nor, for no drop, between "
             "epochs), median (n).\n")
    L.append("| Config | Set | Drop | Ratio local/fusefs | fusefs MiB/s | local MiB/s | "
             "Daemon CPU s/GiB | Daemon CPU µs/file | READs/file | PT opens/file | "
             "Busy before | Other CPU | Undisturbed |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cfg in res["configs"]:
        for ds in SETS:
            for drop in a["drops"]:
                p = s["pairs"].get((cfg, drop, ds))
                if not p:
                    continue
                L.append("| %s | %s | %s | %s | %.0f | %.0f | %s | %s | %.2f | %.2f | "
                         "%.0f%% | %.0f%% | %s |" % (
                             cfg, SET_NAMES[ds], DROP_NAMES[drop], rng(p["ratios"]),
                             p["fz_mibps"], p["lo_mibps"], rng(p["s_per_gib"], "%.3f"),
                             rng(p["us_per_file"], "%.0f") if ds == "small" else "–",
                             p["reads_per_file"],
                             p["pt_per_file"], 100 * p["before"], 100 * p["other"],
                             "%.2f (%d)" % (med(p["clean"]), len(p["clean"])) if p["clean"]
                             else "– (0)"))
    L.append("")
    L.append("Per-pair ratios (local secs / fusefs secs) in the order measured; * = a pair "
             "disturbed by another process dropping caches.\n")
    L.append("| Config | Set | Drop | " + " | ".join("pair %d" % (i + 1) for i in range(
        a["pairs"])) + " |")
    L.append("|---|---|---|" + "---|" * a["pairs"])
    for cfg, c in res["configs"].items():
        for ds in SETS:
            for drop in a["drops"]:
                ps = c["pairs"].get(drop, {}).get(ds, [])
                if ps:
                    L.append("| %s | %s | %s | " % (cfg, SET_NAMES[ds], DROP_NAMES[drop]) +
                             " | ".join("%.2f%s" % (p["ratio"], "*" if (
                                 p["fusefs"].get("disturbed") or p["local"].get(
                                     "disturbed")) else "") for p in ps) + " |")
    L.append("")
    L.append("### First epoch after a remount\n")
    L.append("Each remount: unmount, mount on the same cache, `echo 3`, first epoch; "
             "`echo 3`, warm epoch with the same order. Ratio = warm secs / first secs.\n")
    L.append("| Config | Set | Ratio first/warm | first MiB/s | warm MiB/s | "
             "Daemon CPU s/GiB, first | Daemon CPU s/GiB, warm | Chunks verified | "
             "PT opens, first | Disturbed |")
    L.append("|---|---|---|---|---|---|---|---|---|---|")
    for cfg in [x + y for x in res["configs"] for y in ("", " (base)")]:
        for ds in SETS:
            r = s["remount"].get((cfg, ds))
            if r:
                L.append("| %s | %s | %s | %.0f | %.0f | %s | %s | %d | %d | %d/%d |" % (
                    cfg, SET_NAMES[ds], rng(r["ratios"]), r["first_mibps"],
                    r["warm_mibps"], rng(r["first_s_per_gib"]),
                    rng(r["warm_s_per_gib"], "%.3f"), r["verified"], r["pt_first"],
                    r["disturbed"], len(r["ratios"])))
    L.append("")
    ops_seen = []
    for c in res["configs"].values():
        for t in c["opcodes"].values():
            for op in t["opcodes"]:
                if op not in ops_seen:
                    ops_seen.append(op)
    if ops_seen:
        pref = ["LOOKUP", "OPEN", "READ", "FLUSH", "RELEASE", "GETATTR", "FORGET",
                "BATCH_FORGET"]
        ops = [o for o in pref if o in ops_seen] + sorted(o for o in ops_seen
                                                          if o not in pref)
        n = res["sets"]["small"]["files"]
        L.append("### FUSE requests per 100 KiB file, by opcode\n")
        L.append("One extra epoch of the small set per configuration and drop mode, counted "
                 "by the kernel's `fuse:fuse_request_send` tracepoint for this connection, "
                 "divided by %d files.\n" % n)
        L.append("| Config | Drop | " + " | ".join(ops) + " | Total |")
        L.append("|---|---|" + "---|" * (len(ops) + 1))
        for cfg, c in res["configs"].items():
            for drop in a["drops"]:
                t = c["opcodes"].get(drop)
                if not t:
                    continue
                cnt = t["opcodes"]
                L.append("| %s | %s | " % (cfg, DROP_NAMES[drop]) + " | ".join(
                    "%.2f" % (cnt.get(o, 0) / n) for o in ops) + " | %.2f |" % (
                        sum(cnt.values()) / n) + (" (%d lost)" % t["trace_lost"]
                                                  if t.get("trace_lost") else "") + (
                    " (caches dropped by another process)" if t.get("disturbed") else ""))
        L.append("")
    L.append("### Daemon\n")
    L.append("| Config | Peak RSS (VmHWM) per mount, MiB | read_ahead_kb | uid | CapEff | "
             "passthrough log line |")
    L.append("|---|---|---|---|---|---|")
    for cfg, c in res["configs"].items():
        mi = c["mounts"][-1] if c["mounts"] else {}
        L.append("| %s | %s | %s | %s | %s | %s |" % (
            cfg, " / ".join("%.0f" % x for x in hwm_mib(c["mounts"])),
            mi.get("read_ahead_kb"), mi.get("status", {}).get("Uid"),
            mi.get("status", {}).get("CapEff"), mi.get("passthrough_log")))
    w = res.get("warm", {})
    if "mount" in w:
        L.append("| (warming mount) | %s | | | | |" % " / ".join(
            "%.0f" % x for x in hwm_mib([w["mount"]])))
    L.append("")
    if res.get("problems"):
        L.append("Problems: " + "; ".join(res["problems"]) + "\n")
    return "\n".join(L)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_helper":
        helper(sys.argv[2:])
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--render":     # the report of a saved run
        print(render(json.load(open(sys.argv[2]))))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(bl.ROOT, "build", "bin", "fusefs"))
    ap.add_argument("--dir", default=os.environ.get("FUSEFS_BENCH_DIR", "/var/tmp"),
                    help="parent of the scratch directory (data and cache live there)")
    ap.add_argument("--out", default="/tmp/fusefs-bench-local.json")
    ap.add_argument("--md", default="/tmp/fusefs-bench-local.md")
    ap.add_argument("--shards", type=int, default=24)
    ap.add_argument("--shard-mib", type=int, default=32)
    ap.add_argument("--small", type=int, default=5000)
    ap.add_argument("--small-kib", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--remounts", type=int, default=3)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--configs", default="auto,off,nonroot")
    ap.add_argument("--drops", default="3,1,none")
    ap.add_argument("--idle-max", type=float, default=0.25,
                    help="busy share of all CPUs over 0.5 s below which a pass may start")
    ap.add_argument("--idle-budget", type=float, default=180,
                    help="seconds the whole run may wait for an idle machine")
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--fusefs-args", default="", help="extra fusefs mount options")
    ap.add_argument("--base-bin", default="",
                    help="another fusefs binary (e.g. main's): each remount measurement is "
                    "then a pair, this binary's mount first, --bin's second")
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    a = ap.parse_args()
    a.configs = [c for c in a.configs.split(",") if c]
    a.drops = [d for d in a.drops.split(",") if d]
    for c in a.configs:
        if c not in CONFIGS:
            ap.error("unknown configuration " + c)
    for d in a.drops:
        if d not in DROP_NAMES:
            ap.error("unknown drop mode " + d)
    if os.geteuid() != 0:
        sys.exit("bench-local: must run as root (drop_caches, nobody's namespace, tracefs)")
    bl.require_bin("bench-local", a.bin)
    Bench(a).run()


if __name__ == "__main__":
    main()
