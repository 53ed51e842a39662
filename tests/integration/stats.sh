#!/usr/bin/env bash
# `trainwatch stats` against an independent computation: three generated
# jobs (healthy 2 nodes, cpu_bottleneck 1 node, step_outliers 3 nodes with
# 2 GPUs each), each with several groupings and selections, are read again
# by tests/stats/stats_reference.py (its own file parsing, pandas/numpy)
# and every number must be identical. Then the CSV form against the JSON,
# and the errors (bad options: 2; no such folder, a step range without
# steps: 1). Usage: stats.sh BUILD_DIR
set -euo pipefail
BUILD=${1:?build dir}
TW="$BUILD/trainwatch"
HERE=$(cd "$(dirname "$0")" && pwd)
REF="$HERE/../stats/stats_reference.py"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$TW" synth "$WORK/healthy" --preset healthy --nodes 2 --duration 3m --seed 1 2>/dev/null
"$TW" synth "$WORK/cpu" --preset cpu_bottleneck --nodes 1 --duration 4m --seed 3 2>/dev/null
"$TW" synth "$WORK/steps" --preset step_outliers --nodes 3 --gpus 2 --duration 3m --seed 5 2>/dev/null

compared=0
for job in healthy cpu steps; do
  while read -r opts; do
    # shellcheck disable=SC2086
    "$TW" stats "$WORK/$job" --json $opts > "$WORK/out.json" ||
      fail "stats $job $opts exited $?"
    # shellcheck disable=SC2086
    out=$(/usr/bin/python3 "$REF" "$WORK/$job" $opts --compare "$WORK/out.json") ||
      fail "stats $job $opts differs from pandas/numpy: $out"
    echo "$job $opts: $out"
    compared=$((compared + 1))
  done <<'OPTS'
--per-phase
--by process
--by framework_metric --per-phase
--by-step 100:300 --per-phase
--time 1700000030:1700000090.5 --by process
--ranges 0:50,50:100
OPTS
done
[ "$compared" -eq 18 ] || fail "compared $compared runs, expected 18"

# CSV: the same numbers as the JSON, in long form
"$TW" stats "$WORK/healthy" --json > "$WORK/h.json"
"$TW" stats "$WORK/healthy" --csv > "$WORK/h.csv"
/usr/bin/python3 - "$WORK/h.json" "$WORK/h.csv" <<'PY' || fail "CSV and JSON differ"
import csv, json, sys
j = json.load(open(sys.argv[1]))
rows = list(csv.DictReader(open(sys.argv[2])))
assert rows and list(rows[0]) == ["table", "group", "node", "phase", "stat", "value"], rows[:1]
job = {r["stat"]: int(r["value"]) for r in rows if r["table"] == "job"}
for k, v in job.items():
    assert j["job"][k] == v, (k, v, j["job"][k])
steps = {(r["group"], r["stat"]): float(r["value"]) for r in rows
         if r["table"] == "steps_by_training_phase"}
for g in j["steps"]["groups"]:
    for stat in ("count", "mean", "min", "max", "p50", "p95", "p99"):
        assert steps[(g["group"], stat)] == g[stat], (g["group"], stat)
util = [r for r in rows if r["table"] == "utilization" and r["stat"] == "p99"]
assert len(util) == len(j["utilization"]), (len(util), len(j["utilization"]))
print("csv: %d rows agree with the JSON" % len(rows))
PY
"$TW" stats "$WORK/healthy" > "$WORK/h.txt"
grep -q '^step duration (ms) by training_phase' "$WORK/h.txt" ||
  fail "text report lacks the step table"

# bad input: the fixture job plus its system file with line 7 cut short,
# listed under a name the reader takes: the line is named and counted, the
# rest counts (exit 0)
FIX=$(cd "$HERE/../fixtures/agent" && pwd)
cp -r "$FIX/job" "$WORK/fixture"
cp "$FIX/1614852000.algo-1.json.corrupt" "$WORK/fixture/system/incremental/2021030410/1614852060.algo-1.json"
"$TW" stats "$WORK/fixture" --json > "$WORK/fix.json" 2>"$WORK/fix.err" || fail "stats on bad input exited $?"
grep -q "1614852060.algo-1.json:7:" "$WORK/fix.err" || fail "bad line not named: $(cat "$WORK/fix.err")"
/usr/bin/python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["input"]["bad_lines"] == 2, d["input"]   # the cut line + the unmatched E
assert d["input"]["samples"] > 12, d["input"]     # the good lines of the damaged file count
' "$WORK/fix.json" || fail "bad input not counted"

# errors
set +e
"$TW" stats "$WORK/healthy" --by nothing 2>"$WORK/err"; rc=$?
[ $rc -eq 2 ] && grep -q -- "--by: 'nothing'" "$WORK/err" || fail "bad --by: exit $rc"
"$TW" stats "$WORK/healthy" --time 5:1 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "reversed --time: exit $rc"
"$TW" stats "$WORK/healthy" --ranges 10 2>/dev/null; rc=$?
[ $rc -eq 2 ] || fail "bad --ranges: exit $rc"
"$TW" stats "$WORK/nonexistent" 2>"$WORK/err"; rc=$?
[ $rc -eq 1 ] && grep -q nonexistent "$WORK/err" || fail "missing folder: exit $rc"
"$TW" stats "$WORK/healthy" --by-step 900000:900001 2>"$WORK/err"; rc=$?
[ $rc -eq 1 ] && grep -q "no TRAIN or GLOBAL step" "$WORK/err" || fail "empty step range: exit $rc"
set -e
echo "stats: OK"
