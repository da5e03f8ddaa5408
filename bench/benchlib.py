"""Helpers shared by bench/epoch.py, bench/s3.py, bench/open.py and bench/local.py (not by
bench/bench.py).

Run with /usr/bin/python3 (boto3 from Debian's python3-boto3). Everything here is for
throwaway benchmark setups: mounts and daemons started through it are recorded and torn
down by Cleanup, pid by pid.
"""

import concurrent.futures as cf
import datetime
import os
import platform
import queue
import signal
import subprocess
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MIB = 1 << 20
BUF = 1 * MIB
ABORT = threading.Event()      # set on SIGTERM/SIGINT/SIGHUP: readers stop taking files


def log(*a):
    print("[%s]" % time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def drop_caches(level=3):
    """sync; echo LEVEL > /proc/sys/vm/drop_caches (1: page cache, 3: also dentries and
    inodes)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("%d\n" % level)


def sh(cmd, **kw):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=20,
                              **kw).stdout.strip()
    except Exception as e:  # machine description only
        return repr(e)


def machine():
    return {"date": datetime.datetime.now().isoformat(timespec="seconds"),
            "kernel": platform.release(), "nproc": os.cpu_count(),
            "cpu": sh(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"]).strip(),
            "mem": sh(["sh", "-c", "grep MemTotal /proc/meminfo"]),
            "disk": sh(["sh", "-c", "lsblk -dno NAME,SIZE,ROTA,MODEL | head -3"]),
            "df_work": sh(["sh", "-c", "df -hT /var/tmp | tail -1"]),
            "ceph": sh(["ceph", "--version"]),
            "rclone": sh(["sh", "-c", "rclone version 2>/dev/null | head -1"]),
            "s3fs": sh(["sh", "-c", "s3fs --version 2>/dev/null | head -1"]),
            "s3cmd": sh(["sh", "-c", "s3cmd --version 2>/dev/null"]),
            "curl": sh(["sh", "-c", "curl --version | head -1"]),
            "loadavg_start": open("/proc/loadavg").read().strip(),
            "git_head": sh(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]),
            "git_uncommitted_in_src": sh(["git", "-C", ROOT, "status", "--short", "--",
                                          "src", "include", "fusefs"])}


def sys_busy():
    """(busy, total) jiffies summed over all CPUs, from /proc/stat (steal counts as idle)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    total = sum(v[:8])
    return total - v[3] - v[4] - v[7], total


def other_heavy_work():
    """What else is running that would skew the numbers (helper benchmark, clusters)."""
    out = []
    for pat in ("bench/bench.py", "ceph-mon", "pytest"):
        r = subprocess.run(["pgrep", "-af", pat], capture_output=True, text=True)
        out += [l for l in r.stdout.splitlines() if l.strip() and str(os.getpid()) != l.split()[0]]
    return out


def require_bin(name, path):
    """exit with a message naming the benchmark @name unless @path is an
    executable (checked before anything is started or written)"""
    if not (path and os.path.isfile(path) and os.access(path, os.X_OK)):
        sys.exit("%s: %s is not executable (run make)" % (name, path))


def clean_env():
    """The environment for peers: this sandbox sets AWS_CA_BUNDLE, which makes rclone's
    S3 backend refuse an http:// endpoint (LoadCustomCABundleError)."""
    env = dict(os.environ)
    for k in ("AWS_CA_BUNDLE", "AWS_PROFILE", "AWS_ENDPOINT_URL", "http_proxy", "https_proxy",
              "HTTP_PROXY", "HTTPS_PROXY"):
        env.pop(k, None)
    return env


# ---- reading -----------------------------------------------------------------------------

def read_one(path, buf, open_secs=None, on_read=None):
    """(bytes, crc32) of one file read with 1 MiB read() calls; the time open() took is
    appended to the list open_secs if one is given; on_read(k, first) is called after
    each read() of k > 0 bytes (first: the file's first)."""
    n = 0
    crc = 0
    mv = memoryview(buf)
    t0 = time.perf_counter()
    f = open(path, "rb", buffering=0)
    if open_secs is not None:
        open_secs.append(time.perf_counter() - t0)
    with f:
        while True:
            k = f.readinto(buf)
            if not k:
                break
            n += k
            crc = zlib.crc32(mv[:k], crc)
            if on_read:
                on_read(k, n == k)
    return n, crc


def read_checked(root, p, buf, expect, errors, bad, lock, open_secs=None, on_read=None):
    """read_one() of @p below @root; a read failure is appended to @errors, a CRC32
    other than @expect[p] to @bad (both under @lock). Returns the bytes read (0 on a
    failure)."""
    try:
        n, crc = read_one(os.path.join(root, p), buf, open_secs, on_read)
    except OSError as e:
        with lock:
            errors.append("%s: %s" % (p, e))
        return 0
    if expect is not None and expect.get(p) != (n, crc):
        with lock:
            bad.append("%s: got %d bytes crc %08x, want %r" % (p, n, crc, expect.get(p)))
    return n


def start_and_join(ts, start):
    """start threads @ts, which wait on Barrier @start (one party more, ours); release
    them together and join them: the perf_counter() time of the release"""
    for t in ts:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return t0


def read_order(root, order, threads=4, expect=None, open_secs=None):
    """Read the files of `order` (paths relative to root) with `threads` readers that take
    the next file from a shared queue in order. Returns dict(bytes, secs, errors, bad):
    errors are read failures, bad the files whose CRC32 differs from expect[path]. With a
    list open_secs, the duration of every open() is appended to it."""
    q = queue.SimpleQueue()
    for p in order:
        q.put(p)
    total = [0] * threads
    errors, bad = [], []
    lock = threading.Lock()
    start = threading.Barrier(threads + 1)

    def worker(i):
        buf = bytearray(BUF)
        start.wait()
        while not ABORT.is_set():
            try:
                p = q.get_nowait()
            except queue.Empty:
                return
            total[i] += read_checked(root, p, buf, expect, errors, bad, lock, open_secs)

    ts = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(threads)]
    t0 = start_and_join(ts, start)
    return {"bytes": sum(total), "secs": time.perf_counter() - t0, "errors": errors,
            "bad": bad}


