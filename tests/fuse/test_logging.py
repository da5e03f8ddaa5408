"""Logging of a daemon in the background when there is no syslog socket
(containers, notebook images): its lines go to the stderr it was started
with, as text or JSON (--log-format), and a flood of one error is
rate-limited with a count.

The daemon runs in a private mount namespace (unshare -m) where /dev/log,
if the host has one, is hidden under a bind mount of /dev/null, so the
test means the same on hosts with and without syslog."""

import json
import os
import re
import shutil
import subprocess

import pytest

from mountlib import FUSEFS, run_fusefs, wait_for
from util import CHUNK, put

FLOOD = 40          # failing reads of a file whose source was removed, one
                    # per chunk (a chunk that failed is answered EIO at once
                    # for up to 0.2 s, without a new attempt or log line)

SCRIPT = r"""
set -eu
if [ -e /dev/log ]; then mount --bind /dev/null /dev/log; fi
test ! -S /dev/log
"$FUSEFS" mount "file://$SRC" "$MNT" --cache-dir "$CACHE" --chunk-size 1M $EXTRA 2>"$ERR"
cat "$MNT/small" >/dev/null
rm "$SRC/big"
date +%s.%N >"$TIMES"
i=0
while [ $i -lt $FLOOD ]; do
    dd if="$MNT/big" of=/dev/null bs=1M count=1 skip=$i iflag=direct 2>/dev/null || true
    i=$((i + 1))
done
date +%s.%N >>"$TIMES"
"$FUSEFS" umount "$MNT"
"""


def run_background(tmp_path, src, *extra):
    """mount in the background inside a namespace without syslog, flood
    one error, unmount: (the daemon's stderr once it has exited, how many
    seconds the flood took)"""
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.fail("needs root and unshare(1) for a private mount namespace")
    put(src, {"big": b"b" * (FLOOD * CHUNK), "small": b"s" * 10})
    mnt, err, times = tmp_path / "mnt", tmp_path / "stderr.log", tmp_path / "times"
    mnt.mkdir()
    env = dict(os.environ, FUSEFS=FUSEFS, SRC=str(src), MNT=str(mnt), ERR=str(err),
               CACHE=str(tmp_path / "cache"), EXTRA=" ".join(extra), FLOOD=str(FLOOD),
               TIMES=str(times))
    r = subprocess.run(["unshare", "-m", "sh", "-c", SCRIPT], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, (r.stdout, r.stderr, err.read_text() if err.exists() else "")
    # the daemon writes its last lines while exiting, then lets go of the cache
    assert wait_for(lambda: daemon_gone(str(tmp_path / "cache")), timeout=30), err.read_text()
    t0, t1 = (float(t) for t in times.read_text().split())
    return err.read_text(), t1 - t0


def daemon_gone(cache):
    return subprocess.run(["flock", "-n", os.path.join(cache, "lock"), "true"]).returncode == 0


def check_flood(messages, seconds):
    """the failed reads: at most 5 lines per 10 s window, then one count
    (a flood of @seconds meets at most seconds // 10 + 1 windows: a slow
    machine may take more than one)"""
    counts = [m for m in messages if re.match(r"reading 'big' chunk \d+ failed: .* \((and \d+ "
                                              r"more like it|repeated \d+ times) in the last "
                                              r"\d+ s\)$", m)]
    failed = [m for m in messages if re.fullmatch(r"reading 'big' chunk \d+ failed: .*", m)
              and m not in counts]
    assert 1 <= len(failed) <= 5 * (int(seconds) // 10 + 1), (seconds, messages)
    assert counts, messages
    suppressed = sum(int(re.search(r"\((?:and )?(\d+)", m).group(1)) for m in counts)
    assert len(failed) + suppressed + len(counts) >= FLOOD, (failed, counts)


def test_background_logs_go_to_stderr_without_syslog(tmp_path, src):
    out, flood_s = run_background(tmp_path, src)
    lines = out.splitlines()
    # before going to the background: the foreground form
    assert any(ln.startswith("fusefs[info]: mounted file://") for ln in lines), out
    # after: timestamped lines with the pid, on the same stderr
    after = [m.groups() for m in (re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} [+-]\d{4} fusefs\[(\d+)\] (\w+): (.*)", ln)
        for ln in lines) if m]
    assert after, out
    assert len({pid for pid, _, _ in after}) == 1
    msgs = [msg for _, _, msg in after]
    assert any(m.startswith("unmounting ") for m in msgs), out
    assert {lvl for _, lvl, _ in after} >= {"info", "error"}, out
    check_flood(msgs, flood_s)


def test_json_log_lines_parse(tmp_path, src):
    # a name with a quote, a backslash and a byte that is not UTF-8 reaches
    # the log (the file source warns about the symlink it skips)
    os.symlink(b"/nonexistent", os.path.join(os.fsencode(src), b'dan"gling\\\xff'))
    out, flood_s = run_background(tmp_path, src, "--log-format", "json")
    objs = []
    for ln in out.splitlines():
        o = json.loads(ln)                          # every line, before and after
        assert set(o) == {"time", "level", "pid", "msg"}, o
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", o["time"]), o
        assert o["level"] in ("error", "warn", "info", "debug"), o
        objs.append(o)
    msgs = [o["msg"] for o in objs]
    # (the name may come escaped, str_log(): a backslash doubled)
    assert any(re.search("'dan\"gling(\\\\)+\ufffd'", m) for m in msgs), msgs
    assert any(m.startswith("mounted file://") for m in msgs), msgs
    assert any(m.startswith("unmounting ") for m in msgs), msgs
    check_flood(msgs, flood_s)


def test_bad_log_format_is_refused(tmp_path):
    r = run_fusefs("mount", "file:///nonexistent", str(tmp_path), "--cache-dir",
                   str(tmp_path / "c"), "--log-format", "xml")
    assert r.returncode == 2, r.stderr
    assert "'xml'" in r.stderr and "log-format" in r.stderr and "text or json" in r.stderr
