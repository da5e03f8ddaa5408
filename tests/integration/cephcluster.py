"""Throwaway single-node Ceph cluster for fusefs tests, the demo and benchmarks.

Wraps tests/ceph/cluster.sh (which does the daemon work) and adds object helpers built on
the `rados` module from Debian's python3-rados. Run with /usr/bin/python3; another CPython
of the same minor version also works (the module is loaded from its file, see _import_rados).

    from cephcluster import CephCluster
    c = CephCluster()
    c.start("/tmp/ceph-t", rgw=True)        # DIR/ceph.conf, DIR/env, DIR/s3.env ...
    c.put_many("fusefs", {"a": b"1", "b": b"2"})
    before = c.pool_read_bytes("fusefs")     # exact after a stats barrier (~1 s)
    ...
    c.stop()

Read counters (what a test uses to prove a re-read did or did not reach the backend):
  * pool_read_stats()/pool_read_bytes(): per-pool, from the PG stats the mon publishes.
    Those lag ~2 s behind the OSD, so these calls first run a barrier (`flush_pg_stats` on
    osd.0, then wait until the mon has that stat sequence), which takes ~1 s and makes the
    value exact. Byte counts are in KiB units rounded up per op (a 100-byte read counts
    1024), so compare op counts or "changed / did not change", not exact byte totals.
    `rados get` of a small object is 1 read op; get() here is 2 (stat + read).
  * osd_op_counters(): osd.0's perf counters via its admin socket: immediate and exact
    (op_r, op_out_bytes, op_w, op_in_bytes) but summed over all pools; with --rgw running,
    radosgw's own background reads also show up there.
"""

import importlib.util
import glob
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER_SH = os.path.normpath(os.path.join(HERE, "..", "ceph", "cluster.sh"))

S3_ACCESS_KEY = "FUSEFSTESTACCESSKEY"  # also in cluster.sh; the secret is in DIR/s3.env


