#!/usr/bin/env bash
# bench_scale_smoke.sh BUILD_DIR - the scale benchmark (tests/bench/scale.sh)
# run small: 4 nodes x 8 GPUs x 96 cores at 500 ms for 1 minute of event
# time through `trainwatch broker` into `trainwatch run` with the Redis
# store. Asserts its output's invariants, not timings: samples consumed by
# run == samples produced (and == nodes x series x rounds), the results
# file written, no offset lost, no dead letter, checkpoints written with
# their bytes counted, alerts matched to their completing messages, and
# every figure line present; then with every node CPU-bound, every
# CPUBottleneck snapshot is a bottleneck.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
[ -x "$BUILD/tests/bench_scale_producer" ] ||
    { echo "SKIP: benchmarks not built (TW_BUILD_BENCH=OFF)"; exit 77; }
OUT=$(mktemp /tmp/tw-scale-smoke.XXXXXX)
trap 'rm -f "$OUT"' EXIT
fail() { echo "FAIL: $*"; cat "$OUT"; exit 1; }

bash "$SRC/tests/bench/scale.sh" "$BUILD" --nodes 4 --event-minutes 1 \
    --sample 2 >"$OUT" 2>&1 || fail "scale.sh exited $?"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2" | head -1; }
P=$(grep '^producer:' "$OUT") || fail "no producer line"
# 4 nodes x (2x8 GPU + 2x96 core + 6 host series) x 120 rounds
[ "$(field samples "$P")" = 102720 ] || fail "produced $(field samples "$P"), not 102720"
[ "$(field batches "$P")" = 480 ] || fail "batches $(field batches "$P"), not 480"
[ "$(field failed "$P")" = 0 ] || fail "deliveries failed"
C=$(grep '^batches=' "$OUT") || fail "no run counters line"
[ "$(field samples " $C")" = 102720 ] || fail "run consumed $(field samples " $C")"
[ "$(field results_written "$C")" = 1 ] || fail "results_written != 1"
S=$(grep '^sustained:' "$OUT") || fail "no sustained line"
[ "$(field samples "$S")" = 102720 ] || fail "sustained line's samples"
grep -q '^consumer lag: max_messages=[0-9]' "$OUT" || fail "no lag line"
K=$(grep '^checkpoints:' "$OUT") || fail "no checkpoints line"
[ "$(field n "$K")" -ge 1 ] || fail "no checkpoint logged"
[ "$(field bytes_max "$K")" -gt 0 ] || fail "checkpoint bytes not counted"
A=$(grep '^alert latency' "$OUT") || fail "no alert latency line"
[ "$(field matched "$A")" -ge 1 ] || fail "no alert matched to its message"
grep -q '^invariants: ok' "$OUT" || fail "invariants not ok"
# the RSS table: a header and at least two rows
[ "$(grep -c '^ *[0-9.]\+ \+[0-9.]\+ \+[0-9]\+ ' "$OUT")" -ge 2 ] || fail "RSS table rows"
grep -q '^  not final (as scans run): received=[0-9]' "$OUT" || fail "no not-final alert line"
grep -q '^  final (job end): received=[0-9]' "$OUT" || fail "no final alert line"
FIRST=$(grep '^sustained:' "$OUT")

# Every node CPU-bound (--bottleneck-every 1 once made none: n % 1 is never
# 1) and judged from the start (--init-grace 0): each of CPUBottleneck's
# snapshots is a bottleneck.
bash "$SRC/tests/bench/scale.sh" "$BUILD" --nodes 2 --event-minutes 1 \
    --bottleneck-every 1 --init-grace 0 --sample 2 --keep >"$OUT" 2>&1 ||
    fail "scale.sh --bottleneck-every 1 exited $?"
KEPT=$(sed -n 's/^kept //p' "$OUT")
[ -d "$KEPT" ] || fail "no kept work folder"
trap 'rm -f "$OUT"; rm -rf "$KEPT"' EXIT
grep -q 'init_grace 0 min' "$OUT" || fail "banner without init_grace"
V=$(/usr/bin/python3 - "$KEPT/res/scale-0.json" <<'PY'
import json, sys
r = [x for x in json.load(open(sys.argv[1]))["rules"] if x["name"] == "CPUBottleneck"][0]
print(r["datapoints"], r["violations"])
PY
) || fail "no CPUBottleneck in the results"
set -- $V
[ "$1" -gt 0 ] && [ "$1" = "$2" ] || fail "CPUBottleneck datapoints/violations $V: not every snapshot a bottleneck"
echo "PASS: scale bench smoke ($FIRST; every node CPU-bound: $2 of $1 snapshots)"
