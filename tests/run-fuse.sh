#!/usr/bin/env bash
# FUSE tests without Ceph: fusefs serving file:// sources (temporary
# directory trees) through the kernel FUSE.  Needs /dev/fuse and root (or
# fusermount3); about 3 minutes on the plain build with -n 3.
# Usage: run-fuse.sh [BIN [PYTEST_ARGS...]]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
FUSEFS_BIN=$(realpath "${1:-$here/../build/bin/fusefs}")
export FUSEFS_BIN
shift || true
exec /usr/bin/python3 -m pytest -p no:cacheprovider -v "$here/fuse" "$@"
