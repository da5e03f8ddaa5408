#!/usr/bin/python3
"""fusefs S3 backend benchmark (issue 3 item 7; `make bench-s3`; docs/benchmarks-s3.md).

A throwaway Ceph cluster with radosgw on 127.0.0.1 (tests/ceph/cluster.sh; ports from
CEPH_TEST_MON_PORT/CEPH_TEST_RGW_PORT, default 6900/7600) holds --objects objects of
--object-mib MiB of random bytes (default 16 x 32 MiB = 512 MiB) in bucket s3bench, with
a local copy of the same files under WORK/local (same file system as the caches).

Passes, each preceded by `sync; echo 3 > /proc/sys/vm/drop_caches`, repeated --reps
times (default 3) rep by rep, so that each pass and its baseline are measured close in
time; the tables show the median (min..max):

  cold:  curl_seq     `curl --aws-sigv4 ... -o /dev/null` of each object, one after another
         s3cmd_seq    `s3cmd get` of each object to a local file, one after another
         cold_seq     fresh cache dir + fresh s3:// mount, read the files one after another
         curl_par4    4 curl loops in parallel, 4 objects each
         cold_par4    fresh cache + mount, 4 readers in parallel, 4 files each
  warm:  (one mount primed by a full read, every chunk stored)
         local_seq / warm_seq, local_par4 / warm_par4

Mount time (listing the bucket) is not part of a cold pass. Readers use 1 MiB read()
calls. Bytes are checked: every mount pass computes each file's CRC32 and compares it with
the local copy. Results: JSON (--out) and a table on stdout.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402
from benchlib import MIB, log  # noqa: E402

BUCKET = "s3bench"
EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


class Bench:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.abspath(a.bin)
        self.work = a.work
        self.cleanup = bl.Cleanup()
        self.samples = {}
        self.problems = []
        self.mnt = os.path.join(self.work, "mnt")
        self.endpoint = "http://127.0.0.1:%d" % a.rgw_port

    def problem(self, msg):
        log("PROBLEM: " + msg)
        self.problems.append(msg)

    def setup(self):
        a = self.a
        self.cleanup.add("rm work", lambda: None if a.keep else bl.rmtree(self.work))
        for d in ("local", "caches", "mnt", "dl"):
            os.makedirs(os.path.join(self.work, d), exist_ok=True)
        self.ceph = os.path.join(self.work, "ceph")
        mem = 3 * a.objects * a.object_mib * MIB + (1 << 30)
        self.creds, self.rgw_pid = bl.start_rgw_cluster(self.ceph, a.mon_port, a.rgw_port,
                                                        mem, self.cleanup)
        # credentials for curl and s3cmd in files, not on their command lines
        ak, sk = self.creds["AWS_ACCESS_KEY_ID"], self.creds["AWS_SECRET_ACCESS_KEY"]
        self.curlcfg = os.path.join(self.work, "curl.cfg")
        self.s3cfg = os.path.join(self.work, "s3cfg")
        with open(self.curlcfg, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            # curl 7.88 signs but does not send x-amz-content-sha256, which radosgw needs
            # for SigV4 (SignatureDoesNotMatch without it): the empty-payload hash
            f.write('user = "%s:%s"\naws-sigv4 = "aws:amz:us-east-1:s3"\nsilent\nfail\n'
                    'noproxy = "*"\nheader = "x-amz-content-sha256: %s"\n' % (ak, sk, EMPTY_SHA256))
        with open(self.s3cfg, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = 127.0.0.1:%d\n"
                    "host_bucket = 127.0.0.1:%d\nuse_https = False\nsignature_v2 = False\n"
                    "bucket_location = us-east-1\nprogress_meter = False\n"
                    % (ak, sk, a.rgw_port, a.rgw_port))
        self.names = ["obj-%03d.bin" % i for i in range(a.objects)]
        self.expect = {}
        for n in self.names:
            data = os.urandom(a.object_mib * MIB)
            with open(os.path.join(self.work, "local", n), "wb") as f:
                f.write(data)
            self.expect[n] = (len(data), zlib.crc32(data))
        c = bl.s3_client(self.endpoint, self.creds)
        c.create_bucket(Bucket=BUCKET)
        bl.upload_tree(c, BUCKET, os.path.join(self.work, "local"), self.names, threads=4)
        self.total = sum(s for s, _ in self.expect.values())
        log("uploaded %d x %d MiB" % (a.objects, a.object_mib))

    # ---- passes ---------------------------------------------------------------------------

    def mark(self):
        """Start of a timed pass: whole-machine CPU and radosgw CPU."""
        self._m = (bl.sys_busy(), bl.proc_cpu(self.rgw_pid))
        self._t0 = time.time()

    def record(self, kind, secs, nbytes, cpu=None, extra=None):
        s = {"secs": round(secs, 3), "bytes": nbytes, "MiBps": round(nbytes / secs / MIB, 1)}
        (b0, t0), r0 = self._m
        b1, t1 = bl.sys_busy()
        s["cpu_busy"] = round((b1 - b0) / max(1, t1 - t0), 3)   # of all CPUs
        s["rgw_cpu_s"] = round(bl.proc_cpu(self.rgw_pid) - r0, 2)
        s["other_work"] = self.contention.busy(self._t0, time.time())
        if cpu is not None:
            s["daemon_cpu_s"] = round(cpu, 2)
        if extra:
            s.update(extra)
        self.samples.setdefault(kind, []).append(s)
        log("  %-10s %6.2f s  %7.1f MiB/s  machine busy %3.0f%%  radosgw cpu %.2f s%s%s" % (
            kind, secs, s["MiBps"], 100 * s["cpu_busy"], s["rgw_cpu_s"],
            "" if cpu is None else "  fusefs cpu %.2f s" % cpu,
            "  (OTHER WORK RUNNING)" if s["other_work"] else ""))

    def groups(self, n):
        return [self.names[i::n] for i in range(n)]

    def curl_loop(self, names, env):
        for n in names:
            subprocess.run(["curl", "-K", self.curlcfg, "-o", "/dev/null",
                            "%s/%s/%s" % (self.endpoint, BUCKET, n)], check=True, env=env)

    def pass_curl(self, par):
        env = bl.clean_env()
        bl.drop_caches()
        self.mark()
        t0 = time.perf_counter()
        if par == 1:
            self.curl_loop(self.names, env)
        else:
            errs = []

            def run(g):
                try:
                    self.curl_loop(g, env)
                except Exception as e:
                    errs.append(e)
            ts = [threading.Thread(target=run, args=(g,)) for g in self.groups(par)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            if errs:
                raise RuntimeError("curl failed: %r" % errs[0])
        secs = time.perf_counter() - t0
        self.record("curl_seq" if par == 1 else "curl_par4", secs, self.total)

    def pass_s3cmd(self):
        env = bl.clean_env()
        dl = os.path.join(self.work, "dl")
        bl.drop_caches()
        self.mark()
        t0 = time.perf_counter()
        for n in self.names:
            subprocess.run(["s3cmd", "-c", self.s3cfg, "--no-progress", "--force", "get",
                            "s3://%s/%s" % (BUCKET, n), os.path.join(dl, n)], check=True,
                           env=env, stdout=subprocess.DEVNULL)
        secs = time.perf_counter() - t0
        n = sum(os.path.getsize(os.path.join(dl, x)) for x in self.names)
        for x in self.names:
            os.unlink(os.path.join(dl, x))
        self.record("s3cmd_seq", secs, n)

    def read_pass(self, root, par):
        """Read every file, one reader (in name order) or par readers over groups."""
        if par == 1:
            return bl.read_order(root, self.names, 1, self.expect)
        # par readers, each with its own fixed group (like curl_par4), via a shared queue of
        # the interleaved order: reader i takes names i, i+par, ... in practice
        return bl.read_order(root, [n for g in zip(*self.groups(par)) for n in g], par,
                             self.expect)

    def mount(self, cache):
        env = bl.clean_env()
        env.update(AWS_ACCESS_KEY_ID=self.creds["AWS_ACCESS_KEY_ID"],
                   AWS_SECRET_ACCESS_KEY=self.creds["AWS_SECRET_ACCESS_KEY"])
        cmd = [self.bin, "mount", "s3://%s" % BUCKET, self.mnt, "-f", "--endpoint",
               self.endpoint, "--cache-dir", cache, "--cache-size", "4G"] + self.a.fusefs_args.split()
        return bl.Daemon("fusefs", cmd, self.mnt, os.path.join(self.work, "fusefs.log"),
                         self.cleanup, env=env)

    def check(self, r, kind):
        if r["errors"] or r["bad"]:
            self.problem("%s: %d read errors, %d wrong files: %s" % (
                kind, len(r["errors"]), len(r["bad"]), (r["errors"] + r["bad"])[:3]))

    def pass_cold(self, par, rep):
        cache = os.path.join(self.work, "caches", "cold-%d-%d" % (par, rep))
        os.makedirs(cache)
        d = self.mount(cache)
        try:
            bl.drop_caches()
            c0 = bl.proc_cpu(d.pid)
            self.mark()
            r = self.read_pass(self.mnt, par)
            st = bl.fusefs_stats(self.mnt)
            kind = "cold_seq" if par == 1 else "cold_par4"
            self.check(r, kind)
            self.record(kind, r["secs"], r["bytes"], bl.proc_cpu(d.pid) - c0,
                        {"bytes_from_backend": st.get("bytes_from_backend"),
                         "stall_us": st.get("stall_us")})
        finally:
            d.stop()
            shutil.rmtree(cache, ignore_errors=True)

    def pass_local(self, par):
        bl.drop_caches()
        self.mark()
        r = self.read_pass(os.path.join(self.work, "local"), par)
        self.check(r, "local")
        self.record("local_seq" if par == 1 else "local_par4", r["secs"], r["bytes"])

    def pass_warm(self, d, par):
        bl.drop_caches()
        st0 = bl.fusefs_stats(self.mnt)
        c0 = bl.proc_cpu(d.pid)
        self.mark()
        r = self.read_pass(self.mnt, par)
        st = bl.fusefs_stats(self.mnt)
        kind = "warm_seq" if par == 1 else "warm_par4"
        self.check(r, kind)
        nb = st.get("bytes_from_backend", 0) - st0.get("bytes_from_backend", 0)
        if nb:
            self.problem("%s read %d bytes from the backend" % (kind, nb))
        self.record(kind, r["secs"], r["bytes"], bl.proc_cpu(d.pid) - c0,
                    {"bytes_from_backend": nb})

    def run(self):
        a = self.a
        for rep in range(a.reps):
            log("cold, rep %d/%d" % (rep + 1, a.reps))
            self.pass_curl(1)
            self.pass_s3cmd()
            self.pass_cold(1, rep)
            self.pass_curl(4)
            self.pass_cold(4, rep)
        cache = os.path.join(self.work, "caches", "warm")
        os.makedirs(cache)
        d = self.mount(cache)
        try:
            r = self.read_pass(self.mnt, 4)          # prime (untimed)
            self.check(r, "prime")
            nchunks = self.total // (4 * MIB)
            deadline = time.time() + 120
            while time.time() < deadline:
                st = bl.fusefs_stats(self.mnt)
                if st.get("chunks_stored", 0) + st.get("chunks_not_stored", 0) >= nchunks:
                    break
                time.sleep(0.1)
            else:
                self.problem("cache did not settle: %r" % st)
            for rep in range(a.reps):
                log("warm, rep %d/%d" % (rep + 1, a.reps))
                self.pass_local(1)
                self.pass_warm(d, 1)
                self.pass_local(4)
                self.pass_warm(d, 4)
        finally:
            d.stop()

    def summary(self):
        out = {}
        for k, v in self.samples.items():
            secs = [s["secs"] for s in v]
            mibps = [s["MiBps"] for s in v]
            out[k] = {"median_s": statistics.median(secs),
                      "median_MiBps": round(self.total / statistics.median(secs) / MIB, 1),
                      "min_MiBps": min(mibps), "max_MiBps": max(mibps), "n": len(v)}
            out[k]["machine_busy"] = statistics.median(s["cpu_busy"] for s in v)
            out[k]["contended"] = sum(1 for s in v if s["other_work"])
            out[k]["rgw_cpu_s"] = statistics.median(s["rgw_cpu_s"] for s in v)
            cpu = [s["daemon_cpu_s"] for s in v if "daemon_cpu_s" in s]
            if cpu:
                out[k]["daemon_cpu_s"] = statistics.median(cpu)

        def ratio(x, y):
            if x in out and y in out:
                return round(out[x]["median_MiBps"] / out[y]["median_MiBps"], 2)
        out["ratios"] = {"cold_seq/curl_seq": ratio("cold_seq", "curl_seq"),
                         "cold_seq/s3cmd_seq": ratio("cold_seq", "s3cmd_seq"),
                         "cold_par4/curl_par4": ratio("cold_par4", "curl_par4"),
                         "warm_seq/local_seq": ratio("warm_seq", "local_seq"),
                         "warm_par4/local_par4": ratio("warm_par4", "local_par4")}
        return out

    def table(self, summ):
        lines = ["%d objects x %d MiB = %d MiB, median of %d (min..max), page cache dropped "
                 "before each pass" % (self.a.objects, self.a.object_mib, self.total // MIB,
                                       self.a.reps), "",
                 "| pass | median s | MiB/s (min..max) | fusefs CPU s | radosgw CPU s "
                 "| machine busy (2 CPUs) |", "|---|---|---|---|---|---|"]
        for k in ("curl_seq", "s3cmd_seq", "cold_seq", "curl_par4", "cold_par4",
                  "local_seq", "warm_seq", "local_par4", "warm_par4"):
            if k in summ:
                s = summ[k]
                lines.append("| %s | %.2f | %.0f (%.0f..%.0f) | %s | %.2f | %.0f%% |" % (
                    k, s["median_s"], s["median_MiBps"], s["min_MiBps"], s["max_MiBps"],
                    "%.2f" % s["daemon_cpu_s"] if "daemon_cpu_s" in s else "-",
                    s["rgw_cpu_s"], 100 * s["machine_busy"]))
        lines.append("")
        for k, v in summ["ratios"].items():
            lines.append("%-22s %s" % (k, v))
        cont = {k: v["contended"] for k, v in summ.items() if isinstance(v, dict) and v.get("contended")}
        if cont:
            lines += ["", "passes measured while other heavy work ran: %r" % cont]
        if self.problems:
            lines += ["", "PROBLEMS:"] + ["  " + p for p in self.problems]
        return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(bl.ROOT, "build", "bin", "fusefs"))
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default="/tmp/fusefs-bench-s3.json")
    ap.add_argument("--objects", type=int, default=16)
    ap.add_argument("--object-mib", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--mon-port", type=int, default=int(os.environ.get("CEPH_TEST_MON_PORT", 6900)))
    ap.add_argument("--rgw-port", type=int, default=int(os.environ.get("CEPH_TEST_RGW_PORT", 7600)))
    ap.add_argument("--fusefs-args", default="")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("s3 bench: must run as root (drop_caches)")
    bl.require_bin("s3 bench", a.bin)
    for t in ("curl", "s3cmd"):
        if not shutil.which(t):
            sys.exit("s3 bench: %s is not installed (scripts/deps.sh)" % t)
    if a.work is None:
        a.work = tempfile.mkdtemp(prefix="fusefs-s3bench.", dir="/var/tmp")
    b = Bench(a)
    b.contention = bl.Contention(a.work)
    info = bl.machine()
    info["other_work_at_start"] = bl.other_heavy_work()
    t0 = time.time()
    rc = 0
    try:
        b.setup()
        b.run()
    except BaseException as e:
        b.problem("aborted: %r" % e)
        rc = 1
    finally:
        b.cleanup.run()
    info["loadavg_end"] = open("/proc/loadavg").read().strip()
    info["other_work_seen"] = b.contention.stop()
    summ = b.summary()
    out = {"duration_s": round(time.time() - t0, 1), "machine": info, "config": vars(a),
           "summary": summ, "samples": b.samples, "problems": b.problems}
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(b.table(summ))
    print("\nrun took %.0f s; JSON results: %s" % (out["duration_s"], a.out))
    return rc


if __name__ == "__main__":
    sys.exit(main())
