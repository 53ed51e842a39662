#!/usr/bin/env bash
# debug_rules_torch.sh BUILD_DIR - the debugging rules on real PyTorch
# training (issue 20's "Must show"): tests/integration/hook/debug_train.py
# with the hook's debugging side (losses, gradients, weights, biases,
# relu_output every step) streams through `trainwatch broker` into
# `trainwatch run` with the built-in debugging rules configured by name:
#  (a) healthy                      -> no debugging finding;
#  (b) lr 0 and no parameters given  -> LossNotDecreasing, UnchangedTensor;
#  (c) lr 1e3                        -> ExplodingTensor (NaN), whose
#      stop_file action ends the script through the hook's stop channel
#      within one step of the alert (steps of 120 ms, as a real step);
#  (d) 10 Linear+Sigmoid layers      -> VanishingGradient;
#  (e) a ReLU behind a bias of -50   -> DeadRelu;
#  (g) 8 training samples, evaluation passes -> Overfit.
# (f), StalledTrainingRule, is integration_progress's (a wall-clock rule).
# Each must-fire rule has to be IssuesFound with a finding alert on the
# alert topic; printed per case: the step the fault began, the step the
# rule fired at, and the wall time from that step's start to the alert.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch, confluent_kafka, flatbuffers' 2>/dev/null ||
    { echo "SKIP: python3-torch, confluent-kafka or flatbuffers missing"; exit 77; }
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
WORK=$(mktemp -d /tmp/tw-dbgtorch.XXXXXX)
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

tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
kafka:
  group: dbg-torch
engine:
  results_dir: $WORK/res
  progress_interval: 0
  commit_interval: 200ms
tick: continuous
lateness: 0s
rules:
  - name: ExplodingTensor
    actions: [{type: stop_file, path: "$WORK/stop-{job}"}]
  - name: LossNotDecreasing
  - name: VanishingGradient
  - name: UnchangedTensor
    parameters: {collection_names: "losses,weights"}
  - name: DeadRelu
  - name: Overfit
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

train() { # SCENARIO ARGS...
    local s=$1; shift
    timeout 120 "$PY" "$HERE/hook/debug_train.py" --job "t-$s" \
        --brokers "$BOOTSTRAP" --scenario "$s" --stop-file "$WORK/stop-t-$s" \
        "$@" >"$WORK/$s.out" 2>"$WORK/$s.err"
    echo $? >"$WORK/$s.rc"
}
train healthy --steps 60
train lr0 --steps 40
train noparams --steps 40
train sigmoid --steps 40
train deadrelu --steps 40
train overfit --steps 60 --eval-every 10
# up to 400 steps of 120 ms: the stop file must end it long before
train explode --steps 400 --step-ms 120
for s in healthy lr0 noparams sigmoid deadrelu overfit; do
    [ "$(cat "$WORK/$s.rc")" -eq 0 ] || fail "training $s: $(tail -n 5 "$WORK/$s.err")"
done
[ "$(cat "$WORK/explode.rc")" -ne 0 ] ||
    fail "explode ran to its end: the stop channel did not stop it"
grep -q "training stopped by rule ExplodingTensor" "$WORK/explode.err" ||
    fail "explode did not end by StopTraining: $(tail -n 5 "$WORK/explode.err")"

all_results() { [ "$(ls "$WORK/res" | grep -c '\.json$')" -eq 7 ]; }
wait_for 60 all_results || fail "results: $(ls "$WORK/res")"
tw_run_stop A || fail "run exit status"
timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%T %s\n' >"$WORK/alerts.ts" || fail "kcat -C alerts"

"$PY" - "$WORK" <<'PY' || fail "findings"
import json, os, re, sys
work = sys.argv[1]
want = {"healthy": set(), "lr0": {"LossNotDecreasing", "UnchangedTensor"},
        "noparams": {"LossNotDecreasing", "UnchangedTensor"},
        "explode": {"ExplodingTensor"}, "sigmoid": {"VanishingGradient"},
        "deadrelu": {"DeadRelu"}, "overfit": {"Overfit"}}
alerts = [json.loads(l.split(" ", 1)[1]) | {"_ts_ms": int(l.split(" ", 1)[0])}
          for l in open(os.path.join(work, "alerts.ts")) if l.strip()]
ok = True
for s, rules in want.items():
    out = open(os.path.join(work, s + ".out")).read()
    starts = {int(m.group(1)): int(m.group(2)) for m in
              re.finditer(r"^step (\d+) (\d+)$", out, re.M)}
    m = re.search(r"fault_step=(-?\d+)", out)
    fault = int(m.group(1)) if m else None
    r = json.load(open(os.path.join(work, "res", f"t-{s}.json")))
    found = {x["name"] for x in r["rules"] if x["status"] == "IssuesFound"}
    if s == "healthy" and found:
        print(f"healthy: false alarm(s) {sorted(found)}")
        ok = False
    if not rules <= found:
        print(f"{s}: IssuesFound {sorted(found)}, want {sorted(rules)}")
        ok = False
    extra = sorted(found - rules)
    for x in r["rules"]:
        if x["name"] not in rules or x["status"] != "IssuesFound":
            continue
        first = x["report"]["Details"]["first_fire"]
        fin = [a for a in alerts if a.get("job") == f"t-{s}" and
               a.get("rule") == x["name"] and a.get("kind") == "finding"]
        if not fin:
            print(f"{s}: no finding alert from {x['name']}")
            ok = False
            continue
        at = min(a["_ts_ms"] for a in fin)
        step = first["step"]
        lag = at - starts[step] // 1000 if step in starts else None
        print(f"{s}: {x['name']} fault from step {fault}, fired at step "
              f"{step} ({first['tensor']}: {first['condition']}); alert "
              f"{lag} ms after that step began"
              + (f"; also found: {', '.join(extra)}" if extra else ""))
    if s == "explode":
        stop = os.path.join(work, "stop-t-explode")
        if not os.path.exists(stop):
            print("explode: the engine wrote no stop file")
            ok = False
            continue
        made_us = int(os.stat(stop).st_mtime_ns // 1000)
        after = sorted(k for k, t in starts.items() if t > made_us)
        print(f"explode: stop file written {made_us // 1000 - at} ms after "
              f"the alert; {len(after)} step(s) began after it "
              f"(last step {max(starts)}), then StopTraining")
        if len(after) > 1:
            print("explode: more than one step after the stop file")
            ok = False
sys.exit(0 if ok else 1)
PY
tw_broker_stop || fail "broker stop"
echo "PASS debug_rules_torch"