def _import_rados():
    try:
        import rados  # noqa: F401
        return rados
    except ImportError:
        pass
    # Not on this interpreter's path (e.g. a pyenv python): load Debian's extension module
    # directly if it was built for this Python version.
    tag = "cpython-%d%d" % sys.version_info[:2]
    for path in glob.glob("/usr/lib/python3/dist-packages/rados.%s*.so" % tag):
        spec = importlib.util.spec_from_file_location("rados", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        sys.modules["rados"] = mod
        return mod
    raise ImportError("the rados module (python3-rados) is not importable from %s; "
                      "run with /usr/bin/python3" % sys.executable)


rados = _import_rados()


class CephCluster:
    def __init__(self, script=CLUSTER_SH):
        self.script = script
        self.dir = None
        self.pool = "fusefs"
        self.rgw = False
        self._rados = None
        self._ioctx = {}

    # ---- lifecycle -------------------------------------------------------------------

    def _sh(self, *args, timeout=180):
        subprocess.run([self.script, *args], check=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)

    def start(self, dir, rgw=False, pool="fusefs", mem_bytes=None):
        self.dir = os.path.abspath(dir)
        self.pool = pool
        self.rgw = rgw
        args = ["start", self.dir, "--pool", pool]
        if mem_bytes:
            args += ["--mem-bytes", str(int(mem_bytes))]
        if rgw:
            args.append("--rgw")
        self._sh(*args)
        return self

    def stop(self, purge=False):
        self._disconnect()
        if self.dir:
            self._sh("stop", self.dir, *(["--purge"] if purge else []))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    @property
    def conf_path(self):
        return os.path.join(self.dir, "ceph.conf")

    @property
    def s3_endpoint(self):
        port = os.environ.get("CEPH_TEST_RGW_PORT", "7480")
        with open(os.path.join(self.dir, "env")) as f:
            for line in f:
                if line.startswith("export CEPH_TEST_RGW_PORT="):
                    port = line.split("=", 1)[1].strip()
        return "http://127.0.0.1:%s" % port

    def s3_credentials(self):
        """(access_key, secret_key) of the S3 user created by start(rgw=True)."""
        env = {}
        with open(os.path.join(self.dir, "s3.env")) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                env[k] = v
        return env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]

    # ---- rados connection ------------------------------------------------------------

    def _conn(self):
        if self._rados is None:
            r = rados.Rados(conffile=self.conf_path)
            r.connect(timeout=10)
            self._rados = r
        return self._rados

    def _io(self, pool):
        if pool not in self._ioctx:
            self._ioctx[pool] = self._conn().open_ioctx(pool)
        return self._ioctx[pool]

    def _disconnect(self):
        for io in self._ioctx.values():
            try:
                io.close()
            except Exception:
                pass
        self._ioctx = {}
        if self._rados is not None:
            try:
                self._rados.shutdown()
            except Exception:
                pass
            self._rados = None

    # ---- objects ---------------------------------------------------------------------

    def put(self, pool, name, data):
        self._io(pool).write_full(name, bytes(data))

    def get(self, pool, name):
        io = self._io(pool)
        size, _ = io.stat(name)
        return io.read(name, size) if size else b""

    def remove(self, pool, name):
        self._io(pool).remove_object(name)

    def put_many(self, pool, objects, window=256):
        """Write {name: bytes} with at most `window` async writes in flight."""
        io = self._io(pool)
        sem = threading.BoundedSemaphore(window)
        errors = []

        def done(comp, name):
            rc = comp.get_return_value()
            if rc < 0:
                errors.append((name, rc))
            sem.release()

        for name, data in objects.items():
            sem.acquire()
            if errors:
                sem.release()
                break
            io.aio_write_full(name, bytes(data),
                              oncomplete=lambda c, n=name: done(c, n))
        for _ in range(window):  # drain: wait for every outstanding write
            sem.acquire()
        if errors:
            raise IOError("put_many: %d write(s) failed, first: %r" % (len(errors), errors[0]))

    # ---- read counters ---------------------------------------------------------------

    def _stats_barrier(self, timeout=15):
        """Make the mon's PG stats include every op osd.0 completed before this call."""
        r = self._conn()
        rc, out, err = r.osd_command(0, json.dumps({"prefix": "flush_pg_stats"}), b"",
                                     timeout=timeout)
        if rc != 0:
            raise IOError("flush_pg_stats failed: %d %s" % (rc, err))
        seq = int(out)
        deadline = time.monotonic() + timeout
        while True:
            # NB: "id" must be an int; the string "osd.0" aborts ceph-mon 16.2.15.
            rc, out, err = r.mon_command(
                json.dumps({"prefix": "osd last-stat-seq", "id": 0}), b"", timeout=timeout)
            if rc == 0 and out.strip() and int(out) >= seq:
                return
            if time.monotonic() > deadline:
                raise TimeoutError("PG stats did not reach seq %d" % seq)
            time.sleep(0.05)

    def pool_read_stats(self, pool, exact=True):
        """(read_ops, read_bytes) of a pool; bytes are KiB-granular per op (rounded up).
        exact=False skips the ~1 s barrier and may be ~2 s stale."""
        if exact:
            self._stats_barrier()
        s = self._io(pool).get_stats()
        return s["num_rd"], s["num_rd_kb"] * 1024

    def pool_read_bytes(self, pool, exact=True):
        return self.pool_read_stats(pool, exact)[1]

    def pool_read_ops(self, pool, exact=True):
        return self.pool_read_stats(pool, exact)[0]

    def osd_op_counters(self):
        """osd.0 perf counters, immediate: op_r, op_out_bytes, op_w, op_in_bytes (all pools)."""
        d = self.admin_socket("osd.0", "perf dump")["osd"]
        return {k: d[k] for k in ("op", "op_r", "op_out_bytes", "op_w", "op_in_bytes")}

    def admin_socket(self, daemon, prefix, **args):
        """Run an admin-socket command on a daemon of this cluster (e.g. "osd.0")."""
        path = os.path.join(self.dir, "run", daemon + ".asok")
        cmd = dict(args, prefix=prefix, format="json")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(10)
            s.connect(path)
            s.sendall(json.dumps(cmd).encode() + b"\0")
            hdr = self._recvn(s, 4)
            return json.loads(self._recvn(s, struct.unpack(">I", hdr)[0]) or b"null")

    @staticmethod
    def _recvn(s, n):
        buf = b""
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                raise IOError("admin socket closed early")
            buf += chunk
        return buf

    # ---- fault injection -------------------------------------------------------------

    def osd_freeze(self):
        """SIGSTOP osd.0: the backend stops answering (client ops time out after 10 s)."""
        self._sh("osd-freeze", self.dir)

    def osd_thaw(self):
        """SIGCONT osd.0: it carries on with its data intact (memstore)."""
        self._sh("osd-thaw", self.dir)

    def rgw_stop(self):
        self._sh("rgw-stop", self.dir)

    def rgw_start(self):
        self._sh("rgw-start", self.dir)

    # ---- real restarts (tests/integration/test_faults.py) ----------------------------
    # memstore persists its objects when the OSD shuts down cleanly (SIGTERM with
    # osd_fast_shutdown off) and loads them at start: the restarted OSD has its data.

    def _pid(self, daemon):
        try:
            with open(os.path.join(self.dir, "run", daemon + ".pid")) as f:
                return int(f.read().strip() or 0) or None
        except FileNotFoundError:
            return None

    def osd_stop(self, timeout=60):
        """SIGTERM osd.0 and wait for it to exit (it marks itself down and saves memstore)."""
        pid = self._pid("osd.0")
        if not pid:
            raise RuntimeError("osd.0 is not running")
        # the default fast shutdown exits without unmounting the store: memstore would
        # come back empty
        subprocess.run(["ceph", "-c", self.conf_path, "--connect-timeout", "10", "tell",
                        "osd.0", "config", "set", "osd_fast_shutdown", "false"],
                       check=True, capture_output=True, timeout=30)
        os.kill(pid, 15)
        deadline = time.monotonic() + timeout
        while os.path.exists("/proc/%d" % pid):
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(")")[-1].split()[0] == "Z":
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("osd.0 (pid %d) did not exit after SIGTERM" % pid)
            time.sleep(0.1)
        for suffix in (".pid", ".asok"):
            try:
                os.unlink(os.path.join(self.dir, "run", "osd.0" + suffix))
            except FileNotFoundError:
                pass

    def osd_start(self, timeout=60):
        """Start osd.0 again (as cluster.sh does) and wait until it is up with every PG
        active+clean; returns the seconds that took."""
        t0 = time.monotonic()
        log = open(os.path.join(self.dir, "log", "osd.0.out"), "ab")
        p = subprocess.Popen(["ceph-osd", "-i", "0", "-f", "-c", self.conf_path],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                             start_new_session=True)
        log.close()
        with open(os.path.join(self.dir, "run", "osd.0.pid"), "w") as f:
            f.write("%d\n" % p.pid)
        self._children = getattr(self, "_children", []) + [p]   # reaped by Popen's GC
        while True:
            if p.poll() is not None:
                raise RuntimeError("osd.0 exited with %d at start" % p.returncode)
            try:
                r = subprocess.run(["ceph", "-c", self.conf_path, "--connect-timeout", "5",
                                    "pg", "stat", "-f", "json"], capture_output=True,
                                   text=True, timeout=20)
                s = json.loads(r.stdout) if r.returncode == 0 else {}
                s = s.get("pg_summary", s)
                by = s.get("num_pg_by_state", [])
                clean = sum(x["num"] for x in by if x["name"] == "active+clean")
                if s.get("num_pgs") and clean == s["num_pgs"] and \
                        "up" in self._osd_state():
                    return time.monotonic() - t0
            except (subprocess.TimeoutExpired, ValueError):
                pass
            if time.monotonic() - t0 > timeout:
                raise TimeoutError("osd.0 not up with all PGs active+clean after %d s" % timeout)
            time.sleep(0.3)

    def _osd_state(self):
        r = subprocess.run(["ceph", "-c", self.conf_path, "--connect-timeout", "5", "osd",
                            "dump", "-f", "json"], capture_output=True, text=True, timeout=20)
        if r.returncode:
            return []
        osds = json.loads(r.stdout).get("osds", [])
        return [s for o in osds if o["osd"] == 0 for s in ("up",) if o["up"]]
