#!/usr/bin/env bash
# run_redis_restart.sh BUILD_DIR - Redis dies and comes back mid-stream:
# redis-server with AOF (appendfsync always) is killed with SIGKILL while
# `trainwatch run` evaluates a 2-hour 4-node job (lib/state.sh) replayed at
# 180x, and restarted on the same port some seconds later. Asserts: the
# engine logs the outage once (store down, consumption paused) and the
# recovery once (store back, consumption resumed), keeps its group
# membership (no rebalance), and the results and alerts are byte-identical
# to an uninterrupted run's (results also equal to `eval --json`); the
# engine's /readyz (http: section) answers 200 before the outage, 503
# naming the pause during it, and 200 again after.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
command -v redis-server >/dev/null || { echo "SKIP: redis-server not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-redisrestart.XXXXXX)
BROKER_PID=
REPLAY_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
. "$HERE/lib/redis.sh"
. "$HERE/lib/state.sh"
. "$HERE/lib/http.sh"
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
    [ -f "$WORK/A.err" ] && tail -n 25 "$WORK/A.err" >&2
    exit 1
}

state_make_job
STATE_REDIS_ARGS="--appendonly yes --appendfsync always"
tw_redis_start $STATE_REDIS_ARGS || fail "redis start"
state_baseline
tw_redis_cli flushall >/dev/null

tw_broker_start || fail "broker start"
HTTP_PORT=$(tw_free_port)
READYZ=http://127.0.0.1:$HTTP_PORT/readyz
state_config A restart-group "$WORK/res" "http: {enabled: true, port: $HTTP_PORT, refresh: 50ms}"
state_alerts_start "$WORK/alerts.jsonl"
tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no assignment"
timeout 300 "$TW" replay "$WORK/$STATE_JOB" --brokers "$BOOTSTRAP" --rate 180x -q \
    >"$WORK/replay.out" 2>&1 &
REPLAY_PID=$!
checkpointed() { [ -n "$(tw_redis_cli --raw keys 't:v1:job:*:core')" ]; }
wait_for 60 checkpointed || fail "no checkpoint of the job"
sleep 3
[ -f "$WORK/res/$STATE_JOB.json" ] && fail "the job finished before the outage (too fast)"
tw_http_is 200 "$READYZ" || fail "/readyz not 200 before the outage"
state_redis_kill
echo "redis killed"
wait_for 30 grep -q "paused consumption" "$WORK/A.err" || fail "consumption not paused"
wait_for 5 tw_http_is 503 "$READYZ" || fail "/readyz not 503 during the outage"
echo "readyz during the outage: $(curl -s "$READYZ" | cut -c 1-150)"
curl -s "$READYZ" | grep -q "paused" || fail "/readyz does not say why"
sleep 4 # the replay goes on: messages wait on the topic
[ -f "$WORK/res/$STATE_JOB.json" ] && fail "the job finished while redis was down"
state_redis_restart
echo "redis restarted on port $REDIS_PORT"
wait_for 60 grep -q "resumed consumption" "$WORK/A.err" || fail "consumption not resumed"
wait_for 5 tw_http_is 200 "$READYZ" || fail "/readyz not 200 after the outage"
echo "readyz after the outage: $(curl -s "$READYZ")"
wait "$REPLAY_PID" || fail "replay: $(cat "$WORK/replay.out")"
REPLAY_PID=
wait_for 120 test -f "$WORK/res/$STATE_JOB.json" || fail "no results after the outage"
sleep 1
tw_run_stop A || fail "exit status"
OUT=$(cat "$WORK/A.out")
echo "$OUT"
for what in "unavailable: .*holding state writes" "available again" "paused consumption" "resumed consumption"; do
    n=$(grep -c "$what" "$WORK/A.err")
    [ "$n" -eq 1 ] || fail "'$what' logged $n times, not once"
done
grep "unavailable\|available again\|consumption" "$WORK/A.err" | cut -c 1-160
[ "$(grep -c 'assigned partition' "$WORK/A.err")" -eq 4 ] || fail "rebalanced during the outage"
[ "$(field jobs_finished "$OUT")" -eq 1 ] || fail "jobs_finished"
[ "$(field jobs_started "$OUT")" -eq 1 ] || fail "jobs_started"
state_alerts_stop
state_check "$WORK/res/$STATE_JOB.json" "$WORK/alerts.jsonl"
tw_broker_stop || fail "broker stop"
echo "PASS run_redis_restart"
