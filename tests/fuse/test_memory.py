"""--memory-limit: the daemon's memory stays bounded whatever the readers
do. A file:// dataset twice the cache, read by 4 readers at once with 4 MiB
chunks (read-ahead, demand misses, chunks the cache will not keep): the
daemon's peak RSS (VmHWM) stays under its RSS at mount + the limit + the
documented slack (docs/operations.md, "Memory"), every byte is right, and
a larger limit serves the same workload."""

import hashlib
import os
import threading

from checks import MiB, rnd
from mountlib import wait_for
from util import put

FILES, SIZE = 6, 32 * MiB       # 192 MiB, read once by 4 readers
CACHE = "96M"                   # half the dataset
SLACK = 32 * MiB                # per-worker bounce buffers, malloc arenas


def vm(pid, field):
    """/proc/PID/status field in bytes"""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


def read_all(m, names, want, started=None):
    """4 readers, each its share of @names (1 MiB reads, the kernel's page
    cache dropped first): the names whose bytes differ. @started() is
    called once the readers run."""
    bad = []

    def reader(k):
        for n in names[k::4]:
            h = hashlib.sha256()
            with open(m.path(n), "rb", buffering=0) as f:
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
                while True:
                    b = f.read(MiB)
                    if not b:
                        break
                    h.update(b)
            if h.digest() != want[n]:
                bad.append(n)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    try:
        if started:
            started()
    finally:
        for t in threads:
            t.join()
    return bad


def dataset(src):
    data = {f"shard{i:02d}": rnd(SIZE, i) for i in range(FILES)}
    put(src, data)
    return sorted(data), {n: hashlib.sha256(b).digest() for n, b in data.items()}


def stats(m):
    with open(m.path(".fusefs/stats")) as f:
        return {k: int(v) for k, v in (line.split() for line in f
                                       if " " in line and "{" not in line)}


def test_peak_rss_under_the_limit(mounter, src, tmp_path, hooks):
    """(--max-threads 8: the per-worker bounce buffers in the slack do not
    depend on how many workers libfuse started)"""
    names, want = dataset(src)
    m = mounter("--chunk-size", "4M", "--cache-size", CACHE,
                "--memory-limit", "48M", "--passthrough", "off",
                "--max-threads", "8")
    base = vm(m.proc.pid, "VmRSS")
    assert read_all(m, names, want) == []
    peak = vm(m.proc.pid, "VmHWM")
    st = stats(m)
    assert st["mem_budget_limit_bytes"] == 48 * MiB
    assert st["mem_budget_peak_bytes"] <= 48 * MiB + 4 * MiB   # one overdraft
    assert 0 < st["mem_rss_bytes"] and st["mem_peak_rss_bytes"] >= peak
    assert st["bytes_from_backend"] >= FILES * SIZE
    assert peak <= base + 48 * MiB + SLACK, \
        f"peak RSS {peak >> 20} MiB, at mount {base >> 20} MiB"
    m.umount()

    # the same workload with a larger limit (and an empty cache): the
    # backend's reads held (file-read gate) until more than the first
    # limit is in flight: besides the readers' first misses, a 4 KiB
    # read of every other chunk of every file, each on its own thread
    # (POSIX_FADV_RANDOM: the kernel asks for just that page), all misses
    # at once (no read-ahead: a reader read-ahead opens only as it moves
    # on from chunk to chunk, which a held backend never lets it)
    # (--random-reads chunks: each page read takes a whole chunk's buffer)
    m = mounter("--chunk-size", "4M", "--cache-size", CACHE,
                "--memory-limit", "512M", "--passthrough", "off",
                "--random-reads", "chunks",
                cache=str(tmp_path / "cache2"), env=hooks.env)
    hooks.close("file-read")
    data = {n: rnd(SIZE, i) for i, n in enumerate(names)}
    wrong = []

    def one_page(n, off):
        fd = os.open(m.path(n), os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            if os.pread(fd, 4096, off) != data[n][off:off + 4096]:
                wrong.append((n, off))
        finally:
            os.close(fd)
    pages = [threading.Thread(target=one_page, args=(n, k * 4 * MiB))
             for n in names for k in range(1, SIZE // (4 * MiB), 2)]

    def beyond_the_first_limit():
        for t in pages:
            t.start()
        try:
            assert wait_for(lambda: stats(m)["mem_budget_used_bytes"] > 48 * MiB,
                            timeout=60), stats(m)
        finally:
            hooks.open("file-read")
            for t in pages:
                t.join()
    assert read_all(m, names, want, started=beyond_the_first_limit) == []
    assert wrong == []
    st = stats(m)
    assert st["mem_budget_limit_bytes"] == 512 * MiB
    assert st["mem_budget_peak_bytes"] > 48 * MiB    # it used the room
    assert st["mem_budget_overdraft"] == 0
