"""A hostile or broken S3 endpoint (tests/hostile_s3.py, on 127.0.0.1)
against the real daemon: each case ends in a clear error (the mount fails
with a message and exit status 1, or the answer is refused with a log
line and what is known is served), never a hang, a crash or memory that
grows with what the server sends.  Time limits here are hang guards
(BOUND); which of the daemon's limits ended a transfer is told by its
error (a stall limit's timeout, not the server closing), and the times
taken are printed as figures."""

import errno
import os
import time

import pytest

from hostile_s3 import (BUCKET, CONTROL_DATA, ETAG, OBJECTS, STEADY_DATA, TRICKLE_DATA,
                        TRICKLE_KEY, TRICKLE_MAX, HostileS3)
from mountlib import BAD_WORDS, Mount, run_fusefs, umount_all, wait_for
from util import read_uncached

CREDS = {"AWS_ACCESS_KEY_ID": "hostile-test", "AWS_SECRET_ACCESS_KEY": "not-a-secret",
         "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
BOUND = 120                     # seconds any of these may take (a hang guard)


@pytest.fixture
def srv():
    s = HostileS3()
    yield s
    s.close()


@pytest.fixture
def s3mount(tmp_path, srv):
    """s3mount(*args) -> a started Mount of s3://bucket on the server"""
    mounts = []

    def make(*args):
        mnt = tmp_path / f"mnt{len(mounts)}"
        mnt.mkdir()
        m = Mount(f"s3://{BUCKET}", str(mnt), str(tmp_path / "cache"),
                  str(tmp_path / f"fusefs{len(mounts)}.log"),
                  ["--endpoint", srv.endpoint, "--chunk-size", "1M"] + list(args),
                  env=CREDS)
        mounts.append(m)
        return m.start()

    yield make
    umount_all(mounts)


def mount_fails(tmp_path, srv, mode, message):
    """a mount while the server is in @mode fails with @message, in time"""
    srv.mode = mode
    mnt = tmp_path / "mnt-failed"
    mnt.mkdir()
    t0 = time.monotonic()
    r = run_fusefs("mount", f"s3://{BUCKET}", str(mnt), "-f", "--cache-dir",
                   str(tmp_path / "cache"), "--endpoint", srv.endpoint,
                   timeout=BOUND, env=CREDS)
    took = time.monotonic() - t0
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert message in r.stderr, r.stderr
    assert f"fusefs: cannot list s3://{BUCKET}" in r.stderr, r.stderr
    assert not [w for w in BAD_WORDS if w in r.stderr], r.stderr
    assert not os.path.ismount(mnt)
    return took, r.stderr


def listings(srv):
    return [p for m, p, _ in srv.requests if m == "GET" and "list-type=2" in p]


def test_normal_object_is_read(s3mount, srv):
    m = s3mount()
    assert os.listdir(m.mnt) == ["normal.bin"]
    assert read_uncached(m.path("normal.bin")) == OBJECTS["normal.bin"]
    # every listing asked for URL-encoded keys, every read for the version
    assert all("encoding-type=url" in p for p in listings(srv))
    gets = [h for meth, p, h in srv.requests if meth == "GET" and "list-type" not in p]
    assert gets and all(h.get("If-Match") == ETAG for h in gets), gets


def test_endless_fresh_tokens(tmp_path, srv):
    took, err = mount_fails(tmp_path, srv, "fresh_tokens",
                            "too many pages in a row without a key")
    # 1000 empty pages, then the error (plus the bucket check at mount)
    assert len(listings(srv)) == 1 + 1000, len(listings(srv))
    assert took < BOUND


def test_fresh_tokens_repeating_keys(tmp_path, srv):
    took, err = mount_fails(tmp_path, srv, "fresh_tokens_same_keys",
                            "keys out of order or repeated")
    assert "failed on page 2 after" in err, err
    assert len(listings(srv)) == 1 + 2


def test_alternating_tokens(tmp_path, srv):
    took, err = mount_fails(tmp_path, srv, "alternating_tokens",
                            "a continuation token came back")
    assert "failed on page 3 after 3 keys" in err, err


def test_negative_size_in_a_listing(tmp_path, srv):
    mount_fails(tmp_path, srv, "size_negative", "a Size that is not a decimal number")


@pytest.mark.parametrize("mode", ["size_overflow", "size_too_big"])
def test_object_over_2_44_bytes_is_one_file_failing_with_efbig(s3mount, srv, mode):
    """an object listed larger than the cache takes (2^44 bytes) is listed,
    its open fails with EFBIG, and the rest of the listing is served"""
    srv.mode = mode
    m = s3mount()
    assert sorted(os.listdir(m.mnt)) == ["normal.bin", "z"]
    assert os.stat(m.path("z")).st_size == 2**44 + 1
    with pytest.raises(OSError) as e:
        open(m.path("z"), "rb")
    assert e.value.errno == errno.EFBIG
    assert read_uncached(m.path("normal.bin")) == OBJECTS["normal.bin"]
    log = m.log()
    assert "S3 object 'z' is listed larger than 2^44 bytes: its open fails with EFBIG" in log
    # nothing but listings reached the server for it
    assert not [p for meth, p, _ in srv.requests if p.endswith("/z")]


def test_manifest_create_skips_an_object_over_2_44_bytes(srv):
    """a manifest holds only what a mount can open: the object is skipped"""
    srv.mode = "size_too_big"
    r = run_fusefs("manifest", "create", f"s3://{BUCKET}", "--endpoint", srv.endpoint,
                   timeout=BOUND, env=CREDS)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert [ln.split("\t")[0] for ln in r.stdout.splitlines()
            if not ln.startswith("#")] == ["normal.bin"], r.stdout
    assert "1 files, 1 skipped" in r.stderr, r.stderr


def test_crlf_etag_in_a_listing(tmp_path, srv):
    mount_fails(tmp_path, srv, "etag_crlf_list", "an ETag with control characters")


def test_huge_page_at_mount(tmp_path, srv):
    took, err = mount_fails(tmp_path, srv, "huge_page",
                            "a page larger than 16 MiB: refused")
    assert took < BOUND


def vm_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def test_huge_page_on_relisting_keeps_memory_bounded(s3mount, srv):
    m = s3mount("--list-refresh", "1")
    assert read_uncached(m.path("normal.bin")) == OBJECTS["normal.bin"]
    before = vm_hwm_kib(m.proc.pid)
    srv.mode = "huge_page"
    assert wait_for(lambda: "keeping the old namespace" in m.log(), timeout=BOUND), m.log()
    assert "a page larger than 16 MiB: refused" in m.log()
    # the page is cut at 16 MiB: the peak grows by about that, not by
    # 256 MiB (or three times it, as when the page was buffered whole)
    grew = vm_hwm_kib(m.proc.pid) - before
    assert grew < 64 * 1024, (before, grew)
    # the old namespace keeps serving
    srv.mode = "normal"
    assert read_uncached(m.path("normal.bin")) == OBJECTS["normal.bin"]


def test_control_character_keys_are_listed(s3mount, srv):
    srv.mode = "control_keys"
    m = s3mount()
    names = sorted(os.listdir(os.fsencode(m.mnt)))
    want = sorted([k for k in CONTROL_DATA if b"\0" not in k] + [b"normal.bin"])
    assert names == want
    for k in want:
        p = os.path.join(os.fsencode(m.mnt), k)
        assert read_uncached(p) == CONTROL_DATA.get(k, OBJECTS["normal.bin"]), k
        assert os.getxattr(p, "user.fusefs.key") == k
    s = m.stats()
    # the name mapper's business: a NUL cannot be in a path, so it is skipped
    assert s["ns_skipped_nul_byte"] == 1, s
    assert s["ns_files"] == len(want), s


@pytest.mark.parametrize("mode,message", [
    ("head_etag_cr", "refused: an ETag with control characters"),
    ("head_etag_ctl", "refused: an ETag with control characters"),
    ("head_size_negative", "failed: Invalid Content-Length"),
    ("head_size_overflow", "refused: a Content-Length that is not a decimal number up to 2^44"),
    ("head_size_too_big", "refused: a Content-Length that is not a decimal number up to 2^44"),
])
def test_hostile_head_is_refused(s3mount, srv, mode, message):
    m = s3mount("--revalidate", "0")       # every open asks HEAD first
    srv.mode = mode
    t0 = time.monotonic()
    assert read_uncached(m.path("normal.bin")) == OBJECTS["normal.bin"]
    assert time.monotonic() - t0 < BOUND
    assert os.stat(m.path("normal.bin")).st_size == len(OBJECTS["normal.bin"])
    log = m.log()
    assert f"S3 HEAD in bucket '{BUCKET}' {message}" in log, log
    assert "serving what is known" in log, log
    assert any(meth == "HEAD" for meth, _, _ in srv.requests)
    # nothing the server said went into a request header
    for meth, path, h in srv.requests:
        assert all("\r" not in v and "\n" not in v for v in h.values()), h
        assert "X-Injected" not in h
        if meth == "GET" and "list-type" not in path:
            assert h.get("If-Match") == ETAG, h



def test_version_id_ignored_by_the_endpoint_is_not_served(s3mount, srv, tmp_path):
    """a manifest entry pinned to an S3 version ID is read with
    ?versionId= and no If-Match; an endpoint that ignores the query (no
    versioning, a mirror) answers with its current object and no
    x-amz-version-id: refused (EIO, one log line), never served"""
    man = tmp_path / "m.manifest"
    size = len(OBJECTS["normal.bin"])
    man.write_text(f"#fusefs-manifest 1\nnormal.bin\t{size}\tvid:v123\n")
    m = s3mount("--manifest", str(man))
    with pytest.raises(OSError):
        read_uncached(m.path("normal.bin"))
    assert "with version '(none)': not that version, not served" in m.log(), m.log()
    gets = [(p, h) for meth, p, h in srv.requests if meth == "GET" and "list-type" not in p]
    assert gets and all("versionId=v123" in p and "If-Match" not in h for p, h in gets), gets
    assert m.stats()["bytes_from_backend"] == 0


def test_versions_listing_without_islatest_is_an_error(tmp_path, srv):
    """manifest create --versions against an endpoint that marks no
    version as the current one: an error, not an empty manifest"""
    srv.mode = "versions_no_latest"
    r = run_fusefs("manifest", "create", f"s3://{BUCKET}", "--versions", "--endpoint",
                   srv.endpoint, timeout=BOUND, env=CREDS)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "none marked IsLatest" in r.stderr, r.stderr


# a GET's time limits (docs/reliability.md, "The bound"): a transfer under
# 1 KiB/s for op_timeout is stalled (curl checks each second); one that is
# slow all the way ends after op_timeout plus the bytes asked for at
# 64 KiB/s.  slow.bin is one chunk.
OP_TIMEOUT = 2
GET_MIN_RATE = 64 << 10
# so a timeout on the trickled object can only be the stall limit's: the
# whole-transfer limit is longer than the server trickles, and without the
# stall limit the transfer ends with the server's close (a short body)
assert TRICKLE_MAX < OP_TIMEOUT + len(TRICKLE_DATA) / GET_MIN_RATE


def test_trickled_read_fails_in_time(s3mount, srv):
    """an endpoint that answers a GET at once and then trickles 2 bytes a
    second: the read fails with EIO by the stall limit (a timeout, after
    op_timeout: docs/reliability.md), and the daemon goes on serving other
    files"""
    srv.mode = "trickle"
    m = s3mount("--op-timeout", str(OP_TIMEOUT), "--retries", "0", "--readahead", "0")
    t0 = time.monotonic()
    with pytest.raises(OSError) as e:
        read_uncached(m.path(TRICKLE_KEY))
    took = time.monotonic() - t0
    assert e.value.errno == errno.EIO, e.value
    # with --retries 0 one attempt per READ; the kernel follows the failed
    # read-ahead with a READ of the page wanted, which waits once more
    # (a figure: about 2 x (op_timeout + 1) s)
    print(f"trickled read: EIO after {took:.1f} s")
    assert took < BOUND, took
    assert f"reading '{TRICKLE_KEY}' chunk 0 failed: Connection timed out" in m.log(), m.log()
    assert m.proc.poll() is None
    assert read_uncached(m.path("normal.bin")) == OBJECTS["normal.bin"]
    assert m.stats()["backend_errors"] >= 1


def test_slow_but_steady_read_completes(s3mount, srv):
    """a link that is slow for every transfer but never stalls (80 KiB/s:
    3.2 s for 256 KiB, longer than op_timeout + the bytes at 1 MiB/s, well
    within op_timeout + the bytes at 64 KiB/s: 6 s) is served, not failed
    at every attempt.  The server paces its pieces by the clock, so the
    transfer takes at least 3.1 s however fast the machine is."""
    srv.mode = "slow_steady"
    m = s3mount("--op-timeout", str(OP_TIMEOUT), "--retries", "0", "--readahead", "0")
    t0 = time.monotonic()
    assert read_uncached(m.path(TRICKLE_KEY)) == STEADY_DATA
    assert time.monotonic() - t0 > OP_TIMEOUT + len(STEADY_DATA) / (1 << 20)
    assert m.stats()["backend_errors"] == 0


def test_trickled_remote_manifest_fails_in_time(tmp_path, srv):
    """a manifest read from the endpoint (--manifest s3://...) that it
    trickles: the mount fails by the stall limit (a timeout, after
    op_timeout) with the reason, never hangs"""
    srv.mode = "trickle"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    t0 = time.monotonic()
    r = run_fusefs("mount", f"s3://{BUCKET}", str(mnt), "-f", "--cache-dir",
                   str(tmp_path / "cache"), "--endpoint", srv.endpoint,
                   "--manifest", f"s3://{BUCKET}/{TRICKLE_KEY}",
                   "--op-timeout", str(OP_TIMEOUT), timeout=BOUND, env=CREDS)
    took = time.monotonic() - t0
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert (f"cannot read manifest s3://{BUCKET}/{TRICKLE_KEY}: Connection timed out"
            in r.stderr), r.stderr
    assert not [w for w in BAD_WORDS if w in r.stderr], r.stderr
    print(f"trickled manifest: the mount failed after {took:.1f} s")     # a figure
    assert took < BOUND, took
    assert not os.path.ismount(mnt)


def catches(pid, sig):
    """@sig has a handler in process @pid (SigCgt of /proc/PID/status)"""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    return False


def test_sighup_while_connecting_does_not_end_the_daemon(tmp_path):
    """a SIGHUP (logrotate, a service reload) while the daemon waits for
    the endpoint at start reopens the log; it ended the daemon before its
    own handler was installed (at the mount)"""
    import signal
    import socket
    import subprocess
    from mountlib import FUSEFS
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)                         # connections queue, nobody answers
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    env = dict(os.environ, **CREDS)
    p = subprocess.Popen([FUSEFS, "mount", f"s3://{BUCKET}", str(mnt), "-f",
                          "--cache-dir", str(tmp_path / "cache"), "--endpoint",
                          f"http://127.0.0.1:{s.getsockname()[1]}",
                          "--op-timeout", "3", "--log-file", str(tmp_path / "log")],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # the handler is in place before the daemon connects: wait until
        # the kernel says SIGHUP is caught (not after a fixed time: a slow
        # start would still have the default action, which ends it)
        assert wait_for(lambda: p.poll() is not None or catches(p.pid, signal.SIGHUP),
                        timeout=BOUND)
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGHUP)
        out, err = p.communicate(timeout=BOUND)
        # it ends as it would have: the endpoint never answered (not -SIGHUP)
        assert p.returncode == 1, (p.returncode, err)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        s.close()
