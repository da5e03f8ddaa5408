#!/usr/bin/env bash
# fusefs read benchmark (`make bench`). Usage: bench/run.sh [BIN] [bench.py options...]
#
# Starts a throwaway single-node Ceph cluster, loads 32 x 32 MiB random objects (and a
# local copy of them), then measures fusefs warm/cold/remount reads against local-disk
# reads and `rados get`, for each --read-mode. Prints a table; the JSON results go to
# $FUSEFS_BENCH_OUT (default /tmp/fusefs-bench-results.json). Needs root (drop_caches),
# /dev/fuse and about 8 GiB of free RAM; takes about 10 minutes on 2 vCPUs.
# Method and results: docs/benchmarks.md.
#
# Environment:
#   FUSEFS_BENCH_DIR  parent of the scratch directory (default /var/tmp); the local copy and
#                     the fusefs cache directories both live in it (same filesystem)
#   FUSEFS_BENCH_OUT  JSON output path
#   CEPH_TEST_MON_PORT/CEPH_TEST_RGW_PORT  as for tests/ceph/cluster.sh; if a ceph-mon is
#                     already running and these are unset, 6800/7490 are used
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
BIN=$(realpath "${1:-$root/build/bin/fusefs}")
shift || true

[[ $(id -u) == 0 ]] || { echo "bench: must run as root (drop_caches)" >&2; exit 1; }
[[ -x $BIN ]] || { echo "bench: $BIN is not executable (run make)" >&2; exit 1; }
[[ -e /dev/fuse ]] || { echo "bench: /dev/fuse is missing" >&2; exit 1; }

port_free() { ! ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
if pgrep -x ceph-mon >/dev/null && [[ -z ${CEPH_TEST_MON_PORT:-} ]]; then
  # 6800 is the agreed alternative, but another cluster's mgr/OSD often hold it
  # (ceph daemons bind from 6800 up); fall back to a free port below that range.
  for p in 6800 6790 6791 6792 6793 6794 6795 6796 6797 6798 6799; do
    if port_free "$p"; then export CEPH_TEST_MON_PORT=$p; break; fi
  done
  export CEPH_TEST_RGW_PORT=${CEPH_TEST_RGW_PORT:-7490}
  echo "bench: a ceph-mon is already running; using mon port ${CEPH_TEST_MON_PORT:?no free port}" >&2
fi

WORK=$(mktemp -d "${FUSEFS_BENCH_DIR:-/var/tmp}/fusefs-bench.XXXXXX")
OUT=${FUSEFS_BENCH_OUT:-/tmp/fusefs-bench-results.json}

cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  # bench.py cleans up after itself; this is the backstop if it was killed.
  if [[ -f $WORK/fusefs.pids ]]; then
    while read -r pid; do
      # only our daemons: the pid must still be a fusefs serving this scratch dir
      if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF "$WORK/"; then
        kill -KILL "$pid" 2>/dev/null || true
      fi
    done <"$WORK/fusefs.pids"
  fi
  if mountpoint -q "$WORK/mnt" 2>/dev/null; then fusermount3 -uz "$WORK/mnt" || true; fi
  "$root/tests/ceph/cluster.sh" stop "$WORK/ceph" >/dev/null 2>&1 || true
  if ((rc != 0)) && [[ -f $WORK/fusefs.log ]]; then
    cp "$WORK/fusefs.log" /tmp/fusefs-bench-daemon.log 2>/dev/null &&
      echo "bench: daemon log kept in /tmp/fusefs-bench-daemon.log" >&2
  fi
  rm -rf "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

/usr/bin/python3 "$here/bench.py" --bin "$BIN" --work "$WORK" --out "$OUT" "$@"
