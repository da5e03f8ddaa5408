"""The control files under MNT/.fusefs/ over a file:// source: stats, pins,
eviction, epoch lists and the prefetcher ahead of the reader, malformed
lists. Ported from tests/integration/test_prefetch.py, sized down."""

import errno
import os
import random
import re
import shutil
import subprocess
import time

import pytest

from checks import MALFORMED, MiB, cached, rnd
from mountlib import run_fusefs, wait_for
from util import put, read_uncached


@pytest.fixture
def shards(src):
    """32 files of 1 MiB (one chunk each)"""
    data = {f"s{i:03d}": rnd(MiB, i) for i in range(32)}
    put(src, data)
    return data


def ctl_write(m, name, data):
    with open(os.path.join(m.mnt, ".fusefs", name), "wb") as f:
        f.write(data)


def ctl_read(m, name):
    with open(os.path.join(m.mnt, ".fusefs", name), "rb") as f:
        return f.read().decode()


def parse(text):
    return {k: int(v) for k, v in (line.split() for line in text.splitlines())}


def test_stats_file_and_xattrs(mounter, src):
    put(src, {"d/f": b"x" * 3000})
    m = mounter()
    assert ".fusefs" not in os.listdir(m.mnt)          # dataset walks miss it
    assert {"stats", "lists", "pin", "unpin", "evict"} <= set(os.listdir(m.path(".fusefs")))
    assert read_uncached(m.path("d/f")) == b"x" * 3000
    st = parse(ctl_read(m, "stats"))
    assert st["listings"] == 1 and st["bytes_from_backend"] == 3000
    assert st["ns_files"] == 1, st
    assert m.stats()["bytes_from_backend"] == 3000      # the xattr agrees
    assert os.getxattr(m.path("d/f"), "user.fusefs.key") == b"d/f"
    assert wait_for(lambda: os.getxattr(m.path("d/f"), "user.fusefs.cached") == b"4096")
    r = run_fusefs("stats", m.mnt)
    assert r.returncode == 0 and "\nbytes_from_backend 3000\n" in "\n" + r.stdout


def test_xattrs_by_name_not_listed_copies_clean(mounter, src, tmp_path):
    """user.fusefs.* are answered by name but listed nowhere, so cp -a,
    cp --preserve=all and rsync -X copy none of them; names of other
    namespaces (what ls -l asks of every entry) are EOPNOTSUPP, which ls
    remembers for the file system instead of asking per entry"""
    put(src, {"d/f": b"x" * 3000})
    m = mounter()
    assert read_uncached(m.path("d/f")) == b"x" * 3000
    for p in (m.mnt, m.path("d"), m.path("d/f")):
        assert os.listxattr(p) == [], p
    assert os.getxattr(m.path("d/f"), "user.fusefs.key") == b"d/f"
    assert m.stats()["bytes_from_backend"] == 3000
    for name, err in (("user.fusefs.nope", errno.ENODATA), ("user.other", errno.ENODATA),
                      ("security.selinux", errno.EOPNOTSUPP),
                      ("system.posix_acl_access", errno.EOPNOTSUPP)):
        with pytest.raises(OSError) as e:
            os.getxattr(m.path("d/f"), name)
        assert e.value.errno == err, name
    # user.fusefs.* still work after those (no ENOSYS remembered by the kernel)
    # (the chunk is stored after the read's reply: waited for)
    assert wait_for(lambda: os.getxattr(m.path("d/f"), "user.fusefs.cached")
                    in (b"3000", b"4096"))
    copies = [(["cp", "-a"], "a"), (["cp", "-r", "--preserve=all"], "all")]
    if shutil.which("rsync"):
        copies.append((["rsync", "-aX"], "rsync"))
    for cmd, out in copies:
        dst = tmp_path / out
        dst.mkdir()
        r = subprocess.run(cmd + [m.path("d/f"), m.path("d"), str(dst)],
                           capture_output=True, text=True)
        assert r.returncode == 0 and not r.stderr, (cmd, r)
        r = subprocess.run(["cp", "-a", m.mnt + "/.", str(dst / "root")],
                           capture_output=True, text=True)
        assert r.returncode == 0 and not r.stderr, r
        for p in (dst / "f", dst / "d", dst / "d" / "f", dst / "root"):
            assert not [x for x in os.listxattr(p) if x.startswith("user.fusefs.")], (cmd, p)
        assert (dst / "f").read_bytes() == b"x" * 3000


