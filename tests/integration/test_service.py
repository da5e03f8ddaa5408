"""Running fusefs as a service: the INI config file, the systemd unit and
the sd_notify readiness protocol, signals (SIGTERM/SIGINT stop cleanly,
SIGHUP reopens the log file), the Prometheus endpoint, and credentials
kept out of the logs."""

import configparser
import errno
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from conftest import BAD_WORDS, FUSEFS, POOL, ROOT, run_fusefs, wait_for
from mountlib import notify_socket

UNIT = os.path.join(ROOT, "systemd", "fusefs@.service")



def in_proc_mounts(mnt):
    with open("/proc/mounts") as f:
        return any(line.split()[1] == str(mnt) for line in f)


def stats_of(mnt):
    raw = os.getxattr(str(mnt), "user.fusefs.stats").decode()
    return {k: int(v) for k, v in (line.split() for line in raw.splitlines())}


def write_config(path, **keys):
    lines = ["# written by test_service.py", "[mount]"]
    lines += [f"{k} = {v}" for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def default_stop_signals():
    """in the child before exec: SIGINT and SIGQUIT as a terminal gives them.
    A test runner started in the background by a shell without job control
    (`cmd &` in a script) ignores both, its children inherit that, and
    fusefs, like every libfuse daemon, keeps an inherited ignore"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


class Daemon:
    """fusefs started with an arbitrary command line, output to a file;
    @wrapper runs it (a sandbox)."""

    def __init__(self, args, log, env=None, wrapper=()):
        self.log_path = log
        self.logf = open(log, "ab")
        self.proc = subprocess.Popen(list(wrapper) + [FUSEFS] + [str(a) for a in args],
                                     stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})),
                                     preexec_fn=default_stop_signals)

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_mounted(self, mnt, timeout=60):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"fusefs exited {self.proc.returncode}:\n{self.log()}")
            if os.path.ismount(mnt):
                return
            time.sleep(0.05)
        raise AssertionError(f"not mounted after {timeout}s:\n{self.log()}")

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Signal the daemon, require exit status 0 and a clean log."""
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"fusefs ignored {sig!r}:\n{self.log()}")
        self.logf.close()
        log = self.log()
        for w in BAD_WORDS:
            assert w not in log, log
        assert rc == 0, f"fusefs exited {rc} after {sig!r}:\n{log}"

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.logf.closed:
            self.logf.close()


@pytest.fixture
def daemons(tmp_path):
    """daemons(args, env=None, mnt=None, wrapper=()) -> a started Daemon;
    leftovers are killed and their mount points lazily unmounted at the end."""
    started, mnts = [], []

    def start(args, env=None, mnt=None, wrapper=()):
        d = Daemon(args, str(tmp_path / f"daemon{len(started)}.log"), env, wrapper)
        started.append(d)
        if mnt:
            mnts.append(str(mnt))
        return d

    yield start
    for d in started:
        d.kill()
    for m in mnts:
        subprocess.run(["fusermount3", "-uz", m], stderr=subprocess.DEVNULL)


# --- the config file --------------------------------------------------------------

def test_config_file_mounts_and_command_line_overrides_it(ceph, tmp_path, daemons):
    ceph.put(POOL, "cfg/d/f", b"from a config file")
    mnt = tmp_path / "m"
    mnt.mkdir()
    conf = write_config(tmp_path / "data.conf", source=f"rados://{POOL}/cfg",
                        mountpoint=mnt, cache_dir=tmp_path / "c",
                        **{"ceph-conf": ceph.conf_path, "cache_size": "1G",
                           "uid": 1234, "umask": "027", "allow_other": "no"})
    d = daemons(["mount", "--config", conf, "-f", "--uid", "4321"], mnt=mnt)
    d.wait_mounted(mnt)
    assert (mnt / "d" / "f").read_bytes() == b"from a config file"
    st = os.stat(mnt / "d" / "f")
    assert st.st_uid == 4321                      # the command line wins
    assert stat.S_IMODE(st.st_mode) == 0o440      # umask from the file
    assert stats_of(mnt)["cache_bytes_limit"] == 1 << 30
    d.stop()
    assert not in_proc_mounts(mnt)


