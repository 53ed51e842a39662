#!/usr/bin/env bash
# 0802 - edge-case issue, defect 8 ("no data reported healthy"), part 2.
#
# Defect: `trainwatch replay` of an empty profiler-output folder publishes
# JOB_START and JOB_END and nothing else; `run` then wrote a results file
# with all 12 rules NoIssuesFound (0 datapoints) and sent 12 final alerts
# saying NoIssuesFound: a job that sent nothing was reported healthy.
#
# Asserts: replay warns that the folder has no agent files; `run`'s results
# file gives every rule status NoData and "input": "none", and so does the
# final alert of every rule; `eval` of the same folder is an error (exit 1,
# "no agent files"), never a healthy table.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$(cd "$HERE/../integration/lib" && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0802.XXXXXX)
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

JOB=emptyjob
mkdir -p "$WORK/$JOB"
"$TW" eval "$WORK/$JOB" >"$WORK/eval.out" 2>"$WORK/eval.err"
[ $? -eq 1 ] || fail "eval of an empty folder did not fail: $(cat "$WORK/eval.out")"
grep -q "no agent files" "$WORK/eval.err" || fail "eval: $(cat "$WORK/eval.err")"

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
printf 'kafka:\n  group: g0802\nengine:\n  results_dir: %s\n  commit_interval: 200ms\n' \
    "$WORK/res" >"$WORK/run.yaml"
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
timeout 60 "$TW" replay "$WORK/$JOB" --brokers "$BOOTSTRAP" --group g0802 >"$WORK/replay.out" \
    2>"$WORK/replay.err" || fail "replay: $(cat "$WORK/replay.err")"
grep -q "no agent files" "$WORK/replay.err" || fail "replay did not warn: $(cat "$WORK/replay.err")"
wait_for 60 test -s "$WORK/res/$JOB.json" || fail "no results file"
python3 - "$WORK/res/$JOB.json" <<'PY' || fail "results: $(head -c 600 "$WORK/res/$JOB.json")"
import json, sys
rules = json.load(open(sys.argv[1]))["rules"]
assert len(rules) == 13, [r["name"] for r in rules]  # and Straggler (fixed)
for r in rules:
    assert r["status"] == "NoData" and r.get("input") == "none", r
PY
tw_run_stop A || fail "run exit status"
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%s\n' >"$WORK/alerts.jsonl" || fail "kcat alerts"
python3 - "$WORK/alerts.jsonl" <<'PY' || fail "alerts: $(head -c 600 "$WORK/alerts.jsonl")"
import json, sys
final = [a for a in map(json.loads, filter(str.strip, open(sys.argv[1]))) if a["final"]]
assert len(final) == 13, len(final)
for a in final:
    assert a["status"] == "NoData" and a.get("input") == "none", a
PY
tw_broker_stop || fail "broker stop"
echo "PASS 0802: an empty replayed folder -> 13 rules NoData, input none"
