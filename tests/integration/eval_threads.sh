#!/usr/bin/env bash
# `trainwatch eval --threads N` gives what one thread gives, byte for byte:
# results (--json, both semantics), the table, --steps, and the bad-input
# reports on stderr in the same order, on a generated job with bad lines
# planted in system files and a trace file cut off in the middle (trace
# files carry state from file to file), and on the project's agent fixtures
# (B/E pairs across horovod and model timeline files). Bad --threads values
# are usage errors. Usage: eval_threads.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
FIXTURES=$(cd "$(dirname "$0")/../fixtures/agent" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# the wall-clock time is the one thing allowed to differ
mask() { sed -E 's/"seconds": ?[0-9.e+-]+/"seconds":X/; s/scans in [0-9.]+ s/scans in X s/' "$1"; }

job="$WORK/job"
"$TW" synth "$job" --preset step_outliers --nodes 2 --duration 20m --seed 3 \
    2>/dev/null
# bad lines in three system files, one trace file cut off mid-event
n=0
for f in $(find "$job/system" -name '*.algo-*.json' | sort | sed -n '2p;7p;12p'); do
    printf '{"Timestamp": oops}\nnot json at all\n' >> "$f"
    n=$((n + 1))
done
[ "$n" = 3 ] || fail "expected 3 system files to spoil, found $n"
trace=$(find "$job/framework" -name '*pythontimeline.json' | sort | sed -n '5p')
[ -n "$trace" ] || fail "no trace file to cut"
head -c $(($(stat -c %s "$trace") * 2 / 3)) "$trace" > "$WORK/cut"
cp "$WORK/cut" "$trace"
cp -r "$FIXTURES/job" "$WORK/fixture"

for dir in "$job" "$WORK/fixture"; do
    for sem in fixed reference; do
        "$TW" eval "$dir" --json --semantics "$sem" --threads 1 \
            > "$WORK/one.json" 2> "$WORK/one.err"
        [ -s "$WORK/one.json" ] || fail "$dir $sem: no output"
        for t in 2 5; do
            "$TW" eval "$dir" --json --semantics "$sem" --threads "$t" \
                > "$WORK/many.json" 2> "$WORK/many.err"
            cmp -s <(mask "$WORK/one.json") <(mask "$WORK/many.json") ||
                fail "$dir $sem: --threads $t results differ from --threads 1"
            cmp -s "$WORK/one.err" "$WORK/many.err" ||
                fail "$dir $sem: --threads $t reports differ from --threads 1"
        done
    done
done
# the comparison above saw the planted bad input
"$TW" eval "$job" --json --threads 3 > /dev/null 2> "$WORK/err"
[ "$(grep -c '\.algo-[0-9]*\.json:[0-9]*:' "$WORK/err")" = 6 ] ||
    fail "expected 6 bad-line reports, got: $(cat "$WORK/err")"
grep -q 'truncated' "$WORK/err" || fail "the cut trace file was not reported"

# the table and --steps
"$TW" eval "$job" --steps --threads 1 > "$WORK/one.txt" 2>/dev/null
"$TW" eval "$job" --steps --threads 4 > "$WORK/many.txt" 2>/dev/null
grep -q '^step ' "$WORK/one.txt" || fail "--steps printed no step"
cmp -s <(mask "$WORK/one.txt") <(mask "$WORK/many.txt") ||
    fail "table or --steps differ between 1 and 4 threads"

# the checkpoint round trip reads the folder twice through the read-ahead
"$TW" eval "$job" --roundtrip --threads 2 > "$WORK/rt.txt" 2>/dev/null ||
    fail "--roundtrip with 2 threads: $(tail -3 "$WORK/rt.txt")"

for bad in 0 257 x 2x ""; do
    rc=0
    "$TW" eval "$job" --threads "$bad" > /dev/null 2> "$WORK/usage" || rc=$?
    [ "$rc" = 2 ] || fail "--threads '$bad': exit $rc, expected 2"
    grep -q -- '--threads' "$WORK/usage" || fail "--threads '$bad': no message"
done
"$TW" eval --help | grep -q -- '--threads N' || fail "--help lacks --threads"
echo "eval_threads: ok"
