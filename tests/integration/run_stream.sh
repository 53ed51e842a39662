#!/usr/bin/env bash
# run_stream.sh BUILD_DIR - `trainwatch run` against the standalone broker:
#  - streaming equals offline: three generated jobs (cpu_bottleneck,
#    low_gpu, healthy) replayed into `run` give, byte for byte, the rule
#    results of `trainwatch eval --json` on the same folders;
#  - garbage produced with kcat to the metrics topic lands unchanged on the
#    dead-letter topic with its reason, partition and offset in headers,
#    is counted, and the real jobs' results stay equal to eval's;
#  - every alert kcat reads from the alert topic validates against
#    schemas/alert.schema.json (python3-jsonschema), ids are distinct, and
#    the final IssuesFound alerts name the planted rules (none for healthy);
#  - SIGTERM: exit 0 with a summary line; bad configuration is refused
#    with file:line:key.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
python3 -c 'import jsonschema' 2>/dev/null ||
    { echo "SKIP: python3-jsonschema not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-runstream.XXXXXX)
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

# ---- configuration errors name file:line:key -------------------------------
printf 'engine:\n  results_dir: /nonexistent/x\n' >"$WORK/bad1.yaml"
"$TW" run --config "$WORK/bad1.yaml" --brokers 127.0.0.1:1 2>"$WORK/bad.err"
[ $? -eq 2 ] || fail "bad results_dir accepted"
grep -q "bad1.yaml:2: .*results_dir" "$WORK/bad.err" || fail "results_dir error: $(cat "$WORK/bad.err")"
printf 'kafka:\n  group: g\n  colour: red\n' >"$WORK/bad2.yaml"
"$TW" run --config "$WORK/bad2.yaml" --brokers 127.0.0.1:1 2>"$WORK/bad.err"
[ $? -eq 2 ] || fail "unknown kafka key accepted"
grep -q "bad2.yaml:3: .*colour" "$WORK/bad.err" || fail "unknown key error: $(cat "$WORK/bad.err")"
printf 'kafka:\n  properties:\n    no.such.property: 1\n' >"$WORK/bad3.yaml"
"$TW" run --config "$WORK/bad3.yaml" --brokers 127.0.0.1:1 2>"$WORK/bad.err"
[ $? -eq 2 ] || fail "unknown librdkafka property accepted"
grep -q "bad3.yaml:3: .*properties.no.such.property" "$WORK/bad.err" ||
    fail "property error: $(cat "$WORK/bad.err")"
"$TW" run --config "$WORK/bad2.yaml" 2>/dev/null; [ $? -eq 2 ] || fail "no brokers accepted"
"$TW" run --help | grep -q -- 'results_dir' || fail "run --help"

# ---- three generated jobs and their offline results ------------------------
# librdkafka 2.0.2's mock broker keeps at most 5 MB per partition (older
# messages are deleted), so jobs stay small (2 nodes, 8-12 min: < 4.5 MB) and
# each of them hashes to its own partition (crc32(key) % 4: cpu_bottleneck
# 2, low_gpu 3, healthy 0; the garbage's key 'junk' 1).
for p in cpu_bottleneck:12m low_gpu:10m healthy:8m; do
    d=${p#*:}; p=${p%:*}
    timeout 120 "$TW" synth "$WORK/$p" --preset $p --nodes 2 --duration $d \
        2>"$WORK/synth.err" >/dev/null || fail "synth $p: $(cat "$WORK/synth.err")"
    timeout 300 "$TW" eval "$WORK/$p" --json --quiet >"$WORK/$p.eval.json" ||
        fail "eval $p"
done

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: stream-test
  properties:
    session.timeout.ms: 30000     # passed unchanged to librdkafka
engine:
  results_dir: $WORK/res
  progress_interval: 2s
  commit_interval: 500ms
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

replay() {
    local out
    out=$(timeout 120 "$TW" replay "$WORK/$1" --brokers "$BOOTSTRAP" --group stream-test \
        -q) || fail "replay $1"
    awk -v m="$(field mb "$out")" 'BEGIN { exit !(m < 4.5) }' ||
        fail "replay $1: $(field mb "$out") MB, more than the mock broker keeps"
}
replay cpu_bottleneck
# garbage: text, three bytes, and a real batch cut short, all keyed 'junk'
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.metrics -o beginning -c 1 -e -q \
    -f '%s' >"$WORK/real.bin" || fail "kcat -C one message"
printf 'this is not a FlatBuffer, just some text' >"$WORK/g1.bin"
printf 'xyz' >"$WORK/g2.bin"
head -c 60 "$WORK/real.bin" >"$WORK/g3.bin"
timeout 30 kcat -b "$BOOTSTRAP" -P -t trainwatch.metrics -k junk \
    "$WORK/g1.bin" "$WORK/g2.bin" "$WORK/g3.bin" || fail "kcat -P garbage"
replay low_gpu
replay healthy

all_results() { [ "$(ls "$WORK/res" | grep -c '\.json$')" -eq 3 ]; }
wait_for 120 all_results || fail "results: $(ls "$WORK/res")"
for p in cpu_bottleneck low_gpu healthy; do
    python3 "$HERE/lib/results.py" same "$WORK/$p.eval.json" "$WORK/res/$p.json" ||
        fail "$p: streaming results differ from eval"
done
echo "streaming == offline for cpu_bottleneck, low_gpu, healthy"

# ---- SIGTERM: summary line and counters --------------------------------
# Stopped before the topics are read: a clean exit has flushed every dead
# letter and alert, while a running engine may still have some in flight.
tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "run exit status $rc after SIGTERM"
OUT=$(cat "$WORK/A.out")
echo "$OUT"
[ "$(field dead_letters "$OUT")" -eq 3 ] || fail "dead_letters counter"
[ "$(field jobs_finished "$OUT")" -eq 3 ] || fail "jobs_finished counter"
[ "$(field jobs_active "$OUT")" -eq 0 ] || fail "jobs_active counter"
grep -q '^progress: ' "$WORK/A.err" || fail "no progress line"

# ---- dead letters -------------------------------------------------------
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.deadletter -o beginning -c 3 -e -q \
    -f '%k|%h\n' >"$WORK/dl.txt" || fail "kcat -C dead letters"
[ "$(wc -l <"$WORK/dl.txt")" -eq 3 ] || fail "dead letters: $(cat "$WORK/dl.txt")"
[ "$(grep -c '^junk|' "$WORK/dl.txt")" -eq 3 ] || fail "dead-letter keys changed"
sed -n 1p "$WORK/dl.txt" | grep -q 'trainwatch.reason=bad_identifier' || fail "reason 1: $(sed -n 1p "$WORK/dl.txt")"
sed -n 2p "$WORK/dl.txt" | grep -q 'trainwatch.reason=too_short' || fail "reason 2: $(sed -n 2p "$WORK/dl.txt")"
sed -n 3p "$WORK/dl.txt" | grep -Eq 'trainwatch.reason=(verify_failed|bad_identifier|too_short)' ||
    fail "reason 3: $(sed -n 3p "$WORK/dl.txt")"
grep -q 'trainwatch.source.topic=trainwatch.metrics' "$WORK/dl.txt" || fail "source topic header"
grep -q 'trainwatch.source.partition=[0-3],' "$WORK/dl.txt" || fail "source partition header"
grep -q 'trainwatch.source.offset=[0-9]' "$WORK/dl.txt" || fail "source offset header"
# the bytes, unchanged (one message at a time: values are binary)
for i in 1 2 3; do
    timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.deadletter -o beginning \
        -c "$i" -e -q -f '%s' | tail -c "$(stat -c %s "$WORK/g$i.bin")" >"$WORK/dl$i.bin"
    cmp -s "$WORK/g$i.bin" "$WORK/dl$i.bin" || fail "dead letter $i changed"
done
# the offsets in the headers point at the garbage on the metrics topic
P=$(sed -n 1p "$WORK/dl.txt" | sed 's/.*trainwatch.source.partition=\([0-9]*\).*/\1/')
O=$(sed -n 1p "$WORK/dl.txt" | sed 's/.*trainwatch.source.offset=\([0-9]*\).*/\1/')
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.metrics -p "$P" -o "$O" -c 1 -e -q \
    -f '%s' >"$WORK/at.bin"
cmp -s "$WORK/g1.bin" "$WORK/at.bin" || fail "partition $P offset $O is not the garbage"
echo "dead letters: 3, bytes and headers checked"

# ---- alerts --------------------------------------------------------------
timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%s\n' >"$WORK/alerts.jsonl" || fail "kcat -C alerts"
SUMMARY=$(python3 "$HERE/lib/results.py" alerts "$SRC/schemas/alert.schema.json" \
    "$WORK/alerts.jsonl") || fail "alerts do not validate: $SUMMARY"
echo "$SUMMARY"
N=$(sed -n 's/^alerts=\([0-9]*\) .*/\1/p' <<<"$SUMMARY")
IDS=$(sed -n 's/.* ids=\([0-9]*\)$/\1/p' <<<"$SUMMARY")
[ "$N" -gt 0 ] && [ "$N" -eq "$IDS" ] || fail "alerts=$N with $IDS distinct ids"
grep -q '^final_issues.cpu_bottleneck=.*CPUBottleneck' <<<"$SUMMARY" || fail "no CPUBottleneck alert"
grep -q '^final_issues.low_gpu=.*LowGPUUtilization' <<<"$SUMMARY" || fail "no LowGPUUtilization alert"
# root cause first: cpu_bottleneck's LowGPUUtilization is its consequence
# (the schema above validated the field)
grep '"job":"cpu_bottleneck"' "$WORK/alerts.jsonl" | grep '"final":true' |
    grep '"rule":"LowGPUUtilization"' |
    grep -q '"caused_by":{"rule":"CPUBottleneck","parent":"ProfilerReport","alert_id":"[0-9a-f]\{32\}"}' ||
    fail "cpu_bottleneck's final LowGPUUtilization alert is not caused_by CPUBottleneck"
grep -q '^final_issues.healthy=' <<<"$SUMMARY" && fail "healthy job has IssuesFound alerts"
grep -q '"kind":"finding","job":"cpu_bottleneck","rule":"CPUBottleneck"' "$WORK/alerts.jsonl" ||
    fail "no CPUBottleneck finding"
# every alert carries the id as a header too, keyed by its job
timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%k %h\n' >"$WORK/alert_keys.txt"
[ "$(grep -vcE '^(cpu_bottleneck|low_gpu|healthy) trainwatch.alert.id=[0-9a-f]{32}' "$WORK/alert_keys.txt")" -eq 0 ] ||
    fail "alert keys/headers: $(head -3 "$WORK/alert_keys.txt")"
[ "$(field alerts_sent "$OUT")" -eq "$N" ] || fail "alerts_sent $(field alerts_sent "$OUT") != $N on the topic"

# ---- a second group re-reads everything: identical alerts (dedupe by id) --
mkdir -p "$WORK/res2"
sed -e 's/stream-test/stream-test-2/' -e "s#$WORK/res\$#$WORK/res2#" "$WORK/run.yaml" >"$WORK/run2.yaml"
tw_run_start A "$WORK/run2.yaml"
all_results2() { [ "$(ls "$WORK/res2" | grep -c '\.json$')" -eq 3 ]; }
wait_for 120 all_results2 || fail "second run results"
for p in cpu_bottleneck low_gpu healthy; do
    cmp -s "$WORK/res/$p.json" "$WORK/res2/$p.json" || fail "$p: second run differs"
done
tw_run_stop A || fail "second run exit status"
timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%s\n' >"$WORK/alerts2.jsonl"
[ "$(wc -l <"$WORK/alerts2.jsonl")" -eq $((2 * N)) ] || fail "second run: alert count"
[ "$(sort "$WORK/alerts2.jsonl" | uniq -d | wc -l)" -eq "$N" ] ||
    fail "second run's alerts are not byte-identical to the first's"

tw_broker_stop || fail "broker stop"
echo "PASS run_stream"
