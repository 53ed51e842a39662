#!/usr/bin/env bash
# 1501-replay-full-speed-no-loss.sh BUILD_DIR - hardening issue 15, item 1.
#
# Defect: `trainwatch broker`, `trainwatch run` (defaults: group trainwatch,
# no state store), then `trainwatch replay` of a generated 30-minute 2-node
# job with framework events (15 MB on the topic) at full speed: the
# embedded broker (librdkafka's mock cluster) keeps 5 MiB per partition
# and deleted the head of the log before the engine read it; the engine
# logged "joined mid-stream ... a previous owner finished it; skipping its
# messages" and wrote no results.
#
# Asserts: the same, with no pacing and no option on replay (flow control
# follows the engine's default group by itself), gives results equal byte
# for byte to `eval --json` on the folder; the engine skipped nothing and
# replay reports that it waited for the group.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$HERE/../integration/lib
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-1501.XXXXXX)
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
    [ -f "$WORK/A.err" ] && grep -v '^progress:' "$WORK/A.err" | tail -n 20 >&2
    exit 1
}

timeout 120 "$TW" synth "$WORK/job30" --duration 30m --nodes 2 \
    >/dev/null 2>"$WORK/synth.err" || fail "synth: $(cat "$WORK/synth.err")"
timeout 300 "$TW" eval "$WORK/job30" --json --quiet >"$WORK/job30.eval.json" ||
    fail "eval"

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
printf 'engine:\n  results_dir: %s\n' "$WORK/res" >"$WORK/run.yaml"
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

OUT=$(timeout 300 "$TW" replay "$WORK/job30" --brokers "$BOOTSTRAP" -q) ||
    fail "replay: $OUT"
echo "$OUT"
awk -v m="$(field mb "$OUT")" 'BEGIN { exit !(m > 10) }' ||
    fail "the job is only $(field mb "$OUT") MB: no test of the 5 MiB retention"

wait_for 120 test -s "$WORK/res/job30.json" || fail "no results for job30"
tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "run exit status $rc"
SUM=$(cat "$WORK/A.out")
echo "$SUM"
python3 "$LIB/results.py" same "$WORK/job30.eval.json" "$WORK/res/job30.json" ||
    fail "streaming results differ from eval's"
[ "$(field jobs_skipped_partial "$SUM")" = 0 ] || fail "the engine skipped a job"
[ "$(field skipped_messages "$SUM")" = 0 ] || fail "the engine skipped messages"
[ "$(field samples "$SUM")" = "$(field samples "$OUT")" ] || fail "samples lost"
for f in offset_gaps offsets_lost jobs_data_loss jobs_partial; do
    [ "$(field $f "$SUM")" = 0 ] || fail "$f: $SUM"
done
# Whether replay had to wait depends on how fast this machine runs the
# engine (under ASan it keeps up): reported, not asserted. Without flow
# control the broker drops data on a normal build (the defect).
echo "replay waited $(field flow_waits "$OUT") time(s), $(field flow_wait_s "$OUT") s"
tw_broker_stop || fail "broker exit status"
echo "PASS 1501-replay-full-speed-no-loss"
