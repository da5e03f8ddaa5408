#!/usr/bin/env python3
"""Soak: mixed epochs on a file:// source for a while, sampling the daemon's
RSS and open file descriptors, to show they stay flat (issue 13, item 7).

Each epoch: publish the epoch's shuffled order as a list (two ranks, rank1
republished mid-epoch), pin and unpin a few files, evict a few, and read every
file of the order with its bytes checked; the cache holds about a third of the
data, so the policy evicts all the time.  A sampler thread reads
/proc/PID/status (VmRSS) and /proc/PID/fd every --sample seconds.

Flat means, after a warm-up (--warmup seconds, default 120: the cache fills,
threads and files open): the mean RSS of the last third of the samples is at
most 10 % (plus 4 MiB) above the mean of the first third, and the mean number
of open fds at most 10 % (plus 2) above it.  Exit status 0 if flat and every
byte was right, 1 otherwise; --out writes the samples, --judge FILE judges
the samples of an earlier --out again.

    tests/soak/soak.py --bin build/bin/fusefs --minutes 20 --out /tmp/soak.json
"""

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

MiB = 1 << 20


def sample(pid):
    with open(f"/proc/{pid}/status") as f:
        rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def verdict(samples, warmup):
    """flatness of [(t, rss, fds)] after @warmup seconds"""
    rest = [x for x in samples if x[0] >= warmup] or samples
    third = max(1, len(rest) // 3)
    first, last = rest[:third], rest[-third:]

    def mean(part, i):
        return sum(x[i] for x in part) / len(part)

    rss0, rss1, fd0, fd1 = mean(first, 1), mean(last, 1), mean(first, 2), mean(last, 2)
    return {"warmup_s": warmup, "samples": len(samples),
            "rss_first_third_mib": round(rss0 / MiB, 1), "rss_last_third_mib": round(rss1 / MiB, 1),
            "rss_max_mib": round(max(x[1] for x in samples) / MiB, 1),
            "fds_first_third_mean": round(fd0, 1), "fds_last_third_mean": round(fd1, 1),
            "fds_max": max(x[2] for x in samples),
            "flat_rss": rss1 <= rss0 * 1.10 + 4 * MiB, "flat_fds": fd1 <= fd0 * 1.10 + 2}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "..", "build", "bin", "fusefs"))
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--sample", type=float, default=5)
    ap.add_argument("--files", type=int, default=160)
    ap.add_argument("--dir", default="/tmp/fusefs-soak")
    ap.add_argument("--out")
    ap.add_argument("--warmup", type=float, default=120)
    ap.add_argument("--judge", metavar="FILE")
    a = ap.parse_args()
    if a.judge:
        with open(a.judge) as f:
            v = verdict(json.load(f)["samples"], a.warmup)
        print(json.dumps(v, indent=1))
        return 0 if v["flat_rss"] and v["flat_fds"] else 1
    os.environ["FUSEFS_BIN"] = os.path.abspath(a.bin)
    from mountlib import Mount  # noqa: E402 (reads FUSEFS_BIN)

    shutil.rmtree(a.dir, ignore_errors=True)
    src, mnt, cache = (os.path.join(a.dir, d) for d in ("src", "mnt", "cache"))
    for d in (src, mnt):
        os.makedirs(d)
    rng = random.Random(1)
    want = {}
    for i in range(a.files):            # 1 MiB files, and some of 3.5 MiB
        n = f"d{i % 8}/f{i:04d}"
        data = rng.randbytes(MiB if i % 10 else 3 * MiB + MiB // 2)
        os.makedirs(os.path.dirname(os.path.join(src, n)), exist_ok=True)
        with open(os.path.join(src, n), "wb") as f:
            f.write(data)
        want[n] = hashlib.sha256(data).digest()
    total = sum(os.path.getsize(os.path.join(src, n)) for n in want)
    m = Mount(f"file://{src}", mnt, cache, os.path.join(a.dir, "fusefs.log"),
              ["--chunk-size", "1M", "--cache-size", str(total // 3), "--readahead", "2"])
    m.start()
    pid = m.proc.pid
    samples, wrong, errors = [], [], []
    stop = threading.Event()
    t0 = time.monotonic()

    def sampler():
        while not stop.is_set():
            rss, fds = sample(pid)
            samples.append((round(time.monotonic() - t0, 1), rss, fds))
            stop.wait(a.sample)

    def ctl(what, names):
        try:
            with open(os.path.join(mnt, ".fusefs", what), "w") as f:
                f.write("".join(n + "\n" for n in names))
        except OSError as e:
            if e.errno != 16:           # EBUSY: an open file is not evicted
                errors.append(f"{what}: {e}")

    def publish(name, order):
        lst = os.path.join(a.dir, name + ".list")
        with open(lst, "w") as f:
            f.write("".join(n + "\n" for n in order))
        r = subprocess.run([a.bin, "prefetch", mnt, "--list", lst, "--name", name],
                           capture_output=True, text=True, timeout=60)
        if r.returncode:
            errors.append(f"prefetch {name}: {r.stderr.strip()}")

    th = threading.Thread(target=sampler, daemon=True)
    th.start()
    names = sorted(want)
    epoch = reads = 0
    try:
        while time.monotonic() - t0 < a.minutes * 60:
            order = names[:]
            random.Random(epoch).shuffle(order)
            half = len(order) // 2
            publish("rank0", order[:half])
            publish("rank1", order[half:])
            pins = random.Random(epoch + 1000).sample(names, 3)
            ctl("pin", pins)
            for k, n in enumerate(order):
                if k == half // 2:
                    publish("rank1", order[half:])      # a republish mid-epoch
                if k % 25 == 0:
                    ctl("evict", random.Random(epoch * 1000 + k).sample(names, 4))
                with open(os.path.join(mnt, n), "rb") as f:
                    os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                    if hashlib.sha256(f.read()).digest() != want[n]:
                        wrong.append((epoch, n))
                reads += 1
            ctl("unpin", pins)
            epoch += 1
    finally:
        stop.set()
        th.join()
        st = m.stats()
        m.umount()
    v = verdict(samples, a.warmup)
    res = {"minutes": round((time.monotonic() - t0) / 60, 1), "epochs": epoch,
           "reads": reads, "wrong_bytes": len(wrong), "errors": errors[:10], **v,
           "stats": {k: st[k] for k in ("evictions", "lists_published", "prefetch_chunks",
                                        "bytes_from_backend", "checksum_failures",
                                        "read_errors", "cache_bytes_used")}}
    print(json.dumps(res, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(dict(res, samples=samples), f)
    ok = v["flat_rss"] and v["flat_fds"] and not wrong and not errors
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