def test_o_config_with_positional_source_overriding_the_file(ceph, tmp_path, daemons):
    """The mount.fuse3/fstab form: fusefs SOURCE MNT -o config=FILE,..."""
    ceph.put(POOL, "cfg-b/x", b"b")
    mnt = tmp_path / "m"
    mnt.mkdir()
    conf = write_config(tmp_path / "o.conf", source=f"rados://{POOL}/cfg-a",
                        mountpoint="/nonexistent", cache_dir=tmp_path / "c",
                        ceph_conf=ceph.conf_path)
    d = daemons([f"rados://{POOL}/cfg-b", mnt, "-f", "-o", f"noatime,config={conf}"],
                mnt=mnt)
    d.wait_mounted(mnt)
    assert os.listdir(mnt) == ["x"]
    d.stop()


BAD_CONFIGS = [
    # (content, line, words the message must contain)
    ("[mount]\ncache_size = 1G\nbogus_key = s3cr3t-value\n", 3, ["bogus_key"]),
    ("[mount]\ncache_size = 12Q\n", 2, ["cache_size", "12Q"]),
    ("[mount]\nsource = rados://p/x\n\n[mounts]\n", 4, ["[mounts]"]),
    ("source = rados://p/x\n[mount]\n", 1, ["source", "[mount]"]),
    ("[mount]\n; comment\nthis line is junk\n", 3, ["syntax"]),
    ("[mount]\nallow_other = maybe\n", 2, ["allow_other"]),
    ("[mount]\ncache_dir = /a\ncache-dir = /b\n", 3, ["cache-dir", "line 2"]),
    ("[mount]\nread_mode = sideways\n", 2, ["read_mode", "sideways"]),
    ("[mount]\nconfig = /etc/other.conf\n", 2, ["config"]),
]


@pytest.mark.parametrize("content,line,words", BAD_CONFIGS)
def test_config_file_errors_name_file_line_and_key(tmp_path, content, line, words):
    conf = tmp_path / "bad.conf"
    conf.write_text(content)
    r = run_fusefs("mount", "--config", str(conf), "-f")
    assert r.returncode == 2, r.stderr
    assert f"{conf}:{line}:" in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr
    assert "s3cr3t-value" not in r.stderr         # values of unknown keys
    assert not r.stdout


def test_config_file_unreadable_and_long_lines(tmp_path):
    r = run_fusefs("mount", "--config", str(tmp_path / "missing.conf"))
    assert r.returncode == 2 and "missing.conf" in r.stderr, r.stderr
    # inih as packaged stops at 200 bytes a line; our reader does not
    long_dir = tmp_path / ("d" * 240)
    conf = write_config(tmp_path / "long.conf", source="rados://p/x",
                        mountpoint=tmp_path / "nowhere", cache_dir=long_dir)
    r = run_fusefs("mount", "--config", str(conf), "-f")
    assert r.returncode == 2, r.stderr
    assert "mount point" in r.stderr and str(tmp_path / "nowhere") in r.stderr, r.stderr


# --- systemd ------------------------------------------------------------------------

def unit():
    cp = configparser.ConfigParser(strict=False, interpolation=None)
    cp.optionxform = str
    cp.read(UNIT)
    return cp


