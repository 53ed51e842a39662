#!/usr/bin/env bash
# 0203-failing-message-quarantined.sh BUILD_DIR - edge-case issue, defect 2
# (crash loop).
#
# Defect: a message whose processing fails (there: an alert the producer
# refuses) made `run` exit 1 without committing past it; every restart
# read it again and failed again, so the engine crash-looped and no job
# on its partitions was evaluated any more.
#
# Asserts, with a failure that comes back at the same offset every time
# (kafka.properties message.max.bytes 1000: no alert fits, so the job's
# first alert fails): the first two starts exit 1 counting the failure
# (attempt 1 and 2 of 3, in engine.failure_ledger); the third quarantines
# the message instead of exiting: it lands on the dead-letter topic with
# reason "quarantined", the job's results file is written with
# "quarantined": {reason, partition, offset, attempts: 3}, the counters
# say jobs_quarantined=1 messages_quarantined=1 and the ledger is empty;
# a fourth start stays up and does not fail again.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$HERE/../integration/lib
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0203.XXXXXX)
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
    [ -f "$WORK/A.err" ] && tail -n 20 "$WORK/A.err" | cut -c1-300 >&2
    exit 1
}

timeout 60 "$TW" synth "$WORK/poison" --preset cpu_bottleneck --nodes 2 \
    --duration 5m --interval-ms 5000 --no-framework 2>/dev/null >/dev/null ||
    fail "synth"
tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: r0203
  properties:
    message.max.bytes: 1000
    session.timeout.ms: 6000   # a start after an exit 1 waits for it
engine:
  results_dir: $WORK/res
  commit_interval: 500ms
YAML
timeout 60 "$TW" replay "$WORK/poison" --brokers "$BOOTSTRAP" -q >/dev/null || fail "replay"

# exited NAME: the run has exited (its status in $WORK/NAME.rc)
exited() {
    local pid
    eval "pid=\${RUN_PID_$1:-}"
    kill -0 "$pid" 2>/dev/null && return 1
    wait "$pid"; echo $? >"$WORK/$1.rc"
    eval "RUN_PID_$1="
}
for attempt in 1 2; do
    tw_run_start A "$WORK/run.yaml"
    wait_for 60 exited A || fail "start $attempt did not exit on the failing message"
    [ "$(cat "$WORK/A.rc")" -eq 1 ] || fail "start $attempt: exit status $(cat "$WORK/A.rc")"
    cp "$WORK/A.err" "$WORK/start$attempt.err"
    [ "$attempt" -eq 2 ] && cp "$WORK/res/.trainwatch-failures" "$WORK/ledger2" 2>/dev/null
done

# the third start must not exit: the crash loop ends here
tw_run_start A "$WORK/run.yaml"
wait_for 60 test -s "$WORK/res/poison.json" || fail "third start: no results (crash loop)"
sleep 1
kill -0 "$RUN_PID_A" 2>/dev/null || fail "third start exited (crash loop)"
for attempt in 1 2; do
    grep -q "failed (attempt $attempt of 3 before it is quarantined)" "$WORK/start$attempt.err" ||
        fail "start $attempt: attempt not counted"
done
[ -s "$WORK/ledger2" ] || fail "no failure ledger after two failures"
read -r P O N <"$WORK/ledger2"
[ "$N" -eq 2 ] || fail "ledger: $(cat "$WORK/ledger2")"
grep -q "job poison quarantined at partition $P offset $O after 3" "$WORK/A.err" ||
    fail "no quarantine line"
python3 - "$WORK/res/poison.json" "$P" "$O" <<'EOF' || fail "results not marked"
import json, sys
r = json.load(open(sys.argv[1]))
q = r["quarantined"]
assert q["partition"] == int(sys.argv[2]) and q["offset"] == int(sys.argv[3]), q
assert q["attempts"] == 3 and "failed 3 time(s)" in q["reason"], q
assert r["job"] == "poison" and isinstance(r["rules"], list)
EOF
[ ! -s "$WORK/res/.trainwatch-failures" ] || fail "ledger not emptied"
tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "third start: exit status $rc"
OUT=$(cat "$WORK/A.out")
[ "$(field jobs_quarantined "$OUT")" -eq 1 ] || fail "jobs_quarantined: $OUT"
[ "$(field messages_quarantined "$OUT")" -eq 1 ] || fail "messages_quarantined: $OUT"
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.deadletter -o beginning -c 1 -e -q \
    -f '%k|%h\n' >"$WORK/dl.txt" || fail "kcat dead letter"
grep -q "^poison|.*trainwatch.reason=quarantined" "$WORK/dl.txt" || fail "dead letter: $(cat "$WORK/dl.txt")"
grep -q "trainwatch.source.offset=$O" "$WORK/dl.txt" || fail "dead letter offset: $(cat "$WORK/dl.txt")"

# a fourth start: nothing left to fail on
mv "$WORK/A.err" "$WORK/start3.err"
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "fourth start: no assignment"
sleep 2
kill -0 "$RUN_PID_A" 2>/dev/null || fail "fourth start exited"
grep -q "failed (attempt" "$WORK/A.err" && fail "fourth start failed again"
tw_run_stop A || fail "fourth start: exit status"
tw_broker_stop || fail "broker stop"
echo "PASS 0203: failed twice (exit 1), quarantined at the third attempt, no crash loop"
