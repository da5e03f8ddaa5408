"""Hostile names and hostile files around the daemon (issue 13, item 10):
names with control characters reach the logs escaped, the heat export
keeps its columns, --log-file refuses symlinks and foreign files, the
client acts only on real fusefs mounts, S3 secrets leave the
environment, and a second daemon stops at the cache directory's lock
before it touches the first one's index."""

import os
import subprocess

import pytest

from checks import MiB, cached, rnd
from mountlib import FUSEFS, run_fusefs, wait_for
from util import put, read_uncached

ESC = "\x1b[2J"                 # would clear an operator's terminal
FAKE = "\nfusefs[error]: forged line"


def test_hostile_names_are_escaped_in_the_log(mounter, src):
    put(src, {"ok": b"fine"})
    # backend_file logs the symlink it skips, with its name
    os.symlink("/etc/passwd", src / f"evil{FAKE}{ESC}")
    m = mounter()
    assert read_uncached(m.path("ok")) == b"fine"
    # ctl.c logs the rejected list with its name
    bad = m.path(f".fusefs/lists/l{FAKE}{ESC}")
    with pytest.raises(OSError):
        with open(bad, "w") as f:
            f.write("no/such/file\n")
    m.umount()
    log = m.log()
    assert "evil\\x0afusefs[error]: forged line\\x1b[2J" in log, log
    assert "l\\x0afusefs[error]: forged line\\x1b[2J" in log, log
    assert "\nfusefs[error]: forged line" not in log, log
    assert "\x1b" not in log, log


