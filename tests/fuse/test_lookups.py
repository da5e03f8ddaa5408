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

FILES = 4000
THREADS = 8
PASSES = 3


@pytest.mark.parametrize("args", [(), ("--passthrough", "off")], ids=["auto", "off"])
def test_stats_of_one_directory_reach_the_daemon_in_parallel(mounter, src, args):
    # Overlap is timing: a LOOKUP takes the daemon microseconds, so on a
    # busy 2-CPU machine a pass can go by one at a time even without the
    # kernel's mutex.  Up to PASSES directories are tried (each name is
    # looked up once: dentries are cached); with the kernel serializing
    # them the count stays 1 in every pass.
    for p in range(PASSES):
        d = src / f"d{p}"
        d.mkdir()
        for i in range(FILES):
            (d / f"f{i:05}").write_bytes(b"")
    m = mounter(*args)
    assert m.stats()["lookups_concurrent_max"] <= 1
    names = [f"f{i:05}" for i in range(FILES)]
    errors = []

    def work(dirname, part):
        try:
            for n in part:
                assert os.stat(m.path(f"{dirname}/{n}")).st_size == 0
        except Exception as e:      # noqa: BLE001 - reported below
            errors.append(e)

    for p in range(PASSES):
        ts = [threading.Thread(target=work, args=(f"d{p}", names[i::THREADS]))
              for i in range(THREADS)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors, errors[:3]
        if m.stats()["lookups_concurrent_max"] > 1:
            break
    assert m.stats()["lookups_concurrent_max"] > 1, m.stats()
    assert "cannot wrap the FUSE device" not in m.log()
