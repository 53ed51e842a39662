#!/usr/bin/env bash
# 0101-far-future-sample.sh BUILD_DIR - edge-case issue, defect 1: one
# far-future timestamp drove a scan and alert storm.
#
# How it showed: one line a year ahead (Timestamp 1731536000, the job is
# in November 2023) appended to one agent file of a 20-minute 2-node job,
# replayed into `run`: the sample dragged its node's clock a year ahead,
# the other node went "idle", the watermark jumped with it: 525 599 scans,
# about a million alerts, 54 % of the real samples dropped as late, and
# ProfilerReport flipped to IssuesFound.
#
# Asserts: with the clock-skew bound the sample is refused and counted
# (skewed=1, skewed_batches=1), named in one WARN, and its message is
# copied to the dead-letter topic with reason clock_skew; nothing is late;
# the job's results (rules, first/latest time, scans) equal `eval` of the
# folder without the bad line; the alerts stay few; all within 60 s.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$HERE/../integration/lib
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0101.XXXXXX)
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

timeout 120 "$TW" synth "$WORK/clean/J" --preset cpu_bottleneck --nodes 2 \
    --duration 20m --interval-ms 5000 --no-framework >/dev/null 2>&1 ||
    fail "synth"
timeout 120 "$TW" eval "$WORK/clean/J" --json --quiet >"$WORK/eval.json" ||
    fail "eval"
mkdir -p "$WORK/bad"
cp -r "$WORK/clean/J" "$WORK/bad/J"
FILE=$(find "$WORK/bad/J/system" -name '*.algo-1.json' | sort | sed -n 5p)
[ -n "$FILE" ] || fail "no agent file to append to"
echo '{"Type":"cpu","Name":"cpu0","Dimension":"CPUUtilization","Value":50,"NodeId":"algo-1","Timestamp":1731536000.0}' >>"$FILE"

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: regress-0101
engine:
  results_dir: $WORK/res
  commit_interval: 500ms
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
START=$(date +%s.%N)
timeout 60 "$TW" replay "$WORK/bad/J" --brokers "$BOOTSTRAP" -q >/dev/null ||
    fail "replay"
wait_for 60 test -s "$WORK/res/J.json" || fail "no results within 60 s"
END=$(date +%s.%N)
tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "run exit status $rc after SIGTERM"
OUT=$(cat "$WORK/A.out")
echo "$OUT"
echo "replay to results: $(awk -v a="$START" -v b="$END" 'BEGIN { printf "%.2f", b - a }') s"

[ "$(field skewed "$OUT")" = 1 ] || fail "skewed=$(field skewed "$OUT"), want 1"
[ "$(field skewed_batches "$OUT")" = 1 ] || fail "skewed_batches, want 1"
[ "$(field late "$OUT")" = 0 ] || fail "late=$(field late "$OUT"), want 0"
[ "$(field scan_cap_hits "$OUT")" = 0 ] || fail "scan_cap_hits"
SCANS=$(field scans "$OUT")
ALERTS=$(field alerts_sent "$OUT")
[ "$SCANS" -le 25 ] || fail "scans=$SCANS for a 20-minute job"
[ "$ALERTS" -le 100 ] || fail "alerts_sent=$ALERTS for a 20-minute job"
[ "$(grep -c 'node algo-1: sample time 1731536000.000000 s is .* ahead' "$WORK/A.err")" -eq 1 ] ||
    fail "no single WARN naming the node and the time"
python3 "$LIB/results.py" same "$WORK/eval.json" "$WORK/res/J.json" ||
    fail "results differ from eval of the clean folder"
python3 - "$WORK/res/J.json" <<'PY' || fail "results input counters"
import json, sys
i = json.load(open(sys.argv[1]))["input"]
assert i["skewed_samples"] == 1 and i["late_samples"] == 0, i
PY

timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.deadletter -o beginning -e -q \
    -f '%k|%h\n' >"$WORK/dl.txt" || fail "kcat dead letters"
[ "$(wc -l <"$WORK/dl.txt")" -eq 1 ] || fail "dead letters: $(cat "$WORK/dl.txt")"
grep -q '^J|.*trainwatch.reason=clock_skew' "$WORK/dl.txt" ||
    fail "dead letter reason: $(cat "$WORK/dl.txt")"
tw_broker_stop || fail "broker stop"
echo "PASS 0101: skewed=1 late=0 scans=$SCANS alerts=$ALERTS, results == eval"
