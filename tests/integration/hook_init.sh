#!/usr/bin/env bash
# hook_init.sh BUILD_DIR - (d) a training process that sleeps 8 s between
# its start and its first step, with the Python hook and `trainwatch
# agent` beside it (the agent's samples move the job's clock while the
# hook has no step to send), streamed into `trainwatch run` (continuous
# ticks, ProfilerReport with MaxInitializationTime_threshold 0.05 minutes
# = 3 s): a MaxInitializationTime finding on the alert topic, before the
# first step. The job's first timestamp is the hook's JOB_START time, the
# training process's start (/proc), so the initialization is measured
# from there. Prints the time from the threshold's crossing to the alert.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch, confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-torch, python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
WORK=$(mktemp -d /tmp/tw-hook-init.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
cleanup() {
    [ -n "${TRAIN_PID:-}" ] && kill -KILL "$TRAIN_PID" 2>/dev/null
    [ -n "${AGENT_PID:-}" ] && kill -KILL "$AGENT_PID" 2>/dev/null
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/A.err" ] && tail -n 20 "$WORK/A.err" >&2
    exit 1
}

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
tick: continuous
lateness: 1s
rules:
  - name: ProfilerReport
    parameters:
      MaxInitializationTime_threshold: 0.05
kafka:
  group: hook-init
engine:
  results_dir: $WORK/res
  progress_interval: 0
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

# The hook's JOB_START (the process start) comes first and fixes the
# job's first timestamp; then the agent.
"$PY" "$HERE/hook/train.py" --job init --brokers "$BOOTSTRAP" --epochs 1 \
    --batches 20 --workers 0 --step-ms 2 --init-sleep 8 \
    >"$WORK/init.out" 2>"$WORK/init.err" &
TRAIN_PID=$!
wait_for 30 grep -q "job init started" "$WORK/A.err" || fail "the hook's JOB_START never came"
"$TW" agent --brokers "$BOOTSTRAP" --job init --interval-ms 200 --no-gpus \
    >"$WORK/agent.out" 2>"$WORK/agent.err" &
AGENT_PID=$!
wait "$TRAIN_PID" || fail "training: $(tail -n 5 "$WORK/init.err")"
TRAIN_PID=
OUT=$(cat "$WORK/init.out")
echo "$OUT"
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || fail "agent: $(tail -n 5 "$WORK/agent.err")"
AGENT_PID=
wait_for 60 test -f "$WORK/res/init.json" || fail "no results"
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%T %k %s\n' >"$WORK/alerts.txt" || fail "kcat -C alerts"
LINE=$(grep '^[0-9]* init ' "$WORK/alerts.txt" | grep '"kind":"finding"' |
    grep '"rule":"MaxInitializationTime"' | head -n 1) ||
    fail "no MaxInitializationTime finding"
AT_MS=${LINE%% *}
read -r FIRST_US FIRST_STEP_US < <("$PY" - "$WORK/res/init.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert not d.get("partial"), "partial: %s" % d.get("data_loss")
r = {x["name"]: x for x in d["rules"]}["MaxInitializationTime"]
assert r["status"] == "IssuesFound", r["status"]
print(d["first_timestamp_us"], r["report"]["Details"]["step_num"]["first"])
PYEOF
) || fail "results"
CROSS_MS=$(( FIRST_US / 1000 + 3000 ))
[ "$AT_MS" -lt $(( FIRST_STEP_US / 1000 )) ] ||
    fail "the alert came $(( AT_MS - FIRST_STEP_US / 1000 )) ms after the first step"
tw_run_stop A || fail "run exit status"
tw_broker_stop || fail "broker stop"
echo "PASS hook_init: MaxInitializationTime alert $(( AT_MS - CROSS_MS )) ms after the 3 s threshold was crossed, $(( FIRST_STEP_US / 1000 - AT_MS )) ms before the first step"
