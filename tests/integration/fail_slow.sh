#!/usr/bin/env bash
# fail_slow.sh BUILD_DIR - the FailSlow rule:
#  (a) offline: a corpus run (tests/failslow, gen-slow2.0-2: 2 independent
#      ranks, algo-1-1 2x slower from step 211) through `trainwatch eval`
#      with Straggler and FailSlow: FailSlow names algo-1-1 with its onset,
#      and the Straggler finding of the same rank is caused_by FailSlow
#      (one root cause, one problem);
#  (b) live: real PyTorch data-parallel training (tests/failslow/
#      train_ddp.py: 3 ranks, gloo on CPU, the trainwatch hook on each)
#      through `trainwatch broker` into `trainwatch run` (tick continuous),
#      two jobs at once: in `slow` a random rank is slowed 1.2x from a
#      random step in [100, 200] (every rank waits for it in the
#      all_reduce), `healthy` has evaluation passes and checkpoint saves
#      only. A FailSlow finding alert names the slowed rank (and no other)
#      while training still runs; its onset error (steps) and detection
#      delay (from the first slow step to the alert) are printed and
#      bounded (|onset error| <= 10 steps, delay <= 30 s); the healthy job
#      ends NoIssuesFound without a finding alert.
# The rule runs with persist 5 (s) here (default 10) so that a 400-step
# run of 40 ms steps has room after a late onset: the test stays short.
set -u
BUILD=$(cd "${1:-${TW_BUILD_DIR:?}}" && pwd)
TW=$BUILD/trainwatch
PY=${TW_PYTHON:-/usr/bin/python3}
HERE=$(cd "$(dirname "$0")" && pwd)
FS=$HERE/../failslow
export TRAINWATCH_RULES_DIR=${TRAINWATCH_RULES_DIR:-$BUILD/rules}
WORK=$(mktemp -d /tmp/tw-fail-slow.XXXXXX)
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
    [ -f "$WORK/A.err" ] && tail -n 20 "$WORK/A.err" >&2
    exit 1
}

# ---- (a) offline: FailSlow names the rank, Straggler is caused_by it -----
"$PY" "$FS/corpus.py" gen-slow2.0-2 "$WORK/gen" >/dev/null || fail "corpus"
cat >"$WORK/eval.yaml" <<'YAML'
tick: 60s
rules:
  - name: Straggler
  - name: FailSlow
YAML
"$TW" eval "$WORK/gen" --rules "$WORK/eval.yaml" --json --quiet \
    >"$WORK/gen.json" || fail "eval gen-slow2.0-2"
"$PY" - "$WORK/gen.json" <<'PYEOF' || fail "offline: FailSlow/Straggler"
import json, sys
rules = {r["name"]: r for r in json.load(open(sys.argv[1]))["rules"]}
fs, sg = rules["FailSlow"], rules["Straggler"]
assert fs["status"] == "IssuesFound", fs["status"]
ranks = fs["report"]["Details"]["ranks"]
named = [k for k, v in ranks.items() if v["verdict"] == "fail-slow"]
assert named == ["algo-1-1"], named
d = ranks["algo-1-1"]
assert abs(d["onset_step"] - 211) <= 3, d
assert 1.9 < d["slowdown"] < 2.1, d
assert abs(d["wasted_fraction"] - (1 - 1 / d["slowdown"])) < 1e-9, d
assert sg["status"] == "IssuesFound", sg["status"]
assert sg["finding"]["nodes"]["listed"] == ["algo-1-1"], sg["finding"]
assert sg.get("caused_by", {}).get("rule") == "FailSlow", sg.get("caused_by")
assert "caused_by" not in fs, fs.get("caused_by")
print("offline: FailSlow names algo-1-1 (onset step %d, true 211, %.2fx); "
      "Straggler caused_by FailSlow" % (d["onset_step"], d["slowdown"]))
PYEOF

# ---- (b) live: real PyTorch, 3 ranks, one slowed 1.2x ----------------------
export PYTHONPATH=$BUILD/hooks/python
"$PY" -c 'import torch, torch.distributed, confluent_kafka, flatbuffers' \
    2>/dev/null ||
    { echo "SKIP: python3-torch, python3-confluent-kafka or python3-flatbuffers missing"; exit 77; }
command -v kcat >/dev/null || { echo "SKIP: kcat not installed"; exit 77; }
tw_broker_start || fail "broker start"
mkdir -p "$WORK/res"
cat >"$WORK/run.yaml" <<YAML
tick: continuous
lateness: 1s
kafka:
  group: fail-slow
engine:
  results_dir: $WORK/res
  progress_interval: 0
rules:
  - name: FailSlow
    parameters: {persist: 5}
YAML
tw_run_start A "$WORK/run.yaml"
wait_for 60 grep -q "assigned partition" "$WORK/A.err" || fail "no partition assigned"