# ---- S3 ----------------------------------------------------------------------------------

def s3_client(endpoint, creds, conns=16):
    import boto3
    from botocore.config import Config
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
                        aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
                        verify=False,
                        config=Config(max_pool_connections=conns, retries={"max_attempts": 5},
                                      s3={"addressing_style": "path"}))


def start_rgw_cluster(ceph, mon_port, rgw_port, mem, cleanup):
    """A throwaway cluster with radosgw in directory @ceph (tests/ceph/cluster.sh) on
    127.0.0.1, stopped by @cleanup; returns (S3 credentials, radosgw pid)."""
    cluster_sh = os.path.join(ROOT, "tests", "ceph", "cluster.sh")
    env = dict(os.environ, CEPH_TEST_MON_PORT=str(mon_port), CEPH_TEST_RGW_PORT=str(rgw_port))
    cleanup.add("cluster stop", lambda: subprocess.run(
        [cluster_sh, "stop", ceph], check=False, capture_output=True))
    r = subprocess.run([cluster_sh, "start", ceph, "--rgw", "--mem-bytes", str(mem)],
                       env=env, capture_output=True, text=True, timeout=400)
    if r.returncode != 0:
        raise RuntimeError("cluster start failed:\n%s%s" % (r.stdout, r.stderr[-3000:]))
    log(r.stdout.strip().splitlines()[-1])
    creds = read_env_file(os.path.join(ceph, "s3.env"))
    return creds, int(open(os.path.join(ceph, "run", "client.rgw.a.pid")).read())


def read_env_file(path):
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            if k:
                out[k] = v
    return out


def upload_tree(client, bucket, local_root, keys, threads=8):
    """PUT local_root/KEY as KEY for every key (parallel)."""
    def put(k):
        with open(os.path.join(local_root, k), "rb") as f:
            client.put_object(Bucket=bucket, Key=k, Body=f.read())
    with cf.ThreadPoolExecutor(threads) as ex:
        for _ in ex.map(put, keys):
            pass


# ---- processes and mounts ------------------------------------------------------------------

def parse_stats(text):
    out = {}
    for line in text.splitlines():
        k, _, v = line.rpartition(" ")
        try:
            out[k] = int(v)
        except ValueError:
            pass
    return out


class Cleanup:
    """Everything to undo, in reverse order; run() is idempotent and also runs on SIGTERM,
    SIGINT and SIGHUP (turned into SystemExit so finally: blocks run)."""

    def __init__(self):
        self.items = []
        for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(s, self._sig)

    @staticmethod
    def _sig(signum, frame):
        ABORT.set()
        raise SystemExit(128 + signum)

    def add(self, desc, fn):
        self.items.append((desc, fn))
        return len(self.items) - 1

    def done(self, idx):
        if idx is not None and idx < len(self.items):
            self.items[idx] = None

    def run(self):
        while self.items:
            it = self.items.pop()
            if it is None:
                continue
            desc, fn = it
            try:
                fn()
            except BaseException as e:  # keep cleaning
                log("cleanup %s: %r" % (desc, e))


def mounted_in(pid, mnt):
    """Whether mnt is a mount point in the mount namespace of process pid (a daemon started
    in its own namespace, where os.path.ismount() cannot see it)."""
    try:
        with open("/proc/%d/mountinfo" % pid) as f:
            return any(line.split()[4] == mnt for line in f)
    except OSError:
        return False


def wait_mount(mnt, proc, timeout=60, mounted=os.path.ismount):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError("mount process exited with %d" % proc.returncode)
        if mounted(mnt):
            return
        time.sleep(0.05)
    raise RuntimeError("%s not mounted after %d s" % (mnt, timeout))


