#!/usr/bin/env bash
# 0901 - defect 9 of the edge-case issue (output edges): a rule report with
# a non-finite value made the results invalid JSON. OverallSystemUsage
# divides GPU memory by the number of GPUs seen (RULES.md §3.10 quirk 4),
# so a job with GPU memory samples and no GPU utilization gives
# "GPU memory": {"algo-1": {"max": Infinity, ..., "p50": Infinity}} - and
# both `eval --json` and the daemon's <job>.json printed Python's Infinity
# token, which strict parsers (jq, jansson, JSON.parse) reject.
# Asserts: `eval --json` and the results file `run` writes for the same job
# parse with Python's json refusing NaN/Infinity, the values are null and
# the rule says "nonfinite_nulls": 5; the two rule arrays stay identical.
# Usage: 0901-nonfinite-results-invalid-json.sh BUILD_DIR
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$HERE/../integration/lib
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0901.XXXXXX)
BROKER_PID=
. "$LIB/broker.sh"
. "$LIB/run.sh"
cleanup() {
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && tail -n 20 "$WORK/A.err" >&2
    exit 1
}

# strict FILE: parse as RFC 8259 JSON (no NaN/Infinity), print the
# OverallSystemUsage GPU memory stats and its nonfinite_nulls.
strict() {
    python3 - "$1" <<'PY'
import json, sys
def refuse(tok):
    raise ValueError("not JSON: " + tok)
d = json.load(open(sys.argv[1]), parse_constant=refuse)
r = [r for r in d["rules"] if r["name"] == "OverallSystemUsage"][0]
print(json.dumps(r["report"]["Details"]["GPU memory"]), r.get("nonfinite_nulls"))
PY
}
WANT='{"algo-1": {"max": null, "p99": null, "p95": null, "p50": null, "min": null}} 5'

# six one-minute agent files: GPU memory and CPU samples, no GPU utilization
DIR=$WORK/nonfinite
mkdir -p "$DIR/system/incremental/2023111422"
for m in 0 60 120 180 240 300; do
    for s in 0 10 20 30 40 50; do
        t=$((1700000000 + m + s))
        echo "{\"Type\":\"gpu\",\"Name\":\"gpu0\",\"Dimension\":\"GPUMemoryUtilization\",\"Value\":20,\"NodeId\":\"algo-1\",\"Timestamp\":$t.0}"
        echo "{\"Type\":\"cpu\",\"Name\":\"cpu0\",\"Dimension\":\"CPUUtilization\",\"Value\":10,\"NodeId\":\"algo-1\",\"Timestamp\":$t.0}"
    done >"$DIR/system/incremental/2023111422/$((1700000000 + m)).algo-1.json"
done

"$TW" eval "$DIR" --json --quiet >"$WORK/eval.json" || fail "eval"
got=$(strict "$WORK/eval.json") || fail "eval --json is not strict JSON: $(grep -o '.\{30\}Infinity.\{10\}' "$WORK/eval.json" | head -1)"
[ "$got" = "$WANT" ] || fail "eval --json: $got"
echo "eval --json: strict, $got"

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: regress-0901
engine:
  results_dir: $WORK/res
  commit_interval: 500ms
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
timeout 60 "$TW" replay "$DIR" --brokers "$BOOTSTRAP" --group regress-0901 -q >/dev/null || fail "replay"
wait_for 60 test -s "$WORK/res/nonfinite.json" || fail "no results file: $(ls "$WORK/res")"
tw_run_stop A || fail "run exit status $?"
got=$(strict "$WORK/res/nonfinite.json") || fail "the results file is not strict JSON: $(grep -o '.\{30\}Infinity.\{10\}' "$WORK/res/nonfinite.json" | head -1)"
[ "$got" = "$WANT" ] || fail "results file: $got"
python3 "$LIB/results.py" same "$WORK/eval.json" "$WORK/res/nonfinite.json" ||
    fail "results file differs from eval --json"
tw_broker_stop || fail "broker exit status $?"
echo "results file: strict, $got, rules equal to eval --json"
