#!/usr/bin/env bash
# debug_rules_stream.sh BUILD_DIR - the debugging rules in `trainwatch run`:
# TensorRecord batches (tests/integration/lib/tensor_producer.py, a
# stand-in for the PyTorch hook's publisher) through `trainwatch broker`
# into `trainwatch run` with ExplodingTensor, LossNotDecreasing,
# VanishingGradient and UnchangedTensor configured by name:
#  - nan: ExplodingTensor fires at the fault step (a NaN loss);
#  - flat: LossNotDecreasing and UnchangedTensor fire (loss and weights
#    stop changing);
#  - vanishing: VanishingGradient fires at the fault step;
#  - deadrelu: DeadRelu fires at the fault step;
#  - overfit: Overfit fires at the first training step after the first
#    evaluation pass past the fault;
#  - healthy: no debugging finding at all;
# findings come out as alerts on the alert topic (schema-valid) and the
# results files hold each rule's first fire (step, wall time); the engine
# counts the tensors; ExplodingTensor's stop_file action runs. Prints the fault step, the fired step and the wall
# time between the faulty step's publication and the alert.
set -u
BUILD=${1:-${TW_BUILD_DIR:?}}
TW=$BUILD/trainwatch
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
PY=${TW_PYTHON:-/usr/bin/python3}
"$PY" -c 'import confluent_kafka, flatbuffers, jsonschema' 2>/dev/null ||
    { echo "SKIP: python3 confluent_kafka/flatbuffers/jsonschema missing"; exit 77; }
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
export PYTHONPATH=$BUILD/hooks/python/flatc${PYTHONPATH:+:$PYTHONPATH}
WORK=$(mktemp -d /tmp/tw-dbgrules.XXXXXX)
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
  group: dbg-test
engine:
  results_dir: $WORK/res
  progress_interval: 1s
  commit_interval: 200ms
tick: continuous
lateness: 0s
rules:
  - name: ExplodingTensor
    actions: [{type: stop_file, path: $WORK/stop}]
  - name: LossNotDecreasing
    parameters: {num_steps: 5}
  - name: VanishingGradient
  - name: UnchangedTensor
    parameters: {collection_names: "losses,weights"}
  - name: DeadRelu
  - name: Overfit
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

STEPS=40
FAULT=20
for s in healthy nan flat vanishing deadrelu overfit; do
    timeout 60 "$PY" "$HERE/lib/tensor_producer.py" "$BOOTSTRAP" "$s" "$s" \
        --steps $STEPS --fault-step $FAULT >"$WORK/prod.$s" 2>&1 ||
        fail "producer $s: $(cat "$WORK/prod.$s")"
    cat "$WORK/prod.$s"
done
all_results() { [ "$(ls "$WORK/res" | grep -c '\.json$')" -eq 6 ]; }
wait_for 60 all_results || fail "results: $(ls "$WORK/res")"
tw_run_stop A || fail "run exit status"
OUT=$(cat "$WORK/A.out")
TENSORS=$(field tensors "$OUT")
SENT=$(sed -n 's/.* tensors=\([0-9]*\).*/\1/p' "$WORK"/prod.* | awk '{ n += $1 } END { print n }')
[ "${TENSORS:-0}" -eq "$SENT" ] || fail "tensors=${TENSORS:-none}, $SENT sent"
[ "$(field late_tensors "$OUT")" -eq 0 ] || fail "late tensors"
[ "$(field dead_letters "$OUT")" -eq 0 ] || fail "dead letters"
# ExplodingTensor's action ran (only the nan job has an ExplodingTensor
# finding, checked below)
[ -e "$WORK/stop" ] || fail "ExplodingTensor's stop_file action did not run"

timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%s\n' >"$WORK/alerts.jsonl" || fail "kcat -C alerts"
# with their Kafka timestamps (ms), in one read (partitions interleave)
timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%T %s\n' >"$WORK/alerts.ts" || fail "kcat -C alert timestamps"
SUMMARY=$("$PY" "$HERE/lib/results.py" alerts "$SRC/schemas/alert.schema.json" \
    "$WORK/alerts.jsonl") || fail "alerts do not validate: $SUMMARY"

cat "$WORK"/prod.* >"$WORK/produced"
"$PY" - "$WORK/res" "$WORK/alerts.jsonl" $FAULT "$WORK/alerts.ts" \
    "$WORK/produced" <<'PY' || fail "findings"
import json, sys, os
res, alerts_path, fault = sys.argv[1], sys.argv[2], int(sys.argv[3])
stamped = [json.loads(l.split(" ", 1)[1]) | {"_ts_ms": int(l.split(" ", 1)[0])}
           for l in open(sys.argv[4]) if l.strip()]
published, sent = {}, {}
for line in open(sys.argv[5]):
    kv = dict(x.split("=", 1) for x in line.split() if "=" in x)
    if "job" in kv:
        published[kv["job"]] = int(kv["fault_published_ms"])
        sent[kv["job"]] = int(kv["tensors"])
want = {"healthy": set(), "nan": {"ExplodingTensor"},
        "flat": {"LossNotDecreasing", "UnchangedTensor"},
        "vanishing": {"VanishingGradient"}, "deadrelu": {"DeadRelu"},
        "overfit": {"Overfit"}}
ok = True
alerts = stamped
if len(alerts) != sum(1 for l in open(alerts_path) if l.strip()):
    print("the two reads of the alert topic differ")
    ok = False
for job, rules in want.items():
    r = json.load(open(os.path.join(res, job + ".json")))
    if r["input"].get("tensors") != sent[job]:
        print(f"{job}: input.tensors {r['input'].get('tensors')}")
        ok = False
    found = {x["name"] for x in r["rules"] if x["status"] == "IssuesFound"}
    if found != rules:
        print(f"{job}: IssuesFound {sorted(found)}, want {sorted(rules)}")
        ok = False
    for x in r["rules"]:
        if x["status"] not in ("IssuesFound", "NoIssuesFound"):
            print(f"{job}: {x['name']} status {x['status']}")
            ok = False
        if x["name"] not in rules:
            continue
        d = x["report"]["Details"]
        first = d["first_fire"]
        # the fault is visible at FAULT; LossNotDecreasing needs num_steps
        # more, UnchangedTensor num_steps - 1 unchanged publications
        latest = fault + {"LossNotDecreasing": 5, "Overfit": 10}.get(x["name"], 3)
        if not (fault <= first["step"] <= latest):
            print(f"{job}: {x['name']} fired at step {first['step']}")
            ok = False
        finding = [a for a in alerts if a.get("job") == job and
                   a.get("rule") == x["name"] and a.get("kind") == "finding"]
        if not finding:
            print(f"{job}: no finding alert from {x['name']}")
            ok = False
        lag = (min(a["_ts_ms"] for a in finding) - published[job]
               if finding else -1)
        print(f"{job}: {x['name']} fault at step {fault}, fired at step "
              f"{first['step']} ({first['tensor']}: {first['condition']}); "
              f"alert {lag} ms after the fault step was published")
extra = [a for a in alerts if a.get("job") == "healthy" and
         a.get("kind") == "finding"]
if extra:
    print(f"healthy: {len(extra)} finding alert(s)")
    ok = False
sys.exit(0 if ok else 1)
PY
tw_broker_stop || fail "broker stop"
echo "PASS debug_rules_stream"
