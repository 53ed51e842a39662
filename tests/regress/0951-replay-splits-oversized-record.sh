#!/usr/bin/env bash
# 0951-replay-splits-oversized-record.sh BUILD_DIR - edge-case issue,
# defect 9 (output edges): `replay` gave up on a whole job ("one record of
# node ... encodes to N bytes, more than a message may hold", exit 1)
# though `eval` accepts the folder. Two ways in:
#  - one framework event whose args hold 1.2 MB (a record that alone
#    encodes to more than the 900 KB replay puts in a message);
#  - a system file with 1000 series of 1 KB names: every part of its
#    batch, down to one sample, carried the file's whole ~1 MB series
#    dictionary.
#
# Asserts: replay publishes the whole job (exit 0; exactly one record sent
# alone in an oversized message, with a warning; every sample and event)
# and `trainwatch run` gives results equal byte for byte to `eval --json`.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$HERE/../integration/lib
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0951.XXXXXX)
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

JOB=$WORK/bigrec
timeout 120 "$TW" synth "$JOB" --duration 5m --nodes 1 \
    >/dev/null 2>"$WORK/synth.err" || fail "synth: $(cat "$WORK/synth.err")"
python3 - "$JOB" <<'PY' || fail "cannot plant the big records"
import glob, json, sys
job = sys.argv[1]
# one event with a 1.2 MB argument, inside the step range of its file
trace = sorted(glob.glob(job + "/framework/pevents/*/*_pythontimeline.json"))[1]
text = open(trace).read().rstrip()
assert text.endswith("]")
ev = {"name": "layer2", "pid": 1, "ph": "X", "ts": 130000000, "dur": 5000,
      "args": {"step_num": "500", "note": "x" * 1200000}}
open(trace, "w").write(text[:-1].rstrip() + ",\n" + json.dumps(ev) + "\n]\n")
# 1000 series with 1 KB names in one system file
sysf = sorted(glob.glob(job + "/system/incremental/*/*.json"))[1]
t0 = float(sysf.rsplit("/", 1)[1].split(".")[0])
with open(sysf, "a") as f:
    for i in range(1000):
        f.write(json.dumps({"Type": "custom", "Name": "n%04d-" % i + "y" * 1000,
                            "Dimension": "Metric", "Value": i, "NodeId": "algo-1",
                            "Timestamp": t0 + 1 + i / 100.0}) + "\n")
PY
timeout 300 "$TW" eval "$JOB" --json --quiet >"$WORK/bigrec.eval.json" ||
    fail "eval does not accept the folder"

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
printf 'engine:\n  results_dir: %s\n' "$WORK/res" >"$WORK/run.yaml"
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

OUT=$(timeout 120 "$TW" replay "$JOB" --brokers "$BOOTSTRAP" 2>"$WORK/replay.err")
rc=$?
echo "$OUT"
[ $rc -eq 0 ] || fail "replay exit status $rc: $(tail -n 5 "$WORK/replay.err")"
[ "$(field oversized "$OUT")" = 1 ] || fail "oversized=$(field oversized "$OUT"), expected 1"
grep -q "WARN .*one record of node 'algo-1-0' from .*pythontimeline.json encodes to" \
    "$WORK/replay.err" || fail "no warning naming the oversized record"

wait_for 60 test -s "$WORK/res/bigrec.json" || fail "no results"
tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "run exit status $rc"
SUM=$(cat "$WORK/A.out")
echo "$SUM"
[ "$(field samples "$SUM")" = "$(field samples "$OUT")" ] || fail "samples lost"
[ "$(field events "$SUM")" = "$(field events "$OUT")" ] || fail "events lost"
[ "$(field dead_letters "$SUM")" = 0 ] || fail "dead letters"
python3 "$LIB/results.py" same "$WORK/bigrec.eval.json" "$WORK/res/bigrec.json" ||
    fail "streaming results differ from eval's"
tw_broker_stop || fail "broker exit status"
echo "PASS 0951-replay-splits-oversized-record"