SEED=${FAIL_SLOW_SEED:-$RANDOM}
SLOW_RANK=$((SEED % 3))
echo "seed $SEED: rank $SLOW_RANK slowed 1.2x"
"$PY" "$FS/train_ddp.py" --job slow --brokers "$BOOTSTRAP" --ranks 3 \
    --steps 400 --step-ms 40 --slow-rank "$SLOW_RANK" --slow-factor 1.2 \
    --slow-min 100 --slow-max 200 --seed "$SEED" \
    >"$WORK/slow.out" 2>"$WORK/slow.err" &
SLOW_PID=$!
"$PY" "$FS/train_ddp.py" --job healthy --brokers "$BOOTSTRAP" --ranks 3 \
    --steps 400 --step-ms 40 --eval-every 120 --eval-steps 10 \
    --ckpt-every 100 --ckpt-sleep 0.8 \
    >"$WORK/healthy.out" 2>"$WORK/healthy.err" ||
    fail "training healthy: $(tail -n 5 "$WORK/healthy.err")"
wait "$SLOW_PID" || fail "training slow: $(tail -n 5 "$WORK/slow.err")"
cat "$WORK/slow.out" "$WORK/healthy.out"
for job in slow healthy; do
    wait_for 60 test -f "$WORK/res/$job.json" || fail "no results for $job"
done
OUT=$(cat "$WORK/slow.out")
ONSET_US=$(field slow_onset_us "$OUT")
SLOW_FROM=$(field slow_from "$OUT")
LOOP_END=$(field loop_end_us "$OUT")
timeout 30 kcat -b "$BOOTSTRAP" -C -t trainwatch.alerts -o beginning -e -q \
    -f '%T %k %s\n' >"$WORK/alerts.txt" || fail "kcat -C alerts"
grep '^[0-9]* healthy ' "$WORK/alerts.txt" | grep -q '"kind":"finding"' &&
    fail "healthy job has a finding alert: $(grep '^[0-9]* healthy ' "$WORK/alerts.txt" | grep '"kind":"finding"' | head -c 600)"
LINE=$(grep '^[0-9]* slow ' "$WORK/alerts.txt" | grep '"kind":"finding"' |
    grep '"rule":"FailSlow"' | head -n 1) ||
    fail "no FailSlow finding alert for the slow job"
AT_MS=${LINE%% *}
DELAY_MS=$((AT_MS - ONSET_US / 1000))
[ "$AT_MS" -lt $((LOOP_END / 1000)) ] ||
    fail "the FailSlow alert came $((AT_MS - LOOP_END / 1000)) ms after training ended: not live"
"$PY" - "$WORK/res/slow.json" "$WORK/res/healthy.json" "$SLOW_RANK" \
    "$SLOW_FROM" "$DELAY_MS" "${LINE#* slow }" <<'PYEOF' || fail "live results"
import json, sys
slow, healthy = (json.load(open(p)) for p in sys.argv[1:3])
rank, onset, delay_ms = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
alert = json.loads(sys.argv[6])
want = "algo-1-%d" % rank
listed = alert["finding"]["nodes"]["listed"]
assert listed == [want], (listed, want)
r = {x["name"]: x for x in slow["rules"]}["FailSlow"]
assert r["status"] == "IssuesFound", r["status"]
ranks = r["report"]["Details"]["ranks"]
named = sorted(k for k, v in ranks.items() if v["verdict"] == "fail-slow")
assert named == [want], named
d = ranks[want]
err = d["onset_step"] - onset
print("live: FailSlow names %s: onset step %d (true %d, error %+d steps), "
      "detected at step %d, alert %.1f s after the first slow step; "
      "before %.4f s, after %.4f s (%.2fx), wasted %.0f %%" % (
          want, d["onset_step"], onset, err, d["detected_step"],
          delay_ms / 1000, d["before_s"], d["after_s"], d["slowdown"],
          100 * d["wasted_fraction"]))
assert abs(err) <= 10, err
assert delay_ms <= 30000, delay_ms
assert 1.1 < d["slowdown"] < 1.35, d["slowdown"]
others = {k: v["verdict"] for k, v in ranks.items() if k != want}
assert all(v in ("none", "waiting") for v in others.values()), others
h = {x["name"]: x for x in healthy["rules"]}["FailSlow"]
assert h["status"] == "NoIssuesFound" and h["violations"] == 0, (
    h["status"], h["report"]["Details"])
assert h["datapoints"] > 900, h["datapoints"]
print("healthy: NoIssuesFound, %d steps tested" % h["datapoints"])
PYEOF
tw_run_stop A || fail "run exit status"
tw_broker_stop || fail "broker stop"
echo "PASS fail_slow"
