#!/usr/bin/python3
"""What one FUSE request costs on this kernel: /dev/fuse read()/writev() ("classic", the
only transport of libfuse 3.14, so of fusefs) against FUSE over io_uring ("uring").

Runs bench/fuse_transport (built by `make bench-transport`): the same tiny read-only file
system of --files files of 100 KiB, served either way by the same handler; no fusefs, no
cache.  Mounts of the two transports alternate in pairs (order swapped every pair); on each
mount, after a first pass that looks every file up:
  warm  - open/read/close of every file with --threads threads, nothing dropped: OPEN and
          RELEASE per file (the read comes from the page cache: FOPEN_KEEP_CACHE);
  drop  - the same after `echo 3 > drop_caches`: LOOKUP, OPEN, READ, RELEASE per file.
Per pass: client wall time per file and daemon CPU (utime + stime) per file; per pair the
ratio uring / classic.  The kernel's FUSE module parameter enable_uring is set to Y for
the run and put back as it was.  Needs root (mount, drop_caches, the module parameter).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import benchlib as bl

PARAM = "/sys/module/fuse/parameters/enable_uring"


def one_mount(probe, mnt, mode, files, threads, cleanup):
    """Mount with @mode, run the passes, unmount: {pass: {wall_us, cpu_us}} and the
    daemon's request counts."""
    proc = subprocess.Popen([probe, "serve", mnt, mode, str(files)],
                            stderr=subprocess.PIPE, text=True)
    cleanup.append(proc)
    bl.wait_mount(mnt, proc, timeout=20)
    out = {}
    try:
        for name in ("first", "warm", "drop"):
            if name == "drop":
                bl.drop_caches(3)
            r = subprocess.run([probe, "client", mnt, str(files), str(threads),
                                str(proc.pid)], capture_output=True, text=True,
                               timeout=300)
            if r.returncode != 0:
                raise SystemExit("transport: %s client pass %s failed: %s%s" %
                                 (mode, name, r.stdout, r.stderr))
            res = json.loads(r.stdout)
            out[name] = {"wall_us": res["wall_s"] * 1e6 / files,
                         "cpu_us": res["daemon_cpu_s"] * 1e6 / files}
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
        cleanup.remove(proc)
    counts = json.loads(err.strip().splitlines()[-1])
    # every request went the way the mode says (INIT and FORGETs aside)
    if mode == "uring" and counts["ring_requests"] < 3 * files:
        raise SystemExit("transport: the uring mount answered only %d requests on rings" %
                         counts["ring_requests"])
    if mode == "classic" and counts["ring_requests"]:
        raise SystemExit("transport: the classic mount used rings")
    out["requests"] = counts
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--probe", required=True, help="bench/fuse_transport binary")
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--pairs", type=int, default=6)
    ap.add_argument("--out", default="/tmp/fusefs-bench-transport.json")
    a = ap.parse_args()
    bl.require_bin("transport", a.probe)
    if os.geteuid():
        raise SystemExit("transport: needs root")
    if not os.path.exists(PARAM):
        raise SystemExit("transport: %s is missing: this kernel has no FUSE over io_uring"
                         % PARAM)
    old = open(PARAM).read().strip()
    mnt = "/tmp/fusefs-bench-transport"
    os.makedirs(mnt, exist_ok=True)
    cleanup = []
    rows = []
    t0 = time.time()
    try:
        with open(PARAM, "w") as f:
            f.write("Y\n")
        for pair in range(a.pairs):
            order = ("classic", "uring") if pair % 2 == 0 else ("uring", "classic")
            res = {}
            for mode in order:
                res[mode] = one_mount(a.probe, mnt, mode, a.files, a.threads, cleanup)
                bl.log("pair %d %s: %s" % (pair, mode, json.dumps(res[mode])))
            rows.append({"pair": pair, "order": order, **res})
    finally:
        for p in cleanup:
            subprocess.run(["umount", mnt], capture_output=True)
            p.kill()
        with open(PARAM, "w") as f:
            f.write(old + "\n")
    doc = {"machine": bl.machine(), "args": vars(a), "seconds": round(time.time() - t0),
           "enable_uring_before": old, "pairs": rows}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)

    def med(mode, ps, key):
        return statistics.median(r[mode][ps][key] for r in rows)

    def ratio(ps, key):
        rs = sorted(r["uring"][ps][key] / r["classic"][ps][key] for r in rows
                    if r["classic"][ps][key] > 0)
        return "%.2f (%.2f-%.2f)" % (statistics.median(rs), rs[0], rs[-1]) if rs else "-"

    print("| pass | requests per file | classic wall µs/file | uring wall µs/file | "
          "wall uring/classic, median (range) | classic daemon CPU µs/file | "
          "uring daemon CPU µs/file | CPU uring/classic, median (range) |")
    print("|---|---|---|---|---|---|---|---|")
    reqs = {"warm": "OPEN, RELEASE", "drop": "LOOKUP, OPEN, READ, RELEASE"}
    for ps in ("warm", "drop"):
        print("| %s | %s | %.1f | %.1f | %s | %.1f | %.1f | %s |" % (
            ps, reqs[ps], med("classic", ps, "wall_us"), med("uring", ps, "wall_us"),
            ratio(ps, "wall_us"), med("classic", ps, "cpu_us"), med("uring", ps, "cpu_us"),
            ratio(ps, "cpu_us")))
    print("%d pairs, %d files, %d client threads, %d s; JSON in %s" %
          (a.pairs, a.files, a.threads, doc["seconds"], a.out))


if __name__ == "__main__":
    sys.exit(main())
