#!/usr/bin/env python3
"""Concurrency stress of one fusefs daemon over a file:// source, meant for
the ThreadSanitizer build (make TSAN=1 stress; tests/stress/README.md).

For --seconds, all at once:
  * 4 readers: whole files and random ranges of random files, page cache
    dropped first, every byte compared with what the source holds;
  * 1 reader of the "mutable" files, which a writer replaces (rename) in
    the source meanwhile: every read is one whole version, never a mix
    (EIO/ESTALE for an open that saw its version replaced is allowed);
  * control-file writers: pin / unpin / evict / warm of files and
    directories, `fusefs prefetch` of short lists;
  * list publishers: .fusefs/lists/NAME with "# epoch N" and "# begin N"
    headers, numbered and not, some out of order (ESTALE/EBUSY allowed),
    some of sample ranges (PATH<TAB>OFFSET<TAB>LENGTH) that the readers
    then read one by one (pages prefetched and read while eviction runs);
  * stats readers: .fusefs/stats, the stats xattr, .fusefs/heat, list
    status files, `fusefs status`, the Prometheus endpoint;
  * a cache much smaller than the dataset, so eviction runs all the time,
    and a short --list-refresh / --revalidate, so re-listings and re-checks
    swap trees under the readers.

Each --daemon-args gives one phase (a mount of its own on the same
cache, so later phases also load and verify what earlier ones cached).
After each phase the daemon is unmounted and must exit 0 with no "WARNING:
ThreadSanitizer" (nor any other sanitizer report) in its log. Exit status:
0 clean, 1 otherwise (each problem printed)."""

import argparse
import errno
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

MiB = 1 << 20
BAD_WORDS = ("WARNING: ThreadSanitizer", "ThreadSanitizer:", "AddressSanitizer",
             "runtime error:", "LeakSanitizer", "Segmentation fault")
# errors a control write may legitimately get (see ctl.h / docs/epochs.md)
CTL_OK_ERRNOS = {errno.ESTALE, errno.EBUSY, errno.ENOSPC, errno.ENOENT, errno.EINVAL,
                 errno.EPERM, errno.EACCES, errno.EDQUOT}


def content(name, size, gen=0):
    """the bytes of source file @name (version @gen): the first 8 bytes
    say the version, the rest is reproducible from (name, gen)"""
    body = random.Random(f"{name}/{gen}").randbytes(max(size - 8, 0))
    return (gen.to_bytes(8, "little") + body)[:size]


