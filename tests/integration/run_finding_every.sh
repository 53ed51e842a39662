#!/usr/bin/env bash
# run_finding_every.sh BUILD_DIR - `engine.finding_every` with continuous
# ticks, through the standalone broker into `trainwatch run`:
#  - run A (tick: continuous, finding_every unset: 60 s of event time)
#    evaluates a CPU-bound job; on the alert topic, a rule's consecutive
#    finding alerts end at least 60 s of event time apart, and its summary
#    counts the held ones (findings_held > 0);
#  - run B, a second group with `finding_every: 0`, publishes a finding at
#    every scan that adds violations: exactly A's findings plus the ones A
#    held, the same ids for the ones both published;
#  - both write the same results (holding alerts changes no result).
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-findevery.XXXXXX)
BROKER_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
cleanup() {
    [ -n "${RUN_PID_A:-}" ] && kill -KILL "$RUN_PID_A" 2>/dev/null
    [ -n "${RUN_PID_B:-}" ] && kill -KILL "$RUN_PID_B" 2>/dev/null
    [ -n "${BROKER_PID:-}" ] && kill -KILL "$BROKER_PID" 2>/dev/null
    [ -n "${KEEP:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
    echo "FAIL: $*" >&2
    for f in A B; do
        [ -f "$WORK/$f.err" ] && tail -n 20 "$WORK/$f.err" >&2
    done
    exit 1
}

# 2 nodes, 10 minutes (< 4.5 MB: the mock broker's per-partition log)
timeout 120 "$TW" synth "$WORK/job" --preset cpu_bottleneck --nodes 2 \
    --duration 10m >/dev/null 2>"$WORK/synth.err" ||
    fail "synth: $(cat "$WORK/synth.err")"

tw_broker_start || fail "broker start"
config() { # NAME GROUP [finding_every]
    mkdir -p "$WORK/res$1"
    {
        printf 'tick: continuous\nkafka:\n  group: %s\n' "$2"
        printf 'engine:\n  results_dir: %s\n  commit_interval: 500ms\n' \
            "$WORK/res$1"
        [ $# -gt 2 ] && printf '  finding_every: %s\n' "$3"
    } >"$WORK/$1.yaml"
}
config A fe-a
config B fe-b 0
results() { [ -f "$WORK/res$1/job.json" ]; }

tw_run_start A "$WORK/A.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "A: no partition"
timeout 120 "$TW" replay "$WORK/job" --brokers "$BOOTSTRAP" --group fe-a -q \
    >/dev/null || fail "replay"
wait_for 120 results A || fail "A: no results"
tw_run_stop A || fail "A: exit status"
A_OUT=$(cat "$WORK/A.out")
HELD=$(field findings_held "$A_OUT")
[ -n "$HELD" ] && [ "$HELD" -gt 0 ] || fail "A: findings_held='$HELD'"
timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%s\n' >"$WORK/alerts_a.jsonl" || fail "kcat A"

tw_run_start B "$WORK/B.yaml"
wait_for 120 results B || fail "B: no results"
tw_run_stop B || fail "B: exit status"
[ "$(field findings_held "$(cat "$WORK/B.out")")" = 0 ] ||
    fail "B held findings with finding_every 0"
timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%s\n' >"$WORK/alerts_all.jsonl" || fail "kcat all"
cmp -s "$WORK/resA/job.json" "$WORK/resB/job.json" ||
    fail "results differ between finding_every 60s and 0"

python3 - "$WORK/alerts_a.jsonl" "$WORK/alerts_all.jsonl" "$HELD" <<'PY' ||
import json, sys
a = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
allv = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
held = int(sys.argv[3])
b = allv[len(a):]  # B's, after A's on the one partition
fa = [x for x in a if x["kind"] == "finding"]
fb = [x for x in b if x["kind"] == "finding"]
ok = True
last = {}
for x in fa:
    k = (x.get("parent", ""), x["rule"])
    end = x["window"]["end_us"]
    if k in last and end - last[k] < 60_000_000:
        print(f"A: {k} findings {(end - last[k]) / 1e6:.1f} s apart")
        ok = False
    last[k] = end
if len(fb) != len(fa) + held:
    print(f"B: {len(fb)} findings, A: {len(fa)} + {held} held")
    ok = False
ida, idb = {x["id"] for x in fa}, {x["id"] for x in fb}
if not ida <= idb:
    print(f"A published {len(ida - idb)} finding ids B did not")
    ok = False
sa = [x["id"] for x in a if x["kind"] == "status"]
sb = [x["id"] for x in b if x["kind"] == "status"]
if sa != sb:
    print(f"status alerts differ: A {len(sa)}, B {len(sb)}")
    ok = False
print(f"findings: A {len(fa)} (held {held}), B {len(fb)}; "
      f"status alerts {len(sa)} in both; rules with findings {len(last)}")
sys.exit(0 if ok else 1)
PY
    fail "alerts"
tw_broker_stop || fail "broker stop"
echo "PASS run_finding_every"
