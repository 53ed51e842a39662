#!/usr/bin/env bash
# hook_debugger.sh BUILD_DIR - the Python hook's debugging side (issue 20
# item 1) against `trainwatch broker`: tests/integration/hook/
# test_hook_debugger.py (config validation, the save rule, rule_configs
# and its YAML through `run --check`, reductions against numpy, and a real
# PyTorch run whose TensorRecords read back from the topic equal the same
# tensors' reductions computed independently, on the 5.6 schedule, with a
# heartbeat per step and the raw-tensor cap; and the pathologies of
# hook/debug_train.py, each publishing its rule's signal: lr 0 and no
# parameters -> constant loss, update_l2 0; lr 1e3 -> NaN from the fault
# step; deep sigmoid -> gradient abs_mean < 1e-7; ReLU bias -50 ->
# dead_fraction 1; a stalled step -> a heartbeat gap; 8 training samples
# -> evaluation loss above training loss), then the stop channel: a
# real training script ends by StopTraining within one step of the stop
# file appearing (tests/integration/hook/stop_train.py); and live: the
# same script streaming into `trainwatch run`, where a rule (StepOutlier,
# lowered to fire on the first slow step past 100 steps) has a stop_file
# action: the engine writes the file, the script ends at its next step.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export TW_BUILD_DIR=$BUILD
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch, numpy, confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-torch, numpy, confluent-kafka or flatbuffers missing"; exit 77; }
WORK=$(mktemp -d /tmp/tw-hook-debugger.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
cleanup() {
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
(cd "$HERE/hook" && TW_BOOTSTRAP=$BOOTSTRAP "$PY" -m unittest -v \
    test_hook_debugger) || fail "test_hook_debugger"
(cd "$HERE/hook" && TW_BOOTSTRAP=$BOOTSTRAP STOP_WORK=$WORK "$PY" \
    stop_train_test.py) || fail "stop channel"

# ---- live: the engine's stop_file action ends the script -----------------
mkdir -p "$WORK/res" "$WORK/stop"
cat >"$WORK/run.yaml" <<YAML
tick: continuous
lateness: 1s
rules:
  - name: StepOutlier
    parameters: {n_outliers: 0, min_factor: 1, min_outlier_fraction: 0}
    actions:
      - type: stop_file
        path: $WORK/stop/{job}.stop
kafka:
  group: hook-debugger
engine:
  results_dir: $WORK/res
  progress_interval: 0
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
"$PY" "$HERE/hook/stop_train.py" --job live --brokers "$BOOTSTRAP" \
    --stop-file "$WORK/stop/{job}.stop" --steps 2000 --step-ms 3 \
    --slow-from 110 --slow-ms 40 >"$WORK/live.out" 2>"$WORK/live.err"
RC=$?
[ -f "$WORK/stop/live.stop" ] || fail "no stop file; script status $RC: $(tail -n 5 "$WORK/live.err")"
"$PY" "$HERE/hook/stop_live_check.py" "$WORK/live.out" "$WORK/live.err" \
    "$WORK/stop/live.stop" "$RC" 40 110 || fail "live stop"
tw_run_stop A || fail "run exit status"
tw_broker_stop || fail "broker stop"
echo "PASS hook_debugger"
