#!/usr/bin/env bash
# replay.sh BUILD_DIR - `trainwatch replay` publishes a generated job to the
# standalone broker: kcat sees one message per batch replay reports, all
# keyed by the job id; --follow publishes a folder while it is being
# written, complete lines only, and ends with the job's end marker; and
# `trainwatch agent` publishes this host's samples for 3 s at 500 ms.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
WORK=$(mktemp -d /tmp/tw-replay.XXXXXX)
BROKER_PID=
FOLLOW_PID=
. "$HERE/lib/broker.sh"
cleanup() {
    [ -n "${FOLLOW_PID:-}" ] && kill -KILL "$FOLLOW_PID" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() { echo "FAIL: $*" >&2; exit 1; }

# field NAME LINE: the value of NAME=... in a summary line
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$2"; }

# consume TOPIC: "key size" per message, all partitions, from the start
consume() {
    timeout 30 kcat -b "$BOOTSTRAP" -C -t "$1" -o beginning -e -q -f '%k %S\n'
}

timeout 60 "$TW" synth "$WORK/job-7" --duration 150 --nodes 2 \
    2>"$WORK/synth.err" || fail "synth: $(cat "$WORK/synth.err")"
tw_broker_start || fail "broker start"

# usage errors
"$TW" replay "$WORK/job-7" 2>/dev/null; [ $? -eq 2 ] || fail "replay without --brokers"
"$TW" replay "$WORK/job-7" --brokers "$BOOTSTRAP" --rate 2y 2>/dev/null
[ $? -eq 2 ] || fail "--rate 2y accepted"
"$TW" replay --help | grep -q -- '--follow' || fail "replay --help"

# ---- one-shot replay ------------------------------------------------------
OUT=$(timeout 120 "$TW" replay "$WORK/job-7" --brokers "$BOOTSTRAP" \
    2>"$WORK/replay.err") || fail "replay exit status: $(cat "$WORK/replay.err")"
echo "$OUT"
BATCHES=$(field batches "$OUT")
[ "$(field job "$OUT")" = "job-7" ] || fail "job id is not the folder name"
[ "$(field markers "$OUT")" = 2 ] || fail "markers: $OUT"
[ "$(field samples "$OUT")" -gt 0 ] && [ "$(field events "$OUT")" -gt 0 ] ||
    fail "no samples or events: $OUT"
consume trainwatch.metrics >"$WORK/msgs" || fail "kcat -C"
N=$(wc -l <"$WORK/msgs")
[ "$N" -eq "$BATCHES" ] || fail "$N messages on the topic, replay reported $BATCHES"
[ "$(awk '$1 != "job-7"' "$WORK/msgs" | wc -l)" -eq 0 ] ||
    fail "keys other than job-7: $(awk '{print $1}' "$WORK/msgs" | sort -u)"
[ "$(awk '$2 <= 0' "$WORK/msgs" | wc -l)" -eq 0 ] || fail "empty messages"
# one key, one partition: every message of the job in one partition
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.metrics -o beginning -e -q \
    -f '%p\n' | sort -u >"$WORK/parts"
[ "$(wc -l <"$WORK/parts")" -eq 1 ] || fail "job spread over partitions"

# --job, --topic, --no-end-marker, --rate Nx
OUT=$(timeout 120 "$TW" replay "$WORK/job-7" --brokers "$BOOTSTRAP" --job other \
    --topic replay.other --no-end-marker --rate 1000x -q) || fail "replay 2"
[ "$(field markers "$OUT")" = 1 ] || fail "--no-end-marker: $OUT"
consume replay.other >"$WORK/msgs2"
[ "$(wc -l <"$WORK/msgs2")" -eq "$(field batches "$OUT")" ] || fail "replay 2 count"
[ "$(awk '$1 != "other"' "$WORK/msgs2" | wc -l)" -eq 0 ] || fail "--job key"

# ---- --follow over a folder being written --------------------------------
SRC=$(ls "$WORK"/job-7/system/incremental/*/*.algo-1.json | head -2)
S1=$(echo "$SRC" | sed -n 1p); S2=$(echo "$SRC" | sed -n 2p)
LIVE=$WORK/live
D=$LIVE/system/incremental/$(basename "$(dirname "$S1")")
mkdir -p "$D"
head -n 100 "$S1" >"$D/$(basename "$S1")"
sed -n 101p "$S1" | head -c 30 >>"$D/$(basename "$S1")"   # half a line
mkdir -p "$WORK/tmp"
TMPDIR=$WORK/tmp timeout 120 "$TW" replay "$LIVE" --brokers "$BOOTSTRAP" --topic replay.live \
    --follow >"$WORK/follow.out" 2>"$WORK/follow.err" &
FOLLOW_PID=$!
sleep 2.5
sed -n 101p "$S1" | tail -c +31 >>"$D/$(basename "$S1")"
tail -n +102 "$S1" >>"$D/$(basename "$S1")"
cp "$S2" "$D/"
sleep 2.5
echo 1700000200 >"$LIVE/system/training_job_end.ts"
wait "$FOLLOW_PID"; rc=$?; FOLLOW_PID=
[ $rc -eq 0 ] || fail "replay --follow exit $rc: $(cat "$WORK/follow.err")"
OUT=$(cat "$WORK/follow.out")
echo "$OUT"
LINES=$(cat "$S1" "$S2" | wc -l)
[ "$(field samples "$OUT")" -eq "$LINES" ] ||
    fail "--follow published $(field samples "$OUT") samples of $LINES lines"
[ "$(field bad_lines "$OUT")" -eq 0 ] || fail "--follow read a partial line"
[ "$(field markers "$OUT")" -eq 2 ] || fail "--follow markers: $OUT"
consume replay.live >"$WORK/msgs3"
[ "$(wc -l <"$WORK/msgs3")" -eq "$(field batches "$OUT")" ] || fail "follow count"
[ "$(field files "$OUT")" -eq 2 ] || fail "--follow files: $OUT"
[ -z "$(ls -A "$WORK/tmp")" ] || fail "--follow left its temporary folder: $(ls "$WORK/tmp")"

# SIGINT ends following without JOB_END, exit 0
rm -f "$LIVE/system/training_job_end.ts"
timeout 60 "$TW" replay "$LIVE" --brokers "$BOOTSTRAP" --topic replay.int \
    --follow >"$WORK/int.out" 2>"$WORK/int.err" &
FOLLOW_PID=$!
sleep 2
kill -INT "$FOLLOW_PID"
wait "$FOLLOW_PID"; rc=$?; FOLLOW_PID=
[ $rc -eq 0 ] || fail "replay --follow after SIGINT: exit $rc"
grep -q ' markers=1 .*interrupted' "$WORK/int.out" || fail "SIGINT: $(cat "$WORK/int.out")"

# ---- agent: 3 s at 500 ms --------------------------------------------------
"$TW" agent --brokers "$BOOTSTRAP" --job j --interval-ms 300 2>"$WORK/agent.err"
[ $? -eq 2 ] || fail "--interval-ms 300 accepted"
grep -q '100, 200, 500, 1000, 5000 or 60000' "$WORK/agent.err" || fail "interval message"
OUT=$(timeout 60 "$TW" agent --brokers "$BOOTSTRAP" --job agent-job \
    --topic agent.metrics --duration 3 --interval-ms 500 --node testnode \
    2>"$WORK/agent.err") || fail "agent exit status: $(cat "$WORK/agent.err")"
echo "$OUT"
consume agent.metrics >"$WORK/msgs4"
N=$(awk '$1 == "agent-job"' "$WORK/msgs4" | wc -l)
[ "$N" -ge 5 ] || fail "agent: $N messages with key agent-job, expected >= 5"
[ "$(wc -l <"$WORK/msgs4")" -eq "$N" ] || fail "agent: other keys"
[ "$(field batches "$OUT")" -eq "$N" ] || fail "agent reported $(field batches "$OUT")"
[ "$(grep -c 'NVML\|GPU' "$WORK/agent.err")" -ge 1 ] || fail "no GPU log line"

tw_broker_stop || fail "broker stop"
echo "PASS replay"
