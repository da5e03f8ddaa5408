"""Directory listings across re-listings: a listing that spans `refresh`
returns every name that did not change exactly once (an open directory
reads the tree it began with), and the replaced tree is freed once the
last listing of it is closed (the ns_retired gauge)."""

import ctypes
import os
import struct

from mountlib import wait_for
from util import put

SYS_getdents64 = 217        # x86_64
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def getdents(fd, size=4096):
    """one getdents64 call (one READDIR of the kernel): the names it gave"""
    buf = ctypes.create_string_buffer(size)
    n = libc.syscall(SYS_getdents64, fd, buf, size)
    assert n >= 0, os.strerror(ctypes.get_errno())
    names, at = [], 0
    while at < n:
        reclen = struct.unpack_from("H", buf.raw, at + 16)[0]
        name = buf.raw[at + 19:at + reclen].split(b"\0", 1)[0].decode()
        names.append(name)
        at += reclen
    return names


def refresh(m):
    """re-list now and wait until the new tree is served and the kernel
    was told (ns_swaps counts a swap after that)"""
    before = m.stats()["ns_swaps"]
    with open(m.path(".fusefs/refresh"), "w") as f:
        f.write("1\n")
    assert wait_for(lambda: m.stats()["ns_swaps"] > before, timeout=60, step=0.002)


def test_listing_spanning_refresh_returns_unchanged_names_once(mounter, src):
    """each round: read the first batch of a directory of 200 unchanged
    files, add (or remove) seven names that sort before them, refresh, read
    the rest; every unchanged name comes exactly once (before the fix the
    rest was read at the old offsets in the new tree: seven names repeated
    or skipped)"""
    keep = [f"k{i:04d}" for i in range(200)]
    put(src, {f"d/{k}": b"" for k in keep})
    extra = [f"a{i}" for i in range(7)]
    m = mounter("--list-refresh", "0")
    d = m.path("d")
    # 150 here (about 4 s); make faults runs 1,000 (FUSEFS_LISTING_ROUNDS)
    rounds = int(os.environ.get("FUSEFS_LISTING_ROUNDS", "150"))
    for r in range(rounds):
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            names = getdents(fd)
            assert 2 < len(names) < 200 + 2, names    # more batches to come
            for e in extra:
                p = os.path.join(src, "d", e)
                if r % 2 == 0:
                    open(p, "wb").close()
                else:
                    os.unlink(p)
            refresh(m)
            # this listing holds the old tree (and maybe the last one's, whose
            # RELEASEDIR the kernel sends in the background)
            assert m.stats()["ns_retired"] >= 1
            while True:
                more = getdents(fd)
                if not more:
                    break
                names += more
        finally:
            os.close(fd)
        got = sorted(n for n in names if n.startswith("k"))
        assert got == keep, (r, sorted(set(keep) ^ set(got)),
                             [n for n in set(got) if got.count(n) > 1])
    # every replaced tree is freed once its listings are closed
    assert wait_for(lambda: m.stats()["ns_retired"] == 0, timeout=60)
    # a listing begun now reads the new tree
    want = sorted(keep + (extra if rounds % 2 else []))
    assert sorted(os.listdir(d)) == want
