#!/usr/bin/env bash
# Run libFuzzer targets one after another, each for
# SECONDS, from the committed seeds in tests/fuzz/corpus/TARGET/.
#
#   tests/fuzz/run.sh [--smoke] BUILD SECONDS TARGET...
#
# --smoke: first replay the committed reproducers in tests/fuzz/crashes/
# (and fuzz with a fixed seed, FUZZ_SEED, default 1, so CI repeats itself)
# TARGET/ (each must pass now), then fuzz with new inputs going to a
# temporary directory that is deleted afterwards.  Without --smoke, new
# inputs are kept in BUILD/corpus/TARGET/ for the next run.  The seed
# directory is only read: the committed corpus never grows.
#
# A crash, leak, timeout, out-of-memory or broken invariant fails the
# run; the reproducer's path and the command that replays it are printed.
# Logs: BUILD/logs/TARGET.log.  Prints one line of libFuzzer's final
# stats per target.
set -uo pipefail
cd "$(dirname "$0")/../.."

smoke=0
if [[ ${1:-} == --smoke ]]; then
	smoke=1
	shift
fi
if (($# < 3)); then
	echo "usage: $0 [--smoke] BUILD SECONDS TARGET..." >&2
	exit 2
fi
build=$1 seconds=$2
shift 2

tmp=
cleanup() { [[ -n $tmp ]] && rm -rf "$tmp"; }
trap cleanup EXIT
if ((smoke)); then
	tmp=$(mktemp -d /tmp/fusefs-fuzz.XXXXXX) || exit 1
fi

# the last value of "stat::NAME: N" or of " NAME: N" in a libFuzzer log
stat() { grep -ao "$1: *[0-9]*" "$2" | tail -n 1 | grep -o '[0-9]*$'; }

# the line of a log that says what went wrong
what='invariant|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error'

fail=0
start=$SECONDS
for t in "$@"; do
	bin=$build/fuzz_$t
	log=$build/logs/$t.log
	art=$build/artifacts/$t
	seeds=tests/fuzz/corpus/$t
	mkdir -p "$build/logs" "$art"
	if [[ ! -x $bin ]]; then
		echo "fuzz: $bin missing (make fuzz-build)" >&2
		fail=1
		continue
	fi
	if ((smoke)); then
		work=$tmp/$t
		crashes=(tests/fuzz/crashes/"$t"/*)
		if [[ -e ${crashes[0]} ]] &&
		   ! "$bin" "${crashes[@]}" >"$log" 2>&1; then
			unit=$(grep -a 'Running: ' "$log" | tail -n 1)
			unit=${unit#Running: }
			echo "fuzz_$t: FAILED: a committed reproducer fails again, log $log"
			grep -a -m1 -E "$what" "$log"
			echo "  reproducer: $unit"
			echo "  replay:     $bin $unit"
			fail=1
			continue
		fi
	else
		work=$build/corpus/$t
	fi
	mkdir -p "$work"
	opts=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048
	      -print_final_stats=1 -artifact_prefix="$art/")
	[[ -f tests/fuzz/dict/$t.dict ]] && opts+=(-dict="tests/fuzz/dict/$t.dict")
	# the smoke run in the test command is repeatable: one fixed seed
	# (FUZZ_SEED=0 for a random one); `make fuzz` explores freely
	if ((smoke)) && [[ ${FUZZ_SEED:-1} != 0 ]]; then
		opts+=(-seed="${FUZZ_SEED:-1}")
	fi
	t0=$SECONDS
	"$bin" "${opts[@]}" "$work" "$seeds" >"$log" 2>&1
	rc=$?
	if ((rc != 0)); then
		unit=$(grep -ao 'Test unit written to .*' "$log" | tail -n 1)
		unit=${unit#Test unit written to }
		echo "fuzz_$t: FAILED (exit $rc), log $log"
		grep -a -m1 -E "$what" "$log"
		if [[ -n $unit ]]; then
			echo "  reproducer: $unit"
			echo "  replay:     $bin $unit"
			echo "  minimize:   $bin -minimize_crash=1 -runs=10000 -exact_artifact_path=$unit.min $unit"
		else
			tail -n 20 "$log"
		fi
		fail=1
		continue
	fi
	printf 'fuzz_%-8s %4ss  %9s runs  %7s exec/s  cov %5s  ft %6s  corpus %5s  peak %s MB\n' \
		"$t" "$((SECONDS - t0))" \
		"$(stat stat::number_of_executed_units "$log")" \
		"$(stat stat::average_exec_per_sec "$log")" \
		"$(stat cov "$log")" "$(stat ft "$log")" \
		"$(grep -ao 'corp: [0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$')" \
		"$(stat stat::peak_rss_mb "$log")"
done
echo "fuzz: $# target(s) in $((SECONDS - start)) s: $( ((fail)) && echo FAILED || echo ok)"
exit $fail
