#!/usr/bin/env bash
# progress_restart.sh BUILD_DIR - a wall-clock finding is published once
# across an engine crash: `trainwatch run` with the redis store
# (checkpoints every 200 ms) watches a real 3-rank gloo job
# (progress/ddp_train.py) whose rank 1 hangs; once the Progress finding is
# on the alert topic the engine is killed with SIGKILL and a second one
# takes the job over from the checkpoint; 10 s later (the job still hung)
# the topic holds exactly one Progress finding for the job, and the second
# engine restored the job.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch, torch.distributed, confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-torch, python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
WORK=$(mktemp -d /tmp/tw-progress-restart.XXXXXX)
BROKER_PID=
HANG_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
cleanup() {
    [ -n "$HANG_PID" ] && kill -KILL -- "-$HANG_PID" 2>/dev/null
    for p in ${RUN_PID_A:-} ${RUN_PID_B:-} ${BROKER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
    done
    tw_redis_stop
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    for f in A B; do [ -f "$WORK/$f.err" ] && tail -n 15 "$WORK/$f.err" >&2; done
    exit 1
}

tw_redis_start || fail "redis start"
tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
for n in A B; do
    cat >"$WORK/$n.yaml" <<YAML
tick: 1s
lateness: 1s
clock_skew: 120s
kafka:
  group: progress-restart
  client_id: $n
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 500
engine:
  results_dir: $WORK/res
  progress_interval: 0
state:
  store: redis
  checkpoint_interval: 200ms
  redis:
    port: $REDIS_PORT
    prefix: "p:"
rules:
  - name: Progress
    parameters:
      floor: 3
YAML
done
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
setsid "$PY" "$HERE/progress/ddp_train.py" --job hang --brokers "$BOOTSTRAP" \
    --world 3 --steps 1000 --hang-rank 1 --hang-step 40 \
    >"$WORK/hang.out" 2>"$WORK/hang.err" &
HANG_PID=$!
findings() {
    timeout 20 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e \
        -q -f '%k %s\n' 2>/dev/null | grep '^hang ' |
        grep '"kind":"finding"' | grep -c '"rule":"Progress"'
}
got() { [ "$(findings)" -ge 1 ]; }
wait_for 120 got || fail "no Progress finding: $(tail -n 3 "$WORK/hang.err")"
sleep 1 # a checkpoint or two after it
kill -KILL "$RUN_PID_A"
wait "$RUN_PID_A" 2>/dev/null
RUN_PID_A=
tw_run_start B "$WORK/B.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/B.err" || fail "B: no partition assigned"
sleep 10
N=$(findings)
[ "$N" -eq 1 ] || fail "$N Progress findings for the hung job across the restart"
grep -q "hang" "$WORK/B.err" || fail "B never saw the job"
echo "one Progress finding across a SIGKILL of the engine; B: $(grep -m1 'hang' "$WORK/B.err")"
echo PASS
