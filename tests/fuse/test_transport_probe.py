"""bench/fuse_transport (the FUSE transport probe of `make bench-transport`):
it mounts, serves every byte right, and answers on the transport it names;
bench/transport.py stops at a missing probe before it touches anything."""

import json
import os
import subprocess
import sys
import time

import pytest

from mountlib import FUSEFS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = os.path.join(os.path.dirname(FUSEFS), "fuse_transport")
PARAM = "/sys/module/fuse/parameters/enable_uring"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount)")


def serve_and_read(tmp_path, mode, files=300):
    """mount the probe in @mode, read every file twice; its request counts"""
    mnt = tmp_path / ("mnt-" + mode)
    mnt.mkdir()
    proc = subprocess.Popen([PROBE, "serve", str(mnt), mode, str(files)],
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while not os.path.ismount(mnt):
            assert proc.poll() is None, proc.stderr.read()
            assert time.time() < deadline, "probe not mounted"
            time.sleep(0.05)
        for _ in range(2):
            r = subprocess.run([PROBE, "client", str(mnt), str(files), "4", str(proc.pid)],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, r.stdout + r.stderr
            res = json.loads(r.stdout)
            assert res["files"] == files and res["bad"] == 0
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return json.loads(err.strip().splitlines()[-1])


def test_classic_probe_serves_every_file(tmp_path):
    counts = serve_and_read(tmp_path, "classic")
    # LOOKUP, OPEN, READ, RELEASE per file on the first pass
    assert counts["dev_requests"] >= 4 * 300
    assert counts["ring_requests"] == 0


def test_uring_probe_answers_on_rings(tmp_path):
    if not os.path.exists(PARAM):
        pytest.skip("this kernel has no FUSE over io_uring")
    with open(PARAM) as f:
        if f.read().strip() != "Y":
            pytest.skip("enable_uring is off (make bench-transport turns it on for its run)")
    counts = serve_and_read(tmp_path, "uring")
    assert counts["ring_requests"] >= 4 * 300


def test_transport_script_stops_at_a_missing_probe():
    before = open(PARAM).read() if os.path.exists(PARAM) else None
    r = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "transport.py"),
                        "--probe", "/nonexistent/fuse_transport"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "transport: /nonexistent/fuse_transport is not executable" in r.stderr + r.stdout
    if before is not None:
        assert open(PARAM).read() == before
