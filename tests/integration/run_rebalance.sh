#!/usr/bin/env bash
# run_rebalance.sh BUILD_DIR - a job moves between two engine instances
# with its checkpoint: instance A (state.store: redis) evaluates a 2-hour
# 4-node job (lib/state.sh) replayed at 180x; instance B joins the same
# consumer group mid-job, then A stops (SIGTERM). Asserts: B takes the
# job's partition over and restores the job from its checkpoint (log line
# and jobs_restored counter; B never starts it from its first message),
# one instance writes the results, byte-identical to an uninterrupted
# run's and equal to `eval --json`, and every alert is on the topic once.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-rebalance.XXXXXX)
BROKER_PID=
REPLAY_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/state.sh"
cleanup() {
    for p in ${RUN_PID_A:-} ${RUN_PID_B:-} ${RUN_PID_BASE:-} ${REPLAY_PID:-} ${KCAT_PID:-} ${BROKER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
    done
    tw_redis_stop
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    for n in A B; do
        [ -f "$WORK/$n.err" ] && { echo "--- $n:" >&2; tail -n 20 "$WORK/$n.err" >&2; }
    done
    exit 1
}

state_make_job
tw_redis_start || fail "redis start"
state_baseline
tw_redis_cli flushall >/dev/null

tw_broker_start || fail "broker start"
state_config A move-group "$WORK/resA"
state_config B move-group "$WORK/resB"
state_alerts_start "$WORK/alerts.jsonl"
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "A: no assignment"
timeout 300 "$TW" replay "$WORK/$STATE_JOB" --brokers "$BOOTSTRAP" --rate 180x -q \
    >"$WORK/replay.out" 2>&1 &
REPLAY_PID=$!
wait_for 60 grep -q "job $STATE_JOB started" "$WORK/A.err" || fail "A: job not started"
sleep 3
tw_run_start B "$WORK/B.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/B.err" || fail "B: no assignment"
sleep 2
ls "$WORK"/resA/*.json >/dev/null 2>&1 && fail "the job finished before A stopped (too fast)"
tw_run_stop A || fail "A: exit status after SIGTERM"
echo "A: $(cat "$WORK/A.out")"
wait_for 60 grep -q "job $STATE_JOB restored from checkpoint" "$WORK/B.err" ||
    fail "B did not restore the job from a checkpoint"
grep -q "job $STATE_JOB started" "$WORK/B.err" && fail "B started the job from its first message"
wait "$REPLAY_PID" || fail "replay: $(cat "$WORK/replay.out")"
REPLAY_PID=
wait_for 120 test -f "$WORK/resB/$STATE_JOB.json" || fail "B: no results"
sleep 1
tw_run_stop B || fail "B: exit status"
OUT_B=$(cat "$WORK/B.out")
echo "B: $OUT_B"
grep "restored from checkpoint" "$WORK/B.err" | cut -c 1-200
[ "$(field jobs_restored "$OUT_B")" -ge 1 ] || fail "B: jobs_restored"
[ "$(field jobs_started "$OUT_B")" -eq 0 ] || fail "B: jobs_started"
[ "$(field jobs_finished "$OUT_B")" -eq 1 ] || fail "B: jobs_finished"
[ -z "$(ls "$WORK/resA")" ] || fail "A wrote results: $(ls "$WORK/resA")"
state_alerts_stop
state_check "$WORK/resB/$STATE_JOB.json" "$WORK/alerts.jsonl"
tw_broker_stop || fail "broker stop"
echo "PASS run_rebalance"
