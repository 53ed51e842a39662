#!/usr/bin/env bash
# run_agents.sh BUILD_DIR - two `trainwatch agent`s (one per node, as beside
# each host of a training job) publish under one job id into `trainwatch
# run`; each sends its own JOB_START and JOB_END. The job must end with the
# last agent, not the first: every sample of both agents is evaluated
# (run's samples and the results' input.samples = the agents' sums), and
# none is dropped as after the end.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-agents.XXXXXX)
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
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: agents-test
engine:
  results_dir: $WORK/res
  progress_interval: 0
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

# algo-1 stops after 2 s, algo-2 goes on for 3 s more
"$TW" agent --brokers "$BOOTSTRAP" --job multi --node algo-1 --duration 2 \
    --interval-ms 500 --no-gpus >"$WORK/a1.out" 2>"$WORK/a1.err" &
A1=$!
"$TW" agent --brokers "$BOOTSTRAP" --job multi --node algo-2 --duration 5 \
    --interval-ms 500 --no-gpus >"$WORK/a2.out" 2>"$WORK/a2.err" ||
    fail "agent algo-2: $(cat "$WORK/a2.err")"
wait "$A1" || fail "agent algo-1: $(cat "$WORK/a1.err")"
S1=$(field samples "$(cat "$WORK/a1.out")")
S2=$(field samples "$(cat "$WORK/a2.out")")
[ "${S1:-0}" -gt 0 ] && [ "${S2:-0}" -gt "$S1" ] ||
    fail "agents' samples: algo-1 '$S1', algo-2 '$S2'"

wait_for 30 test -f "$WORK/res/multi.json" || fail "no results for the job"
tw_run_stop A || fail "run exit status"
FIN=$(grep "job multi finished" "$WORK/A.err") || fail "no finish line"
echo "$FIN"
grep -q "finished (end marker)" <<<"$FIN" || fail "not ended by the end markers: $FIN"
[ "$(field samples "$FIN")" -eq $((S1 + S2)) ] ||
    fail "the job evaluated $(field samples "$FIN") samples; the agents sent $S1 + $S2"
OUT=$(cat "$WORK/A.out")
[ "$(field after_end "$OUT")" -eq 0 ] || fail "after_end=$(field after_end "$OUT")"
[ "$(field jobs_finished "$OUT")" -eq 1 ] || fail "jobs_finished=$(field jobs_finished "$OUT")"
SR=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["input"]["samples"])' \
    "$WORK/res/multi.json") || fail "results: $(head -c 300 "$WORK/res/multi.json")"
[ "$SR" -eq $((S1 + S2)) ] || fail "results: input.samples=$SR, the agents sent $S1 + $S2"
tw_broker_stop || fail "broker stop"
echo "PASS run_agents: algo-1 $S1 + algo-2 $S2 samples, one job ended by the last JOB_END"
