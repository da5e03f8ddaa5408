"""The systemd notify protocol as the unit uses it (Type=notify,
WatchdogSec=), with a Python datagram socket standing in for systemd:
READY=1 once the mount answers, then WATCHDOG=1 every WATCHDOG_USEC/2
for as long as the FUSE loop answers statfs() and the index writer makes
progress; no pings when the watchdog is meant for another process; and
the pings stop while the index writer hangs (its file system frozen)
and come back when it moves again."""

import os
import socket
import subprocess
import time

import pytest

from mountlib import notify_socket
from util import put


def receive(sock, seconds):
    """[(monotonic time, message)] received during @seconds"""
    got = []
    deadline = time.monotonic() + seconds
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return got
        sock.settimeout(left)
        try:
            msg = sock.recv(4096).decode()
        except socket.timeout:
            return got
        got.append((time.monotonic(), msg))            # when it arrived


def wait_word(sock, word, timeout=60):
    """datagrams until one has the line @word; all of them"""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for t, msg in receive(sock, 0.2):
            got.append((t, msg))
            if word in msg.split("\n"):
                return got
    raise AssertionError(f"no {word} within {timeout}s; got {got}")


def drain(sock):
    """drop what was queued before now (receive times are not send times)"""
    sock.setblocking(False)
    try:
        while True:
            sock.recv(4096)
    except BlockingIOError:
        pass
    finally:
        sock.setblocking(True)


def pings(msgs):
    return [t for t, m in msgs if "WATCHDOG=1" in m.split("\n")]


def test_ready_then_watchdog_every_half_interval(mounter, src, tmp_path):
    """(an abstract socket; the path form is tested with the unit in
    tests/integration/test_service.py)"""
    put(src, {"a": b"alive"})
    sock, name = notify_socket(tmp_path, abstract=True)
    with sock:
        m = mounter(start=False)
        m.env.update(NOTIFY_SOCKET=name, WATCHDOG_USEC="400000")
        m.start()
        wait_word(sock, "READY=1")
        assert open(m.path("a"), "rb").read() == b"alive"
        drain(sock)
        got = pings(receive(sock, 2.0))
        # every 200 ms: about 10 in 2 s; a loaded machine may lose a few,
        # a loop that spins would send far more
        assert 5 <= len(got) <= 14, got
        gaps = [b - a for a, b in zip(got, got[1:])]
        assert max(gaps) < 1.0, gaps                  # never near the 400 ms limit twice over
        # every 200 ms (a loaded machine may deliver two back to back)
        assert 0.15 < sorted(gaps)[len(gaps) // 2] < 0.4, gaps
    assert "watchdog: WATCHDOG=1 every 200 ms" in m.log()


def test_no_pings_unless_the_watchdog_is_ours(mounter, tmp_path, env={"WATCHDOG_PID": "1"}):
    """WATCHDOG_PID names systemd's pid, not ours: no watchdog (without
    WATCHDOG_USEC at all, the service tests see no "watchdog:" line)"""
    sock, name = notify_socket(tmp_path)
    with sock:
        m = mounter(start=False)
        m.env.pop("WATCHDOG_USEC", None)
        m.env.update(NOTIFY_SOCKET=name, **env)
        if "WATCHDOG_PID" in env:                 # systemd's pid, not ours
            m.env["WATCHDOG_USEC"] = "200000"
        m.start()
        wait_word(sock, "READY=1")
        assert pings(receive(sock, 0.8)) == []
    assert "watchdog:" not in m.log()


@pytest.fixture
def freezable(tmp_path):
    """an ext4 file system on a loop device, mounted noatime (a read
    must not wait on the freeze), and freeze(on) for it; always thawed
    and unmounted at the end"""
    img, mnt = tmp_path / "fs.img", tmp_path / "fs"
    mnt.mkdir()
    with open(img, "wb") as f:
        f.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", str(img)], check=True)
    r = subprocess.run(["mount", "-o", "loop,noatime", str(img), str(mnt)],
                       capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"no loop device here: {r.stderr.strip()}")
    frozen = []

    def freeze(on):
        if bool(frozen and frozen[0]) != on:
            subprocess.run(["fsfreeze", "-f" if on else "-u", str(mnt)], check=True)
        frozen[:] = [on]
    freeze.path = mnt
    try:
        yield freeze
    finally:
        if frozen and frozen[0]:
            subprocess.run(["fsfreeze", "-u", str(mnt)])
        subprocess.run(["umount", "-l", str(mnt)])    # lazily: fusefs may still hold it


def test_pings_stop_while_the_index_writer_hangs(mounter, src, tmp_path, freezable):
    """The cache directory's file system frozen: the index writer's next
    commit blocks, the watchdog sees it busy for more than half the
    interval and stops pinging (systemd would kill and restart);
    thawed, the pings come back and the mount stops cleanly."""
    put(src, {f"f{i}": os.urandom(4096) for i in range(4)})
    sock, name = notify_socket(tmp_path)
    cache = str(freezable.path / "cache")
    with sock:
        m = mounter(cache=cache, start=False)
        m.env.update(NOTIFY_SOCKET=name, WATCHDOG_USEC="600000")
        m.start()
        try:
            wait_word(sock, "READY=1")
            for i in range(4):                       # cached and indexed
                open(m.path(f"f{i}"), "rb").read()
            assert len(pings(receive(sock, 1.2))) >= 2
            freezable(True)
            for i in range(4):                       # hits: heat records for the writer
                open(m.path(f"f{i}"), "rb").read()
            start = time.monotonic()
            got = pings(receive(sock, 4.0))
            # the heat is flushed within ~1.25 s, the writer is then stuck
            # for good: a check 300 ms later fails, and every one after it
            assert not [t for t in got if t > start + 2.5], (got, m.log())
            assert "a background thread makes no progress" in m.log()
            freezable(False)
            assert len(pings(receive(sock, 1.5))) >= 2, m.log()
            assert "answers again" in m.log()
        finally:
            freezable(False)
        m.umount()
