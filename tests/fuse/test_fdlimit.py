"""Open data files and the open-file limit: the daemon raises its soft
RLIMIT_NOFILE to the hard one (the cache keeps data files of closed entries
open for their next open), and an entry opens its O_DIRECT data file only
when a direct read or write needs it, so a passthrough file reopened after
its descriptors were closed holds one descriptor, not two."""

import os
import resource

import pytest

from checks import cached
from mountlib import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")


def nofile(soft, hard):
    """a preexec function: the daemon starts with this open-file limit"""
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def soft_limit(pid):
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                return int(line.split()[3])
    raise AssertionError("no open-file limit in /proc/%d/limits" % pid)


def data_file_links(pid, cache):
    """{data file path: descriptors of the daemon open on it}"""
    links = {}
    data = os.path.join(cache, "data") + "/"
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(data):
            links[target] = links.get(target, 0) + 1
    return links


def test_soft_open_file_limit_is_raised_to_the_hard_one(mounter, src, tmp_path):
    (src / "a").write_bytes(b"x")
    m = mounter(preexec=nofile(1024, 4096))
    assert soft_limit(m.proc.pid) == 4096
    with open(m.path("a"), "rb") as f:
        assert f.read() == b"x"


def test_a_reopened_passthrough_file_holds_one_descriptor(mounter, src, tmp_path):
    names = ["f%03d" % i for i in range(40)]
    for i, n in enumerate(names):
        (src / n).write_bytes(bytes([i]) * 100_000)
    cache = str(tmp_path / "cache")
    # 560 descriptors: 16 closed entries keep their data files open
    m = mounter(cache=cache, preexec=nofile(560, 560))
    for n in names:                      # fetched and written (O_DIRECT)
        with open(m.path(n), "rb") as f:
            f.read()
    assert wait_for(lambda: all(cached(m, n) == 102_400 for n in names))  # 4 KiB blocks
    for n in names:                      # complete: passthrough; f000 reopened
        with open(m.path(n), "rb") as f:
            assert f.read() == bytes([names.index(n)]) * 100_000
    before = m.stats()["passthrough_opens"]
    with open(m.path(names[0]), "rb") as held:
        assert m.stats()["passthrough_opens"] == before + 1
        links = data_file_links(m.proc.pid, cache)
        # every entry kept open holds its buffered file; the ones reopened
        # for passthrough only that one
        assert links and 1 in links.values(), links
        assert max(links.values()) <= 2, links
        assert held.read(1) == b"\x00"
