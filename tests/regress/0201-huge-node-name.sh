#!/usr/bin/env bash
# 0201-huge-node-name.sh BUILD_DIR - edge-case issue, defect 2 (absurd id).
#
# Defect: one batch whose node id is 600 KB (a 900 KB one in the issue)
# was accepted; the node then appeared in every alert of its job (the node
# list, reports keyed by node), the alerts outgrew the producer's
# message.max.bytes, `run` exited 1 "stopping without committing past the
# failed message", and every restart failed on the same job: no job's
# results were written any more.
#
# Asserts: a job with such a batch (an extra agent file whose NodeId is
# 600 000 bytes) and a second job are replayed into `run`: the engine keeps
# running, the batch goes to the dead-letter topic with reason
# id_too_long (counted in dead_letters), and both jobs' results equal
# `eval --json` of their folders without the extra file.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$HERE/../integration/lib
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-0201.XXXXXX)
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

for p in cpu_bottleneck:huge healthy:other; do
    job=${p#*:}; p=${p%:*}
    timeout 60 "$TW" synth "$WORK/$job" --preset $p --nodes 2 --duration 5m \
        --interval-ms 5000 --no-framework 2>/dev/null >/dev/null || fail "synth $job"
    timeout 60 "$TW" eval "$WORK/$job" --json --quiet >"$WORK/$job.eval.json" ||
        fail "eval $job"
done
# the extra agent file (a third node's name): three samples inside the job
# whose NodeId is 600 KB
F=$(ls "$WORK"/huge/system/incremental/*/*.algo-1.json | sed -n 2p)
python3 - "$F" <<'EOF' || fail "writing the huge-node file"
import json, sys
node = "n" * 600000
path = sys.argv[1].replace(".algo-1.json", ".algo-3.json")
ts = float(path.rsplit("/", 1)[1].split(".")[0]) + 1.5
with open(path, "w") as f:
    for i in range(3):
        f.write(json.dumps({"Type": "cpu", "Name": "cpu0",
                            "Dimension": "CPUUtilization", "Value": 50,
                            "NodeId": node, "Timestamp": ts + i}) + "\n")
EOF

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
printf 'kafka:\n  group: r0201\nengine:\n  results_dir: %s\n  commit_interval: 500ms\n' \
    "$WORK/res" >"$WORK/run.yaml"
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"
for job in huge other; do
    timeout 120 "$TW" replay "$WORK/$job" --brokers "$BOOTSTRAP" -q >/dev/null ||
        fail "replay $job"
done
both() { [ -s "$WORK/res/huge.json" ] && [ -s "$WORK/res/other.json" ]; }
wait_for 60 both || fail "results not written: $(ls "$WORK/res")"
kill -0 "$RUN_PID_A" 2>/dev/null || fail "run exited"
for job in huge other; do
    python3 "$LIB/results.py" same "$WORK/$job.eval.json" "$WORK/res/$job.json" ||
        fail "$job: results differ from eval without the huge node"
done
tw_run_stop A; rc=$?
[ $rc -eq 0 ] || fail "run exit status $rc"
OUT=$(cat "$WORK/A.out")
[ "$(field dead_letters "$OUT")" -eq 1 ] || fail "dead_letters: $OUT"
[ "$(field jobs_finished "$OUT")" -eq 2 ] || fail "jobs_finished: $OUT"
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.deadletter -o beginning -c 1 -e -q \
    -f '%h\n' >"$WORK/dl.txt" || fail "kcat dead letter"
grep -q 'trainwatch.reason=id_too_long' "$WORK/dl.txt" || fail "reason: $(cut -c1-300 "$WORK/dl.txt")"
grep -q 'node id is 600000 bytes long' "$WORK/dl.txt" || fail "error: $(cut -c1-300 "$WORK/dl.txt")"
tw_broker_stop || fail "broker stop"
echo "PASS 0201: huge node id dead-lettered (id_too_long), both jobs' results == eval"