def test_systemd_unit_settings():
    u = unit()
    s = u["Service"]
    assert s["Type"] == "notify"
    assert s["ExecStart"] == "/usr/sbin/fusefs mount --config /etc/fusefs/%i.conf -f"
    assert s["KillMode"] == "mixed" and s["KillSignal"] == "SIGTERM"
    assert s["Restart"] == "on-failure"
    assert int(s["LimitNOFILE"]) >= 65536
    assert "ExecStop" not in s
    assert "network-online.target" in u["Unit"]["After"]
    assert "network-online.target" in u["Unit"]["Wants"]
    # each of these gives the service a mount namespace of its own: the
    # mount must stay in the host's
    for sandbox in ("PrivateTmp", "ProtectSystem", "ProtectHome", "PrivateMounts",
                    "PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules",
                    "ProtectKernelLogs", "ProtectControlGroups", "ProtectProc",
                    "ProcSubset", "ReadOnlyPaths", "ReadWritePaths", "InaccessiblePaths",
                    "BindPaths", "BindReadOnlyPaths", "TemporaryFileSystem", "RootDirectory",
                    "MountFlags", "DynamicUser", "PrivateUsers", "PrivateNetwork"):
        assert sandbox not in s, sandbox
    # the hardening that does not need one
    assert s["NoNewPrivileges"] == "yes"
    assert s["CapabilityBoundingSet"] == "CAP_SYS_ADMIN"
    assert set(s["RestrictAddressFamilies"].split()) <= {"AF_UNIX", "AF_INET", "AF_INET6",
                                                         "AF_NETLINK"}
    assert s["DevicePolicy"] == "closed" and s["DeviceAllow"] == "/dev/fuse rw"
    assert s["UMask"] == "0077"
    for flag in ("LockPersonality", "RestrictRealtime", "RestrictSUIDSGID",
                 "MemoryDenyWriteExecute", "ProtectClock", "ProtectHostname",
                 "RestrictNamespaces"):
        assert s[flag] == "yes", flag
    assert s["SystemCallArchitectures"] == "native"
    assert s["WatchdogSec"] == "2min"


def test_systemd_analyze_security_rates_the_unit_ok(tmp_path):
    """`systemd-analyze security --offline=yes` (systemd 252 reads the
    file, no running systemd needed): overall exposure <= 5.0 (it was 9.6
    UNSAFE before the hardening)."""
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    unit_copy = tmp_path / "fusefs@data.service"
    shutil.copy(UNIT, unit_copy)
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                        str(unit_copy)], capture_output=True, text=True)
    m = re.search(r"Overall exposure level for fusefs@data\.service: (\d+\.\d+) (\w+)",
                  r.stdout)
    assert r.returncode == 0 and m, r.stdout + r.stderr
    assert float(m.group(1)) <= 5.0, r.stdout
    # the same limit as systemd's own gate (exposure x 10)
    r = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--threshold=50",
                        str(unit_copy)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout


def test_systemd_unit_passes_systemd_analyze_verify(tmp_path):
    """systemd is not PID 1 here, so verify runs offline against a temporary
    root: the distribution's units (for sysinit.target & co.), the unit, and
    stand-ins for the programs it names (verify checks they exist)."""
    if not shutil.which("systemd-analyze") or not os.path.isdir("/usr/lib/systemd/system"):
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    root = tmp_path / "root"
    shutil.copytree("/usr/lib/systemd/system", root / "usr/lib/systemd/system",
                    symlinks=True)
    (root / "etc/systemd/system").mkdir(parents=True)
    shutil.copy(UNIT, root / "etc/systemd/system")
    for key, value in unit()["Service"].items():
        if key.startswith("Exec"):
            prog = root / shlex.split(value)[0].lstrip("-@:+!").lstrip("/")
            prog.parent.mkdir(parents=True, exist_ok=True)
            prog.write_text("#!/bin/sh\n")
            prog.chmod(0o755)
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", f"--root={root}",
                        "fusefs@data.service"], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr.strip(), r.stderr


def recv_until(sock, word, timeout=60):
    """Datagrams received until one has the line @word; all of them."""
    got = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        sock.settimeout(max(0.1, deadline - time.time()))
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            break
        got.append(msg)
        if word in msg.split("\n"):
            return got
    raise AssertionError(f"no {word} within {timeout}s; got {got}")


