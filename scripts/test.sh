#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine (as root):
# installs dependencies, builds, runs the C unit tests, a short run of the
# fuzzers (tests/fuzz) and the ThreadSanitizer unit and stress tests (make
# tsan) on the plain build; then the unit tests again and the FUSE tests
# over file:// sources under AddressSanitizer + UndefinedBehaviorSanitizer
# (make test runs them on the plain build), and meanwhile the integration
# tests of the packaging and deployment scripts and two scale tests
# (marked nosan) on the plain build against a throwaway Ceph cluster;
# then the other integration tests on the sanitized daemon.
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
make -j"$(nproc)" fuzz-smoke FUZZ_SMOKE_SECONDS="${FUZZ_SMOKE_SECONDS:-3}"
stage "ThreadSanitizer: threaded unit tests and the stress test (make tsan)"
make -j"$(nproc)" tsan STRESS_SECONDS="${STRESS_SECONDS:-10}"
stage "sanitizer build (ASan+UBSan): unit tests"
make SAN=1 -j"$(nproc)"
# the policy simulation (test_rank_sample: 4 s plain, 28 s sanitized) ran
# on the plain build above; its code runs sanitized in test_policy and
# test_cache.  UNIT_NOFORK: one leak check per binary (Makefile)
make SAN=1 -j"$(nproc)" unit UNIT_SKIP=test_rank_sample UNIT_NOFORK=1
# The FUSE tests (file:// sources, no Ceph) and the integration tests of
# the scripts and scale tests on the plain build (a Ceph cluster) at the
# same time: both mostly wait on the kernel, the daemon or the cluster,
# and no test depends on how fast it runs.  The integration log is shown
# when both are done.
stage "FUSE tests (sanitized) and, meanwhile, integration tests: scripts and scale tests on the plain build"
ilog=$(mktemp /tmp/fusefs-test-integration.XXXXXX)
tests/run-integration.sh build/bin/fusefs -m nosan --durations=12 >"$ilog" 2>&1 &
ipid=$!
# three pytest workers (pytest-xdist): a FUSE test mostly waits on the
# kernel and the daemon, one worker keeps a core a third busy
frc=0
tests/run-fuse.sh build-san/bin/fusefs -n "${FUSE_JOBS:-3}" --durations=12 || frc=$?
irc=0
wait "$ipid" || irc=$?
echo "== integration tests: scripts and scale tests on the plain build (ended with $irc) =="
cat "$ilog"
rm -f "$ilog"
if [ "$frc" != 0 ] || [ "$irc" != 0 ]; then
	exit 1
fi

stage "integration tests: the sanitized daemon"
tests/run-integration.sh build-san/bin/fusefs -m "not nosan" --durations=12
stage "done"
