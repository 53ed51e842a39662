#!/usr/bin/env bash
# state_bound.sh BUILD_DIR - the default rule set's state stays within
# 64 KB per node in `fixed` semantics (issue 14): bench_job_state streams
# a healthy 96-core 8-GPU node through ProfilerReport and measures the
# saved state (the job's parts without the buffered batches, which are
# input waiting for its scan: core, dictionary, aggregator windows and
# the rules) at 1 h and 2 h of job at 500 ms (1 h was the largest point
# before the report-only count maps were capped: 211 KB) and at 1 h at
# 100 ms. Asserts bytes, not timings; also that the rules' part,
# the windows, OverallSystemUsage, BatchSize and LoadBalancing stay within
# their own budgets (a regression to unrounded maps is 10-100x, to
# unpacked rings ~6 KB a node).
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
BENCH="$BUILD/tests/bench_job_state"
[ -x "$BENCH" ] ||
    { echo "SKIP: benchmarks not built (TW_BUILD_BENCH=OFF)"; exit 77; }
export TW_SOURCE_DIR="$SRC" TW_BUILD_DIR="$BUILD"
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
OUT=$(mktemp /tmp/tw-state-bound.XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*"; cat "$OUT"; exit 1; }

# check INTERVAL DURATION AT: every --at point within the budgets
check() {
    "$BENCH" --nodes 1 --cores 96 --gpus 8 --interval "$1" --duration "$2" \
        --at "$3" --semantics fixed --reps 1 --segmented >"$OUT" 2>&1 ||
        fail "bench_job_state --interval $1 exited $?"
    local points
    points=$(grep -c '^== at ' "$OUT")
    [ "$points" = "$(tr ',' '\n' <<<"$3" | wc -l)" ] ||
        fail "$points measuring points, not those of --at $3"
    # per point: the rule part, then its rules, bytes per node (field 4)
    awk -v ms="$1" '
        function over(what, got, max) {
            printf "FAIL: %s ms, %s: %s bytes/node > %s\n", ms, what, got, max
            bad = 1
        }
        $1 == "rule.0" { n++; if ($4 > 52000) over("all rules", $4, 52000) }
        $1 == "windows" { if ($4 > 14000) over($1, $4, 14000) }
        $1 == "without" { s++; if ($9 > 64000) over("the state", $9, 64000) }
        $1 == "OverallSystemUsage" { if ($4 > 16000) over($1, $4, 16000) }
        $1 == "BatchSize" { if ($4 > 40000) over($1, $4, 40000) }
        $1 == "LoadBalancing" { if ($4 > 4000) over($1, $4, 4000) }
        END { if (n == 0 || s != n) { print "FAIL: no rule.0 or state line"; bad = 1 }
              exit bad }' "$OUT" || fail "state above its bound"
    grep -E '^== at|rule\.0|windows|without the' "$OUT"
}

check 500 2h 1h,2h
check 100 1h 1h
echo "state_bound: OK"