def test_control_files_have_no_xattrs(mounter, src):
    """ls -la of .fusefs asks for extended attributes of every entry:
    none exist (ENODATA, EOPNOTSUPP outside user.*), none fail"""
    m = mounter()
    ctl = m.path(".fusefs")
    r = subprocess.run(["ls", "-la", ctl], capture_output=True, text=True)
    assert r.returncode == 0 and not r.stderr, r
    assert "stats" in r.stdout
    for p in (ctl, os.path.join(ctl, "stats"), os.path.join(ctl, "lists")):
        assert os.listxattr(p) == []
        with pytest.raises(OSError) as e:
            os.getxattr(p, "user.fusefs.version")
        assert e.value.errno == errno.ENODATA, p


def test_pin_unpin_evict(mounter, shards):
    m = mounter("--cache-size", "8M", "--evict", "lru")
    read_uncached(m.path("s000"))
    ctl_write(m, "pin", b"s000\n")
    for n in sorted(shards)[1:]:
        assert read_uncached(m.path(n)) == shards[n]
    assert m.stats()["evictions"] > 10
    assert cached(m, "s000") == MiB                     # pinned: kept
    ctl_write(m, "unpin", b"s000\n")
    for n in sorted(shards)[1:]:
        read_uncached(m.path(n))
    assert cached(m, "s000") == 0                       # unpinned: evicted
    last = sorted(shards)[-1]                           # stored after the reply
    assert wait_for(lambda: cached(m, last) == MiB)
    ctl_write(m, "evict", b"\n")                        # the whole tree
    assert m.stats()["cache_bytes_used"] == 0
    assert all(cached(m, n) == 0 for n in shards)


def test_unknown_pin_path_is_refused(mounter, shards):
    m = mounter()
    with pytest.raises(OSError):
        ctl_write(m, "pin", b"no/such/file\n")
    assert cached(m, "s001") == 0


def test_list_is_prefetched_in_order_ahead_of_reader(mounter, shards, tmp_path):
    m = mounter("--cache-size", "64M", "--readahead", "0")
    order = sorted(shards)
    random.Random(3).shuffle(order)
    ctl_write(m, "lists/rank0", "".join(n + "\n" for n in order).encode())
    report = ctl_read(m, "lists/rank0")
    assert "accepted 32" in report, report
    assert wait_for(lambda: all(cached(m, n) == MiB for n in order), timeout=20)
    s = m.stats()
    assert s["prefetch_chunks"] == 32 and s["bytes_from_backend"] == 32 * MiB, s
    assert s["lists_published"] == 1
    for n in order:                                     # the epoch: all hits
        assert read_uncached(m.path(n)) == shards[n]
    s = m.stats()
    assert s["bytes_from_backend"] == 32 * MiB and s["misses"] == 0, s
    r = run_fusefs("status", m.mnt)
    assert 'list_position{list="rank0"} 32' in r.stdout, r.stdout


def test_list_larger_than_cache_keeps_the_window(mounter, shards, tmp_path):
    # room for 8 of the 32 files: the first 8 of the list, nothing else
    m = mounter("--cache-size", "8M", "--readahead", "0")
    order = sorted(shards)
    random.Random(4).shuffle(order)
    (tmp_path / "l.txt").write_text("".join(n + "\n" for n in order))
    r = run_fusefs("prefetch", m.mnt, "--list", str(tmp_path / "l.txt"))
    assert r.returncode == 0 and "accepted 32" in r.stdout, r.stderr
    assert wait_for(lambda: sum(cached(m, n) for n in order[:8]) == 8 * MiB)
    time.sleep(0.5)                     # time enough to fetch too far
    assert sum(cached(m, n) for n in order[8:]) == 0    # window not evicted
    # reading on: the window moves; every next file arrives without the
    # reader asking for it (it would be a miss)
    for n in order:
        assert wait_for(lambda: cached(m, n) == MiB, timeout=10), n
        assert read_uncached(m.path(n)) == shards[n]
    s = m.stats()
    assert s["misses"] == 0 and s["cache_bytes_used"] <= 8 * MiB, s
    # each fetched once: to disk, or into memory first (staged while the
    # cache held files needed sooner) and written when room appeared
    assert s["prefetch_chunks"] + s["staged_chunks"] == 32, s
    assert s["bytes_from_backend"] == 32 * MiB, s


