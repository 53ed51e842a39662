#!/usr/bin/env bash
# 0103-sigterm-during-storm.sh BUILD_DIR - edge-case issue, defect 1:
# SIGTERM was ignored while one message drove millions of scans.
#
# How it showed: a JOB_END (or sample) in 2030 in a 20-minute job made
# `run` evaluate 3.3 M scans in one message (167 s); its signal check sat
# in the main loop only, so SIGTERM was honoured after 161 s.
#
# Asserts, on a 20-minute 2-node job whose listing ends in 2030 (an empty
# agent file named 1900000000.algo-1.json: replay sends that as the
# JOB_END's latest time):
#  1. default configuration: the clock-skew bound refuses that time, and
#     SIGTERM sent 2 s after the replay stops `run` within 1 s (exit 0);
#  2. `clock_skew: off` (the storm is back: about 3.3 M scans at the
#     job's end): SIGTERM sent 2 s into it is taken within 1 s (the log's
#     "SIGTERM received" line), the job is left unfinished (its message
#     is read again by the next owner) and run exits 0.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$HERE/../integration/lib
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0103.XXXXXX)
BROKER_PID=
. "$LIB/broker.sh"
. "$LIB/run.sh"
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
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

timeout 120 "$TW" synth "$WORK/J" --preset cpu_bottleneck --nodes 2 \
    --duration 20m --interval-ms 5000 --no-framework >/dev/null 2>&1 ||
    fail "synth"
DIR=$(dirname "$(find "$WORK/J/system" -name '*.algo-1.json' | sort | sed -n 1p)")
: >"$DIR/1900000000.algo-1.json"
tw_broker_start || fail "broker start"

# one phase: config extra ($1), group ($2); prints "taken exit" seconds
phase() {
    mkdir -p "$WORK/res$2"
    printf 'kafka:\n  group: regress-0103-%s\nengine:\n  results_dir: %s\n%s\n' \
        "$2" "$WORK/res$2" "$1" >"$WORK/run$2.yaml"
    tw_run_start A "$WORK/run$2.yaml"
    wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
    timeout 60 "$TW" replay "$WORK/J" --brokers "$BOOTSTRAP" -q >/dev/null ||
        fail "replay"
    wait_for 30 grep -q "job J started" "$WORK/A.err" || fail "job not started"
    sleep 2
    local t0 pid=$RUN_PID_A
    t0=$(now)
    kill -TERM "$pid"
    wait_for 30 grep -q "SIGTERM received" "$WORK/A.err" || fail "SIGTERM not taken in 30 s"
    local t1; t1=$(now)
    tw_run_stop A; local rc=$?
    local t2; t2=$(now)
    [ $rc -eq 0 ] || fail "exit status $rc"
    TAKEN=$(secs "$t0" "$t1"); EXITED=$(secs "$t0" "$t2")
    cp "$WORK/A.out" "$WORK/A$2.out"; cp "$WORK/A.err" "$WORK/A$2.err"
}

phase "" 1
OUT=$(cat "$WORK/A1.out")
echo "default: SIGTERM taken after $TAKEN s, exited after $EXITED s"
echo "$OUT"
awk -v t="$EXITED" 'BEGIN { exit !(t < 1.0) }' || fail "default: exit took $EXITED s"
[ "$(field skewed "$OUT")" = 1 ] || fail "default: skewed=$(field skewed "$OUT")"

phase "clock_skew: off" 2
OUT=$(cat "$WORK/A2.out")
echo "clock_skew off: SIGTERM taken after $TAKEN s, exited after $EXITED s"
echo "$OUT"
awk -v t="$TAKEN" 'BEGIN { exit !(t < 1.0) }' || fail "storm: SIGTERM taken after $TAKEN s"
[ "$(field jobs_finished "$OUT")" = 0 ] || fail "storm: the job finished (no storm?)"
[ "$(field scans "$OUT")" -gt 1000 ] || fail "storm: scans=$(field scans "$OUT"): no storm to stop"
tw_broker_stop || fail "broker stop"
echo "PASS 0103"
