#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root):
# installs dependencies, builds, runs the C unit tests, the FUSE tests over
# file:// sources, a short run of the fuzzers (tests/fuzz) and the
# integration tests against a throwaway Ceph
# cluster, the ThreadSanitizer unit and stress tests (make tsan), then
# all of it again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# every make below (and the sub-makes of its targets) builds with -Werror
export WERROR=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1

echo "== build =="
make -j"$(nproc)"
echo "== unit tests =="
make unit
echo "== fuzz smoke (tests/fuzz, ~2 min) =="; make -j"$(nproc)" fuzz-smoke
echo "== ThreadSanitizer: threaded unit tests and the stress test (make tsan, ~90 s) =="
make -j"$(nproc)" tsan
echo "== FUSE tests (file:// sources) =="
tests/run-fuse.sh build/bin/fusefs
echo "== integration tests =="
tests/run-integration.sh build/bin/fusefs

echo "== sanitizer build (ASan+UBSan): unit, FUSE and integration tests =="
make SAN=1 -j"$(nproc)"
make SAN=1 unit
tests/run-fuse.sh build-san/bin/fusefs
# the tests marked nosan (packaging and deployment scripts, two scale tests)
# ran on the plain build above; the sanitized daemon runs everything else
tests/run-integration.sh build-san/bin/fusefs -m "not nosan"
