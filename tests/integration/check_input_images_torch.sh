#!/usr/bin/env bash
# check_input_images_torch.sh BUILD_DIR - CheckInputImages on real PyTorch
# training (issue 20, case (h)): tests/integration/hook/image_train.py, a
# tiny CNN whose model input Net_input_0 the hook's collection
# input_image publishes as per-channel sums (never the images), streams
# through `trainwatch broker` into `trainwatch run`, whose rules section
# is rendered by trainwatch.rule_configs from
# Rule.sagemaker(rule_configs.check_input_images()) (defaults:
# threshold_mean 0.2, threshold_samples 500, channel 1):
#  raw        images in [0, 1] (mean ~0.5) -> CheckInputImages IssuesFound,
#             a finding alert, fired at the step where 500 images were
#             seen (batch 32: step 15);
#  normalized the same images normalized -> evaluated, no finding;
#  none       no input_image collection: the bytes-per-step baseline.
# Both image runs also write the legacy debug-output folder
# (container_local_output_path); `trainwatch eval DIR` without a rules
# file runs CheckInputImages on it (the reader derives the channel sums
# from the full input tensors): raw fires at the same step, normalized
# not. Printed: the fire step, the wall time from that step's start to
# the alert, and the bytes per step the collection adds on Kafka.
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
WORK=$(mktemp -d /tmp/tw-cii.XXXXXX)
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
  group: cii-torch
engine:
  results_dir: $WORK/res
  progress_interval: 0
  commit_interval: 200ms
tick: continuous
lateness: 0s
YAML
# the rules section as rule_configs renders it for a notebook's rules
"$PY" - "$WORK/rules.yaml" <<'PY' || fail "rule_configs"
import sys
from trainwatch import Rule, rule_configs
rule_configs.write_rules_yaml(
    sys.argv[1], [Rule.sagemaker(rule_configs.check_input_images())])
PY
cat "$WORK/rules.yaml" >>"$WORK/run.yaml"
grep -q 'name: "CheckInputImages"' "$WORK/run.yaml" || fail "rules: $(cat "$WORK/rules.yaml")"
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

train() { # INPUTS ARGS...
    local s=$1; shift
    timeout 120 "$PY" "$HERE/hook/image_train.py" --job "i-$s" \
        --brokers "$BOOTSTRAP" --inputs "$s" "$@" \
        >"$WORK/$s.out" 2>"$WORK/$s.err"
    [ $? -eq 0 ] || fail "training $s: $(tail -n 5 "$WORK/$s.err")"
}
train raw --local-output "$WORK/dir-raw"
train normalized --local-output "$WORK/dir-normalized"
train none

all_results() { [ "$(ls "$WORK/res" | grep -c '\.json$')" -eq 3 ]; }
wait_for 60 all_results || fail "results: $(ls "$WORK/res")"
tw_run_stop A || fail "run exit status"
timeout 60 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%T %s\n' >"$WORK/alerts.ts" || fail "kcat -C alerts"

# the legacy folders, offline: no rules file, so the debugging rules whose
# tensors are present
for s in raw normalized; do
    "$TW" eval "$WORK/dir-$s" --json >"$WORK/eval-$s.json" 2>"$WORK/eval-$s.err" ||
        fail "eval $s: $(cat "$WORK/eval-$s.err")"
    grep -q "the debugging rules .*CheckInputImages" "$WORK/eval-$s.err" ||
        fail "eval $s did not run CheckInputImages: $(cat "$WORK/eval-$s.err")"
done

"$PY" - "$WORK" <<'PY' || fail "findings"
import json, os, re, sys
work = sys.argv[1]
alerts = [json.loads(l.split(" ", 1)[1]) | {"_ts_ms": int(l.split(" ", 1)[0])}
          for l in open(os.path.join(work, "alerts.ts")) if l.strip()]
ok = True


def rule_of(doc, name="CheckInputImages"):
    rules = doc["rules"] if "rules" in doc else doc["jobs"][0]["rules"]
    return next((x for x in rules if x["name"] == name), None)


stats = {}
for s in ("raw", "normalized", "none"):
    out = open(os.path.join(work, s + ".out")).read()
    stats[s] = dict(kv.split("=", 1) for kv in out.strip().splitlines()[-1]
                    .split())
    starts = {int(m.group(1)): int(m.group(2)) for m in
              re.finditer(r"^step (\d+) (\d+)$", out, re.M)}
    r = json.load(open(os.path.join(work, "res", f"i-{s}.json")))
    x = rule_of(r)
    if s == "none":
        continue
    det = x["report"]["Details"]
    if s == "normalized":
        if x["status"] == "IssuesFound" or det["steps_evaluated"] < 16:
            print(f"normalized: {x['status']}, {det['steps_evaluated']} "
                  "steps evaluated (want no finding after >= 16)")
            ok = False
        else:
            print(f"normalized: no finding, {det['steps_evaluated']} steps "
                  "evaluated")
        continue
    if x["status"] != "IssuesFound":
        print(f"raw: CheckInputImages {x['status']}, want IssuesFound")
        ok = False
        continue
    first = det["first_fire"]
    fin = [a for a in alerts if a.get("job") == "i-raw" and
           a.get("rule") == "CheckInputImages" and a.get("kind") == "finding"]
    if not fin:
        print("raw: no finding alert")
        ok = False
        continue
    at = min(a["_ts_ms"] for a in fin)
    step = first["step"]
    lag = at - starts[step] // 1000
    # batch 32, threshold_samples 500: the 16th saved step (step 15)
    if step != 15 or first["tensor"] != "Net_input_0" or \
            not 0.4 < first["value"] < 0.6:
        print(f"raw: fired at step {step} on {first['tensor']} value "
              f"{first['value']}, want step 15, Net_input_0, ~0.5")
        ok = False
    print(f"raw: CheckInputImages fault from step 0, fired at step {step} "
          f"({first['tensor']}: {first['condition']}); alert {lag} ms after "
          "that step began")
# offline: the same verdicts from the legacy folders
for s, want in (("raw", "IssuesFound"), ("normalized", "NoIssuesFound")):
    x = rule_of(json.load(open(os.path.join(work, f"eval-{s}.json"))))
    got = x["status"] if x else None
    step = x["report"]["Details"].get("first_fire", {}).get("step") if x \
        else None
    if got != want or (want == "IssuesFound" and step != 15):
        print(f"eval {s}: CheckInputImages {got} at step {step}, want {want}")
        ok = False
    else:
        print(f"eval {s}: CheckInputImages {got}"
              + (f" at step {step}" if step is not None else ""))
steps = 24
for s in ("raw", "normalized"):
    added = (int(stats[s]["bytes"]) - int(stats["none"]["bytes"])) / steps
    print(f"bytes on Kafka per step: {s} {int(stats[s]['bytes']) / steps:.0f}"
          f", none {int(stats['none']['bytes']) / steps:.0f}: input_image "
          f"saved every step adds {added:.0f}")
sys.exit(0 if ok else 1)
PY
tw_broker_stop || fail "broker stop"
echo "PASS check_input_images_torch"