def test_heat_export_escapes_names_and_warm_reads_it_back(mounter, src, tmp_path):
    names = {"tab\there": rnd(MiB, 1), "new\nline": rnd(MiB, 2),
             "back\\slash": rnd(MiB, 3), "plain": rnd(MiB, 4)}
    put(src, names)
    m = mounter()
    for n, data in names.items():
        assert read_uncached(m.path(n)) == data
    out = subprocess.run([FUSEFS, "heat", "export", m.mnt], capture_output=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [r for r in out.stdout.decode().split("\n") if r and not r.startswith("#")]
    assert len(rows) == len(names), rows
    assert all(len(r.split("\t")) == 6 for r in rows), rows
    first = {r.split("\t")[0] for r in rows}
    assert first == {"tab\\x09here", "new\\x0aline", "back\\\\slash", "plain"}, first
    # the export warms the same files back (the newline one cannot be on a list)
    hot = tmp_path / "hot.tsv"
    hot.write_bytes(out.stdout)
    with open(m.path(".fusefs/evict"), "w") as f:
        f.write("tab\there\nback\\slash\nplain\n")
    assert cached(m, "tab\there") == 0
    r = run_fusefs("warm", m.mnt, "--from", str(hot))
    assert r.returncode == 0, r.stderr
    for n in ("tab\there", "back\\slash", "plain"):
        assert wait_for(lambda n=n: cached(m, n) == MiB), n
        assert read_uncached(m.path(n)) == names[n]


def log_file_refused(tmp_path, src, log, why):
    mnt = tmp_path / "mnt-refused"
    mnt.mkdir(exist_ok=True)
    r = run_fusefs("mount", f"file://{src}", str(mnt), "-f", "--cache-dir",
                   str(tmp_path / "cache"), "--log-file", str(log))
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert f"cannot open log file {log}: {why}" in r.stderr, r.stderr
    assert not os.path.ismount(mnt)


def test_log_file_symlink_is_not_followed(tmp_path, src):
    target = tmp_path / "precious"
    target.write_bytes(b"keep me\n")
    os.symlink(target, tmp_path / "fusefs.log")
    log_file_refused(tmp_path, src, tmp_path / "fusefs.log", os.strerror(40))  # ELOOP
    assert target.read_bytes() == b"keep me\n"


def test_log_file_hard_link_and_foreign_owner_are_refused(tmp_path, src):
    target = tmp_path / "precious"
    target.write_bytes(b"keep me\n")
    os.link(target, tmp_path / "linked.log")
    log_file_refused(tmp_path, src, tmp_path / "linked.log", os.strerror(31))  # EMLINK
    foreign = tmp_path / "foreign.log"
    foreign.write_bytes(b"")
    os.chown(foreign, 65534, 65534)
    log_file_refused(tmp_path, src, foreign, os.strerror(1))                 # EPERM
    assert target.read_bytes() == b"keep me\n"


def test_log_file_of_our_own_is_used(mounter, src, tmp_path):
    put(src, {"f": b"x"})
    log = tmp_path / "own.log"
    m = mounter("--log-file", str(log))
    assert read_uncached(m.path("f")) == b"x"
    m.umount()
    assert "mounted file://" in log.read_text()


def test_client_refuses_a_directory_that_only_looks_like_a_mount(tmp_path, mounter, src):
    fake = tmp_path / "fake"
    (fake / ".fusefs").mkdir(parents=True)
    (fake / ".fusefs" / "stats").write_text("cache_bytes_used 0\n")
    pin = fake / ".fusefs" / "pin"
    pin.write_text("untouched\n")
    (fake / "x").write_text("data")
    for cmd in (["pin", str(fake / "x")], ["evict", str(fake / "x")],
                ["status", str(fake)], ["stats", str(fake)],
                ["heat", str(fake)]):
        r = run_fusefs(*cmd)
        assert r.returncode != 0, (cmd, r.stdout)
        assert "not inside a fusefs mount" in r.stderr or "not a fusefs mount" in r.stderr \
            or "cannot" in r.stderr, (cmd, r.stderr)
    assert pin.read_text() == "untouched\n"
    assert sorted(os.listdir(fake / ".fusefs")) == ["pin", "stats"]
    # a real mount, reached from a subdirectory, works
    put(src, {"d/f": rnd(MiB, 5)})
    m = mounter()
    assert read_uncached(m.path("d/f")) == rnd(MiB, 5)
    r = run_fusefs("pin", m.path("d/f"))
    assert r.returncode == 0, r.stderr
    r = run_fusefs("status", m.path("d"))
    assert r.returncode == 0, r.stderr


def test_s3_secrets_leave_the_environment(tmp_path):
    from hostile_s3 import BUCKET, HostileS3
    from mountlib import Mount
    srv = HostileS3()
    secret = "s3cr3t-value-that-must-go"
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    m = Mount(f"s3://{BUCKET}", str(mnt), str(tmp_path / "cache"), str(tmp_path / "log"),
              ["--endpoint", srv.endpoint, "--chunk-size", "1M"],
              env={"AWS_ACCESS_KEY_ID": "hostile-test", "AWS_SECRET_ACCESS_KEY": secret,
                   "AWS_SESSION_TOKEN": "tok-" + secret,
                   "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"})
    try:
        m.start()
        with open(f"/proc/{m.proc.pid}/environ", "rb") as f:
            env = f.read()
        assert secret.encode() not in env
        assert b"hostile-test" not in env
        # /proc/PID/environ shows the block the process started with:
        # the values were overwritten there, not just unset
        assert b"AWS_SECRET_ACCESS_KEY=\0\0" in env or b"AWS_SECRET_ACCESS_KEY" not in env
        assert b"AWS_ENDPOINT" in env or b"PATH=" in env     # the rest is still there
    finally:
        m.umount()
        srv.close()
    assert secret not in m.log()


def test_second_daemon_stops_at_the_lock_before_the_index(mounter, src, tmp_path):
    put(src, {"f": rnd(2 * MiB, 6)})
    m = mounter()
    assert read_uncached(m.path("f")) == rnd(2 * MiB, 6)
    assert wait_for(lambda: cached(m, "f") == 2 * MiB)
    index = sorted(os.listdir(tmp_path / "cache"))
    mnt2 = tmp_path / "mnt-second"
    mnt2.mkdir()
    # another chunk size would make it drop the cache, if it got that far
    r = run_fusefs("mount", f"file://{src}", str(mnt2), "-f", "--cache-dir",
                   str(tmp_path / "cache"), "--chunk-size", "2M")
    assert r.returncode == 1, r.stderr
    assert "is in use by another fusefs" in r.stderr, r.stderr
    assert "chunk size changed" not in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path / "cache")) == index
    assert cached(m, "f") == 2 * MiB
    assert read_uncached(m.path("f")) == rnd(2 * MiB, 6)


def test_stats_refuses_a_planted_stats_xattr(tmp_path, mounter, src):
    """`fusefs stats DIR` (the text form, which readiness probes run)
    answers only for a fusefs mount point, as --json does: a plain
    directory whose owner set user.fusefs.stats is not a mount"""
    fake = tmp_path / "fake"
    fake.mkdir()
    os.setxattr(fake, "user.fusefs.stats", b"reads 1\ncache_bytes_used 0\n")
    for cmd in (["stats", str(fake)], ["stats", str(fake), "--json"]):
        r = run_fusefs(*cmd)
        assert r.returncode == 1, (cmd, r.stdout, r.stderr)
        assert "not a fusefs mount" in r.stderr, (cmd, r.stderr)
        assert "reads" not in r.stdout, (cmd, r.stdout)
    put(src, {"d/f": b"x"})
    m = mounter()
    r = run_fusefs("stats", m.mnt)
    assert r.returncode == 0 and "cache_bytes_used " in r.stdout, r.stderr
    r = run_fusefs("stats", m.path("d"))     # not the mount point: as --json
    assert r.returncode == 1 and "not a fusefs mount" in r.stderr, r.stderr
