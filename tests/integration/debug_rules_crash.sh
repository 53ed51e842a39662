#!/usr/bin/env bash
# debug_rules_crash.sh BUILD_DIR - the debugging rules are exactly once
# across an engine crash: a job of TensorRecord batches (lib/tensor_producer
# .py, scenario flat: loss and weights stop changing at step 12) streamed
# into `trainwatch run` with `state.store: redis`; the engine is killed
# with SIGKILL after 25 of 40 steps (its checkpoint holds buffered tensors
# and the rules' state), restarted, and the rest is sent. Asserts the job
# was restored from its checkpoint, not re-read, and its results file
# (statuses, counters, first/last fires) equals an uninterrupted run's.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
PY=${TW_PYTHON:-/usr/bin/python3}
"$PY" -c 'import confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3 confluent_kafka/flatbuffers missing"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
export PYTHONPATH=$BUILD/hooks/python/flatc${PYTHONPATH:+:$PYTHONPATH}
WORK=$(mktemp -d /tmp/tw-dbgcrash.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
cleanup() {
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
    for f in "$WORK"/*.err; do
        [ -f "$f" ] && { echo "--- $f:" >&2; tail -n 15 "$f" >&2; }
    done
    exit 1
}

tw_redis_start || fail "redis start"
tw_broker_start || fail "broker start"
config() { # NAME GROUP RESULTS STORE
    mkdir -p "$3"
    cat >"$WORK/$1.yaml" <<YAML
kafka:
  group: $2
  client_id: $1
  properties:
    session.timeout.ms: 6000
    heartbeat.interval.ms: 500
engine:
  results_dir: $3
  progress_interval: 200ms
state:
  store: $4
  checkpoint_interval: 200ms
  redis:
    port: $REDIS_PORT
    prefix: "d:"
tick: continuous
lateness: 1s   # 10 steps of event time: tensors are buffered at the crash
rules:
  - name: ExplodingTensor
  - name: LossNotDecreasing
    parameters: {num_steps: 5, stop_at_first_fire: false}
  - name: UnchangedTensor
    parameters: {collection_names: "losses,weights", stop_at_first_fire: false}
  - name: WeightUpdateRatio
    parameters: {stop_at_first_fire: false}
YAML
}
config A crash-group "$WORK/res" redis
produce() {
    timeout 60 "$PY" "$HERE/lib/tensor_producer.py" "$BOOTSTRAP" crashjob flat \
        --steps 40 --fault-step 12 "$@" >>"$WORK/prod.out" 2>&1 ||
        fail "producer: $(cat "$WORK/prod.out")"
}
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no assignment"
produce --from 0 --to 25
N=$(sed -n 's/.* tensors=\([0-9]*\).*/\1/p' "$WORK/prod.out")
wait_for 30 grep -q " tensors=$N " "$WORK/A.err" || fail "first part ($N tensors) not consumed"
sleep 1 # a checkpoint (every 200 ms) holds all of it
kill -KILL "$RUN_PID_A"
wait "$RUN_PID_A" 2>/dev/null
RUN_PID_A=
mv "$WORK/A.err" "$WORK/A1.err"
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "job crashjob restored from checkpoint" "$WORK/A.err" ||
    fail "job not restored from its checkpoint"
grep -q "job crashjob started" "$WORK/A.err" && fail "job re-read from its start"
produce --from 25 --to 40
wait_for 60 test -f "$WORK/res/crashjob.json" || fail "no results after the crash"
tw_run_stop A || fail "run A exit status"

# the uninterrupted run: a new group reads the whole topic
config B fresh-group "$WORK/res2" memory
tw_run_start B "$WORK/B.yaml"
wait_for 60 test -f "$WORK/res2/crashjob.json" || fail "no results from the fresh run"
tw_run_stop B || fail "run B exit status"
"$PY" "$HERE/lib/results.py" same "$WORK/res2/crashjob.json" "$WORK/res/crashjob.json" ||
    fail "results after a crash differ from an uninterrupted run's"
"$PY" - "$WORK/res/crashjob.json" <<'PY' || fail "statuses"
import json, sys
r = json.load(open(sys.argv[1]))
st = {x["name"]: (x["status"], x["report"]["Violations"]) for x in r["rules"]}
print("after the crash:", st)
assert st["LossNotDecreasing"][0] == "IssuesFound", st
assert st["UnchangedTensor"][0] == "IssuesFound", st
assert st["ExplodingTensor"][0] == "NoIssuesFound", st
PY
tw_broker_stop || fail "broker stop"
echo "PASS debug_rules_crash"
