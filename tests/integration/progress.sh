#!/usr/bin/env bash
# progress.sh BUILD_DIR - the Progress rule and StalledTrainingRule on the
# engine's wall clock, with real PyTorch: 3 (or 2) ranks of a tiny
# data-parallel job (torch.distributed, gloo on CPU, spawned ranks;
# tests/integration/progress/ddp_train.py) publishing through `trainwatch
# broker` into `trainwatch run` (tick 1 s; Progress floor lowered to 3 s,
# StalledTrainingRule threshold to 4 s, so the test is short), after the
# unit test of hook.section()'s events (hook/test_sections.py):
#  (a) rank 1 sleeps before the all_reduce of step 60 until the test ends
#      it -> a Progress finding on the alert topic within 60 s naming
#      1-localhost as behind and the two others as waiting (in the
#      allreduce section), while `trainwatch agent` beside it keeps
#      reporting (the finding says the machines are up); the time from
#      the hang to the alert is printed; its capture action brings every
#      rank's Python stack (rank 1 in its sleep, the others in all_reduce);
#  (b) every rank (2) spends 6 s in hook.section("checkpoint") (longer than
#      the 3 s floor, within the checkpoint budget) -> no finding;
#  (d) a healthy run (2 ranks) with an evaluation pass every 60 steps ->
#      no finding;
#  (f) every rank sleeps 8 s inside step 30 of 150 -> StalledTrainingRule fires
#      (and Progress: all ranks stopped together); the step at which the
#      fault began and the time from it to the alert are printed.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch, torch.distributed, confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-torch, python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
# the hook's section events first (tests/integration/hook/test_sections.py)
(cd "$HERE/hook" && "$PY" -m unittest -q test_sections) || exit 1
WORK=$(mktemp -d /tmp/tw-progress.XXXXXX)
BROKER_PID=
HANG_PID=
AGENT_PID=
. "$HERE/lib/broker.sh"
. "$HERE/lib/run.sh"
cleanup() {
    [ -n "$HANG_PID" ] && kill -KILL -- "-$HANG_PID" 2>/dev/null
    [ -n "$AGENT_PID" ] && kill -KILL "$AGENT_PID" 2>/dev/null
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
# every hook listens for capture requests (control.py)
export TRAINWATCH_CAPTURE_DIR=$WORK/cap
cat >"$WORK/run.yaml" <<YAML
tick: 1s
lateness: 1s
clock_skew: 120s
kafka:
  group: progress
engine:
  results_dir: $WORK/res
  progress_interval: 0
rules:
  - name: Progress
    parameters:
      floor: 3
    # the hung ranks' Python stacks, taken by the hooks' control threads
    actions: [{type: capture, what: [stacks], wait: 20s}]
  - name: StalledTrainingRule
    parameters:
      threshold: 4
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

train() { # JOB ARGS...: ddp_train.py, its lines in $WORK/JOB.out
    local job=$1; shift
    "$PY" "$HERE/progress/ddp_train.py" --job "$job" --brokers "$BOOTSTRAP" \
        "$@" >"$WORK/$job.out" 2>"$WORK/$job.err" ||
        fail "training $job: $(tail -n 5 "$WORK/$job.err")"
}
alerts() { # the alert topic so far, as "<ms> <job> <json>" lines
    timeout 20 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e \
        -q -f '%T %k %s\n' >"$WORK/alerts.txt" 2>/dev/null
}
finding() { # JOB RULE [SINCE_MS]: its first finding alert line (at or after SINCE_MS)
    grep "^[0-9]* $1 " "$WORK/alerts.txt" | grep '"kind":"finding"' |
        grep "\"rule\":\"$2\"" | awk -v since="${3:-0}" '$1 >= since' |
        head -n 1
}

# ---- (a) one rank hangs before an all_reduce --------------------------------
# the agent beside it keeps reporting: the machine is up, the ranks hang
"$TW" agent --brokers "$BOOTSTRAP" --job hang --interval-ms 500 \
    >"$WORK/agent.out" 2>"$WORK/agent.err" &
AGENT_PID=$!
setsid "$PY" "$HERE/progress/ddp_train.py" --job hang --brokers "$BOOTSTRAP" \
    --world 3 --steps 1000 --hang-rank 1 --hang-step 60 \
    >"$WORK/hang.out" 2>"$WORK/hang.err" &
HANG_PID=$!
wait_for 120 grep -q hang_us "$WORK/hang.out" || fail "hang: rank 1 never hung: $(tail -n 5 "$WORK/hang.err")"
HANG_US=$(sed -n 's/.*hang_us=\([0-9]*\).*/\1/p' "$WORK/hang.out")
# the finding of the hang: one before it would be the ranks' start starved
# for more than the 3 s floor on a loaded machine, not what (a) judges
HANG_MS=$((HANG_US / 1000))
got_hang() { alerts && [ -n "$(finding hang Progress "$HANG_MS")" ]; }
wait_for 60 got_hang || fail "hang: no Progress finding within 60 s of the hang"
LINE=$(finding hang Progress "$HANG_MS")
EARLY=$(finding hang Progress | awk -v since="$HANG_MS" '$1 < since')
[ -z "$EARLY" ] || echo "note: a Progress finding before the hang: ${EARLY#* hang }"

# the capture action: the stacks of every rank while rank 1 still hangs
AT_MS=${LINE%% *}
capture_alert() {
    grep "^[0-9]* hang " "$WORK/alerts.txt" | grep '"kind":"capture"' |
        awk -v since="$AT_MS" '$1 >= since' | head -n 1
}
got_capture() { alerts && [ -n "$(capture_alert)" ]; }
wait_for 40 got_capture || fail "hang: no capture alert after the Progress finding"
CAPTURE=$(capture_alert)
kill -KILL -- "-$HANG_PID" 2>/dev/null
wait "$HANG_PID" 2>/dev/null
HANG_PID=
kill -TERM "$AGENT_PID" 2>/dev/null
wait "$AGENT_PID" 2>/dev/null
AGENT_PID=
"$PY" - "${LINE#* hang }" "$HANG_US" "$AT_MS" <<'PYEOF' || fail "hang: finding"
import json, sys
a = json.loads(sys.argv[1])
f = a["finding"]
assert f["nodes"]["listed"][0] == "1-localhost", (f["nodes"], f["summary"])
roles = {r["node"]: r["role"] for r in a["details"]["report"]["Details"]["ranks"]}
assert roles == {"1-localhost": "behind", "0-localhost": "waiting",
                 "2-localhost": "waiting"}, roles
assert "wait" in f["summary"] and "1-localhost" in f["summary"], f["summary"]
assert "machines are up" in f["magnitude"]["text"], f["magnitude"]
delay = int(sys.argv[3]) / 1e3 - int(sys.argv[2]) / 1e6
assert 0 < delay <= 60, delay
print("hang: rank 1 hung at step 60; Progress alert after %.1f s: %s"
      % (delay, f["summary"]))
PYEOF
"$PY" - "${LINE#* hang }" "${CAPTURE#* hang }" "$AT_MS" "${CAPTURE%% *}" <<'PYEOF' || fail "hang: captured stacks"
import json, os, sys
f, c = json.loads(sys.argv[1]), json.loads(sys.argv[2])
cap = c["capture"]
# fired by Progress's alert (its finding or its status change: both
# run the rule's actions)
assert c["rule"] == "Progress" and c["job"] == "hang", (c["rule"], c["job"])
assert cap["outcome"] == "captured", cap
ranks = {r["rank"]: r for r in cap["ranks"]}
assert sorted(ranks) == [0, 1, 2], sorted(ranks)
hung = open(ranks[1]["stacks"]).read()
# rank 1 sleeps before its all_reduce; the others wait inside it
assert "sleep" in hung and "ddp_train.py" in hung, hung[-600:]
waiting = open(ranks[0]["stacks"]).read()
assert "all_reduce" in waiting, waiting[-600:]
print("hang: the Progress finding's capture: stacks of ranks 0-2, %.1f s "
      "after the alert; rank 1 in time.sleep, rank 0 in all_reduce (%s)"
      % ((int(sys.argv[4]) - int(sys.argv[3])) / 1e3, ranks[1]["stacks"]))
PYEOF

# ---- (b), (d), (f) side by side ---------------------------------------------
train ckpt --world 2 --steps 80 --ckpt-step 40 --ckpt-sleep 6 &
P1=$!
train healthy --world 2 --steps 200 --eval-every 60 --eval-steps 10 &
P2=$!
train stall --world 2 --steps 150 --stall-step 30 --stall-sleep 8 &
P3=$!
wait $P1 || exit 1
wait $P2 || exit 1
wait $P3 || exit 1
for job in ckpt healthy stall; do
    wait_for 60 test -f "$WORK/res/$job.json" || fail "no results for $job"
done
alerts
STALL_US=$(sed -n 's/.*stall_us=\([0-9]*\).*/\1/p' "$WORK/stall.out" | sort -n | head -n 1)
LINE=$(finding stall StalledTrainingRule) || fail "stall: no StalledTrainingRule finding"
"$PY" - "$WORK/res" "${LINE%% *}" "$STALL_US" <<'PYEOF' || fail "results"
import json, sys
res, at_ms, stall_us = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def rules(job):
    d = json.load(open("%s/%s.json" % (res, job)))
    return {r["name"]: r for r in d["rules"]}
for job in ("ckpt", "healthy"):
    for name, r in rules(job).items():
        assert r["status"] == "NoIssuesFound" and r["violations"] == 0, \
            (job, name, r["status"], r.get("violations"))
    det = rules(job)["Progress"]["report"]["Details"]
    print("%s: Progress and StalledTrainingRule NoIssuesFound (%d ranks)"
          % (job, len(det["ranks"])))
st = rules("stall")
d = st["StalledTrainingRule"]["report"]["Details"]
assert st["StalledTrainingRule"]["status"] == "IssuesFound", st
assert d["fired_step"] == 29, d  # step 30 is the one that sleeps
pg = st["Progress"]["report"]["Details"]
assert pg["kind"] == "together" and pg["episodes"] == 1, pg
assert pg["cleared_us"] > 0, pg  # progress resumed after the sleep
print("stall: fault began in step 30 (last completed step %d); "
      "StalledTrainingRule alert %.1f s after it (threshold 4 s); Progress: "
      "all ranks stopped together, cleared when they resumed"
      % (d["fired_step"], at_ms / 1e3 - stall_us / 1e6))
PYEOF
grep -E "^[0-9]* (ckpt|healthy) " "$WORK/alerts.txt" | grep -q '"kind":"finding"' &&
    fail "a finding alert for ckpt or healthy"
tw_run_stop A || fail "run did not stop cleanly"
echo "PASS"