@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_unit_command_notifies_ready_only_once_mount_answers(ceph, tmp_path, daemons,
                                                             abstract):
    """Run the unit's ExecStart (binary and /etc/fusefs swapped for test
    paths) the way systemd does: NOTIFY_SOCKET set, stopped by SIGTERM to
    the main process.  READY=1 must come after the daemon itself had a
    stat() of the mount point answered: with -d, libfuse has then logged a
    GETATTR of the root (nodeid 1) from the daemon's pid; nothing else
    touches the fresh mount before the test does."""
    ceph.put(POOL, "svc/a", b"ready")
    etc = tmp_path / "etc-fusefs"
    etc.mkdir()
    mnt = tmp_path / "m"
    mnt.mkdir()
    write_config(etc / "data.conf", source=f"rados://{POOL}/svc", mountpoint=mnt,
                 cache_dir=tmp_path / "c", ceph_conf=ceph.conf_path)
    cmd = unit()["Service"]["ExecStart"].replace("%i", "data").replace("/etc/fusefs", str(etc))
    argv = shlex.split(cmd)
    assert argv[0] == "/usr/sbin/fusefs"
    sock, name = notify_socket(tmp_path, abstract)
    with sock:
        d = daemons(argv[1:] + ["-d"], env={"NOTIFY_SOCKET": name}, mnt=mnt)
        got = recv_until(sock, "READY=1")
        log = d.log()                              # read before touching the mount
        getattr_root = re.search(r"opcode: GETATTR \(\d+\), nodeid: 1, .*pid: (\d+)", log)
        assert getattr_root, log                   # the kernel's pid is the thread's
        assert int(getattr_root.group(1)) != os.getpid()
        assert in_proc_mounts(mnt)
        ready = dict(kv.split("=", 1) for kv in got[-1].split("\n") if "=" in kv)
        assert ready["MAINPID"] == str(d.proc.pid)
        assert f"rados://{POOL}/svc" in ready["STATUS"]
        assert any("STATUS=connecting" in m for m in got[:-1]), got
        assert (mnt / "a").read_bytes() == b"ready"
        d.proc.send_signal(signal.SIGTERM)         # KillMode=mixed: main process
        recv_until(sock, "STOPPING=1")
        d.stop(sig=0)
    assert not in_proc_mounts(mnt)


def test_unreachable_notify_socket_is_harmless(ceph, tmp_path, daemons):
    ceph.put(POOL, "svc2/a", b"x")
    mnt = tmp_path / "m"
    mnt.mkdir()
    d = daemons(["mount", f"rados://{POOL}/svc2", mnt, "-f", "--cache-dir", tmp_path / "c",
                 "--ceph-conf", ceph.conf_path],
                env={"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")}, mnt=mnt)
    d.wait_mounted(mnt)
    assert (mnt / "a").read_bytes() == b"x"
    d.stop()


def sandbox():
    """tests/systemd_sandbox.py, which applies the unit's hardening without
    systemd (capability bounding set, no_new_privs, umask, UTS namespace,
    the seccomp filter of SystemCallFilter= & co.)"""
    pytest.importorskip("seccomp", reason="apt-get install python3-seccomp")
    if not shutil.which("setpriv") or not shutil.which("systemd-analyze"):
        pytest.skip("setpriv (util-linux) and systemd-analyze are needed")
    import sys
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    import systemd_sandbox
    return systemd_sandbox


PROBE = r"""
import mmap, os, socket, sys
def attempt(f):
    try:
        f(); return "allowed"
    except OSError as e:
        return e.errno
print(attempt(lambda: os.chown(sys.argv[1], 0, 0)),
      attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW)),
      attempt(lambda: mmap.mmap(-1, 4096, prot=mmap.PROT_WRITE | mmap.PROT_EXEC)),
      attempt(lambda: os.chmod(sys.argv[1], 0o4600)),
      attempt(lambda: socket.socket(socket.AF_INET6).close()),
      oct(os.umask(0)), open("/proc/self/status").read().split("CapBnd:")[1].split()[0])
"""


