"""Lookups of the files of one directory run in parallel.

libfuse 3.14 wants FUSE_CAP_PARALLEL_DIROPS by default but leaves it out of
its INIT reply, and the kernel then holds a per-directory mutex around every
LOOKUP and READDIR: the stat()s of one directory's files from several
threads reach the daemon one at a time (about 20,000/s for a million-entry
directory here, docs/benchmarks-scale.md). fusefs patches the flag into the
reply (passthrough.c), with passthrough on or off. The daemon counts the
most LOOKUPs it answered at once (lookups_concurrent_max): 1 while the
kernel serializes them, more once it does not."""

import os
import threading

import pytest

from mountlib import wait_for

THREADS = 8


@pytest.mark.parametrize("args", [(), ("--passthrough", "off")], ids=["auto", "off"])
def test_stats_of_one_directory_reach_the_daemon_in_parallel(mounter, src, hooks, args):
    # The "lookup" gate holds every LOOKUP of a dataset name in the daemon
    # (counted as in flight) until the test opens it: with the kernel's
    # per-directory mutex the second thread's LOOKUP never arrives while
    # the first is held, so the count stays 1; without it, the others
    # arrive.  No timing decides it: the wait below only bounds a hang.
    (src / "d").mkdir()             # not the root: stats() looks up there
    for i in range(THREADS):
        (src / "d" / f"f{i:05}").write_bytes(b"")
    m = mounter(*args, env=hooks.env)
    assert m.stats()["lookups_concurrent_max"] <= 1
    errors = []

    def work(name):
        try:
            assert os.stat(m.path(name)).st_size == 0
        except Exception as e:      # noqa: BLE001 - reported below
            errors.append(e)

    os.stat(m.path("d"))            # looked up before the gate shuts
    hooks.close("lookup")
    ts = [threading.Thread(target=work, args=(f"d/f{i:05}",)) for i in range(THREADS)]
    try:
        for t in ts:
            t.start()
        parallel = wait_for(lambda: m.stats()["lookups_concurrent_max"] > 1,
                            timeout=20)
    finally:
        hooks.open("lookup")
        for t in ts:
            t.join()
    assert not errors, errors[:3]
    assert parallel, m.stats()
    assert "cannot wrap the FUSE device" not in m.log()