def test_malformed_lists_are_reported(mounter, shards):
    m = mounter()
    for name, data, want in MALFORMED:
        ctl_write(m, f"lists/{name}", data)
        report = ctl_read(m, f"lists/{name}")
        for k, v in want.items():
            assert re.search(rf"^{k} {v}( |$)", report, re.M), (name, k, report)
    assert m.stats()["lists_published"] == len(MALFORMED)


def test_all_bad_list_is_refused_with_einval(mounter, shards):
    m = mounter()
    with pytest.raises(OSError) as e:
        ctl_write(m, "lists/bad", b"\x00\x01\x02" * 1000 + b"\nnope\n")
    assert e.value.errno == errno.EINVAL
    assert m.stats()["lists_published"] == 0
    assert m.stats()["prefetch_chunks"] == 0


def test_a_dataset_dir_called_fusefs_is_shadowed_not_listed(mounter, src):
    """objects under a top-level .fusefs/ are shadowed by the control
    directory: the root's listing leaves the name out (with readdirplus it
    handed the kernel the dataset's directory under that name, and then
    .fusefs/stats was looked up in it)"""
    put(src, {".fusefs/x": b"shadowed", ".fusefs/y/z": b"z", "a": b"a"})
    m = mounter()
    assert sorted(os.listdir(m.mnt)) == ["a"]
    for _ in range(2):                  # after the listing too
        with open(m.path(".fusefs/stats")) as f:
            assert "hits" in f.read()
    assert not os.path.exists(m.path(".fusefs/x"))
    # counted and named, once (it said "0 shadowed" and nothing else)
    st = m.stats()
    assert st["ns_shadowed"] == 2 and st["ns_files"] == 1, st
    warn = [line for line in m.log().splitlines() if "'.fusefs'" in line]
    assert len(warn) == 1, m.log()
    assert "shadowed by the control directory" in warn[0] and "2 object" in warn[0]
    assert "2 shadowed" in m.log()


def test_heat_refuses_bad_arguments(mounter, src):
    """`fusefs heat` takes --top N (a number) and `export`, nothing else:
    a bad or missing value or an unknown option is a usage error (exit
    2), not a listing of another length or a 'not a mount' (exit 1)"""
    put(src, {"a": b"x", "b": b"y"})
    m = mounter()
    read_uncached(m.path("a"))
    read_uncached(m.path("b"))
    r = run_fusefs("heat", m.mnt, "--top", "1")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 2, r   # header + 1
    r = run_fusefs("heat", m.mnt, "--top=0")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 1, r
    for args in (["--top", "abc"], ["--top", "-1"], ["--top", "1x"], ["--bogus"],
                 ["--top"], [m.mnt]):
        r = run_fusefs("heat", m.mnt, *args)
        assert r.returncode == 2 and "usage: fusefs heat" in r.stderr, (args, r)
        assert r.stdout == "", (args, r.stdout)


def test_prefetch_refuses_a_name_that_is_not_a_list_name(mounter, src, tmp_path):
    """--name is a list name ([A-Za-z0-9._-], not starting with '.', up to
    63 bytes): '../evict' was joined to 'lists/' and walked to
    .fusefs/evict, so publishing the list evicted its files"""
    put(src, {"a": b"x" * 4096})
    m = mounter()
    read_uncached(m.path("a"))
    assert wait_for(lambda: cached(m, "a") == 4096)
    lst = tmp_path / "l.txt"
    lst.write_text("a\n")
    for name in ("../evict", "../pin", "..", ".hidden", "a/b", "", "x" * 64):
        r = run_fusefs("prefetch", m.mnt, "--list", str(lst), "--name", name)
        assert r.returncode == 2, (name, r.returncode, r.stdout, r.stderr)
        assert "list name" in r.stderr, (name, r.stderr)
    assert cached(m, "a") == 4096
    r = run_fusefs("prefetch", m.mnt, "--list", str(lst), "--name", "ok_name-1.x")
    assert r.returncode == 0, r.stderr


