#!/usr/bin/env bash
# run_faults.sh BUILD_DIR - a streamed job lives through the faults of a
# real cluster, injected into `trainwatch broker --faults` (librdkafka's
# mock error injection) while `replay` produces and `run` consumes with
# Redis checkpoints: produce and fetch requests failing with "not leader",
# partition leaders moving, the group coordinator moving (heartbeats and
# commits told "not coordinator"), commits timing out, a broker down for
# 3 s and up again, a broker answering late. Asserts: every fault was
# applied, and the results are byte-identical to an uninterrupted run's
# and equal to `eval --json`, with every alert exactly once (lib/state.sh).
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-runfaults.XXXXXX)
BROKER_PID=
REPLAY_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/state.sh"
cleanup() {
    exec 3>&- 2>/dev/null
    for p in ${RUN_PID_F:-} ${RUN_PID_BASE:-} ${REPLAY_PID:-} ${KCAT_PID:-} ${BROKER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
    done
    tw_redis_stop
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    for f in "$WORK"/F.err "$WORK"/broker.err "$WORK"/replay.out; do
        [ -f "$f" ] && { echo "--- $f:" >&2; tail -n 15 "$f" >&2; }
    done
    exit 1
}

state_make_job
tw_redis_start || fail "redis start"
state_baseline
tw_redis_cli flushall >/dev/null

# Three brokers, so leaders and the coordinator have somewhere to move;
# fault commands arrive on the broker's stdin through a FIFO.
mkfifo "$WORK/faults"
rm -f "$WORK/bootstrap"
"$TW" broker --brokers 3 --faults --bootstrap-file "$WORK/bootstrap" \
    <"$WORK/faults" >"$WORK/broker.out" 2>"$WORK/broker.err" &
BROKER_PID=$!
exec 3>"$WORK/faults"
wait_for 10 test -s "$WORK/bootstrap" || fail "broker did not start"
BOOTSTRAP=$(cat "$WORK/bootstrap")
fault() { echo "$*" >&3; }

GROUP=faults-group
state_config F "$GROUP" "$WORK/res"
state_alerts_start "$WORK/alerts.jsonl"
tw_run_start F "$WORK/F.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/F.err" || fail "no assignment"
timeout 300 "$TW" replay "$WORK/$STATE_JOB" --brokers "$BOOTSTRAP" --rate 240x \
    --group "$GROUP" -q >"$WORK/replay.out" 2>&1 &
REPLAY_PID=$!
wait_for 60 grep -q "job $STATE_JOB started" "$WORK/F.err" || fail "the job did not start"

sent=0
step() { fault "$@"; sent=$((sent + 1)); }
step error Produce 5 NOT_LEADER_FOR_PARTITION
step error Fetch 5 NOT_LEADER_FOR_PARTITION
sleep 1
step leader trainwatch.metrics 0 2
step leader trainwatch.metrics 1 3
step leader trainwatch.alerts 0 3
sleep 1
step coordinator group "$GROUP" 2
step error Heartbeat 2 NOT_COORDINATOR
step error OffsetCommit 2 NOT_COORDINATOR
sleep 1
step error OffsetCommit 3 REQUEST_TIMED_OUT
step error Produce 3 REQUEST_TIMED_OUT
sleep 1
step down 3
sleep 3
step up 3
step rtt 2 200
sleep 2
step rtt 2 0
[ -f "$WORK/res/$STATE_JOB.json" ] && fail "the job finished before the faults were over (too fast)"

wait "$REPLAY_PID" || fail "replay: $(cat "$WORK/replay.out")"
REPLAY_PID=
wait_for 180 test -f "$WORK/res/$STATE_JOB.json" || fail "no results after the faults"
sleep 1
tw_run_stop F || fail "run: exit status"
applied=$(grep -c "broker: fault: " "$WORK/broker.err")
refused=$(grep -c "refused" "$WORK/broker.err")
[ "$refused" -eq 0 ] || fail "faults refused: $(grep refused "$WORK/broker.err")"
[ "$applied" -eq "$sent" ] || fail "$applied of $sent faults applied"
echo "faults applied: $applied; run: $(cat "$WORK/F.out")"
OUT=$(cat "$WORK/F.out")
[ "$(field jobs_finished "$OUT")" -eq 1 ] || fail "jobs_finished"
state_alerts_stop
state_check "$WORK/res/$STATE_JOB.json" "$WORK/alerts.jsonl"
exec 3>&-
tw_broker_stop || fail "broker stop"
echo "PASS run_faults"
