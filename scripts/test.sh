#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root):
# installs dependencies, builds, runs the C unit tests, a short run of the
# fuzzers (tests/fuzz) and the ThreadSanitizer unit and stress tests (make
# tsan) on the plain build; then the unit tests again and the FUSE tests
# over file:// sources under AddressSanitizer + UndefinedBehaviorSanitizer
# (make test runs them on the plain build); then the integration tests
# against a throwaway Ceph cluster:
# the packaging and deployment scripts and two scale tests (marked nosan)
# on the plain build, everything else on the sanitized daemon.
# Each stage prints how long it took; the whole run stays under 15 minutes
# on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
# every make below (and the sub-makes of its targets) builds with -Werror
export WERROR=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS=detect_leaks=1

t0=$SECONDS
stage() {
	echo "== $* ($((SECONDS - t0)) s so far) =="
}

stage "build"
make -j"$(nproc)"
stage "unit tests"
make -j"$(nproc)" unit
stage "fuzz smoke (tests/fuzz)"
make -j"$(nproc)" fuzz-smoke FUZZ_SMOKE_SECONDS="${FUZZ_SMOKE_SECONDS:-6}"
stage "ThreadSanitizer: threaded unit tests and the stress test (make tsan)"
make -j"$(nproc)" tsan STRESS_SECONDS="${STRESS_SECONDS:-20}"
stage "sanitizer build (ASan+UBSan): unit and FUSE tests"
make SAN=1 -j"$(nproc)"
make SAN=1 -j"$(nproc)" unit
# three pytest workers (pytest-xdist): a FUSE test mostly waits on the
# kernel and the daemon, one worker keeps a core a third busy
tests/run-fuse.sh build-san/bin/fusefs -n "${FUSE_JOBS:-3}"

stage "integration tests: scripts and scale tests on the plain build"
tests/run-integration.sh build/bin/fusefs -m nosan
stage "integration tests: the sanitized daemon"
tests/run-integration.sh build-san/bin/fusefs -m "not nosan"
stage "done"
