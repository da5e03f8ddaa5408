#!/usr/bin/env bash
# Integration tests: a throwaway Ceph cluster (started by the pytest session)
# and fusefs mounted through the kernel FUSE.
# Usage: run-integration.sh [BIN [PYTEST_ARGS...]]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
FUSEFS_BIN=$(realpath "${1:-$here/../build/bin/fusefs}")
export FUSEFS_BIN
shift || true
# python3-rados is installed for Debian's interpreter
exec /usr/bin/python3 -m pytest -p no:cacheprovider -v "$here/integration" "$@"