def test_unit_sandbox_emulation_bites(tmp_path):
    """The emulation the next test relies on really restricts: a process
    under it cannot chown, open a packet socket, map W+X memory or set
    the setuid bit, may open an AF_INET6 socket, has umask 077 and only
    CAP_SYS_ADMIN (bit 21) in its bounding set."""
    sb = sandbox()
    f = tmp_path / "f"
    f.write_bytes(b"")
    argv = sb.sandbox_argv(sb.service_settings(UNIT), ["/usr/bin/python3", "-c", PROBE, str(f)])
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    eperm = str(errno.EPERM)
    assert r.stdout.split() == [eperm, eperm, eperm, eperm, "allowed", "0o77",
                                f"{1 << 21:016x}"], r.stdout


def test_unit_mounts_and_serves_under_its_hardening(store, ceph, tmp_path, daemons):
    """The unit's ExecStart under the unit's sandbox (as systemd would
    apply it), with NOTIFY_SOCKET and WATCHDOG_USEC: READY=1, WATCHDOG=1,
    the mount is in the host's mount table (no namespace of its own),
    reads are right, passthrough still works (CAP_SYS_ADMIN kept),
    nothing in the log was refused, SIGTERM unmounts with status 0."""
    sb = sandbox()
    store.put("hard/d/a", b"hardened" * 1000)
    etc = tmp_path / "etc-fusefs"
    etc.mkdir()
    mnt = tmp_path / "m"
    mnt.mkdir()
    a = store.args()                               # ["--ceph-conf", PATH] or ["--endpoint", URL]
    backend = {k.lstrip("-").replace("-", "_"): v for k, v in zip(a[::2], a[1::2])}
    write_config(etc / "data.conf", source=store.source("hard"), mountpoint=mnt,
                 cache_dir=tmp_path / "c", **backend)
    cmd = unit()["Service"]["ExecStart"].replace("%i", "data").replace("/etc/fusefs", str(etc))
    argv = shlex.split(cmd)
    assert argv[0] == "/usr/sbin/fusefs"
    sock, name = notify_socket(tmp_path, False)
    with sock:
        env = dict(store.env, NOTIFY_SOCKET=name, WATCHDOG_USEC="400000",
                   # a SAN build: LeakSanitizer's tracer needs ptrace(2), which the
                   # unit's filter refuses (leaks are checked by every other test)
                   ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", "") + ":detect_leaks=0")
        d = daemons(argv[1:], env=env, mnt=mnt,
                    wrapper=sb.sandbox_argv(sb.service_settings(UNIT), []))
        try:
            recv_until(sock, "READY=1")
        except AssertionError as e:
            raise AssertionError(f"{e}\nexit status {d.proc.poll()}; log:\n{d.log()}")
        assert in_proc_mounts(mnt)                 # the host's /proc/mounts
        for _ in range(2):                         # a miss, then a hit
            assert (mnt / "d" / "a").read_bytes() == b"hardened" * 1000
        recv_until(sock, "WATCHDOG=1", timeout=10)
        assert stats_of(mnt)["bytes_from_backend"] >= 8000
        assert stat.S_IMODE(os.stat(tmp_path / "c" / "index").st_mode) & 0o077 == 0
        d.proc.send_signal(signal.SIGTERM)
        recv_until(sock, "STOPPING=1")
        d.stop(sig=0)
    log = d.log()
    assert "passthrough: on" in log, log
    for refused in ("Operation not permitted", "not supported", "Bad system call"):
        assert refused not in log, log
    assert not in_proc_mounts(mnt)


# --- signals ------------------------------------------------------------------------

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_signal_with_open_file_unmounts_and_restart_reuses_cache(ceph, tmp_path, daemons,
                                                                 sig):
    data = {f"sig/f{i}": os.urandom(3 << 20) for i in range(3)}
    ceph.put_many(POOL, data)
    mnt = tmp_path / "m"
    mnt.mkdir()
    args = ["mount", f"rados://{POOL}/sig", mnt, "-f", "--cache-dir", tmp_path / "c",
            "--ceph-conf", ceph.conf_path, "--chunk-size", "1M"]
    d = daemons(args, mnt=mnt)
    d.wait_mounted(mnt)
    for k, v in data.items():
        assert (mnt / k.split("/")[1]).read_bytes() == v
    assert stats_of(mnt)["bytes_from_backend"] >= 9 << 20
    held = open(mnt / "f0", "rb")                  # a reader keeps a file open
    try:
        assert held.read(10) == data["sig/f0"][:10]
        d.stop(sig=sig)                            # exit status 0
        assert not in_proc_mounts(mnt)             # lazily unmounted, not stuck
    finally:
        try:
            held.close()
        except OSError as e:                       # FLUSH: the daemon is gone
            assert e.errno == errno.ENOTCONN
    assert not os.path.ismount(mnt)
    d2 = daemons(args, mnt=mnt)                    # restart: same cache
    d2.wait_mounted(mnt)
    for k, v in data.items():
        assert (mnt / k.split("/")[1]).read_bytes() == v
    st = stats_of(mnt)
    assert st["bytes_from_backend"] == 0, st
    assert st["bytes_from_cache"] >= 9 << 20, st
    d2.stop()


def test_sigterm_while_a_read_waits_on_the_backend(ceph, tmp_path, daemons):
    """A reader parked on a backend read (OSD frozen) when SIGTERM comes:
    the reader gets an error, the daemon waits out the read and exits 0
    (under ASan: no use of the finished FUSE session by the late reply)."""
    ceph.put(POOL, "inflight/a", os.urandom(4 << 20))
    mnt = tmp_path / "m"
    mnt.mkdir()
    d = daemons(["mount", f"rados://{POOL}/inflight", mnt, "-f", "--cache-dir",
                 tmp_path / "c", "--ceph-conf", ceph.conf_path, "--op-timeout", "3",
                 "--retries", "0"], mnt=mnt)
    d.wait_mounted(mnt)
    assert os.listdir(mnt) == ["a"]
    result = {}

    def reader():
        try:
            result["len"] = len((mnt / "a").read_bytes())
        except OSError as e:
            result["errno"] = e.errno

    ceph.osd_freeze()
    try:
        t = threading.Thread(target=reader, daemon=True)
        t.start()
        time.sleep(1)                              # the read is parked
        assert t.is_alive()
        d.stop()
    finally:
        ceph.osd_thaw()
    t.join(30)
    # ECONNABORTED: the read was answered after the loop closed its device
    # fds (fusefs answers parked reads before the session goes, never after)
    assert result.get("errno") in (errno.ENOTCONN, errno.EIO, errno.ECONNABORTED), result
    assert not in_proc_mounts(mnt)


def test_restart_after_crash_clears_the_dead_mount(ceph, tmp_path, daemons):
    """Restart=on-failure after SIGKILL: the old mount answers ENOTCONN."""
    ceph.put(POOL, "crash/a", b"again")
    mnt = tmp_path / "m"
    mnt.mkdir()
    args = ["mount", f"rados://{POOL}/crash", mnt, "-f", "--cache-dir", tmp_path / "c",
            "--ceph-conf", ceph.conf_path]
    d = daemons(args, mnt=mnt)
    d.wait_mounted(mnt)
    d.kill()
    with pytest.raises(OSError) as e:
        os.statvfs(mnt)                            # stat() may be answered from cache
    assert e.value.errno == errno.ENOTCONN
    d2 = daemons(args, mnt=mnt)                    # ismount() is true already
    assert wait_for(lambda: "mounted rados://" in d2.log()), d2.log()
    assert "dead FUSE mount" in d2.log()
    assert (mnt / "a").read_bytes() == b"again"
    with open("/proc/mounts") as f:
        assert [l.split()[1] for l in f].count(str(mnt)) == 1
    d2.stop()
    assert not in_proc_mounts(mnt)                 # neither mount is left


def test_sighup_reopens_log_file_and_keeps_serving(ceph, tmp_path, daemons):
    ceph.put(POOL, "hup/a", b"still here")
    mnt = tmp_path / "m"
    mnt.mkdir()
    logf = tmp_path / "fusefs.log"
    d = daemons(["mount", f"rados://{POOL}/hup", mnt, "-f", "--cache-dir", tmp_path / "c",
                 "--ceph-conf", ceph.conf_path, "--log-file", logf], mnt=mnt)
    d.wait_mounted(mnt)
    assert wait_for(lambda: "mounted" in logf.read_text())
    first = logf.read_text()
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} [+-]\d{4} fusefs\[\d+\] info: ",
                    first), first
    os.rename(logf, tmp_path / "fusefs.log.1")     # what logrotate does
    d.proc.send_signal(signal.SIGHUP)
    assert wait_for(lambda: logf.exists() and "reopened" in logf.read_text()), d.log()
    assert d.proc.poll() is None                   # SIGHUP did not stop it
    assert os.path.ismount(mnt)
    assert (mnt / "a").read_bytes() == b"still here"
    d.proc.send_signal(signal.SIGHUP)              # twice: still alive
    time.sleep(0.5)
    assert d.proc.poll() is None and os.path.ismount(mnt)
    d.stop()
    assert "unmounting" in logf.read_text()        # later lines: the new file
    assert "unmounting" not in (tmp_path / "fusefs.log.1").read_text()


