#!/usr/bin/env bash
# hook_debugger.sh BUILD_DIR - the Python hook's debugging side (issue 20
# item 1) against `trainwatch broker`: tests/integration/hook/
# test_hook_debugger.py (config validation, the save rule, rule_configs
# and its YAML through `run --check`, reductions against numpy, and a real
# PyTorch run whose TensorRecords read back from the topic equal the same
# tensors' reductions computed independently, on the 5.6 schedule, with a
# heartbeat per step and the raw-tensor cap), then the stop channel: a
# real training script ends by StopTraining within one step of the stop
# file appearing (tests/integration/hook/stop_train.py).
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
cleanup() {
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

tw_broker_start || fail "broker start"
(cd "$HERE/hook" && TW_BOOTSTRAP=$BOOTSTRAP "$PY" -m unittest -v \
    test_hook_debugger) || fail "test_hook_debugger"
(cd "$HERE/hook" && TW_BOOTSTRAP=$BOOTSTRAP STOP_WORK=$WORK "$PY" \
    stop_train_test.py) || fail "stop channel"
tw_broker_stop || fail "broker stop"
echo "PASS hook_debugger"