def test_evict_of_an_open_file_waits_for_its_last_close(mounter, src):
    """an open file keeps its cached bytes (a reader or the kernel may be
    reading them): evict succeeds, says so, and the daemon evicts the file
    at its last close; the other files asked for go at once"""
    put(src, {"o": rnd(MiB + 5, 1), "c": rnd(4000, 2)})
    m = mounter()
    for n in ("o", "c"):
        read_uncached(m.path(n))
        assert wait_for(lambda n=n: cached(m, n) > 0), n
    with open(m.path("o"), "rb") as f:
        r = run_fusefs("evict", m.path("o"), m.path("c"))
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert f"{m.path('o')} is open: its cached data goes at its last close" \
            in r.stdout, r.stdout
        assert cached(m, "o") == MiB + 4096                # kept while open
        assert cached(m, "c") == 0                         # evicted
        ctl_write(m, "evict", b"o\n")                      # asked twice: fine
        assert f.read(10) == rnd(MiB + 5, 1)[:10]
        assert cached(m, "o") == MiB + 4096
    assert "control: evict: 'o' is open: evicted at its last close" in m.log()
    # closed: its RELEASE reaches the daemon after close() returned
    assert wait_for(lambda: cached(m, "o") == 0)
    assert m.stats()["evictions"] == 2
    assert read_uncached(m.path("o")) == rnd(MiB + 5, 1)   # fetched again


NL_NAMES = {"new\nline": rnd(5000, 3), "cr\r": rnd(6000, 4), "x": rnd(7000, 5)}


def test_pin_unpin_evict_names_with_newlines(mounter, src):
    """a name with a newline (or ending in a carriage return) works in pin,
    unpin and evict: the client sends such names NUL-terminated (a control
    text with a NUL byte is read as NUL-terminated paths); the plain
    one-path-per-line text of older clients still works"""
    put(src, NL_NAMES)
    m = mounter()
    for n, d in NL_NAMES.items():
        assert read_uncached(m.path(n)) == d
        assert wait_for(lambda n=n: cached(m, n) > 0), repr(n)
    for cmd in ("pin", "unpin"):
        r = run_fusefs(cmd, m.path("new\nline"), m.path("cr\r"))
        assert r.returncode == 0, (cmd, r.stderr)
    # (an evict just after a read may be deferred until the kernel's
    # RELEASE of that read arrives: waited for)
    r = run_fusefs("evict", m.path("new\nline"))
    assert r.returncode == 0, r.stderr
    assert wait_for(lambda: cached(m, "new\nline") == 0) and cached(m, "cr\r") > 0
    r = run_fusefs("evict", m.path("cr\r"), m.path("x"))
    assert r.returncode == 0, r.stderr
    assert wait_for(lambda: cached(m, "cr\r") == 0 and cached(m, "x") == 0)
    # the NUL form by hand, and the plain lines of an older client
    for n, d in NL_NAMES.items():
        assert read_uncached(m.path(n)) == d
        assert wait_for(lambda n=n: cached(m, n) > 0), repr(n)
    ctl_write(m, "evict", b"/new\nline\0")
    assert wait_for(lambda: cached(m, "new\nline") == 0) and cached(m, "cr\r") > 0
    ctl_write(m, "evict", b"x\n")
    assert wait_for(lambda: cached(m, "x") == 0)


def test_lists_and_warm_take_names_with_newlines(mounter, src, tmp_path):
    """a list in the NUL form (first line "# nul", then NUL-ended records:
    fusefs prefetch --list FILE --null) names a file with a newline, and
    fusefs warm reads such a name back from heat export's escapes"""
    put(src, NL_NAMES)
    m = mounter()
    lst = tmp_path / "l0"
    lst.write_bytes(b"new\nline\0x\0")
    r = run_fusefs("prefetch", m.mnt, "--list", str(lst), "--null", "--name", "nl",
                   "--epoch", "0")
    assert r.returncode == 0, r.stderr
    assert "accepted 2" in r.stdout, r.stdout
    assert wait_for(lambda: cached(m, "new\nline") > 0 and cached(m, "x") > 0)
    assert read_uncached(m.path("new\nline")) == NL_NAMES["new\nline"]
    tsv = run_fusefs("heat", "export", m.mnt).stdout
    assert "new\\x0aline\t" in tsv, tsv
    assert run_fusefs("evict", m.path("new\nline")).returncode == 0
    assert wait_for(lambda: cached(m, "new\nline") == 0)
    (tmp_path / "hot.tsv").write_text(tsv)
    r = run_fusefs("warm", m.mnt, "--from", str(tmp_path / "hot.tsv"))
    assert r.returncode == 0, r.stderr
    assert wait_for(lambda: cached(m, "new\nline") > 0)
    assert read_uncached(m.path("new\nline")) == NL_NAMES["new\nline"]
