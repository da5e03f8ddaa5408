"""A stop by signal while handles of every kind are open: no RELEASE or
RELEASEDIR comes for them, and the daemon still exits 0 with every handle
freed (under ASan, LeakSanitizer checks that at exit)."""

import errno
import os
import signal
import subprocess

from mountlib import BAD_WORDS
from util import put


def test_sigterm_with_files_dirs_and_control_files_open(mounter, src):
    put(src, {"d/a": b"a" * 5000, "b": b"b"})
    m = mounter()
    held = [os.open(m.path("d"), os.O_RDONLY | os.O_DIRECTORY),       # OPENDIR
            os.open(m.path("d/a"), os.O_RDONLY),                       # OPEN
            os.open(m.path(".fusefs/stats"), os.O_RDONLY),             # control read
            os.open(m.path(".fusefs/lists/next"), os.O_WRONLY | os.O_CREAT, 0o644),
            os.open(m.path(".fusefs/lists"), os.O_RDONLY | os.O_DIRECTORY)]
    assert os.read(held[1], 3) == b"aaa"
    assert os.read(held[2], 1)
    os.write(held[3], b"a\n")
    with os.scandir(held[0]) as it:             # READDIR on the held handle
        assert [e.name for e in it] == ["a"]
    m.proc.send_signal(signal.SIGTERM)
    rc = m.proc.wait(timeout=60)
    m.proc = None
    m.logf.close()
    log = m.log()
    for fd in held:
        try:
            os.close(fd)
        except OSError as e:                    # FLUSH: the daemon is gone
            assert e.errno == errno.ENOTCONN
    subprocess.run(["fusermount3", "-uz", m.mnt], check=False, stderr=subprocess.DEVNULL)
    assert rc == 0, log
    for w in BAD_WORDS:
        assert w not in log, log