class Stress:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="fusefs-stress-")
        self.src = os.path.join(self.tmp, "src")
        self.mnt = os.path.join(self.tmp, "mnt")
        self.cache = os.path.join(self.tmp, "cache")
        self.log = os.path.join(self.tmp, "fusefs.log")
        os.makedirs(self.mnt)
        self.errors = []
        self.counts = {}
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.files = {}         # rel -> bytes (immutable)
        self.mutable = {}       # rel -> size
        self.proc = None

    # -- bookkeeping --
    def fail(self, what):
        with self.lock:
            if len(self.errors) < 50:
                self.errors.append(what)
        self.stop.set()

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] = self.counts.get(what, 0) + n

    # -- the dataset --
    def make_source(self):
        r = random.Random(1)
        for d in range(4):
            for i in range(10):
                rel = f"d{d}/f{i:02d}"
                size = r.choice([0, 1, 4095, MiB - 1, MiB, MiB + 1,
                                 r.randrange(1, 3 * MiB)])
                self.files[rel] = content(rel, size)
        for rel, data in self.files.items():
            p = os.path.join(self.src, rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(p, "wb") as f:
                f.write(data)
        os.makedirs(os.path.join(self.src, "mut"))
        for i in range(3):
            rel = f"mut/m{i}"
            self.mutable[rel] = MiB + 4096 * i + 17
            self.replace(rel, 0)

    def replace(self, rel, gen):
        p = os.path.join(self.src, rel)
        with open(p + ".tmp", "wb") as f:
            f.write(content(rel, self.mutable[rel], gen))
        os.rename(p + ".tmp", p)

    # -- the daemon --
    def mount(self):
        port = free_port()
        self.metrics = f"http://127.0.0.1:{port}/metrics"
        env = dict(os.environ)
        env.setdefault("TSAN_OPTIONS", "")
        env["TSAN_OPTIONS"] = ("halt_on_error=1 exitcode=66 second_deadlock_stack=1 "
                               + env["TSAN_OPTIONS"]).strip()
        supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tsan.supp")
        if os.path.exists(supp) and "suppressions=" not in env["TSAN_OPTIONS"]:
            env["TSAN_OPTIONS"] += f" suppressions={os.path.abspath(supp)}"
        cmd = [self.args.bin, "mount", f"file://{self.src}", self.mnt, "-f",
               "--cache-dir", self.cache, "--cache-size", "6M", "--chunk-size", "1M",
               "--revalidate", "1", "--list-refresh", "3", "--readahead", "4",
               "--max-inflight", "8", "--max-threads", "8", "--list-idle", "5",
               "--metrics", f"127.0.0.1:{port}"] + self.extra
        self.logf = open(self.log, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 120
        while not os.path.ismount(self.mnt):
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"fusefs did not mount (exit {self.proc.poll()}):\n"
                                 + self.read_log()[-4000:])
            time.sleep(0.1)

    def read_log(self):
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def umount(self):
        subprocess.run(["fusermount3", "-u", self.mnt], check=False)
        try:
            rc = self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            self.fail("fusefs did not exit within 120 s of the unmount")
        self.logf.close()
        log = self.read_log()
        if rc != 0:
            self.fail(f"fusefs exited with status {rc} (66: ThreadSanitizer report)")
        for w in BAD_WORDS:
            if w in log:
                self.fail(f"daemon log has {w!r}")
                break
        return log

    # -- the workers --
    def loop(self, fn, seed):
        r = random.Random(seed)
        while not self.stop.is_set():
            try:
                fn(r)
            except Exception as e:  # noqa: BLE001 - any surprise is a failure
                self.fail(f"{fn.__name__}: {type(e).__name__}: {e}")

    def range_reader(self, r, ranges):
        """the listed ranges of one file, in list order, as np.memmap
        with MADV_RANDOM would read them"""
        rel = r.choice(ranges)[0]
        want = self.files[rel]
        fd = os.open(os.path.join(self.mnt, rel), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            for f, off, n in ranges:
                if f != rel:
                    continue
                if os.pread(fd, n, off) != want[off:off + n]:
                    return self.fail(f"{rel}: listed range ({off}, {n}) wrong")
        finally:
            os.close(fd)
        self.count("range_reads")

    def reader(self, r):
        ranges = getattr(self, "ranges", None)
        if ranges and r.random() < 0.3:
            return self.range_reader(r, ranges)
        rel = r.choice(list(self.files))
        want = self.files[rel]
        p = os.path.join(self.mnt, rel)
        with open(p, "rb") as f:
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
            if r.random() < 0.4 or not want:
                got = f.read()
                if got != want:
                    return self.fail(f"{rel}: whole read: {len(got)} bytes, want {len(want)}"
                                     f"{' (same length, different bytes)' if len(got) == len(want) else ''}")
            else:
                for _ in range(r.randrange(1, 20)):
                    off = r.randrange(len(want))
                    n = r.randrange(1, 2 * MiB)
                    f.seek(off)
                    got = f.read(n)
                    if got != want[off:off + n]:
                        return self.fail(f"{rel}: read({off}, {n}) wrong")
        self.count("reads")

    def mutable_reader(self, r):
        rel = r.choice(list(self.mutable))
        size = self.mutable[rel]
        try:
            with open(os.path.join(self.mnt, rel), "rb") as f:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                got = f.read()
        except OSError as e:
            if e.errno in (errno.EIO, errno.ESTALE, errno.ENOENT):
                return self.count("mutable_eio")
            raise
        if len(got) != size:
            return self.fail(f"{rel}: {len(got)} bytes, want {size}")
        gen = int.from_bytes(got[:8], "little")
        if got != content(rel, size, gen):
            return self.fail(f"{rel}: not one whole version (says version {gen})")
        self.count("mutable_reads")

    def mutator(self, r):
        rel = r.choice(list(self.mutable))
        self.gen = getattr(self, "gen", 0) + 1
        self.replace(rel, self.gen)
        self.count("replaced")
        time.sleep(r.uniform(0.3, 1.5))

    def ctl_write(self, name, text):
        try:
            with open(os.path.join(self.mnt, ".fusefs", name), "w") as f:
                f.write(text)
        except OSError as e:
            if e.errno not in CTL_OK_ERRNOS:
                raise
            self.count(f"ctl_{errno.errorcode.get(e.errno, e.errno)}")
            return False
        return True

    def some_paths(self, r, k):
        dirs = sorted({rel.split("/")[0] for rel in self.files})
        pool = list(self.files) + dirs + ["/".join(["mut", "m0"])]
        return [r.choice(pool) for _ in range(k)]

    def controller(self, r):
        what = r.choice(["pin", "unpin", "unpin", "evict", "evict", "warm", "prefetch"])
        paths = self.some_paths(r, r.randrange(1, 6))
        if what == "prefetch":
            lst = "\n".join(r.sample(list(self.files), 6)) + "\n"
            p = subprocess.run([self.args.bin, "prefetch", self.mnt, "--list", "-",
                                "--name", f"cli{r.randrange(3)}"],
                               input=lst, text=True, capture_output=True, timeout=60)
            if p.returncode not in (0, 1) or "Sanitizer" in p.stderr:
                self.fail(f"fusefs prefetch exited {p.returncode}: {p.stderr}")
        else:
            self.ctl_write(what, "".join(f"{p}\n" for p in paths))
        self.count(what)
        time.sleep(r.uniform(0, 0.2))

    def publisher(self, r):
        name = f"rank{r.randrange(3)}"
        epoch = getattr(self, "epoch", {}).get(name, 0)
        kind = r.random()
        if kind < 0.15:
            text = f"# begin {epoch}\n"
        else:
            order = r.sample(list(self.files), r.randrange(5, len(self.files)))
            head = ""
            if kind < 0.8:
                epoch += r.choice([0, 1, 1, 2])
                head = f"# epoch {epoch}\n"
                if r.random() < 0.3:
                    head += f"# begin {epoch}" + (f" at {r.randrange(3)}" if r.random() < 0.5 else "") + "\n"
            text = head + "".join(f"{p}\n" for p in order)
            if r.random() < 0.4:
                # samples of a few big files instead of whole files
                big = [p for p in self.files if len(self.files[p]) > MiB]
                ranges = []
                for p in r.sample(big, min(3, len(big))):
                    size = len(self.files[p])
                    for _ in range(r.randrange(10, 60)):
                        n = r.randrange(1, 64 << 10)
                        ranges.append((p, r.randrange(size - n), n))
                r.shuffle(ranges)
                self.ranges = ranges
                text = head + "".join(f"{p}\t{o}\t{n}\n" for p, o, n in ranges)
        if self.ctl_write(f"lists/{name}", text):
            self.epoch = dict(getattr(self, "epoch", {}), **{name: epoch})
        self.count("publish")
        time.sleep(r.uniform(0, 0.3))

    def stats_reader(self, r):
        what = r.randrange(6)
        if what == 0:
            with open(os.path.join(self.mnt, ".fusefs", "stats")) as f:
                text = f.read()
            if "cache_used" not in text and "used" not in text:
                self.fail(f"stats without a used counter: {text[:200]}")
        elif what == 1:
            os.getxattr(self.mnt, "user.fusefs.stats")
        elif what == 2:
            with open(os.path.join(self.mnt, ".fusefs", "heat"), "rb") as f:
                f.read()
        elif what == 3:
            d = os.path.join(self.mnt, ".fusefs", "lists")
            for n in os.listdir(d):
                try:
                    with open(os.path.join(d, n)) as f:
                        f.read()
                except FileNotFoundError:
                    pass
        elif what == 4:
            with urllib.request.urlopen(self.metrics, timeout=30) as resp:
                resp.read()
        else:
            rel = r.choice(list(self.files))
            os.getxattr(os.path.join(self.mnt, rel), "user.fusefs.cached")
            os.listdir(os.path.join(self.mnt, rel.split("/")[0]))
        self.count("stats")
        time.sleep(r.uniform(0, 0.05))

    def run(self):
        """one phase per --daemon-args configuration, --seconds split
        between them, on the same source and cache"""
        self.make_source()
        configs = self.args.daemon_args or [""]
        log = ""
        for i, extra in enumerate(configs):
            self.extra = extra.split()
            print(f"stress: phase {i + 1}/{len(configs)}: {extra or 'default options'}")
            log = self.phase(self.args.seconds / len(configs))
            if self.errors:
                break
        print(f"stress: {', '.join(f'{k} {v}' for k, v in sorted(self.counts.items()))}")
        if self.errors:
            print("stress FAILED:\n  " + "\n  ".join(self.errors))
            print("daemon log (tail):\n" + log[-6000:])
            print(f"kept {self.tmp} for inspection")
            return 1
        shutil.rmtree(self.tmp, ignore_errors=True)
        print("stress: clean (daemon exit 0, no sanitizer report)")
        return 0

    def phase(self, seconds):
        self.stop.clear()
        self.mount()
        workers = [(self.reader, i) for i in range(4)] + [
            (self.mutable_reader, 10), (self.mutator, 11), (self.controller, 12),
            (self.controller, 13), (self.publisher, 14), (self.publisher, 15),
            (self.stats_reader, 16), (self.stats_reader, 17)]
        threads = [threading.Thread(target=self.loop, args=w, daemon=True) for w in workers]
        t0 = time.time()
        for t in threads:
            t.start()
        self.stop.wait(seconds)
        self.stop.set()
        for t in threads:
            t.join(timeout=120)
            if t.is_alive():
                self.fail("a worker is stuck in the mount after the run ended")
        print(f"stress: phase ran {time.time() - t0:.0f} s")
        # what the daemon did that the workers cannot see (not a check)
        with open(os.path.join(self.mnt, ".fusefs", "stats")) as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k in ("evicted_bytes", "page_bytes_stored"):
                    self.count(f"daemon_{k}", int(v))
        return self.umount()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default="build-tsan/bin/fusefs")
    ap.add_argument("--seconds", type=float, default=40)
    ap.add_argument("--daemon-args", action="append",
                    help='more daemon options for one phase, e.g. "--passthrough off '
                         '--read-mode splice"; repeat for more phases (default: one '
                         'phase with the defaults)')
    args = ap.parse_args()
    args.bin = os.path.abspath(args.bin)
    s = Stress(args)
    try:
        return s.run()
    finally:
        if s.proc and s.proc.poll() is None:
            subprocess.run(["fusermount3", "-uz", s.mnt], check=False)
            s.proc.kill()


if __name__ == "__main__":
    sys.exit(main())