def test_log_file_and_syslog_are_exclusive(tmp_path):
    r = run_fusefs("mount", "rados://p/x", str(tmp_path), "--cache-dir", str(tmp_path / "c"),
                   "--log-file", str(tmp_path / "l"), "--syslog")
    assert r.returncode == 2 and "--log-file" in r.stderr, r.stderr


# --- metrics ------------------------------------------------------------------------

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port, path="/metrics"):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    samples, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            types[name] = kind
        elif line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    for name in samples:                           # every sample has a TYPE
        fam = name.split("{")[0]
        for suffix in ("_bucket", "_sum", "_count"):
            base = fam[:-len(suffix)]
            if fam.endswith(suffix) and types.get(base) == "histogram":
                fam = base
        assert fam in types, (name, text)
    return samples, types


def listening_on(port):
    """local addresses (hex, as in /proc/net/tcp*) listening on @port"""
    found = []
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(f) as fh:
            for line in list(fh)[1:]:
                local, state = line.split()[1], line.split()[3]
                addr, p = local.split(":")
                if int(p, 16) == port and state == "0A":
                    found.append(addr)
    return found


def test_metrics_endpoint_counters_move(ceph, tmp_path, daemons):
    ceph.put(POOL, "met/a", os.urandom(2 << 20))
    mnt = tmp_path / "m"
    mnt.mkdir()
    port = free_port()
    d = daemons(["mount", f"rados://{POOL}/met", mnt, "-f", "--cache-dir", tmp_path / "c",
                 "--ceph-conf", ceph.conf_path, "--metrics", f"127.0.0.1:{port}"], mnt=mnt)
    d.wait_mounted(mnt)
    assert listening_on(port) == ["0100007F"]      # 127.0.0.1 only
    before, types = scrape(port)
    assert before["fusefs_up"] == 1 and types["fusefs_up"] == "gauge"
    for name in ("cache_used_bytes", "cache_limit_bytes", "cache_files", "namespace_files"):
        assert types[f"fusefs_{name}"] == "gauge", name
    for name in ("reads_total", "chunk_reads_total", "read_bytes_total",
                 "backend_errors_total", "read_stall_seconds_total"):
        assert types[f"fusefs_{name}"] == "counter", name
    assert before["fusefs_namespace_files"] == 1
    assert (mnt / "a").read_bytes()
    after, _ = scrape(port)
    assert after["fusefs_reads_total"] > before["fusefs_reads_total"]
    # backend latency histogram, cumulative buckets in seconds
    assert types["fusefs_backend_read_seconds"] == "histogram"
    assert after["fusefs_backend_read_seconds_count"] >= 1
    assert after['fusefs_backend_read_seconds_bucket{le="+Inf"}'] == \
        after["fusefs_backend_read_seconds_count"]
    # per-list prefetch state, labelled by list
    (mnt / ".fusefs" / "lists" / "rank-0").write_text("a\n")
    listed, types = scrape(port)
    assert listed['fusefs_list_position{list="rank-0"}'] >= 0
    assert types["fusefs_list_lead_bytes"] == "gauge"
    backend = 'fusefs_read_bytes_total{source="backend"}'
    assert after[backend] >= before[backend] + (2 << 20)
    assert wait_for(lambda: scrape(port)[0]["fusefs_cache_used_bytes"] >= 2 << 20)
    with pytest.raises(urllib.error.HTTPError) as e:
        scrape(port, "/other")
    assert e.value.code == 404
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=10)
    assert e.value.code == 405
    d.stop()
    assert listening_on(port) == []


