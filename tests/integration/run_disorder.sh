#!/usr/bin/env bash
# run_disorder.sh BUILD_DIR - ordering and duplicates through Kafka: a
# generated job replayed with its batches out of order (blocks of 3, newest
# first) and every 3rd message published twice gives `trainwatch run` the
# same rule results as `trainwatch eval --json` on the folder; the copies
# are dropped by (node, seq) and counted, nothing is late. The same job
# reordered in blocks of 6 goes beyond the allowed lateness: its late
# events are counted and dropped (so the reordering is real). A job whose
# JOB_END never comes is finalized after `job_idle` without messages.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-disorder.XXXXXX)
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
    [ -f "$WORK/A.err" ] && tail -n 30 "$WORK/A.err" >&2
    exit 1
}

# usage errors of the test options
"$TW" replay /tmp --brokers x --reorder 0 2>/dev/null; [ $? -eq 2 ] || fail "--reorder 0 accepted"
"$TW" replay /tmp --brokers x --duplicate-every x 2>/dev/null; [ $? -eq 2 ] || fail "--duplicate-every x accepted"

# 2 nodes, 10 min: small enough for the mock broker's 5 MB per partition
timeout 120 "$TW" synth "$WORK/cpu_bottleneck" --preset cpu_bottleneck --nodes 2 \
    --duration 10m >/dev/null 2>"$WORK/synth.err" || fail "synth: $(cat "$WORK/synth.err")"
timeout 300 "$TW" eval "$WORK/cpu_bottleneck" --json --quiet >"$WORK/eval.json" || fail "eval"

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: disorder-test
engine:
  results_dir: $WORK/res
  commit_interval: 500ms
  job_idle: 4s
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

OUT=$(timeout 120 "$TW" replay "$WORK/cpu_bottleneck" --brokers "$BOOTSTRAP" -q --group disorder-test \
    --reorder 3 --duplicate-every 3) || fail "replay"
echo "$OUT"
DUPS=$(field duplicates "$OUT")
[ "$DUPS" -gt 5 ] || fail "replay published only $DUPS duplicates"

have_result() { [ -f "$WORK/res/cpu_bottleneck.json" ]; }
wait_for 120 have_result || fail "no results"
python3 "$HERE/lib/results.py" same "$WORK/eval.json" "$WORK/res/cpu_bottleneck.json" ||
    fail "out-of-order, duplicated stream: results differ from eval"

# beyond the lateness: blocks of 6
OUT6=$(timeout 120 "$TW" replay "$WORK/cpu_bottleneck" --brokers "$BOOTSTRAP" -q --group disorder-test \
    --job disorder6 --reorder 6) || fail "replay --reorder 6"
have_result6() { [ -f "$WORK/res/disorder6.json" ]; }
wait_for 120 have_result6 || fail "no results for disorder6"

# no JOB_END: finalized by the idle timeout
timeout 120 "$TW" replay "$WORK/cpu_bottleneck" --brokers "$BOOTSTRAP" -q --group disorder-test \
    --job idlejob --no-end-marker >/dev/null || fail "replay --no-end-marker"
have_idle() { [ -f "$WORK/res/idlejob.json" ]; }
wait_for 60 have_idle || fail "job without JOB_END not finalized after job_idle"
grep -q 'job idlejob finished (idle' "$WORK/A.err" ||
    fail "idle finalization not logged: $(grep idlejob "$WORK/A.err" | tail -2)"

tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "run exit status $rc"
SUM=$(cat "$WORK/A.out")
echo "$SUM"
[ "$(field duplicates "$SUM")" -eq "$DUPS" ] ||
    fail "run counted $(field duplicates "$SUM") duplicates, replay sent $DUPS"
[ "$(field jobs_finished "$SUM")" -eq 3 ] || fail "jobs_finished"
[ "$(field jobs_idle "$SUM")" -eq 1 ] || fail "jobs_idle: $(field jobs_idle "$SUM")"
# only the blocks-of-6 job had late events (the blocks-of-3 one was checked
# equal to eval above, which a single dropped event would break)
LATE=$(field late "$SUM")
[ "$LATE" -gt 0 ] || fail "reordering by 6 batches produced no late events"
grep -q 'job disorder6 finished.*late=[1-9]' "$WORK/A.err" ||
    fail "late events not reported on job disorder6: $(grep disorder6 "$WORK/A.err" | tail -2)"
grep -q 'job cpu_bottleneck finished.*late=0' "$WORK/A.err" ||
    fail "late events on the in-lateness job: $(grep 'cpu_bottleneck finished' "$WORK/A.err")"
# ---- a job whose start the broker no longer has -------------------------
timeout 120 "$TW" synth "$WORK/big" --preset cpu_bottleneck --nodes 2 \
    --duration 30m >/dev/null 2>"$WORK/synth.err" || fail "synth big: $(cat "$WORK/synth.err")"
# no flow control: the broker is to delete the job's start before a reader
BIG=$(timeout 120 "$TW" replay "$WORK/big" --brokers "$BOOTSTRAP" -q --job bigjob \
    --group none) ||
    fail "replay big"
awk -v m="$(field mb "$BIG")" 'BEGIN { exit !(m > 7) }' || fail "big job only $(field mb "$BIG") MB"
mkdir -p "$WORK/res2"
sed -e 's/disorder-test/disorder-late-group/' -e "s#$WORK/res\$#$WORK/res2#" \
    "$WORK/run.yaml" >"$WORK/run2.yaml"
tw_run_start A "$WORK/run2.yaml"
# a fresh group reads from the log's beginning: nothing proves a previous
# owner finished bigjob, so its lost head is data loss, said and marked
wait_for 60 grep -qE 'job bigjob met mid-stream.*nothing proves|job bigjob: first met at partition' "$WORK/A.err" ||
    fail "bigjob's lost beginning not reported"
wait_for 120 test -e "$WORK/res2/bigjob.json" || fail "bigjob not evaluated"
tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "run (late group) exit status $rc"
SUM2=$(cat "$WORK/A.out")
[ "$(field jobs_data_loss "$SUM2")" -ge 1 ] || fail "jobs_data_loss: $SUM2"
[ "$(field jobs_partial "$SUM2")" -ge 1 ] || fail "jobs_partial: $SUM2"
[ "$(field jobs_finished_before "$SUM2")" -eq 0 ] || fail "jobs_finished_before: $SUM2"
python3 - "$WORK/res2/bigjob.json" <<'PY' || fail "bigjob results not marked partial"
import json, sys
r = json.load(open(sys.argv[1]))
assert r.get("partial") is True, r.keys()
kinds = {x["kind"] for x in r["data_loss"]["ranges"]}
assert "joined_mid_stream" in kinds and "sequence_gap" in kinds, kinds
assert r["data_loss"]["missing"] > 0
PY
grep -q 'WARN.*job bigjob: node .* batches 1\.\.' "$WORK/A.err" ||
    fail "no WARN naming bigjob's missing batches"

tw_broker_stop || fail "broker stop"
echo "PASS run_disorder"
