#!/usr/bin/env bash
# 0801 - edge-case issue, defect 8 ("no data reported healthy"), part 1.
#
# Defect: a job whose samples all carry negative timestamps (a producer with
# a broken clock) has every sample dropped as late, yet all 12 rules of
# ProfilerReport ended NoIssuesFound with 0 datapoints, in `eval` and in
# `run` (results file and final alerts): no data passed for a healthy job.
#
# Asserts: in fixed semantics every rule ends NoData with "input": "none"
# (eval --json, the eval table, `run`'s results file, and the final alert
# of every rule on the alert topic, valid against schemas/alert.schema.json
# when python3-jsonschema is there); in reference semantics every rule keeps
# the reference's NoIssuesFound and carries "input": "none".
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
LIB=$SRC/tests/integration/lib
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0801.XXXXXX)
BROKER_PID=
. "$LIB/broker.sh"
. "$LIB/run.sh"
cleanup() {
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && tail -n 20 "$WORK/A.err" >&2
    exit 1
}

# Two minutes of one node's CPU and GPU samples, every timestamp negative;
# the file names (hence F and L) are ordinary.
JOB=negts
HOUR=$WORK/$JOB/system/incremental/2023111422
mkdir -p "$HOUR"
for f in 1700000000 1700000060 1700000120; do
    for i in $(seq 0 11); do
        t=$((f - 1800000000 + i * 5))
        printf '{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":50,"NodeId":"algo-1","Timestamp":%d.5}\n' "$t"
        printf '{"Type":"gpu","Name":"gpu0","Dimension":"GPUUtilization","Value":90,"NodeId":"algo-1","Timestamp":%d.5}\n' "$t"
    done >"$HOUR/$f.algo-1.json"
done

# every rule: status WANT and input "none" (results-like JSON on stdin);
# N rules: ProfilerReport and its eleven, and Straggler in fixed semantics
check_rules() {
    python3 -c '
import json, sys
want, n = sys.argv[1], int(sys.argv[2])
d = json.load(sys.stdin)
rules = d["rules"]
assert len(rules) == n, [r["name"] for r in rules]
for r in rules:
    assert r.get("input") == "none", r
    assert r["status"] == want, (r["name"], r["status"], want)
' "$1" "$2"
}

"$TW" eval "$WORK/$JOB" --json --quiet >"$WORK/fixed.json" || fail "eval"
check_rules NoData 13 <"$WORK/fixed.json" || fail "eval --json (fixed)"
"$TW" eval "$WORK/$JOB" --json --quiet --semantics reference >"$WORK/ref.json" || fail "eval ref"
check_rules NoIssuesFound 12 <"$WORK/ref.json" || fail "eval --json (reference)"
"$TW" eval "$WORK/$JOB" --quiet >"$WORK/table.txt" || fail "eval table"
grep -Eq '^ +CPUBottleneck +NoData .* none$' "$WORK/table.txt" || fail "table: $(cat "$WORK/table.txt")"
grep -q '^no data: the input of 13 rule' "$WORK/table.txt" || fail "table has no 'no data' line"

# The same job streamed: results file and alerts.
tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
printf 'kafka:\n  group: g0801\nengine:\n  results_dir: %s\n  commit_interval: 200ms\n' \
    "$WORK/res" >"$WORK/run.yaml"
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
timeout 60 "$TW" replay "$WORK/$JOB" --brokers "$BOOTSTRAP" --group g0801 -q >/dev/null || fail "replay"
wait_for 60 test -s "$WORK/res/$JOB.json" || fail "no results file"
check_rules NoData 13 <"$WORK/res/$JOB.json" || fail "run results"
tw_run_stop A || fail "run exit status"
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%s\n' >"$WORK/alerts.jsonl" || fail "kcat alerts"
python3 - "$WORK/alerts.jsonl" "$SRC/schemas/alert.schema.json" <<'PY' || fail "alerts"
import json, sys
alerts = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
final = [a for a in alerts if a["final"]]
assert len(final) == 13, len(final)
for a in final:
    assert a["status"] == "NoData" and a["input"] == "none", a
try:
    import jsonschema
except ImportError:
    sys.exit(0)
v = jsonschema.Draft202012Validator(json.load(open(sys.argv[2])))
for a in alerts:
    v.validate(a)
PY
tw_broker_stop || fail "broker stop"
echo "PASS 0801: negative timestamps -> 13 rules NoData, input none (reference: 12 NoIssuesFound + input none)"