class Daemon:
    """A FUSE daemon run in the foreground as our child (fusefs -f, s3fs -f, rclone mount)
    so that we know its pid; stop() unmounts and waits, kill() is the backstop.
    own_ns: cmd execs the daemon in a mount namespace of its own (unshare --mount ...
    exec DAEMON, same pid): the mount is looked for and unmounted there."""

    def __init__(self, name, cmd, mnt, logpath, cleanup, env=None, own_ns=False,
                 timeout=60):
        self.name, self.cmd, self.mnt, self.own_ns = name, cmd, mnt, own_ns
        os.makedirs(mnt, exist_ok=True)
        self.logf = open(logpath, "ab")
        self.logf.write(("\n==== %s %s\n%s\n" % (name, time.strftime("%H:%M:%S"),
                                                  " ".join(cmd))).encode())
        self.logf.flush()
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        self.cleanup = cleanup
        self.cidx = cleanup.add("%s pid %d" % (name, self.proc.pid), self.kill)
        try:
            wait_mount(mnt, self.proc, timeout=timeout,
                       mounted=(lambda m: mounted_in(self.proc.pid, m))
                       if own_ns else os.path.ismount)
        except BaseException:
            self.kill()
            raise

    @property
    def pid(self):
        return self.proc.pid

    def stop(self, timeout=30):
        """Unmount (retried while readers still hold files, e.g. after an interrupt),
        wait for the daemon to exit; then SIGTERM, then kill()."""
        if self.proc is None:
            return
        deadline = time.time() + timeout
        ns = ["nsenter", "--mount=/proc/%d/ns/mnt" % self.proc.pid] if self.own_ns else []
        while self.proc.poll() is None and time.time() < deadline:
            subprocess.run(ns + ["fusermount3", "-u", self.mnt], check=False,
                           stderr=subprocess.DEVNULL)
            try:
                self.proc.wait(timeout=1)
            except subprocess.TimeoutExpired:
                pass
        if self.proc.poll() is None:
            log("%s did not exit after unmount; SIGTERM pid %d" % (self.name, self.proc.pid))
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def kill(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None
        # always: a dead daemon's mount answers ENOTCONN and os.path.ismount() says False
        subprocess.run(["fusermount3", "-uz", self.mnt], check=False,
                       stderr=subprocess.DEVNULL)
        self.logf.close()
        self.cleanup.done(self.cidx)


def rss_kib(pid, field="VmRSS"):
    """VmRSS (or @field: RssAnon, RssFile, ...) of process @pid in KiB (-1 if
    not found)"""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def fusefs_stats(mnt):
    return parse_stats(os.getxattr(mnt, "user.fusefs.stats").decode())


def proc_cpu(pid):
    """utime+stime seconds of pid (0 if gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def dir_bytes(path):
    """Allocated bytes under path (st_blocks, like du)."""
    total = 0
    for dp, dns, fns in os.walk(path):
        for fn in fns:
            try:
                total += os.lstat(os.path.join(dp, fn)).st_blocks * 512
            except OSError:
                pass
    return total


class PeakSampler:
    """Largest dir_bytes(path) seen, sampled every `every` seconds in a thread (and once
    at stop): how far a cache went above its cap between evictions."""

    def __init__(self, path, every=1.0):
        self.path, self.every = path, every
        self.peak = dir_bytes(path)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.wait(self.every):
            self.peak = max(self.peak, dir_bytes(self.path))

    def stop(self):
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, dir_bytes(self.path))
        return self.peak


def rmtree(path):
    """rm -rf, retried: a just-stopped ceph daemon may still write its last log line."""
    import shutil
    for _ in range(5):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            return
        time.sleep(1)
    log("could not remove %s" % path)


class Contention:
    """Samples every `every` s whether other heavy work runs on the machine (another
    benchmark, a test suite, another Ceph cluster or fusefs mount not under `mine`), so
    that results measured next to it can be flagged. busy(t0, t1) -> the foreign command
    lines seen in [t0, t1]."""

    PATTERN = "bench/bench.py|pytest|ceph-mon|ceph-osd|radosgw|fusefs mount|cc1"

    def __init__(self, mine, every=3.0):
        self.mine, self.every = mine, every
        self.samples = []          # (t, [lines])
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def sample(self):
        r = subprocess.run(["pgrep", "-af", self.PATTERN], capture_output=True, text=True)
        me = str(os.getpid())
        lines = [l for l in r.stdout.splitlines()
                 if l.split()[0] != me and self.mine not in l and "pgrep" not in l]
        self.samples.append((time.time(), lines))

    def _run(self):
        while True:
            self.sample()
            if self._stop.wait(self.every):
                return

    def busy(self, t0, t1):
        seen = []
        for t, lines in self.samples:
            if t0 - self.every <= t <= t1 + self.every:
                for l in lines:
                    if l not in seen:
                        seen.append(l)
        return seen

    def stop(self):
        self._stop.set()
        self._t.join()
        return sorted({l for _, ls in self.samples for l in ls})