@pytest.mark.parametrize("addr", ["127.0.0.1", "localhost:9464", "127.0.0.1:0",
                                  "127.0.0.1:70000", "[::1]9464", ":9464", "1.2.3:80"])
def test_metrics_bad_address_is_refused(tmp_path, addr):
    r = run_fusefs("mount", "rados://p/x", str(tmp_path), "--cache-dir", str(tmp_path / "c"),
                   "--metrics", addr)
    assert r.returncode == 2, r.stderr
    assert f"'{addr}'" in r.stderr and "metrics" in r.stderr, r.stderr


def test_metrics_port_in_use_is_an_error(ceph, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        mnt = tmp_path / "m"
        mnt.mkdir()
        r = run_fusefs("mount", f"rados://{POOL}/met", str(mnt), "-f", "--cache-dir",
                       str(tmp_path / "c"), "--ceph-conf", ceph.conf_path,
                       "--metrics", f"127.0.0.1:{port}")
    assert r.returncode == 1, r.stderr
    assert f"127.0.0.1:{port}" in r.stderr, r.stderr
    assert not os.path.ismount(mnt)


# --- credentials --------------------------------------------------------------------

def test_credentials_never_logged(s3store, tmp_path, daemons):
    """S3 keys from the environment: not in the debug log file, not on
    stderr with FUSE tracing, not in an error about the endpoint."""
    ak, sk = s3store.env["AWS_ACCESS_KEY_ID"], s3store.env["AWS_SECRET_ACCESS_KEY"]
    s3store.put("creds/a", b"secret-free")
    mnt = tmp_path / "m"
    mnt.mkdir()
    logf = tmp_path / "debug.log"
    base = ["mount", s3store.source("creds"), mnt, "--cache-dir", tmp_path / "c"]
    d = daemons(base + s3store.args() + ["-f", "--log-level", "debug", "--log-file", logf],
                env=s3store.env, mnt=mnt)
    d.wait_mounted(mnt)
    assert (mnt / "a").read_bytes() == b"secret-free"
    d.stop()
    d2 = daemons(base + s3store.args() + ["-d"], env=s3store.env, mnt=mnt)
    d2.wait_mounted(mnt)
    assert (mnt / "a").read_bytes() == b"secret-free"
    d2.stop()
    endpoint = s3store.ceph.s3_endpoint.replace("://", f"://{ak}:{sk}@")
    r = run_fusefs(*[str(a) for a in base], "--endpoint", endpoint, env=s3store.env)
    assert r.returncode == 2 and "credentials" in r.stderr, r.stderr
    r2 = run_fusefs("mount", f"s3://{ak}:{sk}@bucket/p", str(mnt), "--cache-dir",
                    str(tmp_path / "c"), *s3store.args())
    assert r2.returncode == 2 and "credentials" in r2.stderr, r2.stderr
    assert "S3 credentials from environment" in logf.read_text()
    for text in (logf.read_text(), d.log(), d2.log(), r.stderr, r.stdout, r2.stderr):
        assert sk not in text and ak not in text
