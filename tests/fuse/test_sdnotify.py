"""The systemd notify protocol as the unit uses it (Type=notify,
WatchdogSec=), with a Python datagram socket standing in for systemd:
READY=1 once the mount answers, then WATCHDOG=1 every WATCHDOG_USEC/2
for as long as the FUSE loop answers statfs() and the index writer makes
progress; no pings when the watchdog is meant for another process; and
the pings stop while the index writer hangs (held in a commit by a test
hook) and come back when it moves again."""

import os
import socket
import time

from mountlib import notify_socket, wait_for
from util import put, read_uncached


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
    """take what was queued before now (receive times are not send
    times): [(monotonic time, message)]"""
    got = []
    sock.setblocking(False)
    try:
        while True:
            got.append((time.monotonic(), sock.recv(4096).decode()))
    except BlockingIOError:
        pass
    finally:
        sock.setblocking(True)
    return got


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
        # every 200 ms: five pings sent from now take at least 4 periods
        # (however slow the machine: waited for, with a hang guard)
        t0, got = time.monotonic(), []
        while len(got) < 5 and time.monotonic() < t0 + 30:
            got += pings(receive(sock, 0.5))
        assert len(got) >= 5, got
        assert got[4] - t0 >= 0.6, got
        # and about 10 in 2 s; a loop that spins would send far more
        drain(sock)
        assert len(pings(receive(sock, 2.0))) <= 14
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


def test_pings_stop_while_the_index_writer_hangs(mounter, src, tmp_path, hooks):
    """The index writer hangs in a commit (the meta-commit hook holds it
    there, as a frozen cache file system would): the watchdog sees it
    busy for more than half the interval and stops pinging (systemd would
    kill and restart); let go, the pings come back and the mount stops
    cleanly. Counted by the daemon (watchdog_pings, watchdog_withheld),
    so nothing depends on when a datagram arrives."""
    put(src, {"new": os.urandom(4096)})
    sock, name = notify_socket(tmp_path)
    with sock:
        m = mounter(start=False, env=hooks.env)
        m.env.update(NOTIFY_SOCKET=name, WATCHDOG_USEC="600000")
        m.start()
        wait_word(sock, "READY=1")
        assert wait_for(lambda: m.stats()["watchdog_pings"] >= 2, timeout=60), m.log()
        hooks.close("meta-commit")
        read_uncached(m.path("new"))            # its records wait for the writer
        assert wait_for(lambda: m.stats()["watchdog_withheld"] > 0, timeout=60), m.log()
        # the writer stays stuck while the gate is shut: every check from
        # the first that failed fails, none pings
        drain(sock)                             # the pings sent before it
        s = m.stats()
        assert wait_for(lambda: m.stats()["watchdog_withheld"] >= s["watchdog_withheld"] + 3,
                        timeout=60), m.log()
        assert m.stats()["watchdog_pings"] == s["watchdog_pings"]
        assert pings(drain(sock)) == []
        assert "a background thread makes no progress" in m.log()
        hooks.open("meta-commit")
        assert wait_for(lambda: m.stats()["watchdog_pings"] > s["watchdog_pings"],
                        timeout=60), m.log()
        wait_word(sock, "WATCHDOG=1")
        assert "answers again" in m.log()
    m.umount()
