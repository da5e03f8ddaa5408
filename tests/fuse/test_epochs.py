"""The epoch protocol of docs/epochs.md through the real daemon over a
file:// source: numbered lists and begins written to MNT/.fusefs/lists/NAME
by a raw writer (drop_last at 90%, the queued epoch's head, a stale
publish, a resume), two lists and an idle one, a write failing part-way
(nothing published, the close fails), the close of a copy of the open
file (a fork's, a dup) publishing and later writes failing with EPIPE, and the CLI: prefetch
--list=FILE, --epoch/--begin/--at, the --wait exit codes (ready, timeout,
cache full, stalled), no progress bar off a terminal, status --json and
stats --json with their documented fields."""

import errno
import json
import os
import pty
import random
import subprocess

import pytest

from checks import MiB, rnd
from mountlib import FUSEFS, run_fusefs, wait_for
from util import put, read_uncached

KiB = 1024


def ctl_write(m, name, data):
    with open(os.path.join(m.mnt, ".fusefs", name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def ctl_read(m, name):
    with open(os.path.join(m.mnt, ".fusefs", name)) as f:
        return f.read()


def status(m, name):
    """a list's status text as a dict (numbers as int/float)"""
    out = {}
    with open(os.path.join(m.mnt, ".fusefs", "lists", name)) as f:
        for line in f.read().split("# last publish")[0].splitlines()[1:]:
            k, _, v = line.partition(" ")
            for conv in (int, float, str):
                try:
                    out[k] = conv(v)
                    break
                except ValueError:
                    pass
    return out


def listing(order, epoch=None, begin=None):
    head = f"# epoch {epoch}\n" if epoch is not None else ""
    if begin is not None:
        head += f"# begin {begin}\n" if begin != "" else "# begin\n"
    return head + "".join(n + "\n" for n in order)


@pytest.fixture
def small(src):
    """20 files of 4 KiB"""
    data = {f"s{i:02d}": rnd(4 * KiB, i) for i in range(20)}
    put(src, data)
    return sorted(data)


def shuffled(names, seed):
    o = list(names)
    random.Random(seed).shuffle(o)
    return o


def test_drop_last_then_begin_then_queued_head(mounter, small):
    m = mounter()
    o0, o1 = shuffled(small, 0), shuffled(small, 1)
    o2 = [o1[0]] + shuffled(o1[1:], 2)     # starts with epoch 1's first
    ctl_write(m, "lists/raw", listing(o0, epoch=0))
    ctl_write(m, "lists/raw", listing(o1, epoch=1))
    st = status(m, "raw")
    assert (st["epoch"], st["next_epoch"], st["queued"]) == (0, 1, 1), st
    # the prefetcher has the first file: epoch 0's hit ratio is not 0
    assert wait_for(lambda: status(m, "raw")["lead_files"] >= 1, timeout=60)
    for n in o0[:18]:                                   # 90%: drop_last
        read_uncached(m.path(n))
    st = status(m, "raw")
    assert (st["read"], st["remaining"], st["state"]) == (18, 2, "reading"), st
    # the old protocol replaced the queued epoch here; a begin advances
    ctl_write(m, "lists/raw", "# begin 1\n")
    st = status(m, "raw")
    assert (st["epoch"], st["epochs_done"], st["position"]) == (1, 1, 0), st
    assert 0 < st["last_hit_ratio"] <= 1.0              # epoch 0's, kept
    # a late writer of epoch 0 is refused with ESTALE; nothing changes
    with pytest.raises(OSError) as e:
        ctl_write(m, "lists/raw", listing(o0, epoch=0))
    assert e.value.errno == errno.ESTALE
    assert status(m, "raw")["epoch"] == 1
    # epoch 2 queued; 90% of epoch 1, then epoch 2's first file (read in
    # epoch 1 already) starts epoch 2 without a begin
    ctl_write(m, "lists/raw", listing(o2, epoch=2))
    for n in o1[:18]:
        read_uncached(m.path(n))
    assert status(m, "raw")["epoch"] == 1
    read_uncached(m.path(o2[0]))
    st = status(m, "raw")
    assert (st["epoch"], st["epochs_done"], st["read"]) == (2, 2, 1), st
    assert m.stats()["lists_published"] == 3


def test_unnumbered_lists_one_ahead_queue_in_order(mounter, small, tmp_path):
    """a loader publishing the next epoch's list without --epoch at the
    start of each epoch, epochs stopping at 90%: each list is queued after
    the last one, none replaces an epoch not yet begun; a full queue
    refuses with a message naming --epoch"""
    m = mounter()
    orders = [shuffled(small, i) for i in range(5)]

    def publish(e):
        lst = tmp_path / f"e{e}.txt"
        lst.write_text(listing(orders[e]))
        return run_fusefs("prefetch", m.mnt, f"--list={lst}", "--name=loop")

    assert publish(0).returncode == 0
    assert publish(1).returncode == 0                   # epoch 0 starts
    for n in orders[0][:18]:                            # drop_last
        read_uncached(m.path(n))
    r = publish(2)                                      # epoch 1 starts
    assert r.returncode == 0 and "outcome queued" in r.stdout, r.stdout + r.stderr
    st = status(m, "loop")
    assert (st["epoch"], st["next_epoch"], st["queued"]) == (0, 1, 2), st
    read_uncached(m.path(orders[1][0]))                 # epoch 1's head
    st = status(m, "loop")
    assert (st["epoch"], st["next_epoch"], st["queued"], st["read"]) == (1, 2, 1, 1), st
    assert publish(3).returncode == 0                   # epoch 3 queued
    r = publish(4)                                      # no room: refused
    assert r.returncode == 1, r.stdout + r.stderr
    assert "--epoch" in r.stderr, r.stderr
    st = status(m, "loop")
    assert (st["epoch"], st["next_epoch"], st["queued"]) == (1, 2, 2), st


def test_an_open_is_counted_before_it_is_answered(mounter, small, hooks, tmp_path):
    """a loader that asks for its list's status right after an open finds
    the open counted, however late the daemon's worker runs after its
    reply: the "open-replied" gate holds the worker there"""
    m = mounter(env=hooks.env)
    lst = tmp_path / "e0.txt"
    lst.write_text(listing(small))
    assert run_fusefs("prefetch", m.mnt, f"--list={lst}", "--name=job").returncode == 0
    hooks.close("open-replied")
    try:
        read_uncached(m.path(small[0]))
        read_uncached(m.path(small[1]))
        st = status(m, "job")
    finally:
        hooks.open("open-replied")
    assert (st["epoch"], st["read"]) == (0, 2), st


def test_resume_and_begin_from_the_cli(mounter, small, tmp_path):
    m = mounter()
    lst = tmp_path / "e3.txt"
    lst.write_text(listing(small))
    r = run_fusefs("prefetch", m.mnt, f"--list={lst}", "--name=job", "--epoch=3")
    assert r.returncode == 0 and "outcome current" in r.stdout, r.stdout + r.stderr
    for n in small[:6]:
        read_uncached(m.path(n))
    # the job restarts from a checkpoint taken after 4 files of epoch 3
    r = run_fusefs("prefetch", m.mnt, "--name", "job", "--epoch", "3", "--begin",
                   "--at", "4")
    assert r.returncode == 0 and "outcome begun" in r.stdout, r.stdout + r.stderr
    st = status(m, "job")
    assert (st["epoch"], st["position"], st["low"], st["read"]) == (3, 4, 4, 0), st
    for n in small[4:]:
        read_uncached(m.path(n))
    st = status(m, "job")
    assert (st["state"], st["read"], st["remaining"]) == ("done", 16, 0), st
    # an older epoch: exit 1 and why
    r = run_fusefs("prefetch", m.mnt, "--list", str(lst), "--name", "job", "--epoch", "2")
    assert r.returncode == 1 and "older than the list's current epoch" in r.stderr
    # a new job numbering from 0 begins first, then publishes
    r = run_fusefs("prefetch", m.mnt, "--list", str(lst), "--name", "job", "--epoch", "0",
                   "--begin")
    assert r.returncode == 0, r.stderr
    st = status(m, "job")
    assert (st["epoch"], st["position"], st["files"]) == (0, 0, 20), st
    # usage errors
    for bad in (["--at", "3"], ["--epoch", "x", "--begin"], ["--list"], []):
        assert run_fusefs("prefetch", m.mnt, *bad).returncode == 2, bad


def test_two_lists_and_an_idle_one(mounter, small, hooks):
    """(the lists-clock-skew-ms hook moves the lists' clock on past
    --list-idle: no waiting, and no read of rank 0 can be late enough
    to make it idle)"""
    m = mounter("--list-idle", "60", env=hooks.env)
    ctl_write(m, "lists/rank0", listing(small[:10], epoch=0))
    ctl_write(m, "lists/rank1", listing(small[10:], epoch=0))
    ctl_write(m, "lists/rank0", listing(small[10:], epoch=1))
    ctl_write(m, "lists/rank1", listing(small[:10], epoch=1))
    read_uncached(m.path(small[10]))        # rank 1's, at rank 0's head
    read_uncached(m.path(small[0]))
    a, b = status(m, "rank0"), status(m, "rank1")
    assert (a["epoch"], a["read"], b["epoch"], b["read"]) == (0, 1, 0, 1), (a, b)
    # rank 1 stops: 61 s later it is idle; rank 0 reads on
    hooks.set("lists-clock-skew-ms", 61000)
    assert status(m, "rank1")["state"] == "idle"
    read_uncached(m.path(small[1]))
    assert status(m, "rank0")["state"] in ("reading", "done")
    assert status(m, "rank1")["state"] == "idle"
    st = m.stats()
    assert st['list_idle{list="rank1"}'] == 1 and st['list_idle{list="rank0"}'] == 0
    read_uncached(m.path(small[11]))         # rank 1's reader is back
    assert status(m, "rank1")["state"] == "reading"


@pytest.fixture
def mib_files(src):
    data = {f"m{i:02d}": rnd(MiB, 100 + i) for i in range(16)}
    put(src, data)
    return sorted(data)


def test_wait_ready_without_a_progress_bar_off_a_tty(mounter, mib_files, tmp_path):
    m = mounter("--readahead", "0")
    lst = tmp_path / "l.txt"
    lst.write_text(listing(mib_files))
    r = run_fusefs("prefetch", m.mnt, f"--list={lst}", "--name", "w", "--wait",
                   "--timeout=60")
    assert r.returncode == 0, r.stderr
    assert "\r" not in r.stderr and "[###" not in r.stderr, r.stderr
    assert "list w ready: 16 files" in r.stderr, r.stderr
    assert status(m, "w")["lead_files"] == 16
    # --wait alone waits for a published list; on a terminal, a bar
    master, slave = pty.openpty()
    p = subprocess.run([FUSEFS, "prefetch", m.mnt, "--name", "w", "--wait"],
                       stdout=subprocess.DEVNULL, stderr=slave, timeout=60)
    os.close(slave)
    out = os.read(master, 65536).decode()
    os.close(master)
    assert p.returncode == 0, out
    assert "\r[########################################] 16/16 files" in out, out


def test_wait_timeout_and_stall_say_which(mounter, mib_files, src, tmp_path):
    m = mounter("--readahead", "0", "--retries", "0")
    assert len(os.listdir(m.mnt)) == 16
    os.unlink(src / mib_files[1])           # the backend cannot deliver it
    lst = tmp_path / "l.txt"
    lst.write_text(listing(mib_files[:4]))
    r = run_fusefs("prefetch", m.mnt, "--list", str(lst), "--name", "s", "--wait",
                   "--stall", "2")
    assert r.returncode == 5 and "prefetch stalled" in r.stderr, (r.returncode, r.stderr)
    r = run_fusefs("prefetch", m.mnt, "--list", str(lst), "--name", "t", "--wait",
                   "--stall", "60", "--timeout", "1")
    assert r.returncode == 3 and "timeout after 1s" in r.stderr, (r.returncode, r.stderr)


def test_wait_cache_full(mounter, mib_files, tmp_path):
    m = mounter("--cache-size", "6M", "--readahead", "0")
    lst = tmp_path / "l.txt"
    lst.write_text(listing(mib_files))
    # full, not stalled: no progress for 5 s, and the cache has no room
    r = run_fusefs("prefetch", m.mnt, "--list", str(lst), "--name", "f", "--wait",
                   "--stall", "5")
    assert r.returncode == 4 and "cache full ahead of the reader" in r.stderr, \
        (r.returncode, r.stderr)
    assert 0 < status(m, "f")["lead_files"] < 16


# the documented fields (docs/epochs.md, "Machine-readable status")
STATUS_FIELDS = {"mount", "hits", "misses", "stall_us", "bytes_from_backend",
                 "prefetch_chunks", "prefetch_wasted_bytes", "lists_published",
                 "cache_bytes_used", "cache_bytes_limit", "cache_files", "lists"}
LIST_FIELDS = {"state", "epoch", "position", "low", "files", "read", "remaining",
               "next_epoch", "next_epoch_files", "queued", "epochs_done", "lead_files",
               "lead_bytes", "hit_ratio", "last_hit_ratio", "idle_seconds", "window",
               "last_publish"}
REPORT_FIELDS = {"lines", "accepted", "bytes", "max_file_bytes", "headers", "list_epoch",
                 "outcome", "current_epoch", "rejected_unknown", "rejected_duplicate"}


def test_status_and_stats_json(mounter, small, tmp_path):
    m = mounter()
    ctl_write(m, "lists/rank0", listing(small, epoch=5, begin=""))
    read_uncached(m.path(small[0]))
    r = run_fusefs("status", m.mnt, "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert STATUS_FIELDS <= set(st), set(st) ^ STATUS_FIELDS
    l0 = st["lists"]["rank0"]
    assert LIST_FIELDS <= set(l0), LIST_FIELDS - set(l0)
    assert REPORT_FIELDS <= set(l0["last_publish"]), l0["last_publish"]
    assert (l0["epoch"], l0["state"], l0["read"], l0["files"]) == (5, "reading", 1, 20)
    assert l0["last_hit_ratio"] is None and isinstance(l0["hit_ratio"], float)
    assert l0["last_publish"]["outcome"] == "current"
    assert st["mount"] == m.mnt
    # stats --json: every counter, lists nested
    r = run_fusefs("stats", m.mnt, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["lists_published"] == 1 and s["bytes_from_backend"] >= 4 * KiB
    assert s["lists"]["rank0"]["epoch"] == 5 and s["lists"]["rank0"]["read"] == 1
    assert not any(k.startswith("list_") for k in s)
    text = run_fusefs("stats", m.mnt).stdout
    assert {ln.split()[0] for ln in text.splitlines() if not ln.startswith("list_")} \
        == set(s) - {"lists"}
    # not a mount: exit 1 (readiness probes)
    assert run_fusefs("stats", str(tmp_path), "--json").returncode == 1
    assert run_fusefs("status", str(tmp_path), "--json").returncode == 1


def lists_path(m, name):
    return os.path.join(m.mnt, ".fusefs", "lists", name)


def raises(errno_, fn, *args):
    with pytest.raises(OSError) as e:
        fn(*args)
    assert e.value.errno == errno_, e.value


def test_failed_write_publishes_nothing(mounter, small):
    """a write that fails part-way (EFBIG past 64 MiB) fails every later
    write and the close with it, and nothing of the text is published"""
    m = mounter("--memory-limit", "512M")      # room for 64 MiB of text
    fd = os.open(lists_path(m, "a"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, listing(small[:10], epoch=0).encode())
        filler = (b"x" * 8191 + b"\n") * 128    # 1 MiB of over-long lines
        with pytest.raises(OSError) as e:
            for _ in range(80):
                os.write(fd, filler)
        assert e.value.errno == errno.EFBIG
        raises(errno.EFBIG, os.write, fd, b"s00\n")
    finally:
        raises(errno.EFBIG, os.close, fd)
    assert status(m, "a") == {}                 # "list a: not published"
    assert "list_files{" not in ctl_read(m, "stats")
    assert "control: a write by uid 0 failed (File too large)" in m.log()


def test_close_of_a_copy_publishes_and_later_writes_fail(mounter, small):
    """the first close of any copy of the open file (a forked child's, a
    dup) publishes what was written; a write after it fails with EPIPE and
    so does the last close; a publish refused at a copy's close is
    reported at every later close too"""
    m = mounter()
    path = lists_path(m, "a")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, listing(small[:5], epoch=0).encode())
        pid = os.fork()
        if pid == 0:                            # a child closes its copy
            os.close(fd)
            os._exit(0)
        assert os.waitpid(pid, 0)[1] == 0
        assert status(m, "a")["files"] == 5
        raises(errno.EPIPE, os.write, fd, "".join(n + "\n" for n in small[5:]).encode())
    finally:
        raises(errno.EPIPE, os.close, fd)
    assert status(m, "a")["files"] == 5         # not silently 5 of 20
    # a dup closed first after the whole text: both closes succeed, once
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, listing(small, epoch=0).encode())
    os.close(os.dup(fd))
    os.close(fd)
    assert status(m, "a")["files"] == 20
    assert m.stats()["lists_published"] == 2
    # refused at the dup's close (epoch 0 is older than 3): the last
    # close says so as well
    ctl_write(m, "lists/a", listing(small, epoch=3, begin=3))
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, listing(small, epoch=0).encode())
        raises(errno.ESTALE, os.close, os.dup(fd))
    finally:
        raises(errno.ESTALE, os.close, fd)
    assert status(m, "a")["epoch"] == 3


def test_reads_racing_the_prefetcher(mounter, small):
    # regression: a reader of a chunk the prefetcher was fetching got EIO
    # ("claimed but not fetched": the in-flight table hashed padding bytes)
    m = mounter()
    for r in range(20):
        ctl_write(m, f"lists/r{r}", listing(small))
        for n in small[:6]:
            read_uncached(m.path(n))
        ctl_write(m, "evict", "\n")
    assert "claimed but not fetched" not in m.log()
