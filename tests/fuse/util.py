"""Helpers of the tests/fuse files (tests/checks.py has those shared with
the integration suite)."""

import os

from checks import MiB

CHUNK = MiB                     # conftest.CHUNK_ARGS


def put(src, files):
    """write {relative path: bytes} below the source directory @src"""
    for rel, data in files.items():
        p = os.path.join(src, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)


def read_uncached(path, off=0, n=-1):
    """read through the daemon: drop the kernel's page cache of @path first,
    so the bytes come from fusefs (its cache or the backend), not the kernel"""
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        f.seek(off)
        return f.read(n)
