#!/usr/bin/env bash
# run_crash.sh BUILD_DIR - crash recovery with Redis checkpoints: a 2-hour
# 4-node job (lib/state.sh) replayed at 180x into `trainwatch run` with
# `state.store: redis`; the engine is killed with SIGKILL at three random
# points mid-job and restarted each time. Asserts: every restart restores
# the job from its checkpoint (not from its first message), the final
# results file is byte-identical to an uninterrupted run's and equal to
# `eval --json`, and the alert topic holds every alert of the uninterrupted
# run exactly once (ids counted with kcat). The job's windows and rule
# state go to the store in 4 KB slices (state.checkpoint_slice_bytes), one
# per checkpoint (state.checkpoint_target_bytes 0: no filling, no pacing),
# so most crashes land while scans wait for their snapshot: at least one
# restart must run scans again (deferred state, job.h).
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-runcrash.XXXXXX)
BROKER_PID=
REPLAY_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/state.sh"
cleanup() {
    for p in ${RUN_PID_A:-} ${RUN_PID_BASE:-} ${REPLAY_PID:-} ${KCAT_PID:-} ${BROKER_PID:-}; do
        kill -KILL "$p" 2>/dev/null
    done
    tw_redis_stop
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    for f in "$WORK"/A*.err; do
        [ -f "$f" ] && { echo "--- $f:" >&2; tail -n 15 "$f" >&2; }
    done
    exit 1
}

state_make_job
tw_redis_start || fail "redis start"
state_baseline
tw_redis_cli flushall >/dev/null

tw_broker_start || fail "broker start"
STATE_SLICE_BYTES=4096 STATE_TARGET_BYTES=0 state_config A crash-group "$WORK/res"
state_alerts_start "$WORK/alerts.jsonl"
RUN=0
start_a() {
    RUN=$((RUN + 1))
    "$TW" run --config "$WORK/A.yaml" --brokers "$BOOTSTRAP" \
        >"$WORK/A$RUN.out" 2>"$WORK/A$RUN.err" &
    RUN_PID_A=$!
}
start_a
wait_for 60 grep -q "assigned partition" "$WORK/A1.err" || fail "no assignment"
# 2 h of event time in ~60 s: each restart waits for the killed member's
# session (6 s) to expire before it is assigned, so three crashes at up to
# 5 s apart need ~40 s while the job must still be running
timeout 300 "$TW" replay "$WORK/$STATE_JOB" --brokers "$BOOTSTRAP" --rate 120x -q \
    >"$WORK/replay.out" 2>&1 &
REPLAY_PID=$!

seed=${CRASH_SEED:-$RANDOM}
echo "crash points from seed $seed"
RANDOM=$seed
for k in 1 2 3; do
    # let it get somewhere first: the job started and a checkpoint written
    wait_for 60 grep -q "job $STATE_JOB \(started\|restored\)" "$WORK/A$RUN.err" 2>/dev/null ||
        fail "run $RUN: the job did not start"
    sleep "$((1 + RANDOM % 4)).$((RANDOM % 10))"
    [ -f "$WORK/res/$STATE_JOB.json" ] && fail "the job finished before crash $k (too fast)"
    kill -KILL "$RUN_PID_A"
    wait "$RUN_PID_A" 2>/dev/null
    echo "crash $k: killed run $RUN at $(tw_redis_cli get "t:v1:part:trainwatch.metrics:$(tw_redis_cli --raw keys 't:v1:part:*:offset' | head -1 | cut -d: -f5):offset") (checkpointed offset)"
    start_a
    wait_for 60 grep -q "assigned partition" "$WORK/A$RUN.err" 2>/dev/null || fail "run $RUN: no assignment"
    wait_for 30 grep -q "job $STATE_JOB restored from checkpoint" "$WORK/A$RUN.err" ||
        fail "run $RUN: job not restored from its checkpoint"
    grep -q "job $STATE_JOB started" "$WORK/A$RUN.err" &&
        fail "run $RUN: the job was started again from its first message"
done
cat "$WORK"/A*.err | grep -o "[0-9]* scan(s) since its state snapshot.*" | sed 's/^/restore: /'
grep -q "scan(s) since its state snapshot" "$WORK"/A*.err ||
    fail "no restart ran a scan again (the slices always complete?)"
wait "$REPLAY_PID" || fail "replay: $(cat "$WORK/replay.out")"
REPLAY_PID=
wait_for 120 test -f "$WORK/res/$STATE_JOB.json" || fail "no results after the crashes"
sleep 1
tw_run_stop A || fail "last run: exit status"
OUT=$(cat "$WORK/A$RUN.out")
echo "last run: $OUT"
[ "$(field jobs_restored "$OUT")" -eq 1 ] || fail "last run: jobs_restored"
[ "$(field jobs_finished "$OUT")" -eq 1 ] || fail "last run: jobs_finished"
[ "$(field jobs_idle "$OUT")" -eq 0 ] || fail "last run: finished by idle timeout"
# the finished job left a tombstone and no parts behind
[ "$(tw_redis_cli exists "t:v1:done:{$STATE_JOB}")" -eq 1 ] || fail "no tombstone"
[ "$(tw_redis_cli --raw keys "t:v1:job:*" | grep -c .)" -eq 0 ] || fail "parts left: $(tw_redis_cli --raw keys 't:v1:job:*')"
state_alerts_stop
state_check "$WORK/res/$STATE_JOB.json" "$WORK/alerts.jsonl"
tw_broker_stop || fail "broker stop"
echo "PASS run_crash (seed $seed)"
