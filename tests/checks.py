"""Data and checks shared by the FUSE suite (tests/fuse, file:// sources)
and the integration suite (tests/integration, Ceph): the same behaviour is
tested through both, on datasets of different sizes."""

import os
import random
import threading

MiB = 1 << 20


def rnd(n, seed):
    return random.Random(seed).randbytes(n)


def cached(m, rel):
    """bytes of @rel in the fusefs cache of Mount @m"""
    return int(os.getxattr(m.path(rel), "user.fusefs.cached"))


def check_random_reads(path, want, count=200, most=3 * MiB, seed=7):
    """@count reads of 1..@most bytes at random offsets of @path"""
    r = random.Random(seed)
    with open(path, "rb") as f:
        for _ in range(count):
            off = r.randrange(len(want))
            n = r.randrange(1, most)
            f.seek(off)
            assert f.read(n) == want[off:off + n], (path, off, n)


def concurrent_readers(path, want, n=8, reads=100):
    """@n threads read @path at once, odd ones whole, even ones 64 KiB at
    random offsets; returns what went wrong (empty: all bytes right)"""
    errors = []

    def reader(i):
        r = random.Random(i)
        try:
            with open(path, "rb") as f:
                if i % 2:
                    if f.read() != want:
                        errors.append(f"reader {i}: whole file differs")
                    return
                for _ in range(reads):
                    off = r.randrange(len(want))
                    f.seek(off)
                    if f.read(65536) != want[off:off + 65536]:
                        errors.append(f"reader {i}: bytes at {off} differ")
        except OSError as e:
            errors.append(f"reader {i}: {e}")

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def data_files(cache):
    """the data files of cache directory @cache (not its spares)"""
    out = []
    for root, dirs, files in os.walk(os.path.join(cache, "data")):
        if "spare" in dirs:
            dirs.remove("spare")
        out += [os.path.join(root, f) for f in files]
    return out


def spare_files(cache):
    """the spare (evicted, emptied) data files of cache directory @cache"""
    d = os.path.join(cache, "data", "spare")
    return [os.path.join(d, f) for f in os.listdir(d)] if os.path.isdir(d) else []


def flip_cached_byte(cache, at=1000):
    """corrupt one bit at offset @at of the only data file in @cache that
    holds at least 100 bytes (and drop it from the page cache)"""
    (path,) = [p for p in data_files(cache) if os.path.getsize(p) >= 100]
    with open(path, "r+b") as f:
        f.seek(at)
        b = f.read(1)
        f.seek(at)
        f.write(bytes([b[0] ^ 0x01]))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


# epoch lists with bad lines: (name, list, what the report must say)
MALFORMED = [
    ("unknown", b"s001\nno/such/file\ns002\n", {"accepted": 2, "rejected_unknown": 1}),
    ("dirs", b"s001\n.\n", {"accepted": 1}),
    ("dup", b"s001\ns001\ns002\n", {"accepted": 2, "rejected_duplicate": 1}),
    ("empty", b"\n\ns001\n\n", {"accepted": 1, "rejected_empty": 3}),
    ("crlf", b"s001\r\ns002\r\n", {"accepted": 2}),
    ("long", b"s001\n" + b"x" * 10000 + b"\n", {"accepted": 1, "rejected_too_long": 1}),
    ("binary", b"s001\n\x00\xff\xfe garbage\n\xc3\x28\n", {"accepted": 1, "rejected_binary": 2}),
]
