#!/usr/bin/env bash
# 1502-replay-before-engine-waits.sh BUILD_DIR - hardening issue 15, item 1.
#
# Defect: `trainwatch replay` started before `trainwatch run` (or while it
# is down) published a 15 MB job at full speed into the embedded broker,
# which keeps 5 MiB per partition: by the time the engine read the
# partition the job's head was gone, silently.
#
# Asserts: replay waits for the engine's group instead, and says so: a
# WARN naming group 'trainwatch' within 20 s; once `run` starts it goes
# on, exits 0, and the results equal `eval --json` byte for byte.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$HERE/../integration/lib
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-1502.XXXXXX)
BROKER_PID=
REPLAY_PID=
. "$LIB/broker.sh"
. "$LIB/run.sh"
cleanup() {
    [ -n "${REPLAY_PID:-}" ] && kill -KILL "$REPLAY_PID" 2>/dev/null
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    [ -f "$WORK/replay.err" ] && tail -n 5 "$WORK/replay.err" >&2
    [ -f "$WORK/A.err" ] && grep -v '^progress:' "$WORK/A.err" | tail -n 20 >&2
    exit 1
}

timeout 120 "$TW" synth "$WORK/early" --duration 30m --nodes 2 \
    >/dev/null 2>"$WORK/synth.err" || fail "synth: $(cat "$WORK/synth.err")"
timeout 300 "$TW" eval "$WORK/early" --json --quiet >"$WORK/early.eval.json" ||
    fail "eval"

tw_broker_start || fail "broker start"
timeout 300 "$TW" replay "$WORK/early" --brokers "$BOOTSTRAP" \
    >"$WORK/replay.out" 2>"$WORK/replay.err" &
REPLAY_PID=$!
wait_for 20 grep -q "WARN .*consumer group 'trainwatch'.*--group none" \
    "$WORK/replay.err" || fail "no warning while waiting for the group"
kill -0 "$REPLAY_PID" 2>/dev/null || fail "replay did not wait"

mkdir -p "$WORK/res"
printf 'engine:\n  results_dir: %s\n' "$WORK/res" >"$WORK/run.yaml"
tw_run_start A "$WORK/run.yaml"
wait "$REPLAY_PID"; rc=$?
REPLAY_PID=
[ $rc -eq 0 ] || fail "replay exit status $rc"
OUT=$(cat "$WORK/replay.out")
echo "$OUT"
wait_for 120 test -s "$WORK/res/early.json" || fail "no results"
tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "run exit status $rc"
SUM=$(cat "$WORK/A.out")
echo "$SUM"
[ "$(field samples "$SUM")" = "$(field samples "$OUT")" ] || fail "samples lost"
python3 "$LIB/results.py" same "$WORK/early.eval.json" "$WORK/res/early.json" ||
    fail "streaming results differ from eval's"
tw_broker_stop || fail "broker exit status"
echo "PASS 1502-replay-before-engine-waits"
