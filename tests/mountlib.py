"""Running the real fusefs daemon through kernel FUSE, for the pytest suites
(tests/fuse without Ceph, tests/integration with it). Modelled on libfuse's
test/util.py: start in the foreground, poll until mounted, fail early if the
daemon exits; on teardown unmount and require exit status 0; scan the
daemon's log for sanitizer reports. FUSEFS_BIN names the binary."""

import os
import shutil
import signal
import subprocess
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
FUSEFS = os.environ.get("FUSEFS_BIN", os.path.join(ROOT, "build", "bin", "fusefs"))
BAD_WORDS = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "Segmentation fault",
             "ThreadSanitizer")


class Mount:
    """A running fusefs daemon and its mount point."""

    def __init__(self, source, mnt, cache, log, args, env=None, preexec=None):
        self.source, self.mnt, self.cache, self.log_path = source, mnt, cache, log
        self.args = args
        self.preexec = preexec      # run in the child before exec (e.g. setrlimit)
        self.env = dict(os.environ, **(env or {}))
        self.proc = None

    def start(self, timeout=60):
        self.logf = open(self.log_path, "ab")
        cmd = [FUSEFS, "mount", self.source, self.mnt, "-f", "--cache-dir", self.cache] + self.args
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=self.env, preexec_fn=self.preexec)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"fusefs exited with {self.proc.returncode}:\n{self.log()}")
            if os.path.ismount(self.mnt):
                return self
            time.sleep(0.05)
        raise AssertionError(f"not mounted after {timeout}s:\n{self.log()}")

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stats(self):
        raw = os.getxattr(self.mnt, "user.fusefs.stats").decode()
        return {k: int(v) for k, v in (line.split() for line in raw.splitlines())}

    def path(self, rel):
        return os.path.join(self.mnt, rel)

    def umount(self, check=True):
        if self.proc is None:
            return
        rc, log = self.stop()
        for w in BAD_WORDS:
            assert w not in log, log
        if check:
            assert rc == 0, f"fusefs exited {rc}:\n{log}"

    def stop(self):
        """unmount and wait for the daemon: (exit status, its log), nothing
        asserted but that it exits"""
        # EBUSY can be a statfs() in flight (the daemon's own watchdog
        # checks its mount every half interval, df(1) anywhere on the
        # machine): it holds the mount for a moment, so try again (a hang
        # guard of 30 s, not a timing: a mount kept busy still fails)
        for _ in range(300):
            um = subprocess.run(["fusermount3", "-u", self.mnt], capture_output=True,
                                text=True)
            if um.returncode == 0 or "Device or resource busy" not in um.stderr:
                break
            time.sleep(0.1)
        try:
            rc = self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            # say why, for the next one who sees this
            stacks = subprocess.run(
                ["gdb", "-p", str(self.proc.pid), "-batch", "-ex",
                 "thread apply all bt 12"], capture_output=True, text=True).stdout
            self.kill()
            raise AssertionError(f"fusefs did not exit after unmount (fusermount3: "
                                 f"{um.returncode} {um.stderr})\n{stacks[-6000:]}\n"
                                 f"{self.log()[-3000:]}")
        self.proc = None
        self.logf.close()
        return rc, self.log()

    def kill(self):
        """SIGKILL the daemon and clear the dead mount."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc = None
        subprocess.run(["fusermount3", "-uz", self.mnt], check=False,
                       stderr=subprocess.DEVNULL)
        self.logf.close()


def umount_all(mounts):
    """unmount every Mount of a test; fail with every problem at once"""
    failed = []
    for m in mounts:
        try:
            m.umount()
        except AssertionError as e:
            failed.append(str(e))
    assert not failed, failed


def binary_for_others(top):
    """a copy of the fusefs binary in @top (a directory every user may enter), for a
    daemon run as another user: the checkout itself may sit in a directory only root
    can enter (a clone under /root or in a `mktemp -d`)"""
    dst = os.path.join(top, "fusefs")
    if not os.path.exists(dst):     # a second daemon: the copy may be running
        shutil.copy2(FUSEFS, dst)
        os.chmod(dst, 0o755)
    return dst


class Hooks:
    """the daemon's test hooks (include/testhook.h): files in one directory,
    passed to a mount as env=hooks.env (the `hooks` fixture of
    tests/fuse/conftest.py and tests/integration/conftest.py)"""

    def __init__(self, d):
        self.dir = d
        self.env = {"FUSEFS_TEST_HOOKS": str(d)}

    def close(self, name):
        """testhook_gate(name) blocks until open(name)"""
        (self.dir / name).write_text("")

    def open(self, name):
        (self.dir / name).unlink(missing_ok=True)

    def set(self, name, value):
        """testhook_value(name) answers @value (written whole, by rename)"""
        tmp = self.dir / f".{name}.tmp"
        tmp.write_text(str(value))
        tmp.rename(self.dir / name)

    def clear(self):
        """never leave a daemon waiting on a gate"""
        for f in self.dir.iterdir():
            f.unlink()


def wait_for(cond, timeout=30, step=0.05):
    """poll @cond every @step seconds until true (True) or @timeout seconds
    pass (False)"""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(step)
    return False


def run_captured(cmd, timeout=60, env=None, **kw):
    """subprocess.run(capture_output=True, text=True) for commands that may
    leave a daemon behind: a background fusefs without a syslog socket keeps
    the stderr it was started with (docs/operations.md, "Logs"), so stderr
    goes to a file, not to a pipe that would stay open until it exits."""
    with tempfile.TemporaryFile() as err:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, timeout=timeout,
                           env=env, **kw)
        err.seek(0)
        r.stderr = err.read().decode(errors="replace")
    r.stdout = r.stdout.decode(errors="replace")
    return r


def run_fusefs(*args, timeout=60, env=None):
    return run_captured([FUSEFS] + list(args), timeout=timeout,
                        env=dict(os.environ, **(env or {})))


def notify_socket(tmp_path, abstract=False):
    """(a bound datagram socket standing in for systemd, its name for
    $NOTIFY_SOCKET): a path, or "@name" for an abstract socket"""
    import socket
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = f"@fusefs-test-{os.getpid()}-{time.monotonic_ns()}"
        s.bind("\0" + name[1:])
    else:
        name = str(tmp_path / "notify.sock")
        s.bind(name)
    return s, name
